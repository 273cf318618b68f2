"""Contractions: einsum, matmul, and tensordot/dot/inner/outer written with them."""
from __future__ import annotations

import string

from .backend import extra, namespace, normalize_axis, parse_einsum
from .primitive import Primitive
from .shape import expand_dims, reshape, squeeze

__all__ = ["einsum", "matmul", "tensordot", "dot", "inner", "outer", "vdot"]


# --- einsum ---------------------------------------------------------------------------
def _einsum_impl(*operands, subscripts):
    return extra(namespace(*operands), "einsum")(subscripts, *operands)


def _einsum_batch(axis_size, values, batched, *, subscripts):
    ndims = [v.ndim - 1 if b else v.ndim for v, b in zip(values, batched)]
    inputs, output = parse_einsum(subscripts, ndims)
    used = set("".join(inputs)) | set(output)
    letter = next(c for c in string.ascii_letters if c not in used)
    terms = [letter + term if b else term for term, b in zip(inputs, batched)]
    return einsum_primitive.bind(*values, subscripts=",".join(terms) + "->" + letter + output), True


einsum_primitive = Primitive("einsum", _einsum_impl, _einsum_batch)


def einsum(subscripts, *operands):
    inputs, output = parse_einsum(subscripts, [op.ndim for op in operands])
    return einsum_primitive.bind(*operands, subscripts=",".join(inputs) + "->" + output)


# --- matmul ---------------------------------------------------------------------------
def _matmul_impl(a, b):
    return namespace(a, b).matmul(a, b)


def _matmul_batch(axis_size, values, batched):
    a, b = values
    a_batched, b_batched = batched
    a_rank = a.ndim - a_batched
    b_rank = b.ndim - b_batched
    if a_rank == 1:
        a = expand_dims.bind(a, axis=(a.ndim - 1,))  # a row vector: (..., 1, k)
    if b_rank == 1:
        b = expand_dims.bind(b, axis=(b.ndim,))  # a column vector: (..., k, 1)
    rank = max(a.ndim - a_batched, b.ndim - b_batched)
    a = _pad_rank(a, a_batched, rank)
    b = _pad_rank(b, b_batched, rank)
    out = matmul.bind(a, b)
    drop = ()
    if b_rank == 1:
        drop += (out.ndim - 1,)
    if a_rank == 1:
        drop += (out.ndim - 2,)
    return (squeeze.bind(out, axis=tuple(sorted(drop))) if drop else out), True


def _pad_rank(x, is_batched, rank):
    if not is_batched or x.ndim - 1 == rank:
        return x
    shape = tuple(x.shape)
    return reshape.bind(x, shape=shape[:1] + (1,) * (rank + 1 - len(shape)) + shape[1:])


matmul = Primitive("matmul", _matmul_impl, _matmul_batch)


# --- compositions ------------------------------------------------------------------------
def tensordot(a, b, axes=2):
    if isinstance(axes, int):
        a_axes = tuple(range(a.ndim - axes, a.ndim))
        b_axes = tuple(range(axes))
    else:
        a_axes = normalize_axis(axes[0], a.ndim)
        b_axes = normalize_axis(axes[1], b.ndim)
    letters = iter(string.ascii_lowercase)
    a_term = [next(letters) for _ in range(a.ndim)]
    b_term = [next(letters) for _ in range(b.ndim)]
    for i, j in zip(a_axes, b_axes):
        b_term[j] = a_term[i]
    output = [l for i, l in enumerate(a_term) if i not in a_axes]
    output += [l for j, l in enumerate(b_term) if j not in b_axes]
    return einsum_primitive.bind(a, b, subscripts="".join(a_term) + "," + "".join(b_term) + "->" + "".join(output))


def _strong(value, other):
    """A Python scalar as a 0-d array: dot/inner promote it like an array (not weakly)."""
    return value if hasattr(value, "ndim") else namespace(other).asarray(value)


def dot(a, b):
    from .elementwise import multiply

    if getattr(a, "ndim", 0) == 0 or getattr(b, "ndim", 0) == 0:
        return multiply.bind(_strong(a, b), _strong(b, a))
    if b.ndim == 1:
        return tensordot(a, b, axes=([-1], [0]))
    return tensordot(a, b, axes=([-1], [-2]))


def inner(a, b):
    from .elementwise import multiply

    if getattr(a, "ndim", 0) == 0 or getattr(b, "ndim", 0) == 0:
        return multiply.bind(_strong(a, b), _strong(b, a))
    return tensordot(a, b, axes=([-1], [-1]))


def vdot(a, b):
    from .elementwise import conj

    return einsum_primitive.bind(conj.bind(reshape.bind(a, shape=(-1,))), reshape.bind(b, shape=(-1,)), subscripts="i,i->")


def outer(a, b):
    return einsum_primitive.bind(reshape.bind(a, shape=(-1,)), reshape.bind(b, shape=(-1,)), subscripts="i,j->ij")
