"""Child side of the sandbox: the forked process that runs one untrusted program.

The child locks itself down (own session, stdin/stdout/stderr on /dev/null, every descriptor but
the result pipe closed, scratch working directory, rlimits, an audit hook, process and socket
functions replaced by ones that refuse, restricted builtins with a guarded ``__import__`` and
read-only module proxies), runs the program and then the trusted finalizer, and writes
``nonce + JSON`` on the result pipe. The zygote in :mod:`sim.sandbox_worker` does the rest.
"""

from __future__ import annotations

import builtins
import json
import mmap
import os
import resource
import signal
import sys
from types import ModuleType

from sim.sandbox_policy import PROGRAM_FILENAME, SAFE_BUILTINS, attribute_problem, import_problem, is_dunder
from sim.sandbox_worker import EXIT_INTERNAL, EXIT_MEMORY, error, write_all

RESULT_FD = 3


class SandboxViolation(PermissionError):
    """Raised in the child when the program reaches for something the sandbox forbids."""


class ForbiddenImport(ImportError):
    """Raised by the sandbox's ``__import__`` for modules outside the allow-list."""


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_BLOCKED_EVENT_PREFIXES = (
    "os.", "subprocess.", "socket.", "shutil.", "ctypes.", "mmap.", "sqlite3.", "urllib.", "http.",
    "ftplib.", "smtplib.", "webbrowser.", "pty.", "fcntl.", "resource.", "glob.", "syslog.",
)
_BLOCKED_EVENTS = frozenset({
    "sys.addaudithook", "sys.settrace", "sys.setprofile", "gc.get_objects", "gc.get_referrers",
    "gc.get_referents", "code.__new__", "function.__new__", "signal.pthread_kill", "builtins.input",
})
_DIRECTORY_EVENTS = frozenset({"os.listdir", "os.scandir", "os.walk", "os.fwalk"})
_HARMLESS_EVENTS = frozenset({"os.putenv", "os.unsetenv"})
# Imports refused even to trusted code once the program runs (when not already loaded).
_DENIED_IMPORTS = frozenset({
    "ctypes", "_ctypes", "subprocess", "_posixsubprocess", "socket", "_socket", "multiprocessing",
    "pty", "sqlite3", "webbrowser",
})
_SPAWN = ("fork", "forkpty", "system", "execv", "execve", "posix_spawn", "posix_spawnp", "kill",
          "killpg")
# Functions replaced in the child by ones that refuse (process creation has no audit event
# in _posixsubprocess, and the rest is a second layer behind the audit hook).
_NEUTERED = {
    "builtins": ("open",), "io": ("open",), "posix": _SPAWN, "_posixsubprocess": ("fork_exec",),
    "os": _SPAWN + ("popen", "execl", "execle", "execlp", "execlpe", "execvp", "execvpe", "spawnv",
                    "spawnve", "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnvp", "spawnvpe"),
    "socket": ("socket", "create_connection", "create_server", "socketpair", "fromfd"),
    "_socket": ("socket", "socketpair"),
}


def run_child(request: dict, finalizer, write_fd: int, nonce: bytes, scratch: str) -> None:
    """Body of the forked child; always ends the process with ``os._exit``."""
    code = EXIT_INTERNAL
    try:
        _isolate(write_fd, scratch)
        write_all(RESULT_FD, nonce + _execute(request, finalizer, scratch).encode())
        code = 0
    except MemoryError:
        code = EXIT_MEMORY
    except BaseException:
        code = EXIT_INTERNAL
    finally:
        os._exit(code)


def _isolate(write_fd: int, scratch: str) -> None:
    os.setsid()  # own process group: the zygote kills the whole group on timeout
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    if write_fd != RESULT_FD:
        os.dup2(write_fd, RESULT_FD)
    os.closerange(RESULT_FD + 1, 1 << 20)  # the zygote's protocol pipes among them
    os.chdir(scratch)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past RLIMIT_FSIZE fails with EFBIG


