"""Whether a success predicate can ever hold, decided from its atoms' meanings without simulating.

A predicate is satisfiable when some truth assignment of its distinct atoms makes it true *and* could be the
state of one scene. Besides plain logic (`grasped(x) & ~grasped(x)`), the atoms that measure one quantity
against a threshold constrain each other, exactly as `Atom.evaluate` measures them:

- `lifted(x, h)`: lift height v ≥ h;  `upright(x, t)`: cos(tilt) ≥ cos(t), cos(tilt) ∈ [-1, 1];
  `near(a, b, d)`: distance ≤ d (the same distance as `near(b, a, d)`), distance ≥ 0 — so `lifted(x, 0.2) &
  ~lifted(x, 0.1)` or `~upright(x, tol_deg=180)` can never hold;
- `open_fraction(x, min, max)`: the opening f ∈ [0, 1] lies in [min, max] — `open_fraction(x, 0.8, 1) &
  open_fraction(x, 0, 0.2)` and `~open_fraction(x, 0, 0.5) & ~open_fraction(x, 0.4, 1)` never hold;
- `stacked(a, b)` implies `on(a, b)` and `upright(a, 20)` (it is `on` with no overhang, upright);
- `on(x, table)` (its bottom below 1 cm) excludes `lifted(x, h)` for h ≥ 1.5 cm (lifted from where it started,
  which is on or above the table).

What depends on the scene's objects is given by the caller (`sim.verify`): atoms that can never hold there
(`inside(x, y)` when y has no cavity) and pairs of atoms that are the same there (`on(x, drawer)` is
`inside(x, drawer)` for an articulated support).

The search is DPLL on the predicate's tree: literals the top-level conjuncts leave no choice about are forced, the
other atoms tried both ways (most frequent first), and those constraints checked on every partial assignment. A
predicate has at most 64 atoms; past `BUDGET` steps the answer is "unknown", which callers treat as satisfiable
(nothing is refused on a guess; the planner, when asked, still fails such a scene).
"""

from __future__ import annotations

import math
from collections import Counter

from sim.predicates import ATOM_SIGNATURES, And, Atom, Predicate

BUDGET = 5_000
"""search steps (partial assignments tried, ≈ 0.1 ms each) before the answer is unknown"""

Key = tuple
_THRESHOLD = {"lifted", "upright", "near"}


def atom_key(atom: Atom) -> Key:
    """The atom's identity: op, objects (sorted for the symmetric `near`) and every parameter with its default."""
    args = tuple(sorted(atom.args)) if atom.op == "near" else atom.args
    params = tuple(sorted((k, float(atom.param(k))) for k in ATOM_SIGNATURES[atom.op][1]))
    return (atom.op, args, params)


def _threshold_bound(op: str, p: dict) -> tuple[float, float, float]:
    """(c, dom_lo, dom_hi) with the atom true iff v >= c, v the quantity in [dom_lo, dom_hi]."""
    if op == "lifted":
        return p["height"], -math.inf, math.inf
    if op == "upright":
        return math.cos(math.radians(p["tol_deg"])), -1.0, 1.0
    return -p["dist"], -math.inf, 0.0  # near: v = -distance


def _covered(lo: float, hi: float, intervals: list[tuple[float, float]]) -> bool:
    """Whether the closed intervals cover all of [lo, hi] (lo <= hi)."""
    reach = None  # [lo, reach] is covered
    for a, b in sorted(intervals):
        if reach is None:
            if a > lo:
                return False  # lo itself is not covered
            if b < lo:
                continue
            reach = b
        elif a > reach:
            return False  # (reach, min(a, hi)) is not covered, and reach < hi
        else:
            reach = max(reach, b)
        if reach >= hi:
            return True
    return False


LIFT_OFF_TABLE = 0.015
"""lifted(x, h) with h at least this cannot hold with on(x, table) (bottom < 0.01 m, started at or above 0)"""


def _quantities_ok(given: dict[Key, bool], same: tuple[tuple[Key, Key], ...] = ()) -> bool:
    """Whether the assigned atoms could all be true / false in one state (the constraints in the module doc)."""
    for a, b in same:
        if a in given and b in given and given[a] is not given[b]:
            return False
    on_table = {args[0] for (op, args, _), v in given.items() if op == "on" and args[1] == "table" and v}
    if any(op == "lifted" and v and args[0] in on_table and dict(params)["height"] >= LIFT_OFF_TABLE
           for (op, args, params), v in given.items()):
        return False
    facts = dict(given)
    for (op, args, _), value in given.items():
        if op == "stacked" and value:  # stacked(a, b) => on(a, b) & upright(a, 20)
            for implied in (("on", args, ()), ("upright", args[:1], (("tol_deg", 20.0),))):
                if facts.setdefault(implied, True) is False:
                    return False
    groups: dict[tuple, list[tuple[dict, bool]]] = {}
    for (op, args, params), value in facts.items():
        if op in _THRESHOLD or op == "open_fraction":
            groups.setdefault((op, args), []).append((dict(params), value))
    for (op, _), items in groups.items():
        if op == "open_fraction":
            lo = max([0.0] + [p["min"] for p, v in items if v])
            hi = min([1.0] + [p["max"] for p, v in items if v])
            if lo > hi or _covered(lo, hi, [(p["min"], p["max"]) for p, v in items if not v]):
                return False
            continue
        bounds = [(*_threshold_bound(op, p), v) for p, v in items]
        low = max([b[1] for b in bounds] + [c for c, _, _, v in bounds if v])
        high = min([c for c, _, _, v in bounds if not v], default=math.inf)
        if not (low < high and low <= bounds[0][2]):
            return False
    return True


