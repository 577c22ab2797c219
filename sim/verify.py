"""The verifier: checks a scene program or spec before any rollout and reports each violated check.

Checks, in order (later checks need earlier ones): `executes` (sandboxed program run), `spec_valid`,
`compiles`, `scale_plausible`, `receptacle_capacity` (every receptacle can hold what the task puts in or on it),
`graspable_target` (what the task moves is graspable in the asset pool), `collision_free` (no interpenetration
at t = 0), `stable` (objects settle during a short passive simulation), `reachable`, `predicate_evaluable`,
`predicate_satisfiable` (some state could make it hold: no contradiction such as `grasped(x) & ~grasped(x)` or
`lifted(x, 0.2) & ~lifted(x, 0.1)`, `sim.satisfy`), `predicate_false_at_start`, and optionally `train_side` (no held-out category, instance, seed layout or task
template: the OOD suites' items, which no environment the data engine trains on may use) and `planner_solvable`.
"""

from __future__ import annotations

import contextvars
import time
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import mujoco
import numpy as np
from pydantic import BaseModel, Field, ValidationError

from sim import assets, helpers
from sim.assets.types import ArticulatedAsset
from sim.constants import WORKSPACE_HIGH, WORKSPACE_LOW
from sim.predicates import Atom, Predicate, atoms
from sim.satisfy import atom_key, contradiction
from sim.slots import line_width, slot_line
from sim.spec import SceneSpec

PENETRATION_TOL = 0.004
"""metres of interpenetration tolerated at t = 0"""
REACH_X, REACH_Y = (WORKSPACE_LOW[0], WORKSPACE_HIGH[0]), (WORKSPACE_LOW[1], WORKSPACE_HIGH[1])
"""where a settled object counts as reachable (m): the box the gripper's targets are clipped to"""
SETTLE_SECONDS = 0.6
MAX_DRIFT = 0.02
"""metres an object may move while settling"""
MAX_TILT_CHANGE = 15.0
"""degrees an object may rotate while settling"""
SCALE_SLACK = (0.6, 1.5)
"""accepted factor around a category's size range"""
JOINT_TRAVEL_SLACK = 2.0
"""largest accepted joint travel of an articulated object, as a factor of its instance's own"""
JOINT_DAMPING_SLACK = 1000.0
"""largest accepted joint damping, as a factor of its instance's own (the engine's stiffer joints: 5-20x)"""
FILL = 1.0
"""largest share of a container's opening the footprints (bounding boxes) of its items may cover; bounding
boxes overstate round items (three fruit in a basket solved by the planner cover 0.9), so this is lenient"""


class CheckResult(BaseModel):
    name: str
    passed: bool
    message: str = ""
    objects: list[str] = Field(default_factory=list)


class VerifyReport(BaseModel):
    passed: bool
    checks: list[CheckResult]
    spec_hash: str | None = None
    spec: dict[str, Any] | None = None
    seconds: float = 0.0

    def violations(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.passed]

    def summary(self) -> str:
        if self.passed:
            return "all checks passed"
        return "; ".join(f"{c.name}: {c.message}" for c in self.violations())


def verify_program(source: str | bytes, seed: int = 0, *, planner: bool = False, pool=None, limits=None,
                   robot: str | None = None, train_side: bool = False) -> VerifyReport:
    """Run a scene program in the sandbox, then verify the spec it builds (for `robot`, when given: the run's
    embodiment instead of the one the program names; `train_side`: see `verify_spec`)."""
    return _verified(*_execute(source, seed, pool, limits), planner=planner, robot=robot, train_side=train_side)


def verify_programs(programs: Sequence[tuple[str | bytes, int]], *, planner: bool = False, pool=None, limits=None,
                    lookahead: int = 2, robot: str | None = None, train_side: bool = False) -> Iterator[VerifyReport]:
    """`verify_program` over a stream of (source, seed), reports in order. A helper thread keeps up to
    `lookahead` programs running in the sandbox ahead of the spec checks here: the sandbox child is another
    process, so its run overlaps with the verification of the previous spec (on a second core)."""
    programs = list(programs)

    def submit(source, seed):  # in the caller's context: its runs count against its share of the pool
        return ahead.submit(contextvars.copy_context().run, _execute, source, seed, pool, limits)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-ahead") as ahead:
        pending = deque(submit(src, seed) for src, seed in programs[:lookahead])
        for nxt in range(lookahead, len(programs) + lookahead):
            result, seconds = pending.popleft().result()
            if nxt < len(programs):
                pending.append(submit(*programs[nxt]))
            yield _verified(result, seconds, planner=planner, robot=robot, train_side=train_side)


