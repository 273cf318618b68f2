"""Linear algebra and contractions with NumPy's signatures: ``matmul``, ``einsum``,
``tensordot`` / ``dot`` / ``inner`` / ``outer`` / ``vdot``, ``numpy.linalg`` (solve,
inv, det, slogdet, cholesky, eigh, eig, svd, norm in every order, qr, pinv, lstsq,
matrix_power, multi_dot, tensorsolve, tensorinv, cond, matrix_rank, and the array API's
names: vecdot, outer, cross, diagonal, trace, tensordot, matmul), ``trace``, ``cross``,
``kron``, ``polyval``, ``polyfit``, ``vander``,
``correlate`` / ``convolve``, ``cov`` / ``corrcoef``.

Each decomposition output is its own primitive (``kernels/linalg.py``); everything
else here is a composition of primitives, so it batches and differentiates through
its parts.
"""
from __future__ import annotations

import operator
import string
import warnings
from collections import namedtuple
from collections.abc import Sequence
from typing import Any

import numpy as np

from labeled_func_kernels import core as kcore
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import linalg as kl
from labeled_func_kernels import indexing as ki
from labeled_func_kernels import reductions as kr
from labeled_func_kernels import shape as ks
from labeled_func_kernels.backend import any_true, device_of, dtype_kind, is_integer_dtype, namespace, namespace_dtype, normalize_axis, parse_einsum
from labeled_func_kernels.creation import ones_like, zeros_like
from labeled_func_kernels.indexing import getitem_static
from labeled_func_kernels.primitive import Traced

from ..errors import UnsupportedOperationError
from .dispatch import NO_VALUE, UFUNCS, asarray, implements, implements_ufunc
from .elementwise import clip
from .reductions import average, largest, mean, smallest, total
from .shape import at_least_1d, diagonal

__all__ = ["SlogdetResult", "EighResult", "EigResult", "SVDResult", "QRResult", "LstsqResult"]

UFUNCS[np.matmul] = kl.matmul

SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
EigResult = namedtuple("EigResult", ["eigenvalues", "eigenvectors"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])
QRResult = namedtuple("QRResult", ["Q", "R"])
LstsqResult = namedtuple("LstsqResult", ["x", "residuals", "rank", "s"])


# --- contractions --------------------------------------------------------------------------------
@implements(np.einsum)
def _einsum(subscripts, *operands, out=None, optimize=False, **kwargs):
    if not isinstance(subscripts, str):  # the sublist form: einsum(a, [0, 1], b, [1, 2], [0, 2])
        subscripts, operands = _from_sublists((subscripts,) + operands)
    operands = [asarray(op) for op in operands]
    inputs, output = parse_einsum(subscripts, [op.ndim for op in operands])
    return kl.einsum.bind(*operands, subscripts=",".join(inputs) + "->" + output)


def _from_sublists(arguments):
    """The string form of einsum's sublist form ``(op, sublist, op, sublist, ..., [output])``:
    the labels (ints in [0, 52), or Ellipsis) become letters in their order, so that the
    implicit output (its labels sorted) is the same."""
    arguments = list(arguments)
    output = arguments.pop() if len(arguments) % 2 else None
    operands, sublists = arguments[0::2], arguments[1::2]
    labels = sorted({label for sublist in sublists + ([output] if output is not None else [])
                     for label in sublist if label is not Ellipsis})
    for label in labels:
        if not isinstance(label, (int, np.integer)) or isinstance(label, bool) or not 0 <= label < 52:
            raise ValueError(f"numpy.einsum: subscript {label!r} in sublist format is not an integer in [0, 52)")
    if len(labels) > len(string.ascii_lowercase):
        raise UnsupportedOperationError("numpy.einsum in sublist form with more than 26 distinct labels is not "
                                        "supported on traced arrays; use the string form")
    letter = dict(zip(labels, string.ascii_lowercase))

    def term(sublist):
        return "".join("..." if label is Ellipsis else letter[label] for label in sublist)

    subscripts = ",".join(term(sublist) for sublist in sublists)
    if output is not None:
        subscripts += "->" + term(output)
    return subscripts, operands


def tensordot(a: Any, b: Any, axes: int | Sequence[Any] = 2) -> Any:
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
    return kl.einsum.bind(a, b, subscripts="".join(a_term) + "," + "".join(b_term) + "->" + "".join(output))


@implements(np.tensordot)
def _tensordot(a, b, axes=2):
    return tensordot(asarray(a), asarray(b), axes)


def _strong(value, other):
    """A Python scalar as a 0-d array: dot/inner promote it like an array (not weakly)."""
    return value if hasattr(value, "ndim") else namespace(other).asarray(value)


@implements(np.dot)
def _dot(a, b, out=None):
    if getattr(a, "ndim", 0) == 0 or getattr(b, "ndim", 0) == 0:
        return ew.multiply.bind(_strong(a, b), _strong(b, a))
    if b.ndim == 1:
        return tensordot(a, b, axes=([-1], [0]))
    return tensordot(a, b, axes=([-1], [-2]))


@implements(np.inner)
def _inner(a, b):
    if getattr(a, "ndim", 0) == 0 or getattr(b, "ndim", 0) == 0:
        return ew.multiply.bind(_strong(a, b), _strong(b, a))
    return tensordot(a, b, axes=([-1], [-1]))


@implements(np.vdot)
def _vdot(a, b):
    a = kcore.reshape.bind(a, shape=(-1,))
    if dtype_kind(a.dtype) == "c":
        a = ew.conj.bind(a)
    return kl.einsum.bind(a, kcore.reshape.bind(b, shape=(-1,)), subscripts="i,i->")


@implements(np.outer)
def _outer(a, b, out=None):
    return kl.einsum.bind(kcore.reshape.bind(a, shape=(-1,)), kcore.reshape.bind(b, shape=(-1,)), subscripts="i,j->ij")


