"""Branch rollouts: Monte-Carlo advantages of sampled chunks over the chunk the policy deploys, and AWR on them.

The policy is deployed (evaluated) with its mean chunk. A *trunk* episode follows the mean chunks from reset. At
its first `levels` chunk boundaries the simulator state is copied into `candidates` branches; branch i executes
one chunk c_i sampled from the policy, then follows the mean policy to the end of the episode. With the branch
state s at control step t, branch i ending at step T_i, and the trunk ending at T:

    G_i = γ^(T_i − t) · success_i        G_mean(s) = γ^(T − t) · success_trunk
    A_i = G_i − G_mean(s)               (the advantage of c_i over the deployed mean chunk at s)

AWR then regresses the policy onto the chunks that beat the deployed one: weights exp(A/β) clipped, zero for
A ≤ 0, normalized to mean 1 over the kept chunks.

Why not the critic on ordinary rollouts (`policy.improve.awr_round`)? Measured on a weak pick_place policy
(docs/BENCHMARKS.md, Policy): a chunk critic fit on a few hundred sparse-reward episodes ranks held-out chunks
barely better than chance (AUC 0.55–0.65), so its advantages carry little information, and regressing onto
the policy's own sampled chunks with nearly uniform weights pulls it back towards its old behaviour (even
imitating only its successful episodes did not help). Branches compare chunks *from the same state*, so the
advantage needs no learned value; the baseline is the deployed chunk, so a chunk that is no better than what
the policy already does is never imitated, however lucky its episode.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from policy.awr import _step
from policy.buffer import ChunkReplayBuffer
from policy.checkpoint import TrainState
from policy.config import autocast
from policy.data import ACTION, WEIGHT, collate_obs, stack_obs, to_tensors
from policy.text import get_embedder
from sim.compile import compile_scene
from sim.constants import OBS_INSTRUCTION
from sim.env import CodaEnv
from sim.spec import SceneSpec


@dataclass
class BranchGroup:
    """The candidates tried from one trunk state and their returns."""

    spec_hash: str
    step: int
    """control step of the branch state"""
    obs: dict
    """the observation at the branch state"""
    chunks: np.ndarray
    """(J, h, A) candidate chunks, env units"""
    returns: np.ndarray
    """(J,) G_i of each candidate's branch"""
    mean_return: float
    """G_mean: the trunk's return from this state (mean chunk, then the mean policy)"""

    @property
    def advantages(self) -> np.ndarray:
        return self.returns - self.mean_return


def _finish(policy, envs: list[CodaEnv], obs: list[dict], embedder, device) -> None:
    """Follow the mean policy until every env's episode ends (one batched forward pass per chunk)."""
    done = [False] * len(envs)
    while not all(done):
        live = [i for i, d in enumerate(done) if not d]
        with torch.no_grad():
            chunks = policy.mean_action(collate_obs([obs[i] for i in live], embedder, device)).cpu().numpy()
        for k, i in enumerate(live):
            for a in chunks[k]:
                obs[i], _, term, trunc, _ = envs[i].step(a)
                if term or trunc:
                    done[i] = True
                    break


def _run_chunk(env: CodaEnv, chunk: np.ndarray) -> tuple[dict, bool]:
    obs, ended = None, False
    for a in chunk:
        obs, _, term, trunc, _ = env.step(a)
        if term or trunc:
            ended = True
            break
    return obs, ended


