"""The scripted planner refuses, with the reason and without running, what it cannot plan; the verifier's
planner check reports the refusal; sdk_reference states the rules."""

import pytest

from sim import Scene, grasped, inside, lifted, near, on, place
from sim.env import CodaEnv
from sim.planner import refusal, run_planner
from sim.reference import sdk_reference
from sim.verify import verify_spec


def mug_on_plate(success):
    """A mug standing on a plate, an apple in a bowl; `success(mug, plate, apple, bowl)` is the task."""
    scene = Scene(family="pick_place", seed=0)
    mug = scene.add_object("mug/000", role="target", name="mug")
    plate = scene.add_object("plate/000", role="receptacle", name="plate")
    apple = scene.add_object("apple/000", role="distractor", name="apple")
    bowl = scene.add_object("bowl/000", role="receptacle", name="bowl")
    scene.set_task("a task", success=success(mug, plate, apple, bowl))
    scene.set_layout(place(mug, on=plate), place(plate, xy=(0.45, -0.15)), place(apple, on=bowl),
                     place(bowl, xy=(0.45, 0.18)))
    return CodaEnv(scene.spec())


REFUSED = {
    "on the table": (lambda m, p, a, b: on(m, "table") & ~grasped(m), "on(mug, table) has no planner solution"),
    "nothing to plan": (lambda m, p, a, b: ~grasped(m), "nothing to plan in ~grasped(mug)"),
    "no cavity": (lambda m, p, a, b: inside(m, p), "inside(mug, plate) has no planner solution: plate has no cavity"),
    "grasped without lifted": (lambda m, p, a, b: near(m, b) & grasped(m), "grasped(mug) is planned only with lifted"),
    "take out": (lambda m, p, a, b: near(m, b) & ~inside(a, b),
                 "~inside(apple, bowl) is false at the start and the planner plans no negation: no goal moves apple, bowl"),
    "first alternative": (lambda m, p, a, b: on(m, "table") | near(m, b), "on(mug, table) has no planner solution"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_predicates_are_not_run_and_say_why(case):
    success, reason = REFUSED[case]
    env = mug_on_plate(success)
    demo = run_planner(env)
    assert not demo.success and demo.steps == 0 and not demo.actions
    assert demo.failure.startswith(f"not planned: {reason}"), demo.failure


@pytest.mark.parametrize("success", [
    lambda m, p, a, b: near(a, p) & ~inside(a, b),  # the goal moves the apple out of the bowl
    lambda m, p, a, b: lifted(m) & grasped(m),
    lambda m, p, a, b: inside(m, b) & ~grasped(m) | on(m, "table"),  # only the first alternative is planned
])
def test_plannable_predicates_are_not_refused(success):
    env = mug_on_plate(success)
    env.reset()
    assert refusal(env) is None


def test_verification_with_the_planner_reports_a_refusal_as_a_failed_check():
    report = verify_spec(mug_on_plate(lambda m, p, a, b: ~grasped(m) & on(m, "table")).spec, planner=True)
    failed = {c.name: c.message for c in report.violations()}
    assert list(failed) == ["planner_solvable"], failed
    assert failed["planner_solvable"].startswith("the scripted planner cannot plan this scene: on(mug, table)")
    assert verify_spec(mug_on_plate(lambda m, p, a, b: on(m, "table")).spec).passed  # a valid task without it


def test_sdk_reference_states_the_planner_rules():
    text = sdk_reference()
    for rule in ("Negated atoms are never planned", "first alternative only", "`on(x, 'table')`",
                 "`grasped(x)` without `lifted(x)`", "a negation false at the start whose objects no goal moves"):
        assert rule in text, rule
