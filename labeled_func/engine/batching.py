"""BatchTracer and the vmap level.

A BatchTracer holds its value with the level's batch axis physically first; the
shape it reports excludes that axis.  Values that are not batched at a level are
never wrapped (and never broadcast just to simplify a rule).
"""
from __future__ import annotations

import copy
import math
import sys
import warnings
from contextvars import ContextVar
from typing import NamedTuple

import numpy as np

from labeled_func_kernels import core as kcore
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import shape as kshape
from labeled_func_kernels.backend import backend_of, namespace, namespace_dtype
from labeled_func_kernels.indexing import getitem_static
from labeled_func_kernels.primitive import bottom, known

from . import diagnose
from .errors import (ConversionError, DataDependentControlFlowError, DynamicShapeError, ItemError, TransformError,
                     UnsupportedOperationError)
from .stack import (Level, active, kept_traced, bind_custom_jvp, bind_custom_vjp, bind_per_example, differentiated, inplace_assign,
                    recorded_equal, traced_by)
from .numpy.dynamic import register_agreement, register_checks
from .tracer import Tracer, Wording, unknown_value_policy

__all__ = ["BatchLevel", "BatchTracer", "any_example_true", "batch_value", "unbatch_value",
           "register_equality_checks", "copied_as_itself", "BRANCHES", "ExampleNames", "probing_branches",
           "agreed_positions", "agreed_constant", "guard_decision", "recording_under",
           "check_examples"]

BRANCHES = ("error", "agree")


class BatchLevel(Level):
    """One vmap: ``axis_size`` examples, and how random draws behave."""

    name = "vmap"
    batches = True
    __slots__ = ("axis_size", "randomness", "copied_as_itself", "branches", "examples")

    def __init__(self, axis_size, randomness="error", branches="error", examples=None):
        super().__init__()
        self.axis_size = axis_size
        self.randomness = randomness
        self.copied_as_itself = {}  # id -> tracer: see copied_as_itself()
        # "agree": bool(), float(), data-dependent shapes... of a mapped value are allowed
        # where every example gives the same answer (see agreed_value); "error": refused
        self.branches = branches
        self.examples = examples  # an ExampleNames: how messages name example k (None: by position)

    def process(self, prim, args, params):
        values = []
        batched = []
        for arg in args:
            if type(arg) is BatchTracer and arg._level is self:
                values.append(arg._value)
                batched.append(True)
            else:
                values.append(arg)
                batched.append(False)
        rule = prim.batch
        if rule is None:
            if prim.dynamic_shape:
                raise DynamicShapeError(f"{prim.name}: its output shape depends on the data; it cannot be vmapped")
            raise UnsupportedOperationError(f"{prim.name} has no batch rule: it cannot be vmapped")
        out, out_batched = rule(self.axis_size, values, tuple(batched), **params)
        return BatchTracer(self, out) if out_batched else out

    def assign(self, dest, src, operation):
        value = src._value if (type(src) is BatchTracer and src._level is self) else src
        target = dest._value
        if isinstance(target, Tracer) or isinstance(value, Tracer):
            inplace_assign(target, value, operation)
            return
        try:
            target[...] = value
        except ValueError:
            # a read-only buffer (a broadcast view): update this tracer functionally
            dest._value = kcore.copy.bind(kcore.broadcast_to.bind(value, shape=tuple(target.shape)))

    # --- functions with custom rules: vmap the function and its rules ------------------------
    # When an argument also carries a derivative below this level, the level below must
    # apply the rule: the function and its rules are vmapped (each runs under a fresh vmap
    # level over the same examples) and handed down; otherwise the function just runs.
    def process_custom_jvp(self, fun, rule, arrays):
        if not differentiated(arrays):
            return fun(arrays)
        values, mask = self._unwrap(arrays)

        def batched_rule(primals, tangents):
            new = self._fresh()
            with active(new):
                out, tangent = rule(self._wrap(new, primals, mask), self._wrap(new, tangents, mask))
                return _unbatched(new, out), _unbatched(new, tangent)

        return BatchTracer(self, bind_custom_jvp(self._batched(fun, mask), batched_rule, values))

    def process_custom_vjp(self, fun, fwd, bwd, arrays, name):
        if not differentiated(arrays):
            return fun(arrays)
        values, mask = self._unwrap(arrays)

        def batched_fwd(primals):
            new = self._fresh()
            with active(new):
                out, residuals = fwd(self._wrap(new, primals, mask))
                return _unbatched(new, out), _Residuals(residuals, new)

        def batched_bwd(residuals, g):
            new = self._fresh()
            with active(new):
                cotangents = bwd(residuals.rebuild(new), BatchTracer(new, g))
                flat = []
                for cotangent, batched in zip(cotangents, mask):
                    if cotangent is not None:
                        cotangent = unbatch_value(new, cotangent)
                        if not batched:  # an argument shared by every example: sum their parts
                            cotangent = kcore.reduce_sum.bind(cotangent, axis=(0,), keepdims=False)
                    flat.append(cotangent)
                return flat

        out = bind_custom_vjp(self._batched(fun, mask), batched_fwd, batched_bwd, values, name)
        return BatchTracer(self, out)

    def process_per_example(self, fun, arrays):
        """Run ``fun`` on each example in turn (each may still be traced by the levels
        below) and stack the results along this level's batch axis."""
        values, mask = self._unwrap(arrays)
        results = []
        for example in range(self.axis_size):
            key = (example, Ellipsis)  # an array even when 0-d (a NumPy scalar computes in its own type)
            results.append(bind_per_example(fun, [getitem_static(v, key) if batched else v
                                                  for v, batched in zip(values, mask)]))
        return [BatchTracer(self, kshape.stack.bind(*_common_dtype(parts), axis=0)) for parts in zip(*results)]

    # --- the state of a loop recorded below (lf.while_loop under lf.jit) ------------------------------
    def loop_spec(self, tracer, spec_of):
        """A mapped value: this level over the batched value below it."""
        return (self, spec_of(tracer._value))

    def loop_build(self, spec, build):
        return BatchTracer(self, build(spec[1]))

    def loop_widen(self, value, spec, widen):
        """``value`` mapped by this level: broadcast along the batch axis where it is not."""
        inner = value._value if traced_by(value, self) else kcore.broadcast_batch(value, self.axis_size)
        return BatchTracer(self, widen(inner, spec[1]))

    def _fresh(self):
        """A vmap level like this one, for running a rule over the same examples."""
        return BatchLevel(self.axis_size, self.randomness, self.branches, self.examples)

    def _unwrap(self, arrays):
        """The values below this level, and which of them it maps."""
        mask = tuple(traced_by(array, self) for array in arrays)
        return [array._value if batched else array for array, batched in zip(arrays, mask)], mask

    @staticmethod
    def _wrap(level, values, mask):
        return [BatchTracer(level, v) if batched else v for v, batched in zip(values, mask)]

    def _batched(self, fun, mask):
        def run(values):
            new = self._fresh()
            with active(new):
                return _unbatched(new, fun(self._wrap(new, values, mask)))

        return run


