"""Operator-table entries for NumPy's numpy.linalg functions and polyfit added after the first table
(``opinfo.OP_DB`` appends ``ENTRIES``): built with ``opinfo``'s helpers, tested by every
generic suite."""
from __future__ import annotations

import numpy as np

from opinfo import (
    COMPLEX,
    FLOAT,
    INT,
    POSITIVE,
    SPD,
    A,
    DistinctSingular,
    WellConditioned,
    fixed,
    make_array,
)


class Positive(A):
    """An array in ``POSITIVE`` whatever the entry's domain (polyfit's weights)."""

    def draw(self, rng, dtype, domain):
        return make_array(rng, self.shape, dtype, POSITIVE)


class Spread(A):
    """Sample points of a fit: ``n`` values spread over [-2, 2] (at least 0.4 apart after a
    jitter of +-0.1), so that the Vandermonde matrix stays well conditioned."""

    def draw(self, rng, dtype, domain):
        n = self.shape[0]
        return (np.linspace(-2.0, 2.0, n) + rng.uniform(-0.1, 0.1, size=n)).astype(dtype)


class ReshapedWellConditioned(A):
    """A ``WellConditioned`` n-by-n matrix reshaped to ``shape`` (whose size is n*n), its
    axes then ordered by ``np.transpose(.., order)``: the tensors of tensorsolve/tensorinv."""

    def __init__(self, *shape: int, order: tuple[int, ...] | None = None):
        super().__init__(*shape)
        self.order = order

    def draw(self, rng, dtype, domain):
        n = int(round(np.sqrt(np.prod(self.shape))))
        tensor = WellConditioned(n, n).draw(rng, dtype, domain).reshape(self.shape)
        return tensor if self.order is None else np.transpose(tensor, self.order)


class LowRank(A):
    """A product of two standard normal factors with ``rank`` columns: rank-deficient."""

    def __init__(self, *shape: int, rank: int):
        super().__init__(*shape)
        self.rank = rank

    def draw(self, rng, dtype, domain):
        *stack, rows, columns = self.shape
        left = rng.normal(size=(*stack, rows, self.rank))
        right = rng.normal(size=(*stack, self.rank, columns))
        return (left @ right).astype(dtype)


def multi_dot(*arrays):
    """np.linalg.multi_dot of its arguments (the table batches positional arrays)."""
    return np.linalg.multi_dot(list(arrays))


def polyfit_weighted(x, y, w, deg, **kwargs):
    return np.polyfit(x, y, deg, w=w, **kwargs)


def polyfit_tuple(x, y, deg, **kwargs):
    """polyfit's (c, covariance), or (c, residuals, singular values) of ``full=True``."""
    out = np.polyfit(x, y, deg, **kwargs)
    return (out[0], out[1], out[3]) if kwargs.get("full") else tuple(out)


def polyfit_rank(x, y, deg, **kwargs):
    return np.polyfit(x, y, deg, full=True, **kwargs)[2]


