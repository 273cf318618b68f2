"""The compiler level: record the primitives a function applies, replay them later.

``lf.jit`` runs a function once under a :class:`JitLevel`, the outermost level, with
its inputs wrapped in :class:`JitTracer` s.  Every primitive that reaches the level (the
batched and differentiated computation that the transforms inside produce) runs on the
real values and is recorded in a :class:`Program`: a flat list of nodes, each a
callable with its parameters, reading input slots, earlier nodes' outputs and
constants.  Later calls with the same signature run ``Program.run`` on new arrays: one
Python loop over pre-bound callables, no call of the function, no xarray.

Inside, a traced value stands for the values of every later call: nothing may be
decided from it (Python ``if``, ``float()``, a shape from the data, a kernel chosen by
peeking at it) — the level is ``abstract``, and the policy errors say so.  Random
draws are program nodes (``source``), drawn anew at each run.

Simplifications at record time: primitives of constants only run once (constant
folding, by construction: they never reach the level), a node identical to an earlier
one (same callable, parameters and inputs) reuses its output (common subexpression
elimination), and ``Program.prune`` drops the nodes no output needs (dead code).
Then ``Program.fuse`` turns each tree of float64 elementwise nodes (intermediates read
once) into one kernel: on NumPy arrays (of ``FUSE_MIN_SIZE`` elements at least) one
``numexpr`` evaluation, on CuPy arrays one ``cupy.ElementwiseKernel`` (the expression in
CUDA C, compiled by CuPy once per expression): one pass over memory instead of one per
operation, and on the GPU one kernel launch.
"""
from __future__ import annotations

import math
import threading
from contextlib import contextmanager

import numpy as np

from labeled_func_kernels import core as kcore
from labeled_func_kernels import creation as kc
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels.primitive import Traced
from labeled_func_kernels.reductions import reduce_any

try:  # the field's fused-expression evaluator: without it, programs run unfused
    import numexpr
except ImportError:  # pragma: no cover - a dependency
    numexpr = None

from .batching import BatchTracer
from .errors import UnsupportedOperationError
from .forward import JVPTracer
from .reverse import VJPTracer
from .stack import Level
from .tracer import PrimalTracer, Wording, unknown_value_policy
from .views import VIEW_PRIMITIVES, assign_value, make_view, refresh_view

__all__ = ["JitLevel", "JitTracer", "Program", "JIT_WORDS", "FUSE_MIN_SIZE", "cuda_source", "recording_of",
           "record_while_loop"]

FUSE_MIN_SIZE = 1 << 14
"""Elements of a result below which elementwise nodes are not fused (numexpr's ~1 us per
call outweighs the passes over memory it saves)."""

JIT_WORDS = Wording(
    transform="jit",
    setitem=("writing a traced value into a plain NumPy array ({store}{where}) inside lf.jit: the "
             "array would keep the value of the first call only. Build the buffer from a traced "
             "input, e.g. xr.zeros_like(x) / np.zeros_like(x.data), or use out-of-place ops."),
    bool=("bool() of a traced value (an `if`, `while`, `and`/`or` or assert on it) inside "
          "lf.jit: it stands for the value of every later call, so the path taken cannot be "
          "recorded once."),
    index=("indexing an array that lf.jit does not trace, or a dim with an index coordinate, with "
           "a traced index: NumPy and pandas need concrete indices there, and lf.jit records one "
           "program for the values of every later call."),
    item=("{what}() of a traced value (.item(), float(), int()) inside lf.jit: it stands for the "
          "value of every later call, so it has no single Python number."),
)


