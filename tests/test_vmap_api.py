"""The contract of ``lf.vmap`` (API.md, "vmap"), apart from its errors.

The oracle is always the per-example for-loop with ``xr.concat`` / ``np.stack``.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

try:  # works with and without a tests/__init__.py
    from helpers_coverage import assert_same, loop_vmap, stack_examples
except ImportError:  # pragma: no cover
    from tests.helpers_coverage import assert_same, loop_vmap, stack_examples

N = 4
T = np.array([0.0, 0.25, 0.5, 1.0, 2.0])
XLAB = ["a", "b", "c"]


def make_x(n=N, name="x", seed=0, dims=("sample", "t")):
    rng = np.random.default_rng(seed)
    da = xr.DataArray(
        rng.uniform(0.1, 1.0, (n, T.size)),
        dims=("sample", "t"),
        coords={
            "sample": xr.Variable(("sample",), np.arange(n) * 10 + 5, attrs={"long_name": "id"}),
            "label": ("sample", [f"s{i}" for i in range(n)]),
            "t": ("t", T, {"units": "s"}),
        },
        name=name,
        attrs={"units": "m", "note": name},
    )
    return da.transpose(*dims)


def make_x3(seed=1, dims=("sample", "x", "t")):
    rng = np.random.default_rng(seed)
    da = xr.DataArray(
        rng.uniform(0.1, 1.0, (N, len(XLAB), T.size)),
        dims=("sample", "x", "t"),
        coords={"sample": np.arange(N) * 10 + 5, "x": XLAB, "t": T},
        name="x3",
        attrs={"units": "K"},
    )
    return da.transpose(*dims)


def make_grid(dims=("lat", "lon", "t"), seed=2):
    rng = np.random.default_rng(seed)
    da = xr.DataArray(
        rng.uniform(0.1, 1.0, (3, 2, T.size)),
        dims=("lat", "lon", "t"),
        coords={"lat": [-10.0, 0.0, 10.0], "lon": [100.0, 110.0], "t": T},
        name="grid",
        attrs={"units": "mm"},
    )
    return da.transpose(*dims)


def make_u(seed=3, name="u"):
    rng = np.random.default_rng(seed)
    return xr.DataArray(rng.uniform(0.5, 1.5, T.size), dims=("t",), coords={"t": T}, name=name)


# --------------------------------------------------------------------------- dim


def test_dim_single_name_matches_loop():
    x = make_x()

    def f(a):
        return np.sin(a).cumsum("t") * a.sum() + a.mean("t")

    assert_same(lf.vmap(f, dim="sample")(x), loop_vmap(f, "sample", x))


def test_dim_positional_argument():
    x = make_x()

    def f(a):
        return a * 2 - a.max()

    assert_same(lf.vmap(f, "sample")(x), loop_vmap(f, "sample", x))


def test_dim_maps_every_argument_that_has_it_and_shares_the_rest():
    x, y, u = make_x(), make_x(name="y", seed=5), make_u()
    arr = np.linspace(1.0, 2.0, T.size)

    def f(a, b, c, d):
        return (a * b + c) * d

    res = lf.vmap(f, dim="sample")(x, y, u, arr)
    assert_same(res, loop_vmap(f, "sample", x, y, u, arr))


def test_keyword_arguments_are_mapped_too():
    x, y = make_x(), make_x(name="y", seed=5)

    def f(a, b=None):
        return a - b.mean("t")

    res = lf.vmap(f, dim="sample")(x, b=y)
    assert_same(res, loop_vmap(f, "sample", x, b=y))


@pytest.mark.parametrize(
    "order", [("lat", "lon", "t"), ("t", "lon", "lat"), ("lon", "t", "lat")]
)
def test_dim_two_names_is_nested_loop(order):
    g = make_grid(order)

    def f(a):
        assert a.dims == ("t",)
        return a * a.mean("t") + np.cos(a)

    res = lf.vmap(f, dim=("lat", "lon"))(g)
    # explicit nested loop: lat outermost
    rows = []
    for i in range(g.sizes["lat"]):
        cols = [
            f(g.isel(lat=i, drop=True).isel(lon=j, drop=True)) for j in range(g.sizes["lon"])
        ]
        rows.append(xr.concat(cols, dim="lon"))
    exp = xr.concat(rows, dim="lat").transpose("lat", "lon", "t")
    exp = exp.assign_coords(lat=g.lat, lon=g.lon)
    assert res.dims == ("lat", "lon", "t")
    assert_same(res, exp)
    assert_same(res, loop_vmap(f, ("lat", "lon"), g))


def test_dim_two_names_order_sets_output_order():
    g = make_grid()
    res = lf.vmap(lambda a: a.sum("t"), dim=("lon", "lat"))(g)
    assert res.dims == ("lon", "lat")
    assert_same(res, loop_vmap(lambda a: a.sum("t"), ("lon", "lat"), g))


def test_dim_two_names_argument_with_one_of_them():
    g = make_grid()
    h = g.isel(lon=0, drop=True).rename("h") * 3  # dims (lat, t)

    def f(a, b):
        return a * b - b.sum()

    res = lf.vmap(f, dim=("lat", "lon"))(g, h)
    assert res.dims == ("lat", "lon", "t")
    assert_same(res, loop_vmap(f, ("lat", "lon"), g, h))


# --------------------------------------------------------------------------- in_dims


def test_in_dims_tuple_none_means_shared_even_if_dim_present():
    x, y = make_x(), make_x(name="y", seed=7)
    seen = []

    def f(a, b):
        seen.append((a.dims, b.dims))
        return a * b.sum("sample")

    res = lf.vmap(f, in_dims=("sample", None))(x, y)
    assert seen[0] == (("t",), ("sample", "t"))
    exp = stack_examples(
        [f(x.isel(sample=i, drop=True), y) for i in range(N)],
        "sample",
        {"sample": x.sample.variable, "label": x.label.variable},
    )
    assert_same(res, exp)


def test_in_dims_tuple_both_mapped():
    x, y = make_x(), make_x(name="y", seed=7, dims=("t", "sample"))

    def f(a, b):
        return a / b

    res = lf.vmap(f, in_dims=("sample", "sample"))(x, y)
    assert_same(res, loop_vmap(f, "sample", x, y))


def _f_ab(a, b):
    return a - b.mean("sample")


@pytest.mark.parametrize("call", ["positional", "keyword", "mixed", "reversed_keywords"])
def test_in_dims_dict_by_parameter_name(call):
    x, y = make_x(), make_x(name="y", seed=8)
    vf = lf.vmap(_f_ab, in_dims={"a": "sample", "b": None})
    if call == "positional":
        res = vf(x, y)
    elif call == "keyword":
        res = vf(a=x, b=y)
    elif call == "mixed":
        res = vf(x, b=y)
    else:
        res = vf(b=y, a=x)
    exp = stack_examples(
        [_f_ab(x.isel(sample=i, drop=True), y) for i in range(N)],
        "sample",
        {"sample": x.sample.variable, "label": x.label.variable},
    )
    assert_same(res, exp)


def test_in_dims_dict_maps_keyword_argument():
    y = make_x(name="y", seed=8)

    def f(a, b):
        return a * b

    vf = lf.vmap(f, in_dims={"a": None, "b": "sample"})
    u = make_u()
    res_kw = vf(a=u, b=y)
    res_pos = vf(u, y)
    exp = loop_vmap(f, "sample", u, y)
    assert_same(res_kw, exp)
    assert_same(res_pos, exp)


def test_in_dims_int_numpy():
    rng = np.random.default_rng(11)
    A = rng.normal(size=(5, 3))
    B = rng.normal(size=(3,))

    def f(a, b):
        return np.sin(a) * b + np.sum(a)

    res = lf.vmap(f, in_dims=(0, None))(A, B)
    exp = np.stack([f(A[i], B) for i in range(A.shape[0])])
    assert isinstance(res, np.ndarray)
    assert res.shape == exp.shape
    np.testing.assert_allclose(res, exp, rtol=1e-12)


def test_in_dims_int_numpy_other_axis_and_both_mapped():
    rng = np.random.default_rng(12)
    A = rng.normal(size=(3, 5))
    C = rng.normal(size=(5, 3))

    def f(a, c):
        return np.exp(a) * c - np.mean(c)

    res = lf.vmap(f, in_dims=(1, 0))(A, C)
    exp = np.stack([f(A[:, i], C[i]) for i in range(5)])
    assert isinstance(res, np.ndarray)
    assert res.shape == (5, 3)
    np.testing.assert_allclose(res, exp, rtol=1e-12)


def test_in_dims_int_numpy_out_dims_1():
    rng = np.random.default_rng(13)
    A = rng.normal(size=(4, 3))

    def f(a):
        return np.cumsum(a) * 2

    res = lf.vmap(f, in_dims=(0,), out_dims=1)(A)
    exp = np.stack([f(A[i]) for i in range(4)], axis=1)
    assert res.shape == (3, 4)
    np.testing.assert_allclose(res, exp, rtol=1e-12)


def test_in_dims_mixed_numpy_int_and_dataarray_name():
    x = make_x()
    A = np.random.default_rng(14).normal(size=(N, T.size))

    def f(a, arr):
        return a * arr

    res = lf.vmap(f, in_dims=("sample", 0))(x, A)
    exp = stack_examples(
        [f(x.isel(sample=i, drop=True), A[i]) for i in range(N)],
        "sample",
        {"sample": x.sample.variable, "label": x.label.variable},
    )
    assert_same(res, exp)


def test_in_dims_tuple_of_names_is_several_dims():
    g = make_grid(("t", "lat", "lon"))
    u = make_u()

    def f(a, b):
        return a * b + a.std()

    res = lf.vmap(f, in_dims=(("lat", "lon"), None))(g, u)
    assert res.dims == ("lat", "lon", "t")
    assert_same(res, loop_vmap(f, ("lat", "lon"), g, u))
    assert_same(res, lf.vmap(f, dim=("lat", "lon"))(g, u))


def test_in_dims_nested_dict_for_pytree_argument():
    x = make_x()
    w = make_x(name="w", seed=21)
    b = make_x(name="b", seed=22)  # has "sample" but is not mapped

    def f(params, data):
        assert "sample" not in params["w"].dims
        assert "sample" in params["b"].dims
        return data * params["w"] + params["b"].mean("sample")

    res = lf.vmap(f, in_dims=({"w": "sample", "b": None}, "sample"))({"w": w, "b": b}, x)
    exp = stack_examples(
        [
            f({"w": w.isel(sample=i, drop=True), "b": b}, x.isel(sample=i, drop=True))
            for i in range(N)
        ],
        "sample",
        {"sample": x.sample.variable, "label": x.label.variable},
    )
    assert_same(res, exp)


@pytest.mark.parametrize("container", [list, tuple])
def test_in_dims_list_mirrors_sequence_argument(container):
    x = make_x()
    y = make_x(name="y", seed=23)  # has "sample", not mapped

    def f(xs):
        assert isinstance(xs, container)
        return xs[0] + xs[1].max("sample")

    res = lf.vmap(f, in_dims=(["sample", None],))(container([x, y]))
    exp = stack_examples(
        [f(container([x.isel(sample=i, drop=True), y])) for i in range(N)],
        "sample",
        {"sample": x.sample.variable, "label": x.label.variable},
    )
    assert_same(res, exp)


# --------------------------------------------------------------------------- inside f


@pytest.mark.parametrize("dims", [("sample", "t"), ("t", "sample")])
def test_inside_f_the_mapped_dim_is_gone(dims):
    x = make_x(dims=dims)
    u = make_u()
    seen = {}

    def f(a, b):
        seen["dims"] = a.dims
        seen["sizes"] = dict(a.sizes)
        seen["shape"] = a.shape
        seen["len"] = len(a)
        seen["ndim"] = a.ndim
        seen["size"] = a.size
        seen["coords"] = set(a.coords)
        seen["b_dims"] = b.dims
        seen["sum_dims"] = a.sum().dims
        seen["data_shape"] = a.data.shape
        return a.sum()

    res = lf.vmap(f, dim="sample")(x, u)
    assert seen["dims"] == ("t",)
    assert seen["sizes"] == {"t": T.size}
    assert seen["shape"] == (T.size,)
    assert seen["len"] == T.size
    assert seen["ndim"] == 1
    assert seen["size"] == T.size
    assert seen["coords"] == set(x.isel(sample=0).coords)  # as in the loop: scalars along "sample" too
    assert seen["b_dims"] == ("t",)
    assert seen["sum_dims"] == ()
    assert seen["data_shape"] == (T.size,)
    assert_same(res, loop_vmap(f, "sample", x, u))


def test_inside_f_three_d_with_dim_in_middle():
    x3 = make_x3(dims=("x", "sample", "t"))
    seen = {}

    def f(a):
        seen["dims"] = a.dims
        seen["shape"] = a.shape
        seen["len"] = len(a)
        return a.mean()

    res = lf.vmap(f, dim="sample")(x3)
    assert seen == {"dims": ("x", "t"), "shape": (len(XLAB), T.size), "len": len(XLAB)}
    assert res.dims == ("sample",)
    assert_same(res, loop_vmap(f, "sample", x3))


def test_inside_f_dataset_sizes():
    x = make_x()
    ds = xr.Dataset({"a": x, "b": make_u()})
    seen = {}

    def f(d):
        seen["sizes"] = dict(d.sizes)
        seen["coords"] = set(d.coords)
        return d.a.sum() + d.b.sum()

    lf.vmap(f, dim="sample")(ds)
    assert seen["sizes"] == {"t": T.size}
    assert seen["coords"] == set(ds.isel(sample=0).coords)  # as in the loop


# --------------------------------------------------------------------------- outputs


def test_identity_returns_identical_object():
    x = make_x()
    res = lf.vmap(lambda a: a, dim="sample")(x)
    xr.testing.assert_identical(res, x)


def test_coords_along_mapped_dim_restored_with_attrs():
    x = make_x()
    res = lf.vmap(lambda a: a.sum("t") * 2, dim="sample")(x)
    assert res.dims == ("sample",)
    xr.testing.assert_identical(res["sample"], x["sample"])
    xr.testing.assert_identical(res["label"], x["label"])
    assert res["sample"].attrs == {"long_name": "id"}


def test_attrs_and_name_kept():
    x = make_x()
    res = lf.vmap(lambda a: np.sqrt(a), dim="sample")(x)
    exp = loop_vmap(lambda a: np.sqrt(a), "sample", x)
    assert res.name == exp.name == "x"
    assert res.attrs == exp.attrs
    assert_same(res, exp)
    res2 = lf.vmap(lambda a: (a + 1).rename("renamed").assign_attrs(extra=1), dim="sample")(x)
    assert res2.name == "renamed"
    assert res2.attrs["extra"] == 1
    assert_same(
        res2, loop_vmap(lambda a: (a + 1).rename("renamed").assign_attrs(extra=1), "sample", x)
    )


def test_dataset_argument_and_output():
    x = make_x()
    ds = xr.Dataset(
        {
            "a": x,
            "b": make_u(),  # no "sample": unmapped
            "c": ("sample", np.arange(1.0, N + 1)),
        },
        attrs={"title": "demo"},
    )
    seen = {}

    def f(d):
        seen["a"] = d.a.dims
        seen["b"] = d.b.dims
        seen["c"] = d.c.dims
        return xr.Dataset(
            {
                "p": d.a * d.b,
                "q": d.b * 2,  # does not depend on the mapped part
                "r": d.c + d.a.sum("t"),
            },
            attrs=d.attrs,
        )

    res = lf.vmap(f, dim="sample")(ds)
    assert seen == {"a": ("t",), "b": ("t",), "c": ()}
    exp = loop_vmap(f, "sample", ds)
    assert_same(res, exp)
    assert res.q.dims == ("sample", "t")
    assert res.attrs == {"title": "demo"}


def test_dataset_arithmetic_output():
    x = make_x()
    ds = xr.Dataset({"a": x, "b": x * 2}, attrs={"title": "demo"})

    def f(d):
        return (d * 2 + 1).mean("t")

    assert_same(lf.vmap(f, dim="sample")(ds), loop_vmap(f, "sample", ds))


def test_dataset_and_dataarray_arguments_together():
    x = make_x()
    ds = xr.Dataset({"a": make_x(name="a", seed=31), "b": make_u()})

    def f(d, v):
        return d.a * v + d.b

    assert_same(lf.vmap(f, dim="sample")(ds, x), loop_vmap(f, "sample", ds, x))


def test_datatree_argument():
    x = make_x()
    y = make_x(name="y", seed=41)
    tree = xr.DataTree.from_dict(
        {
            "/": xr.Dataset({"r": x}),
            "/child": xr.Dataset({"c": y, "d": ("t", np.linspace(1, 2, T.size))}),
        }
    )
    seen = {}

    def f(tr):
        seen["r"] = tr["r"].dims
        seen["c"] = tr["child"]["c"].dims
        return tr["r"] * tr["child"]["c"] + tr["child"]["d"]

    res = lf.vmap(f, dim="sample")(tree)
    assert seen == {"r": ("t",), "c": ("t",)}
    assert_same(res, loop_vmap(f, "sample", tree))


def test_pytree_in_and_out():
    x, y, u = make_x(), make_x(name="y", seed=51), make_u()

    def f(inp):
        a, (b, c), lst = inp["a"], inp["pair"], inp["lst"]
        return {
            "s": a + b,
            "t": (a * c, c + 1),
            "l": [lst[0].sum("t"), a - lst[0]],
        }

    inp = {"a": x, "pair": (y, u), "lst": [make_x(name="z", seed=52)]}
    res = lf.vmap(f, dim="sample")(inp)
    exp = loop_vmap(f, "sample", inp)
    assert_same(res, exp)
    assert isinstance(res["t"], tuple) and isinstance(res["l"], list)


def test_unmapped_output_is_broadcast_along_dim():
    x, u = make_x(), make_u()

    def f(a, b):
        return a * 2, b + 1, xr.DataArray(3.0)

    r0, r1, r2 = lf.vmap(f, dim="sample")(x, u)
    e0, e1, e2 = loop_vmap(f, "sample", x, u)
    assert_same(r0, e0)
    assert_same(r1, e1)
    assert_same(r2, e2)
    assert r1.dims == ("sample", "t") and r1.sizes["sample"] == N
    for i in range(N):
        np.testing.assert_array_equal(r1.isel(sample=i).values, (u + 1).values)
    np.testing.assert_array_equal(r1["sample"].values, x["sample"].values)
    assert r2.dims == ("sample",)
    np.testing.assert_array_equal(r2.values, np.full(N, 3.0))


# --------------------------------------------------------------------------- out_dims


def test_out_dims_int():
    x3 = make_x3()

    def f(a):
        return a * 2, a.sum("x")

    r_full, r_red = lf.vmap(f, dim="sample", out_dims=1)(x3)
    e_full, e_red = loop_vmap(f, "sample", x3)
    assert r_full.dims == ("x", "sample", "t")
    assert r_red.dims == ("t", "sample")
    assert_same(r_full, e_full.transpose("x", "sample", "t"))
    assert_same(r_red, e_red.transpose("t", "sample"))


@pytest.mark.parametrize(
    "dims, f, out",
    [
        (("x", "t", "sample"), lambda a: a * 2, ("x", "t", "sample")),
        (("x", "sample", "t"), lambda a: np.exp(a), ("x", "sample", "t")),
        (("x", "sample", "t"), lambda a: a.sum("t"), ("x", "sample")),
        (("sample", "x", "t"), lambda a: a.mean("x"), ("sample", "t")),
    ],
)
def test_out_dims_preserve(dims, f, out):
    x3 = make_x3(dims=dims)
    res = lf.vmap(f, dim="sample", out_dims="preserve")(x3)
    assert res.dims == out
    assert_same(res, loop_vmap(f, "sample", x3).transpose(*out))


def test_out_dims_preserve_identity_roundtrip():
    x = make_x(dims=("t", "sample"))
    res = lf.vmap(lambda a: a, dim="sample", out_dims="preserve")(x)
    xr.testing.assert_identical(res, x)


# --------------------------------------------------------------------------- chunk_size


def _chunk_f(a, b):
    c = np.tanh(a).cumsum("t") + a.sum() * b
    return {"c": c, "m": (a.std("t"), (a * b).max()), "d": xr.dot(a, b, dim="t")}


@pytest.mark.parametrize("n", [5, 7])
@pytest.mark.parametrize("chunk", [1, 2, 3, 10])
def test_chunk_size_identical_to_one_pass(n, chunk):
    x = make_x(n=n, seed=n)
    u = make_u()
    full = lf.vmap(_chunk_f, dim="sample")(x, u)
    chunked = lf.vmap(_chunk_f, dim="sample", chunk_size=chunk)(x, u)
    xr.testing.assert_identical(chunked["c"], full["c"])
    xr.testing.assert_identical(chunked["m"][0], full["m"][0])
    xr.testing.assert_identical(chunked["m"][1], full["m"][1])
    xr.testing.assert_identical(chunked["d"], full["d"])
    assert_same(chunked, loop_vmap(_chunk_f, "sample", x, u))


def test_chunk_size_dataset_and_dim_not_first():
    x = make_x(n=7, dims=("t", "sample"))
    ds = xr.Dataset({"a": x, "b": make_u()})

    def f(d):
        return (d.a * d.b).to_dataset(name="ab").assign(s=d.a.sum())

    full = lf.vmap(f, dim="sample")(ds)
    chunked = lf.vmap(f, dim="sample", chunk_size=3)(ds)
    xr.testing.assert_identical(chunked, full)
    assert_same(chunked, loop_vmap(f, "sample", ds))


def test_chunk_size_with_numpy_int_in_dims():
    A = np.random.default_rng(61).normal(size=(7, 3))
    f = lambda a: np.cumsum(np.sin(a)) * np.sum(a)  # noqa: E731
    full = lf.vmap(f, in_dims=(0,))(A)
    chunked = lf.vmap(f, in_dims=(0,), chunk_size=2)(A)
    np.testing.assert_array_equal(chunked, full)
    np.testing.assert_allclose(full, np.stack([f(a) for a in A]), rtol=1e-12)


# --------------------------------------------------------------------------- axis_size


def test_axis_size_when_no_argument_has_dim():
    u = make_u()

    def f(b):
        return b * 2 + 1

    res = lf.vmap(f, dim="sample", axis_size=4)(u)
    assert res.dims == ("sample", "t")
    assert res.sizes["sample"] == 4
    for k in range(4):
        xr.testing.assert_allclose(res.isel(sample=k, drop=True), f(u))


# --------------------------------------------------------------------------- nesting


@pytest.mark.parametrize("dims", [("sample", "x", "t"), ("t", "x", "sample"), ("x", "sample", "t")])
def test_nested_vmap_equals_two_dims_and_loop(dims):
    x3 = make_x3(dims=dims)

    def f(a):
        assert a.dims == ("t",)
        return np.sin(a) * a.sum() + a.cumsum("t")

    nested = lf.vmap(lf.vmap(f, dim="x"), dim="sample")(x3)
    both = lf.vmap(f, dim=("sample", "x"))(x3)
    exp = loop_vmap(f, ("sample", "x"), x3)
    assert nested.dims == ("sample", "x", "t")
    assert_same(nested, exp)
    assert_same(both, exp)
    xr.testing.assert_allclose(nested, both)


def test_nested_vmap_inner_maps_second_argument_only():
    x3 = make_x3()
    y = make_x(name="y", seed=71)  # (sample, t): no "x"

    def g(a, b):
        return a * b - b.mean()

    res = lf.vmap(lf.vmap(g, dim="x"), dim="sample")(x3, y)
    assert_same(res, loop_vmap(g, ("sample", "x"), x3, y))


def test_triple_nested_to_scalars():
    x3 = make_x3()

    def h(a):
        assert a.dims == ()
        return np.sin(a) * 2 + a**2

    res = lf.vmap(lf.vmap(lf.vmap(h, dim="t"), dim="x"), dim="sample")(x3)
    assert res.dims == ("sample", "x", "t")
    xr.testing.assert_allclose(res, np.sin(x3) * 2 + x3**2)
    assert_same(res, loop_vmap(h, ("sample", "x", "t"), x3))


# --------------------------------------------------------------------------- bare returns


def test_returns_python_scalar():
    x = make_x()
    res = lf.vmap(lambda a: 2.5, dim="sample")(x)
    np.testing.assert_array_equal(np.asarray(res), np.full(N, 2.5))
    A = np.ones((3, 2))
    res_np = lf.vmap(lambda a: 3.0, in_dims=(0,))(A)
    np.testing.assert_array_equal(np.asarray(res_np), np.full(3, 3.0))


def test_returns_bare_array_of_one_example():
    x = make_x()
    res = lf.vmap(lambda a: a.data * 2, dim="sample")(x)
    exp = np.stack([x.isel(sample=i).data * 2 for i in range(N)])
    assert np.asarray(res).shape == exp.shape
    np.testing.assert_allclose(np.asarray(res), exp, rtol=1e-12)

    const = lf.vmap(lambda a: np.arange(3.0), dim="sample")(x)
    np.testing.assert_array_equal(np.asarray(const), np.tile(np.arange(3.0), (N, 1)))


def test_returns_numpy_from_numpy():
    A = np.random.default_rng(81).uniform(0.1, 1, size=(4, 3))

    def f(a):
        return np.log(a) / np.sum(a)

    res = lf.vmap(f, in_dims=(0,))(A)
    assert isinstance(res, np.ndarray)
    np.testing.assert_allclose(res, np.stack([f(a) for a in A]), rtol=1e-12)


# --------------------------------------------------------------------------- more contract


def test_func_runs_once_per_chunk_not_once_per_example():
    """vmap evaluates the batch at once (chunk_size=k: k examples at a time)."""
    x = make_x(n=7)
    calls = []

    def f(a):
        calls.append(a.dims)
        return a * 2

    lf.vmap(f, dim="sample")(x)
    assert len(calls) == 1
    calls.clear()
    lf.vmap(f, dim="sample", chunk_size=3)(x)
    assert len(calls) == 3  # 3 + 3 + 1
    assert all(d == ("t",) for d in calls)


def test_mapped_dim_without_coordinate():
    x = make_x().drop_vars(["sample", "label"])

    def f(a):
        return a.cumsum("t") / a.sum()

    res = lf.vmap(f, dim="sample")(x)
    assert "sample" not in res.coords
    assert_same(res, loop_vmap(f, "sample", x))


def test_mapped_dim_of_size_one():
    x = make_x(n=1)

    def f(a):
        return a - a.mean()

    assert_same(lf.vmap(f, dim="sample")(x), loop_vmap(f, "sample", x))


def test_same_array_passed_twice():
    x = make_x()

    def f(a, b):
        return a * b + a.sum() - b

    assert_same(lf.vmap(f, dim="sample")(x, x), loop_vmap(f, "sample", x, x))


def test_out_dims_int_on_dataset_and_pytree_outputs():
    x3 = make_x3()

    def f(a):
        return {"ds": xr.Dataset({"p": a * 2, "q": a.sum("x")}), "da": a.mean("t")}

    res = lf.vmap(f, dim="sample", out_dims=1)(x3)
    exp = loop_vmap(f, "sample", x3)
    assert res["ds"].p.dims == ("x", "sample", "t")
    assert res["ds"].q.dims == ("t", "sample")
    assert res["da"].dims == ("x", "sample")
    assert_same(res["ds"].p, exp["ds"].p.transpose("x", "sample", "t"))
    assert_same(res["ds"].q, exp["ds"].q.transpose("t", "sample"))
    assert_same(res["da"], exp["da"].transpose("x", "sample"))


@pytest.mark.parametrize("randomness", ["error", "different", "same"])
def test_randomness_flag_values_accepted_for_deterministic_function(randomness):
    x = make_x()

    def f(a):
        return np.exp(a).mean("t")

    res = lf.vmap(f, dim="sample", randomness=randomness)(x)
    assert_same(res, loop_vmap(f, "sample", x))


def test_unmapped_output_identity_of_shared_argument():
    x, u = make_x(), make_u()

    def f(a, b):
        return a, b

    ra, rb = lf.vmap(f, dim="sample")(x, u)
    xr.testing.assert_identical(ra, x)
    ea, eb = loop_vmap(f, "sample", x, u)
    assert_same(rb, eb)
    assert rb.dims == ("sample", "t")


def test_mapped_non_index_coordinate_on_dataset_output():
    x = make_x()
    ds = xr.Dataset({"a": x}, coords={"weight": ("sample", np.linspace(1, 2, N))})

    def f(d):
        return d * 2

    res = lf.vmap(f, dim="sample")(ds)
    xr.testing.assert_identical(res["weight"], ds["weight"])
    assert_same(res, loop_vmap(f, "sample", ds))


@pytest.mark.parametrize("same_object", [True, False], ids=["same-argument", "equal-copies"])
def test_two_arguments_with_the_same_two_dim_coordinate_along_the_dim(same_object):
    # xarray merges the coordinate of a and b when it computes a * b: it must find them
    # equal without asking for bool() of a mapped comparison.
    x = make_x()
    x = x.assign_coords(grid=(x.dims, np.arange(x.size).reshape(x.shape) % 7))
    y = x if same_object else (x * 3).copy(deep=True)

    def f(a, b):
        return (a * b).sum("t"), a - b

    res = lf.vmap(f, dim="sample")(x, y)
    # The loop's xr.concat keeps only the first example's grid (it is not along "sample" in
    # one example): compare without it, then check the grid came back whole.
    expected = loop_vmap(f, "sample", x, y)
    assert_same(res[0], expected[0])
    assert_same(res[1].drop_vars("grid"), expected[1].drop_vars("grid"))
    xr.testing.assert_identical(res[1]["grid"], x["grid"])


@pytest.mark.parametrize("lazy", [False, True], ids=["in-memory", "dask"])
def test_a_shared_selection_named_like_the_mapped_dim_leaves_the_labels_intact(lazy):
    # ens.sel(member="ctrl") carries a scalar "member" coordinate into the output: the
    # mapped dim's labels must come back, not that scalar.
    if lazy:
        pytest.importorskip("dask")
    ens = xr.DataArray(np.arange(8.0).reshape(4, 2) ** 2, dims=("member", "time"),
                       coords={"member": ["ctrl", "m1", "m2", "m3"], "spread": ("member", [0, 1, 2, 3])})
    anomaly = lf.vmap(lambda m: m - ens.sel(member="ctrl"), dim="member")
    result = anomaly(ens.chunk(member=2) if lazy else ens)
    expected = ens - ens.sel(member="ctrl", drop=True)
    xr.testing.assert_identical(result.compute(), expected)
    np.testing.assert_array_equal(result.sel(member="m2").values, ens.values[2] - ens.values[0])


def test_integer_and_bool_data():
    xi = (make_x() * 10).astype(np.int64)

    def f(a):
        return a.sum("t"), a > 5, a // 3, (a % 4).cumsum("t")

    res = lf.vmap(f, dim="sample")(xi)
    assert_same(res, loop_vmap(f, "sample", xi))


def _inner_over_new_dim(a):
    scaled = a.expand_dims(k=3) * xr.DataArray([1.0, 2.0, 3.0], dims="k")
    return lf.vmap(lambda b: b.cumsum("t") - b.mean(), dim="k")(scaled)


def _inner_over_closure(a):
    u = make_u()
    return lf.vmap(lambda b: (b * a).sum(), dim="t")(u)


def _inner_chunked(a):
    return lf.vmap(lambda b: b.std() * a.mean(), dim="x", chunk_size=2)(a)


@pytest.mark.parametrize(
    "f, maker",
    [
        (_inner_over_new_dim, make_x),
        (_inner_over_closure, make_x),
        (_inner_chunked, make_x3),
    ],
    ids=["inner_over_dim_created_inside", "inner_over_unmapped_closure", "inner_chunked"],
)
@pytest.mark.parametrize("outer_chunk", [None, 3])
def test_vmap_called_inside_vmapped_function(f, maker, outer_chunk):
    x = maker()
    res = lf.vmap(f, dim="sample", chunk_size=outer_chunk)(x)
    assert_same(res, loop_vmap(f, "sample", x))
