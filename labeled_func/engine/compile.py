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

import numpy as np

from labeled_func_kernels import core as kcore
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels.primitive import Traced

try:  # the field's fused-expression evaluator: without it, programs run unfused
    import numexpr
except ImportError:  # pragma: no cover - a dependency
    numexpr = None

from .errors import UnsupportedOperationError
from .stack import Level
from .tracer import PrimalTracer, Wording, unknown_value_policy
from .views import VIEW_PRIMITIVES, assign_value, make_view, refresh_view

__all__ = ["JitLevel", "JitTracer", "Program", "JIT_WORDS", "FUSE_MIN_SIZE", "cuda_source"]

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
    __slots__ = ("program", "_slots", "_seen")

    def __init__(self):
        super().__init__()
        self.program = Program()
        self._slots = 0
        self._seen = {}  # (callable, params, refs) -> slot: common subexpressions

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
        for arg in args:
            if type(arg) is JitTracer and arg._level is self:
                if arg._view is not None:
                    refresh_view(arg)
                values.append(arg._value)
                refs.append(arg._slot)
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
