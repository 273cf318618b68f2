"""Elementwise NumPy: the ufuncs (one line each), the ufuncs and functions written as
compositions of elementwise primitives, and ``where`` / ``clip`` / ``round`` /
``astype`` / ``isclose`` / ``nan_to_num``, and the predicates ``isneginf`` / ``isposinf`` /
``isreal`` / ``iscomplex``.

A ufunc that one primitive computes goes into ``UFUNCS``; a composition is a handler.
Compositions batch and differentiate through their parts.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from labeled_func_kernels import core as kcore
from labeled_func_kernels import creation as kc
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels.creation import full_like, zeros_like
from labeled_func_kernels import reductions as kr
from labeled_func_kernels import shape as ks
from labeled_func_kernels.backend import (device_of, dtype_kind, is_integer_dtype, namespace, namespace_dtype,
                                          normalize_axis, numpy_namespace)
from labeled_func_kernels.indexing import getitem_static
from labeled_func_kernels.primitive import bottom

from ..errors import UnsupportedOperationError
from .dispatch import NO_VALUE, UFUNCS, asarray, implements, implements_ufunc, kind
from .dynamic import fixed, refuse_value_dtype

__all__ = ["as_dtype", "clip", "floating"]

UFUNCS.update({
    np.add: ew.add, np.subtract: ew.subtract, np.multiply: ew.multiply,
    np.divide: ew.divide, np.floor_divide: ew.floor_divide, np.remainder: ew.remainder,
    np.negative: ew.negative, np.positive: ew.positive,
    np.absolute: ew.absolute, np.sqrt: ew.sqrt,
    np.cbrt: ew.cbrt, np.square: ew.square, np.reciprocal: ew.reciprocal,
    np.exp: ew.exp, np.exp2: ew.exp2, np.expm1: ew.expm1, np.log: ew.log,
    np.log2: ew.log2, np.log10: ew.log10, np.log1p: ew.log1p, np.logaddexp: ew.logaddexp,
    np.logaddexp2: ew.logaddexp2, np.deg2rad: ew.deg2rad, np.radians: ew.deg2rad, np.rad2deg: ew.rad2deg,
    np.degrees: ew.rad2deg,
    np.sin: ew.sin, np.cos: ew.cos, np.tan: ew.tan, np.arcsin: ew.asin,
    np.arccos: ew.acos, np.arctan: ew.atan, np.arctan2: ew.atan2, np.hypot: ew.hypot,
    np.sinh: ew.sinh, np.cosh: ew.cosh, np.tanh: ew.tanh, np.arcsinh: ew.asinh,
    np.arccosh: ew.acosh, np.arctanh: ew.atanh, np.floor: ew.floor, np.ceil: ew.ceil,
    np.trunc: ew.trunc, np.isnan: ew.isnan, np.isinf: ew.isinf,
    np.isfinite: ew.isfinite, np.signbit: ew.signbit, np.copysign: ew.copysign,
    np.maximum: ew.maximum, np.minimum: ew.minimum, np.fmax: ew.fmax, np.fmin: ew.fmin,
    np.equal: ew.equal, np.not_equal: ew.not_equal, np.less: ew.less,
    np.less_equal: ew.less_equal, np.greater: ew.greater, np.greater_equal: ew.greater_equal,
    np.logical_and: ew.logical_and, np.logical_or: ew.logical_or,
    np.logical_xor: ew.logical_xor, np.logical_not: ew.logical_not,
    np.conjugate: ew.conj, np.fmod: ew.fmod, np.ldexp: ew.ldexp, np.nextafter: ew.nextafter,
    np.spacing: ew.spacing, np.left_shift: ew.bitwise_left_shift, np.right_shift: ew.bitwise_right_shift,
})


# --- ufuncs whose primitive depends on the dtypes -----------------------------------------------
def _bitwise_or_logical(bitwise, logical):
    """``&``, ``|``, ``^``, ``~``: logical on booleans (the array API has no bitwise on bool)."""

    def handler(*inputs):
        both_bool = all(kind(value) == "b" for value in inputs)
        return (logical if both_bool else bitwise).bind(*inputs)

    return handler


bitwise_and = implements_ufunc(np.bitwise_and)(_bitwise_or_logical(ew.bitwise_and, ew.logical_and))
bitwise_or = implements_ufunc(np.bitwise_or)(_bitwise_or_logical(ew.bitwise_or, ew.logical_or))
bitwise_xor = implements_ufunc(np.bitwise_xor)(_bitwise_or_logical(ew.bitwise_xor, ew.logical_xor))
invert = implements_ufunc(np.invert)(_bitwise_or_logical(ew.bitwise_invert, ew.logical_not))


# --- ufuncs computed by compositions -----------------------------------------------------------
def floating(x: Any) -> Any:
    """``x`` as the floating type NumPy's float-only loops would pick (ints and bools)."""
    if not hasattr(x, "dtype"):
        return float(x)
    if not is_integer_dtype(x.dtype):
        return x
    np_dtype = np.promote_types(np.dtype(getattr(x.dtype, "_np_dtype", x.dtype)), np.float16)
    return ew.astype.bind(x, dtype=namespace_dtype(namespace(x), np_dtype))


