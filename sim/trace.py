"""Rollout traces: everything needed to replay an episode's states exactly (for evidence, keyframes, potentials).

A trace keeps the spec, the actions and the state after reset and after every control step: qpos, qvel and the
gripper target (mocap) for the evidence helpers, and the env's own state (`sim.env.EnvStates`: MuJoCo's
integration state — time, qpos, qvel, solver warm start, controls, mocap — plus the target pose, gripper
command, step counter and success). Any helper can be recomputed later: `trace.state_at(t)` sets qpos/qvel of
step t in a fresh env (a forward pass, enough for evidence); `trace.env_at(t)` returns an env restored exactly
at step t, from which the recorded actions replay bit for bit and a controller (the planner: `run_planner_from`)
can take over. Traces recorded before the env state was kept still load; their `env_at` is approximate.

    env = CodaEnv(spec); rec = TraceRecorder(env)
    obs = rec.reset()
    obs, r, term, trunc, info = rec.step(action)      # same as env.step, recorded
    trace = rec.trace()

`RecordingEnv` is an env that records itself and passes its actions through an `ActionPerturbation` (for code
that drives an env directly, such as the scripted planner); `planner_trace(spec, perturb)` runs the planner in one
and returns the demonstration and the trace (the labelled critic benchmark plants execution faults this way).

`run_planner_from(env)` runs the scripted planner from the env's current state (no reset) with its own step budget,
skipping the subgoals already satisfied there: a takeover, e.g. `run_planner_from(trace.env_at(t))`.
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass, field
from typing import Protocol

import mujoco
import numpy as np

from sim import helpers as h
from sim.env import CodaEnv, EnvStates
from sim.helpers import SceneState
from sim.planner import Demo, execute_plan, refusal, run_planner, subgoals
from sim.predicates import Atom
from sim.spec import SceneSpec

log = logging.getLogger(__name__)


@dataclass
class Trace:
    spec: SceneSpec
    actions: np.ndarray
    """(T, 7) actions executed (float64 as the env executed them; float32 in older traces)"""
    qpos: np.ndarray
    """(T + 1, nq) state after reset and after each step"""
    qvel: np.ndarray
    """(T + 1, nv)"""
    mocap_pos: np.ndarray
    """(T + 1, 3) gripper target"""
    success: bool
    initial_bottom: dict[str, float] = field(default_factory=dict)
    success_step: int | None = None
    meta: dict = field(default_factory=dict)
    env_states: EnvStates | None = None
    """(T + 1) env states (`CodaEnv.get_state`) after reset and after each step; None in older traces"""
    max_steps: int | None = None
    """the recording env's episode length (None: the family default)"""

    @property
    def steps(self) -> int:
        return len(self.actions)

    @property
    def exact(self) -> bool:
        """Whether `env_at` restores exactly (the trace holds the env's own states)."""
        return self.env_states is not None

    def env_at(self, t: int, max_steps: int | None = None, strict: bool = False) -> CodaEnv:
        """A fresh env in the state of step t (0 = after reset), restored exactly: observations, success, the
        step counter, the gripper target and command, and `SceneState.initial_bottom` are the recorded episode's,
        and executing the recorded actions from t reproduces its states bit for bit. `max_steps` defaults to the
        recording env's. Older traces (no env states) are restored approximately from qpos, qvel and the target
        position (no solver warm start, target orientation or gripper command: the replay drifts); `strict`
        raises on them, and when an exact re-run does not reproduce the recorded physics (another MuJoCo build)."""
        if not 0 <= t <= self.steps:
            raise IndexError(f"step {t} is outside the trace's 0..{self.steps}")
        env = CodaEnv(self.spec, max_steps=max_steps or self.max_steps)
        env.reset()
        env.state.initial_bottom = dict(self.initial_bottom)
        if self.env_states is None:
            if strict:
                raise ValueError("this trace holds no env states (recorded before they were kept): no exact restore")
            self._approximate(env, t)
            return env
        if t == 0:
            exact = bool(np.array_equal(env.get_state().physics, self.env_states.physics[0]))
            if not exact:  # a reset with start-pose noise: the physics is exact, positions from a fresh forward pass
                env.set_state(self.env_states[0])
                env.state._contact_key = None
        else:
            exact = env.restore_step(self.env_states[t - 1], self.env_states[t])
        if not exact:
            if strict:
                raise RuntimeError(f"restoring step {t} did not reproduce the recorded physics state exactly")
            log.warning("trace of %s: step %d restored with a fresh forward pass (not bit-exact)",
                        self.spec.spec_hash(), t)
        return env

    def _approximate(self, env: CodaEnv, t: int) -> None:
        d, g = env.data, env.compiled.gripper
        d.qpos[:] = self.qpos[t]
        d.qvel[:] = self.qvel[t]
        d.mocap_pos[g.mocap] = self.mocap_pos[t]
        mujoco.mj_forward(env.model, d)
        quat = d.xquat[g.body].copy()
        d.mocap_quat[g.mocap] = quat
        cmd = float(np.clip(self.actions[t - 1][6], -1.0, 1.0)) if t > 0 else -1.0
        d.ctrl[list(g.actuators)] = g.finger_target(cmd)
        env._target_pos, env._target_quat = self.mocap_pos[t].astype(np.float64).copy(), quat
        env._gripper_cmd, env._steps = cmd, t
        env._success = self.success_step is not None and t >= self.success_step
        env.state._contact_key = None

    def replay_env(self) -> CodaEnv:
        env = CodaEnv(self.spec)
        env.reset()
        env.state.initial_bottom = dict(self.initial_bottom)
        return env

    def state_at(self, t: int, env: CodaEnv | None = None) -> SceneState:
        """The SceneState at step t (0 = after reset), restored into `env` (a replay env by default)."""
        env = env or self.replay_env()
        d = env.data
        d.qpos[:] = self.qpos[t]
        d.qvel[:] = self.qvel[t]
        mujoco.mj_forward(env.model, d)
        env.state._contact_key = None
        return env.state

    def states(self, every: int = 1):
        """Yield (t, SceneState) for t = 0, every, 2*every, ..., T (one shared replay env)."""
        env = self.replay_env()
        last = self.steps
        for t in list(range(0, last + 1, every)) + ([last] if last % every else []):
            yield t, self.state_at(t, env)

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        np.savez_compressed(
            buf,
            spec=np.frombuffer(self.spec.model_dump_json().encode(), dtype=np.uint8),
            actions=self.actions,
            qpos=self.qpos,
            qvel=self.qvel,
            mocap_pos=self.mocap_pos,
            success=np.array(self.success),
            success_step=np.array(-1 if self.success_step is None else self.success_step),
            bottom_names=np.array(list(self.initial_bottom), dtype=str),
            bottom_values=np.array(list(self.initial_bottom.values()), dtype=np.float64),
            max_steps=np.array(-1 if self.max_steps is None else self.max_steps),
            **(self.env_states.to_arrays() if self.env_states is not None else {}),
        )
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> Trace:
        z = np.load(io.BytesIO(data), allow_pickle=False)
        step = int(z["success_step"])
        max_steps = int(z["max_steps"]) if "max_steps" in z.files else -1
        return cls(
            spec=SceneSpec.model_validate_json(z["spec"].tobytes().decode()),
            actions=z["actions"],
            qpos=z["qpos"],
            qvel=z["qvel"],
            mocap_pos=z["mocap_pos"],
            success=bool(z["success"]),
            initial_bottom=dict(zip(z["bottom_names"].tolist(), z["bottom_values"].tolist(), strict=True)),
            success_step=None if step < 0 else step,
            env_states=EnvStates.from_arrays(z),
            max_steps=None if max_steps < 0 else max_steps,
        )


