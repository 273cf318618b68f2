"""The operator table: one entry per NumPy function that the engine batches.

Generic tests run every entry through every transform (vmap vs a for-loop now; JVP, VJP
and their compositions later), in the style of functorch's ``OpInfo``. An entry holds
the callable, a ``sample_inputs(rng, dtype)`` generator and the facts the generic
tests need: which dtypes to try, whether it is differentiable, where its inputs must
lie, and whether it runs on ``array_api_strict``.

Sample generators draw only *values* from ``rng``: shapes, kwargs and static arguments
are fixed, so calling a generator with several seeds gives several examples of the same
sample, which ``examples`` stacks into a batch. The bottom of this module holds that
batching and the for-loop oracle, shared by the NumPy and ``array_api_strict`` tests.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from typing import Any, Callable

import numpy as np
import pytest

FLOAT = (np.dtype(np.float64), np.dtype(np.float32))
INT = (np.dtype(np.int64),)
BOOL = (np.dtype(np.bool_),)


@dataclasses.dataclass(frozen=True)
class Domain:
    """Where the values of one array argument are drawn from.

    ``exclude_zero`` draws magnitudes from ``[0.5, max(|low|, |high|)]`` with a random
    sign (divisors, ``abs`` away from its kink); ``discrete`` draws integers in
    ``[low, high]`` even for float dtypes (ties for comparisons, zeros for logical ops);
    ``special_values`` are written into about a quarter of the elements.
    """

    low: float = -2.0
    high: float = 2.0
    exclude_zero: bool = False
    discrete: bool = False
    special_values: tuple[float, ...] = ()

    def scalar(self, dtype: np.dtype) -> Any:
        """A Python scalar inside the domain, for operands passed as plain numbers."""
        if dtype.kind == "b":
            return True
        value = 0.75 * self.high + 0.25 * self.low
        if dtype.kind in "iu" or self.discrete:
            return int(round(value)) or 1
        return round(value * 4) / 4 or 0.5


ANY = Domain()
POSITIVE = Domain(0.1, 3.0)
NONZERO = Domain(-2.0, 2.0, exclude_zero=True)
UNIT_OPEN = Domain(-0.9, 0.9)
NEAR_ONE = Domain(0.5, 1.5)
SMALL_INTS = Domain(-2.0, 2.0, discrete=True)
NAN_AND_INF = Domain(special_values=(np.nan, np.inf, -np.inf))
SOME_NAN = Domain(special_values=(np.nan,))


@dataclasses.dataclass(frozen=True)
class SampleInput:
    """One call: ``op(*args, **kwargs)``. ``np.ndarray`` args are the arrays that the
    tests batch; every other arg (Python scalars, strings, shapes) is static."""

    args: tuple
    kwargs: dict = dataclasses.field(default_factory=dict)

    def __repr__(self) -> str:
        def show(value):
            if isinstance(value, np.ndarray):
                return f"{value.dtype.name}{list(value.shape)}"
            return repr(value)

        shown = [show(a) for a in self.args] + [f"{k}={show(v)}" for k, v in self.kwargs.items()]
        return f"({', '.join(shown)})"


@dataclasses.dataclass(frozen=True)
class OpInfo:
    """Everything the generic tests know about one operation.

    - ``domain``: one ``Domain`` per array argument, or a single one for all of them
      (for the autodiff tests: finite differences must stay inside it too).
    - ``strict_ok``: False where the standard lacks the function and the library uses
      its NumPy/CuPy-only table (``einsum``).
    - ``integer_index_args``: positions of integer index arrays (never differentiated).
    - ``compare_values``: False where only shape and dtype are defined (``empty_like``).
    - ``index_into_first_arg``: ``x[i]``. With a raw array ``x`` and a batched ``i``,
      ``ndarray.__getitem__`` runs before any tracer can: vmap must raise a
      ``TransformError``, not return garbage.
    - ``writes_into_first_arg``: setitem / in-place. Writing a value mapped at some
      level into an array not mapped at that level raises ``InplaceError`` (the
      policy), or a ``TransformError`` where NumPy's own ``__setitem__`` runs first.
    - ``operator_on_first_arg``: a Python operator or method of the first argument;
      a raw ``array_api_strict`` first argument rejects a tracer operand (and has no
      ``astype`` method), so the strict test batches the first argument there.
    """

    name: str
    op: Callable
    sample_inputs: Callable[[np.random.Generator, np.dtype], list[SampleInput]]
    dtypes: tuple[np.dtype, ...] = FLOAT
    differentiable: bool = True
    domain: tuple[Domain, ...] = (ANY,)
    strict_ok: bool = True
    integer_index_args: tuple[int, ...] = ()
    compare_values: bool = True
    index_into_first_arg: bool = False
    writes_into_first_arg: bool = False
    operator_on_first_arg: bool = False


# --------------------------------------------------------------------------- values


def make_array(rng: np.random.Generator, shape: tuple, dtype: np.dtype, domain: Domain = ANY) -> np.ndarray:
    """An array of ``shape`` and ``dtype`` with values inside ``domain``."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return np.asarray(rng.random(shape) < 0.5)
    if dtype.kind in "iu":
        low, high = math.ceil(domain.low), math.floor(domain.high)
        values = rng.integers(low, high + 1, size=shape)
        if domain.exclude_zero:
            values = np.where(values == 0, high, values)
        return np.asarray(values, dtype=dtype)
    if domain.discrete:
        values = rng.integers(math.ceil(domain.low), math.floor(domain.high) + 1, size=shape).astype(float)
    elif domain.exclude_zero:
        magnitude = rng.uniform(0.5, max(abs(domain.low), abs(domain.high)), size=shape)
        values = np.where(rng.random(shape) < 0.5, -magnitude, magnitude)
    else:
        values = rng.uniform(domain.low, domain.high, size=shape)
    if domain.special_values:
        special = rng.choice(np.asarray(domain.special_values), size=shape)
        values = np.where(rng.random(shape) < 0.25, special, values)
    return np.asarray(values, dtype=dtype)


def sprinkle_nans(rng: np.random.Generator, x: np.ndarray, axis) -> np.ndarray:
    """``x`` with some NaNs, but none of the slices that a reduction over ``axis``
    sees is all-NaN (``nanargmax`` raises there, ``nanmean`` warns)."""
    if x.ndim == 0:
        return x
    axes = tuple(range(x.ndim)) if axis is None else tuple(int(a) % x.ndim for a in np.atleast_1d(axis))
    kept = [a for a in range(x.ndim) if a not in axes]
    slice_size = math.prod(x.shape[a] for a in axes)
    mask = rng.random((math.prod(x.shape[a] for a in kept), slice_size)) < 0.3
    mask[:, rng.permutation(slice_size)[:2]] = False  # two values per slice: nanvar with ddof=1
    mask = mask.reshape([x.shape[a] for a in kept] + [x.shape[a] for a in axes])
    mask = np.moveaxis(mask, range(len(kept), x.ndim), axes)
    return np.where(mask, np.nan, x).astype(x.dtype)


def integer_index(rng: np.random.Generator, shape: tuple, size: int, distinct: bool = False) -> np.ndarray:
    """Indices into an axis of length ``size``, negative ones included."""
    if distinct:
        return (rng.permutation(size)[: math.prod(shape)] - size * (rng.random(shape) < 0.5)).reshape(shape)
    return rng.integers(-size, size, size=shape)


# ----------------------------------------------------------------- sample generators

UNARY_SHAPES = [(), (1,), (4,), (3, 1), (2, 3, 4)]
SCALAR = "python scalar"
BINARY_SHAPES = [
    ((3, 4), (3, 4)),
    ((3, 1), (4,)),
    ((2, 3, 4), (3, 1)),
    ((), (2, 3)),
    ((1, 4), ()),
    ((4,), SCALAR),
    (SCALAR, (3, 4)),
]
TERNARY_SHAPES = [((3, 4), (3, 4), (3, 4)), ((3, 1), (4,), ()), ((), (2, 3), (1, 3))]


def elementwise_samples(rng, dtype, *, domains, shapes):
    """Elementwise calls over broadcasting shapes; ``SCALAR`` marks a Python number."""
    return [
        SampleInput(
            tuple(
                domain.scalar(dtype) if shape == SCALAR else make_array(rng, shape, dtype, domain)
                for shape, domain in zip(shape_tuple, domains)
            )
        )
        for shape_tuple in shapes
    ]


def elementwise(name, op, *, domain=ANY, dtypes=FLOAT, arity=1, **fields) -> OpInfo:
    domains = domain if isinstance(domain, tuple) else (domain,) * arity
    shapes = {1: [(s,) for s in UNARY_SHAPES], 2: BINARY_SHAPES, 3: TERNARY_SHAPES}[len(domains)]
    return OpInfo(
        name,
        op,
        functools.partial(elementwise_samples, domains=domains, shapes=shapes),
        dtypes=dtypes,
        domain=domains,
        **fields,
    )


