"""External takeover v1: PROTOCOL.md's table — K (external_takeover) against the mean of external target v3's CoDA
(A) and its training replicate (A′), per seed, on robosuite's four tasks and this simulator → analysis.json."""

from __future__ import annotations

import json
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXP = HERE.parent
ARMS = {"K": HERE, "A": EXP / "external_target_v3", "Ar": EXP / "external_replicate_v1"}
SEEDS = (9, 10, 11)


def cell(arm: str, seed: int) -> dict | None:
    p = ARMS[arm] / "cells" / f"coda-s{seed}.json"
    return json.loads(p.read_text()) if p.exists() else None


def robo(c: dict) -> float:
    return 100 * c["external_mean"]


def lift(c: dict) -> float:
    return 100 * c["external"]["robosuite:Lift"]


def sim(c: dict) -> float:
    return 100 * c["in_dist"]


def mean_se(xs: list[float]) -> tuple[float, float]:
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, float("nan")
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs))


def takeover(seed: int) -> dict:
    p = HERE / "runs" / f"coda-s{seed}" / "state.json"
    if not p.exists():
        return {}
    steps = json.loads(p.read_text())["steps"]
    return {k: {x: v for x, v in steps[k]["result"]["takeover"].items() if x in ("scenes", "failed", "certified")}
            for k in ("r1.train", "r2.train") if "takeover" in steps.get(k, {}).get("result", {})}


def main() -> None:
    rows, deltas, sims, lifts = {}, [], [], []
    for s in SEEDS:
        k, a, ar = cell("K", s), cell("A", s), cell("Ar", s)
        if k is None:
            continue

        def ref(f, a=a, ar=ar):  # the mean of the reference arm's two replicates
            return (f(a) + f(ar)) / 2

        row = {"K": {"robosuite": robo(k), "tasks": k["external"], "in_dist": sim(k), "mean_ood": 100 * k["mean_ood"],
                     "phases": k["external_phases"]},
               "A": {"robosuite": robo(a), "tasks": a["external"], "in_dist": sim(a), "phases": a["external_phases"]},
               "Ar": {"robosuite": robo(ar), "tasks": ar["external"], "in_dist": sim(ar), "phases": ar["external_phases"]},
               "delta_robosuite": robo(k) - ref(robo), "delta_lift": lift(k) - ref(lift),
               "delta_in_dist": sim(k) - ref(sim), "takeover": takeover(s), "commit": k["commit"]}
        rows[s] = row
        deltas.append(row["delta_robosuite"])
        sims.append(row["delta_in_dist"])
        lifts.append(row["delta_lift"])
    out = {"seeds": rows}
    if deltas:
        d, se = mean_se(deltas)
        e = sum(sims) / len(sims)
        verdict = ("adopt" if d >= 5 and d >= 2 * se and e >= -3 else "reject" if d <= 0 else "inconclusive")
        out["summary"] = {"seeds": len(deltas), "delta_robosuite": d, "se": se, "delta_in_dist": e,
                          "delta_lift": mean_se(lifts), "verdict": verdict if len(deltas) == 3 else "pending"}
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1))
    print(json.dumps(out.get("summary"), indent=1))
    for s, r in rows.items():
        print(s, {arm: round(r[arm]["robosuite"], 1) for arm in ("K", "A", "Ar")},
              {x: round(r[x], 1) for x in ("delta_robosuite", "delta_lift", "delta_in_dist")}, r["takeover"])


if __name__ == "__main__":
    main()
