"""xarray's ``interp`` / ``interp_like`` under every transform (``labeled_func/xarray_interp.py``).

Oracles: xarray's own ``interp`` on plain values (SciPy: equal up to rounding, since the
traced path computes NumPy's ``interp`` formula), the per-example loop, central
differences, the closed form of a linear field, and, under ``lf.jit``, NumPy's ``interp``
bit for bit.  The hook's own tests: installed for the installed xarray, idempotent,
refusing an xarray whose internals changed, and plain ``interp`` unchanged.
"""
import types

import numpy as np
import pytest
import xarray as xr
from xarray.core import dataset as xr_dataset
from xarray.core import missing

import labeled_func as lf
from labeled_func import xarray_interp

RNG = np.random.default_rng(2026)
RTOL = 1e-13


def field(*lead, n=7, name="t"):
    """Random data on an irregular increasing grid ``name`` (0 .. 4.5 or more)."""
    grid = np.concatenate([[0.0], np.cumsum(RNG.uniform(0.75, 1.0, size=n - 1))])
    dims = tuple(f"d{i}" for i in range(len(lead))) + (name,)
    return xr.DataArray(RNG.normal(size=lead + (n,)), dims=dims, coords={name: grid})


def grid2d(*lead):
    lat = np.cumsum(RNG.uniform(0.5, 1.0, size=5))
    lon = np.linspace(-2.0, 3.0, 6)
    dims = tuple(f"d{i}" for i in range(len(lead))) + ("lat", "lon")
    return xr.DataArray(RNG.normal(size=lead + (5, 6)), dims=dims, coords={"lat": lat, "lon": lon})


def close(got, expected, rtol=RTOL):
    got, expected = xr.broadcast(got, expected)
    got = got.transpose(*expected.dims)
    np.testing.assert_allclose(got.values, expected.values, rtol=rtol, atol=1e-14)


def central(f, x, eps=1e-6):
    """Central differences of the scalar ``f`` at the DataArray ``x``, element by element."""
    out = np.zeros(x.shape)
    for i in np.ndindex(*x.shape):
        up, down = x.copy(), x.copy()
        up.values[i] += eps
        down.values[i] -= eps
        out[i] = (float(f(up)) - float(f(down))) / (2 * eps)
    return out


STATIONS = xr.DataArray([0.3, 1.7, 2.45, 4.2, -3.0, 9.0], dims="q")  # two outside the grid
INSIDE = xr.DataArray([0.3, 1.7, 2.45, 4.2], dims="q")


# --- the hook --------------------------------------------------------------------------------------
def test_the_hook_is_installed_for_the_installed_xarray():
    assert xarray_interp.STATUS == "installed", xarray_interp.STATUS
    assert xarray_interp.installed()
    assert missing._interpnd is xarray_interp._interpnd
    assert missing._localize is xarray_interp._localize


@pytest.mark.parametrize("version", xarray_interp.TESTED_XARRAY_VERSIONS)
def test_the_versions_it_was_written_against(version):
    """One test per xarray version the hook was written against: this one is installed."""
    if xr.__version__ != version:
        pytest.skip(f"xarray {xr.__version__} is installed, not {version}")
    assert xarray_interp._check(missing, xr_dataset) is None
    assert xarray_interp.installed()


def test_install_is_idempotent():
    before = (missing._interpnd, missing._localize, xarray_interp.original("_interpnd"))
    assert xarray_interp.install() == "installed"
    assert (missing._interpnd, missing._localize, xarray_interp.original("_interpnd")) == before
    assert xarray_interp.original("_interpnd") is not xarray_interp._interpnd
    assert {xarray_interp.original(name).__module__ for name in ("_interpnd", "_localize")} == {"xarray.core.missing"}


