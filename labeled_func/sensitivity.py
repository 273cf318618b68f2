"""Derivative-based sensitivity analysis from exact per-sample gradients.

``dgsm`` computes the derivative-based global sensitivity measures
ν_i = E[(∂f/∂x_i)²] with one forward and one backward pass per sample (finite
differences need D + 1 model evaluations and are biased); ``local`` gives the local
elasticities ∂y/∂p · p/y.
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from .autodiff import jacrev
from .vmap import vmap

__all__ = ["dgsm", "local"]


def dgsm(model, samples, *, dim="sample", bounds=None, num_resamples=100, conf_level=0.95, seed=None):
    """Derivative-based global sensitivity measures of ``model`` over ``samples``.

    Parameters
    ----------
    model : callable
        Maps ONE example's parameters (a Dataset of 0-d variables) to a scalar or a
        DataArray of outputs.
    samples : xarray.Dataset
        One data variable per parameter, each along ``dim``.
    bounds : dict, optional
        ``{name: (low, high)}`` for every parameter: adds ``dgsm`` =
        ν·(high − low)²/(π²·Var(Y)), SALib's normalisation for uniform inputs.
    num_resamples, conf_level, seed
        Bootstrap of ``vi_conf``, the half-width of the ``conf_level`` interval of ``vi``.

    Returns
    -------
    xarray.Dataset
        ``vi`` (and ``vi_conf``, ``dgsm``) with a ``param`` dim (coords: parameter
        names) followed by the model output's dims.

    Examples
    --------
    >>> import numpy as np, xarray as xr, labeled_func as lf
    >>> rng = np.random.default_rng(0)
    >>> samples = xr.Dataset({"a": ("sample", rng.uniform(0, 1, 4000)),
    ...                       "b": ("sample", rng.uniform(0, 1, 4000))})
    >>> result = lf.sensitivity.dgsm(lambda p: 3 * p.a + p.b ** 2, samples)
    >>> result.vi.sel(param="a").round(6).item()    # E[3²]
    9.0
    """
    _check_samples(samples, dim, bounds)
    names = list(samples.data_vars)
    per_sample, outputs = vmap(_partials(model, names), dim=dim)(samples)
    squares = xr.concat([per_sample[name] ** 2 for name in names], dim="param").assign_coords(param=names)
    squares = squares.transpose("param", dim, ...)
    result = xr.Dataset({"vi": squares.mean(dim)})
    result["vi_conf"] = _bootstrap_halfwidth(squares, dim, num_resamples, conf_level, seed)
    if bounds is not None:
        variance = outputs.var(dim)
        widths = xr.DataArray([bounds[n][1] - bounds[n][0] for n in names], dims="param", coords={"param": names})
        result["dgsm"] = result["vi"] * widths ** 2 / (np.pi ** 2 * variance)
    return result


def local(model, params, *, normalize=True):
    """The local sensitivities of ``model`` at ``params``, keyed by parameter.

    ``model`` maps ``params`` (a Dataset of parameters) to a DataArray (or scalar).
    With ``normalize`` the result holds elasticities ∂y/∂p · p/y, else ∂y/∂p.

    >>> import numpy as np, xarray as xr, labeled_func as lf
    >>> t = xr.DataArray([0.0, 1.0, 2.0], dims="t")
    >>> decay = lambda p: p.amplitude * np.exp(-p.rate * t)
    >>> e = lf.sensitivity.local(decay, xr.Dataset({"amplitude": 2.0, "rate": 0.5}))
    >>> e.amplitude.values.tolist(), e.rate.values.tolist()     # 1 and -rate·t
    ([1.0, 1.0, 1.0], [-0.0, -0.5, -1.0])
    """
    if not isinstance(params, xr.Dataset):
        raise ValueError("sensitivity.local: params must be a Dataset with one variable per parameter")
    jacobian = jacrev(model)(params)
    if not isinstance(jacobian, xr.Dataset):
        raise ValueError("sensitivity.local: the model must return one DataArray (or a scalar)")
    if not normalize:
        return jacobian
    output = model(params)
    return xr.Dataset({name: jacobian[name] * _along_wrt_dims(params[name], jacobian[name]) / output
                       for name in params.data_vars})


def _along_wrt_dims(param, jacobian):
    """``param`` on the Jacobian's argument dims (the last ones, renamed where they clash
    with the output's dims), so that ∂y_i/∂p_j is scaled by p_j, not by p_i."""
    wrt_dims = jacobian.dims[jacobian.ndim - param.ndim:]
    return xr.Variable(wrt_dims, param.data)


def _partials(model, names):
    """One example's partial derivatives and the model's output, from one evaluation."""
    def with_output(example):
        output = model(example)
        if isinstance(output, (xr.Dataset, xr.DataTree)):
            raise ValueError(
                f"sensitivity.dgsm: the model returned a {type(output).__name__}; return one "
                "DataArray (or a scalar), e.g. lambda p: model(p)['y']"
            )
        clashes = [d for d in getattr(output, "dims", ()) if d == "param" or d in names]
        if clashes:
            raise ValueError(
                f"sensitivity.dgsm: the model's output has dims {output.dims}, and {clashes} "
                "is also the name of the result's 'param' dim or of a parameter; rename that "
                "output dim (output.rename(...)) or the parameter"
            )
        if not isinstance(output, xr.DataArray) and np.ndim(output):
            raise ValueError(
                "sensitivity.dgsm: the model returned an array without dims for one example; "
                "return a scalar or a DataArray with named dims"
            )
        return output, output

    return jacrev(with_output, has_aux=True)


def _check_samples(samples, dim, bounds):
    if not isinstance(samples, xr.Dataset):
        raise ValueError("sensitivity.dgsm: samples must be a Dataset with one variable per parameter")
    missing = [name for name, var in samples.data_vars.items() if dim not in var.dims]
    if missing:
        raise ValueError(f"sensitivity.dgsm: the sample variables {missing} have no dim {dim!r}; every parameter needs one value per sample")
    if bounds is not None:
        absent = [name for name in samples.data_vars if name not in bounds]
        if absent:
            raise ValueError(f"sensitivity.dgsm: bounds has no (low, high) for the parameters {absent}")


def _bootstrap_halfwidth(squares, dim, num_resamples, conf_level, seed):
    """Half-width of the normal bootstrap interval of the mean (SALib's vi_conf)."""
    from statistics import NormalDist

    rng = np.random.default_rng(seed)
    size = squares.sizes[dim]
    means = [squares.isel({dim: rng.integers(0, size, size)}).mean(dim) for _ in range(num_resamples)]
    spread = xr.concat(means, dim="resample").std("resample", ddof=1)
    return NormalDist().inv_cdf(0.5 + conf_level / 2) * spread
