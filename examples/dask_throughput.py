"""Throughput and progress of `lf.vmap(lf.grad(f))` over dask chunks, by chunk size.

    python examples/dask_throughput.py            # writes dask_throughput.png into examples/output/
    python examples/dask_throughput.py --figures DIR

The Ishigami per-sample gradients of N samples, chunked along `sample` in chunks of a
few sizes, are reduced to the DGSM ν_i = E[(∂f/∂x_i)²] on dask's threaded scheduler.
For each chunk size the script measures the samples per second of the whole
computation and records, with a dask callback, when each task finished: the figure
draws the throughput against the chunk size and the progress (the share of tasks
done) against the time.  Small chunks pay the per-task overhead (one trace of the
function per block); large ones leave threads idle.

Oracles: for every chunk size, the same reduction of the hand-written gradient (plain
dask array arithmetic on the same chunks, no labeled_func) to rounding, and the
analytic ν_i within Monte Carlo error.  The numbers are measurements of this machine,
printed, never asserted.

Needs `dask[array]` (the `dask` extra); without it the script says so and stops.
"""

import argparse
import time
from pathlib import Path

import numpy as np
import xarray as xr

import labeled_func as lf

A, B = 7.0, 0.1
PARAMS = ("x1", "x2", "x3")
N_SAMPLES = 2**18
CHUNK_SIZES = (2**12, 2**14, 2**16, 2**18)
OUTPUT = Path(__file__).resolve().parent / "output"


def ishigami(p: xr.Dataset) -> xr.DataArray:
    """The Ishigami function of ONE sample (x1, x2, x3 are 0-d)."""
    return np.sin(p.x1) + A * np.sin(p.x2) ** 2 + B * p.x3**4 * np.sin(p.x1)


def ishigami_gradient(p: xr.Dataset) -> xr.Dataset:
    """∂f/∂x_i by hand, on the whole (lazy) batch: the oracle."""
    return xr.Dataset({
        "x1": np.cos(p.x1) * (1 + B * p.x3**4),
        "x2": 2 * A * np.sin(p.x2) * np.cos(p.x2),
        "x3": 4 * B * p.x3**3 * np.sin(p.x1),
    })


def analytic_vi() -> np.ndarray:
    pi = np.pi
    return np.array([(1 + 2 * B * pi**4 / 5 + B**2 * pi**8 / 9) / 2, A**2 / 2, 8 * B**2 * pi**6 / 7])


def samples(chunk: int, seed: int = 0) -> xr.Dataset:
    """The same uniform samples on (−π, π)³ for every chunk size, chunked along `sample`."""
    rng = np.random.default_rng(seed)
    data = {name: ("sample", rng.uniform(-np.pi, np.pi, N_SAMPLES)) for name in PARAMS}
    return xr.Dataset(data).chunk(sample=chunk)


def run(chunk: int) -> tuple[np.ndarray, float, np.ndarray]:
    """ν_i on the threaded scheduler: (ν, seconds, finishing time of every task)."""
    from dask.callbacks import Callback

    finished: list[float] = []

    class Recorder(Callback):
        def _posttask(self, key, result, dsk, state, worker_id):
            finished.append(time.perf_counter())

    lazy = lf.vmap(lf.grad(ishigami), dim="sample")(samples(chunk))
    assert lazy.x1.chunks == ((chunk,) * (N_SAMPLES // chunk),), lazy.x1.chunks  # still lazy, same chunks
    squares = (lazy**2).mean("sample")
    start = time.perf_counter()
    with Recorder():
        nu = squares.compute(scheduler="threads")
    seconds = time.perf_counter() - start
    return np.array([float(nu[name]) for name in PARAMS]), seconds, np.array(finished) - start


def main(figures_dir: Path = OUTPUT) -> None:
    try:
        import dask  # noqa: F401
    except ImportError:
        print("dask is not installed: skipping (pip install 'labeled-func[dask]')")
        return
    nu_exact = analytic_vi()
    run(CHUNK_SIZES[-1])  # warm-up: the first call sets up
    throughput, progress = [], []
    print(f"lf.vmap(lf.grad(ishigami)) of {N_SAMPLES} samples on dask's threaded scheduler")
    print(f"  {'samples per chunk':>17} {'tasks':>6} {'seconds':>8} {'samples/s':>11}")
    for chunk in CHUNK_SIZES:
        nu, seconds, finished = run(chunk)
        oracle = (ishigami_gradient(samples(chunk)) ** 2).mean("sample").compute(scheduler="threads")
        np.testing.assert_allclose(nu, [float(oracle[name]) for name in PARAMS], rtol=1e-12)
        np.testing.assert_allclose(nu, nu_exact, rtol=0.03)
        throughput.append(N_SAMPLES / seconds)
        finished = np.sort(finished)
        done = xr.DataArray(np.arange(1, len(finished) + 1) / len(finished), dims="elapsed",
                            coords={"elapsed": ("elapsed", finished, {"long_name": "time since start", "units": "s"})},
                            attrs={"long_name": "share of the tasks done", "units": "1"})
        progress.append((chunk, done))
        print(f"  {chunk:17d} {len(finished):6d} {seconds:8.3f} {N_SAMPLES / seconds:11.3g}")
    print("  checked: nu_i = the hand-written gradient's reduction (rtol 1e-12) and the analytic"
          " nu_i (within 3 %) for every chunk size")

    rates = xr.DataArray(throughput, dims="chunk", name="throughput",
                         coords={"chunk": ("chunk", list(CHUNK_SIZES), {"long_name": "samples per chunk"})},
                         attrs={"long_name": "throughput", "units": "samples/s"})
    for figure in plot(rates, progress, figures_dir) or ["skipped (matplotlib is not installed)"]:
        print(f"  figure: {figure}")


def plot(rates: xr.DataArray, progress: list, directory: Path) -> list[Path]:
    """dask_throughput.png: samples/s by chunk size (left), progress curves (right); xarray
    labels the axes from the coords' and values' attrs."""
    try:
        import matplotlib
    except ImportError:
        return []
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5), constrained_layout=True)
    rates.plot.line(ax=left, x="chunk", marker="o", xscale="log")
    left.set_title(f"{N_SAMPLES} samples, threaded scheduler")
    left.set_ylim(0, 1.1 * float(rates.max()))
    for chunk, done in progress:
        done.plot.step(ax=right, where="post", label=f"{chunk} samples per chunk ({done.sizes['elapsed']} tasks)")
    right.set_title("progress of the computation")
    right.legend(fontsize="small", loc="lower right")
    directory.mkdir(parents=True, exist_ok=True)
    fig.savefig(directory / "dask_throughput.png", dpi=100)
    plt.close(fig)
    return [directory / "dask_throughput.png"]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--figures", type=Path, default=OUTPUT, metavar="DIR",
                        help="where the PNG figures go (default: examples/output/)")
    main(parser.parse_args().figures)
