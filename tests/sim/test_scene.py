"""Scene programs → specs: determinism, factored resampling, serialization, clear errors."""

import functools
import json
import operator

import numpy as np
import pytest
from pydantic import TypeAdapter

from sim import Scene, SceneError, grasped, inside, near, on, place
from sim.families import FAMILIES, sample_spec
from sim.predicates import Predicate
from sim.resample import resample
from sim.scene import to_program
from sim.spec import SceneSpec


def build(seed=0):
    scene = Scene(family="pick_place", seed=seed)
    mug = scene.add_object("mug", role="target")
    bowl = scene.add_object("bowl", role="receptacle")
    scene.set_task("put the mug in the bowl", success=inside(mug, bowl) & ~grasped(mug))
    scene.set_layout(place(mug, on="table", xy=(0.45, -0.10)), place(bowl, on="table", near=mug, gap=0.12))
    scene.set_attributes(mug, mass=0.25, friction=0.8, rgba="red")
    return scene.spec()


def test_same_program_and_seed_give_the_same_spec():
    assert build(3).spec_hash() == build(3).spec_hash()
    assert build(3).spec_hash() != build(4).spec_hash()


def test_spec_json_round_trip_keeps_hash():
    spec = build(1)
    again = SceneSpec.model_validate_json(spec.model_dump_json())
    assert again == spec and again.spec_hash() == spec.spec_hash()


def test_predicate_serializes_with_operators():
    p = inside("mug", "bowl") & ~grasped("mug") | near("mug", "plate", dist=0.2)
    data = json.loads(p.model_dump_json())
    assert data["op"] == "or"
    assert TypeAdapter(Predicate).validate_python(data) == p
    assert str(p) == "(inside(mug, bowl) & ~grasped(mug)) | near(mug, plate, dist=0.2)"


def test_near_relation_respects_gap():
    spec = build(0)
    m, b = spec.layout.placement("mug"), spec.layout.placement("bowl")
    assert b.relation == {"near": "mug", "gap": 0.12}
    assert np.hypot(m.x - b.x, m.y - b.y) > 0.12


@pytest.mark.parametrize("family", list(FAMILIES))
def test_family_seed_scenes_are_deterministic(family):
    assert sample_spec(family, 11).spec_hash() == sample_spec(family, 11).spec_hash()


@pytest.mark.parametrize("factor", ["task", "layout", "attributes"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_resample_changes_only_the_named_factor(family, factor):
    spec = sample_spec(family, 5)
    new = resample(spec, factor, np.random.default_rng(0))
    for f in ("task", "layout", "attributes"):
        same = getattr(new, f) == getattr(spec, f)
        assert same == (f != factor), f"{factor} resample changed {f}" if same is False else f"{f} unchanged"
    assert new.meta["parent"] == spec.spec_hash() and new.meta["varied"] == factor


def test_to_program_rebuilds_the_spec():
    spec = sample_spec("prep", 2)
    namespace = {"seed": spec.seed}
    exec(compile(to_program(spec), "<program>", "exec"), namespace)  # trusted: our own generated source
    rebuilt = namespace["scene"].spec()
    assert rebuilt.task == spec.task and rebuilt.attributes == spec.attributes
    for a, b in zip(rebuilt.layout.placements, spec.layout.placements, strict=True):
        assert a.object == b.object and abs(a.x - b.x) < 1e-4 and abs(a.y - b.y) < 1e-4


def test_errors_name_the_problem():
    scene = Scene(family="pick_place", seed=0)
    with pytest.raises(Exception, match="mugg"):
        scene.add_object("mugg")
    with pytest.raises(SceneError, match="valid roles"):
        scene.add_object("mug", role="hero")
    mug = scene.add_object("mug", role="target")
    with pytest.raises(SceneError, match="named colours"):
        scene.set_attributes(mug, rgba="ultraviolet")
    with pytest.raises(SceneError, match="no task"):
        scene.spec()
    with pytest.raises(ValueError, match="unknown object"):
        scene.set_task("put it on the moon", success=on(mug, "moon"))
        scene.spec()


def _spec_with(**task_changes) -> dict:
    data = sample_spec("prep", 0).model_dump(mode="json")
    data["task"].update(task_changes)
    return data


def test_success_predicate_size_is_capped():
    """Issue 17: a 60k-atom success predicate used to pass and cost seconds per call; atoms and depth are capped."""
    from sim.constants import MAX_PREDICATE_ATOMS, MAX_PREDICATE_DEPTH

    atom = on("lime", "cutting_board").model_dump(mode="json")
    ok = _spec_with(success={"op": "and", "terms": [atom] * MAX_PREDICATE_ATOMS})
    assert SceneSpec.model_validate(ok).task.success.op == "and"  # at the limit: accepted
    with pytest.raises(ValueError, match=f"limit of {MAX_PREDICATE_ATOMS} atoms"):
        SceneSpec.model_validate(_spec_with(success={"op": "and", "terms": [atom] * 60_000}))
    deep = atom
    for _ in range(MAX_PREDICATE_DEPTH):  # depth limit + 1
        deep = {"op": "not", "term": deep}
    with pytest.raises(ValueError, match=f"limit of {MAX_PREDICATE_DEPTH} levels"):
        SceneSpec.model_validate(_spec_with(success=deep))
    with pytest.raises(ValueError, match="nodes"):  # empty connectives cost time too
        SceneSpec.model_validate(_spec_with(success={"op": "or", "terms": [atom, *[{"op": "and", "terms": []}] * 5000]}))
    scene = Scene(family="pick_place", seed=0)  # built in Python, through the SDK
    mug, bowl = scene.add_object("mug", role="target"), scene.add_object("bowl", role="receptacle")
    with pytest.raises(Exception, match=f"limit of {MAX_PREDICATE_ATOMS} atoms"):
        scene.set_task("put the mug in the bowl", success=functools.reduce(
            operator.and_, [inside(mug, bowl)] * (MAX_PREDICATE_ATOMS + 1)))
        scene.set_layout(place(mug, on="table", xy=(0.45, -0.10)), place(bowl, on="table", near=mug, gap=0.12))
        scene.spec()


def test_builtin_families_stay_far_below_the_predicate_limits():
    from sim.constants import MAX_PREDICATE_ATOMS
    from sim.predicates import atoms

    for family in FAMILIES:
        for seed in range(3):
            assert len(atoms(sample_spec(family, seed).task.success)) <= MAX_PREDICATE_ATOMS // 8


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), -0.1, 1.5, 1e300])
def test_initial_state_must_be_a_fraction_of_the_joint_range(bad):
    spec = sample_spec("articulated", 0)
    data = spec.model_dump(mode="json")
    name = spec.task.with_role("articulated")[0].name
    data["task"]["initial_state"] = {name: {"open": bad}}
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        SceneSpec.model_validate(data)
    text = json.dumps(data)  # NaN / Infinity literals, as Python's json writes them
    with pytest.raises(ValueError, match=r"initial_state\[.*\] must be a finite fraction of the joint range in \[0, 1\]"):
        SceneSpec.model_validate_json(text)
    data["task"]["initial_state"] = {name: {"open": 0.5}}
    assert SceneSpec.model_validate(data).task.initial_state[name]["open"] == 0.5
