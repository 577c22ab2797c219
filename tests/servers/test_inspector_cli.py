"""The MCP Inspector command-line client (npm `@modelcontextprotocol/inspector --cli`) lists and calls tools of each
server. Needs node/npx and the npm registry (or npx's cache); skipped with the reason otherwise.

    pytest tests/servers -m integration          # ~60 s: eight inspector runs, each starting a server
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
import time

import pytest
from mcp_testing import REPO, SCENE_PROGRAM

pytestmark = [pytest.mark.integration, pytest.mark.slow]

INSPECTOR = "@modelcontextprotocol/inspector"
CALLS = {
    "sim": ("list_assets", {"kind": "articulated", "limit": "2"}, lambda r: r["structuredContent"]["total"] == 4),
    "verifier": ("verify_program", {"source": SCENE_PROGRAM}, lambda r: r["structuredContent"]["passed"]),
    "memory": ("search_diagnoses", {"query": "the gripper slips", "k": "3"},
               lambda r: r["structuredContent"]["result"] == []),
    "trainer": ("list_checkpoints", {}, lambda r: r["structuredContent"]["checkpoints"] == []),
}
EXPECTED_TOOLS = {"sim": 9, "verifier": 4, "memory": 17, "trainer": 12}


@functools.cache
def npx_ready() -> str | None:
    """None when the inspector runs here, else why not (printed as the skip reason)."""
    npx = shutil.which("npx")
    if npx is None:
        return "node/npx not found on PATH; install Node.js ≥ 20 to run the MCP Inspector CLI"
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([npx, "-y", INSPECTOR, "--help"], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return "npx could not fetch the MCP Inspector within 300 s (npm registry unreachable?)"
    seconds = time.perf_counter() - t0
    print(f"\nnpx -y {INSPECTOR} --help took {seconds:.1f} s", file=sys.stderr)
    if proc.returncode != 0:
        return f"npx could not run the MCP Inspector (npm registry unreachable?): {proc.stderr.strip()[-300:]}"
    return None


def inspector(run_dir, server: str, *method_args: str) -> dict:
    reason = npx_ready()
    if reason:
        pytest.skip(reason)
    extra = ["--embedder", "hashing"] if server == "memory" else []
    cmd = [shutil.which("npx"), "-y", INSPECTOR, "--cli", sys.executable, "-m", "coda.cli", "serve", server,
           "--run-dir", str(run_dir), *extra, *method_args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=REPO)
    assert proc.returncode == 0, f"inspector failed ({proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(proc.stdout)


@pytest.mark.parametrize("server", list(CALLS))
def test_inspector_lists_and_calls_tools(server, tmp_path):
    listed = inspector(tmp_path, server, "--method", "tools/list")
    names = [t["name"] for t in listed["tools"]]
    assert len(names) == EXPECTED_TOOLS[server]
    assert all(t["annotations"]["openWorldHint"] is False for t in listed["tools"])

    tool, args, check = CALLS[server]
    tool_args = [a for k, v in args.items() for a in ("--tool-arg", f"{k}={v}")]
    result = inspector(tmp_path, server, "--method", "tools/call", "--tool-name", tool, *tool_args)
    assert not result.get("isError"), result
    assert check(result), result
