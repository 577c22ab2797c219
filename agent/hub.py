"""MCP hub: one client session per CoDA server, used synchronously by the orchestrator.

Servers start as stdio subprocesses (`coda serve NAME --run-dir RUN`) by default, or are reached at given
streamable-HTTP URLs. Tools are listed once per connection. If a server dies, the hub reconnects; a call is
retried only when the tool is annotated idempotent (or read-only), otherwise the failure is reported.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment

from servers.contract import STATS_URI

log = logging.getLogger(__name__)

SERVERS = ("sim", "verifier", "memory", "trainer")


class ToolError(RuntimeError):
    """A tool answered with is_error; the message is the server's text."""

    def __init__(self, server: str, tool: str, message: str):
        super().__init__(f"{server}.{tool}: {message}")
        self.server, self.tool, self.message = server, tool, message


@dataclass
class ToolResult:
    server: str
    tool: str
    data: Any
    """structured content when the tool has an output schema, else the parsed text"""
    content: list = field(default_factory=list)
    """raw MCP content blocks (text, images)"""
    seconds: float = 0.0


PASSED_ENV = ("CODA_EXTERNAL_VENV",)
"""environment variables a server started over stdio gets besides MCP's default few (HOME, PATH, ...): the
external benchmarks' virtualenv. Nothing else (no API key) reaches the servers."""


@dataclass
class ServerSpec:
    name: str
    url: str | None = None
    command: str | None = None
    args: list[str] = field(default_factory=list)
    server: Any = None
    """a server object reached in memory (e.g. `servers.sim.build_server(run_dir)`; tests)"""

    def target(self):
        if self.server is not None:
            return self.server
        if self.url:
            return self.url
        passed = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
        env = {**get_default_environment(), **passed} if passed else None
        return StdioServerParameters(command=self.command or sys.executable, args=self.args, env=env)


def stdio_specs(run_dir: Path, names=SERVERS, extra_args: dict[str, list[str]] | None = None,
                robot: str = "gripper") -> list[ServerSpec]:
    """Specs that start each server from this installation over stdio; a `robot` other than the floating gripper
    is the run's embodiment, which the sim and verifier servers make every scene for."""
    extra_args = extra_args or {}
    body = {"sim": ["--robot", robot], "verifier": ["--robot", robot]} if robot != "gripper" else {}
    return [
        ServerSpec(name=n, command=sys.executable,
                   args=["-m", "coda.cli", "serve", n, "--run-dir", str(run_dir), *extra_args.get(n, []),
                         *body.get(n, [])])
        for n in names
    ]


class _Conn:
    def __init__(self, spec: ServerSpec):
        self.spec = spec
        self.client: Client | None = None
        self.tools: dict[str, Any] = {}

    async def open(self) -> None:
        self.client = Client(self.spec.target())
        await self.client.__aenter__()
        listed = await self.client.list_tools()
        self.tools = {t.name: t for t in listed.tools}

    async def close(self) -> None:
        if self.client is not None:
            try:
                await self.client.__aexit__(None, None, None)
            except Exception:  # noqa: BLE001 - a dead server cannot be closed cleanly
                pass
            self.client = None


class Hub:
    """Synchronous facade over async MCP clients (an event loop runs in a background thread)."""

    def __init__(self, specs: list[ServerSpec], timeout_s: float = 600.0):
        self.specs = {s.name: s for s in specs}
        self.timeout_s = timeout_s
        self.calls: list[tuple[str, str, float]] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-hub", daemon=True)
        self._thread.start()
        self._conns: dict[str, _Conn] = {}

    def _run(self, coro):
        fut: Future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return fut.result(self.timeout_s)

    def start(self) -> Hub:
        """Connect to every server at once (each stdio server takes seconds to import its libraries)."""
        conns = {name: _Conn(spec) for name, spec in self.specs.items()}

        async def open_all():
            await asyncio.gather(*(c.open() for c in conns.values()))

        self._run(open_all())
        self._conns.update(conns)
        for name, conn in conns.items():
            log.info("connected to %s (%d tools)", name, len(conn.tools))
        return self

    def tools(self, server: str | None = None) -> dict[str, dict[str, Any]]:
        names = [server] if server else list(self._conns)
        return {n: self._conns[n].tools for n in names}

    def _idempotent(self, server: str, tool: str) -> bool:
        t = self._conns[server].tools.get(tool)
        ann = getattr(t, "annotations", None)
        return bool(ann and (getattr(ann, "idempotent_hint", False) or getattr(ann, "read_only_hint", False)))

    def call(self, server: str, tool: str, args: dict | None = None, retries: int = 1) -> ToolResult:
        """Call a tool; raises ToolError on is_error, reconnects once on a dead connection."""
        if server not in self._conns:
            raise KeyError(f"unknown server {server!r}; connected: {list(self._conns)}")
        attempt = 0
        while True:
            t0 = time.perf_counter()
            try:
                result = self._run(self._conns[server].client.call_tool(tool, args or {}))
                break
            except ToolError:
                raise
            except Exception as exc:  # noqa: BLE001 - transport failures: reconnect, maybe retry
                log.warning("%s.%s failed (%s); reconnecting", server, tool, exc)
                self._reconnect(server)
                if attempt >= retries or not self._idempotent(server, tool):
                    raise ToolError(server, tool, f"connection lost during the call ({exc}); not retried") from exc
                attempt += 1
        seconds = time.perf_counter() - t0
        self.calls.append((server, tool, seconds))
        texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
        if result.is_error:
            raise ToolError(server, tool, " ".join(texts) or "tool error")
        data = result.structured_content
        if isinstance(data, dict) and set(data) == {"result"}:
            data = data["result"]
        if data is None and texts:
            try:
                data = json.loads(texts[0])
            except ValueError:
                data = "\n".join(texts)
        return ToolResult(server, tool, data, list(result.content), seconds)

    def _reconnect(self, server: str) -> None:
        conn = self._conns[server]
        self._run(conn.close())
        conn = _Conn(self.specs[server])
        self._run(conn.open())
        self._conns[server] = conn

    def overhead_seconds(self) -> float:
        """Seconds spent in tool calls (the servers' work included; see `transport_seconds`)."""
        return sum(s for _, _, s in self.calls)

    def handler_seconds(self) -> dict[str, dict]:
        """Per server: tool calls served and seconds spent inside tool functions (its `coda://stats`)."""
        out = {}
        for name, conn in self._conns.items():
            try:
                res = self._run(conn.client.read_resource(STATS_URI))
                out[name] = json.loads(res.contents[0].text)
            except Exception as exc:  # noqa: BLE001 - a server without the resource (another implementation)
                log.info("no stats from %s: %s", name, exc)
        return out

    def transport_seconds(self) -> dict:
        """MCP overhead of this hub's calls: their wall time minus the servers' time inside tool functions
        (transport, JSON encoding, schema validation). Exact when this hub is the servers' only client."""
        stats = self.handler_seconds()
        calls = [c for c in self.calls if c[0] in stats]
        total = sum(s for _, _, s in calls)
        inside = sum(v["handler_seconds"] for v in stats.values())
        return {"calls": len(calls), "call_seconds": total, "handler_seconds": inside,
                "overhead_seconds": max(0.0, total - inside)}

    def close(self) -> None:
        for conn in self._conns.values():
            try:
                self._run(conn.close())
            except Exception:  # noqa: BLE001
                pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def __enter__(self) -> Hub:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
