"""The scene specification s = (τ, σ, α) as pydantic models.

A `SceneSpec` is what a scene program produces. It is JSON-serializable, hashable (`spec_hash`) and versioned,
and compiles deterministically to MuJoCo (`sim.compile.compile_scene`).

- τ `TaskSpec`: family, instruction, participating objects with symbolic roles, initial object states, and the
  success predicate.
- σ `LayoutSpec`: where each object starts (support, world xy, yaw) and the relations that produced it.
- α `AttributeSpec`: per-object instance, scale, mass, friction, colour, articulation parameters.
"""

from __future__ import annotations

import hashlib
import json
import keyword
import math
import unicodedata
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer, model_validator

from sim.constants import (
    DEFAULT_ROBOT,
    FAMILIES,
    GRIPPER_HOME,
    MAX_OBJECTS,
    MAX_PREDICATE_ATOMS,
    MAX_PREDICATE_DEPTH,
    MAX_PREDICATE_NODES,
    ROBOTS,
    ROLES,
    WORKSPACE_HIGH,
    WORKSPACE_LOW,
)
from sim.predicates import ATOMS, Predicate

SPEC_VERSION = 1
MAX_META_CHARS = 20_000
"""longest `SceneSpec.meta` as JSON (provenance, not a payload: a scene is echoed by every listing)"""
MAX_META_DEPTH = 8
"""deepest nesting of `SceneSpec.meta` (a JSON reader refuses what a writer nested 200 levels deep)"""

Role = Literal["target", "receptacle", "support", "occluder", "distractor", "articulated", "handle", "tool"]
assert set(Role.__args__) == set(ROLES)  # noqa: S101  (kept in sync with sim.constants.ROLES)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


BOUNDS: dict[str, tuple[float, float, str]] = {
    "x": (-2.0, 2.0, " m"),
    "y": (-2.0, 2.0, " m"),
    "yaw": (-2 * math.pi, 2 * math.pi, " rad"),
    "scale": (0.01, 100.0, " (factor of the instance's size)"),
    "mass": (0.001, 100.0, " kg"),
    "friction": (0.01, 10.0, ""),
    "damping": (0.0, 1e6, ""),
    "joint_range": (-2 * math.pi, 2 * math.pi, " (m or rad)"),
}
"""hard limits on a spec's numbers (field: low, high, unit), far outside anything plausible: they keep absurd values
(e.g. friction=1e300, which makes MuJoCo's simulation blow up) out of the compiler and the simulator. What is
*plausible* for an object (its size, mass and friction against its category) is the verifier's `scale_plausible`
check (`sim.verify`), well inside these limits; so are the project's own generators (`agent.methods.DR_RANGES`, the
variation operators of `sim.engine.variations`)."""


def _within(field: str, value: float) -> float:
    lo, hi, unit = BOUNDS[field]
    if not lo <= value <= hi:
        raise ValueError(f"{field} must lie in [{lo:g}, {hi:g}]{unit}, got {value:g}")
    return value


_CONNECTIVES = ("and", "or", "not")


def _predicate_children(node: Any) -> list[Any] | None:
    """Sub-predicates of a predicate given as a model or as raw JSON data (None: an atom or not a predicate)."""
    op = node.get("op") if isinstance(node, dict) else getattr(node, "op", None)
    if op not in _CONNECTIVES:
        return None
    key = "term" if op == "not" else "terms"
    child = node.get(key) if isinstance(node, dict) else getattr(node, key, None)
    if op == "not":
        return [child] if child is not None else []
    return list(child) if isinstance(child, list | tuple) else []


def check_predicate_size(node: Any) -> None:
    """Refuse a success predicate over `MAX_PREDICATE_ATOMS` atoms, `MAX_PREDICATE_NODES` nodes or
    `MAX_PREDICATE_DEPTH` levels. Works on raw JSON data too, so an oversized predicate is refused before it is
    parsed; walks iteratively and stops at the first limit exceeded."""
    atoms = nodes = 0
    stack = [(node, 1)]
    while stack:
        current, depth = stack.pop()
        if depth > MAX_PREDICATE_DEPTH:
            raise ValueError(f"success predicate is nested deeper than the limit of {MAX_PREDICATE_DEPTH} levels")
        nodes += 1
        if nodes > MAX_PREDICATE_NODES:
            raise ValueError(f"success predicate has more than the limit of {MAX_PREDICATE_NODES} nodes")
        children = _predicate_children(current)
        if children is None:
            atoms += 1
            if atoms > MAX_PREDICATE_ATOMS:
                raise ValueError(f"success predicate has more than the limit of {MAX_PREDICATE_ATOMS} atoms")
        else:
            stack.extend((c, depth + 1) for c in children)


