"""The numpy that scene and potential programs get: `import numpy as np` in a program imports this module (see
`sim.program.PROGRAM_MODULES`), not numpy.

numpy itself stays out of programs: its array constructor over a raw buffer with a negative offset, or with an
object dtype, reads and writes outside the buffer, and every array, dtype and numpy scalar leads back to it. This
facade offers the functions programs use, computed by numpy on float64/int64 arrays built here from the
arguments, which must be numbers or (nested) lists / tuples of numbers (`Vec`, `Mat` included). Results are plain:
Python floats, ints and bools for scalars, `Vec` (a tuple with elementwise arithmetic) for 1-D results, `Mat` for
2-D ones. Anything else is an AttributeError that lists what exists.

    np.pi, np.e, np.inf, np.nan
    elementwise: abs absolute fabs sign sqrt square exp log log2 log10 sin cos tan arcsin arccos arctan sinh
        cosh tanh deg2rad rad2deg radians degrees floor ceil rint trunc isfinite isnan isinf
        arctan2 hypot minimum maximum power mod clip round around interp isclose
    reductions (axis=None): sum prod mean median std var min max amin amax argmin argmax all any cumsum allclose
    vectors: dot cross linalg.norm
    making arrays: array asarray zeros ones full linspace arange (float64 and int64 are float and int)
    random: np.random.default_rng(seed) and the legacy np.random.random / rand / randn / uniform / normal /
        standard_normal / randint / choice / shuffle / permutation / seed (the sandbox seeds them with `seed`)
"""

import operator as _operator
import types as _types

import numpy as _np

from sim import program_values as _values
from sim.program_values import Random as _Random
from sim.program_values import _sealed

pi = _np.pi
e = _np.e
inf = _np.inf
nan = _np.nan
float64 = float
int64 = int

_DTYPES = {None: None, float: _np.float64, int: _np.int64, bool: _np.bool_, "float": _np.float64,
           "float64": _np.float64, "int": _np.int64, "int64": _np.int64, "bool": _np.bool_}


def _dtype(dtype):
    try:
        return _DTYPES[dtype]
    except (KeyError, TypeError):
        raise TypeError(f"dtype must be float, int or bool, got {dtype!r}") from None


def _arr(x, dtype=None):
    a = _np.asarray(_values.data(x), dtype=_dtype(dtype))
    if a.dtype.kind not in "biuf":
        raise TypeError("numpy functions in programs take numbers or lists/tuples of numbers (of at most int64 size)")
    return a


def _opt(x):
    return None if x is None else _arr(x)


def _axis(axis):
    return None if axis is None else _operator.index(axis)


_out = _values.plain


# --- elementwise -------------------------------------------------------------------------------------------


def _unary(fn, doc: str):
    def f(x):
        return _out(fn(_arr(x)))

    f.__name__ = f.__qualname__ = fn.__name__
    f.__doc__ = doc
    return f


def _binary(fn, doc: str):
    def f(x1, x2):
        return _out(fn(_arr(x1), _arr(x2)))

    f.__name__ = f.__qualname__ = fn.__name__
    f.__doc__ = doc
    return f


abs = _unary(_np.abs, "Absolute value, elementwise.")  # noqa: A001
absolute = _unary(_np.absolute, "Absolute value, elementwise.")
fabs = _unary(_np.fabs, "Absolute value (as float), elementwise.")
sign = _unary(_np.sign, "-1, 0 or 1, elementwise.")
sqrt = _unary(_np.sqrt, "Square root, elementwise.")
square = _unary(_np.square, "Square, elementwise.")
exp = _unary(_np.exp, "e**x, elementwise.")
log = _unary(_np.log, "Natural logarithm, elementwise.")
log2 = _unary(_np.log2, "Base-2 logarithm, elementwise.")
log10 = _unary(_np.log10, "Base-10 logarithm, elementwise.")
sin = _unary(_np.sin, "Sine (radians), elementwise.")
cos = _unary(_np.cos, "Cosine (radians), elementwise.")
tan = _unary(_np.tan, "Tangent (radians), elementwise.")
arcsin = _unary(_np.arcsin, "Inverse sine, elementwise.")
arccos = _unary(_np.arccos, "Inverse cosine, elementwise.")
arctan = _unary(_np.arctan, "Inverse tangent, elementwise.")
sinh = _unary(_np.sinh, "Hyperbolic sine, elementwise.")
cosh = _unary(_np.cosh, "Hyperbolic cosine, elementwise.")
tanh = _unary(_np.tanh, "Hyperbolic tangent, elementwise.")
deg2rad = _unary(_np.deg2rad, "Degrees to radians, elementwise.")
rad2deg = _unary(_np.rad2deg, "Radians to degrees, elementwise.")
radians = _unary(_np.radians, "Degrees to radians, elementwise.")
degrees = _unary(_np.degrees, "Radians to degrees, elementwise.")
floor = _unary(_np.floor, "Floor, elementwise.")
ceil = _unary(_np.ceil, "Ceiling, elementwise.")
rint = _unary(_np.rint, "Round to the nearest integer, elementwise.")
trunc = _unary(_np.trunc, "Truncate towards zero, elementwise.")
isfinite = _unary(_np.isfinite, "Finite?, elementwise.")
isnan = _unary(_np.isnan, "NaN?, elementwise.")
isinf = _unary(_np.isinf, "Infinite?, elementwise.")

