"""The policy errors of API.md: all :class:`TransformError`, itself a RuntimeError.

RuntimeError, not TypeError/ValueError: xarray swallows those in places (for
instance ``Variable.equals`` returns False), and a policy error must reach the user.
Defined here, beside the engine that raises them; ``labeled_func.errors`` is their
public home.
"""
from __future__ import annotations

import os
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
    read from the traceback when the message is shown, unless the message names one."""

    def __str__(self):
        message = super().__str__()
        if _LOCATION.search(message):
            return message
        where = user_line(self.__traceback__)
        return f"{message} (at {where})" if where else message


_LOCATION = re.compile(r"(called from|at) [^\s()]+:\d+")
_LIBRARIES = tuple(os.sep + name + os.sep for name in (
    "labeled_func", "kernels", "xarray", "numpy", "pandas", "dask", "distributed", "scipy", "optree",
    "array_api_compat", "array_api_strict", "cupy", "numexpr", "importlib", "contextlib", "functools"))


def user_line(tb):
    """``file:line`` of the innermost frame of the traceback outside the libraries (the
    user's code), or None."""
    found = None
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not any(part in filename for part in _LIBRARIES) and "pytest" not in filename:
            found = f"{os.path.basename(filename)}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found


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
