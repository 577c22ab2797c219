"""Offline data engine: seed programs, one-factor variants, targeted/control batches, role-bound transfer."""

from __future__ import annotations

import pytest

from agent.roles.engine import CONTROL_FACTOR, SCENE_FACTOR, OfflineEngine, program_of, scene_objects
from agent.roles.variations import VariationError, crowd_grasp_side, heavier, resample_task
from memory_store.schema import GenerationProgram, Relation
from sim.families import FAMILIES, sample_spec
from sim.scene import finalize_program
from sim.spec import SceneSpec
from sim.verify import verify_program

FACTOR_FIELD = {"task": "task", "layout": "layout", "attributes": "attributes"}
CASES = [("spatial", "approach"), ("spatial", "transport"), ("attribute", "lift"), ("attribute", "grasp"),
         ("task", "place"), ("execution", "grasp")]


def changed(a: SceneSpec, b: SceneSpec) -> set[str]:
    return {f for f in ("task", "layout", "attributes") if getattr(a, f) != getattr(b, f)}


def rebuilt(program) -> SceneSpec:
    """Run the emitted source as the sandbox would (trusted here: the engine wrote it)."""
    ns = {"seed": program.seed}
    exec(compile(program.source, "<program>", "exec"), ns)  # noqa: S102
    return SceneSpec.model_validate(finalize_program(ns, {}))


@pytest.mark.parametrize("family", list(FAMILIES))
def test_engine_programs_pass_the_verifier(family):
    engine = OfflineEngine()
    programs = engine.seed_programs(family, 2, start_seed=700)
    for s in range(2):
        spec = sample_spec(family, 710 + s)
        for factor, phase in CASES[s::2]:
            targeted, control = engine.batches(spec, factor, phase, 1, seed=s)
            programs += targeted + control
    passed = [verify_program(p.source, p.seed).passed for p in programs]
    assert len(programs) >= 6 and sum(passed) / len(passed) >= 0.85, [p.operator for p, ok in zip(programs, passed, strict=True) if not ok]


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize(("diagnosis_factor", "phase"), CASES)
def test_targeted_variants_change_only_the_named_factor(family, diagnosis_factor, phase):
    spec = sample_spec(family, 3)
    parent = rebuilt(program_of(spec, "seed"))  # compare programs with programs (same rounding, no relations)
    targeted, control = OfflineEngine().batches(spec, diagnosis_factor, phase, 2, seed=1)
    factor = SCENE_FACTOR[diagnosis_factor]
    for program, expected in [(p, factor) for p in targeted] + [(p, CONTROL_FACTOR[factor]) for p in control]:
        variant = rebuilt(program)
        assert changed(parent, variant) == {FACTOR_FIELD[expected]}, (program.operator, changed(parent, variant))
        assert program.factor == expected and program.parent == spec.spec_hash()
    assert targeted, "the engine found no targeted variant"


def test_seed_program_rebuilds_its_scene():
    spec = sample_spec("prep", 5)
    (program,) = OfflineEngine().seed_programs("prep", 1, start_seed=5)
    again = rebuilt(program)
    assert program.spec_hash == spec.spec_hash() and program.batch == "seed"
    assert again.task == spec.task and again.attributes == spec.attributes
    for p, q in zip(spec.layout.placements, again.layout.placements, strict=True):
        assert (p.object, p.support) == (q.object, q.support) and abs(p.x - q.x) < 1e-4 and abs(p.y - q.y) < 1e-4


def test_operators_are_specific():
    spec = sample_spec("pick_place", 11)
    import numpy as np

    rng = np.random.default_rng(0)
    target = spec.task.with_role("target")[0].name
    heavy = heavier(spec, rng, target)
    from sim import assets

    assert heavy.attributes.of(target).mass > assets.get_category(spec.task.object(target).category).mass_range[1]
    assert changed(spec, heavy) == {"attributes"}
    assert changed(spec, resample_task(spec, rng)) == {"task"}
    lone = spec.model_copy(update={"task": spec.task.model_copy(update={"objects": tuple(
        o.model_copy(update={"role": "target" if o.name == target else "receptacle"}) for o in spec.task.objects)})})
    with pytest.raises(VariationError, match="no distractor"):
        crowd_grasp_side(lone, rng, target)


def test_generation_program_transfers_by_role_binding():
    program = GenerationProgram(
        id="g1", mode_id="m1", factor="attributes", roles=["target", "receptacle"],
        required_relations=[Relation(predicate="inside", roles=["target", "receptacle"],
                                     requires={"receptacle": ["container"]})])
    engine = OfflineEngine()
    for family, seed in (("pick_place", 0), ("prep", 1)):
        spec = next(s for s in (sample_spec(family, seed + i) for i in range(10))
                    if any("container" in o["tags"] for o in scene_objects(s)))
        made = engine.apply_generation_program(program, spec, 3, phase="lift")
        assert made and all(p.binding and p.binding["receptacle"] in spec.object_names() for p in made)
        parent = rebuilt(program_of(spec, "seed"))
        for p in made:
            variant = rebuilt(p)
            assert changed(parent, variant) == {"attributes"}
            bound = p.binding["target"]
            assert variant.attributes.of(bound) != spec.attributes.of(bound)
