"""Indexing: ``x[key]``, its functional update ``x[key] = v`` and ``x[key] += v``.

A key is a tuple of ints, slices, None, Ellipsis and integer arrays.  The arrays
travel as arguments (they may be traced, e.g. an index computed per example); the
rest of the key travels as a static template with :class:`Slot` placeholders.

Batching follows NumPy's advanced-indexing rule: the broadcast dims of the array
indices go where the first one stood if they are adjacent, else to the front.  A
batched index array joins them with an ``arange`` over the batch, and the result is
transposed back to the layout the per-example index would give.

``index_add`` (``np.add.at``: repeated positions add up) is the transpose of
``getitem``; the three are each other's derivative rules.  Where a key names one target
twice, ``setitem`` keeps one of the writes (on NumPy the last in C order) and so does its
JVP; its VJP gives the overwritten elements of the value no cotangent (found by the same
scatter applied to ids, :func:`_surviving_writes`), while ``index_add`` adds them all.
"""
from __future__ import annotations

import functools
import math
import operator
import sys
from typing import Any

import numpy as np

from .backend import (backend_named, device_of, dtype_kind, lazy_namespace, namespace, namespace_library,
                      numpy_namespace)
from .core import (broadcast_batch, broadcast_to, differentiable_input, linear_rules, reshape, transpose,
                   unbroadcast)
from .creation import zeros_like
from .elementwise import equal, where
from .primitive import Primitive

__all__ = ["Slot", "getitem", "setitem", "index_add", "pad", "getitem_static", "split_key", "normalize_key"]


class Slot:
    """Placeholder in a key template for the ``index``-th index array argument."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index

    def __eq__(self, other):
        return isinstance(other, Slot) and other.index == self.index

    def __hash__(self):
        return hash(("Slot", self.index))

    def __repr__(self):
        return f"Slot({self.index})"


def _fill(template, arrays):
    return tuple(arrays[item.index] if isinstance(item, Slot) else item for item in template)


def split_key(key: tuple[Any, ...]) -> tuple[tuple[Any, ...], list[Any]]:
    """``(template, arrays)`` for a key tuple whose array entries become slots."""
    template, arrays = [], []
    for item in key:
        if item is None or item is Ellipsis or isinstance(item, (int, slice)):
            template.append(item)
        else:
            template.append(Slot(len(arrays)))
            arrays.append(item)
    return tuple(template), arrays


def normalize_key(template: tuple[Any, ...], ndim: int) -> tuple[Any, ...]:
    """The template without Ellipsis, one entry per consumed axis, trailing slices added."""
    consumed = sum(1 for item in template if item is not None and item is not Ellipsis)
    out = []
    seen_ellipsis = False
    for item in template:
        if item is Ellipsis:
            if not seen_ellipsis:
                out.extend([slice(None)] * (ndim - consumed))
                seen_ellipsis = True
            continue
        out.append(item)
    if not seen_ellipsis:
        out.extend([slice(None)] * (ndim - consumed))
    return tuple(out)


def _is_advanced(item):
    return isinstance(item, Slot) or (isinstance(item, int) and not isinstance(item, bool))


def _layout(template, has_arrays):
    """(first advanced position in the result, whether advanced entries are adjacent)."""
    positions = [i for i, item in enumerate(template) if _is_advanced(item)]
    if not has_arrays or not positions:
        return None, True
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    before = sum(1 for item in template[: positions[0]] if not _is_advanced(item))
    return before, adjacent


# --- getitem -------------------------------------------------------------------------
def _getitem_impl(x, *arrays, template):
    arrays = _same_namespace(x, arrays)
    if len(arrays) == 1 and namespace(x) is not numpy_namespace:
        return _take(x, arrays[0], template)
    return x[_fill(template, arrays)]


def _getitem_numpy_bound(*, template):
    """NumPy's indexing by a template of slices, integers, None and Ellipsis (no index
    array: the only operand is the array), bound; None where it holds an index array."""
    if any(isinstance(item, Slot) for item in template):
        return None
    return operator.itemgetter(tuple(template))


_getitem_impl.numpy_bound = _getitem_numpy_bound


def _take(x, index, template):
    """``x[..., index, ...]`` with one index array, through the standard's ``take``
    (array-API libraries need not mix index arrays with slices)."""
    position = next(i for i, item in enumerate(template) if isinstance(item, Slot))
    before, after = template[:position], template[position + 1:]
    if Ellipsis in before or not all(item == slice(None) for item in before):
        return x[_fill(template, [index])]
    xp = namespace(x)
    flat = xp.reshape(index, (-1,))
    taken = xp.take(x, flat, axis=position)
    shape = taken.shape[:position] + tuple(index.shape) + taken.shape[position + 1:]
    out = xp.reshape(taken, shape)
    rest = tuple(after)
    if rest and not all(item == slice(None) or item is Ellipsis for item in rest):
        out = out[(slice(None),) * (position + index.ndim) + rest]
    return out


def _same_namespace(x, arrays):
    """Index arrays made by the rules (NumPy aranges) as arrays of ``x``'s library."""
    xp = namespace(x)
    if xp is numpy_namespace:
        return arrays
    return [a if namespace(a) is xp else xp.asarray(a, device=device_of(x)) for a in arrays]


