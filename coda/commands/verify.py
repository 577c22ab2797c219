"""`coda verify PROGRAM.py`: run a scene program in the sandbox and verify the scene it builds."""

from __future__ import annotations

from pathlib import Path

from coda.cli import emit
from coda.options import MAX_COUNT, MAX_SEED, count_int, seed_int


def register(sub, name: str) -> None:
    p = sub.add_parser(name, help="verify a scene program (exit code 1 when a check fails)")
    p.add_argument("program", help="path to a scene program (.py)")
    p.add_argument("--seed", type=seed_int, default=0,
                   help=f"value of `seed` inside the program (the first, with --seeds; 0..{MAX_SEED})")
    p.add_argument("--seeds", type=count_int, default=1,
                   help=f"verify K seeds, --seed .. --seed+K-1 (programs that draw from scene.rng need several; "
                        f"1..{MAX_COUNT})")
    p.add_argument("--planner", action="store_true", help="also require the scripted planner to solve it")
    p.add_argument("--train-side", action="store_true",
                   help="also refuse what the OOD suites hold out (categories, instances, seed layouts, task "
                        "templates), as the loop does for every environment it trains on")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    from sim.verify import verify_programs

    path = Path(args.program)
    if path.is_dir():
        raise ValueError(f"{path} is a folder; coda verify takes one program (coda eval --programs takes folders)")
    if not path.is_file():
        raise ValueError(f"{path}: no such scene program")
    seeds = list(range(args.seed, args.seed + args.seeds))
    source = path.read_bytes()
    reports = list(verify_programs([(source, s) for s in seeds], planner=args.planner, train_side=args.train_side))
    if args.json:
        rows = [{"seed": s, **r.model_dump(mode="json", exclude={"spec"})} for s, r in zip(seeds, reports, strict=True)]
        emit(rows[0] if len(rows) == 1 else {"passed": all(r.passed for r in reports), "seeds": rows}, True)
    else:
        for s, report in zip(seeds, reports, strict=True):
            if len(seeds) > 1:
                print(f"seed {s}:")
            for c in report.checks:
                mark = "ok  " if c.passed else "FAIL"
                print(f"{mark} {c.name}" + (f": {c.message}" if c.message else ""))
        failed = [s for s, r in zip(seeds, reports, strict=True) if not r.passed]
        print("PASSED" if not failed else "FAILED" + (f" (seeds {', '.join(map(str, failed))})" if len(seeds) > 1 else ""))
    return 0 if all(r.passed for r in reports) else 1