arctan2 = _binary(_np.arctan2, "Angle of (x2, x1) = atan2(x1, x2), elementwise.")
hypot = _binary(_np.hypot, "sqrt(x1**2 + x2**2), elementwise.")
minimum = _binary(_np.minimum, "Smaller of x1 and x2, elementwise.")
maximum = _binary(_np.maximum, "Larger of x1 and x2, elementwise.")
power = _binary(_np.power, "x1 ** x2, elementwise.")
mod = _binary(_np.mod, "Remainder of x1 / x2, elementwise.")


def clip(a, a_min, a_max):
    """`a` limited to [a_min, a_max] (either bound may be None), elementwise."""
    return _out(_np.clip(_arr(a), _opt(a_min), _opt(a_max)))


def round(a, decimals=0):  # noqa: A001
    """Round to `decimals` decimals (halves to even), elementwise."""
    return _out(_np.round(_arr(a), _operator.index(decimals)))


around = round


def interp(x, xp, fp, left=None, right=None):
    """Piecewise-linear interpolation of (xp, fp) at x."""
    return _out(_np.interp(_arr(x), _arr(xp), _arr(fp), left=_opt(left), right=_opt(right)))


def isclose(a, b, rtol=1e-05, atol=1e-08):
    """|a - b| <= atol + rtol * |b|, elementwise."""
    return _out(_np.isclose(_arr(a), _arr(b), rtol=float(rtol), atol=float(atol)))


def allclose(a, b, rtol=1e-05, atol=1e-08) -> bool:
    """isclose everywhere."""
    return bool(_np.allclose(_arr(a), _arr(b), rtol=float(rtol), atol=float(atol)))


# --- reductions --------------------------------------------------------------------------------------------


def _reduction(fn, doc: str):
    def f(a, axis=None):
        return _out(fn(_arr(a), axis=_axis(axis)))

    f.__name__ = f.__qualname__ = fn.__name__
    f.__doc__ = doc
    return f


sum = _reduction(_np.sum, "Sum (over `axis`, or all).")  # noqa: A001
prod = _reduction(_np.prod, "Product (over `axis`, or all).")
mean = _reduction(_np.mean, "Mean (over `axis`, or all).")
median = _reduction(_np.median, "Median (over `axis`, or all).")
std = _reduction(_np.std, "Standard deviation (over `axis`, or all).")
var = _reduction(_np.var, "Variance (over `axis`, or all).")
min = _reduction(_np.min, "Minimum (over `axis`, or all); np.minimum compares two arrays.")  # noqa: A001
max = _reduction(_np.max, "Maximum (over `axis`, or all); np.maximum compares two arrays.")  # noqa: A001
amin = min
amax = max
argmin = _reduction(_np.argmin, "Index of the minimum (over `axis`, or of the flattened array).")
argmax = _reduction(_np.argmax, "Index of the maximum (over `axis`, or of the flattened array).")
all = _reduction(_np.all, "All true (over `axis`, or all)?")  # noqa: A001
any = _reduction(_np.any, "Any true (over `axis`, or all)?")  # noqa: A001
cumsum = _reduction(_np.cumsum, "Cumulative sum (over `axis`, or of the flattened array).")


# --- vectors -----------------------------------------------------------------------------------------------


def dot(a, b):
    """Dot product of vectors, or matrix products."""
    return _out(_np.dot(_arr(a), _arr(b)))


def cross(a, b):
    """Cross product of 3-vectors (or the z of 2-vectors)."""
    return _out(_np.cross(_arr(a), _arr(b)))


@_sealed
class _Linalg:
    """`np.linalg`: only `norm`."""

    __slots__ = ()

    @_values.guarded
    def norm(self, x, ord=None, axis=None):  # noqa: A002
        """Vector (or matrix) norm; ord None (Euclidean / Frobenius), a number, inf or 'fro'."""
        if ord is not None and type(ord) not in (int, float, str):
            raise TypeError(f"ord must be None, a number or a string, got {type(ord).__name__}")
        return _out(_np.linalg.norm(_arr(x), ord=ord, axis=_axis(axis)))

    def __getattr__(self, name):
        raise AttributeError(f"np.linalg in programs has only norm, not {name!r}")

    def __repr__(self) -> str:
        return "<numpy.linalg (norm only)>"

    __setattr__ = _values.read_only
    __delattr__ = _values.read_only


linalg = _Linalg()


# --- making arrays -----------------------------------------------------------------------------------------


def array(x, dtype=None):
    """A number, Vec (1-D) or Mat (2-D) from numbers or lists/tuples of numbers."""
    return _out(_arr(x, dtype))


asarray = array


