"""Operator-table entries for the last NumPy functions added: infinity and complex predicates,
``sort_complex``, in-place writes (``put_along_axis``, ``putmask``, ``place``, ``copyto``),
index helpers that read shapes, whole-array comparisons and the polynomial functions
(``opinfo.OP_DB`` appends ``ENTRIES``). Policies and edge cases:
``tests/test_ops_misc.py``."""
from __future__ import annotations

import numpy as np

from opinfo import (ANY, BOOL, COMPLEX, FLOAT, INT, NAN_AND_INF, SMALL_INTS, A, Domain, OpInfo, SampleInput,
                    elementwise, fixed, make_array)

F64 = (np.dtype(np.float64),)


# --- predicates -----------------------------------------------------------------------------------
def some_real_samples(rng, dtype):
    """Complex values with about half the imaginary parts exactly zero (real values as they are)."""
    def draw(*shape):
        x = make_array(rng, shape, dtype)
        if x.dtype.kind == "c":
            x = np.where(rng.random(shape) < 0.5, x.real + 0j, x).astype(dtype)
        return x
    return [SampleInput((draw(3, 4),)), SampleInput((draw(5),)), SampleInput((draw(),))]


def sort_complex_samples(rng, dtype):
    return [SampleInput((make_array(rng, shape, dtype),)) for shape in ((5,), (3, 4), (2, 1, 3))]


# --- in place -------------------------------------------------------------------------------------
def put_along_axis(x, indices, values, **kwargs):
    """np.put_along_axis (in place) on a copy of ``x``."""
    y = x * 1
    np.put_along_axis(y, indices, values, **kwargs)
    return y


def distinct_rows(rng, rows, count, size):
    """Per row, ``count`` distinct positions along an axis of length ``size`` (some negative)."""
    return np.stack([rng.permutation(size)[:count] - size * (rng.random(count) < 0.5) for _ in range(rows)])


def put_along_axis_samples(rng, dtype):
    x = lambda *shape: make_array(rng, shape, dtype)
    return [
        SampleInput((x(3, 5), distinct_rows(rng, 3, 2, 5), x(3, 2)), {"axis": 1}),
        SampleInput((x(4, 3), distinct_rows(rng, 3, 2, 4).T, x(1, 3)), {"axis": 0}),  # values broadcast
        SampleInput((x(2, 4, 3), distinct_rows(rng, 1, 2, 4).reshape(1, 2, 1), x(2, 1, 3)), {"axis": -2}),
        SampleInput((x(3, 4), rng.permutation(12)[:5], x(5)), {"axis": None}),
    ]


def add_at(x, indices, values):
    """np.add.at (in place) on a copy of ``x``: repeated positions add up."""
    y = x * 1
    np.add.at(y, indices, values)
    return y


def add_at_samples(rng, dtype):
    x = lambda *shape: make_array(rng, shape, dtype)
    return [
        SampleInput((x(5), np.array([0, 3, 0, -1, 3]), x(5))),  # repeated targets add up
        SampleInput((x(4, 3), np.array([2, 2, 0]), x(3, 3))),  # rows
        SampleInput((x(4, 3), np.array([1, 1]), x(3))),  # the value broadcast over the rows
    ]


def putmask(x, mask, values):
    y = x * 1
    np.putmask(y, mask, values)
    return y


def putmask_samples(rng, dtype):
    x = lambda *shape: make_array(rng, shape, dtype)
    mask = lambda *shape: rng.random(shape) < 0.5
    return [
        SampleInput((x(3, 4), mask(3, 4), x(3, 4))),
        SampleInput((x(3, 4), mask(3, 4), x(5))),  # values repeated over the flat positions
        SampleInput((x(6), mask(6), x(2, 4))),  # values cut
        SampleInput((x(2, 3), mask(2, 3), x())),
    ]


def place(x, mask, vals):
    y = x * 1
    np.place(y, mask, vals)
    return y


