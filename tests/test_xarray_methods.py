"""idxmax/idxmin, sortby, polyfit, groupby and dropna under vmap, grad and jit (issue 26,
item 3): the hooks of ``labeled_func.xarray_methods`` and ``branches="agree"``.

Oracles: the per-example loop (vmap), lf.jit equal to the function, central differences
(grad; idxmax's labels are not differentiable: values only), and the refusals' messages.
"""
from __future__ import annotations

import types
import warnings

import numpy as np
import pytest
import xarray as xr
from xarray.computation import computation as xr_computation
from xarray.computation import fit as xr_fit

import labeled_func as lf
from labeled_func import xarray_methods
from labeled_func.errors import DynamicShapeError, UnsupportedOperationError

EPS = 1e-6


def loop(f, *args):
    return xr.concat([f(*[a.isel(s=i) for a in args]) for i in range(args[0].sizes["s"])], "s")


def check(f, *args, exact=True, **vmap_kwargs):
    want = loop(f, *args)
    for got in (lf.vmap(f, dim="s", **vmap_kwargs)(*args), lf.jit(lf.vmap(f, dim="s", **vmap_kwargs))(*args)):
        got = got.transpose(*want.dims)
        if exact:
            xr.testing.assert_identical(got, want)
        else:
            xr.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
            assert got.isnull().equals(want.isnull())
    single = [a.isel(s=0) for a in args]
    if exact:
        xr.testing.assert_identical(lf.jit(f)(*single), f(*single))
    else:
        xr.testing.assert_allclose(lf.jit(f)(*single), f(*single), rtol=1e-12, atol=1e-12)


def check_grad(f, x, jit=True):
    """grad of f(x).sum() against central differences; lf.jit of it equal."""
    g = lambda d: f(d).sum()  # noqa: E731
    got = lf.grad(g)(x)
    want = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        step = np.zeros(x.shape)
        step[i] = EPS
        want[i] = (float(g(x + step)) - float(g(x - step))) / (2 * EPS)
    np.testing.assert_allclose(got.values, want, rtol=1e-6, atol=1e-6)
    if jit:
        np.testing.assert_array_equal(lf.jit(lf.grad(g))(x).values, got.values)


def data(seed=0, nan=True):
    rng = np.random.default_rng(seed)
    da = xr.DataArray(rng.normal(size=(3, 6, 2)), dims=("s", "x", "y"),
                      coords={"x": np.linspace(0.0, 1.0, 6) ** 2, "y": [10, 20]}, attrs={"units": "m"})
    if nan:
        da[1, :, 0] = np.nan  # an all-NaN slice
        da[2, 3, 1] = np.nan
    return da


def test_hooks_installed():
    assert xarray_methods.STATUS == "installed", xarray_methods.STATUS
    assert xarray_methods.installed()
    assert xr_computation._calc_idxminmax is xarray_methods._calc_idxminmax
    assert xr_fit.polyfit is xarray_methods._polyfit and xr_fit.least_squares is xarray_methods._least_squares
    assert xr.Dataset.sortby is xarray_methods._sortby


@pytest.mark.parametrize("version", xarray_methods.TESTED_XARRAY_VERSIONS)
def test_the_versions_it_was_written_against(version):
    """One test per xarray version the hooks were written against: this one is installed."""
    if xr.__version__ != version:
        pytest.skip(f"xarray {xr.__version__} is installed, not {version}")
    assert xarray_methods._check() is None
    assert xarray_methods.installed()


def test_install_is_idempotent():
    before = (xr_computation._calc_idxminmax, xr_fit.polyfit, xarray_methods.original("polyfit"))
    assert xarray_methods.install() == "installed"
    assert (xr_computation._calc_idxminmax, xr_fit.polyfit, xarray_methods.original("polyfit")) == before
    assert xarray_methods.original("polyfit").__module__ == "xarray.computation.fit"


def test_install_on_changed_internals_patches_nothing(monkeypatch):
    def polyfit(obj, dim, deg, skipna=None):
        return obj

    fake = types.SimpleNamespace(polyfit=polyfit, least_squares=xarray_methods.original("least_squares"))
    monkeypatch.setattr(xarray_methods, "xr_fit", fake)
    monkeypatch.setattr(xarray_methods, "STATUS", xarray_methods.STATUS)
    assert xarray_methods.install().startswith("not installed: xarray.computation.fit.polyfit has the parameters")
    assert fake.polyfit is polyfit


# --- idxmax / idxmin -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["idxmax", "idxmin"])
@pytest.mark.parametrize("kwargs", [{}, {"skipna": False}, {"fill_value": -1.0}, {"keep_attrs": True}])
def test_idxmax_labels_per_example(name, kwargs):
    f = lambda d: getattr(d, name)("x", **kwargs)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check(f, data())
        check(f, data(1, nan=False).astype(np.float32))
        check(f, (data(2, nan=False) * 10).astype(int))


