"""The SDK that scene programs get: `import sim` / `from sim import Scene, place, on, inside, ...` in a program
imports this module (see `PROGRAM_MODULES`), not the `sim` package.

    scene = Scene(family="pick_place", seed=seed)
    mug = scene.add_object("mug", role="target")
    bowl = scene.add_object("bowl", role="receptacle")
    scene.set_task("put the mug in the bowl", success=inside(mug, bowl) & ~grasped(mug))
    scene.set_layout(place(mug, on="table", xy=(0.45, -0.10)), place(bowl, on="table", near=mug, gap=0.12))
    scene.set_attributes(mug, mass=0.25, friction=0.8, rgba="red")

Programs get data, not live objects. Everything here is a plain Python class with `__slots__` that cannot be
subclassed by a program: no pydantic model (their `parse_raw` / `model_validate` and annotation evaluation reach
real builtins), no dataclass, no numpy array, dtype or scalar, no MuJoCo object, no module but `helpers` (the
`sim.program_helpers` facade). A `Scene` keeps the trusted `sim.scene.Scene` it builds in a private slot; the
trusted finalizer `sim.scene.finalize_program` takes it from there after the program and validates the spec.

Same program and seed, same spec: `Scene` delegates every call to the trusted builder, and `scene.rng` draws from
the builder's own numpy Generator (`sim.program_values.Random`), so the program's draws interleave with the
SDK's (instances, layout slots) exactly as before.
"""

import types as _types

from pydantic import ValidationError as _ValidationError

from sim import predicates as _predicates
from sim import scene as _scene
from sim.program_values import Mat, Random, Vec, _sealed
from sim.program_values import read_only as _read_only
from sim.spec import check_predicate_size as _check_predicate_size

PROGRAM_MODULES = _types.MappingProxyType({
    "sim": "sim.program",
    "sim.helpers": "sim.program_helpers",
    "numpy": "sim.program_numpy",
})
"""Module a program names -> the facade module it really gets (read-only). `math` is the real module (plain
functions of numbers); every other module, `sim.*` submodules and `numpy.*` submodules included, is refused."""

SceneError = _scene.SceneError

_SPLITS = ("train", "heldout")


def _name(obj):
    name = getattr(obj, "name", obj)
    if not isinstance(name, str):
        raise TypeError(f"expected an object handle or name, got {type(obj).__name__}")
    return name


def _numbers(what: str, values, n: int) -> tuple[float, ...]:
    """`n` plain numbers from a program's list or tuple (anything else: SceneError naming `what`)."""
    if type(values) not in (list, tuple) or len(values) != n or any(type(v) not in (int, float) for v in values):
        raise SceneError(f"{what} must be {'a number' if n == 1 else f'{n} numbers'}")
    return tuple(float(v) for v in values)


def _validation_message(where: str, exc: _ValidationError) -> str:
    problems = "; ".join(f"{'.'.join(map(str, e['loc']))}={e.get('input')!r}: {e['msg']}" for e in exc.errors())
    return f"{where}: {problems}"


# --- handles, splits, placements ---------------------------------------------------------------------------


@_sealed
class ObjectHandle:
    """What `Scene.add_object` returns; pass it to predicates, `place` and `set_attributes`."""

    __slots__ = ("name", "category", "role")

    def __init__(self, name: str, category: str, role: str):
        for field, value in (("name", name), ("category", category), ("role", role)):
            if not isinstance(value, str):
                raise TypeError(f"ObjectHandle.{field} must be a string, got {type(value).__name__}")
            object.__setattr__(self, field, str(value))

    def __eq__(self, other):
        if type(other) is not ObjectHandle:
            return NotImplemented
        return (self.name, self.category, self.role) == (other.name, other.category, other.role)

    def __hash__(self):
        return hash((self.name, self.category, self.role))

    def __repr__(self) -> str:
        return f"ObjectHandle(name={self.name!r}, category={self.category!r}, role={self.role!r})"

    __setattr__ = _read_only
    __delattr__ = _read_only


