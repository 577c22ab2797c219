"""`coda bench mcp` (servers.bench) and the `coda serve` registry."""

from __future__ import annotations

import argparse

import pytest

from coda.commands import serve
from servers import bench


def _args(**kw) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    return parser.parse_args([f"--{k}={v}" for k, v in kw.items()])


def test_bench_in_memory_figures():
    out = bench.run(_args(calls=5, warmup=1, transports="memory"))
    assert out["calls"] == 5 and out["memory_mean_ms"] > 0 and out["direct_ms"] > 0
    assert out["memory_p95_ms"] >= out["memory_p50_ms"]


@pytest.mark.integration
def test_bench_all_transports():
    out = bench.run(_args(calls=5, warmup=1))
    for transport in bench.TRANSPORTS:
        assert out[f"{transport}_mean_ms"] > 0, transport


def test_bench_rejects_unknown_transport():
    with pytest.raises(SystemExit, match="carrier-pigeon"):
        bench.run(_args(calls=1, transports="carrier-pigeon"))


def test_serve_registry(tmp_path):
    assert {"sim", "verifier", "memory", "trainer"} <= set(serve.SERVERS)
    assert {"sim", "verifier", "memory"} <= set(serve.available())
    server = serve.build("verifier", tmp_path, embedder="ignored: the verifier takes no embedder")
    assert server.name == "coda-verifier"
    with pytest.raises(SystemExit, match="unknown server"):
        serve.factory("nope")
    if "trainer" not in serve.available():
        with pytest.raises(SystemExit, match="not part of this build"):
            serve.factory("trainer")
