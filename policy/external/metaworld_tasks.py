"""Meta-World (Sawyer, mocap) as an external benchmark: pick-place-v3, push-v3, drawer-open-v3, door-open-v3.

Frames. Meta-World's world has the Sawyer's base at the origin, the table top at z = 0 and the workspace in front
of the robot along +y (the hand starts at (0, 0.6, 0.2)). This project's world has objects in front of the origin
along +x. The adapter maps positions by a rotation of -90° about z after a translation,

    p_project = R (p_metaworld - (base_x, base_y, table_z)),   R = [[0, 1, 0], [-1, 0, 0], [0, 0, 1]]

so Meta-World's forward (+y) is this project's +x and its -x is this project's +y; velocities and orientations
are rotated by R as well (a free joint's angular velocity, in the body frame, is unchanged). The gripper frame is
Meta-World's `hand` body rotated by a constant signed permutation (`control.gripper_frame`, from the claw
geometry at reset) so that fingers point along -z and close along y, as this project's gripper; the hand's
orientation is fixed by Meta-World (its mocap quaternion is reset every step).

Actions. This project's 10 Hz action (dpos in world axes, drot, gripper) moves a target exactly as this project's
env does (`control.TargetTracker`, 8 cm leash, target kept within Meta-World's mocap box), after dpos is turned
into Meta-World's axes (R^T). Meta-World steps at 1 / (timestep × frame_skip) = 80 Hz, so k = 8 env steps run per
action; at each, the 4-D Meta-World action is

    xyz = clip((target + offset - mocap_pos) / action_scale, -1, 1),   gripper = the action's gripper, unchanged

(offset: mocap minus TCP at reset, action_scale 1 cm), i.e. the mocap moves up to 1 cm per env step toward the
point that puts the TCP on the target. drot is dropped: Meta-World has no orientation control. Its gripper
effort is -1 open, +1 closed, as here. `action_from_metaworld` is the inverse (k env steps of one 4-D action as one
10 Hz action), used to drive the adapter with Meta-World's own scripted policies.

Observation. Object tokens (sim.constants.OBJ_FEATURES): the task's object at the position Meta-World itself
reports (`env._get_pos_objects()`: the puck's centre, the drawer's and the door's handle), its body orientation,
free-joint velocity, the half extents of its body subtree's collision geoms, the opening of its joint (drawer
slide, door hinge: 0 closed, 1 at the joint's far limit), role and category of this project's asset pool; the goal
(pick-place, push) as a receptacle token at `env._target_pos` with the goal site's radius as half extents.
Proprio: TCP (Meta-World's `tcp_center`, between the finger pads), gripper orientation, hand velocity, finger
opening (1 - (q_r - q_l) / span of the two claw joints: 1 open), the last gripper command. Success is only the
`info["success"]` of each env.step; the episode ends when it first holds, or at Meta-World's 500-step limit.

Phases. Every executed action's raw state (Meta-World's frame, with the claws' contacts) also feeds a
`phases.PhaseTracker` (`phase_report()`): how far the episode got (reach, grasp / contact, lift / moved, success)
from Meta-World's own state, for the failure analysis.
"""

from __future__ import annotations

from dataclasses import dataclass
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
    OBS_OBJECTS,
    OBS_PROPRIO,
    PROPRIO_DIM,
    ROLES,
)