@_sealed
class SceneSplit:
    """Which side of the train / held-out split each factor draws from."""

    __slots__ = ("instances", "categories", "layouts", "tasks")

    def __init__(self, instances: str = "train", categories: str = "train", layouts: str = "train",
                 tasks: str = "train"):
        for field, value in (("instances", instances), ("categories", categories), ("layouts", layouts),
                             ("tasks", tasks)):
            if value not in _SPLITS or not isinstance(value, str):
                raise SceneError(f"SceneSplit.{field} must be 'train' or 'heldout', got {value!r}")
            object.__setattr__(self, field, str(value))

    def _fields(self) -> tuple:
        return (self.instances, self.categories, self.layouts, self.tasks)

    def __eq__(self, other):
        if type(other) is not SceneSplit:
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self):
        return hash(self._fields())

    def __repr__(self) -> str:
        return (f"SceneSplit(instances={self.instances!r}, categories={self.categories!r}, "
                f"layouts={self.layouts!r}, tasks={self.tasks!r})")

    __setattr__ = _read_only
    __delattr__ = _read_only


@_sealed
class PlaceRequest:
    """An unresolved placement made by `place`; resolved to world coordinates when the scene is finalized."""

    __slots__ = ("object", "on", "xy", "near", "gap", "yaw")

    def __init__(self, obj, on="table", xy=None, near=None, gap: float = 0.05, yaw: float | None = None):
        request = _scene.place(obj, on=on, xy=xy, near=near, gap=gap, yaw=yaw)  # validates, as before
        for field in PlaceRequest.__slots__:
            object.__setattr__(self, field, getattr(request, field))

    def _trusted(self) -> "_scene.PlaceRequest":
        return _scene.PlaceRequest(object=self.object, on=self.on, xy=self.xy, near=self.near, gap=self.gap,
                                   yaw=self.yaw)

    def __repr__(self) -> str:
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in PlaceRequest.__slots__)
        return f"PlaceRequest({fields})"

    def __hash__(self):  # by value, not address: a set of requests iterates alike in every process
        return hash(tuple(getattr(self, f) for f in PlaceRequest.__slots__))

    __setattr__ = _read_only
    __delattr__ = _read_only


def place(obj, on="table", xy=None, near=None, gap: float = 0.05, yaw: float | None = None, **unknown) -> PlaceRequest:
    """Request a pose: on 'table' or on/in another object, at world `xy` or `gap` metres beside `near`, turned by
    `yaw` radians about the vertical."""
    if unknown:
        raise SceneError(f"place({_name(obj)}): unknown argument {next(iter(unknown))!r}; valid arguments: obj, on, "
                         "xy, near, gap, yaw")
    return PlaceRequest(obj, on=on, xy=xy, near=near, gap=gap, yaw=yaw)


# --- success predicates --------------------------------------------------------------------------------------


class _Node:
    """Operators shared by the predicate nodes: `&`, `|`, `~` (flattening like the trusted predicates)."""

    __slots__ = ()

    def __and__(self, other):
        if not isinstance(other, _Node):
            return NotImplemented
        return And([*_flat(self, "and"), *_flat(other, "and")])

    def __or__(self, other):
        if not isinstance(other, _Node):
            return NotImplemented
        return Or([*_flat(self, "or"), *_flat(other, "or")])

    def __invert__(self):
        return Not(self)

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __str__(self) -> str:
        return _text(self)

    __setattr__ = _read_only
    __delattr__ = _read_only


_sealed(_Node)


def _flat(node: _Node, op: str) -> list:
    return list(node.terms) if node.op == op else [node]


def _paren(node: _Node) -> str:
    return f"({node})" if node.op in ("and", "or") else str(node)