def test_changed_internals_are_not_patched():
    def renamed(data, *coords, interp_func, interp_kwargs):
        return data

    fake = types.SimpleNamespace(_localize=xarray_interp.original("_localize"), _interpnd=renamed,
                                 _floatize_x=missing._floatize_x, interpolate_variable=missing.interpolate_variable)
    assert "parameters" in xarray_interp._check(fake, xr_dataset)
    fake = types.SimpleNamespace(_localize=xarray_interp.original("_localize"),
                                 _interpnd=xarray_interp.original("_interpnd"), _floatize_x=missing._floatize_x)
    assert "interpolate_variable is missing" in xarray_interp._check(fake, xr_dataset)


def test_install_on_changed_internals_patches_nothing(monkeypatch):
    def renamed(data, *coords, interp_func, interp_kwargs):
        return data

    fake = types.SimpleNamespace(_localize=xarray_interp.original("_localize"), _interpnd=renamed,
                                 _floatize_x=missing._floatize_x, interpolate_variable=missing.interpolate_variable)
    monkeypatch.setattr(xarray_interp, "xr_missing", fake)
    monkeypatch.setattr(xarray_interp, "STATUS", xarray_interp.STATUS)
    assert xarray_interp.install().startswith("not installed: xarray.core.missing._interpnd has the parameters")
    assert fake._interpnd is renamed and fake._localize is xarray_interp.original("_localize")


def plain_cases():
    data, two = field(3), grid2d(2)
    ds = xr.Dataset({"a": data, "b": data.isel(d0=0) * 2, "s": ("d0", ["x", "y", "z"])})
    lat = xr.DataArray([1.2, 2.0, 7.0], dims="station")
    lon = xr.DataArray([0.1, -1.5, 2.0], dims="station")
    return [
        lambda: data.interp(t=STATIONS),
        lambda: data.interp(t=[0.5, 1.5], method="nearest"),
        lambda: data.interp(t=STATIONS, method="cubic"),
        lambda: data.interp(t=STATIONS, kwargs={"fill_value": "extrapolate"}),
        lambda: two.interp(lat=lat, lon=lon),
        lambda: two.interp(lat=[1.5, 2.5], lon=[0.0, 1.0, 2.0]),
        lambda: ds.interp(t=INSIDE),
        lambda: data.interp_like(data.isel(t=slice(1, 4))),
    ]


@pytest.mark.parametrize("case", range(len(plain_cases())))
def test_plain_interp_is_xarrays_own(case, monkeypatch):
    """Outside transforms the wrappers call xarray's functions: identical results."""
    run = plain_cases()[case]
    with_hook = run()
    monkeypatch.setattr(missing, "_interpnd", xarray_interp.original("_interpnd"))
    monkeypatch.setattr(missing, "_localize", xarray_interp.original("_localize"))
    xr.testing.assert_identical(with_hook, run())


# --- vmap ---------------------------------------------------------------------------------------------
EDGES = [{}, {"kwargs": {"fill_value": 0.0}}, {"kwargs": {"fill_value": (-5.0, 7.0)}},
         {"kwargs": {"fill_value": "extrapolate"}}, {"method": "nearest"},
         {"method": "nearest", "kwargs": {"fill_value": -1.0}}]


@pytest.mark.parametrize("options", EDGES, ids=str)
def test_vmap_of_the_data_is_xarrays_interp(options):
    data = field(4, 3)
    got = lf.vmap(lambda x: x.interp(t=STATIONS, **options), dim="d0")(data)
    close(got, data.interp(t=STATIONS, **options))


def test_nan_outside_the_grid_as_xarray():
    data = field(4)
    got = lf.vmap(lambda x: x.interp(t=STATIONS), dim="d0")(data)
    assert np.isnan(got.isel(q=[4, 5])).all()
    assert not np.isnan(got.isel(q=[0, 1, 2, 3])).any()
    close(got, data.interp(t=STATIONS))


