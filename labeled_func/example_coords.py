"""What one example sees of the coordinates along a mapped dim.

In the loop, ``x.isel(time=i)`` keeps every coordinate along ``time`` as a scalar: the
index label ``time`` and the others (``doy``).  Inside ``lf.vmap`` each example gets them
too, as 0-d coordinates:

- numeric ones (the index of numeric labels included) as mapped 0-d values, usable in
  arithmetic like data (``v * v.doy``);
- dates, times, strings and objects, which no kernel computes with, as
  :class:`HiddenLabels`: ``==`` and ``!=`` work (a mapped boolean), anything else (``.dt``,
  ``.values``, arithmetic) raises UnsupportedOperationError saying how to pass what the
  function needs.

On the way out, an example coordinate that the function left as it was is put back as the
caller's 1-D coordinate; one it changed comes back from its examples, as in the loop.

When xarray merges coordinates (``a + b``, ``xr.where``, ``rolling``), it compares two
traced copies of one coordinate, or a mapped label with a shared one
(``m - ens.sel(member=3)``), with ``bool()``: this module registers xarray's equality
checks with the engine (:func:`labeled_func.engine.batching.register_equality_checks`),
so that each example's answer is used where all of them agree, and a merge that drops
differing coordinates drops one on which they disagree.
"""
from __future__ import annotations

import importlib
import sys
from typing import NamedTuple

import numpy as np
import xarray as xr
from xarray.core import duck_array_ops

from .assemble import coord_variables
from .engine import batch_value, held, is_traced, unbatch_value
from .named import tree_nodes
from .engine import traced_by
from .engine.batching import copied_as_itself, register_equality_checks
from .engine.errors import UnsupportedOperationError
from .engine.numpy import DEFERRING_TYPES

__all__ = ["ExampleCoord", "example_coords", "Entered", "attach", "restore_untouched", "HiddenLabels",
           "is_traceable", "same_variable", "coordinates_copied_as_themselves"]


class ExampleCoord(NamedTuple):
    """A 1-D coordinate along the mapped dim of one argument, which its examples see as
    scalars; ``restorable``: the very coordinate that outputs get back (an output left with
    it untouched then gets the caller's variable back rather than one unmapped from it)."""

    variable: xr.Variable
    restorable: bool


def is_traceable(dtype):
    """Whether a coordinate of ``dtype`` is mapped as a value (numbers and booleans)."""
    try:
        return np.dtype(getattr(dtype, "_np_dtype", dtype)).kind in "biufc"
    except TypeError:  # a pandas extension dtype (categorical, ...): labels
        return False


def example_coords(leaf, dim, restored):
    """{name: ExampleCoord} of a DataArray or Dataset ``leaf`` mapped over ``dim``; ``restored``
    the 1-D coordinates that outputs get back (the vmap's plan)."""
    if not isinstance(leaf, (xr.DataArray, xr.Dataset)):
        return {}
    found = {}
    for name, coord in coord_variables(leaf).items():
        if coord.dims != (dim,):
            continue
        variable = coord
        if isinstance(variable, xr.IndexVariable):
            variable = xr.Variable((dim,), variable.values, variable.attrs)
        found[name] = ExampleCoord(variable, same_variable(restored.get(name), coord))
    return found


def same_variable(a, b):
    """Whether variables ``a`` and ``b`` (or None) are one coordinate: the same data, or equal
    in-memory values."""
    if a is None or b is None:
        return False
    if a is b or a._data is b._data:
        return True
    return (a.dims == b.dims and a.dtype == b.dtype and isinstance(a.data, np.ndarray)
            and isinstance(b.data, np.ndarray) and a.equals(b))


class Entered:
    """The example coordinates of one vmap call: one inside value per distinct coordinate
    (equal coordinates of several arguments are one object, which xarray's merges recognise
    without comparing), and which of them outputs may give back untouched."""

    def __init__(self, level):
        self.level = level
        self.by_name = {}   # name -> [(1-D variable, 0-d inside variable)]
        self.untouched = {}  # id of an inside value -> (name, restorable, the value: kept alive)

    def inside(self, name, example):
        for variable, scalar in self.by_name.get(name, ()):
            if same_variable(variable, example.variable):
                break
        else:
            variable = example.variable
            if is_traceable(variable.dtype):
                data = batch_value(self.level, variable.data, 0)
            else:
                labels = variable.data
                if not (isinstance(labels, np.ndarray) or is_traced(labels)):  # pandas extension arrays
                    labels = np.asarray(variable.values)
                data = HiddenLabels(self.level, labels, name, variable.dims[0])
            scalar = xr.Variable((), data, variable.attrs)
            self.by_name.setdefault(name, []).append((variable, scalar))
        key = id(scalar._data)
        restorable = example.restorable or self.untouched.get(key, (None, False))[1]
        self.untouched[key] = (name, restorable, scalar._data)
        return scalar


