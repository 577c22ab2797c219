"""Variation operators on scene specs, each along ONE scene factor (task, layout or attributes).

Operators take a spec, a numpy generator and the objects they act on (role-bound names), and return a new spec
that differs from the input only in their factor — or raise `VariationError` when the scene offers no way to
apply them (no distractor to move, no room...). `OPERATORS[factor]` lists them by name; `vary` draws variants with
a list of operators tried in order (the data engine's batches), `domain_randomize` redraws every object's attributes
from wide ranges (the domain-randomization baseline). The sim server emits the results as scene programs
(`sim.engine.programs`).
"""

from __future__ import annotations

import inspect
import math

import numpy as np

from sim import assets
from sim.assets.types import ArticulatedAsset
from sim.constants import GRIPPER_HOME
from sim.layout import REGION_HIGH, REGION_LOW
from sim.resample import resample
from sim.spec import SceneSpec

CLEARANCE = 0.015


class VariationError(ValueError):
    """The operator does not apply to this scene; the message says why."""


# --- spec edits ---------------------------------------------------------------------------------------


def with_attributes(spec: SceneSpec, name: str, **updates) -> SceneSpec:
    objs = tuple(a.model_copy(update=updates) if a.object == name else a for a in spec.attributes.objects)
    return spec.model_copy(update={"attributes": spec.attributes.model_copy(update={"objects": objs})})


def with_placement(spec: SceneSpec, name: str, **updates) -> SceneSpec:
    updates.setdefault("relation", None)
    places = tuple(p.model_copy(update=updates) if p.object == name else p for p in spec.layout.placements)
    return spec.model_copy(update={"layout": spec.layout.model_copy(update={"placements": places})})


def tagged(spec: SceneSpec, factor: str, operator: str, **info) -> SceneSpec:
    meta = {**spec.meta, "parent": spec.meta.get("parent", spec.spec_hash()), "varied": factor,
            "operator": operator, **info}
    return spec.model_copy(update={"meta": meta})


# --- geometry -----------------------------------------------------------------------------------------


def radius(spec: SceneSpec, name: str) -> float:
    a = spec.attributes.of(name)
    asset = assets.get_asset(a.asset)
    return math.hypot(*asset.half_extent[:2]) * a.scale


def half_along(spec: SceneSpec, name: str, direction: np.ndarray) -> float:
    """Footprint half size of `name` along a world xy direction (box support)."""
    a = spec.attributes.of(name)
    asset = assets.get_asset(a.asset)
    yaw = spec.layout.placement(name).yaw
    c, s = math.cos(yaw), math.sin(yaw)
    local = np.array([c * direction[0] + s * direction[1], -s * direction[0] + c * direction[1]])
    return float((abs(local[0]) * asset.half_extent[0] + abs(local[1]) * asset.half_extent[1]) * a.scale)


def is_free(spec: SceneSpec, x: float, y: float, r: float, ignore=(), gap: float = CLEARANCE,
            region: bool = True) -> bool:
    """A disc of radius r at (x, y) keeps `gap` from every table object not in `ignore`, inside the region (unless
    `region` is False)."""
    if region and not (REGION_LOW[0] - 0.06 <= x <= REGION_HIGH[0] + 0.08
                       and REGION_LOW[1] - 0.08 <= y <= REGION_HIGH[1] + 0.08):
        return False
    for p in spec.layout.placements:
        if p.object in ignore or p.support != "table":
            continue
        a = spec.attributes.of(p.object)
        asset = assets.get_asset(a.asset)
        if isinstance(asset, ArticulatedAsset):
            hx, hy = asset.half_extent[0] * a.scale, asset.half_extent[1] * a.scale
            dx, dy = max(p.x - hx - 0.12 - x, 0.0, x - p.x - hx), max(p.y - hy - y, 0.0, y - p.y - hy)
            if math.hypot(dx, dy) < r + gap:
                return False
        elif math.hypot(p.x - x, p.y - y) < r + radius(spec, p.object) + gap:
            return False
    return True


def grasp_axis(spec: SceneSpec, name: str) -> np.ndarray:
    asset = assets.get_asset(spec.attributes.of(name).asset)
    yaw = spec.layout.placement(name).yaw
    if getattr(asset, "grasp_axis", "y") == "y":
        return np.array([-math.sin(yaw), math.cos(yaw)])
    return np.array([math.cos(yaw), math.sin(yaw)])


