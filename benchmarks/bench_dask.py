"""Per-sample gradients of the Ishigami function over dask chunks on a local cluster.

`lf.vmap(lf.grad(ishigami), dim="sample")` over N samples (10 million by default) on a
`distributed.LocalCluster` of 2 single-threaded worker processes with
`memory_limit="1GB"` each, reduced to DGSM (the mean squared gradient) on the cluster;
against the same computation in memory, in this process, on 1 million samples.

Throughput per core is samples per CPU-second: the CPU time of every process that
took part (the workers, and this process, which runs the scheduler and the client),
so that other load on a small shared machine does not count against either side; the
wall-clock rate on the cluster is reported too.  Peak worker memory is the largest
peak resident set size of a worker process (`ru_maxrss`).  Each figure is the best of
REPEATS runs.

    python -m benchmarks.bench_dask [N]
"""

import resource
import sys
import time

import numpy as np
import xarray as xr

import labeled_func as lf

N_SAMPLES = 10_000_000
N_IN_MEMORY = 1_000_000
CHUNK = 1_000_000
N_WORKERS = 2
MEMORY_LIMIT = "1GB"
REPEATS = 3
MALLOC_TRIM_THRESHOLD = 1 << 30
MALLOC_MMAP_THRESHOLD = 1 << 25  # glibc's largest (32 MiB on 64-bit)


def ishigami(ds, a=7.0, b=0.1):
    """The Ishigami function of one sample (x1, x2, x3 are 0-d)."""
    return np.sin(ds.x1) + a * np.sin(ds.x2) ** 2 + b * ds.x3 ** 4 * np.sin(ds.x1)


def dgsm(samples):
    """Mean squared per-sample gradient: lazy if `samples` is dask-backed."""
    return (lf.vmap(lf.grad(ishigami), dim="sample")(samples) ** 2).mean("sample")


def main(n_samples: int = N_SAMPLES) -> list[dict]:
    in_memory_rate = in_memory_samples_per_cpu_second()
    cluster_rate, wall_rate, peak_bytes = cluster_rates(n_samples)
    ratio = cluster_rate / in_memory_rate
    return [
        {
            "benchmark": (f"vmap(grad(ishigami)) + DGSM on {N_WORKERS} dask workers, N={n_samples:.0e}, "
                          f"chunks {CHUNK:.0e}, per core; baseline in memory, N={N_IN_MEMORY:.0e}"),
            "value": cluster_rate / 1e6, "baseline": in_memory_rate / 1e6, "unit": "M samples/cpu-s",
            "ratio": ratio, "target": "ratio >= 0.7", "met": ratio >= 0.7,
        },
        {
            "benchmark": f"  the same on the cluster, wall clock ({N_WORKERS} workers); baseline in memory per CPU-second",
            "value": wall_rate / 1e6, "baseline": in_memory_rate / 1e6, "unit": "M samples/s",
            "ratio": wall_rate / in_memory_rate, "target": "(information)", "met": True,
        },
        {
            "benchmark": f"peak worker memory (memory_limit={MEMORY_LIMIT}), N={n_samples:.0e}",
            "value": peak_bytes / 2**20, "baseline": 1e9 / 2**20, "unit": "MiB",
            "ratio": peak_bytes / 1e9, "target": "ratio < 1", "met": peak_bytes < 1e9,
        },
    ]


def uniform_samples(n, seed=0):
    rng = np.random.default_rng(seed)
    return xr.Dataset({k: ("sample", rng.uniform(-np.pi, np.pi, n)) for k in ("x1", "x2", "x3")})


def in_memory_samples_per_cpu_second():
    samples = uniform_samples(N_IN_MEMORY)
    best = float("inf")
    for _ in range(REPEATS):
        start = time.process_time()
        dgsm(samples)
        best = min(best, time.process_time() - start)
    return N_IN_MEMORY / best


def cluster_rates(n_samples):
    """(samples per CPU-second, samples per wall-clock second, peak worker RSS in bytes),
    with the inputs already on the workers."""
    import dask
    import dask.array as da
    from distributed import Client, LocalCluster, wait

    # Nannies start workers with MALLOC_TRIM_THRESHOLD_=65536: freed memory goes back to
    # the OS at once, and every block's temporaries page-fault in again (measured here:
    # ratio about 0.5 with it, 0.6 with 1 GiB). Setting any of glibc's thresholds also
    # freezes its mmap threshold at 128 KiB, so every array of a block (8 MB) is a fresh
    # mapping, faulted in page by page: raised to glibc's largest, 32 MiB, they come from
    # the heap again (0.74-0.82). See docs/dask.md.
    trim = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": MALLOC_TRIM_THRESHOLD,
            "distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_": MALLOC_MMAP_THRESHOLD}
    with dask.config.set(trim), LocalCluster(n_workers=N_WORKERS, threads_per_worker=1, processes=True,
                                             memory_limit=MEMORY_LIMIT, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        # the three inputs of one chunk come from one task, so they live on one worker
        table = da.random.default_rng(0).uniform(-np.pi, np.pi, (n_samples, 3), chunks=(CHUNK, 3))
        samples = xr.Dataset({k: ("sample", table[:, i].map_blocks(np.ascontiguousarray))
                              for i, k in enumerate(("x1", "x2", "x3"))}).persist()
        wait(samples)
        result = dgsm(samples.isel(sample=slice(0, 4 * CHUNK))).compute()  # warm the workers up
        assert all(np.isfinite(float(result[k])) for k in result)
        best_cpu = best_wall = float("inf")
        for _ in range(REPEATS):
            workers_before, here_before, start = client.run(time.process_time), time.process_time(), time.perf_counter()
            result = dgsm(samples).compute()
            wall = time.perf_counter() - start
            cpu = time.process_time() - here_before + sum(
                after - workers_before[w] for w, after in client.run(time.process_time).items())
            best_cpu, best_wall = min(best_cpu, cpu), min(best_wall, wall)
        peaks = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    check_against_closed_form(result)
    return n_samples / best_cpu, n_samples / best_wall, max(peaks.values())


def check_against_closed_form(result):
    """DGSM of Ishigami for uniform inputs on [-pi, pi]: E[(df/dxi)^2] in closed form."""
    a, b = 7.0, 0.1
    expected = {"x1": 0.5 * (1 + 2 * b * np.pi ** 4 / 5 + b ** 2 * np.pi ** 8 / 9),
                "x2": a ** 2 / 2,
                "x3": 16 * b ** 2 * np.pi ** 6 / 7 / 2}
    for name, value in expected.items():
        assert abs(float(result[name]) / value - 1) < 0.02, (name, float(result[name]), value)


if __name__ == "__main__":
    from benchmarks.__main__ import format_row, print_table

    print_table([format_row(row) for row in main(int(float(sys.argv[1])) if len(sys.argv) > 1 else N_SAMPLES)])