class TraceRecorder:
    """Wraps an env: `reset` and `step` behave as the env's, and every state is recorded."""

    def __init__(self, env: CodaEnv):
        self.env = env
        self._begin_lists()

    def _begin_lists(self) -> None:
        self._qpos: list[np.ndarray] = []
        self._qvel: list[np.ndarray] = []
        self._mocap: list[np.ndarray] = []
        self._actions: list[np.ndarray] = []
        self._env: list = []
        self._success_step: int | None = None

    def _snap(self) -> None:
        d = self.env.data
        self._qpos.append(d.qpos.copy())
        self._qvel.append(d.qvel.copy())
        self._mocap.append(d.mocap_pos[self.env.compiled.gripper.mocap].copy())
        self._env.append(self.env.get_state())

    def begin(self) -> None:
        """Start a new recording at the env's current (just reset) state."""
        self._begin_lists()
        self._snap()

    def record(self, action, out: tuple) -> None:
        """Record one executed `action` and the env's state after it (`out` is what env.step returned)."""
        self._actions.append(np.asarray(action, dtype=np.float64))  # as executed (a float32 copy would not replay)
        self._snap()
        if out[4].get("success") and self._success_step is None:
            self._success_step = len(self._actions)

    def reset(self, **kwargs) -> dict:
        obs = self.env.reset(**kwargs)
        self.begin()
        return obs

    def step(self, action):
        out = self.env.step(action)
        self.record(action, out)
        return out

    def step_chunk(self, chunk):
        total, executed = 0.0, 0
        out = None
        for a in np.asarray(chunk):
            out = self.step(a)
            total += out[1]
            executed += 1
            if out[2] or out[3]:
                break
        obs, _, term, trunc, info = out
        return obs, total, term, trunc, {**info, "executed": executed}

    def trace(self, **meta) -> Trace:
        return Trace(
            spec=self.env.spec,
            actions=np.asarray(self._actions, dtype=np.float64).reshape(-1, 7),
            qpos=np.asarray(self._qpos),
            qvel=np.asarray(self._qvel),
            mocap_pos=np.asarray(self._mocap),
            success=self._success_step is not None,
            initial_bottom=dict(self.env.state.initial_bottom),
            success_step=self._success_step,
            meta=meta,
            env_states=EnvStates.stack(self._env),
            max_steps=self.env.max_steps,
        )


