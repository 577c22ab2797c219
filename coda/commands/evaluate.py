"""`coda eval`: success rate ± standard error of a checkpoint on a family's evaluation suites, on scene
programs of your own (`--programs`, each verified in the sandbox first), or on an external benchmark's tasks
(`--external robosuite:Lift,Door` or `metaworld:pick-place-v3,door-open-v3`, run in the external venv made by `scripts/setup --external`)."""

from __future__ import annotations

import sys
from pathlib import Path

from coda.cli import emit
from coda.options import (
    MAX_COUNT,
    MAX_SUITE_SCENES,
    add_executor_arguments,
    count_int,
    executor_from_args,
    family_choices,
    int_between,
    program_paths,
    suite_choices,
)

MAX_EPISODE_STEPS = 5_000
"""--max-steps at most this (500 s at 10 Hz; the external tasks' defaults are 100-500 steps)"""


def register(sub, name: str) -> None:
    p = sub.add_parser(name, help="evaluate a policy checkpoint on in-distribution or OOD suites, or on scene programs")
    p.add_argument("--policy", required=True, help="checkpoint (.pt)")
    p.add_argument("--family", choices=family_choices(), help="the family whose suites are evaluated")
    p.add_argument("--suite", default="in", choices=suite_choices(),
                   help="in-distribution, an OOD suite, 'seed' (unseen scenes of the base's narrow seed distribution) "
                        "or all (in and the OOD suites)")
    p.add_argument("--n", type=int_between(1, MAX_SUITE_SCENES), default=30,
                   help=f"scenes per suite (1..{MAX_SUITE_SCENES})")
    p.add_argument("--programs", nargs="+", metavar="PATH",
                   help="scene programs (.py files or folders of them) instead of a family's suites; each is "
                        "verified in the sandbox per seed, and one that fails is reported and skipped")
    p.add_argument("--planner", action="store_true",
                   help="with --programs: also require the scripted planner to solve each scene (slower); a scene "
                        "it cannot solve (e.g. a goal out of reach) is skipped with the reason instead of counting "
                        "as a failure of the policy")
    p.add_argument("--seeds", type=count_int, default=1,
                   help="with --programs: episodes per program, with `seed` = 0 .. K-1 (the program's and the env's); "
                        f"with --external: seed groups of --n episodes each per task (1..{MAX_COUNT})")
    p.add_argument("--first-group", type=int, default=0,
                   help="with --external: the first seed group (episode e of group k resets the benchmark with seed "
                        "k * 100000 + e; a loop's final evaluation uses group 0 on, its probes 10 on)")
    p.add_argument("--external", metavar="BENCH:TASK,...",
                   help="external benchmark tasks instead of this project's scenes, e.g. "
                        "robosuite:Lift,Stack,PickPlaceCan,Door or metaworld:pick-place-v3,push-v3,drawer-open-v3,"
                        "door-open-v3 (docs/EXTERNAL.md; needs scripts/setup --external)")
    p.add_argument("--gif", metavar="DIR", help="with --external: write the first episode of each task as DIR/BENCH_TASK.gif")
    p.add_argument("--max-steps", type=int_between(1, MAX_EPISODE_STEPS), default=None,
                   help=f"with --external: episode length in 10 Hz steps (1..{MAX_EPISODE_STEPS}; default per task, "
                        "docs/EXTERNAL.md)")
    p.add_argument("--external-frame", default="base", choices=("base", "home"),
                   help="with --external metaworld: base (the Sawyer's base over this project's origin) | home (also "
                        "shifted so the hand starts over this project's gripper home; docs/EXTERNAL.md)")
    p.add_argument("--gripper-map", default="sign", choices=("sign", "opening"),
                   help="with --external robosuite: sign (the command passed on: robosuite's gripper moves towards "
                        "its sign) | opening (robosuite's gripper follows the command as a finger opening, as this "
                        "simulator's; docs/EXTERNAL.md)")
    p.add_argument("--rot-gain", type=float, default=None,
                   help="with --external robosuite: the OSC gain of the rotation, in (0, 10] (default: the "
                        "position's, 2; docs/EXTERNAL.md)")
    p.add_argument("--object-yaw", default=None, choices=("raw", "canonical"),
                   help="with --external: canonical (the default: a cube, can or puck observed turned about its "
                        "own axis to the equivalent orientation nearest this project's headings) | raw (the "
                        "benchmark's quaternions, in this project's axes; docs/EXTERNAL.md)")
    p.add_argument("--mode", default="mean", choices=("mean", "critic"),
                   help="mean (deterministic) | critic (j=8 samples, Q-softmax; needs a checkpoint with a critic)")
    p.add_argument("--json", action="store_true")
    add_executor_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    if args.external:
        return run_external(args)
    if (args.gif or args.max_steps or args.external_frame != "base" or args.gripper_map != "sign"
            or args.rot_gain is not None or args.object_yaw is not None or args.first_group):
        raise ValueError("--gif, --max-steps, --external-frame, --gripper-map, --rot-gain, --object-yaw and "
                         "--first-group apply to --external only")
    if not args.programs and not args.family:
        raise ValueError("give --family (its suites), --programs PATH... (your scene programs) or --external "
                         "BENCH:TASK,... (an external benchmark)")
    if args.programs and args.family:
        raise ValueError("--family and --programs exclude each other: programs name their own family")
    if args.planner and not args.programs:
        raise ValueError("--planner applies to --programs only (the suites' scenes are solvable by construction)")
    files = program_paths(args.programs) if args.programs else []
    policy = checkpoint_file(args.policy)
    from policy.checkpoint import load_checkpoint

    state = load_checkpoint(policy)
    with executor_from_args(args) as executor:
        if files:
            out = evaluate_programs(state, files, args.seeds, args.mode, executor, planner=args.planner)
            emit(out, args.json)
            return 0 if out["suites"] else 1
        from policy.evaluate import evaluate, policy_robot
        from sim.suites import SUITES

        suites = SUITES if args.suite == "all" else [args.suite]
        results = [evaluate(state.policy, args.family, s, args.n, critic=state.critic, mode=args.mode,
                            device=state.device, executor=executor, robot=policy_robot(state)) for s in suites]
    emit(results[0] if len(results) == 1 else {"suites": results}, args.json)
    return 0


