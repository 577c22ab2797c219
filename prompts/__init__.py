"""Prompt files for the agent roles, loaded by name: `prompts/engine.md`, `prompts/critic.md`, `prompts/compiler.md`.

Placeholders are written `{{name}}`; `render_prompt(name, **values)` fills them and rejects a missing or an
unknown value, so a broken prompt fails when it is first used, not halfway through a run.

This is the one prompt loader: the agent's roles render prompts with it and the MCP servers serve the same files
(`servers.common.load_prompts`), each server the prompt of its part (sim: engine, verifier: compiler, memory:
critic, trainer: round), described by `ABOUT` with its arguments described by `ARGUMENTS`. `directory` (tests)
reads another folder of `*.md` files instead of this package.
"""

from __future__ import annotations

import re
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


ABOUT = {
    "engine": "System prompt of the data engine: write scene programs with the simulator SDK",
    "critic": "System prompt of the failure critic: explain a failed rollout as one diagnosis (factor, phase, "
              "cause)",
    "compiler": "System prompt of the Text2potential compiler: write a potential program for a validated "
                "diagnosis",
    "round": "Run CoDA's co-evolution rounds yourself through the four servers' tools",
}
"""what each prompt is for (the MCP prompt description)"""

ARGUMENTS = {
    "categories": "the asset categories a program may use, '; '-separated, each with its kinds, split and mass "
                  "range",
    "examples": "example scene programs to imitate, separated by blank lines",
    "factors": "the diagnosis factors δ to choose from, comma-separated, e.g. 'task, spatial, attribute, "
               "execution'",
    "phases": "the trajectory phases to choose from, comma-separated, e.g. 'approach, grasp, lift'",
    "helpers": "the helpers a potential program may call, one '- h.name(signature): what it returns' line each",
    "tools": "the learning tools a program may route to, comma-separated, e.g. 'bc, awr_shaped'",
    "rounds": "number of co-evolution rounds to run, e.g. 2",
    "families": "task families to work on, comma-separated: pick_place, stack, articulated, prep",
    "max_turns": "most tool-using turns for the whole run, e.g. 60",
    "demos_per_family": "planner demonstrations per family for the base policy, e.g. 200",
    "sft_updates": "behaviour-cloning updates of the base policy, e.g. 1500",
    "budget": "scenes to generate per round (the generation budget), e.g. 64",
    "max_diagnoses": "most failed rollouts to diagnose per round, e.g. 8",
    "external": "an extra round step for external target tasks (evaluated only, never trained on), as `coda run "
                "--target external:...` writes it; empty for none",
    "context": "text appended after the prompt, e.g. the scene or the task at hand",
}
"""what to pass for each placeholder of the prompts (the MCP prompt argument descriptions)"""


def argument_help(name: str, default: bool = False) -> str:
    """The description of a prompt argument; `default`: the server fills it in when it is left out."""
    text = ARGUMENTS.get(name, f"text that replaces {{{{{name}}}}} in the prompt")
    return f"{text} (default: the server's own)" if default else text


class PromptError(LookupError):
    """A prompt file is missing, or a placeholder has no value (or a value has no placeholder)."""


def _root(directory: Path | str | None) -> Traversable:
    return resources.files(__package__) if directory is None else Path(directory)


def available(directory: Path | str | None = None) -> list[str]:
    """Names of the prompts (files `<name>.md`), sorted; none when `directory` does not exist."""
    root = _root(directory)
    if not root.is_dir():
        return []
    return sorted(p.name[:-3] for p in root.iterdir() if p.name.endswith(".md") and p.is_file())


def load_prompt(name: str, directory: Path | str | None = None) -> str:
    """The raw text of `prompts/<name>.md`."""
    path = _root(directory) / f"{name}.md"
    if not path.is_file():
        names = ", ".join(available(directory)) or "none"
        raise PromptError(f"no prompt named {name!r}; available prompts: {names}")
    return path.read_text(encoding="utf-8")


def placeholders(text: str) -> set[str]:
    return set(PLACEHOLDER.findall(text))


def render_prompt(name: str, **values: object) -> str:
    """`load_prompt(name)` with every `{{key}}` replaced by `str(values[key])`."""
    text = load_prompt(name)
    wanted = placeholders(text)
    missing, unknown = sorted(wanted - set(values)), sorted(set(values) - wanted)
    if missing:
        raise PromptError(f"prompt {name!r} needs value(s) for {missing}; placeholders: {sorted(wanted)}")
    if unknown:
        raise PromptError(f"prompt {name!r} has no placeholder(s) {unknown}; placeholders: {sorted(wanted)}")
    return PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), text)
