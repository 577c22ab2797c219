"""What every CoDA MCP server shares: tool registration with titles, honest annotations and readable errors, lean
tool schemas, the stats resource, log records to clients that ask (`logging/setLevel`), images, prompts from
`prompts/` and completions (limits: `servers.contract`; background jobs: `servers.jobs`; paths inside the run
directory: `sim.fileio`).

    mcp = new_server("coda-sim", "Scenes: ...")
    @tool(mcp, READ_ONLY)
    def get_scene(scene_id: Annotated[str, Field(description="...")]) -> SceneDetail:
        '''The spec and program of a stored scene.'''
        return store.detail(scene_id)

A tool raises: `ValueError`, `KeyError`, `LookupError`, `OSError` and pydantic validation errors from the libraries
reach the client as `is_error` results carrying the library's message (what to fix); anything else is a crash,
logged by the SDK with its traceback, and the client only sees the tool name.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import io
import json
import logging
import re
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import Prompt, PromptArgument
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, EmptyResult, SetLevelRequestParams, ToolAnnotations
from pydantic import BaseModel, ConfigDict, ValidationError

from servers.contract import MAX_IMAGE_BYTES, STATS_URI

log = logging.getLogger(__name__)


# --- annotations: say what a tool does, truthfully ----------------------------------------------------------
READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
"""reads only; calling it again changes nothing"""
WRITES_IDEMPOTENT = ToolAnnotations(
    readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False
)
"""adds or replaces records keyed by their content or id: the same call twice stores the same thing once"""
WRITES = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False)
"""adds or updates state; calling it twice has a cumulative effect (counters, moving averages)"""
OVERWRITES = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False)
"""replaces existing state (files, a status); the same call twice gives the same result"""
CANCELS = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False)
"""stops work in progress (its partial result is discarded)"""

EXPECTED_ERRORS: tuple[type[BaseException], ...] = (ValueError, LookupError, OSError, TimeoutError)
"""library exceptions whose message tells the caller what to fix (pydantic's ValidationError is a ValueError)"""


MAX_ERROR_CHARS = 2000
"""an error message longer than this is cut (a message that quotes a huge argument back would flood the client)"""


def error_text(exc: BaseException) -> str:
    """The message of an expected exception in one line: a pydantic validation error inside a tool as
    `argument_errors` (paths into the model that failed), without KeyError's quotes or pydantic's doc links, at
    most MAX_ERROR_CHARS long."""
    if isinstance(exc, ValidationError):
        text = f"invalid {exc.title}: {argument_errors(exc, label='')}"
    elif isinstance(exc, KeyError) and len(exc.args) == 1 and type(exc).__str__ is KeyError.__str__:
        text = str(exc.args[0])
    else:
        text = str(exc)
    text = re.sub(r"\n\s*For further information visit \S+", "", text) or type(exc).__name__
    if len(text) > MAX_ERROR_CHARS:
        text = f"{text[:MAX_ERROR_CHARS]}… ({len(text) - MAX_ERROR_CHARS} more characters cut)"
    return text


class HandlerStats:
    """Time spent inside this server's tool functions: a client subtracts it from its own call times to get
    the MCP overhead (transport, JSON, validation). Read through the `coda://stats` resource."""

    def __init__(self) -> None:
        self.calls, self.seconds = 0, 0.0
        self._lock = threading.Lock()

    def add(self, seconds: float) -> None:
        with self._lock:
            self.calls += 1
            self.seconds += seconds

    def to_dict(self) -> dict:
        with self._lock:
            return {"calls": self.calls, "handler_seconds": self.seconds}


def stats_of(server: MCPServer) -> HandlerStats:
    """The server's own HandlerStats (kept on the server object: a table keyed by `id(server)` would hand a new
    server the counts of a collected one that had the same id)."""
    stats = getattr(server, "coda_stats", None)
    if stats is None:
        stats = HandlerStats()
        server.coda_stats = stats
    return stats


class CodaServer(MCPServer):
    """An MCPServer whose `tools/list` sends lean input schemas (`lean_schema`): what a model reads on every turn,
    and whose argument-validation errors name each bad argument in one line (`argument_errors`) instead of
    pydantic's multi-line report with its model names, error types and doc links."""

    async def list_tools(self):
        return [t.model_copy(update={"input_schema": lean_schema(t.input_schema)}) for t in await super().list_tools()]

    async def call_tool(self, name: str, arguments: dict[str, Any], context=None):
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError) and str(exc).startswith(f"Error executing tool {name}:"):
                registered = self._tool_manager.get_tool(name)
                valid = list(registered.fn_metadata.arg_model.model_fields) if registered else None
                raise ToolError(f"{name}: {argument_errors(exc.__cause__, valid=valid)}") from exc.__cause__
            raise


