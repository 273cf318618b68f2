"""Coordinates under vmap behave as in the per-example loop (issue: ensembles).

1. Coordinates along the mapped dim are scalars inside, as ``x.isel(dim=i)`` has them:
   numeric ones (the index of numeric labels too) as mapped values, dates and strings as
   labels that compare with ``==``; a scalar coordinate that conflicts with shared data
   is dropped by xarray's arithmetic, as in the loop.
2. A coordinate spanning the mapped dim (``lat(y, x)`` of a curvilinear grid, mapped over
   ``y``) survives every merge xarray makes (``v.copy() + v``, rolling, ``lf.cond``,
   ``lf.while_loop``, Jacobians).

The oracle is the loop ``[f(x.isel(dim=i)) for i]`` (without ``drop``: each example keeps
its scalar coordinates), stacked with ``xr.concat``; Dask-chunked inputs must give the same
without computing anything while the graph is built.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import labeled_func as lf

dask = pytest.importorskip("dask")


def loop(f, dim, x):
    """The per-example loop, each example with its scalar coordinates along ``dim``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # xr.concat's coords default
        return xr.concat([f(x.isel({dim: i})) for i in range(x.sizes[dim])], dim=dim,
                         coords="different", compat="equals", join="exact")


def refuse_to_compute(dsk, keys, **kwargs):
    raise AssertionError("the graph was computed while it was being built")


def levels():
    """x(level, x) over pressure levels: a numeric index and a numeric coordinate along it."""
    rng = np.random.default_rng(0)
    return xr.DataArray(
        rng.normal(size=(4, 3)), dims=("level", "x"), name="x", attrs={"units": "K"},
        coords={"level": ("level", [1000.0, 850.0, 500.0, 250.0], {"units": "hPa"}),
                "weight": ("level", [0.1, 0.2, 0.3, 0.4]), "x": [1, 2, 3]})


def times():
    """x(time, x) with a datetime index, a numeric and a string coordinate along it."""
    rng = np.random.default_rng(1)
    return xr.DataArray(
        rng.normal(size=(6, 3)), dims=("time", "x"), name="x",
        coords={"time": xr.date_range("2000-01-01", periods=6, freq="6h"),
                "doy": ("time", np.arange(6) * 0.25), "tag": ("time", list("abcdef"))})


def curvilinear():
    """A curvilinear grid: lat(y, x) spans the mapped dim y."""
    rng = np.random.default_rng(2)
    y, x = 4, 5
    return xr.DataArray(
        rng.uniform(0.5, 1.5, (y, x)), dims=("y", "x"), name="field",
        coords={"lat": (("y", "x"), rng.uniform(-60, 60, (y, x)), {"units": "degrees_north"}),
                "x": np.arange(x) * 10.0})


# --- 1. coordinates along the mapped dim ---------------------------------------------------------
def weighted(v):
    return v * v.weight + np.log(v.level) * v.x


@pytest.mark.parametrize("as_dataset", [False, True])
def test_numeric_coordinates_along_the_dim_are_scalars_inside(as_dataset):
    x = levels()
    if as_dataset:
        x = x.rename("t").to_dataset()
        f = lambda d: d.assign(y=weighted(d.t))  # noqa: E731
    else:
        f = weighted
    xr.testing.assert_identical(lf.vmap(f, dim="level")(x), loop(f, "level", x))


def test_inside_each_example_has_the_loops_coordinates():
    x = levels()
    seen = {}

    def f(v):
        seen["coords"] = {name: (c.dims, c.dtype, c.attrs) for name, c in v.coords.items()}
        return v.level, v.weight

    level, weight = lf.vmap(f, dim="level")(x)
    example = x.isel(level=0)
    assert seen["coords"] == {name: (c.dims, c.dtype, c.attrs) for name, c in example.coords.items()}
    xr.testing.assert_identical(level, loop(lambda v: v.level, "level", x))
    xr.testing.assert_identical(weight, loop(lambda v: v.weight, "level", x))


