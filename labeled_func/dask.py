"""vmap over dask-chunked dims: lazy, one in-memory vmap per block.

Building the graph computes nothing and never calls the function on a dummy block:

1. The arguments split into *pieces* (the arrays that travel through the graph: every
   variable along the mapped dim, and dask-backed parameters) and a *skeleton* (all
   else: in-memory parameters, static coords, attrs, the function itself).
2. The vmapped function runs once, outside the graph, on a one-example stand-in
   (``_stand_in``): that gives the outputs' structure, dims, sizes and dtypes.  A mapped
   ``lf.while_loop`` runs one iteration there (the stand-in is not the data: waiting for
   it to meet the condition could take forever).
3. One ``dask.array.blockwise`` over the mapped dim: each block rebuilds the arguments
   around its arrays and calls the ordinary in-memory vmap.  The skeleton is one graph
   key that every block depends on (it travels once per worker, not once per task).
4. The outputs are wrapped like the stand-in's outputs, with lazy data.

dask is imported only here, inside functions: labeled_func imports without it.
"""
from __future__ import annotations

import contextlib
import contextvars
import operator
import re
import sys
import threading
import uuid
import warnings

import numpy as np
import optree
import xarray as xr

from .control_flow import structure_only
from .engine import is_traced
from .engine.batching import probing_branches
from .engine.errors import UnsupportedOperationError
from . import random as lf_random
from .named import _position, is_labeled, named_coords, restore_tree_coords, shadowing, tree_nodes

__all__ = ["has_lazy_leaves", "vmap_lazy", "compiled_blocks"]

DATA = "__labeled_func_data__"  # a DataArray's data as a variable of a Dataset
SCATTER_BYTES = 1 << 20         # a skeleton larger than this goes to a distributed cluster once


_COMPILE_BLOCKS = contextvars.ContextVar("labeled_func_compile_blocks", default=None)


@contextlib.contextmanager
def compiled_blocks(compile_block):
    """Inside the block, each lazy vmap runs its blocks through ``compile_block(mapped, block)``
    (``lf.jit`` on Dask data: one program per block shape, replayed in every block)."""
    token = _COMPILE_BLOCKS.set(compile_block)
    try:
        yield
    finally:
        _COMPILE_BLOCKS.reset(token)


def has_lazy_leaves(args, kwargs):
    """True when an argument holds dask-backed data (then vmap builds a lazy graph)."""
    if "dask.array" not in sys.modules:  # no dask array can exist; never import it here
        return False
    return any(_is_lazy(leaf) for leaf in optree.tree_leaves((args, kwargs), none_is_leaf=True))


def vmap_lazy(mapped, args, kwargs):
    """``mapped(*args, **kwargs)`` (a ``vmap._Mapped`` level) as a lazy dask graph."""
    plan = mapped.plan(args, kwargs)
    leaves, specs, labels, dim, size, coords = plan.leaves, plan.specs, plan.labels, plan.dim, plan.size, plan.coords
    position = plan.out_position
    block = mapped.dim_first()  # the wrapper moves the dim afterwards

    found = []  # the pieces travel as graph arrays, never inside the skeleton
    split = _Inputs(args, kwargs, leaves, specs, labels, dim, found)
    pieces, chunks = _align(found, size, mapped.allow_rechunk)
    skeleton = _Skeleton(block, split, _Draws.plan(mapped.randomness))
    compile_block = _COMPILE_BLOCKS.get()
    if compile_block is not None:
        skeleton.run = compile_block(mapped, block)
    if skeleton.draws is not None and skeleton.draws.per_block:
        pieces.append((_positions(size, chunks), True))
    stand_ins = [_stand_in(array, is_mapped) for array, is_mapped in pieces]
    with np.errstate(all="ignore"), structure_only():
        # branches="agree": an `if` on a mapped value answers from the stand-in (every path
        # tried until one returns); each block checks its own examples when computed
        example = probing_branches(lambda: skeleton.call(stand_ins), quiet=mapped.branches == "agree")
    outputs = _Outputs(example, dim, mapped.output_positions(position, example))
    skeleton.outputs = outputs
    return outputs.wrap(_graph(skeleton, pieces, chunks, mapped.func), dim, chunks, coords)


