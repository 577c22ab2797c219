"""Robots: a floating parallel-jaw gripper driven through a mocap weld (the default embodiment), and the interface
an arm sits behind (`sim.panda.PandaArm`).

The gripper body's origin is its tool centre point (TCP), between the finger pads; at the identity orientation
the fingers point down (−z) and close along the body's y axis. Every robot has a mocap body `gripper_target`
holding the commanded TCP pose: the floating gripper is welded to it, an arm tracks it by operational-space
control. A robot class declares its bodies (`add_to`) and returns a `GripperIndex` (`index`), which says how the
physics advances under that control, how the robot starts an episode and what its hand looks like
(`GripperGeometry`, what the planners plan with).
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from sim.constants import GRIPPER_HOME

FINGER_OPEN = 0.045
"""half opening (metres) of each finger when fully open: a 9 cm gap"""
FINGER_PAD = (0.012, 0.006, 0.035)
"""finger box half sizes: along x (pad width), y (thickness), z (length)"""
FINGER_Z = 0.02
"""finger box centre height above the TCP (the pads reach 1.5 cm below the TCP)"""
PALM = (0.02, 0.06, 0.012)
"""palm box half sizes: it spans the closing axis (body y)"""
PALM_Z = FINGER_Z + FINGER_PAD[2] + PALM[2]
"""palm centre height above the TCP (its underside is 5.5 cm above the TCP)"""
FINGER_SQUEEZE = -0.012
"""finger target when fully closed: past the centre, so even thin handles are squeezed with the full force"""
GRIP_KP = 1500.0
GRIP_FORCE = 20.0
FINGER_DAMPING = 80.0
"""finger joint damping (N s/m): caps the closing speed at GRIP_FORCE / FINGER_DAMPING (0.25 m/s), so the pads
meet an object instead of slamming into it (fast pads pierce the soft contacts and squeeze light objects out)"""
WELD_TIMECONST = 0.02
"""time constant (s) of the weld pulling the gripper to its mocap target: the 10 Hz target steps are smoothed
over a few substeps instead of jerking the gripper (and whatever it holds) to each new target"""


@dataclass(frozen=True)
class GripperGeometry:
    """What the planners need to know about a hand, in its TCP frame (metres)."""

    finger_open: float
    """half opening of each finger when fully open"""
    finger_squeeze: float
    """finger target when fully closed"""
    finger_pad: tuple[float, float, float]
    """half sizes of a finger: along x (width), y (thickness, along the closing axis), z (length)"""
    pad_reach: float
    """how far the fingers reach below the TCP"""
    palm_radius: float
    """half width of the palm across the closing axis"""
    palm_span: float
    """how far along the closing axis (each side) the palm must clear what is under it"""
    palm_bottom: float
    """height of the palm's underside above the TCP"""
    sweep_radius: float
    """half width of the corridor the open hand sweeps"""

    def finger_target(self, command: float) -> float:
        """Finger position target for a gripper command in [-1 (open), 1 (closed)]."""
        return self.finger_open + (self.finger_squeeze - self.finger_open) * (command + 1.0) / 2.0

    def command(self, half_opening: float) -> float:
        """The gripper command whose finger target is `half_opening` (unclipped)."""
        return 2 * (half_opening - self.finger_open) / (self.finger_squeeze - self.finger_open) - 1


GRIPPER_GEOMETRY = GripperGeometry(
    finger_open=FINGER_OPEN,
    finger_squeeze=FINGER_SQUEEZE,
    finger_pad=FINGER_PAD,
    pad_reach=0.015,
    palm_radius=PALM[0],
    palm_span=0.04,
    palm_bottom=PALM_Z - PALM[2],
    sweep_radius=0.06,  # open fingers and palm span ±5.7 cm and ±6 cm
)


@dataclass
class GripperIndex:
    body: int
    mocap: int
    fingers: tuple[int, int]
    finger_qpos: tuple[int, int]
    finger_geoms: tuple[np.ndarray, np.ndarray]
    actuators: tuple[int, int]
    geoms: np.ndarray
    """every geom of the gripper (palm and fingers)"""
    free_qpos: int
    """the floating gripper's free joint (-1 for an arm)"""
    free_dof: int
    geometry: GripperGeometry = GRIPPER_GEOMETRY
    arm: object | None = None
    """the arm's controller (`sim.panda.ArmControl`), None for the floating gripper"""

    def finger_target(self, command: float) -> float:
        """Finger position target for a gripper command in [-1 (open), 1 (closed)]."""
        return self.geometry.finger_target(command)

    def advance(self, model: mujoco.MjModel, data: mujoco.MjData, nstep: int) -> None:
        """Run `nstep` physics steps under this robot's control of the `gripper_target` pose."""
        if self.arm is None:
            mujoco.mj_step(model, data, nstep=nstep)
        else:
            self.arm.advance(model, data, self.mocap, nstep)

    def velocity(self, model: mujoco.MjModel, data: mujoco.MjData) -> np.ndarray:
        """Linear velocity of the TCP (world frame)."""
        if self.arm is None:
            return data.qvel[self.free_dof : self.free_dof + 3]
        return self.arm.tcp_velocity(model, data)

    def place(self, model: mujoco.MjModel, data: mujoco.MjData, pos: np.ndarray,
              quat: np.ndarray = (1.0, 0.0, 0.0, 0.0)) -> None:
        """Put the hand at `pos` turned by `quat` (identity: fingers down), the start of an episode; positions
        only, no forward pass. ValueError when an arm cannot reach the pose."""
        if self.arm is None:
            data.qpos[self.free_qpos : self.free_qpos + 3] = pos
            data.qpos[self.free_qpos + 3 : self.free_qpos + 7] = quat
        else:
            self.arm.place(model, data, pos, quat)


