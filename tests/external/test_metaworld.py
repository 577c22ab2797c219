"""The Meta-World adapter: the action mapping's math (no venv), and against Meta-World itself (skipped without
the external venv): observation layout and frames, seeds, mapped motions, and its own scripted policies
(`metaworld.policies`) driving episodes through the worker with Meta-World's `info["success"]` preserved."""

from __future__ import annotations

import numpy as np
import pytest

from policy.external.metaworld_tasks import FRAME, TASKS, action_from_metaworld, to_metaworld_axes
from sim.constants import (
    MAX_OBJECTS,
    OBS_INSTRUCTION,
    OBS_OBJECT_CATEGORY,
    OBS_OBJECT_MASK,
    OBS_OBJECTS,
    OBS_PROPRIO,
    ROLES,
)

# --- the mapping (numpy only) -------------------------------------------------------------------------


def test_action_mapping_axes_and_inverse():
    # this project's +x (forward) is Meta-World's +y, its +y is Meta-World's -x; z is shared
    assert np.allclose(to_metaworld_axes([0.02, 0, 0, 0, 0, 0, -1]), [0, 0.02, 0, 0, 0, 0, -1])
    assert np.allclose(to_metaworld_axes([0, 0.02, 0, 0, 0, 0, 1]), [-0.02, 0, 0, 0, 0, 0, 1])
    assert np.allclose(to_metaworld_axes([0, 0, -0.01, 0.1, 0.2, 0.3, 0.5]), [0, 0, -0.01, 0, 0, 0, 0.5])  # no drot
    assert np.allclose(FRAME @ FRAME.T, np.eye(3)) and np.isclose(np.linalg.det(FRAME), 1)
    # Meta-World's action (mocap +1 cm per env step along its +y, close) held for k = 8 steps -> +8 cm along x here
    a = action_from_metaworld([0, 1, 0, 1], 8, 0.01)
    assert np.allclose(a, [0.08, 0, 0, 0, 0, 0, 1])
    rng = np.random.default_rng(0)
    for _ in range(20):
        a4 = rng.uniform(-1, 1, 4)
        back = to_metaworld_axes(action_from_metaworld(a4, 8, 0.01))
        assert np.allclose(back[:3], a4[:3] * 0.08) and np.isclose(back[6], a4[3])
    assert np.allclose(action_from_metaworld([3, -3, 0, 2], 8, 0.01), [-0.08, -0.08, 0, 0, 0, 0, 1])  # clipped


def test_task_table():
    from sim.assets import category_index

    assert set(TASKS) == {"pick-place-v3", "push-v3", "drawer-open-v3", "door-open-v3"}
    for t in TASKS.values():
        for o in t.objects:
            assert o.role in ROLES and category_index(o.category) >= 0


# --- against Meta-World ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pick(metaworld_available):
    from policy.external import make_adapter

    env = make_adapter("metaworld", "pick-place-v3")
    yield env
    env.close()


def check_layout(obs: dict, n: int) -> None:
    tokens, proprio = obs[OBS_OBJECTS], obs[OBS_PROPRIO]
    assert tokens.dtype == np.float32 and proprio.dtype == np.float32 and isinstance(obs[OBS_INSTRUCTION], str)
    assert np.isfinite(tokens).all() and np.isfinite(proprio).all()
    assert obs[OBS_OBJECT_MASK].sum() == n and (obs[OBS_OBJECT_CATEGORY][:n] >= 0).all()
    assert (obs[OBS_OBJECT_CATEGORY][n:MAX_OBJECTS] == -1).all() and not tokens[n:].any()
    assert np.allclose(np.linalg.norm(tokens[:n, 3:7], axis=1), 1, atol=1e-5)
    assert (tokens[:n, 13:16] > 0).all() and np.allclose(tokens[:n, 21:].sum(axis=1), 1)
    assert np.allclose(tokens[:n, 16:19], tokens[:n, 0:3] - proprio[0:3], atol=1e-6)
    assert np.isclose(np.linalg.norm(proprio[3:7]), 1, atol=1e-5) and 0 <= proprio[10] <= 1


