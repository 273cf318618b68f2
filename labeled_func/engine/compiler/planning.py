"""Buffers of a replay: which nodes write a fresh array through ``out=`` (and so may take
a buffer passed on from a dead array, see ``Program.prune``), and the slabs that hold the
fresh buffers that never leave a run."""
from __future__ import annotations

import functools
import math

import numpy as np

from . import thresholds


def _reads_only(node):
    """Whether a node's kernel only reads its inputs: its result is a fresh array, never a
    view of an input (a ufunc of one output, a fused expression, this module's kernels, a
    rule's sum of products)."""
    function = node.function
    return (type(function) is np.ufunc and function.nout == 1) or hasattr(function, "writes_into") or getattr(
        node.prim, "reads_only", False)


def _writes_into(node, reads_only=None):
    """The (shape, dtype) of the fresh NumPy array of ``POOL_MIN_BYTES`` or more that a node
    writes through ``out=`` (a ufunc of one output, a fused expression, this module's
    kernels that take a buffer), or None (``reads_only``: :func:`_reads_only` of the node,
    where the caller has it)."""
    if node.out is None or node.params:
        return None
    if reads_only is None:
        reads_only = _reads_only(node)
    if (not reads_only or not getattr(node.function, "writes_into", True)
            or not _c_ordered(node.out, node.strides)):
        return None  # a buffer is C-ordered: only a result recorded C-ordered takes one (the same
    shape, dtype = node.out  # layout: the same order of the sums that later read it)
    return node.out if dtype.itemsize * math.prod(shape) >= thresholds.POOL_MIN_BYTES else None


def c_strides(shape, dtype):
    """The strides of a fresh C-ordered array of ``shape`` and ``dtype``, without making one
    (NumPy gives an array of no element strides of 0)."""
    strides, step = [], np.dtype(dtype).itemsize
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def _c_ordered(layout, strides):
    """Whether ``strides`` are those of a C-ordered array of ``layout`` (shape, dtype)."""
    if layout is None or strides is None:
        return False
    return _c_ordered_layout(layout, strides)


@functools.lru_cache(maxsize=4096)
def _c_ordered_layout(layout, strides):
    """:func:`_c_ordered` of a layout and strides (a program has few of them, and the passes
    ask about every node: 44,000 times for the advection model's program)."""
    shape, dtype = layout
    return all(s == e or n == 1 for s, e, n in zip(strides, c_strides(shape, dtype), shape))


def _bound(node, layout):
    """What the replay calls for ``node``: its function, with its parameters bound; where
    it reads NumPy arrays only (``layout``: the slots known to hold them) and its impl
    declares the NumPy call it makes (``numpy_bound``), that call."""
    if not node.params:
        return node.function
    function, params = node.function, node.params
    numpy_bound = getattr(function, "numpy_bound", None)
    if numpy_bound is not None and node.out is not None and all(
            type(ref) is int and ref in layout for ref in node.refs):
        direct = numpy_bound(**params)
        if direct is not None:
            return direct
    return lambda *args: function(*args, **params)


def _lay_out_slabs(program):
    """Follow a run's buffers through the plan (the pool is deterministic) and give the
    fresh ones that never leave it (never an output, never held by a slot that a view
    could outlive) a place in one block per (shape, dtype), which the program keeps from
    one run to the next (``lf.jit(..., keep_buffers=True)``; ``Program.prune`` lays no
    slabs out otherwise).

    A slab taken afresh at every run was one large allocation: NumPy asks huge pages for
    it, and after other work in the process (a fresh trace) the kernel compacted memory to
    find them at each run (measured 2026-12-07, the advection-diffusion gradient, a slab of
    405 x 2,000 x 64 doubles: replays of 280-1,350 ms, up to 880 ms of them in the kernel,
    against 240-260 ms with the buffers taken one by one, as a replay alone takes either
    way)."""
    holder, pool, kinds, fresh_at, escaping = {}, {}, [], {}, set()
    for index, (_, _, slot, frees, key, recycles, into) in enumerate(program._plan):
        if into is not None:
            holder[slot] = holder.pop(into)
        elif key is not None:
            spare = pool.get(key)
            if spare:
                holder[slot] = spare.pop()
            else:
                holder[slot] = fresh_at[index] = len(kinds)
                kinds.append(key)
        for dead in frees:
            if dead in holder:
                escaping.add(holder.pop(dead))
        for dead, dead_key in recycles:
            pool.setdefault(dead_key, []).append(holder.pop(dead))
    escaping.update(holder.values())  # outputs (and anything a run returns or keeps)
    counts = {}
    for buffer, key in enumerate(kinds):
        if buffer not in escaping:
            counts[key] = counts.get(key, 0) + 1
    blocks = [key for key, count in counts.items() if count > 1]
    number, taken = {key: k for k, key in enumerate(blocks)}, {}
    program._slabs = [((counts[key], *key[0]), key[1]) for key in blocks]
    for index, buffer in fresh_at.items():
        key = kinds[buffer]
        if buffer in escaping or key not in number:
            continue
        place = taken[key] = taken.get(key, -1) + 1
        program._plan[index] = program._plan[index][:6] + ((number[key], place),)