class BatchTracer(Tracer):
    """A value batched by one vmap level."""

    __slots__ = ()

    def __init__(self, level, value):
        self._level = level
        self._value = value
        self._shape = tuple(value.shape[1:])

    @property
    def shape(self):
        return self._shape

    def __copy__(self):
        if id(self) in self._level.copied_as_itself:
            return self
        return super().__copy__()

    def __deepcopy__(self, memo=None):
        if id(self) in self._level.copied_as_itself:
            return self
        return super().__deepcopy__(memo)

    def _concrete(self, what):
        if what == "bool" and _EQUALITY_CHECKS:
            answer = _agreed_equality(self, sys._getframe(2))
            if answer is not None:
                return answer
        if self._level.branches == "agree" and what in _AGREEABLE:
            return agreed_value(self, what)
        return unknown_value_policy(self, what, VMAP_WORDS)

    def __repr__(self):
        return f"BatchTracer(vmap level {self._level.depth}, batch of {self._level.axis_size}, shape={self.shape}, dtype={self.dtype}):\n{self._value!r}"


VMAP_WORDS = Wording(
    transform="vmap",
    setitem=("writing a mapped value into an unmapped array ({store}{where}): it "
             "would need more elements than it has. Build the buffer from the mapped "
             "input, e.g. xr.zeros_like(x) / np.zeros_like(x), or use out-of-place ops."),
    bool=("bool() of a mapped value (an `if`, `while`, `and`/`or` or assert on it): "
          "under vmap each example may take a different branch (where every example takes the same "
          "one, as in a check of the inputs, lf.vmap(..., branches='agree') accepts it)."),
    index=("indexing an unmapped array, or a dim with an index coordinate, with a "
           "mapped index (array[i], idxmax, x.isel(t=i) with i computed per example): "
           "NumPy and pandas need concrete indices there, and coordinate labels "
           "would differ per example."),
    item=("{what}() of a mapped value (.item(), float(), int()): inside vmap a "
          "value stands for a whole batch, so it has no single Python number."),
)


