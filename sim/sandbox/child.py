"""Child side of the sandbox: the forked process that runs one untrusted program.

The child locks itself down (own session, stdin/stdout/stderr on /dev/null, every descriptor but
the result and request pipes closed, scratch working directory, rlimits, an audit hook, process
and socket functions replaced by ones that refuse, restricted builtins with a guarded
``__import__`` and read-only module proxies) *before* it reads its request, so that a *standby*
child can be forked and locked down while the previous program's result is being verified. A
standby may also run a trusted warm-up program once under the same lock-down (this copies the
zygote's memory pages that a program touches before the clock starts; without it the copy-on-write
page faults fall on the program's run). Then it reads one request, runs the untrusted program and
the trusted finalizer, writes ``nonce + length + JSON`` on the result pipe and exits. A child runs
at most one untrusted program. The zygote in :mod:`sim.sandbox.worker` does the rest.
"""

from __future__ import annotations

import base64
import builtins
import fcntl
import gc
import json
import marshal
import mmap
import os
import random
import resource
import select
import signal
import sys
from types import CodeType, ModuleType

from sim import program_helpers, program_numpy  # noqa: F401 - loaded here: children cannot import
from sim.program import PROGRAM_MODULES
from sim.sandbox import isolation as sandbox_os
from sim.sandbox.rules import PROGRAM_FILENAME, SAFE_BUILTINS, attribute_problem, import_problem, is_dunder
from sim.sandbox.worker import EXIT_INTERNAL, EXIT_MEMORY, HEADER, error, read_message, write_all

RESULT_FD = sandbox_os.RESULT_FD
REQUEST_FD = sandbox_os.REQUEST_FD
MESSAGE_CHARS = 2000  # an error message handed back to the caller (longer ones are cut and say so)

# Trusted warm-up for standby children that will run scene programs (a seed scene written by
# sim.scene.to_program, plus one set_attributes call): see the module docstring.
SCENE_WARMUP = {
    "finalizer": "sim.scene:finalize_program",
    "inputs": {"globals": {"seed": 0}},
    "source": """\
from sim import Scene, place, on, inside, grasped, lifted, open_fraction, near, upright, stacked

table = 'table'
scene = Scene(family='pick_place', seed=seed)
corn = scene.add_object('corn/005', role='target', name='corn')
plate = scene.add_object('plate/001', role='receptacle', name='plate')
scene.set_task('place the corn on the plate', success=on(corn, plate) & ~grasped(corn), template='pp_on')
scene.set_layout(
    place(corn, on=table, xy=(0.4662, -0.1773), yaw=-0.5597),
    place(plate, on=table, xy=(0.3692, 0.1847), yaw=0.2756),
    seed_layout=259,
)
scene.set_attributes(corn, mass=0.2, friction=0.9)
""",
}


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


def run_child(request_fd: int, result_fd: int, nonce: bytes, scratch: str, setup: dict, finalizer,
              warmup=None, jail: tuple = (None, False)) -> None:
    """Body of a forked child; always ends the process with ``os._exit``.

    ``setup`` (``limits``, ``allowed_imports``, ``finalizer``) is what the child locks itself down
    for before it reads its one request from ``request_fd``; the zygote only hands it a request
    with the same setup. ``warmup`` is a trusted program run once, under the
    lock-down, before the request is read (standby children only): ``(source, inputs)``.
    ``jail`` is ``(seccomp filter or None, switch to nobody)`` from :mod:`sim.sandbox.isolation`.
    """
    code = EXIT_INTERNAL
    try:
        _isolate(result_fd, request_fd, scratch, jail[1])
        locked = _lock_down(setup, scratch, jail[0])
        if warmup is not None and not _request_waiting():
            _warm_up(locked, finalizer, *warmup)
        request = read_message(REQUEST_FD)
        if request is not None:  # None: a standby that was discarded, or a zygote that is gone
            payload = _execute(request, setup, finalizer, locked).encode()
            write_all(RESULT_FD, nonce + HEADER.pack(len(payload)) + payload)
            # Wait to be killed: the exit (tearing down this copy of the address space) then
            # happens after the zygote has answered, not while it does. End of file (the zygote
            # closed the pipe or died) ends the wait too.
            while os.read(REQUEST_FD, 4096):
                pass
        code = 0
    except MemoryError:
        code = EXIT_MEMORY
    except BaseException:
        code = EXIT_INTERNAL
    finally:
        os._exit(code)