# --- numpy.linalg: solve, inv, det, slogdet, cholesky, eigh, svd ---------------------------------
@implements(np.linalg.solve)
def _linalg_solve(a, b):
    """``b`` of shape (M,) is one vector, otherwise a stack of (M, K)."""
    a, b = asarray(a), asarray(b)
    if b.ndim != 1:
        return kl.solve.bind(a, b)
    x = kl.solve.bind(a, kcore.expand_dims.bind(b, axis=(1,)))
    return kcore.squeeze.bind(x, axis=(x.ndim - 1,))


@implements(np.linalg.inv)
def _linalg_inv(a):
    return kl.inv.bind(asarray(a))


@implements(np.linalg.det)
def _linalg_det(a):
    return kl.det.bind(asarray(a))


@implements(np.linalg.slogdet)
def _linalg_slogdet(a):
    a = asarray(a)
    return SlogdetResult(kl.slogdet_sign.bind(a), kl.slogdet_logabs.bind(a))


@implements(np.linalg.cholesky)
def _linalg_cholesky(a, /, *, upper=False):
    lower = kl.cholesky.bind(asarray(a))
    return _conjugate_transpose(lower) if upper else lower


@implements(np.linalg.eigh)
def _linalg_eigh(a, UPLO="L"):
    a = _lower_triangle_holder(asarray(a), UPLO, "eigh")
    return EighResult(kl.eigh_values.bind(a), kl.eigh_vectors.bind(a))


@implements(np.linalg.eig)
def _linalg_eig(a):
    """Eigenvalues and unit eigenvectors of a general matrix, complex where the spectrum is
    (NumPy's dtypes); derivatives assume distinct eigenvalues."""
    a = asarray(a)
    return EigResult(kl.eig_values.bind(a), kl.eig_vectors.bind(a))


@implements(np.linalg.eigvals)
def _linalg_eigvals(a):
    return kl.eig_values.bind(asarray(a))


@implements(np.linalg.eigvalsh)
def _linalg_eigvalsh(a, UPLO="L"):
    return kl.eigh_values.bind(_lower_triangle_holder(asarray(a), UPLO, "eigvalsh"))


def _conjugate_transpose(x):
    axes = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
    x = kcore.transpose.bind(x, axes=axes)
    return ew.conj.bind(x) if dtype_kind(x.dtype) == "c" else x


def _lower_triangle_holder(a, uplo, name):
    """eigh reads one triangle: UPLO="U" is the lower triangle of the conjugate transpose."""
    if uplo not in ("L", "U"):
        raise UnsupportedOperationError(f"numpy.linalg.{name}: UPLO must be 'L' or 'U', got {uplo!r}")
    return _conjugate_transpose(a) if uplo == "U" else a


@implements(np.linalg.svd)
def _linalg_svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    a = asarray(a)
    if hermitian:
        raise UnsupportedOperationError("numpy.linalg.svd with hermitian=True is not supported on traced arrays")
    if not compute_uv:
        return kl.svd_values.bind(a)
    if full_matrices and a.shape[-1] != a.shape[-2]:
        raise UnsupportedOperationError(
            f"numpy.linalg.svd with full_matrices=True of a non-square {a.shape[-2]}x{a.shape[-1]} matrix "
            "is not supported on traced arrays; pass full_matrices=False (the reduced SVD)"
        )
    return SVDResult(kl.svd_u.bind(a), kl.svd_values.bind(a), kl.svd_vh.bind(a))


@implements(np.linalg.svdvals)
def _linalg_svdvals(x, /):
    return kl.svd_values.bind(asarray(x))


# --- norms ---------------------------------------------------------------------------------------
@implements(np.linalg.norm)
def _linalg_norm(x, ord=None, axis=None, keepdims=False):
    """The 2-norm / Frobenius norm is one primitive; the other
    orders are compositions (abs, sums, max/min, singular values)."""
    x = _inexact(asarray(x))
    if axis is None and ord is None:
        return kl.vector_norm.bind(x, axis=tuple(range(x.ndim)), keepdims=keepdims)
    axes = normalize_axis(tuple(range(x.ndim)) if axis is None else axis, x.ndim)
    if len(axes) == 1:
        return _vector_order(x, ord, axes, keepdims)
    if len(axes) == 2 and ord in (None, "fro"):
        return kl.vector_norm.bind(x, axis=axes, keepdims=keepdims)
    if len(axes) == 2:
        out = _matrix_order(x, ord, axes)
        return kcore.expand_dims.bind(out, axis=tuple(sorted(axes))) if keepdims else out
    raise ValueError(f"norm: improper number of dimensions to norm ({len(axes)}); give axis= one or two axes")


@implements(np.linalg.vector_norm)
def _linalg_vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """The vector norm over ``axis`` (None: all axes; a tuple: those axes as one vector)."""
    x = _inexact(asarray(x))
    return _vector_order(x, ord, normalize_axis(axis, x.ndim), keepdims)


@implements(np.linalg.matrix_norm)
def _linalg_matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """The norm of each matrix of the last two axes."""
    return _linalg_norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def _inexact(x):
    """NumPy computes norms of integers in float64."""
    return ew.astype.bind(x, dtype=namespace(x).float64) if is_integer_dtype(x.dtype) else x


