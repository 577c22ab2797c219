"""Proxy v1's analysis (PROTOCOL.md): start_task against start v1's arms, paired per episode → analysis.json.

    .venv/bin/python experiments/proxy_v1/analyze.py
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("a", HERE.parent / "start_v1" / "analyze.py")
A = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(A)


def main() -> None:
    mine = {json.loads(p.read_text())["seed"]: json.loads(p.read_text()) for p in sorted(HERE.glob("raw-s*.json"))}
    runs = []
    for r in A.load():
        m = mine.get(r["seed"])
        if m and len(m["arms"]["start_task"]) == r["replicates"]:
            runs.append({**r, "arms": {**r["arms"], **m["arms"]}})
    out: dict = {"seeds": [r["seed"] for r in runs], "partial": len(runs) < 2}
    for key in ("robosuite", "sim_home", "sim_start"):
        rows = {arm: np.concatenate([A.per_episode(r, arm, key) for r in runs])
                for arm in ("base", "home", "start", "start_task")}
        out[key] = {arm: round(100 * float(v.mean()), 1) for arm, v in rows.items()}
        out[key]["start_task_minus_home"] = A.paired(rows["start_task"] - rows["home"])
        out[key]["start_task_minus_start"] = A.paired(rows["start_task"] - rows["start"])
    out["robosuite_per_task"] = {
        t: {arm: round(100 * float(np.mean([np.mean(r["base"]["robosuite"][t]) if arm == "base" else
                                             np.mean([x["robosuite"][t] for x in r["arms"][arm]]) for r in runs])), 1)
            for arm in ("base", "home", "start", "start_task")} for t in runs[0]["tasks"]} if runs else {}
    d = out["robosuite"]["start_task_minus_home"] if runs else None
    if d:
        adopt = d["mean"] > 0 and d["mean"] > 2 * d["se"]
        out["decision"] = ("adopt: external-target v2 with external_start and external_template on" if adopt
                           else "not adopted: both stay off") + (" (partial: one seed)" if out["partial"] else "")
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
