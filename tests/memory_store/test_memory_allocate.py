"""Allocation golden tests: scores and counts checked against hand computation."""

import math

import numpy as np
import pytest

from memory_store.allocate import (
    allocate,
    largest_remainder,
    mode_score,
    split_budget,
    update_band,
)
from memory_store.schema import GenerationProgram, Mode

UNIT = [1.0] + [0.0] * 383


def mode(id, hardness=None, importance=0.0, visits=0, status="candidate", in_band=True):
    return Mode(
        id=id,
        factor="spatial",
        phase="grasp",
        centroid=UNIT,
        description=id,
        hardness=hardness,
        importance=importance,
        visits=visits,
        status=status,
        in_band=in_band,
    )


def hand_made_modes():
    return [
        mode("A", hardness=0.3, importance=0.2, visits=2),
        mode("B", hardness=0.6, importance=0.0, visits=0),
        mode("C", hardness=0.8, importance=-0.1, visits=6),
        mode("D", hardness=0.4, importance=0.5, visits=3, status="refuted"),  # never allocated
        mode("E", hardness=0.95, visits=4),  # mastered: replay
        mode("F", hardness=0.97, visits=1),  # mastered: replay
        mode("G", hardness=0.02, visits=3, status="validated"),  # too hard for now: replay
        mode("H", hardness=0.99, visits=9),  # mastered: replay
        mode("I", hardness=0.99, visits=0),  # never visited: neither targeted nor replay
    ]


def test_budget_split_is_exact_on_64():
    assert split_budget(64) == (10, 6, 48)  # 9.6 → 10, 6.4 → 6
    assert split_budget(10) == (2, 1, 7)  # 1.5 rounds half up to 2 (banker's rounding would give 2 too)
    assert split_budget(5) == (1, 1, 3)  # 0.75 → 1, 0.5 → 1 (half up; round() would give 0)
    assert split_budget(0) == (0, 0, 0)
    with pytest.raises(ValueError):
        split_budget(10, 0.8, 0.5)


def test_scores_match_hand_computation():
    modes = {m.id: m for m in hand_made_modes()}
    n_total = 2 + 0 + 6  # visits of the eligible modes A, B, C
    # score = w + (1 - p̂) + 0.5 * sqrt(ln(1 + N) / (1 + n))
    assert mode_score(modes["A"], n_total) == pytest.approx(0.2 + 0.7 + 0.5 * math.sqrt(math.log(9) / 3))
    assert mode_score(modes["A"], n_total) == pytest.approx(1.327904, abs=1e-6)
    assert mode_score(modes["B"], n_total) == pytest.approx(1.141152, abs=1e-6)
    assert mode_score(modes["C"], n_total) == pytest.approx(0.380129, abs=1e-6)
    assert mode_score(mode("Z", hardness=1.0, importance=-0.9), 0) == 0.0  # floored at zero
    assert mode_score(mode("U"), 0) == pytest.approx(0.5)  # unmeasured hardness counts as 0.5


def test_allocation_counts_match_hand_computation():
    alloc = allocate(hand_made_modes(), 64)
    assert (alloc.novel, alloc.replay, alloc.targeted) == (10, 6, 48)
    # quotas 48·s/Σs = 22.371, 19.225, 6.404 → floors 22, 19, 6; the spare unit goes to C (.404 > .371 > .225)
    assert alloc.per_mode == {"A": 22, "B": 19, "C": 7}
    assert set(alloc.scores) == {"A", "B", "C"}
    # replay: 6 units over F, G, E, H (least visited first): 2, 2, 1, 1
    assert alloc.replay_per_mode == {"F": 2, "G": 2, "E": 1, "H": 1}
    assert alloc.novel + sum(alloc.per_mode.values()) + sum(alloc.replay_per_mode.values()) == 64


def test_largest_remainder_ties_go_to_smaller_ids():
    assert largest_remainder(5, {"b": 1.0, "a": 1.0}) == {"a": 3, "b": 2}
    assert largest_remainder(7, {"x": 1.0, "y": 1.0, "z": 1.0}) == {"x": 3, "y": 2, "z": 2}
    assert largest_remainder(4, {"a": 0.0, "b": 0.0}) == {"a": 2, "b": 2}  # all-zero: even split
    assert largest_remainder(3, {}) == {}


def test_budget_without_receivers_goes_to_novel():
    alloc = allocate([mode("R", status="refuted")], 64)
    assert (alloc.novel, alloc.replay, alloc.targeted, alloc.per_mode) == (64, 0, 0, {})
    alloc = allocate([mode("A", hardness=0.5)], 64)  # nothing to replay yet
    assert (alloc.novel, alloc.replay, alloc.per_mode) == (16, 0, {"A": 48})


def test_band_uses_measured_hardness_else_the_flag():
    alloc = allocate([mode("M", hardness=0.5, in_band=False), mode("U", in_band=False)], 20)
    assert set(alloc.per_mode) == {"M"}


def test_replay_order_with_rng_is_seeded():
    a = allocate(hand_made_modes(), 64, rng=np.random.default_rng(1)).replay_per_mode
    b = allocate(hand_made_modes(), 64, rng=np.random.default_rng(1)).replay_per_mode
    assert a == b and sum(a.values()) == 6 and set(a) == {"E", "F", "G", "H"}


def test_band_entry_and_exit():
    m = mode("M", in_band=False)
    assert update_band(m, 0.5, round_=1) and m.in_band  # enters
    assert not update_band(m, 0.9) and m.in_band  # boundary is inside
    assert update_band(m, 0.95, round_=2) and not m.in_band  # leaves
    assert not update_band(m, 0.05) and not m.in_band  # stays out
    assert update_band(m, 0.1) and m.in_band
    assert [e.event for e in m.history] == ["band_enter", "band_exit", "band_enter"]
    prog = GenerationProgram(id="g", mode_id="M", factor="layout")
    assert update_band(prog, 0.97) and not prog.in_pool and prog.success_on_variants == 0.97
    assert update_band(prog, 0.3, band=(0.2, 0.8)) and prog.in_pool


def test_even_allocation_splits_the_targeted_units_over_the_given_modes():
    from memory_store.allocate import allocate_evenly

    plan = allocate_evenly(["b", "a", "c", "a"], 24)
    assert (plan.novel, plan.replay, plan.targeted) == (4, 0, 20)  # 3.6 -> 4
    assert plan.per_mode == {"a": 7, "b": 7, "c": 6}  # leftovers to the first modes in id order
    assert allocate_evenly(["a", "b", "c"], 4).per_mode == {"a": 1, "b": 1, "c": 1}
    assert allocate_evenly(["a", "b", "c", "d"], 2).per_mode == {"a": 1, "b": 1}  # modes without a unit left out
    assert allocate_evenly([], 9).to_dict()["novel"] == 9
    assert allocate_evenly(["a"], 30).novel == split_budget(30, eps_replay=0.0)[0] == 5  # 4.5 rounds half up
    for budget in range(0, 200):  # the novel share is allocate()'s (with no replay)
        assert allocate_evenly(["a", "b"], budget).novel == split_budget(budget, eps_replay=0.0)[0]
