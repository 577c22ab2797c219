"""Branch rollouts: Monte-Carlo advantages of sampled chunks over the chunk the policy deploys, and AWR on them.

The policy is deployed (evaluated) with its mean chunk. A *trunk* episode follows the mean chunks from reset. At
its first `levels` chunk boundaries the simulator state is copied into `candidates` branches; branch i executes
one chunk c_i sampled from the policy, then follows the mean policy to the end of the episode. With the branch
state s at control step t, branch i ending at step T_i, and the trunk ending at T:

    G_i = γ^(T_i − t) · success_i        G_mean(s) = γ^(T − t) · success_trunk
    A_i = G_i − G_mean(s)               (the advantage of c_i over the deployed mean chunk at s)

AWR then regresses the policy onto the chunks that beat the deployed one: weights exp(A/β) clipped, zero for
A ≤ 0, normalized to mean 1 over the kept chunks.

Text2potential (scenes with a potential Φ in `phi`): branches and the trunk's baseline are cut `horizon` chunks
after the branched chunk, and the cut state is valued by the potential. A rollout cut at step T' that has not
ended returns γ^(T' − t) · β · Φ(s_T'); one that ends before the cut returns γ^(T − t) · success (Φ = 0 at
terminal states). These are the potential-shaped returns r + γΦ(s') − Φ(s) summed to the cut, less the −βΦ(s)
that every candidate from s shares, so the advantages are the shaped ones: dense where successes are rare, and
the branches are shorter. With Φ ≡ 0 the same cut gives sparse truncated returns (the control).

`shaping="fallback"` uses Φ only where the sparse outcome says nothing: every branch runs to the end of its
episode as in an unshaped scene, and only a group in which no candidate and not the trunk succeeded is valued
at the cut by β·Φ. Groups with a success keep their Monte-Carlo advantages, so the potential adds a signal where
there was none instead of blurring one that exists.

Why not the critic on ordinary rollouts (`policy.improve.awr_round`)? Measured on a weak pick_place policy
(docs/BENCHMARKS.md, Policy): a chunk critic fit on a few hundred sparse-reward episodes ranks held-out chunks
barely better than chance (AUC 0.55–0.65), so its advantages carry little information, and regressing onto
the policy's own sampled chunks with nearly uniform weights pulls it back towards its old behaviour (even
imitating only its successful episodes did not help). Branches compare chunks *from the same state*, so the
advantage needs no learned value; the baseline is the deployed chunk, so a chunk that is no better than what
the policy already does is never imitated, however lucky its episode.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from policy.awr import _step
from policy.buffer import ChunkReplayBuffer
from policy.checkpoint import TrainState
from policy.config import autocast
from policy.data import ACTION, WEIGHT, collate_obs, stack_obs, to_tensors
from policy.text import get_embedder
from sim.compile import compile_scene
from sim.constants import OBS_INSTRUCTION
from sim.env import CodaEnv
from sim.spec import SceneSpec


@dataclass
class BranchGroup:
    """The candidates tried from one trunk state and their returns."""

    spec_hash: str
    step: int
    """control step of the branch state"""
    obs: dict
    """the observation at the branch state"""
    chunks: np.ndarray
    """(J, h, A) candidate chunks, env units"""
    returns: np.ndarray
    """(J,) G_i of each candidate's branch"""
    mean_return: float
    """G_mean: the trunk's return from this state (mean chunk, then the mean policy)"""
    shaped: bool = False
    """returns are cut and valued by a potential (module doc), so returns > 0 no longer mean success"""
    complete: bool = True
    """the branches and the trunk ran to the end of their episodes (false when cut: `shaping="cut"`); a shaped
    complete group had no success at all (`shaping="fallback"`)"""

    @property
    def advantages(self) -> np.ndarray:
        return self.returns - self.mean_return


def _follow(policy, envs: list[CodaEnv], obs: list[dict], embedder, device, chunks: list[int | None] | None = None,
            after_chunk: Callable[[int, bool], None] | None = None) -> list[bool]:
    """Follow the mean policy until each env's episode ends or env i has run `chunks[i]` chunks (None = to the
    end); one batched forward pass per chunk. `after_chunk(i, ended)` is called after each chunk of env i.
    Returns which episodes ended."""
    limit = list(chunks) if chunks is not None else [None] * len(envs)
    ended = [False] * len(envs)
    while live := [i for i in range(len(envs)) if not ended[i] and (limit[i] is None or limit[i] > 0)]:
        with torch.no_grad():
            means = policy.mean_action(collate_obs([obs[i] for i in live], embedder, device)).cpu().numpy()
        for k, i in enumerate(live):
            obs[i], ended[i] = _run_chunk(envs[i], means[k])
            if limit[i] is not None:
                limit[i] -= 1
            if after_chunk is not None:
                after_chunk(i, ended[i])
    return ended


