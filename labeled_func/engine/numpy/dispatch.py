"""NumPy function / ufunc -> kernels: the registry behind NEP-13 and NEP-18.

A Tracer's ``__array_ufunc__`` and ``__array_function__`` come here.  The family
modules of this package fill four tables:

- ``UFUNCS``: ufunc -> the :class:`~kernels.primitive.Primitive` that computes it;
- ``UFUNC_HANDLERS``: ufunc -> ``handler(*inputs)`` for a ufunc computed by a
  composition of primitives (``deg2rad``, ``divmod``) or one that picks its primitive
  from the dtypes (``bitwise_and`` on booleans is ``logical_and``);
- ``UFUNC_METHODS``: ``(ufunc, method)`` -> ``handler(ufunc, inputs, kwargs)`` for
  ``reduce`` and ``accumulate``;
- ``FUNCTIONS``: array function -> a handler with NumPy's signature.

Anything else raises UnsupportedOperationError naming it: there is no silent
per-example fallback.  ``out=`` is handled here once for all of them: only the
in-place form (``out`` is one of the inputs) is allowed, as an in-place update.
"""
from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from labeled_func_kernels import elementwise as ew
from labeled_func_kernels.backend import backend_named, backend_of, dtype_kind
from labeled_func_kernels.primitive import Traced

from ..errors import OutArgumentError, UnsupportedOperationError
from ..stack import inplace_assign

__all__ = ["UFUNCS", "UFUNC_HANDLERS", "UFUNC_METHODS", "FUNCTIONS", "DEFERRING_TYPES", "LAZY_REGISTRATIONS",
           "implements", "implements_ufunc", "implements_method", "dispatch_ufunc", "dispatch_function",
           "NO_VALUE", "given", "flag", "asarray", "unlabeled", "reject", "kind", "function_name", "ufunc_name"]

# Types whose own __array_ufunc__/__array_function__ must handle mixed operations
# (xarray's DataArray, Dataset, Variable); floor 3 registers them.
DEFERRING_TYPES: set = set()


@functools.lru_cache(maxsize=None)
def _carries_units(type_: type) -> bool:
    """Quantities (pint's: the backend declares ``units``) wrap arrays, tracers too: a NumPy
    function of a tracer and a Quantity is the Quantity's to answer (on its magnitude), as
    xarray's types are; a Quantity that reaches a transform's output gets its policy error."""
    return backend_named(getattr(type_, "__module__", "").partition(".")[0]).units

UFUNCS: dict = {}
UFUNC_HANDLERS: dict = {}
UFUNC_METHODS: dict = {}
FUNCTIONS: dict = {}

# Registrations of ufuncs from other packages (scipy.special), run when a ufunc without
# a kernel is first met: each returns True once its entries are in the tables.
LAZY_REGISTRATIONS: list = []

_IGNORED_UFUNC_KWARGS = frozenset({"casting", "order", "subok"})


