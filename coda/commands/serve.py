"""`coda serve NAME`: run one MCP server (sim, verifier, memory, trainer) over stdio or streamable HTTP.

    coda serve sim --run-dir runs/demo                          # stdio (for Claude Desktop and other clients)
    coda serve sim                                              # run dir: $CODA_RUN_DIR, else ~/.local/share/coda/runs/default
    coda serve memory --transport http --port 8733              # http://127.0.0.1:8733/mcp
    CODA_MCP_TOKEN=... coda serve sim --transport http --host 0.0.0.0 --allow-host myhost:8731

Servers sharing a run directory see the same scenes, traces and memory.
"""

from __future__ import annotations

import importlib
import inspect
import os
import shutil
import sys
from pathlib import Path

from coda.options import add_executor_arguments
from sim.constants import ROBOTS

SERVERS: dict[str, str] = {
    "sim": "servers.sim:build_server",
    "verifier": "servers.verifier:build_server",
    "memory": "servers.memory:build_server",
    "trainer": "servers.trainer:build_server",
}
"""server name -> "module:factory"; factory(run_dir: Path, **options) -> MCPServer (options it does not take are
not passed)"""
DEFAULT_PORTS = {"sim": 8731, "verifier": 8732, "memory": 8733, "trainer": 8734}
RUN_DIR_ENV = "CODA_RUN_DIR"


def default_run_dir() -> Path:
    """Where a server keeps its files when no --run-dir is given: $CODA_RUN_DIR, else the user's data directory
    ($XDG_DATA_HOME or ~/.local/share)/coda/runs/default — never the working directory, which an MCP client
    chooses (Claude Desktop starts servers in / or the user's home)."""
    if os.environ.get(RUN_DIR_ENV, "").strip():
        return Path(os.environ[RUN_DIR_ENV]).expanduser()
    data = os.environ.get("XDG_DATA_HOME", "").strip()
    return (Path(data) if data else Path.home() / ".local" / "share") / "coda" / "runs" / "default"
TOKEN_ENV = "CODA_MCP_TOKEN"


def available() -> list[str]:
    """Names of the servers this installation has (a registered module may not be written yet)."""
    import importlib.util

    return [name for name, target in SERVERS.items() if importlib.util.find_spec(target.split(":")[0]) is not None]


def factory(name: str):
    if name not in SERVERS:
        raise SystemExit(f"unknown server {name!r}; valid servers: {', '.join(SERVERS)}")
    module, attr = SERVERS[name].split(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        raise SystemExit(f"the {name} server is not part of this build yet ({module} is missing)") from None
    return getattr(mod, attr)


def build(name: str, run_dir: Path, **options):
    """Build a server, passing only the options its factory accepts (None options are left out)."""
    fn = factory(name)
    params = inspect.signature(fn).parameters
    takes_all = any(p.kind is p.VAR_KEYWORD for p in params.values())
    kwargs = {k: v for k, v in options.items() if v is not None and (takes_all or k in params)}
    return fn(run_dir, **kwargs)


def port_number(value: str) -> int:
    """--port: an integer in 1..65535 (checked before anything is created)."""
    import argparse

    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {value!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be in 1..65535, got {port}")
    return port


def register(sub, name: str) -> None:
    p = sub.add_parser(name, help="run an MCP server (stdio by default, or streamable HTTP)")
    p.add_argument("server", choices=list(SERVERS), help="which server")
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    p.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1)")
    p.add_argument("--port", type=port_number, default=None, help="HTTP port (default: sim 8731, verifier 8732, "
                   "memory 8733, trainer 8734)")
    p.add_argument("--run-dir", default=None, help=f"run directory (default ${RUN_DIR_ENV}, else "
                   "~/.local/share/coda/runs/default; servers sharing one see the same scenes, traces and memory)")
    p.add_argument("--token", default=None, help=f"bearer token HTTP clients must send (default: ${TOKEN_ENV})")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST:PORT",
                   help="extra Host header accepted by the HTTP transport (repeatable)")
    p.add_argument("--embedder", choices=["minilm", "hashing"], default=None,
                   help="memory server: cause embedder (default minilm; hashing is fast and for tests)")
    p.add_argument("--memory-uri", default=None,
                   help="memory server: LanceDB URI of the store (default RUN_DIR/memory), e.g. a shared path")
    p.add_argument("--import-checkpoints", default=None, metavar="DIR",
                   help="trainer server: directory whose checkpoints install_checkpoint copies into the run "
                        "(e.g. a base policy shared by the cells of an experiment)")
    p.add_argument("--robot", choices=ROBOTS, default=None,
                   help="sim / verifier servers: the run's embodiment; every scene stored and verified is made for it "
                        "(default: each scene keeps the robot its program names, the floating gripper unless "
                        "Scene(robot=...))")
    p.add_argument("--torch-threads", type=int, default=None, metavar="N",
                   help="trainer server: CPU threads of the policy's torch arithmetic (default: OMP_NUM_THREADS, "
                        "else 1; simulation parallelism comes from --workers, and more threads than free cores "
                        "slow torch down many times over)")
    p.add_argument("--train-threads", type=int, default=None, metavar="N",
                   help="trainer server: CPU threads of the SFT and of a round's policy and critic updates, while "
                        "no simulation runs (default: --torch-threads; more help on an idle many-core machine)")
    add_executor_arguments(p)  # trainer server: where demos, rollouts and evaluations simulate
    p.set_defaults(func=run)


