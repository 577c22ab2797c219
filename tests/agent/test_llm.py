"""LLM backends with the real anthropic/openai clients against a local scripted server (no network)."""

from __future__ import annotations

import json
import struct
import threading
import zlib
from typing import Any, Literal

import pytest
from pydantic import BaseModel
from scripted_llm_server import ScriptedLLMServer, ScriptedResponse, http_error, reply, tool_call

from agent.llm import (
    DEFAULT_ANTHROPIC_MODEL,
    DEFAULT_OPENAI_MODEL,
    ImageBlock,
    LLMError,
    LLMOutputError,
    Message,
    MissingAPIKeyError,
    TextBlock,
    TokenLedger,
    ToolResultBlock,
    ToolSpec,
    Usage,
    ask_code,
    ask_structured,
    extract_code,
    extract_json,
    make_backend,
    price_for,
)
from agent.llm.anthropic_backend import to_anthropic
from agent.llm.openai_backend import to_openai

PROVIDERS = ["anthropic", "openai"]
SYSTEM = "You diagnose failed robot rollouts."
GOOD = '{"factor": "spatial", "phase": "approach", "cause": "a box blocks the approach side"}'


class Diagnosis(BaseModel):
    factor: Literal["task", "spatial", "attribute", "execution"]
    phase: Literal["approach", "grasp", "lift", "transport", "place", "release"]
    cause: str


def backend_for(provider: str, server: ScriptedLLMServer, **opts: Any):
    url = server.url if provider == "anthropic" else server.openai_url
    return make_backend(provider, base_url=url, api_key="test-key", **opts)


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content if part.get("type") == "text")


def last_user_text(body: dict[str, Any]) -> str:
    return text_of([m for m in body["messages"] if m["role"] == "user"][-1]["content"])


def tiny_png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


# -- structured output ---------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_good_structured_answer_validates_first_try(provider):
    ledger = TokenLedger()
    with ScriptedLLMServer([reply(GOOD)]) as server:
        backend = backend_for(provider, server)
        result = ask_structured(
            backend,
            system=SYSTEM,
            prompt="The gripper never reached the mug.",
            schema=Diagnosis,
            role="critic",
            ledger=ledger,
            temperature=0.2,
        )
    assert result == Diagnosis(factor="spatial", phase="approach", cause="a box blocks the approach side")
    assert len(server.requests) == 1
    body = server.requests[0].body
    prompt = last_user_text(body)
    assert "The gripper never reached the mug." in prompt and '"approach"' in prompt  # schema enum included
    assert body["temperature"] == 0.2 and body["max_tokens"] == 16000
    if provider == "anthropic":
        assert server.requests[0].path == "/v1/messages" and body["system"] == SYSTEM
    else:
        assert server.requests[0].path == "/v1/chat/completions"
        assert body["messages"][0] == {"role": "system", "content": SYSTEM}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_malformed_answers_are_repaired_on_retry(provider):
    wrong_field = '```json\n{"factor": "spatial", "phase": "grab", "cause": "blocked"}\n```'
    with ScriptedLLMServer([reply('{"factor": "spatial",, oops'), reply(wrong_field), reply(GOOD)]) as server:
        result = ask_structured(
            backend_for(provider, server),
            system=SYSTEM,
            prompt="diagnose",
            schema=Diagnosis,
            role="critic",
            ledger=TokenLedger(),
        )
    assert result.phase == "approach"
    assert len(server.requests) == 3
    second, third = (last_user_text(r.body) for r in server.requests[1:])
    assert second.startswith("your answer did not validate: the answer is not valid JSON")
    assert "field 'phase'" in third and "'grab'" in third
    assert third.endswith("answer again with only the JSON")
    # the bad answer is in the conversation as the assistant turn
    assistant = [m for m in server.requests[2].body["messages"] if m["role"] == "assistant"]
    assert text_of(assistant[-1]["content"]) == wrong_field


