"""xarray methods under automatic differentiation, checked against finite differences.

For every case ``f`` (a function of one DataArray ``x`` with dims ``("x", "t")`` and
coords, built from one xarray method):

* ``test_grad``: ``lf.grad(s)(x)`` equals central finite differences of ``s``,
  element by element (each element moved by +-1e-6), and is a DataArray with ``x``'s
  dims, coords, name and dtype.  ``s(x) = sin(f(x)).sum()`` (smooth, non-linear), or for
  the cases whose output holds NaNs (shift, diff, rolling, where without ``other``)
  ``(f(x) * W).sum()`` with fixed random weights ``W``: ``.sum()`` skips those NaNs and
  so do the finite differences.  Inputs with NaNs (``skipna=True`` reductions, fillna)
  get a zero derivative there.
* ``test_jvp``: ``lf.jvp(f, (x,), (t,))`` for a random DataArray direction ``t``
  equals ``(f(x + h t) - f(x - h t)) / 2h`` as a DataArray (dims, coords, name, dtype);
  its primal output is identical to ``f(x)``.  Where ``f``'s output is NaN the
  finite difference is NaN and the tangent must be NaN or 0 (the outputs are constant
  NaNs there; torch.func and JAX give 0).
* for a subset (``JAC_CASES``): ``lf.vmap(lf.grad(s), dim="sample")`` over a batch
  equals the for-loop of ``lf.grad(s)`` (``helpers_coverage.loop_vmap``) and finite
  differences for one example; ``lf.jacrev(f)(x)`` and ``lf.jacfwd(f)(x)`` both equal
  the finite-difference Jacobian, with the output's dims followed by ``x``'s (``_wrt``
  appended on a clash with an output dim or coordinate name).

The oracles are finite differences computed with plain xarray (never labeled_func)
and, for vmap, the per-example loop.  ``Case.grad_xfail`` / ``Case.jvp_xfail`` mark a
known implementation bug (strict xfail); none at present.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

try:  # works with and without a tests/__init__.py
    from helpers_coverage import assert_same, loop_vmap
except ImportError:  # pragma: no cover
    from tests.helpers_coverage import assert_same, loop_vmap

H = 1e-6
H32 = 2.0**-12  # float32 inputs: a step that float32 represents exactly around 1
T = np.array([0.0, 0.1, 0.3, 0.6, 1.0, 1.5])  # non-uniform: differentiate uses the spacing
XLAB = np.array(["a", "b", "c"])
Q = np.array([10, 20])
BATCH = 3


# --------------------------------------------------------------------------- #
# inputs
# --------------------------------------------------------------------------- #


def _make_inputs():
    rng = np.random.default_rng(20261122)
    coords = {"x": XLAB, "t": ("t", T), "lon": ("x", [1.5, 2.5, 3.5])}

    def da(data, name="field"):
        return xr.DataArray(data, dims=("x", "t"), coords=coords, name=name)

    shape = (XLAB.size, T.size)
    x = da(rng.uniform(0.5, 1.5, shape))  # positive: log, sqrt, ** are smooth
    xs_data = rng.uniform(0.2, 1.0, shape) * rng.choice([-1.0, 1.0], shape)  # signed, |x| >= 0.2
    xs = da(xs_data)
    xn_data = rng.uniform(0.5, 1.5, shape)
    xn_data[0, 2] = np.nan
    xn_data[1, 0] = np.nan
    xn_data[2, 4] = np.nan
    xn_data[2, 5] = np.nan
    xn = da(xn_data)
    x32 = da(rng.uniform(0.5, 1.5, shape).astype(np.float32))
    tangent = {k: xr.zeros_like(v, dtype=np.float64) + rng.normal(size=shape) for k, v in
               dict(x=x, xs=xs, xn=xn).items()}
    # float32: multiples of 1/8, so that x +- H32 * t is exact in float32
    tangent["x32"] = xr.zeros_like(x32) + (rng.integers(-16, 17, shape) / 8).astype(np.float32)
    # batches over "sample" (for the vmap tests), with coords along the batch dim
    batch = {
        k: xr.concat(
            [v * (1.0 + 0.1 * i) + 0.05 * i for i in range(BATCH)],
            dim=xr.Variable("sample", [100, 200, 300]),
        ).transpose("sample", ...)
        for k, v in dict(x=x, xs=xs, xn=xn).items()
    }
    # constants (not differentiated)
    y = da(rng.uniform(0.5, 1.5, shape), name="y")
    u = xr.DataArray(rng.uniform(0.5, 1.5, T.size), dims="t", coords={"t": T}, name="u")
    uq = xr.DataArray(rng.uniform(0.5, 1.5, Q.size), dims="q", coords={"q": Q}, name="uq")
    w = xr.DataArray(np.full(T.size, 0.7), dims="t", coords={"t": T}, name="w")
    target = xr.DataArray(
        np.zeros((XLAB.size, Q.size, T.size)),
        dims=("x", "q", "t"),
        coords={"x": XLAB, "q": Q, "t": T},
    )
    return (
        dict(x=x, xs=xs, xn=xn, x32=x32),
        tangent,
        batch,
        dict(y=y, u=u, uq=uq, w=w, target=target),
    )


INPUTS, TANGENTS, BATCHES, C = _make_inputs()


# --------------------------------------------------------------------------- #
# cases
# --------------------------------------------------------------------------- #


@dataclass
class Case:
    name: str
    f: object
    arg: str = "x"  # key of INPUTS
    scal: str = "sin"  # "sin": sum(sin(f)); "linear": sum(f * W), W fixed random weights
    h: float = H
    rtol: float = 1e-6
    atol: float = 1e-8
    grad_xfail: str | None = None  # an implementation bug seen by test_grad
    jvp_xfail: str | None = None  # an implementation bug seen by test_jvp


CASES: list[Case] = []


def add(name, f, arg="x", **kw):
    CASES.append(Case(name, f, arg, **kw))


# ---------------------------------------------------------------- arithmetic
add("add_scalar", lambda a: a + 1.5)
add("radd_scalar", lambda a: 2.0 + a)
add("sub_scalar", lambda a: a - 0.25)
add("rsub_scalar", lambda a: 2.0 - a)
add("mul_scalar", lambda a: a * 3.0)
add("rmul_scalar", lambda a: 0.5 * a)
add("div_scalar", lambda a: a / 2.0)
add("rdiv_scalar", lambda a: 1.0 / a)
add("pow_scalar", lambda a: a**3)
add("pow_frac", lambda a: a**0.5)
add("rpow_scalar", lambda a: 2.0**a)
add("neg", lambda a: -a)
add("add_da", lambda a: a + C["y"])
add("sub_da_left", lambda a: C["y"] - a)
add("mul_da", lambda a: a * C["y"])
add("div_da", lambda a: a / C["y"])
add("rdiv_da", lambda a: C["y"] / a)
add("pow_da", lambda a: a ** C["y"])
add("rpow_da", lambda a: C["y"] ** a)
add("self_product", lambda a: a * a - a / (a + 1.0))
add("broadcast_1d_same_dim", lambda a: a * C["u"] + C["u"])
add("broadcast_other_dim", lambda a: a * C["uq"])  # -> (x, t, q)
add("broadcast_other_dim_left", lambda a: C["uq"] / a)  # -> (q, x, t)

# ---------------------------------------------------------------- ufuncs
add("sin", np.sin)
add("exp", np.exp)
add("log", np.log)
add("sqrt", np.sqrt)
add("abs", np.abs, "xs")
add("tanh", np.tanh, "xs")
add("sin_of_product", lambda a: np.sin(a * C["y"]) * np.exp(-a))

# ---------------------------------------------------------------- reductions
for red in ("sum", "mean", "std", "var", "prod", "max", "min", "median"):
    add(f"{red}_t_skipna", lambda a, r=red: getattr(a, r)("t", skipna=True), "xn")
    add(f"{red}_t_noskip", lambda a, r=red: getattr(a, r)("t", skipna=False))
for red in ("cumsum", "cumprod"):
    add(f"{red}_t_skipna", lambda a, r=red: getattr(a, r)("t", skipna=True), "xn")
    add(f"{red}_t_noskip", lambda a, r=red: getattr(a, r)("t", skipna=False))
add("sum_all_skipna", lambda a: a.sum(), "xn")
add("mean_all_noskip", lambda a: a.mean(skipna=False))
add("std_x_ddof1", lambda a: a.std("x", ddof=1))
add("max_x", lambda a: a.max("x"), "xs")
add("cumsum_x", lambda a: a.cumsum("x"))

# ---------------------------------------------------------------- where / clip
add("xr_where", lambda a: xr.where(a > 1.0, a**2, 3.0 * a))
add("xr_where_scalar_other", lambda a: xr.where(a < 0.9, a, 0.0))
add("da_where_nan", lambda a: a.where(a > 1.0), scal="linear")
add("da_where_other", lambda a: a.where(a > 1.0, -2.0 * a))
add("clip", lambda a: a.clip(0.8, 1.2))
add("clip_min_only", lambda a: a.clip(min=0.9))

# ---------------------------------------------------------------- indexing
add("isel_list", lambda a: a.isel(t=[0, 2, 4]))
add("isel_slice", lambda a: a.isel(t=slice(1, 4)))
add("isel_scalar", lambda a: a.isel(x=1))
add("isel_repeat", lambda a: a.isel(t=[1, 1, 3]))
add("sel_labels", lambda a: a.sel(t=[0.1, 0.6]))
add("sel_scalar", lambda a: a.sel(x="b"))
add("sel_slice", lambda a: a.sel(t=slice(0.1, 0.6)))
add("getitem_slices", lambda a: a[1:, ::2])
add("getitem_int", lambda a: a[0])
add("getitem_list", lambda a: a[:, [0, 3, 3]])
add("loc", lambda a: a.loc[["c", "a"], 0.3:1.0])
add("transpose", lambda a: a.transpose("t", "x") * C["u"])
add("T_property", lambda a: a.T)

# ---------------------------------------------------------------- combine
add("xr_dot_const", lambda a: xr.dot(a, C["u"], dim="t"))
add("xr_dot_self", lambda a: xr.dot(a, a, dim="t"))
add("xr_dot_all", lambda a: xr.dot(a, C["y"]))
add("concat_existing_dim", lambda a: xr.concat([a, a**2], dim="t"))
add("concat_new_dim", lambda a: xr.concat([a, np.sin(a), C["y"]], dim="k"))
add("expand_dims", lambda a: a.expand_dims(k=2) * xr.DataArray([1.0, 2.0], dims="k"))
add("broadcast_like", lambda a: a.broadcast_like(C["target"]) * C["uq"])
add("stack", lambda a: a.stack(z=("x", "t")))
add("stack_unstack", lambda a: (a.stack(z=("x", "t")) * 2.0).unstack("z"))

# ---------------------------------------------------------------- shifting, windows
add("roll", lambda a: a.roll(t=2) * a)
add("roll_coords", lambda a: a.roll(t=-1, roll_coords=True))
add("shift", lambda a: 2.0 * a.shift(t=1) - a.shift(t=2) ** 2, scal="linear")
add("shift_sin", lambda a: a.shift(t=-1) * 2.0)
add("shift_fill", lambda a: a.shift(t=-2, fill_value=0.5))
add("diff", lambda a: a.diff("t"), scal="linear")
add("diff_n2", lambda a: a.diff("t", n=2) * a.isel(t=slice(2, None)))
add("rolling_mean", lambda a: a.rolling(t=3).mean(), scal="linear")
add("rolling_mean_center", lambda a: a.rolling(t=3, center=True, min_periods=1).mean())
add("rolling_sum", lambda a: a.rolling(t=2).sum(), scal="linear")
add("coarsen_mean", lambda a: a.coarsen(t=2).mean())
add("coarsen_sum_trim", lambda a: a.coarsen(t=4, boundary="trim").sum())
add("weighted_mean", lambda a: a.weighted(C["w"]).mean("t"))
add("weighted_sum", lambda a: a.weighted(C["w"]).sum("t"))

# ---------------------------------------------------------------- misc
add("fillna_scalar", lambda a: a.fillna(0.5), "xn")
add("fillna_da", lambda a: a.fillna(C["y"]), "xn")
add("differentiate", lambda a: a.differentiate("t"))
add("differentiate_2nd_order", lambda a: a.differentiate("t", edge_order=2))
add("pad_constant", lambda a: a.pad(t=(1, 2), mode="constant", constant_values=0.25))
add("pad_edge", lambda a: a.pad(t=1, mode="edge"))
add("astype_f32_to_f64", lambda a: a.astype(np.float64) ** 2, "x32", h=H32, rtol=1e-5, atol=1e-6)
add("astype_f64_to_f64", lambda a: a.astype(np.float64) ** 2)
add("round", lambda a: a.round())
add("round_decimals_times_x", lambda a: a.round(1) * a)
add(
    "apply_ufunc_core_dim_same",
    lambda a: xr.apply_ufunc(
        lambda v: np.sin(v) * v.sum(axis=-1, keepdims=True),
        a,
        input_core_dims=[["t"]],
        output_core_dims=[["t"]],
    ),
)
add(
    "apply_ufunc_core_dim_reduce",
    lambda a: xr.apply_ufunc(
        lambda v: (v**2).mean(axis=-1), a, input_core_dims=[["t"]]
    ),
)
add(
    "apply_ufunc_two_args",
    lambda a: xr.apply_ufunc(
        lambda v, w: (v * w).sum(axis=-1),
        a,
        C["u"],
        input_core_dims=[["t"], ["t"]],
    ),
)
add("to_dataset_round_trip", lambda a: (a.to_dataset(name="v") * 2.0)["v"])
add("to_dataset_to_dataarray", lambda a: np.exp(a).to_dataset(name="v").to_dataarray("var"))
add("to_dataset_dim", lambda a: a.to_dataset(dim="x")["b"] * a.sel(x="a"))

# ------------------------------------------------- NaN/inf on the unselected branch
# The (co)tangent of ``where`` must select, not multiply by a 0/1 indicator: a NaN on
# the branch that is not taken (0 * cos(NaN) after sin of a masked NaN; the tangent of
# sqrt at a < 0 in the double-where guard) must give 0, as finite differences do.
# (Multiplying was a bug, fixed in kernels/elementwise.py by commit 57c1863.)
add("da_where_nan_then_sin", lambda a: a.where(a > 1.0))
add("rolling_mean_then_sin", lambda a: a.rolling(t=3).mean())
add("rolling_sum_then_sin", lambda a: a.rolling(t=2).sum())


def _sqrt_guard(a):
    with np.errstate(invalid="ignore"):
        return xr.where(a > 0, np.sqrt(a), 0.0)


add("xr_where_sqrt_guard", _sqrt_guard, "xs")

# cases that also run the vmap-of-grad and the Jacobian tests
JAC_CASES = {
    "broadcast_other_dim",
    "mean_t_skipna",
    "cumprod_t_noskip",
    "xr_where",
    "xr_dot_self",
    "rolling_mean_center",
    "differentiate",
    "stack",
}

_names = [c.name for c in CASES]
assert len(_names) == len(set(_names)), "duplicate case ids"
assert JAC_CASES <= set(_names)
BY_NAME = {c.name: c for c in CASES}


def _params(cases, xfail_attr=None):
    out = []
    for c in cases:
        reason = getattr(c, xfail_attr) if xfail_attr else None
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        out.append(pytest.param(c, id=c.name, marks=marks))
    return out


# --------------------------------------------------------------------------- #
# oracles (plain xarray / NumPy)
# --------------------------------------------------------------------------- #


def scalarise(case, x):
    """``s(x) = sum(sin(f(x)))`` (NaNs skipped), or for NaN-producing cases
    ``sum(f(x) * W)`` with fixed random weights ``W`` laid out like ``f(x)``: the
    derivative of sin at a NaN output is NaN, and 0 * NaN is NaN in any framework."""
    if case.scal == "sin":
        return lambda a: np.sin(case.f(a)).sum()
    out = case.f(x)
    seed = sum(map(ord, case.name))
    w = xr.zeros_like(out, dtype=np.float64) + np.random.default_rng(seed).normal(size=out.shape)
    w = w.fillna(0.0)
    return lambda a: (case.f(a) * w).sum()


def _perturbed(x, flat_index, step):
    """``x`` with one element moved by ``step`` in x's own dtype; also the realised step."""
    data = x.values.copy()
    view = data.reshape(-1)
    old = view[flat_index]
    view[flat_index] = old + step
    new = view[flat_index]
    return x.copy(data=data), float(np.float64(new) - np.float64(old))


