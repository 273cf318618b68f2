"""Contractions and linear algebra, each primitive with its batch and derivative rules.

``einsum`` (explicit subscripts, no ellipsis) and ``matmul``; then the ``xp.linalg``
family: solve, inv, det, slogdet, cholesky, eigh, svd, qr, pinv and the vector 2-norm.
NumPy's signatures and the functions written with these (tensordot, dot, norm orders,
lstsq, cov, polyval...) are in ``labeled_func/engine/numpy/linalg.py``.  Linalg
functions accept leading stack dims, so most batch rules just let the batch axis ride
in front.  Decompositions with several outputs are one primitive per output
(``eigh_values`` / ``eigh_vectors``, ``svd_u`` / ``svd_values`` / ``svd_vh``): a rule
that needs the other factors binds them again, so each output differentiates on its
own (eigenvalues stay differentiable where eigenvectors are not).

Complex inputs follow the convention of ``kernels/elementwise.py`` (JAX's): the
holomorphic functions (einsum, matmul, solve, inv, det, eig) keep the rules written for
real matrices, with transposes and no conjugates; slogdet and the vector 2-norm, real
valued or of unit modulus, have their own complex rules.  cholesky, eigh, svd, qr and
pinv differentiate real inputs only (a complex input raises NotImplementedError).  eigh
and cholesky read a symmetric matrix, so their rules take the symmetric part of a
tangent and return symmetric cotangents (they differentiate ``f((A + A^T) / 2)``).
eigh, eig and svd rules assume distinct eigenvalues / distinct non-zero singular values.
"""
from __future__ import annotations

import string
from typing import Any

import numpy as np

from . import elementwise as ew
from .backend import (all_finite, device_of, dtype_kind, extra, is_integer_dtype, looking_waits, namespace,
                      numpy_namespace, parse_einsum)
from .core import expand_dims, reduce_sum, reshape, squeeze, transpose, unbroadcast
from .indexing import getitem_static
from .primitive import Primitive
from .reductions import reduce_max
from .shape import concatenate, tril, triu

__all__ = ["einsum", "matmul", "safe_contraction", "solve", "inv", "det", "slogdet_sign", "slogdet_logabs", "cholesky",
           "eigh_values", "eigh_vectors", "eig_values", "eig_vectors", "svd_u", "svd_values", "svd_vh", "qr_q", "qr_r", "pinv",
           "vector_norm", "transpose_last2"]


# --- einsum ---------------------------------------------------------------------------
def _einsum_impl(*operands, subscripts):
    return extra(namespace(*operands), "einsum")(subscripts, *operands)


def _einsum_batch(axis_size, values, batched, *, subscripts):
    return einsum.bind(*values, subscripts=_batched_subscripts(values, batched, subscripts)), True


def _batched_subscripts(values, batched, subscripts):
    """``subscripts`` with a new letter for the batch axis, first in the batched operands
    and in the output."""
    ndims = [v.ndim - 1 if b else v.ndim for v, b in zip(values, batched)]
    inputs, output = parse_einsum(subscripts, ndims)
    used = set("".join(inputs)) | set(output)
    letter = next(c for c in string.ascii_letters if c not in used)
    terms = [letter + term if b else term for term, b in zip(inputs, batched)]
    return ",".join(terms) + "->" + letter + output


def _einsum_jvp(primals, tangents, *, subscripts):
    """The sum over operands of the einsum with that operand's tangent in its place."""
    terms = []
    for k, tangent in enumerate(tangents):
        if tangent is not None:
            operands = list(primals[:k]) + [tangent] + list(primals[k + 1:])
            terms.append(einsum.bind(*operands, subscripts=subscripts))
    return einsum.bind(*primals, subscripts=subscripts), _sum_terms(terms)


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
    subscripts = ",".join(in_terms) + "->" + "".join(target)
    if len(primals) == 2:  # g against the other operand (and constants of 0 and 1): NaN-safe
        return safe_contraction.bind(*operands, subscripts=subscripts, cotangent=0)
    return einsum.bind(*operands, subscripts=subscripts)