def place_one_value_samples(rng, dtype):
    """One value: a mask that differs per example is a select."""
    x = lambda *shape: make_array(rng, shape, dtype)
    return [SampleInput((x(3, 4), rng.random((3, 4)) < 0.5, x(1))), SampleInput((x(5), rng.random(5) < 0.5, x()))]


def place_fixed_mask(x, vals, *, mask):
    """Several values: the mask fixes where each goes (a constant here)."""
    return place(x, np.asarray(mask), vals)


def copyto(dst, src, where=None, **kwargs):
    y = dst * 1
    if where is None:
        np.copyto(y, src, **kwargs)
    else:
        np.copyto(y, src, where=where, **kwargs)
    return y


def copyto_samples(rng, dtype):
    x = lambda *shape: make_array(rng, shape, dtype)
    return [
        SampleInput((x(3, 4), x(4))),
        SampleInput((x(3, 4), x(3, 1), rng.random((3, 4)) < 0.5)),
        SampleInput((x(2, 3), x(), rng.random(3) < 0.5)),  # where broadcasts too
    ]


# --- index helpers --------------------------------------------------------------------------------
def take_diagonal(a):
    return a[np.diag_indices_from(a)]


def take_lower(a, **kwargs):
    return a[np.tril_indices_from(a, **kwargs)]


def take_upper(a, **kwargs):
    return a[np.triu_indices_from(a, **kwargs)]


def ravel_multi_index_samples(rng, dtype):
    return [
        SampleInput((rng.integers(0, 3, size=(4,)), rng.integers(0, 5, size=(4,))), {"dims": (3, 5)}),
        SampleInput((rng.integers(0, 3, size=(2, 3)), rng.integers(0, 4, size=(3,))), {"dims": (3, 4), "order": "F"}),
        SampleInput((rng.integers(-7, 7, size=(5,)), rng.integers(-7, 7, size=(5,))),
                    {"dims": (3, 4), "mode": ("wrap", "clip")}),
    ]


def ravel_multi_index(i, j, **kwargs):
    return np.ravel_multi_index((i, j), **kwargs)


def einsum_by_path(a, b, c):
    """A chain contracted in the order that np.einsum_path finds for the operands' shapes."""
    path, _ = np.einsum_path("ij,jk,kl->il", a, b, c, optimize="optimal")
    return np.einsum("ij,jk,kl->il", a, b, c, optimize=path)


# --- comparisons ----------------------------------------------------------------------------------
def near_samples(rng, dtype):
    """Pairs equal in some examples, off by a little (inside or outside the tolerance) in others."""
    def pair(*shape):
        a = make_array(rng, shape, dtype, SMALL_INTS)
        step = rng.choice([0.0, 1e-9, 1e-3], size=shape) * (rng.random(shape) < 0.3)
        return a, np.asarray(a + step, dtype=dtype)
    return [SampleInput(pair(3, 4)), SampleInput(pair(5)), SampleInput(pair())]


def equal_samples(rng, dtype):
    """Equal but for a few elements in some examples; shapes that broadcast for equiv."""
    def pair(shape_a, shape_b):
        a = make_array(rng, shape_a, dtype, SMALL_INTS)
        b = np.broadcast_to(a, shape_b).copy() if shape_b != shape_a else a.copy()
        if rng.random() < 0.5:
            b.flat[rng.integers(0, b.size)] += 1
        return a, b
    return [SampleInput(pair((3, 4), (3, 4))), SampleInput(pair((4,), (4,)))]


def equiv_samples(rng, dtype):
    def pair(shape_a, shape_b):
        a = make_array(rng, shape_a, dtype, SMALL_INTS)
        b = np.broadcast_to(a, shape_b).copy()
        if rng.random() < 0.5:
            b.flat[rng.integers(0, b.size)] += 1
        return a, b
    return [SampleInput(pair((1, 4), (3, 4))), SampleInput(pair((4,), (2, 4))), SampleInput(pair((3,), (3,)))]


