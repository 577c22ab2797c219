"""Episodes → chunk transitions (padding, rewards, terminals, potentials) and the replay buffer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from policy.bench import synthetic_observations
from policy.buffer import ChunkReplayBuffer, episode_to_chunks, pad_chunk
from policy.data import (
    ACTION,
    DONE,
    INSTRUCTION_EMB,
    IS_DEMO,
    N_STEPS,
    NEXT,
    PHI_NEXT,
    PHI_S,
    REWARD,
    collate_obs,
    compute_obs_stats,
    next_obs,
)
from sim.constants import ACTION_DIM, CHUNK, MAX_OBJECTS, OBJ_DIM, OBS_INSTRUCTION, OBS_OBJECTS, OBS_PROPRIO


def episode(steps: int, seed: int = 0, instruction: str = "put the mug in the bowl"):
    rng = np.random.default_rng(seed)
    obs = synthetic_observations(steps + 1, rng)
    for t, o in enumerate(obs):
        o[OBS_INSTRUCTION] = instruction
        o[OBS_PROPRIO][0] = t  # step index, to check which observation went where
    actions = rng.uniform(-0.01, 0.01, (steps, ACTION_DIM)).astype(np.float32)
    actions[:, 6] = np.where(np.arange(steps) < steps - 2, -1.0, 1.0)
    return obs, actions


def test_pad_chunk_keeps_gripper():
    a = np.array([[0.01, 0, 0, 0, 0, 0, -1], [0.02, 0, 0, 0.1, 0, 0, 1]], np.float32)
    padded = pad_chunk(a)
    assert padded.shape == (CHUNK, ACTION_DIM)
    np.testing.assert_array_equal(padded[:2], a)
    np.testing.assert_array_equal(padded[2:, :6], 0)
    np.testing.assert_array_equal(padded[2:, 6], 1)


def test_episode_to_chunks():
    obs, actions = episode(19)
    phi = np.linspace(0, 1, 20)
    c = episode_to_chunks(obs, actions, success=True, potentials=phi)
    assert c[ACTION].shape == (3, CHUNK, ACTION_DIM)
    np.testing.assert_array_equal(c[N_STEPS], [8, 8, 3])
    np.testing.assert_array_equal(c[OBS_PROPRIO][:, 0], [0, 8, 16])
    np.testing.assert_array_equal(c[NEXT + OBS_PROPRIO][:, 0], [8, 16, 19])
    np.testing.assert_array_equal(c[REWARD], [0, 0, 1])
    np.testing.assert_array_equal(c[DONE], [False, False, True])
    np.testing.assert_allclose(c[PHI_S], phi[[0, 8, 16]], rtol=1e-6)
    np.testing.assert_allclose(c[PHI_NEXT], phi[[8, 16, 19]], rtol=1e-6)
    np.testing.assert_array_equal(c[ACTION][2, :3], actions[16:19])
    np.testing.assert_array_equal(c[ACTION][2, 3:, 6], actions[-1, 6])

    failed = episode_to_chunks(obs, actions, success=False)  # time-limit failure: bootstrap, no reward
    assert not failed[DONE].any() and not failed[REWARD].any()
    assert episode_to_chunks(obs, actions, success=False, terminated=True)[DONE][-1]

    dense = episode_to_chunks(obs, actions, success=True, stride=1)  # overlapping windows for BC
    assert len(dense[ACTION]) == 19
    np.testing.assert_array_equal(dense[N_STEPS][-9:], [8, 8, 7, 6, 5, 4, 3, 2, 1])
    np.testing.assert_array_equal(dense[REWARD][-9:], [0, 1, 1, 1, 1, 1, 1, 1, 1])
    with pytest.raises(ValueError, match="T\\+1=20 observations"):
        episode_to_chunks(obs[:-1], actions, success=True)


def test_buffer_add_sample_save_load(embedder, tmp_path):
    buf = ChunkReplayBuffer(capacity=50, embedder=embedder)
    for e in range(3):
        obs, actions = episode(19, seed=e, instruction=f"task {e % 2}")
        assert buf.add_episode(obs, actions, success=e == 0, is_demo=e == 0, episode_id=e) == 3
    assert len(buf) == 9 and buf.instructions == ["task 0", "task 1"]
    batch = buf.sample(16, np.random.default_rng(0))
    assert batch[ACTION].shape == (16, CHUNK, ACTION_DIM)
    assert batch[OBS_OBJECTS].shape == (16, MAX_OBJECTS, OBJ_DIM)
    assert batch[INSTRUCTION_EMB].shape == (16, 384) and batch[INSTRUCTION_EMB].dtype == torch.float32
    assert next_obs(batch)[OBS_PROPRIO].shape == batch[OBS_PROPRIO].shape
    demos = buf.sample(8, np.random.default_rng(0), demo=True)
    assert demos[IS_DEMO].all()
    np.testing.assert_array_equal(buf.data["episode_id"][buf.indices(demo=True)], [0, 0, 0])

    buf.set_potentials(np.arange(3), np.full(3, 0.5), np.full(3, 0.75))
    buf.save(tmp_path / "buf.npz")
    loaded = ChunkReplayBuffer.load(tmp_path / "buf.npz", embedder)
    assert len(loaded) == 9 and loaded.instructions == buf.instructions
    idx = np.arange(9)
    for key, value in buf.batch(idx).items():
        assert torch.equal(value, loaded.batch(idx)[key]), key

    small = ChunkReplayBuffer(capacity=4, embedder=embedder)  # ring: keeps the newest
    obs, actions = episode(40)
    small.add_episode(obs, actions, success=True)
    assert len(small) == 4
    np.testing.assert_array_equal(np.sort(small.data[OBS_PROPRIO][:, 0]), [8, 16, 24, 32])
    with pytest.raises(ValueError, match="no stored transitions"):
        small.sample(2, np.random.default_rng(0), demo=True)


def test_collate_and_stats(embedder):
    obs = synthetic_observations(5, np.random.default_rng(0))
    batch = collate_obs(obs, embedder)
    assert batch[OBS_OBJECTS].shape == (5, MAX_OBJECTS, OBJ_DIM) and batch[OBS_OBJECTS].dtype == torch.float32
    np.testing.assert_array_equal(batch[INSTRUCTION_EMB][0].numpy(), embedder.embed_one(obs[0][OBS_INSTRUCTION]))
    objects = np.zeros((2, 3, 2), np.float32)
    objects[0, 0] = [1, 5]
    objects[1, 0] = [3, 5]
    objects[1, 2] = [100, 100]  # padding: ignored
    stats = compute_obs_stats(objects, np.array([[1, 0, 0], [1, 0, 0]], bool), np.ones((2, 4)))
    np.testing.assert_allclose(stats["obj_mean"], [2, 5])
    np.testing.assert_allclose(stats["obj_std"], [1, 1])  # constant feature → std 1, not 0
    np.testing.assert_allclose(stats["proprio_std"], 1)
