"""``lf.vmap(..., chunk_size=k, jit=True)``: the chunks as one lf.jit program (chunks.py).

The oracles: the un-chunked ``lf.vmap`` (and the un-jitted chunks, ``jit=False``, for random
draws), compared label for label (``xr.testing.assert_identical``) and bit for bit
(``np.testing.assert_array_equal``); the arrays stay below lf.jit's fusion thresholds, where
a replay is the eager computation to the bit.  That the chunks replay is counted: the
function runs (in Python) once per trace, once for the shorter last chunk, and lf.jit is
asked for one program that traces once.
"""
from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

jit_module = sys.modules["labeled_func.jit"]  # the module (``labeled_func.jit`` is the function)
chunks_module = sys.modules["labeled_func.chunks"]


def make_x(n=10, seed=0):
    rng = np.random.default_rng(seed)
    return xr.DataArray(
        rng.uniform(0.1, 1.0, (n, 3)), dims=("sample", "t"), name="x", attrs={"units": "m"},
        coords={"sample": xr.Variable("sample", np.arange(n) * 10 + 5, {"long_name": "id"}),
                "label": ("sample", [f"s{i}" for i in range(n)]), "t": ("t", [0.0, 0.5, 1.0], {"units": "s"})})


def assert_same(got, want):
    """Identical labels and, leaf by leaf, the same bits."""
    import optree

    got_leaves, got_def = optree.tree_flatten(got, none_is_leaf=True)
    want_leaves, want_def = optree.tree_flatten(want, none_is_leaf=True)
    assert got_def == want_def
    for a, b in zip(got_leaves, want_leaves):
        if isinstance(b, xr.DataTree):
            xr.testing.assert_identical(a, b)
            for node_a, node_b in zip(a.subtree, b.subtree):
                for name in node_b.data_vars:
                    np.testing.assert_array_equal(node_a[name].values, node_b[name].values)
        elif isinstance(b, (xr.DataArray, xr.Dataset, xr.Variable)):
            xr.testing.assert_identical(a, b)
            for name, var in (b.variables.items() if isinstance(b, xr.Dataset) else [(None, b.variable if isinstance(b, xr.DataArray) else b)]):
                other = a.variables[name] if name is not None else (a.variable if isinstance(a, xr.DataArray) else a)
                np.testing.assert_array_equal(other.values, var.values)
        else:
            np.testing.assert_array_equal(a, b)


class Counted:
    """``func``, counting its Python calls (a trace is one, a replay none)."""

    def __init__(self, func):
        self.func, self.calls = func, 0
        self.__name__ = getattr(func, "__name__", "counted")

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.func(*args, **kwargs)


@pytest.fixture
def programs(monkeypatch):
    """The lf.jit programs that chunked vmaps make during the test."""
    made = []
    original = jit_module.jit

    def recording(func, **options):
        jitted = original(func, **options)
        made.append(jitted)
        return jitted

    monkeypatch.setattr(chunks_module, "lf_jit", recording)   # the lf.jit that chunks.py calls
    return made


def loss(v):
    return (np.sin(v) ** 2 * v.sample + v.t * v).sum("t")


