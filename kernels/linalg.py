"""Contractions and linear algebra, each primitive with its batch and derivative rules.

einsum and matmul, with tensordot/dot/inner/outer/vdot written with them; then the
``xp.linalg`` family: solve, inv, det, slogdet, cholesky, eigh, svd and the vector
2-norm.  Linalg functions accept leading stack dims, so most batch rules just let the
batch axis ride in front.  Decompositions with several outputs are one primitive per
output (``eigh_values`` / ``eigh_vectors``, ``svd_u`` / ``svd_values`` / ``svd_vh``):
a rule that needs the other factors binds them again, so each output differentiates
on its own (eigenvalues stay differentiable where eigenvectors are not).

Derivative rules are for real floating inputs; eigh and cholesky read a symmetric
matrix, so their rules take the symmetric part of a tangent and return symmetric
cotangents (they differentiate ``f((A + A^T) / 2)``).  eigh and svd rules assume
distinct eigenvalues / distinct non-zero singular values.
"""
from __future__ import annotations

import string
import warnings

import numpy as np

from . import elementwise as ew
from . import reductions as kr
from .backend import device_of, dtype_kind, extra, namespace, namespace_dtype, normalize_axis, parse_einsum
from .creation import ones_like, zeros_like
from .primitive import Primitive, Traced
from .indexing import getitem_static
from .shape import (concatenate, diagonal, expand_dims, flip, moveaxis, pad_constant, reshape, sliding_window_view,
                    squeeze, stack, transpose, tril, triu)

__all__ = ["einsum", "einsum_primitive", "matmul", "tensordot", "dot", "inner", "outer", "vdot",
           "solve", "solve_matrix", "inv", "det", "slogdet_sign", "slogdet_logabs", "cholesky",
           "eigh_values", "eigh_vectors", "svd_u", "svd_values", "svd_vh", "vector_norm", "norm",
           "trace", "cross", "kron", "qr_q", "qr_r", "pinv", "lstsq", "matrix_power", "polyval", "vander",
           "correlate", "convolve", "cov", "corrcoef"]


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


def _einsum_jvp(primals, tangents, *, subscripts):
    """The sum over operands of the einsum with that operand's tangent in its place."""
    terms = []
    for k, tangent in enumerate(tangents):
        if tangent is not None:
            operands = list(primals[:k]) + [tangent] + list(primals[k + 1:])
            terms.append(einsum_primitive.bind(*operands, subscripts=subscripts))
    return einsum_primitive.bind(*primals, subscripts=subscripts), _sum_terms(terms)


def _einsum_vjp(g, primals, out, *, subscripts):
    """Per operand: the einsum of ``g`` with the other operands, giving its subscripts."""
    lhs, output = subscripts.split("->")
    terms = lhs.split(",")
    sizes = {}
    for term, operand in zip(terms, primals):
        for letter, size in zip(term, operand.shape):
            sizes[letter] = max(sizes.get(letter, 1), size)
    return tuple(
        _einsum_cotangent(g, primals, terms, output, k, sizes) if _differentiable(operand) else None
        for k, operand in enumerate(primals)
    )


def _einsum_cotangent(g, primals, terms, output, k, sizes):
    """The cotangent of operand ``k``.  Three cases get a constant operand: an axis
    broadcast from size 1 (summed into a fresh size-1 letter), a repeated letter (a
    diagonal, written back through an identity) and a letter found in no other term
    (summed away in the forward pass: broadcast back with a vector of ones)."""
    xp = namespace(g, primals[k])
    used = set("".join(terms)) | set(output)
    fresh = iter(c for c in string.ascii_letters if c not in used)
    operands = [g] + [p for j, p in enumerate(primals) if j != k]
    in_terms = [output] + [t for j, t in enumerate(terms) if j != k]
    target = []
    for axis, letter in enumerate(terms[k]):
        size = primals[k].shape[axis]
        if size != sizes[letter]:
            new = next(fresh)
            operands.append(xp.ones((1,), dtype=g.dtype, device=device_of(g)))
            in_terms.append(new)
        elif letter in target:
            new = next(fresh)
            operands.append(xp.eye(size, dtype=g.dtype, device=device_of(g)))
            in_terms.append(letter + new)
        else:
            new = letter
        target.append(new)
    present = set("".join(in_terms))
    for letter in target:
        if letter not in present:
            operands.append(xp.ones((sizes[letter],), dtype=g.dtype, device=device_of(g)))
            in_terms.append(letter)
    return einsum_primitive.bind(*operands, subscripts=",".join(in_terms) + "->" + "".join(target))


einsum_primitive = Primitive("einsum", _einsum_impl, _einsum_batch, _einsum_jvp, _einsum_vjp)


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


def _matmul_jvp(primals, tangents):
    a, b = primals
    ta, tb = tangents
    terms = [matmul.bind(ta, b)] if ta is not None else []
    if tb is not None:
        terms.append(matmul.bind(a, tb))
    return matmul.bind(a, b), _sum_terms(terms)


def _matmul_vjp(g, primals, out):
    """a @ b with vectors as (1, k) rows and (k, 1) columns: g b^T and a^T g, summed
    over broadcast batch dims."""
    a, b = primals
    a_matrix = a if a.ndim > 1 else reshape.bind(a, shape=(1,) + tuple(a.shape))
    b_matrix = b if b.ndim > 1 else reshape.bind(b, shape=tuple(b.shape) + (1,))
    if b.ndim == 1:
        g = expand_dims.bind(g, axis=(g.ndim,))
    if a.ndim == 1:
        g = expand_dims.bind(g, axis=(g.ndim - 1,))
    ga = _unbroadcast(matmul.bind(g, _transpose_last2(b_matrix)), a_matrix, a) if _differentiable(a) else None
    gb = _unbroadcast(matmul.bind(_transpose_last2(a_matrix), g), b_matrix, b) if _differentiable(b) else None
    return ga, gb


