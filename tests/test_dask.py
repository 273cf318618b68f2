"""vmap over dask-chunked dims: lazy, equal to the in-memory vmap, on every local scheduler.

Oracles: the in-memory vmap of the same function on the computed inputs, and closed
forms.  The distributed scheduler is in test_dask_cluster.py.
"""

import importlib
import subprocess
import sys
import threading
import warnings

import cloudpickle
import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

dask = pytest.importorskip("dask")
import dask.array as da  # noqa: E402
from dask.callbacks import Callback  # noqa: E402

N = 23
RTOL = 1e-12


class TaskCounter(Callback):
    """Counts the tasks that any local scheduler runs while it is active."""

    def __init__(self):
        super().__init__()
        self.tasks = 0

    def _pretask(self, key, dsk, state):
        self.tasks += 1


def refuse_to_compute(dsk, keys, **kwargs):
    raise AssertionError("the graph was computed while it was being built")


def counted(func):
    """``func`` with a call counter (``.calls``); vmap calls it once per pass."""
    def wrapper(*args, **kwargs):
        wrapper.calls += 1
        return func(*args, **kwargs)

    wrapper.calls = 0
    return wrapper


def example_data(seed=0):
    """x(t, sample) with the mapped dim not first, coords along both dims, attrs."""
    rng = np.random.default_rng(seed)
    return xr.DataArray(
        rng.normal(size=(4, N)), dims=("t", "sample"), name="x", attrs={"units": "m"},
        coords={"t": [0.0, 0.5, 1.0, 1.5], "sample": np.arange(100, 100 + N),
                "label": ("sample", [f"s{k}" for k in range(N)])},
    )


def model(x, w):
    """One example: x(t), w(t) -> (scalar, x-shaped)."""
    return (x * w).sum("t") + np.tanh(x).mean("t"), np.sin(x) * w


WEIGHTS = xr.DataArray([1.0, -2.0, 0.5, 3.0], dims="t", coords={"t": [0.0, 0.5, 1.0, 1.5]})


def assert_same(lazy, expected):
    """``lazy`` is dask-backed and equals ``expected`` to 1e-12 with identical metadata."""
    for got, want in zip(lazy if isinstance(lazy, tuple) else (lazy,),
                         expected if isinstance(expected, tuple) else (expected,)):
        assert got.chunks is not None, "the result is not lazy"
        computed = got.compute()
        xr.testing.assert_allclose(computed, want, rtol=RTOL, atol=0)
        assert all_dims(computed) == all_dims(want)
        assert computed.attrs == want.attrs
        assert getattr(computed, "name", None) == getattr(want, "name", None)
        assert set(computed.coords) == set(want.coords)
        for name in want.coords:
            xr.testing.assert_identical(computed.coords[name], want.coords[name])


def all_dims(obj):
    obj = obj.to_dataset(name="data") if isinstance(obj, xr.DataArray) else obj
    return {name: var.dims for name, var in obj.variables.items()}


# --- laziness ------------------------------------------------------------------------------
def test_building_the_graph_runs_no_task_and_calls_the_function_once():
    x = example_data().chunk({"sample": 5})
    func = counted(model)
    with TaskCounter() as counter, dask.config.set(scheduler=refuse_to_compute):
        lazy = lf.vmap(func, dim="sample")(x, WEIGHTS)
    assert counter.tasks == 0
    assert func.calls == 1  # the one-example stand-in, outside the graph
    assert all(out.chunks is not None for out in lazy)
    with TaskCounter() as counter:
        dask.compute(lazy, scheduler="sync")
    assert counter.tasks > 0
    assert func.calls == 1 + 5  # then one in-memory vmap per block, no dummy blocks


