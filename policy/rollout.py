"""Rollouts in the simulator: planner demonstrations and batched policy rollouts.

Batched inference: all live environments are stepped in lockstep, one chunk at a time, and the policy runs one
forward pass for all of them at every chunk boundary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from policy.awr import select_chunk
from policy.data import collate_obs
from policy.text import get_embedder
from sim.constants import CHUNK
from sim.env import CodaEnv
from sim.planner import run_planner
from sim.spec import SceneSpec
from sim.trace import Trace, TraceRecorder


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
    env = CodaEnv(spec)
    demo = run_planner(env)
    obs = [*demo.observations, env.observe()]
    trace = None
    if record:
        rec = TraceRecorder(CodaEnv(spec))
        rec.reset()
        for a in demo.actions:
            rec.step(a)
        trace = rec.trace()
    return Episode(spec.spec_hash(), spec.family, obs, demo.action_array(), demo.success, demo.steps, trace=trace,
                   meta={"subgoals": demo.subgoals, "failure": demo.failure})


def planner_demos(specs: Sequence[SceneSpec], record: bool = False) -> list[Episode]:
    """Successful planner episodes only (planner-certified demonstrations)."""
    out = []
    for spec in specs:
        ep = planner_episode(spec, record=record)
        if ep.success:
            out.append(ep)
    return out


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
            execute: int = CHUNK, seeds: Sequence[int] | None = None) -> list[Episode]:
    """Roll out one episode per spec with batched action selection; returns episodes in spec order."""
    embedder = embedder or get_embedder()
    envs = [CodaEnv(s) for s in specs]
    recs = [TraceRecorder(e) if record else None for e in envs]
    seeds = list(seeds) if seeds is not None else [0] * len(envs)
    obs = [(r.reset(seed=s) if r else e.reset(seed=s)) for e, r, s in zip(envs, recs, seeds, strict=True)]
    history = [[o] for o in obs]
    actions: list[list[np.ndarray]] = [[] for _ in envs]
    done = [False] * len(envs)
    while not all(done):
        live = [i for i, d in enumerate(done) if not d]
        batch = collate_obs([obs[i] for i in live], embedder, device)
        chunks = act(batch).detach().cpu().numpy()
        for k, i in enumerate(live):
            stepper = recs[i] or envs[i]
            for a in chunks[k][:execute]:
                obs[i], _, term, trunc, _ = stepper.step(a)
                actions[i].append(a.astype(np.float32))
                history[i].append(obs[i])
                if term or trunc:
                    done[i] = True
                    break
    out = []
    for i, env in enumerate(envs):
        out.append(Episode(
            spec_hash=env.spec.spec_hash(), family=env.spec.family, observations=history[i],
            actions=np.asarray(actions[i], dtype=np.float32).reshape(-1, 7), success=env.success(),
            steps=env.steps, seed=seeds[i], trace=recs[i].trace() if recs[i] else None,
        ))
    return out