def test_vmap_of_the_locations_is_the_loop():
    data = field()
    locations = xr.DataArray(RNG.uniform(-1.0, 6.0, size=(5, 4)), dims=("sample", "q"))
    for method in ("linear", "nearest"):
        got = lf.vmap(lambda q: data.interp(t=q, method=method), dim="sample")(locations)
        expected = xr.concat([data.interp(t=locations.isel(sample=i), method=method)
                              for i in range(5)], dim="sample")
        close(got.drop_vars("t", errors="ignore"), expected.drop_vars("t"))


def test_vmap_of_data_and_locations_together_and_nested():
    data = field(3, 2)
    locations = xr.DataArray(RNG.uniform(0.0, 5.0, size=(3, 4)), dims=("d0", "q"))
    got = lf.vmap(lf.vmap(lambda x, q: x.interp(t=q), in_dims=("d1", None)), dim="d0")(data, locations)
    for i in range(3):
        expected = data.isel(d0=i).interp(t=locations.isel(d0=i))
        close(got.isel(d0=i).drop_vars("t", errors="ignore"), expected.drop_vars("t"))


def test_locations_along_a_dimension_of_the_data():
    """New coordinates on a dimension of the data (xarray's vectorized path)."""
    data = field(4, 3)
    locations = xr.DataArray(RNG.uniform(0.0, 5.0, size=3), dims="d1")
    close(lf.vmap(lambda x: x.interp(t=locations), dim="d0")(data), data.interp(t=locations))


def test_a_single_knot_and_nearest():
    data = xr.DataArray([[2.0], [3.0]], dims=("d0", "t"), coords={"t": [1.0]})
    new = xr.DataArray([1.0, 0.5], dims="q")
    close(lf.vmap(lambda x: x.interp(t=new, method="nearest"), dim="d0")(data), data.interp(t=new, method="nearest"))


def test_a_scalar_location():
    data = field(4)
    close(lf.vmap(lambda x: x.interp(t=1.3), dim="d0")(data), data.interp(t=1.3))


def test_vmap_over_dask_chunks():
    pytest.importorskip("dask")
    data = field(8).chunk(d0=4)
    got = lf.vmap(lambda x: x.interp(t=STATIONS), dim="d0")(data)
    assert got.chunks is not None
    close(got.compute(), data.compute().interp(t=STATIONS))


# --- derivatives ------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["linear", "nearest"])
def test_grad_in_the_data_is_the_weights(method):
    data = field()
    weights = xr.DataArray(RNG.normal(size=INSIDE.size), dims="q")
    loss = lambda x: (x.interp(t=INSIDE, method=method) * weights).sum()  # noqa: E731
    got = lf.grad(loss)(data)
    np.testing.assert_allclose(got.values, central(loss, data), rtol=1e-7, atol=1e-8)
    if method == "nearest":  # the selection: each weight lands on the nearest knot
        grid = data.t.values
        expected = np.zeros(grid.size)
        np.add.at(expected, np.abs(INSIDE.values[:, None] - grid).argmin(axis=1), weights.values)
        np.testing.assert_allclose(got.values, expected, rtol=1e-15)


def test_grad_in_the_locations_of_a_linear_field_is_its_slope():
    grid = np.cumsum(RNG.uniform(0.4, 1.0, size=7))
    a, b = 1.75, -0.5
    data = xr.DataArray(a * grid + b, dims="t", coords={"t": grid})
    q = xr.DataArray(RNG.uniform(grid[0], grid[-1], size=5), dims="q")
    value = data.interp(t=q)
    np.testing.assert_allclose(value.values, a * q.values + b, rtol=1e-14)
    got = lf.grad(lambda q: data.interp(t=q).sum())(q)
    np.testing.assert_allclose(got.values, np.full(5, a), rtol=1e-12)


def test_grad_in_the_locations_against_central_differences():
    data = field()
    q = xr.DataArray(RNG.uniform(0.2, 4.5, size=6), dims="q")
    loss = lambda q: (data.interp(t=q) ** 2).sum()  # noqa: E731
    np.testing.assert_allclose(lf.grad(loss)(q).values, central(loss, q), rtol=1e-6, atol=1e-8)
    outside = xr.DataArray([-4.0, 20.0], dims="q")
    zero = lf.grad(lambda q: data.interp(t=q, kwargs={"fill_value": 0.0}).sum())(outside)
    assert zero.values.tolist() == [0.0, 0.0]