# --- what is lazy ---------------------------------------------------------------------------
def _is_lazy(leaf):
    if isinstance(leaf, xr.DataTree):
        return any(_is_lazy(node.to_dataset(inherit=False)) for node in leaf.subtree)
    if isinstance(leaf, xr.DataArray):  # ``_coords``: the coordinates' Variables, without a view built
        return _is_dask(leaf.variable) or any(_is_dask(v) for v in leaf._coords.values())
    if isinstance(leaf, xr.Dataset):
        return any(_is_dask(v) for v in leaf.variables.values())
    if isinstance(leaf, xr.Variable):
        return _is_dask(leaf)
    from dask.base import is_dask_collection

    return is_dask_collection(leaf) and hasattr(leaf, "shape")


def in_memory(variable):
    """Whether ``variable`` surely holds no Dask array, known without importing Dask: its data
    is NumPy's (asked first: a jitted call asks at every call), or it is an index."""
    return type(variable._data) is np.ndarray or isinstance(variable, xr.IndexVariable)


def _is_dask(variable):
    # ``_data``: ``.chunks`` costs ~60 us (a runtime Protocol check) and ``.data`` may load;
    # an index coordinate always holds its values in memory (xarray loads an index), and asking
    # its pandas adapter costs more than the rest of the check
    if in_memory(variable):
        return False
    from dask.base import is_dask_collection

    return is_dask_collection(variable._data)


def _datasets(leaf):
    """(how to rebuild ``leaf``, its Datasets): every labeled kind as Datasets."""
    if isinstance(leaf, xr.DataArray):
        return ("array", leaf.name), [leaf.to_dataset(name=DATA)]
    if isinstance(leaf, xr.Variable):
        return ("variable", None), [xr.Dataset({DATA: leaf})]
    if isinstance(leaf, xr.DataTree):
        nodes = tree_nodes(leaf)  # paths relative to the leaf: a subtree keeps its shape
        return ("tree", (leaf.name, [path for path, _ in nodes])), [ds for _, ds in nodes]
    return ("dataset", None), [leaf]


def _from_datasets(kind, datasets):
    what, extra = kind
    if what == "array":
        out = datasets[0][DATA]
        out.name = extra
        return out
    if what == "variable":
        return datasets[0][DATA].variable
    if what == "tree":
        name, paths = extra
        return xr.DataTree.from_dict(dict(zip(paths, datasets)), name=name)
    return datasets[0]


class _Piece:
    """An array that travels through the graph; ``axis`` is the mapped one (None: a parameter)."""

    def __init__(self, data, axis, label, dims=None):
        self.data, self.axis, self.label = data, axis, label
        self.dims = dims  # the other dims, in block order (None for a bare array)


class _Frame:
    """A Dataset with its pieces' data taken out: rebuilt in each block around its arrays."""

    def __init__(self, ds, dim, mapped, pieces, label):
        self.attrs = ds.attrs
        self.slots = []  # (name, is_coord, dims, attrs, static Variable or piece number)
        dropped = {n for n, c in ds.coords.items() if mapped and c.dims == (dim,)}  # restored on outputs
        for name, var in ds.variables.items():
            if name in dropped:
                continue
            where = f"{label}[{name!r}]" if name != DATA else label
            if mapped and dim in var.dims:
                axis = var.dims.index(dim)
                slot = len(pieces)
                dims = (dim,) + var.dims[:axis] + var.dims[axis + 1:]  # blocks arrive dim-first
                pieces.append(_Piece(var.data, axis, where, dims[1:]))
            elif _is_dask(var) and name in ds.coords:
                # labels shared by every example (chunked with the data by DataArray.chunk()): loaded
                # now, as xarray loads an index, since the outputs' labels (an index made from them,
                # the groups) come from the one-example run, which must see their values
                slot, dims = var.compute(), var.dims
            elif _is_dask(var):
                slot, dims = len(pieces), var.dims
                pieces.append(_Piece(var.data, None, where, var.dims))
            else:
                slot, dims = var, var.dims
            self.slots.append((name, name in ds.coords, dims, var.attrs, slot))

    def rebuild(self, arrays):
        data_vars, coords = {}, {}
        for name, is_coord, dims, attrs, slot in self.slots:
            var = slot if isinstance(slot, xr.Variable) else xr.Variable(dims, arrays[slot], attrs)
            (coords if is_coord else data_vars)[name] = var
        return xr.Dataset(data_vars, coords=coords, attrs=self.attrs)


