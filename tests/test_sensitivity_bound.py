"""The upper bound of the total Sobol' indices from the DGSM (Sobol' & Kucherenko 2009):
S_Ti <= C_i ν_i / Var Y, C_i = (b - a)²/π² for x_i uniform on [a, b], σ_i² for x_i normal.

Oracles: the analytic variance decomposition of the Ishigami function (checked against
its published total indices), and functions for which the bound is an equality."""
import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

A, B = 7.0, 0.1
PI = np.pi


def ishigami(p):
    return np.sin(p.x1) + A * np.sin(p.x2) ** 2 + B * p.x3 ** 4 * np.sin(p.x1)


def ishigami_total_indices():
    """S_Ti from the ANOVA decomposition on U(-π, π)³: V1 = (1 + Bπ⁴/5)²/2, V2 = A²/8,
    V13 = B²π⁸(1/18 - 1/50), V3 = V12 = V23 = V123 = 0."""
    variance = A ** 2 / 8 + B * PI ** 4 / 5 + B ** 2 * PI ** 8 / 18 + 1 / 2
    v1, v2, v13 = (1 + B * PI ** 4 / 5) ** 2 / 2, A ** 2 / 8, B ** 2 * PI ** 8 * (1 / 18 - 1 / 50)
    return np.array([v1 + v13, v2, v13]) / variance, variance


def ishigami_bound():
    """C_i ν_i / V with C_i = (2π)²/π² = 4 and ν1 = (1 + 2Bπ⁴/5 + B²π⁸/9)/2, ν2 = A²/2, ν3 = 8B²π⁶/7."""
    nu = np.array([(1 + 2 * B * PI ** 4 / 5 + B ** 2 * PI ** 8 / 9) / 2, A ** 2 / 2, 8 * B ** 2 * PI ** 6 / 7])
    return 4 * nu / ishigami_total_indices()[1]


def midpoints(n, low, high):
    """The midpoints of n equal cells: their means of sin² and cos² of one period are exact."""
    return low + (np.arange(n) + 0.5) * (high - low) / n


def test_ishigami_total_indices_are_the_published_ones():
    total, _ = ishigami_total_indices()
    np.testing.assert_allclose(total, [0.5576, 0.4424, 0.2437], atol=5e-5)
    np.testing.assert_allclose(ishigami_bound(), [2.2304, 7.0786, 3.1745], atol=5e-5)  # SALib's DGSM column


def test_the_bound_holds_on_ishigami_and_is_loose_there():
    rng = np.random.default_rng(0)
    samples = xr.Dataset({n: ("sample", rng.uniform(-PI, PI, 2 ** 16)) for n in ("x1", "x2", "x3")})
    bounds = {n: (-PI, PI) for n in samples.data_vars}
    result = lf.sensitivity.dgsm(ishigami, samples, bounds=bounds, num_resamples=10)
    np.testing.assert_allclose(result.ST_bound.values, ishigami_bound(), rtol=0.03)
    xr.testing.assert_equal(result.ST_bound, result.dgsm.rename("ST_bound"))  # uniform: SALib's measure is the bound
    total, _ = ishigami_total_indices()
    assert (result.ST_bound.values > total).all()
    # x2 enters as A sin²(x2), which oscillates twice per period: the bound is 16 times S_T2
    np.testing.assert_allclose(ishigami_bound() / total, [4.0, 16.0, 13.03], rtol=1e-3)


