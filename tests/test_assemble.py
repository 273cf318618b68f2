"""Labeled values put together directly (labeled_func/assemble.py) are the ones xarray's
public constructors make.

vmap's examples and outputs and a gradient's structure are built without xarray's merge
(80 µs a Dataset, 0.2 ms an index): the oracle is the same transform with the direct
paths switched off (the public constructors, as before), compared with
``assert_identical``, the order of the dims, and xarray's own internal invariants (dims
that match the variables, indexes that match their coordinates). Values are checked
against the per-example loop and analytic derivatives.
"""
import importlib

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from xarray.testing import _assert_internal_invariants

import labeled_func as lf
from labeled_func.assemble import dataarray_like, dataset_like

named = importlib.import_module("labeled_func.named")
flat = importlib.import_module("labeled_func.flat")

N, F = 4, 3


def dataarray(kind):
    rng = np.random.default_rng(3)
    da = xr.DataArray(rng.normal(size=(N, F)), dims=("sample", "feature"), name="x", attrs={"units": "m"})
    da = da.assign_coords(feature=("feature", [10, 20, 30], {"long_name": "feature id"}), site="here")
    if kind in ("index", "all"):
        da = da.assign_coords(sample=("sample", np.arange(100, 100 + N), {"units": "day"}))
    if kind in ("labels", "all"):
        da = da.assign_coords(member=("sample", [f"m{i}" for i in range(N)]),
                              doy=("sample", np.arange(N) * 1.5))
    if kind in ("2d", "all"):
        da = da.assign_coords(weight=(("sample", "feature"), rng.uniform(size=(N, F))))
    if kind == "multiindex":
        index = pd.MultiIndex.from_arrays([[1, 1, 2, 2], ["a", "b", "a", "b"]], names=("run", "leg"))
        da = da.assign_coords(xr.Coordinates.from_pandas_multiindex(index, "sample"))
    da.encoding = {"dtype": "float32"}
    return da


def dataset(kind):
    da = dataarray(kind)
    ds = xr.Dataset({"x": da, "y": ("sample", da.values[:, 0] * 2),
                     "shared": ("feature", np.array([1.0, 2.0, 3.0]))}, attrs={"title": "t"})
    ds["x"].attrs["units"] = "m"
    return ds


KINDS = ["none", "index", "labels", "2d", "all", "multiindex"]


@pytest.fixture
def public_only(monkeypatch):
    """The direct paths off: vmap's helpers answer None, so its callers go the public way,
    and a gradient's structure is made by ``copy(deep=False, data=...)``."""
    def switch_off():
        monkeypatch.setattr(named, "dataarray_like", lambda *a, **k: None)
        monkeypatch.setattr(named, "dataset_like", lambda *a, **k: None)
        monkeypatch.setattr(flat, "dataarray_holding", lambda da, variable: da.copy(deep=False, data=variable.data))
        monkeypatch.setattr(flat, "dataset_holding", lambda ds, replaced: ds.copy(
            deep=False, data={name: var.data for name, var in replaced.items()}))
    return switch_off


def same_as_public(direct, public):
    xr.testing.assert_identical(direct, public)
    assert list(direct.dims) == list(public.dims)
    if isinstance(direct, xr.Dataset):
        assert list(direct.data_vars) == list(public.data_vars)
        assert list(direct.coords) == list(public.coords) or set(direct.coords) == set(public.coords)
        for name in direct.variables:
            assert direct[name].attrs == public[name].attrs
    _assert_internal_invariants(direct, check_default_indexes=True)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("make", [dataarray, dataset], ids=["DataArray", "Dataset"])
def test_vmap_examples_and_outputs_are_the_public_constructors(kind, make, public_only):
    value = make(kind)

    def f(v):  # what one example sees comes back, computed, with a new dim and its coordinate
        seen.append(v)
        return (np.sin(v) * 2).expand_dims(new=[7])

    seen = []
    direct = lf.vmap(f, dim="sample")(value)
    direct_example = seen[0]
    public_only()
    seen.clear()
    public = lf.vmap(f, dim="sample")(value)
    same_as_public(direct, public)
    assert list(direct_example.dims) == list(seen[0].dims)
    assert set(direct_example.coords) == set(seen[0].coords)
    loop = xr.concat([np.sin(value.isel(sample=i)) * 2 for i in range(N)], dim="sample",
                     coords="different", compat="equals", join="outer").expand_dims(new=[7])
    xr.testing.assert_allclose(direct.transpose(*loop.dims), loop, rtol=1e-15)


