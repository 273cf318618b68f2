"""numpy.linalg's later functions and np.polyfit where the op table does not reach:
polyfit's derivatives against calculus (the fit is linear in y: its Jacobian is the
pseudo-inverse of the weighted Vandermonde matrix) and central differences, its warning
and ``full=True`` outputs, the derivative of cond, matrix_rank under the transforms,
errors as NumPy's, xarray's DataArray.polyfit under lf.grad and lf.vmap, and einsum's sublist form.
"""
import warnings

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

RNG = np.random.default_rng(2024)
X = np.linspace(-1.5, 2.0, 9) + RNG.uniform(-0.05, 0.05, size=9)
Y = RNG.normal(size=(4, 9))
W = RNG.uniform(0.5, 2.0, size=9)


def vmap(function, *arrays):
    return lf.vmap(function, in_dims=(0,) * len(arrays))(*arrays)


def central_jacobian(function, x, step=1e-6):
    """d function / d x by central differences, of shape out.shape + x.shape."""
    x = np.asarray(x, dtype=float)
    columns = []
    for k in range(x.size):
        dx = np.zeros(x.size)
        dx[k] = step
        dx = dx.reshape(x.shape)
        columns.append((np.asarray(function(x + dx)) - np.asarray(function(x - dx))) / (2 * step))
    return np.moveaxis(np.array(columns), 0, -1).reshape(np.shape(function(x)) + x.shape)


