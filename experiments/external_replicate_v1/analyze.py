"""External replicate v1's analysis (PROTOCOL.md) → analysis.json: CoDA with another training replicate after
round 1 (this run, arm A′) against external target v3's CoDA (arm A), paired per episode on robosuite and in this
simulator, beside novel uniform v1's B − A and external target v3b's CoDA − SG + scenes for comparison.

    .venv/bin/python experiments/external_replicate_v1/analyze.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
V3 = HERE.parent / "external_target_v3"
V3B = HERE.parent / "external_target_v3b"
NU = HERE.parent / "novel_uniform_v1"


def _helpers():
    import importlib.util

    spec = importlib.util.spec_from_file_location("nu_analyze", NU / "analyze.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    h = _helpers()
    cells = {int(p.stem.split("-s")[1]): json.loads(p.read_text()) for p in (HERE / "cells").glob("coda-s*.json")}
    seeds = sorted(cells)
    a = {s: json.loads((V3 / "cells" / f"coda-s{s}.json").read_text()) for s in seeds}
    out: dict = {"seeds": seeds, "commits": sorted({cells[s]["commit"] for s in seeds})}
    d = {s: h.robosuite(cells[s]) - h.robosuite(a[s]) for s in seeds}
    out["robosuite_mean"] = {"A_replicate": h.mean_se([100 * float(h.robosuite(cells[s]).mean()) for s in seeds]),
                             "A": h.mean_se([100 * float(h.robosuite(a[s]).mean()) for s in seeds])}
    out["robosuite_replicate_minus_A"] = {"per_seed": {s: h.paired(d[s]) for s in seeds},
                                          "pooled": h.paired(np.concatenate(list(d.values()))),
                                          "abs_per_seed": h.mean_se([abs(100 * float(d[s].mean())) for s in seeds])}
    for name, ood in (("in_dist", False), ("mean_ood", True)):
        dd = {s: h.sim(cells[s], ood) - h.sim(a[s], ood) for s in seeds}
        out[f"sim_{name}_replicate_minus_A"] = {"per_seed": {s: h.paired(dd[s]) for s in seeds},
                                                "pooled": h.paired(np.concatenate(list(dd.values())))}
    g = {s: json.loads((V3B / "cells" / f"success_guided-s{s}.json").read_text()) for s in seeds}
    out["for_comparison"] = {"v3b_coda_minus_sg_scenes": {s: h.paired(h.robosuite(a[s]) - h.robosuite(g[s]))
                                                          for s in seeds}}
    sg = {int(p.stem.split("-s")[1]): json.loads(p.read_text())
          for p in sorted((HERE / "sg" / "cells").glob("success_guided-s*.json"), key=lambda p: int(p.stem.split("-s")[1]))}
    both = sorted(s for s in sg if s in cells)
    if sg:
        dg = {s: h.robosuite(sg[s]) - h.robosuite(g[s]) if s in g else None for s in sg}
        for s in sg:
            if s not in g:
                g[s] = json.loads((V3B / "cells" / f"success_guided-s{s}.json").read_text())
                dg[s] = h.robosuite(sg[s]) - h.robosuite(g[s])
        out["robosuite_sg_replicate_minus_G"] = {"per_seed": {s: h.paired(dg[s]) for s in sg},
                                                 "pooled": h.paired(np.concatenate(list(dg.values())))}
        out["robosuite_mean"]["G_replicate"] = h.mean_se([100 * float(h.robosuite(sg[s]).mean()) for s in sg])
        out["robosuite_mean"]["G"] = h.mean_se([100 * float(h.robosuite(g[s]).mean()) for s in sg])
    if both:
        dd = {s: (h.robosuite(a[s]) + h.robosuite(cells[s]) - h.robosuite(g[s]) - h.robosuite(sg[s])) / 2 for s in both}
        out["robosuite_coda_minus_sg_scenes_two_replicates"] = {
            "per_seed": {s: h.paired(dd[s]) for s in both}, "pooled": h.paired(np.concatenate(list(dd.values()))),
            "over_seeds": h.mean_se([100 * float(dd[s].mean()) for s in both])}
    if (NU / "analysis.json").is_file():
        out["for_comparison"]["novel_uniform_B_minus_A"] = json.loads((NU / "analysis.json").read_text()).get(
            "robosuite_B_minus_A", {}).get("per_seed")
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
