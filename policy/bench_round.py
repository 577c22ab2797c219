"""One round from a weak base, update by update: held-out success before → after, planner calls and CPU per arm.

Run as `coda bench round --family F --json`. Per seed: a weak base (BC on `--base-demos` planner demonstrations,
`--base-updates` updates), `--scenes` fresh training-distribution scenes standing for the round's accepted
environments, the base's own rollouts on them (`--rollouts-per-scene`, sampled), and the same `--eval` held-out
in-distribution scenes for the base and every arm (paired). Each arm updates a copy of the base once per training
replicate (training seed = replicate), so a difference between arms is read against the spread of replicates
trained on identical data.

Arms (`--arms`, all with the same number of policy updates `--updates`):
- `today`: the round update of the loop before issue 19: `--updates` critic updates on the base's rollouts, then
  branch AWR with BC on the first half of the base's own SFT demonstrations.
- `dt`: BC on D_t, the planner demonstrations of every round scene (the paper's D_t) plus the base's successful
  rollouts.
- `dt_branch`: branch AWR with BC on D_t instead of the base's demonstrations (no critic updates: nothing reads
  the critic).
- `base_bc`: BC on the first half of the base's demonstrations only (the control for `dt`: same updates, no new
  data).
- `dt_mix`: BC on D_t and the first half of the base's demonstrations (D_t added to the base-demo mix, not
  replacing it).
- `dt_branch_mix`: branch AWR with BC on D_t and the first half of the base's demonstrations.
- `dt_failed_mix`: BC on the planner demonstrations of the round scenes where every base rollout failed (D_t where
  the policy needs it; fewer planner calls) plus the base's successes and the base-demo mix.
- `takeover_diag_mix`: BC on planner takeover windows (`policy.takeover`) of the round scenes where every base
  rollout failed — the env restored exactly at the step where the failure starts (the offline critic's evidence
  step), the planner's corrective window from there (its own step budget) — plus the base's successes and the
  base-demo mix; planner calls = failed scenes, as `dt_failed_mix`.
- `takeover_random_mix`: the same with the takeover step drawn uniformly over the failed episode's steps.
  (The base rollouts are recorded with traces only when a takeover arm is chosen.)
- `dt_critic_mix`: a fresh chunk critic trained on the base's rollouts (`--critic-updates` TD updates, sparse
  rewards), then AWR on those rollouts with advantages from that critic (`advantage = "q"`) plus BC on the
  `dt_failed_mix` data — the control for the shaped critic.
- `dt_shaped_mix`: the same with potential-based shaping in the critic's TD targets, r + γ^h Φ(s') − Φ(s), Φ the
  diagnosis potential local to the failing phase of each failed scene (`policy.phase_potential`, scope
  "phase"); the policy's advantages come from the shaped critic, so the optimal policy is unchanged (issue 19
  item 5).
- `dt_task_shaped_mix`: the same with Φ the task's staged progress on every scene (scope "task"): locality's
  control.

- `dt_filtered_mix` / `dt_shaped_filtered_mix`: as `dt_critic_mix` / `dt_shaped_mix`, but the critic only
  selects: the policy clones its own chunks with A > 0 (as strongly as the demonstrations) and none of the others
  (`TrainConfig.awr_weighting = "filter"`), instead of weighting every chunk by exp(A / β).

- `dt_failed_noown_mix`: the `dt_failed_mix` data without the base's own successful rollouts (planner demos of
  the failed scenes + the base-demo mix): does cloning the policy's own successes help or dilute?

- `dt_failed_dart_mix`: the `dt_failed_mix` data with DART-style planner demonstrations on the failed scenes
  (`policy.demos.perturbed_planner_demos`, the module's defaults: bursts of executed position noise, the
  planner's corrections recorded, only windows free of perturbed steps cloned) instead of clean ones; the same
  planner calls.

- `dt_failed_startvar_mix`: the `dt_failed_mix` data with each failed scene's planner demonstration starting the
  hand elsewhere (`sim.engine.variations.other_start`: offsets, tilt, turn and finger opening drawn from
  `START_RANGES` around home) instead of at home; the same planner calls, the evaluation from home as always.

- `dt_failed_balanced_mix`: the `dt_failed_mix` data with each family's episodes repeated until every family
  contributes as many transitions as the largest (`policy.train.balance_families`); with `--family all` only
  (one family: the same as `dt_failed_mix`).

- `dt_failed_phase_mix`: the `dt_failed_mix` data with each failed scene's planner demonstration phase-weighted
  (`policy.phase_weight`): its chunk windows over the (goal, phase) where the scene's first failed rollout went
  wrong (the offline critic's evidence step) added `--phase-extra` more times; the same planner calls. A lever only
  a diagnosing method has; round decision v10: no better than a random phase (+0.6 ± 1.4 / −0.2 ± 1.6), not adopted.
- `dt_failed_randphase_mix`: the same with a span of the demonstration's timeline drawn at random (its control).

`--family all` runs every family at once, as the loop's round does: the base on `--base-demos` demonstrations of
each family, `--scenes` round scenes and `--eval` held-out scenes per family, one update over all of them; the
report adds each arm's success per family (`per_family`).

`--curve 50,100` also evaluates the BC and critic arms (`CURVE_ARMS`) on the held-out scenes after those numbers of policy updates (the
evaluation does not change the training), for "updates to reach base + 5".

`--base-mix all` makes the base-demo mix all of the base's demonstrations instead of the first half (a base
trained to convergence on them: the control `base_bc` then adds no new information).

Reported per arm: success mean over replicates and seeds, the paired difference to the base, to `today` and to
every other arm (`vs_arms`)
(per scene: the replicate mean minus the reference; ± the standard error over scenes, pooled over seeds), the
spread of replicates, planner calls and CPU seconds of the update (this process, `time.process_time`).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import math
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from policy.checkpoint import TrainState, seed_everything
from policy.config import PolicyConfig, TrainConfig
from policy.demos import perturbed_planner_demos
from policy.evaluate import eval_specs, train_specs
from policy.improve import awr_round, branch_round, collect
from policy.phase_potential import episode_potentials
from policy.phase_weight import ARM_RULE as PHASE_RULE
from policy.phase_weight import phase_weighted_demos
from policy.rollout import Episode, chunk_fn, planner_demos, rollout
from policy.takeover import ARM_RULE, arm_demos
from policy.train import AfterUpdate, balance_families, bc_finetune, demo_buffer, train_sft
from sim.bench import at_least, int_list
from sim.constants import FAMILIES
from sim.engine.variations import other_start
from sim.spec import SceneSpec

ARMS = ("today", "dt", "dt_branch", "base_bc", "dt_mix", "dt_branch_mix", "dt_failed_mix", "takeover_diag_mix",
        "takeover_random_mix", "dt_critic_mix", "dt_shaped_mix", "dt_task_shaped_mix", "dt_failed_balanced_mix",
        "dt_filtered_mix", "dt_shaped_filtered_mix", "dt_failed_noown_mix", "dt_failed_dart_mix",
        "dt_failed_startvar_mix", "dt_failed_phase_mix", "dt_failed_randphase_mix")
SHAPED_ARMS = {"dt_critic_mix": None, "dt_shaped_mix": "phase", "dt_task_shaped_mix": "task",
               "dt_filtered_mix": None, "dt_shaped_filtered_mix": "phase"}
"""critic arms → the scope of their potential (`policy.phase_potential`; None: sparse rewards)"""
FILTER_ARMS = ("dt_filtered_mix", "dt_shaped_filtered_mix")
"""critic arms whose critic only selects (`TrainConfig.awr_weighting = "filter"`); the others weight by exp(A/β)"""
CURVE_ARMS = ("dt", "base_bc", "dt_mix", "dt_failed_mix", "dt_failed_balanced_mix", "dt_failed_noown_mix",
              "dt_failed_dart_mix", "dt_failed_startvar_mix", "dt_failed_phase_mix", "dt_failed_randphase_mix",
              "takeover_diag_mix", "takeover_random_mix", *SHAPED_ARMS)
"""the arms `--curve` evaluates along the way (the BC and critic arms; not the branch arms)"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--family", choices=(*FAMILIES, "all"), default="pick_place",
                        help="scene family, or all (every family in one round, as the loop's round)")
    parser.add_argument("--seeds", type=int_list(0), default="0,1",
                        help="comma-separated seeds (base demos, round scenes, rollouts)")
    parser.add_argument("--replicates", type=at_least(1), default=3, help="training replicates per arm and seed")
    parser.add_argument("--arms", default=",".join(ARMS[:4]), help=f"comma-separated arms from {', '.join(ARMS)}")
    parser.add_argument("--base-demos", type=at_least(1), default=100, help="planner demonstrations of the weak base")
    parser.add_argument("--base-updates", type=at_least(0), default=400, help="BC updates of the weak base")
    parser.add_argument("--scenes", type=at_least(1), default=40, help="accepted environments of the round")
    parser.add_argument("--rollouts-per-scene", type=at_least(1), default=2, help="base rollouts per round scene")
    parser.add_argument("--updates", type=at_least(1), default=120, help="policy updates of every arm")
    parser.add_argument("--base-mix", choices=("half", "all"), default="half",
                        help="the base demonstrations every BC mix keeps: the first half (default) or all")
    parser.add_argument("--critic-updates", type=at_least(0), default=None,
                        help="critic TD updates of the critic arms before their policy updates (default: --updates)")
    parser.add_argument("--phase-extra", type=at_least(0), default=2,
                        help="extra copies of the weighted windows in the phase arms (weight 1 + this)")
    parser.add_argument("--curve", default="", help="comma-separated policy-update counts at which every arm is "
                        "also evaluated (e.g. 50,100,150)")
    parser.add_argument("--eval", type=at_least(1), default=200, help="held-out in-distribution scenes (paired)")
    parser.add_argument("--out", default=None, help="also write the raw results (per scene and replicate) here")


