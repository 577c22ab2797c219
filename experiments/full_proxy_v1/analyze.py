"""Full proxy v1's analysis (PROTOCOL.md): paired full − objects per episode over the base seeds → analysis.json.

    .venv/bin/python experiments/full_proxy_v1/analyze.py
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ARMS = ("full", "objects")
KEYS = ("robosuite", "mirror", "sim_home")


def per_episode(run: dict, arm: str, key: str, task: str | None = None) -> np.ndarray:
    """Replicate mean per episode (robosuite: the four tasks' episodes in order; `task`: that task's only)."""
    def flat(r: dict) -> list[int]:
        if key == "robosuite":
            return [x for t in run["tasks"] if task in (None, t) for x in r["robosuite"][t]]
        return [x for x, t in zip(r[key], run["mirror_tasks"] if key == "mirror" else [None] * len(r[key]),
                                  strict=True) if task in (None, t)]
    if arm == "base":
        return np.asarray(flat(run["base"]), dtype=float)
    return np.mean([flat(r) for r in run["arms"][arm]], axis=0)


def paired(diffs: np.ndarray) -> dict:
    return {"mean": round(100 * float(diffs.mean()), 2),
            "se": round(100 * float(diffs.std(ddof=1) / math.sqrt(len(diffs))), 2), "n": int(len(diffs))}


def compare(runs: list[dict], key: str, task: str | None = None) -> dict:
    rows = {arm: np.concatenate([per_episode(r, arm, key, task) for r in runs]) for arm in ("base", *ARMS)}
    out = {arm: round(100 * float(v.mean()), 1) for arm, v in rows.items()}
    out["full_minus_objects"] = paired(rows["full"] - rows["objects"])
    for arm in ARMS:
        out[f"{arm}_minus_base"] = paired(rows[arm] - rows["base"])
    return out


def main() -> None:
    runs = [r for r in (json.loads(p.read_text()) for p in sorted(HERE.glob("raw-s*.json")))
            if all(len(r.get("arms", {}).get(a, [])) == r["replicates"] for a in ARMS)]
    out: dict = {"seeds": [r["seed"] for r in runs], "commits": sorted({r["commit"] for r in runs})}
    if runs:
        for key in KEYS:
            out[key] = compare(runs, key)
        tasks = runs[0]["tasks"]
        out["per_task"] = {key: {t: compare(runs, key, t) for t in tasks} for key in ("robosuite", "mirror")}
        out["replicates"] = {f"s{r['seed']}/{arm}": {k: [round(100 * float(np.mean(
            [x for t in r["tasks"] for x in rep["robosuite"][t]] if k == "robosuite" else rep[k])), 1)
            for rep in r["arms"][arm]] for k in KEYS} for r in runs for arm in ARMS}
        out["data"] = {f"s{r['seed']}": {"dt_demos": r["dt_demos"], "dropped": r["dropped"],
                                         "mirror_n": len(r["mirror_tasks"])} for r in runs}
        d, s = out["robosuite"]["full_minus_objects"], out["sim_home"]["full_minus_objects"]
        adopt = d["mean"] > 0 and d["mean"] > 2 * d["se"] and s["mean"] >= -5
        out["decision"] = ("adopt: external_start and external_template on in external-target v2" if adopt else
                           "not adopted: external_start and external_template stay off")
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