def _getitem_batch(axis_size, values, batched, *, template):
    x, arrays = values[0], list(values[1:])
    x_batched, arrays_batched = batched[0], batched[1:]
    logical_ndim = x.ndim - 1 if x_batched else x.ndim
    template = normalize_key(template, logical_ndim)
    if not any(arrays_batched):
        # batch axis stays a plain slice in front
        out = getitem.bind(x, *arrays, template=(slice(None),) + template)
        start, adjacent = _layout(template, bool(arrays))
        if arrays and not adjacent:
            index_rank = len(_broadcast_shape([a.shape for a in arrays]))
            out = _move_axis(out, index_rank, 0)
        return out, True
    key, params, block_rank, start, adjacent = _batched_key(axis_size, x, x_batched, arrays, arrays_batched, template)
    out = getitem.bind(*key, **params)
    return _restore_layout(out, block_rank, start, adjacent, x_batched), True


def _getitem_transpose(g, x, *arrays, template):
    """``g`` put back where ``x[key]`` read it, zeros elsewhere: zeros around ``g`` (a pad)
    for a key of ints and unit-step slices, else a scatter-add into zeros (repeated
    positions add up)."""
    layout = None if arrays else _block_layout(template, tuple(x.shape))
    if layout is None:
        return index_add.bind(zeros_like.bind(x), g, *arrays, template=template)
    block_shape, pad_width = layout
    if tuple(g.shape) != block_shape:  # ints drop axes, None adds them: x's axes, each kept
        g = reshape.bind(g, shape=block_shape)
    if not any(before or after for before, after in pad_width):  # the key read all of x
        return g
    return pad.bind(g, pad_width=pad_width, constant_values=((0, 0),) * len(pad_width))


def _block_layout(template, shape):
    """For a key of ints, unit-step slices, None and Ellipsis: the shape of the block it
    reads, one size per axis of ``x``, and the ``(before, after)`` zeros around it; None for
    any other key."""
    block, widths = [], []
    axis = 0
    for item in normalize_key(template, len(shape)):
        if item is None:
            continue
        size = shape[axis]
        if isinstance(item, slice):
            start, stop, step = item.indices(size)
            if step != 1:
                return None
            length = max(stop - start, 0)
        elif isinstance(item, int) and not isinstance(item, bool) and -size <= item < size:
            start, length = item % size, 1
        else:
            return None
        block.append(length)
        widths.append((start, size - start - length))
        axis += 1
    return tuple(block), tuple(widths)


getitem = linear_rules(Primitive("getitem", _getitem_impl, _getitem_batch), _getitem_transpose)


def getitem_static(x: Any, key: tuple[Any, ...]) -> Any:
    """``x[key]`` for a key tuple without arrays (a convenience for composites)."""
    template, arrays = split_key(key if isinstance(key, tuple) else (key,))
    return getitem.bind(x, *arrays, template=template)


def _broadcast_shape(shapes):
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for shape in shapes:
        for i, size in enumerate(shape):
            j = rank - len(shape) + i
            out[j] = size if out[j] == 1 else out[j]
    return tuple(out)


