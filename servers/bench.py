"""MCP per-call overhead by transport: in-memory, stdio and streamable HTTP, on a trivial read-only sim tool.

Each transport gets a fresh sim server (stdio and HTTP as `coda serve sim` subprocesses on a temporary run
directory), `--warmup` untimed calls, then `--calls` sequential timed calls of `list_assets(limit=1)`. The same
function called directly in-process gives the work itself; overhead = mean round trip − direct call.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sim.bench import at_least

TOOL, ARGS = "list_assets", {"limit": 1}
TRANSPORTS = ("memory", "stdio", "http")


def add_arguments(parser) -> None:
    parser.add_argument("--calls", type=at_least(1), default=300, help="timed calls per transport")
    parser.add_argument("--warmup", type=at_least(0), default=20, help="untimed calls first")
    parser.add_argument("--transports", default=",".join(TRANSPORTS), help="comma list of memory, stdio, http")
    parser.add_argument("--run", action="append", default=[], metavar="RUN_DIR",
                        help="also report the MCP overhead measured inside a finished `coda run` (repeatable)")


def _serve_cmd(run_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "coda.cli", "serve", "sim", "--run-dir", str(run_dir), *extra]


async def _time_calls(client, calls: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        await client.call_tool(TOOL, ARGS)
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        result = await client.call_tool(TOOL, ARGS)
        times.append(time.perf_counter() - t0)
        if result.is_error:
            raise RuntimeError(f"{TOOL} failed: {result.content}")
    return times


async def _measure(transport: str, run_dir: Path, calls: int, warmup: int) -> tuple[list[float], float]:
    """(per-call seconds, seconds from start to the first answer)."""
    from mcp import Client, StdioServerParameters

    t0 = time.perf_counter()
    if transport == "memory":
        from servers.sim import build_server

        async with Client(build_server(run_dir)) as client:
            await client.call_tool(TOOL, ARGS)
            start = time.perf_counter() - t0
            return await _time_calls(client, calls, warmup), start
    if transport == "stdio":
        cmd = _serve_cmd(run_dir)
        async with Client(StdioServerParameters(command=cmd[0], args=cmd[1:])) as client:
            await client.call_tool(TOOL, ARGS)
            start = time.perf_counter() - t0
            return await _time_calls(client, calls, warmup), start
    if transport == "http":
        from servers.transport import free_port, wait_for_port

        port = free_port()
        proc = subprocess.Popen(_serve_cmd(run_dir, "--transport", "http", "--port", str(port)),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for_port(proc, "127.0.0.1", port)
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                await client.call_tool(TOOL, ARGS)
                start = time.perf_counter() - t0
                return await _time_calls(client, calls, warmup), start
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    raise ValueError(f"unknown transport {transport!r}; valid: {', '.join(TRANSPORTS)}")


def _direct_ms(calls: int) -> float:
    from sim.assets.listing import list_assets

    list_assets(**ARGS)
    t0 = time.perf_counter()
    for _ in range(calls):
        list_assets(**ARGS).model_dump(mode="json")
    return (time.perf_counter() - t0) / calls * 1e3


def run(args) -> dict:
    transports = [t.strip() for t in args.transports.split(",") if t.strip()]
    unknown = set(transports) - set(TRANSPORTS)
    if unknown:
        raise SystemExit(f"unknown transport(s) {sorted(unknown)}; valid: {', '.join(TRANSPORTS)}")
    direct = _direct_ms(max(args.calls, 50))
    out: dict = {"tool": f"sim.{TOOL}(limit=1)", "calls": args.calls, "direct_ms": round(direct, 3)}
    with tempfile.TemporaryDirectory(prefix="coda-bench-mcp-") as tmp:
        for transport in transports:
            times, start = asyncio.run(_measure(transport, Path(tmp) / transport, args.calls, args.warmup))
            ms = sorted(t * 1e3 for t in times)
            mean = statistics.fmean(ms)
            out[f"{transport}_mean_ms"] = round(mean, 3)
            out[f"{transport}_p50_ms"] = round(ms[len(ms) // 2], 3)
            out[f"{transport}_p95_ms"] = round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 3)
            out[f"{transport}_overhead_ms"] = round(mean - direct, 3)
            out[f"{transport}_first_answer_s"] = round(start, 2)
    for run_dir in args.run:
        out.setdefault("runs", {})[run_dir] = run_overhead(Path(run_dir))
    return out


def run_overhead(run_dir: Path) -> dict:
    """The overhead `coda run` measured (hub call time − time inside tool functions) and its share of the run."""
    state = json.loads((run_dir / "state.json").read_text())
    mcp = state.get("mcp_overhead")
    if not mcp:
        raise SystemExit(f"{run_dir} has no MCP overhead figure (a run finished by this version records one)")
    return {"preset": state.get("preset", {}).get("name"), "wall_s": round(state.get("wall_seconds", 0.0), 1),
            "calls": mcp["calls"], "overhead_s": round(mcp["overhead_seconds"], 3),
            "share_of_wall": round(mcp["share_of_wall"], 5)}
