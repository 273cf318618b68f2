"""xarray's ``idxmax``/``idxmin``, ``sortby``, ``polyfit``, ``weighted``, ``first``/``last``, ``isel``
at traced positions and ``sel(method="nearest")`` of traced labels: hooks into
xarray's internals, in the manner of :mod:`labeled_func.xarray_interp`.

- ``xarray.computation.computation._calc_idxminmax`` (``idxmax``/``idxmin``) picks the
  labels by indexing the coordinate's NumPy array with the argmax (``ndarray[tracer]``:
  NumPy never asks the tracer).  Wrapped: where the array is traced, the labels are
  gathered with ``np.take_along_axis`` (a constant table, traced positions), so vmap and
  jit give the loop's labels, numbers and datetimes alike; xarray's semantics otherwise
  (``skipna``, an all-NaN slice gives ``fill_value``, ``keep_attrs``, the coordinates).
  The labels carry no derivative (a label is not a function of the values).
- ``Dataset.sortby`` (also reached from ``DataArray.sortby``) calls ``np.lexsort`` on a
  tuple of DataArrays, which NumPy converts.  Wrapped: where a key is traced, the order
  is computed by ``np.lexsort`` on the keys' data (the engine's ``lexsort``) and applied
  with ``isel``.  Under grad/jvp the order is the primal's: every transform works.  Under
  vmap or jit an order that follows the values works only along a dim *without* an index
  coordinate (nor any other variable along it that the transform does not trace): the
  labels would be reordered per example (vmap) or per call (jit); otherwise
  :class:`UnsupportedOperationError` says so and how to proceed.
- ``xarray.computation.fit.polyfit`` decides ``skipna`` (default ``None``) by
  ``bool(np.any(var.isnull()))``, and ``least_squares(..., skipna=True)`` writes into a
  NumPy buffer.  Wrapped: where a data variable is traced, ``skipna=None`` becomes
  ``skipna=True`` (the same result wherever there is no NaN), and the skipna fit of
  traced values drops the NaN rows of each column by zeroing them (the same least
  squares problem), solved with the pseudo-inverse of each column's masked matrix.
  All-NaN columns give NaN coefficients; the residuals are NaN where a column keeps no
  more rows than coefficients, or where the design matrix itself is rank deficient, as
  NumPy's ``lstsq`` gives.  The RankWarning of a column whose kept rows are rank
  deficient is not raised under a transform (the rank follows the values).
- ``Weighted.__init__`` (``x.weighted(w)``) checks the weights for NaN with ``bool()`` of
  ``isnull(w).any()``.  Wrapped: where the weights are traced, the same check is made per
  example (on the primal under grad/jvp): ``ValueError`` (xarray's message) naming the
  examples whose weights hold NaN, as the loop raises for them; under lf.jit the check is a
  guard, re-made at every call (a call with NaN weights traces again, and raises).  Then
  ``mean``/``sum``/``sum_of_weights``/``std``/``var`` are xarray's, on traced values.
- ``xarray.core.nputils.nanfirst``/``nanlast`` (``groupby(...).first()``/``last()``,
  ``resample(...).first()``, ``DataArray.first`` of skipna reductions) find the first
  non-NaN element with ``pd.isnull``, which converts.  Wrapped: where the values are
  traced, ``np.isnan`` and ``np.argmax`` find it and ``np.take_along_axis`` picks it (all-NaN
  slices give NaN, as xarray's); the derivative goes to the element picked.
- ``Variable.__getitem__`` (every ``isel``) drops a dim only for a concrete integer
  position, and xarray asks pandas or NumPy for the labels at the positions.  Wrapped:
  where a position is a 0-d traced integer (``x.isel(t=x.argmax("t"))``), the variable is
  indexed as NumPy indexes with an integer (the dim dropped: ``np.take_along_axis`` at the
  position); a 1-D variable that holds no traced value (a coordinate) at traced positions
  with dims of their own gives its numeric labels gathered there.  Labels that are not
  numbers raise :class:`UnsupportedOperationError` (drop the coordinate first).
- ``Variable._roll_one_dim`` (``roll`` of a variable, a DataArray, a Dataset) rolls by two
  slices and a concatenation.  Wrapped: where the data is traced, one ``np.roll`` (the same
  values, one operation instead of three under every transform: a speed hook, not a fix).
- ``PandasIndex.sel`` (``x.sel(t=label, method="nearest")``) asks pandas for the
  positions of the labels.  Wrapped: where the label is traced, on a numeric increasing
  index, the positions are found as pandas finds them (the nearer neighbour, the one above
  at a tie) with ``np.searchsorted``; ``isel`` takes them as above.

Outside transforms (nothing traced) the wrappers call xarray's own functions with the
same arguments.  :func:`install` checks that xarray's functions have the expected
signatures and are called by these names; otherwise it patches nothing (``STATUS`` says
why) and these methods raise what they raised before.
"""
from __future__ import annotations

