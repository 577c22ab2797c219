"""The `coda` command line: one entry point, one module per command group under `coda.commands`."""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import signal
import sys
import threading

# command name -> module under coda.commands exposing register(subparsers) and run(args) -> int
COMMANDS = {
    "run": "run",
    "sim": "sim",
    "verify": "verify",
    "memory": "memory",
    "train": "train",
    "eval": "evaluate",
    "serve": "serve",
    "mcp-config": "mcp_config",
    "bench": "bench",
    "experiment": "experiment",
}


WORDS: list[str] = []
"""the positional words of the command line being parsed (command groups import only what they run)"""


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error (what is wrong and what is valid) and a pointer to --help, exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    parser = Parser(prog="coda", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    sub = parser.add_subparsers(dest="command", required=True)
    words = [w for w in (sys.argv[1:] if argv is None else argv) if not w.startswith("-")]
    WORDS[:] = words
    # import only the command group being run (each pulls in heavy libraries); all of them for --help
    chosen = {words[0]: COMMANDS[words[0]]} if words and words[0] in COMMANDS else COMMANDS
    for name, module in chosen.items():
        try:
            mod = importlib.import_module(f"coda.commands.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"coda.commands.{module}":
                raise
            continue  # command group not built yet
        mod.register(sub, name)
    return parser


def emit(payload, as_json: bool) -> None:
    """Print a command's result: JSON for machines, `key: value` lines for people."""
    if as_json:
        print(json.dumps(payload, indent=2, default=str))
        return
    if isinstance(payload, dict):
        width = max((len(str(k)) for k in payload), default=0)
        for key, value in payload.items():
            if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                print(str(key))  # a table: one row per item
                for row in value:
                    print("  " + "  ".join(f"{k}={_plain(v)}" for k, v in row.items()))
                continue
            print(f"{str(key).ljust(width)}  {_plain(value)}")
    else:
        print(payload)


def _plain(value) -> str:
    """A value as a person reads it: floats to 4 digits, lists comma-separated."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain(v) for v in value)
    return str(value)


class Terminated(KeyboardInterrupt):
    """SIGTERM (e.g. `timeout`, a job scheduler): unwinds like Ctrl-C, so the MCP servers, worker pools and
    sandbox zygotes a command started are closed on the way out instead of running on as orphans."""


def _terminated(signum, frame) -> None:
    raise Terminated


def main(argv: list[str] | None = None) -> int:
    # one torch / BLAS thread unless the user asks for more (before torch is imported): parallelism comes from
    # the env workers, and idle-waiting threads on busy cores slow BC updates 4-9x (docs/BENCHMARKS.md, Policy)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminated)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, Terminated)
        print("terminated" if terminated else "interrupted", file=sys.stderr)
        return 143 if terminated else 130
    except BrokenPipeError:  # output piped into e.g. `head`, which closed early
        sys.stderr.close()
        return 0
    except (ValueError, LookupError, OSError) as exc:  # bad input or an unusable path: one line, no traceback
        if args.verbose:
            raise
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        print(f"coda {args.command}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    from coda.cli import main as _main  # one module instance (the command groups import coda.cli), not a copy

    sys.exit(_main())
