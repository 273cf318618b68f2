"""The node that the ``band`` rewrite (``banded.py``) puts where a banded matrix is written:
it computes the diagonals and backgrounds of the banded slots it depends on, step by step
(an elementwise operation on the vectors, or a move of elements by the rewrite's static
maps; a slot whose matrix an earlier node wrote is read back from it), and writes the
matrix once. The same elements as the recorded program's nodes compute: see
``banded.py``."""
from __future__ import annotations

import numpy as np


def diagonal_columns(key, r, c):
    """The column of diagonal ``key`` in each row of an r x c matrix: ``(i + key) % c``."""
    return (np.arange(r) + key) % c


def _flat_diagonal(key, r, c):
    """The positions of diagonal ``key`` in an r x c matrix read flat."""
    return np.arange(r) * c + diagonal_columns(key, r, c)


def whole_band(parts, r, source_r):
    """The source's key when a moved diagonal (``parts``, see ``banded._plan``) is one whole
    diagonal of the source, row for row; else None."""
    if len(parts) == 1 and parts[0][0] == "band" and len(parts[0][2]) == r == source_r and np.array_equal(
            parts[0][2], parts[0][3]):
        return parts[0][1]
    return None


class _Value:
    """A banded matrix as vectors: its background (one value per matrix, or a vector
    along ``axis``) and its diagonals (key k: the elements ``[i, (i + k) % c]``, each row
    i), with the leading dims in front."""

    __slots__ = ("background", "axis", "bands")

    def __init__(self, background, axis, bands):
        self.background, self.axis, self.bands = background, axis, bands


def materializer(root, forms, recipes, out, written):
    """The function and refs of a node that computes the banded slot ``root`` from the
    vectors it depends on and writes the matrix once (into ``out=`` when given). A banded
    slot whose matrix an earlier node wrote (``written``: slot -> the slot holding it) is
    read back from that matrix, diagonal by diagonal, where every column has an element off
    the diagonals: each diagonal is computed once in a run, however many are written."""
    refs, order, holders = [], [], {}

    def visit(slot):
        if slot in order:
            return
        if slot != root and slot in written and _readable(forms[slot]) is not None:
            holders[slot] = written[slot]
            if written[slot] not in refs:
                refs.append(written[slot])
            order.append(slot)
            return
        recipe = recipes[slot]
        if recipe[0] == "move":
            visit(recipe[1])
        else:
            for operand in recipe[2]:
                if operand[0] == "form":
                    visit(operand[1])
                elif operand[0] == "vector" and operand[1] not in refs:
                    refs.append(operand[1])
        order.append(slot)

    visit(root)
    position = {ref: k for k, ref in enumerate(refs)}
    steps = [(slot, _read_back(forms[slot], position[holders[slot]])) if slot in holders
             else _step(slot, forms[slot], recipes[slot], forms, position) for slot in order]
    shape, dtype = out
    form = forms[root]
    lead, r, c = form.lead, form.r, form.c
    writes = {key: _flat_diagonal(key, r, c) for key in form.keys}

    def banded(*vectors, out=None):
        values = {}
        for slot, step in steps:
            values[slot] = step(values, vectors)
        value = values[root]
        if out is None or not out.flags.c_contiguous:  # the writes below go through views of a
            out = np.empty(shape, dtype)  # C-ordered array (a run's buffers are: the result is what counts)
        matrix = out.reshape(lead + (r, c))
        background = value.background
        if value.axis == "row":
            background = background[..., :, None]
        elif value.axis == "col":
            background = background[..., None, :]
        elif background.ndim:
            background = background[..., None]
        np.copyto(matrix, background)
        flat = out.reshape(lead + (r * c,))
        for key, diagonal in value.bands.items():
            flat[..., writes[key]] = diagonal
        return out

    banded.writes_into = True
    return tuple(refs), banded


def _readable(form):
    """(for each column, a row whose element there is on no diagonal; for each row, such a
    column) of a banded form, or None where a column or a row has none. Among any k + 1
    rows (columns) one is off the k diagonals in each column (row), where there are that
    many: only those are tried."""
    r, c, keys = form.r, form.c, list(form.keys)
    rows, columns = np.arange(r), np.arange(c)
    row_of, column_of = np.full(c, -1), np.full(r, -1)
    for i in range(min(r, len(keys) + 1)):
        row_of[~np.isin((columns - i) % c, keys) & (row_of < 0)] = i
    for j in range(min(c, len(keys) + 1)):
        column_of[~np.isin((j - rows) % c, keys) & (column_of < 0)] = j
    if (row_of < 0).any() or (column_of < 0).any():
        return None
    return row_of, column_of