def run(args) -> dict:
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        raise ValueError(f"unknown arm(s) {', '.join(unknown)}; valid arms: {', '.join(ARMS)}")
    if args.phase_extra < 0:
        raise ValueError(f"--phase-extra must be >= 0 (extra copies of the weighted windows), got {args.phase_extra}")
    seeds = list(args.seeds)
    curve = curve_points(args.curve, args.updates)
    eval_scenes = [s for f in bench_families(args.family) for s in eval_specs(f, "in", args.eval)]
    per_seed = []
    head = {"family": args.family, "seeds": seeds, "replicates": args.replicates, "scenes": args.scenes,
            "updates": args.updates, "eval": args.eval, "base_demos": args.base_demos,
            "base_updates": args.base_updates, "base_mix": args.base_mix, "curve": curve,
            "critic_updates": _critic_updates(args), "commit": _commit(),
            **({"phase_extra": args.phase_extra} if any(a in PHASE_RULE for a in arms) else {})}
    for seed in seeds:
        per_seed.append(run_seed(args, seed, arms, eval_scenes, curve))
        if args.out:  # written after every seed, so a long run keeps what it finished
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps({**head, "per_seed": per_seed}) + "\n")
    base = [100 * float(np.mean(s["base"])) for s in per_seed]
    out = {**head, "base_success": [round(b, 1) for b in base], "arms": summarize(per_seed, arms)}
    families = bench_families(args.family)
    if len(families) > 1:  # the evaluation scenes are `args.eval` per family, families in order
        out["per_family"] = per_family(per_seed, arms, families, args.eval)
    return out


