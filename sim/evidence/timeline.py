"""Build `Evidence` from a rollout trace: phases, events, distances, atoms, scene facts and keyframes.

The phase timeline is read from the states and the gripper commands alone (no planner internals), so it works
for policy rollouts as well as for planner demonstrations. The goals are the success predicate's positive atoms
in execution order (`sim.planner.order_subgoals`); one goal is worked on at a time:

- moves (`inside`, `on`, `stacked`, `near`): approach → grasp → lift → transport → place → release
- holds (`lifted`): approach → grasp → lift
- articulations (`open_fraction`): approach → grasp → open | close → release
"""

from __future__ import annotations

import numpy as np

from sim.evidence.keyframes import render_keyframes
from sim.evidence.models import AtomTrack, Evidence, GoalTrack, PhaseSpan
from sim.evidence.phases import ART_ORDER, MOVE_ORDER, Goal, Step, Tracker, goals_of, step_facts, xy_dist
from sim.evidence.ranges import TrainingRanges
from sim.evidence.scene_facts import object_facts, task_facts
from sim.trace import Trace


def build_evidence(trace: Trace, *, ranges: TrainingRanges | None = None, render: bool = False,
                   keyframe_dir: str | None = None, rollout_id: str = "") -> Evidence:
    """Evidence of one rollout; `render` adds 2-4 keyframes when offscreen rendering works."""
    from sim.predicates import atoms as atom_list

    ranges = ranges or TrainingRanges.default()
    spec = trace.spec
    env = trace.replay_env()
    pred = spec.task.success
    atoms_, negated = atom_list(pred), _negations(pred)
    state = trace.state_at(0, env)
    goals = goals_of(pred, state)
    moved = {g.obj for g in goals if g.kind != "articulate"}
    objects = object_facts(spec, state, ranges, moved)
    supports = {p.object: p.support for p in spec.layout.placements if p.support != "table"}
    steps: list[Step] = []
    phases: list[tuple[int, str]] = []
    tracker: Tracker | None = None
    for t in range(trace.steps + 1):
        state = trace.state_at(t, env)
        cmd = float(trace.actions[t - 1][6]) if t > 0 else -1.0
        f = step_facts(state, cmd, atoms_)
        steps.append(f)
        tracker = tracker or Tracker(goals=goals, first=f, supports=supports)
        g = tracker.goal
        goal_true = g is not None and g.atom.evaluate(state)
        phases.append(tracker.update(t, f, goal_true))
    tracker.close(trace.steps, steps[-1])
    ev = Evidence(
        rollout_id=rollout_id, steps=trace.steps, success=trace.success, success_step=trace.success_step,
        gripper_opening=2 * env.compiled.gripper.geometry.finger_open,
        task=task_facts(spec, ranges), events=tracker.events, objects=objects,
        timeline=_spans(phases, goals), goals=[_track(g, steps) for g in goals],
        atoms=[_atom_track(a, neg, steps, i) for i, (a, neg) in enumerate(zip(atoms_, negated, strict=True))],
    )
    _stall(ev, phases, goals, trace.success)
    if render:
        ev.keyframes = render_keyframes(trace, env, _key_steps(ev), keyframe_dir)
    return ev


def _negations(pred) -> list[bool]:
    out: list[bool] = []

    def walk(node, neg: bool) -> None:
        if node.op == "not":
            walk(node.term, not neg)
        elif node.op in ("and", "or"):
            for t in node.terms:
                walk(t, neg)
        else:
            out.append(neg)

    walk(pred, False)
    return out


def _rank(goals: list[Goal], gi: int, phase: str) -> int:
    if gi >= len(goals):
        return 100 * len(goals)
    order = ART_ORDER if goals[gi].kind == "articulate" else MOVE_ORDER
    return 100 * gi + (order.index(phase) if phase in order else 0)


def _stall(ev: Evidence, phases: list[tuple[int, str]], goals: list[Goal], success: bool) -> None:
    ranks = [_rank(goals, gi, ph) for gi, ph in phases]
    best = int(np.argmax(ranks)) if ranks else 0
    gi, phase = phases[best] if phases else (0, "approach")
    ev.phase_reached = phase if not success else ("release" if goals and goals[-1].kind != "hold" else phase)
    ev.stalled_step = best
    ev.stalled_phase = phase
    ev.stalled_goal = str(goals[min(gi, len(goals) - 1)].atom) if goals else ""


def _spans(phases: list[tuple[int, str]], goals: list[Goal]) -> list[PhaseSpan]:
    spans: list[PhaseSpan] = []
    for t, (gi, ph) in enumerate(phases):
        goal = str(goals[min(gi, len(goals) - 1)].atom) if goals else ""
        if spans and spans[-1].phase == ph and spans[-1].goal == goal:
            spans[-1].end = t
        else:
            spans.append(PhaseSpan(phase=ph, start=t, end=t, goal=goal))
    return spans


def _track(g: Goal, steps: list[Step]) -> GoalTrack:
    r = lambda v: round(float(v), 4)  # noqa: E731
    track = GoalTrack(goal=str(g.atom), kind=g.kind, obj=g.obj, dest=g.dest,
                      tcp_distance=[r(np.linalg.norm(s.grip - s.pos[g.obj])) for s in steps])
    if g.kind == "articulate":
        track.open = [r(s.open[g.obj]) for s in steps]
    else:
        track.lift = [r(s.lift[g.obj]) for s in steps]
        if g.dest:
            track.dest_distance = [r(xy_dist(s.pos[g.obj], s.pos[g.dest])) for s in steps]
    return track


def _atom_track(atom, negated: bool, steps: list[Step], i: int) -> AtomTrack:
    spans: list[tuple[int, int]] = []
    for t, s in enumerate(steps):
        if s.atoms[i]:
            if spans and spans[-1][1] == t - 1:
                spans[-1] = (spans[-1][0], t)
            else:
                spans.append((t, t))
    return AtomTrack(atom=str(atom), negated=negated, true_spans=spans, final=bool(steps[-1].atoms[i]))


def _key_steps(ev: Evidence) -> list[tuple[int, str]]:
    keys = [(0, "start")]
    grasp = ev.events_of("first_grasp")
    if grasp:
        keys.append((grasp[0].step, "first grasp"))
    fail = ev.first_failure()
    keys.append((fail.step, fail.kind) if fail else (ev.stalled_step, f"stalled in {ev.stalled_phase}"))
    keys.append((ev.steps, "end"))
    unique: dict[int, str] = {}
    for t, label in keys:
        unique.setdefault(t, label)
    return sorted(unique.items())[:4]
