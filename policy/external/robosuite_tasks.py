"""robosuite (Panda, OSC_POSE) as an external benchmark: Lift, Stack, PickPlaceCan, Door.

Frames. robosuite's world has the table top at z ≈ 0.8 and the robot base behind the table (x ≈ -0.56). This
project's world has the table at z = 0 and objects in front of an origin under the gripper's home (the floating
gripper starts at GRIPPER_HOME = (0.45, 0, 0.30)). The adapter maps positions by a translation only,

    p_project = p_robosuite - (base_x, base_y, table_z)

(robot base under the origin, table top at z = 0), so world axes, velocities and rotation deltas are the same in
both, and the Panda's start pose lands near this project's home ((0.46, 0, 0.22) on Lift). The gripper's frame is
robosuite's grip site (between the fingertips) rotated by a constant signed permutation `tcp_to_gripper`: this
project's gripper points its fingers along -z and closes along y, robosuite's grip site points its fingers along
+z and closes along x; of the two choices (the jaw is symmetric), the one that makes the start pose close to the
identity orientation (as this project's home) is taken.

Actions. Each 10 Hz action moves a target exactly as this project's env does (`policy.external.control`), and at
robosuite's 20 Hz control rate the k = 2 OSC steps per action each command `gain * error / output_max` toward it
(OSC_POSE's default output_max: 0.05 m, 0.5 rad per unit input; input frame: the robot base, axis-aligned with the
world in these tasks); `rot_gain` gives the rotation its own gain (a gentler turn disturbs the TCP's position
less: docs/EXTERNAL.md, "Action mapping"). The gripper command passes through unchanged: -1 opens, +1 closes in both.

Observation. Object tokens (sim.constants.OBJ_FEATURES) from robosuite's MuJoCo state: the centre of the
object's collision-geom box and its body orientation (quaternion w, x, y, z with w >= 0), its free joint's
velocity (MuJoCo's qvel: linear in the world frame, angular in the body frame, as this project's tokens), the box's
half extents, its position relative to the grip site, the door's opening (hinge angle over its range), the role
and the nearest category of this project's asset pool. Success is robosuite's own `env._check_success()`, read after every 20 Hz
step; the episode ends when it first holds (as this project's env ends on its success predicate). Every executed
action's raw state (robosuite's frame, with the fingers' contacts) also feeds a `phases.PhaseTracker`
(`phase_report()`) for the failure analysis.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from policy.external.base import (
    SETUP_HINT,
    ExternalUnavailable,
    WorkerAdapter,
    WorkerProcess,
    check_chunk,
    external_venv,
)
from sim.constants import (
    ACTION_DIM,
    CHUNK,
    CONTROL_HZ,
    MAX_DPOS,
    MAX_DROT,
    MAX_OBJECTS,
    OBJ_DIM,
    OBS_PROPRIO,
    PROPRIO_DIM,
    ROLES,
)
from sim.robot import GRIPPER_GEOMETRY

WORKER = Path(__file__).with_name("robosuite_worker.py")
TARGET_LEASH = 0.08
"""as `sim.env.TARGET_LEASH` (the target never runs further than this from the gripper, metres)"""


@dataclass(frozen=True)
class ExternalObject:
    """One object token: which robosuite body (and site / joints) it is read from, and what it is here."""

    name: str
    body: str
    role: str
    category: str
    """a category of this project's asset pool (`sim.assets.categories()`)"""
    free_joint: str | None = None
    site: str | None = None
    """read the position from this site (a door's handle) instead of the collision box's centre"""
    joint: str | None = None
    """the articulation joint whose opening (qpos over its range) is the token's `opening`"""
    bbox_body: str | None = None
    symmetry: str | None = None
    """the turns about its own z axis the shape cannot tell apart (`policy.external.control.SYMMETRIES`): with
    `RobosuiteAdapter(canonical_yaw=True)` (the default) its orientation is observed as the equivalent one nearest
    this project's headings"""


