"""Autonomous mode: an LLM with the four servers' tools and `prompts/round.md` runs the rounds itself.

Every tool result goes back to the model as a tool result (text, structured JSON, images; errors flagged
is_error). The run stops at the model's final answer, at `max_turns`, or when the ledger's cost passes `max_cost`.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

from agent.hub import Hub, ToolError
from agent.llm import ImageBlock, Message, TextBlock, ToolResultBlock, ToolSpec
from agent.llm.ledger import ROLE_ROUND
from agent.llm.structured import complete_counted
from agent.presets import Preset
from agent.roles.factory import Roles
from agent.runstate import RunState
from prompts import render_prompt

log = logging.getLogger(__name__)
SEP = "__"
MAX_RESULT_CHARS = 12_000


def fit_for_model(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    """A tool result sized for the model: JSON made compact, and when still over `limit` shrunk as a structure
    (the longest lists keep their first items plus a note of how many are not shown, then the longest strings are
    shortened) so what the model reads is always valid JSON; plain text is cut with a note."""
    try:
        value = json.loads(text)
    except ValueError:
        return text if len(text) <= limit else text[: limit - 80] + f" ...[{len(text) - limit + 80} characters cut]"
    out = _compact(value)
    for _ in range(200):
        if len(out) <= limit:
            return out
        if not _halve_longest(value, "list") and not _halve_longest(value, "str"):
            break
        out = _compact(value)
    return _compact({"note": f"result of {len(text)} characters too large to show; ask for fewer items"})


def _compact(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _halve_longest(value, kind: str) -> bool:
    """Halve the longest list (keeping a note of the items not shown) or string in `value`, in place."""
    best: tuple[int, object, object] | None = None
    stack = [(None, None, value)]
    while stack:
        parent, key, v = stack.pop()
        if isinstance(v, dict):
            stack += [(v, k, x) for k, x in v.items()]
        elif isinstance(v, list):
            if kind == "list" and len(v) > 2 and (best is None or len(v) > best[0]):
                best = (len(v), v, None)
            stack += [(v, i, x) for i, x in enumerate(v)]
        elif kind == "str" and isinstance(v, str) and len(v) > 200 and parent is not None and (
                best is None or len(v) > best[0]):
            best = (len(v), parent, key)
    if best is None:
        return False
    if kind == "list":
        items = best[1]
        shown = [x for x in items if not (isinstance(x, str) and x.startswith("... "))]
        hidden = sum(int(x.split()[1]) for x in items if isinstance(x, str) and x.startswith("... ")
                     and x.split()[1].isdigit())
        keep = max(1, len(shown) // 2)
        hidden += len(shown) - keep
        items[:] = [*shown[:keep], f"... {hidden} more items not shown (page the tool or ask for fewer)"]
    else:
        parent, key = best[1], best[2]
        text = parent[key]
        parent[key] = text[: len(text) // 2] + f" ...[{len(text) - len(text) // 2} characters cut]"
    return True


KEEP_IMAGE_TURNS = 2
"""tool-result turns whose images stay in the history; older images become a one-line note"""


def trim_images(messages: list[Message], keep: int = KEEP_IMAGE_TURNS) -> int:
    """Replace the images of all but the newest `keep` tool-result turns by a note (the model saw them when they
    were new; resending each one every turn costs ≈ 1.5k tokens). Returns how many images were replaced."""
    turns = [m for m in messages if m.role == "tool"]
    replaced = 0
    for msg in turns[: max(len(turns) - keep, 0)]:
        for block in msg.content:
            inner = block.content
            if any(isinstance(b, ImageBlock) for b in inner):
                block.content = [b if not isinstance(b, ImageBlock) else
                                 TextBlock(text="[image shown in an earlier turn, omitted to save tokens]")
                                 for b in inner]
                replaced += sum(isinstance(b, ImageBlock) for b in inner)
    return replaced


def tool_specs(hub: Hub) -> list[ToolSpec]:
    specs = []
    for server, tools in hub.tools().items():
        for name, t in tools.items():
            specs.append(ToolSpec(name=f"{server}{SEP}{name}", description=(t.description or "")[:1000],
                                  input_schema=t.input_schema or {"type": "object", "properties": {}}))
    return specs


def _result_block(call_id: str, hub: Hub, name: str, args: dict) -> tuple[ToolResultBlock, str]:
    server, _, tool = name.partition(SEP)
    try:
        res = hub.call(server, tool, args)
    except (ToolError, KeyError) as exc:
        return ToolResultBlock(tool_use_id=call_id, content=[TextBlock(text=str(exc))], is_error=True), "error"
    blocks = []
    for c in res.content:
        kind = getattr(c, "type", "")
        if kind == "image":
            blocks.append(ImageBlock(data=c.data, media_type=getattr(c, "mime_type", None) or "image/png"))
        elif kind == "text":
            blocks.append(TextBlock(text=fit_for_model(c.text)))
    if not blocks:
        blocks.append(TextBlock(text=fit_for_model(json.dumps(res.data, default=str))))
    return ToolResultBlock(tool_use_id=call_id, content=blocks), "ok"


def external_step(preset: Preset) -> str:
    """The round prompt's step for external target tasks (`Preset.external`), or nothing."""
    if not preset.external:
        return ""
    from agent.presets import external_tasks

    tasks = ", ".join(external_tasks(preset.external))
    return (f"11. External target tasks (evaluated only, never trained on): {tasks}. Before the first round and "
            f"after the last, `trainer: evaluate_external` them (n {preset.external_eval_n}) and report the "
            f"success rates. After each round but the last, `trainer: evaluate_external` with evidence true, n "
            f"{preset.external_probe_n} and first_group 10 + the round; for each failure (at most "
            f"{preset.external_proxies or preset.max_diagnoses} per task) decide its factor, phase and cause from its "
            "evidence, make a scene resembling it with `sim: sample_scene` of the task's family and `sim: proxy_scene` "
            "(its spec from `sim: get_scene`, objects = the failure's start), `sim: create_scene` and "
            "`verifier: verify_scene` it, record it, and `memory: record_diagnosis` on that scene, so the next "
            "round's allocation aims at those modes."
            + (" In every later round's `trainer: start_training`, add those scenes to `demo_scene_ids` (planner "
               "demonstrations on them)" + ("" if not preset.external_takeover else " and to `takeover_scene_ids` "
                                             "(corrective planner windows where the policy fails in them)")
               + "." if preset.external_dt else "") + "\n")