def _shape(shape):
    return _values.size_arg(shape)


def zeros(shape, dtype=float):
    """Zeros of `shape` (an int: a Vec; (rows, cols): a Mat)."""
    return _out(_np.zeros(_shape(shape), dtype=_dtype(dtype)))


def ones(shape, dtype=float):
    """Ones of `shape` (an int: a Vec; (rows, cols): a Mat)."""
    return _out(_np.ones(_shape(shape), dtype=_dtype(dtype)))


def full(shape, fill_value, dtype=None):
    """`fill_value` everywhere in `shape`."""
    return _out(_np.full(_shape(shape), _values.number(fill_value), dtype=_dtype(dtype)))


def linspace(start, stop, num=50, endpoint=True):
    """`num` evenly spaced numbers from start to stop."""
    return _out(_np.linspace(_values.number(start), _values.number(stop), _operator.index(num),
                             endpoint=bool(endpoint)))


def arange(start, stop=None, step=None, dtype=None):
    """Evenly spaced numbers in [start, stop) by step (like range, for floats too)."""
    args = [_values.number(v) for v in (start, stop, step) if v is not None]
    return _out(_np.arange(*args, dtype=_dtype(dtype)))


# --- random ------------------------------------------------------------------------------------------------

_LEGACY = ("default_rng", "seed", "random", "rand", "randn", "uniform", "normal", "standard_normal", "randint",
           "choice", "shuffle", "permutation")


@_sealed
class _RandomFunctions:
    """`np.random`: `default_rng(seed)` (a `Random`), and the legacy functions over numpy's global generator."""

    __slots__ = ()

    @_values.guarded
    def default_rng(self, seed=None):
        """A new random generator, like numpy.random.default_rng(seed); without a seed, one drawn from the global
        generator that the sandbox seeds with the program's `seed` (not the kernel's entropy)."""
        return _Random(seed)

    @_values.guarded
    def seed(self, seed=None) -> None:
        """Reseed numpy's global generator (the sandbox seeds it with the program's `seed`)."""
        _np.random.seed(_values.seed_arg(seed))

    @_values.guarded
    def random(self, size=None):
        return _out(_np.random.random(size=_values.size_arg(size)))

    @_values.guarded
    def rand(self, *dims):
        return _out(_np.random.rand(*[_operator.index(d) for d in dims]))

    @_values.guarded
    def randn(self, *dims):
        return _out(_np.random.randn(*[_operator.index(d) for d in dims]))

    @_values.guarded
    def uniform(self, low=0.0, high=1.0, size=None):
        return _out(_np.random.uniform(_values.data(low), _values.data(high), size=_values.size_arg(size)))

    @_values.guarded
    def normal(self, loc=0.0, scale=1.0, size=None):
        return _out(_np.random.normal(_values.data(loc), _values.data(scale), size=_values.size_arg(size)))

    @_values.guarded
    def standard_normal(self, size=None):
        return _out(_np.random.standard_normal(size=_values.size_arg(size)))

    @_values.guarded
    def randint(self, low, high=None, size=None):
        return _out(_np.random.randint(_values.data(low), _values.optional_data(high), size=_values.size_arg(size)))

    @_values.guarded
    def choice(self, a, size=None, replace=True, p=None):
        return _values.choice(_np.random, a, size, replace, p)

    @_values.guarded
    def shuffle(self, x) -> None:
        _values.shuffle(_np.random, x)

    @_values.guarded
    def permutation(self, x):
        return _values.permutation(_np.random, x)

    def __getattr__(self, name):
        raise AttributeError(f"np.random in programs has no {name!r}; it offers {', '.join(_LEGACY)}")

    def __repr__(self) -> str:
        return "<numpy.random (facade)>"

    __setattr__ = _values.read_only
    __delattr__ = _values.read_only


random = _RandomFunctions()

__all__ = [
    "pi", "e", "inf", "nan", "float64", "int64",
    "abs", "absolute", "fabs", "sign", "sqrt", "square", "exp", "log", "log2", "log10", "sin", "cos", "tan",
    "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "deg2rad", "rad2deg", "radians", "degrees", "floor",
    "ceil", "rint", "trunc", "isfinite", "isnan", "isinf", "arctan2", "hypot", "minimum", "maximum", "power", "mod",
    "clip", "round", "around", "interp", "isclose", "allclose",
    "sum", "prod", "mean", "median", "std", "var", "min", "max", "amin", "amax", "argmin", "argmax", "all", "any",
    "cumsum", "dot", "cross", "linalg", "array", "asarray", "zeros", "ones", "full", "linspace", "arange", "random",
]


for _function in __all__:  # numpy's exceptions carry dtypes and ufuncs: programs see builtin ones
    if isinstance(globals()[_function], _types.FunctionType):
        globals()[_function] = _values.guarded(globals()[_function])
around, amin, amax, asarray = round, min, max, array
del _function


def __getattr__(name: str):
    raise AttributeError(f"numpy in programs has no {name!r}; it offers: {', '.join(__all__)}")