einsum = Primitive("einsum", _einsum_impl, _einsum_batch, _einsum_jvp, _einsum_vjp)


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
    ga = (_unbroadcast(safe_contraction.bind(g, transpose_last2(b_matrix), subscripts=MATMUL, cotangent=0),
                       a_matrix, a) if _differentiable(a) else None)
    gb = (_unbroadcast(safe_contraction.bind(transpose_last2(a_matrix), g, subscripts=MATMUL, cotangent=1),
                       b_matrix, b) if _differentiable(b) else None)
    return ga, gb


def _unbroadcast(g, matrix, original):
    g = unbroadcast(g, matrix.shape)
    return g if matrix is original else reshape.bind(g, shape=tuple(original.shape))


matmul = Primitive("matmul", _matmul_impl, _matmul_batch, _matmul_jvp, _matmul_vjp)


# --- the cotangents of einsum and matmul: contractions NaN-safe as safe_multiply -------------
MATMUL = "matmul"  # the subscripts of a safe_contraction that is a matrix product (two operands)


def _contraction(xp, subscripts):
    if subscripts == MATMUL:
        return xp.matmul
    einsum_of = extra(xp, "einsum")
    return lambda *operands: einsum_of(subscripts, *operands)


def _safe_contraction_impl(*operands, subscripts, cotangent):
    """The contraction (``einsum`` of ``subscripts``, or ``matmul``) of a cotangent (operand
    ``cotangent``) with one other operand (and constants of 0s and 1s: a ones vector, an
    identity), NaN-safe as :data:`safe_multiply` pair by pair: a zero of the cotangent
    against an entry of the other that is not finite adds 0, not NaN (a missing value that
    a reduction skipped, met by an observation operator ``H @ v``).

    Decided on the total, as ``multiply_sum``: a finite total had no 0 * inf.  Else, with
    the other's non-finite entries zeroed, the same contraction; then its terms with an
    infinity or a NaN where the cotangent is not 0 are counted by the same contraction of
    indicators (positive and negative cotangents against +inf and -inf, non-zero ones
    against NaN) and added back as +inf, -inf or NaN: five more contractions of the same
    shapes, never the products of both operands' dims.  A cotangent that is not finite
    itself, a complex one, or a GPU's (where looking waits) takes the plain contraction."""
    xp = namespace(*operands)
    contract = _contraction(xp, subscripts)
    with np.errstate(invalid="ignore"):  # 0 * inf, masked below: no warning for a product nobody sees
        total = contract(*operands)
    g, other = operands[cotangent], operands[1 - cotangent]
    if (_is_complex(total) or _is_complex(other) or looking_waits(total) or all_finite(total)
            or not all_finite(g)):
        return total

    def with_pair(first, second):  # the two operands in their places, the constants after
        pair = (first, second) if cotangent == 0 else (second, first)
        return contract(*pair, *operands[2:])

    dtype = total.dtype
    finite = xp.isfinite(other)
    base = with_pair(g, xp.where(finite, other, xp.zeros_like(other)))
    positive, negative = xp.astype(g > 0, dtype), xp.astype(g < 0, dtype)
    up_inf, down_inf = xp.astype(other == np.inf, dtype), xp.astype(other == -np.inf, dtype)
    rising = with_pair(positive, up_inf) + with_pair(negative, down_inf)
    falling = with_pair(positive, down_inf) + with_pair(negative, up_inf)
    undefined = with_pair(positive + negative, xp.astype(xp.isnan(other), dtype))
    zero, infinite = xp.zeros_like(base), xp.full_like(base, np.inf)
    with np.errstate(invalid="ignore"):  # inf - inf: NaN, as the plain sum would give
        return (base + xp.where(rising > 0, infinite, zero) - xp.where(falling > 0, infinite, zero)
                + xp.where(undefined > 0, xp.full_like(base, np.nan), zero))


