"""Rollout evidence: what the failure critic reads about one rollout, as JSON-serializable pydantic models.

`build_evidence(trace)` (in `sim.evidence.timeline`) fills an `Evidence` from a `sim.trace.Trace`: the phase
timeline, contact and grasp events, distances to the goals over time, the success predicate's atoms over time,
where progress stalled, static scene facts (attributes against their training ranges, neighbours on the grasp
side) and optional keyframes. `Evidence.to_prompt_text()` is the summary an LLM critic reads.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from sim.robot import FINGER_OPEN

EventKind = Literal[
    "first_grasp",
    "premature_contact",
    "grasp_missed",
    "lift_failed",
    "drop",
    "handle_lost",
    "released_early",
    "released_off_target",
    "collision",
    "displaced",
    "knocked_over",
    "goal_done",
]
FAILURE_EVENTS = (
    "premature_contact",
    "grasp_missed",
    "lift_failed",
    "drop",
    "handle_lost",
    "released_early",
    "released_off_target",
)
"""events that end or spoil an attempt at the current goal"""
SPATIAL_EVENTS = ("collision", "displaced", "knocked_over")
GRIPPER_OPENING = 2 * FINGER_OPEN
"""gap between the floating gripper's open fingers (metres): an object wider than this across them cannot be
grasped (`Evidence.gripper_opening` holds the rollout's own robot's)"""


class PhaseSpan(BaseModel):
    phase: str
    start: int
    end: int
    """inclusive"""
    goal: str
    """the goal atom being worked on, e.g. 'inside(apple, bowl)'"""


class Event(BaseModel):
    step: int
    kind: EventKind
    phase: str
    objects: list[str] = Field(default_factory=list)
    detail: str = ""
    values: dict[str, float] = Field(default_factory=dict)


class GoalTrack(BaseModel):
    """Distances to one goal over time (one value per recorded step)."""

    goal: str
    kind: Literal["move", "hold", "articulate"]
    obj: str
    dest: str | None = None
    tcp_distance: list[float] = Field(default_factory=list)
    """gripper to the object (or handle), metres"""
    dest_distance: list[float] = Field(default_factory=list)
    """object to destination, horizontal, metres (moves)"""
    lift: list[float] = Field(default_factory=list)
    """object's bottom above where it started, metres (moves, holds)"""
    open: list[float] = Field(default_factory=list)
    """joint opening fraction (articulated goals)"""


class AtomTrack(BaseModel):
    atom: str
    negated: bool = False
    true_spans: list[tuple[int, int]] = Field(default_factory=list)
    final: bool = False
    """value of the atom itself at the last step (before negation)"""


class Neighbour(BaseModel):
    name: str
    gap: float
    """free gap between footprints at the start, metres"""
    grasp_side: bool
    """lies along the gripper's closing axis (where the fingers come down)"""
    height: float


class ObjectFacts(BaseModel):
    name: str
    category: str
    role: str
    mass: float | None = None
    friction: float | None = None
    scale: float = 1.0
    damping: float | None = None
    grasp_width: float | None = None
    """object width across the fingers' closing axis, metres (rigid objects)"""
    height: float | None = None
    mass_range: tuple[float, float] | None = None
    friction_range: tuple[float, float] | None = None
    damping_range: tuple[float, float] | None = None
    facing_deg: float | None = None
    """fixtures: angle between the handle side and the direction towards the robot (0 = facing it)"""
    out_of_range: list[str] = Field(default_factory=list)
    """attribute facts outside what training covered, as sentences"""
    neighbours: list[Neighbour] = Field(default_factory=list)


class TaskFacts(BaseModel):
    family: str
    instruction: str
    template: str
    template_seen: bool | None
    """None for custom tasks (no template id)"""
    relations: list[str]
    relations_seen: bool
    goals: list[str]


class Keyframe(BaseModel):
    step: int
    label: str
    path: str | None = None
    png: bytes | None = Field(default=None, exclude=True, repr=False)
    """PNG bytes in memory (not serialized; write them with `path`)"""