def test_nearest_has_no_derivative_in_the_locations():
    data = field()
    q = xr.DataArray(RNG.uniform(0.2, 4.5, size=6), dims="q")
    got = lf.grad(lambda q: data.interp(t=q, method="nearest").sum())(q)
    assert got.values.tolist() == [0.0] * 6


def test_jacrev_and_jacfwd_agree_with_central_differences():
    data = field()
    q = xr.DataArray(RNG.uniform(0.2, 4.5, size=3), dims="q")
    f = lambda q: data.interp(t=q)  # noqa: E731
    rev, fwd = lf.jacrev(f)(q), lf.jacfwd(f)(q)
    np.testing.assert_allclose(rev.values, fwd.values, rtol=1e-14)
    diagonal = central(lambda q: f(q).sum(), q)
    np.testing.assert_allclose(np.diag(rev.values), diagonal, rtol=1e-6)
    jd = lf.jacrev(lambda x: x.interp(t=q))(data)
    np.testing.assert_allclose(jd.sum(jd.dims[-1]).values, np.ones(3), rtol=1e-14)  # weights sum to one


def test_hessian_in_the_locations_is_twice_the_squared_slopes():
    grid = np.array([0.0, 1.0, 2.5, 4.0])
    data = xr.DataArray([0.0, 2.0, 1.0, 4.0], dims="t", coords={"t": grid})
    q = xr.DataArray([0.5, 2.0, 3.0], dims="q")
    slopes = np.array([2.0, -1.0 / 1.5, 2.0])
    h = lf.hessian(lambda q: (data.interp(t=q) ** 2).sum())(q)
    np.testing.assert_allclose(h.values, np.diag(2 * slopes**2), rtol=1e-14)


def test_jvp_in_data_and_locations():
    data = field()
    q = xr.DataArray(RNG.uniform(0.2, 4.5, size=4), dims="q")
    dx, dq = data.copy(data=RNG.normal(size=data.shape)), q.copy(data=RNG.normal(size=4))
    f = lambda x, q: x.interp(t=q)  # noqa: E731
    out, tangent = lf.jvp(f, (data, q), (dx, dq))
    eps = 1e-6
    fd = (f(data + eps * dx, q + eps * dq) - f(data - eps * dx, q - eps * dq)) / (2 * eps)
    close(out, f(data, q))
    np.testing.assert_allclose(tangent.values, fd.values, rtol=1e-6)


# --- jit ----------------------------------------------------------------------------------------------
def test_jit_is_numpys_interp_bit_for_bit():
    data = field(3)
    f = lf.jit(lambda x: x.interp(t=STATIONS))
    for _ in range(2):  # the trace, then a replay
        data = data.copy(data=RNG.normal(size=data.shape))
        got = f(data)
        expected = np.stack([np.interp(STATIONS.values, data.t.values, row, left=np.nan, right=np.nan)
                             for row in data.values])
        np.testing.assert_array_equal(got.values, expected)
        close(got, data.interp(t=STATIONS))


def test_jit_of_a_grad_in_the_locations():
    data = field()
    g = lf.jit(lf.grad(lambda q: data.interp(t=q).sum()))
    q = xr.DataArray([0.5, 1.5, 2.5], dims="q")
    np.testing.assert_array_equal(g(q).values, lf.grad(lambda q: data.interp(t=q).sum())(q).values)


# --- two dimensions -----------------------------------------------------------------------------------
LAT = xr.DataArray([1.2, 2.05, 3.3, 1.0, 9.0], dims="station")
LON = xr.DataArray([0.1, -1.5, 2.9, -2.5, 0.0], dims="station")


