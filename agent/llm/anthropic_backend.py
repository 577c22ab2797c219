"""Anthropic Messages API backend (``anthropic.Anthropic().messages.create``)."""

from __future__ import annotations

import json
from typing import Any

import anthropic

from agent.llm.base import (
    DEFAULT_TIMEOUT_S,
    STOP_END,
    STOP_TOOL_USE,
    Completion,
    ImageBlock,
    Message,
    SDKBackend,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
)

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-5-5"
ANTHROPIC_KEY_ENV = "ANTHROPIC_API_KEY"


def _image(block: ImageBlock) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": block.media_type, "data": block.data}}


def _block(block: Any) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        return _image(block)
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if isinstance(block, ThinkingBlock):
        if block.redacted_data is not None:
            return {"type": "redacted_thinking", "data": block.redacted_data}
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if isinstance(block, ToolResultBlock):
        content = [_block(b) for b in block.content] or [{"type": "text", "text": "(no output)"}]
        return {
            "type": "tool_result",
            "tool_use_id": block.tool_use_id,
            "content": content,
            "is_error": block.is_error,
        }
    raise TypeError(f"unsupported content block {type(block).__name__}")


def to_anthropic(messages: list[Message], system: str | None) -> tuple[str | None, list[dict[str, Any]]]:
    """Neutral messages → (system text, Anthropic ``messages``).

    System messages join the system prompt; tool messages become user turns of ``tool_result`` blocks;
    consecutive turns of the same role are merged (the API wants user/assistant alternation).
    """
    system_parts = [system] if system else []
    out: list[dict[str, Any]] = []
    for msg in messages:
        if msg.role == "system":
            system_parts.append(msg.text())
            continue
        role = "user" if msg.role == "tool" else msg.role
        if isinstance(msg.content, str):
            blocks = [{"type": "text", "text": msg.content}] if msg.content else []
        else:
            blocks = [_block(b) for b in msg.content]
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return ("\n\n".join(system_parts) or None), out


CACHE_MIN_CHARS = 4_000
"""below ≈ 1,024 tokens (≈ 4 characters each) Anthropic does not cache a prefix; smaller requests stay unmarked"""
EPHEMERAL = {"type": "ephemeral"}


def cacheable(system_text: str | None, tools: list[dict[str, Any]] | None) -> bool:
    """Whether the request's fixed prefix (tool definitions and system prompt) is long enough to cache."""
    return len(system_text or "") + len(json.dumps(tools or [])) >= CACHE_MIN_CHARS


def mark_cache(kwargs: dict[str, Any]) -> None:
    """Prompt caching: breakpoints after the tool definitions, after the system prompt and after the newest
    message, so each turn of a tool loop re-reads the prefix of the previous one from the cache instead of paying
    for it again (the definitions alone are ≈ 10k tokens in autonomous mode)."""
    if kwargs.get("tools"):
        kwargs["tools"] = [*kwargs["tools"][:-1], {**kwargs["tools"][-1], "cache_control": EPHEMERAL}]
    if kwargs.get("system"):
        kwargs["system"] = [{"type": "text", "text": kwargs["system"], "cache_control": EPHEMERAL}]
    last = kwargs["messages"][-1]
    content = last["content"]
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if content:
        kwargs["messages"] = [*kwargs["messages"][:-1],
                              {**last, "content": [*content[:-1], {**content[-1], "cache_control": EPHEMERAL}]}]


def to_anthropic_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in tools]