class Atom(_Node):
    """One relation over named objects, e.g. `inside(mug, bowl)`; build it with the constructors below."""

    __slots__ = ("op", "args", "_params")

    def __init__(self, op: str, args, params=None):
        if op not in _predicates.ATOM_SIGNATURES:
            raise ValueError(f"unknown predicate {op!r}; predicates: {', '.join(_predicates.ATOMS)}")
        n_args, defaults = _predicates.ATOM_SIGNATURES[op]
        args = tuple(_name(a) for a in args)
        if len(args) != n_args:
            raise ValueError(f"{op} takes {n_args} object(s), got {len(args)}: {list(args)}")
        params = {str(k): float(v) for k, v in (params or {}).items()}
        unknown = set(params) - set(defaults)
        if unknown:
            raise ValueError(f"{op} has no parameter(s) {sorted(unknown)}; accepted: {sorted(defaults) or 'none'}")
        object.__setattr__(self, "op", str(op))
        object.__setattr__(self, "args", args)
        object.__setattr__(self, "_params", params)

    @property
    def params(self) -> dict:
        """The parameters given (a copy): e.g. {'height': 0.05} for lifted."""
        return dict(self._params)

    def objects(self) -> set:
        return set(self.args)

    def _key(self) -> tuple:
        return (self.op, self.args, tuple(sorted(self._params.items())))

    def __repr__(self) -> str:
        return f"Atom(op={self.op!r}, args={self.args!r}, params={self._params!r})"


class And(_Node):
    """All terms hold (`a & b`)."""

    __slots__ = ("op", "terms")

    def __init__(self, terms):
        object.__setattr__(self, "op", "and")
        object.__setattr__(self, "terms", _terms(terms))

    def objects(self) -> set:
        return set().union(*(t.objects() for t in self.terms))

    def _key(self) -> tuple:
        return (self.op, self.terms)

    def __repr__(self) -> str:
        return f"And(terms={list(self.terms)!r})"


class Or(_Node):
    """At least one term holds (`a | b`)."""

    __slots__ = ("op", "terms")

    def __init__(self, terms):
        object.__setattr__(self, "op", "or")
        object.__setattr__(self, "terms", _terms(terms))

    def objects(self) -> set:
        return set().union(*(t.objects() for t in self.terms))

    def _key(self) -> tuple:
        return (self.op, self.terms)

    def __repr__(self) -> str:
        return f"Or(terms={list(self.terms)!r})"


class Not(_Node):
    """The term does not hold (`~a`)."""

    __slots__ = ("op", "term")

    def __init__(self, term):
        if not isinstance(term, _Node):
            raise TypeError(f"~ takes a predicate, got {type(term).__name__}")
        object.__setattr__(self, "op", "not")
        object.__setattr__(self, "term", term)

    def objects(self) -> set:
        return self.term.objects()

    def _key(self) -> tuple:
        return (self.op, self.term)

    def __repr__(self) -> str:
        return f"Not(term={self.term!r})"


def _terms(terms) -> tuple:
    terms = tuple(terms)
    for t in terms:
        if not isinstance(t, _Node):
            raise TypeError(f"predicates combine predicates, got {type(t).__name__}")
    return terms


def _text(node: _Node) -> str:
    """The same text as the trusted predicates' `str`: `inside(mug, bowl) & ~grasped(mug)`."""
    if node.op == "not":
        return f"~{_paren(node.term)}"
    if node.op in ("and", "or"):
        return (" & " if node.op == "and" else " | ").join(_paren(t) for t in node.terms)
    params = "".join(f", {k}={v:g}" for k, v in sorted(node._params.items()))
    return f"{node.op}({', '.join(node.args)}{params})"


def _check_size(node: _Node) -> None:
    """The trusted limits on atoms, nodes and depth, before the predicate is copied (it may share sub-terms, so
    its tree can be exponentially larger than the objects that make it)."""
    try:
        _check_predicate_size(node)  # reads .op / .terms / .term, iteratively, and stops at the first limit
    except ValueError as exc:
        raise SceneError(str(exc)) from None