def test_untouched_coordinates_come_back_as_the_callers_and_changed_ones_as_changed():
    x = levels()
    out = lf.vmap(lambda v: 2 * v, dim="level")(x)
    xr.testing.assert_identical(out.coords.to_dataset(), x.coords.to_dataset())
    changed = lambda v: v.assign_coords(weight=v.weight * 10, level=v.level / 100)  # noqa: E731
    xr.testing.assert_identical(lf.vmap(changed, dim="level")(x), loop(changed, "level", x))


def test_a_conflicting_scalar_coordinate_is_dropped_as_in_the_loop():
    ens = levels().rename(level="member").assign_coords(member=[0, 1, 2, 3])
    control = ens.sel(member=2)
    f = lambda m: m - control  # noqa: E731
    out = lf.vmap(f, dim="member")(ens)
    per_example = [f(ens.isel(member=i)) for i in range(4)]
    np.testing.assert_allclose(out.values, np.stack([r.values for r in per_example]))
    # xarray drops member and weight where they differ from the control's, keeps them where not
    for i, r in enumerate(per_example):
        assert set(r.coords) <= set(out.coords)
        for name in r.coords:
            xr.testing.assert_identical(r[name].variable, out.isel(member=i)[name].variable)
    xr.testing.assert_identical(out.coords.to_dataset(), ens.coords.to_dataset())


def test_string_labels_compare_per_example_and_conflict_as_in_the_loop():
    ens = levels().rename(level="member").assign_coords(member=["a", "b", "ctrl", "d"])
    control = ens.sel(member="ctrl")

    def anomaly(m):
        return xr.where(m.member == "ctrl", 0.0, m - control) + (m.member != "b")

    out = lf.vmap(anomaly, dim="member")(ens)
    per_example = [anomaly(ens.isel(member=i)) for i in range(4)]
    np.testing.assert_allclose(out.values, np.stack([r.values for r in per_example]))
    assert list(out.member.values) == ["a", "b", "ctrl", "d"]


def test_datetime_fields_raise_saying_how_to_pass_them():
    x = times()
    with pytest.raises(lf.UnsupportedOperationError, match=r"\.dt accessor.*'time'.*assign_coords\(hour="):
        lf.vmap(lambda v: v * v.time.dt.hour, dim="time")(x)
    with pytest.raises(lf.UnsupportedOperationError, match=r"'tag'.*<U1"):
        lf.vmap(lambda v: v * v.tag.astype(float), dim="time")(x)
    with pytest.raises(lf.UnsupportedOperationError, match=r"'time'"):
        lf.vmap(lambda v: v + v.time.values.astype(float), dim="time")(x)
    with pytest.raises(lf.DataDependentControlFlowError):
        lf.vmap(lambda v: v if v.tag == "c" else -v, dim="time")(x)


def test_datetime_fields_passed_as_a_coordinate_and_labels_compared():
    x = times()

    def diurnal(v):
        return v * np.cos(2 * np.pi * v.hour / 24) + (v.time == np.datetime64("2000-01-01T12:00")) + v.doy

    oracle = loop(lambda v: v * np.cos(2 * np.pi * v.time.dt.hour / 24)
                  + (v.time == np.datetime64("2000-01-01T12:00")) + v.doy, "time", x)
    out = lf.vmap(diurnal, dim="time")(x.assign_coords(hour=x.time.dt.hour))
    xr.testing.assert_identical(out.drop_vars("hour"), oracle)
    # labels returned as data come out as the loop gives them
    xr.testing.assert_identical(lf.vmap(lambda v: v.time, dim="time")(x), loop(lambda v: v.time, "time", x))
    xr.testing.assert_identical(lf.vmap(lambda v: v.tag.rename("t2"), dim="time")(x),
                                loop(lambda v: v.tag.rename("t2"), "time", x))


