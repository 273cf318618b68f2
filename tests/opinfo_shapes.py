"""Operator-table entries for NumPy's shape, joining, indexing and cumulative functions added after the first table
(``opinfo.OP_DB`` appends ``ENTRIES``): built with ``opinfo``'s helpers, tested by every
generic suite."""
from __future__ import annotations

import functools

import numpy as np

from opinfo import (ANY, BOOL, FLOAT, INT, NEAR_ONE, SMALL_INTS, A, OpInfo, SampleInput, array_samples, fixed,
                    integer_index, make_array)

F64 = (np.dtype(np.float64),)


# --- joins and splits -----------------------------------------------------------------------------
def block_2x2(a, b, c, d):
    return np.block([[a, b], [c, d]])


def block_flat(a, b, c):
    return np.block([a, b, c])


def block_rows(a, b):
    """Blocks of fewer dimensions than the nesting (a vector as a 1 x n row)."""
    return np.block([[a], [b]])


def meshgrid(*xi, **kwargs):
    return np.meshgrid(*xi, **kwargs)


# --- selections -----------------------------------------------------------------------------------
def choose(a, *choices, **kwargs):
    return np.choose(a, list(choices), **kwargs)


def choose_samples(rng, dtype):
    """The choice array ``a`` (integers) first, then the choices; ``a`` in range for
    ``mode="raise"``, anywhere for wrap and clip."""
    c = lambda *shape: make_array(rng, shape, dtype)
    return [
        SampleInput((rng.integers(0, 3, size=(3, 4)), c(3, 4), c(4), c())),
        SampleInput((rng.integers(0, 2, size=(4,)), c(2, 4), c(1, 4))),  # the choices broadcast a
        SampleInput((rng.integers(-4, 7, size=(5,)), c(5), c(5), c(1)), {"mode": "wrap"}),
        SampleInput((rng.integers(-3, 5, size=(2, 3)), c(3), c(2, 1), c(2, 3)), {"mode": "clip"}),
    ]


def choose_stacked_samples(rng, dtype):
    """The choices as one array: its first axis enumerates them."""
    return [
        SampleInput((rng.integers(0, 3, size=(4,)), make_array(rng, (3, 4), dtype))),
        SampleInput((rng.integers(0, 2, size=(2, 3)), make_array(rng, (2, 3), dtype)), {"mode": "clip"}),
    ]


def lexsort_pair(primary_last, primary, **kwargs):
    """Two keys as a tuple (NumPy dispatches on the members of a tuple, not of a list)."""
    return np.lexsort((primary_last, primary), **kwargs)


def delete_samples(rng, dtype):
    """``np.delete`` with the positions as an integer array (they fix the output's shape)."""
    x = lambda *shape: make_array(rng, shape, dtype)
    return [
        SampleInput((x(6), integer_index(rng, (2,), 6, distinct=True))),
        SampleInput((x(3, 5), integer_index(rng, (3,), 5, distinct=True)), {"axis": 1}),
    ]


def insert_samples(rng, dtype):
    """``np.insert`` with the positions as an integer array (they fix where values go)."""
    x = lambda *shape: make_array(rng, shape, dtype)
    return [
        SampleInput((x(5), rng.integers(0, 6, size=(2,)), x(2))),
        SampleInput((x(3, 4), rng.integers(-4, 5, size=(2,)), x(3, 1)), {"axis": 1}),
    ]


def put(x, ind, v, **kwargs):
    """np.put (in place) on a copy of ``x``."""
    y = x * 1
    np.put(y, ind, v, **kwargs)
    return y


def put_samples(rng, dtype):
    x = lambda *shape: make_array(rng, shape, dtype)
    return [
        SampleInput((x(3, 4), integer_index(rng, (3,), 12, distinct=True), x(3))),
        SampleInput((x(3, 4), integer_index(rng, (4,), 12, distinct=True).reshape(2, 2), x(2))),  # values repeated
        SampleInput((x(5), integer_index(rng, (2,), 5, distinct=True), x())),
        SampleInput((x(4), integer_index(rng, (2,), 4, distinct=True), x(3))),  # values cut
        SampleInput((x(2, 3), rng.permutation(6)[:3] + 6 * rng.integers(-2, 3, size=3), x(3)), {"mode": "wrap"}),
    ]


def put_clipped(x, v):
    """Static positions, clipped to 0, 3 and 11."""
    return put(x, [-5, 3, 20], v, mode="clip")


def pad_empty_interior(x, pad_width, **kwargs):
    """np.pad's mode "empty" with the undefined padding read as 0: what derivatives can check."""
    interior = np.pad(np.ones(np.shape(x), dtype=bool), pad_width)
    return np.where(interior, np.pad(x, pad_width, **kwargs), 0)


