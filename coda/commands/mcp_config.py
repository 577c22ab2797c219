"""`coda mcp-config`: print the MCP client configuration that starts this installation's servers.

    coda mcp-config --run-dir runs/demo                 # a claude_desktop_config.json block
    coda mcp-config --client generic                    # the same servers for any MCP client (stdio and http)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def register(sub, name: str) -> None:
    p = sub.add_parser(name, help="print a claude_desktop_config.json block (or a generic one) for the servers")
    p.add_argument("--run-dir", default=None, help="run directory the servers share (default: `coda serve`'s, "
                   "$CODA_RUN_DIR else ~/.local/share/coda/runs/default)")
    p.add_argument("--client", choices=["claude", "generic"], default="claude")
    p.set_defaults(func=run)


def coda_command() -> list[str]:
    """How to start `coda` from this installation: the venv's entry point, or this Python with -m coda.cli."""
    exe = Path(sys.executable)
    entry = exe.parent / "coda"
    if entry.is_file():
        return [str(entry)]
    return [str(exe), "-m", "coda.cli"]


def config(run_dir: str | Path, client: str = "claude") -> dict:
    """{"mcpServers": {"coda-sim": {"command", "args"}, ...}} (claude) or {"servers": [...]} (generic)."""
    from coda.commands.serve import DEFAULT_PORTS, available

    run_dir = str(Path(run_dir).expanduser().resolve())
    command, *prefix = coda_command()
    entries = {
        f"coda-{name}": {"command": command, "args": [*prefix, "serve", name, "--run-dir", run_dir]}
        for name in available()
    }
    if client == "claude":
        return {"mcpServers": entries}
    servers = []
    for key, entry in entries.items():
        name = key.removeprefix("coda-")
        port = DEFAULT_PORTS.get(name, 8730)
        servers.append({
            "name": key,
            "stdio": {"command": entry["command"], "args": entry["args"]},
            "http": {
                "start": {"command": entry["command"],
                          "args": [*entry["args"], "--transport", "http", "--port", str(port)]},
                "url": f"http://127.0.0.1:{port}/mcp",
            },
        })
    return {"servers": servers}


def run(args) -> int:
    from coda.commands.serve import default_run_dir

    if args.run_dir is not None and not args.run_dir.strip():
        print("coda mcp-config: --run-dir is empty; give the run directory the servers share (or leave it out for "
              f"{default_run_dir()})", file=sys.stderr)
        return 2

    print(json.dumps(config(default_run_dir() if args.run_dir is None else args.run_dir, args.client), indent=2))
    return 0
