"""The jit level: one recording.  Every primitive that reaches it runs on this call's
values and appends a node to its :class:`Program` (the callable lowered for the replay, its
parameters, the slots it reads), with common subexpressions recorded once."""
from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from labeled_func_kernels import core as kcore
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import shape as kshape
from labeled_func_kernels.primitive import Traced

from ..batching import _decided_at, _same_values_holds
from ..errors import UnsupportedOperationError
from ..replay import roll_into, safe_masked, safe_product, trailing_sum
from ..stack import Level, current_levels
from ..views import VIEW_PRIMITIVES, assign_value, make_view, refresh_view
from . import thresholds
from .expressions import _FLOAT
from .fusion import _fusable
from .loops import record_while_loop
from .planning import c_strides
from .nodes import Constant, Node, _identity, _item
from .program import Program
from .tracer import JitTracer


class JitLevel(Level):
    """One recording: the program grows as primitives reach the level."""

    name = "jit"
    abstract = True
    __slots__ = ("program", "_slots", "_seen", "_reads", "_copied", "guards", "sources", "input_names", "_static", "_producer", "_indexed", "_structure", "_rewinds")

    def __init__(self):
        super().__init__()
        self.program = Program()
        self._slots = 0
        self._seen = {}  # (callable, params, refs) -> slot: common subexpressions
        self._reads = None  # while a loop's body is recorded: slot -> value of the traced values read
        self._copied = {}  # slot of a copy -> slot of the array it copies (the first of a chain)
        self.guards = []  # the Guards of the recording: decisions taken from this call's values
        self.sources = set()  # the slots of values drawn afresh at every run (see source)
        self.input_names = {}  # slot of an input -> the argument that holds it (for messages)
        self._static = set()  # the slots of the values made concrete (see made_concrete), each guarded once
        self._producer = {}  # slot -> the node that computes it (the first _indexed nodes indexed)
        self._indexed = 0
        self._structure = {}  # slot -> _structure_of's answer (a recorded value never changes)
        self._rewinds = None  # while a loop is recorded: key -> what puts a generator back (rewind_after_loop)

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

    def input(self, value, name=None):
        """A traced input of the program; ``name``: the argument that holds it, in messages."""
        tracer = JitTracer(self, value, self.new_slot())
        self.program.inputs.append(tracer._slot)
        if name is not None:
            self.input_names[tracer._slot] = name
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
        self.sources.add(slot)
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

    def guard(self, tracer, holds, what, answer):
        """Record that a decision was taken from the values of ``tracer`` (of this recording):
        ``holds(value)`` tells, at a later run, whether that run's ``value`` leads to the same
        decision; ``what`` names the decision (``"bool() at model.py:12"``), ``answer`` the
        answer taken (both for messages).  The value becomes an extra output of the program,
        checked after each run (see ``lf.jit``).  Inside a loop's body (run many times per
        call) a decision cannot be guarded: UnsupportedOperationError."""
        if self.in_loop_body:
            raise UnsupportedOperationError(
                f"{what}: a decision taken from traced values inside the condition or body of an "
                "lf.while_loop recorded by lf.jit: lf.jit guards such decisions once per call, not once per "
                "iteration. Decide outside the loop, or select with xr.where / np.where.")
        slot = self.output_slot(tracer)
        self.guards.append(Guard(slot, holds, what, answer))

    def made_concrete(self, tracer, what, how=None):
        """This run's value of ``tracer`` (of this recording), which ``what`` makes concrete
        (``np.asarray``, ``bool()``, ``int()``, indexing with it...), where that value is
        *structure*: computed from integer, boolean, string or date arguments only (group
        labels, codes, masks given as arguments; no float argument, no random draw).  It becomes
        part of the call's signature, compared by content after each replay (a guard: a later
        call whose value differs traces again; ``how`` names the conversion in its messages,
        ``"shape"`` where the value fixes a shape), as if those arguments were named in
        ``static_argnames``.  This is how flox's ``pandas.unique`` of group labels and its
        ``if`` on whether they are sorted run under lf.jit.  Under a vmap with
        ``branches="agree"`` any value that no vmap maps is given the same way (it is the same
        in every example: they agree).  None otherwise (values computed from float arguments
        keep the documented policy), inside a loop's body (run many times per call), and for a
        value not in host memory."""
        if self.in_loop_body:
            return None
        slot = self.output_slot(tracer)  # a view: brought up to date
        value = tracer._value
        if type(value) is not np.ndarray and not isinstance(value, np.generic):
            return None
        names = self._structure_of(slot)
        if names is None and not _agreeing():
            return None
        if slot not in self._static:
            self._static.add(slot)
            if names is None:  # not mapped, under vmap(..., branches="agree"): every example agrees
                which = "a value lf.jit traces and no vmap maps (branches='agree')"
            else:
                which = (f"the values of {names[0]}" if slot in self.input_names else
                         f"a value computed from {', '.join(names)}" if names else "a value computed from constants")
            self.guards.append(Guard(slot, _same_values_holds(value.copy()),
                                     f"{which} ({_decided_at(f'made concrete by {how or _MADE_CONCRETE.get(what, what)}')})",
                                     "those of its call"))
        # read-only: a write into it would change values that the replay does not change
        # (NumPy raises "assignment destination is read-only" rather than a silent difference)
        view = np.asarray(value).view()
        view.flags.writeable = False
        return view

    def _structure_of(self, slot):
        """The arguments (their names) that the value of ``slot`` is computed from where they
        are all integer, boolean, string or date arrays (structure); None where the value
        depends on a float argument, a random draw or something the program does not say."""
        for node in self.program.nodes[self._indexed:]:
            self._producer[node.slot] = node
        self._indexed = len(self.program.nodes)
        inputs = set(self.program.inputs)
        known = self._structure
        names, seen, todo = [], set(), [slot]
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            if current in known:
                if known[current] is None:
                    known[slot] = None
                    return None
                names.extend(known[current])
                continue
            if current in inputs:
                layout = self.program.layouts.get(current)
                if layout is None or np.dtype(layout[1]).kind in "fcV":
                    known[slot] = None
                    return None
                names.append(self.input_names.get(current, "an argument"))
                continue
            node = self._producer.get(current)
            if current in self.sources or node is None:
                known[slot] = None
                return None
            todo.extend(ref for ref in node.refs if type(ref) is int)
        known[slot] = sorted(set(names))
        return known[slot]

    def derived(self, function, tracer, value):
        """A value that each run computes by ``function(v)`` from the run's value ``v`` of
        ``tracer`` (of this recording), outside the primitives (positions found per example);
        ``value`` is this run's."""
        slot = self.new_slot()
        self.program.nodes.append(Node(function, {}, (self.output_slot(tracer),), slot))
        return JitTracer(self, value, slot)

    def rewind_after_loop(self, key: Any, undo: Callable[[], None]) -> None:
        """A draw while a loop's condition or body is recorded: ``undo()`` puts its generator
        (``key``) back as it was before its first draw there, when the recording ends.  The
        recording runs the body once; the recorded loop then runs from the first iteration
        and draws again, as the function does (see loops.record_while_loop)."""
        if self._rewinds is not None and key not in self._rewinds:
            self._rewinds[key] = undo

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
        if prim.records is not None:  # a sum into a temporary's buffer (add_inplace): in place
            # while tracing, as eagerly, except in a loop's body (whose reads are kept by value);
            # the program records the plain operation
            out = (prim if self._reads is None else prim.records).impl(*values, **params)
            prim = prim.records
        else:
            out = prim.impl(*values, **params)
        if isinstance(out, tuple):
            raise UnsupportedOperationError(f"{prim.name} returns several arrays: lf.jit cannot record it")
        if prim is ew.safe_multiply and type(refs[1]) is Constant and _finite_constant(refs[1].value):
            prim = ew.multiply  # the mask can never apply: a plain product, fusable
        if (prim.traced_constant and isinstance(values[0], (np.ndarray, np.generic))
                and all(type(r) is Constant for r in refs[1:])
                and (type(out) is not np.ndarray or out.flags.c_contiguous)):  # as made from a template
            return self._created(prim, values, params, out)
        if prim is kshape.add_rolled:
            return JitTracer(self, out, self._added_rolled(values, refs, params, out))
        slot = self._record(prim, values, refs, params, out)
        if prim is kcore.copy and type(refs[0]) is int:
            self._copied[slot] = self._copied.get(refs[0], refs[0])
        result = JitTracer(self, out, slot)
        if prim in VIEW_PRIMITIVES and type(args[0]) is JitTracer and args[0]._level is self:
            result._view = make_view(prim, args, params, out)
        return result

    def _record(self, prim, values, refs, params, out, strides=None):
        """The slot of the node ``prim(*refs, **params)`` whose value while tracing is ``out``
        (``strides``: those of its value where ``out`` only stands for its shape and dtype): a
        new node, or the earlier one that computes the same (common subexpressions)."""
        key = _node_key(prim, params, refs)
        try:
            slot = self._seen.get(key) if key is not None else None
        except TypeError:  # a parameter or a constant that cannot be hashed: never shared
            key = slot = None
        if slot is None:
            slot = self.new_slot()
            lowered = _lowered(prim, values, params, out)
            node = Node(lowered, params if lowered is prim.impl else {}, tuple(refs), slot, prim)
            node.fusable = _fusable(prim, params, values, out)
            if type(out) is np.ndarray:
                node.out, node.strides = (out.shape, out.dtype), out.strides if strides is None else strides
            self.program.nodes.append(node)
            if key is not None:
                self._seen[key] = slot
        return slot

    def _added_rolled(self, values, refs, params, out):
        """``total + roll(value)`` (a reverse pass summing a roll's cotangent, ``add_rolled``):
        computed in one pass while tracing (``out``), recorded as the roll and the sum it
        stands for, the nodes a pass without ``add_rolled`` records, so that the passes fold
        the roll into the reads of the sum (``fold_rolls``).  On NumPy the rolled value is
        never computed while tracing: its node gets the layout ``np.roll`` gives, from a
        stand-in without memory (:func:`_unwritten_like`)."""
        (total, value), (total_ref, value_ref) = values, refs
        roll_params = {"shift": (params["shift"],), "axis": (params["axis"],)}
        if type(value) is np.ndarray:
            rolled, strides = _unwritten_like(value)
        else:
            rolled, strides = kshape.roll.impl(value, **roll_params), None
        rolled_slot = self._record(kshape.roll, [value], [value_ref], roll_params, rolled, strides)
        combine = ew.subtract if params["negate"] else ew.add
        return self._record(combine, [total, rolled], [total_ref, rolled_slot], {}, out)

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
    def process_while_loop(self, cond, body, init):
        """One loop node: ``state = body(state)`` while ``cond(state)``, at every run (see
        :func:`record_while_loop`); the levels above describe their tracers in the state."""
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