# --- "are these two arrays equal?" asked by a library -------------------------------------------
# Code objects of library functions that answer it with bool() of an elementwise comparison
# (xarray's array_equiv, which merging coordinates calls), and of those that merge variables
# by that answer, dropping or refusing one that differs; registered by floor 3.
_EQUALITY_CHECKS: set = set()
_MERGES: set = set()
_CHECK_DEPTH = 3  # frames above __bool__ that may hold the check
_MERGE_DEPTH = 6  # frames above the check that may hold the merge


def register_equality_checks(checks, merges=()):
    """``checks``: code objects of functions that decide by ``bool()`` whether two arrays are
    equal; ``merges``: of functions that call them to merge variables of the same name.

    Under vmap each example asks on its own (the loop's ``x.isel(i)`` compares its own
    coordinates): when every example gives the same answer, that answer is every example's,
    and ``bool()`` returns it instead of raising DataDependentControlFlowError.  Two traced
    copies of one coordinate (``v.copy() + v``) are then equal, as in the loop.  Examples that
    disagree inside a merge make the variable differ: a merge that drops differing
    coordinates (xarray's arithmetic) drops it, one that refuses them raises, as the loop
    would for those examples.
    """
    _EQUALITY_CHECKS.update(checks)
    _MERGES.update(merges)


def equality_check(frame):
    """The frame of a registered equality check among ``frame`` and its callers (up to
    ``_CHECK_DEPTH``), or None."""
    for _ in range(_CHECK_DEPTH):
        if frame is None:
            return None
        if frame.f_code in _EQUALITY_CHECKS:
            return frame
        frame = frame.f_back
    return None


def compared_equal(check):
    """Whether the two arrays an equality check (its first two arguments) compares hold the
    same values by construction (one recorded array and its copies: :func:`recorded_equal`),
    which answers it where the values are not known (under lf.jit)."""
    names = check.f_code.co_varnames[:2]
    arrays = [check.f_locals.get(name) for name in names]
    return len(arrays) == 2 and recorded_equal(*arrays)


def _agreed_equality(tracer, frame):
    """The answer every example gives to an equality check asked from ``frame``, or None
    (not such a check, the examples disagree outside a merge, or the values are unknown)."""
    frame = equality_check(frame)
    if frame is None or tracer.ndim != 0 or not tracer._level.alive:
        return None
    if not known(tracer):
        return True if compared_equal(frame) else None
    raw = bottom(tracer)  # every example of every vmap level
    xp = namespace(raw)
    if bool(xp.all(raw)):
        return True
    if not bool(xp.any(raw)):
        return False
    for _ in range(_MERGE_DEPTH):
        frame = frame.f_back
        if frame is None:
            return None
        if frame.f_code in _MERGES:
            return False
    return None


def _common_dtype(parts):
    """The examples' results in one dtype, NumPy's promotion of theirs (the loop's np.stack)."""
    dtypes = [np.dtype(getattr(part.dtype, "_np_dtype", part.dtype)) for part in parts]
    common = np.result_type(*dtypes)
    if all(dtype == common for dtype in dtypes):
        return parts
    target = namespace_dtype(namespace(*parts), common)
    return [part if dtype == common else ew.astype.bind(part, dtype=target) for part, dtype in zip(parts, dtypes)]


def _unbatched(level, value):
    return None if value is None else unbatch_value(level, value)


class _Residuals:
    """``fwd``'s residuals (a list of values) with the arrays mapped by a vmap level kept
    unwrapped, to be rewrapped by the vmap level that runs ``bwd``.

    Under nested vmaps the outer level's wrapper gets the inner one's ``_Residuals``: it
    unwraps its own level's values among the inner one's, and rebuilds an inner
    ``_Residuals`` for the inner wrapper to rebuild in turn.
    """

    def __init__(self, residuals, level):
        self.inner = residuals if isinstance(residuals, _Residuals) else None
        values = list(residuals.values if self.inner is not None else residuals)
        self.mask = [traced_by(v, level) for v in values]
        self.values = [v._value if batched else v for v, batched in zip(values, self.mask)]

    def rebuild(self, level):
        values = [BatchTracer(level, v) if batched else v for v, batched in zip(self.values, self.mask)]
        if self.inner is None:
            return values
        inner = copy.copy(self.inner)
        inner.values = values
        return inner