class _Inputs:
    """How to rebuild the call's arguments around the arrays of one block; the pieces
    found on the way are appended to ``pieces``."""

    def __init__(self, args, kwargs, leaves, specs, labels, dim, pieces):
        self.n_positional = len(args)
        self.keywords = list(kwargs)
        self.treedefs = [optree.tree_structure(v, none_is_leaf=True) for v in [*args, *kwargs.values()]]
        self.recipes = []  # per leaf: ("static", value) | ("array", piece, axis) | ("labeled", kind, frames)
        for leaf, spec, label in zip(leaves, specs, labels):
            if is_labeled(leaf) and (spec is not None or _is_lazy(leaf)):
                kind, datasets = _datasets(leaf)
                frames = [_Frame(ds, spec, spec is not None, pieces, label) for ds in datasets]
                self.recipes.append(("labeled", kind, frames))
            elif not is_labeled(leaf) and (spec is not None or _is_lazy(leaf)):
                self.recipes.append(("array", len(pieces), spec))
                pieces.append(_Piece(leaf, spec, label))
            else:
                self.recipes.append(("static", leaf))

    def rebuild(self, arrays):
        leaves = []
        for recipe in self.recipes:
            if recipe[0] == "labeled":
                leaves.append(_from_datasets(recipe[1], [f.rebuild(arrays) for f in recipe[2]]))
            elif recipe[0] == "array":  # back to the axis that in_dims names
                leaves.append(arrays[recipe[1]] if recipe[2] is None else np.moveaxis(arrays[recipe[1]], 0, recipe[2]))
            else:
                leaves.append(recipe[1])
        values, start = [], 0
        for treedef in self.treedefs:
            values.append(optree.tree_unflatten(treedef, leaves[start:start + treedef.num_leaves]))
            start += treedef.num_leaves
        return tuple(values[: self.n_positional]), dict(zip(self.keywords, values[self.n_positional:]))


# --- chunks -----------------------------------------------------------------------------------
def _align(pieces, size, allow_rechunk):
    """[(dask array, mapped)] and the chunks along the mapped dim: mapped axes first and
    chunked like the first dask-backed mapped piece; every other axis in one chunk (a
    ``UserWarning`` says so, or ``ValueError``)."""
    import dask.array as da
    from dask.base import is_dask_collection

    lazy_mapped = [p for p in pieces if p.axis is not None and is_dask_collection(p.data)]
    chunks = lazy_mapped[0].data.chunks[lazy_mapped[0].axis] if lazy_mapped else (size,)
    split = []
    aligned = []
    for piece in pieces:
        data = piece.data
        if piece.axis is not None:
            data = da.moveaxis(data, piece.axis, 0) if is_dask_collection(data) else np.moveaxis(data, piece.axis, 0)
        if not is_dask_collection(data):
            target = ((chunks,) if piece.axis is not None else ()) + tuple((n,) for n in data.shape[piece.axis is not None:])
            aligned.append((da.from_array(data, chunks=target), piece.axis is not None))
            continue
        core = data.chunks[1:] if piece.axis is not None else data.chunks
        several = [(k, len(c)) for k, c in enumerate(core) if len(c) > 1]
        if several:
            split.append((piece, several))
        target = ((chunks,) if piece.axis is not None else ()) + (-1,) * len(core)
        aligned.append((data.rechunk(target) if data.chunks != target else data, piece.axis is not None))
    if split:
        _complain(split, allow_rechunk)
    return aligned, chunks


