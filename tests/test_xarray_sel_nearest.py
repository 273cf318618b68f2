"""x.sel(t=label, method="nearest") with traced labels (a label computed per example, or per
call under lf.jit): the positions found as pandas finds them, by searchsorted
(labeled_func/xarray_methods.py ``_pandas_index_sel``).  Oracles: the per-example loop (pandas
itself), including exact labels, ties, and labels outside the index; the un-jitted call."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

T = np.array([0.0, 0.5, 1.0, 2.0, 3.5])
X = xr.DataArray(np.random.default_rng(8).normal(size=(9, 5)), dims=("sample", "t"), coords={"t": T})
# exact labels, ties between neighbours (pandas: the one above), outside the index at both ends
LABELS = xr.DataArray([0.5, 0.25, 0.75, 1.5, 2.75, -3.0, 9.0, 1.2, 3.4], dims="sample")


def _loop(f, *args):
    return xr.concat([f(*(a.isel(sample=i) for a in args)) for i in range(9)], dim="sample")


def test_vmap_with_a_label_per_example_is_pandas_nearest():
    f = lambda x, q: x.sel(t=q, method="nearest")  # noqa: E731
    out = lf.vmap(f, dim="sample")(X, LABELS)
    xr.testing.assert_identical(out, _loop(f, X, LABELS))


def test_labels_computed_from_the_values_and_arrays_of_labels():
    f = lambda x: x.sel(t=x.mean("t") + 1.0, method="nearest")  # noqa: E731
    xr.testing.assert_identical(lf.vmap(f, dim="sample")(X), _loop(f, X))
    g = lambda x, q: x.sel(t=xr.concat([q, q + 0.7], dim="k"), method="nearest")  # noqa: E731
    xr.testing.assert_identical(lf.vmap(g, dim="sample")(X, LABELS), _loop(g, X, LABELS))


def test_jit_follows_each_calls_labels_and_grad_is_one_hot():
    f = lf.vmap(lambda x, q: x.sel(t=q, method="nearest"), dim="sample")
    jitted = lf.jit(f)
    jitted(X, LABELS)
    for labels in (LABELS * 0.5, LABELS.copy(data=LABELS.values[::-1].copy()), -LABELS):
        xr.testing.assert_identical(jitted(X, labels), f(X, labels))
    assert jitted.traces == 1
    x = X.isel(sample=0)
    grad = lf.grad(lambda v: v.sel(t=v.mean() + 1.4, method="nearest"))(x)
    expected = np.zeros(5)
    expected[int(x.indexes["t"].get_indexer([float(x.mean()) + 1.4], method="nearest")[0])] = 1.0
    np.testing.assert_allclose(grad.values, expected, atol=1e-12)   # the label carries no derivative


def test_a_decreasing_index_still_asks_pandas():
    rev = X.isel(t=slice(None, None, -1))
    with pytest.raises(lf.ConversionError):
        lf.vmap(lambda x, q: x.sel(t=q, method="nearest"), dim="sample")(rev, LABELS)
