"""Operating-system isolation of sandboxed programs: the layers that hold when every Python guard falls.

The Python-level guards of :mod:`sim.sandbox.child` (restricted builtins, module proxies, audit hook) are
a convenience that turns most mistakes into readable errors; CPython documents audit hooks as a monitoring
aid, not a boundary. What bounds a program that gets past them is enforced by the kernel:

* **namespaces** (``unshare`` from util-linux starts each zygote): a network namespace with only a
  loopback that is down (no sockets reach anything), a PID namespace (the zygote is its init: no other
  process of the machine is visible or signalable, and every process in it dies with the zygote), mount,
  IPC and UTS namespaces (the node renamed, see :func:`anonymize_host`); for users other than root also a
  user namespace (root mapped to the caller);
* **an empty root** per child: ``chroot`` into its fresh, empty scratch directory;
* **no privileges**: a child of a zygote that runs as the real root switches to ``nobody`` (65534);
* **a seccomp-bpf allow-list** (libseccomp through its Python bindings ``pyseccomp``), loaded in every
  child before it reads its program: memory, time, signals to itself, ``read`` from its descriptors and
  ``write`` to its answer pipe only; ``open*`` fail with ``EACCES``; no ``getrandom`` (no entropy: output is
  a function of source and seed); no ``socket``, ``fork``/``clone``,
  ``execve``, ``kill``, ``pidfd_*``, ``ptrace``, ``process_vm_*``, no path-based ``stat``, no executable
  memory; everything else fails with ``EPERM``;
* ``PR_SET_DUMPABLE = 0`` on the zygote and on the processes that own a pool (their memory and
  ``/proc`` files are closed to other processes of the same user), a minimal environment for the zygote
  and an empty one in the child, no inherited descriptors.

What the host allows is detected once per process (:func:`capabilities`); a missing layer is reported
once on stderr (never silently) and :data:`REQUIRE_ENV` = ``1`` makes a missing layer an error.
Only the standard library (and ``pyseccomp``, itself ``ctypes`` over ``libseccomp.so.2``) is used.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import threading

RESULT_FD = 3
REQUEST_FD = 4
NOBODY = 65534
REQUIRE_ENV = "CODA_SANDBOX_REQUIRE_OS"
"""Set to 1 to refuse running programs when a layer below is unavailable on this host."""
NAMESPACES_ENV = "CODA_SANDBOX_NAMESPACES"
"""Set to 0 to start zygotes without namespaces (e.g. on a host where ``unshare`` misbehaves)."""

_NAMESPACE_FLAGS = ("--net", "--pid", "--fork", "--kill-child", "--ipc", "--uts", "--mount", "--mount-proc")
# Syscalls a locked-down child may make: what CPython, numpy and MuJoCo need to compute in memory and
# hand back an answer. Descriptor-based calls only ever see the child's own descriptors (the answer
# pipe, the request pipe, /dev/null): nothing can be opened.
_ALLOWED = (
    "read", "readv", "pread64", "close", "lseek", "fstat", "dup",  # own descriptors only
    "munmap", "mremap", "brk", "madvise", "membarrier",
    "futex", "set_robust_list", "rseq", "restart_syscall",
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack",
    "poll", "ppoll", "select", "pselect6", "sched_yield", "sched_getaffinity",
    "getpid", "gettid", "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid",
    "getrusage", "times", "getcwd", "exit", "exit_group",
)  # not `uname`: the kernel's release and version are the host's (a UTS namespace only renames the node);
# not `getrandom`: a program's output must be a function of its source and seed (the child's generators are seeded
# from them; CPython reseeds `random` at fork, before the filter), so the kernel's entropy is closed to it
_NO_EXEC = ("mmap", "mprotect")  # allowed without PROT_EXEC only
_WRITE = ("write", "writev")  # allowed on the answer pipe only
_OPEN = ("open", "openat", "openat2", "creat")  # EACCES: reads like an ordinary permission problem
PROT_EXEC = 0x4

_lock = threading.Lock()
_caps: dict | None = None
_warned = False


def capabilities() -> dict:
    """What this host allows, probed once per process: ``namespaces`` (the ``unshare`` argv prefix or
    None), ``seccomp`` (bool), ``reasons`` (why a layer is missing)."""
    global _caps
    with _lock:
        if _caps is None:
            _caps = _probe()
        return _caps


def _probe() -> dict:
    reasons: dict[str, str] = {}
    prefix = None
    if not sys.platform.startswith("linux"):
        reasons["namespaces"] = reasons["seccomp"] = f"not available on {sys.platform}"
        return {"namespaces": None, "seccomp": False, "reasons": reasons}
    tool = shutil.which("unshare")
    if os.environ.get(NAMESPACES_ENV, "1") == "0":
        reasons["namespaces"] = f"turned off by {NAMESPACES_ENV}=0"
    elif tool is None:
        reasons["namespaces"] = "the `unshare` command (util-linux) is not installed"
    else:
        candidate = [tool, *(() if os.geteuid() == 0 else ("--user", "--map-root-user")), *_NAMESPACE_FLAGS, "--"]
        try:
            done = subprocess.run([*candidate, sys.executable, "-c", "import os; assert os.getpid() == 1"],
                                  capture_output=True, timeout=30, env={"PATH": os.environ.get("PATH", "")})
            if done.returncode == 0:
                prefix = candidate
            else:
                reasons["namespaces"] = ("the host refuses new namespaces: "
                                         + (done.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1])
        except (OSError, subprocess.TimeoutExpired) as exc:
            reasons["namespaces"] = f"`unshare` failed: {exc}"
    seccomp = False
    try:
        build_filter()
        seccomp = True
    except Exception as exc:  # ImportError (no pyseccomp), OSError (no libseccomp.so.2)
        reasons["seccomp"] = f"libseccomp is unavailable ({type(exc).__name__}: {exc})"
    return {"namespaces": prefix, "seccomp": seccomp, "reasons": reasons}


def degraded_message(caps: dict) -> str | None:
    """One line naming the missing layers and what they leave open, or None when all are present."""
    if not caps["reasons"]:
        return None
    parts = "; ".join(f"{layer}: {why}" for layer, why in caps["reasons"].items())
    return (f"CoDA sandbox runs with reduced OS isolation ({parts}). Programs are still confined by the "
            "Python-level guards and rlimits; set CODA_SANDBOX_REQUIRE_OS=1 to refuse running instead. "
            "See SECURITY.md.")


def report_once(caps: dict) -> None:
    """Print the degradation once per process (stderr: safe for stdio MCP servers)."""
    global _warned
    message = degraded_message(caps)
    if message and not _warned:
        _warned = True
        print(f"warning: {message}", file=sys.stderr, flush=True)


def required() -> bool:
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0")


def no_dump() -> bool:
    """``prctl(PR_SET_DUMPABLE, 0)`` for this process: no core dumps, and its memory, descriptors and
    environment under ``/proc`` are closed to other unprivileged processes. True when it took effect."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE
    except (OSError, AttributeError):
        return False


