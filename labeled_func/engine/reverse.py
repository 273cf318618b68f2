"""VJPTracer, the tape and the reverse-mode (vjp) level.

Each primitive applied to a VJPTracer records a node: the primitive, its parameters,
its primal inputs and output.  :func:`backward` walks the nodes reachable from the
outputs in reverse topological order, pulling each node's cotangent back to its parents
(a primitive's ``vjp`` rule, written with ``bind``, so the backward pass is itself
traceable: grad of grad, jacfwd of jacrev), accumulating cotangents and dropping each
node's cotangent once it is used.  A call of a function with custom rules records one
:class:`CustomNode`, whose pullback is the rule.

A call of a checkpointed function records one :class:`CallNode` for all its outputs
(one :class:`OutputNode` each): the function runs without a tape (:class:`Capture`
notes the values of this level it reads, wherever they come from: its arguments or its
closure), and the node's pullback runs it again under a private reverse level and pulls
the cotangents back through that run.  Only the values it read are kept.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from contextvars import ContextVar
from typing import Any, NoReturn

import numpy as np

from labeled_func_kernels import core as kcore
from labeled_func_kernels import creation as kc
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import shape as ks
from labeled_func_kernels.backend import device_of, dtype_kind, namespace
from labeled_func_kernels.core import Negated
from labeled_func_kernels.primitive import Primitive, bottom

from .errors import InplaceError, UnsupportedOperationError
from .stack import Level, active, bind_custom_jvp, bind_custom_vjp, bind_per_example, traced_by
from .tracer import PrimalTracer, integral, primal_of, stays_traced
from .views import VIEW_PRIMITIVES, assign_value, make_view, refresh_view

__all__ = ["VJPLevel", "VJPTracer", "Node", "CustomNode", "CallNode", "OutputNode", "backward", "input_node",
           "node_of"]

# The checkpointed calls running now without a tape: {level: Capture}, per task as the stack.
_CAPTURES: ContextVar = ContextVar("labeled_func_checkpoint_captures", default=None)


def _capture_of(level):
    captures = _CAPTURES.get()
    return None if captures is None else captures.get(level)


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

    def pull(self, cotangent: Any) -> Sequence[Any]:
        """One cotangent per argument position (None for none).  ``cotangent`` may be a
        :class:`~kernels.core.Negated`, and so may the results: a ``vjp.signed`` rule takes and
        gives them; for any other rule it is computed first."""
        vjp = self.prim.vjp
        rule = getattr(vjp, "signed", None)
        if rule is None:
            if type(cotangent) is Negated:
                cotangent = ew.negative.bind(cotangent.value)
            rule = getattr(vjp, "wanted", None)
            if rule is None:
                return vjp(cotangent, self.primals, self.out, **self.params)
        # only the traced positions: their cotangents are the ones read
        parents = self.parents
        wanted = (parents[0][0],) if len(parents) == 1 else {i for i, _ in parents}
        return rule(cotangent, self.primals, self.out, wanted, **self.params)


class CustomNode(Node):
    """A call of a function with a custom rule: ``pullback(cotangent)`` gives one
    cotangent per array argument."""

    __slots__ = ("pullback",)

    def __init__(self, pullback, parents, out):
        super().__init__(None, None, parents, (), out)
        self.pullback = pullback

    def pull(self, cotangent: Any) -> Sequence[Any]:
        return self.pullback(cotangent)


class CallNode(Node):
    """A call with several outputs recorded as one node (a checkpointed function).  Its
    cotangent is a list, one entry per output (None: zero), which its :class:`OutputNode` s
    fill; ``pullback(cotangents)`` gives one cotangent per parent position."""

    __slots__ = ("pullback", "outs")

    def __init__(self, pullback, parents, outs):
        super().__init__(None, None, parents, (), None)
        self.pullback = pullback
        self.outs = outs

    def pull(self, cotangents: Sequence[Any]) -> Sequence[Any]:
        return self.pullback(cotangents)


class OutputNode(Node):
    """Output ``index`` of a :class:`CallNode`: its cotangent goes to that entry."""

    __slots__ = ("index",)

    def __init__(self, call, index, out):
        super().__init__(None, None, ((0, call),), (), out)
        self.index = index

    def pull(self, cotangent: Any) -> tuple[tuple[int, Any], ...]:
        return ((self.index, cotangent),)


def input_node(primal: Any) -> Node:
    return Node(None, None, (), (), primal)


def node_of(value: Any, level: VJPLevel) -> Node | None:
    """The tape node behind ``value`` at reverse ``level`` (None for a constant)."""
    return refresh_view(value)._node if type(value) is VJPTracer and value._level is level else None


LOOP_GRAD = (
    "lf.while_loop under lf.jit: reverse-mode differentiation (lf.grad, lf.vjp, lf.jacrev, lf.hessian) "
    "through a loop whose number of iterations depends on traced values is not supported (its backward "
    "pass would need the values of every iteration of every later call). Loop a fixed number of times "
    "instead (lf.scan, or `for _ in range(n)` with lf.cond / xr.where selecting when to stop), "
    "differentiate in forward mode (lf.jvp, lf.jacfwd), or call lf.grad outside lf.jit."
)


class VJPLevel(Level):
    """One vjp: operations on its tracers are recorded on a tape."""

    name = "grad"
    differentiates = True
    __slots__ = ()

    def input(self, primal: Any, node: Node | None) -> VJPTracer:
        """An input of the differentiated function: ``primal`` recorded on the tape as ``node``
        (from :func:`input_node`)."""
        return VJPTracer(self, primal, node)

    def process(self, prim: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
        captures = _CAPTURES.get()
        if captures is not None and self in captures:
            return captures[self].process(prim, args, params)
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

    def process_custom_jvp(self, fun: Callable[[list[Any]], Any], rule: Callable[..., Any], arrays: list[Any]) -> Any:
        """Reverse mode from a JVP rule: the rule runs once with tangents traced by a
        private reverse level; its tangent output, linear in them, is pulled back later."""
        capture = _capture_of(self)
        if capture is not None:
            return bind_custom_jvp(fun, rule, capture.read_all(arrays))
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

    def process_custom_vjp(self, fun: Callable[[list[Any]], Any], fwd: Callable[..., Any], bwd: Callable[..., Any],
                           arrays: list[Any], name: str) -> Any:
        capture = _capture_of(self)
        if capture is not None:
            return bind_custom_vjp(fun, fwd, bwd, capture.read_all(arrays), name)
        out, residuals = fwd([primal_of(a, self) for a in arrays])
        return self._record_custom(arrays, out, lambda g: bwd(residuals, g))

    def process_per_example(self, fun: Callable[[list[Any]], list[Any]], arrays: list[Any]) -> list[Any]:
        """``fun`` runs under a private reverse level, once per example of the levels below;
        each output records one node whose pullback runs it again that way and pulls the
        cotangent back through the run (recomputation: a private level's tape cannot outlive
        the levels below it)."""
        capture = _capture_of(self)
        if capture is not None:
            return bind_per_example(fun, capture.read_all(arrays))
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

    def process_checkpoint(self, fun: Callable[[list[Any]], list[Any]], arrays: list[Any]) -> list[Any]:
        """``fun`` runs without a tape (see :class:`Capture`); its outputs share one
        :class:`CallNode` whose parents are the nodes of the values of this level it read.
        The pullback substitutes each of those values by a fresh input of a private reverse
        level, runs ``fun`` again and pulls the cotangents back through that run."""
        if _capture_of(self) is not None:
            return fun(arrays)  # inside a checkpointed call: that call's recomputation covers it
        capture = Capture(self)
        args = [capture.alias(a) for a in arrays]
        token = _CAPTURES.set({**(_CAPTURES.get() or {}), self: capture})
        try:
            outs = [capture.read(out) for out in fun(args)]
        finally:
            _CAPTURES.reset(token)
        read = capture.read_values
        parents = tuple((i, node) for i, (_, _, node) in enumerate(read) if node is not None)
        if not parents:
            return outs

        def pullback(cotangents):
            inner = VJPLevel()
            inner.label = self.label
            nodes = [None if node is None else input_node(primal) for _, primal, node in read]
            saved = [(tracer._level, tracer._value, tracer._node, tracer._view) for tracer, _, _ in read]
            with active(inner):
                try:  # the values read, as inputs of the private level (a closure's too)
                    for (tracer, primal, _), node in zip(read, nodes):
                        tracer._level, tracer._value, tracer._node, tracer._view = inner, primal, node, None
                    again = fun(args)
                    out_nodes = [node_of(out, inner) for out in again]
                finally:
                    for (tracer, _, _), state in zip(read, saved):
                        tracer._level, tracer._value, tracer._node, tracer._view = state
            if len(out_nodes) != len(cotangents):
                raise RuntimeError(f"a checkpointed function returned {len(out_nodes)} arrays when run again on "
                                   f"the backward pass, {len(cotangents)} the first time: it must be deterministic")
            seeds = [(node, c) for node, c in zip(out_nodes, cotangents) if node is not None and c is not None]
            wanted = [node for node in nodes if node is not None]
            found = iter(backward(seeds, wanted) if seeds else [None] * len(wanted))
            return [None if node is None else next(found) for node in nodes]

        call = CallNode(pullback, parents, outs)
        return [out if integral(out) or not hasattr(out, "shape") else VJPTracer(self, out, OutputNode(call, k, out))
                for k, out in enumerate(outs)]

    def _record_custom(self, arrays, out, pullback):
        parents = []
        for i, array in enumerate(arrays):
            node = node_of(array, self)
            if node is not None:
                parents.append((i, node))
        if not parents or integral(out):
            return out
        return VJPTracer(self, out, CustomNode(pullback, tuple(parents), out))

    def loop_spec(self, tracer: VJPTracer, spec_of: Callable[[Any], Any]) -> NoReturn:
        """A loop recorded below (lf.jit's) runs as many iterations as each later call's
        values say: a tape of them cannot be kept."""
        raise UnsupportedOperationError(LOOP_GRAD)

    def assign(self, dest: VJPTracer, src: Any, operation: Any) -> None:
        capture = _capture_of(self)
        if capture is not None:
            src = capture.check_write(dest, src, operation)
        assign_value(self, dest, src)

    def set_value(self, dest: VJPTracer, src: Any) -> None:
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


_STAND_INS = {}  # (shape, dtype) on NumPy, (namespace, dtype, device, shape) elsewhere -> a broadcast zero
_MAX_STAND_INS = 256


def stand_in(value: Any) -> Any:
    """An array of ``value``'s shape and dtype (and library and device) holding no memory:
    one zero, broadcast.  What a tape keeps of a value its VJP reads the shape of only.
    One is made per shape and dtype (and library and device): on a GPU each new zero is an
    allocation and a kernel."""
    if type(value) is np.ndarray:  # the common case, first
        found = _STAND_INS.get((value.shape, value.dtype))
        if found is not None:
            return found
    if not hasattr(value, "shape"):
        return value
    shape, dtype = tuple(value.shape), value.dtype
    base = bottom(value)
    if type(base) is np.ndarray or isinstance(base, np.generic):
        key = (shape, dtype)

        def make():
            return np.broadcast_to(np.zeros((), dtype=dtype), shape)  # read-only: shared safely
    else:
        xp, device = namespace(base), device_of(base)
        place = device_key(device)
        key = None if place is None else (xp.__name__, dtype, place, shape)

        def make():
            return xp.broadcast_to(xp.zeros((), dtype=dtype, device=device), shape)
    found = None if key is None else _STAND_INS.get(key)
    if found is None:
        found = make()
        if key is not None:
            if len(_STAND_INS) >= _MAX_STAND_INS:
                _STAND_INS.clear()
            _STAND_INS[key] = found
    return found


def device_key(device: Any) -> Hashable:
    """``device`` as a dictionary key: itself where it is hashable; CuPy's devices compare
    by their number but are not hashable, so (type, number); None where neither works."""
    try:
        hash(device)
        return device
    except TypeError:
        number = getattr(device, "id", None)
        return (type(device).__qualname__, number) if type(number) is int else None


class Capture:
    """A checkpointed call running at ``level`` without a tape.

    Every tracer of the level that an operation reads is unwrapped to its primal, and the
    first read of each is noted (``read_values``: the tracer, its primal and node then):
    those are what the recomputation starts from.  Results are plain values of the levels
    below, except those that must stay tracers: views (writes through them reach their
    base) and ``*_like`` buffers (traced values may be written into them), noted as
    ``created``.  Writes in place go only into the call's own arguments (``alias``: fresh
    tracers for the same values) and what it created: a value of its closure written in
    place would lose its derivative.
    """

    __slots__ = ("level", "read_values", "_read", "_created", "_writable")

    def __init__(self, level):
        self.level = level
        self.read_values = []
        self._read = set()
        self._created = set()
        self._writable = set()

    def alias(self, array: Any) -> Any:
        """A fresh tracer of this level for one argument of the call (its own, to write into)."""
        if not hasattr(array, "shape"):
            return array
        primal, node = (refresh_view(array)._value, array._node) if traced_by(array, self.level) else (array, None)
        tracer = VJPTracer(self.level, primal, node)
        self._writable.add(id(tracer))
        self._note(tracer)
        return tracer

    def read(self, value: Any) -> Any:
        """The primal of ``value`` if it is a tracer of this level (noted on first read)."""
        if type(value) is not VJPTracer or value._level is not self.level:
            return value
        created = id(value) in self._created
        if value._view is not None:
            if created:
                refresh_view(value)
            else:  # a view made before the call is brought up to date on the tape, as outside it
                captures = _CAPTURES.get()
                token = _CAPTURES.set({k: c for k, c in captures.items() if k is not self.level})
                try:
                    refresh_view(value)
                finally:
                    _CAPTURES.reset(token)
        if not created and id(value) not in self._read:
            self._note(value)
        return value._value

    def read_all(self, values: Iterable[Any]) -> list[Any]:
        return [self.read(v) for v in values]

    def _note(self, tracer):
        self._read.add(id(tracer))
        self.read_values.append((tracer, tracer._value, tracer._node))

    def process(self, prim: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
        out = prim.bind(*self.read_all(args), **params)
        level = self.level
        x = args[0] if args else None
        if prim in VIEW_PRIMITIVES and type(x) is VJPTracer and x._level is level:
            view = make_view(prim, args, params, out)
            if view is not None:
                return self._created_tracer(out, view)
        if prim.traced_constant or stays_traced(out):
            return self._created_tracer(out, None)
        return out

    def _created_tracer(self, out, view):
        tracer = VJPTracer(self.level, out, None)
        tracer._view = view
        self._created.add(id(tracer))
        if view is None:
            self._writable.add(id(tracer))
        return tracer

    def check_write(self, dest: Any, src: Any, operation: Any) -> Any:
        """``src`` unwrapped, once ``dest`` is known to be the call's own."""
        base = dest._view.base if dest._view is not None else dest
        if id(base) not in self._writable:
            raise InplaceError(
                f"{operation}: a checkpointed function (lf.checkpoint, lf.scan with checkpoint_every) "
                "writes in place into a value it closes over; under lf.grad the value would lose its "
                "derivative. Pass it as an argument, or write into a copy (x = x.copy())."
            )
        return self.read(src)


