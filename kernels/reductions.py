"""Reductions and scans: sum, prod, mean, var, std, max, min, arg*, any, all,
cumsum, cumprod, sort, median and the ``nan*`` forms xarray's skipna calls.

Primitives take normalised axes (a tuple, or an int for arg*/scans); the public
wrappers below accept NumPy's ``axis=None | int | tuple``.  ``nan*`` forms and the
median are compositions (mask + where + the plain reduction, or a sort), so they
batch and differentiate through their parts.
"""
from __future__ import annotations

import builtins
import math

from . import elementwise as ew
from .backend import dtype_kind, namespace, namespace_dtype, normalize_axis, numpy_namespace
from .primitive import Primitive
from .shape import expand_dims, moveaxis, reshape, squeeze as squeeze_primitive

__all__ = [
    "sum", "prod", "mean", "var", "std", "max", "min", "argmax", "argmin", "any", "all",
    "cumsum", "cumprod", "sort", "take_along_axis", "median", "quantile", "nanquantile",
    "nansum", "nanprod", "nanmean", "nanvar", "nanstd", "nanmax", "nanmin",
    "nanargmax", "nanargmin", "nancumsum", "nancumprod", "nanmedian",
]


def _shift(axes):
    return tuple(a + 1 for a in axes)


def _axis_reduction(name, function_name, **fixed):
    def impl(x, *, axis, keepdims, **params):
        xp = namespace(x)
        if params.get("dtype") is not None and xp is not numpy_namespace:
            # the standard sums numbers only: count booleans as the requested dtype
            x = xp.astype(x, namespace_dtype(xp, params.pop("dtype")))
        return getattr(xp, function_name)(x, axis=axis, keepdims=keepdims, **fixed, **params)

    def batch(axis_size, values, batched, *, axis, keepdims, **params):
        return prim.bind(values[0], axis=_shift(axis), keepdims=keepdims, **params), True

    prim = Primitive(name, impl, batch)
    return prim


reduce_sum = _axis_reduction("sum", "sum")
reduce_prod = _axis_reduction("prod", "prod")
reduce_mean = _axis_reduction("mean", "mean")
reduce_max = _axis_reduction("max", "max")
reduce_min = _axis_reduction("min", "min")
reduce_any = _axis_reduction("any", "any")
reduce_all = _axis_reduction("all", "all")
reduce_var = _axis_reduction("var", "var")
reduce_std = _axis_reduction("std", "std")


def _arg_reduction(name, function_name):
    def impl(x, *, axis, keepdims):
        return getattr(namespace(x), function_name)(x, axis=axis, keepdims=keepdims)

    def batch(axis_size, values, batched, *, axis, keepdims):
        (x,) = values
        if axis is None:
            shape = tuple(x.shape)
            out = prim.bind(reshape.bind(x, shape=(shape[0], -1)), axis=1, keepdims=False)
            if keepdims:
                out = reshape.bind(out, shape=(shape[0],) + (1,) * (len(shape) - 1))
            return out, True
        return prim.bind(x, axis=axis + 1, keepdims=keepdims), True

    prim = Primitive(name, impl, batch)
    return prim


reduce_argmax = _arg_reduction("argmax", "argmax")
reduce_argmin = _arg_reduction("argmin", "argmin")


def _scan(name, function_name):
    def impl(x, *, axis):
        return getattr(namespace(x), function_name)(x, axis=axis)

    def batch(axis_size, values, batched, *, axis):
        return prim.bind(values[0], axis=axis + 1), True

    prim = Primitive(name, impl, batch)
    return prim


scan_sum = _scan("cumsum", "cumulative_sum")
scan_prod = _scan("cumprod", "cumulative_prod")
sort_along = _scan("sort", "sort")


def _take_along_axis_impl(x, indices, *, axis):
    return namespace(x, indices).take_along_axis(x, indices, axis=axis)


def _take_along_axis_batch(axis_size, values, batched, *, axis):
    x, indices = values
    x_batched, indices_batched = batched
    if not x_batched:
        x = expand_dims.bind(x, axis=(0,))
    if not indices_batched:
        indices = expand_dims.bind(indices, axis=(0,))
    return take_along_axis.bind(x, indices, axis=axis + 1), True


take_along_axis = Primitive("take_along_axis", _take_along_axis_impl, _take_along_axis_batch)


# --- public wrappers (NumPy's axis conventions) ------------------------------------
def _is_integral(x):
    return dtype_kind(x.dtype) in "biu"


def _float(x):
    return ew.astype.bind(x, dtype=_default_float(x)) if _is_integral(x) else x


def _default_float(x):
    return namespace(x).float64 if hasattr(namespace(x), "float64") else "float64"


def _cast(x, dtype):
    return x if dtype is None else ew.astype.bind(x, dtype=dtype)


def sum(x, axis=None, keepdims=False, dtype=None):
    return reduce_sum.bind(_cast(x, dtype), axis=normalize_axis(axis, x.ndim), keepdims=keepdims)


