"""A success predicate that can never hold is found without simulating (`sim.satisfy`), and nothing a state could
make true is refused."""

import pytest

from sim.predicates import And, Or, grasped, inside, lifted, near, on, open_fraction, stacked, upright
from sim.satisfy import BUDGET, _Search, contradiction, satisfiable

NEVER = {
    "an atom and its negation": (grasped("x") & ~grasped("x"), "grasped(x) & ~grasped(x)"),
    "higher lift without the lower": (lifted("x", 0.2) & ~lifted("x", 0.1), "lifted(x, height=0.2)"),
    "a tolerance of 180 degrees always holds": (~upright("x", tol_deg=180), "~upright(x, tol_deg=180)"),
    "tighter upright without the looser": (upright("x", 10) & ~upright("x", 30), "upright(x, tol_deg=10)"),
    "near is symmetric": (near("x", "y", 0.1) & ~near("y", "x", 0.2), "~near(y, x, dist=0.2)"),
    "disjoint openings": (open_fraction("d", 0.8, 1.0) & open_fraction("d", 0.0, 0.2), "open_fraction(d"),
    "openings outside two intervals that cover [0, 1]":
        (~open_fraction("d", 0.0, 0.5) & ~open_fraction("d", 0.4, 1.0), "~open_fraction(d"),
    "closed intervals that touch": (~open_fraction("d", 0.0, 0.5) & ~open_fraction("d", 0.5, 1.0), "~open_fraction"),
    "an opening outside [0, 1]": (~open_fraction("d"), "~open_fraction(d, max=1, min=0)"),
    "stacked is on": (stacked("x", "y") & ~on("x", "y"), "stacked(x, y) & ~on(x, y)"),
    "stacked is upright": (stacked("x", "y") & ~upright("x", 30), "~upright(x, tol_deg=30)"),
    "every way out closed": ((grasped("x") | on("x", "y")) & ~grasped("x") & ~on("x", "y"), "|"),
}

POSSIBLE = {
    "the pick_place goal": inside("x", "y") & ~grasped("x"),
    "the held-out near template": near("x", "y", 0.22) & ~grasped("x") & ~inside("x", "y") & upright("x"),
    "lower lift without the higher": lifted("x", 0.1) & ~lifted("x", 0.2),
    "looser upright without the tighter": ~upright("x", 10) & upright("x", 30),
    "far but not too far": ~near("x", "y", 0.1) & near("y", "x", 0.2),
    "an opening between two intervals": ~open_fraction("d", 0.0, 0.4) & ~open_fraction("d", 0.5, 1.0),
    "stacked, not within 10 degrees": stacked("x", "y") & ~upright("x", 10),
    "one way out open": (grasped("x") | on("x", "y")) & ~grasped("x"),
    "lifted objects of two names": lifted("x", 0.2) & ~lifted("y", 0.1),
}


@pytest.mark.parametrize("case", sorted(NEVER))
def test_a_contradiction_is_found_and_shown(case):
    pred, shown = NEVER[case]
    assert satisfiable(pred) is False
    assert shown in contradiction(pred)


@pytest.mark.parametrize("case", sorted(POSSIBLE))
def test_what_a_state_could_make_true_is_not_refused(case):
    assert satisfiable(POSSIBLE[case]) is True
    assert contradiction(POSSIBLE[case]) is None


def test_the_reason_is_the_conflicting_conjuncts_only():
    pred = on("a", "b") & inside("c", "b") & ~grasped("a") & lifted("c", 0.05) & grasped("a")
    assert contradiction(pred) == "~grasped(a) & grasped(a)"


def test_a_hard_predicate_is_unknown_within_the_budget_and_never_refused():
    """A predicate whose search outlasts the budget is not refused (`contradiction` answers None), and the search
    stops at the budget."""
    names = [f"o{i}" for i in range(10)]
    pool = [grasped(n) for n in names] + [lifted(n, 0.01 * (k + 1)) for n in names for k in range(3)]
    clauses = [Or(terms=[pool[(7 * i) % 40], ~pool[(11 * i + 3) % 40], pool[(13 * i + 5) % 40]])
               for i in range(21)]
    pred = And(terms=clauses)
    search = _Search(pred, 3)
    assert search.run() is None  # three steps decide nothing here
    assert contradiction(pred, budget=3) is None
    search = _Search(pred, BUDGET)
    search.run()
    assert search.budget >= -1  # a step past the budget ends the search


def test_tautologies_do_not_hide_a_contradiction():
    """Session 37 (red team): eleven `x | ~x` terms made the search branch over their atoms first and run out of
    budget, so a contradiction passed; they are folded away before the search."""
    core = grasped("m") & ~grasped("m")
    pad = And(terms=[Or(terms=[near(f"a{i}", "b", 0.1), ~near(f"a{i}", "b", 0.1)]) for i in range(11)])
    assert satisfiable(pad & core) is False
    assert contradiction(pad & core) == "grasped(m) & ~grasped(m)"


def test_on_the_table_excludes_a_lift_of_more_than_a_centimetre_and_a_half():
    assert satisfiable(on("x", "table") & lifted("x", 0.05)) is False
    assert satisfiable(on("x", "table") & lifted("x", 0.01)) is True
    assert satisfiable(on("x", "table") & lifted("y", 0.05)) is True


def test_what_the_scene_decides_is_used():
    """`never`: atoms no state of the scene makes true (inside an object with no cavity); `same`: atoms that are
    one there (on an articulated support is inside it)."""
    from sim.satisfy import atom_key

    cavityless = atom_key(inside("x", "block"))
    assert satisfiable(inside("x", "block"), never=frozenset({cavityless})) is False
    assert satisfiable(inside("x", "block") | grasped("x"), never=frozenset({cavityless})) is True
    same = ((atom_key(on("x", "drawer")), atom_key(inside("x", "drawer"))),)
    assert satisfiable(on("x", "drawer") & ~inside("x", "drawer"), same=same) is False
    assert satisfiable(on("x", "drawer") & inside("x", "drawer"), same=same) is True
