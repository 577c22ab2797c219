"""External target v2c's analysis (PROTOCOL.md) → analysis.json: per method the robosuite mean (over seeds), CoDA
− SFT and CoDA − success-guided paired per episode, per seed and pooled, and v2's raw-quaternion figures.

    .venv/bin/python experiments/external_target_v2c/analyze.py
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
V2 = HERE.parent / "external_target_v2" / "cells"
METHODS = ("sft", "success_guided", "coda")


def paired(d: np.ndarray) -> dict:
    return {"mean": round(100 * float(d.mean()), 2), "se": round(100 * float(d.std(ddof=1) / math.sqrt(len(d))), 2),
            "n": int(len(d))}


def main() -> None:
    raws = [json.loads(p.read_text()) for p in sorted(HERE.glob("raw*.json"))]  # raw.json, raw-s11.json, ...
    tasks, cells = raws[0]["tasks"], {k: v for r in raws for k, v in r["cells"].items()}
    seeds = sorted({c["seed"] for c in cells.values() if all(f"{m}-s{c['seed']}" in cells for m in METHODS)})
    ep = {(m, s): np.asarray([x for t in tasks for x in cells[f"{m}-s{s}"]["robosuite"][t]], dtype=float)
          for m in METHODS for s in seeds}
    out: dict = {"seeds": seeds, "missing": sorted(f"{m}-s{s}" for s in {c["seed"] for c in cells.values()}
                                                    for m in METHODS if f"{m}-s{s}" not in cells)}
    means = {m: [100 * float(ep[m, s].mean()) for s in seeds] for m in METHODS}
    out["robosuite_mean"] = {m: {"mean": round(float(np.mean(v)), 2),
                                 "se": round(float(np.std(v, ddof=1) / math.sqrt(len(v))), 2) if len(v) > 1 else None,
                                 "per_seed": [round(x, 1) for x in v]} for m, v in means.items()}
    out["per_task"] = {m: {t: round(100 * float(np.mean([np.mean(cells[f"{m}-s{s}"]["robosuite"][t]) for s in seeds])), 1)
                           for t in tasks} for m in METHODS}
    for other in ("sft", "success_guided"):
        out[f"coda_minus_{other}"] = {"per_seed": {s: paired(ep["coda", s] - ep[other, s]) for s in seeds},
                                      "pooled": paired(np.concatenate([ep["coda", s] - ep[other, s] for s in seeds]))}
    v2 = {}
    for m in METHODS:
        v = [100 * json.loads((V2 / f"{m}-s{s}.json").read_text())["external_mean"] for s in seeds
             if (V2 / f"{m}-s{s}.json").is_file()]
        v2[m] = round(float(np.mean(v)), 2) if v else None
    out["v2_raw_quaternions_mean"] = v2
    g1, g2 = out["coda_minus_sft"]["pooled"], out["coda_minus_success_guided"]["pooled"]
    out["goal_met"] = bool(g1["mean"] >= 10 and g1["mean"] > 2 * g1["se"] and g2["mean"] >= 5 and g2["mean"] > 2 * g2["se"])
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
