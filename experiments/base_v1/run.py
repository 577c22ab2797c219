"""Base decision v1 (see PROTOCOL.md): train one candidate base and evaluate it.

python experiments/base_v1/run.py {train,seed} OUT.json
"""
import json
import subprocess
import sys
import time

from policy.config import PolicyConfig, TrainConfig
from policy.evaluate import evaluate, train_specs
from policy.rollout import planner_demos
from policy.train import train_sft
from sim.constants import OOD_SUITES
from sim.workers import make_executor

FAMILIES = ("pick_place", "stack", "articulated", "prep")
DEMOS, UPDATES, N_IN, N_OOD = 250, 6000, 128, 32

distribution, out = sys.argv[1], sys.argv[2]
commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
ex = make_executor("local", 2)
t0, c0 = time.time(), time.process_time()
demos = []
for f in FAMILIES:
    got = planner_demos(train_specs(f, DEMOS, start=300_000, distribution=distribution), executor=ex)
    print(f"{f}: {len(got)} demos", flush=True)
    demos += got
state, log = train_sft(demos, PolicyConfig(), TrainConfig(seed=0), UPDATES)
print(f"trained {UPDATES} updates ({time.time() - t0:.0f} s)", flush=True)
own = "seed" if distribution == "seed" else "in"
suites = [(own, N_IN)] + [(s, N_OOD) for s in OOD_SUITES] + ([("in", N_OOD)] if own == "seed" else [])
rows = []
for f in FAMILIES:
    for s, n in suites:
        r = evaluate(state.policy, f, s, n, executor=ex)
        rows.append(r)
        print(f"{f} {s}: {100 * r['success_rate']:.1f} ± {100 * r['stderr']:.1f} (n={r['n']})", flush=True)
result = {"protocol": "experiments/base_v1/PROTOCOL.md", "commit": commit, "distribution": distribution,
          "demos_per_family": DEMOS, "demos": len(demos), "updates": UPDATES, "train": log.summary(), "eval": rows,
          "wall_s": round(time.time() - t0), "cpu_s_main": round(time.process_time() - c0)}
with open(out, "w") as fh:
    json.dump(result, fh, indent=1)
ex.close()
