"""``lf.checkpoint`` and ``lf.scan``: long loops under reverse mode without keeping every step.

Reverse mode keeps what each operation needs for the backward pass: through an explicit
time-stepper of T steps that is T copies of the state and its intermediates.
``lf.checkpoint(f)`` keeps only what ``f`` reads (its arguments and the values it closes
over) and runs ``f`` again on the backward pass; ``lf.scan`` is the loop of a time-stepper
(a carry, and outputs stacked along a named dim, like ``jax.lax.scan``), with
``checkpoint_every=k`` wrapping each run of k steps in a checkpoint: T/k states kept
between the runs, and k at a time inside one while it is pulled back.

Only reverse levels act on a checkpoint: under vmap, jvp/jacfwd and lf.jit the function
runs as it is, traced, so derivatives are exact by every route.  Our tracing is eager:
the loop of ``scan`` runs in Python, one step after the other.
"""
from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
import optree
import xarray as xr

from ._wrapping import transformed
from .assemble import dataarray_like, dataset_like, holding
from .engine import bind_checkpoint
from .flat import Arrays

__all__ = ["checkpoint", "scan"]


def checkpoint(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func``, whose intermediate values reverse mode does not keep: it runs ``func``
    again on the backward pass.

    Under ``lf.grad`` (``vjp``, ``jacrev``, ``hessian``) a call of the checkpointed function
    keeps only the values it reads that the transform traces (its arguments and what it
    closes over) and its outputs; the backward pass runs it again, under a reverse level of
    its own, and pulls the cotangents back through that run: the memory of one call, for
    the time of a second forward run.  The rerun is itself differentiable, so
    ``grad(grad(f))`` and ``hessian`` work (an outer reverse level keeps everything).
    Under ``vmap``, ``jvp``, ``jacfwd`` and ``lf.jit`` (alone) it runs as it is.

    ``func`` takes and returns what a transformed function does (DataArrays, Datasets,
    arrays, numbers and tuples/lists/dicts of them); other arguments are passed as they
    are.  It must be deterministic (no ``lf.random`` draws: the backward pass would draw
    again), and under a reverse level it must not write in place into a value it closes
    over (``lf.InplaceError``); writes into its own arguments stay inside the call.

    Parameters
    ----------
    func : callable
        The function whose intermediate values are recomputed rather than kept.

    Returns
    -------
    callable
        ``func`` with the same signature, name and values, and the same derivatives.

    Raises
    ------
    TypeError
        ``func`` is not callable.
    lf.InplaceError
        Under a reverse level: ``func`` writes in place into a traced value it closes
        over.

    Examples
    --------
    The gradient of tanh(u)² is 2 tanh(u) / cosh(u)², through the checkpoint:

    >>> import numpy as np, xarray as xr, labeled_func as lf
    >>> x = xr.DataArray([0.5, 1.0], dims="site")
    >>> smooth = lf.checkpoint(lambda u: np.tanh(u) ** 2)
    >>> g = lf.grad(lambda u: smooth(u).sum())(x)
    >>> bool(np.allclose(g, 2 * np.tanh(x) / np.cosh(x) ** 2))
    True
    """
    if not callable(func):
        raise TypeError(f"lf.checkpoint: func must be callable, got {type(func).__name__}")

    def checkpointed(*args, **kwargs):
        inputs = _arrays((args, kwargs), "the arguments")
        seen = []

        def run(arrays):
            new_args, new_kwargs = inputs.rebuild(arrays)
            output = _arrays(func(*new_args, **new_kwargs), "the output")
            if not seen:
                seen.append(output)
            return output.arrays

        outs = bind_checkpoint(run, inputs.arrays)
        return seen[0].rebuild(outs)

    return transformed(checkpointed, func, "checkpoint")


def scan(step: Callable[[Any, Any], tuple[Any, Any]], init: Any, xs: Any = None, length: int | None = None, *,
         dim: str = "step", checkpoint_every: int | None = None) -> tuple[Any, Any]:
    """Loop ``carry, y = step(carry, x)`` over ``xs``; return the last carry and the ``y`` s
    stacked along ``dim``.

    The loop it stands for::

        carry, ys = init, []
        for x in xs (along dim):
            carry, y = step(carry, x)
            ys.append(y)
        return carry, stack(ys, dim)

    Parameters
    ----------
    step : callable
        ``step(carry, x) -> (carry, y)``.  ``carry`` and ``y`` are pytrees (tuples, lists,
        dicts) of DataArrays, Datasets, arrays and numbers; ``y`` may be None.
    init : pytree
        The first carry.  Each step must return a carry of the same structure, with the same
        dims (in any order: they are put back in ``init`` 's), shapes and dtypes.
    xs : pytree, optional
        Sliced at each step: DataArrays and Datasets along ``dim`` (the dim and the
        coordinates along it are gone in ``x``: they label the stacked ``ys``; to read a
        step's coordinate value, put it in ``xs``, e.g. ``(forcing, forcing.time)``), arrays
        along axis 0.  None:
        ``x`` is None and ``length`` gives the number of steps.
    length : int, optional
        The number of steps; needed when ``xs`` is None, checked against ``xs`` otherwise.
    dim : str
        The dim of ``xs`` to loop over, and the new (first) dim of the stacked labeled
        outputs, with the coordinates of ``xs`` along it (of dims ``(dim,)``).  Arrays are
        stacked along a new axis 0.
    checkpoint_every : int, optional
        Cut the loop into runs of this many steps, each one :func:`checkpoint` ed: reverse
        mode keeps the carry between runs (T/k of them for T steps) and the k steps of one
        run while it is pulled back, memory O(T/k + k), smallest near k = sqrt(T), for a
        second forward run in time.  Values, and derivatives of every order and mode, are
        those of the loop without it.

    Returns
    -------
    carry : pytree
        The carry after the last step (``init`` for no steps).
    ys : pytree
        The ``y`` of every step stacked along ``dim`` (None where ``y`` is None).

    Raises
    ------
    TypeError
        ``step`` is not callable, ``step`` does not return a pair, or the carry changes
        dtype or kind (number, array, DataArray, Dataset).
    ValueError
        ``length`` and ``xs`` are missing or disagree, a leaf of ``xs`` lacks ``dim``,
        ``checkpoint_every`` is not a positive int, the carry changes structure, dims or
        shape, or a ``y`` changes structure or already has ``dim``.

    Examples
    --------
    A cumulative sum, with the coordinate of ``xs`` on the outputs:

    >>> import numpy as np, xarray as xr, labeled_func as lf
    >>> xs = xr.DataArray([1.0, 2.0, 3.0], dims="time", coords={"time": [10, 20, 30]})
    >>> total, partial = lf.scan(lambda c, x: (c + x, c + x), xr.DataArray(0.0), xs, dim="time")
    >>> float(total), partial.values.tolist(), partial.time.values.tolist()
    (6.0, [1.0, 3.0, 6.0], [10, 20, 30])

    The gradient of a decay through 100 steps, keeping 10 carries instead of 100:

    >>> decay = lambda rate: lf.scan(lambda u, _: (u * (1 - rate), None), xr.DataArray(1.0),
    ...                              length=100, checkpoint_every=10)[0]
    >>> rate = xr.DataArray(0.01)
    >>> bool(np.isclose(lf.grad(decay)(rate), -100 * 0.99 ** 99))
    True
    """
    if not callable(step):
        raise TypeError(f"lf.scan: step must be callable (step(carry, x) -> (carry, y)), got {type(step).__name__}")
    if not isinstance(dim, str):
        raise ValueError(f"lf.scan: dim must be a str (the dim of xs to loop over), got {dim!r}")
    steps = _number_of_steps(xs, length, dim)
    every = _checkpoint_every(checkpoint_every)
    loop = _Loop(step, init, dim)
    carry, ys = init, []
    stepped = _without_step_coordinates(xs, dim)
    if every is None:
        carry, ys = loop.run(init, stepped, 0, steps)
    else:
        segment = checkpoint(loop.run)
        for start in range(0, steps, every):
            stop = min(start + every, steps)
            carry, part = segment(carry, _slice(stepped, dim, slice(start, stop)), start, stop - start)
            ys.extend(part)
    return carry, _stack(ys, xs, dim)


# --- the loop -------------------------------------------------------------------------------------
class _Loop:
    """The steps, and the carry every step must give back (structure, dims, shapes, dtypes)."""

    def __init__(self, step, init, dim):
        self.step = step
        self.dim = dim
        paths, self.leaves, self.treedef = optree.tree_flatten_with_path(init, none_is_leaf=True)
        self.names = ["carry" + "".join(f"[{k!r}]" for k in path) for path in paths]
        self.y_first = None  # the structure of the first step's y, and its leaves

    def run(self, carry, xs, start, count):
        """Steps ``start`` to ``start + count`` (``xs`` holds theirs): (carry, [y, ...])."""
        ys = []
        for i in range(count):
            out = self.step(carry, _slice(xs, self.dim, i))
            if not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError(f"lf.scan: step must return a pair (carry, y), got {type(out).__name__} "
                                f"at step {start + i}")
            carry = self._checked(out[0], start + i)
            ys.append(self._checked_y(out[1], start + i))
        return carry, ys

    def _checked(self, carry, index):
        try:
            leaves = self.treedef.flatten_up_to(carry)
            if optree.tree_structure(carry, none_is_leaf=True) != self.treedef:
                raise ValueError
        except ValueError:
            raise ValueError(f"lf.scan: step {index} changed the structure of the carry: "
                             f"{optree.tree_structure(carry, none_is_leaf=True)} instead of {self.treedef}") from None
        fitted = [_same_kind(new, old, name, index) for new, old, name in zip(leaves, self.leaves, self.names)]
        return optree.tree_unflatten(self.treedef, fitted)

    def _checked_y(self, y, index):
        paths, leaves, treedef = optree.tree_flatten_with_path(y, none_is_leaf=True)
        described = [_describe(leaf) for leaf in leaves]
        if self.y_first is None:
            self.y_first = (treedef, described)
        elif treedef != self.y_first[0]:
            raise ValueError(f"lf.scan: step {index} returned y of structure {treedef}, the earlier steps "
                             f"{self.y_first[0]}; every step must return the same structure")
        for path, leaf, now, before in zip(paths, leaves, described, self.y_first[1]):
            name = "y" + "".join(f"[{k!r}]" for k in path)
            if now != before:
                raise ValueError(f"lf.scan: step {index} returned {name} as {now}, the earlier steps as {before}; "
                                 "the outputs of every step are stacked, so they must agree")
            if isinstance(leaf, (xr.DataArray, xr.Dataset)) and self.dim in leaf.dims:
                raise ValueError(f"lf.scan: step {index} returned {name} with dim {self.dim!r} already: the outputs "
                                 f"are stacked along dim={self.dim!r}; pass another dim= to lf.scan")
        return y


def _describe(leaf):
    """What must agree between the outputs of two steps to stack them."""
    if leaf is None:
        return "None"
    if isinstance(leaf, xr.Dataset):
        return f"a Dataset of {sorted(leaf.data_vars)} with sizes {dict(sorted(leaf.sizes.items()))}"
    if isinstance(leaf, xr.DataArray):
        return f"a DataArray of sizes {dict(sorted(leaf.sizes.items()))}"
    if _is_array(leaf):
        return f"an array of shape {tuple(leaf.shape)}"
    return f"a {type(leaf).__name__}"


def _same_kind(new, old, name, index):
    """``new`` (a carry leaf after step ``index``) checked against ``old`` (the same leaf of
    ``init``), with the dims of a DataArray put back in ``old`` 's order."""
    def fail(what, exception=ValueError):
        raise exception(f"lf.scan: step {index} changed {name}: {what}. The carry must keep its "
                        "structure, dims, shapes and dtypes from step to step.")

    if isinstance(old, (xr.DataArray, xr.Dataset)):
        if type(new) is not type(old):
            fail(f"{type(old).__name__} at the start, {type(new).__name__} after the step", TypeError)
        if isinstance(old, xr.Dataset) and set(new.data_vars) != set(old.data_vars):
            fail(f"data variables {sorted(old.data_vars)} at the start, {sorted(new.data_vars)} after the step")
        variables = ([(None, old, new)] if isinstance(old, xr.DataArray)
                     else [(v, old[v], new[v]) for v in old.data_vars])
        for var, a, b in variables:
            which = "" if var is None else f"variable {var!r}: "
            if set(b.dims) != set(a.dims) or any(b.sizes[d] != a.sizes[d] for d in a.dims):
                fail(f"{which}sizes {dict(a.sizes)} at the start, {dict(b.sizes)} after the step")
            if b.dtype != a.dtype:
                fail(f"{which}dtype {a.dtype} at the start, {b.dtype} after the step (cast init, or the "
                     "step's result, with .astype)", TypeError)
        if all(b.dims == a.dims for _, a, b in variables):
            return new  # in order already: a transpose would only copy the labels
        return new.transpose(*old.dims)
    if isinstance(new, (xr.DataArray, xr.Dataset)):
        fail(f"{type(old).__name__} at the start, {type(new).__name__} after the step", TypeError)
    if _is_array(old):
        if not _is_array(new):
            fail(f"an array at the start, {type(new).__name__} after the step", TypeError)
        if tuple(new.shape) != tuple(old.shape):
            fail(f"shape {tuple(old.shape)} at the start, {tuple(new.shape)} after the step")
        if new.dtype != old.dtype:
            fail(f"dtype {old.dtype} at the start, {new.dtype} after the step (cast init, or the step's "
                 "result, with .astype)", TypeError)
        return new
    if isinstance(old, numbers.Number) and not (isinstance(new, numbers.Number)
                                                or (_is_array(new) and not tuple(new.shape))):
        fail(f"a number at the start, {type(new).__name__} after the step", TypeError)
    if old is None and new is not None:
        fail(f"None at the start, {type(new).__name__} after the step", TypeError)
    return new


# --- xs: the number of steps, one step's slice ------------------------------------------------------
def _number_of_steps(xs, length, dim):
    if length is not None and (not isinstance(length, numbers.Integral) or isinstance(length, bool)):
        raise TypeError(f"lf.scan: length must be an int (the number of steps), got {length!r}")
    sizes = []
    paths, leaves, _ = optree.tree_flatten_with_path(xs, none_is_leaf=True)
    for path, leaf in zip(paths, leaves):
        name = "xs" + "".join(f"[{k!r}]" for k in path)
        if isinstance(leaf, (xr.DataArray, xr.Dataset)):
            if dim not in leaf.dims:
                raise ValueError(f"lf.scan: {name} has no dim {dim!r} to loop over (its dims: {tuple(leaf.dims)}); "
                                 f"pass dim= the dim of xs to loop over")
            sizes.append((name, leaf.sizes[dim]))
        elif _is_array(leaf):
            if not leaf.shape:
                raise ValueError(f"lf.scan: {name} is 0-d: an array of xs is looped over along its axis 0")
            sizes.append((name, leaf.shape[0]))
        elif leaf is not None:
            raise TypeError(f"lf.scan: {name} is a {type(leaf).__name__}; xs holds DataArrays, Datasets and arrays")
    if length is None and not sizes:
        raise ValueError("lf.scan: give xs (what to loop over) or length (the number of steps)")
    steps = int(length) if length is not None else sizes[0][1]
    for name, size in sizes:
        if size != steps:
            first = f"length={length}" if length is not None else f"{sizes[0][0]} has {steps} along {dim!r}"
            raise ValueError(f"lf.scan: {first}, but {name} has {size}; xs and length must agree on the "
                             "number of steps")
    if steps < 1:
        raise ValueError(f"lf.scan: length={steps}: the loop needs at least one step (the stacked outputs "
                         "take their structure from the step)")
    return steps


def _checkpoint_every(every):
    if every is None:
        return None
    if not isinstance(every, numbers.Integral) or isinstance(every, bool) or every < 1:
        raise ValueError(f"lf.scan: checkpoint_every={every!r} must be a positive int (steps per checkpointed "
                         "run; about sqrt(length) keeps the least) or None")
    return int(every)


def _without_step_coordinates(xs, dim):
    """``xs`` without its coordinates along ``dim``, which one step's ``x`` does not hold:
    as a scalar coordinate, a step's ``time`` would label every value the step computes
    from ``x``, and so the carry, with the step it came from (or with none, where xarray
    drops two that disagree: the last carry's coordinates followed the parity of the
    number of steps), and xarray would merge it at every operation of the step (a
    quarter of a bucket model's time).  Dropped once, not sliced at every step."""
    def strip(leaf):
        if isinstance(leaf, (xr.DataArray, xr.Dataset)):
            along = [name for name, c in leaf.coords.items() if dim in c.dims]
            return leaf.drop_vars(along) if along else leaf
        return leaf

    return None if xs is None else optree.tree_map(strip, xs, none_is_leaf=True)


def _slice(xs, dim, key):
    """``xs`` at step ``key`` (an int) or steps ``key`` (a slice) along ``dim`` / axis 0."""
    def take(leaf):
        if isinstance(leaf, (xr.DataArray, xr.Dataset)):
            stepped = _at_step(leaf, dim, key) if isinstance(key, numbers.Integral) else None
            return leaf.isel({dim: key}) if stepped is None else stepped
        if _is_array(leaf):
            return leaf[key]
        return leaf

    return None if xs is None else optree.tree_map(take, xs, none_is_leaf=True)


def _at_step(leaf, dim, index):
    """``leaf.isel({dim: index})`` of a DataArray or Dataset without coordinates along
    ``dim``, put together from its parts (xarray's isel checks and copies what is known
    here: a third of a cheap step's time); None where they do not fit."""
    def at(var):
        if dim not in var.dims:
            return var
        axis = var.dims.index(dim)
        return holding(var, var.data[(slice(None),) * axis + (index,)], var.dims[:axis] + var.dims[axis + 1:])

    if isinstance(leaf, xr.DataArray):
        return dataarray_like(leaf, at(leaf.variable))
    return dataset_like(leaf, {name: at(var) for name, var in leaf._variables.items() if dim in var.dims})


# --- ys: stacked along dim --------------------------------------------------------------------------
def _stack(ys, xs, dim):
    coordinates = _coordinates(xs, dim)
    treedef = optree.tree_structure(ys[0], none_is_leaf=True)
    columns = zip(*[treedef.flatten_up_to(y) for y in ys])
    return optree.tree_unflatten(treedef, [_stack_leaf(list(column), dim, coordinates) for column in columns])


def _stack_leaf(values, dim, coordinates):
    first = values[0]
    if first is None:
        return None
    if isinstance(first, xr.Dataset):
        return xr.Dataset({v: _stack_leaf([value[v] for value in values], dim, coordinates) for v in first.data_vars},
                          attrs=first.attrs)
    if isinstance(first, xr.DataArray):
        data = np.stack([(value if value.dims == first.dims else value.transpose(*first.dims)).data
                         for value in values])
        coords = {name: c.variable for name, c in first.coords.items() if name != dim and name not in coordinates}
        coords.update(coordinates)
        return xr.DataArray(data, dims=(dim, *first.dims), coords=coords, name=first.name, attrs=first.attrs)
    return np.stack([np.asarray(v) if isinstance(v, numbers.Number) else v for v in values])


def _coordinates(xs, dim):
    """The coordinates of ``xs`` along ``dim`` alone (the index and any other coordinate of
    dims ``(dim,)``, of the first leaf that has some): {name: Variable}."""
    for leaf in optree.tree_leaves(xs, none_is_leaf=True):
        if isinstance(leaf, (xr.DataArray, xr.Dataset)):
            found = {name: c.variable for name, c in leaf.coords.items() if c.dims == (dim,)}
            if found:
                return found
    return {}


# --- pytrees as flat lists of arrays ----------------------------------------------------------------
def _arrays(tree, what):
    """The arrays inside a pytree (flat.Arrays: numbers stay constants); a DataTree refused."""
    def check(leaf, path):
        if isinstance(leaf, xr.DataTree):
            raise TypeError(f"lf.checkpoint: {what} hold a DataTree; pass its datasets (tree.to_dict()) instead")

    return Arrays(tree, check=check)


def _is_array(value):
    return hasattr(value, "shape") and hasattr(value, "dtype")
