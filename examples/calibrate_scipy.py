"""Calibrating a time-stepping model with SciPy, from exact gradients.

    python examples/calibrate_scipy.py
    python examples/calibrate_scipy.py --figures DIR


A population grows logistically, dN/dt = r N (1 - N / K) from N(0) = N0, stepped with
explicit Euler.  The three parameters live in an xr.Dataset with their units; synthetic
observations are the model at known parameters plus Gaussian noise.  The calibration
minimises the negative log-likelihood with `scipy.optimize.minimize(..., jac=True,
method="L-BFGS-B")`: `lf.grad_and_value` gives the value and the gradient (a Dataset
like the parameters) in one forward and one backward pass through the loop, and
`lf.ravel` turns the Dataset into SciPy's vector and back.  At the optimum
`lf.hessian(..., as_matrix=True)` gives the (param, param_wrt) Hessian, whose inverse is
the Laplace approximation of the parameters' covariance.

The figure (calibration.png): the observations, the fitted trajectory and its 95 % band
from the parameters' covariance pushed through the model by its exact sensitivities
(`lf.jacfwd` of the trajectory with respect to the parameter vector: J Σ Jᵀ).

Checks: the gradient against central finite differences at the starting point; the
generating parameters within three standard errors of the estimate.  (The test of this
example, tests/test_calibrate_scipy.py, also checks the optimum against SciPy's own run
with finite-difference gradients.)
"""

import argparse
import time
from pathlib import Path

import numpy as np
import scipy.optimize
import xarray as xr

import labeled_func as lf

TRUE = xr.Dataset({
    "r": ((), 0.8, {"units": "day-1", "long_name": "growth rate"}),
    "K": ((), 100.0, {"units": "cells", "long_name": "carrying capacity"}),
    "N0": ((), 4.0, {"units": "cells", "long_name": "initial population"}),
})
START = TRUE.copy(data={"r": 0.4, "K": 70.0, "N0": 8.0})
BOUNDS = [(1e-3, None)] * len(TRUE.data_vars)  # every parameter is positive
DT = 0.5  # days
STEPS = 24
NOISE = 2.0  # cells
OUTPUT = Path(__file__).resolve().parent / "output"


def simulate(p: xr.Dataset) -> xr.DataArray:
    """N(t) by explicit Euler: one xarray expression per step, differentiable as written."""
    n = p.N0
    states = [n]
    for _ in range(STEPS):
        n = n + DT * p.r * n * (1 - n / p.K)
        states.append(n)
    times = xr.DataArray(DT * np.arange(STEPS + 1), dims="time", attrs={"units": "day", "long_name": "time"})
    return (xr.concat(states, dim="time").assign_coords(time=times).rename("N")
            .assign_attrs(units="cells", long_name="population"))


def observe(seed: int = 1) -> xr.DataArray:
    """The model at the generating parameters, plus Gaussian noise of NOISE cells."""
    rng = np.random.default_rng(seed)
    clean = simulate(TRUE)
    return (clean + rng.normal(0.0, NOISE, clean.shape)).drop_attrs()


def neg_log_likelihood(p: xr.Dataset, obs: xr.DataArray) -> xr.DataArray:
    return 0.5 * (((simulate(p) - obs) / NOISE) ** 2).sum().drop_attrs()


def objective(obs: xr.DataArray):
    """SciPy's ``fun(x) -> (value, gradient)`` for ``jac=True``, in lf.ravel's order."""
    _, unravel = lf.ravel(START)
    value_and_grad = lf.grad_and_value(neg_log_likelihood)

    def fun(x):
        grads, value = value_and_grad(unravel(x), obs)
        return float(value), lf.ravel(grads)[0]

    return fun


def calibrate(obs: xr.DataArray, exact_gradient: bool = True) -> tuple[xr.Dataset, object]:
    """The maximum-likelihood parameters, by L-BFGS-B from START."""
    x0, unravel = lf.ravel(START)
    if exact_gradient:
        fun, jac = objective(obs), True
    else:  # SciPy's finite differences, on the plain model
        fun, jac = (lambda x: float(neg_log_likelihood(unravel(x), obs))), None
    result = scipy.optimize.minimize(fun, x0, jac=jac, method="L-BFGS-B", bounds=BOUNDS,
                                     options={"ftol": 1e-14, "gtol": 1e-9, "maxiter": 500})
    return unravel(result.x), result


