"""``lf.ravel``: labeled values as one flat vector, and back.

Optimisers and linear algebra (``scipy.optimize.minimize``, a Newton step, a
covariance) want a parameter vector; models want a Dataset.  ``ravel`` puts the arrays
of a Dataset, DataArray or pytree of them end to end, and ``unravel`` rebuilds the very
structure from a vector of that length.  Both are written with the kernels, so they
work on traced values inside transforms too.
"""
from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
import xarray as xr

from labeled_func_kernels import core as kcore
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import shape as ks
from labeled_func_kernels.backend import dtype_kind, namespace, namespace_dtype
from labeled_func_kernels.indexing import getitem_static

from .backends import check_one_backend, reject_quantities
from .flat import Arrays, is_number

__all__ = ["ravel", "element_labels", "element_attrs"]


def ravel(tree: Any) -> tuple[Any, Callable[[Any], Any]]:
    """The arrays of ``tree`` as one flat vector, and the function that rebuilds ``tree``.

    Parameters
    ----------
    tree : DataArray, Dataset, array, or tuple/list/dict of them
        Every leaf is an array (NumPy, CuPy, ...) or a labeled object holding arrays;
        ``None`` leaves are kept as structure.  Inside a transform the arrays may be
        traced: ``ravel`` and ``unravel`` are differentiable and vmappable.

    Returns
    -------
    flat : array
        1-D, in the library of the inputs; the arrays in order (a Dataset's data
        variables in its order, dicts by sorted key as in every pytree), each flattened
        in C order; the dtype is NumPy's promotion of theirs (float64 for no arrays).
    unravel : callable
        ``unravel(vector)`` with a 1-D array (or DataArray) of ``flat``'s length returns
        ``tree`` with those values: the same structure, dims, coords, attrs, names and
        dtypes (each piece cast back to its array's dtype).

    Raises
    ------
    TypeError
        A leaf that is not an array (a Python or NumPy number, a string, a DataTree) or
        an array of non-numeric dtype, naming where it sits in ``tree``.
    ValueError
        Arrays of two libraries (NumPy and CuPy, say); ``unravel`` of a vector of the
        wrong length.
    lf.UnsupportedOperationError
        pint Quantities (dequantify first).

    Examples
    --------
    >>> import numpy as np, xarray as xr, labeled_func as lf
    >>> params = xr.Dataset({"rate": 0.5, "curve": ("t", [1.0, 2.0, 3.0])}, attrs={"model": "decay"})
    >>> flat, unravel = lf.ravel(params)
    >>> flat
    array([0.5, 1. , 2. , 3. ])
    >>> back = unravel(flat * 2)
    >>> back.rate.item(), back.curve.values.tolist(), back.attrs
    (1.0, [2.0, 4.0, 6.0], {'model': 'decay'})

    The gradient of a function of a Dataset, as a vector for an optimiser:

    >>> loss = lambda p: (p.rate * p.curve ** 2).sum()
    >>> g, value = lf.grad_and_value(loss)(params)
    >>> lf.ravel(g)[0]
    array([14.,  1.,  2.,  3.])
    """
    layout = _Layout(tree)
    return layout.flatten(), layout.unravel


def element_labels(tree: Any) -> list[str]:
    """One label per element of ``ravel(tree)[0]``: where the element sits.

    A Dataset variable is labeled by its name, a DataArray by its name (or, inside a
    dict, list or tuple, by its path, keys joined with ``/``); elements of arrays that
    are not 0-d get their NumPy index, as in ``"curve[2]"`` or ``"field[0,1]"``.

    Parameters
    ----------
    tree : DataArray, Dataset, array, or tuple/list/dict of them
        As :func:`ravel` takes it.

    Returns
    -------
    list of str
        One label per element of the flat vector, in its order.

    Raises
    ------
    TypeError
        A leaf that :func:`ravel` does not take (named).

    Examples
    --------
    >>> import xarray as xr
    >>> from labeled_func.ravel import element_labels
    >>> element_labels(xr.Dataset({"rate": 0.5, "curve": ("t", [1.0, 2.0])}))
    ['rate', 'curve[0]', 'curve[1]']
    """
    labels = []
    for name, array in _Layout(tree).named_arrays():
        shape = tuple(array.shape)
        if not shape:
            labels.append(name)
            continue
        for index in np.ndindex(*shape):
            labels.append(f"{name}[{','.join(map(str, index))}]")
    return labels


def element_attrs(tree: Any) -> list[dict[Any, Any]]:
    """One dict per element of ``ravel(tree)[0]``: the attrs of the DataArray or Dataset
    variable it belongs to (empty for a bare array).

    Parameters
    ----------
    tree : DataArray, Dataset, array, or tuple/list/dict of them
        As :func:`ravel` takes it.

    Returns
    -------
    list of dict
        One dict of attrs per element of the flat vector, in its order.

    Raises
    ------
    TypeError
        A leaf that :func:`ravel` does not take (named).

    Examples
    --------
    >>> import xarray as xr
    >>> from labeled_func.ravel import element_attrs
    >>> element_attrs(xr.Dataset({"rate": ((), 0.5, {"units": "s-1"}), "curve": ("t", [1.0, 2.0])}))
    [{'units': 's-1'}, {}, {}]
    """
    layout = _Layout(tree)
    return [attrs for attrs, size in zip(layout.attrs, layout.sizes) for _ in range(size)]