def checkpoint_file(value: str) -> Path:
    """--policy as a path, refused in one line when there is no checkpoint file there (a folder is said to be one:
    "does not exist" would send the user looking for the wrong mistake)."""
    policy = Path(value)
    if policy.is_dir():
        raise ValueError(f"--policy {policy} is a folder; give a checkpoint file (.pt), e.g. one written by "
                         "coda train sft --out")
    if not policy.is_file():
        raise ValueError(f"--policy {policy}: the checkpoint does not exist")
    return policy


def run_external(args) -> int:
    """`--external`: the checkpoint on external benchmark tasks (policy here, simulator in the external venv)."""
    if args.family or args.programs:
        raise ValueError("--external excludes --family and --programs")
    if args.executor != "local":
        raise ValueError("--external runs its own worker processes (--workers); --executor ray does not apply")
    if args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    from policy.external import parse_external
    from policy.external.base import external_python

    targets = parse_external(args.external)
    if not 0 <= args.first_group <= 1000:
        raise ValueError(f"--first-group must be in [0, 1000], got {args.first_group}")
    if args.external_frame != "base" and any(b != "metaworld" for b, _ in targets):
        raise ValueError("--external-frame applies to metaworld tasks only")
    if args.gripper_map != "sign" and any(b != "robosuite" for b, _ in targets):
        raise ValueError("--gripper-map applies to robosuite tasks only")
    if args.rot_gain is not None and any(b != "robosuite" for b, _ in targets):
        raise ValueError("--rot-gain applies to robosuite tasks only")
    from policy.external.robosuite_tasks import MAX_GAIN

    if args.rot_gain is not None and not 0 < args.rot_gain <= MAX_GAIN:
        raise ValueError(f"--rot-gain must be in (0, {MAX_GAIN:g}], got {args.rot_gain:g}")
    for benchmark in dict.fromkeys(b for b, _ in targets):
        external_python(benchmark)  # one line naming scripts/setup --external when the venv is missing
    policy = checkpoint_file(args.policy)
    from policy.checkpoint import load_checkpoint
    from policy.external.evaluate import evaluate_external

    state = load_checkpoint(policy)
    kwargs = {"max_steps": args.max_steps} if args.max_steps else {}
    if args.external_frame != "base":
        kwargs["frame"] = args.external_frame
    if args.gripper_map != "sign":
        kwargs["gripper_map"] = args.gripper_map
    if args.rot_gain is not None:
        kwargs["rot_gain"] = args.rot_gain
    if args.object_yaw is not None:
        kwargs["canonical_yaw"] = args.object_yaw == "canonical"
    out = evaluate_external(state.policy, targets, args.n, args.seeds, critic=state.critic, mode=args.mode,
                            device=state.device, workers=args.workers,
                            gif_dir=Path(args.gif) if args.gif else None, adapter_kwargs=kwargs,
                            first_group=args.first_group)
    emit(out, args.json)
    return 0


