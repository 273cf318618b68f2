"""``lf.cond`` and ``lf.while_loop``: data-dependent control flow under vmap.

A predicate that is the same for every example (not mapped) runs Python control
flow.  A mapped predicate runs both branches and selects per example (``cond``),
or loops until every example is done, freezing finished ones (``while_loop``).
"""
from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable
from typing import Any

import numpy as np
import optree
import xarray as xr

from labeled_func_kernels import elementwise as ew

from labeled_func_kernels.primitive import known

from .engine import any_example_true, is_batched
from .engine.compiler import recording_of
from .flat import Arrays, is_number, leaf_arrays
from .named import tree_nodes
from .random import both_branches

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


def cond(pred: Any, true_fn: Callable[..., Any], false_fn: Callable[..., Any], *operands: Any) -> Any:
    """``true_fn(*operands)`` where ``pred`` holds, else ``false_fn(*operands)``.

    ``pred`` is one value per example: a bool, or a number (true when not zero, as
    ``jax.lax.cond`` takes it); anything else raises TypeError, more than one value
    ValueError.  When both branches run (a mapped predicate, or under ``lf.jit``) they
    must return the same structure, and leaf by leaf the same dims and sizes (in any
    order) and dtype: TypeError naming the branch and the output otherwise, where
    ``xr.where`` would broadcast or cast one of them silently.

    Parameters
    ----------
    pred : bool, number, 0-d array or 0-d DataArray
        The predicate: one value per example (mapped under vmap, or traced by lf.jit),
        or one value for all (then plain Python control flow runs one branch).
    true_fn, false_fn : callable
        The branches, called with ``*operands``; each returns a pytree of arrays,
        DataArrays or Datasets.
    *operands : Any
        The arguments of both branches.

    Returns
    -------
    Any
        The output of the branch that ``pred`` picks (per example where it is mapped),
        of the branches' common structure.

    Raises
    ------
    TypeError
        ``pred`` is not a bool or a number; the branches return different structures,
        dims, sizes or dtypes (naming the branch and the output).
    ValueError
        ``pred`` has dims (more than one value per example).

    Examples
    --------
    >>> import numpy as np, xarray as xr, labeled_func as lf
    >>> x = xr.DataArray([-2.0, 3.0], dims="sample")
    >>> relu = lambda x: lf.cond(x > 0, lambda v: v, lambda v: xr.zeros_like(v), x)
    >>> lf.vmap(relu, dim="sample")(x).values
    array([0., 3.])
    >>> lf.vmap(lambda x: lf.cond(x > 0, lambda v: v, lambda v: v > 0, x), dim="sample")(x)
    Traceback (most recent call last):
    ...
    TypeError: lf.cond: the branches return different dtypes: true_fn returns dtype float64 and false_fn dtype bool. ...
    """
    data = _data(pred)
    _check_predicate(pred, "cond")
    if not is_batched(data) and known(data):
        return true_fn(*operands) if bool(data) else false_fn(*operands)
    # mapped (one predicate per example) or recorded by lf.jit (one per later call): both
    # branches run and the predicate selects
    if np.dtype(pred.dtype).kind != "b":
        pred = pred != 0  # a number: true where not zero
    # Both branches run: each gets its own copy of the operands, so that an in-place
    # update in one branch is not seen by the other (nor by the caller).
    with both_branches() if not is_batched(data) else contextlib.nullcontext():  # (lf.jit's alone: no draws)
        on_true = true_fn(*_fresh(operands))
        on_false = false_fn(*_fresh(operands))
    _check_branches(on_true, on_false, _branch_name("true_fn", true_fn), _branch_name("false_fn", false_fn))
    return _select_tree(pred, on_true, on_false, "cond")


