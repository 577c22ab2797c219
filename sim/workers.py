"""Parallel simulation: environments owned by worker processes or Ray actors, and an ordered task map.

Rollouts: the policy never leaves the caller's process. At every chunk boundary the caller runs one batched
forward pass for all live environments (`policy.rollout.rollout`), sends each worker the chunks of the
environments it owns, and the workers step them in parallel. Environment i is always reset with seeds[i] and
results come back in environment order, so episodes are identical by seed whatever the executor or the number
of workers.

Tasks (planner demonstrations, spec verification): `Executor.map(fn, items)` runs a picklable module-level
function over items on the workers and returns the results in item order.

Executors:
- `SerialExecutor`: in process (the default; no start-up cost).
- `ProcessExecutor(workers=N)`: N spawned worker processes, started on first use and kept until `close()`.
- `RayExecutor(workers=N, address=None)`: N Ray actors on a local Ray instance or on a cluster at `address`
  (every node needs this package installed).
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import subprocess
import sys
import threading
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait

import numpy as np

from sim.constants import CHUNK
from sim.env import MAX_STEPS, CodaEnv
from sim.spec import SceneSpec
from sim.trace import Trace, TraceRecorder

log = logging.getLogger(__name__)

EXECUTORS = ("local", "ray")


# --- what workers run ----------------------------------------------------------------------------


@dataclass
class StepResult:
    """What one environment did with one chunk: the observation after each executed action."""

    observations: list[dict]
    actions: np.ndarray
    done: bool


@dataclass
class EnvResult:
    success: bool
    steps: int
    trace: Trace | None = None


class EnvShard:
    """The environments one worker owns, keyed by their index in the caller's batch."""

    def __init__(self) -> None:
        self.envs: dict[int, CodaEnv] = {}
        self.recorders: dict[int, TraceRecorder] = {}

    def reset(self, items: Sequence[tuple[int, SceneSpec, int, bool]]) -> dict[int, dict]:
        self.envs, self.recorders, out = {}, {}, {}
        for i, spec, seed, record in items:
            env = CodaEnv(spec)
            self.envs[i] = env
            if record:
                self.recorders[i] = TraceRecorder(env)
                out[i] = self.recorders[i].reset(seed=seed)
            else:
                out[i] = env.reset(seed=seed)
        return out

    def step(self, chunks: dict[int, np.ndarray]) -> dict[int, StepResult]:
        out = {}
        for i, chunk in chunks.items():
            stepper = self.recorders.get(i) or self.envs[i]
            obs, acts, done = [], [], False
            for a in np.asarray(chunk, dtype=np.float32):
                o, _, term, trunc, _ = stepper.step(a)
                obs.append(o)
                acts.append(a)
                if term or trunc:
                    done = True
                    break
            out[i] = StepResult(obs, np.asarray(acts, dtype=np.float32).reshape(-1, 7), done)
        return out

    def finish(self) -> dict[int, EnvResult]:
        out = {i: EnvResult(env.success(), env.steps, self.recorders[i].trace() if i in self.recorders else None)
               for i, env in self.envs.items()}
        self.envs, self.recorders = {}, {}
        return out

    def call(self, fn: Callable, item):
        return fn(item)


# --- executors -----------------------------------------------------------------------------------


