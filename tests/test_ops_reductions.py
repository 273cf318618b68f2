"""Reductions where the operator table cannot reach, each once silently wrong: std and var at zero
spread (the zero subgradient, no NaN), quantile/percentile/median with NumPy's dtypes and NumPy's
values next to infinities, their levels out of range, and the derivative of an interpolated quantile.

Oracles: NumPy's own results and dtypes, the per-example loop (vmap), derivatives worked out by
hand, and the documented convention (the zero subgradient of std at zero spread, docs/autodiff.md).
"""
import functools
import warnings

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from transform_by_name import BATCH, under as run


# --- std and var over one element (zero spread) --------------------------------------------------------
STDS = {
    "xarray-std": lambda x: x.std(),                     # xarray: nanstd
    "numpy-std": lambda x: np.std(x.data),                 # the reduce_std primitive
    "xarray-std-ddof1": lambda x: x.std(ddof=1),
    "numpy-std-keepdims": lambda x: np.std(x.data, keepdims=True).sum(),
}


@pytest.mark.parametrize("name", sorted(STDS))
@pytest.mark.parametrize("transform", ["grad", "jvp", "jacrev", "jacfwd", "hessian"])
def test_std_at_zero_spread_has_the_zero_subgradient(transform, name):
    # before: NaN (sqrt's or 1/std's infinite slope times zero)
    f = STDS[name]
    one = xr.DataArray([3.0], dims="t")
    flat = xr.DataArray([2.0, 2.0, 2.0], dims="t")
    for x in ([flat] if "ddof1" in name else [one, flat]):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # no 0/0 anywhere
            if transform == "hessian":
                got = lf.hessian(f)(x)
            else:
                got = run(transform, f, x)
        assert float(f(x)) == 0.0
        np.testing.assert_array_equal(np.asarray(got), 0.0)


@pytest.mark.parametrize("name", sorted(STDS))
def test_std_away_from_zero_spread_keeps_its_derivative(name):
    f = STDS[name]
    ddof = 1 if "ddof1" in name else 0
    x = BATCH[1]
    n = x.size
    expected = (x - x.mean()) / ((n - ddof) * float(x.std(ddof=ddof)))  # d std / d x_i
    np.testing.assert_allclose(lf.grad(f)(x).values, expected.values, rtol=1e-12)
    # vmap of grad over a flat and a spread example: each as alone
    both = xr.concat([xr.full_like(x, 2.0), x], dim="s")
    per_example = lf.vmap(lf.grad(f), dim="s")(both)
    np.testing.assert_array_equal(per_example[0].values, 0.0)
    np.testing.assert_allclose(per_example[1].values, expected.values, rtol=1e-12)


@pytest.mark.parametrize("transform", ["grad", "jvp"])
def test_var_at_zero_spread_has_its_true_derivative_zero(transform):
    for f in (lambda x: x.var(), lambda x: np.var(x.data)):
        got = run(transform, f, xr.DataArray([3.0], dims="t"))
        np.testing.assert_array_equal(np.asarray(got), 0.0)


# --- quantile / percentile: NumPy's dtype, and its values across infinities -------------------------
FUNCTIONS = {"quantile": (np.quantile, 1), "nanquantile": (np.nanquantile, 1),
             "percentile": (np.percentile, 100), "nanpercentile": (np.nanpercentile, 100)}
LEVELS = {
    "python-float": 0.3, "python-int-1": 1, "numpy-float64": np.float64(0.7), "numpy-float32": np.float32(0.3),
    "list": [0.1, 0.5, 1.0], "tuple": (0.25, 0.75), "float32-array": np.array([0.2, 0.9], np.float32),
    "int-array": np.array([0, 1]), "0d-array": np.array(0.6), "int-list": [1],
}


def _scaled(q, scale):
    if scale == 1:
        return q
    if isinstance(q, (list, tuple)):
        return type(q)(v * scale for v in q)
    return q * scale


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.float16])
@pytest.mark.parametrize("level", sorted(LEVELS))
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_quantile_dtype_and_values_are_numpys(name, level, dtype):
    # before: a sequence of levels on float32 data gave float32 (NumPy: float64)
    function, scale = FUNCTIONS[name]
    q = _scaled(LEVELS[level], scale)
    data = np.array([[3.0, 1.0, 4.0, 1.5, 9.0], [2.0, 6.0, 5.0, 3.5, 0.5]]).astype(dtype)
    expected = np.stack([function(row, q) for row in data])
    got = lf.vmap(lambda v: function(v, q), in_dims=(0,))(data)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


INFINITE = [[1.0, np.inf], [-np.inf, 1.0], [-np.inf, np.inf], [1.0, 2.0, np.inf], [-np.inf, -np.inf, 1.0],
            [1.0, np.nan, -np.inf], [np.nan, np.nan]]


@pytest.mark.parametrize("values", INFINITE, ids=str)
@pytest.mark.parametrize("name", sorted(FUNCTIONS) + ["median", "nanmedian"])
def test_quantiles_next_to_infinities_are_numpys(name, values):
    # before: NaN where NumPy interpolates from the upper neighbour (fraction >= 0.5) and
    # gives the infinity, e.g. np.quantile([-inf, 1], 0.75) = -inf
    data = np.array([values])
    if name in ("median", "nanmedian"):
        function = getattr(np, name)
        calls = [function]
    else:
        function, scale = FUNCTIONS[name]
        calls = [functools.partial(function, q=_scaled(q, scale)) for q in (0.0, 0.25, 0.5, 0.75, 0.9, 1.0, 1)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for call in calls:
            expected = call(data[0])
            got = lf.vmap(call, in_dims=(0,))(data)[0]
            assert got.dtype == expected.dtype
            np.testing.assert_array_equal(got, expected, err_msg=f"{name}{values} {call}")


def test_quantile_levels_out_of_range_raise_numpys_error():
    for function, q, message in [(np.quantile, 1.5, r"Quantiles must be in the range \[0, 1\]"),
                                 (np.nanpercentile, [50, 101], r"Percentiles must be in the range \[0, 100\]")]:
        with pytest.raises(ValueError, match=message):
            function(np.arange(3.0), q)  # NumPy's own
        with pytest.raises(ValueError, match=message):
            lf.vmap(lambda v: function(v, q), in_dims=(0,))(np.arange(6.0).reshape(2, 3))


def test_quantile_derivative_from_the_upper_neighbour_is_the_interpolation_weight():
    # q = 0.75 of 4 values: index 2.25 between the 3rd and 4th smallest, weights 0.75 and 0.25
    x = xr.DataArray([4.0, 1.0, 3.0, 2.0], dims="t")
    grad = lf.grad(lambda v: np.quantile(v.data, 0.75))(x)
    np.testing.assert_allclose(grad.values, [0.25, 0.0, 0.75, 0.0])
    grad = lf.grad(lambda v: np.quantile(v.data, 0.4))(x)  # index 1.2: weights 0.8, 0.2
    np.testing.assert_allclose(grad.values, [0.0, 0.0, 0.2, 0.8])
