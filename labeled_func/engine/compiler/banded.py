"""The ``band`` rewrite of ``Program.prune``: matrices that hold a few diagonals over a
background that varies along one axis only, computed as vectors.

``lf.jacrev``, ``lf.jacfwd`` and ``lf.hessian`` push the identity (their basis, a constant
of the program) through the model. Through a local model (a stencil: rolls, slices and
their transposes, pads; sums and products by per-site partials) every matrix the
transform makes has the form

    ``M[i, j] = band_k[i]``  where ``j == (i + k) % c`` for one of a few keys ``k``,
    ``M[i, j] = background[j]`` (or ``[i]``, or one value) elsewhere,

for an r x c matrix (its last axis, and the axis before the size-1 axes that precede it;
dims before those are leading dims: a vmapped Jacobian, one matrix per example). The
n x n arrays that the trace recorded (the identity read in full, a product written in
full for each partial, a roll or a pad of each) can then be computed as vectors, and the
matrix written once where a node of another form reads it or it is an output: the
Jacobian of the Lorenz-96 tendency at 2,000 sites takes one pass over its 32 MB instead
of four.

Every element is the result of the same operations on the same operands as in the
recorded program: elementwise operations are computed element by element on the
diagonals and the backgrounds; rolls, slices, pads, transposes and reshapes that only
add or drop size-1 axes move elements, which the pass follows position by position (a
pad's elements are +0.0). Only elementwise operations that IEEE rounds exactly (sums,
differences, products, quotients, negation) and selections (the NaN-safe products,
``where``) are taken: the same bits, signed zeros included, and NaN where NaN (which of
two NaNs a sum or product passes on, and so its sign bit, NumPy's loops choose by
position: lf.jit's contract reads NaN where NaN).
"""
from __future__ import annotations

import math

import numpy as np

from labeled_func_kernels import core as kcore
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import indexing as kindex
from labeled_func_kernels import shape as kshape

from ..replay import safe_masked, safe_product
from . import thresholds
from .banded_run import diagonal_columns, materializer
from .nodes import Constant
from .planning import _c_ordered

_ELEMENTWISE = {ew.add: np.add, ew.subtract: np.subtract, ew.multiply: np.multiply, ew.divide: np.divide,
                ew.negative: np.negative, ew.safe_multiply: safe_product, ew.safe_masked: safe_masked,
                ew.where: np.where}
"""The elementwise primitives a banded matrix passes through, and the function that
computes them on its vectors (correctly rounded, or a selection per element)."""

_CONDITIONS = {ew.where: 0}
"""The operand of a selection that may be boolean (``where``'s condition)."""


