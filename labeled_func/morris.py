"""Morris' elementary effects (screening), with an optional derivative-based variant.

``morris`` builds SALib's default trajectory design (random starting points on a
``levels``-grid of the unit cube, one-at-a-time steps of ``delta = levels / (2 (levels
- 1))`` in a random order with random signs), runs the model on all its rows with one
``lf.vmap`` call (or blocks of ``chunk_size`` rows), and gives SALib's ``mu``,
``mu_star``, ``sigma`` and ``mu_star_conf`` for a scalar output or a field.  With
``gradients=True`` it adds the same statistics of the exact derivatives at the first
point of each trajectory.  Re-exported as ``lf.sensitivity.morris``.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from statistics import NormalDist
from typing import Any

import numpy as np
import xarray as xr

from .autodiff import jacfwd, jacrev
from .model_blocks import ModelBlocks, Progress, check_block_options, check_finite, checked_model, units_per_block
from .sampling import check_dim, check_seed, inverse_cdf, read_inputs, units_attrs
from .vmap import vmap

__all__ = ["morris"]

# Distributions whose inverse CDF is finite at 0 and 1 (the grid's end levels).
BOUNDED_DISTS = ("unif", "triang", "truncnorm", "logunif")
RESAMPLE_ELEMENTS = 2 ** 22   # resampled means held at once in the bootstrap (32 MiB of float64)
_LONG_NAMES = {
    "mu": "mean elementary effect (Morris 1991)",
    "mu_star": "mean absolute elementary effect (Campolongo et al. 2007)",
    "sigma": "standard deviation of the elementary effects",
    "mu_star_conf": "half-width of the confidence interval of mu_star",
    "mu_grad": "mean derivative times the input's step over delta, at the trajectories' first points",
    "mu_star_grad": "mean absolute derivative times the input's step over delta, at the trajectories' first points",
    "sigma_grad": "standard deviation of the derivatives times the steps over delta",
    "mu_star_grad_conf": "half-width of the confidence interval of mu_star_grad",
}


def morris(model: Callable[[xr.Dataset], Any], problem_or_bounds: Mapping[str, Any], trajectories: int, *,
           levels: int = 4, seed: int | None = None, num_resamples: int = 1000, conf_level: float = 0.95,
           dim: str = "sample", chunk_size: int | None = None, gradients: bool = False,
           progress: bool | Callable[[int, int], Any] | None = None, jit: bool | None = None) -> xr.Dataset:
    """Morris' elementary effects of ``model`` on SALib's trajectory design.

    Parameters
    ----------
    model : callable
        Maps ONE sample's parameters (a Dataset of 0-d variables, as for
        ``lf.sensitivity.dgsm`` and ``sobol``) to a scalar or a DataArray (a field:
        any dims but ``dim`` and ``param``).
    problem_or_bounds : dict
        ``{name: (low, high)}`` or SALib's problem, as for
        :func:`labeled_func.sensitivity.sample`; the distributions must be bounded
        (``"unif"``, ``"triang"``, ``"truncnorm"``, ``"logunif"``): the grid's end
        levels 0 and 1 are mapped through each inverse CDF.
    trajectories : int
        The number of trajectories r (at least 2): the model runs on r (D + 1) points.
    levels : int
        The grid's levels p (even, at least 2); the step is delta = p / (2 (p - 1)).
    seed : int, optional
        Seeds the design and the bootstrap, as SALib's ``seed`` does in
        ``morris.sample`` and ``morris.analyze``.
    num_resamples : int
        Bootstrap resamples of the trajectories (at least 2) for ``mu_star_conf``.
    conf_level : float
        Level of the normal interval whose half-width is ``mu_star_conf``.
    dim : str
        The name of the samples' dim under ``lf.vmap``.
    chunk_size : int, optional
        Model evaluations per vectorised call, rounded down to whole trajectories
        (D + 1 rows each, at least one); all in one call when None.
    gradients : bool
        Also compute the exact derivatives of the model (``lf.vmap`` of
        ``lf.jacrev``, or ``lf.jacfwd`` for an output larger than D) at the first
        point of each trajectory, times the step that the trajectory takes in that
        input over delta (``high - low`` for a uniform input): the elementary effect
        that the derivative predicts, equal to it for a model linear in that input.
        Adds ``mu_grad``, ``mu_star_grad``, ``sigma_grad`` and ``mu_star_grad_conf``.
        The model must be differentiable by ``lf``.
    progress : bool or callable, optional
        ``True`` draws a progress bar (tqdm when installed, else a line on stderr); a
        callable is called as ``progress(done, total)`` after each block of model
        evaluations (and of gradients).  Without ``chunk_size`` the model then runs in
        ten blocks.  As ``lf.sensitivity.dgsm``'s.
    jit : bool, optional
        Run the vmapped model as one ``lf.jit`` program, traced in the first block and
        replayed in every other (the last block padded with copies of its last row), as
        ``lf.sensitivity.sobol`` does: ``None`` (the default) jits with several blocks
        or an ``lf.jit``-wrapped model, and falls back to the un-jitted model where
        ``lf.jit`` cannot trace it; ``True`` raises there; ``False`` never jits.  The
        gradients (``gradients=True``) run un-jitted.

    Returns
    -------
    xarray.Dataset
        ``mu``, ``mu_star``, ``sigma``, ``mu_star_conf`` (and with ``gradients`` the
        four ``*_grad``) with dims ``(param, *output dims)``, the parameter names and
        the output's coords; each in the output's units (where it has a ``units``
        attr) and with a ``long_name``; attrs ``trajectories``, ``levels``, ``delta``
        and ``model_evaluations``.

    Raises
    ------
    ValueError
        For a problem or bounds it cannot use (naming the parameter; an unbounded
        distribution), for bad options, or for a model output that is not one
        DataArray (or scalar) per sample, or that has the dim ``dim`` or ``param``; for a
        model output that is not finite (NaN or infinite) in some rows of the design,
        saying how many and which (their parameters): SALib would give NaN statistics;
        for a model that reads a parameter the problem or bounds lack, naming it.

    Notes
    -----
    An elementary effect of input i is (f(x + delta e_i) - f(x)) / delta on the unit
    cube (SALib's: the step is delta, not delta (high - low)): for f = sum a_i x_i on
    [0, 1] every one equals a_i.  ``mu`` is their mean over the trajectories,
    ``mu_star`` the mean of their absolute values, ``sigma`` their standard deviation
    (ddof=1); ``mu_star_conf`` resamples the trajectories with SALib's indices (per
    parameter, ``default_rng(seed).integers(r, size=(num_resamples, r))``).  With the
    same integer seed the design and the numbers are SALib's (SALib's default
    ``num_resamples`` is 100).  The elementary effects are kept (r × D × the output's
    size, float64); the model outputs of one block at a time.

    Examples
    --------
    >>> import labeled_func as lf
    >>> result = lf.sensitivity.morris(lambda p: 3 * p.a - p.b ** 2, {"a": (0, 1), "b": (0, 1)}, 20, seed=0)
    >>> result.mu_star.sel(param="a").round(6).item(), result.sigma.sel(param="a").round(6).item()
    (3.0, 0.0)
    """
    where = "sensitivity.morris"
    if not callable(model):
        raise ValueError(f"{where}: model must be a function of one sample's parameters (a Dataset), "
                         f"not a {type(model).__name__}; the problem or bounds come second")
    names, dists, units = read_inputs(problem_or_bounds, "morris")
    unbounded = [name for name in names if dists[name][0] not in BOUNDED_DISTS]
    if unbounded:
        raise ValueError(f"{where}: the distributions of {unbounded} "
                         f"({', '.join(dists[n][0] for n in unbounded)}) are unbounded, and the grid's end "
                         f"levels 0 and 1 would map to infinite inputs; morris takes {BOUNDED_DISTS}")
    if isinstance(trajectories, bool) or not isinstance(trajectories, (int, np.integer)) or trajectories < 2:
        raise ValueError(f"{where}: trajectories={trajectories!r} must be an int >= 2")
    if (isinstance(levels, bool) or not isinstance(levels, (int, np.integer)) or levels < 2 or levels % 2):
        raise ValueError(f"{where}: levels={levels!r} must be an even int >= 2 (Morris' grid; SALib warns on "
                         "odd levels)")
    check_seed(seed, "morris")
    if isinstance(num_resamples, bool) or not isinstance(num_resamples, (int, np.integer)) or num_resamples < 2:
        raise ValueError(f"{where}: num_resamples={num_resamples!r} must be an int >= 2")
    if not (isinstance(conf_level, (int, float, np.floating)) and not isinstance(conf_level, bool)
            and 0 < conf_level < 1):
        raise ValueError(f"{where}: conf_level={conf_level!r} must be between 0 and 1")
    check_dim(dim, "morris")
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer))
                                   or chunk_size < 1):
        raise ValueError(f"{where}: chunk_size={chunk_size!r} must be a positive int or None")
    if gradients is not True and gradients is not False:
        raise ValueError(f"{where}: gradients={gradients!r} must be True or False")
    check_block_options(jit, progress, "morris")

    r, d, levels = int(trajectories), len(names), int(levels)
    delta = levels / (2.0 * (levels - 1))
    unit = trajectory_design(r, d, levels, seed)                       # (r, d + 1, d) in [0, 1]
    inputs = np.stack([inverse_cdf(unit[..., j], *dists[name]) for j, name in enumerate(names)], axis=-1)
    moved, sign = _moves(unit)
    per_block = units_per_block(r, d + 1, chunk_size, progress)
    blocks = math.ceil(r / per_block)
    evaluate = ModelBlocks(model, names, dim, "morris", jit, blocks)
    report = Progress(progress, blocks * (2 if gradients else 1), "morris")

    effects, template = None, None
    for start in range(0, r, per_block):
        stop = min(r, start + per_block)
        outputs = evaluate(_rows(inputs[start:stop].reshape(-1, d), names, units, dim),
                           per_block * (d + 1)).transpose(dim, ...)
        y = np.asarray(outputs.data, dtype=float).reshape(stop - start, d + 1, -1)
        check_finite(y.reshape((stop - start) * (d + 1), -1), inputs[start:stop].reshape(-1, d).__getitem__,
                      names, start * (d + 1), r * (d + 1), "morris")
        if template is None:
            template = outputs.isel({dim: 0}, drop=True)
            effects = np.empty((r, d, y.shape[-1]))
        steps = (y[:, 1:] - y[:, :-1]) * sign[start:stop, :, None] / delta         # (block, step, element)
        rows = np.arange(stop - start)[:, None]
        effects[start + rows, moved[start:stop]] = steps                            # by parameter
        report.advance()

    rng = np.random.default_rng(seed)
    z = NormalDist().inv_cdf(0.5 + conf_level / 2)
    result = _statistics(effects, int(num_resamples), z, rng, "")
    attrs = {"trajectories": r, "levels": levels, "delta": delta, "model_evaluations": r * (d + 1)}
    if gradients:
        scale = np.abs(inputs[:, -1] - inputs[:, 0]) / delta   # each input's step, per unit of delta
        partials = _gradients(evaluate.model, names, units, dim, inputs[:, 0], template, per_block,
                              report)   # (r, d, element)
        result.update(_statistics(partials * scale[:, :, None], int(num_resamples), z,
                                  np.random.default_rng(seed), "_grad"))
        attrs["gradient_evaluations"] = r
    report.close()
    return _labelled(result, names, template, attrs)


def trajectory_design(trajectories: int, d: int, levels: int, seed: int | None) -> np.ndarray:
    """(trajectories, d + 1, d) points of the unit cube: SALib's ``_sample_morris`` with the
    same draws from ``default_rng(seed)`` (per trajectory: the order of the moves, their
    signs, the starting point)."""
    rng = np.random.default_rng(seed)
    delta = levels / (2.0 * (levels - 1))
    grid = np.linspace(0, 1 - delta, int(levels / 2))
    lower = np.tril(np.ones((d + 1, d)), -1)          # row k: the first k moves done
    out = np.empty((trajectories, d + 1, d))
    for t in range(trajectories):
        order = np.eye(d)
        rng.shuffle(order)                            # P*: the order of the moves
        signs = rng.choice([-1, 1], d)                # D*: up or down
        start = rng.choice(grid, d)                   # x*: on the grid's lower half
        out[t] = start + (delta / 2.0) * (((2.0 * lower) @ order.T - 1) * signs + 1)
    return out


def _moves(unit):
    """(moved, sign), each (trajectories, d): the parameter that step k moves, and +1 where
    it moves up."""
    steps = unit[:, 1:] - unit[:, :-1]
    moved = np.abs(steps).argmax(axis=-1)
    sign = np.sign(np.take_along_axis(steps, moved[..., None], axis=-1)[..., 0])
    return moved, sign


def _rows(points, names, units, dim):
    return xr.Dataset({name: (dim, points[:, j], units_attrs(units[name])) for j, name in enumerate(names)})


def _gradients(model, names, units, dim, points, template, per_block, report):
    """(r, d, element): the model's partial derivatives at ``points`` (r, d), by reverse mode
    for outputs no larger than d, else forward."""
    checked = checked_model(model, names, dim, "morris")
    jacobian = jacrev(checked) if template.size <= len(names) else jacfwd(checked)
    batched = vmap(jacobian, dim=dim)
    blocks = []
    for start in range(0, len(points), per_block):
        partials = batched(_rows(points[start:start + per_block], names, units, dim))
        blocks.append(np.stack([np.asarray(partials[name].transpose(dim, *template.dims).data, dtype=float)
                                .reshape(partials.sizes[dim], -1) for name in names], axis=1))
        report.advance()
    return np.concatenate(blocks)


def _statistics(effects, num_resamples, z, rng, suffix):
    """{mu, mu_star, sigma, mu_star_conf}+suffix of ``effects`` (r, d, element), each (d, element);
    the bootstrap draws SALib's indices per parameter from ``rng``."""
    absolute = np.abs(effects)
    mu_star = absolute.mean(axis=0)
    out = {"mu": effects.mean(axis=0), "mu_star": mu_star, "sigma": effects.std(axis=0, ddof=1)}
    conf = np.empty_like(mu_star)
    step = max(1, RESAMPLE_ELEMENTS // max(1, effects.shape[-1]))
    _bootstrap(absolute, mu_star, conf, num_resamples, z, rng, step)
    out["mu_star_conf"] = conf
    return {key.replace("_conf", "") + suffix + ("_conf" if key.endswith("_conf") else ""): value
            for key, value in out.items()}


def _bootstrap(absolute, mu_star, conf, num_resamples, z, rng, step):
    """``conf[j]``: z times the standard deviation of mu_star over SALib's resamples."""
    r = absolute.shape[0]
    for j in range(absolute.shape[1]):
        indices = rng.integers(r, size=(num_resamples, r))
        total, squares = 0.0, 0.0
        for first in range(0, num_resamples, step):
            block = indices[first:first + step]
            counts = np.zeros((len(block), r))
            np.add.at(counts, (np.arange(len(block))[:, None], block), 1.0)
            centred = counts @ absolute[:, j] / r - mu_star[j]    # resampled mu_star, less the estimate
            total, squares = total + centred.sum(axis=0), squares + (centred ** 2).sum(axis=0)
        conf[j] = z * np.sqrt(np.maximum(squares - total ** 2 / num_resamples, 0) / (num_resamples - 1))


def _labelled(result, names, template, attrs):
    coords = {"param": names, **{key: c for key, c in template.coords.items()}}
    dims, shape = ("param",) + template.dims, (len(names),) + template.shape
    units = template.attrs.get("units")
    variables = {}
    for key, values in result.items():
        var_attrs = {"long_name": _LONG_NAMES[key]}
        if units is not None:
            var_attrs["units"] = units
        variables[key] = xr.DataArray(values.reshape(shape), dims=dims, attrs=var_attrs)
    return xr.Dataset(variables, coords=coords, attrs=attrs)
