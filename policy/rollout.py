"""Rollouts in the simulator: planner demonstrations and batched policy rollouts.

Batched inference: all live environments are stepped in lockstep, one chunk at a time, and the policy runs one
forward pass for all of them at every chunk boundary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import torch

from policy.awr import select_chunk
from policy.data import collate_obs
from policy.text import get_embedder
from sim.constants import CHUNK
from sim.spec import SceneSpec
from sim.trace import Trace
from sim.workers import SERIAL, Executor, PlannerRun, planner_run


@dataclass
class Episode:
    """One episode: observations o_0..o_T, actions a_0..a_{T-1}, the outcome, and optionally the trace."""

    spec_hash: str
    family: str
    observations: list[dict]
    actions: np.ndarray
    success: bool
    steps: int
    seed: int = 0
    trace: Trace | None = None
    meta: dict = field(default_factory=dict)


def planner_episode(spec: SceneSpec, record: bool = False) -> Episode:
    """Run the scripted planner; the episode is a demonstration when it succeeds."""
    return _episode(spec, planner_run(spec, record=record))


def _episode(spec: SceneSpec, run: PlannerRun) -> Episode:
    return Episode(spec.spec_hash(), spec.family, run.observations, run.actions, run.success, run.steps,
                   trace=run.trace, meta=run.meta)


def planner_demos(specs: Sequence[SceneSpec], record: bool = False, executor: Executor | None = None
                  ) -> list[Episode]:
    """Successful planner episodes only (planner-certified demonstrations), in spec order; the planner runs on
    the executor's workers."""
    runs = (executor or SERIAL).map(partial(planner_run, record=record), list(specs))
    return [_episode(spec, run) for spec, run in zip(specs, runs, strict=True) if run.success]


ChunkFn = Callable[[dict], torch.Tensor]
"""maps a collated batch to (B, CHUNK, 7) action chunks"""


def chunk_fn(policy, critic=None, mode: str = "mean", j: int = 8, temperature: float = 0.5,
             generator: torch.Generator | None = None) -> ChunkFn:
    """How actions are chosen: 'mean' (deterministic), 'sample' (exploration) or 'critic' (j samples, Q-softmax)."""

    def act(batch):
        with torch.no_grad():
            if mode == "mean":
                return policy.mean_action(batch)
            if mode == "sample":
                return policy.sample(batch, 1, generator=generator)[:, 0]
            if mode == "critic":
                if critic is None:
                    raise ValueError("mode='critic' needs a critic")
                return select_chunk(policy, critic, batch, j=j, temperature=temperature, generator=generator)
        raise ValueError(f"unknown action mode {mode!r}; use mean, sample or critic")

    return act


def rollout(specs: Sequence[SceneSpec], act: ChunkFn, *, device="cpu", embedder=None, record: bool = False,
            execute: int = CHUNK, seeds: Sequence[int] | None = None, executor: Executor | None = None
            ) -> list[Episode]:
    """Roll out one episode per spec with batched action selection; returns episodes in spec order.

    The environments live on the executor's workers (in process by default); the policy runs here, one forward
    pass per chunk boundary for all live environments. Results do not depend on the executor."""
    embedder = embedder or get_embedder()
    seeds = list(seeds) if seeds is not None else [0] * len(specs)
    with (executor or SERIAL).env_pool() as pool:
        obs = pool.reset(specs, seeds, record=record)
        history = [[o] for o in obs]
        actions: list[list[np.ndarray]] = [[] for _ in specs]
        done = [False] * len(specs)
        while not all(done):
            live = [i for i, d in enumerate(done) if not d]
            batch = collate_obs([obs[i] for i in live], embedder, device)
            chunks = act(batch).detach().cpu().numpy()
            results = pool.step({i: chunks[k][:execute] for k, i in enumerate(live)})
            for i in live:
                res = results[i]
                history[i] += res.observations
                actions[i].append(res.actions)
                obs[i] = res.observations[-1]
                done[i] = res.done
        finals = pool.finish()
    return [
        Episode(spec_hash=spec.spec_hash(), family=spec.family, observations=history[i],
                actions=np.concatenate(actions[i]).reshape(-1, 7) if actions[i] else np.zeros((0, 7), np.float32),
                success=fin.success, steps=fin.steps, seed=seeds[i], trace=fin.trace)
        for i, (spec, fin) in enumerate(zip(specs, finals, strict=True))
    ]
