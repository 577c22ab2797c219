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


def test_bench_round_tiny(tmp_path):
    """`coda bench round` at tiny sizes: every chosen arm is trained per replicate from copies of one base, the
    results are paired with the base on the same held-out scenes, and the raw file is written."""
    import json

    from policy import bench_round

    parser = argparse.ArgumentParser()
    bench_round.add_arguments(parser)
    out = tmp_path / "round.json"
    args = parser.parse_args(["--seeds", "0", "--replicates", "2", "--arms", "base_bc,dt_mix,dt_failed_mix", "--base-demos", "4", "--base-mix", "all",
                              "--base-updates", "4", "--scenes", "2", "--rollouts-per-scene", "1", "--updates", "2",
                              "--eval", "3", "--out", str(out)])
    result = bench_round.run(args)
    assert set(result["arms"]) == {"base_bc", "dt_mix", "dt_failed_mix"}
    failed = json.loads(out.read_text())["per_seed"][0]["failed_scenes"]
    assert result["arms"]["dt_failed_mix"]["planner_calls"] == failed <= 2 and result["base_mix"] == "all"
    assert result["arms"]["dt_mix"]["planner_calls"] == 2 and result["arms"]["base_bc"]["planner_calls"] == 0
    assert all(a["vs_base"]["n"] == 3 and a["vs_today"] is None for a in result["arms"].values())
    assert result["arms"]["dt_mix"]["vs_arms"]["base_bc"]["n"] == 3 and "dt_mix" not in result["arms"]["dt_mix"]["vs_arms"]
    raw = json.loads(out.read_text())
    reps = raw["per_seed"][0]["arms"]["dt_mix"]["replicates"]
    assert [r["replicate"] for r in reps] == [0, 1] and all(len(r["success"]) == 3 for r in reps)
    assert raw["commit"] and len(raw["per_seed"][0]["base"]) == 3
