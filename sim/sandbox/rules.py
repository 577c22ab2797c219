"""Sandbox policy: what untrusted programs may import, name and touch.

Shared by the static check in the caller (:func:`find_problems`, used by
:func:`sim.sandbox.check_source`) and by the run-time guards in the forked child
(:mod:`sim.sandbox.child`). Standard library only.
"""

from __future__ import annotations

import ast
import re

PROGRAM_FILENAME = "<program>"

BLOCKED_NAMES = frozenset({
    "__import__", "eval", "exec", "compile", "open", "globals", "locals", "vars", "getattr",
    "setattr", "delattr", "breakpoint", "input", "memoryview", "exit", "quit", "help",
})

ESCAPE_ATTRS = frozenset({
    # numpy file, pickle and ctypes access
    "load", "save", "savez", "savez_compressed", "fromfile", "tofile", "memmap", "loadtxt",
    "savetxt", "genfromtxt", "fromregex", "ctypeslib", "DataSource", "lib", "f2py", "testing",
    "distutils", "dump", "test", "ctypes",
    # mujoco file access, in case the SDK hands out MuJoCo objects
    "to_file", "from_file", "from_xml_path", "from_binary_path", "mj_saveLastXML", "mj_saveModel",
    # frame, code and generator internals (walks to trusted globals)
    "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code", "f_back", "f_globals",
    "f_locals", "f_builtins", "f_code", "tb_frame", "tb_next", "co_code",
    # the sandbox itself
    "sandbox",
})

BLOCKED_MODULES = (
    "sim.sandbox", "numpy.lib",
    "numpy.ctypeslib", "numpy.testing", "numpy.f2py", "numpy.distutils",
)

# Special methods a program may define on its own classes (all other dunder names are rejected).
DUNDER_DEFS = frozenset({
    "__init__", "__repr__", "__str__", "__eq__", "__hash__", "__len__", "__iter__", "__next__",
    "__getitem__", "__contains__", "__call__", "__lt__",
})

# not `id`, and `hash` only of values (sim.sandbox.child.value_hash): an object's address, and the default hash
# made from it, differs between zygotes, so a program branching on it built another scene for the same seed in
# another process (session 37, red team); addresses are also what a memory-corruption exploit needs
SAFE_BUILTINS = (
    "abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr",
    "classmethod", "complex", "dict", "divmod", "enumerate", "filter", "float", "format",
    "frozenset", "hash", "hex", "int", "isinstance", "issubclass", "iter", "len", "list",
    "map", "max", "min", "next", "object", "oct", "ord", "pow", "print", "property", "range",
    "repr", "reversed", "round", "set", "slice", "sorted", "staticmethod", "str", "sum", "super",
    "tuple", "zip", "True", "False", "None", "Ellipsis", "NotImplemented",
    "ArithmeticError", "AssertionError", "AttributeError", "BaseException", "EOFError",
    "Exception", "FloatingPointError", "ImportError", "IndexError", "KeyError", "KeyboardInterrupt",
    "LookupError", "MemoryError", "NameError", "NotImplementedError", "OverflowError",
    "RecursionError", "RuntimeError", "StopIteration", "SystemExit", "TypeError",
    "UnboundLocalError", "UnicodeError", "ValueError", "ZeroDivisionError",
    "DeprecationWarning", "RuntimeWarning", "UserWarning", "Warning",
)

_MAX_ERRORS = 20
_FORMAT_FIELD = re.compile(r"\{[^{}]*[.\[]\s*_")


def is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def import_problem(name: str, allowed: tuple[str, ...] | list[str]) -> str | None:
    """Why importing module ``name`` is refused, or None when it is allowed."""
    parts = name.split(".")
    if parts[0] not in allowed:
        return f"import of '{name}' is not allowed; allowed modules: {', '.join(allowed)}"
    if any(part.startswith("_") for part in parts):
        return f"import of private module '{name}' is not allowed"
    if any(name == b or name.startswith(b + ".") for b in BLOCKED_MODULES):
        return f"import of '{name}' is not allowed (file, process or interpreter access)"
    return None


def attribute_problem(attr: str) -> str | None:
    """Why reading attribute ``attr`` is refused, or None when it is allowed."""
    if is_dunder(attr):
        return f"attribute '{attr}' is not allowed (no double-underscore attributes)"
    if attr.startswith("_"):
        return f"private attribute '{attr}' is not allowed; use the public API"
    if attr in ESCAPE_ATTRS:
        return f"attribute '{attr}' is not allowed (file, process or interpreter access)"
    return None


def format_string_problem(text: str) -> str | None:
    """Format strings such as ``'{0.__class__}'`` walk attributes at run time."""
    if _FORMAT_FIELD.search(text):
        return "format string that reads a private or double-underscore attribute is not allowed"
    return None


def find_problems(source: str | bytes, allowed: tuple[str, ...], max_source_bytes: int) -> list[dict]:
    """Problems found without running ``source``, as ``SandboxError`` field dicts; [] if none."""
    return check_and_compile(source, allowed, max_source_bytes)[0]