def copied_as_itself(tracer):
    """Make ``copy.copy`` and ``copy.deepcopy`` of ``tracer`` (a coordinate of an argument
    entering its vmap level, which functions read and do not write) return ``tracer`` itself.

    xarray deep-copies coordinates (``x.copy()``, ``xr.DataArray(data, coords=x.coords)``)
    and later compares the copies with the original when it merges them: the same object
    needs no comparison, where two copies need the examples' values (which lf.jit does not
    know)."""
    tracer._level.copied_as_itself[id(tracer)] = tracer


def batch_value(level, value, axis=0):
    """``value`` mapped by ``level`` over its positional ``axis``."""
    return BatchTracer(level, kcore.move_batch_axis_to_front(value, axis))


def unbatch_value(level, value, axis=0):
    """The array behind ``value`` with ``level``'s batch axis at ``axis`` (broadcast if unmapped)."""
    if type(value) is BatchTracer and value._level is level:
        inner = value._value
    else:
        inner = kcore.broadcast_batch(value, level.axis_size)
    if axis:
        inner = kcore.moveaxis(inner, 0, axis)
    return inner


def any_example_true(value):
    """Whether any example of a (possibly mapped) boolean value is true: the loop
    condition of ``while_loop`` over all examples of all levels."""
    value = bottom(value)
    return bool(namespace(value).any(value))


# --- branches that agree: lf.vmap(..., branches="agree") ------------------------------------------
# What a Python conversion of a mapped value may return when every example gives the same
# answer: the truth of an `if` (bool), or the value itself (float(), int(), .item(), an
# index, np.asarray), which is then each example's, as in the loop.  A store into a plain
# array ("setitem") keeps its own policy.
_AGREEABLE = frozenset({"bool", "float", "int", "complex", "index", "item", "array", "round", "format"})
_NUMBERS = frozenset({"float", "int", "complex", "item", "round", "format"})
_SHOWN = 4  # examples named per group in a message


class ExampleNames(NamedTuple):
    """How messages name the examples of one vmap level: ``dim`` (None: a positional axis),
    the ``labels`` of its index coordinate (a sequence, a function returning one, or None),
    ``offset`` of this pass's first
    example (``chunk_size``), ``block``: a block of a Dask-backed vmap (positions count
    within the block)."""

    dim: object = None
    labels: object = None
    offset: int = 0
    block: bool = False

    def readable(self):
        """Whether the labels can be read: not where lf.jit records them (they travel as data
        in a Dask block's program, or in the program of vmap(chunk_size=k, jit=...)'s chunks)."""
        try:
            if callable(self.labels):
                with kept_traced():
                    self.labels()
        except TransformError:
            return False
        return True

    def label(self, k):
        try:
            with kept_traced():
                labels = self.labels() if callable(self.labels) else self.labels
        except TransformError:  # labels recorded by lf.jit: positions only
            return None
        if labels is None or not 0 <= k < len(labels):
            return None
        value = labels[k]
        if isinstance(value, (str, np.str_)):
            return f"{self.dim}={str(value)!r}"
        if isinstance(value, np.generic) and value.dtype.kind in "biufc":
            value = value.item()
        return f"{self.dim}={value}"


def _describe_examples(levels, indices):
    """``"examples 0, 2 (sample=10, 30)"``: the examples at ``indices`` (tuples of positions,
    one per level of ``levels``, outermost first), at most ``_SHOWN`` of them."""
    shown = indices[:_SHOWN]
    names = levels[0].examples if len(levels) == 1 and levels[0].examples is not None else None
    if len(levels) == 1:
        positions = ", ".join(str(k[0] + (names.offset if names else 0)) for k in shown)
        labels = [names.label(k[0]) for k in shown] if names is not None else []
    else:
        positions = ", ".join("(" + ", ".join(str(p + (lv.examples.offset if lv.examples else 0))
                                              for p, lv in zip(k, levels)) + ")" for k in shown)
        labels = []
        for k in shown:
            parts = [lv.examples.label(p) if lv.examples is not None else None for p, lv in zip(k, levels)]
            labels.append(", ".join(p for p in parts if p) or None)
    more = f" and {len(indices) - _SHOWN} more" if len(indices) > _SHOWN else ""
    text = f"example{'s' if len(indices) > 1 else ''} {positions}{more}"
    if any(lv.examples is not None and lv.examples.block for lv in levels):
        text += " of its Dask block"
    elif any(lv.examples is not None and not lv.examples.readable() for lv in levels):
        text += " of its chunk (vmap(chunk_size=...) run as one lf.jit program: positions within the chunk)"
    labels = [label for label in labels if label]
    if labels:
        text += f" ({(', ' if len(levels) == 1 else '; ').join(labels)})"
    return text


