"""The library census (issue 26): functions of xarray-based libraries (xrft, xhistogram, flox,
MetPy, pyet, xgcm, cf_xarray, pint-xarray, geocat-comp), each called inside a one-example
function on plain xarray data, under vmap (V), grad (G) and jit (J), each against its oracle.

    PYTHONPATH=. python -m benchmarks.census_libraries        # from the repository root
    ... -m benchmarks.census_libraries --markdown      # the counts as Markdown
    ... -m benchmarks.census_libraries -k metpy -v     # cases named so, crashes with tracebacks
    ... -m benchmarks.census_libraries --branches agree  # V and J under vmap(branches="agree")

The libraries are not dependencies of labeled_func: run it in an environment that has them
(``pip install -e .[test] xrft xhistogram flox metpy pyet xgcm cf_xarray pint-xarray
geocat-comp``).  A library that is not importable is skipped with a line saying so, so the
script runs anywhere.

* ``V``: ``lf.vmap(f, dim="sample")(*args)`` against the per-example loop + ``xr.concat``
  (``tests/helpers_coverage.loop_vmap``), compared by ``helpers_coverage.assert_same``
  (values, dims, coords, name, attrs, dtype);
* ``G``: ``lf.grad`` of ``f`` scalarised (``sum(out * W)`` over the float64 outputs, ``W``
  fixed weights, NaNs skipped) with respect to the first argument, on example 0, against
  central finite differences in float64; ``n/a`` where the output holds no float64 or the
  case says why (counts, ranks, integer outputs);
* ``J``: ``lf.jit(lf.vmap(f, dim="sample"))`` called on the inputs, on other values
  (``a * 0.9 + 0.05 * mean|a|``) and, where an input holds NaNs, on the data rolled by one
  along its last axis (the NaNs elsewhere), each against the un-jitted vmap (the loop where
  vmap refuses).

Outcomes: ``ok``, ``refused`` (a policy error of ``labeled_func.errors`` or a
``NotImplementedError``: the class and the first line of the message), ``wrong`` (a number
differs from its oracle), ``crash`` (any other exception), ``n/a``, ``skipped`` (library not
importable).  The refusals are printed grouped by the limitation that blocks them
(``LIMITATIONS``) and by message.  Exits with 1 where a case is wrong or crashes.
``tests/test_census_library_findings.py`` keeps the numbers (no wrong number, no new crash,
no more refusals per library and transform) for whichever libraries are installed.  Not
one of ``python -m benchmarks``' timed rows (no ``bench_`` prefix).
"""
from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import re
import sys
import time
import traceback
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd
import xarray as xr

import labeled_func as lf
try:  # from the tests (tests/ on sys.path) and from benchmarks/ (PYTHONPATH=.)
    from census_xarray import (ATOL, DIM, EPS, N, OUTCOMES, RTOL, TRANSFORMS, _float_leaves, _Wrong,
                               check_j_of, check_v_of, example, first_line, is_refusal, loop_vmap, scalarised)
except ImportError:  # pragma: no cover
    from tests.census_xarray import (ATOL, DIM, EPS, N, OUTCOMES, RTOL, TRANSFORMS, _float_leaves, _Wrong,
                                     check_j_of, check_v_of, example, first_line, is_refusal, loop_vmap, scalarised)
from benchmarks.census_xarray import format_table, outcome_lines, refused_cases

# the machinery (oracles, comparisons, the scalarisation for G) is the xarray census's
# (tests/census_xarray.py); the cases, their inputs and the report by library are this file's
LIBRARIES = {  # census name -> module to import
    "xrft": "xrft", "xhistogram": "xhistogram.xarray", "flox": "flox.xarray",
    "metpy": "metpy.calc", "pyet": "pyet", "xgcm": "xgcm", "cf_xarray": "cf_xarray",
    "pint-xarray": "pint_xarray", "geocat-comp": "geocat.comp",
}


DISTRIBUTIONS = {"xrft": "xrft", "xhistogram": "xhistogram", "flox": "flox", "metpy": "MetPy",
                 "pyet": "pyet", "xgcm": "xgcm", "cf_xarray": "cf_xarray",
                 "pint-xarray": "pint-xarray", "geocat-comp": "geocat.comp"}


def _version(library: str) -> str:
    try:
        return importlib.metadata.version(DISTRIBUTIONS[library])
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _import(library: str):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module(LIBRARIES[library])
    except Exception as error:  # noqa: BLE001 - any failure to import skips the library
        return error


# --------------------------------------------------------------------------- #
# inputs: plain xarray, a "sample" dim to map
# --------------------------------------------------------------------------- #


