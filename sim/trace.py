"""Rollout traces: everything needed to replay an episode's states exactly (for evidence, keyframes, potentials).

A trace keeps the spec, the actions and the full physics state (qpos, qvel, mocap) after reset and after every
control step. Any helper can be recomputed later: `trace.state_at(t)` restores step t in a fresh env.

    env = CodaEnv(spec); rec = TraceRecorder(env)
    obs = rec.reset()
    obs, r, term, trunc, info = rec.step(action)      # same as env.step, recorded
    trace = rec.trace()
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import mujoco
import numpy as np

from sim.env import CodaEnv
from sim.helpers import SceneState
from sim.spec import SceneSpec


@dataclass
class Trace:
    spec: SceneSpec
    actions: np.ndarray
    """(T, 7) actions executed"""
    qpos: np.ndarray
    """(T + 1, nq) state after reset and after each step"""
    qvel: np.ndarray
    """(T + 1, nv)"""
    mocap_pos: np.ndarray
    """(T + 1, 3) gripper target"""
    success: bool
    initial_bottom: dict[str, float] = field(default_factory=dict)
    success_step: int | None = None
    meta: dict = field(default_factory=dict)

    @property
    def steps(self) -> int:
        return len(self.actions)

    def replay_env(self) -> CodaEnv:
        env = CodaEnv(self.spec)
        env.reset()
        env.state.initial_bottom = dict(self.initial_bottom)
        return env

    def state_at(self, t: int, env: CodaEnv | None = None) -> SceneState:
        """The SceneState at step t (0 = after reset), restored into `env` (a replay env by default)."""
        env = env or self.replay_env()
        d = env.data
        d.qpos[:] = self.qpos[t]
        d.qvel[:] = self.qvel[t]
        mujoco.mj_forward(env.model, d)
        env.state._contact_key = None
        return env.state

    def states(self, every: int = 1):
        """Yield (t, SceneState) for t = 0, every, 2*every, ..., T (one shared replay env)."""
        env = self.replay_env()
        last = self.steps
        for t in list(range(0, last + 1, every)) + ([last] if last % every else []):
            yield t, self.state_at(t, env)

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        np.savez_compressed(
            buf,
            spec=np.frombuffer(self.spec.model_dump_json().encode(), dtype=np.uint8),
            actions=self.actions,
            qpos=self.qpos,
            qvel=self.qvel,
            mocap_pos=self.mocap_pos,
            success=np.array(self.success),
            success_step=np.array(-1 if self.success_step is None else self.success_step),
            bottom_names=np.array(list(self.initial_bottom), dtype=str),
            bottom_values=np.array(list(self.initial_bottom.values()), dtype=np.float64),
        )
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> Trace:
        z = np.load(io.BytesIO(data), allow_pickle=False)
        step = int(z["success_step"])
        return cls(
            spec=SceneSpec.model_validate_json(z["spec"].tobytes().decode()),
            actions=z["actions"],
            qpos=z["qpos"],
            qvel=z["qvel"],
            mocap_pos=z["mocap_pos"],
            success=bool(z["success"]),
            initial_bottom=dict(zip(z["bottom_names"].tolist(), z["bottom_values"].tolist(), strict=True)),
            success_step=None if step < 0 else step,
        )


class TraceRecorder:
    """Wraps an env: `reset` and `step` behave as the env's, and every state is recorded."""

    def __init__(self, env: CodaEnv):
        self.env = env
        self._qpos: list[np.ndarray] = []
        self._qvel: list[np.ndarray] = []
        self._mocap: list[np.ndarray] = []
        self._actions: list[np.ndarray] = []
        self._success_step: int | None = None

    def _snap(self) -> None:
        d = self.env.data
        self._qpos.append(d.qpos.copy())
        self._qvel.append(d.qvel.copy())
        self._mocap.append(d.mocap_pos[self.env.compiled.gripper.mocap].copy())

    def reset(self, **kwargs) -> dict:
        obs = self.env.reset(**kwargs)
        self._qpos, self._qvel, self._mocap, self._actions = [], [], [], []
        self._success_step = None
        self._snap()
        return obs

    def step(self, action):
        out = self.env.step(action)
        self._actions.append(np.asarray(action, dtype=np.float32))
        self._snap()
        if out[4].get("success") and self._success_step is None:
            self._success_step = len(self._actions)
        return out

    def step_chunk(self, chunk):
        total, executed = 0.0, 0
        out = None
        for a in np.asarray(chunk):
            out = self.step(a)
            total += out[1]
            executed += 1
            if out[2] or out[3]:
                break
        obs, _, term, trunc, info = out
        return obs, total, term, trunc, {**info, "executed": executed}

    def trace(self, **meta) -> Trace:
        return Trace(
            spec=self.env.spec,
            actions=np.asarray(self._actions, dtype=np.float32).reshape(-1, 7),
            qpos=np.asarray(self._qpos),
            qvel=np.asarray(self._qvel),
            mocap_pos=np.asarray(self._mocap),
            success=self._success_step is not None,
            initial_bottom=dict(self.env.state.initial_bottom),
            success_step=self._success_step,
            meta=meta,
        )
