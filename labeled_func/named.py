"""Names <-> positions: hiding a mapped dim inside a transform and restoring it.

A labeled leaf (DataArray, Dataset, DataTree, Variable) enters a vmap level with
the mapped dim moved to the front of every variable that has it and wrapped in a
BatchTracer; 1-D coordinates along the dim are set aside and put back on the
outputs; other coordinates that contain the dim are mapped like data.
"""
from __future__ import annotations

import numbers
import weakref
from contextvars import ContextVar

import numpy as np
import pandas as pd
import xarray as xr
from xarray.indexes import PandasIndex

from labeled_func_kernels import shape as ks
from labeled_func_kernels.indexing import getitem_static

from .assemble import coord_variables, dataarray_like, dataset_like
from .engine import batch_value, current_levels, traced_by, unbatch_value
from .engine.numpy import DEFERRING_TYPES

__all__ = ["LABELED", "is_labeled", "leaf_dims", "map_leaf", "unmap_leaf", "dim_labels",
           "dim_label_sources", "named_coords", "shadowing", "restore_tree_coords", "tree_nodes", "TreeNode",
           "slice_leaf", "concat_leaves", "Preserve", "mapped_names"]

LABELED = (xr.DataArray, xr.Dataset, xr.DataTree, xr.Variable)

DEFERRING_TYPES.update({xr.DataArray, xr.Dataset, xr.Variable, xr.DataTree})


def is_labeled(value):
    return isinstance(value, LABELED)


def leaf_dims(value):
    """The dims of a labeled leaf (all dims of every node for a DataTree)."""
    if isinstance(value, xr.DataTree):
        dims = []
        for node in value.subtree:
            dims.extend(d for d in node.dims if d not in dims)
        return tuple(dims)
    return tuple(value.dims)


def leaf_size(value, dim):
    if isinstance(value, xr.DataTree):
        for node in value.subtree:
            if dim in node.dims:
                return node.sizes[dim]
    return value.sizes[dim]


def dim_labels(value, dim):
    """(index labels along ``dim`` or None, 1-D coordinate variables along ``dim``).

    For a DataTree: the first index of its nodes and the coordinates of all of them (the
    first node holding a name wins); ``dim_label_sources`` gives them node by node.
    """
    if isinstance(value, xr.DataTree):
        index, coords = None, {}
        for _, index_here, coords_here in dim_label_sources(value, dim, ""):
            index = index_here if index is None else index
            for name, var in coords_here.items():
                if not isinstance(name, TreeNode):
                    coords.setdefault(name, var)
        return index, coords
    if isinstance(value, xr.Variable):
        return None, {}
    index = value.indexes.get(dim)
    coords = {name: var for name, var in coord_variables(value).items() if var.dims == (dim,)}
    return index, coords


class TreeNode:
    """A key of a vmap level's ``coords`` beside the coordinate names: the node at ``path``
    (relative to its tree) of a DataTree argument, with the names of its data variables.
    Its value is a DataArray along the mapped dim carrying the 1-D coordinates along it
    that this node holds itself (none when it inherits them): tree outputs get them back on
    the node at the same path, and the slicing of ``chunk_size`` (``value[start:stop]``)
    slices them with the examples.  Keys are equal when their paths are."""

    __slots__ = ("path", "data_vars")

    def __init__(self, path, data_vars=()):
        self.path = path
        self.data_vars = frozenset(data_vars)

    def __eq__(self, other):
        return type(other) is TreeNode and other.path == self.path

    def __hash__(self):
        return hash((TreeNode, self.path))

    def __repr__(self):
        return f"TreeNode({self.path!r})"


def tree_nodes(tree):
    """[(path relative to ``tree``, the node's own Dataset)], parents before children.

    The top node keeps the coordinates it inherits (a subtree passed on its own carries
    them, as ``tree["child"]["v"]`` does); the nodes below it inherit them from it.
    """
    return [("/", tree.to_dataset(inherit=True))] + [
        ("/" + node.relative_to(tree), node.to_dataset(inherit=False)) for node in tree.descendants]


