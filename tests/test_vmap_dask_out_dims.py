"""Per-output ``out_dims`` (an entry ``None``: an unmapped output) with Dask-chunked inputs.

Oracles: the in-memory vmap of the same function on the computed inputs, and the
per-example loop.  Nothing may be computed while the graph is built.
"""
import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

dask = pytest.importorskip("dask")
import dask.array as da  # noqa: E402
from test_dask import counted, refuse_to_compute  # noqa: E402

N = 7
RNG = np.random.default_rng(31)
CHUNKINGS = [1, 3, N, (2, 5)]




def data():
    return xr.DataArray(RNG.normal(size=(3, N)), dims=("t", "sample"), name="x", attrs={"units": "m"},
                        coords={"t": [0.0, 0.5, 1.0], "sample": np.arange(10, 10 + N)})


GRID = xr.DataArray([1.0, 2.0, 4.0], dims="t", coords={"t": [0.0, 0.5, 1.0]}, name="grid", attrs={"kind": "grid"})


def fit(v):
    """One example: a mapped fit, an unmapped labeled grid, an unmapped bare array."""
    return np.sin(v) * GRID, GRID * 2, np.arange(3.0) ** 2


def loop(f, x, k):
    return xr.concat([f(x.isel(sample=i))[k] for i in range(x.sizes["sample"])], dim="sample")


@pytest.mark.parametrize("chunks", CHUNKINGS)
def test_unmapped_outputs_equal_in_memory_and_loop(chunks):
    x = data()
    vmapped = lf.vmap(fit, dim="sample", out_dims=(1, None, None))
    with dask.config.set(scheduler=refuse_to_compute):
        lazy = vmapped(x.chunk({"sample": chunks}))
    mapped, grid, table = lazy
    assert mapped.chunks[1] == x.chunk({"sample": chunks}).chunks[1]  # chunked as the input
    assert isinstance(grid.data, da.Array) and isinstance(table, da.Array)
    computed = dask.compute(*lazy, scheduler="sync")
    expected = vmapped(x)
    xr.testing.assert_identical(computed[0], expected[0])
    xr.testing.assert_identical(computed[1], expected[1])
    np.testing.assert_array_equal(computed[2], expected[2])
    xr.testing.assert_allclose(computed[0], loop(fit, x, 0).transpose("t", "sample"))
    xr.testing.assert_identical(computed[1], fit(x.isel(sample=0))[1])  # once, as every example has it


@pytest.mark.parametrize("chunks", CHUNKINGS)
def test_dict_out_dims_and_preserve_on_dask(chunks):
    x = data()
    f = lambda v: {"scaled": v * 3, "total": GRID.sum(), "same": v - v.mean()}
    vmapped = lf.vmap(f, dim="sample", out_dims={"scaled": "preserve", "total": None, "same": 0})
    with dask.config.set(scheduler=refuse_to_compute):
        lazy = vmapped(x.chunk({"sample": chunks}))
    assert lazy["scaled"].dims == ("t", "sample") and lazy["same"].dims == ("sample", "t")
    computed = dask.compute(lazy, scheduler="threads")[0]
    expected = vmapped(x)
    for key in expected:
        xr.testing.assert_identical(computed[key], expected[key])


@pytest.mark.parametrize("chunks", [1, 2, (3, 2)])
def test_bare_dask_arrays_with_in_dims(chunks):
    a = RNG.normal(size=(5, 3))
    table = np.linspace(0.0, 1.0, 4)
    f = lambda u: (np.cos(u), table * 2)
    lazy = lf.vmap(f, in_dims=0, out_dims=(1, None))(da.from_array(a, chunks=(chunks, 3)))
    first, second = dask.compute(*lazy, scheduler="sync")
    np.testing.assert_allclose(first, np.stack([np.cos(row) for row in a], axis=1))
    np.testing.assert_array_equal(second, table * 2)