RESERVED_NAMES = frozenset(ATOMS) | {"scene", "seed", "table", "place", "Scene", "np", "math", "sim"}
"""names an object cannot have: the written program (`sim.scene.to_program`) binds each object to a variable of
its name beside these (and no Python keyword can be one)"""


class TaskObject(_Frozen):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,39}$", description="symbol used by the predicate")
    category: str
    role: Role

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, v: str) -> str:
        if v in RESERVED_NAMES or keyword.iskeyword(v):
            raise ValueError(f"object name {v!r} is reserved (a Python keyword or a name the scene program uses: "
                             f"{', '.join(sorted(RESERVED_NAMES))}); choose another")
        return v


class TaskSpec(_Frozen):
    """τ: what has to happen, over which objects."""

    family: str
    instruction: str = Field(min_length=1, max_length=500)
    template: str = Field("custom", min_length=1, max_length=64)
    """id of the instruction/predicate template that produced the task (OOD task suites hold some out)"""
    objects: tuple[TaskObject, ...]
    success: Predicate
    initial_state: dict[str, dict[str, float]] = Field(default_factory=dict)
    """per-object initial joint state, e.g. {"drawer": {"open": 0.0}} (fraction of the joint range, in [0, 1])"""

    @field_validator("instruction", "template")
    @classmethod
    def _plain_text(cls, v: str) -> str:
        """No control or format characters: the text is printed in reports, listings and terminals, where an escape
        sequence could rewrite what the reader sees."""
        bad = sorted({f"U+{ord(c):04X}" for c in v if unicodedata.category(c) in ("Cc", "Cf")})
        if bad:
            raise ValueError(f"must be plain text without control characters, got {', '.join(bad[:5])}")
        return v

    @field_validator("success", mode="before")
    @classmethod
    def _success_size(cls, v: Any) -> Any:
        check_predicate_size(v)
        return v

    @field_validator("initial_state")
    @classmethod
    def _initial_state(cls, v: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        if len(v) > MAX_OBJECTS or any(len(j) > 4 or any(len(k) > 40 for k in j) for j in v.values()):
            raise ValueError(f"initial_state holds at most {MAX_OBJECTS} objects of at most 4 joint states each, "
                             "keys of at most 40 characters")
        for obj, joints in v.items():
            for key, value in joints.items():
                if not (math.isfinite(value) and 0.0 <= value <= 1.0):
                    raise ValueError(f"initial_state[{obj!r}][{key!r}] must be a finite fraction of the joint range in "
                                     f"[0, 1], got {value}")
        return v

    @field_validator("family")
    @classmethod
    def _family(cls, v: str) -> str:
        if v not in FAMILIES:
            raise ValueError(f"unknown task family {v!r}; valid families: {', '.join(FAMILIES)}")
        return v

    def object(self, name: str) -> TaskObject:
        for o in self.objects:
            if o.name == name:
                return o
        raise KeyError(f"no object named {name!r} in the task; objects: {[o.name for o in self.objects]}")

    def with_role(self, role: str) -> list[TaskObject]:
        return [o for o in self.objects if o.role == role]


class Placement(_Frozen):
    """Initial pose of one object. xy are world coordinates; z follows from the support."""

    object: str
    support: str = "table"
    """'table', another object's name (rests on its top), or an articulated object's name (inside its cavity)"""
    x: float = Field(allow_inf_nan=False)
    y: float = Field(allow_inf_nan=False)
    yaw: float = Field(default=0.0, allow_inf_nan=False)
    relation: dict[str, Any] | None = None
    """how the pose was chosen, kept so a layout resample can honour it, e.g. {"near": "mug", "gap": 0.12}"""

    @field_validator("x", "y", "yaw")
    @classmethod
    def _pose(cls, v: float, info) -> float:
        return _within(info.field_name, v)


class LayoutSpec(_Frozen):
    """σ: object-spatial arrangement."""

    seed_layout: int | None = None
    placements: tuple[Placement, ...]

    def placement(self, name: str) -> Placement:
        for p in self.placements:
            if p.object == name:
                return p
        raise KeyError(f"object {name!r} has no placement")


class ObjectAttributes(_Frozen):
    """α for one object. `None` means the instance's own value."""

    object: str
    asset: str
    """instance id in the asset pool, e.g. 'mug/007' (see `coda sim assets`)"""
    scale: float = Field(default=1.0, gt=0.0, allow_inf_nan=False)
    mass: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    """kg; finite and positive (NaN, infinite, zero or negative masses are rejected)"""
    friction: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    rgba: tuple[float, float, float, float] | None = None
    damping: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)
    joint_range: tuple[float, float] | None = None

    @field_validator("rgba")
    @classmethod
    def _rgba(cls, v):
        if v is not None and not all(0.0 <= c <= 1.0 for c in v):
            raise ValueError(f"rgba components must lie in [0, 1], got {v}")
        return v

    @field_validator("joint_range")
    @classmethod
    def _joint_range(cls, v):
        if v is not None and not all(math.isfinite(c) for c in v):
            raise ValueError(f"joint_range must be two finite numbers, got {v}")
        if v is not None:
            for c in v:
                _within("joint_range", c)
        return v

    @field_validator("scale", "mass", "friction", "damping")
    @classmethod
    def _bounded(cls, v: float | None, info) -> float | None:
        return v if v is None else _within(info.field_name, v)