def _vector_order(x, ord, axes, keepdims):
    if ord is None or ord == 2:
        return kl.vector_norm.bind(x, axis=axes, keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(f"norm: invalid norm order {ord!r} for vectors")
    size = ew.absolute.bind(x)
    if ord == float("inf"):
        return largest(size, axis=axes, keepdims=keepdims)
    if ord == -float("inf"):
        return smallest(size, axis=axes, keepdims=keepdims)
    if ord == 0:
        return total(ew.astype.bind(ew.not_equal.bind(x, 0), dtype=x.dtype), axis=axes, keepdims=keepdims)
    if ord == 1:
        return total(size, axis=axes, keepdims=keepdims)
    return ew.power.bind(total(ew.power.bind(size, float(ord)), axis=axes, keepdims=keepdims), 1.0 / ord)


def _matrix_order(x, ord, axes):
    row, col = axes
    if ord in ("nuc", 2, -2):
        s = kl.svd_values.bind(kcore.moveaxis(x, axes, (-2, -1)))
        extreme = {"nuc": total, 2: largest, -2: smallest}[ord]
        return extreme(s, axis=-1)
    if ord in (1, -1, float("inf"), -float("inf")):
        summed_axis, other = (row, col) if ord in (1, -1) else (col, row)
        sums = total(ew.absolute.bind(x), axis=summed_axis, keepdims=True)
        extreme = largest if ord > 0 else smallest
        return kcore.squeeze.bind(extreme(sums, axis=other, keepdims=True), axis=tuple(sorted(axes)))
    raise ValueError(f"norm: invalid norm order {ord!r} for matrices")


# --- qr, pinv, lstsq, matrix_power ---------------------------------------------------------------
@implements(np.linalg.qr)
def _linalg_qr(a, mode="reduced"):
    a = asarray(a)
    if mode == "r":
        return kl.qr_r.bind(a)
    if mode != "reduced":
        raise UnsupportedOperationError(f"numpy.linalg.qr with mode={mode!r} is not supported on traced arrays "
                                        "(mode='reduced' and mode='r' are)")
    return QRResult(kl.qr_q.bind(a), kl.qr_r.bind(a))


@implements(np.linalg.pinv)
def _linalg_pinv(a, rcond=None, hermitian=False, *, rtol=NO_VALUE):
    if hermitian:
        raise UnsupportedOperationError("numpy.linalg.pinv with hermitian=True is not supported on traced arrays")
    if rcond is not None and rtol is not NO_VALUE:
        raise ValueError("`rtol` and `rcond` can't be both set.")
    # NumPy's defaults: rcond=1e-15; rtol=None is the array API's max(M, N) * eps
    tolerance = rcond if rcond is not None else (1e-15 if rtol is NO_VALUE else rtol)
    if tolerance is not None and (isinstance(tolerance, Traced) or np.ndim(tolerance) != 0):
        raise UnsupportedOperationError("numpy.linalg.pinv: only a constant scalar rcond/rtol is supported "
                                        "on traced arrays")
    return kl.pinv.bind(asarray(a), rtol=None if tolerance is None else float(tolerance))


@implements(np.linalg.lstsq)
def _linalg_lstsq(a, b, rcond=None):
    if rcond is not None and (isinstance(rcond, Traced) or np.ndim(rcond) != 0):
        raise UnsupportedOperationError("numpy.linalg.lstsq: only a constant scalar rcond is supported on traced arrays")
    a, b = asarray(a), asarray(b)
    if a.ndim != 2 or b.ndim not in (1, 2):
        raise np.linalg.LinAlgError("lstsq: a must be 2-D and b 1-D or 2-D")
    return LstsqResult(*_lstsq(a, b, None if rcond is None or rcond < 0 else float(rcond)))


def _lstsq(a, b, rcond):
    """lstsq as (x, residuals, rank, s): the minimum-norm solution is A^+ b.

    Residuals (the squared norms of b - A x) are returned for tall A (rows > columns),
    assuming full column rank; NumPy returns none for a rank-deficient A.
    """
    rows, columns = a.shape[-2], a.shape[-1]
    xp = namespace(a)
    # NumPy's default cutoff: the float64 epsilon (it solves in double precision) times max(M, N)
    tolerance = max(rows, columns) * xp.finfo(xp.float64).eps if rcond is None else rcond
    solution = kl.matmul.bind(kl.pinv.bind(a, rtol=tolerance), b)
    s = kl.svd_values.bind(a)
    top = largest(s, axis=-1, keepdims=True) if s.shape[-1] else 0.0
    kept = ew.greater.bind(s, ew.multiply.bind(top, tolerance))
    rank = ew.astype.bind(total(kept, axis=-1, dtype=xp.int32), dtype=xp.int32)  # LAPACK's int32, as NumPy
    if rows > columns:
        misfit = ew.subtract.bind(b, kl.matmul.bind(a, solution))
        squares = ew.multiply.bind(misfit, misfit)
        if dtype_kind(misfit.dtype) == "c":  # |misfit|^2, real as NumPy's
            squares = ew.real.bind(ew.multiply.bind(ew.conj.bind(misfit), misfit))
        residuals = total(squares, axis=-2 if b.ndim > 1 else -1,
                           keepdims=b.ndim == 1)
    else:
        residuals = xp.zeros((0,), dtype=s.dtype, device=device_of(a))  # real, as the singular values
    return solution, residuals, rank, s


@implements(np.linalg.matrix_power)
def _linalg_matrix_power(a, n):
    a = asarray(a)
    if a.ndim < 2:
        raise np.linalg.LinAlgError(f"{a.ndim}-dimensional array given. Array must be at least two-dimensional")
    if a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError("Last 2 dimensions of the array must be square")
    try:
        n = operator.index(n)
    except TypeError as error:
        raise TypeError("exponent must be an integer") from error
    return _matrix_power(a, n)


def _matrix_power(a, n):
    """``a`` multiplied by itself ``n`` times (``n`` a Python int), in NumPy's order of
    products: n = 0 is the identity (a constant), n < 0 the power of ``inv(a)``, and
    beyond 3 the powers of two of ``a`` are multiplied in by the bits of ``n``."""
    if n == 0:
        xp = namespace(a)
        identity = xp.eye(a.shape[-1], dtype=xp.bool, device=device_of(a))
        return ew.where.bind(identity, ones_like.bind(a), zeros_like.bind(a))
    if n < 0:
        a, n = kl.inv.bind(a), -n
    if n == 1:
        return a
    if n == 2:
        return kl.matmul.bind(a, a)
    if n == 3:
        return kl.matmul.bind(kl.matmul.bind(a, a), a)
    power = result = None
    while n > 0:
        power = a if power is None else kl.matmul.bind(power, power)
        n, bit = divmod(n, 2)
        if bit:
            result = power if result is None else kl.matmul.bind(result, power)
    return result


# --- trace, cross, kron --------------------------------------------------------------------------
@implements(np.trace)
def _trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """The sum of a diagonal (the two axes leave)."""
    return total(diagonal(asarray(a), offset, axis1, axis2), axis=-1, dtype=dtype)


@implements(np.cross)
def _cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """The cross product of 3-vectors along the given axes, broadcast over the others."""
    a, b = asarray(a), asarray(b)
    if axis is not None:
        axisa = axisb = axisc = axis
    a = kcore.moveaxis(_strong(a, b), axisa, -1)
    b = kcore.moveaxis(_strong(b, a), axisb, -1)
    if a.shape[-1] != 3 or b.shape[-1] != 3:
        raise ValueError("cross: incompatible dimensions for cross product (the vectors must have "
                         "3 components; 2-vectors are deprecated by NumPy and not supported)")
    a0, a1, a2 = (getitem_static(a, (Ellipsis, k)) for k in range(3))
    b0, b1, b2 = (getitem_static(b, (Ellipsis, k)) for k in range(3))

    def minor(p, q, r, s):
        return ew.subtract.bind(ew.multiply.bind(p, q), ew.multiply.bind(r, s))

    components = (minor(a1, b2, a2, b1), minor(a2, b0, a0, b2), minor(a0, b1, a1, b0))
    return kcore.moveaxis(ks.stack.bind(*components, axis=components[0].ndim), -1, axisc)


@implements(np.kron)
def _kron(a, b):
    """The Kronecker product: axis ``k`` of the result indexes (a's k, b's k) pairs."""
    a, b = asarray(a), asarray(b)
    a, b = _strong(a, b), _strong(b, a)
    rank = max(a.ndim, b.ndim)
    a_shape = (1,) * (rank - a.ndim) + tuple(a.shape)
    b_shape = (1,) * (rank - b.ndim) + tuple(b.shape)
    a = kcore.reshape.bind(a, shape=tuple(n for size in a_shape for n in (size, 1)))
    b = kcore.reshape.bind(b, shape=tuple(n for size in b_shape for n in (1, size)))
    return kcore.reshape.bind(ew.multiply.bind(a, b), shape=tuple(p * q for p, q in zip(a_shape, b_shape)))


# --- numpy.linalg's array-API names --------------------------------------------------------------
@implements(np.linalg.matmul)
def _linalg_matmul(x1, x2, /):
    return kl.matmul.bind(asarray(x1), asarray(x2))


@implements(np.linalg.tensordot)
def _linalg_tensordot(x1, x2, /, *, axes=2):
    return tensordot(asarray(x1), asarray(x2), axes)


@implements(np.linalg.outer)
def _linalg_outer(x1, x2, /):
    """``np.outer`` of two vectors (no flattening: both must be 1-D)."""
    x1, x2 = at_least_1d(x1, x2), at_least_1d(x2, x1)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"Input arrays must be one-dimensional, but they are x1.ndim={x1.ndim} and x2.ndim={x2.ndim}.")
    return _outer(x1, x2)


