"""A census of xarray methods under ``lf.vmap``, ``lf.grad`` and ``lf.jit`` (issue 26).

Each case is a one-example function written in plain xarray (``lambda a:
a.rolling(t=3).mean()``) and the names of the inputs it takes (``INPUTS``: DataArrays and
Datasets with a ``"sample"`` dim to map, a non-uniform numeric axis ``t``, a datetime axis
``time``, a label coordinate, NaNs where a method is about NaNs).  Each case runs under
three transforms, each against an oracle that never calls labeled_func:

* ``V``: ``lf.vmap(f, dim="sample")(*args)`` against the per-example loop + ``xr.concat``
  (``helpers_coverage.loop_vmap``), compared by ``helpers_coverage.assert_same`` (values,
  dims, coords, name, attrs, dtype);
* ``G``: ``lf.grad`` of ``f`` scalarised (``sum(out * W)`` over the float outputs, ``W``
  fixed weights of the output's shape, NaNs skipped) with respect to the first argument,
  on example 0, against central finite differences in float64 (step ``EPS``, ``RTOL``);
  not applicable (``"n/a"``) where the output holds no float, or the case says why;
* ``J``: ``lf.jit(lf.vmap(f, dim="sample"))`` called on the inputs, again on other
  values (``a * 0.9 + 0.05``: the same NaNs and the same order, so the same shapes) and,
  where an input holds NaNs, on the data rolled by one along its last axis (the NaNs
  elsewhere: NaN masks and guards that differ from the trace's), each against the
  un-jitted vmap (the loop where vmap refuses) to ``JIT_TOL``.

The outcome of a run is ``"ok"``, ``"refused"`` (a documented policy error of
``labeled_func.errors``, or a ``NotImplementedError``: the class and the first line of the
message are kept), ``"wrong"`` (a result differs from its oracle), ``"crash"`` (any other
exception: a bug), ``"n/a"`` (G of a case without a derivative) or ``"skipped"`` (the
case needs a package that is not installed, e.g. bottleneck for ``ffill``).

``run_census()`` runs every case; ``benchmarks/census_xarray.py`` prints the table and
``tests/test_census_xarray.py`` keeps the counts from growing.
"""
from __future__ import annotations

import importlib.util
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd
import xarray as xr

import labeled_func as lf
from labeled_func.errors import TransformError

try:  # works with and without a tests/__init__.py, and from benchmarks/ (PYTHONPATH=.)
    from helpers_coverage import assert_same, loop_vmap
except ImportError:  # pragma: no cover
    from tests.helpers_coverage import assert_same, loop_vmap

DIM = "sample"
N = 3
EPS = 1e-6
RTOL = 1e-5
ATOL = 1e-7
JIT_TOL = 1e-12
TRANSFORMS = ("V", "G", "J")
OUTCOMES = ("ok", "refused", "wrong", "crash", "n/a", "skipped")

T = np.array([0.0, 0.1, 0.3, 0.6, 1.0, 1.5])  # non-uniform: differentiate/integrate use it
TIME = pd.date_range("2000-01-01", periods=8, freq="6h")  # two days of four steps
XLAB = np.array(["a", "b", "c", "d"])
GROUP = np.array(["p", "q", "p", "q"])  # a label coordinate along x, for groupby


# --------------------------------------------------------------------------- #
# inputs
# --------------------------------------------------------------------------- #


def _make_inputs() -> dict[str, Any]:
    rng = np.random.default_rng(26)
    sample = xr.Variable((DIM,), [10, 20, 30], attrs={"long_name": "example"})
    t = xr.Variable(("t",), T, attrs={"units": "s"})
    attrs = {"units": "m", "long_name": "signal"}

    def da2(data, name):
        return xr.DataArray(data, dims=(DIM, "t"), coords={DIM: sample, "t": t}, name=name,
                            attrs=dict(attrs))

    def positive(*shape):
        return rng.uniform(0.5, 1.5, shape)

    x = da2(positive(N, T.size), "x")
    y = da2(positive(N, T.size), "y")
    xs = da2(rng.uniform(0.2, 1.0, (N, T.size)) * rng.choice([-1.0, 1.0], (N, T.size)), "xs")
    xn_data = positive(N, T.size)
    xn_data[0, 2] = xn_data[1, 0] = xn_data[1, 4] = xn_data[2, 5] = np.nan
    xn = da2(xn_data, "xn")  # NaNs in different places per example
    xc_data = positive(N, T.size)
    xc_data[:, 1] = xc_data[:, 4] = np.nan
    xc = da2(xc_data, "xc")  # NaNs in the same places in every example
    wm = da2(positive(N, T.size), "wm")  # mapped weights
    x3 = xr.DataArray(
        positive(N, XLAB.size, T.size), dims=(DIM, "x", "t"),
        coords={DIM: sample, "x": XLAB, "t": t, "label": ("x", GROUP),
                "lon": ("x", [1.0, 2.0, 4.0, 5.5])},
        name="x3", attrs=dict(attrs))
    xt = xr.DataArray(positive(N, TIME.size), dims=(DIM, "time"),
                      coords={DIM: sample, "time": TIME}, name="xt", attrs=dict(attrs))
    ds = xr.Dataset({"a": x.rename(None), "b": (("t",), positive(T.size))},
                    attrs={"title": "two variables"})
    ds2 = xr.Dataset({"a": x.rename(None), "c": y.rename(None)})

    def along_t(values, name):
        return xr.DataArray(values, dims=("t",), coords={"t": t}, name=name)

    u = along_t(positive(T.size), "u")  # shared (unmapped) operand
    w = along_t(rng.uniform(0.5, 2.0, T.size), "w")  # shared weights
    q = xr.DataArray([0.05, 0.45, 1.2], dims="k", name="q")  # shared query points in t
    qm = xr.DataArray(rng.uniform(0.05, 1.4, (N, 3)), dims=(DIM, "k"), name="qm")  # mapped ones
    xl = x3.transpose("x", "t", DIM).rename("xl")  # the mapped dim last
    xi = xr.DataArray(rng.integers(0, 10, (N, T.size)), dims=(DIM, "t"), coords={DIM: sample, "t": t},
                      name="xi")  # integers
    return dict(x=x, y=y, xs=xs, xn=xn, xc=xc, wm=wm, x3=x3, xt=xt, ds=ds, ds2=ds2, u=u, w=w,
                q=q, qm=qm, xl=xl, xi=xi)


