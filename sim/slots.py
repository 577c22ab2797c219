"""Where carried objects go: slots in containers, on surfaces and beside objects, and how several objects
share one receptacle (lined up along its longest line, narrow sides facing, a finger's room between them).

Pure geometry over the simulator state; the planner (`sim.planner`) moves objects there, and task families use
`line_width` / `line_room` / `slot_line` to draw only receptacles that have room for their objects.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim import helpers as h
from sim.predicates import Atom
from sim.robot import FINGER_PAD

RELEASE_OPENING = 0.008
"""each finger backs off this far from a placed object when letting go"""
FINGER_ROOM = RELEASE_OPENING + 2 * FINGER_PAD[1] + 0.008
"""room a finger needs beside a placed object to let go of it (with a margin for where the object lands)"""
SQUARE_RATIO = 1.25
"""a receptacle footprint whose sides differ by less than this ratio counts as square (objects line up along
its diagonal)"""


class PlanError(RuntimeError):
    """The predicate has no scripted solution (e.g. `~on(...)` alone)."""


Share = tuple[int, tuple[float, ...]]
"""an object's place among several lined up in one receptacle: (its index, the line widths of all, in order)"""
SOLO: Share = (0, ())


@dataclass(frozen=True)
class Slot:
    """Where a carried object is let go: world xy, the surface it lands on, how the fingers close."""

    xy: np.ndarray
    floor: float
    closing_axis: np.ndarray
    """world xy direction the fingers should close along while placing"""


# --- slots ----------------------------------------------------------------------------------------


def grasp_axis(state: h.SceneState, name: str) -> np.ndarray:
    """World xy direction across the object's narrow side (the fingers close along it)."""
    o = state.obj(name)
    r = h.rotation(state, name)
    return (r[:, 1] if getattr(o.asset, "grasp_axis", "y") == "y" else r[:, 0])[:2]


def slot_line(half_xy, cavity: bool) -> tuple[np.ndarray, float]:
    """(local xy direction, length) of the line several objects are lined up along in a receptacle.

    The long axis; in a square-ish cavity (round bowls and pots have a square cavity inscribed in their wall)
    the diagonal, which is longer. (A round plate's footprint box is not all plate: no diagonal on surfaces.)
    """
    hx, hy = float(half_xy[0]), float(half_xy[1])
    if cavity and max(hx, hy) < SQUARE_RATIO * min(hx, hy):
        return np.array([hx, hy]) / math.hypot(hx, hy), 2 * math.hypot(hx, hy)
    return (np.array([1.0, 0.0]), 2 * hx) if hx >= hy else (np.array([0.0, 1.0]), 2 * hy)


def line_offset(length: float, share: Share) -> float:
    """Centre offset (from the line's middle) of object `share[0]` among objects of widths `share[1]` lined
    up along `length` with equal gaps between them and the ends."""
    k, widths = share
    gap = max(0.0, (length - sum(widths)) / (len(widths) + 1))
    return -length / 2 + gap * (k + 1) + sum(widths[:k]) + widths[k] / 2


def _lined_up(centre, r, half_xy, share: Share, cavity: bool) -> tuple[np.ndarray, np.ndarray]:
    """(world xy, closing axis) of an object's place in a receptacle frame (centre, r, half sizes).

    One object goes in the middle with its long side along the receptacle's; several share the slot line,
    their narrow sides facing each other (the fingers close along the line).
    """
    if len(share[1]) <= 1:
        long_axis = 0 if half_xy[0] >= half_xy[1] else 1
        return centre[:2], r[:2, 1 - long_axis]
    direction, length = slot_line(half_xy, cavity)
    along = r[:2, :2] @ direction
    return centre[:2] + along * line_offset(length, share), along