def argument_errors(exc: ValidationError, limit: int = 5, valid: list[str] | None = None, prefix: str = "",
                    label: str = "argument ") -> str:
    """One line per validation error is too many for a model: 'argument suites[0]: Input should be 'in', ...
    (got 'ood'); ...' — the argument path (under `prefix`: the argument a model was validated from), pydantic's
    message and the value given, at most `limit` of them. An argument the tool does not take is named with the
    ones it does (`valid`)."""
    parts = []
    for e in exc.errors()[:limit]:
        loc = (prefix, *e["loc"]) if prefix else e["loc"]
        path = "".join(f"[{x}]" if isinstance(x, int) else (f".{x}" if i else str(x)) for i, x in enumerate(loc))
        if e["type"] == "extra_forbidden" and len(e["loc"]) == 1 and valid is not None:
            parts.append(f"{label}{path}: not an argument of this tool (its arguments: {', '.join(valid)})")
            continue
        got = "" if e["type"] == "missing" else f" (got {e['input']!r:.80})"
        parts.append(f"{label}{path or '?'}: {e['msg'][:300]}{got}")
    more = len(exc.errors()) - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def new_server(name: str, instructions: str) -> MCPServer:
    """An MCPServer that logs to stderr at WARNING (stdout belongs to the stdio transport), forwards its log
    records to clients that ask with `logging/setLevel` (`serve_logging`), sends lean tool schemas, and has a
    `coda://stats` resource (tool calls served and seconds spent inside tool functions)."""
    server = CodaServer(name, instructions=instructions, log_level="WARNING", version=_version())
    stats = stats_of(server)
    server.resource(STATS_URI, name="stats", description="tool calls served and seconds inside tool functions",
                    mime_type="application/json")(lambda: json.dumps(stats.to_dict()))
    serve_logging(server)
    return server


# --- lean tool schemas ----------------------------------------------------------------------------------------

_SCHEMA_MAPS = ("properties", "$defs", "patternProperties")
"""schema keywords whose values map names to schemas (a property may itself be called 'title')"""
_NULLABLE_KEEPS = {"const", "$ref", "anyOf", "oneOf", "allOf"}
"""a nullable branch with one of these stays an `anyOf` (they would refuse null as `type: [T, "null"]`; an
`enum` gets null added)"""


def lean_schema(schema: dict) -> dict:
    """The same JSON schema in fewer tokens: no pydantic titles (they restate the property names), no
    `default: null` (an optional nullable property says it), `anyOf: [{type: T, ...}, {type: null}]` as
    `type: [T, "null"]`, and `$defs` used once put back in place."""
    defs = schema.get("$defs") or {}
    uses: dict[str, int] = {}
    _count_refs(schema, uses)
    once = {name: d for name, d in defs.items() if uses.get(name) == 1 and f'"#/$defs/{name}"' not in json.dumps(d)}
    if once:
        inlined = _inline(schema, once)  # the kept $defs too: one of them may hold the single use
        left = {k: v for k, v in inlined.get("$defs", {}).items() if k not in once}
        schema = {k: v for k, v in inlined.items() if k != "$defs"} | ({"$defs": left} if left else {})
    return _lean(schema)