@pytest.mark.parametrize("method", ["linear", "nearest"])
def test_bilinear_at_points_is_xarrays(method):
    data = grid2d(3)
    got = lf.vmap(lambda x: x.interp(lat=LAT, lon=LON, method=method), dim="d0")(data)
    close(got, data.interp(lat=LAT, lon=LON, method=method))
    assert np.isnan(got.isel(station=-1)).all()
    filled = lf.vmap(lambda x: x.interp(lat=LAT, lon=LON, method=method, kwargs={"fill_value": 0.0}), dim="d0")(data)
    close(filled, data.interp(lat=LAT, lon=LON, method=method, kwargs={"fill_value": 0.0}))


def test_bilinear_on_an_orthogonal_grid_is_xarrays():
    data = grid2d(2)
    new = {"lat": [1.5, 2.5, 30.0], "lon": [0.0, 1.0, 2.0, -2.0]}
    close(lf.vmap(lambda x: x.interp(**new), dim="d0")(data), data.interp(**new))


def test_bilinear_gradients_in_the_station_positions():
    data = grid2d()
    lat, lon = LAT.isel(station=slice(0, 3)), LON.isel(station=slice(0, 3))
    loss = lambda lat, lon: (data.interp(lat=lat, lon=lon) ** 2).sum()  # noqa: E731
    g_lat, g_lon = lf.grad(loss, argnums=(0, 1))(lat, lon)
    np.testing.assert_allclose(g_lat.values, central(lambda v: loss(v, lon), lat), rtol=1e-6)
    np.testing.assert_allclose(g_lon.values, central(lambda v: loss(lat, v), lon), rtol=1e-6)
    g_data = lf.grad(lambda x: x.interp(lat=lat, lon=lon).sum())(data)
    np.testing.assert_allclose(g_data.values, central(lambda x: x.interp(lat=lat, lon=lon).sum(), data),
                               rtol=1e-6, atol=1e-8)


def test_several_dimensions_refuse_extrapolation_clearly():
    data = grid2d(2)
    with pytest.raises(lf.UnsupportedOperationError, match="fill_value=None"):
        lf.vmap(lambda x: x.interp(lat=LAT, lon=LON, kwargs={"fill_value": None}), dim="d0")(data)


# --- Dataset, interp_like ---------------------------------------------------------------------------
def test_dataset_interp_and_interp_like():
    data = field(3)
    ds = xr.Dataset({"a": data, "b": data * 2 + 1, "c": data.isel(t=0)})
    got = lf.vmap(lambda d: d.interp(t=STATIONS), dim="d0")(ds)
    expected = ds.interp(t=STATIONS)
    for name in ("a", "b", "c"):
        close(got[name], expected[name])
    other = xr.DataArray(np.zeros(3), dims="t", coords={"t": [0.5, 1.25, 3.0]})
    close(lf.vmap(lambda x: x.interp_like(other), dim="d0")(data), data.interp_like(other))
    grad = lf.grad(lambda x: x.interp_like(other).sum())(data.isel(d0=0))
    np.testing.assert_allclose(grad.sum().item(), 3.0, rtol=1e-14)


# --- refusals -------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["quadratic", "pchip", "akima"])
def test_other_methods_are_refused_naming_the_method(method):
    data = field(3)
    with pytest.raises(lf.UnsupportedOperationError, match=f"method='{method}'"):
        lf.vmap(lambda x: x.interp(t=INSIDE, method=method), dim="d0")(data)
    with pytest.raises(lf.UnsupportedOperationError, match=f"method='{method}'"):
        lf.grad(lambda q: data.isel(d0=0).interp(t=q, method=method).sum())(INSIDE)


def test_traced_locations_that_would_become_the_index_are_a_conversion_error():
    """``da.interp(t=q)`` with ``q`` on the dimension ``t`` makes ``q`` the new index:
    pandas needs concrete labels.  Put traced locations on a dimension of their own."""
    data = field()
    with pytest.raises(lf.ConversionError):
        lf.grad(lambda q: data.interp(t=q).sum())(xr.DataArray([0.5, 1.5], dims="t"))
