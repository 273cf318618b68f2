"""Derivative-based sensitivity analysis from exact per-sample gradients.

``dgsm`` computes the derivative-based global sensitivity measures
ν_i = E[(∂f/∂x_i)²] with one vectorised model evaluation for all samples (finite
differences need D + 1 evaluations per sample and are biased), SALib's result names
and the Sobol'–Kucherenko upper bound of the total Sobol' indices; ``local`` gives the
local elasticities ∂y/∂p · p/y, by forward or reverse mode, whichever is cheaper;
``plot_indices`` draws a result's indices as bars with their intervals.  ``sample``
(the designs every method here accepts) and ``sobol`` (Saltelli's design, Jansen's and
Saltelli's estimators, field outputs) live in ``sobol.py`` and are part of this
namespace.
"""
from __future__ import annotations

import math
import threading
import warnings
import weakref
from collections.abc import Callable, Mapping
from statistics import NormalDist
from typing import Any, Literal

import numpy as np
import xarray as xr

from labeled_func_kernels.backend import namespace

from .autodiff import jacfwd, jacrev, vjp
from .backends import check_one_backend
from .dask import compiled_blocks
from .jit import Jitted, jit as lf_jit
from .morris import morris  # lf.sensitivity.morris (elementary effects: morris.py)
from .model_blocks import Progress  # the progress= protocol, shared with sobol and morris
from .sampling import sample  # lf.sensitivity.sample (sampling.py)
from .sobol import sobol, sobol_convergence  # variance-based (sobol.py)
from .units import Inputs, derivative_units, label_output
from .vmap import vmap

__all__ = ["dgsm", "local", "sample", "sobol", "sobol_convergence", "morris", "plot_indices"]

MODES = ("auto", "forward", "reverse")
SALIB_DISTS = ("unif", "triang", "norm", "truncnorm", "lognorm", "logunif")
# Poincaré constants C_i (Var g(x_i) <= C_i E[g'(x_i)^2]) of the distributions that have a
# closed form: S_Ti <= C_i ν_i / Var(Y) (Sobol' & Kucherenko 2009).
POINCARE = {
    "unif": lambda low, high: (high - low) ** 2 / np.pi ** 2,   # sharp: cos(π(x - low)/(high - low))
    "norm": lambda mean, std: std ** 2,                         # sharp: any linear function
}
WEIGHT_BLOCK = 4096            # samples per seeded block of bootstrap weights, whatever the chunks
WEIGHTS_PER_STEP = 2 ** 19     # at most this many bootstrap weights per in-memory step (4 MiB of float64)
STEPS_WITH_PROGRESS = 10       # gradient steps when progress is on and chunk_size is not given


