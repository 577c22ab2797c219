"""Planner rollouts recorded as traces, optionally through a perturbation of the executed actions.

`planner_trace(spec)` runs the scripted planner and returns its demonstration and the `Trace`;
`planner_trace(spec, perturb=...)` runs it through an `ActionPerturbation` (the labelled critic benchmark uses
these to plant execution faults at a known phase).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from sim.env import CodaEnv
from sim.planner import Demo, run_planner
from sim.trace import Trace


class ActionPerturbation(Protocol):
    """Changes the planner's actions (and may bias the target pose the planner reads back)."""

    def __call__(self, env: RecordingEnv, action: np.ndarray) -> np.ndarray: ...

    def target_offset(self) -> np.ndarray: ...


class RecordingEnv(CodaEnv):
    """A `CodaEnv` that records a trace of every reset/step and passes actions through a perturbation."""

    def __init__(self, spec, perturb: ActionPerturbation | None = None, max_steps: int | None = None):
        super().__init__(spec, max_steps=max_steps)
        self.perturb = perturb
        self._clear()

    def _clear(self) -> None:
        self._qpos: list[np.ndarray] = []
        self._qvel: list[np.ndarray] = []
        self._mocap: list[np.ndarray] = []
        self._actions: list[np.ndarray] = []
        self._success_step: int | None = None

    def _snap(self) -> None:
        d = self.data
        self._qpos.append(d.qpos.copy())
        self._qvel.append(d.qvel.copy())
        self._mocap.append(d.mocap_pos[self.compiled.gripper.mocap].copy())

    def reset(self, seed: int | None = None, gripper_noise: float = 0.0) -> dict:
        obs = super().reset(seed=seed, gripper_noise=gripper_noise)
        self._clear()
        self._snap()
        return obs

    def step(self, action):
        a = np.asarray(action, dtype=np.float64).copy()
        if self.perturb is not None:
            a = np.asarray(self.perturb(self, a), dtype=np.float64)
        out = super().step(a)
        self._actions.append(a.astype(np.float32))
        self._snap()
        if out[4].get("success") and self._success_step is None:
            self._success_step = len(self._actions)
        return out

    def target_pose(self) -> tuple[np.ndarray, np.ndarray]:
        pos, quat = super().target_pose()
        if self.perturb is not None:
            pos = pos - self.perturb.target_offset()
        return pos, quat

    def trace(self, **meta) -> Trace:
        return Trace(
            spec=self.spec,
            actions=np.asarray(self._actions, dtype=np.float32).reshape(-1, 7),
            qpos=np.asarray(self._qpos),
            qvel=np.asarray(self._qvel),
            mocap_pos=np.asarray(self._mocap),
            success=self._success_step is not None,
            initial_bottom=dict(self.state.initial_bottom),
            success_step=self._success_step,
            meta=meta,
        )


def planner_trace(spec, perturb: ActionPerturbation | None = None, **meta) -> tuple[Demo, Trace]:
    """Run the scripted planner on `spec` (through `perturb`) and return (demo, trace)."""
    env = RecordingEnv(spec, perturb)
    demo = run_planner(env)
    return demo, env.trace(**meta)
