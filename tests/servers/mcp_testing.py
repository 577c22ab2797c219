"""Helpers for the server tests: start servers, call tools and check results."""

from __future__ import annotations

import sys
from pathlib import Path

from mcp import StdioServerParameters

REPO = Path(__file__).resolve().parents[2]
SCENE_PROGRAM = (REPO / "examples/scenes/pick_place.py").read_text()
FAULTY_PROGRAM = (REPO / "examples/scenes/fault_raises.py").read_text()
UNSTABLE_PROGRAM = (REPO / "examples/scenes/fault_interpenetrating.py").read_text()


def serve_args(name: str, run_dir: Path, *extra: str) -> list[str]:
    return ["-m", "coda.cli", "serve", name, "--run-dir", str(run_dir), *extra]


def stdio_params(name: str, run_dir: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=serve_args(name, run_dir, *extra), cwd=str(REPO))


def text(result) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def ok(client, tool: str, args: dict | None = None):
    """Call a tool that must succeed; returns its structured content (or the result when unstructured)."""
    result = await client.call_tool(tool, args or {})
    assert not result.is_error, f"{tool} failed: {text(result)}"
    return result.structured_content if result.structured_content is not None else result


async def err(client, tool: str, args: dict | None = None) -> str:
    """Call a tool that must fail; returns the error text."""
    result = await client.call_tool(tool, args or {})
    assert result.is_error, f"{tool} should have failed but returned {result.structured_content or text(result)}"
    return text(result)
