"""The scene-program API: build a `SceneSpec` through `Scene`, `place` and the predicate constructors.

    scene = Scene(family="pick_place", seed=seed)
    mug = scene.add_object("mug", role="target")
    bowl = scene.add_object("bowl", role="receptacle")
    scene.set_task("put the mug in the bowl", success=inside(mug, bowl) & ~grasped(mug))
    scene.set_layout(place(mug, on="table", xy=(0.45, -0.10)), place(bowl, on="table", near=mug, gap=0.12))
    scene.set_attributes(mug, mass=0.25, friction=0.8, rgba="red")

All randomness comes from the seed, so the same program and seed give the same spec: `scene.rng` is
`numpy.random.default_rng(seed)`, and an object added by category draws its instance from a generator of its own,
seeded by the seed and by what the program builds (see `Scene.add_object`), so the k-th object of two programs
does not get the same instance.

This is the trusted builder. Untrusted scene programs get `sim.program` instead (plain objects, no pydantic, numpy
or dataclass values), whose `Scene` delegates to this one; `finalize_program` validates either.
"""

from __future__ import annotations

import hashlib
import json
import keyword
import math
import sys
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import ValidationError

from sim import assets, layout
from sim.constants import DEFAULT_ROBOT, MAX_OBJECTS, ROBOTS, ROLES
from sim.predicates import Predicate
from sim.spec import (
    BOUNDS,
    RESERVED_NAMES,
    AttributeSpec,
    LayoutSpec,
    ObjectAttributes,
    RobotStart,
    SceneSpec,
    TaskObject,
    TaskSpec,
)

SplitName = Literal["train", "heldout", "seed"]
""""seed" is a fixed narrow subset of "train" (sim.assets.SEED_*), the base policy's training distribution"""

SANDBOX_PRELOAD = ("sim.program", "sim.program_helpers", "sim.program_numpy")
"""imported in the sandbox's zygote with the finalizer (children cannot import): the facades programs get for
`sim`, `sim.helpers` and `numpy` (`sim.program.PROGRAM_MODULES`)"""

COLORS: dict[str, tuple[float, float, float, float]] = {
    "red": (0.85, 0.15, 0.12, 1.0),
    "green": (0.18, 0.65, 0.22, 1.0),
    "blue": (0.15, 0.3, 0.85, 1.0),
    "yellow": (0.95, 0.85, 0.15, 1.0),
    "orange": (0.95, 0.55, 0.1, 1.0),
    "purple": (0.55, 0.25, 0.7, 1.0),
    "white": (0.93, 0.93, 0.93, 1.0),
    "black": (0.08, 0.08, 0.08, 1.0),
    "gray": (0.5, 0.5, 0.5, 1.0),
    "brown": (0.5, 0.32, 0.18, 1.0),
    "pink": (0.95, 0.55, 0.7, 1.0),
}


@dataclass(frozen=True)
class SceneSplit:
    """Which side of the train / held-out split each factor draws from."""

    instances: SplitName = "train"
    categories: SplitName = "train"
    layouts: SplitName = "train"
    tasks: SplitName = "train"


@dataclass(frozen=True)
class ObjectHandle:
    """What `Scene.add_object` returns; pass it to predicates, `place` and `set_attributes`."""

    name: str
    category: str
    role: str


@dataclass(frozen=True)
class PlaceRequest:
    """An unresolved placement made by `place`; resolved to world coordinates by `Scene.set_layout`."""

    object: str
    on: str = "table"
    xy: tuple[float, float] | None = None
    near: str | None = None
    gap: float = 0.05
    yaw: float | None = None


def place(obj, on: Any = "table", xy=None, near=None, gap: float = 0.05, yaw: float | None = None) -> PlaceRequest:
    """Request a pose: on 'table' or on/in another object, at world `xy` or `gap` metres beside `near`."""
    numbers = {"gap": gap, "yaw": yaw, **({} if xy is None else {"x": xy[0], "y": xy[1]})}
    for key, value in numbers.items():
        if value is not None and not math.isfinite(float(value)):
            raise SceneError(f"place({_name(obj)}): {key} must be a finite number, got {value!r}")
    low, high, _ = BOUNDS["yaw"]
    if yaw is not None and not low <= float(yaw) <= high:
        raise SceneError(f"place({_name(obj)}): yaw is in radians and must lie in [{low:.3f}, {high:.3f}], got {yaw!r}")
    return PlaceRequest(
        object=_name(obj),
        on=_name(on),
        xy=None if xy is None else (float(xy[0]), float(xy[1])),
        near=None if near is None else _name(near),
        gap=float(gap),
        yaw=None if yaw is None else float(yaw),
    )


