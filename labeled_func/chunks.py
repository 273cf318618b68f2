"""``lf.vmap(func, dim, chunk_size=k, jit=True)``: the chunks as one ``lf.jit`` program.

A one-shot call of a vmapped function on a large batch gains nothing from ``lf.jit`` (its
first call traces and computes on the whole batch).  Cut into chunks of ``k`` examples,
the batch is a loop that lf.jit can serve: the vmapped function (this level, un-chunked)
is traced on the first chunk and replayed on every other whole chunk.  The last, shorter
chunk is a replay of the last ``k`` examples, overlapping the chunk before, whose outputs
for the examples already done are dropped (the examples of a vmap are independent), and
whose writes into the arguments there are undone; under ``randomness="different"`` (the
draws depend on how many examples draw) it runs un-jitted.  Measured (bench_first_call.py,
a last chunk of a third of k): run un-jitted it costs 0.7-1.1 times a replay of a whole
chunk on the Ishigami gradients (kernel-bound), 7-8 times on the advection-diffusion
model (Python-bound); traced again, 0.8-2 and 11-23 times.

Every whole chunk must have one lf.jit signature, and lf.jit compares coordinate values:
the arguments cross into the program without their 1-D coordinates along the mapped dim,
which travel as data in one more argument (a Dataset, as in a lazy vmap's blocks: see
``Carried``), and the outputs get the caller's coordinates back once the chunks are
joined.  Unmapped arguments are the caller's objects, constants of the program (it lives
for this call only).
"""
from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
import optree
import pandas as pd
import xarray as xr

from . import random as lf_random
from .assemble import coord_variables
from .example_coords import same_variable
from .jit import jit as lf_jit
from .named import concat_leaves, named_coords, restore_tree_coords, shadowing, slice_leaf, tree_nodes

__all__ = ["run_jitted", "carry", "Carried", "leaf_positions"]


def run_jitted(mapped, plan, examples):
    """``(result,)`` of the chunked call ``plan`` of the vmap level ``mapped`` (whose ``jit`` is
    True or None), its whole chunks one lf.jit program; None where ``jit=None`` leaves the
    chunks to the un-jitted loop (fewer than two whole chunks, arguments that cannot be carried)."""
    strict = mapped.jit is True
    size, k, dim = plan.size, mapped.chunk_size, plan.dim
    if size // k < 2 and not strict:  # one whole chunk: a trace and no replay
        return None
    refused = _not_carried(plan)
    if refused is not None:
        if strict:
            raise ValueError(f"vmap(chunk_size={k}, jit=True) over dim {dim!r}: {refused}, whose values differ "
                             "from chunk to chunk: lf.jit would trace every chunk again. Drop or reset that "
                             "coordinate first, or pass jit=None (such chunks then run un-jitted)")
        return None
    carried, variables = carry(plan, examples)
    block = mapped.carrying(carried)
    if block.axis_size is not None:  # the size of one chunk (checked against the whole batch before)
        block.axis_size = k
    mapped_at = [i for i, spec in enumerate(plan.specs) if spec is not None]
    stripped = [tuple(name for name in examples[i]) for i in mapped_at]

    def chunk(leaves, coords):
        full = list(plan.leaves)  # the unmapped ones: the caller's objects (constants of the program)
        for i, leaf in zip(mapped_at, leaves):
            full[i] = leaf
        args, kwargs = plan.arguments.rebuild(full, plan.specs)
        return block(*args, coords, **kwargs)

    chunk.__name__ = chunk.__qualname__ = f"chunk of {getattr(mapped.func, '__name__', 'the function')}"
    program = lf_jit(chunk)
    same = mapped.randomness == "same"
    state = lf_random.get_state() if same else None
    numpy_state = np.random.get_state() if same else None
    saved = lf_random.get_state(), np.random.get_state()  # for the un-jitted loop, where the first trace fails
    overlap = mapped.randomness != "different"  # a draw per example: the last chunk's own count
    parts = []
    for start in range(0, size, k):
        stop = min(start + k, size)
        first = stop - k if stop - start < k and overlap else start  # the last chunk: the last k examples
        if same:  # every chunk draws what the first one drew
            lf_random.set_state(state)
            np.random.set_state(numpy_state)
        sliced = {}
        leaves = tuple(_stripped(sliced, plan.leaves[i], plan.specs[i], first, stop, names)
                       for i, names in zip(mapped_at, stripped))
        coords = xr.Dataset({key: variable[first:stop] for key, variable in variables.items()})
        if stop - first < k:
            parts.append(chunk(leaves, coords))  # the shorter last chunk: un-jitted
            continue
        if first < start:  # examples done before: their outputs dropped, writes into them undone
            kept = _kept(plan, mapped_at, first, start)
            out = program(leaves, coords)
            for region, before in kept:
                region[...] = before
            parts.append(_tail(mapped, plan, out, start - first))
            continue
        try:
            parts.append(program(leaves, coords))
        except Exception as error:
            if strict or start > 0:
                raise
            lf_random.set_state(saved[0])  # the failed trace may have drawn
            np.random.set_state(saved[1])
            result = mapped.chunked_eagerly(plan, examples)  # raises where the function itself does
            warnings.warn(
                f"vmap(chunk_size={k}, jit=None): lf.jit could not trace the function on a chunk "
                f"({type(error).__name__}: {error}); the chunks ran un-jitted. Pass jit=False to skip the "
                "attempt, or jit=True to raise", UserWarning, stacklevel=4)
            return (result,)
    return (_joined(mapped, plan, parts),)