def prod(x, axis=None, keepdims=False, dtype=None):
    return reduce_prod.bind(_cast(x, dtype), axis=normalize_axis(axis, x.ndim), keepdims=keepdims)


def mean(x, axis=None, keepdims=False, dtype=None):
    x = _float(_cast(x, dtype))
    return reduce_mean.bind(x, axis=normalize_axis(axis, x.ndim), keepdims=keepdims)


def var(x, axis=None, keepdims=False, ddof=0, dtype=None):
    x = _float(_cast(x, dtype))
    return reduce_var.bind(x, axis=normalize_axis(axis, x.ndim), keepdims=keepdims, correction=ddof)


def std(x, axis=None, keepdims=False, ddof=0, dtype=None):
    x = _float(_cast(x, dtype))
    return reduce_std.bind(x, axis=normalize_axis(axis, x.ndim), keepdims=keepdims, correction=ddof)


def max(x, axis=None, keepdims=False):
    return reduce_max.bind(x, axis=normalize_axis(axis, x.ndim), keepdims=keepdims)


def min(x, axis=None, keepdims=False):
    return reduce_min.bind(x, axis=normalize_axis(axis, x.ndim), keepdims=keepdims)


def any(x, axis=None, keepdims=False):
    return reduce_any.bind(x, axis=normalize_axis(axis, x.ndim), keepdims=keepdims)


def all(x, axis=None, keepdims=False):
    return reduce_all.bind(x, axis=normalize_axis(axis, x.ndim), keepdims=keepdims)


def argmax(x, axis=None, keepdims=False):
    axis = None if axis is None else normalize_axis(axis, x.ndim)[0]
    return reduce_argmax.bind(x, axis=axis, keepdims=keepdims)


def argmin(x, axis=None, keepdims=False):
    axis = None if axis is None else normalize_axis(axis, x.ndim)[0]
    return reduce_argmin.bind(x, axis=axis, keepdims=keepdims)


def _scan_input(x, axis):
    if axis is None:
        return reshape.bind(x, shape=(-1,)), 0
    return x, normalize_axis(axis, x.ndim)[0]


def cumsum(x, axis=None, dtype=None):
    x, axis = _scan_input(_cast(x, dtype), axis)
    if dtype_kind(x.dtype) == "b":
        x = ew.astype.bind(x, dtype=namespace(x).int64)
    return scan_sum.bind(x, axis=axis)


def cumprod(x, axis=None, dtype=None):
    x, axis = _scan_input(_cast(x, dtype), axis)
    if dtype_kind(x.dtype) == "b":
        x = ew.astype.bind(x, dtype=namespace(x).int64)
    return scan_prod.bind(x, axis=axis)


def sort(x, axis=-1):
    x, axis = _scan_input(x, axis)
    return sort_along.bind(x, axis=axis)


def _gather_last(x, axis, keepdims):
    """``x`` with the ``axis`` dims merged into one last axis; and the kept shape."""
    axes = normalize_axis(axis, x.ndim)
    kept = [a for a in range(x.ndim) if a not in axes]
    shape = tuple(x.shape)
    out_shape = tuple(1 if a in axes else shape[a] for a in range(x.ndim)) if keepdims else tuple(shape[a] for a in kept)
    merged = moveaxis(x, axes, tuple(range(len(kept), x.ndim))) if axes else x
    merged = reshape.bind(merged, shape=tuple(shape[a] for a in kept) + (-1,))
    return merged, out_shape


def median(x, axis=None, keepdims=False):
    return quantile(x, 0.5, axis, keepdims)


def nanmedian(x, axis=None, keepdims=False):
    return nanquantile(x, 0.5, axis, keepdims)


def quantile(x, q, axis=None, keepdims=False):
    """Linear-interpolation quantiles (NumPy's default method); NaN where a slice has NaN."""
    return _quantile(x, q, axis, keepdims, skip_nan=False)


def nanquantile(x, q, axis=None, keepdims=False):
    """Quantiles of the values that are not NaN (NaN where a slice has none)."""
    return _quantile(x, q, axis, keepdims, skip_nan=True)