def add_target(spec: mujoco.MjSpec) -> None:
    """The mocap body `gripper_target`: the commanded TCP pose every robot follows."""
    target = spec.worldbody.add_body(name="gripper_target", mocap=True, pos=list(GRIPPER_HOME))
    target.add_site(name="gripper_target", size=[0.005, 0, 0], rgba=[0, 1, 0, 0.0])


def add_finger_actuator(spec: mujoco.MjSpec, side: str, joint: str, finger_open: float) -> None:
    """The position actuator `gripper/<side>` of a finger's slide joint (targets from squeezed to `finger_open`)."""
    spec.add_actuator(
        name=f"gripper/{side}",
        target=joint,
        trntype=mujoco.mjtTrn.mjTRN_JOINT,
        gainprm=[GRIP_KP] + [0] * 9,
        biasprm=[0, -GRIP_KP, 0] + [0] * 7,
        biastype=mujoco.mjtBias.mjBIAS_AFFINE,
        ctrlrange=[FINGER_SQUEEZE, finger_open],
        ctrllimited=1,
        forcerange=[-GRIP_FORCE, GRIP_FORCE],
        forcelimited=1,
    )


class FloatingGripper:
    """Parallel-jaw gripper welded to a mocap target; actions move the target."""

    name = "gripper"

    def add_to(self, spec: mujoco.MjSpec) -> None:
        wb = spec.worldbody
        add_target(spec)
        body = wb.add_body(name="gripper", pos=list(GRIPPER_HOME), gravcomp=1.0)
        body.add_freejoint(name="gripper/free")
        body.add_geom(
            name="gripper/palm",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=list(PALM),
            pos=[0, 0, PALM_Z],
            rgba=[0.25, 0.25, 0.28, 1],
            mass=0.3,
        )
        body.add_geom(
            name="gripper/wrist",
            type=mujoco.mjtGeom.mjGEOM_CYLINDER,
            size=[0.02, 0.03],
            pos=[0, 0, FINGER_Z + FINGER_PAD[2] + 0.054],
            rgba=[0.3, 0.3, 0.33, 1],
            mass=0.1,
        )
        body.add_site(name="gripper/tcp", size=[0.004, 0, 0], rgba=[1, 0, 0, 0])
        body.add_camera(name="wrist", pos=[0.0, 0.0, 0.12], fovy=75)
        for side, sign in (("left", 1.0), ("right", -1.0)):
            finger = body.add_body(name=f"gripper/{side}", gravcomp=1.0)
            finger.add_joint(
                name=f"gripper/{side}",
                type=mujoco.mjtJoint.mjJNT_SLIDE,
                axis=[0, sign, 0],
                range=[0.0, FINGER_OPEN],
                damping=FINGER_DAMPING,
                armature=0.01,
            )
            finger.add_geom(
                name=f"gripper/{side}_pad",
                type=mujoco.mjtGeom.mjGEOM_BOX,
                size=list(FINGER_PAD),
                pos=[0, sign * FINGER_PAD[1], FINGER_Z],
                rgba=[0.8, 0.8, 0.85, 1],
                mass=0.05,
                friction=[1.5, 0.05, 0.001],
                condim=4,
                solref=[0.01, 1],
            )
            add_finger_actuator(spec, side, f"gripper/{side}", FINGER_OPEN)
        spec.add_equality(
            type=mujoco.mjtEq.mjEQ_WELD,
            name1="gripper_target",
            name2="gripper",
            objtype=mujoco.mjtObj.mjOBJ_BODY,
            solref=[WELD_TIMECONST, 1.0],
            data=[0.0] * 3 + [0.0] * 3 + [1.0, 0.0, 0.0, 0.0] + [1.0, 0.0],
        )

    def index(self, model: mujoco.MjModel) -> GripperIndex:
        def bid(n):
            return mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, n)

        body, left, right = bid("gripper"), bid("gripper/left"), bid("gripper/right")
        jl = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "gripper/left")
        jr = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "gripper/right")
        jf = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "gripper/free")
        geoms = np.flatnonzero(np.isin(model.geom_bodyid, [body, left, right]))
        return GripperIndex(
            body=body,
            mocap=int(model.body_mocapid[bid("gripper_target")]),
            fingers=(left, right),
            finger_qpos=(int(model.jnt_qposadr[jl]), int(model.jnt_qposadr[jr])),
            finger_geoms=(
                np.flatnonzero(model.geom_bodyid == left),
                np.flatnonzero(model.geom_bodyid == right),
            ),
            actuators=(
                mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, "gripper/left"),
                mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, "gripper/right"),
            ),
            geoms=geoms,
            free_qpos=int(model.jnt_qposadr[jf]),
            free_dof=int(model.jnt_dofadr[jf]),
        )
