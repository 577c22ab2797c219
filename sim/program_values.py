"""Plain values that the program-facing SDK hands to untrusted programs: vectors, matrices, a random generator.

Scene and potential programs (see `sim.program`, `sim.program_helpers`, `sim.program_numpy`) get data, never live
objects: no numpy arrays, dtypes or scalars (an ndarray's constructor with a raw buffer reads and writes outside
its memory), no pydantic models (their parsing methods reach real builtins), no MuJoCo objects, no modules.

- `Vec` is a tuple of Python numbers with numpy-like elementwise arithmetic (`a - b`, `2.0 * v`, `v / n`, `-v`,
  `abs(v)`, `v ** 2`, `a @ b`), slicing (`v[:2]` is a Vec) and `tolist()`; positions and 1-D results are Vecs.
- `Mat` is a tuple of equal-length Vec rows: `m[i, j]`, `m[:, j]`, `m.T`, `m @ v`; rotations and 2-D results.
- `Random` wraps a numpy Generator: the same draws as the Generator, returned as Python ints / floats, Vecs or
  the elements of the sequence it chose from.

This module is trusted code shared by the facades; programs never import it (it is not in
`sim.program.PROGRAM_MODULES`).
"""

import functools as _functools
import operator as _operator

import numpy as _np

_SCALARS = (int, float, bool)
_MAX_DEPTH = 3


def _sealed(cls):
    """Forbid subclasses outside this SDK (a program's subclass could shadow the private slots)."""
    home = cls.__module__

    def __init_subclass__(sub, **kwargs):  # noqa: N807
        if sub.__module__ != home:
            raise TypeError(f"{cls.__name__} cannot be subclassed in a program")
        super(cls, sub).__init_subclass__(**kwargs)

    cls.__init_subclass__ = classmethod(__init_subclass__)
    return cls


def plain_error(exc: Exception) -> Exception:
    """`exc` as an exception of its nearest builtin class with the same message: numpy's own exceptions carry
    live objects (`_ArrayMemoryError.dtype`, `_UFuncNoLoopError.ufunc`), and a program may catch them."""
    if type(exc).__module__ == "builtins":
        # a failed lookup's AttributeError carries the object it ran on (`.obj`): never an SDK internal
        return AttributeError(str(exc)) if isinstance(exc, AttributeError) and getattr(exc, "obj", None) is not None else exc
    base = next(c for c in type(exc).__mro__ if c.__module__ == "builtins")
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001
        text = type(exc).__name__
    try:
        return base(text)
    except Exception:  # noqa: BLE001
        return RuntimeError(text)


def guarded(fn):
    """`fn` raising only builtin exceptions (see `plain_error`)."""

    @_functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            error = plain_error(exc)
            if error is exc:
                raise
            raise error from None

    return call


def read_only(self, name, value=None):
    raise AttributeError(f"{type(self).__name__} objects are read-only")


def number(x):
    """A Python int, float or bool from a number (numpy scalars and subclasses of the builtins included)."""
    kind = type(x)
    if kind in _SCALARS:
        return x
    if isinstance(x, bool):
        return bool(x)
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return float(x)
    if isinstance(x, _np.generic) and x.dtype.kind in "biuf":
        return x.item()
    raise TypeError(f"expected a number, got {kind.__name__}")


def data(x, depth: int = 0):
    """Numbers and (nested) lists/tuples of numbers as plain Python data; anything else is a TypeError."""
    if type(x) in _SCALARS:
        return x
    if isinstance(x, (list, tuple, range)) and depth < _MAX_DEPTH:
        return [data(v, depth + 1) for v in x]
    if isinstance(x, (list, tuple, range)):
        raise TypeError(f"at most {_MAX_DEPTH}-dimensional lists of numbers are accepted")
    try:
        return number(x)
    except TypeError:
        raise TypeError(f"expected numbers or lists/tuples of numbers, got {type(x).__name__}") from None


def optional_data(x):
    return None if x is None else data(x)


def size_arg(size):
    """A numpy `size`/`shape` argument: None, an int or a tuple of ints."""
    if size is None:
        return None
    if isinstance(size, (list, tuple)):
        return tuple(_operator.index(s) for s in size)
    return _operator.index(size)


