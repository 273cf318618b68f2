"""What a fused expression takes: its dtypes, its number of operands, and numexpr itself.
How each primitive is spelled in numexpr and in CUDA C, its cost and the dtypes it fuses
on are declared with the primitive (``prim.fusion``, a ``labeled_func_kernels.primitive.Fusion``:
kernels/elementwise.py gives each elementwise primitive's in its row); :func:`fusion_of`
reads it."""
from __future__ import annotations

import numpy as np

try:  # the field's fused-expression evaluator: without it, programs run unfused
    import numexpr
    import numexpr.necompiler
    _NUMEXPR_TYPE = type(numexpr.NumExpr("a", signature=[("a", np.float64)]))
except ImportError:  # pragma: no cover - a dependency
    numexpr = _NUMEXPR_TYPE = None


_FLOAT, _SINGLE, _BOOL = np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.bool_)
_MAX_LEAVES = 24  # numexpr takes at most 32 operands (its output and temporaries count too)
# numexpr's names of the dtypes it fuses (its "float" kind is single precision)
_NUMEXPR_TYPES = {_FLOAT: np.float64, _SINGLE: float, _BOOL: bool}


def fusion_of(prim):
    """The :class:`Fusion` a primitive declares (None for none, and for a node without a
    primitive: a fused expression, a replay kernel)."""
    return getattr(prim, "fusion", None)


def spelled(prim):
    """Whether ``prim`` has a numexpr spelling of its own (every operand an operand of the
    expression; not ``power``, spelled by its constant exponent only)."""
    fusion = getattr(prim, "fusion", None)
    return fusion is not None and fusion.numexpr is not None
