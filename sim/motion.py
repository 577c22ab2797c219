"""Motion primitives for the scripted planner: a waypoint runner over the env, orientation utilities,
collision-aware travel (rise, cross above everything in the way, descend), and straight-line motions without
obstacle avoidance (`straight_pick_place`, for the labelled critic benchmark).

Obstacles are read from the simulator itself: the world bounding box of every object geom, so open drawers,
swung doors and items already placed count exactly where they are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np

from sim import helpers as h
from sim.constants import MAX_DPOS, MAX_DROT
from sim.env import CodaEnv
from sim.robot import GRIPPER_GEOMETRY, GripperGeometry

OPEN, CLOSE = -1.0, 1.0
CLEAR = 0.025
"""vertical margin kept over obstacles while crossing"""
CORNER_CUT = 5
"""path samples (2 mm each) the target may run past a waypoint before the gripper has reached it"""
CORNER_TOL = 0.02
"""the gripper has turned a waypoint once this close to it (it lags its target by ~2 cm at full speed)"""
STALL_SPEED = 0.005
"""m/s: a gripper slower than this short of its goal is blocked"""


# --- orientation utilities ------------------------------------------------------------------------


def quat_from_matrix(r: np.ndarray) -> np.ndarray:
    q = np.empty(4)
    mujoco.mju_mat2Quat(q, np.asarray(r, dtype=np.float64).reshape(9))
    return q


def matrix_from_quat(q: np.ndarray) -> np.ndarray:
    r = np.empty(9)
    mujoco.mju_quat2Mat(r, np.asarray(q, dtype=np.float64))
    return r.reshape(3, 3)


def yaw_quat(yaw: float) -> np.ndarray:
    return np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])


def quat_yaw(q: np.ndarray) -> float:
    """Yaw of a gripper pointing down: the heading of its body x axis."""
    x = matrix_from_quat(q)[:, 0]
    return math.atan2(x[1], x[0])


def closing_yaw(axis_xy: np.ndarray, near: float) -> float:
    """Gripper yaw whose closing axis (body y) lies along `axis_xy`, the one of the two closest to `near`."""
    yaw = math.atan2(-axis_xy[0], axis_xy[1])
    return near + (yaw - near + math.pi / 2) % math.pi - math.pi / 2


def grip_command(half_opening: float, hand: GripperGeometry = GRIPPER_GEOMETRY) -> float:
    """The gripper command whose finger target is `half_opening` (metres from the centre line per finger)."""
    return float(np.clip(hand.command(half_opening), OPEN, CLOSE))


def hand_of(state: h.SceneState) -> GripperGeometry:
    """The geometry of the scene's hand (what the planners plan with)."""
    return state.compiled.gripper.geometry


def rot_delta(q_to: np.ndarray, q_from: np.ndarray) -> np.ndarray:
    """World-frame axis-angle taking q_from to q_to."""
    conj = q_from * np.array([1, -1, -1, -1])
    dq = np.empty(4)
    mujoco.mju_mulQuat(dq, q_to, conj)
    if dq[0] < 0:
        dq = -dq
    vel = np.empty(3)
    mujoco.mju_quat2Vel(vel, dq, 1.0)
    return vel


def axis_rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    a = axis / np.linalg.norm(axis)
    k = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * (k @ k)


# --- the runner -----------------------------------------------------------------------------------