def plain(value):
    """numpy results as plain values: scalars as int / float / bool, 1-D as Vec, 2-D as Mat, more as lists."""
    if isinstance(value, _np.ndarray):
        if value.dtype.kind not in "biuf":
            raise TypeError(f"unexpected {value.dtype.kind!r} result")  # never handed out
        if value.ndim == 0:
            return value.item()
        if value.ndim == 1:
            return Vec._raw(value.tolist())
        if value.ndim == 2:
            return Mat._raw([Vec._raw(row) for row in value.tolist()])
        return value.tolist()
    if isinstance(value, _np.generic):
        return number(value)
    if type(value) in _SCALARS or value is None:
        return value
    raise TypeError(f"unexpected {type(value).__name__} result")  # never handed out


def _array(x):
    return _np.asarray(x if isinstance(x, Vec | Mat) else data(x), dtype=_np.float64)


# --- Vec and Mat -----------------------------------------------------------------------------------------


def _broadcast_error(a, b):
    return ValueError(f"operands could not be broadcast together with shapes {_shape(a)} {_shape(b)}")


def _shape(x):
    if isinstance(x, Mat):
        return x.shape
    if isinstance(x, (list, tuple)):
        return (len(x),)
    return ()


def _elementwise(op, a, b):
    """`op` on a Vec and a number or a same-length sequence of numbers (NotImplemented for anything else)."""
    if isinstance(b, Mat):
        return NotImplemented
    if isinstance(b, (int, float)):
        b = number(b)
        return Vec._raw([op(x, b) for x in a])
    if isinstance(b, (list, tuple)):
        if len(b) != len(a):
            raise _broadcast_error(a, b)
        return Vec._raw([op(x, number(y)) for x, y in zip(a, b, strict=True)])
    return NotImplemented


def _reflected(op):
    return lambda x, y: op(y, x)


@_sealed
class Vec(tuple):
    """A vector of Python numbers with numpy-like elementwise arithmetic (a tuple: indexing, len, iteration)."""

    __slots__ = ()

    def __new__(cls, values=()):
        return tuple.__new__(cls, [number(v) for v in values])

    @classmethod
    def _raw(cls, values):
        return tuple.__new__(cls, values)

    def __getitem__(self, key):
        if isinstance(key, slice):
            return Vec._raw(tuple.__getitem__(self, key))
        return tuple.__getitem__(self, key)

    def __add__(self, other):
        return _elementwise(_operator.add, self, other)

    def __radd__(self, other):
        return _elementwise(_reflected(_operator.add), self, other)

    def __sub__(self, other):
        return _elementwise(_operator.sub, self, other)

    def __rsub__(self, other):
        return _elementwise(_reflected(_operator.sub), self, other)

    def __mul__(self, other):
        return _elementwise(_operator.mul, self, other)

    def __rmul__(self, other):
        return _elementwise(_reflected(_operator.mul), self, other)

    def __truediv__(self, other):
        return _elementwise(_operator.truediv, self, other)

    def __rtruediv__(self, other):
        return _elementwise(_reflected(_operator.truediv), self, other)

    def __floordiv__(self, other):
        return _elementwise(_operator.floordiv, self, other)

    def __mod__(self, other):
        return _elementwise(_operator.mod, self, other)

    def __pow__(self, other):
        return _elementwise(_operator.pow, self, other)

    def __rpow__(self, other):
        return _elementwise(_reflected(_operator.pow), self, other)

    def __neg__(self):
        return Vec._raw([-x for x in self])

    def __pos__(self):
        return self

    def __abs__(self):
        return Vec._raw([abs(x) for x in self])

    @guarded
    def __matmul__(self, other):
        if not isinstance(other, (list, tuple)):
            return NotImplemented
        return plain(_np.matmul(_array(self), _array(other)))

    @guarded
    def __rmatmul__(self, other):
        if not isinstance(other, (list, tuple)):
            return NotImplemented
        return plain(_np.matmul(_array(other), _array(self)))

    @property
    def shape(self) -> tuple:
        return (len(self),)

    def tolist(self) -> list:
        return list(self)

    def __repr__(self) -> str:
        return f"Vec({list(self)!r})"

    __setattr__ = read_only
    __delattr__ = read_only


