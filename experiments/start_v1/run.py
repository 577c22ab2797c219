"""Start-matched D_t (experiments/start_v1/PROTOCOL.md): BC on planner demonstrations of the same round scenes,
from this simulator's home or from where robosuite's episodes start, evaluated on robosuite and on the seed suite.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/start_v1/run.py --seed 9 --out experiments/start_v1/raw-s9.json
"""

from __future__ import annotations

import argparse
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
from policy.external.robosuite_tasks import RobosuiteAdapter
from policy.rollout import chunk_fn, planner_demos, rollout
from policy.train import bc_finetune, demo_buffer
from sim.spec import SceneSpec

ROOT = Path(__file__).resolve().parents[2]
TASKS = {"Lift": "pick_place", "PickPlaceCan": "pick_place", "Stack": "stack", "Door": "articulated"}
FAMILIES = ("pick_place", "stack", "articulated")
SCENES, MIX, UPDATES, REPLICATES, EXT_N, SIM_N = 40, 125, 250, 2, 25, 64
PROBE_GROUP = 10
"""seed group of the episodes whose start the round scenes copy (the loop's EXTERNAL_PROBE_GROUP; evaluation: 0)"""


def say(msg: str) -> None:
    print(f"[start_v1 {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def robosuite_starts(task: str, n: int) -> list[dict]:
    """Where the hand starts in n robosuite episodes of `task` (the probe group's seeds), this project's frame."""
    adapter = RobosuiteAdapter(task)
    try:
        out = []
        for seed in episode_seeds(n, 1, PROBE_GROUP):
            adapter.reset(seed=seed)
            out.append(adapter.start_robot())
        return out
    finally:
        adapter.close()


def started(spec: SceneSpec, start: dict) -> SceneSpec:
    return SceneSpec.model_validate({**spec.model_dump(), "start": start})


def sim_success(state, specs) -> list[int]:
    act = chunk_fn(state.policy, mode="mean")
    return [int(ep.success) for i in range(0, len(specs), 32) for ep in rollout(specs[i : i + 32], act)]


def robosuite_success(state) -> dict[str, list[int]]:
    act = chunk_fn(state.policy, mode="mean")
    return {t: [int(e.success) for e in run_task(act, "robosuite", t, episode_seeds(EXT_N, 1, 0))[0]] for t in TASKS}


def evaluate(state, sim_home, sim_start) -> dict:
    return {"robosuite": robosuite_success(state), "sim_home": sim_success(state, sim_home),
            "sim_start": sim_success(state, sim_start)}


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
    starts = {t: robosuite_starts(t, SCENES) for t in TASKS}
    by_family = {f: [s for t, fam in TASKS.items() if fam == f for s in starts[t]] for f in FAMILIES}
    round_home = [s for f in FAMILIES for s in train_specs(f, SCENES, start=200_000 + 1_000 * seed)]
    round_start = [started(s, by_family[s.family][i % len(by_family[s.family])])
                   for i, s in enumerate(round_home)]
    mix = planner_demos([s for f in (*FAMILIES, "prep") for s in train_specs(f, MIX, distribution="seed")])
    dt = {"home": planner_demos(round_home), "start": planner_demos(round_start)}
    say(f"seed {seed}: D_t home {len(dt['home'])}/{len(round_home)}, start {len(dt['start'])}/{len(round_start)}, "
        f"mix {len(mix)}; starts e.g. {starts['Lift'][0]}")
    eval_start = starts["Lift"][0]
    sim_home = [s for f in FAMILIES for s in eval_specs(f, "seed", SIM_N)]
    sim_start = [started(s, eval_start) for s in sim_home]
    out = {"commit": commit, "seed": seed, "checkpoint": str(ckpt.relative_to(ROOT)), "scenes": SCENES, "mix": MIX,
           "updates": UPDATES, "replicates": REPLICATES, "ext_n": EXT_N, "sim_n": SIM_N, "tasks": list(TASKS),
           "starts": starts, "eval_start": eval_start, "dt_demos": {k: len(v) for k, v in dt.items()},
           "mix_demos": len(mix)}
    out["base"] = evaluate(base, sim_home, sim_start)
    say(f"base: robosuite {({t: sum(v) for t, v in out['base']['robosuite'].items()})}, sim home "
        f"{np.mean(out['base']['sim_home']):.3f}, sim start {np.mean(out['base']['sim_start']):.3f}")
    Path(args.out).write_text(json.dumps(out) + "\n")
    out["arms"] = {}
    for arm in ("home", "start"):
        reps = []
        for r in range(REPLICATES):
            state = _copy(base, seed=1000 * (seed + 1) + r)
            c0 = time.process_time()
            bc_finetune(state, demo_buffer(dt[arm] + mix), UPDATES)
            cpu = time.process_time() - c0
            got = evaluate(state, sim_home, sim_start)
            reps.append({"replicate": r, "train_cpu_s": round(cpu, 1), **got})
            say(f"{arm} replicate {r}: robosuite {({t: sum(v) for t, v in got['robosuite'].items()})}, sim home "
                f"{np.mean(got['sim_home']):.3f}, sim start {np.mean(got['sim_start']):.3f}")
            out["arms"][arm] = reps
            Path(args.out).write_text(json.dumps(out) + "\n")
    out["cpu_s"] = round(time.process_time() - t0, 1)
    Path(args.out).write_text(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