def _lean(node: Any) -> Any:
    if isinstance(node, list):
        return [_lean(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: ({n: _lean(s) for n, s in v.items()} if k in _SCHEMA_MAPS and isinstance(v, dict) else _lean(v))
           for k, v in node.items() if k != "title" and not (k == "default" and v is None)}
    alts = out.get("anyOf")
    if isinstance(alts, list) and len(alts) == 2 and {"type": "null"} in alts:
        other = alts[1] if alts[0] == {"type": "null"} else alts[0]
        if isinstance(other.get("type"), str) and not _NULLABLE_KEEPS & set(other):
            rest = {k: v for k, v in out.items() if k != "anyOf"}
            out = {**other, **rest, "type": [other["type"], "null"]}
            if "enum" in other:
                out["enum"] = [*other["enum"], None]
    return out


def _count_refs(node: Any, uses: dict[str, int]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            uses[ref[8:]] = uses.get(ref[8:], 0) + 1
        for v in node.values():
            _count_refs(v, uses)
    elif isinstance(node, list):
        for v in node:
            _count_refs(v, uses)


def _inline(node: Any, defs: dict[str, dict]) -> Any:
    if isinstance(node, list):
        return [_inline(x, defs) for x in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref[8:] in defs and ref.startswith("#/$defs/"):
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return {**_inline(defs[ref[8:]], defs), **rest}
    return {k: _inline(v, defs) for k, v in node.items()}


# --- logging to the client ------------------------------------------------------------------------------------
# The MCP logging capability (`logging/setLevel`, `notifications/message`) is deprecated as of protocol 2026-07-28
# (SEP-2577; the SDK warns when it is passed as `on_set_logging_level`), and 2026 clients opt in per request
# instead. Handshake-era clients (protocol ≤ 2025-11-25: Claude Desktop, the MCP Inspector, the conformance suite)
# still use it, and issue 21 asks for it, so it is registered through the lowlevel `add_request_handler`, as the
# SDK's docs advise for re-providing it to those clients; 2026 clients never reach it (the SDK answers
# METHOD_NOT_FOUND for it at their protocol version).

FORWARDED_LOGGERS = ("coda", "servers", "sim", "policy", "memory_store")
"""the project's loggers, whose records go to the clients that asked for them"""
MCP_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "notice": 25, "warning": logging.WARNING,
              "error": logging.ERROR, "critical": logging.CRITICAL, "alert": 55, "emergency": 60}
"""MCP (RFC 5424) log levels as Python level numbers; notice, alert and emergency have no Python name"""


def mcp_level(levelno: int) -> str:
    """The MCP level of a Python level number: the most severe level at or below it."""
    return max((v, k) for k, v in MCP_LEVELS.items() if v <= max(levelno, logging.DEBUG))[1]


class ClientLog(logging.Handler):
    """Sends the project's log records to each client connection at or above the level it set with
    `logging/setLevel`, as `notifications/message` (the record's message and logger name; never a traceback,
    which stays in the server's own log). A connection that set no level gets nothing (the spec lets the server
    decide; nothing unasked is the quiet choice). One handler per process, installed on `FORWARDED_LOGGERS` at
    the first `logging/setLevel`.

    To let records below a logger's level exist at all, a client's level lowers those loggers' levels (never
    raises them): the server's stderr log then shows those records too."""

    def __init__(self) -> None:
        super().__init__()
        self._clients: weakref.WeakKeyDictionary[Any, tuple[int, asyncio.AbstractEventLoop]] = (
            weakref.WeakKeyDictionary())
        self._lock = threading.Lock()

    def set_level(self, connection: Any, level: str, loop: asyncio.AbstractEventLoop) -> None:
        threshold = MCP_LEVELS[level]
        with self._lock:
            self._clients[connection] = (threshold, loop)
        for name in FORWARDED_LOGGERS:
            logger = logging.getLogger(name)
            if self not in logger.handlers:
                logger.addHandler(self)
            if logger.getEffectiveLevel() > threshold:
                logger.setLevel(threshold)

    def emit(self, record: logging.LogRecord) -> None:
        with self._lock:
            targets = [(c, loop) for c, (threshold, loop) in self._clients.items() if record.levelno >= threshold]
        if not targets:
            return
        try:
            params = {"level": mcp_level(record.levelno), "logger": record.name, "data": record.getMessage()}
        except Exception:  # noqa: BLE001 - a malformed record (bad % arguments): logging's own error report
            self.handleError(record)
            return
        for connection, loop in targets:
            send = connection.notify("notifications/message", params)
            try:  # from any thread: tool threads, job threads or the event loop itself; never waits
                asyncio.run_coroutine_threadsafe(send, loop)
            except RuntimeError:  # the connection's event loop is closed: the client is gone
                send.close()
                with self._lock:
                    self._clients.pop(connection, None)


CLIENT_LOG = ClientLog()


def serve_logging(server: MCPServer) -> None:
    """Declare the logging capability and answer `logging/setLevel` (records then go to that client)."""

    async def set_level(ctx, params: SetLevelRequestParams) -> EmptyResult:
        # the session object lives for one request; its connection (no public accessor in SDK 2.3) for the
        # connection's life: records go to its standalone channel, keyed weakly (a closed session leaves nothing)
        CLIENT_LOG.set_level(ctx.session._connection, params.level, asyncio.get_running_loop())
        return EmptyResult()

    server._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)


def program_caller(ctx):
    """Context manager: sandbox runs inside it count against the calling MCP session's share of the
    sandbox pool (`sim.sandbox.caller_scope`), so one client's hanging programs cannot hold every zygote."""
    from sim.sandbox import caller_scope

    try:
        session = ctx.request_context.session
    except (AttributeError, ValueError):  # called outside a request (tests calling the function directly)
        session = None
    return caller_scope(f"session-{id(session):x}")


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("coda")
    except Exception:  # noqa: BLE001 - not installed: a source checkout
        return "0"


def unexpected_error_text(name: str, exc: Exception) -> str:
    """An unexpected exception of a tool as one line for the client: the tool and the exception's type, never its
    message (which may carry internals); the traceback goes to the server's log."""
    log.error("tool %s failed unexpectedly", name, exc_info=exc)
    return (f"internal error in {name} ({type(exc).__name__}): a bug in the server, not in the arguments; the "
            "message and traceback stay in the server's log")


def refuse_unknown_arguments(server: MCPServer, name: str) -> None:
    """A misspelled argument (`sed` for `seed`) is an error naming it, not silently dropped while the tool runs
    with the default: the registered tool's argument model forbids extra keys (its published schema is unchanged)."""
    registered = server._tool_manager.get_tool(name)  # the SDK has no public hook for the argument model's config
    if registered is None:
        return
    meta = registered.fn_metadata
    meta.arg_model = type(meta.arg_model.__name__, (meta.arg_model,),
                          {"model_config": ConfigDict(**meta.arg_model.model_config, extra="forbid"),
                           "__module__": meta.arg_model.__module__})


def tool_title(name: str) -> str:
    """A tool's title from its name: `create_scene` -> "Create scene"."""
    return name.replace("_", " ").capitalize()


def tool(server: MCPServer, annotations: ToolAnnotations, *, title: str | None = None):
    """Register a typed function as a tool: described by its docstring on one line, titled `title` (default:
    `tool_title` of its name) in the tool and in its annotations (where clients before protocol 2025-06-18 read
    it); expected library errors become `is_error` results."""

    stats = stats_of(server)

    def decorate(fn: Callable) -> Callable:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def wrapper(*args, **kwargs):
                t0 = time.perf_counter()
                try:
                    return await fn(*args, **kwargs)
                except ToolError:
                    raise
                except EXPECTED_ERRORS as exc:
                    raise ToolError(error_text(exc)) from exc
                except Exception as exc:  # noqa: BLE001 - a bug: the client still learns what failed
                    raise ToolError(unexpected_error_text(fn.__name__, exc)) from exc
                finally:
                    stats.add(time.perf_counter() - t0)

        else:

            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                t0 = time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                except ToolError:
                    raise
                except EXPECTED_ERRORS as exc:
                    raise ToolError(error_text(exc)) from exc
                except Exception as exc:  # noqa: BLE001 - a bug: the client still learns what failed
                    raise ToolError(unexpected_error_text(fn.__name__, exc)) from exc
                finally:
                    stats.add(time.perf_counter() - t0)

        shown = title or tool_title(fn.__name__)
        server.add_tool(wrapper, title=shown, description=" ".join((fn.__doc__ or "").split()),
                        annotations=annotations.model_copy(update={"title": shown}))
        refuse_unknown_arguments(server, fn.__name__)
        return fn

    return decorate


def resource(server: MCPServer, uri: str, **kwargs):
    """Register a resource; expected library errors reach the client as a 'not found' error with their message."""
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError

    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args, **kw):
            try:
                return fn(*args, **kw)
            except EXPECTED_ERRORS as exc:
                raise ResourceNotFoundError(error_text(exc)) from exc

        server.resource(uri, **kwargs)(wrapper)
        return fn

    return decorate


