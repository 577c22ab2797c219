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


# --- attribution by intervention (issue 19) -----------------------------------------------------------------------
from agent.roles.critic import Intervention  # noqa: E402


@pytest.mark.parametrize(("variants", "original", "factor"), [
    ({"task": [False, False], "layout": [False, False], "attributes": [True, False]}, False, "attribute"),
    ({"task": [True, True], "layout": [False, True], "attributes": [False, False]}, False, "task"),
    ({"task": [False], "layout": [True], "attributes": [False, False]}, False, "spatial"),
    ({"task": [False, False], "layout": [False, False], "attributes": [False, False]}, False, None),  # none helps
    ({"task": [True, False], "layout": [False, False], "attributes": [True, False]}, False, None),  # a tie
    ({"task": [False], "layout": [False], "attributes": [True]}, True, None),  # fails only when sampled
    ({"attributes": [True, True]}, False, None),  # one factor tested: nothing to contrast it with
    ({}, False, None),
])
def test_intervention_attributes_to_the_factor_whose_change_alone_helps(variants, original, factor):
    assert Intervention(original_success=original, variants=variants).attributed() == factor


@pytest.mark.parametrize(("variants", "absent", "factor"), [
    ({"task": [False, False], "layout": [True]}, ["attributes"], "spatial"),  # nothing to undo in the attributes
    ({"task": [True, False]}, ["layout", "attributes"], "task"),  # the only factor with a suspect
    ({"task": [False, False]}, ["layout", "attributes"], None),  # nothing to take away helped
    ({"task": [True], "attributes": [True]}, ["layout"], None),  # a tie stays unattributed
])
def test_a_factor_with_nothing_to_take_away_cannot_be_the_cause(variants, absent, factor):
    inter = Intervention(original_success=False, variants=variants, absent=absent)
    assert inter.attributed() == factor
    assert all(inter.rates()[f] == 0.0 for f in absent)
    assert "nothing to take away in the " + " or ".join(absent) in inter.summary()


@pytest.mark.parametrize(("family", "kind"), [("pick_place", "heavy"), ("stack", "occluder")])
def test_the_intervention_decides_the_factor_and_the_evidence_the_phase(family, kind):
    """The factor comes from the intervention even where the evidence rules would say otherwise; the phase is the
    attributed factor's rule where it applies, else where the execution rule sees the failure."""
    item = planted(family, kind)
    ev = build_evidence(item.trace)
    rules = OfflineCritic().diagnose(ev)
    none_helps = Intervention(original_success=False, variants={"task": [False], "layout": [False],
                                                                "attributes": [False]})
    d = OfflineCritic().diagnose(ev, none_helps)
    assert d.factor == "execution" and "did not help" in d.cause
    same = {"attribute": "attributes", "spatial": "layout"}[rules.factor]
    agree = Intervention(original_success=False, variants={f: [f == same] for f in ("task", "layout", "attributes")})
    d = OfflineCritic().diagnose(ev, agree)
    assert (d.factor, d.phase) == (rules.factor, rules.phase) and "turned it into success" in d.cause
    other = "task" if same != "task" else "layout"
    disagree = Intervention(original_success=False, variants={f: [f == other] for f in ("task", "layout",
                                                                                         "attributes")})
    d = OfflineCritic().diagnose(ev, disagree)
    assert d.factor == {"task": "task", "layout": "spatial"}[other] and d.phase in ("approach", "grasp", "lift",
                                                                                     "transport", "place", "release",
                                                                                     "open", "close", "other")
    assert "counterfactual rollouts" in d.state_facts[-1]