def attach(mapped, examples, entered):
    """``mapped`` (a leaf as one example) with its example coordinates as 0-d coordinates."""
    if not examples:
        return mapped
    new = {name: entered.inside(name, example) for name, example in examples.items()}
    # assign_coords would merge and align (~0.2-0.4 ms a call); 0-d coordinates named like
    # none of the leaf's variables need neither, so they go in directly (as jit.py's templates)
    if isinstance(mapped, xr.DataArray):
        return mapped._replace(coords={**mapped._coords, **new}, indexes=dict(mapped._indexes))
    return mapped._replace({**mapped._variables, **new}, coord_names=mapped._coord_names | set(new))


def coordinates_copied_as_themselves(leaf, level):
    """The mapped coordinates of an argument ``leaf`` as it enters ``level`` (those along the
    mapped dim and those spanning it) are their own copies (see ``copied_as_itself``)."""
    if isinstance(leaf, xr.DataTree):
        for node in leaf.subtree:
            coordinates_copied_as_themselves(node.to_dataset(inherit=False), level)
    elif isinstance(leaf, (xr.DataArray, xr.Dataset)):
        for coord in coord_variables(leaf).values():
            if traced_by(coord._data, level):
                copied_as_itself(coord._data)


def restore_untouched(value, entered):
    """An output leaf made ready to leave the level: the example coordinates the function
    left untouched are dropped (the caller's 1-D coordinates replace them), and labels of
    this level returned as data or renamed come out as mapped values."""
    if isinstance(value, xr.DataArray):
        dropped = _untouched_names(value, entered)
        value = value.drop_vars(dropped) if dropped else value
        if _hidden_of(value.variable._data, entered.level):
            value = value.copy(data=value.variable._data.mapped())
        return _reveal_coords(value, entered.level)
    if isinstance(value, xr.Dataset):
        dropped = _untouched_names(value, entered)
        value = value.drop_vars(dropped) if dropped else value
        revealed = {name: var.copy(data=var._data.mapped()) for name, var in value._variables.items()
                    if name not in value._coord_names and _hidden_of(var._data, entered.level)}
        value = value.assign(revealed) if revealed else value
        return _reveal_coords(value, entered.level)
    if isinstance(value, xr.DataTree):
        return xr.DataTree.from_dict({path: restore_untouched(ds, entered) for path, ds in tree_nodes(value)},
                                     name=value.name)
    if isinstance(value, xr.Variable) and _hidden_of(value._data, entered.level):
        return value.copy(data=value._data.mapped())
    if _hidden_of(value, entered.level):
        return value.mapped()
    return value


def _untouched_names(value, entered):
    names = []
    for name, coord in coord_variables(value).items():
        found = entered.untouched.get(id(coord._data))
        if found is not None and found[0] == name and found[1]:
            names.append(name)
        elif coord.ndim and _spread_label(name, coord, entered):
            names.append(name)
    return names


def _spread_label(name, coord, entered):
    """Whether ``coord`` is an example coordinate ``name`` that xarray spread along other dims
    (groupby arithmetic broadcasts each example's scalar label along the grouped dim), its
    values still every example's own label: then it leaves as the caller's 1-D coordinate, as
    the loop over ``isel(..., drop=True)`` gives, not as a coordinate of the mapped dim and
    those dims.  Decided on the values (vmap computes them; under lf.jit, those traced)."""
    entries = entered.by_name.get(name, ())
    if len(entries) != 1 or not traced_by(coord._data, entered.level):
        return False
    variable, scalar = entries[0]
    if not entered.untouched.get(id(scalar._data), (None, False))[1] or not is_traceable(variable.dtype):
        return False
    values = unbatch_value(entered.level, coord._data, 0)
    while is_traced(values):   # the values below other levels: a primal, or lf.jit's traced call's
        values = held(values)[0]
    labels = variable.data
    if is_traced(labels) or not isinstance(values, np.ndarray) or values.shape[:1] != labels.shape:
        return False
    return bool(np.array_equal(values, np.asarray(labels).reshape(labels.shape + (1,) * (values.ndim - 1))
                               * np.ones_like(values)))


def _reveal_coords(value, level):
    revealed = {name: coord.copy(data=coord._data.mapped())
                for name, coord in coord_variables(value).items() if _hidden_of(coord._data, level)}
    return value.assign_coords(revealed) if revealed else value


def _hidden_of(data, level):
    return type(data) is HiddenLabels and data.level is level


