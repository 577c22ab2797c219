"""Access to the top-level `prompts` package, also before it is installed (editable installs made before it
existed do not map it): falls back to loading `prompts/__init__.py` from the repository root."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

try:
    import prompts
except ModuleNotFoundError:  # pragma: no cover - depends on how the project was installed
    _init = Path(__file__).resolve().parents[2] / "prompts" / "__init__.py"
    _spec = importlib.util.spec_from_file_location("prompts", _init, submodule_search_locations=[str(_init.parent)])
    prompts = importlib.util.module_from_spec(_spec)
    sys.modules["prompts"] = prompts
    _spec.loader.exec_module(prompts)

PromptError = prompts.PromptError
load_prompt = prompts.load_prompt
render_prompt = prompts.render_prompt