def _numpy_dtype(dtype):
    return np.dtype(getattr(dtype, "_np_dtype", dtype))


def _loop_dtypes(ufunc, *inputs):
    """The input dtypes (NumPy's) of the loop NumPy's ``ufunc`` runs on ``inputs``: arrays by
    their dtypes, Python numbers weak (``np.arctan2(0, booleans)`` computes in float64, as
    0 makes the booleans int64; of int8 in float16)."""
    signature = tuple(_numpy_dtype(value.dtype) if hasattr(value, "dtype")
                      else np.dtype(np.bool_) if isinstance(value, bool) else type(value) for value in inputs)
    return ufunc.resolve_dtypes(signature + (None,) * ufunc.nout)[:ufunc.nin]


def _in_loop_dtypes(ufunc, *inputs):
    """``inputs`` with each array cast to the dtype of NumPy's loop (Python numbers as they are:
    the loop casts them)."""
    dtypes = _loop_dtypes(ufunc, *inputs)
    return tuple(as_dtype(value, dtype) for value, dtype in zip(inputs, dtypes))


@implements_ufunc(np.fabs)
def _fabs(x):
    """|x| in NumPy's floating loop of fabs (integers as float64, booleans as float16)."""
    if kind(x) == "c":
        raise TypeError("ufunc 'fabs' not supported for the input types, and the inputs could not be safely "
                        "coerced to any supported types according to the casting rule ''safe''")
    return ew.absolute.bind(floating(x))


@implements_ufunc(np.rint)
def _rint(x):
    """Rounding to the nearest integer in NumPy's floating loop of rint (integers as float64)."""
    return ew.rint.bind(floating(x))


@implements_ufunc(np.power)
def _power(x, y):
    """The ufunc ``np.power``: the power primitive computes ``x ** y`` as NumPy's operator
    does, with shortcuts for Python exponents (``square`` for 2, of booleans int8); the ufunc
    takes none, so a Python exponent reaches it as NumPy's loop reads it: a complex one
    beside complex ``x``, booleans as the loop's integers, one half of float16 as float16."""
    if hasattr(x, "dtype") and type(y) in (int, float):
        k = kind(x)
        if k == "c":
            y = complex(y)
        elif k == "b":
            x = _in_loop_dtypes(np.power, x, y)[0]
        elif type(y) is float and y == 0.5 and _numpy_dtype(x.dtype).itemsize == 2 and k == "f":
            y = np.float16(y)
    return ew.power.bind(x, y)


