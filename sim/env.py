"""The environment: reset / step / step_chunk over a compiled scene, with object-centric observations.

    env = CodaEnv(spec)
    obs = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step_chunk(chunk)   # chunk: (8, 7)

Actions are 7-D end-effector deltas (see `sim.constants.ACTION_DIM`); control runs at 10 Hz with 50 physics
substeps. Reward is sparse: 1 on the step the success predicate becomes true (which ends the episode).
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from sim import helpers
from sim.compile import CompiledScene, compile_scene
from sim.constants import (
    ACTION_DIM,
    CHUNK,
    GRIPPER_HOME,
    MAX_DPOS,
    MAX_DROT,
    MAX_OBJECTS,
    OBJ_DIM,
    OBS_INSTRUCTION,
    OBS_OBJECT_CATEGORY,
    OBS_OBJECT_MASK,
    OBS_OBJECTS,
    OBS_PROPRIO,
    PROPRIO_DIM,
    SUBSTEPS,
    WORKSPACE_HIGH,
    WORKSPACE_LOW,
)
from sim.spec import SceneSpec

MAX_STEPS = {"pick_place": 70, "stack": 70, "articulated": 90, "prep": 200}
"""default episode length per family, in control steps"""
SETTLE_STEPS = 100
"""physics steps run at reset so objects start at rest on their supports"""
TARGET_LEASH = 0.08
"""the mocap target never runs further than this from the gripper (metres), so blocked motions stay gentle"""


def object_padding(categories) -> tuple[np.ndarray, np.ndarray]:
    """Mask and category index of the MAX_OBJECTS object slots for k <= MAX_OBJECTS real objects (category
    indices of those, in slot order): bool (MAX_OBJECTS,) true for the first k slots, int64 (MAX_OBJECTS,) -1 for
    padding."""
    k = len(categories)
    mask = np.arange(MAX_OBJECTS) < k
    category = np.full(MAX_OBJECTS, -1, dtype=np.int64)
    category[:k] = categories
    return mask, category


def make_observation(objects: np.ndarray, mask: np.ndarray, category: np.ndarray, proprio: np.ndarray,
                     instruction: str) -> dict:
    """An observation in the env's layout (the `sim.constants.OBS_*` keys), as `CodaEnv.observe` returns it."""
    return {
        OBS_OBJECTS: objects,
        OBS_OBJECT_MASK: mask,
        OBS_OBJECT_CATEGORY: category,
        OBS_PROPRIO: proprio,
        OBS_INSTRUCTION: instruction,
    }


@dataclass
class EnvState:
    """Everything needed to restore an episode exactly (`CodaEnv.set_state`)."""

    physics: np.ndarray
    steps: int
    target_pos: np.ndarray
    target_quat: np.ndarray
    gripper_cmd: float
    success: bool


@dataclass
class EnvStates:
    """A sequence of `EnvState`s as arrays, one row per state (what a trace records and serializes)."""

    physics: np.ndarray
    """(N, n) mj_getState(mjSTATE_INTEGRATION) vectors"""
    steps: np.ndarray
    """(N,) int64"""
    target_pos: np.ndarray
    """(N, 3)"""
    target_quat: np.ndarray
    """(N, 4)"""
    gripper_cmd: np.ndarray
    """(N,)"""
    success: np.ndarray
    """(N,) bool"""

    FIELDS = ("physics", "steps", "target_pos", "target_quat", "gripper_cmd", "success")

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, t: int) -> EnvState:
        return EnvState(self.physics[t].copy(), int(self.steps[t]), self.target_pos[t].copy(),
                        self.target_quat[t].copy(), float(self.gripper_cmd[t]), bool(self.success[t]))

    @classmethod
    def stack(cls, states) -> EnvStates:
        states = list(states)
        return cls(physics=np.asarray([s.physics for s in states], dtype=np.float64),
                   steps=np.asarray([s.steps for s in states], dtype=np.int64),
                   target_pos=np.asarray([s.target_pos for s in states], dtype=np.float64).reshape(-1, 3),
                   target_quat=np.asarray([s.target_quat for s in states], dtype=np.float64).reshape(-1, 4),
                   gripper_cmd=np.asarray([s.gripper_cmd for s in states], dtype=np.float64),
                   success=np.asarray([s.success for s in states], dtype=bool))

    def to_arrays(self, prefix: str = "env_") -> dict[str, np.ndarray]:
        """The arrays under `prefix + field` (for np.savez)."""
        return {prefix + f: getattr(self, f) for f in self.FIELDS}

    @classmethod
    def from_arrays(cls, arrays, prefix: str = "env_") -> EnvStates | None:
        """The states saved by `to_arrays`, or None when `arrays` (a mapping or an NpzFile) has none of them."""
        names = set(arrays.files if hasattr(arrays, "files") else arrays)
        if not all(prefix + f in names for f in cls.FIELDS):
            return None
        return cls(**{f: np.asarray(arrays[prefix + f]) for f in cls.FIELDS})


