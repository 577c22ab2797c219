"""Proxy v1 (PROTOCOL.md): start v1's round with each scene started where robosuite's episodes start AND its task
restated by the template of the robosuite task whose start it took; compared with start v1's arms.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/proxy_v1/run.py --seed 9 --out experiments/proxy_v1/raw-s9.json
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
from policy.external.robosuite_tasks import TASKS as RS_TASKS
from policy.rollout import planner_demos
from policy.train import bc_finetune, demo_buffer
from sim.resample import with_template

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("start_v1", ROOT / "experiments" / "start_v1" / "run.py")
S = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(S)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--save", default=None, help="a diagnostic: train replicate 0 only, save its checkpoint here "
                    "(no evaluation)")
    ap.add_argument("--updates", type=int, default=S.UPDATES, help="with --save: BC updates (a diagnostic dose)")
    ap.add_argument("--scenes", type=int, default=S.SCENES, help="with --save: round scenes per family (a diagnostic dose)")
    args = ap.parse_args()
    if not args.save and (args.updates != S.UPDATES or args.scenes != S.SCENES):
        ap.error("--updates and --scenes are diagnostic settings: give them with --save only")
    S.SCENES = args.scenes
    seed = args.seed
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    base = load_checkpoint(ROOT / f"experiments/grid_v31/base/transformer-s{seed}/checkpoints/base.pt")
    starts = {t: S.robosuite_starts(t, S.SCENES) for t in S.TASKS}
    by_family = {f: [(t, s) for t, fam in S.TASKS.items() if fam == f for s in starts[t]] for f in S.FAMILIES}
    scenes, kept_task = [], 0
    for i, s in enumerate(s for f in S.FAMILIES for s in train_specs(f, S.SCENES, start=200_000 + 1_000 * seed)):
        task, start = by_family[s.family][i % len(by_family[s.family])]
        s = S.started(s, start)
        try:
            s = with_template(s, RS_TASKS[task].template)
        except ValueError:
            kept_task += 1  # the scene's objects do not fit the template: it keeps its own task
        scenes.append(s)
    mix = planner_demos([s for f in (*S.FAMILIES, "prep") for s in train_specs(f, S.MIX, distribution="seed")])
    dt = planner_demos(scenes)
    S.say(f"seed {seed}: D_t start+task {len(dt)}/{len(scenes)} ({kept_task} kept their task), mix {len(mix)}; "
          f"templates {sorted({s.task.template for s in scenes})}")
    eval_start = starts["Lift"][0]
    sim_home = [s for f in S.FAMILIES for s in eval_specs(f, "seed", S.SIM_N)]
    sim_start = [S.started(s, eval_start) for s in sim_home]
    out = {"commit": commit, "seed": seed, "dt_demos": len(dt), "kept_task": kept_task, "mix_demos": len(mix),
           "templates": sorted({s.task.template for s in scenes}), "arms": {"start_task": []}}
    for r in range(S.REPLICATES):
        state = _copy(base, seed=1000 * (seed + 1) + r)
        c0 = time.process_time()
        bc_finetune(state, demo_buffer(dt + mix), args.updates)
        cpu = time.process_time() - c0
        if args.save:
            save_checkpoint(args.save, state)
            return None
        got = S.evaluate(state, sim_home, sim_start)
        out["arms"]["start_task"].append({"replicate": r, "train_cpu_s": round(cpu, 1), **got})
        S.say(f"start_task replicate {r}: robosuite {({t: sum(v) for t, v in got['robosuite'].items()})}, sim home "
              f"{np.mean(got['sim_home']):.3f}, sim start {np.mean(got['sim_start']):.3f}")
        Path(args.out).write_text(json.dumps(out) + "\n")


if __name__ == "__main__":
    sys.exit(main())