def movable_distractors(spec: SceneSpec, exclude=()) -> list[str]:
    return [o.name for o in spec.task.objects if o.role in ("distractor", "occluder") and o.name not in exclude
            and spec.layout.placement(o.name).support == "table"
            and not isinstance(assets.get_asset(spec.attributes.of(o.name).asset), ArticulatedAsset)]


# --- layout (σ) ---------------------------------------------------------------------------------------


def crowd_grasp_side(spec: SceneSpec, rng, target: str, mover: str | None = None,
                     gap: tuple[float, float] = (0.004, 0.012)) -> SceneSpec:
    """Move a distractor right next to `target`, on the side where a finger comes down."""
    movers = [mover] if mover else movable_distractors(spec, exclude=(target,))
    if not movers:
        raise VariationError(f"no distractor to move next to the {target}")
    p = spec.layout.placement(target)
    axis = grasp_axis(spec, target)
    for m in [movers[i] for i in rng.permutation(len(movers))]:
        for sign in rng.permutation([-1.0, 1.0]):
            u = sign * axis
            g = float(rng.uniform(*gap))
            d = half_along(spec, target, u) + g + half_along(spec, m, -u)
            x, y = p.x + d * u[0], p.y + d * u[1]
            if is_free(spec, x, y, radius(spec, m), ignore=(m, target)):
                out = with_placement(spec, m, x=round(x, 4), y=round(y, 4))
                return tagged(out, "layout", "crowd_grasp_side", target=target, mover=m, gap=round(g, 4))
    raise VariationError(f"no free spot beside the {target} on its grasp side")


def tighten(spec: SceneSpec, rng, target: str, dest: str) -> SceneSpec:
    """Move the destination closer to the target (a tighter clearance around the target)."""
    p, q = spec.layout.placement(target), spec.layout.placement(dest)
    u = np.array([q.x - p.x, q.y - p.y])
    n = float(np.linalg.norm(u))
    if n < 1e-6 or q.support != "table":
        raise VariationError(f"cannot move the {dest} towards the {target}")
    u /= n
    g = float(rng.uniform(0.01, 0.03))
    d = radius(spec, target) + g + radius(spec, dest)
    if d >= n - 0.01:
        raise VariationError(f"the {dest} is already close to the {target}")
    x, y = p.x + d * u[0], p.y + d * u[1]
    if not is_free(spec, x, y, radius(spec, dest), ignore=(dest,), gap=0.005):
        raise VariationError(f"no room for the {dest} next to the {target}")
    return tagged(with_placement(spec, dest, x=round(x, 4), y=round(y, 4)), "layout", "tighten", target=target)


def rotate(spec: SceneSpec, rng, target: str) -> SceneSpec:
    """Turn the target about the vertical (a different grasp direction)."""
    p = spec.layout.placement(target)
    yaw = (p.yaw + float(rng.uniform(0.6, 1.2)) * rng.choice([-1.0, 1.0]) + math.pi) % (2 * math.pi) - math.pi
    return tagged(with_placement(spec, target, yaw=round(yaw, 4)), "layout", "rotate", target=target)


def block_path(spec: SceneSpec, rng, target: str, dest: str, obstacle: str,
               reach=(0.24, 0.28, 0.32, 0.36, 0.40)) -> SceneSpec:
    """Move the destination away from the target and `obstacle` halfway between them (blocks the transport)."""
    p = spec.layout.placement(target)
    rd, ro = radius(spec, dest), radius(spec, obstacle)
    for angle in rng.permutation(24) * (2 * math.pi / 24):
        u = np.array([math.cos(angle), math.sin(angle)])
        for dist in reach:
            dx, dy = p.x + dist * u[0], p.y + dist * u[1]
            lo, hi = radius(spec, target) + ro + CLEARANCE, dist - rd - ro - CLEARANCE
            if hi < lo:
                continue
            ox, oy = p.x + (lo + hi) / 2 * u[0], p.y + (lo + hi) / 2 * u[1]
            ignore = (dest, obstacle)
            if not (is_free(spec, dx, dy, rd, ignore=ignore) and is_free(spec, ox, oy, ro, ignore=ignore)):
                continue
            out = with_placement(spec, dest, x=round(dx, 4), y=round(dy, 4))
            out = with_placement(out, obstacle, x=round(ox, 4), y=round(oy, 4))
            return tagged(out, "layout", "block_path", target=target, obstacle=obstacle)
    raise VariationError(f"no room to put the {obstacle} between the {target} and a moved {dest}")


