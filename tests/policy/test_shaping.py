"""Staged potentials, shaped chunk rewards (golden numbers) and shaping invariance on a small MDP."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from policy.shaping import shaped_chunk_reward, shaped_chunk_rewards, staged_potential, staged_potentials

GAMMA, H = 0.99, 8
DISC = 0.99 ** 8  # 0.9227446944279201


def test_staged_potential_golden():
    assert staged_potential(0, 0.0, 4) == 0.0
    assert staged_potential(1, 0.5, 4) == 0.375  # (1 + 0.5) / 4
    assert staged_potential(2, 0.25, 3) == pytest.approx(0.75)  # (2 + 0.25) / 3
    assert staged_potential(3, 0.7, 3) == 1.0  # all subgoals done
    assert staged_potential(0, 1.7, 2) == 0.5  # φ clipped to 1
    assert staged_potential(1, -0.3, 2) == 0.5  # φ clipped to 0
    with pytest.raises(ValueError, match="K"):
        staged_potential(0, 0.5, 0)
    k, phi = np.array([0, 1, 3, 2]), np.array([0.5, 0.5, 0.9, 1.2])
    np.testing.assert_allclose(staged_potentials(k, phi, 3), [0.5 / 3, 0.5, 1.0, 1.0])
    np.testing.assert_allclose(staged_potentials(torch.tensor(k), torch.tensor(phi), 3).numpy(), [0.5 / 3, 0.5, 1.0, 1.0])


def test_shaped_chunk_reward_golden():
    assert DISC == pytest.approx(0.9227446944279201, abs=1e-15)
    # r + γ^h β Φ(s') − β Φ(s) = 0 + 0.92274469 * 2 * 0.5 − 2 * 0.25
    assert shaped_chunk_reward(0.0, 0.25, 0.5, GAMMA, H, 2.0, False) == pytest.approx(0.4227446944279201, abs=1e-12)
    # terminal: Φ(s') := 0 → 1 − 2 * 0.75
    assert shaped_chunk_reward(1.0, 0.75, 0.9, GAMMA, H, 2.0, True) == pytest.approx(-0.5, abs=1e-12)
    # β = 0 is the sparse reward
    assert shaped_chunk_reward(1.0, 0.3, 0.6, GAMMA, H, 0.0, False) == 1.0
    # shorter final chunk: h = 3 → 0.5 + 0.99^3 * 1 * 0.4 − 0.2 = 0.5 + 0.3881196 − 0.2
    assert shaped_chunk_reward(0.5, 0.2, 0.4, GAMMA, 3, 1.0, False) == pytest.approx(0.6881196, abs=1e-12)
    r, ps, pn = np.array([0.0, 1.0, 0.5]), np.array([0.25, 0.75, 0.2]), np.array([0.5, 0.9, 0.4])
    term, h, beta = np.array([False, True, False]), np.array([8, 8, 3]), np.array([2.0, 2.0, 1.0])
    expected = [0.4227446944279201, -0.5, 0.6881196]
    np.testing.assert_allclose(shaped_chunk_rewards(r, ps, pn, GAMMA, h, beta, term), expected, atol=1e-12)
    got = shaped_chunk_rewards(torch.tensor(r), torch.tensor(ps), torch.tensor(pn), GAMMA, torch.tensor(h),
                               torch.tensor(beta), torch.tensor(term))
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-12)


def chain_mdp(seed: int = 0):
    """5-state chain, 3 chunk-level actions. State 0: failure (terminal, r = 0), 4: goal (terminal, r = 1).

    Returns P (S, A, S) transition probabilities for non-terminal starts, r (S, A, S) rewards,
    terminal (S,) flags and a fixed stochastic policy pi (S, A).
    """
    rng = np.random.default_rng(seed)
    S, A = 5, 3
    P = np.zeros((S, A, S))
    for s in range(1, 4):
        for a, move in enumerate((-1, 0, 1)):  # left, stay, right chunks; each slips with some probability
            probs = rng.dirichlet(np.ones(3)) * 0.4
            P[s, a, s + move] += 0.6
            for k, m in enumerate((-1, 0, 1)):
                P[s, a, s + m] += probs[k]
    r = np.zeros((S, A, S))
    r[:, :, 4] = 1.0
    terminal = np.array([True, False, False, False, True])
    pi = rng.dirichlet(np.ones(A), size=S)
    return P, r, terminal, pi


def exact_q(P, r, terminal, pi, discount):
    """Solve Q = R + discount * P (1 − terminal) Π Q exactly (terminal values are 0)."""
    S, A, _ = P.shape
    R = (P * r).sum(-1)  # (S, A) expected reward
    # M[(s,a),(s',a')] = discount * P(s'|s,a) * (1 − terminal(s')) * pi(a'|s')
    M = discount * np.einsum("ijk,k,kl->ijkl", P, ~terminal, pi).reshape(S * A, S * A)
    live = np.repeat(~terminal, A)
    Q = np.zeros(S * A)
    Q[live] = np.linalg.solve(np.eye(live.sum()) - M[np.ix_(live, live)], R.reshape(-1)[live])
    Q = Q.reshape(S, A)
    V = (pi * Q).sum(-1)
    return Q, V


@pytest.mark.parametrize("beta", [0.5, 1.0, 3.0])
def test_shaping_leaves_advantages_unchanged(beta):
    P, r, terminal, pi = chain_mdp()
    phi = np.random.default_rng(1).uniform(0.0, 1.0, size=5)  # non-zero also at terminal states
    S, A = pi.shape
    Q, V = exact_q(P, r, terminal, pi, DISC)
    s_idx, _, s2_idx = np.meshgrid(np.arange(S), np.arange(A), np.arange(S), indexing="ij")
    r_shaped = shaped_chunk_rewards(r, phi[s_idx], phi[s2_idx], GAMMA, H, beta, terminal[s2_idx])
    Q_phi, V_phi = exact_q(P, r_shaped, terminal, pi, DISC)
    live = ~terminal
    adv, adv_phi = (Q - V[:, None])[live], (Q_phi - V_phi[:, None])[live]
    np.testing.assert_allclose(adv_phi, adv, rtol=0, atol=1e-9)
    # values shift by exactly −βΦ(s)
    np.testing.assert_allclose(Q_phi[live], (Q - beta * phi[:, None])[live], rtol=0, atol=1e-9)
    assert np.abs(adv).max() > 1e-2  # the test is not vacuous

    # without Φ(terminal) = 0 the invariance breaks: the shaping term leaks into terminal transitions
    r_wrong = shaped_chunk_rewards(r, phi[s_idx], phi[s2_idx], GAMMA, H, beta, np.zeros_like(terminal[s2_idx]))
    Q_w, V_w = exact_q(P, r_wrong, terminal, pi, DISC)
    assert np.abs((Q_w - V_w[:, None])[live] - adv).max() > 1e-3
