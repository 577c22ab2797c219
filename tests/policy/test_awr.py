"""AWR weights, TD targets and critic-guided chunk selection: golden numbers on tiny hand-made inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from policy.awr import awr_weights, candidate_weights, filter_weights, select_chunk, soft_update, td_targets
from policy.config import TrainConfig
from policy.data import DONE, INSTRUCTION_EMB, NEXT, PHI_NEXT, PHI_S, REWARD
from policy.modeling import ChunkCritic, ChunkPolicy
from sim.constants import ACTION_DIM, CHUNK, MAX_DPOS, MAX_DROT, OBS_OBJECT_MASK, OBS_OBJECTS, OBS_PROPRIO


def test_awr_weights_golden():
    adv = torch.tensor([-1.0, 0.0, 0.5, 2.0])
    # exp(A / 0.5) = exp([-2, 0, 1, 4]) = [0.135335283, 1, 2.718281828, 54.598 → clipped to 20]
    w = awr_weights(adv, beta=0.5, clip=20.0)
    np.testing.assert_allclose(w.numpy(), [0.1353352832, 1.0, 2.7182818285, 20.0], rtol=1e-6)
    # standardized: mean 0.375, population std sqrt(4.6875 / 4) = 1.0825317547
    w = awr_weights(adv, beta=1.0, clip=20.0, normalize=True)
    z = (np.array([-1.0, 0.0, 0.5, 2.0]) - 0.375) / 1.0825317547
    np.testing.assert_allclose(w.numpy(), np.exp(z), rtol=1e-5)
    np.testing.assert_allclose(w.numpy(), [0.2806, 0.7070, 1.1224, 4.4908], rtol=1e-3)
    assert torch.isfinite(awr_weights(torch.tensor([1e6]), 0.1, 20.0)).all()
    assert awr_weights(torch.tensor([1e6]), 0.1, 20.0).item() == pytest.approx(20.0)
    with pytest.raises(ValueError, match="beta"):
        awr_weights(adv, beta=0.0, clip=20.0)


def test_filter_weights_keep_only_positive_advantages_at_the_demos_strength():
    """The critic only selects: weight 0 where A <= 0, and the kept chunks' weights average len / kept, so the
    weighted mean NLL equals the kept chunks' mean NLL; no positive advantage gives all zeros (no AWR term)."""
    adv = torch.tensor([-1.0, 0.0, 0.5, 2.0])
    np.testing.assert_allclose(filter_weights(adv).numpy(), [0.0, 0.0, 2.0, 2.0])
    nll = torch.tensor([3.0, 5.0, 1.0, 2.0])
    assert float((filter_weights(adv) * nll).mean()) == pytest.approx(1.5)  # mean of the kept ones' 1.0 and 2.0
    assert filter_weights(torch.tensor([-0.1, 0.0])).sum().item() == 0.0
    with pytest.raises(ValueError, match="awr_weighting"):
        TrainConfig(awr_weighting="softmax")


class FixedCandidates:
    """Policy stub: j = 3 candidates per observation with dpos_x = 0, 0.02, 0.04."""

    values = torch.tensor([0.0, 0.02, 0.04])

    def sample(self, batch, n, generator=None):
        b = batch[OBS_PROPRIO].shape[0]
        chunks = torch.zeros(b, n, CHUNK, ACTION_DIM)
        chunks[..., 0] = self.values[:n].view(1, n, 1)
        return chunks


class TinyCritic(torch.nn.Module):
    """Q = 25 * mean_t dpos_x (two identical heads): candidates score 0, 0.5, 1."""

    def forward(self, batch, chunks):
        q = 25.0 * chunks[..., 0].mean(-1)
        return torch.stack([q, q], dim=-1)

    def q(self, batch, chunks, reduce="mean"):
        return self(batch, chunks).mean(-1)


def _obs(b: int = 2) -> dict[str, torch.Tensor]:
    return {OBS_PROPRIO: torch.zeros(b, 3), OBS_OBJECTS: torch.zeros(b, 1, 1), OBS_OBJECT_MASK: torch.ones(b, 1, dtype=torch.bool),
            INSTRUCTION_EMB: torch.zeros(b, 4)}