def _rows(m, other, op):
    """`op` row by row: a Mat with a number, a vector (each row) or a Mat of the same shape."""
    if isinstance(other, Mat):
        if other.shape != m.shape:
            raise _broadcast_error(m, other)
        return Mat._raw([op(r, o) for r, o in zip(m, other, strict=True)])
    if isinstance(other, (int, float, list, tuple)):
        return Mat._raw([op(r, other) for r in m])
    return NotImplemented


@_sealed
class Mat(tuple):
    """A matrix: a tuple of equal-length Vec rows; `m[i, j]`, `m[:, j]`, `m.T`, `m @ v`, elementwise arithmetic."""

    __slots__ = ()

    def __new__(cls, rows=()):
        rows = [Vec(r) for r in rows]
        if len({len(r) for r in rows}) > 1:
            raise ValueError("all rows of a matrix must have the same length")
        return tuple.__new__(cls, rows)

    @classmethod
    def _raw(cls, rows):
        return tuple.__new__(cls, rows)

    def __getitem__(self, key):
        if isinstance(key, tuple):
            if len(key) != 2:
                raise IndexError("a matrix takes one or two indices")
            rows, col = key
            picked = self[rows]
            if isinstance(picked, Vec) and not isinstance(rows, slice):
                return picked[col]
            column = [r[col] for r in picked]
            return Mat._raw(column) if isinstance(col, slice) else Vec._raw(column)
        if isinstance(key, slice):
            return Mat._raw(tuple.__getitem__(self, key))
        return tuple.__getitem__(self, key)

    @property
    def T(self) -> "Mat":  # noqa: N802
        return Mat._raw([Vec._raw(col) for col in zip(*self, strict=True)])

    @property
    def shape(self) -> tuple:
        return (len(self), len(self[0]) if self else 0)

    def __add__(self, other):
        return _rows(self, other, _operator.add)

    def __radd__(self, other):
        return _rows(self, other, _reflected(_operator.add))

    def __sub__(self, other):
        return _rows(self, other, _operator.sub)

    def __rsub__(self, other):
        return _rows(self, other, _reflected(_operator.sub))

    def __mul__(self, other):
        return _rows(self, other, _operator.mul)

    def __rmul__(self, other):
        return _rows(self, other, _reflected(_operator.mul))

    def __truediv__(self, other):
        return _rows(self, other, _operator.truediv)

    def __neg__(self):
        return Mat._raw([-r for r in self])

    def __pos__(self):
        return self

    def __abs__(self):
        return Mat._raw([abs(r) for r in self])

    @guarded
    def __matmul__(self, other):
        if not isinstance(other, (list, tuple)):
            return NotImplemented
        return plain(_np.matmul(_array(self), _array(other)))

    @guarded
    def __rmatmul__(self, other):
        if not isinstance(other, (list, tuple)):
            return NotImplemented
        return plain(_np.matmul(_array(other), _array(self)))

    def tolist(self) -> list:
        return [list(r) for r in self]

    def __repr__(self) -> str:
        return f"Mat({self.tolist()!r})"

    __setattr__ = read_only
    __delattr__ = read_only


# --- random numbers ----------------------------------------------------------------------------------------

RANDOM_METHODS = ("integers", "random", "uniform", "normal", "standard_normal", "choice", "shuffle", "permutation")


def _sequence(a, what: str) -> list:
    if isinstance(a, (str, bytes)) or not isinstance(a, (list, tuple, range)):
        raise ValueError(f"{what}: a must be a list, a tuple or an int, got {type(a).__name__}")
    return list(a)


def _pick(seq: list, idx):
    """The elements of `seq` at numpy indices `idx` (a scalar, or an array shaped like the draw)."""
    if isinstance(idx, _np.ndarray) and idx.ndim > 0:
        picked = [_pick(seq, i) for i in idx]
        if picked and all(type(v) in _SCALARS for v in picked):
            return Vec._raw(picked)
        return picked
    return seq[int(idx)]


