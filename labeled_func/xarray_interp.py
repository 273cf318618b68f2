"""xarray's ``interp`` on traced values: the one hook into xarray's internals.

``DataArray.interp``, ``Dataset.interp`` and ``interp_like`` reach SciPy (``interp1d``,
``interpn``) through two private functions of ``xarray.core.missing``:

- ``_localize(obj, indexes_coords)``: a speed-up (keep only the part of the grid around
  the new coordinates) that asks pandas for the nearest labels of ``min``/``max`` of the
  new coordinates: a value-dependent question.  Called by ``Dataset.interp`` and by
  ``_interpnd``.  Wrapped: where a new coordinate is traced, it returns its arguments
  unchanged (the interpolation is local, the result the same).
- ``_interpnd(data, *coords, interp_func, interp_kwargs, result_coord_core_dims)``: the
  function ``interpolate_variable`` hands to ``apply_ufunc``; it calls SciPy, which
  converts its inputs to NumPy arrays.  Wrapped: where the data or a coordinate is
  traced, ``method="linear"`` and ``"nearest"`` are computed with the ``interp`` primitive
  (``kernels/interp.py``, NumPy's ``interp`` with one table per row) instead, so every
  transform applies, derivatives in the data and in the new coordinates included;
  ``method="cubic"`` along one dimension with the not-a-knot spline's coefficients (linear
  in the data: made once by SciPy for the grid, see ``_cubic_last``).  Other methods raise
  :class:`UnsupportedOperationError` naming the method.

Outside transforms (nothing traced) both wrappers call xarray's own functions with the
same arguments: plain xarray is unchanged.  :func:`install` checks that xarray's
functions have the expected signatures and call each other by these names (it reads
their code objects); otherwise it patches nothing (``STATUS`` says why) and ``interp``
under a transform raises the ``ConversionError`` it raised before.

Semantics (those of xarray with SciPy, up to rounding: NumPy's formula, not SciPy's):
linear interpolation between the two neighbours; several dimensions interpolated
together (points: the new coordinates share a dimension) are multilinear on the
rectilinear grid, computed as successive one-dimensional interpolations (the same
function: multilinear interpolation is separable); outside the grid ``fill_value``
(NaN by default; a pair ``(below, above)`` in one dimension; ``"extrapolate"`` in one
dimension: the edge segments continued).  ``nearest`` picks the nearest knot (the lower
one at a tie, as SciPy); its derivative in the data is the selection, in the
coordinates 0.
"""
from __future__ import annotations

import inspect
import numbers

import numpy as np
from xarray.core import dataset as xr_dataset
from xarray.core import missing as xr_missing
from xarray.core.variable import Variable, broadcast_variables

from labeled_func_kernels import interp as kinterp

from .engine import is_traced
from .errors import UnsupportedOperationError
from .xarray_hooks import code_of, hooked, patch

__all__ = ["install", "installed", "STATUS", "TESTED_XARRAY_VERSIONS"]

#: The xarray versions whose ``missing`` module this hook was written and tested against.
#: Others are patched too when their functions look the same (see :func:`install`).
TESTED_XARRAY_VERSIONS = ("2026.9.0",)

#: Why the hook is or is not installed ("installed", or the reason it was not).
STATUS = "not installed"

METHODS = ("linear", "nearest", "cubic")

_ORIGINAL = {}
_ABSENT = object()
_SCIPY_CLASSES = {"BarycentricInterpolator": "barycentric", "KroghInterpolator": "krogh",
                  "PchipInterpolator": "pchip", "Akima1DInterpolator": "akima"}


def _traced(*values):
    return any(is_traced(v) for v in values)


# --- the wrappers --------------------------------------------------------------------------------
def _localize(obj, indexes_coords):
    """``missing._localize``, skipped where a new coordinate is traced."""
    if any(_traced(getattr(new_x, "_data", None)) for _, new_x in indexes_coords.values()):
        return obj, indexes_coords
    return _ORIGINAL["_localize"](obj, indexes_coords)


def _interpnd(data, *coords, interp_func, interp_kwargs, result_coord_core_dims):
    """``missing._interpnd``: xarray's own where nothing is traced, else the primitive."""
    if not _traced(data, *coords):
        return _ORIGINAL["_interpnd"](data, *coords, interp_func=interp_func, interp_kwargs=interp_kwargs,
                                      result_coord_core_dims=result_coord_core_dims)
    return _traced_interpnd(data, coords, interp_func, interp_kwargs, result_coord_core_dims)


# --- the computation on traced values ------------------------------------------------------------
def _method_name(interp_func, interp_kwargs):
    method = interp_kwargs.get("method")
    if method is None:  # scipy's class, chosen by xarray for the method
        name = getattr(interp_func, "__name__", repr(interp_func))
        return _SCIPY_CLASSES.get(name, name)
    return method