def binary(name, op, *, domain=ANY, **fields) -> OpInfo:
    return elementwise(name, op, domain=domain, arity=2, **fields)


class A:
    """An array argument of this shape in a call spec; its values come from the domain."""

    def __init__(self, *shape: int):
        self.shape = shape


def fixed_samples(rng, dtype, *, calls, domain=ANY):
    """Calls given as ``(args, kwargs)``: each ``A(*shape)`` becomes an array drawn
    in ``domain``; every other argument (a shape, a string, a number) is static."""
    return [
        SampleInput(
            tuple(make_array(rng, a.shape, dtype, domain) if isinstance(a, A) else a for a in args),
            dict(kwargs),
        )
        for args, kwargs in calls
    ]


def fixed(name, op, calls, *, domain=ANY, **fields) -> OpInfo:
    return OpInfo(name, op, functools.partial(fixed_samples, calls=calls, domain=domain), domain=(domain,), **fields)


REDUCTIONS = [
    ((), {}),
    ((5,), {}),
    ((5,), {"axis": 0}),
    ((5,), {"axis": -1, "keepdims": True}),
    ((1, 4), {"axis": 0}),
    ((3, 4), {"axis": 1}),
    ((3, 4), {"axis": -2, "keepdims": True}),
    ((3, 4), {"axis": None, "keepdims": True}),
    ((2, 3, 4), {}),
    ((2, 3, 4), {"axis": (0, 2)}),
    ((2, 3, 4), {"axis": (-1, 1), "keepdims": True}),
]
WITH_DDOF = REDUCTIONS + [
    ((5,), {"ddof": 1}),
    ((3, 4), {"axis": 1, "ddof": 1}),
    ((2, 3, 4), {"axis": (0, 2), "ddof": 1, "keepdims": True}),
]
ARG_REDUCTIONS = [
    ((), {}),
    ((5,), {}),
    ((1, 4), {"axis": 0}),
    ((3, 4), {"axis": 1}),
    ((3, 4), {"axis": -2, "keepdims": True}),
    ((2, 3, 4), {}),
    ((2, 3, 4), {"axis": 1}),
]
CUMULATIVE = [
    ((), {}),
    ((5,), {}),
    ((1, 4), {"axis": 0}),
    ((3, 4), {"axis": 1}),
    ((3, 4), {"axis": -2}),
    ((2, 3, 4), {}),
    ((2, 3, 4), {"axis": 0}),
]


def reduction_samples(rng, dtype, *, calls, domain, nans):
    samples = []
    for shape, kwargs in calls:
        x = make_array(rng, shape, dtype, domain)
        if nans:
            x = sprinkle_nans(rng, x, kwargs.get("axis"))
        samples.append(SampleInput((x,), dict(kwargs)))
    return samples


def reduction(name, op, *, calls=REDUCTIONS, domain=ANY, nans=False, **fields) -> OpInfo:
    return OpInfo(
        name,
        op,
        functools.partial(reduction_samples, calls=calls, domain=domain, nans=nans),
        domain=(domain,),
        **fields,
    )


# ------------------------------------------------------------------ special samples


def gradient_samples(rng, dtype):
    coordinates = lambda n: np.cumsum(rng.uniform(0.5, 1.5, size=n)).astype(dtype)
    x = lambda *shape: make_array(rng, shape, dtype)
    return [
        SampleInput((x(5),)),
        SampleInput((x(5), 2.0)),
        SampleInput((x(3, 4),), {"axis": 0}),
        SampleInput((x(3, 4), 0.5), {"axis": -1}),
        SampleInput((x(3, 4),)),  # one array per axis: a list output
        SampleInput((x(4), coordinates(4))),
        SampleInput((x(3, 5), coordinates(5)), {"axis": 1}),
        SampleInput((x(5),), {"edge_order": 2}),
    ]


def concatenate_samples(rng, dtype):
    x = lambda *shape: make_array(rng, shape, dtype)
    return [
        SampleInput((x(2, 3), x(4, 3)), {"axis": 0}),
        SampleInput((x(3, 2), x(3, 4)), {"axis": -1}),
        SampleInput((x(2, 3), x(2, 3)), {"axis": None}),
        SampleInput((x(4), x(1))),
        SampleInput((x(2, 3, 4), x(2, 1, 4)), {"axis": 1}),
    ]


def stack_samples(rng, dtype):
    x = lambda *shape: make_array(rng, shape, dtype)
    return [
        SampleInput((x(3, 4), x(3, 4))),
        SampleInput((x(3, 4), x(3, 4)), {"axis": -1}),
        SampleInput((x(3, 4), x(3, 4)), {"axis": 1}),
        SampleInput((x(), x())),
    ]


def three_array_samples(rng, dtype, *, calls):
    return [
        SampleInput(tuple(make_array(rng, shape, dtype) for shape in shapes), dict(kwargs))
        for shapes, kwargs in calls
    ]


def take_samples(rng, dtype, *, calls):
    """``(x_shape, [(index_shape, indexed_axis_length), ...])`` per call."""
    return [
        SampleInput((make_array(rng, x_shape, dtype),) + tuple(integer_index(rng, s, n) for s, n in indices))
        for x_shape, indices in calls
    ]


def setitem_samples(rng, dtype, *, calls):
    """``(x_shape, value_shape)``; a value shape ``SCALAR`` is a Python number."""
    return [
        SampleInput(
            (
                make_array(rng, x_shape, dtype),
                ANY.scalar(dtype) if v_shape == SCALAR else make_array(rng, v_shape, dtype),
            )
        )
        for x_shape, v_shape in calls
    ]


def setitem_index_samples(rng, dtype):
    x = lambda *shape: make_array(rng, shape, dtype)
    return [
        SampleInput((x(5, 3), integer_index(rng, (2,), 5, distinct=True), x(2, 3))),
        SampleInput((x(5, 3), integer_index(rng, (2,), 5, distinct=True), x(3))),
        SampleInput((x(4), integer_index(rng, (), 4), x())),
    ]


def where_samples(rng, dtype):
    cond = lambda *shape: make_array(rng, shape, BOOL[0])
    x = lambda *shape: make_array(rng, shape, dtype)
    return [
        SampleInput((cond(3, 4), x(3, 4), x(3, 4))),
        SampleInput((cond(3, 1), x(4), x())),
        SampleInput((cond(), x(2, 3), x(1, 3))),
        SampleInput((cond(3, 4), x(3, 4), ANY.scalar(dtype))),
    ]


LOWER = Domain(-1.5, -0.1)
UPPER = Domain(0.1, 1.5)


def clip_samples(rng, dtype):
    x = lambda *shape: make_array(rng, shape, dtype)
    return [
        SampleInput((x(3, 4), make_array(rng, (3, 4), dtype, LOWER), make_array(rng, (3, 4), dtype, UPPER))),
        SampleInput((x(3, 4), make_array(rng, (4,), dtype, LOWER), UPPER.scalar(dtype))),
        SampleInput((x(2, 3), LOWER.scalar(dtype), make_array(rng, (), dtype, UPPER))),
        SampleInput((x(5), -1, 1)),
        SampleInput((x(5), None, 1)),
    ]


def result_type_samples(rng, dtype):
    x = lambda shape, dt=dtype: make_array(rng, shape, dt)
    return [
        SampleInput((x((3,)), x((3,), np.float64))),
        SampleInput((x((3,)), x((3,), np.float32))),
        SampleInput((x((2, 3)), x((), np.int64))),
        SampleInput((x((3,)), 2.0)),
        SampleInput((x((3,)), 2)),
    ]


def getitem(name, key, shapes, **fields) -> OpInfo:
    return fixed(f"getitem_{name}", lambda x: x[key], [((A(*s),), {}) for s in shapes], dtypes=FLOAT + INT, **fields)


def setitem(name, key, calls) -> OpInfo:
    def write(x, v):
        y = x * 1
        y[key] = v
        return y

    return OpInfo(
        f"setitem_{name}",
        write,
        functools.partial(setitem_samples, calls=calls),
        dtypes=FLOAT + INT,
        writes_into_first_arg=True,
    )


def inplace_add(x, v):
    y = x * 1
    y += v
    return y


def setitem_index(x, i, v):
    y = x * 1
    y[i] = v
    return y


def cast(x, dtype):
    return x.astype(dtype)


def cast_to_result_type(x, y):
    return x.astype(np.result_type(x, y))


