"""JVPTracer and the forward-mode (jvp) level.

A JVPTracer carries a primal value and its tangent (``None`` = zero).  Each primitive's
``jvp`` rule computes both, with ``bind``, so forward mode nests with vmap and with
reverse mode at any depth.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from labeled_func_kernels import core as kcore
from labeled_func_kernels import creation as kc
from labeled_func_kernels.primitive import Primitive

from .errors import UnsupportedOperationError
from .stack import Level, active, bind_custom_vjp, bind_per_example, differentiated
from .tracer import PrimalTracer, integral, primal_of, stays_traced
from .views import VIEW_PRIMITIVES, assign_value, make_view, refresh_view

__all__ = ["JVPLevel", "JVPTracer", "split_tangent", "tangent_of"]


class JVPLevel(Level):
    """One jvp: primals travel with tangents."""

    name = "jvp"
    differentiates = True
    __slots__ = ()

    def input(self, primal: Any, tangent: Any) -> JVPTracer:
        """An input of the differentiated function: ``primal`` with ``tangent`` (None: no
        tangent, nothing is differentiated through it)."""
        return JVPTracer(self, primal, tangent)

    def process(self, prim: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
        primals = []
        tangents = []
        for arg in args:
            if type(arg) is JVPTracer and arg._level is self:
                if arg._view is not None:
                    refresh_view(arg)
                primals.append(arg._value)
                tangents.append(arg._tangent)
            else:
                primals.append(arg)
                tangents.append(None)
        if prim.traced_constant:
            return JVPTracer(self, prim.bind(*primals, **params), None)
        if not prim.differentiable:
            out = prim.bind(*primals, **params)
            return JVPTracer(self, out, None) if stays_traced(out) else out
        if prim.jvp is None:
            raise UnsupportedOperationError(f"{prim.name} has no JVP rule: it cannot be differentiated in forward mode")
        out, tangent = prim.jvp(primals, tangents, **params)
        if prim in VIEW_PRIMITIVES and type(args[0]) is JVPTracer and args[0]._level is self:
            view = make_view(prim, args, params, out)
            if view is not None:  # traced even without a tangent: writes through it reach the base
                result = JVPTracer(self, out, None if integral(out) else tangent)
                result._view = view
                return result
        if tangent is None or integral(out):
            return JVPTracer(self, out, None) if stays_traced(out) else out
        return JVPTracer(self, out, tangent)

    def process_custom_jvp(self, fun: Callable[[list[Any]], Any], rule: Callable[..., Any], arrays: list[Any]) -> Any:
        """The rule runs on the primals and tangents (zeros for constants): the function
        itself is not traced."""
        out, tangent = rule([primal_of(a, self) for a in arrays], [tangent_of(a, self) for a in arrays])
        if tangent is None or integral(out):
            return out
        return JVPTracer(self, out, tangent)

    def process_custom_vjp(self, fun: Callable[[list[Any]], Any], fwd: Callable[..., Any], bwd: Callable[..., Any],
                           arrays: list[Any], name: str) -> Any:
        """Forward mode through a function with a reverse-mode rule only: ``fun`` itself is
        differentiated forward (the rule is a VJP: it cannot give J u without transposing
        its code).  Where the levels below differentiate too, the primal output is the
        custom call handed down to them (so they still use ``fwd``/``bwd``) and the tangent
        comes from ``fun`` run under a private jvp level."""
        primals = [primal_of(a, self) for a in arrays]
        if not differentiated(primals):
            return fun(arrays)  # traced by this level (and the non-differentiating ones below)
        traced = [type(a) is JVPTracer and a._level is self for a in arrays]
        out = bind_custom_vjp(fun, fwd, bwd, primals, name)
        inner = JVPLevel()
        with active(inner):
            result = fun([JVPTracer(inner, p, tangent_of(a, self)) if is_traced else p
                          for a, p, is_traced in zip(arrays, primals, traced)])
            tangent = tangent_of(result, inner) if (type(result) is JVPTracer and result._level is inner) else None
        if tangent is None or integral(out):
            return out
        return JVPTracer(self, out, tangent)

    def process_per_example(self, fun: Callable[[list[Any]], list[Any]], arrays: list[Any]) -> list[Any]:
        """``fun`` runs under a private jvp level on the primals and tangents, handed down
        to the levels below as one per-example call of both."""
        traced = [type(a) is JVPTracer and a._level is self for a in arrays]
        primals = [primal_of(a, self) for a in arrays]
        tangents = [tangent_of(a, self) for a, is_traced in zip(arrays, traced) if is_traced]

        def with_tangents(values):
            given = iter(values[len(arrays):])
            inner = JVPLevel()
            with active(inner):
                outs = fun([JVPTracer(inner, p, next(given)) if is_traced else p
                            for p, is_traced in zip(values[:len(arrays)], traced)])
                return [primal_of(o, inner) for o in outs] + [tangent_of(o, inner) for o in outs]

        results = bind_per_example(with_tangents, primals + tangents)
        count = len(results) // 2
        return [p if integral(p) else JVPTracer(self, p, t) for p, t in zip(results[:count], results[count:])]

    def assign(self, dest: JVPTracer, src: Any, operation: Any) -> None:
        assign_value(self, dest, src)

    # --- the state of a loop recorded below (lf.while_loop under lf.jit) ------------------------------
    def loop_spec(self, tracer: JVPTracer, spec_of: Callable[[Any], Any]) -> tuple[Any, ...]:
        """A primal and its tangent (None where it has none), primal first."""
        if tracer._view is not None:
            refresh_view(tracer)
        primal = spec_of(tracer._value)
        tangent = None if tracer._tangent is None else spec_of(tracer._tangent)
        return (self, primal, tangent)

    def loop_build(self, spec: tuple[Any, ...], build: Callable[[Any], Any]) -> JVPTracer:
        primal = build(spec[1])
        return JVPTracer(self, primal, None if spec[2] is None else build(spec[2]))

    def loop_widen(self, value: Any, spec: tuple[Any, ...], widen: Callable[..., Any]) -> JVPTracer:
        """``value`` as a tracer of this level, a zero tangent where the spec has one and it none."""
        if type(value) is JVPTracer and value._level is self:
            if value._view is not None:
                refresh_view(value)
            primal, tangent = value._value, value._tangent
        else:
            primal, tangent = value, None
        primal = widen(primal, spec[1])
        if spec[2] is not None:
            tangent = widen(kc.zeros_like.bind(primal) if tangent is None else tangent, spec[2])
        return JVPTracer(self, primal, tangent)

    def loop_strip(self, tracer: JVPTracer) -> Any:
        """A tracer without a tangent carries nothing for this level: its primal."""
        return tracer._value if tracer._tangent is None else None

    def set_value(self, dest: JVPTracer, src: Any) -> None:
        """Replace the primal and tangent of ``dest`` by those of ``src``."""
        primal, tangent = split_tangent(self, src)
        shape = tuple(dest.shape)
        dest._value = _fit(primal, shape)
        dest._tangent = None if tangent is None else _fit(tangent, shape)


class JVPTracer(PrimalTracer):
    """A primal value and its tangent, at one jvp level."""

    __slots__ = ("_tangent",)

    def __init__(self, level, primal, tangent):
        self._level = level
        self._value = primal
        self._shape = tuple(primal.shape)
        self._tangent = tangent
        self._view = None
        self._cell = None

    def __repr__(self):
        if self._view is not None and self._level.alive:
            refresh_view(self)
        return f"JVPTracer(jvp level {self._level.depth}, shape={self.shape}, dtype={self.dtype}):\nprimal: {self._value!r}\ntangent: {self._tangent!r}"


def tangent_of(value: Any, level: JVPLevel) -> Any:
    """The tangent of ``value`` at forward ``level`` (zeros for a constant)."""
    if type(value) is JVPTracer and value._level is level and refresh_view(value)._tangent is not None:
        return value._tangent
    primal = primal_of(value, level)
    return kc.zeros_like.bind(primal) if hasattr(primal, "shape") else np.zeros_like(primal)


def split_tangent(level: JVPLevel, value: Any) -> tuple[Any, Any]:
    """(primal, tangent) of ``value`` at ``level``; the tangent of a constant is None."""
    if type(value) is JVPTracer and value._level is level:
        if value._view is not None:
            refresh_view(value)
        return value._value, value._tangent
    return value, None



def _fit(value, shape):
    if tuple(getattr(value, "shape", ())) == shape:
        return value
    return kcore.broadcast_to.bind(value, shape=shape)
