"""``lf.per_example``: run a function that needs concrete arrays once per example.

The escape hatch for code no transform can trace: ``scipy.stats``, numba, a Fortran
wrapper, ``float()`` and Python control flow on values.  The function is called with
plain NumPy values (a DataArray stays a DataArray, with the example's labels):

- outside any transform, it is just called;
- under ``vmap`` (nested too), once per example, through the engine's per-example call
  (:func:`engine.bind_per_example`, the loop ``np.vectorize`` and ``lf.linear_solve`` use);
  the results are stacked, so every example must return the same shape.  With
  ``workers=k`` the examples run in a thread pool: the loop first gathers each example's
  arguments, the pool computes them, and a second pass of the loop hands the results back
  in the same order;
- under ``lf.jit``, one opaque node that runs the function (the loop, under vmap) at
  every replay;
- under a derivative (grad, jvp, jacrev...), only with a rule: ``jvp=`` for forward
  mode, ``vjp=`` for reverse mode, each itself run once per example on concrete values.
  Inside, the function is a ``custom_vjp`` call (reverse: the ``vjp`` rule) whose function
  is a ``custom_jvp`` call (forward: the ``jvp`` rule), as ``lf.linear_solve``; the rules'
  outputs are per-example calls with no rule, so a second derivative raises.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ._wrapping import call_repr
from .custom import _Call
from .engine import (bind_custom_jvp, bind_custom_vjp, bind_per_example, current_levels, differentiated,
                     is_batched, is_traced)
from .errors import UnsupportedOperationError
from .flat import match_arrays

__all__ = ["per_example"]


class per_example:
    """Run ``fun`` on concrete values, once per example under ``vmap``: the slow path.

    ``fun`` is called with plain NumPy values, so it may use anything: ``scipy.stats``,
    numba, compiled extensions, ``float()``, ``if`` on values, ``np.asarray``.  A
    DataArray argument arrives as a DataArray (without the mapped dims, as inside any
    ``vmap``) holding one example's values.  Under ``vmap`` ``fun`` runs in a Python loop,
    once per example (over every mapped dim), and the results are stacked: a per-example
    overhead of a few tens of µs on top of ``fun`` itself (docs/limitations.md, "Per-example
    functions" has the figures), where a vectorised call costs almost nothing per example.
    Use it for what cannot be written with NumPy and xarray operations.

    Derivatives need a rule, itself run per example on concrete values: ``jvp`` for
    forward mode (``lf.jvp``, ``jacfwd``), ``vjp`` for reverse mode (``grad``, ``vjp``,
    ``jacrev``); without the rule a transform that differentiates the call raises
    ``lf.UnsupportedOperationError``.  Rules give first derivatives only.

    Parameters
    ----------
    fun : callable
        Takes its arguments by position (DataArrays, arrays, numbers, tuples/dicts of
        them) and returns one DataArray or array; every example must return the same
        shape.  What it returns is what the caller gets (a bare array stays bare: keep
        labels with ``xr.apply_ufunc(scipy_function, x)`` or ``x.copy(data=...)``).
    jvp : callable, optional
        ``jvp(primals, tangents) -> (output, tangent_out)`` (as ``lf.custom_jvp``'s rule,
        on one example's concrete values; ``tangents`` holds zeros for arguments that are
        not differentiated).  Also settable with ``@f.defjvp``.
    vjp : callable, optional
        ``vjp(primals, output, cotangent) -> cotangents``: a tuple with one cotangent per
        argument (its argument's structure, or None), on one example's concrete values.
        Also settable with ``@f.defvjp``.
    workers : int, optional
        Run the examples of a ``vmap`` in a thread pool of this many threads.  Python code
        holds the GIL: this pays for functions that release it (numba ``nogil``, Fortran or
        C extensions, large NumPy calls), not for pure Python.  Under ``lf.jit`` the
        examples run in turn.

    Raises
    ------
    lf.UnsupportedOperationError
        When a transform differentiates the call and the rule for that mode is missing,
        or differentiates a rule (second derivatives).
    ValueError
        Under ``vmap``: an example returns another shape than the first.
    TypeError
        Arguments passed by keyword.

    Examples
    --------
    ``scipy.stats.norm.cdf`` under ``vmap`` and ``grad``, with its derivative (the pdf):

    >>> import numpy as np, xarray as xr, labeled_func as lf, scipy.stats
    >>> @lf.per_example
    ... def cdf(x):
    ...     return xr.apply_ufunc(scipy.stats.norm.cdf, x)  # labels kept
    >>> @cdf.defvjp
    ... def _(primals, out, g):
    ...     (x,) = primals
    ...     return (g * scipy.stats.norm.pdf(x),)
    >>> x = xr.DataArray([0.0, 1.0], dims="sample")
    >>> lf.vmap(cdf, dim="sample")(x).values.round(4).tolist()
    [0.5, 0.8413]
    >>> lf.vmap(lf.grad(cdf), dim="sample")(x).values.round(4).tolist()
    [0.3989, 0.242]

    A function with Python control flow on values:

    >>> step = lf.per_example(lambda x: x if float(x) > 0 else xr.zeros_like(x))
    >>> lf.vmap(step, dim="sample")(xr.DataArray([-1.0, 2.0], dims="sample")).values.tolist()
    [0.0, 2.0]
    """

    def __init__(self, fun: Callable[..., Any], *, jvp: Callable[..., Any] | None = None,
                 vjp: Callable[..., Any] | None = None, workers: int | None = None) -> None:
        if not callable(fun):
            raise TypeError(f"lf.per_example: expected a function, got {type(fun).__name__}")
        if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
            raise ValueError(f"lf.per_example: workers must be a positive int or None, got {workers!r}")
        self.fun = fun
        self.jvp = jvp
        self.vjp = vjp
        self.workers = workers
        functools.update_wrapper(self, fun, updated=())

    def __repr__(self) -> str:
        return call_repr("lf.per_example", self.fun, (("workers", self.workers, None),))

    def defjvp(self, rule: Callable[..., Any]) -> Callable[..., Any]:
        """Set the forward-mode rule (use as a decorator).

        Parameters
        ----------
        rule : callable
            ``rule(primals, tangents) -> (output, tangent_out)`` on one example's concrete
            values: ``primals`` and ``tangents`` are tuples like the arguments (zeros for
            arguments not differentiated); ``output`` has the function's structure and
            ``tangent_out`` the output's (or None for zero).

        Returns
        -------
        callable
            ``rule`` itself.
        """
        self.jvp = rule
        return rule

    def defvjp(self, rule: Callable[..., Any]) -> Callable[..., Any]:
        """Set the reverse-mode rule (use as a decorator).

        Parameters
        ----------
        rule : callable
            ``rule(primals, output, cotangent) -> cotangents`` on one example's concrete
            values: ``primals`` a tuple like the arguments, ``output`` the function's output
            and ``cotangent`` one of its structure; returns a tuple with one cotangent per
            argument (its argument's structure, or None).

        Returns
        -------
        callable
            ``rule`` itself.
        """
        self.vjp = rule
        return rule

    @property
    def _name(self):
        return f"lf.per_example {getattr(self.fun, '__name__', repr(self.fun))!r}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise TypeError(
                f"{self._name} takes its arguments by position only, but was called with {sorted(kwargs)} by "
                "keyword: pass them by position, or fix them first with functools.partial")
        call = _Call(args)
        if not any(is_traced(a) for a in call.arrays):
            return self.fun(*args)  # outside any transform: just the function
        result = _Run(self, call).apply(call.arrays)
        return call.output.rebuild([result])


class _Run:
    """One call of a per-example function: its arguments' structure and the per-example loops."""

    def __init__(self, spec, call):
        self.spec, self.call, self.name = spec, call, spec._name

    # --- the levels: reverse (vjp rule), forward (jvp rule), the loop -------------------------------
    def apply(self, arrays):
        if not differentiated(arrays):
            return self.primal(arrays)
        spec = self.spec
        if spec.vjp is None and spec.jvp is None:
            raise UnsupportedOperationError(
                f"{self.name} runs on concrete values, which no transform can differentiate: give its "
                "derivative rule, vjp= for reverse mode (grad, vjp, jacrev) or jvp= for forward mode (jvp, "
                "jacfwd), e.g. lf.per_example(f, vjp=rule) or @f.defvjp")
        if spec.vjp is None:
            return self.forward(arrays)

        def fwd(values):
            out = self.apply(values)
            return out, list(values) + [out]

        def bwd(residuals, g):
            return self.loop(self._vjp_kernel, list(residuals) + [g], "vjp rule")

        return bind_custom_vjp(self.forward, fwd, bwd, arrays, self.name)

    def forward(self, arrays):
        if not differentiated(arrays):
            return self.primal(arrays)
        if self.spec.jvp is None:
            raise UnsupportedOperationError(
                f"{self.name} has no forward-mode rule: forward mode (jvp, jacfwd, hessian) needs jvp=, "
                "e.g. lf.per_example(f, jvp=rule) or @f.defjvp (its vjp= rule serves reverse mode only)")
        mask = None

        def rule(primals, tangents):
            nonlocal mask
            mask = [t is not None for t in tangents]
            return tuple(self.loop(self._jvp_kernel(mask), list(primals) + [t for t in tangents if t is not None],
                                   "jvp rule"))

        return bind_custom_jvp(self.forward, rule, arrays)

    def primal(self, arrays):
        (out,) = self.loop(self._primal_kernel, arrays, None)
        return out

    # --- what runs on one example's concrete values ---------------------------------------------------
    def _primal_kernel(self, values):
        out = self.spec.fun(*self.call.args(values))
        return [np.asarray(self.call.result(out, self.name))]

    def _jvp_kernel(self, mask):
        def kernel(values):
            count = len(mask)
            primals, given = values[:count], iter(values[count:])
            tangents = [next(given) if has else np.zeros_like(p) for p, has in zip(primals, mask)]
            result = self.spec.jvp(self.call.args(primals), self.call.args(tangents))
            if not (isinstance(result, tuple) and len(result) == 2):
                raise ValueError(f"{self.name}: the jvp rule must return a pair (output, tangent_out)")
            out, tangent = result
            value = np.asarray(self.call.result(out, self.name))
            if tangent is None:
                return [value, np.zeros_like(value)]
            (tangent,) = match_arrays(out, tangent, self.name, what="tangent")
            return [value, np.asarray(tangent)]
        return kernel

    def _vjp_kernel(self, values):
        call = self.call
        primals, out, g = values[:-2], values[-2], values[-1]
        cotangents = self.spec.vjp(call.args(primals), call.output.rebuild([out]), call.output.rebuild([g]))
        flat = call.cotangents(cotangents, self.name)
        return [np.zeros_like(p) if c is None else np.asarray(c) for p, c in zip(primals, flat)]

    # --- the loop ------------------------------------------------------------------------------------
    def loop(self, kernel, arrays, rule):
        """``kernel`` (concrete arrays in, a list of arrays out) once per example of the vmap
        levels among ``arrays``, each example's results checked against the first's shapes."""
        if differentiated(arrays):  # a rule's own inputs, differentiated again
            what = f"the {rule} of {self.name}" if rule else self.name
            raise UnsupportedOperationError(
                f"{what} runs on concrete values and cannot be differentiated (a second derivative, or "
                "reverse mode through a jvp= rule): give vjp= for reverse mode; derivatives of the rules "
                "themselves are not supported")
        check = _ShapeCheck(self.name, rule)
        workers = self.spec.workers
        if workers and workers > 1 and any(is_batched(a) for a in arrays) and not any(
                level.abstract for level in current_levels()):
            gathered = []

            def gather(values):
                gathered.append(list(values))
                return [np.zeros((), dtype=bool)]

            bind_per_example(gather, arrays)
            with ThreadPoolExecutor(max_workers=workers) as pool:
                results = list(pool.map(kernel, gathered))
            for example, (values, outs) in enumerate(zip(gathered, results)):
                check(values, outs, example)
            given = iter(results)
            return bind_per_example(lambda values: next(given), arrays)
        counter = iter(range(1 << 62))
        return bind_per_example(lambda values: check(values, kernel(values), next(counter)), arrays)


class _ShapeCheck:
    """Every example's outputs must have the shapes of the first example's (they are stacked)."""

    def __init__(self, name, rule):
        self.name, self.rule, self.shapes = name, rule, None

    def __call__(self, values, outs, example):
        shapes = [np.shape(o) for o in outs]
        if self.shapes is None:
            self.shapes = shapes
        elif shapes != self.shapes:
            what = f"the {self.rule} of {self.name}" if self.rule else self.name
            args = ", ".join(_short(v) for v in values)
            raise ValueError(
                f"{what}: example {example} (in the order of the loop over examples; its arguments: {args}) "
                f"returned shape(s) {_shapes(shapes)}, but the first example returned {_shapes(self.shapes)}. "
                "Under vmap the examples' results are stacked, so every example must return the same shape "
                "(pad, or return a fixed-size summary)")
        return outs


def _shapes(shapes):
    return ", ".join(str(tuple(s)) for s in shapes)


def _short(value):
    value = np.asarray(value)
    if value.size <= 6:
        return np.array2string(value, precision=4, separator=", ")
    return f"<array of shape {value.shape}>"