def _safe_contraction_batch(axis_size, values, batched, *, subscripts, cotangent):
    if subscripts != MATMUL:
        return safe_contraction.bind(*values, subscripts=_batched_subscripts(values, batched, subscripts),
                                     cotangent=cotangent), True
    rank = max(v.ndim - b for v, b in zip(values, batched))  # matrices (the rules reshape vectors)
    values = [_pad_rank(v, b, rank) for v, b in zip(values, batched)]
    return safe_contraction.bind(*values, subscripts=MATMUL, cotangent=cotangent), True


def _plain_contraction(operands, subscripts):
    return matmul.bind(*operands) if subscripts == MATMUL else einsum.bind(*operands, subscripts=subscripts)


def _safe_contraction_jvp(primals, tangents, *, subscripts, cotangent):
    """Linear in each operand: the cotangent's tangent NaN-safe as the primal, the other's
    plain (against a finite cotangent)."""
    out = safe_contraction.bind(*primals, subscripts=subscripts, cotangent=cotangent)
    terms = []
    for k in (0, 1):
        if tangents[k] is None:
            continue
        operands = list(primals)
        operands[k] = tangents[k]
        terms.append(safe_contraction.bind(*operands, subscripts=subscripts, cotangent=cotangent) if k == cotangent
                     else _plain_contraction(operands, subscripts))
    return out, _sum_terms(terms)


def _safe_contraction_vjp(g, primals, out, *, subscripts, cotangent):
    """The plain contraction's rule: for a matmul (and an einsum of two arrays) NaN-safe
    itself; the einsum with constants here (a ones vector, an identity) is not, so a
    second derivative through a masked pair may be NaN."""
    if subscripts == MATMUL:
        return _matmul_vjp(g, primals, out)
    return _einsum_vjp(g, primals, out, subscripts=subscripts)


safe_contraction = Primitive("safe_contraction", _safe_contraction_impl, _safe_contraction_batch,
                             _safe_contraction_jvp, _safe_contraction_vjp)


# --- linalg: helpers shared by the rules -----------------------------------------------
def _sum_terms(terms):
    total = None
    for term in terms:
        total = term if total is None else ew.add.bind(total, term)
    return total


def _differentiable(x):
    return hasattr(x, "dtype") and not is_integer_dtype(x.dtype)


def _is_complex(value):
    return hasattr(value, "dtype") and dtype_kind(value.dtype) == "c"


def _real_only(name, *values):
    if any(_is_complex(v) for v in values):
        raise NotImplementedError(f"{name}: derivatives of complex inputs are not implemented (real inputs only); "
                                  "solve, inv, det, slogdet, eig, matmul, einsum and norm differentiate them")


def transpose_last2(x: Any) -> Any:
    n = x.ndim
    return transpose.bind(x, axes=tuple(range(n - 2)) + (n - 1, n - 2))


def _sym(x):
    return ew.multiply.bind(0.5, ew.add.bind(x, transpose_last2(x)))


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
    return einsum.bind(a, b, subscripts=_stacked("ij,ij->j", a, b))


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
    """``b`` is a stack of (M, K) matrices.  The stack dims are broadcast here: NumPy's
    solve broadcasts them, CuPy's requires them equal."""
    xp = namespace(a, b)
    if a.shape[:-2] != b.shape[:-2]:
        stack = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a = xp.broadcast_to(a, stack + tuple(a.shape[-2:]))
        b = xp.broadcast_to(b, stack + tuple(b.shape[-2:]))
    return xp.linalg.solve(a, b)


def _solve_batch(axis_size, values, batched):
    a, b = values
    rank = max(a.ndim - batched[0], b.ndim - batched[1])
    return solve.bind(_pad_rank(a, batched[0], rank), _pad_rank(b, batched[1], rank)), True


