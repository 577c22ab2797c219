"""Where the hand starts an episode (`SceneSpec.start`): validation, hashing, the scene program, the environment
and the planner, for the floating gripper and the Panda."""

from pathlib import Path

import numpy as np
import pytest

import sim
from sim.constants import GRIPPER_HOME, OBS_PROPRIO
from sim.env import CodaEnv
from sim.families import sample_spec
from sim.planner import run_planner
from sim.scene import SceneError, to_program
from sim.spec import RobotStart, SceneSpec
from sim.verify import verify_program

ROBOSUITE = {"pos": (0.46, 0.0, 0.22), "quat": (0.997, 0.003, -0.075, 0.008), "opening": 0.52}
"""robosuite's Panda at reset, in this project's frame (docs/EXTERNAL.md)"""


def started(spec: SceneSpec, start: dict = ROBOSUITE) -> SceneSpec:
    return spec.with_start(start)


def test_a_scene_without_a_start_hashes_as_before_and_one_with_a_start_differs():
    spec = sample_spec("pick_place", 0)
    assert "start" not in spec.canonical_json() and spec.start is None
    assert started(spec).spec_hash() != spec.spec_hash()
    assert SceneSpec.model_validate_json(started(spec).model_dump_json()).start == RobotStart(**ROBOSUITE)
    assert started(spec).with_start(None).spec_hash() == spec.spec_hash()


@pytest.mark.parametrize(("bad", "says"), [
    ({"pos": (0.46, 0.0, 0.01)}, "start pos z must lie in [0.08, 0.6]"),
    ({"pos": (5.0, 0.0, 0.2)}, "start pos x must lie in [0.2, 0.9]"),
    ({"quat": (0.7071, 0.7071, 0.0, 0.0)}, "tilts the fingers 1.57 rad"),
    ({"quat": (float("nan"), 0.0, 0.0, 0.0)}, "finite unit quaternion"),
    ({"quat": (3.0, 0.0, 0.0, 0.0)}, "finite unit quaternion"),
    ({"opening": 1.5}, "less than or equal to 1"),
])
def test_a_start_the_hand_cannot_take_is_refused_saying_why(bad, says):
    with pytest.raises(ValueError, match=says.replace("[", r"\[").replace("]", r"\]")):
        RobotStart(**bad)


def test_any_yaw_is_a_valid_start_and_w_is_kept_non_negative():
    yawed = RobotStart(quat=(np.cos(1.2), 0.0, 0.0, np.sin(1.2)))  # 137° about the vertical: fingers still down
    assert yawed.quat[0] >= 0
    assert RobotStart(quat=(-1.0, 0.0, 0.0, 0.0)).quat == (1.0, 0.0, 0.0, 0.0)


@pytest.mark.parametrize("robot", ["gripper", "panda"])
def test_reset_puts_the_hand_where_the_scene_says(robot):
    if robot == "panda":
        from sim.panda import PandaUnavailable, assets_dir

        try:
            assets_dir()
        except PandaUnavailable as exc:
            pytest.skip(str(exc))
    spec = sample_spec("stack", 2).with_robot(robot)
    env = CodaEnv(started(spec))
    p = env.reset()[OBS_PROPRIO]
    np.testing.assert_allclose(p[0:3], ROBOSUITE["pos"], atol=3e-3)
    np.testing.assert_allclose(p[3:7], np.array(ROBOSUITE["quat"]) / np.linalg.norm(ROBOSUITE["quat"]), atol=5e-3)
    assert p[10] == pytest.approx(0.52, abs=0.03) and p[11] == -1.0
    home = CodaEnv(spec).reset()[OBS_PROPRIO]
    np.testing.assert_allclose(home[0:3], GRIPPER_HOME, atol=3e-3)
    assert home[10] == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("family", ["pick_place", "stack", "articulated", "prep"])
def test_the_planner_demonstrates_from_a_lower_tilted_half_open_start(family):
    solved = sum(run_planner(CodaEnv(started(sample_spec(family, s))), seed=0).success for s in range(3))
    assert solved == 3


def test_a_scene_program_sets_the_start_rebuilds_it_exactly_and_verifies_in_the_sandbox():
    spec = started(sample_spec("pick_place", 4))
    source = to_program(spec)
    assert "scene.set_start(pos=(0.46, 0.0, 0.22), quat=(0.997, 0.003, -0.075, 0.008), opening=0.52)" in source
    report = verify_program(source, seed=spec.seed, planner=True)
    assert report.passed, report.summary()
    again = verify_program(to_program(SceneSpec.model_validate(report.spec)), seed=spec.seed)
    assert again.spec_hash == report.spec_hash and report.spec["start"]["opening"] == 0.52


def test_the_program_facade_refuses_a_bad_start_with_one_line():
    source = (Path(__file__).parents[2] / "examples" / "scenes" / "pick_place.py").read_text()
    for call, says in (("scene.set_start(pos='high')", "pos must be 3 numbers"),
                       ("scene.set_start(opening=True)", "opening must be a number"),
                       ("scene.set_start(pos=(0.4, 0.0, 0.02))", "start pos z must lie in")):
        report = verify_program(source + "\n" + call + "\n", seed=0)
        assert not report.passed and says in report.summary()
    with pytest.raises(SceneError, match="tilts the fingers"):
        scene = sim.Scene("pick_place", seed=0)
        scene.set_start(quat=(0.7071, 0.0, 0.7071, 0.0))


def test_other_start_moves_only_the_hand_within_its_ranges_and_the_planner_still_demonstrates():
    from sim.engine.variations import START_RANGES, operator_table, other_start

    spec = sample_spec("stack", 5)
    rng = np.random.default_rng(0)
    for _ in range(6):
        out = other_start(spec, rng)
        assert out.meta["operator"] == "other_start" and out.start is not None
        assert out.model_dump(exclude={"start", "meta"}) == spec.model_dump(exclude={"start", "meta"})
        d = np.asarray(out.start.pos) - GRIPPER_HOME
        for k, v in zip(("dx", "dy", "dz"), d, strict=True):
            assert START_RANGES[k][0] - 1e-4 <= v <= START_RANGES[k][1] + 1e-4
        w, x, y, _ = out.start.quat
        assert np.arccos(np.clip(1 - 2 * (x * x + y * y), -1, 1)) <= START_RANGES["tilt"][1] + 1e-4
        assert START_RANGES["opening"][0] <= out.start.opening <= START_RANGES["opening"][1]
    assert run_planner(CodaEnv(out), seed=0).success
    assert "other_start" in operator_table("layout")