def while_loop(cond_fn: Callable[[Any], Any], body_fn: Callable[[Any], Any], init_val: Any) -> Any:
    """``val = body_fn(val)`` while ``cond_fn(val)``; per example under vmap.

    Under vmap with a mapped condition the body runs until every example is done, and
    the examples already done keep their value (the loop's result per example).

    Under ``lf.jit``, a condition traced by it (one that depends on the arguments) makes
    the loop one step of the recorded program, which loops at every call until that
    call's condition is false: the number of iterations follows each call's data.  The
    body is recorded once, so it must return the loop value's structure and, leaf by
    leaf, its dims, sizes and dtype (a Python number in ``init_val`` becomes a 0-d array
    of NumPy's dtype for it).

    Parameters
    ----------
    cond_fn : callable
        ``cond_fn(val)``: one boolean per example (a 0-d value).
    body_fn : callable
        ``body_fn(val)``: the next value, of the structure of ``val``.
    init_val : Any
        The first value: a pytree of arrays, DataArrays or Datasets.

    Returns
    -------
    Any
        The value once ``cond_fn`` is false (per example under vmap).

    Raises
    ------
    ValueError
        The condition has dims (more than one value per example).
    TypeError
        Under ``lf.jit`` (a condition it traces) or under vmap (a mapped condition):
        ``body_fn`` returns another structure, dims, sizes or dtype than ``init_val``
        (naming the leaf).  Under ``lf.jit``: the condition is not a bool or a number, or
        the loop value holds an ``xr.Variable``.
    UnsupportedOperationError
        Reverse-mode differentiation (``lf.grad``, ``lf.vjp``, ``lf.jacrev``) inside
        ``lf.jit`` through a loop whose condition ``lf.jit`` traces: the number of
        iterations depends on later calls' values (loop a fixed number of times instead,
        e.g. with ``lf.scan``).

    Examples
    --------
    >>> import xarray as xr, labeled_func as lf
    >>> limit = xr.DataArray([1.0, 5.0, 20.0], dims="sample")
    >>> double_past = lambda lim: lf.while_loop(lambda v: v <= lim, lambda v: v * 2, lim * 0 + 1)
    >>> lf.vmap(double_past, dim="sample")(limit).values
    array([ 2.,  8., 32.])
    >>> compiled = lf.jit(lf.vmap(double_past, dim="sample"))
    >>> compiled(limit).values, compiled(limit * 10).values  # the second call loops longer
    (array([ 2.,  8., 32.]), array([ 16.,  64., 256.]))
    """
    value = init_val
    while True:
        pred = cond_fn(value)
        data = _data(pred)
        mapped = is_batched(data)
        if not known(data) and not (mapped and _STRUCTURE_ONLY.get()):
            # traced by lf.jit: the loop is recorded as one step of its program
            return _recorded_loop(cond_fn, body_fn, value, recording_of(data))
        if not mapped:
            if not bool(data):
                return value
            value = body_fn(value)
            continue
        _check_scalar(pred, "while_loop")
        # The body runs for every example until all are done; it gets a copy of the state,
        # so that an in-place update cannot reach the examples that are already finished.
        if _STRUCTURE_ONLY.get():
            return _select_tree(pred, _checked_step(body_fn, value), value, "while_loop")
        if not any_example_true(data):
            return value
        value = _select_tree(pred, _checked_step(body_fn, value), value, "while_loop")


def _recorded_loop(cond_fn, body_fn, value, level):
    """The loop as one node of lf.jit's recording ``level``: the condition and the body
    are recorded on the arrays of ``value`` by the level's ``process_while_loop`` (lf.jit's:
    ``engine.compiler.loops.record_while_loop``).
    Where the condition is mapped, the body's step is selected per example (the examples
    already done keep their value) and the node loops while any example runs."""
    walk = Arrays(value, numbers="arrays", check=_check_state_leaf)  # a number: a 0-d array of NumPy's dtype
    paths, treedef, arrays, rebuild = walk.paths, walk.treedef, walk.arrays, walk.rebuild
    leaves = [np.asarray(leaf) if is_number(leaf) else leaf for leaf in walk.leaves]
    several = len(leaves) > 1 or paths != [()]
    names = ["output" + "".join(f"[{k!r}]" for k in path) if several else "the loop value" for path in paths]

    def cond(state):
        return _loop_predicate(cond_fn(rebuild(state)))

    def body(fresh):
        pred = _loop_predicate(cond_fn(rebuild(fresh())))
        out = body_fn(rebuild(fresh()))
        _check_body(value, out, leaves, treedef)
        new = []
        for leaf, result, name in zip(leaves, optree.tree_structure(value, none_is_leaf=True).flatten_up_to(out),
                                      names):
            new.extend(_aligned_arrays(leaf, result, name))
        if not is_batched(pred):
            return new
        return [ew.where.bind(pred, a, b) for a, b in zip(new, fresh())]

    return rebuild(level.process_while_loop(cond, body, arrays))