def _execute(request: dict, finalizer, scratch: str) -> str:
    """Run program and finalizer; return the response as JSON text."""
    limits, inputs = request["limits"], request["inputs"]
    allowed = tuple(request["allowed_imports"])
    source = request["source"]
    violations: list[str] = []
    _seed_rngs(inputs)
    program = compile(source, PROGRAM_FILENAME, "exec", dont_inherit=True)
    namespace = {"__name__": "__program__",
                 "__builtins__": _restricted_builtins(allowed, violations)}
    namespace.update(inputs.get("globals") or {})
    roots = _read_roots(allowed, request["finalizer"], scratch)
    # Address space (not touched memory, so it costs nothing) given back on MemoryError, so that
    # the report can still be written under RLIMIT_AS.
    ballast = mmap.mmap(-1, 16 << 20)
    hook = _audit_hook(roots, violations)
    _neuter(violations)
    _set_limits(limits)
    sys.addaudithook(hook)  # last: it also refuses setrlimit
    phase = "program"
    try:
        exec(program, namespace)
        phase = "finalizer"
        value = finalizer(namespace, inputs)
        try:
            payload = json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            return json.dumps(error("output", f"result is not JSON-serializable: {exc}"))
        if violations:
            return json.dumps(error("forbidden", violations[0]))
        if len(payload) > limits["max_output_bytes"]:
            return json.dumps(error("output", f"program result is {len(payload)} bytes; the limit "
                                              f"is {limits['max_output_bytes']} bytes"))
        return '{"ok": true, "error": null, "value": ' + payload + "}"
    except BaseException as exc:
        ballast.close()
        namespace.clear()
        return json.dumps(_describe(exc, phase, violations, limits, source))


def _describe(exc: BaseException, phase: str, violations: list[str], limits: dict,
              source: str) -> dict:
    lines = source.splitlines()
    frames, tb = [], exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename == PROGRAM_FILENAME:
            frames.append((tb.tb_lineno, code.co_name))
        tb = tb.tb_next
    exc.__traceback__ = None
    lineno = frames[-1][0] if frames else None
    where = f"line {lineno}: " if lineno else ""
    try:
        text = str(exc)[:500]
    except BaseException:
        text = ""
    full = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    if violations or isinstance(exc, (SandboxViolation, ForbiddenImport)):
        kind, message = "forbidden", where + (violations[0] if violations else text)
    elif isinstance(exc, MemoryError):
        kind, message = "memory", f"{where}program exceeded the {limits['memory_mb']} MB memory limit"
    elif isinstance(exc, RecursionError):
        kind, message = "recursion", f"{where}maximum recursion depth exceeded; avoid deep or " \
                                     "unbounded recursion"
    elif phase == "program" or frames:
        kind, message = "runtime", where + full
    else:
        kind, message = "runtime", text or full
    detail = None
    if frames:
        runs: list[list] = []  # consecutive identical frames (recursion) collapse into one
        for frame in frames:
            if runs and runs[-1][0] == frame:
                runs[-1][1] += 1
            else:
                runs.append([frame, 1])
        shown: list[str] = []
        for (n, name), count in runs[-5:]:
            code = lines[n - 1].strip() if 0 < n <= len(lines) else ""
            repeat = f"\n  [previous line repeated {count - 1} more times]" if count > 1 else ""
            shown.append(f"  line {n}, in {name}\n    {code}{repeat}")
        detail = "\n".join(["Traceback (program frames only):", *shown, full])[-2000:]
    return error(kind, message, lineno, detail)


def _seed_rngs(inputs: dict) -> None:
    import random

    seed = (inputs.get("globals") or {}).get("seed", 0)
    seed = seed if isinstance(seed, int) and not isinstance(seed, bool) else 0
    random.seed(seed)
    if "numpy.random" in sys.modules:
        sys.modules["numpy.random"].seed(seed % (1 << 32))


def _restricted_builtins(allowed: tuple[str, ...], violations: list[str]) -> dict:
    real_import = builtins.__import__
    proxy = _proxy_factory(allowed, violations)

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        problem = "relative imports are not allowed" if level else import_problem(name, allowed)
        for item in fromlist or ():
            if problem is None and item != "*":
                problem = attribute_problem(item)
        if problem:
            violations.append(problem)
            raise ForbiddenImport(problem)
        if fromlist and "*" in fromlist:  # the real '*' import would load every lazy submodule
            real_import(name, None, None, None, 0)
            return proxy(sys.modules[name])
        return proxy(real_import(name, None, None, fromlist, 0))

    def safe_type(obj, *rest):
        if rest:
            raise SandboxViolation("type() with three arguments is not allowed; use a class statement")
        return type(obj)

    table = {name: getattr(builtins, name) for name in SAFE_BUILTINS if hasattr(builtins, name)}
    table.update(__import__=guarded_import, __build_class__=builtins.__build_class__, type=safe_type)
    return table


