"""Shape functions with NumPy's signatures: reshape, transpose and friends, joins
(``block``, ``append``, ``unstack``), ``insert`` / ``delete`` / ``resize``, ``meshgrid``,
``pad`` in every mode, ``roll``, ``flip``, sliding windows, ``diff``, ``ediff1d`` and
``gradient``, ``repeat`` / ``tile`` / ``split``, diagonals and triangles.

The pad modes other than constant, ``diff``, ``gradient``, ``repeat``, ``tile``,
``split``, ``insert``, ``delete`` and ``diag`` are compositions of primitives (gathers
with fixed index arrays, slices, arithmetic), so they batch and differentiate through
their parts.
"""
from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from labeled_func_kernels import core as kcore
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import indexing as ki
from labeled_func_kernels import shape as ks
from labeled_func_kernels.backend import device_of, dtype_kind, namespace, normalize_axis
from labeled_func_kernels.creation import zeros_like
from labeled_func_kernels.indexing import getitem, getitem_static, normalize_key, split_key
from labeled_func_kernels.primitive import Traced

from ..errors import UnsupportedOperationError
from ..views import static_slice
from .creation import linspace
from .dispatch import NO_VALUE, FUNCTIONS, asarray, given, implements
from .dynamic import fixed, pick
from .reductions import largest, mean, median, smallest

__all__ = ["diagonal", "at_least_1d"]


@implements(np.reshape)
def _reshape(a, /, shape=None, order="C", *, newshape=None, copy=None):
    shape = newshape if shape is None else shape
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return kcore.reshape.bind(a, shape=shape)


@implements(np.ravel)
def _ravel(a, order="C"):
    return kcore.reshape.bind(a, shape=(-1,))


@implements(np.transpose, np.permute_dims)
def _transpose(a, axes=None):
    if axes is None:
        axes = tuple(reversed(range(a.ndim)))
    return kcore.transpose.bind(a, axes=normalize_axis(axes, a.ndim))


@implements(np.moveaxis)
def _moveaxis(a, source, destination):
    return kcore.moveaxis(a, source, destination)


@implements(np.swapaxes)
def _swapaxes(a, axis1, axis2):
    order = list(range(a.ndim))
    i, j = normalize_axis((axis1, axis2), a.ndim)
    order[i], order[j] = order[j], order[i]
    return kcore.transpose.bind(a, axes=tuple(order))


@implements(np.rollaxis)
def _rollaxis(a, axis, start=0):
    """``axis`` moved to stand before ``start`` (NumPy's older moveaxis)."""
    ndim = a.ndim
    axis = normalize_axis(axis, ndim)[0]
    start = operator.index(start)
    if start < 0:
        start += ndim
    if not 0 <= start < ndim + 1:
        raise np.exceptions.AxisError(f"numpy.rollaxis: 'start' arg requires {-ndim} <= start < {ndim + 1}")
    if axis < start:
        start -= 1
    order = [k for k in range(ndim) if k != axis]
    order.insert(start, axis)
    return kcore.transpose.bind(a, axes=tuple(order)) if order != list(range(ndim)) else a


@implements(np.matrix_transpose, np.linalg.matrix_transpose)
def _matrix_transpose(x, /):
    x = asarray(x)
    if x.ndim < 2:
        raise ValueError(f"numpy.matrix_transpose: input array must be at least 2-dimensional, but it is {x.ndim}")
    return kcore.transpose.bind(x, axes=tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))


@implements(np.expand_dims)
def _expand_dims(a, axis):
    axis = (axis,) if isinstance(axis, int) else tuple(axis)
    return kcore.expand_dims.bind(a, axis=normalize_axis(axis, a.ndim + len(axis)))


@implements(np.squeeze)
def _squeeze(a, axis=None):
    if axis is None:
        axis = tuple(i for i, s in enumerate(a.shape) if s == 1)
    return kcore.squeeze.bind(a, axis=normalize_axis(axis, a.ndim))


@implements(np.broadcast_to)
def _broadcast_to(array, shape, subok=False):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return kcore.broadcast_to.bind(asarray(array), shape=shape)


@implements(np.broadcast_arrays)
def _broadcast_arrays(*args, subok=False):
    shape = np.broadcast_shapes(*[np.shape(a) for a in args])
    return tuple(kcore.broadcast_to.bind(asarray(a), shape=shape) for a in args)


def _at_least(rank, a):
    """``a`` with unit axes added up to ``rank`` where NumPy's atleast_{rank}d puts them."""
    a = asarray(a)
    if not hasattr(a, "ndim"):
        a = np.asarray(a)
    if a.ndim >= rank:
        return a
    shape = tuple(a.shape)
    if rank == 3 and a.ndim == 2:
        shape = shape + (1,)
    elif rank == 3 and a.ndim == 1:
        shape = (1,) + shape + (1,)
    else:
        shape = (1,) * (rank - a.ndim) + shape
    return kcore.reshape.bind(a, shape=shape)


def _atleast_handler(rank):
    def handler(*arrays):
        out = [_at_least(rank, a) for a in arrays]
        return out[0] if len(out) == 1 else tuple(out)

    return handler


FUNCTIONS[np.atleast_1d] = _atleast_handler(1)
FUNCTIONS[np.atleast_2d] = _atleast_handler(2)
FUNCTIONS[np.atleast_3d] = _atleast_handler(3)