def like_calls(fill=()):
    """``*_like`` calls: with and without a ``dtype`` (NumPy dtype objects: the strict
    test translates them)."""
    calls = [((A(*s),) + fill, {}) for s in [(), (3, 4), (2, 3, 4)]]
    calls += [((A(3, 4),) + fill, {"dtype": np.dtype(np.float32)}), ((A(3),) + fill, {"dtype": np.dtype(np.int64)})]
    return calls


def einsum(subscripts_and_shapes):
    calls = [((subscripts,) + tuple(A(*s) for s in shapes), {}) for subscripts, shapes in subscripts_and_shapes]
    return fixed("einsum", np.einsum, calls, strict_ok=False)


def operator(name, op, *, domain=ANY, dtypes=FLOAT, **fields) -> OpInfo:
    return binary(f"operator_{name}", op, domain=domain, dtypes=dtypes, operator_on_first_arg=True, **fields)


# ------------------------------------------- samples of the functions of numpy_more.py


def knots(rng, n, dtype):
    """``n`` increasing sample points from about -0.7, at least 0.3 apart."""
    return (np.cumsum(rng.uniform(0.3, 1.0, size=n)) - 1.0).astype(dtype)


def interp_samples(rng, dtype):
    x = lambda *shape: make_array(rng, shape, dtype, Domain(-1.0, 4.0))
    fp = lambda n: make_array(rng, (n,), dtype)
    return [
        SampleInput((x(6), knots(rng, 4, dtype), fp(4))),
        SampleInput((x(2, 3), knots(rng, 5, dtype), fp(5)), {"left": -5.0, "right": 7.0}),
        SampleInput((x(), knots(rng, 3, dtype), fp(3))),
        SampleInput((x(4), knots(rng, 2, dtype), fp(2)), {"right": 0.5}),
        SampleInput((x(3), knots(rng, 1, dtype), fp(1))),
    ]


def average_samples(rng, dtype):
    x = lambda *shape: make_array(rng, shape, dtype)
    w = lambda *shape: make_array(rng, shape, dtype, POSITIVE)
    return [
        SampleInput((x(3, 4),)),
        SampleInput((x(3, 4),), {"axis": 1}),
        SampleInput((x(3, 4), w(3, 4))),
        SampleInput((x(3, 4), w(3, 4)), {"axis": 0, "keepdims": True}),
        SampleInput((x(3, 4), w(4)), {"axis": -1}),
        SampleInput((x(2, 3, 4), w(4, 2)), {"axis": (2, 0)}),
    ]


def average_returned_samples(rng, dtype):
    x = lambda *shape: make_array(rng, shape, dtype)
    w = lambda *shape: make_array(rng, shape, dtype, POSITIVE)
    return [
        SampleInput((x(3, 4),), {"axis": 0}),
        SampleInput((x(5),)),
        SampleInput((x(3, 4), w(4)), {"axis": 1}),
        SampleInput((x(3, 4), w(3, 4))),
        SampleInput((x(2, 3), w(3)), {"axis": 1, "keepdims": True}),
    ]


def trapezoid_samples(rng, dtype):
    y = lambda *shape: make_array(rng, shape, dtype)
    return [
        SampleInput((y(5),)),
        SampleInput((y(3, 4),), {"dx": 0.5}),
        SampleInput((y(4, 3),), {"axis": 0}),
        SampleInput((y(3, 5), knots(rng, 5, dtype))),
        SampleInput((y(5, 2), knots(rng, 5, dtype)), {"axis": 0}),
        SampleInput((y(2, 4), make_array(rng, (2, 4), dtype)), {"axis": -1}),
    ]


def sorted_values(rng, shape, dtype, domain=Domain(-3.0, 3.0, discrete=True)):
    return np.sort(make_array(rng, shape, dtype, domain), axis=-1)


def searchsorted_samples(rng, dtype):
    v = lambda *shape: make_array(rng, shape, dtype, Domain(-4.0, 4.0, discrete=True))
    return [
        SampleInput((sorted_values(rng, (6,), dtype), v(5))),
        SampleInput((sorted_values(rng, (6,), dtype), v(2, 3)), {"side": "right"}),
        SampleInput((sorted_values(rng, (4,), dtype), v()), {"side": "left"}),
        SampleInput((sorted_values(rng, (1,), dtype), v(3)), {"side": "right"}),
    ]


def digitize_samples(rng, dtype):
    x = lambda *shape: make_array(rng, shape, dtype, Domain(-4.0, 4.0, discrete=True))
    distinct = lambda n: np.sort(rng.permutation(np.arange(-3, 4))[:n]).astype(dtype)
    return [
        SampleInput((x(6), distinct(4))),
        SampleInput((x(2, 3), distinct(5)), {"right": True}),
        SampleInput((x(5), distinct(4)[::-1].copy())),
        SampleInput((x(5), distinct(3)[::-1].copy()), {"right": True}),
        SampleInput((x(), distinct(2))),
    ]


def unravel_index_samples(rng, dtype):
    flat = lambda shape, size: rng.integers(0, size, size=shape).astype(dtype)
    return [
        SampleInput((flat((5,), 12), (3, 4))),
        SampleInput((flat((2, 3), 24), (2, 3, 4))),
        SampleInput((flat((4,), 24), (2, 3, 4)), {"order": "F"}),
        SampleInput((flat((), 7), 7)),
    ]


def mask(rng, shape, kept_axes=()):
    """A boolean mask, true everywhere along ``kept_axes`` at index 0 (so that no slice
    of a reduction over the other axes is empty)."""
    values = rng.random(shape) < 0.6
    for axis in kept_axes:
        index = [slice(None)] * len(shape)
        index[axis] = 0
        values[tuple(index)] = True
    return values


def masked_reduction_samples(rng, dtype, *, initial=None, nans=False):
    def x(*shape, axis=None):
        values = make_array(rng, shape, dtype)
        return sprinkle_nans(rng, values, axis) if nans else values

    extra = {} if initial is None else {"initial": initial}
    return [
        SampleInput((x(3, 4), mask(rng, (3, 4), (0, 1))), extra),
        SampleInput((x(3, 4, axis=1), mask(rng, (4,), (0,))), {"axis": 1, **extra}),
        SampleInput((x(3, 4, axis=0), mask(rng, (3, 4), (0,))), {"axis": 0, "keepdims": True, **extra}),
        SampleInput((x(2, 3, 4, axis=(0, 2)), mask(rng, (3, 1), (1,))), {"axis": (0, 2), **extra}),
        SampleInput((x(5), np.ones((5,), dtype=bool)), extra),
    ]


def masked(name, function, *, initial=None, nans=False, dtypes=FLOAT, **fields) -> OpInfo:
    return OpInfo(
        name,
        lambda x, where, **kw: function(x, where=where, **kw),
        functools.partial(masked_reduction_samples, initial=initial, nans=nans),
        dtypes=dtypes,
        domain=(SOME_NAN if nans else ANY, ANY),
        **fields,
    )


def weighted_average(x, weights=None, **kwargs):
    """np.average with the weights as an array argument (positionally np.average's is axis)."""
    return np.average(x, weights=weights, **kwargs)


def lstsq_parts(a, b, **kwargs):
    solution, residuals, _, s = np.linalg.lstsq(a, b, **kwargs)
    return solution, residuals, s


def lstsq_rank(a, b, **kwargs):
    return np.linalg.lstsq(a, b, **kwargs)[2]


WELL_CONDITIONED = Domain(0.5, 2.0, exclude_zero=True)


def fill_diagonal(x, val, **kwargs):
    """np.fill_diagonal (in place) on a copy of ``x``."""
    y = x * 1
    np.fill_diagonal(y, val, **kwargs)
    return y


def fill_diagonal_samples(rng, dtype):
    x = lambda *shape: make_array(rng, shape, dtype)
    return [
        SampleInput((x(3, 3), x(3))),
        SampleInput((x(4, 4), x())),
        SampleInput((x(5, 3), x(2)), {"wrap": True}),  # 3 + 1 positions: the values are repeated
        SampleInput((x(3, 5), x(3))),
        SampleInput((x(7, 2), x(3)), {"wrap": True}),
        SampleInput((x(3, 3, 3), x(3))),
        SampleInput((x(4, 4), x(6))),  # more values than positions: the first four are used
    ]


def matrix_power_samples(rng, dtype):
    """Matrices I + entries in [-0.25, 0.25]: diagonally dominant (invertible, for the
    negative powers) and with powers of order 1 (second differences of sin(A^n) stay exact)."""
    m = lambda *shape: (make_array(rng, shape, dtype, Domain(-0.25, 0.25)) + np.eye(shape[-1])).astype(dtype)
    return [
        SampleInput((m(3, 3), 0)),
        SampleInput((m(3, 3), 1)),
        SampleInput((m(2, 2, 2), 2)),
        SampleInput((m(3, 3), 3)),
        SampleInput((m(2, 2), 6)),
        SampleInput((m(2, 3, 3), 5)),
        SampleInput((m(3, 3), -1)),
        SampleInput((m(2, 2), -3)),
    ]