def _execute(source: str | bytes, seed: int, pool, limits):
    """The program's run in the sandbox (its result) and how long it took."""
    from sim.sandbox import run_untrusted

    t0 = time.perf_counter()
    kwargs = {"limits": limits} if limits is not None else {}
    result = run_untrusted(
        source, finalizer="sim.scene:finalize_program", inputs={"globals": {"seed": int(seed)}}, pool=pool, **kwargs
    )
    return result, time.perf_counter() - t0


def _verified(result, run_seconds: float, *, planner: bool, robot: str | None = None,
              train_side: bool = False) -> VerifyReport:
    if not result.ok:
        err = result.error
        check = CheckResult(name="executes", passed=False, message=f"{err.kind}: {err.message}")
        return VerifyReport(passed=False, checks=[check], seconds=run_seconds)
    report = verify_spec(result.value, planner=planner, robot=robot, train_side=train_side)
    report.checks.insert(0, CheckResult(name="executes", passed=True))
    report.seconds += run_seconds
    return report


def verify_spec(spec: SceneSpec | dict, *, planner: bool = False, robot: str | None = None,
                train_side: bool = False) -> VerifyReport:
    """Verify a spec (or its JSON dict), for `robot` when given; never raises for a bad scene, reports it
    instead. `train_side`: also refuse held-out items (`heldout_items`), as for an environment to train on."""
    t0 = time.perf_counter()
    checks: list[CheckResult] = []

    def done(spec_obj=None) -> VerifyReport:
        return VerifyReport(
            passed=all(c.passed for c in checks),
            checks=checks,
            spec_hash=spec_obj.spec_hash() if spec_obj is not None else None,
            spec=spec_obj.model_dump(mode="json") if spec_obj is not None else None,
            seconds=time.perf_counter() - t0,
        )

    try:
        spec = spec if isinstance(spec, SceneSpec) else SceneSpec.model_validate(spec)
        spec = spec if robot is None else spec.with_robot(robot)
    except ValidationError as exc:
        msgs = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg'].removeprefix('Value error, ')}"
                         for e in exc.errors()[:5])
        checks.append(CheckResult(name="spec_valid", passed=False, message=msgs))
        return done()
    checks.append(CheckResult(name="spec_valid", passed=True))
    from sim.env import CodaEnv

    try:
        env = CodaEnv(spec)
    except Exception as exc:  # noqa: BLE001 - any compile failure is reported, not raised
        checks.append(CheckResult(name="compiles", passed=False, message=f"{type(exc).__name__}: {exc}"))
        return done(spec)
    checks.append(CheckResult(name="compiles", passed=True))
    checks.append(_scale(spec))
    checks.append(_capacity(spec))
    checks.append(_graspable(spec))
    checks.append(_collisions(env))
    stable, reachable = _settle(env)
    checks += [stable, reachable]
    checks += _predicate(env)
    if train_side:
        held = heldout_items(spec)
        checks.append(CheckResult(name="train_side", passed=not held, objects=[o for o, _ in held], message="" if not
                                  held else "held out for the OOD suites, never trained on: " + "; ".join(
                                      why for _, why in held) + " (use items of the train side: `coda sim assets`)"))
    if planner and all(c.passed for c in checks):
        from sim.planner import run_planner

        demo = run_planner(CodaEnv(spec))
        if demo.success:
            msg = ""
        elif demo.steps == 0:
            msg = f"the scripted planner cannot plan this scene: {demo.failure.removeprefix('not planned: ')}"
        else:
            msg = f"the scripted planner failed ({demo.failure}) after {demo.steps} steps"
        checks.append(CheckResult(name="planner_solvable", passed=demo.success, message=msg))
    return done(spec)


def heldout_items(spec: SceneSpec) -> list[tuple[str, str]]:
    """(object or "layout" / "task", why) for each item of `spec` on the held-out side of the split: a category
    or instance of the OOD suites, a held-out seed layout, a held-out task template. A task a program words itself
    (no template id) is not judged."""
    from sim.families import get_family

    out = []
    for a in spec.attributes.objects:
        asset = assets.get_asset(a.asset)
        cat = assets.get_category(asset.category)
        if cat.split == "heldout":
            out.append((a.object, f"{a.object}: {cat.name} is a held-out category"))
        elif asset.split == "heldout":
            out.append((a.object, f"{a.object}: {a.asset} is a held-out instance of {cat.name}"))
    slot = spec.layout.seed_layout
    if slot is not None and slot >= assets.N_LAYOUTS - assets.HELDOUT_LAYOUTS:
        last = assets.N_LAYOUTS - assets.HELDOUT_LAYOUTS - 1
        out.append(("layout", f"seed layout {slot} is held out (train layouts: 0–{last})"))
    template = get_family(spec.family).TEMPLATES.get(spec.task.template) if spec.task.template else None
    if template is not None and template.split == "heldout":
        out.append(("task", f"task template {template.id!r} is held out"))
    return out


