"""The Panda embodiment: built from robosuite's model, driven by the same 7-D delta-pose actions, planned for.

The model comes from the robosuite wheel in the external environment (`scripts/setup --external`); without it
these tests skip, saying so."""

from pathlib import Path

import numpy as np
import pytest

import sim
from sim.constants import GRIPPER_HOME, MAX_DPOS, OBS_PROPRIO
from sim.env import CodaEnv
from sim.families import sample_spec
from sim.panda import PANDA_FINGER_OPEN, PandaUnavailable, assets_dir
from sim.planner import run_planner
from sim.scene import SceneError
from sim.spec import SceneSpec
from sim.verify import verify_program

try:
    assets_dir()
except PandaUnavailable as exc:
    pytest.skip(str(exc), allow_module_level=True)


def panda(family: str, seed: int) -> SceneSpec:
    spec = sample_spec(family, seed)
    return SceneSpec.model_validate({**spec.model_dump(), "robot": "panda"})


@pytest.fixture(scope="module")
def env():
    return CodaEnv(panda("pick_place", 0))


def test_robot_is_part_of_the_hash_only_when_not_the_default():
    spec = sample_spec("pick_place", 0)
    assert "robot" not in spec.canonical_json()
    assert panda("pick_place", 0).spec_hash() != spec.spec_hash()
    assert SceneSpec.model_validate_json(panda("pick_place", 0).model_dump_json()).robot == "panda"


def test_unknown_robot_is_refused_naming_the_valid_ones():
    with pytest.raises(SceneError, match="valid robots: gripper, panda"):
        sim.Scene("pick_place", seed=0, robot="ur5")
    with pytest.raises(ValueError, match="valid robots"):
        SceneSpec.model_validate({**sample_spec("stack", 0).model_dump(), "robot": "ur5"})


def test_reset_puts_the_hand_at_home_pointing_down_and_open(env):
    obs = env.reset()
    p = obs[OBS_PROPRIO]
    np.testing.assert_allclose(p[0:3], GRIPPER_HOME, atol=3e-3)
    assert float(p[3]) == pytest.approx(1.0, abs=2e-3)  # identity orientation (w >= 0, as the gripper's): fingers down
    g = env.compiled.gripper
    opening = [env.data.qpos[q] for q in g.finger_qpos]
    np.testing.assert_allclose(opening, PANDA_FINGER_OPEN, atol=2e-3)
    assert p[10] == pytest.approx(1.0, abs=0.05)


def test_delta_pose_actions_move_the_tcp_as_for_the_gripper(env):
    env.reset()
    start = env.observe()[OBS_PROPRIO][0:3].copy()
    for _ in range(4):
        env.step(np.array([MAX_DPOS, 0, 0, 0, 0, 0, -1.0]))
    for _ in range(2):  # the arm trails its target by ~2.5 cm at full speed
        obs, *_ = env.step(np.array([0, 0, 0, 0, 0, 0, -1.0]))
    moved = obs[OBS_PROPRIO][0:3] - start
    assert moved[0] == pytest.approx(4 * MAX_DPOS, abs=0.015) and abs(moved[1]) < 0.01 and abs(moved[2]) < 0.01
    for _ in range(3):
        env.step(np.array([0, 0, 0, 0, 0, 0.25, -1.0]))  # yaw 0.75 rad about world z
    for _ in range(3):
        obs, *_ = env.step(np.zeros(7) + [0, 0, 0, 0, 0, 0, -1.0])
    w, z = obs[OBS_PROPRIO][3], obs[OBS_PROPRIO][6]
    assert (2 * np.arctan2(z, w) + np.pi) % (2 * np.pi) - np.pi == pytest.approx(0.75, abs=0.05)
    for _ in range(6):
        env.step(np.array([0, 0, 0, 0, 0, 0, 1.0]))
    assert env.observe()[OBS_PROPRIO][10] < 0.2  # closed on nothing


@pytest.mark.parametrize("family", ["pick_place", "stack", "prep"])
def test_planner_demonstrates_with_the_panda(family):
    done = 0
    for seed in range(3):
        env = CodaEnv(panda(family, seed))
        run_planner(env, seed=seed)
        done += env.success()
    assert done == 3


def test_panda_steps_restore_exactly():
    env = CodaEnv(panda("stack", 1))
    env.reset()
    rng = np.random.default_rng(0)
    states = [env.get_state()]
    for _ in range(5):
        env.step(np.concatenate([rng.uniform(-0.03, 0.03, 3), rng.uniform(-0.1, 0.1, 3), [rng.uniform(-1, 1)]]))
        states.append(env.get_state())
    other = CodaEnv(panda("stack", 1))
    other.reset()
    assert other.restore_step(states[3], states[4])


def test_a_scene_program_names_the_robot_and_verifies_in_the_sandbox():
    source = (Path(__file__).parents[2] / "examples" / "scenes" / "pick_place.py").read_text()
    source = source.replace('Scene(family="pick_place", seed=seed)', 'Scene(family="pick_place", seed=seed, robot="panda")')
    assert 'robot="panda"' in source
    report = verify_program(source, seed=0, planner=True)
    assert report.passed, report.summary()
    assert report.spec["robot"] == "panda"
    assert report.spec_hash == SceneSpec.model_validate(report.spec).spec_hash()


def test_a_panda_policy_trains_on_panda_demos_and_is_evaluated_with_the_panda(tmp_path):
    from policy.evaluate import eval_specs, policy_robot, train_specs
    from policy.service import TrainerService

    service = TrainerService(tmp_path)
    out = service.sft(["pick_place"], 2, 2, robot="panda")
    assert out["demos"] == 2 and policy_robot(service.state) == "panda"
    demos = service.demos["pick_place:2:panda"]
    hashes = {s.spec_hash() for s in train_specs("pick_place", 2, start=300_000, robot="panda")}
    assert {d.spec_hash for d in demos} == hashes
    row = service.evaluate(["pick_place"], ["in"], 1)[0]
    assert row["n"] == 1
    gripper, arm = eval_specs("pick_place", "in", 1)[0], eval_specs("pick_place", "in", 1, "panda")[0]
    assert arm.robot == "panda" and arm.with_robot("gripper") == gripper  # the same scene, another body


def test_a_run_store_makes_every_scene_for_its_robot(tmp_path):
    from sim.checks import Verifier
    from sim.scene_store import SceneStore

    store = SceneStore(tmp_path, robot="panda")
    info = store.sample("stack", 0)
    assert store.spec(info.scene_id).robot == "panda"
    source = (Path(__file__).parents[2] / "examples" / "scenes" / "stack.py").read_text()
    created = store.create(source, seed=1)  # the program names no robot: the run's is used
    assert store.spec(created.scene_id).robot == "panda"
    result = Verifier(store).verify_program(source, seed=1, planner=True)
    assert result.passed and result.spec_hash == created.scene_id
    plain = SceneStore(tmp_path / "plain")
    assert plain.spec(plain.create(source, seed=1).scene_id).robot == "gripper"
    with pytest.raises(ValueError, match="valid robots"):
        SceneStore(tmp_path / "bad", robot="ur5")

