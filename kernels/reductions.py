"""Reductions and scans: sum, prod, mean, var, std, max, min, arg*, any, all,
cumsum, cumprod, sort, median and the ``nan*`` forms xarray's skipna calls.

Primitives take normalised axes (a tuple, or an int for arg*/scans); the public
wrappers below accept NumPy's ``axis=None | int | tuple``.  ``nan*`` forms and the
median are compositions (mask + where + the plain reduction, or a sort), so they
batch and differentiate through their parts.

Derivative rules sit beside each primitive.  A reduction's rule is its partial
derivative d out / d x_i as an array of the input's shape: the JVP sums the tangent
times it, the VJP spreads the cotangent over the input and multiplies.  max/min
share the derivative equally among tied maxima (JAX's convention).  cumprod and
prod never divide by the input, so zeros in it are safe.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from . import elementwise as ew
from .backend import (any_true, device_of, dtype_kind, extra, namespace, namespace_dtype, normalize_axis,
                      numpy_namespace)
from .creation import full_like, zeros_like
from .indexing import getitem_static, index_add, split_key
from .primitive import Primitive, Traced
from .shape import (broadcast_batch, broadcast_to, differentiable_input, expand_dims, flip, linear_rules,
                    moveaxis, pad_constant, reshape, squeeze as squeeze_primitive, transpose)

__all__ = [
    "sum", "prod", "mean", "var", "std", "max", "min", "argmax", "argmin", "any", "all",
    "cumsum", "cumprod", "sort", "argsort", "take_along_axis", "median", "quantile", "nanquantile",
    "nansum", "nanprod", "nanmean", "nanvar", "nanstd", "nanmax", "nanmin",
    "nanargmax", "nanargmin", "nancumsum", "nancumprod", "nanmedian",
    "masked_sum", "masked_prod", "masked_mean", "masked_max", "masked_min", "nan_mask",
    "ptp", "average", "trapezoid", "searchsorted", "searchsorted_primitive", "digitize", "interp",
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


def _reduction_rules(prim, partials, safe=False):
    """JVP/VJP of ``out = prim(x)`` from ``partials(x, out_kept, axis=..., **params)``,
    d out / d x_i broadcastable to x (``out_kept`` keeps the reduced axes).  ``safe``:
    a zero cotangent stays zero where the partial is not finite."""

    def jvp(primals, tangents, *, axis, keepdims, **params):
        (x,), (tangent,) = primals, tangents
        out = prim.bind(x, axis=axis, keepdims=keepdims, **params)
        if tangent is None:
            return out, None
        partial = partials(x, _keep(out, x, axis, keepdims), axis=axis, **params)
        return out, reduce_sum.bind(ew.multiply.bind(tangent, partial), axis=axis, keepdims=keepdims)

    def vjp(g, primals, out, *, axis, keepdims, **params):
        (x,) = primals
        if not differentiable_input(x):
            return (None,)
        partial = partials(x, _keep(out, x, axis, keepdims), axis=axis, **params)
        spread = _unreduce(g, x, axis, keepdims)
        return (ew._safe_multiply(spread, partial) if safe else ew.multiply.bind(spread, partial),)

    prim.jvp = jvp
    prim.vjp = vjp
    return prim


reduce_sum = linear_rules(_axis_reduction("sum", "sum"),
                          lambda g, x, *, axis, keepdims, **_: _unreduce(g, x, axis, keepdims))
reduce_mean = linear_rules(_axis_reduction("mean", "mean"), lambda g, x, *, axis, keepdims, **_: ew.divide.bind(
    _unreduce(g, x, axis, keepdims), _size(x, axis)))
reduce_prod = _reduction_rules(_axis_reduction("prod", "prod"),
                               lambda x, out, *, axis, **_: _product_of_others(x, axis))
reduce_var = _reduction_rules(_axis_reduction("var", "var"), lambda x, out, *, axis, correction=0: ew.divide.bind(
    ew.multiply.bind(2.0, _deviation(x, axis)), _size(x, axis) - correction))
reduce_std = _reduction_rules(_axis_reduction("std", "std"), lambda x, out, *, axis, correction=0: ew.divide.bind(
    _deviation(x, axis), ew.multiply.bind(out, _size(x, axis) - correction)), safe=True)
reduce_max = _reduction_rules(_axis_reduction("max", "max"), lambda x, out, *, axis: _tie_share(x, out, axis))
reduce_min = _reduction_rules(_axis_reduction("min", "min"), lambda x, out, *, axis: _tie_share(x, out, axis))
reduce_any = _axis_reduction("any", "any")
reduce_all = _axis_reduction("all", "all")


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


scan_sum = linear_rules(_scan("cumsum", "cumulative_sum"), lambda g, x, *, axis: _reverse_cumsum(g, axis))


def _reverse_cumsum(g, axis):
    """Sums from each position to the end: the transpose of cumsum."""
    along = (axis,)
    return flip.bind(scan_sum.bind(flip.bind(g, axis=along), axis=axis), axis=along)


def _cumprod_jvp(primals, tangents, *, axis):
    """The product rule along the scan, dy_i = x_i dy_{i-1} + y_{i-1} dx_i."""
    (x,), (tangent,) = primals, tangents
    out = scan_prod.bind(x, axis=axis)
    if tangent is None:
        return out, None
    return out, _linear_recurrence(x, ew.multiply.bind(tangent, _shift_along(out, 1, axis, 1.0)), axis)


def _cumprod_vjp(g, primals, out, *, axis):
    """dL/dx_k = y_{k-1} s_k with s_k = g_k + x_{k+1} s_{k+1}: the same scan, reversed."""
    (x,) = primals
    if not differentiable_input(x):
        return (None,)
    along = (axis,)
    following = flip.bind(_shift_along(x, -1, axis, 0.0), axis=along)
    s = flip.bind(_linear_recurrence(following, flip.bind(g, axis=along), axis), axis=along)
    return (ew.multiply.bind(_shift_along(out, 1, axis, 1.0), s),)


scan_prod = _scan("cumprod", "cumulative_prod")
scan_prod.jvp, scan_prod.vjp = _cumprod_jvp, _cumprod_vjp

argsort_along = _scan("argsort", "argsort")  # stable; NaNs last, as in sort


def _sort_jvp(primals, tangents, *, axis):
    (x,), (tangent,) = primals, tangents
    out = sort_along.bind(x, axis=axis)
    if tangent is None:
        return out, None
    return out, take_along_axis.bind(tangent, argsort_along.bind(x, axis=axis), axis=axis)


def _sort_vjp(g, primals, out, *, axis):
    """The cotangent goes back through the inverse of the sorting permutation."""
    (x,) = primals
    if not differentiable_input(x):
        return (None,)
    inverse = argsort_along.bind(argsort_along.bind(x, axis=axis), axis=axis)
    return (take_along_axis.bind(g, inverse, axis=axis),)


sort_along = _scan("sort", "sort")
sort_along.jvp, sort_along.vjp = _sort_jvp, _sort_vjp


def _take_along_axis_impl(x, indices, *, axis):
    return extra(namespace(x, indices), "take_along_axis")(x, indices, axis=axis)


def _take_along_axis_batch(axis_size, values, batched, *, axis):
    x, indices = values
    x_batched, indices_batched = batched
    if not x_batched:
        x = expand_dims.bind(x, axis=(0,))
    if not indices_batched:
        indices = expand_dims.bind(indices, axis=(0,))
    return take_along_axis.bind(x, indices, axis=axis + 1), True


def _take_along_axis_transpose(g, x, indices, *, axis):
    """Scatter-add ``g`` back where each element was taken from (indices may repeat)."""
    shape = tuple(x.shape)
    key = tuple(indices if d == axis else np.arange(size).reshape((1,) * d + (size,) + (1,) * (len(shape) - d - 1))
                for d, size in enumerate(shape))
    template, arrays = split_key(key)
    return index_add.bind(zeros_like.bind(x), g, *arrays, template=template)


take_along_axis = linear_rules(Primitive("take_along_axis", _take_along_axis_impl, _take_along_axis_batch),
                               _take_along_axis_transpose)

for _prim in (reduce_any, reduce_all, reduce_argmax, reduce_argmin, argsort_along):
    _prim.differentiable = False
del _prim


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


def argsort(x, axis=-1):
    """Stable sorting permutation along ``axis`` (None: of the flattened array)."""
    x, axis = _scan_input(x, axis)
    return argsort_along.bind(x, axis=axis)


def _gather_last(x, axis, keepdims):
    """``x`` with the ``axis`` dims merged into one last axis; and the kept shape."""
    axes = normalize_axis(axis, x.ndim)
    shape = tuple(x.shape)
    out_shape = tuple(1 if a in axes else shape[a] for a in range(x.ndim)) if keepdims else tuple(
        shape[a] for a in range(x.ndim) if a not in axes)
    merged, _ = _axes_last(x, axes)
    return merged, out_shape


def _axes_last(x, axis):
    """``x`` with the ``axis`` dims merged into one last axis, and the function undoing it."""
    axes = normalize_axis(axis, x.ndim)
    shape = tuple(x.shape)
    order = tuple(a for a in range(x.ndim) if a not in axes) + axes
    moved = transpose.bind(x, axes=order) if order != tuple(range(x.ndim)) else x
    merged = reshape.bind(moved, shape=tuple(shape[a] for a in order[:x.ndim - len(axes)]) + (
        math.prod(shape[a] for a in axes),))

    def unmerge(y):
        y = reshape.bind(y, shape=tuple(shape[a] for a in order))
        return y if moved is x else transpose.bind(y, axes=tuple(order.index(a) for a in range(len(order))))

    return merged, unmerge


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
    """``x`` with NaNs replaced by ``value``, and the NaN mask (None when there is none:
    skipping the mask then saves whole passes over the data, and changes no result)."""
    if _is_integral(x):
        return x, None
    mask = ew.isnan.bind(x)
    if not any_true(mask):
        return x, None
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


# --- helpers of the derivative rules ---------------------------------------------------------
def _keep(value, x, axis, keepdims):
    """A reduction's ``value`` with the reduced axes of ``x`` kept (size 1)."""
    axes = normalize_axis(axis, x.ndim)
    return value if keepdims or not axes else expand_dims.bind(value, axis=axes)


