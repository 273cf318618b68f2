"""Elementwise primitives: one line each, sharing one batch rule.

Each primitive names the array-API function that computes it.  The batch rule
aligns the ranks of batched arguments (the batch axis stays physically first) and
leaves unbatched ones alone, since right-aligned broadcasting already fits them.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import buffers
from .backend import (I0_FAR, I0_NEAR, all_finite, backend_of, device_of, dtype_kind, extra, is_integer_dtype,
                      looking_waits, namespace, namespace_dtype, numpy_namespace, reciprocal_power_of_two)
from .core import Negated, broadcast_to, linear_rules, reduce_sum, reshape, unbroadcast
from .creation import zeros_like
from .primitive import Fusion, Primitive

__all__ = ["add_to_temporary", "batch_elementwise", "elementwise_primitive", "materialised", "partial_rules",
           "real_valued_rules", "safe_multiply", "subtract_from_temporary"]


def _ndim(value):
    return getattr(value, "ndim", 0)


def batch_elementwise(prim: Primitive) -> Callable[..., tuple[Any, bool]]:
    """The batch rule shared by every elementwise primitive."""

    def rule(axis_size, values, batched, **params):
        if len(values) == 1:  # one operand (np.sin(x)): nothing to align
            return prim.bind(values[0], **params), True
        return prim.bind(*_aligned_ranks(values, batched), **params), True

    return rule


def _aligned_ranks(values, batched):
    """The batched ``values`` of a logical rank below the largest with 1s after their batch
    axis (unbatched ones broadcast under it as they are)."""
    if len(values) == 2:  # the common case first: is either batched value of a lower rank?
        a, b = values
        batched_a, batched_b = batched
        rank_a, rank_b = _ndim(a) - batched_a, _ndim(b) - batched_b
        if (not batched_a or rank_a >= rank_b) and (not batched_b or rank_b >= rank_a):
            return values
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
    return aligned


def elementwise_primitive(name: str, impl: Callable[..., Any], fusion: Fusion | None = None) -> Primitive:
    """A primitive with the shared elementwise batch rule; ``fusion``: its :class:`Fusion`
    (how lf.jit spells it in a fused expression), or None."""
    prim = Primitive(name, impl, fusion=fusion)
    prim.batch = batch_elementwise(prim)
    return prim


# --- how lf.jit fuses them: each primitive's row below carries its Fusion -----------------
def _spelled(numexpr, cuda=None, **facts):
    """A :class:`Fusion` spelled ``numexpr`` in numexpr and ``cuda`` in CUDA C (the same text
    where ``cuda`` is None)."""
    return Fusion(numexpr, numexpr if cuda is None else cuda, **facts)


def _transcendental(numexpr, cuda=None):
    """A transcendental function: heavy, and numexpr's (libm's) last bit may not be NumPy's."""
    return _spelled(numexpr, cuda, cost="heavy", rounds_differently=True)


def _compared(operator):
    """A comparison: a boolean result, as NumPy's."""
    return _spelled("({} %s {})" % operator, boolean_result=True)


def _logical(numexpr, cuda):
    """A logical operation: of booleans only, a boolean result."""
    return _spelled(numexpr, cuda, logical=True, boolean_result=True)


# Why a primitive that numexpr and CUDA C could compute is not fused
_NOT_SPELLED = Fusion.unfused(
    "numexpr and CUDA C compute it, but it has no spelling yet: a spelling must first match NumPy "
    "bit for bit (NaNs, signed zeros, float32) under tests/test_fuzz_jit.py")
_OF_INTEGERS = Fusion.unfused("integer operands: lf.jit fuses float64, float32 and booleans only")
_OF_COMPLEX = Fusion.unfused(
    "a part of a complex number: lf.jit fuses float64, float32 and booleans only (of a real "
    "array NumPy returns the array or zeros, nothing to compute)")


# NumPy ufuncs whose result has the dtype of their floating arguments (with Python numbers,
# which NumPy keeps weak): their large results are written into kept memory (buffers.empty)
_SAME_FLOAT = frozenset(getattr(np, name) for name in (
    "add", "subtract", "multiply", "divide", "negative", "positive", "absolute", "square", "sqrt", "cbrt",
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "arcsin", "arccos", "arctan",
    "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "power", "maximum", "minimum", "fmax", "fmin",
    "reciprocal", "arctan2", "hypot", "copysign", "logaddexp", "logaddexp2", "floor", "ceil", "trunc", "rint",
    "deg2rad", "rad2deg"))


def _from_namespace(function_name, numpy_semantics=None, numpy_function=None):
    """An impl calling ``xp.<function_name>``.  ``numpy_semantics(xp, args)`` adapts
    the arguments where NumPy accepts more than the standard (ints in ``sin``, floats
    in ``logical_and``); NumPy itself needs no adapting.  ``numpy_function``: what NumPy
    arrays call, where array-api-compat's function of that name is a wrapper with other
    values or dtypes than NumPy's own (``sign`` of complex numbers, ``clip``)."""

    if numpy_function is None:
        numpy_function = getattr(numpy_namespace, function_name, None)
    kept = numpy_function in _SAME_FLOAT
    ndarray, least = np.ndarray, buffers.MIN_BYTES

    def impl(*args):
        if numpy_function is not None:  # NumPy arrays and Python numbers: NumPy, without asking
            large = False
            for arg in args:
                kind = type(arg)
                if kind is ndarray:
                    if arg.nbytes >= least:
                        large = True
                elif kind is not float and kind is not int:
                    break
            else:
                if large and kept:  # its result in kept memory
                    out = _kept_output(args)
                    if out is not None:
                        return numpy_function(*args, out=out)
                return numpy_function(*args)
        xp = namespace(*args)
        if numpy_semantics is not None and xp is not numpy_namespace:
            args = numpy_semantics(xp, args)
        return extra(xp, function_name)(*args)  # the library's own, else the portable fallback

    def lower(*args):
        """The library's own function that ``impl`` calls for arguments like ``args``
        (a compiled program calls it directly), or None where ``impl`` adapts them."""
        for arg in args:  # NumPy arrays and Python numbers: NumPy's, without asking (as impl)
            kind = type(arg)
            if kind is not ndarray and kind is not float and kind is not int:
                break
        else:
            return numpy_function
        xp = namespace(*args)
        if xp is numpy_namespace:
            return numpy_function
        return getattr(xp, function_name, None) if numpy_semantics is None else None

    impl.__name__ = function_name
    impl.lower = lower
    return impl


def _kept_output(args):
    """An ``out`` array from :func:`buffers.empty` for a ufunc of ``_SAME_FLOAT`` on ``args``
    (one of them a large NumPy array), or None: only for NumPy arrays of one floating dtype,
    C-ordered where they have two axes or more (NumPy gives a result the layout of its
    inputs: a kept block is C-ordered), and Python numbers."""
    dtype = shape = None
    for arg in args:
        kind = type(arg)
        if kind is np.ndarray:
            if arg.ndim > 1 and not arg.flags.c_contiguous:
                return None
            if dtype is None:
                dtype, shape = arg.dtype, arg.shape
                if dtype.kind != "f":
                    return None
            elif arg.dtype != dtype:
                return None
            elif arg.shape != shape:
                try:
                    shape = np.broadcast_shapes(shape, arg.shape)
                except ValueError:
                    return None  # the ufunc raises its own error
        elif kind is not float and kind is not int:
            return None
    return buffers.empty(shape, dtype)


def _to_floating(xp, args):
    """Integers and booleans become the float NumPy's loops would pick."""
    out = []
    for arg in args:
        if hasattr(arg, "dtype") and is_integer_dtype(arg.dtype):
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


def _to_condition(xp, args):
    """A Python bool condition as an array: CuPy's ``where`` calls ``condition.astype``."""
    condition, *rest = args
    if not hasattr(condition, "dtype"):
        condition = xp.asarray(bool(condition))
    return [condition, *rest]


def _to_common(xp, args):
    """Every argument as an array of the dtype NumPy's promotion gives them all (a Python
    number weak): the standard's ``clip`` keeps ``x``'s dtype, NumPy's promotes."""
    arrays = [arg for arg in args if hasattr(arg, "dtype")]
    common = np.result_type(*[np.dtype(getattr(arg.dtype, "_np_dtype", arg.dtype)) if hasattr(arg, "dtype") else arg
                              for arg in args])
    dtype, device = namespace_dtype(xp, common), device_of(arrays[0])
    return [(arg if arg.dtype == dtype else xp.astype(arg, dtype)) if hasattr(arg, "dtype")
            else xp.asarray(arg, dtype=dtype, device=device) for arg in args]


