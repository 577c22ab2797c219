"""Branch rollouts and AWR on the chunks that beat the policy's mean chunk (policy.branch)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from policy.bench import synthetic_observations
from policy.branch import BranchGroup, branch_awr_steps, branch_batch, branch_rollouts
from policy.checkpoint import build_train_state
from policy.config import TrainConfig
from policy.data import ACTION, WEIGHT, collate_obs
from sim.constants import ACTION_DIM, CHUNK, MAX_DPOS
from sim.families import sample_spec


def _group(seed: int, returns, mean_return: float) -> BranchGroup:
    rng = np.random.default_rng(seed)
    obs = synthetic_observations(1, rng)[0]
    chunks = rng.uniform(-MAX_DPOS, MAX_DPOS, (len(returns), CHUNK, ACTION_DIM)).astype(np.float32)
    return BranchGroup("s", 0, obs, chunks, np.asarray(returns, np.float32), mean_return)


def test_branch_batch_keeps_only_chunks_that_beat_the_mean_chunk(embedder):
    groups = [_group(0, [0.0, 0.9, 0.5, 0.0], 0.5), _group(1, [0.0, 0.0], 0.0), _group(2, [0.8, 0.0], 0.0)]
    np.testing.assert_allclose(groups[0].advantages, [-0.5, 0.4, 0.0, -0.5])
    batch = branch_batch(groups, beta=0.2, clip=20.0, embedder=embedder)
    assert len(batch[ACTION]) == 2  # group 0 candidate 1 (A = 0.4) and group 2 candidate 0 (A = 0.8)
    torch.testing.assert_close(batch[ACTION][0], torch.as_tensor(groups[0].chunks[1]))
    torch.testing.assert_close(batch[ACTION][1], torch.as_tensor(groups[2].chunks[0]))
    raw = np.array([np.exp(2.0), 20.0])  # exp(0.4 / 0.2) and exp(4) clipped to 20
    torch.testing.assert_close(batch[WEIGHT], torch.as_tensor(raw / raw.mean(), dtype=torch.float32))
    assert batch["instruction_emb"].shape == (2, 384)
    assert branch_batch([groups[1]], beta=0.1, clip=20.0, embedder=embedder) is None


def test_branch_awr_moves_the_mean_towards_the_better_chunk(small_config, embedder):
    torch.manual_seed(0)
    state = build_train_state(small_config(), TrainConfig(batch_size=16, finetune_warmup=5), with_critic=False,
                              device="cpu")
    group = _group(3, [1.0, 0.0], 0.0)
    obs = collate_obs([group.obs], embedder)
    target = torch.as_tensor(group.chunks[0])
    with torch.no_grad():
        before = float((state.policy.mean_action(obs)[0] - target).abs().mean())
    info = branch_awr_steps(state, [group], updates=60, embedder=embedder)
    with torch.no_grad():
        after = float((state.policy.mean_action(obs)[0] - target).abs().mean())
    assert info["positive_chunks"] == 1 and info["updates"] == 60 and info["mixed_groups"] == 1
    assert state.step == 60
    assert after < 0.5 * before
    none = branch_awr_steps(state, [_group(4, [0.0, 0.0], 0.0)], updates=10, embedder=embedder)
    assert none["positive_chunks"] == 0 and none["updates"] == 0 and state.step == 60


@pytest.mark.parametrize("levels, candidates", [(2, 3)])
def test_branch_rollouts_on_a_scene(levels, candidates, small_config, embedder):
    torch.manual_seed(0)
    state = build_train_state(small_config(), TrainConfig(), with_critic=False, device="cpu")
    specs = [sample_spec("pick_place", 0), sample_spec("pick_place", 1)]
    gen = torch.Generator().manual_seed(0)
    groups = branch_rollouts(state.policy, specs, levels=levels, candidates=candidates, generator=gen,
                             embedder=embedder, batch=2)
    assert len(groups) == len(specs) * levels
    assert [g.step for g in groups] == [0, CHUNK] * len(specs)
    for g in groups:
        assert g.chunks.shape == (candidates, CHUNK, ACTION_DIM) and g.returns.shape == (candidates,)
        assert np.all((g.returns >= 0) & (g.returns <= 1)) and 0.0 <= g.mean_return <= 1.0
    again = branch_rollouts(state.policy, specs, levels=levels, candidates=candidates,
                            generator=torch.Generator().manual_seed(0), embedder=embedder, batch=2)
    for a, b in zip(groups, again, strict=True):  # reproducible from the generator's seed
        np.testing.assert_array_equal(a.chunks, b.chunks)
        np.testing.assert_array_equal(a.returns, b.returns)


def test_shaped_branches_are_cut_and_valued_by_the_potential(small_config, embedder):
    """Φ ≡ 0 with a horizon past the episode's end gives exactly the unshaped returns; a constant Φ = c values
    every cut state γ^n·β·c, so no candidate beats the mean chunk (the trunk is cut after as many steps)."""
    torch.manual_seed(0)
    state = build_train_state(small_config(), TrainConfig(), with_critic=False, device="cpu")
    specs = [sample_spec("pick_place", 0), sample_spec("stack", 1)]
    keys = [s.spec_hash() for s in specs]

    def run(**kw):
        return branch_rollouts(state.policy, specs, levels=2, candidates=3, generator=torch.Generator().manual_seed(0),
                               embedder=embedder, batch=2, **kw)

    plain = run()
    assert not any(g.shaped for g in plain)
    zero = {k: (lambda ib, states: [0.0] * len(states)) for k in keys}
    long = run(phi=zero, horizon=1000)
    assert all(g.shaped for g in long)
    for a, b in zip(plain, long, strict=True):
        np.testing.assert_array_equal(a.chunks, b.chunks)
        np.testing.assert_allclose(a.returns, b.returns)
        assert a.mean_return == pytest.approx(b.mean_return)
    calls = []

    def const(ib, states):
        calls.append(len(states))
        assert isinstance(ib, dict) and all(q.ndim == 1 and v.ndim == 1 for q, v in states)
        return [0.5] * len(states)

    gamma, beta, horizon = 0.99, 2.0, 2
    cut = run(phi={keys[0]: const}, horizon=horizon, beta=beta, gamma=gamma)
    assert [g.shaped for g in cut] == [True, True, False, False]  # only the first scene has a potential
    assert len(calls) == 1 and calls[0] == 2 * 3 + 2  # one call per scene: 2 levels × (3 branches + the trunk)
    expected = gamma ** ((1 + horizon) * CHUNK) * beta * 0.5  # nothing ends within 3 chunks for a random policy
    for g in cut[:2]:
        np.testing.assert_allclose(g.returns, expected, rtol=1e-6)
        assert g.mean_return == pytest.approx(expected, rel=1e-6)
        assert not (g.advantages > 0).any()
    for a, b in zip(plain[2:], cut[2:], strict=True):  # the unshaped scene is untouched
        np.testing.assert_allclose(a.returns, b.returns)
    info = branch_awr_steps(state, cut, updates=5, embedder=embedder)
    assert info["shaped_groups"] == 2 and info["positive_chunks"] == 0
    with pytest.raises(ValueError, match="horizon"):
        run(phi=zero, horizon=-1)



def test_a_potential_that_fails_at_a_cut_state_costs_only_its_scene(small_config, embedder):
    """Session 35 (red team): a potential raising on a branch's cut state aborted the whole round's training. Now
    its scene is reported and trains nothing shaped: "cut" drops its groups (their branches stopped without a
    value), "fallback" keeps their Monte-Carlo returns; the other scenes are as without it."""
    from sim.potential import PotentialError

    torch.manual_seed(0)
    state = build_train_state(small_config(), TrainConfig(), with_critic=False, device="cpu")
    specs = [sample_spec("pick_place", 0), sample_spec("stack", 1)]
    keys = [s.spec_hash() for s in specs]

    def broken(ib, states):
        raise PotentialError("runtime: line 8: ZeroDivisionError: float division by zero")

    def run(**kw):
        return branch_rollouts(state.policy, specs, levels=2, candidates=3, generator=torch.Generator().manual_seed(0),
                               embedder=embedder, batch=2, horizon=2, **kw)

    plain = run()
    failures: dict[str, str] = {}
    cut = run(phi={keys[0]: broken}, failures=failures)
    assert list(failures) == [keys[0]] and "ZeroDivisionError" in failures[keys[0]]
    assert [g.spec_hash for g in cut] == [keys[1], keys[1]] and not any(g.shaped for g in cut)
    for a, b in zip(plain[2:], cut, strict=True):
        np.testing.assert_allclose(a.returns, b.returns)
    failures.clear()
    fallback = run(phi={keys[0]: broken}, failures=failures, shaping="fallback")
    assert list(failures) == [keys[0]] and len(fallback) == 4 and not any(g.shaped for g in fallback)


def test_fallback_shaping_values_only_groups_without_a_success(small_config, embedder, monkeypatch):
    """shaping="fallback": branches run to the end; a group with no success is valued at the cut exactly as
    "cut" values it (same cut states, one Φ call per scene), and a group with a success keeps its sparse returns."""
    from sim.env import CodaEnv

    torch.manual_seed(0)
    state = build_train_state(small_config(), TrainConfig(), with_critic=False, device="cpu")
    specs = [sample_spec("pick_place", 0), sample_spec("stack", 1)]
    seen: dict[str, list] = {"cut": [], "fallback": []}

    def phi_for(mode):
        def phi(ib, states):  # a potential that differs between states: the height of the first free body
            seen[mode].append(len(states))
            return [float(np.clip(q[2], 0.0, 1.0)) for q, _ in states]
        return phi

    def run(mode, **kw):
        return branch_rollouts(state.policy, specs, levels=2, candidates=3, generator=torch.Generator().manual_seed(0),
                               embedder=embedder, batch=2, horizon=2, shaping=mode,
                               phi={s.spec_hash(): phi_for(mode) for s in specs}, **kw)

    plain = branch_rollouts(state.policy, specs, levels=2, candidates=3, generator=torch.Generator().manual_seed(0),
                            embedder=embedder, batch=2)
    assert not any((g.returns > 0).any() or g.mean_return > 0 for g in plain)  # a random policy never succeeds
    cut, fallback = run("cut"), run("fallback")
    assert all(g.shaped for g in fallback) and all(g.complete for g in fallback)
    assert not any(g.complete for g in cut)
    assert seen["cut"] == seen["fallback"] and len(seen["cut"]) == 2  # one potential call per scene, same states
    for a, b in zip(cut, fallback, strict=True):
        np.testing.assert_array_equal(a.returns, b.returns)
        assert a.mean_return == b.mean_return
    info = branch_awr_steps(state, fallback, updates=0, embedder=embedder)
    assert info["shaped_groups"] == 4 and info["branch_success"] == 0.0 and info["mean_chunk_success"] == 0.0

    monkeypatch.setattr(CodaEnv, "success", lambda self: True)  # every group now has a success
    plain = branch_rollouts(state.policy, specs, levels=2, candidates=3, generator=torch.Generator().manual_seed(0),
                            embedder=embedder, batch=2)
    seen["fallback"].clear()
    fallback = run("fallback")
    assert not any(g.shaped for g in fallback) and seen["fallback"] == []  # Φ never consulted
    for a, b in zip(plain, fallback, strict=True):
        np.testing.assert_array_equal(a.returns, b.returns)
        assert a.mean_return == b.mean_return
    with pytest.raises(ValueError, match="shaping"):
        run("sometimes")

def test_state_potential_runs_a_program_in_the_sandbox_like_the_trace_path():
    from policy.rollout import planner_demos
    from sim.engine.potential_templates import write_program
    from sim.potential import potentials, state_potential

    spec = sample_spec("pick_place", 3)
    demo = planner_demos([spec], record=True)[0]
    source = write_program(spec, factor="task", phase="other", cause=f"the task: {spec.task.instruction}",
                           tool="awr_shaped", level=2)
    phi = state_potential(source, spec)
    trace = demo.trace
    values = phi(trace.initial_bottom, [(trace.qpos[t], trace.qvel[t]) for t in range(0, trace.steps + 1, 8)])
    np.testing.assert_allclose(values, potentials(source, spec, trace, every=8)[: len(values)])
    assert values[0] < values[-1] <= 1.0 and all(0.0 <= v <= 1.0 for v in values)
    assert phi(trace.initial_bottom, []) == []
