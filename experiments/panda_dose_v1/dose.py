"""Panda dose v1 (a diagnostic for issue 22, not a decision): full proxy v2's `full` arm with the Panda in this
simulator instead of the floating gripper. A Panda base (grid v3.1's recipe: 250 seed-distribution demos per family,
6,000 BC updates, transformer, the base seed) and, from it, BC on the Panda's planner demos of the same 480 full
proxies plus v2's mix (250 per family, Panda), 1,000 updates, replicate 0's training seed. Read: robosuite 4 × 25
(seed group 0) and the Panda mirror (the evaluation episodes' full proxies with the Panda, certified by its planner),
for the Panda base and the Panda full-proxy policy; the gripper's figures are full proxy v2's.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/panda_dose_v1/dose.py --seed 10 --out experiments/panda_dose_v1/raw-s10.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import time
from pathlib import Path

import numpy as np

from policy.bench_round import _copy
from policy.checkpoint import save_checkpoint
from policy.config import PolicyConfig, TrainConfig
from policy.evaluate import train_specs
from policy.rollout import planner_demos
from policy.train import bc_finetune, demo_buffer, train_sft

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("full_proxy_v1", ROOT / "experiments" / "full_proxy_v1" / "run.py")
F = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(F)
S = F.S
ROBOT, BASE_DEMOS, BASE_UPDATES, MIX = "panda", 250, 6000, 250


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    seed = args.seed
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    out: dict = {"commit": commit, "seed": seed, "robot": ROBOT}
    families = (*S.FAMILIES, "prep")
    t0 = time.perf_counter()
    base_demos = planner_demos([s for f in families for s in train_specs(f, BASE_DEMOS, distribution="seed", robot=ROBOT)])
    base, _ = train_sft(base_demos, PolicyConfig(), TrainConfig(seed=seed), BASE_UPDATES)
    save_checkpoint(f"/tmp/panda-base-s{seed}.pt", base)
    F.say(f"seed {seed}: Panda base on {len(base_demos)} demos ({time.perf_counter() - t0:.0f} s)")
    scenes, mirror = [], []
    for task in S.TASKS:
        scenes += F.proxies(task, F.episodes(task, F.PER_TASK, F.TRAIN_GROUP), 300_000 + 1_000 * seed,
                            robot=ROBOT)[0]
        mirror += [(task, s) for s in F.proxies(task, F.episodes(task, S.EXT_N, F.EVAL_GROUP),
                                                700_000 + 1_000 * seed, certify=True, robot=ROBOT)[0]]
    dt = planner_demos(scenes)
    mix = planner_demos([s for f in families for s in train_specs(f, MIX, distribution="seed", robot=ROBOT)])
    out.update({"base_demos": len(base_demos), "dt_demos": len(dt), "proxies": len(scenes), "mix_demos": len(mix),
                "mirror_tasks": [t for t, _ in mirror]})
    F.say(f"seed {seed}: Panda D_t {len(dt)}/{len(scenes)}, mix {len(mix)}, mirror {len(mirror)}")
    specs = [s for _, s in mirror]
    out["base"] = {"robosuite": S.robosuite_success(base), "mirror": S.sim_success(base, specs)}
    F.say(f"base: robosuite {({t: sum(v) for t, v in out['base']['robosuite'].items()})}, mirror "
          f"{np.mean(out['base']['mirror']):.3f}")
    Path(args.out).write_text(json.dumps(out) + "\n")
    state = _copy(base, seed=1000 * (seed + 1))
    bc_finetune(state, demo_buffer(dt + mix), F.UPDATES)
    save_checkpoint(f"/tmp/panda-full-s{seed}.pt", state)
    out["full"] = {"robosuite": S.robosuite_success(state), "mirror": S.sim_success(state, specs)}
    F.say(f"full: robosuite {({t: sum(v) for t, v in out['full']['robosuite'].items()})}, mirror "
          f"{np.mean(out['full']['mirror']):.3f}")
    out["seconds"] = round(time.perf_counter() - t0, 1)
    Path(args.out).write_text(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
