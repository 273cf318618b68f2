"""lf.sensitivity.dgsm on dask-backed samples: lazy while building, and the same
numbers as in memory once computed."""
import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

dask = pytest.importorskip("dask")
from dask.callbacks import Callback  # noqa: E402

A, B = 7.0, 0.1
NAMES = ("x1", "x2", "x3")
BOUNDS = {name: (-np.pi, np.pi) for name in NAMES}


def ishigami(p):
    return np.sin(p.x1) + A * np.sin(p.x2) ** 2 + B * p.x3 ** 4 * np.sin(p.x1)


def uniform_samples(n=1000, seed=0):
    rng = np.random.default_rng(seed)
    return xr.Dataset({name: ("sample", rng.uniform(-np.pi, np.pi, n)) for name in NAMES})


class CountTasks(Callback):
    """Counts every task any dask scheduler runs while it is active."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def _posttask(self, key, result, dsk, state, worker_id):
        self.count += 1


def refuse_to_compute(*args, **kwargs):
    raise AssertionError("dgsm computed a dask collection while building its result")


def build_lazily(model, samples, **kwargs):
    """dgsm on `samples`, asserting that no dask task runs while it builds."""
    counter = CountTasks()
    with dask.config.set(scheduler=refuse_to_compute), counter:
        result = lf.sensitivity.dgsm(model, samples, **kwargs)
    assert counter.count == 0
    return result


@pytest.mark.parametrize("bounds", [None, BOUNDS], ids=["vi", "with-bounds"])
def test_dgsm_builds_lazily_and_computes_the_in_memory_result(bounds):
    samples = uniform_samples()
    lazy = build_lazily(ishigami, samples.chunk(sample=300), bounds=bounds, num_resamples=20, seed=3)
    expected_vars = {"vi", "vi_conf"} | ({"dgsm"} if bounds else set())
    assert set(lazy.data_vars) == expected_vars
    for name in expected_vars:
        assert dask.is_dask_collection(lazy[name].variable), name

    computed = lazy.compute()
    in_memory = lf.sensitivity.dgsm(ishigami, samples, bounds=bounds, num_resamples=20, seed=3)
    assert computed.vi.dims == in_memory.vi.dims == ("param",)
    assert computed.param.values.tolist() == list(NAMES)
    np.testing.assert_allclose(computed.vi.values, in_memory.vi.values, rtol=1e-12, atol=0)
    # The bootstrap indices come from NumPy's generator whatever the chunks are, so the
    # resampled means (and vi_conf) agree up to the order of summation.
    np.testing.assert_allclose(computed.vi_conf.values, in_memory.vi_conf.values, rtol=1e-12, atol=0)
    if bounds:
        np.testing.assert_allclose(computed.dgsm.values, in_memory.dgsm.values, rtol=1e-12, atol=0)


def test_vi_conf_does_not_depend_on_the_chunks():
    samples = uniform_samples(n=400, seed=5)
    results = [
        build_lazily(ishigami, samples.chunk(sample=size), num_resamples=10, seed=11).compute()
        for size in (400, 150, 64)
    ]
    for other in results[1:]:
        np.testing.assert_allclose(other.vi_conf.values, results[0].vi_conf.values, rtol=1e-12, atol=0)
        np.testing.assert_allclose(other.vi.values, results[0].vi.values, rtol=1e-12, atol=0)


def test_dgsm_with_output_dims_on_dask_samples():
    t = xr.DataArray(np.linspace(0, 1, 5), dims="t")
    rng = np.random.default_rng(1)
    samples = xr.Dataset({name: ("sample", rng.uniform(0.5, 1.5, 600)) for name in ("k", "c")})
    bounds = {"k": (0.5, 1.5), "c": (0.5, 1.5)}

    def decay(p):
        return p.c * np.exp(-p.k * t)

    lazy = build_lazily(decay, samples.chunk(sample=250), bounds=bounds, num_resamples=10, seed=0)
    assert lazy.vi.dims == ("param", "t")
    computed = lazy.compute()
    in_memory = lf.sensitivity.dgsm(decay, samples, bounds=bounds, num_resamples=10, seed=0)
    for name in ("vi", "vi_conf", "dgsm"):
        np.testing.assert_allclose(computed[name].values, in_memory[name].values, rtol=1e-12, atol=0)
    expected_k = ((-t * samples.c * np.exp(-samples.k * t)) ** 2).mean("sample")
    np.testing.assert_allclose(computed.vi.sel(param="k").values, expected_k.values, rtol=1e-10)


def test_the_laziness_check_catches_an_eager_computation():
    """The guard itself: a model that computes its dask input is caught."""
    samples = uniform_samples(n=50).chunk(sample=20)
    with pytest.raises(AssertionError, match="computed a dask collection"):
        build_lazily(lambda p: ishigami(p) + float(samples.x1.sum()), samples, num_resamples=2)
