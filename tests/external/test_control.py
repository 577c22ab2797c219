"""The wire protocol and the action mapping's math (numpy only: no external venv needed)."""

from __future__ import annotations

import io
import pickle

import numpy as np
import pytest

from policy.external import parse_external
from policy.external.control import (
    TargetTracker,
    axis_angle_from_mat,
    gripper_toward,
    mat_from_axis_angle,
    mat_from_quat,
    open_loop_delta,
    osc_delta,
    quat_from_mat,
    symmetric_turn,
    turned_about_z,
)
from policy.external.protocol import ProtocolError, decode, encode, read_message, write_message
from sim.constants import MAX_DPOS, MAX_DROT, WORKSPACE_HIGH, WORKSPACE_LOW


def test_messages_round_trip_arrays_and_refuse_globals():
    msg = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": [1, 2.5, "x", None, True, b"raw"],
           "c": (np.int64(3), np.zeros((0, 7))), "d": {"e": np.array([True, False])}}
    buf = io.BytesIO()
    write_message(buf, msg)
    write_message(buf, {"second": 1})
    buf.seek(0)
    out = read_message(buf)
    assert out["a"].dtype == np.float32 and np.array_equal(out["a"], msg["a"])
    assert out["b"] == msg["b"] and out["c"][0] == 3 and out["c"][1].shape == (0, 7)
    assert out["d"]["e"].dtype == bool and read_message(buf) == {"second": 1}
    with pytest.raises(ProtocolError):
        read_message(buf)  # closed pipe
    evil = pickle.dumps(np.float64)  # a global: refused, nothing imported or called
    with pytest.raises(pickle.UnpicklingError):
        decode(evil)
    assert decode(encode({"x": 1})[8:]) == {"x": 1}


def test_rotation_helpers_agree():
    rng = np.random.default_rng(0)
    for _ in range(50):
        v = rng.normal(size=3)
        v *= rng.uniform(0.01, 3.0) / np.linalg.norm(v)
        R = mat_from_axis_angle(v)
        assert np.allclose(R @ R.T, np.eye(3), atol=1e-12) and np.isclose(np.linalg.det(R), 1.0)
        assert np.allclose(mat_from_quat(quat_from_mat(R)), R, atol=1e-9)
        assert np.allclose(mat_from_axis_angle(axis_angle_from_mat(R)), R, atol=1e-9)
    assert np.allclose(quat_from_mat(np.eye(3)), [1, 0, 0, 0])
    Rz = mat_from_axis_angle([0, 0, np.pi])  # 180 degrees: the trace < 0 branch
    assert np.allclose(mat_from_quat(quat_from_mat(Rz)), Rz, atol=1e-9)


def test_target_tracker_reproduces_this_projects_env_target():
    """The adapter's target follows the same rule as sim.env.CodaEnv (clip, leash, left-multiplied rotation)."""
    from sim.env import CodaEnv
    from sim.families import sample_spec

    env = CodaEnv(sample_spec("pick_place", 0))
    env.reset(seed=0)
    pos, quat = env.target_pose()
    tracker = TargetTracker(pos, mat_from_quat(quat), MAX_DPOS, MAX_DROT, 0.08, WORKSPACE_LOW, WORKSPACE_HIGH)
    rng = np.random.default_rng(1)
    g = env.compiled.gripper
    for _ in range(15):
        a = np.r_[rng.uniform(-0.08, 0.08, 3), rng.uniform(-0.4, 0.4, 3), rng.uniform(-1.5, 1.5)]
        grip = tracker.apply(a, env.data.xpos[g.body].copy())
        env.step(a)
        p, q = env.target_pose()
        assert np.allclose(tracker.pos, p, atol=1e-9)
        assert np.allclose(tracker.mat, mat_from_quat(q), atol=1e-9)
        assert grip == np.clip(a[6], -1, 1)


def test_rotation_leash_bounds_the_target_lead_and_keeps_its_direction():
    """With rot_leash, a TCP that does not turn holds the target orientation within the leash, on the commanded
    axis; without it the target runs ahead by every step's rotation (this project's env)."""
    eye = np.eye(3)
    free = TargetTracker([0, 0, 0], eye, MAX_DPOS, MAX_DROT, 0.08)
    held = TargetTracker([0, 0, 0], eye, MAX_DPOS, MAX_DROT, 0.08, rot_leash=0.3)
    for _ in range(4):
        free.apply([0, 0, 0, 0, 0, MAX_DROT, -1], np.zeros(3), eye)
        held.apply([0, 0, 0, 0, 0, MAX_DROT, -1], np.zeros(3), eye)
    assert np.allclose(axis_angle_from_mat(free.mat), [0, 0, 4 * MAX_DROT])
    assert np.allclose(axis_angle_from_mat(held.mat), [0, 0, 0.3])
    # a TCP that keeps up is never held back
    tcp = held.mat.copy()
    for _ in range(4):
        held.apply([0, 0, 0, 0.1, 0, 0, -1], np.zeros(3), tcp)
        tcp = held.mat.copy()
    assert np.allclose(held.mat, mat_from_axis_angle([0.4, 0, 0]) @ mat_from_axis_angle([0, 0, 0.3]), atol=1e-9)


@pytest.mark.parametrize("kwargs,match", [({"rot_leash": 0.0}, "rot_leash"), ({"rot_leash": 4.0}, "rot_leash"),
                                          ({"settle": -1}, "settle"), ({"settle": 2.5}, "settle"),
                                          ({"gain": 0.0}, "gain must be in"), ({"rot_gain": -1.0}, "rot_gain"),
                                          ({"rot_gain": 11.0}, "rot_gain"), ({"rot_gain": float("nan")}, "rot_gain")])