class Evidence(BaseModel):
    """Everything the critic may read about one rollout."""

    rollout_id: str = ""
    steps: int
    success: bool
    gripper_opening: float = GRIPPER_OPENING
    """gap between the robot's open fingers, metres (9 cm for the floating gripper, 8 cm for the Panda)"""
    success_step: int | None = None
    task: TaskFacts
    timeline: list[PhaseSpan] = Field(default_factory=list)
    phase_reached: str = "approach"
    stalled_step: int = 0
    stalled_phase: str = "approach"
    stalled_goal: str = ""
    events: list[Event] = Field(default_factory=list)
    goals: list[GoalTrack] = Field(default_factory=list)
    atoms: list[AtomTrack] = Field(default_factory=list)
    objects: list[ObjectFacts] = Field(default_factory=list)
    keyframes: list[Keyframe] = Field(default_factory=list)

    def object(self, name: str) -> ObjectFacts:
        for o in self.objects:
            if o.name == name:
                return o
        raise KeyError(f"no object {name!r} in the evidence; objects: {[o.name for o in self.objects]}")

    def events_of(self, *kinds: str) -> list[Event]:
        return [e for e in self.events if e.kind in kinds]

    def first_failure(self) -> Event | None:
        failures = self.events_of(*FAILURE_EVENTS)
        return failures[0] if failures else None

    def to_prompt_text(self) -> str:
        """A compact plain-text summary for an LLM critic (no images)."""
        t = self.task
        seen = {True: "seen in training", False: "NOT seen in training", None: "custom"}[t.template_seen]
        lines = [
            f"Task ({t.family}): {t.instruction!r}; template {t.template} ({seen}); relations "
            f"{', '.join(t.relations)} ({'seen' if t.relations_seen else 'NOT seen'} in training).",
            f"Goals in order: {'; '.join(t.goals) or 'none'}.",
            f"Outcome: {'success at step ' + str(self.success_step) if self.success else 'failure'} after "
            f"{self.steps} steps; furthest phase {self.phase_reached}; progress stalled at step "
            f"{self.stalled_step} in phase {self.stalled_phase} of goal {self.stalled_goal or '-'}.",
            "Phase timeline: " + ", ".join(f"{s.phase} {s.start}-{s.end}" for s in self.timeline) + ".",
            "Events:",
        ]
        lines += [f"  step {e.step} [{e.phase}] {e.kind}: {e.detail}" for e in self.events] or ["  none"]
        lines.append("Predicate atoms (steps where true):")
        for a in self.atoms:
            spans = ", ".join(f"{s}-{e}" for s, e in a.true_spans) or "never"
            lines.append(f"  {'~' if a.negated else ''}{a.atom}: atom true at {spans}; final {a.final}")
        lines.append("Goal distances (start -> min -> end):")
        lines += [f"  {_track_line(g)}" for g in self.goals]
        lines.append("Objects:")
        lines += [f"  {_object_line(o)}" for o in self.objects]
        if self.keyframes:
            lines.append("Keyframes (images attached in this order): " + ", ".join(
                f"step {k.step} ({k.label})" for k in self.keyframes))
        return "\n".join(lines)


def _span(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{values[0]:.3f} -> {min(values):.3f} -> {values[-1]:.3f}"


def _track_line(g: GoalTrack) -> str:
    parts = [f"{g.goal}: tcp-{g.obj} {_span(g.tcp_distance)} m"]
    if g.dest_distance:
        parts.append(f"{g.obj}-{g.dest} xy {_span(g.dest_distance)} m")
    if g.lift:
        parts.append(f"lift max {max(g.lift):.3f} m")
    if g.open:
        parts.append(f"open {g.open[0]:.2f} -> max {max(g.open):.2f} -> {g.open[-1]:.2f}")
    return "; ".join(parts)


def _object_line(o: ObjectFacts) -> str:
    attrs = [f"{o.name} ({o.category}, {o.role})"]
    if o.mass is not None:
        attrs.append(f"mass {o.mass:.3g} kg" + (f" [train {o.mass_range[0]:g}-{o.mass_range[1]:g}]" if o.mass_range else ""))
    if o.friction is not None:
        attrs.append(f"friction {o.friction:.3g}")
    if o.scale != 1.0:
        attrs.append(f"scale {o.scale:.3g}")
    if o.damping is not None:
        attrs.append(f"damping {o.damping:.3g}" + (f" [train {o.damping_range[0]:g}-{o.damping_range[1]:g}]" if o.damping_range else ""))
    if o.facing_deg is not None and o.facing_deg > 45:
        attrs.append(f"handle side turned {o.facing_deg:.0f} degrees away from the robot")
    if o.grasp_width is not None:
        attrs.append(f"grasp width {o.grasp_width * 100:.1f} cm")
    close = [n for n in o.neighbours if n.gap < 0.05]
    if close:
        attrs.append("close neighbours: " + ", ".join(
            f"{n.name} {n.gap * 100:.1f} cm{' on the grasp side' if n.grasp_side else ''}" for n in close))
    if o.out_of_range:
        attrs.append("OUT OF TRAINING RANGE: " + "; ".join(o.out_of_range))
    return ", ".join(attrs)
