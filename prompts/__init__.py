"""Prompt files for the agent roles, loaded by name: `prompts/engine.md`, `prompts/critic.md`, `prompts/compiler.md`.

Placeholders are written `{{name}}`; `render_prompt(name, **values)` fills them and rejects a missing or an
unknown value, so a broken prompt fails when it is first used, not halfway through a run.
"""

from __future__ import annotations

import re
from importlib import resources

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


class PromptError(LookupError):
    """A prompt file is missing, or a placeholder has no value (or a value has no placeholder)."""


def available() -> list[str]:
    return sorted(p.name[:-3] for p in resources.files(__package__).iterdir() if p.name.endswith(".md"))


def load_prompt(name: str) -> str:
    """The raw text of `prompts/<name>.md`."""
    path = resources.files(__package__) / f"{name}.md"
    if not path.is_file():
        raise PromptError(f"no prompt named {name!r}; available prompts: {', '.join(available()) or 'none'}")
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