def _at_least_double(x):
    """float_power computes in float64 (complex128 for complex inputs)."""
    if not hasattr(x, "dtype"):
        return complex(x) if isinstance(x, complex) else float(x)
    xp = namespace(x)
    wide = xp.complex128 if dtype_kind(x.dtype) == "c" else xp.float64
    return x if x.dtype == wide else ew.astype.bind(x, dtype=wide)


@implements_ufunc(np.float_power)
def _float_power(x, y):
    """NumPy's float_power, on its operands in float64 (complex128): so that a derivative has
    the output's dtype too."""
    return ew.float_power.bind(_at_least_double(x), _at_least_double(y))


@implements_ufunc(np.heaviside)
def _heaviside(x, h0):
    """0 below zero, 1 above, ``h0`` at zero, NaN at NaN: a selection, so the derivative
    is 0 in ``x`` and an indicator of ``x == 0`` in ``h0``."""
    x, h0 = _in_loop_dtypes(np.heaviside, x, h0)  # NumPy's: heaviside(booleans, 0.5) is float64
    if not hasattr(x, "dtype"):  # a number beside an array h0: an array of the loop's dtype
        x = namespace(h0).asarray(x, dtype=h0.dtype, device=device_of(h0))
    at_zero = ew.where.bind(ew.equal.bind(x, 0), h0, x)
    return ew.where.bind(ew.greater.bind(x, 0), 1, ew.where.bind(ew.less.bind(x, 0), 0, at_zero))


@implements_ufunc(np.sign)
def _sign(x):
    """The sign; of a complex number z / |z| (0 at 0), which is not piecewise constant: a
    primitive of its own, which differentiates."""
    return (ew.complex_sign if kind(x) == "c" else ew.sign).bind(x)


@implements_ufunc(np.divmod)
def divmod_pair(x: Any, y: Any) -> tuple[Any, Any]:
    """NumPy's divmod: (floor_divide, remainder).  The quotient is piecewise constant; the
    remainder's derivative is 1 in ``x`` and ``-floor(x / y)`` in ``y`` (a.e.)."""
    return ew.floor_divide.bind(x, y), ew.remainder.bind(x, y)


@implements_ufunc(np.modf)
def _modf(x):
    """NumPy's modf: (fractional part, integral part), both with the sign of ``x``.

    The fraction is ``x - trunc(x)`` (derivative 1 a.e.; ``trunc`` carries none), its
    sign copied from ``x`` so that a negative integer gives -0.0 as in NumPy; at
    +-inf the fraction is +-0.0 (computed from 0, not as inf - inf).
    """
    x = floating(x)
    if not hasattr(x, "dtype"):
        x = numpy_namespace.asarray(x)
    finite = ew.where.bind(ew.isinf.bind(x), 0.0, x)
    fraction = ew.copysign.bind(ew.subtract.bind(finite, ew.trunc.bind(finite)), x)
    return fraction, ew.trunc.bind(x)


@implements_ufunc(np.frexp)
def _frexp(x):
    """NumPy's frexp: (mantissa, exponent) with ``x = mantissa * 2**exponent``, ``0.5 <= |mantissa| < 1``
    (``x`` itself and 0 at 0, inf and NaN).  The exponent (int32) is piecewise constant; the mantissa
    is ``ldexp(x, -exponent)``, exact, so its derivative is ``2**-exponent``."""
    x = floating(x)
    if not hasattr(x, "dtype"):
        x = numpy_namespace.asarray(x)
    exponent = ew.frexp_exponent.bind(x)
    return ew.ldexp.bind(x, ew.negative.bind(exponent)), exponent


# --- functions that are not ufuncs --------------------------------------------------------------
@implements(np.where)
def _where(condition, x=NO_VALUE, y=NO_VALUE):
    if x is NO_VALUE and y is NO_VALUE:
        return np.nonzero(fixed(condition, "numpy.where (one-argument form, i.e. nonzero)"))
    return ew.where.bind(condition, asarray(x), asarray(y))


