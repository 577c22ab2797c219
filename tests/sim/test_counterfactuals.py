"""Counterfactual operators (attribution by intervention): `declutter` and `nominal` take a suspected cause of a
failure away and change nothing else; they are not among the operators the engine and the uniform baseline draw."""

from __future__ import annotations

import numpy as np
import pytest

from sim.engine.programs import vary_scene
from sim.engine.variations import (
    CLEAR,
    OPERATORS,
    UNDO,
    VariationError,
    _segment_gap,
    crowd_grasp_side,
    declutter,
    default_roles,
    familiar_task,
    heavier,
    movable_distractors,
    nominal,
    radius,
    rescale,
    slippery,
)
from sim.families import FAMILIES, sample_spec
from sim.verify import verify_spec


def _crowded(family: str, start: int):
    """A scene of the family with a distractor pushed right beside its target (the crowding to undo)."""
    for seed in range(start, start + 40):
        spec = sample_spec(family, seed)
        roles = default_roles(spec)
        if "target" not in roles or not movable_distractors(spec, exclude=(roles["target"], roles.get("dest"))):
            continue
        try:
            return crowd_grasp_side(spec, np.random.default_rng(seed), roles["target"]), roles
        except VariationError:
            continue
    pytest.skip(f"no crowdable {family} scene")


def _path(spec, roles):
    p = spec.layout.placement(roles["target"])
    path = [(p.x, p.y, radius(spec, roles["target"]))]
    if roles.get("dest") and spec.layout.placement(roles["dest"]).support == "table":
        q = spec.layout.placement(roles["dest"])
        path.append((q.x, q.y, radius(spec, roles["dest"])))
    return path


@pytest.mark.parametrize("family", ["pick_place", "stack", "prep"])
def test_declutter_clears_the_task_objects_and_moves_nothing_else(family):
    spec, roles = _crowded(family, 100)
    out = declutter(spec, np.random.default_rng(0), roles["target"], roles.get("dest"))
    assert out.task == spec.task and out.attributes == spec.attributes  # one factor: the layout
    moved = set(out.meta["moved"].split(","))
    assert moved
    for p, q in zip(spec.layout.placements, out.layout.placements, strict=True):
        if p.object not in moved:
            assert (p.x, p.y, p.yaw, p.support) == (q.x, q.y, q.yaw, q.support), p.object
    path = _path(out, roles)
    for m in movable_distractors(out, exclude=(roles["target"], roles.get("dest"))):
        assert _segment_gap(out, m, path) >= CLEAR - 1e-3, m
    assert verify_spec(out).passed
    assert out.meta["varied"] == "layout" and out.meta["operator"] == "declutter"


def test_declutter_refuses_a_scene_with_nothing_to_clear():
    spec, roles = _crowded("pick_place", 200)
    clear = declutter(spec, np.random.default_rng(1), roles["target"], roles.get("dest"))
    with pytest.raises(VariationError, match="nothing stands within"):
        declutter(clear, np.random.default_rng(2), roles["target"], roles.get("dest"))


@pytest.mark.parametrize("family", list(FAMILIES))
def test_nominal_undoes_every_attribute_change_of_the_task_objects(family):
    spec = sample_spec(family, 7)
    roles = default_roles(spec)
    target = roles["target"]
    rng = np.random.default_rng(3)
    harder = spec
    for op in (heavier, slippery):
        try:
            harder = op(harder, rng, target)
        except VariationError:
            pass
    out = nominal(harder, rng, target, roles.get("dest"))
    assert out.task == harder.task and out.layout == harder.layout
    a = out.attributes.of(target)
    assert (a.mass, a.friction, a.damping) == (None, None, None)
    for o in spec.task.objects:  # distractors keep theirs
        if o.role in ("distractor", "occluder"):
            assert out.attributes.of(o.name) == harder.attributes.of(o.name)
    assert out.meta["operator"] == "nominal" and target in out.meta["changed"].split(",")


def test_nominal_restores_the_scale_only_where_there_is_room():
    spec = sample_spec("pick_place", 9)
    target = default_roles(spec)["target"]
    small = rescale(spec, np.random.default_rng(0), target, scale=(0.85, 0.86))
    assert nominal(small, np.random.default_rng(0), target).attributes.of(target).scale == 1.0
    with pytest.raises(VariationError, match="already have their own attributes"):
        nominal(sample_spec("pick_place", 9), np.random.default_rng(0), target)


