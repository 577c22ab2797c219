"""Mixed precision: bf16 autocast trains (forced here on CPU, the default on CUDA) and is off on CPU by default."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from policy.awr import bc_update, critic_update
from policy.bench import synthetic_transitions
from policy.checkpoint import build_train_state
from policy.config import PolicyConfig, TrainConfig, autocast
from policy.data import to_device


def test_auto_is_off_on_cpu_and_bad_modes_are_rejected():
    assert not torch.is_autocast_enabled("cpu")
    with autocast(TrainConfig(), torch.device("cpu")):
        assert not torch.is_autocast_enabled("cpu")
    with autocast(TrainConfig(amp="bf16"), torch.device("cpu")):
        assert torch.is_autocast_enabled("cpu")
    with pytest.raises(ValueError, match="amp must be one of"):
        TrainConfig(amp="fp8")


def _train(amp: str) -> tuple[list[float], list[float], torch.nn.Module]:
    cfg = PolicyConfig(d_model=32, n_layers=1, n_heads=2)
    tc = TrainConfig(batch_size=32, amp=amp, seed=1)
    state = build_train_state(cfg, tc, device="cpu")
    batch = to_device(synthetic_transitions(32, np.random.default_rng(0)), torch.device("cpu"))
    losses, td = [], []
    for _ in range(60):
        with autocast(tc, state.device):
            losses.append(float(bc_update(state.policy, state.policy_optimizer, batch, tc)["bc_mse"]))
            td.append(float(critic_update(state.critic, state.critic_target, state.policy, state.critic_optimizer,
                                          batch, tc)["critic_loss"]))
    return losses, td, state.policy


def test_bf16_updates_train_like_float32_and_keep_float32_weights():
    bf_losses, bf_td, policy = _train("bf16")
    fp_losses, fp_td, _ = _train("off")
    assert all(np.isfinite(bf_losses)) and all(np.isfinite(bf_td))
    assert bf_losses[-1] < bf_losses[0] and bf_td[-1] < bf_td[0]  # it learns
    assert abs(bf_losses[-1] - fp_losses[-1]) < 0.05 * fp_losses[-1]  # and lands where float32 does
    assert all(p.dtype == torch.float32 for p in policy.parameters())
