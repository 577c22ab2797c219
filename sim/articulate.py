"""Scripted articulation: grasp a fixture's handle and drive its joint (drawer, door, lid, sliding door).

The joint is driven closed-loop on its measured position: each step the gripper target moves the handle a
bounded increment along the joint (straight for slides, on the arc about the hinge for hinges), so the handle
leads and the gripper follows.
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


def articulate(run: Runner, name: str, fraction: float) -> Iterator[str]:
    """Grasp the handle of `name` and move its joint to `fraction` of its range, then let go and back off."""
    st = run.state
    o = st.obj(name)
    lo, hi = o.joint_range
    d = run.env.data
    handle = d.site_xpos[o.handle_site].copy()
    q0, front = _handle_frame(run, name)
    yield "approach"
    run.follow(route(run, handle + front * APPROACH, SIDEWAYS), q0, OPEN, tol=None)  # around an open door
    run.move(handle + front * 0.004, q0, OPEN, tol=0.008)
    yield "grasp"
    run.close_on(name)
    yield "open" if fraction > (d.qpos[o.joint_qpos] - lo) / (hi - lo) else "close"
    _drive(run, name, lo + fraction * (hi - lo))
    run.hold(CLOSE, 2)
    yield "release"
    run.hold(OPEN, 3)
    run.move(h.gripper_position(st) + front * 0.08, run.pose()[1], OPEN, tol=0.04)


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
        if abs(goal - q) < 0.02 * (hi - lo) or run.done:
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
