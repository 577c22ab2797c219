"""The verifier's receptacle_capacity check: a receptacle must be able to hold what the task puts in or on it."""

import functools
import operator

import pytest

from sim import Scene, grasped, inside, near, on
from sim.families import sample_spec
from sim.verify import verify_spec


def scene_with(receptacle: str, items: list[str], relation=inside, success=None):
    """A spec whose task puts `items` (instance ids) in or on `receptacle` (an instance id)."""
    scene = Scene(family="prep", seed=0)
    handles = [scene.add_object(i, role="target", name=f"{i.split('/')[0]}_{k}") for k, i in enumerate(items)]
    r = scene.add_object(receptacle, role="receptacle", name=receptacle.split("/")[0])
    goal = functools.reduce(operator.and_, [relation(h, r) & ~grasped(h) for h in handles])
    scene.set_task("put them there", success=goal if success is None else success(handles, r))
    return scene.spec()


def capacity(spec):
    return next(c for c in verify_spec(spec).checks if c.name == "receptacle_capacity")


@pytest.mark.parametrize("family,seed", [("prep", s) for s in range(4)] + [("pick_place", 20), ("articulated", 3)])
def test_family_scenes_pass(family, seed):
    """Seed scenes the planner solves, among them a hammer sticking out of a bowl (pick_place 20)."""
    check = capacity(sample_spec(family, seed))
    assert check.passed, check.message


def test_two_small_tomatoes_fit_in_a_large_pot():
    assert capacity(scene_with("pot/002", ["tomato/000", "tomato/001"])).passed


def test_a_tomato_and_an_onion_overfill_a_small_pot():
    """The issue's scene: it verified at three seeds and the planner failed on one."""
    check = capacity(scene_with("pot/006", ["tomato/005", "onion/006"]))
    assert not check.passed
    assert check.message.startswith("pot cannot hold tomato_0, onion_1 side by side: they need 0.126 m")
    assert check.objects == ["onion_1", "pot", "tomato_0"]


def test_an_item_wider_than_the_opening_does_not_fit():
    check = capacity(scene_with("bowl/016", ["pot/000"]))
    assert not check.passed and check.message.startswith("pot_0 does not fit in bowl: 0.173 m wide")


def test_an_item_taller_than_a_cabinet_does_not_fit():
    check = capacity(scene_with("door/000", ["bottle/000"]))
    assert not check.passed and "bottle_0 does not fit in door: 0.219 m tall" in check.message


def test_footprints_may_not_cover_more_than_the_opening():
    check = capacity(scene_with("storage_box/000", ["apple/000"] * 6))
    assert not check.passed and "footprints cover 105% of its opening" in check.message


def test_centres_of_items_on_a_plate_must_fit_on_it():
    assert capacity(scene_with("plate/004", ["apple/000"] * 3, relation=on)).passed
    check = capacity(scene_with("plate/004", ["apple/000"] * 4, relation=on))
    assert not check.passed and check.message.startswith("plate cannot hold apple_0, apple_1, apple_2, apple_3")


def test_only_terms_every_solution_needs_are_counted():
    """Alternatives (|) and negations (~) do not ask the receptacle to hold anything."""
    either = scene_with("pot/006", ["tomato/005", "onion/006"],
                        success=lambda items, r: inside(items[0], r) | inside(items[1], r))
    assert capacity(either).passed
    neither = scene_with("pot/006", ["tomato/005", "onion/006"],
                         success=lambda items, r: near(items[0], r) & ~(inside(items[0], r) & inside(items[1], r)))
    assert capacity(neither).passed


def test_the_reason_is_one_line_per_receptacle():
    spec = scene_with("pot/006", ["tomato/005", "onion/006"])
    report = verify_spec(spec)
    assert not report.passed and "\n" not in report.summary()
    assert "receptacle_capacity: pot cannot hold" in report.summary()


def graspable(spec):
    return next(c for c in verify_spec(spec).checks if c.name == "graspable_target")


def test_a_task_may_only_move_graspable_objects():
    """A bowl put into a crate: the asset pool marks bowls not graspable, so the scene fails verification with a
    reason naming it and the objects that could be moved; a tomato into the same crate passes."""
    check = graspable(scene_with("crate/000", ["bowl/000"]))
    assert not check.passed and check.objects == ["bowl_0"]
    assert "pick up bowl_0 (a bowl)" in check.message and "not graspable" in check.message
    assert graspable(scene_with("crate/000", ["tomato/000"])).passed
    either = scene_with("crate/000", ["bowl/000", "tomato/000"],
                        success=lambda items, r: inside(items[0], r) | inside(items[1], r))
    assert graspable(either).passed  # only atoms every way of succeeding needs


@pytest.mark.parametrize("family", ["pick_place", "stack", "articulated", "prep"])
def test_sampled_scenes_move_only_graspable_objects(family):
    for seed in range(12):
        check = graspable(sample_spec(family, seed))
        assert check.passed, check.message
