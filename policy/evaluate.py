"""Evaluation on in-distribution scenes and the four OOD suites: success rate with its standard error."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

from policy.rollout import Episode, chunk_fn, rollout
from sim.constants import DEFAULT_ROBOT, DISTRIBUTIONS
from sim.families import sample_spec
from sim.spec import SceneSpec
from sim.suites import EVAL_SEED_BASE, SEED_SPLIT, suite_specs
from sim.workers import Executor


def success_stats(episodes: Sequence[Episode]) -> dict:
    """n, success rate ± standard error, mean steps, and `outcomes`: one character per episode in order ("1"
    success, "0" failure), so two evaluations on the same scenes can be compared scene by scene (paired)."""
    n = len(episodes)
    p = sum(e.success for e in episodes) / n if n else 0.0
    se = math.sqrt(p * (1 - p) / n) if n else 0.0
    return {"n": n, "success_rate": p, "stderr": se, "mean_steps": sum(e.steps for e in episodes) / max(n, 1),
            "outcomes": "".join("1" if e.success else "0" for e in episodes)}


def eval_specs(family: str, suite: str, n: int, robot: str = DEFAULT_ROBOT) -> list[SceneSpec]:
    """The evaluation scenes of a suite ('in' = unseen seeds of the training distribution, 'seed' = of the base's
    seed distribution), for the embodiment `robot` (the same scenes for every robot)."""
    return [s.with_robot(robot) for s in suite_specs(family, suite, n)]


def policy_robot(state) -> str:
    """The embodiment a policy was trained on (checkpoints from before the Panda: the floating gripper)."""
    return str(state.extra.get("robot", DEFAULT_ROBOT))


def evaluate(policy, family: str, suite: str = "in", n: int = 20, critic=None, mode: str = "mean",
             device="cpu", batch: int = 32, executor: Executor | None = None, robot: str = DEFAULT_ROBOT) -> dict:
    """Roll the policy out on a suite (batched; environments on the executor's workers) and report its success
    rate ± standard error."""
    t0 = time.perf_counter()
    episodes = run_episodes(policy, eval_specs(family, suite, n, robot), critic=critic, mode=mode, device=device,
                            batch=batch, executor=executor)
    return {"family": family, "suite": suite, **success_stats(episodes), "seconds": round(time.perf_counter() - t0, 2)}


def run_episodes(policy, specs: Sequence[SceneSpec], *, seeds: Sequence[int] | None = None, critic=None,
                 mode: str = "mean", device="cpu", batch: int = 32, executor: Executor | None = None
                 ) -> list[Episode]:
    """One episode of the policy per spec (env seed `seeds[i]`, default 0), in batches of `batch`, in order."""
    act = chunk_fn(policy, critic, mode=mode)
    seeds = list(seeds) if seeds is not None else [0] * len(specs)
    episodes: list[Episode] = []
    for i in range(0, len(specs), batch):
        episodes += rollout(specs[i : i + batch], act, device=device, executor=executor, seeds=seeds[i : i + batch])
    return episodes


def train_specs(family: str, n: int, start: int = 0, distribution: str = "train",
                robot: str = DEFAULT_ROBOT) -> list[SceneSpec]:
    """Training scenes: family scenes with seeds [start, start + n), of the whole train side or (`distribution`
    "seed") of its narrow seed distribution, for the embodiment `robot`."""
    if start + n > EVAL_SEED_BASE:
        raise ValueError(f"training seeds must stay below {EVAL_SEED_BASE} (evaluation suites use the rest)")
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"distribution must be one of {', '.join(DISTRIBUTIONS)}, not {distribution!r}")
    split = SEED_SPLIT if distribution == "seed" else None
    return [sample_spec(family, s, split).with_robot(robot) for s in range(start, start + n)]
