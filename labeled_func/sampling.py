"""The inputs of a sensitivity analysis: problems and bounds (SALib's problem dicts, with
their distributions and units), and ``sample`` (scrambled Sobol', Latin hypercube or
random points mapped through the inputs' inverse CDFs), re-exported as
``lf.sensitivity.sample``; the checks every method of ``lf.sensitivity`` shares.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import xarray as xr

from .model_blocks import RESULT_DIMS

__all__ = ["sample"]

# SALib's distributions and the numbers each takes in problem["bounds"].
DISTS = {"unif": ("low", "high"), "triang": ("low", "high", "peak"), "norm": ("mean", "std"),
         "truncnorm": ("low", "high", "mean", "std"), "lognorm": ("log-mean", "log-std"),
         "logunif": ("low", "high")}
METHODS = ("sobol", "lhs", "random")


def sample(problem_or_bounds: Mapping[str, Any], n: int, *,
           method: Literal["sobol", "lhs", "random"] = "sobol", seed: int | None = None,
           dim: str = "sample") -> xr.Dataset:
    """``n`` samples of the inputs, one data variable per parameter along ``dim``.

    Parameters
    ----------
    problem_or_bounds : dict
        ``{name: (low, high)}`` (uniform inputs), or SALib's problem
        ``{"names": [...], "bounds": [...]}`` with optional ``"dists"`` (``"unif"``
        (low, high), ``"norm"`` (mean, std), ``"triang"`` (low, high, peak as a
        fraction of the width), ``"truncnorm"`` (low, high, mean, std), ``"lognorm"``
        (mean, std of the log), ``"logunif"`` (low, high)) and an optional ``"units"``
        (one string or None per name).
    n : int
        The number of samples.
    method : {"sobol", "lhs", "random"}
        Scrambled Sobol' points (``scipy.stats.qmc.Sobol``: warns when ``n`` is not a
        power of two, as SALib does), a Latin hypercube (``qmc.LatinHypercube``), or
        independent uniform points (``np.random.default_rng``), mapped through each
        input's inverse CDF.
    seed : int, optional
        Makes the samples reproducible.
    dim : str
        The samples' dim.

    Returns
    -------
    xarray.Dataset
        One variable per parameter, in the problem's order, along ``dim``; its
        ``units`` attr where the problem gives one. ``lf.sensitivity.dgsm`` takes it
        with the same ``problem=`` (or ``bounds=``).

    Raises
    ------
    ValueError
        For a problem or bounds it cannot use (naming the parameter: low >= high, a
        std <= 0, an unknown distribution, lists of different lengths), or a bad
        ``n``, ``method``, ``seed`` or ``dim``.
    ImportError
        ``method="sobol"`` or ``"lhs"``, or a distribution other than ``"unif"``,
        without SciPy.

    Examples
    --------
    >>> import labeled_func as lf
    >>> x = lf.sensitivity.sample({"a": (0, 1), "b": (10, 20)}, 8, seed=0)
    >>> list(x.data_vars), x.sizes["sample"]
    (['a', 'b'], 8)
    >>> bool(x.b.min() >= 10 and x.b.max() <= 20)
    True
    """
    names, dists, units = read_inputs(problem_or_bounds, "sample")
    n = check_n(n, "sample", minimum=1)
    if method not in METHODS:
        raise ValueError(f"sensitivity.sample: method={method!r} must be one of {METHODS}")
    check_seed(seed, "sample")
    check_dim(dim, "sample")
    points = unit_points(method, n, len(names), seed, "sample")
    return xr.Dataset({name: (dim, inverse_cdf(points[:, j], *dists[name]), units_attrs(units[name]))
                       for j, name in enumerate(names)})


# --- problems and bounds ----------------------------------------------------------------------
def read_inputs(problem_or_bounds, caller):
    """(names, {name: (dist, params)}, {name: units or None}) of a problem or of bounds."""
    where = f"sensitivity.{caller}"
    if isinstance(problem_or_bounds, Mapping) and "names" in problem_or_bounds and "bounds" in problem_or_bounds:
        return _read_problem(problem_or_bounds, where)
    if not isinstance(problem_or_bounds, Mapping) or not problem_or_bounds:
        raise ValueError(f"{where}: problem_or_bounds must be a dict {{name: (low, high)}} or SALib's problem "
                         f"{{'names': [...], 'bounds': [...]}}, not {type(problem_or_bounds).__name__}"
                         f"{' (empty)' if isinstance(problem_or_bounds, Mapping) else ''}")
    names = list(problem_or_bounds)
    bad = [name for name in names if not isinstance(name, str)]
    if bad:
        raise ValueError(f"{where}: the parameter names {bad} must be strings")
    dists = {name: ("unif", _params(where, name, "unif", problem_or_bounds[name])) for name in names}
    return names, dists, dict.fromkeys(names)


def _read_problem(problem, where):
    names = problem["names"]
    if isinstance(names, str):
        raise ValueError(f"{where}: problem['names'] is the string {names!r}; give a list of names, one per "
                         "parameter")
    names, bounds = list(names), list(problem["bounds"])
    dists = problem.get("dists")
    dists = ["unif"] * len(names) if dists is None else list(dists)
    units = problem.get("units")
    units = [None] * len(names) if units is None else list(units)
    if problem.get("groups") is not None:
        raise ValueError(f"{where}: problem['groups'] is not supported; the indices are per parameter")
    sizes = {"names": len(names), "bounds": len(bounds), "dists": len(dists), "units": len(units)}
    if "num_vars" in problem:
        sizes["num_vars"] = problem["num_vars"]
    if len(set(sizes.values())) != 1:
        raise ValueError(f"{where}: problem has {sizes}; give one entry per parameter")
    if not names:
        raise ValueError(f"{where}: problem['names'] is empty")
    if len(set(names)) != len(names) or not all(isinstance(name, str) for name in names):
        raise ValueError(f"{where}: problem['names'] {names} must be distinct strings")
    bad_units = [u for u in units if u is not None and not isinstance(u, str)]
    if bad_units:
        raise ValueError(f"{where}: problem['units'] has {bad_units}; give a string or None per parameter")
    out = {}
    for name, dist, params in zip(names, dists, bounds):
        if dist not in DISTS:
            raise ValueError(f"{where}: problem['dists'] has {dist!r} for {name!r}; the distributions are "
                             f"{tuple(DISTS)}")
        out[name] = (dist, _params(where, name, dist, params))
    return names, out, dict(zip(names, units))


def _params(where, name, dist, given):
    """The numbers of ``dist`` for parameter ``name``, checked."""
    wanted = DISTS[dist]
    values = None
    if not isinstance(given, (str, bytes)):
        try:
            values = tuple(float(v) for v in given)
        except (TypeError, ValueError):
            values = None
    what = f"the bounds of {name!r} ({dist})"
    if values is None or len(values) != len(wanted) or not all(math.isfinite(v) for v in values):
        raise ValueError(f"{where}: {what} are {given!r}; give {len(wanted)} finite numbers "
                         f"({', '.join(wanted)})")
    if dist in ("unif", "triang", "truncnorm", "logunif") and not values[0] < values[1]:
        raise ValueError(f"{where}: {what} are {given!r}; they need low < high")
    if dist == "logunif" and values[0] <= 0:
        raise ValueError(f"{where}: {what} are {given!r}; a log-uniform input needs 0 < low")
    if dist == "triang" and not 0 <= values[2] <= 1:
        raise ValueError(f"{where}: {what} are {given!r}; the peak is a fraction of the width, in [0, 1]")
    if dist in ("norm", "truncnorm", "lognorm") and not values[-1] > 0:
        raise ValueError(f"{where}: {what} are {given!r}; they need a std > 0")
    return values


def units_attrs(units):
    return {} if units is None else {"units": units}


def check_n(n, caller, minimum):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < minimum:
        raise ValueError(f"sensitivity.{caller}: n={n!r} must be an int >= {minimum}")
    return int(n)


def check_seed(seed, caller):
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
        raise ValueError(f"sensitivity.{caller}: seed={seed!r} must be None or a non-negative int")


def check_dim(dim, caller):
    if not isinstance(dim, str) or dim in RESULT_DIMS:
        raise ValueError(f"sensitivity.{caller}: dim={dim!r} must be a string other than {RESULT_DIMS}")


# --- points -----------------------------------------------------------------------------------
def unit_points(method, n, d, seed, caller):
    """(n, d) points in the unit cube."""
    if method == "random":
        return np.random.default_rng(seed).random((n, d))
    qmc = scipy_stats(f"method={method!r}", caller).qmc
    if method == "lhs":
        return qmc.LatinHypercube(d, seed=seed).random(n)
    if n & (n - 1):
        warnings.warn(f"sensitivity.{caller}: n={n} is not a power of two; the balance and convergence "
                      "properties of Sobol' points hold for n = 2**m (as SALib warns)", UserWarning, stacklevel=3)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The balance properties of Sobol", UserWarning)
        return qmc.Sobol(d, scramble=True, seed=seed).random(n)


def inverse_cdf(u, dist, params):
    """Points ``u`` in (0, 1) mapped to the distribution, as SALib's ``scale_samples``."""
    if dist == "unif":
        low, high = params
        return u * (high - low) + low
    stats = scipy_stats(f"the distribution {dist!r}", "sample")
    if dist == "norm":
        return stats.norm.ppf(u, loc=params[0], scale=params[1])
    if dist == "lognorm":
        return np.exp(stats.norm.ppf(u, loc=params[0], scale=params[1]))
    if dist == "truncnorm":
        low, high, mean, std = params
        return stats.truncnorm.ppf(u, (low - mean) / std, (high - mean) / std, loc=mean, scale=std)
    if dist == "triang":
        low, high, peak = params
        return stats.triang.ppf(u, c=peak, scale=high - low, loc=low)
    return stats.loguniform.ppf(u, a=params[0], b=params[1])


def scipy_stats(what, caller):
    try:
        import scipy.stats
    except ImportError as error:  # pragma: no cover - scipy is in the test environment
        raise ImportError(f"sensitivity.{caller}: {what} needs SciPy (pip install scipy)") from error
    return scipy.stats
