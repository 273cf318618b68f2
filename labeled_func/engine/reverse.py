"""VJPTracer, the tape and the reverse-mode (vjp) level.

Each primitive applied to a VJPTracer records a node: the primitive, its parameters,
its primal inputs and output.  :func:`backward` walks the nodes reachable from the
outputs in reverse topological order, pulling each node's cotangent back to its parents
(a primitive's ``vjp`` rule, written with ``bind``, so the backward pass is itself
traceable: grad of grad, jacfwd of jacrev), accumulating cotangents and dropping each
node's cotangent once it is used.  A call of a function with custom rules records one
:class:`CustomNode`, whose pullback is the rule.
"""
from __future__ import annotations

import numpy as np

from kernels import core as kcore
from kernels import creation as kc
from kernels import elementwise as ew
from kernels.backend import device_of, dtype_kind, namespace
from kernels.primitive import bottom

from .errors import UnsupportedOperationError
from .stack import Level, active, bind_per_example
from .tracer import PrimalTracer, integral, primal_of, stays_traced
from .views import VIEW_PRIMITIVES, assign_value, make_view, refresh_view

__all__ = ["VJPLevel", "VJPTracer", "Node", "CustomNode", "backward", "input_node", "node_of"]


class Node:
    """One recorded operation: ``prim`` applied to ``primals`` gave ``out``; ``parents``
    are ``(position, node)`` pairs of the traced arguments.  An input has no parents."""

    __slots__ = ("prim", "params", "parents", "primals", "out", "__weakref__")

    def __init__(self, prim, params, parents, primals, out):
        self.prim = prim
        self.params = params
        self.parents = parents
        self.primals = primals
        self.out = out

    def pull(self, cotangent):
        """One cotangent per argument position (None for none)."""
        return self.prim.vjp(cotangent, self.primals, self.out, **self.params)


class CustomNode(Node):
    """A call of a function with a custom rule: ``pullback(cotangent)`` gives one
    cotangent per array argument."""

    __slots__ = ("pullback",)

    def __init__(self, pullback, parents, out):
        super().__init__(None, None, parents, (), out)
        self.pullback = pullback

    def pull(self, cotangent):
        return self.pullback(cotangent)


def input_node(primal):
    return Node(None, None, (), (), primal)


def node_of(value, level):
    """The tape node behind ``value`` at reverse ``level`` (None for a constant)."""
    return refresh_view(value)._node if type(value) is VJPTracer and value._level is level else None


class VJPLevel(Level):
    """One vjp: operations on its tracers are recorded on a tape."""

    name = "grad"
    differentiates = True
    __slots__ = ()

    def process(self, prim, args, params):
        primals = []
        parents = []
        for i, arg in enumerate(args):
            if type(arg) is VJPTracer and arg._level is self:
                if arg._view is not None:
                    refresh_view(arg)
                primals.append(arg._value)
                if arg._node is not None:
                    parents.append((i, arg._node))
            else:
                primals.append(arg)
        out = prim.bind(*primals, **params)
        if prim.traced_constant:
            return VJPTracer(self, out, None)
        if prim in VIEW_PRIMITIVES and type(args[0]) is VJPTracer and args[0]._level is self:
            view = make_view(prim, args, params, out)
            if view is not None:  # traced even without a node: writes through it reach the base
                node = _node(prim, params, parents, primals, out) if parents and not integral(out) else None
                result = VJPTracer(self, out, node)
                result._view = view
                return result
        if not prim.differentiable or not parents or integral(out):
            return VJPTracer(self, out, None) if stays_traced(out) else out
        if prim.vjp is None:
            raise UnsupportedOperationError(f"{prim.name} has no VJP rule: it cannot be differentiated in reverse mode")
        return VJPTracer(self, out, _node(prim, params, parents, primals, out))

    def process_custom_jvp(self, fun, rule, arrays):
        """Reverse mode from a JVP rule: the rule runs once with tangents traced by a
        private reverse level; its tangent output, linear in them, is pulled back later."""
        primals = [primal_of(a, self) for a in arrays]
        inner = VJPLevel()
        with active(inner):
            nodes, tangents = [], []
            for array, primal in zip(arrays, primals):
                zero = kc.zeros_like.bind(primal)
                if node_of(array, self) is not None and not integral(primal):
                    node = input_node(zero)
                    nodes.append(node)
                    tangents.append(VJPTracer(inner, zero, node))
                else:
                    nodes.append(None)
                    tangents.append(zero)
            out, tangent = rule(primals, tangents)
            out = primal_of(out, inner)
            tangent_node = node_of(tangent, inner)
        wanted = [node for node in nodes if node is not None]

        def pullback(g):
            if tangent_node is None:
                return [None] * len(arrays)
            found = iter(backward([(tangent_node, g)], wanted))
            return [None if node is None else next(found) for node in nodes]

        return self._record_custom(arrays, out, pullback)

    def process_custom_vjp(self, fun, fwd, bwd, arrays, name):
        out, residuals = fwd([primal_of(a, self) for a in arrays])
        return self._record_custom(arrays, out, lambda g: bwd(residuals, g))

    def process_per_example(self, fun, arrays):
        """``fun`` runs under a private reverse level, once per example of the levels below;
        each output records one node whose pullback runs it again that way and pulls the
        cotangent back through the run (recomputation: a private level's tape cannot outlive
        the levels below it)."""
        primals = [primal_of(a, self) for a in arrays]
        traced = [node_of(a, self) is not None and not integral(p) for a, p in zip(arrays, primals)]

        def run(values):
            """``fun`` on private reverse tracers: its outputs, and the input nodes."""
            inner = VJPLevel()
            with active(inner):
                nodes = [input_node(p) if is_traced else None for p, is_traced in zip(values, traced)]
                outs = fun([p if node is None else VJPTracer(inner, p, node) for p, node in zip(values, nodes)])
                outs = [(primal_of(out, inner), node_of(out, inner)) for out in outs]
            return outs, [node for node in nodes if node is not None]

        def pullback_of(k):
            def per_example(values):
                outs, wanted = run(values[:-1])
                out_node = outs[k][1]
                found = backward([(out_node, values[-1])], wanted) if out_node is not None else [None] * len(wanted)
                return [kc.zeros_like.bind(node.out) if c is None else c for node, c in zip(wanted, found)]

            def pullback(g):
                cotangents = iter(bind_per_example(per_example, primals + [g]))
                return [next(cotangents) if is_traced else None for is_traced in traced]

            return pullback

        outs = bind_per_example(lambda values: [out for out, _ in run(values)[0]], primals)
        return [self._record_custom(arrays, out, pullback_of(k)) for k, out in enumerate(outs)]

    def _record_custom(self, arrays, out, pullback):
        parents = []
        for i, array in enumerate(arrays):
            node = node_of(array, self)
            if node is not None:
                parents.append((i, node))
        if not parents or integral(out):
            return out
        return VJPTracer(self, out, CustomNode(pullback, tuple(parents), out))

    def assign(self, dest, src, operation):
        assign_value(self, dest, src)

    def set_value(self, dest, src):
        """Replace the primal and tape node of ``dest`` by those of ``src``."""
        if type(src) is VJPTracer and src._level is self:
            if src._view is not None:
                refresh_view(src)
            primal, node = src._value, src._node
        else:
            primal, node = src, None
        shape = tuple(dest.shape)
        if tuple(getattr(primal, "shape", ())) != shape:
            primal = kcore.broadcast_to.bind(primal, shape=shape)
            node = None if node is None else _broadcast_node(node, primal, shape)
        dest._value = primal
        dest._node = node


