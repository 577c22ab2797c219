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


class _TabularCritic:
    """Q(s, a) from a table, behind the chunk critic's interface (obs["s"] = state, chunk[..., 0, 0] = action)."""

    def __init__(self, q: np.ndarray):
        self.table = torch.tensor(q, dtype=torch.float64)

    def _q(self, s: torch.Tensor, chunks: torch.Tensor) -> torch.Tensor:
        a = chunks[..., 0, 0].long()
        return self.table[s.view(-1, *([1] * (a.dim() - 1))).expand_as(a), a].unsqueeze(-1).expand(*a.shape, 2)

    def __call__(self, obs, chunks):
        return self._q(obs["s"], chunks)

    def encode(self, batch):
        return batch["s"]

    def heads_from_features(self, feat, chunks):
        return self._q(feat, chunks)


class _DeterministicPolicy:
    def __init__(self, action: np.ndarray):
        self.action = torch.tensor(action)

    def sample(self, obs, j):
        a = self.action[obs["s"]].double()
        return a.view(-1, 1, 1, 1).expand(-1, j, 2, 1).clone()


def test_shaped_critic_code_path_keeps_advantages_on_an_exact_mdp():
    """The critic's own TD targets (`policy.awr.td_targets`, iterated to the fixed point over the exact transition
    probabilities) and its advantages (`advantages(mode="q")`): shaped by β·Φ they give the unshaped advantages,
    and Q_Φ = Q − βΦ(s) — the shaped critic the round trains leaves the policy's optimum unchanged."""
    from policy.awr import advantages, td_targets
    from policy.data import ACTION, DONE, INSTRUCTION_EMB, NEXT, PHI_NEXT, PHI_S, REWARD
    from sim.constants import OBS_OBJECT_MASK, OBS_OBJECTS, OBS_PROPRIO

    P, r, terminal, _ = chain_mdp()
    S, A, _ = P.shape
    act = np.random.default_rng(3).integers(0, A, size=S)
    pi = np.eye(A)[act]
    phi = np.random.default_rng(4).uniform(0.0, 1.0, size=S)
    beta = 2.0
    Q_exact, V_exact = exact_q(P, r, terminal, pi, DISC)
    s, a, s2 = (x.reshape(-1) for x in np.meshgrid(np.arange(S), np.arange(A), np.arange(S), indexing="ij"))
    n = len(s)
    zeros = torch.zeros(n, 1)
    batch = {"s": torch.tensor(s), NEXT + "s": torch.tensor(s2), ACTION: torch.tensor(a, dtype=torch.float64).view(n, 1, 1).expand(n, 2, 1),
             REWARD: torch.tensor(r[s, a, s2]), DONE: torch.tensor(terminal[s2]), INSTRUCTION_EMB: zeros,
             **{NEXT + k: zeros for k in (OBS_OBJECTS, OBS_OBJECT_MASK, OBS_PROPRIO)}}
    policy = _DeterministicPolicy(act)

    def solve(b: float) -> np.ndarray:
        q = np.zeros((S, A))
        tr = {**batch, PHI_S: torch.tensor(phi[s]), PHI_NEXT: torch.tensor(phi[s2])}
        for _ in range(400):
            y = td_targets(_TabularCritic(q), policy, tr, DISC, beta=b, j=4).double().numpy()
            q_new = np.zeros((S, A))
            np.add.at(q_new, (s, a), P[s, a, s2] * y)
            q_new[terminal] = 0.0
            q = q_new
        return q

    live = ~terminal
    q_sparse, q_shaped = solve(0.0), solve(beta)
    np.testing.assert_allclose(q_sparse[live], Q_exact[live], atol=1e-5)  # the code path finds the exact values
    np.testing.assert_allclose(q_shaped[live], (Q_exact - beta * phi[:, None])[live], atol=1e-5)
    adv = {b: advantages(_TabularCritic(q), policy, {"s": torch.tensor(s), ACTION: batch[ACTION]}, j=4, mode="q"
                         ).double().numpy() for b, q in (("sparse", q_sparse), ("shaped", q_shaped))}
    keep = live[s]
    np.testing.assert_allclose(adv["shaped"][keep], adv["sparse"][keep], atol=1e-5)
    np.testing.assert_allclose(adv["sparse"][keep], (Q_exact - V_exact[:, None])[s, a][keep], atol=1e-5)
    assert np.abs(adv["sparse"][keep]).max() > 1e-2  # not vacuous
