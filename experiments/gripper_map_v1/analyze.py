"""Gripper map v1's analysis (PROTOCOL.md): paired opening − sign per robosuite episode, over every policy →
analysis.json.

    .venv/bin/python experiments/gripper_map_v1/analyze.py
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MAPS = ("sign", "opening")


def episodes(row: dict, m: str, tasks: list[str], task: str | None = None) -> np.ndarray:
    return np.asarray([x for t in tasks if task in (None, t) for x in row[m][t]], dtype=float)


def paired(diffs: np.ndarray) -> dict:
    return {"mean": round(100 * float(diffs.mean()), 2),
            "se": round(100 * float(diffs.std(ddof=1) / math.sqrt(len(diffs))), 2), "n": int(len(diffs))}


def compare(runs: list[dict], arms: tuple[str, ...], task: str | None = None) -> dict:
    rows = {m: np.concatenate([episodes(r["policies"][a], m, r["tasks"], task) for r in runs for a in arms])
            for m in MAPS}
    return {**{m: round(100 * float(v.mean()), 1) for m, v in rows.items()},
            "opening_minus_sign": paired(rows["opening"] - rows["sign"])}


def main() -> None:
    runs = [r for r in (json.loads(p.read_text()) for p in sorted(HERE.glob("raw-s*.json")))
            if all(m in r["policies"].get(a, {}) for a in ("full", "rate") for m in MAPS)]
    out: dict = {"seeds": [r["seed"] for r in runs], "commits": sorted({r["commit"] for r in runs})}
    if runs:
        tasks = runs[0]["tasks"]
        out["all"] = compare(runs, ("full", "rate"))
        out["per_arm"] = {a: compare(runs, (a,)) for a in ("full", "rate")}
        out["per_task"] = {t: compare(runs, ("full", "rate"), t) for t in tasks}
        out["per_policy"] = {f"s{r['seed']}/{a}": {m: int(episodes(r["policies"][a], m, tasks).sum()) for m in MAPS}
                             for r in runs for a in ("full", "rate")}
        out["reproduced"] = {f"s{r['seed']}/{a}": r["policies"][a]["reproduces_rate_v1"] for r in runs
                             for a in ("full", "rate")}
        d = out["all"]["opening_minus_sign"]
        adopt = d["mean"] > 0 and d["mean"] > 2 * d["se"]
        out["decision"] = ("adopt: RobosuiteAdapter gripper_map='opening' by default" if adopt else
                           "not adopted: gripper_map stays 'sign'")
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
