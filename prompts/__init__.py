"""Prompt files for the agent roles, loaded by name: `prompts/engine.md`, `prompts/critic.md`, `prompts/compiler.md`.

Placeholders are written `{{name}}`; `render_prompt(name, **values)` fills them and rejects a missing or an
unknown value, so a broken prompt fails when it is first used, not halfway through a run.

This is the one prompt loader: the agent's roles render prompts with it and the MCP servers serve the same files
(`servers.common.load_prompts`). `directory` (tests) reads another folder of `*.md` files instead of this package.
"""

from __future__ import annotations

import re
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


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
