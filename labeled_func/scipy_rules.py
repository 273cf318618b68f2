"""SciPy functions that take traced values: ``scipy.signal.detrend`` (xrft's detrending, a
linear map of the data) and ``scipy.optimize.curve_fit`` (``lf.curve_fit``).

Libraries call them as module attributes (``scipy.signal.detrend(...)``, xarray's
``from scipy.optimize import curve_fit`` at each call), so each is replaced in its SciPy
module by a wrapper that hands every call without a traced argument to SciPy's own
function.  SciPy's modules are slow to import (``scipy.signal``: about a second), so
labeled_func does not import them: a module already imported is patched at once, one
imported later is patched as its import finishes (a finder on ``sys.meta_path`` that
wraps that module's loader, and does nothing else).
"""
from __future__ import annotations

import importlib.abc
import sys
import threading
from typing import Any

import numpy as np
from labeled_func_kernels.primitive import Traced

from .curve_fit import curve_fit
from .errors import UnsupportedOperationError
from .xarray_hooks import hooked, patch

__all__ = ["install", "detrend"]

_LOCK = threading.Lock()
_ORIGINAL: dict = {}


def detrend(data: Any, axis: int = -1, type: str = "linear", bp: Any = 0, overwrite_data: bool = False) -> Any:
    """``scipy.signal.detrend`` of traced data: the data minus its mean (``"constant"``) or
    minus its least-squares line along ``axis`` (``"linear"``), with NumPy operations, so
    that every transform goes through it (the map is linear: its derivative is itself).
    Breakpoints (``bp``) are not supported on traced data."""
    if type not in ("linear", "l", "constant", "c"):
        raise ValueError("Trend type must be 'linear' or 'constant'.")
    data = data if np.dtype(data.dtype).kind in "fc" else data.astype(np.float64)
    axis = axis % data.ndim if data.ndim else 0
    centered = data - np.mean(data, axis=axis, keepdims=True)
    if type in ("constant", "c"):
        return centered
    if np.ndim(bp) != 0 or bp != 0:
        raise UnsupportedOperationError("scipy.signal.detrend of traced data with breakpoints (bp=...) is not "
                                        "supported: detrend each segment (a slice along the axis) instead")
    n = data.shape[axis]
    if n < 2:
        return centered
    shape = [1] * data.ndim
    shape[axis] = n
    t = np.arange(n, dtype=np.float64) - (n - 1) / 2.0
    t = t.astype(np.dtype(data.dtype).type(0).real.dtype).reshape(shape)
    slope = np.sum(centered * t, axis=axis, keepdims=True) / np.sum(t * t)
    return centered - slope * t


def _detrend_hook(data, *args, **kwargs):
    if isinstance(data, Traced):
        return detrend(data, *args, **kwargs)
    return _ORIGINAL["detrend"](data, *args, **kwargs)


def _curve_fit_hook(f, xdata, ydata, *args, **kwargs):
    if isinstance(xdata, Traced) or isinstance(ydata, Traced):
        return curve_fit(f, xdata, ydata, *args, **kwargs)
    return _ORIGINAL["curve_fit"](f, xdata, ydata, *args, **kwargs)


RULES = {"scipy.signal": (("detrend", _detrend_hook),), "scipy.optimize": (("curve_fit", _curve_fit_hook),)}


def _patch(name, module):
    """Patch the functions of ``RULES[name]`` into ``module`` (once)."""
    with _LOCK:
        targets = tuple((module, attribute, hook) for attribute, hook in RULES[name]
                        if callable(getattr(module, attribute, None)) and not hooked(getattr(module, attribute)))
        if targets:
            patch(targets, _ORIGINAL)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for the modules of ``RULES``, asks the other finders and wraps
    the loader they give, so that the module is patched as soon as it is executed."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in RULES or fullname in sys.modules:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        execute = getattr(loader, "exec_module", None)
        if execute is None:
            return spec

        def exec_module(module):
            execute(module)
            try:
                _patch(fullname, module)
            except Exception:  # noqa: BLE001 - never fail SciPy's import: the functions stay SciPy's
                pass

        loader.exec_module = exec_module
        return spec


_FINDER = _AfterImport()


def install() -> str:
    """Patch the SciPy modules already imported, and the others when they are (idempotent)."""
    for name in RULES:
        module = sys.modules.get(name)
        if module is not None:
            _patch(name, module)
    if not any(finder is _FINDER for finder in sys.meta_path):
        sys.meta_path.insert(0, _FINDER)
    return "installed"


STATUS = install()  # at import (labeled_func imports this module): idempotent
