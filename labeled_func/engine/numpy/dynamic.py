"""Data-dependent shapes: nonzero, unique, extract, compress, trim_zeros, bincount, the set
operations (union1d, intersect1d, setdiff1d, setxor1d)...

The output shape follows the values.  Under vmap a mapped value has one set of values
per example, hence one shape per example, and under jit a traced value stands for the
values of later calls: both are policy errors (DynamicShapeError, naming the function).  A constant, or a value traced only by grad/jvp, has one
concrete value (the primal) that fixes the shape, as torch.func's grad allows:
positions are computed from it and the values picked with getitem, so derivatives
flow through them.  :func:`fixed` is that rule, used by the other families too
(boolean masks, ``np.repeat`` counts, ``np.split`` points).
"""
from __future__ import annotations

import operator
from collections import namedtuple

import numpy as np

from labeled_func_kernels import core as kcore
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import indexing as ki
from labeled_func_kernels import reductions as kr
from labeled_func_kernels.backend import backend_of, dtype_kind, known_true, namespace, normalize_axis
from labeled_func_kernels.primitive import bottom, known, top_level

from .. import diagnose
from ..errors import DynamicShapeError
from ..stack import is_batched, structure_value
from .dispatch import asarray, implements

__all__ = ["fixed", "pick", "register_agreement", "register_checks", "agreed_constant", "agreed_positions", "UniqueAllResult",
           "UniqueCountsResult", "UniqueInverseResult"]


# The rules of lf.vmap(..., branches="agree") for data-dependent shapes, registered by the vmap
# level's module (which imports this one): functions, set once at import, not transform state.
_AGREEMENT: dict = {}


# ``examples(value, failing, error, what)``: batching.check_examples (a check made per example,
# a guard under lf.jit), registered by the vmap level's module as the rules above
_CHECKS: dict = {}


def register_checks(examples):
    _CHECKS.update(examples=examples)


def register_agreement(constant, positions):
    """``constant(value, culprit)``: the values every example of a mapped ``value`` holds, or
    None; ``positions(value, culprit)``: ``np.nonzero`` per example where every example has as
    many nonzero elements (mapped positions), or None (see ``batching.agreed_positions``)."""
    _AGREEMENT.update(constant=constant, positions=positions)


def agreed_constant(value, culprit):
    rule = _AGREEMENT.get("constant")
    return None if rule is None else rule(value, culprit)


def agreed_positions(value, culprit):
    rule = _AGREEMENT.get("positions")
    return None if rule is None else rule(value, culprit)


def fixed(value, culprit):
    """The concrete values that fix a data-dependent shape; DynamicShapeError if mapped."""
    if top_level((value,), culprit) is None:  # not traced (a traced value is checked for escape)
        return _host(value)
    if is_batched(value) or not known(value):
        if is_batched(value):  # lf.vmap(..., branches="agree"): the same values in every example
            common = agreed_constant(value, culprit)
            if common is not None:
                return common
        else:
            structure = structure_value(value, "shape", f"the output shape of {culprit}")
            if structure is not None:
                return _host(structure)
        transform = "vmap" if is_batched(value) else "jit"
        raise DynamicShapeError(diagnose.dynamic_shape_message(diagnose.call_site(), culprit, transform))
    return _host(bottom(value))


def _host(value):
    """``value`` as a NumPy array: a shape is decided on the host anyway, and positions
    are small integer arrays (getitem moves them to the data's device)."""
    backend = backend_of(value)
    if backend.on_device:
        return backend.to_host(value)
    return value if backend.native and not isinstance(value, (list, tuple)) else np.asarray(value)


def _on_device_of(value, out):
    """Positions and counts found on the host, back in the library of ``value`` (CuPy:
    on the GPU, as CuPy's own function returns them); NumPy's as they are."""
    if not backend_of(value).on_device:
        return out
    xp = namespace(value)
    if isinstance(out, tuple):
        return type(out)(*[xp.asarray(part) for part in out]) if hasattr(out, "_fields") else tuple(
            xp.asarray(part) for part in out)
    return xp.asarray(out)