def _name(obj: Any) -> str:
    return obj if isinstance(obj, str) else obj.name


class SceneError(ValueError):
    """A scene program asked for something impossible; the message says what to change."""


class Scene:
    """Builder for one scene. Call `spec()` (or let the runner call it) to get the validated `SceneSpec`."""

    def __init__(self, family: str, seed: int = 0, split: SceneSplit | None = None, robot: str = DEFAULT_ROBOT):
        if robot not in ROBOTS:
            raise SceneError(f"unknown robot {robot!r}; valid robots: {', '.join(ROBOTS)}")
        self.family = family
        self.seed = int(seed)
        self.robot = robot
        self.split = split or SceneSplit()
        self.rng = np.random.default_rng(self.seed)
        self._objects: dict[str, TaskObject] = {}
        self._attrs: dict[str, ObjectAttributes] = {}
        self._requests: dict[str, PlaceRequest] = {}
        self._undrawn: set[str] = set()
        """objects added by category whose instance `spec()` draws (`_draw_instances`)"""
        self._seed_layout: int | None = None
        self._task: dict[str, Any] | None = None
        self._start: RobotStart | None = None
        self.meta: dict[str, Any] = {}

    # --- objects -------------------------------------------------------------------------------
    def add_object(self, what: str, role: str = "distractor", name: str | None = None) -> ObjectHandle:
        """Add an object by category ('mug') or instance id ('mug/007'); returns a handle.

        A category's instance is drawn when the spec is built, from a generator seeded by the scene's seed, the
        object's name and what the program builds (family, objects, task): the same program and seed give the
        same instances, other programs and other objects draw independently. `scene.rng` is not used for it."""
        if role not in ROLES:
            raise SceneError(f"unknown role {role!r}; valid roles: {', '.join(ROLES)}")
        if len(self._objects) >= MAX_OBJECTS:
            raise SceneError(f"a scene holds at most {MAX_OBJECTS} objects (the policy observes {MAX_OBJECTS}); "
                             f"remove objects instead of adding {what!r}")
        if "/" in what:
            asset = assets.get_asset(what)
            category = asset.category
        else:
            category = assets.get_category(what).name
            asset = self._pool(category)[0]  # a stand-in until `spec()` draws the instance
        name = name or self._fresh_name(category)
        if name in self._objects:
            raise SceneError(f"an object named {name!r} already exists; pass name=... to add_object")
        if name in RESERVED_NAMES or keyword.iskeyword(name):
            raise SceneError(f"{name!r} is reserved; pass another name=... to add_object")
        self._objects[name] = TaskObject(name=name, category=category, role=role)
        self._attrs[name] = ObjectAttributes(object=name, asset=asset.id)
        if "/" not in what:
            self._undrawn.add(name)
        return ObjectHandle(name=name, category=category, role=role)

    def _pool(self, category: str) -> list:
        return assets.instances_for(category, self.split.instances)

    def _draw_instances(self, task: TaskSpec) -> None:
        """Give each object added by category its instance, from a generator seeded by (seed, a digest of the
        task and the object's name): independent of `scene.rng`, of the other objects' draws and of the
        number of draws before it."""
        content = json.dumps(task.model_dump(mode="json"), sort_keys=True)
        for name in sorted(self._undrawn):
            digest = hashlib.sha256(f"{content}\n{name}".encode()).digest()
            rng = np.random.default_rng([self.seed, *(int.from_bytes(digest[i:i + 4], "little") for i in (0, 4, 8, 12))])
            pool = self._pool(self._objects[name].category)
            self._attrs[name] = self._attrs[name].model_copy(update={"asset": pool[int(rng.integers(len(pool)))].id})

    def _fresh_name(self, category: str) -> str:
        base = category.replace("-", "_")
        if base not in self._objects and base not in RESERVED_NAMES:
            return base
        i = 1
        while f"{base}_{i}" in self._objects:
            i += 1
        return f"{base}_{i}"

    def objects(self) -> list[ObjectHandle]:
        return [ObjectHandle(o.name, o.category, o.role) for o in self._objects.values()]

    # --- factors -------------------------------------------------------------------------------
    def set_task(
        self,
        instruction: str,
        success: Predicate,
        template: str = "custom",
        initial_state: dict[str, dict[str, float]] | None = None,
    ) -> None:
        """τ: the instruction and the machine-checkable success predicate."""
        self._task = {
            "instruction": instruction,
            "success": success,
            "template": template,
            "initial_state": {_name(k): dict(v) for k, v in (initial_state or {}).items()},
        }

    def set_layout(self, *requests: PlaceRequest, seed_layout: int | None = None) -> None:
        """σ: placements; objects left out are put on free table slots (of `seed_layout` when given)."""
        for r in requests:
            if not isinstance(r, PlaceRequest):
                raise SceneError(f"set_layout takes place(...) results, got {type(r).__name__}")
            self._check_known(r.object)
            self._requests[r.object] = r
        if seed_layout is not None:
            n = len(assets.seed_layouts())
            if not 0 <= seed_layout < n:
                raise SceneError(f"seed_layout must be in [0, {n}), got {seed_layout}")
            self._seed_layout = int(seed_layout)

    def set_start(self, pos=None, quat=None, opening: float = 1.0, gripper_rate: float | None = None) -> None:
        """Where the hand starts: TCP position (m; default `GRIPPER_HOME`), orientation (w, x, y, z; default
        fingers straight down, tilt at most `sim.spec.MAX_START_TILT`) and finger opening (1 open, 0 closed); and,
        given `gripper_rate`, the most its fingers' command moves per action (command units, (0, 2]; robosuite's
        Panda gripper 0.4), else the fingers follow at once."""
        values: dict[str, Any] = {"opening": opening}
        if gripper_rate is not None:
            values["gripper_rate"] = gripper_rate
        if pos is not None:
            values["pos"] = pos
        if quat is not None:
            values["quat"] = quat
        try:
            self._start = RobotStart.model_validate(values)
        except ValidationError as exc:
            problems = "; ".join(e["msg"].removeprefix("Value error, ")
                                 for e in exc.errors(include_url=False, include_input=False)[:3])
            raise SceneError(f"set_start: {problems}") from None

    def set_attributes(self, obj, **values: Any) -> None:
        """α: asset, scale, mass, friction, rgba (name or 4 floats), damping, joint_range."""
        name = _name(obj)
        self._check_known(name)
        allowed = {"asset", "scale", "mass", "friction", "rgba", "damping", "joint_range"}
        unknown = set(values) - allowed
        if unknown:
            raise SceneError(f"unknown attribute(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        if isinstance(values.get("rgba"), str):
            color = values["rgba"]
            if color not in COLORS:
                raise SceneError(f"unknown colour {color!r}; named colours: {', '.join(COLORS)}")
            values["rgba"] = COLORS[color]
        if "asset" in values:
            asset = assets.get_asset(values["asset"])
            if asset.category != self._objects[name].category:
                raise SceneError(
                    f"asset {asset.id} is a {asset.category}, but {name} is a {self._objects[name].category}"
                )
            self._undrawn.discard(name)
        current = self._attrs[name].model_dump()
        current.update(values)
        try:
            self._attrs[name] = ObjectAttributes(**current)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}={e.get('input')!r}: {e['msg'].removeprefix('Value error, ')}"
                                 for e in exc.errors())
            raise SceneError(f"set_attributes({name}): {problems}") from None

    def _check_known(self, name: str) -> None:
        if name not in self._objects:
            raise SceneError(f"unknown object {name!r}; objects so far: {list(self._objects)}")

    # --- result --------------------------------------------------------------------------------
    def spec(self) -> SceneSpec:
        """Resolve the layout and validate everything into a `SceneSpec`."""
        if not self._objects:
            raise SceneError("the scene has no objects; call scene.add_object(...)")
        if self._task is None:
            raise SceneError("the scene has no task; call scene.set_task(instruction, success=...)")
        try:
            task = TaskSpec(
                family=self.family,
                instruction=self._task["instruction"],
                template=self._task["template"],
                objects=tuple(self._objects.values()),
                success=self._task["success"],
                initial_state=self._task["initial_state"],
            )
            self._draw_instances(task)
            attributes = AttributeSpec(objects=tuple(self._attrs.values()))
            placements = layout.resolve(
                list(self._objects.values()),
                attributes,
                [self._requests.get(n) for n in self._objects],
                seed_layout=self._seed_layout,
                rng=self.rng,
            )
            return SceneSpec(
                seed=self.seed,
                family=self.family,
                robot=self.robot,
                start=self._start,
                task=task,
                layout=LayoutSpec(seed_layout=self._seed_layout, placements=tuple(placements)),
                attributes=attributes,
                meta=dict(self.meta),
            )
        except ValidationError as exc:  # one readable line; the inputs (maybe huge) are not rendered
            problems = "; ".join(
                ".".join(map(str, e["loc"])) + ": " * bool(e["loc"]) + e["msg"].removeprefix("Value error, ")
                for e in exc.errors(include_url=False, include_input=False)[:5])
            raise SceneError(f"the scene is not valid: {problems}") from None