def bench_families(family: str) -> tuple[str, ...]:
    return FAMILIES if family == "all" else (family,)


def per_family(per_seed: Sequence[dict], arms: Sequence[str], families: Sequence[str], n: int) -> dict:
    """Success (%, replicate and seed mean) of the base and of each arm per family, from the per-scene results."""
    def pct(rows: list[list[int]], i: int) -> float:
        return round(100 * float(np.mean([r[i * n : (i + 1) * n] for r in rows])), 1)

    out = {"base": {f: pct([s["base"] for s in per_seed], i) for i, f in enumerate(families)}}
    for arm in arms:
        rows = [r["success"] for s in per_seed for r in s["arms"][arm]["replicates"]]
        out[arm] = {f: pct(rows, i) for i, f in enumerate(families)}
    return out


def curve_points(text: str, updates: int) -> list[int]:
    """The `--curve` counts, sorted, each in 1..updates-1 (the final evaluation is always made)."""
    try:
        points = sorted({int(x) for x in str(text or "").split(",") if x.strip()})
    except ValueError:
        raise ValueError(f"--curve must be comma-separated integers, got {text!r}") from None
    bad = [p for p in points if not 0 < p < updates]
    if bad:
        raise ValueError(f"--curve counts must lie in 1..{updates - 1} (below --updates), got {bad}")
    return points


