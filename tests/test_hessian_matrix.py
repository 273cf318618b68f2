"""``lf.hessian(f, as_matrix=True)``: one (param, param_wrt) matrix over the elements of
``lf.ravel`` of the argument.

Oracles: central finite differences of the gradient (flattened with ``lf.ravel``), the
Hessian written by hand, and, for the Laplace approximation, ordinary least squares'
closed-form covariance sigma^2 (X^T X)^-1.
"""

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func.ravel import element_labels


def params():
    return xr.Dataset({
        "a": 0.7,
        "b": -1.3,
        "w": ("k", [0.4, 1.1, -0.2]),
        "m": (("r", "c"), [[0.3, -0.5], [0.9, 0.1]]),
    }, coords={"k": [10, 20, 30]})


def model_loss(p, data):
    pred = p.a * np.exp(p.b * data) + (p.w * data).sum("k") + (p.m ** 2 * p.a).sum()
    return (np.sin(pred) ** 2).sum() + (p.w ** 4).sum() * p.b


def hessian_by_differences(func, p, *args, eps=1e-5):
    """d/dx_j of the gradient, by central differences along each element of lf.ravel(p)."""
    x, unravel = lf.ravel(p)
    columns = []
    for j in range(x.size):
        step = np.zeros_like(x)
        step[j] = eps
        plus = lf.ravel(lf.grad(func)(unravel(x + step), *args))[0]
        minus = lf.ravel(lf.grad(func)(unravel(x - step), *args))[0]
        columns.append((plus - minus) / (2 * eps))
    return np.stack(columns, axis=1)


def test_matrix_dims_coords_and_values_against_differences_of_the_gradient():
    p = params()
    data = xr.DataArray([0.2, -0.4, 0.9], dims="k", coords={"k": [10, 20, 30]})
    H = lf.hessian(model_loss, as_matrix=True)(p, data)
    labels = ["a", "b", "w[0]", "w[1]", "w[2]", "m[0,0]", "m[0,1]", "m[1,0]", "m[1,1]"]
    assert H.dims == ("param", "param_wrt")
    assert H.param.values.tolist() == labels == H.param_wrt.values.tolist() == element_labels(p)
    np.testing.assert_allclose(H.values, hessian_by_differences(model_loss, p, data), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(H.values, H.values.T, rtol=1e-12, atol=1e-12)


def test_matrix_of_0d_parameters_against_the_hessian_by_hand():
    p = xr.Dataset({"k": 2.0, "c": 3.0})
    H = lf.hessian(lambda q: q.k ** 3 * q.c ** 2, as_matrix=True)(p)
    k, c = 2.0, 3.0
    expected = [[6 * k * c ** 2, 6 * k ** 2 * c], [6 * k ** 2 * c, 2 * k ** 3]]
    np.testing.assert_allclose(H.values, expected, rtol=1e-14)
    assert H.sel(param="k", param_wrt="c").item() == pytest.approx(6 * k ** 2 * c)


def test_matrix_equals_the_structured_hessian_rearranged():
    p = params()
    data = xr.DataArray([0.2, -0.4, 0.9], dims="k", coords={"k": [10, 20, 30]})
    structured = lf.hessian(model_loss)(p, data)
    H = lf.hessian(model_loss, as_matrix=True)(p, data)
    np.testing.assert_allclose(H.sel(param="a", param_wrt="b").item(), structured["a"]["b"].item(), rtol=1e-14)
    np.testing.assert_allclose(H.sel(param="w[1]", param_wrt="m[1,0]").item(),
                               structured["w"]["m"].isel(k=1, r=1, c=0).item(), rtol=1e-14)


def test_a_dict_of_arrays_and_a_dataarray_argument():
    x = xr.DataArray([1.0, 2.0], dims="i", name="x")
    H = lf.hessian(lambda x: (x ** 3).sum(), as_matrix=True)(x)
    assert H.param.values.tolist() == ["x[0]", "x[1]"]
    np.testing.assert_allclose(H.values, np.diag(6 * x.values))
    H = lf.hessian(lambda d: (d["u"] ** 2 * d["v"]).sum(), as_matrix=True)({"u": np.array([1.0, 2.0]),
                                                                            "v": np.array(3.0)})
    assert H.param.values.tolist() == ["u[0]", "u[1]", "v"]
    np.testing.assert_allclose(H.values, [[6.0, 0.0, 2.0], [0.0, 6.0, 4.0], [2.0, 4.0, 0.0]])


def test_laplace_covariance_of_a_linear_fit_is_ols_closed_form():
    rng = np.random.default_rng(3)
    t = xr.DataArray(np.linspace(0.0, 2.0, 40), dims="time")
    sigma = 0.3
    y = 1.5 + 0.8 * t + rng.normal(0.0, sigma, t.size)

    def neg_log_likelihood(p, t, y):
        return 0.5 * (((p.intercept + p.slope * t - y) / sigma) ** 2).sum()

    p = xr.Dataset({"intercept": 0.0, "slope": 0.0})
    H = lf.hessian(neg_log_likelihood, as_matrix=True)(p, t, y)
    covariance = np.linalg.inv(H.values)
    X = np.stack([np.ones(t.size), t.values], axis=1)
    np.testing.assert_allclose(covariance, sigma ** 2 * np.linalg.inv(X.T @ X), rtol=1e-12)


def test_vmap_of_the_matrix_equals_the_loop():
    batch = xr.Dataset({"k": ("s", [1.0, 2.0, 3.0]), "c": ("s", [0.5, -1.0, 2.0])})

    def f(q):
        return q.k ** 3 * q.c ** 2 + np.sin(q.k * q.c)

    mapped = lf.vmap(lf.hessian(f, as_matrix=True), dim="s")(batch)
    assert mapped.dims == ("s", "param", "param_wrt")
    for j in range(3):
        np.testing.assert_allclose(mapped.isel(s=j).values,
                                   lf.hessian(f, as_matrix=True)(batch.isel(s=j)).values, rtol=1e-14)


def test_custom_wrt_suffix_names_the_second_dim():
    H = lf.hessian(lambda q: q.k ** 2, as_matrix=True, wrt_suffix="_2")(xr.Dataset({"k": 1.0}))
    assert H.dims == ("param", "param_2")


def test_errors_name_the_problem():
    p = xr.Dataset({"k": 2.0, "c": 3.0})
    with pytest.raises(ValueError, match=r"as_matrix=True.*argnums=\(0, 1\) must be one int"):
        lf.hessian(lambda a, b: a.k * b.k, argnums=(0, 1), as_matrix=True)
    with pytest.raises(ValueError, match=r"as_matrix=True.*must return a scalar.*dims \('i',\)"):
        lf.hessian(lambda q: q.k * xr.DataArray([1.0, 2.0], dims="i"), as_matrix=True)(p)
    with pytest.raises(TypeError, match=r"hessian: argument 'q'.* has dtype int64"):
        lf.hessian(lambda q: q.k, as_matrix=True)(xr.Dataset({"k": 1.0, "n": 2}))