import inspect
from collections import defaultdict

import numpy as np
import xarray as xr
from xarray.computation import computation as xr_computation
from xarray.computation import fit as xr_fit
from xarray.computation import weighted as xr_weighted
from xarray.core import dataarray as xr_dataarray
from xarray.core import dataset as xr_dataset
from xarray.core import dtypes as xr_dtypes
from xarray.core import indexes as xr_indexes
from xarray.core import indexing as xr_indexing
from xarray.core import nputils as xr_nputils
from xarray.core import variable as xr_variable

from .engine import is_batched, is_traced
from .engine.batching import check_examples
from .errors import UnsupportedOperationError
from .xarray_hooks import code_of, hooked, patch

__all__ = ["install", "installed", "STATUS", "TESTED_XARRAY_VERSIONS"]

#: The xarray versions whose internals these hooks were written and tested against.
TESTED_XARRAY_VERSIONS = ("2026.9.0",)

#: Why the hooks are or are not installed ("installed", or the reason they were not).
STATUS = "not installed"

_ORIGINAL = {}


def _traced_variables(obj):
    return any(is_traced(v._data) for v in obj.variables.values())


# --- idxmax / idxmin -------------------------------------------------------------------------------
def _calc_idxminmax(*, array, func, dim=None, skipna=None, fill_value=xr_dtypes.NA, keep_attrs=None):
    """``computation._calc_idxminmax``: xarray's own where nothing is traced."""
    if not is_traced(array.data):
        return _ORIGINAL["_calc_idxminmax"](array=array, func=func, dim=dim, skipna=skipna,
                                            fill_value=fill_value, keep_attrs=keep_attrs)
    if not array.ndim:
        raise ValueError("This function does not apply for scalars")
    if dim is None:
        if array.ndim != 1:
            raise ValueError("Must supply 'dim' argument for multidimensional arrays")
        dim = array.dims[0]
    if dim not in array.dims:
        raise KeyError(f"Dimension {dim!r} not found in array dimensions {array.dims!r}")
    if dim not in array.coords:
        raise KeyError(f"Dimension {dim!r} is not one of the coordinates {tuple(array.coords.keys())}")
    coord = array[dim]._variable.to_base_variable()
    if is_traced(coord._data):
        name = getattr(func, "__name__", "idxmax").replace("arg", "idx")
        raise UnsupportedOperationError(
            f"xarray's {name} with a traced coordinate {dim!r} (inside a transform): the labels must be "
            f"known; use the positions ({name.replace('idx', 'arg')}) and gather with np.take_along_axis.")

    skip = skipna or (skipna is None and array.dtype.kind in "cfO")
    if skip:
        allna = array.isnull().all(dim)
        array = array.where(~allna, 0)
    index = func(array, dim=dim, axis=None, keep_attrs=keep_attrs, skipna=skipna)
    positions = index.data
    table = np.asarray(coord.data)
    flat = np.reshape(positions, (-1,))
    labels = np.reshape(np.take_along_axis(table, flat, axis=0), np.shape(positions))
    res = index._replace(coord._replace(dims=index.variable.dims, data=labels)).rename(dim)
    if skip:
        res = res.where(~allna, fill_value)
    res.attrs = index.attrs
    return res