@pytest.mark.parametrize("kind", ["index", "all"])
def test_the_restored_index_works_as_an_index(kind):
    da = dataarray(kind)
    out = lf.vmap(np.cos, dim="sample")(da)
    assert out.indexes["sample"].equals(da.indexes["sample"])
    xr.testing.assert_allclose(out.sel(sample=[101, 103]), np.cos(da.sel(sample=[101, 103])))
    xr.testing.assert_allclose((out + da).sel(sample=102), np.cos(da.sel(sample=102)) + da.sel(sample=102))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("make", [dataarray, dataset], ids=["DataArray", "Dataset"])
def test_gradients_keep_the_structure_of_their_argument(kind, make, public_only):
    value = make(kind)

    def loss(v):
        return (v**3).sum() if isinstance(v, xr.DataArray) else sum((v[n] ** 3).sum() for n in v.data_vars)

    direct = lf.grad(loss)(value)
    public_only()
    public = lf.grad(loss)(value)
    same_as_public(direct, public)
    expected = 3 * value**2  # the analytic gradient, with the argument's labels
    np.testing.assert_allclose(direct.to_array().values if isinstance(direct, xr.Dataset) else direct.values,
                               expected.to_array().values if isinstance(expected, xr.Dataset) else expected.values,
                               rtol=1e-14)
    assert (direct.encoding if isinstance(direct, xr.DataArray) else direct["x"].encoding) == {"dtype": "float32"}


def test_a_gradient_leaves_the_argument_as_it_was():
    ds = dataset("all")
    before = ds.copy(deep=True)
    grads = lf.grad(lambda d: (d["x"] ** 2).sum() + d["y"].sum())(ds)
    xr.testing.assert_identical(ds, before)
    assert ds["x"].attrs == before["x"].attrs and grads["x"].attrs != before["x"].attrs


# --- the helpers on their own -----------------------------------------------------------------------------
def test_dataset_like_is_the_constructor():
    ds = dataset("all")
    mapped = {"x": ds["x"].variable.isel(sample=0), "y": ds["y"].variable.isel(sample=0)}
    along = [name for name, var in ds.coords.variables.items() if "sample" in var.dims]
    direct = dataset_like(ds, mapped, drop=along)
    public = xr.Dataset({name: mapped.get(name, var.variable) for name, var in ds.drop_vars(along).data_vars.items()},
                        coords=ds.drop_vars(along).coords, attrs=ds.attrs)
    same_as_public(direct, public)
    assert direct.attrs is not ds.attrs


def test_dataarray_like_is_the_constructor():
    da = dataarray("all")
    along = [name for name, var in da.coords.variables.items() if "sample" in var.dims]
    new = da.variable.isel(sample=0)
    direct = dataarray_like(da, new, drop=along, extra={"tag": xr.Variable((), 5)})
    public = xr.DataArray(new, coords=da.drop_vars(along).coords, name=da.name).assign_coords(tag=5)
    same_as_public(direct, public)


def test_what_does_not_fit_goes_the_public_way():
    ds, da = dataset("index"), dataarray("index")
    wrong = {"x": xr.Variable(("sample", "feature"), np.zeros((N + 1, F)))}
    assert dataset_like(ds, wrong) is None  # sizes disagree with "y"
    assert dataset_like(ds, {}, extra={"y": xr.Variable((), 1.0)}) is None  # a data variable's name
    assert dataset_like(ds, {}, extra={"feature2": xr.Variable("feature2", [1, 2])}) is None  # needs an index
    assert dataarray_like(da, da.variable.isel(sample=0)) is None  # keeps coordinates along sample
    assert dataarray_like(da, da.variable, extra={"x": xr.Variable((), 1.0)}) is None  # its own name
    assert dataarray_like(da, da.variable, extra={"new": xr.Variable("other", [1.0])}) is None  # a new dim


# --- what is shared: arrays and indexes, never attrs -------------------------------------------------------
def _scribble(value):
    """Mutate every attrs dict of ``value`` (its own, its variables', its coordinates')."""
    value.attrs["scribbled"] = True
    for var in value.variables.values() if isinstance(value, xr.Dataset) else [value.variable]:
        var.attrs["scribbled"] = True
    for var in value.coords.variables.values():
        var.attrs["scribbled"] = True


def _scribbled(value):
    return ("scribbled" in value.attrs or any("scribbled" in v.attrs for v in value.coords.variables.values())
            or any("scribbled" in v.attrs for v in (value.variables.values() if isinstance(value, xr.Dataset)
                                                    else [value.variable])))


@pytest.mark.parametrize("make", [dataarray, dataset], ids=["DataArray", "Dataset"])
def test_jitted_outputs_share_no_attrs_with_later_calls(make):
    value = make("all")

    def f(v):
        data = v if isinstance(v, xr.DataArray) else v["x"]
        return np.sin(v).assign_coords(traced=data.mean())  # a coordinate computed from the input too

    jitted = lf.jit(f)
    first = jitted(value)
    _scribble(first)
    second = jitted(value)
    assert not _scribbled(second) and not _scribbled(value)
    xr.testing.assert_allclose(second, f(value), rtol=1e-15)


