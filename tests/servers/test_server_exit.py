"""A server whose client is gone ends: stdin reaching its end (the client closed it or was killed) cancels the
server's jobs and, when one does not stop within the grace time, ends the process instead of leaving an orphan
server busy with a job whose result reaches no one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from servers.transport import JOB_GRACE_S

pytestmark = pytest.mark.integration  # starts a server subprocess

SERVER = """
import sys, time
from pathlib import Path
from mcp.server.mcpserver import MCPServer
from servers.jobs import JobManager
from servers.transport import serve

server = MCPServer("exit-check")
jobs = JobManager(Path(sys.argv[1]))

def cooperative(job):
    for i in range(6000):
        job.progress(i, 6000)
        time.sleep(0.01)

def stubborn(job):  # never reports progress, so it cannot be cancelled
    time.sleep(600)

@server.tool()
def start(kind: str) -> str:
    return jobs.start(cooperative if kind == "cooperative" else stubborn, kind=kind)

serve(server)
"""


def _session(tmp_path, kinds: list[str]) -> tuple[subprocess.Popen, list[str]]:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "jobs")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": repo})

    def send(message: dict) -> None:
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}})
    assert json.loads(proc.stdout.readline())["id"] == 0
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    ids = []
    for i, kind in enumerate(kinds, start=1):
        send({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "start", "arguments": {"kind": kind}}})
        ids.append(json.loads(proc.stdout.readline())["result"]["structuredContent"]["result"])
    return proc, ids


def _states(tmp_path, ids: list[str]) -> list[str]:
    return [json.loads((tmp_path / "jobs" / f"{j}.json").read_text())["state"] for j in ids]


def test_a_cancellable_job_is_cancelled_when_stdin_ends(tmp_path):
    proc, ids = _session(tmp_path, ["cooperative"])
    time.sleep(0.3)
    assert _states(tmp_path, ids) == ["running"]
    start = time.monotonic()
    proc.stdin.close()  # what a killed client leaves behind
    assert proc.wait(timeout=30) == 0
    assert time.monotonic() - start < JOB_GRACE_S  # it stopped at its next progress report, not at the deadline
    assert _states(tmp_path, ids) == ["cancelled"]


def test_a_job_that_cannot_be_cancelled_ends_with_the_process(tmp_path):
    proc, ids = _session(tmp_path, ["stubborn"])
    start = time.monotonic()
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0  # without the fix it would run on for ten minutes
    assert JOB_GRACE_S <= time.monotonic() - start < JOB_GRACE_S + 10
    assert _states(tmp_path, ids) == ["running"]  # the next server on this directory reports it interrupted


def test_stop_all_jobs_cancels_queued_jobs_at_once():
    """A queued job behind a running one is final (cancelled) as soon as the jobs are stopped: the closing server
    waits only for the running one."""
    from servers.jobs import JobManager, stop_all_jobs

    jobs = JobManager(None, max_workers=1)

    def cooperative(job):
        for i in range(10_000):
            job.progress(i, 10_000)
            time.sleep(0.01)

    running, queued = jobs.start(cooperative), jobs.start(cooperative)
    time.sleep(0.1)
    assert jobs.status(queued).state == "queued"
    start = time.monotonic()
    assert stop_all_jobs(grace_s=5.0) == []
    assert time.monotonic() - start < 2.0
    assert jobs.status(queued).state == "cancelled" and jobs.status(running).state == "cancelled"


def test_a_client_that_died_mid_answer_still_ends_the_jobs(tmp_path):
    """A client killed while its server answers: the answer meets a broken pipe, which ends the transport with an
    error — the jobs still end with it instead of keeping the orphan server busy."""
    proc, ids = _session(tmp_path, ["stubborn"])
    proc.stdout.close()  # nobody reads the answers any more
    request = {"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": "start",
                                                                             "arguments": {"kind": "stubborn"}}}
    try:
        proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        time.sleep(0.5)  # its answer is written into the closed pipe
        proc.stdin.close()
    except BrokenPipeError:  # the server is already gone
        pass
    try:
        proc.wait(timeout=JOB_GRACE_S + 30)
    finally:
        if proc.poll() is None:  # the failure this test looks for: do not leave the orphan behind
            proc.kill()
    assert _states(tmp_path, ids[:1]) == ["running"]  # ended with the process; the next server reports it interrupted