INPUTS = _make_inputs()


# --------------------------------------------------------------------------- #
# cases
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class Case:
    """One function of one example, and the inputs it takes (keys of ``INPUTS``).

    ``grad``: why G does not apply (``None``: it does where the output holds a float);
    ``needs``: a module the case needs in plain xarray (skipped without it)."""
    name: str
    f: Callable[..., Any]
    args: tuple[str, ...]
    group: str
    grad: str | None = None
    needs: str | None = None


CASES: list[Case] = []
_GROUP = [""]


def group(name: str) -> None:
    _GROUP[0] = name


def add(name, f, *args, grad=None, needs=None):
    CASES.append(Case(name, f, tuple(args) or ("x",), _GROUP[0], grad, needs))


# ---------------------------------------------------------------- reductions
group("reductions")
for _r in ["sum", "mean", "std", "var", "prod", "max", "min", "median"]:
    add(f"{_r}", lambda a, _r=_r: getattr(a, _r)("t"))
    add(f"{_r}_nan", lambda a, _r=_r: getattr(a, _r)("t"), "xn")
add("std_ddof1", lambda a: a.std("t", ddof=1))
add("var_ddof1_nan", lambda a: a.var("t", ddof=1), "xn")
add("mean_skipna_false", lambda a: a.mean("t", skipna=False), "xn")
add("sum_min_count", lambda a: a.sum("t", min_count=5), "xn")
add("mean_all", lambda a: a.mean())
add("sum_3d_two_dims", lambda a: a.sum(["x", "t"]), "x3")
add("mean_3d_x", lambda a: a.mean("x"), "x3")
add("max_3d_all", lambda a: a.max(), "x3")
add("count", lambda a: a.count("t"), "xn")
add("any", lambda a: (a > 1.2).any("t"))
add("all", lambda a: (a > 0.6).all("t"))
add("argmax", lambda a: a.argmax("t"))
add("argmin", lambda a: a.argmin("t"))
add("argmax_nan", lambda a: a.argmax("t"), "xn")
add("idxmax", lambda a: a.idxmax("t"))
add("idxmin", lambda a: a.idxmin("t"))
add("idxmax_3d", lambda a: a.idxmax("x"), "x3")
add("cumsum", lambda a: a.cumsum("t"))
add("cumsum_nan", lambda a: a.cumsum("t"), "xn")
add("cumprod", lambda a: a.cumprod("t"))
add("cumprod_3d_x", lambda a: a.cumprod("x"), "x3")
add("cumulative_sum", lambda a: a.cumulative("t").sum())
add("cumulative_mean", lambda a: a.cumulative("t").mean())
add("quantile", lambda a: a.quantile(0.3, dim="t"))
add("quantile_list", lambda a: a.quantile([0.25, 0.75], dim="t"))
add("quantile_nan", lambda a: a.quantile(0.5, dim="t"), "xn")
add("quantile_3d", lambda a: a.quantile([0.1, 0.9], dim="t"), "x3")
add("quantile_nearest", lambda a: a.quantile(0.3, dim="t", method="nearest"))
add("quantile_lower", lambda a: a.quantile(0.3, dim="t", method="lower"))
add("quantile_midpoint", lambda a: a.quantile(0.3, dim="t", method="midpoint"))
add("quantile_hazen", lambda a: a.quantile(0.3, dim="t", method="hazen"))
add("reduce_nansum", lambda a: a.reduce(np.nansum, dim="t"), "xn")
add("reduce_ptp", lambda a: a.reduce(np.ptp, dim="t"))
add("np_sum", lambda a: np.sum(a))
add("np_mean_axis", lambda a: np.mean(a, axis=1), "x3")