def _solve_jvp(primals, tangents):
    """dx = A^-1 (db - dA x)."""
    a, b = primals
    ta, tb = tangents
    x = solve.bind(a, b)
    terms = [tb] if tb is not None else []
    if ta is not None:
        terms.append(ew.negative.bind(matmul.bind(ta, x)))
    rhs = _sum_terms(terms)
    return x, None if rhs is None else solve.bind(a, rhs)


def _solve_vjp(g, primals, x):
    """b̄ = A^-T g;  Ā = -b̄ x^T."""
    a, b = primals
    gb = solve.bind(transpose_last2(a), g)
    ga = ew.negative.bind(matmul.bind(gb, transpose_last2(x)))
    return (unbroadcast(ga, a.shape) if _differentiable(a) else None,
            unbroadcast(gb, b.shape) if _differentiable(b) else None)


solve = Primitive("solve", _solve_impl, _solve_batch, _solve_jvp, _solve_vjp)


# --- inv, det, slogdet ------------------------------------------------------------------
def _inv_jvp(primals, tangents):
    """dX = -X dA X."""
    (a,), (ta,) = primals, tangents
    x = inv.bind(a)
    return x, None if ta is None else ew.negative.bind(matmul.bind(x, matmul.bind(ta, x)))


def _inv_vjp(g, primals, x):
    """Ā = -X^T g X^T."""
    xt = transpose_last2(x)
    return (ew.negative.bind(matmul.bind(xt, matmul.bind(g, xt))),)


inv = _linalg_primitive("inv", lambda a: namespace(a).linalg.inv(a), _inv_jvp, _inv_vjp)


def _trace_of_inverse_times(a, t):
    """tr(A^-1 dA) = sum_ij (A^-1)_ji dA_ij (A must be invertible)."""
    return _diag_sum(transpose_last2(inv.bind(a)), t)


def _diag_sum(a, b):
    return einsum.bind(a, b, subscripts=_stacked("ij,ij->", a, b))


def _det_jvp(primals, tangents):
    """d det A = det A tr(A^-1 dA)."""
    (a,), (ta,) = primals, tangents
    d = det.bind(a)
    return d, None if ta is None else ew.multiply.bind(d, _trace_of_inverse_times(a, ta))


def _det_vjp(g, primals, d):
    """Ā = g det A A^-T."""
    (a,) = primals
    scale = _scalar_as_matrix(ew.multiply.bind(g, d))
    return (ew.multiply.bind(scale, transpose_last2(inv.bind(a))),)


det = _linalg_primitive("det", lambda a: namespace(a).linalg.det(a), _det_jvp, _det_vjp)


def _logabs_jvp(primals, tangents):
    """d log|det A| = Re tr(A^-1 dA) (log|det A| = Re log det A)."""
    (a,), (ta,) = primals, tangents
    out = slogdet_logabs.bind(a)
    if ta is None:
        return out, None
    trace = _trace_of_inverse_times(a, ta)
    return out, ew.real.bind(trace) if _is_complex(trace) else trace


def _logabs_vjp(g, primals, out):
    """Ā = g A^-T (of a complex A too: the gradient of Re log det A)."""
    (a,) = primals
    return (ew.multiply.bind(_scalar_as_matrix(g), transpose_last2(inv.bind(a))),)


def _sign_jvp(primals, tangents):
    """Of a real A the sign is piecewise constant; of a complex A it is exp(i Im log det A):
    d sign = i sign Im tr(A^-1 dA)."""
    (a,), (ta,) = primals, tangents
    sign = slogdet_sign.bind(a)
    if ta is None or not _is_complex(a):
        return sign, None
    turn = ew.imag.bind(_trace_of_inverse_times(a, ta))
    return sign, ew.multiply.bind(ew.multiply.bind(sign, 1j), turn)


def _sign_vjp(g, primals, sign):
    """The transpose of the JVP's map: Ā = i Im(ḡ sign) A^-T."""
    (a,) = primals
    if not _is_complex(a):
        return (None,)
    turn = ew.multiply.bind(ew.imag.bind(ew.multiply.bind(g, sign)), 1j)
    return (ew.multiply.bind(_scalar_as_matrix(turn), transpose_last2(inv.bind(a))),)


