"""Paired B − A of rounds v1 (PROTOCOL.md): in-distribution (decision) and OOD (reported), per seed and pooled.

    .venv/bin/python experiments/rounds_v1/analyze.py
"""

import json
import math
from pathlib import Path

from agent.experiment.metrics import paired_ood

HERE = Path(__file__).parent
GRID = HERE.parent / "grid_v2" / "cells"
BASELINES = ("sft", "success_guided", "uniform", "domain_rand")


def cell(path: Path) -> list[dict] | None:
    return json.loads(path.read_text())["eval_after"] if path.exists() else None


def pooled(diffs: list[dict]) -> dict:
    """Mean of the seeds' paired differences, its s.e. from theirs (independent seeds)."""
    n = len(diffs)
    return {"points": sum(d["points"] for d in diffs) / n,
            "se": math.sqrt(sum(d["se"] ** 2 for d in diffs)) / n, "seeds": n}


def main() -> None:
    out: dict = {}
    for seed in (3, 4, 5):
        b = cell(HERE / "cells" / f"coda-s{seed}.json")
        if b is None:
            continue
        a = cell(GRID / f"coda-s{seed}.json")
        row = {"B - A in-distribution (in, seed)": paired_ood(a, b, suites=("in", "seed")),
               "B - A mean OOD": paired_ood(a, b)}
        for name in BASELINES:
            other = cell(GRID / f"{name}-s{seed}.json")
            if other is not None:
                row[f"B - {name} mean OOD"] = paired_ood(other, b)
                row[f"A - {name} mean OOD"] = paired_ood(other, a)
        out[f"seed {seed}"] = row
    seeds = list(out.values())
    if seeds:
        out["pooled"] = {k: pooled([s[k] for s in seeds]) for k in seeds[0] if all(k in s for s in seeds)}
    for group, row in out.items():
        print(group)
        for k, v in row.items():
            print(f"  {k}: {v['points']:+.1f} ± {v['se']:.1f}")
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
