"""Creation from a template (``zeros_like``, ``ones_like``, ``empty_like``,
``full_like``, with ``shape=`` too: a mapped template gives a mapped result, as torch's
``new_*``), evenly spaced samples between traced endpoints (``linspace``, ``logspace``,
``geomspace``), and the questions NumPy answers from dtypes and shapes alone
(``result_type``, ``can_cast``, ``shape``, ``ndim``, ``size``, ``iscomplexobj``,
``isrealobj``): nothing is recorded for those.
"""
from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from labeled_func_kernels import core as kcore
from labeled_func_kernels import creation as kc
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels.backend import device_of, dtype_kind, known_true, is_array, namespace, namespace_dtype, normalize_axis
from labeled_func_kernels.primitive import Traced

from ..errors import UnsupportedOperationError
from .dispatch import asarray, implements
from .elementwise import as_dtype

__all__ = ["linspace"]


@implements(np.zeros_like)
def _zeros_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(kc.zeros_like, a, dtype, shape)


@implements(np.ones_like)
def _ones_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(kc.ones_like, a, dtype, shape)


@implements(np.empty_like)
def _empty_like(prototype, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(kc.empty_like, prototype, dtype, shape)


def _like(prim, a, dtype, shape, **params):
    """``shape=`` gives a new shape (a mapped template still gives a mapped result: the
    recipe for building a buffer of another shape under vmap, torch's ``new_zeros``)."""
    if shape is not None:
        shape = (operator.index(shape),) if not isinstance(shape, (tuple, list)) else tuple(
            operator.index(size) for size in shape)
        params["shape"] = shape
    return prim.bind(asarray(a), dtype=dtype, **params)


@implements(np.full_like)
def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    if is_array(fill_value):
        base = _like(kc.zeros_like, a, dtype or getattr(a, "dtype", None), shape)
        return ew.add.bind(base, fill_value)
    return _like(kc.full_like, a, dtype, shape, fill_value=fill_value)


# --- questions answered from dtypes and shapes alone (no operation is recorded) ---------------
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
    if isinstance(value, type):  # a scalar type (np.float32): NumPy's own answer
        return value
    dtype = getattr(value, "dtype", None)
    if dtype is not None and not isinstance(value, np.ndarray):
        return np.dtype(getattr(dtype, "_np_dtype", dtype))
    return value


# --- evenly spaced numbers between traced endpoints -------------------------------------------
@implements(np.linspace)
def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, retstep: bool = False, dtype: Any = None,
             axis: int = 0, *, device: Any = None) -> Any:
    """NumPy's linspace, step for step (``arange * step + start``, the last sample set to
    ``stop``), so that traced endpoints give NumPy's numbers and their derivatives."""
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"numpy.linspace: number of samples, {num}, must be non-negative.")
    start, stop = asarray(start), asarray(stop)
    dt = _inexact(np.result_type(_dtype_only(start), _dtype_only(stop)))
    y, step = _spaced(start, stop, num, endpoint, dt)
    y = _sample_axis(y, axis)
    if dtype is not None and _numpy_dtype(dtype).kind in "iu":
        y = ew.floor.bind(y)
    y = as_dtype(y, dtype)
    return (y, step) if retstep else y


@implements(np.logspace)
def _logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """``base ** linspace(start, stop)``; an array ``base`` broadcast with the endpoints."""
    start, stop, base = asarray(start), asarray(stop), asarray(base)
    if np.ndim(base):
        rank = max(np.ndim(start), np.ndim(stop), np.ndim(base))
        start, stop, base = (_with_rank(value, rank) for value in (start, stop, base))
        base = kcore.expand_dims.bind(base, axis=normalize_axis(axis, base.ndim + 1))
    y = linspace(start, stop, num=num, endpoint=endpoint, axis=axis)
    return as_dtype(ew.power.bind(base, y), dtype)


@implements(np.geomspace)
def _geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """NumPy's geomspace for real endpoints: the logspace of their magnitudes, with the
    first and last samples set to the endpoints exactly, times the sign of ``start``."""
    start, stop = _as_array(asarray(start), stop), _as_array(asarray(stop), start)
    if dtype_kind(start.dtype) == "c" or dtype_kind(stop.dtype) == "c":
        raise UnsupportedOperationError("numpy.geomspace of complex endpoints is not supported on traced arrays")
    if known_true(ew.equal.bind(start, 0)) or known_true(ew.equal.bind(stop, 0)):
        raise ValueError("numpy.geomspace: geometric sequence cannot include zero")
    dt = np.result_type(_dtype_only(start), _dtype_only(stop), np.float64 if dtype is None else _numpy_dtype(dtype))
    xp = namespace(start, stop)
    start, stop = as_dtype(start, namespace_dtype(xp, dt)), as_dtype(stop, namespace_dtype(xp, dt))
    sign = ew.sign.bind(start)
    start = ew.divide.bind(start, sign)
    stop = ew.divide.bind(stop, sign)
    y = _logspace(ew.log10.bind(start), ew.log10.bind(stop), num=num, endpoint=endpoint, base=10.0,
                  dtype=namespace_dtype(xp, dt))
    if num > 0:
        rows = _row_numbers(num, y.ndim, xp, y)
        y = ew.where.bind(ew.equal.bind(rows, 0), start, y)
        if num > 1 and endpoint:
            y = ew.where.bind(ew.equal.bind(rows, num - 1), stop, y)
    y = _sample_axis(ew.multiply.bind(y, sign), axis)
    return as_dtype(y, dtype)


