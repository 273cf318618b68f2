"""The mask of the NaN-safe product's derivative rules is one primitive (``safe_masked``):
``where(g == 0 & ~isfinite(d), 0, total)``, computed as ``total`` itself when ``d`` is all
finite (no mask, four passes fewer), under every transform and lf.jit. Oracles: the NumPy
formula, closed-form second derivatives (the Rosenbrock Hessian of the benchmarks, written
out by hand), the per-example loop."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from benchmarks.bench_autodiff import rosenbrock, rosenbrock_hessian
from labeled_func_kernels import elementwise as ew


def masked(total, g, d):
    with np.errstate(invalid="ignore"):
        return np.where((g == 0) & ~np.isfinite(d), 0.0, total)


@pytest.mark.parametrize("case", ["finite", "infinite", "nan", "broadcast", "integer"])
def test_the_impl_is_the_numpy_formula(case):
    rng = np.random.default_rng(0)
    total, g, d = rng.normal(size=(3, 5, 4))
    g[::2] = 0.0
    if case == "infinite":
        d[1, 1] = d[2, 3] = np.inf
    if case == "nan":
        d[0, 0] = np.nan
    if case == "broadcast":  # the result has the shape of g and d, not of total
        total = total[0]
    if case == "integer":
        total = np.arange(20).reshape(5, 4)
    got, expected = ew.safe_masked.impl(total, g, d), masked(total, g, d)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    if case == "finite":
        assert got is total  # nothing to mask: no pass over the data


@pytest.mark.parametrize("case", ["finite", "infinite", "nan", "broadcast"])
def test_the_replays_numpy_kernel_is_the_numpy_formula(case):
    """``replay.safe_masked`` (the band rewrite's, on vectors): the formula's values, broadcast
    to its shape; ``total`` itself where ``d`` is all finite."""
    from labeled_func.engine import replay
    rng = np.random.default_rng(1)
    total, g, d = rng.normal(size=(3, 5, 4))
    g[::2] = 0.0
    if case == "infinite":
        d[1, 1] = d[2, 3] = -np.inf
    if case == "nan":
        d[0, 0] = np.nan
    if case == "broadcast":
        total, d[4, 2] = total[0], np.inf
    got, expected = replay.safe_masked(total, g, d), masked(total, g, d)
    np.testing.assert_array_equal(np.broadcast_to(got, expected.shape), expected)
    if case == "finite":
        assert got is total


def test_hessians_eager_reverse_over_reverse_and_jitted_equal_the_closed_form():
    x = xr.DataArray(np.random.default_rng(3).uniform(-2.0, 2.0, 12), dims="d")
    exact = rosenbrock_hessian(x.values)
    np.testing.assert_allclose(lf.hessian(rosenbrock)(x).values, exact, rtol=1e-13, atol=1e-11)
    twice_reverse = lf.jacrev(lf.grad(rosenbrock))(x)  # the VJP of safe_masked
    np.testing.assert_allclose(twice_reverse.values, exact, rtol=1e-13, atol=1e-11)
    jitted = lf.jit(lf.hessian(rosenbrock))
    np.testing.assert_array_equal(jitted(x).values, lf.hessian(rosenbrock)(x).values)
    other = x * 0.5
    np.testing.assert_array_equal(jitted(other).values, lf.hessian(rosenbrock)(other).values)
    (compiled,) = jitted.cache.values()
    names = [node.prim.name for node in compiled.program.nodes if node.prim is not None]
    assert "safe_masked" in names and not {"isfinite", "logical_not", "logical_and"} & set(names)


def test_a_zero_cotangent_against_an_infinite_partial_stays_zero_in_second_derivatives():
    """The forward derivative of sqrt's pullback: at x = 0 the partial 1 / (2 sqrt(x)) is
    infinite and the cotangent there is 0, so the pullback is 0 and its derivative too."""
    x = np.array([0.0, 1.0, 4.0, 0.25])
    cotangent = np.array([0.0, 1.0, 2.0, -1.0])

    def pulled(v):
        return lf.vjp(np.sqrt, v)[1](cotangent)[0]

    def forward(v, t):
        return lf.jvp(pulled, (v,), (t,))

    tangent = np.array([1.0, 1.0, 1.0, 1.0])
    safe_x = np.where(x > 0, x, 1.0)
    expected_value = np.where(cotangent == 0, 0.0, cotangent * 0.5 / np.sqrt(safe_x))
    expected = np.where(cotangent == 0, 0.0, cotangent * -0.25 * safe_x ** -1.5)
    jitted = lf.jit(forward)
    for run in (forward, jitted, jitted):  # eager, the trace, a replay
        with np.errstate(divide="ignore", invalid="ignore"):  # sqrt's partial at 0, masked
            value, derivative = run(x, tangent)
        np.testing.assert_allclose(value, expected_value, rtol=1e-15)
        np.testing.assert_allclose(derivative, expected, rtol=1e-15)
        assert np.isfinite(derivative).all()


def test_per_sample_hessians_equal_the_loop():
    samples = xr.DataArray(np.random.default_rng(5).uniform(-1.5, 1.5, (4, 6)), dims=("sample", "d"))
    batched = lf.vmap(lf.hessian(rosenbrock), dim="sample")(samples)
    for k in range(samples.sizes["sample"]):
        one = lf.hessian(rosenbrock)(samples.isel(sample=k))
        np.testing.assert_array_equal(batched.isel(sample=k).values, one.values)
        np.testing.assert_allclose(batched.isel(sample=k).values, rosenbrock_hessian(samples.values[k]),
                                   rtol=1e-13, atol=1e-11)