def _run_chunk(env: CodaEnv, chunk: np.ndarray) -> tuple[dict, bool]:
    obs, ended = None, False
    for a in chunk:
        obs, _, term, trunc, _ = env.step(a)
        if term or trunc:
            ended = True
            break
    return obs, ended


SHAPING_MODES = ("cut", "fallback")

PhiFn = Callable[[dict, list[tuple[np.ndarray, np.ndarray]]], list[float]]
"""Φ of one scene: (initial_bottom, [(qpos, qvel), ...]) -> values in [0, 1] (`sim.potential.state_potential`)"""


def _snapshot(env: CodaEnv) -> tuple[np.ndarray, np.ndarray]:
    return env.data.qpos.copy(), env.data.qvel.copy()


def branch_rollouts(policy, specs: Sequence[SceneSpec], *, levels: int = 2, candidates: int = 8,
                    gamma: float = 0.99, generator: torch.Generator | None = None, device="cpu", embedder=None,
                    batch: int = 16, phi: Mapping[str, PhiFn] | None = None, horizon: int = 3,
                    beta: float = 1.0, shaping: str = "cut", failures: dict[str, str] | None = None
                    ) -> list[BranchGroup]:
    """Branch groups at the first `levels` chunk boundaries of each scene's mean-policy episode (see module doc),
    in spec order, then by step (a trunk that ends earlier has fewer).

    Scenes whose spec hash is in `phi` are shaped: their branches and trunk baselines are cut `horizon` chunks
    after the branched chunk and the cut states valued by β·Φ (`shaping="cut"`), or run to the end and valued
    at the cut only in groups without any success (`shaping="fallback"`). Scenes are processed `batch` at a time;
    inference is batched over all their trunks and branches.

    A scene whose potential fails on its cut states (`sim.potential.PotentialError`, e.g. a state its program was
    not checked on) is recorded in `failures` (spec hash -> why) and trains nothing shaped: with "cut" its groups
    are dropped (their branches stopped at the cut, so they have no return), with "fallback" they keep their
    Monte-Carlo returns.
    """
    if levels < 1 or candidates < 1:
        raise ValueError(f"levels and candidates must be >= 1, got levels={levels}, candidates={candidates}")
    if horizon < 0:
        raise ValueError(f"horizon must be >= 0, got {horizon}")
    if shaping not in SHAPING_MODES:
        raise ValueError(f"shaping must be one of {', '.join(SHAPING_MODES)}, got {shaping!r}")
    embedder = embedder or get_embedder()
    policy.eval()
    groups: list[BranchGroup] = []
    for start in range(0, len(specs), batch):
        groups += _branch_part(policy, specs[start : start + batch], levels, candidates, gamma, generator, device,
                               embedder, phi or {}, horizon, beta, shaping == "fallback",
                               failures if failures is not None else {})
    return groups


