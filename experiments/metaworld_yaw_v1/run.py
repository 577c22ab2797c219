"""Meta-World yaw v1 (PROTOCOL.md): three policies on Meta-World pick-place-v3 and push-v3 (seed group 0, 50 per
task), observing the puck and goal raw (at -90°) and at the canonical heading, on the same episodes.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/metaworld_yaw_v1/run.py --out experiments/metaworld_yaw_v1/raw.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

from policy.checkpoint import load_checkpoint
from policy.external.evaluate import episode_seeds, run_task
from policy.rollout import chunk_fn

ROOT = Path(__file__).resolve().parents[2]
POLICIES = {"rate-s9": ("/tmp/gmap-rate-s9.pt", "86e9a73f09873bab"),
            "rate-s10": ("/tmp/gmap-rate-s10.pt", "610056cb0439b16c"),
            "base-s9": (str(ROOT / "experiments/grid_v31/base/transformer-s9/checkpoints/base.pt"), "42978cbb773a327a")}
TASKS = ("pick-place-v3", "push-v3")
GROUP, N = 0, 50
ARMS = {"raw": {"canonical_yaw": False}, "canonical": {"canonical_yaw": True}}  # explicit: canonical is the default since this run


def say(msg: str) -> None:
    print(f"[metaworld_yaw_v1 {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    out = {"commit": commit, "group": GROUP, "n": N, "tasks": list(TASKS), "arms": ARMS, "policies": {}}
    seeds = episode_seeds(N, 1, GROUP)
    for name, (path, sha) in POLICIES.items():
        got = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        assert got.startswith(sha), f"{path}: sha256 {got[:16]}, the protocol names {sha}"
        act = chunk_fn(load_checkpoint(path).policy, mode="mean")
        out["policies"][name] = {"path": path, "sha256": got}
        for arm, kwargs in ARMS.items():
            res = {}
            for t in TASKS:
                episodes = run_task(act, "metaworld", t, seeds, adapter_kwargs=kwargs)[0]
                res[t] = {"success": [int(e.success) for e in episodes],
                          "phase": [(e.phase or {}).get("phase") for e in episodes]}
            out["policies"][name][arm] = res
            say(f"{name} / {arm}: " + ", ".join(f"{t} {sum(v['success'])}/{N} (past none "
                                                 f"{sum(p != 'none' for p in v['phase'])})" for t, v in res.items()))
            Path(args.out).write_text(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