def _mapping_levels(tracer):
    """The vmap levels that map ``tracer`` (the axes in front of its bottom value, outermost
    first), and whether its values are known (no lf.jit recording among its levels)."""
    levels, value, known_values = [], tracer, True
    while isinstance(value, Tracer):
        if type(value) is BatchTracer:
            levels.append(value._level)
        if value._level.abstract:
            known_values = False
        value = value._value
    levels.reverse()
    return levels, known_values


def _host(array):
    """``array`` as a NumPy array (a CuPy one copied from the device)."""
    if backend_of(array).on_device:
        return backend_of(array).to_host(array)
    try:
        return np.asarray(array)
    except (TypeError, ValueError, RuntimeError):
        return np.from_dlpack(array)


def _not_agreeable(tracer, what, levels, known_values):
    """The policy error of ``what`` (as without branches="agree"), with the reason why
    agreement could not be used here; None where agreement can be used (under lf.jit too:
    the decision is then guarded, see :func:`guard_decision`)."""
    if not known_values and recording_under(tracer) is None:  # pragma: no cover - an abstract level that cannot guard
        note = ("lf.vmap(..., branches='agree') decides from the examples' values, and here they are "
                "unknown (an abstract level that records no guards).")
    else:
        refusing = [lv for lv in levels if lv.branches != "agree"]
        if not refusing:
            return None
        dims = ", ".join(repr(lv.examples.dim) if lv.examples is not None and lv.examples.dim is not None
                         else "a positional axis" for lv in refusing)
        note = (f"branches='agree' applies to the examples of every vmap that maps the value, and it is "
                f"also mapped over {dims} by a vmap with branches='error': give that vmap "
                "branches='agree' too.")
    return note


# --- guards: a decision taken from recorded values (lf.jit) ----------------------------------------
# lf.jit records on this call's values: a decision taken from them (an `if` that every example
# agrees on, a float() that every example holds) is the recording's, and a later call may decide
# otherwise.  The recording keeps the decision as a guard: the traced values it was taken from
# (an extra output of the program) and a test that a later run's values lead to the same
# decision; lf.jit checks it after each replay, before writing into the arguments, and traces
# again where it fails.
def recording_under(value):
    """The tracer of an abstract level that records guards (lf.jit) under ``value`` (the
    array of every example of every vmap level that maps it), brought up to date; or None."""
    while isinstance(value, Tracer):
        level = value._level
        if level.abstract:
            if getattr(level, "guard", None) is None:
                return None
            level.output_slot(value)  # a view: its values brought up to date
            return value
        value = value._value
    return None


def guard_decision(value, holds, what, answer):
    """Where ``value`` is recorded by lf.jit: record the guard ``holds`` (a function of the
    recorded array under ``value``, True where a later call decides as this one), named
    ``what``, which took ``answer``.  Nothing where ``value`` is not recorded."""
    recorded = recording_under(value)
    if recorded is not None:
        recorded._level.guard(recorded, holds, what, answer)


def check_examples(value, failing, error, what):
    """A library's check of its input ``value`` (mapped or not, traced by any transform),
    made per example: ``failing(rows)`` takes the values of the examples, one row each (a 2-d
    NumPy array), and says which fail.  Where some fail, ``error(examples)`` is raised
    (``examples``: ``"examples 1, 3 (sample=10, 30)"``, or None where ``value`` is not mapped),
    as the loop raises for them; otherwise nothing, and under lf.jit the check is a guard
    named ``what``: a later call whose examples fail it traces again, and raises."""
    levels, known_values = _mapping_levels(value)
    for lv in levels:
        if not lv.alive:
            lv.escaped(what)
    if _PROBE.get() is not None:  # a stand-in example of a Dask-backed vmap: each block checks
        return
    if not known_values:
        recording_under(value)  # a view recorded by lf.jit: brought up to date
    raw = _host(bottom(value))
    depth = len(levels)
    count = math.prod(raw.shape[:depth])
    bad = np.asarray(failing(raw.reshape(count, -1)), dtype=bool)
    if bad.any():
        if not levels:
            raise error(None)
        indices = [tuple(int(p) for p in np.unravel_index(flat, raw.shape[:depth])) for flat in np.flatnonzero(bad)]
        raise error(_describe_examples(levels, indices))
    if not known_values:
        guard_decision(value, lambda later: not np.any(failing(_host(later).reshape(count, -1))),
                       _decided_at(what), "every example passing it")  # a failure raises: never shown


def _decided_at(what):
    site = diagnose.call_site()
    return f"{what} at {site.location}" if site.location else what