def finalize_program(namespace: dict, inputs: dict) -> dict:
    """Sandbox finalizer for scene programs: the program must leave a `Scene` named `scene`.

    Programs build it with the facade `sim.program.Scene` (what `import sim` gives them in the sandbox), which
    keeps the trusted `Scene` it delegates to in a private slot; that one is validated here. A trusted `Scene`
    itself (a program run in-process with the real `sim` package) is accepted too."""
    scene = namespace.get("scene")
    if scene is None:
        raise SceneError("the program did not define `scene`; end with scene = Scene(...) and its set_* calls")
    program = sys.modules.get("sim.program")  # not loaded: the program cannot have used the facade
    builder = None if program is None else program._trusted_scene(scene)
    if builder is None and type(scene) is Scene:
        builder = scene
    if builder is None:
        raise SceneError(f"`scene` must be a sim.Scene, got {type(scene).__name__}")
    return builder.spec().model_dump(mode="json")


def to_program(spec: SceneSpec) -> str:
    """Write a scene program that rebuilds `spec` exactly (used by the data engine and for provenance)."""
    lines = [
        "from sim import Scene, place, on, inside, grasped, lifted, open_fraction, near, upright, stacked",
        "",
        "table = 'table'",
        f"scene = Scene(family={spec.family!r}, seed=seed)",
    ]
    for o in spec.task.objects:
        a = spec.attributes.of(o.name)
        lines.append(f"{o.name} = scene.add_object({a.asset!r}, role={o.role!r}, name={o.name!r})")
    t = spec.task
    extra = f", initial_state={t.initial_state!r}" if t.initial_state else ""
    lines.append(
        f"scene.set_task({t.instruction!r}, success={t.success}, template={t.template!r}{extra})"
    )
    places = []
    for p in spec.layout.placements:
        support = "table" if p.support == "table" else p.support
        places.append(f"    place({p.object}, on={support}, xy=({p.x:.4f}, {p.y:.4f}), yaw={p.yaw:.4f}),")
    sl = f"seed_layout={spec.layout.seed_layout}" if spec.layout.seed_layout is not None else ""
    lines.append("scene.set_layout(\n" + "\n".join(places) + (f"\n    {sl},\n" if sl else "\n") + ")")
    for a in spec.attributes.objects:
        kw = {k: v for k, v in a.model_dump(exclude={"object", "asset"}).items() if v is not None}
        if kw.get("scale") == 1.0:
            kw.pop("scale")
        if kw:
            args = ", ".join(f"{k}={_literal(v)}" for k, v in kw.items())
            lines.append(f"scene.set_attributes({a.object}, {args})")
    if spec.start is not None:
        st = spec.start
        rate = "" if st.gripper_rate is None else f", gripper_rate={_literal(st.gripper_rate)}"
        lines.append(f"scene.set_start(pos={_literal(st.pos)}, quat={_literal(st.quat)}, opening={_literal(st.opening)}"
                     f"{rate})")
    return "\n".join(lines) + "\n"


def program_spec(spec: SceneSpec) -> SceneSpec:
    """The spec `to_program(spec)` builds: its placements to 0.1 mm and 1e-4 rad without the relation that chose
    them, its attribute and start numbers to 6 decimals (the hash a written program's scene has)."""
    def six(v: Any) -> Any:
        if isinstance(v, float):
            return round(v, 6)
        return [six(x) for x in v] if isinstance(v, list | tuple) else v

    data = spec.model_dump(mode="json")
    for p in data["layout"]["placements"]:
        p.update({k: float(f"{p[k]:.4f}") for k in ("x", "y", "yaw")}, relation=None)
    for a in data["attributes"]["objects"]:
        a.update({k: six(v) for k, v in a.items() if k not in ("object", "asset")})
    if data.get("start") is not None:
        data["start"] = {k: six(v) for k, v in data["start"].items()}
    return SceneSpec.model_validate(data)


def _literal(v: Any) -> str:
    if isinstance(v, float):
        return repr(round(v, 6))
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join(_literal(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    return repr(v)