def _predicate_data(node: _Node) -> dict:
    """The predicate as JSON data for the trusted `TaskSpec` (built without recursion)."""
    _check_size(node)
    root: dict = {}
    stack = [(node, root)]
    while stack:
        current, out = stack.pop()
        if current.op == "not":
            child: dict = {}
            out.update(op="not", term=child)
            stack.append((current.term, child))
        elif current.op in ("and", "or"):
            children = [{} for _ in current.terms]
            out.update(op=current.op, terms=children)
            stack.extend(zip(current.terms, children, strict=True))
        else:
            out.update(op=current.op, args=list(current.args), params=dict(current._params))
    return root


def on(obj, support) -> Atom:
    """`obj` rests on top of `support` (an object name or 'table')."""
    return Atom("on", (obj, support))


def inside(obj, container) -> Atom:
    """`obj`'s centre lies in `container`'s cavity (bowl, crate, open drawer...)."""
    return Atom("inside", (obj, container))


def grasped(obj) -> Atom:
    """Both fingers touch `obj`."""
    return Atom("grasped", (obj,))


def lifted(obj, height: float = 0.05) -> Atom:
    """`obj`'s bottom is at least `height` metres above where it started."""
    return Atom("lifted", (obj,), {"height": float(height)})


def open_fraction(obj, min: float = 0.0, max: float = 1.0) -> Atom:  # noqa: A002
    """The joint of articulated `obj` is opened to a fraction of its range within [min, max]."""
    return Atom("open_fraction", (obj,), {"min": float(min), "max": float(max)})


def near(a, b, dist: float = 0.10) -> Atom:
    """Centres of `a` and `b` are within `dist` metres."""
    return Atom("near", (a, b), {"dist": float(dist)})


def upright(obj, tol_deg: float = 20.0) -> Atom:
    """`obj`'s up axis is within `tol_deg` degrees of vertical."""
    return Atom("upright", (obj,), {"tol_deg": float(tol_deg)})


def stacked(top, bottom) -> Atom:
    """`top` rests on `bottom`, centred and upright."""
    return Atom("stacked", (top, bottom))


# --- the scene builder -------------------------------------------------------------------------------------