def _stripped(sliced, leaf, spec, start, stop, names):
    """``leaf``'s examples ``start:stop`` without the 1-D coordinates ``names`` along the mapped
    dim (one slice per argument object: the same array passed twice stays one array)."""
    found = sliced.get(id(leaf))
    if found is None:
        found = slice_leaf(leaf, spec, start, stop)
        if names:
            found = found.drop_vars(list(names))
        sliced[id(leaf)] = found
    return found


def _kept(plan, mapped_at, first, start):
    """[(region, its copy)]: examples ``first:start`` of each mapped array that can be written
    (a replay of the last chunk may write into them again)."""
    kept, seen = [], set()
    for i in mapped_at:
        for array, axis in _mapped_arrays(plan.leaves[i], plan.specs[i], plan.dim):
            flags = getattr(array, "flags", None)
            if id(array) in seen or (flags is not None and not flags.writeable):
                continue
            seen.add(id(array))
            region = array[(slice(None),) * axis + (slice(first, start),)]
            kept.append((region, region.copy()))
    return kept


def _mapped_arrays(leaf, spec, dim):
    """(array, axis of the mapped dim) of every array of a mapped argument ``leaf``."""
    if not isinstance(spec, str):
        yield leaf, spec
    elif isinstance(leaf, xr.DataTree):
        for _, ds in tree_nodes(leaf):
            yield from _mapped_arrays(ds, spec, dim)
    elif isinstance(leaf, xr.Dataset):
        for var in leaf.data_vars.values():
            if dim in var.dims:
                yield var.variable.data, var.dims.index(dim)
    elif dim in leaf.dims:  # a DataArray, a Variable
        yield leaf.data, leaf.dims.index(dim)


def _tail(mapped, plan, out, skip):
    """The outputs ``out`` of a chunk without its first ``skip`` examples."""
    from .named import _position

    paths, leaves, treedef = optree.tree_flatten_with_path(out, none_is_leaf=True)
    positions = leaf_positions(plan.out_position, out, mapped.given_out_dims)
    cut = []
    for path, leaf, at in zip(paths, leaves, positions):
        if at is None or leaf is None:
            cut.append(leaf)
        elif isinstance(leaf, (xr.DataArray, xr.Dataset, xr.DataTree, xr.Variable)):
            cut.append(slice_leaf(leaf, plan.dim, skip, None))
        else:
            axis = _position(at, leaf.ndim - 1, "output" + "".join(f"[{k!r}]" for k in path))
            cut.append(slice_leaf(leaf, axis, skip, leaf.shape[axis]))
    return optree.tree_unflatten(treedef, cut)


