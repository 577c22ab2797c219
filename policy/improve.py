"""One policy-improvement round: roll out, optionally shape with potentials, update critic and policy (AWR)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import torch

from policy.checkpoint import TrainState
from policy.rollout import Episode, chunk_fn, rollout
from policy.train import AfterUpdate, Progress, awr_steps, demo_buffer, rollout_buffer
from sim.spec import SceneSpec
from sim.workers import Executor

if TYPE_CHECKING:
    from policy.branch import PhiFn

PotentialFn = Callable[[Episode], list[float]]
"""Φ at each of an episode's T+1 observations (chunk endpoints are what the critic reads)"""


def collect(state: TrainState, specs: Sequence[SceneSpec], rollouts_per_scene: int = 1, mode: str = "sample",
            seed: int = 0, record: bool = False, executor: Executor | None = None) -> list[Episode]:
    """Own rollouts for training: stochastic chunks (exploration), batched over all scenes."""
    gen = torch.Generator(device=state.device).manual_seed(seed)
    act = chunk_fn(state.policy, state.critic, mode=mode, generator=gen)
    episodes = []
    for _ in range(rollouts_per_scene):
        episodes += rollout(specs, act, device=state.device, record=record, executor=executor)
    return episodes


def awr_round(state: TrainState, specs: Sequence[SceneSpec], *, rollouts_per_scene: int = 2,
              demos: Sequence[Episode] | None = None, critic_updates: int = 300, policy_updates: int = 300,
              potential: PotentialFn | None = None, seed: int = 0, progress: Progress | None = None,
              episodes: Sequence[Episode] | None = None, executor: Executor | None = None,
              after_update: AfterUpdate | None = None) -> dict:
    """Collect (unless `episodes` are given), then K_Q critic and K_π policy updates. Returns round metrics."""
    episodes = (list(episodes) if episodes is not None
                else collect(state, specs, rollouts_per_scene, seed=seed, executor=executor))
    phis = [potential(ep) for ep in episodes] if potential else None
    buf = rollout_buffer(episodes, potentials=phis)
    dbuf = demo_buffer(demos) if demos else None
    tlog = awr_steps(state, buf, dbuf, critic_updates, policy_updates, progress, after_update)
    return {
        "episodes": len(episodes),
        "rollout_success": sum(e.success for e in episodes) / max(1, len(episodes)),
        "transitions": len(buf),
        **tlog.summary(),
    }


def branch_round(state: TrainState, specs: Sequence[SceneSpec], *, levels: int | None = None,
                 candidates: int | None = None, policy_updates: int = 50, demos: Sequence[Episode] | None = None,
                 seed: int = 0, phi: Mapping[str, PhiFn] | None = None, horizon: int | None = None,
                 shaping: str | None = None) -> dict:
    """Branch rollouts on `specs`, then AWR on the chunks that beat the policy's mean chunk (`policy.branch`).
    Scenes whose spec hash is in `phi` are shaped by their potential (cut after `horizon` chunks, valued by
    shaping_beta · Φ; `shaping` "cut" or "fallback", see `policy.branch`). levels, candidates, horizon and shaping
    default to TrainConfig.branch_levels / branch_candidates / branch_horizon / branch_shaping."""
    from policy.branch import branch_awr_steps, branch_rollouts

    cfg = state.train_config
    levels = cfg.branch_levels if levels is None else levels
    candidates = cfg.branch_candidates if candidates is None else candidates
    horizon = cfg.branch_horizon if horizon is None else horizon
    shaping = cfg.branch_shaping if shaping is None else shaping
    gen = torch.Generator(device=state.device).manual_seed(seed)
    failures: dict[str, str] = {}
    groups = branch_rollouts(state.policy, specs, levels=levels, candidates=candidates, gamma=cfg.gamma,
                             generator=gen, device=state.device, phi=phi, horizon=horizon, beta=cfg.shaping_beta,
                             shaping=shaping, failures=failures)
    info = branch_awr_steps(state, groups, policy_updates, demo_buffer(demos) if demos else None)
    return {**info, "potential_failures": failures} if failures else info