def fd_gradient(s, x, h):
    """Central differences of the scalar ``s`` w.r.t. every element of ``x`` (float64).

    The denominator is the realised step (``x`` may be float32)."""
    grad = np.zeros(x.size, dtype=np.float64)
    for i in range(x.size):
        xp, dp = _perturbed(x, i, h)
        xm, dm = _perturbed(x, i, -h)
        if not np.isfinite(x.values.reshape(-1)[i]):
            # a NaN input stays NaN: a skipna scalarisation does not see it
            assert float(s(xp)) == float(s(xm))
            continue
        grad[i] = (float(s(xp)) - float(s(xm))) / (dp - dm)
    return grad.reshape(x.shape)


def fd_directional(f, x, t, h):
    """(f(x + h t) - f(x - h t)) / 2h as a DataArray (NaN where f is NaN)."""
    xp = x + h * t
    xm = x - h * t
    return (f(xp).astype(np.float64) - f(xm).astype(np.float64)) / (2 * h)


def fd_jacobian_values(f, x, h):
    """Array of shape out.shape + x.shape, in f(x)'s dim order."""
    out = f(x)
    jac = np.zeros(out.shape + x.shape)
    jv = jac.reshape(out.shape + (x.size,))
    for i in range(x.size):
        xp, dp = _perturbed(x, i, h)
        xm, dm = _perturbed(x, i, -h)
        if not np.isfinite(x.values.reshape(-1)[i]):
            # a NaN input stays NaN: a skipna method does not depend on it
            np.testing.assert_array_equal(f(xp).values, f(xm).values)
            continue
        jv[..., i] = (f(xp).transpose(*out.dims).values - f(xm).transpose(*out.dims).values) / (dp - dm)
    return jac