def dgsm(model: Callable[..., Any], samples: Any, *, dim: str = "sample",
         bounds: Mapping[str, tuple[float, float]] | None = None, problem: dict[str, Any] | None = None,
         num_resamples: int = 100, conf_level: float = 0.95, seed: int | None = None,
         mode: Literal["auto", "forward", "reverse"] = "auto", chunk_size: int | None = None,
         progress: bool | Callable[[int, int], Any] | None = None, jit: bool | None = None,
         return_gradients: bool = False) -> xr.Dataset:
    """Derivative-based global sensitivity measures of ``model`` over ``samples``.

    Parameters
    ----------
    model : callable
        With a Dataset of samples: maps ONE example's parameters (a Dataset of 0-d
        variables) to a scalar or a DataArray of outputs.  With an array of samples:
        a model written for SALib, that maps an ``(n, D)`` array to ``n`` outputs (an
        array, or a DataArray, of ``n`` values); it is called on one row at a time, an
        array of shape ``(1, D)``.  An ``lf.jit``-wrapped model: ``dgsm`` jits the whole
        per-sample gradient computation with the model inside (see ``jit``), and keeps
        that program on the jitted model, so that a later ``dgsm`` of the same model,
        samples' layout and options replays it.
    samples : xarray.Dataset or array of shape (N, D)
        One data variable per parameter, each along ``dim``; or SALib's sample matrix
        (plain random or quasi-random points, not a ``finite_diff`` design), with
        ``problem``.  Dask-backed samples give a lazy result: nothing is computed.
    dim : str
        The samples' dim.
    bounds : dict, optional
        ``{name: (low, high)}`` for every parameter, uniform on that interval: adds
        ``dgsm``, ``dgsm_conf`` and ``ST_bound``.
    problem : dict, optional
        Instead of ``bounds``: SALib's problem, ``{"names": [...], "bounds": [...]}``
        with an optional ``"dists"`` (``"unif"``: bounds are (low, high); ``"norm"``:
        (mean, std); SALib's other distributions give NaN normalised measures).
    num_resamples, conf_level, seed
        Bootstrap of the ``*_conf`` half-widths of the ``conf_level`` normal interval:
        ``num_resamples`` resamples (at least 2), reproducible with an integer ``seed``.
    mode : {"auto", "forward", "reverse"}
        How each example's Jacobian is computed: reverse mode for a scalar output,
        else forward when the parameters are fewer than the outputs ("auto").
    chunk_size : int, optional
        Samples per vectorised gradient evaluation (bounds the memory).
    progress : bool or callable, optional
        In-memory samples: ``True`` draws a progress bar (tqdm when installed, else a
        line on stderr); a callable is called as ``progress(done, total)`` after each
        step.  Without ``chunk_size`` the gradients then take ten steps.  Dask-backed
        samples compute nothing here: use ``dask.diagnostics.ProgressBar`` on compute.
    jit : bool, optional
        Run the per-sample gradients (the vmapped Jacobian of the model) as one
        ``lf.jit`` program, traced in the first block of samples and replayed in every
        other: the blocks have one size (the last one is padded with copies of the last
        sample, whose results are dropped), and on Dask each block shape traces once.
        ``None`` (the default) jits where it pays: several in-memory blocks
        (``progress``, ``chunk_size``), Dask-backed samples, or an ``lf.jit``-wrapped
        model; in memory, a model that ``lf.jit`` cannot trace (reverse mode through an
        ``lf.while_loop`` on traced values) then runs un-jitted (with a warning for an
        ``lf.jit``-wrapped model).  ``True`` raises where it cannot trace; ``False``
        never jits.  The results are the un-jitted ones, to the bit except where
        ``lf.jit`` fuses transcendental functions or sums (1e-12 relative, docs/jit.md).
    return_gradients : bool
        Add ``gradients``: the per-sample partial derivatives ∂f/∂x_i, dims
        ``(dim, "param", *output dims)``, with the samples' coordinates along ``dim``
        (for a scatter against the parameters, without a second run).

    Returns
    -------
    xarray.Dataset
        With a ``param`` dim (coords: parameter names) followed by the model
        output's dims: SALib's ``vi`` (ν_i), ``vi_std`` (the standard deviation of
        (∂f/∂x_i)² over the samples), ``dgsm`` (ν_i (high − low)² / (π² Var Y), for
        uniform inputs) and ``dgsm_conf`` (its bootstrap half-width), then ``vi_conf``
        (the half-width of ``vi``) and ``ST_bound`` (C_i ν_i / Var Y ≥ S_Ti, the total
        Sobol' index: C_i = (high − low)²/π² uniform, σ_i² normal).  Without bounds or
        problem: ``vi``, ``vi_std`` and ``vi_conf``.  ``to_dataframe()`` starts with
        SALib's four columns.  ``plot_indices`` draws them as bars.

    Raises
    ------
    ValueError
        For samples, bounds, problems or options it cannot use, naming the argument
        (SALib's problem dict given as ``bounds=`` points to ``problem=``), or a model
        output that is not one DataArray or scalar per example (n outputs for a SALib
        model: an array, or a DataArray, of shape (n,)); ``jit`` or
        ``return_gradients`` that is not a bool (``jit``: or None).  A model whose output,
        or one of its partial derivatives, is not finite (NaN or infinite) in some
        samples and finite in others, naming how many and the first ones (on Dask-backed
        samples, nothing is computed: the measures come out NaN there instead).  An output
        element that is NaN in every sample (a masked cell of a field) gives NaN measures.
    UnsupportedOperationError
        A sample variable holds a pint Quantity: call ``.pint.dequantify()`` first.

    Notes
    -----
    The bootstrap weighs each sample by 0 or 1 with probability ½ (a weighted
    bootstrap with independent weights: mean 1, variance 1, as the classical
    bootstrap's counts to first order) and takes the weighted means with one matrix
    product per block of samples.  The weights come from a seed per block of 4096
    samples, so the result does not depend on the Dask chunks.

    Examples
    --------
    >>> import numpy as np, xarray as xr, labeled_func as lf
    >>> rng = np.random.default_rng(0)
    >>> samples = xr.Dataset({"a": ("sample", rng.uniform(0, 1, 4000)),
    ...                       "b": ("sample", rng.uniform(0, 1, 4000))})
    >>> result = lf.sensitivity.dgsm(lambda p: 3 * p.a + p.b ** 2, samples)
    >>> result.vi.sel(param="a").round(6).item()    # E[3²]
    9.0

    SALib's problem and sample matrix, with a model written for SALib:

    >>> problem = {"names": ["a", "b"], "bounds": [[0, 1], [0, 1]]}
    >>> X = rng.uniform(0, 1, (4000, 2))
    >>> result = lf.sensitivity.dgsm(lambda X: 3 * X[:, 0] + X[:, 1] ** 2, X, problem=problem)
    >>> list(result.to_dataframe().columns[:4])
    ['vi', 'vi_std', 'dgsm', 'dgsm_conf']
    >>> result.ST_bound.round(1).values.tolist()   # S_T = 0.89 and 0.11: the bounds hold
    [1.1, 0.2]
    """
    check_one_backend([samples], ["samples"], transform="sensitivity.dgsm")  # pint Quantities: the policy error
    jitted_model = model if isinstance(model, Jitted) else None
    if jitted_model is not None:  # under dgsm's transforms its own jit would run the function as it is
        model = jitted_model.func
    samples, model, names, dists = _inputs(model, samples, dim, bounds, problem)
    _check_options(num_resamples, conf_level, seed, mode, chunk_size)
    if not any(jit is allowed for allowed in (None, True, False)):
        raise ValueError(f"sensitivity.dgsm: jit={jit!r} must be True, False or None")
    if return_gradients is not True and return_gradients is not False:
        raise ValueError(f"sensitivity.dgsm: return_gradients={return_gradients!r} must be True or False")
    lazy = bool(samples.chunks)
    if lazy and progress not in (None, False):
        raise ValueError(
            "sensitivity.dgsm: progress= reports on in-memory work, and on Dask-backed samples "
            "dgsm computes nothing; wrap the compute in dask.diagnostics.ProgressBar() instead"
        )
    size = samples.sizes[dim]
    if size < 2:
        raise ValueError(f"sensitivity.dgsm: samples has {size} sample(s) along {dim!r}; the measures need at least 2")
    steps = math.ceil(size / (chunk_size or (math.ceil(size / STEPS_WITH_PROGRESS) if progress else size)))
    report = Progress(progress, steps + math.ceil(size / _resample_step(num_resamples)))

    batched = _batched_jacobian(model, jitted_model, names, mode, dim, chunk_size if lazy else None)
    jitted = jit is True or (jit is None and (lazy or steps > 1 or jitted_model is not None)
                             and batched.refused is None)  # lf.jit refused this model before: not again
    if lazy:
        partials, outputs = batched.lazy(samples, jit is True) if jitted else batched.plain(samples)
        squares = _squares(partials, names, dim)
        # where the output is not finite its derivative is not the model's (0 through an
        # xr.where): NaN, so that the measures there are NaN (below: skipna=False)
        squares = squares.where(np.isfinite(outputs))
        gradients = _stacked(partials, names, dim) if return_gradients else None
    else:
        squares, outputs, gradients = _gradient_blocks(batched, samples, names, dim, size, steps, jitted, jit,
                                                       return_gradients, report)
        _check_defined(outputs, squares, samples, names, dim)

    # skipna=False: a sample where the model or its derivative is NaN makes the measures NaN
    # (in memory it was refused above), never a mean over the other samples
    centred = outputs - outputs.mean(dim, skipna=False) if dists is not None else None
    entropy = np.random.SeedSequence(seed).entropy
    resampled = _resampled_means(squares, centred, dim, names, num_resamples, entropy, lazy, report)
    report.close()
    z = NormalDist().inv_cdf(0.5 + conf_level / 2)

    result = {"vi": squares.mean(dim, skipna=False), "vi_std": squares.std(dim, skipna=False)}
    if dists is not None:
        variance = outputs.var(dim, skipna=False)
        uniform_scale = _per_param(names, [POINCARE["unif"](*dists[n][1]) if dists[n][0] == "unif" else np.nan
                                           for n in names])
        poincare = _per_param(names, [POINCARE[dists[n][0]](*dists[n][1]) if dists[n][0] in POINCARE else np.nan
                                      for n in names])
        resampled_variance = resampled["y2"] - resampled["y"] ** 2
        result["dgsm"] = result["vi"] * uniform_scale / variance
        result["dgsm_conf"] = z * (resampled["vi"] * uniform_scale / resampled_variance).std("resample", ddof=1)
    result["vi_conf"] = z * resampled["vi"].std("resample", ddof=1)
    if dists is not None:
        result["ST_bound"] = result["vi"] * poincare / variance
    if gradients is not None:
        along = {k: c.variable for k, c in samples.coords.items() if c.dims == (dim,)}
        result["gradients"] = gradients.transpose(dim, "param", ...).assign_coords(along)
    return _labelled(xr.Dataset(result), samples, outputs, names, model)


