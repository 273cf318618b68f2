"""``lf.jit``: trace a function once, replay it without xarray.

The first call with a given signature runs the function under the compiler level
(``engine/compile.py``), which records the primitives it applies; the outputs' labels
(dims, coords, attrs, names) are kept as a template.  Later calls with the same
signature replay the recorded program on the new arrays and put the results back in
the template: the function is not called, and no xarray operation runs inside.
"""
from __future__ import annotations

import collections
import copy
import functools
import inspect
import numbers
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optree
import xarray as xr

from . import dask as lazy
from .assemble import coord_variables, dataarray_holding, dataset_holding, holding
from .engine import active, current_levels
from .engine.compile import JitLevel, JitTracer
from .flat import replace_arrays
from .named import tree_nodes
from .vmap import zero_d_index_error

__all__ = ["jit", "CACHE_SIZE"]

CACHE_SIZE = 32
"""Programs kept per jitted function (the least recently used is dropped)."""


def jit(func: Callable[..., Any], *, static_argnames: str | Sequence[str] = (), keep_buffers: bool = False) -> Jitted:
    """``func`` compiled: traced once per signature, then replayed.

    The first call runs ``func`` on traced arrays and records the primitives it applies
    (inside ``vmap``, ``grad``, ``jacrev``... the batched and differentiated computation
    they produce); later calls whose arguments have the same signature replay that program
    on the new arrays and return outputs labeled as the first call's were.

    The signature of a call is the structure of its arguments (pytrees of DataArrays,
    Datasets, DataTrees, Variables, arrays, numbers; the node paths and variables of
    each DataTree), the dims, shapes, dtypes and memory layouts (strides) of their arrays,
    their coordinates, names and attrs, and the values of Python numbers, ``None`` and the
    arguments named in ``static_argnames`` (hashable; a new value traces again).  Pass a
    0-d array or DataArray for a number that changes from call to call.  Up to
    ``CACHE_SIZE`` programs are kept per function.

    Inside, a traced value stands for the values of every later call: a Python ``if``,
    ``bool()``, ``float()`` or ``.item()`` on it raises the same errors as under ``vmap``
    (use ``xr.where`` / ``lf.cond``), and so does a shape that depends on its values.
    ``lf.random`` draws are made afresh at every call.  Other side effects (``print``,
    appending to a list) happen while tracing only, as in JAX.  Called inside another
    transform, ``jit`` runs ``func`` as it is.  On Dask-backed arguments the results are
    lazy, as ``func``'s are, and each lazy ``lf.vmap`` inside compiles its blocks: one
    program per block shape, replayed in every block.  See docs/jit.md.

    Parameters
    ----------
    func : callable
        Takes and returns pytrees of DataArrays, Datasets, DataTrees, Variables, arrays
        and numbers.
    static_argnames : str or sequence of str
        Parameters of ``func`` whose values are part of the signature (any hashable
        value: a string option, a tuple of dims); a new value traces again.
    keep_buffers : bool
        Keep the scratch memory of a program's last run for its next run (NumPy): the
        large intermediate arrays that no output holds (a gradient's residuals) are
        written into memory already touched, instead of fresh pages that the operating
        system must zero and map (about a quarter of a long time-stepping gradient's
        replay). The price: that memory (the peak of one run's scratch) stays held
        between calls, while the jitted function keeps the program. Off by default.

    Returns
    -------
    Jitted
        A callable with ``func``'s signature and name; ``.traces`` counts the traces.

    Raises
    ------
    ValueError
        ``static_argnames`` names a parameter that ``func`` does not have.
    TypeError
        ``keep_buffers`` is not a bool. When called: an argument that is neither an array, a labeled value, a number, a
        string nor None (name it in ``static_argnames``), or an unhashable static
        argument.
    lf.DataDependentControlFlowError
        When traced: ``if``, ``bool()`` on a traced value (``lf.ItemError`` for
        ``float()``, ``.item()``; ``lf.DynamicShapeError`` for a shape that depends on
        values).
    lf.UnsupportedOperationError
        When traced: reverse-mode differentiation (``lf.grad``...) through an
        ``lf.while_loop`` whose condition is traced; ``x.isel(t=i)`` with a 0-d traced
        position ``i`` (the message gives the recipe: a length-1 dim).

    Examples
    --------
    Per-sample derivatives of v³, 3v², compiled once and replayed:

    >>> import numpy as np, xarray as xr, labeled_func as lf
    >>> x = xr.DataArray(np.linspace(0.0, 1.0, 5), dims="sample")
    >>> per_sample = lf.jit(lf.vmap(lf.grad(lambda v: v ** 3), dim="sample"))
    >>> per_sample(x).values.tolist()
    [0.0, 0.1875, 0.75, 1.6875, 3.0]
    >>> per_sample(x + 1).values.tolist()  # the same signature: replayed
    [3.0, 4.6875, 6.75, 9.1875, 12.0]
    """
    if isinstance(static_argnames, str):
        static_argnames = (static_argnames,)
    if not isinstance(keep_buffers, (bool, np.bool_)):
        raise TypeError(f"lf.jit: keep_buffers must be True or False, not {keep_buffers!r}")
    return Jitted(func, tuple(static_argnames), bool(keep_buffers))


