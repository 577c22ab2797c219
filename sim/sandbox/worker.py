"""Worker side of the sandbox; the public API is :mod:`sim.sandbox`.

``python -m sim.sandbox.worker [--warmup=MODULE:NAME] MODULE[:FUNCTION]...`` runs a *zygote*: it
imports the heavy modules (and calls the named warm-up functions) once, then serves
length-prefixed JSON requests on its stdin/stdout. For each request it hands the program to a
forked child that locks itself down (rlimits, scratch directory, closed descriptors, an audit
hook, neutered process and socket functions, restricted builtins), runs the untrusted program and
the trusted finalizer, and writes the result on a private pipe. The zygote enforces the
wall-clock limit, kills and reaps the child and classifies how it ended. Forking from this clean,
single-threaded process (never from the caller, which may hold threads, torch or event loops) is
what makes a run cost milliseconds.

Off the critical path: after answering, the zygote kills and reaps the used child and forks a
*standby* child for the next request, locked down for the same limits (and, for scene programs,
warmed up by one trusted program, ``--warmup``); the caller verifies the previous result
meanwhile. A request with other limits, imports or finalizer gets a freshly forked child instead.
Each child runs at most one untrusted program and is killed after its result has arrived.

Only the standard library is imported at module level.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import shutil
import signal
import struct
import sys
import tempfile
import time
import traceback

# --- framing: 8-byte big-endian length, then UTF-8 JSON ---------------------------------------

HEADER = _HEADER = struct.Struct(">Q")
MAX_MESSAGE_BYTES = 1 << 30


def write_message(fd: int, obj: object) -> None:
    write_body(fd, json.dumps(obj, allow_nan=False).encode())


def write_body(fd: int, body: bytes) -> None:
    """Write an already encoded JSON message."""
    write_all(fd, _HEADER.pack(len(body)) + body)


def read_message(fd: int) -> object | None:
    """Read one message; None at a clean end of stream."""
    body = read_body(fd)
    return None if body is None else json.loads(body)


def read_body(fd: int) -> bytes | None:
    """Read one message without decoding it; None at a clean end of stream."""
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_MESSAGE_BYTES:
        raise ValueError(f"message of {size} bytes is too large")
    body = _read_exact(fd, size)
    if body is None:
        raise EOFError("stream ended inside a message")
    return body


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_exact(fd: int, size: int) -> bytes | None:
    chunks, got = [], 0
    while got < size:
        chunk = os.read(fd, min(size - got, 1 << 20))
        if not chunk:
            if got == 0:
                return None
            raise EOFError("stream ended inside a message")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


# --- zygote -----------------------------------------------------------------------------------

EXIT_MEMORY = 73  # the child ran out of memory while reporting
EXIT_INTERNAL = 74  # the child failed in sandbox code

_finalizers: dict[str, object] = {}
_preload_errors: dict[str, str] = {}
_scratch: str | None = None
# OS layers for every child (sim.sandbox.isolation): the seccomp filter (None when unavailable) and whether
# children switch from the real root to nobody; set up once by _serve.
_filter = None
_drop_root = False
_isolation: dict = {}
ID_BYTES = 32  # each answer starts with the id of the request it answers (hex)


def error(kind: str, message: str, lineno: int | None = None, detail: str | None = None) -> dict:
    return {"ok": False, "value": None,
            "error": {"kind": kind, "message": message, "lineno": lineno, "detail": detail}}


def vm_size_mb() -> float:
    """Current address-space size of this process in MB."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_finalizer(spec: str):
    """Import the trusted ``module:function`` in the zygote (once) so children inherit it."""
    global _baseline_mb
    if spec not in _finalizers:
        module_name, sep, attr = spec.partition(":")
        if not sep or not module_name or not attr:
            raise ValueError(f"finalizer must look like 'module:function', got {spec!r}")
        __import__(module_name)
        for name in getattr(sys.modules[module_name], "SANDBOX_PRELOAD", ()):
            __import__(name)  # what the finalizer imports lazily: children cannot open files
        func = getattr(sys.modules[module_name], attr)
        if not callable(func):
            raise TypeError(f"finalizer {spec!r} is not callable")
        _finalizers[spec] = func
        _baseline_mb = None  # the import may have grown the address space
    return _finalizers[spec]


