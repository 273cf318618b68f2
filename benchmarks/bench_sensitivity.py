"""lf.sensitivity: the Jacobian mode of `local`, the cost of the bootstrap of `dgsm`, `sobol`.

- `local` on a model with 2 parameters and 4,000 outputs: mode="auto" (forward mode
  here) against mode="reverse", in time and in peak memory (tracemalloc).
- `dgsm` of the Ishigami function on 200,000 samples with 100 resamples: the bootstrap
  alone, and all of `dgsm`, against the per-sample gradients it needs
  (`lf.vmap(lf.grad(f))`); and the bootstrap against the loop of index resamples it
  replaced (one `isel` and mean per resample).
- `dgsm` with `progress` (ten blocks of samples) of a 200-step explicit loop in xarray,
  N = 2,048: the blocks replaying one `lf.jit` program (the default) against ten
  un-jitted blocks (`jit=False`, each paying the whole trace), and against one block
  without progress.
- `sobol` and `morris` with `chunk_size` (eight blocks) of a 100-step explicit loop in
  xarray (Saltelli's design of N = 1,024 base samples, 5,120 runs; 256 trajectories,
  1,024 runs): the blocks replaying one `lf.jit` program (the default) against eight
  un-jitted blocks (`jit=False`); the results are first checked to be identical.
- `sobol` of the Ishigami function at N = 2^16 base samples (100 resamples): sampling,
  the vmapped model and the analysis, against SALib (`sobol.sample`, the NumPy-vectorised
  model, `sobol.analyze`) when SALib is importable, else against a NumPy implementation
  of the same estimators and bootstrap on the same design, written below (the row says
  which); the results are first checked to agree to 1e-10.
- `sobol` of a field on a 1° grid (180 × 360 cells), D = 5, N = 2^12 base samples (the
  issue's size; about 100 s on two cores), 100 resamples, with `chunk_size`: time and
  peak memory (tracemalloc, in a child process: one run, timed with tracemalloc on), and
  against the loop of SALib's `analyze` (or of the NumPy estimator) over grid cells, run
  on a subset of cells and extrapolated to the grid (with its share of the model).
- The same field on Dask (`chunks=`, threads) at N = 2^9 and 2^11 base samples: the peak
  memory of each run (tracemalloc, in a child process), which must not grow with N.

Every figure is the best of several repeats of `time.perf_counter` (the field: one run);
the baselines are measured in the same run, and their results are first checked against each other.
"""

import json
import subprocess
import sys
import time
import tracemalloc
from statistics import NormalDist

import numpy as np
import xarray as xr

import labeled_func as lf
from benchmarks.bench_vmap import best_time
from labeled_func import sensitivity

N_OUTPUTS = 4_000
N_SAMPLES = 200_000
RESAMPLES = 100
ISHIGAMI_A, ISHIGAMI_B = 7.0, 0.1
NAMES = ("x1", "x2", "x3")
BOUNDS = {name: (-np.pi, np.pi) for name in NAMES}


def main() -> list[dict]:
    return [*local_rows(), *dgsm_rows(), *progress_rows(), *block_rows(), *sobol_rows(), *field_rows(),
            *field_dask_rows(), *field_evaluation_rows()]


def local_rows() -> list[dict]:
    t = xr.DataArray(np.linspace(0.0, 2.0, N_OUTPUTS), dims="t")
    params = xr.Dataset({"amplitude": 3.0, "rate": 0.7})

    def decay(p):
        return p.amplitude * np.exp(-p.rate * t)

    auto, auto_peak = peak_memory(lambda: sensitivity.local(decay, params))
    reverse, reverse_peak = peak_memory(lambda: sensitivity.local(decay, params, mode="reverse"))
    xr.testing.assert_allclose(auto, reverse, rtol=1e-12, atol=1e-15)
    auto_s = best_time(lambda: sensitivity.local(decay, params), repeats=5)
    reverse_s = best_time(lambda: sensitivity.local(decay, params, mode="reverse"), repeats=2)
    size = f"2 parameters, {N_OUTPUTS:,} outputs"
    return [
        {
            "benchmark": f"sensitivity.local mode='auto' (forward) vs 'reverse' ({size}); ratio = speedup",
            "value": auto_s * 1e3, "baseline": reverse_s * 1e3, "unit": "ms",
            "ratio": reverse_s / auto_s, "target": "speedup >= 10", "met": reverse_s / auto_s >= 10,
        },
        {
            "benchmark": f"sensitivity.local peak memory, 'auto' vs 'reverse' ({size}); ratio = saving",
            "value": auto_peak / 2**20, "baseline": reverse_peak / 2**20, "unit": "MiB",
            "ratio": reverse_peak / auto_peak, "target": "saving >= 10", "met": reverse_peak / auto_peak >= 10,
        },
    ]


