"""External target v2c (PROTOCOL.md): external target v2's nine policies on robosuite's four tasks (seed group 0,
50 per task) with the adapter's defaults (canonical yaw).

    OMP_NUM_THREADS=1 .venv/bin/python experiments/external_target_v2c/run.py --seeds 9,10,11 \
        --v2 /work/main/experiments/external_target_v2 --out /work/main/experiments/external_target_v2c/raw.json
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
METHODS = ("sft", "success_guided", "coda")
TASKS = ("Lift", "Stack", "PickPlaceCan", "Door")
GROUP, N = 0, 50


def say(msg: str) -> None:
    print(f"[external_target_v2c {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="9,10,11")
    ap.add_argument("--v2", default=str(ROOT / "experiments" / "external_target_v2"),
                    help="external target v2's folder (its ignored runs/ hold the checkpoints: give the main checkout's "
                         "when running from a snapshot)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    out_path = Path(args.out)
    out = json.loads(out_path.read_text()) if out_path.exists() else {"group": GROUP, "n": N, "tasks": list(TASKS),
                                                                       "cells": {}}
    out.setdefault("commits", [])
    if commit not in out["commits"]:
        out["commits"].append(commit)
    episodes = episode_seeds(N, 1, GROUP)
    v2 = Path(args.v2)
    for seed in [int(s) for s in args.seeds.split(",") if s]:
        for method in METHODS:
            cell = f"{method}-s{seed}"
            if cell in out["cells"]:
                continue
            ckpt = v2 / "runs" / cell / "checkpoints" / "latest.pt"
            if not ckpt.is_file() or not (v2 / "cells" / f"{cell}.json").is_file():
                say(f"{cell}: no finished cell yet, skipped")
                continue
            act = chunk_fn(load_checkpoint(ckpt).policy, mode="mean")
            got = {t: [int(e.success) for e in run_task(act, "robosuite", t, episodes)[0]] for t in TASKS}
            out["cells"][cell] = {"method": method, "seed": seed, "commit": commit,
                                  "sha256": hashlib.sha256(ckpt.read_bytes()).hexdigest(), "robosuite": got}
            out_path.write_text(json.dumps(out) + "\n")
            say(f"{cell}: robosuite {({t: sum(v) for t, v in got.items()})}")


if __name__ == "__main__":
    main()