def nearby(spec: SceneSpec, rng, target: str) -> SceneSpec:
    """The target 1-3 cm away and turned by 0.1-0.35 rad: a near-duplicate of a scene the policy fails in, for
    failures no single factor explains (execution modes), so their difficulty is kept rather than redrawn."""
    p = spec.layout.placement(target)
    if p.support != "table":
        raise VariationError(f"the {target} does not stand on the table")
    r = radius(spec, target)
    fixture = isinstance(assets.get_asset(spec.attributes.of(target).asset), ArticulatedAsset)  # stands off the region
    for _ in range(8):
        angle, dist = float(rng.uniform(0, 2 * math.pi)), float(rng.uniform(0.01, 0.03))
        x, y = p.x + dist * math.cos(angle), p.y + dist * math.sin(angle)
        if is_free(spec, x, y, r, ignore=(target,), gap=0.005, region=not fixture):
            turn = float(rng.uniform(0.1, 0.35)) * rng.choice([-1.0, 1.0])
            yaw = (p.yaw + turn + math.pi) % (2 * math.pi) - math.pi
            out = with_placement(spec, target, x=round(x, 4), y=round(y, 4), yaw=round(yaw, 4))
            return tagged(out, "layout", "nearby", target=target)
    raise VariationError(f"no free spot within 3 cm of the {target}")


START_RANGES = {"dx": (-0.08, 0.08), "dy": (-0.10, 0.10), "dz": (-0.12, 0.04), "tilt": (0.0, 0.2),
                "yaw": (-0.4, 0.4), "opening": (0.4, 1.0)}
"""draws of `other_start` around `GRIPPER_HOME`: TCP offsets (m), the fingers' tilt from straight down about a random
horizontal axis (rad), a turn about the vertical (rad), the finger opening (robosuite's Panda starts 0.06-0.11 m
lower, tilted up to 0.22 rad and half open: inside these ranges)"""


def other_start(spec: SceneSpec, rng, **_) -> SceneSpec:
    """The same scene with the hand starting elsewhere (`START_RANGES` around home): a near-duplicate whose
    planner demonstration approaches from another pose, for failures of the motion itself (execution modes)."""
    r = START_RANGES
    d = [float(rng.uniform(*r[k])) for k in ("dx", "dy", "dz")]
    pos = [round(h + v, 4) for h, v in zip(GRIPPER_HOME, d, strict=True)]
    tilt, axis, yaw = float(rng.uniform(*r["tilt"])), float(rng.uniform(0, 2 * math.pi)), float(rng.uniform(*r["yaw"]))
    # q = turn(yaw about z) * tilt(about the horizontal axis (cos a, sin a, 0))
    tw, tx, ty = math.cos(tilt / 2), math.sin(tilt / 2) * math.cos(axis), math.sin(tilt / 2) * math.sin(axis)
    yw, yz = math.cos(yaw / 2), math.sin(yaw / 2)
    quat = [yw * tw, yw * tx - yz * ty, yw * ty + yz * tx, yz * tw]
    start = {"pos": pos, "quat": [round(c, 6) for c in quat], "opening": round(float(rng.uniform(*r["opening"])), 3)}
    return tagged(spec.with_start(start), "layout", "other_start")


def resample_layout(spec: SceneSpec, rng, **_) -> SceneSpec:
    try:
        return tagged(resample(spec, "layout", rng), "layout", "resample")
    except ValueError as exc:  # LayoutError: this draw does not fit; another may
        raise VariationError(str(exc)) from None


# --- attributes (α) -----------------------------------------------------------------------------------


def _category(spec: SceneSpec, name: str):
    return assets.get_category(spec.task.object(name).category)


def heavier(spec: SceneSpec, rng, target: str, factor: tuple[float, float] = (1.3, 2.5)) -> SceneSpec:
    """Mass above the category's usual range (still plausible for the verifier: at most 3x its maximum)."""
    hi = _category(spec, target).mass_range[1]
    mass = round(hi * float(rng.uniform(*factor)), 4)
    return tagged(with_attributes(spec, target, mass=mass), "attributes", "heavier", target=target)


