"""LLM backends of the three roles, with the real anthropic and openai clients against a local scripted server:
a good answer, a malformed answer repaired on retry, an answer that never validates, and tokens per role."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from local_checks import local_checker
from scripted_llm_server import ScriptedLLMServer, reply

from agent.llm import LLMOutputError, TokenLedger
from agent.roles import CompileRequest, WriteRequest, make_roles
from sim.engine.planted import attempt
from sim.engine.potential_templates import write_program
from sim.evidence.timeline import build_evidence
from sim.planner import order_subgoals
from sim.trace import planner_trace

PROVIDERS = ["anthropic", "openai"]
EXAMPLE = (Path(__file__).resolve().parents[2] / "examples" / "scenes" / "pick_place.py").read_text()
CLASHING = EXAMPLE.replace('place(bowl, on="table", near=mug, gap=0.08)', 'place(bowl, on="table", xy=(0.45, -0.10))')


def roles_for(provider: str, server: ScriptedLLMServer, ledger: TokenLedger, hub=None, **kw):
    url = server.url if provider == "anthropic" else server.openai_url
    roles = make_roles(provider, base_url=url, api_key="test-key", ledger=ledger, **kw)
    return roles.connect(hub) if hub is not None else roles


def user_texts(server: ScriptedLLMServer, i: int) -> str:
    msgs = [m for m in server.requests[i].body["messages"] if m["role"] == "user"]
    content = msgs[-1]["content"]
    return content if isinstance(content, str) else "\n".join(p.get("text", "") for p in content)


@pytest.fixture(scope="module")
def failure():
    for seed in range(40):
        item = attempt("pick_place", seed, "lift_drop")
        if item is not None:
            _, demo = planner_trace(item.trace.spec)
            if demo.success:
                return item.trace, demo
    raise AssertionError("no lift_drop failure")


def diagnosis_json(obj: str, **over) -> str:
    data = {"factor": "execution", "phase": "lift", "cause": f"the gripper opened while lifting the {obj} 3 cm up",
            "evidence_steps": [12], "state_facts": ["drop at step 12"]}
    return json.dumps({**data, **over})


# --- critic ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_critic_good_answer_with_keyframes(provider, failure):
    trace, _ = failure
    obj = build_evidence(trace).goals[0].obj
    ledger = TokenLedger()
    with ScriptedLLMServer([reply(diagnosis_json(obj), input_tokens=900, output_tokens=60)]) as server:
        d = roles_for(provider, server, ledger).critic.diagnose(build_evidence(trace, render=True))
    assert (d.factor, d.phase) == ("execution", "lift") and obj in d.cause
    body = json.dumps(server.requests[0].body)
    assert "Phase timeline" in body and obj in body and '"approach' in body  # evidence text and schema enum
    assert ("image/png" in body) == bool(build_evidence(trace, render=True).keyframes)
    assert ledger.role("critic") == {**ledger.role("critic"), "calls": 1, "input_tokens": 900, "output_tokens": 60}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_critic_is_told_the_interventions_outcome(provider, failure):
    from agent.roles.critic import Intervention

    trace, _ = failure
    obj = build_evidence(trace).goals[0].obj
    inter = Intervention(original_success=False, variants={"task": [False], "layout": [False], "attributes": [True]})
    with ScriptedLLMServer([reply(diagnosis_json(obj, factor="attribute"))]) as server:
        d = roles_for(provider, server, TokenLedger(), images=False).critic.diagnose(build_evidence(trace), inter)
    assert d.factor == "attribute"
    text = user_texts(server, 0)
    assert "Intervention: counterfactual rollouts" in text and "attributes 1/1" in text and "layout 0/1" in text


@pytest.mark.parametrize("provider", PROVIDERS)
def test_critic_repairs_a_malformed_answer(provider, failure):
    trace, _ = failure
    obj = build_evidence(trace).goals[0].obj
    ledger = TokenLedger()
    script = [reply("it dropped the thing"), reply(diagnosis_json(obj, phase="grab")), reply(diagnosis_json(obj))]
    with ScriptedLLMServer(script) as server:
        d = roles_for(provider, server, ledger, images=False).critic.diagnose(build_evidence(trace))
    assert d.phase == "lift" and len(server.requests) == 3
    assert "not valid JSON" in user_texts(server, 1) or "no JSON object" in user_texts(server, 1)
    assert "field 'phase'" in user_texts(server, 2)
    assert ledger.role("critic")["calls"] == 3


@pytest.mark.parametrize("provider", PROVIDERS)
def test_critic_answer_that_never_validates_is_rejected(provider, failure):
    trace, _ = failure
    vague = diagnosis_json("thing", cause="something went wrong somewhere in the middle")
    with ScriptedLLMServer([reply(vague)] * 3) as server:
        with pytest.raises(LLMOutputError, match="critic: .* after 3 attempt") as info:
            roles_for(provider, server, TokenLedger(), images=False).critic.diagnose(build_evidence(trace))
    assert "must name the objects" in info.value.last_error and len(server.requests) == 3


# --- engine ---------------------------------------------------------------------------------------------


def program_answer(source: str) -> str:
    return f"Here is the scene.\n```python\n{source}\n```"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_engine_writes_a_verified_program(provider, hub):
    ledger = TokenLedger()
    with ScriptedLLMServer([reply(program_answer(EXAMPLE), input_tokens=5000, output_tokens=300)]) as server:
        program = roles_for(provider, server, ledger, hub).engine.write(
            WriteRequest(family="pick_place", mode="a mug in a bowl", seed=3))
    assert program.source.strip() == EXAMPLE.strip() and program.operator == "llm" and program.seed == 3
    system = json.dumps(server.requests[0].body)
    assert "cutting_board" in system and "set_layout" in system  # categories and API reference in the prompt
    assert ledger.role("engine")["input_tokens"] == 5000 and ledger.role("engine")["output_tokens"] == 300


@pytest.mark.parametrize("provider", PROVIDERS)
def test_engine_repairs_from_verifier_errors(provider, hub):
    ledger = TokenLedger()
    script = [reply(program_answer("scene = Scene(")), reply(program_answer(CLASHING)), reply(program_answer(EXAMPLE))]
    with ScriptedLLMServer(script) as server:
        program = roles_for(provider, server, ledger, hub).engine.write(
            WriteRequest(family="pick_place", mode="vary the layout", factor="layout", parent_program=EXAMPLE))
    assert program.source.strip() == EXAMPLE.strip()
    assert "SyntaxError" in user_texts(server, 1)
    assert "collision_free" in user_texts(server, 2) and "interpenetrate" in user_texts(server, 2)
    assert "Change ONLY the layout factor" in json.dumps(server.requests[0].body)
    assert ledger.role("engine")["calls"] == 3


@pytest.mark.parametrize("provider", PROVIDERS)
def test_engine_program_that_never_verifies_is_rejected(provider, hub):
    with ScriptedLLMServer([reply(program_answer(CLASHING))] * 3) as server:
        with pytest.raises(LLMOutputError, match="engine: .* after 3 attempt") as info:
            roles_for(provider, server, TokenLedger(), hub).engine.write(WriteRequest(family="pick_place", mode="m"))
    assert "collision_free" in info.value.last_error and len(server.requests) == 3


# --- compiler -------------------------------------------------------------------------------------------


def compile_request(failure):
    from agent.roles.critic import OfflineCritic

    trace, demo = failure
    return CompileRequest(OfflineCritic().diagnose(build_evidence(trace)), trace.spec,
                          local_checker(trace.spec, [trace], [demo]), has_demo=True)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_compiler_good_program(provider, failure, hub):
    req = compile_request(failure)
    source = write_program(req.spec, factor="execution", phase="lift", cause=req.diagnosis.cause, tool="awr_shaped")
    ledger = TokenLedger()
    with ScriptedLLMServer([reply(program_answer(source), input_tokens=3000, output_tokens=800)]) as server:
        out = roles_for(provider, server, ledger, hub).compiler.compile(req)
    assert out.report.ok and out.attempts == 1 and out.learning_tool == "awr_shaped"
    body = json.dumps(server.requests[0].body)
    assert "h.tcp_distance(" in body and "h.is_grasped(" in body  # the helper reference
    goals = ", ".join(str(a) for a in order_subgoals(req.spec.task.success))
    assert json.dumps(f"goals in execution order: {goals}\n")[1:-1] in body  # the scene's goals from the sim server
    assert f"factor {req.diagnosis.factor}, phase {req.diagnosis.phase}" in body
    assert ledger.role("compiler") == {**ledger.role("compiler"), "calls": 1, "input_tokens": 3000,
                                       "output_tokens": 800}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_compiler_repairs_from_check_errors(provider, failure, hub):
    req = compile_request(failure)
    good = write_program(req.spec, factor="execution", phase="lift", cause="drop", tool="awr_shaped", level=1)
    bad = good.replace("return clip01(", "return 3.0 * clip01(", 1)
    with ScriptedLLMServer([reply(program_answer(bad)), reply(program_answer(good))]) as server:
        out = roles_for(provider, server, TokenLedger(), hub).compiler.compile(req)
    assert out.report.ok and out.attempts == 2 and out.attempt_errors
    assert "potentials must lie in [0, 1]" in user_texts(server, 1)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_compiler_program_that_never_passes_is_rejected(provider, failure, hub):
    req = compile_request(failure)
    with ScriptedLLMServer([reply(program_answer("LEARNING_TOOL = 'bc'\n"))] * 3) as server:
        with pytest.raises(LLMOutputError, match="compiler: .* after 3 attempt") as info:
            roles_for(provider, server, TokenLedger(), hub).compiler.compile(req)
    assert "SUBGOALS" in info.value.last_error


def test_tokens_are_counted_per_role(failure, hub):
    trace, _ = failure
    obj = build_evidence(trace).goals[0].obj
    ledger = TokenLedger()
    script = [reply(diagnosis_json(obj), input_tokens=100, output_tokens=10),
              reply(program_answer(EXAMPLE), input_tokens=200, output_tokens=20)]
    with ScriptedLLMServer(script) as server:
        roles = roles_for("openai", server, ledger, hub, images=False)
        roles.critic.diagnose(build_evidence(trace))
        roles.engine.write(WriteRequest(family="pick_place", mode="m"))
    per_role = ledger.to_dict()["roles"]
    assert per_role["critic"]["total_tokens"] == 110 and per_role["engine"]["total_tokens"] == 220
    assert "compiler" not in per_role and ledger.total()["calls"] == 2