def evaluate_programs(state, files: list[Path], seeds: int, mode: str, executor, planner: bool = False) -> dict:
    """Per program, the suite-shaped result over its verified seeds; programs or seeds that fail verification (with
    `planner`, also those the scripted planner cannot solve) are listed under `skipped` with the verifier's reason
    and are not counted as failures of the policy. `scenes`: the distinct scenes a program gave (fewer than its
    episodes when it ignores `seed`: then its episodes repeat one scene and are not independent). Every program's
    episodes run as one batch over the workers, so the wall-clock `seconds` are the batch's, in `total` only."""
    import time

    from policy.evaluate import policy_robot, run_episodes, success_stats
    from sim.spec import SceneSpec
    from sim.verify import verify_programs

    jobs = [(f, s) for f in files for s in range(seeds)]
    specs, kept, skipped = [], [], []
    reports = verify_programs([(f.read_bytes(), s) for f, s in jobs], planner=planner)
    for (f, s), report in zip(jobs, reports, strict=True):
        if report.passed:
            specs.append(SceneSpec.model_validate(report.spec).with_robot(policy_robot(state)))  # the policy's body
            kept.append((f, s))
        else:
            skipped.append({"program": str(f), "seed": s, "reason": report.summary()})
            print(f"coda eval: skipped {f} (seed {s}): {report.summary()}", file=sys.stderr)
    t0 = time.perf_counter()
    episodes = run_episodes(state.policy, specs, seeds=[s for _, s in kept], critic=state.critic, mode=mode,
                            device=state.device, executor=executor) if specs else []
    seconds = time.perf_counter() - t0
    suites = []
    for f in dict.fromkeys(f for f, _ in kept):
        mine = [(ep, spec) for (g, _), ep, spec in zip(kept, episodes, specs, strict=True) if g == f]
        scenes = len({spec.spec_hash() for _, spec in mine})
        suites.append({"family": mine[0][1].family, "suite": str(f), **success_stats([ep for ep, _ in mine]),
                       "scenes": scenes})
        if scenes < len(mine):
            print(f"coda eval: {f} gave {scenes} distinct scene(s) for {len(mine)} seeds: does it use `seed`? "
                  "Repeated scenes are not independent episodes", file=sys.stderr)
    total = {**(success_stats(episodes) if episodes else {"n": 0}), "skipped": len(skipped),
             "seconds": round(seconds, 2)}
    return {"suites": suites, "total": total, "skipped": skipped}
