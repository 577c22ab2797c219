"""Training loops: supervised fine-tuning (BC) on planner demonstrations, and AWR rounds on own rollouts.

Read top to bottom: data → update loop → logging. The model, losses and updates live in modeling.py / awr.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

from policy.awr import bc_update, critic_update, policy_update
from policy.buffer import ChunkReplayBuffer
from policy.checkpoint import TrainState, build_train_state
from policy.config import PolicyConfig, TrainConfig, autocast
from policy.rollout import Episode
from policy.text import get_embedder

log = logging.getLogger(__name__)

Progress = Callable[[int, int, dict], None]
"""called as progress(done, total, metrics)"""
AfterUpdate = Callable[[int], None]
"""called as after_update(k) after the k-th policy update of a loop (k = 1..updates), the policy in train mode"""


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block's torch arithmetic on `n` CPU threads and restore the count after (None: unchanged). For
    stretches of pure policy arithmetic (SFT, a round's updates) while nothing else computes: a second thread
    on a busy core slows an update many times over (docs/BENCHMARKS.md, "Torch threads")."""
    before = torch.get_num_threads()
    if not n or n == before:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@dataclass
class TrainLog:
    updates: int
    seconds: float
    losses: list[float]
    positive_share: float | None = None
    """AWR updates: the mean share of the policy's own chunks with a positive advantage"""

    def summary(self) -> dict:
        tail = self.losses[-20:] or [float("nan")]
        return {"updates": self.updates, "seconds": round(self.seconds, 2), "final_loss": float(np.mean(tail)),
                **({"positive_share": round(self.positive_share, 4)} if self.positive_share is not None else {})}


def demo_buffer(demos: Sequence[Episode], embedder=None, potentials=None) -> ChunkReplayBuffer:
    """Demonstrations as overlapping chunk windows (stride 1); perturbed demos (`policy.demos`) keep only the
    windows whose actions were executed without a perturbation, and an episode with meta[WINDOWS] only the
    windows it marks (`policy.phase_weight`)."""
    from policy.demos import PERTURBED, WINDOWS, clean_windows

    buf = ChunkReplayBuffer(capacity=max(1, sum(d.steps for d in demos)) + 8, embedder=embedder or get_embedder())
    for i, ep in enumerate(demos):
        phi = None if potentials is None else potentials[i]
        keep = clean_windows(ep.meta[PERTURBED]) if PERTURBED in ep.meta else ep.meta.get(WINDOWS)
        buf.add_episode(ep.observations, ep.actions, success=ep.success, is_demo=True, episode_id=i,
                        potentials=phi, stride=1, keep=keep)
    return buf


def balance_families(episodes: Sequence[Episode]) -> list[Episode]:
    """The episodes with those of each family repeated (in order, cyclically) until every family contributes at
    least the transitions of the largest one, so a uniform BC batch draws about a quarter from each of four
    families instead of following the episodes' lengths and counts (a round's D_t follows its failures, and
    long-horizon families have ~2.5x the steps). Families keep their own episodes: nothing is resampled across
    families; episodes without steps are dropped."""
    by_family: dict[str, list[Episode]] = {}
    for ep in episodes:
        if ep.steps > 0:
            by_family.setdefault(ep.family, []).append(ep)
    target = max((sum(ep.steps for ep in eps) for eps in by_family.values()), default=0)
    out: list[Episode] = []
    for eps in by_family.values():
        total = k = 0
        while total < target:
            ep = eps[k % len(eps)]
            out.append(ep)
            total, k = total + ep.steps, k + 1
    return out


def rollout_buffer(episodes: Sequence[Episode], embedder=None, potentials=None, capacity: int = 200_000,
                   stride: int | None = None) -> ChunkReplayBuffer:
    """Own rollouts (successes and failures) as chunk transitions."""
    buf = ChunkReplayBuffer(capacity=capacity, embedder=embedder or get_embedder())
    for i, ep in enumerate(episodes):
        if ep.steps == 0:
            continue
        phi = None if potentials is None else potentials[i]
        buf.add_episode(ep.observations, ep.actions, success=ep.success, is_demo=False, episode_id=i,
                        potentials=phi, stride=stride)
    return buf


def set_stats(state: TrainState, buf: ChunkReplayBuffer) -> None:
    stats = buf.obs_stats()
    state.policy.set_obs_stats(stats)
    if state.critic is not None:
        state.critic.set_obs_stats(stats)
        state.critic_target.set_obs_stats(stats)


OBS_STAT_NAMES = ("obj_mean", "obj_std", "proprio_mean", "proprio_std")


def policy_obs_stats(policy) -> dict[str, np.ndarray]:
    """The feature statistics the policy normalizes with (also through a LoRA wrapper)."""
    found = {name.rsplit(".", 1)[-1]: buf for name, buf in policy.named_buffers()
             if name.rsplit(".", 2)[-2:-1] == ["tokenizer"] and name.rsplit(".", 1)[-1] in OBS_STAT_NAMES}
    return {k: found[k].detach().cpu().numpy() for k in OBS_STAT_NAMES}