def expected_jac_dims(out, x_dims, suffix="_wrt"):
    """The output's dims, then x's; an x dim whose name the output already uses (as a
    dim or a coordinate name, e.g. a stacked level) gets ``suffix`` until unique."""
    out_dims = out.dims
    taken = set(out_dims) | set(out.coords)
    wrt = []
    for d in x_dims:
        name = d
        while name in taken:
            name = name + suffix
        taken.add(name)
        wrt.append(name)
    return tuple(out_dims) + tuple(wrt), dict(zip(x_dims, wrt))


def assert_coord_same(res, exp, name):
    """Coordinate ``name`` of ``res`` equals ``exp``'s: dims, values, attrs (a level of a
    stacked index may come back as a Variable rather than an IndexVariable)."""
    assert name in res.coords, f"coordinate {name!r} missing"
    a, b = res.coords[name].variable, exp.coords[name].variable
    assert a.identical(b), f"coordinate {name!r}: {a} != {b}"


def assert_like_x(g, x):
    """``g`` is a DataArray with ``x``'s dims, coords and name."""
    assert isinstance(g, xr.DataArray), f"expected a DataArray, got {type(g)}"
    assert g.dims == x.dims, f"dims {g.dims} != {x.dims}"
    assert g.name == x.name, f"name {g.name!r} != {x.name!r}"
    assert set(g.coords) == set(x.coords), f"coords {set(g.coords)} != {set(x.coords)}"
    for k in x.coords:
        assert_coord_same(g, x, k)
    assert isinstance(g.data, np.ndarray), f"gradient data is {type(g.data)}"
    assert g.dtype == x.dtype, f"dtype {g.dtype} != {x.dtype}"


