"""Indexing with NumPy's semantics: ``x[key]`` and ``x[key] = value`` on traced arrays
(boolean masks included), ``take``, ``take_along_axis``, ``choose``, ``put``,
``fill_diagonal``, ``put_along_axis``, ``putmask``, ``place``, ``copyto``, ``unravel_index``,
``ravel_multi_index`` and the ``*_indices_from`` helpers (which read only the shape).

A boolean mask selects a number of elements that depends on its values: it works
where the mask is the same for every example (a constant, or a value traced by
grad/jvp only: its positions come from :func:`.dynamic.fixed`); a mapped mask is a
DynamicShapeError, except in an assignment that is exactly a select
(``x[mask] = scalar``), done as ``where(mask, value, x)``.
"""
from __future__ import annotations

import dis
import math
import operator
import sys
from typing import Any

import numpy as np

from labeled_func_kernels import core as kcore
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import indexing as ki
from labeled_func_kernels import reductions as kr
from labeled_func_kernels import shape as ks
from labeled_func_kernels.backend import dtype_kind, known_true, namespace, normalize_axis
from labeled_func_kernels.primitive import Traced, known, top_level

from .. import diagnose
from ..errors import DynamicShapeError, UnsupportedOperationError
from ..stack import inplace_assign, is_batched, structure_value, traced_by
from .dispatch import asarray, implements, implements_method, kind, ufunc_name, unlabeled
from .dynamic import agreed_constant, agreed_positions, fixed, pick
from .elementwise import clip

__all__ = ["getitem", "setitem", "constant_indices"]


def _is_boolean_index(item):
    return hasattr(item, "dtype") and kind(item) == "b" and not isinstance(item, (bool, np.bool_))


def _prepare_key(key):
    if not isinstance(key, tuple):
        key = (key,)
    prepared = []
    for item in key:
        if isinstance(item, list):
            item = np.asarray(item)
        elif isinstance(item, np.integer):
            item = int(item)
        elif isinstance(item, slice):
            item = slice(*(None if v is None else int(v) for v in (item.start, item.stop, item.step)))
        prepared.append(item)
    return tuple(prepared)


def getitem(x: Any, key: Any) -> Any:
    """``x[key]`` for a traced ``x`` (``Tracer.__getitem__``)."""
    key = _prepare_key(key)
    if any(_is_boolean_index(item) for item in key):
        if (len(key) == 1 and (is_batched(key[0]) or not known(key[0])) and key[0].ndim <= x.ndim
                and _augmented_assignment(sys._getframe(1))):
            return _MaskedUpdate(x, key[0])
        key = _masks_as_positions(key, "boolean-mask indexing x[mask]")
    template, arrays = ki.split_key(key)
    return ki.getitem.bind(x, *arrays, template=template)


# --- x[mask] op= v with a mask that differs per example (vmap) or is traced (lf.jit) ----------------
_AUGMENTED: dict = {}  # code object -> the offsets of the subscripts that read x[key] in ``x[key] op= v``


def _augmented_assignment(frame):
    """Whether the caller of ``Tracer.__getitem__`` (``frame``) reads ``x[key]`` to update it in
    place, ``x[key] op= v``: its bytecode duplicates ``x`` and ``key`` (two ``COPY 2``) right before
    the subscript, to store the result back with them (no other statement reads a subscript so).
    Python 3.11 and later; the offsets per code object are cached."""
    if frame.f_code.co_name != "__getitem__":
        return False
    caller = frame.f_back
    if caller is None:
        return False
    code = caller.f_code
    offsets = _AUGMENTED.get(code)
    if offsets is None:
        instructions = [i for i in dis.get_instructions(code) if i.opname != "CACHE"]
        found = set()
        for k in range(2, len(instructions)):
            instruction = instructions[k]
            subscript = instruction.opname == "BINARY_SUBSCR" or (
                instruction.opname == "BINARY_OP" and instruction.argrepr == "[]")
            copies = [(i.opname, i.arg) for i in instructions[k - 2:k]]
            if subscript and copies == [("COPY", 2), ("COPY", 2)]:
                # a specialised subscript reports its last inline cache entry as the offset
                end = instructions[k + 1].offset if k + 1 < len(instructions) else instruction.offset + 2
                found.update(range(instruction.offset, end, 2))
        _AUGMENTED[code] = offsets = frozenset(found)
    return caller.f_lasti in offsets


