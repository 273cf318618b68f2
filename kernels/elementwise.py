"""Elementwise primitives: one line each, sharing one batch rule.

Each primitive names the array-API function that computes it.  The batch rule
aligns the ranks of batched arguments (the batch axis stays physically first) and
leaves unbatched ones alone, since right-aligned broadcasting already fits them.
"""
from __future__ import annotations

import numpy as np

from .backend import dtype_kind, namespace, namespace_dtype, numpy_namespace
from .primitive import Primitive

__all__ = ["batch_elementwise", "elementwise_primitive"]


def _ndim(value):
    return getattr(value, "ndim", 0)


def batch_elementwise(prim):
    """The batch rule shared by every elementwise primitive."""

    def rule(axis_size, values, batched, **params):
        rank = 0
        for value, is_batched in zip(values, batched):
            logical = _ndim(value) - 1 if is_batched else _ndim(value)
            if logical > rank:
                rank = logical
        aligned = []
        for value, is_batched in zip(values, batched):
            if is_batched and _ndim(value) - 1 < rank:
                shape = tuple(value.shape)
                value = reshape.bind(value, shape=shape[:1] + (1,) * (rank + 1 - len(shape)) + shape[1:])
            aligned.append(value)
        return prim.bind(*aligned, **params), True

    return rule


def elementwise_primitive(name, impl):
    prim = Primitive(name, impl)
    prim.batch = batch_elementwise(prim)
    return prim


def _from_namespace(function_name, numpy_semantics=None):
    """An impl calling ``xp.<function_name>``.  ``numpy_semantics(xp, args)`` adapts
    the arguments where NumPy accepts more than the standard (ints in ``sin``, floats
    in ``logical_and``); NumPy itself needs no adapting."""

    def impl(*args):
        xp = namespace(*args)
        if numpy_semantics is not None and xp is not numpy_namespace:
            args = numpy_semantics(xp, args)
        return getattr(xp, function_name)(*args)

    impl.__name__ = function_name
    return impl


def _to_floating(xp, args):
    """Integers and booleans become the float NumPy's loops would pick."""
    out = []
    for arg in args:
        kind = dtype_kind(arg.dtype) if hasattr(arg, "dtype") else "f"
        if kind in "biu":
            np_dtype = np.promote_types(np.dtype(getattr(arg.dtype, "_np_dtype", arg.dtype)), np.float16)
            arg = xp.astype(arg, namespace_dtype(xp, np_dtype))
        out.append(arg)
    return out


def _to_bool(xp, args):
    return [(arg != 0 if dtype_kind(arg.dtype) != "b" else arg) if hasattr(arg, "dtype") else bool(arg)
            for arg in args]


def _to_number(xp, args):
    if all(dtype_kind(arg.dtype) == "b" for arg in args if hasattr(arg, "dtype")):
        return [xp.astype(arg, xp.int8) if hasattr(arg, "dtype") else int(arg) for arg in args]
    return [int(arg) if isinstance(arg, bool) else arg for arg in args]


_ADAPT = {"floating": _to_floating, "bool": _to_bool, "number": _to_number}


def _define(name, function_name=None, semantics=None):
    return elementwise_primitive(name, _from_namespace(function_name or name, _ADAPT.get(semantics)))


# Reshape is needed by the shared batch rule; its own rules live in shape.py.
from .shape import reshape  # noqa: E402

# --- unary ------------------------------------------------------------------
negative = _define("negative")
positive = _define("positive")
abs = _define("abs")
sign = _define("sign", semantics="number")
sqrt = _define("sqrt", semantics="floating")
square = _define("square")
exp = _define("exp", semantics="floating")
expm1 = _define("expm1", semantics="floating")
log = _define("log", semantics="floating")
log2 = _define("log2", semantics="floating")
log10 = _define("log10", semantics="floating")
log1p = _define("log1p", semantics="floating")
sin = _define("sin", semantics="floating")
cos = _define("cos", semantics="floating")
tan = _define("tan", semantics="floating")
asin = _define("asin", semantics="floating")
acos = _define("acos", semantics="floating")
atan = _define("atan", semantics="floating")
sinh = _define("sinh", semantics="floating")
cosh = _define("cosh", semantics="floating")
tanh = _define("tanh", semantics="floating")
asinh = _define("asinh", semantics="floating")
acosh = _define("acosh", semantics="floating")
atanh = _define("atanh", semantics="floating")
floor = _define("floor")
ceil = _define("ceil")
trunc = _define("trunc")
rint = _define("rint", "round")
isnan = _define("isnan")
isinf = _define("isinf")
isfinite = _define("isfinite")
signbit = _define("signbit")
logical_not = _define("logical_not", semantics="bool")
bitwise_invert = _define("bitwise_invert")
conj = _define("conj")
real = _define("real")
imag = _define("imag")