_ADAPT = {"floating": _to_floating, "bool": _to_bool, "number": _to_number, "condition": _to_condition,
          "promote": _to_common}


def _define(name, function_name=None, semantics=None, numpy_function=None, fusion=None):
    return elementwise_primitive(name, _from_namespace(function_name or name, _ADAPT.get(semantics), numpy_function),
                                 fusion)

# --- unary ------------------------------------------------------------------
negative = _define("negative", fusion=_spelled("(-{})"))
positive = _define("positive", fusion=_NOT_SPELLED)
absolute = _define("absolute", "abs", fusion=_spelled("abs({})", "fabs({})"))
sign = _define("sign", semantics="number", numpy_function=np.sign, fusion=_NOT_SPELLED)
# z / |z| of a complex z (0 at 0; NumPy's at infinities: sign(1 + inf j) is 1j): not piecewise
# constant, so a primitive of its own with rules (below), where ``sign`` of reals has none
complex_sign = _define("complex_sign", "sign", numpy_function=np.sign)
sqrt = _define("sqrt", semantics="floating", fusion=_spelled("sqrt({})", cost="heavy"))
square = _define("square", semantics="number")  # of booleans int8, as NumPy's
exp = _define("exp", semantics="floating", fusion=_transcendental("exp({})"))
expm1 = _define("expm1", semantics="floating", fusion=_transcendental("expm1({})"))
log = _define("log", semantics="floating", fusion=_transcendental("log({})"))
log2 = _define("log2", semantics="floating", fusion=_NOT_SPELLED)
log10 = _define("log10", semantics="floating", fusion=_NOT_SPELLED)
log1p = _define("log1p", semantics="floating", fusion=_transcendental("log1p({})"))
sin = _define("sin", semantics="floating", fusion=_transcendental("sin({})"))
cos = _define("cos", semantics="floating", fusion=_transcendental("cos({})"))
tan = _define("tan", semantics="floating", fusion=_transcendental("tan({})"))
asin = _define("asin", semantics="floating", fusion=_transcendental("arcsin({})", "asin({})"))
acos = _define("acos", semantics="floating", fusion=_transcendental("arccos({})", "acos({})"))
atan = _define("atan", semantics="floating", fusion=_transcendental("arctan({})", "atan({})"))
sinh = _define("sinh", semantics="floating", fusion=_transcendental("sinh({})"))
cosh = _define("cosh", semantics="floating", fusion=_transcendental("cosh({})"))
tanh = _define("tanh", semantics="floating", fusion=_transcendental("tanh({})"))
asinh = _define("asinh", semantics="floating", fusion=_transcendental("arcsinh({})", "asinh({})"))
acosh = _define("acosh", semantics="floating", fusion=_transcendental("arccosh({})", "acosh({})"))
atanh = _define("atanh", semantics="floating", fusion=_transcendental("arctanh({})", "atanh({})"))
floor = _define("floor", fusion=_NOT_SPELLED)
ceil = _define("ceil", fusion=_NOT_SPELLED)
trunc = _define("trunc", fusion=_NOT_SPELLED)
rint = _define("rint", "round", fusion=_NOT_SPELLED)
# NumPy's own functions where the standard has none (backend.extra's fallbacks elsewhere): their
# values and dtypes are NumPy's (np.sinc of integers is float64), the rules below their formulas
sinc = _define("sinc")
numpy_i0 = _define("numpy_i0", "i0")  # np.i0 (Cephes' expansions); scipy.special.i0 is ``i0`` below

isnan = _define("isnan", fusion=_NOT_SPELLED)
isinf = _define("isinf", fusion=_NOT_SPELLED)
isfinite = _define("isfinite", fusion=_NOT_SPELLED)
signbit = _define("signbit", fusion=_NOT_SPELLED)
logical_not = _define("logical_not", semantics="bool", fusion=_logical("(~{})", "(!{})"))
bitwise_invert = _define("bitwise_invert", fusion=_OF_INTEGERS)
conj = _define("conj", fusion=_OF_COMPLEX)
real = _define("real", fusion=_OF_COMPLEX)
imag = _define("imag", fusion=_OF_COMPLEX)


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
add = _define("add", fusion=_spelled("({} + {})"))


def _add_inplace_impl(x, y):
    """``x + y``, written into ``x``'s buffer where it fits (a NumPy array owning a writable
    buffer of the result's shape and dtype), else a new array: the same values either way.
    For a sum the caller builds up in a temporary of its own that nothing else reads (a
    cotangent accumulated over several uses, a tangent summed over several arguments): one
    array instead of one per term.  lf.jit computes it so while tracing and records ``add``
    (``add_inplace.records``): a recorded program replays its nodes on values it may read
    again, and passes buffers on by its own plan."""
    if type(x) is np.ndarray and x.flags.writeable and buffers.owns(x) and _fits_into(y, x):
        return np.add(x, y, out=x)
    return add.impl(x, y)


def _fits_into(y, x):
    """Whether ``x + y`` has ``x``'s shape and dtype (``y`` an array of ``x``'s dtype, or a
    Python number NumPy keeps weak)."""
    kind = type(y)
    if kind is np.ndarray:
        return y.dtype == x.dtype and (y.shape == x.shape or _broadcasts_to(y.shape, x.shape))
    if kind is float or kind is int:
        return x.dtype.kind in "fc"
    return False


def _broadcasts_to(shape, target):
    if len(shape) > len(target):
        return False
    return all(size in (1, full) for size, full in zip(shape[::-1], target[::-1]))


add_inplace = elementwise_primitive("add_inplace", _add_inplace_impl)
add_inplace.records = add  # what a recording level keeps of it: the same values, out of place
subtract = _define("subtract", semantics="number", fusion=_spelled("({} - {})"))


def _subtract_inplace_impl(x, y):
    """``x - y``, written into ``x``'s buffer where it fits, as :func:`_add_inplace_impl`."""
    if type(x) is np.ndarray and x.flags.writeable and buffers.owns(x) and _fits_into(y, x):
        return np.subtract(x, y, out=x)
    return subtract.impl(x, y)


subtract_inplace = elementwise_primitive("subtract_inplace", _subtract_inplace_impl)
subtract_inplace.records = subtract
multiply = _define("multiply", fusion=_spelled("({} * {})"))
divide = _define("divide", semantics="floating", fusion=_spelled("({} / {})"))
_divide_by_namespace = divide.impl


def _divide_impl(x, y):
    """``x / y``; a NumPy float array over a Python float ±2**k (a normal number of its dtype,
    with a normal reciprocal) is multiplied by ``2**-k`` instead: the same real number,
    rounded once, so the same bits, and a product runs at twice a quotient's speed (a grid
    spacing of 1/64, a mean over 2**k)."""
    if type(y) is float and type(x) is np.ndarray and x.dtype.kind == "f":
        reciprocal = reciprocal_power_of_two(y, x.dtype)
        if reciprocal is not None:
            return multiply.impl(x, reciprocal)
    return _divide_by_namespace(x, y)


_divide_impl.lower = _divide_by_namespace.lower  # a compiled program rewrites divisions itself
divide.impl = _divide_impl
floor_divide = _define("floor_divide", fusion=_NOT_SPELLED)
remainder = _define("remainder", fusion=_NOT_SPELLED)


def _scaled(function_name):
    """An impl of NumPy's deg2rad or rad2deg: on float64 and float32 arrays a product by NumPy's
    own constant in that dtype (its loop's ``x * c``: the same bits, at a SIMD product's speed,
    ~4 times its loop's), else the library's function (float16: NumPy's rounds through float32)."""
    by_namespace = _from_namespace(function_name, _to_floating)
    numpy_function = getattr(np, function_name)
    factors = {np.dtype(np.float64): float(numpy_function(1.0)),
               np.dtype(np.float32): numpy_function(np.float32(1.0))}

    def impl(x):
        if type(x) is np.ndarray:
            factor = factors.get(x.dtype)
            if factor is not None:
                return multiply.impl(x, factor)
        return by_namespace(x)

    def lower(x):
        """None for the arrays ``impl`` multiplies (a compiled program calls ``impl``)."""
        return None if getattr(x, "dtype", None) in factors else by_namespace.lower(x)

    impl.__name__, impl.lower = function_name, lower
    return impl


