"""A plain pick-and-place controller that carries objects low and straight (no obstacle avoidance).

Stands in for a policy that has not learned to go around things: pick the object from above, lift it
`CARRY` metres, carry it in a straight line at that height, lower it into/onto the destination, let go.
The labelled critic benchmark uses it where the scripted planner would simply fly over an obstacle.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

from sim import helpers as h
from sim.constants import MAX_DPOS, MAX_DROT

CARRY = 0.10
"""lift of the object's bottom above where it started, metres"""
CRUISE_Z = 0.30
OPEN, CLOSE = -1.0, 1.0


def _yaw_quat(yaw: float) -> np.ndarray:
    return np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])


def _rot_delta(q_to: np.ndarray, q_from: np.ndarray) -> np.ndarray:
    conj = q_from * np.array([1, -1, -1, -1])
    dq = np.empty(4)
    mujoco.mju_mulQuat(dq, q_to, conj)
    if dq[0] < 0:
        dq = -dq
    vel = np.empty(3)
    mujoco.mju_quat2Vel(vel, dq, 1.0)
    return vel


def _move(env, pos, quat, grip: float, tol: float = 0.01, max_steps: int = 20) -> bool:
    pos = np.asarray(pos, dtype=np.float64)
    for _ in range(max_steps):
        tp, tq = env.target_pose()
        drot = _rot_delta(quat, tq)
        n = float(np.linalg.norm(drot))
        if n > MAX_DROT:
            drot *= MAX_DROT / n
        _, _, term, trunc, _ = env.step(np.concatenate([np.clip(pos - tp, -MAX_DPOS, MAX_DPOS), drot, [grip]]))
        if term or trunc:
            return False
        if np.linalg.norm(h.gripper_position(env.state) - pos) < tol and n < 0.05:
            return True
    return True


def _hold(env, grip: float, steps: int) -> None:
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(np.array([0, 0, 0, 0, 0, 0, grip], dtype=np.float64))
        if term or trunc:
            return


def destination(state, op: str, dest: str) -> tuple[np.ndarray, float]:
    """(xy, floor height) where the object should come to rest."""
    if op == "inside":
        box = h.interior_box(state, dest)
        if box is None:
            raise ValueError(f"{dest} has no cavity")
        centre, _, half = box
        return centre[:2], float(centre[2] - half[2])
    return h.position(state, dest)[:2], h.top_z(state, dest)


def straight_pick_place(env, obj: str, dest: str, op: str) -> None:
    """Reset `env` and carry `obj` to `dest` low and straight (`op` is 'inside', 'on' or 'stacked')."""
    env.reset()
    st = env.state
    o = st.obj(obj)
    centre = h.position(st, obj)
    bottom, top = h.bottom_z(st, obj), h.top_z(st, obj)
    z = max(bottom + 0.018, top - 0.048, min(centre[2], top - 0.02))
    axis = h.rotation(st, obj)[:, 1 if getattr(o.asset, "grasp_axis", "y") == "y" else 0]
    yaw = math.atan2(-axis[0], axis[1])
    q = _yaw_quat((yaw + math.pi / 2) % math.pi - math.pi / 2)
    _move(env, [centre[0], centre[1], CRUISE_Z], q, OPEN, tol=0.03)
    _move(env, [centre[0], centre[1], z], q, OPEN, tol=0.008)
    _hold(env, CLOSE, 3)
    carry_z = z + CARRY
    _move(env, [centre[0], centre[1], carry_z], q, CLOSE, tol=0.02)
    xy, floor = destination(st, op, dest)
    _move(env, [xy[0], xy[1], carry_z], q, CLOSE, tol=0.02, max_steps=25)
    hang = float(h.gripper_position(st)[2] - h.bottom_z(st, obj))
    _move(env, [xy[0], xy[1], floor + hang + 0.012], q, CLOSE, tol=0.01)
    _hold(env, OPEN, 3)
    _move(env, [xy[0], xy[1], CRUISE_Z], q, OPEN, tol=0.03)