@pytest.mark.parametrize("provider", PROVIDERS)
def test_answer_that_never_validates_raises_after_the_limit(provider):
    bad = [reply('{"factor": "luck", "phase": "approach", "cause": "?"}') for _ in range(3)]
    with ScriptedLLMServer(bad) as server:
        with pytest.raises(LLMOutputError) as info:
            ask_structured(
                backend_for(provider, server),
                system=SYSTEM,
                prompt="diagnose",
                schema=Diagnosis,
                role="critic",
                ledger=TokenLedger(),
                max_attempts=3,
            )
    assert len(server.requests) == 3 and server.remaining == 0 and not server.unexpected
    err = info.value
    assert err.role == "critic" and err.attempts == 3 and "field 'factor'" in err.last_error
    assert str(err).startswith("critic: the model's answer did not validate after 3 attempt(s)")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_token_counts_recorded_per_role(provider):
    ledger = TokenLedger()
    script = [
        reply("no json here", input_tokens=100, output_tokens=20),
        reply(GOOD, input_tokens=130, output_tokens=25),
        reply("```python\ndef phi(state):\n    return 1.0\n```", input_tokens=400, output_tokens=60),
    ]
    with ScriptedLLMServer(script) as server:
        backend = backend_for(provider, server)
        ask_structured(backend, system=SYSTEM, prompt="p", schema=Diagnosis, role="critic", ledger=ledger)
        ask_code(backend, system=None, prompt="write phi", role="compiler", ledger=ledger)
    model = DEFAULT_ANTHROPIC_MODEL if provider == "anthropic" else DEFAULT_OPENAI_MODEL
    price_in, price_out = price_for(model)
    critic = ledger.role("critic")
    assert (critic["calls"], critic["input_tokens"], critic["output_tokens"]) == (2, 230, 45)
    assert critic["cost_usd"] == pytest.approx((230 * price_in + 45 * price_out) / 1e6)
    compiler = ledger.role("compiler")
    assert (compiler["calls"], compiler["input_tokens"], compiler["output_tokens"]) == (1, 400, 60)
    total = ledger.to_dict()["total"]
    assert (total["calls"], total["total_tokens"]) == (3, 230 + 45 + 460)
    assert ledger.to_dict()["models"][model]["calls"] == 3


@pytest.mark.parametrize("provider", PROVIDERS)
def test_unknown_local_model_counts_tokens_without_cost(provider):
    ledger = TokenLedger()
    with ScriptedLLMServer([reply(GOOD, input_tokens=9, output_tokens=4)]) as server:
        backend = backend_for(provider, server, model="qwen2.5-7b-instruct")
        ask_structured(backend, system=None, prompt="p", schema=Diagnosis, role="critic", ledger=ledger)
    assert ledger.role("critic") == {
        "calls": 1,
        "input_tokens": 9,
        "output_tokens": 4,
        "total_tokens": 13,
        "cost_usd": None,
    }


# -- tools ---------------------------------------------------------------------------------------