slogdet_sign = _linalg_primitive("slogdet_sign", lambda a: namespace(a).linalg.slogdet(a).sign,
                                 _sign_jvp, _sign_vjp)
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
    left = solve.bind(l, _sym(ta))  # L^-1 dA
    middle = transpose_last2(solve.bind(l, transpose_last2(left)))  # L^-1 dA L^-T
    return l, matmul.bind(l, ew.multiply.bind(middle, _lower_half_diagonal(l)))


def _cholesky_vjp(g, primals, l):
    """Ā = sym(L^-T Phi(L^T L̄) L^-1)."""
    _real_only("cholesky", l)
    lt = transpose_last2(l)
    phi = ew.multiply.bind(matmul.bind(lt, g), _lower_half_diagonal(l))
    left = solve.bind(lt, phi)  # L^-T Phi
    return (_sym(transpose_last2(solve.bind(lt, transpose_last2(left)))),)


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
    return (matmul.bind(ew.multiply.bind(v, _columns(g)), transpose_last2(v)),)


def _eigh_vectors_jvp(primals, tangents):
    """dV = V (F o V^T sym(dA) V),  F_ij = 1 / (w_j - w_i)."""
    (a,), (ta,) = primals, tangents
    v = eigh_vectors.bind(a)
    if ta is None:
        return v, None
    _real_only("eigh", a)
    projected = matmul.bind(transpose_last2(v), matmul.bind(_sym(ta), v))
    return v, matmul.bind(v, ew.multiply.bind(_inverse_gaps(eigh_values.bind(a)), projected))


def _eigh_vectors_vjp(g, primals, v):
    """Ā = sym(V (F o V^T V̄) V^T)."""
    (a,) = primals
    _real_only("eigh", a)
    inner_part = ew.multiply.bind(_inverse_gaps(eigh_values.bind(a)), matmul.bind(transpose_last2(v), g))
    return (_sym(matmul.bind(v, matmul.bind(inner_part, transpose_last2(v)))),)


eigh_values = _linalg_primitive("eigh_values", lambda a: namespace(a).linalg.eigvalsh(a),
                                _eigh_values_jvp, _eigh_values_vjp)
eigh_vectors = _linalg_primitive("eigh_vectors", lambda a: namespace(a).linalg.eigh(a).eigenvectors,
                                 _eigh_vectors_jvp, _eigh_vectors_vjp)


# --- eig (general): A V = V diag(w), V with unit columns -------------------------------------------
# NumPy's eigenvectors have unit 2-norm and their largest component real (LAPACK's
# choice); the rules keep both, so they differentiate exactly what NumPy returns.  The
# eigenvalues are distinct.  Everything else is holomorphic in A: transposes, no conjugates.
def _eig_pair(a):
    return eig_values.bind(a), eig_vectors.bind(a)


def _eig_values_jvp(primals, tangents):
    """dw = diag(V^-1 dA V)."""
    (a,), (ta,) = primals, tangents
    w, v = _eig_pair(a)
    if ta is None:
        return w, None
    return w, _diag_of_product(transpose_last2(inv.bind(v)), matmul.bind(ta, v))


def _eig_values_vjp(g, primals, w):
    """Ā = V^-T diag(w̄) V^T."""
    (a,) = primals
    v = eig_vectors.bind(a)
    return (matmul.bind(ew.multiply.bind(transpose_last2(inv.bind(v)), _columns(g)), transpose_last2(v)),)


def _largest_component(v):
    """1 at the largest component of each column of ``v`` (the one NumPy makes real), else 0."""
    size = ew.absolute.bind(v)
    largest = ew.equal.bind(size, reduce_max.bind(size, axis=(v.ndim - 2,), keepdims=True))
    return ew.astype.bind(largest, dtype=v.dtype)