def _isolate(result_fd: int, request_fd: int, scratch: str, drop_root: bool) -> None:
    os.setsid()  # own process group: the zygote kills the whole group on timeout
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (result_fd, request_fd)]
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.dup2(high[0], RESULT_FD)
    os.dup2(high[1], REQUEST_FD)
    os.closerange(REQUEST_FD + 1, 1 << 20)  # the zygote's protocol pipes among them
    os.chdir(scratch)
    sandbox_os.enter_root(scratch, drop_root)  # empty root, nobody (when real root), empty environment
    sys.stdout = sys.stderr = _Discard()  # the filter lets the child write to its answer pipe only
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past RLIMIT_FSIZE fails with EFBIG


def _request_waiting() -> bool:
    """True when the request has already arrived (then a warm-up would only delay it)."""
    return bool(select.select([REQUEST_FD], [], [], 0)[0])


class _Locked:
    """What the lock-down leaves for the run: the restricted builtins and the violations seen."""

    __slots__ = ("builtins", "violations", "ballast")

    def __init__(self, table: dict, violations: list[str], ballast: mmap.mmap) -> None:
        self.builtins, self.violations, self.ballast = table, violations, ballast


_PREPARED: dict[tuple, tuple] = {}


def prepare(setup: dict) -> tuple:
    """The parts of the lock-down that depend only on the allowed imports and the finalizer: the
    restricted builtins (with the list that collects violations), the read roots and the
    directories the import system may list. Called in the zygote before it forks, so that every
    child inherits them (each child has its own copy-on-write copy; the zygote never runs a
    program, so the list is empty and the module-proxy cache holds only trusted entries)."""
    key = (tuple(setup["allowed_imports"]), setup["finalizer"])
    if key not in _PREPARED:
        if len(_PREPARED) >= 16:
            _PREPARED.clear()
        violations: list[str] = []
        # the import system lists each sys.path directory (not its subdirectories) to find modules
        listable = frozenset(os.path.realpath(p or ".") for p in sys.path if isinstance(p, str))
        _PREPARED[key] = (_restricted_builtins(key[0], violations), violations,
                          _read_roots(key[0], key[1]), listable)
    return _PREPARED[key]


def _lock_down(setup: dict, scratch: str, seccomp_filter=None) -> _Locked:
    """Everything but the program itself: builtins, read roots, neutered functions, rlimits, the
    seccomp filter, the audit hook. Without ``python_guards`` (tests of the OS layers only) the
    program gets the real builtins and no hook: only rlimits, the jail and the filter hold."""
    # Address space (not touched memory, so it costs nothing) given back on MemoryError, so that
    # the report can still be written under RLIMIT_AS.
    ballast = mmap.mmap(-1, 16 << 20)
    if not setup.get("python_guards", True):
        _set_limits(setup["limits"])
        if seccomp_filter is not None:
            seccomp_filter.load()
        return _Locked(dict(vars(builtins)), [], ballast)
    table, violations, roots, listable = prepare(setup)
    roots = (*roots, "/")  # after chroot, "/" is the empty scratch directory
    hook = _audit_hook(roots, violations, listable)
    _neuter(violations)
    _set_limits(setup["limits"])
    if seccomp_filter is not None:
        seccomp_filter.load()  # after setrlimit (which it forbids), before the hook (ctypes call)
    sys.addaudithook(hook)  # last: it also refuses setrlimit
    return _Locked(table, violations, ballast)


