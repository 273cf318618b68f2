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

import functools
import math
import string
import struct
import sys
import threading
from contextlib import contextmanager

import numpy as np

from labeled_func_kernels import core as kcore
from labeled_func_kernels import creation as kc
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import shape as kshape
from labeled_func_kernels.backend import reciprocal_power_of_two
from labeled_func_kernels.primitive import Traced
from labeled_func_kernels.reductions import reduce_any

try:  # the field's fused-expression evaluator: without it, programs run unfused
    import numexpr
    import numexpr.necompiler
    _NUMEXPR_TYPE = type(numexpr.NumExpr("a", signature=[("a", np.float64)]))
except ImportError:  # pragma: no cover - a dependency
    numexpr = _NUMEXPR_TYPE = None

from .batching import BatchTracer, compared_equal, equality_check
from .errors import UnsupportedOperationError
from .forward import JVPTracer
from .reverse import VJPTracer
from .stack import Level
from .replay import (Shifted, all_finite, rolled_evaluation, roll_into, safe_product, safe_product_checked,
                     spread_into, trailing_sum)
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
    __slots__ = ("program", "_slots", "_seen", "_reads", "_copied")

    def __init__(self):
        super().__init__()
        self.program = Program()
        self._slots = 0
        self._seen = {}  # (callable, params, refs) -> slot: common subexpressions
        self._reads = None  # while a loop's body is recorded: slot -> value of the traced values read
        self._copied = {}  # slot of a copy -> slot of the array it copies (the first of a chain)

    def same_values(self, a, b):
        """Whether ``a`` and ``b`` are one recorded array or copies of it (their values are
        equal at every run, whatever they are)."""
        if type(a) is not JitTracer or type(b) is not JitTracer or a._level is not self or b._level is not self:
            return a is b
        if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
            return False
        for tracer in (a, b):
            if tracer._view is not None:
                refresh_view(tracer)
        return self._copied.get(a._slot, a._slot) == self._copied.get(b._slot, b._slot)

    # --- values -------------------------------------------------------------------------------
    def new_slot(self):
        self._slots += 1
        return self._slots - 1

    def input(self, value):
        """A traced input of the program."""
        tracer = JitTracer(self, value, self.new_slot())
        self.program.inputs.append(tracer._slot)
        if type(value) is np.ndarray:
            self.program.layouts[tracer._slot] = (value.shape, value.dtype)
            self.program.strides[tracer._slot] = value.strides
        return tracer

    def source(self, draw, value):
        """A value computed afresh at every run by ``draw()`` (random draws); ``value`` is
        this run's.  The node is an effect: it runs at every run, in its place, even when
        nothing reads its value (a draw nobody uses still moves its generator)."""
        slot = self.new_slot()
        node = Node(draw, {}, (), slot)
        node.effect = True
        self.program.nodes.append(node)
        return JitTracer(self, value, slot)

    def settle(self, tracer, value):
        """The source that made ``tracer`` (of this recording's program) becomes the constant
        ``value``: a draw that every run makes the same (from a generator made anew, with the
        same seed, at every call)."""
        for index, node in enumerate(self.program.nodes):
            if node.slot == tracer._slot:
                self.program.nodes[index] = Node(_identity, {}, (Constant(value),), node.slot)
                return
        raise LookupError(f"no source of slot {tracer._slot} in the program")  # pragma: no cover

    def effect(self, function):
        """``function()`` called at every run, after the nodes recorded so far (its result unused)."""
        node = Node(function, {}, (), self.new_slot())
        node.effect = True
        self.program.nodes.append(node)

    @property
    def in_loop_body(self):
        """Whether the level records a loop's condition or body (run many times per call)."""
        return self._reads is not None

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
        if prim is ew.safe_multiply and type(refs[1]) is Constant and _finite_constant(refs[1].value):
            prim = ew.multiply  # the mask can never apply: a plain product, fusable
        if (prim.traced_constant and isinstance(values[0], (np.ndarray, np.generic))
                and all(type(r) is Constant for r in refs[1:])
                and (type(out) is not np.ndarray or out.flags.c_contiguous)):  # as made from a template
            return self._created(prim, values, params, out)
        key = _node_key(prim, params, refs)
        slot = self._seen.get(key) if key is not None else None
        if slot is None:
            slot = self.new_slot()
            lowered = _lowered(prim, values, params, out)
            node = Node(lowered, params if lowered is prim.impl else {}, tuple(refs), slot, prim)
            node.fusable = _fusable(prim, params, values, out)
            if type(out) is np.ndarray:
                node.out, node.strides = (out.shape, out.dtype), out.strides
            self.program.nodes.append(node)
            if key is not None:
                self._seen[key] = slot
        if prim is kcore.copy and type(refs[0]) is int:
            self._copied[slot] = self._copied.get(refs[0], refs[0])
        result = JitTracer(self, out, slot)
        if prim in VIEW_PRIMITIVES and type(args[0]) is JitTracer and args[0]._level is self:
            result._view = make_view(prim, args, params, out)
        return result

    def _created(self, prim, values, params, out):
        """``zeros_like(x)``, ``ones_like(x)``...: the shapes of a program are fixed, so the
        node reads nothing (``x`` is computed only if something else needs it)."""
        shape, dtype = values[0].shape, values[0].dtype
        key = (prim, tuple(sorted((name, _frozen(value)) for name, value in params.items())), shape, dtype,
               tuple(("c", id(v)) if hasattr(v, "shape") else v for v in values[1:]))
        try:
            slot = self._seen.get(key)
        except TypeError:
            key = slot = None
        if slot is None:
            slot = self.new_slot()
            template = np.broadcast_to(np.zeros((), dtype), shape)  # no memory: shape and dtype
            rest = values[1:]

            def create():
                return prim.impl(template, *rest, **params)
            create.writes_into = False  # reads nothing, returns a fresh array
            node = Node(create, {}, (), slot, prim)
            if type(out) is np.ndarray:
                node.out, node.strides = (out.shape, out.dtype), out.strides
            self.program.nodes.append(node)
            if key is not None:
                self._seen[key] = slot
        return JitTracer(self, out, slot)

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


def _finite_constant(value):
    """Whether a constant of the program is a real number or an array of finite ones."""
    if type(value) in (int, float, bool):
        return math.isfinite(value)
    if type(value) is np.ndarray or isinstance(value, np.generic):
        return value.dtype.kind in "biuf" and bool(np.isfinite(value).all())
    return False