def _complain(split, allow_rechunk):
    listing = "; ".join(
        f"{piece.label}: " + ", ".join(f"{_core_dim(piece, k)} in {n} chunks" for k, n in several)
        for piece, several in split
    )
    if allow_rechunk:
        warnings.warn(
            f"vmap over dask chunks: every block needs its examples whole, so these dims are "
            f"rechunked into one chunk ({listing}); to avoid this, chunk only the mapped dim "
            "(.chunk({dim: -1}) for each of those dims)", UserWarning, stacklevel=6)
        return
    raise ValueError(
        f"vmap over dask chunks with allow_rechunk=False: every block needs its examples whole, "
        f"but {listing}. Rechunk them into one chunk first (e.g. .chunk({{dim: -1}})) or pass "
        "allow_rechunk=True")


def _core_dim(piece, k):
    return f"dim {piece.dims[k]!r}" if piece.dims else f"axis {k}"


def _stand_in(array, is_mapped):
    """One example with the dtype and the other sizes of ``array`` (mapped axis first).

    Floating values are drawn, with a fixed seed, from [1, 2): positive like ones (log,
    sqrt and division are safe), but no two equal, so matrices built from them (kernel
    or covariance matrices) are not singular as a matrix of ones would be.  Integers and
    booleans are ones.
    """
    shape = (1,) + array.shape[1:] if is_mapped else array.shape
    dtype = np.dtype(array.dtype)
    if dtype.kind in "fc":
        return np.random.default_rng(0).uniform(1.0, 2.0, shape).astype(dtype)
    return np.ones(shape, dtype=dtype)


# --- the graph --------------------------------------------------------------------------------
class _Skeleton:
    """Everything a block needs besides its arrays: one graph key, shared by every block."""

    def __init__(self, block, inputs, draws):
        self.block = block
        self.run = block  # what the blocks call: the block itself, or its lf.jit
        self.inputs = inputs
        self.draws = draws
        self.outputs = None

    def call(self, arrays, block=None):
        block = self.block if block is None else block
        if self.draws is None:
            args, kwargs = self.inputs.rebuild(arrays)
            return block(*args, **kwargs)
        if self.draws.per_block:
            arrays, positions = arrays[:-1], arrays[-1]
        with self.draws.seeded(positions[0] if self.draws.per_block else None):
            args, kwargs = self.inputs.rebuild(arrays)
            return block(*args, **kwargs)

    def __call__(self, *arrays):
        return tuple(self.outputs.arrays(self.call(arrays, self.run)))


class _Draws:
    """``lf.random`` under a lazy vmap.  ``"same"``: every block draws from the state the
    generator had when the graph was built (the draws of the in-memory vmap).
    ``"different"``: block b draws from a seed of (a number drawn at build time, the
    position of b's first example): independent blocks, the same on every scheduler,
    reproducible after ``lf.random.seed``."""

    _lock = threading.Lock()  # one generator per process: seeded blocks take turns

    def __init__(self, state, root):
        self.state, self.root = state, root
        self.per_block = root is not None

    @classmethod
    def plan(cls, randomness):
        if randomness == "error":
            return None
        state = lf_random.get_state()
        generator = np.random.Generator(getattr(np.random, state["bit_generator"])())
        generator.bit_generator.state = state
        root = int(generator.integers(2 ** 63))
        lf_random.set_state(generator.bit_generator.state)  # the next vmap draws anew
        return cls(state, root if randomness == "different" else None)

    @contextlib.contextmanager
    def seeded(self, first):
        state = self.state
        if first is not None:
            seed = np.random.SeedSequence([self.root, int(first)])
            state = getattr(np.random, state["bit_generator"])(seed).state
        with self._lock:
            saved = lf_random.get_state()
            lf_random.set_state(state)
            try:
                yield
            finally:
                lf_random.set_state(saved)