def _scale(spec: SceneSpec) -> CheckResult:
    bad, msgs = [], []
    for a in spec.attributes.objects:
        asset = assets.get_asset(a.asset)
        cat = assets.get_category(asset.category)
        dims = sorted(2 * np.asarray(asset.half_extent) * a.scale)
        lo, hi = min(cat.dims_low) * SCALE_SLACK[0], max(cat.dims_high) * SCALE_SLACK[1]
        if dims[-1] > hi or dims[0] < lo:
            bad.append(a.object)
            msgs.append(f"{a.object} is {dims[-1]:.2f} m across, implausible for a {cat.name} ({lo:.2f}–{hi:.2f} m)")
        if a.mass is not None and not isinstance(asset, ArticulatedAsset):
            mlo, mhi = cat.mass_range[0] * 0.3, cat.mass_range[1] * 3.0
            if not mlo <= a.mass <= mhi:
                bad.append(a.object)
                msgs.append(f"{a.object} weighs {a.mass:g} kg, implausible for a {cat.name} ({mlo:.2f}–{mhi:.2f} kg)")
        if a.friction is not None and not 0.05 <= a.friction <= 3.0:
            bad.append(a.object)
            msgs.append(f"{a.object} has friction {a.friction:g}; use a value in [0.05, 3]")
        if isinstance(asset, ArticulatedAsset):
            unit = "m" if asset.joint_type == "slide" else "rad"
            own = asset.joint_range[1] - asset.joint_range[0]
            if a.joint_range is not None and a.joint_range[1] - a.joint_range[0] > JOINT_TRAVEL_SLACK * own:
                bad.append(a.object)
                msgs.append(f"{a.object}'s joint travels {a.joint_range[1] - a.joint_range[0]:g} {unit}, implausible "
                            f"for {asset.id} (its own {own:.3g} {unit}; use at most {JOINT_TRAVEL_SLACK * own:.3g})")
            if a.damping is not None and a.damping > JOINT_DAMPING_SLACK * asset.damping:
                bad.append(a.object)
                msgs.append(f"{a.object}'s joint damping {a.damping:g} holds it shut (its own {asset.damping:.3g}; "
                            f"use at most {JOINT_DAMPING_SLACK * asset.damping:.4g})")
    return CheckResult(name="scale_plausible", passed=not bad, message="; ".join(msgs), objects=sorted(set(bad)))


def _required_atoms(pred: Predicate) -> list:
    """The atoms every way of satisfying `pred` needs true: those joined by `&` (not under `|` or `~`)."""
    if pred.op == "and":
        return [a for t in pred.terms for a in _required_atoms(t)]
    return [] if pred.op in ("or", "not") else [pred]


def _capacity(spec: SceneSpec) -> CheckResult:
    """Every receptacle can hold the items the task requires in (`inside`) or on (`on`, `stacked`) it.

    Sizes are bounding boxes at the objects' scale; an item's width is its narrow side (`sim.slots.line_width`),
    and a receptacle's width its slot line (`sim.slots.slot_line`: a round container's diameter, else its long
    side; a drawer's tray across), along which the planner lines items up. A container must let each item in
    (its width at most the container's), hold its items' footprints in `FILL` of its opening, and, when round,
    their widths side by side; a cabinet must be as high inside as its items. A surface must have room for the
    centres of its items side by side (they may overhang). One item may stick out of a bowl or overhang a plate."""
    sizes = {a.object: (assets.get_asset(a.asset), a.scale) for a in spec.attributes.objects}
    wanted: dict[tuple[str, bool], list[str]] = {}
    for atom in _required_atoms(spec.task.success):
        if atom.op in ("inside", "on", "stacked") and atom.args[1] in sizes:
            items = wanted.setdefault((atom.args[1], atom.op == "inside"), [])
            items += [] if atom.args[0] in items else [atom.args[0]]
    problems, bad = [], set()
    for (name, cavity), items in wanted.items():
        problem = _room(name, *sizes[name], [(n, *sizes[n]) for n in items], cavity)
        if problem:
            problems.append(problem)
            bad.update([name, *items])
    return CheckResult(name="receptacle_capacity", passed=not problems, message="; ".join(problems),
                       objects=sorted(bad))


