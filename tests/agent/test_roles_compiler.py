"""Offline Text2potential compiler: programs from a diagnosis pass every check on all four families."""

from __future__ import annotations

import pytest
from local_checks import local_checker

from agent.roles import compiler as C
from agent.roles.compiler import CompileError, CompileRequest, OfflineCompiler, learning_tool_for
from agent.roles.critic import CriticDiagnosis, OfflineCritic
from memory_store.schema import TrainingProgram
from sim.engine.planted import attempt
from sim.evidence.timeline import build_evidence
from sim.potential_schema import PotentialReport
from sim.trace import planner_trace


def request(diagnosis, spec, rollout, demo) -> CompileRequest:
    """A request checked on a failed rollout and a demonstration held here (a run checks through the verifier)."""
    return CompileRequest(diagnosis, spec, local_checker(spec, [rollout], [demo]), has_demo=True)


FAULT = {"pick_place": "lift_drop", "stack": "transport_drop", "prep": "place_offset", "articulated": "handle_release"}


def failed_and_demo(family: str):
    """A failed rollout with an execution fault (the scene itself is unchanged) and the planner's demo."""
    for seed in range(40):
        item = attempt(family, seed, FAULT[family])
        if item is not None:
            demo, trace = planner_trace(item.trace.spec)
            if trace.success:
                return item, trace
    raise AssertionError(f"no {FAULT[family]} failure with a demo in 40 {family} scenes")


@pytest.mark.parametrize("family", ["pick_place", "stack", "articulated", "prep"])
def test_offline_programs_pass_all_checks(family, hub):
    item, demo = failed_and_demo(family)
    diagnosis = OfflineCritic().diagnose(build_evidence(item.trace))
    out = OfflineCompiler(hub).compile(request(diagnosis, item.trace.spec, item.trace, demo))
    r = out.report
    assert r.ok and not r.errors and out.attempts >= 1
    assert r.rank_correlation[0] >= 0.5 and r.ms_per_state < 1.0 and r.states_checked > item.trace.steps
    assert out.learning_tool == "awr_shaped" and len(out.subgoals) >= 1 and out.phase == diagnosis.phase
    record = out.to_record(id="t1", mode_id="m1")
    assert isinstance(record, TrainingProgram) and record.potential_code == out.source
    assert len(record.completion_predicates) == len(out.subgoals)


@pytest.mark.parametrize(
    ("phase", "cause_obj", "refined"),
    [("approach", True, "hover above"), ("transport", True, "raise the"), ("lift", False, None)],
)
def test_phase_and_cause_shape_the_decomposition(phase, cause_obj, refined, hub):
    item, demo = failed_and_demo("pick_place")
    spec = item.trace.spec
    others = [o.name for o in spec.task.objects if o.role == "distractor"]
    named = others[0] if others and cause_obj else spec.task.with_role("target")[0].name
    d = CriticDiagnosis(factor="spatial", phase=phase, cause=f"the gripper hit the {named} on the way, 1.0 cm away")
    out = OfflineCompiler(hub).compile(request(d, spec, item.trace, demo))
    assert out.report.ok
    if refined and others:
        assert out.attempts == 1 and any(s.startswith(refined) for s in out.subgoals), out.subgoals


def test_failed_checks_fall_back_to_simpler_templates(monkeypatch, hub):
    item, demo = failed_and_demo("stack")
    real = C.sim_call

    def broken_first(h, server, tool, **kw):
        src = real(h, server, tool, **kw)
        return src.replace("return clip01(", "return 2.0 + clip01(", 1) if kw["level"] == 2 else src

    monkeypatch.setattr(C, "sim_call", broken_first)
    d = OfflineCritic().diagnose(build_evidence(item.trace))
    out = OfflineCompiler(hub).compile(request(d, item.trace.spec, item.trace, demo))
    assert out.report.ok and out.attempts == 2
    assert "potentials must lie in [0, 1]" in out.attempt_errors[0][0]

    monkeypatch.setattr(C, "sim_call", lambda h, server, tool, **kw: "SUBGOALS = []\n")
    with pytest.raises(CompileError, match="3 attempts") as info:
        OfflineCompiler(hub).compile(request(d, item.trace.spec, item.trace, demo))
    assert len(info.value.errors) == 3


def test_programs_are_checked_by_the_requests_checker(hub):
    """The checker is the compiler's only check (in a run, the verifier server's check_potential): what it reports
    is what the compiler acts on."""
    item, demo = failed_and_demo("pick_place")
    d = OfflineCritic().diagnose(build_evidence(item.trace))
    seen: list[str] = []

    def refuse(source: str) -> PotentialReport:
        seen.append(source)
        return PotentialReport(ok=False, errors=[f"refused {len(seen)}"])

    with pytest.raises(CompileError, match="refused 3") as info:
        OfflineCompiler(hub).compile(CompileRequest(d, item.trace.spec, refuse, has_demo=True))
    assert info.value.errors == [["refused 1"], ["refused 2"], ["refused 3"]] and len(set(seen)) == 3
    with pytest.raises(ValueError, match="successful demonstration"):
        local_checker(item.trace.spec, [item.trace], [item.trace])


@pytest.mark.parametrize(
    ("factor", "rate", "demo", "tool"),
    [("task", None, True, "bc"), ("spatial", None, True, "awr_shaped"), ("spatial", 0.02, True, "bc"),
     ("spatial", 0.02, False, "return_to_engine"), ("attribute", 0.5, True, "awr_shaped"),
     ("execution", 0.95, True, "reevaluate")],
)
def test_learning_tool_routing(factor, rate, demo, tool):
    assert learning_tool_for(factor, rate, demo) == tool


def test_a_potential_is_bound_by_role_to_another_scene_of_its_mode(hub):
    """A potential compiled on one scene names its objects; bound by role to another scene of the same family (other
    objects, the same roles), it names that scene's objects and runs there without errors; a scene lacking an
    object of a named role gets none."""
    item, demo = failed_and_demo("pick_place")
    spec = item.trace.spec
    diagnosis = OfflineCritic().diagnose(build_evidence(item.trace))
    source = OfflineCompiler(hub).compile(request(diagnosis, spec, item.trace, demo)).source
    names = {o.name for o in spec.task.objects}
    for seed in range(1, 60):
        other = attempt("pick_place", seed, FAULT["pick_place"])
        if other is None or {o.name for o in other.trace.spec.task.objects} & names:
            continue
        other_demo, trace = planner_trace(other.trace.spec)
        if trace.success:
            break
    else:
        raise AssertionError("no pick_place scene with other object names")
    target = other.trace.spec
    bound = C.rebind_potential(source, spec, target)
    assert bound is not None and bound != source
    for o in spec.task.objects:
        assert repr(o.name) not in bound or o.name in {t.name for t in target.task.objects}
    held = next(o for o in target.task.objects if o.role == "target").name
    assert repr(held) in bound
    report = C.run_checks(bound, request(diagnosis, target, other.trace, trace))
    assert not report.errors, report.errors
    assert C.run_checks(source, request(diagnosis, target, other.trace, trace)).errors  # unbound: unknown objects
    lacking = target.model_copy(update={"task": target.task.model_copy(update={"objects": tuple(
        o for o in target.task.objects if o.role != "receptacle")})})
    assert C.rebind_potential(source, spec, lacking) is None
