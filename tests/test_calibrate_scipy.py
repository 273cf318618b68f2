"""examples/calibrate_scipy.py: SciPy's L-BFGS-B with lf.grad_and_value + lf.ravel.

Oracles: the generating parameters (recovered within three standard errors of the
Laplace approximation, and within a few per cent), SciPy's own run of the same problem
with finite-difference gradients (the same optimum), and central differences of the
loss for the gradient and of the gradient for the Hessian.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

SCRIPT = Path(__file__).resolve().parent.parent / "examples" / "calibrate_scipy.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("calibrate_scipy", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def fitted(example):
    obs = example.observe()
    estimate, result = example.calibrate(obs)
    return obs, estimate, result


def test_the_gradient_scipy_gets_is_the_central_difference(example):
    obs = example.observe()
    x0 = lf.ravel(example.START)[0]
    value, gradient = example.objective(obs)(x0)
    assert value == pytest.approx(float(example.neg_log_likelihood(example.START, obs)), rel=1e-14)
    np.testing.assert_allclose(gradient, example.central_gradient(example.START, obs), rtol=1e-6)


def test_the_fit_recovers_the_generating_parameters(example, fitted):
    obs, estimate, result = fitted
    assert result.success, result.message
    assert isinstance(estimate, xr.Dataset) and estimate.r.attrs == example.TRUE.r.attrs
    errors = example.standard_errors(estimate, obs)
    for name in example.TRUE.data_vars:
        true = example.TRUE[name].item()
        assert abs(estimate[name].item() - true) < 3 * errors.sel(param=name).item(), name
        assert estimate[name].item() == pytest.approx(true, rel=0.1), name


def test_the_fit_equals_scipys_with_finite_difference_gradients(example, fitted):
    obs, estimate, result = fitted
    reference, fd_result = example.calibrate(obs, exact_gradient=False)
    assert fd_result.success, fd_result.message
    for name in example.TRUE.data_vars:
        assert estimate[name].item() == pytest.approx(reference[name].item(), rel=1e-4), name
    assert result.fun == pytest.approx(fd_result.fun, rel=1e-8)


def test_the_laplace_hessian_is_the_difference_of_gradients(example, fitted):
    obs, estimate, _ = fitted
    H = lf.hessian(example.neg_log_likelihood, as_matrix=True)(estimate, obs)
    assert H.param.values.tolist() == list(example.TRUE.data_vars)
    x, unravel = lf.ravel(estimate)
    columns = []
    for j in range(x.size):
        step = np.zeros_like(x)
        step[j] = 1e-6 * max(1.0, abs(x[j]))
        plus = lf.ravel(lf.grad(example.neg_log_likelihood)(unravel(x + step), obs))[0]
        minus = lf.ravel(lf.grad(example.neg_log_likelihood)(unravel(x - step), obs))[0]
        columns.append((plus - minus) / (2 * step[j]))
    np.testing.assert_allclose(H.values, np.stack(columns, axis=1), rtol=1e-5)


def test_the_band_is_the_spread_of_trajectories_from_the_parameters_covariance(example, fitted):
    """The first-order band sqrt(diag(J Σ Jᵀ)) (J by lf.jacfwd) against Monte Carlo: the
    standard deviation of trajectories simulated with parameters drawn from N(estimate, Σ)."""
    obs, estimate, _ = fitted
    sigma = example.covariance(estimate, obs)
    band = example.predictive_std(estimate, sigma).values
    x, unravel = lf.ravel(estimate)
    draws = np.random.default_rng(0).multivariate_normal(x, sigma.values, size=4000)
    trajectories = lf.vmap(lambda v: example.simulate(unravel(v)).data, in_dims=(0,))(draws)
    np.testing.assert_allclose(band, trajectories.std(axis=0), rtol=0.08)