def test_labels_merge_with_copies_and_print_inside(capsys):
    x = times()
    f = lambda v: v.copy(deep=True) + v + v.sum()  # noqa: E731
    xr.testing.assert_identical(lf.vmap(f, dim="time")(x), loop(f, "time", x))
    lf.vmap(lambda v: print(v) or v, dim="time")(x)
    assert "label of each example" in capsys.readouterr().out


def test_two_arguments_with_different_labels_merge_as_in_the_loop():
    a = times()
    b = a.assign_coords(tag=("time", list("uvwxyz")), doy=a.doy + 1)
    f = lambda u, w: u * w  # noqa: E731
    out = lf.vmap(f, dim="time")(a, b)
    per_example = [f(a.isel(time=i), b.isel(time=i)) for i in range(6)]
    np.testing.assert_allclose(out.values, np.stack([r.values for r in per_example]))
    assert all("tag" not in r.coords and "doy" not in r.coords for r in per_example)  # dropped


def test_nested_dims_and_chunks_match_the_loop():
    rng = np.random.default_rng(3)
    z = xr.DataArray(rng.normal(size=(2, 3, 4)), dims=("a", "b", "c"),
                     coords={"a": [1.0, 2.0], "b": [10, 20, 30], "ab": (("a", "b"), rng.normal(size=(2, 3))),
                             "bw": ("b", [5.0, 6.0, 7.0])})
    f = lambda v: v * v.a + v.b * v.ab - v.bw  # noqa: E731
    oracle = loop(lambda za: loop(f, "b", za), "a", z)
    xr.testing.assert_identical(lf.vmap(f, dim=("a", "b"))(z), oracle)
    xr.testing.assert_identical(lf.vmap(f, dim=("a", "b"), chunk_size=1)(z), oracle)


def test_a_lazy_vmap_sees_the_coordinates_and_computes_nothing_while_built():
    x = levels()
    lazy_x = x.chunk(level=2)
    with dask.config.set(scheduler=refuse_to_compute):
        out = lf.vmap(weighted, dim="level")(lazy_x)
        changed = lf.vmap(lambda v: v.assign_coords(weight=v.weight * 2), dim="level")(lazy_x)
    assert out.chunks == ((2, 2), (3,))
    xr.testing.assert_identical(out.compute(), loop(weighted, "level", x))
    xr.testing.assert_identical(changed.compute(), loop(lambda v: v.assign_coords(weight=v.weight * 2), "level", x))
    x = times()
    diurnal = lambda v: v * v.doy + (v.tag == "c")  # noqa: E731
    with dask.config.set(scheduler=refuse_to_compute):
        out = lf.vmap(diurnal, dim="time")(x.chunk(time=4))
    xr.testing.assert_identical(out.compute(), loop(diurnal, "time", x).chunk(time=4).compute())


# --- 2. a coordinate spanning the mapped dim ------------------------------------------------------
def _rolling(v):
    return v.rolling(x=2).mean()


def _cond(v):
    return lf.cond(v.mean() > 1.0, lambda a: a * 2, lambda a: a - 1, v)


def _while(v):
    return lf.while_loop(lambda a: a.sum() < 20, lambda a: a * 1.5, v)


MERGING = {
    "copy plus itself": lambda v: v.copy() + v,
    "deep copy": lambda v: v.copy(deep=True) * v.copy(deep=True),
    "rolling mean": _rolling,
    "xr.where": lambda v: xr.where(v > 1.0, v, v.copy() * 0),
    "lf.cond": _cond,
    "lf.while_loop": _while,
}


@pytest.mark.parametrize("name", list(MERGING))
def test_a_coordinate_spanning_the_dim_survives_merges(name):
    x = curvilinear()
    f = MERGING[name]
    xr.testing.assert_identical(lf.vmap(f, dim="y")(x), loop(f, "y", x))