@implements(np.linalg.cross)
def _linalg_cross(x1, x2, /, *, axis=-1):
    """``np.cross`` of 3-vectors along ``axis`` of both inputs (and of the result)."""
    x1, x2 = asarray(x1), asarray(x2)
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError("Both input arrays must be (arrays of) 3-dimensional vectors, "
                         f"but they are {x1.shape[axis]} and {x2.shape[axis]} dimensional instead.")
    return _cross(x1, x2, axis=axis)


@implements(np.linalg.diagonal)
def _linalg_diagonal(x, /, *, offset=0):
    """The diagonals of the matrices on the last two axes."""
    return diagonal(asarray(x), offset, -2, -1)


@implements(np.linalg.trace)
def _linalg_trace(x, /, *, offset=0, dtype=None):
    """The traces of the matrices on the last two axes."""
    return _trace(x, offset, -2, -1, dtype)


@implements(np.linalg.vecdot)
def _linalg_vecdot(x1, x2, /, *, axis=-1):
    """``sum(conj(x1) * x2)`` along ``axis`` of each input (the vectors, of equal length),
    broadcast over the other axes."""
    x1, x2 = at_least_1d(x1, x2), at_least_1d(x2, x1)
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError("vecdot: the inputs must have at least one dimension (the vectors' axis)")
    x1, x2 = kcore.moveaxis(x1, axis, -1), kcore.moveaxis(x2, axis, -1)
    if x1.shape[-1] != x2.shape[-1]:
        raise ValueError(f"vecdot: the vectors have different lengths, {x1.shape[-1]} and {x2.shape[-1]}")
    return _vecdot(x1, x2)  # NumPy's own is np.vecdot along the axis


# --- multi_dot, tensorsolve, tensorinv, cond, matrix_rank ----------------------------------------
@implements(np.linalg.multi_dot)
def _linalg_multi_dot(arrays, *, out=None):
    """The product of a chain of matrices, in the order of fewest scalar multiplications;
    a 1-D first (last) argument is a row (column) vector and leaves the result."""
    arrays = [at_least_1d(a, *arrays) for a in arrays]
    if len(arrays) < 2:
        raise ValueError("Expecting at least two arrays.")
    if len(arrays) == 2:
        return _dot(arrays[0], arrays[1])
    first_vector, last_vector = arrays[0].ndim == 1, arrays[-1].ndim == 1
    if first_vector:
        arrays[0] = kcore.reshape.bind(arrays[0], shape=(1, arrays[0].shape[0]))
    if last_vector:
        arrays[-1] = kcore.reshape.bind(arrays[-1], shape=(arrays[-1].shape[0], 1))
    for a in arrays:
        if a.ndim != 2:
            raise np.linalg.LinAlgError(f"{a.ndim}-dimensional array given. Array must be two-dimensional")
    split = _chain_order([a.shape[0] for a in arrays] + [arrays[-1].shape[1]])

    def product(i, j):
        if i == j:
            return arrays[i]
        k = split[i, j]
        return kl.matmul.bind(product(i, k), product(k + 1, j))

    result = product(0, len(arrays) - 1)
    if first_vector and last_vector:
        return getitem_static(result, (0, 0))
    if first_vector or last_vector:
        return kcore.reshape.bind(result, shape=(-1,))
    return result