def _unbroadcast(g, matrix, original):
    g = ew.unbroadcast(g, matrix.shape)
    return g if matrix is original else reshape.bind(g, shape=tuple(original.shape))


matmul = Primitive("matmul", _matmul_impl, _matmul_batch, _matmul_jvp, _matmul_vjp)


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
    if getattr(a, "ndim", 0) == 0 or getattr(b, "ndim", 0) == 0:
        return ew.multiply.bind(_strong(a, b), _strong(b, a))
    if b.ndim == 1:
        return tensordot(a, b, axes=([-1], [0]))
    return tensordot(a, b, axes=([-1], [-2]))


def inner(a, b):
    if getattr(a, "ndim", 0) == 0 or getattr(b, "ndim", 0) == 0:
        return ew.multiply.bind(_strong(a, b), _strong(b, a))
    return tensordot(a, b, axes=([-1], [-1]))


def vdot(a, b):
    a = reshape.bind(a, shape=(-1,))
    if dtype_kind(a.dtype) == "c":
        a = ew.conj.bind(a)
    return einsum_primitive.bind(a, reshape.bind(b, shape=(-1,)), subscripts="i,i->")


def outer(a, b):
    return einsum_primitive.bind(reshape.bind(a, shape=(-1,)), reshape.bind(b, shape=(-1,)), subscripts="i,j->ij")


# --- linalg: helpers shared by the rules -----------------------------------------------
def _sum_terms(terms):
    total = None
    for term in terms:
        total = term if total is None else ew.add.bind(total, term)
    return total


def _differentiable(x):
    return hasattr(x, "dtype") and dtype_kind(x.dtype) not in "biu"


def _real_only(name, *values):
    if any(hasattr(v, "dtype") and dtype_kind(v.dtype) == "c" for v in values):
        raise NotImplementedError(f"{name}: derivatives of complex inputs are not implemented (real inputs only)")


def _transpose_last2(x):
    n = x.ndim
    return transpose.bind(x, axes=tuple(range(n - 2)) + (n - 1, n - 2))


def _sym(x):
    return ew.multiply.bind(0.5, ew.add.bind(x, _transpose_last2(x)))


def _columns(v):
    """A vector (..., n) as a row (..., 1, n): multiplying a matrix by it scales its columns."""
    return expand_dims.bind(v, axis=(v.ndim - 1,))


def _rows(v):
    """A vector (..., n) as a column (..., n, 1): multiplying scales the rows."""
    return expand_dims.bind(v, axis=(v.ndim,))


def _scalar_as_matrix(s):
    """A stack of scalars (...) as (..., 1, 1), to scale a stack of matrices."""
    return expand_dims.bind(s, axis=(s.ndim, s.ndim + 1))


def _diag_of_product(a, b):
    """diag(a^T b) without forming the product: sum_i a_ij b_ij."""
    return einsum_primitive.bind(a, b, subscripts=_stacked("ij,ij->j", a, b))


def _stacked(matrix_subscripts, *operands):
    """``matrix_subscripts`` with the leading stack dims of each operand spelled out."""
    lhs, output = matrix_subscripts.split("->")
    terms = lhs.split(",")
    stack = max(op.ndim - len(t) for t, op in zip(terms, operands))
    letters = string.ascii_uppercase[:stack]
    full = [letters[stack - (op.ndim - len(t)):] + t for t, op in zip(terms, operands)]
    return ",".join(full) + "->" + letters + output


def _inverse_gaps(w):
    """F[..., i, j] = 1 / (w_j - w_i) off the diagonal, 0 on it."""
    xp = namespace(w)
    diagonal = xp.eye(w.shape[-1], dtype=xp.bool, device=device_of(w))
    gaps = ew.subtract.bind(_columns(w), _rows(w))
    return ew.where.bind(diagonal, 0.0, ew.divide.bind(1.0, ew.where.bind(diagonal, 1.0, gaps)))


def _stack_rides_in_front(prim):
    """The batch rule of a one-matrix linalg function: the batch axis is a stack dim."""

    def rule(axis_size, values, batched, **params):
        return prim.bind(values[0], **params), True

    return rule


def _linalg_primitive(name, impl, jvp=None, vjp=None, **options):
    prim = Primitive(name, impl, jvp=jvp, vjp=vjp, **options)
    prim.batch = _stack_rides_in_front(prim)
    return prim


# --- solve ----------------------------------------------------------------------------
def _solve_impl(a, b):
    return namespace(a, b).linalg.solve(a, b)


def _solve_batch(axis_size, values, batched):
    a, b = values
    rank = max(a.ndim - batched[0], b.ndim - batched[1])
    return solve_matrix.bind(_pad_rank(a, batched[0], rank), _pad_rank(b, batched[1], rank)), True


def _solve_jvp(primals, tangents):
    """dx = A^-1 (db - dA x)."""
    a, b = primals
    ta, tb = tangents
    x = solve_matrix.bind(a, b)
    terms = [tb] if tb is not None else []
    if ta is not None:
        terms.append(ew.negative.bind(matmul.bind(ta, x)))
    rhs = _sum_terms(terms)
    return x, None if rhs is None else solve_matrix.bind(a, rhs)


def _solve_vjp(g, primals, x):
    """b̄ = A^-T g;  Ā = -b̄ x^T."""
    a, b = primals
    _real_only("solve", a, b)
    gb = solve_matrix.bind(_transpose_last2(a), g)
    ga = ew.negative.bind(matmul.bind(gb, _transpose_last2(x)))
    return (ew.unbroadcast(ga, a.shape) if _differentiable(a) else None,
            ew.unbroadcast(gb, b.shape) if _differentiable(b) else None)


solve_matrix = Primitive("solve", _solve_impl, _solve_batch, _solve_jvp, _solve_vjp)


def solve(a, b):
    """NumPy's solve: ``b`` of shape (M,) is one vector, otherwise a stack of (M, K)."""
    if b.ndim != 1:
        return solve_matrix.bind(a, b)
    x = solve_matrix.bind(a, expand_dims.bind(b, axis=(1,)))
    return squeeze.bind(x, axis=(x.ndim - 1,))