class Executor(ABC):
    """Where simulation work runs. `workers` environments shards / task slots run at once."""

    kind = "local"
    workers = 1
    _pool_lock = threading.Lock()  # replaced per instance by subclasses with workers

    @abstractmethod
    def map(self, fn: Callable, items: Sequence) -> list:
        """fn(item) for every item (fn must be a picklable module-level function); results in item order."""

    @abstractmethod
    def _shards(self, n: int) -> list[_ShardHandle]:
        """Handles of up to n env shards."""

    @contextmanager
    def env_pool(self):
        """An EnvPool on this executor's workers; one rollout at a time per executor (others wait)."""
        with self._pool_lock:
            yield EnvPool(self)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the workers (nothing to release in process)."""

    def describe(self) -> dict:
        return {"executor": self.kind, "workers": self.workers}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _ShardHandle(ABC):
    @abstractmethod
    def submit(self, method: str, *args) -> None:
        """Start shard.method(*args); one request at a time per handle."""

    @abstractmethod
    def result(self):
        """The result of the last submitted request (re-raised in the caller if it failed)."""


class _LocalHandle(_ShardHandle):
    def __init__(self, shard: EnvShard):
        self.shard, self._out = shard, None

    def submit(self, method, *args):
        self._out = getattr(self.shard, method)(*args)

    def result(self):
        out, self._out = self._out, None
        return out


class SerialExecutor(Executor):
    """In process; each pool gets fresh shards, so concurrent rollouts in threads do not share environments."""

    @contextmanager
    def env_pool(self):
        yield EnvPool(self)

    def map(self, fn, items):
        return [fn(x) for x in items]

    def _shards(self, n):
        return [_LocalHandle(EnvShard())]


class WorkerError(RuntimeError):
    """A worker raised; the message carries the worker-side traceback."""


def _worker_main(conn: Connection) -> None:
    shard = EnvShard()
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        except Exception as exc:  # the request could not be unpickled (e.g. a function this worker cannot import)
            conn.send(("error", f"cannot read the request: {type(exc).__name__}: {exc}"))
            continue
        if msg[0] == "close":
            return
        method, args = msg
        try:
            conn.send(("ok", getattr(shard, method)(*args)))
        except BaseException as exc:  # report everything; the worker itself stays alive
            conn.send(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))


class _ProcessHandle(_ShardHandle):
    """A worker started as `python -m sim.workers FD` (not multiprocessing spawn: that re-imports the caller's
    __main__, which breaks scripts without a main guard), talking pickled messages over a socket pair."""

    def __init__(self):
        parent, child = socket.socketpair()
        # the caller's import path (as multiprocessing's spawn passes it), one math thread per worker
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "OMP_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "sim.workers", str(child.fileno())],
                                     pass_fds=(child.fileno(),), env=env, stdin=subprocess.DEVNULL)
        child.close()
        self.conn = Connection(parent.detach())

    def submit(self, method, *args):
        self.conn.send((method, args))

    def result(self):
        try:
            status, value = self.conn.recv()
        except (EOFError, OSError) as exc:
            raise WorkerError(f"simulation worker {self.proc.pid} died (exit code {self.proc.poll()})") from exc
        if status == "error":
            raise WorkerError(f"simulation worker failed: {value}")
        return value

    def close(self):
        try:
            self.conn.send(("close",))
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.conn.close()


def _ready_processes(handles: list[_ProcessHandle]) -> list[_ProcessHandle]:
    by_conn = {h.conn: h for h in handles}
    return [by_conn[c] for c in wait(list(by_conn))]


def _map_on(handles: Sequence[_ShardHandle], fn: Callable, items: list, ready) -> list:
    """fn(item) for all items on the workers behind `handles`, one in flight per worker, the next item to
    whichever worker finishes first (`ready` blocks until some busy handles have results); results in order."""
    results: list = [None] * len(items)
    busy: dict[_ShardHandle, int] = {}
    nxt = 0
    while nxt < len(items) or busy:
        for h in handles:
            if nxt < len(items) and h not in busy:
                h.submit("call", fn, items[nxt])
                busy[h] = nxt
                nxt += 1
        for h in ready(list(busy)):
            results[busy.pop(h)] = h.result()
    return results


class ProcessExecutor(Executor):
    """N worker processes (fresh interpreters: safe next to torch threads), started on first use."""

    def __init__(self, workers: int = 2):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.workers = workers
        self._handles: list[_ProcessHandle] = []
        self._lock = threading.Lock()
        self._pool_lock = threading.Lock()
        atexit.register(self.close)

    def _start(self) -> list[_ProcessHandle]:
        with self._lock:
            if not self._handles:
                self._handles = [_ProcessHandle() for _ in range(self.workers)]
            return self._handles

    def _shards(self, n):
        return self._start()[: max(1, min(n, self.workers))]

    def map(self, fn, items):
        with self._pool_lock:
            return _map_on(self._start(), fn, list(items), _ready_processes)

    def close(self):
        with self._lock:
            for h in self._handles:
                h.close()
            self._handles = []


class _RayHandle(_ShardHandle):
    def __init__(self, actor):
        self.actor, self._ref = actor, None

    def submit(self, method, *args):
        self._ref = getattr(self.actor, method).remote(*args)

    def result(self):
        import ray

        ref, self._ref = self._ref, None
        return ray.get(ref)


def _ready_actors(handles: list[_RayHandle]) -> list[_RayHandle]:
    import ray

    by_ref = {h._ref: h for h in handles}
    done, _ = ray.wait(list(by_ref), num_returns=1)
    return [by_ref[r] for r in done]


class RayExecutor(Executor):
    """N Ray actors (one CPU each) that own env shards; tasks run as Ray tasks. Connects to `address` when given
    (a running cluster: `ray start --head` prints it), else starts a local Ray instance for this process."""

    kind = "ray"

    def __init__(self, workers: int = 2, address: str | None = None, temp_dir: str | None = None):
        try:
            import ray
        except ImportError as exc:  # optional dependency
            raise RuntimeError("the ray executor needs ray: pip install -e '.[ray]'") from exc
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.workers, self.address = workers, address
        self._started = False
        self._pool_lock = threading.Lock()
        if not ray.is_initialized():
            kwargs = {"address": address} if address else {"num_cpus": max(workers, os.cpu_count() or 1)}
            if temp_dir and not address:
                kwargs["_temp_dir"] = temp_dir
            ray.init(include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING, **kwargs)
            self._started = True
        self._actors = []

    def _actors_started(self) -> list:
        import ray

        if not self._actors:
            actor_cls = ray.remote(num_cpus=1)(EnvShard)
            self._actors = [actor_cls.remote() for _ in range(self.workers)]
        return self._actors

    def _shards(self, n):
        return [_RayHandle(a) for a in self._actors_started()[: max(1, min(n, self.workers))]]

    def map(self, fn, items):
        """Tasks run on the same actors: tasks asking for CPUs of their own could wait forever behind actors
        that hold every CPU."""
        with self._pool_lock:
            return _map_on(self._shards(self.workers), fn, list(items), _ready_actors)

    def describe(self):
        return {**super().describe(), "address": self.address}

    def close(self):
        import ray

        for a in self._actors:
            ray.kill(a)
        self._actors = []
        if self._started and ray.is_initialized():
            ray.shutdown()
            self._started = False


def make_executor(kind: str = "local", workers: int = 1, address: str | None = None,
                  temp_dir: str | None = None) -> Executor:
    """`local` with 1 worker runs in process; `local` with more spawns processes; `ray` uses Ray actors."""
    if kind not in EXECUTORS:
        raise ValueError(f"unknown executor {kind!r}; valid: {', '.join(EXECUTORS)}")
    if kind == "ray":
        return RayExecutor(workers, address=address, temp_dir=temp_dir)
    if address:
        raise ValueError("--ray-address needs --executor ray")
    return SerialExecutor() if workers <= 1 else ProcessExecutor(workers)


SERIAL = SerialExecutor()


# --- env pool -----------------------------------------------------------------------------------


@dataclass
class EnvPool:
    """A batch of environments spread over an executor's shards, balanced by expected cost (the lockstep waits
    for the slowest shard at every chunk)."""

    executor: Executor
    _owner: list[int] = field(default_factory=list)
    _handles: list[_ShardHandle] = field(default_factory=list)

    def _fan(self, per_shard: list, method: str) -> list:
        """Submit method(per_shard[s]) on every shard with work, then gather (in shard order)."""
        active = [s for s, arg in enumerate(per_shard) if arg]
        for s in active:
            self._handles[s].submit(method, per_shard[s])
        return [self._handles[s].result() for s in active]

    def reset(self, specs: Sequence[SceneSpec], seeds: Sequence[int], record: bool = False) -> list[dict]:
        if len(specs) != len(seeds):
            raise ValueError(f"{len(specs)} specs but {len(seeds)} seeds")
        self._handles = self.executor._shards(len(specs))
        self._owner = balance([_cost(s) for s in specs], len(self._handles))
        items: list[list] = [[] for _ in self._handles]
        for i, (spec, seed) in enumerate(zip(specs, seeds, strict=True)):
            items[self._owner[i]].append((i, spec, int(seed), record))
        merged: dict[int, dict] = {}
        for part in self._fan(items, "reset"):
            merged.update(part)
        return [merged[i] for i in range(len(specs))]

    def step(self, chunks: dict[int, np.ndarray]) -> dict[int, StepResult]:
        """Execute each environment's chunk (up to CHUNK actions; stops early at the end of its episode)."""
        per: list[dict] = [{} for _ in self._handles]
        for i, c in chunks.items():
            c = np.asarray(c, dtype=np.float32)
            if c.ndim != 2 or c.shape[1] != 7 or len(c) > CHUNK:
                raise ValueError(f"chunk for env {i} has shape {c.shape}; expected (<= {CHUNK}, 7)")
            per[self._owner[i]][i] = c
        out: dict[int, StepResult] = {}
        for part in self._fan(per, "step"):
            out.update(part)
        return out

    def finish(self) -> list[EnvResult]:
        merged: dict[int, EnvResult] = {}
        for h in self._handles:
            h.submit("finish")
        for h in self._handles:
            merged.update(h.result())
        return [merged[i] for i in range(len(self._owner))]