class Jitted:
    """A function with its recorded programs, one per signature."""

    def __init__(self, func, static_argnames, keep_buffers=False):
        self.func = func
        self.static_argnames = static_argnames
        self.keep_buffers = keep_buffers
        try:
            self.signature = inspect.signature(func)
        except (TypeError, ValueError):
            self.signature = None
        if static_argnames:
            known = set(self.signature.parameters) if self.signature is not None else set()
            unknown = [name for name in static_argnames if name not in known]
            if unknown:
                raise ValueError(f"lf.jit: static_argnames names {unknown}, which are not parameters of "
                                 f"{getattr(func, '__name__', 'the function')} (it has {sorted(known)})")
        self.cache = collections.OrderedDict()
        self.lock = threading.Lock()
        self.tracing = threading.Lock()
        self.blocks = weakref.WeakKeyDictionary()  # vmap level -> its Dask blocks, jitted
        self.traces = 0  # how many times the function was traced (for tests and curiosity)
        functools.update_wrapper(self, func, updated=())

    def __call__(self, *args, **kwargs):
        if current_levels():  # inside another transform: the function as it is
            return self.func(*args, **kwargs)
        if lazy.has_lazy_leaves(args, kwargs):  # Dask: each lazy vmap inside compiles its blocks
            with lazy.compiled_blocks(self._block_program):
                return self.func(*args, **kwargs)
        call = _Call(self, args, kwargs)
        compiled = self._cached(call)
        if compiled is None:
            with self.tracing:  # one trace per signature, however many threads ask at once
                compiled = self._cached(call)
                if compiled is None:
                    compiled, result = self._trace(call)
                    with self.lock:
                        self.cache[call.key] = compiled
                        while len(self.cache) > CACHE_SIZE:
                            self.cache.popitem(last=False)
                    return result
        return compiled.outputs.build(compiled.program.run(call.arrays))

    def _cached(self, call):
        with self.lock:
            compiled = self.cache.get(call.key)
            if compiled is None or not compiled.matches(call):
                return None
            self.cache.move_to_end(call.key)
            return compiled

    def _block_program(self, mapped, block):
        """The jitted form of a lazy vmap's per-block function ``block`` (``mapped`` is the
        vmap level: the same object at every call when the vmap is built outside)."""
        with self.lock:
            jitted = self.blocks.get(mapped)
            if jitted is None:
                jitted = self.blocks[mapped] = Jitted(block, (), self.keep_buffers)
            return jitted

    def __getstate__(self):  # to a Dask worker: the function, not its programs or locks
        return {"func": self.func, "static_argnames": self.static_argnames, "keep_buffers": self.keep_buffers}

    def __setstate__(self, state):
        self.__init__(state["func"], state["static_argnames"], state.get("keep_buffers", False))

    def _trace(self, call):
        level = JitLevel()
        level.label = "jit"
        with active(level):
            traced = [level.input(array) for array in call.arrays]
            args, kwargs = call.rebuild(traced)
            try:
                out = self.func(*args, **kwargs)
            except ValueError as error:
                clearer = zero_d_index_error(error, "jit")
                if clearer is None:
                    raise
                raise clearer from error
            outputs = _Outputs(out, level)
        program = level.program
        program.outputs = outputs.slots
        program.keep_buffers = self.keep_buffers
        program.prune()
        self.traces += 1
        return _Compiled(call, program, outputs), outputs.build(outputs.values)

    def __repr__(self):
        return f"<lf.jit of {getattr(self.func, '__name__', self.func)!r}: {len(self.cache)} program(s)>"