def test_robosuite_adapter_refuses_bad_control_options_before_starting_a_worker(kwargs, match):
    from policy.external.robosuite_tasks import RobosuiteAdapter

    with pytest.raises(ValueError, match=match):
        RobosuiteAdapter("Lift", **kwargs)


def test_osc_delta_signs_frames_and_limits():
    out_max = np.array([0.05] * 3 + [0.5] * 3)
    eye = np.eye(3)
    cmd = osc_delta([0.01, -0.02, 0.5], eye, [0, 0, 0.4], eye, eye, out_max)
    assert np.allclose(cmd, [0.2, -0.4, 1.0, 0, 0, 0])  # z clipped to 1
    yaw = mat_from_axis_angle([0, 0, 0.1])
    assert np.allclose(osc_delta([0, 0, 0], yaw, [0, 0, 0], eye, eye, out_max), [0, 0, 0, 0, 0, 0.2])
    assert np.allclose(osc_delta([0, 0, 0], yaw, [0, 0, 0], eye, eye, out_max, gain=2.0)[5], 0.4)
    # a gain per axis: the rotation's own (rot_gain), the position's unchanged
    both = osc_delta([0.01, 0, 0], yaw, [0, 0, 0], eye, eye, out_max, gain=[2.0] * 3 + [0.5] * 3)
    assert np.allclose(both, [0.4, 0, 0, 0, 0, 0.1])
    base = mat_from_axis_angle([0, 0, np.pi / 2])  # controller frame turned 90 degrees about z
    assert np.allclose(osc_delta([0.01, 0, 0], eye, [0, 0, 0], eye, base, out_max)[:3], [0, -0.2, 0], atol=1e-12)
    # open loop: the 10 Hz delta split over k external steps
    assert np.allclose(open_loop_delta([0.02, 0, -0.01, 0, 0, 0.2, 1], 2, eye, out_max, MAX_DPOS, MAX_DROT),
                       [0.2, 0, -0.1, 0, 0, 0.2])


def test_parse_external_names_valid_tasks():
    assert parse_external("robosuite:Lift,Door") == [("robosuite", "Lift"), ("robosuite", "Door")]
    assert parse_external("robosuite:Lift,Lift") == [("robosuite", "Lift")]
    with pytest.raises(ValueError, match="valid tasks: Lift, Stack, PickPlaceCan, Door"):
        parse_external("robosuite:Lift,Dorr")
    with pytest.raises(ValueError, match="valid benchmarks: robosuite"):
        parse_external("libero:x")
    with pytest.raises(ValueError, match="BENCHMARK:TASK"):
        parse_external("robosuite")


def test_the_opening_map_steps_robosuites_gripper_towards_the_commanded_opening_and_holds_there():
    """robosuite's gripper integrates signs (0.2 per step); the opening map sends the signs that make it follow
    this project's command as a finger target: -1 fully open, +1 fully closed, in between the same half opening
    of each finger in metres, held once within half a step."""
    kw = {"speed": 0.2, "open_m": 0.045, "squeeze_m": -0.012, "span": 0.04}
    assert gripper_toward(-1.0, 0.0, **kw) == -1 and gripper_toward(1.0, 0.0, **kw) == 1
    assert gripper_toward(-1.0, -1.0, **kw) == 0 and gripper_toward(1.0, 1.0, **kw) == 0  # at the end: hold
    # command -0.3: a 2.5 cm half opening, robosuite's command -0.25 (half opening 2.5 cm of its 4)
    x, sent = 1.0, []
    for _ in range(12):
        step = gripper_toward(-0.3, x, **kw)
        sent.append(step)
        x = float(np.clip(x + 0.2 * step, -1, 1))
    assert sent[:6] == [-1] * 6 and sent[-3:] == [0, 0, 0] and abs(x + 0.25) <= 0.1
    assert gripper_toward(5.0, 0.0, **kw) == 1  # commands are clipped to [-1, 1] first


@pytest.mark.parametrize("heading", [0.3, -0.5, 0.9, 2.11, -2.6, np.pi])
def test_symmetric_turns_bring_a_box_or_cylinder_to_the_nearest_equivalent_heading(heading):
    q = quat_from_mat(mat_from_axis_angle([0, 0, heading]) @ mat_from_axis_angle([0.05, 0, 0]))  # slightly tipped
    box = symmetric_turn(q, "box")
    assert np.isclose(box / (np.pi / 2), round(box / (np.pi / 2)))  # whole quarter turns only
    R = mat_from_quat(turned_about_z(q, box))
    assert abs(np.arctan2(R[1, 0], R[0, 0])) <= np.pi / 4 + 1e-3
    # the same body turned about its own z axis: the axis itself does not move
    assert np.allclose(R[:, 2], mat_from_quat(q)[:, 2])
    R = mat_from_quat(turned_about_z(q, symmetric_turn(q, "cylinder")))
    assert abs(np.arctan2(R[1, 0], R[0, 0])) < 1e-3  # exactly 0 for an upright body; this one is tipped
    assert symmetric_turn(q, None) == 0.0


def test_an_unknown_symmetry_is_refused():
    with pytest.raises(ValueError, match="valid: box, cylinder"):
        symmetric_turn([1, 0, 0, 0], "sphere")