# --- images -----------------------------------------------------------------------------------------------


def image_content(png: bytes) -> Image:
    """An MCP image: the PNG when it is under MAX_IMAGE_BYTES, else the same picture as JPEG."""
    if len(png) <= MAX_IMAGE_BYTES:
        return Image(data=png, format="png")
    from PIL import Image as PILImage

    img = PILImage.open(io.BytesIO(png)).convert("RGB")
    for quality in (85, 70, 50):
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=quality)
        if buf.tell() <= MAX_IMAGE_BYTES:
            return Image(data=buf.getvalue(), format="jpeg")
    raise ValueError(f"the image is over {MAX_IMAGE_BYTES} bytes even as JPEG; ask for a smaller size")


# --- prompts ----------------------------------------------------------------------------------------------


class CodaPrompt(Prompt):
    """A prompt whose bad arguments are one INVALID_PARAMS error naming them and the valid ones (the SDK's own
    check answers a generic error)."""

    async def render(self, arguments, context):
        given = set(arguments or {})
        valid = [a.name + ("" if a.required else " (optional)") for a in self.arguments or []]
        missing = [a.name for a in self.arguments or [] if a.required and a.name not in given]
        unknown = sorted(given - {a.name for a in self.arguments or []})
        if missing or unknown:
            what = (f"needs argument(s) {', '.join(missing)}" if missing else
                    f"has no argument(s) {', '.join(unknown)}")
            raise MCPError(INVALID_PARAMS, f"prompt {self.name!r} {what}; its arguments: {', '.join(valid)}")
        return await super().render(arguments, context)


