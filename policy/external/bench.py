"""Speed of the external suites on this machine: robosuite's own env steps/s (timed inside the worker), the same
through the adapter (pipe, target mapping and observation included), and the start-up and reset costs.

    python -m policy.external.bench --tasks Lift,Door --steps 200 --json
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from policy.external import make_adapter


def bench_task(task: str, steps: int = 200, resets: int = 3, benchmark: str = "robosuite") -> dict:
    t0 = time.perf_counter()
    env = make_adapter(benchmark, task, max_steps=10**6)
    make_s = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        for s in range(resets):
            env.reset(seed=s)
        reset_s = (time.perf_counter() - t0) / resets
        raw = env.worker.call({"cmd": "bench", "n": steps})
        env.reset(seed=0)
        chunk = np.tile([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0], (8, 1))
        external, t0 = 0, time.perf_counter()
        while external < steps:
            _, _, _, _, info = env.step_chunk(chunk)
            external += info["external_steps"]
        adapter_s = time.perf_counter() - t0
    finally:
        env.close()
    return {"task": task, "make_seconds": round(make_s, 2), "reset_seconds": round(reset_s, 2),
            "robosuite_steps_per_s": round(raw["steps"] / raw["seconds"], 1),
            "adapter_external_steps_per_s": round(external / adapter_s, 1),
            "adapter_control_steps_per_s": round(external / env.steps_per_action / adapter_s, 1)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m policy.external.bench", description=__doc__)
    p.add_argument("--tasks", default="Lift,Stack,PickPlaceCan,Door")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    rows = [bench_task(t, args.steps) for t in args.tasks.split(",") if t]
    print(json.dumps(rows, indent=2) if args.json else "\n".join(str(r) for r in rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
