"""Where targeting precision goes: each targeted rollout of rounds 2-3 is a success, a failure diagnosed into its
targeted mode (a hit), into another mode of the same factor, into another factor (which one), or not diagnosed.
Reads the run folders' state.json (not committed: they stay on the machine that ran them).

    .venv/bin/python experiments/precision_breakdown/breakdown.py experiments/modekey_v1/c/runs/coda-s6 ...
"""

import collections
import json
import sys
from pathlib import Path


def breakdown(run: Path) -> dict:
    steps = json.loads((run / "state.json").read_text())["steps"]
    kinds, moves = collections.Counter(), collections.Counter()
    for r in range(1, 10):
        if f"r{r}.diagnose" not in steps:
            break
        diag = {d["rollout_id"]: d for d in steps[f"r{r}.diagnose"]["result"]}
        for x in steps[f"r{r}.rollouts"]["result"]:
            if x["batch"] != "targeted":
                continue
            factor = x["mode_id"].split("-")[1]
            d = diag.get(x["rollout_id"])
            if x["success"]:
                kinds["success"] += 1
            elif d is None:
                kinds["failure, not diagnosed"] += 1
            elif d["mode_id"] == x["mode_id"]:
                kinds["hit"] += 1
            elif d["factor"] == factor:
                kinds["same factor, other mode"] += 1
            else:
                kinds["other factor"] += 1
                moves[f"{factor} -> {d['factor']}"] += 1
    n = sum(kinds.values())
    return {"targeted rollouts": n, "shares": {k: round(v / n, 3) for k, v in kinds.most_common()},
            "other factor": dict(moves.most_common())}


if __name__ == "__main__":
    out = {arg: breakdown(Path(arg)) for arg in sys.argv[1:]}
    print(json.dumps(out, indent=1))
