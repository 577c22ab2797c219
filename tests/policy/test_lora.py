"""LoRA through peft: unmerged == merged in eval mode, exact adapter save/load, only adapters train."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from peft import PeftModel

from policy.awr import bc_update
from policy.checkpoint import make_optimizer
from policy.config import TrainConfig
from policy.data import ACTION
from policy.lora import add_lora, base_policy, guard_fast_path, load_adapter, merge, save_adapter
from policy.modeling import ChunkPolicy
from sim.constants import ACTION_DIM, CHUNK


def _round_finetune(backbone, small_config, transitions, steps: int = 3):
    """A base policy, a copy of its weights, and a LoRA-wrapped version after a few BC steps."""
    torch.manual_seed(0)
    base = ChunkPolicy(small_config(backbone))
    base_state = copy.deepcopy(base.state_dict())
    model = add_lora(base, r=4, alpha=8.0)
    cfg = TrainConfig(lr=1e-2)
    opt = make_optimizer(model, cfg.lr)
    batch = transitions(32)
    for _ in range(steps):
        bc_update(model, opt, batch, cfg)
    return base_state, model, batch


@pytest.mark.parametrize("backbone", ["transformer", "deepsets"])
def test_merged_equals_unmerged_in_eval(backbone, small_config, transitions):
    base_state, model, batch = _round_finetune(backbone, small_config, transitions)
    lora_b = [p for n, p in model.named_parameters() if "lora_B" in n]
    assert lora_b and all(p.abs().max() > 0 for p in lora_b)  # adapters actually moved
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert all("lora_" in n or "modules_to_save" in n for n in trainable), trainable
    model.eval()
    with torch.no_grad():
        unmerged = model.distribution(batch)
        reference = ChunkPolicy(small_config(backbone)).eval()
        reference.load_state_dict(base_state)
        before = reference.distribution(batch)
        assert (unmerged[0] - before[0]).abs().max() > 1e-4  # LoRA changed the outputs in eval mode
        merged_policy = merge(model).eval()
        assert isinstance(merged_policy, ChunkPolicy) and not isinstance(merged_policy, PeftModel)
        merged = merged_policy.distribution(batch)
    for a, b in zip(unmerged, merged, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_adapter_save_load_round_trip(small_config, transitions, tmp_path):
    base_state, model, batch = _round_finetune("transformer", small_config, transitions)
    model.eval()
    save_adapter(model, tmp_path / "adapter")
    fresh = ChunkPolicy(small_config("transformer"))
    fresh.load_state_dict(base_state)
    loaded = load_adapter(fresh, tmp_path / "adapter").eval()
    with torch.no_grad():
        for a, b in zip(model.distribution(batch), loaded.distribution(batch), strict=True):
            assert torch.equal(a, b)
        torch.manual_seed(3)
        s1 = model.sample(batch, 4)
        torch.manual_seed(3)
        s2 = loaded.sample(batch, 4)
    assert torch.equal(s1, s2) and s1.shape == (32, 4, CHUNK, ACTION_DIM)
    assert isinstance(base_policy(loaded), ChunkPolicy)
    with pytest.raises(FileNotFoundError, match="adapter_config.json"):
        load_adapter(ChunkPolicy(small_config("transformer")), tmp_path / "nothing")


def test_fast_path_guard():
    assert not guard_fast_path(torch.nn.Linear(2, 2))
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
    enabled = torch.backends.mha.get_fastpath_enabled()
    try:
        assert guard_fast_path(torch.nn.Sequential(layer))
        assert not torch.backends.mha.get_fastpath_enabled()
    finally:
        torch.backends.mha.set_fastpath_enabled(enabled)


def test_lora_policy_trains_with_weighted_loss(small_config, transitions):
    _, model, batch = _round_finetune("deepsets", small_config, transitions, steps=0)
    loss, _ = model({**batch, ACTION: batch[ACTION] * 0.5})
    loss.backward()
    grads = [p.grad for n, p in model.named_parameters() if "lora_A" in n]
    assert grads and all(g is not None and np.isfinite(g.numpy()).all() for g in grads)