class _MaskedUpdate:
    """``x[mask]`` read by ``x[mask] op= v`` where the mask differs per example (or is traced
    by lf.jit): not an array (its shape would follow the values) but the pending update,
    which the store that follows writes as ``where(mask, x op v, x)``.  One value for every
    selected element (a scalar, or one row), as in ``x[mask] = v``."""

    __slots__ = ("x", "mask", "new")

    def __init__(self, x, mask, new=None):
        self.x, self.mask, self.new = x, mask, new

    def _apply(self, ufunc, value, symbol):
        if self.new is not None:
            raise UnsupportedOperationError(f"x[mask] {symbol}= v: one update of a selection at a time")
        x, mask = self.x, self.mask
        value = asarray(unlabeled(value))
        rest = x.ndim - mask.ndim
        shape = tuple(getattr(value, "shape", ()))
        if len(shape) == rest + 1 and shape[:1] == (1,):
            value = kcore.reshape.bind(value, shape=shape[1:])
            shape = shape[1:]
        operation = f"x[mask] {symbol}= v"
        if tuple(mask.shape) != tuple(x.shape[: mask.ndim]):
            _refuse_masked(operation, f"the mask (of shape {tuple(mask.shape)}) must cover the leading dims of x "
                                      f"(of shape {tuple(x.shape)})")
        if len(shape) > rest:
            _refuse_masked(operation, f"a value of shape {shape} holds one entry per selected element, and the "
                                      "number of selected elements differs per example")
        result = np.result_type(_dtype_or_number(x), _dtype_or_number(value))
        if symbol not in ("/", "**") and not np.can_cast(result, _dtype_or_number(x), "same_kind"):
            raise TypeError(f"{operation}: cannot cast the {result} result into a {_dtype_or_number(x)} array "
                            "(NumPy's same_kind casting)")
        if symbol == "/" and dtype_kind(x.dtype) in "biu":
            raise TypeError(f"{operation}: cannot cast the float64 result into a {_dtype_or_number(x)} array "
                            "(NumPy's same_kind casting)")
        updated = ufunc(x, value)
        condition = kcore.reshape.bind(mask, shape=tuple(mask.shape) + (1,) * rest) if rest else mask
        new = ew.where.bind(condition, updated, x)
        if new.dtype != x.dtype:
            new = ew.astype.bind(new, dtype=x.dtype)
        return _MaskedUpdate(x, mask, new)

    def __iadd__(self, v):
        return self._apply(np.add, v, "+")

    def __isub__(self, v):
        return self._apply(np.subtract, v, "-")

    def __imul__(self, v):
        return self._apply(np.multiply, v, "*")

    def __itruediv__(self, v):
        return self._apply(np.true_divide, v, "/")

    def __ifloordiv__(self, v):
        return self._apply(np.floor_divide, v, "//")

    def __imod__(self, v):
        return self._apply(np.remainder, v, "%")

    def __ipow__(self, v):
        return self._apply(np.power, v, "**")

    def __iand__(self, v):
        return self._apply(np.bitwise_and, v, "&")

    def __ior__(self, v):
        return self._apply(np.bitwise_or, v, "|")

    def __ixor__(self, v):
        return self._apply(np.bitwise_xor, v, "^")

    def __ilshift__(self, v):
        return self._apply(np.left_shift, v, "<<")

    def __irshift__(self, v):
        return self._apply(np.right_shift, v, ">>")

    def __repr__(self):
        return "<the selection x[mask] of an update x[mask] op= v>"


def _refuse_masked(operation, reason):
    site = diagnose.call_site()
    where = f" (called from {site.location})" if site.location else ""
    raise DynamicShapeError(
        f"{operation} with a mask that differs per example (or is traced by lf.jit){where}: it is done as a select, "
        f"where(mask, x op v, x), which needs one value for every selected element; here {reason}. "
        "Write x = np.where(mask, x op values, x) with values of x's shape.")


def _masks_as_positions(key, culprit):
    """Boolean masks in ``key`` as the integer positions NumPy uses for them
    (``np.nonzero(mask)``): possible when the mask is the same for every example."""
    out = []
    for item in key:
        if not _is_boolean_index(item):
            out.append(item)
            continue
        # lf.vmap(..., branches="agree"): the same mask in every example, or as many elements
        mask = agreed_constant(item, culprit) if is_batched(item) else None
        if mask is None and is_batched(item) and item.ndim:
            positions = agreed_positions(item, culprit)
            if positions is not None:
                out.extend(positions)
                continue
        if mask is None:
            mask = fixed(item, culprit)
        if mask.ndim == 0:
            if not bool(mask):
                raise UnsupportedOperationError(f"{culprit} with a 0-d False mask is not supported on traced arrays")
            out.append(None)  # x[True] adds an axis of length 1
        else:
            out.extend(np.nonzero(mask))
    return tuple(out)


