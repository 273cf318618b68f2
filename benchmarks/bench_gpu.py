"""Per-sample Ishigami gradients on the GPU (CuPy through cupy-xarray) against NumPy.

`lf.vmap(lf.grad(f), dim="sample")` on a Dataset of N samples moved to the GPU with
cupy-xarray's `.cupy.as_cupy()`, against the same call on the NumPy Dataset, and against
the closed-form gradient written out by hand on the GPU. Every result is first checked
against the closed form computed with NumPy.

Where CuPy or a GPU is missing, `main()` returns no rows and says why on stderr, so
`python -m benchmarks` runs everywhere. On a GPU machine:

    pip install -e ".[gpu]" cupy-cuda12x      # the CuPy wheel for the machine's CUDA
    python -m benchmarks.bench_gpu            # N = 1e7; or: python -m benchmarks.bench_gpu 1e6
"""

import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np
import xarray as xr

import labeled_func as lf
from benchmarks.bench_autodiff import ISHIGAMI_A, ISHIGAMI_B, PARAMS, ishigami, ishigami_gradient_numpy
from benchmarks.bench_vmap import best_time

N_SAMPLES = 10_000_000
REPEATS = 5


@dataclass
class Device:
    """An array library standing for the GPU: how to move a Dataset there and wait for it."""

    name: str
    xp: object
    to_device: Callable[[xr.Dataset], xr.Dataset]
    to_numpy: Callable[[object], np.ndarray]
    synchronize: Callable[[], None]


def main(n_samples: int = N_SAMPLES) -> list[dict]:
    device = cupy_device()
    if isinstance(device, str):
        print(f"bench_gpu: skipped ({device})", file=sys.stderr)
        return []
    return rows(device, n_samples)


def cupy_device():
    """The CuPy `Device`, or a string saying why there is none."""
    try:
        import cupy
        import cupy_xarray  # noqa: F401  (registers the .cupy accessor)
    except ImportError as error:
        return f"CuPy or cupy-xarray is not importable: {error}"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "CuPy finds no GPU"
    except Exception as error:  # CUDARuntimeError without a driver
        return f"CuPy finds no usable GPU: {error}"

    def synchronize():
        cupy.cuda.get_current_stream().synchronize()

    return Device("CuPy", cupy, lambda ds: ds.cupy.as_cupy(), cupy.asnumpy, synchronize)


def closed_form_gradient(xp, x1, x2, x3):
    """The hand-written gradient with the functions of array library ``xp``."""
    return (
        xp.cos(x1) * (1 + ISHIGAMI_B * x3**4),
        2 * ISHIGAMI_A * xp.sin(x2) * xp.cos(x2),
        4 * ISHIGAMI_B * x3**3 * xp.sin(x1),
    )


def rows(device: Device, n_samples: int) -> list[dict]:
    rng = np.random.default_rng(0)
    values = {name: rng.uniform(-np.pi, np.pi, n_samples) for name in PARAMS}
    samples = xr.Dataset({name: ("sample", v) for name, v in values.items()},
                         coords={"sample": np.arange(n_samples)})
    on_device = device.to_device(samples)
    per_sample_grad = lf.vmap(lf.grad(ishigami), dim="sample")
    device_arrays = [on_device[name].data for name in PARAMS]

    exact = ishigami_gradient_numpy(*values.values())
    on_gpu = per_sample_grad(on_device)
    on_cpu = per_sample_grad(samples)
    by_hand = closed_form_gradient(device.xp, *device_arrays)
    for name, expected, hand in zip(PARAMS, exact, by_hand):
        assert type(on_gpu[name].data) is type(device_arrays[0]), type(on_gpu[name].data)
        assert isinstance(on_gpu.indexes["sample"], type(samples.indexes["sample"]))
        np.testing.assert_allclose(device.to_numpy(on_gpu[name].data), expected, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(device.to_numpy(hand), expected, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(on_cpu[name].values, expected, rtol=1e-12, atol=1e-12)

    def on_the_device(func):
        func()  # warm-up: CuPy compiles its kernels on first use
        device.synchronize()

        def timed():
            func()
            device.synchronize()
        return timed

    jitted = lf.jit(per_sample_grad)  # the program replayed on CuPy arrays, elementwise chains fused into CUDA kernels
    replayed = jitted(on_device)
    for name, expected in zip(PARAMS, exact):
        assert type(replayed[name].data) is type(device_arrays[0]), type(replayed[name].data)
        np.testing.assert_allclose(device.to_numpy(replayed[name].data), expected, rtol=1e-12, atol=1e-12)

    gpu_s = best_time(on_the_device(lambda: per_sample_grad(on_device)), REPEATS)
    jit_s = best_time(on_the_device(lambda: jitted(on_device)), REPEATS)
    hand_s = best_time(on_the_device(lambda: closed_form_gradient(device.xp, *device_arrays)), REPEATS)
    cpu_s = best_time(lambda: per_sample_grad(samples), REPEATS)
    size = f"N={n_samples:,}, D={len(PARAMS)}"
    return [
        {
            "benchmark": f"Ishigami per-sample grads on {device.name} vs NumPy, vmap(grad) both ({size}); "
                         "ratio = speedup",
            "value": gpu_s * 1e3, "baseline": cpu_s * 1e3, "unit": "ms",
            "ratio": cpu_s / gpu_s, "target": "none (for reference)", "met": True,
        },
        {
            "benchmark": f"Ishigami per-sample grads on {device.name}, vmap(grad) / hand-written "
                         f"{device.name} gradient ({size})",
            "value": gpu_s * 1e3, "baseline": hand_s * 1e3, "unit": "ms",
            "ratio": gpu_s / hand_s, "target": "ratio <= 3", "met": gpu_s / hand_s <= 3,
        },
        {
            "benchmark": f"Ishigami per-sample grads on {device.name}, lf.jit(vmap(grad)) / hand-written "
                         f"{device.name} gradient ({size})",
            "value": jit_s * 1e3, "baseline": hand_s * 1e3, "unit": "ms",
            "ratio": jit_s / hand_s, "target": "none (for reference)", "met": True,
        },
    ]


if __name__ == "__main__":
    from benchmarks.__main__ import format_row, print_table

    table = main(int(float(sys.argv[1])) if len(sys.argv) > 1 else N_SAMPLES)
    if table:
        print_table([format_row(row) for row in table])
