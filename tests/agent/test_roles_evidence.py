"""Rollout evidence: phase timeline, grasp and contact events, goal distances, atoms over time, scene facts."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sim.engine.planted import attempt
from sim.evidence.models import Evidence
from sim.evidence.ranges import TrainingRanges, relation_signature
from sim.evidence.timeline import build_evidence
from sim.families import sample_spec
from sim.predicates import grasped, inside, open_fraction
from sim.trace import planner_trace


def planted(family: str, kind: str):
    """The first failed rollout of a planted kind over a few seeds (kinds do not apply to every scene)."""
    for seed in range(40):
        item = attempt(family, seed, kind)
        if item is not None:
            return item
    raise AssertionError(f"no {kind} failure in 40 {family} scenes")


@pytest.fixture(scope="module")
def demo_evidence():
    demo, trace = planner_trace(sample_spec("pick_place", 0))
    assert demo.success and trace.success
    return trace, build_evidence(trace, rollout_id="r0")


def test_successful_demo_goes_through_the_phases_in_order(demo_evidence):
    trace, ev = demo_evidence
    order = [s.phase for s in ev.timeline]
    assert order[:6] == ["approach", "grasp", "lift", "transport", "place", "release"], order
    assert ev.success and ev.phase_reached == "release"
    assert ev.timeline[0].start == 0 and ev.timeline[-1].end == trace.steps
    kinds = [e.kind for e in ev.events]
    assert kinds[0] == "first_grasp" and kinds[-1] == "goal_done" and not ev.first_failure()


def test_goal_tracks_and_atoms_follow_the_episode(demo_evidence):
    trace, ev = demo_evidence
    g = ev.goals[0]
    assert len(g.tcp_distance) == trace.steps + 1 == len(g.dest_distance) == len(g.lift)
    assert g.tcp_distance[0] > 0.1 and min(g.tcp_distance) < 0.03
    assert g.dest_distance[-1] < g.dest_distance[0] and max(g.lift) > 0.02
    inside_atom = next(a for a in ev.atoms if not a.negated)
    assert inside_atom.final and inside_atom.true_spans[-1][1] == trace.steps


def test_evidence_is_json_and_prompt_text(demo_evidence):
    _, ev = demo_evidence
    data = json.loads(ev.model_dump_json())
    assert Evidence.model_validate(data) == ev
    text = ev.to_prompt_text()
    target = ev.goals[0].obj
    assert target in text and "Phase timeline: approach 0-" in text and "first_grasp" in text


def test_heavy_target_shows_a_failed_lift():
    item = planted("pick_place", "heavy")
    assert not item.trace.success
    ev = build_evidence(item.trace)
    failure = ev.first_failure()
    assert failure.kind == "lift_failed" and failure.phase == "lift"
    assert ev.stalled_phase == "lift" and ev.events_of("first_grasp")
    target = ev.object(ev.goals[0].obj)
    assert target.out_of_range and "kg outside the training range" in target.out_of_range[0]


def test_cabinet_beside_the_target_is_a_collision_during_approach():
    item = planted("pick_place", "occluder")
    ev = build_evidence(item.trace)
    hits = ev.events_of("collision")
    assert hits and hits[0].phase == "approach" and hits[0].objects[0] == "gripper"
    target = ev.object(ev.goals[0].obj)
    assert any(n.grasp_side and n.gap < 0.02 for n in target.neighbours)


def test_articulated_rollout_opens_and_releases():
    spec = next(s for s in (sample_spec("articulated", i) for i in range(20)) if s.task.success.op == "open_fraction")
    _, trace = planner_trace(spec)
    assert trace.success
    ev = build_evidence(trace)
    track = ev.goals[0]
    direction = "open" if track.open[-1] > track.open[0] else "close"
    assert [s.phase for s in ev.timeline][:3] == ["approach", "grasp", direction]
    assert track.kind == "articulate" and ev.phase_reached == "release"
    assert ev.object(ev.goals[0].obj).facing_deg < 45


def test_keyframes_render_or_are_skipped(tmp_path):
    item = planted("stack", "lift_drop")
    ev = build_evidence(item.trace, render=True, keyframe_dir=str(tmp_path))
    assert len(ev.keyframes) <= 4
    for k in ev.keyframes:  # when GL works: PNG files on disk, bytes kept out of the JSON
        assert k.png.startswith(b"\x89PNG") and (tmp_path / k.path.split("/")[-1]).exists()
    assert "png" not in json.loads(ev.model_dump_json())["keyframes"][0] if ev.keyframes else True


def test_training_ranges_know_train_templates_and_relations():
    r = TrainingRanges.default()
    assert r.template_seen("pp_in") and r.template_seen("pp_near") is False and r.template_seen("custom") is None
    assert r.relations_seen(inside("a", "b") & ~grasped("a"))
    assert not r.relations_seen(open_fraction("d", min=0.3, max=0.6))
    assert relation_signature(inside("a", "b") & ~grasped("a")) == ("inside", "~grasped")
    lo, hi = r.mass["mug"]
    assert r.out_of_range("mug", mass=hi * 3) and not r.out_of_range("mug", mass=float(np.mean([lo, hi])))
