"""lf.jit against jax.jit on the four workloads of the compiler's goals, one thread each.

Where JAX is installed (it is not a dependency; without it the module gives no rows), in
float64 everywhere and in the same process:

- Ishigami per-sample gradients, N = 1e6: `lf.jit(lf.vmap(lf.grad(f), dim="sample"))`
  on a Dataset, `jax.jit(jax.vmap(jax.grad(f)))` on an (N, 3) array;
- the advection-diffusion model of `bench_speed.py` (64 cells, 200 explicit Euler steps,
  3 parameters, N = 2,000): lf's model is the xarray loop; JAX's is the same step under
  `jax.lax.fori_loop` (how a JAX user writes a time loop; unrolled, its compilation takes
  far longer and its run is no faster);
- the Jacobian of the Lorenz-96 tendency, reverse mode, M = 400 and 2,000;
- the Hessian of the Rosenbrock function, D = 100 (`lf.hessian` of the function written
  with xarray slices; `jax.hessian`), with the closed-form tridiagonal Hessian in NumPy
  as a third figure.

Each row is lf's time over JAX's: lf's eager call, then lf.jit's replay (traced and
replayed before timing), against `jax.jit` (compiled before timing; `block_until_ready`
waits for the result, and the conversion to NumPy is not timed). Targets are the
compiler issue's: the "moonshot" of lf.jit within 1.5 times jax.jit on every row, and the
Lorenz-96 Jacobian of 2,000 sites within 2 times. One thread for each library: XLA's CPU
runtime is asked for one (``XLA_FLAGS``, set here before JAX is imported, unless the
caller set them or JAX was imported already: the rows say which) and numexpr's threads
are set to one while lf is timed.

Every result is first checked against an independent oracle (closed forms, central
differences); every figure is the best of several repeats.

    python -m benchmarks.bench_jax
"""
from __future__ import annotations

import os
import sys

import numpy as np
import xarray as xr

import labeled_func as lf
from benchmarks.bench_autodiff import (FORCING, ISHIGAMI_A, ISHIGAMI_B, PARAMS, ishigami, lorenz96, lorenz96_jacobian,
                                      rosenbrock, rosenbrock_hessian)
from benchmarks.bench_speed import (CELLS, DT, DX, FLOW_N, FLOW_PARAMS, ISHIGAMI_N, STEPS, advection_diffusion,
                                    central_differences, flow_parameters, ishigami_gradient_power, ishigami_samples,
                                    initial_field)
from benchmarks.bench_vmap import best_time

# one thread for XLA's CPU runtime, unless JAX was imported before (then its setting holds:
# `python -m benchmarks` runs bench_frameworks first, which uses JAX's default threads)
_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
if "jax" not in sys.modules:
    os.environ.setdefault("XLA_FLAGS", _ONE_THREAD)
try:
    import jax
    import jax.numpy as jnp
except ImportError:  # not a dependency: no rows
    jax = None

try:
    import numexpr
except ImportError:  # pragma: no cover - a dependency
    numexpr = None

REPEATS = 5
LORENZ_SITES = (400, 2_000)
ROSENBROCK_D = 100
MOONSHOT = 1.5


def main() -> list[dict]:
    if jax is None:
        return []
    jax.config.update("jax_enable_x64", True)
    threads = numexpr.set_num_threads(1) if numexpr is not None else None
    try:
        return [*ishigami_rows(), *advection_rows(), *lorenz96_rows(), *rosenbrock_rows()]
    finally:
        if threads is not None:
            numexpr.set_num_threads(threads)


def rows_against_jax(name, eager_s, jit_s, jax_s, jit_goal=MOONSHOT):
    threads = "1 thread" if os.environ.get("XLA_FLAGS") == _ONE_THREAD else "its own threads"
    version = f"{jax.__version__}, {threads}"
    return [
        {"benchmark": f"{name}: lf eager / jax.jit {version}", "value": eager_s * 1e3, "baseline": jax_s * 1e3,
         "unit": "ms", "ratio": eager_s / jax_s, "target": "none (for reference)", "met": True},
        {"benchmark": "  lf.jit replay / jax.jit", "value": jit_s * 1e3, "baseline": jax_s * 1e3, "unit": "ms",
         "ratio": jit_s / jax_s, "target": f"ratio <= {jit_goal}", "met": jit_s / jax_s <= jit_goal},
    ]


def lf_times(transformed, args, check):
    """The best times of ``transformed(*args)`` and of its lf.jit replay, each result checked."""
    jitted = lf.jit(transformed)
    check(transformed(*args))
    check(jitted(*args))
    check(jitted(*args))  # replayed
    return best_time(lambda: transformed(*args), REPEATS), best_time(lambda: jitted(*args), REPEATS)


def jax_time(function, *args, check):
    """The best time of the compiled ``function(*args)`` (compiled and checked first)."""
    compiled = jax.jit(function)
    check(np.asarray(compiled(*args).block_until_ready()))
    return best_time(lambda: compiled(*args).block_until_ready(), REPEATS)


