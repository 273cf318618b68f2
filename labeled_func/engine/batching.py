"""BatchTracer and the vmap level.

A BatchTracer holds its value with the level's batch axis physically first; the
shape it reports excludes that axis.  Values that are not batched at a level are
never wrapped (and never broadcast just to simplify a rule).
"""
from __future__ import annotations

import copy
import sys

import numpy as np

from labeled_func_kernels import core as kcore
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import shape as kshape
from labeled_func_kernels.backend import namespace, namespace_dtype
from labeled_func_kernels.indexing import getitem_static
from labeled_func_kernels.primitive import bottom, known

from .errors import DynamicShapeError, UnsupportedOperationError
from .stack import (Level, active, bind_custom_jvp, bind_custom_vjp, bind_per_example, differentiated, inplace_assign,
                    recorded_equal, traced_by)
from .tracer import Tracer, Wording, unknown_value_policy

__all__ = ["BatchLevel", "BatchTracer", "any_example_true", "batch_value", "unbatch_value",
           "register_equality_checks", "copied_as_itself"]


class BatchLevel(Level):
    """One vmap: ``axis_size`` examples, and how random draws behave."""

    name = "vmap"
    batches = True
    __slots__ = ("axis_size", "randomness", "copied_as_itself")

    def __init__(self, axis_size, randomness="error"):
        super().__init__()
        self.axis_size = axis_size
        self.randomness = randomness
        self.copied_as_itself = {}  # id -> tracer: see copied_as_itself()

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

    def _fresh(self):
        """A vmap level like this one, for running a rule over the same examples."""
        return BatchLevel(self.axis_size, self.randomness)

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
        return unknown_value_policy(self, what, VMAP_WORDS)

    def __repr__(self):
        return f"BatchTracer(vmap level {self._level.depth}, batch of {self._level.axis_size}, shape={self.shape}, dtype={self.dtype}):\n{self._value!r}"


VMAP_WORDS = Wording(
    transform="vmap",
    setitem=("writing a mapped value into an unmapped array ({store}{where}): it "
             "would need more elements than it has. Build the buffer from the mapped "
             "input, e.g. xr.zeros_like(x) / np.zeros_like(x), or use out-of-place ops."),
    bool=("bool() of a mapped value (an `if`, `while`, `and`/`or` or assert on it): "
          "under vmap each example may take a different branch."),
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
