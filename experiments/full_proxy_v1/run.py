"""Full proxy v1 (PROTOCOL.md): BC on planner demos of proxies of robosuite episodes made with robosuite's start and
task (`full`) or without them (`objects`), evaluated on robosuite, on the evaluation episodes' proxies in this
simulator (`mirror`) and on the seed suite from home.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/full_proxy_v1/run.py --seed 9 --out experiments/full_proxy_v1/raw-s9.json
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
from policy.external.evaluate import episode_seeds
from policy.external.robosuite_tasks import TASKS as RS_TASKS
from policy.external.robosuite_tasks import RobosuiteAdapter
from policy.rollout import planner_demos, planner_episode
from policy.train import bc_finetune, demo_buffer
from sim.engine.proxy import proxy_scene
from sim.families import sample_spec

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("start_v1", ROOT / "experiments" / "start_v1" / "run.py")
S = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(S)

PER_TASK, UPDATES, TRIES = 120, 1000, 5
TRAIN_GROUP, EVAL_GROUP = 10, 0


def say(msg: str) -> None:
    print(f"[full_proxy_v1 {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def episodes(task: str, n: int, group: int) -> list[dict]:
    """The objects and start of the hand of n robosuite episodes of `task` (seed group `group`), this project's
    frame."""
    adapter = RobosuiteAdapter(task)
    try:
        out = []
        for s in episode_seeds(n, 1, group):
            adapter.reset(seed=s)
            out.append({"seed": s, "objects": adapter.start_objects(), "start": adapter.start_robot()})
        return out
    finally:
        adapter.close()


def proxies(task: str, eps: list[dict], base_seed: int, *, certify: bool = False, robot: str | None = None
            ) -> tuple[list, list, int]:
    """(full, objects) proxies of the episodes, paired by seed scene; with `certify`, a full proxy counts only when
    the planner solves it; with `robot`, both are that embodiment's (`SceneSpec.with_robot`; panda dose v1).
    Returns the two lists and how many episodes had none."""
    family, template = S.TASKS[task], RS_TASKS[task].template
    full, objects, dropped = [], [], 0
    for k, ep in enumerate(eps):
        for j in range(TRIES):
            seed_scene = sample_spec(family, base_seed + 10 * k + j)
            try:
                f = proxy_scene(seed_scene, ep["objects"], source=f"robosuite:{task}", seed=k, start=ep["start"],
                                template=template)
            except ValueError:
                continue
            o = proxy_scene(seed_scene, ep["objects"], source=f"robosuite:{task}", seed=k)
            if robot:
                f, o = f.with_robot(robot), o.with_robot(robot)
            if certify and not planner_episode(f).success:
                continue
            full.append(f)
            objects.append(o)
            break
        else:
            dropped += 1
    return full, objects, dropped


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
    round_scenes = {"full": [], "objects": []}
    mirror, dropped = [], {"train": {}, "mirror": {}}
    for task in S.TASKS:
        f, o, d = proxies(task, episodes(task, PER_TASK, TRAIN_GROUP), 300_000 + 1_000 * seed)
        round_scenes["full"] += f
        round_scenes["objects"] += o
        dropped["train"][task] = d
        m, _, d = proxies(task, episodes(task, S.EXT_N, EVAL_GROUP), 700_000 + 1_000 * seed, certify=True)
        mirror += [(task, s) for s in m]
        dropped["mirror"][task] = d
    mix = planner_demos([s for f in (*S.FAMILIES, "prep") for s in train_specs(f, S.MIX, distribution="seed")])
    dt = {arm: planner_demos(scenes) for arm, scenes in round_scenes.items()}
    say(f"seed {seed}: D_t full {len(dt['full'])}/{len(round_scenes['full'])}, objects "
        f"{len(dt['objects'])}/{len(round_scenes['objects'])}, mix {len(mix)}; mirror {len(mirror)}; dropped {dropped}")
    sim_home = [s for f in S.FAMILIES for s in eval_specs(f, "seed", S.SIM_N)]
    mirror_specs = [s for _, s in mirror]

    def evaluate(state, robosuite: bool = True) -> dict:
        out = {"mirror": S.sim_success(state, mirror_specs), "sim_home": S.sim_success(state, sim_home)}
        if robosuite:
            out["robosuite"] = S.robosuite_success(state)
        return out

    start_v1 = json.loads((ROOT / f"experiments/start_v1/raw-s{seed}.json").read_text())
    out = {"commit": commit, "seed": seed, "checkpoint": str(ckpt.relative_to(ROOT)), "per_task": PER_TASK,
           "updates": UPDATES, "replicates": S.REPLICATES, "ext_n": S.EXT_N, "sim_n": S.SIM_N, "tasks": list(S.TASKS),
           "dropped": dropped, "dt_demos": {k: len(v) for k, v in dt.items()}, "mix_demos": len(mix),
           "mirror_tasks": [t for t, _ in mirror],
           "base": {**evaluate(base, robosuite=False), "robosuite": start_v1["base"]["robosuite"]}}
    say(f"base: mirror {np.mean(out['base']['mirror']):.3f}, sim home {np.mean(out['base']['sim_home']):.3f}")
    out["arms"] = {}
    Path(args.out).write_text(json.dumps(out) + "\n")
    for arm in ("full", "objects"):
        reps = []
        for r in range(S.REPLICATES):
            state = _copy(base, seed=1000 * (seed + 1) + r)
            c0 = time.process_time()
            bc_finetune(state, demo_buffer(dt[arm] + mix), UPDATES)
            cpu = time.process_time() - c0
            got = evaluate(state)
            reps.append({"replicate": r, "train_cpu_s": round(cpu, 1), **got})
            say(f"{arm} replicate {r}: robosuite {({t: sum(v) for t, v in got['robosuite'].items()})}, mirror "
                f"{np.mean(got['mirror']):.3f}, sim home {np.mean(got['sim_home']):.3f}")
            out["arms"][arm] = reps
            Path(args.out).write_text(json.dumps(out) + "\n")
    out["cpu_s"] = round(time.process_time() - t0, 1)
    Path(args.out).write_text(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
