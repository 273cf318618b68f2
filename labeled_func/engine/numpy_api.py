"""NumPy function / ufunc -> kernels primitive: the table behind NEP-13 and NEP-18.

``UFUNCS`` maps ufuncs to primitives; ``FUNCTIONS`` maps array functions to small
handlers with NumPy's signature.  Anything else raises UnsupportedOperationError
naming it: there is no silent per-example fallback.
"""
from __future__ import annotations

import sys
from collections import namedtuple

import numpy as np

from kernels import creation as kc
from kernels import elementwise as ew
from kernels import indexing as ki
from kernels import linalg as kl
from kernels import reductions as kr
from kernels import Traced
from kernels import shape as ks
from kernels.backend import dtype_kind, is_array, normalize_axis

from . import diagnose
from .errors import DynamicShapeError, OutArgumentError, UnsupportedOperationError

__all__ = ["UFUNCS", "FUNCTIONS", "DEFERRING_TYPES", "dispatch_ufunc", "dispatch_function",
           "getitem", "setitem"]

# Types whose own __array_ufunc__/__array_function__ must handle mixed operations
# (xarray's DataArray, Dataset, Variable); floor 3 registers them.
DEFERRING_TYPES: set = set()

UFUNCS = {
    np.add: ew.add, np.subtract: ew.subtract, np.multiply: ew.multiply,
    np.divide: ew.divide, np.floor_divide: ew.floor_divide, np.remainder: ew.remainder,
    np.power: ew.pow, np.negative: ew.negative, np.positive: ew.positive,
    np.absolute: ew.abs, np.fabs: ew.abs, np.sign: ew.sign, np.sqrt: ew.sqrt,
    np.cbrt: ew.cbrt, np.square: ew.square, np.reciprocal: ew.reciprocal,
    np.exp: ew.exp, np.exp2: ew.exp2, np.expm1: ew.expm1, np.log: ew.log,
    np.log2: ew.log2, np.log10: ew.log10, np.log1p: ew.log1p, np.logaddexp: ew.logaddexp,
    np.sin: ew.sin, np.cos: ew.cos, np.tan: ew.tan, np.arcsin: ew.asin,
    np.arccos: ew.acos, np.arctan: ew.atan, np.arctan2: ew.atan2, np.hypot: ew.hypot,
    np.sinh: ew.sinh, np.cosh: ew.cosh, np.tanh: ew.tanh, np.arcsinh: ew.asinh,
    np.arccosh: ew.acosh, np.arctanh: ew.atanh, np.floor: ew.floor, np.ceil: ew.ceil,
    np.rint: ew.rint, np.trunc: ew.trunc, np.isnan: ew.isnan, np.isinf: ew.isinf,
    np.isfinite: ew.isfinite, np.signbit: ew.signbit, np.copysign: ew.copysign,
    np.maximum: ew.maximum, np.minimum: ew.minimum, np.fmax: ew.fmax, np.fmin: ew.fmin,
    np.equal: ew.equal, np.not_equal: ew.not_equal, np.less: ew.less,
    np.less_equal: ew.less_equal, np.greater: ew.greater, np.greater_equal: ew.greater_equal,
    np.logical_and: ew.logical_and, np.logical_or: ew.logical_or,
    np.logical_xor: ew.logical_xor, np.logical_not: ew.logical_not,
    np.bitwise_and: ew.bitwise_and, np.bitwise_or: ew.bitwise_or,
    np.bitwise_xor: ew.bitwise_xor, np.invert: ew.bitwise_invert,
    np.conjugate: ew.conj, np.matmul: kl.matmul,
}
_LOGICAL_ON_BOOL = {np.bitwise_and: ew.logical_and, np.bitwise_or: ew.logical_or,
                    np.bitwise_xor: ew.logical_xor, np.invert: ew.logical_not}
_REDUCE = {np.add: kr.sum, np.multiply: kr.prod, np.maximum: kr.max, np.minimum: kr.min,
           np.logical_and: kr.all, np.logical_or: kr.any}
_ACCUMULATE = {np.add: kr.cumsum, np.multiply: kr.cumprod}
_IGNORED_UFUNC_KWARGS = {"casting", "order", "subok"}


def _name(func):
    module = getattr(func, "__module__", None) or "numpy"
    return f"{module}.{getattr(func, '__name__', func)}"


def _ufunc_name(ufunc):
    """Where a ufunc lives, for messages: ``numpy.sin``, ``scipy.special.erf``.

    Ufuncs carry no reliable ``__module__``; the name is looked up by identity in NumPy,
    then in scipy.special and the other public modules already imported (never importing
    one).  Only called to build an error message.
    """
    name = getattr(ufunc, "__name__", None) or repr(ufunc)
    if getattr(np, name, None) is ufunc:
        return f"numpy.{name}"
    candidates = ["scipy.special"] + sorted((m for m in list(sys.modules) if m != "scipy.special"),
                                            key=lambda m: (m.count("."), len(m)))
    for module_name in candidates:
        if any(part.startswith("_") for part in module_name.split(".")):
            continue
        module = sys.modules.get(module_name)
        try:
            found = vars(module).get(name) if module is not None else None
        except TypeError:  # a module-like object without a __dict__
            continue
        if found is ufunc:
            return f"{module_name}.{name}"
    return f"the ufunc {name}"


