"""``lf.custom_jvp`` and ``lf.custom_vjp``: your own derivative for a function.

Under a forward-mode level a ``custom_jvp`` function runs its JVP rule on the primal
values and tangents; under a reverse-mode level it records one tape node whose VJP
is the transpose of that rule (the rule is linear in the tangents, so its own VJP
gives it).  A ``custom_vjp`` function records one node whose VJP is ``bwd``; forward
mode is refused, as in JAX.  Under vmap the rules run on batched values.  The
function must return one array or DataArray.
"""
from __future__ import annotations

import functools

from .autodiff import _Arrays, _match, _primal, _tangent, vjp as _vjp
from .engine import JVPLevel, JVPTracer, Tracer, VJPLevel, VJPTracer
from .engine.errors import UnsupportedOperationError
from .engine.reverse import Node

__all__ = ["custom_jvp", "custom_vjp"]


class custom_jvp:
    """Decorate a function, then give its JVP with ``@f.defjvp``.

    The rule takes ``(primals, tangents)`` (tuples like the arguments) and returns
    ``(output, tangent_out)``.

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

    def __init__(self, fun):
        self.fun = fun
        self.rule = None
        functools.update_wrapper(self, fun)

    def defjvp(self, rule):
        self.rule = rule
        return rule

    def __call__(self, *args):
        if self.rule is None:
            raise TypeError(f"custom_jvp {self.fun.__name__!r}: define its rule with @{self.fun.__name__}.defjvp")
        level, slots = _top_level(args)
        if isinstance(level, JVPLevel):
            primals = tuple(slot.rebuild([_primal(a, level) for a in slot.arrays]) for slot in slots)
            tangents = tuple(slot.rebuild([_tangent(a, level) for a in slot.arrays]) for slot in slots)
            out, tangent_out = self.rule(primals, tangents)
            output = _single_output(out, "custom_jvp")
            (tangent,) = _match(out, tangent_out, "custom_jvp", what="tangent")
            return output.rebuild([JVPTracer(level, output.arrays[0], tangent)])
        if isinstance(level, VJPLevel):
            primals = tuple(slot.rebuild([_primal(a, level) for a in slot.arrays]) for slot in slots)
            out = self.fun(*primals)
            output = _single_output(out, "custom_jvp")

            def transpose(g):
                zeros = tuple(slot.rebuild([_tangent(_primal(a, level), None) for a in slot.arrays]) for slot in slots)
                _, pull = _vjp(lambda *tangents: self.rule(primals, tangents)[1], *zeros)
                return pull(output.rebuild([g]))

            return _record(level, slots, output, transpose)
        return self.fun(*args)


class custom_vjp:
    """Decorate a function, then give ``fwd`` and ``bwd`` with ``f.defvjp(fwd, bwd)``.

    ``fwd(*args)`` returns ``(output, residuals)``; ``bwd(residuals, cotangent)``
    returns one cotangent per argument.

    >>> import numpy as np, xarray as xr, labeled_func as lf
    >>> @lf.custom_vjp
    ... def clip_gradient(x):
    ...     return x
    >>> clip_gradient.defvjp(lambda x: (x, None), lambda res, g: (g.clip(-1, 1),))
    >>> float(lf.grad(lambda x: 5 * clip_gradient(x))(xr.DataArray(2.0)))
    1.0
    """

    def __init__(self, fun):
        self.fun = fun
        self.fwd = None
        self.bwd = None
        functools.update_wrapper(self, fun)

    def defvjp(self, fwd, bwd):
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args):
        if self.fwd is None:
            raise TypeError(f"custom_vjp {self.fun.__name__!r}: define its rules with {self.fun.__name__}.defvjp(fwd, bwd)")
        level, slots = _top_level(args)
        if isinstance(level, JVPLevel):
            raise UnsupportedOperationError(
                f"custom_vjp {self.fun.__name__!r} has a reverse-mode rule only: it cannot be "
                "differentiated in forward mode (jvp, jacfwd, hessian). Use lf.custom_jvp, "
                "or lf.jacrev instead of lf.jacfwd."
            )
        if isinstance(level, VJPLevel):
            primals = tuple(slot.rebuild([_primal(a, level) for a in slot.arrays]) for slot in slots)
            out, residuals = self.fwd(*primals)
            output = _single_output(out, "custom_vjp")
            return _record(level, slots, output, lambda g: self.bwd(residuals, output.rebuild([g])))
        return self.fun(*args)


class _CustomRule:
    """Stands in a tape node for a primitive: its ``vjp`` calls the user's rule."""

    name = "custom rule"

    def __init__(self, pullback, slots):
        self.pullback = pullback
        self.slots = slots

    def vjp(self, g, primals, out):
        cotangents = self.pullback(g)
        if not isinstance(cotangents, tuple) or len(cotangents) != len(self.slots):
            raise ValueError(f"custom rule: the backward rule must return a tuple with one cotangent per argument ({len(self.slots)})")
        flat = []
        for slot, cotangent in zip(self.slots, cotangents):
            if cotangent is None:
                flat.extend([None] * len(slot.arrays))
            else:
                flat.extend(_match(slot.value, cotangent, "custom rule"))
        return tuple(flat)


def _record(level, slots, output, pullback):
    flat, parents = [], []
    for slot in slots:
        for array in slot.arrays:
            if type(array) is VJPTracer and array._level is level and array._node is not None:
                parents.append((len(flat), array._node))
            flat.append(_primal(array, level))
    primal = output.arrays[0]
    node = Node(_CustomRule(pullback, slots), {}, tuple(parents), tuple(flat), primal)
    return output.rebuild([VJPTracer(level, primal, node)])


def _top_level(args):
    slots = [_Arrays(a, f"argument {i}", "custom rule", allow_any=True) for i, a in enumerate(args)]
    top = None
    for slot in slots:
        for array in slot.arrays:
            if isinstance(array, Tracer):
                level = array._level
                if not level.alive:
                    level.escaped("custom rule")
                if top is None or level.depth > top.depth:
                    top = level
    return top, slots


def _single_output(out, name):
    output = _Arrays(out, "output", name, allow_any=True)
    if len(output.arrays) != 1:
        raise ValueError(f"{name}: the function must return one array or DataArray, got {len(output.arrays)} arrays")
    return output