def _checked_step(body_fn, value):
    """``body_fn`` on a copy of ``value``, under vmap with a mapped condition: the examples
    that go on take its output and the others keep ``value``, in one array per leaf, so the
    body must keep each leaf's dims, sizes and dtype (checked: xr.where would promote a dtype
    and fail on sizes without naming the loop)."""
    out = body_fn(_fresh(value))
    leaves, treedef = optree.tree_flatten(value, none_is_leaf=True)
    _check_body(value, out, [np.asarray(leaf) if _is_number(leaf) else leaf for leaf in leaves], treedef)
    return out


def _is_number(leaf):
    return isinstance(leaf, (bool, int, float, complex, np.generic))


def _check_state_leaf(leaf, path):
    """A leaf of a loop value recorded by lf.jit: a Variable refused."""
    if isinstance(leaf, xr.Variable):
        raise TypeError("lf.while_loop under lf.jit: the loop value holds an xr.Variable; use a DataArray")


def _aligned_arrays(leaf, result, name):
    """The arrays of ``result`` (the body's output for ``leaf``), in the order of ``leaf``'s
    dims, of its dtype (checked)."""
    if isinstance(leaf, xr.DataArray):
        found = [result.transpose(*leaf.dims).data if isinstance(result, xr.DataArray) else result]
        expected = [leaf.data]
    elif isinstance(leaf, xr.Dataset):
        found = [result[var].transpose(*leaf[var].dims).data for var in leaf.data_vars]
        expected = [leaf[var].data for var in leaf.data_vars]
    elif isinstance(leaf, xr.DataTree):  # node by node (the structure is checked by _check_body)
        nodes = dict(tree_nodes(result))
        found = [nodes[path][var].transpose(*ds[var].dims).data for path, ds in tree_nodes(leaf) for var in ds.data_vars]
        expected = leaf_arrays(leaf)
    else:
        expected = leaf_arrays(leaf)
        found = expected and [result.data if isinstance(result, xr.DataArray) else result]
    arrays = []
    for array, reference in zip(found, expected):
        dtype, got = _dtype(reference), _dtype(np.asarray(array) if _is_number(array) else array)
        if _is_number(array) and np.result_type(dtype, array) == dtype:
            array = np.asarray(array, dtype=dtype)  # a Python number takes the loop value's dtype
        elif got != dtype:
            raise TypeError(f"lf.while_loop: body_fn returns dtype {got} for {name} where the loop "
                            f"value has dtype {dtype}; under lf.jit each iteration keeps the loop value's dtypes "
                            "(a Python number in init_val is a 0-d array of NumPy's dtype: int64 for 0, float64 "
                            "for 0.0): cast it (.astype(...)) or start from a value of that dtype")
        arrays.append(array)
    return arrays


def _dtype(array):
    return np.dtype(getattr(array.dtype, "_np_dtype", array.dtype))


def _loop_predicate(pred):
    """The data of a loop condition recorded by lf.jit: checked, a boolean."""
    _check_predicate(pred, "while_loop")
    data = _data(pred)
    if np.dtype(getattr(getattr(data, "dtype", None), "_np_dtype", getattr(data, "dtype", bool))).kind != "b":
        data = data != 0  # a number: true where not zero
    return data


