"""The value a recording traces (:class:`JitTracer`: this run's value and its slot), and the
words of lf.jit's policy errors."""
from __future__ import annotations

import sys

from ..batching import compared_equal, equality_check
from ..stack import structure_value
from ..tracer import PrimalTracer, Wording, unknown_value_policy


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
        value = structure_value(self, what)  # structure: compared by content after each later replay
        if value is not None:
            return value
        return unknown_value_policy(self, what, JIT_WORDS)

    def __repr__(self):
        return f"JitTracer(slot {self._slot}, shape={self.shape}, dtype={self.dtype})"