def dim_label_sources(value, dim, label):
    """[(where, index labels or None, coords)]: one entry for a DataArray or Dataset, one per
    node holding ``dim`` itself for a DataTree (``where``: "``label`` node /path").  The coords
    of a node also hold, under ``TreeNode(path)``, what that node holds itself."""
    if not isinstance(value, xr.DataTree):
        return [(label, *dim_labels(value, dim))]
    sources = []
    for path, ds in tree_nodes(value):
        if dim not in ds.dims:
            continue
        index, coords = dim_labels(ds, dim)
        carrier = xr.DataArray(np.broadcast_to(np.False_, (ds.sizes[dim],)), dims=(dim,), coords=coords)
        sources.append((f"{label} node {path}", index, {**coords, TreeNode(path, ds.data_vars): carrier}))
    return sources


def named_coords(coords):
    """``coords`` without the ``TreeNode`` entries: what DataArray and Dataset outputs get."""
    return {name: var for name, var in coords.items() if not isinstance(name, TreeNode)}


def restore_tree_coords(nodes, dim, coords):
    """``nodes`` ({path: Dataset}, a tree output's nodes without the mapped dim's 1-D
    coordinates, parents first) with them put back.

    A node that stands for a node of a DataTree argument that held ``dim`` (same path, and
    a data variable of the same name or neither has any) gets the coordinates that node
    held itself, where its subtree has ``dim``: an identity-like function gives back the
    argument.  Any other node with ``dim`` gets those of all arguments that no ancestor
    has: they sit at the highest nodes with ``dim``, never copied into the nodes below
    (which inherit the index; xarray passes non-index coordinates down only with
    ``to_dataset(inherit="all_coords")``).  As for DataArrays, they replace unmapped
    coordinates of the same names (scalars that data selected inside left).
    """
    from_inputs = {key.path: (key.data_vars, carrier) for key, carrier in coords.items()
                   if isinstance(key, TreeNode)}
    union = named_coords(coords)
    with_dim = set()
    for path, ds in nodes.items():
        if dim in ds.dims:
            while path not in with_dim:
                with_dim.add(path)
                path = _parent(path)
                if path is None:
                    break
    out, passed = {}, {}  # passed: the names placed at a node or above it
    for path, ds in nodes.items():
        inherited = passed.get(_parent(path), set())
        held, carrier = from_inputs.get(path, (None, None))
        if carrier is not None and (held & set(ds.data_vars) or not (held or ds.data_vars)):
            wanted = {name: c.variable for name, c in carrier.coords.items()} if path in with_dim else {}
        elif dim in ds.dims:
            wanted = {name: var for name, var in union.items() if name not in inherited}
        else:
            wanted = {}
        names = inherited | set(wanted)
        stale = shadowing(ds, names, dim, ())
        ds = ds.drop_vars(stale) if stale else ds
        new = {name: var for name, var in wanted.items() if name not in ds.coords}
        out[path] = ds = ds.assign_coords(new) if new else ds
        passed[path] = inherited | set(new)
    return out


def _parent(path):
    if path == "/":
        return None
    return path.rsplit("/", 1)[0] or "/"


# --- the names the enclosing vmaps hide ---------------------------------------------------------
# (a weak reference to a vmap level, the names it hides); per task, as the stack of levels
_HIDDEN: ContextVar[tuple] = ContextVar("labeled_func_hidden_names", default=())


def _note_hidden(level, value, dim):
    """Remember that ``level`` hides ``dim`` and the coordinates along it (from ``value``)."""
    names = {dim}
    if isinstance(value, (xr.DataArray, xr.Dataset, xr.DataTree)):
        names.update(name for name in dim_labels(value, dim)[1])
    live = tuple((ref, hidden) for ref, hidden in _HIDDEN.get()
                 if ref() is not None and ref().alive and ref() is not level)
    earlier = next((hidden for ref, hidden in _HIDDEN.get() if ref() is level), frozenset())
    _HIDDEN.set(live + ((weakref.ref(level), earlier | names),))


