"""x.isel(t=k) at traced positions (k = x.argmax("t") per example, or per call under lf.jit):
labeled_func/xarray_methods.py indexes as NumPy indexes with an integer (the dim dropped) and
gathers an index coordinate's numeric labels.  Oracles: the per-example loop, central
differences, the un-jitted call."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

RNG = np.random.default_rng(5)
X = xr.DataArray(RNG.normal(size=(4, 3, 6)), dims=("sample", "x", "t"),
                 coords={"sample": [1, 2, 3, 4], "t": np.linspace(0.0, 2.5, 6), "x": [10.0, 20.0, 30.0],
                         "tt": ("t", np.arange(6) * 3)}, attrs={"units": "m"})

CASES = {
    "peak over t (positions along x)": lambda v: v.isel(t=v.argmax("t")),
    "peak of the mean": lambda v: v.isel(t=v.mean("x").argmax("t")),
    "peak, no index": lambda v: v.drop_vars("t").isel(t=v.mean("x").argmin("t")),
    "two positions": lambda v: v.isel(t=v.mean("x").argmax("t"), x=v.mean("t").argmin("x")),
    "dataset": lambda v: v.to_dataset(name="a").assign(b=v * 2).isel(t=v.mean("x").argmax("t")),
}


def _loop(f):
    return xr.concat([f(X.isel(sample=i)) for i in range(4)], dim="sample", coords="different",
                     compat="equals", join="outer")


@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap_is_the_loop(name):
    f = CASES[name]
    out = lf.vmap(f, dim="sample")(X)
    expected = _loop(f)
    xr.testing.assert_identical(out.transpose(*expected.dims), expected)


@pytest.mark.parametrize("name", ["peak over t (positions along x)", "two positions"])
def test_grad_is_central_differences(name):
    f = CASES[name]
    x = X.isel(sample=0, drop=True)
    weights = RNG.normal(size=f(x).shape)

    def loss(v):
        return float((f(v) * weights).sum())

    grad = lf.grad(lambda v: (f(v) * weights).sum())(x)
    base, expected = x.values, np.zeros(x.shape)
    for k in np.ndindex(base.shape):
        step = np.zeros_like(base)
        step[k] = 1e-7
        expected[k] = (loss(x.copy(data=base + step)) - loss(x.copy(data=base - step))) / 2e-7
    np.testing.assert_allclose(grad.values, expected, atol=1e-6)


def test_jit_follows_the_positions_of_each_call():
    f = lf.vmap(CASES["two positions"], dim="sample")
    jitted = lf.jit(f)
    jitted(X)
    for other in (-X, X.copy(data=RNG.normal(size=X.shape)), X ** 2):
        xr.testing.assert_identical(jitted(other), f(other))
    assert jitted.traces == 1


def test_labels_that_are_not_numbers_are_refused_naming_the_coordinate():
    dated = X.assign_coords(t=xr.date_range("2000-01-01", periods=6, freq="D"))
    with pytest.raises(lf.UnsupportedOperationError, match="coordinate along 't'.*drop that coordinate"):
        lf.vmap(lambda v: v.isel(t=v.mean("x").argmax("t")), dim="sample")(dated)
    # dropped first, as the message says: the loop's values
    f = lambda v: v.drop_vars("t").isel(t=v.mean("x").argmax("t"))  # noqa: E731
    xr.testing.assert_identical(lf.vmap(f, dim="sample")(dated), _loop_of(f, dated))


def _loop_of(f, data):
    return xr.concat([f(data.isel(sample=i)) for i in range(4)], dim="sample")


def test_untraced_isel_is_xarrays():
    from labeled_func import xarray_methods
    x = X.isel(sample=0)
    for key in ({"t": 2}, {"t": slice(1, 4)}, {"t": [0, 2]}, {"x": -1, "t": 3}):   # the hook hands them on
        np.testing.assert_array_equal(xarray_methods.original("__getitem__")(x.variable, tuple(
            key.get(d, slice(None)) for d in x.dims)).values, x.isel(**key).values)
