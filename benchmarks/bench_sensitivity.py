"""lf.sensitivity: the Jacobian mode of `local`, and the cost of the bootstrap of `dgsm`.

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

Every figure is the best of several repeats of `time.perf_counter`; the baselines are
measured in the same run, and their results are first checked against each other.
"""

import tracemalloc

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
    return [*local_rows(), *dgsm_rows(), *progress_rows()]


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
                                            lazy=False, report=sensitivity._Progress(None, 0))

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


def stepping(p):
    """Explicit Euler steps of a harvested logistic growth, in xarray: its cost is per operation."""
    y = xr.zeros_like(p.r) + 0.1
    for _ in range(STEPPING_STEPS):
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


def peak_memory(func):
    """(func(), the peak of the memory NumPy and Python allocated while it ran, in bytes)."""
    tracemalloc.start()
    try:
        return func(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


if __name__ == "__main__":
    from benchmarks.__main__ import format_row, print_table

    print_table([format_row(row) for row in main()])