def _truth_holds(answer):
    """Whether every example of a later run still gives ``answer`` (a bool)."""
    if answer:
        return lambda value: bool(np.all(_host(value)))
    return lambda value: not np.any(_host(value))


def _same_values_holds(first):
    """Whether every example of a later run holds ``first`` (to the bit, NaN equal to NaN)."""
    first = np.asarray(first)

    def holds(value):
        raw = _host(value)
        if raw.size % max(first.size, 1) or (first.size == 0) != (raw.size == 0):
            return False
        raw = raw.reshape((-1,) + first.shape)
        equal = raw == first
        if first.dtype.kind == "f":
            equal &= np.signbit(raw) == np.signbit(first)
        if first.dtype.kind in "fc":
            equal |= np.isnan(raw) & np.isnan(first)
        return bool(equal.all())

    return holds


def _raise_with_note(tracer, what, note):
    try:
        unknown_value_policy(tracer, what, VMAP_WORDS)
    except TransformError as error:
        raise type(error)(f"{error} {note}").with_traceback(error.__traceback__) from None
    raise AssertionError("unreachable")  # pragma: no cover


def agreed_value(tracer, what):
    """``tracer``'s concrete value for the conversion ``what`` under ``branches="agree"``.

    ``bool``: the examples' truth values, a Python bool when they all agree; the other kinds:
    the examples' values when they are all equal (NaN equal to NaN), as a NumPy array.
    Otherwise the policy error, naming the examples that disagree.  Every vmap level that maps
    the value must allow agreement, and its values must be known (not under lf.jit).
    """
    level = tracer._level
    if not level.alive:
        level.escaped(what)
    levels, known_values = _mapping_levels(tracer)
    note = _not_agreeable(tracer, what, levels, known_values)
    if note is not None:
        _raise_with_note(tracer, what, note)
    probe = _PROBE.get()
    if probe is not None:
        return probe.decide(tracer, what, levels)
    recording = None if known_values else recording_under(tracer)
    raw = _host(bottom(tracer))
    batch = raw.shape[:len(levels)]
    count = math.prod(batch)
    per_example = raw.reshape((count,) + raw.shape[len(levels):])
    if count == 0:  # no example to ask
        _raise_with_note(tracer, what, "(lf.vmap(..., branches='agree'): the batch has no examples to agree.)")
    if what == "bool":
        if per_example[0].size != 1:
            return per_example[0]  # bool() raises NumPy's own error, as the loop's first example would
        truth = (per_example != 0).reshape(count)
        answer = True if truth.all() else False if not truth.any() else None
        if answer is not None:
            if recording is not None:
                recording._level.guard(recording, _truth_holds(answer), _decided_at("a branch decided by bool()"),
                                       answer)
            return answer
        raise DataDependentControlFlowError(_disagreement(
            levels, batch, truth, "bool() of a mapped value (an `if`, `while`, `and`/`or` or assert on it) "
            "under lf.vmap(..., branches='agree'): the examples take different branches",
            lambda answer, many: f"give{'' if many else 's'} {bool(answer)}", _BRANCH_FIX))
    same = _same_as_first(per_example)
    if same.all():
        if recording is not None:
            shown = (repr(per_example[0].item()) if per_example[0].size == 1 else
                     f"one set of values of shape {per_example[0].shape} in every example")
            taken_by = {"array": "np.asarray", "index": "an index"}.get(what, f"{what}()")
            recording._level.guard(recording, _same_values_holds(per_example[0]),
                                   _decided_at(f"a value taken by {taken_by}"), shown)
        return per_example[0]
    if what not in _NUMBERS:  # np.asarray, an index: the usual error, saying which examples differ
        others = [tuple(int(p) for p in np.unravel_index(flat, batch)) for flat in np.flatnonzero(~same)]
        _raise_with_note(tracer, what, (
            f"(lf.vmap(..., branches='agree') accepts it only where every example holds the same values; here "
            f"{_describe_examples(levels, others)} hold{'s' if len(others) == 1 else ''} other values than "
            f"{_describe_examples(levels, [(0,) * len(batch)])}.)"))
    if per_example[0].size == 1:  # one number per example: name them
        same = per_example.reshape(count)
    raise ItemError(_disagreement(
        levels, batch, same, f"{what}() of a mapped value under lf.vmap(..., branches='agree'): the examples "
        "hold different values",
        (lambda answer, many: f"hold{'' if many else 's'} {answer!r}") if per_example[0].size == 1 else
        (lambda answer, many: f"hold{'' if many else 's'} "
                              f"{'the same values as example 0' if answer else 'other values'}"),
        "Keep it as an array (a 0-d DataArray works in arithmetic), or return it."))


