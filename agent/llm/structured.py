"""Validated LLM output: JSON matching a pydantic schema, or Python code passing a check, with repair.

Both helpers send the request, validate the answer, and on failure append the answer and a user message
naming what was wrong, up to ``max_attempts`` requests; then they raise ``LLMOutputError``. Every call's
usage goes to the ledger under the given role.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar

from pydantic import BaseModel, ValidationError

from agent.llm.base import (
    STOP_MAX_TOKENS,
    Completion,
    ImageBlock,
    LLMBackend,
    LLMOutputError,
    Message,
    TextBlock,
    ToolSpec,
)
from agent.llm.ledger import TokenLedger

T = TypeVar("T", bound=BaseModel)
Prompt = str | Sequence[str | TextBlock | ImageBlock]
"""a prompt is text, or text and images (e.g. rollout keyframes for the critic)"""

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_MAX_LISTED_ERRORS = 10
DEFAULT_MAX_TOKENS = 16000
"""output cap for the validated helpers; generous because thinking models count reasoning against it"""
_TRUNCATED_NOTE = " (your answer was cut off at the output token limit: keep it shorter)"


def complete_counted(
    backend: LLMBackend,
    messages: list[Message],
    *,
    role: str,
    ledger: TokenLedger | None,
    system: str | None = None,
    tools: list[ToolSpec] | None = None,
    max_tokens: int = 4096,
    temperature: float | None = None,
) -> Completion:
    """``backend.complete`` plus recording its usage in ``ledger`` under ``role``."""
    completion = backend.complete(
        messages, system=system, tools=tools, max_tokens=max_tokens, temperature=temperature
    )
    if ledger is not None:
        ledger.record(role, completion.model or backend.model, completion.usage)
    return completion


def complete_json_counted(
    backend: LLMBackend,
    messages: list[Message],
    *,
    schema: type[BaseModel],
    role: str,
    ledger: TokenLedger | None,
    system: str | None = None,
    max_tokens: int = 4096,
    temperature: float | None = None,
) -> Completion:
    """A structured-output completion (``backend.complete_json``) when the backend offers one, else a plain
    ``backend.complete``; its usage is recorded in ``ledger`` under ``role`` either way."""
    complete_json = getattr(backend, "complete_json", None)
    if complete_json is None:
        return complete_counted(backend, messages, role=role, ledger=ledger, system=system, max_tokens=max_tokens,
                                temperature=temperature)
    completion = complete_json(messages, schema=schema.model_json_schema(), name=schema_name(schema),
                               description=(schema.__doc__ or "").strip()[:1000], system=system,
                               max_tokens=max_tokens, temperature=temperature)
    if ledger is not None:
        ledger.record(role, completion.model or backend.model, completion.usage)
    return completion


def schema_name(schema: type[BaseModel]) -> str:
    """The schema's name as a tool / ``json_schema`` name (``^[a-zA-Z0-9_-]{1,64}$``)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", schema.__name__)[:64] or "answer"


def _user_message(prompt: Prompt, suffix: str) -> Message:
    parts = [prompt] if isinstance(prompt, str) else list(prompt)
    return Message.user(*parts, suffix)


class OutputInvalid(ValueError):
    """An answer failed validation; the message is what the model is told."""


# -- JSON ----------------------------------------------------------------------------------------


def _brace_blocks(text: str) -> list[str]:
    """Top-level balanced ``{...}`` spans, skipping braces inside double-quoted strings."""
    blocks, depth, start, in_string, escaped = [], 0, 0, False, False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"' and depth > 0:
            in_string = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                blocks.append(text[start : i + 1])
    return blocks


def extract_json(text: str) -> Any:
    """The JSON value in an answer: the whole answer, a ```json fence, or the first ``{...}`` block."""
    stripped = text.strip()
    if not stripped:
        raise OutputInvalid("the answer is empty")
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        pass
    fences = [body.strip() for lang, body in _FENCE.findall(text) if lang.lower() in ("", "json")]
    first_error: json.JSONDecodeError | None = None
    for candidate in fences + _brace_blocks(text):
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError as err:
            first_error = first_error or err
            continue
        if isinstance(value, dict) or candidate in fences:
            return value
    if first_error is None and "{" in text:
        try:
            json.loads(text[text.index("{") :])
        except json.JSONDecodeError as err:
            first_error = err
    if first_error is not None:
        raise OutputInvalid(f"the answer is not valid JSON: {first_error}")
    raise OutputInvalid("no JSON object found in the answer")


def describe_validation_error(err: ValidationError) -> str:
    """``field 'phase': Input should be 'approach', 'grasp' ... (got 'grab'); field 'cause': Field required``"""
    parts = []
    for item in err.errors()[:_MAX_LISTED_ERRORS]:
        loc = ".".join(str(p) for p in item["loc"]) or "(root)"
        text = f"field '{loc}': {item['msg']}"
        if item["type"] != "missing" and item["loc"]:
            shown = repr(item.get("input"))
            text += f" (got {shown if len(shown) <= 80 else shown[:77] + '...'})"
        parts.append(text)
    if err.error_count() > _MAX_LISTED_ERRORS:
        parts.append(f"and {err.error_count() - _MAX_LISTED_ERRORS} more")
    return "; ".join(parts)


def parse_structured(text: str, schema: type[T]) -> T:
    """Extract and validate; raises ``OutputInvalid`` with a message meant for the model."""
    value = extract_json(text)
    try:
        return schema.model_validate(value)
    except ValidationError as err:
        raise OutputInvalid(describe_validation_error(err)) from err