class _Compiled:
    def __init__(self, call, program, outputs):
        self.program = program
        self.outputs = outputs
        self.check = call.check

    def matches(self, call):
        """Whether ``call``'s labels equal those of the traced call (the key holds their
        shapes; coordinate values and attrs are compared here)."""
        if len(call.check) != len(self.check):
            return False
        for mine, theirs in zip(self.check, call.check):
            if mine[0] == "coords":
                if any(a is not b and not a.equals(b) for a, b in zip(mine[1], theirs[1])):
                    return False
            elif not _same_attrs(mine[1], theirs[1]):
                return False
        return True


def _same_attrs(a, b):
    if a.keys() != b.keys():
        return False
    for key in a:
        x, y = a[key], b[key]
        if x is y:
            continue
        try:
            if not bool(np.all(x == y)):
                return False
        except (TypeError, ValueError):
            return False
    return True


# --- a call: its signature, its arrays, and how to rebuild its arguments -----------------------------
class _Call:
    def __init__(self, jitted, args, kwargs):
        self.jitted = jitted
        statics = ()
        self.bound = None
        if jitted.static_argnames:
            self.bound = jitted.signature.bind(*args, **kwargs)
            self.bound.apply_defaults()
            arguments = self.bound.arguments
            statics = tuple((name, _hashable(name, arguments[name])) for name in jitted.static_argnames)
            tree = {name: value for name, value in arguments.items() if name not in jitted.static_argnames}
        else:
            tree = (tuple(args), dict(kwargs))
        paths, self.leaves, self.treedef = optree.tree_flatten_with_path(tree, none_is_leaf=True)
        self.arrays, self.check, self.counts, key = [], [], [], []
        for path, leaf in zip(paths, self.leaves):
            kind, arrays = self._leaf(leaf, path)
            self.counts.append(len(arrays))
            self.arrays.extend(arrays)
            key.append(kind)
        # the memory layout of NumPy arrays too: the replay writes results in the layout
        # NumPy gave them when recorded (sums over them then add in the same order)
        layouts = tuple(a.strides if type(a) is np.ndarray else None for a in self.arrays)
        self.key = (self.treedef, tuple(key), statics, layouts)

    def _where(self, path):
        """``argument 'x'``, ``argument 'params'['a']``, ``keyword argument 'scale'``."""
        if self.bound is not None:
            return f"argument {path[0]!r}" + "".join(f"[{k!r}]" for k in path[1:])
        kind, rest = path[0], path[1:]
        if kind == 0:
            names = list(self.jitted.signature.parameters) if self.jitted.signature is not None else []
            label = f"argument {names[rest[0]]!r}" if rest[0] < len(names) else f"argument {rest[0]}"
        else:
            label = f"keyword argument {rest[0]!r}"
        return label + "".join(f"[{k!r}]" for k in rest[1:])

    def _leaf(self, leaf, path):
        if isinstance(leaf, xr.DataArray):
            self.check.append(("coords", _coordinates(leaf)))
            self.check.append(("attrs", leaf.attrs))
            return ("DataArray", leaf.dims, leaf.shape, str(leaf.dtype), leaf.name, _coord_key(leaf)), [leaf.data]
        if isinstance(leaf, xr.Dataset):
            names, variables = list(leaf.data_vars), leaf._variables
            self.check.append(("coords", _coordinates(leaf)))
            self.check.append(("attrs", {**leaf.attrs, **{f"{name}.": variables[name].attrs for name in names}}))
            layout = tuple((name, variables[name].dims, variables[name].shape, str(variables[name].dtype))
                           for name in names)
            return ("Dataset", layout, _coord_key(leaf)), [variables[name].data for name in names]
        if isinstance(leaf, xr.Variable):
            self.check.append(("attrs", leaf.attrs))
            return ("Variable", leaf.dims, leaf.shape, str(leaf.dtype)), [leaf.data]
        if isinstance(leaf, xr.DataTree):
            layout, arrays = [], []
            for node_path, ds in tree_nodes(leaf):
                kind, node_arrays = self._leaf(ds, path)
                layout.append((node_path, kind))
                arrays.extend(node_arrays)
            return ("DataTree", leaf.name, tuple(layout)), arrays
        if isinstance(leaf, (bool, numbers.Number, str, type(None))) and not hasattr(leaf, "shape"):
            return ("constant", type(leaf), leaf), []
        if isinstance(leaf, np.generic):
            return ("constant", type(leaf), leaf.item()), []
        if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
            return ("array", type(leaf), tuple(leaf.shape), str(leaf.dtype)), [leaf]
        raise TypeError(
            f"lf.jit: {self._where(path)} is a {type(leaf).__name__}, which is neither an array, a labeled value "
            "(DataArray, Dataset, DataTree, Variable), nor a number: name it in static_argnames (it is then part of the signature, "
            "and a new value traces again), or close over it"
        )

    def rebuild(self, arrays):
        """The call's ``(args, kwargs)`` with its arrays replaced by ``arrays``."""
        leaves, k = [], 0
        for leaf, count in zip(self.leaves, self.counts):
            new = arrays[k:k + count]
            k += count
            leaves.append(_replace_arrays(leaf, new) if count else leaf)
        tree = optree.tree_unflatten(self.treedef, leaves)
        if self.bound is None:
            return tree
        bound = copy.copy(self.bound)
        bound.arguments = {name: tree.get(name, value) for name, value in self.bound.arguments.items()}
        return bound.args, bound.kwargs


