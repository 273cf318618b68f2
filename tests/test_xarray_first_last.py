"""groupby/resample first() and last() on traced values (xarray's nanfirst/nanlast, hooked in
labeled_func/xarray_methods.py): against the per-example loop, central differences and the
un-jitted call, with NaN at the ends of groups and an all-NaN group."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf


def _data():
    rng = np.random.default_rng(3)
    values = rng.normal(size=(4, 6))
    values[0, 0] = values[1, 2] = values[2, 5] = np.nan       # NaN first, last in a group
    values[3, 0:2] = np.nan                                    # example 3: group "a" all NaN
    return xr.DataArray(values, dims=("sample", "t"),
                        coords={"sample": [10, 20, 30, 40], "label": ("t", list("aabbcc"))})


@pytest.mark.parametrize("which", ["first", "last"])
@pytest.mark.parametrize("skipna", [None, False])
def test_groupby_first_last_under_vmap_and_jit_is_the_loop(which, skipna):
    x = _data()

    def f(v):
        return getattr(v.groupby("label"), which)(skipna=skipna)

    loop = xr.concat([f(x.isel(sample=i)) for i in range(4)], dim="sample")
    out = lf.vmap(f, dim="sample")(x)
    xr.testing.assert_identical(out.transpose(*loop.dims), loop)
    jitted = lf.jit(lf.vmap(f, dim="sample"))
    jitted(x)
    shifted = x.copy(data=x.data + 1.5)                       # the same NaN, other values: a replay
    xr.testing.assert_identical(jitted(shifted), lf.vmap(f, dim="sample")(shifted))
    assert jitted.traces == 1


@pytest.mark.parametrize("which", ["first", "last"])
def test_grad_goes_to_the_element_picked(which):
    x = _data().isel(sample=1)
    weights = xr.DataArray([1.0, 2.0, 3.0], dims="label", coords={"label": list("abc")})

    def loss(v):
        return (getattr(v.groupby("label"), which)() * weights).sum()

    grad = lf.grad(loss)(x)
    base = x.values.copy()
    expected = np.zeros_like(base)
    for k in range(base.size):                                # central differences, NaN entries skipped
        if np.isnan(base[k]):
            continue
        step = np.zeros_like(base)
        step[k] = 1e-6
        expected[k] = (float(loss(x.copy(data=base + step))) - float(loss(x.copy(data=base - step)))) / 2e-6
    np.testing.assert_allclose(np.nan_to_num(grad.values), expected, atol=1e-8)
    assert np.count_nonzero(expected) == 3                    # one element picked per group


def test_resample_first_of_a_time_series():
    time = xr.date_range("2000-01-01", periods=8, freq="6h")
    x = xr.DataArray(np.arange(16.0).reshape(2, 8), dims=("sample", "time"), coords={"time": time})
    x[0, 0] = np.nan

    def f(v):
        return v.resample(time="1D").first()

    loop = xr.concat([f(x.isel(sample=i)) for i in range(2)], dim="sample")
    xr.testing.assert_identical(lf.vmap(f, dim="sample")(x).transpose(*loop.dims), loop)


def test_untraced_calls_are_xarrays_own():
    from labeled_func import xarray_methods
    assert xarray_methods.installed()
    values = _data().values
    np.testing.assert_array_equal(xarray_methods._nanfirst(values, 1), xarray_methods.original("nanfirst")(values, 1))
