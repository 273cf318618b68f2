"""Linear algebra beyond the per-entry generic checks.

solve, inv, det, slogdet, cholesky, eigh, eigvalsh, eig, eigvals, svd, svdvals, norm and
the contractions (einsum, matmul, tensordot, dot, inner, outer, vdot) are entries of the
operator table (``opinfo.py``, with its well-conditioned, SPD and distinct-spectrum
matrix families), so the generic tests run them: vmap against the loop, the JVP against
central differences, the VJP by the inner-product identity, second order, jacfwd ==
jacrev and vmap of the derivatives, and vmap on ``array_api_strict``. What stays here
are the edge cases that no sample of a generic test reaches.
"""
from __future__ import annotations

import numpy as np
import pytest

import labeled_func as lf
from ad_helpers import engine_jvp, engine_vjp


def test_nested_vmap_of_solve():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(2, 3, 4, 4)) + 8 * np.eye(4)
    b = rng.normal(size=(2, 3, 4))
    actual = lf.vmap(lf.vmap(np.linalg.solve, in_dims=(0, 0)), in_dims=(0, 0))(a, b)
    expected = np.stack([np.stack([np.linalg.solve(a[i, j], b[i, j]) for j in range(3)]) for i in range(2)])
    np.testing.assert_allclose(actual, expected, rtol=1e-12)


# --- NaN-safety and what is not supported -------------------------------------------------------
def test_norm_derivative_is_zero_at_zero():
    zero = np.zeros((2, 3))
    zero[1] = [3.0, 4.0, 0.0]
    _, (pulled,) = engine_vjp(lambda x: np.linalg.norm(x, axis=1), [zero], np.ones(2))
    np.testing.assert_array_equal(pulled, [[0, 0, 0], [0.6, 0.8, 0.0]])
    _, pushed = engine_jvp(lambda x: np.linalg.norm(x, axis=1), [zero], [np.ones((2, 3))])
    np.testing.assert_allclose(pushed, [0.0, 1.4])


def test_eigenvalue_gradient_survives_repeated_eigenvalues():
    _, (pulled,) = engine_vjp(np.linalg.eigvalsh, [np.eye(3)], np.ones(3))
    np.testing.assert_allclose(pulled, np.eye(3), atol=1e-12)


@pytest.mark.parametrize("name, call", [
    ("cholesky", np.linalg.cholesky),
    ("eigh", lambda a: np.linalg.eigh(a).eigenvectors),
    ("svd", np.linalg.svdvals),
    ("qr", lambda a: np.linalg.qr(a).R),
    ("pinv", np.linalg.pinv),
])
def test_complex_derivatives_not_implemented_say_so(name, call):
    """The decompositions without complex rules raise, naming themselves, in both modes."""
    a = np.array([[3.0, 1j], [-1j, 2.0]])
    out = np.asarray(call(a))
    with pytest.raises(NotImplementedError, match=f"{name}: derivatives of complex inputs"):
        engine_vjp(call, [a], np.ones(out.shape, dtype=out.dtype))
    with pytest.raises(NotImplementedError, match=f"{name}: derivatives of complex inputs"):
        engine_jvp(call, [a], [np.ones((2, 2), dtype=complex)])


@pytest.mark.parametrize("call", [
    lambda x: np.linalg.svd(x),  # full_matrices=True on a non-square matrix
    lambda x: np.linalg.svd(x, full_matrices=False, hermitian=True),
])
def test_unsupported_svd_options_raise(call):
    with pytest.raises(lf.UnsupportedOperationError):
        lf.vmap(call, in_dims=(0,))(np.ones((2, 4, 3)))


@pytest.mark.xfail(
    strict=True,
    reason="known gap: eigh(UPLO='U') on a traced array is eigh(UPLO='L') of the transpose "
    "(engine/numpy/linalg.py), whose eigenvectors may come with other signs than NumPy's "
    "own; the op table compares them sign-free (linalg_eigh_upper)",
)
def test_eigh_upper_eigenvectors_under_vmap_are_numpys():
    a = np.array([[4.0, 1.0, 2.0], [1.0, 3.0, 0.0], [2.0, 0.0, 1.0]])
    actual = lf.vmap(lambda m: np.linalg.eigh(m, UPLO="U").eigenvectors, in_dims=(0,))(a[None])
    np.testing.assert_allclose(actual[0], np.linalg.eigh(a, UPLO="U").eigenvectors, rtol=1e-12, atol=1e-12)