def test_the_bound_is_an_equality_for_the_first_cosine_on_a_uniform_input():
    """cos(π(x - a)/(b - a)) attains the Poincaré constant (b - a)²/π² of U(a, b): with an
    additive second input, S_T1 = V1/V and the bound equals it."""
    low, high, n = 1.0, 3.0, 4096
    x1 = midpoints(n, low, high)
    samples = xr.Dataset({"x1": ("sample", x1), "x2": ("sample", np.random.default_rng(1).permutation(x1))})
    model = lambda p: np.cos(PI * (p.x1 - low) / (high - low)) + 0.5 * p.x2
    result = lf.sensitivity.dgsm(model, samples, bounds={"x1": (low, high), "x2": (low, high)}, num_resamples=3)
    y1, y2 = np.cos(PI * (x1 - low) / (high - low)), 0.5 * samples.x2.values
    total_1 = y1.var() / (y1 + y2).var()   # additive: S_T1 = Var(f1)/Var(f) on these samples
    np.testing.assert_allclose(result.ST_bound.sel(param="x1").item(), total_1, rtol=1e-9)


def test_the_bound_of_a_linear_function_on_a_uniform_input_is_12_over_pi_squared():
    """f = x on U(a, b): ν = 1, Var f = (b - a)²/12, so the bound is 12/π² ≈ 1.216 for S_T = 1."""
    x = midpoints(10_000, -2.0, 5.0)
    result = lf.sensitivity.dgsm(lambda p: 3.0 * p.x, xr.Dataset({"x": ("sample", x)}), bounds={"x": (-2.0, 5.0)},
                                 num_resamples=3)
    np.testing.assert_allclose(result.ST_bound.item(), 12 / PI ** 2, rtol=1e-6)


def test_normal_inputs_use_their_variance_and_linear_functions_attain_it():
    """f = 2 x1 + x2, x1 ~ N(1, 0.5²), x2 ~ N(0, 2²): S_T1 = 1/5, S_T2 = 4/5, and the
    bound σ_i² ν_i / Var f is the total index itself."""
    rng = np.random.default_rng(2)
    samples = xr.Dataset({"x1": ("sample", rng.normal(1.0, 0.5, 50_000)),
                          "x2": ("sample", rng.normal(0.0, 2.0, 50_000))})
    problem = {"names": ["x1", "x2"], "bounds": [[1.0, 0.5], [0.0, 2.0]], "dists": ["norm", "norm"]}
    result = lf.sensitivity.dgsm(lambda p: 2 * p.x1 + p.x2, samples, problem=problem, num_resamples=3)
    np.testing.assert_allclose(result.ST_bound.values, [0.2, 0.8], rtol=0.02)
    assert np.isnan(result.dgsm.values).all()        # SALib's (b - a)² normalisation is for uniform inputs


def test_a_quadratic_of_a_normal_input_has_bound_two():
    """f = x², x ~ N(0, 1): ν = E[4x²] = 4, Var f = 2, so the bound is 2 for S_T = 1."""
    x = np.random.default_rng(3).normal(0.0, 1.0, 200_000)
    problem = {"names": ["x"], "bounds": [[0.0, 1.0]], "dists": ["norm"]}
    result = lf.sensitivity.dgsm(lambda p: p.x ** 2, xr.Dataset({"x": ("sample", x)}), problem=problem,
                                 num_resamples=3)
    np.testing.assert_allclose(result.ST_bound.item(), 2.0, rtol=0.03)


@pytest.mark.parametrize("dist, params", [("triang", [0.0, 1.0, 0.5]), ("lognorm", [0.0, 1.0]),
                                          ("logunif", [1.0, 10.0]), ("truncnorm", [0.0, 1.0, 0.5, 0.2])])
def test_distributions_without_a_closed_form_constant_give_nan(dist, params):
    rng = np.random.default_rng(4)
    samples = xr.Dataset({"x": ("sample", rng.uniform(0.1, 1.0, 200)), "u": ("sample", rng.uniform(0, 1, 200))})
    problem = {"names": ["x", "u"], "bounds": [params, [0.0, 1.0]], "dists": [dist, "unif"]}
    result = lf.sensitivity.dgsm(lambda p: p.x * p.u, samples, problem=problem, num_resamples=3)
    assert np.isnan(result.ST_bound.sel(param="x").item()) and np.isnan(result.dgsm.sel(param="x").item())
    assert np.isfinite(result.ST_bound.sel(param="u").item()) and np.isfinite(result.vi.values).all()
