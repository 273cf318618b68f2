"""vmap over dask chunks on a real ``distributed.LocalCluster`` (two worker processes).

Oracles: closed-form per-sample gradients and the in-memory vmap.  The cluster is
started once for this module and closed even when a test fails.
"""

import os
import signal
import time
import warnings

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.slow

N = 20_000
RTOL = 1e-12


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       dashboard_address=None)
    try:
        with distributed.Client(cluster) as client:
            yield client
    finally:
        cluster.close()


def samples(n=N, seed=0):
    rng = np.random.default_rng(seed)
    return xr.Dataset({"a": ("sample", rng.uniform(-2, 2, n)), "b": ("sample", rng.uniform(-2, 2, n))},
                      coords={"sample": np.arange(n)}, attrs={"source": "uniform"})


def model(ds):
    return np.sin(ds.a) * ds.b + ds.a ** 2


def ishigami(ds, a=7.0, b=0.1):
    return np.sin(ds.x1) + a * np.sin(ds.x2) ** 2 + b * ds.x3 ** 4 * np.sin(ds.x1)


def test_per_sample_gradients_match_the_closed_form(client):
    ds = samples()
    lazy = lf.vmap(lf.grad(model), dim="sample")(ds.chunk({"sample": N // 4}))
    assert lazy.a.chunks == ((N // 4,) * 4,)
    result = client.compute(lazy).result()
    np.testing.assert_allclose(result.a, np.cos(ds.a) * ds.b + 2 * ds.a, rtol=RTOL)
    np.testing.assert_allclose(result.b, np.sin(ds.a), rtol=RTOL)
    xr.testing.assert_identical(result.sample, ds.sample)
    assert result.attrs == {"source": "uniform"}


def test_ishigami_dgsm_is_a_dask_reduction_over_per_sample_gradients(client):
    rng = np.random.default_rng(1)
    ds = xr.Dataset({k: ("sample", rng.uniform(-np.pi, np.pi, N)) for k in ("x1", "x2", "x3")})
    gradients = lf.vmap(lf.grad(ishigami), dim="sample")(ds.chunk({"sample": N // 4}))
    dgsm = (gradients ** 2).mean("sample")  # lazy
    assert dgsm.x1.chunks is not None
    result = dgsm.compute()
    x1, x2, x3 = ds.x1, ds.x2, ds.x3
    closed_form = {"x1": np.cos(x1) * (1 + 0.1 * x3 ** 4), "x2": 14 * np.sin(x2) * np.cos(x2),
                   "x3": 0.4 * x3 ** 3 * np.sin(x1)}
    for name, gradient in closed_form.items():
        np.testing.assert_allclose(float(result[name]), float((gradient ** 2).mean()), rtol=1e-10)


def test_large_captured_array_and_parameter_do_not_make_a_large_graph(client):
    ds = samples()
    table = np.linspace(0.0, 1.0, 2_000_000)  # 16 MB, over Dask's 10 MB warning threshold

    def captured(ds):
        return ds.a * table[-1] + ds.b

    def parameter(ds, table):
        return ds.a * table[-1] + ds.b

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Sending large graph of size ..." would fail here
        first = client.compute(lf.vmap(captured, dim="sample")(ds.chunk({"sample": N // 4}))).result()
        second = client.compute(lf.vmap(parameter, dim="sample")(ds.chunk({"sample": N // 4}), table)).result()
    np.testing.assert_allclose(first, ds.a + ds.b, rtol=RTOL)
    np.testing.assert_allclose(second, ds.a + ds.b, rtol=RTOL)


def test_the_parameters_travel_once_per_graph(client):
    ds = samples()
    weights = xr.DataArray(np.arange(5.0), dims="k")
    lazy = lf.vmap(lambda ds, w: ds.a * w, dim="sample")(ds.chunk({"sample": N // 4}), weights)
    graph = dict(lazy.data.__dask_graph__())
    skeletons = [k for k in graph if str(k).startswith("vmap-skeleton")]
    assert len(skeletons) == 1
    np.testing.assert_allclose(client.compute(lazy).result(), ds.a * weights, rtol=RTOL)


def test_a_killed_worker_does_not_change_the_result(client):
    ds = samples()

    def slow(ds):
        time.sleep(0.5)  # each block; the kill lands while blocks are running
        return model(ds)

    lazy = lf.vmap(lf.grad(slow), dim="sample")(ds.chunk({"sample": N // 8}))
    pids = client.run(os.getpid)
    future = client.compute(lazy)
    deadline = time.monotonic() + 10
    while not client.processing() or not any(client.processing().values()):
        assert time.monotonic() < deadline, "no block started"
        time.sleep(0.05)
    victim = next(iter(pids.values()))
    os.kill(victim, signal.SIGKILL)
    result = future.result(timeout=60)
    np.testing.assert_allclose(result.a, np.cos(ds.a) * ds.b + 2 * ds.a, rtol=RTOL)
    client.wait_for_workers(2, timeout=30)
    assert victim not in client.run(os.getpid).values()


def test_restart_mid_computation_then_retry(client):
    ds = samples()

    def slow(ds):
        time.sleep(0.5)
        return model(ds)

    lazy = lf.vmap(slow, dim="sample")(ds.chunk({"sample": N // 4}))
    future = client.compute(lazy)
    time.sleep(0.3)
    client.restart()
    with pytest.raises(Exception):
        future.result(timeout=30)
    result = client.compute(lazy).result(timeout=60)  # the same lazy object, computed again
    np.testing.assert_allclose(result, model(ds), rtol=RTOL)


def test_bad_input_on_the_cluster(client):
    ds = samples()
    series = xr.DataArray(np.ones((N, 6)), dims=("sample", "t")).chunk({"sample": N // 4, "t": 3})
    with pytest.raises(ValueError, match="'t' in 2 chunks"):
        lf.vmap(lambda x: x.sum("t"), dim="sample", allow_rechunk=False)(series)
    with pytest.warns(UserWarning, match="'t' in 2 chunks"):
        lazy = lf.vmap(lambda x: x.sum("t"), dim="sample")(series)
    np.testing.assert_allclose(client.compute(lazy).result(), 6.0, rtol=RTOL)
    mismatched = lf.vmap(lambda a, b: a * b, dim="sample")(ds.a.chunk({"sample": N // 4}), ds.b.chunk({"sample": 3000}))
    assert mismatched.chunks == ((N // 4,) * 4,)
    np.testing.assert_allclose(client.compute(mismatched).result(), ds.a * ds.b, rtol=RTOL)


def test_jit_of_a_lazy_vmap_on_the_cluster_equals_the_in_memory_vmap(client):
    ds = samples(4000, seed=3)
    per_sample = lf.vmap(lf.grad(model), dim="sample")
    jitted = lf.jit(per_sample)  # pickled to the workers without its programs: each traces once
    result = client.compute(jitted(ds.chunk({"sample": 1000}))).result()
    xr.testing.assert_allclose(result, per_sample(ds), rtol=RTOL)