def slippery(spec: SceneSpec, rng, target: str) -> SceneSpec:
    lo = _category(spec, target).friction_range[0]
    friction = round(max(0.05, lo * float(rng.uniform(0.3, 0.6))), 4)
    return tagged(with_attributes(spec, target, friction=friction), "attributes", "slippery", target=target)


def other_instance(spec: SceneSpec, rng, target: str) -> SceneSpec:
    a = spec.attributes.of(target)
    current = assets.get_asset(a.asset)
    pool = [x for x in assets.assets_in(current.category, split=current.split) if x.id != a.asset]
    r0 = radius(spec, target)
    pool = [x for x in pool if math.hypot(*x.half_extent[:2]) * a.scale <= r0 + 0.005]
    if not pool:
        raise VariationError(f"no other {current.category} instance fits where the {target} stands")
    new = pool[int(rng.integers(len(pool)))]
    return tagged(with_attributes(spec, target, asset=new.id), "attributes", "other_instance", target=target)


def rescale(spec: SceneSpec, rng, target: str, scale: tuple[float, float] = (0.85, 1.2)) -> SceneSpec:
    s = round(float(rng.uniform(*scale)), 3)
    p = spec.layout.placement(target)
    r = radius(spec, target) / spec.attributes.of(target).scale * s
    if s > 1 and not is_free(spec, p.x, p.y, r, ignore=(target,), gap=0.005):
        raise VariationError(f"no room to grow the {target}")
    return tagged(with_attributes(spec, target, scale=s), "attributes", "rescale", target=target)


def stiffer_joint(spec: SceneSpec, rng, target: str, factor: tuple[float, float] = (5.0, 20.0)) -> SceneSpec:
    a = spec.attributes.of(target)
    asset = assets.get_asset(a.asset)
    if not isinstance(asset, ArticulatedAsset):
        raise VariationError(f"the {target} has no joint")
    base = a.damping if a.damping is not None else asset.damping
    damping = round(base * float(rng.uniform(*factor)), 4)
    return tagged(with_attributes(spec, target, damping=damping), "attributes", "stiffer_joint", target=target)


def resample_attributes(spec: SceneSpec, rng, **_) -> SceneSpec:
    try:
        return tagged(resample(spec, "attributes", rng), "attributes", "resample")
    except ValueError as exc:
        raise VariationError(str(exc)) from None


# --- task (τ) -----------------------------------------------------------------------------------------


def resample_task(spec: SceneSpec, rng, **_) -> SceneSpec:
    """Another template of the family over the same objects (or another graspable object as the target)."""
    try:
        return tagged(resample(spec, "task", rng), "task", "resample")
    except ValueError as exc:
        raise VariationError(str(exc)) from None


def fewer_goals(spec: SceneSpec, rng, **_) -> SceneSpec:
    """Keep a random non-empty subset of the objects a multi-object task moves; the rest become distractors."""
    from sim.planner import order_subgoals
    from sim.predicates import grasped

    goals = [a for a in order_subgoals(spec.task.success) if len(a.args) == 2]
    if len(goals) < 2:
        raise VariationError("the task moves a single object; nothing to leave out")
    keep = [goals[i] for i in sorted(rng.choice(len(goals), int(rng.integers(1, len(goals))), replace=False))]
    pred = keep[0]
    for a in keep[1:]:
        pred = pred & a
    for a in keep:
        pred = pred & ~grasped(a.args[0])
    moved = {a.args[0] for a in keep}
    dropped = {a.args[0] for a in goals} - moved
    words = " and ".join(f"the {a.args[0].replace('_', ' ')}" for a in keep)
    rel = {"inside": "in", "on": "on", "stacked": "on", "near": "next to"}[keep[0].op]
    objects = tuple(o.model_copy(update={"role": "distractor"}) if o.name in dropped else o for o in spec.task.objects)
    task = spec.task.model_copy(update={"instruction": f"put only {words} {rel} the {keep[0].args[1].replace('_', ' ')}",
                                        "success": pred, "objects": objects, "template": "custom"})
    return tagged(spec.model_copy(update={"task": task}), "task", "fewer_goals")


PHRASINGS = ("please {}", "{} now", "go ahead and {}", "could you {}", "{}, carefully")


