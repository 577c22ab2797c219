"""`coda run`: the co-evolution loop through the four MCP servers (offline roles by default)."""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

from agent.choices import ROLE_BACKENDS, RUN_MODES, default_workers
from coda.cli import emit
from coda.options import (
    add_executor_arguments,
    add_target_argument,
    check_target,
    executor_argv,
    families_list,
    positive_int,
    preset_choices,
)

log = logging.getLogger(__name__)


def register(sub, name: str) -> None:
    p = sub.add_parser(name, help="run co-evolution rounds (offline by default; --backend anthropic|openai for LLM roles)")
    p.add_argument("--name", default=None, help="run name (runs/NAME); default: a timestamp")
    p.add_argument("--runs-dir", default="runs")
    p.add_argument("--preset", default="quick", choices=preset_choices(),
                   help="quick (two CPU cores) | tiny (smoke test) | paper")
    p.add_argument("--families", default=None, type=families_list, help="comma-separated subset of families")
    p.add_argument("--rounds", type=positive_int, default=None, help="override the preset's number of rounds")
    p.add_argument("--backend", default="offline", choices=ROLE_BACKENDS, help="who plays the roles (offline: no key)")
    p.add_argument("--model", default=None)
    p.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint (with --backend openai)")
    p.add_argument("--method", default="coda", choices=run_methods(),
                   help="the loop's switches: CoDA, a baseline or an ablation (agent/methods.py; see docs/RESULTS.md)")
    p.add_argument("--mode", default="orchestrated", choices=RUN_MODES,
                   help="orchestrated (the loop calls the tools) | autonomous (an LLM runs the rounds)")
    p.add_argument("--max-turns", type=positive_int, default=60, help="autonomous mode: most LLM turns")
    p.add_argument("--max-cost", type=float, default=5.0, help="autonomous mode: most USD spent")
    p.add_argument("--server-url", action="append", default=[], metavar="NAME=URL",
                   help="use a running server over streamable HTTP instead of starting it (repeatable)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="change a budget of the preset, e.g. --set targeted_per_family=24,rollouts_per_scene=4 "
                        "(repeatable; keys: agent.presets.SETTABLE)")
    add_target_argument(p)
    p.add_argument("--resume", action="store_true", help="continue runs/NAME from its last completed step")
    p.add_argument("--json", action="store_true")
    p.add_argument("--memory-uri", default=None,
                   help="LanceDB URI of the memory (default RUN_DIR/memory); a path shared by several machines")
    p.add_argument("--train-threads", type=positive_int, default=None, metavar="N",
                   help="torch threads of the trainer's SFT and round updates (default 1; more help on an idle "
                        "many-core machine, docs/BENCHMARKS.md)")
    add_executor_arguments(p, workers=default_workers())  # two where two CPUs are free: the same episodes, sooner
    p.set_defaults(func=run)


def run_methods() -> tuple[str, ...]:
    """Methods a run can use on its own (memory transfer needs another run's memory: `coda experiment`)."""
    from agent.methods import METHODS

    return tuple(name for name, m in METHODS.items() if m.generation != "memory")


def _argument_problem(args) -> str | None:
    """What is wrong with --name, --server-url or --workers (checked before anything is made), or None."""
    from agent.hub import SERVERS

    if args.name is not None and (not args.name.strip() or args.name in (".", "..") or "/" in args.name
                                  or "\\" in args.name):
        return f"--name {args.name!r} must be a plain folder name inside --runs-dir ({args.runs_dir}), without slashes"
    for item in args.server_url:
        name, sep, url = item.partition("=")
        if not sep or name not in SERVERS or not url.startswith(("http://", "https://")):
            return (f"--server-url {item!r} must be NAME=URL with NAME one of {', '.join(SERVERS)} and an http(s) "
                    "URL, e.g. trainer=http://127.0.0.1:8734/mcp")
    if args.workers < 1:
        return f"--workers must be >= 1, got {args.workers}"
    return None