class _Child:
    """A forked child: its pid, result pipe (read end), request pipe (write end) and setup."""

    __slots__ = ("pid", "result_fd", "request_fd", "nonce", "setup")

    def __init__(self, pid: int, result_fd: int, request_fd: int | None, nonce: bytes, setup: dict) -> None:
        self.pid, self.result_fd, self.request_fd = pid, result_fd, request_fd
        self.nonce, self.setup = nonce, setup


_standby: _Child | None = None
_next_setup: dict | None = None  # setup of the last request that reached a child
_warmup: tuple | None = None  # (finalizer, source, inputs) of the trusted warm-up program
_baseline_mb: float | None = None  # address space of this zygote, re-measured when it may grow
_dying: list[_Child] = []  # killed children not yet reaped
_delivered: _Child | None = None  # the child whose result is being answered; killed right after
# After an answer the zygote sleeps this long before forking the next standby: on a busy machine
# the caller, waking up for the answer, then finds a CPU instead of queueing behind the fork.
_YIELD_S = 0.001


def _setup_of(request: dict) -> dict:
    return {"limits": request["limits"], "allowed_imports": request["allowed_imports"],
            "finalizer": request["finalizer"], "python_guards": request.get("python_guards", True) is not False}


def _spawn(setup: dict, warm: bool) -> _Child:
    """Fork a child that locks itself down for ``setup`` and then waits for its request."""
    finalizer = _finalizers[setup["finalizer"]]
    warmup = None
    if warm and _warmup is not None and _warmup[0] == setup["finalizer"]:
        warmup = _warmup[1:]
    from sim.sandbox.child import prepare

    prepare(setup)  # built once here, inherited by every child
    gc.freeze()  # what the zygote made since it started: children's collections leave it alone
    scratch = _scratch_dir()
    nonce = os.urandom(16).hex().encode()
    result_r, result_w = os.pipe()
    request_r, request_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: must never return into the zygote's loop
        try:
            os.close(result_r)
            os.close(request_w)
            from sim.sandbox.child import run_child

            run_child(request_r, result_w, nonce, scratch, setup, finalizer, warmup, (_filter, _drop_root))
        finally:
            os._exit(EXIT_INTERNAL)
    os.close(result_w)
    os.close(request_r)
    return _Child(pid, result_r, request_w, nonce, setup)


def _hand_over(child: _Child, body: bytes) -> bool:
    """Send the encoded request to the child; False when the child is gone. The pipe stays open:
    the child waits on it after its result until it is killed (or the pipe closes)."""
    try:
        write_body(child.request_fd, body)
        return True
    except OSError:  # e.g. a standby killed while it waited
        return False