PAD_MODES = [
    ((A(5), (2, 3)), {"mode": "linear_ramp"}),
    ((A(3, 4), ((1, 2), (3, 0))), {"mode": "linear_ramp", "end_values": ((1.5, -2), (0.5, 3))}),
    ((A(2, 3), 2), {"mode": "maximum"}),
    ((A(3, 4), ((2, 1), (0, 2))), {"mode": "minimum", "stat_length": 2}),
    ((A(5, 3), ((1, 2), (2, 2))), {"mode": "mean"}),
    ((A(5, 4), ((2, 1), (1, 3))), {"mode": "mean", "stat_length": ((1, 3), (2, 9))}),
    ((A(4, 3), ((1, 2), (2, 1))), {"mode": "median"}),
    ((A(5, 4), 2), {"mode": "median", "stat_length": (3, 2)}),
    ((A(4, 2), ((2, 3), (1, 1))), {"mode": "reflect", "reflect_type": "odd"}),
    ((A(3), (7, 5)), {"mode": "reflect", "reflect_type": "odd"}),  # wider than the array: chunk by chunk
    ((A(3, 2), ((4, 1), (3, 2))), {"mode": "symmetric", "reflect_type": "odd"}),
    ((A(1, 3), ((2, 2), (0, 1))), {"mode": "reflect", "reflect_type": "odd"}),  # one row: the edge
    ((A(3), (2, 1)), {"mode": "reflect", "reflect_type": "even"}),
]

def rolled_stencil(x, shift, axis):
    """x's cotangent meets two rolls' (one negated) and a product's: the reverse pass sums a
    roll's cotangent where it meets another (``add_rolled``)."""
    return x * np.roll(x, shift, axis=axis) - np.roll(x, -shift, axis=axis) + 0.5 * np.roll(x, 2 * shift, axis=axis)


