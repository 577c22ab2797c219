"""`coda sim ...`: the simulator SDK from the command line (assets, demos, rendering, programs)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from coda.cli import emit
from coda.options import (
    MAX_COUNT,
    MAX_SEED,
    add_executor_arguments,
    check_output_file,
    count_int,
    executor_from_args,
    family_choices,
    image_size,
    seed_int,
)
from sim.constants import ROBOTS


def register(sub, name: str) -> None:
    parser = sub.add_parser(name, help="simulator SDK: assets, planner demos, rendering, scene programs")
    cmds = parser.add_subparsers(dest="sim_command", required=True)

    p = cmds.add_parser("assets", help="the asset pool: counts, categories and the train / held-out split")
    p.add_argument("--category", default=None, help="list this category's instances and their split")
    p.add_argument("--tag", default=None, help="only categories with this tag (e.g. fruit, container)")
    p.add_argument("--split", default=None, choices=("train", "heldout"), help="only categories of this split")
    p.add_argument("--kind", default="any", choices=("any", "graspable", "container", "surface", "articulated"))
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_assets)

    p = cmds.add_parser("demo", help="sample seed scenes, verify them, and run the scripted planner")
    p.add_argument("--family", default="pick_place", choices=family_choices(allow_all=True))
    p.add_argument("--n", type=count_int, default=10, help=f"number of seed scenes (1..{MAX_COUNT})")
    p.add_argument("--seed", type=seed_int, default=0, help=f"first scene seed (0..{MAX_SEED})")
    p.add_argument("--robot", default="gripper", choices=ROBOTS,
                   help="embodiment: the floating gripper or the Franka Panda (robosuite's model: scripts/setup --external)")
    p.add_argument("--json", action="store_true")
    add_executor_arguments(p)
    p.set_defaults(func=cmd_demo)

    p = cmds.add_parser("render", help="render a scene program (or a family's seed scene) to PNG")
    scene = p.add_mutually_exclusive_group(required=True)  # argparse refuses neither and both, naming the flags
    scene.add_argument("program", nargs="?", help="scene program .py (or --family)")
    scene.add_argument("--family", choices=family_choices(), help="render this family's seed scene instead of a program")
    p.add_argument("--seed", type=seed_int, default=0, help=f"scene seed (0..{MAX_SEED})")
    p.add_argument("--size", type=image_size, default=224, help="pixels per camera side (32..480)")
    p.add_argument("--out", default="scene.png")
    p.set_defaults(func=cmd_render)

    p = cmds.add_parser("program", help="print the scene program of a family's seed scene")
    p.add_argument("--family", default="pick_place", choices=family_choices())
    p.add_argument("--seed", type=seed_int, default=0, help=f"scene seed (0..{MAX_SEED})")
    p.set_defaults(func=cmd_program)


def cmd_assets(args) -> int:
    """Pool counts and every category (split, instances per split, size, mass, tags); with --category, that
    category's instances (id and split: held-out instances are reserved for the OOD instance suite)."""
    from sim import assets
    from sim.assets.listing import list_assets

    if args.category is not None:
        if args.category not in assets.categories():
            raise ValueError(f"unknown category {args.category!r}; see `coda sim assets` for the categories")
        cat = next(c for c in list_assets(limit=10_000).categories if c.name == args.category)
        emit({**cat.model_dump(mode="json"), "instance_ids": [
            {"id": a.id, "split": a.split} for a in assets.assets_in(args.category)]}, args.json)
        return 0
    page = list_assets(tag=args.tag, split=args.split, kind=args.kind, limit=10_000)
    if args.json:
        emit({**page.pool, "categories": [c.model_dump(mode="json") for c in page.categories]}, True)
        return 0
    emit(page.pool, False)
    print(f"\n{'category':<16} {'split':<8} {'train':>5} {'held':>5}  kind")
    for c in page.categories:
        kind = ", ".join(k for k in ("graspable", "container", "surface", "articulated") if getattr(c, k))
        print(f"{c.name:<16} {c.split:<8} {c.train_instances:>5} {c.heldout_instances:>5}  {kind}")
    return 0


def demo_stats(family: str, n: int, seed: int = 0, executor=None, robot: str = "gripper") -> dict:
    """Verify n seed scenes of a family and run the planner on the verified ones (on the executor's workers), with
    the embodiment `robot`."""
    from sim.families import sample_spec
    from sim.workers import SERIAL, planner_run, verify_spec_task

    executor = executor or SERIAL
    t0 = time.perf_counter()
    specs = [sample_spec(family, s).with_robot(robot) for s in range(seed, seed + n)]
    failures: dict[str, int] = {}
    ok = []
    for spec, report in zip(specs, executor.map(verify_spec_task, specs), strict=True):
        if report.passed:
            ok.append(spec)
        for c in report.violations():
            failures[c.name] = failures.get(c.name, 0) + 1
    runs = executor.map(planner_run, ok)
    verified, solved = len(ok), sum(r.success for r in runs)
    steps = [r.steps for r in runs if r.success]
    if verified > solved:
        failures["planner"] = verified - solved
    return {
        "family": family,
        "robot": robot,
        "n": n,
        "verify_pass_rate": verified / n,
        "planner_success_rate": solved / verified if verified else 0.0,
        "mean_steps": sum(steps) / len(steps) if steps else 0.0,
        "seconds": round(time.perf_counter() - t0, 2),
        "failures": failures,
    }


def cmd_demo(args) -> int:
    from sim.constants import FAMILIES

    families = FAMILIES if args.family == "all" else [args.family]
    from sim.compile import require_robot

    require_robot(args.robot)
    with executor_from_args(args) as executor:
        results = [demo_stats(f, args.n, args.seed, executor, args.robot) for f in families]
    emit(results[0] if len(results) == 1 else {"families": results}, args.json)
    return 0


def load_spec(program: str | None, family: str | None, seed: int):
    """A spec from a scene program (run in the sandbox) or a family's seed scene (exactly one of them: the parser
    refuses neither and both)."""
    from sim.families import sample_spec
    from sim.spec import SceneSpec

    if family:
        return sample_spec(family, seed)
    from sim.sandbox import run_untrusted

    source = Path(program).read_bytes()
    result = run_untrusted(source, finalizer="sim.scene:finalize_program", inputs={"globals": {"seed": seed}})
    if not result.ok:
        err = result.error
        print(f"{program}: {err.kind}: {err.message}", file=sys.stderr)
        raise SystemExit(1)
    return SceneSpec.model_validate(result.value)


def cmd_render(args) -> int:
    from sim.render import render_spec_png

    check_output_file("--out", Path(args.out))  # before the sandbox run and the rendering
    spec = load_spec(args.program, args.family, args.seed)
    png = render_spec_png(spec, size=args.size)
    Path(args.out).write_bytes(png)
    print(f"wrote {args.out} ({len(png) // 1024} KB, {spec.task.instruction!r})")
    return 0


def cmd_program(args) -> int:
    from sim.families import sample_spec
    from sim.scene import to_program

    print(to_program(sample_spec(args.family, args.seed)), end="")
    return 0