def with_nans(rng, dtype):
    a = make_array(rng, (6,), dtype, SMALL_INTS)
    a[rng.random(6) < 0.4] = np.nan
    b = a.copy()
    if rng.random() < 0.5:
        b[rng.integers(0, 6)] = 5.0
    return [SampleInput((a, b), {"equal_nan": True})]


# --- polynomials ----------------------------------------------------------------------------------
class Separated(A):
    """A polynomial with well-separated roots (real, and a complex pair where ``pair``), times a
    leading coefficient of either sign away from zero: eigenvalues far apart, no zero ends."""

    def __init__(self, *roots, pair=False):
        super().__init__(len(roots) + 2 * pair + 1)
        self.roots, self.pair = roots, pair

    def draw(self, rng, dtype, domain):
        roots = [r + rng.uniform(-0.2, 0.2) for r in self.roots]
        if self.pair:
            centre, spread = rng.uniform(-0.5, 0.5), rng.uniform(0.8, 1.5)
            roots += [centre + 1j * spread, centre - 1j * spread]
        lead = rng.uniform(1.0, 2.0) * rng.choice([-1.0, 1.0])
        return (lead * np.real(np.poly(roots))).astype(dtype)


def roots_padded(p, trailing=0):
    """np.roots of ``p`` between constant zero coefficients (they stay zeros under finite
    differences): the leading one is stripped, the trailing ones are roots 0."""
    return np.roots(np.concatenate(([0.0], p, [0.0] * trailing)))


def polymul_padded(a1, a2):
    """np.polymul of ``a1`` and ``a2`` after a constant leading zero each (stripped)."""
    return np.polymul(np.concatenate((np.zeros(1, a1.dtype), a1)), np.concatenate((np.zeros(1, a2.dtype), a2)))


# --- set operations and histograms in several dimensions -------------------------------------------
def overlapping(function):
    """``function(a, b')`` with ``b'`` holding two values of ``a``: an overlap that finite
    differences keep (continuous values have no ties otherwise)."""
    def call(a, b, **kwargs):
        return function(a, np.concatenate((np.ravel(b), np.ravel(a)[:2][::-1])), **kwargs)
    call.__name__ = function.__name__
    return call


def tuple_out(function):
    def call(*args, **kwargs):
        out = function(*args, **kwargs)
        return tuple(out) if isinstance(out, tuple) else out
    return call


def histogramdd(sample, *weights, **kwargs):
    """np.histogramdd's counts and edges as one flat tuple."""
    counts, edges = np.histogramdd(sample, weights=weights[0] if weights else None, **kwargs)
    return (counts, *edges)


SET_OPERATIONS = [("union1d", np.union1d, {}), ("intersect1d", np.intersect1d, {}),
                  ("intersect1d_indices", tuple_out(np.intersect1d), {"return_indices": True}),
                  ("setdiff1d", np.setdiff1d, {}), ("setxor1d", np.setxor1d, {})]


