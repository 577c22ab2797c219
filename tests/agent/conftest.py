"""A hub over in-memory sim and verifier servers: the roles reach the simulator only through their tools."""

from __future__ import annotations

import pytest

from agent.hub import Hub, ServerSpec


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    from servers import sim, verifier

    run_dir = tmp_path_factory.mktemp("run")
    h = Hub([ServerSpec("sim", server=sim.build_server(run_dir)),
             ServerSpec("verifier", server=verifier.build_server(run_dir))]).start()
    yield h
    h.close()
