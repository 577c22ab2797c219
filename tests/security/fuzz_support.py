"""Helpers for the tool-call fuzz: a synchronous in-memory MCP client, and hypothesis strategies that build tool
arguments from (and around) a tool's JSON input schema."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import threading
from typing import Any

from hypothesis import strategies as st
from mcp import Client

from memory_store.schema import BATCHES, LEARNING_TOOLS, MODE_STATUSES
from sim.constants import DIAGNOSIS_FACTORS, FACTORS, FAMILIES, PHASES, ROLES

CALL_TIMEOUT_S = 120.0


class SyncClient:
    """An in-memory `mcp.Client(server)` kept open in one task of a background event loop, called synchronously
    (hypothesis drives plain functions; one client serves every example, as one long-lived MCP session would)."""

    def __init__(self, server: Any):
        self._server = server
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fuzz-client", daemon=True)
        self._thread.start()
        self._ready: concurrent.futures.Future = concurrent.futures.Future()
        self._main = asyncio.run_coroutine_threadsafe(self._serve(), self._loop)
        self.tools = {t.name: t for t in self._ready.result(CALL_TIMEOUT_S)}

    async def _serve(self) -> None:
        self._queue: asyncio.Queue = asyncio.Queue()
        try:
            async with Client(self._server) as client:
                self._ready.set_result((await client.list_tools()).tools)
                while (item := await self._queue.get()) is not None:
                    name, args, future = item
                    try:
                        future.set_result(await client.call_tool(name, args))
                    except Exception as exc:  # noqa: BLE001 - handed to the caller, who decides
                        future.set_exception(exc)
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            raise

    def call(self, name: str, args: dict) -> Any:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._loop.call_soon_threadsafe(self._queue.put_nowait, (name, args, future))
        return future.result(CALL_TIMEOUT_S)

    def close(self) -> None:
        if self._main.done():
            self._main.result()  # re-raise what ended the session early
        self._loop.call_soon_threadsafe(self._queue.put_nowait, None)
        try:
            self._main.result(30)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def text_of(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content).strip()


class CrashLog(logging.Handler):
    """Collects log records that carry a traceback: the SDK logs one for a tool that raised something other than
    the expected library errors (the client then sees only a generic message)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(record)

    def __enter__(self) -> CrashLog:
        logging.getLogger().addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        logging.getLogger().removeHandler(self)

    def summary(self) -> str:
        return "\n".join(f"{r.name}: {r.getMessage()} ({r.exc_info[1]!r})" for r in self.records[:10])


# --- hostile values -----------------------------------------------------------------------------------------------

PATHS = ["../../etc/passwd", "/etc/passwd", "..", "../", "./../x", "~/.ssh/id_rsa", "a/../../b", "\\..\\..\\windows",
         "exports/../../escape", "/", ".", "", " ", "\x00", "a\x00b", "file:///etc/passwd", "%2e%2e%2fetc%2fpasswd",
         "exports/" + "x/" * 60]
IDS = ["", "0", "-1", "00000000000000000", "ffffffffffffffff", "FFFFFFFFFFFFFFFF", "g123456789abcdef", "' OR 1=1 --",
       "id\nwith\nnewlines", "ünïcödé", "🙂", "r1; DROP TABLE rollouts", "a" * 161, "a" * 10_000, "*", "%", "null",
       "None", "../traces/x", ".hidden", "trace.npz", "planner-0123456789abcdef"]
NUMBERS = [-1, -(2**31), 2**31, -(2**63), 2**63, 2**64 + 1, 10**30, 0, -0.0, 1e308, -1e308, 1e-320, math.nan,
           math.inf, -math.inf, 0.5, 3.7]
HUGE = ["x" * 150_000, "é" * 60_000, "{" * 50_000, "(" * 50_000 + ")" * 50_000, "\n" * 120_000]


def hostile_values() -> st.SearchStrategy:
    json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                          st.text(max_size=40))
    junk = st.recursive(json_leaf, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                          st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                        max_leaves=12)
    return st.one_of(st.sampled_from(PATHS), st.sampled_from(IDS), st.sampled_from(NUMBERS), st.sampled_from(HUGE),
                     junk, st.lists(st.sampled_from(IDS + PATHS), max_size=5), st.just({}), st.just([]),
                     st.just([[[[[]]]]]), st.lists(st.integers(), min_size=300, max_size=300))


# Plain string fields that the servers check against a vocabulary (pydantic validators, not schema enums): valid
# words are drawn often enough for records to pass validation and reach the stores.
HINTS: dict[str, tuple[str, ...]] = {
    "family": FAMILIES, "families": FAMILIES, "phase": PHASES, "phase_reached": PHASES,
    "factor": DIAGNOSIS_FACTORS + FACTORS, "roles": ROLES, "role": ROLES, "batch": BATCHES, "status": MODE_STATUSES,
    "learning_tool": LEARNING_TOOLS, "created_at": ("2026-11-29T12:00:00Z", "yesterday"),
}

# --- schema-driven arguments --------------------------------------------------------------------------------------


