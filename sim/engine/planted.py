"""A labelled benchmark of failed rollouts: planted difficulties whose true factor and phase are known.

Each planted kind perturbs a planner-solvable seed scene in one way (`KINDS`), so the perturbation fixes the
label (δ, phase); the scripted planner (or a planner with an execution fault) then runs in the perturbed scene
and only failed rollouts are kept. The critic never sees the label or the kind: only the trace.

| kind | perturbation | label |
|---|---|---|
| heavy | target mass 3-6 kg, beyond what the gripper lifts | attribute / lift |
| oversize | target scaled wider than the open gripper | attribute / grasp |
| stiff_joint | fixture joint damping 5,000-20,000 (train instances: 0.05-2) | attribute / open or close |
| occluder | a cabinet right beside the target, where a finger comes down | spatial / approach |
| transport_block | target and receptacle on either side of a cabinet (low straight carrier) | spatial / transport |
| turned_away | the cabinet turned round, its handle facing away | spatial / approach |
| misread | held-out template, policy does the familiar train task | task / phase of the unmet relation |
| premature_close, lift_drop, transport_drop, approach_offset, place_offset, handle_release | execution fault | execution / that phase |
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import reduce
from operator import and_

import numpy as np
from pydantic import BaseModel, Field

from sim import assets
from sim.engine import perturb as P
from sim.engine.variations import VariationError, is_free, radius, with_attributes
from sim.env import CodaEnv
from sim.evidence.models import Evidence
from sim.evidence.ranges import TrainingRanges
from sim.evidence.timeline import build_evidence
from sim.families import get_family, sample_spec
from sim.motion import straight_pick_place
from sim.predicates import grasped, inside, on, open_fraction, stacked
from sim.scene import SceneSplit
from sim.spec import ObjectAttributes, Placement, SceneSpec, TaskObject
from sim.trace import RecordingEnv, Trace, planner_trace
from sim.verify import verify_spec

RIGID_KINDS = ("heavy", "oversize", "occluder", "transport_block", "misread", "premature_close", "lift_drop",
               "transport_drop", "approach_offset", "place_offset")
ART_KINDS = ("stiff_joint", "turned_away", "misread", "premature_close", "handle_release")
KINDS = tuple(dict.fromkeys(RIGID_KINDS + ART_KINDS))
FACTOR = {"heavy": "attribute", "oversize": "attribute", "stiff_joint": "attribute", "occluder": "spatial",
          "transport_block": "spatial", "turned_away": "spatial", "misread": "task"}
FIXED_PHASE = {"heavy": "lift", "oversize": "grasp", "occluder": "approach", "transport_block": "transport",
               "turned_away": "approach", "premature_close": "grasp", "lift_drop": "lift",
               "transport_drop": "transport", "approach_offset": "approach", "place_offset": "place"}
MISREAD_PHASE = {"pp_near": "place", "pp_upright": "place", "pp_lift": "lift", "st_under": "place",
                 "st_tower": "place", "pr_in3": "place", "pr_on3": "place", "ar_half": "open", "ar_shut": "close"}


@dataclass
class Planted:
    kind: str
    factor: str
    phase: str
    spec: SceneSpec
    """the scene the rollout is judged in"""
    plan_spec: SceneSpec | None = None
    """what the (misreading) policy pursues, when it differs"""
    fault: object = None
    check_spec: SceneSpec | None = None
    """the scene without the difficulty, which the policy must solve (default: the unperturbed seed scene)"""
    controller: str = "planner"
    """'planner' (the scripted planner) or 'straight' (low straight carrying, `sim.motion.straight_pick_place`)"""


@dataclass
class LabelledRollout:
    trace: Trace
    family: str
    seed: int
    kind: str
    factor: str
    phase: str
    info: dict = field(default_factory=dict)


# --- scene edits ------------------------------------------------------------------------------------


def add_object(spec: SceneSpec, asset_id: str, x: float, y: float, role: str = "distractor",
               yaw: float = 0.0) -> tuple[SceneSpec, str]:
    asset = assets.get_asset(asset_id)
    base = asset.category
    name, i = base, 1
    while name in spec.object_names():
        name, i = f"{base}_{i}", i + 1
    task = spec.task.model_copy(update={"objects": (*spec.task.objects, TaskObject(name=name, category=base, role=role))})
    layout = spec.layout.model_copy(update={"placements": (*spec.layout.placements, Placement(object=name, x=x, y=y, yaw=yaw))})
    attrs = spec.attributes.model_copy(update={"objects": (*spec.attributes.objects, ObjectAttributes(object=name, asset=asset_id))})
    return spec.model_copy(update={"task": task, "layout": layout, "attributes": attrs}), name


# --- plants -------------------------------------------------------------------------------------------


def _heavy(spec, rng, o, d):
    return with_attributes(spec, o, mass=round(float(rng.uniform(3.0, 6.0)), 3))


def _oversize(spec, rng, o, d):
    a = spec.attributes.of(o)
    asset = assets.get_asset(a.asset)
    axis = 1 if getattr(asset, "grasp_axis", "y") == "y" else 0
    s = 0.1 / (2 * asset.half_extent[axis])
    if s > 2.3:
        raise VariationError(f"the {o} would need scale {s:.2f} to outgrow the gripper")
    return with_attributes(spec, o, scale=round(s * float(rng.uniform(1.0, 1.08)), 3))


def _stiff(spec, rng, o, d):
    return with_attributes(spec, o, damping=round(float(rng.uniform(5000.0, 20000.0)), 1))


def _fixture(rng, max_height: float) -> str:
    """A small train-side fixture (drawer, door, lid or sliding cabinet) no taller than `max_height`."""
    pool = [a for a in assets.articulated_assets().values()
            if a.split == "train" and 0.12 <= 2 * a.half_extent[2] <= max_height and max(a.half_extent[:2]) <= 0.16]
    return pool[int(rng.integers(len(pool)))].id


def _place(spec, name, x, y, yaw=None):
    upd = {"x": round(float(x), 4), "y": round(float(y), 4), "relation": None, "support": "table"}
    if yaw is not None:
        upd["yaw"] = round(float(yaw), 4)
    places = tuple(p.model_copy(update=upd) if p.object == name else p for p in spec.layout.placements)
    return spec.model_copy(update={"layout": spec.layout.model_copy(update={"placements": places})})


def _conflicts(spec, rects, discs, keep) -> list[str]:
    out = []
    for p in spec.layout.placements:
        if p.object in keep or p.support != "table":
            continue
        r = radius(spec, p.object)
        hit = any(math.hypot(max(abs(p.x - cx) - hx, 0.0), max(abs(p.y - cy) - hy, 0.0)) < r + 0.015
                  for cx, cy, hx, hy in rects)
        hit = hit or any(math.hypot(p.x - cx, p.y - cy) < r + cr + 0.015 for cx, cy, cr in discs)
        if hit:
            out.append(p.object)
    return out


def _make_room(spec, rng, rects, discs, keep):
    """Move every table object (but `keep`) out of the given rectangles and discs, to free table spots."""
    grid = [(x, y) for x in np.arange(0.28, 0.67, 0.03) for y in np.arange(-0.32, 0.33, 0.03)]
    for name in _conflicts(spec, rects, discs, keep):
        r = radius(spec, name)
        for i in rng.permutation(len(grid)):
            x, y = grid[i]
            clear = not _conflicts(_place(spec, name, x, y), rects, discs, keep=set(spec.object_names()) - {name})
            if clear and is_free(spec, x, y, r, ignore=(name,)):
                spec = _place(spec, name, x, y)
                break
        else:
            raise VariationError(f"no room left on the table for the {name}")
    return spec


def _occluder(spec, rng, o, d):
    """A cabinet right beside the target, on the side where a finger has to come down."""
    asset = assets.get_asset(spec.attributes.of(o).asset)
    grasp_y = getattr(asset, "grasp_axis", "y") == "y"
    yaw = -math.pi / 2 if grasp_y else 0.0  # turn the target so its fingers close along world x
    w = asset.half_extent[1 if grasp_y else 0] * spec.attributes.of(o).scale
    fid = _fixture(rng, 0.25)
    hx, hy = assets.get_asset(fid).half_extent[:2]
    x, y = float(rng.uniform(0.40, 0.46)), float(rng.uniform(-0.18, 0.18))
    fx = x + w + float(rng.uniform(0.004, 0.01)) + hx
    spec = _make_room(_place(spec, o, x, y, yaw), rng, [(fx, y, hx, hy)], [(x, y, radius(spec, o))], keep={o})
    return add_object(spec, fid, fx, y, yaw=math.pi)[0]  # its flat back towards the target


def _transport_block(spec, rng, o, d):
    """Target and destination on either side of a cabinet (for the straight, low-carrying controller)."""
    fid = _fixture(rng, 0.22)
    hx, hy = assets.get_asset(fid).half_extent[:2]
    ro, rd = radius(spec, o), radius(spec, d)
    xc, sign = float(rng.uniform(0.42, 0.5)), float(rng.choice([-1.0, 1.0]))
    yo, yd = sign * (hy + 0.08 + ro), -sign * (hy + 0.03 + rd)  # room for the fingers beside the target
    if max(abs(yd), abs(yo)) > 0.38:
        raise VariationError(f"the {d} is too large to sit beside a cabinet")
    clear = _place(_place(spec, o, xc, yo), d, xc, yd)
    clear = _make_room(clear, rng, [(xc, 0.0, hx, hy)], [(xc, yo, ro), (xc, yd, rd)], keep={o, d})
    return add_object(clear, fid, xc, 0.0)[0], clear


def _turn_away(spec, rng, f, d):
    """The cabinet turned round: its handle faces away from the robot."""
    p = spec.layout.placement(f)
    yaw = (p.yaw + math.pi + float(rng.uniform(-0.3, 0.3)) + math.pi) % (2 * math.pi) - math.pi
    return _place(spec, f, p.x + 0.06, p.y, yaw)


SCENE_PLANTS = {"heavy": _heavy, "oversize": _oversize, "stiff_joint": _stiff, "occluder": _occluder,
                "transport_block": _transport_block, "turned_away": _turn_away}
FAULTS = {
    "premature_close": lambda s, r: P.PrematureClose(s, r),
    "lift_drop": lambda s, r: P.EarlyRelease(s, r, "lift"),
    "transport_drop": lambda s, r: P.EarlyRelease(s, r, "transport"),
    "approach_offset": lambda s, r: P.Offset(s, r, "approach"),
    "place_offset": lambda s, r: P.Offset(s, r, "place"),
    "handle_release": lambda s, r: P.HandleRelease(s, r),
}


def misread_predicate(spec: SceneSpec):
    """The familiar train-side task a policy does instead of a held-out one."""
    roles = get_family(spec.family).roles(spec)
    t = spec.task.template
    if t in ("pp_near", "pp_upright", "pp_lift"):
        rel = inside if assets.get_category(spec.task.object(roles["r"]).category).container else on
        return rel(roles["t"], roles["r"]) & ~grasped(roles["t"])
    if t == "st_under":
        return stacked(roles["b"], roles["t"]) & ~grasped(roles["b"])
    if t == "st_tower":
        return stacked(roles["t"], roles["b"]) & ~grasped(roles["t"])
    if t in ("ar_half", "ar_shut"):
        return open_fraction(roles["f"], min=0.9)
    if t in ("pr_in3", "pr_on3"):
        rel = inside if t == "pr_in3" else on
        items = [roles["a"], roles["b"]]
        return reduce(and_, [rel(i, roles["r"]) for i in items] + [~grasped(i) for i in items])
    raise VariationError(f"no misreading defined for template {t!r}")


def plant(kind: str, spec: SceneSpec, rng: np.random.Generator) -> Planted:
    """Apply one planted difficulty to a (planner-solvable) scene."""
    o, d, goal_kind = P.first_goal(spec)
    direction = _direction(spec, o) if goal_kind == "articulate" else None
    factor = FACTOR.get(kind, "execution")
    phase = FIXED_PHASE.get(kind) or direction
    if kind == "misread":
        plan = spec.model_copy(update={"task": spec.task.model_copy(update={"success": misread_predicate(spec)})})
        return Planted(kind, factor, MISREAD_PHASE[spec.task.template], spec, plan_spec=plan)
    if kind == "transport_block":
        if goal_kind != "move" or P.order_subgoals(spec.task.success)[0].op not in ("inside", "on", "stacked"):
            raise VariationError("transport_block needs an inside/on/stacked goal")
        blocked, clear = _transport_block(spec, rng, o, d)
        return Planted(kind, factor, phase, blocked, check_spec=clear, controller="straight")
    if kind in SCENE_PLANTS:
        return Planted(kind, factor, phase, SCENE_PLANTS[kind](spec, rng, o, d))
    return Planted(kind, factor, phase, spec, fault=FAULTS[kind](spec, rng))


def _direction(spec: SceneSpec, f: str) -> str:
    a = P.order_subgoals(spec.task.success)[0]
    start = spec.task.initial_state.get(f, {}).get("open", 0.0)
    return "open" if a.param("min") > start else "close"


def judged(trace: Trace, spec: SceneSpec) -> Trace:
    """The same states judged against `spec`'s predicate (for a policy that pursued another task)."""
    env = CodaEnv(spec)
    env.reset()
    out = Trace(spec=spec, actions=trace.actions, qpos=trace.qpos, qvel=trace.qvel, mocap_pos=trace.mocap_pos,
                success=False, initial_bottom=dict(trace.initial_bottom), meta=dict(trace.meta))
    env.state.initial_bottom = dict(trace.initial_bottom)
    for t in range(trace.steps + 1):
        if spec.task.success.evaluate(out.state_at(t, env)):
            out.success, out.success_step = True, t
            break
    return out


