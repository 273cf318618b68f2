"""The node that the ``band`` rewrite (``banded.py``) puts where a banded matrix is written:
it computes the diagonals and backgrounds of the banded slots it depends on, step by step
(an elementwise operation on the vectors, or a move of elements by the rewrite's static
maps; a slot whose matrix an earlier node wrote is read back from it), and writes the
matrix once. The same elements as the recorded program's nodes compute: see
``banded.py``.

The diagonals of a value are stacked: one array of its keys (sorted) by its rows, so that
each step is a few NumPy calls whatever the number of diagonals (an elementwise operation
on the stacks of its operands, aligned to the result's keys; a move, one gather by static
indices)."""
from __future__ import annotations

import numpy as np


def diagonal_columns(key, r, c):
    """The column of diagonal ``key`` in each row of an r x c matrix: ``(i + key) % c``;
    for a sequence of keys, one row of columns per key."""
    if not isinstance(key, (int, np.integer)):
        key = np.asarray(key, dtype=np.intp)[:, None]
    return (np.arange(r) + key) % c


def _flat_diagonals(keys, r, c):
    """The positions of diagonals ``keys`` in an r x c matrix read flat: one row per key."""
    return np.arange(r) * c + diagonal_columns(keys, r, c)


class _Value:
    """A banded matrix as vectors: its background (one value per matrix, or a vector
    along ``axis``) and its diagonals, stacked: ``stack[..., j, i]`` is the element
    ``[i, (i + keys[j]) % c]`` (``keys`` sorted), the leading dims in front."""

    __slots__ = ("background", "axis", "keys", "stack")

    def __init__(self, background, axis, keys, stack):
        self.background, self.axis, self.keys, self.stack = background, axis, keys, stack


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
    writes = _flat_diagonals(sorted(form.keys), r, c)

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
        out.reshape(lead + (r * c,))[..., writes] = value.stack
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
    keys = tuple(sorted(form.keys))
    diagonals = _flat_diagonals(keys, r, c)
    background = {"col": row_of * c + np.arange(c), "row": np.arange(r) * c + column_of,
                  None: np.array([row_of[0] * c])}[form.background]

    def read(values, vectors):
        flat = np.reshape(vectors[at], lead + (r * c,))
        return _Value(flat[..., background], form.background, keys, flat[..., diagonals])
    return read


def _step(slot, form, recipe, forms, position):
    """(slot, the function that computes its _Value from those before and the vectors)."""
    r, c = form.r, form.c
    if recipe[0] == "move":
        return slot, _move_step(recipe, forms[recipe[1]], form)
    _, function, operands, dtype = recipe
    keys = tuple(sorted(form.keys))
    gather = diagonal_columns(keys, r, c)  # where a "col" vector meets the diagonals
    lead, width = len(form.lead), len(form.lead) + form.q + 2
    readers = []
    for operand in operands:  # how each operand is read: its background and its aligned stack
        if operand[0] == "form":
            own = tuple(sorted(forms[operand[1]].keys))
            readers.append((0, (operand[1], _aligner(own, keys, gather))))
        elif operand[0] == "bands":
            zero, bands = operand[1], operand[2]
            stack = np.empty((len(keys), r), zero.dtype)
            for j, key in enumerate(keys):
                stack[j] = bands[key] if key in bands else zero
            readers.append((1, (zero, stack)))
        else:
            readers.append((2, (position[operand[1]], _vector_reader(operand[2], lead, width, gather))))

    def apply(values, vectors):
        backgrounds, stacks = [], []
        for kind, what in readers:
            if kind == 0:
                value = values[what[0]]
                backgrounds.append(value.background)
                stacks.append(what[1](value))
            elif kind == 1:
                backgrounds.append(what[0])
                stacks.append(what[1])
            else:
                vector, on_diagonals = what[1](vectors[what[0]])
                backgrounds.append(vector)
                stacks.append(on_diagonals)
        background = _cast(function(*backgrounds), dtype)
        stack = _cast(function(*stacks), dtype)
        if stack.ndim < 2 or stack.shape[-2:] != gather.shape:
            stack = np.broadcast_to(stack, np.broadcast_shapes(stack.shape, gather.shape))
        return _Value(background, form.background, keys, stack)
    return slot, apply


def _aligner(own, keys, gather):
    """The function giving a banded operand's stack aligned to the result's ``keys`` (a
    superset of its own): its diagonals where it has them, its background elsewhere. (A
    program's shapes are fixed: the aligned stack's is computed at the first run.)"""
    if own == keys:
        return lambda value: value.stack
    have = _as_slice([keys.index(key) for key in own])
    missing_rows = [j for j, key in enumerate(keys) if key not in own]
    missing = _as_slice(missing_rows)
    missing_gather = gather[missing_rows]
    shapes = []

    def align(value):
        stack, filler = value.stack, _on_diagonals(value.background, value.axis, missing_gather)
        if not shapes:
            shapes.append(np.broadcast_shapes(stack.shape[:-2], filler.shape[:-2]) + gather.shape)
        aligned = np.empty(shapes[0], stack.dtype)
        aligned[..., have, :] = stack
        aligned[..., missing, :] = filler
        return aligned
    return align


