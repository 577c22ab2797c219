"""Rollout evidence (`sim.evidence.models.Evidence`) for an external episode, built from the external simulator's
own state as the adapter's `phases.PhaseTracker` recorded it — so the failure critic (offline or LLM) reads an
external failure exactly as it reads one of this project's rollouts.

What the external state gives, per executed action (10 Hz, the steps of the evidence): the TCP-object distance,
the object's rise and displacement, the finger opening, which fingers touch the object, the object's distance to
the goal point (Stack's cube B, the can's bin), the first other object the end effector touches and how far the
other objects moved. From that:

- the timeline: approach until the TCP first comes within `phases.REACH_DIST` of the object, grasp until both
  fingers hold it (for open tasks: until the end effector touches the handle), then lift (until it rose
  `phases.LIFT_HEIGHT`), then transport (Stack, PickPlaceCan; Lift stays in lift) or open;
- events, with the meaning the critic gives them (`sim.evidence.models.EventKind`): `first_grasp`, `grasp_missed`
  (the jaw closed within reach of the object without holding it, before any grasp), `lift_failed` (held, never
  lifted; `lift_m` the largest rise), `drop` (lifted, then let go and back under half the lift height),
  `collision` (the end effector touched another object before the first grasp) and `displaced` (another object
  moved `phases.MOVED_DIST` before the first grasp);
- the goal track (TCP distance, lift, distance to the destination) and the objects' facts: category, role, height
  and, for the object the hand must close on (role target), the width across the fingers (twice the smaller
  horizontal half extent), from the benchmark's own model.

The task facts name the benchmark task as the template (`template_seen` None: a benchmark's instruction has no
template of this project) with the family's relations counted as seen: an external failure is never blamed on a
new task. Nothing here uses this project's success predicates; success is the benchmark's.
"""

from __future__ import annotations

from dataclasses import dataclass

from policy.external.phases import CLOSED_OPENING, LIFT_HEIGHT, MOVED_DIST, REACH_DIST
from sim.evidence.models import Event, Evidence, GoalTrack, ObjectFacts, PhaseSpan, TaskFacts

GOAL_RELATION = {"pick_place": "inside", "stack": "on", "prep": "inside"}
"""the relation of a pick task's goal by family (a pick task without a destination object is `lifted`)"""


@dataclass(frozen=True)
class ExternalObjectFacts:
    """One object of an external task as the evidence names it (the adapter's token)."""

    name: str
    role: str
    category: str
    half_extent: tuple[float, float, float]
    """metres, in the object's frame (robosuite: the collision box; PickPlaceCan's bin: the can's quadrant)"""


def goal_atom(kind: str, family: str, obj: str, dest: str | None) -> str:
    if kind in ("open", "push"):
        return f"open_fraction({obj}, min=0.75)" if kind == "open" else f"near({obj}, goal)"
    if dest is None:
        return f"lifted({obj})"
    return f"{GOAL_RELATION.get(family, 'on')}({obj}, {dest})"


def _first(flags, start: int = 0) -> int | None:
    return next((i for i in range(start, len(flags)) if flags[i]), None)