def clip(x: Any, lower: Any = None, upper: Any = None) -> Any:
    """NumPy's ``clip``: its own kernel with both bounds (the values at ties of signed zeros
    are NumPy's), ``maximum`` or ``minimum`` with one, as NumPy's clip calls them (None leaves
    a side open); a Python int bound beyond an integer dtype's range is left out, as NumPy
    leaves it."""
    if hasattr(x, "dtype") and kind(x) in "iu":
        info = np.iinfo(_numpy_dtype(x.dtype))
        lower = None if type(lower) is int and lower <= info.min else lower
        upper = None if type(upper) is int and upper >= info.max else upper
    if lower is not None and upper is not None:
        return ew.clip.bind(x, lower, upper)
    if lower is not None:
        x = ew.maximum.bind(x, lower)
    if upper is not None:
        x = ew.minimum.bind(x, upper)
    return x


@implements(np.sinc)
def _sinc(x):
    """sin(pi x) / (pi x), 1 at 0: NumPy's own (its values, and float64 for integers), with
    a derivative right at and around 0 (the primitive's rule)."""
    return ew.sinc.bind(asarray(x))


@implements(np.select)
def _select(condlist, choicelist, default=0):
    """The first choice whose condition holds, else ``default``: nested ``where`` from the
    last condition to the first (NumPy's own order, so the first true condition wins)."""
    if len(condlist) != len(choicelist):
        raise ValueError("numpy.select: list of cases must be same length as list of conditions")
    if len(condlist) == 0:
        raise ValueError("numpy.select: select with an empty condition list is not possible")
    choices = [asarray(choice) for choice in choicelist] + [asarray(default)]
    common = np.result_type(*[_as_numpy_dtype(choice) for choice in choices])
    choices = [as_dtype(choice, common) for choice in choices]  # Python numbers stay weak
    result = choices[-1]
    for position, (condition, choice) in enumerate(reversed(list(zip(condlist, choices[:-1])))):
        condition = asarray(condition)
        if kind(condition) != "b":
            raise TypeError(f"numpy.select: invalid entry {len(condlist) - 1 - position} in condlist: "
                            "should be boolean ndarray")
        result = ew.where.bind(condition, choice, result)
    shape = np.broadcast_shapes(*[np.shape(value) for value in list(condlist) + choices])
    if tuple(np.shape(result)) != shape:
        result = kcore.broadcast_to.bind(_as_array_of(result, choices), shape=shape)
    return as_dtype(result, common)


@implements(np.piecewise)
def _piecewise(x, condlist, funclist, *args, **kw):
    """NumPy's piecewise with a fixed shape: every function runs on all of ``x`` and each
    condition selects where its function's values go (later conditions over earlier ones,
    as NumPy writes them; an extra last function covers where no condition holds; where
    nothing holds, 0).  So each function must be elementwise, and runs on elements it does
    not keep (a NaN there, from sqrt of a negative, is not selected)."""
    x = asarray(x)
    conditions = [_as_condition(asarray(condition)) for condition in _condition_list(condlist, x)]
    count, functions = len(conditions), len(funclist)
    if functions == count + 1:
        anything = conditions[0]
        for condition in conditions[1:]:
            anything = ew.logical_or.bind(anything, condition)
        conditions.append(ew.logical_not.bind(anything))
    elif functions != count:
        raise ValueError(f"numpy.piecewise: with {count} condition(s), either {count} or {count + 1} functions "
                         "are expected")
    y = kc.zeros_like.bind(x)
    for condition, function in zip(conditions, funclist):
        value = function(x, *args, **kw) if callable(function) else function
        y = ew.where.bind(condition, as_dtype(value, x.dtype), y)
    if tuple(y.shape) != tuple(x.shape):
        y = kcore.broadcast_to.bind(y, shape=tuple(x.shape))
    return y