# --- sortby ----------------------------------------------------------------------------------------
def _sortby(self, variables, ascending=True):
    """``Dataset.sortby``: xarray's own where no key is traced."""
    original = _ORIGINAL["sortby"]
    if callable(variables):
        variables = variables(self)
    if not isinstance(variables, list):
        variables = [variables]
    arrays = [v if isinstance(v, xr_dataarray.DataArray) else self[v] for v in variables]
    if not any(is_traced(a.data) for a in arrays):
        return original(self, variables, ascending=ascending)
    aligned = xr.align(self, *arrays, join="left")
    aligned_self, others = aligned[0], aligned[1:]
    by_dim = defaultdict(list)
    for data_array in others:
        if data_array.ndim != 1:
            raise ValueError("Input DataArray is not 1-D.")
        (key,) = data_array.dims
        by_dim[key].append(data_array)
    indices = {}
    for key, keys in by_dim.items():
        data = [k.data for k in keys]
        if ascending:
            order = np.lexsort(tuple(reversed(data)))
        else:  # NaN last, as xarray (https://github.com/pydata/xarray/issues/7358)
            order = np.lexsort(tuple([*reversed(data), *[~np.isnan(d) if np.dtype(d.dtype).kind in "fc"
                                                           else np.ones(d.shape, bool) for d in reversed(data)]]))
            order = order[::-1]
        fixed = [name for name, v in aligned_self.variables.items() if key in v.dims and not is_traced(v._data)]
        if is_traced(order) and fixed:
            how = "each example" if is_batched(order) else "each call of lf.jit"
            what = (f"{key!r} has an index coordinate" if key in aligned_self.xindexes else
                    f"the variables {fixed} along {key!r} are not traced")
            raise UnsupportedOperationError(
                f"sortby of traced values along dim {key!r} (inside lf.vmap or lf.jit): {what}, and sorting by "
                f"the values would give their labels a different order in {how}, "
                f"which one labeled result cannot hold. Drop them first (x.drop_vars({fixed!r})), or sort "
                f"the values alone: "
                f"xr.apply_ufunc(np.sort, x, input_core_dims=[[{key!r}]], output_core_dims=[[{key!r}]]). "
                f"Under lf.grad/lf.jvp the order is known and sortby works.")
        indices[key] = order
    return aligned_self.isel(indices)


# --- polyfit ---------------------------------------------------------------------------------------
def _polyfit(obj, dim, deg, skipna=None, rcond=None, w=None, full=False, cov=False):
    """``fit.polyfit``: ``skipna=None`` on traced data is ``skipna=True`` (see the module)."""
    if skipna is None and _traced_variables(obj):
        skipna = True
    return _ORIGINAL["polyfit"](obj, dim, deg, skipna=skipna, rcond=rcond, w=w, full=full, cov=cov)


