"""One array library per call: NumPy, CuPy or another array-API library, never a mix.

The kernels take their namespace from their inputs (``kernels.backend.namespace``),
so a call whose arguments come from two libraries would fail deep inside some
operation.  :func:`check_one_backend` says so up front, naming the two arguments.

A Dask array counts as the library of its chunks: Dask-backed data with NumPy
parameters is one family (the kernels then use Dask's namespace, which takes NumPy
operands, and the result stays lazy), while Dask-of-NumPy with CuPy or
array_api_strict arrays is a mix.
"""
from __future__ import annotations

import xarray as xr

from labeled_func_kernels.backend import backend_of, is_array, library_of, namespace, namespace_library
from labeled_func_kernels.primitive import bottom

from .errors import UnsupportedOperationError
from .flat import Arrays
from .named import tree_nodes

__all__ = ["check_one_backend", "data_arrays", "reject_quantities"]


def check_one_backend(leaves, labels, *, transform=None):
    """Raise ``ValueError`` when the arrays in ``leaves`` come from two array libraries,
    and ``UnsupportedOperationError`` (:func:`reject_quantities`'s, saying to call
    ``.pint.dequantify()``) where one is a pint Quantity or a Dask array of Quantities.

    Parameters
    ----------
    leaves : sequence
        The arguments of one call (or their pytree leaves): DataArrays, Datasets,
        DataTrees, Variables, bare arrays, scalars, and tuples/lists/dicts of them.
        Scalars, coordinates and anything that is not an array are ignored; a
        Dask array counts as the library of its chunks.
    labels : sequence of str
        One name per entry of ``leaves``, used in the message.
    transform : str, optional
        The transform's name, prefixed to the message.

    Examples
    --------
    >>> import numpy as np, array_api_strict as xps, xarray as xr
    >>> from labeled_func.backends import check_one_backend
    >>> x = xr.DataArray(np.ones(3), dims="i")
    >>> check_one_backend([x, 2.0, np.ones(3)], ["x", "scale", "w"])    # one library: fine
    >>> check_one_backend([x.chunk(), np.ones(3)], ["data", "w"])        # Dask of NumPy + NumPy: fine
    >>> check_one_backend([x, {"w": xps.ones(3)}], ["x", "params"], transform="grad")
    Traceback (most recent call last):
    ...
    ValueError: grad: the arguments hold arrays of two libraries: x is numpy, params['w'] is array_api_strict; ...
    """
    first = None  # (library, label)
    for leaf, label in zip(leaves, labels):
        for array, where in _coordinate_arrays(leaf, label):  # a Quantity there: the policy error
            if _library(array) == "pint":
                _reject_quantity(array, where, transform)
        for array, where in data_arrays(leaf, label):
            library = _library(array)
            if library is None:
                continue
            if library == "pint":  # a Quantity (pint-xarray), or Dask chunks of them: the policy error
                _reject_quantity(array, where, transform)
            if first is None:
                first = (library, where)
            elif library != first[0]:
                prefix = f"{transform}: " if transform else ""
                raise ValueError(
                    f"{prefix}the arguments hold arrays of two libraries: {first[1]} is {first[0]}, "
                    f"{where} is {library}; one call works on one library, so convert one of "
                    "them first (e.g. cupy.asarray / cupy.asnumpy, or DataArray.as_numpy())"
                )


def data_arrays(value, label):
    """(array, label) for every data array inside ``value`` (coordinates left out; the
    walk of flat.Arrays), and every other leaf but labeled ones as it is (a number, None, a
    pint Quantity: the caller judges them)."""
    walk = Arrays(value)
    k = 0
    for path, leaf, count in zip(walk.paths, walk.leaves, walk.counts):
        where = label + "".join(f"[{key!r}]" for key in path)
        if not count:
            if not isinstance(leaf, (xr.DataArray, xr.Dataset, xr.Variable, xr.DataTree)):
                yield leaf, where
            continue
        for array, suffix in zip(walk.arrays[k:k + count], _suffixes(leaf)):
            yield array, where + suffix
        k += count


def _coordinate_arrays(value, label):
    """(array, label) for the coordinates of the DataArrays and Datasets inside ``value``
    that are not indexes (an index holds plain values: xarray converts it), as stored."""
    walk = Arrays(value)
    for path, leaf in zip(walk.paths, walk.leaves):
        if isinstance(leaf, (xr.DataArray, xr.Dataset)):
            where = label + "".join(f"[{key!r}]" for key in path)
            for name, variable in leaf._coords.items() if isinstance(leaf, xr.DataArray) else leaf.coords.variables.items():
                if name not in leaf._indexes:
                    yield variable._data, f"{where}'s coordinate {name!r}"


def _suffixes(leaf):
    """What follows the label of ``leaf`` for each of its arrays, in the walk's order."""
    if isinstance(leaf, xr.Dataset):
        return [f"[{name!r}]" for name in leaf.data_vars]
    if isinstance(leaf, xr.DataTree):
        return [f"[{path.rstrip('/') + '/' + str(name)!r}]" for path, ds in tree_nodes(leaf) for name in ds.data_vars]
    return [""]


def _library(array):
    """The array library of ``array`` by name ("numpy", "cupy", ...), None for a non-array;
    "pint" for a pint Quantity (never an array-API array: see :func:`_reject_quantity`)."""
    array = _chunk_type(bottom(array))  # an enclosing transform's value: the array it stands for
    if backend_of(array).units:
        return library_of(array)
    if not is_array(array):
        return None
    try:
        xp = namespace(array)
    except TypeError:  # not an array-API array (e.g. an unknown duck array): not ours to judge
        return None
    return namespace_library(xp)


def _chunk_type(array):
    """A Dask array's chunk type (its ``_meta``), other arrays themselves."""
    meta = getattr(array, "_meta", None)
    if meta is not None and backend_of(array).chunked:
        return meta
    return array


def _reject_quantity(array, where, transform):
    """The policy error of :func:`reject_quantities` for the Quantity ``array`` (or a Dask
    array of Quantity chunks), found at ``where`` of a call of ``transform``."""
    quantity = _chunk_type(bottom(array))
    reject_quantities([quantity], [where], transform=transform or "labeled_func")


# --- pint ---------------------------------------------------------------------------------------------
def reject_quantities(values, labels, *, transform):
    """Raise :class:`UnsupportedOperationError` where ``values`` (pytrees of labeled
    values and arrays) hold pint Quantities (pint-xarray's ``.pint.quantify()``).

    pint is never imported: a Quantity is an array whose type comes from the ``pint``
    package.  Transforms work on plain arrays; a quantified object is dequantified first,
    its units then in ``attrs["units"]``, from which derivatives take theirs.
    """
    for value, label in zip(values, labels):
        for array, where in [*data_arrays(value, label), *_coordinate_arrays(value, label)]:
            if backend_of(array).units:
                raise UnsupportedOperationError(
                    f"{transform}: {where} holds a pint Quantity ({type(array).__name__}, units "
                    f"{getattr(array, 'units', '?')}): the transforms work on plain NumPy/CuPy arrays. "
                    "Call .pint.dequantify() first (pint-xarray): the units then sit in attrs['units'], "
                    "and derivatives carry units computed from them (output units / argument units); "
                    "quantify the result again with .pint.quantify() if you need Quantities.")
