"""The success-predicate language: atoms over named objects combined with `&`, `|`, `~`.

Predicates are pydantic models, so they serialize into the scene spec and back. They are evaluated on a
`sim.helpers.SceneState` (the simulator state plus the scene's symbol table):

    success = inside(mug, bowl) & ~grasped(mug)
    success.evaluate(state)          # -> bool
    success.terms(state)             # -> {"inside(mug, bowl)": True, "grasped(mug)": False}
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat

if TYPE_CHECKING:
    from sim.helpers import SceneState

ATOMS = ("on", "inside", "grasped", "lifted", "open_fraction", "near", "upright", "stacked")

# number of object arguments and accepted parameters with their defaults
ATOM_SIGNATURES: dict[str, tuple[int, dict[str, float]]] = {
    "on": (2, {}),
    "inside": (2, {}),
    "grasped": (1, {}),
    "lifted": (1, {"height": 0.05}),
    "open_fraction": (1, {"min": 0.0, "max": 1.0}),
    "near": (2, {"dist": 0.10}),
    "upright": (1, {"tol_deg": 20.0}),
    "stacked": (2, {}),
}


PARAM_RANGES: dict[str, dict[str, tuple[float, float, str]]] = {
    "lifted": {"height": (0.0, 0.6, "use a height in (0, 0.6] m: the gripper reaches 0.60 m above the table")},
    "open_fraction": {"max": (0.0, 1.0, "fractions of the joint's range lie in [0, 1], max > 0")},
    "near": {"dist": (0.0, 2.0, "use a distance in (0, 2] m")},
    "upright": {"tol_deg": (0.0, 180.0, "use a tolerance in (0, 180] degrees")},
}
"""(low, high] of each parameter a success condition can be met with, and what to use instead
(`open_fraction`'s min: [0, max], checked with max)"""


class _Node(BaseModel):
    model_config = ConfigDict(frozen=True)

    def __and__(self, other: Predicate) -> And:
        return And(terms=[*_flat(self, "and"), *_flat(other, "and")])

    def __or__(self, other: Predicate) -> Or:
        return Or(terms=[*_flat(self, "or"), *_flat(other, "or")])

    def __invert__(self) -> Not:
        return Not(term=self)


def _flat(node: Predicate, op: str) -> list[Predicate]:
    return list(node.terms) if node.op == op else [node]


class Atom(_Node):
    op: Literal["on", "inside", "grasped", "lifted", "open_fraction", "near", "upright", "stacked"]
    args: tuple[str, ...]
    params: dict[str, FiniteFloat] = Field(default_factory=dict)
    """finite numbers (NaN and infinities are refused)"""

    def model_post_init(self, __context: Any) -> None:
        n_args, defaults = ATOM_SIGNATURES[self.op]
        if len(self.args) != n_args:
            raise ValueError(f"{self.op} takes {n_args} object(s), got {len(self.args)}: {list(self.args)}")
        table = [i for i, a in enumerate(self.args) if a == "table"]
        if table and (self.op != "on" or table != [1]):
            raise ValueError(f"{self}: 'table' can only be the support of on(obj, table), not an object of {self.op}")
        if n_args == 2 and self.args[0] == self.args[1]:
            raise ValueError(f"{self} relates {self.args[0]} to itself and can never hold; name two objects")
        unknown = set(self.params) - set(defaults)
        if unknown:
            raise ValueError(
                f"{self.op} has no parameter(s) {sorted(unknown)}; accepted: {sorted(defaults) or 'none'}"
            )
        for key, (low, high, what) in PARAM_RANGES.get(self.op, {}).items():
            value = self.param(key)
            if not low < value <= high:
                raise ValueError(f"{self.op}({', '.join(self.args)}): {key}={value:g} can never hold; {what}")
        if self.op == "open_fraction" and not 0.0 <= (low := self.param("min")) <= (high := self.param("max")):
            why = f"is above max={high:g}, so min={low:g} can never hold" if low > high else "lies outside [0, 1]"
            raise ValueError(f"open_fraction({self.args[0]}): min={low:g} {why}; use 0 <= min <= max <= 1")

    def param(self, key: str) -> float:
        return self.params.get(key, ATOM_SIGNATURES[self.op][1][key])

    def objects(self) -> set[str]:
        return set(self.args)

    def evaluate(self, state: SceneState) -> bool:
        from sim import helpers as h

        a = self.args
        match self.op:
            case "on":
                return h.is_on(state, a[0], a[1])
            case "stacked":
                return h.is_on(state, a[0], a[1], xy_margin=0.0) and h.is_upright(state, a[0], 20.0)
            case "inside":
                return h.is_inside(state, a[0], a[1])
            case "grasped":
                return h.is_grasped(state, a[0])
            case "lifted":
                return h.lift_height(state, a[0]) >= self.param("height")
            case "open_fraction":
                f = h.open_fraction(state, a[0])
                return self.param("min") <= f <= self.param("max")
            case "near":
                return h.distance(state, a[0], a[1]) <= self.param("dist")
            case "upright":
                return h.is_upright(state, a[0], self.param("tol_deg"))
        raise AssertionError(self.op)

    def __str__(self) -> str:
        params = "".join(f", {k}={v:g}" for k, v in sorted(self.params.items()))
        return f"{self.op}({', '.join(self.args)}{params})"


class And(_Node):
    op: Literal["and"] = "and"
    terms: list[Predicate] = Field(min_length=1, description="at least one term")

    def evaluate(self, state: SceneState) -> bool:
        return all(t.evaluate(state) for t in self.terms)

    def objects(self) -> set[str]:
        return set().union(*(t.objects() for t in self.terms))

    def __str__(self) -> str:
        return " & ".join(_paren(t) for t in self.terms)


class Or(_Node):
    op: Literal["or"] = "or"
    terms: list[Predicate] = Field(min_length=1, description="at least one term (an empty 'or' never holds)")

    def evaluate(self, state: SceneState) -> bool:
        return any(t.evaluate(state) for t in self.terms)

    def objects(self) -> set[str]:
        return set().union(*(t.objects() for t in self.terms))

    def __str__(self) -> str:
        return " | ".join(_paren(t) for t in self.terms)


class Not(_Node):
    op: Literal["not"] = "not"
    term: Predicate

    def evaluate(self, state: SceneState) -> bool:
        return not self.term.evaluate(state)

    def objects(self) -> set[str]:
        return self.term.objects()

    def __str__(self) -> str:
        return f"~{_paren(self.term)}"


def _paren(node: Predicate) -> str:
    return f"({node})" if node.op in ("and", "or") else str(node)


Predicate = Annotated[Union[Atom, And, Or, Not], Field(discriminator="op")]  # noqa: UP007
And.model_rebuild()
Or.model_rebuild()
Not.model_rebuild()


def atoms(node: Predicate) -> list[Atom]:
    """All atoms of a predicate, left to right."""
    if node.op == "not":
        return atoms(node.term)
    if node.op in ("and", "or"):
        return [a for t in node.terms for a in atoms(t)]
    return [node]


def terms(node: Predicate, state: SceneState) -> dict[str, bool]:
    """Truth value of every atom, keyed by its text (for evidence and reports)."""
    return {str(a): a.evaluate(state) for a in atoms(node)}


# --- constructors used by scene programs -----------------------------------------------------------


def _name(obj: Any) -> str:
    name = getattr(obj, "name", obj)
    if not isinstance(name, str):
        raise TypeError(f"expected an object handle or name, got {type(obj).__name__}")
    return name


def on(obj, support) -> Atom:
    """`obj` rests on top of `support` (an object name or 'table')."""
    return Atom(op="on", args=(_name(obj), _name(support)))


def inside(obj, container) -> Atom:
    """`obj`'s centre lies in `container`'s cavity (bowl, crate, open drawer...)."""
    return Atom(op="inside", args=(_name(obj), _name(container)))


def grasped(obj) -> Atom:
    """Both fingers touch `obj`."""
    return Atom(op="grasped", args=(_name(obj),))


def lifted(obj, height: float = 0.05) -> Atom:
    """`obj`'s bottom is at least `height` metres above where it started."""
    return Atom(op="lifted", args=(_name(obj),), params={"height": float(height)})


def open_fraction(obj, min: float = 0.0, max: float = 1.0) -> Atom:  # noqa: A002
    """The joint of articulated `obj` is opened to a fraction of its range within [min, max]."""
    return Atom(op="open_fraction", args=(_name(obj),), params={"min": float(min), "max": float(max)})


def near(a, b, dist: float = 0.10) -> Atom:
    """Centres of `a` and `b` are within `dist` metres."""
    return Atom(op="near", args=(_name(a), _name(b)), params={"dist": float(dist)})


def upright(obj, tol_deg: float = 20.0) -> Atom:
    """`obj`'s up axis is within `tol_deg` degrees of vertical."""
    return Atom(op="upright", args=(_name(obj),), params={"tol_deg": float(tol_deg)})


def stacked(top, bottom) -> Atom:
    """`top` rests on `bottom`, centred and upright."""
    return Atom(op="stacked", args=(_name(top), _name(bottom)))
