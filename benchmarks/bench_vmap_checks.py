"""What vmap's per-call checks cost on a small call (64 examples of 16 values, three xarray
operations), where they weigh the most:

- watching NumPy's global random state (randomness="error" watches it, "same" does not);
- giving each example its coordinates along the mapped dim (a numeric index, a numeric
  and a string coordinate) against the same data without them.

Every figure is the best of several rounds that alternate the two calls compared.
"""

import time

import numpy as np
import xarray as xr

import labeled_func as lf

N_EXAMPLES = 64
N_TIMES = 16
ROUNDS = 15
CALLS_PER_ROUND = 40


def main() -> list[dict]:
    rng = np.random.default_rng(0)
    plain = xr.DataArray(rng.normal(size=(N_EXAMPLES, N_TIMES)), dims=("member", "t"))
    labelled = plain.assign_coords(member=np.arange(float(N_EXAMPLES)),
                                   weight=("member", rng.normal(size=N_EXAMPLES)),
                                   tag=("member", [f"m{k}" for k in range(N_EXAMPLES)]))
    watched = lf.vmap(spread, dim="member")
    unwatched = lf.vmap(spread, dim="member", randomness="same")
    xr.testing.assert_identical(watched(labelled), unwatched(labelled))
    watch_s, same_s = best_times(lambda: watched(plain), lambda: unwatched(plain))
    coords_s, bare_s = best_times(lambda: watched(labelled), lambda: watched(plain))
    size = f"{N_EXAMPLES} examples of {N_TIMES}"
    return [
        {
            "benchmark": f"vmap watching np.random / not ({size})",
            "value": watch_s * 1e6, "baseline": same_s * 1e6, "unit": "us",
            "ratio": watch_s / same_s, "target": "ratio <= 1.05", "met": watch_s / same_s <= 1.05,
        },
        {
            "benchmark": f"vmap with 3 coordinates along the dim / without ({size})",
            "value": coords_s * 1e6, "baseline": bare_s * 1e6, "unit": "us",
            "ratio": coords_s / bare_s, "target": "ratio <= 2.5", "met": coords_s / bare_s <= 2.5,
        },
    ]


def spread(x: xr.DataArray) -> xr.DataArray:
    """One example's spread about its mean."""
    return np.sqrt(((x - x.mean("t")) ** 2).sum("t"))


def best_times(first, second) -> tuple[float, float]:
    """Seconds per call of ``first()`` and ``second()``: the best of ROUNDS alternating rounds."""
    best = [float("inf"), float("inf")]
    for _ in range(ROUNDS):
        for k, func in enumerate((first, second)):
            start = time.perf_counter()
            for _ in range(CALLS_PER_ROUND):
                func()
            best[k] = min(best[k], (time.perf_counter() - start) / CALLS_PER_ROUND)
    return best[0], best[1]