def _make_inputs() -> dict[str, Any]:
    rng = np.random.default_rng(2026)
    sample = xr.Variable((DIM,), [10, 20, 30])
    t = xr.Variable(("t",), np.arange(16) * 0.5, attrs={"units": "s", "axis": "T",
                                                        "standard_name": "time"})

    def along_t(data, name, **attrs):
        return xr.DataArray(data, dims=(DIM, "t"), coords={DIM: sample, "t": t}, name=name,
                            attrs=attrs)

    x = along_t(rng.uniform(0.5, 1.5, (N, 16)) + np.sin(np.arange(16))[None], "x", units="m")
    y = along_t(rng.uniform(0.5, 1.5, (N, 16)), "y", units="m")
    xn_data = x.data.copy()
    xn_data[0, 3] = xn_data[1, 0] = xn_data[1, 9] = xn_data[2, 15] = np.nan
    xn = along_t(xn_data, "xn", units="m")  # NaNs in different places per example
    # a 2-D field on a regular grid (xrft's isotropic spectrum, xgcm, cf_xarray, gradients)
    xc = xr.Variable(("x",), np.arange(8) * 1000.0 + 500.0,
                     attrs={"units": "m", "axis": "X", "standard_name": "projection_x_coordinate"})
    yc = xr.Variable(("y",), np.arange(8) * 1000.0 + 500.0,
                     attrs={"units": "m", "axis": "Y", "standard_name": "projection_y_coordinate"})
    f2 = xr.DataArray(rng.uniform(0.5, 1.5, (N, 8, 8)), dims=(DIM, "y", "x"),
                      coords={DIM: sample, "y": yc, "x": xc}, name="f2",
                      attrs={"units": "K", "standard_name": "air_temperature"})
    g2 = f2.copy(data=rng.uniform(-1.0, 1.0, (N, 8, 8))).rename("g2")
    # meteorology at 6 stations: K, degC, fraction, %, hPa, m/s, kg/kg
    st = {"dims": (DIM, "station"), "coords": {DIM: sample, "station": np.arange(6)}}
    tk = xr.DataArray(rng.uniform(280.0, 305.0, (N, 6)), name="tk", attrs={"units": "K"}, **st)
    tc = (tk - 273.15).rename("tc").assign_attrs(units="degC")
    tf = (tc * 1.8 + 32.0).rename("tf").assign_attrs(units="degF")
    rh = xr.DataArray(rng.uniform(0.3, 0.9, (N, 6)), name="rh", attrs={"units": "dimensionless"},
                      **st)
    rhp = (rh * 100.0).rename("rhp").assign_attrs(units="percent")
    p = xr.DataArray(rng.uniform(850.0, 1000.0, (N, 6)), name="p", attrs={"units": "hPa"}, **st)
    u = xr.DataArray(rng.uniform(-10.0, 10.0, (N, 6)), name="u", attrs={"units": "m/s"}, **st)
    v = xr.DataArray(rng.uniform(-10.0, 10.0, (N, 6)), name="v", attrs={"units": "m/s"}, **st)
    q = xr.DataArray(rng.uniform(0.002, 0.012, (N, 6)), name="q", attrs={"units": "kg/kg"}, **st)
    # a sounding: pressure levels (shared), temperature per example
    plev = xr.DataArray(np.array([1000.0, 925.0, 850.0, 700.0, 500.0, 300.0]), dims="level",
                        name="plev", attrs={"units": "hPa"})
    sound = xr.DataArray(288.0 - 6.5 * np.arange(6)[None] * 1.4 + rng.uniform(-1, 1, (N, 6)),
                         dims=(DIM, "level"), coords={DIM: sample}, name="sound",
                         attrs={"units": "K"})
    # daily weather on a 2 x 2 grid for pyet (its xarray route wants (time, y, x))
    days = pd.date_range("2020-06-01", periods=10, freq="D")
    dd = {"dims": (DIM, "time", "y", "x"), "coords": {DIM: sample, "time": days}}
    shape = (N, 10, 2, 2)
    tmean = xr.DataArray(rng.uniform(15.0, 25.0, shape), name="tmean", **dd)
    tmax = (tmean + rng.uniform(3.0, 6.0, shape)).rename("tmax")
    tmin = (tmean - rng.uniform(3.0, 6.0, shape)).rename("tmin")
    wind = xr.DataArray(rng.uniform(1.0, 4.0, shape), name="wind", **dd)
    rs = xr.DataArray(rng.uniform(15.0, 25.0, shape), name="rs", **dd)
    rhd = xr.DataArray(rng.uniform(50.0, 80.0, shape), name="rhd", **dd)
    lat = xr.DataArray(np.array([[0.7, 0.8], [0.75, 0.85]]), dims=("y", "x"), name="lat")
    # monthly series over 3 years for climatologies
    months = pd.date_range("2000-01-01", periods=36, freq="MS")
    xm = xr.DataArray(rng.uniform(0.5, 1.5, (N, 36)) + np.cos(np.arange(36) * np.pi / 6)[None],
                      dims=(DIM, "time"), coords={DIM: sample, "time": months}, name="xm")
    labels = xr.DataArray(np.array([0, 1, 2, 0, 1, 2, 0, 1] * 2), dims="t", name="lab")
    # Dataset with a C grid (center/left coords along x) for xgcm; data on x_c
    grid_ds = xr.Dataset(coords={
        "x_c": ("x_c", np.arange(8) + 0.5, {"axis": "X"}),
        "x_g": ("x_g", np.arange(8.0), {"axis": "X", "c_grid_axis_shift": -0.5})})
    xg = xr.DataArray(rng.uniform(0.5, 1.5, (N, 8)), dims=(DIM, "x_c"),
                      coords={DIM: sample, "x_c": grid_ds.x_c}, name="xg")
    hybrid = xr.DataArray(rng.uniform(270.0, 290.0, (N, 6, 6)), dims=(DIM, "lev", "station"),
                          coords={DIM: sample}, name="hybrid")  # on hybrid levels
    return dict(hybrid=hybrid, x=x, y=y, xn=xn, f2=f2, g2=g2, tk=tk, tc=tc, tf=tf, rh=rh, rhp=rhp,
                p=p, u=u, v=v, q=q, plev=plev, sound=sound, tmean=tmean, tmax=tmax, tmin=tmin, wind=wind, rs=rs,
                rhd=rhd, lat=lat, xm=xm, labels=labels, xg=xg, grid_ds=grid_ds)