# --- generation -----------------------------------------------------------------------------------------


def _valid(spec: SceneSpec, kind: str) -> bool:
    report = verify_spec(spec)
    tolerated = {"scale_plausible"} if FACTOR.get(kind) == "attribute" else set()
    return all(c.passed or c.name in tolerated for c in report.checks)


def run_policy(spec: SceneSpec, controller: str = "planner", fault=None) -> Trace:
    if controller == "planner":
        return planner_trace(spec, fault)[1]
    env = RecordingEnv(spec, fault)
    atom = P.order_subgoals(spec.task.success)[0]
    straight_pick_place(env, atom.args[0], atom.args[1], atom.op)
    return env.trace()


def kinds_for(spec: SceneSpec) -> tuple[str, ...]:
    return ART_KINDS if P.first_goal(spec)[2] == "articulate" else RIGID_KINDS


def attempt(family: str, seed: int, kind: str) -> LabelledRollout | None:
    """One planted rollout, or None when the kind does not apply, the base scene is not solvable, or the
    planted rollout still succeeds."""
    rng = np.random.default_rng([seed, KINDS.index(kind)])
    split = SceneSplit(tasks="heldout") if kind == "misread" else None
    try:
        base = sample_spec(family, seed, split)
        if kind not in kinds_for(base):
            return None
        planted = plant(kind, base, rng)
    except (VariationError, ValueError):
        return None
    if not run_policy(planted.check_spec or base, planted.controller).success:
        return None
    if planted.spec is not base and not _valid(planted.spec, kind):
        return None
    trace = run_policy(planted.plan_spec or planted.spec, planted.controller, planted.fault)
    if planted.plan_spec is not None:
        trace = judged(trace, planted.spec)
    if trace.success:
        return None
    info = {"fired_step": getattr(planted.fault, "fired_step", None)}
    return LabelledRollout(trace, family, seed, kind, planted.factor, planted.phase, info)


