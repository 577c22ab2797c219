"""Phase and cause templates of the offline Text2potential compiler: subgoals, completions, potentials as code.

`write_program(spec, phase, cause_objects, tool, level)` writes a potential program (see `sim.potential`) for a
scene: one block of subgoals per goal of the success predicate (in `order_subgoals` order); the block of the
diagnosed phase is refined by the cause (`level` 2: e.g. hover clear of the named obstacle before descending),
`level` 1 drops the refinement, `level` 0 is one coarse subgoal per goal. Completions are cumulative: each
stays true through the later subgoals of its goal (they all include "goal done").

`local=True` keeps the potential local to the failing phase: the subgoals end with the diagnosed phase's subgoal
of the failing goal (`goal`, else the goal whose object the cause names, else the first), so Φ measures progress
up to and through that phase (e.g. grasp quality for a grasp failure) and is flat after it, instead of the task's
staged progress. Any Φ keeps the optimal policy (potential-based shaping); locality only decides where the dense
signal is.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim import helpers as h
from sim.env import CodaEnv
from sim.planner import order_subgoals

LIFT = 0.03
NEAR = 0.04
HEADER = '''"""Text2potential program for: {instruction}
Diagnosis: {factor} / {phase}: {cause}
"""
import math

from sim import helpers as h


def clip01(x):
    return min(1.0, max(0.0, float(x)))

'''


PHASE_RANK = {"approach": 0, "grasp": 1, "lift": 2, "transport": 3, "open": 3, "close": 3, "place": 4, "release": 5,
              "other": 6}
"""order of the phases within one goal's block of subgoals (`sim.constants.PHASES`)"""


@dataclass
class Sub:
    text: str
    complete: str
    potential: str
    phase: str = "other"
    """the phase this subgoal belongs to (`PHASE_RANK`)"""


def _atom_expr(op: str, o: str, d: str, params: dict) -> str:
    if op == "inside":
        return f"h.is_inside(s, {o!r}, {d!r})"
    if op == "on":
        return f"h.is_on(s, {o!r}, {d!r})"
    if op == "stacked":
        return f"(h.is_on(s, {o!r}, {d!r}, xy_margin=0.0) and h.is_upright(s, {o!r}, 20.0))"
    return f"h.distance(s, {o!r}, {d!r}) <= {params.get('dist', 0.10)!r}"


def _floor_expr(op: str, d: str) -> str:
    if op == "inside":
        return f"(h.interior_box(s, {d!r})[0][2] - h.interior_box(s, {d!r})[2][2])"
    return f"h.top_z(s, {d!r})" if op in ("on", "stacked") else "0.0"