def pick(a, positions, axis):
    """``a`` (flattened when ``axis`` is None) at integer ``positions`` along ``axis``."""
    a = asarray(a)
    if axis is None:
        a, axis = kcore.reshape.bind(a, shape=(-1,)), 0
    axis = normalize_axis(axis, a.ndim)[0]
    template, arrays = ki.split_key((slice(None),) * axis + (positions,))
    return ki.getitem.bind(a, *arrays, template=template)


def _count(value):
    """The size of ``value`` (flattened) without touching its data."""
    return int(np.prod(np.shape(value)))


def refuse_value_dtype(value, name, what, advice):
    """Raise DynamicShapeError where ``value`` is mapped (vmap: a batch has one dtype) or
    recorded for later calls (lf.jit: a program has one), when ``what`` (the dtype of
    ``name``'s result) follows its values; under grad and jvp the primal decides, as in
    NumPy, and nothing is raised."""
    if top_level((value,), name) is None or not (is_batched(value) or not known(value)):
        return
    transform, inputs = ("vmap", "a mapped input") if is_batched(value) else ("lf.jit", "the inputs of later calls")
    site = diagnose.call_site()
    where = f" (called from {site.location})" if site.location else ""
    raise DynamicShapeError(f"{name} under {transform}{where}: {what} depends on the values of {inputs}, and the "
                            f"result can have one dtype only. {advice}")

@implements(np.nonzero)
def _nonzero(a):
    if is_batched(a):  # lf.vmap(..., branches="agree"): the same mask, or as many elements, per example
        common = agreed_constant(a, "numpy.nonzero")
        if common is not None:
            return _on_device_of(a, np.nonzero(common))
        positions = agreed_positions(a, "numpy.nonzero")
        if positions is not None:
            return positions
    return _on_device_of(a, np.nonzero(fixed(a, "numpy.nonzero")))


@implements(np.argwhere)
def _argwhere(a):
    return _on_device_of(a, np.argwhere(fixed(a, "numpy.argwhere")))


@implements(np.flatnonzero)
def _flatnonzero(a):
    return _on_device_of(a, np.flatnonzero(fixed(a, "numpy.flatnonzero")))


@implements(np.unique)
def _unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
            equal_nan=True, sorted=True):
    found = np.unique(fixed(ar, "numpy.unique"), return_index=True, return_inverse=return_inverse,
                      return_counts=return_counts, axis=axis, equal_nan=equal_nan, sorted=sorted)
    values = pick(ar, found[1], axis)
    out = (values,) + _on_device_of(ar, ((found[1],) if return_index else ()) + tuple(found[2:]))
    return out[0] if len(out) == 1 else out


