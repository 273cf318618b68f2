"""Pytrees of labeled values as flat lists of arrays, and back.

Transforms trace arrays; their arguments and outputs are pytrees (tuples, dicts) of
DataArrays, Datasets, bare arrays and numbers.  :class:`FlatArrays` holds the arrays
inside one such value and puts new ones back in their place (a DataArray keeps its
dims, coords and name; a Dataset its variables).  :func:`match_arrays` lines up a
tangent or cotangent with the value it belongs to, by structure and dim names (labels
are never aligned silently).
"""
from __future__ import annotations

import numbers

import numpy as np
import optree
import xarray as xr

from labeled_func_kernels import creation as kc
from labeled_func_kernels.backend import dtype_kind

from .assemble import dataarray_holding, dataset_holding, holding

__all__ = ["FlatArrays", "match_arrays", "replace_arrays"]


class FlatArrays:
    """The arrays inside one argument (or output), and how to put new ones back."""

    def __init__(self, value, label, name, allow_any=False):
        self.value = value
        paths, self.leaves, self.treedef = optree.tree_flatten_with_path(value, none_is_leaf=True)
        self.arrays, self.counts = [], []
        for path, leaf in zip(paths, self.leaves):
            where = label + "".join(f"[{k!r}]" for k in path)
            found = self._arrays_of(leaf, where, name, allow_any)
            self.arrays.extend(found)
            self.counts.append(len(found))

    @staticmethod
    def _arrays_of(leaf, label, name, allow_any):
        if isinstance(leaf, xr.DataArray):
            found = [leaf.data]
        elif isinstance(leaf, xr.Dataset):
            found = [leaf._variables[v].data for v in leaf.data_vars]
        elif isinstance(leaf, xr.DataTree):
            if allow_any:  # an output or aux
                raise TypeError(f"{name}: {label} is a DataTree, which {name} cannot return; return "
                                "tree.to_dict() (a dict of Datasets) or one of its datasets instead")
            raise TypeError(f"{name}: {label} is a DataTree; differentiate with respect to its datasets instead")
        elif hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
            found = [leaf]
        elif isinstance(leaf, numbers.Number) and not isinstance(leaf, (bool, np.bool_)):
            if not allow_any and isinstance(leaf, numbers.Integral):
                raise TypeError(
                    f"{name}: {label} is the integer {leaf!r}; only floating-point inputs can be "
                    f"differentiated (pass {float(leaf)!r}, or leave it out of argnums)"
                )
            found = [np.asarray(leaf)]  # a float is float64, a complex complex128
        elif allow_any and isinstance(leaf, (bool, np.bool_)):  # an output: a 0-d bool, whose tangent is False
            found = [np.asarray(leaf)]
        elif leaf is None or allow_any:
            return []
        else:
            raise TypeError(f"{name}: cannot differentiate with respect to {label} of type {type(leaf).__name__}")
        if not allow_any:
            for array in found:
                if dtype_kind(array.dtype) not in "fc":
                    raise TypeError(
                        f"{name}: {label} has dtype {array.dtype}; only floating-point inputs can be "
                        "differentiated (cast it with .astype(float), or leave it out of argnums)"
                    )
        return found

    def rebuild(self, arrays):
        leaves, k = [], 0
        for leaf, count in zip(self.leaves, self.counts):
            new = arrays[k:k + count]
            k += count
            leaves.append(replace_arrays(leaf, new) if count else leaf)
        return optree.tree_unflatten(self.treedef, leaves)


def replace_arrays(leaf, arrays):
    """``leaf`` (a DataArray, a Dataset or an array) holding ``arrays`` instead of its own."""
    if isinstance(leaf, xr.DataArray):
        variable = leaf.variable
        if tuple(arrays[0].shape) == variable.shape:  # else copy() says what differs
            return dataarray_holding(leaf, holding(variable, arrays[0]))
        return leaf.copy(deep=False, data=arrays[0])
    if isinstance(leaf, xr.Dataset):
        names = list(leaf.data_vars)
        variables = leaf._variables
        if len(names) == len(arrays) and all(tuple(a.shape) == variables[n].shape for n, a in zip(names, arrays)):
            return dataset_holding(leaf, {n: holding(variables[n], a) for n, a in zip(names, arrays)})
        return leaf.copy(deep=False, data=dict(zip(names, arrays)))
    return arrays[0]


