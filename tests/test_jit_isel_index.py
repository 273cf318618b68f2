"""``x.isel(t=i)`` with a traced position ``i`` under ``lf.jit`` (alone and around grad).

xarray decides which dims an indexing keeps before it indexes the data, and drops one
only for a concrete integer: labeled_func.xarray_methods indexes at a 0-d traced ``i`` as
NumPy indexes with an integer, so the direct form drops the dim as the function does; it
and the recipe (a length-1 dim, squeezed after) are recorded gathers that each replay
follows.  Oracles: the unjitted function, the argmax
computed by NumPy, central finite differences.
"""
import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

RNG = np.random.default_rng(23)


def series(n=6, peak=None):
    values = RNG.normal(size=n)
    if peak is not None:
        values[peak] = 5.0 + RNG.uniform()
    return xr.DataArray(values, dims="t", attrs={"units": "K"})


def pick_max(x):
    """The recipe: the value at the argmax along t, without dim t."""
    i = x.argmax("t")
    return x.isel(t=i.expand_dims("k")).squeeze("k", drop=True)


def central_differences(f, x, eps=1e-6):
    grad = np.zeros(x.shape)
    for k in range(x.size):
        step = np.zeros(x.shape)
        step.flat[k] = eps
        grad.flat[k] = (float(f(x + step)) - float(f(x - step))) / (2 * eps)
    return grad


def test_the_direct_form_drops_the_dim_and_follows_each_calls_position():
    direct = lambda v: v.isel(t=v.argmax("t"))  # noqa: E731
    brackets = lambda v: v[{"t": v.argmax("t")}]  # noqa: E731
    for f in (direct, brackets):
        jitted = lf.jit(f)
        for peak in (0, 3, 5):
            x = series(peak=peak)
            xr.testing.assert_identical(jitted(x), f(x))
        assert jitted.traces == 1
    x = series(peak=2)
    np.testing.assert_allclose(lf.jit(lf.grad(lambda v: direct(v).sum()))(x).values, np.eye(6)[2])


def test_the_direct_form_under_vmap_inside_jit_is_the_loop():
    x = xr.DataArray(RNG.normal(size=(3, 5)), dims=("sample", "t"))
    f = lambda v: v.isel(t=v.argmax("t"))  # noqa: E731
    loop = xr.concat([f(x.isel(sample=i)) for i in range(3)], dim="sample")
    xr.testing.assert_identical(lf.jit(lf.vmap(f, dim="sample"))(x), loop)


def test_other_value_errors_pass_through_unchanged():
    with pytest.raises(ValueError, match="not found in array dimensions|do not exist"):
        lf.jit(lambda v: v.isel(nope=0))(series())


@pytest.mark.parametrize("peaks", [[0, 3, 5, 1], [5, 5, 2]])
def test_the_recipe_replays_with_each_calls_index(peaks):
    jitted = lf.jit(pick_max)
    for peak in peaks:
        x = series(peak=peak)
        got = jitted(x)
        xr.testing.assert_identical(got, pick_max(x))
        assert float(got) == x.values[peak] == x.values.max()
    assert jitted.traces == 1


def test_a_position_from_arithmetic_replays_too():
    def shifted(x, offset):
        i = (x.argmin("t") + offset) % x.sizes["t"]
        return x.isel(t=i.expand_dims("k")).squeeze("k", drop=True) * 2
    jitted = lf.jit(shifted)
    for peak, offset in [(1, 2), (4, 3), (0, 5)]:
        x = series()
        x[peak] = -10.0
        offset = xr.DataArray(offset)
        xr.testing.assert_allclose(jitted(x, offset), shifted(x, offset))
        assert float(jitted(x, offset)) == 2 * x.values[(peak + int(offset)) % 6]
    assert jitted.traces == 1


def test_a_per_row_position_is_a_gather_under_jit():
    """A 1-D index (one position per row) is an array index xarray handles: it works as is."""
    f = lambda x: x.isel(t=x.argmax("t"))
    jitted = lf.jit(f)
    for _ in range(3):
        x = xr.DataArray(RNG.normal(size=(4, 5)), dims=("s", "t"))
        got = jitted(x)
        xr.testing.assert_identical(got, f(x))
        np.testing.assert_array_equal(got.values, x.values.max(axis=1))
    assert jitted.traces == 1


@pytest.mark.parametrize("peaks", [[2, 0, 5]])
def test_the_gradient_is_one_hot_at_each_calls_argmax(peaks):
    loss = lambda x: (pick_max(x) ** 2).sum()
    jitted = lf.jit(lf.grad(loss))
    for peak in peaks:
        x = series(peak=peak)
        got = jitted(x)
        expected = np.zeros(x.shape)
        expected[peak] = 2 * x.values[peak]
        np.testing.assert_allclose(got.values, expected)
        np.testing.assert_allclose(got.values, central_differences(loss, x), atol=1e-6)
    assert jitted.traces == 1


def test_an_index_coordinate_gives_its_label_and_dates_say_to_drop_it():
    x = series().assign_coords(t=np.arange(6.0) * 0.5)
    jitted = lf.jit(pick_max)
    for values in (x, x * -1.0):
        xr.testing.assert_identical(jitted(values), pick_max(values))   # the label at the peak: a coordinate
    dated = x.assign_coords(t=xr.date_range("2000-01-01", periods=6))
    with pytest.raises(lf.UnsupportedOperationError, match=r"coordinate along 't'.*drop that coordinate"):
        lf.jit(pick_max)(dated)
    dropped = lf.jit(lambda v: pick_max(v.drop_vars("t")))
    xr.testing.assert_identical(dropped(dated), pick_max(dated.drop_vars("t")))


def test_a_per_row_position_differentiates_to_a_one_hot_per_row():
    """np.moveaxis with an array of axes (xarray's vectorized indexing) under grad and jit."""
    loss = lambda x: (x.isel(t=x.argmax("t")) ** 2).sum()
    x = xr.DataArray(RNG.normal(size=(4, 5)), dims=("s", "t"))
    expected = np.zeros(x.shape)
    rows = np.arange(4)
    expected[rows, x.values.argmax(axis=1)] = 2 * x.values.max(axis=1)
    np.testing.assert_allclose(lf.grad(loss)(x).values, expected)
    np.testing.assert_allclose(lf.jit(lf.grad(loss))(x).values, expected)
    np.testing.assert_allclose(lf.grad(loss)(x).values, central_differences(loss, x), atol=1e-6)