def _cost(spec: SceneSpec) -> float:
    """Expected simulation cost of an episode: its step limit times its number of bodies."""
    return MAX_STEPS.get(spec.family, 100) * (1 + len(spec.object_names()))


def balance(costs: Sequence[float], n: int) -> list[int]:
    """Shard of each item: largest first onto the least-loaded shard (deterministic)."""
    loads, owner = [0.0] * n, [0] * len(costs)
    for i in sorted(range(len(costs)), key=lambda i: -costs[i]):
        s = min(range(n), key=loads.__getitem__)
        owner[i] = s
        loads[s] += costs[i]
    return owner


# --- tasks ---------------------------------------------------------------------------------------


@dataclass
class PlannerRun:
    observations: list[dict]
    actions: np.ndarray
    success: bool
    steps: int
    trace: Trace | None
    meta: dict


def planner_run(spec: SceneSpec, record: bool = False) -> PlannerRun:
    """Run the scripted planner on a spec (a task for `Executor.map`)."""
    from sim.planner import run_planner

    env = CodaEnv(spec)
    demo = run_planner(env)
    obs = [*demo.observations, env.observe()]
    trace = None
    if record:
        rec = TraceRecorder(CodaEnv(spec))
        rec.reset()
        for a in demo.actions:
            rec.step(a)
        trace = rec.trace()
    return PlannerRun(obs, demo.action_array(), demo.success, demo.steps, trace,
                      {"subgoals": demo.subgoals, "failure": demo.failure})


def verify_spec_task(spec: SceneSpec):
    """verify_spec as a task (the spec is plain data: safe to verify outside the sandbox)."""
    from sim.verify import verify_spec

    return verify_spec(spec)


if __name__ == "__main__":  # a ProcessExecutor worker: python -m sim.workers FD
    from sim import workers  # the module under its import name, so results unpickle as sim.workers.*

    workers._worker_main(Connection(int(sys.argv[1])))
