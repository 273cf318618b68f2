"""``lf.custom_jvp`` and ``lf.custom_vjp``: your own derivative for a function.

A call of a custom function is handled by the innermost (highest) level among its
arguments, like a primitive, and every level applies the rule rather than the
function:

- forward mode (jvp): a ``custom_jvp`` runs its JVP rule on the primal values and
  tangents; a ``custom_vjp`` raises (it has no forward rule, as in JAX);
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

import copy

import functools

import optree
import xarray as xr

from kernels import creation as kc
from kernels.backend import dtype_kind
from kernels.reductions import reduce_sum

from .autodiff import _Arrays, _match, _node_of, _primal, _tangent
from .engine import (BatchLevel, BatchTracer, JVPLevel, JVPTracer, Tracer, VJPLevel, VJPTracer,
                     active, backward, input_node, unbatch_value)
from .engine.errors import UnsupportedOperationError
from .engine.reverse import Node

__all__ = ["custom_jvp", "custom_vjp"]


class custom_jvp:
    """Decorate a function, then give its JVP with ``@f.defjvp``.

    The rule takes ``(primals, tangents)`` (tuples like the arguments) and returns
    ``(output, tangent_out)``; ``tangent_out`` must be linear in the tangents (reverse
    mode transposes it).  The rule is used by every transform, at any order:
    ``grad(grad(f))``, ``jvp(grad(f))``, ``hessian``, and through ``vmap`` in either
    order.

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

    def __call__(self, *args, **kwargs):
        _positional_only(self, "custom_jvp", kwargs)
        if self.rule is None:
            raise TypeError(f"custom_jvp {self.fun.__name__!r}: define its rule with @{self.fun.__name__}.defjvp")
        call = _Call(args)
        if not _needs_rule(call.arrays):
            return self.fun(*args)
        name = f"custom_jvp {self.fun.__name__!r}"

        def fun(arrays):
            return call.result(self.fun(*call.args(arrays)), name)

        def rule(primals, tangents):
            out, tangent_out = self.rule(call.args(primals), call.args(tangents))
            value = call.result(out, name)
            if tangent_out is None:
                return value, None
            (tangent,) = _match(out, tangent_out, name, what="tangent")
            return value, tangent

        result = _bind_jvp(call.arrays, fun, rule)
        return call.output.rebuild([result])


class custom_vjp:
    """Decorate a function, then give ``fwd`` and ``bwd`` with ``f.defvjp(fwd, bwd)``.

    ``fwd(*args)`` returns ``(output, residuals)``; ``bwd(residuals, cotangent)``
    returns one cotangent per argument (``None`` for none).  Reverse mode uses them,
    through ``vmap`` in either order; ``grad(grad(f))`` differentiates ``fwd`` and
    ``bwd`` as written.  Forward mode (``jvp``, ``jacfwd``, ``hessian``) raises
    ``lf.UnsupportedOperationError``.

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

    def __call__(self, *args, **kwargs):
        _positional_only(self, "custom_vjp", kwargs)
        if self.fwd is None:
            raise TypeError(f"custom_vjp {self.fun.__name__!r}: define its rules with {self.fun.__name__}.defvjp(fwd, bwd)")
        call = _Call(args)
        if not _needs_rule(call.arrays):
            return self.fun(*args)
        name = f"custom_vjp {self.fun.__name__!r}"

        def fun(arrays):
            return call.result(self.fun(*call.args(arrays)), name)

        def fwd(arrays):
            result = self.fwd(*call.args(arrays))
            if not (isinstance(result, tuple) and len(result) == 2):
                raise ValueError(f"{name}: fwd must return a pair (output, residuals)")
            return call.result(result[0], name), result[1]

        def bwd(residuals, g):
            return call.cotangents(self.bwd(residuals, call.output.rebuild([g])), name)

        result = _bind_vjp(call.arrays, fun, fwd, bwd, name)
        return call.output.rebuild([result])


# --- one call, as a flat list of arrays ---------------------------------------------------------
class _Call:
    """The arrays of a call's arguments, and how to rebuild arguments and output."""

    def __init__(self, args):
        self.slots = [_Arrays(a, f"argument {i}", "custom rule", allow_any=True) for i, a in enumerate(args)]
        self.arrays = [a for slot in self.slots for a in slot.arrays]
        self.output = None

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
        output = _Arrays(out, "output", name, allow_any=True)
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
                flat.extend(_match(slot.value, cotangent, name))
        return flat


