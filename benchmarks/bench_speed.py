"""The speed goals: per-sample gradients, a time-stepping model and a Jacobian at sizes
where the time is in the NumPy kernels, against NumPy written by hand.

- Ishigami per-sample gradients, N = 1e6: `lf.vmap(lf.grad(f), dim="sample")` against
  the closed-form gradient written in NumPy with `**` (as a person writes it).
- Advection-diffusion: 64 periodic cells, 200 explicit Euler steps, the gradient of the
  mean squared final field with respect to 3 parameters per sample (velocity,
  diffusivity, decay), N = 2,000 samples: `lf.vmap(lf.grad(model), dim="sample")` of
  the model written for one example in xarray, against forward finite differences of
  the same model written in NumPy for the whole batch (4 evaluations).
- Lorenz-96 Jacobian, M = 2,000 sites: `lf.jacrev` and `lf.jacfwd` of the tendency
  written in xarray, against a loop of forward finite differences of the NumPy tendency
  (M + 1 evaluations).
- Peak memory of the Ishigami gradients at N = 4e6 (no chunk_size) over the NumPy
  gradient's, both measured with tracemalloc (NumPy reports its buffers to it).
- The same workloads under `lf.jit` (traced once before timing, then replayed), also with
  `keep_buffers=True` (a program's scratch memory kept from one call to the next), and the
  cost of one operation in a replayed program (a chain of 100 `np.sin` on 10 elements)
  against the same chain in NumPy.
- Where PyTorch is installed (it is not a dependency): lf's times over torch.func's for
  the same models (`torch.func.vmap(torch.func.grad(f))` on an (N, D) tensor; jacrev and
  jacfwd of the Lorenz-96 tendency at M = 400, jacrev at M = 2,000), PyTorch with the
  threads it chooses.

Every result is first checked against an independent oracle (the closed form, central
differences); every figure is the best of several repeats, baselines in the same run.

    python -m benchmarks.bench_speed
"""
import tracemalloc

import numpy as np
import xarray as xr

import labeled_func as lf
from benchmarks.bench_autodiff import ISHIGAMI_A, ISHIGAMI_B, PARAMS, ishigami, lorenz96, lorenz96_jacobian
from benchmarks.bench_vmap import best_time

try:  # the torch.func rows, where PyTorch is installed (not a dependency)
    import torch
    import torch.func
except ImportError:
    torch = None

ISHIGAMI_N = 1_000_000
MEMORY_N = 4_000_000
CELLS, STEPS, DX, DT = 64, 200, 1.0 / 64, 0.005
FLOW_N = 2_000
FLOW_PARAMS = ("velocity", "diffusivity", "decay")
SITES, FORCING = 2_000, 8.0
TORCH_SITES = 400
FD_STEP = 1e-7
REPEATS = 3


def main() -> list[dict]:
    return [*ishigami_rows(), *memory_rows(), *advection_diffusion_rows(), *lorenz96_rows(), replay_row()]


def row(benchmark, value_s, baseline_s, target, goal):
    ratio = value_s / baseline_s
    return {"benchmark": benchmark, "value": value_s * 1e3, "baseline": baseline_s * 1e3, "unit": "ms",
            "ratio": ratio, "target": f"ratio <= {goal}", "met": ratio <= goal}


def lf_times(transformed, args, check):
    """The best times of ``transformed(*args)``, of ``lf.jit(transformed)(*args)`` (traced
    before timing) and of the same with ``keep_buffers=True``; ``check`` compares each
    result with the oracle first."""
    jitted, kept = lf.jit(transformed), lf.jit(transformed, keep_buffers=True)
    check(transformed(*args))
    for compiled in (jitted, kept):
        check(compiled(*args))
        check(compiled(*args))  # replayed
    return (best_time(lambda: transformed(*args), REPEATS), best_time(lambda: jitted(*args), REPEATS),
            best_time(lambda: kept(*args), REPEATS))


def with_and_without_jit(name, transformed, args, baseline_s, goal, jit_goal, check, torch_rows=None):
    """Three rows: ``transformed(*args)``, ``lf.jit(transformed)(*args)`` and the same with
    ``keep_buffers=True`` against ``baseline_s``; then, where PyTorch is installed,
    ``torch_rows(plain_s, jit_s, kept_s)``."""
    plain_s, jit_s, kept_s = lf_times(transformed, args, check)
    rows = [row(name, plain_s, baseline_s, "ratio", goal),
            row("  the same under lf.jit", jit_s, baseline_s, "ratio", jit_goal),
            row("  the same under lf.jit(keep_buffers=True)", kept_s, baseline_s, "ratio", jit_goal)]
    return rows + (torch_rows(plain_s, jit_s, kept_s) if torch_rows is not None and torch is not None else [])