@implements(np.copy)
def _copy(a, order="K", subok=False):
    return kcore.copy.bind(a)


# --- joins ----------------------------------------------------------------------------------------
@implements(np.concatenate, np.concat)
def _concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    arrays = [asarray(a) for a in arrays]
    if axis is not None:
        axis = normalize_axis(axis, arrays[0].ndim)[0]
    rotation = _rotation(arrays, axis)
    if rotation is not None:  # xarray's roll: the same values, and the VJP is one roll back
        result = ks.roll.bind(rotation[0], shift=(rotation[1],), axis=(axis,))
    else:
        result = ks.concatenate.bind(*arrays, axis=axis)
    return result if dtype is None else ew.astype.bind(result, dtype=dtype)


def _rotation(arrays, axis):
    """``(base, shift)`` when ``arrays`` are views of one base that, joined along ``axis``,
    give ``np.roll(base, shift, axis)``: slices whole on the other axes, consecutive (cyclically)
    along ``axis`` and covering it once (``concatenate([x[-c:], x[:-c]])``, xarray's roll).
    Only the differentiating levels track views; elsewhere None."""
    if axis is None or len(arrays) < 2:
        return None
    pieces = [static_slice(a) for a in arrays]
    if any(piece is None for piece in pieces) or any(piece[0] is not pieces[0][0] for piece in pieces):
        return None
    base = pieces[0][0]
    shape = tuple(base.shape)
    spans = []
    for _, template in pieces:
        key = normalize_key(template, len(shape))
        if len(key) != len(shape) or not all(isinstance(item, slice) for item in key):
            return None
        if any(item.indices(size) != (0, size, 1) for d, (item, size) in enumerate(zip(key, shape)) if d != axis):
            return None
        start, stop, step = key[axis].indices(shape[axis])
        if step != 1 or stop <= start:
            return None
        spans.append((start, stop))
    size = shape[axis]
    if sum(stop - start for start, stop in spans) != size:
        return None
    ends = [stop % size for _, stop in spans]
    if [start for start, _ in spans[1:]] + [spans[0][0]] != ends:
        return None
    return base, -spans[0][0] % size


@implements(np.stack)
def _stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    arrays = [asarray(a) for a in arrays]
    axis = normalize_axis(axis, arrays[0].ndim + 1)[0]
    result = ks.stack.bind(*arrays, axis=axis)
    return result if dtype is None else ew.astype.bind(result, dtype=dtype)


def _joined(arrays, axis, dtype):
    result = ks.concatenate.bind(*arrays, axis=axis)
    return result if dtype is None else ew.astype.bind(result, dtype=dtype)


@implements(np.vstack)
def _vstack(tup, *, dtype=None, casting="same_kind"):
    """Rows: each array at least 2-D, joined along axis 0 (``np.row_stack`` comes here too)."""
    return _joined([_at_least(2, a) for a in tup], 0, dtype)


@implements(np.hstack)
def _hstack(tup, *, dtype=None, casting="same_kind"):
    """Columns: along axis 1, or axis 0 for 1-D arrays."""
    arrays = [_at_least(1, a) for a in tup]
    return _joined(arrays, 0 if arrays and arrays[0].ndim == 1 else 1, dtype)


@implements(np.dstack)
def _dstack(tup):
    return _joined([_at_least(3, a) for a in tup], 2, None)


@implements(np.column_stack)
def _column_stack(tup):
    """1-D arrays as columns (0-d as 1x1), 2-D arrays as they are, joined along axis 1."""
    columns = []
    for a in tup:
        a = asarray(a)
        if a.ndim < 2:
            a = kcore.reshape.bind(a, shape=(-1, 1))
        columns.append(a)
    return _joined(columns, 1, None)


@implements(np.unstack)
def _unstack(x, /, *, axis=0):
    """The slices of ``x`` along ``axis``, as a tuple (the inverse of stack)."""
    x = asarray(x)
    if x.ndim == 0:
        raise ValueError("Input array must be at least 1-d.")
    axis = normalize_axis(axis, x.ndim)[0]
    return tuple(getitem_static(x, (slice(None),) * axis + (i,)) for i in range(x.shape[axis]))


@implements(np.append)
def _append(arr, values, axis=None):
    """``values`` joined after ``arr`` along ``axis``; with None, both flattened."""
    arr = _as_array(arr, values)
    values = _as_array(values, arr)
    if axis is None:
        if arr.ndim != 1:
            arr = _flat(arr)
        values = _flat(values)
        axis = arr.ndim - 1
    return ks.concatenate.bind(arr, values, axis=normalize_axis(axis, arr.ndim)[0])


def _as_array(value, *others):
    """A list, tuple or number as an array, in the namespace of the arrays among ``others``
    (NumPy's without any)."""
    if hasattr(value, "ndim"):
        return value
    arrays = [other for other in others if hasattr(other, "ndim")]
    return namespace(*arrays).asarray(value) if arrays else np.asarray(value)


def _flat(x):
    """``x`` as a vector (its length given: a size-0 batch cannot infer a -1)."""
    return kcore.reshape.bind(x, shape=(math.prod(x.shape),))