RENDER = ToolSpec(
    name="render",
    description="Render the scene from a named camera.",
    input_schema={"type": "object", "properties": {"view": {"type": "string"}}, "required": ["view"]},
)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_tool_call_round_trip_with_image_result(provider):
    png = tiny_png()
    script = [
        tool_call("render", {"view": "top"}, call_id="call_abc", text="Let me look."),
        reply("It missed."),
    ]
    with ScriptedLLMServer(script) as server:
        backend = backend_for(provider, server)
        messages = [Message.user("What happened?")]
        first = backend.complete(messages, system=SYSTEM, tools=[RENDER])
        assert first.stop_reason == "tool_use" and first.text == "Let me look."
        [call] = first.tool_calls
        assert (call.id, call.name, call.arguments, call.parse_error) == (
            "call_abc",
            "render",
            {"view": "top"},
            None,
        )
        result = ToolResultBlock(
            tool_use_id=call.id, content=[TextBlock(text="rendered top view"), ImageBlock.from_bytes(png)]
        )
        messages += [first.to_message(), Message.tool_results(result)]
        second = backend.complete(messages, system=SYSTEM, tools=[RENDER])
    assert second.text == "It missed." and second.stop_reason == "end_turn" and not second.tool_calls
    first_body, second_body = (r.body for r in server.requests)
    b64 = ImageBlock.from_bytes(png).data
    if provider == "anthropic":
        assert first_body["tools"] == [RENDER.model_dump()]
        user, assistant, tool_turn = second_body["messages"]
        assert user == {"role": "user", "content": [{"type": "text", "text": "What happened?"}]}
        assert assistant["role"] == "assistant" and assistant["content"] == [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "call_abc", "name": "render", "input": {"view": "top"}},
        ]
        assert tool_turn == {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "call_abc",
                    "is_error": False,
                    "content": [
                        {"type": "text", "text": "rendered top view"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": b64},
                        },
                    ],
                }
            ],
        }
    else:
        assert first_body["tools"] == [
            {
                "type": "function",
                "function": {
                    "name": "render",
                    "description": RENDER.description,
                    "parameters": RENDER.input_schema,
                },
            }
        ]
        system, user, assistant, tool_msg, image_msg = second_body["messages"]
        assert system["role"] == "system" and user == {"role": "user", "content": "What happened?"}
        assert assistant["content"] == "Let me look."
        [wire_call] = assistant["tool_calls"]
        assert wire_call["id"] == "call_abc" and wire_call["type"] == "function"
        assert wire_call["function"]["name"] == "render"
        assert json.loads(wire_call["function"]["arguments"]) == {"view": "top"}
        assert tool_msg["role"] == "tool" and tool_msg["tool_call_id"] == "call_abc"
        assert tool_msg["content"].startswith("rendered top view")
        assert image_msg["role"] == "user"
        assert image_msg["content"][1] == {
            "type": "image_url",
            "image_url": {"url": f"data:image/png;base64,{b64}"},
        }


def test_anthropic_thinking_blocks_go_back_unchanged_in_tool_loops():
    raw = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5-5",
        "content": [
            {"type": "thinking", "thinking": "I should render.", "signature": "sig-1"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "tool_use", "id": "tu_1", "name": "render", "input": {"view": "side"}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 3},
    }
    with ScriptedLLMServer([ScriptedResponse(raw=raw), reply("done")]) as server:
        backend = backend_for("anthropic", server)
        first = backend.complete([Message.user("look")], tools=[RENDER])
        assert first.text == "" and [b.signature for b in first.thinking] == ["sig-1", ""]
        result = ToolResultBlock(tool_use_id="tu_1", content=[TextBlock(text="ok")])
        backend.complete(
            [Message.user("look"), first.to_message(), Message.tool_results(result)], tools=[RENDER]
        )
    assistant = server.requests[1].body["messages"][1]
    assert assistant["content"] == raw["content"]
    assert to_openai([first.to_message()], None) == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "tu_1",
                    "type": "function",
                    "function": {"name": "render", "arguments": '{"view": "side"}'},
                }
            ],
        }
    ]


def test_tool_error_results_wire_format():
    messages = [
        Message.user("go"),
        Message(role="assistant", content=[{"type": "tool_use", "id": "t1", "name": "step", "input": {}}]),
        Message.tool_results(
            ToolResultBlock(tool_use_id="t1", content=[TextBlock(text="bad action")], is_error=True)
        ),
    ]
    _, wire = to_anthropic(messages, None)
    assert wire[2]["content"][0]["is_error"] is True
    oa = to_openai(messages, None)
    assert oa[2] == {"role": "tool", "tool_call_id": "t1", "content": "ERROR: bad action"}
    with pytest.raises(ValueError, match="tool_result blocks"):
        Message(role="user", content=[{"type": "tool_result", "tool_use_id": "t1"}])


