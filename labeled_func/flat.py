"""Pytrees of labeled values as flat lists of arrays, and back.

Transforms trace arrays; their arguments and outputs are pytrees (tuples, dicts) of
DataArrays, Datasets, Variables, DataTrees, bare arrays and numbers.  :class:`Arrays` is
the one walk over such a pytree: the arrays inside it, and the same pytree holding new
ones in their place (a DataArray keeps its dims, coords and name; a Dataset its
variables; a Variable its dims and attrs; a DataTree its nodes).  The floor-3 modules
that flatten labeled values into their data arrays use it (tests/test_flat.py fails on
one that walks them on its own; lf.jit's per-call signature pass is the one exception,
held to the same arrays; dask.py's graphs walk every variable, coordinates included,
which is another question).  Its policy, leaf by leaf:

- a DataArray: its data; a Dataset: its data variables' data, in ``data_vars`` order
  (coordinates are never among the arrays); a Variable: its data, rebuilt as a Variable
  of the same dims and attrs; a DataTree: its nodes' data variables, parents first
  (rebuilt as a DataTree of the same name and paths);
- a number (a Python ``bool``/``int``/``float``/``complex`` or a NumPy scalar, which
  counts as a number even though it has a ``shape``): with ``numbers="keep"`` (the
  default) it stays a constant of the pytree and holds no array; with
  ``numbers="arrays"`` it is one 0-d array (``np.asarray``: NumPy's dtype) and comes
  back as the 0-d array put in its place, for the callers that trace it;
- a 0-d or any other array (anything with ``shape`` and ``dtype``): itself;
- None, strings and every other object: constants, holding no array.

Callers that refuse some leaves (ravel refuses numbers, lf.checkpoint DataTrees...)
say so with ``check(leaf, path)``, which raises their own error; the walk is the same.
:class:`FlatArrays` is the walk of an argument or output of autodiff (floating-point
arrays checked).  :func:`match_arrays` lines up a tangent or cotangent with the value it
belongs to, by structure and dim names (labels are never aligned silently).
"""
from __future__ import annotations

import numbers

import numpy as np
import optree
import xarray as xr

from labeled_func_kernels import creation as kc
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels.backend import dtype_kind

from .assemble import dataarray_holding, dataset_holding, holding
from .engine import is_traced
from .named import tree_nodes

__all__ = ["Arrays", "FlatArrays", "is_number", "leaf_arrays", "match_arrays", "replace_arrays"]


def is_number(leaf):
    """A Python or NumPy number (``bool`` and ``np.bool_`` included): the ``numbers`` policy
    of :class:`Arrays` applies to it."""
    return isinstance(leaf, (numbers.Number, np.bool_))


def leaf_arrays(leaf, numbers="keep", traced_only=False):
    """The arrays one leaf holds, by the policy of :class:`Arrays`."""
    if isinstance(leaf, xr.DataArray):
        found = [leaf.variable.data]
    elif isinstance(leaf, xr.Dataset):
        variables = leaf._variables
        found = [variables[name].data for name in leaf.data_vars]
    elif isinstance(leaf, xr.Variable):
        found = [leaf.data]
    elif isinstance(leaf, xr.DataTree):
        found = [a for _, ds in tree_nodes(leaf) for a in leaf_arrays(ds)]
    elif is_number(leaf):
        return [np.asarray(leaf)] if numbers == "arrays" else []
    elif hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        found = [leaf]
    else:
        return []
    if traced_only:
        return [a for a in found if is_traced(a)]
    return found


class Arrays:
    """The one walk: the arrays inside the pytree ``tree``, and ``tree`` holding new ones.

    ``numbers``: ``"keep"`` (numbers stay constants) or ``"arrays"`` (each a 0-d array),
    see the module's policy.  ``check(leaf, path)``: called on every leaf first, raises
    the caller's error for leaves it refuses.  ``traced_only``: only arrays traced by a
    level count (lf.custom_vjp's residuals: everything else stays a constant).
    ``none_is_leaf``: as optree's (ravel drops None).

    ``arrays``: the flat list; ``leaves``/``paths``/``counts``: per leaf, the value, its
    optree path and how many of ``arrays`` it holds; ``rebuild(arrays)``: the pytree with
    ``arrays`` (same order and shapes) in place of its own.
    """

    __slots__ = ("arrays", "counts", "leaves", "numbers", "paths", "traced_only", "treedef")

    def __init__(self, tree, *, numbers="keep", check=None, traced_only=False, none_is_leaf=True):
        if numbers not in ("keep", "arrays"):
            raise ValueError(f"numbers must be 'keep' or 'arrays', got {numbers!r}")
        self.paths, self.leaves, self.treedef = optree.tree_flatten_with_path(tree, none_is_leaf=none_is_leaf)
        self.numbers, self.traced_only = numbers, traced_only
        self.arrays, self.counts = [], []
        for path, leaf in zip(self.paths, self.leaves):
            if check is not None:
                check(leaf, path)
            found = leaf_arrays(leaf, numbers, traced_only)
            self.arrays.extend(found)
            self.counts.append(len(found))

    def rebuild(self, arrays):
        leaves, k = [], 0
        for leaf, count in zip(self.leaves, self.counts):
            if count:
                leaf = replace_arrays(leaf, list(arrays[k:k + count]), traced_only=self.traced_only)
                k += count
            leaves.append(leaf)
        return optree.tree_unflatten(self.treedef, leaves)