def _chain_order(sizes):
    """Where to split each sub-chain ``i..j`` of matrices (matrix ``k`` is ``sizes[k]`` by
    ``sizes[k + 1]``) so that its product costs the fewest multiplications: the classic
    dynamic programme over chain lengths, ties to the earliest split."""
    count = len(sizes) - 1
    cost, split = {}, {}
    for i in range(count):
        cost[i, i] = 0
    for length in range(2, count + 1):
        for i in range(count - length + 1):
            j = i + length - 1
            best = None
            for k in range(i, j):
                candidate = cost[i, k] + cost[k + 1, j] + sizes[i] * sizes[k + 1] * sizes[j + 1]
                if best is None or candidate < best:
                    best, split[i, j] = candidate, k
            cost[i, j] = best
    return split


@implements(np.linalg.tensorsolve)
def _linalg_tensorsolve(a, b, axes=None):
    """The ``x`` of shape ``a.shape[b.ndim:]`` with ``tensordot(a, x, x.ndim) == b`` (the
    ``axes`` of ``a`` moved last first): a square solve of ``a`` and ``b`` reshaped."""
    a, b = asarray(a), at_least_1d(b, a)
    a = at_least_1d(a, b)
    if axes is not None:
        moved = normalize_axis(tuple(axes), a.ndim)
        a = kcore.transpose.bind(a, axes=tuple(k for k in range(a.ndim) if k not in moved) + moved)
    solution_shape = tuple(a.shape[-(a.ndim - b.ndim):])
    size = int(np.prod(solution_shape, dtype=np.int64))
    if int(np.prod(a.shape, dtype=np.int64)) != size * size:
        raise np.linalg.LinAlgError("Input arrays must satisfy the requirement "
                                    "prod(a.shape[b.ndim:]) == prod(a.shape[:b.ndim])")
    x = _linalg_solve(kcore.reshape.bind(a, shape=(size, size)), kcore.reshape.bind(b, shape=(-1,)))
    return kcore.reshape.bind(x, shape=solution_shape)


@implements(np.linalg.tensorinv)
def _linalg_tensorinv(a, ind=2):
    """The inverse of ``a`` read as a matrix with its first ``ind`` axes as rows, of shape
    ``a.shape[ind:] + a.shape[:ind]``."""
    a = asarray(a)
    if ind <= 0:
        raise ValueError("Invalid ind argument.")
    inverse_shape = tuple(a.shape[ind:]) + tuple(a.shape[:ind])
    rows = int(np.prod(a.shape[ind:], dtype=np.int64))
    inverse = kl.inv.bind(kcore.reshape.bind(a, shape=(rows, -1)))
    return kcore.reshape.bind(inverse, shape=inverse_shape)


@implements(np.linalg.cond)
def _linalg_cond(x, p=None):
    """``norm(x, p) * norm(inv(x), p)`` of each matrix; for ``p`` None, 2 and -2 the ratio
    of the extreme singular values (any shape). A NaN that the input does not explain
    (a singular matrix) becomes inf, as NumPy's."""
    x = asarray(x)
    if x.ndim >= 2 and x.shape[-1] * x.shape[-2] == 0:
        raise np.linalg.LinAlgError("cond is not defined on empty arrays")
    if p is None or (not isinstance(p, str) and p in (2, -2)):
        s = kl.svd_values.bind(x)
        top, bottom = getitem_static(s, (Ellipsis, 0)), getitem_static(s, (Ellipsis, -1))
        with np.errstate(divide="ignore", invalid="ignore"):  # a zero singular value: inf, as NumPy's
            r = ew.divide.bind(bottom, top) if p == -2 else ew.divide.bind(top, bottom)
    else:
        if x.ndim < 2:
            raise np.linalg.LinAlgError(f"{x.ndim}-dimensional array given. Array must be at least two-dimensional")
        if x.shape[-1] != x.shape[-2]:
            raise np.linalg.LinAlgError("Last 2 dimensions of the array must be square")
        x = _inexact(x)
        r = ew.multiply.bind(_linalg_norm(x, p, axis=(-2, -1)), _linalg_norm(kl.inv.bind(x), p, axis=(-2, -1)))
    unexplained = ew.logical_and.bind(ew.isnan.bind(r), ew.logical_not.bind(
        kr.reduce_any.bind(ew.isnan.bind(x), axis=(x.ndim - 2, x.ndim - 1), keepdims=False)))
    return ew.where.bind(unexplained, float("inf"), r)


@implements(np.linalg.matrix_rank)
def _linalg_matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    """The number of singular values above ``tol`` (default: ``rtol`` times the largest,
    ``rtol`` by default ``max(M, N)`` times the epsilon); of a vector, 1 unless all zero.
    An integer: no derivative."""
    if rtol is not None and tol is not None:
        raise ValueError("`tol` and `rtol` can't be both set.")
    A = at_least_1d(A)
    xp = namespace(A)
    if A.ndim < 2:
        return ew.astype.bind(kr.reduce_any.bind(ew.not_equal.bind(A, 0), axis=tuple(range(A.ndim)), keepdims=False),
                              dtype=xp.int64)
    if hermitian:
        s = ew.absolute.bind(kl.eigh_values.bind(A))
    else:
        s = kl.svd_values.bind(A)
    if s.shape[-1] == 0:
        return total(ew.greater.bind(s, 0), axis=-1, dtype=xp.int64)
    if tol is None:
        if rtol is None:
            rtol = max(A.shape[-2:]) * float(np.finfo(_np_dtype(s.dtype)).eps)
        else:
            rtol = _trailing_axis(rtol)
        tol = ew.multiply.bind(largest(s, axis=-1, keepdims=True), rtol)
    else:
        tol = _trailing_axis(tol)
    return total(ew.greater.bind(s, tol), axis=-1, dtype=xp.int64)


