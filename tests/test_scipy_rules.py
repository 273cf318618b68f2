"""SciPy functions that take traced values (labeled_func/scipy_rules.py): scipy.signal.detrend
and scipy.optimize.curve_fit, patched into SciPy's modules whichever is imported first.
Oracles: SciPy itself per example, and detrend's own linearity (its derivative is itself, and
as an orthogonal projection its transpose too)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

signal = pytest.importorskip("scipy.signal")
optimize = pytest.importorskip("scipy.optimize")

RNG = np.random.default_rng(3)
X = RNG.normal(size=(4, 3, 8)).cumsum(axis=-1)


def scipys(data, **kwargs):
    return signal.detrend.__wrapped__(data, **kwargs)


def test_untraced_calls_are_scipys_own():
    for kwargs in ({}, {"type": "constant"}, {"axis": 0}, {"bp": [3]}):
        np.testing.assert_array_equal(signal.detrend(X[0], **kwargs), scipys(X[0], **kwargs))
    assert signal.detrend.__wrapped__.__module__.startswith("scipy")
    assert optimize.curve_fit.__wrapped__.__module__.startswith("scipy")


@pytest.mark.parametrize("kind", ["linear", "constant", "l", "c"])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_detrend_under_vmap_is_scipys_per_example(kind, axis):
    got = lf.vmap(lambda v: signal.detrend(v, axis=axis, type=kind), in_dims=(0,))(X)
    np.testing.assert_allclose(got, [scipys(v, axis=axis, type=kind) for v in X], rtol=1e-12, atol=1e-12)
    jitted = lf.jit(lf.vmap(lambda v: signal.detrend(v, axis=axis, type=kind), in_dims=(0,)))
    for batch in (X, X * 2 - 1):
        np.testing.assert_allclose(jitted(batch), [scipys(v, axis=axis, type=kind) for v in batch],
                                   rtol=1e-12, atol=1e-12)


def test_detrend_keeps_float32_makes_integers_float_and_leaves_one_point_at_zero():
    single = X.astype(np.float32)
    got = lf.vmap(signal.detrend, in_dims=(0,))(single)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, [scipys(v) for v in single], rtol=1e-4, atol=1e-4)
    ints = np.arange(24).reshape(3, 8) ** 2
    got = lf.vmap(signal.detrend, in_dims=(0,))(ints)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, [scipys(v) for v in ints], rtol=1e-12, atol=1e-9)
    np.testing.assert_array_equal(lf.vmap(signal.detrend, in_dims=(0,))(X[:, :, :1]), np.zeros((4, 3, 1)))


@pytest.mark.parametrize("kind", ["linear", "constant"])
def test_derivatives_of_detrend_are_detrend_itself(kind):
    x, v, w = X[0], X[1], X[2]
    _, tangent = lf.jvp(lambda a: signal.detrend(a, type=kind), (x,), (v,))
    np.testing.assert_allclose(tangent, scipys(v, type=kind), rtol=1e-12, atol=1e-12)
    # an orthogonal projection along the axis: its transpose is itself
    gradient = lf.grad(lambda a: np.sum(w * signal.detrend(a, type=kind)))(x)
    np.testing.assert_allclose(gradient, scipys(w, type=kind), rtol=1e-12, atol=1e-12)


def test_detrend_through_apply_ufunc_as_xrft_calls_it():
    da = xr.DataArray(X, dims=("sample", "y", "t"), coords={"t": np.arange(8.0)})

    def detrended(a):
        return xr.apply_ufunc(signal.detrend, a, a.get_axis_num("t"), output_dtypes=[a.dtype])

    got = lf.vmap(detrended, dim="sample")(da)
    xr.testing.assert_allclose(got, xr.concat([detrended(da.isel(sample=i)) for i in range(4)], "sample"))
    weights = xr.DataArray(X[3], dims=("y", "t"))
    gradient = lf.grad(lambda a: (weights * detrended(a)).sum())(da.isel(sample=0))
    np.testing.assert_allclose(gradient.values, scipys(X[3]), rtol=1e-12, atol=1e-12)


def test_what_detrend_cannot_take_on_traced_data_is_said():
    with pytest.raises(lf.UnsupportedOperationError, match=r"bp="):
        lf.vmap(lambda v: signal.detrend(v, bp=[3]), in_dims=(0,))(X[:, 0])
    with pytest.raises(ValueError, match="Trend type must be 'linear' or 'constant'"):
        lf.vmap(lambda v: signal.detrend(v, type="quadratic"), in_dims=(0,))(X[:, 0])


def test_scipy_curve_fit_called_directly_under_grad_is_lf_curve_fit():
    t = np.array([0.0, 0.5, 1.5, 2.0, 3.5])
    y = np.array([1.0, 1.8, 2.1, 4.2, 5.0])
    slope = lambda y: optimize.curve_fit(lambda x, a, b: a * x + b, t, y)[0][0]  # noqa: E731
    np.testing.assert_allclose(lf.grad(slope)(y), (t - t.mean()) / np.sum((t - t.mean()) ** 2),
                               rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("order", ["labeled_func first", "scipy first"])
def test_the_functions_are_patched_whichever_is_imported_first(order):
    imports = ["import labeled_func", "import scipy.signal, scipy.optimize"]
    if order == "scipy first":
        imports.reverse()
    code = "; ".join(imports + [
        "import scipy.signal, scipy.optimize",
        "print(scipy.signal.detrend.__name__, scipy.optimize.curve_fit.__name__)",
    ])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["_detrend_hook", "_curve_fit_hook"]
