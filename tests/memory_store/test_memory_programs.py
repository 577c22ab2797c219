import pytest
from memory_workers import open_store

from memory_store.programs import (
    bind_program,
    bind_roles,
    compiles,
    generation_programs,
    record_outcome,
    training_programs,
)
from memory_store.schema import CompileCheck, GenerationProgram, TrainingProgram

KITCHEN = [
    {"name": "mug_1", "role": "target", "category": "mug"},
    {"name": "bowl_2", "role": "receptacle", "category": "bowl"},
    {"name": "bowl_1", "category": "bowl", "tags": ["container"]},
    {"name": "apple", "category": "apple", "tags": ["graspable"]},
    {"name": "block", "category": "cube", "tags": ["graspable"]},
    {"name": "shelf", "category": "shelf"},
]
INSIDE = [{"predicate": "inside", "roles": ["target", "receptacle"]}]


def test_bindings_are_distinct_compatible_deterministic_and_at_most_three():
    bindings = bind_roles(["target", "receptacle"], INSIDE, KITCHEN)
    assert bindings == [
        {"target": "mug_1", "receptacle": "bowl_2"},  # exact role matches first
        {"target": "mug_1", "receptacle": "bowl_1"},  # then by name among tag/category matches
        {"target": "apple", "receptacle": "bowl_2"},
    ]
    assert bind_roles(["target", "receptacle"], INSIDE, list(reversed(KITCHEN))) == bindings
    assert len(bind_roles(["target", "receptacle"], INSIDE, KITCHEN, max_bindings=1)) == 1


def test_one_object_never_fills_two_roles():
    objects = [{"name": "box", "category": "box", "tags": ["graspable", "container"]}]
    assert bind_roles(["target"], [], objects) == [{"target": "box"}]
    assert bind_roles(["target", "receptacle"], [], objects) == []


def test_an_unfillable_role_ends_the_search_at_once():
    """Session 36 (red team): 8 roles over 256 objects that fit all of them, the last role made impossible (a tag no
    object has) or two roles left with one object between them, tried every partial binding: N·(N−1)…(N−6) steps,
    a call that never returned. Only branches that can still be completed are entered now."""
    from sim.constants import ROLES

    roles = list(ROLES)[:8]
    objects = [{"name": f"o{i:03d}", "tags": roles} for i in range(256)]
    impossible = [{"predicate": "inside", "roles": [roles[-1]], "requires": {roles[-1]: ["no_such_tag"]}}]
    squeezed = [{"predicate": "inside", "roles": roles[-2:], "requires": {r: ["rare"] for r in roles[-2:]}}]
    one_rare = [*objects[:-1], {"name": "o255", "tags": [*roles, "rare"]}]
    assert bind_roles(roles, impossible, objects) == []  # returned only after the heat death before
    assert bind_roles(roles, squeezed, one_rare) == []  # two roles, one object that fits either
    found = bind_roles(roles, [], objects)
    assert len(found) == 3 and all(len(set(b.values())) == len(roles) for b in found)
    assert found[0] == dict(zip(roles, [o["name"] for o in objects[:8]], strict=True))  # the same order as before


def test_relation_requirements_filter_candidates():
    rel = [
        {"predicate": "inside", "roles": ["target", "receptacle"], "requires": {"receptacle": ["container"]}}
    ]
    assert [b["receptacle"] for b in bind_roles(["target", "receptacle"], rel, KITCHEN)] == ["bowl_1"] * 3


def test_transfer_to_another_family_by_tags():
    drawer_scene = [
        {"name": "drawer_top", "role": "articulated", "category": "drawer"},
        {"name": "knob_top", "role": "handle", "category": "knob"},
        {"name": "spoon", "category": "spoon", "tags": ["graspable"]},
    ]
    prog = GenerationProgram(
        id="g",
        mode_id="m",
        factor="layout",
        family="pick_place",
        roles=["target", "receptacle"],
        required_relations=INSIDE,
    )
    assert bind_program(prog, KITCHEN)[0] == {"target": "mug_1", "receptacle": "bowl_2"}
    assert bind_program(prog, drawer_scene) == []  # no receptacle in the drawer scene
    assert bind_roles(["target", "articulated"], [], drawer_scene) == [
        {"target": "spoon", "articulated": "drawer_top"}
    ]


def test_bad_inputs_are_explained():
    with pytest.raises(ValueError, match="valid roles: target"):
        bind_roles(["cup"], [], KITCHEN)
    with pytest.raises(ValueError, match="not in required roles"):
        bind_roles(["target"], INSIDE, KITCHEN)
    with pytest.raises(ValueError, match="max_bindings"):
        bind_roles(["target"], [], KITCHEN, max_bindings=4)
    with pytest.raises(ValueError, match="distinct"):
        bind_roles(["target", "target"], [], KITCHEN)
    with pytest.raises(ValueError, match="name"):
        bind_roles(["target"], [], [{"name": "a"}, {"name": "a"}])


def test_program_stores_are_indexed_by_mode(tmp_path):
    store = open_store(tmp_path)
    store.put_many(
        [
            GenerationProgram(id="g1", mode_id="m1", factor="layout", compile_checks=[CompileCheck(ok=True)]),
            GenerationProgram(id="g2", mode_id="m1", factor="attributes", in_pool=False),
            GenerationProgram(id="g3", mode_id="m2", factor="task"),
            TrainingProgram(id="t1", mode_id="m1", phase="grasp", improved=True),
            TrainingProgram(id="t2", mode_id="m1", phase="lift"),
        ]
    )
    assert [p.id for p in generation_programs(store, "m1")] == ["g1"]
    assert [p.id for p in generation_programs(store, "m1", in_pool_only=False)] == ["g1", "g2"]
    assert compiles(store.get("generation_programs", "g1")) and not compiles(
        store.get("generation_programs", "g2")
    )
    assert [p.id for p in training_programs(store, mode_id="m1")] == ["t1", "t2"]
    assert [p.id for p in training_programs(store, phase="grasp", improved=True)] == ["t1"]
    t2 = record_outcome(store.get("training_programs", "t2"), before=0.3, after=0.25, updates=200)
    assert t2.improved is False and t2.evidence == {"before": 0.3, "after": 0.25, "updates": 200}
