"""Rollout traces: everything needed to replay an episode's states exactly (for evidence, keyframes, potentials).

A trace keeps the spec, the actions and the full physics state (qpos, qvel, mocap) after reset and after every
control step. Any helper can be recomputed later: `trace.state_at(t)` restores step t in a fresh env.

    env = CodaEnv(spec); rec = TraceRecorder(env)
    obs = rec.reset()
    obs, r, term, trunc, info = rec.step(action)      # same as env.step, recorded
    trace = rec.trace()

`RecordingEnv` is an env that records itself and passes its actions through an `ActionPerturbation` (for code
that drives an env directly, such as the scripted planner); `planner_trace(spec, perturb)` runs the planner in one
and returns the demonstration and the trace (the labelled critic benchmark plants execution faults this way).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Protocol

import mujoco
import numpy as np

from sim.env import CodaEnv
from sim.helpers import SceneState
from sim.planner import Demo, run_planner
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
        self._begin_lists()

    def _begin_lists(self) -> None:
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

    def begin(self) -> None:
        """Start a new recording at the env's current (just reset) state."""
        self._begin_lists()
        self._snap()

    def record(self, action, out: tuple) -> None:
        """Record one executed `action` and the env's state after it (`out` is what env.step returned)."""
        self._actions.append(np.asarray(action, dtype=np.float32))
        self._snap()
        if out[4].get("success") and self._success_step is None:
            self._success_step = len(self._actions)

    def reset(self, **kwargs) -> dict:
        obs = self.env.reset(**kwargs)
        self.begin()
        return obs

    def step(self, action):
        out = self.env.step(action)
        self.record(action, out)
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


class ActionPerturbation(Protocol):
    """Changes the actions an env executes (and may bias the target pose its driver reads back)."""

    def __call__(self, env: RecordingEnv, action: np.ndarray) -> np.ndarray: ...

    def target_offset(self) -> np.ndarray: ...


class RecordingEnv(CodaEnv):
    """A `CodaEnv` that records a trace of every reset/step and passes actions through a perturbation."""

    def __init__(self, spec, perturb: ActionPerturbation | None = None, max_steps: int | None = None):
        super().__init__(spec, max_steps=max_steps)
        self.perturb = perturb
        self.recorder = TraceRecorder(self)

    def reset(self, seed: int | None = None, gripper_noise: float = 0.0) -> dict:
        obs = super().reset(seed=seed, gripper_noise=gripper_noise)
        self.recorder.begin()
        return obs

    def step(self, action):
        a = np.asarray(action, dtype=np.float64).copy()
        if self.perturb is not None:
            a = np.asarray(self.perturb(self, a), dtype=np.float64)
        out = super().step(a)
        self.recorder.record(a, out)
        return out

    def target_pose(self) -> tuple[np.ndarray, np.ndarray]:
        pos, quat = super().target_pose()
        if self.perturb is not None:
            pos = pos - self.perturb.target_offset()
        return pos, quat

    def trace(self, **meta) -> Trace:
        return self.recorder.trace(**meta)


def planner_trace(spec, perturb: ActionPerturbation | None = None, **meta) -> tuple[Demo, Trace]:
    """Run the scripted planner on `spec` (through `perturb`) and return (demo, trace)."""
    env = RecordingEnv(spec, perturb)
    demo = run_planner(env)
    return demo, env.trace(**meta)