def reword(spec: SceneSpec, rng, **_) -> SceneSpec:
    """The same goal in other words (a new instruction phrasing)."""
    base = spec.task.instruction
    options = [p.format(base) for p in PHRASINGS if p.format(base) != base]
    task = spec.task.model_copy(update={"instruction": options[int(rng.integers(len(options)))]})
    return tagged(spec.model_copy(update={"task": task}), "task", "reword")


# --- counterfactuals: remove a suspected cause (attribution by intervention) ------------------------------


CLEAR = 0.08
"""metres of free table a decluttered scene keeps around the task's objects and the path between them"""


def _segment_gap(spec: SceneSpec, name: str, path: list[tuple[float, float, float]]) -> float:
    """Clearance of `name` from the task's objects and the straight path between them: (x, y, radius) points,
    consecutive ones joined (the carried object sweeps with its own radius)."""
    p = spec.layout.placement(name)
    r = radius(spec, name)
    q = np.array([p.x, p.y])
    best = math.inf
    for i, (x, y, ra) in enumerate(path):
        best = min(best, math.hypot(p.x - x, p.y - y) - ra - r)
        if i + 1 < len(path):
            a, b = np.array([x, y]), np.array(path[i + 1][:2])
            ab = b - a
            t = float(np.clip(np.dot(q - a, ab) / max(float(np.dot(ab, ab)), 1e-9), 0.0, 1.0))
            best = min(best, float(np.linalg.norm(q - (a + t * ab))) - ra - r)
    return best


def declutter(spec: SceneSpec, rng, target: str, dest: str | None = None, clear: float = CLEAR) -> SceneSpec:
    """The same scene with its crowding removed: every movable distractor within `clear` of the target, its
    destination or the straight path between them moves to a free spot at least `clear` away from all of them;
    the task's objects keep their poses (a counterfactual for a layout failure)."""
    p = spec.layout.placement(target)
    path = [(p.x, p.y, radius(spec, target))]
    if dest is not None and spec.layout.placement(dest).support == "table":
        q = spec.layout.placement(dest)
        path.append((q.x, q.y, radius(spec, dest)))
    keep = (target, *([dest] if dest else []))
    crowded = [m for m in movable_distractors(spec, exclude=keep) if _segment_gap(spec, m, path) < clear]
    if not crowded:
        raise VariationError(f"nothing stands within {clear:.2f} m of the {target} or its path")
    out = spec
    for m in crowded:
        r = radius(out, m)
        for _ in range(400):
            x = float(rng.uniform(REGION_LOW[0], REGION_HIGH[0]))
            y = float(rng.uniform(REGION_LOW[1], REGION_HIGH[1]))
            trial = with_placement(out, m, x=round(x, 4), y=round(y, 4))
            if is_free(out, x, y, r, ignore=(m,)) and _segment_gap(trial, m, path) >= clear:
                out = trial
                break
        else:
            raise VariationError(f"no free spot {clear:.2f} m away from the {target} and its path for the {m}")
    return tagged(out, "layout", "declutter", target=target, moved=",".join(crowded))


def nominal(spec: SceneSpec, rng, target: str, dest: str | None = None) -> SceneSpec:
    """The same scene with ordinary objects: every object the task names (not its distractors) gets its instance's
    own mass, friction and joint damping and scale 1 where there is room for it (a counterfactual for an attribute
    failure)."""
    roles = ("distractor", "occluder")
    out, changed = spec, []
    for o in spec.task.objects:
        if o.role in roles:
            continue
        a = out.attributes.of(o.name)
        updates = {k: None for k in ("mass", "friction", "damping") if getattr(a, k) is not None}
        if abs(a.scale - 1.0) > 1e-6:
            pl = out.layout.placement(o.name)
            grown = radius(out, o.name) / a.scale
            if a.scale > 1.0 or pl.support != "table" or is_free(out, pl.x, pl.y, grown, ignore=(o.name,), gap=0.005):
                updates["scale"] = 1.0
        if updates:
            out = with_attributes(out, o.name, **updates)
            changed.append(o.name)
    if not changed:
        raise VariationError(f"the objects of the task ({target}{', ' + dest if dest else ''}) already have their "
                             "own attributes")
    return tagged(out, "attributes", "nominal", target=target, changed=",".join(changed))