# --- NumPy kernels of the replay that write into a given buffer ---------------------------------
def _numpy_lowering(prim, values, params, out):
    """A replay kernel for NumPy values where one is faster than the primitive's impl (or
    writes into a buffer), else None."""
    if not all(type(v) is np.ndarray or type(v) in (int, float) for v in values) or type(out) is not np.ndarray:
        return None
    if prim is ew.safe_multiply:
        return safe_product
    if prim is kshape.roll and set(params) == {"shift", "axis"}:
        shift, axis = params["shift"], params["axis"]
        if type(axis) is tuple and len(axis) == 1 and type(shift) is tuple and len(shift) == 1:
            shift, axis = shift[0], axis[0]
        if (type(axis) is int and type(shift) is int and values[0].shape == out.shape
                and values[0].flags.c_contiguous):  # np.roll's result then is C-ordered too
            return roll_into(shift, axis % out.ndim, out.shape, out.dtype)
    if (prim is kcore.reduce_sum and set(params) == {"axis", "keepdims"} and values[0].dtype == _FLOAT
            and values[0].size >= FUSE_MIN_SIZE):  # float64 only: einsum's float32 sums round otherwise
        axes, ndim = tuple(sorted(a % values[0].ndim for a in params["axis"])), values[0].ndim
        if axes and axes == tuple(range(ndim - len(axes), ndim)):
            return trailing_sum(axes, params["keepdims"], values[0].shape)
    return None


_SPREAD_MIN_READERS = 3  # spreading costs about one product: it pays from three readers on


def _lowered(prim, values, params, out=None):
    """What a node calls: the library function itself where the primitive's impl only picks
    it from the arguments' namespace (``np.sin``), a replay kernel of this module for NumPy
    values where one exists, else the impl."""
    function = _numpy_lowering(prim, values, params, out)
    if function is not None:
        return function
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
                                                        else _frozen(ref.value)) for ref in refs)
        key = (prim, tuple(sorted((name, _frozen(value)) for name, value in params.items())), constants)
        hash(key)
        return key
    except TypeError:
        return None


def _frozen(value):
    """A parameter or a constant as a hashable key that tells apart what the kernels tell
    apart: slices (unhashable before Python 3.12) and the tuples holding them spelled out,
    numbers by their type and bits (``1`` and ``1.0`` promote differently, ``0.0`` and
    ``-0.0`` are different zeros)."""
    kind = type(value)
    if kind is slice:
        return ("slice", _frozen(value.start), _frozen(value.stop), _frozen(value.step))
    if kind is tuple:
        return tuple(_frozen(item) for item in value)
    if kind is float:
        return kind, struct.pack("<d", value) if value == value else "nan"
    if kind is complex:
        return kind, _frozen(value.real), _frozen(value.imag)
    if isinstance(value, np.generic):
        return kind, value.tobytes()
    if kind in (int, bool):
        return kind, value
    return value


class JitTracer(PrimalTracer):
    """A value recorded by a :class:`JitLevel`: this run's value and its slot."""

    __slots__ = ("_slot",)

    def __init__(self, level, value, slot):
        self._level = level
        self._value = value
        self._shape = tuple(value.shape)
        self._slot = slot
        self._view = None
        self._cell = None

    def _concrete(self, what):
        if what == "bool" and self._level.alive:  # xarray asking whether two coordinates are equal
            check = equality_check(sys._getframe(2))
            if check is not None and compared_equal(check):
                return True
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

    __slots__ = ("function", "params", "refs", "slot", "prim", "fusable", "out", "strides", "effect")

    def __init__(self, function, params, refs, slot, prim=None):
        self.function = function
        self.params = params
        self.refs = refs
        self.slot = slot
        self.prim = prim
        self.fusable = None
        self.effect = False  # runs at every run even if no output needs it (a random draw)
        self.out = None  # (shape, dtype) of a NumPy result
        self.strides = None  # its strides when recorded (a call's layout is part of its signature)


