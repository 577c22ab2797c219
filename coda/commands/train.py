"""`coda train sft|awr` and `coda eval`: train the action-chunk policy and measure it."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from coda.cli import emit
from coda.options import (
    MAX_COUNT,
    MAX_SEED,
    MAX_SUITE_SCENES,
    add_executor_arguments,
    check_output_file,
    count_int,
    executor_from_args,
    family_choices,
    int_between,
    nonnegative_float,
    nonnegative_int,
    positive_int,
    probability,
    seed_int,
)

log = logging.getLogger(__name__)

AWR_FIRST_SEED = 100_000
"""`train awr`: round r rolls out the training scenes of seeds AWR_FIRST_SEED + r * --scenes on"""
AWR_SCENE_SEEDS = 900_000
"""--rounds x --scenes at most this: the rounds' seeds stay below sim.suites.EVAL_SEED_BASE (1,000,000), where
the evaluation suites begin (policy.evaluate.train_specs refuses more, but only when that round comes)"""


MAX_UPDATES = 1_000_000
"""--updates at most this (≈ a day of BC updates on one CPU thread): a mistyped count is refused, not run"""
MAX_D_MODEL = 2048
MAX_LAYERS = 32
"""--d-model / --layers at most these: a mistyped width allocates more memory than the machine has"""
HEADS = 4
"""attention heads of the policy (PolicyConfig.n_heads): --d-model must be a multiple"""


def d_model_int(value: str) -> int:
    """--d-model: a multiple of HEADS in 8..MAX_D_MODEL (argparse names the flag)."""
    n = int_between(8, MAX_D_MODEL)(value)
    if n % HEADS:
        raise argparse.ArgumentTypeError(f"must be a multiple of the {HEADS} attention heads, got {n}")
    return n


def register(sub, name: str) -> None:
    parser = sub.add_parser(name, help="train the action-chunk policy (sft on planner demos, awr on own rollouts)")
    cmds = parser.add_subparsers(dest="train_command", required=True)

    p = cmds.add_parser("sft", help="behaviour cloning on planner demonstrations → base checkpoint")
    p.add_argument("--family", required=True, choices=family_choices())
    p.add_argument("--demos", type=count_int, default=200,
                   help=f"training scenes whose planner demos are used (1..{MAX_COUNT})")
    p.add_argument("--updates", type=int_between(1, MAX_UPDATES), default=1500, help=f"BC updates (1..{MAX_UPDATES})")
    p.add_argument("--perturbed", type=int_between(0, MAX_COUNT), default=0,
                   help="more training scenes (after --demos) whose planner demos run with perturbation bursts "
                        f"(DART-style, policy.demos); only windows without a perturbed step are cloned (0..{MAX_COUNT})")
    p.add_argument("--perturb-sigma", type=nonnegative_float, default=0.015,
                   help="perturbation std per axis, metres (>= 0)")
    p.add_argument("--perturb-prob", type=probability, default=0.05,
                   help="chance per step that a 1-2 step burst starts (0..1)")
    p.add_argument("--backbone", default="transformer", choices=("transformer", "deepsets"))
    p.add_argument("--d-model", type=d_model_int, default=128,
                   help=f"network width, a multiple of the 4 heads (8..{MAX_D_MODEL}; prep needs 192, see "
                        "docs/BENCHMARKS.md)")
    p.add_argument("--layers", type=int_between(1, MAX_LAYERS), default=2, help=f"backbone blocks (1..{MAX_LAYERS})")
    p.add_argument("--batch-size", type=positive_int, default=256)
    p.add_argument("--seed", type=seed_int, default=0, help=f"training seed (0..{MAX_SEED})")
    p.add_argument("--eval", type=int_between(0, MAX_SUITE_SCENES), default=30,
                   help=f"in-distribution scenes evaluated after training (0 = skip; at most {MAX_SUITE_SCENES})")
    p.add_argument("--out", required=True, help="checkpoint path (.pt; checked before training)")
    p.add_argument("--json", action="store_true")
    add_executor_arguments(p)
    p.set_defaults(func=cmd_sft)

    p = cmds.add_parser("awr", help="rounds of own rollouts + advantage-weighted regression")
    p.add_argument("--policy", required=True, help="checkpoint to start from")
    p.add_argument("--family", required=True, choices=family_choices())
    p.add_argument("--rounds", type=positive_int, default=2)
    p.add_argument("--collect", choices=("branch", "sample"), default="branch",
                   help="branch: Monte-Carlo advantages of sampled chunks over the mean chunk from the same states "
                        "(policy.branch); sample: stochastic rollouts + chunk critic (advantage from TrainConfig)")
    p.add_argument("--scenes", type=count_int, default=80,
                   help=f"training scenes rolled out per round (1..{MAX_COUNT}; --rounds x --scenes at most "
                        f"{AWR_SCENE_SEEDS})")
    p.add_argument("--levels", type=positive_int, default=2, help="branch: chunk boundaries branched per scene")
    p.add_argument("--candidates", type=positive_int, default=8, help="branch: sampled chunks tried per branch state")
    p.add_argument("--potential", choices=("none", "task", "zero"), default="none",
                   help="branch: Text2potential shaping of every scene — task: the offline compiler's potential "
                        "from the task description (checked on the scene's planner demo, run in the sandbox); "
                        "zero: Φ = 0 (branches cut at the same horizon, sparse: the control)")
    p.add_argument("--horizon", type=nonnegative_int, default=None,
                   help="branch with a potential: chunks followed after the branched one before the cut "
                        "(default TrainConfig.branch_horizon)")
    p.add_argument("--shaping", choices=("cut", "fallback"), default=None,
                   help="branch with a potential: cut = every branch valued at the cut; fallback = branches run to "
                        "the end and Φ is used only where no branch succeeded (default TrainConfig.branch_shaping)")
    p.add_argument("--eval-rounds", action="store_true",
                   help="also evaluate after every round (success per round in the result, for updates-to-threshold)")
    p.add_argument("--rollouts", type=positive_int, default=2, help="sample: rollouts per scene per round")
    p.add_argument("--critic-updates", type=nonnegative_int, default=300, help="sample: critic updates per round")
    p.add_argument("--policy-updates", type=nonnegative_int, default=None, help="per round (default 50 branch, 300 sample)")
    p.add_argument("--demos", type=int_between(0, MAX_COUNT), default=0,
                   help=f"planner demos mixed into every update as BC (0 = none; at most {MAX_COUNT})")
    p.add_argument("--lora", action="store_true", help="fine-tune LoRA adapters instead of all weights")
    p.add_argument("--seed", type=seed_int, default=0, help=f"rollout seed of the first round (0..{MAX_SEED})")
    p.add_argument("--eval", type=int_between(0, MAX_SUITE_SCENES), default=30,
                   help=f"in-distribution scenes evaluated before and after (0 = skip; at most {MAX_SUITE_SCENES})")
    p.add_argument("--out", required=True, help="checkpoint path (.pt; checked before training)")
    p.add_argument("--json", action="store_true")
    add_executor_arguments(p)
    p.set_defaults(func=cmd_awr)


def scene_potentials(specs, kind: str) -> dict | None:
    """Per-scene Φ for `coda train awr --potential`: none -> None; zero -> Φ ≡ 0; task -> the offline compiler's
    potential from the task description, checked against the scene's planner demonstration and run in the
    sandbox (a scene whose program fails the checks stays unshaped)."""
    if kind == "none":
        return None
    if kind == "zero":
        return {s.spec_hash(): (lambda initial_bottom, states: [0.0] * len(states)) for s in specs}
    from policy.rollout import planner_demos
    from sim.engine.potential_templates import write_program
    from sim.potential import check_program, episode, state_potential

    demos = {d.spec_hash: d for d in planner_demos(specs, record=True)}
    out = {}
    for spec in specs:
        demo = demos.get(spec.spec_hash())
        if demo is None or demo.trace is None:
            continue
        source = write_program(spec, factor="task", phase="other", cause=f"the task: {spec.task.instruction}",
                               tool="awr_shaped", level=2, cause_objects=[])
        if check_program(source, spec, [], [episode(demo.trace)]).ok:
            out[spec.spec_hash()] = state_potential(source, spec)
    print(f"potential: {len(out)} of {len(specs)} scenes shaped", file=sys.stderr)
    return out


def _progress(done: int, total: int, metrics: dict) -> None:
    vals = " ".join(f"{k}={v:.4f}" for k, v in metrics.items())
    print(f"  {done}/{total} {vals}", file=sys.stderr)


def cmd_sft(args) -> int:
    from policy.checkpoint import save_checkpoint
    from policy.config import PolicyConfig, TrainConfig
    from policy.evaluate import evaluate, train_specs
    from policy.rollout import planner_demos

    t0 = time.perf_counter()
    check_output_file("--out", Path(args.out))
    pcfg = PolicyConfig(backbone=args.backbone, d_model=args.d_model, n_layers=args.layers)
    tcfg = TrainConfig(batch_size=args.batch_size, seed=args.seed)
    executor = executor_from_args(args)
    c0 = time.process_time()
    demos = planner_demos(train_specs(args.family, args.demos), executor=executor)
    clean = len(demos)
    if args.perturbed:
        from policy.demos import perturbed_planner_demos

        demos += perturbed_planner_demos(train_specs(args.family, args.perturbed, start=args.demos),
                                         args.perturb_sigma, args.perturb_prob, seed=args.seed * 1_000_003)
    from policy.train import train_sft

    state, tlog = train_sft(demos, pcfg, tcfg, args.updates, progress=_progress)
    state.extra.update({"family": args.family, "kind": "sft", "demos": clean, "perturbed_demos": len(demos) - clean})
    path = save_checkpoint(Path(args.out), state)
    result = {"checkpoint": str(path), "family": args.family, "demos": clean, "perturbed_demos": len(demos) - clean,
              **tlog.summary(),
              "train_cpu_seconds": round(time.process_time() - c0, 1)}
    if args.eval:
        ev = evaluate(state.policy, args.family, "in", args.eval, device=state.device, executor=executor)
        result.update({"in_success_rate": ev["success_rate"], "in_stderr": ev["stderr"], "eval_n": ev["n"]})
    result["total_seconds"] = round(time.perf_counter() - t0, 1)
    emit(result, args.json)
    return 0


def check_awr_args(args) -> None:
    """ValueError for options `train awr` would reject or ignore only after rounds of work: an --out that cannot
    be written, more rounds x scenes than there are training seeds, --horizon / --shaping without a potential."""
    check_output_file("--out", Path(args.out))
    if args.rounds * args.scenes > AWR_SCENE_SEEDS:
        raise ValueError(f"--rounds x --scenes must be at most {AWR_SCENE_SEEDS} (the training seeds below the "
                         f"evaluation suites'), got {args.rounds} x {args.scenes}")
    shaping = [flag for flag, value in (("--horizon", args.horizon), ("--shaping", args.shaping)) if value is not None]
    if shaping and (args.collect != "branch" or args.potential == "none"):
        raise ValueError(f"{' and '.join(shaping)} shape{'s' if len(shaping) == 1 else ''} branches with a "
                         "potential: give --potential task or --potential zero (with --collect branch)")


def cmd_awr(args) -> int:
    from policy.checkpoint import load_checkpoint, save_checkpoint
    from policy.evaluate import evaluate, train_specs
    from policy.improve import awr_round, branch_round

    t0 = time.perf_counter()
    check_awr_args(args)
    executor = executor_from_args(args)
    state = load_checkpoint(Path(args.policy))
    demos = None
    if args.demos:
        from policy.rollout import planner_demos

        demos = planner_demos(train_specs(args.family, args.demos, start=200_000), executor=executor)
    if args.lora:
        from policy.lora import add_lora

        state.policy = add_lora(state.policy)
        state.reset_policy_optimizer()
    before = (evaluate(state.policy, args.family, "in", args.eval, device=state.device, executor=executor)
              if args.eval else None)
    rounds, c0 = [], time.process_time()
    for r in range(args.rounds):
        specs = train_specs(args.family, args.scenes, start=AWR_FIRST_SEED + r * args.scenes)
        if args.collect == "branch":
            updates = 50 if args.policy_updates is None else args.policy_updates
            info = branch_round(state, specs, levels=args.levels, candidates=args.candidates, policy_updates=updates,
                                demos=demos, seed=args.seed + r, phi=scene_potentials(specs, args.potential),
                                horizon=args.horizon, shaping=args.shaping)
            if info["mean_chunk_success"] is not None:
                print(f"round {r + 1}: mean-chunk success {info['mean_chunk_success']:.2f}, branch success "
                      f"{info['branch_success']:.2f}", file=sys.stderr)
            print(f"round {r + 1}: {info['positive_chunks']} of {info['chunks']} chunks beat the mean chunk "
                  f"({info['shaped_groups']} of {info['groups']} branch states shaped)", file=sys.stderr)
        else:
            updates = 300 if args.policy_updates is None else args.policy_updates
            info = awr_round(state, specs, rollouts_per_scene=args.rollouts, demos=demos,
                             critic_updates=args.critic_updates, policy_updates=updates,
                             seed=args.seed + r, progress=_progress, executor=executor)
            print(f"round {r + 1}: rollout success {info['rollout_success']:.2f}", file=sys.stderr)
        if args.eval and args.eval_rounds and r + 1 < args.rounds:
            ev = evaluate(state.policy, args.family, "in", args.eval, device=state.device, executor=executor)
            info.update({"success": ev["success_rate"], "stderr": ev["stderr"]})
            print(f"round {r + 1}: in-distribution success {ev['success_rate']:.3f}", file=sys.stderr)
        rounds.append(info)
    state.extra.update({"family": args.family, "kind": "awr", "collect": args.collect, "rounds": len(rounds)})
    path = save_checkpoint(Path(args.out), state)
    result = {"checkpoint": str(path), "family": args.family, "collect": args.collect, "rounds": rounds,
              "rounds_cpu_seconds": round(time.process_time() - c0, 1)}
    if args.eval:
        after = evaluate(state.policy, args.family, "in", args.eval, device=state.device, executor=executor)
        result.update({"before": before["success_rate"], "before_stderr": before["stderr"],
                       "after": after["success_rate"], "after_stderr": after["stderr"], "eval_n": after["n"]})
        if args.eval_rounds:
            rounds[-1].update({"success": after["success_rate"], "stderr": after["stderr"]})
    result["total_seconds"] = round(time.perf_counter() - t0, 1)
    emit(result, args.json)
    return 0
