"""NumPy functions called on DataArrays that hold traced values (labeled_func/xarray_numpy.py):
what NumPy's own code gives on the DataArray, per example (the loop), under grad (central
differences) and jit (the un-jitted call); and plain xarray unchanged outside transforms."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func import xarray_numpy

RNG = np.random.default_rng(11)
X = xr.DataArray(RNG.normal(size=(3, 6)), dims=("sample", "t"), coords={"t": np.arange(6.0)})

CASES = {
    "ifftshift": lambda v: np.fft.ifftshift(np.flip(v)),        # xrft: a NumPy array
    "gradient": lambda v: np.gradient(v, 0.5),                  # geocat: a NumPy array
    "nanmax": lambda v: np.nanmax(v),                           # pyet: a NumPy scalar
    "swapaxes": lambda v: np.swapaxes(v, 0, 0),                 # geocat: _wrapit hands it back to the DataArray
    "flip": lambda v: np.flip(v),                               # indexing only: a DataArray
    "take": lambda v: np.take(v.drop_vars("t"), [0, 2, 5]),      # _wrapit, another length (no coordinate)
    "cumsum": lambda v: np.cumsum(v) * 2.0,
    "concatenate": lambda v: np.concatenate([v, v * 2.0]),
    "where": lambda v: np.where(v > 0, v, 0.0),
}


def _loop(f):
    return [f(X.isel(sample=i, drop=True)) for i in range(X.sizes["sample"])]


@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap_gives_what_numpy_gives_per_example(name):
    f = CASES[name]
    expected = _loop(f)
    out = lf.vmap(f, dim="sample")(X)
    assert type(out) is type(expected[0]) or (isinstance(out, np.ndarray) and np.ndim(expected[0]) == 0)
    np.testing.assert_allclose(np.asarray(out), np.stack([np.asarray(e) for e in expected]), rtol=1e-14)
    if isinstance(out, xr.DataArray):
        xr.testing.assert_identical(out, xr.concat(expected, dim="sample").transpose(*out.dims))


@pytest.mark.parametrize("name", sorted(CASES))
def test_grad_is_central_differences(name):
    f = CASES[name]
    x = X.isel(sample=1, drop=True)
    weights = RNG.normal(size=np.shape(f(x)))
    grad = lf.grad(lambda v: (f(v) * weights).sum())(x)
    base, expected = x.values, np.zeros(x.shape)
    for k in range(base.size):
        step = np.zeros_like(base)
        step[k] = 1e-6
        plus = float((np.asarray(f(x.copy(data=base + step))) * weights).sum())
        minus = float((np.asarray(f(x.copy(data=base - step))) * weights).sum())
        expected[k] = (plus - minus) / 2e-6
    np.testing.assert_allclose(np.asarray(grad), expected, atol=1e-7)


@pytest.mark.parametrize("name", ["ifftshift", "gradient", "swapaxes", "concatenate"])
def test_jit_replays_the_function(name):
    f = lf.vmap(CASES[name], dim="sample")
    jitted = lf.jit(f)
    jitted(X)
    other = X * 1.5 - 0.25
    np.testing.assert_array_equal(np.asarray(jitted(other)), np.asarray(f(other)))
    assert jitted.traces == 1


def test_untraced_calls_are_numpys_own():
    assert xarray_numpy.STATUS == "installed"
    x = X.isel(sample=0, drop=True)
    assert type(np.flip(x)) is xr.DataArray and type(np.fft.ifftshift(x)) is np.ndarray
    np.testing.assert_array_equal(np.gradient(x), np.gradient(x.values))
    assert type(np.swapaxes(x, 0, 0)) is xr.DataArray
    np.testing.assert_array_equal(np.lexsort([x, x.values]), np.lexsort([x.values, x.values]))  # with an ndarray
    # NumPy's _wrapit hands a shorter array to a DataArray whose coordinate keeps its length:
    # plain xarray builds an inconsistent DataArray; the vmap's outputs refuse it
    assert np.take(x, [0, 2, 5]).sizes["t"] == 3 and x.t.size == 6
    with pytest.raises(ValueError, match="conflicting sizes for dimension 't'"):
        lf.vmap(lambda v: np.take(v, [0, 2, 5]), dim="sample")(X)


def test_a_numpy_function_without_a_kernel_says_so():
    with pytest.raises(lf.UnsupportedOperationError, match="numpy.packbits has no kernel"):
        lf.vmap(lambda v: np.packbits(v > 0), dim="sample")(X)


def test_a_function_outside_the_protocol_still_converts():
    with pytest.raises(lf.ConversionError, match=r"numpy\.asarray_chkfinite has no xarray version"):
        lf.vmap(lambda v: np.asarray_chkfinite(v), dim="sample")(X)
