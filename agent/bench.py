"""Failure critic on a labelled benchmark: factor and phase accuracy on planted difficulties (`coda bench critic`).

Planted difficulties (`agent.roles.planted`) make failed rollouts whose true (δ, phase) is known from the
perturbation; the offline critic (or an LLM critic) diagnoses each from its trace alone.
"""

from __future__ import annotations

import time
from collections import Counter

from agent.roles.critic import Critic, CriticContext, OfflineCritic
from agent.roles.planted import generate
from sim.evidence.timeline import build_evidence


def add_arguments(parser) -> None:
    parser.add_argument("--n", type=int, default=200, help="failed rollouts to diagnose")
    parser.add_argument("--seed", type=int, default=0, help="benchmark seed (scenes and perturbations)")
    parser.add_argument("--families", default="pick_place,stack,articulated,prep", help="comma-separated families")
    parser.add_argument("--backend", default="offline", help="offline | anthropic | openai")
    parser.add_argument("--model", default=None)
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--errors", type=int, default=10, help="misdiagnosed rollouts listed in the output")


def evaluate(n: int, seed: int = 0, families=("pick_place", "stack", "articulated", "prep"),
             critic: Critic | None = None, n_errors: int = 10) -> dict:
    """Generate `n` failed labelled rollouts, diagnose them, and score factor / phase accuracy."""
    critic = critic or OfflineCritic()
    context = CriticContext()
    confusion: Counter = Counter()
    per_kind: dict[str, list[int]] = {}
    errors, total, factor_ok, phase_ok, both_ok = [], 0, 0, 0, 0
    t0 = time.perf_counter()
    for item in generate(n, seed=seed, families=tuple(families)):
        ev = build_evidence(item.trace, ranges=context.ranges)
        d = critic.diagnose(item.trace, ev, context)
        total += 1
        f_ok, p_ok = d.factor == item.factor, d.phase == item.phase
        factor_ok += f_ok
        phase_ok += p_ok
        both_ok += f_ok and p_ok
        confusion[f"{item.factor}->{d.factor}"] += 1
        stats = per_kind.setdefault(item.kind, [0, 0, 0])
        stats[0] += 1
        stats[1] += f_ok
        stats[2] += p_ok
        if not (f_ok and p_ok) and len(errors) < n_errors:
            errors.append({"family": item.family, "seed": item.seed, "kind": item.kind,
                           "label": f"{item.factor}/{item.phase}", "got": f"{d.factor}/{d.phase}", "cause": d.cause})
    seconds = time.perf_counter() - t0
    return {
        "n_failed_rollouts": total,
        "factor_accuracy": round(factor_ok / total, 4) if total else None,
        "phase_accuracy": round(phase_ok / total, 4) if total else None,
        "joint_accuracy": round(both_ok / total, 4) if total else None,
        "confusion": dict(sorted(confusion.items())),
        "per_kind": {k: {"n": v[0], "factor_acc": round(v[1] / v[0], 3), "phase_acc": round(v[2] / v[0], 3)}
                     for k, v in sorted(per_kind.items())},
        "seconds": round(seconds, 1),
        "errors": errors,
    }


def run(args) -> dict:
    from agent.roles.factory import make_roles

    roles = make_roles(args.backend, model=args.model, base_url=args.base_url)
    families = tuple(f for f in args.families.split(",") if f)
    out = {"backend": args.backend, "seed": args.seed,
           **evaluate(args.n, seed=args.seed, families=families, critic=roles.critic, n_errors=args.errors)}
    if args.backend != "offline":
        out["tokens"] = roles.ledger.role("critic")
    return out
