"""The official MCP conformance suite (scripts/conformance.sh: node 22 and @modelcontextprotocol/conformance from
npm) against the four servers over streamable HTTP: every applicable scenario passes, completions and logging
included."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is needed to fetch node 22 and the conformance suite")
def test_conformance_scenarios_pass_on_all_four_servers():
    done = subprocess.run(["bash", str(REPO / "scripts" / "conformance.sh")], cwd=REPO, capture_output=True,
                          text=True, timeout=1200)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(("PASS", "FAIL"))]
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(lines) == 4 * 8 and all(ln.startswith("PASS") for ln in lines), "\n".join(lines)
    assert sum("completion-complete" in ln for ln in lines) == 4 and sum("logging-set-level" in ln for ln in lines) == 4
