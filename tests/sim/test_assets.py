"""Tests of the procedural asset pool (sim.assets, sim.assets.catalog)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import mujoco
import numpy as np
import pytest

from sim import assets
from sim.assets import catalog as cat
from sim.assets.types import ArticulatedAsset, RigidAsset

TOL = 1e-4


# --- helpers -------------------------------------------------------------------------------------


def _inside(interior, lo, hi, tol=TOL) -> bool:
    c, h = np.asarray(interior.center), np.asarray(interior.half)
    return bool(np.all(h > 0) and np.all(c - h >= lo - tol) and np.all(c + h <= hi + tol))


def _scene() -> mujoco.MjSpec:
    spec = mujoco.MjSpec()
    spec.option.timestep = 0.002
    spec.worldbody.add_geom(name="table", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[2, 2, 0.01])
    return spec


def _assert_clean(d: mujoco.MjData, what: str) -> None:
    counts = [w.number for w in d.warning]
    assert not any(counts), f"{what}: MuJoCo warnings {counts}"
    assert np.all(np.isfinite(d.qpos)) and np.all(np.isfinite(d.qvel)), f"{what}: NaN in state"


def check_rigid_sim(a: RigidAsset) -> None:
    spec = _scene()
    assets.build_rigid(spec.worldbody, a, "obj", pos=(0.45, 0.0, 0.0), quat=cat.yaw_quat(0.3))
    m = spec.compile()
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    p0 = d.site("obj/center").xpos.copy()
    for _ in range(250):
        mujoco.mj_step(m, d)
    _assert_clean(d, a.id)
    moved = np.linalg.norm(d.site("obj/center").xpos - p0)
    assert moved < 0.02, f"{a.id} moved {moved:.4f} m while settling"
    assert d.body("obj").xmat[8] > 0.95, f"{a.id} tipped over"


def check_articulated_sim(a: ArticulatedAsset) -> None:
    spec = _scene()
    assets.build_articulated(spec.worldbody, a, "fx", pos=(0.77, 0.0, 0.0))
    m = spec.compile()
    d = mujoco.MjData(m)
    jid = m.joint("fx/joint").id
    qadr = m.jnt_qposadr[jid]
    lo, hi = a.joint_range
    for _ in range(250):
        mujoco.mj_step(m, d)
    _assert_clean(d, a.id)
    assert lo - 0.01 <= d.qpos[qadr] <= hi + 0.01, f"{a.id} left its joint range: {d.qpos[qadr]}"
    base_body, moving_body = m.body("fx").id, m.body("fx/moving").id
    base_g = [g for g in range(m.ngeom) if m.geom_bodyid[g] == base_body]
    mov_g = [g for g in range(m.ngeom) if m.geom_bodyid[g] == moving_body]
    handles = []
    for q in (lo, hi):
        d.qpos[qadr] = q
        mujoco.mj_forward(m, d)
        handles.append(d.site("fx/handle").xpos.copy())
        for g1 in base_g:
            for g2 in mov_g:
                dist = mujoco.mj_geomDistance(m, d, g1, g2, 0.05, None)
                assert dist > -0.005, f"{a.id} q={q}: {m.geom(g1).name} penetrates {m.geom(g2).name} by {-dist:.4f}"
    delta = handles[1] - handles[0]
    if a.kind in ("drawer", "door"):
        assert delta[0] < -0.05, f"{a.id}: opening does not move the handle toward -x ({delta})"
    elif a.kind == "lid":
        assert delta[2] > 0.05, f"{a.id}: opening does not lift the handle ({delta})"
    else:
        assert float(np.dot(delta, a.joint_axis)) > 0.05, f"{a.id}: handle does not slide along the axis"


def check_placement(a, mode: str) -> None:
    """A 3 cm cube set on the floor of the interior ('in') or on top_z ('on') stays put."""
    spec = _scene()
    at = np.array([0.5, 0.0, 0.0])
    if isinstance(a, RigidAsset):
        assets.build_rigid(spec.worldbody, a, "c", pos=at)
    else:
        assets.build_articulated(spec.worldbody, a, "c", pos=at)
    if mode == "in":
        c, h = np.asarray(a.interior.center), np.asarray(a.interior.half)
        start = at + (c[0], c[1], c[2] - h[2] + 0.0151)
    else:
        start = at + (0.0, 0.0, a.top_z + 0.0151)
    cube = spec.worldbody.add_body(name="cube", pos=list(start))
    cube.add_freejoint()
    cube.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.015] * 3, mass=0.05, condim=4)
    m = spec.compile()
    d = mujoco.MjData(m)
    for _ in range(250):
        mujoco.mj_step(m, d)
    _assert_clean(d, a.id)
    moved = np.linalg.norm(d.body("cube").xpos - start)
    assert moved < 0.01 and d.body("cube").xmat[8] > 0.95, f"{a.id}: cube {mode} moved {moved:.4f} m"


def _placements(per_category: int) -> list[tuple[str, str]]:
    out = []
    for name, c in sorted(assets.categories().items()):
        for a in assets.assets_in(name)[:per_category]:
            if a.interior is not None:
                out.append((a.id, "in"))
            if c.surface:
                out.append((a.id, "on"))
    return out


def _sample_ids() -> list[str]:
    ids = [f"{name}/000" for name, c in assets.categories().items() if not c.articulated]
    ids += [f"{kind}/{i:03d}" for kind in cat.ART_KINDS for i in (0, 1, 2, 17, 43)]
    return ids


# --- counts, splits, determinism -------------------------------------------------------------------


def test_counts_and_splits():
    s = assets.summary()
    assert s["rigid_categories"] >= 64 and s["articulated_categories"] == 4
    assert s["categories"] == s["rigid_categories"] + s["articulated_categories"]
    assert s["rigid"] >= 1200 and s["articulated"] >= 300 and s["seed_layouts"] >= 500
    assert s["heldout_categories"] >= 8
    assert s["train_rigid_instances"] + s["heldout_rigid_instances"] == s["rigid"]
    assert s["heldout_articulated"] == round(0.2 * s["articulated"])
    assert s["heldout_layouts"] >= 100
    layouts = assets.seed_layouts()
    first_held = min(lay.id for lay in layouts if lay.split == "heldout")
    assert all(lay.split == "heldout" for lay in layouts if lay.id >= first_held)
    for name, c in assets.categories().items():
        insts = assets.assets_in(name)
        held = [a for a in insts if a.split == "heldout"]
        if c.split == "heldout":
            assert len(held) == len(insts)
        else:
            assert len(held) == round(0.2 * len(insts)), name


def test_heldout_categories_cover_every_family():
    held = assets.categories_with(split="heldout")
    assert all(not c.articulated for c in held)
    food = [c for c in held if c.graspable and {"fruit", "vegetable", "food"} & set(c.tags)]
    assert len(food) >= 2
    assert any("block" in c.tags and c.graspable and c.surface for c in held)
    assert any(c.container and not c.graspable for c in held)
    assert any(c.surface and not c.graspable for c in held)
    # every held-out kind of role still has train options
    assert assets.categories_with(tag="block", split="train") and assets.categories_with(container=True, graspable=False, split="train")


def test_deterministic_rebuild():
    first = assets.fingerprint()
    some = assets.get_asset("mug/007")
    assets.clear_cache()
    assert assets.fingerprint() == first and assets.get_asset("mug/007") == some
    # a fresh interpreter with another hash seed builds the same pool
    code = "from sim import assets; print(assets.fingerprint())"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == first


# --- geometry contracts ------------------------------------------------------------------------------


def test_rigid_geometry_contracts():
    cats = assets.categories()
    for a in assets.rigid_assets().values():
        c = cats[a.category]
        lo, hi = cat.parts_bounds(a.parts)
        np.testing.assert_allclose((hi - lo) / 2, a.half_extent, atol=TOL, err_msg=a.id)
        np.testing.assert_allclose([(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, lo[2]], 0, atol=TOL, err_msg=a.id)
        full = 2 * np.asarray(a.half_extent)
        assert np.all(full >= np.asarray(c.dims_low) - TOL) and np.all(full <= np.asarray(c.dims_high) + TOL), (a.id, full)
        assert c.mass_range[0] - 1e-6 <= a.mass <= c.mass_range[1] + 1e-6, a.id
        assert c.friction_range[0] - 1e-6 <= a.friction <= c.friction_range[1] + 1e-6, a.id
        assert 0 < a.top_z <= full[2] + TOL, a.id
        assert all(min(p.size) > 0 for p in a.parts), a.id
        assert len(a.rgba) == 4 and all(0 <= v <= 1 for v in a.rgba)
        assert a.graspable == c.graspable
        if a.graspable:
            width = full[1] if a.grasp_axis == "y" else full[0]
            assert 0.025 - TOL <= width <= 0.07 + TOL, (a.id, width)
            assert width <= min(full[0], full[1]) + TOL
            assert full[2] >= 0.03 - TOL and a.mass <= 0.8, a.id
        if c.container:
            assert a.interior is not None and _inside(a.interior, lo, hi), a.id
            floor = a.interior.center[2] - a.interior.half[2]
            assert abs(floor - a.top_z) < TOL and a.interior.center[2] + a.interior.half[2] <= hi[2] + TOL
            assert min(full[0], full[1]) >= 0.12 - TOL and max(full[0], full[1]) <= 0.3 + TOL
        else:
            assert a.interior is None
        if c.surface and not c.graspable:
            assert 0.14 - TOL <= min(full[0], full[1]) and max(full[0], full[1]) <= 0.3 + TOL


def _handle_bar(a: ArticulatedAsset):
    return next(p for p in a.moving_parts if np.allclose(p.pos, a.handle, atol=1e-5))


def test_articulated_geometry_contracts():
    arts = assets.articulated_assets()
    for kind in cat.ART_KINDS:
        assert len(assets.assets_in(kind)) >= 75
    for a in arts.values():
        c = assets.get_category(a.kind)
        lo, hi = cat.parts_bounds(a.base_parts + a.moving_parts)
        np.testing.assert_allclose((hi - lo) / 2, a.half_extent, atol=TOL, err_msg=a.id)
        np.testing.assert_allclose([(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, lo[2]], 0, atol=TOL, err_msg=a.id)
        full = 2 * np.asarray(a.half_extent)
        assert np.all(full >= np.asarray(c.dims_low) - TOL) and np.all(full <= np.asarray(c.dims_high) + TOL), (a.id, full)
        blo, bhi = cat.parts_bounds(a.base_parts)
        assert 0.25 - TOL <= bhi[1] - blo[1] <= 0.45 + TOL and 0.12 - TOL <= hi[2] <= 0.35 + TOL, a.id
        assert 0.05 <= a.damping <= 2.0 and a.mass > 0
        assert a.joint_range[0] == 0.0
        if a.kind == "drawer":
            assert a.joint_type == "slide" and 0.12 - TOL <= a.joint_range[1] <= 0.25 + TOL and a.interior_on == "moving"
        elif a.kind == "sliding":
            assert a.joint_type == "slide" and 0.08 <= a.joint_range[1] <= 0.25 and a.interior_on == "base"
            assert a.joint_axis[0] == 0 and a.joint_axis[2] == 0
        else:
            assert a.joint_type == "hinge" and 1.4 - TOL <= a.joint_range[1] <= 1.9 + TOL and a.interior_on == "base"
        # handle: on the front (-x), protruding >= 3 cm, a bar 12-20 mm thick
        assert a.handle[0] <= blo[0] - 0.03, a.id
        bar = _handle_bar(a)
        axis = "xyz".index(a.handle_axis)
        thick = [2 * s for i, s in enumerate(bar.size) if i != axis]
        assert all(0.012 - TOL <= t <= 0.02 + TOL for t in thick) and 2 * bar.size[axis] >= 0.06, a.id
        if a.kind in ("drawer", "lid"):
            assert a.handle_axis == "y"
        else:
            assert a.handle_axis == "z"
        assert a.interior is not None and _inside(a.interior, lo, hi), a.id


def test_seed_layouts():
    layouts = assets.seed_layouts()
    assert [lay.id for lay in layouts] == list(range(len(layouts)))
    for lay in layouts:
        assert len(lay.slots) >= 8
        for x, y, yaw in lay.slots:
            assert 0.30 <= x <= 0.62 and -0.28 <= y <= 0.28 and -math.pi <= yaw <= math.pi
        for (x1, y1, _), (x2, y2, _) in combinations(lay.slots, 2):
            assert math.hypot(x1 - x2, y1 - y2) >= 0.11, lay.id
        fx, fy, fyaw = lay.fixture_slot
        assert 0.74 <= fx <= 0.80 and -0.12 <= fy <= 0.12 and abs(fyaw) <= 0.15
    assert len({lay.slots for lay in layouts}) == len(layouts)


# --- public API --------------------------------------------------------------------------------------


def test_lookups_and_errors():
    assert assets.get_asset("mug/001").category == "mug"
    assert isinstance(assets.get_asset("drawer/004"), ArticulatedAsset)
    with pytest.raises(KeyError) as err:
        assets.get_asset("mugg/001")
    assert "mug/001" in str(err.value) and "did you mean" in str(err.value)
    with pytest.raises(ValueError):
        assets.get_asset("nonsense")
    with pytest.raises(ValueError) as err:
        assets.get_category("mugg")
    msg = str(err.value)
    assert msg.startswith("unknown object category 'mugg'") and "mug" in msg and "valid categories: apple" in msg
    with pytest.raises(KeyError):
        assets.assets_in("mugg")
    with pytest.raises(ValueError):
        assets.assets_in("mug", split="test")


def test_filters_and_indices():
    mugs = assets.assets_in("mug", split="train")
    assert [a.id for a in mugs] == sorted(a.id for a in mugs) and all(a.split == "train" for a in mugs)
    assert len(assets.assets_in("drawer", split="heldout")) == 16
    fruit = assets.categories_with(tag="fruit", graspable=True)
    assert {"apple", "banana"} <= {c.name for c in fruit} and all(c.graspable for c in fruit)
    assert {c.name for c in assets.categories_with(container=True, graspable=False, articulated=False)} >= {"bowl", "pot", "basket"}
    assert "plate" in {c.name for c in assets.categories_with(surface=True, graspable=False)}
    names = sorted(assets.categories())
    assert [assets.category_index(n) for n in names] == list(range(len(names)))
    assert assets.category_index("apple") == 0


def test_builders_names_masses_and_overrides():
    spec = _scene()
    mug = assets.get_asset("mug/003")
    assets.build_rigid(spec.worldbody, mug, "m", pos=(0.4, 0, 0), scale=1.2, mass=0.33, friction=0.7, rgba=(1, 0, 0, 1))
    dr = assets.get_asset("drawer/005")
    assets.build_articulated(spec.worldbody, dr, "d", pos=(0.77, 0, 0), yaw=0.1, damping=0.3, joint_range=(0, 0.1))
    m = spec.compile()
    assert abs(m.body("m").mass[0] - 0.33) < 1e-6
    assert abs(m.body("d/moving").mass[0] - dr.mass) < 1e-6
    assert m.joint("m/free").type == mujoco.mjtJoint.mjJNT_FREE
    assert m.geom("m/g0").friction[0] == pytest.approx(0.7) and m.geom("m/g0").condim >= 4
    np.testing.assert_allclose(m.geom("m/g0").rgba, (1, 0, 0, 1))
    np.testing.assert_allclose(m.geom("m/g0").size[0], mug.parts[0].size[0] * 1.2)
    assert len([g for g in range(m.ngeom) if m.geom(g).name.startswith("m/g")]) == len(mug.parts)
    j = m.joint("d/joint")
    assert j.type == mujoco.mjtJoint.mjJNT_SLIDE and j.damping[0] == pytest.approx(0.3)
    np.testing.assert_allclose(j.range, (0, 0.1))
    assert j.armature[0] > 0
    assert m.geom("d/g0").bodyid == m.body("d").id and m.geom("d/mg0").bodyid == m.body("d/moving").id
    assert m.site("d/handle").bodyid == m.body("d/moving").id and m.site("d/interior").bodyid == m.body("d/moving").id
    assert m.site("m/center") is not None
    lid = assets.get_asset("lid/000")
    spec2 = _scene()
    assets.build_articulated(spec2.worldbody, lid, "l", pos=(0.77, 0, 0))
    m2 = spec2.compile()
    assert m2.site("l/interior").bodyid == m2.body("l").id and m2.jnt_type[0] == mujoco.mjtJoint.mjJNT_HINGE


# --- physics -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("asset_id", _sample_ids())
def test_asset_simulates_cleanly(asset_id):
    a = assets.get_asset(asset_id)
    if isinstance(a, RigidAsset):
        check_rigid_sim(a)
    else:
        check_articulated_sim(a)


@pytest.mark.parametrize(("asset_id", "mode"), _placements(per_category=2))
def test_objects_stay_in_and_on_receptacles(asset_id, mode):
    check_placement(assets.get_asset(asset_id), mode)


@pytest.mark.slow
def test_all_assets_simulate_cleanly():
    failures = []
    everything = list(assets.rigid_assets().values()) + list(assets.articulated_assets().values())
    for a in everything:
        try:
            if isinstance(a, RigidAsset):
                check_rigid_sim(a)
            else:
                check_articulated_sim(a)
        except AssertionError as exc:
            failures.append(f"{a.id}: {exc}")
    assert not failures, f"{len(failures)} failing assets:\n" + "\n".join(failures[:30])


@pytest.mark.slow
def test_all_receptacles_hold_objects():
    failures = []
    for asset_id, mode in _placements(per_category=10_000):
        try:
            check_placement(assets.get_asset(asset_id), mode)
        except AssertionError as exc:
            failures.append(str(exc))
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:30])