def against_torch(label, torch_s, plain_s, jit_s, kept_s, goal, jit_goal):
    """Rows of lf's three times over torch.func's (goals None: for reference)."""
    version = torch.__version__.split("+")[0]
    rows = []
    for name, value_s, target in ((f"  lf / {label} (torch {version})", plain_s, goal),
                                  ("  lf.jit / the same", jit_s, jit_goal),
                                  ("  lf.jit(keep_buffers=True) / the same", kept_s, jit_goal)):
        ratio = value_s / torch_s
        rows.append({"benchmark": name, "value": value_s * 1e3, "baseline": torch_s * 1e3, "unit": "ms",
                     "ratio": ratio, "target": "none (for reference)" if target is None else f"ratio <= {target}",
                     "met": target is None or ratio <= target})
    return rows


def torch_tensor(array):
    return torch.as_tensor(np.ascontiguousarray(array), dtype=torch.float64)


# --- Ishigami -----------------------------------------------------------------------------------
def ishigami_gradient_power(x1, x2, x3):
    """The closed-form gradient in NumPy, written with ** as a person writes it."""
    return (np.cos(x1) * (1 + ISHIGAMI_B * x3**4), 2 * ISHIGAMI_A * np.sin(x2) * np.cos(x2),
            4 * ISHIGAMI_B * x3**3 * np.sin(x1))


def ishigami_samples(n, seed=0):
    rng = np.random.default_rng(seed)
    values = {name: rng.uniform(-np.pi, np.pi, n) for name in PARAMS}
    return values, xr.Dataset({name: ("sample", v) for name, v in values.items()})


def ishigami_rows():
    values, samples = ishigami_samples(ISHIGAMI_N)
    exact = ishigami_gradient_power(*values.values())

    def check(got):
        for name, expected in zip(PARAMS, exact):
            np.testing.assert_allclose(got[name].values, expected, rtol=1e-12, atol=1e-12)

    numpy_s = best_time(lambda: ishigami_gradient_power(*values.values()), REPEATS)

    def torch_rows(plain_s, jit_s, kept_s):
        def f(x):
            return torch.sin(x[0]) + ISHIGAMI_A * torch.sin(x[1]) ** 2 + ISHIGAMI_B * x[2] ** 4 * torch.sin(x[0])

        per_sample = torch.func.vmap(torch.func.grad(f))
        table = torch_tensor(np.stack(list(values.values()), axis=-1))
        np.testing.assert_allclose(per_sample(table).numpy(), np.stack(exact, axis=-1), rtol=1e-12, atol=1e-12)
        torch_s = best_time(lambda: per_sample(table), REPEATS)
        return against_torch("torch.func.vmap(grad)", torch_s, plain_s, jit_s, kept_s, None, 0.6)

    return with_and_without_jit(
        f"Ishigami per-sample grads, vmap(grad) / NumPy gradient written with ** (N={ISHIGAMI_N:.0e})",
        lf.vmap(lf.grad(ishigami), dim="sample"), (samples,), numpy_s, 0.8, 0.45, check, torch_rows)


def peak_bytes(func):
    """The peak of the memory traced by tracemalloc during ``func()``, above the start."""
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        func()
        return tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()


def memory_rows():
    values, samples = ishigami_samples(MEMORY_N, seed=1)
    per_sample_grad = lf.vmap(lf.grad(ishigami), dim="sample")
    lf_bytes = peak_bytes(lambda: per_sample_grad(samples))
    numpy_bytes = peak_bytes(lambda: ishigami_gradient_power(*values.values()))
    jitted = lf.jit(per_sample_grad)
    jitted(samples)  # traced before measuring: the replay's memory
    jit_bytes = peak_bytes(lambda: jitted(samples))
    return [{
        "benchmark": f"peak extra memory, Ishigami per-sample grads (N={MEMORY_N:.0e}) / NumPy gradient",
        "value": lf_bytes / 2**20, "baseline": numpy_bytes / 2**20, "unit": "MiB",
        "ratio": lf_bytes / numpy_bytes, "target": "ratio <= 3", "met": lf_bytes / numpy_bytes <= 3,
    }, {
        "benchmark": "  the same under lf.jit (replay)",
        "value": jit_bytes / 2**20, "baseline": numpy_bytes / 2**20, "unit": "MiB",
        "ratio": jit_bytes / numpy_bytes, "target": "ratio <= 2", "met": jit_bytes / numpy_bytes <= 2,
    }]


