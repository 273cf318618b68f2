"""Quickstart: write a model for one example, run it on a thousand with ``lf.vmap``.

Run with ``make demo`` (or ``python examples/quickstart.py`` once the package is
installed). Builds synthetic sensor traces, scores every trace with a model written
for a single trace, checks the result against the per-example loop, and shows one of
the policy errors that protect you from silently wrong results. With ``--figures DIR``
(default ``examples/output/``) it draws ``quickstart.png``: the traces with the highest
and the lowest score, and the distribution of the scores by site.
"""

import argparse
import time
from pathlib import Path

import numpy as np
import xarray as xr

import labeled_func as lf

N_SAMPLES = 1000
N_TIMES = 64
SPIKE_MV = 2.5
OUTPUT = Path(__file__).resolve().parent / "output"


def make_traces(n_samples: int = N_SAMPLES, n_times: int = N_TIMES, seed: int = 0) -> xr.Dataset:
    """Noisy sine traces, one per sample, with coordinates and attrs."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 1.0, n_times)
    amplitude = rng.uniform(0.5, 2.0, size=(n_samples, 1))
    phase = rng.uniform(0.0, 2 * np.pi, size=(n_samples, 1))
    signal = amplitude * np.sin(2 * np.pi * 3 * t + phase) + 0.3 * rng.normal(size=(n_samples, n_times))
    return xr.Dataset(
        {"signal": (("sample", "t"), signal, {"units": "mV", "long_name": "sensor voltage"})},
        coords={
            "sample": np.arange(n_samples),
            "t": ("t", t, {"units": "s"}),
            "site": ("sample", rng.choice(["north", "south"], size=n_samples)),
        },
        attrs={"title": "synthetic sensor traces"},
    )


def score(trace: xr.DataArray, weights: xr.DataArray) -> xr.DataArray:
    """Score ONE trace (dims ("t",)): standardise over time, squash, weighted sum."""
    z = (trace - trace.mean("t")) / trace.std("t")
    result = (weights * np.tanh(z)).sum("t").rename("score")
    result.attrs = {"units": "1", "long_name": "weighted tanh score"}
    return result


def spiky_score(trace: xr.DataArray) -> xr.DataArray:
    """Python control flow on a value of the example: vmap refuses it."""
    if trace.max() > SPIKE_MV:
        return trace.max()
    return trace.mean()


def peak_if_spiky(trace: xr.DataArray) -> xr.DataArray:
    """The same rule as `spiky_score`, with the choice made per example by `xr.where`."""
    return xr.where(trace.max() > SPIKE_MV, trace.max(), trace.mean())


def best_seconds(func, repeats: int = 3) -> float:
    """Wall time of the fastest of a few calls of `func()`."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)


def main(figures_dir: Path = OUTPUT) -> None:
    traces = make_traces()
    signal = traces.signal
    weights = xr.DataArray(np.hanning(N_TIMES), dims="t", coords={"t": traces.t})
    # A few samples to compare with the loop, the spikiest one among them.
    checked = [0, 1, N_SAMPLES - 1, int(signal.max("t").argmax("sample"))]

    # `weights` has no "sample" dim, so every example shares it.
    batched_score = lf.vmap(score, dim="sample")
    scores = batched_score(signal, weights)
    looped = [score(signal.sel(sample=i), weights) for i in checked]
    vmap_seconds = best_seconds(lambda: batched_score(signal, weights))
    loop_seconds_per_sample = best_seconds(lambda: score(signal.sel(sample=0), weights))
    max_diff = max(abs(float(scores.sel(sample=i)) - float(expected))
                   for i, expected in zip(checked, looped))
    assert max_diff < 1e-9, f"vmap and the loop differ by {max_diff}"

    assert scores.dims == ("sample",)
    assert set(scores.coords) == {"sample", "site"}
    assert scores.name == "score" and scores.attrs["units"] == "1"
    by_site = scores.groupby("site").mean()

    print("labeled_func quickstart")
    print(f"  input    {signal.name}: " + " x ".join(f"{d}={n}" for d, n in signal.sizes.items())
          + f" ({signal.attrs['units']})")
    print(f"  output   {scores.name}: dims {scores.dims}, coords {sorted(scores.coords)}, attrs {scores.attrs}")
    print(f"  vmap     {N_SAMPLES} samples in {vmap_seconds * 1e3:.1f} ms (best of 3)")
    print(f"  loop     {loop_seconds_per_sample * 1e3:.2f} ms per sample"
          f" (about {loop_seconds_per_sample * N_SAMPLES * 1e3:.0f} ms for all {N_SAMPLES})")
    print(f"  checked  samples {checked} against the loop: max abs diff {max_diff:.1e}")
    print("  mean score by site: " + ", ".join(f"{site} {value:.3f}" for site, value in
                                                zip(by_site.site.values, by_site.values)))

    try:
        lf.vmap(spiky_score, dim="sample")(signal)
    except lf.DataDependentControlFlowError as err:
        first_line = str(err).splitlines()[0]
        print(f"  refused  spiky_score: {type(err).__name__}: {first_line}")
    else:
        raise AssertionError("vmap accepted an `if` on a per-example value")

    fixed = lf.vmap(peak_if_spiky, dim="sample")(signal)
    for i in checked:
        loop_value = float(spiky_score(signal.sel(sample=i)))  # outside vmap the `if` is fine
        assert abs(float(fixed.sel(sample=i)) - loop_value) < 1e-9
    n_spiky = int((signal.max("t") > SPIKE_MV).sum())
    print(f"  fixed    with xr.where: matches the loop; {n_spiky} of {N_SAMPLES} traces peak above {SPIKE_MV} mV")
    for figure in plot(signal, scores, figures_dir) or ["skipped (matplotlib is not installed)"]:
        print(f"  figure   {figure}")


def plot(signal: xr.DataArray, scores: xr.DataArray, directory: Path) -> list[Path]:
    """quickstart.png: the highest- and lowest-scoring traces, and the scores by site (xarray
    labels the axes from the attrs)."""
    try:
        import matplotlib
    except ImportError:
        return []
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for which, color in ((int(scores.argmax("sample")), "tab:red"), (int(scores.argmin("sample")), "tab:blue")):
        signal.isel(sample=which).plot(ax=left, color=color,
                                       label=f"sample {which}: score {float(scores.isel(sample=which)):.2f}")
    left.set_title("the highest- and the lowest-scoring trace")
    left.legend(fontsize="small")
    for site, group in scores.groupby("site"):
        group.plot.hist(ax=right, bins=30, alpha=0.5, label=str(site))
    right.set_title(f"lf.vmap(score, dim='sample'): {scores.sizes['sample']} scores by site")
    right.set_ylabel("number of samples")
    right.legend(fontsize="small")
    directory.mkdir(parents=True, exist_ok=True)
    fig.savefig(directory / "quickstart.png", dpi=100)
    plt.close(fig)
    return [directory / "quickstart.png"]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--figures", type=Path, default=OUTPUT, metavar="DIR",
                        help="where the PNG figures go (default: examples/output/)")
    main(parser.parse_args().figures)
