"""Worker side of the sandbox; the public API is :mod:`sim.sandbox`.

``python -m sim.sandbox_worker MODULE[:FUNCTION]...`` runs a *zygote*: it imports the heavy modules
(and calls the named warm-up functions) once, then
serves length-prefixed JSON requests on its stdin/stdout. For each request it forks a child that
locks itself down (rlimits, scratch directory, closed descriptors, an audit hook, neutered process
and socket functions, restricted builtins), runs the untrusted program and the trusted finalizer,
and writes the result on a private pipe. The zygote enforces the wall-clock limit, reaps the child
and classifies how it ended. Forking from this clean, single-threaded process (never from the
caller, which may hold threads, torch or event loops) is what makes a run cost milliseconds.

Only the standard library is imported at module level.
"""

from __future__ import annotations

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

_HEADER = struct.Struct(">Q")
MAX_MESSAGE_BYTES = 1 << 30


def write_message(fd: int, obj: object) -> None:
    payload = json.dumps(obj, allow_nan=False).encode()
    write_all(fd, _HEADER.pack(len(payload)) + payload)


def read_message(fd: int) -> object | None:
    """Read one message; None at a clean end of stream."""
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_MESSAGE_BYTES:
        raise ValueError(f"message of {size} bytes is too large")
    body = _read_exact(fd, size)
    if body is None:
        raise EOFError("stream ended inside a message")
    return json.loads(body)


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
    if spec not in _finalizers:
        module_name, sep, attr = spec.partition(":")
        if not sep or not module_name or not attr:
            raise ValueError(f"finalizer must look like 'module:function', got {spec!r}")
        __import__(module_name)
        func = getattr(sys.modules[module_name], attr)
        if not callable(func):
            raise TypeError(f"finalizer {spec!r} is not callable")
        _finalizers[spec] = func
    return _finalizers[spec]


def handle_request(request: dict) -> dict:
    """Run one program in a forked child and describe how it ended."""
    limits = request["limits"]
    if "sim.sandbox_child" in _preload_errors:
        return error("crash", "sandbox worker could not import sim.sandbox_child: "
                              + _preload_errors["sim.sandbox_child"])
    try:
        finalizer = load_finalizer(request["finalizer"])
    except Exception as exc:  # a broken trusted finalizer is a configuration error
        return error("crash", f"sandbox finalizer {request['finalizer']!r} could not be loaded: {exc}")
    baseline = vm_size_mb()
    if limits["memory_mb"] < baseline + 64:
        return error("memory", f"memory limit of {limits['memory_mb']} MB is below what the sandbox "
                               f"runtime itself needs (about {baseline + 64:.0f} MB); raise "
                               "SandboxLimits.memory_mb")
    scratch = _scratch_dir()
    nonce = os.urandom(16).hex().encode()
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
        if pid == 0:  # child: must never return into the zygote's loop
            try:
                os.close(read_fd)
                from sim.sandbox_child import run_child

                run_child(request, finalizer, write_fd, nonce, scratch)
            finally:
                os._exit(EXIT_INTERNAL)
        os.close(write_fd)
        try:
            return _wait_and_classify(pid, read_fd, nonce, limits)
        finally:
            os.close(read_fd)
    finally:
        _release_scratch(scratch)


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


def _wait_and_classify(pid: int, read_fd: int, nonce: bytes, limits: dict) -> dict:
    deadline = time.monotonic() + limits["timeout_s"]
    cap = limits["max_output_bytes"] + len(nonce) + 4096
    data, reason = _collect(read_fd, deadline, cap)
    status = rusage = None
    if reason is None:
        reaped = _reap_until(pid, deadline)
        if reaped is None:
            reason = "timeout"
        else:
            status, rusage = reaped
    if reason is not None:
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        _, status, rusage = os.wait4(pid, 0)
    return _classify(reason, data, nonce, status, rusage, limits)


def _collect(fd: int, deadline: float, cap: int) -> tuple[bytes, str | None]:
    import select

    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    chunks, size = [], 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return b"".join(chunks), "timeout"
        if not poller.poll(remaining * 1000):
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks), None
        chunks.append(chunk)
        size += len(chunk)
        if size > cap:
            return b"".join(chunks), "output"


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


def _classify(reason, data, nonce, status, rusage, limits) -> dict:
    if reason == "timeout":
        return error("timeout", f"program did not finish within {limits['timeout_s']} s; "
                                "check for infinite loops")
    if reason == "output":
        return error("output", f"program result is larger than the {limits['max_output_bytes']} "
                               "byte limit; return less data")
    if data:
        if data.startswith(nonce):
            try:
                return json.loads(data[len(nonce):])
            except ValueError:
                pass
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


def _serve(preload: list[str]) -> None:
    in_fd, out_fd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)  # stray prints of imported modules must not corrupt the protocol
    os.close(devnull)
    for name in ("sim.sandbox_child", *preload):
        try:  # "module" is imported; "module:function" is imported and called to fill caches
            module_name, _, func = name.partition(":")
            __import__(module_name)
            if func:
                getattr(sys.modules[module_name], func)()
        except BaseException as exc:  # a broken SDK module must not stop the sandbox
            _preload_errors[name] = f"{type(exc).__name__}: {exc}"
    import gc

    gc.collect()
    gc.freeze()  # children must not touch (and so copy) the preloaded heap when they collect
    threads = 1
    try:
        threads = len(os.listdir("/proc/self/task"))
    except OSError:
        pass
    write_message(out_fd, {"ready": True, "pid": os.getpid(), "preload_errors": _preload_errors,
                           "baseline_mb": round(vm_size_mb(), 1), "threads": threads})
    while True:
        request = read_message(in_fd)
        if request is None:
            if _scratch is not None:
                shutil.rmtree(_scratch, ignore_errors=True)
            return
        try:
            response = handle_request(request)
        except Exception as exc:
            response = error("crash", f"sandbox worker failed: {type(exc).__name__}: {exc}",
                             detail="".join(traceback.format_exc(limit=-4))[-2000:])
        write_message(out_fd, response)


def main(argv: list[str] | None = None) -> None:
    _serve(list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    from sim.sandbox_worker import main as _main  # one module instance, not a __main__ copy

    _main()