_LONG_NAMES = {
    "vi": "mean squared derivative, E[(df/dx_i)^2]", "vi_std": "standard deviation of the squared derivative",
    "vi_conf": "half-width of the confidence interval of vi", "dgsm": "DGSM index (SALib's normalisation)",
    "dgsm_conf": "half-width of the confidence interval of dgsm",
    "gradients": "per-sample partial derivative, df/dx_i",
    "ST_bound": "upper bound of the total Sobol' index (Sobol' and Kucherenko)",
}


def _labelled(result, samples, outputs, names, model):
    """Each variable's long_name and units: the indices are dimensionless ("1"); ``vi`` and its
    spread are in (output units / parameter units)^2, one per parameter, so their units are a
    coordinate along ``param`` (``vi_units``) where all are certain: the output's units are its
    own (set by the model, not passed on from a sample variable; see ``units.py``) and every
    parameter has units."""
    out_units = label_output(None, getattr(outputs, "attrs", {}), Inputs((samples,), model)).units
    per_param = [derivative_units(f"{out_units} {out_units}" if out_units else None,
                                  samples[name].attrs.get("units"), samples[name].attrs.get("units"))
                 for name in names]
    for name in list(result.data_vars):
        attrs = {"long_name": _LONG_NAMES.get(name, name)}
        if name in ("dgsm", "dgsm_conf", "ST_bound"):
            attrs["units"] = "1"
        result[name].attrs = attrs
    if per_param and None not in per_param:
        result = result.assign_coords(vi_units=("param", per_param))
    return result