def attach_critic(state: TrainState) -> None:
    """A fresh critic that normalizes observations like the policy. The policy's statistics stay as SFT set
    them: replacing them with those of a round's rollouts would shift every input the policy was trained on."""
    state.attach_critic()
    stats = policy_obs_stats(state.policy)
    state.critic.set_obs_stats(stats)
    state.critic_target.set_obs_stats(stats)


def finetune_schedule(state: TrainState) -> Callable[[int], None]:
    """Start a fine-tuning phase (see TrainConfig.finetune_warmup): a fresh policy optimizer, and the returned
    set_lr(i) to call before policy update i (linear warmup to the configured rate)."""
    warmup, lr = state.train_config.finetune_warmup, state.train_config.lr
    if warmup == 0:
        return lambda i: None
    state.reset_policy_optimizer()

    def set_lr(i: int) -> None:
        for group in state.policy_optimizer.param_groups:
            group["lr"] = lr * min(1.0, (i + 1) / warmup)

    return set_lr


def train_sft(demos: Sequence[Episode], pcfg: PolicyConfig, tcfg: TrainConfig, updates: int,
              progress: Progress | None = None, device=None) -> tuple[TrainState, TrainLog]:
    """A base policy by behaviour cloning on planner demonstrations."""
    if not demos:
        raise ValueError("SFT needs at least one successful demonstration")
    buf = demo_buffer(demos)
    state = build_train_state(pcfg, tcfg, with_critic=False, device=device)
    set_stats(state, buf)
    state.extra["obs_stats_from"] = f"{len(demos)} demos"
    log_ = bc_steps(state, buf, updates, progress)
    return state, log_


def bc_steps(state: TrainState, buf: ChunkReplayBuffer, updates: int, progress: Progress | None = None,
             set_lr: Callable[[int], None] | None = None, after_update: AfterUpdate | None = None) -> TrainLog:
    """`updates` BC updates on batches from `buf`; `set_lr(i)` (a learning-rate schedule) before update i."""
    cfg, losses, t0 = state.train_config, [], time.perf_counter()
    state.policy.train()
    for i in range(updates):
        if set_lr is not None:
            set_lr(i)
        batch = buf.sample(cfg.batch_size, state.rng, state.device)
        with autocast(cfg, state.device):
            out = bc_update(state.policy, state.policy_optimizer, batch, cfg)
        losses.append(float(out["bc_mse"]))
        state.step += 1
        if after_update is not None:
            after_update(i + 1)
        if progress and (i + 1) % max(1, updates // 20) == 0:
            progress(i + 1, updates, {"loss": float(np.mean(losses[-20:]))})
    state.policy.eval()
    return TrainLog(updates, time.perf_counter() - t0, losses)


def bc_finetune(state: TrainState, demos: ChunkReplayBuffer, updates: int, progress: Progress | None = None,
                after_update: AfterUpdate | None = None) -> TrainLog:
    """BC fine-tuning of a trained policy (a round's demonstrations): a fresh optimizer with the fine-tuning
    warmup, like the AWR updates of a round, then `updates` BC updates."""
    return bc_steps(state, demos, updates, progress, set_lr=finetune_schedule(state) if updates else None,
                    after_update=after_update)


def awr_steps(state: TrainState, rollouts: ChunkReplayBuffer, demos: ChunkReplayBuffer | None,
              critic_updates: int, policy_updates: int, progress: Progress | None = None,
              after_update: AfterUpdate | None = None) -> TrainLog:
    """K_Q critic updates then K_π AWR policy updates (+ BC on demos when given)."""
    if state.critic is None:
        attach_critic(state)
    cfg, losses, shares, t0 = state.train_config, [], [], time.perf_counter()
    total = critic_updates + policy_updates
    state.policy.train()
    for i in range(critic_updates):
        batch = rollouts.sample(cfg.batch_size, state.rng, state.device)
        with autocast(cfg, state.device):
            out = critic_update(state.critic, state.critic_target, state.policy, state.critic_optimizer, batch, cfg)
        losses.append(float(out["critic_loss"]))
        if progress and (i + 1) % max(1, total // 20) == 0:
            progress(i + 1, total, {"critic_loss": float(np.mean(losses[-20:]))})
    set_lr = finetune_schedule(state) if policy_updates else None
    for i in range(policy_updates):
        set_lr(i)
        batch = rollouts.sample(cfg.batch_size, state.rng, state.device)
        demo = demos.sample(cfg.batch_size, state.rng, state.device) if demos is not None and len(demos) else None
        with autocast(cfg, state.device):
            out = policy_update(state.policy, state.policy_optimizer, batch, state.critic, cfg, demo)
        losses.append(float(out["policy_loss"]))
        shares.append(out["positive_share"])
        state.step += 1
        if after_update is not None:
            after_update(i + 1)
        if progress and (critic_updates + i + 1) % max(1, total // 20) == 0:
            progress(critic_updates + i + 1, total, {"policy_loss": float(np.mean(losses[-20:]))})
    state.policy.eval()
    return TrainLog(total, time.perf_counter() - t0, losses, float(np.mean(shares)) if shares else None)
