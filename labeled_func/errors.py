"""The policy errors (API.md, "Policies"): every one is a :class:`TransformError`,
itself a ``RuntimeError``.  Bad input (a wrong dim, mismatched sizes) raises
``ValueError`` instead.  :class:`RetraceWarning` is no error: a ``UserWarning`` of
``lf.jit`` (a function traced again and again)."""
from .engine.errors import (ConversionError, DataDependentControlFlowError, DynamicShapeError,
                            EscapedTracerError, InplaceError, ItemError, OutArgumentError,
                            RandomnessError, TransformError, UnsupportedOperationError)

__all__ = [
    "TransformError", "InplaceError", "OutArgumentError", "DataDependentControlFlowError",
    "ItemError", "DynamicShapeError", "RandomnessError", "ConversionError",
    "EscapedTracerError", "UnsupportedOperationError", "RetraceWarning",
]


class RetraceWarning(UserWarning):
    """A function compiled by ``lf.jit`` was traced more times than its
    ``warn_after_traces`` (8 by default): each trace runs the function under xarray, a
    hundred times a replay's cost or more.  The message says why the last trace happened
    (what differed from the nearest signature already compiled: an argument's dtype,
    shape, attrs, a number's value...); the jitted function's ``explain()`` lists every
    reason.  A warning, not an error: the results are right."""