# --- advection-diffusion -----------------------------------------------------------------------------
def initial_field():
    cells = (np.arange(CELLS) + 0.5) * DX
    return np.exp(-((cells - 0.3) / 0.08) ** 2)


U0 = xr.DataArray(initial_field(), dims="cell")


def advection_diffusion(p):
    """One example: upwind advection, diffusion and decay of a bump, explicit Euler."""
    u = U0
    for _ in range(STEPS):
        left, right = u.roll(cell=1), u.roll(cell=-1)
        u = u + DT * (-p.velocity * (u - left) / DX + p.diffusivity * (right - 2 * u + left) / DX**2
                      - p.decay * u)
    return (u**2).mean("cell")


def advection_diffusion_numpy(velocity, diffusivity, decay):
    """The same model for a whole batch in NumPy: parameters (N,), field (N, cells)."""
    c, k, r = velocity[:, None], diffusivity[:, None], decay[:, None]
    u = np.broadcast_to(initial_field(), (velocity.shape[0], CELLS))
    for _ in range(STEPS):
        left, right = np.roll(u, 1, axis=1), np.roll(u, -1, axis=1)
        u = u + DT * (-c * (u - left) / DX + k * (right - 2 * u + left) / DX**2 - r * u)
    return (u**2).mean(axis=1)


def flow_parameters(n, seed=2):
    rng = np.random.default_rng(seed)
    return {"velocity": rng.uniform(0.5, 1.5, n), "diffusivity": rng.uniform(5e-4, 2e-3, n),
            "decay": rng.uniform(0.0, 1.0, n)}


def forward_differences(values, step=FD_STEP):
    base = advection_diffusion_numpy(**values)
    return {name: (advection_diffusion_numpy(**{**values, name: values[name] + step}) - base) / step
            for name in FLOW_PARAMS}


def central_differences(values):
    """The gradients of the NumPy advection-diffusion model by central differences (the
    oracle of the benchmarks' gradients), one array per parameter."""
    expected = {}
    for name in FLOW_PARAMS:
        h = 1e-6 * np.abs(values[name]).max()
        plus = advection_diffusion_numpy(**{**values, name: values[name] + h})
        minus = advection_diffusion_numpy(**{**values, name: values[name] - h})
        expected[name] = (plus - minus) / (2 * h)
    return expected


def advection_diffusion_rows():
    values = flow_parameters(FLOW_N)
    samples = xr.Dataset({name: ("sample", v) for name, v in values.items()})
    expected = central_differences(values)

    def check(got):
        for name in FLOW_PARAMS:
            np.testing.assert_allclose(got[name].values, expected[name], rtol=1e-5, atol=1e-9)

    fd_s = best_time(lambda: forward_differences(values), REPEATS)

    def torch_rows(plain_s, jit_s, kept_s):
        u0 = torch_tensor(initial_field())

        def model(p):
            u = u0
            for _ in range(STEPS):
                left, right = torch.roll(u, 1), torch.roll(u, -1)
                u = u + DT * (-p[0] * (u - left) / DX + p[1] * (right - 2 * u + left) / DX**2 - p[2] * u)
            return (u**2).mean()

        per_sample = torch.func.vmap(torch.func.grad(model))
        table = torch_tensor(np.stack([values[name] for name in FLOW_PARAMS], axis=-1))
        got = per_sample(table).numpy()
        for k, name in enumerate(FLOW_PARAMS):
            np.testing.assert_allclose(got[:, k], expected[name], rtol=1e-5, atol=1e-9)
        torch_s = best_time(lambda: per_sample(table), REPEATS)
        return against_torch("torch.func.vmap(grad)", torch_s, plain_s, jit_s, kept_s, None, 0.6)

    return with_and_without_jit(
        f"advection-diffusion {CELLS} cells x {STEPS} steps, vmap(grad) / NumPy forward FD "
        f"(N={FLOW_N:,}, 3 params, 4 evaluations)",
        lf.vmap(lf.grad(advection_diffusion), dim="sample"), (samples,), fd_s, 1.6, 0.7, check, torch_rows)