INPUTS = _make_inputs()
EDGES = np.linspace(0.0, 2.6, 7)


# --------------------------------------------------------------------------- #
# cases: library -> one-example functions (the module is passed in as `m`)
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class Case:
    library: str
    name: str
    f: Callable[..., Any]  # f(m, *args): m is the imported library module
    args: tuple[str, ...]
    grad: str | None = None  # why G does not apply (None: it does where the output holds a float)

    @property
    def full_name(self) -> str:
        return f"{self.library}.{self.name}"


CASES: list[Case] = []
_LIB = [""]


def library(name: str) -> None:
    _LIB[0] = name


def add(name, f, *args, grad=None):
    CASES.append(Case(_LIB[0], name, f, tuple(args) or ("x",), grad))


def _plain(out, dims=None):
    """A MetPy result as plain xarray: DataArrays dequantified, bare Quantities (functions
    that reduce a profile) wrapped as DataArrays with ``dims``, tuples item by item."""
    if isinstance(out, xr.DataArray):
        return out.metpy.dequantify()
    if isinstance(out, (tuple, list)):
        return tuple(_plain(o, dims) for o in out)
    if hasattr(out, "magnitude"):  # a pint Quantity
        magnitude = out.magnitude
        return xr.DataArray(magnitude, dims=dims or tuple(f"dim_{i}" for i in range(np.ndim(magnitude))),
                            attrs={"units": str(out.units)})
    return out


def _metpy_call(func_name, *arrays, dims=None, module="calc", **kwargs):
    """MetPy's documented xarray route: DataArrays with units attrs go straight into
    metpy.calc (its wrappers quantify them); the result is dequantified to plain data."""
    mod = importlib.import_module(f"metpy.{module}")
    return _plain(getattr(mod, func_name)(*arrays, **kwargs), dims)


def _dewpoint(t, r):
    return _metpy_call("dewpoint_from_relative_humidity", t, r)


NEW_LEVELS = xr.DataArray([900.0, 600.0], dims="lev", attrs={"units": "hPa"})
HEIGHTS = xr.DataArray(np.arange(6) * 1000.0 + 100.0, dims="level", attrs={"units": "m"})


# ---------------------------------------------------------------- xrft
library("xrft")
add("fft", lambda m, a: m.fft(a, dim="t"), grad="complex output")
add("fft_abs", lambda m, a: abs(m.fft(a, dim="t")))
add("fft_real", lambda m, a: m.fft(a, dim="t", real_dim="t").real)
add("ifft_of_fft", lambda m, a: m.ifft(m.fft(a, dim="t"), dim="freq_t").real)
add("power_spectrum", lambda m, a: m.power_spectrum(a, dim="t"))
add("power_spectrum_hann", lambda m, a: m.power_spectrum(a, dim="t", window="hann", detrend="linear"))
add("power_spectrum_density_false", lambda m, a: m.power_spectrum(a, dim="t", scaling="spectrum"))
add("cross_spectrum", lambda m, a, b: m.cross_spectrum(a, b, dim="t").real, "x", "y")
add("cross_phase", lambda m, a, b: m.cross_phase(a, b, dim="t"), "x", "y",
    grad="the phase of two real signals is 0 or pi at the zero and Nyquist frequencies: on the branch cut of "
         "np.angle, where finite differences jump (the transform's one-sided derivative is not comparable)")
add("power_spectrum_2d", lambda m, a: m.power_spectrum(a, dim=["y", "x"]), "f2")
add("isotropic_power_spectrum", lambda m, a: m.isotropic_power_spectrum(a, dim=["y", "x"], nfactor=2),
    "f2")
add("power_spectrum_nans", lambda m, a: m.power_spectrum(a.fillna(0.0), dim="t"), "xn")
add("detrend_linear", lambda m, a: m.detrend(a, "t", detrend_type="linear"))
add("dft_real_dim", lambda m, a: abs(m.dft(a, dim="t", true_phase=True, true_amplitude=True)))

# ---------------------------------------------------------------- xhistogram
library("xhistogram")
add("histogram", lambda m, a: m.histogram(a, bins=[EDGES], dim=["t"]))
add("histogram_all_dims", lambda m, a: m.histogram(a, bins=[EDGES]))
add("histogram_weights", lambda m, w, a: m.histogram(a, bins=[EDGES], dim=["t"], weights=w),
    "y", "x")
