"""LLM backends behind one small protocol, validated structured output, and token/cost accounting.

Against a local OpenAI-compatible server (vLLM, Ollama; no key needed)::

    backend = make_backend("openai", base_url="http://localhost:8000/v1", model="Qwen/Qwen2.5-7B-Instruct")
    ledger = TokenLedger()
    diagnosis = ask_structured(backend, system=..., prompt=..., schema=Diagnosis, role="critic", ledger=ledger)
"""

from __future__ import annotations

from typing import Any

from agent.llm.anthropic_backend import ANTHROPIC_KEY_ENV, DEFAULT_ANTHROPIC_MODEL, AnthropicBackend
from agent.llm.base import (
    Completion,
    ContentBlock,
    ImageBlock,
    LLMBackend,
    LLMError,
    LLMOutputError,
    Message,
    MissingAPIKeyError,
    TextBlock,
    ToolCall,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
)
from agent.llm.ledger import (
    MODEL_PRICES_USD_PER_1M,
    ROLE_COMPILER,
    ROLE_CRITIC,
    ROLE_ENGINE,
    ROLE_ROUND,
    TokenLedger,
    price_for,
)
from agent.llm.openai_backend import DEFAULT_OPENAI_MODEL, OPENAI_KEY_ENV, OpenAIBackend
from agent.llm.structured import (
    ask_code,
    ask_structured,
    complete_counted,
    complete_json_counted,
    extract_code,
    extract_json,
)

BACKENDS = ("anthropic", "openai")
DEFAULT_MODELS = {"anthropic": DEFAULT_ANTHROPIC_MODEL, "openai": DEFAULT_OPENAI_MODEL}


def make_backend(
    name: str,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    **opts: Any,
) -> LLMBackend:
    """Build an LLM backend by name: ``"anthropic"`` or ``"openai"`` (incl. OpenAI-compatible ``base_url``).

    ``opts`` go to the backend (``timeout_s``, ``max_retries``; ``token_limit_field`` for openai). Raises
    ``MissingAPIKeyError`` when no key is given or set in the environment (custom base URLs accept none).
    """
    if name == "anthropic":
        return AnthropicBackend(model or DEFAULT_ANTHROPIC_MODEL, api_key=api_key, base_url=base_url, **opts)
    if name == "openai":
        return OpenAIBackend(model or DEFAULT_OPENAI_MODEL, api_key=api_key, base_url=base_url, **opts)
    if name == "offline":
        raise ValueError("the offline backend has no LLM; build the roles' offline implementations instead")
    raise ValueError(f"unknown LLM backend {name!r}; valid backends: {', '.join(BACKENDS)} (or offline)")


__all__ = [
    "ANTHROPIC_KEY_ENV",
    "BACKENDS",
    "DEFAULT_ANTHROPIC_MODEL",
    "DEFAULT_MODELS",
    "DEFAULT_OPENAI_MODEL",
    "MODEL_PRICES_USD_PER_1M",
    "OPENAI_KEY_ENV",
    "ROLE_COMPILER",
    "ROLE_CRITIC",
    "ROLE_ENGINE",
    "ROLE_ROUND",
    "AnthropicBackend",
    "Completion",
    "ContentBlock",
    "ImageBlock",
    "LLMBackend",
    "LLMError",
    "LLMOutputError",
    "Message",
    "MissingAPIKeyError",
    "OpenAIBackend",
    "TextBlock",
    "TokenLedger",
    "ToolCall",
    "ToolResultBlock",
    "ToolSpec",
    "ToolUseBlock",
    "Usage",
    "ask_code",
    "ask_structured",
    "complete_counted",
    "complete_json_counted",
    "extract_code",
    "extract_json",
    "make_backend",
    "price_for",
]
