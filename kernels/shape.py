"""Shape primitives: reshape, transpose, expand/squeeze, broadcast, join, pad, roll...

Batch rules shift axes by one (the batch axis is physically first) and never
broadcast an unbatched value unless the result needs it (concatenate, stack).
Every primitive here is linear in its array argument(s): the JVP applies it to the
tangent and the VJP is its transpose, given beside it as one formula.
"""
from __future__ import annotations

import numpy as np
from array_api_compat import is_numpy_array

from .backend import device_of, dtype_kind, extra, namespace, normalize_axis
from .creation import zeros_like
from .primitive import Primitive

__all__ = [
    "reshape", "transpose", "moveaxis", "expand_dims", "squeeze", "broadcast_to",
    "concatenate", "stack", "pad", "pad_constant", "roll", "flip", "sliding_window_view", "diff",
    "gradient", "copy", "move_batch_axis_to_front", "broadcast_batch", "linear_rules",
    "differentiable_input", "matrix_diagonal", "diagonal", "lower_triangle", "upper_triangle", "tril",
    "triu", "repeat", "tile", "array_split", "split", "unravel_index", "diag", "diagflat",
]


def _shifted(axes):
    return tuple(a + 1 for a in axes)


# --- derivative rules of linear operations ------------------------------------------------
def linear_rules(prim, transpose):
    """Set the rules of ``prim``, linear in its first argument (the others are indices).

    The JVP applies ``prim`` to the tangent; the VJP is ``transpose(g, *primals,
    **params)``, the cotangent of the first argument.  Returns ``prim``.
    """

    def jvp(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        tangent = tangents[0]
        return out, None if tangent is None else prim.bind(tangent, *primals[1:], **params)

    def vjp(g, primals, out, **params):
        cotangent = transpose(g, *primals, **params) if differentiable_input(primals[0]) else None
        return (cotangent,) + (None,) * (len(primals) - 1)

    prim.jvp = jvp
    prim.vjp = vjp
    return prim


def differentiable_input(value):
    """Whether ``value`` can receive a cotangent: a floating or complex array, including
    the NumPy scalars that NumPy returns for 0-d results (Python numbers are constants)."""
    dtype = getattr(value, "dtype", None)
    return dtype is not None and dtype_kind(dtype) in "fc"


# --- reshape ----------------------------------------------------------------
def _reshape_impl(x, *, shape):
    return namespace(x).reshape(x, shape)


def _reshape_batch(axis_size, values, batched, *, shape):
    (x,) = values
    return reshape.bind(x, shape=(x.shape[0],) + tuple(shape)), True


reshape = linear_rules(Primitive("reshape", _reshape_impl, _reshape_batch),
                       lambda g, x, *, shape: reshape.bind(g, shape=tuple(x.shape)))


# --- transpose --------------------------------------------------------------
def _transpose_impl(x, *, axes):
    return namespace(x).permute_dims(x, axes)


def _transpose_batch(axis_size, values, batched, *, axes):
    return transpose.bind(values[0], axes=(0,) + _shifted(axes)), True


transpose = linear_rules(Primitive("transpose", _transpose_impl, _transpose_batch),
                         lambda g, x, *, axes: transpose.bind(g, axes=_inverse_permutation(axes)))


def _inverse_permutation(axes):
    inverse = [0] * len(axes)
    for position, axis in enumerate(axes):
        inverse[axis] = position
    return tuple(inverse)


def moveaxis(x, source, destination):
    ndim = x.ndim
    source = normalize_axis(source, ndim)
    destination = normalize_axis(destination, ndim)
    order = [a for a in range(ndim) if a not in source]
    for dest, src in sorted(zip(destination, source)):
        order.insert(dest, src)
    return transpose.bind(x, axes=tuple(order)) if order != list(range(ndim)) else x


# --- expand_dims / squeeze ----------------------------------------------------
def _expand_dims_impl(x, *, axis):
    shape = list(x.shape)
    for a in sorted(axis):
        shape.insert(a, 1)
    return namespace(x).reshape(x, tuple(shape))


def _expand_dims_batch(axis_size, values, batched, *, axis):
    return expand_dims.bind(values[0], axis=_shifted(axis)), True


expand_dims = linear_rules(Primitive("expand_dims", _expand_dims_impl, _expand_dims_batch),
                           lambda g, x, *, axis: reshape.bind(g, shape=tuple(x.shape)))


def _squeeze_impl(x, *, axis):
    return namespace(x).squeeze(x, axis=axis) if axis else x


def _squeeze_batch(axis_size, values, batched, *, axis):
    return squeeze.bind(values[0], axis=_shifted(axis)), True


squeeze = linear_rules(Primitive("squeeze", _squeeze_impl, _squeeze_batch),
                       lambda g, x, *, axis: reshape.bind(g, shape=tuple(x.shape)))


# --- broadcast_to -------------------------------------------------------------
def _broadcast_to_impl(x, *, shape):
    return namespace(x).broadcast_to(x, shape)


def _broadcast_to_batch(axis_size, values, batched, *, shape):
    (x,) = values
    missing = len(shape) - (x.ndim - 1)
    if missing:
        x = expand_dims.bind(x, axis=tuple(range(1, missing + 1)))
    return broadcast_to.bind(x, shape=(x.shape[0],) + tuple(shape)), True


def _sum_to_shape(g, x, *, shape):
    from .elementwise import unbroadcast

    return unbroadcast(g, x.shape)


broadcast_to = linear_rules(Primitive("broadcast_to", _broadcast_to_impl, _broadcast_to_batch), _sum_to_shape)


def broadcast_batch(x, axis_size):
    """An unbatched value repeated along a new leading batch axis of ``axis_size``."""
    x = expand_dims.bind(x, axis=(0,))
    return broadcast_to.bind(x, shape=(axis_size,) + tuple(x.shape[1:]))


def move_batch_axis_to_front(x, axis):
    """``x`` with its axis ``axis`` moved to position 0."""
    return moveaxis(x, axis, 0) if axis != 0 else x


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
    from .indexing import getitem_static

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
    from .indexing import getitem_static

    return tuple(getitem_static(g, (slice(None),) * axis + (i,)) if differentiable_input(x) else None
                 for i, x in enumerate(primals))


stack = Primitive("stack", _stack_impl, _stack_batch)
stack.jvp = _join_jvp(stack)
stack.vjp = _stack_vjp


# --- pad ----------------------------------------------------------------------
def _pad_impl(x, *, pad_width, constant_values):
    """Constant padding with array-API concatenation, axis by axis."""
    xp = namespace(x)
    for axis, ((before, after), (low, high)) in enumerate(zip(pad_width, constant_values)):
        pieces = []
        for count, value in ((before, low), (after, high)):
            shape = x.shape[:axis] + (count,) + x.shape[axis + 1:]
            pieces.append(xp.full(shape, value, dtype=x.dtype, device=device_of(x)) if count else None)
        if pieces[0] is not None or pieces[1] is not None:
            x = xp.concat([p for p in (pieces[0], x, pieces[1]) if p is not None], axis=axis)
    return x


def _pad_batch(axis_size, values, batched, *, pad_width, constant_values):
    return pad_constant.bind(values[0], pad_width=((0, 0),) + tuple(pad_width),
                             constant_values=((0, 0),) + tuple(constant_values)), True


def _pad_jvp(primals, tangents, *, pad_width, constant_values):
    """The border is constant: the tangent is padded with zeros."""
    out = pad_constant.bind(primals[0], pad_width=pad_width, constant_values=constant_values)
    tangent = tangents[0]
    if tangent is None:
        return out, None
    return out, pad_constant.bind(tangent, pad_width=pad_width, constant_values=((0, 0),) * len(pad_width))


def _pad_transpose(g, x, *, pad_width, constant_values):
    from .indexing import getitem_static

    return getitem_static(g, tuple(slice(before, before + size) for (before, _), size in zip(pad_width, x.shape)))


pad_constant = linear_rules(Primitive("pad", _pad_impl, _pad_batch), _pad_transpose)
pad_constant.jvp = _pad_jvp


def pad(x, pad_width, mode="constant", constant_values=0):
    """NumPy's pad for modes constant, edge, reflect, symmetric and wrap.

    ``pad_width`` and ``constant_values`` are one ``(before, after)`` pair per axis.
    Modes other than constant gather along each axis with a fixed index array.
    """
    if mode == "constant":
        return pad_constant.bind(x, pad_width=pad_width, constant_values=constant_values)
    from .indexing import getitem_static

    for axis, (before, after) in enumerate(pad_width):
        if before or after:
            index = _pad_index(x.shape[axis], before, after, mode)
            key = (slice(None),) * axis + (index,)
            x = getitem_static(x, key)
    return x


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
    if mode == "symmetric":
        period = 2 * size
        folded = position % period
        return np.where(folded < size, folded, period - 1 - folded)
    raise ValueError(f"pad: mode {mode!r} is not supported")


# --- roll / flip ----------------------------------------------------------------
def _roll_impl(x, *, shift, axis):
    return namespace(x).roll(x, shift, axis=axis)


def _roll_batch(axis_size, values, batched, *, shift, axis):
    (x,) = values
    if axis is None:
        shape = tuple(x.shape)
        flat = reshape.bind(x, shape=(shape[0], -1))
        return reshape.bind(roll.bind(flat, shift=shift, axis=(1,)), shape=shape), True
    return roll.bind(x, shift=shift, axis=_shifted(axis)), True


def _negated(shift):
    return tuple(-s for s in shift) if isinstance(shift, (tuple, list)) else -shift


roll = linear_rules(Primitive("roll", _roll_impl, _roll_batch),
                    lambda g, x, *, shift, axis: roll.bind(g, shift=_negated(shift), axis=axis))


def _flip_impl(x, *, axis):
    return namespace(x).flip(x, axis=axis)


def _flip_batch(axis_size, values, batched, *, axis):
    return flip.bind(values[0], axis=_shifted(axis)), True


flip = linear_rules(Primitive("flip", _flip_impl, _flip_batch), lambda g, x, *, axis: flip.bind(g, axis=axis))


# --- sliding windows -------------------------------------------------------------
def _sliding_window_impl(x, *, window_shape, axis):
    xp = namespace(x)
    if xp.__name__.endswith("numpy") or xp.__name__.endswith("cupy"):
        lib = __import__(xp.__name__.rsplit(".", 1)[-1])
        return lib.lib.stride_tricks.sliding_window_view(x, window_shape, axis=axis)
    return extra(xp, "sliding_window_view")(x, window_shape, axis)


def _sliding_window_batch(axis_size, values, batched, *, window_shape, axis):
    return sliding_window_view.bind(values[0], window_shape=window_shape, axis=_shifted(axis)), True


def _sliding_window_transpose(g, x, *, window_shape, axis):
    """Add every window back onto the positions it viewed.

    Per windowed axis (the last window axis first): offset ``k`` of the windows is
    the input shifted by ``k``, so its cotangent is ``g[..., k]`` padded by ``k``
    before and ``size - 1 - k`` after (on NumPy, faster than a scatter-add with ``np.add.at``).
    """
    from .elementwise import add
    from .indexing import getitem_static

    for size, ax in reversed(list(zip(window_shape, axis))):
        total = None
        for k in range(size):
            pad_width = tuple((k, size - 1 - k) if a == ax else (0, 0) for a in range(g.ndim - 1))
            term = pad_constant.bind(getitem_static(g, (Ellipsis, k)), pad_width=pad_width,
                                     constant_values=((0, 0),) * len(pad_width))
            total = term if total is None else add.bind(total, term)
        g = total
    return g


sliding_window_view = linear_rules(
    Primitive("sliding_window_view", _sliding_window_impl, _sliding_window_batch), _sliding_window_transpose)


# --- copy ---------------------------------------------------------------------------
def _copy_impl(x):
    return namespace(x).asarray(x, copy=True)


def _copy_batch(axis_size, values, batched):
    return copy.bind(values[0]), True


copy = linear_rules(Primitive("copy", _copy_impl, _copy_batch), lambda g, x: g)


# --- composites -----------------------------------------------------------------------
def diff(x, n=1, axis=-1, prepend=None, append=None):
    """Differences along ``axis``, ``n`` times (NumPy semantics)."""
    from . import elementwise as ew
    from .indexing import getitem_static

    axis = normalize_axis(axis, x.ndim)[0]
    if prepend is not None or append is not None:
        edge = [slice(None)] * x.ndim
        edge[axis] = slice(0, 1)
        template = getitem_static(x, tuple(edge))

        def block(value):
            if getattr(value, "ndim", 0) == 0:
                return ew.where.bind(True, value, template)
            return value

        parts = [block(prepend)] if prepend is not None else []
        parts.append(x)
        if append is not None:
            parts.append(block(append))
        x = concatenate.bind(*parts, axis=axis)
    for _ in range(n):
        upper = [slice(None)] * x.ndim
        lower = [slice(None)] * x.ndim
        upper[axis] = slice(1, None)
        lower[axis] = slice(None, -1)
        x = ew.subtract.bind(getitem_static(x, tuple(upper)), getitem_static(x, tuple(lower)))
    return x


def gradient(x, *varargs, axis=None, edge_order=1):
    """Second-order central differences inside, first-order at the edges (NumPy's)."""
    from . import elementwise as ew
    from .indexing import getitem_static

    if edge_order not in (1, 2):
        raise ValueError("gradient: edge_order must be 1 or 2")
    axes = normalize_axis(axis, x.ndim)
    if not varargs:
        spacings = [1.0] * len(axes)
    elif len(varargs) == 1:
        spacings = list(varargs) * len(axes)
    else:
        spacings = list(varargs)
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
                first = _combine(ew, [(-1.5 / h, part(0, 1)), (2.0 / h, part(1, 2)), (-0.5 / h, part(2, 3))])
                last = _combine(ew, [(0.5 / h, part(-3, -2)), (-2.0 / h, part(-2, -1)), (1.5 / h, part(-1, None))])
        else:
            # coordinates given: NumPy's non-uniform second-order formula
            coords = h
            dx = ew.subtract.bind(getitem_static(coords, (slice(1, None),)), getitem_static(coords, (slice(None, -1),)))
            shape = [1] * x.ndim
            shape[ax] = -1
            dx1 = reshape.bind(getitem_static(dx, (slice(None, -1),)), shape=tuple(shape))
            dx2 = reshape.bind(getitem_static(dx, (slice(1, None),)), shape=tuple(shape))
            total = ew.add.bind(dx1, dx2)
            a = ew.negative.bind(ew.divide.bind(dx2, ew.multiply.bind(dx1, total)))
            b = ew.divide.bind(ew.subtract.bind(dx2, dx1), ew.multiply.bind(dx1, dx2))
            c = ew.divide.bind(dx1, ew.multiply.bind(dx2, total))
            interior = ew.add.bind(
                ew.add.bind(ew.multiply.bind(a, part(None, -2)), ew.multiply.bind(b, part(1, -1))),
                ew.multiply.bind(c, part(2, None)),
            )
            def spacing(i):
                return reshape.bind(getitem_static(dx, (slice(i, i + 1 if i != -1 else None),)), shape=tuple(shape))

            if edge_order == 1:
                first = ew.divide.bind(ew.subtract.bind(part(1, 2), part(0, 1)), spacing(0))
                last = ew.divide.bind(ew.subtract.bind(part(-1, None), part(-2, -1)), spacing(-1))
            else:
                d1, d2 = spacing(0), spacing(1)
                span = ew.add.bind(d1, d2)
                first = _combine(ew, [
                    (ew.negative.bind(ew.divide.bind(ew.add.bind(ew.multiply.bind(2.0, d1), d2), ew.multiply.bind(d1, span))), part(0, 1)),
                    (ew.divide.bind(span, ew.multiply.bind(d1, d2)), part(1, 2)),
                    (ew.negative.bind(ew.divide.bind(d1, ew.multiply.bind(d2, span))), part(2, 3)),
                ])
                d1, d2 = spacing(-2), spacing(-1)
                span = ew.add.bind(d1, d2)
                last = _combine(ew, [
                    (ew.divide.bind(d2, ew.multiply.bind(d1, span)), part(-3, -2)),
                    (ew.negative.bind(ew.divide.bind(span, ew.multiply.bind(d1, d2))), part(-2, -1)),
                    (ew.divide.bind(ew.add.bind(ew.multiply.bind(2.0, d2), d1), ew.multiply.bind(d2, span)), part(-1, None)),
                ])
        result = concatenate.bind(first, interior, last, axis=ax)
        if dtype_kind(x.dtype) in "fc" and result.dtype != x.dtype:  # NumPy keeps a float32 f
            result = ew.astype.bind(result, dtype=x.dtype)
        results.append(result)
    return results[0] if len(results) == 1 else results


def _uniform_step(h):
    """Evenly spaced NumPy coordinates as their step (a float), else ``h`` unchanged.

    NumPy's gradient does the same: the uniform formula never reads the centre point, so a
    NaN there stays put, where the coordinate formula would multiply it by 0 and spread it.
    """
    if not is_numpy_array(h) or h.ndim != 1 or h.size < 2:
        return h
    steps = h[1:] - h[:-1]
    return float(steps[0]) if bool((steps == steps[0]).all()) else h


def _combine(ew, terms):
    """sum of coefficient * value over ``terms``."""
    total = None
    for coefficient, value in terms:
        term = ew.multiply.bind(coefficient, value)
        total = term if total is None else ew.add.bind(total, term)
    return total


# --- diagonals and triangles of the last two axes -------------------------------------
def _matrix_diagonal_impl(x, *, offset):
    return namespace(x).linalg.diagonal(x, offset=offset)


def _matrix_diagonal_batch(axis_size, values, batched, *, offset):
    return matrix_diagonal.bind(values[0], offset=offset), True


def _diagonal_transpose(g, x, *, offset):
    """The diagonal ``g`` written into zeros of ``x``'s shape: ``g`` padded to a column of
    the row count, then selected on the ``offset`` diagonal by a constant mask."""
    from .elementwise import where

    rows, columns = x.shape[-2], x.shape[-1]
    length = g.shape[-1]
    if length == 0:
        return zeros_like.bind(x, dtype=g.dtype)
    first_row = max(-offset, 0)
    pad_width = ((0, 0),) * (g.ndim - 1) + ((first_row, rows - first_row - length),)
    column = pad_constant.bind(g, pad_width=pad_width, constant_values=((0, 0),) * g.ndim)
    column = expand_dims.bind(column, axis=(column.ndim,))
    xp = namespace(g)
    mask = xp.eye(rows, columns, k=offset, dtype=xp.bool, device=device_of(g))
    return where.bind(mask, column, 0)


matrix_diagonal = linear_rules(Primitive("diagonal", _matrix_diagonal_impl, _matrix_diagonal_batch),
                               _diagonal_transpose)


def diagonal(x, offset=0, axis1=0, axis2=1):
    """NumPy's diagonal: the two axes leave and the diagonal becomes the last axis."""
    if x.ndim < 2:
        raise ValueError("diagonal: the array must have at least two dimensions")
    axes = normalize_axis((axis1, axis2), x.ndim)
    if axes[0] == axes[1]:
        raise ValueError("diagonal: axis1 and axis2 cannot be the same")
    return matrix_diagonal.bind(moveaxis(x, axes, (-2, -1)), offset=int(offset))


def _triangle(name):
    """tril / triu: a projection onto a triangle, its own transpose."""

    def impl(x, *, k):
        return getattr(namespace(x), name)(x, k=k)

    def batch(axis_size, values, batched, *, k):
        return prim.bind(values[0], k=k), True

    prim = linear_rules(Primitive(name, impl, batch), lambda g, x, *, k: prim.bind(g, k=k))
    return prim


def diag(v, k=0):
    """NumPy's diag: a vector ``v`` placed on diagonal ``k`` of a square matrix of zeros,
    or diagonal ``k`` of a matrix ``v``.

    The vector is padded to a column of the matrix's size and selected on the diagonal by
    a constant mask: linear in ``v``, so it batches and differentiates through its parts.
    """
    from .elementwise import where

    k = int(k)
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ValueError("Input must be 1- or 2-d.")
    length = v.shape[0]
    size = length + abs(k)
    first_row = max(-k, 0)
    column = pad_constant.bind(v, pad_width=((first_row, size - first_row - length),),
                               constant_values=((0, 0),))
    xp = namespace(v)
    mask = xp.eye(size, size, k=k, dtype=xp.bool, device=device_of(v))
    return where.bind(mask, expand_dims.bind(column, axis=(1,)), False if dtype_kind(v.dtype) == "b" else 0)


def diagflat(v, k=0):
    """NumPy's diagflat: the flattened input on diagonal ``k``."""
    return diag(reshape.bind(v, shape=(-1,)), k)


lower_triangle = _triangle("tril")
upper_triangle = _triangle("triu")


def tril(x, k=0):
    return lower_triangle.bind(_as_matrix(x, "tril"), k=int(k))


def triu(x, k=0):
    return upper_triangle.bind(_as_matrix(x, "triu"), k=int(k))


def _as_matrix(x, name):
    """NumPy's tril/triu of a vector repeat it as the rows of a square matrix."""
    if x.ndim == 0:
        raise ValueError(f"{name}: the input must have at least one dimension")
    if x.ndim == 1:
        return broadcast_to.bind(x, shape=(x.shape[0], x.shape[0]))
    return x


# --- repeat, tile, split -----------------------------------------------------------------
def repeat(x, repeats, axis=None):
    """NumPy's repeat: an int count by broadcasting a new axis; per-element counts (a
    concrete sequence) by gathering with a fixed index."""
    from .indexing import getitem, split_key

    if axis is None:
        x, axis = reshape.bind(x, shape=(-1,)), 0
    axis = normalize_axis(axis, x.ndim)[0]
    shape = tuple(x.shape)
    counts = np.asarray(repeats)
    if counts.size == 1:
        count = int(counts.reshape(()))
        if count < 0:
            raise ValueError("repeat: repeats may not contain negative values")
        expanded = expand_dims.bind(x, axis=(axis + 1,))
        wide = broadcast_to.bind(expanded, shape=shape[:axis + 1] + (count,) + shape[axis + 1:])
        return reshape.bind(wide, shape=shape[:axis] + (shape[axis] * count,) + shape[axis + 1:])
    template, arrays = split_key((slice(None),) * axis + (np.repeat(np.arange(shape[axis]), counts),))
    return getitem.bind(x, *arrays, template=template)


def tile(x, reps):
    """NumPy's tile: each axis ``s`` becomes ``(r, s)`` by broadcasting, then merged."""
    reps = (int(reps),) if not isinstance(reps, (tuple, list)) else tuple(int(r) for r in reps)
    rank = max(x.ndim, len(reps))
    reps = (1,) * (rank - len(reps)) + reps
    shape = (1,) * (rank - x.ndim) + tuple(x.shape)
    interleaved = reshape.bind(x, shape=tuple(n for size in shape for n in (1, size)))
    wide = broadcast_to.bind(interleaved, shape=tuple(n for r, size in zip(reps, shape) for n in (r, size)))
    return reshape.bind(wide, shape=tuple(r * size for r, size in zip(reps, shape)))


def array_split(x, indices_or_sections, axis=0):
    """NumPy's array_split: a list of slices along ``axis``."""
    from .indexing import getitem_static

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


def split(x, indices_or_sections, axis=0):
    """NumPy's split: array_split, but a section count must divide the axis evenly."""
    if not (isinstance(indices_or_sections, (tuple, list)) or getattr(indices_or_sections, "ndim", 0) > 0):
        if x.shape[normalize_axis(axis, x.ndim)[0]] % int(indices_or_sections):
            raise ValueError("array split does not result in an equal division")
    return array_split(x, indices_or_sections, axis)


# --- flat indices ---------------------------------------------------------------------------
def unravel_index(indices, shape, order="C"):
    """NumPy's unravel_index: one integer array of positions per axis of ``shape``."""
    from . import elementwise as ew

    dims = (int(shape),) if not isinstance(shape, (tuple, list)) else tuple(int(s) for s in shape)
    if order not in ("C", "F"):
        raise ValueError("unravel_index: only 'C' or 'F' order is permitted")
    xp = namespace(indices)
    indices = ew.astype.bind(indices, dtype=xp.int64)
    strides = []
    for axis in range(len(dims)):
        rest = dims[axis + 1:] if order == "C" else dims[:axis]
        stride = 1
        for size in rest:
            stride *= size
        strides.append(stride)
    return tuple(ew.remainder.bind(ew.floor_divide.bind(indices, stride) if stride != 1 else indices, size)
                 for stride, size in zip(strides, dims))
