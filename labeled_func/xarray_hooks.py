"""Patching xarray's internals for the transforms: what ``xarray_interp.py`` and
``xarray_methods.py`` share.

Each of those modules checks, before it patches, that the xarray functions it replaces
exist, take the arguments it expects and call each other by the names it expects
(:func:`code_of` reads their code through an earlier patch), and patches only then, with
:func:`patch`: a wrapper that hands every call without a traced value to xarray's own
function, marked so that :func:`hooked` tells a second import not to patch again.
"""
from __future__ import annotations

__all__ = ["code_of", "hooked", "patch"]


def code_of(func):
    """The code object of ``func``, or of the function a hook of ours wraps."""
    return getattr(func, "__wrapped__", func).__code__


def hooked(*functions):
    """Whether every one of ``functions`` is a hook of ours."""
    return all(getattr(f, "_labeled_func_hook", False) for f in functions)


def patch(targets, originals):
    """Replace ``owner.name`` by ``wrapper`` for each ``(owner, name, wrapper)`` of
    ``targets``, keeping xarray's function in ``originals[name]`` (and as the wrapper's
    ``__wrapped__``)."""
    for owner, name, wrapper in targets:
        originals[name] = getattr(owner, name)
        wrapper._labeled_func_hook = True
        wrapper.__wrapped__ = originals[name]
        setattr(owner, name, wrapper)