def familiar_task(spec: SceneSpec, rng, **_) -> SceneSpec:
    """The same objects under a task template seen in training, when the scene's own task is not one (a
    counterfactual for a task failure: an unfamiliar template, or a custom task whose relations training never
    combined)."""
    from sim.evidence.ranges import TrainingRanges

    ranges = TrainingRanges.default()
    seen = ranges.template_seen(spec.task.template)
    if seen or (seen is None and ranges.relations_seen(spec.task.success)):
        raise VariationError(f"the task (template {spec.task.template}) is one training covers: nothing to undo")
    try:
        return tagged(resample(spec, "task", rng), "task", "familiar_task")
    except ValueError as exc:
        raise VariationError(str(exc)) from None


UNDO = {"task": {"familiar_task": familiar_task}, "layout": {"declutter": declutter},
        "attributes": {"nominal": nominal}}
"""factor -> counterfactual operators, which take a suspected cause away instead of adding one; kept apart from
`OPERATORS` (the data engine's and the uniform baseline's draws) and used by attribution by intervention"""

def familiar(factor: str):
    """The operator that redraws `factor` from the base policy's narrow seed distribution (`resample(...,
    split="seed")`: a seed layout, the category's seed instances, a train template): a counterfactual for a
    failure that comes from an unfamiliar value of the factor."""

    def redraw(spec: SceneSpec, rng, **_) -> SceneSpec:
        try:
            return tagged(resample(spec, factor, rng, split="seed"), factor, "familiar")
        except ValueError as exc:
            raise VariationError(str(exc)) from None

    redraw.__name__ = f"familiar_{factor}"
    return redraw


FAMILIAR = {factor: {"familiar": familiar(factor)} for factor in ("task", "layout", "attributes")}
"""factor -> the seed-distribution redraw, for attribution by intervention (`Preset.intervention = "familiar"`)"""

LOCAL = {"layout": {"nearby": nearby, "other_start": other_start}}
"""factor -> operators that keep a scene's difficulty (near-duplicates), for execution modes
(`Preset.execution_variants`); kept apart from `OPERATORS` like `UNDO`"""


OPERATORS = {
    "task": {"resample": resample_task, "fewer_goals": fewer_goals, "reword": reword},
    "layout": {"crowd_grasp_side": crowd_grasp_side, "tighten": tighten, "rotate": rotate,
               "block_path": block_path, "resample": resample_layout},
    "attributes": {"heavier": heavier, "slippery": slippery, "other_instance": other_instance, "rescale": rescale,
                   "stiffer_joint": stiffer_joint, "resample": resample_attributes},
}
"""factor -> operator name -> function(spec, rng, **role-bound objects)"""


# --- drawing variants ---------------------------------------------------------------------------------


def default_roles(spec: SceneSpec) -> dict[str, str]:
    """target (the first goal's object), dest (its destination), obstacle (a movable distractor)."""
    from sim.planner import order_subgoals

    goals = order_subgoals(spec.task.success)
    roles: dict[str, str] = {}
    if goals:
        roles["target"] = goals[0].args[0]
        if len(goals[0].args) > 1:
            roles["dest"] = goals[0].args[1]
    movers = movable_distractors(spec, exclude=tuple(roles.values()))
    if movers:
        roles["obstacle"] = movers[0]
    return roles


def operator_table(factor: str) -> dict:
    """Every operator of a factor by name: `OPERATORS`, then the counterfactual `UNDO` and `FAMILIAR` and the `LOCAL`
    ones."""
    return {**OPERATORS[factor], **UNDO.get(factor, {}), **FAMILIAR.get(factor, {}), **LOCAL.get(factor, {})}


def role_names() -> list[str]:
    """The roles operators take objects by (their object parameters: required or defaulting to None), sorted."""
    return sorted({p for factor in OPERATORS for fn in operator_table(factor).values()
                   for p, v in inspect.signature(fn).parameters.items()
                   if p not in ("spec", "rng") and v.kind is not inspect.Parameter.VAR_KEYWORD
                   and (v.default is inspect.Parameter.empty or v.default is None)})


