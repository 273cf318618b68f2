"""The ``band`` rewrite of ``Program.prune``: square matrices that hold a few cyclic
diagonals over a background that varies along one axis only, computed as vectors.

``lf.jacrev`` and ``lf.jacfwd`` push the identity (their basis, a constant of the program)
through the model. Through a local model (a stencil: rolls, sums and products by
per-site partials) every matrix the transform makes has the form

    ``M[i, j] = band_k[i]``  where ``(j - i) % n == k`` for one of a few offsets ``k``,
    ``M[i, j] = background[j]`` (or ``[i]``, or one value) elsewhere,

so the n x n arrays that the trace recorded (the identity read in full, a product
written in full for each partial, a roll of each) can be computed as vectors of length
n, and the matrix written once, where a node that is not of this form reads it or it is
an output. The Jacobian of the Lorenz-96 tendency at 2,000 sites: one pass over its
32 MB instead of four. Matrices with leading dims (a vmapped Jacobian, one per example)
are banded alike: their vectors carry the leading dims, and an operand may hold one value
per matrix (a per-example parameter).

Every element is the result of the same operations on the same operands as in the
recorded program (elementwise operations are computed element by element; a roll moves
elements), and only operations that IEEE rounds exactly (sums, differences, products,
quotients, negation, the NaN-safe product) are taken: the same bits, signed zeros
included, and NaN where NaN (which of two NaNs a sum or product passes on, and so its sign
bit, NumPy's loops choose by position: lf.jit's contract reads NaN where NaN).
"""
from __future__ import annotations

import math

import numpy as np

from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import shape as kshape

from ..replay import safe_product
from . import thresholds
from .nodes import Constant, Node
from .planning import _c_ordered

_EXACT = {ew.add: np.add, ew.subtract: np.subtract, ew.multiply: np.multiply, ew.divide: np.divide,
          ew.negative: np.negative, ew.safe_multiply: safe_product}
"""The primitives a banded matrix passes through, and the NumPy function that computes
them on its vectors (the same elementwise operation: correctly rounded, or a product
masked per element)."""