def _broadcast_node(node, out, shape):
    return Node(kcore.broadcast_to, {"shape": shape}, ((0, node),), (node.out,), out)


class VJPTracer(PrimalTracer):
    """A primal value and the tape node that produced it, at one vjp level."""

    __slots__ = ("_node",)

    def __init__(self, level, primal, node):
        self._level = level
        self._value = primal
        self._shape = tuple(primal.shape)
        self._node = node
        self._view = None
        self._cell = None

    def __repr__(self):
        if self._view is not None and self._level.alive:
            refresh_view(self)
        return f"VJPTracer(grad level {self._level.depth}, shape={self.shape}, dtype={self.dtype}):\n{self._value!r}"


def backward(seeds: Iterable[tuple[Node, Any]], wanted: Sequence[Node]) -> list[Any]:
    """Cotangents of the ``wanted`` nodes, given ``seeds``: [(node, cotangent)].

    A contribution ``-g`` (the partial -1 of ``a - b``) travels as a :class:`Negated` ``g``
    through the rules that take one (``vjp.signed``) and is subtracted where cotangents sum:
    it is computed (``negative``) only where it reaches a node on its own and that node's
    rule does not take one, or is wanted.  The same bits either way, fewer passes."""
    order = _topological([node for node, _ in seeds])
    cotangents = {}
    owned = set()  # ids of the nodes whose cotangent is a sum made here: added to in place
    for node, cotangent in seeds:
        _accumulate(cotangents, owned, node, cotangent)
    wanted_ids = {id(node) for node in wanted}
    results = {}
    for node in reversed(order):
        cotangent = cotangents.pop(id(node), None)
        if cotangent is None:
            continue
        if type(cotangent) is Rolled:  # one contribution, a roll's: rolled now
            cotangent = cotangent.computed()
        if id(node) in wanted_ids:
            cotangent = ew.materialised(cotangent)
            results[id(node)] = cotangent
        if not node.parents:  # an input
            continue
        if type(node) is Node and node.prim is ks.roll:
            rolled = _rolled_back(node, cotangent)
            if rolled is not None:  # summed where the argument's cotangents meet, not rolled first
                _accumulate(cotangents, owned, node.parents[0][1], rolled)
                continue
        if type(node) is not Node and type(cotangent) is Negated:  # a custom rule, a checkpointed call
            cotangent = ew.negative.bind(cotangent.value)
        inputs = node.pull(cotangent)
        for position, parent in node.parents:
            contribution = inputs[position]
            if contribution is not None:
                _accumulate(cotangents, owned, parent, contribution)
    return [results.get(id(node)) for node in wanted]