def move_block(i: int, op: str, o: str, d: str, params: dict, dist0: tuple[float, float, float],
               refine: str | None, others: list[str], level: int, compact: bool = False) -> tuple[list[Sub], list[str]]:
    """Subgoals for moving `o` to `d`; dist0 = (tcp to o, o to d, radius of 'over d'); returns (subgoals, defs)."""
    done, held = f"done_{i}(s)", f"h.is_grasped(s, {o!r})"
    tcp0, xy0, over = max(dist0[0], 0.05), max(dist0[1], 0.05), dist0[2]
    defs = [f"def done_{i}(s):\n    return {_atom_expr(op, o, d, params)} and not h.is_grasped(s, {o!r})\n",
            f"def over_{i}(s):\n    return h.xy_distance(s, {o!r}, {d!r}) < {over:.3f}\n"]
    reach = Sub(f"reach the {o}", f"h.tcp_distance(s, {o!r}) < 0.04 or {held} or {done}",
                f"1.0 - clip01(h.tcp_distance(s, {o!r}) / {tcp0:.3f})", "approach")
    grasp = Sub(f"grasp the {o}", f"{held} or {done}",
                f"0.5 * sum(h.fingers_touching(s, {o!r})) * clip01(1.0 - h.tcp_distance(s, {o!r}) / 0.08)", "grasp")
    lift = Sub(f"lift the {o}", f"({held} and (h.lift_height(s, {o!r}) >= {LIFT} or over_{i}(s))) or {done}",
               f"clip01(h.lift_height(s, {o!r}) / {LIFT}) if {held} else 0.0", "lift")
    carry = Sub(f"carry the {o} over the {d}", f"({held} and over_{i}(s)) or {done}",
                f"(1.0 - clip01(h.xy_distance(s, {o!r}, {d!r}) / {xy0:.3f})) if {held} else 0.0", "transport")
    place = Sub(f"put the {o} {op} the {d}", f"{_atom_expr(op, o, d, params)} or {done}",
                f"1.0 - clip01((h.bottom_z(s, {o!r}) - {_floor_expr(op, d)}) / 0.2)", "place")
    release = Sub(f"let go of the {o}", done, "clip01(h.finger_gap(s) / 0.08)", "release")
    if level == 0:
        return [Sub(f"move the {o} {op} the {d}", done,
                    f"0.5 * (1.0 - clip01(h.tcp_distance(s, {o!r}) / {tcp0:.3f})) + "
                    f"0.5 * (1.0 - clip01(h.xy_distance(s, {o!r}, {d!r}) / {xy0:.3f}))", "release")], defs[:1]
    subs = [reach, grasp, lift, carry, place, release]
    if compact:  # several goals: reach folds into grasp, lift into carry
        grasp.potential = f"0.6 * ({reach.potential}) + 0.2 * sum(h.fingers_touching(s, {o!r}))"
        carry.potential = f"(0.3 * clip01(h.lift_height(s, {o!r}) / {LIFT}) + 0.7 * ({carry.potential})) if {held} else 0.0"
        subs = [grasp, carry, place, release]
    if level >= 2 and refine == "approach":
        avoid = " or ".join(f"{n!r} in h.contact_objects(s, 'gripper')" for n in others) or "False"
        hover = Sub(f"hover above the {o} clear of {', '.join(others) or 'its neighbours'}",
                    f"math.hypot(*(h.gripper_position(s)[:2] - h.position(s, {o!r})[:2])) < 0.02 or {held} or {done}",
                    f"(1.0 - clip01(math.hypot(*(h.gripper_position(s)[:2] - h.position(s, {o!r})[:2])) / "
                    f"{tcp0:.3f})) * (0.5 if ({avoid}) else 1.0)", "approach")
        reach.potential = f"({reach.potential}) * (0.5 if ({avoid}) else 1.0)"
        subs = [hover, *subs]
    elif level >= 2 and refine == "transport" and others:
        top = "[" + ", ".join(f"h.top_z(s, {n!r})" for n in others) + "]"
        clear = Sub(f"raise the {o} above the {', '.join(others)}",
                    f"({held} and h.bottom_z(s, {o!r}) > max({top}) + 0.03) or over_{i}(s) or {done}",
                    f"clip01(h.bottom_z(s, {o!r}) / (max({top}) + 0.03)) if {held} else 0.0", "transport")
        subs = [*subs[:-3], clear, *subs[-3:]]
    elif level >= 2 and refine in ("grasp", "lift"):
        grasp.potential = (f"0.5 * sum(h.fingers_touching(s, {o!r})) * clip01(1.0 - "
                           f"math.hypot(*(h.gripper_position(s)[:2] - h.position(s, {o!r})[:2])) / 0.03)")
    return subs, defs


def hold_block(o: str, height: float, tcp0: float) -> list[Sub]:
    held = f"h.is_grasped(s, {o!r})"
    return [Sub(f"reach the {o}", f"h.tcp_distance(s, {o!r}) < 0.04 or {held}",
                f"1.0 - clip01(h.tcp_distance(s, {o!r}) / {max(tcp0, 0.05):.3f})", "approach"),
            Sub(f"grasp the {o}", held, f"0.5 * sum(h.fingers_touching(s, {o!r}))", "grasp"),
            Sub(f"lift the {o} {height:g} m", f"{held} and h.lift_height(s, {o!r}) >= {height!r}",
                f"clip01(h.lift_height(s, {o!r}) / {height!r}) if {held} else 0.0", "lift")]