def mapped_names():
    """The dims that the active vmap levels map, and the names of their coordinates: the
    outputs get them back, so a new dim made inside (a Jacobian's ``x_wrt``) must avoid them.

    >>> import xarray as xr, labeled_func as lf
    >>> from labeled_func.named import mapped_names
    >>> x = xr.DataArray([[1.0, 2.0]], dims=("sample", "i"), coords={"sample": [7]})
    >>> sorted(lf.vmap(lambda x: x.assign_attrs(seen=sorted(mapped_names())), dim="sample")(x).attrs["seen"])
    ['sample']
    >>> mapped_names()
    set()
    """
    active = {id(level) for level in current_levels() if level.batches}
    names = set()
    for ref, hidden in _HIDDEN.get():
        level = ref()
        if level is not None and id(level) in active:
            names |= hidden
    return names


# --- into the level -----------------------------------------------------------------------
def map_leaf(value, dim, level, shared=None):
    """``value`` as one example: ``dim`` hidden in a BatchTracer of ``level``.

    ``shared`` (one dict per vmap call) makes equal coordinates of several arguments one
    traced coordinate: xarray then sees them as the same object when it merges
    coordinates (``a * b``), instead of comparing mapped values (a ``bool()``).
    """
    shared = {} if shared is None else shared
    _note_hidden(level, value, dim)
    if isinstance(value, xr.DataArray):
        return _map_dataarray(value, dim, level, shared)
    if isinstance(value, xr.Dataset):
        return _map_dataset(value, dim, level, shared)
    if isinstance(value, xr.DataTree):
        return _map_tree(value, lambda ds: _map_dataset(ds, dim, level, shared) if dim in ds.dims else ds)
    if isinstance(value, xr.Variable):
        return _map_variable(value, dim, level)
    raise TypeError(f"cannot map {type(value).__name__} over a named dim")


def _map_variable(variable, dim, level):
    axis = variable.dims.index(dim)
    dims = variable.dims[:axis] + variable.dims[axis + 1:]
    # a tracer is an array already: nothing for xarray to convert (fastpath)
    return xr.Variable(dims, batch_value(level, variable.data, axis), attrs=variable._attrs, fastpath=True)


def _split_coords(obj, dim):
    """Coordinates containing ``dim``, and those of them with other dims too."""
    variables = coord_variables(obj)
    along = [name for name, var in variables.items() if dim in var.dims]
    multi = {name: variables[name] for name in along if variables[name].dims != (dim,)}
    return along, multi


def _map_coords(multi, dim, level, shared):
    """The multi-dim coordinates along ``dim``, mapped; equal ones of earlier arguments reused."""
    mapped = {}
    for name, var in multi.items():
        for original, traced in shared.get(name, ()):
            if _same_values(original, var):
                mapped[name] = traced
                break
        else:
            mapped[name] = _map_variable(var, dim, level)
            shared.setdefault(name, []).append((var, mapped[name]))
    return mapped


def _same_values(a, b):
    if a.dims != b.dims or a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.data is b.data:
        return True
    return isinstance(a.data, np.ndarray) and isinstance(b.data, np.ndarray) and a.equals(b)


def _map_dataarray(da, dim, level, shared):
    along, multi = _split_coords(da, dim)
    mapped = _map_variable(da.variable, dim, level)
    extra = _map_coords(multi, dim, level, shared) if multi else None
    out = dataarray_like(da, mapped, drop=along, extra=extra)
    if out is None:  # not met: the public constructors check and merge
        out = xr.DataArray(mapped, coords=da.drop_vars(along).coords if along else da.coords, name=da.name)
        out = out.assign_coords(extra) if extra else out
    return out


