"""Gripper rate v1's analysis (PROTOCOL.md): paired rate − full per episode over the base seeds → analysis.json.

    .venv/bin/python experiments/gripper_rate_v1/analyze.py
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ARMS = ("full", "rate")
KEYS = ("robosuite", "mirror", "mirror_rate", "sim_home")


def flat(run: dict, rep: dict, key: str, task: str | None = None) -> list[int]:
    """One replicate's (or the base's) successes on `key`, in episode order (`task`: that task's only)."""
    if key == "robosuite":
        return [x for t in run["tasks"] if task in (None, t) for x in rep["robosuite"][t]]
    tasks = run["mirror_tasks"] if key.startswith("mirror") else [None] * len(rep[key])
    return [x for x, t in zip(rep[key], tasks, strict=True) if task in (None, t)]


def per_episode(run: dict, arm: str, key: str, task: str | None = None) -> np.ndarray:
    """Replicate mean per episode (the base: its one evaluation)."""
    if arm == "base":
        return np.asarray(flat(run, run["base"], key, task), dtype=float)
    return np.mean([flat(run, rep, key, task) for rep in run["arms"][arm]], axis=0)


def paired(diffs: np.ndarray) -> dict:
    return {"mean": round(100 * float(diffs.mean()), 2),
            "se": round(100 * float(diffs.std(ddof=1) / math.sqrt(len(diffs))), 2), "n": int(len(diffs))}


def compare(runs: list[dict], key: str, task: str | None = None) -> dict:
    rows = {arm: np.concatenate([per_episode(r, arm, key, task) for r in runs]) for arm in ("base", *ARMS)}
    out = {arm: round(100 * float(v.mean()), 1) for arm, v in rows.items()}
    out["rate_minus_full"] = paired(rows["rate"] - rows["full"])
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
        out["per_task"] = {key: {t: compare(runs, key, t) for t in tasks} for key in ("robosuite", "mirror", "mirror_rate")}
        out["replicates"] = {f"s{r['seed']}/{arm}": {k: [round(100 * float(np.mean(flat(r, rep, k))), 1)
                                                         for rep in r["arms"][arm]] for k in KEYS}
                             for r in runs for arm in ARMS}
        out["data"] = {f"s{r['seed']}": {"dt_demos": r["dt_demos"], "dt_steps": r["dt_steps"], "dropped": r["dropped"],
                                         "mirror_n": len(r["mirror_tasks"]),
                                         "mirror_rate_certified": sum(r["mirror_rate_certified"])} for r in runs}
        d, s = out["robosuite"]["rate_minus_full"], out["sim_home"]["rate_minus_full"]
        adopt = d["mean"] > 0 and d["mean"] > 2 * d["se"] and s["mean"] >= -5
        out["decision"] = ("adopt: Preset.external_gripper_rate on by default" if adopt else
                           "not adopted: Preset.external_gripper_rate stays off")
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