def take_samples_with_axis(rng, dtype):
    x = lambda *shape: make_array(rng, shape, dtype)
    return [
        SampleInput((x(3, 5), integer_index(rng, (4,), 15))),
        SampleInput((x(3, 5), integer_index(rng, (2, 2), 5)), {"axis": 1}),
        SampleInput((x(4, 3), integer_index(rng, (), 4)), {"axis": 0}),
        SampleInput((x(2, 3, 4), integer_index(rng, (3,), 3)), {"axis": -2}),
        SampleInput((x(3, 5), rng.integers(-9, 9, size=(4,))), {"axis": 1, "mode": "clip"}),
    ]


def cov_weighted(x, aweights, **kwargs):
    """np.cov with the observation weights as an array argument."""
    return np.cov(x, aweights=aweights, **kwargs)


def cov_weights_samples(rng, dtype):
    x = lambda *shape: make_array(rng, shape, dtype)
    w = lambda n: make_array(rng, (n,), dtype, POSITIVE)
    return [
        SampleInput((x(3, 6), w(6))),
        SampleInput((x(6), w(6)), {"ddof": 0}),
        SampleInput((x(5, 2), w(5)), {"rowvar": False, "fweights": (1, 2, 1, 3, 1)}),
        SampleInput((x(2, 4), w(4)), {"bias": True}),
    ]


def scipy_special():
    """scipy.special, or None without SciPy (its entries are then left out)."""
    try:
        import scipy.special
    except ImportError:  # pragma: no cover - SciPy is a test dependency
        return None
    return scipy.special


SPECIAL = scipy_special()


# ------------------------------------------------------------------------ the table

