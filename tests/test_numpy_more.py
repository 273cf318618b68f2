"""The NumPy functions of ``engine/numpy_more.py`` where users meet them: through xarray,
in the formulas they unblock, and at the edges the operator table cannot express
(per-example directions, sorters, ufunc methods, errors). Their generic checks (vmap vs
loop, derivatives, array_api_strict) are entries of ``opinfo.py``."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

RNG = np.random.default_rng(7)


def spd(batch, n):
    m = RNG.normal(size=(batch, n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


def test_cholesky_log_determinant_and_its_gradient():
    """2 sum log diag(L) is log det A, and its gradient is A^-1 (per example)."""
    a = spd(4, 3)

    def logdet(m):
        return 2 * np.log(np.diagonal(np.linalg.cholesky(m))).sum()

    values = lf.vmap(logdet, in_dims=(0,))(a)
    np.testing.assert_allclose(values, np.linalg.slogdet(a).logabsdet, rtol=1e-12)
    gradients = lf.vmap(lf.grad(logdet), in_dims=(0,))(a)
    np.testing.assert_allclose(gradients, np.linalg.inv(a), rtol=1e-10, atol=1e-12)


def test_trace_of_a_dataarray_matrix_under_vmap_and_grad():
    da = xr.DataArray(RNG.normal(size=(3, 4, 4)), dims=("sample", "row", "col"))

    def trace_of_square(x):
        return xr.DataArray(np.trace(x.data @ x.data))

    out = lf.vmap(trace_of_square, dim="sample")(da)
    np.testing.assert_allclose(out.values, [np.trace(m @ m) for m in da.values], rtol=1e-12)
    grad = lf.grad(lambda x: trace_of_square(x))(da.isel(sample=0))
    np.testing.assert_allclose(grad.values, 2 * da.values[0].T, rtol=1e-12)


@pytest.mark.parametrize("function", [np.deg2rad, np.radians, np.rad2deg, np.degrees])
def test_degree_ufuncs_on_a_dataarray(function):
    """Ufuncs reach the tracer through __array_ufunc__, not the array-function table."""
    da = xr.DataArray(RNG.uniform(-180, 180, size=(3, 5)), dims=("sample", "t"))
    out = lf.vmap(function, dim="sample")(da)
    xr.testing.assert_allclose(out, function(da))
    slope = lf.grad(lambda x: function(x).sum())(da)
    np.testing.assert_allclose(slope.values, function(np.ones_like(da.values)), rtol=1e-14)


def test_argmax_over_several_dims_unravels_under_vmap():
    da = xr.DataArray(RNG.normal(size=(3, 4, 5)), dims=("sample", "a", "b"))
    out = lf.vmap(lambda x: x.argmax(dim=["a", "b"]), dim="sample")(da)
    expected = da.argmax(dim=["a", "b"])
    for name in ("a", "b"):
        xr.testing.assert_equal(out[name], expected[name])


def test_unravel_index_fortran_order_and_scalar_shape():
    flat = np.array([[0, 5, 11], [3, 7, 2]])
    rows, cols = lf.vmap(lambda i: np.unravel_index(i, (3, 4), order="F"), in_dims=(0,))(flat)
    expected = np.unravel_index(flat, (3, 4), order="F")
    np.testing.assert_array_equal(rows, expected[0])
    np.testing.assert_array_equal(cols, expected[1])


def test_digitize_with_bins_rising_in_one_example_and_falling_in_another():
    bins = np.array([[-1.0, 0.0, 2.0], [2.0, 0.0, -1.0]])
    x = np.array([-2.0, -1.0, 0.5, 2.0, 3.0])
    for right in (False, True):
        out = lf.vmap(lambda b: np.digitize(x, b, right=right), in_dims=(0,))(bins)
        np.testing.assert_array_equal(out, [np.digitize(x, b, right=right) for b in bins])


def test_searchsorted_with_sorter_and_mapped_sequences():
    sequences = RNG.permutation(np.arange(12.0)).reshape(2, 6)
    values = np.array([[0.5, 3.0, 11.5], [6.0, -1.0, 2.0]])

    def find(seq, v):
        return np.searchsorted(seq, v, sorter=np.argsort(seq))

    out = lf.vmap(find, in_dims=(0, 0))(sequences, values)
    np.testing.assert_array_equal(out, [find(s, v) for s, v in zip(sequences, values)])


def test_interp_derivatives_are_the_slopes_and_the_hat_weights():
    xp = np.array([0.0, 1.0, 3.0])
    fp = np.array([1.0, 3.0, -1.0])
    x = np.array([0.5, 2.0, -1.0, 4.0])
    dx = lf.grad(lambda x: np.interp(x, xp, fp).sum())(x)
    np.testing.assert_allclose(dx, [2.0, -2.0, 0.0, 0.0])
    dfp = lf.grad(lambda fp: np.interp(1.5, xp, fp))(fp)
    np.testing.assert_allclose(dfp, [0.0, 0.75, 0.25])


def test_ufunc_reduce_methods_with_options():
    x = RNG.normal(size=(3, 4, 5))
    x[0, 1, 2] = np.nan
    mask = RNG.random((3, 4, 5)) < 0.7
    cases = [
        (lambda v: np.add.reduce(v, axis=1), x),
        (lambda v: np.multiply.reduce(v, axis=(0, 1), keepdims=True), x),
        (lambda v: np.maximum.reduce(v, axis=None, initial=0.0), x),
        (lambda v: np.fmax.reduce(v, axis=1, initial=-5.0, where=mask[0]), x),
        (lambda v: np.fmin.reduce(v, axis=0), x),
    ]
    for function, values in cases:
        out = lf.vmap(function, in_dims=(0,))(values)
        expected = np.stack([function(v) for v in values])
        np.testing.assert_allclose(out, expected, rtol=1e-12, equal_nan=True)


def test_sum_where_gradient_is_the_mask():
    x = RNG.normal(size=(3, 4))
    mask = RNG.random((3, 4)) < 0.5
    np.testing.assert_array_equal(lf.grad(lambda v: np.sum(v, where=mask, initial=2.0))(x), mask.astype(float))
    mean_grad = lf.grad(lambda v: np.mean(v, where=mask))(x)
    np.testing.assert_allclose(mean_grad, mask / mask.sum())


def test_lstsq_solution_and_gradient_match_the_normal_equations():
    a = RNG.normal(size=(3, 6, 2))
    b = RNG.normal(size=(3, 6))
    solution, residuals, rank, s = lf.vmap(np.linalg.lstsq, in_dims=(0, 0))(a, b)
    for k in range(3):
        x, r, rk, sv = np.linalg.lstsq(a[k], b[k])
        np.testing.assert_allclose(solution[k], x, rtol=1e-12)
        np.testing.assert_allclose(residuals[k], r, rtol=1e-10)
        assert rank[k] == rk
        np.testing.assert_allclose(s[k], sv, rtol=1e-12)
    # x = (A^T A)^-1 A^T b: d sum(x) / d b = A (A^T A)^-1 1
    grad_b = lf.grad(lambda b: np.linalg.lstsq(a[0], b)[0].sum())(b[0])
    np.testing.assert_allclose(grad_b, a[0] @ np.linalg.solve(a[0].T @ a[0], np.ones(2)), rtol=1e-10)


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda x: np.max(x, where=x > 0), ValueError),
        (lambda x: np.interp(x, [0.0, 1.0], [1.0, 2.0], period=2.0), lf.UnsupportedOperationError),
        (lambda x: np.repeat(x, x.astype(int) % 2 + 1), lf.DynamicShapeError),
        (lambda x: np.split(x, 4), ValueError),
        (lambda x: np.cross(x[:2], x[1:3]), ValueError),
        (lambda x: np.linalg.qr(x.reshape(2, 3), mode="complete"), lf.UnsupportedOperationError),
    ],
    ids=["max-where-without-initial", "interp-period", "repeat-mapped-counts", "split-unequal",
         "cross-2-vectors", "qr-complete"],
)
def test_unsupported_or_invalid_calls_raise(call, error):
    with pytest.raises(error):
        lf.vmap(call, in_dims=(0,))(RNG.normal(size=(2, 6)))
