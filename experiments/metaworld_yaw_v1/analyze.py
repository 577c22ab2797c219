"""Meta-World yaw v1's analysis (PROTOCOL.md) → analysis.json.

    .venv/bin/python experiments/metaworld_yaw_v1/analyze.py
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def paired(d: np.ndarray) -> dict:
    return {"mean": round(100 * float(d.mean()), 2), "se": round(100 * float(d.std(ddof=1) / math.sqrt(len(d))), 2),
            "n": int(len(d))}


def main() -> None:
    raw = json.loads((HERE / "raw.json").read_text())
    tasks, out = raw["tasks"], {"commit": raw["commit"], "per": {}}
    diffs = {"success": [], "past_none": []}
    floor = True
    for name, pol in raw["policies"].items():
        for t in tasks:
            arms = {}
            for arm in ("raw", "canonical"):
                r = pol[arm][t]
                arms[arm] = {"success": np.asarray(r["success"], dtype=float),
                             "past_none": np.asarray([p not in (None, "none") for p in r["phase"]], dtype=float)}
            floor &= all(arms[a]["success"].mean() < 0.05 for a in arms)
            out["per"][f"{name}/{t}"] = {a: {k: round(100 * float(v.mean()), 1) for k, v in arms[a].items()} for a in arms}
            for k in diffs:
                diffs[k].append(arms["canonical"][k] - arms["raw"][k])
    out["pooled"] = {k: paired(np.concatenate(v)) for k, v in diffs.items()}
    s, p = out["pooled"]["success"], out["pooled"]["past_none"]
    out["floor"] = bool(floor)
    out["adopt"] = bool(s["mean"] > 2 * s["se"] if not floor else (p["mean"] > 2 * p["se"] and s["mean"] >= 0))
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