def _map_dataset(ds, dim, level, shared):
    along, multi = _split_coords(ds, dim)
    mapped = {name: _map_variable(var, dim, level) for name, var in ds._variables.items()
              if name not in ds._coord_names and dim in var.dims}
    extra = _map_coords(multi, dim, level, shared) if multi else None
    out = dataset_like(ds, mapped, drop=along, extra=extra)
    if out is None:
        base = ds.drop_vars(along) if along else ds
        data_vars = {name: mapped.get(name, var.variable) for name, var in base.data_vars.items()}
        out = xr.Dataset(data_vars, coords=base.coords, attrs=ds.attrs)
        out = out.assign_coords(extra) if extra else out
    return out


def _map_tree(tree, transform):
    datasets = {path: transform(ds) for path, ds in tree_nodes(tree)}
    return xr.DataTree.from_dict(datasets, name=tree.name)


# --- out of the level ------------------------------------------------------------------------
def unmap_leaf(value, dim, level, position, coords, label):
    """An output leaf with ``level``'s batch as dim ``dim`` at ``position``."""
    if isinstance(value, (xr.DataArray, xr.Dataset)):
        _check_new_dim(value, dim, label)
        traced = {n: var for n, var in coord_variables(value).items() if traced_by(var._data, level)}
        drop = list(traced) + shadowing(value, coords, dim, traced)
        restored = _restored_coords(value, drop, traced, coords, dim, level)
        if isinstance(value, xr.DataArray):
            variable = _unmap_variable(value.variable, dim, level, position)
            out = None if restored is None else dataarray_like(value, variable, drop, *restored)
            if out is not None:
                return out
            out = xr.DataArray(variable, coords=value.drop_vars(drop).coords, name=value.name)
        else:
            data_vars = {name: _unmap_variable(var, dim, level, position)
                         for name, var in value._variables.items() if name not in value._coord_names}
            out = None if restored is None else dataset_like(value, data_vars, drop, None, *restored)
            if out is not None:
                return out
            out = xr.Dataset(data_vars, coords=value.drop_vars(drop).coords, attrs=value.attrs)
        # not met: the public constructors check, merge and index
        return _restore_coords(out, traced, coords, dim, level)
    if isinstance(value, xr.DataTree):
        _check_new_dim(value, dim, label)
        nodes = {path: unmap_leaf(ds, dim, level, position, {}, label) for path, ds in tree_nodes(value)}
        return xr.DataTree.from_dict(restore_tree_coords(nodes, dim, coords), name=value.name)
    if isinstance(value, xr.Variable):
        _check_new_dim(value, dim, label)
        return _unmap_variable(value, dim, level, position)
    if value is None:
        return None
    _check_array_output(value, label)
    if not hasattr(value, "shape"):
        value = np.asarray(value)
    return unbatch_value(level, value, _position(position, value.ndim, label))


def _check_array_output(value, label):
    """An output leaf that vmap can stack: an array or a number (a string, a method or a
    function would become an object or string array, one copy per example)."""
    if isinstance(value, np.generic):
        if value.dtype.kind in "biufcmM":
            return
    elif (hasattr(value, "shape") and hasattr(value, "dtype")) or isinstance(value, numbers.Number):
        return
    hint = ""
    if callable(value):
        hint = (" It is callable: call it (a method such as Dataset.values must be called; "
                "the data of a DataArray is .data, of a Dataset's variable ds[name].data).")
    raise TypeError(
        f"vmap: the function returned {label} of type {type(value).__module__}.{type(value).__qualname__}, "
        "which is not an array: vmap can only stack arrays, DataArrays, Datasets, DataTrees and "
        f"numbers (and passes None through), in tuples, lists and dicts.{hint} Return only "
        "those from the vmapped function; compute anything else outside it."
    )