class Program:
    """Input slots, nodes in order, output slots; ``run(arrays)`` replays it."""

    def __init__(self):
        self.inputs = []
        self.nodes = []
        self.outputs = []
        self.layouts = {}  # input slot -> (shape, dtype) of a NumPy input
        self.strides = {}  # input slot -> its strides
        self._plan = None
        self._lock = threading.Lock()
        self.keep_buffers = False  # keep a run's slabs for the next run (lf.jit(keep_buffers=True))
        self._kept = []

    def prune(self):
        """Drop the nodes that no output reads (dead code), then lay the program out for
        runs: the values in one list (inputs, constants, then each node's output), each
        node a pre-bound callable with the positions it reads, and the positions whose last
        reader it is (freed as soon as it has run: a run holds only the live arrays).

        Buffers: a node that writes a fresh NumPy array of ``POOL_MIN_BYTES`` or more through
        ``out=`` (ufuncs, fused expressions, safe products) takes it from the arrays that
        earlier nodes of the same run no longer need (same shape and dtype), when every
        reader of those arrays only reads them (no view of them can outlive their slot):
        a long program allocates a few buffers instead of one per operation, and large
        fresh allocations cost page faults."""
        self._drop_dead()
        self.drop_ones()
        self.simplify()
        self._drop_dead()
        self.fuse()
        self.contract()
        self.spread()
        self.fold_rolls()
        self.rematerialize()
        self.share_checks()
        position = {slot: k for k, slot in enumerate(self.inputs)}
        constants = []
        for node in self.nodes:
            for ref in node.refs:
                if type(ref) is not int and ref not in position:  # a constant that nodes share: once
                    position[ref] = len(self.inputs) + len(constants)
                    constants.append(ref.value)
        for node in self.nodes:
            position[node.slot] = len(position)
        last_reader, only_read = {}, {}
        for index, node in enumerate(self.nodes):
            reads_only = _reads_only(node)
            for ref in node.refs:
                if type(ref) is int:
                    last_reader[ref] = index
                    only_read[ref] = only_read.get(ref, True) and reads_only
        outputs = set(self.outputs)
        pooled = {node.slot: _writes_into(node) for node in self.nodes}
        frees = [[] for _ in self.nodes]
        recycles = [[] for _ in self.nodes]
        for index, node in enumerate(self.nodes):
            if node.effect and node.slot not in last_reader and node.slot not in outputs:
                frees[index].append(position[node.slot])  # an effect's value nobody reads
        for slot, index in last_reader.items():
            if slot in outputs:
                continue
            if pooled.get(slot) is not None and only_read[slot]:
                recycles[index].append((position[slot], pooled[slot]))
            else:
                frees[index].append(position[slot])
        self._constants = constants
        self._size = len(position)
        self._outputs = [position[slot] for slot in self.outputs]
        self._plan = []
        for node, free, recycle in zip(self.nodes, frees, recycles):
            function, reads = _bound(node), tuple(position[ref] for ref in node.refs)
            key, into = pooled[node.slot], None
            if key is not None and type(function) is np.ufunc:
                # an input of the result's shape read last here: the ufunc writes over it
                for entry in recycle:
                    if entry[1] == key:
                        into = entry[0]
                        recycle = [other for other in recycle if other is not entry]
                        break
            self._plan.append((function, reads, position[node.slot], tuple(free), key, tuple(recycle), into))
        self._lay_out_slabs()
        return self

    def _lay_out_slabs(self):
        """Follow a run's buffers through the plan (the pool is deterministic) and give the
        fresh ones that never leave it (never an output, never held by a slot that a view
        could outlive) a place in one block per (shape, dtype), allocated at the start of
        each run."""
        holder, pool, kinds, fresh_at, escaping = {}, {}, [], {}, set()
        for index, (_, _, slot, frees, key, recycles, into) in enumerate(self._plan):
            if into is not None:
                holder[slot] = holder.pop(into)
            elif key is not None:
                spare = pool.get(key)
                if spare:
                    holder[slot] = spare.pop()
                else:
                    holder[slot] = fresh_at[index] = len(kinds)
                    kinds.append(key)
            for dead in frees:
                if dead in holder:
                    escaping.add(holder.pop(dead))
            for dead, dead_key in recycles:
                pool.setdefault(dead_key, []).append(holder.pop(dead))
        escaping.update(holder.values())  # outputs (and anything a run returns or keeps)
        counts = {}
        for buffer, key in enumerate(kinds):
            if buffer not in escaping:
                counts[key] = counts.get(key, 0) + 1
        blocks = [key for key, count in counts.items() if count > 1]
        number, taken = {key: k for k, key in enumerate(blocks)}, {}
        self._slabs = [((counts[key], *key[0]), key[1]) for key in blocks]
        for index, buffer in fresh_at.items():
            key = kinds[buffer]
            if buffer in escaping or key not in number:
                continue
            place = taken[key] = taken.get(key, -1) + 1
            self._plan[index] = self._plan[index][:6] + ((number[key], place),)

    def run(self, arrays):
        """The outputs for new input ``arrays`` (in the order of the inputs); the results
        written into buffers passed on from dead arrays (see ``prune``)."""
        env = [*arrays, *self._constants]
        env.extend([None] * (self._size - len(env)))
        pool = {}
        slabs = None
        if self._slabs:
            if self.keep_buffers:
                try:
                    slabs = self._kept.pop()  # atomic: two threads never take the same slabs
                except IndexError:
                    pass
            if slabs is None:
                slabs = [np.empty(shape, dtype) for shape, dtype in self._slabs]
        for function, reads, slot, frees, key, recycles, into in self._plan:
            if into is not None:
                if type(into) is tuple:  # a fresh buffer: its place in this run's slab
                    env[slot] = function(*[env[r] for r in reads], out=slabs[into[0]][into[1]])
                else:
                    env[slot] = function(*[env[r] for r in reads], out=env[into])
                    env[into] = None
            elif key is not None:
                spare = pool.get(key)
                env[slot] = function(*[env[r] for r in reads], out=spare.pop() if spare else None)
            elif len(reads) == 1:
                env[slot] = function(env[reads[0]])
            elif len(reads) == 2:
                env[slot] = function(env[reads[0]], env[reads[1]])
            else:
                env[slot] = function(*[env[r] for r in reads])
            for dead in frees:
                env[dead] = None
            for dead, dead_key in recycles:
                pool.setdefault(dead_key, []).append(env[dead])
                env[dead] = None
        outputs = [env[k] for k in self._outputs]
        if slabs and self.keep_buffers and not self._kept:
            self._kept.append(slabs)  # no output holds them (see _lay_out_slabs)
        return outputs

    def share_checks(self):
        """NaN-safe products whose partial is one array (a spread parameter read at every
        step) test it for non-finite values once: one node computes the flag, the products
        read it."""
        readers = {}
        for index, node in enumerate(self.nodes):
            if (node.function is safe_product or getattr(node.function, "checks", False)) and len(node.refs) == 2:
                readers.setdefault(node.refs[1], []).append(index)
        checks = {}
        fresh = self._fresh_slot()
        for ref, indices in readers.items():
            if len(indices) < 2:
                continue
            flag = Node(all_finite, {}, (ref,), fresh)
            fresh += 1
            checks[indices[0]] = flag
            for index in indices:
                node = self.nodes[index]
                if node.function is safe_product:
                    node.function = safe_product_checked
                node.refs = node.refs + (flag.slot,)
        if checks:
            self.nodes = [new for index, node in enumerate(self.nodes)
                          for new in ((checks[index], node) if index in checks else (node,))]
        return self

    def _fresh_slot(self):
        """A slot number no node or input of the program uses (for nodes a rewrite adds)."""
        return max([node.slot for node in self.nodes] + list(self.inputs), default=-1) + 1

    def _readers(self):
        """The node computing each slot, and how many times each slot is read."""
        producer, readers = {}, {}
        for node in self.nodes:
            producer[node.slot] = node
            for ref in node.refs:
                if type(ref) is int:
                    readers[ref] = readers.get(ref, 0) + 1
        return producer, readers

    def _layouts(self):
        """(shape, dtype) and recorded strides of every NumPy input, constant and result."""
        layout, strides = dict(self.layouts), dict(self.strides)
        for node in self.nodes:
            if node.out is not None:
                layout[node.slot], strides[node.slot] = node.out, node.strides
            for ref in node.refs:
                if type(ref) is Constant and type(ref.value) is np.ndarray:
                    strides[ref] = ref.value.strides
        return layout, strides

    def _drop_dead(self):
        needed = set(self.outputs)
        kept = []
        for node in reversed(self.nodes):
            if node.slot in needed or node.effect:
                kept.append(node)
                needed.update(ref for ref in node.refs if type(ref) is int)
        self.nodes = kept[::-1]

    def drop_ones(self):
        """Arrays known to hold one value everywhere: ``ones_like``/``zeros_like`` of a
        traced template (the seed of a backward pass), their views, and products and sums
        of them with numbers. A product by ones is its other operand, when that has the
        product's shape and dtype and the product is no output (``1 * x`` is ``x``, bit
        for bit; a NaN-safe product with a cotangent of ones never masks), and ``x ** 1``
        is ``x``. Elsewhere an elementwise operation reads such an array as a scalar of its
        dtype, where another operand gives the result its shape: the same bits (NumPy
        promotes a NumPy scalar as an array), one array less in memory, and a NaN-safe
        product by a finite nonzero scalar is a plain product."""
        layout, strides = self._layouts()
        outputs = set(self.outputs)
        uniform, rename, kept = {}, {}, []
        for node in self.nodes:
            if rename:
                node.refs = tuple(rename.get(ref, ref) if type(ref) is int else ref for ref in node.refs)
            value = _uniform_value(node, uniform)
            if value is not None:
                uniform[node.slot] = value
                kept.append(node)
                continue
            if (node.prim is ew.power and len(node.refs) == 2 and type(node.refs[1]) is Constant
                    and type(node.refs[1].value) in (int, float) and node.refs[1].value == 1
                    and node.out is not None and node.slot not in outputs
                    and _layout_of(node.refs[0], layout) == node.out and strides.get(node.refs[0]) == node.strides):
                rename[node.slot] = node.refs[0]  # x ** 1 is x (the kernel's copy of it)
                continue
            if (node.prim in (ew.multiply, ew.safe_multiply) and len(node.refs) == 2 and node.out is not None
                    and node.slot not in outputs):
                sides = (0, 1) if node.prim is ew.multiply else (0,)  # safe_multiply(g, d): g the ones
                found = next((1 - side for side in sides if _is_one(uniform.get(node.refs[side]))
                              and _layout_of(node.refs[1 - side], layout) == node.out
                              and strides.get(node.refs[1 - side]) == node.strides), None)
                if found is not None:
                    rename[node.slot] = node.refs[found]
                    continue
            if uniform and node.out is not None and node.prim in _EXPRESSIONS:  # not power: NumPy's
                # power takes other paths for a scalar exponent
                _read_as_scalars(node, uniform, layout, strides)
            kept.append(node)
        self.nodes = kept
        return self

    def simplify(self):
        """Rewrites that save a pass over memory and give the same bits (IEEE rounds
        symmetrically, and defines ``a - b`` as ``a + (-b)``), for negations no other node
        reads: ``a + (-b)`` and ``(-b) + a`` become ``a - b``, ``a - (-b)`` becomes ``a + b``,
        and ``(-x) * y`` becomes ``-(x * y)``, ``roll(-x)`` ``-roll(x)`` (so that a sum reading
        them absorbs the sign). A float divided by a constant power of two (``/ dx`` on a
        grid of 2**-k) is multiplied by its reciprocal."""
        producer, readers = self._readers()
        outputs = set(self.outputs)
        fresh = self._fresh_slot()

        def negation(ref):
            inner = producer.get(ref) if type(ref) is int else None
            if inner is not None and inner.function is np.negative and readers.get(ref) == 1 and ref not in outputs:
                return inner
            return None

        nodes, dropped = [], set()
        for node in self.nodes:
            if node.function in (np.add, np.subtract, np.multiply) and len(node.refs) == 2:
                sides = (1, 0) if node.function is not np.subtract else (1,)
                for side in sides:
                    inner = negation(node.refs[side])
                    if inner is None or (node.function is np.multiply and (
                            inner.out != node.out or node.out is None or node.out[1].kind == "c")):
                        continue  # a negation of a broadcast operand stays on the smaller array, and a
                        # complex product's sums of two products round zeros to other signs
                    other = 1 - side
                    refs = (node.refs[other], inner.refs[0]) if node.function is not np.subtract else (
                        node.refs[0], inner.refs[0])
                    dtypes = None if node.fusable is None or inner.fusable is None else (
                        node.fusable.dtypes[other if node.function is not np.subtract else 0], inner.fusable.dtypes[0])
                    dropped.add(inner.slot)
                    if node.function is np.multiply:  # (-x) * y -> -(x * y): the product in a new slot
                        if side == 0:  # the operands in their order: a complex product is not
                            refs, dtypes = refs[::-1], dtypes and dtypes[::-1]  # commutative to the bit
                        product = Node(np.multiply, {}, refs, fresh, ew.multiply)
                        product.out, product.fusable = node.out, _retyped(node.fusable, dtypes)
                        fresh += 1
                        nodes.append(product)
                        node.function, node.prim, node.refs = np.negative, ew.negative, (product.slot,)
                        node.fusable = _retyped(node.fusable, (node.fusable.out,) if node.fusable else None)
                        producer[product.slot], readers[product.slot] = product, 1
                    else:
                        flipped = np.subtract if node.function is np.add else np.add
                        node.function, node.prim = flipped, (ew.subtract if flipped is np.subtract else ew.add)
                        node.refs, node.fusable = refs, _retyped(node.fusable, dtypes)
                    break
            elif (node.function is np.divide and len(node.refs) == 2 and type(node.refs[1]) is Constant
                  and node.out is not None and node.out[1].kind == "f"
                  and reciprocal_power_of_two(node.refs[1].value, node.out[1]) is not None):
                # x / 2**k is x * 2**-k: the same real number, rounded once (a product is cheaper)
                node.function, node.prim = np.multiply, ew.multiply
                node.refs = (node.refs[0], Constant(reciprocal_power_of_two(node.refs[1].value, node.out[1])))
            elif node.prim is kshape.roll and negation(node.refs[0]) is not None:
                inner = negation(node.refs[0])  # roll(-x) -> -roll(x): the roll in a new slot
                moved = Node(node.function, node.params, (inner.refs[0],), fresh, node.prim)
                moved.out, fresh = node.out, fresh + 1
                nodes.append(moved)
                node.function, node.prim, node.params, node.refs = np.negative, ew.negative, {}, (moved.slot,)
                node.fusable = inner.fusable
                producer[moved.slot], readers[moved.slot] = moved, 1
                dropped.add(inner.slot)
            nodes.append(node)
        if dropped:
            self.nodes = [node for node in nodes if node.slot not in dropped]
        return self

    def contract(self):
        """A sum over trailing axes of a product read only there (a parameter's gradient:
        the cotangent times a residual, summed over the cells) is one einsum: the products
        are never stored."""
        layout, _ = self._layouts()
        producer, readers = self._readers()
        outputs = set(self.outputs)
        dropped = set()
        for node in self.nodes:
            contracted = getattr(node.function, "contracted", None)
            ref = node.refs[0] if contracted is not None and len(node.refs) == 1 else None
            product = producer.get(ref) if type(ref) is int else None
            if (product is None or readers.get(ref) != 1 or ref in outputs or product.params
                    or not (product.function is np.multiply or product.function is safe_product)
                    or product.out is None or product.out[0] != node.function.shape
                    or any(_layout_of(r, layout) != product.out for r in product.refs)):
                continue
            node.function = contracted(product.function is safe_product)
            node.refs = product.refs
            dropped.add(product.slot)
        if dropped:
            self.nodes = [node for node in self.nodes if node.slot not in dropped]
        return self

    def spread(self):
        """An operand that NumPy broadcasts along an axis in several large ufuncs (a
        per-sample parameter of shape (N, 1) against fields of shape (N, cells), at each
        step of a loop) is spread to the full shape once, before the first of them: NumPy
        loops over a broadcast operand in short inner loops, 2-3 times slower than over
        contiguous ones. The same values meet the same operations: the same bits."""
        layout, strides = self._layouts()
        uses = {}
        for index, node in enumerate(self.nodes):
            function = node.function
            if node.out is None or node.params or not (
                    (type(function) is np.ufunc and function.nin == 2 and function.nout == 1)
                    or function is safe_product):
                continue
            shape, dtype = node.out
            if dtype.itemsize * math.prod(shape) < POOL_MIN_BYTES or not _c_ordered(node.out, node.strides) or not all(
                    _c_ordered(layout.get(ref) if type(ref) is int else _layout_of(ref, layout), strides.get(ref))
                    for ref in node.refs if (_layout_of(ref, layout) or ((),))[0] == shape):
                continue  # a C-ordered result of C-ordered operands stays C-ordered once spread
            for position, ref in enumerate(node.refs):
                known = layout.get(ref) if type(ref) is int else (
                    (ref.value.shape, ref.value.dtype) if type(ref.value) is np.ndarray else None)
                if known is not None and known[0] != shape and known[1] == dtype and len(known[0]) == len(shape):
                    uses.setdefault((ref, shape), []).append((index, position))
        spreads = {}  # index of the first reader -> the nodes spreading its operands
        fresh = self._fresh_slot()
        for (ref, shape), readers in uses.items():
            if len(readers) < _SPREAD_MIN_READERS:
                continue
            dtype = self.nodes[readers[0][0]].out[1]
            spread = Node(spread_into(shape, dtype), {}, (ref,), fresh)
            spread.out, fresh = (shape, dtype), fresh + 1
            spread.strides = np.empty((0,) + shape[1:], dtype).strides if shape else ()
            spreads.setdefault(readers[0][0], []).append(spread)
            for index, position in readers:
                node = self.nodes[index]
                node.refs = node.refs[:position] + (spread.slot,) + node.refs[position + 1:]
        if spreads:
            self.nodes = [new for index, node in enumerate(self.nodes) for new in (*spreads.get(index, ()), node)]
        return self

    def fold_rolls(self):
        """A roll whose readers are all binary ufuncs over operands of its layout
        (``u - roll(u, 1)``, the cotangents of a stencil added up) is not made: each reader
        reads the roll's source as a shifted flat view, then the wrapped indices again
        (:func:`replay.rolled_evaluation`): one pass over memory instead of two. The same
        values meet the same operation: the same bits."""
        layout, strides = self._layouts()
        outputs = set(self.outputs)
        rolls = {node.slot: node for node in self.nodes
                 if hasattr(node.function, "shift") and node.slot not in outputs
                 and _c_ordered(node.out, node.strides) and _c_ordered(layout.get(node.refs[0]), strides.get(node.refs[0]))}
        if not rolls:
            return self
        readers_of = {}
        for index, node in enumerate(self.nodes):
            for ref in node.refs:
                if type(ref) is int and ref in rolls:
                    readers_of.setdefault(ref, set()).add(index)

        def foldable(index, slot):
            node = self.nodes[index]
            function = node.function
            if not (type(function) is np.ufunc and function.nin == 2 and function.nout == 1 and not node.params
                    and node.out == rolls[slot].out and node.strides == rolls[slot].strides):
                return False
            axes = {rolls[ref].function.axis for ref in node.refs if type(ref) is int and ref in rolls}
            return len(axes) == 1 and all(
                (type(ref) is int and ref in rolls) or (
                    _layout_of(ref, layout) == node.out and _c_ordered(_layout_of(ref, layout), strides.get(ref)))
                or (type(ref) is Constant and np.ndim(ref.value) == 0)
                for ref in node.refs)

        folded = {slot for slot, indices in readers_of.items() if all(foldable(index, slot) for index in indices)}
        changed = True
        while changed:  # a reader of two rolls folds both or neither
            changed = False
            for slot in list(folded):
                if any(type(ref) is int and ref in rolls and ref not in folded
                       for index in readers_of[slot] for ref in self.nodes[index].refs):
                    folded.discard(slot)
                    changed = True
        if not folded:
            return self
        for index in sorted({index for slot in folded for index in readers_of[slot]}):
            node = self.nodes[index]
            leaves = [Shifted(rolls[ref].refs[0], rolls[ref].function.axis, rolls[ref].function.shift)
                      if type(ref) is int and ref in folded else ref for ref in node.refs]
            axis = next(leaf.axis for leaf in leaves if type(leaf) is Shifted)
            node.function = rolled_evaluation(node.function, leaves, node.out, axis)
            node.refs = tuple(leaf.ref if type(leaf) is Shifted else leaf for leaf in leaves)
        self.nodes = [node for node in self.nodes if node.slot not in folded]
        return self

    def rematerialize(self):
        """A large result of one cheap operation (``u - roll(u, 1)``: a sum, difference,
        product or negation, rolls folded) that is read soon after it is made and again
        much later (a residual of the backward pass) is computed again just before its late
        readers, from operands that are alive then anyway (the state ``u``, itself kept):
        the first result dies early, in a recycled buffer that stays in cache, instead of
        living through the whole forward pass in main memory. The same operation of the
        same values: the same bits, a third less memory for a stencil's residuals, and less
        traffic to and from main memory than the pass it adds."""
        outputs = set(self.outputs)
        readers_at = {}
        for index, node in enumerate(self.nodes):
            for ref in node.refs:
                if type(ref) is int:
                    readers_at.setdefault(ref, []).append(index)
        inputs = set(self.inputs)

        def alive_then(ref, index, first_late):
            """Whether operand ``ref`` of node ``index`` is alive anyway at ``first_late``."""
            if type(ref) is not int or ref in inputs:
                return True
            others = [at for at in readers_at[ref] if at != index]
            return bool(others) and max(others) >= first_late

        copies = {}  # index of the first late reader -> the nodes computing again before it
        fresh = self._fresh_slot()
        for index, node in enumerate(self.nodes):
            function = node.function
            cheap = function in _CHEAP_UFUNCS or getattr(function, "ufunc", None) in _CHEAP_UFUNCS
            if not cheap or node.params or node.slot in outputs or _writes_into(node) is None:
                continue
            late = [at for at in readers_at.get(node.slot, ()) if at - index > _REMATERIALIZE_AFTER]
            if not late or len(late) == len(readers_at[node.slot]):
                continue
            first_late = late[0]
            if not all(alive_then(ref, index, first_late) for ref in node.refs):
                continue  # an operand would have to live on for the copy: keep the result
            copy = Node(function, {}, node.refs, fresh, node.prim)
            copy.out, copy.strides, fresh = node.out, node.strides, fresh + 1
            copies.setdefault(first_late, []).append(copy)
            for at in late:
                reader = self.nodes[at]
                reader.refs = tuple(copy.slot if ref == node.slot else ref for ref in reader.refs)
            readers_at[node.slot] = [at for at in readers_at[node.slot] if at not in late]
            for ref in node.refs:  # the copy reads its operands just before its first reader
                if type(ref) is int:
                    readers_at[ref].append(first_late - 0.5)
        if copies:
            self.nodes = [new for index, node in enumerate(self.nodes) for new in (*copies.get(index, ()), node)]
        return self

    def fuse(self):
        """Each tree of fusable nodes whose intermediates are read once (and are no output)
        becomes one numexpr evaluation (NumPy) or one ElementwiseKernel (CuPy) at the place
        of its root, where that pays (:func:`_worth_fusing`); a tree that does not pay is
        run node by node, its subtrees judged on their own. An operand that a primitive's
        expression names twice (``x * x``, the mask of a safe product) stays a leaf in numexpr,
        which would compute its subtree twice (a CUDA C compiler computes it once)."""
        _, readers = self._readers()
        outputs = set(self.outputs)
        trees = {}  # slot of a fusable node -> _Tree
        absorbed = set()
        rolls = {node.slot: node for node in self.nodes
                 if hasattr(node.function, "shift") and node.out is not None and node.slot not in outputs}
        for node in self.nodes:
            if node.fusable is None:
                continue
            library = node.fusable.library
            if library == "numpy" and numexpr is None:
                continue
            template = _template(node)
            if template is None:
                continue
            expression, used = template
            tree = _Tree(node)
            pieces = []
            for position, (ref, dtype) in enumerate(zip(node.refs, node.fusable.dtypes)):
                count = used.get(position, 0)
                if count == 0:
                    pieces.append("")
                    continue
                inner = trees.get(ref) if type(ref) is int else None
                if (inner is not None and (count == 1 or library != "numpy")  # CUDA C compilers share
                        and readers.get(ref) == 1 and ref not in outputs          # repeated subexpressions
                        and len(tree.leaves) + len(inner.leaves) + len(node.refs) <= _MAX_LEAVES
                        and (inner.axis is None or tree.axis in (None, inner.axis))):
                    if inner.axis is not None:
                        tree.axis = inner.axis
                    absorbed.add(ref)
                    tree.children.append(ref)
                    pieces.append(_rename(inner.expression, tree.leaves, tree.dtypes, inner.leaves, inner.dtypes))
                    tree.size += inner.size
                    tree.heavy = tree.heavy or inner.heavy
                    tree.rolled.extend(inner.rolled)
                else:
                    roll = rolls.get(ref) if type(ref) is int and library == "numpy" else None
                    if (roll is not None and readers.get(ref) == 1 and roll.out == node.out
                            and tree.axis in (None, roll.function.axis)):
                        # a roll read only here: the evaluation reads its source shifted
                        absorbed.add(ref)
                        tree.own_rolls.append(ref)
                        tree.rolled.append(ref)
                        tree.axis = roll.function.axis
                        ref = Shifted(roll.refs[0], roll.function.axis, roll.function.shift)
                    pieces.append(_leaf_name(ref, dtype, tree.leaves, tree.dtypes))
            tree.expression = expression.format(*pieces)
            trees[node.slot] = tree
        # roots, last first: a tree that does not pay gives its subtrees back as roots
        roots = [node.slot for node in reversed(self.nodes) if node.slot in trees and node.slot not in absorbed]
        chosen = set()
        while roots:
            slot = roots.pop()
            tree = trees[slot]
            if _worth_fusing(tree):
                chosen.add(slot)
            else:
                absorbed.difference_update(tree.children)
                absorbed.difference_update(tree.own_rolls)  # the rolls run as they were recorded
                roots.extend(tree.children)
        fused = []
        for node in self.nodes:
            if node.slot in absorbed:
                continue
            if node.slot in chosen:
                tree = trees[node.slot]
                names = [f"v{k}" for k in range(len(tree.leaves))]
                expression = _named(tree.expression, names)
                if node.fusable.library == "numpy":
                    signature = [(name, _NUMEXPR_TYPES[np.dtype(dtype)]) for name, dtype in zip(names, tree.dtypes)]
                    evaluate = functools.partial(  # the keyword numexpr asks for beside out=
                        numexpr.NumExpr(expression, signature=signature),
                        ex_uses_vml=numexpr.necompiler.getExprNames(expression, {})[1])
                    if tree.rolled:
                        evaluate = rolled_evaluation(evaluate, tree.leaves, node.out, tree.axis)
                else:
                    evaluate = cuda_kernel(expression, names, tree.dtypes, node.fusable.out)
                leaves = tuple(leaf.ref if type(leaf) is Shifted else leaf for leaf in tree.leaves)
                replacement = Node(evaluate, {}, leaves, node.slot)
                replacement.out = node.out
                replacement.fusable = node.fusable
                node = replacement
            fused.append(node)
        self.nodes = fused
        return self

    def __len__(self):
        return len(self.nodes)