class _Layout:
    """Where each array of ``tree`` sits in the flat vector."""

    def __init__(self, tree):
        self.tree = tree
        self.walk = Arrays(tree, check=_check_leaf, none_is_leaf=False)  # None: no leaf at all
        paths, self.leaves, self.treedef = self.walk.paths, self.walk.leaves, self.walk.treedef
        labels = ["tree" + "".join(f"[{k!r}]" for k in path) for path in paths]
        self.arrays, self.counts = self.walk.arrays, self.walk.counts
        self.names, self.attrs, wheres = [], [], []
        for path, leaf, where in zip(paths, self.leaves, labels):
            for var in (list(leaf.data_vars) if isinstance(leaf, xr.Dataset) else [None]):
                self.names.append(_name(path, leaf, var))
                self.attrs.append(_attrs(leaf, var))
                wheres.append(_where(where, var))
        for array, where in zip(self.arrays, wheres):
            if dtype_kind(array.dtype) not in "biufc":
                raise TypeError(f"ravel: {where} has dtype {array.dtype}; ravel takes numeric arrays only")
        check_one_backend(self.arrays, wheres, transform="ravel")
        self.shapes = [tuple(a.shape) for a in self.arrays]
        self.sizes = [int(np.prod(s)) for s in self.shapes]
        self.size = sum(self.sizes)
        if self.arrays:
            promoted = np.result_type(*[_numpy_dtype(a.dtype) for a in self.arrays])
            self.dtype = namespace_dtype(namespace(*self.arrays), promoted)
        else:
            self.dtype = np.dtype(np.float64)

    def named_arrays(self):
        return list(zip(self.names, self.arrays))

    def flatten(self):
        pieces = [kcore.reshape.bind(_cast(a, self.dtype), shape=(size,))
                  for a, size in zip(self.arrays, self.sizes)]
        if not pieces:
            return np.zeros(0, dtype=self.dtype)
        return pieces[0] if len(pieces) == 1 else ks.concatenate.bind(*pieces, axis=0)

    def unravel(self, vector):
        """``tree`` holding the values of ``vector`` (see :func:`ravel`)."""
        data = vector.data if isinstance(vector, xr.DataArray) else vector
        if not hasattr(data, "shape") or isinstance(data, numbers.Number):
            raise TypeError(f"unravel: expected a 1-D array of {self.size} values, got {type(vector).__name__}")
        if tuple(data.shape) != (self.size,):
            listing = ", ".join(f"{name or 'array'} {shape}" for name, shape in zip(self.names, self.shapes))
            raise ValueError(
                f"unravel: expected a 1-D array of {self.size} values (the arrays of the tree: {listing}), "
                f"got shape {tuple(data.shape)}")
        arrays, start = [], 0
        for array, shape, size in zip(self.arrays, self.shapes, self.sizes):
            piece = getitem_static(data, (slice(start, start + size),))
            arrays.append(_cast(kcore.reshape.bind(piece, shape=shape), array.dtype))
            start += size
        return self.walk.rebuild(arrays)


def _check_leaf(leaf, path):
    """ravel takes labeled values and arrays; a TypeError naming the leaf for anything else."""
    where = "tree" + "".join(f"[{k!r}]" for k in path)
    reject_quantities([leaf], [where], transform="ravel")
    if isinstance(leaf, xr.DataTree):
        raise TypeError(f"ravel: {where} is a DataTree; ravel its datasets instead "
                        "(a dict of them, e.g. {path: node.to_dataset() for path, node in tree.subtree_with_keys})")
    if is_number(leaf) or isinstance(leaf, np.generic):
        raise TypeError(f"ravel: {where} is the number {leaf!r}, not an array; unravel could not give it back "
                        "as a number inside a transform. Make it an array: np.asarray(...) or xr.DataArray(...)")
    if not (isinstance(leaf, (xr.DataArray, xr.Dataset, xr.Variable)) or hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
        raise TypeError(f"ravel: {where} is a {type(leaf).__module__}.{type(leaf).__qualname__}, not an array; "
                        "ravel takes DataArrays, Datasets and arrays, in tuples, lists and dicts")


def _where(where, var):
    return where if var is None else f"{where}[{var!r}]"


def _name(path, leaf, var):
    """The label of one array: a Dataset variable's name, a DataArray's name or path."""
    if var is not None:
        prefix = "/".join(map(str, path))
        return f"{prefix}/{var}" if prefix else str(var)
    if path:
        return "/".join(map(str, path))
    return "" if getattr(leaf, "name", None) is None else str(leaf.name)


def _attrs(leaf, var):
    if var is not None:
        return dict(leaf[var].attrs)
    return dict(leaf.attrs) if isinstance(leaf, (xr.DataArray, xr.Variable)) else {}


def _cast(array, dtype):
    """``array`` in ``dtype``; a complex piece of the flat vector going back into a real leaf
    as its real part (the imaginary part the ravel gave it is 0: no ComplexWarning)."""
    if array.dtype == dtype:
        return array
    if _numpy_dtype(array.dtype).kind == "c" and _numpy_dtype(dtype).kind != "c":
        array = ew.real.bind(array)
        if array.dtype == dtype:
            return array
    return ew.astype.bind(array, dtype=dtype)


def _numpy_dtype(dtype):
    return np.dtype(getattr(dtype, "_np_dtype", dtype))