def apply_operator(name: str, factor: str, spec: SceneSpec, rng, roles: dict[str, str]) -> SceneSpec:
    """`operator_table(factor)[name]` with the role-bound objects it takes."""
    fn = operator_table(factor)[name]
    params = inspect.signature(fn).parameters
    kwargs = {k: v for k, v in roles.items() if k in params}
    missing = [p for p, v in params.items() if v.default is inspect.Parameter.empty and p not in ("spec", "rng")
               and p not in kwargs and v.kind is not inspect.Parameter.VAR_KEYWORD]
    if missing:
        raise VariationError(f"operator {name} needs {missing}, the scene has no such role")
    return fn(spec, rng, **kwargs)


def vary(spec: SceneSpec, factor: str, n: int, seed: int, operators: tuple[str, ...], roles: dict[str, str],
         max_tries: int = 4, verify: bool = False, log: list[str] | None = None,
         max_verifications: int | None = None) -> list[SceneSpec]:
    """Up to `n` variants of `spec` along `factor`: variant i draws from `default_rng([seed, i])`, trying each
    operator in order up to `max_tries` times (with `verify`, a draw that fails `sim.verify.verify_spec` is drawn
    again, at most `max_verifications` verifications in all: then the variants found so far). Why a draw did not
    apply is appended to `log`."""
    out, budget = [], [max_verifications]
    for i in range(n):
        new = _one(spec, factor, operators, roles, np.random.default_rng([seed, i]), max_tries, verify, log, budget)
        if new is not None:
            out.append(new)
        if budget[0] is not None and budget[0] <= 0:
            if log is not None and i + 1 < n:
                log.append(f"verification budget of {max_verifications} spent after {i + 1} of {n} variants")
            break
    return out


def _one(spec, factor, ops, roles, rng, max_tries, verify, log, budget) -> SceneSpec | None:
    for name in ops:
        for _ in range(max_tries):
            try:
                new = apply_operator(name, factor, spec, rng, roles)
            except VariationError as exc:  # this draw or this scene does not allow it: redraw, then next op
                if log is not None:
                    log.append(f"{name}: {exc}")
                continue
            if not verify:
                return new
            if budget[0] is not None:
                if budget[0] <= 0:
                    return None
                budget[0] -= 1
            if _verified(new):
                return new
    return None


def _verified(spec: SceneSpec) -> bool:
    from sim.verify import verify_spec

    return verify_spec(spec).passed


def scene_objects(spec: SceneSpec) -> list[dict]:
    """Objects as role-binding candidates: name, role, category and the category's tags and kinds."""
    out = []
    for o in spec.task.objects:
        c = assets.get_category(o.category)
        kinds = [k for k, on in (("container", c.container), ("surface", c.surface), ("graspable", c.graspable),
                                 ("articulated", c.articulated)) if on]
        out.append({"name": o.name, "role": o.role, "category": o.category, "tags": [*c.tags, *kinds]})
    return out


# --- domain randomization -------------------------------------------------------------------------------


def domain_randomize(spec: SceneSpec, rng: np.random.Generator, ranges: dict) -> SceneSpec:
    """`spec` with a resampled layout and every object's mass, friction, scale (and joint damping) drawn from
    `ranges` (mass and damping: factors of the category's range and the joint's damping; scale: a factor of the
    instance's; friction: absolute). The result may fail verification (e.g. grown objects touching)."""
    try:
        spec = resample(spec, "layout", rng)
    except ValueError:  # this draw does not fit on the table: keep the family sampler's layout
        pass
    objs = []
    for a in spec.attributes.objects:
        asset = assets.get_asset(a.asset)
        cat = assets.get_category(asset.category)
        upd: dict = {"friction": round(float(rng.uniform(*ranges["friction"])), 4)}
        if isinstance(asset, ArticulatedAsset):
            base = a.damping if a.damping is not None else asset.damping
            upd["damping"] = round(base * float(rng.uniform(*ranges["damping"])), 4)
        else:
            lo, hi = cat.mass_range[0] * ranges["mass"][0], cat.mass_range[1] * ranges["mass"][1]
            upd["mass"] = round(math.exp(rng.uniform(math.log(lo), math.log(hi))), 4)
            upd["scale"] = round(a.scale * float(rng.uniform(*ranges["scale"])), 3)
        objs.append(a.model_copy(update=upd))
    meta = {**spec.meta, "varied": "domain_rand", "operator": "domain_rand"}
    return spec.model_copy(update={"attributes": spec.attributes.model_copy(update={"objects": tuple(objs)}),
                                   "meta": meta})
