"""The generator of NumPy's fused kernels: one ``numexpr`` evaluation per tree."""
from __future__ import annotations

import math
import threading

import numpy as np

from ... import replay
from .. import thresholds
from . import Generator, register

try:  # the field's fused-expression evaluator: without it, programs run unfused
    import numexpr
    import numexpr.necompiler
except ImportError:  # pragma: no cover - a dependency
    numexpr = None

# numexpr's names of the dtypes it fuses (its "float" kind is single precision)
_NUMEXPR_TYPES = {np.dtype(np.float64): np.float64, np.dtype(np.float32): float, np.dtype(np.bool_): bool}


class NumexprGenerator(Generator):
    """NumPy's arrays (exactly ``numpy.ndarray``): one ``numexpr.NumExpr`` per expression,
    called with ``out=``.  numexpr computes a repeated operand's subtree twice, so such an
    operand stays a leaf; its libm's float32 transcendental functions are not NumPy's."""

    name = "numexpr"
    by_constant = True
    reads_shifted = True
    rounds_as_numpy = False
    reads_only = True
    max_leaves = 24  # numexpr takes at most 32 operands (its output and temporaries count too)

    def available(self):
        return numexpr is not None

    def claims(self, value):
        return type(value) is np.ndarray

    def min_size(self):
        return thresholds.FUSE_MIN_SIZE  # read at each call: the tests set it to 0

    def spelling(self, fusion):
        return fusion.numexpr

    def worth_fusing(self, tree):
        """A tree with a transcendental function when numexpr has threads, or a tree of two
        nodes or more whose result has ``CHEAP_FUSE_MIN_SIZE`` elements (below, the passes
        it saves are over data in cache)."""
        if tree.heavy and (tree.size > 1 or numexpr.get_num_threads() > 1):
            return True
        shape = tree.node.out[0] if tree.node.out is not None else ()
        return tree.size > 1 and math.prod(shape) >= thresholds.CHEAP_FUSE_MIN_SIZE

    def compile(self, expression, names, dtypes, out):
        signature = [(name, _NUMEXPR_TYPES[np.dtype(dtype)]) for name, dtype in zip(names, dtypes)]
        return PerThread(expression, signature)

    def shifted(self, evaluate, leaves, out, axis):
        return replay.rolled_evaluation(evaluate, leaves, out, axis)


class PerThread:
    """A compiled numexpr expression, called as ``evaluate(*arrays, out=out)``: one
    ``numexpr.NumExpr`` object per thread that calls it.  An object keeps the operands of
    the call it is running (their strides, its memory of them), so two threads calling one
    object at once race: replays of one program from several threads (Dask blocks) aborted
    the process (double free) or returned wrong values where a rolled evaluation calls its
    object on contiguous and on strided operands (measured 2026-12-08, numexpr 2.14).  A
    thread compiles its own object at its first call."""

    __slots__ = ("expression", "signature", "uses_vml", "_local", "__weakref__")

    def __init__(self, expression, signature):
        self.expression, self.signature = expression, signature
        self.uses_vml = numexpr.necompiler.getExprNames(expression, {})[1]  # the keyword numexpr asks for beside out=
        self._local = threading.local()
        self._local.compiled = self._compile()  # the compiling thread's, and the errors of the expression now

    def _compile(self):
        return numexpr.NumExpr(self.expression, signature=self.signature)

    def __call__(self, *arrays, out=None):
        try:
            compiled = self._local.compiled
        except AttributeError:
            compiled = self._local.compiled = self._compile()
        return compiled(*arrays, out=out, ex_uses_vml=self.uses_vml)

    def __repr__(self):
        return f"<numexpr {self.expression!r}, one object per thread>"


NUMEXPR = NumexprGenerator()
register(NUMEXPR)
