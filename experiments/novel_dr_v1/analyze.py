"""Paired B − A of novel DR v1 (PROTOCOL.md): in-distribution (decision) and OOD (reported), per seed and pooled
(± the episodes' s.e. and ± the s.e. over seeds), with the data-engine figures of each arm. Other decision
experiments of this session with the same design call `main` with their own arm folders.

    .venv/bin/python experiments/novel_dr_v1/analyze.py
"""

import json
import math
from pathlib import Path

from agent.experiment.metrics import paired_ood

HERE = Path(__file__).parent
SEEDS = (6, 7, 8)
ENGINE = ("targeting_precision", "critic_consistency", "targeted_success", "control_success", "cell_wall_seconds")
GRIDS = {6: "grid_v2b", 7: "grid_v2b", 8: "grid_v2b_s8"}


def cell(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def pooled(diffs: list[dict]) -> dict:
    n, pts = len(diffs), [d["points"] for d in diffs]
    mean = sum(pts) / n
    over = math.sqrt(sum((x - mean) ** 2 for x in pts) / (n - 1) / n) if n > 1 else None
    return {"points": mean, "se": math.sqrt(sum(d["se"] ** 2 for d in diffs)) / n, "se_over_seeds": over, "seeds": n}


def main(here: Path = HERE, arm_a: Path = HERE / "a", arm_b: Path = HERE / "b", seeds: tuple = SEEDS) -> None:
    out: dict = {}
    for seed in seeds:
        a, b = cell(arm_a / "cells" / f"coda-s{seed}.json"), cell(arm_b / "cells" / f"coda-s{seed}.json")
        if a is None or b is None:
            continue
        dr = cell(HERE.parent / GRIDS[seed] / "cells" / f"domain_rand-s{seed}.json") if here == HERE else None
        row = {"B - A in-distribution (in, seed)": paired_ood(a["eval_after"], b["eval_after"], suites=("in", "seed")),
               "B - A mean OOD": paired_ood(a["eval_after"], b["eval_after"])}
        if dr:
            row["B - grid DR mean OOD (indicative)"] = paired_ood(dr["eval_after"], b["eval_after"])
        row["engine"] = {arm: {k: c["metrics"].get(k) for k in ENGINE} for arm, c in (("A", a), ("B", b))}
        out[f"seed {seed}"] = row
    seeds = list(out.values())
    if seeds:
        keys = [k for k in seeds[0] if k != "engine" and all(k in s for s in seeds)]
        out["pooled"] = {k: pooled([s[k] for s in seeds]) for k in keys}
    for group, row in out.items():
        print(group)
        for k, v in row.items():
            if k == "engine":
                for arm, m in v.items():
                    print(f"  {arm}: " + ", ".join(f"{n} {x:.3g}" if isinstance(x, float) else f"{n} {x}"
                                                   for n, x in m.items()))
            else:
                over = f", ± {v['se_over_seeds']:.1f} over seeds" if v.get("se_over_seeds") is not None else ""
                print(f"  {k}: {v['points']:+.1f} ± {v['se']:.1f}{over}" + (f" ({v['seeds']} seeds)" if "seeds" in v else ""))
    (here / "analysis.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
