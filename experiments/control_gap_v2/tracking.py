"""Tracking of the same actions on robosuite and here, from steps.py's files: the TCP gap (cm) between robosuite's
Panda and this simulator's Panda after every action, per action index and overall.

    .venv/bin/python experiments/control_gap_v2/tracking.py experiments/control_gap_v2/steps-lift-s9*.json
"""

from __future__ import annotations

import json
import sys

import numpy as np


def angle(q1, q2) -> float:
    """The angle (degrees) between two orientations given as unit quaternions (w, x, y, z)."""
    return float(np.degrees(2 * np.arccos(min(1.0, abs(float(np.dot(q1, q2)))))))


def gaps(path: str) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    d = json.load(open(path))
    per, rot = {}, []
    for r in d["rows"]:
        n = min(len(r["robosuite"]), len(r["here"]))
        for t in range(1, n):
            a, b = r["robosuite"][t], r["here"][t]
            per.setdefault(t, []).append(100 * np.linalg.norm(np.subtract(a["tcp"], b["tcp"])))
            if "quat" in a:
                rot.append(angle(a["quat"], b["quat"]))
    ts = sorted(per)
    return d.get("gain", 2.0), np.array([np.mean(per[t]) for t in ts]), np.concatenate([per[t] for t in ts]), np.array(rot)


def main(paths: list[str]) -> None:
    for p in paths:
        gain, by_t, every, rot = gaps(p)
        turn = f"; orientation gap mean {rot.mean():.1f}° (p90 {np.percentile(rot, 90):.1f}°)" if len(rot) else ""
        print(f"gain {gain}: TCP gap mean {every.mean():.2f} cm (median {np.median(every):.2f}, p90 "
              f"{np.percentile(every, 90):.2f}){turn}; by action 1-12: {' '.join(f'{g:.1f}' for g in by_t[:12])}  ({p})")


if __name__ == "__main__":
    main(sys.argv[1:])