MOVED_ARG = {"on": 0, "inside": 0, "stacked": 0, "grasped": 0, "lifted": 0}
"""atoms whose argument at this position the gripper must pick up and carry"""


def _graspable(spec: SceneSpec) -> CheckResult:
    """Every object the task requires the gripper to pick up (the first argument of `on`, `inside`, `stacked`,
    `grasped`, `lifted` atoms joined by `&`) is of a graspable category in the asset pool (not a receptacle,
    board, furniture or articulated object)."""
    kinds = {a.object: assets.get_category(assets.get_asset(a.asset).category) for a in spec.attributes.objects}
    bad = sorted({atom.args[MOVED_ARG[atom.op]] for atom in _required_atoms(spec.task.success)
                  if atom.op in MOVED_ARG and atom.args[MOVED_ARG[atom.op]] in kinds
                  and not kinds[atom.args[MOVED_ARG[atom.op]]].graspable})
    if not bad:
        return CheckResult(name="graspable_target", passed=True)
    which = ", ".join(f"{n} (a {kinds[n].name})" for n in bad)
    movable = sorted(n for n, c in kinds.items() if c.graspable)
    return CheckResult(name="graspable_target", passed=False, objects=bad,
                       message=f"the task needs the gripper to pick up {which}, which the asset pool marks not "
                               f"graspable; graspable objects of this scene: {', '.join(movable) or 'none'}")


def _room(name: str, asset, scale: float, items: list, cavity: bool) -> str | None:
    """Why receptacle `name` cannot hold `items` [(name, asset, scale)] (in its cavity or on it), or None."""
    if cavity and asset.interior is None:
        return None  # no cavity at all: `inside` never holds, which the planner check reports
    half = np.asarray(asset.interior.half if cavity else asset.half_extent)[:3] * scale
    kind = asset.kind if isinstance(asset, ArticulatedAsset) else None
    round_ = cavity and kind is None and any(part.kind == "cylinder" for part in asset.parts)  # a floor disc
    across = 2 * float(half[1]) if kind == "drawer" else slot_line(half[:2], cavity)[1]
    dims = [np.asarray(a.half_extent) * 2 * s for _, a, s in items]
    widths = [line_width(d / 2) for d in dims]
    names = ", ".join(n for n, _, _ in items)
    fix = f"use a larger {name} or fewer items"
    if cavity:
        for (item, _, _), width, d in zip(items, widths, dims, strict=True):
            if width > across:
                return f"{item} does not fit in {name}: {width:.3f} m wide, {name} is {across:.3f} m across; {fix}"
            if kind in ("door", "sliding") and d[2] > 2 * half[2]:
                return f"{item} does not fit in {name}: {d[2]:.3f} m tall, {name} is {2 * half[2]:.3f} m high inside"
    if len(items) < 2:
        return None
    if round_ or not cavity:
        need = sum(widths) if cavity else sum(widths) - sum(sorted(widths)[-2:]) / 2  # the widest at the ends
        if need > across:
            return (f"{name} cannot hold {names} side by side: they need {need:.3f} m, {name} is {across:.3f} m "
                    f"across; {fix}")
    if cavity:
        opening = np.pi * (half[0] ** 2 + half[1] ** 2) if round_ else 4 * half[0] * half[1]  # cavity: inscribed
        covered = sum(float(d[0] * d[1]) for d in dims)
        if covered > FILL * opening:
            return (f"{name} cannot hold {names}: their footprints cover {covered / opening:.0%} of its opening "
                    f"(at most {FILL:.0%}); {fix}")
    return None


def _collisions(env) -> CheckResult:
    m, d = env.model, env.data
    mujoco.mj_resetData(m, d)
    mujoco.mj_forward(m, d)
    depth, a, b = helpers.max_penetration(env.state)
    if depth > PENETRATION_TOL:
        return CheckResult(
            name="collision_free",
            passed=False,
            message=f"{a} and {b} interpenetrate by {depth * 1000:.0f} mm at the start; move them apart",
            objects=sorted({a, b} - {"table", "gripper"}),
        )
    return CheckResult(name="collision_free", passed=True)


