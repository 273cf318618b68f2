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
    expected_vars = {"vi", "vi_std", "vi_conf"} | ({"dgsm", "dgsm_conf", "ST_bound"} if bounds else set())
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
    for name in expected_vars - {"vi", "vi_conf"}:
        np.testing.assert_allclose(computed[name].values, in_memory[name].values, rtol=1e-12, atol=0)


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
    for name in ("vi", "vi_std", "vi_conf", "dgsm", "dgsm_conf", "ST_bound"):
        np.testing.assert_allclose(computed[name].values, in_memory[name].values, rtol=1e-12, atol=0)
    expected_k = ((-t * samples.c * np.exp(-samples.k * t)) ** 2).mean("sample")
    np.testing.assert_allclose(computed.vi.sel(param="k").values, expected_k.values, rtol=1e-10)


def test_the_laziness_check_catches_an_eager_computation():
    """The guard itself: a model that computes its dask input is caught."""
    samples = uniform_samples(n=50).chunk(sample=20)
    with pytest.raises(AssertionError, match="computed a dask collection"):
        build_lazily(lambda p: ishigami(p) + float(samples.x1.sum()), samples, num_resamples=2)


def test_the_bootstrap_does_not_depend_on_chunks_spanning_several_weight_blocks():
    """10,000 samples span three seeded blocks of 4,096 bootstrap weights; chunks of 3,000
    and 777 cut them anywhere."""
    samples = uniform_samples(n=10_000, seed=6)
    in_memory = lf.sensitivity.dgsm(ishigami, samples, bounds=BOUNDS, num_resamples=15, seed=2)
    for size in (3000, 777):
        lazy = build_lazily(ishigami, samples.chunk(sample=size), bounds=BOUNDS, num_resamples=15, seed=2)
        xr.testing.assert_allclose(lazy.compute(), in_memory, rtol=1e-12)


def test_a_dask_sample_matrix_with_a_salib_problem_stays_lazy():
    import dask.array as da

    X = np.stack([uniform_samples(n=900, seed=1)[name].values for name in NAMES], axis=1)
    problem = {"names": list(NAMES), "bounds": [list(BOUNDS[n]) for n in NAMES]}

    def ishigami_rows(X):
        return np.sin(X[:, 0]) + A * np.sin(X[:, 1]) ** 2 + B * X[:, 2] ** 4 * np.sin(X[:, 0])

    lazy = build_lazily(ishigami_rows, da.from_array(X, chunks=(250, 3)), problem=problem, num_resamples=10, seed=0)
    in_memory = lf.sensitivity.dgsm(ishigami_rows, X, problem=problem, num_resamples=10, seed=0)
    xr.testing.assert_allclose(lazy.compute(), in_memory, rtol=1e-12)


def test_progress_on_dask_samples_points_to_dasks_progress_bar():
    with pytest.raises(ValueError, match="progress=.*ProgressBar"):
        lf.sensitivity.dgsm(ishigami, uniform_samples(n=100).chunk(sample=50), progress=True)


def test_chunk_size_on_dask_samples_bounds_each_block_and_changes_nothing():
    samples = uniform_samples(n=600, seed=9)
    lazy = build_lazily(ishigami, samples.chunk(sample=300), bounds=BOUNDS, num_resamples=5, seed=1, chunk_size=64)
    in_memory = lf.sensitivity.dgsm(ishigami, samples, bounds=BOUNDS, num_resamples=5, seed=1)
    xr.testing.assert_allclose(lazy.compute(), in_memory, rtol=1e-12)
