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
    args = parser.parse_args(["--seeds", "0", "--replicates", "2", "--arms", "base_bc,dt_mix,dt_failed_mix,dt_failed_noown_mix,dt_failed_dart_mix,dt_failed_startvar_mix",
                              "--base-demos", "4", "--base-mix", "all",
                              "--base-updates", "4", "--scenes", "2", "--rollouts-per-scene", "1", "--updates", "2",
                              "--eval", "3", "--out", str(out)])
    result = bench_round.run(args)
    assert set(result["arms"]) == {"base_bc", "dt_mix", "dt_failed_mix", "dt_failed_noown_mix", "dt_failed_dart_mix",
                                   "dt_failed_startvar_mix"}
    failed = json.loads(out.read_text())["per_seed"][0]["failed_scenes"]
    assert result["arms"]["dt_failed_mix"]["planner_calls"] == failed <= 2 and result["base_mix"] == "all"
    assert result["arms"]["dt_failed_noown_mix"]["planner_calls"] == failed
    assert result["arms"]["dt_failed_dart_mix"]["planner_calls"] == failed
    assert 0 <= json.loads(out.read_text())["per_seed"][0]["dart_demos"] <= failed  # successful perturbed demos
    assert result["arms"]["dt_failed_startvar_mix"]["planner_calls"] == failed
    assert 0 <= json.loads(out.read_text())["per_seed"][0]["startvar_demos"] <= failed  # demos from other starts
    assert result["arms"]["dt_mix"]["planner_calls"] == 2 and result["arms"]["base_bc"]["planner_calls"] == 0
    assert all(a["vs_base"]["n"] == 3 and a["vs_today"] is None for a in result["arms"].values())
    assert result["arms"]["dt_mix"]["vs_arms"]["base_bc"]["n"] == 3 and "dt_mix" not in result["arms"]["dt_mix"]["vs_arms"]
    raw = json.loads(out.read_text())
    reps = raw["per_seed"][0]["arms"]["dt_mix"]["replicates"]
    assert [r["replicate"] for r in reps] == [0, 1] and all(len(r["success"]) == 3 for r in reps)
    assert raw["commit"] and len(raw["per_seed"][0]["base"]) == 3


def test_bench_round_all_families_tiny():
    """`--family all`: one base and one update over every family; the held-out scenes are `--eval` per family and
    the report gives each arm's success per family; the balanced arm trains on the same data."""
    from policy import bench_round
    from sim.constants import FAMILIES

    parser = argparse.ArgumentParser()
    bench_round.add_arguments(parser)
    args = parser.parse_args(["--family", "all", "--seeds", "0", "--replicates", "1", "--arms",
                              "dt_failed_mix,dt_failed_balanced_mix", "--base-demos", "2", "--base-updates", "2",
                              "--scenes", "1", "--rollouts-per-scene", "1", "--updates", "2", "--eval", "2"])
    result = bench_round.run(args)
    assert result["arms"]["dt_failed_mix"]["vs_base"]["n"] == 2 * len(FAMILIES)
    assert set(result["per_family"]) == {"base", "dt_failed_mix", "dt_failed_balanced_mix"}
    assert all(set(v) == set(FAMILIES) for v in result["per_family"].values())
    calls = {a: result["arms"][a]["planner_calls"] for a in ("dt_failed_mix", "dt_failed_balanced_mix")}
    assert calls["dt_failed_mix"] == calls["dt_failed_balanced_mix"] <= len(FAMILIES)


def test_balance_families_repeats_each_family_to_the_largest():
    """Every family ends with at least the largest family's transitions and no more than one episode beyond;
    episodes stay in their family and in order; empty input stays empty."""
    import numpy as np

    from policy.rollout import Episode
    from policy.train import balance_families

    def ep(family, steps, i):
        return Episode(f"{family}{i}", family, [], np.zeros((steps, 7)), True, steps)

    eps = [ep("prep", 50, 0), ep("prep", 40, 1), ep("pick_place", 20, 0), ep("pick_place", 15, 1), ep("stack", 0, 0)]
    out = balance_families(eps)
    steps = {f: sum(e.steps for e in out if e.family == f) for f in ("prep", "pick_place")}
    assert steps["prep"] == 90 and 90 <= steps["pick_place"] < 90 + 20
    assert [e.spec_hash for e in out if e.family == "pick_place"][:4] == ["pick_place0", "pick_place1"] * 2
    assert not [e for e in out if e.family == "stack"] and balance_families([]) == []