def _trailing_axis(value):
    """A tolerance (a number or an array of one per matrix) with a new last axis."""
    value = asarray(value)
    if not hasattr(value, "ndim") or value.ndim == 0:
        return value
    return kcore.expand_dims.bind(value, axis=(value.ndim,))


# --- polynomials ---------------------------------------------------------------------------------
@implements(np.polyval)
def _polyval(p, x):
    p = at_least_1d(p, asarray(x))
    if p.ndim == 0:
        raise TypeError("iteration over a 0-d array")
    return _horner(p, at_least_1d(x, p))


def _horner(p, x):
    """polyval by Horner's rule, ``y = y * x + p[i]`` from ``y = 0``: derivatives reach
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


@implements(np.vander)
def _vander(x, N=None, increasing=False):
    x = at_least_1d(x)
    if x.ndim != 1:
        raise ValueError("x must be a one-dimensional array or sequence.")
    return _vandermonde(x, None if N is None else operator.index(N), bool(increasing))


def _vandermonde(x, n, increasing):
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
        return getitem_static(kcore.expand_dims.bind(x, axis=(1,)), (slice(None), slice(0, 0)))
    columns = [ones_like.bind(x)]
    for _ in range(1, count):
        columns.append(x if len(columns) == 1 else ew.multiply.bind(columns[-1], x))
    if not increasing:
        columns.reverse()
    return ks.stack.bind(*columns, axis=1)


@implements(np.polyfit)
def _polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """The least-squares polynomial of degree ``deg`` through ``(x, y)`` (each column of a
    2-D ``y``), highest power first: lstsq of the Vandermonde matrix (rows weighted by
    ``w``) with its columns scaled to unit norm, as NumPy's; differentiable in x, y and w.
    ``full=True`` returns (c, residuals, rank, singular values, rcond), ``cov`` the
    covariance of the coefficients too. A rank warning needs a rank known without a
    transform of x or w."""
    order = int(deg) + 1
    x, y = _inexact_copy(x, y), _inexact_copy(y, x)
    if deg < 0:
        raise ValueError("expected deg >= 0")
    if x.ndim != 1:
        raise TypeError("expected 1D vector for x")
    if x.shape[0] == 0:
        raise TypeError("expected non-empty vector for x")
    if y.ndim < 1 or y.ndim > 2:
        raise TypeError("expected 1D or 2D array for y")
    if x.shape[0] != y.shape[0]:
        raise TypeError("expected x and y to have same length")
    if rcond is None:
        rcond = x.shape[0] * np.finfo(_np_dtype(x.dtype)).eps  # a NumPy scalar, as full=True returns it
    elif isinstance(rcond, Traced) or np.ndim(rcond) != 0:
        raise UnsupportedOperationError("numpy.polyfit: only a constant scalar rcond is supported on traced arrays")
    lhs, rhs = _vandermonde(x, order, False), y
    if w is not None:
        w = _inexact_copy(w, x)
        if w.ndim != 1:
            raise TypeError("expected a 1-d array for weights")
        if w.shape[0] != y.shape[0]:
            raise TypeError("expected w and y to have the same length")
        column = kcore.expand_dims.bind(w, axis=(1,))
        lhs = _in_place(ew.multiply.bind(lhs, column), lhs)  # NumPy scales in place: the dtypes stay
        rhs = _in_place(ew.multiply.bind(rhs, column if rhs.ndim == 2 else w), rhs)
    scale = ew.sqrt.bind(total(ew.multiply.bind(lhs, lhs), axis=0))
    lhs = _in_place(ew.divide.bind(lhs, scale), lhs)
    c, residuals, rank, s = _lstsq(lhs, rhs, float(rcond))
    c = ew.divide.bind(c, scale if c.ndim == 1 else kcore.expand_dims.bind(scale, axis=(1,)))
    rank_known = not isinstance(rank, Traced)
    if rank_known and int(rank) != order and not full:
        warnings.warn("Polyfit may be poorly conditioned", np.exceptions.RankWarning, stacklevel=4)
    if full:
        if rank_known and int(rank) != order:  # NumPy's lstsq gives no residuals then
            residuals = getitem_static(residuals, (slice(0, 0),))
        return c, residuals, rank, s, rcond
    if not cov:
        return c
    covariance = kl.inv.bind(kl.matmul.bind(kl.transpose_last2(lhs), lhs))
    covariance = ew.divide.bind(covariance, _outer(scale, scale))
    if cov == "unscaled":
        return c, covariance
    if x.shape[0] <= order:
        raise ValueError("the number of data points must exceed order to scale the covariance matrix")
    factor = ew.divide.bind(residuals, x.shape[0] - order)
    if y.ndim == 2:
        covariance = kcore.expand_dims.bind(covariance, axis=(2,))
    return c, ew.multiply.bind(covariance, factor)


def _inexact_copy(value, other):
    """``value + 0.0``: integers and booleans as float64, the rest unchanged."""
    value = at_least_1d(value, asarray(other))
    return _inexact(value)


def _in_place(result, target):
    """``result`` in the dtype of ``target``, as an in-place operation into it would write it."""
    return result if result.dtype == target.dtype else ew.astype.bind(result, dtype=target.dtype)


# --- correlation and convolution of vectors ------------------------------------------------------
_MODES = {"valid": "valid", "same": "same", "full": "full", 0: "valid", 1: "same", 2: "full"}


def _mode(mode):
    try:
        return _MODES[mode]
    except (KeyError, TypeError):
        raise ValueError(f"mode must be one of 'valid', 'same', or 'full' (got {mode!r})") from None


def _vector(value, other, promote_scalar):
    value = at_least_1d(value, asarray(other))
    if value.ndim == 0 and promote_scalar:
        value = kcore.reshape.bind(value, shape=(1,))
    if value.ndim == 0:
        raise ValueError("object of too small depth for desired array")
    if value.ndim > 1:
        raise ValueError("object too deep for desired array")
    return value


@implements(np.correlate)
def _correlate(a, v, mode="valid"):
    """``c[k] = sum_n a[n + k] conj(v[n])``, the entries that ``mode``
    keeps of the full correlation (centred as NumPy's when ``len(v) > len(a)``)."""
    a, v = _vector(a, v, False), _vector(v, a, False)
    mode = _mode(mode)
    if a.shape[0] == 0:
        raise ValueError("first array argument cannot be empty")
    if v.shape[0] == 0:
        raise ValueError("second array argument cannot be empty")
    if dtype_kind(v.dtype) == "c":
        v = ew.conj.bind(v)
    return _correlation(a, v, mode, inverted=a.shape[0] < v.shape[0])


@implements(np.convolve)
def _convolve(a, v, mode="full"):
    """The correlation of the longer input with the shorter one reversed."""
    a, v = _vector(a, v, True), _vector(v, a, True)
    mode = _mode(mode)
    if a.shape[0] == 0:
        raise ValueError("a cannot be empty")
    if v.shape[0] == 0:
        raise ValueError("v cannot be empty")
    if v.shape[0] > a.shape[0]:
        a, v = v, a
    return _correlation(a, ks.flip.bind(v, axis=(0,)), mode, inverted=False)


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


def _sliding_products(a, v, start, length):
    """``out[k] = sum_j a_padded[start + k + j] v[j]`` for ``k < length``, with ``a`` padded by
    ``len(v) - 1`` zeros on each side: entries ``start:start + length`` of the full
    correlation, as windows of ``a`` times ``v``."""
    xp = namespace(a, v)
    common = xp.result_type(a.dtype, v.dtype)
    a = a if a.dtype == common else ew.astype.bind(a, dtype=common)
    v = v if v.dtype == common else ew.astype.bind(v, dtype=common)
    size = v.shape[0]
    padded = ki.pad.bind(a, pad_width=((size - 1, size - 1),), constant_values=((0, 0),))
    padded = getitem_static(padded, (slice(start, start + length + size - 1),))
    windows = ks.sliding_window_view.bind(padded, window_shape=(size,), axis=(0,))
    return kl.matmul.bind(windows, v)


# --- covariance and correlation coefficients -----------------------------------------------------
@implements(np.cov)
def _cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *, dtype=None):
    if ddof is not None and ddof != int(ddof):
        raise ValueError("ddof must be integer")
    m, y, dtype = _cov_inputs(m, y, dtype)
    if ddof is None:
        ddof = 0 if bias else 1
    count = m.shape[-1] if rowvar or m.ndim == 1 else m.shape[0]
    fweights = _observation_weights(fweights, "fweights", count, True, m)
    aweights = _observation_weights(aweights, "aweights", count, False, m)
    return _covariance(m, y, bool(rowvar), int(ddof), fweights, aweights, dtype)