def setitem(x: Any, key: Any, value: Any) -> None:
    """``x[key] = value`` for a traced ``x`` (``Tracer.__setitem__``): an in-place update."""
    key = _prepare_key(key)
    if isinstance(value, _MaskedUpdate):
        if value.new is None or value.x is not x or len(key) != 1 or key[0] is not value.mask:
            raise UnsupportedOperationError("x[mask] op= v: the selection of one update stored elsewhere")
        inplace_assign(x, value.new, "x[mask] op= v")
        return
    value = asarray(unlabeled(value))
    top = top_level((x, value), "x[...] = value")
    if top is not None and not traced_by(x, top):  # the in-place policy, before the write: a boolean
        inplace_assign(x, value, "x[...] = value")  # or integer x would drop the value's tracing
    if any(_is_boolean_index(item) for item in key):
        if any(_is_boolean_index(item) and (is_batched(item) or not known(item)) for item in key):
            inplace_assign(x, _masked_select(x, key, value), "x[mask] = value")
            return
        key = _masks_as_positions(key, "boolean-mask assignment x[mask] = value")
    template, arrays = ki.split_key(key)
    new = ki.setitem.bind(x, value, *arrays, template=template)
    inplace_assign(x, new, "x[...] = value")


def _masked_select(x, key, value):
    """``x[mask] = value`` with a mask that differs per example, as ``where(mask, value, x)``.

    Exact when one value goes to every selected element: a single mask over the leading
    dims of ``x`` and a value that broadcasts against one element (a scalar, or one
    row).  A sequence of values, one per selected element, has as many entries as the
    mask has True values: a different number per example.
    """
    mask = key[0]
    rest = x.ndim - mask.ndim
    shape = tuple(getattr(value, "shape", ()))
    if len(shape) == rest + 1 and shape[:1] == (1,):
        value = kcore.reshape.bind(value, shape=shape[1:])
        shape = shape[1:]
    if len(key) != 1 or rest < 0 or tuple(mask.shape) != tuple(x.shape[: mask.ndim]):
        reason = ("the mask must be the only index and cover the leading dims of x "
                  f"(got a key of {len(key)} entries, a mask of shape {tuple(mask.shape)} "
                  f"for x of shape {tuple(x.shape)})")
    elif len(shape) > rest:
        reason = (f"a value of shape {shape} holds one entry per selected element, and the "
                  "number of selected elements differs per example")
    else:
        condition = kcore.reshape.bind(mask, shape=tuple(mask.shape) + (1,) * rest) if rest else mask
        new = ew.where.bind(condition, value, x)
        if new.dtype != x.dtype:
            new = ew.astype.bind(new, dtype=x.dtype)
        return new
    site = diagnose.call_site()
    where = f" (called from {site.location})" if site.location else ""
    raise DynamicShapeError(
        f"boolean-mask assignment x[mask] = value with a mask that differs per example{where}: "
        "under vmap it is done as a select, where(mask, value, x), which needs one value for "
        f"every selected element; here {reason}. Write x = np.where(mask, values, x) with "
        "values of x's shape (xr.where(mask, values, x) on DataArrays)."
    )


@implements_method("at", np.add)
def _add_at(ufunc, inputs, kwargs):
    """``np.add.at(a, indices, b)``: in place, ``a[indices] += b`` where repeated positions
    add up (``index_add``, the transpose of a gather), under the in-place policy of
    ``x[...] = value``."""
    a, key, b = _at_arguments(inputs, "numpy.add.at")
    result = np.result_type(_dtype_or_number(a), _dtype_or_number(b))
    target = _dtype_or_number(a)
    if not np.can_cast(result, target, "same_kind"):
        raise TypeError(f"numpy.add.at: cannot add {result} values into a {target} array in place "
                        "(NumPy's same_kind casting)")
    if hasattr(b, "dtype") and _dtype_or_number(b) != target:
        b = _in_dtype(b, target)
    template, arrays = ki.split_key(key)
    inplace_assign(a, ki.index_add.bind(a, b, *arrays, template=template), "numpy.add.at(a, indices, b)")
    return None


def _at_arguments(inputs, name):
    """``(a, indices, b)`` of ``ufunc.at``: ``a`` an array, the indices a key (masks as
    positions), ``b`` an array."""
    if len(inputs) != 3:
        raise TypeError(f"{name} takes 3 arguments (a, indices, b) here, got {len(inputs)}")
    a, key, b = inputs
    if not isinstance(a, Traced) and not isinstance(a, np.ndarray):
        raise TypeError(f"{name}: the first argument must be an array, not {type(a).__name__}")
    key = _prepare_key(unlabeled(key))
    if any(_is_boolean_index(item) for item in key):
        key = _masks_as_positions(key, f"{name}(a, mask, b)")
    return a, key, asarray(unlabeled(b))


