"""`coda bench NAME`: benchmarks. Each target is a module with add_arguments(parser) and run(args) -> dict."""

from __future__ import annotations

import datetime
import importlib
import os
import platform
from pathlib import Path

from coda.cli import WORDS, emit
from coda.options import check_output_file

BENCHES = {
    "sim": "sim.bench",
    "memory": "memory_store.bench",
    "policy": "policy.bench",
    "rollouts": "policy.bench_rollouts",
    "round": "policy.bench_round",
    "mcp": "servers.bench",
    "critic": "agent.bench",
    "attribution": "agent.bench_attribution",
    "sandbox": "sim.sandbox.bench",
}


def machine() -> dict:
    return {
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, python {platform.python_version()}",
    }


def register(sub, name: str) -> None:
    parser = sub.add_parser(name, help="run a benchmark and print its figures")
    targets = parser.add_subparsers(dest="bench", required=True)
    # import only the benchmark being run (each pulls in its library); all of them for `coda bench --help`
    words = WORDS
    listing = words == [name]  # `coda bench --help`: every target's help
    chosen = words[1] if len(words) > 1 and words[0] == name and words[1] in BENCHES else None
    for target, module in BENCHES.items():
        if not listing and target != chosen:
            targets.add_parser(target)
            continue
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            continue
        p = targets.add_parser(target, help=(mod.__doc__ or "").strip().splitlines()[0] if mod.__doc__ else None)
        p.add_argument("--json", action="store_true", help="print JSON")
        mod.add_arguments(p)
        p.set_defaults(func=lambda args, mod=mod: _run(mod, args))


def _run(mod, args) -> int:
    if getattr(args, "out", None):  # before the work whose results are written there
        check_output_file("--out", Path(args.out), example=f"{args.bench}.json")
    result = {**machine(), **mod.run(args)}
    emit(result, args.json)
    return 0