def _node(prim, params, parents, primals, out):
    """The tape node of ``prim``: it holds only the values the VJP reads (``prim.keeps``),
    stand-ins of the others."""
    if prim.keeps is not None:
        positions, keeps_out = prim.keeps(len(primals), [i for i, _ in parents])
        primals = [p if i in positions else stand_in(p) for i, p in enumerate(primals)]
        if not keeps_out:
            out = stand_in(out)
    return Node(prim, params, tuple(parents), tuple(primals), out)


_ZEROS = {}


def stand_in(value):
    """An array of ``value``'s shape and dtype (and library and device) holding no memory:
    one zero, broadcast.  What a tape keeps of a value its VJP reads the shape of only."""
    if not hasattr(value, "shape"):
        return value
    shape, dtype = tuple(value.shape), value.dtype
    base = bottom(value)
    if type(base) is np.ndarray or isinstance(base, np.generic):
        zero = _ZEROS.get(dtype)
        if zero is None:
            zero = _ZEROS[dtype] = np.zeros((), dtype=dtype)
        return np.broadcast_to(zero, shape)
    xp = namespace(base)
    return xp.broadcast_to(xp.zeros((), dtype=dtype, device=device_of(base)), shape)


def _broadcast_node(node, out, shape):
    return Node(kcore.broadcast_to, {"shape": shape}, ((0, node),), (node.out,), out)


class VJPTracer(PrimalTracer):
    """A primal value and the tape node that produced it, at one vjp level."""

    __slots__ = ("_node",)

    def __init__(self, level, primal, node):
        self._level = level
        self._value = primal
        self._node = node
        self._view = None
        self._cell = None

    def __repr__(self):
        if self._view is not None and self._level.alive:
            refresh_view(self)
        return f"VJPTracer(grad level {self._level.depth}, shape={self.shape}, dtype={self.dtype}):\n{self._value!r}"



def backward(seeds, wanted):
    """Cotangents of the ``wanted`` nodes, given ``seeds``: [(node, cotangent)]."""
    order = _topological([node for node, _ in seeds])
    cotangents = {}
    for node, cotangent in seeds:
        _accumulate(cotangents, node, cotangent)
    wanted_ids = {id(node) for node in wanted}
    results = {}
    for node in reversed(order):
        cotangent = cotangents.pop(id(node), None)
        if cotangent is None:
            continue
        if id(node) in wanted_ids:
            results[id(node)] = cotangent
        if not node.parents:  # an input
            continue
        inputs = node.pull(cotangent)
        for position, parent in node.parents:
            contribution = inputs[position]
            if contribution is not None:
                _accumulate(cotangents, parent, contribution)
    return [results.get(id(node)) for node in wanted]


def _accumulate(cotangents, node, cotangent):
    if _complex(cotangent) and not _complex(node.out):
        # a real value's cotangent is real: Re of what a complex-valued use sends back
        # (kernels/elementwise.py states the convention)
        cotangent = ew.real.bind(cotangent)
    shape = tuple(getattr(node.out, "shape", ()))
    if tuple(getattr(cotangent, "shape", ())) != shape:
        cotangent = kcore.broadcast_to.bind(cotangent, shape=shape)
    previous = cotangents.get(id(node))
    cotangents[id(node)] = cotangent if previous is None else ew.add.bind(previous, cotangent)


def _complex(value):
    dtype = getattr(value, "dtype", None)
    return dtype is not None and dtype_kind(dtype) == "c"


def _topological(roots):
    """Nodes reachable from ``roots``, parents before children (iterative DFS)."""
    order = []
    seen = set()
    stack = [(root, False) for root in roots]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for _, parent in node.parents:
            if id(parent) not in seen:
                stack.append((parent, False))
    return order