def test_pick_place_observation_and_frames(pick):
    from sim.assets import category_index

    obs = pick.reset(seed=0)
    check_layout(obs, 2)
    puck, goal, proprio = obs[OBS_OBJECTS][0], obs[OBS_OBJECTS][1], obs[OBS_PROPRIO]
    assert obs[OBS_OBJECT_CATEGORY][0] == category_index("cylinder_block") and puck[21 + ROLES.index("target")] == 1
    assert goal[21 + ROLES.index("receptacle")] == 1
    assert np.allclose(puck[13:16], 0.02, atol=0.002) and abs(puck[2] - puck[15]) < 0.005  # on the table (z = 0)
    assert 0.5 < puck[0] < 0.8 and abs(puck[1]) < 0.15  # in front of the robot (+x here)
    assert np.allclose(proprio[0:3], [0.6, 0.0, 0.15], atol=0.02)  # Meta-World's hand start, in this frame
    assert proprio[10] > 0.9 and proprio[11] == -1  # open
    assert pick.steps_per_action == 8 and pick.max_steps == 62 and pick.info["control_freq"] == 80


def test_home_frame_is_the_base_frame_shifted_to_this_projects_home(metaworld_available):
    """frame="home": every mapped position moves by one xy shift that puts the hand's start on GRIPPER_HOME; heights,
    relative positions and velocities stay as in the base frame."""
    from policy.external import make_adapter
    from sim.constants import GRIPPER_HOME

    base, home = make_adapter("metaworld", "pick-place-v3"), make_adapter("metaworld", "pick-place-v3", frame="home")
    try:
        a, b = base.reset(seed=5), home.reset(seed=5)
        shift = b[OBS_PROPRIO][0:3] - a[OBS_PROPRIO][0:3]
        assert np.allclose(b[OBS_PROPRIO][0:2], GRIPPER_HOME[:2], atol=1e-5) and abs(shift[2]) < 1e-6
        assert np.allclose(b[OBS_OBJECTS][:2, 0:3] - a[OBS_OBJECTS][:2, 0:3], shift, atol=1e-5)
        assert np.allclose(b[OBS_OBJECTS][:2, 3:], a[OBS_OBJECTS][:2, 3:], atol=1e-5)
        assert np.allclose(b[OBS_PROPRIO][3:], a[OBS_PROPRIO][3:], atol=1e-5)
        check_layout(b, 2)
    finally:
        base.close()
        home.close()
    with pytest.raises(ValueError, match="frame must be one of base, home"):
        make_adapter("metaworld", "pick-place-v3", frame="table")


def test_seeds_are_reproducible(pick):
    a = pick.reset(seed=3)[OBS_OBJECTS][:2, :3].copy()
    b = pick.reset(seed=4)[OBS_OBJECTS][:2, :3].copy()
    c = pick.reset(seed=3)[OBS_OBJECTS][:2, :3].copy()
    assert np.allclose(a, c, atol=1e-6) and not np.allclose(a, b, atol=1e-3)


@pytest.mark.parametrize("axis,sign", [(0, 1), (0, -1), (1, 1), (1, -1), (2, 1)])
def test_mapped_translation_moves_the_gripper_that_way(pick, axis, sign):
    start = pick.reset(seed=1)[OBS_PROPRIO][0:3].copy()
    a = np.zeros(7)
    a[axis], a[6] = 0.02 * sign, -1
    pick.step_chunk(np.tile(a, (5, 1)))  # 10 cm commanded
    obs, *_ = pick.step_chunk(np.tile(np.r_[np.zeros(6), -1], (3, 1)))
    moved = obs[OBS_PROPRIO][0:3] - start
    assert 0.08 < sign * moved[axis] < 0.12, moved
    assert np.all(np.abs(np.delete(moved, axis)) < 0.02), moved


def test_gripper_signs(pick):
    pick.reset(seed=2)
    obs, *_ = pick.step_chunk(np.tile([0, 0, 0, 0, 0, 0, 1.0], (4, 1)))
    assert obs[OBS_PROPRIO][10] < 0.1 and obs[OBS_PROPRIO][11] == 1  # +1 closes
    obs, *_ = pick.step_chunk(np.tile([0, 0, 0, 0, 0, 0, -1.0], (4, 1)))
    assert obs[OBS_PROPRIO][10] > 0.9  # -1 opens


