"""pandas.isna / isnull of a traced value: a boolean mask, which carries no derivative, so
grad and jvp answer with their primal's mask (as torch.func answers isnan), while vmap and
jit, where a value stands for many, still refuse it.  This is what xarray's interpolate_na
(its gap finder) needs under grad."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import labeled_func as lf


def _series():
    return xr.DataArray([1.0, np.nan, 3.0, 4.0, np.nan, np.nan, 7.0, 2.0], dims="t",
                        coords={"t": [0.0, 1.0, 2.0, 3.0, 4.5, 5.0, 6.0, 8.0]})


def _central(f, x, eps=1e-6):
    base = x.values.copy()
    out = np.zeros_like(base)
    for k in np.flatnonzero(~np.isnan(base)):
        step = np.zeros_like(base)
        step[k] = eps
        out[k] = (f(x.copy(data=base + step)) - f(x.copy(data=base - step))) / (2 * eps)
    return out


@pytest.mark.parametrize("options", [{}, {"use_coordinate": False}, {"limit": 1}])   # max_gap needs bottleneck
def test_interpolate_na_under_grad_is_central_differences(options):
    x = _series()
    weights = np.arange(1.0, 9.0)

    def loss(v):
        return (v.interpolate_na("t", **options).fillna(0.0) * weights).sum()

    grad = lf.grad(loss)(x)
    expected = _central(lambda v: float(loss(v)), x)
    np.testing.assert_allclose(np.where(np.isnan(x.values), 0.0, grad.values), expected, atol=1e-7)


def test_jvp_of_interpolate_na_is_the_interpolated_tangent():
    x = _series()
    tangent = x.copy(data=np.arange(8.0))
    _, out = lf.jvp(lambda v: v.interpolate_na("t"), (x,), (tangent,))
    expected = tangent.where(x.notnull()).interpolate_na("t")   # linear: the tangent interpolated alike
    np.testing.assert_allclose(out.values, expected.values, atol=1e-12)


def test_isna_under_grad_is_the_primals_mask_and_vmap_still_refuses():
    x = _series()
    seen = []

    def f(v):
        seen.append(pd.isna(v.data))
        return v.fillna(0.0).sum()

    lf.grad(f)(x)
    np.testing.assert_array_equal(seen[0], np.isnan(x.values))
    assert type(seen[0]) is np.ndarray
    with pytest.raises(lf.ConversionError, match="converting a traced value to a concrete array"):
        lf.vmap(lambda v: pd.isna(v.data).sum(), dim="sample")(x.expand_dims(sample=2))
    with pytest.raises(lf.ConversionError):
        lf.jit(lambda v: pd.isna(v.data).sum())(x)
