"""The structural core: the primitives and helpers that every family's rules use.

Reshaping, transposing, adding and dropping unit axes, broadcasting, copying and
summing over axes are what batch rules and derivative rules are written with (moving
the batch axis, undoing broadcasting, spreading a reduction's cotangent back).  They
live here, at the bottom of ``kernels/``, so that every family module imports them and
none imports another family for its helpers.

Every primitive here is linear in its array argument: the JVP applies it to the
tangent, the VJP is its transpose, given beside it as one formula (:func:`linear_rules`).
"""
from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .backend import dtype_kind, namespace, namespace_dtype, normalize_axis, numpy_namespace
from .primitive import Primitive

__all__ = [
    "Negated", "linear_rules", "differentiable_input", "shifted", "inverse_permutation",
    "reshape", "transpose", "moveaxis", "axes_last", "expand_dims", "squeeze", "broadcast_to", "copy",
    "axis_reduction", "reduce_sum", "keep_reduced", "unreduce", "reduced_size",
    "unbroadcast", "broadcast_batch", "move_batch_axis_to_front",
]


# --- derivative rules of linear operations ------------------------------------------------
class Negated:
    """A cotangent ``-value`` that is not computed yet: what a reverse pass hands on where a
    rule's partial derivative is -1 (``a - b``, ``-x``).  The pass subtracts it where it sums
    cotangents, and a rule that only moves the elements of its cotangent (reshape,
    transpose, roll: ``rearranges``) pulls back ``value`` and keeps the sign deferred, bit
    for bit the same (``a + (-b)`` is ``a - b`` in IEEE arithmetic, a moved ``-g`` is ``-``
    the moved ``g``).  Only a ``vjp.signed`` rule receives or returns one (see
    :class:`primitive.Primitive`); anywhere else the pass computes ``negative(value)``."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"Negated({self.value!r})"


def linear_rules(prim: Primitive, transpose_rule: Callable[..., Any], rearranges: bool = False) -> Primitive:
    """Set the rules of ``prim``, linear in its first argument (the others are indices).

    The JVP applies ``prim`` to the tangent; the VJP is ``transpose_rule(g, *primals,
    **params)``, the cotangent of the first argument.  ``rearranges``: each element of that
    cotangent is one element of ``g``, moved (no sum, no zero filled in): then the VJP of a
    :class:`Negated` cotangent is the :class:`Negated` VJP.  Returns ``prim``.
    """

    def jvp(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        tangent = tangents[0]
        return out, None if tangent is None else prim.bind(tangent, *primals[1:], **params)

    def vjp(g, primals, out, **params):
        cotangent = transpose_rule(g, *primals, **params) if differentiable_input(primals[0]) else None
        return (cotangent,) + (None,) * (len(primals) - 1)

    if rearranges:
        def signed(g, primals, out, wanted, **params):
            if type(g) is not Negated:
                return vjp(g, primals, out, **params)
            cotangent = transpose_rule(g.value, *primals, **params) if differentiable_input(primals[0]) else None
            return (None if cotangent is None else Negated(cotangent),) + (None,) * (len(primals) - 1)

        vjp.signed = signed

    prim.jvp = jvp
    prim.vjp = vjp
    prim.keeps = keeps_indices
    return prim


def keeps_indices(count: int, traced: Any) -> tuple[range, bool]:
    """What the VJP of a linear rule reads: the index arguments, not the value (its shape
    only) nor the output."""
    return range(1, count), False


def differentiable_input(value: Any) -> bool:
    """Whether ``value`` can receive a cotangent: a floating or complex array, including
    the NumPy scalars that NumPy returns for 0-d results (Python numbers are constants)."""
    dtype = getattr(value, "dtype", None)
    return dtype is not None and dtype_kind(dtype) in "fc"


def shifted(axes: Iterable[int]) -> tuple[int, ...]:
    """``axes`` of a logical value as axes of its batched value (the batch axis is 0)."""
    return tuple(a + 1 for a in axes)


def inverse_permutation(axes: Sequence[int]) -> tuple[int, ...]:
    inverse = [0] * len(axes)
    for position, axis in enumerate(axes):
        inverse[axis] = position
    return tuple(inverse)


# --- reshape ----------------------------------------------------------------
def _reshape_impl(x, *, shape):
    return namespace(x).reshape(x, shape)


_reshape_impl.numpy_bound = lambda *, shape: operator.methodcaller("reshape", tuple(shape))
"""The call the impl makes on a NumPy array, its parameters bound (a replay calls it
directly: ``Primitive`` documents ``numpy_bound``)."""


def _reshape_batch(axis_size, values, batched, *, shape):
    (x,) = values
    return reshape.bind(x, shape=(x.shape[0],) + tuple(shape)), True


reshape = linear_rules(Primitive("reshape", _reshape_impl, _reshape_batch, keeps_uniform=True),
                       lambda g, x, *, shape: reshape.bind(g, shape=tuple(x.shape)), rearranges=True)


# --- transpose --------------------------------------------------------------
def _transpose_impl(x, *, axes):
    return namespace(x).permute_dims(x, axes)


_transpose_impl.numpy_bound = lambda *, axes: operator.methodcaller("transpose", tuple(axes))


def _transpose_batch(axis_size, values, batched, *, axes):
    return transpose.bind(values[0], axes=(0,) + shifted(axes)), True


transpose = linear_rules(Primitive("transpose", _transpose_impl, _transpose_batch, keeps_uniform=True),
                         lambda g, x, *, axes: transpose.bind(g, axes=inverse_permutation(axes)), rearranges=True)


def moveaxis(x: Any, source: int | Sequence[int], destination: int | Sequence[int]) -> Any:
    """``x`` with axes ``source`` moved to ``destination`` (one transpose, or none)."""
    ndim = x.ndim
    source = normalize_axis(source, ndim)
    destination = normalize_axis(destination, ndim)
    order = [a for a in range(ndim) if a not in source]
    for dest, src in sorted(zip(destination, source)):
        order.insert(dest, src)
    return transpose.bind(x, axes=tuple(order)) if order != list(range(ndim)) else x


def axes_last(x: Any, axis: int | Sequence[int] | None) -> tuple[Any, Callable[[Any], Any]]:
    """``x`` with the ``axis`` dims merged into one last axis, and the function undoing it."""
    axes = normalize_axis(axis, x.ndim)
    shape = tuple(x.shape)
    order = tuple(a for a in range(x.ndim) if a not in axes) + axes
    moved = transpose.bind(x, axes=order) if order != tuple(range(x.ndim)) else x
    merged = reshape.bind(moved, shape=tuple(shape[a] for a in order[:x.ndim - len(axes)]) + (
        math.prod(shape[a] for a in axes),))

    def unmerge(y):
        y = reshape.bind(y, shape=tuple(shape[a] for a in order))
        return y if moved is x else transpose.bind(y, axes=inverse_permutation(order))

    return merged, unmerge


# --- expand_dims / squeeze ----------------------------------------------------
def _expand_dims_impl(x, *, axis):
    shape = list(x.shape)
    for a in sorted(axis):
        shape.insert(a, 1)
    return namespace(x).reshape(x, tuple(shape))


def _expand_dims_batch(axis_size, values, batched, *, axis):
    return expand_dims.bind(values[0], axis=shifted(axis)), True


expand_dims = linear_rules(Primitive("expand_dims", _expand_dims_impl, _expand_dims_batch, keeps_uniform=True),
                           lambda g, x, *, axis: reshape.bind(g, shape=tuple(x.shape)), rearranges=True)


def _squeeze_impl(x, *, axis):
    return namespace(x).squeeze(x, axis=axis) if axis else x


def _squeeze_batch(axis_size, values, batched, *, axis):
    return squeeze.bind(values[0], axis=shifted(axis)), True


squeeze = linear_rules(Primitive("squeeze", _squeeze_impl, _squeeze_batch, keeps_uniform=True),
                       lambda g, x, *, axis: reshape.bind(g, shape=tuple(x.shape)), rearranges=True)


# --- broadcast_to -------------------------------------------------------------
def _broadcast_to_impl(x, *, shape):
    return namespace(x).broadcast_to(x, shape)


def _broadcast_to_batch(axis_size, values, batched, *, shape):
    (x,) = values
    missing = len(shape) - (x.ndim - 1)
    if missing:
        x = expand_dims.bind(x, axis=tuple(range(1, missing + 1)))
    return broadcast_to.bind(x, shape=(x.shape[0],) + tuple(shape)), True


broadcast_to = linear_rules(Primitive("broadcast_to", _broadcast_to_impl, _broadcast_to_batch, keeps_uniform=True),
                            lambda g, x, *, shape: unbroadcast(g, x.shape))


# --- copy ---------------------------------------------------------------------------
def _copy_impl(x):
    return namespace(x).asarray(x, copy=True)


def _copy_batch(axis_size, values, batched):
    return copy.bind(values[0]), True


copy = linear_rules(Primitive("copy", _copy_impl, _copy_batch), lambda g, x: g, rearranges=True)


# --- reductions over axes ---------------------------------------------------------------
def axis_reduction(name: str, function_name: str) -> Primitive:
    """A reduction primitive ``name`` computed by ``xp.<function_name>(x, axis=,
    keepdims=, ...)``; ``axis`` is a tuple of non-negative axes.  Its batch rule shifts
    the axes past the batch axis.  Rules are set by the caller."""

    def impl(x, *, axis, keepdims, **params):
        xp = namespace(x)
        if params.get("dtype") is not None and xp is not numpy_namespace:
            # the standard sums numbers only: count booleans as the requested dtype
            x = xp.astype(x, namespace_dtype(xp, params.pop("dtype")))
        return getattr(xp, function_name)(x, axis=axis, keepdims=keepdims, **params)

    def batch(axis_size, values, batched, *, axis, keepdims, **params):
        return prim.bind(values[0], axis=shifted(axis), keepdims=keepdims, **params), True

    prim = Primitive(name, impl, batch)
    return prim


def keep_reduced(value: Any, x: Any, axis: int | Sequence[int] | None, keepdims: bool) -> Any:
    """A reduction's ``value`` with the reduced axes of ``x`` kept (size 1)."""
    axes = normalize_axis(axis, x.ndim)
    return value if keepdims or not axes else expand_dims.bind(value, axis=axes)


