"""Round updates v1 (PROTOCOL.md): d_k = success after k updates − after 1,000, per scene (replicate means), pooled
over seeds, ± the s.e. over scenes; the decision by the protocol's rule. Writes analysis.json beside this file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from sim.constants import FAMILIES  # the bench orders its evaluation scenes by family, in this order

HERE = Path(__file__).parent


def main() -> None:
    run = json.loads((HERE / "all.json").read_text())
    counts = [*map(int, run["curve"]), int(run["updates"])]
    by_k: dict[int, list[np.ndarray]] = {k: [] for k in counts}
    base, cpu = [], []
    for seed in run["per_seed"]:
        reps = seed["arms"]["dt_failed_balanced_mix"]["replicates"]
        base.append(np.asarray(seed["base"], float))
        cpu += [r["cpu_s"] for r in reps]
        for k in counts:
            rows = [r["success"] if k == run["updates"] else r["curve"][str(k)] for r in reps]
            by_k[k].append(np.mean(np.asarray(rows, float), axis=0))  # per scene, mean over replicates
    full = np.concatenate(by_k[run["updates"]])
    b = np.concatenate(base)
    n_fam = int(run["eval"])
    out = {"commit": run["commit"], "scenes": int(full.size), "base": round(100 * b.mean(), 1),
           "update_cpu_s_mean": round(float(np.mean(cpu)), 1), "counts": {}}
    for k in counts:
        x = np.concatenate(by_k[k])
        d, db = x - full, x - b
        fam = {f: round(100 * float(np.mean(np.concatenate([s[i * n_fam:(i + 1) * n_fam] for s in by_k[k]]))), 1)
               for i, f in enumerate(FAMILIES)}
        out["counts"][str(k)] = {
            "success": round(100 * x.mean(), 1), "per_family": fam,
            "vs_base": [round(100 * db.mean(), 1), round(100 * db.std(ddof=1) / np.sqrt(db.size), 1)],
            "vs_1000": [round(100 * d.mean(), 1), round(100 * d.std(ddof=1) / np.sqrt(d.size), 1)],
            "per_seed_vs_1000": [round(100 * float(np.mean(a - c)), 1)
                                 for a, c in zip(by_k[k], by_k[run["updates"]], strict=True)]}
    ok = [k for k in counts[:-1] if out["counts"][str(k)]["vs_1000"][0] >= -2.0
          and out["counts"][str(k)]["vs_1000"][0] - 2 * out["counts"][str(k)]["vs_1000"][1] >= -4.0]
    out["decision"] = {"policy_updates": min(ok) if ok else run["updates"],
                       "rule": "smallest k with d_k >= -2.0 and d_k - 2 s.e. >= -4.0, else 1000"}
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
