"""Canonical yaw v1's analysis (PROTOCOL.md): canonical − raw, paired per robosuite episode → analysis.json.

    .venv/bin/python experiments/canonical_yaw_v1/analyze.py
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
A, B = "canonical", "raw"


def paired(d: np.ndarray) -> dict:
    return {"mean": round(100 * float(d.mean()), 2), "se": round(100 * float(d.std(ddof=1) / math.sqrt(len(d))), 2),
            "n": int(len(d))}


def compare(raw: dict, names: list[str], task: str | None = None) -> dict:
    rows = {arm: np.asarray([x for p in names for t in raw["tasks"] if task in (None, t)
                             for x in raw["policies"][p][arm][t]], dtype=float) for arm in (A, B)}
    return {B: round(100 * float(rows[B].mean()), 1), A: round(100 * float(rows[A].mean()), 1),
            "difference": paired(rows[A] - rows[B])}


def main() -> None:
    raw = json.loads((HERE / "raw.json").read_text())
    names = [p for p, v in raw["policies"].items() if A in v and B in v]
    primary = compare(raw, names)
    d = primary["difference"]
    out = {"commit": raw["commit"], "policies": names, "primary": primary,
           "per_task": {t: compare(raw, names, t) for t in raw["tasks"]},
           "per_policy": {p: compare(raw, [p]) for p in names},
           "decision": "adopt canonical_yaw" if d["mean"] > 0 and d["mean"] > 2 * d["se"] else "raw stays"}
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
