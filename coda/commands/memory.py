"""`coda memory ls|show ID|modes|export DIR|import DIR`: inspect and move the shared memory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from coda.cli import emit

DEFAULT_STORE = "runs/default/memory"


def register(sub, name: str) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store", default=DEFAULT_STORE, help=f"store path or LanceDB URI (default {DEFAULT_STORE})"
    )
    common.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser(name, help="inspect, export and import the shared memory")
    actions = p.add_subparsers(dest="memory_command", required=True)
    actions.add_parser("ls", parents=[common], help="rows and versions per table")
    show = actions.add_parser("show", parents=[common], help="one record by id (any table)")
    show.add_argument("id")
    modes = actions.add_parser("modes", parents=[common], help="difficulty modes, hardest first")
    modes.add_argument("--status", choices=["candidate", "validated", "refuted"], default=None)
    export = actions.add_parser(
        "export", parents=[common], help="write every table to DIR (JSON lines + manifest)"
    )
    export.add_argument("dir")
    imp = actions.add_parser("import", parents=[common], help="merge an export from DIR (idempotent)")
    imp.add_argument("dir")
    p.set_defaults(func=run)


def _mode_row(m) -> dict:
    return {
        "id": m.id,
        "factor": m.factor,
        "phase": m.phase,
        "status": m.status,
        "members": m.members,
        "hardness": m.hardness,
        "importance": round(m.importance, 4),
        "visits": m.visits,
        "in_band": m.in_band,
        "description": m.description,
    }


READ_ONLY = ("ls", "show", "modes", "export")
"""commands that only read the store: they never create one (a wrong --store is an error, not a new store)"""


def run(args: argparse.Namespace) -> int:
    from memory_store.store import MemoryStore, where_eq

    command = args.memory_command
    export = None
    if command == "import":  # the whole export is checked first: a bad one creates no store and merges nothing
        from memory_store.transfer import read_export

        export = read_export(Path(args.dir))
    try:
        store = MemoryStore.open(args.store, create=command not in READ_ONLY)
    except OSError as exc:
        print(f"coda memory {command}: {exc}", file=sys.stderr)
        return 1
    if command == "ls":
        payload = {
            name: {"rows": n, "version": store.table(name).version} for name, n in store.counts().items()
        }
        if not args.json:
            payload = {name: f"{v['rows']} rows (version {v['version']})" for name, v in payload.items()}
        emit({"store": store.uri, **payload}, args.json)
    elif command == "show":
        found = store.find(args.id)
        if found is None:
            print(f"coda memory show: no record with id {args.id!r} in {store.uri}; `coda memory modes` lists "
                  "the mode ids, `coda memory export DIR` writes every record with its id", file=sys.stderr)
            return 1
        table, record = found
        data = record.model_dump(mode="json")
        for key in ("embedding", "centroid"):
            if key in data and not args.json:
                data[key] = f"<{len(data[key])} floats>"
        emit({"table": table, **data}, args.json)
    elif command == "modes":
        modes = store.records("modes", where_eq(status=args.status))
        modes.sort(key=lambda m: (m.hardness if m.hardness is not None else 0.5, m.id))
        rows = [_mode_row(m) for m in modes]
        if args.json:
            emit(rows, True)
        else:
            for r in rows:
                hard = "  -  " if r["hardness"] is None else f"{r['hardness']:.2f}"
                emit(
                    f"{r['id']}  {r['factor']}/{r['phase']}  {r['status']}  p̂={hard}  w={r['importance']:+.3f}"
                    f"  n={r['visits']}  members={r['members']}  {r['description']}",
                    False,
                )
            if not rows:
                emit("no modes", False)
    elif command == "export":
        manifest = store.export(args.dir)
        emit({"dir": args.dir, **{n: t["rows"] for n, t in manifest["tables"].items()}}, args.json)
    elif command == "import":
        from memory_store.transfer import merge_export

        summary = merge_export(store, export)
        emit({"dir": args.dir, **summary}, args.json)
    return 0
