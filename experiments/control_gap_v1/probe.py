"""Control gap v1 (a diagnostic, issue 22): one policy on robosuite's four tasks, same episodes, under adapter
settings: as today (`none`), or e.g. the target orientation leashed to the Panda's (`rot_leash=0.3`, radians), so
that it cannot run ahead of an arm that turns slower than this simulator's gripper.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/control_gap_v1/probe.py CKPT --settings "none;rot_leash=0.3" \
        --n 25 --out experiments/control_gap_v1/NAME.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

import numpy as np

from policy.checkpoint import load_checkpoint
from policy.external.evaluate import episode_seeds, run_task
from policy.external.robosuite_tasks import TASKS
from policy.rollout import chunk_fn

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("--settings", default="none;rot_leash=0.3",
                    help="';'-separated adapter settings: none, or comma-separated key=number (RobosuiteAdapter keywords)")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--n", type=int, default=25)
    ap.add_argument("--group", type=int, default=0, help="the episodes' seed group (the evaluation's: 0)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    state = load_checkpoint(args.checkpoint)
    act = chunk_fn(state.policy, mode="mean")
    seeds = episode_seeds(args.n, 1, args.group)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    out = {"commit": commit, "checkpoint": args.checkpoint, "seeds": seeds, "settings": {}, "phases": {}}
    phases = out["phases"]
    for setting in args.settings.split(";"):
        kwargs = {} if setting == "none" else {k: float(v) for k, v in (kv.split("=") for kv in setting.split(","))}
        row = {}
        for task in args.tasks.split(","):
            t0 = time.perf_counter()
            episodes, _ = run_task(act, "robosuite", task, seeds, adapter_kwargs=kwargs)
            row[task] = [int(e.success) for e in episodes]
            phases.setdefault(setting, {})[task] = [e.phase for e in episodes]
            print(f"{setting} {task}: {sum(row[task])}/{len(seeds)} ({time.perf_counter() - t0:.0f} s)",
                  flush=True)
        out["settings"][setting] = row
        out["settings"][setting]["mean"] = round(float(np.mean([x for t in row for x in row[t]])), 4)
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
