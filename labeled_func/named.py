"""Names <-> positions: hiding a mapped dim inside a transform and restoring it.

A labeled leaf (DataArray, Dataset, DataTree, Variable) enters a vmap level with
the mapped dim moved to the front of every variable that has it and wrapped in a
BatchTracer; 1-D coordinates along the dim are set aside and put back on the
outputs; other coordinates that contain the dim are mapped like data.
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from kernels import shape as ks

from .engine import BatchTracer, batch_value, unbatch_value
from .engine import numpy_api, register_conversion_sites

__all__ = ["LABELED", "is_labeled", "leaf_dims", "map_leaf", "unmap_leaf", "dim_labels",
           "slice_leaf", "concat_leaves", "Preserve"]

LABELED = (xr.DataArray, xr.Dataset, xr.DataTree, xr.Variable)

numpy_api.DEFERRING_TYPES.update({xr.DataArray, xr.Dataset, xr.Variable, xr.DataTree})


def _register_conversion_sites():
    from xarray.core.common import AbstractArray

    sites = {}
    for method, kind in (("__bool__", "bool"), ("__float__", "float"), ("__int__", "int"),
                         ("__complex__", "complex"), ("__format__", "format")):
        function = getattr(AbstractArray, method, None)
        code = getattr(function, "__code__", None)
        if code is None:  # xarray moved the method: the policy errors would be generic
            raise ImportError(f"labeled_func: xarray's AbstractArray.{method} has no code object")
        sites[code] = kind
    # pandas-backed index coordinates: a mapped indexer cannot select their labels
    from xarray.core import indexes, indexing

    for owner, method in ((indexes.PandasIndex, "isel"), (indexes.PandasMultiIndex, "isel"),
                          (indexing.PandasIndexingAdapter, "__getitem__"),
                          (indexing.PandasIndexingAdapter, "_oindex_get"),
                          (indexing.PandasIndexingAdapter, "_vindex_get")):
        code = getattr(getattr(owner, method, None), "__code__", None)
        if code is not None:
            sites[code] = "index"
    register_conversion_sites(sites)


_register_conversion_sites()


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
    """(index labels along ``dim`` or None, 1-D coordinate variables along ``dim``)."""
    if isinstance(value, xr.DataTree):
        for node in value.subtree:
            if dim in node.dims:
                return dim_labels(node.to_dataset(inherit=False), dim)
        return None, {}
    if isinstance(value, xr.Variable):
        return None, {}
    index = value.indexes.get(dim)
    coords = {name: c.variable for name, c in value.coords.items() if c.dims == (dim,)}
    return index, coords


# --- into the level -----------------------------------------------------------------------
def map_leaf(value, dim, level, shared=None):
    """``value`` as one example: ``dim`` hidden in a BatchTracer of ``level``.

    ``shared`` (one dict per vmap call) makes equal coordinates of several arguments one
    traced coordinate: xarray then sees them as the same object when it merges
    coordinates (``a * b``), instead of comparing mapped values (a ``bool()``).
    """
    shared = {} if shared is None else shared
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
    return xr.Variable(dims, batch_value(level, variable.data, axis), attrs=variable.attrs)


def _split_coords(obj, dim):
    """Coordinates containing ``dim``, and those of them with other dims too."""
    along = [name for name, c in obj.coords.items() if dim in c.dims]
    multi = {name: obj.coords[name].variable for name in along if obj.coords[name].dims != (dim,)}
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
    base = da.drop_vars(along) if along else da
    out = xr.DataArray(_map_variable(da.variable, dim, level), coords=base.coords, name=da.name)
    if multi:
        out = out.assign_coords(_map_coords(multi, dim, level, shared))
    return out


def _map_dataset(ds, dim, level, shared):
    along, multi = _split_coords(ds, dim)
    base = ds.drop_vars(along) if along else ds
    data_vars = {
        name: _map_variable(var.variable, dim, level) if dim in var.dims else var.variable
        for name, var in base.data_vars.items()
    }
    out = xr.Dataset(data_vars, coords=base.coords, attrs=ds.attrs)
    if multi:
        out = out.assign_coords(_map_coords(multi, dim, level, shared))
    return out


def _map_tree(tree, transform):
    datasets = {node.path: transform(node.to_dataset(inherit=False)) for node in tree.subtree}
    return xr.DataTree.from_dict(datasets, name=tree.name)


# --- out of the level ------------------------------------------------------------------------
def _traced_by(data, level):
    return type(data) is BatchTracer and data._level is level


def unmap_leaf(value, dim, level, position, coords, label):
    """An output leaf with ``level``'s batch as dim ``dim`` at ``position``."""
    if isinstance(value, xr.DataArray):
        _check_new_dim(value, dim, label)
        variable = _unmap_variable(value.variable, dim, level, position)
        traced = {n: c.variable for n, c in value.coords.items() if _traced_by(c.variable.data, level)}
        base = value.drop_vars(list(traced) + _shadowing(value, coords, dim, traced))
        out = xr.DataArray(variable, coords=base.coords, name=value.name)
        return _restore_coords(out, traced, coords, dim, level)
    if isinstance(value, xr.Dataset):
        _check_new_dim(value, dim, label)
        traced = {n: c.variable for n, c in value.coords.items() if _traced_by(c.variable.data, level)}
        base = value.drop_vars(list(traced) + _shadowing(value, coords, dim, traced))
        data_vars = {name: _unmap_variable(var.variable, dim, level, position)
                     for name, var in base.data_vars.items()}
        out = xr.Dataset(data_vars, coords=base.coords, attrs=value.attrs)
        return _restore_coords(out, traced, coords, dim, level)
    if isinstance(value, xr.DataTree):
        _check_new_dim(value, dim, label)
        return _map_tree(value, lambda ds: unmap_leaf(ds, dim, level, position, coords, label))
    if isinstance(value, xr.Variable):
        _check_new_dim(value, dim, label)
        return _unmap_variable(value, dim, level, position)
    if value is None:
        return None
    if not hasattr(value, "shape"):
        value = np.asarray(value)
    return unbatch_value(level, value, _position(position, value.ndim, label))


