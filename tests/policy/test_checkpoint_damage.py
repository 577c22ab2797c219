"""A checkpoint that passes `read_payload`'s format checks but whose parts do not fit the networks it describes:
`load_checkpoint` raises one ValueError naming the file and the part (one line for the CLI), not torch's
RuntimeError size mismatch, a TypeError or a bare KeyError such as "alpha"."""

from __future__ import annotations

import pytest
import torch

from policy.checkpoint import build_train_state, load_checkpoint, save_checkpoint
from policy.config import TrainConfig

DAMAGE = {
    # part of the payload -> (its damaged value from the sound one, words the error must hold)
    "policy": (lambda p: {**p, "tokenizer.type_emb": torch.zeros(1)}, "policy weights do not fit its policy_config"),
    "critic": (lambda p: {"x": torch.zeros(1)}, "critic weights do not fit its policy_config"),
    "critic_target": (lambda p: None, "critic_target weights do not fit"),
    "extra": (lambda p: 5, "extra metadata is not a dict"),
    "step": (lambda p: "abc", "step is not an integer"),
    "lora": (lambda p: {"r": 1}, "lora settings cannot be applied (no 'alpha' entry)"),
    "policy_optimizer": (lambda p: {}, "policy_optimizer does not fit the policy (no 'param_groups' entry)"),
    "rng": (lambda p: {**p, "numpy_generator": {"bit_generator": "MT19937"}}, "rng state cannot be restored"),
}


@pytest.fixture
def checkpoint(small_config, tmp_path):
    state = build_train_state(small_config(), TrainConfig(batch_size=16, seed=7), device="cpu")
    return save_checkpoint(tmp_path / "ckpt.pt", state)


@pytest.mark.parametrize("part", DAMAGE)
def test_a_damaged_part_is_one_value_error_naming_the_file_and_the_part(part, checkpoint):
    payload = torch.load(checkpoint, weights_only=True)
    damage, words = DAMAGE[part]
    payload[part] = damage(payload[part])
    torch.save(payload, checkpoint)
    with pytest.raises(ValueError) as info:
        load_checkpoint(checkpoint)
    message = str(info.value)
    assert message.startswith(f"checkpoint {checkpoint}: ") and words in message, message
    assert "\n" not in message


def test_a_sound_checkpoint_still_loads(checkpoint):
    state = load_checkpoint(checkpoint)
    assert state.step == 0 and state.critic is not None
