"""Provider-neutral message, tool and completion types, the ``LLMBackend`` protocol, the errors, and
``SDKBackend``, the part the provider backends share.

A conversation is a list of ``Message``. Content is a string or a list of blocks (text, image, tool_use,
tool_result); backends translate it to and from their provider's wire format. Tool results go in a
``role="tool"`` message holding ``ToolResultBlock``s (Anthropic sends them as a user turn, OpenAI as
``role: tool`` messages).
"""

from __future__ import annotations

import base64
import os
from abc import ABC, abstractmethod
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field, model_validator

Role = Literal["system", "user", "assistant", "tool"]
ImageMediaType = Literal["image/png", "image/jpeg"]

# Normalised stop reasons (Anthropic's vocabulary; OpenAI's finish_reason is mapped onto it).
STOP_END = "end_turn"
STOP_TOOL_USE = "tool_use"
STOP_MAX_TOKENS = "max_tokens"


class TextBlock(BaseModel):
    type: Literal["text"] = "text"
    text: str


class ImageBlock(BaseModel):
    type: Literal["image"] = "image"
    data: str
    """base64-encoded PNG or JPEG bytes"""
    media_type: ImageMediaType = "image/png"

    @classmethod
    def from_bytes(cls, data: bytes, media_type: ImageMediaType | None = None) -> ImageBlock:
        """Wrap raw PNG/JPEG bytes; the media type is sniffed from the header when not given."""
        if media_type is None:
            if data.startswith(b"\x89PNG\r\n\x1a\n"):
                media_type = "image/png"
            elif data.startswith(b"\xff\xd8\xff"):
                media_type = "image/jpeg"
            else:
                raise ValueError("image bytes are neither PNG nor JPEG; pass media_type or convert the image")
        return cls(data=base64.b64encode(data).decode("ascii"), media_type=media_type)

    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.data}"


class ToolUseBlock(BaseModel):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


ResultContent = Annotated[TextBlock | ImageBlock, Field(discriminator="type")]


class ToolResultBlock(BaseModel):
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: list[ResultContent] = Field(default_factory=list)
    is_error: bool = False

    def text(self) -> str:
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))

    def images(self) -> list[ImageBlock]:
        return [b for b in self.content if isinstance(b, ImageBlock)]


class ThinkingBlock(BaseModel):
    """A reasoning block from a thinking model (Anthropic). Kept so tool loops can send it back unchanged,
    which the API requires; other providers drop it."""

    type: Literal["thinking"] = "thinking"
    thinking: str = ""
    signature: str = ""
    redacted_data: str | None = None
    """set for a ``redacted_thinking`` block (its opaque data)"""


ContentBlock = Annotated[
    TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock, Field(discriminator="type")
]


class Message(BaseModel):
    role: Role
    content: str | list[ContentBlock]

    @model_validator(mode="after")
    def _check_blocks(self) -> Message:
        blocks = [] if isinstance(self.content, str) else self.content
        kinds = {b.type for b in blocks}
        if self.role == "tool" and (isinstance(self.content, str) or kinds - {"tool_result"}):
            raise ValueError("a role='tool' message holds only tool_result blocks (use Message.tool_results)")
        if "tool_result" in kinds and self.role != "tool":
            raise ValueError(f"tool_result blocks belong in a role='tool' message, not role={self.role!r}")
        for kind in ("tool_use", "thinking"):
            if kind in kinds and self.role != "assistant":
                raise ValueError(f"{kind} blocks belong in an assistant message, not role={self.role!r}")
        if self.role == "system" and kinds - {"text"}:
            raise ValueError("a system message holds only text")
        return self

    @classmethod
    def user(cls, *parts: str | TextBlock | ImageBlock) -> Message:
        """A user turn from strings and image blocks, e.g. ``Message.user("what failed?", keyframe)``."""
        if len(parts) == 1 and isinstance(parts[0], str):
            return cls(role="user", content=parts[0])
        return cls(role="user", content=[TextBlock(text=p) if isinstance(p, str) else p for p in parts])

    @classmethod
    def assistant(cls, text: str) -> Message:
        return cls(role="assistant", content=text)

    @classmethod
    def tool_results(cls, *results: ToolResultBlock) -> Message:
        return cls(role="tool", content=list(results))

    def text(self) -> str:
        """The message's text blocks joined (images and tool blocks skipped)."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))


class ToolSpec(BaseModel):
    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    parse_error: str | None = None
    """set when the provider sent arguments that are not a JSON object (arguments is then empty)"""


class Completion(BaseModel):
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    thinking: list[ThinkingBlock] = Field(default_factory=list)
    """reasoning blocks (Anthropic thinking models); sent back by ``to_message``"""
    usage: Usage = Field(default_factory=Usage)
    stop_reason: str = STOP_END
    """end_turn | tool_use | max_tokens | stop_sequence | refusal | the provider's raw value"""
    model: str = ""
    structured: dict[str, Any] | None = None
    """the JSON object of a structured answer read from a forced tool call (Anthropic); None when the answer is
    text (OpenAI's ``response_format`` answers arrive as JSON text)"""

    def to_message(self) -> Message:
        """The assistant turn to append to the conversation before sending tool results back."""
        blocks: list[ContentBlock] = list(self.thinking)
        if self.text:
            blocks.append(TextBlock(text=self.text))
        blocks.extend(ToolUseBlock(id=c.id, name=c.name, input=c.arguments) for c in self.tool_calls)
        if not blocks:
            return Message(role="assistant", content="")
        return Message(role="assistant", content=blocks)


