"""Paired B − A of recreate v1 (PROTOCOL.md): in-distribution (decision) and OOD (reported), per seed and pooled,
with the data-engine figures of each arm.

    .venv/bin/python experiments/recreate_v1/analyze.py
"""

import json
import math
from pathlib import Path

from agent.experiment.metrics import paired_ood

HERE = Path(__file__).parent
ENGINE = ("targeting_precision", "critic_consistency", "targeted_success", "control_success", "validated",
          "refuted", "cell_wall_seconds")


def cell(arm: str, seed: int) -> dict | None:
    path = HERE / arm / "cells" / f"coda-s{seed}.json"
    return json.loads(path.read_text()) if path.exists() else None


def pooled(diffs: list[dict]) -> dict:
    n = len(diffs)
    return {"points": sum(d["points"] for d in diffs) / n, "se": math.sqrt(sum(d["se"] ** 2 for d in diffs)) / n,
            "seeds": n}


def main() -> None:
    out: dict = {}
    for seed in (3, 4):
        a, b = cell("a", seed), cell("b", seed)
        if a is None or b is None:
            continue
        out[f"seed {seed}"] = {
            "B - A in-distribution (in, seed)": paired_ood(a["eval_after"], b["eval_after"], suites=("in", "seed")),
            "B - A mean OOD": paired_ood(a["eval_after"], b["eval_after"]),
            "engine": {arm: {k: c["metrics"].get(k) for k in ENGINE} for arm, c in (("A", a), ("B", b))}}
    seeds = [v for v in out.values()]
    if seeds:
        out["pooled"] = {k: pooled([s[k] for s in seeds]) for k in seeds[0] if k != "engine"}
    for group, row in out.items():
        print(group)
        for k, v in row.items():
            if k == "engine":
                for arm, m in v.items():
                    print(f"  {arm}: " + ", ".join(f"{n} {x:.3g}" if isinstance(x, float) else f"{n} {x}"
                                                   for n, x in m.items()))
            else:
                print(f"  {k}: {v['points']:+.1f} ± {v['se']:.1f}" + (f" ({v['seeds']} seeds)" if "seeds" in v else ""))
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