class Rolled:
    """A cotangent ``roll(value, shift, axis)`` (``-`` that where ``negated``) not computed yet:
    what a roll's node hands its argument.  Where it meets another cotangent of the same
    value the pass adds it in one pass (``add_rolled``, the bits of ``add`` after ``roll``);
    alone, it is rolled when its node is reached."""

    __slots__ = ("value", "shift", "axis", "negated")

    def __init__(self, value, shift, axis, negated):
        self.value, self.shift, self.axis, self.negated = value, shift, axis, negated

    def computed(self) -> Any:
        rolled = ks.roll.bind(self.value, shift=(self.shift,), axis=(self.axis,))
        return Negated(rolled) if self.negated else rolled

    def added_to(self, total: Any, owned: bool) -> Any:
        # into total's buffer where it is the pass's own (under lf.jit too: the trace's value;
        # the program records a roll and an add, engine/compiler/level.py)
        return ks.add_rolled.bind(total, self.value, shift=self.shift, axis=self.axis, negate=self.negated,
                                  inplace=owned)


def _rolled_back(node, cotangent):
    """The cotangent a roll along one axis hands its argument, as a :class:`Rolled`; None
    where the pass computes it as before: a roll of several axes or of the flattened
    array, or a complex value.  (Under lf.jit the sum is computed in one pass while tracing
    and recorded as the roll and the add, which the passes fold.)"""
    shift, axis = node.params["shift"], node.params["axis"]
    if axis is None or isinstance(axis, int) or len(axis) != 1:
        return None
    shift = shift if isinstance(shift, int) else shift[0] if len(shift) == 1 else None
    negated = type(cotangent) is Negated
    value = cotangent.value if negated else cotangent
    if shift is None or dtype_kind(getattr(value, "dtype", "f")) != "f":
        return None
    if tuple(getattr(value, "shape", ())) != tuple(getattr(node.out, "shape", ())):
        return None
    return Rolled(value, -shift, axis[0], negated)