def test_user_message_with_keyframe_image():
    png = tiny_png()
    msg = Message.user("keyframes:", ImageBlock.from_bytes(png))
    _, wire = to_anthropic([msg], None)
    assert wire[0]["content"][1]["source"]["media_type"] == "image/png"
    assert to_openai([msg], None)[0]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    with pytest.raises(ValueError, match="neither PNG nor JPEG"):
        ImageBlock.from_bytes(b"GIF89a")


# -- code ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_ask_code_repair_loop_with_check(provider):
    checked: list[str] = []

    def check(code: str) -> list[str]:
        checked.append(code)
        return ["name 'foo' is not allowed"] if "foo" in code else []

    script = [
        reply("```python\ndef phi(state):\n    return foo(state)\n```"),
        reply("```python\ndef phi(state)\n    return 1.0\n```"),
        reply("Fixed:\n```python\ndef phi(state):\n    return 0.5\n```\nDone."),
    ]
    with ScriptedLLMServer(script) as server:
        code = ask_code(
            backend_for(provider, server),
            system=SYSTEM,
            prompt="write phi",
            role="compiler",
            ledger=TokenLedger(),
            check=check,
        )
    assert code == "def phi(state):\n    return 0.5"
    assert len(checked) == 2  # the syntax error never reaches the check
    second, third = (last_user_text(r.body) for r in server.requests[1:])
    assert "your code has errors:\n- name 'foo' is not allowed" in second
    assert "SyntaxError at line 1" in third


@pytest.mark.parametrize("provider", PROVIDERS)
def test_ask_code_gives_up_after_the_limit(provider):
    with ScriptedLLMServer([reply("```python\nfoo()\n```")] * 2) as server:
        with pytest.raises(LLMOutputError, match="compiler: .* after 2 attempt.*not allowed"):
            ask_code(
                backend_for(provider, server),
                system=None,
                prompt="p",
                role="compiler",
                ledger=None,
                check=lambda code: ["name 'foo' is not allowed"],
                max_attempts=2,
            )
    assert len(server.requests) == 2


def test_extract_json_and_code():
    assert extract_json('  {"a": 1} ') == {"a": 1}
    assert extract_json('Here:\n```json\n{"a": {"b": "}"}}\n```\nthanks') == {"a": {"b": "}"}}
    assert extract_json('I think {"a": [1, 2]} is right, not {"b": 2}') == {"a": [1, 2]}
    assert extract_json('see {braces} then {"a": 3}') == {"a": 3}
    for text, reason in [("", "empty"), ("no json", "no JSON object"), ('{"a": 1', "not valid JSON")]:
        with pytest.raises(ValueError, match=reason):
            extract_json(text)
    assert extract_code("```py\nx = 1\n```") == "x = 1"
    assert extract_code("```\ny = 2\n```\n```python\nx = 1\n```") == "x = 1"
    assert extract_code("x = 1\n") == "x = 1"