def _batched_key(axis_size, x, x_batched, arrays, arrays_batched, template):
    """Arguments of a getitem with a batched index array, and where the block lands."""
    logical_shapes = [tuple(a.shape[1:]) if b else tuple(a.shape) for a, b in zip(arrays, arrays_batched)]
    ints = [item for item in template if isinstance(item, int) and not isinstance(item, bool)]
    block = _broadcast_shape(logical_shapes + [()] * len(ints))
    aligned = []
    for array, is_batched, shape in zip(arrays, arrays_batched, logical_shapes):
        if is_batched:
            array = reshape.bind(array, shape=(axis_size,) + (1,) * (len(block) - len(shape)) + shape)
        aligned.append(array)
    start, adjacent = _layout(template, True)
    if x_batched:
        xp = namespace(x, *aligned)
        batch_index = xp.reshape(xp.arange(axis_size, device=device_of(x)), (axis_size,) + (1,) * len(block))
        aligned.append(batch_index)
        template = (Slot(len(aligned) - 1),) + template
    return (x, *aligned), {"template": template}, len(block) + 1, start, adjacent


def _restore_layout(out, block_rank, start, adjacent, x_batched):
    """Move the (batch, *index) block of ``out`` to NumPy's per-example layout."""
    if x_batched:
        # with the batch index in front the block is first; per example it sits at `start`
        if adjacent and start:
            order = list(range(out.ndim))
            block = order[1:block_rank]
            rest = order[block_rank:]
            order = [0] + rest[:start] + block + rest[start:]
            out = transpose.bind(out, axes=tuple(order))
        return out
    # x unbatched: the block (batch first) sits at `start` if adjacent, else in front
    position = start if adjacent else 0
    return _move_axis(out, position, 0)


def _move_axis(x, source, destination):
    if source == destination:
        return x
    order = list(range(x.ndim))
    order.insert(destination, order.pop(source))
    return transpose.bind(x, axes=tuple(order))


# --- setitem (functional) ------------------------------------------------------------------
def _setitem_impl(x, value, *arrays, template):
    xp = namespace(x, value)  # a Dask value makes a NumPy x lazy (no compute)
    out = xp.asarray(x, copy=True)
    if arrays and xp is numpy_namespace:
        arrays, value = _in_c_order(arrays, value)
    if isinstance(value, np.generic):  # a 0-d result of NumPy: cast as the 0-d array it stands for
        value = np.asarray(value)      # (NumPy converts a scalar as a Python number: inf -> OverflowError)
    key = _fill(template, _same_namespace(x, arrays))
    if any(item is None for item in key) and xp is not numpy_namespace and hasattr(value, "shape"):
        key, value = _without_newaxes(xp, out, key, xp.broadcast_to(value, out[key].shape))
    out[key] = value
    return out


def _in_c_order(arrays, value):
    """The index arrays and the value of a NumPy write, each laid out so that NumPy visits
    them in C order (copied where not).  NumPy walks an advanced-index write in the order
    its operands' strides agree on: index arrays and a value that are both Fortran-ordered,
    or both reversed, make it walk backwards or by columns, and then a target named twice
    keeps another write than the last in C order.  In C order, the primal, its tangent
    and the ids that :func:`_surviving_writes` scatter all keep the same write."""
    arrays = [a if not isinstance(a, np.ndarray) or _visits_in_c_order(a) else np.ascontiguousarray(a)
              for a in arrays]
    if isinstance(value, np.ndarray) and not _visits_in_c_order(value):
        value = np.ascontiguousarray(value)
    return arrays, value


def _visits_in_c_order(a):
    """Whether the strides of ``a`` (leaving out axes of length 1 and broadcast axes) are
    positive and decrease from the first axis to the last, as in C order."""
    last = None
    for size, stride in zip(a.shape, a.strides):
        if size == 1 or stride == 0:
            continue
        if stride < 0 or (last is not None and stride > last):
            return False
        last = stride
    return True


def _without_newaxes(xp, out, key, value):
    """``(key, value)`` with the ``None`` entries of ``key`` dropped and ``value`` (shaped
    like ``out[key]``) reshaped to match: Dask's item assignment takes no new axes."""
    plain = tuple(item for item in key if item is not None)
    return plain, xp.reshape(value, out[plain].shape)