def _spaced(start, stop, num, endpoint, dt):
    """``num`` samples from ``start`` to ``stop`` along a new first axis, in dtype ``dt``,
    and the step (NaN where there is none)."""
    xp = namespace(start, stop)
    dt = namespace_dtype(xp, dt)
    delta = ew.subtract.bind(as_dtype(stop, dt), as_dtype(start, dt))
    rows = _row_numbers(num, np.ndim(delta) + 1, xp, delta if hasattr(delta, "shape") else None, dt)
    div = num - 1 if endpoint else num
    if div > 0:
        step = ew.divide.bind(delta, div)
        y = ew.multiply.bind(rows, step)
    else:
        step = xp.asarray(math.nan, dtype=xp.float64)  # no step: NumPy's NaN (a Python float), in the arrays' library
        y = ew.multiply.bind(rows, delta)
    y = as_dtype(ew.add.bind(y, as_dtype(start, dt)), dt)
    if endpoint and num > 1:
        y = ew.where.bind(ew.equal.bind(rows, num - 1), as_dtype(stop, dt), y)
    if tuple(y.shape) != (num,) + tuple(np.shape(delta)):  # endpoints that are Python numbers
        y = kcore.broadcast_to.bind(y, shape=(num,) + tuple(np.shape(delta)))
    return y, step


def _row_numbers(num, ndim, xp, like, dtype=None):
    """0, 1, ..., num - 1 along the first of ``ndim`` axes (a constant on ``like``'s device)."""
    device = None if like is None or not hasattr(like, "shape") else device_of(like)
    rows = xp.arange(num, dtype=dtype if dtype is not None else like.dtype, device=device)
    return xp.reshape(rows, (num,) + (1,) * (ndim - 1))


def _sample_axis(y, axis):
    return kcore.moveaxis(y, 0, normalize_axis(axis, y.ndim)[0]) if axis != 0 else y


def _inexact(dtype):
    """The floating type NumPy's linspace computes in: integers and booleans as float64."""
    return dtype if dtype.kind in "fc" else np.result_type(dtype, 1.0)


def _numpy_dtype(dtype):
    """A dtype argument (NumPy's, a name, a type, or an array library's dtype) as NumPy's."""
    return np.dtype(getattr(dtype, "_np_dtype", dtype))


def _with_rank(value, rank):
    shape = np.shape(value)
    if len(shape) >= rank:
        return value
    if not hasattr(value, "shape"):
        value = np.asarray(value)
    return kcore.reshape.bind(value, shape=(1,) * (rank - len(shape)) + tuple(shape))


def _as_array(value, other):
    """A Python number as a 0-d array (as NumPy's asanyarray: not a weak scalar), in the
    namespace of ``other``."""
    if hasattr(value, "dtype"):
        return value
    reference = asarray(other)
    xp = namespace(reference) if hasattr(reference, "dtype") else np
    return xp.asarray(value)


# --- like=: NumPy's array creators asked for an array of a traced array's kind ------------------
def _contains_traced(value):
    if isinstance(value, Traced):
        return True
    if isinstance(value, (list, tuple)):
        return any(_contains_traced(item) for item in value)
    return False


def _array_like(func):
    """``np.asarray(a, like=traced)`` (flox, dask): the array of ``a``.  ``a`` not traced is a
    constant of the computation, and NumPy's array is the answer (what NumPy gives without
    ``like=``); a traced ``a`` is already an array of the like's kind: itself, cast to
    ``dtype``, copied where NumPy copies (``np.array``'s default) and given ``ndmin``."""
    name = func.__name__

    def handler(a, dtype=None, *args, **kwargs):
        if not _contains_traced(a):
            return func(a, dtype, *args, **kwargs)  # a constant (a list of tracers raises the conversion error)
        kwargs.pop("order", None), kwargs.pop("device", None), kwargs.pop("subok", None)
        copy = kwargs.pop("copy", True if name == "array" else None)
        ndmin = kwargs.pop("ndmin", 0)
        if args or kwargs:
            raise UnsupportedOperationError(f"numpy.{name}(traced, like=...) with {sorted(kwargs) or list(args)} "
                                            "is not supported on traced arrays")
        out = a
        if isinstance(out, (list, tuple)):
            raise UnsupportedOperationError(
                f"numpy.{name}(a list of traced values, like=...) is not supported on traced arrays: "
                "build the array with np.stack")
        if dtype is not None and np.dtype(dtype) != out.dtype:
            out = ew.astype.bind(out, dtype=np.dtype(dtype))
        elif copy:
            out = kcore.copy.bind(out)
        if ndmin > out.ndim:
            out = kcore.reshape.bind(out, shape=(1,) * (ndmin - out.ndim) + tuple(out.shape))
        return out

    handler.__name__ = handler.__qualname__ = f"_{name}_like"
    handler.__doc__ = _array_like.__doc__
    return handler


for _func in (np.asarray, np.asanyarray, np.array, np.ascontiguousarray, np.asfortranarray):
    implements(_func)(_array_like(_func))


def _made_like(func):
    """``np.arange(n, like=traced)`` and the other creators that take ``like=`` only to pick
    the kind of array to make (flox): ``like=`` names no value, so the result is what NumPy
    makes without it (a constant of the computation); traced arguments meet NumPy's own
    conversions there, with the transforms' policies."""
    def handler(*args, **kwargs):
        return func(*args, **kwargs)

    handler.__name__ = handler.__qualname__ = f"_{func.__name__}_like"
    handler.__doc__ = _made_like.__doc__
    return handler


for _func in (np.arange, np.empty, np.zeros, np.ones, np.full, np.identity, np.eye, np.tri, np.fromfunction,
              np.frombuffer, np.fromiter, np.fromstring):
    implements(_func)(_made_like(_func))