def _replace_arrays(leaf, arrays):
    """``leaf`` holding ``arrays`` instead of its own (a DataTree: its nodes' data variables,
    parents first)."""
    if isinstance(leaf, xr.Variable):
        return leaf.copy(deep=False, data=arrays[0])
    if isinstance(leaf, xr.DataTree):
        nodes, k = {}, 0
        for path, ds in tree_nodes(leaf):
            count = len(ds.data_vars)
            nodes[path] = replace_arrays(ds, arrays[k:k + count]) if count else ds
            k += count
        return xr.DataTree.from_dict(nodes, name=leaf.name)
    return replace_arrays(leaf, arrays)


def _coordinates(leaf):
    """The coordinate variables of a labeled leaf, compared on a cache hit (the key holds
    their names, dims, shapes and dtypes)."""
    return tuple(coord_variables(leaf).values())


def _coord_key(leaf):
    return tuple((name, c.dims, c.shape, str(c.dtype)) for name, c in coord_variables(leaf).items())


def _hashable(name, value):
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"lf.jit: the static argument {name!r} must be hashable (it is part of the "
                        f"signature), got a {type(value).__name__}") from None
    return value


# --- outputs: the template, the slots of their arrays ----------------------------------------------
def _placeholder(array):
    """A stand-in of ``array``'s shape and dtype that holds no memory (a template's data)."""
    dtype = np.dtype(getattr(array.dtype, "_np_dtype", array.dtype))  # array_api_strict's dtypes wrap NumPy's
    return np.broadcast_to(np.zeros((), dtype=dtype), tuple(array.shape))


