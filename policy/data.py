"""Batch layout shared by the policy, the critic, the replay buffer and the trainers.

A batch is a dict of tensors with a leading batch dimension B:

    OBS_OBJECTS        float32 (B, MAX_OBJECTS, OBJ_DIM)
    OBS_OBJECT_MASK    bool    (B, MAX_OBJECTS)          true for real objects
    OBS_PROPRIO        float32 (B, PROPRIO_DIM)
    INSTRUCTION_EMB    float32 (B, 384)                  embedding of OBS_INSTRUCTION
    ACTION             float32 (B, CHUNK, ACTION_DIM)    env units (training batches only)
    WEIGHT             float32 (B,)                      per-sample loss weight (optional)
    next_<obs key>                                       the observation after the chunk (transitions)
    REWARD, DONE, PHI_S, PHI_NEXT, N_STEPS, IS_DEMO      (B,) transition fields

Observations are the env's per-step dicts (see sim.constants OBS_*); `collate_obs` turns a list of them
into a batch. Object categories are carried but not read by the networks (held-out categories).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from sim.constants import OBS_INSTRUCTION, OBS_OBJECT_CATEGORY, OBS_OBJECT_MASK, OBS_OBJECTS, OBS_PROPRIO

from .text import get_embedder

INSTRUCTION_EMB = "instruction_emb"
ACTION = "action"
WEIGHT = "weight"
REWARD = "reward"
RETURN = "return"
"""(B,) Monte-Carlo return from the chunk start: γ^(T − t) for a success reached at step T, else 0"""
DONE = "done"
PHI_S = "phi_s"
PHI_NEXT = "phi_next"
N_STEPS = "n_steps"
IS_DEMO = "is_demo"
NEXT = "next_"
"""prefix of the next observation's keys in a transition batch"""

OBS_TENSOR_KEYS = (OBS_OBJECTS, OBS_OBJECT_MASK, OBS_OBJECT_CATEGORY, OBS_PROPRIO)
"""per-step observation arrays; the instruction string becomes INSTRUCTION_EMB"""
_DTYPES = {OBS_OBJECTS: np.float32, OBS_OBJECT_MASK: np.bool_, OBS_OBJECT_CATEGORY: np.int64,
           OBS_PROPRIO: np.float32}


def stack_obs(observations: Sequence[Mapping]) -> dict[str, np.ndarray]:
    """Stack per-step observation arrays into numpy (N, ...) arrays (the instruction is left out)."""
    if not observations:
        raise ValueError("stack_obs needs at least one observation")
    out = {}
    for key in OBS_TENSOR_KEYS:
        if key not in observations[0]:
            if key == OBS_OBJECT_CATEGORY:
                continue
            raise KeyError(f"observation lacks {key!r}; keys present: {sorted(observations[0])}")
        out[key] = np.stack([np.asarray(o[key], dtype=_DTYPES[key]) for o in observations])
    return out


def collate_obs(observations: Sequence[Mapping], embedder=None, device: str | torch.device = "cpu",
                ) -> dict[str, torch.Tensor]:
    """List of B env observation dicts → batch of tensors on `device` (instructions embedded, cached).

    `embedder` defaults to the process-wide MiniLM (`policy.text.get_embedder()`).
    """
    embedder = embedder if embedder is not None else get_embedder()
    arrays = stack_obs(observations)
    arrays[INSTRUCTION_EMB] = embedder.embed([str(o[OBS_INSTRUCTION]) for o in observations])
    return to_tensors(arrays, device)


def to_tensors(arrays: Mapping[str, np.ndarray], device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """numpy dict → tensor dict on `device` (no copy on CPU when already contiguous)."""
    return {k: torch.as_tensor(np.ascontiguousarray(v)).to(device) for k, v in arrays.items()}


def to_device(batch: Mapping[str, torch.Tensor], device: str | torch.device) -> dict[str, torch.Tensor]:
    return {k: v.to(device) for k, v in batch.items()}


def next_obs(batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The observation after the chunk, as an observation batch (same instruction embedding)."""
    out = {key[len(NEXT):]: value for key, value in batch.items() if key.startswith(NEXT)}
    out.setdefault(INSTRUCTION_EMB, batch[INSTRUCTION_EMB])
    missing = [k for k in (OBS_OBJECTS, OBS_OBJECT_MASK, OBS_PROPRIO) if k not in out]
    if missing:
        raise KeyError(f"transition batch lacks next observation keys {[NEXT + k for k in missing]}")
    return out


def compute_obs_stats(objects: np.ndarray, mask: np.ndarray, proprio: np.ndarray,
                      min_std: float = 1e-3) -> dict[str, np.ndarray]:
    """Per-feature mean and std of object features (real objects only) and of proprioception.

    Features that never vary in the data get std 1 (not a tiny std that would blow up unseen values).
    objects (N, M, D), mask (N, M) bool, proprio (N, P) → obj_mean/obj_std (D,), proprio_mean/proprio_std (P,).
    """
    real = np.asarray(objects, dtype=np.float64)[np.asarray(mask, dtype=bool)]
    if len(real) == 0:
        raise ValueError("compute_obs_stats needs at least one real (unmasked) object")
    prop = np.asarray(proprio, dtype=np.float64)

    def _stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean, std = x.mean(axis=0), x.std(axis=0)
        std = np.where(std < min_std, 1.0, std)
        return mean.astype(np.float32), std.astype(np.float32)

    obj_mean, obj_std = _stats(real)
    proprio_mean, proprio_std = _stats(prop)
    return {"obj_mean": obj_mean, "obj_std": obj_std, "proprio_mean": proprio_mean, "proprio_std": proprio_std}