deg2rad = elementwise_primitive("deg2rad", _scaled("deg2rad"))
rad2deg = elementwise_primitive("rad2deg", _scaled("rad2deg"))


def _power_impl(x, y):
    """``x ** y``, as NumPy's operator computes it on an array: an exact Python int 2 is
    ``square`` (of booleans int8, of complex numbers NumPy's square: ``(0-0j)**2`` is
    ``0-0j``), an int -1 ``reciprocal`` and a float 0.5 ``sqrt`` of floating and complex
    arrays (the ufunc ``np.power`` takes none of these: engine/numpy/elementwise.py hands
    it exponents that do not).  A small integer (or one half) exponent that leaves ``x``'s
    floating dtype as it is becomes products (``x**3`` is ``x * x * x``, ``x**-1`` is
    ``1 / x``, ``x**0.5`` is ``sqrt(x)``): the library's ``pow`` is ~20 times slower, ~70
    for a negative base, and rules ask for such powers constantly (d/dx x**4 is 4 x**3);
    ``x**-2``, ``x**3`` and ``x**4`` are then within an ulp of ``pow``'s, not its bits
    (tests/test_kernel_choices.py)."""
    exponent = small_exponent(x, y)
    if exponent is None:
        kind = type(y)
        if (kind is int or kind is float) and hasattr(x, "dtype") and not isinstance(x, np.generic):
            shortcut = _operator_shortcut(x, y, kind)
            if shortcut is not None:
                return shortcut(x)
        return _pow(x, y)
    xp = namespace(x)
    if exponent == 0.5:
        return xp.sqrt(x)
    count = abs(int(exponent))
    if count == 0:
        return xp.ones_like(x)
    square = x * x if count > 1 else None
    value = {1: lambda: xp.asarray(x, copy=True), 2: lambda: square, 3: lambda: square * x,
             4: lambda: square * square}[count]()
    return 1 / value if exponent < 0 else value


def _power_lower(x, y):
    """The NumPy call ``_power_impl`` makes for operands like these where it is one product
    (a float array squared: ``x * x``), for a compiled program to call directly; else None."""
    if type(x) is np.ndarray and small_exponent(x, y) == 2.0:
        return _times_itself
    return None


def _times_itself(x, y):
    """``x ** 2`` of a float array, as ``_power_impl`` computes it: ``x * x``."""
    return x * x


_power_impl.lower = _power_lower


def _operator_shortcut(x, y, kind):
    """The impl NumPy's ``array ** y`` takes for an exact Python number ``y`` (not a NumPy
    scalar, not a bool) instead of ``power``, or None."""
    if kind is int and y == 2:
        return square.impl
    if dtype_kind(x.dtype) in "fc" and ((kind is int and y == -1) or (kind is float and y == 0.5)):
        return _reciprocal if y == -1 else sqrt.impl
    return None


_pow = _from_namespace("pow")
_SMALL_EXPONENTS = frozenset((-2.0, -1.0, 0.0, 0.5, 1.0, 2.0, 3.0, 4.0))


def small_exponent(x: Any, y: Any) -> float | None:
    """The exponent ``y`` as a float when ``x ** y`` is computed by products: ``y`` a
    Python number or a 0-d constant in ``_SMALL_EXPONENTS`` that does not change the
    dtype of a real floating ``x``; else None.  One half of float16 only as a Python float
    (the operator's ``sqrt``): NumPy's float16 ``pow`` is not ``sqrt`` at -0.0 and -inf."""
    if type(y) in (int, float):
        value = y
    elif isinstance(y, (np.ndarray, np.generic)) and y.ndim == 0 and dtype_kind(y.dtype) in "iuf":
        if not hasattr(x, "dtype") or np.result_type(np.dtype(getattr(x.dtype, "_np_dtype", x.dtype)), y.dtype) != x.dtype:
            return None
        value = float(y)
    else:
        return None
    if value not in _SMALL_EXPONENTS or not hasattr(x, "dtype") or dtype_kind(x.dtype) != "f":
        return None
    if value == 0.5 and type(y) is not float and _is_half(x):
        return None
    return float(value)


def _is_half(x):
    """Whether ``x`` is a float16 array."""
    dtype = getattr(x, "dtype", None)
    return dtype is not None and dtype_kind(dtype) == "f" and np.dtype(getattr(dtype, "_np_dtype", dtype)).itemsize == 2


# fused by a small constant exponent only (numexpr), as the kernel computes it: products
power = elementwise_primitive("power", _power_impl, Fusion(by_constant={
    2.0: "({0} * {0})", 3.0: "(({0} * {0}) * {0})", 4.0: "(({0} * {0}) * ({0} * {0}))",
    -1.0: "(1 / {0})", -2.0: "(1 / ({0} * {0}))", 0.5: "sqrt({0})"}))
float_power = _define("float_power")  # in float64 (complex128): NumPy's own, not a power of float64 values
equal = _define("equal", fusion=_compared("=="))
not_equal = _define("not_equal", fusion=_compared("!="))
less = _define("less", semantics="number", fusion=_compared("<"))
less_equal = _define("less_equal", semantics="number", fusion=_compared("<="))
greater = _define("greater", semantics="number", fusion=_compared(">"))
greater_equal = _define("greater_equal", semantics="number", fusion=_compared(">="))
logical_and = _define("logical_and", semantics="bool", fusion=_logical("({} & {})", "({} && {})"))
logical_or = _define("logical_or", semantics="bool", fusion=_logical("({} | {})", "({} || {})"))
logical_xor = _define("logical_xor", semantics="bool", fusion=_NOT_SPELLED)
bitwise_and = _define("bitwise_and", fusion=_OF_INTEGERS)
bitwise_or = _define("bitwise_or", fusion=_OF_INTEGERS)
bitwise_xor = _define("bitwise_xor", fusion=_OF_INTEGERS)
# integer shifts (x << n, x >> n); piecewise constant, so no derivative, like floor
bitwise_left_shift = _define("bitwise_left_shift", semantics="number", fusion=_OF_INTEGERS)
bitwise_right_shift = _define("bitwise_right_shift", semantics="number", fusion=_OF_INTEGERS)
atan2 = _define("atan2", semantics="floating", fusion=_transcendental("arctan2({}, {})", "atan2({}, {})"))
hypot = _define("hypot", semantics="floating", fusion=_NOT_SPELLED)
logaddexp = _define("logaddexp", semantics="floating")
logaddexp2 = _define("logaddexp2", semantics="floating")
maximum = _define("maximum", semantics="number", fusion=_NOT_SPELLED)
minimum = _define("minimum", semantics="number", fusion=_NOT_SPELLED)
copysign = _define("copysign", fusion=_NOT_SPELLED)


# the extreme of two values skipping a NaN (NumPy's promotion: fmin of ints and 0.5 is float64)
fmax = _define("fmax")
fmin = _define("fmin")
# NumPy's clip(x, low, high), both bounds given (its values at ties of signed zeros: x's)
clip = _define("clip", semantics="promote", numpy_function=np.clip)


# --- NumPy's floating-point ufuncs (backend.extra: the library's own where it has one) ------------
def _frexp_exponent_impl(x):
    xp = namespace(x)
    frexp = getattr(xp, "frexp", None)
    if frexp is None:
        raise NotImplementedError(f"frexp: {xp.__name__} has no frexp (NumPy and CuPy have one)")
    return frexp(x)[1]


# fmod: x - trunc(x / y) y, the sign of x; ldexp: x 2**i (i an integer array), linear in x;
# nextafter and spacing: the neighbouring floating-point numbers; frexp's exponent (int32)
fmod = _define("fmod", fusion=_NOT_SPELLED)
ldexp = linear_rules(_define("ldexp"), lambda g, x, i: unbroadcast(ldexp.bind(g, i), x.shape))
nextafter = _define("nextafter", semantics="floating", fusion=_NOT_SPELLED)
spacing = _define("spacing")
frexp_exponent = elementwise_primitive("frexp_exponent", _frexp_exponent_impl)