def max_bands(n: int) -> int:
    """Diagonals beyond which a matrix is computed in full (each diagonal costs a vector
    per operation: past n / 8 of them the vectors cost about what the matrix does; four
    on small matrices, which ``BAND_MIN_SIZE`` keeps from the pass but for tests)."""
    return max(4, n // 8)


class _Form:
    """What the pass knows of a banded slot: the shape's leading dims, rows ``r``, size-1
    axes ``q`` between the rows and the columns ``c``; the keys of its diagonals, each with
    the rows where it may differ from the background (a diagonal of a rectangular matrix
    or a pad's neighbour holds the background on some rows: those rows do not make keys
    when the diagonal moves); the axis its background varies along (``"row"``, ``"col"``,
    or None for one value per matrix)."""

    __slots__ = ("lead", "r", "q", "c", "keys", "background")

    def __init__(self, lead, r, q, c, keys, background):
        self.lead, self.r, self.q, self.c = lead, r, q, c
        self.keys, self.background = keys, background


def _matrix_axes(shape):
    """(leading dims, r, q, c) of a shape read as matrices (the last axis, the last one
    before it of another size than 1), or None."""
    if len(shape) < 2 or shape[-1] < 2:
        return None
    k = len(shape) - 2
    while k >= 0 and shape[k] == 1:
        k -= 1
    if k < 0:
        return None
    return tuple(shape[:k]), shape[k], len(shape) - 2 - k, shape[-1]


def band(program):
    """Rewrite the banded nodes (see the module): each one that a node of another form
    reads, or that is an output, becomes one node computing its diagonals and background
    from the vectors and constants it depends on and writing the matrix once; the banded
    nodes that only banded nodes read are left for ``Program.prune`` to drop as dead."""
    layout = program._slot_layouts()
    forms, recipes, constants = {}, {}, {}
    for node in program.nodes:
        out = node.out
        if out is None or out[1].kind != "f" or not _c_ordered(out, node.strides):
            continue
        axes = _matrix_axes(out[0])
        if axes is None or math.prod(out[0]) < max(thresholds.BAND_MIN_SIZE, 1):
            continue
        made = (_elementwise(node, axes, forms, layout, constants) if node.prim in _ELEMENTWISE and not node.params
                else _moved(node, axes, forms))
        if made is not None:
            forms[node.slot], recipes[node.slot] = made
    if not forms:
        return program
    read_otherwise = set(program.outputs)
    for node in program.nodes:
        if node.slot not in forms:
            read_otherwise.update(ref for ref in node.refs if type(ref) is int)
    order = {node.slot: index for index, node in enumerate(program.nodes)}
    written = {}  # a banded slot -> the earliest written slot that holds its matrix (itself, or a copy)
    for slot in sorted((slot for slot in forms if slot in read_otherwise), key=order.get):
        written.setdefault(slot, slot)
        recipe = recipes[slot]
        if recipe[0] == "move" and _moves_nothing(recipe, forms[recipe[1]], forms[slot]):
            written.setdefault(recipe[1], slot)  # a getitem, reshape or copy of it: its matrix too
    for node in program.nodes:
        if node.slot in forms and node.slot in read_otherwise:
            readable = {slot: at for slot, at in written.items() if order[at] < order[node.slot]}
            node.refs, node.function = materializer(node.slot, forms, recipes, node.out, readable)
            node.prim, node.fusable, node.params = None, None, {}
    return program


def whole_band(parts, r, source_r):
    """The source's key when a moved diagonal (``parts``, see :func:`_plan`) is one whole
    diagonal of the source, row for row; else None."""
    if len(parts) == 1 and parts[0][0] == "band" and len(parts[0][2]) == r == source_r and np.array_equal(
            parts[0][2], parts[0][3]):
        return parts[0][1]
    return None


def _moves_nothing(recipe, source, form):
    """Whether a move's result holds its source's elements where they were (a getitem of
    whole axes, a reshape of size-1 axes, a copy)."""
    _, _, moves, backgrounds = recipe
    if backgrounds is not None:
        along, zeros = backgrounds
        if zeros.any() or not (along is None or np.array_equal(along, np.arange(len(along)))):
            return False
    return ((source.r, source.c) == (form.r, form.c) and set(moves) == set(source.keys)
            and all(whole_band(parts, form.r, source.r) == key for key, parts in moves.items()))


# --- elementwise operations ---------------------------------------------------------------------------
def _elementwise(node, axes, forms, layout, constants):
    """(form, recipe) of an elementwise node with a banded operand, or None."""
    lead, r, q, c = axes
    dtype = node.out[1]
    operands, kinds, keys, banded = [], set(), {}, False
    for position, ref in enumerate(node.refs):
        form = forms.get(ref) if type(ref) is int else None
        if form is not None:
            if (form.r, form.q, form.c) != (r, q, c):
                return None
            operands.append(("form", ref))
            _merge(keys, form.keys)
            kinds.add(form.background)
            banded = True
            continue
        if type(ref) is Constant and type(ref.value) is np.ndarray and ref.value.dtype == dtype:
            read = _constant_bands(ref.value, axes, constants)
            if read is not None:
                zero, bands, masks = read
                operands.append(("bands", zero, bands))
                _merge(keys, masks)
                banded = True
                continue
        boolean = _CONDITIONS.get(node.prim) == position
        kind = _vector_kind(ref, layout, axes, dtype, boolean)
        if kind is False:
            return None
        operands.append(("vector", ref, kind))
        kinds.add(kind)
    kinds.discard(None)
    if not banded or len(kinds) > 1 or len(keys) > max_bands(min(r, c)):
        return None
    return _Form(lead, r, q, c, keys, next(iter(kinds), None)), ("apply", _ELEMENTWISE[node.prim], operands, dtype)


def _merge(keys, more):
    """``keys`` (key -> rows) with ``more``'s rows added."""
    for key, rows in more.items():
        keys[key] = rows | keys[key] if key in keys else rows


def _vector_kind(ref, layout, axes, dtype, boolean):
    """How an operand that is not banded broadcasts against matrices of ``axes``: None
    (one value per matrix), ``"col"`` (varies along the columns), ``"row"`` (along the
    rows), or False (another shape or dtype: the node stays as recorded)."""
    lead, r, q, c = axes
    if type(ref) is Constant and type(ref.value) in (int, float):
        return None
    if type(ref) is Constant and isinstance(ref.value, np.generic):
        return None if ref.value.dtype == dtype or (boolean and ref.value.dtype == np.bool_) else False
    known = layout.get(ref) if type(ref) is int else (
        (ref.value.shape, ref.value.dtype) if type(ref.value) is np.ndarray else None)
    width = len(lead) + q + 2
    if known is None or len(known[0]) > width or not (
            known[1] == dtype or (boolean and known[1] == np.bool_)):
        return False
    padded = (1,) * (width - len(known[0])) + tuple(known[0])
    if any(size not in (1, full) for size, full in zip(padded, lead)) or any(size != 1 for size in padded[-q - 1:-1]):
        return False
    return {(1, 1): None, (1, c): "col", (r, 1): "row"}.get((padded[len(lead)], padded[-1]), False)


def _constant_bands(value, axes, constants):
    """(background, diagonals) of a constant whose shape is the result's matrices (key k:
    its elements ``[i, (i + k) % c]``, for each row i), or None (another form, or more
    diagonals than ``max_bands``)."""
    lead, r, q, c = axes
    if any(size != 1 for size in value.shape[:-2 - q]) or value.shape[-2 - q:] != (r,) + (1,) * q + (c,):
        return None
    key = (id(value), r, c)
    if key not in constants:
        constants[key] = _read_bands(np.ascontiguousarray(value).reshape(r, c), r, c)  # a view: copied once
    return constants[key]


def _read_bands(matrix, r, c):
    """(background, diagonals) of a constant r x c matrix: its elements other than those of
    a few diagonals all hold one zero, +0.0 or -0.0 (the identity, or a product of it by a
    negative number); None otherwise."""
    unsigned = np.dtype(f"u{matrix.dtype.itemsize}")
    bits = matrix.reshape(-1).view(unsigned)
    for zero in (np.zeros((), matrix.dtype), -np.zeros((), matrix.dtype)):
        differ = bits != zero.view(unsigned)
        if np.count_nonzero(differ) <= max_bands(min(r, c)) * r:  # counted first: a dense matrix's
            break  # indices are never made
    else:
        return None
    rows, columns = np.divmod(np.flatnonzero(differ), c)
    keys = (columns - rows) % c
    unique = np.unique(keys)
    if unique.size == 0 or unique.size > max_bands(min(r, c)):
        return None
    index = np.arange(r)
    masks = {int(k): np.isin(index, rows[keys == k]) for k in unique}
    return zero, {int(k): matrix[index, diagonal_columns(k, r, c)] for k in unique}, masks


# --- operations that move elements --------------------------------------------------------------------
def _moved(node, axes, forms):
    """(form, recipe) of a roll, pad, slice, transpose or reshape of a banded slot that
    keeps it banded, or None. The recipe says, for each diagonal of the result, where its
    elements come from (a diagonal of the source, its background, or a pad's zero)."""
    source = node.refs[0] if node.refs else None
    form = forms.get(source) if type(source) is int else None
    if form is None:
        return None
    lead, r, q, c = axes
    first = len(form.lead)  # the source's row axis; its column axis is the last
    rows, columns, swap = np.arange(form.r), np.arange(form.c), False
    prim, params = node.prim, node.params
    if prim is kshape.roll and type(getattr(node.function, "shift", None)) is int:
        axis, shift = node.function.axis, node.function.shift
        if axis == first:
            rows = (rows - shift) % form.r
        elif axis == len(form.lead) + form.q + 1:
            columns = (columns - shift) % form.c
        elif axis < first:
            return None  # a roll of the examples: another matrix at each place
    elif prim is kindex.pad and set(params) == {"pad_width", "constant_values"}:
        maps = _padded(params, form)
        if maps is None:
            return None
        rows, columns = maps
    elif prim is kindex.getitem and set(params) == {"template"} and len(node.refs) == 1:
        maps = _sliced(params["template"], form)
        if maps is None:
            return None
        rows, columns = maps
    elif prim is kcore.transpose and set(params) == {"axes"}:
        if form.q or type(params["axes"]) not in (tuple, list) or tuple(params["axes"]) != tuple(
                range(first)) + (first + 1, first):
            return None
        swap = True
    elif not ((prim is kcore.reshape and set(params) == {"shape"})
              or (prim is kcore.broadcast_to and set(params) == {"shape"})
              or (prim is kcore.copy and not params)):
        return None
    if lead != form.lead or (swap and (r, c) != (form.c, form.r)) or (
            not swap and (r, c) != (len(rows), len(columns))):
        return None  # only size-1 axes added or dropped; a broadcast along the leading dims is not followed
    if prim is kcore.broadcast_to and (r, q, c) != (form.r, form.q, form.c):
        return None
    plan = _plan(form, rows, columns, swap, r, c)
    if plan is None:
        return None
    keys, background, moves, backgrounds = plan
    return _Form(lead, r, q, c, keys, background), ("move", source, moves, backgrounds)


def _padded(params, form):
    """The row and column maps (result index -> source index, -1 for a pad's zero) of a pad
    of the rows or the columns with +0.0, or None."""
    rows, columns = np.arange(form.r), np.arange(form.c)
    row_axis, column_axis = len(form.lead), len(form.lead) + form.q + 1
    for axis, ((before, after), (low, high)) in enumerate(zip(params["pad_width"], params["constant_values"])):
        if not (before or after):
            continue
        if axis not in (row_axis, column_axis) or not all(
                (type(v) in (int, float) or isinstance(v, (np.integer, np.floating))) and v == 0 and not np.signbit(v)
                for v in (low, high)):
            return None  # a pad of another value than +0.0 (xarray's shift pads NaN unless told)
        padded = np.concatenate((np.full(before, -1), np.arange(form.r if axis == row_axis else form.c),
                                 np.full(after, -1)))
        if axis == row_axis:
            rows = padded
        else:
            columns = padded
    if (rows < 0).any() and (columns < 0).any():
        return None  # zeros along both: a background of two dims
    return rows, columns


def _sliced(template, form):
    """The row and column maps of a getitem by slices (of step 1 on the matrix axes, whole
    elsewhere), or None."""
    shape = form.lead + (form.r,) + (1,) * form.q + (form.c,)
    items = list(template)
    if sum(item is Ellipsis for item in items) > 1 or not all(type(item) is slice or item is Ellipsis for item in items):
        return None
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at:at + 1] = [slice(None)] * (len(shape) - len(items) + 1)
    items += [slice(None)] * (len(shape) - len(items))
    if len(items) != len(shape):
        return None
    maps = []
    for axis, (item, size) in enumerate(zip(items, shape)):
        start, stop, step = item.indices(size)
        kept = np.arange(start, stop, step)
        if axis in (len(form.lead), len(shape) - 1):
            if step != 1:
                return None
            maps.append(kept)
        elif len(kept) != size:
            return None  # a slice of the examples, or of a size-1 axis to nothing
    return maps[0], maps[1]