@implements_method("at", np.maximum, np.minimum, np.fmax, np.fmin, np.multiply)
def _binary_at(ufunc, inputs, kwargs):
    """``np.maximum.at(a, indices, b)`` (and ``minimum``, ``fmax``, ``fmin``, ``multiply``):
    in place, ``a[i] = ufunc(a[i], b_j)`` for each index ``i`` in turn, as NumPy applies them,
    so repeated positions combine in NumPy's order (same bits; a tie goes where NumPy's
    ``maximum`` sends it, and the derivatives follow: the product rule over repeats for
    ``multiply``).  Done in rounds: round ``r`` updates the ``r``-th occurrence of every
    position at once (a gather, the ufunc and a write of distinct positions), so the
    derivatives are those of the primitives; as many rounds as a position repeats.
    The indices must be the same for every example and known when traced (a constant,
    or an integer array computed under grad/jvp)."""
    name = f"{ufunc_name(ufunc)}.at"
    a, key, b = _at_arguments(inputs, name)
    key = tuple(constant_indices(item, name) if hasattr(item, "dtype") else item for item in key)
    target = _dtype_or_number(a)
    result = np.result_type(target, _dtype_or_number(b))
    if not np.can_cast(result, target, "same_kind"):
        raise TypeError(f"{name}: cannot combine {result} values into a {target} array in place "
                        "(NumPy's same_kind casting)")
    b = _in_dtype(b, target) if hasattr(b, "dtype") else np.asarray(b, dtype=target)
    shape = tuple(a.shape)
    positions = np.arange(math.prod(shape), dtype=np.intp).reshape(shape)[key]
    flat = positions.reshape(-1)
    if flat.size == 0:
        return None
    values = b if tuple(b.shape) == positions.shape else kcore.broadcast_to.bind(b, shape=positions.shape)
    values = kcore.reshape.bind(values, shape=(-1,))
    order = np.argsort(flat, kind="stable")
    ordered = flat[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    rank = np.empty_like(flat)
    rank[order] = np.arange(flat.size) - np.repeat(starts, np.diff(np.r_[starts, flat.size]))
    out = kcore.reshape.bind(a, shape=(-1,))
    for r in range(int(rank.max()) + 1):
        chosen = np.flatnonzero(rank == r)
        where_ = flat[chosen]
        current = ki.getitem.bind(out, where_, template=(ki.Slot(0),))
        update = ufunc(current, ki.getitem.bind(values, chosen, template=(ki.Slot(0),)))
        out = ki.setitem.bind(out, update, where_, template=(ki.Slot(0),))
    inplace_assign(a, kcore.reshape.bind(out, shape=shape), f"{name}(a, indices, b)")
    return None


def constant_indices(item: Any, name: str,
                     why: str = ("the indices decide how many times each position is combined. Pass the "
                                 "indices as a constant, or use np.add.at (which takes traced indices).")) -> Any:
    """Integer index array ``item`` as NumPy's: refused where it differs per example (vmap) or
    stands for later calls' values (lf.jit); under grad/jvp, its one value."""
    if top_level((item,), name) is not None and (is_batched(item) or not known(item)):
        if not is_batched(item):  # lf.jit: indices computed from integer arguments only are structure
            structure = structure_value(item, "index", f"the indices of {name}")
            if structure is not None:
                return fixed(structure, name)
        transform = ("vmap (indices that differ per example)" if is_batched(item)
                     else "lf.jit (indices computed from traced values)")
        raise UnsupportedOperationError(f"{name} under {transform} is not supported: {why}")
    return fixed(item, name)  # NumPy's (CuPy's brought to the host)


# --- gathers --------------------------------------------------------------------------------------
@implements(np.take_along_axis)
def _take_along_axis(arr, indices, axis=-1):
    if axis is None:
        arr, axis = kcore.reshape.bind(arr, shape=(-1,)), 0
    return kr.take_along_axis.bind(arr, indices, axis=normalize_axis(axis, arr.ndim)[0])


@implements(np.take)
def _take(a, indices, axis=None, out=None, mode="raise"):
    """A gather: ``a`` (traced or a constant table) at ``indices`` (traced or not) along
    ``axis``; derivatives reach a traced ``a``, never the integer indices."""
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"numpy.take: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    a = asarray(unlabeled(a))  # np.take(DataArray, traced) arrives here too: NumPy's takes its data
    if not hasattr(a, "ndim"):
        a = np.asarray(a)
    indices = asarray(unlabeled(indices))
    if axis is None:
        a, axis = kcore.reshape.bind(a, shape=(-1,)), 0
    axis = normalize_axis(axis, a.ndim)[0]
    if mode != "raise":
        size = a.shape[axis]
        if size == 0:
            raise IndexError("cannot do a non-empty take from an empty axes.")
        indices = ew.remainder.bind(indices, size) if mode == "wrap" else clip(indices, 0, size - 1)
    template, arrays = ki.split_key((slice(None),) * axis + (indices,))
    return ki.getitem.bind(a, *arrays, template=template)


@implements(np.choose)
def _choose(a, choices, out=None, mode="raise"):
    """``choices[a[i]][i]`` with ``a`` and the choices broadcast together: the choices
    stacked on a new first axis and gathered along it (derivatives reach the choices)."""
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"numpy.choose: clipmode must be one of 'clip', 'raise', or 'wrap', got {mode!r}")
    a = asarray(unlabeled(a))
    choices = unlabeled(choices)
    if hasattr(choices, "ndim"):  # one array: its first axis enumerates the choices
        choices = [ki.getitem_static(choices, (i,)) for i in range(choices.shape[0])]
    choices = [asarray(unlabeled(c)) for c in choices]
    if not choices:
        raise ValueError("numpy.choose: choices must not be empty")
    dtype = np.result_type(*[_dtype_or_number(c) for c in choices])
    present = [c for c in choices + [a] if hasattr(c, "ndim")]
    xp = namespace(*present) if present else np
    a = a if hasattr(a, "ndim") else xp.asarray(a)
    if dtype_kind(a.dtype) not in "biu":
        raise TypeError(f"numpy.choose: cannot cast array data from dtype('{a.dtype}') to dtype('int64') "
                        "according to the rule 'safe'")
    count = len(choices)
    if mode == "wrap":
        a = ew.remainder.bind(a, count)
    elif mode == "clip":
        a = clip(a, 0, count - 1)
    elif known_true(ew.logical_or.bind(ew.less.bind(a, 0), ew.greater_equal.bind(a, count))):
        raise ValueError("invalid entry in choice array")
    arrays = [c if hasattr(c, "ndim") else xp.asarray(c) for c in choices]
    shape = np.broadcast_shapes(tuple(a.shape), *[tuple(c.shape) for c in arrays])
    arrays = [kcore.broadcast_to.bind(_in_dtype(c, dtype), shape=shape) for c in arrays]
    stacked = ks.stack.bind(*arrays, axis=0) if count > 1 else kcore.expand_dims.bind(arrays[0], axis=(0,))
    index = kcore.expand_dims.bind(kcore.broadcast_to.bind(a, shape=shape), axis=(0,))
    if dtype_kind(index.dtype) == "b" or index.dtype != namespace(index).int64:
        index = ew.astype.bind(index, dtype=namespace(index).int64)
    return kcore.squeeze.bind(kr.take_along_axis.bind(stacked, index, axis=0), axis=(0,))


