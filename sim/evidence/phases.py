"""The phase machine behind rollout evidence: per-step facts, goals, and the `Tracker` that labels phases and
collects contact and grasp events (see `sim.evidence.timeline`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sim import helpers as h
from sim.evidence.models import Event
from sim.helpers import SceneState
from sim.planner import order_subgoals

MOVE_ORDER = ("approach", "grasp", "lift", "transport", "place", "release")
ART_ORDER = ("approach", "grasp", "open", "close", "release")
NEAR_XY = 0.05
"""the gripper is 'at' an object when within this horizontal distance (metres)"""
RISE = 0.015
"""gripper rise above the closing height that starts a lift"""
HOLD_SLACK = 0.025
"""a closed gripper still holds an object while their distance grows by less than this"""
LIFTED = 0.02
MOVED_XY = 0.04
DISPLACED_XY = 0.03
TIPPED_DEG = 30.0
CLOSED_CMD = 0.5
"""gripper commands above this close the fingers on an object (lower values pre-shape or release)"""


@dataclass
class Goal:
    atom: object
    kind: str
    obj: str
    dest: str | None = None
    direction: str = "open"


@dataclass
class Step:
    """Facts of one recorded state."""

    grip: np.ndarray
    closed: bool
    pos: dict[str, np.ndarray]
    top: dict[str, float]
    grasped: dict[str, bool]
    touch: dict[str, bool]
    lift: dict[str, float]
    tilt: dict[str, float]
    open: dict[str, float]
    contacts: dict[str, set[str]]
    atoms: list[bool]


def goals_of(pred, state: SceneState) -> list[Goal]:
    out = []
    for a in order_subgoals(pred):
        if a.op == "open_fraction":
            now = h.open_fraction(state, a.args[0])
            out.append(Goal(a, "articulate", a.args[0], direction="open" if a.param("min") > now else "close"))
        elif a.op == "lifted":
            out.append(Goal(a, "hold", a.args[0]))
        else:
            out.append(Goal(a, "move", a.args[0], a.args[1]))
    return out


def step_facts(state: SceneState, cmd: float, atom_list) -> Step:
    names = state.names
    rigid = [n for n in names if not state.obj(n).articulated]
    return Step(
        grip=h.gripper_position(state),
        closed=cmd > CLOSED_CMD,
        pos={n: h.position(state, n) for n in names},
        top={n: h.top_z(state, n) for n in names},
        grasped={n: _grasped(state, n) for n in names},
        touch={n: any(h.fingers_touching(state, n)) for n in names},
        lift={n: h.lift_height(state, n) for n in rigid},
        tilt={n: h.tilt_deg(state, n) for n in rigid},
        open={n: h.open_fraction(state, n) for n in names if state.obj(n).articulated},
        contacts={n: h.contact_objects(state, n) for n in [*names, h.GRIPPER]},
        atoms=[a.evaluate(state) for a in atom_list],
    )


def _grasped(state: SceneState, name: str) -> bool:
    """Both pads touch the object from its sides (not from above: the TCP is below the object's top)."""
    if not h.is_grasped(state, name):
        return False
    o = state.obj(name)
    if o.articulated:
        return True
    around = h.finger_gap(state) >= float(min(o.half_extent[:2]))  # the pads are apart, not pinching an edge
    return around and float(h.gripper_position(state)[2]) < h.top_z(state, name) + 0.005


def xy_dist(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a[:2] - b[:2]))


