"""Scripted waypoint planner: solves valid scenes and produces planner-certified demonstrations.

The plan is derived from the success predicate itself, so it works for any scene built with the SDK, not only
the seed families: `inside(a, b)` → pick a, place it in b; `on`/`stacked` → pick, place on; `near` → pick, place
beside; `open_fraction` → grasp the handle and move it along the joint; `lifted` → pick and hold. Conjunctions are
ordered so that supports are finished before what goes on them, and articulated goals come first. Of `|` the
first alternative is planned; negations and `grasped` / `upright` are not planned, so a predicate that needs
them changed is refused with the reason (`refusal`) instead of being run.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from sim import helpers as h
from sim.articulate import articulate
from sim.constants import ACTION_DIM
from sim.env import CodaEnv
from sim.motion import (
    CLOSE,
    Clearance,
    Runner,
    clearance_at,
    closing_yaw,
    finger_top,
    grip_command,
    hand_of,
    matrix_from_quat,
    palm_floor,
    palm_top,
    quat_yaw,
    route,
    yaw_quat,
)
from sim.predicates import Atom
from sim.slots import (
    RELEASE_OPENING,
    SOLO,
    PlanError,
    Share,
    Slot,
    destination,
    grasp_axis,
    line_width,
    slot_plan,
)

PAD_CLEARANCE = 0.018
"""lowest TCP height above an object's bottom when grasping (keeps the pads off the table)"""
PALM_CLEARANCE = 0.048
"""the TCP stays at most this far below an object's top, so the palm (5.5 cm above the TCP) clears it"""
HOVER = 0.05
"""the open pads stop this far above an object's top before descending onto it"""
DROP = 0.012
"""a placed object is released this far above its resting height"""
RELEASE_RADIUS = 0.06
"""around a released object, the fingers rise clear of everything this close (they open along the line)"""
GRASP_GAP = 0.02
"""before grasping, each finger opens this much wider than the object"""
ROUNDISH = 1.3
"""objects whose footprint sides differ by less than this ratio may be grasped across any direction"""
LIFT = 0.12
"""how high `lifted` goals raise the object"""


@dataclass
class Demo:
    """A planner trajectory: observations before each action, the actions, and the outcome."""

    observations: list[dict] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    success: bool = False
    steps: int = 0
    failure: str | None = None
    subgoals: list[str] = field(default_factory=list)

    def action_array(self) -> np.ndarray:
        return np.asarray(self.actions, dtype=np.float32).reshape(-1, ACTION_DIM)


# --- picking --------------------------------------------------------------------------------------


def grasp_yaw(state: h.SceneState, name: str, near: float = 0.0) -> float:
    """Gripper yaw whose closing axis (body y) lies along the object's narrow side."""
    return closing_yaw(grasp_axis(state, name), near)


def grasp_point(state: h.SceneState, name: str) -> np.ndarray:
    """TCP position for grasping: over the centre of mass, pads low enough, palm above the top."""
    centre = h.position(state, name)
    centre[:2] = state.data.xipos[state.obj(name).body][:2]  # over the centre of mass (hammers, mugs)
    bottom, top = h.bottom_z(state, name), h.top_z(state, name)
    centre[2] = max(bottom + PAD_CLEARANCE, top - PALM_CLEARANCE, min(centre[2], top - 0.02))
    return centre


def grasp_plan(state: h.SceneState, name: str, near: float = 0.0) -> tuple[float, float]:
    """(gripper yaw, half opening of the fingers) for grasping `name` at its grasp point.

    The fingers close across the object's narrow side (a roundish object: across any side), open only
    `GRASP_GAP` wider than it; of these, the first whose pads (and an arm's palm, wider than its fingers) come
    down clear of the neighbours (an open drawer, the next fruit), else the least obstructed.
    """
    o = state.obj(name)
    hx, hy = o.half_extent[:2]
    base = grasp_yaw(state, name, near)
    yaws = [base] if max(hx, hy) > ROUNDISH * min(hx, hy) else [base + k * math.pi / 6 for k in (0, 1, -1, 2, -2, 3)]
    r = h.rotation(state, name)[:2, :2]
    grasp = grasp_point(state, name)
    hand = hand_of(state)
    options = []
    for yaw in yaws:
        across = np.abs(r.T @ [-math.sin(yaw), math.cos(yaw)]) @ [hx, hy]
        opening = min(hand.finger_open, across + GRASP_GAP)
        top = finger_top(state, grasp, yaw, opening, {name})
        if state.compiled.gripper.arm is not None:  # an arm's hand is wider than its fingers: its palm counts too
            top = max(top, palm_top(state, grasp, yaw, {name}) - hand.palm_bottom - hand.pad_reach)
        if top <= grasp[2] - hand.pad_reach:
            return yaw, opening
        options.append((top, yaw, opening))
    return min(options)[1:]