# --- polyfit: derivatives ---------------------------------------------------------------------------
@pytest.mark.parametrize("deg", [1, 3])
@pytest.mark.parametrize("weighted", [False, True])
def test_polyfit_jacobian_in_y_is_the_pseudo_inverse(deg, weighted):
    w = W if weighted else None
    rows = np.vander(X, deg + 1) * (W[:, None] if weighted else 1.0)
    # c = pinv(diag(w) V) diag(w) y: linear in y
    expected = np.linalg.pinv(rows) * (W if weighted else 1.0)
    for jacobian in (lf.jacrev, lf.jacfwd):
        np.testing.assert_allclose(jacobian(lambda y: np.polyfit(X, y, deg, w=w))(Y[0]), expected,
                                   rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("deg, kwargs", [(2, {}), (3, {"w": W}), (2, {"cov": "unscaled"}), (2, {"cov": True})])
def test_polyfit_jacobian_in_x_matches_central_differences(deg, kwargs):
    def fit(x):
        out = np.polyfit(x, Y[1], deg, **kwargs)
        return out[1] if kwargs.get("cov") else out

    expected = central_jacobian(fit, X)
    for jacobian in (lf.jacrev, lf.jacfwd):
        np.testing.assert_allclose(jacobian(fit)(X), expected, rtol=1e-6, atol=1e-7)


def test_polyfit_jacobian_in_the_weights_matches_central_differences():
    fit = lambda w: np.polyfit(X, Y[2], 2, w=w)  # noqa: E731
    expected = central_jacobian(fit, W)
    np.testing.assert_allclose(lf.jacrev(fit)(W), expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(lf.jacfwd(fit)(W), expected, rtol=1e-6, atol=1e-8)


def test_polyfit_of_columns_under_vmap_of_grad_matches_the_loop():
    loss = lambda x, y: (np.polyfit(x, y, 2) ** 2).sum()  # noqa: E731
    ys = Y.reshape(4, 9, 1)[:, :, [0, 0]] * np.array([1.0, -2.0])
    out = lf.vmap(lf.grad(lambda y: (np.polyfit(X, y, 2) ** 2).sum()), in_dims=(0,))(ys)
    for k, y in enumerate(ys):
        # central differences of the per-example loss, entry by entry
        expected = central_jacobian(lambda z: loss(X, z), y)
        np.testing.assert_allclose(out[k], expected, rtol=1e-6, atol=1e-8)


# --- polyfit: full=True, the rank warning ----------------------------------------------------------
def test_polyfit_full_matches_numpy_per_example():
    coefficients, residuals, rank, singular, rcond = vmap(lambda y: np.polyfit(X, y, 3, full=True), Y)
    for k, y in enumerate(Y):
        c, r, n, s, tolerance = np.polyfit(X, y, 3, full=True)
        np.testing.assert_allclose(coefficients[k], c, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(residuals[k], r, rtol=1e-10)
        assert rank[k] == n and np.asarray(rank).dtype == np.asarray(n).dtype
        np.testing.assert_allclose(singular[k], s, rtol=1e-12)
        assert rcond[k] == tolerance


def test_polyfit_of_a_rank_deficient_fit_warns_and_drops_the_residuals_as_numpy():
    x = np.array([0.0, 0.0, 1.0, 1.0, 2.0])  # three distinct points, four coefficients
    y = Y[0, :5]
    with pytest.warns(np.exceptions.RankWarning, match="Polyfit may be poorly conditioned"):
        expected = np.polyfit(x, y, 3)
    with pytest.warns(np.exceptions.RankWarning, match="Polyfit may be poorly conditioned"):
        gradient = lf.grad(lambda y: np.polyfit(x, y, 3).sum())(y)
    with pytest.warns(np.exceptions.RankWarning):
        out = lf.vmap(lambda y: np.polyfit(x, y, 3), in_dims=(0,))(Y[:, :5])
    np.testing.assert_allclose(out[0], expected, rtol=1e-8, atol=1e-10)
    # the minimum-norm solution is still linear in y
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.RankWarning)
        expected_gradient = central_jacobian(lambda z: np.polyfit(x, z, 3).sum(), y)
    np.testing.assert_allclose(gradient, expected_gradient, rtol=1e-6, atol=1e-8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # full=True does not warn, in NumPy or here
        numpy_full = np.polyfit(x, y, 3, full=True)
        ours = lf.jvp(lambda y: np.polyfit(x, y, 3, full=True)[:2], (y,), (np.ones(5),))[0]
    assert numpy_full[1].shape == (0,) and ours[1].shape == (0,)


@pytest.mark.parametrize("call, error, message", [
    (lambda y: np.polyfit(X, y, -1), ValueError, "expected deg >= 0"),
    (lambda y: np.polyfit(np.stack([X, X]), y, 2), TypeError, "expected 1D vector for x"),
    (lambda y: np.polyfit(X[:5], y, 2), TypeError, "expected x and y to have same length"),
    (lambda y: np.polyfit(X, y, 2, w=np.ones((9, 2))), TypeError, "expected a 1-d array for weights"),
    (lambda y: np.polyfit(X, y[:5], 2, cov=True), TypeError, "same length"),
])
def test_polyfit_bad_arguments_raise_as_numpy(call, error, message):
    with pytest.raises(error, match=message):
        call(Y[0])  # NumPy's own
    with pytest.raises(error, match=message):
        vmap(call, Y)


def test_polyfit_with_a_mapped_rcond_names_the_function_and_option():
    with pytest.raises(lf.UnsupportedOperationError, match=r"numpy\.polyfit.*rcond"):
        lf.vmap(lambda y, r: np.polyfit(X, y, 2, rcond=r), in_dims=(0, 0))(Y, np.full(4, 1e-8))


def test_polyfit_scaled_covariance_needs_more_points_than_coefficients():
    with pytest.raises(ValueError, match="must exceed order"):
        np.polyfit(X[:3], Y[0, :3], 2, cov=True)
    with pytest.raises(ValueError, match="must exceed order"):
        vmap(lambda y: np.polyfit(X[:3], y, 2, cov=True), Y[:, :3])


# --- cond --------------------------------------------------------------------------------------------
def well_conditioned(n=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, n)) + 2 * n * np.eye(n)


def test_cond_2_derivative_is_that_of_the_ratio_of_extreme_singular_values():
    a = well_conditioned()
    u, s, vh = np.linalg.svd(a)
    # d(s_1 / s_n) = (u_1 v_1^T) / s_n - s_1 / s_n^2 (u_n v_n^T)
    expected = np.outer(u[:, 0], vh[0]) / s[-1] - s[0] / s[-1] ** 2 * np.outer(u[:, -1], vh[-1])
    np.testing.assert_allclose(lf.grad(np.linalg.cond)(a), expected, rtol=1e-10)
    np.testing.assert_allclose(lf.grad(lambda a: np.linalg.cond(a, 2))(a), expected, rtol=1e-10)


def test_cond_fro_derivative_is_that_of_the_product_of_norms():
    a = well_conditioned(seed=1)
    b = np.linalg.inv(a)
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    # d(|A| |B|) with dB = -B dA B: the gradient is nb A / na - na B^T B B^T / nb
    expected = nb * a / na - na * b.T @ b @ b.T / nb
    np.testing.assert_allclose(lf.grad(lambda a: np.linalg.cond(a, "fro"))(a), expected, rtol=1e-10)


@pytest.mark.parametrize("p", [None, -2, 1, -1, np.inf, -np.inf, "nuc"])
def test_cond_derivatives_match_central_differences(p):
    a = well_conditioned(3, seed=2)
    expected = central_jacobian(lambda a: np.linalg.cond(a, p), a)
    np.testing.assert_allclose(lf.grad(lambda a: np.linalg.cond(a, p))(a), expected, rtol=1e-6, atol=1e-9)


def test_cond_of_a_singular_matrix_is_inf_as_numpy():
    stack = np.stack([np.zeros((2, 2)), np.diag([1.0, 0.0]), np.eye(2)])
    expected = np.array([np.linalg.cond(a) for a in stack])
    np.testing.assert_array_equal(vmap(np.linalg.cond, stack), expected)
    np.testing.assert_array_equal(lf.jvp(np.linalg.cond, (stack,), (np.ones_like(stack),))[0], np.linalg.cond(stack))
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.cond(np.ones((2, 3)), 1)
    with pytest.raises(np.linalg.LinAlgError, match="square"):
        vmap(lambda a: np.linalg.cond(a, 1), np.ones((2, 2, 3)))
    with pytest.raises(np.linalg.LinAlgError, match="empty"):
        vmap(np.linalg.cond, np.ones((2, 0, 0)))


# --- matrix_rank ---------------------------------------------------------------------------------------
def test_matrix_rank_is_an_integer_on_the_primal_under_grad():
    a = RNG.normal(size=(5, 2)) @ RNG.normal(size=(2, 4))  # rank 2
    gradient = lf.grad(lambda a: np.linalg.matrix_rank(a) * a.sum())(a)
    np.testing.assert_array_equal(gradient, np.full_like(a, np.linalg.matrix_rank(a)))
    rank, tangent = lf.jvp(np.linalg.matrix_rank, (a,), (np.ones_like(a),))
    assert rank == 2 and np.asarray(rank).dtype == np.asarray(np.linalg.matrix_rank(a)).dtype
    assert not np.any(tangent)


def test_matrix_rank_with_mapped_tolerances_matches_the_loop():
    stack = np.stack([np.diag([4.0, 2.0, 1.0, 0.5]) for _ in range(3)])
    tol = np.array([0.1, 1.5, 3.0])
    out = lf.vmap(lambda a, t: np.linalg.matrix_rank(a, tol=t), in_dims=(0, 0))(stack, tol)
    np.testing.assert_array_equal(out, [np.linalg.matrix_rank(a, tol=t) for a, t in zip(stack, tol)])
    rtol = np.array([0.01, 0.3, 0.9])
    out = lf.vmap(lambda a, r: np.linalg.matrix_rank(a, rtol=r), in_dims=(0, 0))(stack, rtol)
    np.testing.assert_array_equal(out, [np.linalg.matrix_rank(a, rtol=r) for a, r in zip(stack, rtol)])
    vectors = np.array([[0.0, 0.0], [0.0, 1.0], [2.0, 0.0]])
    np.testing.assert_array_equal(vmap(np.linalg.matrix_rank, vectors), [np.linalg.matrix_rank(v) for v in vectors])
    with pytest.raises(ValueError, match="can't be both set"):
        vmap(lambda a: np.linalg.matrix_rank(a, tol=1.0, rtol=0.1), stack)


# --- the array API names, multi_dot, tensorsolve, tensorinv: errors as NumPy's ------------------------------
@pytest.mark.parametrize("call, error", [
    (lambda a: np.linalg.outer(a, a[0]), ValueError),  # not 1-D
    (lambda a: np.linalg.cross(a[:, :2], a[:, :2]), ValueError),  # 2-vectors
    (lambda a: np.linalg.multi_dot([a]), ValueError),
    (lambda a: np.linalg.multi_dot([a, a[None], a]), np.linalg.LinAlgError),  # 3-D in a chain
    (lambda a: np.linalg.tensorsolve(a[:, :2], a[0]), np.linalg.LinAlgError),  # not square
    (lambda a: np.linalg.tensorinv(a, ind=0), ValueError),
])
def test_linalg_bad_arguments_raise_as_numpy(call, error):
    a = well_conditioned(3)
    with pytest.raises(error):
        call(a)  # NumPy's own
    with pytest.raises(error):
        vmap(call, np.stack([a, a]))


def test_vecdot_conjugates_the_first_argument_and_its_vjp_matches_numpy():
    a = RNG.normal(size=(2, 4)) + 1j * RNG.normal(size=(2, 4))
    b = RNG.normal(size=(2, 4)) + 1j * RNG.normal(size=(2, 4))
    np.testing.assert_allclose(vmap(np.linalg.vecdot, a, b), [np.linalg.vecdot(x, y) for x, y in zip(a, b)])
    # d/db of Re(sum conj(a) b . g) pairs as Re(w t): the cotangent of b is conj(a) g
    g = RNG.normal(size=2) + 1j * RNG.normal(size=2)
    _, pullback = lf.vjp(lambda b: np.linalg.vecdot(a, b), b)
    np.testing.assert_allclose(pullback(g)[0], np.conj(a) * g[:, None])


def test_multi_dot_picks_the_cheap_order_and_matches_numpy():
    arrays = [RNG.normal(size=shape) for shape in [(10, 2), (2, 30), (30, 3), (3, 40), (40, 1)]]
    expected = np.linalg.multi_dot(arrays)
    np.testing.assert_allclose(lf.vmap(lambda a: np.linalg.multi_dot([a] + arrays[1:]), in_dims=(0,))(
        np.stack([arrays[0], arrays[0]]))[0], expected, rtol=1e-12)
    jacobian = lf.jacrev(lambda a: np.linalg.multi_dot([arrays[0], arrays[1], a, arrays[3], arrays[4]]))(arrays[2])
    np.testing.assert_allclose(jacobian, np.einsum("ij,kl->iljk", arrays[0] @ arrays[1], arrays[3] @ arrays[4]),
                               rtol=1e-12)


# --- xarray's DataArray.polyfit ------------------------------------------------------------------------
def fit_data():
    t = np.linspace(0.0, 1.0, 7)
    data = xr.DataArray(RNG.normal(size=(3, 7)), dims=("sample", "t"), coords={"t": t})
    return t, data


def test_dataarray_polyfit_under_grad_matches_central_differences():
    t, data = fit_data()
    probe = RNG.normal(size=3)

    def loss(d):
        return (d.polyfit("t", 2).polyfit_coefficients * xr.DataArray(probe, dims="degree")).sum()

    gradient = lf.grad(loss)(data.isel(sample=0))
    expected = central_jacobian(lambda y: (np.polyfit(t, y, 2) * probe).sum(), data.isel(sample=0).values)
    np.testing.assert_allclose(gradient.transpose("t").values, expected, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("kwargs", [{"skipna": False}, {"skipna": False, "cov": True}, {"skipna": False, "w": "t"}])
def test_dataarray_polyfit_under_vmap_matches_the_loop(kwargs):
    _, data = fit_data()
    data = data.assign_coords(t=data.t + 1.0)  # positive weights when w="t"

    def fit(d):
        return d.polyfit("t", 2, **kwargs)

    out = lf.vmap(fit, dim="sample")(data)
    for k in range(data.sizes["sample"]):
        expected = fit(data.isel(sample=k))
        for name, variable in expected.data_vars.items():
            np.testing.assert_allclose(out[name].isel(sample=k).transpose(*variable.dims).values, variable.values,
                                       rtol=1e-10, atol=1e-12)


def test_dataarray_polyfit_with_its_default_skipna_under_vmap_matches_the_loop():
    """xarray asks bool(any(isnull)) of the data when skipna is None; on a traced value
    labeled_func.xarray_methods fits as skipna=True, which is the same fit where no value
    is NaN (tests/test_xarray_methods.py has the NaN rows)."""
    _, data = fit_data()
    out = lf.vmap(lambda d: d.polyfit("t", 2), dim="sample")(data)
    for k in range(data.sizes["sample"]):
        expected = data.isel(sample=k).polyfit("t", 2).polyfit_coefficients
        np.testing.assert_allclose(out.polyfit_coefficients.isel(sample=k).transpose(*expected.dims).values,
                                   expected.values, rtol=1e-10, atol=1e-12)


# --- einsum in sublist form ---------------------------------------------------------------------------
def test_einsum_sublists_with_more_labels_than_letters_raise_naming_it():
    with pytest.raises(lf.UnsupportedOperationError, match="numpy.einsum in sublist form with more than 26"):
        vmap(lambda x: np.einsum(x.reshape((1,) * 27), list(range(27))), np.ones((2, 1)))


def test_einsum_sublist_form_was_an_attribute_error_and_now_matches_numpy():
    rng = np.random.default_rng(12)
    a, b = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 4, 5))
    out = vmap(lambda x, y: np.einsum(x, [0, 1], y, [1, 2], [2, 0]), a, b)
    np.testing.assert_allclose(out, [np.einsum(x, [0, 1], y, [1, 2], [2, 0]) for x, y in zip(a, b)])