OP_DB: list[OpInfo] = [
    # arithmetic ufuncs
    binary("add", np.add, dtypes=FLOAT + INT),
    binary("subtract", np.subtract, dtypes=FLOAT + INT),
    binary("multiply", np.multiply, dtypes=FLOAT + INT),
    binary("divide", np.divide, domain=(ANY, NONZERO), dtypes=FLOAT + INT),
    binary("true_divide", np.true_divide, domain=(ANY, NONZERO)),
    binary("floor_divide", np.floor_divide, domain=(ANY, NONZERO), dtypes=FLOAT + INT, differentiable=False),
    binary("remainder", np.remainder, domain=(ANY, NONZERO), dtypes=FLOAT + INT),
    binary("mod", np.mod, domain=(ANY, NONZERO)),
    binary("power", np.power, domain=(Domain(0.5, 2.0), ANY)),
    binary("power_int", np.power, domain=(Domain(-3, 3), Domain(0, 3)), dtypes=INT, differentiable=False),
    elementwise("negative", np.negative, dtypes=FLOAT + INT),
    elementwise("positive", np.positive, dtypes=FLOAT + INT),
    elementwise("reciprocal", np.reciprocal, domain=NONZERO),
    elementwise("square", np.square, dtypes=FLOAT + INT),
    # comparisons and logic (discrete values, so that ties occur)
    *(
        binary(name, fn, domain=SMALL_INTS, dtypes=FLOAT + INT + BOOL, differentiable=False)
        for name, fn in [
            ("equal", np.equal),
            ("not_equal", np.not_equal),
            ("less", np.less),
            ("less_equal", np.less_equal),
            ("greater", np.greater),
            ("greater_equal", np.greater_equal),
            ("logical_and", np.logical_and),
            ("logical_or", np.logical_or),
            ("logical_xor", np.logical_xor),
        ]
    ),
    elementwise("logical_not", np.logical_not, domain=SMALL_INTS, dtypes=BOOL + FLOAT, differentiable=False),
    # exponentials and logarithms
    elementwise("exp", np.exp, domain=Domain(-3.0, 3.0)),
    elementwise("exp2", np.exp2, domain=Domain(-3.0, 3.0)),
    elementwise("expm1", np.expm1, domain=Domain(-3.0, 3.0)),
    elementwise("log", np.log, domain=POSITIVE),
    elementwise("log2", np.log2, domain=POSITIVE),
    elementwise("log10", np.log10, domain=POSITIVE),
    elementwise("log1p", np.log1p, domain=Domain(-0.9, 3.0)),
    binary("logaddexp", np.logaddexp),
    # trigonometric and hyperbolic
    elementwise("sin", np.sin),
    elementwise("cos", np.cos),
    elementwise("tan", np.tan, domain=Domain(-1.2, 1.2)),
    elementwise("arcsin", np.arcsin, domain=UNIT_OPEN),
    elementwise("arccos", np.arccos, domain=UNIT_OPEN),
    elementwise("arctan", np.arctan),
    binary("arctan2", np.arctan2, domain=(ANY, NONZERO)),
    elementwise("sinh", np.sinh),
    elementwise("cosh", np.cosh),
    elementwise("tanh", np.tanh),
    elementwise("arcsinh", np.arcsinh),
    elementwise("arccosh", np.arccosh, domain=Domain(1.1, 3.0)),
    elementwise("arctanh", np.arctanh, domain=UNIT_OPEN),
    binary("hypot", np.hypot, domain=(NONZERO, ANY)),
    # roots, signs, rounding
    elementwise("sqrt", np.sqrt, domain=POSITIVE),
    elementwise("cbrt", np.cbrt, domain=NONZERO),
    elementwise("abs", np.abs, domain=NONZERO, dtypes=FLOAT + INT),
    elementwise("absolute", np.absolute, domain=NONZERO),
    elementwise("fabs", np.fabs, domain=NONZERO),
    elementwise("sign", np.sign, dtypes=FLOAT + INT, differentiable=False),
    elementwise("floor", np.floor, domain=Domain(-3.0, 3.0), differentiable=False),
    elementwise("ceil", np.ceil, domain=Domain(-3.0, 3.0), differentiable=False),
    elementwise("rint", np.rint, domain=Domain(-3.0, 3.0), differentiable=False),
    elementwise("trunc", np.trunc, domain=Domain(-3.0, 3.0), differentiable=False),
    binary("copysign", np.copysign, domain=(ANY, NONZERO)),
    # extrema
    binary("maximum", np.maximum, dtypes=FLOAT + INT),
    binary("minimum", np.minimum, dtypes=FLOAT + INT),
    binary("fmax", np.fmax, domain=SOME_NAN),
    binary("fmin", np.fmin, domain=SOME_NAN),
    # floating-point classes
    elementwise("isnan", np.isnan, domain=NAN_AND_INF, differentiable=False),
    elementwise("isfinite", np.isfinite, domain=NAN_AND_INF, differentiable=False),
    elementwise("isinf", np.isinf, domain=NAN_AND_INF, differentiable=False),
    # Python operators (NumPy's ndarray operators reach the tracer through ufuncs)
    operator("add", lambda x, y: x + y, dtypes=FLOAT + INT),
    operator("subtract", lambda x, y: x - y),
    operator("multiply", lambda x, y: x * y),
    operator("divide", lambda x, y: x / y, domain=(ANY, NONZERO)),
    operator("floor_divide", lambda x, y: x // y, domain=(ANY, NONZERO), differentiable=False),
    operator("remainder", lambda x, y: x % y, domain=(ANY, NONZERO)),
    operator("power", lambda x, y: x**y, domain=(Domain(0.5, 2.0), ANY)),
    operator("less", lambda x, y: x < y, domain=SMALL_INTS, differentiable=False),
    operator("equal", lambda x, y: x == y, domain=SMALL_INTS, differentiable=False),
    elementwise("operator_negative", lambda x: -x, dtypes=FLOAT + INT),
    elementwise("operator_abs", abs, domain=NONZERO),
    # selection
    OpInfo("where", np.where, where_samples, dtypes=FLOAT + INT, domain=(ANY, ANY, ANY)),
    OpInfo("clip", np.clip, clip_samples, dtypes=FLOAT + INT, domain=(ANY, LOWER, UPPER)),
    # reductions
    reduction("sum", np.sum, dtypes=FLOAT + INT),
    reduction("prod", np.prod, domain=NEAR_ONE),
    reduction("mean", np.mean, dtypes=FLOAT + INT),
    reduction("var", np.var, calls=WITH_DDOF),
    reduction("std", np.std, calls=WITH_DDOF),
    reduction("max", np.max, dtypes=FLOAT + INT),
    reduction("amax", np.amax),
    reduction("min", np.min, dtypes=FLOAT + INT),
    reduction("amin", np.amin),
    reduction("argmax", np.argmax, calls=ARG_REDUCTIONS, dtypes=FLOAT + INT, differentiable=False),
    reduction("argmin", np.argmin, calls=ARG_REDUCTIONS, dtypes=FLOAT + INT, differentiable=False),
    reduction("any", np.any, domain=Domain(-1, 1, discrete=True), dtypes=BOOL + FLOAT, differentiable=False),
    reduction("all", np.all, domain=Domain(-1, 1, discrete=True), dtypes=BOOL + FLOAT, differentiable=False),
    reduction("cumsum", np.cumsum, calls=CUMULATIVE, dtypes=FLOAT + INT),
    reduction("cumprod", np.cumprod, calls=CUMULATIVE, domain=NEAR_ONE),
    reduction("median", np.median),
    reduction("nansum", np.nansum, nans=True),
    reduction("nanprod", np.nanprod, domain=NEAR_ONE, nans=True),
    reduction("nanmean", np.nanmean, nans=True),
    reduction("nanvar", np.nanvar, calls=WITH_DDOF, nans=True),
    reduction("nanstd", np.nanstd, calls=WITH_DDOF, nans=True),
    reduction("nanmax", np.nanmax, nans=True),
    reduction("nanmin", np.nanmin, nans=True),
    reduction("nanargmax", np.nanargmax, calls=ARG_REDUCTIONS, nans=True, differentiable=False),
    reduction("nanargmin", np.nanargmin, calls=ARG_REDUCTIONS, nans=True, differentiable=False),
    reduction("nancumsum", np.nancumsum, calls=CUMULATIVE, nans=True),
    reduction("nancumprod", np.nancumprod, calls=CUMULATIVE, domain=NEAR_ONE, nans=True),
    reduction("nanmedian", np.nanmedian, nans=True),
    # shapes
    fixed(
        "reshape",
        np.reshape,
        [
            ((A(2, 3), (6,)), {}),
            ((A(2, 3), (3, -1)), {}),
            ((A(6),), {"shape": (1, 2, 3)}),
            ((A(),), {"shape": (1,)}),
            ((A(1),), {"shape": ()}),
            ((A(2, 3, 4),), {"shape": (4, -1)}),
        ],
        dtypes=FLOAT + INT,
    ),
    fixed(
        "reshape_method",
        lambda x: x.reshape(-1, x.shape[-1]),
        [((A(4),), {}), ((A(3, 4),), {}), ((A(2, 3, 4),), {})],
    ),
    fixed(
        "transpose",
        np.transpose,
        [
            ((A(),), {}),
            ((A(4),), {}),
            ((A(3, 4),), {}),
            ((A(2, 3, 4),), {}),
            ((A(2, 3, 4),), {"axes": (1, 0, 2)}),
            ((A(2, 3, 4), (2, 0, 1)), {}),
            ((A(2, 3, 4),), {"axes": (-1, 0, 1)}),
        ],
        dtypes=FLOAT + INT,
    ),
    fixed("transpose_method", lambda x, axes: x.transpose(axes), [((A(2, 3, 4),), {"axes": (2, 0, 1)})]),
    fixed("T", lambda x: x.T, [((A(3, 4),), {}), ((A(2, 3, 4),), {}), ((A(4),), {})]),
    fixed(
        "moveaxis",
        np.moveaxis,
        [
            ((A(2, 3, 4), 0, -1), {}),
            ((A(2, 3, 4), (0, 1), (2, 0)), {}),
            ((A(3, 4),), {"source": -1, "destination": 0}),
            ((A(4), 0, 0), {}),
        ],
    ),
    fixed(
        "expand_dims",
        np.expand_dims,
        [
            ((A(3, 4),), {"axis": 0}),
            ((A(3, 4),), {"axis": -1}),
            ((A(3, 4),), {"axis": (0, 2)}),
            ((A(),), {"axis": 0}),
            ((A(4),), {"axis": (0, -1)}),
        ],
    ),
    fixed(
        "squeeze",
        np.squeeze,
        [
            ((A(1, 3, 1),), {}),
            ((A(1, 3, 1),), {"axis": 0}),
            ((A(1, 3, 1),), {"axis": (0, 2)}),
            ((A(1, 3, 1),), {"axis": -1}),
            ((A(1),), {}),
            ((A(3, 4),), {}),
        ],
    ),
    fixed(
        "broadcast_to",
        np.broadcast_to,
        [
            ((A(3), (2, 3)), {}),
            ((A(1, 3),), {"shape": (4, 3)}),
            ((A(), (2, 2)), {}),
            ((A(3, 1), (2, 3, 4)), {}),
            ((A(2, 3), (2, 3)), {}),
        ],
    ),
    OpInfo("concatenate", lambda x, y, **kw: np.concatenate([x, y], **kw), concatenate_samples, domain=(ANY, ANY)),
    OpInfo(
        "concatenate_three",
        lambda x, y, z, **kw: np.concatenate((x, y, z), **kw),
        functools.partial(
            three_array_samples, calls=[(((2, 3), (1, 3), (2, 3)), {}), (((3, 1), (3, 2), (3, 1)), {"axis": 1})]
        ),
        domain=(ANY, ANY, ANY),
    ),
    OpInfo("stack", lambda x, y, **kw: np.stack([x, y], **kw), stack_samples, domain=(ANY, ANY)),
    OpInfo(
        "stack_three",
        lambda x, y, z, **kw: np.stack((x, y, z), **kw),
        functools.partial(three_array_samples, calls=[(((3,), (3,), (3,)), {"axis": -1})]),
        domain=(ANY, ANY, ANY),
    ),
    fixed(
        "pad",
        np.pad,
        [
            ((A(3, 4), 1), {}),
            ((A(3, 4), ((1, 2), (0, 1))), {"mode": "constant", "constant_values": 1.5}),
            ((A(3, 4), ((1, 0), (2, 1))), {"constant_values": ((1, 2), (3, 4))}),
            ((A(4), (2, 1)), {"mode": "edge"}),
            ((A(2, 3, 4), ((0, 0), (1, 1), (2, 0))), {"mode": "edge"}),
        ],
    ),
    fixed(
        "roll",
        np.roll,
        [
            ((A(5), 2), {}),
            ((A(3, 4), -1), {"axis": 1}),
            ((A(3, 4), 1), {}),
            ((A(2, 3, 4), (1, 2)), {"axis": (0, -1)}),
            ((A(3, 4), 5), {"axis": 0}),
        ],
    ),
    fixed(
        "flip",
        np.flip,
        [
            ((A(5),), {}),
            ((A(3, 4),), {"axis": 0}),
            ((A(3, 4),), {"axis": -1}),
            ((A(2, 3, 4),), {"axis": (0, 2)}),
            ((A(2, 3, 4),), {}),
        ],
    ),
    fixed(
        "sliding_window_view",
        np.lib.stride_tricks.sliding_window_view,
        [
            ((A(6), 3), {}),
            ((A(3, 5), 2), {"axis": -1}),
            ((A(4, 5), (2, 3)), {}),
            ((A(4, 5),), {"window_shape": (2, 2), "axis": (1, 0)}),
            ((A(2, 3, 4), 2), {"axis": 1}),
        ],
    ),
    fixed(
        "diff",
        np.diff,
        [
            ((A(5),), {}),
            ((A(5),), {"n": 2}),
            ((A(3, 4),), {"axis": 0}),
            ((A(3, 4),), {"n": 2, "axis": -1}),
            ((A(2, 3, 4),), {"axis": 1}),
        ],
    ),
    OpInfo("gradient", np.gradient, gradient_samples, domain=(ANY, Domain(0.5, 10.0))),
    # indexing with static keys
    getitem("int", 1, [(3, 4), (4,)]),
    getitem("negative_int", -1, [(3, 4), (2, 3, 4)]),
    getitem("slice", slice(1, None), [(4,), (3, 4)]),
    getitem("negative_step", slice(None, None, -1), [(4,), (3, 4)]),
    getitem("strided", (slice(None, None, 2), slice(-1, 0, -2)), [(5, 4)]),
    getitem(
        "slice_none_ellipsis_negative_step",
        (slice(1, None), None, Ellipsis, slice(None, None, -1)),
        [(3, 4), (3, 2, 4)],
    ),
    getitem("ellipsis_int", (Ellipsis, 0), [(4,), (3, 4), (2, 3, 4)]),
    getitem("int_ellipsis_int", (0, Ellipsis, 1), [(3, 4), (2, 3, 4)]),
    getitem("none", None, [(), (3, 4)]),
    getitem("empty_tuple", (), [(), (3, 4)]),
    getitem("ellipsis", Ellipsis, [(), (3,)]),
    # indexing with integer arrays (batched or not, like any array)
    OpInfo(
        "getitem_int_array",
        lambda x, i: x[i],
        functools.partial(take_samples, calls=[((5,), [((3,), 5)]), ((4, 3), [((2, 2), 4)]), ((4, 3), [((), 4)])]),
        dtypes=FLOAT + INT,
        domain=(ANY, ANY),
        integer_index_args=(1,),
        index_into_first_arg=True,
        strict_ok=False,  # the array API standard has no index arrays beside slices, nor fancy setitem
    ),
    OpInfo(
        "getitem_slice_int_array",
        lambda x, i: x[:, i],
        functools.partial(take_samples, calls=[((3, 5), [((4,), 5)]), ((2, 5, 3), [((2,), 5)])]),
        domain=(ANY, ANY),
        integer_index_args=(1,),
        index_into_first_arg=True,
        strict_ok=False,  # the array API standard has no index arrays beside slices, nor fancy setitem
    ),
    OpInfo(
        "getitem_two_int_arrays",
        lambda x, i, j: x[i, j],
        functools.partial(take_samples, calls=[((4, 5), [((3,), 4), ((3,), 5)]), ((4, 5), [((3, 1), 4), ((2,), 5)])]),
        domain=(ANY, ANY, ANY),
        integer_index_args=(1, 2),
        index_into_first_arg=True,
        strict_ok=False,  # the array API standard has no index arrays beside slices, nor fancy setitem
    ),
    OpInfo(
        "getitem_int_arrays_around_slice",
        lambda x, i, j: x[i, :, j],  # separated advanced indices: NumPy puts their dims first
        functools.partial(take_samples, calls=[((4, 3, 5), [((2,), 4), ((2,), 5)])]),
        domain=(ANY, ANY, ANY),
        integer_index_args=(1, 2),
        index_into_first_arg=True,
        strict_ok=False,  # the array API standard has no index arrays beside slices, nor fancy setitem
    ),
    # functional setitem and in-place update on a copy
    setitem("slice", slice(1, None), [((4, 3), (3,)), ((4, 3), (3, 3)), ((4,), ()), ((4, 3), SCALAR)]),
    setitem("int", 1, [((4, 3), (3,)), ((4,), ()), ((4,), SCALAR)]),
    setitem("ellipsis_int", (Ellipsis, 0), [((3, 4), (3,)), ((2, 3, 4), (3,))]),
    setitem("negative_step", slice(None, None, -2), [((5, 2), (3, 2)), ((5,), SCALAR)]),
    OpInfo(
        "setitem_int_array",
        setitem_index,
        setitem_index_samples,
        dtypes=FLOAT + INT,
        domain=(ANY, ANY, ANY),
        integer_index_args=(1,),
        writes_into_first_arg=True,
        strict_ok=False,  # the array API standard has no index arrays beside slices, nor fancy setitem
    ),
    OpInfo(
        "inplace_add",
        inplace_add,
        functools.partial(setitem_samples, calls=[((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 4), ()), ((3, 4), SCALAR)]),
        dtypes=FLOAT + INT,
        domain=(ANY, ANY),
        writes_into_first_arg=True,
    ),
    # linear algebra
    einsum(
        [
            ("ij,jk->ik", ((3, 4), (4, 5))),
            ("ii->i", ((3, 3),)),
            ("ij->", ((3, 4),)),
            ("ij->ji", ((3, 4),)),
            ("bij,bjk->bik", ((2, 3, 4), (2, 4, 5))),
            ("i,i->", ((4,), (4,))),
            ("ij,j->i", ((3, 4), (4,))),
            ("i,j->ij", ((3,), (4,))),
            ("...ij,...jk->...ik", ((2, 3, 4), (4, 5))),
            ("ij,jk", ((3, 4), (4, 5))),
        ]
    ),
    *(
        fixed(
            name,
            fn,
            [
                ((A(3, 4), A(4, 5)), {}),
                ((A(4), A(4, 5)), {}),
                ((A(3, 4), A(4)), {}),
                ((A(4), A(4)), {}),
                ((A(2, 3, 4), A(4, 5)), {}),
                ((A(2, 3, 4), A(2, 4, 5)), {}),
                ((A(1, 3, 4), A(2, 4, 2)), {}),
            ],
            **fields,
        )
        for name, fn, fields in [
            ("matmul", np.matmul, {}),
            ("operator_matmul", lambda x, y: x @ y, {"operator_on_first_arg": True}),
        ]
    ),
    fixed(
        "tensordot",
        np.tensordot,
        [
            ((A(3, 4), A(4, 5)), {"axes": 1}),
            ((A(2, 3, 4), A(3, 4, 5)), {}),
            ((A(3, 4), A(5, 3)), {"axes": ([0], [1])}),
            ((A(3), A(2)), {"axes": 0}),
            ((A(2, 3, 4), A(4, 3)), {"axes": ((1, 2), (1, 0))}),
        ],
    ),
    fixed(
        "dot",
        np.dot,
        [
            ((A(4), A(4)), {}),
            ((A(3, 4), A(4, 5)), {}),
            ((A(3, 4), A(4)), {}),
            ((A(2, 3, 4), A(4, 5)), {}),
            ((A(2, 3, 4), A(3, 4, 2)), {}),
            ((A(3, 4), 2.0), {}),
        ],
    ),
    # array creation from a template
    fixed("zeros_like", np.zeros_like, like_calls(), dtypes=FLOAT + INT, differentiable=False),
    fixed("ones_like", np.ones_like, like_calls(), dtypes=FLOAT + INT, differentiable=False),
    fixed("full_like", np.full_like, like_calls(fill=(2,)), dtypes=FLOAT + INT, differentiable=False),
    fixed(
        "full_like_fill_value_kwarg",
        lambda x, **kw: np.full_like(x, **kw),
        [((A(3, 4),), {"fill_value": -1.5}), ((A(3),), {"fill_value": 3, "dtype": np.dtype(np.int64)})],
        differentiable=False,
    ),
    fixed("empty_like", np.empty_like, like_calls(), dtypes=FLOAT + INT, differentiable=False, compare_values=False),
    # dtypes and rounding
    fixed(
        "astype",
        cast,
        [
            ((A(3, 4),), {"dtype": np.dtype(np.float32)}),
            ((A(3),), {"dtype": np.dtype(np.float64)}),
            ((A(),), {"dtype": np.dtype(np.float64)}),
        ],
        dtypes=FLOAT + INT + BOOL,
    ),
    fixed(
        "astype_to_int_and_bool",
        cast,
        [((A(3, 4),), {"dtype": np.dtype(np.int64)}), ((A(3),), {"dtype": np.dtype(np.bool_)})],
        domain=Domain(-3.0, 3.0),
        dtypes=FLOAT + INT,
        differentiable=False,
    ),
    OpInfo(
        "result_type",
        cast_to_result_type,
        result_type_samples,
        dtypes=FLOAT + INT,
        domain=(ANY, ANY),
        operator_on_first_arg=True,  # x.astype: a method of the first argument
    ),
    *(
        fixed(
            name,
            fn,
            [((A(3, 4),), {}), ((A(5),), {"decimals": 2}), ((A(),), {"decimals": 0}), ((A(2, 3),), {"decimals": 1})],
            domain=Domain(-3.0, 3.0),
            differentiable=False,
        )
        for name, fn in [("round", np.round), ("around", np.around), ("round_method", lambda x, **kw: x.round(**kw))]
    ),
    # diagonals and triangles
    fixed(
        "diagonal",
        np.diagonal,
        [
            ((A(3, 4),), {}),
            ((A(4, 3),), {"offset": 1}),
            ((A(3, 4), -1), {}),
            ((A(2, 3, 4),), {"axis1": 1, "axis2": 2}),
            ((A(2, 3, 4),), {"offset": 1, "axis1": 2, "axis2": 0}),
            ((A(3, 3),), {"offset": -2}),
            ((A(2, 3),), {"offset": 5}),
        ],
        dtypes=FLOAT + INT,
    ),
    fixed(
        "trace",
        np.trace,
        [
            ((A(3, 4),), {}),
            ((A(4, 3), 1), {}),
            ((A(2, 3, 4),), {"axis1": 1, "axis2": 2}),
            ((A(2, 3, 4),), {"offset": -1, "axis1": -1, "axis2": 0}),
            ((A(3, 3),), {"dtype": np.dtype(np.float64)}),
        ],
        dtypes=FLOAT + INT,
    ),
    *(
        fixed(
            name,
            fn,
            [((A(3, 4),), {}), ((A(4, 3),), {"k": 1}), ((A(3, 4), -1), {}), ((A(2, 3, 4),), {"k": 2}), ((A(4),), {})],
            dtypes=FLOAT + INT,
        )
        for name, fn in [("tril", np.tril), ("triu", np.triu)]
    ),
    # degree conversions and other ufuncs computed by compositions
    *(
        elementwise(name, fn, dtypes=FLOAT + INT)
        for name, fn in [("deg2rad", np.deg2rad), ("radians", np.radians), ("rad2deg", np.rad2deg), ("degrees", np.degrees)]
    ),
    binary("float_power", np.float_power, domain=(Domain(0.5, 2.0), ANY)),
    binary("heaviside", np.heaviside, domain=(NONZERO, ANY)),
    elementwise("heaviside_ties", lambda x: np.heaviside(x, 0.5), domain=SMALL_INTS, differentiable=False),
    fixed(
        "nan_to_num",
        np.nan_to_num,
        [
            ((A(3, 4),), {}),
            ((A(5),), {"nan": -1.0}),
            ((A(2, 3),), {"posinf": 9.0, "neginf": -9.0}),
            ((A(),), {"nan": 2.0, "posinf": 3.0}),
        ],
        domain=NAN_AND_INF,
    ),
    fixed("nan_to_num_int", np.nan_to_num, [((A(3, 4),), {}), ((A(5),), {"nan": 1.0})], dtypes=INT),
    OpInfo("interp", np.interp, interp_samples, domain=(Domain(-1.0, 4.0), ANY, ANY)),
    # reductions
    reduction("ptp", np.ptp, dtypes=FLOAT + INT),
    OpInfo("average", weighted_average, average_samples, domain=(ANY, POSITIVE)),
    OpInfo(
        "average_returned",
        functools.partial(weighted_average, returned=True),
        average_returned_samples,
        domain=(ANY, POSITIVE),
    ),
    fixed("average_int", np.average, [((A(3, 4),), {}), ((A(3, 4),), {"axis": 0})], dtypes=INT),
    OpInfo("trapezoid", np.trapezoid, trapezoid_samples, domain=(ANY, ANY)),
    masked("sum_where", np.sum, dtypes=FLOAT + INT),
    masked("sum_where_initial", np.sum, initial=1.5),
    masked("prod_where", np.prod, initial=0.5),
    masked("mean_where", np.mean),
    masked("max_where", np.max, initial=-0.5, dtypes=FLOAT + INT),
    masked("min_where", np.min, initial=0.5),
    masked("amax_where", np.amax, initial=-1.0),
    # NumPy's nansum converts a raw (unmapped) array_api_strict input with np.asarray
    masked("nansum_where", np.nansum, nans=True, strict_ok=False),
    # NumPy's own nanmean / nanmax of a plain array with a traced mask call dtype.type(traced)
    # and bool(traced): their masks are fixed here (nansum_where's mapped masks take the same
    # path through the kernels)
    *(
        fixed(
            name,
            lambda x, *, mask, _f=function, **kw: _f(x, where=np.asarray(mask), **kw),
            [
                ((A(3, 4),), {"mask": ((True, False, True, True), (False, False, True, False), (True, True, False, True))}),
                ((A(3, 4),), {"mask": (True, False, False, True), "axis": 1}),
                ((A(2, 3),), {"mask": ((True, False, True), (False, True, True)), "axis": 1, "keepdims": True}),
            ],
            domain=domain,
            strict_ok=False,  # the fixed mask is a NumPy array
        )
        for name, function, domain in [
            ("nanmean_where", np.nanmean, ANY),  # NaNs could empty a slice: a warning and a NaN
            ("nanmax_where", functools.partial(np.nanmax, initial=-0.5), SOME_NAN),
            ("nanmin_where", functools.partial(np.nanmin, initial=0.5), SOME_NAN),
        ]
    ),
    reduction("sum_initial", np.sum, calls=[((3, 4), {"initial": 2.0}), ((3, 4), {"axis": 0, "initial": -1.0})]),
    reduction(
        "max_initial",
        np.max,
        calls=[((3, 4), {"initial": 0.5}), ((3, 4), {"axis": 1, "initial": -0.5, "keepdims": True}), ((5,), {"initial": 9.0})],
        dtypes=FLOAT + INT,
    ),
    reduction("min_initial", np.min, calls=[((3, 4), {"axis": 0, "initial": 0.25})]),
    reduction("prod_initial", np.prod, calls=[((3, 4), {"axis": 1, "initial": 2.0})], domain=NEAR_ONE),
    # searching (integer outputs)
    OpInfo(
        "searchsorted",
        np.searchsorted,
        searchsorted_samples,
        dtypes=FLOAT + INT,
        domain=(ANY, ANY),
        differentiable=False,
    ),
    OpInfo("digitize", np.digitize, digitize_samples, dtypes=FLOAT + INT, domain=(ANY, ANY), differentiable=False),
    OpInfo("unravel_index", np.unravel_index, unravel_index_samples, dtypes=INT, differentiable=False),
    # shapes
    fixed(
        "repeat",
        np.repeat,
        [
            ((A(3), 2), {}),
            ((A(2, 3), 2), {}),
            ((A(2, 3), 3), {"axis": 1}),
            ((A(2, 3),), {"repeats": 2, "axis": -2}),
            ((A(3, 2), [1, 0, 2]), {"axis": 0}),
            ((A(), 3), {}),
        ],
        dtypes=FLOAT + INT,
    ),
    fixed(
        "tile",
        np.tile,
        [((A(3), 2), {}), ((A(2, 3), (2, 1)), {}), ((A(3), (2, 2)), {}), ((A(2, 3, 2), 2), {}), ((A(), (3,)), {})],
        dtypes=FLOAT + INT,
    ),
    fixed(
        "split",
        np.split,
        [((A(6), 3), {}), ((A(4, 6), [1, 4]), {"axis": 1}), ((A(4, 3), 2), {}), ((A(5), [2, 9]), {})],
        dtypes=FLOAT + INT,
    ),
    fixed(
        "array_split",
        np.array_split,
        [((A(7), 3), {}), ((A(3, 5), 2), {"axis": -1}), ((A(4, 2), [1, 3]), {})],
    ),
    # products
    fixed(
        "cross",
        np.cross,
        [
            ((A(3), A(3)), {}),
            ((A(4, 3), A(3)), {}),
            ((A(2, 4, 3), A(4, 3)), {}),
            ((A(3, 4), A(4, 3)), {"axisa": 0}),
            ((A(3, 4), A(3, 4)), {"axis": 0}),
            ((A(4, 3), A(4, 3)), {"axisc": 0}),
        ],
        dtypes=FLOAT + INT,
    ),
    fixed(
        "kron",
        np.kron,
        [((A(2, 3), A(3, 2)), {}), ((A(3), A(2)), {}), ((A(2, 2), A(3)), {}), ((A(2), A(2, 3)), {}), ((A(), A(3)), {})],
        dtypes=FLOAT + INT,
    ),
    # numpy.linalg
    fixed(
        "linalg_qr",
        lambda a: tuple(np.linalg.qr(a)),
        [((A(4, 3),), {}), ((A(3, 3),), {}), ((A(2, 4, 2),), {}), ((A(2, 4),), {})],
    ),
    fixed("linalg_qr_r", np.linalg.qr, [((A(4, 3),), {"mode": "r"}), ((A(3, 5),), {"mode": "r"})]),
    fixed(
        "linalg_pinv",
        np.linalg.pinv,
        [
            ((A(3, 4),), {}),
            ((A(4, 3),), {}),
            ((A(3, 3),), {}),
            ((A(2, 3, 2),), {}),
            ((A(4, 2),), {"rcond": 1e-10}),
            ((A(3, 2),), {"rtol": None}),
        ],
    ),
    fixed(
        "linalg_lstsq",
        lstsq_parts,
        [((A(5, 3), A(5)), {}), ((A(5, 2), A(5, 3)), {}), ((A(3, 4), A(3)), {}), ((A(4, 4), A(4, 2)), {"rcond": None})],
    ),
    fixed(
        "linalg_lstsq_rank",
        lstsq_rank,
        [((A(5, 3), A(5)), {}), ((A(3, 4), A(3, 2)), {})],
        differentiable=False,
    ),
    OpInfo("linalg_matrix_power", np.linalg.matrix_power, matrix_power_samples),
    fixed(
        "linalg_matrix_power_int",
        np.linalg.matrix_power,
        [((A(3, 3), 0), {}), ((A(2, 2), 1), {}), ((A(3, 3), 2), {}), ((A(2, 2, 2), 3), {}), ((A(2, 2), 5), {})],
        domain=SMALL_INTS,
        dtypes=INT,
    ),
    # diagonals
    fixed(
        "diag",
        np.diag,
        [
            ((A(4),), {}),
            ((A(3),), {"k": 1}),
            ((A(3), -2), {}),
            ((A(1),), {"k": 3}),
            ((A(3, 4),), {}),
            ((A(4, 3),), {"k": -1}),
            ((A(3, 4), 2), {}),
        ],
        dtypes=FLOAT + INT,
    ),
    fixed(
        "diagflat",
        np.diagflat,
        [((A(2, 3),), {}), ((A(4),), {"k": -1}), ((A(),), {}), ((A(2, 2),), {"k": 2})],
        dtypes=FLOAT + INT,
    ),
    OpInfo(
        "fill_diagonal",
        fill_diagonal,
        fill_diagonal_samples,
        dtypes=FLOAT + INT,
        domain=(ANY, ANY),
        writes_into_first_arg=True,
        strict_ok=False,  # the array API standard has no fancy setitem (the diagonal's index arrays)
    ),
    # polynomials
    fixed(
        "polyval",
        np.polyval,
        [
            ((A(4), A(3, 2)), {}),
            ((A(1), A(5)), {}),
            ((A(3), A()), {}),
            ((A(3, 2), A(2)), {}),  # 2-D coefficients: one polynomial per column
            ((A(3), 0.5), {}),
        ],
        dtypes=FLOAT + INT,
    ),
    fixed(
        "vander",
        np.vander,
        [((A(4),), {}), ((A(3), 5), {}), ((A(3),), {"N": 2, "increasing": True}), ((A(1),), {}), ((A(3), 0), {})],
        dtypes=FLOAT + INT,
    ),
    # correlation and convolution of vectors
    *(
        fixed(
            name,
            function,
            [
                ((A(5), A(3)), {}),
                ((A(3), A(5)), {}),
                ((A(4), A(4)), {"mode": "same"}),
                ((A(2), A(5)), {"mode": "same"}),
                ((A(5), A(2)), {"mode": "same"}),
                ((A(6), A(2)), {"mode": "valid"}),
                ((A(2), A(4)), {"mode": "valid"}),
                ((A(1), A(3)), {"mode": "full"}),
                ((A(4), A(3)), {"mode": "full"}),
            ],
            dtypes=FLOAT + INT,
        )
        for name, function in [("convolve", np.convolve), ("correlate", np.correlate)]
    ),
    # covariance and correlation coefficients
    fixed(
        "cov",
        np.cov,
        [
            ((A(3, 6),), {}),
            ((A(6),), {}),
            ((A(6, 2),), {"rowvar": False}),
            ((A(5, 1),), {"rowvar": False}),
            ((A(2, 5), A(5)), {}),
            ((A(5, 2), A(5, 3)), {"rowvar": False, "bias": True}),
            ((A(3, 6),), {"ddof": 0}),
            ((A(3, 6),), {"ddof": 2, "fweights": (1, 2, 1, 3, 1, 1)}),
        ],
        dtypes=FLOAT + INT,
    ),
    # computed in float32 (dtype=): rounding far above the derivative tests' tolerances, so
    # float32 inputs only (vmap and array_api_strict)
    *(
        fixed(
            name,
            function,
            [((A(2, 6),), {"dtype": np.dtype(np.float32)}), ((A(5), A(5)), {"dtype": np.dtype(np.float32)}),
             ((A(3, 4),), {"dtype": np.dtype(np.float64)})],
            dtypes=(np.dtype(np.float32),),
        )
        for name, function in [("cov_dtype", np.cov), ("corrcoef_dtype", np.corrcoef)]
    ),
    OpInfo("cov_aweights", cov_weighted, cov_weights_samples, domain=(ANY, POSITIVE)),
    fixed(
        "corrcoef",
        np.corrcoef,
        [
            ((A(3, 6),), {}),
            ((A(6),), {}),  # one variable: c / c
            ((A(6, 2),), {"rowvar": False}),
            ((A(2, 5), A(5)), {}),
        ],
    ),
    # ufuncs with two outputs
    binary("divmod", np.divmod, domain=(ANY, NONZERO), dtypes=FLOAT + INT),
    elementwise("modf", np.modf, domain=Domain(-3.0, 3.0), dtypes=FLOAT + INT),
    elementwise("modf_special_values", np.modf, domain=NAN_AND_INF),
    # np.take from a traced array (NumPy dispatches np.take on its first argument only: a
    # plain table with traced indices is converted, and must raise a TransformError)
    OpInfo(
        "take",
        np.take,
        take_samples_with_axis,
        dtypes=FLOAT + INT,
        domain=(ANY, ANY),
        integer_index_args=(1,),
        index_into_first_arg=True,
        strict_ok=False,  # the array API standard has no index arrays beside slices
    ),
    # scipy.special's ufuncs (left out without SciPy; their impls call SciPy: NumPy and CuPy only)
    *(
        [
            elementwise("scipy_erf", SPECIAL.erf, strict_ok=False),
            elementwise("scipy_erfc", SPECIAL.erfc, strict_ok=False),
            elementwise("scipy_gammaln", SPECIAL.gammaln, domain=POSITIVE, strict_ok=False),
            elementwise("scipy_digamma", SPECIAL.digamma, domain=POSITIVE, strict_ok=False),
            elementwise("scipy_expit", SPECIAL.expit, domain=Domain(-6.0, 6.0), dtypes=FLOAT + INT),
            elementwise("scipy_logit", SPECIAL.logit, domain=Domain(0.05, 0.95)),
        ]
        if SPECIAL is not None
        else []
    ),
]

# ------------------------------------------------- batching and the for-loop oracle


def examples(op: OpInfo, dtype: np.dtype, count: int, seed: int = 0) -> list[list[SampleInput]]:
    """``count`` examples of each sample of ``op``: one list per sample.

    Every example comes from its own generator, so examples differ in value only; the
    shapes, kwargs and static arguments of a sample are the same in all of them.
    """
    per_seed = [op.sample_inputs(np.random.default_rng([seed, k]), np.dtype(dtype)) for k in range(count)]
    return [list(per_sample) for per_sample in zip(*per_seed)]


def array_positions(sample: SampleInput) -> list[int]:
    """Positions of the arguments that the tests batch: the ndarrays."""
    return [j for j, a in enumerate(sample.args) if isinstance(a, np.ndarray)]


def with_arrays(op: OpInfo, sample: SampleInput) -> Callable:
    """``op`` as a function of the sample's arrays only; static args and kwargs are
    closed over, so in_dims needs one entry per array."""
    positions = array_positions(sample)

    def call(*arrays):
        args = list(sample.args)
        for j, array in zip(positions, arrays):
            args[j] = array
        return op.op(*args, **sample.kwargs)

    return call


def stack_outputs(outputs: list) -> Any:
    """The for-loop's result: per-example outputs stacked along a new axis 0
    (componentwise for tuple and list outputs)."""
    if isinstance(outputs[0], (tuple, list)):
        return type(outputs[0])(stack_outputs(list(parts)) for parts in zip(*outputs))
    return np.stack([np.asarray(out) for out in outputs])


def tolerance(dtype: np.dtype) -> float:
    return 1e-6 if np.dtype(dtype) == np.float32 else 1e-12


def assert_same(actual, expected, *, compare_values: bool = True, to_numpy: Callable = np.asarray) -> None:
    """Same structure, shape, dtype and (unless ``compare_values`` is off) values."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)), f"expected a {type(expected).__name__}, got {type(actual).__name__}"
        assert len(actual) == len(expected), f"expected {len(expected)} outputs, got {len(actual)}"
        for a, e in zip(actual, expected):
            assert_same(a, e, compare_values=compare_values, to_numpy=to_numpy)
        return
    actual = to_numpy(actual)
    assert actual.shape == expected.shape, f"shape {actual.shape} != loop's {expected.shape}"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != loop's {expected.dtype}"
    if not compare_values:
        return
    if expected.dtype.kind == "f":
        rtol = tolerance(expected.dtype)
        finite = np.abs(expected[np.isfinite(expected)])
        # reordered sums err relative to the largest term, not to each element
        atol = rtol * (1.0 + (finite.max() if finite.size else 0.0))
        if not np.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True).all():
            np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)
    elif not np.array_equal(actual, expected):
        np.testing.assert_array_equal(actual, expected)


def placements(sample: SampleInput, choices: tuple = (0, -1, None)) -> list[tuple]:
    """Every assignment of ``choices`` to the sample's arrays with one batched at least."""
    return [p for p in itertools.product(choices, repeat=len(array_positions(sample))) if any(d is not None for d in p)]


def report(op, failures, calls, problem="failed"):
    """Fail once for all of ``op``'s failed calls (the first 12 shown), or pass."""
    assert calls, f"{op.name}: no call was checked"
    if failures:
        shown = "\n".join(failures[:12])
        more = f"\n... and {len(failures) - 12} more" if len(failures) > 12 else ""
        pytest.fail(f"{len(failures)} of {calls} calls of {op.name} {problem}:\n{shown}{more}", pytrace=False)