@pytest.mark.parametrize("name", ["idxmax", "idxmin"])
def test_idxmax_datetime_labels(name):
    da = data(3).assign_coords(x=np.arange(6).astype("datetime64[D]").astype("datetime64[ns]"))
    f = lambda d: getattr(d, name)("x")  # noqa: E731
    check(f, da)
    got = lf.vmap(f, dim="s")(da)
    assert got.dtype.kind == "M" and bool(got.isel(s=1, y=0).isnull())  # the all-NaN slice: NaT


def test_idxmax_one_dim_and_values_under_grad():
    da = data(4, nan=False).isel(y=0)
    check(lambda d: d.idxmax(), da)
    x = da.isel(s=0)
    # the labels carry no derivative: d/dx of (x * idxmax).sum() is idxmax itself
    got = lf.grad(lambda d: (d * d.idxmax("x")).sum())(x)
    np.testing.assert_array_equal(got.values, np.full(6, float(x.idxmax("x"))))


# --- sortby ----------------------------------------------------------------------------------------
def unindexed(seed=5):
    rng = np.random.default_rng(seed)
    return xr.DataArray(rng.normal(size=(3, 7)), dims=("s", "x"), coords={"c": ("s", np.arange(3.0))})


@pytest.mark.parametrize("ascending", [True, False])
def test_sortby_values_along_a_dim_without_index(ascending):
    da = unindexed()
    da[1, 2] = np.nan  # NaN sorts last in both orders, as xarray
    check(lambda d: d.sortby(d, ascending=ascending), da)
    keys = xr.DataArray(np.random.default_rng(6).integers(0, 3, size=(3, 7)), dims=("s", "x"))
    check(lambda d, k: d.sortby([k, d], ascending=ascending), unindexed(7), keys)
    ds = xr.Dataset({"a": unindexed(8), "b": unindexed(9)})
    check(lambda d: d.sortby("a", ascending=ascending), ds)


def test_sortby_values_along_an_indexed_dim_is_refused_under_vmap_and_jit():
    da = data(nan=False).isel(y=0)
    f = lambda d: d.sortby(d)  # noqa: E731
    with pytest.raises(UnsupportedOperationError, match="sortby of traced values along dim 'x'.*index coordinate.*"
                                                         "different order in each example.*drop_vars"):
        lf.vmap(f, dim="s")(da)
    with pytest.raises(UnsupportedOperationError, match="different order in each call of lf.jit"):
        lf.jit(f)(da.isel(s=0))
    labeled = unindexed().assign_coords(lab=("x", np.arange(7.0)))  # a plain coordinate along x
    with pytest.raises(UnsupportedOperationError, match=r"the variables \['lab'\] along 'x' are not traced"):
        lf.vmap(f, dim="s")(labeled)
    # without the index it works
    check(lambda d: d.drop_vars("x").sortby(d.drop_vars("x")), da)


def test_sortby_under_grad_keeps_the_index():
    da = data(nan=False).isel(y=0)
    weights = xr.DataArray(np.arange(6.0), dims="x")
    f = lambda d: d.sortby(d) * weights.values  # noqa: E731
    x = da.isel(s=0)
    with pytest.raises(UnsupportedOperationError, match="index coordinate"):  # vmap maps the order
        lf.vmap(lf.grad(lambda d: f(d).sum()), dim="s")(da)
    plain = da.drop_vars("x")
    h = lambda d: (d.sortby(d) * weights.values).sum()  # noqa: E731
    xr.testing.assert_identical(lf.vmap(lf.grad(h), dim="s")(plain), loop(lf.grad(h), plain))
    check_grad(f, x, jit=False)  # lf.jit: the order of every later call is unknown, the labels with it
    check_grad(lambda d: d.sortby(d, ascending=False) * weights.values, x, jit=False)
    with pytest.raises(UnsupportedOperationError, match="each call of lf.jit"):
        lf.jit(lf.grad(lambda d: f(d).sum()))(x)
    check_grad(lambda d: d.sortby(d) * weights.values, x.drop_vars("x"))


# --- polyfit ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("skipna", [None, True])
@pytest.mark.parametrize("deg", [1, 2])
def test_polyfit_default_and_true_skipna(skipna, deg):
    coefficients = lambda d: d.polyfit("x", deg, skipna=skipna).polyfit_coefficients  # noqa: E731
    residuals = lambda d: d.polyfit("x", deg, skipna=skipna, full=True).polyfit_residuals  # noqa: E731
    for da in (data(10), data(11, nan=False), data(12).isel(y=1)):
        check(coefficients, da, exact=False)
        check(residuals, da, exact=False)


