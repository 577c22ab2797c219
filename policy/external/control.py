"""How this project's 7-D action drives an external arm's operational-space controller (numpy only).

This project's action (`sim.constants.ACTION_DIM`) is, per 10 Hz control step: dpos (metres, world axes, each
clipped to ±MAX_DPOS), drot (axis-angle radians, world axes, norm clipped to MAX_DROT, applied on the left of the
target orientation) and a gripper command in [-1 open, +1 closed]. This project's env accumulates the deltas into
a *target* pose that stays within TARGET_LEASH of the gripper and pulls the gripper to it through a stiff weld.

`TargetTracker` reproduces exactly that target, and `osc_delta` turns the remaining error into one delta command of
an operational-space controller of the "delta" kind (robosuite's OSC_POSE: input in [-1, 1] scaled by `output_max`,
expressed in the controller's reference frame) at each of the external controller's steps within the 10 Hz step:

    a_pos = clip(gain * R_ref^T (target_pos - tcp_pos) / out_max_pos, -1, 1)
    a_rot = clip(gain * R_ref^T log(R_target R_tcp^T) / out_max_rot, -1, 1)

`open_loop_delta` is the plain alternative (each external step gets 1/k of the 10 Hz delta, scaled the same way):
it leaves the arm lagging behind what the policy asked for, because an OSC of the delta kind moves only a fraction
of the commanded delta per step. Both are measured in docs/EXTERNAL.md.

The worker of an external suite imports this file from its own virtualenv, so it needs nothing but numpy.
"""

from __future__ import annotations

import numpy as np


