"""Failure critic on a labelled benchmark: factor and phase accuracy on planted difficulties (`coda bench critic`).

Planted difficulties (`sim.engine.planted`, served by the sim server's `plant_failures`) make failed rollouts whose
true (δ, phase) is known from the perturbation; the offline critic (or an LLM critic) diagnoses each from its
evidence alone.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from agent.hub import Hub, stdio_specs
from agent.roles.critic import Critic, OfflineCritic
from sim.constants import FAMILIES
from sim.evidence.models import Evidence

PAGE = 25
"""failed rollouts per plant_failures call"""


def add_arguments(parser) -> None:
    parser.add_argument("--n", type=int, default=200, help="failed rollouts to diagnose")
    parser.add_argument("--seed", type=int, default=0, help="benchmark seed (scenes and perturbations)")
    parser.add_argument("--families", type=_families, default="pick_place,stack,articulated,prep",
                        help="comma-separated families")
    parser.add_argument("--backend", default="offline", help="offline | anthropic | openai")
    parser.add_argument("--model", default=None)
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--errors", type=int, default=10, help="misdiagnosed rollouts listed in the output")


def _families(text: str) -> tuple[str, ...]:
    """argparse type for --families: a typo fails at once, not as a sim server error after it has started."""
    names = tuple(f.strip() for f in text.split(",") if f.strip())
    unknown = [f for f in names if f not in FAMILIES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"unknown families {', '.join(unknown) or '(none)'}; valid families: "
                                         f"{', '.join(FAMILIES)}")
    return names


@contextmanager
def sim_hub() -> Iterator[Hub]:
    """A sim server of its own (stdio, in a scratch run directory)."""
    with tempfile.TemporaryDirectory(prefix="coda-bench-critic-") as run_dir, \
            Hub(stdio_specs(run_dir, names=("sim",))) as hub:
        yield hub


def planted(hub: Hub, n: int, seed: int, families) -> Iterator[dict]:
    """Up to `n` failed labelled rollouts from the sim server (the planted generator's try limit: 8 n + 40)."""
    start, stop, made = 0, 8 * n + 40, 0
    while made < n and start < stop:
        page = hub.call("sim", "plant_failures", {"n": min(PAGE, n - made), "seed": seed, "families": list(families),
                                                  "start": start, "stop": stop}).data
        made += len(page["failures"])
        start = page["next_start"]
        yield from page["failures"]


def evaluate(n: int, seed: int = 0, families=("pick_place", "stack", "articulated", "prep"),
             critic: Critic | None = None, n_errors: int = 10, hub: Hub | None = None) -> dict:
    """Generate `n` failed labelled rollouts, diagnose them, and score factor / phase accuracy. Without `hub`, a sim
    server is started for the run."""
    if hub is None:
        with sim_hub() as own:
            return evaluate(n, seed, families, critic, n_errors, own)
    critic = critic or OfflineCritic()
    confusion: Counter = Counter()
    per_kind: dict[str, list[int]] = {}
    errors, total, factor_ok, phase_ok, both_ok = [], 0, 0, 0, 0
    t0 = time.perf_counter()
    for item in planted(hub, n, seed, tuple(families)):
        d = critic.diagnose(Evidence.model_validate(item["evidence"]))
        factor, phase, kind = item["factor"], item["phase"], item["kind"]
        total += 1
        f_ok, p_ok = d.factor == factor, d.phase == phase
        factor_ok += f_ok
        phase_ok += p_ok
        both_ok += f_ok and p_ok
        confusion[f"{factor}->{d.factor}"] += 1
        stats = per_kind.setdefault(kind, [0, 0, 0])
        stats[0] += 1
        stats[1] += f_ok
        stats[2] += p_ok
        if not (f_ok and p_ok) and len(errors) < n_errors:
            errors.append({"family": item["family"], "seed": item["seed"], "kind": kind,
                           "label": f"{factor}/{phase}", "got": f"{d.factor}/{d.phase}", "cause": d.cause})
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
    families = tuple(args.families)
    out = {"backend": args.backend, "seed": args.seed,
           **evaluate(args.n, seed=args.seed, families=families, critic=roles.critic, n_errors=args.errors)}
    if args.backend != "offline":
        out["tokens"] = roles.ledger.role("critic")
    return out