def external_evidence(*, benchmark: str, task: str, family: str, instruction: str, kind: str,
                      objects: list[ExternalObjectFacts], series: dict[str, list], success: bool,
                      gripper_opening: float, rollout_id: str = "") -> Evidence:
    """The evidence of one external episode (object 0 is the task's object, a second object its destination).
    `series`: `PhaseTracker.series`; `kind`: its phase ladder (pick, push, open)."""
    n = len(series["tcp_dist"])
    obj = objects[0].name
    dest = objects[1].name if len(objects) > 1 and kind == "pick" else None
    goal = goal_atom(kind, family, obj, dest)
    step = lambda i: i + 1  # noqa: E731 - state i is the one after action i + 1
    reach = _first([d <= REACH_DIST for d in series["tcp_dist"]])
    if kind == "pick":
        hold = _first(series["grasp"])
        rise = _first([r >= LIFT_HEIGHT for r in series["rise"]], hold or 0) if hold is not None else None
        marks = [("approach", 0), ("grasp", reach), ("lift", hold),
                 ("transport" if dest else "lift", rise if dest else None)]
    else:
        hold = _first(series["contact"])
        rise = None
        marks = [("approach", 0), ("grasp", reach), ("open" if kind == "open" else "transport", hold)]
    kept: list[tuple[str, int]] = []
    for p, s in marks:  # each phase starts after the one before it
        if s is not None and (not kept or s > kept[-1][1]):
            kept.append((p, s))
    marks = kept
    timeline = [PhaseSpan(phase=p, start=step(s) if k else 0, end=step(marks[k + 1][1]) - 1 if k + 1 < len(marks)
                          else max(n, 1), goal=goal) for k, (p, s) in enumerate(marks)]
    phase = timeline[-1].phase if timeline else "approach"
    stalled = marks[-1][1] if len(marks) > 1 else min(range(n), key=lambda i: series["tcp_dist"][i], default=0)
    # the state where the last phase began; an episode that never got past the approach: where it came closest
    events = _events(series, kind, obj, objects, hold, rise, dest, step)
    track = GoalTrack(goal=goal, kind="articulate" if kind == "open" else "move", obj=obj, dest=dest,
                      tcp_distance=[round(float(v), 4) for v in series["tcp_dist"]],
                      lift=[round(float(v), 4) for v in series["rise"]] if kind == "pick" else [],
                      dest_distance=[round(float(v), 4) for v in series["goal_dist"] if v is not None])
    # the width across the fingers only for an object the hand closes on (a door's or drawer's body is not grasped)
    facts = [ObjectFacts(name=o.name, category=o.category, role=o.role,
                         grasp_width=round(2 * min(o.half_extent[0], o.half_extent[1]), 4)
                         if o.role == "target" else None,
                         height=round(2 * o.half_extent[2], 4)) for o in objects]
    task_facts = TaskFacts(family=family, instruction=instruction, template=f"{benchmark}:{task}", template_seen=None,
                           relations=[goal.split("(")[0]], relations_seen=True, goals=[goal])
    return Evidence(rollout_id=rollout_id, steps=n, success=success, gripper_opening=gripper_opening,
                    success_step=n if success else None, task=task_facts, timeline=timeline, phase_reached=phase,
                    stalled_step=step(stalled) if n else 0, stalled_phase=phase, stalled_goal=goal,
                    events=events, goals=[track], objects=facts)


def _events(series: dict[str, list], kind: str, obj: str, objects: list[ExternalObjectFacts], hold: int | None,
            rise: int | None, dest: str | None, step) -> list[Event]:
    n = len(series["tcp_dist"])
    before = hold if hold is not None else n
    phase_at = lambda i: "approach" if all(d > REACH_DIST for d in series["tcp_dist"][: i + 1]) else "grasp"  # noqa: E731
    out: list[Event] = []
    hit = _first([c is not None for c in series["other_contact"][:before]])
    if hit is not None:
        other = objects[series["other_contact"][hit]].name if series["other_contact"][hit] < len(objects) else "object"
        out.append(Event(step=step(hit), kind="collision", phase=phase_at(hit), objects=[other],
                         detail=f"the end effector touched the {other} before grasping the {obj}"))
    pushed = _first([m >= MOVED_DIST for m in series["other_moved"][:before]])
    if pushed is not None:
        out.append(Event(step=step(pushed), kind="displaced", phase=phase_at(pushed), objects=[o.name for o in objects[1:]],
                         detail=f"another object was pushed {series['other_moved'][pushed] * 100:.1f} cm",
                         values={"moved_m": round(float(series["other_moved"][pushed]), 4)}))
    if kind != "pick":
        return sorted(out, key=lambda e: e.step)
    missed = _first([series["tcp_dist"][i] <= REACH_DIST and series["opening"][i] < CLOSED_OPENING
                     and not series["grasp"][i] for i in range(before)])
    if missed is not None:
        out.append(Event(step=step(missed), kind="grasp_missed", phase="grasp", objects=[obj],
                         detail=f"the gripper closed {series['tcp_dist'][missed] * 100:.1f} cm from the {obj} "
                                "without holding it"))
    if hold is not None:
        out.append(Event(step=step(hold), kind="first_grasp", phase="grasp", objects=[obj],
                         detail=f"both fingers on the {obj}"))
        if rise is None:
            best = max(series["rise"][hold:], default=0.0)
            last = max(i for i in range(hold, n) if series["grasp"][i])
            out.append(Event(step=step(last), kind="lift_failed", phase="lift", objects=[obj],
                             detail=f"the {obj} was held but rose only {best * 100:.1f} cm",
                             values={"lift_m": round(float(best), 4)}))
        else:
            fell = next((i for i in range(rise, n) if not series["grasp"][i]
                         and series["rise"][i] < LIFT_HEIGHT / 2), None)
            if fell is not None:
                out.append(Event(step=step(fell), kind="drop", phase="transport" if dest else "lift", objects=[obj],
                                 detail=f"the {obj} slipped out of the gripper and fell back to the table",
                                 values={"rise_m": round(float(series["rise"][fell]), 4)}))
    return sorted(out, key=lambda e: e.step)
