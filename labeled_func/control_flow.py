"""``lf.cond`` and ``lf.while_loop``: data-dependent control flow under vmap.

A predicate that is the same for every example (not mapped) runs Python control
flow.  A mapped predicate runs both branches and selects per example (``cond``),
or loops until every example is done, freezing finished ones (``while_loop``).
"""
from __future__ import annotations

import contextlib
import contextvars

import numpy as np
import optree
import xarray as xr

from kernels import elementwise as ew

from kernels.primitive import known

from .engine import any_example_true, is_batched
from .engine.errors import UnsupportedOperationError

__all__ = ["cond", "while_loop"]

# Set while a lazy (Dask) vmap runs the function once on a stand-in to learn the outputs'
# structure: the stand-in's values are not the data, so a mapped while_loop must not wait
# for them to meet its condition (it could loop forever); one iteration gives the structure.
_STRUCTURE_ONLY = contextvars.ContextVar("labeled_func_structure_only", default=False)


@contextlib.contextmanager
def structure_only():
    """Within: a mapped ``while_loop`` runs its body once instead of until done."""
    token = _STRUCTURE_ONLY.set(True)
    try:
        yield
    finally:
        _STRUCTURE_ONLY.reset(token)


def cond(pred, true_fn, false_fn, *operands):
    """``true_fn(*operands)`` where ``pred`` holds, else ``false_fn(*operands)``.

    >>> import numpy as np, xarray as xr, labeled_func as lf
    >>> x = xr.DataArray([-2.0, 3.0], dims="sample")
    >>> relu = lambda x: lf.cond(x > 0, lambda v: v, lambda v: xr.zeros_like(v), x)
    >>> lf.vmap(relu, dim="sample")(x).values
    array([0., 3.])
    """
    data = _data(pred)
    if not is_batched(data) and known(data):
        return true_fn(*operands) if bool(data) else false_fn(*operands)
    # mapped (one predicate per example) or recorded by lf.jit (one per later call): both
    # branches run and the predicate selects
    _check_scalar(pred, "cond")
    # Both branches run: each gets its own copy of the operands, so that an in-place
    # update in one branch is not seen by the other (nor by the caller).
    on_true = true_fn(*_fresh(operands))
    on_false = false_fn(*_fresh(operands))
    return _select_tree(pred, on_true, on_false, "cond")


def while_loop(cond_fn, body_fn, init_val):
    """``val = body_fn(val)`` while ``cond_fn(val)``; per example under vmap.

    >>> import xarray as xr, labeled_func as lf
    >>> limit = xr.DataArray([1.0, 5.0, 20.0], dims="sample")
    >>> double_past = lambda lim: lf.while_loop(lambda v: v <= lim, lambda v: v * 2, lim * 0 + 1)
    >>> lf.vmap(double_past, dim="sample")(limit).values
    array([ 2.,  8., 32.])
    """
    value = init_val
    while True:
        pred = cond_fn(value)
        data = _data(pred)
        if not known(data):
            raise UnsupportedOperationError(
                "lf.while_loop with a condition traced by lf.jit: the number of iterations would depend "
                "on the values of later calls, and lf.jit cannot record such a loop yet. Call lf.jit on "
                "the loop body instead (lf.while_loop(cond, lf.jit(body), x)), or loop a fixed number of "
                "times (for _ in range(n)) and select with lf.cond / xr.where."
            )
        if not is_batched(data):
            if not bool(data):
                return value
            value = body_fn(value)
            continue
        _check_scalar(pred, "while_loop")
        # The body runs for every example until all are done; it gets a copy of the state,
        # so that an in-place update cannot reach the examples that are already finished.
        if _STRUCTURE_ONLY.get():
            return _select_tree(pred, body_fn(_fresh(value)), value, "while_loop")
        if not any_example_true(data):
            return value
        value = _select_tree(pred, body_fn(_fresh(value)), value, "while_loop")


def _fresh(tree):
    """``tree`` with every array copied (DataArrays and Datasets deeply), others as they are."""
    def copy(leaf):
        if isinstance(leaf, (xr.DataArray, xr.Dataset, xr.Variable)):
            return leaf.copy(deep=True)
        if hasattr(leaf, "shape") and hasattr(leaf, "dtype") and not isinstance(leaf, np.generic):
            return leaf.copy()
        return leaf

    return optree.tree_map(copy, tree, none_is_leaf=True)


def _data(pred):
    return pred.data if isinstance(pred, (xr.DataArray, xr.Variable)) else pred


def _check_scalar(pred, name):
    if getattr(pred, "ndim", 0) != 0:
        dims = getattr(pred, "dims", getattr(pred, "shape", ()))
        raise ValueError(f"lf.{name}: the predicate must be one boolean per example, but it has dims {dims}; reduce it (e.g. .any() or .all())")


def _select_tree(pred, on_true, on_false, name):
    true_leaves, true_def = optree.tree_flatten(on_true, none_is_leaf=True)
    false_leaves, false_def = optree.tree_flatten(on_false, none_is_leaf=True)
    if true_def != false_def:
        raise ValueError(f"lf.{name}: both branches must return the same structure, got {true_def} and {false_def}")
    selected = [_select(pred, a, b) for a, b in zip(true_leaves, false_leaves)]
    return optree.tree_unflatten(true_def, selected)


def _select(pred, a, b):
    if isinstance(a, (xr.DataArray, xr.Dataset)) or isinstance(b, (xr.DataArray, xr.Dataset)):
        condition = pred if isinstance(pred, xr.DataArray) else xr.DataArray(_data(pred))
        return xr.where(condition, a, b, keep_attrs=True)
    if a is None:
        return None
    return ew.where.bind(_data(pred), a, b)
