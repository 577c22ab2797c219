"""Lift bimodal v1: robosuite Lift vs this simulator's mirror of the same episodes, for the twelve final policies of
external target v3 (A), external replicate v1 (Ar), novel uniform v1 (B) and external target v3b (G), seeds 9–11
(mirror/*.json, each from `../control_gap_v2/replay.py CHECKPOINT --n 10`, seed group 6) → mirror_table.json.

    .venv/bin/python experiments/lift_bimodal_v1/mirror_table.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
VARIANTS = ("hand", "hand_sign", "panda_sign", "panda_sign_rs_cube")


def main() -> None:
    rows = {}
    for p in sorted((HERE / "mirror").glob("*.json")):
        eps = json.loads(p.read_text())["rows"]
        rows[p.stem] = {"episodes": len(eps), "robosuite": sum(e["robosuite"]["success"] for e in eps),
                        "mirror_closed_loop": {v: sum(e[v]["closed_loop_success"] for e in eps) for v in VARIANTS},
                        "mirror_replay": {v: sum(e[v]["replay_success"] for e in eps) for v in VARIANTS}}
    rs = [r["robosuite"] for r in rows.values()]
    corr = {v: round(float(np.corrcoef(rs, [r["mirror_closed_loop"][v] for r in rows.values()])[0, 1]), 3)
            for v in VARIANTS}
    out = {"policies": rows, "correlation_robosuite_vs_mirror_closed_loop": corr}
    (HERE / "mirror_table.json").write_text(json.dumps(out, indent=1) + "\n")
    for k, r in rows.items():
        print(k, r["robosuite"], r["mirror_closed_loop"])
    print(corr)


if __name__ == "__main__":
    main()
