"""``np.interp`` on traced arrays: one primitive (``kernels/interp.py``).

The handler normalises NumPy's arguments (lists, Python numbers, float64), passes
constant ``left``/``right`` as parameters of the primitive, and applies traced ones
afterwards with ``where`` (as NumPy's edges: below ``xp[0]``, above ``xp[-1]``).  With
``period=`` the points and the knots are reduced modulo the period, the knots sorted
(``argsort``, ``take_along_axis``) and the table closed on both sides, as NumPy does,
before the same primitive: derivatives go through the remainder (slope 1) and the
permutation.  Registered after ``reductions`` (``__init__`` imports this family later), so
this handler is the one NumPy's ``interp`` dispatches to.
"""
from __future__ import annotations

import numbers

import numpy as np

from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import interp as kinterp
from labeled_func_kernels import reductions as kr
from labeled_func_kernels import shape as ks
from labeled_func_kernels.backend import device_of, dtype_kind, namespace
from labeled_func_kernels.indexing import getitem_static

from ..errors import UnsupportedOperationError
from .dispatch import asarray, implements


def _as_float64(x):
    xp = namespace(x)
    return x if x.dtype == xp.float64 else ew.astype.bind(x, dtype=xp.float64)


def _constant(value):
    """A Python or NumPy real number (a parameter of the primitive), or None."""
    return value is None or (isinstance(value, numbers.Real) and not hasattr(value, "_level"))


@implements(np.interp)
def _interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation, NumPy's ``interp`` (float64; NumPy's edges)."""
    x, xp, fp = asarray(x), asarray(xp), asarray(fp)
    if dtype_kind(fp.dtype) == "c":
        raise UnsupportedOperationError("numpy.interp of complex fp is not supported on traced arrays")
    if xp.ndim != 1 or fp.ndim != 1 or xp.shape[0] != fp.shape[0]:
        raise ValueError("fp and xp are not of the same length.")
    if xp.shape[0] == 0:
        raise ValueError("array of sample points is empty")
    if not hasattr(x, "shape"):
        x = namespace(xp, fp).asarray(x, device=device_of(xp))
    x, xp, fp = (_as_float64(v) for v in (x, xp, fp))
    if period is not None:
        x, xp, fp = _periodic(x, xp, fp, period)
        left = right = None
    constant_left, constant_right = _constant(left), _constant(right)
    out = kinterp.interp.bind(x, xp, fp, rows=0, left=float(left) if constant_left and left is not None else None,
                              right=float(right) if constant_right and right is not None else None)
    if not constant_left:
        out = ew.where.bind(ew.less.bind(x, getitem_static(xp, (0,))), _as_float64(asarray(left)), out)
    if not constant_right:
        out = ew.where.bind(ew.greater.bind(x, getitem_static(xp, (-1,))), _as_float64(asarray(right)), out)
    return out


def _periodic(x, xp, fp, period):
    """NumPy's reduction of a periodic table: everything modulo ``|period|``, the knots
    sorted, the table closed by its last knot one period down and its first one up."""
    if not _constant(period):
        raise UnsupportedOperationError("numpy.interp with a traced period= is not supported")
    if period == 0:
        raise ValueError("period must be a non-zero value")
    period = abs(float(period))
    x = ew.remainder.bind(x, period)
    xp = ew.remainder.bind(xp, period)
    order = kr.argsort.bind(xp, axis=0)
    xp = kr.take_along_axis.bind(xp, order, axis=0)
    fp = kr.take_along_axis.bind(fp, order, axis=0)
    xp = ks.concatenate.bind(ew.subtract.bind(getitem_static(xp, (slice(-1, None),)), period), xp,
                             ew.add.bind(getitem_static(xp, (slice(0, 1),)), period), axis=0)
    fp = ks.concatenate.bind(getitem_static(fp, (slice(-1, None),)), fp, getitem_static(fp, (slice(0, 1),)), axis=0)
    return x, xp, fp
