"""A slow gripper (`RobotStart.gripper_rate`): the fingers' target moves towards the command by at most the rate
per action, as robosuite's Panda gripper does; hashing, validation, the environment, exact restores, the scene
program and the planner, which waits for the fingers."""

from pathlib import Path

import numpy as np
import pytest

from sim.constants import OBS_PROPRIO
from sim.env import CodaEnv
from sim.families import sample_spec
from sim.planner import run_planner
from sim.scene import to_program
from sim.spec import RobotStart, SceneSpec
from sim.verify import verify_program

ROBOSUITE = {"pos": (0.46, 0.0, 0.22), "quat": (0.997, 0.003, -0.075, 0.008), "opening": 0.52}
CLOSE = np.array([0, 0, 0, 0, 0, 0, 1.0])


def slow(spec: SceneSpec, rate: float = 0.4, **start) -> SceneSpec:
    return spec.with_start({**start, "gripper_rate": rate})


def test_a_start_without_a_rate_hashes_as_before_and_a_rate_is_part_of_the_scene():
    spec = sample_spec("pick_place", 0).with_start(ROBOSUITE)
    assert "gripper_rate" not in spec.canonical_json() and spec.start.gripper_rate is None
    rated = slow(spec, **ROBOSUITE)
    assert rated.spec_hash() != spec.spec_hash() and '"gripper_rate":0.4' in rated.canonical_json()
    assert SceneSpec.model_validate_json(rated.model_dump_json()).start.gripper_rate == 0.4


@pytest.mark.parametrize(("rate", "says"), [(0.0, "greater than 0"), (-0.4, "greater than 0"),
                                            (2.5, "less than or equal to 2"), (float("nan"), "finite number")])
def test_a_rate_outside_its_range_is_refused_saying_why(rate, says):
    with pytest.raises(ValueError, match=says):
        RobotStart(gripper_rate=rate)


def test_the_fingers_follow_the_command_at_the_rate_and_the_observation_shows_the_command():
    fast, rated = CodaEnv(sample_spec("stack", 1)), CodaEnv(slow(sample_spec("stack", 1)))
    g = rated.compiled.gripper
    for env in (fast, rated):
        env.reset()
    targets = []
    for _ in range(6):
        obs = rated.step(CLOSE)[0]
        fast.step(CLOSE)
        targets.append(float(rated.data.ctrl[g.actuators[0]]))
        assert obs[OBS_PROPRIO][11] == 1.0  # what the policy commanded, as the external adapters report it
    step = 0.4 * (g.geometry.finger_open - g.geometry.finger_squeeze) / 2
    np.testing.assert_allclose(np.diff([g.geometry.finger_open, *targets])[:5], -step, atol=1e-9)
    assert targets[4] == pytest.approx(g.geometry.finger_squeeze) and targets[5] == targets[4]  # closed in 5
    assert fast.data.ctrl[g.actuators[0]] == pytest.approx(g.geometry.finger_squeeze)  # at once without a rate
    assert rated.grip_wait(1.0) == 0 and rated.grip_wait(-1.0) == 5 and fast.grip_wait(-1.0) == 0
    # a command in between is a target in between, reached at the rate
    rated.step(np.array([0, 0, 0, 0, 0, 0, 0.0]))
    assert rated.grip_wait(0.0) == 2


def test_a_restored_state_keeps_the_fingers_mid_close():
    env = CodaEnv(slow(sample_spec("pick_place", 3)))
    env.reset()
    env.step(CLOSE)
    env.step(CLOSE)
    saved = env.get_state()
    first = [env.step(CLOSE)[0][OBS_PROPRIO].copy() for _ in range(3)]
    env.set_state(saved)
    again = [env.step(CLOSE)[0][OBS_PROPRIO].copy() for _ in range(3)]
    np.testing.assert_array_equal(np.stack(first), np.stack(again))


@pytest.mark.parametrize("family", ["pick_place", "stack", "articulated", "prep"])
def test_the_planner_waits_for_slow_fingers_and_still_demonstrates(family):
    for s in range(3):
        spec = sample_spec(family, 10 + s)
        fast = run_planner(CodaEnv(spec), seed=0)
        rated = run_planner(CodaEnv(slow(spec, **ROBOSUITE) if family == "pick_place" else slow(spec)), seed=0)
        assert fast.success and rated.success
        assert len(rated.actions) > len(fast.actions)  # the waits


def test_the_planner_closes_fully_before_it_lifts():
    env = CodaEnv(slow(sample_spec("pick_place", 7), rate=0.2))  # a full close in 10 actions
    demo = run_planner(env, seed=0)
    assert demo.success
    grips = np.array([a[6] for a in demo.actions])
    first_close = int(np.argmax(grips > 0.99))
    rises = [t for t, a in enumerate(demo.actions) if t > first_close and a[2] > 1e-4]
    assert rises and rises[0] - first_close >= 10  # held still, closing, for the ten actions a full close takes


def test_a_scene_program_sets_the_rate_rebuilds_it_exactly_and_the_facade_refuses_a_bad_one():
    spec = slow(sample_spec("stack", 4), **ROBOSUITE)
    source = to_program(spec)
    assert "opening=0.52, gripper_rate=0.4)" in source
    report = verify_program(source, seed=spec.seed, planner=True)
    assert report.passed, report.summary()
    again = verify_program(to_program(SceneSpec.model_validate(report.spec)), seed=spec.seed)
    assert report.spec["start"]["gripper_rate"] == 0.4 and again.spec_hash == report.spec_hash
    base = (Path(__file__).parents[2] / "examples" / "scenes" / "pick_place.py").read_text()
    for call, says in (("scene.set_start(gripper_rate='slow')", "gripper_rate must be a number"),
                       ("scene.set_start(gripper_rate=3)", "less than or equal to 2")):
        bad = verify_program(base + "\n" + call + "\n", seed=0)
        assert not bad.passed and says in bad.summary()


def test_the_panda_closes_at_the_rate_too():
    from sim.panda import PandaUnavailable, assets_dir

    try:
        assets_dir()
    except PandaUnavailable as exc:
        pytest.skip(str(exc))
    spec = slow(sample_spec("pick_place", 2).with_robot("panda"), **ROBOSUITE)
    env = CodaEnv(spec)
    env.reset()
    assert env.grip_wait(1.0) >= 2
    assert run_planner(CodaEnv(spec), seed=0).success