def _target_shape(shape, template, array_shapes, booleans=()):
    """The shape of ``x[key]`` for an ``x`` of ``shape``, computed without data (``booleans``:
    the positions of boolean index arrays, e.g. ``np.True_``, which NumPy reads as masks)."""
    probe = np.broadcast_to(np.empty((), dtype=bool), shape)
    dummies = [np.ones(s, dtype=bool) if i in booleans else np.zeros(s, dtype=np.intp)
               for i, s in enumerate(array_shapes)]
    return probe[_fill(template, dummies)].shape


def _batch_update(prim, axis_size, values, batched, *, template):
    """The batch rule shared by the updates ``setitem`` and ``index_add``."""
    x, value, arrays = values[0], values[1], list(values[2:])
    x_batched, value_batched, arrays_batched = batched[0], batched[1], list(batched[2:])
    if not x_batched:
        x = broadcast_batch(x, axis_size)
    logical_shape = tuple(x.shape[1:])
    template = normalize_key(template, len(logical_shape))
    array_shapes = [tuple(a.shape[1:]) if b else tuple(a.shape) for a, b in zip(arrays, arrays_batched)]
    booleans = [i for i, a in enumerate(arrays) if hasattr(a, "dtype") and dtype_kind(a.dtype) == "b"]
    target = _target_shape(logical_shape, template, array_shapes, booleans)
    if not hasattr(value, "shape"):  # a Python scalar fills any layout
        if any(arrays_batched):
            key, params, *_ = _batched_key(axis_size, x, True, arrays, arrays_batched, template)
            return prim.bind(x, value, *key[1:], **params), True
        return prim.bind(x, value, *arrays, template=(slice(None),) + template), True
    # the value in per-example layout, batch first: (B, *target)
    if value_batched:
        vshape = tuple(value.shape[1:])
        value = reshape.bind(value, shape=(axis_size,) + (1,) * (len(target) - len(vshape)) + vshape)
        value = broadcast_to.bind(value, shape=(axis_size,) + target)
    else:
        value = broadcast_to.bind(value, shape=target)
        value = broadcast_batch(value, axis_size)
    if any(arrays_batched):
        key, params, block_rank, start, adjacent = _batched_key(axis_size, x, True, arrays, arrays_batched, template)
        value = _inverse_layout(value, block_rank, start, adjacent)
        return prim.bind(x, value, *key[1:], **params), True
    full = (slice(None),) + template
    start, adjacent = _layout(template, bool(arrays))
    if arrays and not adjacent:
        index_rank = len(_broadcast_shape([a.shape for a in arrays]))
        value = _move_axis(value, 0, index_rank)
    return prim.bind(x, value, *arrays, template=full), True


def _inverse_layout(value, block_rank, start, adjacent):
    if adjacent and start:
        order = list(range(value.ndim))
        rest = order[1:1 + start] + order[1 + start + block_rank - 1:]
        block = order[1 + start:1 + start + block_rank - 1]
        inverse = [0] + block + rest
        return transpose.bind(value, axes=tuple(inverse))
    return value


def _setitem_jvp(primals, tangents, *, template):
    x, value, *arrays = primals
    x_tangent, value_tangent = tangents[0], tangents[1]
    out = setitem.bind(x, value, *arrays, template=template)
    if x_tangent is None and value_tangent is None:
        return out, None
    x_tangent = zeros_like.bind(x) if x_tangent is None else x_tangent
    value_tangent = 0.0 if value_tangent is None else value_tangent
    return out, setitem.bind(x_tangent, value_tangent, *arrays, template=template)


def _setitem_vjp(g, primals, out, *, template):
    """x gets ``g`` with the written region zeroed; the value gets that region, read only
    where its write survived: with a target named twice (``x[[0, 0]] = v``) one write
    stays and the others are overwritten, so their elements of ``v`` get nothing."""
    x, value, *arrays = primals
    x_cotangent = setitem.bind(g, 0.0, *arrays, template=template) if differentiable_input(x) else None
    survived = _surviving_writes(g, arrays, template) if differentiable_input(value) else None
    return (x_cotangent, _value_cotangent(g, value, arrays, template, survived)) + (None,) * len(arrays)