_CHEAP_UFUNCS = frozenset((np.add, np.subtract, np.multiply, np.negative))
_REMATERIALIZE_AFTER = 64
"""Nodes between a result's making and a reader of it beyond which ``rematerialize``
computes a cheap result again for that reader."""

# Primitives whose expression reads the same in numexpr and in CUDA C
_SHARED_EXPRESSIONS = {
    ew.add: "({} + {})", ew.subtract: "({} - {})", ew.multiply: "({} * {})", ew.divide: "({} / {})",
    ew.negative: "(-{})", ew.sqrt: "sqrt({})", ew.exp: "exp({})", ew.expm1: "expm1({})", ew.log: "log({})",
    ew.log1p: "log1p({})", ew.sin: "sin({})", ew.cos: "cos({})", ew.tan: "tan({})", ew.sinh: "sinh({})",
    ew.cosh: "cosh({})", ew.tanh: "tanh({})",
    ew.equal: "({} == {})", ew.not_equal: "({} != {})", ew.less: "({} < {})", ew.less_equal: "({} <= {})",
    ew.greater: "({} > {})", ew.greater_equal: "({} >= {})",
}
_EXPRESSIONS = {
    **_SHARED_EXPRESSIONS,
    ew.asin: "arcsin({})", ew.acos: "arccos({})", ew.atan: "arctan({})", ew.asinh: "arcsinh({})",
    ew.acosh: "arccosh({})", ew.atanh: "arctanh({})", ew.atan2: "arctan2({}, {})", ew.absolute: "abs({})",
    ew.where: "where({}, {}, {})", ew.logical_and: "({} & {})", ew.logical_or: "({} | {})",
    ew.logical_not: "(~{})",
    # the mask costs nothing once fused; d - d is 0 exactly where d is finite
    ew.safe_multiply: "where(({0} == 0) & (({1} - {1}) != 0), 0, {0} * {1})",
}
# The same primitives in CUDA C, for CuPy's ElementwiseKernel (float64, float32 and bool
# operands; a comparison is a bool, a bool in arithmetic is 0 or 1 as in NumPy).
_CUDA_EXPRESSIONS = {
    **_SHARED_EXPRESSIONS,
    ew.asin: "asin({})", ew.acos: "acos({})", ew.atan: "atan({})", ew.asinh: "asinh({})",
    ew.acosh: "acosh({})", ew.atanh: "atanh({})", ew.atan2: "atan2({}, {})", ew.absolute: "fabs({})",
    ew.where: "({} ? {} : {})", ew.logical_and: "({} && {})", ew.logical_or: "({} || {})",
    ew.logical_not: "(!{})",
    ew.safe_multiply: ew.SAFE_PRODUCT_CUDA,
}
_FLOAT, _SINGLE, _BOOL = np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.bool_)
_MAX_LEAVES = 24  # numexpr takes at most 32 operands (its output and temporaries count too)
# numexpr's names of the dtypes it fuses (its "float" kind is single precision)
_NUMEXPR_TYPES = {_FLOAT: np.float64, _SINGLE: float, _BOOL: bool}
# Powers by a small constant exponent, as the power kernel computes them (products)
_POWERS = {2.0: "({0} * {0})", 3.0: "(({0} * {0}) * {0})", 4.0: "(({0} * {0}) * ({0} * {0}))",
           -1.0: "(1 / {0})", -2.0: "(1 / ({0} * {0}))", 0.5: "sqrt({0})"}