# Registrations of ufuncs from other packages (scipy.special, in numpy_more), run when a
# ufunc without a kernel is first met: each returns True once its entries are in UFUNCS.
LAZY_UFUNC_TABLES: list = []


def _ufunc_kernel(ufunc):
    prim = UFUNCS.get(ufunc)
    if prim is None and LAZY_UFUNC_TABLES:
        for register in tuple(LAZY_UFUNC_TABLES):
            if register() and register in LAZY_UFUNC_TABLES:
                try:
                    LAZY_UFUNC_TABLES.remove(register)
                except ValueError:  # another thread removed it first
                    pass
        prim = UFUNCS.get(ufunc)
    return prim


# ufunc.reduce with options (axis=, keepdims=, where=, initial=, dtype=), by ufunc:
# handler(ufunc, inputs, kwargs); filled by numpy_more.  Without an entry, reduce takes axis only.
REDUCE_HANDLERS: dict = {}


def dispatch_ufunc(ufunc, method, inputs, kwargs):
    for value in inputs:
        if type(value) in DEFERRING_TYPES:
            return NotImplemented
    if method == "reduce" and ufunc in REDUCE_HANDLERS and kwargs.get("out") is None:
        if not any(type(v) in DEFERRING_TYPES for v in kwargs.values()):
            return REDUCE_HANDLERS[ufunc](ufunc, inputs, kwargs)
    out = kwargs.pop("out", None)
    dtype = kwargs.pop("dtype", None)
    unknown = set(kwargs) - _IGNORED_UFUNC_KWARGS
    if unknown:
        raise UnsupportedOperationError(f"{_ufunc_name(ufunc)} with {sorted(unknown)} is not supported on traced arrays")
    if method == "__call__":
        prim = _ufunc_kernel(ufunc)
        if prim is None:
            raise UnsupportedOperationError(f"{_ufunc_name(ufunc)} has no kernel in labeled_func")
        if ufunc in _LOGICAL_ON_BOOL and all(_kind(v) == "b" for v in inputs):
            prim = _LOGICAL_ON_BOOL[ufunc]
        result = prim.bind(*inputs)
    elif method == "reduce" and ufunc in _REDUCE:
        (x,) = inputs[:1]
        result = _REDUCE[ufunc](x, axis=kwargs.get("axis", inputs[1] if len(inputs) > 1 else 0))
    elif method == "accumulate" and ufunc in _ACCUMULATE:
        x = inputs[0]
        result = _ACCUMULATE[ufunc](x, axis=inputs[1] if len(inputs) > 1 else 0)
    else:
        raise UnsupportedOperationError(f"{_ufunc_name(ufunc)}.{method} has no kernel in labeled_func")
    if dtype is not None:
        result = (tuple(ew.astype.bind(part, dtype=dtype) for part in result) if isinstance(result, tuple)
                  else ew.astype.bind(result, dtype=dtype))
    if out is None:
        return result
    return _write_out(_ufunc_name(ufunc), out, inputs, result)


def _write_out(name, out, inputs, result):
    from .tracer import inplace_assign

    target = out[0] if isinstance(out, tuple) else out
    if isinstance(out, tuple) and len(out) != 1:
        raise OutArgumentError(f"{name}: out= with several outputs is not supported under a transform")
    if not any(target is value for value in inputs):
        raise OutArgumentError(
            f"{name}: out= is not supported under a transform (only the in-place "
            "form x op= y, where out is one of the inputs). Use the returned value instead."
        )
    inplace_assign(target, result, f"{name}(..., out=...)")
    return target


def _kind(value):
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return "b" if isinstance(value, bool) else "f"
    return dtype_kind(dtype)


def dispatch_function(func, types, args, kwargs):
    handler = FUNCTIONS.get(func)
    if handler is None:
        raise UnsupportedOperationError(f"{_name(func)} has no kernel in labeled_func")
    for kind in types:
        if kind in DEFERRING_TYPES:
            return NotImplemented
    if kwargs.get("out") is not None:
        raise OutArgumentError(f"{_name(func)}: out= is not supported under a transform; use the returned value")
    kwargs.pop("out", None)
    return handler(*args, **kwargs)


# --- the function table ---------------------------------------------------------------------
FUNCTIONS: dict = {}


def implements(*functions):
    def register(handler):
        for function in functions:
            FUNCTIONS[function] = handler
        return handler

    return register


_NO_VALUE = np._NoValue


