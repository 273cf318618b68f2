"""NumPy on traced arrays: NumPy function / ufunc -> kernels primitives.

:mod:`.dispatch` holds the registry and the two protocols (``__array_ufunc__``,
``__array_function__``); each family module registers its functions into it.  This
list is the one list of families:
"""
from . import dispatch
from . import dynamic, elementwise, special, reductions, shape, indexing, linalg, fft, creation, functional, polynomial, interp  # noqa: E402
from .dispatch import DEFERRING_TYPES, dispatch_function, dispatch_ufunc
from .indexing import getitem, setitem

FAMILIES = (elementwise, special, reductions, shape, indexing, linalg, fft, creation, dynamic, functional, polynomial, interp)

__all__ = ["DEFERRING_TYPES", "FAMILIES", "dispatch", "dispatch_function", "dispatch_ufunc", "getitem", "setitem"]