# Primitives whose one evaluation costs far more than a pass over memory: numexpr runs them on
# its threads, so even alone they are worth an evaluation
_HEAVY = frozenset((ew.sqrt, ew.exp, ew.expm1, ew.log, ew.log1p, ew.sin, ew.cos, ew.tan, ew.asin, ew.acos,
                    ew.atan, ew.sinh, ew.cosh, ew.tanh, ew.asinh, ew.acosh, ew.atanh, ew.atan2))

# Primitives whose numexpr evaluation may differ from NumPy's in the last bit (libm's, not
# NumPy's own SIMD loops): the rest (sums, products, quotients, sqrt, comparisons, selects) are
# correctly rounded or exact in both. A float64 tree may hold them (the contract's tolerance,
# docs/jit.md); a float32 one does not: a float32 result's last bit is 6e-8 of it, which a
# float64 computation that reads it would carry far above float64's tolerance.
_ROUNDED_OTHERWISE = _HEAVY - {ew.sqrt}

# Logical operations (fused only on booleans) and the primitives whose boolean result a
# fused expression computes as NumPy does; arithmetic whose result is boolean is not fused
_LOGICAL = frozenset((ew.logical_and, ew.logical_or, ew.logical_not))
_BOOLEAN_RESULTS = _LOGICAL | {ew.where, ew.equal, ew.not_equal, ew.less, ew.less_equal, ew.greater,
                               ew.greater_equal}