@implements(np.corrcoef)
def _corrcoef(x, y=None, rowvar=True, *, dtype=None):
    """The covariance scaled by the standard deviations on its diagonal, clipped to
    [-1, 1]; a single variable gives c / c (1, or NaN)."""
    x, y, dtype = _cov_inputs(x, y, dtype)
    c = _covariance(x, y, bool(rowvar), 1, None, None, dtype)
    if c.ndim == 0:
        return ew.divide.bind(c, c)
    if dtype_kind(c.dtype) == "c":
        raise NotImplementedError("corrcoef: complex inputs are not supported")
    stddev = ew.sqrt.bind(diagonal(c))
    c = ew.divide.bind(c, kcore.expand_dims.bind(stddev, axis=(1,)))
    c = ew.divide.bind(c, kcore.expand_dims.bind(stddev, axis=(0,)))
    return clip(c, -1, 1)


def _cov_inputs(m, y, dtype):
    m = at_least_1d(m)
    if m.ndim > 2:
        raise ValueError("m has more than 2 dimensions")
    if y is not None:
        y = at_least_1d(y)
        if y.ndim > 2:
            raise ValueError("y has more than 2 dimensions")
    arrays = [m] if y is None else [m, y]
    return m, y, _statistics_dtype(arrays, dtype)


def _statistics_dtype(arrays, dtype):
    """The dtype NumPy's cov computes in (at least float64 unless given), in the namespace
    of the arrays."""
    xp = namespace(*arrays)
    if dtype is None:
        dtype = np.result_type(*[np.dtype(getattr(a.dtype, "_np_dtype", a.dtype)) for a in arrays], np.float64)
    if not isinstance(dtype, np.dtype) and isinstance(getattr(dtype, "_np_dtype", None), np.dtype):
        return dtype  # already the namespace's
    return namespace_dtype(xp, np.dtype(dtype))


def _observation_weights(weights, name, count, frequencies, like):
    """NumPy's checks of fweights / aweights (on constants; traced weights are used as
    given), as float64 arrays of the namespace of ``like``."""
    if weights is None:
        return None
    weights = asarray(weights)
    if isinstance(weights, Traced):
        if weights.ndim > 1:
            raise RuntimeError(f"cannot handle multidimensional {name}")
        if weights.shape[0] != count:
            raise RuntimeError(f"incompatible numbers of samples and {name}")
        xp = namespace(weights)
        return weights if weights.dtype == xp.float64 else ew.astype.bind(weights, dtype=xp.float64)
    xp = namespace(like)
    weights = xp.asarray(weights, dtype=xp.float64)  # in the library of the data (CuPy stays on the GPU)
    if frequencies and any_true(weights != xp.round(weights)):
        raise TypeError("fweights must be integer")
    if weights.ndim > 1:
        raise RuntimeError(f"cannot handle multidimensional {name}")
    if weights.shape[0] != count:
        raise RuntimeError(f"incompatible numbers of samples and {name}")
    if any_true(weights < 0):
        raise ValueError(f"{name} cannot be negative")
    return weights