def plot_indices(result: xr.Dataset | xr.DataArray, variables: str | list[str] | None = None, *,
                 ax: Any = None) -> Any:
    """Sensitivity indices as bars, one group per parameter, with error bars where known.

    The parameters are categories: a line across them (``result.ST_bound.plot()``)
    would join values that have no order.  Each variable draws one bar per parameter
    (side by side when there are several), with the half-width ``<name>_conf`` of the
    Dataset, where it has one, as error bars.

    Parameters
    ----------
    result : xarray.Dataset or xarray.DataArray
        With a ``param`` dim and no other (select the output's dims first, e.g.
        ``result.sel(t=1.0)``): the result of ``dgsm``, ``sobol`` or ``morris``, or
        one of its variables.  For a field, draw maps instead: ``result.ST.plot(col="param")``.
    variables : str or list of str, optional
        The Dataset's variables to draw.  By default ``mu_star`` (and ``mu_star_grad``)
        of a ``morris`` result; else its dimensionless indices (units ``"1"``) along
        ``param`` alone, other than the half-widths: ``S1`` and ``ST`` of a ``sobol``
        result (``S2`` is left out), ``dgsm`` and ``ST_bound`` of a ``dgsm`` with
        bounds; without them, its first variable (``vi``).
    ax : matplotlib.axes.Axes, optional
        Where to draw; by default a new figure's axes.

    Returns
    -------
    matplotlib.axes.Axes
        The axes, with the bars in ``ax.patches`` (parameters times variables), the
        parameter names as tick labels and a legend for several variables.

    Raises
    ------
    ValueError
        ``result`` is not a Dataset or DataArray, a variable is missing or has no
        ``param`` dim, or has other dims.
    ImportError
        matplotlib is not installed.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np, xarray as xr, labeled_func as lf
    >>> rng = np.random.default_rng(0)
    >>> samples = xr.Dataset({"a": ("sample", rng.uniform(0, 1, 1000)),
    ...                       "b": ("sample", rng.uniform(0, 1, 1000))})
    >>> result = lf.sensitivity.dgsm(lambda p: 3 * p.a + p.b ** 2, samples, bounds={"a": (0, 1), "b": (0, 1)})
    >>> ax = lf.sensitivity.plot_indices(result)            # dgsm (with dgsm_conf) and ST_bound
    >>> len(ax.patches), [t.get_text() for t in ax.get_xticklabels()]
    (4, ['a', 'b'])
    """
    if isinstance(result, xr.DataArray):
        drawn = {result.name or "index": (result, None)}
    elif isinstance(result, xr.Dataset):
        if variables is None:
            found = [n for n in result.data_vars if "param" in result[n].dims and "param_2" not in result[n].dims
                     and n not in ("gradients", "converged") and not str(n).endswith(("_conf", "_std"))]
            morris = [n for n in ("mu_star", "mu_star_grad") if n in found]   # morris: the screening measure
            variables = morris or [n for n in found if result[n].attrs.get("units") == "1"] or found[:1]
            if not variables:
                raise ValueError(f"sensitivity.plot_indices: the Dataset has no variable along 'param' "
                                 f"(its variables: {list(result.data_vars)})")
        variables = [variables] if isinstance(variables, str) else list(variables)
        missing = [n for n in variables if n not in result.data_vars]
        if missing:
            raise ValueError(f"sensitivity.plot_indices: the Dataset has no variables {missing} "
                             f"(it has {list(result.data_vars)})")
        drawn = {n: (result[n], result.data_vars.get(f"{n}_conf")) for n in variables}
    else:
        raise ValueError(f"sensitivity.plot_indices: result must be a Dataset or DataArray with a 'param' dim, "
                         f"not a {type(result).__name__}")
    for name, (values, _) in drawn.items():
        if values.dims != ("param",):
            other = [d for d in values.dims if d != "param"]
            hint = (f"; select or reduce {other} first, e.g. .isel({other[0]}=0)" if "param" in values.dims
                    else "")
            raise ValueError(f"sensitivity.plot_indices: {name!r} has dims {values.dims}, not ('param',){hint}")
    if ax is None:
        try:
            import matplotlib.pyplot as plt
        except ImportError as error:
            raise ImportError("sensitivity.plot_indices needs matplotlib (pip install matplotlib)") from error
        _, ax = plt.subplots()
    params = next(iter(drawn.values()))[0]["param"].values
    x = np.arange(len(params))
    width = 0.8 / len(drawn)
    for k, (name, (values, conf)) in enumerate(drawn.items()):
        heights = np.asarray(values.sel(param=params).values, dtype=float)
        errors = None if conf is None else np.asarray(conf.sel(param=params).values, dtype=float)
        ax.bar(x + (k - (len(drawn) - 1) / 2) * width, heights, width, yerr=errors, capsize=3 if errors is not None
               else 0, label=str(name))
    ax.set_xticks(x, [str(p) for p in params])
    ax.set_xlabel("param")
    if len(drawn) == 1:
        values = next(iter(drawn.values()))[0]
        ax.set_ylabel(values.attrs.get("long_name", str(next(iter(drawn)))))
    else:
        ax.set_ylabel("index")
        ax.legend()
    return ax


def local(model: Callable[[xr.Dataset], Any], params: xr.Dataset, *, normalize: bool = True,
          mode: Literal["auto", "forward", "reverse"] = "auto") -> xr.Dataset:
    """The local sensitivities of ``model`` at ``params``, keyed by parameter.

    Parameters
    ----------
    model : callable
        Maps ``params`` to a DataArray (or a scalar).
    params : xarray.Dataset
        The point: one data variable per parameter (0-d or with dims).
    normalize : bool
        Elasticities ∂y/∂p · p/y (dimensionless, ``units="1"``); else the derivatives
        ∂y/∂p, with their units.
    mode : {"auto", "forward", "reverse"}
        The Jacobian's mode: ``"forward"`` (``lf.jacfwd``, one JVP per parameter
        element), ``"reverse"`` (``lf.jacrev``, one VJP per output element) or
        ``"auto"``: forward when the parameter elements are fewer than the output's,
        so that time and memory grow linearly with the output.  Both give the same
        Dataset.

    Returns
    -------
    xarray.Dataset
        One variable per parameter: the output's dims followed by the parameter's
        (renamed with ``_wrt`` where they clash).

    Raises
    ------
    ValueError
        ``params`` is not a Dataset, ``mode`` is not one of the three, or the model
        returns something other than one DataArray or scalar (a Dataset, a tuple).
    UnsupportedOperationError
        A parameter holds a pint Quantity (before the model runs): call
        ``.pint.dequantify()`` first.

    Examples
    --------
    For y = A e^(-r t) the elasticities are ∂y/∂A · A/y = 1 and ∂y/∂r · r/y = -r t:

    >>> import numpy as np, xarray as xr, labeled_func as lf
    >>> t = xr.DataArray([0.0, 1.0, 2.0], dims="t")
    >>> decay = lambda p: p.amplitude * np.exp(-p.rate * t)
    >>> e = lf.sensitivity.local(decay, xr.Dataset({"amplitude": 2.0, "rate": 0.5}))
    >>> e.amplitude.values.tolist(), e.rate.values.tolist()     # 1 and -rate·t
    ([1.0, 1.0, 1.0], [0.0, -0.5, -1.0])
    """
    if not isinstance(params, xr.Dataset):
        raise ValueError("sensitivity.local: params must be a Dataset with one variable per parameter")
    _check_mode(mode, "local")
    check_one_backend([params], ["params"], transform="sensitivity.local")  # before the model runs
    output = model(params) if normalize or mode == "auto" else None
    if isinstance(output, (xr.Dataset, xr.DataTree)) or not (output is None or isinstance(output, xr.DataArray)
                                                             or (_is_value(output) and np.ndim(output) == 0)):
        raise ValueError("sensitivity.local: the model must return one DataArray (or a scalar), "
                         f"not a {type(output).__name__}")
    if mode == "auto":
        parameter_size = sum(int(np.prod(var.shape)) for var in params.data_vars.values())
        mode = "forward" if parameter_size < int(np.prod(np.shape(output))) else "reverse"
    jacobian = (jacfwd if mode == "forward" else jacrev)(model)(params)
    if not isinstance(jacobian, xr.Dataset):
        raise ValueError("sensitivity.local: the model must return one DataArray (or a scalar), not a "
                         f"{type(jacobian).__name__}")
    if not normalize:
        return jacobian
    what = label_output(getattr(output, "name", None), getattr(output, "attrs", {}), Inputs((params,), model),
                        model).text  # what the model set itself, else its name (units.py)
    return xr.Dataset({
        name: (jacobian[name] * _along_wrt_dims(params[name], jacobian[name]) / output).assign_attrs(
            units="1", long_name=f"elasticity of {what} with respect to {name}")
        for name in params.data_vars})


