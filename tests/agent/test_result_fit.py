"""Autonomous mode sizes tool results for the model without cutting JSON mid-structure (issue 21)."""

from __future__ import annotations

import json

import pytest

from agent.autonomous import MAX_RESULT_CHARS, fit_for_model


def rollouts(n: int) -> str:
    rows = [{"rollout_id": f"r0-{i:05d}", "scene_id": "0123456789abcdef", "success": i % 3 == 0, "steps": 40}
            for i in range(n)]
    return json.dumps({"job_id": "j-1", "state": "succeeded", "result": rows}, indent=2)


@pytest.mark.parametrize("n", [10, 85, 400, 5000])
def test_results_stay_valid_json_within_the_limit(n):
    text = rollouts(n)
    out = fit_for_model(text)
    assert len(out) <= MAX_RESULT_CHARS
    value = json.loads(out)  # never cut mid-structure
    assert value["state"] == "succeeded" and value["job_id"] == "j-1"
    shown = [x for x in value["result"] if isinstance(x, dict)]
    assert shown == json.loads(text)["result"][: len(shown)]  # the first items, unchanged
    if len(text) <= MAX_RESULT_CHARS or len(json.dumps(json.loads(text), separators=(",", ":"))) <= MAX_RESULT_CHARS:
        assert len(shown) == n  # compact JSON alone was enough
    else:
        note = value["result"][-1]
        assert note.startswith(f"... {n - len(shown)} more items not shown")


def test_long_strings_are_shortened_and_plain_text_is_cut_with_a_note():
    out = fit_for_model(json.dumps({"program": "x" * 50_000, "ok": True}))
    value = json.loads(out)
    assert len(out) <= MAX_RESULT_CHARS and value["ok"] is True and "characters cut" in value["program"]
    plain = fit_for_model("word " * 5_000)
    assert len(plain) <= MAX_RESULT_CHARS and plain.endswith("characters cut]")
    assert fit_for_model('{\n  "a": [1, 2]\n}') == '{"a":[1,2]}'


def test_old_images_leave_the_history_and_the_newest_stay():
    from agent.autonomous import trim_images
    from agent.llm.base import ImageBlock, Message, TextBlock, ToolResultBlock

    png = ImageBlock(data="iVBORw0KGgo=", media_type="image/png")
    messages = [Message.user("go")]
    for i in range(4):
        messages.append(Message.tool_results(ToolResultBlock(tool_use_id=f"c{i}", content=[TextBlock(text=f"r{i}"),
                                                                                              png])))
    assert trim_images(messages, keep=2) == 2
    kinds = [[b.type for b in m.content[0].content] for m in messages[1:]]
    assert kinds == [["text", "text"], ["text", "text"], ["text", "image"], ["text", "image"]]
    assert "omitted" in messages[1].content[0].content[1].text and messages[1].content[0].content[0].text == "r0"
    assert trim_images(messages, keep=2) == 0  # idempotent
