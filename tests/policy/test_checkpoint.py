"""Same seed → same training curve; a checkpoint resumes with bit-identical subsequent losses (CPU)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from policy.awr import critic_update, policy_update
from policy.bench import synthetic_observations
from policy.buffer import ChunkReplayBuffer
from policy.checkpoint import (
    average_checkpoints,
    build_train_state,
    load_checkpoint,
    load_policy,
    save_checkpoint,
)
from policy.config import TrainConfig
from policy.lora import add_lora
from policy.modeling import ChunkPolicy
from sim.constants import ACTION_DIM, MAX_DPOS


def make_buffer(embedder, episodes: int = 6, steps: int = 20) -> ChunkReplayBuffer:
    rng = np.random.default_rng(0)
    buf = ChunkReplayBuffer(capacity=1000, embedder=embedder)
    for e in range(episodes):
        obs = synthetic_observations(steps + 1, rng)
        for o in obs:
            o["instruction"] = obs[0]["instruction"]
        actions = rng.uniform(-MAX_DPOS, MAX_DPOS, (steps, ACTION_DIM)).astype(np.float32)
        buf.add_episode(obs, actions, success=e % 2 == 0, is_demo=e < 2, episode_id=e,
                        potentials=rng.uniform(0, 1, steps + 1), stride=4 if e < 2 else None)
    return buf


def train(state, buf: ChunkReplayBuffer, updates: int) -> list[tuple[float, float]]:
    """The AWR loop: sample rollouts and demos, one critic update, one policy update."""
    cfg, losses = state.train_config, []
    for _ in range(updates):
        batch = buf.sample(cfg.batch_size, state.rng, state.device, demo=False)
        demos = buf.sample(cfg.batch_size, state.rng, state.device, demo=True)
        c = critic_update(state.critic, state.critic_target, state.policy, state.critic_optimizer, batch, cfg)
        p = policy_update(state.policy, state.policy_optimizer, batch, state.critic, cfg, demos)
        state.step += 1
        losses.append((c["critic_loss"], p["policy_loss"]))
    return losses


def fresh_state(small_config, buf):
    state = build_train_state(small_config(dropout=0.1), TrainConfig(batch_size=16, seed=7), device="cpu")
    stats = buf.obs_stats()
    state.policy.set_obs_stats(stats)
    state.critic.set_obs_stats(stats)
    state.critic_target.set_obs_stats(stats)
    return state


def test_same_seed_same_curve_and_exact_resume(small_config, embedder, tmp_path):
    buf = make_buffer(embedder)
    run_a = train(fresh_state(small_config, buf), buf, 20)
    state_b = fresh_state(small_config, buf)
    run_b = train(state_b, buf, 10)
    assert run_a[:10] == run_b  # identical floats, not approximately equal
    assert len(set(run_a)) > 1

    path = save_checkpoint(tmp_path / "ckpt.pt", state_b)
    torch.manual_seed(12345)  # disturb global RNG: the checkpoint must restore it
    resumed = load_checkpoint(path)
    assert resumed.step == 10
    assert train(resumed, buf, 10) == run_a[10:]  # run_a is the uninterrupted run


def test_lora_state_resumes_exactly(small_config, embedder, tmp_path):
    buf = make_buffer(embedder)
    state = fresh_state(small_config, buf)
    train(state, buf, 2)
    state.policy = add_lora(state.policy, r=4)
    state.reset_policy_optimizer()
    train(state, buf, 2)
    path = save_checkpoint(tmp_path / "lora.pt", state)
    expected = train(state, buf, 3)
    assert train(load_checkpoint(path), buf, 3) == expected
    policy = load_policy(path)
    assert isinstance(policy, ChunkPolicy) and not policy.training


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.pt")
    torch.save({"format": 99}, tmp_path / "old.pt")
    with pytest.raises(ValueError, match="format 99"):
        load_checkpoint(tmp_path / "old.pt")


def test_averaged_checkpoint_holds_the_mean_of_the_weights(small_config, embedder, tmp_path):
    buf = make_buffer(embedder)
    state = fresh_state(small_config, buf)
    train(state, buf, 2)
    a = save_checkpoint(tmp_path / "a.pt", state)
    train(state, buf, 3)
    b = save_checkpoint(tmp_path / "b.pt", state)
    out = average_checkpoints([a, b], tmp_path / "avg.pt")
    wa, wb, avg = (load_checkpoint(p).policy.state_dict() for p in (a, b, out))
    moved = [k for k in wa if not torch.equal(wa[k], wb[k])]
    assert moved  # the updates changed weights, so the mean differs from both ends
    for k in wa:
        torch.testing.assert_close(avg[k], (wa[k] + wb[k]) / 2)
    averaged = load_checkpoint(out)
    assert averaged.step == 5 and averaged.extra["averaged_from"] == [str(a), str(b)]
    critic = averaged.critic.state_dict()
    ca, cb = load_checkpoint(a).critic.state_dict(), load_checkpoint(b).critic.state_dict()
    k = next(k for k in ca if not torch.equal(ca[k], cb[k]))
    torch.testing.assert_close(critic[k], (ca[k] + cb[k]) / 2)


def test_averaging_refuses_other_architectures_and_a_single_checkpoint(small_config, embedder, tmp_path):
    buf = make_buffer(embedder)
    a = save_checkpoint(tmp_path / "a.pt", fresh_state(small_config, buf))
    other = build_train_state(small_config(d_model=16), TrainConfig(batch_size=16, seed=7), device="cpu")
    b = save_checkpoint(tmp_path / "b.pt", other)
    with pytest.raises(ValueError, match="policy_config differs"):
        average_checkpoints([a, b], tmp_path / "avg.pt")
    with pytest.raises(ValueError, match="at least two"):
        average_checkpoints([a], tmp_path / "avg.pt")
    assert not (tmp_path / "avg.pt").exists()