setitem = Primitive("setitem", _setitem_impl, None, _setitem_jvp, _setitem_vjp)
setitem.batch = functools.partial(_batch_update, setitem)


# --- index_add: x[key] += value, repeated positions adding up -----------------------------------
def _index_add_impl(x, value, *arrays, template):
    xp = namespace(x, value)  # a Dask value makes a NumPy x lazy (no compute)
    out = xp.asarray(x, copy=True)
    arrays = _same_namespace(x, arrays)
    key = _fill(template, arrays)
    if not arrays:  # basic indexing never visits a position twice
        key = key if any(item is Ellipsis for item in key) else key + (Ellipsis,)
        if any(item is None for item in key) and xp is not numpy_namespace:
            key, total = _without_newaxes(xp, out, key, out[key] + value)
            out[key] = total
            return out
        out[key] = out[key] + value
        return out
    library = _array_library(xp)
    if library is not None:
        library.add.at(out, key, value)  # NumPy, and CuPy >= 13
        return out
    if lazy_namespace(xp):
        return _index_add_lazily(out, value, arrays, template)
    return _one_hot_add(xp, out, value, arrays, template)


def _index_add_lazily(out, value, arrays, template):
    """``index_add`` on Dask arrays: one lazy task on the whole arrays (Dask has no
    scatter-add), run with the chunks' library; the result is a single chunk."""
    import dask
    import dask.array

    def add(out, value, *arrays):
        out = out.copy()
        xp = namespace(out)
        library = _array_library(xp)
        if library is None:
            return _one_hot_add(xp, out, value, arrays, template)
        library.add.at(out, _fill(template, arrays), value)
        return out

    task = dask.delayed(add, pure=True)(out, value, *arrays)
    return dask.array.from_delayed(task, shape=out.shape, dtype=out.dtype, meta=out._meta)


def _array_library(xp):
    """The module behind namespace ``xp`` where it has its own ``add.at`` (NumPy's, CuPy's;
    None for other libraries)."""
    backend = backend_named(namespace_library(xp))
    return sys.modules.get(backend.name) if backend.has_ufunc_at else None  # imported: it made the array


def _one_hot_add(xp, out, value, arrays, template):
    """Portable (slow) ``add.at``: the flat positions the key visits, summed by a one-hot."""
    size = out.size
    device = device_of(out)
    positions = _getitem_impl(xp.reshape(xp.arange(size, device=device), out.shape), *arrays, template=template)
    flat = xp.reshape(positions, (1, -1))
    value = xp.reshape(xp.broadcast_to(xp.asarray(value, dtype=out.dtype, device=device), positions.shape), (1, -1))
    hits = xp.reshape(xp.arange(size, device=device), (size, 1)) == flat
    added = xp.sum(xp.where(hits, value, xp.zeros((), dtype=out.dtype, device=device)), axis=1)
    return xp.reshape(xp.reshape(out, (-1,)) + added, out.shape)


def _index_add_jvp(primals, tangents, *, template):
    x, value, *arrays = primals
    x_tangent, value_tangent = tangents[0], tangents[1]
    out = index_add.bind(x, value, *arrays, template=template)
    if value_tangent is None:
        return out, x_tangent
    x_tangent = zeros_like.bind(x, dtype=value_tangent.dtype) if x_tangent is None else x_tangent
    return out, index_add.bind(x_tangent, value_tangent, *arrays, template=template)


def _index_add_vjp(g, primals, out, *, template):
    x, value, *arrays = primals
    x_cotangent = g if differentiable_input(x) else None
    return (x_cotangent, _value_cotangent(g, value, arrays, template)) + (None,) * len(arrays)


def _value_cotangent(g, value, arrays, template, survived=None):
    """``g[key]`` summed down to the shape of the value written there; where ``survived``
    (a mask that broadcasts against ``g[key]``) is given, 0 outside it (a select, not a
    product: an inf or NaN of ``g`` at an overwritten element stays out)."""
    if not differentiable_input(value):
        return None
    picked = getitem.bind(g, *arrays, template=template)
    if survived is not None:
        picked = where.bind(survived, picked, 0.0)
    extra = value.ndim - picked.ndim
    if extra > 0:  # NumPy drops leading unit dims of a value longer than the target
        picked = reshape.bind(picked, shape=(1,) * extra + tuple(picked.shape))
    return unbroadcast(picked, value.shape)