def _unreduce(g, x, axis, keepdims):
    """A reduction's cotangent spread back over the shape of its input ``x``."""
    return broadcast_to.bind(_keep(g, x, axis, keepdims), shape=tuple(x.shape))


def _size(x, axis):
    """How many elements of ``x`` each reduction over ``axis`` combines."""
    return math.prod(x.shape[a] for a in normalize_axis(axis, x.ndim))


def _deviation(x, axis):
    return ew.subtract.bind(x, reduce_mean.bind(x, axis=axis, keepdims=True))


def _tie_share(x, out, axis):
    """d max/d x_i: 1/k at each of the k positions equal to the extreme, 0 elsewhere."""
    winners = ew.equal.bind(x, out)
    count = reduce_sum.bind(ew.astype.bind(winners, dtype=x.dtype), axis=axis, keepdims=True)
    return ew.where.bind(winners, ew.divide.bind(1.0, ew.maximum.bind(count, 1)), 0.0)


def _product_of_others(x, axis):
    """For each element, the product of the others it is reduced with: the products
    before it times the products after it (two scans, no division)."""
    merged, unmerge = _axes_last(x, axis)
    last = (merged.ndim - 1,)
    before = _shift_along(scan_prod.bind(merged, axis=last[0]), 1, last[0], 1.0)
    reverse = scan_prod.bind(flip.bind(merged, axis=last), axis=last[0])
    after = flip.bind(_shift_along(reverse, 1, last[0], 1.0), axis=last)
    return unmerge(ew.multiply.bind(before, after))


