"""`coda bench policy` runs end to end at tiny sizes and reports every figure."""

from __future__ import annotations

import argparse

from policy import bench


def test_bench_policy_tiny():
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    args = parser.parse_args(["--batch-size", "8", "--seconds", "0.01", "--devices", "cpu", "--envs", "2",
                              "--d-model", "16", "--layers", "1", "--candidates", "2"])
    result = bench.run(args)
    for backbone in ("transformer", "deepsets"):
        for key in ("bc_updates_per_s", "awr_updates_per_s", "critic_updates_per_s", "batched_chunks_per_s",
                    "unbatched_chunks_per_s", "batched_speedup"):
            assert result[f"{backbone}.cpu.{key}"] > 0
