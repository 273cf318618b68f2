"""Reductions, scans, sorting and searching with NumPy's conventions.

``axis=None | int | tuple``, ``keepdims``, ``dtype`` (integers averaged in float64),
``where=`` and ``initial=`` (masked-out elements become the reduction's identity, in
the same handler as the plain form), the ``nan*`` forms xarray's skipna calls (mask +
where + the plain reduction), quantiles and the median (a sort), ``ufunc.reduce`` and
``ufunc.accumulate``, ``ptp``, ``average``, ``trapezoid``, ``searchsorted``,
``digitize``, ``histogram`` / ``histogramdd``, ``sort_complex`` and the
whole-array comparisons ``allclose`` / ``array_equal`` / ``array_equiv``.  All are compositions of the primitives of
``kernels.reductions`` and ``kernels.core``, so they batch and differentiate through
their parts.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from labeled_func_kernels import core as kcore
from labeled_func_kernels import creation as kc
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import indexing as ki
from labeled_func_kernels import reductions as kr
from labeled_func_kernels import shape as ks
from labeled_func_kernels.backend import (any_true, device_of, known_true, dtype_kind, is_integer_dtype, looking_waits,
                                          namespace, namespace_dtype, normalize_axis)
from labeled_func_kernels.creation import full_like
from labeled_func_kernels.indexing import getitem_static
from labeled_func_kernels.primitive import Primitive, Traced, differentiated
from labeled_func_kernels.shape import flip, stack

from ..errors import UnsupportedOperationError
from .creation import linspace
from .dispatch import NO_VALUE, asarray, flag, given, implements, implements_method, reject
from .dynamic import fixed
from .elementwise import clip
from .indexing import constant_indices

__all__ = ["reduce", "total", "largest", "smallest", "mean", "var", "std", "quantile", "median", "average",
           "searchsorted", "nan_mask"]


# --- NumPy's axis and dtype conventions over the primitives -------------------------------------
def reduce(prim: Primitive, x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False,
           **params: Any) -> Any:
    """``prim`` (an axis reduction) over NumPy's ``axis`` (None: all axes)."""
    return prim.bind(x, axis=normalize_axis(axis, x.ndim), keepdims=keepdims, **params)


def _float(x):
    """Integers and booleans as float64, as NumPy's mean/var/std compute them."""
    if not is_integer_dtype(x.dtype):
        return x
    xp = namespace(x)
    return ew.astype.bind(x, dtype=xp.float64 if hasattr(xp, "float64") else "float64")


def _cast(x, dtype):
    return x if dtype is None else ew.astype.bind(x, dtype=dtype)


def total(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False, dtype: Any = None) -> Any:
    return reduce(kcore.reduce_sum, _cast(x, dtype), axis, keepdims)


def _product(x, axis=None, keepdims=False, dtype=None):
    return reduce(kr.reduce_prod, _cast(x, dtype), axis, keepdims)


def mean(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False, dtype: Any = None) -> Any:
    return reduce(kr.reduce_mean, _float(_cast(x, dtype)), axis, keepdims)


def var(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False, ddof: float = 0,
        dtype: Any = None) -> Any:
    x = _float(_cast(x, dtype))
    if dtype_kind(x.dtype) == "c":
        return _complex_var(x, axis, keepdims, ddof)
    return reduce(kr.reduce_var, x, axis, keepdims, correction=ddof)


def std(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False, ddof: float = 0,
        dtype: Any = None) -> Any:
    x = _float(_cast(x, dtype))
    if dtype_kind(x.dtype) == "c":
        return ew.sqrt.bind(_complex_var(x, axis, keepdims, ddof))
    return reduce(kr.reduce_std, x, axis, keepdims, correction=ddof)


def _complex_var(x, axis, keepdims, ddof):
    """mean |x - mean|^2 of complex values by NumPy's steps, so its bits: the mean a complex
    quotient by the count (of complex64 computed in complex128, as NumPy divides by an intp),
    the squares of the parts of each deviation summed, their sum divided by max(n - ddof, 0)."""
    size = kcore.reduced_size(x, normalize_axis(axis, x.ndim))
    deviation = ew.subtract.bind(x, _divide_by_count(total(x, axis, True), size))
    parts = ew.real.bind(deviation), ew.imag.bind(deviation)
    squares = ew.add.bind(ew.multiply.bind(parts[0], parts[0]), ew.multiply.bind(parts[1], parts[1]))
    return ew.divide.bind(total(squares, axis, keepdims), max(size - ddof, 0))


def _divide_by_count(total_, count):
    """``total_ / count`` as NumPy divides a sum by an intp count: a complex64 sum in
    complex128 (NumPy's promotion of complex64 with int64), cast back; else in its dtype (a
    real quotient rounded twice, through float64, is the same number)."""
    if np.dtype(getattr(total_.dtype, "_np_dtype", total_.dtype)) != np.complex64:
        return ew.divide.bind(total_, count)
    xp = namespace(total_)
    wide = ew.astype.bind(total_, dtype=xp.complex128)
    count = ew.astype.bind(count, dtype=xp.float64) if hasattr(count, "dtype") else count
    return ew.astype.bind(ew.divide.bind(wide, count), dtype=total_.dtype)


