"""More of NumPy on traced arrays: diagonals and triangles, degree conversions, interp,
searchsorted, splitting and tiling, QR / pinv / lstsq, and the ``where=`` / ``initial=``
forms of the reductions.

Registered into the tables of :mod:`.numpy_api` (imported once from the engine's
``__init__``).  Most handlers are compositions of primitives from ``kernels``, so they
batch and differentiate through their parts.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from kernels import Traced
from kernels import elementwise as ew
from kernels import linalg as kl
from kernels import reductions as kr
from kernels import shape as ks
from kernels.backend import dtype_kind

from .errors import UnsupportedOperationError
from .numpy_api import _NO_VALUE, FUNCTIONS, REDUCE_HANDLERS, UFUNCS, _asarray, _fixed, implements

__all__ = ["QRResult", "LstsqResult"]

QRResult = namedtuple("QRResult", ["Q", "R"])
LstsqResult = namedtuple("LstsqResult", ["x", "residuals", "rank", "s"])


def _given(value):
    return value is not _NO_VALUE and value is not None


def _keepdims(keepdims):
    return bool(keepdims) if keepdims is not _NO_VALUE else False


# --- ufuncs computed by compositions ------------------------------------------------------
class _Composition:
    """A ufunc entry computed by a function of primitives: ``bind`` calls it."""

    __slots__ = ("name", "function")

    def __init__(self, name, function):
        self.name = name
        self.function = function

    def bind(self, *args):
        return self.function(*args)

    def __repr__(self):
        return f"Composition({self.name!r})"


for _ufunc, _function in [(np.deg2rad, ew.deg2rad), (np.radians, ew.deg2rad), (np.rad2deg, ew.rad2deg),
                          (np.degrees, ew.rad2deg), (np.float_power, ew.float_power),
                          (np.heaviside, ew.heaviside)]:
    UFUNCS[_ufunc] = _Composition(_ufunc.__name__, _function)
del _ufunc, _function


# --- elementwise functions that are not ufuncs -----------------------------------------------
@implements(np.nan_to_num)
def _nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    x = _asarray(x)
    if dtype_kind(x.dtype) == "c":
        raise UnsupportedOperationError("numpy.nan_to_num of complex arrays is not supported on traced arrays")
    return ew.nan_to_num(x, nan, posinf, neginf)


@implements(np.interp)
def _interp(x, xp, fp, left=None, right=None, period=None):
    if period is not None:
        raise UnsupportedOperationError("numpy.interp with period= is not supported on traced arrays")
    xp, fp = _asarray(xp), _asarray(fp)
    if dtype_kind(fp.dtype) == "c":
        raise UnsupportedOperationError("numpy.interp of complex fp is not supported on traced arrays")
    return kr.interp(_asarray(x), xp, fp, left, right)


# --- diagonals and triangles ----------------------------------------------------------------
@implements(np.diagonal)
def _diagonal(a, offset=0, axis1=0, axis2=1):
    return ks.diagonal(_asarray(a), offset, axis1, axis2)


@implements(np.trace)
def _trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    return kl.trace(_asarray(a), offset, axis1, axis2, dtype)


@implements(np.tril)
def _tril(m, k=0):
    return ks.tril(_asarray(m), k)


@implements(np.triu)
def _triu(m, k=0):
    return ks.triu(_asarray(m), k)


# --- reductions and their where= / initial= forms ---------------------------------------------
@implements(np.ptp)
def _ptp(a, axis=None, out=None, keepdims=_NO_VALUE):
    return kr.ptp(_asarray(a), axis, _keepdims(keepdims))


@implements(np.average)
def _average(a, axis=None, weights=None, returned=False, *, keepdims=_NO_VALUE):
    weights = None if weights is None else _asarray(weights)
    return kr.average(_asarray(a), axis, weights, returned, _keepdims(keepdims))


def _masked_reduction(plain, masked, skips_nan, takes_dtype):
    """``plain`` (numpy_api's handler) for calls without ``where=``/``initial=``; else
    ``masked``, with NaNs left out of the mask for the ``nan*`` forms.  NumPy's own
    signature check (before dispatch) rejects ``initial=`` for the means."""

    def reduce(a, axis, dtype, keepdims, initial, where):
        a = _asarray(a)
        mask = _asarray(where) if _given(where) else True
        if skips_nan:
            mask = kr.nan_mask(a, mask)
        options = {"dtype": dtype} if takes_dtype else {}
        if _given(initial):
            options["initial"] = initial
        return masked(a, axis, _keepdims(keepdims), where=mask, **options)

    if takes_dtype:
        def handler(a, axis=None, dtype=None, out=None, keepdims=_NO_VALUE, initial=_NO_VALUE, where=_NO_VALUE):
            if not _given(initial) and not _given(where):
                return plain(a, axis, dtype, out, keepdims)
            return reduce(a, axis, dtype, keepdims, initial, where)
    else:
        def handler(a, axis=None, out=None, keepdims=_NO_VALUE, initial=_NO_VALUE, where=_NO_VALUE):
            if not _given(initial) and not _given(where):
                return plain(a, axis, out, keepdims)
            return reduce(a, axis, None, keepdims, initial, where)

    return handler


for _functions, _masked, _skips_nan, _takes_dtype in [
    ((np.sum,), kr.masked_sum, False, True),
    ((np.nansum,), kr.masked_sum, True, True),
    ((np.prod,), kr.masked_prod, False, True),
    ((np.nanprod,), kr.masked_prod, True, True),
    ((np.mean,), kr.masked_mean, False, True),
    ((np.nanmean,), kr.masked_mean, True, True),
    ((np.max, np.amax), kr.masked_max, False, False),
    ((np.min, np.amin), kr.masked_min, False, False),
    ((np.nanmax,), kr.masked_max, True, False),
    ((np.nanmin,), kr.masked_min, True, False),
]:
    for _function in _functions:
        FUNCTIONS[_function] = _masked_reduction(FUNCTIONS[_function], _masked, _skips_nan, _takes_dtype)
del _functions, _function, _masked, _skips_nan, _takes_dtype


# ufunc.reduce with axis=, keepdims=, where=, initial=: NumPy's own np.sum(plain, where=traced)
# and np.mean(plain, where=traced) arrive here, as does np.add.reduce(traced, axis=1).
_MASKED_REDUCE = {np.add: kr.masked_sum, np.multiply: kr.masked_prod, np.maximum: kr.masked_max,
                  np.minimum: kr.masked_min, np.fmax: kr.masked_max, np.fmin: kr.masked_min}
_SKIPS_NAN = (np.fmax, np.fmin)  # np.nanmax(plain, where=traced) is np.fmax.reduce
_REDUCE_OPTIONS = {"axis", "dtype", "keepdims", "initial", "where", "casting", "order", "subok"}


def _reduce_with_options(ufunc, inputs, kwargs):
    masked = _MASKED_REDUCE[ufunc]
    unknown = set(kwargs) - _REDUCE_OPTIONS - {"out"}
    if unknown:
        raise UnsupportedOperationError(f"numpy.{ufunc.__name__}.reduce with {sorted(unknown)} is not supported "
                                        "on traced arrays")
    x = _asarray(inputs[0])
    axis = kwargs.get("axis", inputs[1] if len(inputs) > 1 else 0)
    dtype = kwargs.get("dtype")
    where = kwargs.get("where", True)
    keepdims = bool(kwargs.get("keepdims", False))
    options = {"where": True if where is True else _asarray(where)}
    if _given(kwargs.get("initial", _NO_VALUE)):
        options["initial"] = kwargs["initial"]
    if ufunc in _SKIPS_NAN:
        if where is True and "initial" not in options:  # NaN only where a whole slice is NaN
            out = (kr.nanmax if ufunc is np.fmax else kr.nanmin)(x, axis, keepdims)
            return out if dtype is None else ew.astype.bind(out, dtype=dtype)
        options["where"] = kr.nan_mask(x, options["where"])
    if masked in (kr.masked_sum, kr.masked_prod):
        return masked(x, axis, keepdims, dtype, **options)
    out = masked(x, axis, keepdims, **options)
    return out if dtype is None else ew.astype.bind(out, dtype=dtype)


REDUCE_HANDLERS.update(dict.fromkeys(_MASKED_REDUCE, _reduce_with_options))


@implements(np.trapezoid, *([np.trapz] if hasattr(np, "trapz") else []))
def _trapezoid(y, x=None, dx=1.0, axis=-1):
    return kr.trapezoid(_asarray(y), None if x is None else _asarray(x), dx, axis)


# --- searching ---------------------------------------------------------------------------
@implements(np.searchsorted)
def _searchsorted(a, v, side="left", sorter=None):
    return kr.searchsorted(_asarray(a), _asarray(v), side, None if sorter is None else _asarray(sorter))


@implements(np.digitize)
def _digitize(x, bins, right=False):
    bins = _asarray(bins)
    if bins.ndim != 1:
        raise ValueError("digitize: bins must be 1-dimensional")
    return kr.digitize(_asarray(x), bins, right)


@implements(np.unravel_index)
def _unravel_index(indices, shape, order="C"):
    return ks.unravel_index(_asarray(indices), shape, order)


# --- shapes ----------------------------------------------------------------------------------
@implements(np.repeat)
def _repeat(a, repeats, axis=None):
    return ks.repeat(_asarray(a), _fixed(repeats, "numpy.repeat (traced repeats)"), axis)


@implements(np.tile)
def _tile(A, reps):
    return ks.tile(_asarray(A), reps)


@implements(np.split)
def _split(ary, indices_or_sections, axis=0):
    return ks.split(_asarray(ary), _fixed(indices_or_sections, "numpy.split (traced split points)"), axis)


@implements(np.array_split)
def _array_split(ary, indices_or_sections, axis=0):
    return ks.array_split(_asarray(ary), _fixed(indices_or_sections, "numpy.array_split (traced split points)"),
                          axis)


# --- products --------------------------------------------------------------------------------
@implements(np.cross)
def _cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    return kl.cross(_asarray(a), _asarray(b), axisa, axisb, axisc, axis)


@implements(np.kron)
def _kron(a, b):
    return kl.kron(_asarray(a), _asarray(b))


# --- numpy.linalg -------------------------------------------------------------------------------
@implements(np.linalg.qr)
def _linalg_qr(a, mode="reduced"):
    a = _asarray(a)
    if mode == "r":
        return kl.qr_r.bind(a)
    if mode != "reduced":
        raise UnsupportedOperationError(f"numpy.linalg.qr with mode={mode!r} is not supported on traced arrays "
                                        "(mode='reduced' and mode='r' are)")
    return QRResult(kl.qr_q.bind(a), kl.qr_r.bind(a))


@implements(np.linalg.pinv)
def _linalg_pinv(a, rcond=None, hermitian=False, *, rtol=_NO_VALUE):
    if hermitian:
        raise UnsupportedOperationError("numpy.linalg.pinv with hermitian=True is not supported on traced arrays")
    if rcond is not None and rtol is not _NO_VALUE:
        raise ValueError("`rtol` and `rcond` can't be both set.")
    # NumPy's defaults: rcond=1e-15; rtol=None is the array API's max(M, N) * eps
    tolerance = rcond if rcond is not None else (1e-15 if rtol is _NO_VALUE else rtol)
    if tolerance is not None and (isinstance(tolerance, Traced) or np.ndim(tolerance) != 0):
        raise UnsupportedOperationError("numpy.linalg.pinv: only a constant scalar rcond/rtol is supported "
                                        "on traced arrays")
    return kl.pinv.bind(_asarray(a), rtol=None if tolerance is None else float(tolerance))


@implements(np.linalg.lstsq)
def _linalg_lstsq(a, b, rcond=None):
    if rcond is not None and (isinstance(rcond, Traced) or np.ndim(rcond) != 0):
        raise UnsupportedOperationError("numpy.linalg.lstsq: only a constant scalar rcond is supported on traced arrays")
    a, b = _asarray(a), _asarray(b)
    if a.ndim != 2 or b.ndim not in (1, 2):
        raise np.linalg.LinAlgError("lstsq: a must be 2-D and b 1-D or 2-D")
    return LstsqResult(*kl.lstsq(a, b, None if rcond is None or rcond < 0 else float(rcond)))