def _reject(name, **options):
    """Raise for NumPy options we do not support (``where=``, ``initial=``...)."""
    given = [k for k, v in options.items() if v is not _NO_VALUE and v is not None]
    if given:
        raise UnsupportedOperationError(f"numpy.{name} with {given} is not supported on traced arrays")


def _reduction(kernel, name, with_dtype=True, with_ddof=False):
    def handler(a, axis=None, dtype=None, out=None, keepdims=_NO_VALUE, *, ddof=0,
                where=_NO_VALUE, initial=_NO_VALUE, correction=_NO_VALUE, mean=_NO_VALUE):
        _reject(name, where=where, initial=initial, mean=mean)
        keepdims = bool(keepdims) if keepdims is not _NO_VALUE else False
        options = {"dtype": dtype} if with_dtype else {}
        if with_ddof:
            options["ddof"] = correction if correction is not _NO_VALUE else ddof
        return kernel(_asarray(a), axis=axis, keepdims=keepdims, **options)

    handler.__name__ = name
    return handler


for _function, _kernel, _dtype, _ddof in [
    (np.sum, kr.sum, True, False), (np.prod, kr.prod, True, False),
    (np.mean, kr.mean, True, False), (np.var, kr.var, True, True), (np.std, kr.std, True, True),
    (np.nansum, kr.nansum, True, False), (np.nanprod, kr.nanprod, True, False),
    (np.nanmean, kr.nanmean, True, False), (np.nanvar, kr.nanvar, True, True),
    (np.nanstd, kr.nanstd, True, True),
]:
    implements(_function)(_reduction(_kernel, _function.__name__, _dtype, _ddof))


def _minmax(kernel, name):
    def handler(a, axis=None, out=None, keepdims=_NO_VALUE, initial=_NO_VALUE, where=_NO_VALUE):
        _reject(name, initial=initial, where=where)
        return kernel(_asarray(a), axis=axis, keepdims=keepdims if keepdims is not _NO_VALUE else False)

    return handler


for _function, _kernel in [(np.max, kr.max), (np.amax, kr.max), (np.min, kr.min),
                           (np.amin, kr.min), (np.any, kr.any), (np.all, kr.all),
                           (np.nanmax, kr.nanmax), (np.nanmin, kr.nanmin)]:
    implements(_function)(_minmax(_kernel, _function.__name__))


def _arg(kernel):
    def handler(a, axis=None, out=None, *, keepdims=_NO_VALUE):
        return kernel(_asarray(a), axis=axis, keepdims=keepdims if keepdims is not _NO_VALUE else False)

    return handler


for _function, _kernel in [(np.argmax, kr.argmax), (np.argmin, kr.argmin),
                           (np.nanargmax, kr.nanargmax), (np.nanargmin, kr.nanargmin)]:
    implements(_function)(_arg(_kernel))


def _scan(kernel):
    def handler(a, axis=None, dtype=None, out=None):
        return kernel(_asarray(a), axis=axis, dtype=dtype)

    return handler


for _function, _kernel in [(np.cumsum, kr.cumsum), (np.cumprod, kr.cumprod),
                           (np.nancumsum, kr.nancumsum), (np.nancumprod, kr.nancumprod)]:
    implements(_function)(_scan(_kernel))


def _median_handler(kernel):
    def handler(a, axis=None, out=None, overwrite_input=False, keepdims=False):
        return kernel(_asarray(a), axis=axis, keepdims=keepdims)

    return handler


FUNCTIONS[np.median] = _median_handler(kr.median)
FUNCTIONS[np.nanmedian] = _median_handler(kr.nanmedian)


def _quantile_handler(kernel, scale):
    def handler(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None, interpolation=None):
        name = getattr(kernel, "__name__", "quantile")
        if method != "linear" or interpolation not in (None, "linear") or weights is not None:
            raise UnsupportedOperationError(f"numpy.{name}: only method='linear' without weights is supported on traced arrays")
        if hasattr(q, "_level"):
            raise UnsupportedOperationError(f"numpy.{name}: the quantile levels q must not be traced")
        return kernel(_asarray(a), np.asarray(q, dtype=float) / scale, axis=axis, keepdims=keepdims)

    return handler


FUNCTIONS[np.quantile] = _quantile_handler(kr.quantile, 1)
FUNCTIONS[np.nanquantile] = _quantile_handler(kr.nanquantile, 1)
FUNCTIONS[np.percentile] = _quantile_handler(kr.quantile, 100)
FUNCTIONS[np.nanpercentile] = _quantile_handler(kr.nanquantile, 100)


@implements(np.sort)
def _sort(a, axis=-1, kind=None, order=None, *, stable=None):
    return kr.sort(_asarray(a), axis=axis)


@implements(np.argsort)
def _argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    if order is not None:
        raise UnsupportedOperationError("numpy.argsort with order= is not supported on traced arrays")
    return kr.argsort(_asarray(a), axis=axis)


