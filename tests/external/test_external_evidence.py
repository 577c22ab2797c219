"""External failures as critic evidence (`policy.external.evidence`) and scenes of this simulator resembling them
(`sim.engine.proxy`): hand-made external states (no venv) through the tracker, the evidence and the offline
critic, and a proxy scene that verifies."""

from __future__ import annotations

import numpy as np
import pytest

from agent.roles.critic import OfflineCritic
from policy.external.evidence import ExternalObjectFacts, external_evidence
from policy.external.phases import LIFT_HEIGHT, PhaseTracker

CUBE = ExternalObjectFacts("cube", "target", "block", (0.02, 0.02, 0.02))
CUBE_B = ExternalObjectFacts("cubeB", "support", "block", (0.025, 0.025, 0.025))


def state(tcp, objs, touch=None):
    objs = [list(o) for o in objs]
    t = touch if touch is not None else [(0, 0, 0)] * len(objs)
    return {"tcp_pos": np.array(tcp, float), "obj_pos": np.array(objs, float), "touch": np.array(t, bool)}


def evidence(states, objects, opening, kind="pick", family="pick_place"):
    tr = PhaseTracker(kind, states[0], obj=0, goal=1 if len(objects) > 1 else None)
    for s, o in zip(states[1:], opening, strict=True):
        tr.update(s, o, False)
    return external_evidence(benchmark="robosuite", task="Lift", family=family, instruction="pick up the block",
                             kind=kind, objects=objects, series=tr.series, success=False, gripper_opening=0.08)


def test_a_missed_grasp_is_an_execution_failure_in_the_grasp():
    cube = (0.5, 0.0, 0.02)
    states = [state((0.5, 0.0, 0.2), [cube]), state((0.5, 0.0, 0.1), [cube]), state((0.5, 0.01, 0.04), [cube]),
              state((0.5, 0.01, 0.03), [cube])]  # closes 1 cm beside it, never both fingers on it
    ev = evidence(states, [CUBE], [1.0, 1.0, 0.2])
    assert [p.phase for p in ev.timeline] == ["approach", "grasp"] and ev.stalled_phase == "grasp"
    assert [e.kind for e in ev.events] == ["grasp_missed"] and ev.events[0].step == 3
    d = OfflineCritic().diagnose(ev)
    assert (d.factor, d.phase) == ("execution", "grasp"), d


def test_held_but_never_lifted_is_a_failed_lift():
    cube = (0.5, 0.0, 0.02)
    both = [(1, 1, 1)]
    states = [state((0.5, 0.0, 0.2), [cube]), state((0.5, 0.0, 0.03), [cube]), state((0.5, 0.0, 0.03), [cube], both),
              state((0.5, 0.0, 0.05), [(0.5, 0.0, 0.021)], both)]
    ev = evidence(states, [CUBE], [1.0, 0.3, 0.3])
    kinds = [e.kind for e in ev.events]
    assert kinds == ["first_grasp", "lift_failed"], kinds
    assert ev.events[1].values["lift_m"] < LIFT_HEIGHT and ev.stalled_phase == "lift"
    d = OfflineCritic().diagnose(ev)
    assert d.factor == "execution" and d.phase == "grasp", d  # a sound grasp lifts an ordinary cube


def test_knocking_the_other_cube_first_is_spatial():
    a, b = (0.5, 0.1, 0.02), (0.5, -0.05, 0.025)
    states = [state((0.5, 0.0, 0.2), [a, b]),
              state((0.5, -0.05, 0.06), [a, b], [(0, 0, 0), (0, 0, 1)]),  # the hand lands on cube B
              state((0.5, -0.02, 0.06), [a, (0.5, -0.01, 0.025)]),       # and shoves it 4 cm
              state((0.5, 0.05, 0.06), [a, (0.5, -0.01, 0.025)])]
    ev = evidence(states, [CUBE, CUBE_B], [1.0, 1.0, 1.0], family="stack")
    assert ev.goals[0].dest == "cubeB" and len(ev.goals[0].dest_distance) == 3
    assert [e.kind for e in ev.events][:2] == ["collision", "displaced"]
    d = OfflineCritic().diagnose(ev)
    assert (d.factor, d.phase) == ("spatial", "approach"), d


def test_a_cube_wider_than_the_jaw_is_an_attribute_failure():
    wide = ExternalObjectFacts("cube", "target", "block", (0.045, 0.045, 0.02))
    cube = (0.5, 0.0, 0.02)
    states = [state((0.5, 0.0, 0.2), [cube]), state((0.5, 0.0, 0.05), [cube])]
    d = OfflineCritic().diagnose(evidence(states, [wide], [1.0]))
    assert d.factor == "attribute" and d.phase == "grasp", d