def _same_as_first(per_example):
    """Per example (axis 0), whether it holds the same values as the first (NaN equal to NaN)."""
    if per_example.shape[0] == 0:
        return np.ones(0, dtype=bool)
    first = per_example[0]
    equal = per_example == first
    if per_example.dtype.kind in "fc":
        equal |= np.isnan(per_example) & np.isnan(first)
    return equal.reshape(per_example.shape[0], -1).all(axis=1)


def _agreement_values(value, culprit):
    """(the levels that map ``value``, its values on the host with their axes in front)
    where every one of those levels allows ``branches="agree"``; None otherwise."""
    levels, known_values = _mapping_levels(value)
    if not levels or any(lv.branches != "agree" for lv in levels):
        return None
    if not known_values and recording_under(value) is None:
        return None
    for lv in levels:
        if not lv.alive:
            lv.escaped(culprit)
    if _PROBE.get() is not None:
        raise DynamicShapeError(_probe_refusal(culprit))
    return levels, _host(bottom(value))


def agreed_constant(value, culprit):
    """The values of a mapped ``value`` that every example holds (a NumPy array), under
    ``branches="agree"``; None where agreement is not allowed or the examples differ."""
    found = _agreement_values(value, culprit)
    if found is None:
        return None
    levels, raw = found
    count = math.prod(raw.shape[:len(levels)])
    per_example = raw.reshape((count,) + raw.shape[len(levels):])
    if count == 0 or not _same_as_first(per_example).all():
        return None
    guard_decision(value, _same_values_holds(per_example[0]), _decided_at(f"a shape decided by {culprit}"),
                   f"one set of values of shape {per_example[0].shape} in every example")
    return per_example[0]


_BRANCH_FIX = ("Use xr.where / np.where to select per example, lf.cond for branches or lf.while_loop "
               "for loops.")


def _disagreement(levels, batch, answers, problem, says, fix, location=True):
    """``problem``, then which examples give which answer (the fewer first), and ``fix``."""
    groups = {}
    for flat, answer in enumerate(answers.tolist()):
        groups.setdefault(answer, []).append(tuple(int(p) for p in np.unravel_index(flat, batch)))
    ordered = sorted(groups.items(), key=lambda item: len(item[1]))
    parts = [f"{_describe_examples(levels, found)} {says(answer, len(found) > 1)}" for answer, found in ordered]
    site = diagnose.call_site()
    where = f"at {site.location}: " if site.location and location else ""
    return (f"{where}{problem}: {'; '.join(parts)}. branches='agree' accepts it only where every example gives "
            f"the same answer (then the result is the loop's). {fix}")


def agreed_positions(value, culprit):
    """``np.nonzero(value)`` of a mapped ``value`` under ``branches="agree"``: a tuple of
    integer positions, one per axis, each mapped by the levels that map ``value`` (example
    k's positions are those of its own nonzero elements), where every example has the same
    number of them; DynamicShapeError naming the counts otherwise.  None where agreement is
    not allowed (the caller raises its usual error)."""
    found = _agreement_values(value, culprit)
    if found is None:
        return None
    levels, raw = found
    batch = raw.shape[:len(levels)]
    count = math.prod(batch)
    logical = raw.shape[len(levels):]
    if not logical or count == 0:
        return None  # a 0-d mask adds an axis; no examples: the usual error
    per_example = raw.reshape((count,) + logical)
    counts = np.count_nonzero(per_example.reshape(count, -1), axis=1)
    if (counts != counts[0]).any():
        site = diagnose.call_site()
        where = f" (called from {site.location})" if site.location else ""
        raise DynamicShapeError(_disagreement(
            levels, batch, counts, f"{culprit} under lf.vmap(..., branches='agree'){where}: the examples select "
            "different numbers of elements, and a batch cannot hold results of different shapes",
            lambda answer, many: f"select{'' if many else 's'} {answer}",
            "Keep the shape with masking: x.where(mask) (NaN elsewhere) or xr.where(mask, x, 0).",
            location=False))
    k = int(counts[0])
    recording = recording_under(value)
    if recording is not None:  # lf.jit: later calls must select k elements in every example too
        recording._level.guard(recording, _count_holds(len(levels), k), _decided_at(f"a shape decided by {culprit}"),
                               f"{k} element{'s' if k != 1 else ''} in every example")
    out = []
    for axis in range(len(logical)):
        find = _positions_along(axis, len(levels), k)
        positions = find(bottom(value))
        if recording is not None:  # computed at every run from that run's mask
            positions = recording._level.derived(find, recording, positions)
        for lv in levels:
            positions = BatchTracer(lv, positions)
        out.append(positions)
    return tuple(out)


