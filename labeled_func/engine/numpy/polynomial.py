"""NumPy's polynomial functions on 1-D coefficient arrays (highest power first): ``polyadd``,
``polysub``, ``polymul``, ``polyder``, ``polyint``, ``poly`` and ``roots``, written with the
other families' handlers, so that they batch and differentiate through them.

Some results follow the values. ``roots`` strips the leading and trailing zeros of its
input and ``polymul`` the leading ones (as NumPy's ``poly1d`` does): under vmap that is
allowed where no example has a zero there, else a DynamicShapeError; lf.jit, which cannot
know them, raises it too; under grad the primal decides.  ``poly`` of complex roots is real
where they come in conjugate pairs: its dtype follows the values (a DynamicShapeError under
vmap and lf.jit).
"""
from __future__ import annotations

import operator

import numpy as np

from labeled_func_kernels import core as kcore
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import shape as ks
from labeled_func_kernels.backend import any_true, dtype_kind, namespace
from labeled_func_kernels.creation import zeros_like
from labeled_func_kernels.indexing import getitem_static
from labeled_func_kernels.primitive import known

from .. import diagnose
from ..errors import DynamicShapeError
from ..stack import is_batched
from .dispatch import asarray, implements, unlabeled
from .dynamic import fixed, refuse_value_dtype

__all__: list = []


def _vector(p):
    """``p`` as a 1-D array (a number or 0-d array as one coefficient)."""
    p = asarray(unlabeled(p))
    if not hasattr(p, "ndim"):
        p = np.asarray(p)
    return kcore.reshape.bind(p, shape=(1,)) if p.ndim == 0 else p


def _padded(p, length):
    """``p`` with zeros in front, to ``length`` coefficients."""
    missing = length - p.shape[0]
    return p if missing <= 0 else ks.concatenate.bind(zeros_like.bind(p, shape=(missing,)), p, axis=0)


@implements(np.polyadd)
def _polyadd(a1, a2):
    """The sum, the shorter padded with leading zeros."""
    a1, a2 = _vector(a1), _vector(a2)
    length = max(a1.shape[0], a2.shape[0])
    return ew.add.bind(_padded(a1, length), _padded(a2, length))


@implements(np.polysub)
def _polysub(a1, a2):
    """The difference, the shorter padded with leading zeros."""
    a1, a2 = _vector(a1), _vector(a2)
    length = max(a1.shape[0], a2.shape[0])
    return ew.subtract.bind(_padded(a1, length), _padded(a2, length))


@implements(np.polymul)
def _polymul(a1, a2):
    """The product: the convolution of the coefficients, after NumPy strips the leading
    zeros of each (its ``poly1d``).  A mapped input must have a non-zero first coefficient in
    every example (else DynamicShapeError: ``np.convolve`` is the product without the
    strip); under grad the primal decides."""
    a1 = _stripped(_vector(a1), "numpy.polymul", front=True, back=False)[0]
    a2 = _stripped(_vector(a2), "numpy.polymul", front=True, back=False)[0]
    return np.convolve(a1, a2)


def _stripped(p, name, *, front, back):
    """``p`` without its leading (``front``) and trailing (``back``) zero coefficients, and
    how many trailing ones were cut; a 1-D ``p`` of zeros only keeps its last one.  Under
    vmap the zeros differ per example: allowed where no example has one at a stripped end,
    else a DynamicShapeError; lf.jit cannot know them (DynamicShapeError); under grad and
    jvp the primal decides."""
    length = p.shape[0]
    if is_batched(p) and known(p):
        ends = [getitem_static(p, (slice(0, 1),))] * front + [getitem_static(p, (slice(-1, None),))] * back
        if length and any_true(ew.equal.bind(ks.concatenate.bind(*ends, axis=0), 0)):
            site = diagnose.call_site()
            where = f" (called from {site.location})" if site.location else ""
            ends_named = " and ".join(["leading"] * front + ["trailing"] * back)
            raise DynamicShapeError(
                f"{name} under vmap{where}: NumPy strips the {ends_named} zero coefficients of its input, and some "
                "example has one, so the output's length would differ per example. Pass coefficients whose "
                f"{' and '.join(['first'] * front + ['last'] * back)} entries are non-zero in every example"
                + (", or np.convolve (the product without the strip)." if name == "numpy.polymul" else "."))
        return p, 0
    nonzero = np.flatnonzero(fixed(p, f"{name} (it strips zero coefficients)"))
    if nonzero.size == 0:
        return getitem_static(p, (slice(length - 1, None),)), 0
    first = int(nonzero[0]) if front else 0
    last = int(nonzero[-1]) if back else length - 1
    return getitem_static(p, (slice(first, last + 1),)), length - 1 - last


@implements(np.polyder)
def _polyder(p, m=1):
    """The ``m``-th derivative: ``p[:-1] * [n, ..., 1]``, ``m`` times."""
    m = operator.index(m)
    if m < 0:
        raise ValueError("Order of derivative must be positive (see polyint)")
    p = asarray(unlabeled(p))
    for _ in range(m):
        n = p.shape[0] - 1
        p = ew.multiply.bind(getitem_static(p, (slice(None, -1),)), np.arange(n, 0, -1))
    return p