def run_autonomous(hub: Hub, roles: Roles, run_dir: Path, preset: Preset, run_id: str, *, max_turns: int = 60,
                   max_cost: float = 5.0, max_tokens: int = 8000) -> dict:
    backend = getattr(roles.critic, "backend", None)
    if backend is None:
        raise ValueError("autonomous mode needs an LLM backend: pass --backend anthropic or --backend openai")
    state = RunState(run_dir)
    state.set("preset", preset.to_dict())
    state.set("backend", roles.backend)
    state.set("mode", "autonomous")
    prompt = render_prompt(
        "round", rounds=preset.rounds, families=", ".join(preset.families), max_turns=max_turns,
        demos_per_family=preset.demos_per_family, sft_updates=preset.sft_updates, budget=preset.budget(),
        max_diagnoses=preset.max_diagnoses, external=external_step(preset))
    tools = tool_specs(hub)
    messages = [Message.user(prompt)]
    transcript, t0 = [], time.perf_counter()
    final, stop = "", "max_turns"
    for turn in range(max_turns):
        completion = complete_counted(backend, messages, role=ROLE_ROUND, ledger=roles.ledger, tools=tools,
                                      max_tokens=max_tokens)
        messages.append(completion.to_message())
        if not completion.tool_calls:
            final, stop = completion.text, "answered"
            break
        results = []
        for call in completion.tool_calls:
            if call.parse_error:
                block = ToolResultBlock(tool_use_id=call.id, is_error=True,
                                        content=[TextBlock(text=f"arguments were not a JSON object: {call.parse_error}")])
                outcome = "error"
            else:
                block, outcome = _result_block(call.id, hub, call.name, call.arguments)
            results.append(block)
            transcript.append({"turn": turn, "tool": call.name, "arguments": call.arguments, "outcome": outcome})
            print(f"[coda] turn {turn + 1}: {call.name} → {outcome}", file=sys.stderr, flush=True)
        messages.append(Message.tool_results(*results))
        trim_images(messages)
        cost = roles.ledger.total().get("cost_usd") or 0.0
        if cost > max_cost:
            stop = "cost budget"
            break
    state.set("transcript", transcript)
    state.set("final_answer", final)
    state.set("stop_reason", stop)
    state.set("wall_seconds", time.perf_counter() - t0)
    state.set("mcp_seconds", hub.overhead_seconds())
    state.set("tokens", roles.ledger.to_dict())
    return state.data