ENTRIES: list = [
    elementwise("isneginf", np.isneginf, domain=NAN_AND_INF, dtypes=FLOAT + INT, differentiable=False),
    elementwise("isposinf", np.isposinf, domain=NAN_AND_INF, dtypes=FLOAT + INT, differentiable=False),
    OpInfo("isreal", np.isreal, some_real_samples, dtypes=COMPLEX + FLOAT + INT, differentiable=False),
    OpInfo("iscomplex", np.iscomplex, some_real_samples, dtypes=COMPLEX + FLOAT + INT, differentiable=False),
    # array_api_strict sorts real numbers only
    OpInfo("sort_complex", np.sort_complex, sort_complex_samples, dtypes=FLOAT + COMPLEX + INT, strict_ok=False),
    # in place, as x[i] = v
    OpInfo("put_along_axis", put_along_axis, put_along_axis_samples, dtypes=FLOAT + INT, domain=(ANY, ANY, ANY),
           integer_index_args=(1,), writes_into_first_arg=True, strict_ok=False),
    OpInfo("add_at", add_at, add_at_samples, dtypes=FLOAT + INT, domain=(ANY, ANY, ANY),
           integer_index_args=(1,), writes_into_first_arg=True, strict_ok=False),
    OpInfo("putmask", putmask, putmask_samples, dtypes=FLOAT + INT, domain=(ANY, ANY, ANY),
           writes_into_first_arg=True, strict_ok=False),
    OpInfo("place_one_value", place, place_one_value_samples, dtypes=FLOAT + INT, domain=(ANY, ANY, ANY),
           writes_into_first_arg=True, strict_ok=False),
    fixed("place_fixed_mask", place_fixed_mask,
          [((A(3, 4), A(3)), {"mask": ((True, False, True, True), (False,) * 4, (True, False, False, True))}),
           ((A(5), A(2, 2)), {"mask": (True, True, False, True, False)})],
          dtypes=FLOAT + INT, writes_into_first_arg=True, strict_ok=False),
    OpInfo("copyto", copyto, copyto_samples, dtypes=FLOAT + INT, domain=(ANY, ANY, ANY),
           writes_into_first_arg=True, strict_ok=False),
    # index helpers: NumPy's index arrays from the traced array's shape, used to gather
    fixed("diag_indices_from", take_diagonal, [((A(4, 4),), {}), ((A(3, 3, 3),), {})], strict_ok=False),
    fixed("tril_indices_from", take_lower, [((A(4, 4),), {}), ((A(3, 5),), {"k": 1}), ((A(4, 3),), {"k": -1})],
          strict_ok=False),
    fixed("triu_indices_from", take_upper, [((A(4, 4),), {}), ((A(3, 5),), {"k": -1}), ((A(4, 3),), {"k": 2})],
          strict_ok=False),
    OpInfo("ravel_multi_index", ravel_multi_index, ravel_multi_index_samples, dtypes=INT, differentiable=False,
           integer_index_args=(0, 1), strict_ok=False),
    fixed("einsum_path", einsum_by_path, [((A(3, 4), A(4, 2), A(2, 5)), {}), ((A(2, 6), A(6, 6), A(6, 1)), {})],
          strict_ok=False),
    # whole-array comparisons: a boolean per example under vmap
    OpInfo("allclose", np.allclose, near_samples, dtypes=F64 + INT, differentiable=False, strict_ok=False),
    OpInfo("array_equal", np.array_equal, equal_samples, dtypes=FLOAT + INT + BOOL, differentiable=False,
           strict_ok=False),
    OpInfo("array_equal_nan", np.array_equal, with_nans, dtypes=FLOAT, differentiable=False, strict_ok=False),
    OpInfo("array_equiv", np.array_equiv, equiv_samples, dtypes=FLOAT + INT, differentiable=False, strict_ok=False),
    # polynomials, highest power first
    fixed("polyadd", np.polyadd, [((A(4), A(2)), {}), ((A(3), A(3)), {}), ((A(), A(3)), {})],
          dtypes=FLOAT + COMPLEX + INT, strict_ok=False),
    fixed("polysub", np.polysub, [((A(2), A(4)), {}), ((A(3), A(3)), {}), ((A(3), A()), {})],
          dtypes=FLOAT + COMPLEX + INT, strict_ok=False),
    # NumPy strips leading zeros (vmap without any: tests/test_ops_misc.py)
    fixed("polymul", polymul_padded, [((A(4), A(2)), {}), ((A(1), A(3)), {}), ((A(3), A(3)), {})],
          dtypes=FLOAT + COMPLEX + INT, dynamic_shape_args=(0, 1), strict_ok=False),
    fixed("polyder", np.polyder, [((A(5),), {}), ((A(5), 2), {}), ((A(3), 0), {}), ((A(2), 3), {})],
          dtypes=FLOAT + COMPLEX + INT, strict_ok=False),
    fixed("polyint", np.polyint, [((A(4),), {}), ((A(3), 2), {}), ((A(3), 2, [1.5, -0.5]), {}),
                                  ((A(2),), {"m": 3, "k": 2.0}), ((A(3), 0), {})],
          dtypes=FLOAT + COMPLEX, strict_ok=False),
    fixed("poly", np.poly, [((A(3),), {}), ((A(1),), {}), ((A(5),), {})], dtypes=FLOAT + INT, strict_ok=False),
    # NumPy strips leading and trailing zeros (vmap without any: tests/test_ops_misc.py)
    fixed("roots", roots_padded, [((Separated(-2.0, 0.0, 2.0),), {}), ((Separated(-1.5, 1.5, pair=True),), {})],
          dtypes=F64, dynamic_shape_args=(0,), strict_ok=False),
    fixed("roots_trailing_zeros", roots_padded, [((Separated(-1.0, 1.0),), {"trailing": 2}),
                                                  ((Separated(0.5, pair=True),), {"trailing": 1})],
          dtypes=F64, dynamic_shape_args=(0,), strict_ok=False),
    # set operations: sorted unique values, so the length follows the values (fixed by the primal
    # under grad, a DynamicShapeError under vmap)
    *(fixed(name, overlapping(function), [((A(3, 4), A(5)), kwargs), ((A(6), A(2, 2)), kwargs)],
            dynamic_shape_args=(0, 1), strict_ok=False)
      for name, function, kwargs in SET_OPERATIONS),
    *(fixed(f"{name}_ties", function, [((A(3, 4), A(5)), kwargs), ((A(6), A(2, 2)), kwargs)], domain=SMALL_INTS,
            dtypes=INT, differentiable=False, dynamic_shape_args=(0, 1), strict_ok=False)
      for name, function, kwargs in SET_OPERATIONS),
    fixed("set_operations_assume_unique",
          lambda a, b: (np.intersect1d(a, b, assume_unique=True), np.setdiff1d(a, b, assume_unique=True),
                        np.setxor1d(a, b, assume_unique=True)),
          [((A(5), A(4)), {})], dynamic_shape_args=(0, 1), strict_ok=False),
    # histograms in several dimensions, as np.histogram per dimension
    fixed("histogramdd", histogramdd, [((A(20, 2),), {}), ((A(15, 3),), {"bins": (2, 3, 4), "density": True}),
                                       ((A(12, 2),), {"bins": [[-1.5, 0.0, 1.75], 3], "range": [None, (-1.0, 1.0)]}),
                                       ((A(10),), {"bins": 4})], strict_ok=False),
    fixed("histogramdd_weighted", histogramdd, [((A(20, 2), A(20)), {"bins": 3}),
                                                ((A(8, 3), A(8)), {"bins": 2, "density": True})],
          domain=Domain(0.1, 2.0), strict_ok=False),
]