def shadowing(value, coords, dim, traced):
    """Unmapped coordinates named like the mapped dim or one of its coordinates.

    They come from shared data selected inside the function (``ens.sel(member="ctrl")``
    leaves a scalar ``member`` coordinate): the mapped dim's own labels replace them, as
    its index cannot sit beside a scalar of the same name.
    """
    return [name for name, var in coord_variables(value).items()
            if name not in traced and (name == dim or name in coords) and dim not in var.dims]


def _check_new_dim(value, dim, label):
    if dim in leaf_dims(value):
        raise ValueError(
            f"vmap over dim {dim!r}: the function returned {label} that already has a dim "
            f"{dim!r} (dims {leaf_dims(value)}); vmap adds the mapped dim to every output. "
            f"Rename that dim in the output, or map over a differently named dim."
        )


class Preserve(int):
    """``out_dims="preserve"``: where the dim stood in the input, at most the output's rank."""


def _position(position, ndim, label):
    if isinstance(position, Preserve):
        return min(int(position), ndim)
    if position < 0:
        position += ndim + 1
    if not 0 <= position <= ndim:
        raise ValueError(f"out_dims={position} is out of range for output {label} with {ndim} dims")
    return position


def _unmap_variable(variable, dim, level, position):
    axis = _position(position, variable.ndim, dim)
    data = unbatch_value(level, variable.data, axis)
    return xr.Variable(variable.dims[:axis] + (dim,) + variable.dims[axis:], data, attrs=variable.attrs)


def _restored_coords(value, drop, traced, coords, dim, level):
    """``(coordinates, indexes)`` that an output ``value`` less ``drop`` gets back: its
    traced coordinates unmapped and the 1-D coordinates along ``dim`` of the arguments,
    with the index of the one named ``dim``; None where a multi-index is among them (the
    public ``assign_coords`` then puts them back)."""
    new = {name: _unmap_variable(var, dim, level, 0) for name, var in traced.items()}
    kept = set(coord_variables(value)) - set(drop)
    new.update({name: var.copy(deep=False) for name, var in named_coords(coords).items()
                if name not in kept and name not in new})
    if any(isinstance(getattr(var._data, "array", None), pd.MultiIndex) for var in new.values()):
        return None
    indexes = {}
    if dim in new:
        if new[dim].dims != (dim,):
            return None
        index = PandasIndex.from_variables({dim: new[dim]}, options={})
        indexes[dim] = index
        new[dim] = index.create_variables({dim: new[dim]})[dim]
    return new, indexes


def _restore_coords(out, traced, coords, dim, level):
    new = {name: _unmap_variable(var, dim, level, 0) for name, var in traced.items()}
    new.update({name: var for name, var in named_coords(coords).items() if name not in out.coords and name not in new})
    return out.assign_coords(new) if new else out


# --- chunks ------------------------------------------------------------------------------------
def slice_leaf(value, spec, start, stop):
    """``value`` restricted to examples ``start:stop`` along its mapped dim or axis."""
    if isinstance(spec, str):
        if isinstance(value, xr.DataTree):
            return value.map_over_datasets(lambda ds: ds.isel({spec: slice(start, stop)}) if spec in ds.dims else ds)
        return value.isel({spec: slice(start, stop)})
    key = (slice(None),) * (spec % value.ndim) + (slice(start, stop),)
    return getitem_static(value, key)


def concat_leaves(parts, dim, position):
    first = parts[0]
    if isinstance(first, (xr.DataArray, xr.Dataset)):
        return xr.concat(parts, dim=dim, data_vars="all", coords="minimal", compat="override",
                         join="override", combine_attrs="override")
    if isinstance(first, xr.DataTree):
        nodes = [dict(tree_nodes(p)) for p in parts]
        return xr.DataTree.from_dict({
            path: concat_leaves([n[path] for n in nodes], dim, position) for path in nodes[0]
        }, name=first.name)
    if isinstance(first, xr.Variable):
        return xr.Variable.concat(parts, dim=dim)
    if first is None:
        return None
    axis = position % first.ndim if first.ndim else 0
    return ks.concatenate.bind(*parts, axis=axis)
