"""`coda verify PROGRAM.py`: run a scene program in the sandbox and verify the scene it builds."""

from __future__ import annotations

from pathlib import Path

from coda.cli import emit


def register(sub, name: str) -> None:
    p = sub.add_parser(name, help="verify a scene program (exit code 1 when a check fails)")
    p.add_argument("program", help="path to a scene program (.py)")
    p.add_argument("--seed", type=int, default=0, help="value of `seed` inside the program")
    p.add_argument("--planner", action="store_true", help="also require the scripted planner to solve it")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    from sim.verify import verify_program

    path = Path(args.program)
    if not path.is_file():
        raise SystemExit(f"no such program: {path}")
    report = verify_program(path.read_bytes(), seed=args.seed, planner=args.planner)
    if args.json:
        emit(report.model_dump(mode="json", exclude={"spec"}), True)
    else:
        for c in report.checks:
            mark = "ok  " if c.passed else "FAIL"
            print(f"{mark} {c.name}" + (f": {c.message}" if c.message else ""))
        print("PASSED" if report.passed else "FAILED")
    return 0 if report.passed else 1