def _kill(child: _Child) -> None:
    """Kill the child's process group now; it is reaped later by :func:`_reap_dying`. Its exit
    runs at idle priority, so that it takes no CPU time from the caller or the zygote."""
    try:
        os.sched_setscheduler(child.pid, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        pass
    for kill in (os.killpg, os.kill):
        try:
            kill(child.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for fd in (child.request_fd, child.result_fd):
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
    child.request_fd = child.result_fd = None
    _dying.append(child)


def _finish() -> None:
    """Kill the child that delivered its result (it is only exiting by now)."""
    global _delivered
    if _delivered is not None:
        child, _delivered = _delivered, None
        _kill(child)


def _reap_dying(block: bool = False) -> None:
    """Reap killed children (``block``: wait for all of them). A killed child's exit, where the
    kernel tears down its copy of the address space, takes milliseconds; it need not be waited
    for, as the child ran no untrusted code after its result (or was reaped on the spot)."""
    for child in list(_dying):
        try:
            if os.waitpid(child.pid, 0 if block else os.WNOHANG)[0] == 0:
                continue
        except ChildProcessError:
            pass
        _dying.remove(child)


def _wait_for_request(in_fd: int, seconds: float) -> bool:
    """Sleep until the next request arrives or ``seconds`` have passed; True if it arrived."""
    import select

    poller = select.poll()
    poller.register(in_fd, select.POLLIN | select.POLLHUP)
    return bool(poller.poll(seconds * 1000))


def _reap_while_idle(in_fd: int) -> None:
    """Reap the killed children as they end, until the next request arrives."""
    while _dying and not _wait_for_request(in_fd, 0.002):
        _reap_dying()


def handle_request(request: dict, body: bytes | None = None) -> dict | bytes:
    """Run one program in a (standby or freshly forked) child and describe how it ended: a dict,
    or the child's own JSON response as bytes. ``body`` is the request as it was encoded."""
    global _standby, _next_setup, _baseline_mb
    standby, _standby = _standby, None
    try:
        limits = request["limits"]
        if "sim.sandbox.child" in _preload_errors:
            return error("crash", "sandbox worker could not import sim.sandbox.child: "
                                  + _preload_errors["sim.sandbox.child"])
        try:
            load_finalizer(request["finalizer"])
        except Exception as exc:  # a broken trusted finalizer is a configuration error
            return error("crash", f"sandbox finalizer {request['finalizer']!r} could not be loaded: {exc}")
        if _baseline_mb is None:
            _baseline_mb = vm_size_mb()
        if limits["memory_mb"] < _baseline_mb + 64:
            return error("memory", f"memory limit of {limits['memory_mb']} MB is below what the sandbox "
                                   f"runtime itself needs (about {_baseline_mb + 64:.0f} MB); raise "
                                   "SandboxLimits.memory_mb")
        if body is None:
            body = json.dumps(request, allow_nan=False).encode()
        setup = _setup_of(request)
        _next_setup = setup
        child = None
        if standby is not None and standby.setup == setup:
            child, standby = standby, None
            if not _hand_over(child, body):
                _kill(child)
                child = None
        if child is None:
            if standby is not None:
                _kill(standby)  # idle, locked down for other limits; reaped after the answer
                standby = None
            child = _spawn(setup, warm=False)
            if not _hand_over(child, body):
                _kill(child)
                return error("crash", "sandbox child exited before it received the program")
        try:
            return _wait_and_classify(child, limits)
        except BaseException:
            if child.result_fd is not None:
                _kill(child)
            raise
    finally:
        if standby is not None:
            _kill(standby)


def _scratch_dir() -> str:
    """An empty private working directory for the next child (reused while it stays empty)."""
    global _scratch
    if _scratch is None or not os.path.isdir(_scratch):
        _scratch = tempfile.mkdtemp(prefix="coda-sandbox-")
    return _scratch


def _release_scratch(path: str) -> None:
    global _scratch
    try:
        if not os.listdir(path):
            return  # still empty: as good as fresh (removing a directory costs milliseconds)
    except OSError:
        pass
    shutil.rmtree(path, ignore_errors=True)
    _scratch = None


def _wait_and_classify(child: _Child, limits: dict) -> dict | bytes:
    """Wait for the result. A child that delivered it is left to :func:`_finish` (after the
    answer); any other is killed and reaped here, and its end classified."""
    deadline = time.monotonic() + limits["timeout_s"]
    cap = limits["max_output_bytes"] + 4096
    data, reason = _collect(child.result_fd, deadline, cap, child.nonce)
    if reason == "complete":
        global _delivered
        _delivered = child
        return data
    status = rusage = None
    if reason is None:  # end of file without a whole result: the child died; how?
        reaped = _reap_until(child.pid, deadline)
        if reaped is None:
            reason = "timeout"
        else:
            status, rusage = reaped
    if reason is not None:
        for kill in (os.killpg, os.kill):
            try:
                kill(child.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        _, status, rusage = os.wait4(child.pid, 0)
    for fd in (child.result_fd, child.request_fd):
        os.close(fd)
    child.result_fd = child.request_fd = None
    return _classify(reason, data, status, rusage, limits)


def _collect(fd: int, deadline: float, cap: int, nonce: bytes) -> tuple[bytes, str | None]:
    """Read ``nonce + length + JSON``: (JSON, "complete"), or what came and why reading stopped
    ("timeout", "output", "tampered", or None at end of file)."""
    import select

    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    buffer = bytearray()
    head = len(nonce) + HEADER.size
    need = None
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return bytes(buffer), "timeout"
        if not poller.poll(remaining * 1000):
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return bytes(buffer), None
        buffer += chunk
        if len(buffer) > cap + head:
            return bytes(buffer), "output"
        if need is None and len(buffer) >= head:
            if not buffer.startswith(nonce):
                return bytes(buffer), "tampered"
            need = head + HEADER.unpack_from(buffer, len(nonce))[0]
            if need > cap + head:
                return bytes(buffer), "output"
        if need is not None and len(buffer) >= need:
            return bytes(buffer[head:need]), "complete"


def _reap_until(pid: int, deadline: float):
    pause = 0.0002
    while True:
        got, status, rusage = os.wait4(pid, os.WNOHANG)
        if got:
            return status, rusage
        if time.monotonic() >= deadline:
            return None
        time.sleep(pause)
        pause = min(pause * 2, 0.01)


def _classify(reason, data, status, rusage, limits) -> dict:
    if reason == "timeout":
        return error("timeout", f"program did not finish within {limits['timeout_s']} s; "
                                "check for infinite loops")
    if reason == "output":
        return error("output", f"program result is larger than the {limits['max_output_bytes']} "
                               "byte limit; return less data")
    if reason == "tampered" or data:
        return error("forbidden", "program tampered with the sandbox's result channel")
    cpu = rusage.ru_utime + rusage.ru_stime if rusage else 0.0
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= limits["cpu_s"] - 0.05):
            return error("timeout", f"program used more than {limits['cpu_s']} s of CPU time; "
                                    "check for infinite loops or huge computations")
        name = signal.Signals(sig).name if sig in signal.valid_signals() else str(sig)
        hint = " (possibly the system ran out of memory)" if sig == signal.SIGKILL else ""
        return error("crash", f"program crashed: killed by signal {name}{hint}")
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
    if code == EXIT_MEMORY:
        return error("memory", f"program exceeded the {limits['memory_mb']} MB memory limit")
    return error("crash", f"program crashed: sandbox process exited with code {code} "
                          "without a result")


def _set_up_isolation() -> None:
    """Build the seccomp filter and decide the uid of children, once (see :mod:`sim.sandbox.isolation`)."""
    global _filter, _drop_root, _isolation
    from sim.sandbox import isolation as sandbox_os

    reasons = {}
    try:
        _filter = sandbox_os.build_filter()
    except Exception as exc:
        reasons["seccomp"] = f"{type(exc).__name__}: {exc}"
    _drop_root = sandbox_os.drop_root_possible()
    # started by `unshare` (pid 1): its own UTS namespace, which still carries the host's name
    reasons.update(sandbox_os.anonymize_host(rename=os.getpid() == 1))
    _isolation = {"pid_namespace": os.getpid() == 1, "seccomp": _filter is not None,
                  "chroot": os.geteuid() == 0, "drop_root": _drop_root, "no_dump": sandbox_os.no_dump(),
                  "reasons": reasons}


def _serve(preload: list[str], warmup: str | None = None) -> None:
    global _standby
    _set_up_isolation()
    in_fd, out_fd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)  # stray prints of imported modules must not corrupt the protocol
    os.close(devnull)
    for name in ("sim.sandbox.child", *preload):
        try:  # "module" is imported; "module:function" is imported and called to fill caches
            module_name, _, func = name.partition(":")
            __import__(module_name)
            if func:
                getattr(sys.modules[module_name], func)()
        except BaseException as exc:  # a broken SDK module must not stop the sandbox
            _preload_errors[name] = f"{type(exc).__name__}: {exc}"
    if warmup:
        try:
            _load_warmup(warmup)
        except BaseException as exc:  # runs go on without the warm-up, only slower
            _preload_errors[f"--warmup={warmup}"] = f"{type(exc).__name__}: {exc}"
    if _warmup is not None:  # trusted: fills the lazy imports and caches the children will need
        try:
            namespace = {"__name__": "__program__", **(_warmup[2].get("globals") or {})}
            exec(compile(_warmup[1], "<warmup>", "exec", dont_inherit=True), namespace)
            _finalizers[_warmup[0]](namespace, _warmup[2])
        except BaseException as exc:
            _preload_errors[f"--warmup={warmup}"] = f"{type(exc).__name__}: {exc}"
    os.environ.clear()  # nothing inherited reaches a child (it clears its own copy too)
    gc.collect()
    gc.freeze()  # children must not touch (and so copy) the preloaded heap when they collect
    threads = 1
    try:
        threads = len(os.listdir("/proc/self/task"))
    except OSError:
        pass
    write_message(out_fd, {"ready": True, "pid": os.getpid(), "preload_errors": _preload_errors,
                           "baseline_mb": round(vm_size_mb(), 1), "threads": threads,
                           "isolation": _isolation})
    while True:
        if _standby is None and _next_setup is not None:
            _wait_for_request(in_fd, _YIELD_S)  # let the caller take the CPU for the answer first
            try:  # while the caller verifies the last result
                _standby = _spawn(_next_setup, warm=True)
            except Exception:
                _standby = None  # the next request forks its own child
        _reap_while_idle(in_fd)
        body = read_body(in_fd)
        if body is None:
            if _standby is not None:
                _kill(_standby)
                _standby = None
            _reap_dying(block=True)
            if _scratch is not None:
                shutil.rmtree(_scratch, ignore_errors=True)
            return
        request_id = b"0" * ID_BYTES
        try:
            request = json.loads(body)
            request_id = _request_id(request)
            response = handle_request(request, body)
        except Exception as exc:
            response = error("crash", f"sandbox worker failed: {type(exc).__name__}: {exc}",
                             detail="".join(traceback.format_exc(limit=-4))[-2000:])
        if not isinstance(response, bytes):
            response = json.dumps(response, allow_nan=False).encode()
        # The answer is bound to its request: the caller checks the id before it reads the body.
        write_body(out_fd, request_id + response)
        # The next standby is forked from this frame: it must not find this request or its answer here
        # (a program can read frames through format strings built at run time).
        body = request = response = None
        _finish()
        if _scratch is not None:
            _release_scratch(_scratch)  # checked empty, or replaced, before the next child
        _reap_dying()


def _request_id(request: dict) -> bytes:
    value = request.get("id") if isinstance(request, dict) else None
    if not (isinstance(value, str) and len(value) == ID_BYTES and all(c in "0123456789abcdef" for c in value)):
        raise ValueError("request carries no valid id")
    return value.encode()


def _load_warmup(spec: str) -> None:
    """Load ``module:NAME``, a dict with the trusted warm-up program's source, finalizer and inputs."""
    global _warmup
    from sim.sandbox.rules import PROGRAM_FILENAME

    module_name, _, attr = spec.partition(":")
    __import__(module_name)
    program = getattr(sys.modules[module_name], attr)
    compile(program["source"], PROGRAM_FILENAME, "exec", dont_inherit=True)  # fail here, not in every child
    load_finalizer(program["finalizer"])
    _warmup = (program["finalizer"], program["source"], program.get("inputs") or {})


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    warmup = None
    for arg in list(args):
        if arg.startswith("--warmup="):
            warmup = arg.partition("=")[2] or None
            args.remove(arg)
    _serve(args, warmup)


if __name__ == "__main__":
    from sim.sandbox.worker import main as _main  # one module instance, not a __main__ copy

    _main()
