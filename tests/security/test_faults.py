"""Issue 10, faults survived:

- a server process killed mid-call: the hub reconnects, an idempotent call is retried and succeeds, a
  non-idempotent one is reported as a ToolError, and the server answers again afterwards;
- an LLM that returns garbage or times out: retried, then a clear error; the loop's critic step skips that rollout
  and diagnoses the others;
- a read-only or full run directory: the memory server answers writes with a clear error, stores no partial records
  and recovers once the disk is writable again; `coda run` on a read-only runs directory exits with a readable
  message and starts nothing.

Read-only and full file systems are real ones when the tests run as root with mount privileges (a small tmpfs,
remounted read-only); otherwise read-only is a directory without write permission and the full-disk test is skipped.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fuzz_support import SyncClient, text_of

REPO = Path(__file__).resolve().parents[2]
SCENE_PROGRAM = (REPO / "examples" / "scenes" / "pick_place.py").read_text()
# About a second of pure computation in the sandbox before the scene is built: long enough to kill the server
# while the call is in flight, deterministic so that the retried call gives the same scene.
SLOW_PROGRAM = "total = 0\nfor i in range(3_000_000):\n    total += i\n" + SCENE_PROGRAM


# --- a server killed mid-call ---------------------------------------------------------------------------------


def _server_pid(name: str, run_dir: Path) -> int:
    import psutil

    for proc in psutil.Process().children(recursive=True):
        try:
            cmd = proc.cmdline()
        except psutil.Error:
            continue
        if "serve" in cmd and name in cmd and str(run_dir) in cmd:
            return proc.pid
    raise LookupError(f"no {name} server process for {run_dir}")


def _sandbox_busy(server_pid: int) -> bool:
    """True while a sandboxed program runs under `server_pid` (a child of its sandbox zygote)."""
    import psutil

    try:
        for proc in psutil.Process(server_pid).children(recursive=True):
            parent = proc.parent()
            if parent is not None and "sim.sandbox.worker" in " ".join(parent.cmdline()):
                return True
    except psutil.Error:
        pass
    return False


@pytest.mark.integration
def test_hub_reconnects_retries_idempotent_calls_and_reports_others(tmp_path, caplog):
    pytest.importorskip("psutil")
    from agent.hub import Hub, ToolError, stdio_specs

    caplog.set_level(logging.WARNING, logger="agent.hub")
    specs = stdio_specs(tmp_path, names=("sim", "memory"), extra_args={"memory": ["--embedder", "hashing"]})
    with Hub(specs, timeout_s=180) as hub:
        assert hub.call("sim", "list_assets", {"limit": 1}).data["total"] > 50
        sim_pid = _server_pid("sim", tmp_path)
        killed = threading.Event()

        def kill_when_busy() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if _sandbox_busy(sim_pid):
                    os.kill(sim_pid, signal.SIGKILL)
                    killed.set()
                    return
                time.sleep(0.01)

        killer = threading.Thread(target=kill_when_busy)
        killer.start()
        # create_scene is annotated idempotent (scenes are stored by spec hash): retried on a new connection
        scene = hub.call("sim", "create_scene", {"source": SLOW_PROGRAM, "seed": 1}).data
        killer.join()
        assert killed.is_set(), "the sim server was not killed during the call"
        assert _server_pid("sim", tmp_path) != sim_pid
        assert any("sim.create_scene failed" in r.getMessage() and "reconnecting" in r.getMessage()
                   for r in caplog.records)
        assert scene["scene_id"] and hub.call("sim", "list_scenes", {}).data["total"] == 1

        # allocate_budget is not idempotent (it counts visits): reported, not retried
        memory_pid = _server_pid("memory", tmp_path)
        os.kill(memory_pid, signal.SIGKILL)
        with pytest.raises(ToolError, match=r"memory\.allocate_budget: connection lost during the call .*not retried"):
            hub.call("memory", "allocate_budget", {"budget": 5})
        status = hub.call("memory", "memory_status", {}).data  # reconnected by the failed call
        assert status["rows"]["modes"] == 0 and _server_pid("memory", tmp_path) != memory_pid


# --- an LLM that returns garbage or times out ---------------------------------------------------------------------


def _evidence(rollout_id: str) -> dict:
    return {"rollout_id": rollout_id, "steps": 40, "success": False, "phase_reached": "grasp",
            "task": {"family": "pick_place", "instruction": "put the mug in the bowl", "template": "custom",
                     "template_seen": None, "relations": ["inside"], "relations_seen": True,
                     "goals": ["inside(mug, bowl)"]}}


class _Result:
    def __init__(self, data):
        self.data = data


class FakeHub:
    """Answers the two tools the critic step calls; records every call."""

    def __init__(self):
        self.calls: list[tuple[str, str, dict]] = []

    def call(self, server: str, tool: str, args: dict | None = None):
        self.calls.append((server, tool, dict(args or {})))
        if tool == "get_rollout_evidence":
            return _Result({"evidence": _evidence(args["rollout_id"])})
        if tool == "record_diagnosis":
            return _Result({"mode_id": f"mode-{args['diagnosis']['factor']}"})
        raise AssertionError(f"unexpected call {server}.{tool}")

    def overhead_seconds(self) -> float:
        return 0.0


def _delayed(seconds: float, then):
    def answer(request):
        time.sleep(seconds)
        return then

    return answer


def test_llm_timeout_is_retried_then_a_clear_error():
    sys.path.insert(0, str(REPO / "tests" / "agent"))
    from scripted_llm_server import ScriptedLLMServer, reply

    from agent.llm import LLMError, Message, make_backend

    good = reply("ok")
    with ScriptedLLMServer([_delayed(1.0, good), good]) as server:  # the first answer comes too late
        backend = make_backend("openai", base_url=server.openai_url, api_key="k", timeout_s=0.4, max_retries=1)
        assert backend.complete([Message.user("hi")]).text == "ok"
        assert len(server.requests) == 2
    with ScriptedLLMServer([_delayed(1.0, good), _delayed(1.0, good)]) as server:
        backend = make_backend("openai", base_url=server.openai_url, api_key="k", timeout_s=0.4, max_retries=1)
        t0 = time.monotonic()
        with pytest.raises(LLMError, match=r"openai request failed \(model .*\): APITimeoutError: Request timed out"):
            backend.complete([Message.user("hi")])
        assert time.monotonic() - t0 < 5 and len(server.requests) == 2


def test_critic_failures_are_skipped_and_the_round_goes_on(tmp_path, caplog):
    """Rollout a: three answers that never validate (LLMOutputError); b: the provider times out (LLMError);
    c: a good diagnosis. The critic step records c only and logs why a and b were skipped."""
    sys.path.insert(0, str(REPO / "tests" / "agent"))
    from scripted_llm_server import ScriptedLLMServer, reply

    from agent.llm import TokenLedger, make_backend
    from agent.loop import CoEvolution
    from agent.presets import get_preset
    from agent.roles.critic import LLMCritic
    from agent.roles.factory import Roles

    good = '{"factor": "spatial", "phase": "grasp", "cause": "a box next to the mug blocks the gripper"}'
    script = [reply("the gripper slipped, I think"), reply("{not json"), reply('{"factor": "magic"}'),  # a
              _delayed(1.0, reply(good)),  # b
              reply(good)]  # c
    caplog.set_level(logging.WARNING, logger="agent.loop")
    with ScriptedLLMServer(script) as server:
        backend = make_backend("openai", base_url=server.openai_url, api_key="k", timeout_s=0.4, max_retries=0)
        ledger = TokenLedger()
        roles = Roles(engine=None, critic=LLMCritic(backend, ledger, max_attempts=3, images=False), compiler=None,
                      ledger=ledger, backend="openai")
        hub = FakeHub()
        loop = CoEvolution(hub, roles, tmp_path, get_preset("tiny"), "run-faults")
        rollouts = [{"rollout_id": rid, "scene_id": "s1", "success": False, "family": "pick_place",
                     "batch": "seed", "mode_id": None} for rid in ("a", "b", "c")]
        diagnoses = loop.diagnose(0, [], rollouts)
    assert [d["rollout_id"] for d in diagnoses] == ["c"]
    assert diagnoses[0]["cause"] == "a box next to the mug blocks the gripper"
    recorded = [args["diagnosis"]["id"] for _, tool, args in hub.calls if tool == "record_diagnosis"]
    assert recorded == ["d-c"]
    warnings = [r.getMessage() for r in caplog.records if r.name == "agent.loop"]
    assert any(w.startswith("critic failed on a: critic: the model's answer did not validate after 3 attempt(s)")
               for w in warnings), warnings
    assert any(w.startswith("critic failed on b: openai request failed") and "timed out" in w for w in warnings)
    assert len(server.requests) == 5 and not server.unexpected


# --- read-only and full run directories ---------------------------------------------------------------------------


class Scratch:
    """A directory on its own small tmpfs (root with mount privileges), else a plain directory."""

    def __init__(self, path: Path, size: str = "64m"):
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.mounted = False
        if os.geteuid() == 0:
            done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                                  capture_output=True)
            self.mounted = done.returncode == 0
        if os.geteuid() == 0 and not self.mounted:
            pytest.skip("as root, a read-only directory needs a read-only mount (mount privileges)")

    def read_only(self) -> None:
        if self.mounted:
            subprocess.run(["mount", "-o", "remount,ro", str(self.path)], check=True)
        else:
            for d in [self.path, *(p for p in self.path.rglob("*") if p.is_dir())]:
                d.chmod(0o555)

    def writable(self) -> None:
        if self.mounted:
            subprocess.run(["mount", "-o", "remount,rw", str(self.path)], check=True)
        else:
            for d in [self.path, *(p for p in self.path.rglob("*") if p.is_dir())]:
                d.chmod(0o755)

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], check=False)
        else:
            self.writable()


def _rollout(i: int, pad: str = "") -> dict:
    return {"id": f"r{i}", "scene_id": "s1", "policy_id": "p", "success": i % 2 == 0, "steps": 10,
            "episode_return": 1.0, "seed": 0, "phase_reached": "release", "summary": {"pad": pad} if pad else {}}


def _rows(client: SyncClient) -> dict:
    result = client.call("memory_status", {})
    assert not result.is_error, text_of(result)
    return result.structured_content["rows"]


def test_memory_server_on_a_read_only_run_directory(tmp_path):
    from memory_store.embed import HashingEmbedder
    from servers.memory import build_server

    scratch = Scratch(tmp_path / "run")
    try:
        with SyncClient(build_server(scratch.path, embedder=HashingEmbedder())) as client:
            assert not client.call("record_scene", {"scene": {"id": "s1", "family": "stack", "program": "p"}}).is_error
            assert not client.call("record_rollouts", {"rollouts": [_rollout(1), _rollout(2)]}).is_error
            scratch.read_only()
            writes = {
                "record_rollouts": {"rollouts": [_rollout(3), _rollout(4), _rollout(5)]},
                "record_scene": {"scene": {"id": "s1", "family": "stack", "program": "p"}},
                "record_diagnosis": {"diagnosis": {"id": "d1", "scene_id": "s1", "factor": "execution",
                                                   "phase": "lift", "cause": "the block slips out of the gripper"}},
                "allocate_budget": {"budget": 4},
                "export_memory": {"directory": "exports/memory"},
            }
            for tool, args in writes.items():
                result = client.call(tool, args)
                assert result.is_error, tool
                message = text_of(result)
                assert "Read-only file system" in message or "Permission denied" in message, (tool, message)
            assert _rows(client) == {"scenes": 1, "rollouts": 2, "diagnoses": 0, "modes": 0,
                                     "generation_programs": 0, "training_programs": 0}
            scratch.writable()  # the same server recovers once the directory is writable again
            assert not client.call("record_rollouts", writes["record_rollouts"]).is_error
            assert _rows(client)["rollouts"] == 5
    finally:
        scratch.close()


def test_memory_server_on_a_full_disk_stores_whole_batches_only(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("a full disk needs a small tmpfs (root with mount privileges)")
    from memory_store.embed import HashingEmbedder
    from servers.memory import build_server

    scratch = Scratch(tmp_path / "run", size="3m")
    try:
        with SyncClient(build_server(scratch.path, embedder=HashingEmbedder())) as client:
            assert not client.call("record_scene", {"scene": {"id": "s1", "family": "stack", "program": "p"}}).is_error
            batches, error = 0, ""
            for b in range(60):  # ~300 kB of incompressible text per batch
                result = client.call("record_rollouts", {"rollouts": [_rollout(100 * b + i, os.urandom(1500).hex())
                                                                      for i in range(100)]})
                if result.is_error:
                    error = text_of(result)
                    break
                batches += 1
            assert error and batches >= 2, (batches, error)
            assert "No space left on device" in error and "the write was not committed" in error, error
            assert _rows(client)["rollouts"] == 100 * batches  # whole batches only: nothing partial
    finally:
        scratch.close()


def test_coda_run_on_a_read_only_runs_directory_exits_with_a_readable_message(tmp_path):
    scratch = Scratch(tmp_path / "runs", size="1m")
    try:
        scratch.read_only()
        done = subprocess.run([sys.executable, "-m", "coda.cli", "run", "--runs-dir", str(scratch.path),
                               "--name", "ro", "--preset", "tiny"], capture_output=True, text=True, cwd=REPO,
                              timeout=300)
    finally:
        scratch.close()
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"cannot write the run directory {scratch.path / 'ro'}" in done.stderr
    assert "Read-only file system" in done.stderr or "Permission denied" in done.stderr
    assert "nothing was started or recorded" in done.stderr and "starting MCP servers" not in done.stderr
    assert not (scratch.path / "ro").exists()
