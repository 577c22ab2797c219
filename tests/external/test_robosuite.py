"""The robosuite adapter against robosuite itself (skipped without the external venv).

The observation has this project's layout; scripted open-loop actions move the Panda the way they move this
project's gripper (the action mapping's signs and frames); success is robosuite's `_check_success()`."""

from __future__ import annotations

import numpy as np
import pytest

from policy.external.control import axis_angle_from_mat, mat_from_quat
from sim.constants import (
    MAX_OBJECTS,
    OBJ_DIM,
    OBS_INSTRUCTION,
    OBS_OBJECT_CATEGORY,
    OBS_OBJECT_MASK,
    OBS_OBJECTS,
    OBS_PROPRIO,
    PROPRIO_DIM,
    ROLES,
)


@pytest.fixture(scope="module")
def lift(robosuite_available):
    from policy.external import make_adapter

    env = make_adapter("robosuite", "Lift")
    yield env
    env.close()


def check_layout(obs: dict, n_objects: int) -> None:
    assert obs[OBS_OBJECTS].shape == (MAX_OBJECTS, OBJ_DIM) and obs[OBS_OBJECTS].dtype == np.float32
    assert obs[OBS_OBJECT_MASK].shape == (MAX_OBJECTS,) and obs[OBS_OBJECT_MASK].dtype == np.bool_
    assert obs[OBS_OBJECT_CATEGORY].shape == (MAX_OBJECTS,) and obs[OBS_OBJECT_CATEGORY].dtype == np.int64
    assert obs[OBS_PROPRIO].shape == (PROPRIO_DIM,) and obs[OBS_PROPRIO].dtype == np.float32
    assert isinstance(obs[OBS_INSTRUCTION], str) and obs[OBS_INSTRUCTION]
    assert np.isfinite(obs[OBS_OBJECTS]).all() and np.isfinite(obs[OBS_PROPRIO]).all()
    assert obs[OBS_OBJECT_MASK].sum() == n_objects and obs[OBS_OBJECT_MASK][:n_objects].all()
    assert (obs[OBS_OBJECT_CATEGORY][:n_objects] >= 0).all() and (obs[OBS_OBJECT_CATEGORY][n_objects:] == -1).all()
    tokens = obs[OBS_OBJECTS]
    assert not tokens[n_objects:].any()
    assert np.allclose(np.linalg.norm(tokens[:n_objects, 3:7], axis=1), 1, atol=1e-5)
    assert (tokens[:n_objects, 13:16] > 0).all()
    assert np.allclose(tokens[:n_objects, 21:].sum(axis=1), 1)  # one role each
    assert np.allclose(tokens[:n_objects, 16:19], tokens[:n_objects, 0:3] - obs[OBS_PROPRIO][0:3], atol=1e-6)
    assert np.isclose(np.linalg.norm(obs[OBS_PROPRIO][3:7]), 1, atol=1e-5)
    assert 0 <= obs[OBS_PROPRIO][10] <= 1.0001 and obs[OBS_PROPRIO][11] == -1


def test_lift_observation_layout_and_frames(lift):
    from sim.assets import category_index

    obs = lift.reset(seed=0)
    check_layout(obs, 1)
    cube, proprio = obs[OBS_OBJECTS][0], obs[OBS_PROPRIO]
    assert obs[OBS_INSTRUCTION] == "pick up the block and hold it in the air"
    assert obs[OBS_OBJECT_CATEGORY][0] == category_index("block") and cube[21 + ROLES.index("target")] == 1
    assert np.allclose(cube[13:16], 0.021, atol=0.0015)  # Lift's cube: half size 2.0-2.2 cm
    assert 0 <= cube[2] - cube[15] < 0.015  # on the table (z = 0 here); robosuite drops it from 1 cm at reset
    assert 0.4 < cube[0] < 0.7 and abs(cube[1]) < 0.1  # in front of the robot base (the origin)
    assert np.allclose(proprio[0:3], [0.46, 0.0, 0.22], atol=0.05)  # the Panda's start, near GRIPPER_HOME
    R = mat_from_quat(proprio[3:7])
    assert R[2, 2] > 0.95 and R[0, 0] > 0.95  # fingers down, x forward: near this project's home orientation
    assert lift.steps_per_action == 2 and lift.info["control_freq"] == 20
    # robosuite's Panda gripper steps its command 0.2 per control step: 0.4 per action, a full close in 5
    assert lift.info["gripper_speed"] == pytest.approx(0.2) and lift.gripper_rate == pytest.approx(0.4)
    assert lift.start_robot()["gripper_rate"] == pytest.approx(0.4)