CHEAP_FUSE_MIN_SIZE = 1 << 18
"""Elements of a result below which a tree of cheap operations (products, sums,
comparisons) runs node by node: there the arrays stay in cache and numexpr's threads cost
more than the passes over memory they save. Trees with a transcendental function fuse from
``FUSE_MIN_SIZE``."""

POOL_MIN_BYTES = 1 << 16
"""Size of a NumPy result from which a replay writes it into a buffer passed on from an
array that is no longer needed (see ``Program.prune``)."""


class _Tree:
    """A fusable node with the nodes it absorbs: its expression over its leaves."""

    __slots__ = ("node", "expression", "leaves", "dtypes", "size", "heavy", "children", "own_rolls", "rolled",
                 "axis")

    def __init__(self, node):
        self.node = node
        self.expression = ""
        self.leaves, self.dtypes, self.children = [], [], []
        self.own_rolls, self.rolled = [], []  # rolls read as shifted leaves: its own, and all
        self.axis = None  # the axis of those rolls (one per tree)
        self.size = 1
        self.heavy = node.prim in _HEAVY


def _template(node):
    """The expression of a fusable node (placeholders ``{k}`` for its operands) and how many
    times it names each operand, or None."""
    table = _EXPRESSIONS if node.fusable.library == "numpy" else _CUDA_EXPRESSIONS
    if node.prim is ew.power:
        if node.fusable.library != "numpy" or type(node.refs[1]) is not Constant:
            return None
        text = _POWERS.get(float(node.refs[1].value))
        return None if text is None else (text, {0: text.count("{0}")})
    text = table.get(node.prim)
    if text is None:
        return None
    return _numbered(text)