def _seed_or_drawn(seed):
    """`seed`, or without one a seed drawn from numpy's global generator — which the sandbox seeds with the
    program's `seed` — never the kernel's entropy: a program's output is a function of its source and seed."""
    if seed is None:
        return int(_np.random.randint(0, 1 << 62, dtype=_np.int64))
    return seed_arg(seed)


def seed_arg(seed):
    if seed is None or (type(seed) is int):
        return seed
    if isinstance(seed, (list, tuple)):
        return [_operator.index(s) for s in seed]
    return _operator.index(seed)


def choice(source, a, size=None, replace=True, p=None, **extra):
    """`source.choice` (a Generator or numpy's legacy module) with the draws numpy makes for `a`: an index
    draw over len(a), then the elements of `a` itself (not numpy's copies of them)."""
    size, p = size_arg(size), optional_data(p)
    if isinstance(a, int) and not isinstance(a, bool):
        return plain(source.choice(_operator.index(a), size=size, replace=bool(replace), p=p, **extra))
    seq = _sequence(a, "choice")
    return _pick(seq, source.choice(len(seq), size=size, replace=bool(replace), p=p, **extra))


def permutation(source, x):
    if isinstance(x, int) and not isinstance(x, bool):
        return plain(source.permutation(_operator.index(x)))
    seq = _sequence(x, "permutation")
    return _pick(seq, source.permutation(len(seq)))


def shuffle(source, x) -> None:
    if type(x) is not list:
        raise TypeError(f"shuffle takes a list and shuffles it in place, got {type(x).__name__}")
    source.shuffle(x)


@_sealed
class Random:
    """A random number generator: numpy's `default_rng(seed)` draws, returned as plain Python values.

    `integers(low, high=None, size=None, endpoint=False)`, `random(size=None)`, `uniform(low=0.0, high=1.0,
    size=None)`, `normal(loc=0.0, scale=1.0, size=None)`, `standard_normal(size=None)`, `choice(a, size=None,
    replace=True, p=None)`, `shuffle(list)` (in place) and `permutation(n or list)`. Single draws are ints or
    floats; `size=n` gives a Vec; `choice` and `permutation` of a list give its own elements. Without a seed, the
    generator's seed is drawn from numpy's global generator (seeded with the program's `seed`), so two runs of one
    program with one seed draw the same numbers.
    """

    __slots__ = ("_generator",)
    __hash__ = None  # object's default hash is its address (see sim.sandbox.child)

    @guarded
    def __init__(self, seed=None):
        object.__setattr__(self, "_generator", _np.random.default_rng(_seed_or_drawn(seed)))

    @classmethod
    def _wrap(cls, generator: _np.random.Generator) -> "Random":
        rng = object.__new__(cls)
        object.__setattr__(rng, "_generator", generator)
        return rng

    @guarded
    def integers(self, low, high=None, size=None, endpoint=False):
        return plain(self._generator.integers(data(low), optional_data(high), size=size_arg(size),
                                              endpoint=bool(endpoint)))

    @guarded
    def random(self, size=None):
        return plain(self._generator.random(size=size_arg(size)))

    @guarded
    def uniform(self, low=0.0, high=1.0, size=None):
        return plain(self._generator.uniform(data(low), data(high), size=size_arg(size)))

    @guarded
    def normal(self, loc=0.0, scale=1.0, size=None):
        return plain(self._generator.normal(data(loc), data(scale), size=size_arg(size)))

    @guarded
    def standard_normal(self, size=None):
        return plain(self._generator.standard_normal(size=size_arg(size)))

    @guarded
    def choice(self, a, size=None, replace=True, p=None, shuffle=True):
        return choice(self._generator, a, size, replace, p, shuffle=bool(shuffle))

    @guarded
    def shuffle(self, x) -> None:
        shuffle(self._generator, x)

    @guarded
    def permutation(self, x):
        return permutation(self._generator, x)

    def __getattr__(self, name):
        raise AttributeError(f"the random generator has no {name!r}; it offers {', '.join(RANDOM_METHODS)}")

    def __repr__(self) -> str:
        return "Random()"

    __setattr__ = read_only
    __delattr__ = read_only