# --------------------------------------------------------------------------- the same result, replayed
@pytest.mark.parametrize("n, k", [(10, 3), (12, 3), (12, 6), (7, 2)])
def test_grad_per_sample_identical_to_one_pass_and_replayed(n, k, programs):
    x = make_x(n)
    want = lf.vmap(lf.grad(loss), dim="sample")(x)
    counted = Counted(loss)
    got = lf.vmap(lf.grad(counted), dim="sample", chunk_size=k, jit=True)(x)
    assert_same(got, want)
    assert len(programs) == 1 and programs[0].traces == 1
    assert counted.calls == 1  # the trace; the shorter last chunk replays the last k examples
    eager = Counted(loss)
    assert_same(lf.vmap(lf.grad(eager), dim="sample", chunk_size=k)(x), want)
    assert eager.calls == -(-n // k)


def test_jacrev_inside_and_dim_not_first():
    x = make_x(9).transpose("t", "sample")

    def f(v):
        return xr.concat([np.exp(v) * v.sample, v.cumsum("t")], dim="out")

    want = lf.vmap(lf.jacrev(f), dim="sample")(x)
    got = lf.vmap(lf.jacrev(f), dim="sample", chunk_size=4, jit=True)(x)
    assert_same(got, want)


def test_values_and_labels_of_the_coordinates_along_the_dim_reach_each_example():
    x = make_x(11)

    def f(v):
        return xr.where(v.label == "s3", -v, v * v.sample).assign_coords(twice=v.sample * 2)

    want = lf.vmap(f, dim="sample")(x)
    got = lf.vmap(f, dim="sample", chunk_size=3, jit=True)(x)
    assert_same(got, want)
    assert "twice" in got.coords and got["twice"].dims == ("sample",)


def test_dataset_and_pytree_arguments_and_outputs(programs):
    x = make_x(10)
    ds = xr.Dataset({"a": x, "b": (x * 2).rename(None)}, attrs={"title": "d"})
    params = {"w": xr.DataArray([1.0, 2.0, 3.0], dims="t"), "s": 0.5}

    def f(ds, params):
        out = ds.a * params["w"] + params["s"] * ds.b ** 2
        return {"sum": out.sum("t"), "both": (ds * params["w"], out)}

    want = lf.vmap(f, dim="sample")(ds, params)
    got = lf.vmap(f, dim="sample", chunk_size=4, jit=True)(ds, params)
    assert_same(got, want)
    assert [p.traces for p in programs] == [1]


@pytest.mark.parametrize("out_dims", [(1, None), (-1, None), ("preserve", None), (0, 0)])
def test_out_dims(out_dims):
    x = make_x(8)
    shared = xr.DataArray([1.0, 2.0, 4.0], dims="t")

    def f(v, shared):
        return v * shared, shared.sum() * 2

    want = lf.vmap(f, in_dims=("sample", None), out_dims=out_dims)(x, shared)
    got = lf.vmap(f, in_dims=("sample", None), out_dims=out_dims, chunk_size=3, jit=True)(x, shared)
    assert_same(got, want)


@pytest.mark.parametrize("out_dims", [0, (0, 1), (0, -1)])
def test_positional_in_dims_on_bare_arrays(out_dims):
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(4, 9)), rng.normal(size=(4,))

    def f(column, b):
        return np.tanh(column @ b), column * b

    want = lf.vmap(f, in_dims=(1, None), out_dims=out_dims)(a, b)
    got = lf.vmap(f, in_dims=(1, None), out_dims=out_dims, chunk_size=2, jit=True)(a, b)
    assert_same(got, want)


def test_the_last_chunk_overlaps_and_runs_unjitted_only_for_draws_per_example():
    x = make_x(10)
    counted = Counted(lambda v: v + lf.random.normal(like=v))
    lf.vmap(counted, dim="sample", randomness="different", chunk_size=3, jit=True)(x)
    assert counted.calls == 2  # the trace, and the last chunk of one (its draws: one example's)
    counted.calls = 0
    lf.vmap(counted, dim="sample", randomness="same", chunk_size=3, jit=True)(x)
    assert counted.calls == 1


def test_datatree_argument_and_output():
    x = make_x(7).drop_vars(["sample", "label"])
    tree = xr.DataTree.from_dict({"/": xr.Dataset({"a": x}), "/child": xr.Dataset({"b": 2 * x})})
    f = lambda tree: tree.map_over_datasets(lambda ds: np.cos(ds) * 3)  # noqa: E731
    want = lf.vmap(f, dim="sample")(tree)
    got = lf.vmap(f, dim="sample", chunk_size=2, jit=True)(tree)
    assert_same(got, want)


def test_keyword_arguments_mapped_and_shared():
    x = make_x(9)

    def f(v, *, scale, offset):
        return v * scale + offset

    scale = make_x(9, seed=4).isel(t=0, drop=True)
    want = lf.vmap(f, dim="sample")(x, scale=scale, offset=1.5)
    got = lf.vmap(f, dim="sample", chunk_size=4, jit=True)(x, scale=scale, offset=1.5)
    assert_same(got, want)