WORKER = Path(__file__).with_name("metaworld_worker.py")
BENCHMARK = "metaworld"
TARGET_LEASH = 0.08
"""as `sim.env.TARGET_LEASH`"""
FRAME = np.array([[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
def _yaw(degrees: float) -> np.ndarray:
    a = np.radians(degrees)
    return np.array([[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0.0, 0.0, 1.0]])


FRAMES = ("base", "home")
"""position mappings: "base" (the Sawyer's base over this project's origin, table tops level) or "home" (also
shifted in xy so the hand's start lands on this project's gripper home; heights unchanged): a translation, so
actions, velocities and orientations map alike"""
"""rotation from Meta-World's world axes to this project's (-90° about z: Meta-World's +y forward becomes +x)"""


@dataclass(frozen=True)
class MetaWorldObject:
    name: str
    role: str
    category: str
    """a category of this project's asset pool (`sim.assets.categories()`)"""
    body: str | None = None
    pos: str = "body"
    """'main': the position Meta-World reports for its object (`_get_pos_objects`); 'goal': `_target_pos`;
    'body': the body's origin"""
    free_joint: str | None = None
    joint: str | None = None
    """the articulation joint; its opening runs from 0 (closed, upper limit) to 1 (lower limit)"""
    body_yaw: float = 0.0
    """degrees about the body's z that turn Meta-World's body frame into this project's asset convention (an
    articulated asset's handle side along its local -x): the token's quaternion and half extents use the turned
    frame"""
    symmetry: str | None = None
    """the shape's symmetry about its own z (`policy.external.control.SYMMETRIES`): with
    `MetaWorldAdapter(canonical_yaw=True)` it is observed at the equivalent heading nearest this project's"""


@dataclass(frozen=True)
class MetaWorldTask:
    name: str
    family: str
    instruction: str
    objects: tuple[MetaWorldObject, ...]
    expert: str
    """the scripted policy Meta-World ships for the task (`metaworld.policies`)"""
    description: str = ""
    phases: str = "pick"
    """the phase ladder of the failure analysis (`policy.external.phases.LADDERS`)"""
    template: str = ""
    """the task template of this project's family that states the same task (a resembling scene's task; none for
    a puck brought to a point)"""


_PUCK = MetaWorldObject("puck", "target", "cylinder_block", body="obj", pos="main", free_joint="objjoint",
                        symmetry="cylinder")
_GOAL = MetaWorldObject("goal", "receptacle", "plate", pos="goal", symmetry="cylinder")  # a point: any heading
TASKS: dict[str, MetaWorldTask] = {
    t.name: t
    for t in (
        MetaWorldTask("pick-place-v3", "pick_place", "pick up the puck and put it at the goal", (_PUCK, _GOAL),
                      "SawyerPickPlaceV3Policy",
                      "a puck (radius 2 cm) on the table, a goal point in the air; success: puck within 7 cm of it"),
        MetaWorldTask("push-v3", "pick_place", "push the puck to the goal", (_PUCK, _GOAL), "SawyerPushV3Policy",
                      "a puck and a goal point on the table; success: puck within 5 cm of it", phases="push"),
        MetaWorldTask("drawer-open-v3", "articulated", "open the drawer",
                      (MetaWorldObject("drawer", "articulated", "drawer", body="drawer_link", pos="main",
                                       joint="goal_slidey", body_yaw=90.0),),
                      "SawyerDrawerOpenV3Policy", "a drawer facing the robot; success: pulled (nearly) fully open",
                      phases="open", template="ar_open"),
        MetaWorldTask("door-open-v3", "articulated", "open the door",
                      (MetaWorldObject("door", "articulated", "door", body="door_link", pos="main",
                                       joint="doorjoint", body_yaw=90.0),),
                      "SawyerDoorOpenV3Policy", "a hinged door; success: its handle swung to the goal", phases="open",
                      template="ar_open"),
    )
}


def task_names() -> tuple[str, ...]:
    return tuple(TASKS)


def to_metaworld_axes(action) -> np.ndarray:
    """This project's 10 Hz action (7,) in Meta-World's world axes: dpos rotated by FRAME^T, drot dropped (no
    orientation control there), the gripper command unchanged."""
    a = np.asarray(action, dtype=np.float64)
    return np.r_[FRAME.T @ a[:3], 0.0, 0.0, 0.0, a[6]]


def action_from_metaworld(action4, steps_per_action: int, action_scale: float) -> np.ndarray:
    """The inverse of the mapping: one Meta-World action (4,) held for the k env steps of a 10 Hz step, as this
    project's action (7,): dpos = FRAME (k · action_scale · xyz) (clipped to ±MAX_DPOS by the target rule),
    drot = 0, gripper = its effort."""
    a = np.asarray(action4, dtype=np.float64)
    dpos = FRAME @ (np.clip(a[:3], -1.0, 1.0) * steps_per_action * action_scale)
    return np.r_[dpos, 0.0, 0.0, 0.0, np.clip(a[3], -1.0, 1.0)]


class MetaWorldAdapter(WorkerAdapter):
    benchmark = BENCHMARK

    def __init__(self, task: str, *, render: bool = False, render_size: int = 256, camera: str = "corner",
                 turn_image: bool = True, action_map: str = "target", max_steps: int | None = None, seed: int = 0,
                 frame: str = "base", canonical_yaw: bool = True):
        if task not in TASKS:
            raise ValueError(f"unknown metaworld task {task!r}; valid tasks: {', '.join(TASKS)}")
        if frame not in FRAMES:
            raise ValueError(f"frame must be one of {', '.join(FRAMES)}, got {frame!r}")
        self.frame = frame
        self.canonical_yaw = bool(canonical_yaw)
        """observe symmetric objects (the puck, the goal point) turned about their own z to the equivalent heading
        nearest this project's (within ±0.6 rad), fixed for the episode at reset: Meta-World never turns its puck,
        but its axes are this project's turned by 90° (`FRAME`), so False observes it at -90°. The default since
        Meta-World yaw v1 (`experiments/metaworld_yaw_v1`: success 0 in both arms, episodes past phase `none`
        +10.0 ± 3.0 points, 300 pairs)"""
        self.shift = np.zeros(3)
        """added to mapped positions: 0 for frame "base"; for "home", the xy that puts the hand's start on this
        project's gripper home (set at the first reset; Meta-World's hand start is fixed per task)"""
        if action_map not in ("target", "delta"):
            raise ValueError(f"action_map must be 'target' or 'delta', got {action_map!r}")
        from sim.assets import category_index

        self.spec = TASKS[task]
        self.task, self.family, self.instruction = task, self.spec.family, self.spec.instruction
        self.template = self.spec.template
        self.objects = self.spec.objects[:MAX_OBJECTS]
        self.category = np.full(MAX_OBJECTS, -1, dtype=np.int64)
        self.category[: len(self.objects)] = [category_index(o.category) for o in self.objects]
        self.mask = np.arange(MAX_OBJECTS) < len(self.objects)
        self._control = {"max_dpos": MAX_DPOS, "max_drot": MAX_DROT, "leash": TARGET_LEASH,
                         "action_map": action_map, "steps_per_action": 1}
        gl = {"MUJOCO_GL": "egl"} if render else {}
        self.worker = WorkerProcess(WORKER, "metaworld", env=gl)
        try:
            self.info = self.worker.call({
                "cmd": "make", "task": task, "seed": seed,
                "objects": [{k: v for k, v in vars(o).items() if v is not None} for o in self.objects],
                "render": {"camera": camera, "size": render_size, "turn": turn_image} if render else None,
                "control": self._control,
            })["info"]
        except BaseException as exc:
            self.worker.close()
            if isinstance(exc, RuntimeError) and "No module named 'metaworld'" in str(exc):
                raise ExternalUnavailable(f"metaworld is not installed in {external_venv()}: {SETUP_HINT}"
                                          ) from None
            raise
        k = self.info["control_freq"] / CONTROL_HZ
        if abs(k - round(k)) > 1e-6 or round(k) < 1:
            self.close()
            raise ValueError(f"Meta-World's control rate {self.info['control_freq']} Hz is not a multiple of "
                             f"{CONTROL_HZ:g} Hz")
        self.steps_per_action = int(round(k))
        self._control["steps_per_action"] = self.steps_per_action
        limit = self.info["max_path_length"] // self.steps_per_action
        self.max_steps = min(int(max_steps or limit), limit)
        """episode length in 10 Hz steps: at most Meta-World's own limit (500 env steps = 62 steps of 8)"""
        base = np.asarray(self.info["base_pos"], dtype=np.float64)
        self.origin = np.array([base[0], base[1], float(self.info["table_z"])])
        self.tcp_to_gripper: np.ndarray | None = None
        self._steps, self._success, self._gripper_cmd, self._limit = 0, False, -1.0, False
        self._pending: int | None = None

    # --- frames ---------------------------------------------------------------------------------------
    def to_project(self, p) -> np.ndarray:
        """Meta-World world positions (..., 3) in this project's frame."""
        return (np.asarray(p, dtype=np.float64) - self.origin) @ FRAME.T + self.shift

    # --- episode --------------------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> dict:
        if self._pending is not None:
            self.worker.receive()
            self._pending = None
        out = self.worker.call({"cmd": "reset", "seed": seed, "control": self._control})
        state = out["state"]
        if self.tcp_to_gripper is None:
            from policy.external.control import gripper_frame

            self.tcp_to_gripper = gripper_frame(out["geometry"], FRAME @ np.asarray(state["tcp_mat"]))
            if self.frame == "home":
                from sim.constants import GRIPPER_HOME

                start = (np.asarray(state["tcp_pos"], dtype=np.float64) - self.origin) @ FRAME.T
                self.shift[:2] = np.asarray(GRIPPER_HOME[:2]) - start[:2]
        static = np.zeros((MAX_OBJECTS, OBJ_DIM), dtype=np.float32)
        self._joint_range = {}
        for i, (o, info) in enumerate(zip(self.objects, out["objects"], strict=True)):
            turn = _yaw(o.body_yaw)
            static[i, 13:16] = np.abs(turn.T) @ np.asarray(info["half_extent"])  # in the (turned) body frame
            static[i, 20] = 1.0 if o.joint else 0.0
            static[i, 21 + ROLES.index(o.role)] = 1.0
            if o.joint:
                self._joint_range[i] = tuple(float(v) for v in info["joint_range"])
        self._static = static
        self._steps, self._success, self._gripper_cmd, self._limit = 0, False, -1.0, False
        from policy.external.phases import PhaseTracker

        goal = next((i for i, o in enumerate(self.objects) if o.pos == "goal"), None)
        self._tracker = PhaseTracker(self.spec.phases, state, obj=0, goal=goal)
        self._turns: dict[int, float] = {}
        self._turns = self._symmetric_turns(self._observe(state))
        self._last = self._start_obs = self._observe(state)
        return self._last

    def _symmetric_turns(self, obs: dict) -> dict[int, float]:
        """Per symmetric object (with `canonical_yaw`), the turn about its own z it is observed with for the episode,
        from its observed orientation at reset."""
        from policy.external.control import symmetric_turn

        if not self.canonical_yaw:
            return {}
        turns = {}
        for i, o in enumerate(self.objects):
            angle = symmetric_turn(np.asarray(obs[OBS_OBJECTS][i, 3:7], dtype=np.float64), o.symmetry)
            if angle:
                turns[i] = angle
        return turns

    def _observe(self, s: dict) -> dict:
        from policy.external.control import mat_from_axis_angle, mat_from_quat, quat_from_mat, turned_about_z
        from sim.env import make_observation

        n = len(self.objects)
        tokens = self._static.copy()
        tcp = self.to_project(s["tcp_pos"])
        tokens[:n, 0:3] = self.to_project(s["obj_pos"])
        for i, q in enumerate(np.asarray(s["obj_quat"], dtype=np.float64)):
            tokens[i, 3:7] = quat_from_mat(FRAME @ mat_from_quat(q) @ _yaw(self.objects[i].body_yaw))
        qvel = np.asarray(s["obj_qvel"], dtype=np.float64)
        tokens[:n, 7:10] = qvel[:, :3] @ FRAME.T
        tokens[:n, 10:13] = qvel[:, 3:]
        for i, angle in self._turns.items():
            tokens[i, 3:7] = turned_about_z(tokens[i, 3:7], angle)
            tokens[i, 10:13] = mat_from_axis_angle([0.0, 0.0, angle]).T @ tokens[i, 10:13]  # body-frame spin
        tokens[:n, 16:19] = tokens[:n, 0:3] - tcp
        for i, (lo, hi) in self._joint_range.items():
            tokens[i, 19] = (hi - float(s["obj_joint"][i])) / (hi - lo)
        fr = np.asarray(self.info["finger_range"], dtype=np.float64)
        span = (fr[0, 1] - fr[0, 0]) + (fr[1, 1] - fr[1, 0])
        proprio = np.empty(PROPRIO_DIM, dtype=np.float32)
        proprio[0:3] = tcp
        proprio[3:7] = quat_from_mat(FRAME @ np.asarray(s["tcp_mat"]).reshape(3, 3) @ self.tcp_to_gripper)
        proprio[7:10] = FRAME @ np.asarray(s["tcp_linvel"])
        proprio[10] = np.clip(1.0 - (float(s["fingers"][0]) - float(s["fingers"][1])) / span, 0.0, 1.0)
        proprio[11] = self._gripper_cmd
        return make_observation(tokens, self.mask.copy(), self.category.copy(), proprio, self.instruction)

    def _check_live(self) -> None:
        if self._pending is not None:
            raise RuntimeError("begin_chunk twice without end_chunk")
        if self._steps >= self.max_steps or self._success or self._limit:
            raise RuntimeError("the episode is over: reset first")

    def begin_chunk(self, chunk, render: bool = False) -> None:
        c = check_chunk(chunk, ACTION_DIM, 4 * CHUNK)
        self._check_live()
        self._sent = c[: self.max_steps - self._steps]
        self._grips = np.clip(self._sent[:, 6], -1.0, 1.0)
        self.worker.send({"cmd": "step", "actions": np.stack([to_metaworld_axes(a) for a in self._sent]),
                          "render": render, "stop_on_success": True})
        self._pending = len(self._sent)

    def end_chunk(self) -> tuple[dict, float, bool, bool, dict]:
        if self._pending is None:
            raise RuntimeError("end_chunk without begin_chunk")
        self._pending = None
        return self._finish(self.worker.receive(), count=1)

    def step_raw(self, actions4, render: bool = False) -> tuple[dict, float, bool, bool, dict]:
        """Meta-World's own 4-D actions, one env step each (no mapping): for its scripted policies and checks.
        Steps are counted in env steps / k; observations as `step_chunk`'s, one per env step."""
        a = np.asarray(actions4, dtype=np.float64).reshape(-1, 4)
        self._check_live()
        self._grips = np.clip(a[:, 3], -1.0, 1.0)
        return self._finish(self.worker.call({"cmd": "step", "raw": a, "render": render, "stop_on_success": True}),
                            count=0)

    def _finish(self, out: dict, count: int) -> tuple[dict, float, bool, bool, dict]:
        states, n = out["states"], int(out["executed"])
        observations = []
        for t in range(n):
            self._gripper_cmd = float(self._grips[t])
            observations.append(self._observe({k: v[t] for k, v in states.items()}))
            self._tracker.update({k: v[t] for k, v in states.items()}, float(observations[-1][OBS_PROPRIO][10]),
                                 bool(out["success"][t]))
        self.path_length = int(out["path_length"])
        self._steps = self.path_length // self.steps_per_action if not count else self._steps + n
        self._success = bool(out["success"][n - 1])
        self._limit = bool(out["limit"])
        self._last = observations[-1]
        terminated = self._success
        truncated = (self._steps >= self.max_steps or self._limit) and not terminated
        info = {"success": self._success, "step": self._steps, "executed": n, "observations": observations,
                "external_steps": int(out["external_steps"]), "frames": out.get("frames")}
        return self._last, float(self._success), terminated, truncated, info

    def expert_action(self, policy: str | None = None) -> np.ndarray:
        """The action (4,) of Meta-World's scripted policy for this task (or `policy`) at the current state."""
        return self.worker.call({"cmd": "expert", "policy": policy or self.spec.expert})["action"]