ENTRIES: list = [
    fixed("unstack", np.unstack, [((A(3, 4),), {}), ((A(3, 4),), {"axis": 1}), ((A(2, 3, 4),), {"axis": -1}),
                                  ((A(5),), {})], dtypes=FLOAT + INT),
    fixed("append", np.append, [((A(3, 4), A(2, 4)), {"axis": 0}), ((A(3, 4), A(5)), {}), ((A(3), A()), {}),
                                ((A(2, 3), A(2, 1)), {"axis": -1}), ((A(), A(2)), {})], dtypes=FLOAT + INT),
    # insert and delete with static positions (ints, slices, lists): a gather from fixed positions
    fixed(
        "insert",
        np.insert,
        [
            ((A(5), 2, A()), {}),
            ((A(3, 4), 1, A(4)), {"axis": 0}),
            ((A(3, 4), [0, 2, 4], A(3)), {"axis": 1}),
            ((A(3, 4), slice(1, 3), A(3, 1)), {"axis": 1}),
            ((A(2, 3), -1, 0.5), {}),  # axis None: the flattened array
            ((A(4), [1, 1], A(2)), {}),  # two values at one position
            ((A(2, 3), [2], A(2, 2)), {"axis": -1}),
        ],
        dtypes=FLOAT + INT,
        strict_ok=False,  # the array API standard has no integer-array gather beside take
    ),
    fixed(
        "delete",
        np.delete,
        [
            ((A(5), 2), {}),
            ((A(3, 4), [0, 2]), {"axis": 1}),
            ((A(3, 4), slice(None, None, 2)), {}),
            ((A(4, 3), -1), {"axis": 0}),
            ((A(3, 4), [True, False, True]), {"axis": 0}),  # a boolean mask of the axis
            ((A(2, 3), [0, 0, 5]), {}),
        ],
        dtypes=FLOAT + INT,
        strict_ok=False,
    ),
    OpInfo("delete_index_array", np.delete, delete_samples, dtypes=FLOAT + INT, domain=(ANY, ANY),
           integer_index_args=(1,), dynamic_shape_args=(1,), strict_ok=False),
    OpInfo("insert_index_array", np.insert, insert_samples, dtypes=FLOAT + INT, domain=(ANY, ANY, ANY),
           integer_index_args=(1,), dynamic_shape_args=(1,), strict_ok=False),
    fixed("resize", np.resize, [((A(5), (2, 4)), {}), ((A(3, 4), 5), {}), ((A(2, 3), (3, 2)), {}),
                                ((A(3), (0,)), {}), ((A(), (2, 2)), {}), ((A(0), (2,)), {})], dtypes=FLOAT + INT),
    OpInfo("block_2x2", block_2x2,
           functools.partial(array_samples, calls=[(((2, 3), (2, 1), (1, 3), (1, 1)), {}),
                                                   (((2, 2, 3), (2, 2, 1), (2, 1, 3), (2, 1, 1)), {})]),
           dtypes=FLOAT + INT, domain=(ANY,) * 4),
    OpInfo("block_flat", block_flat,
           functools.partial(array_samples, calls=[(((3,), (2,), (1,)), {}), (((2, 3), (2, 1), (2, 2)), {}),
                                                   (((), (2,), ()), {})]),
           dtypes=FLOAT + INT, domain=(ANY,) * 3),
    OpInfo("block_rows", block_rows, functools.partial(array_samples, calls=[(((3,), (1, 3)), {}),
                                                                             (((3,), (3,)), {})]),
           dtypes=FLOAT + INT, domain=(ANY, ANY)),
    fixed("block_single", np.block, [((A(2, 3),), {})], dtypes=FLOAT + INT),
    OpInfo(
        "meshgrid",
        meshgrid,
        functools.partial(array_samples, calls=[
            (((3,), (4,)), {}),
            (((3,), (4,)), {"indexing": "ij"}),
            (((3,), (4,), (2,)), {}),
            (((3,), (4,), (2,)), {"indexing": "ij", "sparse": True}),
            (((2, 2), (3,)), {"copy": False}),  # inputs are flattened
            (((3,),), {}),
            (((), (2,)), {"sparse": True, "copy": False}),
        ]),
        dtypes=FLOAT + INT,
        domain=(ANY, ANY, ANY),
    ),
    fixed(
        "ediff1d",
        np.ediff1d,
        [
            ((A(5),), {}),
            ((A(3, 4),), {}),
            ((A(4), A(2), A(3)), {}),  # to_end, to_begin: traced, joined at the ends
            ((A(4),), {"to_begin": 1, "to_end": [2, -3]}),
            ((A(1),), {"to_end": [1, 2]}),
            ((A(2, 2), A()), {}),
        ],
        dtypes=FLOAT + INT,
    ),
    # choose: a selection, differentiable in the choices; the choice array is an index
    OpInfo("choose", choose, choose_samples, dtypes=FLOAT + INT, domain=(ANY,) * 4, integer_index_args=(0,),
           strict_ok=False),  # take_along_axis: the standard's has no broadcasting of the index
    OpInfo("choose_stacked", np.choose, choose_stacked_samples, dtypes=FLOAT + INT, domain=(ANY, ANY),
           integer_index_args=(0,), strict_ok=False),
    # lexsort and isin: integer and boolean outputs; ties in the keys (small integers)
    fixed("lexsort", lexsort_pair, [((A(6), A(6)), {}), ((A(3, 4), A(3, 4)), {"axis": 0}), ((A(2, 5), A(2, 5)), {})],
          domain=SMALL_INTS, dtypes=FLOAT + INT, differentiable=False),
    fixed("lexsort_array", np.lexsort, [((A(3, 6),), {}), ((A(2, 4, 3),), {"axis": 0}), ((A(1, 5),), {})],
          domain=SMALL_INTS, dtypes=FLOAT + INT, differentiable=False),
    fixed("isin", np.isin, [((A(3, 4), A(3)), {}), ((A(5), A(2, 2)), {"invert": True}), ((A(), A(4)), {}),
                            ((A(4), A(0)), {}), ((A(2, 3), A(3)), {"assume_unique": True, "kind": "sort"})],
          domain=SMALL_INTS, dtypes=FLOAT + INT + BOOL, differentiable=False),
    # put: in place, as x.flat[ind] = v
    OpInfo("put", put, put_samples, dtypes=FLOAT + INT, domain=(ANY, ANY, ANY), integer_index_args=(1,),
           writes_into_first_arg=True, strict_ok=False),
    fixed("put_clipped", put_clipped, [((A(3, 4), A(3)), {}), ((A(3, 4), A(2)), {})], dtypes=FLOAT + INT,
          writes_into_first_arg=True, strict_ok=False),
    # NumPy 2's cumulative_sum / cumulative_prod (include_initial: the identity first)
    fixed(
        "cumulative_sum",
        np.cumulative_sum,
        [
            ((A(5),), {}),
            ((A(3, 4),), {"axis": 1}),
            ((A(3, 4),), {"axis": -2, "include_initial": True}),
            ((A(),), {"include_initial": True}),
            ((A(2, 3, 4),), {"axis": 0, "dtype": np.dtype(np.float64)}),
            ((A(2, 0),), {"axis": 1, "include_initial": True}),
        ],
        dtypes=FLOAT + INT,
    ),
    fixed(
        "cumulative_prod",
        np.cumulative_prod,
        [((A(5),), {}), ((A(3, 4),), {"axis": 1, "include_initial": True}), ((A(2, 3, 4),), {"axis": -1}),
         ((A(4),), {"include_initial": True})],
        domain=NEAR_ONE,
    ),
    # np.pad's other modes (constant, edge, wrap and even reflections are in the first table)
    fixed("pad_modes", np.pad, PAD_MODES, dtypes=FLOAT + INT),
    # a stencil of rolls: their cotangents summed with the roll, in one pass
    fixed("rolled_stencil", rolled_stencil,
          [((A(5), 1, 0), {}), ((A(3, 4), -1, 1), {}), ((A(2, 3, 4), 2, 1), {}), ((A(4, 3), 5, 0), {}),
           ((A(2, 3), 3, -1), {}), ((A(1, 3), 1, 0), {})]),
    fixed("pad_empty", np.pad, [((A(3, 4), 1), {"mode": "empty"}), ((A(4), (2, 0)), {"mode": "empty"})],
          compare_values=False, ad_op=pad_empty_interior),
]