def _eig_vectors_jvp(primals, tangents):
    """D = V (F o V^-1 dA V), F_ij = 1 / (w_j - w_i), moves each eigenvector off itself;
    then dV = D + V diag(alpha) with alpha = -Re(v^H d) - i Im(d_m / v_m) keeps the norm 1
    and the largest component m real."""
    (a,), (ta,) = primals, tangents
    w, v = _eig_pair(a)
    if ta is None:
        return v, None
    projected = matmul.bind(inv.bind(v), matmul.bind(ta, v))
    d = matmul.bind(v, ew.multiply.bind(_inverse_gaps(w), projected))
    alpha = ew.negative.bind(_column_sums(ew.multiply.bind(_conj(v), d)))
    if _is_complex(v):
        alpha = ew.real.bind(alpha)
        at_largest = ew.divide.bind(_column_sums(ew.multiply.bind(_largest_component(v), d)), _column_sums(
            ew.multiply.bind(_largest_component(v), v)))
        alpha = ew.subtract.bind(alpha, ew.multiply.bind(ew.imag.bind(at_largest), 1j))
    return v, ew.add.bind(d, ew.multiply.bind(v, _columns(alpha)))


def _eig_vectors_vjp(g, primals, v):
    """The transpose of the JVP's map, step by step backwards: with ᾱ = diag(V^T Ḡ),
    D̄ = Ḡ - conj(V) diag(Re ᾱ) - i E diag(Im ᾱ / v_m) (E marks the largest components),
    then Ā = V^-T (F o V^T D̄) V^T."""
    (a,) = primals
    w = eig_values.bind(a)
    alpha_bar = _column_sums(ew.multiply.bind(v, g))
    if _is_complex(v):
        largest = _largest_component(v)
        at_largest = _column_sums(ew.multiply.bind(largest, v))
        turn = ew.multiply.bind(ew.divide.bind(ew.imag.bind(alpha_bar), at_largest), 1j)
        d_bar = ew.subtract.bind(g, ew.add.bind(
            ew.multiply.bind(ew.conj.bind(v), _columns(ew.real.bind(alpha_bar))),
            ew.multiply.bind(largest, _columns(turn))))
    else:
        d_bar = ew.subtract.bind(g, ew.multiply.bind(v, _columns(alpha_bar)))
    inner_part = ew.multiply.bind(_inverse_gaps(w), matmul.bind(transpose_last2(v), d_bar))
    return (matmul.bind(transpose_last2(inv.bind(v)), matmul.bind(inner_part, transpose_last2(v))),)


def _column_sums(x):
    """sum_i x_ij: a stack of matrices (..., n, n) to a stack of vectors (..., n)."""
    return reduce_sum.bind(x, axis=(x.ndim - 2,), keepdims=False)


def _conj(x):
    return ew.conj.bind(x) if _is_complex(x) else x


def _eig_linalg(a):
    """NumPy's own linalg for NumPy arrays (real results for a real spectrum, as NumPy
    returns them: array-api-compat's are always complex), else the namespace's."""
    xp = namespace(a)
    if xp is numpy_namespace:
        return np.linalg
    if not hasattr(xp.linalg, "eig"):
        raise NotImplementedError(f"linalg.eig: the namespace {xp.__name__} has no linalg.eig")
    return xp.linalg


def _eig_values_impl(a):
    """NumPy's eigvals orders the eigenvalues as its eig does; elsewhere (CuPy says it need
    not) they come from the same eig call as the eigenvectors."""
    linalg = _eig_linalg(a)
    return linalg.eigvals(a) if linalg is np.linalg else _numpy_dtypes(a, *linalg.eig(a))[0]


def _eig_vectors_impl(a):
    linalg = _eig_linalg(a)
    return linalg.eig(a)[1] if linalg is np.linalg else _numpy_dtypes(a, *linalg.eig(a))[1]


