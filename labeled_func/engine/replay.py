"""The replay's own NumPy kernels: what a node of an ``lf.jit`` program calls where one is
faster than the primitive's impl, or writes into a buffer it is given (``out=``, see
``Program.prune`` in compiler/program.py).

Each kernel computes what the primitive computes (bit for bit, or to 1e-15 relative where
it sums in another order, as said): a NaN-safe product, a roll along one axis, sums over
trailing axes (alone or of a product), an operand spread to a broadcast shape, and a fused
evaluation that reads rolls of its leaves as shifted views.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from labeled_func_kernels.backend import finite_by_sum
from labeled_func_kernels.shape import roll_copy

__all__ = ["Shifted", "all_finite", "contraction", "rolled_evaluation", "roll_into", "safe_masked", "safe_product",
           "safe_product_checked", "spread_into", "trailing_sum"]


def all_finite(d: np.ndarray) -> bool:
    """Whether every element of ``d`` is finite: a finite sum over a float array says so
    (``finite_by_sum``: faster than ``isfinite(d).all()``); else the exact test decides."""
    if type(d) is np.ndarray and finite_by_sum(d):
        return True
    return bool(np.isfinite(d).all())


def safe_product(g: np.ndarray, d: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``safe_multiply`` of NumPy arrays, written into ``out`` when given: ``g * d``, and 0
    where ``g`` is 0 and ``d`` is not finite (the mask is computed only when ``d`` has a
    non-finite element, as the kernel does)."""
    if all_finite(d):
        return np.multiply(g, d, out=out)
    with np.errstate(invalid="ignore"):  # 0 * inf, masked below: no warning, as the kernel
        product = np.multiply(g, d, out=out)
    mask = _safe_mask(g, d)
    if type(product) is not np.ndarray:  # of 0-d operands a NumPy scalar, with no memory to write
        return np.where(mask, 0.0, product)
    np.copyto(product, 0.0, where=mask)
    return product


