"""Gripper rate v1 (PROTOCOL.md): BC on planner demos of full proxies of robosuite episodes whose fingers close at
once (`full`, full proxy v2's arm) or as slowly as robosuite's Panda gripper (`rate`: the same scenes with the
adapter's `gripper_rate`, so the planner waits for the fingers), evaluated on robosuite, on the evaluation
episodes' proxies in this simulator with and without the rate (`mirror_rate`, `mirror`), and on the seed suite from
home.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/gripper_rate_v1/run.py --seed 9 --out experiments/gripper_rate_v1/raw-s9.json
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
from policy.checkpoint import load_checkpoint
from policy.evaluate import eval_specs, train_specs
from policy.external.evaluate import episode_seeds, run_task
from policy.rollout import chunk_fn, planner_demos, planner_episode
from policy.train import bc_finetune, demo_buffer

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("full_proxy_v1", ROOT / "experiments" / "full_proxy_v1" / "run.py")
F = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(F)
S = F.S
MIX = 250
"""seed-distribution scenes per family of the base-demo mix (full proxy v2's)"""
EVAL_GROUP, EXT_N = 3, 50
"""robosuite's evaluation episodes: 50 per task of seed group 3, read by no earlier experiment"""
ARMS = ("full", "rate")


def say(msg: str) -> None:
    print(f"[gripper_rate_v1 {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def split_rate(eps: list[dict]) -> tuple[list[dict], float]:
    """The episodes with the start of the hand alone (no rate), and the rate the adapter reported."""
    rates = {ep["start"].get("gripper_rate") for ep in eps}
    assert len(rates) == 1 and None not in rates, f"the adapter reported rates {rates}"
    fast = [{**ep, "start": {k: v for k, v in ep["start"].items() if k != "gripper_rate"}} for ep in eps]
    return fast, float(rates.pop())


def slow(specs: list, rate: float) -> list:
    return [s.with_start({**s.start.model_dump(), "gripper_rate": rate}) for s in specs]


def robosuite_success(state) -> dict[str, list[int]]:
    act = chunk_fn(state.policy, mode="mean")
    return {t: [int(e.success) for e in run_task(act, "robosuite", t, episode_seeds(EXT_N, 1, EVAL_GROUP))[0]]
            for t in S.TASKS}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    seed = args.seed
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    t0 = time.process_time()
    ckpt = ROOT / f"experiments/grid_v31/base/transformer-s{seed}/checkpoints/base.pt"
    base = load_checkpoint(ckpt)
    scenes = {"full": [], "rate": []}
    mirror, mirror_tasks, dropped, rates = [], [], {"train": {}, "mirror": {}}, set()
    for task in S.TASKS:
        eps, rate = split_rate(F.episodes(task, F.PER_TASK, F.TRAIN_GROUP))
        rates.add(rate)
        full, _, d = F.proxies(task, eps, 300_000 + 1_000 * seed)  # full proxy v1's training scenes
        scenes["full"] += full
        scenes["rate"] += slow(full, rate)
        dropped["train"][task] = d
        eps, rate = split_rate(F.episodes(task, EXT_N, EVAL_GROUP))
        m, _, d = F.proxies(task, eps, 700_000 + 1_000 * seed, certify=True)
        mirror += m
        mirror_tasks += [task] * len(m)
        dropped["mirror"][task] = d
    (rate,) = rates
    mirror_rate = slow(mirror, rate)
    certified_rate = [int(planner_episode(s).success) for s in mirror_rate]
    mix = planner_demos([s for f in (*S.FAMILIES, "prep") for s in train_specs(f, MIX, distribution="seed")])
    dt = {arm: planner_demos(specs) for arm, specs in scenes.items()}
    say(f"seed {seed}: rate {rate}; D_t full {len(dt['full'])}/{len(scenes['full'])}, rate "
        f"{len(dt['rate'])}/{len(scenes['rate'])}, mix {len(mix)}; mirror {len(mirror)} (certified with the rate "
        f"{sum(certified_rate)}); dropped {dropped}")
    sim_home = [s for f in S.FAMILIES for s in eval_specs(f, "seed", S.SIM_N)]

    def evaluate(state, robosuite: bool = True) -> dict:
        out = {"mirror": S.sim_success(state, mirror), "mirror_rate": S.sim_success(state, mirror_rate),
               "sim_home": S.sim_success(state, sim_home)}
        if robosuite:
            out["robosuite"] = robosuite_success(state)
        return out

    out = {"commit": commit, "seed": seed, "checkpoint": str(ckpt.relative_to(ROOT)), "gripper_rate": rate,
           "per_task": F.PER_TASK, "updates": F.UPDATES, "replicates": S.REPLICATES, "ext_n": EXT_N,
           "eval_group": EVAL_GROUP, "sim_n": S.SIM_N, "tasks": list(S.TASKS), "dropped": dropped,
           "dt_demos": {k: len(v) for k, v in dt.items()}, "dt_steps": {k: sum(len(d.actions) for d in v)
                                                                          for k, v in dt.items()},
           "mix_demos": len(mix), "mirror_tasks": mirror_tasks, "mirror_rate_certified": certified_rate}
    out["base"] = evaluate(base)
    say(f"base: robosuite {({t: sum(v) for t, v in out['base']['robosuite'].items()})}, mirror "
        f"{np.mean(out['base']['mirror']):.3f}, mirror_rate {np.mean(out['base']['mirror_rate']):.3f}, sim home "
        f"{np.mean(out['base']['sim_home']):.3f}")
    out["arms"] = {}
    Path(args.out).write_text(json.dumps(out) + "\n")
    for arm in ARMS:
        reps = []
        for r in range(S.REPLICATES):
            state = _copy(base, seed=1000 * (seed + 1) + r)
            c0 = time.process_time()
            bc_finetune(state, demo_buffer(dt[arm] + mix), F.UPDATES)
            cpu = time.process_time() - c0
            got = evaluate(state)
            reps.append({"replicate": r, "train_cpu_s": round(cpu, 1), **got})
            say(f"{arm} replicate {r}: robosuite {({t: sum(v) for t, v in got['robosuite'].items()})}, mirror "
                f"{np.mean(got['mirror']):.3f}, mirror_rate {np.mean(got['mirror_rate']):.3f}, sim home "
                f"{np.mean(got['sim_home']):.3f}")
            out["arms"][arm] = reps
            Path(args.out).write_text(json.dumps(out) + "\n")
    out["cpu_s"] = round(time.process_time() - t0, 1)
    Path(args.out).write_text(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