# --------------------------------------------------------------------------- #
# tests
# --------------------------------------------------------------------------- #


def test_inputs_have_nans_and_no_kinks():
    """Guards for the oracles: NaN cases really hold NaNs; values are away from kinks."""
    assert int(INPUTS["xn"].isnull().sum()) == 4
    x = INPUTS["x"].values
    for kink in (0.8, 0.9, 1.0, 1.2):  # where/clip thresholds
        assert np.min(np.abs(x - kink)) > 1e-4
    assert np.min(np.abs(BATCHES["x"].values - 1.0)) > 1e-4  # xr_where under vmap
    assert np.min(np.abs(INPUTS["xs"].values)) > 0.1  # abs
    assert np.min(np.abs(x * 10 - np.floor(x * 10) - 0.5)) > 1e-4  # round(1)
    assert np.min(np.abs(x - 0.5)) > 1e-4 and np.min(np.abs(x - 1.5)) > 1e-4  # round()
    # max/min/median: distinct values along every reduced dim
    for key in ("x", "xn", "xs"):
        v = INPUTS[key].values
        for row in list(v) + list(v.T):
            r = row[np.isfinite(row)]
            assert np.min(np.abs(np.subtract.outer(r, r)) + np.eye(r.size)) > 1e-4


@pytest.mark.parametrize("case", _params(CASES, "grad_xfail"))
def test_grad(case):
    x = INPUTS[case.arg]
    s = scalarise(case, x)
    g = lf.grad(s)(x)
    assert_like_x(g, x)
    expected = fd_gradient(s, x, case.h)
    np.testing.assert_allclose(
        np.asarray(g.values, dtype=np.float64), expected, rtol=case.rtol, atol=case.atol
    )