def _positions(size, chunks):
    import dask.array as da

    return da.arange(size, chunks=(chunks,))


def _run_block(*arrays, skeleton):
    return skeleton(*arrays)


def _graph(skeleton, pieces, chunks, func):
    """One task per block, returning the tuple of all output arrays of that block."""
    import dask.array as da

    name = re.sub(r"\W", "_", getattr(func, "__name__", "function"))
    token = uuid.uuid4().hex
    arguments = []
    for k, (array, is_mapped) in enumerate(pieces):
        arguments += [array, ("batch",) * is_mapped + tuple(f"core{k}_{j}" for j in range(array.ndim - is_mapped))]
    carrier = _ship(skeleton, f"vmap-skeleton-{token}")
    return da.blockwise(_run_block, ("batch",), *arguments, concatenate=True,
                        meta=np.empty((0,), dtype=object), name=f"vmap_{name}-{token}",
                        skeleton=carrier, align_arrays=False)


def _ship(skeleton, key):
    """The skeleton as a graph dependency; scattered once when a distributed client is
    active and it is large (Dask warns about graphs over 10 MB)."""
    import dask

    client = _distributed_client()
    if client is not None:
        import cloudpickle

        if len(cloudpickle.dumps(skeleton)) > SCATTER_BYTES:
            return dask.delayed(client.scatter(skeleton, hash=False))
    return dask.delayed(skeleton, name=key, traverse=False)


def _distributed_client():
    if "distributed" not in sys.modules:
        return None
    from distributed import default_client

    try:
        return default_client()
    except ValueError:
        return None


# --- outputs ----------------------------------------------------------------------------------
def _refuse_traced(array):
    """A lazy vmap's outputs cannot depend on a value an enclosing transform traces: the
    blocks run at ``.compute()``, after that transform has finished."""
    if is_traced(array):
        raise UnsupportedOperationError(
            "lf.vmap over Dask-chunked data inside grad/jvp/jacrev/jacfwd/hessian: its blocks run "
            "at .compute(), after the transform has finished, so the result cannot depend on a "
            "value the transform traces (an argument it differentiates, here used inside the "
            "vmapped function). Put the transform inside the vmap instead, e.g. "
            "lf.vmap(lf.grad(per_example_loss), dim=...)(params, data), or differentiate a "
            "function that takes the Dask data directly without lf.vmap (see docs/dask.md)."
        )