add("histogram_density", lambda m, a: m.histogram(a, bins=[EDGES], dim=["t"], density=True),
    grad="piecewise constant in the data (bin counts)")
add("histogram_2d", lambda m, a, b: m.histogram(a, b, bins=[EDGES, EDGES], dim=["t"]), "x", "y")
add("histogram_nans", lambda m, a: m.histogram(a, bins=[EDGES], dim=["t"]), "xn")
add("histogram_block_size", lambda m, a: m.histogram(a, bins=[EDGES], dim=["t"], block_size=4))

# ---------------------------------------------------------------- flox
library("flox")
add("xarray_reduce_mean", lambda m, a, g: m.xarray_reduce(a, g, func="mean"), "x", "labels")
add("xarray_reduce_sum", lambda m, a, g: m.xarray_reduce(a, g, func="sum"), "x", "labels")
add("xarray_reduce_max", lambda m, a, g: m.xarray_reduce(a, g, func="max"), "x", "labels")
add("xarray_reduce_nanmean", lambda m, a, g: m.xarray_reduce(a, g, func="nanmean"), "x", "labels")
add("xarray_reduce_var", lambda m, a, g: m.xarray_reduce(a, g, func="var"), "x", "labels")
add("xarray_reduce_expected",
    lambda m, a, g: m.xarray_reduce(a, g, func="mean", expected_groups=np.array([0, 1, 2, 3])),
    "x", "labels")
add("xarray_reduce_engine_numpy",
    lambda m, a, g: m.xarray_reduce(a, g, func="sum", engine="numpy"), "x", "labels")
add("xarray_reduce_median", lambda m, a, g: m.xarray_reduce(a, g, func="median"), "x", "labels")
add("xarray_reduce_nanstd", lambda m, a, g: m.xarray_reduce(a, g, func="nanstd"), "x", "labels")
add("xarray_reduce_prod", lambda m, a, g: m.xarray_reduce(a, g, func="prod"), "x", "labels")
add("xarray_reduce_first", lambda m, a, g: m.xarray_reduce(a, g, func="first"), "x", "labels")
add("xarray_reduce_argmax", lambda m, a, g: m.xarray_reduce(a, g, func="argmax"), "x", "labels")
add("xarray_reduce_count", lambda m, a, g: m.xarray_reduce(a, g, func="count"), "x", "labels")
add("xarray_reduce_nanmean_nans", lambda m, a, g: m.xarray_reduce(a, g, func="nanmean"), "xn", "labels")
add("xarray_reduce_nansum_nans", lambda m, a, g: m.xarray_reduce(a, g, func="nansum"), "xn", "labels")
add("groupby_mean_via_flox", lambda m, a: a.groupby("time.month").mean(), "xm")  # xarray -> flox
add("resample_mean_via_flox", lambda m, a: a.resample(time="QS-DEC").mean(), "xm")

# ---------------------------------------------------------------- MetPy
library("metpy")
add("dewpoint_from_relative_humidity",
    lambda m, t, r: _metpy_call("dewpoint_from_relative_humidity", t, r), "tk", "rh")
add("potential_temperature", lambda m, t, pr: _metpy_call("potential_temperature", pr, t), "tk", "p")
add("wind_speed", lambda m, a, b: _metpy_call("wind_speed", a, b), "u", "v")
add("wind_direction", lambda m, a, b: _metpy_call("wind_direction", a, b), "u", "v")
add("saturation_vapor_pressure", lambda m, t: _metpy_call("saturation_vapor_pressure", t), "tk")
add("mixing_ratio_from_relative_humidity",
    lambda m, t, pr, r: _metpy_call("mixing_ratio_from_relative_humidity", pr, t, r), "tk", "p", "rh")
add("relative_humidity_from_dewpoint",
    lambda m, t, r: _metpy_call("relative_humidity_from_dewpoint", t,
                                _metpy_call("dewpoint_from_relative_humidity", t, r)), "tk", "rh")
add("equivalent_potential_temperature",
    lambda m, t, pr, r: _metpy_call("equivalent_potential_temperature", pr, t,
                                    _metpy_call("dewpoint_from_relative_humidity", t, r)),
    "tk", "p", "rh")
add("virtual_temperature",
    lambda m, t, qq: _metpy_call("virtual_temperature", t,
                                 _metpy_call("mixing_ratio_from_specific_humidity", qq)),
    "tk", "q")
add("density", lambda m, t, pr, qq: _metpy_call(
    "density", pr, t, _metpy_call("mixing_ratio_from_specific_humidity", qq)), "tk", "p", "q")
add("heat_index", lambda m, t, r: _metpy_call("heat_index", t, r), "tk", "rhp")
add("wind_chill", lambda m, t, s: _metpy_call("windchill", t, s), "tc", "u")
add("dry_lapse", lambda m, t, pr: _metpy_call("dry_lapse", pr, t), "sound", "plev")
add("dewpoint_from_vapor_pressure", lambda m, pr, qq: _metpy_call(
    "dewpoint", _metpy_call("vapor_pressure", pr, _metpy_call("mixing_ratio_from_specific_humidity", qq))),
    "p", "q")