def _dtype_or_number(value):
    """What NumPy's type promotion reads: an array's dtype, a Python number as it is."""
    dtype = getattr(value, "dtype", None)
    return value if dtype is None else np.dtype(getattr(dtype, "_np_dtype", dtype))


def _in_dtype(value, dtype):
    if np.dtype(getattr(value.dtype, "_np_dtype", value.dtype)) == dtype:
        return value
    return ew.astype.bind(value, dtype=getattr(namespace(value), dtype.name, dtype))


@implements(np.put)
def _put(a, ind, v, mode="raise"):
    """In place, as ``a.flat[ind] = v`` with ``v`` repeated or cut to the number of
    indices (cast to ``a``'s dtype); ``mode`` as in take.  Follows ``x[i] = v``: a mapped
    ``ind`` or ``v`` cannot be written into an ``a`` that is not mapped."""
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"numpy.put: clipmode must be one of 'clip', 'raise', or 'wrap', got {mode!r}")
    if not isinstance(a, Traced):
        if not isinstance(a, np.ndarray):
            raise TypeError(f"argument 1 must be numpy.ndarray, not {type(a).__name__}")
    ind, v = asarray(unlabeled(ind)), asarray(unlabeled(v))
    if not hasattr(ind, "ndim"):
        ind = np.asarray(ind)
    size = int(np.prod(a.shape))
    flat = kcore.reshape.bind(ind, shape=(-1,)) if ind.ndim != 1 else ind
    count = flat.shape[0]
    if count == 0:
        return None
    if size == 0:
        raise IndexError("cannot replace elements of an empty array")
    if dtype_kind(flat.dtype) not in "iu":
        raise TypeError(f"numpy.put: indices must be integers, got dtype {flat.dtype}")
    if mode == "wrap":
        flat = ew.remainder.bind(flat, size)
    elif mode == "clip":
        flat = clip(flat, 0, size - 1)
    elif known_true(ew.logical_or.bind(ew.less.bind(flat, -size), ew.greater_equal.bind(flat, size))):
        raise IndexError(f"index out of range for array of size {size}")
    else:
        flat = ew.remainder.bind(flat, size)  # negative positions count from the end
    if getattr(v, "ndim", 0) > 0:
        values = kcore.reshape.bind(v, shape=(-1,))
        length = values.shape[0]
        if length == 0:
            return None
        if length != count:
            values = pick(values, np.arange(count) % length, None)
    else:
        values = v
    if a.ndim == 0:  # every position is the one element: the last value written stays
        if getattr(values, "ndim", 0) > 0:
            values = ki.getitem_static(values, (count - 1,))
        template, arrays = (Ellipsis,), []
    else:
        template, arrays = ki.split_key(tuple(_unravel(flat, tuple(a.shape))))
    inplace_assign(a, ki.setitem.bind(a, values, *arrays, template=template), "numpy.put(a, ind, v)")
    return None


