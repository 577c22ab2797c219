"""Round decision v8 (Text2potential with a competent base): v6's reads on this run, plus the premise check (the
base's own rollout success). Run from the repository root: `python experiments/round_decision_v8/analyze.py`."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

HERE = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("v6", HERE.parent / "round_decision_v6" / "analyze.py")
v6 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(v6)
READS = (("dt_shaped_filtered_mix", "dt_filtered_mix"), ("dt_shaped_filtered_mix", "dt_failed_mix"),
         ("dt_filtered_mix", "dt_failed_mix"))
PREMISE = {"pick_place": 0.40, "stack": 0.25}
"""the protocol's least own-rollout success of the base on the round scenes"""


def main() -> dict:
    out = {}
    for fam, runs, arms, base in v6.families(HERE):
        rollout_success = [round(s["own_successes"] / s["rollouts"], 3) for s in runs]
        summary_path = HERE / f"{fam}.summary.json"
        summary = json.loads(summary_path.read_text())["arms"] if summary_path.stat().st_size else {}
        out[fam] = {
            "seeds": [s["seed"] for s in runs],
            "premise_met": all(x >= PREMISE[fam] for x in rollout_success), "rollout_success": rollout_success,
            "base": [round(100 * float(b.mean()), 1) for b in base],
            "arms": {a: {**v6.success(m, base), **({"curve": summary[a].get("curve"),
                             "updates_to_base_plus_5": summary[a]["updates_to_base_plus_5"]} if a in summary else {})}
                     for a, m in arms.items()},
            "paired": {f"{x} - {y}": v6.paired(arms[x], arms[y]) for x, y in READS},
            "positive_share": {a: [r.get("positive_share") for s in runs for r in s["arms"][a]["replicates"]]
                               for a in ("dt_filtered_mix", "dt_shaped_filtered_mix")},
        }
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