def _numpy_dtypes(a, w, v):
    """Eigenpairs in NumPy's dtypes: real for a real matrix whose whole spectrum is real
    (CuPy's eig answers complex always)."""
    xp = namespace(a)
    if dtype_kind(a.dtype) == "c" or not bool(xp.all(xp.imag(w) == 0)):
        return w, v
    return xp.real(w), xp.real(v)


eig_values = _linalg_primitive("eig_values", _eig_values_impl, _eig_values_jvp, _eig_values_vjp)
eig_vectors = _linalg_primitive("eig_vectors", _eig_vectors_impl, _eig_vectors_jvp, _eig_vectors_vjp)


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
    return s, _diag_of_product(svd_u.bind(a), matmul.bind(ta, transpose_last2(svd_vh.bind(a))))


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
    da_v = matmul.bind(ta, transpose_last2(vh))
    dp = matmul.bind(transpose_last2(u), da_v)
    mixed = ew.add.bind(ew.multiply.bind(dp, _columns(s)), ew.multiply.bind(_rows(s), transpose_last2(dp)))
    rotation = matmul.bind(u, ew.multiply.bind(_inverse_gaps(ew.multiply.bind(s, s)), mixed))
    outside = ew.divide.bind(ew.subtract.bind(da_v, matmul.bind(u, dp)), _columns(s))
    return u, ew.add.bind(rotation, outside)


def _svd_u_vjp(g, primals, u):
    """Ā = U (F o (U^T Ū - Ū^T U)) S Vh + (Ū - U U^T Ū) S^-1 Vh."""
    (a,) = primals
    _real_only("svd", a)
    s, vh = svd_values.bind(a), svd_vh.bind(a)
    ut_g = matmul.bind(transpose_last2(u), g)
    skew = ew.subtract.bind(ut_g, transpose_last2(ut_g))
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
    v = transpose_last2(vh)
    dat_u = matmul.bind(transpose_last2(ta), u)
    dpt = matmul.bind(vh, dat_u)  # dP^T = V^T dA^T U
    mixed = ew.add.bind(ew.multiply.bind(_rows(s), transpose_last2(dpt)), ew.multiply.bind(dpt, _columns(s)))
    rotation = matmul.bind(v, ew.multiply.bind(_inverse_gaps(ew.multiply.bind(s, s)), mixed))
    outside = ew.divide.bind(ew.subtract.bind(dat_u, matmul.bind(v, dpt)), _columns(s))
    return vh, transpose_last2(ew.add.bind(rotation, outside))


def _svd_vh_vjp(g, primals, vh):
    """With V̄ = Vh̄^T:  Ā = U S (F o (V^T V̄ - V̄^T V)) Vh + U S^-1 (V̄^T - V̄^T V Vh)."""
    (a,) = primals
    _real_only("svd", a)
    u, s = svd_u.bind(a), svd_values.bind(a)
    vt_gv = matmul.bind(vh, transpose_last2(g))  # V^T V̄ (g = Vh̄ = V̄^T)
    skew = ew.subtract.bind(vt_gv, transpose_last2(vt_gv))
    rotation = ew.multiply.bind(_rows(s), ew.multiply.bind(_inverse_gaps(ew.multiply.bind(s, s)), skew))
    outside = ew.divide.bind(ew.subtract.bind(g, matmul.bind(transpose_last2(vt_gv), vh)), _rows(s))
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
    """d|x| = Re <conj(x), dx> / |x| (0 at x = 0)."""
    (x,), (tx,) = primals, tangents
    n = vector_norm.bind(x, axis=axis, keepdims=keepdims)
    if tx is None:
        return n, None
    dot_product = reduce_sum.bind(ew.multiply.bind(_conj(x), tx), axis=axis, keepdims=keepdims)
    if _is_complex(dot_product):
        dot_product = ew.real.bind(dot_product)
    return n, ew.divide.bind(dot_product, _nonzero(n))