def _count_holds(depth, k):
    """Whether every example (the first ``depth`` axes) of a later run has ``k`` nonzero elements."""
    def holds(value):
        raw = _host(value)
        count = math.prod(raw.shape[:depth])
        return bool((np.count_nonzero(raw.reshape(count, -1), axis=1) == k).all())
    return holds


def _positions_along(axis, depth, k):
    """``np.nonzero`` of each example (the first ``depth`` axes of a value) along ``axis``,
    stacked (``k`` per example), on the value's device.  Examples with another count (a later
    run under lf.jit, whose guard then fails) give zeros of the same shape."""
    def find(value):
        raw = _host(value)
        batch = raw.shape[:depth]
        per_example = raw.reshape((math.prod(batch),) + raw.shape[depth:])
        found = [np.nonzero(example)[axis] for example in per_example]
        if all(len(f) == k for f in found):
            positions = np.stack(found).reshape(batch + (k,)) if found else np.zeros(batch + (k,), np.intp)
        else:
            positions = np.zeros(batch + (k,), np.intp)
        if not backend_of(value).host_values:  # CuPy: on the device, as the values
            positions = namespace(value).asarray(positions)
        return positions
    return find


# --- Dask: the one-example run that finds the output structure --------------------------------------
_PROBE: ContextVar = ContextVar("labeled_func_branch_probe", default=None)
_PROBE_RUNS = 16  # at most this many runs of the stand-in, each with other answers


register_agreement(agreed_constant, agreed_positions)
register_checks(check_examples)


def _probe_refusal(what):
    return (f"{what} of a mapped value under lf.vmap(..., branches='agree') with Dask-backed inputs: the "
            "output's sizes and structure are fixed when the graph is built, from a stand-in example (not "
            "the data), so only bool() (an `if` on a value) may follow the examples' values there; "
            "float(), .item(), np.asarray and data-dependent shapes may not. Load the data first "
            "(.compute()) to use them.")


class _Probe:
    """Answers of the ``bool()`` conversions of one run on a stand-in example: the
    ``prescribed`` ones first, then those of the stand-in's values; ``decisions`` records them."""

    def __init__(self, prescribed):
        self.prescribed = prescribed
        self.decisions = []

    def decide(self, tracer, what, levels):
        if what != "bool":
            raise (ItemError if what in _NUMBERS else ConversionError)(_probe_refusal(f"{what}()"))
        k = len(self.decisions)
        if k < len(self.prescribed):
            answer = self.prescribed[k]
        else:
            token = _PROBE.set(None)
            try:
                answer = agreed_value(tracer, what)
            finally:
                _PROBE.reset(token)
            if not isinstance(answer, bool):
                return answer  # not a single truth value: bool() raises NumPy's error
        self.decisions.append(answer)
        return answer


def probing_branches(run, quiet=False):
    """``run()``, the function on a stand-in example of a Dask-backed vmap (its values are not
    the data's), where ``bool()`` of a mapped value under ``branches="agree"`` answers from the
    stand-in.  A validation such as ``if np.nanmax(x) < 100: raise ValueError(...)`` may then
    raise on the stand-in's values: the run is repeated with the answers changed, last first
    (a depth-first search over the branches, at most ``_PROBE_RUNS`` runs), until one returns;
    the blocks check the real answers of their examples.  ``quiet``: warnings of these runs
    are not shown (the blocks warn)."""
    stack = []  # [answer, flipped] per decision of the current path
    first_error = None
    for _ in range(_PROBE_RUNS):
        probe = _Probe([answer for answer, _ in stack])
        token = _PROBE.set(probe)
        try:
            if quiet:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    return run()
            return run()
        except TransformError:
            raise
        except Exception as error:  # noqa: BLE001 - the function's own error, on the stand-in's values
            if first_error is None:
                first_error = error
            stack.extend([answer, False] for answer in probe.decisions[len(stack):])
            while stack and stack[-1][1]:
                stack.pop()
            if not stack:
                break
            stack[-1] = [not stack[-1][0], True]
        finally:
            _PROBE.reset(token)
    if hasattr(first_error, "add_note") and probe.decisions:
        first_error.add_note("(raised while lf.vmap ran the function on a stand-in example, to find the output "
                             "structure of a Dask-backed call, on every path of its `if`s on mapped values)")
    raise first_error