def test_select_chunk_softmax_golden():
    # softmax([0, 0.5, 1] / 0.5) = softmax([0, 1, 2]) = [0.09003057, 0.24472847, 0.66524096]
    expected = [0.09003057, 0.24472847, 0.66524096]
    np.testing.assert_allclose(candidate_weights(torch.tensor([0.0, 0.5, 1.0]), 0.5).numpy(), expected, rtol=1e-6)
    policy, critic, batch = FixedCandidates(), TinyCritic(), _obs()
    combined = select_chunk(policy, critic, batch, j=3, temperature=0.5, mode="softmax_combine")
    assert combined.shape == (2, CHUNK, ACTION_DIM)
    # 0.02 * 0.24472847 + 0.04 * 0.66524096 = 0.03150420
    np.testing.assert_allclose(combined[..., 0].numpy(), 0.0315042078, rtol=1e-6)
    assert torch.all(combined[..., 1:] == 0)
    best = select_chunk(policy, critic, batch, j=3, temperature=0.5, mode="argmax")
    assert torch.all(best[..., 0] == 0.04)
    gen = torch.Generator().manual_seed(0)
    picks = torch.stack([select_chunk(policy, critic, _obs(1), 3, 0.5, "sample", gen)[0, 0, 0] for _ in range(600)])
    freq = [(picks == v).float().mean().item() for v in FixedCandidates.values]
    np.testing.assert_allclose(freq, expected, atol=0.06)
    with pytest.raises(ValueError, match="mode"):
        select_chunk(policy, critic, batch, mode="best")


def test_td_targets_golden():
    batch = {**_obs(), **{NEXT + k: v for k, v in _obs().items() if k != INSTRUCTION_EMB},
             REWARD: torch.tensor([0.0, 1.0]), DONE: torch.tensor([False, True]),
             PHI_S: torch.tensor([0.25, 0.75]), PHI_NEXT: torch.tensor([0.5, 0.9])}
    disc = 0.99 ** 8
    # V(s') = mean Q over the three candidates = 0.5 (softmax: Σ w Q = 0.24472847 * 0.5 + 0.66524096 = 0.78760520)
    y = td_targets(TinyCritic(), FixedCandidates(), batch, disc, beta=2.0, j=3, next_value="mean")
    np.testing.assert_allclose(y.numpy(), [disc * 2 * 0.5 - 0.5 + disc * 0.5, 1.0 - 1.5], rtol=1e-6)
    y = td_targets(TinyCritic(), FixedCandidates(), batch, disc, beta=0.0, j=3, next_value="softmax", temperature=0.5)
    np.testing.assert_allclose(y.numpy(), [disc * 0.7876052, 1.0], rtol=1e-6)


def test_soft_update():
    a, b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    expected = 0.9 * a.weight.detach() + 0.1 * b.weight.detach()
    soft_update(a, b, 0.1)
    torch.testing.assert_close(a.weight.detach(), expected)


@pytest.mark.parametrize("backbone", ["transformer", "deepsets"])
def test_batched_sampling_shapes_and_limits(backbone, small_config, obs_batch):
    cfg = small_config(backbone, log_std_max=1.0)
    torch.manual_seed(0)
    policy, critic = ChunkPolicy(cfg).eval(), ChunkCritic(cfg).eval()
    batch = obs_batch(5)
    batch[OBS_OBJECTS] = batch[OBS_OBJECTS] * 1e3  # extreme inputs still give valid actions
    with torch.no_grad():
        torch.nn.init.normal_(policy.action_head.out.weight, std=3.0)  # push means far beyond the limits
        chunks = policy.sample(batch, 8)
        assert chunks.shape == (5, 8, CHUNK, ACTION_DIM)
        mean = policy.mean_action(batch)
    assert mean.shape == (5, CHUNK, ACTION_DIM)
    for x in (chunks, mean, select_chunk(policy, critic, batch, j=8), select_chunk(policy, critic, batch, 8, 0.5, "argmax")):
        assert torch.isfinite(x).all()
        assert x[..., :3].abs().max() <= MAX_DPOS + 1e-7
        assert x[..., 3:6].norm(dim=-1).max() <= MAX_DROT + 1e-6
        assert x[..., 6].abs().max() <= 1.0
    assert chunks[..., :3].abs().max() > 0.9 * MAX_DPOS  # clipping is active, not vacuous
    with torch.no_grad():
        q = critic.q(batch, chunks)
        assert q.shape == (5, 8) and torch.isfinite(q).all()
        assert critic(batch, chunks[:, 0]).shape == (5, cfg.critic_heads)
        assert not math.isnan(float(critic.q(batch, chunks[:, 0], reduce="min").sum()))