def _shift_along(x, count, axis, fill):
    """``x`` moved ``count`` places along ``axis`` (towards the end if positive),
    ``fill`` entering at the vacated side."""
    size = x.shape[axis]
    kept = slice(0, size - count) if count > 0 else slice(-count, size)
    width = (count, 0) if count > 0 else (0, -count)
    pad_width = tuple(width if a == axis else (0, 0) for a in range(x.ndim))
    values = tuple((fill, fill) if a == axis else (0, 0) for a in range(x.ndim))
    part = getitem_static(x, (slice(None),) * axis + (kept,))
    return pad_constant.bind(part, pad_width=pad_width, constant_values=values)


def _linear_recurrence(a, b, axis):
    """h with h_i = a_i h_{i-1} + b_i along ``axis`` (h_{-1} = 0).

    Doubling: after the round with ``step``, (a_i, b_i) compose the elements
    i - 2 step + 1 .. i; log2(n) rounds of products and sums, so zeros are safe.
    """
    size = a.shape[axis]
    step = 1
    while step < size:
        b = ew.add.bind(b, ew.multiply.bind(a, _shift_along(b, step, axis, 0.0)))
        if 2 * step < size:
            a = ew.multiply.bind(a, _shift_along(a, step, axis, 1.0))
        step *= 2
    return b


