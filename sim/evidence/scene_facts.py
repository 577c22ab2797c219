"""Static facts of a scene for the critic: attributes against training ranges, grasp-side neighbours, task novelty."""

from __future__ import annotations

import math

import numpy as np

from sim import helpers as h
from sim.assets.types import ArticulatedAsset
from sim.evidence.models import Neighbour, ObjectFacts, TaskFacts
from sim.evidence.ranges import TrainingRanges, relation_signature
from sim.helpers import SceneState
from sim.planner import order_subgoals
from sim.spec import SceneSpec

NEIGHBOUR_RADIUS = 0.08
"""neighbours with a free gap below this (metres) are listed"""
GRASP_SIDE_DEG = 40.0
"""a neighbour within this angle of the closing axis lies where a finger comes down"""


def task_facts(spec: SceneSpec, ranges: TrainingRanges) -> TaskFacts:
    pred = spec.task.success
    return TaskFacts(
        family=spec.family,
        instruction=spec.task.instruction,
        template=spec.task.template,
        template_seen=ranges.template_seen(spec.task.template),
        relations=list(relation_signature(pred)),
        relations_seen=ranges.relations_seen(pred),
        goals=[str(a) for a in order_subgoals(pred)],
    )


def object_facts(spec: SceneSpec, state: SceneState, ranges: TrainingRanges, moved: set[str]) -> list[ObjectFacts]:
    """One entry per object; neighbours only for the objects the task moves."""
    out = []
    for obj in spec.task.objects:
        a = spec.attributes.of(obj.name)
        o = state.obj(obj.name)
        asset = o.asset
        facts = ObjectFacts(name=obj.name, category=obj.category, role=obj.role, scale=a.scale,
                            height=round(float(2 * o.half_extent[2]), 4))
        if isinstance(asset, ArticulatedAsset):
            facts.damping = a.damping if a.damping is not None else asset.damping
            facts.damping_range = ranges.damping.get(obj.category)
            facts.out_of_range = ranges.out_of_range(obj.category, scale=a.scale, damping=facts.damping)
            facts.facing_deg = facing_deg(state, obj.name)
        else:
            facts.mass = a.mass if a.mass is not None else asset.mass
            facts.friction = a.friction if a.friction is not None else asset.friction
            facts.mass_range = ranges.mass.get(obj.category)
            facts.friction_range = ranges.friction.get(obj.category)
            facts.grasp_width = round(float(2 * _grasp_half(o)), 4)
            facts.out_of_range = ranges.out_of_range(
                obj.category, mass=facts.mass, friction=facts.friction, scale=a.scale
            )
            if obj.name in moved:
                facts.neighbours = neighbours(state, obj.name)
        out.append(facts)
    return out


def facing_deg(state: SceneState, name: str) -> float:
    """Angle between a fixture's front (its local -x, where the handle is) and the direction to the robot (-x)."""
    front = -state.data.xmat[state.obj(name).body].reshape(3, 3)[:2, 0]
    cos = float(-front[0] / max(float(np.linalg.norm(front)), 1e-9))
    return round(math.degrees(math.acos(max(-1.0, min(1.0, cos)))), 1)


def _grasp_half(o) -> float:
    """Half width across the fingers (the planner closes along the narrow side)."""
    axis = 1 if getattr(o.asset, "grasp_axis", "y") == "y" else 0
    return float(o.half_extent[axis])


def _support(o, direction_local: np.ndarray) -> float:
    """Distance from the centre to the footprint edge along a local horizontal direction (box support)."""
    return float(abs(direction_local[0]) * o.half_extent[0] + abs(direction_local[1]) * o.half_extent[1])


def neighbours(state: SceneState, name: str) -> list[Neighbour]:
    """Objects near `name` at the start, with their free gap and whether they sit on the grasp side."""
    me = state.obj(name)
    p = h.position(state, name)
    r = h.rotation(state, name)
    axis_local = np.array([0.0, 1.0]) if getattr(me.asset, "grasp_axis", "y") == "y" else np.array([1.0, 0.0])
    axis = r[:2, :2] @ axis_local
    out = []
    for other in state.names:
        if other == name:
            continue
        oo = state.obj(other)
        q = state.data.xpos[oo.body] if oo.articulated else h.position(state, other)  # fixtures: base, not handle
        d = q[:2] - p[:2]
        dist = float(np.linalg.norm(d))
        if dist < 1e-6:
            continue
        u = d / dist
        ro = state.data.xmat[oo.body].reshape(3, 3) if oo.articulated else h.rotation(state, other)
        gap = dist - _support(me, r[:2, :2].T @ u) - _support(oo, ro[:2, :2].T @ -u)
        if gap > NEIGHBOUR_RADIUS:
            continue
        cos = abs(float(u @ axis)) / max(float(np.linalg.norm(axis)), 1e-9)
        out.append(Neighbour(
            name=other,
            gap=round(max(gap, 0.0), 4),
            grasp_side=cos >= math.cos(math.radians(GRASP_SIDE_DEG)),
            height=round(float(h.top_z(state, other)), 4),
        ))
    return sorted(out, key=lambda n: n.gap)
