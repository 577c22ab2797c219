"""What every CoDA MCP server shares: tool registration with honest annotations and readable errors, the stats
resource, images and prompts from `prompts/` (limits: `servers.contract`; background jobs: `servers.jobs`; paths
inside the run directory: `sim.fileio`).

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

import functools
import inspect
import io
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import Prompt, PromptArgument
from mcp.types import ToolAnnotations
from pydantic import BaseModel

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


def error_text(exc: BaseException) -> str:
    """The message of an expected exception, without KeyError's quotes or pydantic's doc links."""
    if isinstance(exc, KeyError) and len(exc.args) == 1 and type(exc).__str__ is KeyError.__str__:
        text = str(exc.args[0])
    else:
        text = str(exc)
    text = re.sub(r"\n\s*For further information visit \S+", "", text)
    return text or type(exc).__name__


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


_STATS: dict[int, HandlerStats] = {}


def new_server(name: str, instructions: str) -> MCPServer:
    """An MCPServer that logs to stderr at WARNING (stdout belongs to the stdio transport), with a
    `coda://stats` resource (tool calls served and seconds spent inside tool functions)."""
    server = MCPServer(name, instructions=instructions, log_level="WARNING", version=_version())
    stats = _STATS.setdefault(id(server), HandlerStats())
    server.resource(STATS_URI, name="stats", description="tool calls served and seconds inside tool functions",
                    mime_type="application/json")(lambda: json.dumps(stats.to_dict()))
    return server


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


def tool(server: MCPServer, annotations: ToolAnnotations, *, title: str | None = None):
    """Register a typed function as a tool; expected library errors become `is_error` results."""

    stats = _STATS.setdefault(id(server), HandlerStats())

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

        server.add_tool(wrapper, title=title, annotations=annotations)
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


def load_prompts(server: MCPServer, directory: Path | None = None) -> list[str]:
    """Serve every prompt of the `prompts` package (or every `*.md` in `directory`) as a prompt named after its
    file (none there: none served).

    Each `{{name}}` placeholder becomes a required prompt argument; an optional `context` argument is appended
    after the text. Files that cannot be read are skipped with a warning."""
    import prompts

    names = []
    found = prompts.available(directory)
    if not found:
        log.info("no prompts in %s; serving no prompts", directory or "the prompts package")
    for name in found:
        try:
            text = prompts.load_prompt(name, directory)
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("skipping prompt %s: %s", name, exc)
            continue
        keys = sorted(prompts.placeholders(text) - {"context"})
        first = next((ln.strip("# ").strip() for ln in text.splitlines() if ln.strip()), name)

        def render(_text: str = text, context: str = "", **values: str) -> str:
            body = prompts.PLACEHOLDER.sub(lambda m: str(values.get(m.group(1), m.group(0))), _text)
            return body if not context else f"{body.rstrip()}\n\n{context}"

        arguments = [PromptArgument(name=k, description=f"value for {{{{{k}}}}}", required=True) for k in keys]
        arguments.append(PromptArgument(name="context", description="text appended after the prompt"))
        server.add_prompt(Prompt(name=name, description=first[:200], arguments=arguments, fn=render))
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
        typed = argument.value or ""
        found = sorted(v for v in dict.fromkeys(source()) if v.startswith(typed))
        return Completion(values=found[:MAX_COMPLETIONS], total=len(found), has_more=len(found) > MAX_COMPLETIONS)


def to_json(value: Any) -> str:
    """JSON text for a resource."""
    if isinstance(value, BaseModel):
        return value.model_dump_json(indent=2)
    return json.dumps(value, indent=2, default=str)