add("first_derivative", lambda m, a: _metpy_call("first_derivative", a, axis="x"), "f2")
add("smooth_gaussian", lambda m, a: _metpy_call("smooth_gaussian", a, 3), "f2")
add("smooth_n_point", lambda m, a: _metpy_call("smooth_n_point", a, 9, 1), "f2")
add("vorticity", lambda m, a, b: _metpy_call("vorticity", a.assign_attrs(units="m/s"),
                                            b.assign_attrs(units="m/s")), "f2", "g2")
add("divergence", lambda m, a, b: _metpy_call("divergence", a.assign_attrs(units="m/s"),
                                             b.assign_attrs(units="m/s")), "f2", "g2")
add("advection", lambda m, a, b: _metpy_call("advection", a, b.assign_attrs(units="m/s"),
                                            -b.assign_attrs(units="m/s")), "f2", "g2")
add("laplacian", lambda m, a: _metpy_call("laplacian", a), "f2")
add("log_interpolate_1d", lambda m, t, pr: _metpy_call(
    "log_interpolate_1d", NEW_LEVELS, pr, t, module="interpolate", dims=("lev",)), "sound", "plev")
add("interpolate_1d", lambda m, t, pr: _metpy_call(
    "interpolate_1d", NEW_LEVELS, pr, t, module="interpolate", dims=("lev",)), "sound", "plev")
add("thickness_hydrostatic", lambda m, t, pr: _metpy_call("thickness_hydrostatic", pr, t, dims=()),
    "sound", "plev")
add("precipitable_water", lambda m, t, pr: _metpy_call("precipitable_water", pr, t - 5.0, dims=()),
    "sound", "plev")
add("brunt_vaisala_frequency", lambda m, t, pr: _metpy_call(
    "brunt_vaisala_frequency", HEIGHTS, _metpy_call("potential_temperature", pr, t)), "sound", "plev")
add("lcl", lambda m, t, pr, r: _metpy_call("lcl", pr, t, _dewpoint(t, r), dims=("station",)),
    "tk", "p", "rh")
add("wet_bulb_temperature", lambda m, t, pr, r: _metpy_call("wet_bulb_temperature", pr, t, _dewpoint(t, r)),
    "tk", "p", "rh")
add("specific_humidity_from_dewpoint", lambda m, t, pr, r: _metpy_call(
    "specific_humidity_from_dewpoint", pr, _dewpoint(t, r)), "tk", "p", "rh")
add("apparent_temperature", lambda m, t, r, s: _metpy_call("apparent_temperature", t, r, s), "tk", "rhp", "u")
add("pressure_to_height_std", lambda m, pr: _metpy_call("pressure_to_height_std", pr), "p")
add("quantify_dequantify", lambda m, a: (a.metpy.quantify() * 2).metpy.dequantify(), "tk")
add("convert_units", lambda m, a: a.metpy.convert_units("degC"), "tk",
    grad="its output is a Quantity in degC, which pint refuses to multiply and sum (an offset unit): the "
         "scalarised function raises OffsetUnitCalculusError without any transform")

# ---------------------------------------------------------------- pyet
library("pyet")
LAT = 0.8  # radians
add("hargreaves", lambda m, tm, tx, tn: m.hargreaves(tm, tx, tn, lat=LAT), "tmean", "tmax", "tmin")
add("pm_fao56", lambda m, tm, w, r, tx, tn, h: m.pm_fao56(tm, w, rs=r, tmax=tx, tmin=tn, rh=h,
                                                        elevation=100.0, lat=LAT),
    "tmean", "wind", "rs", "tmax", "tmin", "rhd")
add("priestley_taylor", lambda m, tm, r, h: m.priestley_taylor(tm, rs=r, rh=h, elevation=100.0, lat=LAT),
    "tmean", "rs", "rhd")
add("makkink", lambda m, tm, r: m.makkink(tm, r, elevation=100.0), "tmean", "rs")
add("hamon", lambda m, tm: m.hamon(tm, lat=LAT, method=1), "tmean")
add("oudin", lambda m, tm, la: m.oudin(tm, lat=la), "tmean", "lat")
add("turc", lambda m, tm, r, h: m.turc(tm, r, h), "tmean", "rs", "rhd")
add("calc_es", lambda m, tm: m.calc_es(tm), "tmean")
add("pm_fao56_lat_grid", lambda m, tm, w, r, tx, tn, h, la: m.pm_fao56(
    tm, w, rs=r, tmax=tx, tmin=tn, rh=h, elevation=100.0, lat=la),
    "tmean", "wind", "rs", "tmax", "tmin", "rhd", "lat")
add("hargreaves_lat_grid", lambda m, tm, tx, tn, la: m.hargreaves(tm, tx, tn, lat=la),
    "tmean", "tmax", "tmin", "lat")

# ---------------------------------------------------------------- xgcm
library("xgcm")


def _grid(m):
    return m.Grid(INPUTS["grid_ds"], coords={"X": {"center": "x_c", "left": "x_g"}},
                  padding="periodic", autoparse_metadata=False)