def _top(arrays):
    """The innermost active level among ``arrays`` (None for plain values)."""
    top = None
    for array in arrays:
        if isinstance(array, Tracer):
            level = array._level
            if not level.alive:
                level.escaped("custom rule")
            if top is None or level.depth > top.depth:
                top = level
    return top


def _differentiated(arrays):
    """Whether a jvp or vjp level traces any of ``arrays``, at any depth."""
    for value in arrays:
        while isinstance(value, Tracer):
            if isinstance(value, (JVPTracer, VJPTracer)):
                return True
            value = value._value
    return False


def _needs_rule(arrays):
    """False when the plain function computes the right thing: no transform at all,
    or only vmaps (nothing to differentiate)."""
    level = _top(arrays)
    if level is None:
        return False
    return not isinstance(level, BatchLevel) or _differentiated(arrays)


def _integral(value):
    dtype = getattr(value, "dtype", None)
    return dtype is not None and dtype_kind(dtype) in "biu"


# --- custom_jvp at one level ---------------------------------------------------------------------
def _bind_jvp(arrays, fun, rule):
    """``fun(arrays)`` at the innermost level of ``arrays``, differentiated by ``rule``."""
    level = _top(arrays)
    if level is None or (isinstance(level, BatchLevel) and not _differentiated(arrays)):
        return fun(arrays)
    if isinstance(level, BatchLevel):
        values, mask = _unbatch_arguments(level, arrays)
        out = _bind_jvp(values, _batched(fun, level, mask), _batched_rule(rule, level, mask))
        return BatchTracer(level, out)
    primals = [_primal(a, level) for a in arrays]
    if isinstance(level, JVPLevel):
        out, tangent = rule(primals, [_tangent(a, level) for a in arrays])
        if tangent is None or _integral(out):
            return out
        return JVPTracer(level, out, tangent)
    if isinstance(level, VJPLevel):
        return _linearize(level, arrays, primals, rule)
    return fun(arrays)


def _linearize(level, arrays, primals, rule):
    """Reverse mode from a JVP rule: run the rule once with tangents traced by a
    private reverse level; its tangent output, linear in them, is pulled back later."""
    inner = VJPLevel()
    with active(inner):
        nodes, tangents = [], []
        for array, primal in zip(arrays, primals):
            zero = kc.zeros_like.bind(primal)
            if _node_of(array, level) is not None and not _integral(primal):
                node = input_node(zero)
                nodes.append(node)
                tangents.append(VJPTracer(inner, zero, node))
            else:
                nodes.append(None)
                tangents.append(zero)
        out, tangent = rule(primals, tangents)
        out = _primal(out, inner)
        tangent_node = _node_of(tangent, inner)
    wanted = [node for node in nodes if node is not None]

    def pullback(g):
        if tangent_node is None:
            return [None] * len(arrays)
        found = iter(backward([(tangent_node, g)], wanted))
        return [None if node is None else next(found) for node in nodes]

    return _record(level, arrays, out, pullback)


# --- custom_vjp at one level ---------------------------------------------------------------------
def _bind_vjp(arrays, fun, fwd, bwd, name):
    """``fun(arrays)`` at the innermost level of ``arrays``, pulled back by ``bwd``."""
    level = _top(arrays)
    if level is None or (isinstance(level, BatchLevel) and not _differentiated(arrays)):
        return fun(arrays)
    if isinstance(level, BatchLevel):
        values, mask = _unbatch_arguments(level, arrays)
        out = _bind_vjp(values, _batched(fun, level, mask), _batched_fwd(fwd, level, mask),
                        _batched_bwd(bwd, level, mask), name)
        return BatchTracer(level, out)
    if isinstance(level, JVPLevel):
        raise UnsupportedOperationError(
            f"{name} has a reverse-mode rule only: it cannot be differentiated in forward "
            "mode (jvp, jacfwd, hessian). Use lf.custom_jvp, or lf.jacrev instead of lf.jacfwd."
        )
    if isinstance(level, VJPLevel):
        out, residuals = fwd([_primal(a, level) for a in arrays])
        return _record(level, arrays, out, lambda g: bwd(residuals, g))
    return fun(arrays)


class _CustomRule:
    """Stands in a tape node for a primitive: its ``vjp`` calls the pullback."""

    name = "custom rule"

    def __init__(self, pullback):
        self.pullback = pullback

    def vjp(self, g, primals, out):
        return tuple(self.pullback(g))


def _record(level, arrays, out, pullback):
    parents = tuple((i, a._node) for i, a in enumerate(arrays)
                    if type(a) is VJPTracer and a._level is level and a._node is not None)
    if not parents or _integral(out):
        return out
    return VJPTracer(level, out, Node(_CustomRule(pullback), {}, parents, (), out))