@runtime_checkable
class LLMBackend(Protocol):
    """What every LLM backend offers: one blocking chat completion call."""

    provider: str
    model: str

    def complete(
        self,
        messages: list[Message],
        *,
        system: str | None = None,
        tools: list[ToolSpec] | None = None,
        max_tokens: int = 4096,
        temperature: float | None = None,
    ) -> Completion: ...


class LLMError(RuntimeError):
    """A provider call failed after the SDK's own retries (connection, timeout, rate limit, 5xx, 4xx)."""


class MissingAPIKeyError(LLMError):
    """No API key was given or found in the environment."""


class LLMOutputError(LLMError):
    """The model's answers never passed validation within the attempt limit."""

    def __init__(self, role: str, attempts: int, last_error: str, last_answer: str = ""):
        self.role = role
        self.attempts = attempts
        self.last_error = last_error
        self.last_answer = last_answer
        super().__init__(
            f"{role}: the model's answer did not validate after {attempts} attempt(s); last error: {last_error}"
        )


LOCAL_DUMMY_KEY = "not-needed"
"""sent as the API key to a custom base URL when none is set (local servers usually ignore it)"""

DEFAULT_TIMEOUT_S = 300.0
STRUCTURED_REJECTED = (400, 422)
"""HTTP statuses that mean the server does not take a structured-output request"""


class SDKBackend(ABC):
    """What the provider backends share: options checked, the API key found, the SDK client made, and a
    ``complete`` that builds the provider's request, sends it and turns SDK errors into ``LLMError``.

    A backend names its ``provider``, its key's environment variable (``key_env``) and its SDK's base error
    (``sdk_error``), and implements ``_make_client`` (the SDK client), ``_request`` (neutral messages →
    the create call's keyword arguments), ``_send`` (the SDK call) and ``_parse`` (its response → ``Completion``).
    """

    provider: str
    key_env: str
    sdk_error: type[Exception]

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None,
        timeout_s: float,
        max_retries: int,
        extra_body: dict[str, Any] | None,
    ):
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be ≥ 0, got {max_retries}")
        key = api_key or os.environ.get(self.key_env) or (LOCAL_DUMMY_KEY if base_url else None)
        if not key:
            raise MissingAPIKeyError(
                f"no API key for the {self.provider} backend: set {self.key_env} in the environment "
                "(or api_key= in Python); use --backend offline to run without a key"
            )
        self.model = model
        self.base_url = base_url
        self.extra_body = dict(extra_body or {})
        self._client = self._make_client(key, base_url, timeout_s, max_retries)

    @abstractmethod
    def _make_client(self, key: str, base_url: str | None, timeout_s: float, max_retries: int) -> Any: ...

    @abstractmethod
    def _request(
        self,
        messages: list[Message],
        system: str | None,
        tools: list[ToolSpec] | None,
        max_tokens: int,
        temperature: float | None,
    ) -> dict[str, Any]: ...

    @abstractmethod
    def _send(self, request: dict[str, Any]) -> Any: ...

    @abstractmethod
    def _add_schema(self, request: dict[str, Any], name: str, description: str, schema: dict[str, Any]) -> None:
        """Ask for a JSON answer matching ``schema`` in the provider's own way (tool use, ``response_format``)."""

    def _parse_structured(self, response: Any, name: str) -> Completion:
        return self._parse(response)

    structured_output: bool = True
    """False once the server rejected a structured-output request; ``complete_json`` then sends plain text"""

    def complete_json(
        self,
        messages: list[Message],
        *,
        schema: dict[str, Any],
        name: str = "answer",
        description: str = "",
        system: str | None = None,
        max_tokens: int = 4096,
        temperature: float | None = None,
    ) -> Completion:
        """A completion constrained to the JSON ``schema`` by the provider's structured output. A server that
        rejects the request (HTTP 400/422, e.g. an OpenAI-compatible server without ``response_format``) is
        remembered and this call, like later ones, falls back to a plain ``complete`` (the caller's prompt must
        then state the schema)."""
        if not self.structured_output:
            return self.complete(messages, system=system, max_tokens=max_tokens, temperature=temperature)
        request = self._request(normalize_messages(messages), system, None, max_tokens, temperature)
        self._add_schema(request, name, description, schema)
        try:
            response = self._send(request)
        except self.sdk_error as err:
            if getattr(err, "status_code", None) in STRUCTURED_REJECTED:
                self.structured_output = False
                return self.complete(messages, system=system, max_tokens=max_tokens, temperature=temperature)
            raise LLMError(self._describe_error(err)) from err
        return self._parse_structured(response, name)

    @abstractmethod
    def _parse(self, response: Any) -> Completion: ...

    def complete(
        self,
        messages: list[Message],
        *,
        system: str | None = None,
        tools: list[ToolSpec] | None = None,
        max_tokens: int = 4096,
        temperature: float | None = None,
    ) -> Completion:
        request = self._request(normalize_messages(messages), system, tools, max_tokens, temperature)
        try:
            response = self._send(request)
        except self.sdk_error as err:
            raise LLMError(self._describe_error(err)) from err
        return self._parse(response)

    def _describe_error(self, err: Exception) -> str:
        status = getattr(err, "status_code", None)
        what = f"HTTP {status} {type(err).__name__}" if status else type(err).__name__
        url = str(self._client.base_url)
        return f"{self.provider} request failed (model {self.model!r} at {url}): {what}: {err}"


def normalize_messages(messages: list[Message | dict[str, Any]]) -> list[Message]:
    """Accept ``Message`` objects or plain dicts of the same shape."""
    return [m if isinstance(m, Message) else Message.model_validate(m) for m in messages]