def test_unmapped_output_of_a_dask_parameter():
    """An unmapped output may depend on unmapped, Dask-backed arguments: still lazy."""
    x = data()
    weights = xr.DataArray(RNG.normal(size=3), dims="t", coords={"t": x.t}).chunk({"t": 3})
    f = lambda v, w: ((v * w).sum("t"), (w ** 2).sum())
    vmapped = lf.vmap(f, dim="sample", out_dims=(0, None))
    with dask.config.set(scheduler=refuse_to_compute):
        lazy = vmapped(x.chunk({"sample": 3}), weights)
    expected = vmapped(x, weights.compute())
    computed = dask.compute(*lazy, scheduler="sync")
    xr.testing.assert_allclose(computed[0], expected[0])
    xr.testing.assert_allclose(computed[1], expected[1])
    np.testing.assert_allclose(float(computed[1]), float((weights.compute() ** 2).sum()))


def test_an_unmapped_output_is_the_first_blocks():
    """Computing only an unmapped output runs one block, the first."""
    x = data()
    f = counted(lambda v: (v * 2, GRID + 1))
    lazy = lf.vmap(f, dim="sample", out_dims=(0, None))(x.chunk({"sample": 2}))
    f.calls = 0
    xr.testing.assert_identical(lazy[1].compute(scheduler="sync"), GRID + 1)
    assert f.calls == 1
    lazy[0].compute(scheduler="sync")
    assert f.calls == 1 + 4  # every block for the mapped output


def test_a_mapped_output_given_none_is_refused_at_call_time():
    x = data().chunk({"sample": 3})
    with dask.config.set(scheduler=refuse_to_compute):
        with pytest.raises(ValueError, match=r"out_dims gives None for output\[1\].*differs per example"):
            lf.vmap(lambda v: (v, v.sum()), dim="sample", out_dims=(0, None))(x)


def test_out_dims_that_do_not_fit_name_the_callers_entries():
    x = data().chunk({"sample": 3})
    with pytest.raises(ValueError, match=r"out_dims=\(1, None, 1\) does not fit.*a tuple of 2"):
        lf.vmap(lambda v: (v, v), dim="sample", out_dims=(1, None, 1))(x)


def test_per_output_out_dims_under_jit_on_dask():
    x = data()
    vmapped = lf.vmap(fit, dim="sample", out_dims=(1, None, None))
    compiled = lf.jit(vmapped)
    lazy = compiled(x.chunk({"sample": 3}))
    computed = dask.compute(*lazy, scheduler="sync")
    expected = vmapped(x)
    for got, want in zip(computed[:2], expected[:2]):
        xr.testing.assert_allclose(got, want)
    np.testing.assert_array_equal(computed[2], expected[2])


TREE = xr.DataTree.from_dict({"/": xr.Dataset({"g": GRID}), "/child": xr.Dataset({"h": GRID * 2}, attrs={"a": 1})})


@pytest.mark.parametrize("chunks", [None, 2])
def test_an_unmapped_datatree_output(chunks):
    x = data()
    vmapped = lf.vmap(lambda v: ((v * GRID).sum("t"), TREE), dim="sample", out_dims=(0, None))
    given = x if chunks is None else x.chunk({"sample": chunks})
    mapped, tree = vmapped(given)
    tree = tree.compute() if chunks is not None else tree
    xr.testing.assert_identical(tree, TREE)
    xr.testing.assert_allclose(mapped.compute(), (x * GRID).sum("t").transpose("sample"))


def test_a_mapped_datatree_node_given_none_names_the_variable():
    x = data()
    f = lambda v: xr.DataTree.from_dict({"/": xr.Dataset({"g": GRID}), "/child": xr.Dataset({"v": v})})
    with pytest.raises(ValueError, match=r"out_dims gives None for output.*child/v depends on the mapped"):
        lf.vmap(lambda v: (v, f(v)), dim="sample", out_dims=(0, None))(x)