class AttributeSpec(_Frozen):
    objects: tuple[ObjectAttributes, ...]

    def of(self, name: str) -> ObjectAttributes:
        for a in self.objects:
            if a.object == name:
                return a
        raise KeyError(f"object {name!r} has no attributes")


START_MIN_HEIGHT = 0.08
"""lowest start of the hand's TCP above the table top (m): the fingers reach below the TCP"""
MAX_START_TILT = 0.6
"""largest start tilt of the fingers away from pointing straight down (rad, ≈ 34°); any yaw is allowed"""


class RobotStart(_Frozen):
    """Where the hand starts an episode: TCP position, orientation and finger opening — and how fast its fingers
    follow their command. A scene without one starts at `GRIPPER_HOME`, fingers down and open, fingers following
    at once. External benchmarks start elsewhere (robosuite's Panda: lower, tilted, half open) and close their
    grippers over several actions (robosuite's Panda: in 5), so a scene resembling one of their episodes starts
    where it did and closes as slowly (`sim.engine.proxy`)."""

    pos: tuple[float, float, float] = Field(default=GRIPPER_HOME, description="TCP position (m), table top z = 0")
    quat: tuple[float, float, float, float] = Field(
        default=(1.0, 0.0, 0.0, 0.0), description="TCP orientation (w, x, y, z); identity = fingers straight down")
    opening: float = Field(default=1.0, ge=0.0, le=1.0, allow_inf_nan=False,
                           description="finger opening, 1 open, 0 closed")
    gripper_rate: float | None = Field(
        default=None, gt=0.0, le=2.0, allow_inf_nan=False,
        description="the most the fingers' command moves per action, in command units (-1 open .. 1 closed); "
                    "omitted: at once. robosuite's Panda gripper: 0.4 (a full close in 5 actions)")

    @field_validator("pos")
    @classmethod
    def _pos(cls, v: tuple[float, float, float]) -> tuple[float, float, float]:
        low = (WORKSPACE_LOW[0], WORKSPACE_LOW[1], START_MIN_HEIGHT)
        for axis, c, lo, hi in zip("xyz", v, low, WORKSPACE_HIGH, strict=True):
            if not (math.isfinite(c) and lo <= c <= hi):
                raise ValueError(f"start pos {axis} must lie in [{lo:g}, {hi:g}] m (the workspace), got {c:g}")
        return tuple(round(c, 6) for c in v)  # type: ignore[return-value]  (a scene program rebuilds it exactly)

    @field_validator("quat")
    @classmethod
    def _quat(cls, v: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
        norm = math.sqrt(sum(c * c for c in v)) if all(math.isfinite(c) for c in v) else 0.0
        if not 0.9 <= norm <= 1.1:
            raise ValueError(f"start quat must be a finite unit quaternion (w, x, y, z), got {v}")
        w, x, y, z = (c / norm for c in v)
        down_z = 1.0 - 2.0 * (x * x + y * y)  # z component of the turned finger axis: cos(tilt)
        tilt = math.acos(max(-1.0, min(1.0, down_z)))
        if tilt > MAX_START_TILT:
            raise ValueError(f"start quat tilts the fingers {tilt:.2f} rad from straight down; at most "
                             f"{MAX_START_TILT} rad")
        sign = -1.0 if v[0] < 0 else 1.0  # one hemisphere (w >= 0); the simulator normalizes
        return tuple(round(sign * c, 6) + 0.0 for c in v)  # type: ignore[return-value]

    @field_validator("opening")
    @classmethod
    def _opening(cls, v: float) -> float:
        return round(v, 6)

    @field_validator("gripper_rate")
    @classmethod
    def _rate(cls, v: float | None) -> float | None:
        return None if v is None else round(v, 6)

    @model_serializer(mode="wrap")
    def _instant_fingers_unwritten(self, handler):
        """Fingers that follow at once are not written: starts without a rate serialize (and hash) as before the
        rate existed."""
        data = handler(self)
        if isinstance(data, dict) and data.get("gripper_rate") is None:
            data.pop("gripper_rate", None)
        return data


class SceneSpec(_Frozen):
    """A complete scene: task, layout, attributes and the seed that made them."""

    version: int = SPEC_VERSION
    seed: int
    family: str
    task: TaskSpec
    layout: LayoutSpec
    attributes: AttributeSpec
    robot: str = DEFAULT_ROBOT
    """the embodiment (`sim.constants.ROBOTS`); written (and hashed) only when not the default"""
    start: RobotStart | None = None
    """where the hand starts (None: `GRIPPER_HOME`, fingers down, open); written (and hashed) only when given"""
    meta: dict[str, Any] = Field(default_factory=dict)
    """provenance (program hash, parent scene, factor varied...); not part of the hash. JSON of at most
    `MAX_META_CHARS` characters nested at most `MAX_META_DEPTH` levels; `parent`, `varied`, `operator` are text"""

    @field_validator("meta")
    @classmethod
    def _meta(cls, v: dict[str, Any]) -> dict[str, Any]:
        try:
            text = json.dumps(v, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            raise ValueError(f"meta must be plain JSON (text, finite numbers, lists, dicts): {exc}") from None
        if len(text) > MAX_META_CHARS:
            raise ValueError(f"meta is {len(text):,} characters as JSON, at most {MAX_META_CHARS:,}")
        stack = [(v, 1)]
        while stack:
            node, depth = stack.pop()
            if depth > MAX_META_DEPTH:
                raise ValueError(f"meta is nested deeper than {MAX_META_DEPTH} levels")
            children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
            stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
        for key in ("parent", "varied", "operator"):
            if v.get(key) is not None and not isinstance(v[key], str):
                raise ValueError(f"meta[{key!r}] must be text, got {type(v[key]).__name__}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> SceneSpec:
        names = [o.name for o in self.task.objects]
        if len(names) > MAX_OBJECTS:
            raise ValueError(f"a scene holds at most {MAX_OBJECTS} objects (the policy observes {MAX_OBJECTS}), "
                             f"got {len(names)}")
        if len(set(names)) != len(names):
            raise ValueError(f"object names must be unique, got {names}")
        if self.robot not in ROBOTS:
            raise ValueError(f"unknown robot {self.robot!r}; valid robots: {', '.join(ROBOTS)}")
        if self.family != self.task.family:
            raise ValueError(f"spec family {self.family!r} differs from task family {self.task.family!r}")
        for label, got in (
            ("layout placements", [p.object for p in self.layout.placements]),
            ("attributes", [a.object for a in self.attributes.objects]),
        ):
            if sorted(got) != sorted(names):
                raise ValueError(f"{label} cover {sorted(got)} but the task's objects are {sorted(names)}")
        missing = self.task.success.objects() - set(names) - {"table"}
        if missing:
            raise ValueError(f"success predicate names unknown object(s) {sorted(missing)}; objects: {names}")
        for p in self.layout.placements:
            if p.support != "table" and p.support not in names:
                raise ValueError(f"{p.object} is placed on unknown support {p.support!r}")
            if p.support == p.object:
                raise ValueError(f"{p.object} cannot be placed on itself")
        support = {p.object: p.support for p in self.layout.placements}
        for name in names:  # every chain of supports ends on the table
            chain, below = [name], support[name]
            while below != "table":
                if below in chain:
                    raise ValueError(f"placements rest on each other in a cycle: {' on '.join([*chain, below])}")
                chain.append(below)
                below = support[below]
        unknown = set(self.task.initial_state) - set(names)
        if unknown:
            raise ValueError(f"initial_state names unknown object(s) {sorted(unknown)}; objects: {names}")
        return self

    @model_serializer(mode="wrap")
    def _default_robot_unwritten(self, handler):
        """The default robot and start are not written: specs of the floating gripper starting at home serialize
        (and hash) as before those fields existed."""
        data = handler(self)
        if isinstance(data, dict):
            if data.get("robot") == DEFAULT_ROBOT:
                del data["robot"]
            if "start" in data and data["start"] is None:
                del data["start"]
        return data

    def with_robot(self, robot: str) -> SceneSpec:
        """The same scene for another embodiment (`sim.constants.ROBOTS`); ValueError naming the valid ones."""
        if robot == self.robot:
            return self
        return SceneSpec.model_validate({**self.model_dump(), "robot": robot})

    def with_start(self, start: RobotStart | dict | None) -> SceneSpec:
        """The same scene with the hand starting at `start` (None: home); ValueError when it is not a valid
        `RobotStart`."""
        start = None if start is None else RobotStart.model_validate(start).model_dump()
        return SceneSpec.model_validate({**self.model_dump(), "start": start})

    def canonical_json(self) -> str:
        data = self.model_dump(mode="json", exclude={"meta"})
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    def spec_hash(self) -> str:
        """Stable 16-hex-digit hash of everything but `meta`."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()[:16]

    def object_names(self) -> list[str]:
        return [o.name for o in self.task.objects]
