"""Command-line options shared by several commands."""

from __future__ import annotations

import argparse


def add_executor_arguments(p: argparse.ArgumentParser) -> None:
    """--workers / --executor / --ray-address: where simulation (demos, rollouts, evaluation) runs."""
    p.add_argument("--workers", type=int, default=1,
                   help="simulation worker processes (1 = in process); policy inference stays batched here")
    p.add_argument("--executor", choices=["local", "ray"], default="local",
                   help="local worker processes, or Ray actors (pip install -e '.[ray]')")
    p.add_argument("--ray-address", default=None, help="Ray cluster address (default: a local Ray instance)")


def executor_from_args(args: argparse.Namespace):
    from sim.workers import make_executor

    if args.workers < 1:
        raise SystemExit(f"--workers must be >= 1, got {args.workers}")
    return make_executor(args.executor, args.workers, address=args.ray_address)


def executor_argv(args: argparse.Namespace) -> list[str]:
    """The same options as a command line (to pass on to a server process)."""
    out = ["--workers", str(args.workers), "--executor", args.executor]
    return out + (["--ray-address", args.ray_address] if args.ray_address else [])
