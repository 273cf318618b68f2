"""NumPy functions of ``engine/numpy/`` where users meet them: through xarray,
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
        (lambda x: np.interp(x, [0.0, 1.0], [1.0, 2.0], period=0.0), ValueError),
        (lambda x: np.repeat(x, x.astype(int) % 2 + 1), lf.DynamicShapeError),
        (lambda x: np.split(x, 4), ValueError),
        (lambda x: np.cross(x[:2], x[1:3]), ValueError),
        (lambda x: np.linalg.qr(x.reshape(2, 3), mode="complete"), lf.UnsupportedOperationError),
        (lambda x: np.linalg.matrix_power(x.reshape(2, 3), 2), np.linalg.LinAlgError),
        (lambda x: np.linalg.matrix_power(x.reshape(2, 3)[:, :2], 1.5), TypeError),
        (lambda x: np.diag(x.reshape(1, 2, 3)), ValueError),
        (lambda x: np.fill_diagonal(x, 1.0), ValueError),
        (lambda x: np.fill_diagonal(x.reshape(1, 2, 3), 1.0), ValueError),
        (lambda x: np.correlate(x, x, mode="middle"), ValueError),
        (lambda x: np.convolve(x, x[:0]), ValueError),
        (lambda x: np.vander(x.reshape(2, 3)), ValueError),
        (lambda x: np.take(x, [0], mode="nearest"), ValueError),
    ],
    ids=["max-where-without-initial", "interp-period", "repeat-mapped-counts", "split-unequal",
         "cross-2-vectors", "qr-complete", "matrix-power-not-square", "matrix-power-float-exponent",
         "diag-3d", "fill-diagonal-1d", "fill-diagonal-unequal", "correlate-mode", "convolve-empty",
         "vander-2d", "take-mode"],
)
def test_unsupported_or_invalid_calls_raise(call, error):
    with pytest.raises(error):
        lf.vmap(call, in_dims=(0,))(RNG.normal(size=(2, 6)))


# --- diagonals, polynomials, matrix powers --------------------------------------------------------
def test_diag_builds_and_reads_diagonals_of_a_dataarray_under_vmap():
    da = xr.DataArray(RNG.normal(size=(3, 4)), dims=("sample", "i"))
    out = lf.vmap(lambda v: np.diag(np.diag(v.data, k=-1), k=-1), dim="sample")(da)
    np.testing.assert_array_equal(out, np.stack([np.diag(np.diag(v, k=-1), k=-1) for v in da.values]))
    # d/dv sum(M * diag(v)) = diagonal of M
    weights = RNG.normal(size=(4, 4))
    slope = lf.grad(lambda v: (weights * np.diag(v)).sum())(da.values[0])
    np.testing.assert_allclose(slope, np.diagonal(weights))


def test_fill_diagonal_writes_in_place_into_a_traced_buffer():
    values = RNG.normal(size=(3, 2))

    def with_diagonal(v):
        square = np.outer(v, v)  # traced (2, 2)
        np.fill_diagonal(square, v * 10)
        return square

    out = lf.vmap(with_diagonal, in_dims=(0,))(values)
    expected = []
    for v in values:
        m = np.outer(v, v)
        np.fill_diagonal(m, v * 10)
        expected.append(m)
    np.testing.assert_allclose(out, np.stack(expected))
    # the diagonal no longer depends on the outer product: d/dv sum = 10 + 2 * (off-diagonal partner)
    gradient = lf.grad(lambda v: with_diagonal(v).sum())(values[0])
    np.testing.assert_allclose(gradient, 10 + 2 * values[0][::-1])


def test_fill_diagonal_of_a_plain_buffer_with_a_mapped_value_is_an_inplace_error():
    def write(v):
        buffer = np.zeros((3, 3))
        np.fill_diagonal(buffer, v)
        return buffer

    with pytest.raises(lf.InplaceError):
        lf.vmap(write, in_dims=(0,))(RNG.normal(size=(2, 3)))


def test_polyval_derivatives_are_the_derivative_polynomial_and_the_powers():
    p = RNG.normal(size=4)
    x = RNG.normal(size=5)
    dx = lf.grad(lambda x: np.polyval(p, x).sum())(x)
    np.testing.assert_allclose(dx, np.polyval(np.polyder(p), x), rtol=1e-12)
    dp = lf.jacrev(lambda p: np.polyval(p, x))(p)
    np.testing.assert_allclose(dp, np.vander(x, 4), rtol=1e-12)
    # coefficients mapped, points shared, and the reverse
    ps = RNG.normal(size=(3, 4))
    np.testing.assert_allclose(lf.vmap(np.polyval, in_dims=(0, None))(ps, x), [np.polyval(q, x) for q in ps])


def test_vander_jacobian_is_k_x_to_the_k_minus_1():
    x = np.array([0.0, 0.5, -2.0])
    jacobian = lf.jacfwd(lambda x: np.vander(x, 4, increasing=True))(x)
    for i in range(3):
        for k in range(4):
            expected = k * x[i] ** (k - 1) if k else 0.0
            np.testing.assert_allclose(jacobian[i, k, i], expected)
    assert np.isfinite(jacobian).all()  # no 0 * 0**-1 at x = 0


def test_matrix_power_gradient_and_negative_powers():
    a = RNG.normal(size=(3, 3)) + 3 * np.eye(3)
    # d trace(A^3) / dA = 3 (A^2)^T
    grad = lf.grad(lambda m: np.trace(np.linalg.matrix_power(m, 3)))(a)
    np.testing.assert_allclose(grad, 3 * (a @ a).T, rtol=1e-12)
    stack = np.stack([a, a.T, 2 * a])
    out = lf.vmap(lambda m: np.linalg.matrix_power(m, -2), in_dims=(0,))(stack)
    np.testing.assert_allclose(out, [np.linalg.inv(m @ m) for m in stack], rtol=1e-10)
    identity = lf.vmap(lambda m: np.linalg.matrix_power(m, 0), in_dims=(0,))(stack)
    np.testing.assert_array_equal(identity, np.broadcast_to(np.eye(3), (3, 3, 3)))
    assert not np.any(lf.grad(lambda m: np.linalg.matrix_power(m, 0).sum())(a))


# --- convolution, correlation, covariance ----------------------------------------------------------
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolve_and_correlate_under_vmap_with_either_input_mapped(mode):
    signals = RNG.normal(size=(3, 7))
    kernels_ = RNG.normal(size=(3, 3))
    for function in (np.convolve, np.correlate):
        for in_dims, args in [((0, 0), (signals, kernels_)), ((0, None), (signals, kernels_[0])),
                              ((None, 0), (signals[0], kernels_)), ((0, 0), (kernels_, signals))]:
            out = lf.vmap(lambda a, v: function(a, v, mode), in_dims=in_dims)(*args)
            pick = lambda x, d, b: x[b] if d == 0 else x
            expected = [function(pick(args[0], in_dims[0], b), pick(args[1], in_dims[1], b), mode) for b in range(3)]
            np.testing.assert_allclose(out, np.stack(expected), rtol=1e-12, atol=1e-14)


def test_convolution_gradient_is_a_correlation():
    """d/da sum(w * convolve(a, v)) = correlate(w, v, 'valid'), and symmetrically in v."""
    a, v = RNG.normal(size=6), RNG.normal(size=3)
    w = RNG.normal(size=8)
    ga, gv = lf.grad(lambda a, v: (w * np.convolve(a, v)).sum(), argnums=(0, 1))(a, v)
    np.testing.assert_allclose(ga, np.correlate(w, v, "valid"), rtol=1e-12)
    np.testing.assert_allclose(gv, np.correlate(w, a, "valid"), rtol=1e-12)


def test_cov_and_corrcoef_of_dataarrays_and_their_gradients():
    da = xr.DataArray(RNG.normal(size=(4, 3, 10)), dims=("sample", "var", "obs"))
    out = lf.vmap(lambda x: xr.DataArray(np.cov(x.data), dims=("i", "j")), dim="sample")(da)
    np.testing.assert_allclose(out.transpose("sample", ...).values, [np.cov(x) for x in da.values], rtol=1e-12)
    corr = lf.vmap(lambda x: xr.DataArray(np.corrcoef(x.data), dims=("i", "j")), dim="sample")(da)
    np.testing.assert_allclose(corr.transpose("sample", ...).values, [np.corrcoef(x) for x in da.values],
                               rtol=1e-12)
    x = da.values[0]
    # d trace(cov X) / dX = 2 (X - mean) / (N - 1)
    grad = lf.grad(lambda x: np.trace(np.cov(x)))(x)
    np.testing.assert_allclose(grad, 2 * (x - x.mean(axis=1, keepdims=True)) / (x.shape[1] - 1), rtol=1e-12)
    # a correlation does not change when a variable is scaled: zero derivative along x itself
    direction = np.zeros_like(x)
    direction[1] = x[1]
    _, tangent = lf.jvp(lambda x: np.corrcoef(x), (x,), (direction,))
    np.testing.assert_allclose(tangent, 0.0, atol=1e-12)


def test_cov_with_traced_analytic_weights_matches_numpy_per_example():
    x = RNG.normal(size=(3, 2, 6))
    w = RNG.uniform(0.5, 2.0, size=(3, 6))
    out = lf.vmap(lambda x, w: np.cov(x, aweights=w, fweights=[1, 2, 1, 1, 3, 1]), in_dims=(0, 0))(x, w)
    np.testing.assert_allclose(out, [np.cov(a, aweights=b, fweights=[1, 2, 1, 1, 3, 1]) for a, b in zip(x, w)],
                               rtol=1e-12)


# --- ufuncs with two outputs ---------------------------------------------------------------------
def test_divmod_and_modf_on_dataarrays_and_their_derivatives():
    da = xr.DataArray(RNG.uniform(-5, 5, size=(3, 4)), dims=("sample", "t"))
    quotient, remainder = lf.vmap(lambda x: np.divmod(x, 1.5), dim="sample")(da)
    expected = np.divmod(da, 1.5)
    xr.testing.assert_allclose(quotient, expected[0])
    xr.testing.assert_allclose(remainder, expected[1])
    fraction, whole = lf.vmap(np.modf, dim="sample")(da)
    xr.testing.assert_allclose(fraction, np.modf(da)[0])
    xr.testing.assert_allclose(whole, np.modf(da)[1])
    x, y = da.values[0], np.full(4, 1.5)
    gx, gy = lf.grad(lambda x, y: np.divmod(x, y)[1].sum(), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, 1.0)
    np.testing.assert_allclose(gy, -np.floor(x / y))
    np.testing.assert_allclose(lf.grad(lambda x: np.modf(x)[0].sum())(x), 1.0)
    assert not np.any(lf.grad(lambda x: np.modf(x)[1].sum())(x))


# --- np.take from a constant table -------------------------------------------------------------------
def test_take_from_a_plain_table_at_mapped_indices_points_to_take_along_axis():
    # NumPy dispatches np.take on the table only: a plain table converts traced indices.
    table = np.arange(12.0).reshape(3, 4) ** 2
    index = np.array([[0, 3], [2, 1], [1, 1]])
    with pytest.raises(lf.ConversionError, match=r"numpy\.take.*np\.take_along_axis"):
        lf.vmap(lambda i: np.take(table, i, axis=1), in_dims=(0,))(index)
    # the suggested form dispatches on the indices and matches np.take per example
    out = lf.vmap(lambda i: np.take_along_axis(table, np.broadcast_to(i, (3, 2)), axis=1), in_dims=(0,))(index)
    np.testing.assert_array_equal(out, np.stack([np.take(table, i, axis=1) for i in index]))
    one = lf.vmap(lambda i: np.take_along_axis(table[0], i[None], axis=0)[0], in_dims=(0,))(index[:, 0])
    np.testing.assert_array_equal(one, table[0][index[:, 0]])


def test_take_with_modes_on_a_traced_table():
    table = np.arange(12.0).reshape(3, 4) ** 2
    index = np.array([[0, 3], [2, -1], [1, 1]])
    tables = np.stack([table, 2 * table])
    for mode in ("wrap", "clip"):
        out = lf.vmap(lambda t: np.take(t, index * 4, axis=0, mode=mode), in_dims=(0,))(tables)
        np.testing.assert_array_equal(out, np.stack([np.take(t, index * 4, axis=0, mode=mode) for t in tables]))


def test_take_gradient_reaches_a_traced_table_at_mapped_indices():
    table = RNG.normal(size=5)
    index = np.array([[0, 0], [4, 2]])
    grads = lf.vmap(lf.grad(lambda t, i: np.take(t, i).sum()), in_dims=(None, 0))(table, index)
    np.testing.assert_array_equal(grads, [[2, 0, 0, 0, 0], [0, 0, 1, 0, 1]])


def test_conversion_inside_numpy_without_a_dataarray_does_not_mention_one():
    with pytest.raises(lf.ConversionError) as excinfo:
        lf.vmap(lambda c: np.pad(np.ones(3), 1, constant_values=c), in_dims=(0,))(np.ones(2))
    message = str(excinfo.value)
    assert "numpy.pad" in message and "DataArray" not in message
    assert "dispatches on" in message
    da = xr.DataArray(RNG.normal(size=(2, 3)), dims=("sample", "t"))
    with pytest.raises(lf.ConversionError, match="converts the DataArray"):   # outside NumPy's protocol
        lf.vmap(lambda x: np.asarray_chkfinite(x), dim="sample")(da)
    # inside it, labeled_func.xarray_numpy hands np.take the DataArray's data, as NumPy's own code
    # would hand it the converted values
    np.testing.assert_array_equal(lf.vmap(lambda x: np.take(x, [0, 1]), dim="sample")(da), da.values[:, :2])


# --- scipy.special ----------------------------------------------------------------------------------
def test_ufunc_without_a_kernel_is_named_by_its_home():
    special = pytest.importorskip("scipy.special")
    with pytest.raises(lf.UnsupportedOperationError, match=r"scipy\.special\.ellipk has no kernel"):
        lf.vmap(special.ellipk, in_dims=(0,))(RNG.uniform(size=(2, 3)))
    with pytest.raises(lf.UnsupportedOperationError, match=r"numpy\.bitwise_count has no kernel"):
        lf.vmap(np.bitwise_count, in_dims=(0,))(np.arange(6).reshape(2, 3))


def test_scipy_special_derivatives_against_calculus():
    special = pytest.importorskip("scipy.special")
    x = np.array([-1.5, -0.2, 0.0, 0.7, 2.5])
    positive = np.array([0.3, 1.0, 2.5, 7.0])
    cases = [
        (special.erf, x, lambda x: 2 / np.sqrt(np.pi) * np.exp(-x**2)),
        (special.erfc, x, lambda x: -2 / np.sqrt(np.pi) * np.exp(-x**2)),
        (special.expit, x, lambda x: special.expit(x) * (1 - special.expit(x))),
        (special.logit, np.array([0.1, 0.5, 0.8]), lambda p: 1 / (p * (1 - p))),
        (special.gammaln, positive, special.digamma),
        (special.digamma, positive, lambda x: special.polygamma(1, x)),
    ]
    for function, points, derivative in cases:
        np.testing.assert_allclose(lf.vmap(function, in_dims=(0,))(points), function(points), rtol=1e-14)
        slope = lf.vmap(lf.grad(function), in_dims=(0,))(points)
        np.testing.assert_allclose(slope, derivative(points), rtol=1e-12, err_msg=function.__name__)
    # second derivatives: gammaln'' = polygamma(1), erf'' = -2x erf'
    np.testing.assert_allclose(lf.vmap(lf.grad(lf.grad(special.gammaln)), in_dims=(0,))(positive),
                               special.polygamma(1, positive), rtol=1e-12)
    np.testing.assert_allclose(lf.vmap(lf.grad(lf.grad(special.erf)), in_dims=(0,))(x),
                               -2 * x * 2 / np.sqrt(np.pi) * np.exp(-x**2), rtol=1e-12, atol=1e-15)
    # expit does not overflow in its tails
    with np.errstate(over="raise", invalid="raise"):
        tails = lf.vmap(special.expit, in_dims=(0,))(np.array([-800.0, 800.0]))
    np.testing.assert_array_equal(tails, [0.0, 1.0])


def test_scipy_special_on_a_dataarray():
    special = pytest.importorskip("scipy.special")
    da = xr.DataArray(RNG.normal(size=(3, 4)), dims=("sample", "t"))
    xr.testing.assert_allclose(lf.vmap(special.erf, dim="sample")(da), special.erf(da))
    grad = lf.grad(lambda x: special.expit(x).sum())(da)
    s = special.expit(da.values)
    np.testing.assert_allclose(grad.values, s * (1 - s), rtol=1e-12)


def test_importing_labeled_func_does_not_import_scipy():
    import subprocess
    import sys

    code = "import sys, labeled_func; print('scipy' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