def _least_squares(lhs, rhs, rcond=None, skipna=False):
    """``duck_array_ops.least_squares`` as ``fit`` imports it: traced rhs with skipna below."""
    if not (skipna and is_traced(rhs)) or is_traced(lhs):
        return _ORIGINAL["least_squares"](lhs, rhs, rcond=rcond, skipna=skipna)
    out_shape = rhs.shape
    rows, order = lhs.shape
    columns = np.reshape(rhs, (rows, -1))  # (n, k)
    missing = np.isnan(columns)
    kept = ~missing
    filled = np.where(missing, 0.0, columns)
    masked = lhs[np.newaxis, :, :] * np.transpose(kept)[:, :, np.newaxis]  # (k, n, m): NaN rows zeroed
    tolerance = rows * np.finfo(np.float64).eps if rcond is None else rcond
    solution = np.matmul(np.linalg.pinv(masked, rcond=tolerance), np.transpose(filled)[:, :, np.newaxis])
    coeffs = np.transpose(solution[:, :, 0])  # (m, k)
    count = np.sum(kept, axis=0)
    coeffs = np.where(count == 0, np.nan, coeffs)
    misfit = filled - np.matmul(lhs, np.where(count == 0, 0.0, coeffs))
    misfit = np.where(kept, misfit, 0.0)
    residuals = np.sum(misfit * misfit, axis=0)
    full_rank = np.linalg.matrix_rank(np.asarray(lhs)) == order
    residuals = np.where((count > order) & full_rank, residuals, np.nan)
    if not full_rank:
        _warn_deficient_rank(order)
    coeffs = np.reshape(coeffs, (order,) + tuple(out_shape[1:]))
    residuals = np.reshape(residuals, tuple(out_shape[1:]))
    return coeffs, residuals


def _warn_deficient_rank(order):
    from xarray.core.nputils import warn_on_deficient_rank
    warn_on_deficient_rank(order - 1, order)


# --- weighted ----------------------------------------------------------------------------------------
_MISSING_WEIGHTS = "`weights` cannot contain missing values. Missing values can be replaced by `weights.fillna(0)`."


def _weighted_init(self, obj, weights):
    """``Weighted.__init__``: xarray's own where the weights are not traced; otherwise the
    same check (no missing value), made per example: ValueError naming the examples whose
    weights hold NaN, as the loop raises for them (under lf.jit re-checked at every call)."""
    if not isinstance(weights, xr_dataarray.DataArray) or not is_traced(weights.data):
        return _ORIGINAL["__init__"](self, obj, weights)
    if np.dtype(getattr(weights.dtype, "_np_dtype", weights.dtype)).kind in "fc":  # others hold no NaN

        def error(examples):
            return ValueError(_MISSING_WEIGHTS + (f" (NaN in the weights of {examples})" if examples else ""))

        check_examples(weights.data, lambda rows: np.isnan(rows).any(axis=1), error,
                       "the check of weighted() that the weights hold no NaN")
    self.obj = obj
    self.weights = weights


# --- installing ------------------------------------------------------------------------------------
def _nanfirst(values, axis, keepdims=False):
    return _first_or_last(values, axis, keepdims, last=False)


def _nanlast(values, axis, keepdims=False):
    return _first_or_last(values, axis, keepdims, last=True)


def _first_or_last(values, axis, keepdims, last):
    """xarray's nanfirst/nanlast: the first (last) element along ``axis`` that is not NaN."""
    if not is_traced(values):
        return _ORIGINAL["nanlast" if last else "nanfirst"](values, axis, keepdims=keepdims)
    if isinstance(axis, tuple):
        (axis,) = axis
    axis = axis % values.ndim
    valid = ~np.isnan(values)
    if last:
        position = values.shape[axis] - 1 - np.argmax(np.flip(valid, axis=axis), axis=axis, keepdims=True)
    else:
        position = np.argmax(valid, axis=axis, keepdims=True)
    picked = np.take_along_axis(values, position, axis=axis)
    return picked if keepdims else np.squeeze(picked, axis=axis)


def _zero_d_traced(key):
    """A 0-d traced integer position (``x.argmax("t")`` per example, or under lf.jit)."""
    data = key._data if isinstance(key, xr.Variable) else key.variable._data if isinstance(key, xr.DataArray) else key
    return (is_traced(data) and getattr(data, "ndim", None) == 0
            and np.dtype(getattr(data, "dtype", float)).kind in "iu"), data


