"""A useful potential speeds up chunk-level TD learning on a fixed dataset (sparse-reward chain).

Chain of N states, goal N-1 terminal with reward 1; two chunk actions (left / right, 90% success);
the evaluated policy goes right with probability 0.8. Potential Φ(s) = s / (N-1) (progress). The
learned shaped values are mapped back to task values with Q = Q_Φ + βΦ(s) and compared with the exact
Q^π from a linear solve.
"""

from __future__ import annotations

import copy
import logging

import numpy as np
import torch

from policy.awr import critic_update
from policy.checkpoint import make_optimizer
from policy.config import PolicyConfig, TrainConfig
from policy.data import (
    ACTION,
    DONE,
    INSTRUCTION_EMB,
    N_STEPS,
    NEXT,
    PHI_NEXT,
    PHI_S,
    REWARD,
    to_tensors,
)
from policy.modeling import ChunkCritic
from policy.shaping import shaped_chunk_rewards
from sim.constants import (
    ACTION_DIM,
    CHUNK,
    MAX_DPOS,
    MAX_OBJECTS,
    OBJ_DIM,
    OBS_OBJECT_MASK,
    OBS_OBJECTS,
    OBS_PROPRIO,
    PROPRIO_DIM,
)

log = logging.getLogger(__name__)

N = 12
DISC = 0.99 ** CHUNK
PI = np.array([0.2, 0.8])  # P(left), P(right)
PHI = np.arange(N) / (N - 1)


def true_q() -> np.ndarray:
    P = np.zeros((N, 2, N))
    for s in range(N - 1):
        P[s, 1, s + 1] += 0.9
        P[s, 1, s] += 0.1
        P[s, 0, max(s - 1, 0)] += 0.9
        P[s, 0, s] += 0.1
    live = np.arange(N) < N - 1
    M = DISC * np.einsum("ijk,k,l->ijkl", P, live, PI).reshape(2 * N, 2 * N)
    keep = np.repeat(live, 2)
    Q = np.zeros(2 * N)
    Q[keep] = np.linalg.solve(np.eye(keep.sum()) - M[np.ix_(keep, keep)], P[:, :, -1].reshape(-1)[keep])
    return Q.reshape(N, 2)


def chain_dataset(seed: int = 0, per_pair: int = 20):
    """Fixed dataset: per_pair sampled transitions for every (state, action)."""
    rng = np.random.default_rng(seed)
    s = np.repeat(np.arange(N - 1), 2 * per_pair)
    a = np.tile(np.repeat([0, 1], per_pair), N - 1)
    moved = rng.random(len(s)) < 0.9
    s2 = np.clip(s + np.where(moved, np.where(a == 1, 1, -1), 0), 0, N - 1)
    return s, a, s2, (s2 == N - 1).astype(float), s2 == N - 1


def tabular_value_error(beta: float, n_updates: int, alpha: float = 0.5) -> tuple[list[float], np.ndarray]:
    """Synchronous expected-SARSA sweeps over the fixed dataset: value error after each sweep, final task Q."""
    s, a, s2, r, term = chain_dataset()
    r_phi = shaped_chunk_rewards(r, PHI[s], PHI[s2], 0.99, CHUNK, beta, term)
    counts = np.zeros((N, 2))
    np.add.at(counts, (s, a), 1)
    Q, Qt, errors = np.zeros((N, 2)), true_q(), []
    for _ in range(n_updates):
        delta = r_phi + DISC * ~term * (Q[s2] @ PI) - Q[s, a]
        step = np.zeros((N, 2))
        np.add.at(step, (s, a), delta)
        Q = Q + alpha * step / np.maximum(counts, 1)
        errors.append(float(np.abs(Q[:-1] + beta * PHI[:-1, None] - Qt[:-1]).mean()))
    return errors, Q[:-1] + beta * PHI[:-1, None]


