"""How far an external episode got, read from the external simulator's own state (numpy only).

An adapter feeds a `PhaseTracker` the raw state its worker returns after every executed action (positions in the
benchmark's own world frame, metres): the TCP (`tcp_pos`), the objects' positions (`obj_pos`, the point the
benchmark itself reports: Meta-World's `_get_pos_objects()`, robosuite's body box centre or handle site), and which
finger touches which object (`touch`: (n_objects, 3): the left finger, the right finger, the whole end effector in
contact with the object's body subtree since the previous state, from MuJoCo's contact list in the worker), plus
the finger opening (1 open, 0 closed) and the benchmark's own success flag. Nothing here uses this project's success predicates.

Each task has a ladder of phases, the first being "none" (the episode reached nothing):

    pick  (pick-place, Lift, Stack, PickPlaceCan): reach -> grasp -> lift -> success
    push  (push):                                  reach -> contact -> moved -> success
    open  (drawer-open, door-open, Door):          reach -> contact -> moved -> success

reach: the TCP within REACH_DIST of the object's point (for drawers and doors, the handle); grasp: both fingers
touch the object (since the same previous state); contact: the end effector (fingers, hand, wrist) touches it; lift:
the object raised LIFT_HEIGHT above its resting height (the lowest it has been in the episode: robosuite drops its
cube from 1 cm at reset); moved: the object's point displaced MOVED_DIST from its start (in the table plane for
push; the handle, which the joint carries, in 3-D for open); success: the benchmark's success. An episode's `phase`
is the furthest rung whose condition held at some state (`reached` lists every rung that held, so a skipped rung
shows).

Besides the rungs, a report gives the closest TCP-object distance and the offset object - TCP there
(`closest_offset`, benchmark frame), the object's final and largest displacement and largest rise, whether the jaw
closed within REACH_DIST of the object, how far the TCP ever got from its start (`max_tcp_travel`) and how low it
went relative to the object's start height (`min_tcp_height_over_obj`). Contacts are MuJoCo's at the end of each
benchmark env step (Meta-World 80 Hz, robosuite 20 Hz): an impact inside one step can move an object with no contact
listed, and `reached` then shows "moved" without "contact".
"""

from __future__ import annotations

import numpy as np

REACH_DIST = 0.05
"""m: an open Sawyer jaw's pads sit 5 cm either side of its TCP (10 cm apart at reset; the Panda's, 4 cm), so within
5 cm of the TCP the object's point lies inside the open jaw's span"""
LIFT_HEIGHT = 0.02
"""m: the object's centre 2 cm above its resting height (the pucks' and cubes' half height): more than resting
jitter, and more than tipping a 2 cm-radius, 2 cm-half-height puck onto its side can raise it"""
MOVED_DIST = 0.02
"""m: the object's point 2 cm from its start (a puck's radius; a drawer pulled 2 cm, a door's handle swung 2 cm):
well above contact jitter, far below any success threshold (5-7 cm to the goal, drawer nearly fully open)"""
CLOSED_OPENING = 0.5
"""finger opening (1 open, 0 closed) under which the jaw counts as closing (`closed_near_object`)"""

SERIES = ("tcp_dist", "rise", "moved", "opening", "grasp", "contact", "goal_dist", "other_contact", "other_moved")
"""what `PhaseTracker.series` records per state: TCP-object distance, the object's rise over its resting height and
displacement from its start (m), the finger opening (1 open, 0 closed), both fingers / anything touching the object,
the object's distance to the goal point (None without one), the first other object the end effector touches (its
index in the state's objects, None), the largest displacement of any other object from its start (m)"""

LADDERS: dict[str, tuple[str, ...]] = {
    "pick": ("none", "reach", "grasp", "lift", "success"),
    "push": ("none", "reach", "contact", "moved", "success"),
    "open": ("none", "reach", "contact", "moved", "success"),
}


def ladder(kind: str) -> tuple[str, ...]:
    if kind not in LADDERS:
        raise ValueError(f"unknown phase ladder {kind!r}; valid: {', '.join(LADDERS)}")
    return LADDERS[kind]


