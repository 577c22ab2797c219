"""OpenAI chat-completions backend; also any OpenAI-compatible server (vLLM, Ollama, llama.cpp, LM Studio)."""

from __future__ import annotations

import json
import os
from typing import Any

import openai

from agent.llm.base import (
    DEFAULT_TIMEOUT_S,
    STOP_END,
    STOP_MAX_TOKENS,
    STOP_TOOL_USE,
    Completion,
    ImageBlock,
    LLMError,
    Message,
    SDKBackend,
    TextBlock,
    ToolCall,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
)

DEFAULT_OPENAI_MODEL = "gpt-4.1"
OPENAI_KEY_ENV = "OPENAI_API_KEY"
OPENAI_BASE_URL_ENV = "OPENAI_BASE_URL"

_FINISH_TO_STOP = {
    "stop": STOP_END,
    "tool_calls": STOP_TOOL_USE,
    "function_call": STOP_TOOL_USE,
    "length": STOP_MAX_TOKENS,
    "content_filter": "refusal",
}


def _part(block: TextBlock | ImageBlock) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    return {"type": "image_url", "image_url": {"url": block.data_url()}}


def _tool_messages(msg: Message) -> list[dict[str, Any]]:
    """One ``role: tool`` message per result, then one user message carrying their images.

    Chat completions accepts only text in tool messages, so images travel in the user turn that follows.
    """
    out: list[dict[str, Any]] = []
    image_parts: list[dict[str, Any]] = []
    for block in msg.content:
        if not isinstance(block, ToolResultBlock):
            raise TypeError("role='tool' messages hold only ToolResultBlock")
        text = block.text()
        images = block.images()
        if images:
            text = (
                text + "\n" if text else ""
            ) + f"({len(images)} image(s) attached in the next user message)"
        if block.is_error:
            text = f"ERROR: {text}" if text else "ERROR"
        out.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": text or "(no output)"})
        if images:
            image_parts.append(
                {"type": "text", "text": f"Image(s) returned by tool call {block.tool_use_id}:"}
            )
            image_parts.extend(_part(img) for img in images)
    if image_parts:
        out.append({"role": "user", "content": image_parts})
    return out


def to_openai(messages: list[Message], system: str | None) -> list[dict[str, Any]]:
    """Neutral messages → OpenAI chat ``messages``."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for msg in messages:
        if msg.role == "tool":
            out.extend(_tool_messages(msg))
        elif msg.role == "system":
            out.append({"role": "system", "content": msg.text()})
        elif isinstance(msg.content, str):
            out.append({"role": msg.role, "content": msg.content})
        elif msg.role == "user":
            out.append({"role": "user", "content": [_part(b) for b in msg.content]})
        else:
            text = "".join(b.text for b in msg.content if isinstance(b, TextBlock))
            calls = [
                {
                    "id": b.id,
                    "type": "function",
                    "function": {"name": b.name, "arguments": json.dumps(b.input)},
                }
                for b in msg.content
                if isinstance(b, ToolUseBlock)
            ]
            wire: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                wire["tool_calls"] = calls
            out.append(wire)
    return out


def to_openai_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
        }
        for t in tools
    ]


_STRICT_DROPPED = ("default", "minLength", "maxLength", "minItems", "maxItems", "minimum", "maximum",
                   "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "pattern", "format")
"""keywords strict mode may not take; the answer's validation (pydantic) still enforces them"""


def strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """A copy of ``schema`` that OpenAI's strict mode accepts, or None when it cannot be made strict.

    Strict mode wants every object closed (``additionalProperties: false``) with every property required, and
    takes only a subset of keywords. Optional properties become required (the model then states the default
    itself), validation-only keywords are dropped (pydantic checks them after), and open objects (``dict[str, X]``,
    objects without ``properties``) disqualify the schema.
    """

    def fix(node: Any) -> Any:
        if isinstance(node, list):
            return [fix(n) for n in node]
        if not isinstance(node, dict):
            return node
        out = {k: fix(v) for k, v in node.items() if k not in _STRICT_DROPPED}
        if out.get("type") == "object" or "properties" in out:
            if "properties" not in out or out.get("additionalProperties") not in (None, False):
                raise ValueError("open object")
            out["additionalProperties"] = False
            out["required"] = list(out["properties"])
        return out

    try:
        result = fix({k: v for k, v in schema.items()})
    except ValueError:
        return None
    # property names such as "default" sit under "properties", where they are names, not keywords: keep them
    return result if _same_properties(schema, result) else None


