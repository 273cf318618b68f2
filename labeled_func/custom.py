"""``lf.custom_jvp`` and ``lf.custom_vjp``: your own derivative for a function.

A call of a custom function is handled by the innermost (highest) level among its
arguments, like a primitive, and every level applies the rule rather than the
function:

- forward mode (jvp): a ``custom_jvp`` runs its JVP rule on the primal values and
  tangents; a ``custom_vjp`` has no forward rule (a VJP cannot give J u without
  transposing its code), so forward mode differentiates the function itself, while the
  levels below that differentiate still get the custom call (JAX raises here);
- reverse mode (grad, vjp): a ``custom_jvp`` is linearized through its rule: the rule
  runs once with tangents traced by a private reverse level, its primal output is the
  result and its tangent output (linear in the tangents) is transposed on the backward
  pass.  A ``custom_vjp`` records one node whose pullback is ``bwd``.  The rule's
  primal and tangent computations are ordinary traced operations, so any outer
  transform (grad of grad, jvp of grad, hessian) differentiates the rule too;
- vmap: when an argument also carries a derivative below the vmap, the batch rule
  vmaps the function and the rule (for ``custom_vjp``: ``fwd`` and ``bwd``) and hands
  the batched custom function to the level below; otherwise the function just runs.

Inside, the arguments are a flat list of arrays, rebuilt into the caller's structure
(DataArrays with their dims and coords) around each call of the user's functions.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ._wrapping import call_repr
from .engine import bind_custom_jvp, bind_custom_vjp, differentiated
from .flat import Arrays, FlatArrays, match_arrays

__all__ = ["custom_jvp", "custom_vjp"]


class custom_jvp:
    """Decorate a function, then give its JVP with ``@f.defjvp``.

    The rule takes ``(primals, tangents)`` (tuples like the arguments) and returns
    ``(output, tangent_out)``; ``tangent_out`` must be linear in the tangents (reverse
    mode transposes it).  The rule is used by every transform, at any order:
    ``grad(grad(f))``, ``jvp(grad(f))``, ``hessian``, and through ``vmap`` in either
    order.

    Parameters
    ----------
    fun : callable
        The function: takes its arguments by position (pytrees of DataArrays,
        Datasets, arrays) and returns one DataArray or array.

    Raises
    ------
    TypeError
        When called: arguments passed by keyword, or no rule defined with ``defjvp``.
    ValueError
        When differentiated: the function returns more than one array, or the rule's
        tangent does not have the output's structure, dims or shape.

    Examples
    --------
    log(1 + eˣ) with the derivative written as the logistic function 1 / (1 + e⁻ˣ),
    which stays finite where eˣ overflows (its limit at x = 1000 is 1):

    >>> import numpy as np, xarray as xr, labeled_func as lf
    >>> @lf.custom_jvp
    ... def log1pexp(x):
    ...     return np.log1p(np.exp(x))
    >>> @log1pexp.defjvp
    ... def _(primals, tangents):
    ...     (x,), (t,) = primals, tangents
    ...     return log1pexp(x), t / (1 + np.exp(-x))
    >>> float(lf.grad(log1pexp)(xr.DataArray(1000.0)))
    1.0
    """

    def __init__(self, fun: Callable[..., Any]) -> None:
        self.fun = fun
        self.rule = None
        functools.update_wrapper(self, fun, updated=())  # not __dict__: a wrapped custom function's rules

    def __repr__(self) -> str:
        return call_repr("lf.custom_jvp", self.fun)

    def defjvp(self, rule: Callable[[tuple[Any, ...], tuple[Any, ...]], tuple[Any, Any]]
               ) -> Callable[[tuple[Any, ...], tuple[Any, ...]], tuple[Any, Any]]:
        """Set the JVP rule (use as a decorator).

        Parameters
        ----------
        rule : callable
            ``rule(primals, tangents) -> (output, tangent_out)``: ``primals`` and
            ``tangents`` are tuples like the arguments; ``tangent_out`` (the output's
            structure, or None for zero) must be linear in the tangents.

        Returns
        -------
        callable
            ``rule`` itself.
        """
        self.rule = rule
        return rule

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        _positional_only(self, "custom_jvp", kwargs)
        if self.rule is None:
            raise TypeError(f"custom_jvp {self.fun.__name__!r}: define its rule with @{self.fun.__name__}.defjvp")
        call = _Call(args)
        if not differentiated(call.arrays):  # no transform differentiates it: the plain function
            return self.fun(*args)
        name = f"custom_jvp {self.fun.__name__!r}"

        def fun(arrays):
            return call.result(self.fun(*call.args(arrays)), name)

        def rule(primals, tangents):
            out, tangent_out = self.rule(call.args(primals), call.args(tangents))
            value = call.result(out, name)
            if tangent_out is None:
                return value, None
            (tangent,) = match_arrays(out, tangent_out, name, what="tangent")
            return value, tangent

        result = bind_custom_jvp(fun, rule, call.arrays)
        return call.output.rebuild([result])


class custom_vjp:
    """Decorate a function, then give ``fwd`` and ``bwd`` with ``f.defvjp(fwd, bwd)``.

    ``fwd(*args)`` returns ``(output, residuals)``; ``bwd(residuals, cotangent)``
    returns one cotangent per argument (``None`` for none).  Reverse mode uses them,
    through ``vmap`` in either order; ``grad(grad(f))`` differentiates ``fwd`` and
    ``bwd`` as written.  Forward mode (``jvp``, ``jacfwd``) differentiates the function
    itself, which must then be differentiable (the VJP rule is not used: the two agree
    where the rule is the true derivative); ``hessian`` (``jacfwd(jacrev(f))``)
    differentiates ``bwd`` forward, so it uses the rule.

    Parameters
    ----------
    fun : callable
        The function: takes its arguments by position (pytrees of DataArrays,
        Datasets, arrays) and returns one DataArray or array.

    Raises
    ------
    TypeError
        When called: arguments passed by keyword, or no rules defined with ``defvjp``.
    ValueError
        When differentiated: the function returns more than one array, ``fwd`` returns
        no pair, or ``bwd`` returns no tuple of one cotangent per argument (each of
        its argument's structure).
    lf.UnsupportedOperationError
        Under forward mode, when the function itself uses an operation without a forward
        derivative.

    Examples
    --------
    The identity whose gradient is clipped to [-1, 1]: the gradient of 5x would be 5.

    >>> import numpy as np, xarray as xr, labeled_func as lf
    >>> @lf.custom_vjp
    ... def clip_gradient(x):
    ...     return x
    >>> clip_gradient.defvjp(lambda x: (x, None), lambda res, g: (g.clip(-1, 1),))
    >>> float(lf.grad(lambda x: 5 * clip_gradient(x))(xr.DataArray(2.0)))
    1.0

    Forward mode differentiates the function itself (the identity), not the rule:

    >>> float(lf.jacfwd(lambda x: 5 * clip_gradient(x))(xr.DataArray(2.0)))
    5.0
    """

    def __init__(self, fun: Callable[..., Any]) -> None:
        self.fun = fun
        self.fwd = None
        self.bwd = None
        functools.update_wrapper(self, fun, updated=())  # not __dict__: a wrapped custom function's rules

    def __repr__(self) -> str:
        return call_repr("lf.custom_vjp", self.fun)

    def defvjp(self, fwd: Callable[..., tuple[Any, Any]], bwd: Callable[[Any, Any], tuple[Any, ...]]) -> None:
        """Set the forward and backward rules.

        Parameters
        ----------
        fwd : callable
            ``fwd(*args) -> (output, residuals)``: the output, and what ``bwd`` needs
            (a pytree of arrays and other values).
        bwd : callable
            ``bwd(residuals, cotangent) -> cotangents``: a tuple with one cotangent per
            argument, each of its argument's structure, or None for none.

        Returns
        -------
        None
        """
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        _positional_only(self, "custom_vjp", kwargs)
        if self.fwd is None:
            raise TypeError(f"custom_vjp {self.fun.__name__!r}: define its rules with {self.fun.__name__}.defvjp(fwd, bwd)")
        call = _Call(args)
        if not differentiated(call.arrays):  # no transform differentiates it: the plain function
            return self.fun(*args)
        name = f"custom_vjp {self.fun.__name__!r}"

        def fun(arrays):
            return call.result(self.fun(*call.args(arrays)), name)

        def fwd(arrays):
            result = self.fwd(*call.args(arrays))
            if not (isinstance(result, tuple) and len(result) == 2):
                raise ValueError(f"{name}: fwd must return a pair (output, residuals)")
            return call.result(result[0], name), call.flatten_residuals(result[1])

        def bwd(residuals, g):
            return call.cotangents(self.bwd(call.residuals(residuals), call.output.rebuild([g])), name)

        result = bind_custom_vjp(fun, fwd, bwd, call.arrays, name)
        return call.output.rebuild([result])


# --- one call, as a flat list of arrays ---------------------------------------------------------
class _Call:
    """The arrays of a call's arguments, and how to rebuild arguments, output and residuals."""

    def __init__(self, args):
        self.slots = [FlatArrays(a, f"argument {i}", "custom rule", allow_any=True) for i, a in enumerate(args)]
        self.arrays = [a for slot in self.slots for a in slot.arrays]
        self.output = None
        self.residual_walk = None

    def args(self, arrays):
        """The arguments with their arrays replaced by ``arrays`` (same shapes)."""
        out, k = [], 0
        for slot in self.slots:
            count = len(slot.arrays)
            out.append(slot.rebuild(list(arrays[k:k + count])))
            k += count
        return tuple(out)

    def result(self, out, name):
        """The one array of an output; the first output seen gives the structure."""
        output = FlatArrays(out, "output", name, allow_any=True)
        if len(output.arrays) != 1:
            raise ValueError(f"{name}: the function must return one array or DataArray, got {len(output.arrays)} arrays")
        if self.output is None:
            self.output = output
        return output.arrays[0]

    def cotangents(self, cotangents, name):
        """``bwd``'s cotangents (one per argument) as one array (or None) per array."""
        if not isinstance(cotangents, (tuple, list)) or len(cotangents) != len(self.slots):
            raise ValueError(f"{name}: the backward rule must return a tuple with one cotangent per argument ({len(self.slots)})")
        flat = []
        for slot, cotangent in zip(self.slots, cotangents):
            if cotangent is None:
                flat.extend([None] * len(slot.arrays))
            else:
                flat.extend(match_arrays(slot.value, cotangent, name))
        return flat

    # residuals travel through the engine as a flat list of arrays (a vmap level unwraps
    # and rewraps its own tracers among them); their structure stays here
    def flatten_residuals(self, tree):
        self.residual_walk = Arrays(tree, traced_only=True)  # plain values stay in the structure
        return self.residual_walk.arrays

    def residuals(self, arrays):
        return self.residual_walk.rebuild(arrays)


def _positional_only(custom, kind, kwargs):
    if kwargs:
        name = custom.fun.__name__
        raise TypeError(
            f"{kind} {name!r} takes its arguments by position only (its rules get them as a "
            f"tuple), but was called with {sorted(kwargs)} by keyword: pass them by position, "
            f"or fix non-array options first with functools.partial({name}, ...) before "
            f"decorating"
        )
