"""``lf.curve_fit``: SciPy's ``curve_fit`` on traced data, differentiated implicitly.

A least-squares fit ``p* = argmin ½ Σ (f(x, p) - y)²`` is a root of its stationarity
condition ``g(p; x, y) = ∇_p ½ Σ (f(x, p) - y)² = Jᵀ r = 0``.  SciPy finds ``p*`` on plain
values (once per example under ``vmap``); its derivatives with respect to the data ``y``,
the points ``x`` (and whatever ``f`` reads from them) come from the implicit function
theorem, ``ṗ = −(∂g/∂p)⁻¹ (∂g/∂x ẋ + ∂g/∂y ẏ)``, through :func:`implicit_root` — never
from the optimiser's iterations.  ``∂g/∂p = JᵀJ + Σ rᵢ ∇²fᵢ`` is the exact Hessian of the
loss (lf's own derivatives of ``f``), so the derivative is that of the exact minimiser.

The covariance ``pcov`` is computed from the solution as SciPy defines it (``s² (JᵀJ)⁻¹``,
``s² = Σ r² / (m − n)``), with the exact Jacobian ``J`` at ``p*`` where SciPy uses its
finite-difference one: the two agree to the accuracy of those differences (about 1e-7
relative), and this one has derivatives.

xarray's ``curvefit`` calls ``scipy.optimize.curve_fit`` on each point's values: on
values traced by ``grad``/``jvp`` (``np.vectorize`` hands plain values to it under vmap
and jit) that is this function (``labeled_func.scipy_rules`` puts it into SciPy's module
for traced data).
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
from labeled_func_kernels.primitive import Traced

from .errors import UnsupportedOperationError
from .solvers import _check_closure, _root_finder

__all__ = ["curve_fit"]


def _scipy_curve_fit():
    """SciPy's own function (under our wrapper, once scipy_rules has patched the module)."""
    import scipy.optimize
    function = scipy.optimize.curve_fit
    return getattr(function, "__wrapped__", function)


