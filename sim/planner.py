"""Scripted waypoint planner: solves valid scenes and produces planner-certified demonstrations.

The plan is derived from the success predicate itself, so it works for any scene built with the SDK, not only
the seed families: `inside(a, b)` → pick a, place it in b; `on`/`stacked` → pick, place on; `near` → pick, place
beside; `open_fraction` → grasp the handle and move it along the joint; `lifted` → pick and hold. Conjunctions are
ordered so that supports are finished before what goes on them, and articulated goals come first.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from sim import helpers as h
from sim.constants import ACTION_DIM, MAX_DPOS, MAX_DROT
from sim.env import CodaEnv
from sim.predicates import Atom, atoms

OPEN, CLOSE = -1.0, 1.0
TRANSPORT_Z = 0.22
PAD_CLEARANCE = 0.018
"""lowest TCP height above an object's bottom when grasping (keeps the pads off the table)"""
PALM_CLEARANCE = 0.048
"""the TCP stays at most this far below an object's top, so the palm (5.5 cm above the TCP) clears it"""


@dataclass
class Demo:
    """A planner trajectory: observations before each action, the actions, and the outcome."""

    observations: list[dict] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    success: bool = False
    steps: int = 0
    failure: str | None = None
    subgoals: list[str] = field(default_factory=list)

    def action_array(self) -> np.ndarray:
        return np.asarray(self.actions, dtype=np.float32).reshape(-1, ACTION_DIM)


class PlanError(RuntimeError):
    """The predicate has no scripted solution (e.g. `~on(...)` alone)."""


# --- orientation utilities ------------------------------------------------------------------------


def quat_from_matrix(r: np.ndarray) -> np.ndarray:
    import mujoco

    q = np.empty(4)
    mujoco.mju_mat2Quat(q, np.asarray(r, dtype=np.float64).reshape(9))
    return q


def yaw_quat(yaw: float) -> np.ndarray:
    return np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])


def _rot_delta(q_to: np.ndarray, q_from: np.ndarray) -> np.ndarray:
    """World-frame axis-angle taking q_from to q_to."""
    import mujoco

    conj = q_from * np.array([1, -1, -1, -1])
    dq = np.empty(4)
    mujoco.mju_mulQuat(dq, q_to, conj)
    if dq[0] < 0:
        dq = -dq
    vel = np.empty(3)
    mujoco.mju_quat2Vel(vel, dq, 1.0)
    return vel


def grasp_yaw(state: h.SceneState, name: str) -> float:
    """Gripper yaw whose closing axis (body y) lies along the object's narrow side."""
    o = state.obj(name)
    r = h.rotation(state, name)
    axis = r[:, 1] if getattr(o.asset, "grasp_axis", "y") == "y" else r[:, 0]
    yaw = math.atan2(-axis[0], axis[1])
    return (yaw + math.pi / 2) % math.pi - math.pi / 2


# --- primitive motion ---------------------------------------------------------------------------


class _Runner:
    """Drives the env towards waypoints, recording observations and actions."""

    def __init__(self, env: CodaEnv, demo: Demo, obs: dict):
        self.env, self.demo, self.obs = env, demo, obs
        self.done = False

    def act(self, action: np.ndarray) -> None:
        self.demo.observations.append(self.obs)
        self.demo.actions.append(action.astype(np.float32))
        self.obs, _, terminated, truncated, info = self.env.step(action)
        self.done = terminated or truncated

    def move(self, pos, quat, grip: float, tol: float = 0.02, max_steps: int = 25, settle: int = 0) -> bool:
        pos = np.asarray(pos, dtype=np.float64)
        for _ in range(max_steps):
            if self.done:
                return False
            tp, tq = self.env.target_pose()
            dpos = np.clip(pos - tp, -MAX_DPOS, MAX_DPOS)
            drot = _rot_delta(quat, tq)
            n = np.linalg.norm(drot)
            if n > MAX_DROT:
                drot *= MAX_DROT / n
            self.act(np.concatenate([dpos, drot, [grip]]))
            actual = h.gripper_position(self.env.state)
            if np.linalg.norm(pos - self.env.target_pose()[0]) < 1e-6 and np.linalg.norm(actual - pos) < tol:
                if n < 0.05:
                    settle -= 1
                    if settle < 0:
                        return True
        return False

    def hold(self, grip: float, steps: int) -> None:
        for _ in range(steps):
            if self.done:
                return
            self.act(np.array([0, 0, 0, 0, 0, 0, grip], dtype=np.float64))


# --- skills ---------------------------------------------------------------------------------------


