"""interp: NumPy's piecewise-linear interpolation (``np.interp``) as one primitive.

``interp.bind(x, xp, fp, left=..., right=..., rows=k)``: the values ``fp`` given at the
increasing sample points ``xp`` (last axis, ``n`` long), read at the points ``x``, in
float64, with NumPy's answers at the edges: ``left`` below ``xp[0]`` and ``right`` above
``xp[-1]`` (``None``: ``fp[0]`` and ``fp[-1]``), ``fp[-1]`` at ``xp[-1]`` exactly, NaN at a
NaN ``x`` (``fp[0]`` where ``n == 1``, as NumPy).  The inputs are float64 already (the
NumPy handler casts them, differentiably); ``left``/``right`` are Python numbers.

``rows`` counts the leading axes that hold one table each: ``x`` is ``(*Rx, *S)``, ``xp``
is ``(*Rxp, n)`` and ``fp`` is ``(*Rfp, n)``, the three ``R`` of ``rows`` axes each,
broadcast against each other (an axis of size 1 is shared); the result is
``(*R, *S)``.  ``rows == 0`` is ``np.interp`` itself.  The batch rule puts a batch axis in
front (size 1 for an unbatched argument, a view: nothing is repeated) and binds with
``rows + 1``, so nested vmaps compose.

Costs.  On NumPy the impl is NumPy's ``interp`` (its bits): one call where only ``x`` has
rows (a shared table), else one call per row of ``R`` (a Python loop of ``prod(R)`` calls of
O(|S| log n) each).  Elsewhere (CuPy with rows, libraries without ``interp``) it is the
same formula, vectorised: the segment by ``searchsorted`` in a shared table, or, for one
table per row, by counting the knots ``<= x`` (O(|x| n) time and memory; NumPy searches
row by row instead).

Derivatives (from NumPy's formula ``y = fp[j] + s (x - xp[j])``, ``s`` the slope of the
segment ``j`` of ``x``, ``w = (x - xp[j]) / (xp[j+1] - xp[j])``): linear in ``fp`` with the
weights ``1 - w`` and ``w`` at ``j`` and ``j + 1`` (outside the grid: ``fp[0]`` or
``fp[-1]`` with weight 1 when ``left``/``right`` is None, nothing for a constant); ``s``
in ``x`` inside ``[xp[0], xp[-1]]`` (the last segment's slope at ``xp[-1]``), 0 outside;
``s (w - 1)`` and ``-s w`` in ``xp[j]`` and ``xp[j+1]`` inside, 0 outside.  The VJP is the
transpose: the same weights scattered back into ``fp`` and ``xp`` (the transpose of the
gather, an index-add).  The segment index comes from :data:`interp_segment`, which carries
no derivative; the weights are computed with ``bind``, so second derivatives compose.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from . import elementwise as ew
from .backend import extra, namespace, numpy_namespace
from .core import broadcast_to, differentiable_input, expand_dims, reshape, unbroadcast
from .indexing import getitem_static
from .primitive import Primitive
from .reductions import take_along_axis

__all__ = ["interp", "interp_segment"]


def _row_shapes(x, xp, fp, rows):
    """``(R, S)``: the broadcast row shape and the shape of the points of one row."""
    row = np.broadcast_shapes(tuple(x.shape[:rows]), tuple(xp.shape[:rows]), tuple(fp.shape[:rows]))
    return tuple(row), tuple(x.shape[rows:])


def _pick(index, shape):
    """The row ``index`` of an argument whose row shape is ``shape`` (size-1 axes shared)."""
    return tuple(0 if size == 1 else i for i, size in zip(index, shape))


# --- the values ----------------------------------------------------------------------------------
def _interp_impl(x, xp, fp, *, left, right, rows):
    ns = namespace(x, xp, fp)
    row, points = _row_shapes(x, xp, fp, rows)
    if ns is numpy_namespace:
        x, xp, fp = np.asarray(x), np.asarray(xp), np.asarray(fp)
        if all(size == 1 for size in xp.shape[:rows] + fp.shape[:rows]):  # one table: one call
            return np.asarray(np.interp(x, xp.reshape(-1), fp.reshape(-1), left=left, right=right))  # (*Rx, *S)
        out = np.empty(row + points)
        for index in np.ndindex(*row):
            out[index] = np.interp(x[_pick(index, x.shape[:rows])], xp[_pick(index, xp.shape[:rows])],
                                   fp[_pick(index, fp.shape[:rows])], left=left, right=right)
        return out
    library_interp = getattr(ns, "interp", None)
    if rows == 0 and library_interp is not None:  # CuPy's interp: NumPy's arguments
        return library_interp(x, xp, fp, left=left, right=right)
    return _formula(ns, x, xp, fp, left, right, rows)


def _segments(ns, x, xp, rows):
    """The segment of each point, ``xp[j] <= x < xp[j+1]`` clipped to ``[0, n - 2]``
    (``0`` for ``n == 1``), shaped ``(*broadcast(Rx, Rxp), *S)``; int64."""
    n = xp.shape[-1]
    points = tuple(x.shape[rows:])
    size = math.prod(points)
    flat = ns.reshape(x, tuple(x.shape[:rows]) + (size,))
    if all(s == 1 for s in xp.shape[:rows]):
        found = ns.searchsorted(ns.reshape(xp, (n,)), flat, side="right")
    elif ns is numpy_namespace:  # one search per row
        row = np.broadcast_shapes(tuple(x.shape[:rows]), tuple(xp.shape[:rows]))
        found = np.empty(row + (size,), dtype=np.int64)
        for index in np.ndindex(*row):
            found[index] = np.searchsorted(xp[_pick(index, xp.shape[:rows])], flat[_pick(index, flat.shape[:rows])],
                                           side="right")
    else:  # one table per row, vectorised: count the knots at or below each point
        table = ns.reshape(xp, tuple(xp.shape[:rows]) + (1, n))
        found = ns.sum(ns.astype(table <= flat[..., None], ns.int64), axis=-1)
    found = ns.astype(found, ns.int64) - 1
    found = ns.clip(found, 0, max(n - 2, 0))
    return ns.reshape(found, tuple(found.shape[:rows]) + points)


def _formula(ns, x, xp, fp, left, right, rows):
    """NumPy's interp written with array-API calls: the same operations in the same order
    (the same bits where NumPy's C loop is not compiled with fused multiply-adds)."""
    row, points = _row_shapes(x, xp, fp, rows)
    n = xp.shape[-1]
    shape = row + points
    size = math.prod(points)
    x = ns.broadcast_to(ns.reshape(x, tuple(x.shape[:rows]) + (size,)), row + (size,))
    xp = ns.broadcast_to(xp, row + (n,))
    fp = ns.broadcast_to(fp, row + (n,))
    first_x, last_x = xp[..., :1], xp[..., n - 1:]
    first_f, last_f = fp[..., :1], fp[..., n - 1:]
    low = ns.broadcast_to(ns.reshape(_segments(ns, x, xp, rows), row + (size,)), row + (size,))
    take = extra(ns, "take_along_axis")
    if n == 1:
        out = ns.broadcast_to(first_f, row + (size,))
    else:
        high = low + 1
        low_x, high_x = take(xp, low, axis=rows), take(xp, high, axis=rows)
        low_f, high_f = take(fp, low, axis=rows), take(fp, high, axis=rows)
        slope = (high_f - low_f) / (high_x - low_x)
        out = slope * (x - low_x) + low_f
        out = ns.where(ns.isnan(out), slope * (x - high_x) + high_f, out)  # NumPy's second try
        out = ns.where(ns.isnan(out) & (low_f == high_f), low_f, out)
        out = ns.where(x == last_x, last_f, out)
        out = ns.where(ns.isnan(x), x, out)
    out = ns.where(x < first_x, first_f if left is None else ns.asarray(left, dtype=out.dtype), out)
    out = ns.where(x > last_x, last_f if right is None else ns.asarray(right, dtype=out.dtype), out)
    return ns.reshape(out, shape)


def _with_rows(values, batched):
    """The arguments with this level's batch axis in front: size 1 where unbatched."""
    return [v if b else expand_dims.bind(v, axis=(0,)) for v, b in zip(values, batched)]


def _interp_batch(axis_size, values, batched, *, left, right, rows):
    return interp.bind(*_with_rows(values, batched), left=left, right=right, rows=rows + 1), True


# --- the segment: an index, no derivative --------------------------------------------------------
def _segment_impl(x, xp, *, rows):
    return _segments(namespace(x, xp), x, xp, rows)


def _segment_batch(axis_size, values, batched, *, rows):
    return interp_segment.bind(*_with_rows(values, batched), rows=rows + 1), True


interp_segment = Primitive("interp_segment", _segment_impl, _segment_batch, differentiable=False)


# --- derivatives ---------------------------------------------------------------------------------
def _gather(table, index, rows):
    """``table[..., index]`` along the last axis, rows broadcast: ``(*R, *S)``."""
    points = tuple(index.shape[rows:])
    flat = reshape.bind(index, shape=tuple(index.shape[:rows]) + (math.prod(points),))
    taken = take_along_axis.bind(table, flat, axis=rows)
    return reshape.bind(taken, shape=tuple(taken.shape[:rows]) + points)


def _scatter(g, table, index, rows):
    """The transpose of :func:`_gather`: ``g`` added into zeros shaped as ``table``."""
    points = tuple(index.shape[rows:])
    flat = reshape.bind(index, shape=tuple(index.shape[:rows]) + (math.prod(points),))
    g = reshape.bind(g, shape=tuple(g.shape[:rows]) + (math.prod(points),))
    # rows where neither the table nor the index varies (only the other table does) sum first
    key = np.broadcast_shapes(tuple(table.shape[:rows]), tuple(index.shape[:rows]))
    g = unbroadcast(g, tuple(key) + (math.prod(points),))
    (cotangent, _) = take_along_axis.vjp(g, (table, flat), None, axis=rows)
    return cotangent


class _Pieces:
    """What the rules read of the primals: the segment, its slope and weight, and the masks
    of the regions, each computed when a rule first asks (all with ``bind``, so that the
    rules differentiate again)."""

    def __init__(self, x, xp, fp, left, right, rows):
        self.x, self.xp, self.fp, self.left, self.right, self.rows = x, xp, fp, left, right, rows
        self.n = n = xp.shape[-1]
        row, points = _row_shapes(x, xp, fp, rows)
        self.shape = row + points
        lift = lambda v: reshape.bind(v, shape=tuple(v.shape[:rows]) + (1,) * len(points))  # noqa: E731
        self.first_x = lift(getitem_static(xp, (Ellipsis, slice(0, 1))))
        self.last_x = lift(getitem_static(xp, (Ellipsis, slice(n - 1, n))))
        self.inside = ew.logical_and.bind(ew.greater_equal.bind(x, self.first_x),
                                          ew.less_equal.bind(x, self.last_x))
        self.low = interp_segment.bind(x, xp, rows=rows)
        self.high = ew.add.bind(self.low, 1) if n > 1 else None

    @functools.cached_property
    def below(self):
        return ew.less.bind(self.x, self.first_x)

    @functools.cached_property
    def above(self):
        return ew.greater.bind(self.x, self.last_x)

    @functools.cached_property
    def fp_reach(self):
        """Where fp reaches the output at all: inside, and outside where no constant fills."""
        reach = self.inside
        if self.left is None:
            reach = ew.logical_or.bind(reach, self.below)
        if self.right is None:
            reach = ew.logical_or.bind(reach, self.above)
        return reach

    @functools.cached_property
    def ends_x(self):
        return _gather(self.xp, self.low, self.rows), _gather(self.xp, self.high, self.rows)

    @functools.cached_property
    def width(self):
        low_x, high_x = self.ends_x
        return ew.subtract.bind(high_x, low_x)

    @functools.cached_property
    def slope(self):
        low_f, high_f = _gather(self.fp, self.low, self.rows), _gather(self.fp, self.high, self.rows)
        return ew.divide.bind(ew.subtract.bind(high_f, low_f), self.width)

    @functools.cached_property
    def weight(self):
        return ew.divide.bind(ew.subtract.bind(self.x, self.ends_x[0]), self.width)

    @functools.cached_property
    def fp_weight(self):
        """fp's weight at ``high``: w inside, 0 below (fp[0] there), 1 above (fp[-1])."""
        return ew.where.bind(self.below, 0.0, ew.where.bind(self.above, 1.0, self.weight))


def _to_shape(value, shape):
    return value if tuple(value.shape) == tuple(shape) else broadcast_to.bind(value, shape=tuple(shape))


def _interp_jvp(primals, tangents, *, left, right, rows):
    x, xp, fp = primals
    tx, txp, tfp = tangents
    out = interp.bind(x, xp, fp, left=left, right=right, rows=rows)
    if tx is None and txp is None and tfp is None:
        return out, None
    p = _Pieces(x, xp, fp, left, right, rows)
    parts = []
    if tfp is not None:
        low_t = _gather(tfp, p.low, rows)
        if p.n > 1:  # (1 - w) dfp[j] + w dfp[j+1]
            low_t = ew.add.bind(low_t, ew.multiply.bind(
                p.fp_weight, ew.subtract.bind(_gather(tfp, p.high, rows), low_t)))
        parts.append(ew.where.bind(p.fp_reach, low_t, 0.0))
    if p.n > 1 and tx is not None:
        parts.append(ew.where.bind(p.inside, ew.multiply.bind(p.slope, tx), 0.0))
    if p.n > 1 and txp is not None:  # s (w - 1) dxp[j] - s w dxp[j+1]
        low_t, high_t = _gather(txp, p.low, rows), _gather(txp, p.high, rows)
        moved = ew.subtract.bind(ew.multiply.bind(ew.subtract.bind(p.weight, 1.0), low_t),
                                 ew.multiply.bind(p.weight, high_t))
        parts.append(ew.where.bind(p.inside, ew.multiply.bind(p.slope, moved), 0.0))
    if not parts:
        return out, None
    tangent = parts[0]
    for part in parts[1:]:
        tangent = ew.add.bind(tangent, part)
    return out, _to_shape(tangent, out.shape)


def _interp_vjp(g, primals, out, *, left, right, rows):
    return _interp_vjp_wanted(g, primals, out, (0, 1, 2), left=left, right=right, rows=rows)


def _interp_vjp_wanted(g, primals, out, positions, *, left, right, rows):
    """The cotangents of the arguments at ``positions`` only (None for the others)."""
    x, xp, fp = primals
    wanted = [i in positions and differentiable_input(v) for i, v in enumerate(primals)]
    if not any(wanted):
        return None, None, None
    p = _Pieces(x, xp, fp, left, right, rows)
    g = _to_shape(g, p.shape)
    x_bar = xp_bar = fp_bar = None
    if wanted[2]:
        if p.n == 1:
            fp_bar = _scatter(ew.where.bind(p.fp_reach, g, 0.0), fp, p.low, rows)
        else:
            at_high = ew.where.bind(p.fp_reach, ew.multiply.bind(g, p.fp_weight), 0.0)
            at_low = ew.subtract.bind(ew.where.bind(p.fp_reach, g, 0.0), at_high)
            fp_bar = ew.add.bind(_scatter(at_low, fp, p.low, rows), _scatter(at_high, fp, p.high, rows))
    if p.n > 1 and (wanted[0] or wanted[1]):
        sloped = ew.where.bind(p.inside, ew.multiply.bind(g, p.slope), 0.0)
        if wanted[0]:
            x_bar = unbroadcast(sloped, x.shape)
        if wanted[1]:
            at_high = ew.multiply.bind(sloped, p.weight)
            at_low = ew.subtract.bind(at_high, sloped)  # s (w - 1) g
            xp_bar = ew.subtract.bind(_scatter(at_low, xp, p.low, rows), _scatter(at_high, xp, p.high, rows))
    return x_bar, xp_bar, fp_bar


_interp_vjp.wanted = _interp_vjp_wanted
interp = Primitive("interp", _interp_impl, _interp_batch, _interp_jvp, _interp_vjp)
