"""A diagnostic dose (mirror v1): BC from grid v3.1's base s9 on planner demos of full proxy scenes of robosuite Lift
episodes (seed group 10: the cube's position and size, robosuite's start, the `pp_lift` task; `sim.engine.proxy`)
plus start v1's base-demo mix, then saved for `mirror.py`.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/mirror_v1/proxy_dose.py --n 120 --updates 1000 --save /tmp/proxy_full.pt
"""

from __future__ import annotations

import argparse

from policy.bench_round import _copy
from policy.checkpoint import load_checkpoint, save_checkpoint
from policy.evaluate import train_specs
from policy.external.evaluate import episode_seeds
from policy.external.robosuite_tasks import RobosuiteAdapter
from policy.rollout import planner_demos
from policy.train import bc_finetune, demo_buffer
from sim.engine.proxy import proxy_scene
from sim.families import sample_spec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=120)
    ap.add_argument("--updates", type=int, default=1000)
    ap.add_argument("--save", required=True)
    args = ap.parse_args()
    adapter = RobosuiteAdapter("Lift")
    scenes = []
    try:
        for k, seed in enumerate(episode_seeds(args.n, 1, 10)):
            adapter.reset(seed=seed)
            try:
                scenes.append(proxy_scene(sample_spec("pick_place", 300_000 + k), adapter.start_objects(),
                                          source="robosuite:Lift", seed=k, start=adapter.start_robot(),
                                          template="pp_lift"))
            except ValueError:
                pass
    finally:
        adapter.close()
    dt = planner_demos(scenes)
    mix = planner_demos([s for f in ("pick_place", "stack", "articulated", "prep")
                         for s in train_specs(f, 125, distribution="seed")])
    print(f"proxies {len(scenes)}, demos {len(dt)}, mix {len(mix)}", flush=True)
    state = _copy(load_checkpoint("experiments/grid_v31/base/transformer-s9/checkpoints/base.pt"), seed=10_000)
    bc_finetune(state, demo_buffer(dt + mix), args.updates)
    save_checkpoint(args.save, state)


if __name__ == "__main__":
    main()