def test_tabular_td_converges_faster_with_potential():
    (sparse, q_sparse), (shaped, q_shaped) = tabular_value_error(0.0, 400), tabular_value_error(1.0, 400)
    log.info("tabular value error sparse %s shaped %s", [round(sparse[i], 4) for i in (4, 9, 19, 59)],
             [round(shaped[i], 4) for i in (4, 9, 19, 59)])
    for i in (4, 9, 19):
        assert shaped[i] < 0.5 * sparse[i]
    # both converge to the same fixed point (the dataset's empirical MDP; its sampling error remains)
    np.testing.assert_allclose(q_shaped, q_sparse, atol=1e-8)


def _chunk(action: int) -> np.ndarray:
    c = np.zeros((CHUNK, ACTION_DIM), np.float32)
    c[:, 0] = MAX_DPOS if action == 1 else -MAX_DPOS
    return c


def _obs(states: np.ndarray) -> dict[str, np.ndarray]:
    objects = np.zeros((len(states), MAX_OBJECTS, OBJ_DIM), np.float32)
    objects[:, 0, 0] = states / (N - 1)
    mask = np.zeros((len(states), MAX_OBJECTS), bool)
    mask[:, 0] = True
    proprio = np.zeros((len(states), PROPRIO_DIM), np.float32)
    proprio[:, 0] = states / (N - 1)
    return {OBS_OBJECTS: objects, OBS_OBJECT_MASK: mask, OBS_PROPRIO: proprio}


class ChainPolicy:
    """The evaluated policy as chunks: right with probability 0.8."""

    def sample(self, batch, n, generator=None):
        right = torch.rand(batch[OBS_PROPRIO].shape[0], n, generator=generator) < PI[1]
        chunks = torch.zeros(*right.shape, CHUNK, ACTION_DIM)
        chunks[..., 0] = torch.where(right, MAX_DPOS, -MAX_DPOS)[..., None]
        return chunks


def network_value_error(beta: float, n_updates: int, embedder, seed: int = 0) -> dict[int, float]:
    torch.manual_seed(seed)
    critic = ChunkCritic(PolicyConfig(d_model=32, ff_mult=2))
    target = copy.deepcopy(critic)
    cfg = TrainConfig(shaping_beta=beta, critic_lr=1e-3, target_tau=0.05, grad_clip=10.0)
    opt = make_optimizer(critic, cfg.critic_lr)
    s, a, s2, r, term = chain_dataset(seed)
    emb = np.repeat(embedder.embed(["walk to the right end"]), len(s), axis=0)
    data = to_tensors({**_obs(s), **{NEXT + k: v for k, v in _obs(s2).items()}, INSTRUCTION_EMB: emb,
                       ACTION: np.stack([_chunk(x) for x in a]), REWARD: r.astype(np.float32), DONE: term,
                       PHI_S: PHI[s].astype(np.float32), PHI_NEXT: PHI[s2].astype(np.float32),
                       N_STEPS: np.full(len(s), CHUNK)})
    states = np.repeat(np.arange(N - 1), 2)
    eval_obs = {**to_tensors(_obs(states)), INSTRUCTION_EMB: data[INSTRUCTION_EMB][: len(states)]}
    eval_chunks = torch.as_tensor(np.stack([_chunk(x) for x in np.tile([0, 1], N - 1)]))
    rng, Qt, errors = np.random.default_rng(seed), true_q(), {}
    for step in range(1, n_updates + 1):
        idx = torch.as_tensor(rng.integers(0, len(s), 64))
        critic_update(critic, target, ChainPolicy(), opt, {k: v[idx] for k, v in data.items()}, cfg)
        if step % 50 == 0:
            with torch.no_grad():
                q = critic.q(eval_obs, eval_chunks).numpy().reshape(N - 1, 2)
            errors[step] = float(np.abs(q + beta * PHI[:-1, None] - Qt[:-1]).mean())
    return errors


def test_network_critic_learns_faster_with_potential(embedder):
    sparse = network_value_error(0.0, 150, embedder)
    shaped = network_value_error(1.0, 150, embedder)
    log.info("ChunkCritic value error sparse %s shaped %s", sparse, shaped)
    assert shaped[150] < 0.5 * sparse[150]
    assert shaped[100] < sparse[100]