# --- inv, det, slogdet ------------------------------------------------------------------
def _inv_jvp(primals, tangents):
    """dX = -X dA X."""
    (a,), (ta,) = primals, tangents
    x = inv.bind(a)
    return x, None if ta is None else ew.negative.bind(matmul.bind(x, matmul.bind(ta, x)))


def _inv_vjp(g, primals, x):
    """Ā = -X^T g X^T."""
    _real_only("inv", x)
    xt = _transpose_last2(x)
    return (ew.negative.bind(matmul.bind(xt, matmul.bind(g, xt))),)


inv = _linalg_primitive("inv", lambda a: namespace(a).linalg.inv(a), _inv_jvp, _inv_vjp)


def _trace_of_inverse_times(a, t):
    """tr(A^-1 dA) = sum_ij (A^-1)_ji dA_ij (A must be invertible)."""
    return _diag_sum(_transpose_last2(inv.bind(a)), t)


def _diag_sum(a, b):
    return einsum_primitive.bind(a, b, subscripts=_stacked("ij,ij->", a, b))


def _det_jvp(primals, tangents):
    """d det A = det A tr(A^-1 dA)."""
    (a,), (ta,) = primals, tangents
    d = det.bind(a)
    return d, None if ta is None else ew.multiply.bind(d, _trace_of_inverse_times(a, ta))


def _det_vjp(g, primals, d):
    """Ā = g det A A^-T."""
    (a,) = primals
    _real_only("det", a)
    scale = _scalar_as_matrix(ew.multiply.bind(g, d))
    return (ew.multiply.bind(scale, _transpose_last2(inv.bind(a))),)


det = _linalg_primitive("det", lambda a: namespace(a).linalg.det(a), _det_jvp, _det_vjp)


def _logabs_jvp(primals, tangents):
    """d log|det A| = tr(A^-1 dA)."""
    (a,), (ta,) = primals, tangents
    _real_only("slogdet", a)
    out = slogdet_logabs.bind(a)
    return out, None if ta is None else _trace_of_inverse_times(a, ta)


def _logabs_vjp(g, primals, out):
    """Ā = g A^-T."""
    (a,) = primals
    _real_only("slogdet", a)
    return (ew.multiply.bind(_scalar_as_matrix(g), _transpose_last2(inv.bind(a))),)


slogdet_sign = _linalg_primitive("slogdet_sign", lambda a: namespace(a).linalg.slogdet(a).sign,
                                 differentiable=False)
slogdet_logabs = _linalg_primitive("slogdet_logabs", lambda a: namespace(a).linalg.slogdet(a).logabsdet,
                                   _logabs_jvp, _logabs_vjp)


# --- cholesky (lower) -------------------------------------------------------------------
def _lower_half_diagonal(like):
    """The mask of Phi: the strict lower triangle, and the diagonal halved."""
    xp = namespace(like)
    n = like.shape[-1]
    device = device_of(like)
    return xp.tril(xp.ones((n, n), dtype=like.dtype, device=device)) - 0.5 * xp.eye(n, dtype=like.dtype, device=device)


def _cholesky_jvp(primals, tangents):
    """dL = L Phi(L^-1 sym(dA) L^-T)."""
    (a,), (ta,) = primals, tangents
    l = cholesky.bind(a)
    if ta is None:
        return l, None
    _real_only("cholesky", a)
    left = solve_matrix.bind(l, _sym(ta))  # L^-1 dA
    middle = _transpose_last2(solve_matrix.bind(l, _transpose_last2(left)))  # L^-1 dA L^-T
    return l, matmul.bind(l, ew.multiply.bind(middle, _lower_half_diagonal(l)))


def _cholesky_vjp(g, primals, l):
    """Ā = sym(L^-T Phi(L^T L̄) L^-1)."""
    _real_only("cholesky", l)
    lt = _transpose_last2(l)
    phi = ew.multiply.bind(matmul.bind(lt, g), _lower_half_diagonal(l))
    left = solve_matrix.bind(lt, phi)  # L^-T Phi
    return (_sym(_transpose_last2(solve_matrix.bind(lt, _transpose_last2(left)))),)


cholesky = _linalg_primitive("cholesky", lambda a: namespace(a).linalg.cholesky(a), _cholesky_jvp, _cholesky_vjp)


# --- eigh (symmetric): eigenvalues ascending, eigenvectors as columns -----------------------
def _eigh_values_jvp(primals, tangents):
    """dw = diag(V^T sym(dA) V)."""
    (a,), (ta,) = primals, tangents
    w = eigh_values.bind(a)
    if ta is None:
        return w, None
    _real_only("eigh", a)
    v = eigh_vectors.bind(a)
    return w, _diag_of_product(v, matmul.bind(_sym(ta), v))


def _eigh_values_vjp(g, primals, w):
    """Ā = V diag(w̄) V^T."""
    (a,) = primals
    _real_only("eigh", a)
    v = eigh_vectors.bind(a)
    return (matmul.bind(ew.multiply.bind(v, _columns(g)), _transpose_last2(v)),)


def _eigh_vectors_jvp(primals, tangents):
    """dV = V (F o V^T sym(dA) V),  F_ij = 1 / (w_j - w_i)."""
    (a,), (ta,) = primals, tangents
    v = eigh_vectors.bind(a)
    if ta is None:
        return v, None
    _real_only("eigh", a)
    projected = matmul.bind(_transpose_last2(v), matmul.bind(_sym(ta), v))
    return v, matmul.bind(v, ew.multiply.bind(_inverse_gaps(eigh_values.bind(a)), projected))


def _eigh_vectors_vjp(g, primals, v):
    """Ā = sym(V (F o V^T V̄) V^T)."""
    (a,) = primals
    _real_only("eigh", a)
    inner_part = ew.multiply.bind(_inverse_gaps(eigh_values.bind(a)), matmul.bind(_transpose_last2(v), g))
    return (_sym(matmul.bind(v, matmul.bind(inner_part, _transpose_last2(v)))),)