def test_polyfit_few_rows_and_a_dataset():
    da = data(13)
    da[0, :4, 1] = np.nan  # 2 rows left: as many as the coefficients of deg 1, no residual
    check(lambda d: d.polyfit("x", 1, full=True).polyfit_residuals, da, exact=False)
    ds = xr.Dataset({"a": data(14), "b": data(15, nan=False)})
    check(lambda d: d.polyfit("x", 2).to_dataarray("v"), ds, exact=False)


def test_polyfit_derivatives():
    x = data(16, nan=False).isel(s=0)
    check_grad(lambda d: d.polyfit("x", 2).polyfit_coefficients ** 2, x)
    x = data(17).isel(s=2)  # one NaN: its row is dropped
    f = lambda d: d.polyfit("x", 2).polyfit_coefficients ** 2  # noqa: E731
    got = lf.grad(lambda d: f(d).sum())(x)
    assert got.values[3, 1] == 0.0
    finite = x.fillna(0.0)
    mask = x.notnull()
    check_grad(lambda d: f(d.where(mask)), finite)


# --- groupby by values, dropna: branches="agree" ---------------------------------------------------
def test_groupby_by_values_and_dropna_with_branches_agree():
    da = data(18, nan=False).isel(y=0)
    labels = xr.DataArray(np.tile([1, 2, 1, 3, 3, 2], (3, 1)), dims=("s", "x"))  # the same in every example
    f = lambda d, g: d.groupby(g.rename("g")).mean()  # noqa: E731
    want = loop(f, da, labels)
    xr.testing.assert_allclose(lf.vmap(f, dim="s", branches="agree")(da, labels).transpose(*want.dims), want)
    with pytest.raises(DynamicShapeError, match="groupby under vmap"):
        lf.vmap(f, dim="s")(da, labels)
    holes = da.copy()
    holes[:, 2] = np.nan  # every example drops x[2]
    g = lambda d: d.dropna("x")  # noqa: E731
    xr.testing.assert_identical(lf.vmap(g, dim="s", branches="agree")(holes), loop(g, holes))
    holes[1, 4] = np.nan  # example 1 drops another
    with pytest.raises(DynamicShapeError):
        lf.vmap(g, dim="s", branches="agree")(holes)
    # lf.jit: the dropped labels are guarded (tests/test_jit_guards.py): a call that drops others traces again
    jitted = lf.jit(lf.vmap(g, dim="s", branches="agree"))
    holes[1, 4] = 1.0
    xr.testing.assert_identical(jitted(holes), loop(g, holes))
    xr.testing.assert_identical(jitted(da), loop(g, da))
    assert jitted.traces == 2


def test_plain_xarray_is_unchanged_outside_transforms():
    da = data(19)
    for name in ("_calc_idxminmax", "polyfit", "least_squares", "sortby"):
        assert xarray_methods.original(name) is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = da.polyfit("x", 2, skipna=True).polyfit_coefficients
        got = xarray_methods.original("polyfit")(da._to_temp_dataset(), "x", 2, skipna=True).polyfit_coefficients
    xr.testing.assert_identical(got, want)


# --- roll: one np.roll of traced data ---------------------------------------------------------------
@pytest.mark.parametrize("shifts", [{"x": 2}, {"x": -7, "y": 1}, {"x": 0}, {"x": 12}])
def test_roll_of_traced_data_is_one_roll_with_xarrays_result(shifts):
    """DataArray/Dataset.roll of traced data: the loop's result (values, coordinates not
    rolled, attrs), per example and under lf.jit; its gradient against central
    differences; one roll node recorded where xarray makes two slices and a concatenation."""
    da = data(21, nan=False)
    f = lambda v: v.roll(shifts) * v.x  # noqa: E731
    check(f, da)
    ds = xr.Dataset({"a": da, "b": da * 2}).assign_attrs(note="kept")
    check(lambda d: d.roll(shifts), ds)
    check_grad(lambda v: v.roll(shifts) * v.roll(x=1), da.isel(s=0))
    jitted = lf.jit(lambda v: v.roll(shifts))
    jitted(da)
    (compiled,) = jitted.cache.values()
    names = [node.prim.name for node in compiled.program.nodes if node.prim is not None]
    assert not {"getitem", "concatenate"} & set(names) and names.count("roll") == len(shifts)  # xarray's: 2 slices
    assert xarray_methods.original("_roll_one_dim") is not None


def test_roll_outside_transforms_is_xarrays_own():
    da = data(22, nan=False)
    want = xr.DataArray(np.roll(da.values, 2, axis=1), dims=da.dims, coords=da.coords, attrs=da.attrs)
    xr.testing.assert_identical(da.roll(x=2), want)
    rolled = xarray_methods.original("_roll_one_dim")(da.variable, "x", 2)
    np.testing.assert_array_equal(rolled.values, want.values)