_MADE_CONCRETE = {"array": "np.asarray", "mask": "pandas.isna", "bool": "bool()", "index": "indexing with it",
                  "setitem": "a store into a NumPy array"}


def _agreeing():
    """Whether a vmap under way takes decisions where its examples agree (``branches="agree"``):
    a value it does not map is the same in every example, so it agrees, and lf.jit guards it."""
    return any(level.batches and level.alive and getattr(level, "branches", None) == "agree"
               for level in current_levels())


class Guard:
    """A decision taken from recorded values: the ``slot`` of the values, ``holds(value)``
    (whether a run's value leads to the same decision), what decided and the answer taken."""

    __slots__ = ("slot", "holds", "what", "answer")

    def __init__(self, slot, holds, what, answer):
        self.slot = slot
        self.holds = holds
        self.what = what
        self.answer = answer

    def __repr__(self):
        return f"Guard({self.what}: {self.answer})"


def _unwritten_like(value):
    """(a stand-in for an array of ``value``'s shape and dtype that nothing writes, its
    strides): those of ``np.empty_like(value)``, which ``np.roll``'s result has.  A C-ordered
    value's stand-in is a broadcast zero, without memory: an unwritten array of its size (a
    Jacobian's 1.3 MB at 400 sites) moved the allocator's heap at every trace, and the next
    arrays of the call got fresh pages (measured: ``np.eye(400)`` took 0.48 ms in a fresh
    lf.jit's first call, 0.03 ms eagerly; 300 page faults per call, 1 after).

    >>> value = np.ones((3, 4))
    >>> stand_in, strides = _unwritten_like(value)
    >>> stand_in.shape, strides == np.empty_like(value).strides, stand_in.strides
    ((3, 4), True, (0, 0))
    """
    if value.flags.c_contiguous and value.size:  # then empty_like's strides are a fresh C array's
        return np.broadcast_to(np.zeros((), value.dtype), value.shape), c_strides(value.shape, value.dtype)
    out = np.empty_like(value)
    return out, out.strides


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
    if type(out) is not np.ndarray:
        return None
    if prim is ew.safe_multiply:  # the primitive asked first: most nodes have no lowering
        return safe_product if _numpy_operands(values) else None
    if prim is ew.safe_masked:  # a total of the result's shape: returned itself where nothing is masked
        total = values[0]
        return safe_masked if (type(total) is np.ndarray and total.dtype.kind in "fc" and total.shape == out.shape
                               and _numpy_operands(values)) else None
    if prim is kshape.roll and type(values[0]) is np.ndarray and set(params) == {"shift", "axis"}:
        shift, axis = params["shift"], params["axis"]
        if type(axis) is tuple and len(axis) == 1 and type(shift) is tuple and len(shift) == 1:
            shift, axis = shift[0], axis[0]
        if (type(axis) is int and type(shift) is int and values[0].shape == out.shape
                and values[0].flags.c_contiguous):  # np.roll's result then is C-ordered too
            return roll_into(shift, axis % out.ndim, out.shape, out.dtype)
    if (prim is kcore.reduce_sum and type(values[0]) is np.ndarray and set(params) == {"axis", "keepdims"}
            and values[0].dtype == _FLOAT
            and values[0].size >= thresholds.FUSE_MIN_SIZE):  # float64 only: einsum's float32 sums round otherwise
        axes, ndim = tuple(sorted(a % values[0].ndim for a in params["axis"])), values[0].ndim
        if axes and axes == tuple(range(ndim - len(axes), ndim)):
            return trailing_sum(axes, params["keepdims"], values[0].shape)
    return None


