"""Shape primitives beyond the core: join, roll, flip, sliding windows, diagonals and
triangles of the last two axes (``pad``, the transpose of a slice, is in indexing.py).

Batch rules shift axes by one (the batch axis is physically first) and never
broadcast an unbatched value unless the result needs it (concatenate, stack).
Every primitive here is linear in its array argument(s): the JVP applies it to the
tangent and the VJP is its transpose, given beside it as one formula.
"""
from __future__ import annotations

import math

import numpy as np

from . import buffers
from .backend import backend_named, device_of, extra, namespace, namespace_library, numpy_namespace
from .core import broadcast_batch, differentiable_input, expand_dims, linear_rules, reshape, shifted
from .creation import zeros_like
from .elementwise import add, negative, where
from .indexing import getitem_static, pad
from .primitive import Primitive

__all__ = ["add_rolled", "concatenate", "stack", "roll", "roll_copy", "flip", "sliding_window_view", "matrix_diagonal",
           "tril", "triu"]


# --- concatenate / stack --------------------------------------------------------
def _concatenate_impl(*arrays, axis):
    xp = namespace(*arrays)
    if axis is None:
        arrays = [xp.reshape(a, (-1,)) for a in arrays]
        axis = 0
    return xp.concat(arrays, axis=axis)


def _join_inputs(axis_size, values, batched):
    return [v if b else broadcast_batch(v, axis_size) for v, b in zip(values, batched)]


def _concatenate_batch(axis_size, values, batched, *, axis):
    values = _join_inputs(axis_size, values, batched)
    if axis is None:
        values = [reshape.bind(v, shape=(axis_size, -1)) for v in values]
        axis = 0
    return concatenate.bind(*values, axis=axis + 1), True


