"""lf.curve_fit and xarray's curvefit under the transforms: SciPy's fit, differentiated at
the optimum by the implicit function theorem.  The oracles are closed forms (the
least-squares line, the implicit derivative of an exponential fit written out by hand),
SciPy per example, and central differences of a converged fit."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

scipy_optimize = pytest.importorskip("scipy.optimize")

T = np.linspace(0.0, 3.0, 12)
Y = 2.0 * np.exp(-0.7 * T) + 0.05 * np.sin(7.0 * T)
TIGHT = {"xtol": 1e-15, "ftol": 1e-15, "gtol": 1e-15}


def decay(t, p, r):
    return p * np.exp(-r * t)


def line(x, a, b):
    return a * x + b


def test_an_untraced_call_is_scipys():
    popt, pcov = lf.curve_fit(decay, T, Y)
    expected = scipy_optimize.curve_fit(decay, T, Y)
    np.testing.assert_array_equal(popt, expected[0])
    np.testing.assert_array_equal(pcov, expected[1])


def test_the_slope_of_a_line_and_its_derivatives_are_the_least_squares_closed_forms():
    x = np.array([0.0, 0.5, 1.5, 2.0, 3.5])
    y = np.array([1.0, 1.8, 2.1, 4.2, 5.0])
    slope = lambda x, y: lf.curve_fit(line, x, y)[0][0]  # noqa: E731
    dx, dy = x - x.mean(), y - y.mean()
    sxx, sxy = np.sum(dx * dx), np.sum(dx * dy)
    np.testing.assert_allclose(slope(x, y), sxy / sxx, rtol=1e-7)
    np.testing.assert_allclose(lf.grad(slope, argnums=1)(x, y), dx / sxx, rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(lf.grad(slope, argnums=0)(x, y), (dy * sxx - 2 * sxy * dx) / sxx**2,
                               rtol=1e-6, atol=1e-10)


def implicit_jacobian(t, y):
    """d popt / d y of the exponential fit, written out: (JᵀJ + Σ rᵢ ∇²fᵢ)⁻¹ Jᵀ at the optimum."""
    (p, r), _ = scipy_optimize.curve_fit(decay, t, y, **TIGHT)
    e = np.exp(-r * t)
    jac = np.stack([e, -p * t * e], axis=1)
    residual = p * e - y
    cross = np.sum(residual * (-t * e))
    hessian = jac.T @ jac + np.array([[0.0, cross], [cross, np.sum(residual * p * t * t * e)]])
    return np.linalg.solve(hessian, jac.T)


def test_reverse_and_forward_derivatives_of_an_exponential_fit_are_the_implicit_ones():
    fit = lambda y: lf.curve_fit(decay, T, y, **TIGHT)[0]  # noqa: E731
    expected = implicit_jacobian(T, Y)
    np.testing.assert_allclose(lf.jacrev(fit)(Y), expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(lf.jacfwd(fit)(Y), expected, rtol=1e-9, atol=1e-12)
    tangent = np.cos(np.arange(T.size))
    np.testing.assert_allclose(lf.jvp(fit, (Y,), (tangent,))[1], expected @ tangent, rtol=1e-9, atol=1e-12)


def test_the_derivative_with_respect_to_the_points_is_the_implicit_one():
    fit = lambda t: lf.curve_fit(decay, t, Y, **TIGHT)[0]  # noqa: E731
    (p, r), _ = scipy_optimize.curve_fit(decay, T, Y, **TIGHT)
    e = np.exp(-r * T)
    jac = np.stack([e, -p * T * e], axis=1)
    residual = p * e - Y
    cross = np.sum(residual * (-T * e))
    hessian = jac.T @ jac + np.array([[0.0, cross], [cross, np.sum(residual * p * T * T * e)]])
    # d(Jᵀr)/dtᵢ, from d f/dt = -r p e, dJ₀/dt = -r e, dJ₁/dt = -p e + p r t e
    mixed = np.stack([-r * e * residual + e * (-r * p * e),
                      (-p * e + p * r * T * e) * residual + (-p * T * e) * (-r * p * e)])
    np.testing.assert_allclose(lf.jacrev(fit)(T), -np.linalg.solve(hessian, mixed), rtol=1e-9, atol=1e-12)


def exact_covariance(y):
    (p, r), _ = scipy_optimize.curve_fit(decay, T, y, **TIGHT)
    e = np.exp(-r * T)
    jac = np.stack([e, -p * T * e], axis=1)
    residual = p * e - y
    return np.linalg.inv(jac.T @ jac) * np.sum(residual**2) / (T.size - 2)


def test_the_covariance_is_scipys_definition_with_the_exact_jacobian_and_has_derivatives():
    covariance = lambda y: lf.curve_fit(decay, T, y, **TIGHT)[1]  # noqa: E731
    traced = lf.vmap(covariance, in_dims=(0,))(np.stack([Y, Y * 1.1]))
    np.testing.assert_allclose(traced[0], exact_covariance(Y), rtol=1e-9)
    np.testing.assert_allclose(traced[0], scipy_optimize.curve_fit(decay, T, Y)[1], rtol=1e-5)
    weights = np.array([[1.0, 0.3], [0.3, 2.0]])
    h = 1e-3  # the fit's own error (~1e-12) over a smaller step would swamp the difference
    central = np.array([(np.sum(weights * exact_covariance(Y + s)) - np.sum(weights * exact_covariance(Y - s))) / (2 * h)
                        for s in np.eye(T.size) * h])
    np.testing.assert_allclose(lf.grad(lambda y: np.sum(weights * covariance(y)))(Y), central, rtol=1e-5, atol=1e-9)


def test_under_vmap_each_example_is_scipys_fit_and_its_own_derivative():
    batch = np.stack([Y, Y * 1.3 + 0.1, Y[::-1] * 0.5 + 1.0])
    fit = lambda y: lf.curve_fit(decay, T, y, **TIGHT)[0]  # noqa: E731
    np.testing.assert_allclose(lf.vmap(fit, in_dims=(0,))(batch),
                               [scipy_optimize.curve_fit(decay, T, y, **TIGHT)[0] for y in batch], rtol=1e-12)
    np.testing.assert_allclose(lf.vmap(lf.jacrev(fit), in_dims=(0,))(batch),
                               [implicit_jacobian(T, y) for y in batch], rtol=1e-8, atol=1e-11)


def test_xarray_curvefit_under_grad_is_the_least_squares_line():
    t = np.array([0.0, 0.5, 1.5, 2.0, 3.5])
    a = xr.DataArray([1.0, 1.8, 2.1, 4.2, 5.0], dims="t", coords={"t": t}, attrs={"units": "m"})

    def slope(a):
        return a.curvefit("t", line).curvefit_coefficients.sel(param="a")

    got = lf.grad(slope)(a)
    assert got.dims == ("t",) and np.array_equal(got.t, t)
    np.testing.assert_allclose(got.values, (t - t.mean()) / np.sum((t - t.mean()) ** 2), rtol=1e-7, atol=1e-12)
    batch = xr.concat([a, a * 2, a + 1], dim="sample")
    per_example = lf.vmap(lf.grad(slope), dim="sample")(batch)
    xr.testing.assert_allclose(per_example, xr.concat([got, got, got], dim="sample"), rtol=1e-6)


@pytest.mark.parametrize("kwargs, culprit", [
    ({"sigma": np.ones(T.size)}, "sigma="),
    ({"bounds": (0.0, 10.0)}, "bounds="),
    ({"full_output": True}, "full_output=True"),
    ({"nan_policy": "omit"}, "nan_policy='omit'"),  # its derivative came back NaN, the fit right
])
def test_what_the_implicit_derivative_cannot_take_is_refused_by_name(kwargs, culprit):
    with pytest.raises(lf.UnsupportedOperationError, match=culprit):
        lf.grad(lambda y: lf.curve_fit(decay, T, y, **kwargs)[0].sum())(Y)