def _as_numpy_dtype(value):
    """What np.result_type takes for a choice, as NumPy's select gives it: a Python int,
    float or complex as it is (weak), else the dtype of the array."""
    if type(value) in (int, float, complex):
        return value
    dtype = value.dtype if hasattr(value, "dtype") else np.asarray(value).dtype
    return np.dtype(getattr(dtype, "_np_dtype", dtype))


def _condition_list(condlist, x):
    """NumPy's reading of piecewise's ``condlist``: one condition when it is a scalar, or when
    its first entry is a scalar and ``x`` is not 0-d; else one condition per entry (so a 2-D
    boolean array is a list of row conditions, as in NumPy)."""
    if not isinstance(condlist, (list, tuple)) and _rank(condlist) == 0:
        return [condlist]
    first = condlist[0]
    if isinstance(first, (list, tuple)) or _rank(first) >= 1 or x.ndim == 0:
        return list(condlist)
    return [condlist]


def _rank(value):
    return len(value.shape) if hasattr(value, "shape") else np.ndim(value)


def _as_condition(value):
    """A condition as booleans (NumPy casts piecewise's conditions to bool)."""
    return value if kind(value) == "b" else ew.not_equal.bind(value, 0)


def _as_array_of(value, arrays):
    """A Python number as a 0-d array in the namespace of ``arrays``."""
    if hasattr(value, "shape"):
        return value
    return namespace(*[a for a in arrays if hasattr(a, "shape")]).asarray(value)


def as_dtype(value: Any, dtype: Any) -> Any:
    """``value`` in ``dtype`` (NumPy's, or the namespace's; None keeps its own); a Python
    number as it is."""
    if dtype is None or not hasattr(value, "dtype"):
        return value
    target = namespace_dtype(namespace(value), dtype) if isinstance(dtype, np.dtype) else dtype
    return value if value.dtype == target else ew.astype.bind(value, dtype=target)


@implements(np.real)
def _real(val):
    return asarray(val).real


@implements(np.imag)
def _imag(val):
    return asarray(val).imag


@implements(np.angle)
def _angle(z, deg=False):
    """``atan2(imag, real)``, as NumPy computes it: derivatives through the parts (of a
    real input, 0 or pi, a constant)."""
    z = asarray(z)
    if kind(z) != "c":  # atan2(0, x): pi where the sign bit is set, NaN at NaN (constants)
        x = _in_loop_dtypes(np.arctan2, 0, z)[1]  # as NumPy's: of booleans float64, of int8 float16
        sign_angle = ew.where.bind(ew.signbit.bind(x), full_like.bind(x, fill_value=np.pi), zeros_like.bind(x))
        angle = ew.where.bind(ew.isnan.bind(x), full_like.bind(x, fill_value=np.nan), sign_angle)
    else:
        angle = ew.atan2.bind(ew.imag.bind(z), ew.real.bind(z))
    return ew.multiply.bind(angle, 180 / np.pi) if deg else angle


@implements(np.clip)
def _clip(a, a_min=NO_VALUE, a_max=NO_VALUE, out=None, *, min=NO_VALUE, max=NO_VALUE, **kwargs):
    lower = a_min if a_min is not NO_VALUE else (min if min is not NO_VALUE else None)
    upper = a_max if a_max is not NO_VALUE else (max if max is not NO_VALUE else None)
    return clip(a, lower, upper)


@implements(np.round, np.around)
def _round(a, decimals=0, out=None):
    return ew.around.bind(a, decimals=decimals)


@implements(np.astype)
def _astype(x, dtype, /, *, copy=True, device=None):
    return ew.astype.bind(x, dtype=dtype)