class JitLevel(Level):
    """One recording: the program grows as primitives reach the level."""

    name = "jit"
    abstract = True
    __slots__ = ("program", "_slots", "_seen", "_reads")

    def __init__(self):
        super().__init__()
        self.program = Program()
        self._slots = 0
        self._seen = {}  # (callable, params, refs) -> slot: common subexpressions
        self._reads = None  # while a loop's body is recorded: slot -> value of the traced values read

    # --- values -------------------------------------------------------------------------------
    def new_slot(self):
        self._slots += 1
        return self._slots - 1

    def input(self, value):
        """A traced input of the program."""
        tracer = JitTracer(self, value, self.new_slot())
        self.program.inputs.append(tracer._slot)
        return tracer

    def source(self, draw, value):
        """A value computed afresh at every run by ``draw()`` (random draws); ``value`` is
        this run's."""
        slot = self.new_slot()
        self.program.nodes.append(Node(draw, {}, (), slot))
        return JitTracer(self, value, slot)

    def output_slot(self, value):
        """The slot of a traced output (a view first brought up to date)."""
        if type(value) is JitTracer and value._level is self:
            if value._view is not None:
                refresh_view(value)
            return value._slot
        return None

    # --- primitives ----------------------------------------------------------------------------
    def read(self, args):
        """The values of ``args`` in this run, and what a node reads for each: the slot of a
        value this level traces (a view first brought up to date), else a Constant."""
        values, refs = [], []
        reads = self._reads
        for arg in args:
            if type(arg) is JitTracer and arg._level is self:
                if arg._view is not None:
                    refresh_view(arg)
                values.append(arg._value)
                refs.append(arg._slot)
                if reads is not None:
                    reads[arg._slot] = arg._value
            else:
                values.append(arg)
                refs.append(Constant(arg))
        return values, refs

    def process(self, prim, args, params):
        values, refs = self.read(args)
        out = prim.impl(*values, **params)
        if isinstance(out, tuple):
            raise UnsupportedOperationError(f"{prim.name} returns several arrays: lf.jit cannot record it")
        key = _node_key(prim, params, refs)
        slot = self._seen.get(key) if key is not None else None
        if slot is None:
            slot = self.new_slot()
            node = Node(_lowered(prim, values, params), params, tuple(refs), slot, prim)
            node.fusable = _fusable(prim, params, values, out)
            self.program.nodes.append(node)
            if key is not None:
                self._seen[key] = slot
        result = JitTracer(self, out, slot)
        if prim in VIEW_PRIMITIVES and type(args[0]) is JitTracer and args[0]._level is self:
            result._view = make_view(prim, args, params, out)
        return result

    # --- calls run once per example -----------------------------------------------------------------
    def process_per_example(self, fun, arrays):
        """A call that must see concrete values (``np.vectorize``'s Python loop) is one
        opaque node: each run calls ``fun`` on that run's arrays, as NumPy would."""
        values, refs = self.read(arrays)
        if all(type(ref) is Constant for ref in refs):
            return fun(arrays)
        outs = fun(values)
        if any(isinstance(out, Traced) for out in outs):
            raise UnsupportedOperationError(
                "a function run element by element (np.vectorize) reads a value traced by lf.jit "
                "that is not one of its arguments: lf.jit would replay it with the first call's "
                "value. Pass that value as an argument of the vectorized function.")
        call = self.new_slot()
        self.program.nodes.append(Node(_per_example_call(fun), {}, tuple(refs), call))
        results = []
        for index, out in enumerate(outs):
            slot = self.new_slot()
            self.program.nodes.append(Node(_item(index), {}, (call,), slot))
            results.append(JitTracer(self, out, slot))
        return results

    # --- in place ---------------------------------------------------------------------------------
    def assign(self, dest, src, operation):
        assign_value(self, dest, src)

    # --- loops whose condition is traced ----------------------------------------------------------
    def while_loop(self, cond, body, init):
        """One loop node: ``state = body(state)`` while ``cond(state)``, at every run (see
        :func:`record_while_loop`)."""
        return record_while_loop(self, cond, body, init)

    def set_value(self, dest, src):
        """Rebind ``dest`` to the value (and slot) of ``src``."""
        shape = tuple(dest.shape)
        if tuple(getattr(src, "shape", ())) != shape:
            src = kcore.broadcast_to.bind(src, shape=shape)
        if type(src) is JitTracer and src._level is self:
            dest._value, dest._slot = src._value, src._slot
        else:  # a constant written over a traced buffer: a constant of the program
            slot = self.new_slot()
            self.program.nodes.append(Node(_identity, {}, (Constant(src),), slot))
            dest._value, dest._slot = src, slot