def _critic_updates(args) -> int:
    return args.updates if getattr(args, "critic_updates", None) is None else int(args.critic_updates)


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
                              cwd=Path(__file__).resolve().parent).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def successes(state: TrainState, scenes: Sequence[SceneSpec]) -> list[int]:
    """Deterministic (mean-chunk) success of the policy on each scene, in order."""
    act = chunk_fn(state.policy, mode="mean")
    out: list[int] = []
    for i in range(0, len(scenes), 32):
        out += [int(ep.success) for ep in rollout(scenes[i : i + 32], act, device=state.device)]
    return out


def run_seed(args, seed: int, arms: Sequence[str], eval_scenes: Sequence[SceneSpec], curve: Sequence[int] = ()
             ) -> dict:
    say = lambda msg: print(f"[round {args.family} seed {seed}] {msg}", file=sys.stderr, flush=True)  # noqa: E731
    t0 = time.process_time()
    families = bench_families(args.family)
    by_family = {f: planner_demos(train_specs(f, args.base_demos, start=300_000 + 10_000 * seed)) for f in families}
    base_demos = [ep for f in families for ep in by_family[f]]
    base, _ = train_sft(base_demos, PolicyConfig(), TrainConfig(seed=seed), args.base_updates)
    base_cpu = time.process_time() - t0
    round_scenes = [s for f in families for s in train_specs(f, args.scenes, start=100_000 + 1_000 * seed)]
    episodes = collect(base, round_scenes, args.rollouts_per_scene, seed=seed,
                       record=any(a in ARM_RULE or a in PHASE_RULE or SHAPED_ARMS.get(a) for a in arms))
    dt = planner_demos(round_scenes)
    own = [ep for ep in episodes if ep.success]
    half = base_demos if args.base_mix == "all" else [  # the first half of each family's demonstrations
        ep for f in families for ep in by_family[f][: max(1, len(by_family[f]) // 2)]]
    solved = {ep.spec_hash for ep in own}
    failed = [s for s in round_scenes if s.spec_hash() not in solved]
    dt_failed = [ep for ep in dt if ep.spec_hash not in solved]
    takeover, takeover_stats = arm_demos(arms, episodes, solved, seed=seed)  # empty unless a takeover arm is chosen
    phis, phi_stats = {}, {}
    for arm in arms:
        if SHAPED_ARMS.get(arm):
            phis[arm], phi_stats[arm] = episode_potentials(episodes, SHAPED_ARMS[arm])
    dt_failed_mix = dt_failed + own + half
    darts: list[list[Episode]] = []

    def dart() -> list[Episode]:  # perturbed planner demos of the failed scenes, made once per seed when needed
        if not darts:
            darts.append(perturbed_planner_demos(failed, seed=1_000_003 * seed))
        return darts[0]
    starts: list[list[Episode]] = []

    def startvar() -> list[Episode]:  # planner demos of the failed scenes from other starts, once per seed
        if not starts:
            rng = np.random.default_rng([7, seed])
            starts.append(planner_demos([other_start(s, rng) for s in failed]))
        return starts[0]
    phased: dict[str, list[Episode]] = {}
    phase_stats: dict[str, dict] = {}
    if any(a in PHASE_RULE for a in arms):  # the failed scenes' planner demos, recorded for their phase timeline
        recorded = planner_demos(failed, record=True)
        for arm in arms:
            if arm in PHASE_RULE:
                phased[arm], phase_stats[arm] = phase_weighted_demos(episodes, recorded, PHASE_RULE[arm],
                                                                     extra=args.phase_extra, seed=seed)
        del recorded
    base_eval = successes(base, eval_scenes)
    say(f"base {np.mean(base_eval):.3f} on {len(eval_scenes)} held-out scenes; rollouts {np.mean([e.success for e in episodes]):.3f}; "
        f"D_t {len(dt)}/{len(round_scenes)} planner demos, {len(dt_failed)}/{len(failed)} on failed scenes")
    updates: dict[str, Callable[[TrainState, int, AfterUpdate | None], dict]] = {
        "today": lambda s, r, h: _today(s, r, episodes, round_scenes, half, args.updates),
        "dt": lambda s, r, h: _bc(s, dt + own, args.updates, h),
        "dt_branch": lambda s, r, h: branch_round(s, round_scenes, policy_updates=args.updates, demos=dt + own, seed=r),
        "base_bc": lambda s, r, h: _bc(s, half, args.updates, h),
        "dt_mix": lambda s, r, h: _bc(s, dt + own + half, args.updates, h),
        "dt_branch_mix": lambda s, r, h: branch_round(s, round_scenes, policy_updates=args.updates,
                                                   demos=dt + own + half, seed=r),
        "dt_failed_mix": lambda s, r, h: _bc(s, dt_failed_mix, args.updates, h),
        "dt_failed_balanced_mix": lambda s, r, h: _bc(s, balance_families(dt_failed_mix), args.updates, h),
        "dt_failed_noown_mix": lambda s, r, h: _bc(s, dt_failed + half, args.updates, h),
        "dt_failed_dart_mix": lambda s, r, h: _bc(s, dart() + own + half, args.updates, h),
        "dt_failed_startvar_mix": lambda s, r, h: _bc(s, startvar() + own + half, args.updates, h),
        **{arm: (lambda s, r, h, arm=arm: _bc(s, phased[arm] + own + half, args.updates, h)) for arm in PHASE_RULE},
        "takeover_diag_mix": lambda s, r, h: _bc(s, takeover["takeover_diag_mix"] + own + half, args.updates, h),
        "takeover_random_mix": lambda s, r, h: _bc(s, takeover["takeover_random_mix"] + own + half, args.updates, h),
        **{arm: (lambda s, r, h, arm=arm: _critic(s, episodes, dt_failed_mix, args.updates, _critic_updates(args),
                                                phis.get(arm), h, "filter" if arm in FILTER_ARMS else "exp"))
           for arm in SHAPED_ARMS},
    }
    planner_calls = {"today": 0, "dt": len(round_scenes), "dt_branch": len(round_scenes), "base_bc": 0,
                     "dt_mix": len(round_scenes), "dt_branch_mix": len(round_scenes), "dt_failed_mix": len(failed),
                     "dt_failed_balanced_mix": len(failed), "dt_failed_noown_mix": len(failed),
                     "dt_failed_dart_mix": len(failed), "dt_failed_startvar_mix": len(failed),
                     "takeover_diag_mix": len(failed), "takeover_random_mix": len(failed),
                     **{arm: len(failed) for arm in PHASE_RULE},
                     **{arm: len(failed) for arm in SHAPED_ARMS}}
    results: dict[str, dict] = {}
    for arm in arms:
        reps = []
        for r in range(args.replicates):
            state = _copy(base, seed=1000 * (seed + 1) + r)
            points: dict[str, list[int]] = {}
            spent: list[float] = []
            hook = _curve_hook(state, eval_scenes, curve, points, spent) if arm in CURVE_ARMS else None
            c0 = time.process_time()
            info = updates[arm](state, r, hook)
            cpu = time.process_time() - c0 - sum(spent)
            got = successes(state, eval_scenes)
            reps.append({"replicate": r, "success": got, "cpu_s": round(cpu, 1), **({"curve": points} if points else {}),
                         "positive_chunks": info.get("positive_chunks", info.get("branch", {}).get("positive_chunks")),
                         **({"positive_share": info["positive_share"]} if info.get("positive_share") is not None else {})})
            say(f"{arm} replicate {r}: {np.mean(got):.3f} ({cpu:.0f} s CPU)")
        results[arm] = {"planner_calls": planner_calls[arm], "updates": args.updates, "replicates": reps}
    return {"seed": seed, "base": base_eval, "base_cpu_s": round(base_cpu, 1), "dt_demos": len(dt), "failed_scenes": len(failed),
            "own_successes": len(own), "rollouts": len(episodes), "arms": results,
            **({"takeover": takeover_stats} if takeover_stats else {}),
            **({"dart_demos": len(darts[0])} if darts else {}),
            **({"startvar_demos": len(starts[0])} if starts else {}),
            **({"potentials": phi_stats} if phi_stats else {}),
            **({"phase_weighting": phase_stats} if phase_stats else {})}


def _copy(base: TrainState, seed: int) -> TrainState:
    """A training replicate: a deep copy of the base with its own seeds."""
    state = copy.deepcopy(base)
    seed_everything(seed)
    state.rng = np.random.default_rng(seed)
    return state


def _curve_hook(state: TrainState, scenes: Sequence[SceneSpec], curve: Sequence[int],
                points: dict[str, list[int]], spent: list[float]) -> AfterUpdate | None:
    """after_update(k): at each curve count k, the success on `scenes` (eval mode, deterministic chunks: no RNG
    the training reads is touched) into points[str(k)], its CPU seconds appended to `spent`."""
    if not curve:
        return None
    wanted = set(curve)

    def hook(k: int) -> None:
        if k in wanted:
            c0 = time.process_time()
            state.policy.eval()
            points[str(k)] = successes(state, scenes)
            state.policy.train()
            spent.append(time.process_time() - c0)

    return hook


def _bc(state: TrainState, demos: Sequence[Episode], updates: int, hook: AfterUpdate | None = None) -> dict:
    log = bc_finetune(state, demo_buffer(demos), updates, after_update=hook)
    return {"updates": log.updates, "demos": len(demos)}


def _critic(state: TrainState, episodes: Sequence[Episode], demos: Sequence[Episode], updates: int,
            critic_updates: int, potentials: dict[int, list[float]] | None, hook: AfterUpdate | None = None,
            weighting: str = "exp") -> dict:
    """A fresh critic on the rollouts (shaped by `potentials` when given, β = 1), then AWR with the critic's own
    advantages (weighted by `weighting`, `TrainConfig.awr_weighting`) plus BC on `demos`."""
    state.train_config = dataclasses.replace(state.train_config, advantage="q", shaping_beta=1.0,
                                             awr_weighting=weighting)
    pot = (lambda ep: potentials.get(id(ep), [0.0] * (ep.steps + 1))) if potentials else None
    info = awr_round(state, [], episodes=episodes, demos=demos, critic_updates=critic_updates,
                     policy_updates=updates, potential=pot, after_update=hook)
    return {"updates": updates, "critic_updates": critic_updates, "demos": len(demos),
            "shaped_episodes": len(potentials or {}), "final_loss": info.get("final_loss"),
            "positive_share": info.get("positive_share")}


def _today(state: TrainState, seed: int, episodes: Sequence[Episode], scenes: Sequence[SceneSpec],
           base_half: Sequence[Episode], updates: int) -> dict:
    info = awr_round(state, [], episodes=episodes, critic_updates=updates, policy_updates=0)
    info["branch"] = branch_round(state, scenes, policy_updates=updates, demos=base_half, seed=seed)
    return info


def summarize(per_seed: Sequence[dict], arms: Sequence[str]) -> dict:
    """Per arm: mean success, paired differences to the base and to `today` (± s.e. over scenes, pooled)."""
    out: dict[str, dict] = {}
    for arm in arms:
        rows, d_base, d_today, cpu, spread = [], [], [], [], []
        for s in per_seed:
            reps = np.array([r["success"] for r in s["arms"][arm]["replicates"]], dtype=float)
            mean = reps.mean(axis=0)
            rows.append(float(mean.mean()))
            spread.append(float(reps.mean(axis=1).max() - reps.mean(axis=1).min()))
            d_base += list(mean - np.array(s["base"], dtype=float))
            if "today" in s["arms"]:
                today = np.array([r["success"] for r in s["arms"]["today"]["replicates"]], dtype=float).mean(axis=0)
                d_today += list(mean - today)
            cpu += [r["cpu_s"] for r in s["arms"][arm]["replicates"]]
        others = {}
        for other in arms:
            if other != arm:
                diffs = []
                for s in per_seed:
                    mine = np.array([r["success"] for r in s["arms"][arm]["replicates"]], dtype=float).mean(axis=0)
                    theirs = np.array([r["success"] for r in s["arms"][other]["replicates"]], dtype=float).mean(axis=0)
                    diffs += list(mine - theirs)
                others[other] = _paired(diffs)
        out[arm] = {
            "success": round(100 * float(np.mean(rows)), 1),
            "vs_base": _paired(d_base), "vs_today": _paired(d_today) if d_today else None, "vs_arms": others,
            "replicate_spread_points": round(100 * max(spread), 1),
            "planner_calls": per_seed[0]["arms"][arm]["planner_calls"],
            "cpu_s_per_update_run": round(float(np.mean(cpu)), 1),
            **_curve_summary(per_seed, arm),
        }
    return out


def _curve_summary(per_seed: Sequence[dict], arm: str, gain: float = 0.05) -> dict:
    """With `--curve`: success (replicate and seed mean, %) at each count, and per seed the first count at which
    the replicate-mean success reaches the base's + `gain` (None: not within the arm's updates)."""
    reps = [s["arms"][arm]["replicates"] for s in per_seed]
    if not all(r.get("curve") for rs in reps for r in rs):
        return {}
    final = int(per_seed[0]["arms"][arm].get("updates", 0))
    counts = [*sorted(int(k) for k in reps[0][0]["curve"]), final]

    def at(r: dict, k: int) -> list[int]:
        return r["success"] if k == final else r["curve"][str(k)]

    # per seed and count: the replicate-mean success
    means = [{k: float(np.mean([np.mean(at(r, k)) for r in rs])) for k in counts} for rs in reps]
    curve = {str(k): round(100 * float(np.mean([m[k] for m in means])), 1) for k in counts}
    reach = [next((k for k in counts if m[k] >= float(np.mean(s["base"])) + gain), None)
             for s, m in zip(per_seed, means, strict=True)]
    return {"curve": curve, "updates_to_base_plus_5": reach}


def _paired(diffs: Sequence[float]) -> dict:
    d = np.asarray(diffs, dtype=float)
    se = float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else float("nan")
    return {"points": round(100 * float(d.mean()), 1), "se": round(100 * se, 1), "n": int(len(d))}

