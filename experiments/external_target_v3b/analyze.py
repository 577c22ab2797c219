"""External target v3b's analysis (PROTOCOL.md) → analysis.json: success-guided with the probe scenes (this run)
against v3's CoDA and v2c's success-guided and sft cells of the same seeds, paired per episode.

    .venv/bin/python experiments/external_target_v3b/analyze.py
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
V3 = HERE.parent / "external_target_v3" / "cells"
V2C = HERE.parent / "external_target_v2c"
TASKS = ("Lift", "Stack", "PickPlaceCan", "Door")


def paired(d: np.ndarray) -> dict:
    return {"mean": round(100 * float(d.mean()), 2), "se": round(100 * float(d.std(ddof=1) / math.sqrt(len(d))), 2),
            "n": int(len(d))}


def mean_se(v: list[float]) -> dict:
    return {"mean": round(float(np.mean(v)), 2),
            "se": round(float(np.std(v, ddof=1) / math.sqrt(len(v))), 2) if len(v) > 1 else None,
            "per_seed": [round(x, 1) for x in v]}


def cell_outcomes(path: Path) -> np.ndarray:
    c = json.loads(path.read_text())
    return np.asarray([int(x) for t in TASKS for x in c["external_outcomes"][f"robosuite:{t}"]], dtype=float)


def main() -> None:
    v2c = {k: v for p in sorted(V2C.glob("raw*.json")) for k, v in json.loads(p.read_text())["cells"].items()}
    here = {int(p.stem.split("-s")[1]): p for p in sorted((HERE / "cells").glob("success_guided-s*.json"))}
    seeds = sorted(s for s in here if (V3 / f"coda-s{s}.json").is_file() and f"sft-s{s}" in v2c)
    ep = {}
    for s in seeds:
        ep["sg_scenes", s] = cell_outcomes(here[s])
        ep["coda_v3", s] = cell_outcomes(V3 / f"coda-s{s}.json")
        for m in ("sft", "success_guided"):
            ep[m, s] = np.asarray([x for t in TASKS for x in v2c[f"{m}-s{s}"]["robosuite"][t]], dtype=float)
    methods = ("sg_scenes", "coda_v3", "success_guided", "sft")
    out: dict = {"seeds": seeds, "commits": sorted({json.loads(here[s].read_text())["commit"] for s in seeds})}
    out["robosuite_mean"] = {m: mean_se([100 * float(ep[m, s].mean()) for s in seeds]) for m in methods}
    out["per_task"] = {m: {t: round(100 * float(np.mean([ep[m, s][50 * i: 50 * (i + 1)].mean() for s in seeds])), 1)
                           for i, t in enumerate(TASKS)} for m in methods}
    for a, b in (("coda_v3", "sg_scenes"), ("sg_scenes", "success_guided"), ("sg_scenes", "sft")):
        out[f"{a}_minus_{b}"] = {"per_seed": {s: paired(ep[a, s] - ep[b, s]) for s in seeds},
                                 "pooled": paired(np.concatenate([ep[a, s] - ep[b, s] for s in seeds])),
                                 "over_seeds": mean_se([100 * float((ep[a, s] - ep[b, s]).mean()) for s in seeds])}
    out["sim_mean_ood"] = {"sg_scenes": mean_se([100 * json.loads(here[s].read_text())["mean_ood"] for s in seeds]),
                           "coda_v3": mean_se([100 * json.loads((V3 / f"coda-s{s}.json").read_text())["mean_ood"]
                                               for s in seeds])}
    t, g = out["coda_v3_minus_sg_scenes"]["pooled"], out["sg_scenes_minus_success_guided"]["pooled"]
    out["targeting_adds"] = bool(t["mean"] > 2 * t["se"])
    out["scenes_carry_gain"] = bool(g["mean"] > 2 * g["se"] and abs(t["mean"]) <= 2 * t["se"])
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