class Runner:
    """Drives the env towards waypoints, recording observations and actions into a demo."""

    def __init__(self, env: CodaEnv, demo, obs: dict):
        self.env, self.demo, self.obs = env, demo, obs
        self.done = False

    @property
    def state(self) -> h.SceneState:
        return self.env.state

    def act(self, action: np.ndarray) -> None:
        self.demo.observations.append(self.obs)
        self.demo.actions.append(action.astype(np.float32))
        self.obs, _, terminated, truncated, _ = self.env.step(action)
        self.done = terminated or truncated

    def follow(self, points, quat, grip: float, tol: float | None = 0.02, settle: int = 0, max_steps: int = 60) -> bool:
        """Run the target along the polyline through `points` at the action limits, turning towards `quat`.

        Done once the target is at the last point, the turn is finished and (unless tol is None) the gripper
        is within `tol` of it for `settle` more steps; False if the episode ended or the gripper is blocked.
        """
        path = Polyline([self.pose()[0], *points])
        for _ in range(max_steps):
            if self.done:
                return False
            tp, tq = self.pose()
            dpos = np.clip(path.advance(tp, h.gripper_position(self.state)) - tp, -MAX_DPOS, MAX_DPOS)
            self.act(np.concatenate([dpos, _turn(quat, tq), [grip]]))
            tp, tq = self.pose()
            arrived = np.linalg.norm(path.end - tp) < 1e-6 and np.linalg.norm(rot_delta(quat, tq)) < 0.05
            if arrived and (tol is None or np.linalg.norm(h.gripper_position(self.state) - path.end) < tol):
                settle -= 1
                if settle < 0:
                    return True
            elif arrived and self._stalled():
                return False  # blocked short of the goal: the caller carries on from here
        return False

    def _stalled(self) -> bool:
        g = self.state.compiled.gripper
        return float(np.linalg.norm(g.velocity(self.env.model, self.env.data))) < STALL_SPEED

    def move(self, pos, quat, grip: float, tol: float | None = 0.02, max_steps: int = 25, settle: int = 0) -> bool:
        """Straight to (pos, quat); see `follow`."""
        return self.follow([pos], quat, grip, tol, settle, max_steps)

    def hold(self, grip: float, steps: int) -> None:
        """Keep the hand still commanding `grip` until a slow gripper's fingers have reached it, then `steps`
        actions more."""
        for _ in range(self.env.grip_wait(grip) + steps):
            if self.done:
                return
            self.act(np.array([0, 0, 0, 0, 0, 0, grip], dtype=np.float64))

    def close_on(self, name: str, max_steps: int = 3) -> None:
        """Close the fingers until both touch `name` (a slow gripper: and its fingers' command is fully closed),
        and one step more to build up the grip."""
        for _ in range(max_steps + self.env.grip_wait(CLOSE)):
            if self.done:
                return
            self.act(np.array([0, 0, 0, 0, 0, 0, CLOSE], dtype=np.float64))
            if h.is_grasped(self.state, name) and self.env.grip_wait(CLOSE) == 0:
                self.hold(CLOSE, 1)
                return

    def pose(self) -> tuple[np.ndarray, np.ndarray]:
        """The commanded (target) pose of the gripper."""
        return self.env.target_pose()


def densify(points, spacing: float = 0.002, corners: bool = False):
    """The polyline through `points` sampled every `spacing` metres; with `corners`, also the sample index of
    every point given."""
    pts, idx = [np.asarray(points[0], dtype=np.float64)], [0]
    for p in points[1:]:
        a, b = pts[-1], np.asarray(p, dtype=np.float64)
        n = max(1, int(np.ceil(np.linalg.norm(b - a) / spacing)))
        pts.extend(a + (b - a) * (i / n) for i in range(1, n + 1))
        idx.append(len(pts) - 1)
    return (np.array(pts), np.array(idx)) if corners else np.array(pts)


class Polyline:
    """A polyline the gripper target runs along: each step to the farthest point one action reaches, but never
    more than `CORNER_CUT` samples past a waypoint the gripper itself (which lags its target) has not reached.
    So the target keeps full speed along straight runs, and the gripper still turns every corner."""

    def __init__(self, points):
        self.points, self.corners = densify(points, corners=True)
        self.end = self.points[-1]
        self._k, self._corner = 0, 1

    def advance(self, target: np.ndarray, actual: np.ndarray) -> np.ndarray:
        """The next target point."""
        c = self.corners
        while self._corner < len(c) - 1 and self._k >= c[self._corner]:
            if np.linalg.norm(actual - self.points[c[self._corner]]) >= CORNER_TOL:
                break
            self._corner += 1
        ahead = self.points[self._k : c[self._corner] + CORNER_CUT + 1]
        within = np.abs(ahead - target).max(axis=1) <= MAX_DPOS + 1e-9
        self._k += len(ahead) - 1 if within.all() else max(0, int(np.argmin(within)) - 1)
        return self.points[self._k]