def articulate_block(f: str, lo: float, hi: float, start: float, tcp0: float, level: int) -> list[Sub]:
    goal = f"({lo!r} <= h.open_fraction(s, {f!r}) <= {hi!r})"
    target = hi if start > hi else lo
    progress = f"clip01(abs(h.open_fraction(s, {f!r}) - {start:.3f}) / {max(abs(target - start), 0.05):.3f})"
    move = "open" if target > start else "close"
    if level == 0:
        return [Sub(f"{move} the {f}", goal, progress, move)]
    held = f"h.is_grasped(s, {f!r})"
    return [Sub(f"reach the handle of the {f}", f"h.tcp_distance(s, {f!r}) < 0.03 or {held} or {goal}",
                f"1.0 - clip01(h.tcp_distance(s, {f!r}) / {max(tcp0, 0.05):.3f})", "approach"),
            Sub(f"grasp the handle of the {f}", f"{held} or {goal}", f"0.5 * sum(h.fingers_touching(s, {f!r}))", "grasp"),
            Sub(f"{move} the {f} to {lo:g}-{hi:g}", goal, progress, move),
            Sub(f"let go of the {f}", f"{goal} and not {held}", "clip01(h.finger_gap(s) / 0.08)", "release")]


def _over_radius(st, d: str) -> float:
    """How close (horizontally) to the destination's centre counts as 'over it'."""
    box = h.interior_box(st, d)
    half = box[2][:2] if box is not None else st.obj(d).half_extent[:2]
    return max(NEAR, 0.6 * float(min(half)))


def write_program(spec, *, factor: str, phase: str, cause: str, tool: str, level: int = 2,
                  cause_objects: list[str] | None = None, local: bool = False, goal: int | None = None) -> str:
    """A complete potential program for `spec` guided by the diagnosis (see the module docstring); `local` ends
    the subgoals at the diagnosed phase of goal `goal` (0-based, in planner order)."""
    env = CodaEnv(spec)
    env.reset()
    st = env.state
    goals = order_subgoals(spec.task.success)
    subs: list[Sub] = []
    owner: list[int] = []  # goal index of each subgoal
    defs: list[str] = []
    per_goal_level = level if len(goals) <= 2 else min(level, 0)
    for i, a in enumerate(goals, start=1):
        o = a.args[0]
        tcp0 = h.tcp_distance(st, o)
        if a.op == "open_fraction":
            subs += articulate_block(o, a.param("min"), a.param("max"), h.open_fraction(st, o), tcp0, per_goal_level)
        elif a.op == "lifted":
            subs += hold_block(o, a.param("height"), tcp0)
        else:
            d = a.args[1]
            others = [n for n in (cause_objects or []) if n not in (o, d) and n in st.names]
            refine = phase if i == 1 or phase in ("transport", "place", "release") else None
            dist0 = (tcp0, h.xy_distance(st, o, d), _over_radius(st, d))
            block, extra = move_block(i, a.op, o, d, dict(a.params), dist0, refine, others, per_goal_level,
                                      compact=len(goals) > 1)
            subs += block
            defs += extra
        owner += [i - 1] * (len(subs) - len(owner))
    if local:
        if goal is None:
            named = [k for k, a in enumerate(goals) if a.args[0] in (cause_objects or [])]
            goal = named[0] if named else 0
        subs = subs[: local_end(subs, owner, min(max(int(goal), 0), len(goals) - 1), phase)]
    lines = [HEADER.format(instruction=spec.task.instruction, factor=factor, phase=phase, cause=cause.replace('"', "'")),
             *defs, f"SUBGOALS = {[s.text for s in subs]!r}", f"LEARNING_TOOL = {tool!r}", ""]
    for k, sub in enumerate(subs, start=1):
        lines.append(f"def complete_{k}(s):\n    return bool({sub.complete})\n")
        lines.append(f"def potential_{k}(s):\n    return clip01({sub.potential})\n")
    return "\n".join(lines)


def local_end(subs: list[Sub], owner: list[int], goal: int, phase: str) -> int:
    """How many subgoals a local potential keeps: through the last subgoal of `goal` in `phase`, else through the
    first one of `goal` past it (a phase folded into a later subgoal), else the whole block of `goal`."""
    rank = PHASE_RANK.get(phase, PHASE_RANK["other"])
    mine = [k for k, g in enumerate(owner) if g == goal]
    same = [k for k in mine if subs[k].phase == phase]
    if same:
        return same[-1] + 1
    later = [k for k in mine if PHASE_RANK.get(subs[k].phase, 6) >= rank]
    return (later[0] if later else mine[-1]) + 1


def cause_objects(cause: str, names: list[str]) -> list[str]:
    """Scene objects named in a cause sentence, in the order they appear."""
    text = cause.replace(" ", "_").lower()
    found = [(text.find(n.lower()), n) for n in names if n.lower() in text]
    return [n for _, n in sorted(found)]
