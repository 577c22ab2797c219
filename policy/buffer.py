"""Replay of chunk transitions (s, instruction, chunk, r, done, s', Φ(s), Φ(s'), ...) in numpy arrays.

An episode of T control steps (observations o_0..o_T, actions a_0..a_{T-1}) becomes chunk transitions
starting every `stride` steps (stride = CHUNK matches how the policy executes chunks; stride 1 gives
h-fold more overlapping windows for behaviour cloning). A window that runs past the end is padded with
zero-motion actions that repeat the last gripper command, and keeps n_steps = the real steps it covers.

Rewards are sparse: 1 for the window that reaches the end of a successful episode, else 0. `done`
(terminal, no bootstrap) is set on windows reaching the end of a terminated episode (by default: a
successful one); time-limit failures are not terminal and bootstrap from the last observation.
Potentials Φ(s), Φ(s') are the staged potentials at the window's endpoints (0 when not given) and can be
relabelled when a new training program arrives (`set_potentials`).

Instructions are stored once (id + embedding table); object categories are not stored.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from sim.constants import ACTION_DIM, CHUNK, OBS_INSTRUCTION, OBS_OBJECT_MASK, OBS_OBJECTS, OBS_PROPRIO

from .data import (
    ACTION,
    DONE,
    INSTRUCTION_EMB,
    IS_DEMO,
    N_STEPS,
    NEXT,
    PHI_NEXT,
    PHI_S,
    RETURN,
    REWARD,
    compute_obs_stats,
    stack_obs,
    to_tensors,
)
from .text import get_embedder

log = logging.getLogger(__name__)

_OBS = (OBS_OBJECTS, OBS_OBJECT_MASK, OBS_PROPRIO)
FIELDS = (*_OBS, *(NEXT + k for k in _OBS), "instruction_id", ACTION, REWARD, RETURN, DONE, PHI_S, PHI_NEXT,
          N_STEPS, IS_DEMO, "episode_id", "success")
GAMMA = 0.99
"""per-step discount of the stored Monte-Carlo returns (TrainConfig.gamma by default)"""


def pad_chunk(actions: np.ndarray, chunk: int = CHUNK) -> np.ndarray:
    """(n ≤ chunk, A) → (chunk, A): append zero-motion steps that keep the last gripper command."""
    actions = np.asarray(actions, dtype=np.float32)
    if len(actions) == 0 or len(actions) > chunk:
        raise ValueError(f"pad_chunk needs 1..{chunk} actions, got {len(actions)}")
    pad = np.zeros((chunk - len(actions), actions.shape[1]), dtype=np.float32)
    pad[:, -1] = actions[-1, -1]
    return np.concatenate([actions, pad])


def episode_to_chunks(observations: Sequence[Mapping], actions: np.ndarray, *, success: bool,
                      terminated: bool | None = None, potentials: Sequence[float] | None = None,
                      chunk: int = CHUNK, stride: int | None = None, gamma: float = GAMMA) -> dict[str, np.ndarray]:
    """Chunk transitions of one episode as numpy arrays (see module docstring); instruction excluded."""
    actions = np.asarray(actions, dtype=np.float32)
    steps = len(actions)
    if actions.ndim != 2 or actions.shape[1] != ACTION_DIM:
        raise ValueError(f"actions must have shape (T, {ACTION_DIM}), got {actions.shape}")
    if len(observations) != steps + 1:
        raise ValueError(f"an episode of T={steps} actions needs T+1={steps + 1} observations (o_0..o_T), "
                         f"got {len(observations)}")
    stride = chunk if stride is None else stride
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    terminated = success if terminated is None else terminated
    phi = np.zeros(steps + 1) if potentials is None else np.asarray(potentials, dtype=np.float64)
    if phi.shape != (steps + 1,):
        raise ValueError(f"potentials must hold one value per observation ({steps + 1}), got shape {phi.shape}")
    starts = np.arange(0, steps, stride)
    ends = np.minimum(starts + chunk, steps)
    obs = stack_obs(observations)
    reaches_end = ends == steps
    return {
        **{k: v[starts] for k, v in obs.items() if k in _OBS},
        **{NEXT + k: v[ends] for k, v in obs.items() if k in _OBS},
        ACTION: np.stack([pad_chunk(actions[s:e], chunk) for s, e in zip(starts, ends, strict=True)])
        if steps else np.zeros((0, chunk, ACTION_DIM), np.float32),
        REWARD: (reaches_end & bool(success)).astype(np.float32),
        RETURN: (gamma ** (steps - starts) * bool(success)).astype(np.float32),
        DONE: reaches_end & bool(terminated),
        PHI_S: phi[starts].astype(np.float32),
        PHI_NEXT: phi[ends].astype(np.float32),
        N_STEPS: (ends - starts).astype(np.int64),
        "success": np.full(len(starts), bool(success)),
    }


class ChunkReplayBuffer:
    """Ring buffer of chunk transitions; the oldest are overwritten past `capacity`.

    Keep demonstrations in their own buffer if they must never be overwritten.
    """

    def __init__(self, capacity: int = 100_000, embedder=None) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.embedder = embedder
        self.data: dict[str, np.ndarray] = {}
        self.instructions: list[str] = []
        self.instruction_emb = np.zeros((0, 384), dtype=np.float32)
        self._instruction_index: dict[str, int] = {}
        self.size = 0
        self.cursor = 0

    def __len__(self) -> int:
        return self.size

    def _instruction_id(self, text: str) -> int:
        if text not in self._instruction_index:
            emb = (self.embedder or get_embedder()).embed([text]).astype(np.float32)
            self._instruction_index[text] = len(self.instructions)
            self.instructions.append(text)
            self.instruction_emb = np.concatenate([self.instruction_emb.reshape(-1, emb.shape[1]), emb])
        return self._instruction_index[text]

    def add_episode(self, observations: Sequence[Mapping], actions: np.ndarray, *, success: bool,
                    is_demo: bool = False, episode_id: int = 0, terminated: bool | None = None,
                    potentials: Sequence[float] | None = None, stride: int | None = None,
                    keep: np.ndarray | None = None) -> int:
        """Split an episode into chunk transitions and store them; returns how many were added.

        `keep` (bool, one per transition, i.e. per window start) drops the transitions marked False.
        """
        arrays = episode_to_chunks(observations, actions, success=success, terminated=terminated,
                                   potentials=potentials, stride=stride)
        if keep is not None:
            keep = np.asarray(keep, dtype=bool)
            if keep.shape != (len(arrays[ACTION]),):
                raise ValueError(f"keep must hold one flag per transition ({len(arrays[ACTION])}), got {keep.shape}")
            arrays = {k: v[keep] for k, v in arrays.items()}
        n = len(arrays[ACTION])
        arrays["instruction_id"] = np.full(n, self._instruction_id(str(observations[0][OBS_INSTRUCTION])))
        arrays[IS_DEMO] = np.full(n, bool(is_demo))
        arrays["episode_id"] = np.full(n, int(episode_id), dtype=np.int64)
        self.add(arrays)
        return n

    def add(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Append transitions given as arrays with a common leading length (all FIELDS)."""
        missing = [f for f in FIELDS if f not in arrays]
        if missing:
            raise KeyError(f"transitions lack fields {missing}")
        n = len(arrays[ACTION])
        if n == 0:
            return
        if not self.data:
            self.data = {f: np.zeros((self.capacity, *np.shape(arrays[f])[1:]), dtype=np.asarray(arrays[f]).dtype)
                         for f in FIELDS}
        skip = max(n - self.capacity, 0)
        if skip:
            log.warning("adding %d transitions to a buffer of capacity %d keeps only the last ones", n, self.capacity)
            self.cursor = (self.cursor + skip) % self.capacity
        idx = (self.cursor + np.arange(n - skip)) % self.capacity
        for f in FIELDS:
            self.data[f][idx] = np.asarray(arrays[f])[skip:]
        self.cursor = int((self.cursor + n - skip) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def indices(self, demo: bool | None = None) -> np.ndarray:
        """Indices of stored transitions, optionally only demonstrations (True) or only rollouts (False)."""
        if demo is None:
            return np.arange(self.size)
        return np.flatnonzero(self.data[IS_DEMO][: self.size] == demo) if self.size else np.zeros(0, np.int64)

    def sample(self, batch_size: int, rng: np.random.Generator, device: str | torch.device = "cpu",
               demo: bool | None = None) -> dict[str, torch.Tensor]:
        """A uniform batch (with replacement) as tensors on `device` (see policy.data for keys)."""
        pool = self.indices(demo)
        if len(pool) == 0:
            raise ValueError(f"cannot sample: no stored transitions match demo={demo} (size {self.size})")
        return self.batch(pool[rng.integers(0, len(pool), size=batch_size)], device)

    def batch(self, idx: np.ndarray, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        """The transitions at `idx` as a tensor batch."""
        arrays = {f: self.data[f][idx] for f in FIELDS if f != "instruction_id"}
        arrays[INSTRUCTION_EMB] = self.instruction_emb[self.data["instruction_id"][idx]]
        return to_tensors(arrays, device)

    def set_potentials(self, idx: np.ndarray, phi_s: np.ndarray, phi_next: np.ndarray) -> None:
        """Relabel Φ(s), Φ(s') of stored transitions (e.g. after Text2potential revises a program)."""
        self.data[PHI_S][idx] = phi_s
        self.data[PHI_NEXT][idx] = phi_next

    def obs_stats(self) -> dict[str, np.ndarray]:
        """Feature statistics of the stored observations, for `ChunkPolicy.set_obs_stats`."""
        if not self.size:
            raise ValueError("obs_stats of an empty buffer")
        n = self.size
        return compute_obs_stats(self.data[OBS_OBJECTS][:n], self.data[OBS_OBJECT_MASK][:n], self.data[OBS_PROPRIO][:n])

    def save(self, path: str) -> None:
        np.savez_compressed(path, size=self.size, cursor=self.cursor, capacity=self.capacity,
                            instructions=np.array(self.instructions, dtype=str),
                            instruction_emb=self.instruction_emb, **{f: self.data[f][: self.size] for f in self.data})

    @classmethod
    def load(cls, path: str, embedder=None) -> ChunkReplayBuffer:
        with np.load(path, allow_pickle=False) as z:
            buf = cls(int(z["capacity"]), embedder)
            buf.instructions = [str(s) for s in z["instructions"]]
            buf._instruction_index = {s: i for i, s in enumerate(buf.instructions)}
            buf.instruction_emb = z["instruction_emb"].astype(np.float32)
            if int(z["size"]):
                buf.add({f: z[f] for f in FIELDS})
            buf.cursor = int(z["cursor"])
        return buf
