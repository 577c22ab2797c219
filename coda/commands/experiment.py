"""`coda experiment`: methods × seeds at the same accepted-environment budget, resumable cell by cell, with tables.

    coda experiment --methods sft,domain_rand,uniform,success_guided,no_memory,coda,sparse --seeds 3 \\
        --preset quick --out experiments/quick
    coda experiment ... --resume          # continue: finished cells are skipped
    coda experiment --tables --out DIR    # only rewrite DIR/results.md|json and the plot
    coda experiment --tables --out POOLED --pool DIR1 --pool DIR2   # the cells of two experiments together
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from coda.cli import emit
from coda.options import add_target_argument, check_target, positive_int


def seed_list(text: str) -> list[int]:
    """'3' -> [0, 1, 2]; '1,2' -> [1, 2]; every seed one a run may take (`agent.presets.RUN_SEEDS`), checked here so
    that nothing (no base policy) is trained for a cell that cannot run."""
    from agent.presets import RUN_SEEDS

    try:
        if "," not in text:
            n = int(text)
            if n < 1:
                raise ValueError
            if n > len(RUN_SEEDS):  # before the list is built: a huge N would overflow or fill the memory
                raise argparse.ArgumentTypeError(f"seeds must be in 0..{RUN_SEEDS[-1]}, so N is at most "
                                                 f"{len(RUN_SEEDS)}; got {n}")
            seeds = list(range(n))
        else:
            seeds = [int(x) for x in text.split(",") if x.strip()]
            if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
                raise ValueError
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a count N >= 1 or distinct seeds like 1,2; got {text!r}") from None
    if bad := [s for s in seeds if s not in RUN_SEEDS]:
        raise argparse.ArgumentTypeError(f"seeds must be in 0..{RUN_SEEDS[-1]} (each run's scenes have their own block "
                                         f"of sampler seeds); got {', '.join(map(str, bad))}")
    return seeds


def register(sub, name: str) -> None:
    from agent.presets import RUN_SEEDS

    p = sub.add_parser(name, help="run methods x seeds (resumable cell by cell) and write the results tables")
    p.add_argument("--methods", default=None,
                   help="comma-separated methods (see `coda experiment --list`; default: the main table's, "
                        "agent.methods.MAIN)")
    p.add_argument("--seeds", type=seed_list, default=seed_list("3"),
                   help=f"N (seeds 0..N-1, N <= {len(RUN_SEEDS)}) or a comma-separated list of seeds in "
                        f"0..{RUN_SEEDS[-1]}, e.g. 1,2: processes that run different seeds can share one --out "
                        "(finished cells are shared; base policies are per seed)")
    p.add_argument("--preset", default="quick", help="tiny | quick | protocol | paper (with the experiment budget overrides)")
    p.add_argument("--families", default=None, help="comma-separated subset of families")
    p.add_argument("--rounds", type=positive_int, default=None,
                   help="override the number of rounds (at most 5 for seeds 1-9, 9 for seeds 10 and up)")
    p.add_argument("--out", default=None, help="experiment directory (required unless --list)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="change a budget of the preset, e.g. --set targeted_per_family=24,rollouts_per_scene=4 "
                        "(repeatable; keys: agent.presets.SETTABLE)")
    add_target_argument(p)
    p.add_argument("--resume", action="store_true", help="continue DIR: finished cells are skipped")
    p.add_argument("--transfer", action="store_true",
                   help="also run the transfer cells (backbone memory transfer, program transfer across families)")
    p.add_argument("--transfer-seeds", type=seed_list, default=None,
                   help="N or a comma-separated list: seeds of the transfer cells (default: all)")
    p.add_argument("--threshold-gain", type=float, default=None,
                   help="Text2potential table: threshold = base mean OOD success + this (default "
                        "agent.experiment.common.THRESHOLD_GAIN, 0.05)")
    p.add_argument("--embedder", choices=["minilm", "hashing"], default=None,
                   help="memory server embedder (hashing: fast, for tests)")
    p.add_argument("--tables", action="store_true", help="only rewrite the tables of --out from its finished cells")
    p.add_argument("--pool", action="append", default=[], metavar="DIR",
                   help="with --tables: the tables of these experiments' cells together, written to --out (a new "
                        "folder; repeatable; their seeds must differ)")
    p.add_argument("--list", action="store_true", help="list the methods and their switches")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    from agent.experiment import run_experiment, write_tables
    from agent.experiment.common import THRESHOLD_GAIN
    from agent.methods import MAIN, METHODS
    from agent.presets import check_rounds, cli_overrides, experiment_preset

    if args.list:
        rows = {m.name: m.summary for m in METHODS.values()}
        emit({k: v for k, v in rows.items()} if not args.json else {m: METHODS[m].to_dict() for m in rows},
             args.json)
        return 0
    if not args.out:
        print("coda experiment: --out DIR is required", file=sys.stderr)
        return 2
    out = Path(args.out)
    threshold_gain = THRESHOLD_GAIN if args.threshold_gain is None else args.threshold_gain
    if args.pool and not args.tables:
        print("coda experiment: --pool goes with --tables", file=sys.stderr)
        return 2
    if args.tables:
        missing = [d for d in args.pool if not (Path(d) / "experiment.json").exists()]
        if missing:
            print(f"coda experiment: --pool {missing[0]} is not an experiment folder (no experiment.json)",
                  file=sys.stderr)
            return 2
        try:
            t = write_tables(out, threshold_gain, sources=args.pool or None)
        except ValueError as exc:
            print(f"coda experiment: {exc}", file=sys.stderr)
            return 2
        emit({"results": str(out / "results.md"), "cells": len(t["cells"]), "pending": len(t["pending_cells"])},
             args.json)
        return 0
    methods = list(MAIN) if args.methods is None else [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        print(f"coda experiment: unknown methods {unknown}; valid: {', '.join(METHODS)}", file=sys.stderr)
        return 2
    try:
        preset = experiment_preset(args.preset, **cli_overrides(args))
        check_target(preset.external)
        check_rounds(preset.rounds, [*args.seeds, *(args.transfer_seeds or [])])
    except ValueError as exc:
        print(f"coda {args.command}: {exc}", file=sys.stderr)
        return 2
    seeds, transfer_seeds = args.seeds, args.transfer_seeds
    try:
        t = run_experiment(out, methods, seeds, preset, resume=args.resume, transfer=args.transfer,
                           transfer_seeds=transfer_seeds, embedder=args.embedder, threshold_gain=threshold_gain,
                           command="coda " + " ".join(shlex.quote(a) for a in sys.argv[1:]))
    except (FileExistsError, ValueError) as exc:
        print(f"coda experiment: {exc}", file=sys.stderr)
        return 2
    summary = {"results": str(out / "results.md"), "cells": len(t["cells"]), "pending": t["pending_cells"],
               "failed": t.get("failed_cells", [])}
    summary.update({f"mean_ood[{m}]": (None if v["mean"][0] is None else round(100 * v["mean"][0], 1))
                    for m, v in t["ood"].items()})
    emit(summary, args.json)
    return 1 if t.get("failed_cells") else 0