@dataclass(frozen=True)
class RobosuiteTask:
    name: str
    family: str
    instruction: str
    max_steps: int
    objects: tuple[ExternalObject, ...]
    env_kwargs: dict = field(default_factory=dict)
    description: str = ""
    phases: str = "pick"
    """the phase ladder of the failure analysis (`policy.external.phases.LADDERS`)"""
    template: str = ""
    """the task template of this project's family that states the same task (a resembling scene's task)"""


TASKS: dict[str, RobosuiteTask] = {
    t.name: t
    for t in (
        RobosuiteTask(
            "Lift", "pick_place", "pick up the block and hold it in the air", 100,
            (ExternalObject("cube", "cube_main", "target", "block", free_joint="cube_joint0", symmetry="box"),),
            description="a red cube (half size 2.0-2.2 cm) on the table; success: lifted 4 cm above the table",
            template="pp_lift",
        ),
        RobosuiteTask(
            "Stack", "stack", "stack the red block on the green block", 150,
            (ExternalObject("cubeA", "cubeA_main", "target", "block", free_joint="cubeA_joint0", symmetry="box"),
             ExternalObject("cubeB", "cubeB_main", "support", "block", free_joint="cubeB_joint0", symmetry="box")),
            description="red cube A (2 cm) and green cube B (2.5 cm); success: A on B and released",
            template="st_on",
        ),
        RobosuiteTask(
            "PickPlaceCan", "pick_place", "put the can in the bin", 150,
            (ExternalObject("can", "Can_main", "target", "can", free_joint="Can_joint0", symmetry="cylinder"),
             ExternalObject("bin", "bin2", "receptacle", "bin")),
            description="a can in the left bin; success: in its quadrant of the right bin (the token 'bin' is that "
                        "quadrant: centre and half extents from the env's target_bin_placements and bin_size)",
            template="pp_in",
        ),
        RobosuiteTask(
            "Door", "articulated", "open the door", 120,
            (ExternalObject("door", "Door_door", "articulated", "door", site="Door_handle", joint="Door_hinge"),),
            description="a hinged door with a latched handle; success: hinge angle > 0.3 rad (opening > 0.75)",
            phases="open", template="ar_open",
        ),
    )
}
BENCHMARK = "robosuite"
MAX_GAIN = 10.0
"""the largest OSC gain (`gain`, `rot_gain`) the adapter accepts"""
GRIPPER_MAPS = ("sign", "opening")
"""how the gripper command reaches robosuite's gripper: `sign` passes it on (robosuite's Panda gripper moves 0.2
per control step towards its sign: any positive command closes fully, any negative opens fully); `opening` sends
the signs that make robosuite's gripper follow the command as a finger opening, as this simulator's fingers do
(`policy.external.control.gripper_toward`), at robosuite's speed"""


def task_names() -> tuple[str, ...]:
    return tuple(TASKS)