def _variables_as_rows(x, rowvar, dtype, transpose_unless_single_row):
    """``x`` cast to ``dtype``, at least 2-D, one variable per row."""
    if x.dtype != dtype:
        x = ew.astype.bind(x, dtype=dtype)
    if x.ndim == 1:
        x = kcore.reshape.bind(x, shape=(1,) + tuple(x.shape))
    elif not rowvar and transpose_unless_single_row(x):
        x = kl.transpose_last2(x)
    return x


def _covariance(m, y, rowvar, ddof, fweights, aweights, dtype):
    """The (weighted) covariance of the rows of ``m`` (and ``y``), in ``dtype``.

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
        x = ks.concatenate.bind(x, y, axis=0)
    weights = fweights
    if aweights is not None:
        weights = aweights if weights is None else ew.multiply.bind(weights, aweights)
    observations = x.shape[1]
    if weights is None:
        centre = mean(x, axis=1)
        fact = observations - ddof
    else:
        centre, weight_sums = average(x, axis=1, weights=weights, returned=True)
        weight_total = getitem_static(weight_sums, (0,))
        if ddof == 0:
            fact = weight_total
        elif aweights is None:
            fact = ew.subtract.bind(weight_total, ddof)
        else:
            spread = ew.divide.bind(total(ew.multiply.bind(weights, aweights)), weight_total)
            fact = ew.subtract.bind(weight_total, ew.multiply.bind(ddof, spread))
    if not isinstance(fact, Traced) and bool(fact <= 0):
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=4)
        fact = 0.0
    centred = ew.subtract.bind(x, kcore.expand_dims.bind(centre, axis=(1,)))
    weighted = centred if weights is None else ew.multiply.bind(centred, weights)
    right = kl.transpose_last2(weighted)
    if dtype_kind(right.dtype) == "c":
        right = ew.conj.bind(right)
    c = kl.matmul.bind(centred, right)
    scale = ew.divide.bind(1, fact) if isinstance(fact, Traced) else float(np.true_divide(1, fact))
    scaled = ew.multiply.bind(c, scale)
    c = scaled if scaled.dtype == c.dtype else ew.astype.bind(scaled, dtype=c.dtype)  # NumPy scales in place
    ones = tuple(axis for axis, size in enumerate(c.shape) if size == 1)
    return kcore.squeeze.bind(c, axis=ones) if ones else c


# --- NumPy 2's vector gufuncs: vecdot, matvec, vecmat ----------------------------------------------
# Ufuncs with a signature, so they arrive through __array_ufunc__ (as matmul); each is a matmul of
# vectors made rows or columns, over the broadcast stack axes.
def _gufunc_operand(value, name, position, rank=1):
    """An operand of at least ``rank`` axes (1: a vector, 2: a matrix), else NumPy's ValueError."""
    value = asarray(value)
    if getattr(value, "ndim", 0) < rank:
        raise ValueError(f"numpy.{name}: Input operand {position} does not have enough dimensions "
                         f"(has {getattr(value, 'ndim', 0)}, gufunc core with signature needs {rank})")
    return value


def _conjugated(value):
    return ew.conj.bind(value) if dtype_kind(value.dtype) == "c" else value


@implements_ufunc(np.vecdot)
def _vecdot(x1, x2):
    """``sum(conj(x1) * x2)`` over the last axis: the conjugate of a complex ``x1`` (as np.vdot)."""
    x1, x2 = _gufunc_operand(x1, "vecdot", 0), _gufunc_operand(x2, "vecdot", 1)
    row = kcore.expand_dims.bind(_conjugated(x1), axis=(x1.ndim - 1,))
    out = kl.matmul.bind(row, kcore.expand_dims.bind(x2, axis=(x2.ndim,)))
    return kcore.squeeze.bind(out, axis=(out.ndim - 2, out.ndim - 1))


@implements_ufunc(np.matvec)
def _matvec(x1, x2):
    """The matrices of ``x1`` (..., m, n) times the vectors of ``x2`` (..., n): (..., m)."""
    x1, x2 = _gufunc_operand(x1, "matvec", 0, 2), _gufunc_operand(x2, "matvec", 1)
    out = kl.matmul.bind(x1, kcore.expand_dims.bind(x2, axis=(x2.ndim,)))
    return kcore.squeeze.bind(out, axis=(out.ndim - 1,))


@implements_ufunc(np.vecmat)
def _vecmat(x1, x2):
    """The conjugated vectors of ``x1`` (..., n) times the matrices of ``x2`` (..., n, m): (..., m)."""
    x1, x2 = _gufunc_operand(x1, "vecmat", 0), _gufunc_operand(x2, "vecmat", 1, 2)
    out = kl.matmul.bind(kcore.expand_dims.bind(_conjugated(x1), axis=(x1.ndim - 1,)), x2)
    return kcore.squeeze.bind(out, axis=(out.ndim - 2,))


@implements(np.einsum_path)
def _einsum_path(*operands, optimize="greedy", einsum_call=False):
    """NumPy's contraction path for the operands' shapes and dtypes (their values are not
    read: each traced operand stands in as a read-only zero array of its shape)."""
    if einsum_call:
        raise UnsupportedOperationError("numpy.einsum_path with einsum_call=True is not supported on traced arrays")
    stand_ins = [_shape_stand_in(op) if isinstance(op, Traced) or hasattr(op, "dims") else op for op in operands]
    return np.einsum_path(*stand_ins, optimize=optimize)


def _shape_stand_in(value):
    dtype = np.dtype(getattr(value.dtype, "_np_dtype", value.dtype))
    return np.broadcast_to(np.zeros((), dtype=dtype), tuple(value.shape))