# --- Ishigami -----------------------------------------------------------------------------------
def ishigami_rows():
    values, samples = ishigami_samples(ISHIGAMI_N)
    exact = np.stack(ishigami_gradient_power(*values.values()), axis=-1)

    def check_lf(got):
        np.testing.assert_allclose(np.stack([got[name].values for name in PARAMS], axis=-1), exact,
                                   rtol=1e-12, atol=1e-12)

    def check_jax(got):
        np.testing.assert_allclose(got, exact, rtol=1e-12, atol=1e-12)

    def f(x):
        return jnp.sin(x[0]) + ISHIGAMI_A * jnp.sin(x[1]) ** 2 + ISHIGAMI_B * x[2] ** 4 * jnp.sin(x[0])

    table = jnp.asarray(np.stack(list(values.values()), axis=-1))
    jax_s = jax_time(jax.vmap(jax.grad(f)), table, check=check_jax)
    eager_s, jit_s = lf_times(lf.vmap(lf.grad(ishigami), dim="sample"), (samples,), check_lf)
    return rows_against_jax(f"Ishigami per-sample grads (N={ISHIGAMI_N:.0e})", eager_s, jit_s, jax_s)


# --- advection-diffusion ---------------------------------------------------------------------------
def advection_rows():
    values = flow_parameters(FLOW_N)
    samples = xr.Dataset({name: ("sample", v) for name, v in values.items()})
    expected = central_differences(values)
    exact = np.stack([expected[name] for name in FLOW_PARAMS], axis=-1)

    def check_lf(got):
        np.testing.assert_allclose(np.stack([got[name].values for name in FLOW_PARAMS], axis=-1), exact,
                                   rtol=1e-5, atol=1e-9)

    def check_jax(got):
        np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-9)

    u0 = jnp.asarray(initial_field())

    def model(p):
        def step(_, u):
            left, right = jnp.roll(u, 1), jnp.roll(u, -1)
            return u + DT * (-p[0] * (u - left) / DX + p[1] * (right - 2 * u + left) / DX**2 - p[2] * u)
        return (jax.lax.fori_loop(0, STEPS, step, u0) ** 2).mean()

    table = jnp.asarray(np.stack([values[name] for name in FLOW_PARAMS], axis=-1))
    jax_s = jax_time(jax.vmap(jax.grad(model)), table, check=check_jax)
    eager_s, jit_s = lf_times(lf.vmap(lf.grad(advection_diffusion), dim="sample"), (samples,), check_lf)
    return rows_against_jax(f"advection-diffusion {CELLS} cells x {STEPS} steps, vmap(grad) (N={FLOW_N:,})",
                            eager_s, jit_s, jax_s)


# --- Lorenz-96 --------------------------------------------------------------------------------------
def lorenz96_rows():
    def tendency(v):
        return (jnp.roll(v, -1) - jnp.roll(v, 2)) * jnp.roll(v, 1) - v + FORCING

    rows = []
    for sites in LORENZ_SITES:
        state = xr.DataArray(FORCING + np.random.default_rng(1).normal(size=sites), dims="site")
        exact = lorenz96_jacobian(state.values)

        def check(got):
            np.testing.assert_allclose(np.asarray(got), exact, rtol=1e-14, atol=1e-14)

        jax_s = jax_time(jax.jacrev(tendency), jnp.asarray(state.values), check=check)
        eager_s, jit_s = lf_times(lf.jacrev(lorenz96), (state,), check)
        rows += rows_against_jax(f"Lorenz-96 Jacobian, jacrev (M={sites:,})", eager_s, jit_s, jax_s,
                                 2.0 if sites == 2_000 else MOONSHOT)
    return rows


# --- Rosenbrock ------------------------------------------------------------------------------------
def rosenbrock_rows():
    """The Hessian at D = 100 (arrays of 100 elements: a program's nodes and its call) and
    D = 1,000 (the tridiagonal Hessian as diagonals: the band rewrite)."""
    return [row for dims in (ROSENBROCK_D, 1_000) for row in _rosenbrock_rows(dims)]


def _rosenbrock_rows(dims):
    x = xr.DataArray(np.random.default_rng(3).uniform(-2.0, 2.0, dims), dims="d")
    exact = rosenbrock_hessian(x.values)

    def check(got):
        np.testing.assert_allclose(np.asarray(got), exact, rtol=1e-13, atol=1e-11)

    def f(v):
        return (100.0 * (v[1:] - v[:-1] ** 2) ** 2 + (1.0 - v[:-1]) ** 2).sum()

    jax_s = jax_time(jax.hessian(f), jnp.asarray(x.values), check=check)
    eager_s, jit_s = lf_times(lf.hessian(rosenbrock), (x,), lambda got: check(got.values))
    closed_s = best_time(lambda: rosenbrock_hessian(x.values), REPEATS)
    rows = rows_against_jax(f"Rosenbrock Hessian (D={dims:,})", eager_s, jit_s, jax_s)
    rows.append({"benchmark": "  the closed-form Hessian in NumPy / jax.jit", "value": closed_s * 1e3,
                 "baseline": jax_s * 1e3, "unit": "ms", "ratio": closed_s / jax_s,
                 "target": "none (for reference)", "met": True})
    return rows


if __name__ == "__main__":
    from benchmarks.__main__ import format_row, print_table

    print_table([format_row(row) for row in main()])