def _turn(quat: np.ndarray, current: np.ndarray) -> np.ndarray:
    """Rotation action towards `quat`, at most MAX_DROT."""
    drot = rot_delta(quat, current)
    n = np.linalg.norm(drot)
    return drot * (MAX_DROT / n) if n > MAX_DROT else drot


# --- obstacles and routes -------------------------------------------------------------------------


def obstacle_boxes(state: h.SceneState, skip: set[str]) -> tuple[np.ndarray, np.ndarray]:
    """World-aligned bounding boxes (centres, half sizes) of every object geom not owned by `skip`."""
    owner = state.compiled.geom_owner
    keep = owner >= 0
    for name in skip:
        keep &= owner != state.slot(name)
    ids = np.flatnonzero(keep)
    aabb = state.model.geom_aabb[ids]
    rot = state.data.geom_xmat[ids].reshape(-1, 3, 3)
    centre = state.data.geom_xpos[ids] + np.einsum("gij,gj->gi", rot, aabb[:, :3])
    half = np.einsum("gij,gj->gi", np.abs(rot), aabb[:, 3:])
    return centre, half


def _tops_near(boxes, pts: np.ndarray, radius: float) -> np.ndarray:
    """Per point: the highest obstacle top within `radius` (horizontally) of it; 0 where there is none."""
    centre, half = boxes
    if len(centre) == 0:
        return np.zeros(len(pts))
    gap = np.maximum(np.abs(pts[:, None, :2] - centre[None, :, :2]) - half[None, :, :2], 0.0)
    near = np.linalg.norm(gap, axis=2) < radius
    return np.where(near, centre[None, :, 2] + half[None, :, 2], 0.0).max(axis=1)


@dataclass(frozen=True)
class Clearance:
    """What moves with the gripper: `hang` metres below the TCP, `radius` around it; `skip` are not obstacles."""

    hang: float
    radius: float
    skip: frozenset[str] = frozenset()


def _clear(boxes, a, b, c: Clearance) -> bool:
    pts = densify([a, b], spacing=0.01)
    return bool(np.all(_tops_near(boxes, pts, c.radius) + c.hang + CLEAR <= pts[:, 2] + 1e-9))


def route(run: Runner, goal, c: Clearance) -> list[np.ndarray]:
    """Waypoints from the gripper target to `goal` that keep what it carries clear of every obstacle.

    The first of: straight there; diagonally to above the goal, then down; straight up, across at a safe
    height, then down. The final descent onto the goal and the initial rise are not checked: they are where
    the gripper works (a cavity, a grasp).
    """
    boxes = obstacle_boxes(run.state, set(c.skip))
    here, goal = run.pose()[0], np.asarray(goal, dtype=np.float64)
    line = densify([here, goal], spacing=0.01)
    cruise = max(goal[2], float(_tops_near(boxes, line, c.radius).max()) + c.hang + CLEAR)
    above = np.array([goal[0], goal[1], cruise])
    up = np.array([here[0], here[1], max(here[2], cruise)])
    if _clear(boxes, here, goal, c):
        return [goal]
    if _clear(boxes, here, above, c):
        return [above, goal]
    return [up, above, goal]


def clearance_at(run: Runner, xy, c: Clearance) -> float:
    """Lowest TCP height at `xy` that keeps what hangs below it clear of everything around."""
    pts = np.array([[xy[0], xy[1], 0.0]])
    return float(_tops_near(obstacle_boxes(run.state, set(c.skip)), pts, c.radius)[0]) + c.hang + CLEAR


def palm_floor(run: Runner, xy, quat, skip: set[str]) -> float:
    """Lowest TCP height at `xy`, turned to `quat`, with the palm (which spans the closing axis) above
    everything under it: a rim, a wall, a neighbour."""
    along = matrix_from_quat(quat)[:, 1] * np.array([1.0, 1.0, 0.0])
    hand = hand_of(run.state)
    pts = np.array([[xy[0], xy[1], 0.0] + along * t for t in (-hand.palm_span, 0.0, hand.palm_span)])
    top = float(_tops_near(obstacle_boxes(run.state, skip), pts, hand.palm_radius + 0.005).max())
    return top - hand.palm_bottom + 0.005