def implements(*functions: Callable[..., Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated handler for NumPy's ``functions`` (same signature)."""
    return _registrar(FUNCTIONS, functions)


def implements_ufunc(*ufuncs: np.ufunc | Callable[..., Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated ``handler(*inputs)`` as the call of ``ufuncs``."""
    return _registrar(UFUNC_HANDLERS, ufuncs)


def implements_method(method: str,
                      *ufuncs: np.ufunc | Callable[..., Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated ``handler(ufunc, inputs, kwargs)`` for ``ufunc.<method>``."""
    return _registrar(UFUNC_METHODS, [(ufunc, method) for ufunc in ufuncs])


def _registrar(table, keys):
    def register(handler):
        for key in keys:
            table[key] = handler
        return handler

    return register


# --- the two protocols -------------------------------------------------------------------------
def dispatch_ufunc(ufunc: np.ufunc, method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    for value in inputs:
        if type(value) in DEFERRING_TYPES or _carries_units(type(value)):
            return NotImplemented
    if not kwargs and method == "__call__":  # the common case, kept short: np.sin(x)
        prim = UFUNCS.get(ufunc)
        if prim is not None:
            return prim.bind(*inputs)
    out = kwargs.pop("out", None)
    if any(type(value) in DEFERRING_TYPES for value in kwargs.values()):
        raise UnsupportedOperationError(f"{ufunc_name(ufunc)}.{method} with a labeled array as an option is not "
                                        "supported on traced arrays; pass its .data")
    if method == "__call__":
        result = _call(ufunc, inputs, kwargs)
    else:
        handler = UFUNC_METHODS.get((ufunc, method))
        if handler is None:
            raise UnsupportedOperationError(f"{ufunc_name(ufunc)}.{method} has no kernel in labeled_func")
        result = handler(ufunc, inputs, kwargs)
    if out is None:
        return result
    return _write_out(f"{ufunc_name(ufunc)}{'' if method == '__call__' else '.' + method}", out, inputs, result)


def _call(ufunc, inputs, kwargs):
    dtype = kwargs.pop("dtype", None)
    unknown = set(kwargs) - _IGNORED_UFUNC_KWARGS
    if unknown:
        raise UnsupportedOperationError(f"{ufunc_name(ufunc)} with {sorted(unknown)} is not supported on traced arrays")
    prim = UFUNCS.get(ufunc)
    if prim is not None:
        result = prim.bind(*inputs)
    else:
        handler = UFUNC_HANDLERS.get(ufunc) or _lazily_registered(ufunc)
        if handler is None:
            raise UnsupportedOperationError(f"{ufunc_name(ufunc)} has no kernel in labeled_func")
        result = handler(*inputs)
    if dtype is None:
        return result
    if isinstance(result, tuple):
        return tuple(ew.astype.bind(part, dtype=dtype) for part in result)
    return ew.astype.bind(result, dtype=dtype)


def _lazily_registered(ufunc):
    """The call of ``ufunc`` after running the lazy registrations (None if still unknown)."""
    for register in tuple(LAZY_REGISTRATIONS):
        if register() and register in LAZY_REGISTRATIONS:
            try:
                LAZY_REGISTRATIONS.remove(register)
            except ValueError:  # another thread removed it first
                pass
    prim = UFUNCS.get(ufunc)
    return prim.bind if prim is not None else UFUNC_HANDLERS.get(ufunc)


def _write_out(name, out, inputs, result):
    target = out[0] if isinstance(out, tuple) else out
    if isinstance(out, tuple) and len(out) != 1:
        raise OutArgumentError(f"{name}: out= with several outputs is not supported under a transform")
    if not any(target is value for value in inputs):
        raise OutArgumentError(
            f"{name}: out= is not supported under a transform (only the in-place "
            "form x op= y, where out is one of the inputs). Use the returned value instead."
        )
    inplace_assign(target, result, f"{name}(..., out=...)")
    return target


def dispatch_function(func: Callable[..., Any], types: Iterable[type], args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
    handler = FUNCTIONS.get(func)
    if handler is None:
        raise UnsupportedOperationError(f"{function_name(func)} has no kernel in labeled_func")
    for type_ in types:
        if type_ in DEFERRING_TYPES or _carries_units(type_):
            return NotImplemented
    if kwargs.get("out") is not None:
        raise OutArgumentError(f"{function_name(func)}: out= is not supported under a transform; use the returned value")
    kwargs.pop("out", None)
    return handler(*args, **kwargs)


# --- names for messages ----------------------------------------------------------------------------
def function_name(func: Callable[..., Any]) -> str:
    module = getattr(func, "__module__", None) or "numpy"
    return f"{module}.{getattr(func, '__name__', func)}"


# private ufuncs that a public Python function calls (scipy.special.zeta calls _zeta), by
# the public name: the families' registrations fill it
PUBLIC_UFUNC_NAMES: dict = {}


def ufunc_name(ufunc: Any) -> str:
    """Where a ufunc lives, for messages: ``numpy.sin``, ``scipy.special.erf``.

    Ufuncs carry no reliable ``__module__``; the name is looked up by identity in NumPy,
    then in scipy.special and the other public modules already imported (never importing
    one).  Only called to build an error message.
    """
    public = PUBLIC_UFUNC_NAMES.get(ufunc)
    if public is not None:
        return public
    name = getattr(ufunc, "__name__", None) or repr(ufunc)
    if getattr(np, name, None) is ufunc:
        return f"numpy.{name}"
    candidates = ["scipy.special"] + sorted((m for m in list(sys.modules) if m != "scipy.special"),
                                            key=lambda m: (m.count("."), len(m)))
    for module_name in candidates:
        if any(part.startswith("_") for part in module_name.split(".")):
            continue
        module = sys.modules.get(module_name)
        try:
            found = vars(module).get(name) if module is not None else None
        except TypeError:  # a module-like object without a __dict__
            continue
        if found is ufunc:
            return f"{module_name}.{name}"
    return f"the ufunc {name}"


# --- argument helpers shared by the families ---------------------------------------------------
NO_VALUE = np._NoValue


def given(value: Any) -> bool:
    """Whether an optional NumPy argument was passed (not NumPy's no-value, not None)."""
    return value is not NO_VALUE and value is not None


def flag(value: Any, default: bool = False) -> bool:
    """A boolean option that NumPy may pass as its no-value sentinel (``keepdims``)."""
    return bool(value) if value is not NO_VALUE else default


def asarray(value: Any) -> Any:
    """Lists and tuples, and objects NumPy copies (pandas' Index and Series:
    ``np.searchsorted(index, traced)``), as NumPy arrays; arrays (traced or not) and numbers
    as they are."""
    if isinstance(value, (list, tuple)):
        return np.asarray(value)
    if isinstance(value, (Traced, np.ndarray, np.generic, int, float, complex)):
        return value
    if backend_of(value).host_copy:
        return np.asarray(value)
    return value


def unlabeled(value: Any) -> Any:
    """The array inside a labeled value (a DataArray or Variable: ``buf[i] = da``), as
    NumPy takes it; this floor knows no xarray, so it looks for ``dims`` and ``data``."""
    if not isinstance(value, Traced) and hasattr(value, "dims") and hasattr(value, "data"):
        return value.data
    return value


def reject(name: str, **options: Any) -> None:
    """Raise for NumPy options we do not support (``where=``, ``initial=``...)."""
    passed = [k for k, v in options.items() if given(v)]
    if passed:
        raise UnsupportedOperationError(f"numpy.{name} with {passed} is not supported on traced arrays")


def kind(value: Any) -> str:
    """NumPy's dtype kind of an array or a Python scalar ("b", "i", "u", "f", "c")."""
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return "b" if isinstance(value, bool) else "f"
    return dtype_kind(dtype)
