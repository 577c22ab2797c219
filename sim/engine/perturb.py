"""Execution faults planted into planner rollouts at a known phase (for the labelled critic benchmark).

Each fault is an `ActionPerturbation` for `sim.trace.RecordingEnv`: it watches the state, and once its
trigger fires it overrides the gripper command or biases the target pose the planner reads back (so the
planner's own closed loop carries the gripper off by a fixed offset).
"""

from __future__ import annotations

import numpy as np

from sim import helpers as h
from sim.planner import order_subgoals


def first_goal(spec) -> tuple[str, str | None, str]:
    """(object, destination, kind) of the first goal of the spec's predicate."""
    a = order_subgoals(spec.task.success)[0]
    if a.op == "open_fraction":
        return a.args[0], None, "articulate"
    if a.op == "lifted":
        return a.args[0], None, "hold"
    return a.args[0], a.args[1], "move"


def grasp_axis(state, name: str) -> np.ndarray:
    """World xy direction along which the planner's fingers close on `name`."""
    o = state.obj(name)
    r = h.rotation(state, name)
    axis = r[:2, 1] if getattr(o.asset, "grasp_axis", "y") == "y" else r[:2, 0]
    return axis / max(float(np.linalg.norm(axis)), 1e-9)


def _clear_side(state, name: str, axis: np.ndarray) -> np.ndarray:
    """`axis` or `-axis`, whichever points away from the nearest other object (keeps the fault clean)."""
    p = h.position(state, name)[:2]
    others = [h.position(state, n)[:2] - p for n in state.names if n != name]
    if not others:
        return axis
    nearest = min(others, key=lambda d: float(np.linalg.norm(d)))
    return -axis if float(nearest @ axis) > 0 else axis


class Fault:
    """Base: no change until `fire` is set by a subclass's trigger."""

    def __init__(self, spec, rng: np.random.Generator):
        self.obj, self.dest, self.kind = first_goal(spec)
        self.rng = rng
        self.fired_step: int | None = None
        self._offset = np.zeros(3)

    def target_offset(self) -> np.ndarray:
        return self._offset

    def fire(self, env) -> None:
        if self.fired_step is None:
            self.fired_step = env.steps

    def __call__(self, env, action: np.ndarray) -> np.ndarray:
        return action


class PrematureClose(Fault):
    """Closes the gripper while it is still above the object (or short of the handle): the grasp misses."""

    def __init__(self, spec, rng):
        super().__init__(spec, rng)
        self.planner_closed = False

    def __call__(self, env, action):
        st = env.state
        grip = h.gripper_position(st)
        if self.fired_step is None and action[6] < 0:
            p = h.position(st, self.obj)
            if self.kind == "articulate":
                hit = float(np.linalg.norm(grip - p)) < 0.075
            else:
                hit = float(np.linalg.norm(grip[:2] - p[:2])) < 0.02 and grip[2] < h.top_z(st, self.obj) + 0.07
            if hit:
                self.fire(env)
                action[:6] = 0.0  # stop where it is and close there
        if self.fired_step is not None and action[6] < 0 and not self.planner_closed:
            action[6] = 1.0
        elif action[6] > 0:
            self.planner_closed = True
        return action


class EarlyRelease(Fault):
    """Opens the gripper for good once the held object is lifting (`at='lift'`) or on its way (`'transport'`)."""

    def __init__(self, spec, rng, at: str):
        super().__init__(spec, rng)
        self.at = at
        self.pick: np.ndarray | None = None

    def __call__(self, env, action):
        st = env.state
        if self.fired_step is None and h.is_grasped(st, self.obj):
            p = h.position(st, self.obj)
            if self.pick is None:
                self.pick = p.copy()
            lift = h.lift_height(st, self.obj)
            if self.at == "lift" and lift > 0.03:
                self.fire(env)
            elif self.at == "transport" and lift > 0.05 and float(np.linalg.norm(p[:2] - self.pick[:2])) > 0.05:
                self.fire(env)
        if self.fired_step is not None:
            action[6] = -1.0
        return action


class HandleRelease(Fault):
    """Lets go of a drawer/door handle partway through opening or closing it, and stops there."""

    def __init__(self, spec, rng):
        super().__init__(spec, rng)
        self.open0: float | None = None

    def __call__(self, env, action):
        st = env.state
        if self.fired_step is None and self.kind == "articulate" and h.is_grasped(st, self.obj):
            now = h.open_fraction(st, self.obj)
            self.open0 = now if self.open0 is None else self.open0
            if abs(now - self.open0) > 0.12:
                self.fire(env)
        if self.fired_step is not None:  # let go and stop there
            action[:6] = 0.0
            action[6] = -1.0
        return action


class Offset(Fault):
    """A persistent sideways error of the gripper target, starting in the approach descent or the place descent."""

    def __init__(self, spec, rng, at: str):
        super().__init__(spec, rng)
        self.at = at

    def __call__(self, env, action):
        if self.fired_step is not None:
            return action
        st = env.state
        grip = h.gripper_position(st)
        p = h.position(st, self.obj)
        if self.at == "approach" and action[6] < 0 and action[2] < -0.005:
            if float(np.linalg.norm(grip[:2] - p[:2])) < 0.02 and grip[2] < h.top_z(st, self.obj) + 0.1:
                self._offset = np.r_[0.045 * _clear_side(st, self.obj, grasp_axis(st, self.obj)), 0.0]
                self.fire(env)
        elif self.at == "place" and h.is_grasped(st, self.obj) and action[2] < -0.005:
            q = h.position(st, self.dest)
            if float(np.linalg.norm(p[:2] - q[:2])) < 0.03:
                reach = float(max(st.obj(self.dest).half_extent[:2])) + 0.08
                away = np.array([0.45, 0.0]) - q[:2]
                away = away / max(float(np.linalg.norm(away)), 1e-6)
                self._offset = np.r_[reach * away, 0.0]
                self.fire(env)
        return action