@pytest.mark.parametrize("case", _params(CASES, "jvp_xfail"))
def test_jvp(case):
    x = INPUTS[case.arg]
    t = TANGENTS[case.arg]
    out, tangent = lf.jvp(case.f, (x,), (t,))
    primal = case.f(x)
    assert isinstance(out, xr.DataArray) and isinstance(tangent, xr.DataArray)
    # the same labels; the same values up to rounding (small integer powers are products)
    xr.testing.assert_allclose(out, primal, rtol=1e-14, atol=0)
    assert out.attrs == primal.attrs and out.name == primal.name and out.dtype == primal.dtype
    expected = fd_directional(case.f, x, t, case.h)
    assert tangent.dims == primal.dims, f"dims {tangent.dims} != {primal.dims}"
    assert set(tangent.coords) == set(primal.coords)
    for k in primal.coords:
        assert_coord_same(tangent, primal, k)
    assert tangent.name == primal.name
    assert tangent.dtype == primal.dtype
    fd = expected.transpose(*primal.dims).values
    tan = np.asarray(tangent.values, dtype=np.float64)
    nan_out = np.isnan(primal.values)
    # finite differences are NaN exactly where f's output is NaN
    np.testing.assert_array_equal(np.isnan(fd), nan_out)
    # there the tangent is NaN or 0 (a constant NaN has a zero derivative in torch.func
    # and JAX); everywhere else it is finite and matches
    assert np.all(np.isnan(tan[nan_out]) | (tan[nan_out] == 0)), tan[nan_out]
    assert np.all(np.isfinite(tan[~nan_out])), tan
    np.testing.assert_allclose(tan[~nan_out], fd[~nan_out], rtol=case.rtol, atol=case.atol * 10)