def _as_slice(positions):
    """``positions`` (increasing) as a slice where they are a run, else an index array."""
    if positions and positions == list(range(positions[0], positions[-1] + 1)):
        return slice(positions[0], positions[-1] + 1)
    return np.array(positions, dtype=np.intp)


def _vector_reader(kind, lead, width, gather):
    """The function reading an operand that is not banded: (as the pass reads it, see
    :func:`_vector`; read on the diagonals). Its shape is computed at the first run."""
    shapes = []

    def read(value):
        if type(value) in (int, float):
            return value, value
        if shapes:
            vector = value.reshape(shapes[0]) if type(value) is np.ndarray else np.reshape(value, shapes[0])
        else:
            vector = _vector(value, kind, lead, width)
            shapes.append(vector.shape)
        return vector, _on_diagonals(vector, kind, gather)
    return read


def _on_diagonals(vector, kind, gather):
    """A vector along ``kind``'s axis (an operand, or a background) read on the diagonals
    whose columns are ``gather``, broadcasting against stacks (keys x rows)."""
    if type(vector) in (int, float) or vector.ndim == 0:
        return vector
    if kind is None:  # one value per matrix, a dim of 1: one for the keys too
        return vector[..., None]
    if kind == "row":
        return vector[..., None, :]
    return vector[..., gather]


def _move_step(recipe, source_form, form):
    """The function computing a moved value (a roll, pad, slice, transpose, reshape): one
    gather of its diagonals from the source's diagonals, background and zeros."""
    _, source, moves, backgrounds = recipe
    r = form.r
    keys = tuple(sorted(moves))
    own = tuple(sorted(source_form.keys))
    index = {key: j for j, key in enumerate(own)}
    ks = len(own)
    rows_of = np.zeros((len(keys), r), np.intp)  # the table's row (a source diagonal, the background
    at = np.zeros((len(keys), r), np.intp)  # at ks, a zero at ks + 1) and position of each element
    plain = True  # every element from a source diagonal
    for j, key in enumerate(keys):
        for kind, old, where, read in moves[key]:
            if kind == "band":
                rows_of[j, where], at[j, where] = index[old], read
            elif kind == "background":
                rows_of[j, where] = ks
                at[j, where] = 0 if source_form.background is None else read
                plain = False
            else:
                rows_of[j, where] = ks + 1
                plain = False
    same = plain and own == keys and source_form.r == r and np.array_equal(at, np.broadcast_to(np.arange(r), at.shape)) and np.array_equal(
        rows_of, np.broadcast_to(np.arange(len(keys))[:, None], rows_of.shape))
    whole = plain and np.array_equal(at, np.broadcast_to(np.arange(r), at.shape)) and (
        rows_of == rows_of[:, :1]).all() and source_form.r == r
    picked = rows_of[:, 0]
    if backgrounds is not None:
        along, zeros = backgrounds
        length = source_form.r if source_form.background == "row" else source_form.c
        if along is not None and len(along) == length and np.array_equal(along, np.arange(length)):
            along = None  # every element where it was
        zeros = zeros if zeros.any() else None
        backgrounds = (along, zeros) if along is not None or zeros is not None else None
    width = max(source_form.r, source_form.c, 1)

    def move(values, vectors):
        value = values[source]
        background = value.background
        stack = value.stack
        if same:
            moved = stack
        elif whole:  # whole diagonals, in another order
            moved = stack[..., picked, :]
        elif plain:
            moved = stack[..., rows_of, at]
        else:
            if value.axis is None:
                lead = background.shape[:-1] if background.ndim else ()
            else:
                lead = background.shape[:-1]
            table = np.zeros(np.broadcast_shapes(stack.shape[:-2], lead) + (ks + 2, width), stack.dtype)
            table[..., :ks, :stack.shape[-1]] = stack
            if value.axis is None:
                table[..., ks, :] = background  # one value per matrix: a dim of 1, or none
            else:
                table[..., ks, :background.shape[-1]] = background
            moved = table[..., rows_of, at]
        if backgrounds is not None:
            along, zeros = backgrounds
            if along is not None:
                background = background[..., along]
            if zeros is not None:
                background = np.where(zeros, np.zeros((), background.dtype), background)
        return _Value(background, form.background, keys, moved)
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


def _cast(value, dtype):
    if type(value) is np.ndarray and value.dtype == dtype:
        return value
    value = np.asarray(value)
    return value if value.dtype == dtype else value.astype(dtype)
