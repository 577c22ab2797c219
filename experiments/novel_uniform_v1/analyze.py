"""Novel uniform v1's analysis (PROTOCOL.md) → analysis.json: CoDA with one-factor variants as its novel scenes
(this run, arm B) against external target v3's CoDA (arm A) and v3b's success-guided + probe scenes, paired per
episode on robosuite and, for A and B, in this simulator.

    .venv/bin/python experiments/novel_uniform_v1/analyze.py
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
V3 = HERE.parent / "external_target_v3"
V3B = HERE.parent / "external_target_v3b"
TASKS = ("Lift", "Stack", "PickPlaceCan", "Door")


def paired(d: np.ndarray) -> dict:
    return {"mean": round(100 * float(d.mean()), 2), "se": round(100 * float(d.std(ddof=1) / math.sqrt(len(d))), 2),
            "n": int(len(d))}


def mean_se(v: list[float]) -> dict:
    return {"mean": round(float(np.mean(v)), 2),
            "se": round(float(np.std(v, ddof=1) / math.sqrt(len(v))), 2) if len(v) > 1 else None,
            "per_seed": [round(x, 1) for x in v]}


def robosuite(c: dict) -> np.ndarray:
    return np.asarray([int(x) for t in TASKS for x in c["external_outcomes"][f"robosuite:{t}"]], dtype=float)


def sim(c: dict, ood: bool) -> np.ndarray:
    rows = [e for e in c["eval_after"] if (e["suite"] not in ("in", "seed")) == ood]
    return np.asarray([int(x) for e in rows for x in e["outcomes"]], dtype=float)


def probe(run: Path) -> list:
    """Round 1's robosuite probe: per task its success rate and phase counts, and the failures' scenes."""
    got = json.loads((run / "state.json").read_text())["steps"]["r0.external"]["result"]
    return [[s["success_rate"], s["phases"]] for s in got["suites"]] + [d["scene_id"] for d in got["diagnoses"]]


def main() -> None:
    cells = {int(p.stem.split("-s")[1]): json.loads(p.read_text()) for p in sorted((HERE / "cells").glob("coda-s*.json"))}
    seeds = sorted(cells)
    a = {s: json.loads((V3 / "cells" / f"coda-s{s}.json").read_text()) for s in seeds}
    g = {s: json.loads((V3B / "cells" / f"success_guided-s{s}.json").read_text()) for s in seeds}
    out: dict = {"seeds": seeds, "commits": sorted({cells[s]["commit"] for s in seeds})}
    out["same_machine_probe"] = {s: probe(HERE / "runs" / f"coda-s{s}") == probe(V3 / "runs" / f"coda-s{s}")
                                 for s in seeds if (HERE / "runs" / f"coda-s{s}").is_dir()}
    ep = {}
    for s in seeds:
        ep["B", s], ep["A", s], ep["sg_scenes", s] = robosuite(cells[s]), robosuite(a[s]), robosuite(g[s])
    out["robosuite_mean"] = {m: mean_se([100 * float(ep[m, s].mean()) for s in seeds]) for m in ("B", "A", "sg_scenes")}
    out["per_task"] = {m: {t: round(100 * float(np.mean([ep[m, s][50 * i: 50 * (i + 1)].mean() for s in seeds])), 1)
                           for i, t in enumerate(TASKS)} for m in ("B", "A", "sg_scenes")}
    for x, y in (("B", "A"), ("B", "sg_scenes")):
        d = {s: ep[x, s] - ep[y, s] for s in seeds}
        out[f"robosuite_{x}_minus_{y}"] = {"per_seed": {s: paired(d[s]) for s in seeds},
                                           "pooled": paired(np.concatenate(list(d.values()))),
                                           "over_seeds": mean_se([100 * float(d[s].mean()) for s in seeds])}
    for name, ood in (("in_dist", False), ("mean_ood", True)):
        d = {s: sim(cells[s], ood) - sim(a[s], ood) for s in seeds}
        out[f"sim_{name}_B_minus_A"] = {"per_seed": {s: paired(d[s]) for s in seeds},
                                        "pooled": paired(np.concatenate(list(d.values()))),
                                        "B": mean_se([100 * float(sim(cells[s], ood).mean()) for s in seeds]),
                                        "A": mean_se([100 * float(sim(a[s], ood).mean()) for s in seeds])}
    out["batches"] = {s: cells[s]["batches"] for s in seeds}
    r, i = out["robosuite_B_minus_A"], out["sim_in_dist_B_minus_A"]["pooled"]
    one = r["pooled"]["mean"] > 2 * r["pooled"]["se"] and sum(v["mean"] > 0 for v in r["per_seed"].values()) >= 2
    two = i["mean"] >= -2 * i["se"]
    out["decision"] = ("default" if one and two else "default with an external target" if one else "seed stays")
    out["complete"] = len(seeds) == 3
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