@_sealed
class Scene:
    """Builder for one scene: add objects, then set the task (τ), the layout (σ) and the attributes (α).

    `scene.rng` draws the scene's random numbers (numpy's `default_rng(seed)`, as plain Python values),
    `scene.meta` is a dict kept with the spec, `scene.objects()` lists the handles.
    """

    __slots__ = ("_builder", "_rng")
    __hash__ = None  # one per program; object's default hash is its address (see sim.sandbox.child)

    def __init__(self, family: str, seed: int = 0, split: SceneSplit | None = None, robot: str = "gripper"):
        if split is not None and type(split) is not SceneSplit:
            raise TypeError(f"split must be a sim.SceneSplit, got {type(split).__name__}")
        if type(robot) is not str:
            raise TypeError(f"robot must be a string, got {type(robot).__name__}")
        trusted_split = None if split is None else _scene.SceneSplit(*split._fields())
        builder = _scene.Scene(family=family, seed=seed, split=trusted_split, robot=str(robot))
        object.__setattr__(self, "_builder", builder)
        object.__setattr__(self, "_rng", Random._wrap(builder.rng))

    @property
    def family(self):
        return self._builder.family

    @property
    def seed(self) -> int:
        return self._builder.seed

    @property
    def robot(self) -> str:
        return self._builder.robot

    @property
    def split(self) -> SceneSplit:
        s = self._builder.split
        return SceneSplit(s.instances, s.categories, s.layouts, s.tasks)

    @property
    def rng(self) -> Random:
        """The scene's random number generator (its draws are part of what the seed fixes)."""
        return self._rng

    @property
    def meta(self) -> dict:
        """Provenance kept with the spec (JSON values); not part of its hash."""
        return self._builder.meta

    @meta.setter
    def meta(self, value) -> None:
        self._builder.meta = value

    # --- objects ---------------------------------------------------------------------------------------------
    def add_object(self, what: str, role: str = "distractor", name: str | None = None) -> ObjectHandle:
        """Add an object by category ('mug') or instance id ('mug/007'); returns a handle."""
        try:
            handle = self._builder.add_object(what, role=role, name=name)
        except _ValidationError as exc:
            raise SceneError(_validation_message(f"add_object({what!r})", exc)) from None
        return ObjectHandle(handle.name, handle.category, handle.role)

    def objects(self) -> list:
        """Handles of the objects added so far, in order."""
        return [ObjectHandle(h.name, h.category, h.role) for h in self._builder.objects()]

    # --- factors ---------------------------------------------------------------------------------------------
    def set_task(self, instruction: str, success, template: str = "custom", initial_state: dict | None = None) -> None:
        """τ: the instruction and the machine-checkable success predicate (on, inside, ... with &, |, ~);
        `initial_state` gives joint openings, e.g. {drawer: {"open": 0.9}}."""
        if isinstance(success, _Node):
            success = _predicate_data(success)
        elif isinstance(success, dict):
            try:  # raw JSON data may share sub-terms too: its size is checked before anything copies it
                _check_predicate_size(success)
            except ValueError as exc:
                raise SceneError(str(exc)) from None
        else:
            raise SceneError(f"success must be a predicate such as inside(mug, bowl) & ~grasped(mug), "
                             f"got {type(success).__name__}")
        self._builder.set_task(instruction, success=success, template=template, initial_state=initial_state)

    def set_layout(self, *requests: PlaceRequest, seed_layout: int | None = None) -> None:
        """σ: placements made with `place`; objects left out are put on free table slots (of `seed_layout`)."""
        trusted = [r._trusted() if type(r) is PlaceRequest else r for r in requests]
        self._builder.set_layout(*trusted, seed_layout=seed_layout)

    def set_start(self, pos=None, quat=None, opening=1.0, gripper_rate=None) -> None:
        """Where the hand starts: TCP position (x, y, z in metres; default home), orientation quaternion
        (w, x, y, z; default fingers straight down, tilt at most 0.6 rad) and finger opening (1 open, 0 closed);
        `gripper_rate`: the most the fingers' command (-1 open .. 1 closed) moves per action, in (0, 2] (default:
        at once; robosuite's Panda gripper 0.4)."""
        self._builder.set_start(pos=None if pos is None else _numbers("pos", pos, 3),
                                quat=None if quat is None else _numbers("quat", quat, 4),
                                opening=_numbers("opening", [opening], 1)[0],
                                gripper_rate=None if gripper_rate is None else _numbers("gripper_rate", [gripper_rate], 1)[0])

    def set_attributes(self, obj, **values) -> None:
        """α: asset, scale, mass, friction, rgba (name or 4 floats), damping, joint_range."""
        try:
            self._builder.set_attributes(obj, **values)
        except _ValidationError as exc:
            raise SceneError(_validation_message(f"set_attributes({_name(obj)})", exc)) from None

    def __repr__(self) -> str:
        names = [h.name for h in self._builder.objects()]
        return f"Scene(family={self.family!r}, seed={self.seed}, objects={names})"


_BUILDER = Scene.__dict__["_builder"]


def _trusted_scene(scene):
    """The trusted `sim.scene.Scene` a program's `Scene` built (for `sim.scene.finalize_program`), or None."""
    if type(scene) is not Scene:
        return None
    builder = _BUILDER.__get__(scene)
    return builder if type(builder) is _scene.Scene else None


from sim import program_helpers as helpers  # noqa: E402  (the helpers facade: `from sim import helpers`)

__all__ = [
    "Scene",
    "SceneError",
    "SceneSplit",
    "ObjectHandle",
    "PlaceRequest",
    "place",
    "on",
    "inside",
    "grasped",
    "lifted",
    "open_fraction",
    "near",
    "upright",
    "stacked",
    "Random",
    "Vec",
    "Mat",
    "helpers",
]


def __getattr__(name: str):
    raise AttributeError(f"module 'sim' has no attribute {name!r}; scene programs may use: {', '.join(__all__)}")