class _Outputs:
    """Which arrays of a block's output travel back, and how to wrap them lazily.

    ``positions``: per output leaf, where the mapped dim goes, or None for an output that
    ``out_dims`` leaves unmapped.  Such an output is the first block's: every block's
    in-memory vmap (and the one-example run, when the graph is built) checks that it does
    not depend on the mapped inputs, so that all blocks compute the same value.
    """

    def __init__(self, example, dim, positions):
        self.dim = dim
        self.positions = positions
        paths, leaves, self.treedef = optree.tree_flatten_with_path(example, none_is_leaf=True)
        self.labels = ["output" + "".join(f"[{k!r}]" for k in path) for path in paths]
        self.example = leaves
        arrays = list(self._walk(leaves))
        for array, _ in arrays:
            _refuse_traced(array)
        self.metas = [(np.asarray(a).dtype, np.shape(a), batched) for a, batched in arrays]

    def _walk(self, leaves):
        """(array, batched) for every output array, in one fixed order."""
        for leaf, at in zip(leaves, self.positions):
            if leaf is None:
                continue
            if is_labeled(leaf):
                for ds in _datasets(leaf)[1]:
                    for name, var in ds.variables.items():
                        if at is not None and self.dim in var.dims:
                            yield var.data, True
                        elif name not in ds.xindexes:  # unbatched (e.g. a coord): from block 0
                            yield var.data, False
            else:
                yield leaf, at is not None

    def arrays(self, out):
        found = list(self._walk(optree.tree_leaves(out, none_is_leaf=True)))
        if len(found) != len(self.metas):
            raise ValueError(f"vmap over dask chunks: a block returned {len(found)} arrays where the "
                             f"one-example run returned {len(self.metas)}; the output structure must "
                             "not depend on the data")
        for (array, _), (_, shape, batched) in zip(found, self.metas):
            got = tuple(np.shape(array))
            if (got[1:] if batched else got) != (shape[1:] if batched else shape):
                raise ValueError(f"vmap over dask chunks: a block returned an array of shape {got} where the "
                                 f"one-example run returned {shape} (the mapped dim first); the output "
                                 "sizes must not depend on the data (an `if` on a mapped value under "
                                 "branches='agree' must return the same sizes on every path)")
        return [a for a, _ in found]

    def wrap(self, tasks, dim, chunks, coords):
        from dask.array.core import Array
        from dask.highlevelgraph import HighLevelGraph

        lazy = []
        for j, (dtype, shape, batched) in enumerate(self.metas):
            name = f"{tasks.name.split('-')[0]}_{j}-{tasks.name.split('-', 1)[1]}"
            core = shape[1:] if batched else shape
            zeros = (0,) * len(core)
            if batched:
                layer = {(name, b) + zeros: (operator.getitem, (tasks.name, b), j) for b in range(len(chunks))}
                array_chunks = (chunks,) + tuple((n,) for n in core)
            else:
                layer = {(name,) + zeros: (operator.getitem, (tasks.name, 0), j)}
                array_chunks = tuple((n,) for n in core)
            graph = HighLevelGraph.from_collections(name, layer, dependencies=[tasks])
            lazy.append(Array(graph, name, chunks=array_chunks, dtype=dtype,
                              meta=np.empty((0,) * len(array_chunks), dtype=dtype)))
        lazy = iter(lazy)
        leaves = [self._wrap_leaf(leaf, label, lazy, dim, at, coords)
                  for leaf, label, at in zip(self.example, self.labels, self.positions)]
        return optree.tree_unflatten(self.treedef, leaves)

    def _wrap_leaf(self, leaf, label, lazy, dim, at, coords):
        """The lazy output leaf like ``leaf``; ``at``: where the mapped dim goes (None: unmapped)."""
        import dask.array as da

        def place(array):
            axis = _position(at, array.ndim - 1, label)
            return da.moveaxis(array, 0, axis) if axis else array

        if leaf is None:
            return None
        if not is_labeled(leaf):
            return next(lazy) if at is None else place(next(lazy))
        kind, datasets = _datasets(leaf)
        rebuilt = []
        for ds in datasets:
            variables = {}
            for name, var in ds.variables.items():
                if at is not None and dim in var.dims:
                    axis = _position(at, var.ndim - 1, dim)
                    dims = var.dims[1:axis + 1] + (dim,) + var.dims[axis + 1:]
                    variables[name] = xr.Variable(dims, place(next(lazy)), var.attrs)
                elif name not in ds.xindexes:
                    variables[name] = xr.Variable(var.dims, next(lazy), var.attrs)
                else:
                    variables[name] = var
            coord_names = set(ds.coords)
            out = xr.Dataset({n: v for n, v in variables.items() if n not in coord_names},
                             coords={n: v for n, v in variables.items() if n in coord_names}, attrs=ds.attrs)
            if at is not None and dim in out.dims and kind[0] != "tree":
                # as in memory: the mapped dim's labels replace scalars of the same names
                out = out.drop_vars(shadowing(out, named_coords(coords), dim, ()))
                out = out.assign_coords({n: v for n, v in named_coords(coords).items() if n not in out.coords})
            rebuilt.append(out)
        if kind[0] == "tree" and at is not None:  # as in memory: where the argument had them, else at the top
            rebuilt = list(restore_tree_coords(dict(zip(kind[1][1], rebuilt)), dim, coords).values())
        return _from_datasets(kind, rebuilt)
