"""Sandboxed execution of untrusted Python: scene programs and reward-potential programs.

Layers, outermost first:

1. :func:`check_source` in the caller's process (rules in :mod:`sim.sandbox.rules`): size,
   UTF-8, syntax, and an AST allow-list (imports of ``sim``, ``math`` and ``numpy`` only; no
   ``eval``/``exec``/``open``/``getattr``...; no double-underscore or private attributes; no
   numpy/MuJoCo file helpers). Nothing starts when it fails.
2. A warm :class:`SandboxPool` of zygote processes (:mod:`sim.sandbox.worker`) that imported numpy,
   MuJoCo and the SDK once and fork one child per run, with a wall-clock timeout. The child for the
   next run is forked, locked down and warmed up while the caller handles the last result.
3. Inside the child (:mod:`sim.sandbox.child`): rlimits (address space, CPU, file size 0, open
   files, processes, no core), a fresh scratch directory, closed descriptors, an audit hook that
   refuses file writes, reads outside the library directories, processes and sockets, restricted
   builtins with a guarded ``__import__`` and read-only module proxies.

After the program ran, a trusted *finalizer* (``"module:function"``, called as
``finalizer(namespace, inputs)``) turns its namespace into a JSON-able value, e.g.
:func:`collect_result`. Every failure comes back as ``SandboxResult(ok=False, error=...)``::

    result = run_untrusted("result = 2 * seed", finalizer="sim.sandbox:collect_result",
                           inputs={"globals": {"seed": 3}})
    assert result.ok and result.value == 6
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import contextvars
import json
import marshal
import math
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, field_validator

from sim.sandbox import isolation as sandbox_os
from sim.sandbox.rules import check_and_compile, find_problems
from sim.sandbox.worker import ID_BYTES, MAX_MESSAGE_BYTES, write_message

DEFAULT_ALLOWED: tuple[str, ...] = ("sim", "math", "numpy")
# Imported once per zygote; "module:function" entries are also called, to fill lazy caches (the
# asset pool takes ~0.9 s to build and would otherwise be rebuilt in every forked child).
# Children cannot open files: what a program or finalizer uses must be loaded here (finalizer modules add
# their own SANDBOX_PRELOAD). Programs get the facades of sim.program.PROGRAM_MODULES.
DEFAULT_PRELOAD: tuple[str, ...] = ("numpy", "numpy.random", "mujoco", "sim", "sim.program", "sim.program_helpers",
                                     "sim.program_numpy", "sim.env", "sim.potential", "sim.assets:categories")
DEFAULT_FINALIZER = "sim.sandbox:collect_result"
# Trusted scene program that each standby child runs once, locked down, before its request: it
# takes the copy-on-write page faults of the zygote's heap off the untrusted program's run.
DEFAULT_WARMUP = "sim.sandbox.child:SCENE_WARMUP"
ErrorKind = Literal["encoding", "too_large", "syntax", "forbidden", "timeout", "memory", "recursion",
                    "runtime", "output", "crash"]

_ROOT = str(Path(__file__).resolve().parents[2])
_READY_TIMEOUT_S = 120.0  # first start of a zygote imports numpy, MuJoCo and the SDK
_GRACE_S = 15.0  # how long past the program's own timeout a zygote may take to answer


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits for one sandboxed run."""

    timeout_s: float = 10.0
    """Wall-clock seconds from handing the program to its child to the result; the child is
    killed with SIGKILL after that."""
    cpu_s: int = 10
    """CPU seconds (RLIMIT_CPU) of the child, counted from its fork, so including the few
    milliseconds of its lock-down and warm-up; SIGXCPU at this value, SIGKILL one second later."""
    memory_mb: int = 1024
    """Address space of the child in MB (RLIMIT_AS), including the ~160 MB that the zygote's
    preloaded Python, numpy, MuJoCo and SDK (with its asset pool) already map; must exceed that
    baseline by at least 64 MB (see ``SandboxPool.worker_info()["baseline_mb"]``)."""
    max_source_bytes: int = 200_000
    """Largest accepted program, in UTF-8 bytes."""
    max_output_bytes: int = 5_000_000
    """Largest accepted JSON result of the finalizer, in bytes."""
    max_procs: int = 0
    """RLIMIT_NPROC of the child. It does not bind for root, so forks are also blocked by the
    audit hook and by replacing os.fork & co. in the child."""
    max_file_bytes: int = 0
    """RLIMIT_FSIZE of the child: 0 means no byte can be written to any file."""
    max_open_files: int = 32
    """RLIMIT_NOFILE of the child (lazy library imports still need a few descriptors)."""

    def __post_init__(self) -> None:
        t = self.timeout_s
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or not 0 < t <= 3600:
            raise ValueError(f"SandboxLimits.timeout_s must be a number of seconds in (0, 3600], got {t!r}")
        for name, low, high in (("cpu_s", 1, 3600), ("memory_mb", 128, 1 << 20),
                                ("max_source_bytes", 1, 1 << 30), ("max_output_bytes", 1, 1 << 30),
                                ("max_procs", 0, 1 << 16), ("max_file_bytes", 0, 1 << 40),
                                ("max_open_files", 8, 1 << 16)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValueError(f"SandboxLimits.{name} must be an integer in [{low}, {high}], got {value!r}")


def printable(text: str, newlines: bool = False) -> str:
    """`text` with control and format characters (ESC, CR, BEL, bidi overrides ...) written as escapes, so text a
    program chose cannot move a terminal's cursor, erase a report line or reorder what a reader sees; newlines
    and tabs stay when `newlines`."""
    keep = "\n\t" if newlines else ""
    return "".join(c if c in keep or unicodedata.category(c) not in ("Cc", "Cf") else
                   c.encode("unicode_escape").decode("ascii") for c in text)


class SandboxError(BaseModel):
    """Why a sandboxed program failed, worded for the person or LLM who has to fix it. Its text may quote what the
    program raised or printed: control characters come out escaped (`printable`)."""

    kind: ErrorKind
    message: str
    lineno: int | None = None
    detail: str | None = None

    @field_validator("message")
    @classmethod
    def _one_printable_line(cls, v: str) -> str:
        return printable(v)

    @field_validator("detail")
    @classmethod
    def _printable_lines(cls, v: str | None) -> str | None:
        return None if v is None else printable(v, newlines=True)


class SandboxResult(BaseModel):
    """Outcome of one sandboxed run; ``value`` is the finalizer's JSON-able return value."""

    ok: bool
    value: Any = None
    error: SandboxError | None = None
    seconds: float = 0.0


def collect_result(namespace: dict, inputs: dict) -> Any:
    """Generic trusted finalizer: the program's global ``result``, which must be JSON-able."""
    if "result" not in namespace:
        raise ValueError("program did not define `result`")
    value = namespace["result"]
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`result` is not JSON-serializable ({exc}); use numbers, strings, "
                         "lists and dicts (convert numpy values with float() or .tolist())") from None
    return value