def _quantile(x, q, axis, keepdims, skip_nan):
    import numpy as np

    from .indexing import getitem_static
    from .shape import stack

    x = _float(x)
    merged, out_shape = _gather_last(x, axis, keepdims)
    last = merged.ndim - 1
    size = merged.shape[-1]
    ordered = sort_along.bind(merged, axis=last)  # NaNs sort last
    nan = ew.isnan.bind(merged)
    levels = np.asarray(q, dtype=float)
    if skip_nan:
        count = ew.subtract.bind(size, reduce_sum.bind(nan, axis=(last,), keepdims=True, dtype=_index_dtype(x)))
        top = ew.maximum.bind(ew.subtract.bind(count, 1), 0)
    results = []
    for level in levels.reshape(-1).tolist():
        if skip_nan:
            position = ew.multiply.bind(level, ew.astype.bind(top, dtype=x.dtype))
            low_index = ew.astype.bind(ew.floor.bind(position), dtype=_index_dtype(x))
            high_index = ew.minimum.bind(ew.add.bind(low_index, 1), top)
            fraction = ew.subtract.bind(position, ew.astype.bind(low_index, dtype=x.dtype))
            low = take_along_axis.bind(ordered, low_index, axis=last)
            high = take_along_axis.bind(ordered, high_index, axis=last)
            value = ew.add.bind(low, ew.multiply.bind(fraction, ew.subtract.bind(high, low)))
            value = ew.where.bind(ew.equal.bind(count, 0), math.nan, value)
            value = reshape.bind(value, shape=tuple(value.shape[:-1]))
        else:
            position = level * (size - 1)
            low_index = math.floor(position)
            high_index = builtins.min(low_index + 1, size - 1)
            fraction = position - low_index
            low = getitem_static(ordered, (Ellipsis, low_index))
            high = getitem_static(ordered, (Ellipsis, high_index))
            value = ew.add.bind(low, ew.multiply.bind(fraction, ew.subtract.bind(high, low)))
            has_nan = reduce_any.bind(nan, axis=(last,), keepdims=False)
            value = ew.where.bind(has_nan, math.nan, value)
        results.append(reshape.bind(value, shape=out_shape))
    if levels.ndim == 0:
        return results[0]
    stacked = stack.bind(*results, axis=0)
    return reshape.bind(stacked, shape=levels.shape + tuple(out_shape))


def _index_dtype(x):
    return namespace(x).int64


def squeeze(x, axes):
    return squeeze_primitive.bind(x, axis=axes)


# --- nan* forms: mask, replace, reduce ------------------------------------------------
def _replace_nan(x, value):
    if _is_integral(x):
        return x, None
    mask = ew.isnan.bind(x)
    return ew.where.bind(mask, value, x), mask


def _count(mask, x, axis, keepdims):
    """How many values along ``axis`` are not NaN (a Python int when none can be)."""
    size = math.prod(x.shape[a] for a in normalize_axis(axis, x.ndim))
    if mask is None:
        return size
    missing = reduce_sum.bind(mask, axis=normalize_axis(axis, x.ndim), keepdims=keepdims, dtype=_index_dtype(x))
    return ew.astype.bind(ew.subtract.bind(size, missing), dtype=x.dtype)


def nansum(x, axis=None, keepdims=False, dtype=None):
    filled, _ = _replace_nan(x, 0)
    return sum(filled, axis, keepdims, dtype)


def nanprod(x, axis=None, keepdims=False, dtype=None):
    filled, _ = _replace_nan(x, 1)
    return prod(filled, axis, keepdims, dtype)


def nanmean(x, axis=None, keepdims=False, dtype=None):
    x = _float(_cast(x, dtype))
    filled, mask = _replace_nan(x, 0)
    total = sum(filled, axis, keepdims)
    return ew.divide.bind(total, _count(mask, x, axis, keepdims))


def nanvar(x, axis=None, keepdims=False, ddof=0, dtype=None):
    x = _float(_cast(x, dtype))
    filled, mask = _replace_nan(x, 0)
    count = _count(mask, x, axis, True)
    deviation = ew.subtract.bind(filled, ew.divide.bind(sum(filled, axis, True), count))
    if mask is not None:
        deviation = ew.where.bind(mask, 0, deviation)
    squares = sum(ew.multiply.bind(deviation, deviation), axis, keepdims)
    if not keepdims and mask is not None:
        count = squeeze(count, normalize_axis(axis, x.ndim))
    if ddof:
        count = ew.maximum.bind(ew.subtract.bind(count, ddof), 0)
    return ew.divide.bind(squares, count)


def nanstd(x, axis=None, keepdims=False, ddof=0, dtype=None):
    return ew.sqrt.bind(nanvar(x, axis, keepdims, ddof, dtype))


def _nan_extreme(reduce, fill):
    def reduction(x, axis=None, keepdims=False):
        filled, mask = _replace_nan(x, fill)
        out = reduce(filled, axis, keepdims)
        if mask is None:
            return out
        all_nan = all(mask, axis, keepdims)
        return ew.where.bind(all_nan, math.nan, out)

    return reduction


nanmax = _nan_extreme(max, -math.inf)
nanmin = _nan_extreme(min, math.inf)


def nanargmax(x, axis=None, keepdims=False):
    filled, _ = _replace_nan(x, -math.inf)
    return argmax(filled, axis, keepdims)


def nanargmin(x, axis=None, keepdims=False):
    filled, _ = _replace_nan(x, math.inf)
    return argmin(filled, axis, keepdims)


def nancumsum(x, axis=None, dtype=None):
    filled, _ = _replace_nan(x, 0)
    return cumsum(filled, axis, dtype)


def nancumprod(x, axis=None, dtype=None):
    filled, _ = _replace_nan(x, 1)
    return cumprod(filled, axis, dtype)