def _settle(env) -> tuple[CheckResult, CheckResult]:
    st = env.state
    m, d = env.model, env.data
    mujoco.mj_resetData(m, d)
    mujoco.mj_forward(m, d)
    start = {n: (helpers.position(st, n), helpers.tilt_deg(st, n)) for n in st.names}
    env.reset()
    idle = np.array([0, 0, 0, 0, 0, 0, -1.0])
    for _ in range(int(round(SETTLE_SECONDS * 10))):
        env.step(idle)
    moved, msgs, unreachable, where = [], [], [], []
    for n in st.names:
        o = st.obj(n)
        if o.articulated:
            drift = abs(helpers.open_fraction(st, n) - _initial_open(env, n))
            if drift > 0.1:
                moved.append(n)
                msgs.append(f"{n} moves by itself ({drift:.0%} of its range); raise its damping")
            continue
        p0, t0 = start[n]
        p1 = helpers.position(st, n)
        shift = float(np.linalg.norm(p1[:2] - p0[:2]))
        tilt = abs(helpers.tilt_deg(st, n) - t0)
        fell = p1[2] < p0[2] - 0.03
        if shift > MAX_DRIFT or tilt > MAX_TILT_CHANGE or fell:
            moved.append(n)
            msgs.append(f"{n} is unstable: it moved {shift * 100:.1f} cm and tipped {tilt:.0f}° while settling")
        if not (REACH_X[0] <= p1[0] <= REACH_X[1] and REACH_Y[0] <= p1[1] <= REACH_Y[1] and p1[2] > -0.05):
            unreachable.append(n)
            where.append(f"{n} at ({p1[0]:.2f}, {p1[1]:.2f}, {p1[2]:.2f})")
    stable = CheckResult(name="stable", passed=not moved, message="; ".join(msgs), objects=moved)
    reach = CheckResult(
        name="reachable",
        passed=not unreachable,
        message="" if not unreachable else (
            f"{', '.join(where)} after settling, outside the gripper workspace x in [{REACH_X[0]:.2f}, "
            f"{REACH_X[1]:.2f}] m, y in [{REACH_Y[0]:.2f}, {REACH_Y[1]:.2f}] m (the robot's base at the origin, x "
            "forward, table top at z = 0)"),
        objects=unreachable,
    )
    return stable, reach


def _initial_open(env, name: str) -> float:
    return float(env.spec.task.initial_state.get(name, {}).get("open", 0.0))


def scene_facts(spec: SceneSpec, pred: Predicate) -> tuple[frozenset, tuple]:
    """What the scene's objects decide about the atoms of `pred` (`sim.satisfy`): `inside(x, y)` never holds
    when y has no cavity (`helpers.is_inside`), and on an articulated y, `on(x, y)` is `inside(x, y)`
    (`helpers.is_on`) — so with no cavity neither it nor `stacked(x, y)` holds."""
    kinds = {a.object: assets.get_asset(a.asset) for a in spec.attributes.objects}
    never, same = set(), []
    for atom in atoms(pred):
        if atom.op not in ("inside", "on", "stacked") or atom.args[1] not in kinds:
            continue
        asset = kinds[atom.args[1]]
        inside = atom_key(Atom(op="inside", args=atom.args))
        articulated = isinstance(asset, ArticulatedAsset)
        if asset.interior is None and (atom.op == "inside" or articulated):
            never.add(atom_key(atom))
        if atom.op == "on" and articulated:
            same.append((atom_key(atom), inside))
    return frozenset(never), tuple(same)


def _satisfiable(spec: SceneSpec) -> CheckResult:
    """The success predicate can hold in some state (`sim.satisfy`: logic, what its atoms measure and what the
    scene's objects allow)."""
    pred = spec.task.success
    never, same = scene_facts(spec, pred)
    why = contradiction(pred, never=never, same=same)
    if why is None:
        return CheckResult(name="predicate_satisfiable", passed=True)
    return CheckResult(name="predicate_satisfiable", passed=False, objects=sorted(pred.objects() - {"table"}),
                       message=f"the success predicate can never hold ({why}); state a goal some state of this "
                       "scene reaches")


def _predicate(env) -> list[CheckResult]:
    env.reset()
    try:
        value = env.success_predicate.evaluate(env.state)
    except Exception as exc:  # noqa: BLE001
        return [CheckResult(name="predicate_evaluable", passed=False, message=f"{type(exc).__name__}: {exc}")]
    out = [CheckResult(name="predicate_evaluable", passed=True), _satisfiable(env.spec)]
    if value:
        out.append(
            CheckResult(
                name="predicate_false_at_start",
                passed=False,
                message=f"the success predicate is already true at the start: {env.success_predicate} — "
                "arrange the scene so the task needs doing",
                objects=sorted(env.success_predicate.objects() - {"table"}),
            )
        )
    else:
        out.append(CheckResult(name="predicate_false_at_start", passed=True))
    return out

