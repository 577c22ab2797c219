"""Scripted articulation: grasp a fixture's handle and drive its joint (drawer, door, lid, sliding door).

The joint is driven closed-loop on its measured position: each step the gripper target moves the handle a
bounded increment along the joint (straight for slides, on the arc about the hinge for hinges), so the handle
leads and the gripper follows. An arm first tries its candidate grasps of the handle in the simulator
(`_arm_grasp`); the floating gripper takes the level grasp.
"""

from __future__ import annotations

from collections.abc import Iterator

import mujoco
import numpy as np

from sim import helpers as h
from sim.motion import (
    CLOSE,
    OPEN,
    Clearance,
    Runner,
    axis_rotation,
    matrix_from_quat,
    quat_from_matrix,
    route,
)

APPROACH = 0.10
"""stand-off in front of the handle before moving onto it"""
SIDEWAYS = Clearance(hang=0.03, radius=0.08)
"""room a gripper pointing sideways (into a fixture) needs on its way to a handle"""
MAX_SLIDE_STEP = 0.035
MAX_HINGE_STEP = 0.14
"""joint increments per control step (metres, radians)"""
GOAL_TOL = 0.02
"""fraction of the joint range within which the joint is at its goal"""
GRASP_TURNS = (0.0, 0.3, -0.3, 0.6, -0.6, 0.9, -0.9)
"""turns (radians) of an arm's hand about the handle bar, in the order its grasps are tried: level first"""