def _numpy_operands(values):
    """Whether every operand is a NumPy array or a Python number (what the replay kernels
    of ``engine/replay.py`` take)."""
    return all(type(v) is np.ndarray or type(v) in (int, float) for v in values)


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


def _per_example_call(fun):
    def call(*values):
        return fun(list(values))
    return call


def _node_key(prim, params, refs):
    """A key of a node for common subexpression elimination (arrays, NumPy scalars included,
    are compared by identity), or None when a parameter cannot be compared cheaply; a key
    that holds something unhashable raises TypeError when looked up (``_record``)."""
    if not params:  # the common case (every operand a recorded value), as the general one spells it
        for ref in refs:
            if type(ref) is not int:
                break
        else:
            return prim, (), tuple(refs)
    constants = []
    for ref in refs:
        if type(ref) is int:
            constants.append(ref)
            continue
        value = ref.value
        kind = type(value)
        if kind is float or kind is int:  # a Python number, by its type and bits: no hasattr
            constants.append(("c", _frozen(value)))
        elif hasattr(value, "shape"):
            constants.append(("c", id(value)))
        else:
            constants.append(("c", _frozen(value)))
    if not params:
        return prim, (), tuple(constants)
    try:
        if len(params) == 1:
            ((name, value),) = params.items()
            frozen = ((name, _frozen(value)),)
        else:
            frozen = tuple(sorted((name, _frozen(value)) for name, value in params.items()))
    except TypeError:
        return None
    return prim, frozen, tuple(constants)


_FLOAT_BITS = struct.Struct("<d").pack


def _frozen(value):
    """A parameter or a constant as a hashable key that tells apart what the kernels tell
    apart: slices (unhashable before Python 3.12) and the tuples holding them spelled out,
    numbers by their type and bits (``1`` and ``1.0`` promote differently, ``0.0`` and
    ``-0.0`` are different zeros)."""
    kind = type(value)
    if kind is int:  # the most common first (axes, shifts)
        return kind, value
    if kind is tuple:
        for item in value:
            if type(item) is not int:
                return tuple(_frozen(item) for item in value)
        return "ints", value  # a shape, axes: ints compare by value (bools are not ints here)
    if kind is slice:
        return ("slice", _frozen(value.start), _frozen(value.stop), _frozen(value.step))
    if kind is float:
        return kind, _FLOAT_BITS(value) if value == value else "nan"
    if kind is complex:
        return kind, _frozen(value.real), _frozen(value.imag)
    if isinstance(value, np.generic):
        return kind, value.tobytes()
    if kind is bool:
        return kind, value
    return value
