"""NumPy functions called on DataArrays and Variables that hold traced values.

xarray's DataArray and Variable do not take part in NumPy's ``__array_function__``
protocol, so ``np.fft.ifftshift(da)``, ``np.gradient(da)`` or ``np.nanmax(da)`` (xrft, pyet,
geocat and MetPy call NumPy so) run NumPy's own code on the DataArray: functions that
index or call methods give a DataArray back (``np.flip(da)``), the others convert it with
``np.asarray`` and give a NumPy array.  Under a transform that conversion meets a traced
value and is refused (``ConversionError``), though the function has a kernel.

This module gives both classes an ``__array_function__``:

- where no argument holds a traced value, NumPy's own implementation runs, exactly as
  without it (``func._implementation``; with another type that takes part in the
  protocol among the arguments, ``NotImplemented``: that type answers, as before);
- where one does, NumPy's implementation runs first on the arguments as they are (a
  function that gives a DataArray back still does); where it converts a traced value,
  the function is called again with each DataArray and Variable replaced by its data,
  which the tracers' own ``__array_function__`` answers: the plain array NumPy would have
  returned, traced.

:func:`install` patches only where xarray's classes do not define the protocol
themselves (``STATUS`` says why not).
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from .engine import is_traced
from .errors import ConversionError

__all__ = ["install", "installed", "STATUS"]

STATUS = "not installed"
_CLASSES = (xr.DataArray, xr.Variable)
_NDARRAY_PROTOCOL = np.ndarray.__array_function__


def _holds_traced(value):
    if isinstance(value, _CLASSES):
        return is_traced(value.variable._data if isinstance(value, xr.DataArray) else value._data)
    if isinstance(value, (list, tuple)):
        return any(_holds_traced(v) for v in value)
    return False


def _plain(value):
    """``value`` with every DataArray and Variable (in lists and tuples too) replaced by its data."""
    if isinstance(value, _CLASSES):
        return value.data
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


def _array_function(self, func, types, args, kwargs):
    if not (_holds_traced(args) or _holds_traced(list(kwargs.values()))):
        if all(issubclass(t, _CLASSES) or t.__array_function__ is _NDARRAY_PROTOCOL for t in types):
            return func._implementation(*args, **kwargs)
        return NotImplemented   # another type of the protocol answers, as without this module
    try:
        return func._implementation(*args, **kwargs)
    except ConversionError as error:
        result = func(*_plain(args), **{k: _plain(v) for k, v in kwargs.items()})
        if _wrapped_by_numpy(error) and args and isinstance(args[0], _CLASSES):
            # NumPy's _wrapit (np.swapaxes, np.take... of an object without that method) converts
            # the object, calls the array's method and hands the result to the object's
            # __array_wrap__: a DataArray gives a DataArray back, as here
            return args[0].__array_wrap__(result, None, False)
        return result


def _wrapped_by_numpy(error):
    """Whether ``error`` was raised where NumPy's ``_wrapit`` converted its object."""
    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "_wrapit" and tb.tb_frame.f_globals.get("__name__", "").startswith("numpy"):
            return True
        tb = tb.tb_next
    return False


def installed():
    """Whether NumPy functions of traced DataArrays and Variables go through this module."""
    return all(getattr(cls.__dict__.get("__array_function__"), "_labeled_func_hook", False) for cls in _CLASSES)


def install():
    """Patch xarray's classes (idempotent); return ``STATUS``."""
    global STATUS
    if installed():
        return STATUS
    defined = [cls.__name__ for cls in _CLASSES if hasattr(cls, "__array_function__")]
    if defined:
        STATUS = f"not installed: xarray's {', '.join(defined)} define __array_function__ themselves"
        return STATUS
    if not hasattr(np.fft.ifftshift, "_implementation"):
        STATUS = "not installed: NumPy's functions have no _implementation"
        return STATUS
    _array_function._labeled_func_hook = True
    for cls in _CLASSES:
        cls.__array_function__ = _array_function
    STATUS = "installed"
    return STATUS


install()  # at import (labeled_func imports this module): idempotent, version-checked
