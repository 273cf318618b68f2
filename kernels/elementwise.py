"""Elementwise primitives: one line each, sharing one batch rule.

Each primitive names the array-API function that computes it.  The batch rule
aligns the ranks of batched arguments (the batch axis stays physically first) and
leaves unbatched ones alone, since right-aligned broadcasting already fits them.
"""
from __future__ import annotations

from .backend import namespace
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


def _from_namespace(function_name):
    def impl(*args):
        return getattr(namespace(*args), function_name)(*args)

    impl.__name__ = function_name
    return impl


def _define(name, function_name=None):
    return elementwise_primitive(name, _from_namespace(function_name or name))


# Reshape is needed by the shared batch rule; its own rules live in shape.py.
from .shape import reshape  # noqa: E402

# --- unary ------------------------------------------------------------------
negative = _define("negative")
positive = _define("positive")
abs = _define("abs")
sign = _define("sign")
sqrt = _define("sqrt")
square = _define("square")
exp = _define("exp")
expm1 = _define("expm1")
log = _define("log")
log2 = _define("log2")
log10 = _define("log10")
log1p = _define("log1p")
sin = _define("sin")
cos = _define("cos")
tan = _define("tan")
asin = _define("asin")
acos = _define("acos")
atan = _define("atan")
sinh = _define("sinh")
cosh = _define("cosh")
tanh = _define("tanh")
asinh = _define("asinh")
acosh = _define("acosh")
atanh = _define("atanh")
floor = _define("floor")
ceil = _define("ceil")
trunc = _define("trunc")
rint = _define("rint", "round")
isnan = _define("isnan")
isinf = _define("isinf")
isfinite = _define("isfinite")
signbit = _define("signbit")
logical_not = _define("logical_not")
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
subtract = _define("subtract")
multiply = _define("multiply")
divide = _define("divide")
floor_divide = _define("floor_divide")
remainder = _define("remainder")
pow = _define("pow")
equal = _define("equal")
not_equal = _define("not_equal")
less = _define("less")
less_equal = _define("less_equal")
greater = _define("greater")
greater_equal = _define("greater_equal")
logical_and = _define("logical_and")
logical_or = _define("logical_or")
logical_xor = _define("logical_xor")
bitwise_and = _define("bitwise_and")
bitwise_or = _define("bitwise_or")
bitwise_xor = _define("bitwise_xor")
atan2 = _define("atan2")
hypot = _define("hypot")
logaddexp = _define("logaddexp")
maximum = _define("maximum")
minimum = _define("minimum")
copysign = _define("copysign")


def _fmax(x, y):
    xp = namespace(x, y)
    return xp.where(xp.isnan(y), x, xp.where(xp.isnan(x), y, xp.maximum(x, y)))


def _fmin(x, y):
    xp = namespace(x, y)
    return xp.where(xp.isnan(y), x, xp.where(xp.isnan(x), y, xp.minimum(x, y)))


fmax = elementwise_primitive("fmax", _fmax)
fmin = elementwise_primitive("fmin", _fmin)

# --- ternary ----------------------------------------------------------------
where = _define("where")


def _astype_impl(x, *, dtype):
    xp = namespace(x)
    return xp.astype(x, dtype)


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