def _unravel(flat, shape):
    """One index array per axis of ``shape`` for C-order flat positions."""
    out = []
    stride = int(np.prod(shape))
    for size in shape:
        stride //= size
        out.append(ew.remainder.bind(ew.floor_divide.bind(flat, stride), size) if stride != 1 else
                   ew.remainder.bind(flat, size))
    return out


# --- in place and flat positions ------------------------------------------------------------------
@implements(np.fill_diagonal)
def _fill_diagonal(a, val, wrap=False):
    """In place, as NumPy writes ``a.flat[:end:step] = val``: the flat positions of the
    diagonal become index arrays, and ``val`` is repeated or cut to their number."""
    if a.ndim < 2:
        raise ValueError("array must be at least 2-d")
    shape = tuple(a.shape)
    if a.ndim == 2:
        step = shape[1] + 1
        end = shape[0] * shape[1] if wrap else min(shape[1] * shape[1], shape[0] * shape[1])
    else:
        if any(size != shape[0] for size in shape):
            raise ValueError("All dimensions of input must be of equal length")
        step = 1 + int(np.cumprod(shape[:-1]).sum())
        end = int(np.prod(shape))
    flat = np.arange(0, end, step)
    if flat.size == 0:
        return None
    val = asarray(val)
    if getattr(val, "ndim", 0) > 0:
        size = int(np.prod(val.shape))
        if size == 0:
            return None
        val = kcore.reshape.bind(val, shape=(-1,))
        if size != flat.size:
            val = pick(val, np.arange(flat.size) % size, None)
    setitem(a, np.unravel_index(flat, shape), val)
    return None


@implements(np.unravel_index)
def _unravel_index(indices, shape, order="C"):
    """One integer array of positions per axis of ``shape``."""
    indices = asarray(indices)
    dims = (int(shape),) if not isinstance(shape, (tuple, list)) else tuple(int(s) for s in shape)
    if order not in ("C", "F"):
        raise ValueError("unravel_index: only 'C' or 'F' order is permitted")
    indices = ew.astype.bind(indices, dtype=namespace(indices).int64)
    strides = []
    for axis in range(len(dims)):
        rest = dims[axis + 1:] if order == "C" else dims[:axis]
        stride = 1
        for size in rest:
            stride *= size
        strides.append(stride)
    return tuple(ew.remainder.bind(ew.floor_divide.bind(indices, stride) if stride != 1 else indices, size)
                 for stride, size in zip(strides, dims))


# --- more in-place writes: put_along_axis, putmask, place, copyto -----------------------------------
def _writable(a, name):
    """``a`` as an array that can be written: a traced one, or a NumPy array (into which only
    values no transform traces can go: ``inplace_assign`` says so)."""
    a = unlabeled(a)
    if not isinstance(a, Traced) and not isinstance(a, np.ndarray):
        raise TypeError(f"numpy.{name}: argument 'a' must be a numpy.ndarray, not {type(a).__name__}")
    return a


def _as_dtype_of(value, a):
    """``value`` cast to ``a``'s dtype (a Python number as it is)."""
    if not hasattr(value, "dtype") or value.dtype == a.dtype:
        return value
    return ew.astype.bind(value, dtype=a.dtype)


def _cycled(values, count):
    """The flattened ``values`` repeated or cut to ``count`` entries (``values.flat[i % n]``)."""
    values = kcore.reshape.bind(values, shape=(-1,)) if values.ndim != 1 else values
    length = values.shape[0]
    return values if length == count else pick(values, np.arange(count) % length, None)