def _plan(form, rows, columns, swap, r, c):
    """For a result whose element ``[i, j]`` is the source's ``[rows[i], columns[j]]``
    (``[rows[j], columns[i]]`` transposed; a pad's zero where an index is -1): its keys,
    its background's axis and, per key, where each row's element comes from; how its
    background is made. None where the result is not banded."""
    inverse_rows, inverse_columns = np.full(form.r, -1), np.full(form.c, -1)
    kept_rows, kept_columns = rows >= 0, columns >= 0
    inverse_rows[rows[kept_rows]] = np.flatnonzero(kept_rows)
    inverse_columns[columns[kept_columns]] = np.flatnonzero(kept_columns)
    keys = {}
    for key, mask in form.keys.items():  # where each element of the source's diagonals lands
        i = np.flatnonzero(mask)
        new_i, new_j = inverse_rows[i], inverse_columns[diagonal_columns(key, form.r, form.c)[i]]
        if swap:
            new_i, new_j = new_j, new_i
        landed = (new_i >= 0) & (new_j >= 0)
        new_i, new_keys = new_i[landed], (new_j[landed] - new_i[landed]) % c
        for new in np.unique(new_keys):
            rows_there = np.zeros(r, bool)
            rows_there[new_i[new_keys == new]] = True
            _merge(keys, {int(new): rows_there})
    if len(keys) > max_bands(min(r, c)):
        return None
    padded_rows, padded_columns = (~kept_rows).any(), (~kept_columns).any()
    background = form.background
    if swap:
        background = {"row": "col", "col": "row"}.get(background)
        padded_rows, padded_columns = padded_columns, padded_rows
    if padded_rows:
        if background == "col":
            return None
        background = "row"
    if padded_columns:
        if background == "row":
            return None
        background = "col"
    # the background: the source's, read through the map of its axis (zeros at the pads)
    if swap or (form.background is None and not (padded_rows or padded_columns)):
        backgrounds = None  # the same values (a transpose swaps the axis they vary along)
    elif form.background == "row" or (form.background is None and padded_rows):
        backgrounds = (None if form.background is None else np.maximum(rows, 0), rows < 0)
    else:
        backgrounds = (None if form.background is None else np.maximum(columns, 0), columns < 0)
    moves = {}
    for key in sorted(keys):
        i, j = np.arange(r), diagonal_columns(key, r, c)
        source_i, source_j = (rows[j], columns[i]) if swap else (rows[i], columns[j])
        inside = (source_i >= 0) & (source_j >= 0)
        source_key = (source_j - source_i) % form.c
        parts = []
        for old in sorted(form.keys):
            take = inside & (source_key == old)
            if take.any():
                parts.append(("band", old, np.flatnonzero(take), source_i[take]))
        rest = inside & ~np.isin(source_key, list(form.keys))
        if rest.any():
            parts.append(("background", None, np.flatnonzero(rest),
                          source_i[rest] if form.background == "row" else source_j[rest]))
        if (~inside).any():
            parts.append(("zero", None, np.flatnonzero(~inside), None))
        moves[key] = parts
    return keys, background, moves, backgrounds