def _branch_part(policy, part, levels, candidates, gamma, generator, device, embedder, phi, horizon, beta,
                 fallback, failures) -> list[BranchGroup]:
    """`branch_rollouts` on one batch of scenes."""
    groups: list[BranchGroup] = []
    shaped = [s.spec_hash() in phi for s in part]
    stop = [sh and not fallback for sh in shaped]  # branches and trunk stop at the cut
    compiled = [compile_scene(s) for s in part]
    trunks = [CodaEnv(c) for c in compiled]
    trunk_obs = [t.reset(seed=0) for t in trunks]
    trunk_done = [False] * len(trunks)
    # shaped scenes: the trunk's (steps, ended, state) after every chunk, index = chunks run
    log: list[list[tuple[int, bool, tuple | None]]] = [[(0, False, _snapshot(t) if sh else None)]
                                                        for t, sh in zip(trunks, shaped, strict=True)]

    def logged(i: int, ended: bool) -> None:
        if shaped[i]:
            log[i].append((trunks[i].steps, ended, _snapshot(trunks[i])))

    mine: list[tuple[int, int, BranchGroup, list[CodaEnv], list[bool]]] = []  # scene, level, group, envs, ended
    cut: dict[tuple[int, int, int], tuple[int, bool, tuple | None]] = {}  # shaped branch -> (steps, ended, state)
    for level in range(levels):
        live = [i for i, d in enumerate(trunk_done) if not d]
        if not live:
            break
        with torch.no_grad():
            obs_batch = collate_obs([trunk_obs[i] for i in live], embedder, device)
            means = policy.mean_action(obs_batch).cpu().numpy()
            samples = policy.sample(obs_batch, candidates, generator=generator).cpu().numpy()
        branch_envs, branch_obs, branch_limit, owners, keys = [], [], [], [], []
        for k, i in enumerate(live):
            saved, envs, ended = trunks[i].get_state(), [], [False] * candidates
            for j, c in enumerate(samples[k]):
                env = CodaEnv(compiled[i])
                env.reset(seed=0)
                env.set_state(saved)
                obs, ended[j] = _run_chunk(env, c)
                envs.append(env)
                if shaped[i] and (ended[j] or horizon == 0):
                    cut[(i, level, j)] = (env.steps, ended[j], None if ended[j] else _snapshot(env))
                if not ended[j] and (not stop[i] or horizon > 0):
                    branch_envs.append(env)
                    branch_obs.append(obs)
                    branch_limit.append(horizon if stop[i] else None)
                    owners.append((ended, j))
                    keys.append((i, level, j) if shaped[i] and horizon > 0 else None)
            group = BranchGroup(part[i].spec_hash(), trunks[i].steps, trunk_obs[i],
                                samples[k].astype(np.float32), np.zeros(candidates, np.float32), 0.0, shaped[i])
            mine.append((i, level, group, envs, ended))
            trunk_obs[i], trunk_done[i] = _run_chunk(trunks[i], means[k])
            logged(i, trunk_done[i])
        done = _follow(policy, branch_envs, branch_obs, embedder, device, branch_limit,
                       after_chunk=_cut_recorder(branch_envs, keys, cut, horizon))
        for (ended, j), d in zip(owners, done, strict=True):
            ended[j] = d
    rest = [i for i, d in enumerate(trunk_done) if not d]
    # a shaped trunk is only needed up to its last level's cut; an unshaped one runs to the end
    need = [(levels + horizon - len(log[i]) + 1) if stop[i] else None for i in rest]
    _follow(policy, [trunks[i] for i in rest], [trunk_obs[i] for i in rest], embedder, device,
            [None if n is None else max(n, 0) for n in need], after_chunk=lambda k, e: logged(rest[k], e))
    # the groups valued at the cut: every group of a shaped scene, or (fallback) those without a success
    valued = set()
    for i, level, group, envs, _ in mine:
        group.returns = np.array([gamma ** (e.steps - group.step) * e.success() for e in envs], np.float32)
        group.mean_return = float(gamma ** (trunks[i].steps - group.step) * trunks[i].success())
        if shaped[i] and (not fallback or not (group.returns.any() or group.mean_return > 0)):
            valued.add((i, level))
    values, failed = _cut_values(part, trunks, mine, log, cut, valued, phi, horizon)
    for i in failed:
        failures[part[i].spec_hash()] = failed[i]
    for i, level, group, envs, _ in sorted(mine, key=lambda m: (m[0], m[1])):  # spec order, then step
        if i in failed and stop[i]:  # cut branches without a value at the cut: no return to learn from
            continue
        if (i, level) in valued and i not in failed:
            group.shaped = True
            group.returns = np.array([_cut_return(*cut[(i, level, j)][:2], cut[(i, level, j)][1] and e.success(),
                                                  values.get((i, level, j)), group.step, gamma, beta)
                                      for j, e in enumerate(envs)], np.float32)
            steps, t_ended, _ = log[i][min(level + 1 + horizon, len(log[i]) - 1)]
            group.mean_return = _cut_return(steps, t_ended, t_ended and trunks[i].success(),
                                            values.get((i, level, "trunk")), group.step, gamma, beta)
        else:
            group.shaped = False
        group.complete = not stop[i]
        groups.append(group)
    return groups


def _cut_recorder(envs: list[CodaEnv], keys: list, cut: dict, horizon: int) -> Callable[[int, bool], None]:
    """An `after_chunk` for `_follow` that records env k's (steps, ended, state) in `cut[keys[k]]` once it has
    run `horizon` chunks or ended (keys[k] None: not recorded)."""
    followed = [0] * len(envs)

    def record(k: int, ended: bool) -> None:
        followed[k] += 1
        if keys[k] is not None and keys[k] not in cut and (ended or followed[k] == horizon):
            cut[keys[k]] = (envs[k].steps, ended, None if ended else _snapshot(envs[k]))

    return record