def _check_body(init, out, leaves, treedef):
    """Under lf.jit the body returns the loop value's structure and, leaf by leaf, its
    kind, dims (in any order), sizes and dtype."""
    paths = optree.tree_paths(init, none_is_leaf=True)
    out_leaves, out_def = optree.tree_flatten(out, none_is_leaf=True)
    if out_def != treedef:
        shown = _shown_structures(init, out, treedef, out_def)
        raise TypeError(f"lf.while_loop: body_fn must return the structure of the loop value: init_val is "
                        f"{shown[0]} and body_fn returns {shown[1]} (the same containers, keys and number "
                        "of leaves)")
    several = len(leaves) > 1 or paths != [()]
    given = optree.tree_leaves(init, none_is_leaf=True)
    for path, a, b, original in zip(paths, leaves, out_leaves, given):
        where = " for output" + "".join(f"[{k!r}]" for k in path) if several else ""
        difference = _difference(_describe(a), _describe(b))
        if difference is not None:
            what, got_init, got_body = difference
            number = (f" (the Python number {original!r} in init_val is a 0-d array of dtype {_dtype(a)} "
                      "under lf.jit)") if _is_number(original) else ""
            raise TypeError(f"lf.while_loop: body_fn returns different {what}{where} than the loop value: "
                            f"init_val has {got_init}{number} and body_fn returns {got_body}. Under lf.jit, and "
                            "under lf.vmap where examples stop at different iterations, the loop value keeps its "
                            "dims, sizes and dtype from one iteration to the next: make body_fn return them "
                            "(e.g. .astype(...), xr.zeros_like(v)).")


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


def _check_predicate(pred, name):
    """``pred`` is one bool or number (jax.lax.cond's rule): TypeError for another dtype or
    type, ValueError for more than one value."""
    if isinstance(pred, (bool, int, float, np.bool_, np.integer, np.floating)):
        return
    if pred is None or isinstance(pred, (str, bytes, xr.Dataset)) or not hasattr(pred, "dtype"):
        raise TypeError(f"lf.{name}: the predicate must be a bool (or a number, true where not zero), "
                        f"or a 0-d DataArray of one; got {type(pred).__name__}")
    _check_scalar(pred, name)
    kind = np.dtype(getattr(pred.dtype, "_np_dtype", pred.dtype)).kind
    if kind not in "biuf":
        raise TypeError(f"lf.{name}: the predicate must be boolean (or a number, true where not zero), "
                        f"but it has dtype {pred.dtype}; compare it first (e.g. x > 0)")


def _branch_name(role, function):
    name = getattr(function, "__name__", None)
    return role if name in (None, "<lambda>", role) else f"{role} ({name})"


def _check_branches(on_true, on_false, true_name, false_name):
    """Both branches return the same structure and, leaf by leaf, the same kind of value,
    dims (in any order), sizes and dtype (what jax.lax.cond requires of its branches)."""
    true_paths, true_leaves, true_def = optree.tree_flatten_with_path(on_true, none_is_leaf=True)
    false_leaves, false_def = optree.tree_flatten(on_false, none_is_leaf=True)
    if true_def != false_def:
        shown = _shown_structures(on_true, on_false, true_def, false_def)
        raise TypeError(f"lf.cond: the branches return different structures: {true_name} returns "
                        f"{shown[0]} and {false_name} {shown[1]}; both must return the same "
                        "(the same containers, keys and number of outputs)")
    several = len(true_leaves) > 1 or true_paths != [()]
    for path, a, b in zip(true_paths, true_leaves, false_leaves):
        where = " for output" + "".join(f"[{k!r}]" for k in path) if several else ""
        difference = _difference(_describe(a), _describe(b))
        if difference is not None:
            what, got_true, got_false = difference
            raise TypeError(f"lf.cond: the branches return different {what}{where}: {true_name} returns "
                            f"{got_true} and {false_name} {got_false}. Both branches must return the same "
                            "dims, sizes and dtype (each example takes one of them; xr.where would "
                            "broadcast or cast silently): make them agree (e.g. xr.zeros_like(v), "
                            ".astype(...), .expand_dims(...)).")