def match_arrays(reference, given, name, what="cotangent"):
    """The arrays of ``given`` aligned with those of ``reference`` (DataArrays by dim name)."""
    ref_leaves = optree.tree_flatten(reference, none_is_leaf=True)[0]
    try:
        given_leaves = optree.tree_flatten(given, none_is_leaf=True)[0]
        if len(given_leaves) != len(ref_leaves):
            raise ValueError
        given_leaves = optree.tree_structure(reference, none_is_leaf=True).flatten_up_to(given)
    except ValueError:
        raise ValueError(f"{name}: the {what} must have the structure of the output/argument ({reference!r:.200})") from None
    arrays, dtypes = [], []
    for ref, value in zip(ref_leaves, given_leaves):
        if isinstance(ref, xr.DataArray):
            dtypes.append(ref.dtype)
            arrays.append(_align(ref, value, name, what))
        elif isinstance(ref, xr.Dataset):
            if isinstance(value, xr.Dataset):
                missing = [v for v in ref.data_vars if v not in value.data_vars]
                unknown = [v for v in value.data_vars if v not in ref.data_vars]
                if missing or unknown:
                    problems = ([f"no variable {', '.join(map(repr, missing))}"] if missing else []) + (
                        [f"variable(s) {', '.join(map(repr, unknown))} that the Dataset it belongs to lacks"]
                        if unknown else [])
                    raise ValueError(
                        f"{name}: the {what} Dataset has {' and '.join(problems)}; it needs exactly the "
                        f"data variables {list(ref.data_vars)}"
                    )
            for var in ref.data_vars:
                dtypes.append(ref[var].dtype)
                arrays.append(_align(ref[var], value[var] if isinstance(value, xr.Dataset) else value, name, what))
        elif hasattr(ref, "shape") or isinstance(ref, numbers.Number):
            data = value.data if isinstance(value, xr.DataArray) else value
            ref_shape = tuple(getattr(ref, "shape", ()))
            if tuple(getattr(data, "shape", ())) != ref_shape:
                raise ValueError(f"{name}: the {what} has shape {tuple(getattr(data, 'shape', ()))} but {ref_shape} was expected")
            if not hasattr(data, "shape"):
                data = (kc.full_like.bind(ref, fill_value=data) if hasattr(ref, "shape")
                        else np.asarray(data, dtype=getattr(ref, "dtype", float)))
            dtypes.append(ref.dtype if hasattr(ref, "dtype") else np.asarray(ref).dtype)
            arrays.append(data)
    for dtype, array in zip(dtypes, arrays):
        if dtype_kind(array.dtype) == "c" and dtype_kind(dtype) != "c":
            raise TypeError(
                f"{name}: the {what} is complex ({array.dtype}) but the value it belongs to is real ({dtype}); "
                f"a real value's {what} is real (pass its real part, or make the value complex)"
            )
    return arrays


def _align(ref, value, name, what):
    if isinstance(value, xr.DataArray):
        if set(value.dims) != set(ref.dims):
            raise ValueError(f"{name}: the {what} has dims {value.dims} but the value it belongs to has dims {ref.dims}")
        for dim in ref.dims:
            mine, theirs = ref.indexes.get(dim), value.indexes.get(dim)
            if mine is not None and theirs is not None and not mine.equals(theirs):
                fix = (f"reorder it first, e.g. {what}.reindex_like(value)" if set(mine) == set(theirs)
                       else "build it on the value's coords, e.g. from xr.zeros_like(value)")
                raise ValueError(
                    f"{name}: the {what} has other labels along dim {dim!r} than the value it "
                    f"belongs to ({list(theirs[:5])}{'...' if len(theirs) > 5 else ''} vs "
                    f"{list(mine[:5])}{'...' if len(mine) > 5 else ''}); labels are never aligned "
                    f"silently: {fix}"
                )
        value = value.transpose(*ref.dims).data
    if not hasattr(value, "shape"):  # a Python number: that value everywhere, in the output's library
        return kc.full_like.bind(ref.data, fill_value=value, dtype=ref.dtype)
    if tuple(value.shape) != tuple(ref.shape):
        raise ValueError(f"{name}: the {what} has shape {tuple(value.shape)} but {tuple(ref.shape)} (dims {ref.dims}) was expected")
    return value
