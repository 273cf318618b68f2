"""Shared helpers for the vmap tests: a per-example for-loop oracle and comparisons.

The oracle never calls labeled_func.  It slices every argument that has the mapped
dim with ``isel(..., drop=True)`` (inside ``vmap`` the coordinates along the mapped
dim are gone), calls ``f`` once per example, and stacks the results with
``xr.concat`` (mapped dim in front), restoring the coordinates that lie along the
mapped dim from the first argument that has them.
"""

from __future__ import annotations

import numbers

import numpy as np
import xarray as xr

# --------------------------------------------------------------------------- #
# oracle
# --------------------------------------------------------------------------- #


def has_dim(obj, dim):
    """Whether any array in the (nested) argument carries ``dim``."""
    if isinstance(obj, (xr.DataArray, xr.Dataset)):
        return dim in obj.dims
    if isinstance(obj, xr.DataTree):
        return any(dim in node.dataset.dims for node in obj.subtree)
    if isinstance(obj, dict):
        return any(has_dim(v, dim) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return any(has_dim(v, dim) for v in obj)
    return False


def dim_size(obj, dim):
    if isinstance(obj, (xr.DataArray, xr.Dataset)):
        return obj.sizes.get(dim)
    if isinstance(obj, xr.DataTree):
        for node in obj.subtree:
            if dim in node.dataset.dims:
                return node.dataset.sizes[dim]
        return None
    items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
    for v in items:
        n = dim_size(v, dim)
        if n is not None:
            return n
    return None


def coords_along(obj, dim):
    """Coordinates lying along ``dim`` only, merged over every argument that has the
    dim (the loop over ``isel`` without ``drop`` carries all of them as scalar coords
    into the result); the first argument wins on a name clash."""
    found = {}
    _collect_coords(obj, dim, found)
    return found or None


def _collect_coords(obj, dim, found):
    if isinstance(obj, (xr.DataArray, xr.Dataset)):
        datasets = [obj.coords] if dim in obj.dims else []
    elif isinstance(obj, xr.DataTree):
        datasets = [node.dataset.coords for node in obj.subtree if dim in node.dataset.dims]
    elif isinstance(obj, dict):
        datasets = []
        for v in obj.values():
            _collect_coords(v, dim, found)
    elif isinstance(obj, (list, tuple)):
        datasets = []
        for v in obj:
            _collect_coords(v, dim, found)
    else:
        datasets = []
    for coords in datasets:
        for k, c in coords.items():
            if c.dims == (dim,) and k not in found:
                found[k] = c.variable


def slice_example(obj, dim, i):
    """Example ``i`` of ``obj`` along ``dim`` (arguments without ``dim`` unchanged)."""
    if isinstance(obj, (xr.DataArray, xr.Dataset)):
        return obj.isel({dim: i}, drop=True) if dim in obj.dims else obj
    if isinstance(obj, xr.DataTree):
        return obj.isel({dim: i}, drop=True) if has_dim(obj, dim) else obj
    if isinstance(obj, dict):
        return {k: slice_example(v, dim, i) for k, v in obj.items()}
    if isinstance(obj, tuple):
        return tuple(slice_example(v, dim, i) for v in obj)
    if isinstance(obj, list):
        return [slice_example(v, dim, i) for v in obj]
    return obj


def stack_examples(outs, dim, coords=None):
    """Stack per-example outputs along a new leading ``dim``."""
    first = outs[0]
    if isinstance(first, xr.DataArray):
        res = xr.concat(outs, dim=dim, coords="different", compat="equals", join="exact")
        res = res.transpose(dim, ...)
        if coords:
            res = res.assign_coords(coords)
        return res
    if isinstance(first, xr.Dataset):
        res = xr.concat(
            outs, dim=dim, data_vars="all", coords="different", compat="equals", join="exact"
        )
        res = res.transpose(dim, ...)
        if coords:
            res = res.assign_coords(coords)
        return res
    if isinstance(first, dict):
        return {k: stack_examples([o[k] for o in outs], dim, coords) for k in first}
    if isinstance(first, tuple):
        return tuple(stack_examples([o[j] for o in outs], dim, coords) for j in range(len(first)))
    if isinstance(first, list):
        return [stack_examples([o[j] for o in outs], dim, coords) for j in range(len(first))]
    return np.stack([np.asarray(o) for o in outs])


def loop_vmap(f, dim, *args, axis_size=None, **kwargs):
    """The for-loop that ``lf.vmap(f, dim=dim)(*args, **kwargs)`` must equal.

    ``dim`` may be a tuple of dims: nested loops, first listed outermost.
    """
    dims = (dim,) if isinstance(dim, str) else tuple(dim)
    if not dims:
        return f(*args, **kwargs)
    d, rest = dims[0], dims[1:]
    everything = (args, kwargs)
    n = dim_size(everything, d)
    if n is None:
        n = axis_size
    coords = coords_along(everything, d)
    outs = []
    for i in range(n):
        a_i, k_i = slice_example(everything, d, i)
        outs.append(loop_vmap(f, rest, *a_i, **k_i))
    return stack_examples(outs, d, coords)


# --------------------------------------------------------------------------- #
# comparisons
# --------------------------------------------------------------------------- #


def _plain(data):
    return isinstance(data, np.ndarray)


def assert_same(res, exp, *, rtol=1e-7, atol=1e-12, check_dtype=True):
    """``res`` (from vmap) matches ``exp`` (from the loop): structure, dims order,
    coords, values (NaNs in the same places), name, attrs, dtype, plain NumPy data."""
    if isinstance(exp, xr.DataArray):
        assert isinstance(res, xr.DataArray), f"expected DataArray, got {type(res)}"
        assert res.dims == exp.dims, f"dims {res.dims} != {exp.dims}"
        assert _plain(res.data), f"result data is {type(res.data)}, not a NumPy array"
        assert set(res.coords) == set(exp.coords), f"coords {set(res.coords)} != {set(exp.coords)}"
        xr.testing.assert_allclose(res, exp, rtol=rtol, atol=atol)
        assert res.name == exp.name, f"name {res.name!r} != {exp.name!r}"
        assert res.attrs == exp.attrs, f"attrs {res.attrs} != {exp.attrs}"
        if check_dtype:
            assert res.dtype == exp.dtype, f"dtype {res.dtype} != {exp.dtype}"
        return
    if isinstance(exp, xr.Dataset):
        assert isinstance(res, xr.Dataset), f"expected Dataset, got {type(res)}"
        assert list(res.data_vars) == list(exp.data_vars) or set(res.data_vars) == set(
            exp.data_vars
        )
        assert set(res.coords) == set(exp.coords), f"coords {set(res.coords)} != {set(exp.coords)}"
        xr.testing.assert_allclose(res, exp, rtol=rtol, atol=atol)
        assert res.attrs == exp.attrs
        for k in exp.data_vars:
            assert res[k].dims == exp[k].dims, f"{k}: dims {res[k].dims} != {exp[k].dims}"
            assert res[k].attrs == exp[k].attrs
            assert _plain(res[k].data)
            if check_dtype:
                assert res[k].dtype == exp[k].dtype
        return
    if isinstance(exp, dict):
        assert isinstance(res, dict), f"expected dict, got {type(res)}"
        assert set(res) == set(exp)
        for k in exp:
            assert_same(res[k], exp[k], rtol=rtol, atol=atol, check_dtype=check_dtype)
        return
    if isinstance(exp, (tuple, list)):
        assert type(res) is type(exp), f"expected {type(exp)}, got {type(res)}"
        assert len(res) == len(exp)
        for r, e in zip(res, exp):
            assert_same(r, e, rtol=rtol, atol=atol, check_dtype=check_dtype)
        return
    if isinstance(exp, (np.ndarray, np.generic, numbers.Number)):
        r = np.asarray(res)
        e = np.asarray(exp)
        assert r.shape == e.shape, f"shape {r.shape} != {e.shape}"
        np.testing.assert_allclose(r, e, rtol=rtol, atol=atol, equal_nan=True)
        return
    raise TypeError(f"cannot compare {type(exp)}")


def move_dim(obj, dim, position):
    """Return ``obj`` with ``dim`` moved to ``position`` (``-1`` = last)."""
    if not isinstance(obj, xr.DataArray) or dim not in obj.dims:
        return obj
    others = [d for d in obj.dims if d != dim]
    if position < 0:
        position = len(others) + 1 + position
    order = others[:position] + [dim] + others[position:]
    return obj.transpose(*order)