def attempts(seed: int = 0, families=("pick_place", "stack", "articulated", "prep"), start: int = 0
             ) -> Iterator[tuple[int, LabelledRollout | None]]:
    """(try index, planted rollout or None) from try `start` on, kinds in rotation over the families."""
    plan = [(f, k) for f in families for k in (RIGID_KINDS if f != "articulated" else ART_KINDS)]
    tries = start
    while True:
        family, kind = plan[tries % len(plan)]
        s = seed * 100_003 + tries
        tries += 1
        yield tries, attempt(family, s, kind)


def generate(n: int, seed: int = 0, families=("pick_place", "stack", "articulated", "prep"),
             max_tries: int | None = None) -> Iterator[LabelledRollout]:
    """Up to `n` failed labelled rollouts, kinds in rotation over the families (deterministic in `seed`)."""
    limit = max_tries or 8 * n + 40
    yield from page(n, seed, families, 0, limit)[0]


def page(n: int, seed: int, families, start: int, stop: int) -> tuple[list[LabelledRollout], int]:
    """Up to `n` failed labelled rollouts from try `start` up to try `stop` (exclusive), and the try index where
    the page ended (the next page's `start`)."""
    out: list[LabelledRollout] = []
    tries = start
    if n <= 0 or start >= stop:
        return out, tries
    for tries, item in attempts(seed, families, start):
        if item is not None:
            out.append(item)
        if len(out) >= n or tries >= stop:
            break
    return out, tries