def ishigami(p):
    return np.sin(p.x1) + ISHIGAMI_A * np.sin(p.x2) ** 2 + ISHIGAMI_B * p.x3**4 * np.sin(p.x1)


def dgsm_rows() -> list[dict]:
    rng = np.random.default_rng(0)
    samples = xr.Dataset({name: ("sample", rng.uniform(-np.pi, np.pi, N_SAMPLES)) for name in NAMES})
    per_sample_gradients = lf.vmap(lf.grad(ishigami), dim="sample")
    gradients = per_sample_gradients(samples)
    result = sensitivity.dgsm(ishigami, samples, bounds=BOUNDS, num_resamples=RESAMPLES, seed=0)
    np.testing.assert_allclose(result.vi.values, [float((gradients[n] ** 2).mean()) for n in NAMES], rtol=1e-12)

    # the bootstrap alone, on the squared gradients and outputs that dgsm resamples
    squares = xr.concat([gradients[n] ** 2 for n in NAMES], dim="param").assign_coords(param=list(NAMES))
    outputs = ishigami(samples)
    centred = outputs - outputs.mean("sample")
    entropy = np.random.SeedSequence(0).entropy

    def bootstrap():
        return sensitivity._resampled_means(squares, centred, "sample", list(NAMES), RESAMPLES, entropy,
                                            lazy=False, report=sensitivity.Progress(None, 0))

    def index_loop():  # the bootstrap it replaced: one index array, isel and mean per resample
        loop_rng = np.random.default_rng(0)
        means = [squares.isel(sample=loop_rng.integers(0, N_SAMPLES, N_SAMPLES)).mean("sample")
                 for _ in range(RESAMPLES)]
        return xr.concat(means, dim="resample")

    z = result.vi_conf / bootstrap()["vi"].std("resample", ddof=1)
    np.testing.assert_allclose(z.values, 1.959964, rtol=1e-5)  # the same resamples as dgsm's own
    np.testing.assert_allclose(index_loop().std("resample", ddof=1), bootstrap()["vi"].std("resample", ddof=1),
                               rtol=0.5)  # two bootstraps of the same spread, 100 resamples each

    gradients_s = best_time(lambda: per_sample_gradients(samples), repeats=5)
    bootstrap_s = best_time(bootstrap, repeats=5)
    dgsm_s = best_time(lambda: sensitivity.dgsm(ishigami, samples, bounds=BOUNDS, num_resamples=RESAMPLES),
                       repeats=5)
    loop_s = best_time(index_loop, repeats=2)
    size = f"Ishigami, N={N_SAMPLES:,}, {RESAMPLES} resamples"
    return [
        {
            "benchmark": f"sensitivity.dgsm bootstrap / per-sample gradients ({size})",
            "value": bootstrap_s * 1e3, "baseline": gradients_s * 1e3, "unit": "ms",
            "ratio": bootstrap_s / gradients_s, "target": "ratio <= 2", "met": bootstrap_s / gradients_s <= 2,
        },
        {
            "benchmark": f"sensitivity.dgsm with bounds / per-sample gradients ({size})",
            "value": dgsm_s * 1e3, "baseline": gradients_s * 1e3, "unit": "ms",
            "ratio": dgsm_s / gradients_s, "target": "ratio <= 3", "met": dgsm_s / gradients_s <= 3,
        },
        {
            "benchmark": f"sensitivity.dgsm bootstrap vs a loop of index resamples ({size}); ratio = speedup",
            "value": bootstrap_s * 1e3, "baseline": loop_s * 1e3, "unit": "ms",
            "ratio": loop_s / bootstrap_s, "target": "speedup >= 10", "met": loop_s / bootstrap_s >= 10,
        },
    ]


STEPPING_STEPS, STEPPING_SAMPLES = 200, 2048
STEPPING_BOUNDS = {"r": (0.5, 1.5), "K": (1.0, 2.0), "h": (0.0, 0.2)}


def stepping(p, steps=STEPPING_STEPS):
    """Explicit Euler steps of a harvested logistic growth, in xarray: its cost is per operation."""
    y = xr.zeros_like(p.r) + 0.1
    for _ in range(steps):
        y = y + 0.05 * (p.r * y * (1 - y / p.K) - p.h * y)
    return y