def test_reset_seeds_are_reproducible(lift):
    a = lift.reset(seed=3)[OBS_OBJECTS][0, :7].copy()
    b = lift.reset(seed=4)[OBS_OBJECTS][0, :7].copy()
    c = lift.reset(seed=3)[OBS_OBJECTS][0, :7].copy()
    assert np.allclose(a, c, atol=1e-6) and not np.allclose(a, b, atol=1e-4)


def test_settle_starts_the_episode_with_the_cube_at_rest(lift, robosuite_available):
    """With `settle`, the first observation shows Lift's cube resting on the table (robosuite drops it from 1 cm),
    the arm where it started and the fingers as they were."""
    from policy.external import make_adapter

    before = lift.reset(seed=0)
    settled = make_adapter("robosuite", "Lift", settle=10)
    try:
        after = settled.reset(seed=0)
    finally:
        settled.close()
    cube0, cube1 = before[OBS_OBJECTS][0], after[OBS_OBJECTS][0]
    assert cube0[2] - cube0[15] > 0.008  # unsettled: about 1 cm above its resting height
    assert abs(cube1[2] - cube1[15]) < 0.003 and np.allclose(cube1[0:2], cube0[0:2], atol=0.003)
    assert np.allclose(after[OBS_PROPRIO][0:3], before[OBS_PROPRIO][0:3], atol=0.005)
    assert abs(after[OBS_PROPRIO][10] - before[OBS_PROPRIO][10]) < 0.02


@pytest.mark.parametrize("axis,sign", [(0, 1), (0, -1), (1, 1), (1, -1), (2, 1)])
def test_scripted_translation_moves_the_gripper_that_way(lift, axis, sign):
    obs = lift.reset(seed=1)
    start = obs[OBS_PROPRIO][0:3].copy()
    a = np.zeros(7)
    a[axis], a[6] = 0.02 * sign, -1
    obs, *_ = lift.step_chunk(np.tile(a, (8, 1)))  # 8 x 2 cm commanded
    obs, *_ = lift.step_chunk(np.tile(np.r_[np.zeros(6), -1], (4, 1)))  # settle
    moved = obs[OBS_PROPRIO][0:3] - start
    assert sign * moved[axis] > 0.12, moved  # most of the 16 cm, in the commanded direction
    off = np.delete(moved, axis)
    assert np.all(np.abs(off) < 0.03), moved


def test_scripted_rotation_and_gripper_signs(lift):
    obs = lift.reset(seed=2)
    R0 = mat_from_quat(obs[OBS_PROPRIO][3:7])
    obs, *_ = lift.step_chunk(np.tile([0, 0, 0, 0, 0, 0.1, -1], (5, 1)))  # +0.5 rad about world z
    obs, *_ = lift.step_chunk(np.tile([0, 0, 0, 0, 0, 0, -1], (4, 1)))
    R1 = mat_from_quat(obs[OBS_PROPRIO][3:7])
    yaw = np.arctan2((R1 @ R0.T)[1, 0], (R1 @ R0.T)[0, 0])
    assert 0.35 < yaw < 0.65, yaw
    opened = obs[OBS_PROPRIO][10]
    assert opened > 0.7  # -1 opens
    obs, *_ = lift.step_chunk(np.tile([0, 0, 0, 0, 0, 0, 1], (6, 1)))
    assert obs[OBS_PROPRIO][10] < 0.2 and obs[OBS_PROPRIO][11] == 1  # +1 closes (nothing between the fingers)