def safe_masked(total: np.ndarray, g: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``safe_masked`` of NumPy arrays: ``total``, 0 where ``safe_product(g, d)`` masks. Where
    ``d`` is all finite nothing is masked and ``total`` itself is returned, unbroadcast (its
    values broadcast to the result's: the band rewrite's vectors); else the mask's shape."""
    if all_finite(d):
        return total
    return np.where(_safe_mask(g, d), 0.0, total)


def _safe_mask(g, d):
    """Where the NaN-safe product zeroes ``g * d``: ``g`` is 0 and ``d`` is not finite."""
    return np.equal(g, 0) & ~np.isfinite(d)


def roll_into(shift: int, axis: int, shape: tuple[int, ...], dtype: np.dtype) -> Callable[..., np.ndarray]:
    """``np.roll`` along one axis, as two copies into ``out`` (a fresh array when None)."""
    size = shape[axis]
    step = shift % size if size else 0

    def roll(x, out=None):
        if out is None:
            out = np.empty(shape, dtype)
        if step == 0:
            np.copyto(out, x)
        else:
            roll_copy(x, step, axis, out)
        return out
    roll.writes_into = True
    roll.shift, roll.axis = step, axis
    return roll


def trailing_sum(axes: tuple[int, ...], keepdims: bool, shape: tuple[int, ...]) -> Callable[[np.ndarray], np.ndarray]:
    """A float sum over the trailing ``axes`` of an array of ``shape`` by einsum (its
    unrolled loop: 2-3 times NumPy's pairwise sum along a short last axis; equal to 1e-15
    relative)."""
    count = len(axes)
    lead, inner = shape[:len(shape) - count], math.prod(shape[len(shape) - count:])
    result = lead + (1,) * count if keepdims else lead
    subscripts = "ij->i" if lead else "i->"
    layout = (math.prod(lead), inner) if lead else (inner,)

    def total(x):
        return np.asarray(np.einsum(subscripts, x.reshape(layout))).reshape(result)
    total.writes_into = False  # reads its input only, but returns a small fresh array
    total.shape = shape
    total.contracted = lambda safe: contraction(total, subscripts, layout, result, safe)
    return total


def contraction(total: Callable[[np.ndarray], np.ndarray], subscripts: str, layout: tuple[int, ...],
                result: tuple[int, ...], safe: bool) -> Callable[..., np.ndarray]:
    """``total(a * d)`` (or of the NaN-safe product) in one einsum: the products are never
    stored (equal to 1e-15 relative of the product, then the sum)."""
    inputs, output = subscripts.split("->")
    pair = f"{inputs},{inputs}->{output}"

    def product_sum(a, d, finite=None):
        if safe and not (all_finite(d) if finite is None else finite):
            return total(safe_product(a, d))
        return np.asarray(np.einsum(pair, a.reshape(layout), d.reshape(layout))).reshape(result)
    product_sum.writes_into = False
    product_sum.checks = safe  # reads a finiteness flag of d when given one
    return product_sum


def safe_product_checked(g: np.ndarray, d: np.ndarray, finite: bool, out: np.ndarray | None = None) -> np.ndarray:
    """``safe_product`` with ``all_finite(d)`` computed once for the readers of ``d``."""
    if finite:
        return np.multiply(g, d, out=out)
    return safe_product(g, d, out=out)


safe_product.writes_into = safe_product_checked.writes_into = True
all_finite.writes_into = False  # reads its input only; a flag, not an array


def spread_into(shape: tuple[int, ...], dtype: np.dtype) -> Callable[..., np.ndarray]:
    """A copy of an operand broadcast to ``shape``, into ``out`` (fresh when None)."""
    def spread(x, out=None):
        if out is None:
            out = np.empty(shape, dtype)
        np.copyto(out, x)
        return out
    spread.writes_into = True
    return spread


class Shifted:
    """A leaf of a fused expression read as ``np.roll(ref, shift, axis)``."""

    __slots__ = ("ref", "axis", "shift")

    def __init__(self, ref, axis, shift):
        self.ref, self.axis, self.shift = ref, axis, shift

    def __eq__(self, other):
        return type(other) is Shifted and (self.ref, self.axis, self.shift) == (other.ref, other.axis, other.shift)

    def __hash__(self):
        return hash((self.ref, self.axis, self.shift))


def rolled_evaluation(evaluate: Callable[..., Any], leaves: Sequence[Any], out: tuple[tuple[int, ...], np.dtype],
                      axis: int) -> Callable[..., np.ndarray]:
    """A fused evaluation whose leaves include rolls along ``axis``, without the rolls: on
    C-contiguous arrays of the result's shape a roll is a shift of the flat array, except
    where it wraps around (the first and last indices along ``axis``): one evaluation over
    the flat arrays shifted, then the wrapped indices again with their values gathered
    (by slices where they are runs: one shift, or shifts of one sign and size). An operand
    broadcast against the result is spread to its shape first (one copy, fewer than the
    rolls'). Other layouts take the rolls as copies. ``evaluate`` is a numexpr evaluation or a
    binary ufunc (a fused tree, or one node reading a roll)."""
    shifts = tuple(leaf.shift if type(leaf) is Shifted else None for leaf in leaves)
    if type(evaluate) is np.ufunc:  # one node reading a roll: many alike in a stencil's program
        return _rolled_ufunc(evaluate, shifts, out, axis)
    return _rolled(evaluate, shifts, out, axis)


@functools.lru_cache(maxsize=1024)
def _rolled_ufunc(evaluate, shifts, out, axis):
    """:func:`rolled_evaluation` of a binary ufunc: one function per kind of node (it keeps
    no state; building one takes longer than a run of it, and a program folds ~1,000)."""
    return _rolled(evaluate, shifts, out, axis)


def _rolled(evaluate, shifts, out, axis):
    shape, dtype = out
    n, inner = shape[axis], math.prod(shape[axis + 1:])
    total = math.prod(shape)
    signed = [None if shift is None else (shift if shift <= n // 2 else shift - n) for shift in shifts]
    offsets = [0 if s is None else s * inner for s in signed]
    low, high = max(max(offsets), 0), total + min(min(offsets), 0)
    ahead, behind = max([s for s in signed if s is not None] + [0]), min([s for s in signed if s is not None] + [0])
    head = (slice(None),) * axis
    edges = []  # (where in the result, what to read of each leaf) for each run of wrapped indices
    for start, stop in ((0, ahead), (n + behind, n)):
        if start < stop:
            edges.append((head + (slice(start, stop),),
                          [None if s is None else head + (_run((np.arange(start, stop) - s) % n),)
                           for s in signed]))

    direct = type(evaluate) is np.ufunc  # writes into a strided view of the result

    def evaluate_rolled(*values, out=None):
        if out is None:
            out = np.empty(shape, dtype)
        if out.flags.c_contiguous and any(type(v) is np.ndarray and v.shape != shape for v in values) and all(
                v.shape == shape for v, s in zip(values, signed) if s is not None):
            # an operand broadcast against the rolled ones (a constant matrix against a batch of
            # them): spread once, so that the rolls stay shifted reads and are never copied
            values = [np.ascontiguousarray(np.broadcast_to(v, shape)) if type(v) is np.ndarray and v.shape != shape
                      else v for v in values]
        arrays = [v for v in values if type(v) is np.ndarray]
        if not (out.flags.c_contiguous and all(v.shape == shape and v.flags.c_contiguous for v in arrays)):
            return evaluate(*[v if s is None else np.roll(v, s, axis=axis) for v, s in zip(values, signed)], out=out)
        flat = out.reshape(-1)
        shifted = [v if type(v) is not np.ndarray else v.reshape(-1)[low - off:high - off]
                   for v, off in zip(values, offsets)]
        evaluate(*shifted, out=flat[low:high])
        for where, reads in edges:
            wrapped = [v if type(v) is not np.ndarray else v[where if read is None else read]
                       for v, read in zip(values, reads)]
            if direct:
                evaluate(*wrapped, out=out[where])
            else:
                out[where] = evaluate(*wrapped)
        return out
    evaluate_rolled.writes_into = True
    evaluate_rolled.ufunc = evaluate if direct else None  # one binary ufunc (a folded roll)
    return evaluate_rolled


def _run(indices):
    """A slice for consecutive increasing ``indices``, else the indices (a gather)."""
    if len(indices) and np.array_equal(indices, np.arange(indices[0], indices[0] + len(indices))):
        return slice(int(indices[0]), int(indices[0]) + len(indices))
    return indices