# ---------------------------------------------------------------- elementwise
group("elementwise")
add("arith_chain", lambda a, b: (a * 2 + b) / (b + 1) - a**2, "x", "y")
add("arith_unmapped", lambda a, b: a * b - b / a, "x", "u")
add("pow_mapped", lambda a, b: a**b, "x", "y")
add("neg_abs", lambda a: -abs(a), "xs")
add("np_exp_log", lambda a: np.exp(-a) + np.log(a))
add("np_sqrt", np.sqrt)
add("np_tanh", np.tanh, "xs")
add("np_arctan2", lambda a, b: np.arctan2(a, b), "xs", "u")
add("np_hypot", lambda a, b: np.hypot(a, b), "x", "y")
add("np_maximum", lambda a: np.maximum(a, 0.0), "xs")
add("np_fmin_mapped", lambda a, b: np.fmin(a, b), "xn", "y")
add("np_sign", np.sign, "xs")
add("np_floor", lambda a: np.floor(a * 3))
add("np_mod", lambda a: np.mod(a, 0.3))
add("floordiv", lambda a: a // 0.3)
add("np_log1p_expm1", lambda a: np.log1p(a) * np.expm1(a))
add("np_nan_to_num", lambda a: np.nan_to_num(a, nan=-1.0), "xn")
add("xr_ufuncs_sin", lambda a: xr.ufuncs.sin(a), "xs")
add("round", lambda a: a.round(), "xs")
add("round_decimals", lambda a: (a * 10).round(1))
add("np_round", lambda a: np.round(a, 2))
add("clip", lambda a: a.clip(0.7, 1.2))
add("clip_min", lambda a: a.clip(min=0.8))
add("clip_shared_max", lambda a, b: a.clip(max=b), "x", "u")
add("clip_mapped_bounds", lambda a, b: a.clip(b * 0.8, b), "x", "y")
add("astype_float32", lambda a: a.astype(np.float32), grad="float32 output: finite differences in float64 do not apply")
add("astype_int", lambda a: (a * 10).astype(np.int64))
add("astype_bool_float", lambda a: (a > 1.0).astype(float))
add("conj_real", lambda a: a.conj().real)
add("copy_deep", lambda a: a.copy(deep=True) * 2)
add("pipe", lambda a: a.pipe(np.sqrt) + 1)
add("isnull", lambda a: a.isnull(), "xn")
add("notnull", lambda a: a.notnull(), "xn")
add("np_isfinite", np.isfinite, "xn")
add("isin", lambda a: (a * 10).round().isin([6.0, 8.0, 12.0]))
add("compare_mapped", lambda a, b: a <= b, "x", "y")
add("logical_ops", lambda a, b: (a > 0.8) & ~(b < 0.9) | (a > 1.4), "x", "y")
add("zeros_like", lambda a: xr.zeros_like(a) + a)
add("ones_like", lambda a: xr.ones_like(a) * a)
add("full_like", lambda a: xr.full_like(a, 2.0) - a)

# ---------------------------------------------------------------- where / missing values
group("where and missing values")
add("where_nan", lambda a: a.where(a > 1.0))
add("where_other", lambda a: a.where(a > 1.0, -1.0))
add("where_mapped_other", lambda a, b: a.where(a > b, b), "x", "y")
add("where_shared_cond", lambda a, b: a.where(b > 1.0), "x", "u")
add("where_drop_common", lambda a: a.where(a.notnull(), drop=True), "xc")
add("where_drop_coord", lambda a: a.where(a.t > 0.2, drop=True))
add("xr_where", lambda a: xr.where(a > 1.0, a, 0.0))
add("xr_where_mapped", lambda a, b: xr.where(a > b, a, b), "x", "y")
add("xr_where_keep_attrs", lambda a: xr.where(a < 1.0, 2 * a, a, keep_attrs=True))
add("fillna_scalar", lambda a: a.fillna(0.0), "xn")
add("fillna_mapped", lambda a, b: a.fillna(b), "xn", "y")
add("fillna_shared", lambda a, b: a.fillna(b), "xn", "u")
add("combine_first", lambda a, b: a.combine_first(b), "xn", "y")
add("ffill", lambda a: a.ffill("t"), "xn", needs="bottleneck")
add("bfill", lambda a: a.bfill("t"), "xn", needs="bottleneck")
add("interpolate_na", lambda a: a.interpolate_na("t"), "xn")
add("interpolate_na_common", lambda a: a.interpolate_na("t"), "xc")
add("interpolate_na_nearest", lambda a: a.interpolate_na("t", method="nearest"), "xc")
add("interpolate_na_limit", lambda a: a.interpolate_na("t", limit=1), "xn")
add("interpolate_na_no_coord", lambda a: a.interpolate_na("t", use_coordinate=False), "xc")
add("dropna_any_common", lambda a: a.dropna("t"), "xc")
add("dropna_all", lambda a: a.dropna("t", how="all"), "xc")
add("rolling_mean_dropna", lambda a: a.rolling(t=3).mean().dropna("t"))
add("where_notnull", lambda a: a.where(a.notnull(), 0.0), "xn")

# ---------------------------------------------------------------- indexing
group("indexing")
add("isel_int", lambda a: a.isel(t=2))
add("isel_slice", lambda a: a.isel(t=slice(1, 4)))
add("isel_list", lambda a: a.isel(t=[4, 0, 2]))
add("isel_dataarray", lambda a: a.isel(t=xr.DataArray([4, 1], dims="k")), "x3")
add("isel_argmax", lambda a: a.isel(t=a.argmax("t")))
add("isel_argmax_3d", lambda a: a.isel(t=a.argmax("t")), "x3")
add("sel_label", lambda a: a.sel(t=0.3))
add("sel_slice", lambda a: a.sel(t=slice(0.1, 1.0)))
add("sel_list", lambda a: a.sel(t=[0.1, 1.0]))
add("sel_nearest", lambda a: a.sel(t=0.33, method="nearest"))
add("sel_nearest_list", lambda a: a.sel(t=[0.05, 0.7], method="nearest"))
add("sel_ffill", lambda a: a.sel(t=0.5, method="ffill"))
add("sel_string", lambda a: a.sel(x="b"), "x3")
add("sel_pointwise", lambda a: a.sel(x=xr.DataArray(["a", "c"], dims="k"),
                                     t=xr.DataArray([0.1, 1.5], dims="k")), "x3")
add("loc", lambda a: a.loc[0.1:0.6])
add("getitem", lambda a: a[1:4])
add("getitem_3d", lambda a: a[0, ::-1], "x3")
add("head", lambda a: a.head(t=2))
add("tail", lambda a: a.tail(t=3))
add("thin", lambda a: a.thin(t=2))
add("drop_sel", lambda a: a.drop_sel(t=[0.1, 0.6]))
add("drop_isel", lambda a: a.drop_isel(t=[0, 5]))
add("reindex_nan", lambda a: a.reindex(t=[0.1, 0.2, 1.5]))
add("reindex_fill", lambda a: a.reindex(t=[0.1, 0.2, 1.5], fill_value=0.0))
add("reindex_nearest", lambda a: a.reindex(t=[0.05, 0.7], method="nearest"))
add("reindex_like", lambda a, b: a.reindex_like(b.isel(t=slice(0, 3))), "x", "u")

# ---------------------------------------------------------------- interpolation
group("interpolation")
add("interp_scalar", lambda a: a.interp(t=0.5))
add("interp_list", lambda a: a.interp(t=[0.05, 0.45, 1.2]))
add("interp_outside", lambda a: a.interp(t=[-0.5, 0.2, 2.0]))
add("interp_fill_value", lambda a: a.interp(t=[-0.5, 2.0], kwargs={"fill_value": "extrapolate"}))
add("interp_nearest", lambda a: a.interp(t=[0.05, 0.45], method="nearest"))
add("interp_cubic", lambda a: a.interp(t=[0.05, 0.45], method="cubic"))
add("interp_shared_query", lambda a, b: a.interp(t=b), "x", "q")
add("interp_mapped_query", lambda a, b: a.interp(t=b), "x", "qm")
add("interp_query_grad", lambda b, a: a.interp(t=b), "qm", "x")
add("interp_nan", lambda a: a.interp(t=[0.2, 0.8]), "xn")
add("interp_2d", lambda a: a.swap_dims(x="lon").interp(lon=[1.5, 4.5], t=[0.2, 0.7]), "x3")
add("interp_like", lambda a, b: a.interp_like(b.interp(t=[0.2, 0.4])), "x", "u")
add("interp_datetime", lambda a: a.interp(time=TIME[:3] + pd.Timedelta("2h")), "xt")
add("np_interp", lambda a: xr.apply_ufunc(np.interp, xr.DataArray([0.2, 0.7], dims="k"), a.t, a,
                                          input_core_dims=[["k"], ["t"], ["t"]], output_core_dims=[["k"]]))

# ---------------------------------------------------------------- shape
group("shape")
add("transpose", lambda a: a.transpose("t", "x"), "x3")
add("transpose_T", lambda a: a.T, "x3")
add("expand_dims", lambda a: a.expand_dims(k=2))
add("squeeze", lambda a: a.isel(t=[2]).squeeze("t"))
add("stack", lambda a: a.stack(z=("x", "t")), "x3")
add("stack_unstack", lambda a: a.stack(z=("x", "t")).unstack("z"), "x3")
add("stack_mean", lambda a: a.stack(z=("t", "x")).mean("z"), "x3")
add("roll", lambda a: a.roll(t=2))
add("roll_coords", lambda a: a.roll(t=-1, roll_coords=True))
add("shift", lambda a: a.shift(t=1))
add("shift_fill", lambda a: a.shift(t=-2, fill_value=0.0))
add("pad_constant", lambda a: a.pad(t=(1, 2), constant_values=0.0))
add("pad_nan", lambda a: a.pad(t=1))
add("pad_edge", lambda a: a.pad(t=(2, 1), mode="edge"))
add("pad_reflect", lambda a: a.pad(t=2, mode="reflect"))
add("pad_wrap", lambda a: a.pad(x=1, mode="wrap"), "x3")
add("pad_linear_ramp", lambda a: a.pad(t=2, mode="linear_ramp", end_values=0.0))
add("sortby_coord", lambda a: a.sortby("x", ascending=False), "x3")
add("sortby_values", lambda a: a.sortby(a).drop_vars("t"))
add("sortby_mean", lambda a: a.sortby(a.mean("t")).drop_vars(["x", "label", "lon"]), "x3")
add("np_sort", lambda a: xr.apply_ufunc(np.sort, a, input_core_dims=[["t"]], output_core_dims=[["t"]]))
add("argsort", lambda a: a.argsort())
add("rename", lambda a: a.rename(t="time") * 2)
add("rename_name", lambda a: a.rename("renamed"))
add("swap_dims", lambda a: a.swap_dims(x="lon"), "x3")
add("assign_coords", lambda a: a.assign_coords(t2=a.t * 2) + 1)
add("assign_coords_from_data", lambda a: a.assign_coords(m=a.mean("t")), grad="the output's float data do not depend on the coordinate set from the input")
add("set_index", lambda a: a.set_index(x="lon"), "x3")
add("reset_coords", lambda a: a.reset_coords(drop=True), "x3")
add("drop_vars", lambda a: a.drop_vars("label"), "x3")
add("broadcast_like", lambda a, b: b.broadcast_like(a), "x3", "u", grad="the output is b, a shared constant")
add("broadcast_like_mapped", lambda a, b: a.broadcast_like(b), "x", "x3")
add("xr_broadcast", lambda a, b: xr.broadcast(a, b), "x", "x3")
add("xr_align_inner", lambda a, b: xr.align(a, b.isel(t=slice(1, 4)), join="inner"), "x", "u")
add("xr_align_outer", lambda a, b: xr.align(a.isel(t=slice(0, 4)), b.isel(t=slice(2, 6)), join="outer"), "x", "y")

# ---------------------------------------------------------------- combine
group("combine")
add("concat_existing", lambda a, b: xr.concat([a, b], dim="t"), "x", "y")
add("concat_new", lambda a: xr.concat([a, 2 * a], dim="k"))
add("concat_shared", lambda a, b: xr.concat([b, a], dim="k"), "x", "u")
add("merge", lambda a, b: xr.merge([a, b]), "x", "y")
add("merge_shared", lambda a, b: xr.merge([a, b]), "x", "u")
add("combine_by_coords", lambda a: xr.combine_by_coords([a.isel(t=slice(0, 3)).to_dataset(name="v"),
                                                         a.isel(t=slice(3, 6)).to_dataset(name="v")]))
add("to_dataset", lambda a: a.to_dataset(name="v").assign(w=lambda d: d.v**2))
add("to_dataset_dim", lambda a: a.to_dataset(dim="x"), "x3")
add("to_dataarray", lambda a, b: xr.Dataset({"p": a, "q": b}).to_dataarray("var"), "x", "y")

# ---------------------------------------------------------------- linear algebra
group("linear algebra")
add("xr_dot", lambda a, b: xr.dot(a, b, dim="t"), "x", "y")
add("xr_dot_shared", lambda a, b: xr.dot(a, b, dim="t"), "x3", "u")
add("xr_dot_two_dims", lambda a: xr.dot(a, a, dim=["x", "t"]), "x3")
add("xr_dot_all", lambda a, b: xr.dot(a, b), "x", "y")
add("dot_method", lambda a, b: a.dot(b), "x3", "y")
add("matmul", lambda a, b: a @ b, "x", "y")
add("np_einsum_data", lambda a, b: np.einsum("xt,t->x", a.data, b.data), "x3", "y")
add("xr_cross", lambda a: xr.cross(a.isel(t=slice(0, 3)).rename(t="c"),
                                   a.isel(t=slice(3, 6)).rename(t="c").assign_coords(c=a.t[:3].values),
                                   dim="c"))
add("corr", lambda a, b: xr.corr(a, b, dim="t"), "x", "y")
add("cov", lambda a, b: xr.cov(a, b, dim="t"), "x", "y")
add("cov_ddof0", lambda a, b: xr.cov(a, b, dim="t", ddof=0), "x", "y")
add("polyfit", lambda a: a.polyfit("t", 2).polyfit_coefficients)
add("polyfit_skipna", lambda a: a.polyfit("t", 1, skipna=True).polyfit_coefficients, "xn")
add("polyfit_full", lambda a: a.polyfit("t", 1, full=True).polyfit_residuals)
add("polyfit_3d", lambda a: a.polyfit("t", 1).polyfit_coefficients, "x3")
add("polyval", lambda a: xr.polyval(a.t, a.polyfit("t", 2).polyfit_coefficients))
add("polyval_coeffs", lambda a: xr.polyval(xr.DataArray([0.2, 0.5], dims="k"),
                                           a.isel(t=slice(0, 3)).rename(t="degree").assign_coords(degree=[0, 1, 2])))
add("curvefit", lambda a: a.curvefit("t", lambda t, p, r: p * np.exp(-r * t)).curvefit_coefficients,
    grad="central differences of an optimiser's result are its tolerance over the step (1.5e-8 / 1e-6 with "
         "SciPy's defaults): tests/test_curve_fit.py checks grad against the implicit derivative in closed form")

# ---------------------------------------------------------------- calculus
group("calculus")
add("diff", lambda a: a.diff("t"))
add("diff_n2", lambda a: a.diff("t", n=2))
add("diff_3d_x", lambda a: a.diff("x"), "x3")
add("differentiate", lambda a: a.differentiate("t"))
add("differentiate_edge2", lambda a: a.differentiate("t", edge_order=2), "x3")
add("differentiate_datetime", lambda a: a.differentiate("time", datetime_unit="h"), "xt")
add("integrate", lambda a: a.integrate("t"))
add("integrate_lon", lambda a: a.integrate("lon"), "x3")
add("integrate_datetime", lambda a: a.integrate("time", datetime_unit="h"), "xt")
add("cumulative_integrate", lambda a: a.cumulative_integrate("t"))
add("np_gradient", lambda a: xr.apply_ufunc(np.gradient, a, a.t, input_core_dims=[["t"], ["t"]],
                                            output_core_dims=[["t"]]))
add("np_trapezoid", lambda a: xr.apply_ufunc(np.trapezoid, a, a.t, input_core_dims=[["t"], ["t"]]))

# ---------------------------------------------------------------- windows
group("windows")
for _r in ["mean", "sum", "max", "min", "std", "var", "median", "prod", "count"]:
    add(f"rolling_{_r}", lambda a, _r=_r: getattr(a.rolling(t=3), _r)())
add("rolling_center", lambda a: a.rolling(t=3, center=True).mean())
add("rolling_min_periods", lambda a: a.rolling(t=3, min_periods=1).sum())
add("rolling_nan", lambda a: a.rolling(t=3, min_periods=2).mean(), "xn")
add("rolling_3d", lambda a: a.rolling(t=2, x=2).mean(), "x3")
add("rolling_construct", lambda a: a.rolling(t=3).construct("w").mean("w"))
add("rolling_reduce", lambda a: a.rolling(t=3).reduce(np.nanmean))
add("rolling_datetime", lambda a: a.rolling(time=4, center=True).mean(), "xt")
add("rolling_exp", lambda a: a.rolling_exp(t=2).mean(), needs="numbagg")
add("coarsen_mean", lambda a: a.coarsen(t=2).mean())
add("coarsen_sum", lambda a: a.coarsen(t=3).sum())
add("coarsen_max_trim", lambda a: a.coarsen(t=4, boundary="trim").max())
add("coarsen_pad", lambda a: a.coarsen(t=4, boundary="pad").mean())
add("coarsen_3d", lambda a: a.drop_vars(["x", "label"]).coarsen(x=2, t=2).mean(), "x3")
add("coarsen_construct", lambda a: a.coarsen(t=2).construct(t=("tc", "w")).std("w"))
add("coarsen_datetime", lambda a: a.coarsen(time=4).mean(), "xt")
add("rank", lambda a: a.rank("t"), needs="bottleneck")

# ---------------------------------------------------------------- weighted
group("weighted")
add("weighted_mean", lambda a, b: a.weighted(b).mean("t"), "x", "w")
add("weighted_sum", lambda a, b: a.weighted(b).sum("t"), "x", "w")
add("weighted_std", lambda a, b: a.weighted(b).std("t"), "x", "w")
add("weighted_var", lambda a, b: a.weighted(b).var("t"), "x", "w")
add("weighted_sum_of_weights", lambda a, b: a.weighted(b).sum_of_weights("t"), "x", "w",
    grad="depends on the weights only")
add("weighted_mean_nan", lambda a, b: a.weighted(b).mean("t"), "xn", "w")
add("weighted_quantile", lambda a, b: a.weighted(b).quantile(0.4, dim="t"), "x", "w")
add("weighted_mapped_weights", lambda a, b: a.weighted(b).mean("t"), "x", "wm")
add("weighted_grad_weights", lambda b, a: a.weighted(b).mean("t"), "wm", "x")
add("weighted_3d", lambda a, b: a.weighted(b).mean(["x", "t"]), "x3", "w")
add("weighted_data_weights", lambda a: a.weighted(a * 0 + a.t + 1).mean("t"))

# ---------------------------------------------------------------- groupby / resample
group("groupby and resample")
for _r in ["mean", "sum", "max", "std", "median"]:
    add(f"groupby_{_r}", lambda a, _r=_r: getattr(a.groupby("label"), _r)(), "x3")
add("groupby_first", lambda a: a.groupby("label").first(), "x3")
add("groupby_quantile", lambda a: a.groupby("label").quantile(0.5), "x3")
add("groupby_map", lambda a: a.groupby("label").map(lambda g: g - g.mean()), "x3")
add("groupby_anomaly", lambda a: a.groupby("label") - a.groupby("label").mean(), "x3")
add("groupby_reduce", lambda a: a.groupby("label").reduce(np.mean), "x3")
add("groupby_bins", lambda a: a.groupby_bins("t", [0.0, 0.5, 2.0]).mean())
add("groupby_values", lambda a: a.groupby((a > 1.0).rename("high")).mean())
add("groupby_time_hour", lambda a: a.groupby("time.hour").mean(), "xt")
add("groupby_time_day", lambda a: a.groupby("time.day").sum(), "xt")
add("groupby_dataset", lambda a: a.groupby("label").mean(), "x3")
add("resample_mean", lambda a: a.resample(time="1D").mean(), "xt")
add("resample_sum", lambda a: a.resample(time="12h").sum(), "xt")
add("resample_max", lambda a: a.resample(time="1D").max(), "xt")
add("resample_map", lambda a: a.resample(time="1D").map(lambda g: g - g.mean()), "xt")
add("resample_interpolate", lambda a: a.resample(time="3h").interpolate("linear"), "xt")
add("resample_asfreq", lambda a: a.resample(time="3h").asfreq(), "xt")
add("resample_nearest", lambda a: a.resample(time="3h").nearest(), "xt")

# ---------------------------------------------------------------- apply_ufunc / map_blocks
group("apply_ufunc")
add("apply_ufunc", lambda a: xr.apply_ufunc(np.sin, a))
add("apply_ufunc_core", lambda a: xr.apply_ufunc(lambda v: v.sum(-1), a, input_core_dims=[["t"]]))
add("apply_ufunc_two", lambda a, b: xr.apply_ufunc(lambda v, w: np.sum(v * w, -1), a, b,
                                                   input_core_dims=[["t"], ["t"]]), "x", "u")
add("apply_ufunc_output_core", lambda a: xr.apply_ufunc(np.cumsum, a, input_core_dims=[["x"]],
                                                        output_core_dims=[["x"]], kwargs={"axis": -1}),
    "x3")
add("apply_ufunc_exclude", lambda a: xr.apply_ufunc(lambda v: v[..., ::2], a, input_core_dims=[["t"]],
                                                    output_core_dims=[["t"]], exclude_dims={"t"}))
add("apply_ufunc_vectorize", lambda a: xr.apply_ufunc(lambda v: np.max(v) - np.min(v), a,
                                                      input_core_dims=[["t"]], vectorize=True), "x3")
add("apply_ufunc_keep_attrs", lambda a: xr.apply_ufunc(np.exp, a, keep_attrs=True))
add("map_blocks", lambda a: a.map_blocks(lambda b: b * 2 + 1))

# ---------------------------------------------------------------- Dataset
group("Dataset")
add("ds_arith", lambda d: d * 2 + d.a, "ds")
add("ds_mean", lambda d: d.mean("t"), "ds")
add("ds_std_ddof1", lambda d: d.std("t", ddof=1), "ds")
add("ds_map", lambda d: d.map(np.exp), "ds")
add("ds_reduce", lambda d: d.reduce(np.mean, "t"), "ds")
add("ds_to_dataarray", lambda d: d.to_dataarray("var").sum("var"), "ds")
add("ds_to_array", lambda d: d.to_array("var"), "ds")
add("ds_assign", lambda d: d.assign(c=d.a * d.b), "ds")
add("ds_getitem", lambda d: d["a"] - d["b"], "ds")
add("ds_data_vars_sum", lambda d: sum(v.sum() for v in d.data_vars.values()), "ds")
add("ds_where", lambda d: d.where(d.a > 1.0), "ds")
add("ds_fillna", lambda d: d.fillna(0.0), "ds")
add("ds_sel", lambda d: d.sel(t=slice(0.1, 0.6)), "ds")
add("ds_isel", lambda d: d.isel(t=[0, 3]), "ds")
add("ds_rolling", lambda d: d.rolling(t=2).mean(), "ds")
add("ds_coarsen", lambda d: d.coarsen(t=2).sum(), "ds")
add("ds_weighted", lambda d, b: d.weighted(b).mean("t"), "ds", "w")
add("ds_interp", lambda d: d.interp(t=[0.2, 0.9]), "ds")
add("ds_drop_vars", lambda d: d.drop_vars("b"), "ds")
add("ds_merge", lambda d, b: d.merge(b.rename("y")), "ds", "y")
add("ds_update", lambda d: d.assign(a=d.a.cumsum("t")), "ds")
add("ds_pipe", lambda d: d.pipe(lambda e: e.a + e.c), "ds2")
add("ds_diff", lambda d: d.diff("t"), "ds2")
add("ds_differentiate", lambda d: d.differentiate("t"), "ds2")
add("ds_integrate", lambda d: d.integrate("t"), "ds2")
add("ds_dot", lambda d: xr.dot(d.a, d.c, dim="t"), "ds2")
add("ds_quantile", lambda d: d.quantile(0.5, dim="t"), "ds2")
add("ds_polyfit", lambda d: d.polyfit("t", 1), "ds2")
add("ds_to_stacked_array", lambda d: d.to_stacked_array("z", sample_dims=["t"]), "ds2")
add("ds_xr_where", lambda d: xr.where(d.a > d.c, d.a, d.c), "ds2")

# ---------------------------------------------------------------- more: layouts, dtypes, outputs
group("more")
add("last_rolling", lambda a: a.rolling(t=3, center=True).mean(), "xl")
add("last_cumsum", lambda a: a.cumsum("t"), "xl")
add("last_interp", lambda a: a.interp(t=[0.2, 0.7]), "xl")
add("last_weighted", lambda a, b: a.weighted(b).mean("t"), "xl", "w")
add("last_groupby", lambda a: a.groupby("label").mean(), "xl")
add("last_differentiate", lambda a: a.differentiate("t"), "xl")
add("last_quantile", lambda a: a.quantile([0.2, 0.8], dim="x"), "xl")
add("last_dot", lambda a, b: xr.dot(a, b, dim="t"), "xl", "y")
add("int_mean", lambda a: a.mean("t"), "xi")
add("int_cumsum", lambda a: a.cumsum("t"), "xi")
add("int_floordiv_where", lambda a: (a // 2).where(a > 3), "xi")
add("int_to_float_times", lambda a, b: a.astype(float) * b, "xi", "x")
add("int_index_data", lambda a, b: b.drop_vars("t").isel(t=(a % 6).rename(t="k")), "xi", "x")
add("idxmax_datetime", lambda a: a.idxmax("time"), "xt")
add("where_coord_values", lambda a: xr.where(a > 1.0, a.t, -a))
add("keep_attrs_option", lambda a: _with_keep_attrs(lambda: a * 2 + a.mean("t")))
add("assign_attrs", lambda a: a.assign_attrs(units="K") * 2)
add("pad_symmetric", lambda a: a.pad(t=2, mode="symmetric"))
add("shift_rolling", lambda a: a.shift(t=1).rolling(t=2).sum())
add("diff_over_dt", lambda a: a.diff("t") / a.t.diff("t"))
add("groupby_cumsum", lambda a: a.groupby("label").cumsum(), "x3")
add("groupby_dataset_mean", lambda a: a.to_dataset(name="v").groupby("label").mean(), "x3")
add("coarsen_reduce", lambda a: a.coarsen(t=2).reduce(np.std))
add("quantile_two_dims", lambda a: a.quantile(0.5, dim=["x", "t"]), "x3")
add("median_two_dims", lambda a: a.median(["x", "t"]), "x3")
add("concat_index", lambda a: xr.concat([a.isel(t=0), a.isel(t=-1)], dim=pd.Index([0, 1], name="e")))
add("expand_dims_two", lambda a: a.expand_dims(s2=2, k=[1, 2, 3]))
add("tuple_output", lambda a: (a.mean("t"), a.std("t")))
add("dict_output", lambda a: {"m": a.max("t"), "r": a.cumsum("t")})
add("sortby_values_no_index", lambda a: a.drop_vars("t").sortby(a.drop_vars("t")))
add("isel_argmax_no_index", lambda a: a.drop_vars("t").isel(t=a.argmax("t")))
add("sel_nearest_mapped", lambda a, b: a.sel(t=b, method="nearest"), "x", "qm")
add("quantile_mapped_q", lambda a, b: a.quantile(b.isel(k=0), dim="t"), "x", "qm")
add("resample_datetime_ds", lambda a: a.to_dataset(name="v").resample(time="1D").mean(), "xt")
add("clip_nan", lambda a: a.clip(0.7, 1.2), "xn")
add("cumprod_nan", lambda a: a.cumprod("t"), "xn")
add("std_nan_ddof1_skipna_false", lambda a: a.std("t", ddof=1, skipna=False), "xn")

del _r


def _with_keep_attrs(thunk):
    with xr.set_options(keep_attrs=True):
        return thunk()


def case_names() -> list[str]:
    return [c.name for c in CASES]


CASE_BY_NAME = {c.name: c for c in CASES}


# --------------------------------------------------------------------------- #
# running one case
# --------------------------------------------------------------------------- #


@dataclass
class Outcome:
    case: str
    transform: str
    outcome: str
    error: str = ""  # "Class: first line of the message" for refused/crash; the diff for wrong
    seconds: float = 0.0
    detail: str = field(default="", repr=False)  # the traceback of a crash

    @property
    def reason(self) -> str:
        return self.error


class _Wrong(Exception):
    pass


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


def is_refusal(error: BaseException) -> bool:
    """A documented refusal: a policy error of labeled_func.errors, or a NotImplementedError."""
    return isinstance(error, (TransformError, NotImplementedError))


def args_of(case: Case) -> list[Any]:
    return [INPUTS[name] for name in case.args]


def example(obj: Any, i: int = 0) -> Any:
    if isinstance(obj, (xr.DataArray, xr.Dataset)) and DIM in obj.dims:
        return obj.isel({DIM: i}, drop=True)
    return obj


def perturbed(obj: Any) -> Any:
    """Other values, same NaNs, same order along every dim: ``a * 0.9 + 0.05``."""
    if isinstance(obj, xr.DataArray) and obj.dtype.kind == "f" and DIM in obj.dims:
        return obj.copy(data=obj.data * 0.9 + 0.05)
    if isinstance(obj, xr.Dataset):
        return obj.map(perturbed, keep_attrs=True)
    return obj


def _float_leaves(out: Any) -> list[xr.DataArray]:
    if isinstance(out, xr.DataArray):
        return [out] if out.dtype.kind == "f" and out.dtype.itemsize == 8 else []
    if isinstance(out, xr.Dataset):
        return [v for k in sorted(out.data_vars) for v in _float_leaves(out[k])]
    if isinstance(out, (tuple, list)):
        return [v for o in out for v in _float_leaves(o)]
    if isinstance(out, dict):
        return [v for k in sorted(out) for v in _float_leaves(out[k])]
    dtype = getattr(out, "dtype", None)  # a NumPy array, or a traced one
    return [out] if dtype is not None and dtype.kind == "f" and dtype.itemsize == 8 else []


def _weights(shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape))
    return (0.5 + (np.arange(n) * 0.618034) % 1.0).reshape(shape)


def scalarised(f: Callable, shape_of: list[tuple[int, ...]]) -> Callable:
    """``sum(out * W)`` over the float leaves of ``f``'s output, NaNs skipped."""
    def s(*args):
        leaves = _float_leaves(f(*args))
        total = 0.0
        for leaf, shape in zip(leaves, shape_of):
            weighted = leaf * _weights(shape)
            total = total + (weighted.sum() if isinstance(leaf, xr.DataArray) else np.nansum(weighted))
        return total
    return s


def check_v(case: Case, vmap_kwargs: dict | None = None) -> None:
    check_v_of(case.f, args_of(case), vmap_kwargs)


def check_v_of(f: Callable, args: list[Any], vmap_kwargs: dict | None = None) -> None:
    """``lf.vmap(f)`` against the per-example loop (also the library census's V)."""
    expected = loop_vmap(f, DIM, *args)
    result = lf.vmap(f, dim=DIM, **(vmap_kwargs or {}))(*args)
    _compare(result, expected, rtol=1e-7, atol=1e-12)


def nans_moved(obj: Any) -> Any:
    """The NaNs elsewhere (the data rolled by one along the last axis): a replay whose
    NaN-dependent decisions (masks, guards) differ from the trace's."""
    if isinstance(obj, xr.DataArray) and obj.dtype.kind == "f" and DIM in obj.dims:
        return obj.copy(data=np.roll(obj.data, 1, axis=-1))
    if isinstance(obj, xr.Dataset):
        return obj.map(nans_moved, keep_attrs=True)
    return obj


def _has_nans(obj: Any) -> bool:
    if isinstance(obj, xr.Dataset):
        return any(_has_nans(v) for v in obj.data_vars.values())
    return isinstance(obj, xr.DataArray) and obj.dtype.kind == "f" and bool(np.isnan(obj.values).any())


def check_j(case: Case, vmap_kwargs: dict | None = None) -> None:
    check_j_of(case.f, args_of(case), vmap_kwargs)


def check_j_of(f: Callable, inputs: list[Any], vmap_kwargs: dict | None = None) -> None:
    """Three calls of one jitted function: the inputs, other values, and (inputs with NaNs)
    the NaNs moved; each against the un-jitted vmap, or the loop where vmap refuses (also
    the library census's J)."""
    vmap_kwargs = vmap_kwargs or {}
    jitted = lf.jit(lf.vmap(f, dim=DIM, **vmap_kwargs))
    calls = [inputs, [perturbed(a) for a in inputs]]
    if any(_has_nans(a) for a in inputs):
        calls.append([nans_moved(a) for a in inputs])
    for number, args in enumerate(calls):
        try:
            expected = lf.vmap(f, dim=DIM, **vmap_kwargs)(*args)
        except Exception:  # vmap refuses (or fails): the loop is the function's value
            try:
                expected = loop_vmap(f, DIM, *args)
            except Exception:  # no value at all (the examples' shapes differ): skip the call
                if number < 2:
                    raise
                continue
        result = jitted(*args)
        _compare(result, expected, rtol=JIT_TOL, atol=JIT_TOL)


def _compare(result, expected, *, rtol, atol):
    try:
        assert_same(result, expected, rtol=rtol, atol=atol)
    except AssertionError as error:
        lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
        raise _Wrong(" | ".join(lines[:3])[:200] or "differs") from None


def grad_reason(case: Case) -> str | None:
    """Why G does not apply to ``case`` (None: it does)."""
    if case.grad:
        return case.grad
    first = example(args_of(case)[0])
    if not _float_leaves(first):
        return "the first argument holds no float64"
    out = case.f(*[example(a) for a in args_of(case)])
    if not _float_leaves(out):
        return "integer or boolean output"
    return None


def _leaf_arrays(obj: Any) -> list[tuple[str | None, xr.DataArray]]:
    if isinstance(obj, xr.DataArray):
        return [(None, obj)]
    return [(k, obj[k]) for k in sorted(obj.data_vars) if obj[k].dtype.kind == "f"]


def _replace(obj: Any, key: str | None, data: np.ndarray) -> Any:
    if key is None:
        return obj.copy(data=data)
    out = obj.copy()
    out[key] = obj[key].copy(data=data)
    return out


def check_g(case: Case, vmap_kwargs: dict | None = None) -> None:  # no vmap: vmap_kwargs unused
    args = [example(a) for a in args_of(case)]
    shapes = [leaf.shape for leaf in _float_leaves(case.f(*args))]
    s = scalarised(case.f, shapes)
    g = lf.grad(s)(*args)
    x = args[0]
    for key, leaf in _leaf_arrays(x):
        got_leaf = g if key is None else g[key]
        if not isinstance(got_leaf, xr.DataArray) or set(got_leaf.dims) != set(leaf.dims):
            raise _Wrong(f"the gradient of {key or 'the argument'} is {type(got_leaf).__name__} "
                         f"with dims {getattr(got_leaf, 'dims', None)}, not {leaf.dims}")
        got = np.asarray(got_leaf.transpose(*leaf.dims).data)
        base = np.asarray(leaf.data, dtype=np.float64)
        want = np.zeros_like(base)
        for i in np.ndindex(base.shape):
            if np.isnan(base[i]):
                continue
            step = np.zeros_like(base)
            step[i] = EPS
            plus = float(s(*[_replace(x, key, base + step)] + args[1:]))
            minus = float(s(*[_replace(x, key, base - step)] + args[1:]))
            want[i] = (plus - minus) / (2 * EPS)
        finite = ~np.isnan(base)
        if not np.allclose(got[finite], want[finite], rtol=RTOL, atol=ATOL):
            worst = np.unravel_index(np.argmax(np.where(finite, np.abs(got - want), -1)), base.shape)
            raise _Wrong(f"d/d{key or 'x'}{list(worst)}: {got[worst]!r} != finite differences "
                         f"{want[worst]!r}")


CHECKS = {"V": check_v, "G": check_g, "J": check_j}


def plain_failure(case: Case) -> str | None:
    """Why ``case`` fails without any transform in this environment (None: it runs). xarray
    hands some methods to optional libraries when they are installed (``groupby(...).cumsum()``
    to flox): where that call fails on plain NumPy data, no transform is to blame."""
    try:
        case.f(*[example(a) for a in args_of(case)])
    except Exception as error:  # noqa: BLE001 - reported as the reason it is skipped
        return f"fails without a transform: {first_line(error)}"
    return None


def run_case(case: Case, transform: str, vmap_kwargs: dict | None = None) -> Outcome:
    """Run ``case`` under one transform (``"V"``, ``"G"`` or ``"J"``) and classify it;
    ``vmap_kwargs`` (e.g. ``{"branches": "agree"}``) go to the vmap of V and J."""
    if case.needs and importlib.util.find_spec(case.needs) is None:
        return Outcome(case.name, transform, "skipped", f"needs {case.needs}")
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        failure = plain_failure(case)
        if failure is not None:  # xarray's own call fails here (a library it dispatches to)
            return Outcome(case.name, transform, "skipped", failure)
        if transform == "G":
            reason = grad_reason(case)
            if reason is not None:
                return Outcome(case.name, transform, "n/a", reason)
        try:
            CHECKS[transform](case, vmap_kwargs)
        except _Wrong as error:
            outcome = Outcome(case.name, transform, "wrong", str(error))
        except Exception as error:  # noqa: BLE001 - classified below
            kind = "refused" if is_refusal(error) else "crash"
            outcome = Outcome(case.name, transform, kind, first_line(error),
                              detail=traceback.format_exc())
        else:
            outcome = Outcome(case.name, transform, "ok")
    outcome.seconds = time.perf_counter() - start
    return outcome


def run_census(cases: list[Case] | None = None, transforms=TRANSFORMS,
               vmap_kwargs: dict | None = None) -> list[Outcome]:
    return [run_case(c, t, vmap_kwargs) for c in (CASES if cases is None else cases) for t in transforms]


def counts(outcomes: list[Outcome]) -> dict[str, dict[str, int]]:
    table = {t: {o: 0 for o in OUTCOMES} for t in TRANSFORMS}
    for o in outcomes:
        table[o.transform][o.outcome] += 1
    return table


def check_oracles() -> list[str]:
    """The cases whose plain-xarray loop itself fails (a broken case, not a finding)."""
    broken = []
    for case in CASES:
        if case.needs and importlib.util.find_spec(case.needs) is None:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                loop_vmap(case.f, DIM, *args_of(case))
        except Exception as error:  # noqa: BLE001
            broken.append(f"{case.name}: {first_line(error)}")
    return broken