# --- inputs -----------------------------------------------------------------------------------
def _inputs(model, samples, dim, bounds, problem):
    """(samples as a Dataset, the model of one example, the names, {name: (dist, params)} or None)."""
    if bounds is not None and problem is not None:
        raise ValueError("sensitivity.dgsm: give bounds= or problem=, not both")
    if bounds is not None:
        _check_bounds(bounds)
    names, dists = _read_problem(problem) if problem is not None else (None, None)
    if isinstance(samples, xr.Dataset):
        missing = [name for name, var in samples.data_vars.items() if dim not in var.dims]
        if missing:
            raise ValueError(f"sensitivity.dgsm: the sample variables {missing} have no dim {dim!r}; every "
                             "parameter needs one value per sample")
        if names is not None:
            if set(names) != set(samples.data_vars):
                raise ValueError(f"sensitivity.dgsm: problem['names'] {names} and the sample variables "
                                 f"{list(samples.data_vars)} differ; give one name per variable")
            samples = samples[names]
        names = list(samples.data_vars)
        if bounds is not None:
            absent = [name for name in names if name not in bounds]
            if absent:
                raise ValueError(f"sensitivity.dgsm: bounds has no (low, high) for the parameters {absent}")
            dists = {name: ("unif", _interval(bounds[name], name)) for name in names}
        return samples, model, names, dists
    if hasattr(samples, "shape") and hasattr(samples, "dtype") and len(samples.shape) == 2:
        if names is None:
            raise ValueError(f"sensitivity.dgsm: samples is an array of shape {tuple(samples.shape)}; give "
                             "problem= (SALib's dict with 'names' and 'bounds') to name its columns, or pass a "
                             "Dataset with one variable per parameter")
        if samples.shape[1] != len(names):
            raise ValueError(f"sensitivity.dgsm: samples has {samples.shape[1]} columns and problem['names'] "
                             f"{len(names)} names; give one column per parameter")
        columns = xr.Dataset({name: (dim, samples[:, j]) for j, name in enumerate(names)})
        return columns, _row_model(model, names), names, dists
    raise ValueError("sensitivity.dgsm: samples must be a Dataset with one variable per parameter, or an "
                     f"(N, D) array with problem=; got {type(samples).__name__}")


def _check_bounds(bounds):
    """``bounds`` is ``{name: (low, high)}``; SALib's problem dict or bounds list say where they go."""
    if isinstance(bounds, Mapping) and "names" in bounds and "bounds" in bounds:
        raise ValueError(
            "sensitivity.dgsm: bounds= got SALib's problem dict (with 'names' and 'bounds'); pass it as "
            "problem=problem instead (bounds= takes {name: (low, high)}, one entry per parameter)")
    if not isinstance(bounds, Mapping):
        salib = (" For SALib's list of [low, high] pairs, pass problem={'names': [...], 'bounds': [...]} "
                 "instead." if isinstance(bounds, (list, tuple)) or hasattr(bounds, "shape") else "")
        raise ValueError(f"sensitivity.dgsm: bounds must be a dict {{name: (low, high)}} with one entry per "
                         f"parameter, not a {type(bounds).__name__}.{salib}")


def _interval(pair, name):
    values = _numbers(pair)
    if not (values is not None and len(values) == 2 and values[1] > values[0]):
        raise ValueError(f"sensitivity.dgsm: bounds[{name!r}] = {pair!r} must be (low, high) with low < high")
    return values


def _numbers(pair):
    """``pair`` as a tuple of floats, or None where it is not a sequence of numbers."""
    if isinstance(pair, (str, bytes)):
        return None
    try:
        return tuple(float(v) for v in pair)
    except (TypeError, ValueError):
        return None


def _read_problem(problem):
    """SALib's problem dict as (names, {name: (dist, params)})."""
    if not isinstance(problem, dict) or "names" not in problem or "bounds" not in problem:
        hint = ""
        if isinstance(problem, Mapping) and problem and all(_numbers(v) is not None for v in problem.values()):
            hint = "; a dict {name: (low, high)} goes to bounds= instead"
        raise ValueError("sensitivity.dgsm: problem must be SALib's dict with 'names' and 'bounds' "
                         f"(and optionally 'dists', 'num_vars'){hint}")
    if isinstance(problem["names"], str):
        raise ValueError(f"sensitivity.dgsm: problem['names'] is the string {problem['names']!r}; give a list "
                         "of names, one per parameter")
    names, bounds = list(problem["names"]), list(problem["bounds"])
    dists = list(problem.get("dists") or ["unif"] * len(names))
    if "groups" in problem and problem["groups"] is not None:
        raise ValueError("sensitivity.dgsm: problem['groups'] is not supported; DGSM measures each parameter")
    sizes = {"names": len(names), "bounds": len(bounds), "dists": len(dists)}
    if "num_vars" in problem:
        sizes["num_vars"] = problem["num_vars"]
    if len(set(sizes.values())) != 1:
        raise ValueError(f"sensitivity.dgsm: problem has {sizes}; give one entry per parameter")
    if len(set(names)) != len(names) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"sensitivity.dgsm: problem['names'] {names} must be distinct strings")
    out = {}
    for name, dist, params in zip(names, dists, bounds):
        if dist not in SALIB_DISTS:
            raise ValueError(f"sensitivity.dgsm: problem['dists'] has {dist!r} for {name!r}; SALib's "
                             f"distributions are {SALIB_DISTS}")
        given, params = params, _numbers(params)
        if params is None:
            raise ValueError(f"sensitivity.dgsm: problem['bounds'] for {name!r} is {given!r}; give a pair "
                             "of numbers ((low, high) for 'unif', (mean, std) for 'norm')")
        if dist == "unif" and not (len(params) == 2 and params[1] > params[0]):
            raise ValueError(f"sensitivity.dgsm: problem['bounds'] for {name!r} is {params}; a uniform "
                             "parameter needs (low, high) with low < high")
        if dist == "norm" and not (len(params) == 2 and params[1] > 0):
            raise ValueError(f"sensitivity.dgsm: problem['bounds'] for {name!r} is {params}; a normal "
                             "parameter needs (mean, std) with std > 0")
        out[name] = (dist, params)
    return names, out