def _lowered(prim, values, params):
    """What a node calls: the library function itself where the primitive's impl only picks
    it from the arguments' namespace (``np.sin``), else the impl."""
    lower = getattr(prim.impl, "lower", None)
    if lower is not None and not params:
        function = lower(*values)
        if function is not None:
            return function
    return prim.impl


def _identity(value):
    return value


def _per_example_call(fun):
    def call(*values):
        return fun(list(values))
    return call


def _item(index):
    def item(values):
        return values[index]
    return item


def _node_key(prim, params, refs):
    """A hashable key of a node for common subexpression elimination, or None when a
    parameter or a constant input cannot be compared cheaply (arrays are compared by
    identity)."""
    try:
        constants = tuple(ref if type(ref) is int else ("c", id(ref.value) if hasattr(ref.value, "shape")
                                                        else ref.value) for ref in refs)
        key = (prim, tuple(sorted(params.items())), constants)
        hash(key)
        return key
    except TypeError:
        return None


class JitTracer(PrimalTracer):
    """A value recorded by a :class:`JitLevel`: this run's value and its slot."""

    __slots__ = ("_slot",)

    def __init__(self, level, value, slot):
        self._level = level
        self._value = value
        self._slot = slot
        self._view = None
        self._cell = None

    def _concrete(self, what):
        return unknown_value_policy(self, what, JIT_WORDS)

    def __repr__(self):
        return f"JitTracer(slot {self._slot}, shape={self.shape}, dtype={self.dtype})"