def load_prompts(server: MCPServer, directory: Path | None = None, *, only: Sequence[str] | None = None,
                 defaults: dict[str, Callable[[], str]] | None = None) -> list[str]:
    """Serve the prompts of the `prompts` package named in `only` (default: every one; or every `*.md` in
    `directory`), each named after its file and described by `prompts.ABOUT` (else its first line).

    Each `{{name}}` placeholder becomes a prompt argument described by `prompts.ARGUMENTS`; it is required
    unless `defaults` gives its value (a function called when the prompt is rendered). An optional `context`
    argument is appended after the text. Files that cannot be read are skipped with a warning."""
    import prompts

    defaults = defaults or {}
    found = prompts.available(directory)
    if only is not None:
        unknown = sorted(set(only) - set(found))
        if unknown:
            raise ValueError(f"no prompt(s) {unknown}; available: {', '.join(found) or 'none'}")
        found = [n for n in found if n in only]
    if not found:
        log.info("no prompts in %s; serving no prompts", directory or "the prompts package")
    names = []
    for name in found:
        try:
            text = prompts.load_prompt(name, directory)
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("skipping prompt %s: %s", name, exc)
            continue
        keys = sorted(prompts.placeholders(text) - {"context"})
        first = next((ln.strip("# ").strip() for ln in text.splitlines() if ln.strip()), name)

        def render(_text: str = text, context: str = "", **values: str) -> str:
            filled = {k: (values[k] if k in values else defaults[k]()) for k in prompts.placeholders(_text)
                      if k in values or k in defaults}
            body = prompts.PLACEHOLDER.sub(lambda m: str(filled.get(m.group(1), m.group(0))), _text)
            return body if not context else f"{body.rstrip()}\n\n{context}"

        arguments = [PromptArgument(name=k, description=prompts.argument_help(k, default=k in defaults),
                                    required=k not in defaults) for k in keys]
        arguments.append(PromptArgument(name="context", description=prompts.argument_help("context")))
        about = prompts.ABOUT.get(name) if directory is None else None
        server.add_prompt(CodaPrompt(name=name, description=about or first[:200],
                                     arguments=arguments, fn=render))
        names.append(name)
    return names


MAX_COMPLETIONS = 100
"""values in one completion answer (the protocol's limit)"""


def vocabulary() -> dict[str, Callable[[], list[str]]]:
    """Completion values shared by every server: argument name -> the valid words (prompt arguments such as
    `families` take one of them per completion)."""
    from sim.constants import DIAGNOSIS_FACTORS, FAMILIES, PHASES, SUITES

    def categories() -> list[str]:
        from sim import assets

        return sorted(assets.categories())

    words = {"family": FAMILIES, "families": FAMILIES, "suite": SUITES, "suites": SUITES,
             "factor": DIAGNOSIS_FACTORS, "factors": DIAGNOSIS_FACTORS, "phase": PHASES, "phases": PHASES}
    out: dict[str, Callable[[], list[str]]] = {k: (lambda v=v: list(v)) for k, v in words.items()}
    out["categories"] = categories
    return out


def add_completions(server: MCPServer, values: dict[str, Callable[[], list[str]]] | None = None) -> None:
    """Answer `completion/complete` for resource-template parameters and prompt arguments: the values of
    `values[name]` (server-specific, e.g. stored scene ids) or of the shared vocabulary that start with what the
    user typed, sorted, at most MAX_COMPLETIONS (with `total` and `hasMore`)."""
    from mcp.types import Completion

    table = {**vocabulary(), **(values or {})}

    @server.completion()
    async def complete(ref, argument, context):
        source = table.get(argument.name)
        if source is None:
            return None
        if getattr(ref, "type", "") == "ref/prompt":  # only the arguments of a prompt this server serves
            prompts = {p.name: p for p in await server.list_prompts()}
            if ref.name not in prompts or argument.name not in {a.name for a in prompts[ref.name].arguments or []}:
                return None
        typed = argument.value or ""
        found = sorted(v for v in dict.fromkeys(source()) if v.startswith(typed))
        return Completion(values=found[:MAX_COMPLETIONS], total=len(found), has_more=len(found) > MAX_COMPLETIONS)


def to_json(value: Any) -> str:
    """JSON text for a resource."""
    if isinstance(value, BaseModel):
        return value.model_dump_json(indent=2)
    return json.dumps(value, indent=2, default=str)