def _pick(run: Runner, name: str) -> Iterator[str]:
    st = run.state
    grasp = grasp_point(st, name)
    yaw, opening = grasp_plan(st, name, quat_yaw(run.pose()[1]))
    hand = hand_of(st)
    q, spread = yaw_quat(yaw), grip_command(opening, hand)
    yield "approach"
    hover = np.array([grasp[0], grasp[1], max(h.top_z(st, name) + HOVER, grasp[2] + 0.05)])
    run.follow(route(run, hover, Clearance(hand.pad_reach, hand.sweep_radius)), q, spread, tol=None)
    run.move(grasp, q, spread, tol=0.008)
    yield "grasp"
    run.close_on(name)
    yield "lift"
    run.move(grasp + [0.0, 0.0, 0.02], q, CLOSE, tol=None)  # straight up off its support first


# --- placing --------------------------------------------------------------------------------------


def _held_offset(run: Runner, name: str) -> float:
    """Height of the TCP above the held object's bottom."""
    return float(h.gripper_position(run.state)[2] - h.bottom_z(run.state, name))


def _held_xy(run: Runner, name: str, quat: np.ndarray) -> np.ndarray:
    """Horizontal offset from the TCP to the held object's centre once the gripper is turned to `quat`."""
    st = run.state
    grip_r = st.data.xmat[st.compiled.gripper.body].reshape(3, 3)
    local = grip_r.T @ (h.position(st, name) - h.gripper_position(st))
    return (matrix_from_quat(quat) @ local)[:2]


def _release(run: Runner, name: str, slot: Slot) -> Iterator[str]:
    st = run.state
    yaw = closing_yaw(slot.closing_axis, quat_yaw(run.pose()[1]))
    q = yaw_quat(yaw)
    hang = _held_offset(run, name)
    o = st.obj(name)
    hand = hand_of(st)
    radius = max(hand.sweep_radius, math.hypot(*o.half_extent[:2]) + 0.01)
    xy = slot.xy - _held_xy(run, name, q)  # the object's centre, not the TCP, goes to the slot
    place = np.array([xy[0], xy[1], max(slot.floor + hang + DROP, palm_floor(run, xy, q, {name}))])
    yield "transport"
    run.follow(route(run, place, Clearance(hang, radius, frozenset({name}))), q, CLOSE, tol=0.01)
    yield "release"
    clear_of = max(h.finger_gap(st) / 2, line_width(o.half_extent) / 2)
    let_go = grip_command(clear_of + RELEASE_OPENING, hand)  # just clear of the object: spares its neighbours
    run.hold(let_go, 2)
    clear = max(place[2], clearance_at(run, place, Clearance(hand.pad_reach, RELEASE_RADIUS)))
    run.move([place[0], place[1], clear], q, let_go, tol=None)  # out of the receptacle before opening wide


# --- plan from predicate --------------------------------------------------------------------------


def subgoals(env: CodaEnv) -> list[Atom]:
    """The positive atoms of the env's success predicate that need an action, in execution order."""
    return order_subgoals(env.spec.task.success)


def order_subgoals(pred) -> list[Atom]:
    """Positive atoms needing an action; articulated goals first, supports before what goes on them."""
    goal_atoms = _positive_atoms(pred)
    moved = {a.args[0] for a in goal_atoms if a.op in ("on", "inside", "stacked", "near", "lifted")}
    ordered: list[Atom] = [a for a in goal_atoms if a.op == "open_fraction"]
    rest = [a for a in goal_atoms if a.op in ("on", "inside", "stacked", "near")]
    while rest:
        ready = [a for a in rest if a.args[1] not in moved or a.args[1] in {x.args[0] for x in ordered}]
        ready = [a for a in ready if not any(b.args[0] == a.args[1] for b in rest if b is not a)] or rest[:1]
        nxt = ready[0]
        ordered.append(nxt)
        rest.remove(nxt)
    ordered += [a for a in goal_atoms if a.op == "lifted"]
    return ordered


def _planned_terms(pred) -> tuple[list[Atom], list]:
    """(positive atoms, negations) of the part of `pred` the planner plans: `&` in full, of `|` the first term."""
    if pred.op == "and":
        parts = [_planned_terms(t) for t in pred.terms]
        return [a for p, _ in parts for a in p], [n for _, ns in parts for n in ns]
    if pred.op == "or":
        return _planned_terms(pred.terms[0])
    if pred.op == "not":
        return [], [pred]
    return [pred], []


def _positive_atoms(pred) -> list[Atom]:
    return [a for a in _planned_terms(pred)[0] if a.op not in ("grasped", "upright")]


