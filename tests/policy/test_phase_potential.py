"""Diagnosis potentials local to the failing phase (`policy.phase_potential`, `write_program(local=True)`), the
after-update hook of the training loops, and the critic arms of `coda bench round`."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from policy.phase_potential import episode_potentials, failing_point, scene_program
from policy.rollout import Episode
from sim.engine.perturb import PrematureClose
from sim.engine.potential_templates import write_program
from sim.families import sample_spec
from sim.trace import planner_trace


def _subgoals(source: str) -> list[str]:
    return eval(re.search(r"^SUBGOALS = (.*)$", source, re.M).group(1))  # a literal list written by the template


def test_local_program_ends_at_the_failing_phase():
    spec = sample_spec("pick_place", 3)
    full = _subgoals(write_program(spec, factor="execution", phase="grasp", cause="", tool="awr_shaped"))
    grasp = _subgoals(write_program(spec, factor="execution", phase="grasp", cause="", tool="awr_shaped", local=True))
    place = _subgoals(write_program(spec, factor="execution", phase="place", cause="", tool="awr_shaped", local=True))
    assert len(full) == 6 and grasp == full[:2] and grasp[-1].startswith("grasp")
    assert place == full[:5] and place[-1].startswith("put")
    # prep: two goals; a failure in the second goal's block keeps the whole first block
    st = sample_spec("prep", 1)
    both = _subgoals(write_program(st, factor="execution", phase="grasp", cause="", tool="awr_shaped"))
    second = _subgoals(write_program(st, factor="execution", phase="grasp", cause="", tool="awr_shaped",
                                     local=True, goal=1))
    first = _subgoals(write_program(st, factor="execution", phase="grasp", cause="", tool="awr_shaped",
                                    local=True, goal=0))
    assert len(first) < len(second) < len(both)
    assert second[-1].startswith("grasp") and first[-1].startswith("grasp") and second[: len(both) // 2] == both[: len(both) // 2]


def _failed(family: str, seed: int) -> Episode:
    spec = sample_spec(family, seed)
    demo, trace = planner_trace(spec, PrematureClose(spec, np.random.default_rng(0)))
    assert not trace.success
    return Episode(spec.spec_hash(), family, list(demo.observations), trace.actions, False, trace.steps, seed=seed,
                   trace=trace)


def _solved(family: str, seed: int) -> Episode:
    spec = sample_spec(family, seed)
    demo, trace = planner_trace(spec)
    assert trace.success
    return Episode(spec.spec_hash(), family, list(demo.observations), trace.actions, True, trace.steps, seed=seed,
                   trace=trace)


def test_failing_point_and_potentials_of_a_planted_grasp_failure():
    bad, good = _failed("pick_place", 2), _solved("pick_place", 5)
    goal, phase = failing_point(bad.trace)
    assert goal == 0 and phase in ("approach", "grasp")  # a premature close before the grasp
    assert len(_subgoals(scene_program(bad.trace))) <= 2
    pot, stats = episode_potentials([bad, good], "phase")
    assert set(pot) == {id(bad)}  # the solved scene has no failure to localize: Φ = 0 there
    assert len(pot[id(bad)]) == bad.steps + 1 and all(0.0 <= v <= 1.0 for v in pot[id(bad)])
    assert stats["shaped_scenes"] == 1 and sum(stats["failing_phases"].values()) == 1
    task, tstats = episode_potentials([bad, good], "task")
    assert set(task) == {id(bad), id(good)} and tstats["failing_phases"] == {}
    phi = np.asarray(task[id(good)])
    assert phi[-1] > phi[0] + 0.5  # the task's staged progress rises along the planner's success
    with pytest.raises(ValueError, match="scope"):
        scene_program(bad.trace, "episode")
    with pytest.raises(ValueError, match="record=True"):
        episode_potentials([Episode("h", "pick_place", [], np.zeros((0, 7), np.float32), False, 0)])


def test_after_update_hook_sees_every_update_and_leaves_training_unchanged(small_config, embedder):
    from policy.bench import synthetic_observations
    from policy.checkpoint import build_train_state
    from policy.config import TrainConfig
    from policy.train import bc_finetune, demo_buffer
    from sim.constants import ACTION_DIM, MAX_DPOS

    rng = np.random.default_rng(0)
    eps = [Episode("s", "pick_place", synthetic_observations(13, np.random.default_rng(k)),
                   rng.uniform(-MAX_DPOS, MAX_DPOS, (12, ACTION_DIM)).astype(np.float32), True, 12) for k in range(3)]
    buf = demo_buffer(eps, embedder)
    probe = buf.sample(4, np.random.default_rng(9))

    def train(with_hook: bool) -> tuple[list[torch.Tensor], list[int]]:
        state = build_train_state(small_config(), TrainConfig(batch_size=8, seed=1), with_critic=False, device="cpu")
        state.policy.set_obs_stats(buf.obs_stats())
        seen: list[int] = []

        def hook(k: int) -> None:  # what a curve evaluation does: eval mode, a forward pass, back to train mode
            seen.append(k)
            state.policy.eval()
            with torch.no_grad():
                state.policy.sample(probe, 1)
            state.policy.train()

        torch.manual_seed(1)
        bc_finetune(state, buf, 6, after_update=hook if with_hook else None)
        return [p.detach().clone() for p in state.policy.parameters()], seen

    plain, _ = train(False)
    hooked, seen = train(True)
    assert seen == [1, 2, 3, 4, 5, 6]
    for a, b in zip(plain, hooked, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_bench_round_critic_arms_and_curve_tiny(tmp_path):
    """The critic arms run at tiny sizes; the shaped arms' potentials cover the failed scenes (phase) or every scene
    (task); `--curve` evaluates at the given counts and leaves the final result as without it."""
    import argparse
    import json

    from policy import bench_round

    parser = argparse.ArgumentParser()
    bench_round.add_arguments(parser)

    def run(curve: str, name: str) -> tuple[dict, dict]:
        out = tmp_path / name
        args = parser.parse_args(["--seeds", "0", "--replicates", "1", "--arms",
                                  "dt_failed_mix,dt_critic_mix,dt_shaped_mix,dt_task_shaped_mix,dt_shaped_filtered_mix",
                                  "--base-demos", "4",
                                  "--base-updates", "4", "--scenes", "3", "--rollouts-per-scene", "1", "--updates", "4",
                                  "--critic-updates", "3", "--eval", "3", "--curve", curve, "--out", str(out)])
        return bench_round.run(args), json.loads(out.read_text())["per_seed"][0]

    result, seed = run("2", "curve.json")
    assert result["curve"] == [2] and result["critic_updates"] == 3
    pot = seed["potentials"]
    assert set(pot) == {"dt_shaped_mix", "dt_task_shaped_mix", "dt_shaped_filtered_mix"}
    assert pot["dt_shaped_mix"]["shaped_scenes"] == seed["failed_scenes"]
    assert pot["dt_task_shaped_mix"]["shaped_scenes"] == 3
    for arm in ("dt_failed_mix", "dt_critic_mix", "dt_shaped_mix", "dt_shaped_filtered_mix"):
        summary = result["arms"][arm]
        assert summary["planner_calls"] == seed["failed_scenes"]
        assert set(summary["curve"]) == {"2", "4"} and len(summary["updates_to_base_plus_5"]) == 1
        assert len(seed["arms"][arm]["replicates"][0]["curve"]["2"]) == 3
    for arm in ("dt_critic_mix", "dt_shaped_filtered_mix"):  # the critic arms report how many chunks A > 0 keeps
        assert 0.0 <= seed["arms"][arm]["replicates"][0]["positive_share"] <= 1.0
    plain, plain_seed = run("", "plain.json")
    assert "curve" not in plain["arms"]["dt_shaped_mix"]
    for arm in plain_seed["arms"]:  # the curve's evaluations do not change what the arms learn
        assert plain_seed["arms"][arm]["replicates"][0]["success"] == seed["arms"][arm]["replicates"][0]["success"]
    with pytest.raises(ValueError, match="--curve"):
        bench_round.curve_points("4", 4)
    with pytest.raises(ValueError, match="--curve"):
        bench_round.curve_points("a,b", 4)