# --- Lorenz-96 --------------------------------------------------------------------------------------
def lorenz96_numpy(x):
    return (np.roll(x, -1) - np.roll(x, 2)) * np.roll(x, 1) - x + FORCING


def finite_difference_loop(x):
    """Forward differences of the NumPy tendency, one column per site."""
    base = lorenz96_numpy(x)
    jac = np.empty((x.size, x.size))
    for k in range(x.size):
        shifted = x.copy()
        shifted[k] += FD_STEP
        jac[:, k] = (lorenz96_numpy(shifted) - base) / FD_STEP
    return jac


def lorenz96_rows():
    rng = np.random.default_rng(1)
    state = xr.DataArray(FORCING + rng.normal(size=SITES), dims="site")
    exact = lorenz96_jacobian(state.values)
    np.testing.assert_allclose(finite_difference_loop(state.values), exact, atol=1e-5)
    fd_s = best_time(lambda: finite_difference_loop(state.values), REPEATS)
    rows = []
    for name, transform in (("jacrev", lf.jacrev), ("jacfwd", lf.jacfwd)):
        def check(got):
            np.testing.assert_allclose(got.values, exact, rtol=1e-14, atol=1e-14)

        rows += with_and_without_jit(f"Lorenz-96 Jacobian, {name} / NumPy forward-FD loop (M={SITES:,})",
                                     transform(lorenz96), (state,), fd_s, 0.5, 0.3, check)
    return rows + lorenz96_torch_rows()


def lorenz96_torch_rows():
    """jacrev and jacfwd of the Lorenz-96 tendency against torch.func's, at M = 400; and jacrev
    at M = 2,000 (the compiler issue's goal: lf.jit's replay within half of torch.func's)."""
    if torch is None:
        return []
    rows = []
    for sites, names, jit_goal in ((TORCH_SITES, ("jacrev", "jacfwd"), 0.8), (SITES, ("jacrev",), 0.5)):
        rows += _lorenz96_torch_rows(sites, names, jit_goal)
    return rows


def _lorenz96_torch_rows(sites, names, jit_goal):
    rng = np.random.default_rng(4)
    state = xr.DataArray(FORCING + rng.normal(size=sites), dims="site")
    exact = lorenz96_jacobian(state.values)
    x = torch_tensor(state.values)

    def tendency(v):
        return (torch.roll(v, -1) - torch.roll(v, 2)) * torch.roll(v, 1) - v + FORCING

    rows = []
    for name, transform, torch_transform in (("jacrev", lf.jacrev, torch.func.jacrev),
                                             ("jacfwd", lf.jacfwd, torch.func.jacfwd)):
        if name not in names:
            continue

        def check(got):
            np.testing.assert_allclose(np.asarray(got), exact, rtol=1e-14, atol=1e-14)

        jacobian = torch_transform(tendency)
        check(jacobian(x).numpy())
        torch_s = best_time(lambda: jacobian(x), REPEATS)
        plain_s, jit_s, kept_s = lf_times(transform(lorenz96), (state,), check)
        rows += against_torch(f"torch.func.{name}, Lorenz-96 Jacobian (M={sites:,})", torch_s, plain_s, jit_s,
                              kept_s, 1.2, jit_goal)
    return rows


def sin_chain(a):
    for _ in range(100):
        a = np.sin(a)
    return a


def replay_row():
    """One operation of a replayed program, against the same operation in NumPy."""
    a = np.linspace(0.0, 1.0, 10)
    jitted = lf.jit(sin_chain)
    np.testing.assert_allclose(jitted(a), sin_chain(a), rtol=1e-15)
    jit_s = best_time(lambda: [jitted(a) for _ in range(100)], 7) / (100 * 100)
    numpy_s = best_time(lambda: [sin_chain(a) for _ in range(100)], 7) / (100 * 100)
    return {"benchmark": "one np.sin of 10 elements in a replayed 100-op program, per op; baseline NumPy",
            "value": jit_s * 1e6, "baseline": numpy_s * 1e6, "unit": "us", "ratio": jit_s / numpy_s,
            "target": "value <= 1 us", "met": jit_s <= 1e-6}