def _cut_values(part, trunks, mine, log, cut, valued, phi, horizon) -> tuple[dict, dict[int, str]]:
    """β-free Φ at every cut state of the `valued` groups that did not end, one potential call per scene; and the
    scenes (index -> why) whose potential failed there."""
    from sim.potential import PotentialError

    values: dict = {}
    failed: dict[int, str] = {}
    for i, spec in enumerate(part):
        keys, states = [], []
        for si, level, _, envs, _ in mine:
            if si != i or (i, level) not in valued:
                continue
            for j in range(len(envs)):
                _, ended, state = cut[(i, level, j)]
                if not ended:
                    keys.append((i, level, j))
                    states.append(state)
            _, t_ended, state = log[i][min(level + 1 + horizon, len(log[i]) - 1)]
            if not t_ended:
                keys.append((i, level, "trunk"))
                states.append(state)
        if keys:
            try:
                vals = phi[spec.spec_hash()](trunks[i].state.initial_bottom, states)
            except PotentialError as exc:
                failed[i] = f"at a branch's cut state: {exc}"
                continue
            if len(vals) != len(keys):
                raise ValueError(f"potential returned {len(vals)} values for {len(keys)} states")
            values.update(zip(keys, vals, strict=True))
    return values, failed


def _cut_return(steps: int, ended: bool, success: bool, phi: float | None, t: int, gamma: float,
                beta: float) -> float:
    """Return from step t of a rollout cut at `steps`: the success if it ended there, else β·Φ of the cut state."""
    if ended:
        return float(gamma ** (steps - t) * success)
    return float(gamma ** (steps - t) * beta * (phi or 0.0))


def branch_batch(groups: Sequence[BranchGroup], beta: float, clip: float, embedder=None,
                 device="cpu") -> dict[str, torch.Tensor] | None:
    """The chunks with a positive advantage as one tensor batch with AWR weights (mean 1), or None if none."""
    keep = [(g, j) for g in groups for j in np.flatnonzero(g.advantages > 0)]
    if not keep:
        return None
    adv = np.array([g.advantages[j] for g, j in keep], dtype=np.float64)
    weight = np.exp(np.minimum(adv / beta, math.log(clip)))
    observations = [g.obs for g, _ in keep]
    arrays = stack_obs(observations)
    arrays[ACTION] = np.stack([g.chunks[j] for g, j in keep])
    arrays[WEIGHT] = (weight / weight.mean()).astype(np.float32)
    batch = to_tensors(arrays, device)
    emb = (embedder or get_embedder()).embed([str(o[OBS_INSTRUCTION]) for o in observations])
    batch["instruction_emb"] = torch.as_tensor(emb, device=device)
    return batch


def branch_awr_steps(state: TrainState, groups: Sequence[BranchGroup], updates: int,
                     demos: ChunkReplayBuffer | None = None, embedder=None) -> dict:
    """AWR updates on the positive-advantage branch chunks (+ `bc_weight` × BC on demos when given)."""
    cfg, t0 = state.train_config, time.perf_counter()
    data = branch_batch(groups, cfg.awr_beta, cfg.awr_weight_clip, embedder, state.device)
    kept = 0 if data is None else len(data[ACTION])
    losses: list[float] = []
    if data is not None and updates:
        from policy.train import finetune_schedule

        set_lr = finetune_schedule(state)
        state.policy.train()
        params = [p for p in state.policy.parameters() if p.requires_grad]
        for i in range(updates):
            set_lr(i)
            idx = torch.as_tensor(state.rng.integers(0, kept, cfg.batch_size), device=state.device)
            batch = {k: v[idx] for k, v in data.items()}
            with autocast(cfg, state.device):
                loss, _ = state.policy(batch)
                if demos is not None and len(demos) and cfg.bc_weight > 0:
                    demo = demos.sample(cfg.batch_size, state.rng, state.device)
                    loss = loss + cfg.bc_weight * state.policy({k: v for k, v in demo.items() if k != WEIGHT})[0]
            _step(state.policy_optimizer, loss, params, cfg.grad_clip)
            losses.append(float(loss.detach()))
            state.step += 1
        state.policy.eval()
    adv = np.concatenate([g.advantages for g in groups]) if groups else np.zeros(0)
    full = [g for g in groups if g.complete]
    return {"groups": len(groups), "shaped_groups": sum(g.shaped for g in groups), "chunks": int(adv.size),
            "positive_chunks": kept, "mixed_groups": sum(bool((g.advantages != 0).any()) for g in groups),
            # success of the candidate branches / the trunk, over the groups run to the episode's end
            "branch_success": float(np.mean([0.0 if g.shaped else (g.returns > 0).mean() for g in full]))
            if full else None,
            "mean_chunk_success": float(np.mean([not g.shaped and g.mean_return > 0 for g in full])) if full else None,
            "updates": updates if kept else 0, "seconds": round(time.perf_counter() - t0, 2),
            "final_loss": float(np.mean(losses[-20:])) if losses else float("nan")}
