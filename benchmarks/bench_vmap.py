"""vmap against hand-vectorised xarray and `xr.apply_ufunc(vectorize=True)`; the cost
of one NumPy call on a traced array.

Every figure is the best of several repeats of `time.perf_counter`.
"""

import time

import numpy as np
import xarray as xr

import labeled_func as lf

N_SAMPLES = 10_000
N_TIMES = 64
REPEATS = 7
CALLS_PER_REPEAT = 10_000
TRACED_SIZE = 10


def main() -> list[dict]:
    return [*model_rows(), numpy_call_row()]


def model(x: xr.DataArray) -> xr.DataArray:
    """The model for one example; the same code also runs on the whole batch."""
    z = (x - x.mean("t")) / x.std("t")
    return np.tanh(z).sum("t")


def model_numpy(a: np.ndarray) -> np.ndarray:
    """The model for one example as a NumPy function of a 1-d array, for apply_ufunc."""
    z = (a - a.mean()) / a.std()
    return np.tanh(z).sum()


def model_rows() -> list[dict]:
    rng = np.random.default_rng(0)
    data = xr.DataArray(
        rng.normal(size=(N_SAMPLES, N_TIMES)),
        dims=("sample", "t"),
        coords={"sample": np.arange(N_SAMPLES), "t": np.linspace(0.0, 1.0, N_TIMES)},
    )
    batched_model = lf.vmap(model, dim="sample")

    def with_apply_ufunc():
        return xr.apply_ufunc(model_numpy, data, input_core_dims=[["t"]], vectorize=True)

    vmapped = batched_model(data)
    xr.testing.assert_allclose(vmapped, model(data))
    xr.testing.assert_allclose(vmapped, with_apply_ufunc())

    vmap_s = best_time(lambda: batched_model(data))
    hand_s = best_time(lambda: model(data))
    apply_s = best_time(with_apply_ufunc, repeats=3)
    size = f"N={N_SAMPLES:,}, T={N_TIMES}"
    return [
        {
            "benchmark": f"vmap / hand-vectorised xarray ({size})",
            "value": vmap_s * 1e3, "baseline": hand_s * 1e3, "unit": "ms",
            "ratio": vmap_s / hand_s, "target": "ratio <= 1.3", "met": vmap_s / hand_s <= 1.3,
        },
        {
            "benchmark": f"vmap vs apply_ufunc(vectorize=True) ({size}); ratio = speedup",
            "value": vmap_s * 1e3, "baseline": apply_s * 1e3, "unit": "ms",
            "ratio": apply_s / vmap_s, "target": "speedup >= 10", "met": apply_s / vmap_s >= 10,
        },
    ]


def numpy_call_row() -> dict:
    """np.sin on a traced 10-element array, per call, against plain NumPy on the same size.

    The loop of calls runs inside the vmapped function (batch of one), so the time
    measured is the dispatch of each call and nothing of vmap's set-up.
    """
    per_call = []

    def time_sin_calls(x):
        per_call.append(time_calls(np.sin, x))
        return x

    lf.vmap(time_sin_calls, in_dims=(0,))(np.linspace(0.0, 1.0, TRACED_SIZE)[None, :])
    traced_us = per_call[0] * 1e6
    plain_us = time_calls(np.sin, np.linspace(0.0, 1.0, TRACED_SIZE)) * 1e6
    return {
        "benchmark": f"np.sin on a traced {TRACED_SIZE}-element array, per call; baseline plain NumPy",
        "value": traced_us, "baseline": plain_us, "unit": "us",
        "ratio": traced_us / plain_us, "target": "value <= 3 us", "met": traced_us <= 3,
    }


def time_calls(func, x) -> float:
    """Seconds per call of `func(x)`, from the fastest loop of CALLS_PER_REPEAT calls."""

    def calls():
        for _ in range(CALLS_PER_REPEAT):
            func(x)

    return best_time(calls) / CALLS_PER_REPEAT


def best_time(func, repeats: int = REPEATS) -> float:
    """Seconds of the fastest of `repeats` calls of `func()`."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - start)
    return best