def test_counterfactuals_are_reachable_by_name_but_not_drawn_as_variations():
    assert set(UNDO) == {"task", "layout", "attributes"}
    for factor, ops in UNDO.items():
        assert not set(ops) & set(OPERATORS[factor])  # the uniform baseline draws from OPERATORS only
    spec, roles = _crowded("pick_place", 300)
    made = vary_scene(spec, "layout", 1, seed=0, operators=("declutter",))
    assert len(made.programs) == 1 and made.programs[0].operator == "declutter"
    with pytest.raises(ValueError, match="valid: .*declutter"):
        vary_scene(spec, "layout", 1, operators=("declutter_everything",))


@pytest.mark.parametrize("family", ["pick_place", "stack", "articulated"])
def test_familiar_task_undoes_an_unseen_template_only(family):
    from sim.evidence.ranges import TrainingRanges
    from sim.suites import suite_specs

    ranges = TrainingRanges.default()
    with pytest.raises(VariationError, match="nothing to undo"):
        familiar_task(sample_spec(family, 5), np.random.default_rng(0))  # train templates only
    unseen = [s for s in suite_specs(family, "tasks", n=4) if ranges.template_seen(s.task.template) is False]
    assert unseen, "the tasks suite holds templates training did not see"
    out = familiar_task(unseen[0], np.random.default_rng(0))
    assert ranges.template_seen(out.task.template) is True
    assert out.layout == unseen[0].layout and out.attributes == unseen[0].attributes
    assert out.meta["operator"] == "familiar_task"


@pytest.mark.parametrize("family", ["pick_place", "stack", "articulated", "prep"])
def test_nearby_moves_the_target_a_little_and_nothing_else(family):
    """`nearby` (execution modes' near-duplicates): the target 1-3 cm away and turned 0.1-0.35 rad, every other
    object, the task and the attributes as they were; the scene still verifies; not among the engine's draws."""
    import math

    from sim.engine.variations import LOCAL, nearby

    done = 0
    for seed in range(20):
        spec = sample_spec(family, seed)
        roles = default_roles(spec)
        if "target" not in roles or spec.layout.placement(roles["target"]).support != "table":
            continue
        out = nearby(spec, np.random.default_rng(seed), roles["target"])
        assert out.task == spec.task and out.attributes == spec.attributes
        for p, q in zip(spec.layout.placements, out.layout.placements, strict=True):
            if p.object != roles["target"]:
                assert p == q, p.object
                continue
            assert 0.01 - 1e-3 <= math.hypot(q.x - p.x, q.y - p.y) <= 0.03 + 1e-3
            turn = abs((q.yaw - p.yaw + math.pi) % (2 * math.pi) - math.pi)
            assert 0.1 - 1e-3 <= turn <= 0.35 + 1e-3
        assert verify_spec(out).passed and out.meta["operator"] == "nearby"
        done += 1
        if done == 3:
            break
    assert done, f"no {family} scene with a target on the table"
    assert "nearby" in LOCAL["layout"] and "nearby" not in OPERATORS["layout"]
    made = vary_scene(spec, "layout", 2, seed=1, operators=("nearby",))
    assert len(made.programs) == 2 and all(p.operator == "nearby" for p in made.programs)


@pytest.mark.parametrize("family", ["pick_place", "stack", "articulated", "prep"])
def test_familiar_redraws_one_factor_from_the_seed_distribution(family):
    """`familiar` (Preset.intervention "familiar"): the factor redrawn from the base's seed distribution — a seed
    layout, the category's seed instances — and the other two factors kept; not among the engine's draws."""
    from sim import assets
    from sim.engine.variations import FAMILIAR, vary

    seed_layouts = {lay.id for lay in assets.layouts_on("seed")}
    for factor in ("task", "layout", "attributes"):
        assert "familiar" not in OPERATORS[factor] and "familiar" in FAMILIAR[factor]
    layouts = attributes = 0
    for seed in range(30, 42):
        spec = sample_spec(family, seed)  # a scene of the whole train side
        got = vary(spec, "layout", 1, seed, ("familiar",), default_roles(spec))
        if not got:  # this scene's objects fit no seed layout in four draws
            continue
        out = got[0]
        assert out.layout.seed_layout in seed_layouts
        assert out.task == spec.task and out.attributes == spec.attributes
        assert out.meta["operator"] == "familiar"
        layouts += 1
        got = vary(spec, "attributes", 1, seed, ("familiar",), default_roles(spec))
        if not got:
            continue
        a = got[0]
        assert a.task == spec.task and a.layout == spec.layout
        for before, after in zip(spec.attributes.objects, a.attributes.objects, strict=True):
            old, new = assets.get_asset(before.asset), assets.get_asset(after.asset)
            assert new.category == old.category
            if old.split == "train":
                assert new in assets.assets_in(old.category, split="seed"), (before.asset, after.asset)
        attributes += 1
    assert layouts >= 6 and attributes >= 6, (layouts, attributes)