@implements(np.take_along_axis)
def _take_along_axis(arr, indices, axis=-1):
    if axis is None:
        arr, axis = ks.reshape.bind(arr, shape=(-1,)), 0
    return kr.take_along_axis.bind(arr, indices, axis=normalize_axis(axis, arr.ndim)[0])


@implements(np.take)
def _take(a, indices, axis=None, out=None, mode="raise"):
    """A gather: ``a`` (traced or a constant table) at ``indices`` (traced or not) along
    ``axis``; derivatives reach a traced ``a``, never the integer indices."""
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"numpy.take: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    a = _asarray(_unlabeled(a))  # np.take(DataArray, traced) arrives here too: NumPy's takes its data
    if not hasattr(a, "ndim"):
        a = np.asarray(a)
    indices = _asarray(_unlabeled(indices))
    if axis is None:
        a, axis = ks.reshape.bind(a, shape=(-1,)), 0
    axis = normalize_axis(axis, a.ndim)[0]
    if mode != "raise":
        size = a.shape[axis]
        if size == 0:
            raise IndexError("cannot do a non-empty take from an empty axes.")
        indices = ew.remainder.bind(indices, size) if mode == "wrap" else ew.clip(indices, 0, size - 1)
    template, arrays = ki.split_key((slice(None),) * axis + (indices,))
    return ki.getitem.bind(a, *arrays, template=template)



@implements(np.count_nonzero)
def _count_nonzero(a, axis=None, *, keepdims=False):
    nonzero = ew.not_equal.bind(a, 0)
    return kr.sum(nonzero, axis=axis, keepdims=keepdims, dtype=np.intp)


# elementwise functions that are not ufuncs
@implements(np.where)
def _where(condition, x=_NO_VALUE, y=_NO_VALUE):
    if x is _NO_VALUE and y is _NO_VALUE:
        return np.nonzero(_fixed(condition, "numpy.where (one-argument form, i.e. nonzero)"))
    return ew.where.bind(condition, _asarray(x), _asarray(y))


@implements(np.clip)
def _clip(a, a_min=_NO_VALUE, a_max=_NO_VALUE, out=None, *, min=_NO_VALUE, max=_NO_VALUE, **kwargs):
    lower = a_min if a_min is not _NO_VALUE else (min if min is not _NO_VALUE else None)
    upper = a_max if a_max is not _NO_VALUE else (max if max is not _NO_VALUE else None)
    return ew.clip(a, lower, upper)


@implements(np.round, np.around)
def _round(a, decimals=0, out=None):
    return ew.round.bind(a, decimals=decimals)


@implements(np.astype)
def _astype(x, dtype, /, *, copy=True, device=None):
    return ew.astype.bind(x, dtype=dtype)


@implements(np.isclose)
def _isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    close = ew.less_equal.bind(ew.abs.bind(ew.subtract.bind(a, b)), ew.add.bind(atol, ew.multiply.bind(rtol, ew.abs.bind(b))))
    if equal_nan:
        close = ew.logical_or.bind(close, ew.logical_and.bind(ew.isnan.bind(a), ew.isnan.bind(b)))
    return close


# shape functions
@implements(np.reshape)
def _reshape(a, /, shape=None, order="C", *, newshape=None, copy=None):
    shape = newshape if shape is None else shape
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return ks.reshape.bind(a, shape=shape)


@implements(np.ravel)
def _ravel(a, order="C"):
    return ks.reshape.bind(a, shape=(-1,))


@implements(np.transpose, np.permute_dims)
def _transpose(a, axes=None):
    if axes is None:
        axes = tuple(reversed(range(a.ndim)))
    return ks.transpose.bind(a, axes=normalize_axis(axes, a.ndim))


@implements(np.moveaxis)
def _moveaxis(a, source, destination):
    return ks.moveaxis(a, source, destination)


@implements(np.swapaxes)
def _swapaxes(a, axis1, axis2):
    order = list(range(a.ndim))
    i, j = normalize_axis((axis1, axis2), a.ndim)
    order[i], order[j] = order[j], order[i]
    return ks.transpose.bind(a, axes=tuple(order))


@implements(np.expand_dims)
def _expand_dims(a, axis):
    axis = (axis,) if isinstance(axis, int) else tuple(axis)
    return ks.expand_dims.bind(a, axis=normalize_axis(axis, a.ndim + len(axis)))


@implements(np.squeeze)
def _squeeze(a, axis=None):
    if axis is None:
        axis = tuple(i for i, s in enumerate(a.shape) if s == 1)
    return ks.squeeze.bind(a, axis=normalize_axis(axis, a.ndim))


@implements(np.broadcast_to)
def _broadcast_to(array, shape, subok=False):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return ks.broadcast_to.bind(_asarray(array), shape=shape)


@implements(np.broadcast_arrays)
def _broadcast_arrays(*args, subok=False):
    shape = np.broadcast_shapes(*[np.shape(a) for a in args])
    return tuple(ks.broadcast_to.bind(_asarray(a), shape=shape) for a in args)


