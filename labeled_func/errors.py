"""The policy errors (API.md, "Policies"): every one is a :class:`TransformError`,
itself a ``RuntimeError``.  Bad input (a wrong dim, mismatched sizes) raises
``ValueError`` instead."""
from .engine.errors import (ConversionError, DataDependentControlFlowError, DynamicShapeError,
                            EscapedTracerError, InplaceError, ItemError, OutArgumentError,
                            RandomnessError, TransformError, UnsupportedOperationError)

__all__ = [
    "TransformError", "InplaceError", "OutArgumentError", "DataDependentControlFlowError",
    "ItemError", "DynamicShapeError", "RandomnessError", "ConversionError",
    "EscapedTracerError", "UnsupportedOperationError",
]