def torch_threads(requested: int | None) -> int:
    """The trainer's torch thread count: --torch-threads, else OMP_NUM_THREADS, else 1. Measured on the 2-core
    machine beside other jobs: BC updates took 15-20x longer with torch's default two threads than with one
    (docs/BENCHMARKS.md, Policy), because idle-waiting threads compete with the env workers for the cores."""
    if requested is not None:
        if requested < 1:
            raise ValueError(f"--torch-threads must be >= 1, got {requested}")
        return requested
    env = os.environ.get("OMP_NUM_THREADS", "")
    return int(env) if env.isdigit() and int(env) >= 1 else 1


def train_threads(requested: int | None, threads: int) -> int:
    """The trainer's torch threads for the SFT and a round's updates (`TrainerService.train_threads`):
    --train-threads, else its --torch-threads. Nothing else computes while a job's updates run (its simulation
    comes before and after them), so on an idle many-core machine more threads help; on the 2-core machine two
    made an update 1.2-1.6x faster when the other core was idle and up to 3x slower when it was busy
    (docs/BENCHMARKS.md, "Training threads"), hence not the default."""
    if requested is None:
        return threads
    if requested < 1:
        raise ValueError(f"--train-threads must be >= 1, got {requested}")
    return requested


def run(args) -> int:
    from servers.transport import HttpOptions, listen_problem, serve

    try:
        threads = torch_threads(getattr(args, "torch_threads", None))
        updates_threads = train_threads(getattr(args, "train_threads", None), threads)
    except ValueError as exc:
        print(f"coda serve: {exc}", file=sys.stderr)
        return 2

    robot = getattr(args, "robot", None)
    if robot is not None:
        from sim.compile import require_robot

        try:
            require_robot(robot)
        except ValueError as exc:
            print(f"coda serve: {exc}", file=sys.stderr)
            return 2
    if getattr(args, "workers", 1) < 1:
        print(f"coda serve: --workers must be >= 1, got {args.workers}", file=sys.stderr)
        return 2
    given = getattr(args, "import_checkpoints", None)
    import_dir = Path(given).expanduser().resolve() if given else None
    if import_dir is not None and not import_dir.is_dir():
        print(f"coda serve: --import-checkpoints {given} is not a directory; give the folder whose "
              "checkpoints install_checkpoint may copy (e.g. an experiment's base/transformer-sN)", file=sys.stderr)
        return 2
    http = None
    if args.transport == "http":  # checked before the run directory is made: a server that cannot listen leaves none
        try:
            http = HttpOptions(host=args.host, port=args.port or DEFAULT_PORTS.get(args.server, 8730),
                               token=args.token or os.environ.get(TOKEN_ENV) or None,
                               allowed_hosts=tuple(args.allow_host))
        except ValueError as exc:
            print(f"coda serve: {exc}", file=sys.stderr)
            return 2
        problem = listen_problem(http)
        if problem:
            print(f"coda serve: cannot listen on {http.host}:{http.port}: {problem}", file=sys.stderr)
            return 2
    if args.run_dir is not None and not args.run_dir.strip():
        print("coda serve: --run-dir is empty; give the run directory the server keeps its files in "
              f"(default ${RUN_DIR_ENV}, else {default_run_dir()})", file=sys.stderr)
        return 2
    run_dir = (default_run_dir() if args.run_dir is None else Path(args.run_dir)).expanduser().resolve()
    if args.run_dir is None:  # stderr: stdout is the stdio transport's
        print(f"coda serve: no --run-dir given; the {args.server} server keeps its files in {run_dir}", file=sys.stderr)
    from sim.fileio import outermost_missing

    created = outermost_missing(run_dir)  # removed again when the server cannot start
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"coda serve: cannot make the --run-dir {run_dir}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if args.server == "trainer":
        import torch

        torch.set_num_threads(threads)
    embedder = None
    if args.embedder == "hashing":
        from memory_store.embed import HashingEmbedder

        embedder = HashingEmbedder()
    from sim.sandbox.isolation import no_dump

    no_dump()  # a server may hold keys in its environment: closed to other processes' /proc reads
    try:
        server = build(args.server, run_dir, embedder=embedder, workers=args.workers, executor=args.executor,
                       train_threads=updates_threads,
                       ray_address=args.ray_address, memory_uri=args.memory_uri, robot=robot,
                       import_dir=import_dir)
    except BaseException as exc:
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        if not isinstance(exc, (ValueError, OSError)):
            raise
        where = f"--memory-uri {args.memory_uri}" if args.server == "memory" and args.memory_uri else \
            f"--run-dir {run_dir}"
        print(f"coda serve: the {args.server} server cannot start on {where}: {exc}", file=sys.stderr)
        return 2
    serve(server, http)
    return 0
