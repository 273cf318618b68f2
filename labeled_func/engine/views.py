"""Views under differentiation: NumPy's write-through semantics for the AD levels.

NumPy's basic indexing, transpose and (where it can) reshape return views: writing into
one writes into its base, and the base's later writes show through it.  The AD levels
keep values functional, so they track this themselves: a tracer made from a tracer of
the same level by one of the view primitives records its base (the tracer at the root
of a chain of views) and the chain.  An in-place update of a view writes its new value
into the base with setitem-like updates (recorded like any operation, so derivatives
follow) and bumps the base's version; a view whose base's version moved is regenerated
from the base when next used (every primitive applied to it, ``float()``, the
transform's output).

Positional, engine-internal: the tracers carry ``_view`` and ``_cell``; their level
provides ``set_value(dest, src)``.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from labeled_func_kernels import core as kcore
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import indexing as ki
from labeled_func_kernels import shape as ks
from labeled_func_kernels.backend import backend_of, dtype_kind, library_of
from labeled_func_kernels.primitive import Primitive, bottom

from .errors import UnsupportedOperationError

__all__ = ["VIEW_PRIMITIVES", "READ_ONLY_VIEW_PRIMITIVES", "make_view", "refresh_view", "assign_value",
           "static_slice"]


# Views NumPy makes read-only: reading one after its base was written sees the new values
# (it is regenerated like any view), writing into one raises NumPy's ValueError.
READ_ONLY_VIEW_PRIMITIVES = frozenset((kcore.broadcast_to, ks.matrix_diagonal, ks.sliding_window_view))
# Views of a complex array's parts (x.real, x.imag): reading one after its base was written sees
# the new values; writing into one is refused (the levels hold the part as a new array, and
# writing it back into the complex base is not supported), instead of silently not reaching it.
PART_VIEW_PRIMITIVES = frozenset((ew.real, ew.imag))
VIEW_PRIMITIVES = (frozenset((ki.getitem, kcore.transpose, kcore.reshape, kcore.squeeze, kcore.expand_dims))
                   | READ_ONLY_VIEW_PRIMITIVES | PART_VIEW_PRIMITIVES)


class VersionCell:
    """How many times a base tracer has been written in place."""

    __slots__ = ("version",)

    def __init__(self):
        self.version = 0


class View:
    """A view tracer's base, the primitives from the base to it, and the base version
    its value reflects."""

    __slots__ = ("base", "ops", "cell", "version")

    def __init__(self, base, ops, cell):
        self.base = base
        self.ops = ops  # ((primitive, params, input shape), ...), base first
        self.cell = cell
        self.version = cell.version


def make_view(prim: Primitive, args: Sequence[Any], params: dict[str, Any], out: Any) -> View | None:
    """The :class:`View` for ``out`` (the primal made by ``prim`` from ``args[0]``, a
    tracer of the calling level), or None where NumPy would not return a view."""
    x = args[0]
    below = bottom(x._value)
    if type(below) is not np.ndarray and _without_views(below):
        return None
    shape = tuple(x._value.shape)
    if prim in PART_VIEW_PRIMITIVES and dtype_kind(x.dtype) != "c":
        return None  # the real part of a real array is the array itself (its tracer)
    if prim is ki.getitem:
        if len(args) > 1:
            return None  # index arrays: a copy
        ints = 0
        for item in params["template"]:
            kind = type(item)
            if kind is int:
                ints += 1
            elif kind is bool:
                return None  # a boolean scalar index: a copy
        if ints == len(shape) == len(params["template"]):
            return None  # an int for every axis: NumPy returns a scalar
    elif prim is kcore.reshape and not _shares_memory(out, x._value):
        return None  # NumPy copies (the input is not contiguous enough)
    view = x._view
    op = ((prim, params, shape),)
    if view is not None:
        return View(view.base, view.ops + op, view.cell)
    cell = x._cell
    if cell is None:
        cell = x._cell = VersionCell()
    return View(x, op, cell)


def _without_views(array):
    """Arrays whose in-place operations never write into another array (Dask's)."""
    return not backend_of(array).views


def _shares_memory(a, b):
    a, b = bottom(a), bottom(b)
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return bool(np.may_share_memory(a, b))
    if isinstance(a, np.generic) or isinstance(b, np.generic):
        return False
    library = sys.modules.get(library_of(a))
    may_share = getattr(library, "may_share_memory", None)
    if may_share is not None:
        try:
            return bool(may_share(a, b))
        except Exception:  # noqa: BLE001 - a library without it for these arrays
            pass
    return True


def static_slice(value: Any) -> tuple[Any, tuple[Any, ...]] | None:
    """``(base, template)`` when ``value`` is a current view made by one getitem of its
    base tracer (at a level that tracks views: jvp, grad), else None."""
    view = getattr(value, "_view", None)
    if view is None or len(view.ops) != 1 or view.version != view.cell.version:
        return None
    prim, params, _ = view.ops[0]
    return (view.base, params["template"]) if prim is ki.getitem else None


def refresh_view(tracer: Any) -> Any:
    """Regenerate ``tracer`` (a view) from its base if the base was written since."""
    view = tracer._view
    if view is None or view.version == view.cell.version:
        return tracer
    value = view.base
    for prim, params, _ in view.ops:
        value = prim.bind(value, **params)
    view.version = view.cell.version
    tracer._level.set_value(tracer, value)
    return tracer


def write_view(level: Any, dest: Any, src: Any) -> None:
    """``dest[...] = src`` for a view ``dest``: write into its base, functionally."""
    view = dest._view
    parts = [prim.name for prim, _, _ in view.ops if prim in PART_VIEW_PRIMITIVES]
    if parts:
        raise UnsupportedOperationError(
            f"writing into x.{parts[0]} of a complex value traced by lf.{level.label or level.name}: the transform "
            f"holds x.{parts[0]} as an array of its own, so the write would not reach x. Write the complex value "
            f"anew instead, e.g. x = x + v (for x.real += v) or x = x + 1j * v (for x.imag += v).")
    read_only = [prim.name for prim, _, _ in view.ops if prim in READ_ONLY_VIEW_PRIMITIVES]
    if read_only:
        raise ValueError(f"assignment destination is read-only: a view made by {read_only[0]}, which "
                         "NumPy makes read-only (write into a copy: .copy())")
    shape = tuple(dest.shape)
    if tuple(getattr(src, "shape", ())) != shape:
        src = kcore.broadcast_to.bind(src, shape=shape)
    base = view.base
    level.set_value(base, _scatter(base, src, view.ops))
    view.cell.version += 1  # `dest` and every other view of the base regenerate when used


def _scatter(base, value, ops):
    """The base with ``value`` written where the chain of view ``ops`` looks."""
    parents = [base]
    if any(prim is ki.getitem for prim, _, _ in ops[1:]):
        for prim, params, _ in ops[:-1]:
            parents.append(prim.bind(parents[-1], **params))
    else:
        parents.extend([None] * (len(ops) - 1))
    for (prim, params, shape), parent in zip(reversed(ops), reversed(parents)):
        if prim is ki.getitem:
            value = ki.setitem.bind(parent, value, template=params["template"])
        elif prim is kcore.transpose:
            value = kcore.transpose.bind(value, axes=kcore.inverse_permutation(params["axes"]))
        else:  # reshape, squeeze, expand_dims
            value = kcore.reshape.bind(value, shape=shape)
    return value


def assign_value(level: Any, dest: Any, src: Any) -> None:
    """An AD level's in-place update of its tracer ``dest`` (see ``inplace_assign``)."""
    if dest._view is not None:
        write_view(level, dest, src)
        return
    level.set_value(dest, src)
    if dest._cell is not None:
        dest._cell.version += 1  # its views regenerate when next used