def _read_back(form, at):
    """The function reading a banded value back from its written matrix (vector ``at``)."""
    r, c, lead = form.r, form.c, form.lead
    row_of, column_of = _readable(form)
    diagonals = {key: _flat_diagonal(key, r, c) for key in form.keys}
    background = {"col": row_of * c + np.arange(c), "row": np.arange(r) * c + column_of,
                  None: np.array([row_of[0] * c])}[form.background]

    def read(values, vectors):
        flat = np.reshape(vectors[at], lead + (r * c,))
        bands = {key: flat[..., where] for key, where in diagonals.items()}
        return _Value(flat[..., background], form.background, bands)
    return read


def _step(slot, form, recipe, forms, position):
    """(slot, the function that computes its _Value from those before and the vectors)."""
    r, c = form.r, form.c
    if recipe[0] == "move":
        return slot, _move_step(recipe, forms[recipe[1]], form)
    _, function, operands, dtype = recipe
    keys = sorted(form.keys)
    gathers = {key: diagonal_columns(key, r, c) for key in keys}
    lead, width = len(form.lead), len(form.lead) + form.q + 2
    readers = []
    for operand in operands:  # (kind, what) -> each call's (background, diagonals, axis)
        if operand[0] == "form":
            readers.append((0, operand[1]))
        elif operand[0] == "bands":
            readers.append((1, (operand[1], operand[2], None)))
        else:
            readers.append((2, (position[operand[1]], operand[2])))

    def apply(values, vectors):
        read = []
        for kind, what in readers:
            if kind == 0:
                value = values[what]
                read.append((value.background, value.bands, value.axis))
            elif kind == 1:
                read.append(what)
            else:
                read.append((_vector(vectors[what[0]], what[1], lead, width), None, what[1]))
        background = _cast(function(*[part[0] for part in read]), dtype)
        bands = {}
        for key in keys:
            gather, arguments = gathers[key], []
            for values_background, diagonals, axis in read:
                diagonal = diagonals.get(key) if diagonals is not None else None
                if diagonal is None:
                    diagonal = values_background[..., gather] if axis == "col" else values_background
                arguments.append(diagonal)
            bands[key] = _full(_cast(function(*arguments), dtype), r)
        return _Value(background, form.background, bands)
    return slot, apply


def _move_step(recipe, source_form, form):
    """The function computing a moved value (a roll, pad, slice, transpose, reshape)."""
    _, source, moves, backgrounds = recipe
    r = form.r
    identity = {key: old for key, parts in moves.items() if (old := whole_band(parts, r, source_form.r)) is not None}

    def move(values, vectors):
        value = values[source]
        background = value.background
        if backgrounds is not None:
            along, zeros = backgrounds
            if along is not None:
                background = background[..., along]
            if zeros.any():
                background = np.where(zeros, np.zeros((), background.dtype), background)
        bands = {}
        for key, parts in moves.items():
            if key in identity:
                bands[key] = value.bands[identity[key]]
                continue
            pieces = [value.bands[old] if kind == "band" else value.background if kind == "background"
                      else None for kind, old, _, _ in parts]
            lead = np.broadcast_shapes(*[piece.shape[:-1] for piece in pieces if piece is not None and piece.ndim])
            diagonal = np.empty(lead + (r,), value.background.dtype)
            for (kind, _, where, read), piece in zip(parts, pieces):
                if kind == "zero":
                    diagonal[..., where] = 0.0
                elif kind == "background" and value.axis is None:
                    diagonal[..., where] = piece  # one value per matrix: a dim of 1, or none
                else:
                    diagonal[..., where] = piece[..., read]
            bands[key] = diagonal
        return _Value(background, form.background, bands)
    return move


def _vector(value, kind, lead, width):
    """An operand that is not banded, as the pass reads it: its ``lead`` leading dims, then
    a vector along its axis, or (one value per matrix) a dim of 1 (no dims at all where
    every dim is 1)."""
    if type(value) in (int, float):
        return value
    value = np.asarray(value)
    padded = (1,) * (width - value.ndim) + value.shape
    head = padded[:lead]
    if kind is None:
        return value.reshape(()) if all(size == 1 for size in head) else value.reshape(head + (1,))
    return value.reshape(head + (padded[lead] if kind == "row" else padded[-1],))


def _full(value, r):
    """A diagonal with its rows (a value that is the same on every row, repeated)."""
    if value.ndim == 0:
        value = value.reshape(1)
    if value.shape[-1] != r:
        value = np.broadcast_to(value, value.shape[:-1] + (r,))
    return value


def _cast(value, dtype):
    value = np.asarray(value)
    return value if value.dtype == dtype else value.astype(dtype)