def progress_rows() -> list[dict]:
    rng = np.random.default_rng(0)
    samples = xr.Dataset({name: ("sample", rng.uniform(low, high, STEPPING_SAMPLES))
                          for name, (low, high) in STEPPING_BOUNDS.items()})

    def run(**options):
        return sensitivity.dgsm(stepping, samples, bounds=STEPPING_BOUNDS, seed=0, **options)

    def quiet(done, total):
        return None

    xr.testing.assert_identical(run(progress=quiet), run(progress=quiet, jit=False))
    jitted_s = best_time(lambda: run(progress=quiet), repeats=3)
    plain_s = best_time(lambda: run(progress=quiet, jit=False), repeats=2)
    one_block_s = best_time(run, repeats=3)
    size = f"{STEPPING_STEPS}-step loop, N={STEPPING_SAMPLES:,}, ten blocks"
    return [
        {
            "benchmark": f"sensitivity.dgsm progress: one lf.jit program vs un-jitted blocks ({size}); "
                         "ratio = speedup",
            "value": jitted_s * 1e3, "baseline": plain_s * 1e3, "unit": "ms",
            "ratio": plain_s / jitted_s, "target": "speedup >= 3", "met": plain_s / jitted_s >= 3,
        },
        {
            "benchmark": f"sensitivity.dgsm progress (jitted blocks) / one block without progress ({size})",
            "value": jitted_s * 1e3, "baseline": one_block_s * 1e3, "unit": "ms",
            "ratio": jitted_s / one_block_s, "target": "ratio <= 3", "met": jitted_s / one_block_s <= 3,
        },
    ]


BLOCK_STEPS, BLOCK_N, BLOCK_TRAJECTORIES = 100, 1024, 256


