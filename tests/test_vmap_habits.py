"""torch.func habits of lf.vmap: a bare int (or None) in_dims, per-output out_dims, and
x.isel(t=i) with a 0-d index computed per example.  Oracle: the per-example loop."""
import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

RNG = np.random.default_rng(14)


def loop(f, *args, axis=0, out_axis=0):
    """The for-loop over ``axis`` of every positional argument, stacked at ``out_axis``."""
    n = args[0].shape[axis]
    return np.stack([f(*(np.take(a, i, axis=axis) for a in args)) for i in range(n)], axis=out_axis)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_bare_int_in_dims_maps_every_positional_argument(axis):
    a, b = RNG.normal(size=(3, 4)), RNG.normal(size=(3, 4))
    f = lambda u, v: np.sin(u) * v.sum()
    np.testing.assert_allclose(lf.vmap(f, in_dims=axis)(a, b), loop(f, a, b, axis=axis))


def test_bare_int_in_dims_leaves_keyword_arguments_unmapped():
    a, scale = RNG.normal(size=(3, 2)), np.array([1.0, 10.0])
    f = lambda u, scale: u * scale
    np.testing.assert_allclose(lf.vmap(f, in_dims=0)(a, scale=scale), a * scale)


def test_bare_int_in_dims_is_a_position_for_labeled_arguments():
    x = xr.DataArray(RNG.normal(size=(3, 2)), dims=("sample", "t"), coords={"sample": [1, 2, 3]})
    f = lambda v: (v ** 2).sum("t")
    expected = xr.concat([f(x.isel(sample=i)) for i in range(3)], dim="sample")
    xr.testing.assert_allclose(lf.vmap(f, in_dims=0)(x), expected)
    by_t = lf.vmap(lambda v: v.sum("sample"), in_dims=1)(x)  # position 1 is "t"
    xr.testing.assert_allclose(by_t, x.sum("sample"))


def test_in_dims_none_with_axis_size_maps_nothing():
    a = RNG.normal(size=2)
    out = lf.vmap(lambda u: u * 2, in_dims=None, axis_size=3)(a)
    np.testing.assert_allclose(out, np.stack([a * 2] * 3))


def test_bool_and_str_in_dims_are_refused():
    with pytest.raises(ValueError, match="in_dims must be an int"):
        lf.vmap(lambda u: u, in_dims=True)
    with pytest.raises(ValueError, match="pass dim='sample'"):
        lf.vmap(lambda u: u, in_dims="sample")


@pytest.mark.parametrize("chunk_size", [None, 2])
def test_out_dims_per_output_with_an_unmapped_output(chunk_size):
    a = RNG.normal(size=(5, 3))
    table = np.arange(4.0)
    f = lambda u: (np.cos(u), table * 2)
    first, second = lf.vmap(f, in_dims=0, out_dims=(1, None), chunk_size=chunk_size)(a)
    np.testing.assert_allclose(first, loop(lambda u: f(u)[0], a, out_axis=1))
    np.testing.assert_allclose(second, f(a[0])[1])  # once, as every example has it


def test_out_dims_per_output_on_labeled_outputs():
    x = xr.DataArray(RNG.normal(size=(3, 2)), dims=("sample", "t"))
    grid = xr.DataArray([0.0, 1.0], dims="t")
    f = lambda v: {"scaled": v * 2, "grid": grid + 1}
    out = lf.vmap(f, dim="sample", out_dims={"scaled": 1, "grid": None})(x)
    assert out["scaled"].dims == ("t", "sample")
    xr.testing.assert_allclose(out["scaled"], (x * 2).transpose("t", "sample"))
    xr.testing.assert_identical(out["grid"], grid + 1)


def test_out_dims_single_entry_tuple_for_one_output():
    a = RNG.normal(size=(3, 2))
    np.testing.assert_allclose(lf.vmap(np.sin, in_dims=0, out_dims=(1,))(a), np.sin(a).T)


def test_out_dims_none_for_a_mapped_output_names_it():
    x = xr.DataArray(RNG.normal(size=(3, 2)), dims=("sample", "t"))
    with pytest.raises(ValueError, match=r"out_dims gives None for output\[1\].*differs per example"):
        lf.vmap(lambda v: (v, v.sum()), dim="sample", out_dims=(0, None))(x)
    with pytest.raises(ValueError, match=r"output\[0\]"):
        lf.vmap(lambda u: (u * 2,), in_dims=0, out_dims=(None,))(np.ones((3, 2)))


def test_out_dims_that_do_not_fit_the_output_are_refused():
    with pytest.raises(ValueError, match=r"out_dims=\(0, None, 1\) does not fit.*a tuple of 2"):
        lf.vmap(lambda u: (u, u), in_dims=0, out_dims=(0, None, 1))(np.ones((3, 2)))
    with pytest.raises(ValueError, match="out_dims='first'"):
        lf.vmap(lambda u: u, in_dims=0, out_dims="first")


# --- x.isel(t=i) with a 0-d index per example --------------------------------------------------
def test_isel_with_a_0d_mapped_index_is_the_loop():
    x = xr.DataArray(RNG.normal(size=(3, 4)), dims=("sample", "t"))
    loop = xr.concat([v.isel(t=v.argmax("t")) for v in (x.isel(sample=i) for i in range(3))], dim="sample")
    xr.testing.assert_identical(lf.vmap(lambda v: v.isel(t=v.argmax("t")), dim="sample")(x), loop)


def test_the_recipe_of_the_isel_message_matches_the_loop():
    x = xr.DataArray(RNG.normal(size=(3, 4)), dims=("sample", "t"))
    loop_result = xr.concat([v.isel(t=v.argmax("t")) for v in (x.isel(sample=i) for i in range(3))], dim="sample")
    recipe = lambda v: v.isel(t=v.argmax("t").expand_dims("k")).squeeze("k", drop=True)
    xr.testing.assert_allclose(lf.vmap(recipe, dim="sample")(x), loop_result)