def quat_from_mat(R: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z), w >= 0, of a rotation matrix (MuJoCo's convention, as `d.xquat`)."""
    R = np.asarray(R, dtype=np.float64).reshape(3, 3)
    t = np.trace(R)
    if t > 0:
        s = 2.0 * np.sqrt(t + 1.0)
        q = np.array([0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s])
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(max(1.0 + R[i, i] - R[j, j] - R[k, k], 1e-12))
        q = np.empty(4)
        q[0] = (R[k, j] - R[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (R[j, i] + R[i, j]) / s
        q[1 + k] = (R[k, i] + R[i, k]) / s
    q /= np.linalg.norm(q)
    return q if q[0] >= 0 else -q


def mat_from_quat(q: np.ndarray) -> np.ndarray:
    w, x, y, z = np.asarray(q, dtype=np.float64) / np.linalg.norm(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def mat_from_axis_angle(v: np.ndarray) -> np.ndarray:
    """Rotation matrix of an axis-angle vector (Rodrigues)."""
    v = np.asarray(v, dtype=np.float64)
    angle = float(np.linalg.norm(v))
    if angle < 1e-12:
        return np.eye(3)
    k = v / angle
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * (K @ K)


SYMMETRIES = ("box", "cylinder")
"""shapes whose orientation about their own z axis is defined only up to a turn: a box's by quarter turns, an
upright cylinder's by any turn"""


def symmetric_turn(quat, symmetry: str | None) -> float:
    """The turn (rad) about an object's own z axis, one its shape cannot tell apart from no turn, that brings its
    heading (the body x axis's direction in the world's xy plane) nearest zero: the orientation this project's
    scenes give such objects (headings within ±0.6 rad). 0 for objects without a symmetry."""
    if symmetry is None:
        return 0.0
    if symmetry not in SYMMETRIES:
        raise ValueError(f"unknown symmetry {symmetry!r}; valid: {', '.join(SYMMETRIES)} or None")
    R = mat_from_quat(quat)
    heading = float(np.arctan2(R[1, 0], R[0, 0]))
    if symmetry == "cylinder":
        return -heading
    return -(np.pi / 2) * round(heading / (np.pi / 2))


def turned_about_z(quat, angle: float) -> np.ndarray:
    """The orientation `quat` (w, x, y, z) turned by `angle` about its own z axis (w >= 0)."""
    w, x, y, z = np.asarray(quat, dtype=np.float64)
    c, s = np.cos(angle / 2), np.sin(angle / 2)
    q = np.array([w * c - z * s, x * c + y * s, y * c - x * s, z * c + w * s])
    q /= np.linalg.norm(q)
    return q if q[0] >= 0 else -q


def axis_angle_from_mat(R: np.ndarray) -> np.ndarray:
    """Axis-angle vector (angle in [0, pi]) of a rotation matrix."""
    q = quat_from_mat(R)
    s = float(np.linalg.norm(q[1:]))
    if s < 1e-12:
        return np.zeros(3)
    angle = 2.0 * np.arctan2(s, q[0])
    return q[1:] / s * angle


class TargetTracker:
    """The target pose of this project's env (`sim.env.CodaEnv._apply`), in the external simulator's world frame.

    Positions are the tool centre point's; orientations are rotation matrices of the external TCP frame (the
    project's gripper frame differs by a constant rotation, which left-multiplied world deltas leave unchanged)."""

    def __init__(self, pos, mat, max_dpos: float, max_drot: float, leash: float,
                 low=(-np.inf,) * 3, high=(np.inf,) * 3, rot_leash: float | None = None):
        self.pos = np.array(pos, dtype=np.float64)
        self.mat = np.array(mat, dtype=np.float64).reshape(3, 3)
        self.max_dpos, self.max_drot, self.leash = float(max_dpos), float(max_drot), float(leash)
        self.low, self.high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
        self.rot_leash = None if rot_leash is None else float(rot_leash)
        """with it, the target orientation stays within this angle (rad) of the TCP's, as the position stays
        within `leash`: an arm that turns slower than the target cannot let it run ahead (None: no bound, as
        this project's env, whose weld keeps up)"""

    def apply(self, action, tcp_pos, tcp_mat=None) -> float:
        """Move the target by one 10 Hz action (world axes); returns the gripper command in [-1, 1]. `tcp_mat`:
        the TCP's orientation, needed with `rot_leash`."""
        a = np.asarray(action, dtype=np.float64)
        target = self.pos + np.clip(a[:3], -self.max_dpos, self.max_dpos)
        target = np.clip(target, tcp_pos - self.leash, tcp_pos + self.leash)
        self.pos = np.clip(target, self.low, self.high)
        rot = a[3:6]
        angle = float(np.linalg.norm(rot))
        if angle > 1e-9:
            if angle > self.max_drot:
                rot = rot * (self.max_drot / angle)
            self.mat = mat_from_axis_angle(rot) @ self.mat
        if self.rot_leash is not None and tcp_mat is not None:
            tcp = np.asarray(tcp_mat, dtype=np.float64).reshape(3, 3)
            lead = axis_angle_from_mat(self.mat @ tcp.T)
            angle = float(np.linalg.norm(lead))
            if angle > self.rot_leash:
                self.mat = mat_from_axis_angle(lead * (self.rot_leash / angle)) @ tcp
        return float(np.clip(a[6], -1.0, 1.0))


def gripper_toward(command: float, current: float, speed: float, open_m: float, squeeze_m: float,
                   span: float) -> float:
    """The command to send a gripper that integrates the sign of what it is sent (robosuite's Panda gripper: its
    own command `current` in [-1 open, 1 closed] moves `speed` per control step towards the sign) so that it
    follows this project's command as a finger target, as this simulator's fingers do: this project's command
    means a half opening of each finger (`open_m` at -1, `squeeze_m` at 1, metres), the external gripper's
    command a half opening from `span` (at -1) to 0 (at 1). Returns -1, 0 (hold: within half a step) or 1."""
    half = open_m + (squeeze_m - open_m) * (float(np.clip(command, -1.0, 1.0)) + 1.0) / 2.0
    want = float(np.clip(1.0 - 2.0 * half / span, -1.0, 1.0))
    return 0.0 if abs(want - current) < speed / 2 else float(np.sign(want - current))


def osc_delta(target_pos, target_mat, tcp_pos, tcp_mat, ref_mat, out_max, gain=1.0) -> np.ndarray:
    """One delta command (6,) in [-1, 1] of an OSC whose input is expressed in the frame `ref_mat` (world → ref
    rotation is ref_mat^T) and scaled by `out_max` (6,: metres, radians per unit input); `gain`: one number, or
    six (position, then rotation)."""
    ref = np.asarray(ref_mat, dtype=np.float64).reshape(3, 3)
    out_max = np.asarray(out_max, dtype=np.float64)
    e_pos = ref.T @ (np.asarray(target_pos) - np.asarray(tcp_pos))
    e_rot = ref.T @ axis_angle_from_mat(np.asarray(target_mat).reshape(3, 3) @ np.asarray(tcp_mat).reshape(3, 3).T)
    return np.clip(np.asarray(gain, dtype=np.float64) * np.concatenate([e_pos, e_rot]) / out_max, -1.0, 1.0)


def open_loop_delta(action, steps_per_action: int, ref_mat, out_max, max_dpos: float, max_drot: float
                    ) -> np.ndarray:
    """The delta command (6,) for each of the `steps_per_action` external steps of one 10 Hz action: the action's
    clipped delta split evenly, in the controller's frame and units."""
    ref = np.asarray(ref_mat, dtype=np.float64).reshape(3, 3)
    a = np.asarray(action, dtype=np.float64)
    dpos = np.clip(a[:3], -max_dpos, max_dpos)
    rot = a[3:6]
    angle = float(np.linalg.norm(rot))
    if angle > max_drot:
        rot = rot * (max_drot / angle)
    delta = np.concatenate([ref.T @ dpos, ref.T @ rot]) / steps_per_action
    return np.clip(delta / np.asarray(out_max, dtype=np.float64), -1.0, 1.0)


def gripper_frame(geometry: dict, tcp_mat: np.ndarray) -> np.ndarray:
    """The constant rotation from an external gripper's TCP frame to this project's gripper frame (a signed
    permutation): z away from the fingers, y along the closing axis, x = y × z; of ±y, the one that gives the
    start pose an x axis pointing forward (+x of this project's world, in which `tcp_mat` is expressed).

    `geometry`: the hand body and the two fingers relative to the TCP, in the TCP frame ("hand", "left_finger",
    "right_finger")."""
    def snap(v):
        i = int(np.argmax(np.abs(v)))
        out = np.zeros(3)
        out[i] = np.sign(v[i])
        return out

    z = snap(np.asarray(geometry["hand"], dtype=np.float64))
    y = snap(np.asarray(geometry["left_finger"]) - np.asarray(geometry["right_finger"]))
    x = np.cross(y, z)
    if (np.asarray(tcp_mat).reshape(3, 3) @ x)[0] < 0:
        x, y = -x, -y
    C = np.stack([x, y, z], axis=1)
    if not np.isclose(np.linalg.det(C), 1.0):
        raise ValueError(f"gripper geometry gives no proper rotation: {C.tolist()}")
    return C