def finger_top(state: h.SceneState, xy, yaw: float, half_opening: float, skip: set[str]) -> float:
    """Highest obstacle top under the two finger pads of a gripper at `xy` turned to `yaw`, opened to
    `half_opening`: what the fingers would land on when descending there."""
    along = np.array([-math.sin(yaw), math.cos(yaw), 0.0])  # the closing axis (body y)
    pad = hand_of(state).finger_pad
    reach = half_opening + pad[1]
    pts = np.array([[xy[0], xy[1], 0.0] + along * s * reach for s in (-1.0, 1.0)])
    return float(_tops_near(obstacle_boxes(state, skip), pts, pad[0]).max())


def palm_top(state: h.SceneState, xy, yaw: float, skip: set[str]) -> float:
    """Highest obstacle top under the palm of a hand at `xy` turned to `yaw` (the palm spans the closing axis)."""
    along = np.array([-math.sin(yaw), math.cos(yaw), 0.0])
    hand = hand_of(state)
    pts = np.array([[xy[0], xy[1], 0.0] + along * t for t in (-hand.palm_span, 0.0, hand.palm_span)])
    return float(_tops_near(obstacle_boxes(state, skip), pts, hand.palm_radius).max())


# --- straight-line motions (no obstacle avoidance) --------------------------------------------------
# A plain pick-and-place controller that carries objects low and straight. It stands in for a policy that has not
# learned to go around things: pick the object from above, lift it CARRY metres, carry it in a straight line at
# that height, lower it into/onto the destination, let go. The labelled critic benchmark
# (`sim.engine.planted`) uses it where the scripted planner would simply fly over an obstacle.

CARRY = 0.10
"""lift of the object's bottom above where it started, metres"""
CRUISE_Z = 0.30


def _straight_move(env, pos, quat, grip: float, tol: float = 0.01, max_steps: int = 20) -> bool:
    pos = np.asarray(pos, dtype=np.float64)
    for _ in range(max_steps):
        tp, tq = env.target_pose()
        drot = rot_delta(quat, tq)
        n = float(np.linalg.norm(drot))
        if n > MAX_DROT:
            drot *= MAX_DROT / n
        _, _, term, trunc, _ = env.step(np.concatenate([np.clip(pos - tp, -MAX_DPOS, MAX_DPOS), drot, [grip]]))
        if term or trunc:
            return False
        if np.linalg.norm(h.gripper_position(env.state) - pos) < tol and n < 0.05:
            return True
    return True


def _straight_hold(env, grip: float, steps: int) -> None:
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(np.array([0, 0, 0, 0, 0, 0, grip], dtype=np.float64))
        if term or trunc:
            return


def destination(state, op: str, dest: str) -> tuple[np.ndarray, float]:
    """(xy, floor height) where an object put `op` (inside / on / stacked) `dest` should come to rest."""
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
    q = yaw_quat((yaw + math.pi / 2) % math.pi - math.pi / 2)
    _straight_move(env, [centre[0], centre[1], CRUISE_Z], q, OPEN, tol=0.03)
    _straight_move(env, [centre[0], centre[1], z], q, OPEN, tol=0.008)
    _straight_hold(env, CLOSE, 3)
    carry_z = z + CARRY
    _straight_move(env, [centre[0], centre[1], carry_z], q, CLOSE, tol=0.02)
    xy, floor = destination(st, op, dest)
    _straight_move(env, [xy[0], xy[1], carry_z], q, CLOSE, tol=0.02, max_steps=25)
    hang = float(h.gripper_position(st)[2] - h.bottom_z(st, obj))
    _straight_move(env, [xy[0], xy[1], floor + hang + 0.012], q, CLOSE, tol=0.01)
    _straight_hold(env, OPEN, 3)
    _straight_move(env, [xy[0], xy[1], CRUISE_Z], q, OPEN, tol=0.03)
