"""Linear algebra and contractions: vmap vs the per-example loop, JVP vs central
differences, VJP by the inner-product identity, second order (the JVP of an engine
VJP), and vmap on ``array_api_strict``.

Inputs are well conditioned: diagonally dominant matrices for solve/inv/det, SPD ones
for cholesky, distinct eigenvalues and singular values for eigh and svd.  eigh and
cholesky read one triangle of a symmetric matrix, so their derivatives are checked on
``f(A + A^T)``; eigen- and singular vectors, defined up to sign, through the
sign-free products ``v_ij v_kj``.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import array_api_strict
import numpy as np
import pytest

import labeled_func as lf
from ad_helpers import check_jvp, check_vjp, engine_jvp, engine_vjp

BATCH = 3


# --- inputs -----------------------------------------------------------------------------------
def normal(*shape):
    return lambda rng: rng.normal(size=shape)


def well_conditioned(*shape):
    return lambda rng: rng.normal(size=shape) + 2 * shape[-1] * np.eye(shape[-1])


def spd(*shape):
    def make(rng):
        m = rng.normal(size=shape)
        return m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])

    return make


def symmetric_distinct(n):
    """Q diag(w) Q^T with eigenvalues at least 1 apart."""

    def make(rng):
        q, _ = np.linalg.qr(rng.normal(size=(n, n)))
        w = np.arange(1.0, n + 1) * 1.5 + rng.uniform(-0.2, 0.2, size=n)
        return (q * w) @ q.T

    return make


def sym(a):
    return a + np.swapaxes(a, -1, -2)


def sign_free(v):
    """v_ij v_kj: eigen/singular vectors (columns) without their arbitrary signs."""
    return np.einsum("...ij,...kj->...ikj", v, v)


# --- the table ------------------------------------------------------------------------------
@dataclasses.dataclass
class Case:
    name: str
    f: Callable  # for vmap: may return a tuple
    inputs: list
    f_ad: Callable | None = None  # one array out, differentiable everywhere near the inputs

    def __post_init__(self):
        self.f_ad = self.f_ad or self.f


LINALG = [
    Case("solve", np.linalg.solve, [well_conditioned(4, 4), normal(4, 2)]),
    Case("solve-vector", np.linalg.solve, [well_conditioned(4, 4), normal(4)]),
    Case("solve-stack", np.linalg.solve, [well_conditioned(2, 3, 3), normal(2, 3, 2)]),
    Case("inv", np.linalg.inv, [well_conditioned(4, 4)]),
    Case("inv-stack", np.linalg.inv, [well_conditioned(2, 3, 3)]),
    Case("det", np.linalg.det, [well_conditioned(4, 4)]),
    Case("det-stack", np.linalg.det, [well_conditioned(2, 3, 3)]),
    Case("slogdet", lambda a: tuple(np.linalg.slogdet(a)), [normal(4, 4)],
         f_ad=lambda a: np.linalg.slogdet(a).logabsdet),
    Case("cholesky", np.linalg.cholesky, [spd(4, 4)], f_ad=lambda a: np.linalg.cholesky(sym(a))),
    Case("cholesky-upper", lambda a: np.linalg.cholesky(a, upper=True), [spd(2, 3, 3)],
         f_ad=lambda a: np.linalg.cholesky(sym(a), upper=True)),
    Case("eigh", lambda a: tuple(np.linalg.eigh(a)), [symmetric_distinct(4)],
         f_ad=lambda a: np.linalg.eigh(sym(a)).eigenvalues),
    Case("eigh-vectors", lambda a: sign_free(np.linalg.eigh(a).eigenvectors), [symmetric_distinct(4)],
         f_ad=lambda a: sign_free(np.linalg.eigh(sym(a)).eigenvectors)),
    Case("eigh-upper", lambda a: (np.linalg.eigh(a, UPLO="U")[0], sign_free(np.linalg.eigh(a, UPLO="U")[1])),
         [symmetric_distinct(3)],
         f_ad=lambda a: sign_free(np.linalg.eigh(sym(a), UPLO="U").eigenvectors)),
    Case("eigvalsh", np.linalg.eigvalsh, [symmetric_distinct(4)], f_ad=lambda a: np.linalg.eigvalsh(sym(a))),
    Case("svd-square", lambda a: tuple(np.linalg.svd(a)), [normal(4, 4)],
         f_ad=lambda a: np.linalg.svd(a).S),
    Case("svd-values", lambda a: np.linalg.svd(a, compute_uv=False), [normal(5, 3)]),
    Case("svdvals-wide", np.linalg.svdvals, [normal(2, 3, 5)]),
    Case("svd-u-tall", lambda a: sign_free(np.linalg.svd(a, full_matrices=False).U), [normal(5, 3)]),
    Case("svd-u-wide", lambda a: sign_free(np.linalg.svd(a, full_matrices=False).U), [normal(3, 5)]),
    Case("svd-vh-tall", lambda a: sign_free(np.swapaxes(np.linalg.svd(a, full_matrices=False).Vh, -1, -2)),
         [normal(5, 3)]),
    Case("svd-vh-wide", lambda a: sign_free(np.swapaxes(np.linalg.svd(a, full_matrices=False).Vh, -1, -2)),
         [normal(2, 3, 5)]),
    Case("norm", np.linalg.norm, [normal(3, 4)]),
    Case("norm-axis", lambda x: np.linalg.norm(x, axis=1), [normal(3, 4)]),
    Case("norm-axis-keepdims", lambda x: np.linalg.norm(x, axis=-1, keepdims=True), [normal(2, 3, 4)]),
    Case("norm-vector-2", lambda x: np.linalg.norm(x, 2), [normal(5)]),
    Case("norm-fro", lambda x: np.linalg.norm(x, "fro", axis=(0, 2), keepdims=True), [normal(3, 2, 4)]),
    Case("norm-vector-1", lambda x: np.linalg.norm(x, 1), [normal(5)]),
    Case("norm-vector-inf", lambda x: np.linalg.norm(x, np.inf, axis=0), [normal(5, 2)]),
    Case("norm-vector-3", lambda x: np.linalg.norm(x, 3), [normal(5)]),
    Case("norm-nuc", lambda x: np.linalg.norm(x, "nuc"), [normal(4, 3)]),
    Case("norm-matrix-2", lambda x: np.linalg.norm(x, 2, axis=(2, 0)), [normal(4, 2, 3)]),
    Case("norm-matrix-1", lambda x: np.linalg.norm(x, 1), [normal(4, 3)]),
    Case("norm-matrix-inf", lambda x: np.linalg.norm(x, -np.inf, keepdims=True), [normal(4, 3)]),
]

CONTRACTIONS = [
    Case("einsum-matmul", lambda a, b: np.einsum("ij,jk->ik", a, b), [normal(3, 4), normal(4, 2)]),
    Case("einsum-implicit", lambda a, b: np.einsum("ij,jk", a, b), [normal(3, 4), normal(4, 2)]),
    Case("einsum-ellipsis-broadcast", lambda a, b: np.einsum("...ij,...jk->...ik", a, b),
         [normal(1, 3, 4), normal(5, 4, 2)]),
    Case("einsum-ellipsis-implicit", lambda a, b: np.einsum("...i,...i", a, b), [normal(2, 3), normal(3)]),
    Case("einsum-batch", lambda a, b: np.einsum("bij,bjk->bik", a, b), [normal(2, 3, 4), normal(2, 4, 2)]),
    Case("einsum-summed-away", lambda a, b: np.einsum("ijk,kl->jl", a, b), [normal(2, 3, 4), normal(4, 2)]),
    Case("einsum-both-summed", lambda a, b: np.einsum("ij,kl->i", a, b), [normal(3, 4), normal(4, 2)]),
    Case("einsum-size-1-broadcast", lambda a, b: np.einsum("ij,ij->ij", a, b), [normal(1, 3), normal(2, 3)]),
    Case("einsum-size-1-contraction", lambda a, b: np.einsum("ij,jk->ik", a, b), [normal(2, 1), normal(3, 4)]),
    Case("einsum-three", lambda a, b, c: np.einsum("i,ij,j->", a, b, c), [normal(3), normal(3, 4), normal(4)]),
    Case("einsum-outer", lambda a, b: np.einsum("i,j->ij", a, b), [normal(3), normal(4)]),
    Case("einsum-transpose", lambda a: np.einsum("ijk->kij", a), [normal(2, 3, 4)]),
    Case("einsum-diagonal", lambda a: np.einsum("ii->i", a), [normal(4, 4)]),
    Case("einsum-trace", lambda a: np.einsum("ii", a), [normal(4, 4)]),
    Case("einsum-diagonal-times", lambda a, b: np.einsum("ii,ij->ij", a, b), [normal(3, 3), normal(3, 2)]),
    Case("einsum-triple-diagonal", lambda a: np.einsum("iii->i", a), [normal(3, 3, 3)]),
    Case("matmul", np.matmul, [normal(3, 4), normal(4, 2)]),
    Case("matmul-vector-matrix", np.matmul, [normal(4), normal(4, 2)]),
    Case("matmul-matrix-vector", np.matmul, [normal(3, 4), normal(4)]),
    Case("matmul-vector-vector", np.matmul, [normal(4), normal(4)]),
    Case("matmul-broadcast", np.matmul, [normal(2, 1, 3, 4), normal(5, 4, 2)]),
    Case("matmul-vector-stack", np.matmul, [normal(4), normal(5, 4, 2)]),
    Case("matmul-stack-vector", np.matmul, [normal(5, 3, 4), normal(4)]),
    Case("matmul-operator", lambda a, b: a @ b, [normal(2, 3, 4), normal(4, 3)]),
    Case("tensordot", lambda a, b: np.tensordot(a, b, axes=1), [normal(2, 3), normal(3, 4)]),
    Case("tensordot-axes", lambda a, b: np.tensordot(a, b, axes=([1, 0], [0, 2])), [normal(3, 2, 4), normal(2, 5, 3)]),
    Case("dot-matrix-vector", np.dot, [normal(3, 4), normal(4)]),
    Case("dot-nd", np.dot, [normal(2, 3, 4), normal(5, 4, 2)]),
    Case("inner", np.inner, [normal(3, 4), normal(2, 4)]),
    Case("outer", np.outer, [normal(3), normal(2, 2)]),
    Case("vdot", np.vdot, [normal(3, 2), normal(6)]),
]

ALL = LINALG + CONTRACTIONS


def ids(cases):
    return [case.name for case in cases]


def example(case, seed):
    rng = np.random.default_rng(seed)
    return [make(rng) for make in case.inputs]


def stacked(case, seed):
    """BATCH examples of ``case``, stacked on a new axis 0, one list per argument."""
    examples = [example(case, seed + i) for i in range(BATCH)]
    return examples, [np.stack(args) for args in zip(*examples)]


def loop(f, examples, in_dims):
    outputs = [f(*[arg if dim == 0 else examples[0][j] for j, (arg, dim) in enumerate(zip(ex, in_dims))])
               for ex in examples]
    if isinstance(outputs[0], tuple):
        return tuple(np.stack(parts) for parts in zip(*outputs))
    return np.stack(outputs)


def assert_close(actual, expected, to_numpy=np.asarray, rtol=1e-10):
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_close(a, e, to_numpy, rtol)
        return
    actual = to_numpy(actual)
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * 1e-2)


def in_dims_choices(n):
    """All arguments batched, then each one alone unbatched (the others batched)."""
    choices = [(0,) * n]
    if n > 1:
        choices += [tuple(None if j == i else 0 for j in range(n)) for i in range(n)]
    return choices


# --- vmap -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ALL, ids=ids(ALL))
def test_vmap_matches_loop(case):
    examples, batched = stacked(case, seed=10)
    for in_dims in in_dims_choices(len(case.inputs)):
        inputs = [b if dim == 0 else examples[0][j] for j, (b, dim) in enumerate(zip(batched, in_dims))]
        actual = lf.vmap(case.f, in_dims=in_dims)(*inputs)
        assert_close(actual, loop(case.f, examples, in_dims))


def test_nested_vmap_of_solve():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(2, 3, 4, 4)) + 8 * np.eye(4)
    b = rng.normal(size=(2, 3, 4))
    actual = lf.vmap(lf.vmap(np.linalg.solve, in_dims=(0, 0)), in_dims=(0, 0))(a, b)
    expected = np.stack([np.stack([np.linalg.solve(a[i, j], b[i, j]) for j in range(3)]) for i in range(2)])
    np.testing.assert_allclose(actual, expected, rtol=1e-12)


# --- first-order derivatives ----------------------------------------------------------------------
@pytest.mark.parametrize("case", ALL, ids=ids(ALL))
def test_jvp_matches_central_differences(case):
    rng = np.random.default_rng(20)
    check_jvp(case.f_ad, example(case, seed=21), rng, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ALL, ids=ids(ALL))
def test_vjp_inner_product_identity(case):
    rng = np.random.default_rng(30)
    check_vjp(case.f_ad, example(case, seed=31), rng, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("case", ALL, ids=ids(ALL))
def test_vmap_of_engine_derivatives_matches_loop(case):
    """Batching the derivative rules themselves: one VJP / JVP per example vs one vmapped."""
    examples, batched = stacked(case, seed=40)
    rng = np.random.default_rng(41)
    u = rng.normal(size=np.shape(case.f_ad(*examples[0])))
    tangents = [rng.normal(size=np.shape(x)) for x in examples[0]]

    def pulled(*args):
        return tuple(engine_vjp(case.f_ad, list(args), u)[1])

    def pushed(*args):
        return engine_jvp(case.f_ad, list(args), tangents)[1]

    in_dims = (0,) * len(batched)
    assert_close(lf.vmap(pulled, in_dims=in_dims)(*batched), loop(pulled, examples, in_dims), rtol=1e-8)
    assert_close(lf.vmap(pushed, in_dims=in_dims)(*batched), loop(pushed, examples, in_dims), rtol=1e-8)


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


def test_complex_derivatives_say_so():
    a = np.eye(2, dtype=complex) * 3
    with pytest.raises(NotImplementedError, match="complex"):
        engine_vjp(np.linalg.inv, [a], np.ones((2, 2), dtype=complex))


@pytest.mark.parametrize("call", [
    lambda x: np.linalg.svd(x),  # full_matrices=True on a non-square matrix
    lambda x: np.linalg.svd(x, full_matrices=False, hermitian=True),
])
def test_unsupported_svd_options_raise(call):
    with pytest.raises(lf.UnsupportedOperationError):
        lf.vmap(call, in_dims=(0,))(np.ones((2, 4, 3)))


# --- second order: the JVP of an engine VJP ----------------------------------------------------
SECOND_ORDER = [c for c in ALL if c.name in (
    "solve", "solve-vector", "det", "inv", "slogdet", "cholesky", "eigh", "eigh-vectors", "svd-square",
    "svd-u-tall", "svd-vh-wide", "norm-axis", "norm-nuc", "einsum-summed-away", "einsum-diagonal-times",
    "einsum-size-1-contraction", "matmul-broadcast", "matmul-vector-stack")]


@pytest.mark.parametrize("case", SECOND_ORDER, ids=ids(SECOND_ORDER))
def test_second_order_jvp_of_vjp(case):
    primals = example(case, seed=50)
    rng = np.random.default_rng(51)
    u = rng.normal(size=np.shape(case.f_ad(*primals)))
    for position in range(len(primals)):
        def pulled(*args, position=position):
            return engine_vjp(case.f_ad, list(args), u)[1][position]

        check_jvp(pulled, primals, rng, rtol=1e-5, atol=1e-6)


# --- array_api_strict ---------------------------------------------------------------------------
STRICT = [c for c in ALL if not c.name.startswith(("einsum-diagonal", "einsum-trace", "einsum-triple"))]


@pytest.mark.parametrize("case", STRICT, ids=ids(STRICT))
def test_vmap_on_array_api_strict(case):
    examples, batched = stacked(case, seed=60)
    actual = lf.vmap(case.f, in_dims=(0,) * len(batched))(*[array_api_strict.asarray(b) for b in batched])
    assert_close(actual, loop(case.f, examples, (0,) * len(batched)), to_numpy=strict_to_numpy)


def strict_to_numpy(value):
    assert isinstance(value, type(array_api_strict.asarray(0.0))), type(value).__name__
    return np.asarray(value)