# --- as evidence (what the sim server's plant_failures tool returns) -------------------------------------------


class PlantedFailure(BaseModel):
    """One failed rollout with a planted difficulty: its true label and the evidence the critic reads."""

    family: str
    seed: int = Field(description="family-sampler seed of the base scene")
    kind: str = Field(description="the planted difficulty (see sim.engine.planted.KINDS)")
    factor: str = Field(description="true diagnosis factor δ")
    phase: str = Field(description="true phase")
    fired_step: int | None = Field(None, description="control step where an execution fault fired")
    evidence: Evidence


class PlantedPage(BaseModel):
    failures: list[PlantedFailure]
    next_start: int = Field(description="try index to continue from (pass it as `start`)")


def planted_page(n: int, seed: int, families, start: int, stop: int) -> PlantedPage:
    """`page` as evidence: each failed rollout's `build_evidence` with the default training ranges."""
    items, next_start = page(n, seed, families, start, stop)
    failures = [PlantedFailure(family=it.family, seed=it.seed, kind=it.kind, factor=it.factor, phase=it.phase,
                               fired_step=it.info.get("fired_step"),
                               evidence=build_evidence(it.trace, ranges=TrainingRanges.default()))
                for it in items]
    return PlantedPage(failures=failures, next_start=next_start)