def _atleast_handler(rank):
    def handler(*arrays):
        out = []
        for a in arrays:
            a = _asarray(a)
            if a.ndim < rank:
                shape = tuple(a.shape)
                if rank == 3 and a.ndim == 2:
                    shape = shape + (1,)
                elif rank == 3 and a.ndim == 1:
                    shape = (1,) + shape + (1,)
                else:
                    shape = (1,) * (rank - a.ndim) + shape
                a = ks.reshape.bind(a, shape=shape)
            out.append(a)
        return out[0] if len(out) == 1 else tuple(out)

    return handler


FUNCTIONS[np.atleast_1d] = _atleast_handler(1)
FUNCTIONS[np.atleast_2d] = _atleast_handler(2)
FUNCTIONS[np.atleast_3d] = _atleast_handler(3)


@implements(np.concatenate, np.concat)
def _concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    arrays = [_asarray(a) for a in arrays]
    if axis is not None:
        axis = normalize_axis(axis, arrays[0].ndim)[0]
    result = ks.concatenate.bind(*arrays, axis=axis)
    return result if dtype is None else ew.astype.bind(result, dtype=dtype)


@implements(np.stack)
def _stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    arrays = [_asarray(a) for a in arrays]
    axis = normalize_axis(axis, arrays[0].ndim + 1)[0]
    result = ks.stack.bind(*arrays, axis=axis)
    return result if dtype is None else ew.astype.bind(result, dtype=dtype)


@implements(np.pad)
def _pad(array, pad_width, mode="constant", **kwargs):
    if callable(mode) or mode not in ("constant", "edge", "reflect", "symmetric", "wrap"):
        raise UnsupportedOperationError(f"numpy.pad with mode={mode!r} is not supported on traced arrays")
    constant = kwargs.pop("constant_values", 0)
    reflect_type = kwargs.pop("reflect_type", "even")
    if kwargs or reflect_type != "even":
        raise UnsupportedOperationError(f"numpy.pad with {sorted(kwargs) or ['reflect_type']} is not supported on traced arrays")
    pad_width = _pairs(pad_width, array.ndim, int)
    constant = _pairs(constant, array.ndim, lambda v: v.item() if hasattr(v, "item") else v)
    return ks.pad(array, pad_width, mode, constant)


def _pairs(value, ndim, convert):
    """NumPy's pad argument broadcast to one (before, after) pair per axis."""
    pairs = np.broadcast_to(np.asarray(value, dtype=object), (ndim, 2))
    return tuple((convert(before), convert(after)) for before, after in pairs.tolist())


@implements(np.roll)
def _roll(a, shift, axis=None):
    if axis is None:
        return ks.roll.bind(a, shift=shift, axis=None)
    axis = normalize_axis(axis, a.ndim)
    shift = (shift,) * len(axis) if isinstance(shift, int) else tuple(shift)
    return ks.roll.bind(a, shift=shift, axis=axis)


@implements(np.flip)
def _flip(m, axis=None):
    return ks.flip.bind(m, axis=normalize_axis(axis, m.ndim))


@implements(np.lib.stride_tricks.sliding_window_view)
def _sliding_window_view(x, window_shape, axis=None, *, subok=False, writeable=False):
    window_shape = (window_shape,) if isinstance(window_shape, int) else tuple(window_shape)
    if axis is None:
        axis = tuple(range(x.ndim))
    axis = normalize_axis(axis, x.ndim)
    return ks.sliding_window_view.bind(x, window_shape=window_shape, axis=axis)


@implements(np.diff)
def _diff(a, n=1, axis=-1, prepend=_NO_VALUE, append=_NO_VALUE):
    return ks.diff(a, n, axis, None if prepend is _NO_VALUE else prepend,
                   None if append is _NO_VALUE else append)


@implements(np.gradient)
def _gradient(f, *varargs, axis=None, edge_order=1):
    return ks.gradient(f, *varargs, axis=axis, edge_order=edge_order)


@implements(np.copy)
def _copy(a, order="K", subok=False):
    return ks.copy.bind(a)


# contractions
@implements(np.einsum)
def _einsum(subscripts, *operands, out=None, optimize=False, **kwargs):
    return kl.einsum(subscripts, *[_asarray(op) for op in operands])


@implements(np.tensordot)
def _tensordot(a, b, axes=2):
    return kl.tensordot(_asarray(a), _asarray(b), axes)


@implements(np.dot)
def _dot(a, b, out=None):
    return kl.dot(a, b)


@implements(np.inner)
def _inner(a, b):
    return kl.inner(a, b)


@implements(np.outer)
def _outer(a, b, out=None):
    return kl.outer(a, b)


@implements(np.vdot)
def _vdot(a, b):
    return kl.vdot(a, b)