add("grid_diff", lambda m, a: _grid(m).diff(a, "X"), "xg")
add("grid_interp", lambda m, a: _grid(m).interp(a, "X"), "xg")
add("grid_cumsum", lambda m, a: _grid(m).cumsum(a, "X"), "xg")
add("grid_diff_nonperiodic", lambda m, a: m.Grid(
    INPUTS["grid_ds"], coords={"X": {"center": "x_c", "left": "x_g"}}, padding="fill",
    fill_value=0.0, autoparse_metadata=False).diff(a, "X"), "xg")
add("grid_interp_extend", lambda m, a: m.Grid(
    INPUTS["grid_ds"], coords={"X": {"center": "x_c", "left": "x_g"}}, padding="extend",
    autoparse_metadata=False).interp(a, "X"), "xg")
add("grid_diff_of_interp", lambda m, a: _grid(m).diff(_grid(m).interp(a, "X"), "X"), "xg")

# ---------------------------------------------------------------- cf_xarray
library("cf_xarray")
add("cf_mean_T", lambda m, a: a.cf.mean("T"))
add("cf_sum_time", lambda m, a: a.cf.sum("time"))
add("cf_mean_T_nans", lambda m, a: a.cf.mean("T"), "xn")
add("cf_std_T_nans", lambda m, a: a.cf.std("T"), "xn")
add("cf_isel_T", lambda m, a: a.cf.isel(T=slice(2, 9)))
add("cf_mean_XY", lambda m, a: a.cf.mean(["X", "Y"]), "f2")
add("cf_rolling_T", lambda m, a: a.cf.rolling(T=3).mean())
add("cf_diff_X", lambda m, a: a.cf.diff("X"), "f2")
add("cf_differentiate_X", lambda m, a: a.cf.differentiate("X"), "f2")
add("cf_weighted_mean", lambda m, a, w: a.cf.weighted(abs(w) + 0.1).mean("X"), "f2", "g2")
add("cf_add_bounds_mean", lambda m, a: a.to_dataset().cf.add_bounds("x")["f2"].cf.mean("X"), "f2")

# ---------------------------------------------------------------- pint-xarray
library("pint-xarray")
add("quantify_to_dequantify", lambda m, a: a.pint.quantify().pint.to("km").pint.dequantify())
add("quantify_arith", lambda m, a, b: (a.pint.quantify() * b.pint.quantify()).pint.dequantify(),
    "x", "y")
add("quantify_mean", lambda m, a: a.pint.quantify().mean("t").pint.dequantify())
add("magnitude_roundtrip", lambda m, a: a.pint.quantify().pint.magnitude * 2.0 + 0 * a)

# ---------------------------------------------------------------- geocat-comp
library("geocat-comp")
add("saturation_vapor_pressure", lambda m, t: m.saturation_vapor_pressure(t), "tf")
add("heat_index", lambda m, t, r: m.heat_index(t, r), "tf", "rhp")
add("dewtemp", lambda m, t, r: m.dewtemp(t, r), "tk", "rhp")
add("relhum", lambda m, t, qq, pr: m.relhum(t, qq, pr * 100.0), "tk", "q", "p")
add("psychrometric_constant", lambda m, pr: m.psychrometric_constant(pr / 10.0), "p")
add("saturation_vapor_pressure_slope", lambda m, t: m.saturation_vapor_pressure_slope(t), "tf")
add("actual_saturation_vapor_pressure", lambda m, t: m.actual_saturation_vapor_pressure(t), "tf")
add("climatology_average_month", lambda m, a: m.climatology_average(a.to_dataset(), freq="month")["xm"],
    "xm")
add("month_to_season", lambda m, a: m.month_to_season(a.to_dataset(), "JJA")["xm"], "xm")
HYAM = xr.DataArray([0.0, 0.01, 0.05, 0.1, 0.15, 0.2], dims="lev")
HYBM = xr.DataArray([1.0, 0.85, 0.7, 0.5, 0.3, 0.1], dims="lev")
PLEV = np.array([85000.0, 70000.0, 50000.0])
add("interp_hybrid_to_pressure", lambda m, d, pr: m.interp_hybrid_to_pressure(
    d, pr * 100.0, HYAM, HYBM, new_levels=PLEV, lev_dim="lev"), "hybrid", "p")
add("interp_hybrid_to_pressure_log", lambda m, d, pr: m.interp_hybrid_to_pressure(
    d, pr * 100.0, HYAM, HYBM, new_levels=PLEV, lev_dim="lev", method="log"), "hybrid", "p")
add("interp_hybrid_to_pressure_d_ps", lambda m, pr, d: m.interp_hybrid_to_pressure(
    d, pr * 100.0, HYAM, HYBM, new_levels=PLEV, lev_dim="lev"), "p", "hybrid")
add("delta_pressure", lambda m, pr: m.delta_pressure(
    xr.DataArray([100000.0, 90000.0, 80000.0, 70000.0, 60000.0, 50000.0], dims="lev"), pr * 100.0), "p")
