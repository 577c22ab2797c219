"""LoRA round fine-tuning of a trained chunk policy through peft: wrap, save/load adapters, merge.

The adapters go on the backbone's Linear layers (`policy.backbones.LORA_TARGETS`); the action head can be
trained fully alongside (`train_head`, peft `modules_to_save`). The wrapped model keeps the policy API
(`forward`, `sample`, `mean_action`, `distribution` pass through peft to the base policy).

Eval fast-path trap: `nn.TransformerEncoderLayer` / `nn.MultiheadAttention` in eval mode take a fused
path that ignores unmerged LoRA weights. Our backbones write attention with plain Linear layers, so the
trap cannot fire; `add_lora` still refuses to continue silently: if the model contains such modules it
disables the fast path globally (`torch.backends.mha.set_fastpath_enabled(False)`) and logs a warning.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from torch import nn

from .backbones import LORA_TARGETS
from .modeling import ChunkPolicy

log = logging.getLogger(__name__)

HEAD_MODULE = "action_head"


def guard_fast_path(model: nn.Module) -> bool:
    """Disable the MHA eval fast path if `model` has modules that would take it; True if it did."""
    risky = [name for name, m in model.named_modules()
             if isinstance(m, nn.MultiheadAttention | nn.TransformerEncoderLayer | nn.TransformerDecoderLayer)]
    if risky:
        log.warning("disabling torch MHA fast path: %s would ignore unmerged LoRA weights in eval mode", risky[:3])
        torch.backends.mha.set_fastpath_enabled(False)
    return bool(risky)


def lora_config(policy: ChunkPolicy, r: int = 8, alpha: float = 16.0, dropout: float = 0.0,
                train_head: bool = True, targets: tuple[str, ...] | None = None) -> LoraConfig:
    """The peft LoraConfig for a policy's backbone (targets default to LORA_TARGETS[backbone])."""
    if r < 1:
        raise ValueError(f"LoRA rank r must be >= 1, got {r}")
    targets = targets or LORA_TARGETS[policy.cfg.backbone]
    return LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=list(targets), bias="none",
                      modules_to_save=[HEAD_MODULE] if train_head else None)


def add_lora(policy: ChunkPolicy, r: int = 8, alpha: float = 16.0, dropout: float = 0.0,
             train_head: bool = True, targets: tuple[str, ...] | None = None) -> PeftModel:
    """Wrap `policy` (modified in place) with fresh LoRA adapters; only adapters (and the head) train."""
    guard_fast_path(policy)
    return get_peft_model(policy, lora_config(policy, r, alpha, dropout, train_head, targets))


def save_adapter(model: PeftModel, path: str | Path) -> Path:
    """Write adapter weights + adapter_config.json (peft format) into directory `path`."""
    path = Path(path)
    model.save_pretrained(str(path))
    return path


def load_adapter(policy: ChunkPolicy, path: str | Path, trainable: bool = False) -> PeftModel:
    """Attach adapters saved by `save_adapter` to a base policy (same architecture and base weights)."""
    path = Path(path)
    if not (path / "adapter_config.json").exists():
        raise FileNotFoundError(f"no adapter_config.json in {path}; pass the directory written by save_adapter")
    guard_fast_path(policy)
    return PeftModel.from_pretrained(policy, str(path), is_trainable=trainable)


def merge(model: PeftModel) -> ChunkPolicy:
    """Fold the adapters into the base weights and return the plain ChunkPolicy (no peft wrappers)."""
    return model.merge_and_unload()


def base_policy(model: nn.Module) -> ChunkPolicy:
    """The ChunkPolicy inside a PeftModel (or the model itself)."""
    return model.get_base_model() if isinstance(model, PeftModel) else model