def _handle_frame(run: Runner, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(gripper orientation for grasping the handle, the moving part's outward front direction).

    Fingers point into the moving part (door, drawer face, lid) and close across the handle bar. Taken from
    the moving part, so an already open door or lid is approached square to its face. Of the two frames a half
    turn apart about the fingers (the hand is symmetric), a free gripper takes the first; an arm the one its
    joints reach with the least motion from where they are.
    """
    o = run.state.obj(name)
    r = run.env.data.xmat[o.moving_body].reshape(3, 3)
    front = -r[:, 0]  # fixtures face their −x
    bar = r[:, "xyz".index(o.asset.handle_axis)]
    y_body = np.cross(front, bar)
    y_body /= np.linalg.norm(y_body)
    quat = quat_from_matrix(np.column_stack([np.cross(y_body, front), y_body, front]))
    arm = run.state.compiled.gripper.arm
    if arm is not None:
        flipped = quat_from_matrix(np.column_stack([-np.cross(y_body, front), -y_body, front]))
        now = matrix_from_quat(run.pose()[1])
        if float(now[:, 0] @ np.cross(y_body, front) + now[:, 1] @ y_body) < 0:  # the smaller turn of the hand
            quat, flipped = flipped, quat
        grasp = run.env.data.site_xpos[o.handle_site] + front * 0.004
        costs = [arm.reach_cost(run.env.model, run.env.data, grasp, q) for q in (quat, flipped)]
        if costs[1] < costs[0]:  # unless the joints reach the other with less motion (or only the other)
            quat = flipped
    return quat, front


def _arm_grasp(run: Runner, name: str, fraction: float, level: np.ndarray, front: np.ndarray):
    """(orientation, approach direction) of an arm's grasp of the handle of `name`.

    Candidates, in order: the level grasp `_handle_frame` chose, its twin a half turn about the fingers, then
    both turned about the bar by `GRASP_TURNS` (a turned hand comes in along its fingers). Each is tried in
    the simulator from the current state and undone (`_trial`); the first that drives the joint to `fraction`
    or completes the task is taken, else the one that got closest. A level grasp of a low handle far out can
    be beyond the wrist's joint range, on the approach or as the hinge turns the hand."""
    o = run.state.obj(name)
    bar = run.env.data.xmat[o.moving_body].reshape(3, 3)[:, "xyz".index(o.asset.handle_axis)]
    lo, hi = o.joint_range
    frames = [matrix_from_quat(level), matrix_from_quat(level) @ np.diag([-1.0, -1.0, 1.0])]
    grasps = [(level, front)]
    for turn in GRASP_TURNS:
        for i, f in enumerate(frames):
            if turn or i:
                t = axis_rotation(bar, turn) @ f
                grasps.append((quat_from_matrix(t), t[:, 2]))
    best = (np.inf, level, front)
    for quat, approach in grasps:
        left = _trial(run, name, fraction, quat, front, approach) / (hi - lo)
        if left <= GOAL_TOL:
            return quat, approach
        if left < best[0]:
            best = (left, quat, approach)
    return best[1:]


class _Discard:
    """A demo that keeps nothing: for trials."""

    def __init__(self):
        self.observations, self.actions = [], []


def _trial(run: Runner, name: str, fraction: float, quat, front, approach) -> float:
    """How far (joint units) from its goal the joint of `name` ends when the hand grasps its handle at `quat`
    and drives it to `fraction`; 0 if the task is done. Run in the simulator and undone."""
    env = run.env
    start, warnings = env.get_state(), [w.number for w in env.data.warning]
    for _ in _grasp_and_drive(Runner(env, _Discard(), run.obs), name, fraction, quat, front, approach):
        pass
    o = run.state.obj(name)
    lo, hi = o.joint_range
    left = 0.0 if env.success() else abs(lo + fraction * (hi - lo) - float(env.data.qpos[o.joint_qpos]))
    env.set_state(start)
    for w, n in zip(env.data.warning, warnings, strict=True):  # an unstable trial must not end the episode
        w.number = n
    run.state._contact_key = None
    return left


def articulate(run: Runner, name: str, fraction: float) -> Iterator[str]:
    """Grasp the handle of `name` and move its joint to `fraction` of its range, then let go and back off."""
    st = run.state
    quat, front = _handle_frame(run, name)
    approach = front
    if st.compiled.gripper.arm is not None:
        quat, approach = _arm_grasp(run, name, fraction, quat, front)
    yield from _grasp_and_drive(run, name, fraction, quat, front, approach)
    run.hold(CLOSE, 2)
    yield "release"
    run.hold(OPEN, 3)
    run.move(h.gripper_position(st) + front * 0.08, run.pose()[1], OPEN, tol=0.04)


def _grasp_and_drive(run: Runner, name: str, fraction: float, quat, front, approach) -> Iterator[str]:
    """Come in along `approach` onto the handle of `name` at `quat`, grasp it and move the joint to `fraction`."""
    o = run.state.obj(name)
    lo, hi = o.joint_range
    d = run.env.data
    handle = d.site_xpos[o.handle_site].copy()
    yield "approach"
    run.follow(route(run, handle + approach * APPROACH, SIDEWAYS), quat, OPEN, tol=None)  # around an open door
    run.move(handle + front * 0.004, quat, OPEN, tol=0.008)
    yield "grasp"
    run.close_on(name)
    yield "open" if fraction > (d.qpos[o.joint_qpos] - lo) / (hi - lo) else "close"
    _drive(run, name, lo + fraction * (hi - lo))


def _drive(run: Runner, name: str, goal: float) -> None:
    st = run.state
    o = st.obj(name)
    d, m = run.env.data, run.env.model
    lo, hi = o.joint_range
    axis = d.xaxis[o.joint].copy()
    anchor = d.xanchor[o.joint].copy()
    slide = m.jnt_type[o.joint] == mujoco.mjtJoint.mjJNT_SLIDE
    max_dq = MAX_SLIDE_STEP if slide else MAX_HINGE_STEP
    for _ in range(40):
        q = float(d.qpos[o.joint_qpos])
        if abs(goal - q) < GOAL_TOL * (hi - lo) or run.done:
            return
        dq = float(np.clip(goal - q, -max_dq, max_dq))
        grip = h.gripper_position(st)
        tq = run.pose()[1]
        if slide:
            pos, quat = grip + axis * dq, tq
        else:
            rot = axis_rotation(axis, dq)
            pos, quat = anchor + rot @ (grip - anchor), quat_from_matrix(rot @ matrix_from_quat(tq))
        run.move(pos, quat, CLOSE, tol=0.5, max_steps=1)