def _variable_getitem(self, key):
    """``Variable.__getitem__`` (every isel of a variable): xarray drops a dim only for a
    concrete integer position.  Where a position is a 0-d traced integer, the variable is
    indexed as NumPy indexes with an integer (the dim dropped), by ``np.take`` at the traced
    position: an index coordinate's labels (numbers) are gathered from their table."""
    original = _ORIGINAL["__getitem__"]
    parts = self._item_key_to_tuple(key)
    if not isinstance(parts, tuple):
        parts = (parts,)
    found = [_zero_d_traced(k) for k in parts]
    if not any(traced for traced, _ in found):
        if (len(parts) == 1 and isinstance(parts[0], xr.Variable) and is_traced(parts[0]._data)
                and np.dtype(parts[0].dtype).kind in "iu" and self.ndim == 1 and not is_traced(self._data)):
            return _gathered_labels(self, parts[0])
        return original(self, key)
    parts = xr_indexing.expanded_indexer(tuple(data if traced else k for k, (traced, data) in
                                               zip(parts, found + [(False, None)] * (len(parts) - len(found)))),
                                         self.ndim)
    plain = []
    for k in parts:
        if isinstance(k, (slice, int, np.integer)) and not isinstance(k, bool):
            plain.append(k)
        elif is_traced(k) and k.ndim == 0:
            plain.append(slice(None))
        else:
            return original(self, key)   # arrays among the positions: xarray's own (it raises)
    data = self.data
    if np.dtype(data.dtype).kind not in "biufc":
        raise UnsupportedOperationError(
            f"isel of the coordinate along {', '.join(map(repr, self.dims))} at a traced position (a 0-d index "
            "computed from the values, e.g. argmax) "
            f"picks a label of dtype {data.dtype} per example or per call, which no kernel gathers: drop that "
            "coordinate first (x.drop_vars(name)), or select with the position as a length-1 dim "
            "(x.isel(t=i.expand_dims('k')).squeeze('k', drop=True))")
    data = data[tuple(plain)]
    axis, dims = 0, []
    for dim, k in zip(self.dims, parts):
        if isinstance(k, slice):
            dims.append(dim)
            axis += 1
        elif is_traced(k):
            # np.take dispatches on the table only; take_along_axis on both (the dim dropped after)
            picked = np.take_along_axis(data, np.reshape(k, (1,) * np.ndim(data)), axis=axis)
            data = np.squeeze(picked, axis=axis)
    return self._finalize_indexing_result(tuple(dims), data)


def _variable_roll_one_dim(self, dim, count):
    """``Variable._roll_one_dim`` (every ``roll``): xarray rolls by two slices and a
    concatenation (three operations, each through every transform's level).  Where the
    data is traced, one ``np.roll`` of it: the same values (a roll moves elements), one
    operation to record and differentiate (a stencil's ``x.roll(site=1)`` at every step)."""
    if not is_traced(self._data):
        return _ORIGINAL["_roll_one_dim"](self, dim, count)
    axis = self.get_axis_num(dim)
    return self._replace(data=np.roll(self._data, count % (self.shape[axis] or 1), axis=axis))


def _gathered_labels(coordinate, positions):
    """A 1-D variable that holds no traced value (an index coordinate's pandas labels, or
    another coordinate along the dim) at traced positions with dims of their own
    (``x.isel(t=x.argmax("t"))`` where the argmax has other dims): its numeric values
    gathered at the positions, as a Variable of the positions' dims (xarray's pointwise
    selection, which asks pandas or NumPy with the positions)."""
    labels = coordinate.values
    if labels.dtype.kind not in "biufc":
        raise UnsupportedOperationError(
            f"isel of the coordinate along {coordinate.dims[0]!r} at traced positions picks labels of dtype "
            f"{labels.dtype} per example or per call, which no kernel gathers: drop that coordinate first "
            "(x.drop_vars(name))")
    flat = np.reshape(positions._data, (-1,))
    picked = np.take_along_axis(labels, flat, axis=0)
    return xr.Variable(positions.dims, np.reshape(picked, np.shape(positions._data)), coordinate.attrs)