def _not_carried(plan):
    """What of the mapped arguments would make each chunk's lf.jit signature differ (lf.jit
    compares coordinate values), described; None where nothing does."""
    dim = plan.dim
    for leaf, spec, label in zip(plan.leaves, plan.specs, plan.labels):
        if not isinstance(spec, str):
            continue
        if isinstance(leaf, xr.DataTree):
            for path, ds in tree_nodes(leaf):
                along = [name for name, c in ds.coords.items() if dim in c.dims]
                if along:
                    return f"argument {label} is a DataTree whose node {path} has the coordinate {along[0]!r} along it"
        elif isinstance(leaf, (xr.DataArray, xr.Dataset)):
            for name, coord in coord_variables(leaf).items():
                if dim in coord.dims and coord.dims != (dim,):
                    return f"argument {label} has the coordinate {name!r} with dims {coord.dims}"
            index = leaf.indexes.get(dim)
            if isinstance(index, pd.MultiIndex):
                return f"argument {label} has a multi-index {dim!r}"
    return None


def _joined(mapped, plan, parts):
    """The chunks' outputs joined along the mapped dim, with the caller's coordinates along it."""

    dim, coords = plan.dim, plan.coords
    named = named_coords(coords)
    flat = [optree.tree_flatten(p, none_is_leaf=True) for p in parts]
    positions = leaf_positions(plan.out_position, parts[0], mapped.given_out_dims)
    leaves = []
    for at, group in zip(positions, zip(*(f[0] for f in flat))):
        if at is None:  # out_dims None: the same in every chunk (vmap checks), the first one's
            leaves.append(group[0])
            continue
        value = concat_leaves(list(group), dim, at)
        if isinstance(value, xr.DataTree):
            value = xr.DataTree.from_dict(restore_tree_coords(dict(tree_nodes(value)), dim, coords), name=value.name)
        elif isinstance(value, (xr.DataArray, xr.Dataset)) and dim in value.dims and named:
            stale = shadowing(value, named, dim, ())
            value = value.drop_vars(stale) if stale else value
            value = value.assign_coords({n: v for n, v in named.items() if n not in value.coords})
        leaves.append(value)
    return optree.tree_unflatten(flat[0][1], leaves)


# --- what the chunks (and a lazy vmap's blocks) carry, and where outputs put the mapped dim ----
def carry(plan, examples):
    """How the coordinates along the mapped dim travel as data (a lazy vmap's blocks, the
    jitted chunks of chunks.py): the :class:`Carried` recipe and the variables of the
    Dataset that carries them (a coordinate that several arguments share travels once)."""
    variables, names = {}, []
    for k, found in enumerate(examples):
        names.append({})
        for name, e in found.items():
            key = next((key for key, v in variables.items() if key.endswith(f"/{name}") and same_variable(v, e.variable)),
                       f"{k}/{name}")
            variables[key] = variables.get(key, e.variable)
            names[-1][name] = (key, e.restorable)
    return Carried(plan.dim, tuple(tuple(found.items()) for found in names)), variables


class Carried(NamedTuple):
    """A lazy vmap's blocks take their coordinates along ``dim`` off the last positional
    argument, a Dataset: per leaf, ((coordinate name, (its name in that Dataset, restorable)),
    ...) (see ExampleCoord)."""

    dim: str
    names: tuple


def leaf_positions(position, out, out_dims):
    """Per leaf of the output ``out`` (flattened as optree does, None a leaf), where the
    mapped dim goes: an int, a Preserve, or None (returned unmapped).  ``position`` is
    ``out_dims`` with "preserve" resolved; it is a prefix of the output's structure."""
    if not isinstance(position, (tuple, list, dict)):
        return [position] * len(optree.tree_leaves(out, none_is_leaf=True))
    if not isinstance(out, (tuple, list, dict)) and len(position) == 1 and not isinstance(position, dict):
        position = position[0]  # one output, one entry: torch.func accepts out_dims=(0,)
        return [position] * len(optree.tree_leaves(out, none_is_leaf=True))
    try:
        return optree.broadcast_prefix(position, out, none_is_leaf=True)
    except ValueError:
        got = (f"a {type(out).__name__} of {len(out)}" if isinstance(out, (tuple, list, dict))
               else f"one {type(out).__name__}")
        raise ValueError(f"vmap: out_dims={out_dims!r} does not fit the function's output ({got}): give one "
                         "entry per output, in the same kind of container (tuple, list or dict)") from None