def branch_rollouts(policy, specs: Sequence[SceneSpec], *, levels: int = 2, candidates: int = 8,
                    gamma: float = 0.99, generator: torch.Generator | None = None, device="cpu", embedder=None,
                    batch: int = 16) -> list[BranchGroup]:
    """Branch groups at the first `levels` chunk boundaries of each scene's mean-policy episode (see module doc),
    in spec order, then by step (a trunk that ends earlier has fewer).

    Scenes are processed `batch` at a time; inference is batched over all their trunks and branches.
    """
    if levels < 1 or candidates < 1:
        raise ValueError(f"levels and candidates must be >= 1, got levels={levels}, candidates={candidates}")
    embedder = embedder or get_embedder()
    policy.eval()
    groups: list[BranchGroup] = []
    for start in range(0, len(specs), batch):
        part = specs[start : start + batch]
        compiled = [compile_scene(s) for s in part]
        trunks = [CodaEnv(c) for c in compiled]
        trunk_obs = [t.reset(seed=0) for t in trunks]
        trunk_done = [False] * len(trunks)
        mine: list[tuple[int, BranchGroup, list[CodaEnv]]] = []  # (scene index, group, branch envs)
        for _ in range(levels):
            live = [i for i, d in enumerate(trunk_done) if not d]
            if not live:
                break
            with torch.no_grad():
                obs_batch = collate_obs([trunk_obs[i] for i in live], embedder, device)
                means = policy.mean_action(obs_batch).cpu().numpy()
                samples = policy.sample(obs_batch, candidates, generator=generator).cpu().numpy()
            branch_envs, branch_obs = [], []
            for k, i in enumerate(live):
                saved, envs = trunks[i].get_state(), []
                for c in samples[k]:
                    env = CodaEnv(compiled[i])
                    env.reset(seed=0)
                    env.set_state(saved)
                    obs, ended = _run_chunk(env, c)
                    envs.append(env)
                    if not ended:
                        branch_envs.append(env)
                        branch_obs.append(obs)
                group = BranchGroup(part[i].spec_hash(), trunks[i].steps, trunk_obs[i],
                                    samples[k].astype(np.float32), np.zeros(candidates, np.float32), 0.0)
                mine.append((i, group, envs))
                trunk_obs[i], trunk_done[i] = _run_chunk(trunks[i], means[k])
            _finish(policy, branch_envs, branch_obs, embedder, device)
        _finish(policy, [t for t, d in zip(trunks, trunk_done, strict=True) if not d],
                [o for o, d in zip(trunk_obs, trunk_done, strict=True) if not d], embedder, device)
        for i, group, envs in sorted(mine, key=lambda m: (m[0], m[1].step)):  # spec order, then step
            group.returns = np.array([gamma ** (e.steps - group.step) * e.success() for e in envs], dtype=np.float32)
            group.mean_return = float(gamma ** (trunks[i].steps - group.step) * trunks[i].success())
            groups.append(group)
    return groups


def branch_batch(groups: Sequence[BranchGroup], beta: float, clip: float, embedder=None,
                 device="cpu") -> dict[str, torch.Tensor] | None:
    """The chunks with a positive advantage as one tensor batch with AWR weights (mean 1), or None if none."""
    keep = [(g, j) for g in groups for j in np.flatnonzero(g.advantages > 0)]
    if not keep:
        return None
    adv = np.array([g.advantages[j] for g, j in keep], dtype=np.float64)
    weight = np.exp(np.minimum(adv / beta, math.log(clip)))
    observations = [g.obs for g, _ in keep]
    arrays = stack_obs(observations)
    arrays[ACTION] = np.stack([g.chunks[j] for g, j in keep])
    arrays[WEIGHT] = (weight / weight.mean()).astype(np.float32)
    batch = to_tensors(arrays, device)
    emb = (embedder or get_embedder()).embed([str(o[OBS_INSTRUCTION]) for o in observations])
    batch["instruction_emb"] = torch.as_tensor(emb, device=device)
    return batch


def branch_awr_steps(state: TrainState, groups: Sequence[BranchGroup], updates: int,
                     demos: ChunkReplayBuffer | None = None, embedder=None) -> dict:
    """AWR updates on the positive-advantage branch chunks (+ `bc_weight` × BC on demos when given)."""
    cfg, t0 = state.train_config, time.perf_counter()
    data = branch_batch(groups, cfg.awr_beta, cfg.awr_weight_clip, embedder, state.device)
    kept = 0 if data is None else len(data[ACTION])
    losses: list[float] = []
    if data is not None and updates:
        from policy.train import finetune_schedule

        set_lr = finetune_schedule(state)
        state.policy.train()
        params = [p for p in state.policy.parameters() if p.requires_grad]
        for i in range(updates):
            set_lr(i)
            idx = torch.as_tensor(state.rng.integers(0, kept, cfg.batch_size), device=state.device)
            batch = {k: v[idx] for k, v in data.items()}
            with autocast(cfg, state.device):
                loss, _ = state.policy(batch)
                if demos is not None and len(demos) and cfg.bc_weight > 0:
                    demo = demos.sample(cfg.batch_size, state.rng, state.device)
                    loss = loss + cfg.bc_weight * state.policy({k: v for k, v in demo.items() if k != WEIGHT})[0]
            _step(state.policy_optimizer, loss, params, cfg.grad_clip)
            losses.append(float(loss.detach()))
            state.step += 1
        state.policy.eval()
    adv = np.concatenate([g.advantages for g in groups]) if groups else np.zeros(0)
    return {"groups": len(groups), "chunks": int(adv.size), "positive_chunks": kept,
            "mixed_groups": sum(bool((g.advantages != 0).any()) for g in groups),
            "branch_success": float(np.mean([(g.returns > 0).mean() for g in groups])) if groups else 0.0,
            "mean_chunk_success": float(np.mean([g.mean_return > 0 for g in groups])) if groups else 0.0,
            "updates": updates if kept else 0, "seconds": round(time.perf_counter() - t0, 2),
            "final_loss": float(np.mean(losses[-20:])) if losses else float("nan")}