# --- ternary ----------------------------------------------------------------
where = _define("where", semantics="condition",
                fusion=_spelled("where({}, {}, {})", "({} ? {} : {})", boolean_result=True))


def _astype_impl(x, *, dtype):
    xp = namespace(x)
    return xp.astype(x, namespace_dtype(xp, dtype))


_astype_impl.numpy_bound = lambda *, dtype: operator.methodcaller("astype", dtype)  # a copy, as the impl's


def _round_impl(x, *, decimals=0):
    xp = namespace(x)
    if decimals == 0:
        return xp.round(x)
    scale = 10.0 ** decimals
    return xp.round(x * scale) / scale


astype = elementwise_primitive("astype", _astype_impl)
around = elementwise_primitive("around", _round_impl)


# --- derivative rules: a formula sheet ---------------------------------------------------
# Each entry gives the partial derivative(s) in terms of the inputs and the output,
# written with bind so that they differentiate and batch again.  Rules that can meet a
# partial that is not finite multiply cotangents NaN-safely: a zero cotangent stays zero
# (xarray masks with where, and 0 * inf would be NaN).  That is every rule whose partial
# reads the inputs (every one-argument rule; the flag True of _BINARY): an infinite
# derivative at a finite input (sqrt at 0,
# log at 0), an overflow (exp), and a missing value (NaN) that a reduction skips later
# (xarray's mean): the partial is NaN there and the cotangent 0, and one 0 * NaN made the
# gradient of every shared parameter NaN.  Partials that are constants or indicators
# (0, 0.5, 1: max, min, copysign) multiply plainly.


def _is_array(value):
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _safe_multiply_impl(g, d):
    """``g * d``, and 0 where ``g`` is 0 and ``d`` is not finite (a zero cotangent stays zero
    even against an infinite partial derivative).  The mask costs passes over the data, so
    it is computed only when ``d`` (often an unbatched partial, smaller than ``g``) has a
    non-finite element: the choice is made on the values of this call.  On a GPU the
    masked product is one kernel (:func:`device_safe_product`), without that choice."""
    if type(d) is not np.ndarray:
        fused = device_safe_product(g, d)
        if fused is not None:
            return fused
    if all_finite(d):
        return _multiply(g, d)
    with np.errstate(invalid="ignore"):  # 0 * inf, masked below: no warning for a product nobody sees
        product = _multiply(g, d)
    return _where(_safe_mask(g, d), 0.0, product)


# The NaN-safe product in CUDA C ({0} the cotangent, {1} the partial), for CuPy's
# ElementwiseKernel: here, and in the kernels lf.jit fuses (safe_multiply.fusion).  On a GPU,
# deciding on the values (all_finite) waits for every kernel queued before it: the CPU stops
# queueing work ahead of the GPU, and a gradient's time becomes the sum of the two instead
# of the larger.
SAFE_PRODUCT_CUDA = "((({0}) == 0 && !isfinite((double)({1}))) ? 0.0 : ({0}) * ({1}))"
_SAFE_PRODUCT_KERNELS = {}  # dtype name -> the kernel (CuPy compiles it once, and caches the build)


def safe_product_kernel_source(name: str) -> tuple[str, str, str]:
    """The parameters and the operation of :func:`device_safe_product`'s kernel for dtype
    ``name`` (float32 or float64), as ``cupy.ElementwiseKernel`` takes them."""
    return f"{name} g, {name} d", f"{name} out", "out = " + SAFE_PRODUCT_CUDA.format("g", "d")


def device_safe_product(g: Any, d: Any) -> Any:
    """``safe_multiply(g, d)`` as one CuPy kernel: for CuPy arrays ``g`` and ``d`` of one
    dtype, float32 or float64 (broadcast together as CuPy broadcasts); None otherwise."""
    if type(g) is not type(d) or backend_of(d).fusion != "cuda" or g.dtype != d.dtype:
        return None
    name = g.dtype.name
    if name not in ("float32", "float64"):
        return None
    kernel = _SAFE_PRODUCT_KERNELS.get(name)
    if kernel is None:
        import cupy

        kernel = _SAFE_PRODUCT_KERNELS[name] = cupy.ElementwiseKernel(
            *safe_product_kernel_source(name), f"lf_safe_product_{name}")
    return kernel(g, d)


def _safe_mask(g, d):
    """Where ``safe_multiply`` zeroes its product: ``g == 0`` against a non-finite ``d``."""
    return logical_and.bind(equal.bind(g, 0), logical_not.bind(isfinite.bind(d)))


def _safe_masked_impl(total, g, d):
    """``total``, 0 where ``g`` is 0 and ``d`` is not finite: where :data:`safe_multiply` of
    ``g`` and ``d`` zeroes its product (``where(g == 0 & ~isfinite(d), 0, total)``). The mask
    costs four passes over the data, so where ``d`` has no non-finite element (decided on
    this call's values, as safe_multiply's impl decides; not on a GPU, where a look waits)
    and ``total`` already has the result's shape and a floating dtype, the result is
    ``total`` itself: the same values."""
    if (hasattr(total, "dtype") and dtype_kind(total.dtype) in "fc" and not looking_waits(d)
            and tuple(total.shape) == np.broadcast_shapes(tuple(total.shape), np.shape(g), np.shape(d))
            and all_finite(d)):
        return total
    return _where(_safe_mask(g, d), 0.0, total)


def _safe_masked_jvp(primals, tangents):
    total, g, d = primals
    out = safe_masked.bind(total, g, d)
    if tangents[0] is None:
        return out, None
    return out, safe_masked.bind(tangents[0], g, d)  # the mask is piecewise constant in g and d


def _safe_masked_vjp(cotangent, primals, out):
    total, g, d = primals
    if not _differentiable(total):
        return None, None, None
    return unbroadcast(safe_masked.bind(cotangent, g, d), total.shape), None, None


def _safe_multiply_jvp(primals, tangents):
    """The product rule, masked where the product is: elsewhere the derivative of ``g * d``
    (so second derivatives through a zero cotangent are kept)."""
    g, d = primals
    out = safe_multiply.bind(g, d)
    terms = [multiply.bind(t, other) for t, other in zip(tangents, (d, g)) if t is not None]
    if not terms:
        return out, None
    total = terms[0] if len(terms) == 1 else add.bind(terms[0], terms[1])
    tangent = safe_masked.bind(total, g, d)
    return out, broadcast_to.bind(tangent, shape=tuple(out.shape)) if tuple(tangent.shape) != tuple(out.shape) else tangent


def _safe_multiply_vjp(cotangent, primals, out):
    g, d = primals
    masked = safe_masked.bind(cotangent, g, d)
    return tuple(unbroadcast(safe_multiply.bind(masked, other), x.shape) if _differentiable(x) else None
                 for x, other in ((g, d), (d, g)))


_multiply, _where = multiply.impl, where.impl
# fused, the mask costs nothing: d - d is 0 exactly where d is finite
safe_multiply = elementwise_primitive("safe_multiply", _safe_multiply_impl, _spelled(
    "where(({0} == 0) & (({1} - {1}) != 0), 0, {0} * {1})", SAFE_PRODUCT_CUDA))
safe_multiply.jvp, safe_multiply.vjp = _safe_multiply_jvp, _safe_multiply_vjp
# what the rules of safe_multiply mask with: where(g == 0 and d is not finite, 0, total). Not
# fused: its impl skips the mask where d is finite (measured on the Rosenbrock Hessian, D =
# 1,000: fused, the mask computed per element made lf.jit's replay 1.8 times slower)
safe_masked = elementwise_primitive("safe_masked", _safe_masked_impl, Fusion.unfused(
    "its impl looks at d once and skips the mask where d is finite; a fused expression would compute it per element"))
safe_masked.jvp, safe_masked.vjp = _safe_masked_jvp, _safe_masked_vjp


def _multiply_sum_letters(ndims, axes):
    """einsum subscripts of ``multiply_sum``: operands right-aligned (broadcast) on the rank of
    the larger, ``axes`` (of that rank) summed."""
    rank = max(ndims)
    letters = "abcdefghijklmnopqrstuvwxyz"[:rank]
    kept = "".join(letter for k, letter in enumerate(letters) if k not in axes)
    return ",".join(letters[rank - n:] for n in ndims) + "->" + kept