eigh_values = _linalg_primitive("eigh_values", lambda a: namespace(a).linalg.eigvalsh(a),
                                _eigh_values_jvp, _eigh_values_vjp)
eigh_vectors = _linalg_primitive("eigh_vectors", lambda a: namespace(a).linalg.eigh(a).eigenvectors,
                                 _eigh_vectors_jvp, _eigh_vectors_vjp)


# --- svd (reduced): A = U diag(s) Vh, s descending ---------------------------------------
def _svd_factors(a):
    return svd_u.bind(a), svd_values.bind(a), svd_vh.bind(a)


def _svd_values_jvp(primals, tangents):
    """ds = diag(U^T dA V)."""
    (a,), (ta,) = primals, tangents
    s = svd_values.bind(a)
    if ta is None:
        return s, None
    _real_only("svd", a)
    return s, _diag_of_product(svd_u.bind(a), matmul.bind(ta, _transpose_last2(svd_vh.bind(a))))


def _svd_values_vjp(g, primals, s):
    """Ā = U diag(s̄) Vh."""
    (a,) = primals
    _real_only("svd", a)
    return (matmul.bind(ew.multiply.bind(svd_u.bind(a), _columns(g)), svd_vh.bind(a)),)


def _svd_u_jvp(primals, tangents):
    """dU = U (F o (dP S + S dP^T)) + (dA V - U dP) S^-1,  dP = U^T dA V,  F_ij = 1 / (s_j² - s_i²)."""
    (a,), (ta,) = primals, tangents
    u, s, vh = _svd_factors(a)
    if ta is None:
        return u, None
    _real_only("svd", a)
    da_v = matmul.bind(ta, _transpose_last2(vh))
    dp = matmul.bind(_transpose_last2(u), da_v)
    mixed = ew.add.bind(ew.multiply.bind(dp, _columns(s)), ew.multiply.bind(_rows(s), _transpose_last2(dp)))
    rotation = matmul.bind(u, ew.multiply.bind(_inverse_gaps(ew.multiply.bind(s, s)), mixed))
    outside = ew.divide.bind(ew.subtract.bind(da_v, matmul.bind(u, dp)), _columns(s))
    return u, ew.add.bind(rotation, outside)


def _svd_u_vjp(g, primals, u):
    """Ā = U (F o (U^T Ū - Ū^T U)) S Vh + (Ū - U U^T Ū) S^-1 Vh."""
    (a,) = primals
    _real_only("svd", a)
    s, vh = svd_values.bind(a), svd_vh.bind(a)
    ut_g = matmul.bind(_transpose_last2(u), g)
    skew = ew.subtract.bind(ut_g, _transpose_last2(ut_g))
    rotation = matmul.bind(u, ew.multiply.bind(ew.multiply.bind(_inverse_gaps(ew.multiply.bind(s, s)), skew), _columns(s)))
    outside = ew.divide.bind(ew.subtract.bind(g, matmul.bind(u, ut_g)), _columns(s))
    return (matmul.bind(ew.add.bind(rotation, outside), vh),)


def _svd_vh_jvp(primals, tangents):
    """dV = V (F o (S dP + dP^T S)) + (dA^T U - V dP^T) S^-1;  dVh = dV^T."""
    (a,), (ta,) = primals, tangents
    u, s, vh = _svd_factors(a)
    if ta is None:
        return vh, None
    _real_only("svd", a)
    v = _transpose_last2(vh)
    dat_u = matmul.bind(_transpose_last2(ta), u)
    dpt = matmul.bind(vh, dat_u)  # dP^T = V^T dA^T U
    mixed = ew.add.bind(ew.multiply.bind(_rows(s), _transpose_last2(dpt)), ew.multiply.bind(dpt, _columns(s)))
    rotation = matmul.bind(v, ew.multiply.bind(_inverse_gaps(ew.multiply.bind(s, s)), mixed))
    outside = ew.divide.bind(ew.subtract.bind(dat_u, matmul.bind(v, dpt)), _columns(s))
    return vh, _transpose_last2(ew.add.bind(rotation, outside))


def _svd_vh_vjp(g, primals, vh):
    """With V̄ = Vh̄^T:  Ā = U S (F o (V^T V̄ - V̄^T V)) Vh + U S^-1 (V̄^T - V̄^T V Vh)."""
    (a,) = primals
    _real_only("svd", a)
    u, s = svd_u.bind(a), svd_values.bind(a)
    vt_gv = matmul.bind(vh, _transpose_last2(g))  # V^T V̄ (g = Vh̄ = V̄^T)
    skew = ew.subtract.bind(vt_gv, _transpose_last2(vt_gv))
    rotation = ew.multiply.bind(_rows(s), ew.multiply.bind(_inverse_gaps(ew.multiply.bind(s, s)), skew))
    outside = ew.divide.bind(ew.subtract.bind(g, matmul.bind(_transpose_last2(vt_gv), vh)), _rows(s))
    return (matmul.bind(u, ew.add.bind(matmul.bind(rotation, vh), outside)),)


def _svd(part):
    return lambda a: getattr(namespace(a).linalg.svd(a, full_matrices=False), part)


svd_u = _linalg_primitive("svd_u", _svd("U"), _svd_u_jvp, _svd_u_vjp)
svd_values = _linalg_primitive("svd_values", lambda a: namespace(a).linalg.svdvals(a), _svd_values_jvp, _svd_values_vjp)
svd_vh = _linalg_primitive("svd_vh", _svd("Vh"), _svd_vh_jvp, _svd_vh_vjp)


# --- the vector 2-norm (Frobenius over two axes) --------------------------------------------
def _vector_norm_impl(x, *, axis, keepdims):
    return namespace(x).linalg.vector_norm(x, axis=axis, keepdims=keepdims)