def _numbered(text):
    """``text`` with every placeholder numbered, and the count of each."""
    parts, used, automatic = [], {}, 0
    for literal, field, _, _ in string.Formatter().parse(text):
        parts.append(literal.replace("{", "{{").replace("}", "}}"))
        if field is None:
            continue
        if field == "":
            field, automatic = automatic, automatic + 1
        index = int(field)
        used[index] = used.get(index, 0) + 1
        parts.append("{%d}" % index)
    return "".join(parts), used


def _worth_fusing(tree):
    """Whether a tree is faster as one evaluation than node by node: on CuPy any tree of two
    nodes or more (one launch instead of several); on NumPy a tree with a transcendental
    function when numexpr has threads, or a tree of two nodes or more whose result has
    ``CHEAP_FUSE_MIN_SIZE`` elements (below, the passes it saves are over data in cache)."""
    if tree.node.fusable.library != "numpy":
        return tree.size > 1
    if tree.heavy and (tree.size > 1 or numexpr.get_num_threads() > 1):
        return True
    shape = tree.node.out[0] if tree.node.out is not None else ()
    return tree.size > 1 and math.prod(shape) >= CHEAP_FUSE_MIN_SIZE


def _reads_only(node):
    """Whether a node's kernel only reads its inputs: its result is a fresh array, never a
    view of an input (a ufunc of one output, a fused expression, this module's kernels, a
    rule's sum of products)."""
    function = node.function
    return (type(function) is np.ufunc and function.nout == 1) or hasattr(function, "writes_into") or (
        type(function) is functools.partial and type(function.func) is _NUMEXPR_TYPE) or node.prim is ew.multiply_sum


def _writes_into(node):
    """The (shape, dtype) of the fresh NumPy array of ``POOL_MIN_BYTES`` or more that a node
    writes through ``out=`` (a ufunc of one output, a fused expression, this module's
    kernels that take a buffer), or None."""
    if (node.out is None or node.params or not _reads_only(node) or not getattr(node.function, "writes_into", True)
            or not _c_ordered(node.out, node.strides)):
        return None  # a buffer is C-ordered: only a result recorded C-ordered takes one (the same
    shape, dtype = node.out  # layout: the same order of the sums that later read it)
    return node.out if dtype.itemsize * math.prod(shape) >= POOL_MIN_BYTES else None


def _c_ordered(layout, strides):
    """Whether ``strides`` are those of a C-ordered array of ``layout`` (shape, dtype)."""
    if layout is None or strides is None:
        return False
    shape, dtype = layout
    expected, step = [], dtype.itemsize
    for size in reversed(shape):
        expected.append(step)
        step *= size
    return all(s == e or n == 1 for s, e, n in zip(strides, reversed(expected), shape))