# -- errors, retries, keys -----------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_http_500_is_retried_by_the_sdk(provider):
    with ScriptedLLMServer([http_error(500), http_error(503), reply("ok")]) as server:
        completion = backend_for(provider, server, max_retries=2).complete([Message.user("hi")])
    assert completion.text == "ok"
    assert [r.headers.get("x-stainless-retry-count") for r in server.requests] == ["0", "1", "2"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_http_500_without_retries_raises_llm_error(provider):
    with ScriptedLLMServer([http_error(500)]) as server:
        backend = backend_for(provider, server, max_retries=0)
        with pytest.raises(LLMError, match=f"{provider} request failed .*HTTP 500"):
            backend.complete([Message.user("hi")])
    assert len(server.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_connection_refused_raises_llm_error(provider):
    with ScriptedLLMServer() as server:
        url = server.url if provider == "anthropic" else server.openai_url
    backend = make_backend(provider, base_url=url, api_key="k", max_retries=0, timeout_s=5)
    with pytest.raises(LLMError, match="APIConnectionError"):
        backend.complete([Message.user("hi")])


@pytest.mark.parametrize(
    ("provider", "env"), [("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY")]
)
def test_missing_key_error_message(provider, env, monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(MissingAPIKeyError) as info:
        make_backend(provider)
    assert str(info.value) == (
        f"no API key for the {provider} backend: set {env} in the environment "
        "(or api_key= in Python); use --backend offline to run without a key"
    )
    local = make_backend(provider, base_url="http://127.0.0.1:9/v1")  # local servers need no key
    assert local.provider == provider
    monkeypatch.setenv(env, "from-env")
    assert make_backend(provider, model="m").model == "m"


def test_make_backend_rejects_unknown_names():
    with pytest.raises(ValueError, match="unknown LLM backend 'gemini'; valid backends: anthropic, openai"):
        make_backend("gemini")


# -- ledger --------------------------------------------------------------------------------------


def test_ledger_prices_merge_round_trip_and_per_1000():
    assert price_for("claude-sonnet-4-5-20250929") == price_for("claude-sonnet-4-5")
    assert price_for("gpt-4.1-mini-2025-04-14") == price_for("gpt-4.1-mini") != price_for("gpt-4.1")
    assert price_for("anthropic/claude-sonnet-5-5") == (2.0, 10.0)
    assert price_for("llama3:8b") is None and price_for("gpt-5.4-mini") is None

    a, b = TokenLedger(), TokenLedger()
    usage = Usage(input_tokens=1_000_000, output_tokens=500_000)
    a.record("engine", "gpt-4.1", usage)
    b.record("engine", "gpt-4.1", usage)
    b.record("critic", "llama3:8b", usage)
    a.merge(b)
    d = a.to_dict()
    assert d["roles"]["engine"]["calls"] == 2 and d["roles"]["engine"]["cost_usd"] == pytest.approx(12.0)
    assert d["roles"]["critic"]["cost_usd"] is None and d["total"]["cost_usd"] is None
    assert TokenLedger.from_dict(json.loads(json.dumps(d))).to_dict() == d

    priced = TokenLedger()
    priced.record("engine", "gpt-4.1", usage)
    per = priced.per_1000(accepted_envs=500)
    assert per["total_tokens"] == 3_000_000 and per["cost_usd"] == pytest.approx(12.0)
    assert priced.per_1000(0)["cost_usd"] is None
    with pytest.raises(ValueError, match="accepted_envs must be ≥ 0, got -1"):
        priced.per_1000(-1)


def test_ledger_is_thread_safe():
    ledger = TokenLedger()

    def work():
        for _ in range(500):
            ledger.record("round", "claude-haiku-4-5", Usage(input_tokens=3, output_tokens=1))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ledger.role("round")["calls"] == 4000 and ledger.role("round")["input_tokens"] == 12000


def test_anthropic_prompt_caching_marks_long_prefixes_only():
    """Tool definitions, the system prompt and the newest message carry cache breakpoints once the fixed prefix is
    long enough to be cached (≈ 1,024 tokens); short requests are sent unchanged."""
    from agent.llm.base import ToolSpec

    many = [ToolSpec(name=f"sim__tool_{i}", description="does one thing with a scene " * 8,
                     input_schema={"type": "object", "properties": {"scene_id": {"type": "string"}}})
            for i in range(30)]
    with ScriptedLLMServer([reply("ok"), reply("ok")]) as server:
        backend = backend_for("anthropic", server)
        backend.complete([Message.user("Run a round.")], system=SYSTEM, tools=many)
        backend.complete([Message.user("Short.")], system=SYSTEM, tools=[RENDER])
    long_body, short_body = (r.body for r in server.requests)
    assert long_body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in t for t in long_body["tools"][:-1])
    assert long_body["system"] == [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    assert long_body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in json.dumps(short_body) and short_body["system"] == SYSTEM