def schema_instructions(schema: type[BaseModel]) -> str:
    return (
        "Answer with only a JSON object that matches this JSON schema (no prose before or after it):\n"
        f"```json\n{json.dumps(schema.model_json_schema(), indent=1)}\n```"
    )


class _Retry(NamedTuple):
    """An answer that did not pass: what ``LLMOutputError`` reports if no attempt is left, and the user message
    that asks for a corrected answer."""

    error: str
    repair: str


def _ask_with_repair(
    backend: LLMBackend,
    *,
    system: str | None,
    prompt: Prompt,
    suffix: str,
    judge: Callable[[Completion], Any],
    role: str,
    ledger: TokenLedger | None,
    max_attempts: int,
    max_tokens: int,
    temperature: float | None,
    schema: type[BaseModel] | None = None,
) -> Any:
    """The repair loop of the validated helpers: ``judge`` turns each answer into the result or a ``_Retry``;
    after a ``_Retry`` the answer and its repair message join the conversation, up to ``max_attempts`` requests.
    With a ``schema`` each request asks for structured output (``complete_json_counted``)."""
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be ≥ 1, got {max_attempts}")
    messages = [_user_message(prompt, suffix)]
    error, answer = "", ""
    for attempt in range(1, max_attempts + 1):
        if schema is not None:
            completion = complete_json_counted(backend, messages, schema=schema, role=role, ledger=ledger,
                                               system=system, max_tokens=max_tokens, temperature=temperature)
        else:
            completion = complete_counted(backend, messages, role=role, ledger=ledger, system=system,
                                          max_tokens=max_tokens, temperature=temperature)
        answer = completion.text
        verdict = judge(completion)
        if not isinstance(verdict, _Retry):
            return verdict
        error = verdict.error
        if attempt < max_attempts:
            messages.append(Message.assistant(answer or "(empty answer)"))
            messages.append(Message.user(verdict.repair))
    raise LLMOutputError(role, max_attempts, error, answer)


def ask_structured(
    backend: LLMBackend,
    *,
    system: str | None,
    prompt: Prompt,
    schema: type[T],
    role: str,
    ledger: TokenLedger | None,
    max_attempts: int = 3,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    temperature: float | None = None,
) -> T:
    """Ask for a JSON answer that validates against ``schema``; repair up to ``max_attempts`` requests.

    The request uses the backend's structured output where it has one (Anthropic: a forced tool call; OpenAI:
    ``response_format`` json_schema); an OpenAI-compatible server that rejects it gets the text request. Either
    way the answer is validated against ``schema`` and a failing one gets the repair prompt. The schema is stated
    in the prompt too, for the text fallback."""

    def judge(completion: Completion) -> T | _Retry:
        try:
            if completion.structured is not None:
                try:
                    return schema.model_validate(completion.structured)
                except ValidationError as err:
                    raise OutputInvalid(describe_validation_error(err)) from err
            return parse_structured(completion.text, schema)
        except OutputInvalid as err:
            error = str(err)
        if completion.stop_reason == STOP_MAX_TOKENS:
            error += _TRUNCATED_NOTE
        return _Retry(error, f"your answer did not validate: {error} — answer again with only the JSON")

    return _ask_with_repair(backend, system=system, prompt=prompt, suffix=schema_instructions(schema), judge=judge,
                            role=role, ledger=ledger, max_attempts=max_attempts, max_tokens=max_tokens,
                            temperature=temperature, schema=schema)


# -- code ----------------------------------------------------------------------------------------


def extract_code(text: str) -> str:
    """The first ```python fence, else the first untagged fence, else the whole answer."""
    fences = _FENCE.findall(text)
    for wanted in (("python", "py", "python3"), ("",)):
        for lang, body in fences:
            if lang.lower() in wanted:
                return body.strip("\n")
    return text.strip()


def code_errors(code: str, check: Callable[[str], list[str]] | None) -> list[str]:
    """Syntax errors first; when the code compiles, whatever ``check`` reports."""
    if not code.strip():
        return ["the answer contains no code"]
    try:
        compile(code, "<program>", "exec")
    except SyntaxError as err:
        return [f"SyntaxError at line {err.lineno}: {err.msg}"]
    return list(check(code)) if check is not None else []


def ask_code(
    backend: LLMBackend,
    *,
    system: str | None,
    prompt: Prompt,
    role: str,
    ledger: TokenLedger | None,
    check: Callable[[str], list[str]] | None = None,
    max_attempts: int = 3,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    temperature: float | None = None,
) -> str:
    """Ask for a Python program; feed syntax and ``check`` errors back for repair; return the source."""

    def judge(completion: Completion) -> str | _Retry:
        code = extract_code(completion.text)
        errors = code_errors(code, check)
        if not errors:
            return code
        if completion.stop_reason == STOP_MAX_TOKENS:
            errors.append(_TRUNCATED_NOTE.strip(" ()"))
        listed = "\n".join(f"- {e}" for e in errors)
        return _Retry("; ".join(errors), f"your code has errors:\n{listed}\n"
                      "fix them and answer again with the complete program in one ```python code block")

    return _ask_with_repair(backend, system=system, prompt=prompt,
                            suffix="Answer with the complete program in one ```python code block.", judge=judge,
                            role=role, ledger=ledger, max_attempts=max_attempts, max_tokens=max_tokens,
                            temperature=temperature)