def _row_model(model, names):
    """A SALib model (an (n, D) array to n outputs) as the model of one example."""
    def one_row(example):
        row = np.stack([example[name].data for name in names])
        return _row_output(model(np.reshape(row, (1, len(names)))), len(names))

    return one_row


_ROW_CALL = ("sensitivity.dgsm: with an array of samples the model is called as SALib's models are, on an "
             "(n, D) array (here one row, shape (1, {d})), and must return n outputs")
_ROW_FIX = ": an array of shape (n,), or a DataArray of n values"


def _row_output(output, d):
    """A SALib model's output for one row as a 0-d DataArray: an array or a number, or a
    DataArray (its data, with its name and attrs), of one value."""
    name, attrs = None, {}
    if isinstance(output, (xr.DataArray, xr.Variable)):
        if output.size != 1:
            raise ValueError(f"{_ROW_CALL.format(d=d)}; it returned a {type(output).__name__} with dims "
                             f"{dict(output.sizes)}. Return n outputs{_ROW_FIX}")
        name, attrs, output = getattr(output, "name", None), dict(output.attrs), output.data
    elif isinstance(output, (xr.Dataset, xr.DataTree)):
        raise ValueError(f"{_ROW_CALL.format(d=d)}; it returned a {type(output).__name__}: return one of its "
                         "variables (e.g. model(X)['y'])")
    elif not _is_value(output):
        raise ValueError(f"{_ROW_CALL.format(d=d)}; it returned a {type(output).__name__}. Return an array "
                         "(np.stack a list of outputs), or a DataArray of n values")
    elif np.size(output) != 1:
        raise ValueError(f"{_ROW_CALL.format(d=d)}; it returned shape {np.shape(output)}. Return n outputs{_ROW_FIX}")
    return xr.DataArray(np.reshape(output, ()), name=name, attrs=attrs)


def _check_options(num_resamples, conf_level, seed, mode, chunk_size):
    if isinstance(num_resamples, bool) or not isinstance(num_resamples, int) or num_resamples < 2:
        raise ValueError(f"sensitivity.dgsm: num_resamples={num_resamples!r} must be an int >= 2")
    if not 0 < conf_level < 1:
        raise ValueError(f"sensitivity.dgsm: conf_level={conf_level!r} must be between 0 and 1")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
        raise ValueError(f"sensitivity.dgsm: seed={seed!r} must be None or a non-negative int")
    _check_mode(mode, "dgsm")
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"sensitivity.dgsm: chunk_size={chunk_size!r} must be a positive int or None")


def _check_mode(mode, name):
    if mode not in MODES:
        raise ValueError(f"sensitivity.{name}: mode={mode!r} must be one of {MODES}")


# --- per-sample derivatives -----------------------------------------------------------------
_PROGRAMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # lf.jit-wrapped model -> {options: _Batched}
_REFUSALS = threading.Lock()


class _Batched:
    """The Jacobian of a block of samples: ``plain`` (the vmap) and ``program`` (its lf.jit);
    on Dask, ``lazy(samples, strict)`` builds the graph whose blocks run jitted programs."""

    def __init__(self, jacobian, dim, chunk_size, options, name=None):
        self.plain = vmap(jacobian, dim=dim, chunk_size=chunk_size)
        self.program = lf_jit(self.plain, **options)
        self.options, self.name = options, name  # name: of an lf.jit-wrapped model, warned about
        self.refused = None  # the error of a trace that lf.jit refused, when the vmap ran instead
        self.blocks = weakref.WeakKeyDictionary()  # the lazy vmap's level -> {strict: _BlockProgram}

    def lazy(self, samples, strict):
        """The lazy vmap of ``samples``, each block run by the jitted block function (as
        ``lf.jit`` on Dask data does), that falls back to the block itself unless ``strict``."""
        def compile_block(mapped, block):
            kept = self.blocks.setdefault(mapped, {})
            if strict not in kept:
                kept[strict] = _BlockProgram(lf_jit(block, **self.options), block, strict, self.name)
            return kept[strict]

        with compiled_blocks(compile_block):
            return self.plain(samples)


class _BlockProgram:
    """A Dask block of the gradients: its lf.jit program, or (where lf.jit refuses the trace
    and not ``strict``) the block function itself, which raises the model's own errors."""

    def __init__(self, program, block, strict, name):
        self.program, self.block, self.strict, self.name, self.refused = program, block, strict, name, False

    def __call__(self, *args, **kwargs):
        if not self.refused:
            try:
                return self.program(*args, **kwargs)
            except Exception as error:
                if self.strict or self.program.traces > 1:
                    raise
                with _REFUSALS:  # blocks on several threads: one warning
                    first, self.refused = not self.refused, True
                if first:
                    _warn_unjitted(self.name, error)
        return self.block(*args, **kwargs)