def _vector_norm_batch(axis_size, values, batched, *, axis, keepdims):
    return vector_norm.bind(values[0], axis=tuple(a + 1 for a in axis), keepdims=keepdims), True


def _nonzero(n):
    """``n`` with zeros replaced by ones: x / |x| is then 0, not NaN, at x = 0."""
    return ew.where.bind(ew.equal.bind(n, 0), 1.0, n)


def _vector_norm_jvp(primals, tangents, *, axis, keepdims):
    """d|x| = <x, dx> / |x| (0 at x = 0)."""
    (x,), (tx,) = primals, tangents
    n = vector_norm.bind(x, axis=axis, keepdims=keepdims)
    if tx is None:
        return n, None
    _real_only("norm", x)
    dot_product = kr.reduce_sum.bind(ew.multiply.bind(x, tx), axis=axis, keepdims=keepdims)
    return n, ew.divide.bind(dot_product, _nonzero(n))


def _vector_norm_vjp(g, primals, n, *, axis, keepdims):
    """x̄ = ḡ x / |x| (0 at x = 0)."""
    (x,) = primals
    if not _differentiable(x):
        return (None,)
    _real_only("norm", x)
    if not keepdims:
        kept = tuple(1 if i in axis else size for i, size in enumerate(x.shape))
        g = reshape.bind(g, shape=kept)
        n = reshape.bind(n, shape=kept)
    return (ew.multiply.bind(g, ew.divide.bind(x, _nonzero(n))),)


vector_norm = Primitive("vector_norm", _vector_norm_impl, _vector_norm_batch, _vector_norm_jvp, _vector_norm_vjp)


def norm(x, ord=None, axis=None, keepdims=False):
    """NumPy's ``linalg.norm``: the 2-norm / Frobenius norm is one primitive; the other
    orders are compositions (abs, sums, max/min, singular values)."""
    if not _differentiable(x):  # NumPy computes norms of integers in float64
        x = ew.astype.bind(x, dtype=namespace(x).float64)
    if axis is None and ord is None:
        return vector_norm.bind(x, axis=tuple(range(x.ndim)), keepdims=keepdims)
    axes = normalize_axis(tuple(range(x.ndim)) if axis is None else axis, x.ndim)
    if len(axes) == 1:
        return _vector_order(x, ord, axes, keepdims)
    if len(axes) == 2 and ord in (None, "fro"):
        return vector_norm.bind(x, axis=axes, keepdims=keepdims)
    if len(axes) == 2:
        out = _matrix_order(x, ord, axes)
        return expand_dims.bind(out, axis=tuple(sorted(axes))) if keepdims else out
    raise ValueError(f"norm: improper number of dimensions to norm ({len(axes)}); give axis= one or two axes")