def _surviving_writes(x, arrays, template):
    """Which elements of a write ``x[key] = v`` stay in the result: a boolean mask that
    broadcasts against ``x[key]``, or None when every one does.

    Only an index array can name a target twice (slices and ints never do).  The write's
    scatter tells, applied to ids (the flat position of each written element): scattered,
    read back through the key, an element survived where it reads its own id.  On NumPy,
    whose writes keep the last one in C order (:func:`_in_c_order`), the ids of the block of
    the index arrays over the indexed axes suffice; elsewhere (CuPy does not say which write
    it keeps) the ids go through the write's own pattern: the same key into an array of
    ``x``'s shape.  Index arrays that can be read here (NumPy arrays, not traced) and name
    no target twice, the usual case, cost one pass over them and nothing more."""
    if not arrays:
        return None
    shape = tuple(x.shape)
    full = normalize_key(template, len(shape))
    integer = all(_is_integer_index(a) for a in arrays)
    if integer and all(type(a) is np.ndarray for a in arrays) and not _repeats(arrays, _slot_sizes(full, shape)):
        return None
    xp = namespace(x)
    if integer and xp is numpy_namespace:  # NumPy keeps the last write whatever the shape of the scatter
        return _surviving_block(x, arrays, full, _slot_sizes(full, shape))
    canvas = xp.full(shape, -1, dtype=xp.int64, device=device_of(x))
    target = tuple(getitem.bind(canvas, *arrays, template=template).shape)
    ids = xp.reshape(xp.arange(math.prod(target), dtype=xp.int64, device=device_of(x)), target)
    scattered = setitem.bind(canvas, ids, *arrays, template=template)
    return equal.bind(getitem.bind(scattered, *arrays, template=template), ids)


def _is_integer_index(array):
    return dtype_kind(array.dtype) in "iu" if hasattr(array, "dtype") else isinstance(array, int)


def _slot_sizes(full, shape):
    """The sizes of ``x``'s axes that the index arrays of a normalised key index, in order."""
    sizes, axis = [], 0
    for item in full:
        if item is None:
            continue
        if isinstance(item, Slot):
            sizes.append(shape[axis])
        axis += 1
    return tuple(sizes)


def _repeats(arrays, sizes):
    """Whether NumPy index arrays (one per axis of ``sizes``, broadcast together) name
    one position twice.  Sorted indices of one sign are read in one pass; else a flag per
    position, or a sort where the positions far outnumber the indices."""
    count = math.prod(np.broadcast_shapes(*[np.shape(a) for a in arrays]))
    if count <= 1:
        return False
    if len(arrays) == 1 and arrays[0].ndim == 1:
        index = arrays[0]
        if (index[0] >= 0 or index[-1] < 0) and bool((index[1:] > index[:-1]).all()):
            return False
    if math.prod(sizes) <= 4 * count + 4096:
        flags = np.zeros(sizes, dtype=bool)
        flags[tuple(arrays)] = True
        return int(np.count_nonzero(flags)) != count
    flat = np.sort(np.ravel_multi_index(np.broadcast_arrays(*arrays), sizes, mode="wrap"), axis=None)
    return bool((flat[1:] == flat[:-1]).any())


def _surviving_block(x, arrays, full, sizes):
    """The mask of :func:`_surviving_writes` for integer index arrays, over the block they
    index only (the axes of the slices never repeat a target): ids of the broadcast block
    scattered into an array of the indexed axes' sizes, read back; then shaped to broadcast
    against ``x[key]``, where the block sits where NumPy puts it."""
    xp = namespace(x)
    device = device_of(x)
    block = _broadcast_shape([tuple(a.shape) if hasattr(a, "shape") else () for a in arrays])
    sub = tuple(Slot(i) for i in range(len(arrays)))
    ids = xp.reshape(xp.arange(math.prod(block), dtype=xp.int64, device=device), block)
    canvas = xp.full(sizes, -1, dtype=xp.int64, device=device)
    scattered = setitem.bind(canvas, ids, *arrays, template=sub)
    mask = equal.bind(getitem.bind(scattered, *arrays, template=sub), ids)
    start, adjacent = _layout(full, True)
    before = start if adjacent else 0
    others = sum(1 for item in full if item is None or isinstance(item, slice))
    return reshape.bind(mask, shape=(1,) * before + tuple(block) + (1,) * (others - before))