class _Outputs:
    """The structure of the outputs, each traced array a slot of the program."""

    def __init__(self, out, level):
        paths, leaves, self.treedef = optree.tree_flatten_with_path(out, none_is_leaf=True)
        self.slots, self.values, self.builders = [], [], []
        for path, leaf in zip(paths, leaves):
            self.builders.append(self._leaf(leaf, level, "output" + "".join(f"[{k!r}]" for k in path)))

    def _array(self, value, level):
        """The index of a traced array among the program's outputs, or None (a constant)."""
        if type(value) is JitTracer:
            if value._level is not level:  # pragma: no cover - an escaped tracer
                raise TypeError("lf.jit: an output holds a value traced by another lf.jit")
            self.slots.append(level.output_slot(value))
            self.values.append(value._value)
            return len(self.slots) - 1
        return None

    def _leaf(self, leaf, level, where):
        if isinstance(leaf, (xr.DataArray, xr.Dataset)):
            return self._labeled(leaf, level)
        if isinstance(leaf, xr.Variable):
            data = self._array(leaf.data, level)
            template = leaf.copy(deep=False, data=_placeholder(leaf.data)) if data is not None else leaf
            return ("Variable", template, data, {})
        if isinstance(leaf, xr.DataTree):
            nodes = [(path, self._labeled(ds, level)) for path, ds in tree_nodes(leaf)]
            return ("DataTree", leaf.name, nodes, {})
        k = self._array(leaf, level)
        if k is not None:
            return ("array", None, k, {})
        if hasattr(leaf, "shape") or isinstance(leaf, (numbers.Number, str, type(None))):
            return ("constant", leaf, None, {})
        raise TypeError(f"lf.jit: {where} is a {type(leaf).__name__}; return arrays, DataArrays, Datasets, "
                        "DataTrees, Variables or numbers")

    def _labeled(self, leaf, level):
        """A DataArray's or Dataset's template, with the slots of its traced arrays."""
        coords = {name: self._array(c.data, level) for name, c in coord_variables(leaf).items()
                  if name not in leaf.xindexes}
        coords = {name: k for name, k in coords.items() if k is not None}
        if isinstance(leaf, xr.DataArray):
            data = self._array(leaf.data, level)
            template = leaf.copy(deep=False, data=_placeholder(leaf.data) if data is not None else None)
        else:
            data = {name: self._array(leaf[name].data, level) for name in leaf.data_vars}
            template = leaf.copy(deep=False, data={name: _placeholder(leaf[name].data) if k is not None
                                                   else leaf[name].data for name, k in data.items()})
        if coords:  # traced coordinates: placeholders too, filled at each build
            template = template.assign_coords({name: template[name].variable.copy(
                deep=False, data=_placeholder(template[name].data)) for name in coords})
        return (type(leaf).__name__, template, data, coords)

    def build(self, arrays):
        leaves = []
        for kind, template, data, coords in self.builders:
            if kind == "array":
                leaves.append(arrays[data])
            elif kind == "constant":
                leaves.append(template)
            elif kind == "Variable":
                leaves.append(template.copy(deep=False) if data is None else template.copy(deep=False, data=arrays[data]))
            elif kind == "DataTree":
                nodes = {path: _build_labeled(*node, arrays) for path, node in data}
                leaves.append(xr.DataTree.from_dict(nodes, name=template))
            else:
                leaves.append(_build_labeled(kind, template, data, coords, arrays))
        return optree.tree_unflatten(self.treedef, leaves)


def _build_labeled(kind, template, data, coords, arrays):
    """A DataArray or Dataset like ``template`` (a shallow copy: nothing of it shared with the
    template but arrays and indexes), holding the program's outputs ``arrays``."""
    if kind == "DataArray":
        variable = template.variable
        variable = variable.copy(deep=False) if data is None else holding(variable, arrays[data])
        value = dataarray_holding(template, variable)
        for name, k in coords.items():  # the placeholders of traced coordinates
            value._coords[name] = holding(template._coords[name], arrays[k])
        return value
    variables = template._variables
    replaced = {name: holding(variables[name], arrays[k]) for name, k in data.items() if k is not None}
    replaced.update({name: holding(variables[name], arrays[k]) for name, k in coords.items()})
    return dataset_holding(template, replaced)