@implements(np.put_along_axis)
def _put_along_axis(arr, indices, values, axis):
    """In place, ``arr`` at ``indices`` along ``axis`` (as take_along_axis reads) set to
    ``values`` broadcast to the indices' shape; ``axis=None`` writes the flattened array.
    Follows ``x[i] = v``: a mapped ``indices`` or ``values`` cannot go into an unmapped ``arr``."""
    arr = _writable(arr, "put_along_axis")
    indices, values = asarray(unlabeled(indices)), asarray(unlabeled(values))
    if not hasattr(indices, "ndim"):
        indices = np.asarray(indices)
    if dtype_kind(indices.dtype) not in "iu":
        raise IndexError("`indices` must be an integer array")
    shape = tuple(arr.shape)
    if axis is None:
        if indices.ndim != 1:
            raise ValueError("when axis=None, `indices` must have a single dimension.")
        target, axis = (int(np.prod(shape)),), 0
    else:
        if indices.ndim != len(shape):
            raise ValueError("`indices` and `arr` must have the same number of dimensions")
        target, axis = shape, normalize_axis(axis, len(shape))[0]
    out_shape = tuple(i if d == axis else np.broadcast_shapes((n,), (i,))[0]
                      for d, (n, i) in enumerate(zip(target, indices.shape)))
    if 0 in out_shape:
        return None
    size = target[axis]
    if known_true(ew.logical_or.bind(ew.less.bind(indices, -size), ew.greater_equal.bind(indices, size))):
        raise IndexError(f"index out of bounds for axis {axis} with size {size}")
    position = ew.remainder.bind(kcore.broadcast_to.bind(indices, shape=out_shape), size)  # negatives from the end
    key = []
    for d, n in enumerate(out_shape):
        if d == axis:
            key.append(position)
        else:
            grid = np.arange(n).reshape((1,) * d + (n,) + (1,) * (len(out_shape) - d - 1))
            key.append(np.broadcast_to(grid, out_shape))
    if len(target) != len(shape):  # axis=None: positions in the flattened array
        if not shape:
            raise UnsupportedOperationError("numpy.put_along_axis of a 0-d array is not supported on traced arrays")
        key = _unravel(key[0], shape)
    values = values if hasattr(values, "ndim") else namespace(arr).asarray(values)
    values = kcore.broadcast_to.bind(_as_dtype_of(values, arr), shape=out_shape)
    template, arrays = ki.split_key(tuple(key))
    inplace_assign(arr, ki.setitem.bind(arr, values, *arrays, template=template),
                   "numpy.put_along_axis(arr, indices, values, axis)")
    return None


@implements(np.putmask)
def _putmask(a, mask, values):
    """In place, ``a.flat[n] = values.flat[n % len(values)]`` where ``mask.flat[n]``: a select,
    ``where(mask, values repeated to a's size, a)``, so a mask may differ per example."""
    a = _writable(a, "putmask")
    mask, values = asarray(unlabeled(mask)), asarray(unlabeled(values))
    if tuple(getattr(mask, "shape", ())) != tuple(a.shape):
        raise ValueError("putmask: mask and data must be the same size")
    if not hasattr(values, "ndim"):
        values = namespace(a).asarray(values)
    size = int(np.prod(a.shape))
    if size == 0 or int(np.prod(values.shape)) == 0:
        return None
    values = kcore.reshape.bind(_cycled(_as_dtype_of(values, a), size), shape=tuple(a.shape))
    mask = mask if kind(mask) == "b" else ew.not_equal.bind(mask, 0)
    inplace_assign(a, ew.where.bind(mask, values, a), "numpy.putmask(a, mask, values)")
    return None


@implements(np.place)
def _place(arr, mask, vals):
    """In place, the ``k``-th True position of ``mask`` (in C order) gets ``vals[k % len(vals)]``.
    The position of each value follows the mask's values: a mapped mask works with one value (a
    select, as ``x[mask] = v``), else it is a DynamicShapeError; under grad the primal decides."""
    arr = _writable(arr, "place")
    mask, vals = asarray(unlabeled(mask)), asarray(unlabeled(vals))
    if not hasattr(vals, "ndim"):
        vals = namespace(arr).asarray(vals)
    if int(np.prod(getattr(mask, "shape", ()))) != int(np.prod(arr.shape)):
        raise ValueError("place: mask and data must be the same size")
    mask = mask if kind(mask) == "b" else ew.not_equal.bind(mask, 0)
    count = int(np.prod(vals.shape))
    mask = kcore.reshape.bind(mask, shape=tuple(arr.shape)) if tuple(mask.shape) != tuple(arr.shape) else mask
    if count == 1 and (is_batched(mask) or not known(mask)):
        value = kcore.reshape.bind(_as_dtype_of(vals, arr), shape=())
        inplace_assign(arr, ew.where.bind(mask, value, arr), "numpy.place(arr, mask, vals)")
        return None
    positions = np.flatnonzero(fixed(mask, "numpy.place with several vals and a mask that differs per example"))
    if positions.size == 0:
        return None
    if count == 0:
        raise ValueError("Cannot insert from an empty array!")
    values = _cycled(_as_dtype_of(vals, arr), positions.size)
    template, arrays = ki.split_key(tuple(np.unravel_index(positions, tuple(arr.shape))))
    inplace_assign(arr, ki.setitem.bind(arr, values, *arrays, template=template), "numpy.place(arr, mask, vals)")
    return None


