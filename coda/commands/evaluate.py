"""`coda eval`: success rate ± standard error of a checkpoint on a family's evaluation suite."""

from __future__ import annotations

from pathlib import Path

from coda.cli import emit
from coda.options import (
    add_executor_arguments,
    executor_from_args,
    family_choices,
    positive_int,
    suite_choices,
)


def register(sub, name: str) -> None:
    p = sub.add_parser(name, help="evaluate a policy checkpoint on in-distribution or OOD suites")
    p.add_argument("--policy", required=True, help="checkpoint (.pt)")
    p.add_argument("--family", required=True, choices=family_choices())
    p.add_argument("--suite", default="in", choices=suite_choices(), help="in-distribution, an OOD suite, or all")
    p.add_argument("--n", type=positive_int, default=30, help="scenes per suite")
    p.add_argument("--mode", default="mean", choices=("mean", "critic"),
                   help="mean (deterministic) | critic (j=8 samples, Q-softmax; needs a checkpoint with a critic)")
    p.add_argument("--json", action="store_true")
    add_executor_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from policy.checkpoint import load_checkpoint
    from policy.evaluate import evaluate
    from sim.suites import SUITES

    state = load_checkpoint(Path(args.policy))
    suites = SUITES if args.suite == "all" else [args.suite]
    with executor_from_args(args) as executor:
        results = [evaluate(state.policy, args.family, s, args.n, critic=state.critic, mode=args.mode,
                            device=state.device, executor=executor) for s in suites]
    emit(results[0] if len(results) == 1 else {"suites": results}, args.json)
    return 0