def _resolve(schema: dict, defs: dict) -> dict:
    while "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def from_schema(schema: dict, defs: dict, depth: int = 0, key: str | None = None) -> st.SearchStrategy:
    """Values that satisfy `schema` (mostly: formats and cross-field rules are not modelled)."""
    schema = _resolve(schema, defs)
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    for combine in ("anyOf", "oneOf", "allOf"):
        if combine in schema:
            return st.one_of([from_schema(s, defs, depth, key) for s in schema[combine]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([from_schema({**schema, "type": k}, defs, depth, key) for k in kind])
    if kind == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True)
        low, high = schema.get("minLength", 0), min(schema.get("maxLength", 60), 60)
        text = st.text(min_size=low, max_size=max(low, high))
        return st.one_of(st.sampled_from(HINTS[key]), text) if key in HINTS else text
    if kind == "integer":
        low, high = schema.get("minimum", -(10**6)), schema.get("maximum", 10**6)
        return st.integers(min_value=low, max_value=min(high, low + 10**6))
    if kind == "number":
        return st.floats(min_value=schema.get("minimum", -1e6), max_value=schema.get("maximum", 1e6),
                         allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        items = from_schema(schema.get("items", {}), defs, depth + 1, key) if depth < 4 else st.none()
        low = schema.get("minItems", 0)
        return st.lists(items, min_size=low, max_size=max(low, min(schema.get("maxItems", 4), 4)))
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        required = set(schema.get("required", ()))
        if depth > 4:
            return st.just({})
        return st.fixed_dictionaries(
            {k: from_schema(v, defs, depth + 1, k) for k, v in props.items() if k in required},
            optional={k: from_schema(v, defs, depth + 1, k) for k, v in props.items() if k not in required},
        ) if props else st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=3)
    return st.one_of(st.none(), st.integers(), st.text(max_size=20))


def accepts_object(schema: dict, defs: dict) -> bool:
    schema = _resolve(schema, defs)
    branches = [schema[k] for k in ("anyOf", "oneOf") if k in schema]
    if branches:
        return any(accepts_object(s, defs) for s in branches[0])
    kind = schema.get("type")
    return kind is None or kind == "object" or (isinstance(kind, list) and "object" in kind)


@st.composite
def mutated(draw, schema: dict) -> dict:
    """Schema-shaped arguments with one to three fields dropped, replaced by hostile values, or added."""
    defs = schema.get("$defs", {})
    args = dict(draw(from_schema(schema, defs)))
    names = list(schema.get("properties", {}))
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["replace", "replace", "drop", "add", "nest"]))
        if op == "drop" and args:
            args.pop(draw(st.sampled_from(sorted(args))))
        elif op == "replace" and names:
            args[draw(st.sampled_from(names))] = draw(hostile_values())
        elif op == "nest" and args:  # a hostile value inside a nested record
            key = draw(st.sampled_from(sorted(args)))
            if isinstance(args[key], dict) and args[key]:
                inner = dict(args[key])
                inner[draw(st.sampled_from(sorted(inner)))] = draw(hostile_values())
                args[key] = inner
        else:
            args[draw(st.text(min_size=1, max_size=12))] = draw(hostile_values())
    return args


@st.composite
def invalid(draw, schema: dict) -> dict:
    """Arguments that certainly fail validation (for tools that would start heavy work): a required field is
    missing, or a field that takes no object gets one."""
    defs = schema.get("$defs", {})
    args = draw(st.one_of(mutated(schema), from_schema(schema, defs)))
    props = schema.get("properties", {})
    breakable = [k for k, s in props.items() if not accepts_object(s, defs)]
    required = list(schema.get("required", ()))
    if breakable and (not required or draw(st.booleans())):
        args[draw(st.sampled_from(breakable))] = draw(st.sampled_from([{}, {"$ref": "#"}, {"../..": "x"}]))
    elif required:
        args.pop(draw(st.sampled_from(required)), None)
    else:
        raise AssertionError(f"cannot make arguments invalid for schema {schema}")
    return args


def tool_calls(tools: dict, heavy: frozenset[str] = frozenset()) -> st.SearchStrategy:
    """(tool name, arguments): well-formed, mutated or garbage arguments for listed tools, and unknown tools;
    tools in `heavy` only ever get invalid arguments."""
    per_tool = []
    for name, tool in sorted(tools.items()):
        schema = tool.input_schema
        if name in heavy:
            args = invalid(schema)
        else:
            args = st.one_of(from_schema(schema, schema.get("$defs", {})), mutated(schema), mutated(schema),
                             st.dictionaries(st.text(max_size=12), hostile_values(), max_size=4))
        per_tool.append(st.tuples(st.just(name), args))
    unknown = st.tuples(st.one_of(st.text(max_size=30), st.sampled_from(["../sim", "list_assets\x00", "__init__",
                                                                          "LIST_ASSETS", " get_job"])),
                        st.dictionaries(st.text(max_size=8), hostile_values(), max_size=3))
    unknown = unknown.filter(lambda call: call[0] not in tools)
    return st.one_of(*per_tool, unknown)