# constructors
@implements(np.zeros_like)
def _zeros_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(kc.zeros_like, "zeros_like", a, dtype, shape)


@implements(np.ones_like)
def _ones_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(kc.ones_like, "ones_like", a, dtype, shape)


@implements(np.empty_like)
def _empty_like(prototype, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(kc.empty_like, "empty_like", prototype, dtype, shape)


def _like(prim, name, a, dtype, shape, **params):
    if shape is not None:
        raise UnsupportedOperationError(f"numpy.{name} with shape= is not supported on traced arrays")
    return prim.bind(a, dtype=dtype, **params)


@implements(np.full_like)
def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    if is_array(fill_value):
        base = _like(kc.zeros_like, "full_like", a, dtype or getattr(a, "dtype", None), shape)
        return ew.add.bind(base, fill_value)
    return _like(kc.full_like, "full_like", a, dtype, shape, fill_value=fill_value)


# questions answered from dtypes and shapes alone (no operation is recorded)
@implements(np.result_type)
def _result_type(*arrays_and_dtypes):
    return np.result_type(*[_dtype_only(v) for v in arrays_and_dtypes])


@implements(np.can_cast)
def _can_cast(from_, to, casting="safe"):
    return np.can_cast(_dtype_only(from_), _dtype_only(to), casting)


@implements(np.shape)
def _shape(a):
    return tuple(a.shape)


@implements(np.ndim)
def _ndim(a):
    return a.ndim


@implements(np.size)
def _size(a, axis=None):
    return a.size if axis is None else a.shape[axis]


@implements(np.iscomplexobj)
def _iscomplexobj(x):
    return dtype_kind(x.dtype) == "c"


@implements(np.isrealobj)
def _isrealobj(x):
    return dtype_kind(x.dtype) != "c"


def _dtype_only(value):
    dtype = getattr(value, "dtype", None)
    if dtype is not None and not isinstance(value, np.ndarray):
        return np.dtype(getattr(dtype, "_np_dtype", dtype))
    return value


# --- data-dependent shapes ------------------------------------------------------------------
# nonzero, unique, boolean masks...: the output shape follows the values.  Under vmap a
# mapped value has one set of values per example, hence one shape per example: that is
# a policy error.  A constant, or a value traced only by grad/jvp, has one concrete value
# (the primal) that fixes the shape, as torch.func's grad allows: positions are computed
# from it and the values picked with getitem, so derivatives flow through them.
def _fixed(value, culprit):
    """The concrete values that fix a data-dependent shape; DynamicShapeError if mapped."""
    if not isinstance(value, Traced):
        return _host(value)
    from .batching import is_batched

    if not value._level.alive:
        value._level.escaped(culprit)
    if is_batched(value):
        raise DynamicShapeError(diagnose.dynamic_shape_message(diagnose.call_site(), culprit))
    return _host(value._bottom())


def _host(value):
    """``value`` as a NumPy array: a shape is decided on the host anyway, and positions
    are small integer arrays (getitem moves them to the data's device)."""
    library = type(value).__module__.split(".")[0]
    if library == "cupy":
        return value.get()
    return value if library == "numpy" and not isinstance(value, (list, tuple)) else np.asarray(value)


def _pick(a, positions, axis):
    """``a`` (flattened when ``axis`` is None) at integer ``positions`` along ``axis``."""
    a = _asarray(a)
    if axis is None:
        a, axis = ks.reshape.bind(a, shape=(-1,)), 0
    axis = normalize_axis(axis, a.ndim)[0]
    template, arrays = ki.split_key((slice(None),) * axis + (positions,))
    return ki.getitem.bind(a, *arrays, template=template)


def _count(value):
    """The size of ``value`` (flattened) without touching its data."""
    return int(np.prod(np.shape(value)))


@implements(np.nonzero)
def _nonzero(a):
    return np.nonzero(_fixed(a, "numpy.nonzero"))


@implements(np.argwhere)
def _argwhere(a):
    return np.argwhere(_fixed(a, "numpy.argwhere"))


@implements(np.flatnonzero)
def _flatnonzero(a):
    return np.flatnonzero(_fixed(a, "numpy.flatnonzero"))


@implements(np.unique)
def _unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
            equal_nan=True, sorted=True):
    found = np.unique(_fixed(ar, "numpy.unique"), return_index=True, return_inverse=return_inverse,
                      return_counts=return_counts, axis=axis, equal_nan=equal_nan, sorted=sorted)
    values = _pick(ar, found[1], axis)
    out = (values,) + ((found[1],) if return_index else ()) + tuple(found[2:])
    return out[0] if len(out) == 1 else out


