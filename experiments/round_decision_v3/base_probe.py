"""Probe (not a decision run): how a BC base's held-out in-distribution success grows with updates, per demo count.

Used only to choose the converged base of protocol v3 (in-distribution numbers only, never OOD).
python experiments/round_decision_v3/base_probe.py FAMILY DEMOS1,DEMOS2 UPD1,UPD2,... EVAL
"""
import json
import sys
import time

import numpy as np

from policy.bench_round import successes
from policy.config import PolicyConfig, TrainConfig
from policy.evaluate import eval_specs, train_specs
from policy.rollout import planner_demos
from policy.train import bc_steps, demo_buffer, train_sft

family, demo_counts, checkpoints, n_eval = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
scenes = eval_specs(family, "in", n_eval)
out = {"family": family, "eval": n_eval, "rows": []}
for n in [int(x) for x in demo_counts.split(",")]:
    t0 = time.process_time()
    demos = planner_demos(train_specs(family, n, start=300_000))
    done = 0
    state = None
    for ck in [int(x) for x in checkpoints.split(",")]:
        if state is None:
            state, _ = train_sft(demos, PolicyConfig(), TrainConfig(seed=0), ck)
        else:
            bc_steps(state, demo_buffer(demos), ck - done)
        done = ck
        s = float(np.mean(successes(state, scenes)))
        row = {"demos": n, "planner_ok": len(demos), "updates": ck, "success": s, "cpu_s": round(time.process_time() - t0)}
        out["rows"].append(row)
        print(json.dumps(row), flush=True)
print(json.dumps(out))
