"""Offline data engine through the sim server: seed programs, one-factor variants, targeted/control batches,
role-bound transfer, domain randomization."""

from __future__ import annotations

import numpy as np
import pytest

from agent.methods import DR_RANGES, uniform_variant
from agent.roles.engine import CONTROL_FACTOR, SCENE_FACTOR, OfflineEngine
from memory_store.schema import GenerationProgram, Relation
from sim.engine.programs import program_of
from sim.engine.variations import (
    VariationError,
    crowd_grasp_side,
    domain_randomize,
    heavier,
    resample_task,
    scene_objects,
)
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
def test_engine_programs_pass_the_verifier(family, hub):
    engine = OfflineEngine(hub=hub)
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
def test_targeted_variants_change_only_the_named_factor(family, diagnosis_factor, phase, hub):
    spec = sample_spec(family, 3)
    parent = rebuilt(program_of(spec))  # compare programs with programs (same rounding, no relations)
    targeted, control = OfflineEngine(hub=hub).batches(spec, diagnosis_factor, phase, 2, seed=1)
    factor = SCENE_FACTOR[diagnosis_factor]
    for program, expected in [(p, factor) for p in targeted] + [(p, CONTROL_FACTOR[factor]) for p in control]:
        variant = rebuilt(program)
        assert changed(parent, variant) == {FACTOR_FIELD[expected]}, (program.operator, changed(parent, variant))
        assert program.factor == expected and program.parent == spec.spec_hash()
    assert targeted, "the engine found no targeted variant"


@pytest.mark.parametrize(("diagnosis_factor", "phase"), [("spatial", "grasp"), ("attribute", "lift"), ("task", "place")])
def test_kept_batches_vary_the_other_factor_and_redraw_the_diagnosed_one_in_control(diagnosis_factor, phase, hub):
    """`keep=True` (`Preset.targeted_batches = "keep"`): the targeted variants keep the diagnosed factor and change
    only the other one; the control variants redraw only the diagnosed factor."""
    spec = sample_spec("pick_place", 4)
    parent = rebuilt(program_of(spec))
    targeted, control = OfflineEngine(hub=hub).batches(spec, diagnosis_factor, phase, 2, seed=3, keep=True)
    factor = SCENE_FACTOR[diagnosis_factor]
    assert targeted and control
    for program, expected in [(p, CONTROL_FACTOR[factor]) for p in targeted] + [(p, factor) for p in control]:
        assert changed(parent, rebuilt(program)) == {FACTOR_FIELD[expected]}, program.operator
        assert program.factor == expected
    assert {p.operator for p in control} == {"resample"}


def test_seed_program_rebuilds_its_scene(hub):
    spec = sample_spec("prep", 5)
    (program,) = OfflineEngine(hub=hub).seed_programs("prep", 1, start_seed=5)
    again = rebuilt(program)
    assert program.spec_hash == again.spec_hash() and program.batch == "seed"  # the id of the scene it builds
    assert again.task == spec.task and again.attributes == spec.attributes
    for p, q in zip(spec.layout.placements, again.layout.placements, strict=True):
        assert (p.object, p.support) == (q.object, q.support) and abs(p.x - q.x) < 1e-4 and abs(p.y - q.y) < 1e-4


def test_operators_are_specific():
    spec = sample_spec("pick_place", 11)
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


def test_generation_program_transfers_by_role_binding(hub):
    program = GenerationProgram(
        id="g1", mode_id="m1", factor="attributes", roles=["target", "receptacle"],
        required_relations=[Relation(predicate="inside", roles=["target", "receptacle"],
                                     requires={"receptacle": ["container"]})])
    engine = OfflineEngine(hub=hub)
    for family, seed in (("pick_place", 0), ("prep", 1)):
        spec = next(s for s in (sample_spec(family, seed + i) for i in range(10))
                    if any("container" in o["tags"] for o in scene_objects(s)))
        made = engine.apply_generation_program(program, spec, 3, phase="lift")
        assert made and all(p.binding and p.binding["receptacle"] in spec.object_names() for p in made)
        parent = rebuilt(program_of(spec))
        for p in made:
            variant = rebuilt(p)
            assert changed(parent, variant) == {"attributes"}
            bound = p.binding["target"]
            assert variant.attributes.of(bound) != spec.attributes.of(bound)


def test_domain_randomization_through_the_server_draws_as_in_process(hub):
    """The sim server's draws advance the caller's generator exactly as in-process draws would."""
    engine = OfflineEngine(hub=hub)
    rng, ref = np.random.default_rng([0, 1, 17]), np.random.default_rng([0, 1, 17])
    for family, seed in (("pick_place", 4), ("articulated", 5), ("stack", 6)):
        spec = sample_spec(family, seed)
        made = engine.domain_randomized(spec, rng, DR_RANGES)
        expected = program_of(domain_randomize(spec, ref, DR_RANGES))
        assert (made.source, made.spec_hash, made.parent) == (expected.source, expected.spec_hash, spec.spec_hash())
        assert made.batch == "domain_rand" and made.operator == "domain_rand"
    assert rng.random() == ref.random()


def test_uniform_variants_use_the_servers_operator_names(hub):
    engine = OfflineEngine(hub=hub)
    assert engine.operators("attributes")[:2] == ["heavier", "slippery"]
    rng = np.random.default_rng(3)
    made = [uniform_variant(engine, sample_spec("pick_place", 20 + i), rng) for i in range(3)]
    assert any(m is not None and m.batch == "uniform" and m.factor in ("task", "layout", "attributes") for m in made)


def test_the_engine_needs_the_servers():
    with pytest.raises(RuntimeError, match="connect the roles"):
        OfflineEngine().seed_programs("stack", 1)
