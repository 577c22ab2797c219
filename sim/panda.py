"""The Franka Panda (the paper's robot): its arm and hand from the model robosuite's wheel ships, commanded in
operational space (its TCP tracks a pose target) so that the 7-D delta-pose action, the observations and the
policy stay those of the floating gripper.

    Scene("pick_place", seed=3, robot="panda")          # in a scene program
    CodaEnv(spec)                                       # spec.robot == "panda": this arm, same env API

Model: robosuite's `robots/panda/robot.xml` (links, joints, inertias, torque motors) with its
`grippers/panda_gripper.xml` on the flange, collision meshes only, read from the installed package (MIT
licensed; `scripts/setup --external` installs it) and never copied into this repository. The two finger joints
are given the same sign (positive = open) and this project's position actuators, so a gripper command means the
same finger target for both robots up to the hand's opening (4 cm per finger instead of 4.5).

Control: the env's actions move the operational-space target, the mocap body `gripper_target` (as for the
floating gripper, which is welded to it). Each control step the arm solves the target pose by damped least
squares inside its joint limits (from its current joints, the redundant direction pulled to mid-range); every
physics substep a computed-torque joint impedance (`M (kp Δq − kd q̇) + bias`) drives the joints there. A
Jacobian-transpose operational-space law (`J^T Λ (kp e − kd v)`) was measured first: it runs joints 5 and 6 into
their limits on the large wrist turns handles need (planner success prep 8/10, articulated 12/20 against 19/20
and 13/20 with this law, same scenes). The TCP frame is robosuite's `grip_site` turned to this project's
convention (fingers along −z, closing along y).
"""

from __future__ import annotations

import glob
import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np

from sim.constants import GRIPPER_HOME
from sim.robot import (
    FINGER_DAMPING,
    FINGER_SQUEEZE,
    GripperGeometry,
    GripperIndex,
    add_finger_actuator,
    add_target,
)

PANDA_BASE = (0.0, 0.0, 0.1)
"""where the arm's base stands (world): on a 10 cm mount at the table's near edge, behind the scene region
(objects at x 0.28–0.64); measured against 0.0 and other placements, see docs/EXTERNAL.md"""
PANDA_FINGER_OPEN = 0.04
"""half opening of each Panda finger (its joint range): an 8 cm gap"""
JOINT_KP = 400.0
"""joint impedance stiffness (1/s², mass-matrix scaled, critically damped) towards the inverse-kinematics goal"""
LIMIT_MARGIN = 0.02
"""radians the inverse kinematics keeps off each joint limit"""
MID_PULL = 0.05
"""weight of the pull towards mid-range in the redundant direction"""
ARM_JOINTS = tuple(f"joint{i}" for i in range(1, 8))
HOME_SEED = np.array([0.0, -0.25, 0.0, -2.44, 0.0, 2.19, 0.785])
"""elbow up, hand down: where the home posture's inverse kinematics starts"""
PANDA_GEOMETRY = GripperGeometry(
    finger_open=PANDA_FINGER_OPEN,
    finger_squeeze=FINGER_SQUEEZE,
    finger_pad=(0.0105, 0.0133, 0.027),  # the finger meshes: 2.1 cm wide, 2.65 cm thick, 5.4 cm long
    pad_reach=0.01,  # finger tips 9 mm below the TCP
    palm_radius=0.032,
    palm_span=0.09,  # the hand spans ±10 cm along the closing axis
    palm_bottom=0.031,
    sweep_radius=0.10,
)
_TCP_IN_EEF = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])
"""TCP axes (columns) in robosuite's eef frame: y along the fingers' slide, z back along the fingers"""

ASSETS_ENV = "CODA_PANDA_ASSETS"


class PandaUnavailable(RuntimeError):
    """The Panda model (robosuite's package data) is not installed."""


def assets_dir() -> Path:
    """robosuite's `models/assets` folder: from $CODA_PANDA_ASSETS, this interpreter's robosuite, or the
    external environment `scripts/setup --external` builds beside the checkout. Does not import robosuite."""
    candidates = []
    if os.environ.get(ASSETS_ENV):
        candidates.append(Path(os.environ[ASSETS_ENV]))
    spec = importlib.util.find_spec("robosuite")
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(p) / "models" / "assets" for p in spec.submodule_search_locations]
    root = Path(__file__).resolve().parent.parent
    candidates += [Path(p) for p in sorted(glob.glob(str(root / ".venv-external/lib/python*/site-packages/robosuite/models/assets")))]
    for c in candidates:
        if (c / "robots" / "panda" / "robot.xml").is_file() and (c / "grippers" / "panda_gripper.xml").is_file():
            return c
    raise PandaUnavailable(
        "robot 'panda' needs the Panda model shipped in robosuite's wheel: run `scripts/setup --external` "
        f"(or set {ASSETS_ENV} to a robosuite models/assets folder)"
    )


_LOADED: dict[Path, mujoco.MjSpec] = {}