JAC_PARAMS = _params([BY_NAME[n] for n in sorted(JAC_CASES)])


@pytest.mark.parametrize("case", JAC_PARAMS)
def test_vmap_grad_matches_loop(case):
    xb = BATCHES[case.arg]
    s = scalarise(case, xb.isel(sample=0, drop=True))
    res = lf.vmap(lf.grad(s), dim="sample")(xb)
    exp = loop_vmap(lf.grad(s), "sample", xb)
    assert_same(res, exp, rtol=1e-10, atol=1e-12)
    # and the loop itself is right: one example against finite differences
    x1 = xb.isel(sample=1, drop=True)
    np.testing.assert_allclose(
        res.isel(sample=1).values, fd_gradient(s, x1, case.h), rtol=case.rtol, atol=case.atol
    )


@pytest.mark.parametrize("mode", ["jacrev", "jacfwd"])
@pytest.mark.parametrize("case", JAC_PARAMS)
def test_jacobian(case, mode):
    x = INPUTS[case.arg]
    out = case.f(x)
    jac = getattr(lf, mode)(case.f)(x)
    assert isinstance(jac, xr.DataArray), f"expected a DataArray, got {type(jac)}"
    dims, renamed = expected_jac_dims(out, x.dims)
    assert jac.dims == dims, f"dims {jac.dims} != {dims}"
    for k in out.coords:
        assert_coord_same(jac, out, k)
    for d, new in renamed.items():
        if d in x.coords:
            np.testing.assert_array_equal(jac[new].values, x[d].values)
    expected = fd_jacobian_values(case.f, x, case.h)
    np.testing.assert_allclose(
        jac.values, expected, rtol=case.rtol, atol=case.atol * 10, equal_nan=True
    )


# --------------------------------------------------------------------------- #
# a traced value in an output coordinate
# --------------------------------------------------------------------------- #

def _coord_from_value(a):
    return (a * 2.0).assign_coords(first=a.isel(t=0, drop=True))


def _coarsen_named_like_dim(a):
    # xarray's DataArrayCoarsen puts the reduced data into the coordinate that has the
    # DataArray's name: here the index coordinate "x"
    return a.rename("x").coarsen(t=2).mean()


@pytest.mark.parametrize("mode", ["jvp", "vjp", "jacfwd", "jacrev"])
@pytest.mark.parametrize("f", [_coord_from_value, _coarsen_named_like_dim], ids=["assign_coords", "coarsen_named_like_dim"])
def test_traced_value_in_output_coords(f, mode):
    """The coords of what a transform returns hold the primal values, in NumPy."""
    x = INPUTS["x"]
    primal = f(x)
    if mode == "jvp":
        results = lf.jvp(f, (x,), (TANGENTS["x"],))
    elif mode == "vjp":
        results = lf.vjp(f, x)[:1]
    else:
        results = (getattr(lf, mode)(f)(x),)
    for res in results:
        for k in primal.coords:
            assert isinstance(res.coords[k].data, np.ndarray), f"{k}: {type(res.coords[k].data)}"
            assert_coord_same(res, primal, k)