add("pearson_r", lambda m, a, b: m.pearson_r(a, b, dim="t"), "x", "y")
add("fourier_low_pass", lambda m, a: m.fourier_low_pass(a, 2.0, 0.5, time_axis=0), "x")
add("gradient", lambda m, a: m.gradient(a.assign_coords(lat=("y", np.linspace(-10, 10, 8)),
                                                         lon=("x", np.linspace(0, 20, 8)))
                                        .swap_dims(y="lat", x="lon").drop_vars(["x", "y"]))[0],
    "f2")


# --------------------------------------------------------------------------- #
# running one case
# --------------------------------------------------------------------------- #


@dataclass
class Outcome:
    case: str
    library: str
    transform: str
    outcome: str
    error: str = ""  # "Class: first line" (refused/crash), the difference (wrong), the reason
    detail: str = field(default="", repr=False)  # the traceback of a crash


def _bound(case: Case, module) -> Callable[..., Any]:
    def f(*args):
        return case.f(module, *args)
    f.__name__ = case.name
    return f


def _args(case: Case) -> list[Any]:
    return [INPUTS[name] for name in case.args]


def check_v(f, args, vmap_kwargs):
    check_v_of(f, args, vmap_kwargs)


def check_j(f, args, vmap_kwargs):
    check_j_of(f, args, vmap_kwargs)


def grad_reason(case: Case, f) -> str | None:
    if case.grad:
        return case.grad
    args = [example(a) for a in _args(case)]
    if not _float_leaves(args[0]):
        return "the first argument holds no float64"
    if not _float_leaves(f(*args)):
        return "no float64 output"
    return None


def check_g(f, args_all, vmap_kwargs):
    args = [example(a) for a in args_all]
    shapes = [leaf.shape for leaf in _float_leaves(f(*args))]
    s = scalarised(f, shapes)
    g = lf.grad(s)(*args)
    x = args[0]
    if not isinstance(g, xr.DataArray) or set(g.dims) != set(x.dims):
        raise _Wrong(f"the gradient is {type(g).__name__} with dims {getattr(g, 'dims', None)}, "
                     f"not {x.dims}")
    got = np.asarray(g.transpose(*x.dims).data, dtype=np.float64)
    base = np.asarray(x.data, dtype=np.float64)
    want = np.zeros_like(base)
    for i in np.ndindex(base.shape):
        if np.isnan(base[i]):
            continue
        step = np.zeros_like(base)
        step[i] = EPS * max(1.0, abs(base[i]))
        plus = float(s(x.copy(data=base + step), *args[1:]))
        minus = float(s(x.copy(data=base - step), *args[1:]))
        want[i] = (plus - minus) / (2 * step[i])
    finite = ~np.isnan(base)
    got, want = np.where(finite, got, 0.0), np.where(finite, want, 0.0)
    scale = max(1.0, float(np.max(np.abs(want))))
    if not np.allclose(got, want, rtol=RTOL, atol=ATOL * scale):
        worst = np.unravel_index(np.argmax(np.abs(got - want)), base.shape)
        raise _Wrong(f"d/d{case_arg_name(args_all)}{list(worst)}: {got[worst]!r} != finite "
                     f"differences {want[worst]!r}")


def case_arg_name(args_all) -> str:
    return getattr(args_all[0], "name", None) or "x"


CHECKS = {"V": check_v, "G": check_g, "J": check_j}


def run_case(case: Case, transform: str, module, vmap_kwargs=None) -> Outcome:
    vmap_kwargs = vmap_kwargs or {}
    full = case.full_name
    if isinstance(module, Exception):
        return Outcome(full, case.library, transform, "skipped", first_line(module))
    f = _bound(case, module)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if transform == "G":
                reason = grad_reason(case, f)
                if reason is not None:
                    return Outcome(full, case.library, transform, "n/a", reason)
            CHECKS[transform](f, _args(case), vmap_kwargs)
        except _Wrong as error:
            return Outcome(full, case.library, transform, "wrong", str(error))
        except Exception as error:  # noqa: BLE001 - classified here
            kind = "refused" if is_refusal(error) else "crash"
            return Outcome(full, case.library, transform, kind, first_line(error),
                           detail=traceback.format_exc())
    return Outcome(full, case.library, transform, "ok")


def check_oracles(cases: list[Case], modules) -> list[str]:
    """Cases whose plain per-example loop fails (a broken case, not a finding)."""
    broken = []
    for case in cases:
        module = modules[case.library]
        if isinstance(module, Exception):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                loop_vmap(_bound(case, module), DIM, *_args(case))
        except Exception as error:  # noqa: BLE001
            broken.append(f"{case.full_name}: {first_line(error)}")
    return broken


def run_census(cases: list[Case] | None = None, transforms=TRANSFORMS, vmap_kwargs=None):
    cases = CASES if cases is None else cases
    modules = {lib: _import(lib) for lib in {c.library for c in cases}}
    return [run_case(c, t, modules[c.library], vmap_kwargs) for c in cases for t in transforms]


# --------------------------------------------------------------------------- #
# the report
# --------------------------------------------------------------------------- #


