"""What a fused expression takes: its dtypes, and each primitive's spellings.  How each
primitive is spelled in numexpr and in CUDA C, its cost and the dtypes it fuses on are
declared with the primitive (``prim.fusion``, a ``labeled_func_kernels.primitive.Fusion``:
kernels/elementwise.py gives each elementwise primitive's in its row); :func:`fusion_of`
reads it, and each code generator (``codegen``) takes the spelling in its language."""
from __future__ import annotations

import numpy as np

_FLOAT, _SINGLE, _BOOL = np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.bool_)


def fusion_of(prim):
    """The :class:`Fusion` a primitive declares (None for none, and for a node without a
    primitive: a fused expression, a replay kernel)."""
    return getattr(prim, "fusion", None)


def spelled(prim):
    """Whether ``prim`` has a numexpr spelling of its own (every operand an operand of the
    expression; not ``power``, spelled by its constant exponent only)."""
    fusion = getattr(prim, "fusion", None)
    return fusion is not None and fusion.numexpr is not None