def _pandas_index_sel(self, labels, method=None, tolerance=None):
    """``PandasIndex.sel``: pandas finds the positions of the labels, which it needs
    concrete.  Where the label is traced and ``method="nearest"`` on a numeric increasing
    index, the positions are found as pandas finds them (the nearer of the neighbours below
    and above, the one above at a tie) by ``np.searchsorted``, traced: ``isel`` then takes
    them (see ``_variable_getitem``)."""
    original = _ORIGINAL["sel"]
    if method != "nearest" or tolerance is not None or len(labels) != 1:
        return original(self, labels, method=method, tolerance=tolerance)
    (name, label), = labels.items()
    data = label.variable._data if isinstance(label, xr.DataArray) else label._data if isinstance(label, xr.Variable) \
        else label
    index = self.index
    if (not is_traced(data) or np.dtype(data.dtype).kind not in "iuf" or index.dtype.kind not in "iuf"
            or not index.is_monotonic_increasing or len(index) == 0):
        return original(self, labels, method=method, tolerance=tolerance)
    values = np.asarray(index, dtype=np.float64)
    target = data.astype(np.float64) if data.dtype != np.float64 else data
    above = np.searchsorted(values, target, side="left")                  # the first label >= target
    below = np.searchsorted(values, target, side="right") - 1             # the last label <= target
    n = len(values)
    above_c, below_c = np.minimum(above, n - 1), np.maximum(below, 0)
    flat = lambda k: np.reshape(k, (-1,))  # noqa: E731
    at_above = np.reshape(np.take_along_axis(values, flat(above_c), axis=0), np.shape(target))
    at_below = np.reshape(np.take_along_axis(values, flat(below_c), axis=0), np.shape(target))
    nearer_below = (np.abs(at_below - target) < np.abs(at_above - target)) | (above >= n)
    position = np.where((below >= 0) & nearer_below, below_c, above_c)
    if isinstance(label, xr.Variable):
        position = xr.Variable(label.dims, position)
    elif isinstance(label, xr.DataArray):
        position = xr.DataArray(position, coords=label._coords, dims=label.dims)
    return xr_indexes.IndexSelResult({self.dim: position})


