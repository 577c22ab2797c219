"""Phase-weighted planner demonstrations (`policy.phase_weight`) and their `coda bench round` arms."""

from __future__ import annotations

import numpy as np
import pytest

from policy.demos import WINDOWS
from policy.phase_weight import (
    failure_phase,
    phase_weighted_demos,
    span_windows,
    target_spans,
    weighted_copies,
)
from policy.rollout import Episode, planner_demos
from policy.train import demo_buffer
from sim.engine.perturb import PrematureClose
from sim.evidence import build_evidence
from sim.evidence.models import PhaseSpan
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
def scene():
    failed = _failed("pick_place", 2)
    demos = planner_demos([sample_spec("pick_place", 2)], record=True)
    assert len(demos) == 1 and demos[0].spec_hash == failed.spec_hash
    # recording the planner's trace changes nothing it does: the weighted arm clones the unweighted arm's demos
    plain = planner_demos([sample_spec("pick_place", 2)])[0]
    np.testing.assert_array_equal(plain.actions, demos[0].actions)
    return failed, demos[0]


def test_span_windows_mark_the_chunks_over_a_span():
    spans = [PhaseSpan(phase="grasp", start=10, end=12, goal="g")]
    keep = span_windows(spans, 20, chunk=4)
    assert keep.tolist() == [t in range(7, 13) for t in range(20)]  # windows [t, t+3] meeting 10..12
    assert not span_windows([], 20).any()


def test_diagnosed_rule_weights_the_failing_phase_of_the_demo(scene):
    failed, demo = scene
    goal, phase = failure_phase(build_evidence(failed.trace))
    timeline = build_evidence(demo.trace).timeline
    spans = target_spans(build_evidence(demo.trace), "diagnosed", (goal, phase))
    assert spans and all((s.goal, s.phase) == (goal, phase) for s in spans)
    assert len(spans) < len(timeline)  # one phase, not the whole demonstration
    out, stats = phase_weighted_demos([failed], [demo], "diagnosed", extra=2)
    assert len(out) == 3 and all(ep.trace is None for ep in out)
    assert WINDOWS not in out[0].meta
    keep = out[1].meta[WINDOWS]
    assert keep.tolist() == span_windows(spans, demo.steps).tolist() and 0 < keep.sum() < demo.steps
    assert stats == {"demos": 1, "weighted": 1, "weighted_windows": int(keep.sum()), "extra": 2,
                     "phases": {phase: 1}}
    # the buffer holds the whole demonstration once and the phase's windows twice more
    assert demo_buffer(out).size == demo.steps + 2 * int(keep.sum())


def test_random_rule_is_seeded_and_a_solved_scene_is_not_weighted(scene):
    failed, demo = scene
    a, _ = phase_weighted_demos([failed], [demo], "random", seed=3)
    b, _ = phase_weighted_demos([failed], [demo], "random", seed=3)
    assert a[1].meta[WINDOWS].tolist() == b[1].meta[WINDOWS].tolist()
    solved = Episode(failed.spec_hash, failed.family, [], np.zeros((0, 7), np.float32), True, 0)
    out, stats = phase_weighted_demos([solved], [demo], "diagnosed")
    assert len(out) == 1 and stats["weighted"] == 0
    assert len(weighted_copies(demo, [], extra=2)) == 1  # nothing to weight: the demonstration alone
    with pytest.raises(ValueError, match="unknown phase rule"):
        phase_weighted_demos([failed], [demo], "late")
    with pytest.raises(ValueError, match="recorded planner demonstrations"):
        phase_weighted_demos([failed], [out[0]], "diagnosed")


def test_bench_round_phase_arms_tiny(tiny_round):
    """The phase arms run at tiny sizes with the failed scenes' planner calls and report what they weighted."""
    from policy import bench_round

    result, raw, parser, args = tiny_round("dt_failed_phase_mix,dt_failed_randphase_mix", "--phase-extra", "3")
    seed = raw["per_seed"][0]
    assert raw["phase_extra"] == 3
    for arm in ("dt_failed_phase_mix", "dt_failed_randphase_mix"):
        assert result["arms"][arm]["planner_calls"] == seed["failed_scenes"]
        stats = seed["phase_weighting"][arm]
        assert stats["extra"] == 3 and stats["weighted"] <= stats["demos"] <= seed["failed_scenes"]
        assert sum(stats["phases"].values()) >= stats["weighted"]
    args.phase_extra = -1
    with pytest.raises(ValueError, match="--phase-extra must be >= 0"):
        bench_round.run(args)
    with pytest.raises(SystemExit):  # refused while parsing, before any work
        parser.parse_args(["--phase-extra", "-1"])