@pytest.mark.parametrize("make", [dataarray, dataset], ids=["DataArray", "Dataset"])
def test_a_gradient_shares_no_attrs_with_its_argument(make):
    value = make("all")
    loss = (lambda v: (v**2).sum()) if make is dataarray else (lambda v: (v["x"] ** 2).sum() + v["y"].sum())
    grads = lf.grad(loss)(value)
    _scribble(grads)
    assert not _scribbled(value)


@pytest.mark.parametrize("make", [dataarray, dataset], ids=["DataArray", "Dataset"])
def test_vmap_outputs_and_examples_share_no_attrs_with_the_arguments(make):
    value = make("all")

    def f(v):
        _scribble(v)  # inside: the example's own attrs
        return v * 2

    out = lf.vmap(f, dim="sample")(value)
    assert not _scribbled(value)
    _scribble(out)
    assert not _scribbled(value)


@pytest.mark.parametrize("data", [
    np.linspace(0.0, 1.0, 3), np.arange(3), np.array([1 + 2j, 3j, 0j]),
    np.array(["2020-01-01", "2020-01-02", "2020-01-03"], dtype="datetime64[s]"),
    np.array(["a", None, 3], dtype=object), pd.Index([1.0, 2.0, 3.0])], ids=lambda d: str(getattr(d, "dtype", d)))
def test_holding_is_copy_with_data(data):
    from labeled_func.assemble import holding

    variable = xr.Variable("t", np.zeros(3), attrs={"units": "m"}, encoding={"dtype": "float32"})
    expected = variable.copy(deep=False, data=data)
    got = holding(variable, data)
    xr.testing.assert_identical(got, expected)
    assert type(got._data) is type(expected._data) and got.dtype == expected.dtype
    assert got.encoding == expected.encoding and got.attrs is not variable.attrs


def test_holding_a_numpy_scalar_is_copy_with_data():
    from labeled_func.assemble import holding

    variable = xr.Variable((), 0.0)
    got, expected = holding(variable, np.float64(2.5)), variable.copy(deep=False, data=np.float64(2.5))
    assert type(got._data) is type(expected._data) is np.ndarray
    xr.testing.assert_identical(got, expected)


# --- Jacobian blocks: the output's and the argument's labels joined ---------------------------------
autodiff = importlib.import_module("labeled_func.autodiff")


def state(kind):
    """A field with dims (site,) and the coordinates of ``kind``, for Jacobians."""
    da = xr.DataArray(np.linspace(0.5, 2.0, 5), dims="site", name="u", attrs={"units": "K"})
    if kind in ("index", "all"):
        da = da.assign_coords(site=("site", np.arange(10, 15), {"long_name": "station"}))
    if kind in ("dates", "all"):
        da = da.assign_coords(when=("site", pd.date_range("2001-01-01", periods=5)))
    if kind in ("scalar", "all"):
        da = da.assign_coords(run=7)
    if kind == "multiindex":
        index = pd.MultiIndex.from_arrays([[1, 1, 2, 2, 3], list("ababa")], names=("row", "col"))
        da = da.assign_coords(xr.Coordinates.from_pandas_multiindex(index, "site"))
    return da


def model(u):
    """Output dims (site,) named like the argument's: the argument's get the suffix."""
    return (u * u.roll(site=1, roll_coords=False)).rename("flux")


def analytic(values):
    m = values.size
    jac = np.diag(np.roll(values, 1)).astype(float)
    jac[np.arange(m), (np.arange(m) - 1) % m] += values
    return jac


JACOBIAN_KINDS = ["none", "index", "dates", "scalar", "all", "multiindex"]


@pytest.mark.parametrize("kind", JACOBIAN_KINDS)
@pytest.mark.parametrize("transform", [lf.jacrev, lf.jacfwd])
def test_jacobian_blocks_are_the_public_constructors(kind, transform, monkeypatch):
    u = state(kind)
    direct = transform(model)(u)
    np.testing.assert_allclose(direct.values, analytic(u.values), rtol=1e-15)
    monkeypatch.setattr(autodiff, "joined_labels", lambda *a, **k: None)
    public = transform(model)(u)
    xr.testing.assert_identical(direct, public)
    assert list(direct.coords) == list(public.coords)
    for name in direct.coords:
        assert direct[name].attrs == public[name].attrs
    if kind != "multiindex":  # (xarray's constructor gives the levels indexes without index variables)
        _assert_internal_invariants(direct, check_default_indexes=True)
    if kind in ("index", "all"):  # the renamed index is an index
        assert direct.indexes["site_wrt"].equals(pd.Index(np.arange(10, 15)))
        assert float(direct.sel(site=11, site_wrt=11)) == pytest.approx(u.values[0])