def _warn_unjitted(name, error):
    if name is not None:
        warnings.warn(
            f"sensitivity.dgsm: lf.jit could not trace the per-sample gradients of {name} "
            f"({type(error).__name__}: {error}); they run un-jitted. Pass the model without lf.jit, "
            "or jit=False, to skip the attempt", stacklevel=4)


def _batched_jacobian(model, jitted_model, names, mode, dim, chunk_size):
    """A fresh ``_Batched`` of ``model``; for an lf.jit-wrapped model, the one kept on it for these
    options (``model`` is its function, or the SALib row model of it), so that its program replays
    in later calls."""
    if jitted_model is None:
        return _Batched(_example_jacobian(model, names, mode), dim, chunk_size, {})
    key = (model is jitted_model.func, tuple(names), mode, dim, chunk_size)
    programs = _PROGRAMS.setdefault(jitted_model, {})
    if key not in programs:
        options = {"keep_buffers": jitted_model.keep_buffers, "warn_after_traces": jitted_model.warn_after_traces}
        programs[key] = _Batched(_example_jacobian(model, names, mode), dim, chunk_size, options,
                                 getattr(jitted_model.func, "__name__", "the model"))
    return programs[key]


def _gradient_blocks(batched, samples, names, dim, size, steps, jitted, jit, return_gradients, report):
    """(squares, outputs, gradients or None) of in-memory samples, in ``steps`` blocks of one size.
    Jitted, the blocks run one program: the samples' coordinates along ``dim`` (part of its
    signature) are dropped, and the last block is padded with copies of the last sample."""
    block = math.ceil(size / steps)
    bare = samples.drop_vars([k for k, c in samples.coords.items() if dim in c.dims]) if jitted else samples
    pieces = []
    for start in range(0, size, block):
        stop = min(start + block, size)
        if jitted:
            try:
                partials, outputs = _padded_call(batched.program, bare, dim, start, stop, block)
            except Exception as error:
                if jit is True or pieces:
                    raise
                partials, outputs = batched.plain(samples.isel({dim: slice(start, stop)}))  # else the model's error
                jitted, batched.refused = False, error
                _warn_unjitted(batched.name, error)
        else:
            partials, outputs = batched.plain(samples.isel({dim: slice(start, stop)}))
        pieces.append((_squares(partials, names, dim), outputs,
                       _stacked(partials, names, dim) if return_gradients else None))
        report.advance()
    squares, outputs, gradients = (None if parts[0] is None else xr.concat(parts, dim) if len(parts) > 1
                                   else parts[0] for parts in zip(*pieces))
    return squares, outputs, gradients


def _check_defined(outputs, squares, samples, names, dim):
    """Refuse in-memory results where the model's output, or one of its partial derivatives,
    is not finite in some samples but not in all: a mean over the other samples would be a
    measure of another model, silently.  (An output element that is NaN in every sample, a
    masked cell of a field, gives NaN measures there.)  Names how many samples and the first
    ones, with their parameters."""
    for what, values in (("output", outputs), ("derivative", squares)):
        bad = ~np.isfinite(values.transpose(dim, ...).values.reshape(values.sizes[dim], -1))
        partly = bad.any(axis=0) & ~bad.all(axis=0)
        if not partly.any():
            continue
        rows = np.flatnonzero(bad[:, partly].any(axis=1))
        shown = rows[:5]
        listed = "; ".join(f"{k}: " + ", ".join(f"{name}={float(samples[name].values[k]):.6g}" for name in names)
                           for k in shown)
        raise ValueError(
            f"sensitivity.dgsm: the model's {what} is not finite (NaN or infinite) in {len(rows)} of the "
            f"{values.sizes[dim]} samples, and finite in the others: the measures would average the others "
            f"only. The {'first 5 ' if len(rows) > 5 else ''}samples (0-based along {dim!r}) and their "
            f"parameters: {listed}. Fix the model, or keep those samples out")


def _padded_call(program, bare, dim, start, stop, block):
    """``program`` on the samples ``start:stop`` of ``bare``, padded to ``block`` samples with
    copies of the last one (every block then has the signature of the first: one trace);
    always a copy, so that every block has one memory layout."""
    index = np.minimum(np.arange(start, start + block), stop - 1)
    partials, outputs = program(bare.isel({dim: index}))
    if stop - start < block:
        kept = {dim: slice(0, stop - start)}
        partials, outputs = partials.isel(kept), outputs.isel(kept)
    return partials, outputs


def _example_jacobian(model, names, mode):
    """One example's partial derivatives and the model's output, as ``(Dataset, output)``.

    "auto" runs the model once in reverse mode; a scalar output is then done (one VJP),
    an output with dims is differentiated again by the mode its size calls for.
    """
    def checked(example):
        return _checked_output(model(example), names)

    def with_output(example):
        output = checked(example)
        return output, output

    def jacobian(example):
        if mode == "forward":
            return jacfwd(with_output, has_aux=True)(example)
        if mode == "reverse":
            return jacrev(with_output, has_aux=True)(example)
        output, pullback = vjp(checked, example)
        if output.ndim == 0:
            return pullback(xr.ones_like(output))[0], output
        del pullback  # free the first pass's tape before the second pass
        chosen = jacfwd if len(names) < output.size else jacrev
        return chosen(with_output, has_aux=True)(example)

    return jacobian


