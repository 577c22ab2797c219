"""Round takeover v1: PROTOCOL.md's rule — R (round_takeover) against C (CoDA rerun here, `c/`), per seed, on this
simulator's mean OOD and in-distribution → analysis.json (printed). The verdict needs all six seeds."""

from __future__ import annotations

import json
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEEDS = (9, 10, 11, 12, 13, 14)


def cell(folder: Path, seed: int) -> dict | None:
    p = folder / "cells" / f"coda-s{seed}.json"
    return json.loads(p.read_text()) if p.exists() else None


def mean_se(xs: list[float]) -> tuple[float, float]:
    m = sum(xs) / len(xs)
    return m, (math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs)) if len(xs) > 1 else float("nan"))


def main() -> None:
    rows = {}
    for s in SEEDS:
        r, c = cell(HERE, s), cell(HERE / "c", s)
        if r is None or c is None:
            continue
        fam = {f: 100 * (r["ood"][f] - c["ood"][f]) for f in r["ood"]}
        steps = json.loads((HERE / "runs" / f"coda-s{s}" / "state.json").read_text())["steps"] \
            if (HERE / "runs" / f"coda-s{s}" / "state.json").exists() else {}
        windows = {k: {x: v for x, v in steps[k]["result"]["takeover_rollouts"].items() if x in ("failed", "certified")}
                   for k in ("r0.train", "r1.train", "r2.train") if "takeover_rollouts" in steps.get(k, {}).get("result", {})}
        rows[s] = {"R": {"mean_ood": 100 * r["mean_ood"], "in_dist": 100 * r["in_dist"]},
                   "C": {"mean_ood": 100 * c["mean_ood"], "in_dist": 100 * c["in_dist"]},
                   "d_ood": 100 * (r["mean_ood"] - c["mean_ood"]), "d_in": 100 * (r["in_dist"] - c["in_dist"]),
                   "d_ood_by_family": fam, "windows": windows, "commits": [r["commit"], c["commit"]]}
    out = {"seeds": rows}
    if rows:
        d, se = mean_se([x["d_ood"] for x in rows.values()])
        e = sum(x["d_in"] for x in rows.values()) / len(rows)
        verdict = "adopt" if d >= 3 and d >= 2 * se and e >= -3 else "reject" if d <= 0 else "inconclusive"
        out["summary"] = {"seeds": len(rows), "d_ood": d, "se": se, "d_in": e,
                          "verdict": verdict if len(rows) == len(SEEDS) else f"pending ({len(rows)} of {len(SEEDS)} seeds)"}
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1))
    print(json.dumps(out.get("summary"), indent=1))
    for s, x in rows.items():
        print(s, x["R"], x["C"], round(x["d_ood"], 1), round(x["d_in"], 1), x["windows"])


if __name__ == "__main__":
    main()