# --- interp with period= (kernels/interp.py; tests/test_interp.py) --------------------------------
def interp_period_samples(rng, dtype):
    """Knots in any order over two periods (NumPy reduces and sorts them), points over three."""
    x = lambda *shape: make_array(rng, shape, dtype, Domain(-6.0, 12.0))  # noqa: E731
    xp = lambda n: rng.permutation(np.linspace(-4.0, 7.5, n) + rng.uniform(0.0, 0.3, n)).astype(dtype)  # noqa: E731
    fp = lambda n: make_array(rng, (n,), dtype)  # noqa: E731
    return [SampleInput((x(7), xp(5), fp(5)), {"period": 4.0}),
            SampleInput((x(2, 3), xp(3), fp(3)), {"period": -5.0})]


ENTRIES.append(OpInfo("interp_period", np.interp, interp_period_samples,
                      domain=(Domain(-6.0, 12.0), ANY, ANY)))


# --- ufunc.at beyond add, add.reduceat, np.asarray(..., like=traced) ----------------------------------
def ufunc_at(ufunc):
    def op(x, values, *, indices):
        """``ufunc.at`` (in place) on a copy of ``x``; the indices a constant (a tuple here)."""
        y = x * 1
        ufunc.at(y, np.asarray(indices), values)
        return y
    op.__name__ = f"{ufunc.__name__}_at"
    return op