def _refuse(what):
    raise UnsupportedOperationError(
        f"xarray's interp {what} on a traced value (inside lf.vmap, lf.grad, lf.jvp, lf.jit...): "
        f"under a transform interp supports method='linear' and method='nearest', and "
        f"method='cubic' along one dimension, with kwargs={{'fill_value': number}} (a pair "
        f"(below, above), or 'extrapolate' for linear and cubic, along one dimension). Interpolate "
        f"with one of those, or compute the interpolation weights yourself with traced operations.")


def _float64(value):
    if is_traced(value):
        return value if value.dtype == np.float64 else value.astype(np.float64)
    return np.asarray(value, dtype=np.float64)


def _fills(fill_value, method, ndim):
    """``(left, right, extrapolate)``: the constant fills below and above the grid."""
    if fill_value is _ABSENT:
        return np.nan, np.nan, False
    if fill_value is None:
        if ndim > 1:  # scipy's interpn extrapolates with fill_value=None
            _refuse("with several dimensions and fill_value=None (extrapolation)")
        return np.nan, np.nan, False
    if isinstance(fill_value, str):
        if fill_value == "extrapolate" and method in ("linear", "cubic") and ndim == 1:
            return None, None, True
        _refuse(f"with method={method!r} and fill_value={fill_value!r}")
    if isinstance(fill_value, (tuple, list)) and len(fill_value) == 2 and ndim == 1:
        left, right = fill_value
    else:
        left = right = fill_value
    for value in (left, right):
        if not (isinstance(value, numbers.Real) and not is_traced(value)):
            _refuse(f"with fill_value={fill_value!r} (a real number, or a pair of them, is supported)")
    return float(left), float(right), False


def _snap(x, q):
    """``method='nearest'``: the knot of ``x`` nearest to each point ``q`` (the lower one
    at a tie, as SciPy), or ``q`` itself outside ``[x[0], x[-1]]`` and at NaN (so that
    the linear interpolation there gives the fill).  Carries no derivative in ``q``."""
    if x.shape[0] == 1:
        index = np.zeros_like(q, dtype=np.int64)
    else:
        bounds = (x[1:] + x[:-1]) / 2.0
        index = np.searchsorted(bounds, q, side="left")
    flat = np.reshape(index, (-1,))
    knot = np.reshape(np.take_along_axis(x, flat, axis=0), np.shape(q))
    keep = (q < x[0]) | (q > x[-1]) | np.isnan(q)
    return np.where(keep, q, knot)


def _interp_last(table, x, q, rows, left, right):
    """Interpolate ``table`` (``(*R, n)``) along its last axis at ``q`` (``(*Rq, *S)``;
    the first ``rows`` axes of ``q`` are rows, size 1 where shared)."""
    knots = np.reshape(x, (1,) * rows + (x.shape[0],))
    return kinterp.interp.bind(q, knots, table, rows=rows, left=left, right=right)


def _extrapolate(out, table, x, q, rows):
    """scipy's ``fill_value='extrapolate'``: the first and last segments continued."""
    n = x.shape[0]
    if n < 2:
        return out
    lead = table.shape[:rows]
    shape = lead + (1,) * (np.ndim(q) - rows)

    def edge(i, j):  # the segment from knot i to knot j, broadcast against out
        fi = np.reshape(table[..., i], shape)
        fj = np.reshape(table[..., j], shape)
        slope = (fj - fi) / (x[j] - x[i])
        return slope * (q - x[i]) + fi

    out = np.where(q < x[0], edge(0, 1), out)
    return np.where(q > x[-1], edge(n - 2, n - 1), out)


def _cubic_last(table, x, q, rows, left, right, extrapolate):
    """scipy's ``interp1d(kind="cubic")`` (xarray's cubic method along one dimension): the
    not-a-knot cubic spline of ``table`` along its last axis, at ``q`` (as for
    :func:`_interp_last`).  The spline's polynomial coefficients are linear in the table:
    SciPy makes them once for the identity (the knots are concrete), and each point
    combines those of its segment with the table, so the derivative in the data is the
    spline's weights and in the points the spline's slope (the segment's polynomial)."""
    from scipy.interpolate import CubicSpline

    knots = np.asarray(x)
    n = knots.shape[0]
    if n < 4:
        _refuse(f"with method='cubic' and {n} knots (SciPy's cubic spline needs at least 4)")
    basis = CubicSpline(knots, np.eye(n), axis=0).c            # (4, n - 1, n): coefficients per unit table
    shape = np.shape(q)
    points = np.reshape(q, (-1,))                                # (m,): shared by every row
    segment = np.clip(np.searchsorted(knots, points, side="right") - 1, 0, n - 2)
    flat = np.reshape(np.transpose(basis, (1, 0, 2)), (n - 1, 4 * n))
    picked = np.take_along_axis(flat, np.reshape(segment, (-1, 1)), axis=0)    # (m, 4 n)
    picked = np.reshape(picked, (points.shape[0], 4, n))
    t = points - np.take_along_axis(knots, segment, axis=0)
    value = None
    for k in range(4):                                           # Horner: ((c0 t + c1) t + c2) t + c3
        term = np.matmul(table, np.transpose(picked[:, k, :]))  # (*rows, m)
        value = term if value is None else value * t + term
    if not extrapolate:
        value = np.where(points < knots[0], left, np.where(points > knots[-1], right, value))
    return np.reshape(value, tuple(np.shape(table)[:rows]) + shape[rows:])