# --- labels that no kernel computes with -------------------------------------------------------
class HiddenLabels:
    """One example's label of a coordinate along the mapped dim that vmap does not trace
    (datetime64, timedelta64, strings, objects such as cftime dates): a 0-d stand-in that
    holds the labels of every example.

    ``label == other`` and ``label != other`` give a mapped boolean (``xr.where(v.member ==
    "ctrl", ...)``), and so do the null checks xarray makes when it compares coordinates;
    everything else raises UnsupportedOperationError.  Copies are the object itself: xarray
    then recognises a copied coordinate without comparing it.
    """

    __array_priority__ = 2000  # above a tracer's: `tracer == label` comes here
    __hash__ = None
    shape = ()
    ndim = 0
    size = 1

    def __init__(self, level, labels, name, dim):
        self.level = level
        self.labels = labels  # one per example, along the first axis
        self.name = name
        self.dim = dim

    @property
    def dtype(self):
        return self.labels.dtype

    @property
    def nbytes(self):
        return self.labels.dtype.itemsize

    def mapped(self):
        """The labels as a value mapped by the level (for outputs)."""
        return batch_value(self.level, self.labels)

    def __deepcopy__(self, memo=None):
        return self

    def __copy__(self):
        return self

    def __repr__(self):
        return f"HiddenLabels({self.name!r} along the mapped dim {self.dim!r}, dtype={self.dtype})"

    def _repr_inline_(self, max_width):
        text = f"{self.dtype} label of each example"
        return text if len(text) <= max_width else text[: max(max_width - 3, 0)] + "..."

    # --- what works: comparisons ---------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method == "__call__" and not kwargs:
            if ufunc in (np.equal, np.not_equal) and len(inputs) == 2:
                return self._compare(ufunc, *inputs)
            if ufunc is np.isnat and len(inputs) == 1:
                return self.mapped_result(np.isnat(self.labels))
        raise self._refused(f"np.{ufunc.__name__}")

    def __array_function__(self, func, types, args, kwargs):
        if func is np.full_like and args and args[0] is self:
            # xarray's null check of strings: no label of theirs is missing
            fill = kwargs.get("fill_value", args[1] if len(args) > 1 else None)
            return np.full((), fill, dtype=kwargs.get("dtype", args[2] if len(args) > 2 else None))
        raise self._refused(f"np.{func.__name__}")

    def __eq__(self, other):
        return self._compare(np.equal, self, other)

    def __ne__(self, other):
        return self._compare(np.not_equal, self, other)

    def _compare(self, ufunc, a, b):
        other = b if a is self else a
        if isinstance(other, (xr.DataArray, xr.Dataset, xr.Variable)):
            return NotImplemented
        if type(other) is HiddenLabels and other.level is self.level:
            other_labels = other.labels
        elif isinstance(other, (np.ndarray, np.generic, str, bytes, int, float, complex)) or other is None:
            other = np.asarray(other)
            other_labels = other.reshape((1,) + other.shape)
        else:
            raise self._refused(f"comparing it with a {type(other).__name__}")
        mine = self.labels.reshape(self.labels.shape + (1,) * (np.ndim(other_labels) - 1))
        return self.mapped_result(ufunc(mine, other_labels))

    def mapped_result(self, values):
        if not self.level.alive:
            self.level.escaped("a label of a coordinate along a mapped dim")
        return batch_value(self.level, values)

    # --- what does not ----------------------------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        raise self._refused("converting it to a NumPy array (.values, np.asarray, .dt, pandas)")

    def __bool__(self):
        raise self._refused("bool() of it (an `if` on a label)")

    def __getitem__(self, key):
        raise self._refused("indexing it")

    def astype(self, dtype, *args, **kwargs):
        raise self._refused(f"casting it to {dtype}")

    def transpose(self, *axes):
        return self

    def _refused(self, what):
        if _in_datetime_accessor(sys._getframe(1)):
            what = "xarray's .dt accessor"
        return UnsupportedOperationError(
            f"vmap over dim {self.dim!r}: {what} needs the label of coordinate {self.name!r} "
            f"({self.dtype}) of each example, which vmap does not trace (it traces numbers and "
            "booleans; `==` and `!=` with a label work, giving a mapped boolean). Compute what "
            "the function needs from the labels outside vmap and pass it as a numeric coordinate "
            "along the mapped dim, e.g. x.assign_coords(hour=x.time.dt.hour) and then v.hour "
            "inside, or as an argument mapped over the dim."
        )


DEFERRING_TYPES.add(HiddenLabels)  # `tracer == label` is the label's to answer


def _in_datetime_accessor(frame, depth=8):
    """Whether one of ``depth`` frames above runs xarray's ``.dt`` (pandas computes its fields)."""
    for _ in range(depth):
        if frame is None:
            return False
        if frame.f_globals.get("__name__", "").endswith("accessor_dt"):
            return True
        frame = frame.f_back
    return False


def _register_xarray_equality_checks():
    """xarray's array_equiv family (``Variable.equals`` and friends) and the merge of
    variables of one name (``unique_variable``), wherever this xarray version keeps them."""
    checks = [getattr(duck_array_ops, name, None)
              for name in ("array_equiv", "array_notnull_equiv", "allclose_or_equiv")]
    merges = []
    for module in ("xarray.structure.merge", "xarray.core.merge"):
        try:
            merges.append(getattr(importlib.import_module(module), "unique_variable", None))
        except ImportError:
            continue
    register_equality_checks({f.__code__ for f in checks if f is not None},
                             {f.__code__ for f in merges if f is not None})


_register_xarray_equality_checks()
