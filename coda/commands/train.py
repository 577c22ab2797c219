"""`coda train sft|awr` and `coda eval`: train the action-chunk policy and measure it."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

from coda.cli import emit
from coda.options import add_executor_arguments, executor_from_args

log = logging.getLogger(__name__)


def register(sub, name: str) -> None:
    parser = sub.add_parser(name, help="train the action-chunk policy (sft on planner demos, awr on own rollouts)")
    cmds = parser.add_subparsers(dest="train_command", required=True)

    p = cmds.add_parser("sft", help="behaviour cloning on planner demonstrations → base checkpoint")
    p.add_argument("--family", required=True, help="pick_place | stack | articulated | prep")
    p.add_argument("--demos", type=int, default=200, help="training scenes whose planner demos are used")
    p.add_argument("--updates", type=int, default=1500)
    p.add_argument("--backbone", default="transformer", help="transformer | deepsets")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval", type=int, default=30, help="in-distribution scenes evaluated after training (0 = skip)")
    p.add_argument("--out", required=True, help="checkpoint path (.pt)")
    p.add_argument("--json", action="store_true")
    add_executor_arguments(p)
    p.set_defaults(func=cmd_sft)

    p = cmds.add_parser("awr", help="rounds of own rollouts + chunk critic + advantage-weighted regression")
    p.add_argument("--policy", required=True, help="checkpoint to start from")
    p.add_argument("--family", required=True)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--scenes", type=int, default=48, help="training scenes rolled out per round")
    p.add_argument("--rollouts", type=int, default=2, help="rollouts per scene per round")
    p.add_argument("--critic-updates", type=int, default=300)
    p.add_argument("--policy-updates", type=int, default=300)
    p.add_argument("--demos", type=int, default=100, help="planner demos mixed in as BC (0 = none)")
    p.add_argument("--lora", action="store_true", help="fine-tune LoRA adapters instead of all weights")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval", type=int, default=30)
    p.add_argument("--out", required=True)
    p.add_argument("--json", action="store_true")
    add_executor_arguments(p)
    p.set_defaults(func=cmd_awr)


def _progress(done: int, total: int, metrics: dict) -> None:
    vals = " ".join(f"{k}={v:.4f}" for k, v in metrics.items())
    print(f"  {done}/{total} {vals}", file=sys.stderr)


def cmd_sft(args) -> int:
    from policy.checkpoint import save_checkpoint
    from policy.config import PolicyConfig, TrainConfig
    from policy.evaluate import evaluate, train_specs
    from policy.rollout import planner_demos

    t0 = time.perf_counter()
    executor = executor_from_args(args)
    demos = planner_demos(train_specs(args.family, args.demos), executor=executor)
    pcfg = PolicyConfig(backbone=args.backbone)
    tcfg = TrainConfig(batch_size=args.batch_size, seed=args.seed)
    from policy.train import train_sft

    state, tlog = train_sft(demos, pcfg, tcfg, args.updates, progress=_progress)
    state.extra.update({"family": args.family, "kind": "sft", "demos": len(demos)})
    path = save_checkpoint(Path(args.out), state)
    result = {"checkpoint": str(path), "family": args.family, "demos": len(demos), **tlog.summary()}
    if args.eval:
        ev = evaluate(state.policy, args.family, "in", args.eval, device=state.device, executor=executor)
        result.update({"in_success_rate": ev["success_rate"], "in_stderr": ev["stderr"], "eval_n": ev["n"]})
    result["total_seconds"] = round(time.perf_counter() - t0, 1)
    emit(result, args.json)
    return 0


def cmd_awr(args) -> int:
    from policy.checkpoint import load_checkpoint, save_checkpoint
    from policy.evaluate import evaluate, train_specs
    from policy.improve import awr_round

    t0 = time.perf_counter()
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
    rounds = []
    for r in range(args.rounds):
        specs = train_specs(args.family, args.scenes, start=100_000 + r * args.scenes)
        info = awr_round(state, specs, rollouts_per_scene=args.rollouts, demos=demos,
                         critic_updates=args.critic_updates, policy_updates=args.policy_updates,
                         seed=args.seed + r, progress=_progress, executor=executor)
        rounds.append(info)
        print(f"round {r + 1}: rollout success {info['rollout_success']:.2f}", file=sys.stderr)
    state.extra.update({"family": args.family, "kind": "awr", "rounds": len(rounds)})
    path = save_checkpoint(Path(args.out), state)
    result = {"checkpoint": str(path), "family": args.family, "rounds": rounds}
    if args.eval:
        after = evaluate(state.policy, args.family, "in", args.eval, device=state.device, executor=executor)
        result.update({"before": before["success_rate"], "before_stderr": before["stderr"],
                       "after": after["success_rate"], "after_stderr": after["stderr"], "eval_n": after["n"]})
    result["total_seconds"] = round(time.perf_counter() - t0, 1)
    emit(result, args.json)
    return 0
