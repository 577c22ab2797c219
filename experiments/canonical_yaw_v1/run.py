"""Canonical yaw v1 (PROTOCOL.md): rot gain v1's two policies on robosuite's four tasks (seed group 9, 50 per
task), observing the cubes and the can with robosuite's raw quaternions and with `canonical_yaw`, on the same
episodes.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/canonical_yaw_v1/run.py --out experiments/canonical_yaw_v1/raw.json
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
POLICIES = {"s9": ("/tmp/gmap-rate-s9.pt", "86e9a73f09873bab"), "s10": ("/tmp/gmap-rate-s10.pt", "610056cb0439b16c")}
TASKS = ("Lift", "PickPlaceCan", "Stack", "Door")
GROUP, N = 9, 50
ARMS = {"raw": {}, "canonical": {"canonical_yaw": True}}


def say(msg: str) -> None:
    print(f"[canonical_yaw_v1 {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


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
            out["policies"][name][arm] = {t: [int(e.success) for e in run_task(act, "robosuite", t, seeds,
                                                                               adapter_kwargs=kwargs)[0]]
                                          for t in TASKS}
            say(f"{name} / {arm}: robosuite {({t: sum(v) for t, v in out['policies'][name][arm].items()})}")
            Path(args.out).write_text(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