def _join_jvp(prim):
    """JVP of a join: the join of the tangents, zeros standing in for constants."""

    def jvp(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        given = [t for t in tangents if t is not None]
        if not given:
            return out, None
        dtype = given[0].dtype
        filled = [zeros_like.bind(p, dtype=dtype) if t is None else t for p, t in zip(primals, tangents)]
        return out, prim.bind(*filled, **params)

    return jvp


def _concatenate_vjp(g, primals, out, *, axis):
    """Each input's cotangent is its block of ``g``, sliced back out along ``axis``."""
    if axis is None:
        g, along = reshape.bind(g, shape=(-1,)), 0
    else:
        along = axis
    cotangents, start = [], 0
    for x in primals:
        stop = start + (x.size if axis is None else x.shape[axis])
        block = getitem_static(g, (slice(None),) * along + (slice(start, stop),))
        cotangents.append(reshape.bind(block, shape=tuple(x.shape)) if differentiable_input(x) else None)
        start = stop
    return tuple(cotangents)


concatenate = Primitive("concatenate", _concatenate_impl, _concatenate_batch)
concatenate.jvp = _join_jvp(concatenate)
concatenate.vjp = _concatenate_vjp


def _stack_impl(*arrays, axis):
    return namespace(*arrays).stack(arrays, axis=axis)


def _stack_batch(axis_size, values, batched, *, axis):
    return stack.bind(*_join_inputs(axis_size, values, batched), axis=axis + 1), True


def _stack_vjp(g, primals, out, *, axis):
    return tuple(getitem_static(g, (slice(None),) * axis + (i,)) if differentiable_input(x) else None
                 for i, x in enumerate(primals))


stack = Primitive("stack", _stack_impl, _stack_batch)
stack.jvp = _join_jvp(stack)
stack.vjp = _stack_vjp


# --- roll / flip ----------------------------------------------------------------
def _roll_impl(x, *, shift, axis):
    xp = namespace(x)
    if (xp is numpy_namespace and type(x) is np.ndarray and axis is not None and len(axis) == 1
            and x.nbytes >= buffers.MIN_BYTES and x.flags.c_contiguous):  # (np.roll keeps other layouts)
        return _roll_into(x, shift[0] if isinstance(shift, (tuple, list)) else shift, axis[0])
    return xp.roll(x, shift, axis=axis)


def _roll_into(x, shift, axis):
    """``np.roll`` along one axis into kept memory (:func:`buffers.empty`)."""
    return roll_copy(x, shift, axis, buffers.empty(x.shape, x.dtype))


def roll_copy(x: np.ndarray, shift: int, axis: int, out: np.ndarray) -> np.ndarray:
    """``np.roll(x, shift, axis)`` of one axis written into ``out``: two copies.

    C-ordered arrays move as one contiguous copy: every element ``k`` places along (``k``
    the shift times the size of the axes after ``axis``, or back by the rest of the row
    where that is shorter), which puts all but the wrapped elements of each row where they
    belong; a second copy puts the wrapped ones, ``k`` (or the rest) per row.  Copying row
    by row instead reads and writes addresses a few bytes apart modulo 4 KiB (a store is
    taken for a load's dependency: ``out[:, 1:] = x[:, :-1]`` of a (400, 400) array ran
    ten times slower than the whole contiguous copy; :func:`buffers.copy_into` keeps the
    contiguous copy clear of glibc's slow case)."""
    size = x.shape[axis]
    step = shift % size if size else 0
    if step and x.size and x.flags.c_contiguous and out.flags.c_contiguous and x.shape == out.shape:
        row = math.prod(x.shape[axis:])  # one row: the axis and everything after it
        rows_x, rows_out = x.reshape(-1, row), out.reshape(-1, row)
        flat_x, flat_out = x.reshape(-1), out.reshape(-1)
        forward = step * (row // size)
        back = row - forward
        if forward <= back:
            buffers.copy_into(flat_out[forward:], flat_x[:flat_x.size - forward])
            rows_out[:, :forward] = rows_x[:, back:]
        else:
            buffers.copy_into(flat_out[:flat_out.size - back], flat_x[back:])
            rows_out[:, forward:] = rows_x[:, :back]
        return out
    head = (slice(None),) * axis
    out[head + (slice(step, None),)] = x[head + (slice(None, size - step),)]
    out[head + (slice(None, step),)] = x[head + (slice(size - step, None),)]
    return out


def _roll_batch(axis_size, values, batched, *, shift, axis):
    (x,) = values
    if axis is None:
        shape = tuple(x.shape)
        flat = reshape.bind(x, shape=(shape[0], -1))
        return reshape.bind(roll.bind(flat, shift=shift, axis=(1,)), shape=shape), True
    return roll.bind(x, shift=shift, axis=shifted(axis)), True


def _negated(shift):
    return tuple(-s for s in shift) if isinstance(shift, (tuple, list)) else -shift


roll = linear_rules(Primitive("roll", _roll_impl, _roll_batch),
                    lambda g, x, *, shift, axis: roll.bind(g, shift=_negated(shift), axis=axis),
                    rearranges=True)


# --- a sum with a rolled term: a reverse pass's cotangent of a roll, added where it sums ------------
def _add_rolled_impl(total, value, *, shift, axis, negate, inplace):
    """``total + roll(value, shift, axis)`` (``-`` where ``negate``): each element one
    addition, so the bits of ``add(total, roll(value))``.  On C-ordered NumPy arrays of one
    shape and dtype, one pass: every element takes the one ``shift`` places back (or, for
    a shift past half the row, the one ``size - shift`` places ahead) in the flattened
    array, which is right but for the places of each row along ``axis`` that wrap around,
    put right after (no rolled copy made first).  ``inplace``:
    into ``total`` where it is a temporary of the caller's own (:func:`buffers.owns`)."""
    xp = namespace(total, value)
    if (xp is numpy_namespace and type(total) is np.ndarray and type(value) is np.ndarray and total.ndim
            and total.shape == value.shape and total.dtype == value.dtype and total.flags.c_contiguous
            and value.flags.c_contiguous and total.size):
        operation = np.subtract if negate else np.add
        size = total.shape[axis]
        step = shift % size
        into = inplace and total.flags.writeable and buffers.owns(total)
        out = total if into else buffers.empty(total.shape, total.dtype)
        if step == 0:
            return operation(total, value, out=out)
        row = math.prod(total.shape[axis:])
        forward = step * (row // size)  # the places an element moves along its row
        back = row - forward
        rows_total, rows_value, rows_out = total.reshape(-1, row), value.reshape(-1, row), out.reshape(-1, row)
        flat_total, flat_value, flat_out = total.reshape(-1), value.reshape(-1), out.reshape(-1)
        end = flat_value.size
        if forward <= back:  # all but the first `forward` places of each row, then those
            wrapped = rows_total[:, :forward].copy() if into else rows_total[:, :forward]  # before the pass writes them
            operation(flat_total[forward:], flat_value[:end - forward], out=flat_out[forward:])
            operation(wrapped, rows_value[:, back:], out=rows_out[:, :forward])
        else:  # the same from the other end: all but the last `back` places of each row, then those
            wrapped = rows_total[:, forward:].copy() if into else rows_total[:, forward:]
            operation(flat_total[:end - back], flat_value[back:], out=flat_out[:end - back])
            operation(wrapped, rows_value[:, :back], out=rows_out[:, forward:])
        return out
    rolled = xp.roll(value, shift, axis=axis)
    return xp.subtract(total, rolled) if negate else xp.add(total, rolled)


def _add_rolled_batch(axis_size, values, batched, *, shift, axis, negate, inplace):
    total, value = (v if b else broadcast_batch(v, axis_size) for v, b in zip(values, batched))
    return add_rolled.bind(total, value, shift=shift, axis=axis + 1, negate=negate, inplace=inplace), True


def _add_rolled_jvp(primals, tangents, *, shift, axis, negate, inplace):
    out = add_rolled.bind(*primals, shift=shift, axis=axis, negate=negate, inplace=False)
    t_total, t_value = tangents
    if t_value is None:
        return out, t_total
    if t_total is None:
        rolled = roll.bind(t_value, shift=(shift,), axis=(axis,))
        return out, negative.bind(rolled) if negate else rolled
    return out, add_rolled.bind(t_total, t_value, shift=shift, axis=axis, negate=negate, inplace=False)


def _add_rolled_vjp(g, primals, out, *, shift, axis, negate, inplace):
    total, value = primals
    back = roll.bind(g, shift=(-shift,), axis=(axis,)) if differentiable_input(value) else None
    return (g if differentiable_input(total) else None,
            None if back is None else negative.bind(back) if negate else back)


# ``total + roll(value, shift, axis)`` in one pass (``-`` for ``negate``): what a reverse pass
# sums where a roll's cotangent meets the others of its argument (engine/reverse.py)
add_rolled = Primitive("add_rolled", _add_rolled_impl, _add_rolled_batch, _add_rolled_jvp, _add_rolled_vjp)
add_rolled.keeps = lambda count, traced: ((), False)


def _flip_impl(x, *, axis):
    return namespace(x).flip(x, axis=axis)


def _flip_batch(axis_size, values, batched, *, axis):
    return flip.bind(values[0], axis=shifted(axis)), True


flip = linear_rules(Primitive("flip", _flip_impl, _flip_batch), lambda g, x, *, axis: flip.bind(g, axis=axis),
                    rearranges=True)


# --- sliding windows -------------------------------------------------------------
def _sliding_window_impl(x, *, window_shape, axis):
    xp = namespace(x)
    backend = backend_named(namespace_library(xp))
    if backend.window_axes_ascending and len(axis) > 1 and list(axis) != sorted(axis):
        # CuPy's orders the window dims of axes given out of order unlike NumPy's (seen on
        # CuPy 14): ask in ascending order, then put the window dims in the order asked
        order = sorted(range(len(axis)), key=lambda i: axis[i])
        view = _sliding_window_impl(x, window_shape=tuple(window_shape[i] for i in order),
                                    axis=tuple(axis[i] for i in order))
        return xp.permute_dims(view, tuple(range(x.ndim)) + tuple(x.ndim + order.index(i) for i in range(len(axis))))
    if backend.strided_views:  # the library's own (NumPy's, CuPy's): a strided view, no copy
        return backend.module.lib.stride_tricks.sliding_window_view(x, window_shape, axis=axis)
    return extra(xp, "sliding_window_view")(x, window_shape, axis)


def _sliding_window_batch(axis_size, values, batched, *, window_shape, axis):
    return sliding_window_view.bind(values[0], window_shape=window_shape, axis=shifted(axis)), True


def _sliding_window_transpose(g, x, *, window_shape, axis):
    """Add every window back onto the positions it viewed.

    Per windowed axis (the last window axis first): offset ``k`` of the windows is
    the input shifted by ``k``, so its cotangent is ``g[..., k]`` padded by ``k``
    before and ``size - 1 - k`` after (on NumPy, faster than a scatter-add with ``np.add.at``).
    """
    for size, ax in reversed(list(zip(window_shape, axis))):
        total = None
        for k in range(size):
            pad_width = tuple((k, size - 1 - k) if a == ax else (0, 0) for a in range(g.ndim - 1))
            term = pad.bind(getitem_static(g, (Ellipsis, k)), pad_width=pad_width,
                                     constant_values=((0, 0),) * len(pad_width))
            total = term if total is None else add.bind(total, term)
        g = total
    return g


sliding_window_view = linear_rules(
    Primitive("sliding_window_view", _sliding_window_impl, _sliding_window_batch), _sliding_window_transpose)


# --- diagonals and triangles of the last two axes -------------------------------------
def _matrix_diagonal_impl(x, *, offset):
    return namespace(x).linalg.diagonal(x, offset=offset)


def _matrix_diagonal_batch(axis_size, values, batched, *, offset):
    return matrix_diagonal.bind(values[0], offset=offset), True


def _diagonal_transpose(g, x, *, offset):
    """The diagonal ``g`` written into zeros of ``x``'s shape: ``g`` padded to a column of
    the row count, then selected on the ``offset`` diagonal by a constant mask."""
    rows, columns = x.shape[-2], x.shape[-1]
    length = g.shape[-1]
    if length == 0:
        return zeros_like.bind(x, dtype=g.dtype)
    first_row = max(-offset, 0)
    pad_width = ((0, 0),) * (g.ndim - 1) + ((first_row, rows - first_row - length),)
    column = pad.bind(g, pad_width=pad_width, constant_values=((0, 0),) * g.ndim)
    column = expand_dims.bind(column, axis=(column.ndim,))
    xp = namespace(g)
    mask = xp.eye(rows, columns, k=offset, dtype=xp.bool, device=device_of(g))
    return where.bind(mask, column, 0)


matrix_diagonal = linear_rules(Primitive("matrix_diagonal", _matrix_diagonal_impl, _matrix_diagonal_batch),
                               _diagonal_transpose)


def _triangle(name):
    """tril / triu: a projection onto a triangle, its own transpose."""

    def impl(x, *, k):
        return getattr(namespace(x), name)(x, k=k)

    def batch(axis_size, values, batched, *, k):
        return prim.bind(values[0], k=k), True

    prim = linear_rules(Primitive(name, impl, batch), lambda g, x, *, k: prim.bind(g, k=k))
    return prim


tril = _triangle("tril")
triu = _triangle("triu")
