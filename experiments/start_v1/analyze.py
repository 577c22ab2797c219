"""Start v1's analysis (PROTOCOL.md): paired start − home per episode over the base seeds → analysis.json.

    .venv/bin/python experiments/start_v1/analyze.py
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def load() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(HERE.glob("raw-s*.json"))]


def per_episode(run: dict, arm: str, key: str) -> np.ndarray:
    """Replicate mean per episode (robosuite: the four tasks' episodes in order)."""
    def flat(r: dict) -> list[int]:
        return [x for t in run["tasks"] for x in r["robosuite"][t]] if key == "robosuite" else r[key]
    if arm == "base":
        return np.asarray(flat(run["base"]), dtype=float)
    return np.mean([flat(r) for r in run["arms"][arm]], axis=0)


def paired(diffs: np.ndarray) -> dict:
    return {"mean": round(100 * float(diffs.mean()), 2),
            "se": round(100 * float(diffs.std(ddof=1) / math.sqrt(len(diffs))), 2), "n": int(len(diffs))}


def main() -> None:
    runs = [r for r in load() if "start" in r.get("arms", {}) and len(r["arms"]["start"]) == r["replicates"]]
    out: dict = {"seeds": [r["seed"] for r in runs], "commits": sorted({r["commit"] for r in runs})}
    for key in ("robosuite", "sim_home", "sim_start"):
        rows = {arm: np.concatenate([per_episode(r, arm, key) for r in runs]) for arm in ("base", "home", "start")}
        out[key] = {arm: round(100 * float(v.mean()), 1) for arm, v in rows.items()}
        out[key]["start_minus_home"] = paired(rows["start"] - rows["home"])
        out[key]["home_minus_base"] = paired(rows["home"] - rows["base"])
        out[key]["start_minus_base"] = paired(rows["start"] - rows["base"])
    out["robosuite_per_task"] = {
        t: {arm: round(100 * float(np.mean([np.mean(r["base"]["robosuite"][t]) if arm == "base" else
                                             np.mean([x["robosuite"][t] for x in r["arms"][arm]]) for r in runs])), 1)
            for arm in ("base", "home", "start")} for t in runs[0]["tasks"]} if runs else {}
    out["replicates"] = {f"s{r['seed']}/{arm}": [round(100 * float(np.mean([x for t in r["tasks"] for x in rep["robosuite"][t]])), 1)
                                                for rep in r["arms"][arm]] for r in runs for arm in ("home", "start")}
    d, s = out.get("robosuite", {}).get("start_minus_home", {}), out.get("sim_home", {}).get("start_minus_home", {})
    if d:
        adopt = d["mean"] > 0 and d["mean"] > 2 * d["se"] and s["mean"] >= -5
        out["decision"] = "adopt: external_start stays true" if adopt else "not adopted: external_start back to false"
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