def _multiply_sum_impl(g, d, *, axes, safe):
    """One einsum.  ``safe``: NaN-safe as :data:`safe_multiply`, decided on the sums (an
    infinite or NaN ``d`` makes its sum non-finite, so a finite sum had none); where a sum is
    not finite, the same einsum again on ``d`` with 0 where ``g`` is 0 and ``d`` is not finite,
    in the same order of additions.  On a GPU (CuPy) the masked products are summed, without
    waiting for the sums to look at them (:func:`device_safe_product`)."""
    xp = namespace(g, d)
    if safe and type(d) is not np.ndarray:
        product = device_safe_product(g, d)
        if product is not None:
            return xp.sum(product, axis=axes)
    einsum = extra(xp, "einsum")
    total = einsum(_multiply_sum_letters((g.ndim, d.ndim), axes), g, d)
    if safe and not all_finite(total):  # the mask has the shape of both operands together
        d = _where(_safe_mask(g, d), 0.0, d)
        total = einsum(_multiply_sum_letters((g.ndim, d.ndim), axes), g, d)
    return total


def _multiply_sum_batch(axis_size, values, batched, *, axes, safe):
    # as every elementwise primitive: a batched operand of lower rank gets 1s after its batch
    # axis, an unbatched one is right-aligned under the batch axis; the summed axes move by one
    return multiply_sum.bind(*_aligned_ranks(values, batched), axes=tuple(axis + 1 for axis in axes), safe=safe), True


def _multiply_sum_jvp(primals, tangents, *, axes, safe):
    """The product rule summed; where ``safe``, masked as :data:`safe_multiply`'s."""
    g, d = primals
    out = multiply_sum.bind(g, d, axes=axes, safe=safe)
    pairs = [(t, other) for t, other in zip(tangents, (d, g)) if t is not None]
    if not pairs:
        return out, None
    if not safe:
        terms = [multiply_sum.bind(t, other, axes=axes, safe=False) for t, other in pairs]
        return out, terms[0] if len(terms) == 1 else add.bind(*terms)
    terms = [multiply.bind(t, other) for t, other in pairs]
    total = safe_masked.bind(terms[0] if len(terms) == 1 else add.bind(*terms), g, d)
    return out, reduce_sum.bind(total, axis=axes, keepdims=False)


def _multiply_sum_vjp(cotangent, primals, out, *, axes, safe):
    g, d = primals
    rank = max(_ndim(g), _ndim(d))
    sizes = iter(tuple(cotangent.shape))
    spread = reshape.bind(cotangent, shape=tuple(1 if k in axes else next(sizes) for k in range(rank)))
    if safe:
        return _safe_multiply_vjp(spread, primals, None)
    return tuple(unbroadcast(multiply.bind(spread, other), x.shape) if _differentiable(x) else None
                 for x, other in ((g, d), (d, g)))


# ``sum(g * d, axis=axes)`` by one einsum: the products are never stored.  The reverse pass's
# product of a cotangent and a partial of its shape, summed down to the shape of a broadcast
# operand (a per-example parameter times a field): see product_reduced_to.
multiply_sum = Primitive("multiply_sum", _multiply_sum_impl, _multiply_sum_batch, _multiply_sum_jvp, _multiply_sum_vjp,
                         reads_only=True)  # an einsum into a fresh array


def product_reduced_to(g: Any, d: Any, shape: Sequence[int], safe: bool) -> Any:
    """``unbroadcast(g * d, shape)`` (NaN-safe as :data:`safe_multiply` where ``safe``) as one
    :data:`multiply_sum`, for float32 or float64 arrays ``g`` and ``d`` of one dtype and shape
    that must be summed down to ``shape``; None where that does not apply."""
    full, shape = tuple(getattr(g, "shape", ())), tuple(shape)
    if (shape == full or not _is_array(d) or tuple(d.shape) != full or not _is_array(g)
            or g.dtype != d.dtype or dtype_kind(g.dtype) != "f"
            or np.dtype(getattr(g.dtype, "_np_dtype", g.dtype)).itemsize < 4):
        return None  # float16 keeps NumPy's own sum
    extra_axes = len(full) - len(shape)
    axes = tuple(range(extra_axes)) + tuple(
        extra_axes + k for k, size in enumerate(shape) if size == 1 and full[extra_axes + k] != 1)
    total = multiply_sum.bind(g, d, axes=axes, safe=safe)
    return reshape.bind(total, shape=shape) if tuple(total.shape) != shape else total


