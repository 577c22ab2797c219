"""Gripper map v1 (PROTOCOL.md): gripper rate v1's policies (replicate 0 of `full` and `rate`, retrained
identically) on robosuite with the gripper command passed on (`sign`: robosuite's gripper moves towards its sign)
or mapped to a finger opening (`opening`: robosuite's gripper follows the command as this simulator's fingers do,
at its own speed).

    OMP_NUM_THREADS=1 .venv/bin/python experiments/gripper_map_v1/run.py --seed 9 --out experiments/gripper_map_v1/raw-s9.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from policy.bench_round import _copy
from policy.checkpoint import load_checkpoint, save_checkpoint
from policy.evaluate import eval_specs, train_specs
from policy.external.evaluate import episode_seeds, run_task
from policy.rollout import chunk_fn, planner_demos
from policy.train import bc_finetune, demo_buffer

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gripper_rate_v1", ROOT / "experiments" / "gripper_rate_v1" / "run.py")
G = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(G)
F, S = G.F, G.S
EVAL_GROUP, EXT_N = 4, 50
"""robosuite's evaluation episodes: 50 per task of seed group 4, read by no earlier experiment"""
MAPS = ("sign", "opening")


def say(msg: str) -> None:
    print(f"[gripper_map_v1 {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def robosuite_success(state, gripper_map: str) -> dict[str, list[int]]:
    act = chunk_fn(state.policy, mode="mean")
    return {t: [int(e.success) for e in run_task(act, "robosuite", t, episode_seeds(EXT_N, 1, EVAL_GROUP),
                                                 adapter_kwargs={"gripper_map": gripper_map})[0]] for t in S.TASKS}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--save", default="/tmp", help="folder for the retrained checkpoints (gmap-ARM-sS.pt)")
    args = ap.parse_args()
    seed = args.seed
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    t0 = time.process_time()
    ckpt = ROOT / f"experiments/grid_v31/base/transformer-s{seed}/checkpoints/base.pt"
    base = load_checkpoint(ckpt)
    scenes = {"full": [], "rate": []}
    for task in S.TASKS:  # gripper rate v1's training scenes, built the same way
        eps, rate = G.split_rate(F.episodes(task, F.PER_TASK, F.TRAIN_GROUP))
        full, _, _ = F.proxies(task, eps, 300_000 + 1_000 * seed)
        scenes["full"] += full
        scenes["rate"] += G.slow(full, rate)
    mix = planner_demos([s for f in (*S.FAMILIES, "prep") for s in train_specs(f, G.MIX, distribution="seed")])
    dt = {arm: planner_demos(specs) for arm, specs in scenes.items()}
    sim_home = [s for f in S.FAMILIES for s in eval_specs(f, "seed", S.SIM_N)]
    rate_v1 = json.loads((ROOT / f"experiments/gripper_rate_v1/raw-s{seed}.json").read_text())
    say(f"seed {seed}: D_t full {len(dt['full'])}, rate {len(dt['rate'])}, mix {len(mix)}")
    out = {"commit": commit, "seed": seed, "checkpoint": str(ckpt.relative_to(ROOT)), "ext_n": EXT_N,
           "eval_group": EVAL_GROUP, "tasks": list(S.TASKS), "dt_demos": {k: len(v) for k, v in dt.items()},
           "policies": {}}
    for arm in G.ARMS:
        state = _copy(base, seed=1000 * (seed + 1))  # replicate 0's training seed
        bc_finetune(state, demo_buffer(dt[arm] + mix), F.UPDATES)
        save_checkpoint(Path(args.save) / f"gmap-{arm}-s{seed}.pt", state)
        home = S.sim_success(state, sim_home)
        row = {"sim_home": home, "reproduces_rate_v1": home == rate_v1["arms"][arm][0]["sim_home"]}
        say(f"{arm}: sim home {np.mean(home):.3f} (reproduces gripper rate v1's replicate 0: "
            f"{row['reproduces_rate_v1']})")
        for m in MAPS:
            row[m] = robosuite_success(state, m)
            say(f"{arm} / {m}: robosuite {({t: sum(v) for t, v in row[m].items()})}")
            out["policies"][arm] = row
            Path(args.out).write_text(json.dumps(out) + "\n")
    out["cpu_s"] = round(time.process_time() - t0, 1)
    Path(args.out).write_text(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
