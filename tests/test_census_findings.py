"""What the xarray-method census (tests/census_xarray.py) found wrong, one small named
regression test each, strict xfail until fixed (the reason says what is wrong).

The oracle is the per-example loop in plain xarray (``isel(sample=i, drop=True)``, the
function, ``xr.concat`` along ``sample``), written out here.
"""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf


def _field():
    rng = np.random.default_rng(7)
    return xr.DataArray(
        rng.uniform(0.5, 1.5, (3, 4, 5)), dims=("sample", "x", "t"),
        coords={"sample": [10, 20, 30], "x": list("abcd"), "label": ("x", list("pqpq"))})


def _anomaly(a):
    return a.groupby("label") - a.groupby("label").mean()


def test_groupby_anomaly_values_match_the_loop():
    """The numbers are right (not a finding: the guard for the test below)."""
    a = _field()
    loop = xr.concat([_anomaly(a.isel(sample=i, drop=True)) for i in range(3)], dim="sample")
    out = lf.vmap(_anomaly, dim="sample")(a)
    np.testing.assert_allclose(out.transpose(*loop.dims).values, loop.values, rtol=1e-12)


def test_groupby_anomaly_keeps_the_mapped_index():
    """Inside vmap each example carries its `sample` label as a scalar coordinate (as
    x.isel(sample=i) has it), and xarray's groupby arithmetic spreads scalar coordinates along
    the grouped dim: it came back as a 2-D coordinate sample(sample, x).  A label spread so,
    its values still each example's own, now leaves as the caller's index (also under jit)."""
    a = _field()
    for mapped in (lf.vmap(_anomaly, dim="sample"), lf.jit(lf.vmap(_anomaly, dim="sample"))):
        out = mapped(a)
        assert out.coords["sample"].dims == ("sample",)
        assert "sample" in out.indexes
        xr.testing.assert_allclose(out.sel(sample=20).drop_vars("sample"),
                                   _anomaly(a.isel(sample=1, drop=True)).transpose(*out.dims[1:]))


def test_a_spread_label_that_the_function_changed_stays_as_it_is():
    """The guard of the rule above: a coordinate named like the label but holding other values
    (here the label plus the position along x) is the function's, and stays 2-D."""
    a = _field()

    def f(e):
        out = e.groupby("label") - e.groupby("label").mean()
        return out.assign_coords(sample=out.sample + xr.DataArray(np.arange(4), dims="x"))

    out = lf.vmap(f, dim="sample")(a)
    assert out.coords["sample"].dims == ("sample", "x")
    np.testing.assert_array_equal(out.sample.values, np.array([10, 20, 30])[:, None] + np.arange(4))


# --------------------------------------------------------------------------- #
# vmap over Dask chunks (found by running the census's V cases on `.chunk(sample=2)`)
# --------------------------------------------------------------------------- #
# `DataArray.chunk()` also chunks the non-index coordinates (here `label` and `lon`).  They
# used to travel as graph pieces, and the one-example run that gives the outputs' structure
# (labeled_func/dask.py) saw made-up values for them: an index made from one took those
# values, silently, and a groupby by one found other groups than the blocks.  Coordinates
# that do not span the mapped dim are now loaded when the graph is built.


def _chunked_field():
    a = _field().assign_coords(lon=("x", [1.0, 2.0, 4.0, 5.5]))
    return a, a.chunk(sample=2)


def test_dask_index_from_a_chunked_coordinate_keeps_its_values():
    a, chunked = _chunked_field()

    def f(example):
        return example.swap_dims(x="lon")

    out = lf.vmap(f, dim="sample")(chunked).compute()
    loop = xr.concat([f(a.isel(sample=i, drop=True)) for i in range(3)], dim="sample")
    np.testing.assert_array_equal(out.lon.values, loop.lon.values)


def test_dask_groupby_a_chunked_label_coordinate():
    a, chunked = _chunked_field()

    def f(example):
        return example.groupby("label").mean()

    out = lf.vmap(f, dim="sample")(chunked).compute()
    loop = xr.concat([f(a.isel(sample=i, drop=True)) for i in range(3)], dim="sample")
    xr.testing.assert_allclose(out.transpose(*loop.dims), loop.assign_coords(sample=out.sample))


def test_dask_with_only_the_data_chunked_is_right():
    """The guard of the two findings above: with the coordinates in memory both are right."""
    import dask.array as dask_array

    a, _ = _chunked_field()
    only_data = a.copy(data=dask_array.from_array(a.data, chunks=(2, 4, 5)))
    out = lf.vmap(lambda e: e.swap_dims(x="lon"), dim="sample")(only_data).compute()
    np.testing.assert_array_equal(out.lon.values, a.lon.values)
    grouped = lf.vmap(lambda e: e.groupby("label").mean(), dim="sample")(only_data).compute()
    loop = xr.concat([a.isel(sample=i, drop=True).groupby("label").mean() for i in range(3)], dim="sample")
    np.testing.assert_allclose(grouped.transpose(*loop.dims).values, loop.values, rtol=1e-12)