def refusal(env: CodaEnv) -> str | None:
    """Why the planner cannot plan the env's success predicate from the current state (after reset), or None.

    It refuses a predicate with nothing to plan, a placing goal on the table, `inside` into something without a
    cavity, `grasped(x)` without `lifted(x)` (it lets go of what it places), `upright(x)` false at the start
    (it stands nothing up), and a negation false at the start whose objects no goal moves (it plans none)."""
    pred, st = env.spec.task.success, env.state
    atoms, negations = _planned_terms(pred)
    goals = order_subgoals(pred)
    if not goals:
        return (f"nothing to plan in {pred}: the planner plans on, inside, stacked, near, lifted and open_fraction "
                "goals (not negations, grasped or upright)")
    for a in goals:
        if len(a.args) == 2 and a.args[1] == h.TABLE:
            return (f"{a} has no planner solution: the planner has no destination on the table; use "
                    f"near({a.args[0]}, OBJECT) for a spot beside an object")
        if a.op == "inside" and h.interior_box(st, a.args[1]) is None:
            return f"{a} has no planner solution: {a.args[1]} has no cavity to put anything in"
    lifted = {a.args[0] for a in goals if a.op == "lifted"}
    for a in atoms:
        if a.op == "grasped" and a.args[0] not in lifted:
            return (f"{a} is planned only with lifted({a.args[0]}): the planner lets go of what it places; "
                    f"use ~{a} or add lifted({a.args[0]})")
        if a.op == "upright" and not a.evaluate(st):
            return f"{a} is false at the start and the planner does not stand objects up"
    moved = {a.args[0] for a in goals}
    for n in negations:
        if not n.evaluate(st) and not n.term.objects() & moved:
            return (f"{n} is false at the start and the planner plans no negation: no goal moves "
                    f"{', '.join(sorted(n.term.objects() - {h.TABLE}))}")
    return None


def _place(run: Runner, atom: Atom, shares: dict[str, Share]) -> Iterator[str]:
    name = atom.args[0]
    if not h.is_grasped(run.state, name):
        yield from _pick(run, name)
    yield from _release(run, name, destination(run.state, atom, shares.get(name, SOLO)))


def _lift(run: Runner, name: str) -> Iterator[str]:
    yield from _pick(run, name)
    up = run.pose()[0] + [0.0, 0.0, LIFT]
    run.move(up, run.pose()[1], CLOSE, tol=0.03)
    run.hold(CLOSE, 2)


def _steps_for(run: Runner, atom: Atom, shares: dict[str, Share]) -> Iterator[str]:
    if atom.op == "open_fraction":
        frac = min(max((atom.param("min") + atom.param("max")) / 2, 0.0), 1.0)
        return articulate(run, atom.args[0], frac)
    if atom.op == "lifted":
        return _lift(run, atom.args[0])
    return _place(run, atom, shares)


def _nearest_first(env: CodaEnv, goals: list[Atom], i: int) -> None:
    """Among interchangeable goals from i on (same relation, same destination), do the object nearest the gripper
    first — a rule a policy can read off its observation, so demonstrations stay consistent."""
    same = [k for k in range(i, len(goals)) if goals[k].op == goals[i].op and len(goals[k].args) == 2
            and goals[i].op in ("on", "inside", "near") and goals[k].args[1] == goals[i].args[1]]
    if len(same) < 2:
        return
    grip = h.gripper_position(env.state)
    best = min(same, key=lambda k: float(np.linalg.norm(h.position(env.state, goals[k].args[0]) - grip)))
    goals[i], goals[best] = goals[best], goals[i]


def run_planner(env: CodaEnv, seed: int | None = None) -> Demo:
    """Reset the env and execute the scripted plan; returns the demonstration. A predicate the planner cannot
    plan (`refusal`) is not run: the demonstration has no steps and says why."""
    obs = env.reset(seed=seed)
    demo = Demo()
    reason = refusal(env)
    if reason is not None:
        demo.failure = f"not planned: {reason}"
        return demo
    return execute_plan(env, demo, obs, subgoals(env))


def execute_plan(env: CodaEnv, demo: Demo, obs: dict, goals: list[Atom], start: int = 0) -> Demo:
    """Execute `goals` in order from the env's current state (observation `obs`), recording into `demo`; its
    `steps` count from control step `start`. The loop of `run_planner` and of a takeover from a restored state."""
    run = Runner(env, demo, obs)
    try:
        shares = slot_plan(env.state, goals)
        for i in range(len(goals)):
            if run.done:
                break
            _nearest_first(env, goals, i)
            atom = goals[i]
            demo.subgoals.append(str(atom))
            for _ in _steps_for(run, atom, shares):
                if run.done:
                    break
    except PlanError as exc:
        demo.failure = str(exc)
    demo.success = env.success()
    demo.steps = env.steps - start
    if not demo.success and demo.failure is None:
        demo.failure = "plan finished without satisfying the predicate"
    return demo