@pytest.mark.parametrize("layout", ["sample first", "sample last"])
def test_writes_into_a_mapped_argument_reach_the_caller_once(layout):
    def bump(v):
        v += 1.0
        return v * 2

    plain, chunked = make_x(10), make_x(10)
    if layout == "sample last":
        plain, chunked = plain.transpose().copy(), chunked.transpose().copy()
    want = lf.vmap(bump, dim="sample")(plain)
    got = lf.vmap(bump, dim="sample", chunk_size=3, jit=True)(chunked)
    assert_same(got, want)
    assert_same(chunked, plain)


@pytest.mark.parametrize("randomness", ["different", "same"])
def test_random_draws_are_the_unjitted_chunks_draws(randomness):
    x = make_x(10)
    f = lambda v: v + lf.random.normal(like=v)  # noqa: E731
    lf.random.seed(7)
    want = lf.vmap(f, dim="sample", randomness=randomness, chunk_size=3)(x)
    after = lf.random.normal(sizes={"k": 2})
    lf.random.seed(7)
    got = lf.vmap(f, dim="sample", randomness=randomness, chunk_size=3, jit=True)(x)
    assert_same(got, want)
    assert_same(lf.random.normal(sizes={"k": 2}), after)  # the generator moved on alike


def test_inside_grad_and_inside_lf_jit_the_chunks_run_as_they_are():
    x = make_x(8)
    inner = lambda v: (v ** 3).sum("t")  # noqa: E731
    total = lambda x, jit: lf.vmap(inner, dim="sample", chunk_size=3, jit=jit)(x).sum()  # noqa: E731
    want = lf.grad(lambda x: total(x, False))(x)
    assert_same(lf.grad(lambda x: total(x, True))(x), want)
    jitted = lf.jit(lf.vmap(lf.grad(inner), dim="sample", chunk_size=3, jit=True))
    assert_same(jitted(x), lf.vmap(lf.grad(inner), dim="sample")(x))
    assert_same(jitted(x + 1), lf.vmap(lf.grad(inner), dim="sample")(x + 1))


def test_jit_none_jits_two_chunks_or_more_only():
    x = make_x(5)
    counted = Counted(lambda v: v * 2)
    want = lf.vmap(counted, dim="sample")(x)
    counted.calls = 0
    assert_same(lf.vmap(counted, dim="sample", chunk_size=3, jit=None)(x), want)
    assert counted.calls == 2  # one whole chunk: run as it is, no trace
    counted.calls = 0
    assert_same(lf.vmap(counted, dim="sample", chunk_size=2, jit=None)(x), want)
    assert counted.calls == 1  # the trace, then replays (the last chunk: examples 3 and 4)


def test_a_python_if_on_a_shared_argument_works_it_is_a_constant_of_the_program():
    def branchy(v, threshold):
        if float(threshold) > 0:  # under lf.jit alone: ItemError (the argument is traced)
            return v * 2
        return v

    x, threshold = make_x(9), xr.DataArray(1.0)
    want = lf.vmap(branchy, in_dims=("sample", None))(x, threshold)
    assert_same(lf.vmap(branchy, in_dims=("sample", None), chunk_size=2, jit=True)(x, threshold), want)


# --------------------------------------------------------------------------- where lf.jit cannot
def shared_noise(v):
    return v + np.random.uniform()  # one draw of NumPy's global state: vmap's randomness="same" allows it


def test_a_function_lf_jit_refuses_runs_unjitted_with_one_warning_under_none():
    x = make_x(9)
    np.random.seed(3)
    want = lf.vmap(shared_noise, dim="sample", randomness="same", chunk_size=2)(x)
    np.random.seed(3)
    with pytest.warns(UserWarning, match="could not trace") as caught:
        got = lf.vmap(shared_noise, dim="sample", randomness="same", chunk_size=2, jit=None)(x)
    assert len([w for w in caught if "could not trace" in str(w.message)]) == 1
    assert_same(got, want)


def test_a_function_lf_jit_refuses_raises_under_true():
    with pytest.raises(lf.RandomnessError, match="NumPy's global random state"):
        lf.vmap(shared_noise, dim="sample", randomness="same", chunk_size=2, jit=True)(make_x(9))


def test_an_error_of_the_function_itself_raises_without_the_warning():
    def broken(v):
        return v.sel(t=99.0)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(KeyError):
            lf.vmap(broken, dim="sample", chunk_size=2, jit=None)(make_x(6))


