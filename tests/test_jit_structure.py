"""lf.jit and structure: values computed only from integer, boolean, string or date
arguments (group labels, codes, positions, masks) are made concrete where a library needs
them, and compared by content after each replay (a guard); values computed from float
arguments keep the documented policy (docs/jit.md, "Structure").  Every result is checked
against the function run without lf.jit (or the per-example loop under vmap)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import labeled_func as lf

RNG = np.random.default_rng(7)
X = xr.DataArray(RNG.normal(size=(4, 6)), dims=("sample", "t"), coords={"sample": np.arange(4) * 10})
LABELS = xr.DataArray(np.array([0, 1, 0, 2, 1, 2]), dims="t", name="g")


def loop(func, x, *rest):
    return xr.concat([func(x.isel(sample=i), *rest) for i in range(x.sizes["sample"])], dim="sample")


def group_means(x, labels):
    return x.groupby(labels).mean()


def test_grouping_by_a_label_argument_equals_the_loop_and_replays_for_the_same_labels():
    fast = lf.jit(lf.vmap(group_means, dim="sample"))
    for x in (X, X * 2 + 1, -X):
        xr.testing.assert_allclose(fast(x, LABELS), loop(group_means, x, LABELS), rtol=1e-13)
    assert fast.traces == 1


def test_other_labels_trace_again_and_both_programs_are_kept():
    fast = lf.jit(lf.vmap(group_means, dim="sample"))
    other = LABELS.copy(data=np.array([2, 2, 0, 1, 1, 0]))
    for labels in (LABELS, other, LABELS, other):
        xr.testing.assert_allclose(fast(X, labels), loop(group_means, X, labels), rtol=1e-13)
    assert fast.traces == 2
    assert "the values of argument 'labels' (made concrete by np.asarray" in fast.explain()


def test_labels_written_in_place_by_the_caller_between_calls_are_seen():
    fast = lf.jit(lf.vmap(group_means, dim="sample"))
    labels = LABELS.copy(deep=True)
    fast(X, labels)
    labels.values[0] = 2  # the same object, other content
    xr.testing.assert_allclose(fast(X, labels), loop(group_means, X, labels), rtol=1e-13)
    assert fast.traces == 2


def test_pandas_unique_of_an_integer_argument_in_plain_jit():
    def by_group(x, codes):
        return np.stack([np.where(codes == k, x, 0.0).sum() for k in pd.unique(np.asarray(codes))])

    fast = lf.jit(by_group)
    x = X.values[0]
    for codes in (np.array([0, 1, 0, 2, 1, 2]), np.array([0, 1, 0, 2, 1, 2]), np.array([3, 3, 1, 1, 1, 1])):
        np.testing.assert_allclose(fast(x, codes), by_group(x, codes), rtol=1e-14)
    assert fast.traces == 2


def test_an_if_on_structure_takes_each_calls_branch():
    def ordered(x, labels):
        if (labels.diff("t") >= 0).all():  # a decision from the labels only
            return x.cumsum("t")
        return x - x.mean("t")

    fast = lf.jit(lf.vmap(ordered, dim="sample"))
    rising = LABELS.copy(data=np.array([0, 0, 1, 1, 2, 2]))
    for labels in (rising, LABELS, rising, LABELS):
        xr.testing.assert_allclose(fast(X, labels), loop(ordered, X, labels), rtol=1e-13)
    assert fast.traces == 2
    assert "made concrete by bool()" in fast.explain()


def test_bincount_of_integer_codes_has_the_length_of_each_calls_codes():
    fast = lf.jit(lambda x, codes: np.bincount(codes, weights=x))
    x = X.values[0]
    for codes in (np.array([0, 1, 0, 2, 1, 2]), np.array([0, 4, 0, 2, 1, 2]), np.array([0, 1, 0, 2, 1, 2])):
        got = fast(x, codes)
        np.testing.assert_allclose(got, np.bincount(codes, weights=x), rtol=1e-14)
        assert got.shape == (codes.max() + 1,)
    assert fast.traces == 2
    assert "the output shape of numpy.bincount" in fast.explain()


def test_a_numpy_table_indexed_with_an_integer_argument():
    table = np.array([10.0, 20.0, 30.0, 40.0])
    fast = lf.jit(lambda x, i: x * table[i])
    x = X.values[0, :3]
    for i in (np.array([0, 2, 3]), np.array([0, 2, 3]), np.array([1, 1, 0])):
        np.testing.assert_allclose(fast(x, i), x * table[i], rtol=1e-15)
    assert fast.traces == 2


def test_ufunc_at_with_integer_codes_given_as_an_argument():
    def group_max(x, codes):
        out = np.zeros_like(x[:3]) - np.inf  # traced: it holds x's values after the update
        np.maximum.at(out, codes, x)
        return out

    fast = lf.jit(group_max)
    x = X.values[0]
    for codes in (np.array([0, 1, 0, 2, 1, 2]), np.array([0, 1, 0, 2, 1, 2]), np.array([2, 2, 0, 0, 1, 1])):
        np.testing.assert_array_equal(fast(x, codes), group_max(x, codes))
    assert fast.traces == 2
    assert "the indices of numpy.maximum.at" in fast.explain()
    with pytest.raises(lf.UnsupportedOperationError, match="numpy.maximum.at under lf.jit"):
        lf.jit(lambda x: group_max(x, (x > 0).astype(int)))(x)


def test_the_concrete_array_is_read_only_and_a_copy_of_it_can_be_written():
    # a write into the array given would change values that the replay does not change
    def writes(x, codes):
        plain = np.asarray(codes)
        plain[plain == 2] = 0
        return x * plain

    with pytest.raises(ValueError, match="read-only"):
        lf.jit(writes)(X.values[0], np.array([0, 1, 0, 2, 1, 2]))

    def relabelled(x, codes):
        plain = np.array(codes)  # a copy, the library's own
        plain[plain == 2] = 0
        return x * codes + x * plain

    fast = lf.jit(relabelled)
    x = X.values[0]
    for codes in (np.array([0, 1, 0, 2, 1, 2]), np.array([0, 1, 0, 2, 1, 2])):
        np.testing.assert_array_equal(fast(x, codes), relabelled(x, codes))
        np.testing.assert_array_equal(codes, [0, 1, 0, 2, 1, 2])
    assert fast.traces == 1


def test_values_computed_from_float_arguments_keep_the_policy():
    labels = LABELS.values
    with pytest.raises(lf.ConversionError, match="lf.jit|inside a transform"):
        lf.jit(lambda x: pd.unique(np.asarray(x)))(X.values[0])
    with pytest.raises(lf.ConversionError):
        lf.jit(lambda x, g: pd.unique(np.asarray(g * (x > 0))))(X.values[0], labels)
    with pytest.raises(lf.DataDependentControlFlowError, match="lf.jit"):
        lf.jit(lambda x, g: x if (x[g] > 0).all() else -x)(X.values[0], labels)
    with pytest.raises(lf.DynamicShapeError, match="numpy.bincount under lf.jit"):
        lf.jit(lambda x: np.bincount((x > 0).astype(int)))(X.values[0])


def test_under_branches_agree_a_value_no_vmap_maps_is_guarded_whatever_its_dtype():
    def on_levels(x, levels):  # a library's check of a float argument, then NumPy's copy of it
        if np.any(np.diff(levels) <= 0):
            raise ValueError("levels must increase")
        return x.isel(t=slice(0, 3)) * np.asarray(levels)

    levels = np.array([1.0, 2.0, 5.0])
    fast = lf.jit(lf.vmap(on_levels, dim="sample", branches="agree"))
    for lv in (levels, levels, levels * 2):
        xr.testing.assert_allclose(fast(X, lv), loop(on_levels, X, lv), rtol=1e-14)
    assert fast.traces == 2
    assert "no vmap maps (branches='agree')" in fast.explain()
    with pytest.raises(ValueError, match="levels must increase"):
        fast(X, levels[::-1].copy())
    with pytest.raises(lf.DataDependentControlFlowError, match="lf.jit"):
        lf.jit(lf.vmap(on_levels, dim="sample"))(X, levels)


def test_a_mapped_label_argument_follows_vmaps_policy():
    mapped = xr.DataArray(np.tile(LABELS.values, (4, 1)), dims=("sample", "t"))
    with pytest.raises(lf.ConversionError, match="pandas.unique|concrete array"):
        lf.jit(lf.vmap(lambda x, g: pd.unique(g.values).size * x, dim="sample"))(X, mapped)


def test_labels_carried_through_a_chunked_program_stay_positions():
    # vmap(chunk_size, jit=True) carries the mapped dim's coordinate as data: it differs from
    # chunk to chunk, and must not become a guard (one trace for every chunk)
    def scaled(v):
        return v * 2

    out = lf.vmap(scaled, dim="sample", chunk_size=2, jit=True)(X)
    xr.testing.assert_identical(out, loop(scaled, X))


def test_dask_blocks_make_the_labels_concrete_in_each_block():
    pytest.importorskip("dask")
    import dask

    fast = lf.jit(lf.vmap(group_means, dim="sample"))
    other = LABELS.copy(data=np.array([1, 1, 0, 2, 0, 2]))
    with dask.config.set(scheduler="sync"):
        for labels in (LABELS, other):
            got = fast(X.chunk(sample=2), labels)
            assert got.chunks is not None  # nothing computed while the graph was built
            xr.testing.assert_allclose(got.compute(), loop(group_means, X, labels), rtol=1e-13)
