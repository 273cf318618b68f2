"""The functions the transforms return, shown as the call that made them.

``lf.vmap(f, dim="sample")`` returns a :class:`Transformed`: it calls the transform's
closure, keeps ``f``'s ``__name__``, ``__doc__``, ``__module__`` and ``__wrapped__`` (so
``inspect.signature`` gives ``f``'s signature), binds as a method like a function, and its
repr is ``lf.vmap(f, dim='sample')``, nested transforms nested, with only the options that
differ from their defaults (as ``functools.partial`` shows its arguments).
"""
from __future__ import annotations

import functools
import reprlib
import types
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["Transformed", "call_repr", "shown", "transformed"]

_REPR = reprlib.Repr()
_REPR.maxstring = 60
_REPR.maxother = 60


class Transformed:
    """A transform's result: calls ``call``; shows as ``lf.<transform>(func, option=value)``."""

    def __init__(self, call: Callable[..., Any], func: Callable[..., Any], transform: str,
                 options: tuple = (), display: Any = None) -> None:
        self._call = call
        self._transform = transform
        self._options = options  # ((keyword, value, default), ...): shown where value is not the default
        self._display = func if display is None else display
        functools.update_wrapper(self, func, updated=())

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        return self._call(*args, **kwargs)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """A method, as a function stored on a class is (``Model.loss = lf.grad(f)``)."""
        return self if obj is None else types.MethodType(self, obj)

    def __repr__(self) -> str:
        return call_repr(f"lf.{self._transform}", self._display, self._options)


def transformed(call: Callable[..., Any], func: Callable[..., Any], transform: str, options: tuple = (),
                display: Any = None) -> Transformed:
    """``call`` wrapped as ``func`` transformed by ``lf.<transform>`` with ``options``
    (``(keyword, value, default)`` triples); ``display`` is the function shown, if not ``func``."""
    return Transformed(call, func, transform, options, display)


def call_repr(name: str, func: Any, options: tuple = ()) -> str:
    """``name(func, keyword=value, ...)`` with the options that are not their defaults."""
    parts = [shown(func)]
    parts += [f"{keyword}={_REPR.repr(value)}" for keyword, value, default in options if not _is_default(value, default)]
    return f"{name}({', '.join(parts)})"


def shown(func: Any) -> str:
    """How a function is shown inside a transform's repr: a transform's (or a jitted or
    custom function's) own repr, a function's name, NumPy's ufuncs as ``np.sin``."""
    if isinstance(func, np.ufunc) and getattr(np, func.__name__, None) is func:
        return f"np.{func.__name__}"
    if isinstance(func, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
        name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None)
        if isinstance(name, str):
            return name.rpartition("<locals>.")[2]  # a function defined in a function: its own name
    if type(func).__module__.partition(".")[0] == "labeled_func":  # a transform, a jitted or custom function
        return repr(func)
    if type(func).__repr__ is not object.__repr__:
        return _REPR.repr(func)
    name = getattr(func, "__name__", None)
    return name if isinstance(name, str) else _REPR.repr(func)


def _is_default(value, default):
    if value is default:
        return True
    if type(value) is not type(default):  # 1 is not 1.0, True is not 1
        return False
    try:
        return bool(value == default)
    except Exception:  # noqa: BLE001 - an array, or an object without a truth value: shown
        return False