def test_a_coordinate_spanning_the_dim_and_another_raises_under_true_naming_it():
    x = make_x(6).assign_coords(grid=(("sample", "t"), np.arange(18.0).reshape(6, 3)))
    with pytest.raises(ValueError, match=r"argument v has the coordinate 'grid' with dims \('sample', 't'\)"):
        lf.vmap(lambda v: v * 2, dim="sample", chunk_size=2, jit=True)(x)


def test_a_coordinate_spanning_the_dim_and_another_runs_unjitted_under_none():
    x = make_x(6).assign_coords(grid=(("sample", "t"), np.arange(18.0).reshape(6, 3)))
    f = lambda v: v * v.grid  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = lf.vmap(f, dim="sample", chunk_size=2, jit=None)(x)
    assert_same(got, lf.vmap(f, dim="sample")(x))


def test_a_datatree_with_coordinates_along_the_dim_raises_under_true_naming_it():
    tree = xr.DataTree.from_dict({"/": xr.Dataset({"a": make_x(6)})})
    with pytest.raises(ValueError, match=r"argument tree is a DataTree whose node / has the coordinate 'sample'"):
        lf.vmap(lambda tree: tree, dim="sample", chunk_size=2, jit=True)(tree)


@pytest.mark.parametrize("bad", ["yes", 1, 0.0])
def test_a_bad_jit_raises_naming_it(bad):
    with pytest.raises(ValueError, match=r"jit="):
        lf.vmap(np.sin, dim="sample", chunk_size=2, jit=bad)


def test_repr_names_jit():
    assert "jit=True" in repr(lf.vmap(np.sin, dim="sample", chunk_size=2, jit=True))
    assert "jit" not in repr(lf.vmap(np.sin, dim="sample", chunk_size=2))


def test_a_multi_index_along_the_dim_runs_unjitted_under_none_and_raises_under_true():
    stacked = make_x(6).drop_vars(["sample", "label"]).rename(sample="row")
    stacked = stacked.assign_coords(a=("row", [0, 0, 0, 1, 1, 1]), b=("row", [0, 1, 2, 0, 1, 2])).set_index(row=["a", "b"])
    f = lambda v: v * 2  # noqa: E731
    assert_same(lf.vmap(f, dim="row", chunk_size=2, jit=None)(stacked), lf.vmap(f, dim="row")(stacked))
    with pytest.raises(ValueError, match=r"argument v has a multi-index 'row'"):
        lf.vmap(f, dim="row", chunk_size=2, jit=True)(stacked)


def test_dask_backed_arguments_stay_lazy_and_agree():
    pytest.importorskip("dask")
    x = make_x(10)
    want = lf.vmap(lf.grad(loss), dim="sample")(x)
    lazy = lf.vmap(lf.grad(loss), dim="sample", chunk_size=2, jit=True)(x.chunk(sample=5))
    assert lazy.chunks is not None
    xr.testing.assert_identical(lazy.compute(), want)


def test_several_dims_chunk_the_outer_one():
    rng = np.random.default_rng(5)
    z = xr.DataArray(rng.normal(size=(7, 4, 3)), dims=("a", "b", "t"),
                     coords={"a": np.arange(7.0), "b": list("wxyz"), "t": [1.0, 2.0, 3.0]})
    f = lambda v: (np.tanh(v) * v.a).sum("t")  # noqa: E731
    want = lf.vmap(lf.grad(f), dim=("a", "b"))(z)
    assert_same(lf.vmap(lf.grad(f), dim=("a", "b"), chunk_size=3, jit=True)(z), want)


def test_axis_size_with_and_without_a_mapped_argument():
    c = np.array([1.0, 2.0])
    f = lambda c: np.cos(c) * 2  # noqa: E731
    assert_same(lf.vmap(f, in_dims=(None,), axis_size=7, chunk_size=3, jit=True)(c),
                lf.vmap(f, in_dims=(None,), axis_size=7)(c))
    x = make_x(7)
    assert_same(lf.vmap(f, dim="sample", axis_size=7, chunk_size=3, jit=True)(x), lf.vmap(f, dim="sample")(x))