@pytest.mark.parametrize("kind", ["none", "index", "all"])
def test_labels_of_hessians_datasets_and_vmapped_jacobians_are_the_public_constructors(kind, monkeypatch):
    u = state(kind)
    ds = xr.Dataset({"u": u, "k": ((), 0.5)})

    def run():
        return (lf.hessian(lambda u: (u ** 3).sum())(u),
                lf.jacrev(lambda p: (p.u * p.k).rename("y"))(ds),
                lf.vmap(lf.jacrev(lambda v: v * v), dim="member")(xr.concat([u, 2 * u], dim="member")))

    direct = run()
    np.testing.assert_allclose(direct[0].values, np.diag(6 * u.values), rtol=1e-15)
    np.testing.assert_allclose(direct[1].u.values, np.diag(np.full(5, 0.5)), rtol=1e-15)
    np.testing.assert_allclose(direct[2].values, [np.diag(2 * u.values), np.diag(4 * u.values)], rtol=1e-15)
    monkeypatch.setattr(autodiff, "joined_labels", lambda *a, **k: None)
    for got, expected in zip(direct, run()):
        xr.testing.assert_identical(got, expected)
        _assert_internal_invariants(got, check_default_indexes=True)


def test_joined_labels_leaves_a_multi_index_and_a_taken_name_to_the_constructor():
    from labeled_func.assemble import joined_labels

    u = state("multiindex")
    assert joined_labels(np.zeros((5, 5)), ("a", "b"), {}, None, u, {"site": "b", "row": "row", "col": "col"}) is None
    v = state("index").assign_coords(extra=("site", np.ones(5)))
    taken = v.rename(site="other").drop_vars("other")  # has 'extra' on dim 'other'
    assert joined_labels(np.zeros((5, 5)), ("other", "site"), {}, taken, v,
                         {"site": "site", "extra": "extra"}) is None


def parameters(kind):
    """A Dataset of parameters: scalars, a vector along its own dim, coordinates of ``kind``."""
    ds = xr.Dataset({"a": 1.5, "b": ("k", [2.0, -1.0]), "c": 0.5}, attrs={"title": "params"})
    if kind in ("index", "all"):
        ds = ds.assign_coords(k=("k", [7, 8], {"units": "1"}))
    if kind in ("scalar", "all"):
        ds = ds.assign_coords(run=3)
    if kind in ("labels", "all"):
        ds = ds.assign_coords(tag=("k", ["x", "y"]))
    return ds


def field(kind):
    u = state("index" if kind != "none" else "none")
    return u.assign_coords(lab=("site", list("abcde"))) if kind == "all" else u


@pytest.mark.parametrize("kind", ["none", "index", "scalar", "labels", "all"])
@pytest.mark.parametrize("transform", [lf.jacrev, lf.jacfwd])
def test_jacobians_of_dataset_arguments_are_the_public_constructors(kind, transform, monkeypatch):
    p, u = parameters(kind), field(kind)

    def model(p):
        return p.a * u + (p.b * u ** 2).sum("k") + p.c

    direct = transform(model)(p)
    np.testing.assert_allclose(direct.a.values, u.values, rtol=1e-15)
    np.testing.assert_allclose(direct.b.values, np.stack([u.values ** 2] * 2, axis=-1), rtol=1e-15)
    np.testing.assert_allclose(direct.c.values, np.ones(5), rtol=1e-15)
    monkeypatch.setattr(autodiff, "merged_arrays", lambda arrays: None)
    public = transform(model)(p)
    xr.testing.assert_identical(direct, public)
    assert list(direct.variables) == list(public.variables)
    assert list(direct.dims) == list(public.dims)
    for name in direct.variables:
        assert direct[name].attrs == public[name].attrs
    _assert_internal_invariants(direct, check_default_indexes=True)


def test_merged_arrays_leaves_disagreeing_coordinates_to_the_public_merge():
    from labeled_func.assemble import merged_arrays

    a = xr.DataArray([1.0, 2.0], dims="x", coords={"x": [0, 1], "w": ("x", [5.0, 6.0])})
    assert merged_arrays({"a": a, "b": a * 2}) is not None
    assert merged_arrays({"a": a, "b": a.assign_coords(w=("x", [5.0, 7.0]))}) is None  # a non-index coordinate differs
    assert merged_arrays({"a": a, "b": a.assign_coords(x=[0, 2])}) is None  # an index differs: xarray aligns
    assert merged_arrays({"w": a, "b": a}) is None  # a name both a coordinate and a data variable
    assert merged_arrays({"a": a, "b": np.ones(2)}) is None  # not a DataArray
    xr.testing.assert_identical(merged_arrays({"a": a, "b": a * 2}), xr.Dataset({"a": a, "b": a * 2}))