def _shadowing(value, coords, dim, traced):
    """Unmapped coordinates named like the mapped dim or one of its coordinates.

    They come from shared data selected inside the function (``ens.sel(member="ctrl")``
    leaves a scalar ``member`` coordinate): the mapped dim's own labels replace them, as
    its index cannot sit beside a scalar of the same name.
    """
    return [name for name in value.coords
            if name not in traced and (name == dim or name in coords) and dim not in value[name].dims]


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


def _restore_coords(out, traced, coords, dim, level):
    new = {name: _unmap_variable(var, dim, level, 0) for name, var in traced.items()}
    new.update({name: var for name, var in coords.items() if name not in out.coords and name not in new})
    return out.assign_coords(new) if new else out


# --- chunks ------------------------------------------------------------------------------------
def slice_leaf(value, spec, start, stop):
    """``value`` restricted to examples ``start:stop`` along its mapped dim or axis."""
    if isinstance(spec, str):
        if isinstance(value, xr.DataTree):
            return value.map_over_datasets(lambda ds: ds.isel({spec: slice(start, stop)}) if spec in ds.dims else ds)
        return value.isel({spec: slice(start, stop)})
    key = (slice(None),) * (spec % value.ndim) + (slice(start, stop),)
    from kernels.indexing import getitem_static

    return getitem_static(value, key)


def concat_leaves(parts, dim, position):
    first = parts[0]
    if isinstance(first, (xr.DataArray, xr.Dataset)):
        return xr.concat(parts, dim=dim, data_vars="all", coords="minimal", compat="override",
                         join="override", combine_attrs="override")
    if isinstance(first, xr.DataTree):
        return xr.DataTree.from_dict({
            node.path: concat_leaves([p[node.path].to_dataset(inherit=False) for p in parts], dim, position)
            for node in first.subtree
        }, name=first.name)
    if isinstance(first, xr.Variable):
        return xr.Variable.concat(parts, dim=dim)
    if first is None:
        return None
    axis = position % first.ndim if first.ndim else 0
    return ks.concatenate.bind(*parts, axis=axis)