# --- where= and initial= (NumPy's masked reductions) -------------------------------------------
# Masked-out elements become the reduction's identity; ``initial`` joins each result.
def masked_sum(x, axis=None, keepdims=False, dtype=None, where=True, initial=None):
    x = _cast(x, dtype)
    out = sum(_masked(x, where, 0), axis, keepdims)
    return out if initial is None else ew.add.bind(out, _initial_like(initial, out))


def masked_prod(x, axis=None, keepdims=False, dtype=None, where=True, initial=None):
    x = _cast(x, dtype)
    out = prod(_masked(x, where, 1), axis, keepdims)
    return out if initial is None else ew.multiply.bind(out, _initial_like(initial, out))


def masked_mean(x, axis=None, keepdims=False, dtype=None, where=True):
    """The mean of the selected elements (NaN where a slice selects none)."""
    x = _float(_cast(x, dtype))
    if where is True:
        return mean(x, axis, keepdims)
    selected = ew.astype.bind(broadcast_to.bind(where, shape=tuple(x.shape)), dtype=x.dtype)
    return ew.divide.bind(sum(_masked(x, where, 0), axis, keepdims), sum(selected, axis, keepdims))


def masked_max(x, axis=None, keepdims=False, where=True, initial=None):
    return _masked_extreme(max, ew.maximum, x, axis, keepdims, where, initial, lowest=True)


def masked_min(x, axis=None, keepdims=False, where=True, initial=None):
    return _masked_extreme(min, ew.minimum, x, axis, keepdims, where, initial, lowest=False)


def _masked_extreme(reduce, combine, x, axis, keepdims, where, initial, lowest):
    if where is not True and initial is None:
        name = "maximum" if lowest else "minimum"
        raise ValueError(f"reduction operation '{name}' does not have an identity, so to use a where "
                         "mask one has to specify 'initial'")
    out = reduce(_masked(x, where, _extreme_value(x, lowest)), axis, keepdims)
    return out if initial is None else combine.bind(out, _initial_like(initial, out))


def _initial_like(initial, out):
    """A Python-number ``initial`` in the reduction's dtype (NumPy casts it: an integer
    reduction stays integer)."""
    if hasattr(initial, "dtype") or dtype_kind(out.dtype) not in "iu":
        return initial
    return int(initial)


def _masked(x, where, identity):
    if where is True:
        return x
    out = ew.where.bind(where, x, identity)
    if tuple(out.shape) != tuple(x.shape):
        raise ValueError(f"where: a mask of shape {tuple(where.shape)} does not broadcast to the "
                         f"input's shape {tuple(x.shape)}")
    return out


def _extreme_value(x, lowest):
    """The identity of max (``lowest``) or min in ``x``'s dtype."""
    xp = namespace(x)
    kind = dtype_kind(x.dtype)
    if kind == "b":
        return not lowest
    if kind in "iu":
        info = xp.iinfo(x.dtype)
        return info.min if lowest else info.max
    return -math.inf if lowest else math.inf


def nan_mask(x, where=True):
    """``where`` and not NaN: the elements a ``nan*`` reduction with ``where=`` reads."""
    if _is_integral(x):
        return where
    present = ew.logical_not.bind(ew.isnan.bind(x))
    return present if where is True else ew.logical_and.bind(where, present)


# --- compositions of reductions -------------------------------------------------------------
def ptp(x, axis=None, keepdims=False):
    """Peak to peak: max - min."""
    return ew.subtract.bind(max(x, axis, keepdims), min(x, axis, keepdims))


