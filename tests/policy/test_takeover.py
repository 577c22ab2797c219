"""Planner takeover windows (`policy.takeover`) and the takeover arms of `coda bench round`."""

from __future__ import annotations

import numpy as np
import pytest

from policy.rollout import Episode
from policy.takeover import diagnosed_step, takeover_demos, takeover_episode, takeover_step
from policy.train import demo_buffer
from sim.constants import CHUNK, OBS_OBJECTS, OBS_PROPRIO
from sim.engine.perturb import PrematureClose
from sim.families import sample_spec
from sim.trace import planner_trace


def _failed(family: str, seed: int) -> Episode:
    """A failed episode with its trace: the planner with a planted premature close (fires at steps 4-5)."""
    spec = sample_spec(family, seed)
    demo, trace = planner_trace(spec, PrematureClose(spec, np.random.default_rng(0)))
    assert not trace.success
    return Episode(spec.spec_hash(), family, [*demo.observations], trace.actions, False, trace.steps, seed=seed,
                   trace=trace)


@pytest.fixture(scope="module")
def failed() -> list[Episode]:
    return [_failed("pick_place", 2), _failed("stack", 1)]


def test_takeover_steps(failed):
    trace = failed[0].trace
    t = diagnosed_step(trace)
    assert 4 <= t < trace.steps  # the missed grasp shows after the fault, not at the start
    assert takeover_step(trace, "diagnosed") == t
    assert takeover_step(trace, "diagnosed", align=CHUNK) == t - t % CHUNK
    drawn = [takeover_step(trace, "random", np.random.default_rng(s)) for s in range(20)]
    assert all(0 <= d < trace.steps for d in drawn) and len(set(drawn)) > 3
    with pytest.raises(ValueError, match="unknown takeover rule"):
        takeover_step(trace, "late")


def test_takeover_window_starts_at_the_restored_state(failed):
    ep = failed[0]
    t = diagnosed_step(ep.trace)
    window = takeover_episode(ep.trace, t)
    here = ep.trace.env_at(t).observe()
    for key in (OBS_OBJECTS, OBS_PROPRIO):
        np.testing.assert_array_equal(window.observations[0][key], here[key])
    assert window.success and window.meta["takeover_step"] == t and window.meta["exact"]
    assert len(window.observations) == window.steps + 1 == len(window.actions) + 1
    assert window.spec_hash == ep.spec_hash and window.family == ep.family


def test_takeover_demos_one_call_per_failed_scene(failed):
    solved_ep = Episode(failed[1].spec_hash, "stack", [], np.zeros((0, 7), np.float32), True, 0)
    demos, stats = takeover_demos([*failed, failed[0]], "diagnosed")
    assert stats["planner_calls"] == 2 and stats["certified"] == len(demos) == 2
    assert stats["window_steps"] == [d.steps for d in demos]
    only, stats = takeover_demos([*failed, solved_ep], "random", solved={failed[1].spec_hash}, seed=3)
    assert stats["planner_calls"] == 1 and [d.spec_hash for d in only] == [failed[0].spec_hash][: len(only)]
    again, stats2 = takeover_demos(failed[:1], "random", seed=3)
    assert stats2["takeover_steps"] == stats["takeover_steps"]  # seeded
    buf = demo_buffer(demos)
    assert len(buf) == sum(d.steps for d in demos)
    no_trace = Episode(failed[0].spec_hash, "pick_place", [], failed[0].actions, False, failed[0].steps)
    with pytest.raises(ValueError, match="record=True"):
        takeover_demos([no_trace], "diagnosed")


def test_bench_round_takeover_arms_tiny(tiny_round):
    """The takeover arms run at tiny sizes with as many planner calls as `dt_failed_mix` (the failed scenes)."""
    result, raw, _, _ = tiny_round("dt_failed_mix,takeover_diag_mix,takeover_random_mix")
    seed = raw["per_seed"][0]
    calls = {arm: result["arms"][arm]["planner_calls"] for arm in result["arms"]}
    assert calls == dict.fromkeys(("dt_failed_mix", "takeover_diag_mix", "takeover_random_mix"), seed["failed_scenes"])
    for arm in ("takeover_diag_mix", "takeover_random_mix"):
        stats = seed["takeover"][arm]
        assert stats["planner_calls"] == seed["failed_scenes"] and stats["certified"] <= stats["planner_calls"]
        assert len(stats["takeover_steps"]) == stats["planner_calls"]
