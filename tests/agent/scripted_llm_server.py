"""A local HTTP server that answers LLM API calls from a queue of scripted responses.

It speaks both wire formats, so the real ``openai`` and ``anthropic`` client libraries can be tested with
no network:

- ``POST /v1/chat/completions`` (OpenAI chat completions, function tool calls)
- ``POST /v1/messages`` (Anthropic messages, ``tool_use`` blocks)

Each request pops the next scripted response and renders it in the format of the endpoint it arrived on;
every request body is recorded. Usage::

    with ScriptedLLMServer([reply('{"a": 1}'), tool_call("render", {"view": "top"})]) as server:
        client = openai.OpenAI(base_url=server.openai_url, api_key="x")
        ...
        assert server.requests[0].body["messages"][0]["role"] == "system"

When the queue runs dry the server answers HTTP 500 with ``x-should-retry: false`` and notes the request in
``server.unexpected``.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANTHROPIC_PATH = "/v1/messages"
OPENAI_PATH = "/v1/chat/completions"

_ids = itertools.count(1)


@dataclass
class ScriptedToolCall:
    name: str
    arguments: dict[str, Any]
    id: str = ""


@dataclass
class ScriptedResponse:
    """One scripted answer, rendered in whichever wire format the request used."""

    text: str = ""
    tool_calls: list[ScriptedToolCall] = field(default_factory=list)
    input_tokens: int = 11
    output_tokens: int = 7
    model: str | None = None
    """model name reported back; None echoes the requested model"""
    status: int = 200
    """HTTP status; anything but 200 sends an error body in the provider's format"""
    raw: dict[str, Any] | None = None
    """sent verbatim as the JSON body instead of rendering (for provider-specific cases)"""


def reply(
    text: str, *, input_tokens: int = 11, output_tokens: int = 7, model: str | None = None
) -> ScriptedResponse:
    """A plain text answer."""
    return ScriptedResponse(text=text, input_tokens=input_tokens, output_tokens=output_tokens, model=model)


def tool_call(
    name: str,
    arguments: dict[str, Any],
    *,
    call_id: str | None = None,
    text: str = "",
    input_tokens: int = 11,
    output_tokens: int = 7,
) -> ScriptedResponse:
    """An answer that asks for one tool call (optionally with some text before it)."""
    call = ScriptedToolCall(name=name, arguments=arguments, id=call_id or f"call_{next(_ids)}")
    return ScriptedResponse(
        text=text, tool_calls=[call], input_tokens=input_tokens, output_tokens=output_tokens
    )


def http_error(status: int = 500) -> ScriptedResponse:
    """An HTTP error (the client's retry policy decides what happens next)."""
    return ScriptedResponse(status=status)


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def _anthropic_body(resp: ScriptedResponse, requested_model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if resp.text:
        content.append({"type": "text", "text": resp.text})
    for call in resp.tool_calls:
        content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments})
    return {
        "id": f"msg_{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "model": resp.model or requested_model,
        "content": content,
        "stop_reason": "tool_use" if resp.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": resp.input_tokens, "output_tokens": resp.output_tokens},
    }


def _openai_body(resp: ScriptedResponse, requested_model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": resp.text or None}
    if resp.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in resp.tool_calls
        ]
    return {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": resp.model or requested_model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if resp.tool_calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": resp.input_tokens,
            "completion_tokens": resp.output_tokens,
            "total_tokens": resp.input_tokens + resp.output_tokens,
        },
    }


def _error_body(path: str, status: int, message: str) -> dict[str, Any]:
    if path == ANTHROPIC_PATH:
        return {"type": "error", "error": {"type": "api_error", "message": message}}
    return {"error": {"message": message, "type": "server_error", "code": status}}


class ScriptedLLMServer:
    """Context manager running the scripted server on 127.0.0.1 in a background thread."""

    def __init__(self, responses: list[ScriptedResponse] | None = None, *, retry_after_ms: int = 1):
        self._queue: list[ScriptedResponse] = list(responses or [])
        self._lock = threading.Lock()
        self.retry_after_ms = retry_after_ms
        """sent as ``retry-after-ms`` on errors so SDK retries do not wait"""
        self.requests: list[RecordedRequest] = []
        self.unexpected: list[RecordedRequest] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- queue -----------------------------------------------------------------------------------
    def push(self, *responses: ScriptedResponse) -> None:
        with self._lock:
            self._queue.extend(responses)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._queue)

    def _next(self, request: RecordedRequest) -> ScriptedResponse | None:
        with self._lock:
            self.requests.append(request)
            if not self._queue:
                self.unexpected.append(request)
                return None
            item = self._queue.pop(0)
        # a callable answers from the request it receives (e.g. reads an id out of the last tool result)
        return item(request) if callable(item) else item

    # -- URLs ------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """Root URL (what ``anthropic.Anthropic(base_url=...)`` wants)."""
        if self._httpd is None:
            raise RuntimeError("ScriptedLLMServer is not running; use it as a context manager")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_url(self) -> str:
        """``.../v1`` (what ``openai.OpenAI(base_url=...)`` wants)."""
        return f"{self.url}/v1"

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> ScriptedLLMServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"_unparsed": raw.decode("utf-8", "replace")}
                path = self.path.split("?", 1)[0]
                record = RecordedRequest(path=path, headers=dict(self.headers.items()), body=body)
                if path not in (ANTHROPIC_PATH, OPENAI_PATH):
                    self._send(404, _error_body(path, 404, f"unknown path {path}"), retry=False)
                    return
                scripted = server._next(record)
                if scripted is None:
                    self._send(500, _error_body(path, 500, "scripted response queue is empty"), retry=False)
                    return
                if scripted.raw is not None:
                    self._send(scripted.status, scripted.raw)
                elif scripted.status != 200:
                    self._send(scripted.status, _error_body(path, scripted.status, "scripted failure"))
                else:
                    model = str(body.get("model", "scripted-model"))
                    render = _anthropic_body if path == ANTHROPIC_PATH else _openai_body
                    self._send(200, render(scripted, model))

            def _send(self, status: int, payload: dict[str, Any], retry: bool | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                if status != 200:
                    self.send_header("retry-after-ms", str(server.retry_after_ms))
                if retry is not None:
                    self.send_header("x-should-retry", "true" if retry else "false")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (silence stderr)
                return

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