def max_bands(n: int) -> int:
    """Diagonals beyond which a matrix is computed in full (each diagonal costs a vector
    per operation: past n / 8 of them the vectors cost about what the matrix does)."""
    return max(1, n // 8)


class _Form:
    """What the pass knows of a banded slot: its diagonals' offsets and the axis its
    background varies along (``"row"``, ``"col"``, or None for one value)."""

    __slots__ = ("offsets", "background")

    def __init__(self, offsets, background):
        self.offsets, self.background = frozenset(offsets), background


def band(program):
    """Rewrite the banded nodes (see the module): each one that a node of another form
    reads, or that is an output, becomes one node computing its diagonals and background
    from the vectors and constants it depends on and writing the matrix once; the banded
    nodes that only banded nodes read are left for ``Program.prune`` to drop as dead."""
    layout, _ = program._layouts()
    forms, recipes, constant_bands = {}, {}, {}
    for node in program.nodes:
        out = node.out
        if (out is None or node.params or len(out[0]) < 2 or out[0][-1] != out[0][-2] or out[0][-1] < 2
                or out[1].kind != "f" or math.prod(out[0]) < max(thresholds.BAND_MIN_SIZE, 1)
                or not _c_ordered(out, node.strides)):
            continue
        shape, dtype = out
        n = shape[-1]
        if node.prim is kshape.roll:
            source, shift = node.refs[0], getattr(node.function, "shift", None)
            axis = node.function.axis - (len(shape) - 2) if type(shift) is int else -1
            if type(source) is int and source in forms and axis in (0, 1):
                shift %= n
                offsets = {(k - shift if axis == 0 else k + shift) % n for k in forms[source].offsets}
                forms[node.slot] = _Form(offsets, forms[source].background)
                recipes[node.slot] = ("roll", source, shift, axis)
            continue
        function = _EXACT.get(node.prim)
        if function is None:
            continue
        operands, axes, offsets = [], set(), set()
        for ref in node.refs:
            if type(ref) is int and ref in forms:
                operands.append(("form", ref))
                offsets |= forms[ref].offsets
                axes.add(forms[ref].background)
                continue
            if (type(ref) is Constant and type(ref.value) is np.ndarray and ref.value.shape == (n, n)
                    and ref.value.dtype == dtype):
                if id(ref.value) not in constant_bands:
                    constant_bands[id(ref.value)] = _constant_bands(ref.value, n)
                bands = constant_bands[id(ref.value)]
                if bands is None:
                    break
                operands.append(("bands", bands))
                offsets |= set(bands)
                continue
            axis = _vector_axis(ref, layout, shape, dtype)
            if axis is False:
                break
            operands.append(("vector", ref, axis))
            axes.add(axis)
        else:
            axes.discard(None)
            if offsets and len(axes) <= 1 and len(offsets) <= max_bands(n):
                forms[node.slot] = _Form(offsets, next(iter(axes), None))
                recipes[node.slot] = ("apply", function, operands, dtype)
    if not forms:
        return program
    read_otherwise = set(program.outputs)
    for node in program.nodes:
        if node.slot not in forms:
            read_otherwise.update(ref for ref in node.refs if type(ref) is int)
    for node in program.nodes:
        if node.slot in forms and node.slot in read_otherwise:
            node.refs, node.function = _materializer(node.slot, recipes, node.out)
            node.prim, node.fusable = None, None
    return program


def _vector_axis(ref, layout, shape, dtype):
    """How an operand that is not banded broadcasts against matrices of ``shape`` (leading
    dims, then n x n) and ``dtype``: None (one value per matrix), ``"col"`` (varies along
    the columns: trailing dims (1, n) or (n,)), ``"row"`` (trailing (n, 1)), or False
    (another shape or dtype: the node stays as recorded)."""
    if type(ref) is Constant and type(ref.value) in (int, float):
        return None
    if type(ref) is Constant and isinstance(ref.value, np.generic):
        return None if ref.value.dtype == dtype else False
    known = layout.get(ref) if type(ref) is int else (
        (ref.value.shape, ref.value.dtype) if type(ref.value) is np.ndarray else None)
    if known is None or known[1] != dtype or len(known[0]) > len(shape):
        return False
    padded = (1,) * (len(shape) - len(known[0])) + tuple(known[0])
    if any(size not in (1, full) for size, full in zip(padded[:-2], shape[:-2])):
        return False
    n = shape[-1]
    return {(1, 1): None, (1, n): "col", (n, 1): "row"}.get(padded[-2:], False)


def _constant_bands(value, n):
    """The diagonals of a constant n x n matrix (offset k: the vector of its elements
    ``value[i, (i + k) % n]``) whose other elements are all +0.0, or None (another form,
    or more diagonals than ``max_bands``)."""
    if not value.flags.c_contiguous:
        return None
    bits = value.reshape(-1).view(np.dtype(f"u{value.dtype.itemsize}"))
    if np.count_nonzero(bits) > max_bands(n) * n:  # counted first: a dense matrix's indices are never made
        return None
    rows, columns = np.divmod(np.flatnonzero(bits), n)
    offsets = np.unique((columns - rows) % n)
    if offsets.size == 0 or offsets.size > max_bands(n):
        return None
    index = np.arange(n)
    return {int(k): value[index, (index + k) % n] for k in offsets}


class _Value:
    """A banded matrix as vectors: its background (one value, or a vector along ``axis``)
    and its diagonals (offset k: the elements ``[i, (i + k) % n]``, for each row i)."""

    __slots__ = ("background", "axis", "bands")

    def __init__(self, background, axis, bands):
        self.background, self.axis, self.bands = background, axis, bands

    def on_band(self, k):
        """The elements ``[i, (i + k) % n]``: a diagonal, or the background there."""
        diagonal = self.bands.get(k)
        if diagonal is not None:
            return diagonal
        return _roll(self.background, -k) if self.axis == "col" else self.background

    def rolled(self, shift, axis, n):
        """``np.roll(matrix, shift, axis)`` (0: along the rows, 1: the columns)."""
        if axis == 0:
            bands = {(k - shift) % n: _roll(vector, shift) for k, vector in self.bands.items()}
        else:
            bands = {(k + shift) % n: vector for k, vector in self.bands.items()}
        background = self.background
        if self.axis == ("row", "col")[axis]:
            background = _roll(background, shift)
        return _Value(background, self.axis, bands)


def _materializer(root, recipes, out):
    """The function and refs of a node that computes the banded slot ``root`` from the
    vectors it depends on and writes the matrix once (into ``out=`` when given)."""
    refs, order = [], []

    def visit(slot):
        if slot in order:
            return
        recipe = recipes[slot]
        for operand in ((("form", recipe[1]),) if recipe[0] == "roll" else recipe[2]):
            if operand[0] == "form":
                visit(operand[1])
            elif operand[0] == "vector" and operand[1] not in refs:
                refs.append(operand[1])
        order.append(slot)

    visit(root)
    position = {ref: k for k, ref in enumerate(refs)}
    steps = [(slot, recipes[slot]) for slot in order]
    shape, dtype = out
    n, lead = shape[-1], shape[:-2]
    zero = np.zeros((), dtype)

    def value_of(values, vectors):
        for slot, recipe in steps:
            if recipe[0] == "roll":
                values[slot] = values[recipe[1]].rolled(recipe[2], recipe[3], n)
                continue
            _, function, operands, _ = recipe
            matrices = [values[o[1]] if o[0] == "form" else _Value(zero, None, o[1]) if o[0] == "bands"
                        else _vector(vectors[position[o[1]]], o[2], len(shape)) for o in operands]
            axis = next((m.axis if type(m) is _Value else o[2] for m, o in zip(matrices, operands)
                         if (m.axis if type(m) is _Value else o[2]) is not None), None)
            offsets = sorted({k for m in matrices if type(m) is _Value for k in m.bands})
            background = _cast(function(*[m.background if type(m) is _Value else m for m in matrices]), dtype)
            bands = {}
            for k in offsets:
                diagonal = _cast(function(*[m.on_band(k) if type(m) is _Value else _on_band(m, o[2], k)
                                            for m, o in zip(matrices, operands)]), dtype)
                bands[k] = diagonal if diagonal.ndim else diagonal.reshape(1)
            values[slot] = _Value(background, axis, bands)
        return values[root]

    def banded(*vectors, out=None):
        value = value_of({}, vectors)
        if out is None:
            out = np.empty(shape, dtype)
        background = value.background
        if background.ndim:  # a vector along the rows or the columns, or one value per matrix
            background = background[..., :, None] if value.axis == "row" else background[..., None, :]
        np.copyto(out, background)
        flat = out.reshape(lead + (n * n,))
        for k, diagonal in value.bands.items():  # [i, i + k] for i < n - k, then [i, i + k - n]
            flat[..., k:(n - k) * (n + 1):n + 1] = diagonal[..., :n - k]
            if k:
                flat[..., n * (n - k)::n + 1] = diagonal[..., n - k:]
        return out

    banded.writes_into = True
    return tuple(refs), banded


def _vector(value, axis, ndim):
    """An operand that is not banded, as the pass reads it: its leading dims, then a
    vector along its axis, or (one value per matrix) a dim of 1."""
    if type(value) in (int, float):
        return value
    value = np.asarray(value)
    padded = (1,) * (ndim - value.ndim) + value.shape
    if all(size == 1 for size in padded):
        return value.reshape(())
    return value.reshape(padded[:-2] + ((1,) if axis is None else (padded[-1] * padded[-2],)))


def _on_band(vector, axis, k):
    """An operand that is not banded, at the elements ``[i, (i + k) % n]``."""
    return _roll(vector, -k) if axis == "col" else vector


def _roll(vector, shift):
    """``np.roll(vector, shift, axis=-1)``, as one concatenation of two slices (np.roll's own
    checks cost more than the copy on vectors this short)."""
    size = vector.shape[-1]
    shift %= size
    if not shift:
        return vector
    return np.concatenate((vector[..., size - shift:], vector[..., :size - shift]), axis=-1)


def _cast(value, dtype):
    value = np.asarray(value)
    return value if value.dtype == dtype else value.astype(dtype)