class _Discard:
    """``sys.stdout``/``sys.stderr`` of a child: ``print`` works, the text goes nowhere."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def _warm_up(locked: _Locked, finalizer, source: str, inputs: dict) -> None:
    """Run a trusted program once under the lock-down, then forget everything it left behind."""
    namespace = {"__name__": "__program__", "__builtins__": dict(locked.builtins)}
    namespace.update(inputs.get("globals") or {})
    try:
        _seed_rngs(inputs)
        exec(compile(source, PROGRAM_FILENAME, "exec", dont_inherit=True), namespace)
        json.dumps(finalizer(namespace, inputs), allow_nan=False)
    except Exception:
        pass  # a warm-up only saves time; the request runs the same way without it
    namespace.clear()
    locked.violations.clear()
    gc.freeze()  # the program's collections need not walk (and copy) what the warm-up left


def _execute(request: dict, setup: dict, finalizer, locked: _Locked) -> str:
    """Run program and finalizer; return the response as JSON text."""
    if any(request[key] != setup[key] for key in ("limits", "allowed_imports", "finalizer")):
        return json.dumps(error("crash", "sandbox worker handed a request to a child locked down "
                                         "for other limits"))
    limits, inputs = request["limits"], request["inputs"]
    source = request["source"]
    violations = locked.violations
    _seed_rngs(inputs)
    program = _program_code(request)
    namespace = {"__name__": "__program__", "__builtins__": locked.builtins}
    namespace.update(inputs.get("globals") or {})
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
        locked.ballast.close()
        namespace.clear()
        return json.dumps(_describe(exc, phase, violations, limits, source))


def _program_code(request: dict) -> CodeType:
    """The code object the caller compiled from the syntax tree it checked (marshalled by the
    same interpreter), or the source compiled here."""
    if request.get("code"):
        program = marshal.loads(base64.b64decode(request["code"]))
        if not isinstance(program, CodeType):
            raise TypeError("sandbox request carries no code object")
        return program
    return compile(request["source"], PROGRAM_FILENAME, "exec", dont_inherit=True, optimize=0)


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
        text = str(exc)
    except BaseException:
        text = ""
    if len(text) > MESSAGE_CHARS:  # marked, never cut silently (a list of valid names must not end mid-word)
        text = text[:MESSAGE_CHARS] + f"… ({len(text) - MESSAGE_CHARS} more characters)"
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
        target = name
        if problem is None and name.partition(".")[0] in PROGRAM_MODULES:
            # programs get the data-only facades (sim.program ...), never the SDK or numpy themselves
            target = PROGRAM_MODULES.get(name)
            if target is None:
                problem = (f"import of '{name}' is not allowed; programs may import "
                           f"{', '.join(sorted({*PROGRAM_MODULES, *allowed}))}")
        if problem:
            violations.append(problem)
            raise ForbiddenImport(problem)
        if target not in sys.modules:
            real_import(target, None, None, None, 0)  # not the '*' form: it would load every lazy submodule
        module = sys.modules[target]
        if target != name and not fromlist:  # `import sim.helpers` binds `sim`, as Python does
            module = sys.modules[PROGRAM_MODULES[name.partition(".")[0]]]
        elif target == name and not fromlist and "." in name:
            module = real_import(name, None, None, (), 0)  # the top-level package, as Python does
        out = proxy(module)
        for item in fromlist or ():
            if item != "*":
                try:
                    getattr(out, item)
                except AttributeError:  # say what the module offers (Python names the facade module instead)
                    raise ImportError(f"cannot import name {item!r} from '{name}'; '{name}' offers: "
                                      f"{', '.join(sorted(dir(out)))}") from None
        return out

    def safe_type(obj, *rest):
        if rest:
            raise SandboxViolation("type() with three arguments is not allowed; use a class statement")
        if isinstance(obj, type):  # the class of a class is a metaclass (`type` itself for most)
            problem = "type() of a class is not allowed in the sandbox; use isinstance() or the class itself"
            violations.append(problem)
            raise SandboxViolation(problem)
        return type(obj)

    table = {name: getattr(builtins, name) for name in SAFE_BUILTINS if hasattr(builtins, name)}
    table.update(__import__=guarded_import, __build_class__=_address_free_classes(), type=safe_type,
                 hash=value_hash)
    return table


def _address_free_classes():
    """`__build_class__` for the program: a class it defines without its own `__repr__` or `__hash__` gets ones
    that do not read the instance's address (object's defaults do: `<Foo object at 0x...>`, and a set of
    instances iterates in address order), so such a program builds the same scene in every process. The hash is
    the instance's ordinal in the order the program first hashed its instances (the instances are kept alive, so
    no ordinal is reused)."""
    ordinals: dict[int, tuple[object, int]] = {}

    def ordinal_hash(self) -> int:
        got = ordinals.get(id(self))
        if got is None:
            got = ordinals[id(self)] = (self, len(ordinals) + 1)
        return got[1]

    def plain_repr(self) -> str:
        return f"<{type(self).__name__} object>"

    def build_class(func, name, *bases, **kwargs):
        cls = builtins.__build_class__(func, name, *bases, **kwargs)
        if cls.__repr__ is object.__repr__:
            cls.__repr__ = plain_repr
        if cls.__hash__ is object.__hash__:
            cls.__hash__ = ordinal_hash
        return cls

    return build_class


_HASHED_VALUES = (str, bytes, int, float, complex, bool, type(None), tuple, frozenset)


def value_hash(obj):
    """`hash` of values only (text, numbers, tuples and frozensets of them): the same in every process (the hash
    seed is fixed), where an object's default hash is made from its address."""
    if type(obj) in (tuple, frozenset):
        for item in obj:
            value_hash(item)
    elif type(obj) not in _HASHED_VALUES:
        raise TypeError(f"hash() takes text, numbers and tuples of them in the sandbox, not {type(obj).__name__}")
    return hash(obj)


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
                try:
                    value = getattr(module, attr)
                except AttributeError:  # a fresh error: the interpreter's carries the real module in `.obj`
                    raise AttributeError(f"module '{name}' has no attribute {attr!r}") from None
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


def _read_roots(allowed: tuple[str, ...], finalizer: str) -> tuple[str, ...]:
    """Directories whose files trusted code may still read (lazy imports of library modules);
    the child adds its scratch directory."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
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


def _audit_hook(roots: tuple[str, ...], violations: list[str], listable: frozenset[str]):
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