class FlatArrays(Arrays):
    """The arrays inside one argument (or output) of autodiff, and how to put new ones back:
    the walk of :class:`Arrays` with numbers as 0-d arrays.  An argument (``allow_any``
    false) holds floating-point arrays, numbers, None and labeled values only; an output
    or aux (``allow_any``) may hold anything, only its arrays count (a bool is a 0-d bool,
    whose tangent is False).  A DataTree is refused either way."""

    __slots__ = ("value",)

    def __init__(self, value, label, name, allow_any=False):
        self.value = value

        def check(leaf, path):
            if leaf is None or isinstance(leaf, (xr.DataArray, xr.Dataset, xr.Variable)):
                return
            where = label + "".join(f"[{k!r}]" for k in path)
            if isinstance(leaf, xr.DataTree):
                if allow_any:  # an output or aux
                    raise TypeError(f"{name}: {where} is a DataTree, which {name} cannot return; return "
                                    "tree.to_dict() (a dict of Datasets) or one of its datasets instead")
                raise TypeError(f"{name}: {where} is a DataTree; differentiate with respect to its datasets instead")
            if allow_any:
                return
            if isinstance(leaf, (bool, np.bool_)) or not (is_number(leaf) or hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
                raise TypeError(f"{name}: cannot differentiate with respect to {where} of type {type(leaf).__name__}")
            if isinstance(leaf, numbers.Integral):
                raise TypeError(
                    f"{name}: {where} is the integer {leaf!r}; only floating-point inputs can be "
                    f"differentiated (pass {float(leaf)!r}, or leave it out of argnums)"
                )

        super().__init__(value, numbers="arrays", check=check)
        if not allow_any and not all(dtype_kind(array.dtype) in "fc" for array in self.arrays):
            k = 0
            for path, count in zip(self.paths, self.counts):
                for array in self.arrays[k:k + count]:
                    if dtype_kind(array.dtype) not in "fc":
                        raise TypeError(
                            f"{name}: {label + ''.join(f'[{p!r}]' for p in path)} has dtype {array.dtype}; only "
                            "floating-point inputs can be differentiated (cast it with .astype(float), or leave "
                            "it out of argnums)"
                        )
                k += count


def replace_arrays(leaf, arrays, traced_only=False):
    """``leaf`` (a DataArray, a Dataset, a Variable, a DataTree or an array) holding
    ``arrays`` instead of its own, in the order of :func:`leaf_arrays`."""
    if traced_only:  # only its traced arrays travelled: put them back among the rest
        given = iter(arrays)
        arrays = [next(given) if is_traced(a) else a for a in leaf_arrays(leaf)]
    if isinstance(leaf, xr.Variable):
        return leaf.copy(deep=False, data=arrays[0])
    if isinstance(leaf, xr.DataTree):
        nodes, k = {}, 0
        for path, ds in tree_nodes(leaf):
            count = len(ds.data_vars)
            nodes[path] = replace_arrays(ds, arrays[k:k + count]) if count else ds
            k += count
        return xr.DataTree.from_dict(nodes, name=leaf.name)
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
    ref_leaves, structure = optree.tree_flatten(reference, none_is_leaf=True)
    try:
        given_leaves = optree.tree_flatten(given, none_is_leaf=True)[0]
        if len(given_leaves) != len(ref_leaves):
            raise ValueError
        given_leaves = structure.flatten_up_to(given)
    except ValueError:
        try:
            theirs = repr(optree.tree_structure(given, none_is_leaf=True))
        except Exception:  # pragma: no cover - optree flattens any object
            theirs = type(given).__name__
        raise ValueError(f"{name}: the {what} must have the structure of the value it belongs to: that is "
                         f"{structure!r} and the {what} is {theirs} (each * an array, a DataArray or a "
                         "Dataset)") from None
    paths = optree.tree_paths(reference, none_is_leaf=True)
    several = len(paths) > 1 or paths != [()]
    arrays, dtypes, kind = [], [], what
    for path, ref, value in zip(paths, ref_leaves, given_leaves):
        if several:  # which leaf the messages below speak of: the cotangent at ['a'][0]
            what = f"{kind} at [{']['.join(map(repr, path))}]"
        if isinstance(ref, (xr.DataArray, xr.Variable)):  # a Variable's data, by dim name as a DataArray's
            dtypes.append(ref.dtype)
            arrays.append(_align(_as_dataarray(ref), _as_dataarray(value), name, what))
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
    for k, (dtype, array) in enumerate(zip(dtypes, arrays)):
        if dtype_kind(array.dtype) == "c" and dtype_kind(dtype) != "c":
            raise TypeError(
                f"{name}: the {what} is complex ({array.dtype}) but the value it belongs to is real ({dtype}); "
                f"a real value's {what} is real (pass its real part, or make the value complex)"
            )
        if dtype_kind(dtype) in "fc" and array.dtype != dtype:
            # a float32 (or integer) tangent of a float64 value: in the value's dtype, as the
            # derivative of that value is (JAX requires them equal; the values are kept)
            arrays[k] = ew.astype.bind(array, dtype=dtype)
    return arrays


def _as_dataarray(value):
    return xr.DataArray(value) if isinstance(value, xr.Variable) else value


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
