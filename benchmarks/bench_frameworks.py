"""Per-sample gradients of the Ishigami function against other function-transform libraries.

The same N = 100,000 samples as `bench_autodiff.py`, in float64 everywhere:

- `lf.vmap(lf.grad(f), dim="sample")` on a Dataset (measured here, in the same run);
- `jax.vmap(jax.grad(f))` on an (N, 3) array, dispatched op by op and under
  `jax.jit` (x64 enabled; compilation happens in a warm-up call and is not timed;
  `block_until_ready` waits for the result);
- `torch.func.vmap(torch.func.grad(f))` on an (N, 3) tensor.

A library that is not installed gives no row; with neither JAX nor PyTorch the module
returns no rows at all. HIPS `autograd` has no vmap: its row (the gradient of the sum
over samples, one reverse pass) is in `bench_autodiff.py`. JAX and PyTorch use the
threads they choose by default. The conversion of the samples to arrays and tensors is
not timed; `lf`'s figure includes building the Dataset it returns.

Every figure is the best of several repeats of `time.perf_counter`, and every
library's gradients are first checked against the closed form.

    python -m benchmarks.bench_frameworks
"""

import numpy as np
import xarray as xr

import labeled_func as lf
from benchmarks.bench_autodiff import ISHIGAMI_A, ISHIGAMI_B, PARAMS, ishigami, ishigami_gradient_numpy
from benchmarks.bench_vmap import best_time

N_SAMPLES = 100_000
REPEATS = 5


def main() -> list[dict]:
    frameworks = [f for f in (jax_per_sample_grads(), torch_per_sample_grads()) if f is not None]
    if not frameworks:
        return []
    rng = np.random.default_rng(0)
    table = rng.uniform(-np.pi, np.pi, (N_SAMPLES, len(PARAMS)))
    samples = xr.Dataset({name: ("sample", table[:, i]) for i, name in enumerate(PARAMS)},
                         coords={"sample": np.arange(N_SAMPLES)})
    exact = np.stack(ishigami_gradient_numpy(*table.T), axis=-1)

    per_sample_grad = lf.vmap(lf.grad(ishigami), dim="sample")
    transformed = per_sample_grad(samples)
    np.testing.assert_allclose(np.stack([transformed[n].values for n in PARAMS], axis=-1), exact,
                               rtol=1e-12, atol=1e-12)
    lf_s = best_time(lambda: per_sample_grad(samples), REPEATS)

    size = f"N={N_SAMPLES:,}, D={len(PARAMS)}"
    rows = []
    for variants in frameworks:
        for label, prepare in variants:
            compute = prepare(table)
            np.testing.assert_allclose(compute(), exact, rtol=1e-12, atol=1e-12)
            other_s = best_time(compute, REPEATS)
            rows.append({
                "benchmark": f"Ishigami per-sample grads, lf vmap(grad) / {label} ({size})",
                "value": lf_s * 1e3, "baseline": other_s * 1e3, "unit": "ms",
                "ratio": lf_s / other_s, "target": "none (for reference)", "met": True,
            })
    return rows


def jax_per_sample_grads():
    """[(label, prepare)] for JAX, or None where it is not installed.

    `prepare(table)` moves the (N, 3) samples to the library and returns a function
    that computes the (N, 3) gradients as a NumPy array.
    """
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    def f(x):
        return jnp.sin(x[0]) + ISHIGAMI_A * jnp.sin(x[1]) ** 2 + ISHIGAMI_B * x[2] ** 4 * jnp.sin(x[0])

    def prepare(transform):
        def with_table(table):
            x = jnp.asarray(table, dtype=jnp.float64)
            transform(x).block_until_ready()  # compiles (jit) / warms up the dispatch
            return lambda: np.asarray(transform(x).block_until_ready())

        return with_table

    per_sample = jax.vmap(jax.grad(f))
    return [(f"jax.vmap(jax.grad) {jax.__version__}", prepare(per_sample)),
            (f"jax.jit(jax.vmap(jax.grad)) {jax.__version__}", prepare(jax.jit(per_sample)))]


def torch_per_sample_grads():
    """[(label, prepare)] for torch.func, or None where PyTorch is not installed."""
    try:
        import torch
        import torch.func
    except ImportError:
        return None

    def f(x):
        return torch.sin(x[0]) + ISHIGAMI_A * torch.sin(x[1]) ** 2 + ISHIGAMI_B * x[2] ** 4 * torch.sin(x[0])

    per_sample = torch.func.vmap(torch.func.grad(f))

    def prepare(table):
        x = torch.as_tensor(table, dtype=torch.float64)
        per_sample(x)
        return lambda: per_sample(x).numpy()

    version = torch.__version__.split("+")[0]
    return [(f"torch.func.vmap(torch.func.grad) {version}", prepare)]


if __name__ == "__main__":
    from benchmarks.__main__ import format_row, print_table

    print_table([format_row(row) for row in main()])