@implements(np.polyint)
def _polyint(p, m=1, k=None):
    """The ``m``-th antiderivative: ``p / [n, ..., 1]`` then the constant ``k[j]``, ``m`` times
    (``k`` a number, or one constant per integration; zeros by default)."""
    m = operator.index(m)
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    if k is None:
        k = np.zeros(m, float)
    k = _vector(k)
    if k.shape[0] == 1 and m > 1:
        k = kcore.broadcast_to.bind(k, shape=(m,))
    if k.shape[0] < m:
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or >m.")
    p = asarray(unlabeled(p))
    for j in range(m):
        constant = getitem_static(k, (slice(j, j + 1),))
        p = np.concatenate((ew.divide.bind(p, np.arange(p.shape[0], 0, -1)), constant))
    return p


@implements(np.poly)
def _poly(seq_of_zeros):
    """The monic polynomial with these roots (or a square matrix's eigenvalues): the
    coefficients multiplied by ``x - r`` root after root.  Complex roots that come in
    conjugate pairs give real coefficients, as in NumPy: that dtype follows the values, so
    under vmap and lf.jit complex roots are a DynamicShapeError; under grad the primal decides."""
    zeros = _vector(seq_of_zeros)
    shape = tuple(zeros.shape)
    if len(shape) == 2 and shape[0] == shape[1] and shape[0] != 0:
        zeros = np.linalg.eigvals(zeros)
    elif len(shape) == 1:
        np_dtype = np.dtype(getattr(zeros.dtype, "_np_dtype", zeros.dtype))
        if np_dtype.kind not in "fc":
            zeros = ew.astype.bind(zeros, dtype=namespace(zeros).float64)
    else:
        raise ValueError("input must be 1d or non-empty square 2d array.")
    count = zeros.shape[0]
    if count == 0:
        return 1.0
    coefficients = kcore.reshape.bind(getitem_static(zeros, (0,)), shape=(1,))
    coefficients = ks.concatenate.bind(_ones(coefficients), ew.negative.bind(coefficients), axis=0)
    for i in range(1, count):
        root = getitem_static(zeros, (i,))
        shifted = ew.multiply.bind(root, coefficients)
        coefficients = ew.subtract.bind(ks.concatenate.bind(coefficients, _zeros(coefficients, 1), axis=0),
                                        ks.concatenate.bind(_zeros(coefficients, 1), shifted, axis=0))
    if dtype_kind(coefficients.dtype) != "c":
        return coefficients
    refuse_value_dtype(zeros, "numpy.poly", "of complex roots, whether the coefficients are real (NumPy makes "
                       "them real where the roots come in conjugate pairs)",
                       "Take np.real of the result (or keep it complex) with the roots as an explicit product, "
                       "e.g. np.polymul over the factors [1, -r].")
    values = np.asarray(fixed(zeros, "numpy.poly"), complex)
    if np.all(np.sort(values) == np.sort(values.conjugate())):
        return ew.real.bind(coefficients)
    return coefficients


def _zeros(like, count):
    return zeros_like.bind(like, shape=(count,))


def _ones(like):
    return ew.add.bind(zeros_like.bind(like), 1)


@implements(np.roots)
def _roots(p):
    """The eigenvalues of the companion matrix of ``p`` after NumPy strips its leading and
    trailing zeros (each trailing zero is a root 0).  The number of roots follows the
    values: a mapped ``p`` must have a non-zero first and last coefficient in every example
    (else DynamicShapeError); lf.jit cannot know them (DynamicShapeError); under grad and jvp
    the primal decides, as in NumPy."""
    p = asarray(unlabeled(p))
    if not hasattr(p, "ndim"):
        p = np.asarray(p)
    if p.ndim == 0:
        p = kcore.reshape.bind(p, shape=(1,))
    if p.ndim != 1:
        raise ValueError("Input must be a rank-1 array.")
    if p.shape[0] == 0 or (not is_batched(p) and not np.flatnonzero(fixed(p, "numpy.roots")).size):
        return np.array([])
    p, trailing = _stripped(p, "numpy.roots", front=True, back=True)
    if dtype_kind(p.dtype) not in "fc":
        p = ew.astype.bind(p, dtype=namespace(p).float64)
    size = p.shape[0]
    if size > 1:
        row = ew.negative.bind(ew.divide.bind(getitem_static(p, (slice(1, None),)), getitem_static(p, (0,))))
        np_dtype = np.dtype(getattr(p.dtype, "_np_dtype", p.dtype))
        below = np.eye(size - 2, size - 1, dtype=np_dtype)
        companion = ks.concatenate.bind(kcore.reshape.bind(row, shape=(1, size - 1)), below, axis=0)
        found = np.linalg.eigvals(companion)
    else:
        found = np.array([])
    if trailing:
        found = np.concatenate((found, np.zeros(trailing, np.dtype(getattr(found.dtype, "_np_dtype", found.dtype)))))
    return found
