"""Reverse mode through a long time-stepper, with and without checkpointing.

The gradient of the loss sum(u_T ** 2) with respect to the diffusivity and the initial
field of an explicit heat equation (5-point Laplacian with `DataArray.roll`, a periodic
200 x 200 grid, T = 1,000 steps) through `lf.scan`: without checkpointing (every step's
state and intermediates kept for the backward pass) against `checkpoint_every=32`
(about sqrt(T): the carries between runs of 32 steps kept, one run recomputed at a time).

Both runs happen in one child process (so that nothing else this suite allocated
counts), one after the other: first timed, then with `tracemalloc` (which sees every
NumPy allocation) for the peak memory of each, its peak reset in between.  The two
gradients are checked to agree.

The third row is the time of `lf.scan` without checkpointing against the plain Python
loop it replaces: per-catchment gradients (`lf.vmap(lf.grad(...))`) of a bucket model over
365 daily steps and 200 catchments, forced by a Dataset of daily rain and evaporation with
a time coordinate, the scan over the Dataset, the loop over its `.values` (what a loop
written by hand indexes). Medians of 5 alternating runs; the gradients are checked to
agree.

    python -m benchmarks.bench_loops          # the rows, as `make bench` prints them
"""

import json
import statistics
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import xarray as xr

import labeled_func as lf

GRID = 200
STEPS = 1_000
EVERY = 32
DIFFUSIVITY = 0.2


def main() -> list[dict]:
    child = subprocess.run([sys.executable, "-m", "benchmarks.bench_loops", "--measure"],
                           capture_output=True, text=True, check=True)
    figures = json.loads(child.stdout.strip().splitlines()[-1])
    size = f"{GRID}x{GRID}, T={STEPS:,}, checkpoint_every={EVERY}"
    memory_ratio = figures["memory_with"] / figures["memory_without"]
    time_ratio = figures["time_with"] / figures["time_without"]
    scan, loop = bucket_times()
    return [
        {
            "benchmark": f"vmap(grad) of a bucket model through lf.scan ({BUCKET_STEPS} steps, {BUCKET_CATCHMENTS} "
                         "catchments, forcing with a time coordinate); baseline the Python loop over .values",
            "value": scan, "baseline": loop, "unit": "s", "ratio": scan / loop, "target": "ratio <= 1",
            "met": scan / loop <= 1,
        },
        {
            "benchmark": f"grad through lf.scan of a heat equation ({size}): peak memory; baseline "
                         "without checkpointing",
            "value": figures["memory_with"], "baseline": figures["memory_without"], "unit": "MiB",
            "ratio": memory_ratio, "target": "ratio <= 0.1", "met": memory_ratio <= 0.1,
        },
        {
            "benchmark": f"grad through lf.scan of a heat equation ({size}): time; baseline without "
                         "checkpointing",
            "value": figures["time_with"], "baseline": figures["time_without"], "unit": "s",
            "ratio": time_ratio, "target": "ratio <= 2", "met": time_ratio <= 2,
        },
    ]


def laplacian(u):
    return u.roll(x=1) + u.roll(x=-1) + u.roll(y=1) + u.roll(y=-1) - 4 * u


def loss(diffusivity, u0, every, steps):
    final, _ = lf.scan(lambda u, _: (u + diffusivity * laplacian(u), None), u0, length=steps,
                       checkpoint_every=every)
    return (final ** 2).sum()


def gradient(every, steps=STEPS):
    rng = np.random.default_rng(0)
    u0 = xr.DataArray(rng.random((GRID, GRID)), dims=("y", "x"))
    return lf.grad(loss, argnums=(0, 1))(xr.DataArray(DIFFUSIVITY), u0, every, steps)


BUCKET_STEPS = 365
BUCKET_CATCHMENTS = 200


def bucket_step(storage, rain, evaporation, rate, capacity):
    """One day of a bucket: rain in, evaporation in proportion to the filling, the
    overflow above the capacity and a linear outflow out: (new storage, discharge)."""
    storage = storage + rain - evaporation * storage / capacity
    overflow = np.maximum(storage - capacity, 0.0)
    storage = storage - overflow
    outflow = rate * storage
    return storage - outflow, outflow + overflow


def bucket_models():
    """(the loss through lf.scan, the loss through the Python loop, params)."""
    rng = np.random.default_rng(0)
    days = np.arange("2000-01-01", BUCKET_STEPS, dtype="datetime64[D]")
    forcing = xr.Dataset({"rain": ("time", rng.gamma(0.5, 6.0, BUCKET_STEPS)),
                          "evaporation": ("time", rng.uniform(0.0, 4.0, BUCKET_STEPS))}, coords={"time": days})
    observed = xr.DataArray(rng.uniform(0.0, 5.0, BUCKET_STEPS), dims="time", coords={"time": days})
    params = xr.Dataset({"rate": ("catchment", rng.uniform(0.05, 0.2, BUCKET_CATCHMENTS)),
                         "capacity": ("catchment", rng.uniform(50.0, 150.0, BUCKET_CATCHMENTS))})
    rain, evaporation = forcing.rain.values, forcing.evaporation.values

    def through_scan(p):
        def day(storage, f):
            return bucket_step(storage, f.rain, f.evaporation, p.rate, p.capacity)
        _, discharge = lf.scan(day, 0.0 * p.capacity, forcing, dim="time")
        return ((discharge - observed) ** 2).mean()

    def through_loop(p):
        storage, discharge = 0.0 * p.capacity, []
        for t in range(BUCKET_STEPS):
            storage, q = bucket_step(storage, rain[t], evaporation[t], p.rate, p.capacity)
            discharge.append(q)
        return ((xr.concat(discharge, dim="time").assign_coords(time=observed.time) - observed) ** 2).mean()

    return through_scan, through_loop, params


def bucket_times() -> tuple[float, float]:
    """Median seconds of vmap(grad) of the bucket model: through lf.scan, through the loop."""
    through_scan, through_loop, params = bucket_models()
    scan = lf.vmap(lf.grad(through_scan), dim="catchment")
    loop = lf.vmap(lf.grad(through_loop), dim="catchment")
    xr.testing.assert_allclose(scan(params), loop(params), rtol=1e-12)
    times = {scan: [], loop: []}
    for _ in range(5):
        for f in times:
            start = time.perf_counter()
            f(params)
            times[f].append(time.perf_counter() - start)
    return statistics.median(times[scan]), statistics.median(times[loop])


def measure() -> dict:
    """Seconds and peak MiB of the gradient, without checkpointing and with it."""
    figures = {}
    grads = {}
    gradient(None, steps=10), gradient(5, steps=10)  # warm-up: imports, first calls
    for label, every in (("without", None), ("with", EVERY)):
        start = time.perf_counter()
        grads[label] = gradient(every)
        figures[f"time_{label}"] = time.perf_counter() - start
    for a, b in zip(grads["with"], grads["without"]):
        xr.testing.assert_allclose(a, b, rtol=1e-10)
    del grads
    tracemalloc.start()
    for label, every in (("without", None), ("with", EVERY)):
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        gradient(every)
        figures[f"memory_{label}"] = (tracemalloc.get_traced_memory()[1] - before) / 2 ** 20
    tracemalloc.stop()
    return figures


if __name__ == "__main__":
    if sys.argv[1:] == ["--measure"]:
        print(json.dumps(measure()))
    else:
        from benchmarks.__main__ import format_row, print_table

        print_table([format_row(row) for row in main()])
