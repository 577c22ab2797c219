"""Agreement tables of control gap v2's raw files: success on robosuite vs the replays and closed loops here.

    .venv/bin/python experiments/control_gap_v2/summarize.py experiments/control_gap_v2/lift-s9.json
"""

from __future__ import annotations

import json
import sys

import numpy as np


def main(path: str) -> None:
    d = json.load(open(path))
    rows = d["rows"]
    variants = [k for k in rows[0] if isinstance(rows[0][k], dict) and "replay_success" in rows[0][k]]
    rs = np.array([r["robosuite"]["success"] for r in rows])
    print(f"{path}: {len(rows)} episodes, robosuite {rs.sum()}")
    for v in variants:
        rep = np.array([r[v]["replay_success"] for r in rows])
        cl = np.array([r[v]["closed_loop_success"] for r in rows])
        gap1 = [100 * np.linalg.norm(np.subtract(r["robosuite"]["path"][1]["tcp"], r[v]["path"][1]["tcp"])) for r in rows]
        open1 = [r["robosuite"]["path"][1]["open"] - r[v]["path"][1]["open"] for r in rows]
        print(f"  {v:20s} replay {rep.sum():2d} (both {int((rep & rs).sum())}, rs only {int((rs & ~rep).sum())}, "
              f"here only {int((rep & ~rs).sum())}); closed loop {cl.sum():2d}; after chunk 1: TCP gap median "
              f"{np.median(gap1):.1f} cm, opening rs − here median {np.median(open1):+.2f}")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        main(p)
