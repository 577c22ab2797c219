"""Issue 10, property-based fuzz of the four MCP servers (sim, verifier, memory, trainer) through in-memory clients.

Each example is a short sequence of tool calls: a tool from the server's list (or an unknown name) with arguments
drawn from its input schema, from the schema with fields dropped or replaced by hostile values (wrong types, huge
strings, negative and huge numbers, NaN, path traversal, bad ids), or plain garbage. Properties:

- the server never crashes: every call returns a result (no exception in the client), and afterwards a known-good
  call succeeds on the same session;
- every failure is an `is_error` result with a non-empty message, and no tool raised an unexpected exception
  (the SDK logs those with a traceback; none may appear);
- nothing is written outside the run directory.

Tools that start heavy work (trainer: train_sft, collect_rollouts, start_training, evaluate) only get arguments that
certainly fail validation, so the fuzz stays fast. The default run makes at least 1,000 calls per server; the
`slow` variant at least 5,000 (`pytest -m slow tests/security/test_tool_fuzz.py`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from fuzz_support import CrashLog, SyncClient, text_of, tool_calls
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
GOOD_PROGRAM = (REPO / "examples" / "scenes" / "pick_place.py").read_text()
EXAMPLES, MIN_CALLS = 400, 1000  # 2-6 calls per example (about 3 on average): ~1,200 calls per server
SLOW_EXAMPLES, SLOW_MIN_CALLS = 1500, 5000
TRAINER_HEAVY = frozenset({"train_sft", "collect_rollouts", "start_training", "evaluate"})


def build(name: str, run_dir: Path):
    if name == "memory":
        from memory_store.embed import HashingEmbedder
        from servers.memory import build_server

        return build_server(run_dir, embedder=HashingEmbedder())
    if name == "trainer":
        from servers.trainer import build_server

        return build_server(run_dir, device="cpu")
    if name == "sim":
        from servers.sim import build_server
    else:
        from servers.verifier import build_server
    return build_server(run_dir)


def ok(client: SyncClient, tool: str, args: dict):
    result = client.call(tool, args)
    assert not result.is_error, f"{tool}: {text_of(result)}"
    return result.structured_content


def known_good(name: str, client: SyncClient) -> None:
    """A call that must succeed after the fuzz, on the same session."""
    if name == "sim":
        scene_id = ok(client, "create_scene", {"source": GOOD_PROGRAM, "seed": 2})["scene_id"]
        assert ok(client, "get_scene", {"scene_id": scene_id})["source"] == GOOD_PROGRAM
    elif name == "verifier":
        assert ok(client, "verify_program", {"source": GOOD_PROGRAM, "seed": 2})["passed"]
    elif name == "memory":
        ok(client, "record_scene", {"scene": {"id": "after-fuzz", "family": "stack", "program": "p"}})
        assert ok(client, "memory_status", {})["rows"]["scenes"] >= 1
    else:
        ok(client, "list_checkpoints", {})
        jobs = ok(client, "list_jobs", {})["result"]
        assert all(j["kind"] not in ("train_sft", "train", "rollouts", "evaluate") for j in jobs), jobs


def fuzz(name: str, tmp_path: Path, examples: int) -> Counter:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    stats: Counter = Counter()
    heavy = TRAINER_HEAVY if name == "trainer" else frozenset()
    with CrashLog() as crashes, SyncClient(build(name, run_dir)) as client:
        calls = st.lists(tool_calls(client.tools, heavy), min_size=2, max_size=6)

        @settings(max_examples=examples, deadline=None, database=None, print_blob=True,
                  suppress_health_check=list(HealthCheck))
        @given(calls=calls)
        def run(calls):
            for tool, args in calls:
                result = client.call(tool, args)  # an exception here is a crash of the session
                stats["calls"] += 1
                stats["tools" if tool in client.tools else "unknown tools"] += 1
                if result.is_error:
                    stats["errors"] += 1
                    assert text_of(result), f"{tool}({args!r}) failed with an empty message"
                else:
                    stats[f"ok {tool}"] += 1

        run()
        assert not crashes.records, f"tools raised unexpected exceptions:\n{crashes.summary()}"
        known_good(name, client)
    assert [p.name for p in tmp_path.iterdir()] == ["run"], "something was written outside the run directory"
    return stats


SERVERS = ["sim", "verifier", "memory", "trainer"]


@pytest.mark.parametrize("name", SERVERS)
def test_fuzz_at_least_1000_tool_calls(name, tmp_path):
    stats = fuzz(name, tmp_path, EXAMPLES)
    print(f"{name}: {dict(stats)}")
    assert stats["calls"] >= MIN_CALLS, stats
    assert stats["errors"] > 0 and stats["unknown tools"] > 0 and stats["calls"] > stats["errors"], stats


@pytest.mark.slow
@pytest.mark.parametrize("name", SERVERS)
def test_fuzz_at_least_5000_tool_calls(name, tmp_path):
    stats = fuzz(name, tmp_path, SLOW_EXAMPLES)
    print(f"{name}: {dict(stats)}")
    assert stats["calls"] >= SLOW_MIN_CALLS, stats
