"""Exact mid-episode restore from traces (`Trace.env_at`), replay-checked, and the planner from a restored state
(`run_planner_from`)."""

from __future__ import annotations

import io

import mujoco
import numpy as np
import pytest

from sim.constants import OBS_OBJECTS, OBS_PROPRIO
from sim.env import CodaEnv, EnvStates
from sim.families import sample_spec
from sim.planner import run_planner
from sim.trace import RecordingEnv, Trace, planner_trace, run_planner_from, satisfied


class Jitter:
    """Executes the planner's actions with seeded position noise (a policy-like, imperfect controller)."""

    def __init__(self, seed: int, sigma: float = 0.006):
        self.rng, self.sigma = np.random.default_rng(seed), sigma

    def __call__(self, env, action):
        action = action.copy()
        action[:3] += self.rng.normal(0.0, self.sigma, 3)
        return action

    def target_offset(self):
        return np.zeros(3)


def _recorded(spec, perturb=None):
    """(observations before each action and at the end, trace) of a planner run through `perturb`."""
    env = RecordingEnv(spec, perturb)
    demo = run_planner(env)
    return [*demo.observations, env.observe()], Trace.from_bytes(env.trace().to_bytes())


def _replay_gap(env: CodaEnv, trace: Trace, t: int) -> tuple[float, bool, int | None]:
    """Execute the recorded actions from step t: the largest |qpos|/|qvel| gap to the recorded states, the final
    success and the success step."""
    gap, first = 0.0, None
    for k in range(t, trace.steps):
        _, _, term, _, info = env.step(trace.actions[k])
        gap = max(gap, float(np.abs(env.data.qpos - trace.qpos[k + 1]).max()),
                  float(np.abs(env.data.qvel - trace.qvel[k + 1]).max()))
        if info["success"] and first is None:
            first = k + 1
    return gap, env.success(), first


CASES = [("pick_place", 2, None), ("stack", 1, None), ("pick_place", 3, 7), ("stack", 2, 11)]