def _accumulate(cotangents, owned, node, cotangent):
    key = id(node)
    if type(node) is CallNode:  # (index, cotangent) of one output, from its OutputNode
        index, cotangent = cotangent
        if type(cotangent) is Rolled:
            cotangent = cotangent.computed()
        parts = cotangents.setdefault(key, [None] * len(node.outs))
        parts[index] = _sum(parts[index], _fit(cotangent, node.outs[index]))
        return
    previous = cotangents.get(key)
    if type(cotangent) is Rolled or type(previous) is Rolled:
        if previous is None:
            cotangents[key] = cotangent
            owned.discard(key)
            return
        if type(cotangent) is Rolled and _plain(previous, node):  # previous + roll(g)
            cotangents[key] = cotangent.added_to(previous, key in owned)
            owned.add(key)
            return
        if type(previous) is Rolled and _plain(cotangent, node):  # roll(g) + c: into c, not ours
            cotangents[key] = previous.added_to(cotangent, False)
            owned.add(key)
            return
        if type(previous) is Rolled:  # the other cases as before: the roll computed
            cotangents[key] = previous = previous.computed()
        if type(cotangent) is Rolled:
            cotangent = cotangent.computed()
    negated = type(cotangent) is Negated
    cotangent = _fit(cotangent.value if negated else cotangent, node.out)
    if previous is None:
        cotangents[key] = Negated(cotangent) if negated else cotangent
        owned.discard(key)
        return
    # a value used several times: its cotangents are summed in one array of this pass's own
    if type(previous) is Negated:
        if negated:  # (-a) + (-b) is (-a) - b; -(a + b) would differ in the sign of a zero
            cotangents[key] = ew.subtract_from_temporary(ew.negative.bind(previous.value), cotangent, True)
        else:  # (-a) + c is c - a
            cotangents[key] = ew.subtract.bind(cotangent, previous.value)
    elif negated:  # a + (-b) is a - b
        cotangents[key] = ew.subtract_from_temporary(previous, cotangent, key in owned)
    else:
        cotangents[key] = ew.add_to_temporary(previous, cotangent, key in owned)
    owned.add(key)


def _plain(cotangent, node):
    """Whether ``cotangent`` is an array that a rolled one adds to as it is: not negated,
    real and of the value's own shape (``_fit`` would leave it alone)."""
    return (type(cotangent) is not Negated and type(cotangent) is not Rolled
            and dtype_kind(getattr(cotangent, "dtype", "f")) == "f"
            and tuple(getattr(cotangent, "shape", ())) == tuple(getattr(node.out, "shape", ())))


def _fit(cotangent, out):
    """``cotangent`` as the cotangent of ``out``: its real part for a real ``out``, broadcast
    to its shape (both move elements only: they commute with a negation)."""
    if _complex(cotangent) and not _complex(out):
        # a real value's cotangent is real: Re of what a complex-valued use sends back
        # (kernels/elementwise.py states the convention)
        cotangent = ew.real.bind(cotangent)
    shape = tuple(getattr(out, "shape", ()))
    if tuple(getattr(cotangent, "shape", ())) != shape:
        cotangent = kcore.broadcast_to.bind(cotangent, shape=shape)
    return cotangent


def _sum(previous, cotangent):
    return cotangent if previous is None else ew.add.bind(previous, cotangent)


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