def covariance(estimate: xr.Dataset, obs: xr.DataArray) -> xr.DataArray:
    """H^-1 at the estimate, the Laplace approximation, dims (param, param_wrt)."""
    hessian = lf.hessian(neg_log_likelihood, as_matrix=True)(estimate, obs)
    return xr.DataArray(np.linalg.inv(hessian.values), coords=hessian.coords, dims=hessian.dims)


def standard_errors(estimate: xr.Dataset, obs: xr.DataArray) -> xr.DataArray:
    """sqrt(diag(H^-1)): the Laplace approximation at the estimate."""
    sigma = covariance(estimate, obs)
    return np.sqrt(xr.DataArray(np.diag(sigma), coords={"param": sigma.param}, dims="param"))


def predictive_std(estimate: xr.Dataset, sigma: xr.DataArray) -> xr.DataArray:
    """The standard deviation of the trajectory from the parameters' covariance, to first
    order: sqrt(diag(J Σ Jᵀ)) with J = d trajectory / d parameters (lf.jacfwd, exact)."""
    x, unravel = lf.ravel(estimate)
    jacobian = lf.jacfwd(lambda v: simulate(unravel(v)).data)(x)  # (time, parameters)
    variance = np.einsum("ti,ij,tj->t", jacobian, sigma.values, jacobian)
    return xr.DataArray(np.sqrt(variance), dims="time")


def central_gradient(p: xr.Dataset, obs: xr.DataArray, eps: float = 1e-6) -> np.ndarray:
    x, unravel = lf.ravel(p)
    steps = np.eye(x.size) * eps * np.maximum(1.0, np.abs(x))
    return np.array([(float(neg_log_likelihood(unravel(x + h), obs)) - float(neg_log_likelihood(unravel(x - h), obs)))
                     / (2 * h[k]) for k, h in enumerate(steps)])


def main(figures_dir: Path = OUTPUT):
    obs = observe()
    fun = objective(obs)
    value, gradient = fun(lf.ravel(START)[0])
    np.testing.assert_allclose(gradient, central_gradient(START, obs), rtol=1e-6)
    print(f"gradient at the start {np.round(gradient, 3)} matches central differences")

    start = time.perf_counter()
    estimate, result = calibrate(obs)
    elapsed = time.perf_counter() - start
    assert result.success, result.message
    errors = standard_errors(estimate, obs)

    print(f"{'param':>6} {'units':>6} {'true':>8} {'estimate':>10} {'std err':>8}")
    for name in TRUE.data_vars:
        print(f"{name:>6} {TRUE[name].attrs['units']:>6} {TRUE[name].item():8.3f} {estimate[name].item():10.4f} "
              f"{errors.sel(param=name).item():8.4f}")
    print(f"L-BFGS-B: {result.nit} iterations, {result.nfev} calls of lf.grad_and_value ({elapsed:.2f} s); "
          f"finite-difference gradients would cost {1 + len(TRUE.data_vars)} model runs per call")
    for name in TRUE.data_vars:
        assert abs(estimate[name].item() - TRUE[name].item()) < 3 * errors.sel(param=name).item(), name
    for figure in plot(obs, estimate, covariance(estimate, obs), figures_dir) or ["skipped (no matplotlib)"]:
        print(f"figure: {figure}")


def plot(obs: xr.DataArray, estimate: xr.Dataset, sigma: xr.DataArray, directory: Path) -> list[Path]:
    """calibration.png: the observations, the fit and its 95 % band (xarray labels the axes)."""
    try:
        import matplotlib
    except ImportError:
        return []
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fitted = simulate(estimate)
    spread = 1.96 * predictive_std(estimate, sigma)
    fig, ax = plt.subplots(figsize=(7, 4.5), constrained_layout=True)
    ax.fill_between(fitted.time, fitted - spread, fitted + spread, color="tab:blue", alpha=0.25,
                    label="95 % band (Laplace, J Σ Jᵀ from lf.jacfwd)")
    fitted.plot(ax=ax, color="tab:blue", label="fitted model")
    simulate(TRUE).plot(ax=ax, color="black", linestyle=":", label="generating model")
    ax.plot(fitted.time, obs, "o", color="tab:orange", markersize=4, label="observations")
    ax.set_title("logistic growth calibrated with L-BFGS-B and lf.grad_and_value")
    ax.legend(fontsize="small")
    directory.mkdir(parents=True, exist_ok=True)
    fig.savefig(directory / "calibration.png", dpi=100)
    plt.close(fig)
    return [directory / "calibration.png"]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--figures", type=Path, default=OUTPUT, metavar="DIR",
                        help="where the PNG figures go (default: examples/output/)")
    main(parser.parse_args().figures)