@pytest.mark.parametrize("name", ["copy plus itself", "rolling mean", "lf.cond", "lf.while_loop"])
def test_a_coordinate_spanning_the_dim_survives_merges_lazily(name):
    x = curvilinear()
    f = MERGING[name]
    with dask.config.set(scheduler=refuse_to_compute):
        out = lf.vmap(f, dim="y")(x.chunk(y=2))
    assert out.chunks[0] == (2, 2)
    xr.testing.assert_identical(out.compute(), loop(f, "y", x).chunk(y=2).compute())


@pytest.mark.parametrize("transform", ["jacfwd", "jacrev", "hessian", "jacrev of an array"])
def test_jacobians_under_vmap_keep_the_coordinate(transform):
    x, dim = curvilinear(), "y"
    if transform == "hessian":
        f = lf.hessian(lambda v: (v ** 3).sum())
    elif transform == "jacrev of an array":  # the argument's scalar coordinates label the Jacobian
        x, dim = levels(), "level"
        f = lf.jacrev(lambda v: (v ** 2).sum().data)
    else:
        f = getattr(lf, transform)(lambda v: np.sin(v) * v.lat)
    xr.testing.assert_allclose(lf.vmap(f, dim=dim)(x), loop(f, dim, x))


def test_equality_that_examples_disagree_on_raises_outside_merges():
    x = curvilinear()
    first = x.isel(y=0)
    agree = lf.vmap(lambda v: v * float(v.lat.equals(v.lat.copy(deep=True))), dim="y")(x)
    xr.testing.assert_identical(agree, loop(lambda v: v * float(v.lat.equals(v.lat.copy(deep=True))), "y", x))
    with pytest.raises(lf.DataDependentControlFlowError):
        lf.vmap(lambda v: v * float(v.lat.equals(first.lat)), dim="y")(x)


def test_a_merge_that_refuses_conflicts_raises_as_the_loop_does():
    x = curvilinear()
    other = x.isel(y=1).rename("other")
    with pytest.raises(xr.MergeError):
        xr.merge([x.isel(y=0), other], compat="no_conflicts")  # the loop, first example
    with pytest.raises(xr.MergeError):
        lf.vmap(lambda v: xr.merge([v, other], compat="no_conflicts"), dim="y")(x)
    same = x.isel(y=slice(1, 2))  # one example: it agrees with itself
    out = lf.vmap(lambda v: xr.merge([v, other], compat="no_conflicts"), dim="y")(same)
    xr.testing.assert_identical(out.isel(y=0), xr.merge([same.isel(y=0), other], compat="no_conflicts"))


# --- the same under lf.jit, and labels of other kinds ---------------------------------------------
def test_under_jit_in_memory_and_lazily():
    x = levels()
    jitted = lf.jit(lf.vmap(weighted, dim="level"))
    xr.testing.assert_identical(jitted(x), loop(weighted, "level", x))
    xr.testing.assert_identical(jitted(x * 2), loop(weighted, "level", x * 2))  # the program replayed
    field = curvilinear()
    f = MERGING["copy plus itself"]
    lazy = lf.jit(lf.vmap(f, dim="y"))(field.chunk(y=2))
    xr.testing.assert_identical(lazy.compute(), loop(f, "y", field).chunk(y=2).compute())


def test_category_labels_compare_and_labels_come_back_as_returned():
    x = levels().assign_coords(kind=("level", pd.Categorical(["sfc", "low", "mid", "mid"])))
    f = lambda v: v * (v.kind == "mid")  # noqa: E731
    out = lf.vmap(f, dim="level")(x)
    np.testing.assert_array_equal(out.values, np.stack([f(x.isel(level=i)).values for i in range(4)]))
    tags = times().tag
    variable, data = lf.vmap(lambda v: (v.tag.variable, v.tag.data), dim="time")(times())
    xr.testing.assert_identical(variable, tags.variable)
    np.testing.assert_array_equal(data, tags.values)
