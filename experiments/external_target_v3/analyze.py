"""External target v3's analysis (PROTOCOL.md) → analysis.json: CoDA v3's robosuite mean against external target
v2c's sft, success-guided and CoDA cells of the same seeds, paired per episode (per seed and pooled); per task; the
base's robosuite evaluation here against v2c's sft (reproducibility); proxies and D_t sizes; this simulator's mean
OOD against v2's coda cells.

    .venv/bin/python experiments/external_target_v3/analyze.py
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
V2C = HERE.parent / "external_target_v2c"
V2 = HERE.parent / "external_target_v2" / "cells"
TASKS = ("Lift", "Stack", "PickPlaceCan", "Door")
BASELINES = ("sft", "success_guided", "coda")  # v2c's cells; "coda" there is v2's loop


def paired(d: np.ndarray) -> dict:
    return {"mean": round(100 * float(d.mean()), 2), "se": round(100 * float(d.std(ddof=1) / math.sqrt(len(d))), 2),
            "n": int(len(d))}


def mean_se(v: list[float]) -> dict:
    return {"mean": round(float(np.mean(v)), 2),
            "se": round(float(np.std(v, ddof=1) / math.sqrt(len(v))), 2) if len(v) > 1 else None,
            "per_seed": [round(x, 1) for x in v]}


def main() -> None:
    v2c = {k: v for p in sorted(V2C.glob("raw*.json")) for k, v in json.loads(p.read_text())["cells"].items()}
    cells = {int(p.stem.split("-s")[1]): json.loads(p.read_text()) for p in sorted((HERE / "cells").glob("coda-s*.json"))}
    seeds = sorted(s for s in cells if all(f"{m}-s{s}" in v2c for m in BASELINES))
    ep = {("coda_v3", s): np.asarray([int(x) for t in TASKS for x in cells[s]["external_outcomes"][f"robosuite:{t}"]],
                                     dtype=float) for s in seeds}
    ep.update({(m, s): np.asarray([x for t in TASKS for x in v2c[f"{m}-s{s}"]["robosuite"][t]], dtype=float)
               for m in BASELINES for s in seeds})
    methods = ("coda_v3",) + BASELINES
    out: dict = {"seeds": seeds, "missing": sorted(set(cells) - set(seeds)),
                 "commits": sorted({cells[s]["commit"] for s in seeds})}
    out["robosuite_mean"] = {m: mean_se([100 * float(ep[m, s].mean()) for s in seeds]) for m in methods}
    out["per_task"] = {m: {t: round(100 * float(np.mean([ep[m, s][50 * i: 50 * (i + 1)].mean() for s in seeds])), 1)
                           for i, t in enumerate(TASKS)} for m in methods}
    for other in BASELINES:
        key = "coda_v3_minus_" + ("coda_v2" if other == "coda" else other)
        out[key] = {"per_seed": {s: paired(ep["coda_v3", s] - ep[other, s]) for s in seeds},
                    "pooled": paired(np.concatenate([ep["coda_v3", s] - ep[other, s] for s in seeds])),
                    "over_seeds": mean_se([100 * float((ep["coda_v3", s] - ep[other, s]).mean()) for s in seeds])}
    # the base's robosuite evaluation here (made again with canonical yaw) against v2c's sft, episode for episode
    repro = {}
    for s in seeds:
        path = HERE / "base" / f"transformer-s{s}" / "external.json"
        if path.is_file():
            rows = {r["suite"]: r["outcomes"] for r in json.loads(path.read_text())["result"]}
            here = [int(x) for t in TASKS for x in rows[f"robosuite:{t}"]]
            repro[s] = {"identical_episodes": int(sum(a == b for a, b in zip(here, ep["sft", s], strict=True))),
                        "of": len(here)}
    out["base_vs_v2c_sft"] = repro
    out["proxies"] = {}
    for s in seeds:
        state = json.loads((HERE / "runs" / f"coda-s{s}" / "state.json").read_text())["steps"]
        out["proxies"][s] = {
            "per_probe": [len(state[f"r{r}.external"]["result"]["diagnoses"]) for r in (0, 1) if f"r{r}.external" in state],
            "external_dt_scenes": [state[f"r{r}.train"]["result"].get("external_dt_scenes") for r in (0, 1, 2)],
            "bc_scenes": [state[f"r{r}.train"]["result"].get("bc_scenes") for r in (0, 1, 2)]}
    out["sim_mean_ood"] = {"coda_v3": mean_se([100 * cells[s]["mean_ood"] for s in seeds]),
                           "coda_v2": mean_se([100 * json.loads((V2 / f"coda-s{s}.json").read_text())["mean_ood"]
                                               for s in seeds])}
    g1, g2 = out["coda_v3_minus_sft"]["pooled"], out["coda_v3_minus_success_guided"]["pooled"]
    out["goal_met"] = {"sft": bool(g1["mean"] >= 10 and g1["mean"] > 2 * g1["se"]),
                       "success_guided": bool(g2["mean"] >= 5 and g2["mean"] > 2 * g2["se"])}
    d = out["coda_v3_minus_coda_v2"]["pooled"]
    sim = out["sim_mean_ood"]
    out["adopt_external_dt"] = bool(d["mean"] > 2 * d["se"] and sim["coda_v3"]["mean"] >= sim["coda_v2"]["mean"] - 5)
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