def test_the_data_stays_out_of_the_shared_key():
    big = xr.DataArray(np.ones((200_000, 4)), dims=("sample", "t"))  # 6.4 MB
    lazy = lf.vmap(lambda x, y: (x * y).sum("t"), dim="sample")(big.chunk({"sample": 50_000}), big)
    graph = dict(lazy.data.__dask_graph__())
    shared = [value for key, value in graph.items() if str(key).startswith("vmap-skeleton")]
    assert len(shared) == 1
    assert len(cloudpickle.dumps(shared[0])) < 100_000


def test_the_stand_in_has_one_example_of_the_inputs_dtype_and_other_sizes():
    seen = []

    def record(x):
        seen.append((x.dims, x.shape, x.dtype))
        return x * 2

    x = xr.DataArray(np.arange(60, dtype=np.float32).reshape(3, 20), dims=("t", "sample"))
    lf.vmap(record, dim="sample")(x.chunk({"sample": 6}))
    assert seen == [(("t",), (3,), np.float32)]


def test_in_memory_calls_do_not_import_dask():
    # (creating a DataArray makes xarray import dask; bare arrays do not)
    code = ("import sys, numpy as np, labeled_func as lf\n"
            "lf.vmap(lambda v: v * 2, in_dims=(0,))(np.ones((3, 2)))\n"
            "print('dask' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_labeled_func_imports_without_dask():
    code = ("import sys; sys.modules['dask'] = None\n"
            "import numpy as np, xarray as xr, labeled_func as lf\n"
            "x = xr.DataArray(np.ones((3, 2)), dims=('sample', 't'))\n"
            "print(float(lf.vmap(lambda x: x.sum('t'), dim='sample')(x).sum()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "6.0"


# --- equal to the in-memory vmap ---------------------------------------------------------------
@pytest.mark.parametrize("chunk", [1, 7, N])
@pytest.mark.parametrize("out_dims", [0, -1, "preserve"])
def test_dataarray_equals_in_memory(chunk, out_dims):
    x = example_data()
    expected = lf.vmap(model, dim="sample", out_dims=out_dims)(x, WEIGHTS)
    lazy = lf.vmap(model, dim="sample", out_dims=out_dims)(x.chunk({"sample": chunk}), WEIGHTS)
    for out in lazy:
        assert out.chunks[out.dims.index("sample")] == x.chunk({"sample": chunk}).chunks[1]
    assert_same(lazy, expected)


@pytest.mark.parametrize("chunk", [1, 7, N])
def test_dataset_equals_in_memory(chunk):
    x = example_data()
    ds = xr.Dataset({"a": x, "b": x.isel(t=0, drop=True) ** 2, "w": WEIGHTS},
                    attrs={"title": "inputs"})

    def per_sample(ds):
        return xr.Dataset({"energy": (ds.a * ds.w).sum("t") * ds.b, "shifted": ds.a + ds.w},
                          attrs=ds.attrs)

    expected = lf.vmap(per_sample, dim="sample")(ds)
    lazy = lf.vmap(per_sample, dim="sample")(ds.chunk({"sample": chunk}))
    assert lazy.attrs == {"title": "inputs"}
    assert lazy.energy.chunks == ds.chunk({"sample": chunk}).a.chunks[1:]
    assert_same(lazy, expected)


def test_mixed_lazy_and_in_memory_mapped_arguments_and_keyword_arguments():
    x = example_data()
    y = x.isel(t=slice(0, 2)) * 3.0

    def func(x, *, y):
        return {"p": x.sum("t") * y.sum("t"), "q": y}

    expected = lf.vmap(func, dim="sample")(x, y=y)
    lazy = lf.vmap(func, dim="sample")(x.chunk({"sample": 6}), y=y)
    assert_same(lazy["p"], expected["p"])
    assert_same(lazy["q"], expected["q"])
    assert lazy["q"].chunks[lazy["q"].dims.index("sample")] == (6, 6, 6, 5)


def test_in_dims_bare_dask_array():
    a = np.random.default_rng(1).normal(size=(5, N))
    expected = lf.vmap(lambda v: np.cos(v) * v.sum(), in_dims=(1,))(a)
    lazy = lf.vmap(lambda v: np.cos(v) * v.sum(), in_dims=(1,))(da.from_array(a, chunks=(5, 4)))
    assert isinstance(lazy, da.Array) and lazy.chunks[0] == (4,) * 5 + (3,)
    np.testing.assert_allclose(lazy.compute(), expected, rtol=RTOL)


def test_nested_dims_and_a_datatree():
    x = xr.DataArray(np.arange(24.0).reshape(2, 3, 4), dims=("a", "b", "t"))
    func = lambda x: (x * x).sum("t")  # noqa: E731
    expected = lf.vmap(func, dim=("a", "b"))(x)
    assert_same(lf.vmap(func, dim=("a", "b"))(x.chunk({"a": 1})), expected)
    tree = xr.DataTree.from_dict({"/": xr.Dataset({"u": x.isel(b=0)}), "/child": xr.Dataset({"v": x.isel(b=1)})})
    tree_func = lambda tr: tr.map_over_datasets(lambda ds: ds * 2)  # noqa: E731
    expected_tree = lf.vmap(tree_func, dim="a")(tree)
    lazy_tree = lf.vmap(tree_func, dim="a")(tree.chunk({"a": 1}))
    assert lazy_tree["child"]["v"].chunks is not None
    xr.testing.assert_identical(lazy_tree.compute(), expected_tree)


def test_dask_backed_coordinate_along_the_dim_is_restored():
    x = example_data()
    x = x.assign_coords(weight=("sample", np.linspace(0, 1, N)))
    expected = lf.vmap(lambda x: x.max("t"), dim="sample")(x)
    lazy = lf.vmap(lambda x: x.max("t"), dim="sample")(x.to_dataset().chunk({"sample": 4}).x)
    assert_same(lazy, expected)


def test_chunk_size_splits_each_block():
    x = example_data()
    func = counted(model)
    lazy = lf.vmap(func, dim="sample", chunk_size=3)(x.chunk({"sample": 7}), WEIGHTS)
    assert func.calls == 1
    dask.compute(lazy, scheduler="sync")
    assert func.calls == 1 + 3 + 3 + 3 + 1  # blocks 7, 7, 7, 2 in passes of at most 3
    assert_same(lazy, lf.vmap(model, dim="sample")(x, WEIGHTS))


# --- schedulers ---------------------------------------------------------------------------------
def test_threaded_scheduler_runs_blocks_in_parallel_with_identical_results():
    x = example_data()
    both_running = threading.Barrier(2, timeout=20)
    threads, building = set(), [True]

    def func(x, w):
        if not building[0]:
            threads.add(threading.get_ident())
            both_running.wait()  # passes only when two blocks run at the same time
        return model(x, w)

    lazy = lf.vmap(func, dim="sample")(x.chunk({"sample": 6}), WEIGHTS)
    building[0] = False
    threaded = dask.compute(lazy, scheduler="threads", num_workers=2)[0]
    assert len(threads) == 2
    synchronous = dask.compute(lf.vmap(model, dim="sample")(x.chunk({"sample": 6}), WEIGHTS), scheduler="sync")[0]
    for a, b in zip(threaded, synchronous):
        xr.testing.assert_identical(a, b)
    assert_same(lazy, lf.vmap(model, dim="sample")(x, WEIGHTS))


def test_processes_scheduler_with_a_closure():
    x = example_data()
    scale = np.array([2.0, 3.0, 4.0, 5.0])
    lazy = lf.vmap(lambda x: x * xr.DataArray(scale, dims="t"), dim="sample")(x.chunk({"sample": 8}))
    result = lazy.compute(scheduler="processes", num_workers=2)
    xr.testing.assert_allclose(result, (x * xr.DataArray(scale, dims="t")).transpose("sample", "t"), rtol=RTOL)


def test_transformed_functions_pickle_with_cloudpickle():
    x = example_data().isel(t=0)
    offset = 1.5
    for transformed in (lf.vmap(lambda x: x * 2, dim="sample"),
                        lf.vmap(lf.grad(lambda x: np.sin(x) * x + offset), dim="sample")):
        again = cloudpickle.loads(cloudpickle.dumps(transformed))
        xr.testing.assert_identical(again(x), transformed(x))
    xr.testing.assert_allclose(again(x), np.cos(x) * x + np.sin(x), rtol=RTOL)


# --- compositions -------------------------------------------------------------------------------
def test_vmap_of_grad_stays_lazy_and_mean_is_a_dask_reduction():
    x = example_data().isel(t=0, drop=True)
    lazy = lf.vmap(lf.grad(lambda x: np.sin(x) * x), dim="sample")(x.chunk({"sample": 5}))
    assert lazy.chunks == ((5, 5, 5, 5, 3),)
    mean = lazy.mean("sample")
    assert isinstance(mean.data, da.Array)
    np.testing.assert_allclose(mean.compute(), (np.cos(x) * x + np.sin(x)).mean("sample"), rtol=RTOL)
    # a derivative's attrs are its own (docs/autodiff.md): the output's m is x's, passed on
    # by xarray, so d/dx has no units
    closed_form = (np.cos(x) * x + np.sin(x)).drop_attrs(deep=False).assign_attrs(
        long_name="derivative of the output with respect to x")
    assert_same(lazy, closed_form)


def test_vmap_of_jacrev_stays_lazy():
    x = example_data()
    lazy = lf.vmap(lf.jacrev(lambda x: x ** 2), dim="sample")(x.chunk({"sample": 7}))
    assert lazy.dims == ("sample", "t", "t_wrt")
    eye = xr.DataArray(np.eye(4), dims=("t", "t_wrt"))
    closed_form = (2 * x * eye).transpose("sample", "t", "t_wrt")
    np.testing.assert_allclose(lazy.compute(), closed_form, rtol=RTOL)
    assert isinstance(lazy.mean("sample").data, da.Array)


def test_vmap_of_grad_of_a_sum_matches_in_memory_or_fails_alike():
    """Works once the reduction rules land; until then the error comes at build time."""
    x = example_data()
    func = lf.vmap(lf.grad(lambda x: (x ** 2).sum()), dim="sample")
    try:
        expected = func(x)
    except lf.TransformError as error:
        with pytest.raises(type(error)):
            func(x.chunk({"sample": 5}))
        return
    assert_same(func(x.chunk({"sample": 5})), expected)
    np.testing.assert_allclose(expected, 2 * x.transpose("sample", "t"), rtol=RTOL)


def test_ishigami_per_sample_gradient_of_a_dataset():
    rng = np.random.default_rng(3)
    ds = xr.Dataset({k: ("sample", rng.uniform(-np.pi, np.pi, 50)) for k in ("x1", "x2", "x3")})
    lazy = lf.vmap(lf.grad(ishigami), dim="sample")(ds.chunk({"sample": 16}))
    assert lazy.x1.chunks == ((16, 16, 16, 2),)
    assert_same(lazy, ishigami_gradient(ds))


def ishigami(ds, a=7.0, b=0.1):
    return np.sin(ds.x1) + a * np.sin(ds.x2) ** 2 + b * ds.x3 ** 4 * np.sin(ds.x1)


def ishigami_gradient(ds, a=7.0, b=0.1):
    return xr.Dataset({"x1": np.cos(ds.x1) * (1 + b * ds.x3 ** 4),
                       "x2": 2 * a * np.sin(ds.x2) * np.cos(ds.x2),
                       "x3": 4 * b * ds.x3 ** 3 * np.sin(ds.x1)})


# --- bad input ----------------------------------------------------------------------------------
def test_chunked_core_dim_is_rechunked_with_a_warning():
    x = example_data()
    with pytest.warns(UserWarning, match="'t' in 2 chunks"):
        lazy = lf.vmap(model, dim="sample")(x.chunk({"sample": 5, "t": 2}), WEIGHTS)
    assert_same(lazy, lf.vmap(model, dim="sample")(x, WEIGHTS))


def test_chunked_core_dim_raises_without_allow_rechunk():
    x = example_data().chunk({"sample": 5, "t": 2})
    with pytest.raises(ValueError, match=r"'t' in 2 chunks.*chunk\(\{dim: -1\}\)"):
        lf.vmap(model, dim="sample", allow_rechunk=False)(x, WEIGHTS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lazy = lf.vmap(model, dim="sample", allow_rechunk=False)(x.chunk({"t": -1}), WEIGHTS)
    assert_same(lazy, lf.vmap(model, dim="sample")(example_data(), WEIGHTS))


def test_mismatched_chunking_of_two_mapped_arguments_follows_the_first():
    x = example_data()
    y = x * 2
    func = lambda x, y: (x * y).sum("t")  # noqa: E731
    lazy = lf.vmap(func, dim="sample")(x.chunk({"sample": 10}), y.chunk({"sample": 4}))
    assert lazy.chunks == ((10, 10, 3),)
    assert_same(lazy, lf.vmap(func, dim="sample")(x, y))


def test_dask_argument_without_the_mapped_dim():
    x = example_data()
    weights = WEIGHTS.chunk({"t": 2})
    with pytest.raises(ValueError, match="in_dims maps w over dim 'sample'"):
        lf.vmap(model, in_dims=("sample", "sample"))(x, weights)
    with pytest.raises(ValueError, match="no argument has it"):
        lf.vmap(lambda w: w * 2, dim="sample")(weights)
    # with dim=, it is a parameter shared by every example (rechunked to one chunk)
    with pytest.warns(UserWarning, match="w: dim 't' in 2 chunks"):
        lazy = lf.vmap(model, dim="sample")(x, weights)
    assert_same(lazy, lf.vmap(model, dim="sample")(x, WEIGHTS))


def test_coordinate_labels_that_differ_raise_before_any_compute():
    x = example_data()
    y = x.assign_coords(sample=x.sample + 1)
    with dask.config.set(scheduler=refuse_to_compute), pytest.raises(ValueError, match="coordinate labels"):
        lf.vmap(lambda x, y: x + y, dim="sample")(x.chunk({"sample": 5}), y.chunk({"sample": 5}))


def noisy(x):
    return x + lf.random.normal(like=x)


def test_randomness_same_draws_what_the_in_memory_vmap_draws():
    x = example_data()
    lf.random.seed(7)
    expected = lf.vmap(noisy, dim="sample", randomness="same")(x)
    lf.random.seed(7)
    lazy = lf.vmap(noisy, dim="sample", randomness="same")(x.chunk({"sample": 6}))
    for scheduler in ("sync", "threads"):
        xr.testing.assert_identical(lazy.compute(scheduler=scheduler), expected)
    shared = (lazy - x).compute()
    np.testing.assert_allclose(shared.isel(sample=0), shared.isel(sample=N - 1), rtol=RTOL, atol=1e-15)
    later = lf.vmap(noisy, dim="sample", randomness="same")(x.chunk({"sample": 6}))
    assert not np.array_equal(later.compute(), lazy.compute())  # the next vmap draws anew


def test_randomness_different_is_independent_per_example_and_reproducible():
    x = xr.zeros_like(example_data())
    lf.random.seed(7)
    lazy = lf.vmap(noisy, dim="sample", randomness="different")(x.chunk({"sample": 6}))
    first = lazy.compute(scheduler="sync")
    assert np.unique(first.values).size == first.size  # no block repeats another's draws
    xr.testing.assert_identical(lazy.compute(scheduler="threads"), first)
    xr.testing.assert_identical(lazy.compute(scheduler="processes", num_workers=2), first)
    lf.random.seed(7)
    again = lf.vmap(noisy, dim="sample", randomness="different")(x.chunk({"sample": 6}))
    xr.testing.assert_identical(again.compute(), first)
    assert abs(float(first.mean())) < 0.5 and 0.6 < float(first.std()) < 1.4


def compounding_years(growth):
    """Years until a balance of 1 doubles at rate ``growth``: a loop that ends only for the data."""
    balance, years = lf.while_loop(lambda c: c[0] < 2.0, lambda c: (c[0] * growth, c[1] + 1.0),
                                   (xr.ones_like(growth), xr.zeros_like(growth)))
    return years


def test_a_while_loop_that_ends_only_for_the_data_builds_lazily():
    # The stand-in's values are not the data: the one-example run must not wait for the
    # loop's condition (with a stand-in of ones, growth 1.0 never doubled and this hung).
    growth = xr.DataArray([1.05, 1.1, 1.02, 1.2, 1.5], dims="account")
    with TaskCounter() as counter, dask.config.set(scheduler=refuse_to_compute):
        lazy = lf.vmap(compounding_years, dim="account")(growth.chunk(account=2))
    assert counter.tasks == 0 and lazy.chunks == ((2, 2, 1),)
    expected = [float(np.ceil(np.log(2.0) / np.log(g))) for g in growth.values]
    np.testing.assert_array_equal(lazy.compute(scheduler="sync").values, expected)


def test_a_kernel_matrix_built_from_the_data_is_not_singular_on_the_stand_in():
    # Kriging-style weights: a matrix of ones (the old stand-in) made solve() fail while
    # the graph was built, though the real data is fine.
    rng = np.random.default_rng(3)
    points = xr.DataArray(rng.uniform(0, 5, (7, 5)), dims=("rep", "obs"))

    def weights(p):
        kernel = np.exp(-(p.rename(obs="i") - p.rename(obs="j")) ** 2)
        return xr.DataArray(np.linalg.solve(kernel.data, np.ones(5)), dims="i")

    with TaskCounter() as counter, dask.config.set(scheduler=refuse_to_compute):
        lazy = lf.vmap(weights, dim="rep")(points.chunk(rep=3))
    assert counter.tasks == 0
    assert_same(lazy, lf.vmap(weights, dim="rep")(points))


@pytest.mark.parametrize("how", ["closure", "argument"])
def test_a_lazy_vmap_of_a_traced_value_inside_grad_says_to_swap_the_transforms(how):
    data = example_data().transpose("sample", "t").chunk({"sample": 5})
    w = xr.DataArray(np.linspace(0.5, 1.5, 4), dims="t")

    def loss(w):
        if how == "closure":
            per_example = lf.vmap(lambda d: (d * w).sum("t") ** 2, dim="sample")(data)
        else:
            per_example = lf.vmap(lambda w, d: (d * w).sum("t") ** 2, in_dims=(None, "sample"))(w, data)
        return per_example.mean("sample")

    with pytest.raises(lf.UnsupportedOperationError, match=r"inside grad.*lf\.vmap\(lf\.grad"):
        lf.grad(loss)(w)
    # the suggested order works, lazily, and agrees with the in-memory gradient
    per_example_grad = lf.vmap(lf.grad(lambda w, d: (d * w).sum("t") ** 2), in_dims=(None, "sample"))
    lazy = per_example_grad(w, data).mean("sample")
    assert lazy.chunks is not None
    expected = 2 * (data.compute() * w).sum("t") * data.compute()  # d/dw of (d·w)², by hand
    xr.testing.assert_allclose(lazy.compute(), expected.mean("sample").drop_vars("t"), rtol=1e-12)


# --- a Dask array built from traced values raises at once (it used to be silently wrong) -------------
# oracles: the documented ConversionError naming the Dask call and the user's line; closed forms
from transform_by_name import X as TRACED_X, under  # noqa: E402


def dask_stack(x):
    stacked = da.stack([x.data[0], x.data[1]])  # what xskillscore does for non-ndarray inputs
    return xr.DataArray(stacked, dims="k").sum()


def dask_chunk(x):
    return x.chunk({"t": 1}).sum()


def dask_from_array_named(x):
    return xr.DataArray(da.from_array(x.data, name="mine"), dims="t").sum()  # Dask does not tokenize it


def dask_concatenate(x):
    return xr.DataArray(da.concatenate([np.zeros(1), x.data]), dims="u").sum()


@pytest.mark.parametrize("f, culprit", [(dask_stack, "dask.array.core.stack"),
                                        (dask_chunk, "xarray's DataArray.chunk"),
                                        (dask_from_array_named, "dask.array.core.from_array"),
                                        (dask_concatenate, "dask.array.core.concatenate")],
                         ids=["stack", "chunk", "from_array-named", "concatenate"])
@pytest.mark.parametrize("transform", ["grad", "jvp", "jacrev", "vmap"])
def test_a_dask_array_of_traced_values_raises_at_once_naming_the_dask_call(transform, f, culprit):
    # before: grad returned zeros and vmap a lazy array that failed at compute time
    with pytest.raises(lf.ConversionError) as excinfo:
        under(transform, f)
    message = str(excinfo.value)
    assert culprit in message and "a Dask array cannot be built from a value traced by" in message, message
    assert "test_dask.py:" in message  # the user's line
    label = {"grad": "grad", "jvp": "jvp", "jacrev": "jacrev", "vmap": "vmap"}[transform]
    assert f"lf.{label}" in message


def test_numpy_stack_is_the_fix_and_dask_data_still_differentiates():
    fixed = lf.grad(lambda x: xr.DataArray(np.stack([x.data[0], x.data[1]]), dims="k").sum() ** 2)(TRACED_X)
    np.testing.assert_allclose(fixed.values, [2 * 3.0, 2 * 3.0, 0.0])  # d (x0 + x1)^2
    # differentiating a function of Dask-backed data (no Dask array built inside) still works
    lazy = lf.grad(lambda x: (x ** 2).sum())(TRACED_X.chunk({"t": 2}))
    np.testing.assert_allclose(lazy.values, 2 * TRACED_X.values)


def test_what_counts_as_lazy_data_data_or_a_coordinate_never_an_index():
    """lf.jit and vmap go lazy where an argument holds dask-backed data: its values, or a
    coordinate that is not an index (an index is always in memory, and is not asked)."""
    lazy = importlib.import_module("labeled_func.dask")
    values = np.arange(6.0)
    plain = xr.DataArray(values, dims="t", coords={"t": np.arange(6), "w": ("t", values * 2)})
    assert not lazy.has_lazy_leaves((plain,), {})
    assert lazy.has_lazy_leaves((plain.chunk(),), {})
    assert lazy.has_lazy_leaves(({"x": plain.assign_coords(w=("t", da.from_array(values)))},), {})
    assert lazy.has_lazy_leaves((), {"ds": plain.to_dataset(name="a").chunk()})
    assert not lazy.has_lazy_leaves((plain.to_dataset(name="a"), plain.variable), {})
    jitted = lf.jit(lambda v: v * v.w)
    lazy_result = jitted(plain.assign_coords(w=("t", da.from_array(values * 2))))
    assert isinstance(lazy_result.data, da.Array)
    np.testing.assert_array_equal(lazy_result.compute().values, jitted(plain).values)
    # an argument lf.jit refuses (not an array, label nor number) beside dask-backed data: the
    # function runs lazily as it is, as vmap would; beside NumPy data, the refusal names it
    tagged = lf.jit(lambda v, tag: v * 2)
    assert isinstance(tagged(plain.chunk(), object()).data, da.Array)
    with pytest.raises(TypeError, match="argument 'tag' is a object"):
        tagged(plain, object())