def _vector_order(x, ord, axes, keepdims):
    if ord is None or ord == 2:
        return vector_norm.bind(x, axis=axes, keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(f"norm: invalid norm order {ord!r} for vectors")
    size = ew.abs.bind(x)
    if ord == float("inf"):
        return kr.max(size, axis=axes, keepdims=keepdims)
    if ord == -float("inf"):
        return kr.min(size, axis=axes, keepdims=keepdims)
    if ord == 0:
        return kr.sum(ew.astype.bind(ew.not_equal.bind(x, 0), dtype=x.dtype), axis=axes, keepdims=keepdims)
    if ord == 1:
        return kr.sum(size, axis=axes, keepdims=keepdims)
    return ew.pow.bind(kr.sum(ew.pow.bind(size, float(ord)), axis=axes, keepdims=keepdims), 1.0 / ord)


def _matrix_order(x, ord, axes):
    row, col = axes
    if ord in ("nuc", 2, -2):
        s = svd_values.bind(moveaxis(x, axes, (-2, -1)))
        reduce = {"nuc": kr.sum, 2: kr.max, -2: kr.min}[ord]
        return reduce(s, axis=-1)
    if ord in (1, -1, float("inf"), -float("inf")):
        summed_axis, other = (row, col) if ord in (1, -1) else (col, row)
        sums = kr.sum(ew.abs.bind(x), axis=summed_axis, keepdims=True)
        reduce = kr.max if ord > 0 else kr.min
        return squeeze.bind(reduce(sums, axis=other, keepdims=True), axis=tuple(sorted(axes)))
    raise ValueError(f"norm: invalid norm order {ord!r} for matrices")


# --- trace, cross, kron -----------------------------------------------------------------------
def trace(x, offset=0, axis1=0, axis2=1, dtype=None):
    """The sum of a diagonal (NumPy's trace: the two axes leave)."""
    return kr.sum(diagonal(x, offset, axis1, axis2), axis=-1, dtype=dtype)


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """The cross product of 3-vectors along the given axes, broadcast over the others."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a = moveaxis(_strong(a, b), axisa, -1)
    b = moveaxis(_strong(b, a), axisb, -1)
    if a.shape[-1] != 3 or b.shape[-1] != 3:
        raise ValueError("cross: incompatible dimensions for cross product (the vectors must have "
                         "3 components; 2-vectors are deprecated by NumPy and not supported)")
    a0, a1, a2 = (getitem_static(a, (Ellipsis, k)) for k in range(3))
    b0, b1, b2 = (getitem_static(b, (Ellipsis, k)) for k in range(3))

    def minor(p, q, r, s):
        return ew.subtract.bind(ew.multiply.bind(p, q), ew.multiply.bind(r, s))

    components = (minor(a1, b2, a2, b1), minor(a2, b0, a0, b2), minor(a0, b1, a1, b0))
    return moveaxis(stack.bind(*components, axis=components[0].ndim), -1, axisc)


def kron(a, b):
    """The Kronecker product: axis ``k`` of the result indexes (a's k, b's k) pairs."""
    a, b = _strong(a, b), _strong(b, a)
    rank = max(a.ndim, b.ndim)
    a_shape = (1,) * (rank - a.ndim) + tuple(a.shape)
    b_shape = (1,) * (rank - b.ndim) + tuple(b.shape)
    a = reshape.bind(a, shape=tuple(n for size in a_shape for n in (size, 1)))
    b = reshape.bind(b, shape=tuple(n for size in b_shape for n in (1, size)))
    return reshape.bind(ew.multiply.bind(a, b), shape=tuple(p * q for p, q in zip(a_shape, b_shape)))


# --- qr (reduced): A = Q R ------------------------------------------------------------------------
def _qr_jvp_rule(part):
    def jvp(primals, tangents):
        (a,), (ta,) = primals, tangents
        q, r = qr_q.bind(a), qr_r.bind(a)
        out = q if part == "Q" else r
        if ta is None:
            return out, None
        _real_only("qr", a)
        rows, columns = a.shape[-2], a.shape[-1]
        if rows >= columns:
            dq, dr = _qr_tall_tangents(q, r, ta)
        else:  # A = [X Y] with X square: Q R1 = X and R2 = Q^T Y
            dq, dr1 = _qr_tall_tangents(q, _columns_before(r, rows), _columns_before(ta, rows))
            y, dy = _columns_from(a, rows), _columns_from(ta, rows)
            dr2 = ew.add.bind(matmul.bind(_transpose_last2(dq), y), matmul.bind(_transpose_last2(q), dy))
            dr = concatenate.bind(dr1, dr2, axis=dr1.ndim - 1)
        return out, dq if part == "Q" else dr

    return jvp


def _qr_tall_tangents(q, r, da):
    """For rows >= columns: with C = Q^T dA R^-1 and its skew part Omega = L - L^T (L the
    strict lower triangle of C), dR = (C - Omega) R and dQ = dA R^-1 - Q (C - Omega)."""
    da_r = _times_inverse(da, r)
    c = matmul.bind(_transpose_last2(q), da_r)
    lower = tril(c, -1)
    triangular = ew.add.bind(ew.subtract.bind(c, lower), _transpose_last2(lower))  # C - Omega
    return ew.subtract.bind(da_r, matmul.bind(q, triangular)), matmul.bind(triangular, r)


def _qr_vjp_rule(part):
    def vjp(g, primals, out):
        (a,) = primals
        _real_only("qr", a)
        q, r = qr_q.bind(a), qr_r.bind(a)
        gq, gr = (g, None) if part == "Q" else (None, g)
        rows, columns = a.shape[-2], a.shape[-1]
        if rows >= columns:
            return (_qr_tall_cotangent(q, r, gq, gr),)
        # A = [X Y]: R2 = Q^T Y sends Q R̄2 to Y and Y R̄2^T to Q̄
        y = _columns_from(a, rows)
        gr1, gr2 = (None, None) if gr is None else (_columns_before(gr, rows), _columns_from(gr, rows))
        if gr2 is not None:
            from_r2 = matmul.bind(y, _transpose_last2(gr2))
            gq = from_r2 if gq is None else ew.add.bind(gq, from_r2)
            gy = matmul.bind(q, gr2)
        else:
            gy = ew.multiply.bind(y, 0.0)
        gx = _qr_tall_cotangent(q, _columns_before(r, rows), gq, gr1)
        return (concatenate.bind(gx, gy, axis=gx.ndim - 1),)

    return vjp


def _qr_tall_cotangent(q, r, gq, gr):
    """The transpose of _qr_tall_tangents: with M = R̄ R^T - Q^T Q̄ and S its upper
    triangle mirrored below, Ā = (Q̄ + Q S) R^-T."""
    terms = []
    if gr is not None:
        terms.append(matmul.bind(gr, _transpose_last2(r)))
    if gq is not None:
        terms.append(ew.negative.bind(matmul.bind(_transpose_last2(q), gq)))
    m = _sum_terms(terms)
    s = ew.add.bind(triu(m), _transpose_last2(triu(m, 1)))
    left = matmul.bind(q, s)
    if gq is not None:
        left = ew.add.bind(gq, left)
    return _times_inverse(left, _transpose_last2(r))


def _times_inverse(x, r):
    """x R^-1, as (R^-T x^T)^T."""
    return _transpose_last2(solve_matrix.bind(_transpose_last2(r), _transpose_last2(x)))


def _columns_before(x, count):
    return getitem_static(x, (Ellipsis, slice(None, count)))


def _columns_from(x, count):
    return getitem_static(x, (Ellipsis, slice(count, None)))


def _qr(part):
    return lambda a: getattr(namespace(a).linalg.qr(a, mode="reduced"), part)


qr_q = _linalg_primitive("qr_q", _qr("Q"), _qr_jvp_rule("Q"), _qr_vjp_rule("Q"))
qr_r = _linalg_primitive("qr_r", _qr("R"), _qr_jvp_rule("R"), _qr_vjp_rule("R"))


# --- pinv (Moore-Penrose), lstsq ---------------------------------------------------------------------
def _pinv_jvp(primals, tangents, *, rtol):
    """For a constant rank, with X = A^+:
    dX = -X dA X + X X^T dA^T (I - A X) + (I - X A) dA^T X^T X."""
    (a,), (ta,) = primals, tangents
    x = pinv.bind(a, rtol=rtol)
    if ta is None:
        return x, None
    _real_only("pinv", a)
    xt, tat = _transpose_last2(x), _transpose_last2(ta)
    first = ew.negative.bind(matmul.bind(x, matmul.bind(ta, x)))
    left = matmul.bind(x, matmul.bind(xt, tat))  # X X^T dA^T
    second = ew.subtract.bind(left, matmul.bind(left, matmul.bind(a, x)))
    right = matmul.bind(tat, matmul.bind(xt, x))  # dA^T X^T X
    third = ew.subtract.bind(right, matmul.bind(matmul.bind(x, a), right))
    return x, ew.add.bind(first, ew.add.bind(second, third))


def _pinv_vjp(g, primals, x, *, rtol):
    """The transpose of the JVP's map:
    Ā = -X^T g X^T + (I - A X) g^T X X^T + X^T X g^T (I - X A)."""
    (a,) = primals
    _real_only("pinv", a)
    xt, gt = _transpose_last2(x), _transpose_last2(g)
    first = ew.negative.bind(matmul.bind(xt, matmul.bind(g, xt)))
    left = matmul.bind(gt, matmul.bind(x, xt))  # g^T X X^T
    second = ew.subtract.bind(left, matmul.bind(matmul.bind(a, x), left))
    right = matmul.bind(matmul.bind(xt, x), gt)  # X^T X g^T
    third = ew.subtract.bind(right, matmul.bind(right, matmul.bind(x, a)))
    return (ew.add.bind(first, ew.add.bind(second, third)),)


pinv = _linalg_primitive("pinv", lambda a, *, rtol: namespace(a).linalg.pinv(a, rtol=rtol), _pinv_jvp, _pinv_vjp)


def lstsq(a, b, rcond=None):
    """NumPy's lstsq as (x, residuals, rank, s): the minimum-norm solution is A^+ b.

    Residuals (the squared norms of b - A x) are returned for tall A (rows > columns),
    assuming full column rank; NumPy returns none for a rank-deficient A.
    """
    rows, columns = a.shape[-2], a.shape[-1]
    xp = namespace(a)
    # NumPy's default cutoff: the float64 epsilon (it solves in double precision) times max(M, N)
    tolerance = max(rows, columns) * xp.finfo(xp.float64).eps if rcond is None else rcond
    solution = matmul.bind(pinv.bind(a, rtol=tolerance), b)
    s = svd_values.bind(a)
    largest = kr.max(s, axis=-1, keepdims=True) if s.shape[-1] else 0.0
    kept = ew.greater.bind(s, ew.multiply.bind(largest, tolerance))
    rank = ew.astype.bind(kr.sum(kept, axis=-1, dtype=xp.int32), dtype=xp.int32)  # LAPACK's int32, as NumPy
    if rows > columns:
        misfit = ew.subtract.bind(b, matmul.bind(a, solution))
        residuals = kr.sum(ew.multiply.bind(misfit, misfit), axis=-2 if b.ndim > 1 else -1,
                           keepdims=b.ndim == 1)
    else:
        residuals = xp.zeros((0,), dtype=solution.dtype, device=device_of(a))
    return solution, residuals, rank, s


# --- matrix powers ------------------------------------------------------------------------------------
def matrix_power(a, n):
    """``a`` multiplied by itself ``n`` times (``n`` a Python int), in NumPy's order of
    products: n = 0 is the identity (a constant), n < 0 the power of ``inv(a)``, and
    beyond 3 the powers of two of ``a`` are multiplied in by the bits of ``n``."""
    if n == 0:
        xp = namespace(a)
        identity = xp.eye(a.shape[-1], dtype=xp.bool, device=device_of(a))
        return ew.where.bind(identity, ones_like.bind(a), zeros_like.bind(a))
    if n < 0:
        a, n = inv.bind(a), -n
    if n == 1:
        return a
    if n == 2:
        return matmul.bind(a, a)
    if n == 3:
        return matmul.bind(matmul.bind(a, a), a)
    power = result = None
    while n > 0:
        power = a if power is None else matmul.bind(power, power)
        n, bit = divmod(n, 2)
        if bit:
            result = power if result is None else matmul.bind(result, power)
    return result


# --- polynomials --------------------------------------------------------------------------------------
def polyval(p, x):
    """NumPy's polyval by Horner's rule, ``y = y * x + p[i]`` from ``y = 0``: derivatives reach
    the coefficients and the points through the products and sums."""
    xp = namespace(p, x)
    common = namespace_dtype(xp, np.result_type(_np_dtype(p.dtype), _np_dtype(x.dtype)))
    p = p if p.dtype == common else ew.astype.bind(p, dtype=common)  # NumPy promotes in the first sum
    x = x if x.dtype == common else ew.astype.bind(x, dtype=common)
    y = zeros_like.bind(x)
    for i in range(p.shape[0]):
        y = ew.add.bind(ew.multiply.bind(y, x), getitem_static(p, (i, Ellipsis)))
    return y


def _np_dtype(dtype):
    return np.dtype(getattr(dtype, "_np_dtype", dtype))


def vander(x, n=None, increasing=False):
    """The Vandermonde matrix of a vector: column ``k`` holds ``x**k`` (reversed unless
    ``increasing``), built by repeated products as NumPy does (no ``pow``: its derivative
    at 0 would read 0**-1)."""
    count = x.shape[0] if n is None else int(n)
    if count < 0:
        raise ValueError("negative dimensions are not allowed")
    xp = namespace(x)
    np_dtype = np.promote_types(_np_dtype(x.dtype), np.int_)
    dtype = namespace_dtype(xp, np_dtype)
    if x.dtype != dtype:
        x = ew.astype.bind(x, dtype=dtype)
    if count == 0:
        return getitem_static(expand_dims.bind(x, axis=(1,)), (slice(None), slice(0, 0)))
    columns = [ones_like.bind(x)]
    for _ in range(1, count):
        columns.append(x if len(columns) == 1 else ew.multiply.bind(columns[-1], x))
    if not increasing:
        columns.reverse()
    return stack.bind(*columns, axis=1)


# --- correlation and convolution of vectors ----------------------------------------------------------
_MODES = {"valid": "valid", "same": "same", "full": "full", 0: "valid", 1: "same", 2: "full"}


def _mode(mode):
    try:
        return _MODES[mode]
    except (KeyError, TypeError):
        raise ValueError(f"mode must be one of 'valid', 'same', or 'full' (got {mode!r})") from None


def _sliding_products(a, v, start, length):
    """``out[k] = sum_j a_padded[start + k + j] v[j]`` for ``k < length``, with ``a`` padded by
    ``len(v) - 1`` zeros on each side: entries ``start:start + length`` of the full
    correlation, as windows of ``a`` times ``v``."""
    xp = namespace(a, v)
    common = xp.result_type(a.dtype, v.dtype)
    a = a if a.dtype == common else ew.astype.bind(a, dtype=common)
    v = v if v.dtype == common else ew.astype.bind(v, dtype=common)
    size = v.shape[0]
    padded = pad_constant.bind(a, pad_width=((size - 1, size - 1),), constant_values=((0, 0),))
    padded = getitem_static(padded, (slice(start, start + length + size - 1),))
    windows = sliding_window_view.bind(padded, window_shape=(size,), axis=(0,))
    return matmul.bind(windows, v)


def _correlation(a, v, mode, inverted):
    n, m = a.shape[0], v.shape[0]
    short, long = min(n, m), max(n, m)
    if mode == "full":
        start, length = 0, n + m - 1
    elif mode == "same":
        start, length = (short // 2 if inverted else (short - 1) // 2), long
    else:
        start, length = short - 1, long - short + 1
    return _sliding_products(a, v, start, length)


def correlate(a, v, mode="valid"):
    """NumPy's correlate: ``c[k] = sum_n a[n + k] conj(v[n])``, the entries that ``mode``
    keeps of the full correlation (centred as NumPy's when ``len(v) > len(a)``)."""
    mode = _mode(mode)
    if a.shape[0] == 0:
        raise ValueError("first array argument cannot be empty")
    if v.shape[0] == 0:
        raise ValueError("second array argument cannot be empty")
    if dtype_kind(v.dtype) == "c":
        v = ew.conj.bind(v)
    return _correlation(a, v, mode, inverted=a.shape[0] < v.shape[0])


def convolve(a, v, mode="full"):
    """NumPy's convolve: the correlation of the longer input with the shorter one reversed."""
    mode = _mode(mode)
    if a.shape[0] == 0:
        raise ValueError("a cannot be empty")
    if v.shape[0] == 0:
        raise ValueError("v cannot be empty")
    if v.shape[0] > a.shape[0]:
        a, v = v, a
    return _correlation(a, flip.bind(v, axis=(0,)), mode, inverted=False)


# --- covariance and correlation coefficients -----------------------------------------------------------
def _variables_as_rows(x, rowvar, dtype, transpose_unless_single_row):
    """``x`` cast to ``dtype``, at least 2-D, one variable per row."""
    if x.dtype != dtype:
        x = ew.astype.bind(x, dtype=dtype)
    if x.ndim == 1:
        x = reshape.bind(x, shape=(1,) + tuple(x.shape))
    elif not rowvar and transpose_unless_single_row(x):
        x = _transpose_last2(x)
    return x


def cov(m, y=None, rowvar=True, ddof=1, fweights=None, aweights=None, dtype=None):
    """NumPy's cov: the (weighted) covariance of the rows of ``m`` (and ``y``), in ``dtype``.

    ``fweights`` and ``aweights`` are float vectors (or None); their product weighs each
    observation.  The normalisation follows NumPy's: ``N - ddof`` without weights, else the
    weight sum, less ``ddof`` (times ``sum(w * aweights) / sum(w)`` with aweights).
    """
    xp = namespace(m) if y is None else namespace(m, y)
    single = m.ndim == 1
    x = _variables_as_rows(m, rowvar, dtype, lambda x: not single)
    if x.shape[0] == 0:
        return xp.reshape(xp.asarray([], dtype=xp.float64, device=device_of(m)), (0, 0))
    if y is not None:
        y = _variables_as_rows(y, rowvar, dtype, lambda y: y.shape[0] != 1)
        x = concatenate.bind(x, y, axis=0)
    weights = fweights
    if aweights is not None:
        weights = aweights if weights is None else ew.multiply.bind(weights, aweights)
    observations = x.shape[1]
    if weights is None:
        mean = kr.mean(x, axis=1)
        fact = observations - ddof
    else:
        mean, weight_sums = kr.average(x, axis=1, weights=weights, returned=True)
        total = getitem_static(weight_sums, (0,))
        if ddof == 0:
            fact = total
        elif aweights is None:
            fact = ew.subtract.bind(total, ddof)
        else:
            spread = ew.divide.bind(kr.sum(ew.multiply.bind(weights, aweights)), total)
            fact = ew.subtract.bind(total, ew.multiply.bind(ddof, spread))
    if not isinstance(fact, Traced) and bool(fact <= 0):
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=4)
        fact = 0.0
    centred = ew.subtract.bind(x, expand_dims.bind(mean, axis=(1,)))
    weighted = centred if weights is None else ew.multiply.bind(centred, weights)
    right = _transpose_last2(weighted)
    if dtype_kind(right.dtype) == "c":
        right = ew.conj.bind(right)
    c = matmul.bind(centred, right)
    scale = ew.divide.bind(1, fact) if isinstance(fact, Traced) else float(np.true_divide(1, fact))
    scaled = ew.multiply.bind(c, scale)
    c = scaled if scaled.dtype == c.dtype else ew.astype.bind(scaled, dtype=c.dtype)  # NumPy scales in place
    ones = tuple(axis for axis, size in enumerate(c.shape) if size == 1)
    return squeeze.bind(c, axis=ones) if ones else c


def corrcoef(x, y=None, rowvar=True, dtype=None):
    """NumPy's corrcoef: the covariance scaled by the standard deviations on its
    diagonal, clipped to [-1, 1]; a single variable gives c / c (1, or NaN)."""
    c = cov(x, y, rowvar, 1, dtype=dtype)
    if c.ndim == 0:
        return ew.divide.bind(c, c)
    if dtype_kind(c.dtype) == "c":
        raise NotImplementedError("corrcoef: complex inputs are not supported")
    stddev = ew.sqrt.bind(diagonal(c))
    c = ew.divide.bind(c, expand_dims.bind(stddev, axis=(1,)))
    c = ew.divide.bind(c, expand_dims.bind(stddev, axis=(0,)))
    return ew.clip(c, -1, 1)
