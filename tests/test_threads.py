"""vmap is thread-safe: transform state is per task, never a module-level global.

Sixteen different vmaps (nested ones, chunked ones, long chains of operations so
that threads interleave) run concurrently in a thread pool and must give results
identical to the serial runs, which themselves equal the per-example loop.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

try:  # works with and without a tests/__init__.py
    from helpers_coverage import assert_same, loop_vmap
except ImportError:  # pragma: no cover
    from tests.helpers_coverage import assert_same, loop_vmap

T = np.linspace(0.0, 1.0, 6)


def _da(dims, sizes, seed, name):
    rng = np.random.default_rng(seed)
    coords = {}
    for d, n in zip(dims, sizes):
        coords[d] = np.arange(n) * 1.0 if d != "t" else T[:n]
    return xr.DataArray(
        rng.uniform(0.1, 1.0, sizes), dims=dims, coords=coords, name=name, attrs={"seed": seed}
    )


X = _da(("sample", "t"), (5, 6), 1, "x")
X7 = _da(("sample", "t"), (7, 6), 2, "x7")
Y = _da(("t", "sample"), (6, 5), 3, "y")
U = _da(("t",), (6,), 4, "u")
X3 = _da(("sample", "x", "t"), (4, 3, 6), 5, "x3")
GRID = _da(("t", "lat", "lon"), (6, 3, 2), 6, "grid")
W = _da(("t",), (6,), 7, "w")
A = np.random.default_rng(8).normal(size=(6, 4))
B = np.random.default_rng(9).normal(size=(4,))
DS = xr.Dataset({"a": X, "b": U}, attrs={"title": "t"})


def heavy(a, b):
    """Many small operations, so that a thread is preempted in the middle."""
    out = a
    for k in range(12):
        out = np.tanh(out * 1.01 + b * 0.01) + out.mean("t") * 0.001 - k * 1e-4
    return out


def heavy_np(a, b):
    out = a
    for _ in range(12):
        out = np.tanh(out * 1.01 + b * 0.01) + np.mean(out) * 0.001
    return out


def f_stats(a):
    return a.cumsum("t").std() + a.max()


def f_inner(a):
    return np.sin(a) * a.sum() + a.cumsum("t")


def f_grid(a):
    return a * a.mean("t") + np.cos(a)


def f_chunk(a, b):
    return (a * b).rolling(t=3).mean() + a.sum()


def f_ds(d):
    return xr.Dataset({"p": d.a * d.b, "q": d.a.sum("t"), "r": d.b * 2})


def f_roll_weighted(a, w):
    return a.roll(t=1).weighted(w).mean("t") + a.shift(t=1).fillna(0.0).sum()


def f_where(a):
    return xr.where(a > 0.5, a.clip(0.6, 0.9), -a).diff("t")


def f_dot(a, b):
    return xr.dot(a, b, dim="t") * xr.dot(a, a, dim="t")


def f_tree(a, b):
    return {"s": a + b, "pair": (a * 2, (a - b).mean()), "lst": [a.sum("t")]}


def f_scalar(a):
    return np.exp(-a) * 2 + a**2


def f_stack(a):
    return a.stack(z=("x", "t")).cumsum("z").unstack("z").transpose("t", "x")


def f_out1(a):
    return a.cumprod("t") / a.sum("t")


# (name, vmapped call, loop oracle)
JOBS = [
    ("heavy", lambda: lf.vmap(heavy, dim="sample")(X, U), lambda: loop_vmap(heavy, "sample", X, U)),
    ("stats", lambda: lf.vmap(f_stats, dim="sample")(X), lambda: loop_vmap(f_stats, "sample", X)),
    (
        "nested",
        lambda: lf.vmap(lf.vmap(f_inner, dim="x"), dim="sample")(X3),
        lambda: loop_vmap(f_inner, ("sample", "x"), X3),
    ),
    (
        "two_dims",
        lambda: lf.vmap(f_grid, dim=("lat", "lon"))(GRID),
        lambda: loop_vmap(f_grid, ("lat", "lon"), GRID),
    ),
    (
        "chunked",
        lambda: lf.vmap(f_chunk, dim="sample", chunk_size=2)(X7, U),
        lambda: loop_vmap(f_chunk, "sample", X7, U),
    ),
    ("dataset", lambda: lf.vmap(f_ds, dim="sample")(DS), lambda: loop_vmap(f_ds, "sample", DS)),
    (
        "numpy",
        lambda: lf.vmap(heavy_np, in_dims=(0, None))(A, B),
        lambda: np.stack([heavy_np(A[i], B) for i in range(A.shape[0])]),
    ),
    (
        "roll_weighted",
        lambda: lf.vmap(f_roll_weighted, dim="sample")(X, W),
        lambda: loop_vmap(f_roll_weighted, "sample", X, W),
    ),
    ("where", lambda: lf.vmap(f_where, dim="sample")(Y), lambda: loop_vmap(f_where, "sample", Y)),
    ("dot", lambda: lf.vmap(f_dot, dim="sample")(X, Y), lambda: loop_vmap(f_dot, "sample", X, Y)),
    ("pytree", lambda: lf.vmap(f_tree, dim="sample")(X, U), lambda: loop_vmap(f_tree, "sample", X, U)),
    (
        "triple_nested",
        lambda: lf.vmap(lf.vmap(lf.vmap(f_scalar, dim="t"), dim="x"), dim="sample")(X3),
        lambda: loop_vmap(f_scalar, ("sample", "x", "t"), X3),
    ),
    ("stack", lambda: lf.vmap(f_stack, dim="sample")(X3), lambda: loop_vmap(f_stack, "sample", X3)),
    (
        "out_dims",
        lambda: lf.vmap(f_out1, dim="sample", out_dims=1)(X3),
        lambda: loop_vmap(f_out1, "sample", X3).transpose("x", "sample", "t"),
    ),
    (
        "heavy_nested_chunked",
        lambda: lf.vmap(lf.vmap(heavy, dim="x", chunk_size=2), dim="sample")(X3, U),
        lambda: loop_vmap(heavy, ("sample", "x"), X3, U),
    ),
    (
        "heavy_transposed",
        lambda: lf.vmap(heavy, dim="sample")(Y, U),
        lambda: loop_vmap(heavy, "sample", Y, U),
    ),
]
assert len(JOBS) == 16


def assert_identical_tree(a, b):
    if isinstance(b, (xr.DataArray, xr.Dataset)):
        assert type(a) is type(b)
        xr.testing.assert_identical(a, b)
    elif isinstance(b, dict):
        assert isinstance(a, dict) and set(a) == set(b)
        for k in b:
            assert_identical_tree(a[k], b[k])
    elif isinstance(b, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for p, q in zip(a, b):
            assert_identical_tree(p, q)
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _run_concurrently(fns, workers=8):
    """Run ``fns`` in a pool; the first ``workers`` start together at a barrier."""
    barrier = threading.Barrier(min(workers, len(fns)), timeout=10)

    def wrap(i, fn):
        if i < workers:
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                pass
        return fn()

    with ThreadPoolExecutor(workers) as pool:
        futures = [pool.submit(wrap, i, fn) for i, fn in enumerate(fns)]
        return [fut.result() for fut in futures]


@pytest.fixture(scope="module")
def serial_results():
    return {name: run() for name, run, _ in JOBS}


@pytest.mark.parametrize("name, run, oracle", JOBS, ids=[j[0] for j in JOBS])
def test_serial_results_match_loop(serial_results, name, run, oracle):
    assert_same(serial_results[name], oracle())


def test_threaded_results_identical_to_serial(serial_results):
    fns = [run for _, run, _ in JOBS] * 2  # 32 tasks on 8 threads
    names = [name for name, _, _ in JOBS] * 2
    results = _run_concurrently(fns)
    for name, res in zip(names, results):
        assert_identical_tree(res, serial_results[name])


def test_threaded_shared_vmapped_function():
    vf = lf.vmap(heavy, dim="sample")
    inputs = [
        (_da(("sample", "t"), (1 + n % 4, 6), 100 + n, f"in{n}"), U * (1 + n / 10))
        for n in range(16)
    ]
    serial = [vf(a, b) for a, b in inputs]
    threaded = _run_concurrently([lambda a=a, b=b: vf(a, b) for a, b in inputs])
    for s, t in zip(serial, threaded):
        xr.testing.assert_identical(t, s)
    assert_same(serial[3], loop_vmap(heavy, "sample", *inputs[3]))


def test_plain_xarray_in_other_threads_is_untouched():
    """Threads that do not vmap see plain NumPy data while others are inside vmap."""
    expected_plain = heavy(X, U)

    def plain():
        res = heavy(X, U)
        assert type(res.data) is np.ndarray
        return res

    def mapped():
        return lf.vmap(heavy, dim="sample")(X, U)

    expected_mapped = mapped()
    fns = [plain if i % 2 else mapped for i in range(16)]
    results = _run_concurrently(fns)
    for i, res in enumerate(results):
        assert type(res.data) is np.ndarray
        xr.testing.assert_identical(res, expected_plain if i % 2 else expected_mapped)


def test_threaded_nested_different_dims():
    """Concurrent nested vmaps over different dim names, inner and outer swapped."""
    a = lambda: lf.vmap(lf.vmap(f_inner, dim="x"), dim="sample")(X3)  # noqa: E731
    b = lambda: lf.vmap(lf.vmap(f_inner, dim="sample"), dim="x")(X3)  # noqa: E731
    ea, eb = a(), b()
    assert ea.dims == ("sample", "x", "t") and eb.dims == ("x", "sample", "t")
    results = _run_concurrently([a, b] * 8)
    for i, res in enumerate(results):
        xr.testing.assert_identical(res, ea if i % 2 == 0 else eb)
    xr.testing.assert_allclose(ea, eb.transpose("sample", "x", "t"))