def _vector_norm_vjp(g, primals, n, *, axis, keepdims):
    """x̄ = ḡ conj(x) / |x| (0 at x = 0)."""
    (x,) = primals
    if not _differentiable(x):
        return (None,)
    if not keepdims:
        kept = tuple(1 if i in axis else size for i, size in enumerate(x.shape))
        g = reshape.bind(g, shape=kept)
        n = reshape.bind(n, shape=kept)
    return (ew.multiply.bind(g, ew.divide.bind(_conj(x), _nonzero(n))),)


vector_norm = Primitive("vector_norm", _vector_norm_impl, _vector_norm_batch, _vector_norm_jvp, _vector_norm_vjp)


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
            dr2 = ew.add.bind(matmul.bind(transpose_last2(dq), y), matmul.bind(transpose_last2(q), dy))
            dr = concatenate.bind(dr1, dr2, axis=dr1.ndim - 1)
        return out, dq if part == "Q" else dr

    return jvp


def _qr_tall_tangents(q, r, da):
    """For rows >= columns: with C = Q^T dA R^-1 and its skew part Omega = L - L^T (L the
    strict lower triangle of C), dR = (C - Omega) R and dQ = dA R^-1 - Q (C - Omega)."""
    da_r = _times_inverse(da, r)
    c = matmul.bind(transpose_last2(q), da_r)
    lower = tril.bind(c, k=-1)
    triangular = ew.add.bind(ew.subtract.bind(c, lower), transpose_last2(lower))  # C - Omega
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
            from_r2 = matmul.bind(y, transpose_last2(gr2))
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
        terms.append(matmul.bind(gr, transpose_last2(r)))
    if gq is not None:
        terms.append(ew.negative.bind(matmul.bind(transpose_last2(q), gq)))
    m = _sum_terms(terms)
    s = ew.add.bind(triu.bind(m, k=0), transpose_last2(triu.bind(m, k=1)))
    left = matmul.bind(q, s)
    if gq is not None:
        left = ew.add.bind(gq, left)
    return _times_inverse(left, transpose_last2(r))


def _times_inverse(x, r):
    """x R^-1, as (R^-T x^T)^T."""
    return transpose_last2(solve.bind(transpose_last2(r), transpose_last2(x)))


def _columns_before(x, count):
    return getitem_static(x, (Ellipsis, slice(None, count)))


def _columns_from(x, count):
    return getitem_static(x, (Ellipsis, slice(count, None)))


def _qr(part):
    return lambda a: getattr(namespace(a).linalg.qr(a, mode="reduced"), part)


qr_q = _linalg_primitive("qr_q", _qr("Q"), _qr_jvp_rule("Q"), _qr_vjp_rule("Q"))
qr_r = _linalg_primitive("qr_r", _qr("R"), _qr_jvp_rule("R"), _qr_vjp_rule("R"))


# --- pinv (Moore-Penrose) ---------------------------------------------------------------------
def _pinv_jvp(primals, tangents, *, rtol):
    """For a constant rank, with X = A^+:
    dX = -X dA X + X X^T dA^T (I - A X) + (I - X A) dA^T X^T X."""
    (a,), (ta,) = primals, tangents
    x = pinv.bind(a, rtol=rtol)
    if ta is None:
        return x, None
    _real_only("pinv", a)
    xt, tat = transpose_last2(x), transpose_last2(ta)
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
    xt, gt = transpose_last2(x), transpose_last2(g)
    first = ew.negative.bind(matmul.bind(xt, matmul.bind(g, xt)))
    left = matmul.bind(gt, matmul.bind(x, xt))  # g^T X X^T
    second = ew.subtract.bind(left, matmul.bind(matmul.bind(a, x), left))
    right = matmul.bind(matmul.bind(xt, x), gt)  # X^T X g^T
    third = ew.subtract.bind(right, matmul.bind(right, matmul.bind(x, a)))
    return (ew.add.bind(first, ew.add.bind(second, third)),)


pinv = _linalg_primitive("pinv", lambda a, *, rtol: namespace(a).linalg.pinv(a, rtol=rtol), _pinv_jvp, _pinv_vjp)
