"""np.vectorize and np.apply_along_axis on traced arrays, beyond the op table.

np.vectorize is a Python loop over elements that may branch on their values: it runs once
per example (NumPy's own vectorize on each example's values under vmap, a loop over
traced 0-d elements under grad/jvp). The oracles: the per-example loop of NumPy's
vectorize, and derivatives by calculus.
"""
import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

RNG = np.random.default_rng(7)
X = RNG.normal(size=(3, 4))


def relu_square(v):
    return v * v if v > 0 else 0.0


def relu_square_slope(x):
    return np.where(x > 0, 2 * x, 0.0)


def test_vmap_runs_numpy_vectorize_once_per_example_on_python_numbers():
    seen = []

    def recording(v):
        seen.append(type(v))
        return relu_square(v)

    vectorized = np.vectorize(recording, otypes=[float])
    out = lf.vmap(vectorized, in_dims=(0,))(X)
    np.testing.assert_array_equal(out, np.stack([np.vectorize(relu_square, otypes=[float])(x) for x in X]))
    # NumPy's own loop: one call per element and example, each on a Python float
    assert len(seen) == X.size and set(seen) == {float}


def test_grad_runs_the_loop_on_traced_elements_whose_values_branches_read():
    vectorized = np.vectorize(relu_square)
    gradient = lf.grad(lambda x: vectorized(x).sum())(X[0])
    np.testing.assert_allclose(gradient, relu_square_slope(X[0]))
    per_example = lf.vmap(lf.grad(lambda x: vectorized(x).sum()), in_dims=(0,))(X)
    np.testing.assert_allclose(per_example, relu_square_slope(X))


def test_second_order_and_forward_mode():
    vectorized = np.vectorize(lambda v: v**3 if v > 0 else np.sin(v))
    x = X[1]
    hessian = lf.hessian(lambda x: vectorized(x).sum())(x)
    np.testing.assert_allclose(hessian, np.diag(np.where(x > 0, 6 * x, -np.sin(x))), atol=1e-12)
    jacobian = lf.jacfwd(vectorized)(x)
    np.testing.assert_allclose(jacobian, np.diag(np.where(x > 0, 3 * x**2, np.cos(x))), atol=1e-12)
    np.testing.assert_allclose(lf.jacrev(vectorized)(x), jacobian, atol=1e-12)


def test_signature_excluded_and_keyword_arguments():
    def weighted(a, w, *, power):
        return (a**power * w).sum() if a.sum() > 0 else a.min()

    vectorized = np.vectorize(weighted, signature="(n),(n)->()", excluded={"power"})
    w = np.array([0.5, 2.0])
    out = lf.vmap(lambda x: vectorized(x.reshape(2, 2), w, power=2), in_dims=(0,))(X)
    np.testing.assert_allclose(out, np.stack([vectorized(x.reshape(2, 2), w, power=2) for x in X]))
    rows = X[:, :2]
    gradient = lf.grad(lambda w: vectorized(rows, w, power=3).sum())(w)
    positive = rows.sum(axis=1) > 0
    np.testing.assert_allclose(gradient, (rows**3 * positive[:, None]).sum(axis=0))


def test_apply_ufunc_with_vectorize_true_works_under_vmap_and_grad():
    data = xr.DataArray(X, dims=("sample", "t"))

    def model(x):
        return xr.apply_ufunc(lambda v: (v * v).sum() if v[0] > 0 else v.max(), x, input_core_dims=[["t"]],
                              vectorize=True)

    mapped = lf.vmap(model, dim="sample")(data)
    np.testing.assert_allclose(mapped.values, [model(data.isel(sample=k)).item() for k in range(3)])
    row = data.isel(sample=2)
    gradient = lf.grad(model)(row)
    expected = 2 * row.values if row.values[0] > 0 else (row.values == row.values.max()).astype(float)
    np.testing.assert_allclose(gradient.values, expected)


def test_interpolate_na_works_under_vmap():
    data = xr.DataArray(X, dims=("sample", "t")).where(lambda x: x > -0.3)
    out = lf.vmap(lambda x: x.interpolate_na("t"), dim="sample")(data)
    np.testing.assert_allclose(out.values, np.stack([data.isel(sample=k).interpolate_na("t").values
                                                    for k in range(3)]), equal_nan=True)


def test_the_hook_leaves_calls_without_traced_arguments_to_numpy():
    vectorized = np.vectorize(relu_square)
    assert np.vectorize.__dict__["__call__"].__module__ == "labeled_func.engine.numpy.functional"
    np.testing.assert_array_equal(vectorized(X), [[relu_square(v) for v in row] for row in X])

    @np.vectorize  # the decorator form with options still goes through NumPy
    def doubled(v):
        return 2 * v

    np.testing.assert_array_equal(doubled(X), 2 * X)


def test_vectorize_of_a_function_that_converts_names_the_users_line():
    vectorized = np.vectorize(lambda v: float(np.asarray(v)))
    with pytest.raises(lf.ConversionError, match="test_functional.py"):
        lf.grad(lambda x: vectorized(x).sum())(X[0])


def test_apply_along_axis_matches_numpy_and_differentiates():
    def centred(row):
        return row - row.mean()

    out = lf.vmap(lambda x: np.apply_along_axis(centred, 0, x.reshape(2, 2)), in_dims=(0,))(X)
    np.testing.assert_allclose(out, np.stack([np.apply_along_axis(centred, 0, x.reshape(2, 2)) for x in X]))
    gradient = lf.grad(lambda x: np.apply_along_axis(lambda r: (r * r).sum(), 1, x).sum())(X)
    np.testing.assert_allclose(gradient, 2 * X)


def test_apply_along_axis_with_an_empty_iteration_dim_raises_naming_it():
    with pytest.raises(ValueError, match="numpy.apply_along_axis"):
        lf.vmap(lambda x: np.apply_along_axis(np.sum, 1, x[:0]), in_dims=(0,))(X[:, None, :].repeat(2, 1))