def run(args) -> int:
    from agent.hub import Hub, ServerSpec, ToolError, stdio_specs
    from agent.presets import check_rounds, cli_overrides, get_preset
    from agent.report import write_report
    from agent.roles.factory import make_roles

    try:
        preset = get_preset(args.preset, **cli_overrides(args))
        check_target(preset.external)
        check_rounds(preset.rounds, [0])  # a run is seed 0
    except ValueError as exc:
        print(f"coda {args.command}: {exc}", file=sys.stderr)
        return 2
    if preset.share_round0:
        print(f"coda {args.command}: share_round0 shares round 1 between the methods of an experiment; a run has "
              "one method (use it with coda experiment)", file=sys.stderr)
        return 2
    if args.mode == "autonomous" and args.backend == "offline":
        print(f"coda {args.command}: --mode autonomous needs an LLM to run the rounds: add --backend anthropic or "
              "--backend openai (the offline roles run with the default --mode orchestrated)", file=sys.stderr)
        return 2
    if args.mode == "autonomous" and args.method != "coda":
        print(f"coda {args.command}: --method {args.method} sets the switches of the orchestrated loop; in --mode "
              "autonomous the LLM decides the rounds itself (drop --method or use --mode orchestrated)", file=sys.stderr)
        return 2
    try:  # before anything is created: a missing API key or a bad model option stops here
        roles = make_roles(args.backend, model=args.model, base_url=args.base_url)
    except (ValueError, RuntimeError) as exc:
        print(f"coda {args.command}: {exc}", file=sys.stderr)
        return 2
    problem = _argument_problem(args)
    if problem:
        print(f"coda {args.command}: {problem}", file=sys.stderr)
        return 2
    if args.resume and not args.name:
        print(f"coda {args.command}: --resume continues a named run: add --name NAME (a folder of {args.runs_dir})",
              file=sys.stderr)
        return 2
    name = args.name or time.strftime("%Y%m%d-%H%M%S")
    run_dir = (Path(args.runs_dir) / name).resolve()
    if args.resume and not (run_dir / "state.json").exists():
        print(f"coda {args.command}: --resume: no run to continue in {run_dir} (no state.json); drop --resume to "
              "start it", file=sys.stderr)
        return 2
    if run_dir.exists() and (run_dir / "state.json").exists() and not args.resume:
        print(f"{run_dir} already holds a run; pass --resume to continue it or choose another --name",
              file=sys.stderr)
        return 2
    problem = _unwritable(run_dir)
    if problem:
        print(f"[coda] cannot write the run directory {run_dir}: {problem}; choose a writable --runs-dir "
              "(nothing was started or recorded)", file=sys.stderr)
        return 2
    _file_log(run_dir)
    urls = dict(u.split("=", 1) for u in args.server_url)
    specs = [ServerSpec(name=s.name, url=urls[s.name]) if s.name in urls else s for s in stdio_specs(
        run_dir, extra_args={"trainer": executor_argv(args) + (["--train-threads", str(args.train_threads)]
                                                          if args.train_threads else []),
                  "memory": ["--memory-uri", args.memory_uri] if args.memory_uri else []}, robot=preset.robot)]
    print(f"[coda] starting MCP servers (sim, verifier, memory, trainer) for {run_dir}", file=sys.stderr)
    try:
        with Hub(specs) as hub:
            if args.mode == "autonomous":
                from agent.autonomous import run_autonomous

                state = run_autonomous(hub, roles, run_dir, preset, name, max_turns=args.max_turns,
                                       max_cost=args.max_cost)
            else:
                from agent.loop import CoEvolution
                from agent.methods import get_method

                loop = CoEvolution(hub, roles, run_dir, preset, name, method=get_method(args.method))
                state = loop.run()
                media = _media(hub, state)
            # MCP overhead of this session: call wall time minus time inside the servers' tool functions
            mcp = hub.transport_seconds()
            state = _record_mcp(run_dir, mcp)
    except (OSError, ToolError) as exc:  # e.g. the disk filled up or the run directory became read-only mid-run
        log.info("run stopped", exc_info=True)  # the traceback goes to run.log, not the terminal
        print(f"[coda] run stopped: {exc}; completed steps are kept in {run_dir / 'state.json'}: fix the cause "
              f"and continue with --name {name} --resume", file=sys.stderr)
        return 1
    report = write_report(state, run_dir, media if args.mode != "autonomous" else None)
    from agent.report import run_metrics, success_table

    _, ood = success_table(state["steps"].get("eval.before", {}).get("result", []),
                           state["steps"].get("eval.after", {}).get("result", []))
    summary = {"run_dir": str(run_dir), "report": str(report), **run_metrics(state),
               "ood_before_after": {f: [round(b, 3), round(a, 3)] for f, (b, a) in ood.items()}}
    if preset.external:
        before, after = (state["steps"].get(k, {}).get("result", []) for k in ("external.before", "external.after"))
        after_of = {e["suite"]: e["success_rate"] for e in after}
        summary["external_before_after"] = {e["suite"]: [round(e["success_rate"], 3),
                                                         round(after_of.get(e["suite"], float("nan")), 3)]
                                            for e in before}
    emit(summary, args.json)
    return 0


def _unwritable(run_dir: Path) -> str | None:
    """Why files cannot be created in `run_dir` (made if missing), or None when they can."""
    probe = run_dir / f".write-test-{os.getpid()}"
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _file_log(run_dir: Path) -> None:
    """INFO and above to runs/NAME/run.log; the terminal keeps its level (warnings, or debug with -v)."""
    root = logging.getLogger()
    for h in root.handlers:
        h.setLevel(root.level)
    handler = logging.FileHandler(run_dir / "run.log")
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(min(root.level, logging.INFO))


def _record_mcp(run_dir: Path, mcp: dict) -> dict:
    from agent.runstate import RunState

    rs = RunState(run_dir)
    wall = rs.get("wall_seconds", 0.0)
    rs.set("mcp_overhead", {**mcp, "share_of_wall": mcp["overhead_seconds"] / wall if wall else None})
    return rs.data


def _media(hub, state: dict) -> dict[str, bytes]:
    """A render of an evolved scene and GIFs of a success and a failure (best effort; needs offscreen GL)."""
    from agent.report import gif_from_pngs, image_bytes

    out = {}
    try:
        rollouts = [x for k, v in state["steps"].items() if k.endswith(".rollouts") for x in v["result"]]
        evolved = [s for k, v in state["steps"].items() if k.endswith(".generate") for s in v["result"]
                   if s["verified"] and s["batch"] == "targeted"]
        if evolved:
            img = image_bytes(hub.call("sim", "render_scene", {"scene_id": evolved[0]["scene_id"], "size": 256}).content)
            if img:
                out["evolved_scene.png"] = img
        for label, want in (("success", True), ("failure", False)):
            pick = next((x for x in rollouts if x["success"] == want), None)
            if pick is None:
                continue
            frames = []
            for step in range(0, pick["steps"] + 1, max(1, pick["steps"] // 12)):
                res = hub.call("trainer", "rollout_keyframe", {"rollout_id": pick["rollout_id"], "step": step,
                                                                 "size": 160})
                img = image_bytes(res.content)
                if img:
                    frames.append(img)
            if frames:
                out[f"rollout_{label}.gif"] = gif_from_pngs(frames)
    except Exception as exc:  # noqa: BLE001 - media are optional; the report is written without them
        log.warning("could not render report media: %s", exc)
    return out
