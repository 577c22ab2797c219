"""`coda run` end to end through the four MCP servers: offline, LLM roles against a scripted local server,
autonomous mode, and kill-and-resume with no lost or duplicated memory records."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scripted_llm_server import ScriptedLLMServer, reply, tool_call

from memory_store import MemoryStore
from memory_store.embed import HashingEmbedder

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def coda_run(run_dir: Path, *extra: str, env: dict | None = None, timeout: float = 600) -> dict:
    cmd = [sys.executable, "-m", "coda.cli", "run", "--preset", "tiny", "--runs-dir", str(run_dir.parent),
           "--name", run_dir.name, "--json", *extra]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                         env={**os.environ, **(env or {})})
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def memory_counts(run_dir: Path) -> dict[str, list[str]]:
    store = MemoryStore.open(str(run_dir / "memory"), embedder=HashingEmbedder())
    return {kind: [r.id for r in store.records(table)] for kind, table in
            (("scene", "scenes"), ("rollout", "rollouts"), ("diagnosis", "diagnoses"))}


@pytest.mark.slow
def test_offline_tiny_run_writes_report_and_memory(tmp_path):
    run_dir = tmp_path / "offline"
    summary = coda_run(run_dir)
    assert Path(summary["report"]).exists()
    state = json.loads((run_dir / "state.json").read_text())
    assert {"seed.sft", "eval.before", "r0.generate", "r0.rollouts", "r0.train", "eval.after"} <= set(state["steps"])
    ids = memory_counts(run_dir)
    assert len(ids["scene"]) == len(state["steps"]["r0.generate"]["result"])
    assert len(ids["rollout"]) == len(state["steps"]["r0.rollouts"]["result"])
    assert len(ids["diagnosis"]) == len(state["steps"]["r0.diagnose"]["result"])
    report = Path(summary["report"]).read_text()
    assert "before %" in report and "verification_pass_rate" in report


def test_kill_mid_round_and_resume_loses_and_duplicates_nothing(tmp_path):
    run_dir = tmp_path / "killed"
    cmd = [sys.executable, "-m", "coda.cli", "run", "--preset", "tiny", "--runs-dir", str(tmp_path),
           "--name", "killed"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    state_path = run_dir / "state.json"
    deadline = time.time() + 400
    while time.time() < deadline:  # kill right after the round's rollouts were recorded
        if state_path.exists() and "r0.rollouts" in json.loads(state_path.read_text()).get("steps", {}):
            break
        assert proc.poll() is None, "run ended before it could be killed"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = memory_counts(run_dir)
    assert before["rollout"], "nothing recorded before the kill"
    coda_run(run_dir, "--resume")
    after = memory_counts(run_dir)
    state = json.loads(state_path.read_text())
    for kind, key in (("scene", "r0.generate"), ("rollout", "r0.rollouts"), ("diagnosis", "r0.diagnose")):
        assert len(after[kind]) == len(set(after[kind])), f"duplicated {kind} records"
        assert len(after[kind]) == len(state["steps"][key]["result"]), f"lost {kind} records"
        assert set(before[kind]) <= set(after[kind])


def _critic_answer(i: int):
    """A diagnosis naming an object of the scene in the request (the critic's schema demands one)."""

    def answer(request):
        from sim import assets

        text = json.dumps(request.body)
        names = [c for c in sorted(assets.categories(), key=len, reverse=True) if c in text]
        cause = f"the gripper closed before reaching the {names[0] if names else 'object'} (case {i})"
        body = {"factor": "execution", "phase": "grasp", "evidence_steps": [3], "cause": cause,
                "state_facts": ["fingers closed on nothing"]}
        return reply(json.dumps(body), input_tokens=120, output_tokens=40)

    return answer


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_orchestrated_round_with_llm_roles(tmp_path, backend):
    with ScriptedLLMServer([_critic_answer(i) for i in range(6)]) as srv:
        url = srv.openai_url if backend == "openai" else srv.url
        env = {"OPENAI_API_KEY": "x", "ANTHROPIC_API_KEY": "x"}
        coda_run(tmp_path / backend, "--backend", backend, "--base-url", url, "--model", "scripted", env=env)
        critic_calls = [r for r in srv.requests if r.path.endswith(("/chat/completions", "/messages"))]
    state = json.loads((tmp_path / backend / "state.json").read_text())
    assert critic_calls, "the critic never asked the LLM"
    diag = state["steps"]["r0.diagnose"]["result"]
    assert diag and all(d["phase"] == "grasp" and d["factor"] == "execution" for d in diag)
    roles = state["tokens"]["roles"]
    assert roles["critic"]["input_tokens"] == 120 * roles["critic"]["calls"]


def _last_tool_json(request) -> dict:
    """The JSON text of the newest tool result in a request (OpenAI or Anthropic wire format)."""
    for msg in reversed(request.body.get("messages", [])):
        if msg.get("role") == "tool":
            return json.loads(msg["content"] if isinstance(msg["content"], str) else msg["content"][0]["text"])
        if msg.get("role") == "user" and isinstance(msg.get("content"), list):
            for block in msg["content"]:
                if block.get("type") == "tool_result":
                    content = block["content"]
                    return json.loads(content if isinstance(content, str) else content[0]["text"])
    raise AssertionError("no tool result in the request")


@pytest.mark.slow
def test_autonomous_round_through_tools(tmp_path):
    def step(name, make_args):
        return lambda req: tool_call(name, make_args(_last_tool_json(req)))

    script = [
        tool_call("trainer__train_sft", {"families": ["pick_place"], "demos_per_family": 3, "updates": 10}),
        step("trainer__wait_job", lambda last: {"job_id": last["job_id"], "timeout_s": 45}),
        tool_call("sim__sample_scene", {"family": "pick_place", "seed": 5}),
        step("verifier__verify_scene", lambda last: {"scene_id": last["scene_id"]}),
        tool_call("memory__allocate_budget", {"budget": 4, "round": 0}),
        tool_call("sim__no_such_tool", {}),
        reply("Round done: 1 scene sampled and verified; budget allocated."),
    ]
    with ScriptedLLMServer(script) as srv:
        run_dir = tmp_path / "auto"
        coda_run(run_dir, "--backend", "openai", "--base-url", srv.openai_url, "--model", "scripted",
                 "--mode", "autonomous", env={"OPENAI_API_KEY": "x"})
        assert srv.remaining == 0
    state = json.loads((run_dir / "state.json").read_text())
    outcomes = [(c["tool"], c["outcome"]) for c in state["transcript"]]
    assert outcomes[:5] == [("trainer__train_sft", "ok"), ("trainer__wait_job", "ok"), ("sim__sample_scene", "ok"),
                            ("verifier__verify_scene", "ok"), ("memory__allocate_budget", "ok")]
    assert outcomes[5] == ("sim__no_such_tool", "error")
    assert state["stop_reason"] == "answered" and "Round done" in state["final_answer"]
    assert state["tokens"]["roles"]["round"]["calls"] == len(script)


def test_a_run_refuses_the_experiment_only_share_round0(tmp_path):
    """share_round0 is an experiment setting (one round 1 for several methods): `coda run` says so, exits 2 and
    creates nothing."""
    cmd = [sys.executable, "-m", "coda.cli", "run", "--preset", "tiny", "--runs-dir", str(tmp_path / "runs"),
           "--set", "share_round0=true"]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "use it with coda experiment" in out.stderr
    assert not (tmp_path / "runs").exists()