@implements(np.block)
def _block(arrays):
    """NumPy's block: the innermost lists joined along the last axis, the lists holding
    them along the one before, and so on; every block first given that many dimensions."""
    depth, rank = _block_depth(arrays, ())
    rank = max(depth, rank)

    def assemble(item, level):
        if level == depth:
            item = _as_array(item)
            return item if item.ndim == rank else kcore.reshape.bind(
                item, shape=(1,) * (rank - item.ndim) + tuple(item.shape))
        parts = [assemble(part, level + 1) for part in item]
        return parts[0] if len(parts) == 1 else ks.concatenate.bind(*parts, axis=rank - depth + level)

    out = assemble(arrays, 0)
    return kcore.copy.bind(out) if depth == 0 else out


def _block_depth(item, index):
    """``(depth of the nested lists, largest ndim of a block)``; NumPy's errors for tuples,
    empty lists and lists of unequal depths."""
    if isinstance(item, tuple):
        raise TypeError(f"arrays{''.join(f'[{i}]' for i in index)} is a tuple. Only lists can be used to arrange "
                        "blocks, and np.block does not allow implicit conversion from tuple to ndarray.")
    if not isinstance(item, list):
        return 0, np.ndim(item)
    if not item:
        raise ValueError(f"List at arrays{''.join(f'[{i}]' for i in index)} cannot be empty")
    found = [_block_depth(part, index + (i,)) for i, part in enumerate(item)]
    depths = {depth for depth, _ in found}
    if len(depths) > 1:
        raise ValueError("List depths are mismatched. All lists at the same depth in numpy.block must have "
                         "the same nesting depth")
    return depths.pop() + 1, max(rank for _, rank in found)


def _layout_of(name, arr_shape, obj, axis, values_shape=None):
    """Which element of ``arr`` (flat position) or of ``values`` (flat position plus
    ``arr``'s size) each element of NumPy's ``insert`` / ``delete`` result holds, found by
    running NumPy on the positions themselves; a traced ``obj`` is fixed by its primal."""
    if isinstance(obj, Traced) or hasattr(obj, "shape"):  # traced, or on a device: its values, on the host
        obj = fixed(obj, f"numpy.{name} (traced obj: where the elements go)")
    size = int(np.prod(arr_shape))
    positions = np.arange(size).reshape(arr_shape)
    if values_shape is None:
        return np.delete(positions, obj, axis)
    return np.insert(positions, obj, size + np.arange(int(np.prod(values_shape))).reshape(values_shape), axis)


@implements(np.delete)
def _delete(arr, obj, axis=None):
    """``arr`` without the entries ``obj`` (an int, a slice, a sequence, a boolean mask)
    selects along ``axis`` (None: of the flattened array): a gather of the others."""
    arr = _as_array(arr)
    layout = _layout_of("delete", tuple(arr.shape), obj, axis)
    return kcore.reshape.bind(pick(_flat(arr), np.ravel(layout), 0), shape=layout.shape)


@implements(np.insert)
def _insert(arr, obj, values, axis=None):
    """``values`` (cast to ``arr``'s dtype, broadcast as NumPy does) placed before the
    entries ``obj`` selects along ``axis`` (None: of the flattened array): a gather from
    the two arrays joined."""
    arr = _as_array(arr)
    values = _as_array(values, arr)
    if values.dtype != arr.dtype:
        values = ew.astype.bind(values, dtype=arr.dtype)
    layout = _layout_of("insert", tuple(arr.shape), obj, axis, tuple(values.shape))
    both = ks.concatenate.bind(_flat(arr), _flat(values), axis=0)
    return kcore.reshape.bind(pick(both, np.ravel(layout), 0), shape=layout.shape)