def curve_fit(f: Callable[..., Any], xdata: Any, ydata: Any, p0: Any = None, sigma: Any = None,
              absolute_sigma: bool = False, check_finite: bool | None = None, bounds: Any = (-np.inf, np.inf),
              method: str | None = None, jac: Any = None, **kwargs: Any) -> tuple[Any, Any]:
    """``scipy.optimize.curve_fit(f, xdata, ydata, p0)`` whose result has derivatives.

    Without a traced argument this is SciPy's function.  With ``xdata``/``ydata`` traced
    (by ``grad``, ``jvp``, ``vmap``...), SciPy fits the plain values (once per example under
    ``vmap``) and the fitted parameters are differentiated implicitly, at the optimum, as
    the exact minimiser of the sum of squares (see the module's text): the derivative of
    a fit of a straight line is that of the normal equations.  ``f`` must be traceable
    (NumPy and xarray operations) in its parameters and in ``xdata``.

    Parameters
    ----------
    f, xdata, ydata, p0, method, jac, **kwargs
        As SciPy's (``jac`` and ``**kwargs`` go to SciPy's optimiser only).
    sigma, absolute_sigma, check_finite, bounds
        As SciPy's without a traced argument.  Traced: ``sigma`` must be None, and the
        bounds infinite (at an active bound the optimum is not a root of the gradient).

    Returns
    -------
    popt, pcov
        The fitted parameters (1-D) and their covariance (``s² (JᵀJ)⁻¹``, infinite where
        there are no more data than parameters, as SciPy's).

    Raises
    ------
    UnsupportedOperationError
        Traced data with ``sigma``, finite ``bounds``, ``full_output=True`` or a
        ``nan_policy`` other than ``"raise"``.

    Examples
    --------
    The slope of a straight line through the data, and its derivative with respect to the
    data (the least-squares weights ``(x − x̄) / Σ (x − x̄)²``):

    >>> import numpy as np, labeled_func as lf
    >>> x = np.array([0.0, 1.0, 2.0, 3.0])
    >>> slope = lambda y: lf.curve_fit(lambda x, a, b: a * x + b, x, y)[0][0]
    >>> y = np.array([1.0, 3.0, 4.0, 7.0])
    >>> round(float(slope(y)), 6)          # SciPy stops at its tolerance
    1.9
    >>> np.round(lf.grad(slope)(y), 10).tolist()
    [-0.3, -0.1, 0.1, 0.3]
    """
    scipy_fit = _scipy_curve_fit()
    if not any(isinstance(v, Traced) for v in (xdata, ydata)):
        return scipy_fit(f, xdata, ydata, p0=p0, sigma=sigma,
                         absolute_sigma=absolute_sigma, check_finite=check_finite, bounds=bounds, method=method,
                         jac=jac, **kwargs)
    if sigma is not None:
        raise UnsupportedOperationError("lf.curve_fit on traced data: sigma= is not supported (the weights would "
                                        "need to enter the implicit derivative); fit without it, or scale f and "
                                        "ydata by 1/sigma yourself")
    if kwargs.get("full_output"):
        raise UnsupportedOperationError("lf.curve_fit on traced data: full_output=True is not supported (the "
                                        "optimiser's diagnostics have no derivative)")
    if kwargs.get("nan_policy") not in (None, "raise"):
        raise UnsupportedOperationError(
            f"lf.curve_fit on traced data: nan_policy={kwargs['nan_policy']!r} is not supported (the implicit "
            "derivative would read the residuals of the points SciPy omits, and give NaN); keep the finite points "
            "yourself, e.g. with a mask: keep = np.isfinite(ydata); lf.curve_fit(f, xdata[keep], ydata[keep])")
    if np.isfinite(np.asarray(bounds[0], dtype=float)).any() or np.isfinite(np.asarray(bounds[1], dtype=float)).any():
        raise UnsupportedOperationError(
            f"lf.curve_fit on traced data: bounds={bounds!r}: at a bound that holds the optimum the gradient of "
            "the sum of squares is not zero, and the implicit derivative does not hold. Fit without bounds "
            "(or reparametrise, e.g. p = exp(q) for p > 0)")
    n = _parameter_count(f, p0)
    start = np.ones(n) if p0 is None else np.asarray(p0, dtype=float).reshape(n)  # a guess: not differentiated

    def stationarity(p, x, y):  # ∇_p ½ Σ (f(x, p) - y)²: zero at the optimum
        from .autodiff import grad
        return grad(lambda q: 0.5 * np.sum((f(x, *[q[k] for k in range(n)]) - y) ** 2))(p)

    def solve(p_init, x, y):  # plain values: SciPy's fit
        popt, _ = scipy_fit(f, x, y, p0=p_init, absolute_sigma=absolute_sigma, check_finite=check_finite,
                            bounds=bounds, method=method, jac=jac, **kwargs)
        return popt

    _check_closure("curve_fit", stationarity, start, (xdata, ydata))
    popt = _root_finder(stationarity, solve, None, solve_with_args=True)(start, xdata, ydata)
    return popt, _covariance(f, popt, xdata, ydata, n, absolute_sigma)


def _covariance(f, popt, x, y, n, absolute_sigma):
    """SciPy's covariance at the solution, ``s² (JᵀJ)⁻¹``, with the exact Jacobian."""
    from .autodiff import jacfwd
    size = int(np.size(y))
    if size <= n and not absolute_sigma:
        return np.full((n, n), np.inf)
    residual = lambda p: np.ravel(f(x, *[p[k] for k in range(n)]) - y)  # noqa: E731
    jacobian = jacfwd(residual)(popt)
    cov = np.linalg.inv(jacobian.T @ jacobian)
    if absolute_sigma:
        return cov
    return cov * (np.sum(residual(popt) ** 2) / (size - n))


def _parameter_count(f, p0):
    """How many parameters ``f(x, *p)`` takes: ``p0``'s length, else its signature's (as SciPy)."""
    if p0 is not None:
        return int(np.size(p0))
    parameters = [p for p in inspect.signature(f).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(parameters) < 2:
        raise ValueError("Unable to determine number of fit parameters.")
    return len(parameters) - 1