index_add = Primitive("index_add", _index_add_impl, None, _index_add_jvp, _index_add_vjp)
index_add.batch = functools.partial(_batch_update, index_add)


# --- pad: zeros around a block, the transpose of a slice ------------------------------------
def _pad_impl(x, *, pad_width, constant_values):
    """Constant padding with array-API concatenation, axis by axis (a later axis's constants
    in the corners); a NumPy array is copied once into the padded array, its borders filled
    axis by axis in the same order (the same values, one allocation instead of two per
    padded axis)."""
    if type(x) is np.ndarray:
        return _numpy_pad(x, *_numpy_pad_fills(pad_width, constant_values))
    xp = namespace(x)
    for axis, ((before, after), (low, high)) in enumerate(zip(pad_width, constant_values)):
        pieces = []
        for count, value in ((before, low), (after, high)):
            shape = x.shape[:axis] + (count,) + x.shape[axis + 1:]
            pieces.append(xp.full(shape, value, dtype=x.dtype, device=device_of(x)) if count else None)
        if pieces[0] is not None or pieces[1] is not None:
            x = xp.concat([p for p in (pieces[0], x, pieces[1]) if p is not None], axis=axis)
    return x


def _numpy_pad_fills(pad_width, constant_values):
    """(the elements each axis gains, the borders as (index, value) axis by axis, the block's
    index) of a constant pad: the fills of a NumPy array's padded copy, in their order."""
    widths = tuple((before, after) for before, after in pad_width)
    borders = []
    for axis, ((before, after), (low, high)) in enumerate(zip(widths, constant_values)):
        head = (slice(None),) * axis
        if before:
            borders.append((head + (slice(0, before),), low))
        if after:
            borders.append((head + (slice(-after, None),), high))
    return (tuple(before + after for before, after in widths), borders,
            tuple(slice(before, -after if after else None) for before, after in widths))


def _numpy_pad(x, widths, borders, block):
    """A padded copy of NumPy array ``x``: its borders filled, then ``x`` into the block
    (``widths``: the elements each axis gains), in ``x``'s memory order as ``np.pad`` lays
    it out (Fortran order for a Fortran-ordered ``x``: a sum over it adds in that order)."""
    order = "F" if x.flags.f_contiguous and not x.flags.c_contiguous else "C"
    out = np.empty(tuple(map(operator.add, x.shape, widths)), x.dtype, order=order)
    for where, value in borders:
        out[where] = value
    out[block] = x
    return out


def _pad_numpy_bound(*, pad_width, constant_values):
    """``_pad_impl`` of a NumPy array, its parameters bound (the fills made once)."""
    widths, borders, block = _numpy_pad_fills(pad_width, constant_values)
    return lambda x: _numpy_pad(x, widths, borders, block)


_pad_impl.numpy_bound = _pad_numpy_bound


def _pad_batch(axis_size, values, batched, *, pad_width, constant_values):
    return pad.bind(values[0], pad_width=((0, 0),) + tuple(pad_width),
                             constant_values=((0, 0),) + tuple(constant_values)), True


def _pad_jvp(primals, tangents, *, pad_width, constant_values):
    """The border is constant: the tangent is padded with zeros."""
    out = pad.bind(primals[0], pad_width=pad_width, constant_values=constant_values)
    tangent = tangents[0]
    if tangent is None:
        return out, None
    return out, pad.bind(tangent, pad_width=pad_width, constant_values=((0, 0),) * len(pad_width))


def _pad_transpose(g, x, *, pad_width, constant_values):
    return getitem_static(g, tuple(slice(before, before + size) for (before, _), size in zip(pad_width, x.shape)))


pad = linear_rules(Primitive("pad", _pad_impl, _pad_batch), _pad_transpose, rearranges=True)
pad.jvp = _pad_jvp
