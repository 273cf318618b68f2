"""More of NumPy on traced arrays: diagonals and triangles, degree conversions, interp,
searchsorted, splitting and tiling, QR / pinv / lstsq / matrix_power, polynomials,
correlation and convolution, cov / corrcoef, divmod / modf, SciPy's special-function
ufuncs, and the ``where=`` / ``initial=`` forms of the reductions.

Registered into the tables of :mod:`.numpy_api` (imported once from the engine's
``__init__``).  Most handlers are compositions of primitives from ``kernels``, so they
batch and differentiate through their parts.
"""
from __future__ import annotations

import operator
import sys
from collections import namedtuple

import numpy as np

from kernels import Traced
from kernels import elementwise as ew
from kernels import linalg as kl
from kernels import reductions as kr
from kernels import shape as ks
from kernels.backend import dtype_kind, namespace, namespace_dtype

from .errors import UnsupportedOperationError
from .numpy_api import (_NO_VALUE, FUNCTIONS, LAZY_UFUNC_TABLES, REDUCE_HANDLERS, UFUNCS, _asarray, _fixed, _pick,
                        implements, setitem)

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
                          (np.heaviside, ew.heaviside), (np.divmod, ew.floor_divmod), (np.modf, ew.modf)]:
    UFUNCS[_ufunc] = _Composition(_ufunc.__name__, _function)
del _ufunc, _function


# --- scipy.special's ufuncs: registered at the first traced call of a ufunc without a kernel,
# if SciPy is imported by then (a SciPy ufunc cannot be called before), never importing it here.
def _register_scipy_special():
    special = sys.modules.get("scipy.special")
    if special is None:
        return False
    for name, function in [("erf", ew.erf.bind), ("erfc", ew.erfc.bind), ("expit", ew.expit),
                           ("logit", ew.logit), ("gammaln", ew.gammaln.bind),
                           ("digamma", lambda x: ew.polygamma.bind(x, n=0)),
                           ("psi", lambda x: ew.polygamma.bind(x, n=0))]:
        ufunc = getattr(special, name, None)
        if isinstance(ufunc, np.ufunc):
            UFUNCS.setdefault(ufunc, _Composition(name, function))
    return True


LAZY_UFUNC_TABLES.append(_register_scipy_special)


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


@implements(np.diag)
def _diag(v, k=0):
    return ks.diag(_at_least_1d(v), operator.index(k))


@implements(np.diagflat)
def _diagflat(v, k=0):
    return ks.diagflat(_asarray(v), operator.index(k))


def _at_least_1d(v, *others):
    """``v`` as an array: a list through NumPy, a scalar in the namespace of ``others``
    (a Python number beside array_api_strict arrays must not become a NumPy array)."""
    v = _asarray(v)
    if not hasattr(v, "ndim"):
        arrays = [o for o in others if hasattr(o, "ndim")]
        v = namespace(*arrays).asarray(v) if arrays else np.asarray(v)
    return v


@implements(np.fill_diagonal)
def _fill_diagonal(a, val, wrap=False):
    """In place, as NumPy writes ``a.flat[:end:step] = val``: the flat positions of the
    diagonal become index arrays, and ``val`` is repeated or cut to their number."""
    if a.ndim < 2:
        raise ValueError("array must be at least 2-d")
    shape = tuple(a.shape)
    if a.ndim == 2:
        step = shape[1] + 1
        end = shape[0] * shape[1] if wrap else min(shape[1] * shape[1], shape[0] * shape[1])
    else:
        if any(size != shape[0] for size in shape):
            raise ValueError("All dimensions of input must be of equal length")
        step = 1 + int(np.cumprod(shape[:-1]).sum())
        end = int(np.prod(shape))
    flat = np.arange(0, end, step)
    if flat.size == 0:
        return None
    val = _asarray(val)
    if getattr(val, "ndim", 0) > 0:
        size = int(np.prod(val.shape))
        if size == 0:
            return None
        val = ks.reshape.bind(val, shape=(-1,))
        if size != flat.size:
            val = _pick(val, np.arange(flat.size) % size, None)
    setitem(a, np.unravel_index(flat, shape), val)
    return None


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


# --- polynomials, correlation, convolution ----------------------------------------------------
@implements(np.polyval)
def _polyval(p, x):
    p = _at_least_1d(p, _asarray(x))
    if p.ndim == 0:
        raise TypeError("iteration over a 0-d array")
    return kl.polyval(p, _at_least_1d(x, p))


