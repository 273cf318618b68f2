"""VJPTracer, the tape and the reverse-mode (vjp) level.

Each primitive applied to a VJPTracer records a node: the primitive, its parameters,
its primal inputs and output.  :func:`backward` walks the nodes reachable from the
outputs in reverse topological order, calling each ``vjp`` rule (written with
``bind``, so the backward pass is itself traceable: grad of grad, jacfwd of jacrev),
accumulating cotangents and dropping each node's cotangent once it is used.
"""
from __future__ import annotations

from kernels import elementwise as ew
from kernels import shape as ks

from .errors import UnsupportedOperationError
from .stack import Level
from .tracer import VIEW_PRIMITIVES, PrimalTracer, assign_value, integral, make_view, refresh_view

__all__ = ["VJPLevel", "VJPTracer", "Node", "backward", "input_node"]


class Node:
    """One recorded operation (or an input, when ``prim`` is None)."""

    __slots__ = ("prim", "params", "parents", "primals", "out", "__weakref__")

    def __init__(self, prim, params, parents, primals, out):
        self.prim = prim
        self.params = params
        self.parents = parents
        self.primals = primals
        self.out = out


def input_node(primal):
    return Node(None, None, (), (), primal)


class VJPLevel(Level):
    """One vjp: operations on its tracers are recorded on a tape."""

    name = "grad"
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
                node = Node(prim, params, tuple(parents), tuple(primals), out) if parents and not integral(out) else None
                result = VJPTracer(self, out, node)
                result._view = view
                return result
        if not prim.differentiable or not parents or integral(out):
            return out
        if prim.vjp is None:
            raise UnsupportedOperationError(f"{prim.name} has no VJP rule: it cannot be differentiated in reverse mode")
        return VJPTracer(self, out, Node(prim, params, tuple(parents), tuple(primals), out))

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
            primal = ks.broadcast_to.bind(primal, shape=shape)
            node = None if node is None else _broadcast_node(node, primal, shape)
        dest._value = primal
        dest._node = node


def _broadcast_node(node, out, shape):
    return Node(ks.broadcast_to, {"shape": shape}, ((0, node),), (node.out,), out)


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
        if node.prim is None:
            continue
        inputs = node.prim.vjp(cotangent, node.primals, node.out, **node.params)
        for position, parent in node.parents:
            contribution = inputs[position]
            if contribution is not None:
                _accumulate(cotangents, parent, contribution)
    return [results.get(id(node)) for node in wanted]


def _accumulate(cotangents, node, cotangent):
    shape = tuple(getattr(node.out, "shape", ()))
    if tuple(getattr(cotangent, "shape", ())) != shape:
        cotangent = ks.broadcast_to.bind(cotangent, shape=shape)
    previous = cotangents.get(id(node))
    cotangents[id(node)] = cotangent if previous is None else ew.add.bind(previous, cotangent)


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
