"""Round decision v10: phase-weighted planner demonstrations against unweighted and randomly weighted ones,
with the reproducibility check against v7.
Run from the repository root: `python experiments/round_decision_v10/analyze.py`."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("v6", HERE.parent / "round_decision_v6" / "analyze.py")
v6 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(v6)
READS = (("dt_failed_phase_mix", "dt_failed_mix"), ("dt_failed_phase_mix", "dt_failed_randphase_mix"),
         ("dt_failed_randphase_mix", "dt_failed_mix"))


def main() -> dict:
    out = {}
    for fam, runs, arms, base in v6.families(HERE):
        same = v6.same_replicates(runs, HERE.parent / "round_decision_v7", fam)
        out[fam] = {
            "reproduces_v7": same,
            "base": round(100 * float(np.mean(np.concatenate(base))), 1),
            "arms": {a: v6.success(m, base) for a, m in arms.items()},
            "paired": {f"{x} - {y}": v6.paired(arms[x], arms[y]) for x, y in READS},
            "failed_scenes": [s["failed_scenes"] for s in runs],
            "phase_weighting": [s.get("phase_weighting") for s in runs],
        }
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