def check_and_compile(source: str | bytes, allowed: tuple[str, ...],
                      max_source_bytes: int) -> tuple[list[dict], object | None]:
    """:func:`find_problems`, and the code object compiled from the checked syntax tree when
    there are none (so that what runs is exactly what was checked, compiled once)."""
    if isinstance(source, bytes):
        try:
            text = source.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            return [_problem("encoding", (
                f"program source is not valid UTF-8 (byte 0x{source[exc.start]:02x} at offset "
                f"{exc.start}); save it as UTF-8"))], None
        size = len(source)
    elif isinstance(source, str):
        text = source
        try:
            size = len(source.encode("utf-8"))
        except UnicodeEncodeError as exc:
            return [_problem("encoding", (
                f"program source has a character that cannot be UTF-8 encoded at offset {exc.start}"))], None
    else:
        return [_problem("encoding", f"program source must be str or bytes, not {type(source).__name__}")], None
    if size > max_source_bytes:
        return [_problem("too_large", (
            f"program is {size} bytes; the limit is {max_source_bytes} bytes"))], None
    try:
        tree = ast.parse(text, filename=PROGRAM_FILENAME)
    except SyntaxError as exc:
        return [_syntax_error(exc)], None
    except (RecursionError, MemoryError, ValueError):
        return [_problem("too_large", "program is nested too deeply to parse; simplify it")], None
    errors = _Checker(allowed).run(tree)
    if errors:
        return errors, None
    try:  # also catches e.g. 'return' outside function; optimize=0: asserts stay, as in the zygote
        code = compile(tree, PROGRAM_FILENAME, "exec", dont_inherit=True, optimize=0)
    except SyntaxError as exc:
        return [_syntax_error(exc)], None
    except (RecursionError, MemoryError, ValueError):
        return [_problem("too_large", "program is nested too deeply to compile; simplify it")], None
    return [], code


def _syntax_error(exc: SyntaxError) -> dict:
    line = exc.lineno
    detail = None
    if exc.text:
        caret = " " * max((exc.offset or 1) - 1, 0) + "^"
        detail = f"{exc.text.rstrip()}\n{caret}"
    where = f"line {line}: " if line else ""
    return _problem("syntax", message=f"{where}syntax error: {exc.msg}", lineno=line, detail=detail)


class _Checker:
    """AST allow-list; one error per offending construct, each naming the line."""

    def __init__(self, allowed: tuple[str, ...]) -> None:
        self.allowed = allowed
        self.errors: list[dict] = []

    def run(self, tree: ast.AST) -> list[dict]:
        handlers, node_type = _HANDLERS, ast.AST
        stack = [tree]  # iterative: deep trees cannot exhaust the stack here
        while stack:
            node = stack.pop()
            handler = handlers.get(node.__class__)
            if handler is not None:
                handler(self, node)
            for field in node._fields:
                value = getattr(node, field, None)
                if value.__class__ is list:
                    stack.extend(item for item in value if isinstance(item, node_type))
                elif isinstance(value, node_type):
                    stack.append(value)
        unique = {(e["lineno"] or 0, e["message"]): e for e in self.errors}
        return [unique[key] for key in sorted(unique)][:_MAX_ERRORS]

    def add(self, node: ast.AST, problem: str | None) -> None:
        if problem:
            line = getattr(node, "lineno", None)
            message = f"line {line}: {problem}" if line else problem
            self.errors.append(_problem("forbidden", message=message, lineno=line))

    # one handler per node type that can break a rule (a dict lookup per node, not a chain of tests)

    def import_(self, node: ast.Import) -> None:
        for alias in node.names:
            self.add(node, import_problem(alias.name, self.allowed))

    def import_from(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.add(node, "relative imports are not allowed")
            return
        self.add(node, import_problem(node.module or "", self.allowed))
        for alias in node.names:
            if alias.name != "*":
                self.add(node, attribute_problem(alias.name))

    def name(self, node: ast.Name) -> None:
        if node.id in BLOCKED_NAMES and not isinstance(node.ctx, ast.Store):
            self.add(node, f"use of '{node.id}' is not allowed (no file, process or "
                           "interpreter access in the sandbox)")
        elif is_dunder(node.id) and not (node.id == "__name__" and isinstance(node.ctx, ast.Load)):
            self.add(node, f"name '{node.id}' is not allowed (no double-underscore names)")

    def attribute(self, node: ast.Attribute) -> None:
        self.add(node, attribute_problem(node.attr))

    def definition(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        special_ok = not isinstance(node, ast.ClassDef) and node.name in DUNDER_DEFS
        if is_dunder(node.name) and not special_ok:
            self.add(node, f"defining '{node.name}' is not allowed; allowed special methods: "
                           f"{', '.join(sorted(DUNDER_DEFS))}")

    def constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            self.add(node, format_string_problem(node.value))

    def match_class(self, node: ast.MatchClass) -> None:
        for attr in node.kwd_attrs:
            self.add(node, attribute_problem(attr))

    def bound(self, node: ast.AST) -> None:
        for name in _bound_names(node):
            if name and is_dunder(name):
                self.add(node, f"name '{name}' is not allowed (no double-underscore names)")


_HANDLERS = {
    ast.Import: _Checker.import_, ast.ImportFrom: _Checker.import_from, ast.Name: _Checker.name,
    ast.Attribute: _Checker.attribute, ast.FunctionDef: _Checker.definition,
    ast.AsyncFunctionDef: _Checker.definition, ast.ClassDef: _Checker.definition,
    ast.Constant: _Checker.constant, ast.MatchClass: _Checker.match_class,
    **dict.fromkeys((ast.arg, ast.alias, ast.ExceptHandler, ast.MatchAs, ast.MatchStar, ast.Global,
                     ast.Nonlocal, ast.MatchMapping), _Checker.bound),
}


def _bound_names(node: ast.AST) -> list[str | None]:
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.alias):
        return [node.asname]
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
        return [node.name]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    if isinstance(node, ast.MatchMapping):
        return [node.rest]
    return []


def _problem(kind: str, message: str, lineno: int | None = None, detail: str | None = None) -> dict:
    return {"kind": kind, "message": message, "lineno": lineno, "detail": detail}
