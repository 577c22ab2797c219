"""Retrain full proxy v1's `full` arm, replicate 0, for one base seed (the same scenes, demos, mix, updates and
training seed as `../full_proxy_v1/run.py`) and save it: a policy that has learnt robosuite's tasks in this
simulator, for `probe.py`.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/control_gap_v1/train_full.py --seed 9 --save /tmp/full-s9.pt
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from policy.bench_round import _copy
from policy.checkpoint import load_checkpoint, save_checkpoint
from policy.evaluate import train_specs
from policy.rollout import planner_demos
from policy.train import bc_finetune, demo_buffer

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("full_proxy_v1", ROOT / "experiments" / "full_proxy_v1" / "run.py")
F = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(F)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--save", required=True)
    args = ap.parse_args()
    seed, S = args.seed, F.S
    scenes = []
    for task in S.TASKS:
        scenes += F.proxies(task, F.episodes(task, F.PER_TASK, F.TRAIN_GROUP), 300_000 + 1_000 * seed)[0]
    mix = planner_demos([s for f in (*S.FAMILIES, "prep") for s in train_specs(f, S.MIX, distribution="seed")])
    dt = planner_demos(scenes)
    F.say(f"seed {seed}: D_t full {len(dt)}/{len(scenes)}, mix {len(mix)}")
    state = _copy(load_checkpoint(ROOT / f"experiments/grid_v31/base/transformer-s{seed}/checkpoints/base.pt"),
                  seed=1000 * (seed + 1))
    bc_finetune(state, demo_buffer(dt + mix), F.UPDATES)
    save_checkpoint(args.save, state)


if __name__ == "__main__":
    main()
