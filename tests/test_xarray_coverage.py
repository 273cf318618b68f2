"""xarray methods used inside a one-example function, under ``lf.vmap``.

Every case runs ``lf.vmap(f, dim="sample")(*args)`` and compares it with the
per-example for-loop (``helpers_coverage.loop_vmap``): values, dims order, coords,
name, attrs and dtype.  Each case runs with the mapped dim first, and last (2-D inputs) or
in the middle (3-D inputs) of every mapped argument.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

try:  # works with and without a tests/__init__.py
    from helpers_coverage import assert_same, loop_vmap, move_dim
except ImportError:  # pragma: no cover
    from tests.helpers_coverage import assert_same, loop_vmap, move_dim

DIM = "sample"
N = 4
T = np.array([0.0, 0.1, 0.3, 0.6, 1.0, 1.5])
XLAB = np.array(["a", "b", "c"])
Q = np.array([0, 1])


def _make_inputs():
    rng = np.random.default_rng(20261122)
    sample = xr.Variable((DIM,), [10, 20, 30, 40], attrs={"long_name": "example"})
    common = {
        DIM: sample,
        "label": ((DIM,), ["s0", "s1", "s2", "s3"]),
        "t": ("t", T, {"units": "s"}),
    }
    attrs = {"units": "m", "long_name": "signal"}

    def da2(data, name):
        return xr.DataArray(data, dims=(DIM, "t"), coords=common, name=name, attrs=dict(attrs))

    def da3(data, name):
        return xr.DataArray(
            data,
            dims=(DIM, "x", "t"),
            coords={**common, "x": XLAB},
            name=name,
            attrs=dict(attrs),
        )

    x = da2(rng.uniform(0.1, 1.0, (N, T.size)), "x")
    y = da2(rng.uniform(0.2, 1.2, (N, T.size)), "y")
    xs = da2(rng.uniform(-1.0, 1.0, (N, T.size)), "xs")  # signed
    xn_data = rng.uniform(0.1, 1.0, (N, T.size))
    xn_data[1, 2] = np.nan
    xn_data[3, 0] = np.nan
    xn_data[3, 4] = np.nan
    xn_data[2, 5] = np.nan
    xn = da2(xn_data, "xn")
    x3 = da3(rng.uniform(0.1, 1.0, (N, XLAB.size, T.size)), "x3")
    y3 = da3(rng.uniform(0.1, 1.0, (N, XLAB.size, T.size)), "y3")

    u = xr.DataArray(rng.uniform(0.5, 1.5, T.size), dims=("t",), coords={"t": common["t"]}, name="u")
    us = xr.DataArray(
        rng.uniform(-1.0, 1.0, T.size), dims=("t",), coords={"t": common["t"]}, name="us"
    )
    uq = xr.DataArray(rng.uniform(0.5, 1.5, Q.size), dims=("q",), coords={"q": Q}, name="uq")
    utq = xr.DataArray(
        rng.uniform(0.5, 1.5, (T.size, Q.size)),
        dims=("t", "q"),
        coords={"t": common["t"], "q": Q},
        name="utq",
        attrs={"units": "1"},
    )
    w = xr.DataArray(rng.uniform(0.5, 2.0, T.size), dims=("t",), coords={"t": common["t"]}, name="w")
    return dict(x=x, y=y, xs=xs, xn=xn, x3=x3, y3=y3, u=u, us=us, uq=uq, utq=utq, w=w)


INPUTS = _make_inputs()
THREE_D = {"x3", "y3"}

# (id, function of one example, names of the arguments)
CASES: list[tuple[str, object, tuple[str, ...]]] = []


def add(name, f, *args):
    CASES.append((name, f, args))


# ---------------------------------------------------------------- arithmetic
add("add_scalar", lambda a: a + 1.5, "x")
add("radd_scalar", lambda a: 2 + a, "x")
add("sub_scalar", lambda a: a - 0.25, "x")
add("rsub_scalar", lambda a: 2.0 - a, "x")
add("mul_scalar", lambda a: a * 3, "x")
add("rmul_scalar", lambda a: 0.5 * a, "x")
add("div_scalar", lambda a: a / 2.0, "x")
add("rdiv_scalar", lambda a: 1.0 / a, "x")
add("pow_scalar", lambda a: a**2, "x")
add("pow_frac", lambda a: a**0.5, "x")
add("rpow_scalar", lambda a: 2.0**a, "x")
add("neg", lambda a: -a, "x")
add("add_mapped", lambda a, b: a + b, "x", "y")
add("sub_mapped", lambda a, b: a - b, "x", "y")
add("mul_mapped", lambda a, b: a * b, "x", "y")
add("div_mapped", lambda a, b: a / b, "x", "y")
add("pow_mapped", lambda a, b: a**b, "x", "y")
add("add_unmapped_same_dims", lambda a, b: a + b, "x", "u")
add("unmapped_minus_mapped", lambda a, b: b - a, "x", "u")
add("mul_unmapped_other_dim", lambda a, b: a * b, "x", "uq")
add("add_unmapped_2d", lambda a, b: a + b, "x", "utq")
add("div_unmapped_2d_left", lambda a, b: b / a, "x", "utq")
add("3d_mul_unmapped", lambda a, b: a * b, "x3", "u")
add("3d_add_mapped_2d", lambda a, b: a + b, "x3", "y")
add("3d_mul_mapped_3d", lambda a, b: a * b - b, "x3", "y3")
add("chain", lambda a, b, c: (a * 2 + b) / (c + 1) - a**2, "x", "y", "u")
add("compare_gt", lambda a: a > 0.5, "x")
add("compare_mapped", lambda a, b: a <= b, "x", "y")
add("bool_and", lambda a, b: (a > 0.3) & (b < 0.9), "x", "y")

# ---------------------------------------------------------------- ufuncs
for _name, _uf, _src in [
    ("sin", np.sin, "xs"),
    ("cos", np.cos, "xs"),
    ("tan", np.tan, "xs"),
    ("exp", np.exp, "xs"),
    ("expm1", np.expm1, "xs"),
    ("log", np.log, "x"),
    ("log1p", np.log1p, "x"),
    ("log10", np.log10, "x"),
    ("sqrt", np.sqrt, "x"),
    ("square", np.square, "xs"),
    ("abs", np.abs, "xs"),
    ("absolute", np.absolute, "xs"),
    ("tanh", np.tanh, "xs"),
    ("sinh", np.sinh, "xs"),
    ("cosh", np.cosh, "xs"),
    ("arctan", np.arctan, "xs"),
    ("arcsin", np.arcsin, "xs"),
    ("sign", np.sign, "xs"),
    ("floor", np.floor, "xs"),
    ("reciprocal", np.reciprocal, "x"),
    ("isnan", np.isnan, "xn"),
    ("isfinite", np.isfinite, "xn"),
]:
    add(f"ufunc_{_name}", _uf, _src)
add("ufunc_abs_builtin", abs, "xs")
add("ufunc_maximum_scalar", lambda a: np.maximum(a, 0.0), "xs")
add("ufunc_minimum_mapped", lambda a, b: np.minimum(a, b), "x", "y")
add("ufunc_hypot", lambda a, b: np.hypot(a, b), "x", "y")
add("ufunc_arctan2_unmapped", lambda a, b: np.arctan2(a, b), "xs", "us")
add("ufunc_3d_exp", lambda a: np.exp(-a) * np.sin(a), "x3")

# ---------------------------------------------------------------- reductions
REDUCTIONS = ["sum", "mean", "std", "var", "prod", "max", "min", "median"]
for _r in REDUCTIONS:
    add(f"{_r}_t", lambda a, _r=_r: getattr(a, _r)("t"), "x")
    add(f"{_r}_all", lambda a, _r=_r: getattr(a, _r)(), "x")
    for _skip in (True, False):
        add(f"{_r}_t_nan_skipna{_skip}", lambda a, _r=_r, _s=_skip: getattr(a, _r)("t", skipna=_s), "xn")
        add(f"{_r}_all_nan_skipna{_skip}", lambda a, _r=_r, _s=_skip: getattr(a, _r)(skipna=_s), "xn")
    add(f"{_r}_nan_default", lambda a, _r=_r: getattr(a, _r)("t"), "xn")
    add(f"{_r}_3d_x", lambda a, _r=_r: getattr(a, _r)("x"), "x3")
    add(f"{_r}_3d_xt", lambda a, _r=_r: getattr(a, _r)(["x", "t"]), "x3")
    add(f"{_r}_3d_all", lambda a, _r=_r: getattr(a, _r)(), "x3")
add("std_ddof1", lambda a: a.std("t", ddof=1), "x")
add("var_ddof1_nan", lambda a: a.var("t", ddof=1), "xn")
add("sum_min_count", lambda a: a.sum("t", min_count=6), "xn")
add("sum_keepdims", lambda a: a.sum("t", keepdims=True), "x")
add("mean_keep_attrs", lambda a: a.mean("t", keep_attrs=True), "x")
add("np_sum_function", lambda a: np.sum(a), "x")
for _c in ["cumsum", "cumprod"]:
    add(f"{_c}_t", lambda a, _c=_c: getattr(a, _c)("t"), "x")
    for _skip in (True, False):
        add(f"{_c}_nan_skipna{_skip}", lambda a, _c=_c, _s=_skip: getattr(a, _c)("t", skipna=_s), "xn")
    add(f"{_c}_nan_default", lambda a, _c=_c: getattr(a, _c)("t"), "xn")
    add(f"{_c}_3d_x", lambda a, _c=_c: getattr(a, _c)("x"), "x3")
    add(f"{_c}_3d_all", lambda a, _c=_c: getattr(a, _c)(), "x3")

# ---------------------------------------------------------------- where / clip
add("xr_where_scalar", lambda a: xr.where(a > 0.5, a, 0.0), "x")
add("xr_where_mapped_both", lambda a, b: xr.where(a > b, a, b), "x", "y")
add("xr_where_unmapped_other", lambda a, b: xr.where(a > 0.5, a, b), "x", "u")
add("xr_where_unmapped_cond", lambda a, b: xr.where(b > 0, a, -a), "x", "us")
add("xr_where_3d_keep_attrs", lambda a: xr.where(a < 0.5, a * 2, a, keep_attrs=True), "x3")
add("da_where_nan", lambda a: a.where(a > 0.5), "x")
add("da_where_other", lambda a: a.where(a > 0.5, other=-1.0), "x")
add("da_where_mapped_other", lambda a, b: a.where(a > b, b), "x", "y")
add("da_where_unmapped_cond", lambda a, b: a.where(b > 0), "x", "us")
add("da_where_3d", lambda a: a.where(a.mean("t") > 0.5, 0.0), "x3")
add("clip_both", lambda a: a.clip(0.3, 0.8), "x")
add("clip_min", lambda a: a.clip(min=0.4), "x")
add("clip_max_unmapped", lambda a, b: a.clip(max=b), "x", "u")
add("clip_mapped_bounds", lambda a, b: a.clip(b * 0.5, b), "x", "y")

# ---------------------------------------------------------------- indexing
add("isel_int", lambda a: a.isel(t=0), "x")
add("isel_neg", lambda a: a.isel(t=-1), "x")
add("isel_slice", lambda a: a.isel(t=slice(1, 4)), "x")
add("isel_list", lambda a: a.isel(t=[0, 2, 3]), "x")
add("isel_3d", lambda a: a.isel(x=1, t=slice(None, None, 2)), "x3")
add("isel_3d_dataarray_indexer", lambda a: a.isel(t=xr.DataArray([4, 1], dims="k")), "x3")
add("sel_label", lambda a: a.sel(t=T[2]), "x")
add("sel_slice", lambda a: a.sel(t=slice(0.1, 1.0)), "x")
add("sel_list", lambda a: a.sel(t=[T[1], T[4]]), "x")
add("sel_nearest", lambda a: a.sel(t=0.33, method="nearest"), "x")
add("sel_3d_string", lambda a: a.sel(x="b"), "x3")
add("sel_3d_two", lambda a: a.sel(x=["c", "a"], t=slice(0.3, None)), "x3")
add("loc", lambda a: a.loc[0.1:0.6], "x")
add("getitem_0", lambda a: a[0], "x")
add("getitem_slice", lambda a: a[1:3], "x")
add("getitem_reverse", lambda a: a[::-1], "x")
add("getitem_3d_0", lambda a: a[0], "x3")
add("getitem_3d_slice", lambda a: a[1:3], "x3")
add("getitem_3d_pair", lambda a: a[0, 1:3], "x3")
add("getitem_3d_ellipsis", lambda a: a[..., -1], "x3")
add("getitem_list", lambda a: a[[0, 2]], "x")

# ---------------------------------------------------------------- shape
add("transpose_3d", lambda a: a.transpose("t", "x"), "x3")
add("transpose_T", lambda a: a.T, "x3")
add("transpose_ellipsis", lambda a: a.transpose("t", ...), "x3")
add("transpose_then_add", lambda a, b: a.transpose("t", "x") + b, "x3", "y")
add("expand_dims_name", lambda a: a.expand_dims("k"), "x")
add("expand_dims_size", lambda a: a.expand_dims(k=3), "x")
add("expand_dims_coords_axis", lambda a: a.expand_dims({"k": [1, 2]}, axis=1), "x")
add("expand_dims_last", lambda a: a.expand_dims("k", axis=-1), "x3")
add("broadcast_like_unmapped", lambda a, b: a.broadcast_like(b), "x", "utq")
add("unmapped_broadcast_like_mapped", lambda a, b: b.broadcast_like(a), "x", "uq")
add("xr_broadcast", lambda a, b: xr.broadcast(a, b)[0] * 2, "x", "uq")
add("stack", lambda a: a.stack(z=("x", "t")), "x3")
add("stack_reversed_mean", lambda a: a.stack(z=("t", "x")).mean("z"), "x3")
add("stack_new_dim", lambda a: a.expand_dims(k=2).stack(z=("k", "t")), "x")
add("stack_unstack", lambda a: a.stack(z=("x", "t")).unstack("z"), "x3")
add("roll", lambda a: a.roll(t=2), "x")
add("roll_coords", lambda a: a.roll(t=-1, roll_coords=True), "x")
add("roll_3d", lambda a: a.roll(x=1, t=2), "x3")
add("shift", lambda a: a.shift(t=1), "x")
add("shift_neg", lambda a: a.shift(t=-2), "x")
add("shift_fill", lambda a: a.shift(t=2, fill_value=0.0), "x")
add("shift_3d", lambda a: a.shift(x=1), "x3")
add("diff", lambda a: a.diff("t"), "x")
add("diff_n2", lambda a: a.diff("t", n=2), "x")
add("diff_lower", lambda a: a.diff("t", label="lower"), "x")
add("diff_3d", lambda a: a.diff("x"), "x3")
add("pad", lambda a: a.pad(t=(1, 2)), "x")
add("pad_constant", lambda a: a.pad(t=1, mode="constant", constant_values=0.0), "x")
add("pad_edge", lambda a: a.pad(t=(2, 1), mode="edge"), "x")
add("pad_reflect", lambda a: a.pad(t=2, mode="reflect"), "x")
add("pad_3d_wrap", lambda a: a.pad(x=1, mode="wrap"), "x3")

# ---------------------------------------------------------------- combine
add("dot_mapped", lambda a, b: xr.dot(a, b, dim="t"), "x", "y")
add("dot_unmapped", lambda a, b: xr.dot(a, b, dim="t"), "x", "u")
add("dot_3d_2d", lambda a, b: xr.dot(a, b, dim="t"), "x3", "y")
add("dot_3d_x", lambda a: xr.dot(a, a, dim="x"), "x3")
add("dot_all_common", lambda a, b: xr.dot(a, b), "x", "y")
add("dot_outer", lambda a, b: xr.dot(a, b), "x", "uq")
add("dot_method", lambda a, b: a.dot(b, dim="t"), "x", "y")
add("concat_existing_dim", lambda a, b: xr.concat([a, b], dim="t"), "x", "y")
add("concat_new_dim", lambda a: xr.concat([a, 2 * a], dim="k"), "x")
add("concat_with_unmapped", lambda a, b: xr.concat([a, b], dim="k"), "x", "u")
add("concat_unmapped_first", lambda a, b: xr.concat([b, a], dim="t"), "x", "u")
add("concat_3d", lambda a, b: xr.concat([a, b], dim="x"), "x3", "y3")

# ---------------------------------------------------------------- windows
add("rolling_mean", lambda a: a.rolling(t=3).mean(), "x")
add("rolling_sum_center", lambda a: a.rolling(t=3, center=True).sum(), "x")
add("rolling_max_minp", lambda a: a.rolling(t=2, min_periods=1).max(), "x")
add("rolling_mean_nan", lambda a: a.rolling(t=3, min_periods=2).mean(), "xn")
add("rolling_3d", lambda a: a.rolling(t=3).mean(), "x3")
add("coarsen_mean", lambda a: a.coarsen(t=2).mean(), "x")
add("coarsen_sum", lambda a: a.coarsen(t=3).sum(), "x")
add("coarsen_trim_max", lambda a: a.coarsen(t=4, boundary="trim").max(), "x")
add("coarsen_3d", lambda a: a.coarsen(t=2).mean(), "x3")
add("weighted_mean", lambda a, b: a.weighted(b).mean("t"), "x", "w")
add("weighted_sum", lambda a, b: a.weighted(b).sum("t"), "x", "w")
add("weighted_std", lambda a, b: a.weighted(b).std("t"), "x", "w")
add("weighted_mean_nan", lambda a, b: a.weighted(b).mean("t"), "xn", "w")
add("weighted_3d", lambda a, b: a.weighted(b).mean("t"), "x3", "w")

# ---------------------------------------------------------------- misc
add("fillna_scalar", lambda a: a.fillna(0.0), "xn")
add("fillna_mapped", lambda a, b: a.fillna(b), "xn", "y")
add("fillna_unmapped", lambda a, b: a.fillna(b), "xn", "u")
add("differentiate", lambda a: a.differentiate("t"), "x")
add("differentiate_edge2", lambda a: a.differentiate("t", edge_order=2), "x3")
add("integrate", lambda a: a.integrate("t"), "x")
add("astype_float32", lambda a: a.astype(np.float32), "x")
add("astype_int", lambda a: (a * 10).astype(np.int64), "x")
add("astype_bool_to_float", lambda a: (a > 0.5).astype(float), "x")
add("round", lambda a: a.round(), "xs")
add("round_decimals", lambda a: (a * 100).round(1), "x")
add("np_round", lambda a: np.round(a * 10, 2), "x")
add("apply_ufunc_elementwise", lambda a: xr.apply_ufunc(np.sin, a), "x")
add(
    "apply_ufunc_core_dim",
    lambda a: xr.apply_ufunc(lambda v: np.sum(v, axis=-1), a, input_core_dims=[["t"]]),
    "x",
)
add(
    "apply_ufunc_two_core",
    lambda a, b: xr.apply_ufunc(
        lambda v, w: np.sum(v * w, axis=-1), a, b, input_core_dims=[["t"], ["t"]]
    ),
    "x",
    "y",
)
add(
    "apply_ufunc_unmapped_core",
    lambda a, b: xr.apply_ufunc(
        lambda v, w: np.sum(v * w, axis=-1), a, b, input_core_dims=[["t"], ["t"]]
    ),
    "x3",
    "u",
)
add(
    "apply_ufunc_output_core",
    lambda a: xr.apply_ufunc(
        lambda v: np.cumsum(v, axis=-1),
        a,
        input_core_dims=[["x"]],
        output_core_dims=[["x"]],
        keep_attrs=True,
    ),
    "x3",
)
add("to_dataset_roundtrip", lambda a: a.to_dataset(name="v")["v"] + 1, "x")
add("to_dataset_arith", lambda a: (a.to_dataset(name="v") * 2).v, "x")
add("to_dataset_output", lambda a: a.to_dataset(name="v").assign(w=lambda d: d.v**2), "x")
add("to_dataset_split_dim", lambda a: a.to_dataset(dim="x"), "x3")
add(
    "to_dataarray",
    lambda a, b: xr.Dataset({"p": a, "q": b}).to_dataarray("var"),
    "x",
    "y",
)
add("to_dataset_reduce", lambda a: a.to_dataset(name="v").mean("t").v, "x3")

# ---------------------------------------------------------------- beyond the required list
# Other everyday xarray methods (ARCHITECTURE.md: argmax, quantile, *_like, copy, ...),
# run by a separate test function so that they can be told apart from the core list.
N_CORE_CASES = len(CASES)
add("zeros_like_plus", lambda a: xr.zeros_like(a) + a * 2, "x")
add("ones_like_times", lambda a: xr.ones_like(a) * a, "x")
add("full_like", lambda a: xr.full_like(a, 2.0) - a, "x")
add("copy", lambda a: a.copy() * 3, "x")
add("argmax", lambda a: a.argmax("t"), "x")
add("argmin_3d", lambda a: a.argmin("x"), "x3")
add("quantile", lambda a: a.quantile(0.3, dim="t"), "x")
add("quantile_list", lambda a: a.quantile([0.25, 0.75], dim="t"), "x3")
add("count", lambda a: a.count("t"), "xn")
add("isnull", lambda a: a.isnull(), "xn")
add("notnull_any", lambda a: a.notnull().all("t"), "xn")
add("any", lambda a: (a > 0.8).any("t"), "x")
add("reduce_custom", lambda a: a.reduce(np.nansum, dim="t"), "xn")
add("rename_dim", lambda a: a.rename(t="time") * 2, "x")
add("assign_coords", lambda a: a.assign_coords(t2=a.t * 2) + 1, "x")
add("squeeze", lambda a: a.isel(t=[2]).squeeze("t"), "x")
add("reindex_fill", lambda a: a.reindex(t=[0.1, 0.2, 1.5]), "x")
add("sortby_coord", lambda a: a.sortby("x", ascending=False), "x3")
add("corr", lambda a, b: xr.corr(a, b, dim="t"), "x", "y")
add("cov", lambda a, b: xr.cov(a, b, dim="t"), "x", "y")
add("groupby_mean", lambda a: a.assign_coords(g=("x", [0, 1, 0])).groupby("g").mean(), "x3")
add("cumulative_integrate", lambda a: a.cumulative_integrate("t"), "x")
add("einsum", lambda a, b: np.einsum("i,i->", a.data, b.data), "x", "y")
add("dot_then_where_3d", lambda a, b: xr.where(xr.dot(a, b, dim="t") > 1, a.sum("t"), 0), "x3", "y")


def _params(cases):
    out = []
    for name, f, argnames in cases:
        positions = [0, 1] if THREE_D.intersection(argnames) else [0, -1]
        for pos in positions:
            out.append(pytest.param(f, argnames, pos, id=f"{name}-pos{pos}"))
    return out


def _check(f, argnames, pos):
    args = [move_dim(INPUTS[a], DIM, pos) for a in argnames]
    expected = loop_vmap(f, DIM, *args)
    result = lf.vmap(f, dim=DIM)(*args)
    assert_same(result, expected)


@pytest.mark.parametrize("f, argnames, pos", _params(CASES[:N_CORE_CASES]))
def test_vmap_matches_loop(f, argnames, pos):
    _check(f, argnames, pos)


@pytest.mark.parametrize("f, argnames, pos", _params(CASES[N_CORE_CASES:]))
def test_vmap_matches_loop_more_methods(f, argnames, pos):
    _check(f, argnames, pos)


def test_inputs_are_untouched():
    """Running every case must not modify the shared inputs (no hidden in-place)."""
    before = {k: v.copy(deep=True) for k, v in INPUTS.items()}
    for _name, f, argnames in CASES[:40]:
        lf.vmap(f, dim=DIM)(*[INPUTS[a] for a in argnames])
    for k, v in before.items():
        xr.testing.assert_identical(INPUTS[k], v)


def test_case_ids_unique():
    names = [c[0] for c in CASES]
    assert len(names) == len(set(names))
