"""Branch rollouts and AWR on the chunks that beat the policy's mean chunk (policy.branch)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from policy.bench import synthetic_observations
from policy.branch import BranchGroup, branch_awr_steps, branch_batch, branch_rollouts
from policy.checkpoint import build_train_state
from policy.config import TrainConfig
from policy.data import ACTION, WEIGHT, collate_obs
from sim.constants import ACTION_DIM, CHUNK, MAX_DPOS
from sim.families import sample_spec


def _group(seed: int, returns, mean_return: float) -> BranchGroup:
    rng = np.random.default_rng(seed)
    obs = synthetic_observations(1, rng)[0]
    chunks = rng.uniform(-MAX_DPOS, MAX_DPOS, (len(returns), CHUNK, ACTION_DIM)).astype(np.float32)
    return BranchGroup("s", 0, obs, chunks, np.asarray(returns, np.float32), mean_return)


def test_branch_batch_keeps_only_chunks_that_beat_the_mean_chunk(embedder):
    groups = [_group(0, [0.0, 0.9, 0.5, 0.0], 0.5), _group(1, [0.0, 0.0], 0.0), _group(2, [0.8, 0.0], 0.0)]
    np.testing.assert_allclose(groups[0].advantages, [-0.5, 0.4, 0.0, -0.5])
    batch = branch_batch(groups, beta=0.2, clip=20.0, embedder=embedder)
    assert len(batch[ACTION]) == 2  # group 0 candidate 1 (A = 0.4) and group 2 candidate 0 (A = 0.8)
    torch.testing.assert_close(batch[ACTION][0], torch.as_tensor(groups[0].chunks[1]))
    torch.testing.assert_close(batch[ACTION][1], torch.as_tensor(groups[2].chunks[0]))
    raw = np.array([np.exp(2.0), 20.0])  # exp(0.4 / 0.2) and exp(4) clipped to 20
    torch.testing.assert_close(batch[WEIGHT], torch.as_tensor(raw / raw.mean(), dtype=torch.float32))
    assert batch["instruction_emb"].shape == (2, 384)
    assert branch_batch([groups[1]], beta=0.1, clip=20.0, embedder=embedder) is None


def test_branch_awr_moves_the_mean_towards_the_better_chunk(small_config, embedder):
    torch.manual_seed(0)
    state = build_train_state(small_config(), TrainConfig(batch_size=16, finetune_warmup=5), with_critic=False,
                              device="cpu")
    group = _group(3, [1.0, 0.0], 0.0)
    obs = collate_obs([group.obs], embedder)
    target = torch.as_tensor(group.chunks[0])
    with torch.no_grad():
        before = float((state.policy.mean_action(obs)[0] - target).abs().mean())
    info = branch_awr_steps(state, [group], updates=60, embedder=embedder)
    with torch.no_grad():
        after = float((state.policy.mean_action(obs)[0] - target).abs().mean())
    assert info["positive_chunks"] == 1 and info["updates"] == 60 and info["mixed_groups"] == 1
    assert state.step == 60
    assert after < 0.5 * before
    none = branch_awr_steps(state, [_group(4, [0.0, 0.0], 0.0)], updates=10, embedder=embedder)
    assert none["positive_chunks"] == 0 and none["updates"] == 0 and state.step == 60


@pytest.mark.parametrize("levels, candidates", [(2, 3)])
def test_branch_rollouts_on_a_scene(levels, candidates, small_config, embedder):
    torch.manual_seed(0)
    state = build_train_state(small_config(), TrainConfig(), with_critic=False, device="cpu")
    specs = [sample_spec("pick_place", 0), sample_spec("pick_place", 1)]
    gen = torch.Generator().manual_seed(0)
    groups = branch_rollouts(state.policy, specs, levels=levels, candidates=candidates, generator=gen,
                             embedder=embedder, batch=2)
    assert len(groups) == len(specs) * levels
    assert [g.step for g in groups] == [0, CHUNK] * len(specs)
    for g in groups:
        assert g.chunks.shape == (candidates, CHUNK, ACTION_DIM) and g.returns.shape == (candidates,)
        assert np.all((g.returns >= 0) & (g.returns <= 1)) and 0.0 <= g.mean_return <= 1.0
    again = branch_rollouts(state.policy, specs, levels=levels, candidates=candidates,
                            generator=torch.Generator().manual_seed(0), embedder=embedder, batch=2)
    for a, b in zip(groups, again, strict=True):  # reproducible from the generator's seed
        np.testing.assert_array_equal(a.chunks, b.chunks)
        np.testing.assert_array_equal(a.returns, b.returns)
