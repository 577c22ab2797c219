"""Structured output for JSON answers against the local scripted server: Anthropic's forced tool call, OpenAI's
``response_format`` json_schema, the text fallback of an OpenAI-compatible server that rejects it, and repair."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, Field
from scripted_llm_server import ScriptedLLMServer, ScriptedResponse, reply, tool_call

from agent.llm import TokenLedger, ask_structured, make_backend
from agent.llm.openai_backend import strict_schema

GOOD = {"factor": "spatial", "phase": "approach", "cause": "a box blocks the approach side"}


class Diagnosis(BaseModel):
    """A failure diagnosis."""

    factor: Literal["task", "spatial", "attribute", "execution"]
    phase: Literal["approach", "grasp", "lift"]
    cause: str = Field(min_length=5)
    steps: list[int] = Field(default_factory=list)


def ask(backend, ledger):
    return ask_structured(backend, system="sys", prompt="diagnose", schema=Diagnosis, role="critic", ledger=ledger)


def test_anthropic_forces_a_tool_and_reads_its_input():
    ledger = TokenLedger()
    with ScriptedLLMServer([tool_call("Diagnosis", GOOD, input_tokens=50, output_tokens=9)]) as server:
        result = ask(make_backend("anthropic", base_url=server.url, api_key="k"), ledger)
    assert result == Diagnosis(**GOOD)
    body = server.requests[0].body
    assert body["tool_choice"] == {"type": "tool", "name": "Diagnosis"}
    (tool,) = body["tools"]
    assert tool["name"] == "Diagnosis" and tool["input_schema"] == Diagnosis.model_json_schema()
    assert tool["description"] == "A failure diagnosis."
    assert ledger.role("critic")["calls"] == 1 and ledger.role("critic")["input_tokens"] == 50


def test_anthropic_malformed_tool_input_gets_the_repair_prompt():
    ledger = TokenLedger()
    script = [tool_call("Diagnosis", {**GOOD, "phase": "grab"}), tool_call("Diagnosis", GOOD)]
    with ScriptedLLMServer(script) as server:
        result = ask(make_backend("anthropic", base_url=server.url, api_key="k"), ledger)
    assert result.phase == "approach" and len(server.requests) == 2
    second = server.requests[1].body
    assert second["tool_choice"]["name"] == "Diagnosis"
    assistant = [m for m in second["messages"] if m["role"] == "assistant"][-1]
    assert json.loads(assistant["content"][0]["text"])["phase"] == "grab"  # the bad answer, as JSON text
    repair = second["messages"][-1]["content"][-1]["text"]
    assert repair.startswith("your answer did not validate") and "field 'phase'" in repair
    assert ledger.role("critic")["calls"] == 2


def test_openai_sends_response_format_json_schema():
    ledger = TokenLedger()
    with ScriptedLLMServer([reply(json.dumps(GOOD), input_tokens=40, output_tokens=8)]) as server:
        result = ask(make_backend("openai", base_url=server.openai_url, api_key="k"), ledger)
    assert result == Diagnosis(**GOOD)
    fmt = server.requests[0].body["response_format"]
    assert fmt["type"] == "json_schema"
    spec = fmt["json_schema"]
    assert spec["name"] == "Diagnosis" and spec["strict"] is True
    assert spec["schema"]["additionalProperties"] is False
    assert spec["schema"]["required"] == ["factor", "phase", "cause", "steps"]
    assert "default" not in json.dumps(spec["schema"]) and "minLength" not in json.dumps(spec["schema"])
    assert ledger.role("critic")["total_tokens"] == 48


def test_openai_malformed_structured_answer_is_repaired():
    script = [reply(json.dumps({**GOOD, "cause": "x"})), reply(json.dumps(GOOD))]
    with ScriptedLLMServer(script) as server:
        result = ask(make_backend("openai", base_url=server.openai_url, api_key="k"), TokenLedger())
    assert result.cause == GOOD["cause"] and len(server.requests) == 2
    assert "field 'cause'" in server.requests[1].body["messages"][-1]["content"]
    assert "response_format" in server.requests[1].body


def test_compatible_server_rejecting_response_format_falls_back_to_text():
    ledger = TokenLedger()
    script = [ScriptedResponse(status=400), reply(f"Sure:\n```json\n{json.dumps(GOOD)}\n```"), reply(json.dumps(GOOD))]
    with ScriptedLLMServer(script) as server:
        backend = make_backend("openai", base_url=server.openai_url, api_key="k")
        assert ask(backend, ledger) == Diagnosis(**GOOD)
        assert backend.structured_output is False
        assert ask(backend, ledger) == Diagnosis(**GOOD)  # remembered: no second structured try
    first, fallback, later = (r.body for r in server.requests)
    assert "response_format" in first and "response_format" not in fallback and "response_format" not in later
    assert '\\"approach' in json.dumps(fallback["messages"][-1]["content"])  # the schema is in the text prompt
    assert ledger.role("critic")["calls"] == 2 and not server.unexpected


def test_strict_schema_rejects_open_objects():
    class Open(BaseModel):
        extra: dict[str, int]

    assert strict_schema(Open.model_json_schema()) is None
    assert strict_schema(Diagnosis.model_json_schema())["required"] == ["factor", "phase", "cause", "steps"]
