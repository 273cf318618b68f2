"""Automatic differentiation against the ways one gets the same derivatives without it.

- Per-sample gradients of the Ishigami function (N samples, D = 3 parameters):
  `lf.vmap(lf.grad(f), dim="sample")` against the gradient written out by hand in
  vectorised NumPy, and against forward finite differences (D + 1 evaluations of the
  same xarray model on the whole batch, i.e. N (D + 1) model evaluations).
- The Jacobian of the Lorenz-96 tendency (M sites): `lf.jacfwd` and `lf.jacrev`
  against forward finite differences (M + 1 evaluations of the same xarray tendency).
- HIPS `autograd` on the per-sample gradient, where it is installed (the row is left
  out otherwise).

The Rosenbrock function in xarray and its closed-form Hessian live here too, for the rows
of `bench_jax.py` (and the oracle of `tests/test_safe_masked.py`).

Every figure is the best of several repeats of `time.perf_counter`; the baselines are
measured in the same run, and each one is first checked against the closed form.
"""


import numpy as np
import xarray as xr

import labeled_func as lf
from benchmarks.bench_vmap import best_time

ISHIGAMI_A, ISHIGAMI_B = 7.0, 0.1
PARAMS = ("x1", "x2", "x3")
N_SAMPLES = 100_000
SITES = 400
FORCING = 8.0
FD_STEP = 1e-7
REPEATS = 5


def main() -> list[dict]:
    return [*per_sample_gradient_rows(), *lorenz96_rows()]


def ishigami(params):
    """The Ishigami function of a Dataset with variables x1, x2, x3 (one example or a batch)."""
    x1, x2, x3 = params.x1, params.x2, params.x3
    return np.sin(x1) + ISHIGAMI_A * np.sin(x2) ** 2 + ISHIGAMI_B * x3**4 * np.sin(x1)


def ishigami_gradient_numpy(x1, x2, x3):
    """The closed-form gradient, vectorised by hand."""
    return (
        np.cos(x1) * (1 + ISHIGAMI_B * x3**4),
        2 * ISHIGAMI_A * np.sin(x2) * np.cos(x2),
        4 * ISHIGAMI_B * x3**3 * np.sin(x1),
    )


def finite_difference_gradient(model, samples):
    """Forward differences: one evaluation at the samples, one per shifted parameter."""
    base = model(samples)
    return {name: (model(samples.assign({name: samples[name] + FD_STEP})) - base) / FD_STEP
            for name in samples.data_vars}