ENTRIES: list = [
    # the array API's names in numpy.linalg: the last two axes, 1-D outer, 3-vectors in cross
    fixed("linalg_matmul", np.linalg.matmul,
          [((A(3, 4), A(4, 2)), {}), ((A(2, 3, 4), A(4)), {}), ((A(4), A(2, 4, 3)), {})],
          dtypes=FLOAT + COMPLEX),
    fixed(
        "linalg_tensordot",
        np.linalg.tensordot,
        [((A(3, 4), A(4, 5)), {"axes": 1}), ((A(2, 3, 4), A(3, 4, 5)), {}), ((A(3, 4), A(5, 3)), {"axes": ([0], [1])})],
        dtypes=FLOAT + COMPLEX,
    ),
    fixed("linalg_outer", np.linalg.outer, [((A(3), A(4)), {}), ((A(1), A(2)), {})], dtypes=FLOAT + COMPLEX),
    fixed(
        "linalg_cross",
        np.linalg.cross,
        [((A(3), A(3)), {}), ((A(4, 3), A(3)), {}), ((A(2, 1, 3), A(4, 3)), {}), ((A(3, 4), A(3, 4)), {"axis": 0})],
        dtypes=FLOAT + INT,
    ),
    fixed(
        "linalg_diagonal",
        np.linalg.diagonal,
        [((A(3, 4),), {}), ((A(2, 3, 4),), {"offset": 1}), ((A(4, 3),), {"offset": -2})],
        dtypes=FLOAT + INT,
    ),
    fixed(
        "linalg_trace",
        np.linalg.trace,
        [((A(3, 4),), {}), ((A(2, 3, 4),), {"offset": 1}), ((A(2, 4, 3),), {"offset": -1}),
         ((A(3, 3),), {"dtype": np.float64})],
        dtypes=FLOAT + INT,
    ),
    # conj of the first argument: not holomorphic
    fixed(
        "linalg_vecdot",
        np.linalg.vecdot,
        [((A(3, 4), A(3, 4)), {}), ((A(2, 3, 4), A(4)), {}), ((A(4, 2), A(4, 3, 1)), {"axis": 0}),
         ((A(3, 4), A(2, 1, 4)), {"axis": -1})],
        dtypes=FLOAT + COMPLEX,
        holomorphic=False,
    ),
    # a chain of 2, 3 and 4 matrices, 1-D ends
    fixed(
        "linalg_multi_dot",
        multi_dot,
        [
            ((A(3, 4), A(4, 2)), {}),
            ((A(2, 3), A(3, 4), A(4, 2)), {}),
            ((A(5, 2), A(2, 6), A(6, 3)), {}),
            ((A(3), A(3, 4), A(4, 5), A(5)), {}),
            ((A(4), A(4, 2), A(2, 3)), {}),
            ((A(2, 5), A(5, 3), A(3, 6), A(6)), {}),
            ((A(2, 5), A(5, 3), A(3, 6), A(6, 2), A(2, 4)), {}),
        ],
        dtypes=FLOAT + COMPLEX,
    ),
    fixed(
        "linalg_tensorsolve",
        np.linalg.tensorsolve,
        [
            ((ReshapedWellConditioned(2, 3, 6), A(2, 3)), {}),
            ((ReshapedWellConditioned(4, 2, 2), A(4)), {}),
            ((ReshapedWellConditioned(2, 3, 6, order=(2, 0, 1)), A(2, 3)), {"axes": (0,)}),
        ],
        dtypes=FLOAT + COMPLEX,
    ),
    fixed(
        "linalg_tensorinv",
        np.linalg.tensorinv,
        [
            ((ReshapedWellConditioned(2, 3, 6),), {}),
            ((ReshapedWellConditioned(6, 2, 3),), {"ind": 1}),
            ((ReshapedWellConditioned(2, 2, 2, 2),), {}),
        ],
        dtypes=FLOAT + COMPLEX,
    ),
    # the condition number: by singular values (any shape) ...
    fixed(
        "linalg_cond_singular",
        np.linalg.cond,
        [((DistinctSingular(4, 4),), {}), ((DistinctSingular(2, 3, 5),), {}), ((DistinctSingular(5, 3), 2), {}),
         ((DistinctSingular(2, 4, 4), -2), {}), ((DistinctSingular(3, 3), "nuc"), {})],
    ),
    # ... and by norm(x) * norm(inv(x)) (away from the kinks of |x| and of max)
    fixed(
        "linalg_cond_norm",
        np.linalg.cond,
        [((WellConditioned(4, 4), "fro"), {}), ((WellConditioned(2, 3, 3), 1), {}), ((WellConditioned(3, 3), -1), {}),
         ((WellConditioned(4, 4), np.inf), {}), ((WellConditioned(2, 3, 3), -np.inf), {})],
    ),
    fixed(
        "linalg_cond_complex",
        np.linalg.cond,
        [((WellConditioned(3, 3), "fro"), {}), ((WellConditioned(2, 4, 4), 1), {})],
        dtypes=COMPLEX,
        holomorphic=False,
    ),
    # an integer: no derivative
    fixed(
        "linalg_matrix_rank",
        np.linalg.matrix_rank,
        [
            ((A(4, 3),), {}),
            ((A(2, 3, 4),), {}),
            ((LowRank(5, 4, rank=2),), {}),
            ((LowRank(2, 4, 4, rank=3),), {}),
            ((A(4),), {}),
            ((SPD(3, 3),), {"hermitian": True}),
            ((DistinctSingular(4, 4),), {"tol": 2.0}),
            ((DistinctSingular(2, 4, 4),), {"rtol": 0.4}),
        ],
        differentiable=False,
    ),
    # least-squares polynomials: plain, several columns, weighted, rank-deficient-free sizes
    fixed(
        "polyfit",
        np.polyfit,
        [((Spread(8), A(8), 2), {}), ((Spread(6), A(6, 3), 3), {}), ((Spread(4), A(4), 3), {}),
         ((Spread(7), A(7), 1), {"rcond": 1e-10})],
    ),
    fixed(
        "polyfit_weighted",
        polyfit_weighted,
        [((Spread(8), A(8), Positive(8), 2), {}), ((Spread(6), A(6, 2), Positive(6), 3), {})],
    ),
    fixed(
        "polyfit_cov",
        polyfit_tuple,
        [((Spread(8), A(8), 2), {"cov": True}), ((Spread(7), A(7, 2), 2), {"cov": True}),
         ((Spread(6), A(6), 3), {"cov": "unscaled"})],
    ),
    fixed(
        "polyfit_full",
        polyfit_tuple,
        [((Spread(8), A(8), 2), {"full": True}), ((Spread(6), A(6, 2), 3), {"full": True})],
    ),
    fixed("polyfit_full_rank", polyfit_rank, [((Spread(8), A(8), 2), {}), ((Spread(3), A(3, 2), 4), {})],
          differentiable=False),
]