UFUNC_AT_CALLS = [((A(5), A(7)), {"indices": (0, 3, 0, -1, 3, 0, 2)}),  # repeated targets, in NumPy's order
                  ((A(4, 3), A(3, 3)), {"indices": (2, 2, 0)}),  # rows
                  ((A(4, 3), A(3)), {"indices": (1, 1)})]  # the value broadcast over the rows
for _ufunc in (np.maximum, np.minimum, np.fmax, np.fmin, np.multiply):
    ENTRIES.append(fixed(f"{_ufunc.__name__}_at", ufunc_at(_ufunc), UFUNC_AT_CALLS, dtypes=FLOAT + INT,
                         writes_into_first_arg=True, strict_ok=False))


def add_reduceat(x, *, indices, axis=0):
    return np.add.reduceat(x, np.asarray(indices), axis=axis)


ENTRIES.append(fixed("add_reduceat", add_reduceat,
                     [((A(7),), {"indices": (0, 4, 1, 5)}),  # overlapping segments, a[4] alone
                      ((A(3, 7),), {"indices": (0, 2, 2, 6), "axis": 1}),
                      ((A(5, 2),), {"indices": (3,)}),
                      ((A(4),), {"indices": (0, 1, 2, 3)})],
                     dtypes=FLOAT + INT + COMPLEX, strict_ok=False))


def array_like(func):
    def op(x):
        """``func(constant, like=x)`` is NumPy's constant; ``func(x, like=x)`` is ``x``."""
        return func(np.arange(x.shape[-1] if x.ndim else 1, dtype=x.dtype), like=x) * x + func(x, like=x)
    op.__name__ = f"{func.__name__}_like"
    return op


for _func in (np.asarray, np.asanyarray, np.array, np.ascontiguousarray, np.asfortranarray):
    ENTRIES.append(fixed(f"{_func.__name__}_like", array_like(_func), [((A(3, 4),), {}), ((A(5),), {})],
                         dtypes=FLOAT + INT + COMPLEX, strict_ok=False))


# the creators that take like= only to pick the kind of array (flox: np.arange(size, like=aux)):
# n values, NumPy's constant, whatever x is
MADE_LIKE = {
    np.arange: lambda n, x: np.arange(n, like=x),
    np.empty: lambda n, x: np.empty((0,), like=x).sum(),
    np.zeros: lambda n, x: np.zeros(n, like=x),
    np.ones: lambda n, x: np.ones(n, like=x),
    np.full: lambda n, x: np.full(n, 2.5, like=x),
    np.identity: lambda n, x: np.identity(n, like=x)[0],
    np.eye: lambda n, x: np.eye(n, k=1, like=x)[0],
    np.tri: lambda n, x: np.tri(n, like=x)[-1],
    np.fromfunction: lambda n, x: np.fromfunction(lambda i: i * 2.0, (n,), like=x),
    np.frombuffer: lambda n, x: np.frombuffer(np.arange(n, dtype=np.float64).tobytes(), like=x),
    np.fromiter: lambda n, x: np.fromiter(range(n), dtype=np.float64, like=x),
    np.fromstring: lambda n, x: np.fromstring(" ".join(map(str, range(n))), sep=" ", like=x),
}


def made_like(func, make):
    def op(x):
        """``func(..., like=x)``: NumPy's constant, times ``x``."""
        return make(x.shape[-1] if x.ndim else 1, x) * x
    op.__name__ = f"{func.__name__}_like"
    return op


for _func, _make in MADE_LIKE.items():
    ENTRIES.append(fixed(f"{_func.__name__}_like", made_like(_func, _make), [((A(3, 4),), {}), ((A(5),), {})],
                         dtypes=FLOAT + INT + COMPLEX, strict_ok=False))