UniqueAllResult = namedtuple("UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])
UniqueCountsResult = namedtuple("UniqueCountsResult", ["values", "counts"])
UniqueInverseResult = namedtuple("UniqueInverseResult", ["values", "inverse_indices"])


def _unique_all_of(x, name):
    """np.unique_all's result with traced values (sorted; NumPy leaves the order open)."""
    found = np.unique_all(_fixed(x, f"numpy.{name}"))
    return found, _pick(x, found.indices, None)


@implements(np.unique_values)
def _unique_values(x):
    return _unique_all_of(x, "unique_values")[1]


@implements(np.unique_counts)
def _unique_counts(x):
    found, values = _unique_all_of(x, "unique_counts")
    return UniqueCountsResult(values, found.counts)


@implements(np.unique_inverse)
def _unique_inverse(x):
    found, values = _unique_all_of(x, "unique_inverse")
    return UniqueInverseResult(values, found.inverse_indices)


@implements(np.unique_all)
def _unique_all(x):
    found, values = _unique_all_of(x, "unique_all")
    return UniqueAllResult(values, found.indices, found.inverse_indices, found.counts)


@implements(np.extract)
def _extract(condition, arr):
    # NumPy's own rule on positions: take(ravel(arr), nonzero(ravel(condition)))
    positions = np.extract(_fixed(condition, "numpy.extract"), np.arange(_count(arr)))
    return _pick(arr, positions, None)


@implements(np.compress)
def _compress(condition, a, axis=None, out=None):
    a = _asarray(a)
    length = _count(a) if axis is None else a.shape[normalize_axis(axis, a.ndim)[0]]
    positions = np.compress(_fixed(condition, "numpy.compress"), np.arange(length))
    return _pick(a, positions, axis)


@implements(np.trim_zeros)
def _trim_zeros(filt, trim="fb", axis=None):
    nonzero = _fixed(filt, "numpy.trim_zeros") != 0
    trim = trim.lower()
    key = [slice(None)] * nonzero.ndim
    for ax in (range(nonzero.ndim) if axis is None else normalize_axis(axis, nonzero.ndim)):
        others = tuple(i for i in range(nonzero.ndim) if i != ax)
        hits = np.flatnonzero(nonzero.any(axis=others) if others else nonzero)
        size = nonzero.shape[ax]
        start = (int(hits[0]) if hits.size else size) if "f" in trim else 0
        stop = (int(hits[-1]) + 1 if hits.size else 0) if "b" in trim else size
        key[ax] = slice(start, max(start, stop))
    return ki.getitem_static(filt, tuple(key))


def _asarray(value):
    if isinstance(value, (list, tuple)):
        return np.asarray(value)
    return value


# --- indexing -------------------------------------------------------------------------------------
def _is_boolean_index(item):
    return hasattr(item, "dtype") and _kind(item) == "b" and not isinstance(item, (bool, np.bool_))


def _prepare_key(key):
    if not isinstance(key, tuple):
        key = (key,)
    prepared = []
    for item in key:
        if isinstance(item, list):
            item = np.asarray(item)
        elif isinstance(item, np.integer):
            item = int(item)
        elif isinstance(item, slice):
            item = slice(*(None if v is None else int(v) for v in (item.start, item.stop, item.step)))
        prepared.append(item)
    return tuple(prepared)


def getitem(x, key):
    key = _prepare_key(key)
    if any(_is_boolean_index(item) for item in key):
        key = _masks_as_positions(key, "boolean-mask indexing x[mask]")
    template, arrays = ki.split_key(key)
    return ki.getitem.bind(x, *arrays, template=template)


def _masks_as_positions(key, culprit):
    """Boolean masks in ``key`` as the integer positions NumPy uses for them
    (``np.nonzero(mask)``): possible when the mask is the same for every example."""
    out = []
    for item in key:
        if not _is_boolean_index(item):
            out.append(item)
            continue
        mask = _fixed(item, culprit)
        if mask.ndim == 0:
            if not bool(mask):
                raise UnsupportedOperationError(f"{culprit} with a 0-d False mask is not supported on traced arrays")
            out.append(None)  # x[True] adds an axis of length 1
        else:
            out.extend(np.nonzero(mask))
    return tuple(out)


def setitem(x, key, value):
    from .batching import is_batched
    from .tracer import inplace_assign

    key = _prepare_key(key)
    value = _asarray(_unlabeled(value))
    if any(_is_boolean_index(item) for item in key):
        if any(_is_boolean_index(item) and is_batched(item) for item in key):
            inplace_assign(x, _masked_select(x, key, value), "x[mask] = value")
            return
        key = _masks_as_positions(key, "boolean-mask assignment x[mask] = value")
    template, arrays = ki.split_key(key)
    new = ki.setitem.bind(x, value, *arrays, template=template)
    inplace_assign(x, new, "x[...] = value")


def _unlabeled(value):
    """The array inside a labeled value (a DataArray or Variable: ``buf[i] = da``), as
    NumPy takes it; this floor knows no xarray, so it looks for ``dims`` and ``data``."""
    if not isinstance(value, Traced) and hasattr(value, "dims") and hasattr(value, "data"):
        return value.data
    return value


def _masked_select(x, key, value):
    """``x[mask] = value`` with a mask that differs per example, as ``where(mask, value, x)``.

    Exact when one value goes to every selected element: a single mask over the leading
    dims of ``x`` and a value that broadcasts against one element (a scalar, or one
    row).  A sequence of values, one per selected element, has as many entries as the
    mask has True values: a different number per example.
    """
    mask = key[0]
    rest = x.ndim - mask.ndim
    shape = tuple(getattr(value, "shape", ()))
    if len(shape) == rest + 1 and shape[:1] == (1,):
        value = ks.reshape.bind(value, shape=shape[1:])
        shape = shape[1:]
    if len(key) != 1 or rest < 0 or tuple(mask.shape) != tuple(x.shape[: mask.ndim]):
        reason = ("the mask must be the only index and cover the leading dims of x "
                  f"(got a key of {len(key)} entries, a mask of shape {tuple(mask.shape)} "
                  f"for x of shape {tuple(x.shape)})")
    elif len(shape) > rest:
        reason = (f"a value of shape {shape} holds one entry per selected element, and the "
                  "number of selected elements differs per example")
    else:
        condition = ks.reshape.bind(mask, shape=tuple(mask.shape) + (1,) * rest) if rest else mask
        new = ew.where.bind(condition, value, x)
        if new.dtype != x.dtype:
            new = ew.astype.bind(new, dtype=x.dtype)
        return new
    site = diagnose.call_site()
    where = f" (called from {site.location})" if site.location else ""
    raise DynamicShapeError(
        f"boolean-mask assignment x[mask] = value with a mask that differs per example{where}: "
        "under vmap it is done as a select, where(mask, value, x), which needs one value for "
        f"every selected element; here {reason}. Write x = np.where(mask, values, x) with "
        "values of x's shape (xr.where(mask, values, x) on DataArrays)."
    )


# --- numpy.linalg ---------------------------------------------------------------------------------
# NumPy's signatures; each decomposition output is its own primitive (kernels/linalg.py).
SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])