def _cbrt(x):
    xp = namespace(x)
    return xp.sign(x) * xp.pow(xp.abs(x), 1.0 / 3.0) if not hasattr(xp, "cbrt") else xp.cbrt(x)


def _reciprocal(x):
    xp = namespace(x)
    return xp.reciprocal(x) if hasattr(xp, "reciprocal") else 1 / x


def _exp2(x):
    xp = namespace(x)
    return xp.exp2(x) if hasattr(xp, "exp2") else xp.pow(2.0, x)


cbrt = elementwise_primitive("cbrt", _cbrt)
reciprocal = elementwise_primitive("reciprocal", _reciprocal)
exp2 = elementwise_primitive("exp2", _exp2)

# --- binary -----------------------------------------------------------------
add = _define("add")
subtract = _define("subtract", semantics="number")
multiply = _define("multiply")
divide = _define("divide", semantics="floating")
floor_divide = _define("floor_divide")
remainder = _define("remainder")
pow = _define("pow")
equal = _define("equal")
not_equal = _define("not_equal")
less = _define("less", semantics="number")
less_equal = _define("less_equal", semantics="number")
greater = _define("greater", semantics="number")
greater_equal = _define("greater_equal", semantics="number")
logical_and = _define("logical_and", semantics="bool")
logical_or = _define("logical_or", semantics="bool")
logical_xor = _define("logical_xor", semantics="bool")
bitwise_and = _define("bitwise_and")
bitwise_or = _define("bitwise_or")
bitwise_xor = _define("bitwise_xor")
atan2 = _define("atan2", semantics="floating")
hypot = _define("hypot", semantics="floating")
logaddexp = _define("logaddexp", semantics="floating")
maximum = _define("maximum", semantics="number")
minimum = _define("minimum", semantics="number")
copysign = _define("copysign")


def _arrays(xp, *values):
    """Python scalars as 0-d arrays of the other argument's dtype (for isnan & co)."""
    dtype = next((v.dtype for v in values if hasattr(v, "dtype")), None)
    return [v if hasattr(v, "dtype") else xp.asarray(v, dtype=dtype) for v in values]


def _fmax(x, y):
    xp = namespace(x, y)
    x, y = _arrays(xp, x, y)
    return xp.where(xp.isnan(y), x, xp.where(xp.isnan(x), y, xp.maximum(x, y)))


def _fmin(x, y):
    xp = namespace(x, y)
    x, y = _arrays(xp, x, y)
    return xp.where(xp.isnan(y), x, xp.where(xp.isnan(x), y, xp.minimum(x, y)))


fmax = elementwise_primitive("fmax", _fmax)
fmin = elementwise_primitive("fmin", _fmin)

# --- ternary ----------------------------------------------------------------
where = _define("where")


def _astype_impl(x, *, dtype):
    xp = namespace(x)
    return xp.astype(x, namespace_dtype(xp, dtype))


def _round_impl(x, *, decimals=0):
    xp = namespace(x)
    if decimals == 0:
        return xp.round(x)
    scale = 10.0 ** decimals
    return xp.round(x * scale) / scale


astype = elementwise_primitive("astype", _astype_impl)
round = elementwise_primitive("round", _round_impl)


def clip(x, lower=None, upper=None):
    """``clip`` as the composition of maximum and minimum (None leaves a side open)."""
    if lower is not None:
        x = maximum.bind(x, lower)
    if upper is not None:
        x = minimum.bind(x, upper)
    return x
