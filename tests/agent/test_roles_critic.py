"""Offline failure critic: ψ from evidence only, on planted difficulties whose true factor and phase are known."""

from __future__ import annotations

import argparse

import pytest

from agent import bench
from agent.roles.critic import CriticDiagnosis, OfflineCritic
from memory_store.schema import Diagnosis
from sim.engine.planted import attempt
from sim.evidence.timeline import build_evidence
from sim.families import sample_spec
from sim.trace import planner_trace


def planted(family: str, kind: str):
    for seed in range(40):
        item = attempt(family, seed, kind)
        if item is not None:
            return item
    raise AssertionError(f"no {kind} failure in 40 {family} scenes")


@pytest.mark.parametrize(
    ("family", "kind"),
    [
        ("pick_place", "heavy"),
        ("stack", "occluder"),
        ("pick_place", "misread"),
        ("prep", "transport_drop"),
        ("articulated", "stiff_joint"),
        ("articulated", "misread"),
        ("pick_place", "transport_block"),
    ],
)
def test_planted_difficulty_is_diagnosed(family, kind):
    item = planted(family, kind)
    d = OfflineCritic().diagnose(build_evidence(item.trace))
    assert (d.factor, d.phase) == (item.factor, item.phase), d.cause
    names = item.trace.spec.object_names()
    assert any(n in d.cause for n in names) and any(ch.isdigit() for ch in d.cause), d.cause


def test_rules_ignore_how_the_scene_was_made():
    item = planted("stack", "occluder")
    bare = item.trace
    bare.meta = {}
    bare.spec = bare.spec.model_copy(update={"meta": {}})
    assert OfflineCritic().diagnose(build_evidence(bare)) == OfflineCritic().diagnose(build_evidence(item.trace))


def test_successful_rollouts_are_refused():
    _, trace = planner_trace(sample_spec("pick_place", 0))
    with pytest.raises(ValueError, match="succeeded"):
        OfflineCritic().diagnose(build_evidence(trace))


def test_diagnosis_becomes_a_memory_record():
    item = planted("pick_place", "heavy")
    d = OfflineCritic().diagnose(build_evidence(item.trace))
    record = d.to_record(id="d1", scene_id="s1", rollout_ids=["r1"], keyframe_paths=["k.png"])
    assert isinstance(record, Diagnosis) and record.factor == "attribute" and record.phase == "lift"
    assert record.evidence.step_indices == d.evidence_steps and record.evidence.keyframe_paths == ["k.png"]
    with pytest.raises(ValueError):
        CriticDiagnosis(factor="luck", phase="lift", cause="the mug was heavy today")


def test_labelled_benchmark_small(hub):
    result = bench.evaluate(24, seed=3, hub=hub)
    assert result["n_failed_rollouts"] == 24
    assert result["factor_accuracy"] >= 0.8 and result["phase_accuracy"] >= 0.7, result["errors"]
    assert sum(result["confusion"].values()) == 24


def test_bench_entry_point_reports_figures():
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    out = bench.run(parser.parse_args(["--n", "4", "--families", "pick_place"]))
    assert out["backend"] == "offline" and out["n_failed_rollouts"] == 4
    assert {"factor_accuracy", "phase_accuracy", "confusion", "per_kind", "errors"} <= set(out)


@pytest.mark.slow
def test_labelled_benchmark_200(hub):
    result = bench.evaluate(200, seed=0, hub=hub)
    assert result["n_failed_rollouts"] >= 200
    assert result["factor_accuracy"] >= 0.8 and result["phase_accuracy"] >= 0.7
