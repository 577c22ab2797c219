"""Rollout scaling: episodes/s in process, with 1 worker and with N workers (local processes or Ray actors).

Run as `coda bench rollouts --json`. Every configuration rolls the same policy out on the same scenes with the
same exploration seed, so the episodes must be identical; the benchmark checks that and reports the speedup of
N workers over 1 worker (scaling efficiency = speedup / N). The policy is a freshly initialised one (seed 0) or
`--policy CKPT`; inference runs batched in this process with one torch thread in every configuration.
"""

from __future__ import annotations

import argparse
import hashlib
import time

import torch

from policy.checkpoint import build_train_state, load_checkpoint
from policy.config import PolicyConfig, TrainConfig
from policy.evaluate import train_specs
from policy.rollout import Episode, chunk_fn, rollout
from policy.text import get_embedder
from sim.bench import at_least, families_list, int_list
from sim.constants import FAMILIES
from sim.workers import make_executor


def episodes_digest(episodes: list[Episode]) -> str:
    """A hash of every episode's actions and outcome (equal digests = identical rollouts)."""
    h = hashlib.sha256()
    for ep in episodes:
        h.update(ep.actions.tobytes())
        h.update(bytes([ep.success]))
        h.update(ep.steps.to_bytes(4, "little"))
    return h.hexdigest()[:16]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", type=int_list(1), default="1,2", help="comma-separated worker counts to compare")
    parser.add_argument("--envs", type=at_least(1), default=16, help="environments rolled out in lockstep")
    parser.add_argument("--families", type=families_list, default=",".join(FAMILIES),
                        help="scene families (round robin)")
    parser.add_argument("--repeats", type=at_least(1), default=2,
                        help="timed repetitions per configuration (best kept)")
    parser.add_argument("--executor", default="local", choices=["local", "ray"])
    parser.add_argument("--ray-address", default=None)
    parser.add_argument("--policy", default=None, help="checkpoint to roll out (default: fresh policy, seed 0)")


def run(args: argparse.Namespace) -> dict:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _run(args)
    finally:
        torch.set_num_threads(threads)


def _run(args) -> dict:
    families = args.families
    per = -(-args.envs // len(families))
    specs = [s for i in range(per) for f in families for s in train_specs(f, 1, start=i)][: args.envs]
    state = (load_checkpoint(args.policy) if args.policy
             else build_train_state(PolicyConfig(), TrainConfig(), with_critic=False, device="cpu"))
    policy = state.policy.eval()
    embedder = get_embedder("hash")

    def timed(executor) -> tuple[float, list[Episode]]:
        best, eps = float("inf"), []
        rollout(specs[:2], chunk_fn(policy, mode="mean"), embedder=embedder, executor=executor)  # start workers
        for _ in range(args.repeats):
            act = chunk_fn(policy, mode="sample", generator=torch.Generator().manual_seed(0))
            t0 = time.perf_counter()
            eps = rollout(specs, act, embedder=embedder, executor=executor, seeds=range(len(specs)))
            best = min(best, time.perf_counter() - t0)
        return best, eps

    result: dict = {"envs": len(specs), "families": families, "executor": args.executor}
    configs = [("in_process", "local", 1)] + [(f"{args.executor}_{w}", args.executor, w)
                                              for w in args.workers]
    digests = {}
    for name, kind, workers in configs:
        if kind == "local" and workers == 1 and name != "in_process":
            # one worker process (not in process): the baseline the speedup is measured against
            from sim.workers import ProcessExecutor

            executor = ProcessExecutor(1)
        else:
            executor = make_executor(kind, workers, address=args.ray_address)
        with executor:
            seconds, eps = timed(executor)
        steps = sum(e.steps for e in eps)
        digests[name] = episodes_digest(eps)
        result[name] = {"workers": workers, "seconds": round(seconds, 3), "episodes_per_s": round(len(eps) / seconds, 2),
                        "env_steps_per_s": round(steps / seconds, 1), "success": sum(e.success for e in eps),
                        "digest": digests[name]}
    base = result.get(f"{args.executor}_1", result["in_process"])
    for name, _, workers in configs[1:]:
        speedup = base["seconds"] / result[name]["seconds"]
        result[name]["speedup_vs_1_worker"] = round(speedup, 3)
        result[name]["efficiency"] = round(speedup / workers, 3)
        result[name]["speedup_vs_in_process"] = round(result["in_process"]["seconds"] / result[name]["seconds"], 3)
    result["identical_by_seed"] = len(set(digests.values())) == 1
    return result