class CodaEnv:
    """One scene, one gripper. Not thread-safe; make one env per worker."""

    def __init__(self, spec: SceneSpec | CompiledScene, max_steps: int | None = None):
        self.compiled = spec if isinstance(spec, CompiledScene) else compile_scene(spec)
        self.spec = self.compiled.spec
        self.model = self.compiled.model
        self.data = mujoco.MjData(self.model)
        self.max_steps = max_steps or MAX_STEPS.get(self.spec.family, 100)
        self.instruction = self.spec.task.instruction
        self.success_predicate = self.spec.task.success
        from sim.predicates import atoms

        flat = [a.args[0] for a in atoms(self.success_predicate) if a.op == "open_fraction"
                and not self.compiled.objects[a.args[0]].articulated]
        if flat:  # refused here (verify: `compiles`), not on the first reset of every caller
            raise ValueError(f"open_fraction({flat[0]}): {flat[0]} is not articulated; open_fraction applies to "
                             "drawers, doors, lids, sliders")
        self.state = helpers.SceneState(self.compiled, self.data)
        self._build_obs_index()
        self._target_pos = np.array(GRIPPER_HOME, dtype=np.float64)
        self._target_quat = np.array([1.0, 0.0, 0.0, 0.0])
        self._gripper_cmd = -1.0
        self._steps = 0
        self._success = False
        self._state_size = mujoco.mj_stateSize(self.model, mujoco.mjtState.mjSTATE_INTEGRATION)
        rate = None if self.spec.start is None else self.spec.start.gripper_rate
        geo = self.compiled.gripper.geometry
        self._finger_step = None if rate is None else rate * abs(geo.finger_squeeze - geo.finger_open) / 2.0
        """the most the fingers' position target moves per action (m; `RobotStart.gripper_rate`), None: at once"""

    # --- observation layout -----------------------------------------------------------------
    def _build_obs_index(self) -> None:
        objs = list(self.compiled.objects.values())[:MAX_OBJECTS]
        n = len(objs)
        self._n = n
        self._pos_site = np.array([o.handle_site if o.articulated else o.center_site for o in objs], dtype=int)
        self._quat_body = np.array([o.moving_body if o.articulated else o.body for o in objs], dtype=int)
        self._free = [(i, o.free_dof) for i, o in enumerate(objs) if not o.articulated]
        self._art = [(i, o.joint_qpos, o.joint_range) for i, o in enumerate(objs) if o.articulated]
        static = np.zeros((MAX_OBJECTS, OBJ_DIM), dtype=np.float32)
        for i, o in enumerate(objs):
            static[i, 13:16] = o.half_extent
            static[i, 20] = 1.0 if o.articulated else 0.0
        static[:n, 21:] = self.compiled.role_onehot[:n]
        self._static = static
        self._mask, self._category = object_padding([o.category_index for o in objs])

    def observe(self) -> dict:
        d, n = self.data, self._n
        g = self.compiled.gripper
        grip = d.xpos[g.body]
        tokens = self._static.copy()
        tokens[:n, 0:3] = d.site_xpos[self._pos_site]
        tokens[:n, 3:7] = d.xquat[self._quat_body]
        for i, dof in self._free:
            tokens[i, 7:13] = d.qvel[dof : dof + 6]
        tokens[:n, 16:19] = tokens[:n, 0:3] - grip
        for i, q, (lo, hi) in self._art:
            tokens[i, 19] = (d.qpos[q] - lo) / (hi - lo)
        proprio = np.empty(PROPRIO_DIM, dtype=np.float32)
        proprio[0:3] = grip
        q = d.xquat[g.body]
        proprio[3:7] = q if q[0] >= 0 else -q  # one hemisphere (w >= 0), as the external adapters give it: the
        # Panda's chain of body frames composes its TCP quaternion as -identity at home
        proprio[7:10] = g.velocity(self.model, d)
        proprio[10] = (d.qpos[g.finger_qpos[0]] + d.qpos[g.finger_qpos[1]]) / (2 * g.geometry.finger_open)
        proprio[11] = self._gripper_cmd
        return make_observation(tokens, self._mask.copy(), self._category.copy(), proprio, self.instruction)

    # --- episode ----------------------------------------------------------------------------
    def reset(self, seed: int | None = None, gripper_noise: float = 0.0) -> dict:
        """Start an episode. `seed` only matters when `gripper_noise` > 0 (start-pose jitter, metres)."""
        m, d = self.model, self.data
        mujoco.mj_resetData(m, d)
        for name, values in self.spec.task.initial_state.items():
            o = self.compiled.objects[name]
            if o.articulated and "open" in values:
                lo, hi = o.joint_range
                d.qpos[o.joint_qpos] = lo + float(np.clip(values["open"], 0.0, 1.0)) * (hi - lo)
        start = self.spec.start
        home = np.array(GRIPPER_HOME if start is None else start.pos, dtype=np.float64)
        if gripper_noise > 0:
            home += np.random.default_rng(seed).uniform(-gripper_noise, gripper_noise, 3)
        g = self.compiled.gripper
        self._target_quat = np.array([1.0, 0.0, 0.0, 0.0] if start is None else start.quat, dtype=np.float64)
        self._target_quat /= np.linalg.norm(self._target_quat)
        g.place(m, d, home, self._target_quat)
        self._target_pos = home.copy()
        d.mocap_pos[g.mocap] = home
        d.mocap_quat[g.mocap] = self._target_quat
        self._gripper_cmd = -1.0  # no command yet (the external adapters report the same at reset)
        opening = g.geometry.finger_open * (1.0 if start is None else start.opening)
        d.ctrl[list(g.actuators)] = opening
        for q in g.finger_qpos:
            d.qpos[q] = opening
        mujoco.mj_forward(m, d)
        g.advance(m, d, SETTLE_STEPS)
        d.time = 0.0
        self._steps = 0
        self.state.initial_bottom = {n: helpers.bottom_z(self.state, n) for n in self.state.names}
        self._success = bool(self.success_predicate.evaluate(self.state))
        return self.observe()

    def _apply(self, action) -> None:
        a = np.asarray(action, dtype=np.float64)
        if a.shape != (ACTION_DIM,):
            raise ValueError(f"action must have shape ({ACTION_DIM},), got {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"action must be finite, got {a.tolist()}")
        g = self.compiled.gripper
        grip = self.data.xpos[g.body]
        target = self._target_pos + np.clip(a[:3], -MAX_DPOS, MAX_DPOS)
        target = np.clip(target, grip - TARGET_LEASH, grip + TARGET_LEASH)
        self._target_pos = np.clip(target, WORKSPACE_LOW, WORKSPACE_HIGH)
        rot = a[3:6]
        angle = float(np.linalg.norm(rot))
        if angle > 1e-9:
            if angle > MAX_DROT:
                rot, angle = rot * (MAX_DROT / angle), MAX_DROT
            dq = np.empty(4)
            mujoco.mju_axisAngle2Quat(dq, rot / angle, angle)
            q = np.empty(4)
            mujoco.mju_mulQuat(q, dq, self._target_quat)
            self._target_quat = q / np.linalg.norm(q)
        self._gripper_cmd = float(np.clip(a[6], -1.0, 1.0))
        self.data.mocap_pos[g.mocap] = self._target_pos
        self.data.mocap_quat[g.mocap] = self._target_quat
        fingers = g.finger_target(self._gripper_cmd)
        if self._finger_step is not None:  # a slow gripper: the target moves towards the command (the finger
            # target held in ctrl, part of the integration state, so restores stay exact)
            held = float(self.data.ctrl[g.actuators[0]])
            fingers = held + float(np.clip(fingers - held, -self._finger_step, self._finger_step))
        self.data.ctrl[list(g.actuators)] = fingers

    def step(self, action) -> tuple[dict, float, bool, bool, dict]:
        """One 10 Hz control step. Raises `ValueError` on a NaN, infinite or wrongly shaped action."""
        self._apply(action)
        self.compiled.gripper.advance(self.model, self.data, SUBSTEPS)
        self._steps += 1
        unstable = not np.isfinite(self.data.qacc).all() or self.data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number > 0
        success = (not unstable) and bool(self.success_predicate.evaluate(self.state))
        self._success = success
        terminated = success
        truncated = unstable or self._steps >= self.max_steps
        info = {"success": success, "step": self._steps, "unstable": unstable}
        return self.observe(), float(success), terminated, truncated and not terminated, info

    def step_chunk(self, chunk) -> tuple[dict, float, bool, bool, dict]:
        """Execute an action chunk (h x 7, normally h = 8); stops early when the episode ends."""
        c = np.asarray(chunk, dtype=np.float64)
        if c.ndim != 2 or c.shape[1] != ACTION_DIM or not 1 <= c.shape[0] <= 4 * CHUNK:
            raise ValueError(f"chunk must have shape (h, {ACTION_DIM}) with 1 <= h <= {4 * CHUNK}, got {c.shape}")
        if not np.all(np.isfinite(c)):
            raise ValueError("chunk contains NaN or infinite values")
        total, executed = 0.0, 0
        obs, terminated, truncated, info = None, False, False, {}
        for a in c:
            obs, r, terminated, truncated, info = self.step(a)
            total += r
            executed += 1
            if terminated or truncated:
                break
        info = {**info, "executed": executed}
        return obs, total, terminated, truncated, info

    # --- queries ----------------------------------------------------------------------------
    @property
    def steps(self) -> int:
        return self._steps

    def grip_wait(self, command: float) -> int:
        """Actions the fingers' target still needs to reach `command` (0 when the fingers follow at once)."""
        if self._finger_step is None:
            return 0
        g = self.compiled.gripper
        gap = abs(g.finger_target(float(np.clip(command, -1.0, 1.0))) - float(self.data.ctrl[g.actuators[0]]))
        return int(np.ceil(gap / self._finger_step - 1e-9))

    def success(self) -> bool:
        return self._success

    def target_pose(self) -> tuple[np.ndarray, np.ndarray]:
        return self._target_pos.copy(), self._target_quat.copy()

    def get_state(self) -> EnvState:
        buf = np.empty(self._state_size)
        mujoco.mj_getState(self.model, self.data, buf, mujoco.mjtState.mjSTATE_INTEGRATION)
        return EnvState(buf, self._steps, self._target_pos.copy(), self._target_quat.copy(), self._gripper_cmd, self._success)

    def set_state(self, s: EnvState) -> None:
        mujoco.mj_setState(self.model, self.data, s.physics, mujoco.mjtState.mjSTATE_INTEGRATION)
        mujoco.mj_forward(self.model, self.data)
        self._steps, self._gripper_cmd, self._success = s.steps, s.gripper_cmd, s.success
        self._target_pos, self._target_quat = s.target_pos.copy(), s.target_quat.copy()

    def restore_step(self, prev: EnvState, cur: EnvState) -> bool:
        """Restore `cur`, the state one control step after `prev`, exactly as `step` left it: re-runs that step's
        physics from `prev` with the controls recorded in `cur`, so the derived quantities (positions, contacts)
        are those of the last substep's forward pass, as after `step`, and not a fresh forward pass over `cur`
        (which is what `set_state` gives: the same physics state, observations off by one substep). True when
        the re-run reproduced `cur`'s physics state bit for bit; otherwise `cur` is set as by `set_state`."""
        m, d, spec = self.model, self.data, mujoco.mjtState.mjSTATE_INTEGRATION
        mujoco.mj_setState(m, d, cur.physics, spec)
        ctrl, mocap_pos, mocap_quat = d.ctrl.copy(), d.mocap_pos.copy(), d.mocap_quat.copy()
        mujoco.mj_setState(m, d, prev.physics, spec)
        d.ctrl[:], d.mocap_pos[:], d.mocap_quat[:] = ctrl, mocap_pos, mocap_quat
        self.compiled.gripper.advance(m, d, SUBSTEPS)
        after = np.empty(self._state_size)
        mujoco.mj_getState(m, d, after, spec)
        exact = bool(np.array_equal(after, cur.physics))
        if exact:
            self._steps, self._gripper_cmd, self._success = cur.steps, cur.gripper_cmd, cur.success
            self._target_pos, self._target_quat = cur.target_pos.copy(), cur.target_quat.copy()
        else:
            self.set_state(cur)
        self.state._contact_key = None
        return exact