@implements(np.linalg.solve)
def _linalg_solve(a, b):
    return kl.solve(_asarray(a), _asarray(b))


@implements(np.linalg.inv)
def _linalg_inv(a):
    return kl.inv.bind(_asarray(a))


@implements(np.linalg.det)
def _linalg_det(a):
    return kl.det.bind(_asarray(a))


@implements(np.linalg.slogdet)
def _linalg_slogdet(a):
    a = _asarray(a)
    return SlogdetResult(kl.slogdet_sign.bind(a), kl.slogdet_logabs.bind(a))


@implements(np.linalg.cholesky)
def _linalg_cholesky(a, /, *, upper=False):
    lower = kl.cholesky.bind(_asarray(a))
    return _conjugate_transpose(lower) if upper else lower


@implements(np.linalg.eigh)
def _linalg_eigh(a, UPLO="L"):
    a = _lower_triangle_holder(_asarray(a), UPLO, "eigh")
    return EighResult(kl.eigh_values.bind(a), kl.eigh_vectors.bind(a))


@implements(np.linalg.eigvalsh)
def _linalg_eigvalsh(a, UPLO="L"):
    return kl.eigh_values.bind(_lower_triangle_holder(_asarray(a), UPLO, "eigvalsh"))


@implements(np.linalg.svd)
def _linalg_svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    a = _asarray(a)
    if hermitian:
        raise UnsupportedOperationError("numpy.linalg.svd with hermitian=True is not supported on traced arrays")
    if not compute_uv:
        return kl.svd_values.bind(a)
    if full_matrices and a.shape[-1] != a.shape[-2]:
        raise UnsupportedOperationError(
            f"numpy.linalg.svd with full_matrices=True of a non-square {a.shape[-2]}x{a.shape[-1]} matrix "
            "is not supported on traced arrays; pass full_matrices=False (the reduced SVD)"
        )
    return SVDResult(kl.svd_u.bind(a), kl.svd_values.bind(a), kl.svd_vh.bind(a))


@implements(np.linalg.svdvals)
def _linalg_svdvals(x, /):
    return kl.svd_values.bind(_asarray(x))


@implements(np.linalg.norm)
def _linalg_norm(x, ord=None, axis=None, keepdims=False):
    return kl.norm(_asarray(x), ord=ord, axis=axis, keepdims=keepdims)


def _conjugate_transpose(x):
    axes = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
    x = ks.transpose.bind(x, axes=axes)
    return ew.conj.bind(x) if dtype_kind(x.dtype) == "c" else x


def _lower_triangle_holder(a, uplo, name):
    """eigh reads one triangle: UPLO="U" is the lower triangle of the conjugate transpose."""
    if uplo not in ("L", "U"):
        raise UnsupportedOperationError(f"numpy.linalg.{name}: UPLO must be 'L' or 'U', got {uplo!r}")
    return _conjugate_transpose(a) if uplo == "U" else a