def check_source(source: str | bytes, allowed_imports: tuple[str, ...] = DEFAULT_ALLOWED, *,
                 max_source_bytes: int = SandboxLimits.max_source_bytes) -> list[SandboxError]:
    """Problems found without running ``source`` (see :mod:`sim.sandbox.rules`); empty means runnable."""
    return [SandboxError(**p) for p in find_problems(source, tuple(allowed_imports), max_source_bytes)]


# --- warm pool of zygotes ---------------------------------------------------------------------

class _ZygoteGone(Exception):
    """The zygote died (broken pipe or end of stream); the request may be retried."""


class _Desynchronised(Exception):
    """An answer that does not belong to the request (or output between answers): replace the zygote."""


class _Zygote:
    """One ``python -m sim.sandbox.worker`` process and its pipes."""

    def __init__(self, preload: tuple[str, ...], warmup: str | None = None) -> None:
        keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "MUJOCO_GL", "PYOPENGL_PLATFORM")
        env = {k: v for k, v in os.environ.items() if k in keep}  # no API keys in the sandbox
        env.update(PYTHONPATH=os.pathsep.join(p for p in (_ROOT, os.environ.get("PYTHONPATH")) if p),
                   PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1",
                   OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        self.stderr = tempfile.TemporaryFile()  # read back only to explain a dead zygote
        namespaces = sandbox_os.capabilities()["namespaces"] or []
        self.proc = subprocess.Popen(
            [*namespaces, sys.executable, "-m", "sim.sandbox.worker",
             *([f"--warmup={warmup}"] if warmup else []), *preload], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.stderr, cwd=_ROOT, env=env,
            start_new_session=True, close_fds=True)
        self.info: dict | None = None

    def last_words(self) -> str:
        """The tail of the zygote's stderr (e.g. the traceback of a failed start)."""
        try:
            self.stderr.seek(0, os.SEEK_END)
            self.stderr.seek(max(self.stderr.tell() - 600, 0))
            return self.stderr.read().decode(errors="replace").strip()
        except (OSError, ValueError):
            return ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ready(self) -> dict:
        if self.info is None:
            info = self._read(time.monotonic() + _READY_TIMEOUT_S)
            info["host_pid"] = self.host_pid()
            self.info = info
        return self.info

    def host_pid(self) -> int:
        """The zygote's pid as this process sees it (inside its PID namespace it is 1; then it is the
        only child of the ``unshare`` launcher)."""
        if not sandbox_os.capabilities()["namespaces"]:
            return self.proc.pid
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as fh:
                return int(fh.read().split()[0])
        except (OSError, IndexError, ValueError):
            return self.proc.pid

    def request(self, message: dict, timeout_s: float) -> dict:
        """Send ``message`` and return the answer to it. The answer must carry the request's id and
        nothing may arrive between answers: otherwise the zygote is out of step (or forged frames
        reached its output) and :class:`_Desynchronised` says it must be replaced."""
        self.ready()
        fd = self.proc.stdout.fileno()
        if select.select([fd], [], [], 0)[0]:
            raise _Desynchronised("sandbox worker wrote output nobody asked for")
        request_id = os.urandom(ID_BYTES // 2).hex()
        try:
            write_message(self.proc.stdin.fileno(), {**message, "id": request_id})
        except OSError as exc:
            raise _ZygoteGone(str(exc)) from None
        deadline = time.monotonic() + timeout_s
        size = int.from_bytes(self._read_exact(fd, 8, deadline), "big")
        if not ID_BYTES <= size <= MAX_MESSAGE_BYTES:
            raise _Desynchronised(f"sandbox worker sent a frame of {size} bytes")
        body = self._read_exact(fd, size, deadline)
        if body[:ID_BYTES] != request_id.encode():
            raise _Desynchronised("sandbox worker answered another request")
        return json.loads(body[ID_BYTES:])

    def _read(self, deadline: float) -> dict:
        fd = self.proc.stdout.fileno()
        size = int.from_bytes(self._read_exact(fd, 8, deadline), "big")
        return json.loads(self._read_exact(fd, size, deadline))

    @staticmethod
    def _read_exact(fd: int, size: int, deadline: float) -> bytes:
        chunks, got = [], 0
        while got < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise TimeoutError("sandbox worker stopped answering")
            chunk = os.read(fd, min(size - got, 1 << 20))
            if not chunk:
                raise _ZygoteGone("sandbox worker exited")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        """End of input stops an idle zygote; one still importing is simply killed."""
        if self.info is None:
            self.proc.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


class SandboxPool:
    """Thread-safe pool of warm zygotes; each :meth:`run` takes one, forks a child, gives it back.

    Fairness: a *caller* (the key passed to :meth:`run`, or set with :func:`caller_scope`, e.g. one MCP
    session) holds at most ``per_caller`` zygotes at a time (default: all but one), so one caller's
    hanging programs leave a zygote to everybody else and delay them by at most one program's run.
    A freed zygote goes to the waiting caller granted one least recently; a caller that starts waiting with
    nothing of its own running or queued ranks as if granted :data:`FRESH_LEAD` grants ago (then oldest
    request first). So a caller's backlog never runs ahead of a newcomer, and several callers with
    backlogs (e.g. one client's several sessions) delay a newcomer by at most one program's run while
    there are at most ``FRESH_LEAD`` of them; beyond that, by one run per ``size`` callers ranked ahead.
    """

    def __init__(self, size: int = 2, limits: SandboxLimits | None = None,
                 preload: tuple[str, ...] = DEFAULT_PRELOAD, warmup: str | None = "auto",
                 per_caller: int | None = None) -> None:
        """``warmup``: ``"module:NAME"`` of a trusted program (a dict with ``source``, ``finalizer``
        and ``inputs``) that standby children for that finalizer run once before their request;
        ``"auto"`` means :data:`DEFAULT_WARMUP` when the SDK (``sim``) is preloaded, None none."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"SandboxPool.size must be a positive integer, got {size!r}")
        per_caller = max(1, size - 1) if per_caller is None else per_caller
        if isinstance(per_caller, bool) or not isinstance(per_caller, int) or not 1 <= per_caller <= size:
            raise ValueError(f"SandboxPool.per_caller must be an integer in [1, {size}], got {per_caller!r}")
        caps = sandbox_os.capabilities()
        sandbox_os.report_once(caps)
        if sandbox_os.required() and caps["reasons"]:
            raise RuntimeError(sandbox_os.degraded_message(caps))
        sandbox_os.no_dump()  # this process may hold API keys: closed to other processes' /proc reads
        self.size, self.per_caller, self.limits = size, per_caller, limits or SandboxLimits()
        self.preload = tuple(preload)
        if warmup == "auto":
            warmup = DEFAULT_WARMUP if "sim" in self.preload else None
        self.warmup = warmup
        self._owner = os.getpid()
        self._closed = False
        self._cond = threading.Condition()
        self._callers: dict[str, _CallerState] = {}  # callers with a program running or waiting
        self._grants = 0  # zygotes handed out so far
        self._tickets = 0  # requests that started waiting so far
        self._idle: list[_Zygote] = [_Zygote(self.preload, self.warmup) for _ in range(size)]

    @property
    def closed(self) -> bool:
        return self._closed

    def worker_info(self) -> dict:
        """Readiness report of one zygote: pid (in its namespace), host_pid, baseline_mb, threads,
        preload_errors, isolation."""
        zygote = self._acquire("")
        try:
            return dict(zygote.ready())
        finally:
            self._release(zygote, "")

    def run(self, source: str | bytes, *, finalizer: str = DEFAULT_FINALIZER, inputs: dict | None = None,
            limits: SandboxLimits | None = None,
            allowed_imports: tuple[str, ...] = DEFAULT_ALLOWED, caller: str | None = None) -> SandboxResult:
        """Check and run ``source``; never raises for a failure of the program or the sandbox."""
        start = time.perf_counter()
        try:
            response = self._run(source, finalizer, {} if inputs is None else inputs,
                                 limits or self.limits, tuple(allowed_imports), _caller(caller))
        except Exception as exc:
            response = _failure("crash", f"sandbox failure: {type(exc).__name__}: {exc}")
        return _to_result(response, time.perf_counter() - start)

    def run_unguarded(self, source: str, *, limits: SandboxLimits | None = None,
                      inputs: dict | None = None) -> SandboxResult:
        """**For tests of the OS layers only**: run ``source`` with the real builtins and without the
        static check, the module proxies, the neutered functions or the audit hook — as if every
        Python-level guard had fallen. rlimits, namespaces, the empty root and seccomp still apply.
        The program's ``result`` is the answer (``sim.sandbox:collect_result``)."""
        start = time.perf_counter()
        limits = limits or self.limits
        try:
            code = compile(source, "<unguarded>", "exec", dont_inherit=True)
            request = {"source": source, "code": base64.b64encode(marshal.dumps(code)).decode(),
                       "finalizer": DEFAULT_FINALIZER, "inputs": inputs or {}, "limits": asdict(limits),
                       "allowed_imports": [], "python_guards": False}
            response = self._dispatch(request, limits.timeout_s + _GRACE_S, _caller(None))
        except Exception as exc:
            response = _failure("crash", f"sandbox failure: {type(exc).__name__}: {exc}")
        return _to_result(response, time.perf_counter() - start)

    def _run(self, source, finalizer, inputs, limits, allowed, caller) -> dict:
        problems, code = check_and_compile(source, allowed, limits.max_source_bytes)
        errors = [SandboxError(**p) for p in problems]
        if errors:
            detail = "\n".join(e.message for e in errors) if len(errors) > 1 else errors[0].detail
            return {"ok": False, "error": errors[0].model_copy(update={"detail": detail}).model_dump()}
        problem = _inputs_problem(inputs)
        if problem:
            return _failure("crash", problem)
        text = source.decode("utf-8-sig") if isinstance(source, bytes) else source
        # The code object compiled from the checked syntax tree travels along (the child would
        # otherwise compile the source again, cold, on the critical path); the source is for messages.
        request = {"source": text, "code": base64.b64encode(marshal.dumps(code)).decode(),
                   "finalizer": finalizer, "inputs": inputs, "limits": asdict(limits),
                   "allowed_imports": list(allowed)}
        return self._dispatch(request, limits.timeout_s + _GRACE_S, caller)

    def _dispatch(self, request: dict, timeout_s: float, caller: str) -> dict:
        if os.getpid() != self._owner:
            raise RuntimeError("this SandboxPool was created in another process; make a new one")
        zygote = self._acquire(caller)
        last_words = ""
        try:
            for _ in range(2):  # programs are deterministic and side-effect free: one retry is safe
                if not zygote.alive():
                    zygote = self._replace(zygote)
                try:
                    return zygote.request(request, timeout_s)
                except _ZygoteGone:
                    last_words = zygote.last_words()
                    zygote = self._replace(zygote)
                except TimeoutError:
                    zygote = self._replace(zygote)
                    return _failure("crash", f"sandbox worker did not answer within {timeout_s:.0f} s")
                except (_Desynchronised, ValueError) as exc:  # never retried: the answer is not trusted
                    zygote = self._replace(zygote)
                    return _failure("crash", f"sandbox worker replaced: {exc}")
            return _failure("crash", "sandbox worker died twice while running the program"
                            + (f"; its last output: {last_words}" if last_words else ""))
        finally:
            self._release(zygote, caller)

    def _acquire(self, caller: str) -> _Zygote:
        with self._cond:
            state = self._callers.get(caller)
            if state is None:
                state = self._callers[caller] = _CallerState(rank=self._grants - FRESH_LEAD - 0.5)
            ticket = self._tickets
            self._tickets += 1
            state.waiting.append(ticket)
            try:
                while True:
                    if self._closed:
                        raise RuntimeError("SandboxPool is closed")
                    if self._idle and state.waiting[0] == ticket and self._first_in_line() is state:
                        state.waiting.pop(0)
                        state.busy += 1
                        state.rank = self._grants
                        self._grants += 1
                        self._cond.notify_all()  # another zygote may be idle for the next in line
                        return self._idle.pop()
                    self._cond.wait(0.5)
            except BaseException:
                if ticket in state.waiting:
                    state.waiting.remove(ticket)
                self._forget(caller, state)
                self._cond.notify_all()
                raise

    def _first_in_line(self) -> _CallerState | None:
        """The waiting caller below its share that was granted a zygote least recently (oldest request first)."""
        ready = [c for c in self._callers.values() if c.waiting and c.busy < self.per_caller]
        return min(ready, key=lambda c: (c.rank, c.waiting[0]), default=None)

    def _forget(self, caller: str, state: _CallerState) -> None:
        if state.busy <= 0 and not state.waiting and self._callers.get(caller) is state:
            del self._callers[caller]

    def _release(self, zygote: _Zygote, caller: str) -> None:
        with self._cond:
            state = self._callers.get(caller)
            if state is not None:
                state.busy -= 1
                self._forget(caller, state)
            if not self._closed:
                self._idle.append(zygote)
                self._cond.notify_all()
                return
        zygote.close()

    def _replace(self, zygote: _Zygote) -> _Zygote:
        zygote.close()
        return _Zygote(self.preload, self.warmup)

    def close(self) -> None:
        """Stop all idle zygotes now; busy ones stop when their run ends."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._cond.notify_all()
        for zygote in idle:
            zygote.close()

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


FRESH_LEAD = 8
"""a caller that starts waiting with no program of its own running or queued ranks as if it had been granted a
zygote this many grants ago (see :class:`SandboxPool`, fairness)"""


class _CallerState:
    """One caller's programs in a pool: how many run, the tickets of those waiting, and its rank (the number of
    the last grant it got)."""

    __slots__ = ("busy", "waiting", "rank")

    def __init__(self, rank: float) -> None:
        self.busy = 0
        self.waiting: list[int] = []
        self.rank = rank


_current_caller: contextvars.ContextVar[str] = contextvars.ContextVar("sandbox_caller", default="")


@contextlib.contextmanager
def caller_scope(caller: str):
    """Runs in this block count against ``caller``'s share of the pool (e.g. one MCP session)."""
    token = _current_caller.set(str(caller))
    try:
        yield
    finally:
        _current_caller.reset(token)


def _caller(caller: str | None) -> str:
    return _current_caller.get() if caller is None else str(caller)


def _failure(kind: str, message: str) -> dict:
    return {"ok": False, "error": {"kind": kind, "message": message, "lineno": None, "detail": None}}


def _inputs_problem(inputs: Any) -> str | None:
    if not isinstance(inputs, dict):
        return f"sandbox inputs must be a dict, not {type(inputs).__name__}"
    extra = inputs.get("globals") or {}
    if not isinstance(extra, dict) or not all(
            isinstance(k, str) and k.isidentifier() and not k.startswith("_") for k in extra):
        return "sandbox inputs['globals'] must be a dict of public identifiers"
    try:
        json.dumps(inputs, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return f"sandbox inputs are not JSON-serializable: {exc}"
    return None


def _to_result(response: dict, seconds: float) -> SandboxResult:
    try:
        if response.get("ok"):
            return SandboxResult(ok=True, value=response.get("value"), seconds=seconds)
        error = SandboxError.model_validate(response.get("error") or {})
    except Exception as exc:
        error = SandboxError(kind="crash", message=f"malformed sandbox response: {exc}")
    return SandboxResult(ok=False, error=error, seconds=seconds)


_default_pool: SandboxPool | None = None
_default_lock = threading.Lock()


def default_pool() -> SandboxPool:
    """The shared pool of this process (two zygotes), created on first use and closed at exit."""
    global _default_pool
    with _default_lock:
        pool = _default_pool
        if pool is None or pool.closed or pool._owner != os.getpid():
            pool = _default_pool = SandboxPool()
            atexit.register(pool.close)
        return pool


def run_untrusted(source: str | bytes, *, finalizer: str = DEFAULT_FINALIZER, inputs: dict | None = None,
                  limits: SandboxLimits | None = None, allowed_imports: tuple[str, ...] = DEFAULT_ALLOWED,
                  pool: SandboxPool | None = None, caller: str | None = None) -> SandboxResult:
    """Run an untrusted program and its trusted finalizer; every failure is a ``SandboxResult``."""
    try:
        pool = pool or default_pool()
    except Exception as exc:
        return SandboxResult(ok=False, error=SandboxError(kind="crash", message=f"sandbox failure: {exc}"))
    return pool.run(source, finalizer=finalizer, inputs=inputs, limits=limits, allowed_imports=allowed_imports,
                    caller=caller)