def per_sample_gradient_rows() -> list[dict]:
    rng = np.random.default_rng(0)
    values = {name: rng.uniform(-np.pi, np.pi, N_SAMPLES) for name in PARAMS}
    samples = xr.Dataset({name: ("sample", v) for name, v in values.items()},
                         coords={"sample": np.arange(N_SAMPLES)})
    per_sample_grad = lf.vmap(lf.grad(ishigami), dim="sample")

    exact = ishigami_gradient_numpy(*values.values())
    transformed = per_sample_grad(samples)
    differenced = finite_difference_gradient(ishigami, samples)
    for name, expected in zip(PARAMS, exact):
        np.testing.assert_allclose(transformed[name].values, expected, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(differenced[name].values, expected, rtol=1e-4, atol=1e-4)

    lf_s = best_time(lambda: per_sample_grad(samples), REPEATS)
    numpy_s = best_time(lambda: ishigami_gradient_numpy(*values.values()), REPEATS)
    fd_s = best_time(lambda: finite_difference_gradient(ishigami, samples), REPEATS)
    size = f"N={N_SAMPLES:,}, D={len(PARAMS)}"
    rows = [
        {
            "benchmark": f"Ishigami per-sample grads, vmap(grad) / hand-written NumPy ({size})",
            "value": lf_s * 1e3, "baseline": numpy_s * 1e3, "unit": "ms",
            "ratio": lf_s / numpy_s, "target": "ratio <= 3", "met": lf_s / numpy_s <= 3,
        },
        {
            "benchmark": f"Ishigami per-sample grads, vmap(grad) vs forward FD ({size}); ratio = speedup",
            "value": lf_s * 1e3, "baseline": fd_s * 1e3, "unit": "ms",
            "ratio": fd_s / lf_s, "target": "speedup > 1", "met": fd_s > lf_s,
        },
    ]
    autograd_row = autograd_per_sample_row(values, exact, lf_s, size)
    return rows if autograd_row is None else [*rows, autograd_row]


def autograd_per_sample_row(values, exact, lf_s, size):
    """HIPS autograd on the same gradients, or None where it is not installed.

    The samples are independent, so the gradient of the sum over samples is the
    per-sample gradient: one reverse pass over the whole batch.
    """
    try:
        import autograd
        import autograd.numpy as anp
    except ImportError:
        return None

    def total(x1, x2, x3):
        return anp.sum(anp.sin(x1) + ISHIGAMI_A * anp.sin(x2) ** 2 + ISHIGAMI_B * x3**4 * anp.sin(x1))

    per_sample_grad = autograd.grad(total, argnum=(0, 1, 2))
    arrays = tuple(values.values())
    for computed, expected in zip(per_sample_grad(*arrays), exact):
        np.testing.assert_allclose(computed, expected, rtol=1e-12, atol=1e-12)
    autograd_s = best_time(lambda: per_sample_grad(*arrays), REPEATS)
    return {
        "benchmark": f"Ishigami per-sample grads, vmap(grad) / HIPS autograd ({size})",
        "value": lf_s * 1e3, "baseline": autograd_s * 1e3, "unit": "ms",
        "ratio": lf_s / autograd_s, "target": "none (for reference)", "met": True,
    }


def lorenz96(x):
    """The cyclic Lorenz-96 tendency of a state with dim "site"."""
    return (x.roll(site=-1) - x.roll(site=2)) * x.roll(site=1) - x + FORCING


def lorenz96_jacobian(x):
    m = x.size
    rows = np.arange(m)
    jac = np.zeros((m, m))
    np.add.at(jac, (rows, (rows + 1) % m), x[(rows - 1) % m])
    np.add.at(jac, (rows, (rows - 2) % m), -x[(rows - 1) % m])
    np.add.at(jac, (rows, (rows - 1) % m), x[(rows + 1) % m] - x[(rows - 2) % m])
    np.add.at(jac, (rows, rows), -1.0)
    return jac


def rosenbrock(x):
    """The Rosenbrock function of a DataArray along its one dim ``d``, by xarray slices."""
    head = x.isel(d=slice(None, -1)).drop_vars("d", errors="ignore")
    tail = x.isel(d=slice(1, None)).drop_vars("d", errors="ignore")
    return (100.0 * (tail - head**2) ** 2 + (1.0 - head) ** 2).sum("d")


def rosenbrock_hessian(x):
    """The closed-form Hessian of :func:`rosenbrock` at the values ``x``: tridiagonal."""
    d = x.size
    hessian = np.zeros((d, d))
    i = np.arange(d - 1)
    hessian[i, i] += 1200.0 * x[:-1] ** 2 - 400.0 * x[1:] + 2.0
    hessian[i + 1, i + 1] += 200.0
    hessian[i, i + 1] = hessian[i + 1, i] = -400.0 * x[:-1]
    return hessian


def finite_difference_jacobian(model, x):
    """Forward differences, one column per site: M + 1 model evaluations."""
    base = model(x).values
    columns = []
    for k in range(x.size):
        shifted = x.values.copy()
        shifted[k] += FD_STEP
        columns.append((model(x.copy(data=shifted)).values - base) / FD_STEP)
    return np.stack(columns, axis=-1)


def lorenz96_rows() -> list[dict]:
    rng = np.random.default_rng(1)
    state = xr.DataArray(FORCING + rng.normal(size=SITES), dims="site",
                         coords={"site": np.arange(SITES)})
    exact = lorenz96_jacobian(state.values)
    np.testing.assert_allclose(finite_difference_jacobian(lorenz96, state), exact, atol=1e-5)
    fd_s = best_time(lambda: finite_difference_jacobian(lorenz96, state), repeats=3)

    rows = []
    for name, transform in (("jacfwd", lf.jacfwd), ("jacrev", lf.jacrev)):
        jacobian = transform(lorenz96)
        np.testing.assert_allclose(jacobian(state).values, exact, rtol=1e-14, atol=1e-14)
        lf_s = best_time(lambda: jacobian(state), REPEATS)
        rows.append({
            "benchmark": f"Lorenz-96 Jacobian, {name} vs forward FD (M={SITES}); ratio = speedup",
            "value": lf_s * 1e3, "baseline": fd_s * 1e3, "unit": "ms",
            "ratio": fd_s / lf_s, "target": "speedup >= 3", "met": fd_s / lf_s >= 3,
        })
    return rows