# which of our limitations a refusal meets: (label, pattern of "Class: first line"), first match
LIMITATIONS = [
    ("numpy.ma: masked arrays built from traced values (MetPy's units.concatenate, np.ma)",
     r"numpy\.ma\.|MaskedArray"),
    ("a NumPy function without an xarray version called on a DataArray (NumPy converts it)",
     r"has no xarray version, so NumPy converts"),
    ("the library needs NumPy arrays (scipy / pandas inside)",
     r"goes through (scipy|pandas)|inside scipy\."),
    ("explicit conversion in library code (np.array(mask), .values, a NumPy table indexed by "
     "a traced index)", r"^ConversionError: (at |inside xarray's DataArray.values|inside numpy's)"),
    ("a data-dependent branch (input validation: `if np.any(rh > 1.2)`, bounds checks)",
     r"^DataDependentControlFlowError"),
    ("dynamic shape under vmap (boolean-mask indexing a[~isnan(a)])", r"boolean-mask indexing"),
    ("dynamic shape under jit (np.bincount's length)", r"bincount under lf.jit"),
    ("a traced value written into a plain NumPy buffer (ufunc.at, buf[...] = v, out=)",
     r"^(InplaceError|OutArgumentError)"),
]


def limitation(error: str) -> str:
    for label, pattern in LIMITATIONS:
        if re.search(pattern, error):
            return label
    return "other"


def tables(outcomes: list[Outcome], markdown: bool = False) -> str:
    count = defaultdict(int)
    for o in outcomes:
        count[(o.library, o.transform, o.outcome)] += 1
        count[("all", o.transform, o.outcome)] += 1
    libraries = [lib for lib in LIBRARIES if any(o.library == lib for o in outcomes)]
    by_transform = [[t, *(str(count[("all", t, o)]) for o in OUTCOMES),
                     str(sum(count[("all", t, o)] for o in OUTCOMES))] for t in TRANSFORMS]
    by_transform.append(["all", *(str(sum(count[("all", t, o)] for t in TRANSFORMS)) for o in OUTCOMES),
                         str(len(outcomes))])
    by_library = []
    for lib in libraries:
        n_cases = len({o.case for o in outcomes if o.library == lib})
        by_library.append([f"{lib} ({n_cases})",
                           *("/".join(str(count[(lib, t, o)]) for t in TRANSFORMS) for o in OUTCOMES)])
    return (format_table(by_transform, ["transform", *OUTCOMES, "total"], markdown) + "\n\n"
            + format_table(by_library, ["library (cases)", *(f"{o} V/G/J" for o in OUTCOMES)], markdown))


def listing(outcomes: list[Outcome], verbose: bool = False) -> str:
    lines = []
    by_limitation = defaultdict(lambda: defaultdict(int))
    for o in outcomes:
        if o.outcome == "refused":
            by_limitation[limitation(o.error)][o.transform] += 1
    if by_limitation:
        lines.append("\nrefused, by the limitation that blocks them (V/G/J):")
        for label, n in sorted(by_limitation.items(), key=lambda kv: -sum(kv[1].values())):
            lines.append(f"  {sum(n.values()):3d}  ({n['V']}/{n['G']}/{n['J']})  {label}")
    lines += outcome_lines(outcomes, verbose, by="message", width=200)
    na = [f"{o.case} ({o.error})" for o in outcomes if o.outcome == "n/a"]
    if na:
        lines.append(f"\nG not applicable ({len(na)}): {', '.join(na)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.census_libraries",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print the counts as Markdown tables")
    parser.add_argument("-k", metavar="TEXT", default="", help="only the cases whose name contains TEXT")
    parser.add_argument("-v", "--verbose", action="store_true", help="print the traceback of each crash")
    parser.add_argument("--branches", choices=["error", "agree"], default="error",
                        help="vmap's branches= policy for V and J (default: the documented 'error')")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if args.k in c.full_name]
    modules = {lib: _import(lib) for lib in LIBRARIES}
    for lib, module in modules.items():
        if isinstance(module, Exception):
            print(f"skipped: {lib} is not importable ({first_line(module)})")
    broken = check_oracles(cases, modules)
    for line in broken:
        print(f"broken case (its plain loop fails): {line}")
    vmap_kwargs = {} if args.branches == "error" else {"branches": args.branches}
    start = time.perf_counter()
    outcomes = [run_case(c, t, modules[c.library], vmap_kwargs) for c in cases for t in TRANSFORMS]
    seconds = time.perf_counter() - start
    versions = ", ".join(f"{lib} {_version(lib)}" for lib, m in modules.items()
                         if not isinstance(m, Exception))
    print(f"library census: {len(cases)} cases x {len(TRANSFORMS)} transforms (V vmap vs the loop, "
          f"G grad vs central differences, J jit vs un-jitted; vmap branches={args.branches!r}) "
          f"in {seconds:.1f} s\nxarray {xr.__version__}, numpy {np.__version__}; {versions}\n")
    print(tables(outcomes, markdown=args.markdown))
    print(refused_cases(outcomes))
    print(listing(outcomes, verbose=args.verbose))
    return 1 if any(o.outcome in ("wrong", "crash") for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
