"""Scripted planners solve every family's seed scenes (a sample here; n = 50 per family in the slow test)."""

import pytest

from coda.commands.sim import demo_stats
from sim.env import CodaEnv
from sim.families import FAMILIES, sample_spec
from sim.planner import order_subgoals, run_planner


@pytest.mark.parametrize("family", list(FAMILIES))
def test_planner_solves_seed_scenes(family):
    stats = demo_stats(family, n=6, seed=100)
    assert stats["verify_pass_rate"] >= 0.8, stats
    assert stats["planner_success_rate"] >= 0.8, stats


def test_demo_is_a_valid_action_sequence():
    env = CodaEnv(sample_spec("pick_place", 1))
    demo = run_planner(env)
    acts = demo.action_array()
    assert demo.success and acts.shape == (demo.steps, 7) and len(demo.observations) == demo.steps
    assert abs(acts[:, :3]).max() <= 0.05 + 1e-6


def test_subgoal_order_builds_towers_bottom_up_and_opens_first():
    from sim.predicates import grasped, inside, open_fraction, stacked

    order = [str(a) for a in order_subgoals(stacked("a", "b") & stacked("b", "c") & ~grasped("a"))]
    assert order == ["stacked(b, c)", "stacked(a, b)"]
    order = [str(a) for a in order_subgoals(inside("x", "drawer") & open_fraction("drawer", min=0.6))]
    assert order == ["open_fraction(drawer, min=0.6)", "inside(x, drawer)"]


@pytest.mark.slow
@pytest.mark.parametrize("family", list(FAMILIES))
def test_planner_at_scale(family):
    stats = demo_stats(family, n=50, seed=0)
    assert stats["verify_pass_rate"] >= 0.9, stats
    assert stats["planner_success_rate"] >= 0.9, stats