def partial_rules(prim: Primitive, partials: Callable[..., Any], safe: bool = False) -> Primitive:
    """JVP/VJP from ``partials(primals, out) -> tuple of derivatives (None = zero)``.  A
    derivative may be a function of no argument (``lambda: ...``): computed only where a
    tangent or a cotangent needs it."""

    def jvp(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        derivatives = partials(primals, out, **params)
        total = None
        fresh = False  # whether total is an array made here (a product, a sum), nobody else's
        for tangent, derivative in zip(tangents, derivatives):
            derivative = None if tangent is None else _value(derivative)
            if derivative is None:
                continue
            if derivative is _MINUS_ONE and total is not None:  # a - b, not a + (-b): one array, same bits
                total, fresh = subtract.bind(total, tangent), True
                continue
            term = tangent if derivative is _ONE else (
                negative.bind(tangent) if derivative is _MINUS_ONE else multiply.bind(tangent, derivative))
            if total is None:
                total, fresh = term, derivative is not _ONE
            else:
                total, fresh = add_to_temporary(total, term, fresh), True
        if total is not None and tuple(getattr(total, "shape", ())) != tuple(getattr(out, "shape", ())):
            total = broadcast_to.bind(total, shape=tuple(out.shape))
        return out, total

    def vjp(g, primals, out, **params):
        return cotangents_of(g, primals, out, None, False, params)

    def vjp_wanted(g, primals, out, wanted, **params):
        return cotangents_of(g, primals, out, wanted, False, params)

    def vjp_signed(g, primals, out, wanted, **params):
        return cotangents_of(g, primals, out, wanted, True, params)

    def cotangents_of(g, primals, out, wanted, signed, params):
        """The cotangents of the positions in ``wanted`` (all for None).  ``signed``: ``g``
        may be a :class:`Negated` and the cotangents may be (a partial of -1 negates nothing
        yet: ``-(-g)`` is ``g``, ``(-g) * d`` is ``-(g * d)``, bit for bit)."""
        derivatives = partials(primals, out, **params)
        negated = type(g) is Negated
        base = g.value if negated else g
        cotangents = []
        for position, (primal, derivative) in enumerate(zip(primals, derivatives)):
            if (derivative is None or not _is_array(primal) or is_integer_dtype(primal.dtype)
                    or (wanted is not None and position not in wanted)):
                cotangents.append(None)
                continue
            derivative = _value(derivative)
            if derivative is None:
                cotangents.append(None)
                continue
            if derivative is _ONE:
                term = g
            elif derivative is _MINUS_ONE:
                term = base if negated else Negated(g) if signed else negative.bind(g)
            else:
                factor, sign = g, negated
                if negated and _smaller(derivative, base):  # (-g) * d is g * (-d), bit for bit
                    derivative, factor, sign = _negated(derivative), base, False
                if safe and not _finite_constant(derivative):  # NaN-safe against a partial that may be infinite
                    factor = materialised(factor)
                    term = product_reduced_to(factor, derivative, primal.shape, True)
                    if term is not None:
                        cotangents.append(term)
                        continue
                    term = safe_multiply.bind(factor, derivative)
                else:  # a finite constant cannot make 0 * inf: a plain product
                    if _is_array(derivative) and tuple(derivative.shape) != tuple(primal.shape):
                        term = product_reduced_to(materialised(factor), derivative, primal.shape, False)
                        if term is not None:
                            cotangents.append(term)
                            continue
                    term = multiply.bind(factor.value if sign else factor, derivative)
                    if sign:
                        term = Negated(term)
            if tuple(primal.shape) != tuple(getattr(term.value if type(term) is Negated else term, "shape", ())):
                term = unbroadcast(materialised(term), primal.shape)  # a sum of -g is not -(the sum) at 0
            cotangents.append(term)
        return tuple(cotangents)

    vjp.wanted = vjp_wanted
    vjp.signed = vjp_signed
    prim.jvp = jvp
    prim.vjp = vjp


def materialised(value: Any) -> Any:
    """``value``, computed where it is a :class:`Negated` cotangent."""
    return negative.bind(value.value) if type(value) is Negated else value


def add_to_temporary(total: Any, term: Any, owned: bool) -> Any:
    """``total + term``; into ``total``'s buffer when ``owned`` (``total`` is a temporary of the
    caller's own, which nothing else reads).  A level that records for later calls (lf.jit)
    computes it in place while it traces and records the plain sum (``add_inplace.records``):
    a replay passes buffers on by its own plan."""
    if owned:
        return add_inplace.bind(total, term)
    return add.bind(total, term)


def subtract_from_temporary(total: Any, term: Any, owned: bool) -> Any:
    """``total - term``, into ``total``'s buffer as :func:`add_to_temporary` adds."""
    if owned:
        return subtract_inplace.bind(total, term)
    return subtract.bind(total, term)


def _finite_constant(value):
    """Whether ``value`` is a finite Python number or an untraced finite 0-d array: a partial
    that cannot make ``0 * inf``, so a plain product is NaN-safe."""
    kind = type(value)
    if kind is float or kind is int:
        return math.isfinite(value)
    if kind is np.ndarray or isinstance(value, np.generic):
        return value.ndim == 0 and dtype_kind(value.dtype) in "iuf" and bool(np.isfinite(value))
    return False


def _smaller(derivative, cotangent):
    """Whether the partial ``derivative`` (a float or an array) has fewer elements than
    ``cotangent``: a negation of the product is then cheaper on the partial."""
    if type(derivative) is float:
        return True
    if not _is_array(derivative):
        return False
    return math.prod(derivative.shape) < math.prod(getattr(cotangent, "shape", ()))


def _negated(derivative):
    """``-derivative`` (a Python float, or an array by the ``negative`` primitive)."""
    return -derivative if type(derivative) is float else negative.bind(derivative)


def _value(derivative):
    """A derivative given as a function of no argument, computed now."""
    return derivative() if type(derivative) is _LAZY else derivative


_LAZY = type(lambda: None)
_ONE = object()
_MINUS_ONE = object()

_LN2 = 0.6931471805599453
_LN10 = 2.302585092994046


def _sq(x):
    return multiply.bind(x, x)


def _rsqrt(x):
    return divide.bind(1.0, sqrt.bind(x))


_UNARY = {
    negative: lambda x, out: _MINUS_ONE,
    positive: lambda x, out: _ONE,
    absolute: lambda x, out: sign.bind(x),
    sqrt: lambda x, out: divide.bind(0.5, out),
    cbrt: lambda x, out: divide.bind(1.0, multiply.bind(3.0, _sq(out))),
    square: lambda x, out: multiply.bind(2.0, x),
    reciprocal: lambda x, out: negative.bind(_sq(out)),
    exp: lambda x, out: out,
    exp2: lambda x, out: multiply.bind(out, _LN2),
    expm1: lambda x, out: add.bind(out, 1.0),
    log: lambda x, out: divide.bind(1.0, x),
    log2: lambda x, out: divide.bind(1.0, multiply.bind(x, _LN2)),
    log10: lambda x, out: divide.bind(1.0, multiply.bind(x, _LN10)),
    log1p: lambda x, out: divide.bind(1.0, add.bind(x, 1.0)),
    sin: lambda x, out: cos.bind(x),
    cos: lambda x, out: negative.bind(sin.bind(x)),
    tan: lambda x, out: add.bind(1.0, _sq(out)),
    asin: lambda x, out: _rsqrt(subtract.bind(1.0, _sq(x))),
    acos: lambda x, out: negative.bind(_rsqrt(subtract.bind(1.0, _sq(x)))),
    atan: lambda x, out: divide.bind(1.0, add.bind(1.0, _sq(x))),
    sinh: lambda x, out: cosh.bind(x),
    cosh: lambda x, out: sinh.bind(x),
    tanh: lambda x, out: subtract.bind(1.0, _sq(out)),
    asinh: lambda x, out: _rsqrt(add.bind(_sq(x), 1.0)),
    acosh: lambda x, out: _rsqrt(subtract.bind(_sq(x), 1.0)),
    atanh: lambda x, out: divide.bind(1.0, subtract.bind(1.0, _sq(x))),
    sinc: lambda x, out: _sinc_slope(x),
    numpy_i0: lambda x, out: _i0_slope(x),
    deg2rad: lambda x, out: _PI_OVER_180,
    rad2deg: lambda x, out: _180_OVER_PI,
}

for _prim, _derivative in _UNARY.items():
    partial_rules(_prim, lambda primals, out, _d=_derivative: (_d(primals[0], out),), safe=True)


def _reads(x, out):
    """A ``keeps`` of a one-argument rule: whether its derivative reads ``x`` / ``out``."""
    positions = (0,) if x else ()
    return lambda count, traced: (positions, out)


# what each derivative above reads (a reverse-mode tape keeps only that)
for _prim in (sqrt, cbrt, reciprocal, exp, exp2, expm1, tan, tanh):
    _prim.keeps = _reads(False, True)
absolute.keeps = _reads(True, True)  # a complex input's rule reads |z| too (real_valued_rules below)
for _prim in (square, log, log2, log10, log1p, sin, cos, asin, acos, atan, sinh, cosh, asinh, acosh,
              atanh, sinc, numpy_i0):
    _prim.keeps = _reads(True, False)
for _prim in (negative, positive, deg2rad, rad2deg):
    _prim.keeps = _reads(False, False)


def _indicator(mask, like):
    """1.0 where ``mask`` holds, else 0.0, in ``like``'s dtype (arithmetic, not where)."""
    if not _is_array(mask):
        return 1.0 if mask else 0.0
    return astype.bind(mask, dtype=like.dtype)


def _tie_split(x, y, out, greater_is_x):
    """d max(x, y)/dx: 1 where x wins, 0.5 at ties (JAX's convention), else 0."""
    wins = greater.bind(x, y) if greater_is_x else less.bind(x, y)
    return add.bind(_indicator(wins, out), multiply.bind(0.5, _indicator(equal.bind(x, y), out)))


def _complex_exponent_partial(x, out):
    """d/dy x**y = log(x) x**y of a complex power, with the complex logarithm of the base
    (a negative real one too; 0 at x = 0, where x**y is 0 or 1)."""
    if not _is_complex(x):
        x = astype.bind(x, dtype=out.dtype) if _is_array(x) else complex(x)
    zero = equal.bind(x, 0)
    return where.bind(zero, 0.0, multiply.bind(log.bind(where.bind(zero, 1.0, x)), out))


def _power_partials(x, y, out):
    """d/dx x**y = y x**(y - 1); d/dy x**y = log(x) x**y, taken as 0 where x <= 0 (no real
    logarithm there), with the complex logarithm of a complex base."""
    return (
        lambda: _power_partial(x, y),
        (lambda: where.bind(greater.bind(x, 0), multiply.bind(log.bind(where.bind(greater.bind(x, 0), x, 1.0)), out),
                            0.0)
         if not _is_complex(out) else _complex_exponent_partial(x, out))
        if _is_array(y) else None,
    )


_BINARY = {
    add: (lambda x, y, out: (_ONE, _ONE), False),
    add_inplace: (lambda x, y, out: (_ONE, _ONE), False),
    subtract: (lambda x, y, out: (_ONE, _MINUS_ONE), False),
    subtract_inplace: (lambda x, y, out: (_ONE, _MINUS_ONE), False),
    multiply: (lambda x, y, out: (y, x), True),
    divide: (lambda x, y, out: (lambda: divide.bind(1.0, y), lambda: negative.bind(divide.bind(out, y))), True),
    power: (_power_partials, True),
    float_power: (_power_partials, True),
    atan2: (lambda y, x, out: (
        divide.bind(x, add.bind(_sq(x), _sq(y))),
        negative.bind(divide.bind(y, add.bind(_sq(x), _sq(y)))),
    ), True),
    hypot: (lambda x, y, out: (lambda: divide.bind(x, out), lambda: divide.bind(y, out)), True),
    logaddexp: (lambda x, y, out: (lambda: exp.bind(subtract.bind(x, out)), lambda: exp.bind(subtract.bind(y, out))),
                True),
    logaddexp2: (lambda x, y, out: (lambda: exp2.bind(subtract.bind(x, out)),
                                    lambda: exp2.bind(subtract.bind(y, out))), True),
    maximum: (lambda x, y, out: (_tie_split(x, y, out, True), _tie_split(y, x, out, True)), False),
    minimum: (lambda x, y, out: (_tie_split(x, y, out, False), _tie_split(y, x, out, False)), False),
    fmax: (lambda x, y, out: (
        maximum.bind(_indicator(isnan.bind(y), out), _tie_split(x, y, out, True)),
        maximum.bind(_indicator(isnan.bind(x), out), _tie_split(y, x, out, True)),
    ), False),
    fmin: (lambda x, y, out: (
        maximum.bind(_indicator(isnan.bind(y), out), _tie_split(x, y, out, False)),
        maximum.bind(_indicator(isnan.bind(x), out), _tie_split(y, x, out, False)),
    ), False),
    copysign: (lambda x, y, out: (
        subtract.bind(multiply.bind(2.0, _indicator(equal.bind(signbit.bind(x), signbit.bind(y)), out)), 1.0),
        None,
    ), False),
    remainder: (lambda x, y, out: (_ONE, lambda: negative.bind(floor_divide.bind(x, y))), True),  # inf at y = 0
    fmod: (lambda x, y, out: (_ONE, lambda: negative.bind(trunc.bind(divide.bind(x, y)))), True),  # inf at y = 0
    nextafter: (lambda x, y, out: (_ONE, None), False),
}

for _prim, (_partials, _safe) in _BINARY.items():
    partial_rules(_prim, lambda primals, out, _p=_partials: _p(primals[0], primals[1], out), safe=_safe)


def _clip_partials(primals, out):
    """clip(x, low, high) differentiates as minimum(maximum(x, low), high): 1 inside, 0
    outside, 1/2 at each tie (JAX's convention, as ``maximum`` and ``minimum``)."""
    x, low, high = primals
    inner = maximum.bind(x, low)
    through = _tie_split(inner, high, out, False)
    return (lambda: multiply.bind(through, _tie_split(x, low, out, True)),
            lambda: multiply.bind(through, _tie_split(low, x, out, True)),
            lambda: _tie_split(high, inner, out, False))


partial_rules(clip, _clip_partials)

# what their derivatives read: add and subtract nothing (shapes only); a product the other
# factor of each factor that receives a cotangent; a quotient the divisor, and the output
# for the divisor's cotangent
add.keeps = add_inplace.keeps = subtract.keeps = subtract_inplace.keeps = nextafter.keeps = (
    lambda count, traced: ((), False))
multiply.keeps = multiply_sum.keeps = lambda count, traced: (tuple(1 - i for i in traced), False)
divide.keeps = lambda count, traced: ((1,), 1 in traced)
# x ** y reads the output for the exponent's cotangent only
power.keeps = lambda count, traced: ((0, 1), 1 in traced)
for _prim in (atan2, maximum, minimum, fmax, fmin, copysign, remainder, fmod):  # the output's dtype at most
    _prim.keeps = lambda count, traced: ((0, 1), False)


def _power_partial(x, y):
    """d/dx x**y = y x**(y - 1), and 0 where y = 0: x**0 is constant, and the formula would
    read 0 * x**-1 (NaN at x = 0) from the second order on (d/dx of x**1 = 1 x**0)."""
    if not _is_array(y):
        if y == 0:
            return None
        if y == 1:
            return _ONE
        if y == 2:  # 2 x, not 2 x**1: x**1 is a copy, a pass over the data
            return multiply.bind(y, x)
        return multiply.bind(y, power.bind(x, y - 1))
    return where.bind(equal.bind(y, 0), 0.0, multiply.bind(y, power.bind(x, subtract.bind(y, 1))))


def _where_jvp(primals, tangents):
    """Select the tangents as the values are selected (a NaN on the other side stays out)."""
    condition, x, y = primals
    out = where.bind(condition, x, y)
    _, tx, ty = tangents
    if tx is None and ty is None:
        return out, None
    zero = zeros_like.bind(out)
    tangent = where.bind(condition, zero if tx is None else tx, zero if ty is None else ty)
    return out, broadcast_to.bind(tangent, shape=tuple(out.shape))


def _where_vjp(g, primals, out):
    condition, x, y = primals
    pick_x = unbroadcast(where.bind(condition, g, 0.0), x.shape) if _differentiable(x) else None
    pick_y = unbroadcast(where.bind(condition, 0.0, g), y.shape) if _differentiable(y) else None
    return None, pick_x, pick_y


def _differentiable(value):
    return _is_array(value) and not is_integer_dtype(value.dtype)


where.jvp = _where_jvp
where.vjp = _where_vjp


# --- complex numbers: one convention, JAX's ------------------------------------------------------
# A complex number z = x + iy is a pair of reals, and a tangent of z is one too: the JVP of
# any function is its real-linear derivative.  The cotangent of z is w = a + ib, paired with
# a tangent t by the real bilinear form Re(w t) = a Re(t) - b Im(t) (not Re(conj(w) t)), so:
#   - a holomorphic f (exp, log, sin, x * y, matmul, solve, ...) has the VJP g f'(z): the
#     rules written for real numbers are right as they are, with no conjugate anywhere;
#   - a real-valued f of z (abs, angle, real, imag, var) has the VJP g h with
#     h = df/dx - i df/dy, and the JVP Re(h t);
#   - conj has the JVP conj(t) and the VJP conj(g).
# For a real loss L the gradient is then dL/dx - i dL/dy (2 conj(z) for |z|^2), what
# jax.grad returns (torch returns its conjugate).  A real input takes the real part of
# the cotangent it receives (the reverse level does that once, for every primitive).
def _is_complex(value):
    return hasattr(value, "dtype") and dtype_kind(value.dtype) == "c"


def _real_part(value):
    return real.bind(value) if _is_complex(value) else value


def _as_complex(value, like):
    """A real ``value`` in the complex dtype of ``like`` (a complex one as it is)."""
    return value if _is_complex(value) else astype.bind(value, dtype=like.dtype)


def _conj_jvp(primals, tangents):
    (tangent,) = tangents
    return conj.bind(primals[0]), None if tangent is None else conj.bind(tangent)


def _conj_vjp(g, primals, out):
    return (conj.bind(g),)


def _real_jvp(primals, tangents):
    (tangent,) = tangents
    return real.bind(primals[0]), None if tangent is None else _real_part(tangent)


def _real_vjp(g, primals, out):
    """h = 1: the cotangent of z is the real cotangent of Re(z)."""
    return (_as_complex(_real_part(g), primals[0]),)


def _imag_jvp(primals, tangents):
    (tangent,) = tangents
    out = imag.bind(primals[0])
    if tangent is None or not _is_complex(tangent):
        return out, None
    return out, imag.bind(tangent)


def _imag_vjp(g, primals, out):
    """h = -i: the cotangent of z is -i times the real cotangent of Im(z)."""
    return (multiply.bind(_as_complex(_real_part(g), primals[0]), -1j),)


conj.jvp, conj.vjp = _conj_jvp, _conj_vjp
real.jvp, real.vjp = _real_jvp, _real_vjp
imag.jvp, imag.vjp = _imag_jvp, _imag_vjp


def real_valued_rules(prim: Primitive, gradient: Callable[..., Any]) -> Primitive:
    """``prim``'s rules on a complex input, where its value is real: the JVP Re(h t), the
    VJP g h, with ``h = gradient(x, out) = df/dx - i df/dy``.  Real inputs keep the rules
    ``prim`` had."""
    real_jvp, real_vjp = prim.jvp, prim.vjp

    def jvp(primals, tangents, **params):
        x = primals[0]
        if not _is_complex(x):
            return real_jvp(primals, tangents, **params)
        out = prim.bind(x, **params)
        tangent = tangents[0]
        if tangent is None:
            return out, None
        return out, real.bind(multiply.bind(_as_complex(tangent, x), gradient(x, out)))

    def vjp(g, primals, out, **params):
        x = primals[0]
        if not _is_complex(x):
            return real_vjp(g, primals, out, **params)
        return (safe_multiply(_real_part(g), gradient(x, out)),)

    prim.jvp, prim.vjp = jvp, vjp
    return prim


def _nonzero_or_one(value):
    return where.bind(equal.bind(value, 0), 1.0, value)


# |z|: h = conj(z) / |z| (0 at z = 0, as the sign of 0 is 0)
real_valued_rules(absolute, lambda z, out: divide.bind(conj.bind(z), _nonzero_or_one(out)))


def _complex_sign_jvp(primals, tangents):
    """s = z / |z| moves by the part of the tangent across s: ds = (t - s Re(conj(s) t)) / |z|
    (0 at z = 0, where the sign is 0)."""
    (z,), (tangent,) = primals, tangents
    out = complex_sign.bind(z)
    if tangent is None:
        return out, None
    size = absolute.bind(z)
    zero = equal.bind(size, 0)
    along = real.bind(multiply.bind(conj.bind(out), tangent))
    moved = divide.bind(subtract.bind(tangent, multiply.bind(out, along)), _nonzero_or_one(size))
    return out, where.bind(zero, 0.0, moved)


def _complex_sign_vjp(g, primals, out):
    """The transpose of the JVP under Re(w t): (g - Re(g s) conj(s)) / |z|, 0 at z = 0."""
    (z,) = primals
    size = absolute.bind(z)
    along = real.bind(multiply.bind(g, out))
    cotangent = divide.bind(subtract.bind(g, multiply.bind(along, conj.bind(out))), _nonzero_or_one(size))
    return (where.bind(equal.bind(size, 0), 0.0, cotangent),)


complex_sign.jvp, complex_sign.vjp = _complex_sign_jvp, _complex_sign_vjp


def _astype_jvp(primals, tangents, *, dtype):
    out = astype.bind(primals[0], dtype=dtype)
    tangent = tangents[0]
    if tangent is None:
        return out, None
    if _is_complex(tangent) and not _is_complex(out):  # complex to real keeps the real part
        tangent = real.bind(tangent)
    return out, astype.bind(tangent, dtype=dtype)


def _astype_vjp(g, primals, out, *, dtype):
    (x,) = primals
    if is_integer_dtype(x.dtype):
        return (None,)
    if _is_complex(g) and not _is_complex(x):  # real to complex: the real input takes Re(g)
        g = real.bind(g)
    return (astype.bind(g, dtype=x.dtype),)


astype.jvp = _astype_jvp
astype.vjp = _astype_vjp

for _prim in (sign, floor, ceil, trunc, rint, around, isnan, isinf, isfinite, signbit, logical_not,
              logical_and, logical_or, logical_xor, bitwise_and, bitwise_or, bitwise_xor,
              bitwise_invert, bitwise_left_shift, bitwise_right_shift, equal, not_equal, less, less_equal,
              greater, greater_equal, floor_divide, spacing, frexp_exponent):
    _prim.differentiable = False

del _prim, _derivative, _partials, _safe


# --- series, and the slopes of NumPy's sinc and i0 (special.py's rules use the series too) -------
def _series(u, coefficients):
    """The polynomial sum(c_k u**k) by Horner's rule."""
    total = coefficients[-1]
    for coefficient in reversed(coefficients[:-1]):
        total = add.bind(multiply.bind(total, u), coefficient)
    return total


def _near(u, radius, series, formula):
    """``series(u)`` where |u| < radius, ``formula(u)`` elsewhere; each sees only its own
    inputs (0 and 1 stand in for the others), so neither makes a NaN the other side reads."""
    near = less.bind(absolute.bind(u), radius)
    return where.bind(near, series(where.bind(near, u, 0.0)), formula(where.bind(near, 1.0, u)))


_PI_OVER_180 = math.pi / 180.0
_180_OVER_PI = 180.0 / math.pi
# sinc'(x) / pi = (y cos y - sin y) / y**2 = y sum_k (-1)**(k+1) 2 (k + 1) y**(2k) / (2k + 3)! with y = pi x,
# below |y| = 0.01 to 1e-20 of the sum
_SINC_SLOPE_BELOW = 0.01
_SINC_SLOPE = tuple((-1) ** (k + 1) * 2 * (k + 1) / math.factorial(2 * k + 3) for k in range(6))
# I1(x) = x/2 sum_k (x**2 / 4)**k / (k! (k + 1)!), below |x| = 1/2 to 1e-21 of the sum
_I1_SERIES_BELOW = 0.5
_I1_SERIES = tuple(1.0 / (math.factorial(k) * math.factorial(k + 1)) for k in range(9))


def _sinc_slope(x):
    """d/dx sin(pi x) / (pi x) = pi (y cos y - sin y) / y**2 with y = pi x, by its Taylor series
    where |y| < 0.01 (the quotient cancels there, and is 0/0 at 0): smooth at 0 to every order."""
    y = multiply.bind(x, math.pi)
    return multiply.bind(math.pi, _near(
        y, _SINC_SLOPE_BELOW, lambda y: multiply.bind(y, _series(_sq(y), _SINC_SLOPE)),
        lambda y: divide.bind(subtract.bind(multiply.bind(y, cos.bind(y)), sin.bind(y)), _sq(y))))


def _plus(a, b, sign=1.0):
    """``a + sign * b`` of Python floats and arrays (a float stays a float)."""
    if type(a) is float and type(b) is float:
        return a + sign * b
    if type(b) is float and b == 0.0:
        return a
    return add.bind(a, b) if sign > 0 else subtract.bind(a, b)


def _chebyshev_with_slope(t, coefficients):
    """Cephes' Chebyshev sum at ``t`` (as NumPy's i0 evaluates it) and its derivative in
    ``t``: Clenshaw's b_k = t b_(k+1) - b_(k+2) + c_k differentiated, b'_k = b_(k+1) + t b'_(k+1)
    - b'_(k+2), the results (b_0 - b_2) / 2 and (b'_0 - b'_2) / 2."""
    current, previous, before = coefficients[0], 0.0, 0.0
    slope, slope_previous, slope_before = 0.0, 0.0, 0.0
    for coefficient in coefficients[1:]:
        before, previous = previous, current
        slope_before, slope_previous = slope_previous, slope
        scaled_slope = 0.0 if type(slope_previous) is float and slope_previous == 0.0 else multiply.bind(
            t, slope_previous)
        slope = _plus(_plus(previous, scaled_slope), slope_before, -1.0)
        current = add.bind(_plus(multiply.bind(t, previous), before, -1.0), coefficient)
    return (multiply.bind(0.5, _plus(current, before, -1.0)),
            multiply.bind(0.5, _plus(slope, slope_before, -1.0)))


def _i0_slope(x):
    """d/dx of NumPy's i0 (:data:`numpy_i0`), I1(x) to rounding, as the derivative of the
    expansions it evaluates at a = |x| (so that no other special function is needed): on
    [0, 8] d/da e**a C(a/2 - 2) = e**a (C + C'/2), beyond d/da e**a C(32/a - 2) / sqrt(a) =
    e**a / sqrt(a) (C (1 - 1/(2a)) - 32 C' / a**2), times sign(x); below |x| = 1/2 the Taylor
    series of I1 (so that every derivative is right at 0 too)."""
    size = absolute.bind(x)
    inside = less_equal.bind(size, 8.0)  # NaN goes to the far branch, and stays NaN
    near = where.bind(inside, size, 0.0)
    far = where.bind(inside, 8.0, size)
    value, slope = _chebyshev_with_slope(subtract.bind(divide.bind(near, 2.0), 2.0), I0_NEAR)
    near_slope = multiply.bind(exp.bind(near), add.bind(value, multiply.bind(slope, 0.5)))
    value, slope = _chebyshev_with_slope(subtract.bind(divide.bind(32.0, far), 2.0), I0_FAR)
    far_slope = multiply.bind(divide.bind(exp.bind(far), sqrt.bind(far)), subtract.bind(
        multiply.bind(value, subtract.bind(1.0, divide.bind(0.5, far))),
        divide.bind(multiply.bind(slope, 32.0), _sq(far))))
    central = less.bind(size, _I1_SERIES_BELOW)
    small = where.bind(central, x, 0.0)
    series = multiply.bind(multiply.bind(small, 0.5), _series(multiply.bind(_sq(small), 0.25), _I1_SERIES))
    return where.bind(central, series, multiply.bind(sign.bind(x), where.bind(inside, near_slope, far_slope)))