def from_anthropic(response: Any) -> Completion:
    texts: list[str] = []
    calls: list[ToolCall] = []
    thinking: list[ThinkingBlock] = []
    for block in response.content:
        if block.type == "thinking":
            thinking.append(ThinkingBlock(thinking=block.thinking, signature=block.signature))
        elif block.type == "redacted_thinking":
            thinking.append(ThinkingBlock(redacted_data=block.data))
        elif block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            args = block.input if isinstance(block.input, dict) else {}
            error = None if isinstance(block.input, dict) else f"tool input is not an object: {block.input!r}"
            calls.append(ToolCall(id=block.id, name=block.name, arguments=args, parse_error=error))
    usage = response.usage
    input_tokens = (
        (usage.input_tokens or 0)
        + (getattr(usage, "cache_creation_input_tokens", None) or 0)
        + (getattr(usage, "cache_read_input_tokens", None) or 0)
    )
    return Completion(
        text="".join(texts),
        tool_calls=calls,
        thinking=thinking,
        usage=Usage(input_tokens=input_tokens, output_tokens=usage.output_tokens or 0),
        stop_reason=response.stop_reason or STOP_END,
        model=response.model or "",
    )


class AnthropicBackend(SDKBackend):
    """Claude through the Anthropic Messages API.

    ``api_key`` defaults to ``$ANTHROPIC_API_KEY``; with a custom ``base_url`` (a proxy or a local
    Anthropic-compatible server) a missing key is replaced by a dummy. Connection errors, timeouts, 429 and
    5xx are retried by the SDK (``max_retries``, exponential backoff); what still fails raises ``LLMError``.

    Current Claude models think adaptively by default (thinking counts against ``max_tokens``) and reject a
    non-default ``temperature`` with HTTP 400; ``extra_body`` passes provider options such as
    ``{"output_config": {"effort": "low"}}`` or ``{"thinking": {"type": "disabled"}}``.
    """

    provider = "anthropic"
    key_env = ANTHROPIC_KEY_ENV
    sdk_error = anthropic.AnthropicError

    def __init__(
        self,
        model: str = DEFAULT_ANTHROPIC_MODEL,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_retries: int = 2,
        extra_body: dict[str, Any] | None = None,
    ):
        super().__init__(model, api_key=api_key, base_url=base_url, timeout_s=timeout_s, max_retries=max_retries,
                         extra_body=extra_body)

    def _make_client(self, key: str, base_url: str | None, timeout_s: float, max_retries: int) -> anthropic.Anthropic:
        return anthropic.Anthropic(api_key=key, base_url=base_url, timeout=timeout_s, max_retries=max_retries)

    def _request(self, messages: list[Message], system: str | None, tools: list[ToolSpec] | None,
                 max_tokens: int, temperature: float | None) -> dict[str, Any]:
        system_text, wire = to_anthropic(messages, system)
        if not wire:
            raise ValueError("complete() needs at least one user message")
        kwargs: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "messages": wire}
        if system_text:
            kwargs["system"] = system_text
        if tools:
            kwargs["tools"] = to_anthropic_tools(tools)
        if cacheable(system_text, kwargs.get("tools")):
            mark_cache(kwargs)
        extra = dict(self.extra_body)
        if temperature is not None:
            extra["temperature"] = temperature  # not a typed SDK argument any more; sent as-is
        if extra:
            kwargs["extra_body"] = extra
        return kwargs

    def _send(self, request: dict[str, Any]) -> Any:
        return self._client.messages.create(**request)

    def _parse(self, response: Any) -> Completion:
        return from_anthropic(response)

    def _add_schema(self, request: dict[str, Any], name: str, description: str, schema: dict[str, Any]) -> None:
        """A forced tool call whose input is the answer."""
        request["tools"] = [{"name": name, "description": description or f"Give the {name}.", "input_schema": schema}]
        request["tool_choice"] = {"type": "tool", "name": name}

    def _parse_structured(self, response: Any, name: str) -> Completion:
        """The forced tool's input becomes ``structured`` (and, as JSON, the text kept in a repair conversation);
        an answer without the tool call stays text, parsed like any other."""
        completion = from_anthropic(response)
        call = next((c for c in completion.tool_calls if c.name == name and c.parse_error is None), None)
        if call is None:
            return completion
        return completion.model_copy(update={"structured": call.arguments, "tool_calls": [],
                                             "text": json.dumps(call.arguments),
                                             "stop_reason": STOP_END if completion.stop_reason == STOP_TOOL_USE
                                             else completion.stop_reason})
