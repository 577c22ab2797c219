"""Settle v1's analysis (PROTOCOL.md): paired settle − none per episode over the two policies → analysis.json.

    .venv/bin/python experiments/settle_v1/analyze.py
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
A, B = "settle=10", "none"


def paired(d: np.ndarray) -> dict:
    return {"mean": round(100 * float(d.mean()), 2), "se": round(100 * float(d.std(ddof=1) / math.sqrt(len(d))), 2),
            "n": int(len(d))}


def main() -> None:
    runs = [json.loads(p.read_text()) for p in sorted(HERE.glob("raw-s*.json"))]
    runs = [r for r in runs if A in r["settings"] and B in r["settings"]]
    out: dict = {"policies": [r["checkpoint"] for r in runs], "commits": sorted({r["commit"] for r in runs})}
    if runs:
        tasks = [t for t in runs[0]["settings"][B] if t != "mean"]

        def rows(setting: str, task: str | None = None) -> np.ndarray:
            return np.asarray([x for r in runs for t in tasks if task in (None, t) for x in r["settings"][setting][t]],
                              dtype=float)

        for key, task in [("all", None), *((t, t) for t in tasks)]:
            a, b = rows(A, task), rows(B, task)
            out[key] = {"none": round(100 * float(b.mean()), 1), "settle": round(100 * float(a.mean()), 1),
                        "settle_minus_none": paired(a - b)}
        d = out["all"]["settle_minus_none"]
        out["decision"] = ("adopt: settle=10 becomes the robosuite adapter's default" if d["mean"] > 2 * d["se"] > 0
                           else "not adopted: settle stays an option (default 0)")
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