def _pick(run: _Runner, name: str) -> Iterator[str]:
    st = run.env.state
    center = h.position(st, name)
    center[:2] = st.data.xipos[st.obj(name).body][:2]  # grasp over the centre of mass (hammers, mugs)
    bottom, top = h.bottom_z(st, name), h.top_z(st, name)
    z = max(bottom + PAD_CLEARANCE, top - PALM_CLEARANCE, min(center[2], top - 0.02))
    q = yaw_quat(grasp_yaw(st, name))
    yield "approach"
    run.move([center[0], center[1], max(top + 0.05, z + 0.08)], q, OPEN, tol=0.03)
    run.move([center[0], center[1], z], q, OPEN, tol=0.008, settle=1)
    yield "grasp"
    run.hold(CLOSE, 3)
    yield "lift"
    run.move([center[0], center[1], z + 0.02], q, CLOSE, tol=0.01, max_steps=3)  # gentle start
    tz = max(TRANSPORT_Z, z + 0.12)
    run.move([center[0], center[1], tz], q, CLOSE, tol=0.04)


def _held_offset(run: _Runner, name: str) -> float:
    """Height of the TCP above the held object's bottom."""
    st = run.env.state
    return float(h.gripper_position(st)[2] - h.bottom_z(st, name))


def _release_at(run: _Runner, name: str, xy, floor_z: float) -> Iterator[str]:
    st = run.env.state
    q = run.env.target_pose()[1]
    offset = _held_offset(run, name)
    tz = max(TRANSPORT_Z, floor_z + offset + 0.08)
    yield "transport"
    run.move([xy[0], xy[1], tz], q, CLOSE, tol=0.03)
    yield "place"
    run.move([xy[0], xy[1], floor_z + offset + 0.012], q, CLOSE, tol=0.01, settle=1)
    yield "release"
    run.hold(OPEN, 3)
    run.move([xy[0], xy[1], max(tz, h.gripper_position(st)[2] + 0.08)], q, OPEN, tol=0.04)


def _place_in(run: _Runner, name: str, container: str, slot: int = 0, slots: int = 1) -> Iterator[str]:
    box = h.interior_box(run.env.state, container)
    if box is None:
        raise PlanError(f"{container} has no cavity to put {name} in")
    center, r, half = box
    local = np.zeros(3)
    o = run.env.state.obj(container)
    if o.articulated and o.asset.kind == "drawer":
        local[0] = -half[0] + min(half[0], 0.06)  # front part of the tray, outside the cabinet
    if slots > 1:
        local[1] = (slot - (slots - 1) / 2) * min(0.07, 1.6 * half[1] / slots)
    xy = center + r @ local
    yield from _release_at(run, name, xy[:2], center[2] - half[2])


def _place_on(run: _Runner, name: str, support: str, slot: int = 0, slots: int = 1) -> Iterator[str]:
    st = run.env.state
    if support == h.TABLE:
        raise PlanError("placing on the table needs a location; use near(...)")
    s = st.obj(support)
    if s.articulated or s.asset.interior is not None and not getattr(s.asset, "top_z", 0):
        yield from _place_in(run, name, support, slot, slots)
        return
    c = h.position(st, support)
    r = h.rotation(st, support)
    local = np.zeros(3)
    if slots > 1:
        long_axis = 0 if s.half_extent[0] >= s.half_extent[1] else 1
        local[long_axis] = (slot - (slots - 1) / 2) * min(0.075, 1.4 * s.half_extent[long_axis] / slots)
    xy = (c + r @ local)[:2]
    surface = float(st.data.xpos[s.body][2] + s.asset.top_z * s.scale)
    yield from _release_at(run, name, xy, surface)


def _place_near(run: _Runner, name: str, other: str, dist: float) -> Iterator[str]:
    st = run.env.state
    a, b = st.obj(name), st.obj(other)
    ra, rb = math.hypot(*a.half_extent[:2]), math.hypot(*b.half_extent[:2])
    d = min(dist * 0.8, max(ra + rb + 0.01, dist * 0.5))
    pb = h.position(st, other)
    toward = h.position(st, name)[:2] - pb[:2]
    n = np.linalg.norm(toward)
    u = toward / n if n > 1e-6 else np.array([-1.0, 0.0])
    yield from _release_at(run, name, pb[:2] + u * d, 0.0)