def test_the_opening_map_makes_robosuites_gripper_hold_a_commanded_opening(robosuite_available):
    """robosuite's gripper opens fully on any negative command (`sign`, the default); with `gripper_map="opening"`
    a command of -0.3 holds the fingers at this project's half opening for it (2.5 cm per finger of robosuite's 4),
    and +1 still closes them fully."""
    from policy.external import make_adapter

    half = {}
    for mode in ("sign", "opening"):
        env = make_adapter("robosuite", "Lift", gripper_map=mode)
        try:
            env.reset(seed=1)
            obs, *_ = env.step_chunk(np.tile([0, 0, 0.02, 0, 0, 0, -0.3], (8, 1)))  # up, away from the cube
            half[mode] = float(obs[OBS_PROPRIO][10])
            obs, *_ = env.step_chunk(np.tile([0, 0, 0, 0, 0, 0, 1.0], (7, 1)))
            assert obs[OBS_PROPRIO][10] < 0.2  # closed
        finally:
            env.close()
    assert half["sign"] > 0.9 and 0.5 < half["opening"] < 0.75, half
    with pytest.raises(ValueError, match="gripper_map must be one of 'sign', 'opening'"):
        make_adapter("robosuite", "Lift", gripper_map="fast")


def test_a_gentler_rotation_gain_pulls_the_grip_site_aside_less(robosuite_available):
    """A fast roll (3 x 0.15 rad): robosuite's controller lets the orientation error pull the grip site sideways
    (control gap v2); with `rot_gain=0.5` the site strays less and the hand still turns by most of the roll."""
    from policy.external import make_adapter

    stray, turned = {}, {}
    for rot_gain in (None, 0.5):
        env = make_adapter("robosuite", "Lift", **({} if rot_gain is None else {"rot_gain": rot_gain}))
        try:
            obs = env.reset(seed=3)
            p0, R0 = obs[OBS_PROPRIO][0:3].copy(), mat_from_quat(obs[OBS_PROPRIO][3:7])
            *_, info = env.step_chunk(np.tile([0, 0, 0, 0.15, 0, 0, -1], (3, 1)))
            path = [o[OBS_PROPRIO][0:3] for o in info["observations"]]
            obs, *_, info = env.step_chunk(np.tile([0, 0, 0, 0, 0, 0, -1], (6, 1)))
            path += [o[OBS_PROPRIO][0:3] for o in info["observations"]]
            stray[rot_gain] = max(float(np.linalg.norm(p - p0)) for p in path)
            turned[rot_gain] = float(np.linalg.norm(axis_angle_from_mat(mat_from_quat(obs[OBS_PROPRIO][3:7]) @ R0.T)))
        finally:
            env.close()
    assert stray[0.5] < 0.8 * stray[None], (stray, turned)
    assert turned[None] > 0.35 and turned[0.5] > 0.35, turned


@pytest.mark.parametrize("task", ["Lift", "Stack"])
def test_canonical_yaw_observes_the_same_cubes_turned_to_the_nearest_heading(robosuite_available, task):
    """robosuite yaws its cubes anywhere in a full turn; with `canonical_yaw` (the default) each is observed by the
    quarter turn about its own axis that brings its heading within ±45° (half extents swapped with an odd number of
    quarter turns), the same for the whole episode; positions and everything else are unchanged."""
    from policy.external import make_adapter

    raw_env, env = make_adapter("robosuite", task, canonical_yaw=False), make_adapter("robosuite", task)
    try:
        turned = 0
        for seed in range(6):
            raw, obs = raw_env.reset(seed=seed)[OBS_OBJECTS], env.reset(seed=seed)[OBS_OBJECTS]
            for i in range(2 if task == "Stack" else 1):
                Rr, Rc = mat_from_quat(raw[i, 3:7]), mat_from_quat(obs[i, 3:7])
                assert abs(np.arctan2(Rc[1, 0], Rc[0, 0])) <= np.pi / 4 + 1e-4
                turn = np.arctan2((Rr.T @ Rc)[1, 0], (Rr.T @ Rc)[0, 0])  # about the body's own z axis
                assert np.isclose(turn / (np.pi / 2), round(turn / (np.pi / 2)), atol=1e-4)
                odd = round(turn / (np.pi / 2)) % 2
                assert np.allclose(obs[i, 13:15], raw[i, 13:15][::-1] if odd else raw[i, 13:15])
                turned += abs(turn) > 1e-3
            for cols in (np.s_[0:3], np.s_[7:10], np.s_[15:]):  # positions, velocities, heights, roles: unchanged
                assert np.array_equal(obs[:, cols], raw[:, cols])
        assert turned > 0  # robosuite's yaws reach beyond ±45° in six episodes
        obs, *_ = env.step_chunk(np.tile([0, 0, 0.01, 0, 0, 0, -1], (2, 1)))
        raw, *_ = raw_env.step_chunk(np.tile([0, 0, 0.01, 0, 0, 0, -1], (2, 1)))
        assert np.allclose(obs[OBS_OBJECTS][:, 0:3], raw[OBS_OBJECTS][:, 0:3])
    finally:
        raw_env.close()
        env.close()