def _proxy_factory(allowed: tuple[str, ...], violations: list[str]):
    """Wrap modules handed to the program: read-only, public names only, no forbidden modules."""
    cache: dict[str, object] = {}

    def public_names(module: ModuleType) -> list[str]:
        present = vars(module)  # names a module only loads lazily are left out
        names = getattr(module, "__all__", None) or [n for n in present if not n.startswith("_")]
        return [n for n in names if n in present and attribute_problem(n) is None and not (
            isinstance(present[n], ModuleType) and import_problem(present[n].__name__, allowed))]

    def proxy(module: ModuleType):
        name = module.__name__
        if name in cache:
            return cache[name]

        def get(self, attr):
            if attr == "__all__":
                return public_names(module)
            if attr in ("__name__", "__doc__"):
                return getattr(module, attr, None)
            if is_dunder(attr):
                raise AttributeError(attr)
            problem = attribute_problem(attr)
            if problem is None:
                value = getattr(module, attr)  # AttributeError passes through
                if not isinstance(value, ModuleType):
                    return value
                if import_problem(value.__name__, allowed) is None:
                    return proxy(value)
                problem = (f"'{name}.{attr}' is the module '{value.__name__}', which programs may "
                           f"not use; allowed modules: {', '.join(allowed)}")
            violations.append(problem)
            raise SandboxViolation(problem)

        def refuse(self, attr, *value):
            raise SandboxViolation(f"module '{name}' is read-only in the sandbox")

        cls = type("module", (), {
            "__slots__": (), "__getattr__": get, "__setattr__": refuse, "__delattr__": refuse,
            "__repr__": lambda self: f"<module '{name}'>", "__dir__": lambda self: public_names(module),
        })
        cache[name] = cls()
        return cache[name]

    return proxy


def _read_roots(allowed: tuple[str, ...], finalizer: str, scratch: str) -> tuple[str, ...]:
    """Directories whose files trusted code may still read (lazy imports of library modules)."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, scratch}
    for name in (*allowed, "mujoco", finalizer.partition(":")[0].partition(".")[0]):
        path = getattr(sys.modules.get(name), "__file__", None)
        if path:
            roots.add(os.path.dirname(path))
    return tuple(os.path.realpath(r) for r in roots if r)


def _under(path, roots: tuple[str, ...]) -> bool:
    if isinstance(path, int) or path is None:
        return False
    real = os.path.realpath(os.fsdecode(path))
    return any(real == r or real.startswith(r + os.sep) for r in roots)


def _event_problem(event: str, args: tuple, roots: tuple[str, ...], listable: frozenset[str]) -> str | None:
    if event == "open":
        path, mode, flags = (tuple(args) + (None, None, None))[:3]
        if isinstance(path, int):
            return f"opening file descriptor {path} is not allowed"
        if (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS):
            return f"writing file '{os.fsdecode(path)}' is not allowed"
        return None if _under(path, roots) else f"reading file '{os.fsdecode(path)}' is not allowed"
    if event == "import":
        top = str(args[0]).partition(".")[0]
        return f"import of '{args[0]}' is not allowed" if top in _DENIED_IMPORTS else None
    if event in _DIRECTORY_EVENTS:
        path = args[0] if args and args[0] not in (None, "", b"") else "."
        if _under(path, roots) or (isinstance(path, (str, bytes)) and os.path.realpath(path) in listable):
            return None
        return f"listing directory '{os.fsdecode(path)}' is not allowed"
    if event in _BLOCKED_EVENTS or (event.startswith(_BLOCKED_EVENT_PREFIXES)
                                    and event not in _HARMLESS_EVENTS):
        return f"'{event}' is not allowed (no file, process or network access in the sandbox)"
    return None


def _audit_hook(roots: tuple[str, ...], violations: list[str]):
    # the import system lists each sys.path directory (not its subdirectories) to find modules
    listable = frozenset(os.path.realpath(p or ".") for p in sys.path if isinstance(p, str))

    def hook(event: str, args: tuple) -> None:
        problem = _event_problem(event, args, roots, listable)
        if problem:
            violations.append(problem)
            raise SandboxViolation(problem)

    return hook


def _neuter(violations: list[str]) -> None:
    def refuser(qualname: str):
        def refuse(*args, **kwargs):
            problem = f"{qualname}() is not allowed (no file, process or network access)"
            violations.append(problem)
            raise SandboxViolation(problem)

        return refuse

    for module_name, names in _NEUTERED.items():
        module = sys.modules.get(module_name)
        for name in names if module is not None else ():
            if hasattr(module, name):
                setattr(module, name, refuser(f"{module_name}.{name}"))


def _set_limits(limits: dict) -> None:
    def cap(which: int, soft: int, hard: int | None = None) -> None:
        hard = soft if hard is None else hard
        _, current_hard = resource.getrlimit(which)
        if current_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, current_hard), min(hard, current_hard)
        try:
            resource.setrlimit(which, (soft, hard))
        except (ValueError, OSError):
            pass  # e.g. RLIMIT_NPROC on some kernels; the audit hook still blocks forks

    cap(resource.RLIMIT_CORE, 0)
    cap(resource.RLIMIT_FSIZE, limits["max_file_bytes"])
    cap(resource.RLIMIT_NOFILE, limits["max_open_files"])
    cap(resource.RLIMIT_NPROC, limits["max_procs"])
    cap(resource.RLIMIT_CPU, limits["cpu_s"], limits["cpu_s"] + 1)
    memory = limits["memory_mb"] << 20
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