@dataclass
class Tracker:
    """Forward phase machine over the goals; collects events."""

    goals: list[Goal]
    first: Step
    supports: dict[str, str]
    gi: int = 0
    phase: str = "approach"
    mem: dict = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    done_objs: set[str] = field(default_factory=set)
    seen: set = field(default_factory=set)

    @property
    def goal(self) -> Goal | None:
        return self.goals[self.gi] if self.gi < len(self.goals) else None

    def event(self, t: int, kind: str, objects, detail: str, phase: str | None = None, **values: float) -> None:
        self.events.append(Event(step=t, kind=kind, phase=phase or self.phase, objects=list(objects),
                                 detail=detail, values={k: round(float(v), 4) for k, v in values.items()}))

    def enter(self, phase: str) -> None:
        self.phase = phase

    def restart(self) -> None:
        self.phase, self.mem = "approach", {}

    def update(self, t: int, f: Step, goal_true: bool) -> tuple[int, str]:
        g = self.goal
        if g is None:
            return self.gi, self.phase
        if g.kind == "articulate":
            self._articulate(t, f, g, goal_true)
        else:
            self._move(t, f, g, goal_true)
        self._spatial(t, f)
        return self.gi, self.phase

    def close(self, t: int, f: Step) -> None:
        """End of the rollout: an object let go of but not at its goal is a release off target."""
        g = self.goal
        if g is not None and g.kind == "move" and self.phase == "release" and not self._held(f, g.obj):
            d = xy_dist(f.pos[g.obj], f.pos[g.dest])
            self.event(t, "released_off_target", [g.obj, g.dest], f"the {g.obj} was let go but {g.atom} is false "
                       f"({cm(d)} from the {g.dest}) when the rollout ended", phase="place", dest_xy_m=d)

    def _finish(self, t: int, g: Goal) -> None:
        self.event(t, "goal_done", [g.obj], f"{g.atom} holds")
        self.done_objs.add(g.obj)
        self.gi += 1
        if self.gi < len(self.goals):
            self.restart()
        else:
            self.phase = "release" if g.kind != "hold" else "lift"

    # --- rigid objects ---------------------------------------------------------------------------
    def _held(self, f: Step, o: str) -> bool:
        if f.grasped[o]:
            return True
        if not f.closed or "hold_dist" not in self.mem:
            return False
        return float(np.linalg.norm(f.grip - f.pos[o])) < self.mem["hold_dist"] + HOLD_SLACK

    def _move(self, t: int, f: Step, g: Goal, goal_true: bool) -> None:
        o, m, ph = g.obj, self.mem, self.phase
        held = self._held(f, o)
        gz = float(f.grip[2])
        if goal_true and (g.kind == "hold" or not held):
            self._finish(t, g)
            return
        near = xy_dist(f.grip, f.pos[o]) < NEAR_XY and gz < f.top[o] + 0.08
        if ph == "approach":
            if f.grasped[o] or (f.closed and near):
                self.enter("grasp")
                m.update(close_z=gz, t_close=t, pick=f.pos[o].copy(), grip0=f.grip.copy(), grasped=False)
                self._note_grasp(t, f, o)
            elif f.touch[o] and not f.closed and t > 0 and "touched" not in m:
                m["touched"] = True
                self.event(t, "premature_contact", [o], f"a finger touched the {o} before the gripper closed")
        elif ph == "grasp":
            self._note_grasp(t, f, o)
            if not f.closed:
                if not m["grasped"]:
                    self.event(t, "grasp_missed", [o], f"the gripper reopened without grasping the {o}")
                self.restart()
            elif gz > m["close_z"] + RISE:
                if m["grasped"]:
                    self.enter("lift")
                elif "missed" not in m:
                    m["missed"] = True
                    rel = gz - f.top[o]
                    self.event(t, "grasp_missed", [o], f"the gripper closed with its centre {cm(abs(rel))} "
                               f"{'above' if rel >= 0 else 'below'} the top of the {o} and rose without it",
                               tcp_above_top_m=rel)
        elif ph == "lift":
            if not held or not f.closed:
                self._lost(t, f, o, "lift", opened=not f.closed)
            elif g.kind == "move" and xy_dist(f.pos[o], m["pick"]) > MOVED_XY and xy_dist(f.grip, m["grip0"]) > MOVED_XY:
                self.enter("transport")
                m["zmax"] = gz
        elif ph == "transport":
            if not held or not f.closed:
                self._lost(t, f, o, "transport", opened=not f.closed)
                return
            m["zmax"] = max(m["zmax"], gz)
            if gz < m["zmax"] - 0.02 or xy_dist(f.pos[o], f.pos[g.dest]) < NEAR_XY:
                self.enter("place")
        elif ph == "place":
            if not f.closed:
                self.enter("release")
                m["t_release"] = t
            elif not held:
                self._lost(t, f, o, "place")
        elif ph == "release" and not held and t - m.get("t_release", t) >= 3:
            d = xy_dist(f.pos[o], f.pos[g.dest]) if g.dest else 0.0
            self.event(t, "released_off_target", [o, g.dest or ""], f"the {o} was let go but {g.atom} is false "
                       f"({cm(d)} from the {g.dest})", phase="place", dest_xy_m=d)
            self.restart()

    def _note_grasp(self, t: int, f: Step, o: str) -> None:
        if f.grasped[o] and not self.mem.get("grasped"):
            self.mem["grasped"] = True
            self.mem["hold_dist"] = float(np.linalg.norm(f.grip - f.pos[o]))
            if ("first_grasp", o) not in self.seen:
                self.seen.add(("first_grasp", o))
                self.event(t, "first_grasp", [o], f"both fingers on the {o}")

    def _lost(self, t: int, f: Step, o: str, phase: str, opened: bool = False) -> None:
        lift = f.lift.get(o, 0.0)
        g = self.goal
        d = xy_dist(f.pos[o], f.pos[g.dest]) if g.dest else 0.0
        if opened:
            where = f", {cm(d)} from the {g.dest}" if g.dest else ""
            self.event(t, "drop", [o], f"the gripper opened during {phase} and let the {o} fall from "
                       f"{cm(lift)}{where}", lift_m=lift, dest_xy_m=d)
        elif lift < LIFTED and phase == "lift":
            rise = float(f.grip[2]) - self.mem.get("close_z", 0.0)
            self.event(t, "lift_failed", [o], f"the {o} slipped out of the closed gripper while lifting: the gripper "
                       f"rose {cm(rise)} but the {o} only {cm(lift)}", lift_m=lift, gripper_rise_m=rise)
        else:
            where = f", {cm(d)} from the {g.dest}" if g.dest else ""
            self.event(t, "drop", [o], f"the {o} fell from the gripper during {phase} at height {cm(lift)}{where}",
                       lift_m=lift, dest_xy_m=d)
        self.restart()

    # --- articulated objects ---------------------------------------------------------------------
    def _articulate(self, t: int, f: Step, g: Goal, goal_true: bool) -> None:
        fx, m, ph = g.obj, self.mem, self.phase
        grasped = f.grasped[fx]
        near = float(np.linalg.norm(f.grip - f.pos[fx])) < NEAR_XY
        if goal_true and (not f.closed or ph == "release"):
            self._finish(t, g)
            return
        if ph == "approach":
            if grasped or (f.closed and near):
                self.enter("grasp")
                m.update(open0=f.open[fx], t_close=t, grasped=grasped)
            elif f.touch[fx] and not f.closed and t > 0 and "touched" not in m:
                m["touched"] = True
                self.event(t, "premature_contact", [fx], f"a finger hit the {fx} before reaching its handle")
        elif ph == "grasp":
            m["grasped"] = m["grasped"] or grasped
            if grasped and abs(f.open[fx] - m["open0"]) > 0.03:
                self.enter(g.direction)
            elif not f.closed:
                if not m["grasped"]:
                    self.event(t, "grasp_missed", [fx], f"the gripper reopened without holding the {fx} handle")
                self.restart()
            elif t - m["t_close"] >= 4 and not m["grasped"] and "missed" not in m:
                m["missed"] = True
                self.event(t, "grasp_missed", [fx], f"the gripper closed {cm(np.linalg.norm(f.grip - f.pos[fx]))} "
                           f"from the {fx} handle without holding it")
        elif ph in ("open", "close"):
            if not f.closed:
                self.event(t, "released_early", [fx], f"the gripper let go of the {fx} at opening "
                           f"{f.open[fx]:.2f} before {g.atom} held", open=f.open[fx])
                self.enter("release")
            elif not grasped and float(np.linalg.norm(f.grip - f.pos[fx])) > 0.03:
                self.event(t, "handle_lost", [fx], f"the handle of the {fx} slipped out of the fingers at opening "
                           f"{f.open[fx]:.2f}", open=f.open[fx])
                self.restart()

    # --- contacts and disturbed objects ------------------------------------------------------------
    def _spatial(self, t: int, f: Step) -> None:
        g = self.goal
        if g is None:
            return
        allowed = {h.TABLE, g.obj, *self.done_objs} if self.phase in ("place", "release") else {h.TABLE, g.obj}
        if self.phase in ("place", "release") and g.dest:
            allowed.add(g.dest)
        if self.phase in ("grasp", "lift") and g.obj in self.supports:
            allowed.add(self.supports[g.obj])
        held = g.kind != "articulate" and self._held(f, g.obj) and self.phase in ("lift", "transport", "place")
        actors = [h.GRIPPER] + ([g.obj] if held else [])
        for actor in actors:
            for other in sorted(f.contacts[actor] - allowed - {h.GRIPPER, actor, "world"}):
                key = ("collision", actor, other)
                if key not in self.seen:
                    self.seen.add(key)
                    who = "the gripper" if actor == h.GRIPPER else f"the carried {actor}"
                    self.event(t, "collision", [actor, other], f"{who} hit the {other} during {self.phase}")
        for n, p0 in self.first.pos.items():
            if n in (g.obj, g.dest) or n in self.done_objs or n not in f.tilt:
                continue
            shift = xy_dist(f.pos[n], p0)
            tipped = abs(f.tilt[n] - self.first.tilt[n])
            kind = "knocked_over" if tipped > TIPPED_DEG else "displaced" if shift > DISPLACED_XY else None
            if kind and (kind, n) not in self.seen:
                self.seen.add((kind, n))
                self.event(t, kind, [n], f"the {n} was pushed {cm(shift)} and tipped {tipped:.0f} degrees "
                           f"during {self.phase}", shift_m=shift, tilt_deg=tipped)


def cm(metres: float) -> str:
    return f"{float(metres) * 100:.1f} cm"