class ActionPerturbation(Protocol):
    """Changes the actions an env executes (and may bias the target pose its driver reads back)."""

    def __call__(self, env: RecordingEnv, action: np.ndarray) -> np.ndarray: ...

    def target_offset(self) -> np.ndarray: ...


class RecordingEnv(CodaEnv):
    """A `CodaEnv` that records a trace of every reset/step and passes actions through a perturbation."""

    def __init__(self, spec, perturb: ActionPerturbation | None = None, max_steps: int | None = None):
        super().__init__(spec, max_steps=max_steps)
        self.perturb = perturb
        self.recorder = TraceRecorder(self)

    def reset(self, seed: int | None = None, gripper_noise: float = 0.0) -> dict:
        obs = super().reset(seed=seed, gripper_noise=gripper_noise)
        self.recorder.begin()
        return obs

    def step(self, action):
        a = np.asarray(action, dtype=np.float64).copy()
        if self.perturb is not None:
            a = np.asarray(self.perturb(self, a), dtype=np.float64)
        out = super().step(a)
        self.recorder.record(a, out)
        return out

    def target_pose(self) -> tuple[np.ndarray, np.ndarray]:
        pos, quat = super().target_pose()
        if self.perturb is not None:
            pos = pos - self.perturb.target_offset()
        return pos, quat

    def trace(self, **meta) -> Trace:
        return self.recorder.trace(**meta)


def planner_trace(spec, perturb: ActionPerturbation | None = None, **meta) -> tuple[Demo, Trace]:
    """Run the scripted planner on `spec` (through `perturb`) and return (demo, trace)."""
    env = RecordingEnv(spec, perturb)
    demo = run_planner(env)
    return demo, env.trace(**meta)


# --- takeover: the planner from a restored state ------------------------------------------------------------


def satisfied(env: CodaEnv, atom: Atom) -> bool:
    """Whether a subgoal needs no more action in the env's state: its atom holds and, for a placement, the
    object is no longer held (a held object still has to be released)."""
    if not atom.evaluate(env.state):
        return False
    return atom.op in ("open_fraction", "lifted") or not h.is_grasped(env.state, atom.args[0])


def run_planner_from(env: CodaEnv, budget: int | None = None) -> Demo:
    """Execute the scripted plan from the env's current state (no reset), e.g. a state restored by
    `Trace.env_at(t)`: the planner gets `budget` control steps from here (default: the env's episode length;
    the env's `max_steps` becomes its step counter + budget), and the subgoals already satisfied in this state
    are skipped (`satisfied`; `demo.subgoals` lists the ones planned); what `sim.planner.refusal` refuses in
    this state is not run (no steps, `failure` says why). The demo's observations, actions and
    `steps` count from the current state; `demo.success` is the env's success at the end. From a just-reset env
    where no subgoal holds yet this is `run_planner`'s plan, action for action."""
    start, steps = env.steps, int(budget if budget is not None else env.max_steps)
    if steps <= 0:
        raise ValueError(f"the step budget must be positive, got {budget}")
    env.max_steps = start + steps
    demo = Demo()
    if env.success():
        demo.success = True
        return demo
    reason = refusal(env)  # judged in this state, e.g. upright(x) false here: it stands nothing up
    if reason is not None:
        demo.failure = f"not planned: {reason}"
        return demo
    goals = [a for a in subgoals(env) if not satisfied(env, a)]
    if not goals:
        demo.failure = f"no unsatisfied plannable goal in {env.spec.task.success} from step {start}"
        return demo
    return execute_plan(env, demo, env.observe(), goals, start)