def _nnf(node: Predicate, index: dict[Key, int], negate: bool = False) -> tuple:
    """The predicate in negation normal form over atom indices: ("lit", i, truth), ("and", parts), ("or", parts)."""
    if node.op == "not":
        return _nnf(node.term, index, not negate)
    if node.op in ("and", "or"):
        op = {"and": "or", "or": "and"}[node.op] if negate else node.op
        return (op, tuple(_nnf(t, index, negate) for t in node.terms))
    return ("lit", index.setdefault(atom_key(node), len(index)), not negate)


def _simplify(node: tuple) -> tuple:
    """Constant-fold the NNF tree: a disjunction holding a literal and its negation is ("const", True), a
    conjunction holding both ("const", False), and constants are absorbed. Tautologies must not steer the search
    (padding a contradiction with `x | ~x` terms would otherwise spend the budget on their atoms)."""
    if node[0] in ("lit", "const"):
        return node
    is_or = node[0] == "or"
    parts, lits = [], set()
    for part in map(_simplify, node[1]):
        if part[0] == "const":
            if part[1] is is_or:
                return ("const", is_or)
            continue
        if part[0] == "lit":
            if (part[1], not part[2]) in lits:
                return ("const", is_or)
            lits.add((part[1], part[2]))
        parts.append(part)
    if not parts:
        return ("const", not is_or)
    return parts[0] if len(parts) == 1 else (node[0], tuple(parts))


def _literals(node: tuple) -> list[int]:
    if node[0] == "lit":
        return [node[1]]
    return [] if node[0] == "const" else [i for part in node[1] for i in _literals(part)]


def _eval(node: tuple, given: list) -> bool | None:
    if node[0] == "const":
        return node[1]
    if node[0] == "lit":
        v = given[node[1]]
        return None if v is None else v is node[2]
    stop = node[0] == "or"
    unknown = False
    for part in node[1]:
        v = _eval(part, given)
        if v is stop:
            return stop
        unknown = unknown or v is None
    return None if unknown else not stop


class _Search:
    """Backtracking over atom truth values with unit propagation on the top-level conjuncts (DPLL on a tree)."""

    def __init__(self, pred: Predicate, budget: int, never: frozenset[Key] = frozenset(),
                 same: tuple[tuple[Key, Key], ...] = ()):
        self.never, self.same = never, same
        self.index: dict[Key, int] = {}
        root = _simplify(_nnf(pred, self.index))
        self.conjuncts = root[1] if root[0] == "and" else (root,)
        self.keys = list(self.index)
        counts = Counter(_literals(root))  # the atoms that still matter, most frequent first
        self.order = [i for i, _ in counts.most_common()]
        self.budget = budget

    def _propagate(self, given: list) -> bool | None:
        """Force the literals the conjuncts leave no choice about; False on a conflict, True when every conjunct
        holds, None when some are open."""
        changed = True
        while changed:
            changed, open_ = False, False
            for c in self.conjuncts:
                v = _eval(c, given)
                if v is False:
                    return False
                if v is True:
                    continue
                open_ = True
                unit = c if c[0] == "lit" else _unit(c, given)
                if unit is not None:
                    given[unit[1]] = unit[2]
                    changed = True
            if not changed:
                return None if open_ else True
        return None

    def run(self, given: list | None = None) -> bool | None:
        self.budget -= 1
        if self.budget < 0:
            return None
        given = [False if k in self.never else None for k in self.keys] if given is None else list(given)
        value = self._propagate(given)
        if value is False or not _quantities_ok({self.keys[i]: v for i, v in enumerate(given) if v is not None},
                                                self.same):
            return False
        if value is True:
            return True
        var = next(i for i in self.order if given[i] is None)  # an open value has an unset atom
        unknown = False
        for choice in (True, False):
            given[var] = choice
            got = self.run(given)
            if got:
                return True
            unknown = unknown or got is None
        return None if unknown else False


def _unit(clause: tuple, given: list) -> tuple | None:
    """The one literal an `or` of literals still needs (the others false), else None."""
    if clause[0] != "or":
        return None
    left = None
    for part in clause[1]:
        if part[0] != "lit":
            return None
        v = given[part[1]]
        if v is None:
            if left is not None:
                return None
            left = part
        elif v is part[2]:
            return None
    return left


def satisfiable(pred: Predicate, budget: int = BUDGET, never: frozenset[Key] = frozenset(),
                same: tuple[tuple[Key, Key], ...] = ()) -> bool | None:
    """True when some state of a scene could make `pred` hold, False when none can, None when the search ran
    out of `budget` steps. `never`: atom keys that cannot hold in the scene; `same`: pairs of atom keys that are
    the same atom there."""
    return _Search(pred, budget, never, same).run()


def contradiction(pred: Predicate, budget: int = BUDGET, never: frozenset[Key] = frozenset(),
                  same: tuple[tuple[Key, Key], ...] = ()) -> str | None:
    """Why `pred` can never hold (None when it can, or when that is not decided within `budget` search steps): a
    small set of its top-level conjuncts that already cannot hold together, in the predicate's syntax (the
    steps left after the decision shrink the set). `never` and `same` as in `satisfiable`."""
    search = _Search(pred, budget, never, same)
    if search.run() is not False:
        return None
    core = list(pred.terms) if pred.op == "and" else [pred]
    for term in list(core):
        if len(core) == 1 or search.budget <= 0:
            break
        rest = [t for t in core if t is not term]
        shrink = _Search(_conj(rest), search.budget, never, same)
        if shrink.run() is False:
            core = rest
        search.budget = shrink.budget
    return " & ".join(_shown(t) for t in core)


def _conj(terms: list[Predicate]) -> Predicate:
    return terms[0] if len(terms) == 1 else And(terms=terms)


def _shown(node: Predicate) -> str:
    text = str(node)
    return f"({text})" if node.op in ("and", "or") else text
