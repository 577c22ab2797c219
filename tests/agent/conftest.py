"""A hub over in-memory sim, verifier and memory servers: the roles reach the simulator and the memory only through
their tools."""

from __future__ import annotations

import pytest

from agent.hub import Hub, ServerSpec


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    from memory_store.embed import HashingEmbedder
    from servers import memory, sim, verifier

    run_dir = tmp_path_factory.mktemp("run")
    h = Hub([ServerSpec("sim", server=sim.build_server(run_dir)),
             ServerSpec("verifier", server=verifier.build_server(run_dir)),
             ServerSpec("memory", server=memory.build_server(run_dir, embedder=HashingEmbedder()))]).start()
    yield h
    h.close()
