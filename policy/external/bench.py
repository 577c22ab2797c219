"""Speed of the external suites on this machine: the simulator's own env steps/s (timed inside the worker), the
same through the adapter (pipe, target mapping and observation included), and the start-up and reset costs.

    python -m policy.external.bench --tasks Lift,Door --steps 200 --json
    python -m policy.external.bench --benchmark metaworld --steps 400 --json
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
        external, adapter_s = 0, 0.0
        while external < steps:
            t0 = time.perf_counter()
            _, _, terminated, truncated, info = env.step_chunk(chunk)
            adapter_s += time.perf_counter() - t0
            external += info["external_steps"]
            if terminated or truncated:  # Meta-World's episodes end at 500 env steps: resets are not timed
                env.reset(seed=external)
    finally:
        env.close()
    return {"task": task, "make_seconds": round(make_s, 2), "reset_seconds": round(reset_s, 2),
            f"{benchmark}_steps_per_s": round(raw["steps"] / raw["seconds"], 1),
            "adapter_external_steps_per_s": round(external / adapter_s, 1),
            "adapter_control_steps_per_s": round(external / env.steps_per_action / adapter_s, 1)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m policy.external.bench", description=__doc__)
    p.add_argument("--benchmark", default="robosuite", help="robosuite or metaworld")
    p.add_argument("--tasks", help="default: all of the benchmark's tasks")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    from policy.external import benchmark_tasks

    tasks = args.tasks.split(",") if args.tasks else benchmark_tasks(args.benchmark)
    rows = [bench_task(t, args.steps, benchmark=args.benchmark) for t in tasks if t]
    print(json.dumps(rows, indent=2) if args.json else "\n".join(str(r) for r in rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