UniqueAllResult = namedtuple("UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])
UniqueCountsResult = namedtuple("UniqueCountsResult", ["values", "counts"])
UniqueInverseResult = namedtuple("UniqueInverseResult", ["values", "inverse_indices"])


def _unique_all_of(x, name):
    """np.unique_all's result with traced values (sorted; NumPy leaves the order open)."""
    found = np.unique_all(fixed(x, f"numpy.{name}"))
    return _on_device_of(x, found), pick(x, found.indices, None)


@implements(np.unique_values)
def _unique_values(x):
    return _unique_all_of(x, "unique_values")[1]


@implements(np.unique_counts)
def _unique_counts(x):
    found, values = _unique_all_of(x, "unique_counts")
    return UniqueCountsResult(values, found.counts)


@implements(np.unique_inverse)
def _unique_inverse(x):
    found, values = _unique_all_of(x, "unique_inverse")
    return UniqueInverseResult(values, found.inverse_indices)


@implements(np.unique_all)
def _unique_all(x):
    found, values = _unique_all_of(x, "unique_all")
    return UniqueAllResult(values, found.indices, found.inverse_indices, found.counts)


@implements(np.extract)
def _extract(condition, arr):
    # NumPy's own rule on positions: take(ravel(arr), nonzero(ravel(condition)))
    positions = np.extract(fixed(condition, "numpy.extract"), np.arange(_count(arr)))
    return pick(arr, positions, None)


@implements(np.compress)
def _compress(condition, a, axis=None, out=None):
    a = asarray(a)
    length = _count(a) if axis is None else a.shape[normalize_axis(axis, a.ndim)[0]]
    positions = np.compress(fixed(condition, "numpy.compress"), np.arange(length))
    return pick(a, positions, axis)


@implements(np.trim_zeros)
def _trim_zeros(filt, trim="fb", axis=None):
    nonzero = fixed(filt, "numpy.trim_zeros") != 0
    trim = trim.lower()
    key = [slice(None)] * nonzero.ndim
    for ax in (range(nonzero.ndim) if axis is None else normalize_axis(axis, nonzero.ndim)):
        others = tuple(i for i in range(nonzero.ndim) if i != ax)
        hits = np.flatnonzero(nonzero.any(axis=others) if others else nonzero)
        size = nonzero.shape[ax]
        start = (int(hits[0]) if hits.size else size) if "f" in trim else 0
        stop = (int(hits[-1]) + 1 if hits.size else 0) if "b" in trim else size
        key[ax] = slice(start, max(start, stop))
    return ki.getitem_static(filt, tuple(key))


@implements(np.bincount)
def _bincount(x, /, weights=None, minlength=0):
    """How often each non-negative int occurs in ``x``, or the sums of ``weights`` there.

    There are max(x) + 1 bins (at least ``minlength``): the length follows the values.  A
    mapped ``x`` therefore needs ``minlength`` above all its values, so that every example
    has ``minlength`` bins, as in the loop; else DynamicShapeError.  Under grad/jvp the
    primal fixes the length.
    """
    x = asarray(x)
    if x.ndim != 1:
        raise ValueError("numpy.bincount: object too deep for desired array" if x.ndim > 1 else
                         "numpy.bincount: object of too small depth for desired array")
    if dtype_kind(x.dtype) not in "biu":
        raise TypeError(f"numpy.bincount: cannot cast array data from dtype('{x.dtype}') to dtype('int64') "
                        "according to the rule 'safe'")
    minlength = operator.index(minlength)
    if minlength < 0:
        raise ValueError("numpy.bincount: 'minlength' must not be negative")
    extra = []
    if weights is not None:
        weights = asarray(weights)
        if tuple(np.shape(weights)) != tuple(x.shape):
            raise ValueError("numpy.bincount: the weights and list don't have the same length.")
        extra.append(weights)
    if dtype_kind(x.dtype) == "b":
        x = ew.astype.bind(x, dtype=namespace(x).int64)
    if x.shape[0] and known_true(ew.less.bind(x, 0)):
        raise ValueError("numpy.bincount: 'list' argument must have no negative elements")
    if is_batched(x):
        _check_fixed_length(x, minlength)
        length = minlength
    elif minlength and not known(x) and _below(x, minlength):  # lf.jit: the check is a guard
        length = minlength
    else:
        values = fixed(x, "numpy.bincount")
        length = max(minlength, int(values.max()) + 1 if values.size else 0)
    return kr.bincount.bind(x, *extra, length=length)


def _check_fixed_length(x, minlength):
    """DynamicShapeError unless ``minlength`` is above every value of the mapped ``x`` (per
    example, naming those that are not; under lf.jit a guard re-checks it at every replay)."""
    site = diagnose.call_site()
    where = f" (called from {site.location})" if site.location else ""

    def error(examples):
        why = ("without minlength= the number of bins is max(x) + 1, which follows the values of each example"
               if not minlength else
               f"a value >= minlength={minlength} in {examples or 'some example'} would add bins to it only")
        return DynamicShapeError(
            f"numpy.bincount of a mapped x under vmap{where}: {why}, and a batch cannot hold arrays of "
            "different shapes. Pass minlength= larger than every value (each example then has exactly "
            "minlength bins), or np.histogram with fixed bins.")

    if not minlength:
        raise error(None)
    _check_below(x, minlength, error)


def _check_below(x, minlength, error):
    """Raise ``error(examples)`` unless every value of ``x`` is below ``minlength`` (per
    example: ``batching.check_examples``, a guard under lf.jit)."""
    _CHECKS["examples"](x, lambda rows: (rows >= minlength).any(axis=1), error,
                        f"numpy.bincount's values below minlength={minlength}")


class _Above(Exception):
    pass


def _below(x, minlength):
    """Whether every value of the recorded ``x`` is below ``minlength`` (then a guard of lf.jit)."""
    try:
        _check_below(x, minlength, lambda examples: _Above())
    except _Above:
        return False
    return True


# --- set operations: sorted unique values, positions found on the primal ---------------------------
def _flat(a):
    a = asarray(a)
    if not hasattr(a, "shape"):
        a = np.asarray(a)
    return kcore.reshape.bind(a, shape=(-1,)) if a.ndim != 1 else a


def _first_positions(values):
    """Where each distinct value first occurs in ``values`` (1-D), in sorted order."""
    return np.unique(values, return_index=True)[1]


def _joined(ar1, ar2, name):
    """Both arrays flattened and joined (traced, in NumPy's promoted dtype), their values on
    the host, and the length of the first."""
    first, second = _flat(ar1), _flat(ar2)
    values = (np.ravel(fixed(first, f"numpy.{name}")), np.ravel(fixed(second, f"numpy.{name}")))
    joined = np.concatenate((first, second))
    return joined, np.concatenate(values), values, first.shape[0]


@implements(np.union1d)
def _union1d(ar1, ar2):
    """The sorted distinct values of both, each picked where it first occurs (ar1 first).
    The length follows the values: under grad the primal fixes it, under vmap a mapped input
    is a DynamicShapeError."""
    joined, host, _, _ = _joined(ar1, ar2, "union1d")
    return pick(joined, _first_positions(host), 0)


@implements(np.intersect1d)
def _intersect1d(ar1, ar2, assume_unique=False, return_indices=False):
    """The sorted values found in both, picked from ``ar1`` (derivatives reach ``ar1``); the
    positions of NumPy's own ``return_indices``.  Dynamic shapes as union1d."""
    first, second = _flat(ar1), _flat(ar2)
    found = np.intersect1d(np.ravel(fixed(first, "numpy.intersect1d")), np.ravel(fixed(second, "numpy.intersect1d")),
                           assume_unique=assume_unique, return_indices=True)
    values = pick(first, found[1], 0)
    if found[0].dtype != np.dtype(getattr(values.dtype, "_np_dtype", values.dtype)):  # NumPy's promoted dtype
        values = ew.astype.bind(values, dtype=_dtype_in(values, found[0].dtype))
    if return_indices:
        return (values,) + _on_device_of(first, (found[1], found[2]))
    return values


def _dtype_in(value, dtype):
    xp = namespace(value)
    return getattr(xp, dtype.name, dtype)


@implements(np.setdiff1d)
def _setdiff1d(ar1, ar2, assume_unique=False):
    """The values of ``ar1`` not in ``ar2``: sorted and distinct (in ``ar1``'s order with
    ``assume_unique``).  Dynamic shapes as union1d."""
    first, second = _flat(ar1), _flat(ar2)
    values = np.ravel(fixed(first, "numpy.setdiff1d"))
    others = np.ravel(fixed(second, "numpy.setdiff1d"))
    candidates = np.arange(values.shape[0]) if assume_unique else _first_positions(values)
    keep = ~np.isin(values[candidates], others, assume_unique=assume_unique)
    return pick(first, candidates[keep], 0)


@implements(np.setxor1d)
def _setxor1d(ar1, ar2, assume_unique=False):
    """The sorted values found in exactly one of the two.  Dynamic shapes as union1d."""
    joined, host, (values, others), count = _joined(ar1, ar2, "setxor1d")
    if assume_unique:
        candidates = np.arange(host.shape[0])
    else:
        candidates = np.concatenate((_first_positions(values), count + _first_positions(others)))
    if candidates.size == 0:
        return pick(joined, candidates, 0)
    order = candidates[np.argsort(host[candidates], kind="stable")]
    ordered = host[order]
    distinct = np.concatenate(([True], ordered[1:] != ordered[:-1], [True]))
    return pick(joined, order[distinct[1:] & distinct[:-1]], 0)