# --- the batch rule: vmap the function and its rules ---------------------------------------------
def _unbatch_arguments(level, arrays):
    values, mask = [], []
    for array in arrays:
        if type(array) is BatchTracer and array._level is level:
            values.append(array._value)
            mask.append(True)
        else:
            values.append(array)
            mask.append(False)
    return values, tuple(mask)


def _rebatch(level, values, mask):
    return [BatchTracer(level, v) if batched else v for v, batched in zip(values, mask)]


def _unbatch_output(level, value):
    return None if value is None else unbatch_value(level, value)


def _fresh(level):
    """A vmap level like ``level``, for running a rule over the same examples."""
    return BatchLevel(level.axis_size, level.randomness)


def _batched(fun, level, mask):
    def run(values):
        new = _fresh(level)
        with active(new):
            return _unbatch_output(new, fun(_rebatch(new, values, mask)))

    return run


def _batched_rule(rule, level, mask):
    def run(primals, tangents):
        new = _fresh(level)
        with active(new):
            out, tangent = rule(_rebatch(new, primals, mask), _rebatch(new, tangents, mask))
            return _unbatch_output(new, out), _unbatch_output(new, tangent)

    return run


def _batched_fwd(fwd, level, mask):
    def run(values):
        new = _fresh(level)
        with active(new):
            out, residuals = fwd(_rebatch(new, values, mask))
            return _unbatch_output(new, out), _Residuals(residuals, new)

    return run


def _batched_bwd(bwd, level, mask):
    def run(residuals, g):
        new = _fresh(level)
        with active(new):
            cotangents = bwd(residuals.rebuild(new), BatchTracer(new, g))
            flat = []
            for cotangent, batched in zip(cotangents, mask):
                if cotangent is not None:
                    cotangent = unbatch_value(new, cotangent)
                    if not batched:  # an argument shared by every example: sum their parts
                        cotangent = reduce_sum.bind(cotangent, axis=(0,), keepdims=False)
                flat.append(cotangent)
            return flat

    return run


def _positional_only(custom, kind, kwargs):
    if kwargs:
        name = custom.fun.__name__
        raise TypeError(
            f"{kind} {name!r} takes its arguments by position only (its rules get them as a "
            f"tuple), but was called with {sorted(kwargs)} by keyword: pass them by position, "
            f"or fix non-array options first with functools.partial({name}, ...) before "
            f"decorating"
        )


class _Residuals:
    """``fwd``'s residuals with the arrays mapped by a vmap level kept unwrapped, to
    be rewrapped by the vmap level that runs ``bwd``.

    Under nested vmaps the outer level's wrapper gets the inner one's ``_Residuals``: it
    unwraps its own level's values among the inner one's, and rebuilds an inner
    ``_Residuals`` for the inner wrapper to rebuild in turn.
    """

    def __init__(self, tree, level):
        if isinstance(tree, _Residuals):
            self.inner, self.leaves, self.treedef = tree, None, None
            values = list(tree.values)
        else:
            self.inner = None
            self.leaves, self.treedef = optree.tree_flatten(tree, none_is_leaf=True)
            values = [d for leaf in self.leaves for d in _arrays_of(leaf)]
        self.mask = [type(v) is BatchTracer and v._level is level for v in values]
        self.values = [v._value if batched else v for v, batched in zip(values, self.mask)]

    def rebuild(self, level):
        values = [BatchTracer(level, v) if batched else v for v, batched in zip(self.values, self.mask)]
        if self.inner is not None:
            inner = copy.copy(self.inner)
            inner.values = values
            return inner
        leaves, start = [], 0
        for leaf in self.leaves:
            count = len(_arrays_of(leaf))
            data, start = values[start:start + count], start + count
            if not count:
                leaves.append(leaf)
            elif isinstance(leaf, xr.DataArray):
                leaves.append(leaf.copy(deep=False, data=data[0]))
            elif isinstance(leaf, xr.Dataset):
                leaves.append(leaf.copy(deep=False, data=dict(zip(leaf.data_vars, data))))
            else:
                leaves.append(data[0])
        return optree.tree_unflatten(self.treedef, leaves)


def _arrays_of(leaf):
    """The traced arrays a residual leaf holds (none for plain values)."""
    if isinstance(leaf, xr.DataArray):
        return [leaf.data]
    if isinstance(leaf, xr.Dataset):
        return [leaf[name].data for name in leaf.data_vars]
    if isinstance(leaf, Tracer):
        return [leaf]
    return []
