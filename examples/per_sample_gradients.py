"""Per-sample gradients of a logistic-regression loss: `lf.vmap(lf.grad(loss))` vs a loop.

    python examples/per_sample_gradients.py       # writes its figure into examples/output/
    python examples/per_sample_gradients.py --figures DIR

The loss is written for ONE labelled example (features along the dim `feature`);
`lf.grad(loss)` differentiates it with respect to the weights, and
`lf.vmap(..., dim="sample")` maps that over the samples.  The weights have no `sample`
dim, so every example shares them; the result has dims (sample, feature), the
gradient of each example's loss on its own (what differential privacy, influence
functions and gradient-noise diagnostics need, and what the gradient of the mean loss
averages away).

Oracles: the closed form (σ(w·x + b) − y)·x for each example, and a Python loop of
`lf.grad` over the examples one at a time.  The timing of both is printed.  The figure
maps the gradients of the first samples (sample by feature, labelled by xarray from
the result's dims, coords and attrs) beside the spread of their norms.
"""

import argparse
import time
from pathlib import Path

import numpy as np
import xarray as xr

import labeled_func as lf

N_SAMPLES = 2000
N_FEATURES = 16
N_LOOPED = 100  # the loop is timed on this many examples, and extrapolated
N_MAPPED = 60  # the figure maps the gradients of this many samples
OUTPUT = Path(__file__).resolve().parent / "output"


def loss(params: xr.Dataset, features: xr.DataArray, label: xr.DataArray) -> xr.DataArray:
    """Binary cross-entropy of ONE example: `features` has dims ("feature",), `label` is 0-d."""
    logit = (params.weight * features).sum("feature") + params.bias
    # log(1 + exp(-z)) and log(1 + exp(z)), written stably with logaddexp
    return label * np.logaddexp(0.0, -logit) + (1 - label) * np.logaddexp(0.0, logit)


def make_data(seed: int = 0) -> tuple[xr.Dataset, xr.DataArray, xr.DataArray]:
    rng = np.random.default_rng(seed)
    feature = [f"f{i}" for i in range(N_FEATURES)]
    features = xr.DataArray(rng.normal(size=(N_SAMPLES, N_FEATURES)), dims=("sample", "feature"),
                            coords={"sample": np.arange(N_SAMPLES), "feature": feature})
    true_weight = xr.DataArray(rng.normal(size=N_FEATURES), dims="feature", coords={"feature": feature})
    probability = 1 / (1 + np.exp(-(features * true_weight).sum("feature")))
    labels = xr.DataArray(rng.uniform(size=N_SAMPLES) < probability, dims="sample").astype(float)
    params = xr.Dataset({"weight": 0.5 * true_weight, "bias": xr.DataArray(0.1)})
    return params, features, labels


def closed_form(params: xr.Dataset, features: xr.DataArray, labels: xr.DataArray) -> xr.Dataset:
    """∂loss/∂w = (σ(w·x + b) − y) x and ∂loss/∂b = σ(w·x + b) − y, for every example at once."""
    residual = 1 / (1 + np.exp(-((params.weight * features).sum("feature") + params.bias))) - labels
    return xr.Dataset({"weight": residual * features, "bias": residual})


def best_seconds(func, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)


def main(figures_dir: Path = OUTPUT) -> None:
    params, features, labels = make_data()
    per_sample_grad = lf.vmap(lf.grad(loss), dim="sample")
    grads = per_sample_grad(params, features, labels)

    assert grads.weight.dims == ("sample", "feature") and grads.bias.dims == ("sample",)
    exact = closed_form(params, features, labels)
    xr.testing.assert_allclose(grads, exact.transpose(*grads.dims), rtol=1e-12, atol=1e-14)

    grad_one = lf.grad(loss)
    looped = xr.concat([grad_one(params, features.isel(sample=i), labels.isel(sample=i))
                        for i in range(N_LOOPED)], dim="sample")
    looped = looped.assign_coords(sample=features.sample[:N_LOOPED])  # grads carry the params' coords only
    xr.testing.assert_allclose(grads.isel(sample=slice(N_LOOPED)), looped.transpose(*grads.dims),
                               rtol=1e-12, atol=1e-14)
    # The mean of the per-sample gradients is the gradient of the mean loss.
    mean_grad = lf.grad(lambda p: lf.vmap(loss, dim="sample")(p, features, labels).mean())(params)
    xr.testing.assert_allclose(grads.mean("sample"), mean_grad, rtol=1e-12)

    vmap_s = best_seconds(lambda: per_sample_grad(params, features, labels))
    loop_s = best_seconds(lambda: [grad_one(params, features.isel(sample=i), labels.isel(sample=i))
                                   for i in range(N_LOOPED)], repeats=1) / N_LOOPED
    norms = np.sqrt((grads.weight**2).sum("feature") + grads.bias**2)

    print(f"Per-sample gradients of a logistic loss: {N_SAMPLES} samples x {N_FEATURES} features")
    print(f"  result   weight {grads.weight.dims}, bias {grads.bias.dims}")
    print(f"  checked  against the closed form (all samples) and a loop of lf.grad ({N_LOOPED} samples)")
    print(f"  vmap     {vmap_s * 1e3:8.1f} ms for all {N_SAMPLES} (best of 3)")
    print(f"  loop     {loop_s * 1e3:8.2f} ms per sample, about {loop_s * N_SAMPLES * 1e3:.0f} ms for all"
          f" {N_SAMPLES} ({loop_s * N_SAMPLES / vmap_s:.0f}x slower)")
    print(f"  gradient norm per sample: median {float(norms.median()):.3f}, max {float(norms.max()):.3f}")
    for figure in plot(grads, norms, mean_grad, figures_dir) or ["skipped (matplotlib is not installed)"]:
        print(f"  figure: {figure}")


def plot(grads: xr.Dataset, norms: xr.DataArray, mean_grad: xr.Dataset, directory: Path) -> list[Path]:
    """per_sample_gradients.png: ∂loss/∂weight of the first samples as a map (xarray labels
    its axes and colour bar), and the histogram of the per-sample gradient norms."""
    try:
        import matplotlib
    except ImportError:
        return []
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5), constrained_layout=True,
                                      gridspec_kw={"width_ratios": [3, 2]})
    mapped = grads.weight.isel(sample=slice(N_MAPPED)).assign_attrs(long_name="∂loss/∂weight of each sample")
    mapped.plot(ax=left, x="sample", y="feature", cmap="RdBu_r", center=0)
    left.set_title(f"lf.vmap(lf.grad(loss)): the first {N_MAPPED} of {grads.sizes['sample']} samples")
    right.hist(norms, bins=40, color="tab:gray")
    mean_norm = float(np.sqrt((mean_grad.weight**2).sum() + mean_grad.bias**2))
    right.axvline(mean_norm, color="tab:red", label=f"norm of the mean gradient ({mean_norm:.3f})")
    right.set(xlabel="norm of the per-sample gradient (weight and bias)", ylabel="number of samples",
              title="per-sample gradient norms")
    right.legend(fontsize="small")
    directory.mkdir(parents=True, exist_ok=True)
    fig.savefig(directory / "per_sample_gradients.png", dpi=100)
    plt.close(fig)
    return [directory / "per_sample_gradients.png"]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--figures", type=Path, default=OUTPUT, metavar="DIR",
                        help="where the PNG figures go (default: examples/output/)")
    main(parser.parse_args().figures)