@implements(np.isclose)
def _isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``|a - b| <= atol + rtol |b|`` where ``b`` is finite, and wherever ``a == b`` (equal
    infinities), as NumPy: ``b`` first in its floating type (``np.result_type(b, 1.0)``: an
    integer or boolean one float64, so that ``a - b`` neither wraps around nor subtracts
    booleans)."""
    if hasattr(b, "dtype") and kind(b) in "biu":
        b = as_dtype(b, np.result_type(_numpy_dtype(b.dtype), 1.0))
    elif type(b) is int:
        b = float(b)
    with np.errstate(invalid="ignore"):  # inf - inf, as NumPy's
        difference = ew.absolute.bind(ew.subtract.bind(a, b))
    close = ew.less_equal.bind(difference, ew.add.bind(atol, ew.multiply.bind(rtol, ew.absolute.bind(b))))
    if hasattr(b, "dtype"):
        close = ew.logical_and.bind(close, ew.isfinite.bind(b))
    elif not math.isfinite(abs(b)):
        close = ew.logical_and.bind(close, False)
    close = ew.logical_or.bind(close, ew.equal.bind(a, b))
    if equal_nan:
        close = ew.logical_or.bind(close, ew.logical_and.bind(ew.isnan.bind(a), ew.isnan.bind(b)))
    return close


@implements(np.nan_to_num)
def _nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """NaN and infinities replaced by finite numbers (the dtype's extremes by default)."""
    x = asarray(x)
    if not hasattr(x, "dtype") or is_integer_dtype(x.dtype):
        return x
    if dtype_kind(x.dtype) == "c":
        raise UnsupportedOperationError("numpy.nan_to_num of complex arrays is not supported on traced arrays")
    info = namespace(x).finfo(x.dtype)
    x = ew.where.bind(ew.isnan.bind(x), nan, x)
    infinite = ew.isinf.bind(x)
    x = ew.where.bind(ew.logical_and.bind(infinite, ew.greater.bind(x, 0)), info.max if posinf is None else posinf, x)
    return ew.where.bind(ew.logical_and.bind(infinite, ew.less.bind(x, 0)), info.min if neginf is None else neginf, x)


# --- fix, i0, real_if_close, unwrap: NumPy functions written with elementwise primitives ------------
@implements(np.fix)
def _fix(x, out=None):
    """Rounding toward zero: ``trunc``, which gives NumPy's ceil-below-zero, floor-above values
    (-0.0 for -0.5, integers and booleans kept as they are)."""
    return ew.trunc.bind(asarray(x))


@implements(np.i0)
def _i0(x):
    """The modified Bessel function of the first kind of order 0: NumPy's i0 (Cephes' Chebyshev
    expansions), in float64 unless ``x`` is floating already; its derivative I1(x) is the
    derivative of the same expansions (the primitive's rule)."""
    x = asarray(x)
    if kind(x) == "c":
        raise TypeError("numpy.i0: i0 not supported for complex values")
    if kind(x) != "f":
        x = as_dtype(x, np.dtype(np.float64)) if hasattr(x, "dtype") else float(x)
    return ew.numpy_i0.bind(x)


@implements(np.real_if_close)
def _real_if_close(a, tol=100):
    """A real ``a`` as it is; a complex one as its real part where every imaginary part is below
    ``tol`` (in machine epsilons when ``tol > 1``), else as it is.  The dtype of the result
    follows the values: under grad and jvp the primal decides, as in NumPy; under vmap (a batch
    has one dtype) and lf.jit (a program records one) a DynamicShapeError says to write
    ``np.real(a)`` or keep ``a`` complex."""
    a = asarray(a)
    if kind(a) != "c":
        return a
    refuse_value_dtype(a, "numpy.real_if_close", "whether its output is real or complex",
                       "Write np.real(x) where the imaginary parts are known to be negligible, or keep x complex.")
    values = bottom(a)
    if tol > 1:
        tol = np.finfo(np.dtype(getattr(a.dtype, "_np_dtype", a.dtype))).eps * tol
    xp = namespace(values)
    return ew.real.bind(a) if bool(xp.all(xp.abs(xp.imag(values)) < tol)) else a


@implements(np.unwrap)
def _unwrap(p, discont=None, axis=-1, *, period=2 * math.pi):
    """``p`` with each jump along ``axis`` larger than ``discont`` (default ``period / 2``) brought
    within half a period by adding multiples of ``period`` (NumPy's steps, so its values and
    dtype).  The correction is piecewise constant: the derivative is the identity a.e."""
    p = asarray(p)
    if getattr(p, "ndim", 0) == 0:
        raise ValueError("numpy.unwrap: diff requires input that is at least one dimensional")
    axis = normalize_axis(axis, p.ndim)[0]

    def along(part):
        return (slice(None),) * axis + (part,)

    later = getitem_static(p, along(slice(1, None)))
    step = ew.subtract.bind(later, getitem_static(p, along(slice(None, -1))))
    dtype = np.result_type(_as_numpy_dtype(step), _as_numpy_dtype(period))
    if np.issubdtype(dtype, np.integer):
        high, odd = divmod(period, 2)
        ambiguous = odd == 0
    else:
        high, ambiguous = period / 2, True
    low = -high
    step = as_dtype(step, dtype)  # integer steps of a floating result: the values NumPy's promotion gives
    wrapped = ew.add.bind(ew.remainder.bind(ew.subtract.bind(step, low), period), low)
    if ambiguous:  # a jump of exactly half a period keeps its sign
        upward_edge = ew.logical_and.bind(ew.equal.bind(wrapped, low), ew.greater.bind(step, 0))
        wrapped = ew.where.bind(upward_edge, high, wrapped)
    correction = ew.subtract.bind(wrapped, step)
    if discont is None:
        discont = period / 2
    if is_integer_dtype(step.dtype) and isinstance(discont, float) and math.isfinite(discont):
        discont = math.ceil(discont)  # |step| < c is |step| < ceil(c) for integers (no float beside them)
    correction = ew.where.bind(ew.less.bind(ew.absolute.bind(step), discont), 0, correction)
    rest = ew.add.bind(as_dtype(later, dtype), kr.cumsum.bind(correction, axis=axis))
    first = getitem_static(p, along(slice(0, 1)))
    return ks.concatenate.bind(as_dtype(first, dtype), as_dtype(rest, dtype), axis=axis)


# --- isneginf, isposinf, isreal, iscomplex: boolean predicates ------------------------------------
def _infinite_with_sign(x, negative, name):
    x = asarray(x)
    if kind(x) == "c":
        raise TypeError(f"This operation is not supported for complex values because it would be ambiguous "
                        f"(numpy.{name})")
    side = ew.less.bind(x, 0) if negative else ew.greater.bind(x, 0)
    return ew.logical_and.bind(ew.isinf.bind(x), side)


@implements(np.isneginf)
def _isneginf(x, out=None):
    """Where ``x`` is minus infinity: ``isinf(x) & (x < 0)``."""
    return _infinite_with_sign(x, True, "isneginf")


@implements(np.isposinf)
def _isposinf(x, out=None):
    """Where ``x`` is plus infinity: ``isinf(x) & (x > 0)``."""
    return _infinite_with_sign(x, False, "isposinf")


@implements(np.isreal)
def _isreal(x):
    """Where the imaginary part is zero (everywhere, for a real ``x``)."""
    x = asarray(x)
    if kind(x) == "c":
        return ew.equal.bind(ew.imag.bind(x), 0)
    return kc.ones_like.bind(x, dtype=namespace(x).bool)


@implements(np.iscomplex)
def _iscomplex(x):
    """Where the imaginary part is not zero (nowhere, for a real ``x``)."""
    x = asarray(x)
    if kind(x) == "c":
        return ew.not_equal.bind(ew.imag.bind(x), 0)
    return kc.zeros_like.bind(x, dtype=namespace(x).bool)
