"""Diagnostic before the protocol: a grid base on its seed suite from home vs from robosuite's start (and each part of it).

    .venv/bin/python experiments/start_v1/diagnostic.py experiments/grid_v31/base/transformer-s9/checkpoints/base.pt
"""
import json
import sys
import time

from policy.checkpoint import load_policy
from policy.evaluate import eval_specs, run_episodes, success_stats
from sim.spec import RobotStart, SceneSpec

ckpt = sys.argv[1]
policy = load_policy(ckpt).eval()
start = RobotStart(pos=(0.46, 0.0, 0.22), quat=(0.997, 0.003, -0.075, 0.008), opening=0.52)
starts = {"home": None, "rs_start": start, "rs_pos_only": RobotStart(pos=(0.46, 0.0, 0.22)),
          "rs_tilt_only": RobotStart(quat=start.quat), "rs_open_only": RobotStart(opening=0.52)}
out = {}
for fam in ("pick_place", "stack"):
    specs = eval_specs(fam, "seed", 64)
    for k, st in starts.items():
        t = time.time()
        sp = [s if st is None else SceneSpec.model_validate({**s.model_dump(), "start": st.model_dump()}) for s in specs]
        r = success_stats(run_episodes(policy, sp))
        out[f"{fam}/{k}"] = r
        print(fam, k, round(r["success_rate"], 3), round(r["stderr"], 3), f"{time.time()-t:.0f}s", flush=True)
json.dump(out, open("experiments/start_v1/diagnostic.json", "w"), indent=1)
