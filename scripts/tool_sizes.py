"""Size of the tool definitions each CoDA MCP server sends an LLM client (docs/BENCHMARKS.md, "Tool-definition size").

    .venv/bin/python scripts/tool_sizes.py            # a markdown table
    .venv/bin/python scripts/tool_sizes.py --json

What is counted is what a model is given per tool, as the hub passes it (`agent.autonomous.tool_specs`): name,
description and input schema, as `json.dumps` of the list of {name, description, input_schema} per server
(ASCII-escaped, default separators). Tokens are estimated at 4 characters each (no provider tokenizer offline).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path

SERVERS = ("sim", "verifier", "memory", "trainer")


async def sizes(run_dir: Path) -> dict[str, dict[str, int]]:
    from mcp import Client

    from memory_store.embed import HashingEmbedder
    from servers import memory, sim, trainer, verifier

    build = {"sim": lambda: sim.build_server(run_dir), "verifier": lambda: verifier.build_server(run_dir),
             "memory": lambda: memory.build_server(run_dir, embedder=HashingEmbedder()),
             "trainer": lambda: trainer.build_server(run_dir)}
    out = {}
    for name in SERVERS:
        async with Client(build[name]()) as client:
            tools = (await client.list_tools()).tools
        chars = len(json.dumps([{"name": t.name, "description": t.description, "input_schema": t.input_schema}
                                for t in tools]))
        out[name] = {"tools": len(tools), "characters": chars, "tokens": round(chars / 4, -2)}
    tools, chars = sum(v["tools"] for v in out.values()), sum(v["characters"] for v in out.values())
    out["all four"] = {"tools": tools, "characters": chars, "tokens": round(chars / 4, -2)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a markdown table")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="coda-tool-sizes-") as tmp:
        got = asyncio.run(sizes(Path(tmp)))
    if args.json:
        print(json.dumps(got, indent=2))
        return
    print("| server | tools | characters | ≈ tokens |\n|---|---:|---:|---:|")
    for name, v in got.items():
        print(f"| {name} | {v['tools']} | {v['characters']:,} | {v['tokens']:,.0f} |")


if __name__ == "__main__":
    main()