@implements(np.resize)
def _resize(a, new_shape):
    """The flattened ``a`` repeated (or cut) to fill ``new_shape``; zeros if either is empty."""
    a = _as_array(a)
    new_shape = (operator.index(new_shape),) if not isinstance(new_shape, (tuple, list)) else tuple(
        operator.index(size) for size in new_shape)
    if any(size < 0 for size in new_shape):
        raise ValueError("all elements of `new_shape` must be non-negative")
    new_size = math.prod(new_shape)
    flat = _flat(a)
    size = flat.shape[0]
    if size == 0 or new_size == 0:
        return zeros_like.bind(flat, shape=new_shape)
    repeats = -(-new_size // size)
    if repeats > 1:
        flat = kcore.reshape.bind(kcore.broadcast_to.bind(flat, shape=(repeats, size)), shape=(repeats * size,))
    if flat.shape[0] != new_size:
        flat = getitem_static(flat, (slice(0, new_size),))
    return kcore.reshape.bind(flat, shape=new_shape)


@implements(np.meshgrid)
def _meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """Coordinate arrays: the flattened ``xi[i]`` along axis ``i`` (the first two axes
    swapped for ``indexing="xy"``), broadcast to the full grid unless ``sparse``."""
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    count = len(xi)
    out = []
    for i, x in enumerate(xi):
        x = _as_array(x, *xi)
        shape = [1] * count
        shape[1 - i if indexing == "xy" and count > 1 and i < 2 else i] = math.prod(x.shape)
        out.append(kcore.reshape.bind(x, shape=tuple(shape)))
    if not sparse and count:
        grid = np.broadcast_shapes(*[tuple(x.shape) for x in out])
        out = [kcore.broadcast_to.bind(x, shape=grid) for x in out]
    if copy:
        out = [kcore.copy.bind(x) for x in out]
    return tuple(out)


# --- pad -----------------------------------------------------------------------------------------
_PAD_OPTIONS = {"constant": {"constant_values"}, "edge": set(), "wrap": set(), "empty": set(),
                "reflect": {"reflect_type"}, "symmetric": {"reflect_type"}, "linear_ramp": {"end_values"},
                "maximum": {"stat_length"}, "minimum": {"stat_length"}, "mean": {"stat_length"},
                "median": {"stat_length"}}
_PAD_STATISTICS = {"maximum": largest, "minimum": smallest, "mean": mean, "median": median}


@implements(np.pad)
def _pad(array, pad_width, mode="constant", **kwargs):
    """NumPy's pad in every named mode.  Axis after axis, as NumPy pads (the corners come
    from the axes padded before): edge, wrap and even reflections gather with a fixed index
    array; odd reflections, ramps and statistics join computed blocks to the array.
    ``empty`` leaves the padding undefined in NumPy; here it is zeros."""
    if callable(mode) or mode not in _PAD_OPTIONS:
        raise UnsupportedOperationError(f"numpy.pad with mode={mode!r} is not supported on traced arrays")
    unknown = set(kwargs) - _PAD_OPTIONS[mode]
    if unknown:
        raise ValueError(f"unsupported keyword arguments for mode '{mode}': {unknown}")
    array = asarray(array)
    pad_width = _pad_widths(pad_width, array.ndim)
    if mode in ("constant", "empty"):
        constant = _pairs(kwargs.get("constant_values", 0), array.ndim, lambda v: v.item() if hasattr(v, "item") else v)
        return ki.pad.bind(array, pad_width=pad_width, constant_values=constant)
    for axis, (before, after) in enumerate(pad_width):
        if (before or after) and array.shape[axis] == 0:
            raise ValueError(f"can't extend empty axis {axis} using modes other than 'constant' or 'empty'")
    if mode == "linear_ramp":
        ends = _pairs(kwargs.get("end_values", 0), array.ndim, lambda v: v)
        return _padded(array, pad_width, lambda x, axis, widths: _ramps(x, axis, widths, ends[axis]))
    if mode in _PAD_STATISTICS:
        lengths = kwargs.get("stat_length")
        lengths = ((None, None),) * array.ndim if lengths is None else _pad_widths(lengths, array.ndim)
        return _padded(array, pad_width, lambda x, axis, widths: _statistics(
            x, axis, widths, lengths[axis], _PAD_STATISTICS[mode]))
    odd = kwargs.get("reflect_type", "even") == "odd"  # NumPy reads any other value as "even"
    x = array
    for axis, (before, after) in enumerate(pad_width):
        if not (before or after):
            continue
        if odd and x.shape[axis] > 1:
            x = _odd_reflection(x, axis, before, after, mode == "symmetric")
        else:
            index = _pad_index(x.shape[axis], before, after, mode)
            x = getitem_static(x, (slice(None),) * axis + (index,))
    return x


def _padded(x, pad_width, blocks):
    """``x`` with, along each axis in turn, the two blocks ``blocks(x, axis, (before,
    after))`` returns joined before and after it."""
    for axis, widths in enumerate(pad_width):
        if widths[0] or widths[1]:
            first, last = blocks(x, axis, widths)
            x = ks.concatenate.bind(*[part for part, width in zip((first, x, last), (widths[0], 1, widths[1]))
                                      if width], axis=axis)
    return x


def _along(x, axis, start, stop):
    return getitem_static(x, (slice(None),) * axis + (slice(start, stop),))


def _ramps(x, axis, widths, ends):
    """Linear ramps from the end values (included) towards the edges (excluded), computed
    as NumPy's linspace of the pad's dtype."""
    xp = namespace(x)
    ramps = []
    for side, (width, end) in enumerate(zip(widths, ends)):
        if not width:
            ramps.append(None)
            continue
        edge = getitem_static(x, (slice(None),) * axis + (-side,))
        end = xp.asarray(end.item() if hasattr(end, "item") else end, device=device_of(x))
        ramp = linspace(end, edge, num=width, endpoint=False, dtype=x.dtype, axis=axis)
        ramps.append(ks.flip.bind(ramp, axis=(axis,)) if side else ramp)
    return tuple(ramps)


def _statistics(x, axis, widths, lengths, statistic):
    """The statistic of the first and last ``lengths`` elements along ``axis`` (all of
    them where None or longer), repeated over each pad's width; rounded to the array's
    integer dtype as NumPy does."""
    size = x.shape[axis]
    first, last = (size if length is None else min(length, size) for length in lengths)
    if statistic in (largest, smallest) and not (first and last):
        raise ValueError("stat_length of 0 yields no value for padding")
    blocks = []
    for width, (start, stop) in zip(widths, ((0, first), (size - last, size))):
        if not width:
            blocks.append(None)
            continue
        value = statistic(_along(x, axis, start, stop), axis, True)
        if dtype_kind(x.dtype) in "iu" and dtype_kind(value.dtype) not in "iub":
            value = ew.astype.bind(ew.rint.bind(value), dtype=x.dtype)
        elif value.dtype != x.dtype:
            value = ew.astype.bind(value, dtype=x.dtype)
        shape = list(x.shape)
        shape[axis] = width
        blocks.append(kcore.broadcast_to.bind(value, shape=tuple(shape)))
    return tuple(blocks)


def _odd_reflection(x, axis, before, after, symmetric):
    """NumPy's odd reflection: chunks mirrored about each edge value (``2 edge - x``), at
    most one period of the part padded so far at a time, until both widths are filled."""
    period = x.shape[axis]
    while before or after:
        length = x.shape[axis]
        chunk = length // period * period if symmetric else (length - 1) // (period - 1) * (period - 1)
        offset = 0 if symmetric else 1
        parts = []
        if before:
            count = min(chunk, before)
            mirrored = ks.flip.bind(_along(x, axis, offset, offset + count), axis=(axis,))
            parts.append(ew.subtract.bind(ew.multiply.bind(2, _along(x, axis, 0, 1)), mirrored))
            before -= count
        parts.append(x)
        if after:
            count = min(chunk, after)
            mirrored = ks.flip.bind(_along(x, axis, length - offset - count, length - offset), axis=(axis,))
            parts.append(ew.subtract.bind(ew.multiply.bind(2, _along(x, axis, length - 1, length)), mirrored))
            after -= count
        x = ks.concatenate.bind(*parts, axis=axis)
    return x


def _pad_widths(pad_width, ndim):
    """Every form of ``pad_width`` NumPy accepts, as one (before, after) pair of ints per
    axis: an int, a pair, one pair per axis (sequences or an integer array), and a dict
    {axis: int or pair} (axes not named are not padded)."""
    if isinstance(pad_width, dict):
        pairs = [(0, 0)] * ndim
        for axis, width in pad_width.items():
            if isinstance(width, tuple) and len(width) == 2:
                pairs[axis] = tuple(width)
            else:
                pairs[axis] = (width, width)
        pad_width = pairs
    widths = np.asarray(pad_width)
    if widths.dtype.kind not in "iu":
        raise TypeError(f"numpy.pad: `pad_width` must be of integral type, got {pad_width!r}")
    if widths.size and widths.min() < 0:
        raise ValueError(f"numpy.pad: index can't contain negative values (pad_width={pad_width!r})")
    if widths.ndim < 3 and widths.size == 2 and widths.shape != (2, 1):
        widths = widths.reshape(2)  # one (before, after) pair for every axis
    return _pairs(widths, ndim, int)


def _pairs(value, ndim, convert):
    """NumPy's pad argument broadcast to one (before, after) pair per axis."""
    pairs = np.broadcast_to(np.asarray(value, dtype=object), (ndim, 2))
    return tuple((convert(before), convert(after)) for before, after in pairs.tolist())


def _pad_index(size, before, after, mode):
    position = np.arange(-before, size + after)
    if mode == "edge":
        return np.clip(position, 0, size - 1)
    if mode == "wrap":
        return position % size
    if mode == "reflect":
        if size == 1:
            return np.zeros_like(position)
        period = 2 * size - 2
        folded = position % period
        return np.where(folded < size, folded, period - folded)
    period = 2 * size  # symmetric
    folded = position % period
    return np.where(folded < size, folded, period - 1 - folded)


# --- roll, flip, windows ----------------------------------------------------------------------------
@implements(np.roll)
def _roll(a, shift, axis=None):
    if axis is None:
        return ks.roll.bind(a, shift=shift, axis=None)
    axis = normalize_axis(axis, a.ndim)
    shift = (shift,) * len(axis) if isinstance(shift, int) else tuple(shift)
    return ks.roll.bind(a, shift=shift, axis=axis)


@implements(np.flip)
def _flip(m, axis=None):
    return ks.flip.bind(m, axis=normalize_axis(axis, m.ndim))


@implements(np.flipud)
def _flipud(m):
    m = asarray(m)
    if m.ndim < 1:
        raise ValueError("numpy.flipud: input must be >= 1-d.")
    return ks.flip.bind(m, axis=(0,))


@implements(np.fliplr)
def _fliplr(m):
    m = asarray(m)
    if m.ndim < 2:
        raise ValueError("numpy.fliplr: input must be >= 2-d.")
    return ks.flip.bind(m, axis=(1,))


@implements(np.rot90)
def _rot90(m, k=1, axes=(0, 1)):
    """``k`` quarter turns in the plane of ``axes``, from the first axis towards the second:
    flips and one transpose (NumPy's own construction)."""
    m = asarray(m)
    axes = tuple(axes)
    if len(axes) != 2:
        raise ValueError("numpy.rot90: len(axes) must be 2.")
    if axes[0] == axes[1] or abs(axes[0] - axes[1]) == m.ndim:
        raise ValueError("numpy.rot90: axes must be different.")
    if not all(-m.ndim <= a < m.ndim for a in axes):
        raise ValueError(f"numpy.rot90: axes={axes} out of range for array of ndim={m.ndim}.")
    first, second = normalize_axis(axes, m.ndim)
    k = operator.index(k) % 4
    if k == 0:
        return m
    if k == 2:
        return ks.flip.bind(m, axis=tuple(sorted((first, second))))
    order = list(range(m.ndim))
    order[first], order[second] = order[second], order[first]
    if k == 1:
        return kcore.transpose.bind(ks.flip.bind(m, axis=(second,)), axes=tuple(order))
    return ks.flip.bind(kcore.transpose.bind(m, axes=tuple(order)), axis=(second,))


@implements(np.lib.stride_tricks.sliding_window_view)
def _sliding_window_view(x, window_shape, axis=None, *, subok=False, writeable=False):
    window_shape = (window_shape,) if isinstance(window_shape, int) else tuple(window_shape)
    if axis is None:
        axis = tuple(range(x.ndim))
    axis = normalize_axis(axis, x.ndim)
    return ks.sliding_window_view.bind(x, window_shape=window_shape, axis=axis)


# --- differences -----------------------------------------------------------------------------------
@implements(np.diff)
def _diff(a, n=1, axis=-1, prepend=NO_VALUE, append=NO_VALUE):
    """Differences along ``axis``, ``n`` times (NumPy semantics)."""
    x = a
    axis = normalize_axis(axis, x.ndim)[0]
    if given(prepend) or given(append):
        edge = [slice(None)] * x.ndim
        edge[axis] = slice(0, 1)
        template = getitem_static(x, tuple(edge))

        def block(value):
            if getattr(value, "ndim", 0) == 0:
                return ew.where.bind(True, value, template)
            return value

        parts = [block(prepend)] if given(prepend) else []
        parts.append(x)
        if given(append):
            parts.append(block(append))
        x = ks.concatenate.bind(*parts, axis=axis)
    for _ in range(n):
        upper = [slice(None)] * x.ndim
        lower = [slice(None)] * x.ndim
        upper[axis] = slice(1, None)
        lower[axis] = slice(None, -1)
        x = ew.subtract.bind(getitem_static(x, tuple(upper)), getitem_static(x, tuple(lower)))
    return x


@implements(np.ediff1d)
def _ediff1d(ary, to_end=None, to_begin=None):
    """Differences of the flattened ``ary``, with ``to_begin`` / ``to_end`` (flattened,
    cast to ``ary``'s dtype if NumPy's same-kind rule allows) joined at the ends."""
    ary = _flat(_as_array(ary))
    parts = []
    for name, extra in (("to_begin", to_begin), ("to_end", to_end)):
        if extra is None:
            parts.append(None)
            continue
        extra = _as_array(extra, ary)
        if not np.can_cast(_numpy_dtype(extra.dtype), _numpy_dtype(ary.dtype), casting="same_kind"):
            raise TypeError(f"dtype of `{name}` must be compatible with input `ary` under the `same_kind` rule.")
        if extra.dtype != ary.dtype:
            extra = ew.astype.bind(extra, dtype=ary.dtype)
        parts.append(_flat(extra))
    differences = ew.subtract.bind(getitem_static(ary, (slice(1, None),)), getitem_static(ary, (slice(None, -1),)))
    joined = [part for part in (parts[0], differences, parts[1]) if part is not None]
    return joined[0] if len(joined) == 1 else ks.concatenate.bind(*joined, axis=0)


def _numpy_dtype(dtype):
    return np.dtype(getattr(dtype, "_np_dtype", dtype))


@implements(np.gradient)
def _gradient(f, *varargs, axis=None, edge_order=1):
    """Second-order central differences inside, first-order at the edges (NumPy's)."""
    x = f
    if edge_order not in (1, 2):
        raise ValueError("gradient: edge_order must be 1 or 2")
    axes = normalize_axis(axis, x.ndim)
    if not varargs:
        spacings = [1.0] * len(axes)
    elif len(varargs) == 1:
        spacings = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacings = list(varargs)
    else:
        raise TypeError(f"numpy.gradient: invalid number of arguments: {len(varargs)} spacings for "
                        f"{len(axes)} axes (give none, one, or one per axis)")
    results = []
    for ax, h in zip(axes, spacings):
        h = _uniform_step(h)

        def part(start, stop):
            index = [slice(None)] * x.ndim
            index[ax] = slice(start, stop)
            return getitem_static(x, tuple(index))

        if getattr(h, "ndim", 0) == 0:
            interior = ew.divide.bind(ew.subtract.bind(part(2, None), part(None, -2)), 2.0 * h)
            if edge_order == 1:
                first = ew.divide.bind(ew.subtract.bind(part(1, 2), part(0, 1)), h)
                last = ew.divide.bind(ew.subtract.bind(part(-1, None), part(-2, -1)), h)
            else:
                first = _combine([(-1.5 / h, part(0, 1)), (2.0 / h, part(1, 2)), (-0.5 / h, part(2, 3))])
                last = _combine([(0.5 / h, part(-3, -2)), (-2.0 / h, part(-2, -1)), (1.5 / h, part(-1, None))])
        else:
            # coordinates given: NumPy's non-uniform second-order formula
            coords = h
            dx = ew.subtract.bind(getitem_static(coords, (slice(1, None),)), getitem_static(coords, (slice(None, -1),)))
            shape = [1] * x.ndim
            shape[ax] = -1
            dx1 = kcore.reshape.bind(getitem_static(dx, (slice(None, -1),)), shape=tuple(shape))
            dx2 = kcore.reshape.bind(getitem_static(dx, (slice(1, None),)), shape=tuple(shape))
            total = ew.add.bind(dx1, dx2)
            a = ew.negative.bind(ew.divide.bind(dx2, ew.multiply.bind(dx1, total)))
            b = ew.divide.bind(ew.subtract.bind(dx2, dx1), ew.multiply.bind(dx1, dx2))
            c = ew.divide.bind(dx1, ew.multiply.bind(dx2, total))
            interior = ew.add.bind(
                ew.add.bind(ew.multiply.bind(a, part(None, -2)), ew.multiply.bind(b, part(1, -1))),
                ew.multiply.bind(c, part(2, None)),
            )

            def spacing(i):
                return kcore.reshape.bind(getitem_static(dx, (slice(i, i + 1 if i != -1 else None),)),
                                          shape=tuple(shape))

            if edge_order == 1:
                first = ew.divide.bind(ew.subtract.bind(part(1, 2), part(0, 1)), spacing(0))
                last = ew.divide.bind(ew.subtract.bind(part(-1, None), part(-2, -1)), spacing(-1))
            else:
                d1, d2 = spacing(0), spacing(1)
                span = ew.add.bind(d1, d2)
                first = _combine([
                    (ew.negative.bind(ew.divide.bind(ew.add.bind(ew.multiply.bind(2.0, d1), d2), ew.multiply.bind(d1, span))), part(0, 1)),
                    (ew.divide.bind(span, ew.multiply.bind(d1, d2)), part(1, 2)),
                    (ew.negative.bind(ew.divide.bind(d1, ew.multiply.bind(d2, span))), part(2, 3)),
                ])
                d1, d2 = spacing(-2), spacing(-1)
                span = ew.add.bind(d1, d2)
                last = _combine([
                    (ew.divide.bind(d2, ew.multiply.bind(d1, span)), part(-3, -2)),
                    (ew.negative.bind(ew.divide.bind(span, ew.multiply.bind(d1, d2))), part(-2, -1)),
                    (ew.divide.bind(ew.add.bind(ew.multiply.bind(2.0, d2), d1), ew.multiply.bind(d2, span)), part(-1, None)),
                ])
        result = ks.concatenate.bind(first, interior, last, axis=ax)
        if dtype_kind(x.dtype) in "fc" and result.dtype != x.dtype:  # NumPy keeps a float32 f
            result = ew.astype.bind(result, dtype=x.dtype)
        results.append(result)
    return results[0] if len(results) == 1 else tuple(results)


def _uniform_step(h):
    """Evenly spaced NumPy coordinates as their step (a float), else ``h`` unchanged.

    NumPy's gradient does the same: the uniform formula never reads the centre point, so a
    NaN there stays put, where the coordinate formula would multiply it by 0 and spread it.
    """
    if not isinstance(h, np.ndarray) or h.ndim != 1 or h.size < 2:  # a concrete (untraced) NumPy array
        return h
    steps = h[1:] - h[:-1]
    return float(steps[0]) if bool((steps == steps[0]).all()) else h


def _combine(terms):
    """sum of coefficient * value over ``terms``."""
    total = None
    for coefficient, value in terms:
        term = ew.multiply.bind(coefficient, value)
        total = term if total is None else ew.add.bind(total, term)
    return total


# --- repeat, tile, split ------------------------------------------------------------------------------
@implements(np.repeat)
def _repeat(a, repeats, axis=None):
    """NumPy's repeat: an int count by broadcasting a new axis; per-element counts (a
    concrete sequence) by gathering with a fixed index."""
    x = asarray(a)
    counts = fixed(repeats, "numpy.repeat (traced repeats)")
    if axis is None:
        x, axis = kcore.reshape.bind(x, shape=(-1,)), 0
    axis = normalize_axis(axis, x.ndim)[0]
    shape = tuple(x.shape)
    counts = np.asarray(counts)
    if counts.size == 1:
        count = int(counts.reshape(()))
        if count < 0:
            raise ValueError("repeat: repeats may not contain negative values")
        expanded = kcore.expand_dims.bind(x, axis=(axis + 1,))
        wide = kcore.broadcast_to.bind(expanded, shape=shape[:axis + 1] + (count,) + shape[axis + 1:])
        return kcore.reshape.bind(wide, shape=shape[:axis] + (shape[axis] * count,) + shape[axis + 1:])
    template, arrays = split_key((slice(None),) * axis + (np.repeat(np.arange(shape[axis]), counts),))
    return getitem.bind(x, *arrays, template=template)


@implements(np.tile)
def _tile(A, reps):
    """NumPy's tile: each axis ``s`` becomes ``(r, s)`` by broadcasting, then merged."""
    x = asarray(A)
    reps = (int(reps),) if not isinstance(reps, (tuple, list)) else tuple(int(r) for r in reps)
    rank = max(x.ndim, len(reps))
    reps = (1,) * (rank - len(reps)) + reps
    shape = (1,) * (rank - x.ndim) + tuple(x.shape)
    interleaved = kcore.reshape.bind(x, shape=tuple(n for size in shape for n in (1, size)))
    wide = kcore.broadcast_to.bind(interleaved, shape=tuple(n for r, size in zip(reps, shape) for n in (r, size)))
    return kcore.reshape.bind(wide, shape=tuple(r * size for r, size in zip(reps, shape)))


def _array_split(x, indices_or_sections, axis=0):
    """NumPy's array_split: a list of slices along ``axis``."""
    axis = normalize_axis(axis, x.ndim)[0]
    length = x.shape[axis]
    if isinstance(indices_or_sections, (tuple, list)) or getattr(indices_or_sections, "ndim", 0) > 0:
        bounds = [0] + [int(i) for i in indices_or_sections] + [length]
    else:
        sections = int(indices_or_sections)
        if sections <= 0:
            raise ValueError("array_split: number sections must be larger than 0")
        each, extra_count = divmod(length, sections)
        sizes = [each + 1] * extra_count + [each] * (sections - extra_count)
        bounds = [0]
        for size in sizes:
            bounds.append(bounds[-1] + size)
    pieces = []
    for start, stop in zip(bounds[:-1], bounds[1:]):
        start, stop, _ = slice(start, stop).indices(length)  # Python's slicing: clamped, negatives from the end
        pieces.append(getitem_static(x, (slice(None),) * axis + (slice(start, max(start, stop)), Ellipsis)))
    return pieces


@implements(np.split)
def _split_handler(ary, indices_or_sections, axis=0):
    return _split(asarray(ary), indices_or_sections, axis, "split")


def _split(x, indices_or_sections, axis, name):
    """NumPy's split: array_split, but a section count must divide the axis evenly."""
    points = fixed(indices_or_sections, f"numpy.{name} (traced split points)")
    if not (isinstance(points, (tuple, list)) or getattr(points, "ndim", 0) > 0):
        if x.shape[normalize_axis(axis, x.ndim)[0]] % int(points):
            raise ValueError("array split does not result in an equal division")
    return _array_split(x, points, axis)


@implements(np.array_split)
def _array_split_handler(ary, indices_or_sections, axis=0):
    return _array_split(asarray(ary), fixed(indices_or_sections, "numpy.array_split (traced split points)"), axis)


def _split_along(name, axis_of, minimum_ndim):
    """vsplit / hsplit / dsplit: np.split along the axis their name says."""

    def handler(ary, indices_or_sections):
        x = asarray(ary)
        if x.ndim < minimum_ndim:
            raise ValueError(f"numpy.{name} only works on arrays of {minimum_ndim} or more dimensions")
        return _split(x, indices_or_sections, axis_of(x), name)

    return handler


implements(np.vsplit)(_split_along("vsplit", lambda x: 0, 2))
implements(np.hsplit)(_split_along("hsplit", lambda x: 1 if x.ndim > 1 else 0, 1))
implements(np.dsplit)(_split_along("dsplit", lambda x: 2, 3))


# --- diagonals and triangles ---------------------------------------------------------------------------
def at_least_1d(v: Any, *others: Any) -> Any:
    """``v`` as an array: a list through NumPy, a scalar in the namespace of ``others``
    (a Python number beside array_api_strict arrays must not become a NumPy array)."""
    v = asarray(v)
    if not hasattr(v, "ndim"):
        arrays = [o for o in others if hasattr(o, "ndim")]
        v = namespace(*arrays).asarray(v) if arrays else np.asarray(v)
    return v


def diagonal(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    """NumPy's diagonal: the two axes leave and the diagonal becomes the last axis."""
    if x.ndim < 2:
        raise ValueError("diagonal: the array must have at least two dimensions")
    axes = normalize_axis((axis1, axis2), x.ndim)
    if axes[0] == axes[1]:
        raise ValueError("diagonal: axis1 and axis2 cannot be the same")
    return ks.matrix_diagonal.bind(kcore.moveaxis(x, axes, (-2, -1)), offset=int(offset))


@implements(np.diagonal)
def _diagonal(a, offset=0, axis1=0, axis2=1):
    return diagonal(asarray(a), offset, axis1, axis2)


def _diag(v, k):
    """A vector ``v`` placed on diagonal ``k`` of a square matrix of zeros, or diagonal
    ``k`` of a matrix ``v``.

    The vector is padded to a column of the matrix's size and selected on the diagonal by
    a constant mask: linear in ``v``, so it batches and differentiates through its parts.
    """
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ValueError("Input must be 1- or 2-d.")
    length = v.shape[0]
    size = length + abs(k)
    first_row = max(-k, 0)
    column = ki.pad.bind(v, pad_width=((first_row, size - first_row - length),), constant_values=((0, 0),))
    xp = namespace(v)
    mask = xp.eye(size, size, k=k, dtype=xp.bool, device=device_of(v))
    zero = False if dtype_kind(v.dtype) == "b" else 0
    return ew.where.bind(mask, kcore.expand_dims.bind(column, axis=(1,)), zero)


@implements(np.diag)
def _diag_handler(v, k=0):
    return _diag(at_least_1d(v), operator.index(k))


@implements(np.diagflat)
def _diagflat(v, k=0):
    """The flattened input on diagonal ``k``."""
    return _diag(kcore.reshape.bind(asarray(v), shape=(-1,)), operator.index(k))


def _as_matrix(x, name):
    """NumPy's tril/triu of a vector repeat it as the rows of a square matrix."""
    if x.ndim == 0:
        raise ValueError(f"{name}: the input must have at least one dimension")
    if x.ndim == 1:
        return kcore.broadcast_to.bind(x, shape=(x.shape[0], x.shape[0]))
    return x


@implements(np.tril)
def _tril(m, k=0):
    return ks.tril.bind(_as_matrix(asarray(m), "tril"), k=int(k))


@implements(np.triu)
def _triu(m, k=0):
    return ks.triu.bind(_as_matrix(asarray(m), "triu"), k=int(k))
