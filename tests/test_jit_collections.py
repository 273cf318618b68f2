"""lf.jit records with fewer cyclic garbage collections (issue 25, the first call): the young
and middle generations' thresholds are raised while a trace or a prune runs and put back after, whatever
the threads and the errors; where collection is off it stays off.  Oracles: the interpreter's
own threshold before and after, and the un-jitted function."""
from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func.engine.compiler import collections_paused
from labeled_func.engine.compiler.collections_paused import fewer_collections


@pytest.fixture(autouse=True)
def default_threshold():
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


def test_a_trace_and_its_prune_run_with_the_raised_threshold_and_put_it_back():
    seen = []

    def f(x):
        seen.append(gc.get_threshold())
        return np.sin(x) * x.roll(t=1)

    per_sample = lf.vmap(lf.grad(lambda x: f(x).sum()), dim="sample")
    jitted = lf.jit(per_sample)
    x = xr.DataArray(np.random.default_rng(0).normal(size=(5, 7)), dims=("sample", "t"))
    xr.testing.assert_identical(jitted(x), per_sample(x))
    assert seen[0] == (collections_paused.TRACE_THRESHOLD, collections_paused.TRACE_MIDDLE_THRESHOLD, 10)  # traced with the raised threshold
    assert seen[-1] == (700, 10, 10)  # the eager call: as the interpreter had it
    assert gc.get_threshold() == (700, 10, 10)
    (compiled,) = jitted.cache.values()
    pruned = []
    prune = compiled.program.prune
    compiled.program.prune = lambda: (pruned.append(gc.get_threshold()), prune())[1]
    xr.testing.assert_allclose(jitted(x + 1), per_sample(x + 1), rtol=1e-13, atol=0)
    assert pruned == [(collections_paused.TRACE_THRESHOLD, collections_paused.TRACE_MIDDLE_THRESHOLD, 10)] and gc.get_threshold() == (700, 10, 10)


def test_an_error_in_the_trace_puts_the_threshold_back():
    def f(x):
        raise RuntimeError("in the user's function")

    with pytest.raises(RuntimeError, match="user's function"):
        lf.jit(f)(np.ones(3))
    assert gc.get_threshold() == (700, 10, 10)


def test_overlapping_blocks_in_threads_put_back_what_the_first_found():
    inside, release = threading.Barrier(3), threading.Event()
    seen = []

    def trace():
        with fewer_collections():
            inside.wait()
            seen.append(gc.get_threshold()[0])
            release.wait()

    threads = [threading.Thread(target=trace) for _ in range(2)]
    for thread in threads:
        thread.start()
    inside.wait()  # both inside
    with fewer_collections():  # a third, nested in time, ends first
        pass
    assert gc.get_threshold()[0] == collections_paused.TRACE_THRESHOLD  # the others still run
    release.set()
    for thread in threads:
        thread.join()
    assert seen == [collections_paused.TRACE_THRESHOLD] * 2
    assert gc.get_threshold() == (700, 10, 10)


def test_collection_switched_off_stays_off():
    gc.set_threshold(0)
    with fewer_collections():
        assert gc.get_threshold()[0] == 0
    assert gc.get_threshold()[0] == 0