def largest(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:
    return reduce(kr.reduce_max, x, axis, keepdims)


def smallest(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:
    return reduce(kr.reduce_min, x, axis, keepdims)


def _position(prim, x, axis=None, keepdims=False):
    """argmax / argmin: one int axis, or None for the flattened array."""
    return prim.bind(x, axis=None if axis is None else normalize_axis(axis, x.ndim)[0], keepdims=keepdims)


def _along(x, axis):
    """``(x, axis)`` for a scan: the flattened array for ``axis=None``."""
    if axis is None:
        return kcore.reshape.bind(x, shape=(-1,)), 0
    return x, normalize_axis(axis, x.ndim)[0]


def _scan(prim, x, axis=None, dtype=None):
    """cumsum / cumprod; booleans count as int64, as in NumPy."""
    x, axis = _along(_cast(x, dtype), axis)
    if dtype_kind(x.dtype) == "b":
        x = ew.astype.bind(x, dtype=namespace(x).int64)
    return prim.bind(x, axis=axis)


# --- the nan* forms: mask, replace, reduce ------------------------------------------------------
def _replace_nan(x, value):
    """``x`` with NaNs replaced by ``value``, and the NaN mask (None when there is none:
    skipping the mask then saves whole passes over the data, and changes no value).  On a
    GPU the mask is applied without that look, which would wait for the device; under a
    derivative too: the masked computation is another graph, whose cotangents a reverse pass
    adds up in another order, and lf.jit records the masked one (it cannot look), so a
    gradient takes it eagerly too (the same bits jitted or not)."""
    if is_integer_dtype(x.dtype):
        return x, None
    mask = ew.isnan.bind(x)
    if not looking_waits(mask) and not differentiated((x,)) and not any_true(mask):
        return x, None
    return ew.where.bind(mask, value, x), mask


def _index_dtype(x):
    return namespace(x).int64


def _count(mask, x, axis, keepdims):
    """How many values along ``axis`` are not NaN (a Python int when none can be)."""
    size = kcore.reduced_size(x, axis)
    xp = namespace(x)
    real_dtype = xp.finfo(x.dtype).dtype if dtype_kind(x.dtype) == "c" else x.dtype
    if mask is None:  # a count of x's precision, as the one counted below: the same bits either way
        return xp.asarray(size, dtype=real_dtype, device=device_of(x))  # (a derivative's 1 / count too)
    missing = reduce(kcore.reduce_sum, mask, axis, keepdims, dtype=_index_dtype(x))
    return ew.astype.bind(ew.subtract.bind(size, missing), dtype=real_dtype)


def _nansum(x, axis=None, keepdims=False, dtype=None):
    return total(_replace_nan(x, 0)[0], axis, keepdims, dtype)


def _nanprod(x, axis=None, keepdims=False, dtype=None):
    return _product(_replace_nan(x, 1)[0], axis, keepdims, dtype)


def _nanmean(x, axis=None, keepdims=False, dtype=None):
    x = _float(_cast(x, dtype))
    filled, mask = _replace_nan(x, 0)
    return _divide_by_count(total(filled, axis, keepdims), _count(mask, x, axis, keepdims))


def _nanvar(x, axis=None, keepdims=False, ddof=0, dtype=None):
    """NumPy's nanvar: the deviations from the mean of the values that are not NaN (0 where
    NaN), squared (a complex one times its conjugate, NumPy's complex product), summed and
    divided by ``count - ddof``: NaN where that is not positive."""
    x = _float(_cast(x, dtype))
    filled, mask = _replace_nan(x, 0)
    count = _count(mask, x, axis, True)
    deviation = ew.subtract.bind(filled, _divide_by_count(total(filled, axis, True), count))
    if mask is not None:
        deviation = ew.where.bind(mask, 0, deviation)
    squares = total(_squared_size(deviation), axis, keepdims)
    if not keepdims and mask is not None:
        count = kcore.squeeze.bind(count, axis=normalize_axis(axis, x.ndim))
    if not ddof:
        return ew.divide.bind(squares, count)
    freedom = ew.subtract.bind(count, ddof)
    return ew.where.bind(ew.less_equal.bind(freedom, 0), math.nan, ew.divide.bind(squares, freedom))


def _squared_size(x):
    """|x|^2, real also for complex x: ``Re(x conj(x))``, NumPy's product (which can round
    otherwise than the squares of the parts summed)."""
    if dtype_kind(x.dtype) == "c":
        return ew.real.bind(ew.multiply.bind(x, ew.conj.bind(x)))
    return ew.multiply.bind(x, x)


def _nanstd(x, axis=None, keepdims=False, ddof=0, dtype=None):
    """sqrt of the variance; at zero variance 0 with derivatives 0 at every order (the
    subgradient convention of ``kernels.reductions.reduce_std``), not sqrt's infinite
    slope times a zero tangent (NaN)."""
    variance = _nanvar(x, axis, keepdims, ddof, dtype)
    flat = ew.equal.bind(variance, 0)
    return ew.where.bind(flat, 0.0, ew.sqrt.bind(ew.where.bind(flat, 1.0, variance)))


def _nan_extreme(extreme, skipping, fill):
    """nanmax / nanmin: of real values the ``skipping`` primitive (NumPy's fmax / fmin
    reduction, np.nanmax's own kernel: its bits on every path, a tie of signed zeros
    included); of complex values the extreme of those that are not NaN (NaNs replaced by
    ``fill``, both parts infinite, which no value passes as they compare in order), and where
    a slice is all NaN its first element, as NumPy's fmax / fmin reduction leaves it (its
    imaginary part kept)."""

    def reduction(x, axis=None, keepdims=False):
        if dtype_kind(x.dtype) != "c":
            return reduce(skipping, x, axis, keepdims)
        mask = ew.isnan.bind(x)  # masked on every path (not only where a NaN is seen), so that
        filled = ew.where.bind(mask, complex(fill, fill), x)  # lf.jit's program has the same bits
        out = extreme(filled, axis, keepdims)
        all_nan = reduce(kr.reduce_all, mask, axis, keepdims)
        return ew.where.bind(all_nan, _first_of(x, axis, keepdims), out)

    return reduction


def _first_of(x, axis, keepdims):
    """The first element of each slice along ``axis`` (None: all axes)."""
    axes = normalize_axis(axis, x.ndim)
    first = slice(0, 1) if keepdims else 0
    return getitem_static(x, tuple(first if a in axes else slice(None) for a in range(x.ndim)))


_nanmax = _nan_extreme(largest, kr.reduce_nanmax, -math.inf)
_nanmin = _nan_extreme(smallest, kr.reduce_nanmin, math.inf)


def nan_mask(x: Any, where: Any = True) -> Any:
    """``where`` and not NaN: the elements a ``nan*`` reduction with ``where=`` reads."""
    if is_integer_dtype(x.dtype):
        return where
    present = ew.logical_not.bind(ew.isnan.bind(x))
    return present if where is True else ew.logical_and.bind(where, present)


# --- where= and initial= -------------------------------------------------------------------------
def _masked(x, where, identity):
    """Masked-out elements of ``x`` replaced by the reduction's ``identity``."""
    if where is True:
        return x
    out = ew.where.bind(where, x, identity)
    if tuple(out.shape) != tuple(x.shape):
        raise ValueError(f"where: a mask of shape {tuple(where.shape)} does not broadcast to the "
                         f"input's shape {tuple(x.shape)}")
    return out


def _initial_like(initial, out):
    """A Python-number ``initial`` in the reduction's dtype (NumPy casts it: an integer
    reduction stays integer)."""
    if hasattr(initial, "dtype") or dtype_kind(out.dtype) not in "iu":
        return initial
    return int(initial)


def _extreme_value(x, lowest):
    """The identity of max (``lowest``) or min in ``x``'s dtype."""
    kind = dtype_kind(x.dtype)
    if kind == "b":
        return not lowest
    if kind in "iu":
        info = namespace(x).iinfo(x.dtype)
        return info.min if lowest else info.max
    return -math.inf if lowest else math.inf


def _masked_total(x, axis=None, keepdims=False, dtype=None, where=True, initial=None):
    out = total(_masked(_cast(x, dtype), where, 0), axis, keepdims)
    return out if initial is None else ew.add.bind(out, _initial_like(initial, out))


def _masked_product(x, axis=None, keepdims=False, dtype=None, where=True, initial=None):
    out = _product(_masked(_cast(x, dtype), where, 1), axis, keepdims)
    return out if initial is None else ew.multiply.bind(out, _initial_like(initial, out))


def _masked_mean(x, axis=None, keepdims=False, dtype=None, where=True, initial=None):
    """The mean of the selected elements (NaN where a slice selects none)."""
    x = _float(_cast(x, dtype))
    if where is True:
        return mean(x, axis, keepdims)
    selected = ew.astype.bind(kcore.broadcast_to.bind(where, shape=tuple(x.shape)), dtype=x.dtype)
    return ew.divide.bind(total(_masked(x, where, 0), axis, keepdims), total(selected, axis, keepdims))


def _masked_extreme(extreme, combine, lowest):
    def reduction(x, axis=None, keepdims=False, dtype=None, where=True, initial=None):
        if where is not True and initial is None:
            name = "maximum" if lowest else "minimum"
            raise ValueError(f"reduction operation '{name}' does not have an identity, so to use a where "
                             "mask one has to specify 'initial'")
        out = extreme(_masked(x, where, _extreme_value(x, lowest)), axis, keepdims)
        out = out if initial is None else combine.bind(out, _initial_like(initial, out))
        return _cast(out, dtype)

    return reduction


_masked_largest = _masked_extreme(largest, ew.maximum, lowest=True)
_masked_smallest = _masked_extreme(smallest, ew.minimum, lowest=False)


# --- the NumPy functions --------------------------------------------------------------------------
def _sum_like(plain, masked, skips_nan):
    """sum, prod, mean and their nan forms: the plain reduction, or with ``where=`` /
    ``initial=`` the masked one (NaNs left out of the mask for the nan forms).  NumPy's
    own signature check (before dispatch) rejects ``initial=`` for the means."""

    def handler(a, axis=None, dtype=None, out=None, keepdims=NO_VALUE, initial=NO_VALUE, where=NO_VALUE):
        a, keepdims = asarray(a), flag(keepdims)
        if not given(initial) and not given(where):
            return plain(a, axis, keepdims, dtype)
        mask = asarray(where) if given(where) else True
        if skips_nan:
            mask = nan_mask(a, mask)
        return masked(a, axis, keepdims, dtype, where=mask, initial=initial if given(initial) else None)

    return handler


for _function, _plain, _masked_form, _skips_nan in [
    (np.sum, total, _masked_total, False), (np.nansum, _nansum, _masked_total, True),
    (np.prod, _product, _masked_product, False), (np.nanprod, _nanprod, _masked_product, True),
    (np.mean, mean, _masked_mean, False), (np.nanmean, _nanmean, _masked_mean, True),
]:
    implements(_function)(_sum_like(_plain, _masked_form, _skips_nan))


def _extreme_like(plain, masked, skips_nan):
    """max, min and their nan forms (no dtype= in NumPy's signature)."""

    def handler(a, axis=None, out=None, keepdims=NO_VALUE, initial=NO_VALUE, where=NO_VALUE):
        a, keepdims = asarray(a), flag(keepdims)
        if not given(initial) and not given(where):
            return plain(a, axis, keepdims)
        mask = asarray(where) if given(where) else True
        if skips_nan:
            mask = nan_mask(a, mask)
        return masked(a, axis, keepdims, where=mask, initial=initial if given(initial) else None)

    return handler


for _functions, _plain, _masked_form, _skips_nan in [
    ((np.max, np.amax), largest, _masked_largest, False), ((np.min, np.amin), smallest, _masked_smallest, False),
    ((np.nanmax,), _nanmax, _masked_largest, True), ((np.nanmin,), _nanmin, _masked_smallest, True),
]:
    implements(*_functions)(_extreme_like(_plain, _masked_form, _skips_nan))


def _spread(plain, name):
    """var, std and their nan forms (``ddof`` or the array API's ``correction``)."""

    def handler(a, axis=None, dtype=None, out=None, ddof=0, keepdims=NO_VALUE, *, where=NO_VALUE,
                mean=NO_VALUE, correction=NO_VALUE):
        reject(name, where=where, mean=mean)
        return plain(asarray(a), axis, flag(keepdims), correction if correction is not NO_VALUE else ddof, dtype)

    return handler


for _function, _plain in [(np.var, var), (np.std, std), (np.nanvar, _nanvar), (np.nanstd, _nanstd)]:
    implements(_function)(_spread(_plain, _function.__name__))


def _logical(prim, name):
    def handler(a, axis=None, out=None, keepdims=NO_VALUE, *, where=NO_VALUE):
        reject(name, where=where)
        return reduce(prim, asarray(a), axis, flag(keepdims))

    return handler


implements(np.any)(_logical(kr.reduce_any, "any"))
implements(np.all)(_logical(kr.reduce_all, "all"))


def _arg(prim, skip_nan_fill=None):
    def handler(a, axis=None, out=None, *, keepdims=NO_VALUE):
        a = asarray(a)
        if skip_nan_fill is not None:
            a = _replace_nan(a, skip_nan_fill)[0]
        return _position(prim, a, axis, flag(keepdims))

    return handler


implements(np.argmax)(_arg(kr.argmax))
implements(np.argmin)(_arg(kr.argmin))
implements(np.nanargmax)(_arg(kr.argmax, -math.inf))
implements(np.nanargmin)(_arg(kr.argmin, math.inf))


def _scan_handler(prim, fill=None):
    def handler(a, axis=None, dtype=None, out=None):
        a = asarray(a)
        if fill is not None:
            a = _replace_nan(a, fill)[0]
        return _scan(prim, a, axis, dtype)

    return handler


implements(np.cumsum)(_scan_handler(kr.cumsum))
implements(np.cumprod)(_scan_handler(kr.cumprod))
implements(np.nancumsum)(_scan_handler(kr.cumsum, 0))
implements(np.nancumprod)(_scan_handler(kr.cumprod, 1))


def _cumulative_handler(prim, name, identity):
    """NumPy 2's cumulative_sum / cumulative_prod: cumsum / cumprod that want ``axis`` for
    more than one dimension, and with ``include_initial`` start with the identity."""

    def handler(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        x = asarray(x)
        if axis is None and x.ndim > 1:
            raise ValueError("For arrays which have more than one dimension ``axis`` argument is required.")
        result = _scan(prim, x, axis, dtype)
        if not include_initial:
            return result
        axis = normalize_axis(0 if axis is None else axis, max(x.ndim, 1))[0]
        shape = list(result.shape)
        shape[axis] = 1
        start = full_like.bind(result, fill_value=identity, shape=tuple(shape))
        return ks.concatenate.bind(start, result, axis=axis)

    handler.__name__ = name
    return handler


implements(np.cumulative_sum)(_cumulative_handler(kr.cumsum, "cumulative_sum", 0))
implements(np.cumulative_prod)(_cumulative_handler(kr.cumprod, "cumulative_prod", 1))


@implements(np.count_nonzero)
def _count_nonzero(a, axis=None, *, keepdims=False):
    nonzero = a if dtype_kind(a.dtype) == "b" else ew.not_equal.bind(a, 0)
    return total(nonzero, axis, keepdims, dtype=np.intp)


@implements(np.ptp)
def _ptp(a, axis=None, out=None, keepdims=NO_VALUE):
    """Peak to peak: max - min."""
    a, keepdims = asarray(a), flag(keepdims)
    return ew.subtract.bind(largest(a, axis, keepdims), smallest(a, axis, keepdims))


# --- ufunc.reduce and ufunc.accumulate ------------------------------------------------------------
# NumPy's own np.sum(plain, where=traced) and np.mean(plain, where=traced) arrive here, as
# does np.add.reduce(traced, axis=1).
_MASKED_REDUCE = {np.add: _masked_total, np.multiply: _masked_product, np.maximum: _masked_largest,
                  np.minimum: _masked_smallest, np.fmax: _masked_largest, np.fmin: _masked_smallest}
_SKIPS_NAN = (np.fmax, np.fmin)  # np.nanmax(plain, where=traced) is np.fmax.reduce
_REDUCE_OPTIONS = {"axis", "dtype", "keepdims", "initial", "where", "casting", "order", "subok"}


def _options(ufunc, method, kwargs, allowed):
    unknown = set(kwargs) - allowed
    if unknown:
        raise UnsupportedOperationError(f"numpy.{ufunc.__name__}.{method} with {sorted(unknown)} is not supported "
                                        "on traced arrays")


@implements_method("reduce", *_MASKED_REDUCE)
def _reduce_with_options(ufunc, inputs, kwargs):
    _options(ufunc, "reduce", kwargs, _REDUCE_OPTIONS)
    x = asarray(inputs[0])
    axis = kwargs.get("axis", 0)
    dtype = kwargs.get("dtype")
    keepdims = bool(kwargs.get("keepdims", False))
    where = kwargs.get("where", True)
    where = True if where is True else asarray(where)
    initial = kwargs["initial"] if given(kwargs.get("initial", NO_VALUE)) else None
    if ufunc in _SKIPS_NAN:
        if where is True and initial is None:  # NaN only where a whole slice is NaN
            return _cast((_nanmax if ufunc is np.fmax else _nanmin)(x, axis, keepdims), dtype)
        where = nan_mask(x, where)
    return _MASKED_REDUCE[ufunc](x, axis, keepdims, dtype, where=where, initial=initial)


@implements_method("reduce", np.logical_and, np.logical_or)
def _logical_reduce(ufunc, inputs, kwargs):
    _options(ufunc, "reduce", kwargs, {"axis", "dtype", "keepdims", "casting", "order", "subok"})
    prim = kr.reduce_all if ufunc is np.logical_and else kr.reduce_any
    out = reduce(prim, asarray(inputs[0]), kwargs.get("axis", 0), bool(kwargs.get("keepdims", False)))
    return _cast(out, kwargs.get("dtype"))


@implements_method("accumulate", np.add, np.multiply)
def _accumulate(ufunc, inputs, kwargs):
    _options(ufunc, "accumulate", kwargs, {"axis", "dtype", "casting", "order", "subok"})
    prim = kr.cumsum if ufunc is np.add else kr.cumprod
    return _scan(prim, asarray(inputs[0]), kwargs.get("axis", 0), kwargs.get("dtype"))


@implements_method("reduceat", np.add)
def _add_reduceat(ufunc, inputs, kwargs):
    """``np.add.reduceat(a, indices, axis=0)``: segment sums, ``a[i:j].sum(axis)`` for each
    index ``i`` and the next ``j`` (``a[i]`` alone where ``j <= i``; the last to the end).  The
    elements each segment takes are gathered along ``axis`` and added up with ``index_add``
    (so the derivative is a gather of the cotangent).  The indices must be the same for every
    example and known when traced; the sums agree with NumPy's to rounding (NumPy adds in
    pairs), lf.jit's with the eager ones to the bit."""
    _options(ufunc, "reduceat", kwargs, {"axis", "dtype", "casting", "order", "subok"})
    if len(inputs) != 2:
        raise TypeError(f"numpy.add.reduceat takes 2 arguments (array, indices) here, got {len(inputs)}")
    a = asarray(inputs[0])
    indices = constant_indices(asarray(inputs[1]), "numpy.add.reduceat",
                                why="the indices decide which elements each segment sums. Pass them as a constant.")
    if indices.ndim != 1:
        raise ValueError("numpy.add.reduceat: indices must be one-dimensional")
    if a.ndim == 0:
        raise TypeError("numpy.add.reduceat: the array must have at least one dimension")
    axis = normalize_axis(kwargs.get("axis", 0), a.ndim)[0]
    size = a.shape[axis]
    indices = indices.astype(np.intp)
    bad = indices[(indices < 0) | (indices >= size)]
    if bad.size:
        raise IndexError(f"index {int(bad[0])} out-of-bounds in add.reduceat [0, {size})")
    dtype = np.add.reduceat(np.zeros(1, dtype=a.dtype), [0], dtype=kwargs.get("dtype")).dtype
    ends = np.r_[indices[1:], size]
    counts = np.where(ends > indices, ends - indices, 1)
    segments = np.repeat(np.arange(indices.size), counts)
    elements = np.repeat(indices - np.r_[0, np.cumsum(counts)[:-1]], counts) + np.arange(counts.sum())
    a = _cast(a, dtype) if a.dtype != dtype else a
    lead = (slice(None),) * axis
    taken = ki.getitem.bind(a, elements, template=lead + (ki.Slot(0),))
    shape = tuple(a.shape[:axis]) + (indices.size,) + tuple(a.shape[axis + 1:])
    zeros = kc.zeros_like.bind(a, dtype=dtype, shape=shape)
    return ki.index_add.bind(zeros, taken, segments, template=lead + (ki.Slot(0),))


# --- sorting, quantiles --------------------------------------------------------------------------
def _stable(kind, stable):
    """Whether NumPy's ``kind`` / ``stable`` ask for a stable sort ('stable', 'mergesort',
    stable=True); else the order of NumPy's default kind (its quicksort; 'heapsort' is taken
    as it, a permutation that sorts as well, its ties possibly in another order)."""
    return bool(stable) or kind in ("stable", "mergesort")


@implements(np.sort)
def _sort(a, axis=-1, kind=None, order=None, *, stable=None):
    a, axis = _along(asarray(a), axis)
    return kr.sort.bind(a, axis=axis, stable=_stable(kind, stable))


@implements(np.argsort)
def _argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    """The sorting permutation along ``axis`` (None: of the flattened array), tied
    elements in the order NumPy's call with that ``kind`` gives them."""
    if order is not None:
        raise UnsupportedOperationError("numpy.argsort with order= is not supported on traced arrays")
    a, axis = _along(asarray(a), axis)
    return kr.argsort.bind(a, axis=axis, stable=_stable(kind, stable))


@implements(np.lexsort)
def _lexsort(keys, axis=-1):
    """The stable permutation sorting by the last key, ties broken by the key before it,
    and so on: stable argsorts from the first key to the last, each of the keys read in
    the order found so far.  Integer positions: no derivative."""
    if hasattr(keys, "ndim"):
        keys = asarray(keys)
        if keys.ndim == 0:
            raise TypeError("need sequence of keys with len > 0 in lexsort")
        keys = [getitem_static(keys, (i,)) for i in range(keys.shape[0])]
    keys = [asarray(k) for k in keys]
    if not keys:
        raise TypeError("need sequence of keys with len > 0 in lexsort")
    keys = [k if hasattr(k, "ndim") else np.asarray(k) for k in keys]
    shape = tuple(keys[0].shape)
    if any(tuple(k.shape) != shape for k in keys):
        raise ValueError("all keys need to be the same shape")
    if not shape:
        return namespace(*keys).asarray(0, dtype=_index_dtype(keys[0]))
    axis = normalize_axis(axis, len(shape))[0]
    order = None
    for key in keys:
        if order is None:
            order = kr.argsort.bind(key, axis=axis)
        else:
            step = kr.argsort.bind(kr.take_along_axis.bind(key, order, axis=axis), axis=axis)
            order = kr.take_along_axis.bind(order, step, axis=axis)
    return order


@implements(np.isin)
def _isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    """Whether each element of ``element`` equals some element of ``test_elements``
    (booleans of ``element``'s shape): the test elements sorted, each element looked up
    among them (memory of the two sizes, not of their product)."""
    if kind not in (None, "sort", "table"):
        raise ValueError(f"numpy.isin: invalid kind: '{kind}'. Please use None, 'sort' or 'table'.")
    element, tests = asarray(element), asarray(test_elements)
    arrays = [v for v in (element, tests) if hasattr(v, "ndim")]
    element = element if hasattr(element, "ndim") else namespace(*arrays).asarray(element)
    tests = tests if hasattr(tests, "ndim") else namespace(*arrays).asarray(tests)
    if kind == "table" and not all(dtype_kind(v.dtype) in "biu" for v in (element, tests)):
        raise ValueError("The 'table' method is only supported for boolean or integer arrays. "
                         "Please select 'sort' or None for kind.")
    count = math.prod(tests.shape)
    if count == 0:
        xp = namespace(element)
        found = full_like.bind(element, fill_value=False, shape=tuple(element.shape),
                               dtype=namespace_dtype(xp, np.dtype(np.bool_)))
    else:
        if dtype_kind(element.dtype) == "b" and dtype_kind(tests.dtype) == "b":  # the standard sorts numbers
            element, tests = (ew.astype.bind(v, dtype=namespace(v).int8) for v in (element, tests))
        flat = kcore.reshape.bind(element, shape=(math.prod(element.shape),))
        ordered = kr.sort.bind(kcore.reshape.bind(tests, shape=(count,)), axis=0)
        places = clip(kr.searchsorted.bind(ordered, flat, side="left"), None, count - 1)
        nearest = kr.take_along_axis.bind(ordered, places, axis=0)  # NaN finds no equal, as in NumPy
        found = kcore.reshape.bind(ew.equal.bind(nearest, flat), shape=tuple(element.shape))
    return ew.logical_not.bind(found) if invert else found


@implements(np.partition)
def _partition(a, kth, axis=-1, kind="introselect", order=None):
    """A sort: a valid partition for every ``kth`` (NumPy leaves the order inside the parts
    open; here it is sorted, and stable)."""
    a, axis = _along(asarray(a), axis)
    _check_kth(kth, a.shape[axis], "partition", order)
    return kr.sort.bind(a, axis=axis)


@implements(np.argpartition)
def _argpartition(a, kth, axis=-1, kind="introselect", order=None):
    """The stable sorting permutation: a valid partitioning one for every ``kth``."""
    a, axis = _along(asarray(a), axis)
    _check_kth(kth, a.shape[axis], "argpartition", order)
    return kr.argsort.bind(a, axis=axis)


def _check_kth(kth, size, name, order):
    if order is not None:
        raise UnsupportedOperationError(f"numpy.{name} with order= is not supported on traced arrays")
    if isinstance(kth, Traced):
        raise UnsupportedOperationError(f"numpy.{name}: kth must not be traced")
    for k in np.atleast_1d(np.asarray(kth)).tolist():
        if not isinstance(k, int) or isinstance(k, bool):
            raise TypeError(f"numpy.{name}: kth must be an integer or a sequence of integers, got {kth!r}")
        if not -size <= k < size:
            raise ValueError(f"numpy.{name}: kth(={k}) out of bounds ({size})")


def _gather_last(x, axis, keepdims):
    """``x`` with the ``axis`` dims merged into one last axis; and the kept shape."""
    axes = normalize_axis(axis, x.ndim)
    shape = tuple(x.shape)
    out_shape = tuple(1 if a in axes else shape[a] for a in range(x.ndim)) if keepdims else tuple(
        shape[a] for a in range(x.ndim) if a not in axes)
    merged, _ = kcore.axes_last(x, axes)
    return merged, out_shape


def quantile(x: Any, q: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False, skip_nan: bool = False,
             weak: bool | None = None, method: str = "linear") -> Any:
    """Linear-interpolation quantiles (NumPy's default method) at the static levels ``q``
    (fractions in [0, 1]): NaN where a slice has NaN, or with ``skip_nan`` the quantiles
    of the values that are not NaN (NaN where a slice has none).

    As NumPy computes them, so that dtypes and infinities agree: the virtual index
    ``(n - 1) q`` is computed in the dtype of ``q``; an integer one picks an element
    (the result keeps the data's dtype); otherwise ``a + (b - a) t`` interpolates between
    the neighbours ``a <= b``, from the upper one, ``b - (b - a)(1 - t)``, where the
    fraction ``t >= 0.5`` (so a quantile next to an infinity is that infinity, not NaN).
    The result's dtype is NumPy's promotion of the data with ``q`` (``weak``: ``q`` was a
    Python int or float, which promotes weakly; default: whether ``q`` is one).
    NumPy's other ``method``s: :func:`_quantile_by_method`.
    """
    levels = np.asarray(q)
    weak = type(q) in (int, float) if weak is None else weak
    if method != "linear":
        return _quantile_by_method(x, levels, axis, keepdims, skip_nan, weak, method)
    dtype = _quantile_dtype(x.dtype, levels, weak)
    xp = namespace(x)
    merged, out_shape = _gather_last(x, axis, keepdims)
    last = merged.ndim - 1
    size = merged.shape[-1]
    if dtype_kind(levels.dtype) in "biu":  # integer virtual indices: an element, no interpolation
        ordered = kr.sort.bind(merged, axis=last)
        results = [_pick(ordered, merged, level, size, last, skip_nan) for level in levels.reshape(-1).tolist()]
    else:
        data = _float(merged)
        ordered = kr.sort.bind(data, axis=last)  # NaNs sort last
        target = namespace_dtype(xp, dtype)
        if skip_nan:
            count = ew.subtract.bind(size, kcore.reduce_sum.bind(ew.isnan.bind(data), axis=(last,), keepdims=True,
                                                                 dtype=_index_dtype(x)))
            results = [_interpolate_present(ordered, count, level, last, target)
                       for level in levels.reshape(-1)]
        else:
            has_nan = kr.reduce_any.bind(ew.isnan.bind(data), axis=(last,), keepdims=False)
            results = [ew.where.bind(has_nan, math.nan, _interpolate(ordered, level, size, target))
                       for level in levels.reshape(-1)]
    results = [kcore.reshape.bind(value, shape=out_shape) for value in results]
    if levels.ndim == 0:
        return results[0]
    stacked = stack.bind(*results, axis=0)
    return kcore.reshape.bind(stacked, shape=levels.shape + tuple(out_shape))


# NumPy's other quantile methods (Hyndman and Fan's, and lower / higher / nearest / midpoint):
# the virtual index ``n q + alpha + q (1 - alpha - beta) - 1`` of the continuous ones...
_ALPHA_BETA = {"interpolated_inverted_cdf": (0, 1), "hazen": (0.5, 0.5), "weibull": (0, 0),
               "median_unbiased": (1 / 3.0, 1 / 3.0), "normal_unbiased": (3 / 8.0, 3 / 8.0)}
# ... and the methods that pick an element (an integer virtual index: the data's dtype)
_PICKING = ("lower", "higher", "nearest", "inverted_cdf", "closest_observation")
QUANTILE_METHODS = ("linear", "averaged_inverted_cdf", "midpoint") + tuple(_ALPHA_BETA) + _PICKING


def _quantile_by_method(x, levels, axis, keepdims, skip_nan, weak, method):
    """Quantiles by NumPy's ``method`` other than linear, step for step as NumPy's
    ``_quantile`` (same virtual indices, neighbours, weights and interpolation, in the same
    dtypes): for each level, the virtual index from the number of values ``n`` (with
    ``skip_nan``, per slice: the values that are not NaN, as NumPy's nan* forms take each
    slice); an element of the sorted slices for the picking methods, else the
    interpolation between the neighbours of the virtual index."""
    merged, out_shape = _gather_last(x, axis, keepdims)
    last = merged.ndim - 1
    size = merged.shape[-1]
    picking = method in _PICKING
    data = merged if picking else _float(merged)
    target = namespace_dtype(namespace(x), merged.dtype if picking else _quantile_dtype(x.dtype, levels, weak))
    ordered = kr.sort.bind(data, axis=last)  # NaNs sort last
    nan = ew.isnan.bind(data) if not is_integer_dtype(data.dtype) else None
    if skip_nan and nan is not None:
        count = ew.subtract.bind(size, kcore.reduce_sum.bind(nan, axis=(last,), keepdims=True,
                                                             dtype=_index_dtype(merged)))
        n = ew.astype.bind(count, dtype=namespace_dtype(namespace(x), levels.dtype))
    else:
        count, n = None, size
    results = []
    for level in levels.reshape(-1):
        if picking:
            index = _picked_index(method, n, level)
            if count is None:  # one number of values: a static position
                value = getitem_static(ordered, (Ellipsis, int(index)))
            else:
                index = ew.minimum.bind(ew.maximum.bind(index, 0), ew.maximum.bind(ew.subtract.bind(count, 1), 0))
                value = kr.take_along_axis.bind(ordered, index, axis=last)
        else:
            virtual = _virtual_index(method, n, level)
            low_index, high_index, fraction = _neighbours(method, n, virtual, level.dtype)
            complement = level.dtype.type(1) - fraction if count is None else ew.subtract.bind(1.0, fraction)
            if count is None:
                low = getitem_static(ordered, (Ellipsis, int(low_index)))
                high = getitem_static(ordered, (Ellipsis, int(high_index)))
                value = _lerp(low, high, float(fraction), float(complement), bool(fraction >= 0.5), target)
            else:  # index -1: the last value that is not NaN
                last_present = ew.maximum.bind(ew.subtract.bind(count, 1), 0)
                low_index, high_index = (ew.where.bind(ew.less.bind(i, 0), last_present, i)
                                         for i in (low_index, high_index))
                low = kr.take_along_axis.bind(ordered, low_index, axis=last)
                high = kr.take_along_axis.bind(ordered, high_index, axis=last)
                value = _lerp(low, high, fraction, complement, ew.greater_equal.bind(fraction, 0.5), target)
        if count is not None:
            value = ew.where.bind(ew.equal.bind(count, 0), math.nan, value)
            value = kcore.reshape.bind(value, shape=tuple(value.shape[:-1]))
        elif nan is not None:
            value = ew.where.bind(kr.reduce_any.bind(nan, axis=(last,), keepdims=False), math.nan, value)
        results.append(kcore.reshape.bind(value, shape=out_shape))
    if levels.ndim == 0:
        return results[0]
    stacked = stack.bind(*results, axis=0)
    return kcore.reshape.bind(stacked, shape=levels.shape + tuple(out_shape))


def _virtual_index(method, n, q):
    """NumPy's virtual index of a continuous ``method`` for ``n`` values (a Python int, or
    an array of the levels' dtype) at level ``q`` (a NumPy scalar), in the same operations."""
    if method in _ALPHA_BETA:
        alpha, beta = _ALPHA_BETA[method]
        return n * q + (alpha + q * (1 - alpha - beta)) - 1
    if method == "averaged_inverted_cdf":
        return n * q - 1
    scaled = (n - 1) * q  # midpoint
    return 0.5 * (np.floor(scaled) + np.ceil(scaled))


def _picked_index(method, n, q):
    """NumPy's integer index of a picking ``method`` (see :func:`_virtual_index`)."""
    if method in ("lower", "higher", "nearest"):
        rounded = {"lower": np.floor, "higher": np.ceil, "nearest": np.rint}[method]((n - 1) * q)
    else:  # inverted_cdf, closest_observation: to the boundaries of the steps
        index = n * q - 1 if method == "inverted_cdf" else n * q - 1 - 0.5
        previous = np.floor(index)
        gamma = index - previous
        lower = gamma == 0
        if method == "closest_observation":
            lower = np.logical_and(lower, np.remainder(previous, 2) == 1)
        rounded = np.maximum(np.where(lower, previous, previous + 1), 0)
    return rounded.astype(np.intp)


def _neighbours(method, n, virtual, dtype):
    """The neighbours of ``virtual`` (NumPy's ``_get_indexes``: the last value from index -1
    at or past the end, the first before the start) and the weight of the upper one
    (``_get_gamma``, with the method's correction), in the levels' ``dtype``."""
    previous = np.floor(virtual)
    following = previous + 1
    above = virtual >= n - 1
    below = virtual < 0
    previous = np.where(above, -1, np.where(below, 0, previous))
    following = np.where(above, -1, np.where(below, 0, following))
    gamma = virtual - previous
    if method == "averaged_inverted_cdf":
        gamma = np.where(gamma == 0, 0.5, 1.0)
    elif method == "midpoint":
        gamma = np.where(np.remainder(virtual, 1) == 0, 0.0, 0.5)
    gamma = gamma.astype(dtype)
    if isinstance(n, int):  # one number of values: static positions
        return int(previous), int(following), dtype.type(gamma)
    return previous.astype(np.intp), following.astype(np.intp), gamma


def _quantile_dtype(dtype, levels, weak):
    """NumPy's result dtype for data of ``dtype`` at ``levels`` (see :func:`quantile`)."""
    data = np.dtype(getattr(dtype, "_np_dtype", dtype))
    if levels.dtype.kind in "biu":
        return data
    return np.result_type(data, 1.0) if weak else np.result_type(data, levels.dtype)


def _lerp(low, high, fraction, complement, upper, target):
    """NumPy's interpolation between ``low <= high`` in dtype ``target``: ``low + (high -
    low) fraction``, or where ``upper`` (the fraction is at least one half) ``high - (high
    - low) complement``.  ``complement`` is 1 - fraction, computed in the levels' dtype;
    ``fraction``, ``complement`` and ``upper`` are Python numbers or arrays."""
    difference = ew.subtract.bind(high, low)  # in the data's dtype, as NumPy
    if low.dtype != target:
        low, high, difference = (ew.astype.bind(v, dtype=target) for v in (low, high, difference))
    if upper is True or upper is False:
        if upper:
            return ew.subtract.bind(high, ew.multiply.bind(difference, complement))
        return ew.add.bind(low, ew.multiply.bind(difference, fraction))
    if fraction.dtype != target:
        fraction, complement = ew.astype.bind(fraction, dtype=target), ew.astype.bind(complement, dtype=target)
    return ew.where.bind(upper, ew.subtract.bind(high, ew.multiply.bind(difference, complement)),
                         ew.add.bind(low, ew.multiply.bind(difference, fraction)))


def _interpolate(ordered, level, size, target):
    """One quantile of the sorted slices ``ordered`` (``size`` values each) at ``level``
    (a NumPy scalar: the virtual index takes its dtype)."""
    virtual = (size - 1) * level
    if virtual >= size - 1:  # the last value; NumPy measures the fraction from index -1
        low_index = high_index = size - 1
        floor = -1
    else:
        floor = math.floor(virtual)
        low_index, high_index = floor, floor + 1
    fraction = virtual - level.dtype.type(floor)
    complement = level.dtype.type(1) - fraction
    low = getitem_static(ordered, (Ellipsis, low_index))
    high = getitem_static(ordered, (Ellipsis, high_index))
    return _lerp(low, high, float(fraction), float(complement), bool(fraction >= 0.5), target)


def _interpolate_present(ordered, count, level, last, target):
    """One quantile of the values that are not NaN (the first ``count`` of each sorted
    slice), as NumPy's nan* forms compute it slice by slice; NaN where there are none."""
    xp = namespace(ordered)
    levels_dtype = namespace_dtype(xp, level.dtype)
    index_dtype = count.dtype
    top = ew.subtract.bind(count, 1)
    virtual = ew.multiply.bind(ew.astype.bind(ew.maximum.bind(top, 0), dtype=levels_dtype), level.item())
    above = ew.greater_equal.bind(virtual, ew.astype.bind(top, dtype=levels_dtype))
    floor = ew.where.bind(above, -1, ew.astype.bind(ew.floor.bind(virtual), dtype=index_dtype))
    last_present = ew.maximum.bind(top, 0)
    low_index = ew.where.bind(above, last_present, floor)
    high_index = ew.where.bind(above, last_present, ew.minimum.bind(ew.add.bind(floor, 1), last_present))
    fraction = ew.subtract.bind(virtual, ew.astype.bind(floor, dtype=levels_dtype))
    complement = ew.subtract.bind(1.0, fraction)
    low = kr.take_along_axis.bind(ordered, low_index, axis=last)
    high = kr.take_along_axis.bind(ordered, high_index, axis=last)
    value = _lerp(low, high, fraction, complement, ew.greater_equal.bind(fraction, 0.5), target)
    value = ew.where.bind(ew.equal.bind(count, 0), math.nan, value)
    return kcore.reshape.bind(value, shape=tuple(value.shape[:-1]))


def _pick(ordered, merged, level, size, last, skip_nan):
    """The quantile at an integer virtual index ``(n - 1) * level`` (``level`` 0 or 1): an
    element of the sorted slices, in the data's dtype; NaN as in :func:`quantile`."""
    if is_integer_dtype(merged.dtype):
        return getitem_static(ordered, (Ellipsis, (size - 1) * level))
    nan = ew.isnan.bind(merged)
    if not skip_nan:
        value = getitem_static(ordered, (Ellipsis, (size - 1) * level))
        return ew.where.bind(kr.reduce_any.bind(nan, axis=(last,), keepdims=False), math.nan, value)
    count = ew.subtract.bind(size, kcore.reduce_sum.bind(nan, axis=(last,), keepdims=True, dtype=_index_dtype(merged)))
    index = ew.multiply.bind(ew.maximum.bind(ew.subtract.bind(count, 1), 0), level)
    value = kr.take_along_axis.bind(ordered, index, axis=last)
    value = ew.where.bind(ew.equal.bind(count, 0), math.nan, value)
    return kcore.reshape.bind(value, shape=tuple(value.shape[:-1]))


def median(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False, skip_nan: bool = False) -> Any:
    """NumPy's median: the middle value of each sorted slice, or the mean of the two
    middle values, ``(a + b) / 2`` (so that, unlike the 0.5 quantile, the median next to
    an infinity is that infinity); NaN as in :func:`quantile`."""
    x = _float(x)
    merged, out_shape = _gather_last(x, axis, keepdims)
    last = merged.ndim - 1
    size = merged.shape[-1]
    ordered = kr.sort.bind(merged, axis=last)
    nan = ew.isnan.bind(merged)
    if skip_nan:
        count = ew.subtract.bind(size, kcore.reduce_sum.bind(nan, axis=(last,), keepdims=True,
                                                             dtype=_index_dtype(x)))
        top = ew.maximum.bind(ew.subtract.bind(count, 1), 0)
        low = kr.take_along_axis.bind(ordered, ew.floor_divide.bind(top, 2), axis=last)
        high = kr.take_along_axis.bind(ordered, ew.floor_divide.bind(ew.add.bind(top, 1), 2), axis=last)
        odd = ew.equal.bind(ew.remainder.bind(count, 2), 1)
        value = ew.where.bind(odd, _mean_of_one(low), _mean_of_two(low, high))
        value = ew.where.bind(ew.equal.bind(count, 0), math.nan, value)
        value = kcore.reshape.bind(value, shape=tuple(value.shape[:-1]))
    else:
        low = getitem_static(ordered, (Ellipsis, (size - 1) // 2))
        value = _mean_of_one(low) if size % 2 else _mean_of_two(low, getitem_static(ordered, (Ellipsis, size // 2)))
        value = ew.where.bind(kr.reduce_any.bind(nan, axis=(last,), keepdims=False), math.nan, value)
    return kcore.reshape.bind(value, shape=out_shape)


def _mean_of_one(a):
    """``np.mean`` of one value, as NumPy's median takes it: its sum starts at +0.0, so -0.0
    becomes 0.0 (every other value stays as it is)."""
    return ew.add.bind(a, 0.0)


def _mean_of_two(a, b):
    """``np.mean`` of two values: their sum (from +0.0: of -0.0 and -0.0 it is 0.0) halved
    (float16 summed in float32, as NumPy)."""
    if dtype_kind(a.dtype) == "f" and np.dtype(getattr(a.dtype, "_np_dtype", a.dtype)).itemsize == 2:
        xp = namespace(a)
        wide = namespace_dtype(xp, np.float32)
        total_ = ew.add.bind(ew.add.bind(ew.astype.bind(a, dtype=wide), ew.astype.bind(b, dtype=wide)), 0.0)
        return ew.astype.bind(ew.divide.bind(total_, 2.0), dtype=a.dtype)
    return ew.divide.bind(ew.add.bind(ew.add.bind(a, b), 0.0), 2.0)


def _median_handler(skip_nan):
    def handler(a, axis=None, out=None, overwrite_input=False, keepdims=False):
        return median(asarray(a), axis, keepdims, skip_nan)

    return handler


implements(np.median)(_median_handler(False))
implements(np.nanmedian)(_median_handler(True))


def _quantile_handler(scale, skip_nan):
    def handler(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None, interpolation=None):
        name = ("nan" if skip_nan else "") + ("percentile" if scale == 100 else "quantile")
        if interpolation is not None:  # NumPy's deprecated spelling of method
            method = interpolation
        if method not in QUANTILE_METHODS:
            raise ValueError(f"{method!r} is not a valid method. Use one of: {QUANTILE_METHODS}")
        if weights is not None:
            raise UnsupportedOperationError(f"numpy.{name}: weights= is not supported on traced arrays")
        if isinstance(q, Traced):
            raise UnsupportedOperationError(f"numpy.{name}: the quantile levels q must not be traced")
        # NumPy's levels: q / 100 for percentiles (a float dtype), q as given for quantiles
        levels = np.asarray(np.true_divide(q, 100) if scale == 100 else q)
        if levels.dtype.kind not in "biuf":
            raise TypeError(f"numpy.{name}: the levels q must be real numbers, got dtype {levels.dtype}")
        if not (levels.size == 0 or bool(((levels >= 0) & (levels <= 1)).all())):
            raise ValueError("Percentiles must be in the range [0, 100]" if scale == 100
                             else "Quantiles must be in the range [0, 1]")
        return quantile(asarray(a), levels, axis, keepdims, skip_nan, weak=type(q) in (int, float), method=method)

    return handler


implements(np.quantile)(_quantile_handler(1, False))
implements(np.nanquantile)(_quantile_handler(1, True))
implements(np.percentile)(_quantile_handler(100, False))
implements(np.nanpercentile)(_quantile_handler(100, True))


# --- averages and integrals -------------------------------------------------------------------------
def average(x: Any, axis: int | Sequence[int] | None = None, weights: Any = None, returned: bool = False,
            keepdims: bool = False) -> Any:
    """NumPy's average: sum(x w) / sum(w) along ``axis``; with ``returned``, also the sum
    of the weights, broadcast to the average's shape."""
    if weights is None:
        avg = mean(x, axis, keepdims)
        count = math.prod(x.shape) / (math.prod(avg.shape) or 1)
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
            weights = kcore.transpose.bind(weights, axes=tuple(order))
        weights = kcore.reshape.bind(weights, shape=tuple(x.shape[a] if a in axes else 1 for a in range(x.ndim)))
    total_weight = total(_float(weights), axis, keepdims)
    avg = ew.divide.bind(total(ew.multiply.bind(x, weights), axis, keepdims), total_weight)
    if not returned:
        return avg
    if tuple(total_weight.shape) != tuple(avg.shape):
        total_weight = kcore.broadcast_to.bind(total_weight, shape=tuple(avg.shape))
    return avg, ew.astype.bind(total_weight, dtype=avg.dtype)


@implements(np.average)
def _average(a, axis=None, weights=None, returned=False, *, keepdims=NO_VALUE):
    weights = None if weights is None else asarray(weights)
    return average(asarray(a), axis, weights, returned, flag(keepdims))


@implements(np.trapezoid, *([np.trapz] if hasattr(np, "trapz") else []))
def _trapezoid(y, x=None, dx=1.0, axis=-1):
    """The trapezoidal rule along ``axis``: sum of spacing * (y_i + y_{i+1}) / 2."""
    y = asarray(y)
    x = None if x is None else asarray(x)
    axis = normalize_axis(axis, y.ndim)[0]
    upper = (slice(None),) * axis + (slice(1, None), Ellipsis)
    lower = (slice(None),) * axis + (slice(None, -1), Ellipsis)
    if x is None:
        spacing = dx
    elif getattr(x, "ndim", 0) == 1:
        spacing = ew.subtract.bind(getitem_static(x, (slice(1, None),)), getitem_static(x, (slice(None, -1),)))
        spacing = kcore.reshape.bind(spacing, shape=tuple(-1 if a == axis else 1 for a in range(y.ndim)))
    else:
        spacing = ew.subtract.bind(getitem_static(x, upper), getitem_static(x, lower))
    heights = ew.add.bind(getitem_static(y, upper), getitem_static(y, lower))
    return total(ew.divide.bind(ew.multiply.bind(spacing, heights), 2.0), axis=axis)


# --- searching -------------------------------------------------------------------------------------
def searchsorted(sorted_sequence: Any, values: Any, side: str = "left", sorter: Any = None) -> Any:
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if sorter is not None:
        sorted_sequence = kr.take_along_axis.bind(sorted_sequence, sorter, axis=0)
    if not hasattr(values, "shape"):
        values = namespace(sorted_sequence).asarray(values, device=device_of(sorted_sequence))
    return kr.searchsorted.bind(sorted_sequence, values, side=side)


@implements(np.searchsorted)
def _searchsorted(a, v, side="left", sorter=None):
    return searchsorted(asarray(a), asarray(v), side, None if sorter is None else asarray(sorter))


@implements(np.digitize)
def _digitize(x, bins, right=False):
    """The index of the bin of each ``x``; ``bins`` increasing or decreasing (NumPy's)."""
    x, bins = asarray(x), asarray(bins)
    if bins.ndim != 1:
        raise ValueError("digitize: bins must be 1-dimensional")
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


@implements(np.histogram)
def _histogram(a, bins=10, range=None, density=None, weights=None):
    """Counts (or summed weights) in bins: ``[e_i, e_i+1)``, the last bin closed.

    With a number of bins the edges span the data (or ``range``): traced, so derivatives
    reach them and, through the bin widths, the density.  The counts themselves are
    piecewise constant in ``a``; summed weights are linear in the weights.
    """
    a = asarray(a)
    extra = []
    if weights is not None:
        weights = asarray(weights)
        if np.shape(weights) != np.shape(a):
            raise ValueError("numpy.histogram: weights should have the same shape as a.")
        extra.append(kcore.reshape.bind(weights, shape=(-1,)))
    a = kcore.reshape.bind(a, shape=(-1,))
    edges = _bin_edges(a, bins, range, weights, "histogram")
    count = edges.shape[-1] - 1
    if weights is not None and np.ndim(bins) == 1:
        counts = _weights_between(a, extra[0], edges)
    else:
        last = getitem_static(edges, (-1,))
        place = ew.subtract.bind(searchsorted(edges, a, "right"), 1)
        place = ew.where.bind(ew.equal.bind(a, last), count - 1, place)  # the last bin holds its right edge
        counts = kr.bincount.bind(place, *extra, length=count)
        if weights is not None and counts.dtype != weights.dtype:  # NumPy sums in float64, then casts
            counts = ew.astype.bind(counts, dtype=weights.dtype)
    if density:
        widths = _as_float64(ew.subtract.bind(getitem_static(edges, (slice(1, None),)),
                                              getitem_static(edges, (slice(None, -1),))))
        counts = ew.divide.bind(ew.divide.bind(counts, widths), total(counts))
    return counts, edges


def _weights_between(a, weights, edges):
    """The weights summed per bin as NumPy does for given edges, in the weights' dtype: the
    running sum of the weights in the order of the values, read where each edge falls."""
    order = kr.argsort.bind(a, axis=0)
    ordered = kr.take_along_axis.bind(a, order, axis=0)
    running = kr.cumsum.bind(kr.take_along_axis.bind(weights, order, axis=0), axis=0)
    running = ks.pad.bind(running, pad_width=((1, 0),), constant_values=((0, 0),))
    places = ks.concatenate.bind(searchsorted(ordered, getitem_static(edges, (slice(None, -1),)), "left"),
                                 searchsorted(ordered, getitem_static(edges, (slice(-1, None),)), "right"), axis=0)
    at_edges = kr.take_along_axis.bind(running, places, axis=0)
    return ew.subtract.bind(getitem_static(at_edges, (slice(1, None),)), getitem_static(at_edges, (slice(None, -1),)))


@implements(np.histogram_bin_edges)
def _histogram_bin_edges(a, bins=10, range=None, weights=None):
    return _bin_edges(kcore.reshape.bind(asarray(a), shape=(-1,)), bins, range, weights, "histogram_bin_edges")


def _bin_edges(a, bins, range, weights, name):
    """NumPy's bin edges: ``bins`` + 1 evenly spaced from the smallest to the largest value
    (or over ``range``), or the given edges.  A string (``"auto"``...) picks the number of
    bins from the values: fixed by the primal under grad/jvp, a DynamicShapeError under vmap."""
    if isinstance(bins, str):
        values = fixed(a, f"numpy.{name} with bins={bins!r}")
        given = None if weights is None else fixed(weights, f"numpy.{name} (weights)")
        bins = len(np.histogram_bin_edges(values, bins, range, given)) - 1
    if np.ndim(bins) == 0:
        try:
            count = operator.index(bins)
        except TypeError:
            raise TypeError(f"numpy.{name}: `bins` must be an integer, a string, or an array") from None
        if count < 1:
            raise ValueError(f"numpy.{name}: `bins` must be positive, when an integer")
        first, last = _outer_edges(a, range)
        bin_type = np.result_type(*[_numpy_dtype_or_number(v) for v in (first, last)], _numpy_dtype_or_number(a))
        if bin_type.kind in "biu":
            bin_type = np.dtype(np.float64)
        xp = namespace(a)
        if not hasattr(first, "shape") and not hasattr(last, "shape"):
            # numbers (a range): in the library of ``a``, in the type NumPy's linspace computes them in
            computed = namespace_dtype(xp, np.result_type(np.result_type(first, last), 1.0))
            first, last = xp.asarray(first, dtype=computed), xp.asarray(last, dtype=computed)
        return linspace(first, last, count + 1, dtype=namespace_dtype(xp, bin_type))
    edges = bins if isinstance(bins, Traced) or hasattr(bins, "shape") else namespace(a).asarray(bins)
    if edges.ndim != 1:
        raise ValueError(f"numpy.{name}: `bins` must be 1d, when an array")
    if not isinstance(edges, Traced) and any_true(edges[:-1] > edges[1:]):
        raise ValueError(f"numpy.{name}: `bins` must increase monotonically, when an array")
    return edges


def _outer_edges(a, range):
    """The first and last edge: ``range``, or the extremes of ``a`` (0 and 1 when it is
    empty); an empty span widened by 0.5 on each side, as NumPy does."""
    if range is not None:
        first, last = range
        if not isinstance(first, Traced) and not isinstance(last, Traced):
            if first > last:
                raise ValueError(f"numpy.histogram: max must be larger than min in range parameter ({first}, {last}).")
            if not (np.isfinite(first) and np.isfinite(last)):
                raise ValueError(f"numpy.histogram: supplied range of [{first}, {last}] is not finite")

    elif a.shape[0] == 0:
        return 0, 1
    else:
        first, last = smallest(a), largest(a)
        if known_true(ew.logical_not.bind(ew.logical_and.bind(ew.isfinite.bind(first), ew.isfinite.bind(last)))):
            raise ValueError("numpy.histogram: autodetected range of the values is not finite "
                             "(NaN or infinity in the data)")
    same = ew.equal.bind(first, last)
    if isinstance(same, bool) or isinstance(same, np.bool_):
        return (first - 0.5, last + 0.5) if same else (first, last)
    return (ew.where.bind(same, ew.subtract.bind(first, 0.5), first),
            ew.where.bind(same, ew.add.bind(last, 0.5), last))


def _numpy_dtype_or_number(value):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    dtype = value.dtype
    return np.dtype(getattr(dtype, "_np_dtype", dtype))


def _as_float64(x):
    xp = namespace(x)
    return x if x.dtype == xp.float64 else ew.astype.bind(x, dtype=xp.float64)


def _gather(values, positions):
    """``values[positions]`` for a 1-D ``values`` and positions of any shape."""
    flat = kcore.reshape.bind(positions, shape=(-1,))
    return kcore.reshape.bind(kr.take_along_axis.bind(values, flat, axis=0), shape=tuple(positions.shape))


# --- sort_complex; allclose, array_equal, array_equiv: one boolean of whole arrays --------------
@implements(np.sort_complex)
def _sort_complex(a):
    """Sorted along the last axis, real part first, as complex (complex64 for integers of
    one or two bytes, complex128 for other real inputs, as NumPy)."""
    a = asarray(a)
    if dtype_kind(a.dtype) != "c":
        np_dtype = np.dtype(getattr(a.dtype, "_np_dtype", a.dtype))
        small = np_dtype.char in "bhBH"
        xp = namespace(a)
        a = ew.astype.bind(a, dtype=xp.complex64 if small else xp.complex128)
    return kr.sort.bind(a, axis=a.ndim - 1) if a.ndim else a


@implements(np.allclose)
def _allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``all(isclose(a, b))`` as a 0-d boolean array (NumPy returns a Python bool): under vmap
    with a mapped input one answer per example (branch on it with ``np.where``), under lf.jit
    the answer of each later call; ``if`` on it is ``bool()``, which takes the primal under
    grad and jvp and raises DataDependentControlFlowError on a mapped value."""
    close = np.isclose(asarray(a), asarray(b), rtol=rtol, atol=atol, equal_nan=equal_nan)
    return np.all(close)


@implements(np.array_equal)
def _array_equal(a1, a2, equal_nan=False):
    """Same shape (else a Python False) and equal elements (NaNs equal with ``equal_nan``), as
    a 0-d boolean array (as allclose)."""
    a1, a2 = asarray(a1), asarray(a2)
    if _shape_of(a1) != _shape_of(a2):
        return False
    same = np.equal(a1, a2)
    if equal_nan and (_kind_of(a1) in "fc" or _kind_of(a2) in "fc"):
        same = np.logical_or(same, np.logical_and(np.isnan(a1), np.isnan(a2)))
    return np.all(same)


@implements(np.array_equiv)
def _array_equiv(a1, a2):
    """Shapes that broadcast together (else a Python False) and equal elements, as a 0-d
    boolean array (as allclose)."""
    a1, a2 = asarray(a1), asarray(a2)
    try:
        np.broadcast_shapes(_shape_of(a1), _shape_of(a2))
    except ValueError:
        return False
    return np.all(np.equal(a1, a2))


def _kind_of(value):
    """The dtype kind of an array or a Python number."""
    dtype = getattr(value, "dtype", None)
    return dtype_kind(dtype) if dtype is not None else ("b" if isinstance(value, bool) else "f")


def _shape_of(value):
    return tuple(value.shape) if hasattr(value, "shape") else np.shape(value)


# --- histogramdd -----------------------------------------------------------------------------------
@implements(np.histogramdd)
def _histogramdd(sample, bins=10, range=None, density=None, weights=None):
    """Counts (or summed weights, float64) in the cells of a grid, with np.histogram's edges
    per dimension: a value lands in ``[e_i, e_i+1)`` by ``searchsorted``, the last edge in the
    last bin, and values outside fall in outlier cells that are then cut away.  Derivatives as
    np.histogram: through traced edges (min and max) and the weights."""
    if hasattr(sample, "ndim") and sample.ndim == 2:
        columns = [getitem_static(sample, (slice(None), i)) for i in builtins_range(sample.shape[1])]
    elif hasattr(sample, "ndim"):
        columns = [kcore.reshape.bind(sample, shape=(-1,))]
    else:
        columns = [kcore.reshape.bind(_as_array(c), shape=(-1,)) for c in sample]
    dims = len(columns)
    if isinstance(bins, (list, tuple)) or getattr(bins, "ndim", 0) > 0:
        bins = [bins[i] for i in builtins_range(len(bins))]
    else:
        bins = [bins] * dims
    if len(bins) != dims:
        raise ValueError("The dimension of bins must be equal to the dimension of the sample x.")
    ranges = [None] * dims if range is None else list(range)
    if len(ranges) != dims:
        raise ValueError("range argument must have one entry per dimension")
    extra = []
    if weights is not None:
        extra.append(kcore.reshape.bind(_as_array(weights), shape=(-1,)))
    edges, places, sizes = [], [], []
    for column, count, span in zip(columns, bins, ranges):
        if isinstance(count, str):
            raise UnsupportedOperationError("numpy.histogramdd with string bins is not supported on traced arrays")
        if span is not None and np.ndim(count) == 0 and dtype_kind(column.dtype) == "f":
            column = _as_float64(column)  # NumPy's edges from a range of numbers are float64
        edge = _bin_edges(column, count, span, None, "histogramdd")
        place = searchsorted(edge, column, "right")
        last = getitem_static(edge, (-1,))
        place = ew.where.bind(ew.equal.bind(column, last), ew.subtract.bind(place, 1), place)
        edges.append(edge)
        places.append(place)
        sizes.append(edge.shape[-1] + 1)
    flat = None
    stride = 1
    for place, size in zip(reversed(places), reversed(sizes)):
        term = ew.multiply.bind(place, stride) if stride != 1 else place
        flat = term if flat is None else ew.add.bind(flat, term)
        stride *= size
    if extra and tuple(extra[0].shape) != tuple(flat.shape):
        raise ValueError("weights should have the same length as the sample")
    counts = kcore.reshape.bind(kr.bincount.bind(flat, *extra, length=stride), shape=tuple(sizes))
    counts = getitem_static(counts, (slice(1, -1),) * dims)
    counts = _as_float64(counts)
    if density:
        whole = total(counts)
        for axis, edge in enumerate(edges):
            widths = _as_float64(ew.subtract.bind(getitem_static(edge, (slice(1, None),)),
                                                  getitem_static(edge, (slice(None, -1),))))
            shape = [1] * dims
            shape[axis] = widths.shape[0]
            counts = ew.divide.bind(counts, kcore.reshape.bind(widths, shape=tuple(shape)))
        counts = ew.divide.bind(counts, whole)
    return counts, edges


builtins_range = range


def _as_array(value):
    value = asarray(value)
    return value if hasattr(value, "shape") else np.asarray(value)