class PhaseTracker:
    """The phases one episode reached. `obj`: index of the task's object in the state's `obj_pos`; `goal`: index of
    the benchmark's goal point there, or None."""

    def __init__(self, kind: str, start: dict, obj: int = 0, goal: int | None = None):
        self.kind, self.phases = kind, ladder(kind)
        self.obj, self.goal = obj, goal
        self.start_pos = np.asarray(start["obj_pos"], dtype=np.float64)[obj].copy()
        self.reached: dict[str, int] = {}
        """rung -> first state index (1-based: the state after the first executed action) at which it held"""
        self.samples = 0
        self.min_dist = float(np.linalg.norm(self.start_pos - np.asarray(start["tcp_pos"], dtype=np.float64)))
        self.closest_offset = self.start_pos - np.asarray(start["tcp_pos"], dtype=np.float64)
        self.max_rise = 0.0
        self.rest_z = float(self.start_pos[2])
        self.max_displacement = 0.0
        self.closed_near = False
        self.tcp_start = np.asarray(start["tcp_pos"], dtype=np.float64).copy()
        self.max_travel = 0.0
        self.min_height = float(self.tcp_start[2] - self.start_pos[2])
        self.final_pos = self.start_pos.copy()
        self.final_goal_dist = self._goal_dist(start)
        self.others_start = np.delete(np.asarray(start["obj_pos"], dtype=np.float64), obj, axis=0)
        self.series: dict[str, list] = {k: [] for k in SERIES}
        """per state (after each executed action): the values `policy.external.evidence` builds a rollout's
        evidence from"""

    def _goal_dist(self, s: dict) -> float | None:
        if self.goal is None:
            return None
        p = np.asarray(s["obj_pos"], dtype=np.float64)
        return float(np.linalg.norm(p[self.obj] - p[self.goal]))

    def update(self, s: dict, opening: float, success: bool) -> None:
        self.samples += 1
        tcp = np.asarray(s["tcp_pos"], dtype=np.float64)
        pos = np.asarray(s["obj_pos"], dtype=np.float64)[self.obj]
        touch = np.asarray(s["touch"], dtype=bool)[self.obj]
        offset = pos - tcp
        self.max_travel = max(self.max_travel, float(np.linalg.norm(tcp - self.tcp_start)))
        self.min_height = min(self.min_height, float(tcp[2] - self.start_pos[2]))
        dist = float(np.linalg.norm(offset))
        if dist < self.min_dist:
            self.min_dist, self.closest_offset = dist, offset
        delta = pos - self.start_pos
        self.rest_z = min(self.rest_z, float(pos[2]))
        rise = float(pos[2]) - self.rest_z
        moved = float(np.linalg.norm(delta[:2] if self.kind == "push" else delta))
        self.max_rise = max(self.max_rise, rise)
        self.max_displacement = max(self.max_displacement, float(np.linalg.norm(delta)))
        self.final_pos = pos.copy()
        self.final_goal_dist = self._goal_dist(s)
        near = dist <= REACH_DIST
        self.closed_near |= bool(near and opening < CLOSED_OPENING)
        allpos = np.asarray(s["obj_pos"], dtype=np.float64)
        alltouch = np.asarray(s["touch"], dtype=bool)
        others = [i for i in range(len(allpos)) if i != self.obj]
        goal_dist = self.final_goal_dist
        for key, value in (("tcp_dist", dist), ("rise", rise), ("moved", moved), ("opening", opening),
                           ("grasp", bool(touch[0] and touch[1])), ("contact", bool(touch.any())),
                           ("goal_dist", goal_dist),
                           ("other_contact", next((i for i in others if alltouch[i].any()), None)),
                           ("other_moved", max((float(np.linalg.norm(allpos[i] - self.others_start[k]))
                                                for k, i in enumerate(others)), default=0.0))):
            self.series[key].append(value)
        held = {"reach": near, "grasp": bool(touch[0] and touch[1]), "contact": bool(touch.any()),
                "lift": rise >= LIFT_HEIGHT, "moved": moved >= MOVED_DIST, "success": bool(success)}
        for rung in self.phases[1:]:
            if held[rung] and rung not in self.reached:
                self.reached[rung] = self.samples

    @property
    def phase(self) -> str:
        return max(self.reached, key=self.phases.index, default="none")

    def report(self) -> dict:
        out = {"phase": self.phase, "reached": [r for r in self.phases if r in self.reached],
               "first_state": {r: self.reached[r] for r in self.phases if r in self.reached},
               "min_tcp_obj_dist": round(self.min_dist, 4),
               "closest_offset": [round(float(v), 4) for v in self.closest_offset],
               "final_obj_displacement": round(float(np.linalg.norm(self.final_pos - self.start_pos)), 4),
               "max_obj_displacement": round(self.max_displacement, 4), "max_obj_rise": round(self.max_rise, 4),
               "closed_near_object": self.closed_near, "max_tcp_travel": round(self.max_travel, 4),
               "min_tcp_height_over_obj": round(self.min_height, 4)}
        if self.final_goal_dist is not None:
            out["final_obj_goal_dist"] = round(self.final_goal_dist, 4)
        return out


def summarize(kind: str, reports: list[dict]) -> dict:
    """Per task: `phases` (episodes by furthest rung, every rung listed), `phases_reached` (episodes in which each
    rung held at some state) and the means of the distances."""
    rungs = ladder(kind)
    n = max(len(reports), 1)
    out = {"phase_ladder": list(rungs), "phases": {r: sum(p["phase"] == r for p in reports) for r in rungs},
           "phases_reached": {r: sum(r in p["reached"] for p in reports) for r in rungs[1:]},
           "mean_min_tcp_obj_dist": round(sum(p["min_tcp_obj_dist"] for p in reports) / n, 4),
           "mean_final_obj_displacement": round(sum(p["final_obj_displacement"] for p in reports) / n, 4),
           "closed_near_object": sum(bool(p["closed_near_object"]) for p in reports),
           "mean_max_tcp_travel": round(sum(p["max_tcp_travel"] for p in reports) / n, 4),
           "mean_min_tcp_height_over_obj": round(sum(p["min_tcp_height_over_obj"] for p in reports) / n, 4)}
    return out