@implements(np.copyto)
def _copyto(dst, src, casting="same_kind", where=True):
    """In place, ``dst = where(where, src, dst)`` with ``src`` broadcast to ``dst`` and cast
    to its dtype after NumPy's ``casting`` check; a mapped ``src`` or ``where`` cannot go
    into an unmapped ``dst``."""
    dst = _writable(dst, "copyto")
    src, where = asarray(unlabeled(src)), asarray(unlabeled(where))
    target = np.dtype(getattr(dst.dtype, "_np_dtype", dst.dtype))
    if hasattr(src, "dtype"):  # NumPy's own casting check, on stand-ins of the dtypes
        np.copyto(np.empty((), target), np.empty((), np.dtype(getattr(src.dtype, "_np_dtype", src.dtype))),
                  casting=casting)
    else:
        np.copyto(np.empty((), target), src, casting=casting)
        src = namespace(dst).asarray(src, dtype=dst.dtype)
    shape = tuple(dst.shape)
    src = kcore.broadcast_to.bind(_as_dtype_of(src, dst), shape=shape)
    if isinstance(where, (bool, np.bool_)):
        if not where:
            return None
        template, arrays = ki.split_key((Ellipsis,))  # as dst[...] = src
        new = ki.setitem.bind(dst, src, *arrays, template=template)
    else:
        if kind(where) != "b":
            raise TypeError("copyto: 'where' must be a boolean array")
        new = ew.where.bind(where, src, dst)
    inplace_assign(dst, new, "numpy.copyto(dst, src)")
    return None


# --- index helpers that read only shapes ---------------------------------------------------------
@implements(np.diag_indices_from)
def _diag_indices_from(arr):
    """NumPy's index arrays of the main diagonal, from ``arr``'s shape."""
    if arr.ndim < 2:
        raise ValueError("input array must be at least 2-d")
    if len(set(arr.shape)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    return np.diag_indices(arr.shape[0], arr.ndim)


@implements(np.tril_indices_from)
def _tril_indices_from(arr, k=0):
    """NumPy's index arrays of the lower triangle, from ``arr``'s shape."""
    if arr.ndim != 2:
        raise ValueError("input array must be 2-d")
    return np.tril_indices(arr.shape[-2], k=k, m=arr.shape[-1])


@implements(np.triu_indices_from)
def _triu_indices_from(arr, k=0):
    """NumPy's index arrays of the upper triangle, from ``arr``'s shape."""
    if arr.ndim != 2:
        raise ValueError("input array must be 2-d")
    return np.triu_indices(arr.shape[-2], k=k, m=arr.shape[-1])


@implements(np.ravel_multi_index)
def _ravel_multi_index(multi_index, dims, mode="raise", order="C"):
    """Flat positions ``sum_i index_i * stride_i`` (int64) of the broadcast integer index
    arrays; ``mode`` (one, or one per axis) as in take."""
    dims = (operator.index(dims),) if not isinstance(dims, (tuple, list)) else tuple(operator.index(d) for d in dims)
    if hasattr(multi_index, "ndim"):
        multi_index = [ki.getitem_static(multi_index, (i,)) for i in range(multi_index.shape[0])]
    multi_index = [asarray(unlabeled(i)) for i in multi_index]
    if len(multi_index) != len(dims):
        raise ValueError(f"parameter multi_index must be a sequence of length {len(dims)}")
    if order not in ("C", "F"):
        raise ValueError("only 'C' or 'F' order is permitted")
    modes = (mode,) * len(dims) if isinstance(mode, str) else tuple(mode)
    if len(modes) != len(dims):
        raise ValueError("mode must be a string or a sequence of length len(dims)")
    arrays = [i if hasattr(i, "ndim") else np.asarray(i) for i in multi_index]
    for i in arrays:
        if dtype_kind(i.dtype) not in "iu":
            raise TypeError(f"Cannot cast array data from dtype('{i.dtype}') to dtype('int64') according to the "
                            "rule 'safe'")
    shape = np.broadcast_shapes(*[tuple(i.shape) for i in arrays])
    total = None
    stride = 1
    axes = range(len(dims) - 1, -1, -1) if order == "C" else range(len(dims))
    for axis in axes:
        index, size, how = arrays[axis], dims[axis], modes[axis]
        index = ew.astype.bind(index, dtype=namespace(index).int64) if index.dtype != namespace(index).int64 else index
        if how == "wrap":
            index = ew.remainder.bind(index, size)
        elif how == "clip":
            index = clip(index, 0, size - 1)
        elif how == "raise":
            if known_true(ew.logical_or.bind(ew.less.bind(index, 0), ew.greater_equal.bind(index, size))):
                raise ValueError("invalid entry in coordinates array")
        else:
            raise ValueError(f"clipmode must be one of 'clip', 'raise', or 'wrap' (got {how!r})")
        term = ew.multiply.bind(index, stride) if stride != 1 else index
        total = term if total is None else ew.add.bind(total, term)
        stride *= size
    return kcore.broadcast_to.bind(total, shape=shape) if tuple(total.shape) != shape else total