_VIEWS_OF_ONES = frozenset((kcore.expand_dims, kcore.broadcast_to, kcore.reshape, kcore.transpose, kcore.squeeze))
_UNIFORM_ARITHMETIC = {ew.multiply: np.multiply, ew.add: np.add, ew.subtract: np.subtract, ew.negative: np.negative}


def _uniform_value(node, uniform):
    """The one value (a NumPy scalar of the array's dtype) of a node's result when every
    element is known to hold it, else None."""
    if node.out is None:
        return None
    dtype = node.out[1]
    if not node.refs and node.prim in (kc.ones_like, kc.zeros_like) and dtype.kind in "fc":
        return dtype.type(1 if node.prim is kc.ones_like else 0)
    if node.prim in _VIEWS_OF_ONES and node.refs and type(node.refs[0]) is int:
        return uniform.get(node.refs[0])
    function = _UNIFORM_ARITHMETIC.get(node.prim)
    if function is None or node.params:
        return None
    operands = []
    for ref in node.refs:
        if type(ref) is int:
            if ref not in uniform:
                return None
            operands.append(uniform[ref])
        elif type(ref.value) in (int, float) or (isinstance(ref.value, np.generic) and ref.value.dtype.kind in "fc"):
            operands.append(ref.value)
        else:
            return None
    if not any(type(ref) is int for ref in node.refs):
        return None
    with np.errstate(all="ignore"):
        value = function(*operands)
    return value if isinstance(value, np.generic) and value.dtype == dtype else None


def _is_one(value):
    return value is not None and value == 1


def _read_as_scalars(node, uniform, layout, strides):
    """An elementwise node reads its operands known to be uniform as NumPy scalars, where
    another operand has the result's shape (the result and those operands C-ordered: so
    is the result then); a NaN-safe product whose cotangent is a finite nonzero scalar, or
    whose partial is a finite scalar, becomes a plain product."""
    shape = node.out[0]
    full = [ref for ref in node.refs if (type(ref) is not int or ref not in uniform)
            and (_layout_of(ref, layout) or ((),))[0] == shape]
    if not full or not _c_ordered(node.out, node.strides) or not all(
            _c_ordered(_layout_of(ref, layout), strides.get(ref)) for ref in full):
        return
    refs = list(node.refs)
    for position, ref in enumerate(refs):
        if type(ref) is int and ref in uniform:
            refs[position] = Constant(uniform[ref])
    if refs == list(node.refs):
        return
    node.refs = tuple(refs)
    if node.prim is ew.safe_multiply:
        g, d = (r.value if type(r) is Constant else None for r in node.refs)
        if (g is not None and np.isfinite(g) and g != 0) or (d is not None and np.isfinite(d)):
            node.prim, node.function = ew.multiply, np.multiply


def _layout_of(ref, layout):
    """(shape, dtype) of a slot or of a NumPy constant, or None."""
    if type(ref) is int:
        return layout.get(ref)
    value = ref.value
    return (value.shape, value.dtype) if type(value) is np.ndarray else None


def _retyped(fusable, dtypes):
    """``fusable`` with the dtypes of a rewritten node's operands (None stays None)."""
    if fusable is None or dtypes is None:
        return None
    return Fusable(fusable.library, tuple(dtypes), fusable.out)


class Fusable:
    """What a node brings to a fused expression: its library ("numpy" or "cupy"), the dtypes
    of its inputs and the dtype of its output."""

    __slots__ = ("library", "dtypes", "out")

    def __init__(self, library, dtypes, out):
        self.library, self.dtypes, self.out = library, dtypes, out


def _array_library(value):
    """"numpy" or "cupy" for their arrays of float64, float32 or bool, else None (no import
    of CuPy)."""
    kind = type(value)
    if kind is np.ndarray:
        return "numpy" if value.dtype in (_FLOAT, _SINGLE, _BOOL) else None
    if kind.__name__ == "ndarray" and kind.__module__.partition(".")[0] == "cupy":
        return "cupy" if value.dtype in (_FLOAT, _SINGLE, _BOOL) else None
    return None


def _fusable(prim, params, values, out):
    """A :class:`Fusable` when ``prim`` may join a fused expression: a primitive numexpr and
    CUDA C compute as NumPy does, no parameters, arrays of one floating precision (float64
    or float32) or boolean, of one library, and Python numbers in (of the arrays'
    precision, as NumPy treats them), an array out (on NumPy of at least ``FUSE_MIN_SIZE``
    elements: on the GPU fewer launches pay at any size); else None."""
    if params or (prim not in _EXPRESSIONS and not (
            prim is ew.power and type(values[1]) in (int, float) and float(values[1]) in _POWERS)):
        return None
    library = _array_library(out)
    if library is None or (library == "numpy" and math.prod(out.shape) < FUSE_MIN_SIZE):
        return None
    floats = {value.dtype for value in (*values, out) if hasattr(value, "dtype") and value.dtype != _BOOL}
    if len(floats) > 1:
        return None  # mixed precisions: NumPy's promotion is not numexpr's
    number = floats.pop() if floats else _FLOAT
    if prim in _LOGICAL and any(value.dtype != _BOOL if hasattr(value, "dtype") else type(value) is not bool
                                for value in values):
        return None  # NumPy reads numbers as truth values; numexpr's & | ~ take booleans only
    if out.dtype == _BOOL and prim not in _BOOLEAN_RESULTS:
        return None  # arithmetic of booleans (abs(b), b + c: a logical or) stays NumPy's
    if library == "numpy" and number == _SINGLE and prim in _ROUNDED_OTHERWISE:
        return None  # numexpr's float32 sin, exp... round differently from NumPy's: not fused
    dtypes = []
    for value in values:
        if type(value) is float or type(value) is int:
            dtypes.append(number)
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
        return "bool" if dtype is bool else np.dtype(dtype).name  # bool, float64 or float32

    params = ", ".join(f"{ctype(dtype)} {name}" for name, dtype in zip(names, dtypes))
    return params, f"{ctype(out)} out", f"out = {expression}"


def cuda_kernel(expression, names, dtypes, out):
    """The fused expression as a CuPy ElementwiseKernel (CuPy compiles and caches it)."""
    import cupy

    in_params, out_params, operation = cuda_source(expression, names, dtypes, out)
    return cupy.ElementwiseKernel(in_params, out_params, operation, "lf_fused")


def _leaf_name(ref, dtype, leaves, dtypes):
    """The placeholder of input ``ref`` in an expression (one per distinct input; a Python
    number is read in the precision its dtype says)."""
    for k, known in enumerate(leaves):
        if known is ref or (type(ref) in (int, Shifted) and type(known) is type(ref) and known == ref):
            return "{%d}" % k
    leaves.append(ref)
    dtypes.append(np.dtype(dtype))
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