class RobosuiteAdapter(WorkerAdapter):
    benchmark = BENCHMARK

    def __init__(self, task: str, *, render: bool = False, render_size: int = 256, camera: str = "frontview",
                 action_map: str = "target", gain: float = 2.0, max_steps: int | None = None,
                 hard_reset: bool = True, env_kwargs: dict | None = None, rot_leash: float | None = None,
                 settle: int = 0, gripper_map: str = "sign", rot_gain: float | None = None,
                 canonical_yaw: bool = True):
        if task not in TASKS:
            raise ValueError(f"unknown robosuite task {task!r}; valid tasks: {', '.join(TASKS)}")
        if action_map not in ("target", "delta"):
            raise ValueError(f"action_map must be 'target' or 'delta', got {action_map!r}")
        if gripper_map not in GRIPPER_MAPS:
            raise ValueError(f"gripper_map must be one of {', '.join(map(repr, GRIPPER_MAPS))}, got {gripper_map!r}")
        if rot_leash is not None and not 0 < float(rot_leash) <= np.pi:
            raise ValueError(f"rot_leash must be an angle in (0, pi] radians or None, got {rot_leash!r}")
        if not 0 < float(gain) <= MAX_GAIN:
            raise ValueError(f"gain must be in (0, {MAX_GAIN:g}], got {gain!r}")
        if rot_gain is not None and not 0 < float(rot_gain) <= MAX_GAIN:
            raise ValueError(f"rot_gain must be in (0, {MAX_GAIN:g}] or None (the position's gain), got {rot_gain!r}")
        if not (float(settle) == int(settle) and 0 <= int(settle) <= 100):
            raise ValueError(f"settle must be a whole number of control steps from 0 to 100, got {settle!r}")
        from sim.assets import category_index

        gains = float(gain) if rot_gain is None else [float(gain)] * 3 + [float(rot_gain)] * 3
        self.canonical_yaw = bool(canonical_yaw)
        """observe symmetric objects (a cube, a can) turned about their own axis to the equivalent orientation
        nearest this project's headings (robosuite yaws them anywhere in a full turn at reset; this project's
        scenes within ±0.6 rad), fixed for the episode at reset; the default since canonical yaw v1
        (`experiments/canonical_yaw_v1`: +11.25 ± 1.73 points on robosuite); False observes robosuite's raw
        quaternions"""
        self.spec = TASKS[task]
        self.task, self.family, self.instruction = task, self.spec.family, self.spec.instruction
        self.template = self.spec.template
        self.max_steps = int(max_steps or self.spec.max_steps)
        self.objects = self.spec.objects[:MAX_OBJECTS]
        self.category = np.full(MAX_OBJECTS, -1, dtype=np.int64)
        self.category[: len(self.objects)] = [category_index(o.category) for o in self.objects]
        self.mask = np.arange(MAX_OBJECTS) < len(self.objects)
        gl = {"MUJOCO_GL": "egl"} if render else {}
        self.worker = WorkerProcess(WORKER, "robosuite", env=gl)
        try:
            self.info = self.worker.call({
                "cmd": "make", "task": task, "robots": "Panda",
                "env_kwargs": {"hard_reset": hard_reset, **self.spec.env_kwargs, **(env_kwargs or {})},
                "objects": [{k: v for k, v in vars(o).items() if v is not None} for o in self.objects],
                "sites": ["table_top"],
                "render": {"camera": camera, "size": render_size} if render else None,
                "control": {"max_dpos": MAX_DPOS, "max_drot": MAX_DROT, "leash": TARGET_LEASH, "gain": gains,
                            "action_map": action_map, "steps_per_action": 1, "rot_leash": rot_leash,
                            "settle": int(settle)},
            })["info"]
        except BaseException as exc:
            self.worker.close()
            if isinstance(exc, RuntimeError) and "No module named 'robosuite'" in str(exc):
                raise ExternalUnavailable(f"robosuite is not installed in {external_venv()}: {SETUP_HINT}"
                                          ) from None
            raise
        k = self.info["control_freq"] / CONTROL_HZ
        if abs(k - round(k)) > 1e-9 or round(k) < 1:
            self.close()
            raise ValueError(f"robosuite control_freq {self.info['control_freq']} Hz is not a multiple of "
                             f"{CONTROL_HZ:g} Hz")
        self.steps_per_action = int(round(k))
        speed = self.info.get("gripper_speed")
        self.gripper_rate = None if speed is None else round(float(speed) * self.steps_per_action, 6)
        """robosuite's gripper speed per action of this project, in command units ([-1, 1]; its PandaGripper
        steps 0.2 of the command per control step, 2 per action: 0.4 = a full close in 5 actions)"""
        # sent with every reset (steps_per_action is known only once the env is made)
        self._control = {"max_dpos": MAX_DPOS, "max_drot": MAX_DROT, "leash": TARGET_LEASH, "gain": gains,
                         "action_map": action_map, "steps_per_action": self.steps_per_action,
                         "rot_leash": rot_leash, "settle": int(settle), "gripper_map": gripper_map,
                         "finger_open": GRIPPER_GEOMETRY.finger_open, "finger_squeeze": GRIPPER_GEOMETRY.finger_squeeze}
        self.tcp_to_gripper: np.ndarray | None = None
        self._steps, self._success, self._gripper_cmd = 0, False, -1.0
        self._pending: int | None = None
        self._turns: dict[int, float] = {}

    # --- frames ---------------------------------------------------------------------------------------
    def _origin(self, attrs: dict) -> np.ndarray:
        base = np.asarray(self.info["base_pos"], dtype=np.float64)
        table = self.info["sites"].get("table_top")
        z = float(table[2]) if table is not None else float(np.asarray(attrs["bin2_pos"])[2])
        return np.array([base[0], base[1], z])

    @staticmethod
    def gripper_frame(geometry: dict, tcp_mat: np.ndarray) -> np.ndarray:
        """The constant rotation from robosuite's grip-site frame to this project's gripper frame
        (`policy.external.control.gripper_frame`; robosuite's world axes are this project's)."""
        from policy.external.control import gripper_frame

        return gripper_frame(geometry, tcp_mat)

    # --- episode --------------------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> dict:
        if self._pending is not None:
            self.worker.receive()
            self._pending = None
        out = self.worker.call({"cmd": "reset", "seed": seed, "control": self._control})
        names = ["bin2_pos", "bin_size", "target_bin_placements", "object_to_id"] if self.task == "PickPlaceCan" \
            else []
        attrs = self.worker.call({"cmd": "attrs", "names": names})["attrs"]
        self.origin = self._origin(attrs)
        state = out["state"]
        if self.tcp_to_gripper is None:
            self.tcp_to_gripper = self.gripper_frame(out["geometry"], state["tcp_mat"])
        self._static_tokens(out["objects"], attrs, state)
        self._turns = self._symmetric_turns(state)
        self._steps, self._success, self._gripper_cmd = 0, False, -1.0
        from policy.external.phases import PhaseTracker

        self._tracker = PhaseTracker(self.spec.phases, state, obj=0, goal=1 if len(self.objects) > 1 else None)
        self._last = self._start_obs = self._observe(state)
        return self._last

    def _static_tokens(self, objects: list[dict], attrs: dict, state: dict) -> None:
        static = np.zeros((MAX_OBJECTS, OBJ_DIM), dtype=np.float32)
        self._joint_range = {}
        self._fixed_pos = {}
        for i, (o, info) in enumerate(zip(self.objects, objects, strict=True)):
            static[i, 13:16] = info["half_extent"]
            static[i, 20] = 1.0 if o.joint else 0.0
            static[i, 21 + ROLES.index(o.role)] = 1.0
            if o.joint:
                self._joint_range[i] = tuple(float(v) for v in info["joint_range"])
            if self.task == "PickPlaceCan" and o.name == "bin":
                # the can's quadrant of bin 2 (PickPlace's success region), not the whole bin
                place = np.asarray(attrs["target_bin_placements"])[int(attrs["object_to_id"]["can"])]
                size = np.asarray(attrs["bin_size"], dtype=np.float64)
                centre_z = float(state["obj_pos"][i][2])
                self._fixed_pos[i] = np.array([place[0], place[1], centre_z])
                static[i, 13:16] = [size[0] / 4, size[1] / 4, info["half_extent"][2]]
        self._static = static

    def _symmetric_turns(self, state: dict) -> dict[int, float]:
        """Per symmetric object (with `canonical_yaw`), the turn about its own z axis it is observed with for the
        episode; a box turned by an odd number of quarter turns has its x and y half extents swapped."""
        from policy.external.control import symmetric_turn

        if not self.canonical_yaw:
            return {}
        turns = {}
        for i, o in enumerate(self.objects):
            angle = symmetric_turn(state["obj_quat"][i], o.symmetry)
            if angle:
                turns[i] = angle
                if o.symmetry == "box" and round(angle / (np.pi / 2)) % 2:
                    self._static[i, [13, 14]] = self._static[i, [14, 13]]
        return turns

    def _observe(self, s: dict) -> dict:
        from sim.env import make_observation

        n = len(self.objects)
        tokens = self._static.copy()
        pos = np.asarray(s["obj_pos"], dtype=np.float64).copy()
        for i, p in self._fixed_pos.items():
            pos[i] = p
        tcp = np.asarray(s["tcp_pos"], dtype=np.float64) - self.origin
        tokens[:n, 0:3] = pos - self.origin
        quat = np.asarray(s["obj_quat"], dtype=np.float64)
        tokens[:n, 3:7] = quat * np.where(quat[:, :1] < 0, -1.0, 1.0)  # the same rotation, w >= 0
        tokens[:n, 7:13] = s["obj_qvel"]
        if self._turns:
            from policy.external.control import mat_from_axis_angle, turned_about_z

            for i, angle in self._turns.items():
                tokens[i, 3:7] = turned_about_z(tokens[i, 3:7], angle)
                tokens[i, 10:13] = mat_from_axis_angle([0.0, 0.0, angle]).T @ tokens[i, 10:13]  # body-frame spin
        tokens[:n, 16:19] = tokens[:n, 0:3] - tcp
        for i, (lo, hi) in self._joint_range.items():
            tokens[i, 19] = (float(s["obj_joint"][i]) - lo) / (hi - lo)
        from policy.external.control import quat_from_mat

        fr = np.asarray(self.info["finger_range"], dtype=np.float64)
        span = (fr[0, 1] - fr[0, 0]) + (fr[1, 1] - fr[1, 0])
        proprio = np.empty(PROPRIO_DIM, dtype=np.float32)
        proprio[0:3] = tcp
        proprio[3:7] = quat_from_mat(np.asarray(s["tcp_mat"]).reshape(3, 3) @ self.tcp_to_gripper)
        proprio[7:10] = s["tcp_linvel"]
        proprio[10] = (float(s["fingers"][0]) - float(s["fingers"][1])) / span
        proprio[11] = self._gripper_cmd
        return make_observation(tokens, self.mask.copy(), self.category.copy(), proprio, self.instruction)

    def begin_chunk(self, chunk, render: bool = False) -> None:
        c = check_chunk(chunk, ACTION_DIM, 4 * CHUNK)
        if self._pending is not None:
            raise RuntimeError("begin_chunk twice without end_chunk")
        left = self.max_steps - self._steps
        if left <= 0 or self._success:
            raise RuntimeError("the episode is over: reset first")
        self._sent = c[:left]
        self.worker.send({"cmd": "step", "actions": self._sent, "render": render, "stop_on_success": True})
        self._pending = len(self._sent)

    def end_chunk(self) -> tuple[dict, float, bool, bool, dict]:
        if self._pending is None:
            raise RuntimeError("end_chunk without begin_chunk")
        self._pending = None
        out = self.worker.receive()
        states, n = out["states"], int(out["executed"])
        observations = []
        for t in range(n):
            self._gripper_cmd = float(np.clip(self._sent[t, 6], -1.0, 1.0))
            observations.append(self._observe({k: v[t] for k, v in states.items()}))
            self._tracker.update({k: v[t] for k, v in states.items()}, float(observations[-1][OBS_PROPRIO][10]),
                                 bool(out["success"][t]))
        self._steps += n
        self._success = bool(out["success"][n - 1])
        self._last = observations[-1]
        terminated = self._success
        truncated = self._steps >= self.max_steps and not terminated
        info = {"success": self._success, "step": self._steps, "executed": n, "observations": observations,
                "external_steps": int(out["external_steps"]), "frames": out.get("frames")}
        return self._last, float(self._success), terminated, truncated, info
