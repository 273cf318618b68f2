"""The engine's own promises: floors, escapes, per-thread state, conversions,
in-place write-through, and the kernels added beside the op table."""
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func.engine import BatchLevel, active, current_levels


def test_importing_labeled_func_never_imports_cupy():
    code = "import sys, labeled_func; sys.exit(1 if 'cupy' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_escape_is_detected_in_any_argument_not_only_self():
    leaked = []

    def f(x):
        leaked.append(x.data)
        return x * 2

    x = xr.DataArray(np.arange(6.0).reshape(3, 2), dims=("sample", "t"))
    lf.vmap(f, dim="sample")(x)
    (dead,) = leaked
    live = np.ones(2)
    with pytest.raises(lf.EscapedTracerError, match="has_aux"):
        np.concatenate([live, dead])
    with pytest.raises(lf.EscapedTracerError):
        np.add(live, dead)


def test_transform_stack_is_per_thread():
    seen = {}

    def worker():
        seen["worker"] = current_levels()

    with active(BatchLevel(3)):
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        seen["main"] = current_levels()
    assert seen["worker"] == ()
    assert len(seen["main"]) == 1
    assert current_levels() == ()


@pytest.mark.parametrize(
    "statement, error",
    [
        (lambda x: bool(x.sum() > 0), lf.DataDependentControlFlowError),
        (lambda x: float(x.sum()), lf.ItemError),
        (lambda x: int(x.sum()), lf.ItemError),
        (lambda x: f"{x.sum():.3f}", lf.ItemError),
        (lambda x: x.sum().item(), lf.ItemError),
        (lambda x: x.values, lf.ConversionError),
        (lambda x: np.asarray(x), lf.ConversionError),
        (lambda x: x.data.tolist(), lf.ItemError),
    ],
    ids=["bool", "float", "int", "format", "item", "values", "asarray", "tolist"],
)
def test_conversions_raise_the_policy_error_of_their_kind(statement, error):
    x = xr.DataArray(np.arange(6.0).reshape(3, 2), dims=("sample", "t"))
    with pytest.raises(error):
        lf.vmap(lambda v: statement(v) and v, dim="sample")(x)


def test_real_and_imag_record_nothing_and_repr_works():
    def f(x):
        data = x.data
        assert data.real is data
        assert np.all(np.asarray(data.imag) == 0) and data.imag.shape == data.shape
        text = repr(x) + str(data) + data._repr_inline_(40)
        assert "BatchTracer" in text
        return x + 1

    x = xr.DataArray(np.arange(6.0).reshape(3, 2), dims=("sample", "t"))
    xr.testing.assert_identical(lf.vmap(f, dim="sample")(x), x + 1)


def test_inplace_write_through_in_nested_vmaps():
    x = np.arange(12.0).reshape(3, 4)
    original = x.copy()
    y = np.ones((3, 4))

    def f(a, b):
        a += b
        return a

    out = lf.vmap(lf.vmap(f, in_dims=(0, 0)), in_dims=(0, 0))(x, y)
    np.testing.assert_array_equal(out, original + 1)
    np.testing.assert_array_equal(x, original + 1)  # the caller's array, as the for-loop would


def test_inplace_on_read_only_input_updates_functionally():
    x = np.arange(6.0).reshape(3, 2)
    x.flags.writeable = False

    def f(a):
        a *= 2
        return a

    np.testing.assert_array_equal(lf.vmap(f, in_dims=(0,))(x), np.arange(6.0).reshape(3, 2) * 2)
    np.testing.assert_array_equal(x, np.arange(6.0).reshape(3, 2))


def test_inplace_integer_target_rejects_float_result_like_numpy():
    x = np.arange(6).reshape(3, 2)
    with pytest.raises(TypeError, match="same_kind"):
        lf.vmap(lambda a: a.__itruediv__(2), in_dims=(0,))(x)
    with pytest.raises(TypeError):
        a = np.arange(2)
        a /= 2  # the NumPy behaviour the rule copies


def test_unmapped_lookup_table_with_mapped_index():
    table = np.arange(10.0) ** 2
    index = np.array([[1, 2], [3, 4], [0, 9]])
    got = lf.vmap(lambda i: np.take_along_axis(table, i, axis=0), in_dims=(0,))(index)
    np.testing.assert_array_equal(got, np.stack([table[i] for i in index]))
    with pytest.raises(lf.ConversionError, match="take_along_axis"):
        lf.vmap(lambda i: table[i], in_dims=(0,))(index)


@pytest.mark.parametrize("skipna", [True, False])
def test_quantile_and_median_match_loop(skipna):
    rng = np.random.default_rng(3)
    data = rng.normal(size=(4, 9))
    data[1, 3] = np.nan
    x = xr.DataArray(data, dims=("sample", "t"), coords={"t": np.arange(9)})

    def f(v):
        return v.quantile([0.1, 0.5, 0.8], dim="t", skipna=skipna) + v.median("t", skipna=skipna)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        loop = xr.concat([f(x.isel(sample=i)) for i in range(4)], dim="sample")
        got = lf.vmap(f, dim="sample")(x)
    xr.testing.assert_allclose(got, loop.transpose(*got.dims))


def test_idxmax_gathers_the_labels_under_vmap():
    x = xr.DataArray(np.random.default_rng(0).normal(size=(3, 4)), dims=("sample", "t"),
                     coords={"t": [10, 20, 30, 40]})
    labels = lf.vmap(lambda v: v.idxmax("t"), dim="sample")(x)
    np.testing.assert_array_equal(labels.values, np.array([10, 20, 30, 40])[np.argmax(x.values, axis=1)])
    positions = lf.vmap(lambda v: v.argmax("t"), dim="sample")(x)
    np.testing.assert_array_equal(positions.values, np.argmax(x.values, axis=1))


def test_boolean_mask_on_indexed_dim_is_a_dynamic_shape_error():
    x = xr.DataArray([[1.0, -2, 3], [-4, 2, 0]], dims=("sample", "t"), coords={"t": [1, 2, 3]})
    with pytest.raises(lf.DynamicShapeError):
        lf.vmap(lambda v: v[v > 0].sum(), dim="sample")(x)
    with pytest.raises(lf.DynamicShapeError):
        lf.vmap(lambda v: v.where(v > 0, drop=True), dim="sample")(x)