def _articulate(run: _Runner, name: str, fraction: float) -> Iterator[str]:
    st = run.env.state
    o = st.obj(name)
    lo, hi = o.joint_range
    d, m = run.env.data, run.env.model
    handle = d.site_xpos[o.handle_site].copy()
    axis = d.xaxis[o.joint].copy()
    anchor = d.xanchor[o.joint].copy()
    base_r = d.xmat[o.body].reshape(3, 3)
    front = -base_r[:, 0]  # the fixture's front faces its −x
    bar_vertical = o.asset.handle_axis == "z"
    # gripper points into the fixture (body −z... fingers along +x of the fixture frame)
    z_body = front.copy()
    y_body = np.cross(front, [0.0, 0.0, 1.0]) if bar_vertical else np.array([0.0, 0.0, 1.0])
    y_body /= np.linalg.norm(y_body)
    x_body = np.cross(y_body, z_body)
    r0 = np.column_stack([x_body, y_body, z_body])
    q0 = quat_from_matrix(r0)
    yield "approach"
    run.move(handle + front * 0.10, q0, OPEN, tol=0.03)
    run.move(handle + front * 0.004, q0, OPEN, tol=0.008, settle=1)
    yield "grasp"
    run.hold(CLOSE, 3)
    yield "open" if fraction > (d.qpos[o.joint_qpos] - lo) / (hi - lo) else "close"
    goal = lo + fraction * (hi - lo)
    slide = m.jnt_type[o.joint] == 2
    max_dq = 0.035 if slide else 0.14
    for _ in range(40):  # closed loop on the measured joint position: the handle leads, the gripper follows
        q = float(d.qpos[o.joint_qpos])
        if abs(goal - q) < 0.02 * (hi - lo) or run.done:
            break
        dq = float(np.clip(goal - q, -max_dq, max_dq))
        grip = h.gripper_position(st)
        tq = run.env.target_pose()[1]
        if slide:
            pos, quat = grip + axis * dq, tq
        else:
            rot_m = _axis_rotation(axis, dq)
            r_now = np.empty(9)
            import mujoco

            mujoco.mju_quat2Mat(r_now, tq)
            pos, quat = anchor + rot_m @ (grip - anchor), quat_from_matrix(rot_m @ r_now.reshape(3, 3))
        run.move(pos, quat, CLOSE, tol=0.5, max_steps=1)
    run.hold(CLOSE, 2)
    yield "release"
    run.hold(OPEN, 3)
    cur = h.gripper_position(st)
    run.move(cur + front * 0.08, run.env.target_pose()[1], OPEN, tol=0.04)


def _axis_rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    a = axis / np.linalg.norm(axis)
    k = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * (k @ k)


# --- plan from predicate --------------------------------------------------------------------------


def subgoals(env: CodaEnv) -> list[Atom]:
    """The positive atoms of the env's success predicate that need an action, in execution order."""
    return order_subgoals(env.spec.task.success)


def order_subgoals(pred) -> list[Atom]:
    """Positive atoms needing an action; articulated goals first, supports before what goes on them."""
    goal_atoms = _positive_atoms(pred)
    moved = {a.args[0] for a in goal_atoms if a.op in ("on", "inside", "stacked", "near", "lifted")}
    ordered: list[Atom] = [a for a in goal_atoms if a.op == "open_fraction"]
    rest = [a for a in goal_atoms if a.op in ("on", "inside", "stacked", "near")]
    while rest:
        ready = [a for a in rest if a.args[1] not in moved or a.args[1] in {x.args[0] for x in ordered}]
        ready = [a for a in ready if not any(b.args[0] == a.args[1] for b in rest if b is not a)] or rest[:1]
        nxt = ready[0]
        ordered.append(nxt)
        rest.remove(nxt)
    ordered += [a for a in goal_atoms if a.op == "lifted"]
    return ordered


def _positive_atoms(pred) -> list[Atom]:
    if pred.op == "and":
        return [a for t in pred.terms for a in _positive_atoms(t)]
    if pred.op == "or":
        return _positive_atoms(pred.terms[0])
    if pred.op == "not":
        return []
    return [pred] if pred.op not in ("grasped", "upright") else []


def run_planner(env: CodaEnv, seed: int | None = None) -> Demo:
    """Reset the env and execute the scripted plan; returns the demonstration."""
    obs = env.reset(seed=seed)
    demo = Demo()
    run = _Runner(env, demo, obs)
    goals = subgoals(env)
    if not goals:
        raise PlanError(f"no plannable goal in {env.spec.task.success}")
    targets = {}
    for a in goals:
        if a.op in ("inside", "on", "stacked"):
            targets.setdefault(a.args[1], []).append(a.args[0])
    try:
        for a in goals:
            demo.subgoals.append(str(a))
            if run.done:
                break
            if a.op == "open_fraction":
                frac = min(max((a.param("min") + a.param("max")) / 2, 0.0), 1.0)
                steps = _articulate(run, a.args[0], frac)
            elif a.op == "lifted":
                steps = _pick(run, a.args[0])
            else:
                obj, dest = a.args
                if not h.is_grasped(env.state, obj):
                    for _ in _pick(run, obj):
                        pass
                slot, slots = targets.get(dest, [obj]).index(obj), len(targets.get(dest, [obj]))
                if a.op == "inside":
                    steps = _place_in(run, obj, dest, slot, slots)
                elif a.op == "near":
                    steps = _place_near(run, obj, dest, a.param("dist"))
                else:
                    steps = _place_on(run, obj, dest, slot, slots)
            for _ in steps:
                if run.done:
                    break
        if a.op == "lifted":
            run.hold(CLOSE, 2)
    except PlanError as exc:
        demo.failure = str(exc)
    demo.success = env.success()
    demo.steps = env.steps
    if not demo.success and demo.failure is None:
        demo.failure = "plan finished without satisfying the predicate"
    return demo
