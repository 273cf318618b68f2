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
import struct
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optree
import xarray as xr
from xarray.core.options import OPTIONS as XARRAY_OPTIONS

from . import dask as lazy
from . import random as lf_random
from .assemble import coord_variables, dataarray_holding, dataset_holding, holding
from .engine import active, current_levels
from .engine.compile import JitLevel, JitTracer
from .engine.errors import InplaceError, RandomnessError
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

    A jitted call returns what ``func`` returns (the same labels, dtypes and values, to the
    bit but for the documented tolerances of fused evaluations), writes into its arguments
    as ``func`` does, and draws ``lf.random`` numbers as ``func`` draws them; or it raises.
    The signature of a call is the structure of its arguments (pytrees of DataArrays,
    Datasets, DataTrees, Variables, arrays, numbers; the node paths and variables of
    each DataTree), the dims, shapes, dtypes, array types and memory layouts (strides) of
    their arrays, their coordinates (values, attrs, encodings, index types), names, attrs
    and encodings, which arguments are the same array, xarray's options that change
    results (``keep_attrs``...), and Python numbers, ``None`` and
    the arguments named in ``static_argnames`` (hashable) by type and exact value (``1``,
    ``1.0``, ``0.0`` and ``-0.0`` are four programs).  Pass a 0-d array or DataArray for a
    number that changes from call to call.  Up to ``CACHE_SIZE`` programs are kept per
    function.  See docs/jit.md, "The contract".

    Inside, a traced value stands for the values of every later call: a Python ``if``,
    ``bool()``, ``float()`` or ``.item()`` on it raises the same errors as under ``vmap``
    (use ``xr.where`` / ``lf.cond``), and so does a shape that depends on its values.
    ``lf.random`` draws are made at every call as ``func`` makes them (a seed inside
    ``func`` gives the same draws at every call).  Other side effects (``print``,
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
    lf.InplaceError
        ``func`` writes into an argument that shares memory with another argument
        without being the same array.
    lf.RandomnessError
        When traced: ``func`` draws from NumPy's global random state (``np.random.*``).
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
        self.cache = collections.OrderedDict()  # (key, number) -> program, least recently used first
        self.variants = {}  # key -> the cache's keys of its programs (labels that differ)
        self.stored = 0
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
                    self._store(call, compiled)
                    return result
        return compiled.outputs.build(compiled.run(call))

    def _cached(self, call):
        """The program of ``call``'s signature: among those of its key, the one whose labels
        (compared, not hashed: attrs, coordinate values) are ``call``'s."""
        with self.lock:
            for key in self.variants.get(call.key, ()):
                compiled = self.cache[key]
                if compiled.matches(call):
                    self.cache.move_to_end(key)
                    return compiled
            return None

    def _store(self, call, compiled):
        with self.lock:
            self.stored += 1
            key = (call.key, self.stored)
            self.cache[key] = compiled
            self.variants.setdefault(call.key, []).append(key)
            while len(self.cache) > CACHE_SIZE:
                dropped, _ = self.cache.popitem(last=False)
                variants = self.variants[dropped[0]]
                variants.remove(dropped)
                if not variants:
                    del self.variants[dropped[0]]

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
        drew_from_numpy = lf_random.numpy_state()
        with active(level), lf_random.recorded_draws(level) as draws:
            traced, aliases = [], call.key[-1]
            for k, array in enumerate(call.arrays):
                tracer = level.input(array)  # every argument an input, so that positions line up
                traced.append(tracer if aliases is None or aliases[k] == k else traced[aliases[k]])
            args, kwargs = call.rebuild(traced)
            try:
                out = self.func(*args, **kwargs)
            except ValueError as error:
                clearer = zero_d_index_error(error, "jit")
                if clearer is None:
                    raise
                raise clearer from error
            outputs = _Outputs(out, level)
            # the arguments the function wrote into (eagerly, the caller's arrays are written)
            written = [(k, tracer._slot, tracer._value) for k, tracer in enumerate(traced)
                       if tracer._slot != level.program.inputs[k] and (aliases is None or aliases[k] == k)]
        if lf_random.numpy_drew_since(drew_from_numpy):
            raise RandomnessError(
                f"lf.jit: {getattr(self.func, '__name__', 'the function')} draws from NumPy's global random state "
                "(np.random.*) while traced: lf.jit records a program once, so those draws would be the same at "
                "every call. Draw with lf.random.normal / lf.random.uniform (drawn afresh at every call, "
                "reproducible with lf.random.seed), or draw outside and pass the draws in as an argument.")
        lf_random.settle_draws(draws)
        program = level.program
        program.outputs = outputs.slots + [slot for _, slot, _ in written]
        program.keep_buffers = self.keep_buffers
        program.prune()
        self.traces += 1
        compiled = _Compiled(call, program, outputs, [k for k, _, _ in written])
        compiled.check_overlaps(call)
        for k, _, value in written:
            _write_through(call.arrays[k], value)
        return compiled, outputs.build(outputs.values)

    def __repr__(self):
        return f"<lf.jit of {getattr(self.func, '__name__', self.func)!r}: {len(self.cache)} program(s)>"


class _Compiled:
    def __init__(self, call, program, outputs, written=()):
        self.program = program
        self.outputs = outputs
        self.check = call.check
        self.written = tuple(written)  # the positions of the arguments the function writes into

    def run(self, call):
        """The program's outputs for ``call``, whose arguments it writes into as the function does."""
        if not self.written:
            return self.program.run(call.arrays)
        self.check_overlaps(call)
        results = self.program.run(call.arrays)
        count = len(results) - len(self.written)
        for k, value in zip(self.written, results[count:]):
            _write_through(call.arrays[k], value)
        return results[:count]

    def check_overlaps(self, call):
        """InplaceError where the function writes into an argument that shares memory with another
        argument without being the same array (a view of it): lf.jit traces them as two arrays."""
        aliases = call.key[-1]
        for k in self.written:
            for m, other in enumerate(call.arrays):
                same = aliases is not None and aliases[m] == aliases[k]
                if m != k and not same and _may_share_memory(call.arrays[k], other):
                    raise InplaceError(
                        f"lf.jit: {getattr(call.jitted.func, '__name__', 'the function')} writes into "
                        f"{call.describe(k)} in place, and {call.describe(m)} shares its memory (a view of it, "
                        "or it of a view): lf.jit records them as two arrays, so the write would not show "
                        "through the other. Pass a copy (.copy()) of one of them, or the same array twice.")

    def matches(self, call):
        """Whether ``call``'s labels are those of the traced call (the key holds their
        structure, shapes and dtypes; coordinate values, attrs and encodings are compared
        here, as they go into the outputs)."""
        if len(call.check) != len(self.check):
            return False
        for mine, theirs in zip(self.check, call.check):
            if mine[0] == "coords":
                if any(a is not b and not _same_coordinate(a, b) for a, b in zip(mine[1], theirs[1])):
                    return False
            elif any(a is not b and not same_value(a, b) for a, b in zip(mine[1], theirs[1])):
                return False
        return True


def _write_through(array, value):
    """``array[...] = value``: the caller's argument written as the function writes it."""
    array[...] = value


def _may_share_memory(a, b):
    if type(a) is np.ndarray and type(b) is np.ndarray:
        return bool(np.may_share_memory(a, b))
    return a is b  # other libraries' arrays: the same object only (no portable test)


def _labels(*variables):
    """The attrs and encoding of each of ``variables``, compared on a cache hit."""
    return tuple(part for variable in variables for part in (variable.attrs, variable.encoding))


def _same_coordinate(a, b):
    """Whether two coordinate variables hold the same labels: values (NaN as NaN, the sign
    of a zero), attrs and encoding (their dims, shapes and dtypes are in the key)."""
    if not (a.equals(b) and same_value(a.attrs, b.attrs) and same_value(a.encoding, b.encoding)):
        return False
    if a.dtype.kind in "fc":  # equals() holds 0.0 == -0.0
        return bool(np.array_equal(np.signbit(a.values.real), np.signbit(b.values.real)))
    return True


def same_value(a, b):
    """Whether ``a`` and ``b`` are the same value of the same type, to the bit: what a
    program may return as it was when traced (attrs, encodings). Containers are compared
    item by item, floats by their bits (``0.0`` is not ``-0.0``, NaN is NaN)."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if kind in (list, tuple):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if kind in (float, complex) or isinstance(a, np.generic):
        return _scalar_key(a) == _scalar_key(b)
    if isinstance(a, np.ndarray):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype.kind in "fc":
            return bool(np.array_equal(a, b, equal_nan=True)
                        and np.array_equal(np.signbit(a.real), np.signbit(b.real))
                        and np.array_equal(np.signbit(a.imag), np.signbit(b.imag)))
        return bool(np.array_equal(a, b))
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # no single truth value: only the object itself matches
        return False


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
            statics = tuple((name, _static_key(name, arguments[name])) for name in jitted.static_argnames)
            tree = {name: value for name, value in arguments.items() if name not in jitted.static_argnames}
        else:
            tree = (tuple(args), dict(kwargs))
        paths, self.leaves, self.treedef = optree.tree_flatten_with_path(tree, none_is_leaf=True)
        self.paths = paths
        self.arrays, self.check, self.counts, key = [], [], [], []
        for path, leaf in zip(paths, self.leaves):
            kind, arrays = self._leaf(leaf, path)
            self.counts.append(len(arrays))
            self.arrays.extend(arrays)
            key.append(kind)
        # the memory layout of NumPy arrays too: the replay writes results in the layout
        # NumPy gave them when recorded (sums over them then add in the same order)
        layouts = tuple(a.strides if type(a) is np.ndarray else None for a in self.arrays)
        self.key = (self.treedef, tuple(key), statics, layouts, _xarray_options(), _aliasing(self.arrays))

    def describe(self, k):
        """The argument that holds array ``k`` of the call (``argument 'x'``, ``argument
        'ds'['a']``...)."""
        total = 0
        for path, count in zip(self.paths, self.counts):
            if k < total + count:
                return self._where(path)
            total += count
        return f"array {k}"  # pragma: no cover

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
            self.check.append(("labels", _labels(leaf.variable)))
            data = leaf.variable.data
            return ("DataArray", leaf.dims, leaf.shape, _dtype_key(data.dtype), type(data), _scalar_key(leaf.name),
                    _coord_key(leaf)), [data]
        if isinstance(leaf, xr.Dataset):
            names, variables = list(leaf.data_vars), leaf._variables
            self.check.append(("coords", _coordinates(leaf)))
            self.check.append(("labels", (leaf.attrs, leaf.encoding) + _labels(*(variables[name] for name in names))))
            arrays = [variables[name].data for name in names]
            layout = tuple((_scalar_key(name), variables[name].dims, data.shape, _dtype_key(data.dtype), type(data))
                           for name, data in zip(names, arrays))
            return ("Dataset", layout, _coord_key(leaf)), arrays
        if isinstance(leaf, xr.Variable):
            self.check.append(("labels", _labels(leaf)))
            data = leaf.data
            return ("Variable", leaf.dims, data.shape, _dtype_key(data.dtype), type(data)), [data]
        if isinstance(leaf, xr.DataTree):
            layout, arrays = [], []
            for node_path, ds in tree_nodes(leaf):
                kind, node_arrays = self._leaf(ds, path)
                layout.append((node_path, kind))
                arrays.extend(node_arrays)
            return ("DataTree", leaf.name, tuple(layout)), arrays
        if isinstance(leaf, (bool, numbers.Number, str, type(None), np.generic)):
            return ("constant", _scalar_key(leaf)), []
        if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
            return ("array", type(leaf), tuple(leaf.shape), _dtype_key(leaf.dtype)), [leaf]
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
    """The structure of a labeled leaf's coordinates: names, dims, shapes, dtypes and the
    type of each one's index (a PandasIndex, a CFTimeIndex or a custom index select
    differently)."""
    indexes = leaf._indexes
    return tuple((name, c._dims, c.shape, _dtype_key(c.dtype), type(indexes.get(name)))
                 for name, c in coord_variables(leaf).items())


def _dtype_key(dtype):
    """A dtype as a key (NumPy's own dtypes hash and compare faster than their names)."""
    return dtype if isinstance(dtype, np.dtype) else str(dtype)


# xarray's options that change what an operation returns (keep_attrs, arithmetic_join, the
# libraries it reduces with...); the display and file options change nothing a function returns
_RESULT_OPTIONS = tuple(name for name in XARRAY_OPTIONS if not name.startswith(
    ("display_", "cmap_", "file_", "warn_", "netcdf_", "facetgrid_")))


def _xarray_options():
    """The values of xarray's options that change results (``xr.set_options(keep_attrs=True)``
    around a call changes its outputs' attrs)."""
    return tuple([XARRAY_OPTIONS[name] for name in _RESULT_OPTIONS])


def _aliasing(arrays):
    """Which arguments are the same array (for each, the position of the first that is it),
    or None when all are distinct: a function that writes into one writes into the others."""
    if len(arrays) < 2:
        return None
    first = {}
    pattern = tuple(first.setdefault(id(array), k) for k, array in enumerate(arrays))
    return None if len(first) == len(arrays) else pattern


def _scalar_key(value):
    """A Python number, string, None or NumPy scalar as a key: its type and exact value (a
    float's bits: ``0.0`` and ``-0.0`` are two keys, every NaN is one; ``1``, ``1.0`` and
    ``True`` are three), so that a program never stands for another's constants."""
    kind = type(value)
    if kind is float:
        return kind, struct.pack("<d", value) if value == value else b"nan"
    if kind is complex:
        return kind, _scalar_key(value.real), _scalar_key(value.imag)
    if isinstance(value, np.generic):
        if value.dtype.kind == "f":
            return kind, _scalar_key(float(value))
        if value.dtype.kind == "c":
            return kind, _scalar_key(complex(value))
        return kind, value.item()
    return kind, value


def _static_key(name, value):
    """A static argument as a key: its type and value, item by item in tuples and frozensets
    (``(1, 2)`` and ``(1.0, 2)`` are two keys)."""
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"lf.jit: the static argument {name!r} must be hashable (it is part of the "
                        f"signature), got a {type(value).__name__}") from None
    return _typed(value)


def _typed(value):
    kind = type(value)
    if kind is tuple:
        return kind, tuple(_typed(item) for item in value)
    if kind is frozenset:
        return kind, frozenset(_typed(item) for item in value)
    if kind in (float, complex) or isinstance(value, np.generic):
        return _scalar_key(value)
    return kind, value


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