def scripted_lift(env, obs, steps: int = 90):
    """A hand-written grasp (not learned, not robosuite's code): above the cube, down, close, up."""
    info = {"success": False}
    for t in range(steps):
        cube, tcp = obs[OBS_OBJECTS][0, 0:3], obs[OBS_PROPRIO][0:3]
        if t < 25:
            goal, grip = cube + [0, 0, 0.08], -1
        elif t < 40:
            goal, grip = cube + [0, 0, 0.0], -1
        elif t < 48:
            goal, grip = tcp, 1
        else:
            goal, grip = tcp + [0, 0, 0.03], 1
        a = np.r_[np.clip(goal - tcp, -0.03, 0.03), 0, 0, 0, grip]
        obs, _, terminated, truncated, info = env.step_chunk(a[None])
        if terminated or truncated:
            break
    return obs, info


def test_success_comes_from_robosuites_check(lift):
    obs = lift.reset(seed=5)
    assert not lift.success() and not lift.benchmark_success()
    obs, info = scripted_lift(lift, obs)
    assert info["success"] and lift.success()
    assert lift.benchmark_success()  # robosuite's own _check_success() on the final state agrees
    assert obs[OBS_OBJECTS][0, 2] - obs[OBS_OBJECTS][0, 15] > 0.02  # the cube's bottom is off the table
    with pytest.raises(RuntimeError, match="reset first"):
        lift.begin_chunk(np.zeros((1, 7)))


def test_chunks_are_checked(lift):
    lift.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        lift.step_chunk(np.zeros((8, 6)))
    with pytest.raises(ValueError, match="NaN"):
        lift.step_chunk(np.full((2, 7), np.nan))


@pytest.mark.parametrize("task,n,roles", [("Stack", 2, ("target", "support")),
                                          ("PickPlaceCan", 2, ("target", "receptacle")),
                                          ("Door", 1, ("articulated",))])
def test_other_tasks_observations(robosuite_available, task, n, roles):
    from policy.external import make_adapter

    with make_adapter("robosuite", task) as env:
        obs = env.reset(seed=0)
        check_layout(obs, n)
        tokens = obs[OBS_OBJECTS]
        for i, role in enumerate(roles):
            assert tokens[i, 21 + ROLES.index(role)] == 1
        if task == "Door":
            assert tokens[0, 20] == 1 and abs(tokens[0, 19]) < 0.05  # articulated, closed
        if task == "PickPlaceCan":
            assert tokens[1, 1] > tokens[0, 1] + 0.2  # the target quadrant is in the right-hand bin
        obs, _, terminated, truncated, info = env.step_chunk(np.tile([0, 0, 0.01, 0, 0, 0, -1], (8, 1)))
        check_layout(obs, n)
        assert info["executed"] == 8 and info["external_steps"] == 16 and not info["success"]
        assert len(info["observations"]) == 8 and env.steps == 8
