"""Policy and critic networks: config validation, set invariances, weighted loss, BC on synthetic data."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from policy.awr import bc_update
from policy.checkpoint import make_optimizer
from policy.config import PolicyConfig, TrainConfig, resolve_device
from policy.data import ACTION, INSTRUCTION_EMB, WEIGHT, to_tensors
from policy.modeling import ChunkCritic, ChunkPolicy, clip_actions
from sim.constants import (
    ACTION_DIM,
    CHUNK,
    MAX_DPOS,
    MAX_DROT,
    MAX_OBJECTS,
    OBJ_DIM,
    OBJ_FEATURES,
    OBS_OBJECT_MASK,
    OBS_OBJECTS,
    OBS_PROPRIO,
    PROPRIO_DIM,
    ROLES,
)

log = logging.getLogger(__name__)
OFFSET = dict(zip([n for n, _ in OBJ_FEATURES], np.cumsum([0] + [k for _, k in OBJ_FEATURES])[:-1], strict=True))


def test_config_validation_messages():
    with pytest.raises(ValueError, match="backbone must be one of transformer, deepsets, got 'rnn'"):
        PolicyConfig(backbone="rnn")
    with pytest.raises(ValueError, match="d_model must be divisible by n_heads"):
        PolicyConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="q_temperature must be > 0, got 0"):
        PolicyConfig(q_temperature=0)
    with pytest.raises(ValueError, match="gamma must be in"):
        TrainConfig(gamma=1.5)
    with pytest.raises(ValueError, match="next_value"):
        TrainConfig(next_value="max")
    with pytest.raises(ValueError, match="device"):
        TrainConfig(device="tpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_clip_actions():
    a = torch.tensor([[0.2, -0.2, 0.01, 0.3, 0.4, 0.0, 3.0]])
    c = clip_actions(a)
    torch.testing.assert_close(c[0, :3], torch.tensor([MAX_DPOS, -MAX_DPOS, 0.01]))
    torch.testing.assert_close(c[0, 3:6].norm(), torch.tensor(MAX_DROT))
    torch.testing.assert_close(c[0, 3:6] / c[0, 3:6].norm(), torch.tensor([0.6, 0.8, 0.0]))
    assert c[0, 6] == 1.0


@pytest.mark.parametrize("backbone", ["transformer", "deepsets"])
def test_padding_and_object_order_do_not_matter(backbone, small_config, obs_batch):
    torch.manual_seed(0)
    policy, critic = ChunkPolicy(small_config(backbone)).eval(), ChunkCritic(small_config(backbone)).eval()
    batch = obs_batch(4)
    chunk = torch.zeros(4, CHUNK, ACTION_DIM)
    with torch.no_grad():
        mean, log_std = policy.distribution(batch)
        q = critic(batch, chunk)
        junk = dict(batch)
        junk[OBS_OBJECTS] = torch.where(batch[OBS_OBJECT_MASK][..., None], batch[OBS_OBJECTS], torch.tensor(1e4))
        torch.testing.assert_close(policy.distribution(junk)[0], mean)
        torch.testing.assert_close(critic(junk, chunk), q)
        perm = torch.randperm(MAX_OBJECTS)
        shuffled = {**batch, OBS_OBJECTS: batch[OBS_OBJECTS][:, perm], OBS_OBJECT_MASK: batch[OBS_OBJECT_MASK][:, perm]}
        torch.testing.assert_close(policy.distribution(shuffled)[0], mean, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(policy.distribution(shuffled)[1], log_std, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("backbone", ["transformer", "deepsets"])
def test_trimmed_padding_slots_give_the_same_outputs(backbone, small_config, obs_batch):
    from policy.backbones import trim_padding

    torch.manual_seed(0)
    policy, critic = ChunkPolicy(small_config(backbone)).eval(), ChunkCritic(small_config(backbone)).eval()
    batch = obs_batch(5)
    mask = torch.zeros(5, MAX_OBJECTS, dtype=torch.bool)
    mask[:, :2] = True
    mask[0, 4] = True  # a hole: slot 3 stays, slots 5.. go
    batch = {**batch, OBS_OBJECT_MASK: mask}
    objects, kept = trim_padding(batch[OBS_OBJECTS], mask)
    assert objects.shape[1] == kept.shape[1] == 5
    assert trim_padding(batch[OBS_OBJECTS], torch.zeros_like(mask))[0].shape[1] == 0
    chunk = torch.zeros(5, CHUNK, ACTION_DIM)
    with torch.no_grad():
        full_tokens, full_mask = policy.tokenizer(batch)
        assert full_tokens.shape[1] == 2 + 5 and full_mask.shape == (5, 7)
        mean, log_std = policy.distribution(batch)
        # the same observations with the slots beyond 5 filled with junk but masked: identical outputs
        wide = {**batch, OBS_OBJECTS: torch.cat([objects, torch.full((5, MAX_OBJECTS - 5, OBJ_DIM), 7.0)], dim=1)}
        wide[OBS_OBJECT_MASK] = torch.cat([kept, torch.zeros(5, MAX_OBJECTS - 5, dtype=torch.bool)], dim=1)
        torch.testing.assert_close(policy.distribution(wide)[0], mean)
        torch.testing.assert_close(policy.distribution(wide)[1], log_std)
        torch.testing.assert_close(critic(wide, chunk), critic(batch, chunk))
        # a row with more objects in the batch widens the slots for all rows, rows stay unchanged
        more = {k: v.clone() for k, v in batch.items()}
        more[OBS_OBJECT_MASK][1, 8] = True
        torch.testing.assert_close(policy.distribution(more)[0][[0, 2, 3, 4]], mean[[0, 2, 3, 4]], atol=1e-5, rtol=1e-5)


def test_weighted_loss(small_config, obs_batch):
    torch.manual_seed(0)
    policy = ChunkPolicy(small_config())
    batch = {**obs_batch(6), ACTION: torch.rand(6, CHUNK, ACTION_DIM) * 0.02}
    loss, info = policy(batch)
    assert set(info) == {"loss", "nll", "mse", "log_std"}
    loss2, _ = policy({**batch, WEIGHT: torch.full((6,), 2.0)})
    torch.testing.assert_close(loss2, 2 * loss)
    w = torch.tensor([1.0, 0, 0, 0, 0, 0])
    loss_first, _ = policy({**batch, WEIGHT: w})
    loss_only, _ = policy({k: v[:1] for k, v in batch.items()})
    torch.testing.assert_close(loss_first * 6, loss_only)


def target_reaching_data(n: int, rng: np.random.Generator, embedder) -> dict[str, torch.Tensor]:
    """2-5 objects, one with role 'target' at a random slot; chunk = move towards it, grip by proprio sign."""
    objects = rng.standard_normal((n, MAX_OBJECTS, OBJ_DIM)).astype(np.float32)
    role = OFFSET["role"]
    objects[:, :, role:] = 0
    objects[:, :, role + ROLES.index("distractor")] = 1
    k = rng.integers(2, 6, n)
    mask = np.arange(MAX_OBJECTS)[None] < k[:, None]
    target = rng.integers(0, k)
    rows = np.arange(n)
    objects[rows, target, role:] = 0
    objects[rows, target, role + ROLES.index("target")] = 1
    objects *= mask[..., None]
    proprio = rng.standard_normal((n, PROPRIO_DIM)).astype(np.float32)
    rel = objects[rows, target, OFFSET["rel_gripper"]: OFFSET["rel_gripper"] + 3]
    actions = np.zeros((n, CHUNK, ACTION_DIM), np.float32)
    actions[:, :, :3] = MAX_DPOS * np.tanh(rel)[:, None, :] * (1 - np.arange(CHUNK) / 16)[None, :, None]
    actions[:, :, 6] = np.where(proprio[:, -1] > 0, 1.0, -1.0)[:, None]
    emb = np.repeat(embedder.embed(["reach the target"]), n, axis=0)
    return to_tensors({OBS_OBJECTS: objects, OBS_OBJECT_MASK: mask, OBS_PROPRIO: proprio, INSTRUCTION_EMB: emb,
                       ACTION: actions})


@pytest.mark.parametrize("backbone", ["transformer", "deepsets"])
def test_bc_fits_a_deterministic_chunk_function(backbone, small_config, embedder):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    data, held_out = target_reaching_data(1024, rng, embedder), target_reaching_data(256, rng, embedder)
    policy = ChunkPolicy(small_config(backbone))
    cfg = TrainConfig(lr=3e-3)
    opt = make_optimizer(policy, cfg.lr)
    target = policy.actions.normalize(held_out[ACTION])
    baseline = float(((target - target.mean(0)) ** 2).mean())  # predict the mean chunk
    for _ in range(500):
        idx = torch.as_tensor(rng.integers(0, 1024, 128))
        bc_update(policy, opt, {k: v[idx] for k, v in data.items()}, cfg)
    with torch.no_grad():
        err = (policy.distribution(held_out)[0] - target) ** 2  # (B, h, A), normalized units
    dpos, total = float(err[..., :3].mean()), float(err.mean())
    log.info("%s BC held-out mse: dpos %.4f total %.4f (mean-chunk baseline %.4f)", backbone, dpos, total, baseline)
    assert dpos < 0.03  # the target object's offset is read out (baseline ≈ 0.26)
    assert total < 0.2 * baseline