# --- the program -------------------------------------------------------------------------------------
class Constant:
    """A value the program reads as it was when recorded."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class Node:
    """``function(*inputs, **params)`` into ``slot``; ``refs`` are slots or Constants.
    ``fusable``: None, or the dtypes of the inputs when the node may join a fused
    expression (see :func:`_fusable`)."""

    __slots__ = ("function", "params", "refs", "slot", "prim", "fusable")

    def __init__(self, function, params, refs, slot, prim=None):
        self.function = function
        self.params = params
        self.refs = refs
        self.slot = slot
        self.prim = prim
        self.fusable = None


class Program:
    """Input slots, nodes in order, output slots; ``run(arrays)`` replays it."""

    def __init__(self):
        self.inputs = []
        self.nodes = []
        self.outputs = []
        self._plan = None
        self._lock = threading.Lock()

    def prune(self):
        """Drop the nodes that no output reads (dead code), then lay the program out for
        runs: the values in one list (inputs, constants, then each node's output), each
        node a pre-bound callable with the positions it reads, and the positions whose last
        reader it is (freed as soon as it has run: a run holds only the live arrays)."""
        needed = set(self.outputs)
        kept = []
        for node in reversed(self.nodes):
            if node.slot in needed:
                kept.append(node)
                needed.update(ref for ref in node.refs if type(ref) is int)
        self.nodes = kept[::-1]
        self.fuse()
        position = {slot: k for k, slot in enumerate(self.inputs)}
        constants = []
        for node in self.nodes:
            for ref in node.refs:
                if type(ref) is not int:
                    position[ref] = len(self.inputs) + len(constants)
                    constants.append(ref.value)
        for node in self.nodes:
            position[node.slot] = len(position)
        last_reader = {}
        for index, node in enumerate(self.nodes):
            for ref in node.refs:
                if type(ref) is int:
                    last_reader[ref] = index
        outputs = set(self.outputs)
        frees = [[] for _ in self.nodes]
        for slot, index in last_reader.items():
            if slot not in outputs:
                frees[index].append(position[slot])
        self._constants = constants
        self._size = len(position)
        self._outputs = [position[slot] for slot in self.outputs]
        self._plan = [(_bound(node), tuple(position[ref] for ref in node.refs), position[node.slot], tuple(free))
                      for node, free in zip(self.nodes, frees)]
        return self

    def run(self, arrays):
        """The outputs for new input ``arrays`` (in the order of the inputs)."""
        env = [*arrays, *self._constants]
        env.extend([None] * (self._size - len(env)))
        for function, reads, slot, frees in self._plan:
            if len(reads) == 1:
                env[slot] = function(env[reads[0]])
            elif len(reads) == 2:
                env[slot] = function(env[reads[0]], env[reads[1]])
            else:
                env[slot] = function(*[env[r] for r in reads])
            for dead in frees:
                env[dead] = None
        return [env[k] for k in self._outputs]

    def fuse(self):
        """Each tree of fusable nodes whose intermediates are read once (and are no output)
        becomes one numexpr evaluation (NumPy) or one ElementwiseKernel (CuPy) at the place
        of its root."""
        readers = {}
        for node in self.nodes:
            for ref in node.refs:
                if type(ref) is int:
                    readers[ref] = readers.get(ref, 0) + 1
        outputs = set(self.outputs)
        trees = {}  # slot of a fusable node -> (expression, leaves, leaf dtypes, nodes in it)
        absorbed = set()
        for node in self.nodes:
            if node.fusable is None:
                continue
            library = node.fusable.library
            if library == "numpy" and numexpr is None:
                continue
            table = _EXPRESSIONS if library == "numpy" else _CUDA_EXPRESSIONS
            pieces, leaves, dtypes, size = [], [], [], 1
            for ref, dtype in zip(node.refs, node.fusable.dtypes):
                inner = trees.get(ref) if type(ref) is int else None
                if (inner is not None and readers.get(ref) == 1 and ref not in outputs
                        and len(leaves) + len(inner[1]) + len(node.refs) <= _MAX_LEAVES):
                    absorbed.add(ref)
                    pieces.append(_rename(inner[0], leaves, dtypes, inner[1], inner[2]))
                    size += inner[3]
                else:
                    pieces.append(_leaf_name(ref, dtype, leaves, dtypes))
            trees[node.slot] = (table[node.prim].format(*pieces), leaves, dtypes, size)
        fused = []
        for node in self.nodes:
            if node.slot in absorbed:
                continue
            tree = trees.get(node.slot)
            if tree is not None and tree[3] > 1:
                expression, leaves, dtypes, _ = tree
                names = [f"v{k}" for k in range(len(leaves))]
                if node.fusable.library == "numpy":
                    evaluate = numexpr.NumExpr(_named(expression, names), signature=list(zip(names, dtypes)))
                else:
                    evaluate = cuda_kernel(_named(expression, names), names, dtypes, node.fusable.out)
                node = Node(evaluate, {}, tuple(leaves), node.slot)
            fused.append(node)
        self.nodes = fused
        return self

    def __len__(self):
        return len(self.nodes)


_EXPRESSIONS = {
    ew.add: "({} + {})", ew.subtract: "({} - {})", ew.multiply: "({} * {})", ew.divide: "({} / {})",
    ew.negative: "(-{})", ew.sqrt: "sqrt({})", ew.exp: "exp({})", ew.expm1: "expm1({})", ew.log: "log({})",
    ew.log1p: "log1p({})", ew.sin: "sin({})", ew.cos: "cos({})", ew.tan: "tan({})", ew.asin: "arcsin({})",
    ew.acos: "arccos({})", ew.atan: "arctan({})", ew.sinh: "sinh({})", ew.cosh: "cosh({})",
    ew.tanh: "tanh({})", ew.asinh: "arcsinh({})", ew.acosh: "arccosh({})", ew.atanh: "arctanh({})",
    ew.atan2: "arctan2({}, {})", ew.absolute: "abs({})", ew.where: "where({}, {}, {})",
    ew.equal: "({} == {})", ew.not_equal: "({} != {})", ew.less: "({} < {})", ew.less_equal: "({} <= {})",
    ew.greater: "({} > {})", ew.greater_equal: "({} >= {})", ew.logical_and: "({} & {})",
    ew.logical_or: "({} | {})", ew.logical_not: "(~{})",
    # the mask costs nothing once fused; d - d is 0 exactly where d is finite
    ew.safe_multiply: "where(({0} == 0) & (({1} - {1}) != 0), 0, {0} * {1})",
}
# The same primitives in CUDA C, for CuPy's ElementwiseKernel (float64 and bool operands; a
# comparison of doubles is a bool, a bool in arithmetic is 0 or 1 as in NumPy).
_CUDA_EXPRESSIONS = {
    ew.add: "({} + {})", ew.subtract: "({} - {})", ew.multiply: "({} * {})", ew.divide: "({} / {})",
    ew.negative: "(-{})", ew.sqrt: "sqrt({})", ew.exp: "exp({})", ew.expm1: "expm1({})", ew.log: "log({})",
    ew.log1p: "log1p({})", ew.sin: "sin({})", ew.cos: "cos({})", ew.tan: "tan({})", ew.asin: "asin({})",
    ew.acos: "acos({})", ew.atan: "atan({})", ew.sinh: "sinh({})", ew.cosh: "cosh({})",
    ew.tanh: "tanh({})", ew.asinh: "asinh({})", ew.acosh: "acosh({})", ew.atanh: "atanh({})",
    ew.atan2: "atan2({}, {})", ew.absolute: "fabs({})", ew.where: "({} ? {} : {})",
    ew.equal: "({} == {})", ew.not_equal: "({} != {})", ew.less: "({} < {})", ew.less_equal: "({} <= {})",
    ew.greater: "({} > {})", ew.greater_equal: "({} >= {})", ew.logical_and: "({} && {})",
    ew.logical_or: "({} || {})", ew.logical_not: "(!{})",
    ew.safe_multiply: "((({0}) == 0 && !isfinite((double)({1}))) ? 0.0 : ({0}) * ({1}))",
}
_FLOAT, _BOOL = np.dtype(np.float64), np.dtype(np.bool_)
_MAX_LEAVES = 24  # numexpr takes at most 32 operands (its output and temporaries count too)


class Fusable:
    """What a node brings to a fused expression: its library ("numpy" or "cupy"), the dtypes
    of its inputs and the dtype of its output."""

    __slots__ = ("library", "dtypes", "out")

    def __init__(self, library, dtypes, out):
        self.library, self.dtypes, self.out = library, dtypes, out


def _array_library(value):
    """"numpy" or "cupy" for their arrays of float64 or bool, else None (no import of CuPy)."""
    kind = type(value)
    if kind is np.ndarray:
        library = "numpy"
    elif kind.__name__ == "ndarray" and kind.__module__.partition(".")[0] == "cupy":
        library = "cupy"
    else:
        return None
    return library if value.dtype in (_FLOAT, _BOOL) else None


def _fusable(prim, params, values, out):
    """A :class:`Fusable` when ``prim`` may join a fused expression: a primitive numexpr and
    CUDA C compute as NumPy does, no parameters, float64 (or boolean) arrays of one library
    and Python numbers in, a float64 or boolean array out (on NumPy of at least
    ``FUSE_MIN_SIZE`` elements: on the GPU fewer launches pay at any size); else None."""
    if prim not in _EXPRESSIONS or params:
        return None
    library = _array_library(out)
    if library is None or (library == "numpy" and math.prod(out.shape) < FUSE_MIN_SIZE):
        return None
    dtypes = []
    for value in values:
        if type(value) is float or type(value) is int:
            dtypes.append(_FLOAT)
        elif type(value) is bool:
            dtypes.append(_BOOL)
        elif _array_library(value) == library:
            dtypes.append(value.dtype)
        else:
            return None
    return Fusable(library, tuple(dtypes), out.dtype)


def cuda_source(expression, names, dtypes, out):
    """The parameters and the operation of the CuPy ElementwiseKernel computing ``expression``
    of inputs ``names`` (of ``dtypes``) into ``out`` (of dtype ``out``)."""
    def ctype(dtype):
        return "bool" if dtype is bool or np.dtype(dtype) == _BOOL else "float64"

    params = ", ".join(f"{ctype(dtype)} {name}" for name, dtype in zip(names, dtypes))
    return params, f"{ctype(out)} out", f"out = {expression}"


def cuda_kernel(expression, names, dtypes, out):
    """The fused expression as a CuPy ElementwiseKernel (CuPy compiles and caches it)."""
    import cupy

    in_params, out_params, operation = cuda_source(expression, names, dtypes, out)
    return cupy.ElementwiseKernel(in_params, out_params, operation, "lf_fused")


def _leaf_name(ref, dtype, leaves, dtypes):
    """The placeholder of input ``ref`` in an expression (one per distinct input)."""
    for k, known in enumerate(leaves):
        if known is ref or (type(ref) is int and known == ref):
            return "{%d}" % k
    leaves.append(ref)
    dtypes.append(dtype.type if dtype.kind != "b" else bool)
    return "{%d}" % (len(leaves) - 1)


def _rename(expression, leaves, dtypes, inner_leaves, inner_dtypes):
    """An inner tree's expression with its placeholders renumbered among ``leaves``."""
    names = [_leaf_name(ref, np.dtype(dtype), leaves, dtypes) for ref, dtype in zip(inner_leaves, inner_dtypes)]
    return expression.format(*names)


def _named(expression, names):
    return expression.format(*names)


def _bound(node):
    if not node.params:
        return node.function
    function, params = node.function, node.params
    return lambda *args: function(*args, **params)



# --- loops whose condition is traced (lf.while_loop) ---------------------------------------------------
# A loop whose condition the recording traces is one node of the program.  It holds two programs,
# recorded from the loop's condition and body run on fresh traced values of the level (the loop's
# state), and each run loops ``while cond(state): state = body(state)`` on that run's arrays: the
# number of iterations follows the data of each run.  Values of the recording that the condition or
# the body read (closed over) are inputs of the node, read at each run.
#
# The state reaches the level as towers: the values the transforms inside jit trace (vmap's
# BatchTracer, jvp's JVPTracer) around the arrays this level records.  A tower's spec is its
# structure above the level; the loop takes the towers apart into their arrays at this level and
# builds the same towers around the fresh ones.  When the body returns a tower of a wider spec than
# the state's (a value the body makes mapped, or gives a tangent), the state is widened (broadcast
# along the batch axis, zero tangents) and the loop recorded again, until the spec is the same after
# an iteration as before.

_ARRAY = "array"  # the spec of an array at the recording's level

LOOP_GRAD = (
    "lf.while_loop under lf.jit: reverse-mode differentiation (lf.grad, lf.vjp, lf.jacrev, lf.hessian) "
    "through a loop whose number of iterations depends on traced values is not supported (its backward "
    "pass would need the values of every iteration of every later call). Loop a fixed number of times "
    "instead (lf.scan, or `for _ in range(n)` with lf.cond / xr.where selecting when to stop), "
    "differentiate in forward mode (lf.jvp, lf.jacfwd), or call lf.grad outside lf.jit."
)


def recording_of(value):
    """The abstract level (lf.jit's recording) under ``value``, or None."""
    while isinstance(value, Traced):
        if value._level.abstract:
            return value._level
        value = value._value
    return None


def record_while_loop(level, cond, body, init):
    """The loop ``while cond(state): state = body(state)`` as one node of ``level``'s program.

    ``init``: the state, a list of values (arrays traced by the levels above ``level``, or
    not traced).  ``cond(state)``: a boolean, 0-d for each example of the vmap levels above
    (the node loops while any example's is true).  ``body(fresh)``: the next state, a list
    of values of the shapes and dtypes of ``init``; ``fresh()`` returns the state, new
    tracers each time (an in-place update of one does not reach the others).  Returns the
    final state, traced by ``level``.
    """
    specs = [_spec(value, level, []) for value in init]
    while True:  # each round widens a spec: as many rounds as levels per array, at most
        done, outcome = _record_loop(level, cond, body, init, specs)
        if done:
            return outcome
        init = [_widened(value, spec) for value, spec in zip(init, outcome)]
        specs = [_spec(value, level, []) for value in init]
        if specs != outcome:  # pragma: no cover - a tower _widened cannot build
            raise UnsupportedOperationError(
                "lf.while_loop under lf.jit: the loop value changes from one iteration to the next in a way "
                "lf.jit cannot record (it becomes mapped by a vmap or differentiated by a jvp that its start "
                "is not). Start the loop from a value of the kind the body returns.")


def _record_loop(level, cond, body, init, specs):
    """(True, final state), or (False, wider specs) when the body widens the state."""
    arrays = []
    for value in init:
        _spec(value, level, arrays)
    values, refs = level.read(arrays)
    values = [value if hasattr(value, "shape") else np.asarray(value) for value in values]
    slots = [level.new_slot() for _ in values]

    def fresh():
        tracers = iter([JitTracer(level, value, slot) for value, slot in zip(values, slots)])
        return [_build(spec, tracers) for spec in specs]

    reads = {}
    with _recording(level, reads) as cond_program:
        cond_program.outputs = [_any_true(level, cond(fresh()))]
    with _recording(level, reads) as body_program:
        outs = list(body(fresh))
        if len(outs) != len(specs):
            raise ValueError(f"lf.while_loop: the body returns {len(outs)} arrays for a state of {len(specs)}")
        out_specs = [_spec(out, level, []) for out in outs]
        wider = [_join(spec, out) for spec, out in zip(specs, out_specs)]
        if wider != specs:
            return False, wider
        out_arrays = []
        for out, spec in zip(outs, specs):
            _spec(_widened(out, spec), level, out_arrays)
        body_program.outputs = [_output_slot(level, out, value, reads) for out, value in zip(out_arrays, values)]
    bound = set(slots)
    free = []
    for program in (cond_program, body_program):
        produced = bound | {node.slot for node in program.nodes}
        for slot in [ref for node in program.nodes for ref in node.refs] + program.outputs:
            if type(slot) is int and slot not in produced and slot not in free:
                free.append(slot)
    for program in (cond_program, body_program):
        program.inputs = slots + free
        program.prune()
    loop = WhileLoop(cond_program, body_program, len(slots))
    call = level.new_slot()
    level.program.nodes.append(Node(loop, {}, tuple(refs) + tuple(free), call))
    if level._reads is not None:  # a loop inside a loop's body: what it reads, the outer one reads
        level._reads.update((slot, reads[slot]) for slot in free)
    finals = loop(*values, *[reads[slot] for slot in free])
    results = []
    for index, final in enumerate(finals):
        slot = level.new_slot()
        level.program.nodes.append(Node(_item(index), {}, (call,), slot))
        results.append(JitTracer(level, final, slot))
    results = iter(results)
    return True, [_build(spec, results) for spec in specs]


class WhileLoop:
    """A loop node's function: the state (``count`` arrays), then the values read inside,
    in; the final state out."""

    __slots__ = ("cond", "body", "count")

    def __init__(self, cond, body, count):
        self.cond, self.body, self.count = cond, body, count

    def __call__(self, *values):
        state, read = list(values[:self.count]), list(values[self.count:])
        cond, body = self.cond, self.body
        while bool(cond.run(state + read)[0]):
            state = body.run(state + read)
        return state

    def __repr__(self):
        return f"<lf.while_loop: condition of {len(self.cond)} nodes, body of {len(self.body)}>"


@contextmanager
def _recording(level, reads):
    """Within: ``level`` records into a new program (yielded), with its own common
    subexpressions, noting in ``reads`` the values of the slots it reads."""
    program = Program()
    saved = level.program, level._seen, level._reads
    level.program, level._seen, level._reads = program, {}, reads
    try:
        yield program
    finally:
        level.program, level._seen, level._reads = saved


def _any_true(level, pred):
    """The slot of "any example of ``pred`` is true" (``pred`` a boolean tower, 0-d per example)."""
    while type(pred) in (BatchTracer, JVPTracer, VJPTracer):
        pred = pred._value
    if type(pred) is JitTracer and pred._level is level:
        if pred.ndim:  # one per example of the vmap levels: all of them
            pred = level.process(reduce_any, [pred], {"axis": tuple(range(pred.ndim)), "keepdims": False})
        slot = level.output_slot(pred)
        level._reads.setdefault(slot, pred._value)  # a value of the recording the loop reads
        return slot
    slot = level.new_slot()  # a condition that does not depend on the state
    level.program.nodes.append(Node(_identity, {}, (Constant(np.any(np.asarray(pred))),), slot))
    return slot


def _output_slot(level, out, value, reads):
    """The slot of a body's output array ``out`` (of the state array ``value``'s shape and dtype)."""
    shape = tuple(getattr(out, "shape", ()))
    dtype = np.dtype(getattr(out.dtype, "_np_dtype", out.dtype)) if hasattr(out, "dtype") else None
    expected = np.dtype(getattr(value.dtype, "_np_dtype", value.dtype))
    if dtype is None:  # a Python number
        out, dtype = np.asarray(out, dtype=expected), expected
    if shape != tuple(value.shape) or dtype != expected:
        raise TypeError(f"lf.while_loop: the body returns an array of shape {shape} and dtype {dtype} for a "
                        f"loop value of shape {tuple(value.shape)} and dtype {expected}; under lf.jit each "
                        "iteration must keep the shapes and dtypes of the loop value")
    if type(out) is JitTracer and out._level is level:
        slot = level.output_slot(out)
        reads.setdefault(slot, out._value)
        return slot
    slot = level.new_slot()  # a constant: the same at every iteration
    level.program.nodes.append(Node(_identity, {}, (Constant(out),), slot))
    return slot


def _spec(value, level, arrays):
    """The structure of the tower ``value`` above ``level``; its arrays at ``level`` are
    appended to ``arrays`` (primal before tangent)."""
    kind = type(value)
    if kind is BatchTracer:
        return ("batch", value._level, _spec(value._value, level, arrays))
    if kind is JVPTracer:
        if value._view is not None:
            refresh_view(value)
        primal = _spec(value._value, level, arrays)
        tangent = None if value._tangent is None else _spec(value._tangent, level, arrays)
        return ("jvp", value._level, primal, tangent)
    if kind is VJPTracer:
        raise UnsupportedOperationError(LOOP_GRAD)
    if isinstance(value, Traced) and value._level is not level:  # pragma: no cover - no other level traces
        raise UnsupportedOperationError(f"lf.while_loop under lf.jit: its state is traced by lf.{value._level.name}, "
                                        "which lf.jit cannot record a loop of")
    arrays.append(value)
    return _ARRAY


def _build(spec, arrays):
    """The tower of ``spec`` around the next arrays of the iterator ``arrays``."""
    if spec is _ARRAY:
        return next(arrays)
    if spec[0] == "batch":
        return BatchTracer(spec[1], _build(spec[2], arrays))
    primal = _build(spec[2], arrays)
    return JVPTracer(spec[1], primal, None if spec[3] is None else _build(spec[3], arrays))


def _top(spec):
    return None if spec is _ARRAY else spec[1]


def _join(a, b):
    """The narrowest spec that both specs widen to: mapped where either is mapped, with a
    tangent where either has one."""
    if a == b:
        return a
    top_a, top_b = _top(a), _top(b)
    if top_a is not None and (top_b is None or top_a.depth > top_b.depth):
        return _with_top(a, b)
    if top_b is not None and (top_a is None or top_b.depth > top_a.depth):
        return _with_top(b, a)
    if a[0] == "batch":
        return ("batch", top_a, _join(a[2], b[2]))
    tangent = b[3] if a[3] is None else a[3] if b[3] is None else _join(a[3], b[3])
    return ("jvp", top_a, _join(a[2], b[2]), tangent)


def _with_top(a, b):
    """``a``'s top level (which ``b`` lacks) over the join of the rest."""
    if a[0] == "batch":
        return ("batch", a[1], _join(a[2], b))
    return ("jvp", a[1], _join(a[2], b), a[3])


def _widened(value, spec):
    """``value`` as a tower of ``spec`` (which it widens to): broadcast along the batch axes
    it lacks, zero tangents where it has none."""
    top = _top(spec)
    while type(value) is JVPTracer and value._level is not top and value._tangent is None and (
            top is None or value._level.depth > top.depth):
        value = value._value  # a level that carries no tangent for it
    if spec is _ARRAY:
        return value
    if spec[0] == "batch":
        if type(value) is BatchTracer and value._level is top:
            return BatchTracer(top, _widened(value._value, spec[2]))
        return BatchTracer(top, _widened(kcore.broadcast_batch(value, top.axis_size), spec[2]))
    if type(value) is JVPTracer and value._level is top:
        if value._view is not None:
            refresh_view(value)
        primal, tangent = value._value, value._tangent
    else:
        primal, tangent = value, None
    primal = _widened(primal, spec[2])
    if spec[3] is not None:
        tangent = _widened(kc.zeros_like.bind(primal) if tangent is None else tangent, spec[3])
    return JVPTracer(top, primal, tangent)