def _same_properties(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        if "properties" in a and set(a["properties"]) != set(b.get("properties", {})):
            return False
        return all(_same_properties(v, b.get(k)) for k, v in a.items() if k in b)
    if isinstance(a, list) and isinstance(b, list):
        return all(_same_properties(x, y) for x, y in zip(a, b, strict=False))
    return True


def _parse_arguments(raw: str | None) -> tuple[dict[str, Any], str | None]:
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError as err:
        return {}, f"tool arguments are not valid JSON ({err}): {raw!r}"
    if not isinstance(value, dict):
        return {}, f"tool arguments are not a JSON object: {raw!r}"
    return value, None


def from_openai(response: Any) -> Completion:
    if not response.choices:
        raise LLMError(f"openai-compatible server returned no choices (model {response.model!r})")
    choice = response.choices[0]
    message = choice.message
    calls: list[ToolCall] = []
    for call in message.tool_calls or []:
        if getattr(call, "type", "function") != "function":
            continue
        args, error = _parse_arguments(call.function.arguments)
        calls.append(ToolCall(id=call.id, name=call.function.name, arguments=args, parse_error=error))
    usage = response.usage
    finish = choice.finish_reason or "stop"
    return Completion(
        text=message.content or "",
        tool_calls=calls,
        usage=Usage(
            input_tokens=(usage.prompt_tokens or 0) if usage else 0,
            output_tokens=(usage.completion_tokens or 0) if usage else 0,
        ),
        stop_reason=_FINISH_TO_STOP.get(finish, finish),
        model=response.model or "",
    )


class OpenAIBackend(SDKBackend):
    """OpenAI chat completions with function tools, or any OpenAI-compatible ``base_url``.

    ``api_key`` defaults to ``$OPENAI_API_KEY`` and ``base_url`` to ``$OPENAI_BASE_URL``; with a custom ``base_url`` (e.g. ``http://localhost:8000/v1``
    for vLLM, ``http://localhost:11434/v1`` for Ollama) a missing key is replaced by a dummy. The output cap is
    sent as ``max_completion_tokens`` to OpenAI and as ``max_tokens`` to custom URLs (what most local servers
    read); override with ``token_limit_field``. ``extra_body`` passes server-specific options (e.g.
    ``{"reasoning_effort": "low"}``).
    """

    provider = "openai"
    key_env = OPENAI_KEY_ENV
    sdk_error = openai.OpenAIError

    def __init__(
        self,
        model: str = DEFAULT_OPENAI_MODEL,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_retries: int = 2,
        token_limit_field: str | None = None,
        extra_body: dict[str, Any] | None = None,
    ):
        if token_limit_field not in (None, "max_tokens", "max_completion_tokens"):
            raise ValueError(
                f"token_limit_field must be 'max_tokens' or 'max_completion_tokens', got {token_limit_field!r}"
            )
        base_url = base_url or os.environ.get(OPENAI_BASE_URL_ENV) or None
        super().__init__(model, api_key=api_key, base_url=base_url, timeout_s=timeout_s, max_retries=max_retries,
                         extra_body=extra_body)
        self.token_limit_field = token_limit_field or ("max_tokens" if base_url else "max_completion_tokens")

    def _make_client(self, key: str, base_url: str | None, timeout_s: float, max_retries: int) -> openai.OpenAI:
        return openai.OpenAI(api_key=key, base_url=base_url, timeout=timeout_s, max_retries=max_retries)

    def _request(self, messages: list[Message], system: str | None, tools: list[ToolSpec] | None,
                 max_tokens: int, temperature: float | None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.model, "messages": to_openai(messages, system),
                                  self.token_limit_field: max_tokens}
        if tools:
            kwargs["tools"] = to_openai_tools(tools)
        if temperature is not None:
            kwargs["temperature"] = temperature
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        return kwargs

    def _send(self, request: dict[str, Any]) -> Any:
        return self._client.chat.completions.create(**request)

    def _parse(self, response: Any) -> Completion:
        return from_openai(response)

    def _add_schema(self, request: dict[str, Any], name: str, description: str, schema: dict[str, Any]) -> None:
        """``response_format`` json_schema, strict when the schema can be made strict (see ``strict_schema``)."""
        strict = strict_schema(schema)
        spec: dict[str, Any] = {"name": name, "schema": strict if strict is not None else schema,
                                "strict": strict is not None}
        if description:
            spec["description"] = description
        request["response_format"] = {"type": "json_schema", "json_schema": spec}
