"""The policy errors of API.md: all :class:`TransformError`, itself a RuntimeError.

RuntimeError, not TypeError/ValueError: xarray swallows those in places (for
instance ``Variable.equals`` returns False), and a policy error must reach the user.
Defined here, beside the engine that raises them; ``labeled_func.errors`` is their
public home.
"""
from __future__ import annotations

import re

__all__ = [
    "TransformError", "InplaceError", "OutArgumentError", "DataDependentControlFlowError",
    "ItemError", "DynamicShapeError", "RandomnessError", "ConversionError",
    "EscapedTracerError", "UnsupportedOperationError",
]


class TransformError(RuntimeError):
    """Base class of every error a transform raises for a policy it cannot follow."""


class _Located(TransformError):
    """An error whose message ends with the user's line that led to it (``at file:line``),
    read from the traceback when the message is shown, unless the message names one.
    ``locate(traceback) -> "file:line" | None`` is the engine's reading of the stack
    (``diagnose.traceback_location``, set when the engine loads)."""

    locate = None

    def __str__(self):
        message = super().__str__()
        if _LOCATION.search(message) or _Located.locate is None:
            return message
        where = _Located.locate(self.__traceback__)
        return f"{message} (at {where})" if where else message


_LOCATION = re.compile(r"(called from|at) [^\s()]+:\d+")


class InplaceError(_Located):
    """A mapped value written in place into an unmapped array."""


class OutArgumentError(_Located):
    """``out=`` given to an operation on a traced value."""


class DataDependentControlFlowError(TransformError):
    """``bool()``, ``if`` or ``while`` on a mapped value."""


class ItemError(TransformError):
    """``.item()``, ``float()``, ``int()`` on a mapped value."""


class DynamicShapeError(TransformError):
    """An operation whose output shape depends on the values of a mapped input."""


class RandomnessError(_Located):
    """A random draw under ``vmap(..., randomness="error")``."""


class ConversionError(TransformError):
    """``.values``, ``np.asarray`` or ``.to_numpy()`` on a traced value."""


class EscapedTracerError(TransformError):
    """A traced value used after the transform that made it returned."""


class UnsupportedOperationError(_Located):
    """A NumPy function with no kernel."""


for _cls in list(globals().values()):
    if isinstance(_cls, type) and issubclass(_cls, TransformError):
        _cls.__module__ = "labeled_func.errors"
del _cls