def _shown_structures(a, b, a_def, b_def):
    """Two differing structures as a message shows them: their outlines, or their tree
    definitions where the outlines look alike."""
    shown = (_structure(a), _structure(b))
    return (str(a_def), str(b_def)) if shown[0] == shown[1] else shown


def _structure(tree):
    if isinstance(tree, (tuple, list)):
        return f"a {type(tree).__name__} of {len(tree)}"
    if isinstance(tree, dict):
        return f"a dict with keys {sorted(tree, key=str)}"
    return f"one {type(tree).__name__}"


def _describe(leaf):
    """(kind, {dim: size} or shape, dtype) of a branch's output leaf; a Python number is
    'a number' (it takes the dtype of the other branch, as in NumPy)."""
    if isinstance(leaf, xr.Dataset):
        return ("Dataset", {name: _describe(var) for name, var in leaf.data_vars.items()}, None)
    if isinstance(leaf, xr.DataTree):
        return ("DataTree", {path: _describe(ds) for path, ds in tree_nodes(leaf)}, None)
    if isinstance(leaf, (xr.DataArray, xr.Variable)):
        return (type(leaf).__name__, dict(leaf.sizes), np.dtype(getattr(leaf.dtype, "_np_dtype", leaf.dtype)))
    if leaf is None:
        return ("None", None, None)
    if isinstance(leaf, (bool, int, float, complex)):
        return ("number", {}, None)
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        return ("array", tuple(leaf.shape), np.dtype(getattr(leaf.dtype, "_np_dtype", leaf.dtype)))
    return (type(leaf).__name__, None, None)


def _show(kind, sizes):
    article = "an" if kind[0] in "aeiouAEIOU" else "a"
    if kind == "number":
        return "a Python number"
    if kind in ("DataArray", "Variable"):
        dims = ", ".join(f"{d}: {n}" for d, n in sizes.items())
        return f"{article} {kind} with dims ({dims})"
    if kind == "array":
        return f"an array of shape {sizes}"
    return f"{article} {kind}"


def _difference(a, b):
    """(what differs, as in true_fn, as in false_fn) or None."""
    (kind_a, sizes_a, dtype_a), (kind_b, sizes_b, dtype_b) = a, b
    if "number" in (kind_a, kind_b):
        other_kind, other_sizes = (kind_b, sizes_b) if kind_a == "number" else (kind_a, sizes_a)
        if other_kind == "number" or (other_kind in ("DataArray", "Variable", "array") and not other_sizes):
            return None  # a Python number takes the other branch's dtype; 0-d only
        return "kinds of output", _show(kind_a, sizes_a), _show(kind_b, sizes_b)
    if kind_a != kind_b:
        return "kinds of output", _show(kind_a, sizes_a), _show(kind_b, sizes_b)
    if kind_a in ("DataTree", "Dataset"):  # parts by name: a tree's nodes, a Dataset's variables
        parts, part = ("nodes", "node") if kind_a == "DataTree" else ("data variables", "data variable")
        if sorted(sizes_a) != sorted(sizes_b):
            return parts, sorted(sizes_a), sorted(sizes_b)
        for name in sizes_a:
            found = _difference(sizes_a[name], sizes_b[name])
            if found is not None:
                return f"{found[0]} in {part} {name!r}", found[1], found[2]
        return None
    if sizes_a != sizes_b:
        return ("dims" if kind_a != "array" else "shapes"), _show(kind_a, sizes_a), _show(kind_b, sizes_b)
    if dtype_a != dtype_b:
        return "dtypes", f"dtype {dtype_a}", f"dtype {dtype_b}"
    return None


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
        selected = xr.where(condition, a, b, keep_attrs=True)
        if isinstance(selected, xr.DataArray):  # the branches' name (xr.where would take the predicate's)
            names = {x.name for x in (a, b) if isinstance(x, xr.DataArray)}
            selected.name = names.pop() if len(names) == 1 else None
        return selected
    if a is None:
        return None
    return ew.where.bind(_data(pred), a, b)
