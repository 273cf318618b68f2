"""lf.vmap(..., branches="agree"): Python control flow, conversions and data-dependent shapes of
a mapped value, accepted where every example gives the same answer (then equal to the loop),
refused with the policy error naming the disagreeing examples otherwise (issue 26, item 2)."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf


def loop(func, *args, dim="sample"):
    """The per-example Python loop that vmap must equal: func on x.isel(dim=i), stacked."""
    size = args[0].sizes[dim]
    outs = [func(*(a.isel({dim: i}) for a in args)) for i in range(size)]
    return xr.concat(outs, dim=dim)


def sample(values, labels=None):
    values = np.asarray(values, dtype=float)
    coords = {"sample": labels if labels is not None else np.arange(values.shape[0]) * 10}
    return xr.DataArray(values, dims=("sample", "t"), coords=coords)


def checked_humidity(rh):
    """The validation of MetPy/pyet style: warn on suspicious values, refuse impossible ones."""
    if np.any(rh > 1.2):
        warnings.warn("relative humidity above 120%: percent instead of a fraction?", UserWarning)
    if rh.max() < 0:
        raise ValueError("relative humidity below zero everywhere")
    return rh.clip(0, 1) * 2


def checked_radiation(rs):
    if np.nanmax(rs.data) < 100:
        raise ValueError("rs looks like MJ, expected W m-2")
    return rs / 10


OK_RH = sample([[0.5, 0.7, 0.9], [0.1, 0.2, 0.3], [0.9, 1.0, 0.95]])


# --- the default is unchanged ---------------------------------------------------------------
def test_default_still_raises_and_points_at_the_option():
    with pytest.raises(lf.DataDependentControlFlowError, match="branches='agree'"):
        lf.vmap(checked_humidity, dim="sample")(OK_RH)
    with pytest.raises(lf.DataDependentControlFlowError):
        lf.vmap(checked_humidity, dim="sample", branches="error")(OK_RH)


def test_bad_option():
    with pytest.raises(ValueError, match="branches='yes'"):
        lf.vmap(checked_humidity, dim="sample", branches="yes")
    assert "branches='agree'" in repr(lf.vmap(checked_humidity, dim="sample", branches="agree"))


# --- branches every example agrees on: the loop's result ---------------------------------------
def test_validation_that_passes_equals_the_loop():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = lf.vmap(checked_humidity, dim="sample", branches="agree")(OK_RH)
    xr.testing.assert_identical(got, loop(checked_humidity, OK_RH))


def test_warning_branch_taken_by_every_example_warns_once_per_call():
    rh = OK_RH * 100  # percent: every example warns
    with pytest.warns(UserWarning, match="percent") as record:
        got = lf.vmap(checked_humidity, dim="sample", branches="agree")(rh)
    assert len(record) == 1  # one call of the function; the loop warns once per example
    with pytest.warns(UserWarning):
        expected = loop(checked_humidity, rh)
    xr.testing.assert_identical(got, expected)


def test_nanmax_check_no_example_raises():
    rs = sample([[150.0, np.nan, 300.0], [120.0, 110.0, np.nan]])
    got = lf.vmap(checked_radiation, dim="sample", branches="agree")(rs)
    xr.testing.assert_identical(got, loop(checked_radiation, rs))


def test_raise_taken_by_every_example_raises_the_functions_error():
    rs = sample([[15.0, 20.0, 30.0], [12.0, 11.0, 10.0]])
    with pytest.raises(ValueError, match="MJ"):
        lf.vmap(checked_radiation, dim="sample", branches="agree")(rs)
    with pytest.raises(ValueError, match="MJ"):
        loop(checked_radiation, rs)


def test_one_example_would_raise_is_named_with_its_label():
    rs = sample([[150.0, 200.0, 300.0], [12.0, 11.0, 10.0], [400.0, 500.0, 600.0]], labels=["a", "b", "c"])
    with pytest.raises(lf.DataDependentControlFlowError) as info:
        lf.vmap(checked_radiation, dim="sample", branches="agree")(rs)
    message = str(info.value)
    assert "example 1 (sample='b') gives True" in message
    assert "examples 0, 2 (sample='a', sample='c') give False" in message
    assert "branches='agree'" in message and "test_branches_agree.py" in message


def test_disagreeing_examples_named_by_position_without_coordinate():
    x = xr.DataArray([[1.0, 2.0], [-1.0, -2.0], [3.0, 4.0]], dims=("sample", "t"))

    def relu(v):
        return v.sum() if v.sum() > 0 else 0 * v.sum()

    with pytest.raises(lf.DataDependentControlFlowError, match=r"example 1 gives False; examples 0, 2 give True"):
        lf.vmap(relu, dim="sample", branches="agree")(x)


def test_many_disagreeing_examples_are_cut():
    x = xr.DataArray(np.arange(20.0)[:, None] - 9.5, dims=("sample", "t"))
    with pytest.raises(lf.DataDependentControlFlowError, match=r"examples 0, 1, 2, 3 and 6 more give False"):
        lf.vmap(lambda v: v if v.sum() > 0 else -v, dim="sample", branches="agree")(x)


# --- float(), .item(): the value itself where every example holds it ------------------------------
def test_float_of_a_value_every_example_holds():
    x = sample([[1.0, 2.0, 3.0], [5.0, 6.0, 7.0]])

    def spread(v):
        return float(v.max() - v.min()) * v  # the same range, 2.0, in every example

    xr.testing.assert_identical(lf.vmap(spread, dim="sample", branches="agree")(x), loop(spread, x))


def test_float_of_differing_values_names_them():
    x = sample([[1.0, 2.0], [5.0, 7.0]])
    with pytest.raises(lf.ItemError, match=r"example 0 \(sample=0\) holds 3.0; example 1 \(sample=10\) holds 12.0"):
        lf.vmap(lambda v: float(v.sum()) * v, dim="sample", branches="agree")(x)


# --- nested vmaps, chunk_size -------------------------------------------------------------------
GRID = xr.DataArray(np.arange(12.0).reshape(2, 3, 2) + 150, dims=("a", "b", "t"),
                    coords={"a": [1, 2], "b": ["x", "y", "z"]})


def test_nested_vmaps_agree_over_every_level():
    got = lf.vmap(checked_radiation, dim=("a", "b"), branches="agree")(GRID)
    expected = xr.concat([loop(checked_radiation, GRID.isel(a=i), dim="b") for i in range(2)], dim="a")
    xr.testing.assert_identical(got, expected.transpose("a", "b", "t"))
    nested = lf.vmap(lf.vmap(checked_radiation, dim="b", branches="agree"), dim="a", branches="agree")(GRID)
    xr.testing.assert_identical(nested, got)


def test_nested_disagreement_names_both_labels():
    grid = GRID.copy()
    grid[1, 2] = 5.0
    with pytest.raises(lf.DataDependentControlFlowError, match=r"example \(1, 2\) \(a=2, b='z'\) gives True"):
        lf.vmap(checked_radiation, dim=("a", "b"), branches="agree")(grid)


def test_an_enclosing_vmap_without_the_option_refuses():
    with pytest.raises(lf.DataDependentControlFlowError, match=r"also mapped over 'a' by a vmap with branches='error'"):
        lf.vmap(lf.vmap(checked_radiation, dim="b", branches="agree"), dim="a")(GRID)


def test_chunk_size_agrees_per_chunk_and_names_global_positions():
    def f(v):
        return v.sum() if v.sum() > 100 else -v.sum()

    x = sample([[150.0], [160.0], [5.0], [6.0]])  # each chunk of 2 agrees: the loop's result
    got = lf.vmap(f, dim="sample", branches="agree", chunk_size=2)(x)
    xr.testing.assert_identical(got, loop(f, x))
    with pytest.raises(lf.DataDependentControlFlowError, match=r"example 3 \(sample=30\) gives True"):
        lf.vmap(checked_radiation, dim="sample", branches="agree", chunk_size=2)(
            sample([[150.0], [160.0], [170.0], [5.0]]))


# --- under grad -----------------------------------------------------------------------------------
def test_vmap_of_grad_with_agreeing_branches():
    def loss(v):
        if np.nanmax(v.data) < 100:
            raise ValueError("units")
        if (v > 0).all():
            return (np.log(v) * v).sum()
        return (v ** 2).sum()

    x = sample([[150.0, 200.0], [300.0, 120.0]])
    got = lf.vmap(lf.grad(loss), dim="sample", branches="agree")(x)
    xr.testing.assert_allclose(got, loop(lf.grad(loss), x))
    xr.testing.assert_allclose(got, np.log(x) + 1)
    with pytest.raises(lf.DataDependentControlFlowError, match="example 1"):
        lf.vmap(lf.grad(loss), dim="sample", branches="agree")(sample([[150.0, 200.0], [300.0, -120.0]]))


# --- data-dependent shapes with equal counts --------------------------------------------------------
def test_dropna_where_every_example_drops_the_same_labels():
    x = xr.DataArray([[1.0, np.nan, 3.0], [4.0, np.nan, 6.0]], dims=("sample", "t"),
                     coords={"sample": [10, 20], "t": [0, 1, 2]})
    got = lf.vmap(lambda v: v.dropna("t"), dim="sample", branches="agree")(x)
    xr.testing.assert_identical(got, loop(lambda v: v.dropna("t"), x))


def test_dropna_of_different_labels_raises_naming_the_example():
    x = xr.DataArray([[1.0, np.nan, 3.0], [4.0, 5.0, np.nan]], dims=("sample", "t"),
                     coords={"sample": [10, 20], "t": [0, 1, 2]})
    with pytest.raises(lf.DynamicShapeError, match=r"example 1 \(sample=20\) holds other values than example 0"):
        lf.vmap(lambda v: v.dropna("t"), dim="sample", branches="agree")(x)
    with pytest.raises(lf.DynamicShapeError):
        lf.vmap(lambda v: v.dropna("t"), dim="sample")(x)


def test_boolean_mask_with_equal_counts_equals_the_loop():
    x = sample([[1.0, 5.0, 7.0, 0.0], [9.0, 2.0, 3.0, 8.0], [4.0, 4.0, 1.0, 0.5]])

    def big(v):
        return v.data[v.data > 3.5] * 2

    got = lf.vmap(big, dim="sample", branches="agree")(x)
    expected = np.stack([big(x.isel(sample=i)) for i in range(3)])
    np.testing.assert_array_equal(got, expected)
    on_arrays = lf.vmap(lambda a: a[a > 3.5] * 2, in_dims=0, branches="agree")(x.data)
    np.testing.assert_array_equal(on_arrays, expected)


def test_nonzero_with_equal_counts_equals_the_loop():
    x = np.array([[0.0, 1.0, 0.0, 2.0], [3.0, 0.0, 0.0, 4.0]])
    got = lf.vmap(np.nonzero, in_dims=0, branches="agree")(x)
    np.testing.assert_array_equal(got[0], [[1, 3], [0, 3]])
    two = np.array([[[0.0, 1.0], [1.0, 0.0]], [[1.0, 1.0], [0.0, 0.0]]])
    rows, cols = lf.vmap(np.nonzero, in_dims=0, branches="agree")(two)
    for k in range(2):
        expected = np.nonzero(two[k])
        np.testing.assert_array_equal(rows[k], expected[0])
        np.testing.assert_array_equal(cols[k], expected[1])


def test_nonzero_under_nested_vmaps():
    x = np.array([[[0.0, 1.0, 2.0], [3.0, 0.0, 4.0]], [[5.0, 6.0, 0.0], [0.0, 7.0, 8.0]]])
    got = lf.vmap(lf.vmap(lambda v: v[v > 0] + 1, in_dims=0, branches="agree"), in_dims=0, branches="agree")(x)
    np.testing.assert_array_equal(got, [[[2.0, 3.0], [4.0, 5.0]], [[6.0, 7.0], [8.0, 9.0]]])


def test_unequal_counts_raise_naming_the_counts():
    x = sample([[1.0, 5.0, 7.0], [9.0, 2.0, 3.0]])
    with pytest.raises(lf.DynamicShapeError) as info:
        lf.vmap(lambda v: v.data[v.data > 3.5], dim="sample", branches="agree")(x)
    assert "example 0 (sample=0) selects 2" in str(info.value)
    assert "example 1 (sample=10) selects 1" in str(info.value)
    with pytest.raises(lf.DynamicShapeError, match="selects"):
        lf.vmap(lambda v: np.nonzero(v.data > 3.5), dim="sample", branches="agree")(x)
    with pytest.raises(lf.DynamicShapeError):  # the default: refused whatever the counts
        lf.vmap(lambda v: v.data[v.data > 0], dim="sample")(x)


def test_mask_under_grad_inside_vmap():
    def loss(v):
        return (v[v > 2.0] ** 2).sum()

    x = np.array([[1.0, 3.0, 4.0], [5.0, 0.5, 6.0]])
    got = lf.vmap(lf.grad(loss), in_dims=0, branches="agree")(x)
    np.testing.assert_allclose(got, np.where(x > 2.0, 2 * x, 0.0))


# --- lf.jit ---------------------------------------------------------------------------------------
def test_under_jit_the_decisions_are_guarded():
    # more in tests/test_jit_guards.py
    x = sample([[150.0], [160.0]])
    jitted = lf.jit(lf.vmap(checked_radiation, dim="sample", branches="agree"))
    xr.testing.assert_identical(jitted(x), loop(checked_radiation, x))
    xr.testing.assert_identical(jitted(x + 1), loop(checked_radiation, x + 1))
    with pytest.raises(ValueError, match="looks like MJ"):  # every example takes the other branch: traced again
        jitted(x / 10)


def test_jit_inside_vmap_runs_as_the_function():
    x = sample([[150.0], [160.0]])
    got = lf.vmap(lf.jit(checked_radiation), dim="sample", branches="agree")(x)
    xr.testing.assert_identical(got, loop(checked_radiation, x))


# --- Dask: each block checks its own examples ---------------------------------------------------------
def test_dask_blocks_check_their_examples():
    pytest.importorskip("dask")
    import dask

    data = sample([[200.0, 210.0], [220.0, 230.0], [20.0, 30.0], [40.0, 50.0]])
    lazy = data.chunk(sample=2)

    def f(v):
        if v.sum() > 100:
            return v.sum()
        return -v.sum()

    with dask.config.set(scheduler="sync"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            built = lf.vmap(checked_radiation, dim="sample", branches="agree")(lazy.isel(sample=[0, 1]))
        assert built.chunks is not None  # lazy: the stand-in's ValueError path was skipped
        xr.testing.assert_identical(built.compute(), loop(checked_radiation, data.isel(sample=[0, 1])))
        # blocks may take different branches: each block's answer is each of its examples'
        got = lf.vmap(f, dim="sample", branches="agree")(lazy)
        assert got.chunks is not None
        xr.testing.assert_identical(got.compute(), loop(f, data))
        # the second block would raise, as its examples would in the loop
        with pytest.raises(ValueError, match="MJ"):
            lf.vmap(checked_radiation, dim="sample", branches="agree")(lazy).compute()
        mixed = sample([[200.0], [20.0], [300.0], [400.0]]).chunk(sample=2)
        with pytest.raises(lf.DataDependentControlFlowError,
                           match=re.escape("example 1 of its Dask block (sample=10) gives True")):
            lf.vmap(checked_radiation, dim="sample", branches="agree")(mixed).compute()


def test_dask_refuses_data_dependent_shapes_with_the_option():
    pytest.importorskip("dask")
    lazy = sample([[1.0, 5.0], [6.0, 2.0]]).chunk(sample=1)
    with pytest.raises(lf.DynamicShapeError, match="Dask-backed inputs"):
        lf.vmap(lambda v: v.data[v.data > 3], dim="sample", branches="agree")(lazy)


def test_dask_build_hides_the_stand_ins_warnings_and_blocks_warn():
    pytest.importorskip("dask")
    import dask

    rh = (OK_RH * 100).chunk(sample=1)  # percent: every block warns when computed
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the stand-in (values in [1, 2)) would warn: hidden
        built = lf.vmap(checked_humidity, dim="sample", branches="agree")(rh)
    with dask.config.set(scheduler="sync"), pytest.warns(UserWarning, match="percent") as record:
        got = built.compute()
    assert len(record) == 3  # one per block (a block of one example here)
    with pytest.warns(UserWarning):
        xr.testing.assert_identical(got, loop(checked_humidity, OK_RH * 100))


def test_dask_build_where_every_path_raises_gives_the_first_error():
    pytest.importorskip("dask")

    def always(v):
        if v.max() > 1e6:
            raise ValueError("too big")
        raise KeyError("never works")

    with pytest.raises(KeyError, match="never works") as info:
        lf.vmap(always, dim="sample", branches="agree")(OK_RH.chunk(sample=1))
    assert any("stand-in" in note for note in getattr(info.value, "__notes__", []))
