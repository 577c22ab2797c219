"""SIGTERM to `coda run` (a `timeout`, a job scheduler) closes the MCP servers it started: none runs on as an
orphan (session 37, red team: a trainer server kept training for minutes after its run was gone)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def _processes_naming(text: str) -> list[int]:
    """Pids of the processes whose command line contains `text`."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmd:
                out.append(int(entry.name))
    return out


def _wait(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return predicate()


def test_sigterm_ends_a_run_and_every_server_it_started(tmp_path):
    run_dir = tmp_path / "runs" / "t"
    proc = subprocess.Popen([sys.executable, "-m", "coda.cli", "run", "--preset", "tiny", "--runs-dir",
                             str(tmp_path / "runs"), "--name", "t"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        started = _wait(lambda: any(p != proc.pid for p in _processes_naming(f"serve trainer --run-dir {run_dir}")),
                        120)
        assert started, "the run never started its trainer server"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == "terminated", err
    assert _wait(lambda: not _processes_naming(str(run_dir)), 20), "servers outlived their run"
