"""``x.weighted(w)`` with traced weights (issue 26): xarray checks the weights for NaN with
``bool()``; xarray_methods makes that check per example (ValueError naming the examples
whose weights hold NaN, as the loop raises for them; a guard under lf.jit), and the
reductions are xarray's.  Oracles: the per-example loop, central differences, the
un-jitted function."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func import xarray_methods

REDUCTIONS = {
    "mean": lambda d, w: d.weighted(w).mean("x"),
    "sum": lambda d, w: d.weighted(w).sum("x"),
    "sum_of_weights": lambda d, w: d.weighted(w).sum_of_weights("x"),
    "sum_of_squares": lambda d, w: d.weighted(w).sum_of_squares("x"),
    "std": lambda d, w: d.weighted(w).std("x"),
    "var": lambda d, w: d.weighted(w).var("x"),
    "mean_all": lambda d, w: d.weighted(w).mean(),
    "dataset_mean": lambda d, w: d.to_dataset(name="a").assign(b=d * 2 + 1).weighted(w).mean("x"),
}


def data(seed=0, nan=True):
    rng = np.random.default_rng(seed)
    d = xr.DataArray(rng.normal(size=(3, 5, 2)), dims=("s", "x", "y"), coords={"s": ["a", "b", "c"]})
    if nan:
        d[1, 3, 0] = np.nan  # a missing value of the data (skipped by xarray), not of the weights
    w = xr.DataArray(rng.uniform(0.5, 2.0, size=(3, 5)), dims=("s", "x"), coords={"s": ["a", "b", "c"]})
    return d, w


def loop(func, *args, dim="s"):
    return xr.concat([func(*(a.isel({dim: i}) for a in args)) for i in range(args[0].sizes[dim])], dim)


def central(func, w, eps=1e-6):
    """d sum(func(w)) / d w by central differences."""
    flat = w.values.ravel()
    out = np.empty_like(flat)
    for k in range(flat.size):
        up, down = flat.copy(), flat.copy()
        up[k] += eps
        down[k] -= eps
        out[k] = (float(func(w.copy(data=up.reshape(w.shape)))) - float(func(w.copy(data=down.reshape(w.shape))))) / (2 * eps)
    return out.reshape(w.shape)


def test_the_hook_is_installed():
    assert xarray_methods.STATUS == "installed"
    assert xarray_methods.original("__init__") is not None


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_mapped_weights_under_vmap_equal_the_loop(name):
    f = REDUCTIONS[name]
    d, w = data()
    want = loop(f, d, w)
    got = lf.vmap(f, dim="s")(d, w)
    xr.testing.assert_allclose(got.transpose(*want.dims) if hasattr(got, "dims") else got, want, rtol=1e-12)
    # weights mapped, data not; and the other way round
    d0 = d.isel(s=0, drop=True)
    want = loop(lambda w: f(d0, w), w)
    xr.testing.assert_allclose(lf.vmap(lambda w: f(d0, w), dim="s")(w), want, rtol=1e-12)


@pytest.mark.parametrize("name", ["mean", "sum", "sum_of_weights", "std", "var", "dataset_mean"])
def test_grad_with_respect_to_the_weights_is_central_differences(name):
    f = REDUCTIONS[name]
    d, w = data(1, nan=False)
    d, w = d.isel(s=0), w.isel(s=0)

    def total(weights):
        out = f(d, weights)
        return sum(v.sum() for v in out.data_vars.values()) if isinstance(out, xr.Dataset) else out.sum()

    got = lf.grad(total)(w)
    np.testing.assert_allclose(got.values, central(total, w), rtol=1e-6, atol=1e-8)
    if name != "dataset_mean":  # per-example gradients: vmap of grad, against the loop of grad
        dd, ww = data(1, nan=False)
        per_weights = lf.grad(lambda a, b: f(a, b).sum(), argnums=1)
        want = loop(per_weights, dd, ww)
        xr.testing.assert_allclose(lf.vmap(per_weights, dim="s")(dd, ww).transpose(*want.dims), want, rtol=1e-10)


@pytest.mark.parametrize("name", ["mean", "std", "sum_of_weights", "dataset_mean"])
def test_under_jit_equals_the_function(name):
    f = REDUCTIONS[name]
    d, w = data(2)
    d, w = d.drop_vars("s"), w.drop_vars("s")  # one signature for every example (no label of s)
    jitted = lf.jit(f)
    for k in range(3):
        xr.testing.assert_allclose(jitted(d.isel(s=k), w.isel(s=k)), f(d.isel(s=k), w.isel(s=k)), rtol=1e-12)
    per_example = lf.jit(lf.vmap(f, dim="s"))
    xr.testing.assert_allclose(per_example(d, w), lf.vmap(f, dim="s")(d, w), rtol=1e-12)
    xr.testing.assert_allclose(per_example(d, w * 3), loop(f, d, w * 3), rtol=1e-12)
    assert jitted.traces == 1 and per_example.traces == 1
    grad = lf.jit(lf.grad(lambda w: f(d.isel(s=0), w).to_array().sum() if name == "dataset_mean"
                          else f(d.isel(s=0), w).sum()))
    want = lf.grad(lambda w: f(d.isel(s=0), w).to_array().sum() if name == "dataset_mean"
                   else f(d.isel(s=0), w).sum())(w.isel(s=0))
    xr.testing.assert_allclose(grad(w.isel(s=0)), want, rtol=1e-12)


# --- NaN weights: xarray's ValueError, naming the examples -----------------------------------------------
def with_nan(w, examples):
    w = w.copy()
    for k in examples:
        w[k, 2] = np.nan
    return w


def test_nan_weights_under_vmap_raise_naming_the_examples():
    d, w = data()
    f = REDUCTIONS["mean"]
    bad = with_nan(w, [1])
    with pytest.raises(ValueError, match="cannot contain missing values"):  # the loop's own error
        f(d.isel(s=1), bad.isel(s=1))
    with pytest.raises(ValueError, match=r"cannot contain missing values.*of example 1 \(s='b'\)"):
        lf.vmap(f, dim="s")(d, bad)
    with pytest.raises(ValueError, match=r"examples 0, 2 \(s='a', s='c'\)"):
        lf.vmap(f, dim="s")(d, with_nan(w, [0, 2]))
    with pytest.raises(ValueError, match="cannot contain missing values"):
        lf.grad(lambda w: f(d.isel(s=0), w).sum())(bad.isel(s=1))


def test_nan_weights_at_a_later_jitted_call_raise_through_the_guard():
    d, w = data()
    f = REDUCTIONS["std"]
    per_example = lf.jit(lf.vmap(f, dim="s"))
    per_example(d, w)
    with pytest.raises(ValueError, match=r"of example 2 \(s='c'\)"):
        per_example(d, with_nan(w, [2]))
    xr.testing.assert_allclose(per_example(d, w + 1), loop(f, d, w + 1), rtol=1e-12)
    assert per_example.traces == 1  # the guard held again: the program replays
    single = lf.jit(f)
    single(d.isel(s=0), w.isel(s=0))
    with pytest.raises(ValueError, match="cannot contain missing values"):
        single(d.isel(s=0), with_nan(w, [0]).isel(s=0))
    with pytest.raises(ValueError, match="cannot contain missing values"):  # NaN at the first call: no program
        lf.jit(f)(d.isel(s=1), with_nan(w, [1]).isel(s=1))
    assert "the check of weighted() that the weights hold no NaN" in repr(single.cache[next(iter(single.cache))].guards)


def test_integer_and_boolean_weights_need_no_check():
    d, w = data()
    for weights in ((w * 10).astype(int), w > 1.0):
        f = REDUCTIONS["mean"]
        xr.testing.assert_allclose(lf.vmap(f, dim="s")(d, weights), loop(f, d, weights), rtol=1e-12)


def test_untraced_weights_are_xarrays_own_path():
    d, w = data()
    f = REDUCTIONS["mean"]
    w0 = w.isel(s=0, drop=True)
    want = loop(lambda dd: f(dd, w0), d)
    xr.testing.assert_allclose(lf.vmap(lambda dd: f(dd, w0), dim="s")(d), want, rtol=1e-12)
    with pytest.raises(ValueError, match="cannot contain missing values"):
        lf.vmap(lambda dd: f(dd, with_nan(w, [0]).isel(s=0, drop=True)), dim="s")(d)
    with pytest.raises(ValueError, match="must be a DataArray"):
        lf.vmap(lambda dd: dd.weighted(np.ones(5)), dim="s")(d)


def test_jvp_in_the_weights_is_central_differences():
    d, w = data(3, nan=False)
    d0, w0 = d.isel(s=0, drop=True), w.isel(s=0, drop=True)
    f = REDUCTIONS["std"]
    direction = xr.ones_like(w0) * np.linspace(-1.0, 1.0, w0.size)
    _, tangent = lf.jvp(lambda w: f(d0, w), (w0,), (direction,))
    eps = 1e-6
    want = (f(d0, w0 + eps * direction) - f(d0, w0 - eps * direction)) / (2 * eps)
    np.testing.assert_allclose(tangent.values, want.values, rtol=1e-6, atol=1e-9)


def test_dask_blocks_check_their_weights():
    pytest.importorskip("dask")
    import dask

    d, w = data(4)
    f = REDUCTIONS["mean"]
    with dask.config.set(scheduler="sync"):
        for transform in (lf.vmap(f, dim="s"), lf.jit(lf.vmap(f, dim="s"))):
            got = transform(d.chunk(s=2), w.chunk(s=2))
            assert got.chunks is not None
            xr.testing.assert_allclose(got.compute(), loop(f, d, w), rtol=1e-12)
            with pytest.raises(ValueError, match="NaN in the weights of example 0 of its Dask block"):
                transform(d.chunk(s=2), with_nan(w, [2]).chunk(s=2)).compute()