def average(x, axis=None, weights=None, returned=False, keepdims=False):
    """NumPy's average: sum(x w) / sum(w) along ``axis``; with ``returned``, also the sum
    of the weights, broadcast to the average's shape."""
    if weights is None:
        avg = mean(x, axis, keepdims)
        count = math.prod(x.shape) / builtins.max(math.prod(avg.shape), 1)
        return (avg, full_like.bind(avg, fill_value=count)) if returned else avg
    x = _float(x)
    if tuple(weights.shape) != tuple(x.shape):
        if axis is None:
            raise TypeError("average: axis must be specified when shapes of a and weights differ")
        axes = normalize_axis(axis, x.ndim)
        if tuple(weights.shape) != tuple(x.shape[a] for a in axes):
            raise ValueError("average: shape of weights must be consistent with shape of a along the specified axis")
        order = sorted(range(len(axes)), key=lambda k: axes[k])
        if order != list(range(len(axes))):
            weights = transpose.bind(weights, axes=tuple(order))
        weights = reshape.bind(weights, shape=tuple(x.shape[a] if a in axes else 1 for a in range(x.ndim)))
    total_weight = sum(_float(weights), axis, keepdims)
    avg = ew.divide.bind(sum(ew.multiply.bind(x, weights), axis, keepdims), total_weight)
    if not returned:
        return avg
    if tuple(total_weight.shape) != tuple(avg.shape):
        total_weight = broadcast_to.bind(total_weight, shape=tuple(avg.shape))
    return avg, ew.astype.bind(total_weight, dtype=avg.dtype)


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The trapezoidal rule along ``axis``: sum of spacing * (y_i + y_{i+1}) / 2."""
    axis = normalize_axis(axis, y.ndim)[0]
    upper = (slice(None),) * axis + (slice(1, None), Ellipsis)
    lower = (slice(None),) * axis + (slice(None, -1), Ellipsis)
    if x is None:
        spacing = dx
    elif getattr(x, "ndim", 0) == 1:
        spacing = ew.subtract.bind(getitem_static(x, (slice(1, None),)), getitem_static(x, (slice(None, -1),)))
        spacing = reshape.bind(spacing, shape=tuple(-1 if a == axis else 1 for a in range(y.ndim)))
    else:
        spacing = ew.subtract.bind(getitem_static(x, upper), getitem_static(x, lower))
    heights = ew.add.bind(getitem_static(y, upper), getitem_static(y, lower))
    return sum(ew.divide.bind(ew.multiply.bind(spacing, heights), 2.0), axis=axis)


# --- searchsorted, digitize, interp ---------------------------------------------------------------
def _searchsorted_impl(sorted_sequence, values, *, side):
    """Insertion points of ``values`` in ``sorted_sequence`` (its last axis).  Leading axes
    of the sequence, if any, are shared with ``values``: one sequence per row."""
    xp = namespace(sorted_sequence, values)
    if sorted_sequence.ndim == 1:
        if xp is not numpy_namespace and sorted_sequence.dtype != values.dtype:
            common = xp.result_type(sorted_sequence, values)  # the standard searches one dtype
            sorted_sequence, values = xp.astype(sorted_sequence, common), xp.astype(values, common)
        return xp.searchsorted(sorted_sequence, values, side=side)
    return _searchsorted_rows(xp, sorted_sequence, values, side)


def _searchsorted_rows(xp, sequences, values, side):
    """Per row, by one stable sort of the row merged with its values: a value's place in
    the merged order, minus its place among the values, counts the sequence elements
    before it.  Values go first for ``side="left"`` (ties then count as after them)."""
    lead = tuple(sequences.shape[:-1])
    size = sequences.shape[-1]
    rows = xp.reshape(values, lead + (-1,))
    count = rows.shape[-1]
    common = xp.result_type(sequences, rows)
    sequences, rows = xp.astype(sequences, common), xp.astype(rows, common)
    merged = xp.concat([rows, sequences] if side == "left" else [sequences, rows], axis=-1)
    places = xp.argsort(xp.argsort(merged, axis=-1, stable=True), axis=-1, stable=True)
    places = places[..., :count] if side == "left" else places[..., size:]
    among_values = xp.argsort(xp.argsort(rows, axis=-1, stable=True), axis=-1, stable=True)
    return xp.reshape(places - among_values, tuple(values.shape))


def _searchsorted_batch(axis_size, values, batched, *, side):
    sequences, points = values
    sequences_batched, points_batched = batched
    if not sequences_batched:
        lead = sequences.ndim - 1  # the shared leading axes come first in ``points``
        points = moveaxis(points, 0, lead) if lead else points
        out = searchsorted_primitive.bind(sequences, points, side=side)
        return (moveaxis(out, lead, 0) if lead else out), True
    if not points_batched:
        points = broadcast_batch(points, axis_size)
    return searchsorted_primitive.bind(sequences, points, side=side), True


searchsorted_primitive = Primitive("searchsorted", _searchsorted_impl, _searchsorted_batch, differentiable=False)


def searchsorted(sorted_sequence, values, side="left", sorter=None):
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if sorter is not None:
        sorted_sequence = take_along_axis.bind(sorted_sequence, sorter, axis=0)
    if not hasattr(values, "shape"):
        values = namespace(sorted_sequence).asarray(values, device=device_of(sorted_sequence))
    return searchsorted_primitive.bind(sorted_sequence, values, side=side)


def digitize(x, bins, right=False):
    """The index of the bin of each ``x``; ``bins`` increasing or decreasing (NumPy's)."""
    side = "left" if right else "right"
    if not isinstance(bins, Traced):
        steps = bins[1:] >= bins[:-1]
        xp = namespace(bins)
        increasing = bool(xp.all(steps))
        if not increasing and not bool(xp.all(bins[1:] <= bins[:-1])):
            raise ValueError("digitize: bins must be monotonically increasing or decreasing")
        if increasing:
            return searchsorted(bins, x, side)
        return ew.subtract.bind(bins.shape[0], searchsorted(flip.bind(bins, axis=(0,)), x, side))
    rising = searchsorted(bins, x, side)
    falling = ew.subtract.bind(bins.shape[0], searchsorted(flip.bind(bins, axis=(0,)), x, side))
    return ew.where.bind(ew.less.bind(getitem_static(bins, (-1,)), getitem_static(bins, (0,))), falling, rising)


def interp(x, xp, fp, left=None, right=None):
    """Piecewise-linear interpolation (NumPy's interp, in float64).

    The segment of each point is found by searchsorted (constant almost everywhere),
    then the values are gathered and combined: derivatives reach ``x``, ``fp`` and
    ``xp`` through the gathers and the arithmetic.
    """
    if xp.ndim != 1 or fp.ndim != 1 or xp.shape[0] != fp.shape[0]:
        raise ValueError("interp: xp and fp must be 1-D sequences of the same length")
    if xp.shape[0] == 0:
        raise ValueError("interp: array of sample points is empty")
    if not hasattr(x, "shape"):
        x = namespace(xp, fp).asarray(x, device=device_of(xp))
    x, xp, fp = (_as_float64(v) for v in (x, xp, fp))
    size = xp.shape[0]
    first_f, last_f = getitem_static(fp, (0,)), getitem_static(fp, (-1,))
    if size == 1:
        out = broadcast_to.bind(first_f, shape=tuple(x.shape))
    else:
        segment = ew.subtract.bind(searchsorted(xp, x, "right"), 1)
        low = ew.clip(segment, 0, size - 2)
        high = ew.add.bind(low, 1)
        low_x, high_x = _gather(xp, low), _gather(xp, high)
        low_f, high_f = _gather(fp, low), _gather(fp, high)
        slope = ew.divide.bind(ew.subtract.bind(high_f, low_f), ew.subtract.bind(high_x, low_x))
        out = ew.add.bind(ew.multiply.bind(slope, ew.subtract.bind(x, low_x)), low_f)
        out = ew.where.bind(ew.equal.bind(x, getitem_static(xp, (-1,))), last_f, out)
    out = ew.where.bind(ew.less.bind(x, getitem_static(xp, (0,))), first_f if left is None else left, out)
    return ew.where.bind(ew.greater.bind(x, getitem_static(xp, (-1,))), last_f if right is None else right, out)


def _as_float64(x):
    xp = namespace(x)
    if dtype_kind(x.dtype) == "c":
        raise NotImplementedError("interp: complex values are not supported")
    return x if x.dtype == xp.float64 else ew.astype.bind(x, dtype=xp.float64)


def _gather(values, positions):
    """``values[positions]`` for a 1-D ``values`` and positions of any shape."""
    flat = reshape.bind(positions, shape=(-1,))
    return reshape.bind(take_along_axis.bind(values, flat, axis=0), shape=tuple(positions.shape))