@pytest.mark.parametrize("family,seed,jitter", CASES)
def test_env_at_replays_bit_for_bit(family, seed, jitter):
    spec = sample_spec(family, seed)
    obs, trace = _recorded(spec, Jitter(jitter) if jitter is not None else None)
    assert trace.exact and len(trace.env_states) == trace.steps + 1 and trace.max_steps == CodaEnv(spec).max_steps
    for t in sorted({0, 1, 5, trace.steps // 2, trace.steps - 1, trace.steps}):
        env = trace.env_at(t, strict=True)
        assert env.steps == t and env.state.initial_bottom == trace.initial_bottom
        np.testing.assert_array_equal(env.get_state().physics, trace.env_states.physics[t])
        here = env.observe()  # what the controller saw at step t, bit for bit
        for key in (OBS_OBJECTS, OBS_PROPRIO):
            np.testing.assert_array_equal(here[key], obs[t][key])
        gap, success, step = _replay_gap(env, trace, t)
        assert gap == 0.0, f"step {t}: replay drifted by {gap}"
        assert success == trace.success and (step == trace.success_step or t >= (trace.success_step or 10**9))


def test_todays_restore_is_not_exact():
    """qpos/qvel (state_at) plus the recorded gripper target is what traces held before: the replay from it drifts
    (no solver warm start, target orientation or gripper command), and the env's physics state alone
    (`set_state`, a fresh forward pass) gives observations one substep off — what `env_at` avoids."""
    spec = sample_spec("pick_place", 3)
    obs, trace = _recorded(spec, Jitter(7))
    gaps, obs_gaps = [], []
    for t in (3, 6, trace.steps // 2):
        env = trace.replay_env()
        trace.state_at(t, env)
        g = env.compiled.gripper
        env.data.mocap_pos[g.mocap] = trace.mocap_pos[t]
        env._target_pos, env._steps = trace.mocap_pos[t].copy(), t
        mujoco.mj_forward(env.model, env.data)
        gaps.append(_replay_gap(env, trace, t)[0])
        fresh = CodaEnv(spec)
        fresh.reset()
        fresh.set_state(trace.env_states[t])
        obs_gaps.append(float(np.abs(fresh.observe()[OBS_OBJECTS] - obs[t][OBS_OBJECTS]).max()))
    assert max(gaps) > 1e-6, gaps
    assert max(obs_gaps) > 0.0, obs_gaps


def _old_format(trace: Trace) -> bytes:
    """The bytes a trace had before env states were recorded."""
    buf = io.BytesIO()
    np.savez_compressed(
        buf, spec=np.frombuffer(trace.spec.model_dump_json().encode(), dtype=np.uint8),
        actions=trace.actions.astype(np.float32), qpos=trace.qpos, qvel=trace.qvel, mocap_pos=trace.mocap_pos,
        success=np.array(trace.success), success_step=np.array(-1 if trace.success_step is None else trace.success_step),
        bottom_names=np.array(list(trace.initial_bottom), dtype=str),
        bottom_values=np.array(list(trace.initial_bottom.values()), dtype=np.float64))
    return buf.getvalue()


def test_old_traces_still_load_and_restore_approximately():
    spec = sample_spec("pick_place", 2)
    _, trace = planner_trace(spec)
    old = Trace.from_bytes(_old_format(trace))
    assert old.env_states is None and not old.exact and old.max_steps is None and old.steps == trace.steps
    t = trace.steps // 2
    np.testing.assert_array_equal(old.state_at(t).data.qpos, trace.state_at(t).data.qpos)  # as before
    env = old.env_at(t)
    np.testing.assert_array_equal(env.data.qpos, trace.qpos[t])
    assert env.steps == t and env.state.initial_bottom == trace.initial_bottom
    np.testing.assert_allclose(env.target_pose()[0], trace.mocap_pos[t])
    with pytest.raises(ValueError, match="no env states"):
        old.env_at(t, strict=True)
    with pytest.raises(IndexError):
        trace.env_at(trace.steps + 1)


def test_env_states_round_trip():
    env = CodaEnv(sample_spec("stack", 0))
    env.reset()
    states = [env.get_state()]
    for _ in range(3):
        env.step([0.01, 0.0, -0.01, 0.0, 0.0, 0.05, 1.0])
        states.append(env.get_state())
    stacked = EnvStates.stack(states)
    back = EnvStates.from_arrays(stacked.to_arrays())
    assert len(back) == 4 and EnvStates.from_arrays({}) is None
    for s, b in zip(states, (back[i] for i in range(4)), strict=True):
        np.testing.assert_array_equal(s.physics, b.physics)
        assert (s.steps, s.gripper_cmd, s.success) == (b.steps, b.gripper_cmd, b.success)
        np.testing.assert_array_equal(s.target_quat, b.target_quat)


# --- the planner from a restored state ---------------------------------------------------------------------


def test_run_planner_from_reset_is_run_planner():
    spec = sample_spec("stack", 1)
    demo = run_planner(CodaEnv(spec))
    env = CodaEnv(spec)
    env.reset()
    again = run_planner_from(env)
    np.testing.assert_array_equal(again.action_array(), demo.action_array())
    assert again.success == demo.success and again.steps == demo.steps and again.subgoals == demo.subgoals


def test_takeover_mid_episode_has_its_own_budget():
    spec = sample_spec("pick_place", 2)
    demo, trace = planner_trace(spec)
    t = trace.steps - 4
    env = trace.env_at(t)
    window = run_planner_from(env)
    assert window.success and env.steps == t + window.steps and env.max_steps == t + CodaEnv(spec).max_steps
    np.testing.assert_array_equal(window.observations[0][OBS_OBJECTS], trace.env_at(t).observe()[OBS_OBJECTS])
    short = trace.env_at(2)
    cut = run_planner_from(short, budget=3)
    assert cut.steps == 3 and short.max_steps == 5 and not cut.success
    with pytest.raises(ValueError):
        run_planner_from(trace.env_at(2), budget=0)


def test_takeover_skips_satisfied_subgoals():
    """prep scenes have several goals: after the planner finished the first one, a takeover plans only the rest."""
    spec = next(s for s in (sample_spec("prep", k) for k in range(6)) if len(_goals(s)) >= 2)
    demo, trace = planner_trace(spec)
    assert demo.success
    first = next(a for a in _goals(spec) if str(a) == demo.subgoals[0])
    env = trace.env_at(0)
    done = 0
    while not satisfied(env, first):
        env.step(trace.actions[done])
        done += 1
    env = trace.env_at(done)
    window = run_planner_from(env)
    assert str(first) not in window.subgoals and window.subgoals and window.success
    assert window.steps < demo.steps


def _goals(spec):
    from sim.planner import order_subgoals

    return order_subgoals(spec.task.success)