def _check():
    """None if xarray's internals look as these hooks expect, else why not."""
    comp, fit, ds, da = xr_computation, xr_fit, xr_dataset.Dataset, xr_dataarray.DataArray
    for module, name in ((comp, "_calc_idxminmax"), (fit, "polyfit"), (fit, "least_squares")):
        if not callable(getattr(module, name, None)):
            return f"{getattr(module, '__name__', module)}.{name} is missing"
    params = list(inspect.signature(comp._calc_idxminmax).parameters)
    if params != ["array", "func", "dim", "skipna", "fill_value", "keep_attrs"]:
        return f"_calc_idxminmax has the parameters {params}"
    for method in (da.idxmax, da.idxmin):
        if "_calc_idxminmax" not in code_of(method).co_names:
            return f"DataArray.{method.__name__} does not call _calc_idxminmax by name"
    params = list(inspect.signature(fit.polyfit).parameters)
    if params != ["obj", "dim", "deg", "skipna", "rcond", "w", "full", "cov"]:
        return f"xarray.computation.fit.polyfit has the parameters {params}"
    if "least_squares" not in code_of(fit.polyfit).co_names:
        return "fit.polyfit does not call least_squares by name"
    if list(inspect.signature(fit.least_squares).parameters) != ["lhs", "rhs", "rcond", "skipna"]:
        return "least_squares does not take (lhs, rhs, rcond, skipna)"
    if "polyfit" not in code_of(ds.polyfit).co_names:
        return "Dataset.polyfit does not call fit.polyfit"
    if list(inspect.signature(ds.sortby).parameters) != ["self", "variables", "ascending"]:
        return "Dataset.sortby does not take (variables, ascending)"
    if "lexsort" not in code_of(ds.sortby).co_names or "sortby" not in code_of(da.sortby).co_names:
        return "Dataset.sortby does not sort with np.lexsort, or DataArray.sortby does not call it"
    weighted = xr_weighted.Weighted.__init__
    if list(inspect.signature(weighted).parameters) != ["self", "obj", "weights"]:
        return "Weighted.__init__ does not take (obj, weights)"
    if not hooked(weighted) and "_weight_check" not in code_of(weighted).co_varnames:
        return "Weighted.__init__ does not check the weights with _weight_check"
    if list(getattr(xr_weighted.Weighted, "__slots__", ())) != ["obj", "weights"]:
        return "Weighted holds other attributes than (obj, weights)"
    if list(inspect.signature(xr_variable.Variable.__getitem__).parameters) != ["self", "key"]:
        return "Variable.__getitem__ does not take (key)"
    for name in ("_item_key_to_tuple", "_finalize_indexing_result"):
        if not callable(getattr(xr_variable.Variable, name, None)):
            return f"Variable has no {name}"
    if "__getitem__" in xr_variable.IndexVariable.__dict__:
        return "IndexVariable has its own __getitem__"
    roll = xr_variable.Variable._roll_one_dim
    if list(inspect.signature(roll).parameters) != ["self", "dim", "count"] or (
            not hooked(roll) and "concatenate" not in code_of(roll).co_names):
        return "Variable._roll_one_dim does not take (dim, count) or roll by a concatenation"
    if "_roll_one_dim" not in code_of(xr_variable.Variable.roll).co_names:
        return "Variable.roll does not call _roll_one_dim"
    sel = inspect.signature(xr_indexes.PandasIndex.sel)
    if list(sel.parameters) != ["self", "labels", "method", "tolerance"] or not hasattr(xr_indexes, "IndexSelResult"):
        return "PandasIndex.sel does not take (labels, method, tolerance)"
    for name in ("nanfirst", "nanlast"):
        function = getattr(xr_nputils, name, None)
        if not callable(function) or list(inspect.signature(function).parameters) != ["values", "axis", "keepdims"]:
            return f"xarray.core.nputils.{name} does not take (values, axis, keepdims)"
    return None


def installed():
    """Whether these methods go through this module under transforms."""
    return hooked(xr_computation._calc_idxminmax, xr_fit.polyfit, xr_fit.least_squares, xr_dataset.Dataset.sortby,
                  xr_weighted.Weighted.__init__, xr_nputils.nanfirst, xr_nputils.nanlast,
                  xr_variable.Variable.__getitem__, xr_variable.Variable._roll_one_dim, xr_indexes.PandasIndex.sel)


def install():
    """Patch xarray (idempotent); return ``STATUS``."""
    global STATUS
    if installed():
        return STATUS
    reason = _check()
    if reason is not None:
        STATUS = f"not installed: {reason}"
        return STATUS
    targets = ((xr_computation, "_calc_idxminmax", _calc_idxminmax), (xr_fit, "polyfit", _polyfit),
               (xr_fit, "least_squares", _least_squares), (xr_dataset.Dataset, "sortby", _sortby),
               (xr_weighted.Weighted, "__init__", _weighted_init), (xr_nputils, "nanfirst", _nanfirst),
               (xr_nputils, "nanlast", _nanlast), (xr_variable.Variable, "__getitem__", _variable_getitem),
               (xr_variable.Variable, "_roll_one_dim", _variable_roll_one_dim),
               (xr_indexes.PandasIndex, "sel", _pandas_index_sel))
    patch(targets, _ORIGINAL)
    STATUS = "installed"
    return STATUS


def original(name):
    """xarray's own function (for tests)."""
    return _ORIGINAL[name]


install()  # at import (labeled_func imports this module): idempotent, version-checked