@implements(np.vander)
def _vander(x, N=None, increasing=False):
    x = _at_least_1d(x)
    if x.ndim != 1:
        raise ValueError("x must be a one-dimensional array or sequence.")
    return kl.vander(x, None if N is None else operator.index(N), bool(increasing))


def _vector(value, other, promote_scalar):
    value = _at_least_1d(value, _asarray(other))
    if value.ndim == 0 and promote_scalar:
        value = ks.reshape.bind(value, shape=(1,))
    if value.ndim == 0:
        raise ValueError("object of too small depth for desired array")
    if value.ndim > 1:
        raise ValueError("object too deep for desired array")
    return value


@implements(np.correlate)
def _correlate(a, v, mode="valid"):
    return kl.correlate(_vector(a, v, False), _vector(v, a, False), mode)


@implements(np.convolve)
def _convolve(a, v, mode="full"):
    return kl.convolve(_vector(a, v, True), _vector(v, a, True), mode)


# --- statistics ------------------------------------------------------------------------------
def _statistics_dtype(arrays, dtype):
    """The dtype NumPy's cov computes in (at least float64 unless given), in the namespace
    of the arrays."""
    xp = namespace(*arrays)
    if dtype is None:
        dtype = np.result_type(*[np.dtype(getattr(a.dtype, "_np_dtype", a.dtype)) for a in arrays], np.float64)
    if not isinstance(dtype, np.dtype) and isinstance(getattr(dtype, "_np_dtype", None), np.dtype):
        return dtype  # already the namespace's
    return namespace_dtype(xp, np.dtype(dtype))


def _observation_weights(weights, name, count, frequencies, like):
    """NumPy's checks of fweights / aweights (on constants; traced weights are used as
    given), as float64 arrays of the namespace of ``like``."""
    if weights is None:
        return None
    weights = _asarray(weights)
    if isinstance(weights, Traced):
        if weights.ndim > 1:
            raise RuntimeError(f"cannot handle multidimensional {name}")
        if weights.shape[0] != count:
            raise RuntimeError(f"incompatible numbers of samples and {name}")
        xp = namespace(weights)
        return weights if weights.dtype == xp.float64 else ew.astype.bind(weights, dtype=xp.float64)
    weights = np.asarray(weights, dtype=float)
    if frequencies and not np.all(weights == np.around(weights)):
        raise TypeError("fweights must be integer")
    if weights.ndim > 1:
        raise RuntimeError(f"cannot handle multidimensional {name}")
    if weights.shape[0] != count:
        raise RuntimeError(f"incompatible numbers of samples and {name}")
    if np.any(weights < 0):
        raise ValueError(f"{name} cannot be negative")
    xp = namespace(like)
    return xp.asarray(weights, dtype=xp.float64)


def _cov_inputs(m, y, dtype):
    m = _at_least_1d(m)
    if m.ndim > 2:
        raise ValueError("m has more than 2 dimensions")
    if y is not None:
        y = _at_least_1d(y)
        if y.ndim > 2:
            raise ValueError("y has more than 2 dimensions")
    arrays = [m] if y is None else [m, y]
    return m, y, _statistics_dtype(arrays, dtype)


@implements(np.cov)
def _cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *, dtype=None):
    if ddof is not None and ddof != int(ddof):
        raise ValueError("ddof must be integer")
    m, y, dtype = _cov_inputs(m, y, dtype)
    if ddof is None:
        ddof = 0 if bias else 1
    count = m.shape[-1] if rowvar or m.ndim == 1 else m.shape[0]
    fweights = _observation_weights(fweights, "fweights", count, True, m)
    aweights = _observation_weights(aweights, "aweights", count, False, m)
    return kl.cov(m, y, bool(rowvar), int(ddof), fweights, aweights, dtype)


@implements(np.corrcoef)
def _corrcoef(x, y=None, rowvar=True, *, dtype=None):
    x, y, dtype = _cov_inputs(x, y, dtype)
    return kl.corrcoef(x, y, bool(rowvar), dtype)


# --- numpy.linalg -------------------------------------------------------------------------------
@implements(np.linalg.matrix_power)
def _linalg_matrix_power(a, n):
    a = _asarray(a)
    if a.ndim < 2:
        raise np.linalg.LinAlgError(f"{a.ndim}-dimensional array given. Array must be at least two-dimensional")
    if a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError("Last 2 dimensions of the array must be square")
    try:
        n = operator.index(n)
    except TypeError as error:
        raise TypeError("exponent must be an integer") from error
    return kl.matrix_power(a, n)

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
