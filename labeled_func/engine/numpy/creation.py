"""Creation from a template (``zeros_like``, ``ones_like``, ``empty_like``,
``full_like``: a mapped template gives a mapped result, as torch's ``new_*``), and the
questions NumPy answers from dtypes and shapes alone (``result_type``, ``can_cast``,
``shape``, ``ndim``, ``size``, ``iscomplexobj``, ``isrealobj``): nothing is recorded.
"""
from __future__ import annotations

import numpy as np

from kernels import creation as kc
from kernels import elementwise as ew
from kernels.backend import dtype_kind, is_array

from ..errors import UnsupportedOperationError
from .dispatch import implements


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