def _checked_output(output, names):
    if isinstance(output, (xr.Dataset, xr.DataTree)):
        raise ValueError(
            f"sensitivity.dgsm: the model returned a {type(output).__name__}; return one "
            "DataArray (or a scalar), e.g. lambda p: model(p)['y']"
        )
    if not isinstance(output, xr.DataArray):
        if not _is_value(output):
            raise ValueError(
                f"sensitivity.dgsm: the model returned a {type(output).__name__}; return one DataArray "
                "(or a scalar) per example: for several outputs, one DataArray with an output dim "
                "(xr.concat([...], dim='output'))"
            )
        if np.ndim(output):
            raise ValueError(
                "sensitivity.dgsm: the model returned an array without dims for one example; "
                "return a scalar or a DataArray with named dims"
            )
        return xr.DataArray(output)
    clashes = [d for d in output.dims if d == "param" or d in names]
    if clashes:
        raise ValueError(
            f"sensitivity.dgsm: the model's output has dims {output.dims}, and {clashes} "
            "is also the name of the result's 'param' dim or of a parameter; rename that "
            "output dim (output.rename(...)) or the parameter"
        )
    return output


def _is_value(output):
    """An array or a number: what np.ndim reads without converting (a list of traced
    values would be converted, inside our own call)."""
    return (hasattr(output, "shape") and hasattr(output, "dtype")) or isinstance(output, (int, float, complex, np.generic))


def _stacked(partials, names, dim):
    stacked = xr.concat([partials[name] for name in names], dim="param", coords="minimal", compat="override")
    return stacked.assign_coords(param=names).transpose("param", dim, ...)


def _squares(partials, names, dim):
    squares = xr.concat([partials[name] ** 2 for name in names], dim="param", coords="minimal", compat="override")
    return squares.assign_coords(param=names).transpose("param", dim, ...)


def _per_param(names, values):
    return xr.DataArray(np.asarray(values, dtype=float), dims="param", coords={"param": names})


def _along_wrt_dims(param, jacobian):
    """``param`` on the Jacobian's argument dims (the last ones, renamed where they clash
    with the output's dims), so that ∂y_i/∂p_j is scaled by p_j, not by p_i."""
    wrt_dims = jacobian.dims[jacobian.ndim - param.ndim:]
    return xr.Variable(wrt_dims, param.data)


# --- the bootstrap ----------------------------------------------------------------------------
def _resampled_means(squares, centred, dim, names, num_resamples, entropy, lazy, report):
    """{"vi": (resample, param, ...), "y", "y2": (resample, ...)}: the means of the squared
    partials and of the centred outputs and their squares, in each bootstrap resample."""
    out_dims = squares.dims[2:]
    columns = [squares.transpose(dim, "param", *out_dims).data]
    if centred is not None:
        y = centred.transpose(dim, *out_dims).data
        columns += [y[:, None], (y ** 2)[:, None]]
    xp = namespace(*columns)
    columns.append(xp.ones_like(columns[0][:, :1]))  # its weighted sums are the sums of the weights
    stacked = xp.concat(columns, axis=1)
    shape = tuple(stacked.shape)
    if lazy:
        table = stacked.rechunk({k: -1 for k in range(1, stacked.ndim)}).reshape(shape[0], -1)
        sums = _lazy_weighted_sums(table, num_resamples, entropy)
    else:
        table = xp.reshape(stacked, (shape[0], -1))
        sums, step = 0, _resample_step(num_resamples)
        for start in range(0, shape[0], step):
            sums = sums + _weighted_sums(table[start:start + step], start, num_resamples, entropy)
            report.advance()
    sums = xp.reshape(sums, (num_resamples,) + shape[1:])
    means = sums[:, :-1] / sums[:, -1:]
    coords = {k: c for k, c in squares.coords.items() if dim not in c.dims and "param" not in c.dims}
    means = xr.DataArray(means, dims=("resample", "statistic") + out_dims, coords=coords)
    d = len(names)
    resampled = {"vi": means.isel(statistic=slice(0, d)).rename(statistic="param").assign_coords(param=names)}
    if centred is not None:
        resampled["y"], resampled["y2"] = means.isel(statistic=d), means.isel(statistic=d + 1)
    return resampled


def _resample_step(num_resamples):
    """Samples per in-memory resampling step: whole blocks of weights, a few MiB of them."""
    return WEIGHT_BLOCK * max(1, WEIGHTS_PER_STEP // (num_resamples * WEIGHT_BLOCK))


def _lazy_weighted_sums(table, num_resamples, entropy):
    """``_weighted_sums`` of each chunk of samples of a Dask ``table``, added up lazily."""
    def chunk_sums(block, block_info=None):
        return _weighted_sums(block, block_info[0]["array-location"][0][0], num_resamples, entropy)

    count = len(table.chunks[0])
    partial = table.map_blocks(chunk_sums, chunks=((num_resamples,) * count, (table.shape[1],)),
                               dtype=table.dtype, meta=table._meta)
    return partial.reshape(count, num_resamples, table.shape[1]).sum(axis=0)


def _weighted_sums(block, start, num_resamples, entropy):
    """(resample, column): the bootstrap-weighted column sums of the samples
    ``start, start + 1, ...`` in the rows of ``block``: one matrix product."""
    weights = _bootstrap_weights(entropy, num_resamples, start, start + block.shape[0])
    return namespace(block).asarray(weights, dtype=block.dtype) @ block


def _bootstrap_weights(entropy, num_resamples, start, stop):
    """(resample, sample) weights 0 or 1 of the samples ``start:stop``, each block of
    WEIGHT_BLOCK samples drawn from its own seed, so that any slicing gives the same."""
    first, last = start // WEIGHT_BLOCK, (stop - 1) // WEIGHT_BLOCK
    blocks = []
    for k in range(first, last + 1):
        rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(k,)))
        bits = np.frombuffer(rng.bytes(num_resamples * WEIGHT_BLOCK // 8), dtype=np.uint8)
        blocks.append(np.unpackbits(bits).reshape(num_resamples, WEIGHT_BLOCK))
    weights = blocks[0] if len(blocks) == 1 else np.concatenate(blocks, axis=1)
    offset = first * WEIGHT_BLOCK
    return weights[:, start - offset:stop - offset]