def test_awr_leaves_the_policy_normalization_as_sft_set_it(small_config, embedder):
    """The critic attached for AWR normalizes like the policy; the policy's statistics never change (replacing
    them with a round's rollout statistics shifted every input of the trained policy)."""
    from policy.bench import synthetic_observations
    from policy.checkpoint import build_train_state
    from policy.config import TrainConfig
    from policy.rollout import Episode
    from policy.train import awr_steps, demo_buffer, policy_obs_stats, rollout_buffer

    rng = np.random.default_rng(0)

    def episode(seed: int, steps: int = 12, scale: float = 1.0) -> Episode:
        obs = synthetic_observations(steps + 1, np.random.default_rng(seed))
        for o in obs:
            o[OBS_PROPRIO] = o[OBS_PROPRIO] * scale + scale
        actions = rng.uniform(-MAX_DPOS, MAX_DPOS, (steps, ACTION_DIM)).astype(np.float32)
        return Episode("s", "pick_place", obs, actions, success=bool(seed % 2), steps=steps)

    state = build_train_state(small_config(), TrainConfig(batch_size=8), with_critic=False, device="cpu")
    state.policy.set_obs_stats(demo_buffer([episode(1)], embedder).obs_stats())
    before = policy_obs_stats(state.policy)
    rollouts = rollout_buffer([episode(s, scale=5.0) for s in range(4)], embedder)  # very different statistics
    awr_steps(state, rollouts, None, critic_updates=2, policy_updates=2)
    after = policy_obs_stats(state.policy)
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value)
        np.testing.assert_array_equal(getattr(state.critic.tokenizer, name).numpy(), value)
        np.testing.assert_array_equal(getattr(state.critic_target.tokenizer, name).numpy(), value)


def test_policy_update_with_filter_weighting_clones_only_the_selected_chunks(small_config, embedder):
    """`awr_weighting="filter"`: the step's weights are the filter's (mean 1 over the batch, each kept chunk
    1 / positive share), where exp weighting gives a spread of positive weights on the same batch."""
    from policy.awr import policy_update
    from policy.bench import synthetic_observations
    from policy.checkpoint import build_train_state
    from policy.rollout import Episode
    from policy.train import rollout_buffer

    rng = np.random.default_rng(0)
    episodes = []
    for seed in range(4):
        obs = synthetic_observations(13, np.random.default_rng(seed))
        actions = rng.uniform(-MAX_DPOS, MAX_DPOS, (12, ACTION_DIM)).astype(np.float32)
        episodes.append(Episode("s", "pick_place", obs, actions, success=bool(seed % 2), steps=12))
    buf = rollout_buffer(episodes, embedder)
    out = {}
    for weighting in ("filter", "exp"):
        state = build_train_state(small_config(), TrainConfig(batch_size=16, awr_weighting=weighting, advantage="q"),
                                  device="cpu")
        batch = buf.sample(16, np.random.default_rng(1), "cpu")
        out[weighting] = policy_update(state.policy, state.policy_optimizer, batch, state.critic, state.train_config)
    f = out["filter"]
    assert 0.0 < f["positive_share"] < 1.0
    assert f["weight_mean"] == pytest.approx(1.0) and f["weight_max"] == pytest.approx(1.0 / f["positive_share"])
    assert out["exp"]["weight_max"] != pytest.approx(out["exp"]["weight_mean"])  # exp: graded, not 0 / constant