SANDBOX_HOSTNAME = "sandbox"


def anonymize_host(rename: bool) -> dict:
    """In the zygote, before anything is preloaded: with `rename` (it runs in its own UTS namespace) name the node
    `SANDBOX_HOSTNAME` instead of the host's name it inherited, and make the `platform` module's cached uname say
    nothing of the host's node or kernel (children cannot call `uname`). Returns {"uts": reason} when the name
    could not be set."""
    import platform
    import socket

    out = {}
    if rename:
        try:
            socket.sethostname(SANDBOX_HOSTNAME)
        except OSError as exc:
            out["uts"] = f"could not rename the sandbox's UTS namespace: {exc}"
    platform._uname_cache = platform.uname_result(platform.system(), SANDBOX_HOSTNAME, "", "", platform.machine())
    return out


def build_filter():
    """The child's seccomp allow-list (a ``pyseccomp.SyscallFilter``, built once in the zygote and
    loaded by each child with ``.load()`` after its rlimits are set)."""
    import pyseccomp as sc

    filt = sc.SyscallFilter(sc.ERRNO(errno.EPERM))
    for name in _ALLOWED:
        _rule(filt, sc.ALLOW, name)
    for name in _NO_EXEC:
        _rule(filt, sc.ALLOW, name, sc.Arg(2, sc.MASKED_EQ, PROT_EXEC, 0))
    for name in _WRITE:
        _rule(filt, sc.ALLOW, name, sc.Arg(0, sc.EQ, RESULT_FD))
    for name in _OPEN:
        _rule(filt, sc.ERRNO(errno.EACCES), name)
    return filt


def _rule(filt, action: int, name: str, *args) -> None:
    try:
        filt.add_rule(action, name, *args)
    except (ValueError, OSError) as exc:  # a syscall this architecture does not have
        if "resolve" not in str(exc).lower() and getattr(exc, "errno", None) not in (errno.EDOM, errno.EFAULT):
            raise


def drop_root_possible() -> bool:
    """True when this process is the real root (uid 0 of the initial user namespace), so that its
    children can switch to ``nobody``; inside a user namespace only the caller's uid is mapped."""
    if os.geteuid() != 0:
        return False
    try:
        with open("/proc/self/uid_map") as fh:
            first = fh.read().split()
        return first[:3] == ["0", "0", "4294967295"]
    except OSError:
        return False


def enter_root(scratch: str, drop_root: bool) -> list[str]:
    """In the child, after its descriptors are closed: an empty root (its scratch directory), no
    privileges, an empty environment. Returns the layers that could not be applied (short reasons)."""
    missing = []
    try:
        os.chroot(scratch)
        os.chdir("/")
    except OSError as exc:
        missing.append(f"chroot: {exc.strerror}")
    if drop_root:
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
    os.environ.clear()
    return missing