def slot_in(state: h.SceneState, container: str, share: Share = SOLO) -> Slot:
    """A place in the cavity of `container` (in an open drawer: the part of the tray outside the cabinet)."""
    box = h.interior_box(state, container)
    if box is None:
        raise PlanError(f"{container} has no cavity to put anything in")
    centre, r, half = box
    o = state.obj(container)
    floor = float(centre[2] - half[2])
    if o.articulated and o.asset.kind == "drawer":
        out = min(float(state.data.qpos[o.joint_qpos]), 2 * half[0])  # the tray slides out along its −x
        across = line_offset(2 * half[1], share) if len(share[1]) > 1 else 0.0
        return Slot((centre + r @ [-half[0] + out / 2, across, 0.0])[:2], floor, r[:2, 1])
    xy, closing = _lined_up(centre, r, half[:2], share, cavity=True)
    return Slot(xy, floor, closing)


def slot_on(state: h.SceneState, support: str, share: Share = SOLO) -> Slot:
    """A place on the top surface of `support`."""
    s = state.obj(support)
    centre, r = h.position(state, support), h.rotation(state, support)
    xy, closing = _lined_up(centre, r, s.half_extent[:2], share, cavity=False)
    surface = float(state.data.xpos[s.body][2] + s.asset.top_z * s.scale)
    return Slot(xy, surface, closing)


def destination(state: h.SceneState, atom: Atom, share: Share = SOLO) -> Slot:
    """The release slot of a placing goal (`inside`, `on`, `stacked`, `near`)."""
    name, dest = atom.args
    if atom.op == "near":
        return slot_near(state, name, dest, atom.param("dist"))
    if atom.op == "inside":
        return slot_in(state, dest, share)
    if dest == h.TABLE:
        raise PlanError("placing on the table needs a location; use near(...)")
    s = state.obj(dest)
    if s.articulated or s.asset.interior is not None and not getattr(s.asset, "top_z", 0):
        return slot_in(state, dest, share)
    return slot_on(state, dest, share)


def slot_near(state: h.SceneState, name: str, other: str, dist: float) -> Slot:
    a, b = state.obj(name), state.obj(other)
    ra, rb = math.hypot(*a.half_extent[:2]), math.hypot(*b.half_extent[:2])
    d = min(dist * 0.8, max(ra + rb + 0.01, dist * 0.5))
    pb = h.position(state, other)
    toward = h.position(state, name)[:2] - pb[:2]
    n = np.linalg.norm(toward)
    u = toward / n if n > 1e-6 else np.array([-1.0, 0.0])
    return Slot(pb[:2] + u * d, 0.0, grasp_axis(state, name))


# --- sharing a receptacle -------------------------------------------------------------------------


def line_width(half_extent) -> float:
    """Width an object takes on a slot line: its narrow side (the fingers close along the line)."""
    return 2 * float(min(half_extent[:2]))


def line_room(widths) -> float:
    """Length of slot line that objects of these widths need: a finger's room in every gap and at both ends."""
    return sum(widths) + (len(widths) + 1) * FINGER_ROOM


def slot_plan(state: h.SceneState, goals: list[Atom]) -> dict[str, Share]:
    """How objects placed into one shared receptacle line up in it (see `Share`).

    They take their places in the order of where they start along the slot line, so no carried object
    crosses one already placed.
    """
    by_dest: dict[str, list[Atom]] = {}
    for a in goals:
        if a.op in ("inside", "on", "stacked") and a.args[1] != h.TABLE:
            by_dest.setdefault(a.args[1], []).append(a)
    plan: dict[str, Share] = {}
    for atoms in by_dest.values():
        objs = [a.args[0] for a in atoms]
        if len(objs) > 1:
            first, last = (destination(state, atoms[0], (k, (0.0, 0.0))).xy for k in (0, 1))
            objs.sort(key=lambda n: float(h.position(state, n)[:2] @ (last - first)))
        widths = tuple(line_width(state.obj(n).half_extent) for n in objs)
        plan.update({n: (k, widths) for k, n in enumerate(objs)})
    return plan