def run_expert(env, seed: int, mapped: bool) -> tuple[bool, int]:
    """Meta-World's scripted policy for the task drives one episode: raw (its 4-D action, one env step each) or
    mapped (held for a 10 Hz step, through `action_from_metaworld` and the adapter's own action mapping)."""
    env.reset(seed=seed)
    while True:
        a4 = env.expert_action()
        if mapped:
            _, _, terminated, truncated, info = env.step_chunk(
                action_from_metaworld(a4, env.steps_per_action, env.info["action_scale"])[None])
        else:
            _, _, terminated, truncated, info = env.step_raw(a4[None])
        if terminated or truncated:
            return info["success"], env.path_length


def test_expert_round_trip_preserves_success(pick):
    ok, n = run_expert(pick, seed=5, mapped=False)
    assert ok and pick.success() and pick.benchmark_success() and n < 500
    with pytest.raises(RuntimeError, match="reset first"):
        pick.step_chunk(np.zeros((1, 7)))
    ok, n = run_expert(pick, seed=5, mapped=True)  # the same expert at 10 Hz through this project's mapping
    assert ok and pick.benchmark_success() and 8 * (pick.steps - 1) < n <= 8 * pick.steps


@pytest.mark.parametrize("task", ["push-v3", "drawer-open-v3", "door-open-v3"])
def test_other_tasks_experts_and_observations(metaworld_available, task):
    from policy.external import make_adapter

    with make_adapter("metaworld", task) as env:
        obs = env.reset(seed=0)
        n = len(TASKS[task].objects)
        check_layout(obs, n)
        if TASKS[task].family == "articulated":
            assert obs[OBS_OBJECTS][0, 20] == 1 and abs(obs[OBS_OBJECTS][0, 19]) < 0.05  # closed
        ok, _ = run_expert(env, seed=0, mapped=False)
        assert ok and env.benchmark_success()
        if TASKS[task].family == "articulated":
            assert env._last[OBS_OBJECTS][0, 19] > 0.1  # it opened


@pytest.mark.parametrize("task", ["drawer-open-v3", "door-open-v3"])
def test_articulated_tokens_face_the_robot(metaworld_available, task):
    """This project's articulated assets have their handle side along local -x: the mapped token's local -x must
    point at the robot (-x here), and its half extents follow the turned frame (thin along the facing axis for
    the door)."""
    from policy.external import make_adapter
    from policy.external.control import mat_from_quat

    env = make_adapter("metaworld", task)
    try:
        tok = env.reset(seed=0)[OBS_OBJECTS][0]
        facing = mat_from_quat(np.asarray(tok[3:7], dtype=np.float64)) @ np.array([-1.0, 0.0, 0.0])
        assert facing[0] < -0.95, facing
        if task == "door-open-v3":
            assert tok[13] < tok[14]  # a door is thinner along its facing axis than across
    finally:
        env.close()


def _yaw(q) -> float:
    w, x, y, z = (float(v) for v in q)
    return float(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))


@pytest.mark.parametrize("task", ["pick-place-v3", "push-v3"])
def test_canonical_yaw_shows_the_puck_and_goal_at_a_training_heading(metaworld_available, task):
    """Meta-World never turns its puck between resets, but its axes are this project's turned by 90° (FRAME): raw,
    the puck and goal are observed at -90°, outside the training scenes' ±0.6 rad; with canonical_yaw at 0, the
    rest of the observation unchanged."""
    from policy.external import make_adapter

    raw, canon = make_adapter("metaworld", task, canonical_yaw=False), make_adapter("metaworld", task)  # the default
    try:
        for seed in range(3):
            a, b = raw.reset(seed=seed), canon.reset(seed=seed)
            ta, tb = a[OBS_OBJECTS], b[OBS_OBJECTS]
            assert all(abs(abs(_yaw(ta[i, 3:7])) - np.pi / 2) < 0.05 for i in range(2)), ta[:2, 3:7]
            assert all(abs(_yaw(tb[i, 3:7])) < 0.05 for i in range(2)), tb[:2, 3:7]
            check_layout(b, 2)
            keep = [c for c in range(ta.shape[1]) if c not in range(3, 7) and c not in range(10, 13)]
            assert np.allclose(ta[:, keep], tb[:, keep], atol=1e-6) and np.allclose(a[OBS_PROPRIO], b[OBS_PROPRIO])
        obs, *_ = canon.step_chunk(np.zeros((2, 7)))  # the turn holds for the episode
        assert abs(_yaw(obs[OBS_OBJECTS][0, 3:7])) < 0.05
    finally:
        raw.close()
        canon.close()
