"""Command-line options shared by several commands."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path


def add_executor_arguments(p: argparse.ArgumentParser, workers: int = 1) -> None:
    """--workers / --executor / --ray-address: where simulation (demos, rollouts, evaluation) runs."""
    p.add_argument("--workers", type=int, default=workers,
                   help=f"simulation worker processes (1 = in process; default {workers}); policy inference stays "
                        "batched here")
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


# --- validated choices and numbers (argparse prints the valid values and exits with 2) ----------------------
def _families() -> tuple[str, ...]:
    from sim.constants import FAMILIES

    return FAMILIES


def _suites() -> tuple[str, ...]:
    from sim.constants import SUITES

    return SUITES


def family_choices(allow_all: bool = False) -> tuple[str, ...]:
    return (*_families(), "all") if allow_all else _families()


def suite_choices() -> tuple[str, ...]:
    return (*_suites(), "seed", "all")


def preset_choices() -> tuple[str, ...]:
    from agent.presets import PRESETS

    return tuple(PRESETS)


def families_list(value: str) -> str:
    """--families a,b: each a known family (kept as the comma-separated string)."""
    names = [f.strip() for f in value.split(",") if f.strip()]
    bad = [f for f in names if f not in _families()]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"unknown famil{'ies' if len(bad) > 1 else 'y'} {', '.join(bad) or '(none)'}"
                                         f"; valid families: {', '.join(_families())}")
    return ",".join(names)


def positive_int(value: str) -> int:
    return _int_at_least(value, 1)


def image_size(value: str) -> int:
    """--size of a rendered image: 32 .. the scenes' offscreen framebuffer height."""
    from servers.contract import MAX_IMAGE_PX

    n = _int_at_least(value, 32)
    if n > MAX_IMAGE_PX:
        raise argparse.ArgumentTypeError(f"must be <= {MAX_IMAGE_PX} (the offscreen framebuffer), got {n}")
    return n


def nonnegative_int(value: str) -> int:
    return _int_at_least(value, 0)


MAX_SEED = 2**32 - 1
"""largest seed a command takes: numpy's legacy seeding (`np.random.seed`, used by TrainConfig.seed and open to
scene programs) accepts 0 .. 2**32 - 1"""
MAX_COUNT = 100_000
"""largest number of scenes, seeds or episodes one command takes: far above any real use (the paper's protocol
evaluates 100 scenes per suite) and low enough that the lists built from it fit in memory; without a bound a
mistyped count hangs with growing memory or overflows"""

MAX_SUITE_SCENES = 20_000
"""largest number of scenes evaluated per suite: a suite's scenes come from its own block of 100,000 seeds
(sim.suites.suite_seed), with up to 5 seeds tried per scene"""


def int_between(low: int, high: int):
    """An argparse type: an integer in low..high (argparse names the flag: "argument --n: must be in 1..100000,
    got 0"), so an absurd count is refused before any work instead of hanging or overflowing later."""

    def parse(value: str) -> int:
        n = _int_at_least(value, low)
        if n > high:
            raise argparse.ArgumentTypeError(f"must be in {low}..{high}, got {n}")
        return n

    parse.__name__ = f"int_between_{low}_{high}"
    return parse


seed_int = int_between(0, MAX_SEED)
"""--seed: a seed numpy accepts"""
count_int = int_between(1, MAX_COUNT)
"""a number of scenes, seeds or episodes: 1 .. MAX_COUNT"""


def nonnegative_float(value: str) -> float:
    """A finite float >= 0 (nan and inf are refused: they pass a `< 0` check and fail deep inside the work)."""
    x = _finite_float(value)
    if x < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {value}")
    return x


def probability(value: str) -> float:
    """A finite float in [0, 1]."""
    x = _finite_float(value)
    if not 0.0 <= x <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a probability in [0, 1], got {value}")
    return x


def _finite_float(value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from None
    if not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {value}")
    return x


def _int_at_least(value: str, low: int) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {value!r}") from None
    if n < low:
        raise argparse.ArgumentTypeError(f"must be >= {low}, got {n}")
    return n


def check_output_file(flag: str, path: Path, example: str = "policy.pt") -> None:
    """ValueError unless a file can be written at `path`: not a folder, and its nearest existing parent is a folder
    this process may write in. Checked before the work whose result is written there, so a mistyped path does not
    waste a training run (or leave a stray PATH.tmp behind)."""
    if path.is_dir():
        raise ValueError(f"{flag} {path} is a folder; give a file path, e.g. {path / example}")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"{flag} {path}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {path}: the folder {parent} is not writable")


def program_paths(values: list[str]) -> list[Path]:
    """Scene-program files from paths: a .py file as it is, a folder as its *.py files in name order."""
    out: list[Path] = []
    for value in values:
        path = Path(value)
        if path.is_dir():
            found = sorted(p for p in path.glob("*.py") if p.is_file())
            if not found:
                raise ValueError(f"{path}: the folder holds no scene programs (*.py)")
            out += found
        elif path.is_file():
            out.append(path)
        else:
            raise ValueError(f"{path}: no such scene program or folder")
    return list(dict.fromkeys(out))


def external_target(value: str) -> str:
    """--target external:BENCH:TASK,... -> the external tasks text (BENCH:TASK,...)."""
    kind, sep, rest = value.partition(":")
    if kind != "external" or not sep or not rest:
        raise argparse.ArgumentTypeError(f"--target {value!r}: give external:BENCHMARK:TASK[,TASK...], e.g. "
                                         "external:robosuite:Lift,Door (benchmarks: robosuite, metaworld)")
    return rest


def add_target_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", type=external_target, default=None, metavar="external:BENCH:TASK,...",
                   help="external target tasks, e.g. external:robosuite:Lift,Stack,PickPlaceCan,Door: evaluated "
                        "before and after, probed after each round; the critic diagnoses their failures and the "
                        "data engine aims scenes of this simulator at them (never trained on; needs "
                        "scripts/setup --external; docs/EXTERNAL.md)")


def check_target(external: str) -> None:
    """ValueError naming the valid benchmarks / tasks, or the setup command when the external venv is missing."""
    if not external:
        return
    from policy.external import parse_external
    from policy.external.base import (
        SETUP_HINT,
        ExternalUnavailable,
        external_python,
        external_venv,
        has_package,
    )

    for benchmark in dict.fromkeys(b for b, _ in parse_external(external)):
        try:
            external_python(benchmark)
        except ExternalUnavailable as exc:
            raise ValueError(str(exc)) from None
        if not has_package(benchmark):
            raise ValueError(f"{benchmark} is not installed in {external_venv()}: {SETUP_HINT}")