def unreduce(g: Any, x: Any, axis: int | Sequence[int] | None, keepdims: bool) -> Any:
    """A reduction's cotangent spread back over the shape of its input ``x``."""
    return broadcast_to.bind(keep_reduced(g, x, axis, keepdims), shape=tuple(x.shape))


def reduced_size(x: Any, axis: int | Sequence[int] | None) -> int:
    """How many elements of ``x`` each reduction over ``axis`` combines."""
    return math.prod(x.shape[a] for a in normalize_axis(axis, x.ndim))


reduce_sum = linear_rules(axis_reduction("reduce_sum", "sum"),
                          lambda g, x, *, axis, keepdims, **_: unreduce(g, x, axis, keepdims), rearranges=True)


# --- broadcasting: undone in cotangents, done along the batch ---------------------------------
def unbroadcast(g: Any, shape: Sequence[int]) -> Any:
    """``g`` summed down to ``shape`` (undoing NumPy broadcasting)."""
    shape = tuple(shape)
    g_shape = tuple(g.shape)
    if g_shape == shape:
        return g
    extra = len(g_shape) - len(shape)
    axes = tuple(range(extra)) + tuple(
        extra + i for i, size in enumerate(shape) if size == 1 and g_shape[extra + i] != 1
    )
    if axes:
        g = reduce_sum.bind(g, axis=axes, keepdims=True)
    return reshape.bind(g, shape=shape) if tuple(g.shape) != shape else g


def broadcast_batch(x: Any, axis_size: int) -> Any:
    """An unbatched value repeated along a new leading batch axis of ``axis_size``."""
    x = expand_dims.bind(x, axis=(0,))
    return broadcast_to.bind(x, shape=(axis_size,) + tuple(x.shape[1:]))


def move_batch_axis_to_front(x: Any, axis: int) -> Any:
    """``x`` with its axis ``axis`` moved to position 0."""
    return moveaxis(x, axis, 0) if axis != 0 else x
