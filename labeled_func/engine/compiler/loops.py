"""lf.while_loop under lf.jit: a loop whose condition the recording traces, recorded as one
node of the program (its condition and body as sub-programs)."""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from labeled_func_kernels.primitive import Traced
from labeled_func_kernels.reductions import reduce_any

from ..errors import UnsupportedOperationError
from ..stack import traced_by
from .nodes import Constant, Node, _identity, _item
from .program import Program
from .tracer import JitTracer


# --- loops whose condition is traced (lf.while_loop) ---------------------------------------------------
# A loop whose condition the recording traces is one node of the program.  It holds two programs,
# recorded from the loop's condition and body run on fresh traced values of the level (the loop's
# state), and each run loops ``while cond(state): state = body(state)`` on that run's arrays: the
# number of iterations follows the data of each run.  Values of the recording that the condition or
# the body read (closed over) are inputs of the node, read at each run.
#
# The state reaches the level as towers: the values the transforms inside jit trace (vmap's, jvp's)
# around the arrays this level records.  A tower's spec is its structure above the level,
# ``(level, part, ...)`` from each level's ``loop_spec`` (the recording never looks at a tracer's
# class: the level that owns a tracer describes it, and builds it again with ``loop_build``); the
# loop takes the towers apart into their arrays at this level and builds the same towers around
# the fresh ones.  When the body returns a tower of a wider spec than the state's (a value the body
# makes mapped, or gives a tangent), the state is widened (each level's ``loop_widen``: broadcast
# along the batch axis, zero tangents) and the loop recorded again, until the spec is the same
# after an iteration as before.  A level that cannot be carried through a loop (reverse mode,
# whose tape would need every iteration of every later call) raises from its ``loop_spec``.

_ARRAY = "array"  # the spec of an array at the recording's level


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
    rewinds = {} if level._rewinds is None else None  # the outermost loop's recording puts the generators back
    if rewinds is not None:
        level._rewinds = rewinds
    try:
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
    finally:
        if rewinds is not None:  # the draws of the recording's run do not count: the loop below draws them
            level._rewinds = None
            for undo in rewinds.values():
                undo()
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
    while isinstance(pred, Traced) and pred._level is not level and not pred._level.abstract:
        pred = pred._value  # the levels above the recording: the values (primals) below them
    if traced_by(pred, level):
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
    if traced_by(out, level):
        slot = level.output_slot(out)
        reads.setdefault(slot, out._value)
        return slot
    slot = level.new_slot()  # a constant: the same at every iteration
    level.program.nodes.append(Node(_identity, {}, (Constant(out),), slot))
    return slot


def _spec(value, level, arrays):
    """The structure of the tower ``value`` above ``level`` (each level's ``loop_spec``); its
    arrays at ``level`` are appended to ``arrays`` (in the order ``loop_build`` reads them)."""
    if isinstance(value, Traced) and value._level is not level:
        return value._level.loop_spec(value, lambda inner: _spec(inner, level, arrays))
    arrays.append(value)
    return _ARRAY


def _build(spec, arrays):
    """The tower of ``spec`` around the next arrays of the iterator ``arrays``."""
    if spec is _ARRAY:
        return next(arrays)
    return spec[0].loop_build(spec, lambda part: _build(part, arrays))


def _top(spec):
    return None if spec is _ARRAY else spec[0]


def _join(a, b):
    """The narrowest spec that both specs widen to: each level's parts where either has them
    (mapped where either is mapped, with a tangent where either has one)."""
    if a == b:
        return a
    top_a, top_b = _top(a), _top(b)
    if top_a is not None and (top_b is None or top_a.depth > top_b.depth):
        return _with_top(a, b)
    if top_b is not None and (top_a is None or top_b.depth > top_a.depth):
        return _with_top(b, a)
    return (top_a,) + tuple(y if x is None else x if y is None else _join(x, y) for x, y in zip(a[1:], b[1:]))


def _with_top(a, b):
    """``a``'s top level (which ``b`` lacks) over the join of the rest (its first part: the
    value below the level; the other parts, a tangent, stay ``a``'s)."""
    return (a[0], _join(a[1], b)) + tuple(a[2:])


def _widened(value, spec):
    """``value`` as a tower of ``spec`` (which it widens to): each level of the spec makes up
    what the value lacks (``loop_widen``); a level the spec lacks and that carries nothing for
    the value is dropped (``loop_strip``)."""
    top = _top(spec)
    while isinstance(value, Traced) and value._level is not top and (top is None or value._level.depth > top.depth):
        stripped = value._level.loop_strip(value)
        if stripped is None:
            break
        value = stripped
    if spec is _ARRAY:
        return value
    return top.loop_widen(value, spec, _widened)