def test_a_door_never_touched_stalls_in_the_approach():
    handle = (0.4, 0.1, 0.25)
    states = [state((0.5, 0.0, 0.2), [handle]), state((0.45, 0.05, 0.22), [handle])]
    door = ExternalObjectFacts("door", "articulated", "door", (0.1, 0.02, 0.2))
    ev = evidence(states, [door], [1.0], kind="open", family="articulated")
    assert ev.goals[0].kind == "articulate" and ev.task.template == "robosuite:Lift"
    d = OfflineCritic().diagnose(ev)
    assert d.factor == "execution" and d.phase in ("approach", "grasp"), d


# --- scenes resembling an external episode --------------------------------------------------------------


def test_proxy_scene_puts_the_task_objects_where_the_benchmark_had_them_and_verifies():
    from sim.engine.proxy import proxy_scene
    from sim.engine.variations import default_roles
    from sim.families import sample_spec
    from sim.verify import verify_spec

    objects = [{"role": "target", "pos": [0.52, 0.08, 0.02], "half_extent": [0.02, 0.02, 0.02]},
               {"role": "support", "pos": [0.48, -0.06, 0.025], "half_extent": [0.025, 0.025, 0.025]}]
    passed = 0
    for seed in range(3):
        spec = sample_spec("stack", seed)
        out = proxy_scene(spec, objects, source="robosuite:Stack")
        roles = default_roles(spec)
        p, q = out.layout.placement(roles["target"]), out.layout.placement(roles["dest"])
        assert (p.x, p.y) == (0.52, 0.08) and (q.x, q.y) == (0.48, -0.06)
        assert out.meta["external"] == "robosuite:Stack" and out.spec_hash() != spec.spec_hash()
        passed += verify_spec(out).passed
    assert passed >= 2  # the verifier decides; most of these must be valid scenes


def test_proxy_scene_starts_the_hand_where_the_episode_did_and_its_planner_demo_begins_there():
    from sim.engine.proxy import proxy_scene
    from sim.env import CodaEnv
    from sim.families import sample_spec
    from sim.planner import run_planner

    start = {"pos": [0.46, 0.0, 0.22], "quat": [0.997, 0.003, -0.075, 0.008], "opening": 0.52}  # robosuite's Panda
    objects = [{"role": "target", "pos": [0.5, 0.05, 0.02], "half_extent": [0.02] * 3}]
    spec = sample_spec("pick_place", 1)
    home = proxy_scene(spec, objects)
    out = proxy_scene(spec, objects, start=start)
    assert home.start is None and out.start is not None and out.spec_hash() != home.spec_hash()
    demo = run_planner(CodaEnv(out), seed=0)
    first = demo.observations[0]["proprio"]
    assert np.allclose(first[0:3], start["pos"], atol=2e-3) and abs(first[10] - 0.52) < 0.02
    assert demo.success
    with pytest.raises(ValueError, match="opening"):
        proxy_scene(spec, objects, start={**start, "opening": 1.5})


def test_proxy_scene_states_the_external_task_by_its_template_and_verifies():
    from sim.engine.proxy import proxy_scene
    from sim.families import sample_spec
    from sim.verify import verify_spec

    objects = [{"role": "target", "pos": [0.5, 0.05, 0.02], "half_extent": [0.02] * 3}]
    passed = 0
    for seed in range(3):
        out = proxy_scene(sample_spec("pick_place", seed), objects, source="robosuite:Lift", template="pp_lift")
        assert out.task.template == "pp_lift" and out.task.instruction.startswith("pick up the ")
        assert out.task.success.op == "and" and "lifted" in str(out.task.success)
        passed += verify_spec(out, planner=True).passed
    assert passed >= 2
    with pytest.raises(ValueError, match="unknown pick_place template 'st_on'; valid: pp_in"):
        proxy_scene(sample_spec("pick_place", 0), objects, template="st_on")


def test_every_external_task_template_is_one_of_its_family():
    from policy.external import metaworld_tasks, robosuite_tasks
    from sim.families import get_family

    tasks = [*robosuite_tasks.TASKS.values(), *metaworld_tasks.TASKS.values()]
    assert {t.name: t.template for t in robosuite_tasks.TASKS.values()} == {
        "Lift": "pp_lift", "Stack": "st_on", "PickPlaceCan": "pp_in", "Door": "ar_open"}
    for t in tasks:
        assert not t.template or t.template in get_family(t.family).TEMPLATES, t.name


def test_proxy_scene_needs_a_target():
    from sim.engine.proxy import proxy_scene
    from sim.families import sample_spec

    with pytest.raises(ValueError, match="role 'target'"):
        proxy_scene(sample_spec("stack", 0), [{"role": "support", "pos": [0.5, 0, 0], "half_extent": [0.02] * 3}])


def test_a_door_body_is_not_a_grasp_width():
    handle = (0.4, 0.1, 0.25)
    door = ExternalObjectFacts("door", "articulated", "door", (0.2, 0.2, 0.2))  # far wider than the jaw
    ev = evidence([state((0.5, 0.0, 0.2), [handle]), state((0.45, 0.05, 0.22), [handle])], [door], [1.0],
                  kind="open", family="articulated")
    assert ev.object("door").grasp_width is None
    assert OfflineCritic().diagnose(ev).factor == "execution"