def _traced_interpnd(data, coords, interp_func, interp_kwargs, result_coord_core_dims):
    method = _method_name(interp_func, interp_kwargs)
    if method not in METHODS:
        _refuse(f"with method={method!r}")
    if np.dtype(data.dtype).kind == "c":
        _refuse("of complex data")
    n_x = len(coords) // 2
    if method == "cubic" and n_x > 1:
        _refuse("with method='cubic' along several dimensions (SciPy's interpn)")
    ndim = data.ndim
    nconst = ndim - n_x
    x = [Variable([f"dim_{nconst + dim}"], _x, fastpath=True) for dim, _x in enumerate(coords[:n_x])]
    new_x = list(broadcast_variables(*(Variable(dims, _x, fastpath=True)
                                       for dims, _x in zip(result_coord_core_dims, coords[n_x:], strict=True))))
    x, new_x = xr_missing._floatize_x(x, new_x)
    left, right, extrapolate = _fills(interp_kwargs.get("fill_value", _ABSENT), method, n_x)

    knots = [_float64(v.data) for v in x]
    points = [_float64(v.data) for v in new_x]
    shape = tuple(new_x[0].shape)
    table = _float64(data)
    if method == "nearest":
        points = [_snap(k, q) for k, q in zip(knots, points)]

    if n_x == 1 and method == "cubic":
        if is_traced(knots[0]):
            _refuse("with method='cubic' and a traced grid coordinate")
        q = np.reshape(points[0], (1,) * nconst + shape)
        return _cubic_last(table, knots[0], q, nconst, left, right, extrapolate)
    if n_x == 1:  # the table's leading axes are rows; the points are shared by all of them
        q = np.reshape(points[0], (1,) * nconst + shape)
        out = _interp_last(table, knots[0], q, nconst, left, right)
        if extrapolate:
            out = _extrapolate(out, table, knots[0], q, nconst)
        return out

    # several dimensions: successive 1-D interpolations, the last dimension first
    size = int(np.prod(shape, dtype=np.int64))
    flat = [np.reshape(q, (size,)) for q in points]
    out = _interp_last(table, knots[-1], np.reshape(flat[-1], (1,) * (ndim - 1) + (size,)), ndim - 1, left, right)
    for d in range(n_x - 2, -1, -1):  # out: (*const, n_0 .. n_d, P): interpolate n_d, point by point
        lead = out.ndim - 2
        order = tuple(range(lead)) + (lead + 1, lead)
        out = np.transpose(out, order)  # (*const, n_0 .. n_{d-1}, P, n_d)
        q = np.reshape(flat[d], (1,) * lead + (size,))
        out = _interp_last(out, knots[d], q, lead + 1, left, right)
    return np.reshape(out, tuple(out.shape[:nconst]) + shape)


# --- installing ------------------------------------------------------------------------------------
def _check(missing, dataset):
    """None if xarray's internals look as this hook expects, else why not."""
    for name in ("_localize", "_interpnd", "_floatize_x", "interpolate_variable"):
        if not callable(getattr(missing, name, None)):
            return f"xarray.core.missing.{name} is missing"
    params = inspect.signature(missing._interpnd).parameters
    expected = ["data", "coords", "interp_func", "interp_kwargs", "result_coord_core_dims"]
    if list(params) != expected or params["coords"].kind is not inspect.Parameter.VAR_POSITIONAL:
        return f"xarray.core.missing._interpnd has the parameters {list(params)}, not {expected}"
    if list(inspect.signature(missing._localize).parameters) != ["obj", "indexes_coords"]:
        return "xarray.core.missing._localize does not take (obj, indexes_coords)"
    if "_interpnd" not in code_of(missing.interpolate_variable).co_names:
        return "xarray.core.missing.interpolate_variable does not call _interpnd by name"
    if "_localize" not in code_of(missing._interpnd).co_names:
        return "xarray.core.missing._interpnd does not call _localize by name"
    if "_localize" not in code_of(dataset.Dataset.interp).co_names:
        return "Dataset.interp does not call missing._localize"
    return None


def installed():
    """Whether xarray's interp goes through this module under transforms."""
    return hooked(xr_missing._interpnd, xr_missing._localize)


def install():
    """Patch ``xarray.core.missing`` (idempotent); return ``STATUS``."""
    global STATUS
    missing, dataset = xr_missing, xr_dataset
    if installed():
        return STATUS
    reason = _check(missing, dataset)
    if reason is not None:
        STATUS = f"not installed: {reason}"
        return STATUS
    patch(((missing, "_localize", _localize), (missing, "_interpnd", _interpnd)), _ORIGINAL)
    STATUS = "installed"
    return STATUS


def original(name):
    """xarray's own ``missing._localize`` / ``missing._interpnd`` (for tests)."""
    return _ORIGINAL[name]


install()  # at import (labeled_func imports this module): idempotent, version-checked