def _load(path: Path) -> mujoco.MjSpec:
    """A fresh copy of one of robosuite's model files, collision geometry only (read and pruned once per process)."""
    if path not in _LOADED:
        _LOADED[path] = _read(path)
    return _LOADED[path].copy()


def _read(path: Path) -> mujoco.MjSpec:
    """One of robosuite's model files, collision geometry only (the visual meshes are 35 MB to parse)."""
    s = mujoco.MjSpec.from_file(str(path))
    for m in s.meshes:
        m.file = str(path.parent / m.file)
    for g in list(s.geoms):
        if g.type == mujoco.mjtGeom.mjGEOM_MESH and "vis" in g.meshname:
            s.delete(g)
    for m in list(s.meshes):
        if "vis" in m.name:
            s.delete(m)
    for a in list(s.actuators):
        if "finger" in a.name:
            s.delete(a)
    for c in list(s.cameras):
        s.delete(c)
    return s


@dataclass
class _Scratch:
    model: mujoco.MjModel
    data: mujoco.MjData


@dataclass
class ArmControl:
    """The arm's TCP tracking the mocap target (inverse kinematics + joint impedance), and its start pose."""

    tcp: int
    qpos: np.ndarray
    """qpos addresses of the seven arm joints"""
    dof: np.ndarray
    actuators: np.ndarray
    home_q: np.ndarray = field(default_factory=lambda: np.zeros(7))
    _jp: np.ndarray | None = None
    _jr: np.ndarray | None = None
    _scratch: _Scratch | None = None

    def _error(self, data, pos, quat) -> np.ndarray:
        err = np.empty(6)
        err[:3] = pos - data.xpos[self.tcp]
        inv, dq = np.empty(4), np.empty(4)
        mujoco.mju_negQuat(inv, data.xquat[self.tcp])
        mujoco.mju_mulQuat(dq, quat, inv)
        if dq[0] < 0:
            dq = -dq
        mujoco.mju_quat2Vel(err[3:], dq, 1.0)
        return err

    def _jacobian(self, model, data) -> np.ndarray:
        if self._jp is None or self._jp.shape[1] != model.nv:
            self._jp, self._jr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
        mujoco.mj_jacBody(model, data, self._jp, self._jr, self.tcp)
        return np.vstack([self._jp[:, self.dof], self._jr[:, self.dof]])

    def _ik(self, model, data, q, pos, quat, iters: int) -> tuple[np.ndarray, bool]:
        """Damped least squares from joints `q` towards the TCP pose (pos, quat), inside the joint limits (with a
        margin), the redundant direction pulled towards mid-range; on a scratch copy of `data`. Returns the
        joints and whether they reach the pose."""
        if self._scratch is None or self._scratch.model is not model:
            self._scratch = _Scratch(model, mujoco.MjData(model))
        d = self._scratch.data
        d.qpos[:] = data.qpos
        lo, hi = model.jnt_range[model.dof_jntid[self.dof]].T
        lo, hi = lo + LIMIT_MARGIN, hi - LIMIT_MARGIN
        q = np.clip(q, lo, hi)
        mid, span2 = (lo + hi) / 2, (hi - lo) ** 2
        for _ in range(iters):
            d.qpos[self.qpos] = q
            mujoco.mj_kinematics(model, d)
            mujoco.mj_comPos(model, d)
            e = self._error(d, pos, quat)
            if np.linalg.norm(e[:3]) < 1e-4 and np.linalg.norm(e[3:]) < 1e-3:
                return q, True
            J = self._jacobian(model, d)
            step = J.T @ np.linalg.solve(J @ J.T + 1e-3 * np.eye(6), e)
            step += (np.eye(len(q)) - np.linalg.pinv(J, rcond=1e-3) @ J) @ (MID_PULL * (mid - q) / span2)
            q = np.clip(q + step, lo, hi)
        return q, False

    def advance(self, model, data, mocap: int, nstep: int) -> None:
        """`nstep` physics steps tracking the mocap pose: joint goals by inverse kinematics once per call (a
        control step), computed-torque joint impedance towards them every substep."""
        goal, _ = self._ik(model, data, data.qpos[self.qpos], data.mocap_pos[mocap], data.mocap_quat[mocap], 30)
        acc, force = np.zeros(model.nv), np.zeros(model.nv)
        kd = 2 * np.sqrt(JOINT_KP)
        for _ in range(nstep):
            mujoco.mj_step1(model, data)  # mass matrix and bias forces of the current state, not the last substep's
            acc[self.dof] = JOINT_KP * (goal - data.qpos[self.qpos]) - kd * data.qvel[self.dof]
            mujoco.mj_mulM(model, data, force, acc)  # the arm is its own kinematic tree: M is block-diagonal
            data.ctrl[self.actuators] = force[self.dof] + data.qfrc_bias[self.dof]
            mujoco.mj_step2(model, data)

    def tcp_velocity(self, model, data) -> np.ndarray:
        return self._jacobian(model, data)[:3] @ data.qvel[self.dof]

    def reach_cost(self, model, data, pos, quat) -> float:
        """Joint-space distance from the current joints to a pose the arm can take (inf when it cannot)."""
        q, ok = self._ik(model, data, data.qpos[self.qpos], np.asarray(pos, dtype=np.float64),
                         np.asarray(quat, dtype=np.float64), 100)
        return float(np.linalg.norm(q - data.qpos[self.qpos])) if ok else float("inf")

    def solve(self, model, data, pos, quat=(1.0, 0.0, 0.0, 0.0), start=None) -> np.ndarray:
        """Joint angles putting the TCP at (pos, quat), from `start` (default: the home posture); ValueError
        when the pose is out of reach."""
        q, ok = self._ik(model, data, self.home_q if start is None else start, np.asarray(pos, dtype=np.float64),
                         np.asarray(quat, dtype=np.float64), 200)
        if not ok:
            raise ValueError(f"the Panda cannot put its hand at {np.round(pos, 3).tolist()}: out of reach")
        return q

    def place(self, model, data, pos, quat=(1.0, 0.0, 0.0, 0.0)) -> None:
        data.qpos[self.qpos] = self.solve(model, data, pos, quat)
        data.qvel[self.dof] = 0.0