def block_rows() -> list[dict]:
    """sobol and morris in eight blocks (chunk_size): one lf.jit program against un-jitted blocks."""
    def model(p):
        return stepping(p, BLOCK_STEPS)

    def sobol(**options):
        return sensitivity.sobol(model, STEPPING_BOUNDS, BLOCK_N, seed=0, chunk_size=BLOCK_N // 8 * 5, **options)

    def morris(**options):
        return sensitivity.morris(model, STEPPING_BOUNDS, BLOCK_TRAJECTORIES, seed=0,
                                  chunk_size=BLOCK_TRAJECTORIES // 8 * 4, **options)

    rows = []
    for name, run, size in [("sobol", sobol, f"N={BLOCK_N:,}, {BLOCK_N * 5:,} runs"),
                            ("morris", morris, f"{BLOCK_TRAJECTORIES} trajectories, {BLOCK_TRAJECTORIES * 4:,} runs")]:
        xr.testing.assert_identical(run(), run(jit=False))
        jitted_s = best_time(run, repeats=3)
        plain_s = best_time(lambda: run(jit=False), repeats=2)
        rows.append({
            "benchmark": f"sensitivity.{name} chunk_size: one lf.jit program vs un-jitted blocks "
                         f"({BLOCK_STEPS}-step loop, {size}, eight blocks); ratio = speedup",
            "value": jitted_s * 1e3, "baseline": plain_s * 1e3, "unit": "ms",
            "ratio": plain_s / jitted_s, "target": "speedup >= 3", "met": plain_s / jitted_s >= 3,
        })
    return rows


SOBOL_N, SOBOL_RESAMPLES = 2 ** 16, 100


def salib():
    """SALib's sobol sample and analyze modules, or None where SALib is not importable."""
    try:
        from SALib.analyze import sobol as analyze
        from SALib.sample import sobol as sample
    except ImportError:
        return None
    return sample, analyze


def numpy_ishigami(x):
    return np.sin(x[:, 0]) + ISHIGAMI_A * np.sin(x[:, 1]) ** 2 + ISHIGAMI_B * x[:, 2] ** 4 * np.sin(x[:, 0])


def numpy_design(n, bounds, seed):
    """Saltelli's rows (per base sample: A, AB_1 ... AB_D, B), as SALib's sobol.sample."""
    from scipy.stats import qmc
    d = len(bounds)
    low, high = np.array(list(bounds.values()), dtype=float).T
    base = qmc.Sobol(2 * d, scramble=True, seed=seed).random(n)
    a, b = base[:, :d] * (high - low) + low, base[:, d:] * (high - low) + low
    rows = [a] + [np.where(np.arange(d) == i, b, a) for i in range(d)] + [b]
    return np.stack(rows, axis=1).reshape(-1, d)


def numpy_analyze(y, d, num_resamples, seed):
    """SALib's first order (Saltelli 2010) and total order (Jansen) estimators and bootstrap
    (its index array, one fancy-indexing per parameter) on the outputs of ``numpy_design``."""
    y = y.reshape(-1, d + 2)
    y = (y - y.mean()) / y.std()
    a, b, ab = y[:, 0], y[:, -1], y[:, 1:-1]
    z = NormalDist().inv_cdf(0.5 + 0.95 / 2)
    r = np.random.default_rng(seed).integers(len(a), size=(len(a), num_resamples))
    out = {key: np.empty(d) for key in ("S1", "S1_conf", "ST", "ST_conf")}

    def first(a, ab, b):
        return np.mean(b * (ab - a), axis=0) / np.var(np.r_[a, b], axis=0)

    def total(a, ab, b):
        return 0.5 * np.mean((a - ab) ** 2, axis=0) / np.var(np.r_[a, b], axis=0)

    for j in range(d):
        out["S1"][j], out["ST"][j] = first(a, ab[:, j], b), total(a, ab[:, j], b)
        out["S1_conf"][j] = z * first(a[r], ab[r, j], b[r]).std(ddof=1)
        out["ST_conf"][j] = z * total(a[r], ab[r, j], b[r]).std(ddof=1)
    return out


def sobol_rows() -> list[dict]:
    modules = salib()
    problem = {"names": list(NAMES), "num_vars": 3, "bounds": [list(BOUNDS[n]) for n in NAMES]}

    def ours():
        return sensitivity.sobol(ishigami, BOUNDS, SOBOL_N, seed=1, num_resamples=SOBOL_RESAMPLES)

    if modules is not None:
        def baseline():
            x = modules[0].sample(dict(problem), SOBOL_N, calc_second_order=False, seed=1)
            return modules[1].analyze(dict(problem), numpy_ishigami(x), calc_second_order=False,
                                      num_resamples=SOBOL_RESAMPLES, seed=1)
        which = "SALib sample + NumPy model + analyze"
    else:
        def baseline():
            y = numpy_ishigami(numpy_design(SOBOL_N, BOUNDS, seed=1))
            return numpy_analyze(y, len(NAMES), SOBOL_RESAMPLES, seed=1)
        which = "NumPy design + model + SALib's estimators (SALib not installed)"
    mine, theirs = ours(), baseline()
    for key in ("S1", "S1_conf", "ST", "ST_conf"):
        np.testing.assert_allclose(mine[key].values, theirs[key], rtol=0, atol=1e-10)
    ours_s = best_time(ours, repeats=3)
    baseline_s = best_time(baseline, repeats=3)
    return [{
        "benchmark": f"sensitivity.sobol, Ishigami, N=2^16 ({SOBOL_N * 5:,} runs, {SOBOL_RESAMPLES} resamples); "
                     f"baseline {which}; ratio = speedup",
        "value": ours_s * 1e3, "baseline": baseline_s * 1e3, "unit": "ms",
        "ratio": baseline_s / ours_s, "target": "speedup >= 1", "met": baseline_s / ours_s >= 1,
    }]


FIELD_N, FIELD_RESAMPLES, FIELD_CHUNK = 2 ** 12, 100, 7 * 32   # 32 base samples (224 runs) per vmap call
FIELD_NAMES = ("a", "b", "c", "d", "e")
FIELD_CELLS = 20        # cells the per-cell baseline runs on, extrapolated to the grid


def field_grid():
    lat = np.arange(-89.5, 90.0, 1.0)
    lon = np.arange(0.5, 360.0, 1.0)
    return lat, lon


def field_model():
    lat, lon = field_grid()
    coslat = xr.DataArray(np.cos(np.deg2rad(lat)), dims="lat", coords={"lat": lat})
    lon_coord = {"lon": lon}
    sinlon = xr.DataArray(np.sin(np.deg2rad(lon)), dims="lon", coords=lon_coord)
    pattern = coslat * xr.DataArray(np.cos(np.deg2rad(lon)), dims="lon", coords=lon_coord)

    def field(p):   # a, b alone, c and d through their product, e weakly
        return p.a * coslat + p.b * sinlon + p.c * p.d * pattern + 0.1 * p.e ** 2
    return field


def numpy_field(x, lat, lon):
    """The field model on rows ``x`` (rows, 5) and the cells (lat[k], lon[k]): (rows, cells)."""
    coslat, sinlon, coslon = np.cos(np.deg2rad(lat)), np.sin(np.deg2rad(lon)), np.cos(np.deg2rad(lon))
    a, b, c, d, e = (x[:, [i]] for i in range(5))
    return a * coslat + b * sinlon + c * d * coslat * coslon + 0.1 * e ** 2


def measure_field() -> dict:
    """Seconds and peak MiB (tracemalloc on, one run) of sobol of the field; a few cells."""
    bounds = dict.fromkeys(FIELD_NAMES, (0.0, 1.0))
    model = field_model()
    sensitivity.sobol(model, {"a": (0, 1), "b": (0, 1), "c": (0, 1), "d": (0, 1), "e": (0, 1)}, 4, seed=0,
                      num_resamples=2)   # warm-up: imports, first calls
    tracemalloc.start()
    start = time.perf_counter()
    result = sensitivity.sobol(model, bounds, FIELD_N, seed=1, num_resamples=FIELD_RESAMPLES,
                               chunk_size=FIELD_CHUNK)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 2 ** 20
    tracemalloc.stop()
    cells = np.random.default_rng(0).choice(result.sizes["lat"] * result.sizes["lon"], FIELD_CELLS, replace=False)
    flat = result.stack(cell=("lat", "lon")).isel(cell=cells)
    picked = {key: flat[key].values.tolist() for key in ("S1", "S1_conf", "ST", "ST_conf")}
    return {"seconds": seconds, "peak": peak, "cells": cells.tolist(), "indices": picked}


def field_rows() -> list[dict]:
    child = subprocess.run([sys.executable, "-m", "benchmarks.bench_sensitivity", "--measure-field"],
                           capture_output=True, text=True, check=True)
    figures = json.loads(child.stdout.strip().splitlines()[-1])
    lat, lon = field_grid()
    cells = np.array(figures["cells"])
    lat_k, lon_k = lat[cells // len(lon)], lon[cells % len(lon)]
    bounds = dict.fromkeys(FIELD_NAMES, (0.0, 1.0))
    modules = salib()
    problem = {"names": list(FIELD_NAMES), "num_vars": 5, "bounds": [[0.0, 1.0]] * 5}

    def per_cell():   # the NumPy model on the cells, then one analysis per cell
        y = numpy_field(numpy_design(FIELD_N, bounds, seed=1), lat_k, lon_k)   # (SALib: seed=0 is no seed)
        if modules is not None:
            return [modules[1].analyze(dict(problem), np.ascontiguousarray(y[:, k]), calc_second_order=False,
                                       num_resamples=FIELD_RESAMPLES, seed=1) for k in range(len(cells))]
        return [numpy_analyze(y[:, k], 5, FIELD_RESAMPLES, seed=1) for k in range(len(cells))]

    results = per_cell()
    for key in ("S1", "S1_conf", "ST", "ST_conf"):   # the same numbers, cell by cell
        np.testing.assert_allclose(np.array(figures["indices"][key]).T, [r[key] for r in results],
                                   rtol=0, atol=1e-10)
    loop_s = best_time(per_cell, repeats=2) * len(lat) * len(lon) / len(cells)
    which = "SALib's analyze" if modules is not None else "the NumPy estimator (SALib not installed)"
    size = (f"1° grid 180x360, D=5, N=2^{FIELD_N.bit_length() - 1} ({FIELD_N * 7:,} runs of 64,800 cells), "
            f"{FIELD_RESAMPLES} resamples, chunk_size={FIELD_CHUNK}")
    ratio = loop_s / figures["seconds"]
    return [
        {
            "benchmark": f"sensitivity.sobol of a field ({size}): peak memory (tracemalloc)",
            "value": figures["peak"], "baseline": 2048.0, "unit": "MiB", "ratio": figures["peak"] / 2048,
            "target": "peak <= 2 GiB", "met": figures["peak"] <= 2048,
        },
        {
            "benchmark": f"sensitivity.sobol of a field ({size}) vs a loop of {which} over the cells "
                         f"(run on {FIELD_CELLS} cells, extrapolated); ratio = speedup",
            "value": figures["seconds"], "baseline": loop_s, "unit": "s", "ratio": ratio,
            "target": "speedup >= 50", "met": ratio >= 50,
        },
    ]


FIELD_DASK_N = (2 ** 9, 2 ** 11)   # base samples of the two lazy runs (16 and 64 Dask blocks)


def measure_field_dask(n) -> dict:
    """Seconds and peak MiB (tracemalloc on, one run) of sobol(chunks=) of the field, computed."""
    import dask

    bounds = dict.fromkeys(FIELD_NAMES, (0.0, 1.0))
    model = field_model()
    with dask.config.set(scheduler="threads"):
        sensitivity.sobol(model, bounds, 4, seed=0, num_resamples=2, chunks=FIELD_CHUNK).compute()   # warm-up
        tracemalloc.start()
        start = time.perf_counter()
        lazy = sensitivity.sobol(model, bounds, n, seed=1, num_resamples=FIELD_RESAMPLES, chunks=FIELD_CHUNK)
        result = lazy.compute()
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] / 2 ** 20
        tracemalloc.stop()
    return {"seconds": seconds, "peak": peak, "S1": float(result.S1.mean())}


def field_dask_rows() -> list[dict]:
    """The field on Dask at two N: its peak memory does not grow with N (the design's base
    points aside, a few MiB)."""
    figures = []
    for n in FIELD_DASK_N:
        child = subprocess.run([sys.executable, "-m", "benchmarks.bench_sensitivity", "--measure-field-dask", str(n)],
                               capture_output=True, text=True, check=True)
        figures.append(json.loads(child.stdout.strip().splitlines()[-1]))
    small, large = figures
    ratio = large["peak"] / small["peak"]
    blocks = [n * 7 // FIELD_CHUNK for n in FIELD_DASK_N]
    return [{
        "benchmark": f"sensitivity.sobol(chunks={FIELD_CHUNK}) of the 1° field on Dask (threads), peak memory "
                     f"(tracemalloc) at N=2^{FIELD_DASK_N[1].bit_length() - 1} ({blocks[1]} blocks, "
                     f"{large['seconds']:.0f} s) vs N=2^{FIELD_DASK_N[0].bit_length() - 1} ({blocks[0]} blocks, "
                     f"{small['seconds']:.0f} s); ratio = growth",
        "value": large["peak"], "baseline": small["peak"], "unit": "MiB", "ratio": ratio,
        "target": "growth <= 1.1 (independent of N)", "met": ratio <= 1.1,
    }]


FIELD_LOOP_ROWS = 16   # rows the per-sample loop runs, extrapolated per row


def field_evaluation_rows() -> list[dict]:
    """The field model on one block of Saltelli's rows: lf.vmap against the per-sample
    Python loop that calls the same model row by row (on a few rows, per row)."""
    bounds = dict.fromkeys(FIELD_NAMES, (0.0, 1.0))
    x = numpy_design(FIELD_CHUNK // (len(FIELD_NAMES) + 2), bounds, seed=1)
    rows = xr.Dataset({name: ("sample", x[:, i]) for i, name in enumerate(FIELD_NAMES)})
    model = field_model()
    mapped = lf.vmap(model, dim="sample")

    def loop():
        return [model(rows.isel(sample=i)) for i in range(FIELD_LOOP_ROWS)]

    together = mapped(rows)
    for i, one in enumerate(loop()):   # the same values, row by row
        xr.testing.assert_allclose(together.isel(sample=i).drop_vars("sample", errors="ignore"), one,
                                   rtol=1e-14)
    vmap_s = best_time(lambda: mapped(rows), repeats=3) / rows.sizes["sample"]
    loop_s = best_time(loop, repeats=3) / FIELD_LOOP_ROWS
    return [{
        "benchmark": f"the field model (180x360) on {rows.sizes['sample']} of Saltelli's rows: lf.vmap vs a "
                     f"per-sample Python loop (run on {FIELD_LOOP_ROWS} rows), per row; ratio = speedup",
        "value": vmap_s * 1e3, "baseline": loop_s * 1e3, "unit": "ms", "ratio": loop_s / vmap_s,
        "target": "speedup >= 2", "met": loop_s / vmap_s >= 2,
    }]


def peak_memory(func):
    """(func(), the peak of the memory NumPy and Python allocated while it ran, in bytes)."""
    tracemalloc.start()
    try:
        return func(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


if __name__ == "__main__":
    if sys.argv[1:] == ["--measure-field"]:
        print(json.dumps(measure_field()))
    elif sys.argv[1:2] == ["--measure-field-dask"]:
        print(json.dumps(measure_field_dask(int(sys.argv[2]))))
    else:
        from benchmarks.__main__ import format_row, print_table

        print_table([format_row(row) for row in main()])