class PandaArm:
    """The Franka Panda on the table's near edge; actions move its TCP target like the floating gripper's."""

    name = "panda"

    def add_to(self, spec: mujoco.MjSpec) -> None:
        root = assets_dir()
        arm = _load(root / "robots" / "panda" / "robot.xml")
        hand = _load(root / "grippers" / "panda_gripper.xml")
        right = hand.joint("finger_joint2")
        right.axis, right.range = [0, -1, 0], [0.0, PANDA_FINGER_OPEN]
        for j in ("finger_joint1", "finger_joint2"):
            hand.joint(j).damping = [FINGER_DAMPING, 0.0, 0.0]
        q = np.empty(4)
        mujoco.mju_mat2Quat(q, _TCP_IN_EEF.flatten())
        tcp = hand.body("eef").add_body(name="tcp", quat=q.tolist())
        tcp.add_site(name="tcp", size=[0.004, 0, 0], rgba=[1, 0, 0, 0])
        tcp.add_camera(name="wrist", pos=[0.0, 0.0, 0.12], fovy=75)
        arm.body("right_hand").add_frame().attach_body(hand.body("right_gripper"), "hand/", "")
        add_target(spec)
        spec.worldbody.add_frame(pos=list(PANDA_BASE)).attach_body(arm.body("base"), "panda/", "")
        for side, joint in (("left", "finger_joint1"), ("right", "finger_joint2")):
            add_finger_actuator(spec, side, f"panda/hand/{joint}", PANDA_FINGER_OPEN)

    def index(self, model: mujoco.MjModel) -> GripperIndex:
        def nid(kind, n):
            return mujoco.mj_name2id(model, kind, n)

        body = nid(mujoco.mjtObj.mjOBJ_BODY, "panda/hand/tcp")
        left = nid(mujoco.mjtObj.mjOBJ_BODY, "panda/hand/leftfinger")
        right = nid(mujoco.mjtObj.mjOBJ_BODY, "panda/hand/rightfinger")
        joints = [nid(mujoco.mjtObj.mjOBJ_JOINT, f"panda/{j}") for j in ARM_JOINTS]
        jl = nid(mujoco.mjtObj.mjOBJ_JOINT, "panda/hand/finger_joint1")
        jr = nid(mujoco.mjtObj.mjOBJ_JOINT, "panda/hand/finger_joint2")
        robot_bodies = [b for b in range(model.nbody)
                        if (mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b) or "").startswith("panda/")]

        def in_subtree(b, top):
            while b > 0:
                if b == top:
                    return True
                b = model.body_parentid[b]
            return False

        arm = ArmControl(
            tcp=body,
            qpos=model.jnt_qposadr[joints].astype(np.int64),
            dof=model.jnt_dofadr[joints].astype(np.int64),
            actuators=np.array([nid(mujoco.mjtObj.mjOBJ_ACTUATOR, f"panda/torq_j{i}") for i in range(1, 8)]),
        )
        arm.home_q = arm.solve(model, mujoco.MjData(model), np.asarray(GRIPPER_HOME, dtype=np.float64), start=HOME_SEED)
        return GripperIndex(
            body=body,
            mocap=int(model.body_mocapid[nid(mujoco.mjtObj.mjOBJ_BODY, "gripper_target")]),
            fingers=(left, right),
            finger_qpos=(int(model.jnt_qposadr[jl]), int(model.jnt_qposadr[jr])),
            finger_geoms=(
                np.flatnonzero([in_subtree(b, left) for b in model.geom_bodyid]),
                np.flatnonzero([in_subtree(b, right) for b in model.geom_bodyid]),
            ),
            actuators=(nid(mujoco.mjtObj.mjOBJ_ACTUATOR, "gripper/left"), nid(mujoco.mjtObj.mjOBJ_ACTUATOR, "gripper/right")),
            geoms=np.flatnonzero(np.isin(model.geom_bodyid, robot_bodies)),
            free_qpos=-1,
            free_dof=-1,
            geometry=PANDA_GEOMETRY,
            arm=arm,
        )
