"""The operator table: one entry per NumPy function that the engine batches.

Generic tests run every entry through every transform (vmap vs a for-loop in
``test_ops_vmap.py`` and on ``array_api_strict``; JVP, VJP and their compositions in
``test_ops_grad.py``), in the style of functorch's ``OpInfo``; ``test_op_coverage.py``
checks that the table reaches every primitive and every registered NumPy function and
ufunc. An entry holds the callable, a ``sample_inputs(rng, dtype)`` generator and the
facts the generic tests need: which dtypes to try, whether it is differentiable, where
its inputs must lie, and whether it runs on ``array_api_strict``.

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
COMPLEX = (np.dtype(np.complex128), np.dtype(np.complex64))
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
        value = round(value * 4) / 4 or 0.5
        return complex(value, value / 2) if dtype.kind == "c" else value


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
      its NumPy/CuPy-only table (``einsum`` with a repeated index), or where a sample
      holds a fixed NumPy array (a mask) beside the arrays it maps.
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
    - ``dynamic_shape_args``: positions of the arguments whose values fix the shape of
      the output (``nonzero``, ``unique``, the condition of ``extract``). vmap over a
      mapped one must raise ``DynamicShapeError`` (the policy); grad and jvp, which
      have one concrete primal, must work.
    - ``ad_op``: the function the derivative tests differentiate in place of ``op``
      (same arguments), where ``op``'s own outputs are not differentiable functions of
      all its inputs: ``eigh``/``cholesky`` read one triangle (so ``f(A + A^T)``), and
      eigen- and singular vectors are defined up to sign (so the sign-free products
      ``v_ij v_kj``). The vmap tests run ``op``.
    - ``holomorphic``: for complex entries, whether the op is a holomorphic function of its
      complex arguments (exp, matmul, fft; not conj, sign, abs): the derivative tests
      then compare ``jacfwd`` and ``jacrev`` with ``holomorphic=True``.
    - ``known_failures``: ``{suite: reason}`` for a product bug that the entry reveals:
      the suite's tests of the entry are strict xfails (they must fail). A suite is
      ``"vmap"`` (the transform tests of ``test_ops_vmap.py``), ``"array_api_strict"``
      or ``"grad"`` (``test_ops_grad.py``), or one of them with a dtype, ``"vmap:float32"``.
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
    dynamic_shape_args: tuple[int, ...] = ()
    ad_op: Callable | None = None
    holomorphic: bool = True
    known_failures: dict = dataclasses.field(default_factory=dict)

    @property
    def differentiated(self) -> Callable:
        """What the derivative tests differentiate: ``ad_op``, or else ``op``."""
        return self.ad_op or self.op


# --------------------------------------------------------------------------- values


def make_array(rng: np.random.Generator, shape: tuple, dtype: np.dtype, domain: Domain = ANY) -> np.ndarray:
    """An array of ``shape`` and ``dtype`` with values inside ``domain``. Of a complex
    dtype, the real and the imaginary parts are each drawn inside it, then divided by
    sqrt(2) (unless ``discrete``), so that the modulus stays within the domain's bounds
    (``NEAR_ONE`` keeps a long product near 1, ``UNIT_OPEN`` the unit disk)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        part = np.float32 if dtype == np.complex64 else np.float64
        scale = 1.0 if domain.discrete else math.sqrt(0.5)
        values = np.empty(shape, dtype=dtype)
        values.real = make_array(rng, shape, part, domain) * scale
        values.imag = make_array(rng, shape, part, domain) * scale
        return values
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

    def draw(self, rng: np.random.Generator, dtype: np.dtype, domain: Domain) -> np.ndarray:
        return make_array(rng, self.shape, dtype, domain)


# Matrices (stacks of them, on the last two axes unless told) for numpy.linalg. Only
# values are drawn: the shape is the spec's. Each family keeps a margin to where its
# function or its derivative breaks down, far wider than the finite-difference steps of
# the AD tests.


def normal(rng, shape, dtype):
    """Standard normal values; of a complex dtype, in both parts."""
    values = rng.normal(size=shape)
    if np.dtype(dtype).kind == "c":
        values = values + 1j * rng.normal(size=shape)
    return values


class WellConditioned(A):
    """Diagonally dominant in practice: a standard normal matrix plus ``2n`` times a
    diagonal of random signs (invertible, far from singular, a determinant of either
    sign; complex for a complex dtype)."""

    def draw(self, rng, dtype, domain):
        n = self.shape[-1]
        signs = np.where(rng.random(self.shape[:-1]) < 0.5, -1.0, 1.0)
        return (normal(rng, self.shape, dtype) + 2 * n * signs[..., None] * np.eye(n)).astype(dtype)


class SPD(A):
    """Symmetric positive definite: ``M M^T + n I`` (eigenvalues at least ``n``)."""

    def draw(self, rng, dtype, domain):
        m = rng.normal(size=self.shape)
        return (m @ np.swapaxes(m, -1, -2) + self.shape[-1] * np.eye(self.shape[-1])).astype(dtype)


class SymmetricDistinct(A):
    """``Q diag(w) Q^T`` with a random orthogonal ``Q`` and eigenvalues at least 1.1
    apart (eigenvectors, and eigh's derivatives, are well defined)."""

    def draw(self, rng, dtype, domain):
        n = self.shape[-1]
        q, _ = np.linalg.qr(rng.normal(size=self.shape))
        w = 1.5 * np.arange(1.0, n + 1) + rng.uniform(-0.2, 0.2, size=self.shape[:-1])
        return ((q * w[..., None, :]) @ np.swapaxes(q, -1, -2)).astype(dtype)


class DistinctSingular(A):
    """``U diag(s) V^T`` with random orthonormal columns and singular values at least
    1.1 apart, the smallest about 1.5 (singular vectors, the spectral and nuclear norms
    and their derivatives are well defined). The matrices lie on ``axes`` (rows,
    columns), the last two unless told (``norm(x, 2, axis=(2, 0))``)."""

    def __init__(self, *shape: int, axes: tuple[int, int] = (-2, -1)):
        super().__init__(*shape)
        self.axes = axes

    def draw(self, rng, dtype, domain):
        rows, columns = (self.shape[a] for a in self.axes)
        stack = [size for a, size in enumerate(self.shape) if a not in {a % len(self.shape) for a in self.axes}]
        k = min(rows, columns)
        u, _ = np.linalg.qr(rng.normal(size=(*stack, rows, k)))
        v, _ = np.linalg.qr(rng.normal(size=(*stack, columns, k)))
        s = 1.5 * np.arange(1.0, k + 1) + rng.uniform(-0.2, 0.2, size=(*stack, k))
        matrices = (u * s[..., None, :]) @ np.swapaxes(v, -1, -2)
        return np.moveaxis(matrices, (-2, -1), self.axes).astype(dtype)


class DistinctEigen(A):
    """``P B P^-1`` with ``P = I + 0.3 N`` (well conditioned) and eigenvalues at least 1
    apart: complex ones for a complex dtype; for a real one, one complex-conjugate pair
    ``a +- bi`` (``b >= 1``, as a 2x2 rotation block of ``B``) and real ones, so that NumPy's
    eig is complex (as the standard's always is). ``real_spectrum``: real eigenvalues only
    (NumPy's eig is then real)."""

    def __init__(self, *shape: int, real_spectrum: bool = False):
        super().__init__(*shape)
        self.real_spectrum = real_spectrum

    def draw(self, rng, dtype, domain):
        n = self.shape[-1]
        stack = self.shape[:-2]
        p = np.eye(n) + 0.3 * normal(rng, self.shape, dtype)
        w = 1.5 * np.arange(1.0, n + 1) - 2.0 + rng.uniform(-0.2, 0.2, size=(*stack, n))
        b = np.zeros(self.shape, dtype=np.result_type(dtype, np.float64))
        b[..., range(n), range(n)] = w
        if np.dtype(dtype).kind == "c":
            b[..., range(n), range(n)] += 1j * rng.uniform(-1.0, 1.0, size=(*stack, n))
        elif not self.real_spectrum:  # the first two eigenvalues become w_0 +- (1 + u) i
            turn = 1.0 + rng.uniform(0.0, 0.5, size=stack)
            b[..., 1, 1] = b[..., 0, 0]
            b[..., 0, 1], b[..., 1, 0] = turn, -turn
        return (p @ b @ np.linalg.inv(p)).astype(dtype)


def fixed_samples(rng, dtype, *, calls, domain=ANY):
    """Calls given as ``(args, kwargs)``: each ``A(*shape)`` becomes an array drawn
    in ``domain`` (a matrix family of ``A`` draws its own); every other argument (a
    shape, a string, a number) is static."""
    return [
        SampleInput(tuple(a.draw(rng, dtype, domain) if isinstance(a, A) else a for a in args), dict(kwargs))
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
        SampleInput((x(3, 4),), {"axis": (0, 1)}),  # a tuple of axes: a tuple of arrays
        SampleInput((x(3, 4), 2.0, 0.5), {"axis": (1, 0)}),  # one spacing per axis
        SampleInput((x(2, 3, 4), coordinates(4)), {"axis": (-1,), "edge_order": 2}),
        SampleInput((x(3, 2, 4),), {"axis": (-1, 0), "edge_order": 2}),
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
    # shape=: a buffer of another shape from a (mapped) template, torch's new_zeros
    calls += [((A(3),) + fill, {"shape": (3, 3)}), ((A(2, 3),) + fill, {"shape": ()}),
              ((A(4),) + fill, {"shape": 2, "dtype": np.dtype(np.float32)})]
    return calls


def einsum(name, subscripts_and_shapes, **fields):
    calls = [((subscripts,) + tuple(A(*s) for s in shapes), {}) for subscripts, shapes in subscripts_and_shapes]
    return fixed(name, np.einsum, calls, **fields)


def symmetrised(function):
    """``function(A + A^T, ...)``: for the functions that read one triangle (eigh,
    cholesky), a function of every entry, so that finite differences see what the
    derivative rules compute."""
    return lambda a, *args, **kwargs: function(a + np.swapaxes(a, -1, -2), *args, **kwargs)


def sign_free(v):
    """``v_ij v_kj``: eigen- or singular vectors (the columns of ``v``) without their
    arbitrary signs."""
    return np.einsum("...ij,...kj->...ikj", v, v)


def eigh_sign_free(a, **kwargs):
    w, v = np.linalg.eigh(a, **kwargs)
    return w, sign_free(v)


def svd_sign_free(a, **kwargs):
    u, s, vh = np.linalg.svd(a, **kwargs)
    return sign_free(u), s, sign_free(np.swapaxes(vh, -1, -2))


def operator(name, op, *, domain=ANY, dtypes=FLOAT, **fields) -> OpInfo:
    return binary(f"operator_{name}", op, domain=domain, dtypes=dtypes, operator_on_first_arg=True, **fields)


# ------------------------------------------ samples of more NumPy functions (engine/numpy/)


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


def array_samples(rng, dtype, *, calls, domains=None):
    """Calls of arrays only (their shapes, then kwargs), each drawn in its own domain."""
    return [
        SampleInput(tuple(make_array(rng, shape, dtype, domain)
                          for shape, domain in zip(shapes, domains or (ANY,) * len(shapes))), dict(kwargs))
        for shapes, kwargs in calls
    ]


def vstack(x, y, **kwargs):
    return np.vstack([x, y], **kwargs)


def hstack(x, y, **kwargs):
    return np.hstack((x, y), **kwargs)


def dstack(x, y):
    return np.dstack([x, y])


def column_stack(x, y):
    return np.column_stack([x, y])


def partition_segments_sorted(x, kth, axis=-1):
    """np.partition with its parts sorted one by one: the full sort exactly when the
    partition is valid (NumPy leaves the order inside the parts open)."""
    return sorted_segments(np.partition(x, kth, axis=axis), kth, axis)


def argpartition_segments_sorted(x, kth, axis=-1):
    """The values picked by np.argpartition, their parts sorted one by one (as above)."""
    picked = np.take_along_axis(x, np.argpartition(x, kth, axis=axis), axis=axis)
    return sorted_segments(picked, kth, axis)


def sorted_segments(p, kth, axis):
    axis = 0 if axis is None else axis  # a partition of the flattened array
    size = p.shape[axis]
    cuts = sorted({k % size for k in np.atleast_1d(kth).tolist()} | {k % size + 1 for k in np.atleast_1d(kth).tolist()})
    return np.concatenate([np.sort(part, axis=axis) for part in np.split(p, cuts, axis=axis)], axis=axis)


def select_samples(rng, dtype):
    condition = lambda *shape: np.asarray(rng.random(shape) < 0.5)
    x = lambda *shape: make_array(rng, shape, dtype)
    return [
        SampleInput((condition(3, 4), condition(3, 4), x(3, 4), x(3, 4))),
        SampleInput((condition(3, 1), condition(4), x(4), x()), {"default": -1.5}),
        SampleInput((condition(), condition(2, 3), x(2, 3), x(1, 3)), {"default": 2}),
    ]


def select(c1, c2, x, y, **kwargs):
    return np.select([c1, c2], [x, y], **kwargs)


def piecewise_of_values(x):
    """Conditions computed from ``x`` itself (mapped with it), a constant, an "otherwise" function."""
    return np.piecewise(x, [x < -0.5, x > 0.5, abs(x) < 0.1], [lambda v: v * v, np.sin, 0.25, lambda v: 2.0 * v])


def piecewise_with_condition(x, condition):
    """One condition, given as an array (in a list: a bare 2-D one would be a list of rows),
    an "otherwise" function, and an extra argument for both."""
    return np.piecewise(x, [condition], [lambda v, scale: v * v + scale, lambda v, scale: scale * v], 2)


def piecewise_samples(rng, dtype):
    x = lambda *shape: make_array(rng, shape, dtype)
    return [SampleInput((x(3, 4), rng.random((3, 4)) < 0.5)), SampleInput((x(5), rng.random(5) < 0.5)),
            SampleInput((x(), np.asarray(rng.random() < 0.5)))]


def linspace_samples(rng, dtype, *, calls):
    """``(start shape or a number, stop shape or a number, kwargs)``."""
    value = lambda shape: make_array(rng, shape, dtype) if isinstance(shape, tuple) else shape
    return [SampleInput((value(start), value(stop)), dict(kwargs)) for start, stop, kwargs in calls]


def logspace_with_base(start, stop, base, **kwargs):
    return np.logspace(start, stop, base=base, **kwargs)


def histogram_samples(rng, dtype, *, weighted):
    """Values in [-2, 2], with weights in [0.1, 3] where ``weighted``; bins as a count (edges
    from the data, or ``range``) or as edges."""
    a = lambda *shape: make_array(rng, shape, dtype)
    calls = [((20,), {"bins": 4}), ((4, 5), {"bins": 3, "range": (-1.0, 1.5)}),
             ((12,), {"bins": [-1.5, -0.25, 0.5, 1.75]}), ((10,), {"bins": 5, "density": True}),
             ((3, 4), {"bins": (-1.0, 0.0, 2.0), "density": True})]
    return [
        SampleInput((a(*shape),) + ((make_array(rng, shape, dtype, POSITIVE),) if weighted else ()), kwargs)
        for shape, kwargs in calls
    ]


def weighted_histogram(a, weights, **kwargs):
    return np.histogram(a, weights=weights, **kwargs)


def bincount_samples(rng, dtype, *, minlength):
    """Non-negative ints below 5 (and weights in ``dtype``), with ``minlength`` above them."""
    counts = lambda n: rng.integers(0, 5, size=n)
    weights = lambda n: make_array(rng, (n,), dtype)
    extra = {"minlength": minlength} if minlength else {}
    return [SampleInput((counts(8),), extra), SampleInput((counts(6), weights(6)), extra),
            SampleInput((counts(1), weights(1)), extra)]


def bincount(x, weights=None, **kwargs):
    return np.bincount(x, weights, **kwargs)


def branchy(v):
    """A scalar function that branches on the value: what np.vectorize is for."""
    return v * v if v > 0 else 0.5 * v - 1.0


def dot_or_largest(a, b):
    """A function of two core vectors that branches on them."""
    return (a * b).sum() if a.sum() > 0 else a.max()


VECTORIZED = np.vectorize(branchy)
VECTORIZED_SIGNATURE = np.vectorize(dot_or_largest, signature="(n),(n)->()")
VECTORIZED_TWO_OUTPUTS = np.vectorize(lambda a, b: (a * b if a > b else a - b, b), otypes=[np.float64, np.float64])
VECTORIZED_EXCLUDED = np.vectorize(lambda v, power: v**power if v > 0 else -v, excluded={"power"})


def reverse_scaled(row):
    return row[::-1] * np.sum(row)


def self_outer(row):
    return np.outer(row, row)


def apply_along_axis_samples(rng, dtype):
    x = lambda *shape: make_array(rng, shape, dtype)
    return [
        SampleInput((x(3, 4),), {"func1d": reverse_scaled, "axis": 1}),
        SampleInput((x(3, 4),), {"func1d": np.sum, "axis": 0}),
        SampleInput((x(2, 3, 4),), {"func1d": self_outer, "axis": 1}),
        SampleInput((x(5),), {"func1d": reverse_scaled, "axis": -1}),
    ]


def apply_along_axis(x, *, func1d, axis):
    return np.apply_along_axis(func1d, axis, x)


def scipy_special():
    """scipy.special, or None without SciPy (its entries are then left out)."""
    try:
        import scipy.special
    except ImportError:  # pragma: no cover - SciPy is a test dependency
        return None
    return scipy.special


SPECIAL = scipy_special()


SIGNED_ZEROS_AND_SPECIALS = Domain(special_values=(-0.0, 0.0, -np.inf, np.nan))
COUNT_NONZERO = [
    ((), {}),
    ((5,), {}),
    ((3, 4), {"axis": 1}),
    ((3, 4), {"axis": (0, 1), "keepdims": True}),
    ((2, 3, 4), {"axis": -1}),
    ((2, 3, 4), {}),
]
SORTS = [((5,), {}), ((3, 4), {"axis": 0}), ((3, 4), {}), ((2, 3, 4), {"axis": 1}), ((2, 3, 4), {"axis": None})]
UFUNC_REDUCTIONS = [
    ((5,), {}),
    ((3, 4), {"axis": 1}),
    ((3, 4), {"axis": 0, "keepdims": True}),
    ((2, 3, 4), {"axis": (0, 2)}),
    ((2, 3, 4), {"axis": None, "initial": 0.5}),
]


def take_along_axis_samples(rng, dtype):
    x = lambda *shape: make_array(rng, shape, dtype)
    return [
        SampleInput((x(3, 4), integer_index(rng, (3, 2), 4)), {"axis": 1}),
        SampleInput((x(3, 4), integer_index(rng, (5, 4), 3)), {"axis": 0}),
        SampleInput((x(3, 4), integer_index(rng, (1, 4), 3)), {"axis": -2}),
        SampleInput((x(5), integer_index(rng, (3,), 5)), {"axis": 0}),
        SampleInput((x(2, 3), integer_index(rng, (4,), 6)), {"axis": None}),
    ]


QUANTILES = [
    ((5,), 0.3, {}),
    ((3, 4), 0.5, {"axis": 0, "keepdims": True}),
    ((3, 4), 0.7, {"axis": -1}),
    ((2, 3, 4), 1.0, {}),
    ((2, 3, 4), 0.25, {"axis": (0, 2)}),
    ((4,), 0.0, {}),
]
QUANTILE_LEVELS = [
    ((3, 4), (0.1, 0.5, 0.9), {"axis": 1}),
    ((2, 3, 4), [0.25, 0.75], {"axis": (0, 2), "keepdims": True}),
]


def quantile_samples(rng, dtype, *, calls, scale, nans):
    """Levels ``q`` (static) as fractions times ``scale``: 1 for quantile, 100 for percentile."""
    samples = []
    for shape, q, kwargs in calls:
        x = make_array(rng, shape, dtype)
        if nans:
            x = sprinkle_nans(rng, x, kwargs.get("axis"))
        levels = q * scale if isinstance(q, float) else type(q)(v * scale for v in q)
        samples.append(SampleInput((x, levels), dict(kwargs)))
    return samples


def condition_samples(rng, dtype, *, calls):
    """A boolean condition, true at two positions at least, and an array:
    ``(condition_shape, array_shape[, kwargs])``."""
    samples = []
    for condition_shape, shape, *kwargs in calls:
        condition = rng.random(condition_shape) < 0.5
        condition.flat[rng.permutation(condition.size)[:2]] = True
        samples.append(SampleInput((condition, make_array(rng, shape, dtype)), dict(*kwargs)))
    return samples


# numpy.fft calls: default lengths, shorter (cropped) and longer (zero-padded) ones,
# every norm, axes other than the last
FFT_1D = [
    ((A(8),), {}),
    ((A(7),), {"norm": "ortho"}),
    ((A(3, 5),), {"n": 4, "axis": 0}),
    ((A(3, 5),), {"n": 8, "norm": "forward"}),
    ((A(2, 3, 4),), {"axis": 1, "n": 3, "norm": "ortho"}),
]
FFT_2D = [
    ((A(4, 6),), {}),
    ((A(2, 3, 4),), {"s": (4, 3), "axes": (-1, 0), "norm": "ortho"}),
    ((A(3, 4, 2),), {"axes": (0, 2), "norm": "forward"}),
    ((A(2, 5, 4),), {"s": (6, 3), "axes": (1, 2)}),
]
FFT_ND = [
    ((A(2, 3, 4),), {}),
    ((A(3, 4),), {"s": (5,), "axes": (0,), "norm": "ortho"}),
    ((A(2, 3, 4),), {"s": (3, 2, 6), "axes": (2, 0, 1), "norm": "forward"}),
    ((A(3, 5),), {"axes": (1, 0)}),
]
FFT_SHIFTS = [((A(5),), {}), ((A(4, 5),), {"axes": 0}), ((A(2, 3, 4),), {"axes": (0, 2)}), ((A(3, 4),), {"axes": -1})]

# ------------------------------------------------------------------------ the table

OP_DB: list[OpInfo] = [
    # arithmetic ufuncs
    binary("add", np.add, dtypes=FLOAT + INT + COMPLEX),
    binary("subtract", np.subtract, dtypes=FLOAT + INT + COMPLEX),
    binary("multiply", np.multiply, dtypes=FLOAT + INT + COMPLEX),
    binary("divide", np.divide, domain=(ANY, NONZERO), dtypes=FLOAT + INT + COMPLEX),
    binary("true_divide", np.true_divide, domain=(ANY, NONZERO)),
    binary("floor_divide", np.floor_divide, domain=(ANY, NONZERO), dtypes=FLOAT + INT, differentiable=False),
    binary("remainder", np.remainder, domain=(ANY, NONZERO), dtypes=FLOAT + INT),
    binary("mod", np.mod, domain=(ANY, NONZERO)),
    binary("power", np.power, domain=(Domain(0.5, 2.0), ANY), dtypes=FLOAT + COMPLEX),
    binary("power_int", np.power, domain=(Domain(-3, 3), Domain(0, 3)), dtypes=INT, differentiable=False),
    elementwise("negative", np.negative, dtypes=FLOAT + INT + COMPLEX),
    elementwise("positive", np.positive, dtypes=FLOAT + INT),
    elementwise("reciprocal", np.reciprocal, domain=NONZERO, dtypes=FLOAT + COMPLEX),
    elementwise("square", np.square, dtypes=FLOAT + INT + COMPLEX),
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
    elementwise("exp", np.exp, domain=Domain(-3.0, 3.0), dtypes=FLOAT + COMPLEX),
    elementwise("exp2", np.exp2, domain=Domain(-3.0, 3.0)),
    elementwise("expm1", np.expm1, domain=Domain(-3.0, 3.0), dtypes=FLOAT + COMPLEX),
    elementwise("log", np.log, domain=POSITIVE, dtypes=FLOAT + COMPLEX),
    elementwise("log2", np.log2, domain=POSITIVE),
    elementwise("log10", np.log10, domain=POSITIVE, dtypes=FLOAT + COMPLEX),
    elementwise("log1p", np.log1p, domain=Domain(-0.9, 3.0), dtypes=FLOAT + COMPLEX),
    binary("logaddexp", np.logaddexp),
    binary("logaddexp2", np.logaddexp2),
    # trigonometric and hyperbolic
    elementwise("sin", np.sin, dtypes=FLOAT + COMPLEX),
    elementwise("cos", np.cos, dtypes=FLOAT + COMPLEX),
    elementwise("tan", np.tan, domain=Domain(-1.2, 1.2), dtypes=FLOAT + COMPLEX),
    elementwise("arcsin", np.arcsin, domain=UNIT_OPEN, dtypes=FLOAT + COMPLEX),
    elementwise("arccos", np.arccos, domain=UNIT_OPEN),
    elementwise("arctan", np.arctan),
    binary("arctan2", np.arctan2, domain=(ANY, NONZERO)),
    elementwise("sinh", np.sinh, dtypes=FLOAT + COMPLEX),
    elementwise("cosh", np.cosh, dtypes=FLOAT + COMPLEX),
    elementwise("tanh", np.tanh),
    elementwise("arcsinh", np.arcsinh),
    elementwise("arccosh", np.arccosh, domain=Domain(1.1, 3.0)),
    elementwise("arctanh", np.arctanh, domain=UNIT_OPEN, dtypes=FLOAT + COMPLEX),
    binary("hypot", np.hypot, domain=(NONZERO, ANY)),
    # roots, signs, rounding
    elementwise("sqrt", np.sqrt, domain=POSITIVE, dtypes=FLOAT + COMPLEX),
    elementwise("cbrt", np.cbrt, domain=NONZERO),
    elementwise("abs", np.abs, domain=NONZERO, dtypes=FLOAT + INT),
    elementwise("absolute", np.absolute, domain=NONZERO, dtypes=FLOAT + COMPLEX, holomorphic=False),
    elementwise("fabs", np.fabs, domain=NONZERO),
    elementwise("sign", np.sign, dtypes=FLOAT + INT, differentiable=False),
    # of a complex z: z / |z|, not piecewise constant (a differentiable composition)
    elementwise("sign_complex", np.sign, domain=NONZERO, dtypes=COMPLEX, holomorphic=False),
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
    elementwise("isnan", np.isnan, domain=NAN_AND_INF, dtypes=FLOAT + COMPLEX, differentiable=False),
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
    OpInfo("where", np.where, where_samples, dtypes=FLOAT + INT + COMPLEX, domain=(ANY, ANY, ANY)),
    OpInfo("clip", np.clip, clip_samples, dtypes=FLOAT + INT, domain=(ANY, LOWER, UPPER)),
    OpInfo("select", select, select_samples, dtypes=FLOAT + INT, domain=(ANY, ANY, ANY, ANY)),
    fixed("piecewise_of_values", piecewise_of_values, [((A(3, 4),), {}), ((A(5),), {}), ((A(),), {})]),
    OpInfo("piecewise", piecewise_with_condition, piecewise_samples, dtypes=FLOAT + INT, domain=(ANY, ANY)),
    # Python functions over parts: np.vectorize runs once per example (NumPy's own on each
    # example's values under vmap, a loop over traced elements under grad/jvp)
    elementwise("vectorize", VECTORIZED, dtypes=FLOAT + INT),
    fixed("vectorize_signature", VECTORIZED_SIGNATURE,
          [((A(3, 2), A(2)), {}), ((A(2, 1, 3), A(4, 3)), {}), ((A(3), A(3)), {})]),
    binary("vectorize_two_outputs_otypes", VECTORIZED_TWO_OUTPUTS),
    fixed("vectorize_excluded", VECTORIZED_EXCLUDED, [((A(3, 4),), {"power": 3}), ((A(5),), {"power": 2})]),
    OpInfo("apply_along_axis", apply_along_axis, apply_along_axis_samples),
    # reductions
    reduction("sum", np.sum, dtypes=FLOAT + INT + COMPLEX),
    reduction("prod", np.prod, domain=NEAR_ONE, dtypes=FLOAT + COMPLEX),
    reduction("mean", np.mean, dtypes=FLOAT + INT + COMPLEX),
    reduction("var", np.var, calls=WITH_DDOF, dtypes=FLOAT + COMPLEX),
    reduction("std", np.std, calls=WITH_DDOF, dtypes=FLOAT + COMPLEX),
    reduction("max", np.max, dtypes=FLOAT + INT),
    reduction("amax", np.amax),
    reduction("min", np.min, dtypes=FLOAT + INT),
    reduction("amin", np.amin),
    reduction("argmax", np.argmax, calls=ARG_REDUCTIONS, dtypes=FLOAT + INT, differentiable=False),
    reduction("argmin", np.argmin, calls=ARG_REDUCTIONS, dtypes=FLOAT + INT, differentiable=False),
    reduction("any", np.any, domain=Domain(-1, 1, discrete=True), dtypes=BOOL + FLOAT, differentiable=False),
    reduction("all", np.all, domain=Domain(-1, 1, discrete=True), dtypes=BOOL + FLOAT, differentiable=False),
    reduction("cumsum", np.cumsum, calls=CUMULATIVE, dtypes=FLOAT + INT + COMPLEX),
    reduction("cumprod", np.cumprod, calls=CUMULATIVE, domain=NEAR_ONE, dtypes=FLOAT + COMPLEX),
    reduction("median", np.median),
    reduction("nansum", np.nansum, nans=True, dtypes=FLOAT + COMPLEX),
    reduction("nanprod", np.nanprod, domain=NEAR_ONE, nans=True),
    reduction("nanmean", np.nanmean, nans=True, dtypes=FLOAT + COMPLEX),
    reduction("nanvar", np.nanvar, calls=WITH_DDOF, nans=True, dtypes=FLOAT + COMPLEX),
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
        "rollaxis",
        np.rollaxis,
        [((A(2, 3, 4), 2), {}), ((A(2, 3, 4), 0, 3), {}), ((A(2, 3, 4),), {"axis": -1, "start": 1}),
         ((A(3, 4), 1, 1), {})],
    ),
    fixed("matrix_transpose", np.matrix_transpose, [((A(3, 4),), {}), ((A(2, 3, 4),), {})], dtypes=FLOAT + INT),
    fixed("linalg_matrix_transpose", np.linalg.matrix_transpose, [((A(2, 1, 3, 4),), {}), ((A(4, 4),), {})]),
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
    *(
        OpInfo(name, function, functools.partial(array_samples, calls=calls), dtypes=FLOAT + INT, domain=(ANY, ANY))
        for name, function, calls in [
            ("vstack", vstack, [(((3,), (3,)), {}), (((2, 3), (1, 3)), {}), (((), ()), {}),
                                (((2, 3, 4), (1, 3, 4)), {}), (((3,), (2, 3)), {"dtype": np.dtype(np.float64)})]),
            ("hstack", hstack, [(((3,), (2,)), {}), (((2, 3), (2, 1)), {}), (((), ()), {}),
                                (((2, 3, 4), (2, 1, 4)), {})]),
            ("dstack", dstack, [(((3,), (3,)), {}), (((2, 3), (2, 3)), {}), (((2, 3, 1), (2, 3, 2)), {}),
                                (((), (1,)), {})]),
            ("column_stack", column_stack, [(((3,), (3,)), {}), (((3, 2), (3,)), {}), (((3,), (3, 4)), {}),
                                            (((), ()), {})]),
        ]
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
            # every form of pad_width: (n,), one (before, after) per axis as (n,) or a pair, a dict
            ((A(3, 4), (2,)), {}),
            ((A(2, 3, 4), ((1,), (2,), (0,))), {}),
            ((A(3, 4), [[1, 2]]), {"mode": "edge"}),
            ((A(3, 4), {0: (1, 2)}), {}),
            ((A(2, 3, 4), {-1: 2, 0: (0, 1)}), {"constant_values": -1.0}),
            ((A(3, 4), np.int64(1)), {}),
            ((A(5), (2, 3)), {"mode": "reflect"}),
            ((A(3, 4), ((1, 1), (2, 6))), {"mode": "wrap"}),
            ((A(4, 2), {0: (3, 1)}), {"mode": "symmetric"}),
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
    fixed("flipud", np.flipud, [((A(4),), {}), ((A(3, 4),), {}), ((A(2, 3, 4),), {})], dtypes=FLOAT + INT),
    fixed("fliplr", np.fliplr, [((A(3, 4),), {}), ((A(2, 3, 4),), {})], dtypes=FLOAT + INT),
    fixed(
        "rot90",
        np.rot90,
        [((A(3, 4),), {}), ((A(3, 4), 2), {}), ((A(3, 4), 3), {}), ((A(3, 4), -1), {}), ((A(3, 4), 4), {}),
         ((A(2, 3, 4),), {"k": 1, "axes": (2, 0)}), ((A(2, 3, 4), 3, (1, -1)), {})],
        dtypes=FLOAT + INT,
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
    # contractions
    einsum(
        "einsum",
        [
            ("ij,jk->ik", ((3, 4), (4, 5))),
            ("ij->", ((3, 4),)),
            ("ij->ji", ((3, 4),)),
            ("ijk->kij", ((2, 3, 4),)),
            ("bij,bjk->bik", ((2, 3, 4), (2, 4, 5))),
            ("i,i->", ((4,), (4,))),
            ("ij,j->i", ((3, 4), (4,))),
            ("i,j->ij", ((3,), (4,))),
            ("...ij,...jk->...ik", ((2, 3, 4), (4, 5))),
            ("...ij,...jk->...ik", ((1, 3, 4), (5, 4, 2))),  # size-1 broadcast of the ellipsis
            ("...i,...i", ((2, 3), (3,))),
            ("ij,jk", ((3, 4), (4, 5))),
            ("ijk,kl->jl", ((2, 3, 4), (4, 2))),  # an index summed away in one operand only
            ("ij,kl->i", ((3, 4), (4, 2))),  # an index of each operand summed away
            ("ij,ij->ij", ((1, 3), (2, 3))),  # size-1 broadcast of a labelled axis
            ("ij,jk->ik", ((2, 1), (3, 4))),  # size-1 broadcast of the contracted axis
            ("i,ij,j->", ((3,), (3, 4), (4,))),
        ],
        dtypes=FLOAT + COMPLEX,
    ),
    # a repeated index in one operand (diagonals, traces): NumPy/CuPy only
    einsum(
        "einsum_diagonal",
        [
            ("ii->i", ((3, 3),)),
            ("ii", ((4, 4),)),
            ("ii,ij->ij", ((3, 3), (3, 2))),
            ("iii->i", ((3, 3, 3),)),
        ],
        strict_ok=False,
    ),
    # the sublist form: einsum(a, [0, 1], b, [1, 2], [output])
    fixed(
        "einsum_sublist",
        np.einsum,
        [
            ((A(3, 4), [0, 1], A(4, 5), [1, 2]), {}),
            ((A(3, 4), [0, 1], A(4, 5), [1, 2], [2, 0]), {}),
            ((A(2, 3, 4), [Ellipsis, 1], A(4), [1]), {}),
            ((A(3, 4), [30, 2], A(4, 5), [2, 7], [7, 30]), {}),
            ((A(3, 4), [1, 0]), {}),  # implicit output: the labels sorted, so a transpose
        ],
    ),
    fixed("einsum_sublist_diagonal", np.einsum, [((A(3, 3), [0, 0]), {}), ((A(3, 3), [0, 0], [0]), {})], strict_ok=False),
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
                ((A(2, 1, 3, 4), A(5, 4, 2)), {}),
                ((A(4), A(5, 4, 2)), {}),
                ((A(5, 3, 4), A(4)), {}),
            ],
            **fields,
        )
        for name, fn, fields in [
            ("matmul", np.matmul, {"dtypes": FLOAT + COMPLEX}),
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
            ((A(3, 2, 4), A(2, 5, 3)), {"axes": ([1, 0], [0, 2])}),
        ],
        dtypes=FLOAT + COMPLEX,
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
            ((A(2, 3, 4), A(5, 4, 2)), {}),
            ((A(3, 4), 2.0), {}),
        ],
        dtypes=FLOAT + COMPLEX,
    ),
    fixed(
        "inner",
        np.inner,
        [((A(3, 4), A(2, 4)), {}), ((A(4), A(4)), {}), ((A(2, 3, 4), A(4)), {}), ((A(3), A()), {})],
        dtypes=FLOAT + COMPLEX,
    ),
    fixed("outer", np.outer, [((A(3), A(2, 2)), {}), ((A(3), A(4)), {}), ((A(), A(3)), {})], dtypes=FLOAT + COMPLEX),
    # conj of its first argument: not holomorphic
    fixed("vdot", np.vdot, [((A(3, 2), A(6)), {}), ((A(4), A(4)), {})], dtypes=FLOAT + COMPLEX, holomorphic=False),
    # numpy.linalg: inputs of the matrix families above (see their docstrings)
    fixed(
        "linalg_solve",
        np.linalg.solve,
        [
            ((WellConditioned(4, 4), A(4, 2)), {}),
            ((WellConditioned(4, 4), A(4)), {}),
            ((WellConditioned(2, 3, 3), A(2, 3, 2)), {}),
        ],
        dtypes=FLOAT + COMPLEX,
    ),
    fixed("linalg_inv", np.linalg.inv, [((WellConditioned(4, 4),), {}), ((WellConditioned(2, 3, 3),), {})],
          dtypes=FLOAT + COMPLEX),
    fixed("linalg_det", np.linalg.det, [((WellConditioned(4, 4),), {}), ((WellConditioned(2, 3, 3),), {})],
          dtypes=FLOAT + COMPLEX),
    fixed(
        "linalg_slogdet",
        lambda a: tuple(np.linalg.slogdet(a)),
        [((WellConditioned(4, 4),), {}), ((WellConditioned(2, 3, 3),), {})],
        dtypes=FLOAT + COMPLEX,
        holomorphic=False,  # of a complex matrix, the sign is det / |det|
    ),
    fixed(
        "linalg_cholesky",
        np.linalg.cholesky,
        [((SPD(4, 4),), {}), ((SPD(2, 3, 3),), {"upper": True})],
        ad_op=symmetrised(np.linalg.cholesky),
    ),
    fixed(
        "linalg_eigh",
        lambda a, **kw: tuple(np.linalg.eigh(a, **kw)),
        [((SymmetricDistinct(4, 4),), {}), ((SymmetricDistinct(2, 3, 3),), {})],
        ad_op=symmetrised(eigh_sign_free),
    ),
    # UPLO="U" is computed as UPLO="L" of the transpose: the eigenvectors' signs may differ
    # from NumPy's own on the same input (test_linalg.py), so they are compared sign-free
    fixed(
        "linalg_eigh_upper",
        eigh_sign_free,
        [((SymmetricDistinct(3, 3),), {"UPLO": "U"}), ((SymmetricDistinct(2, 4, 4),), {"UPLO": "U"})],
        ad_op=symmetrised(eigh_sign_free),
    ),
    fixed(
        "linalg_eigvalsh",
        np.linalg.eigvalsh,
        [((SymmetricDistinct(4, 4),), {}), ((SymmetricDistinct(2, 3, 3),), {"UPLO": "U"})],
        ad_op=symmetrised(np.linalg.eigvalsh),
    ),
    # general matrices: complex spectra (of real matrices too, by a conjugate pair); the
    # eigenvectors are normalised as NumPy does (unit norm, largest component real), which is
    # not holomorphic; the eigenvalues are
    fixed(
        "linalg_eig",
        lambda a: tuple(np.linalg.eig(a)),
        [((DistinctEigen(3, 3),), {}), ((DistinctEigen(2, 4, 4),), {})],
        dtypes=FLOAT + COMPLEX,
        holomorphic=False,
    ),
    fixed(
        "linalg_eigvals",
        np.linalg.eigvals,
        [((DistinctEigen(4, 4),), {}), ((DistinctEigen(2, 3, 3),), {})],
        dtypes=FLOAT + COMPLEX,
    ),
    # a real spectrum: NumPy's eig is real, the standard's complex
    fixed(
        "linalg_eig_real_spectrum",
        lambda a: tuple(np.linalg.eig(a)),
        [((DistinctEigen(3, 3, real_spectrum=True),), {}), ((DistinctEigen(2, 4, 4, real_spectrum=True),), {})],
        strict_ok=False,
    ),
    fixed(
        "linalg_svd",
        lambda a, **kw: tuple(np.linalg.svd(a, **kw)),
        [
            ((DistinctSingular(4, 4),), {}),
            ((DistinctSingular(5, 3),), {"full_matrices": False}),
            ((DistinctSingular(3, 5),), {"full_matrices": False}),
            ((DistinctSingular(2, 3, 5),), {"full_matrices": False}),
        ],
        ad_op=svd_sign_free,
    ),
    fixed(
        "linalg_svd_values",
        np.linalg.svd,
        [((DistinctSingular(5, 3),), {"compute_uv": False}), ((DistinctSingular(2, 3, 4),), {"compute_uv": False})],
    ),
    fixed("linalg_svdvals", np.linalg.svdvals, [((DistinctSingular(2, 3, 5),), {}), ((DistinctSingular(4, 4),), {})]),
    # vector and entrywise norms (away from the kinks of |x|)
    fixed(
        "linalg_norm",
        np.linalg.norm,
        [
            ((A(3, 4),), {}),
            ((A(3, 4),), {"axis": 1}),
            ((A(2, 3, 4),), {"axis": -1, "keepdims": True}),
            ((A(5), 2), {}),
            ((A(3, 2, 4), "fro"), {"axis": (0, 2), "keepdims": True}),
            ((A(5), 1), {}),
            ((A(5, 2), np.inf), {"axis": 0}),
            ((A(5), 3), {}),
            ((A(4, 3), 1), {}),
            ((A(4, 3), -np.inf), {"keepdims": True}),
        ],
        domain=NONZERO,
        dtypes=FLOAT + COMPLEX,
    ),
    # norms of the singular values
    fixed(
        "linalg_norm_spectral",
        np.linalg.norm,
        [((DistinctSingular(4, 3), "nuc"), {}), ((DistinctSingular(4, 2, 3, axes=(2, 0)), 2), {"axis": (2, 0)}),
         ((DistinctSingular(2, 4, 3), 2), {"axis": (-1, -2)}),
         ((DistinctSingular(3, 4), -2), {})],
    ),
    # numpy.fft: lengths n / s that crop and that zero-pad, every norm, axes in any order
    *(
        fixed(name, function, calls, dtypes=dtypes)
        for name, function, dtypes, calls in [
            ("fft", np.fft.fft, FLOAT + COMPLEX, FFT_1D),
            ("ifft", np.fft.ifft, FLOAT + COMPLEX, FFT_1D),
            ("rfft", np.fft.rfft, FLOAT, FFT_1D),
            ("irfft", np.fft.irfft, FLOAT + COMPLEX, FFT_1D + [((A(2, 3, 4),), {"n": 6, "norm": "ortho"})]),
            ("hfft", np.fft.hfft, FLOAT + COMPLEX, FFT_1D + [((A(3, 4),), {"n": 5, "axis": 0})]),
            ("ihfft", np.fft.ihfft, FLOAT, FFT_1D),
            ("fft2", np.fft.fft2, FLOAT + COMPLEX, FFT_2D),
            ("ifft2", np.fft.ifft2, FLOAT + COMPLEX, FFT_2D),
            ("rfft2", np.fft.rfft2, FLOAT, FFT_2D),
            ("irfft2", np.fft.irfft2, FLOAT + COMPLEX, FFT_2D),
            ("fftn", np.fft.fftn, FLOAT + COMPLEX, FFT_ND),
            ("ifftn", np.fft.ifftn, FLOAT + COMPLEX, FFT_ND),
            ("rfftn", np.fft.rfftn, FLOAT, FFT_ND),
            ("irfftn", np.fft.irfftn, FLOAT + COMPLEX, FFT_ND),
            ("fftshift", np.fft.fftshift, FLOAT + INT + COMPLEX, FFT_SHIFTS),
            ("ifftshift", np.fft.ifftshift, FLOAT + INT + COMPLEX, FFT_SHIFTS),
        ]
    ),
    # fftfreq takes no array: a constant beside a traced one
    fixed("fftfreq", lambda x: x * np.fft.fftfreq(x.shape[-1], d=0.5) + np.fft.rfftfreq(2 * x.shape[-1] - 2)[0],
          [((A(6),), {}), ((A(3, 5),), {})], dtypes=FLOAT + COMPLEX,
          strict_ok=False),  # the frequencies are a NumPy array
    fixed(
        "linalg_vector_norm",
        np.linalg.vector_norm,
        [
            ((A(3, 4),), {}),
            ((A(2, 3, 4),), {"axis": (0, 2), "keepdims": True}),
            ((A(2, 3, 4),), {"axis": 1, "ord": 1}),
            ((A(5),), {"ord": 3}),
            ((A(3, 4),), {"axis": (1, 0), "ord": np.inf}),
            ((A(),), {"ord": -np.inf}),
            ((A(3, 4),), {"axis": None, "keepdims": True, "ord": 0.5}),
        ],
        domain=NONZERO,
    ),
    fixed(
        "linalg_matrix_norm",
        np.linalg.matrix_norm,
        [((A(3, 4),), {}), ((A(2, 3, 4),), {"keepdims": True}), ((A(4, 3),), {"ord": 1}), ((A(2, 4, 3),), {"ord": -np.inf})],
        domain=NONZERO,
    ),
    fixed(
        "linalg_matrix_norm_spectral",
        np.linalg.matrix_norm,
        [((DistinctSingular(4, 3),), {"ord": "nuc"}), ((DistinctSingular(2, 3, 4),), {"ord": 2, "keepdims": True}),
         ((DistinctSingular(3, 3),), {"ord": -2})],
    ),
    # array creation from a template
    fixed("zeros_like", np.zeros_like, like_calls(), dtypes=FLOAT + INT + COMPLEX, differentiable=False),
    fixed("ones_like", np.ones_like, like_calls(), dtypes=FLOAT + INT + COMPLEX, differentiable=False),
    fixed("full_like", np.full_like, like_calls(fill=(2,)), dtypes=FLOAT + INT + COMPLEX, differentiable=False),
    fixed(
        "full_like_fill_value_kwarg",
        lambda x, **kw: np.full_like(x, **kw),
        [((A(3, 4),), {"fill_value": -1.5}), ((A(3),), {"fill_value": 3, "dtype": np.dtype(np.int64)})],
        differentiable=False,
    ),
    fixed("empty_like", np.empty_like, like_calls(), dtypes=FLOAT + INT + COMPLEX, differentiable=False,
          compare_values=False),
    # evenly spaced samples between (traced) endpoints
    OpInfo(
        "linspace",
        np.linspace,
        functools.partial(linspace_samples, calls=[
            ((), (), {}), ((3,), (), {"num": 4}), ((2, 1), (3,), {"num": 3, "endpoint": False}),
            ((3,), 2.5, {"num": 5, "axis": -1}), ((2,), (2,), {"num": 4, "retstep": True}),
            ((), (), {"num": 1, "retstep": True}), ((), (3,), {"num": 6, "dtype": np.dtype(np.float32)}),
            (-1.5, (2,), {"num": 3, "axis": 1, "endpoint": False, "retstep": True}),
        ]),
        dtypes=FLOAT + INT,
        domain=(ANY, ANY),
    ),
    OpInfo(
        "linspace_int",
        np.linspace,
        functools.partial(linspace_samples, calls=[((), (), {"num": 5, "dtype": np.dtype(np.int64)}),
                                                   ((3,), (), {"num": 4, "dtype": np.dtype(np.int64)})]),
        domain=(ANY, ANY),
        differentiable=False,
    ),
    OpInfo(
        "logspace",
        np.logspace,
        functools.partial(linspace_samples, calls=[
            ((), (), {"num": 4}), ((3,), (), {"num": 3, "base": 2.0}), ((2, 1), (3,), {"num": 3, "endpoint": False, "axis": -1}),
        ]),
        domain=(Domain(-1.0, 1.0), Domain(-1.0, 1.0)),
    ),
    OpInfo(
        "logspace_base",
        logspace_with_base,
        functools.partial(array_samples, calls=[(((3,), (), ()), {"num": 3}), (((2, 1), (3,), (2, 3)), {"num": 4, "axis": 1})],
                          domains=(Domain(-1.0, 1.0), Domain(-1.0, 1.0), Domain(0.5, 3.0))),
        domain=(Domain(-1.0, 1.0), Domain(-1.0, 1.0), Domain(0.5, 3.0)),
    ),
    *(
        OpInfo(
            name,
            np.geomspace,
            functools.partial(array_samples, calls=[
                (((), ()), {"num": 4}), (((3,), ()), {"num": 3, "endpoint": False}),
                (((2, 1), (3,)), {"num": 3, "axis": -1}), (((), ()), {"num": 1}),
            ], domains=(domain, domain)),
            domain=(domain, domain),
        )
        for name, domain in [("geomspace", Domain(0.5, 3.0)), ("geomspace_negative", Domain(-3.0, -0.5))]
    ),
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
        "astype_complex",
        cast,
        [((A(3, 4),), {"dtype": np.dtype(np.complex128)}), ((A(3),), {"dtype": np.dtype(np.complex64)})],
        dtypes=FLOAT + COMPLEX,
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
    elementwise("sinc", np.sinc, domain=Domain(-3.0, 3.0), dtypes=FLOAT + INT),
    # near zero its Taylor polynomial stands in for sin(pi x) / (pi x)
    elementwise("sinc_near_zero", np.sinc, domain=Domain(-0.002, 0.002, special_values=(0.0015, -0.001))),
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
    # histograms: counts are piecewise constant; edges from the data, summed weights and
    # densities carry derivatives
    OpInfo("histogram", np.histogram, functools.partial(histogram_samples, weighted=False)),
    OpInfo("histogram_weighted", weighted_histogram, functools.partial(histogram_samples, weighted=True),
           domain=(ANY, POSITIVE)),
    fixed("histogram_bin_edges", np.histogram_bin_edges,
          [((A(10),), {}), ((A(3, 4),), {"bins": 3}), ((A(6),), {"bins": 4, "range": (-1.0, 2.0)})]),
    # bins="auto" picks the number of bins from the values: fixed by the primal under grad
    fixed("histogram_auto_bins", np.histogram, [((A(30),), {"bins": "auto"}), ((A(16),), {"bins": "sturges"})],
          dynamic_shape_args=(0,)),
    # bincount's length is max(x) + 1: a mapped x needs a minlength above its values
    OpInfo("bincount", bincount, functools.partial(bincount_samples, minlength=None), integer_index_args=(0,),
           dynamic_shape_args=(0,)),
    OpInfo("bincount_minlength", bincount, functools.partial(bincount_samples, minlength=6), integer_index_args=(0,)),
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
    fixed("vsplit", np.vsplit, [((A(4, 3), 2), {}), ((A(5, 2, 2), [1, 3]), {})], dtypes=FLOAT + INT),
    fixed("hsplit", np.hsplit, [((A(6), 3), {}), ((A(2, 4), [1]), {}), ((A(2, 4, 3), 2), {})], dtypes=FLOAT + INT),
    fixed("dsplit", np.dsplit, [((A(2, 2, 4), 2), {}), ((A(1, 2, 5), [2, 3]), {})], dtypes=FLOAT + INT),
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
    # complex conjugates, parts and angles: the ufunc, and the methods (on a real tracer
    # .real and .conj() are itself, .imag a zero); none of them is holomorphic
    elementwise("conjugate", np.conjugate, dtypes=FLOAT + INT + COMPLEX, holomorphic=False),
    elementwise("conj_method", lambda x: x.conj(), dtypes=FLOAT + INT + COMPLEX, holomorphic=False),
    elementwise("real", lambda x: x.real, dtypes=FLOAT + INT + COMPLEX),
    elementwise("imag", lambda x: x.imag, dtypes=FLOAT + INT + COMPLEX),
    elementwise("real_and_imag_functions", lambda x: (np.real(x), np.imag(x)),
                dtypes=(np.dtype(np.float64), np.dtype(np.complex128))),
    # away from the branch cut (the negative real axis) and from 0; of reals 0 or pi
    elementwise("angle", np.angle, domain=POSITIVE, dtypes=FLOAT + INT + COMPLEX),
    elementwise("angle_degrees", lambda z: np.angle(z, deg=True), domain=NONZERO, dtypes=FLOAT + COMPLEX),
    elementwise("angle_special_values", np.angle, domain=SIGNED_ZEROS_AND_SPECIALS, dtypes=FLOAT,
                differentiable=False),
    # bitwise ufuncs and operators (on booleans NumPy's bitwise ufuncs are the logical ones)
    *(
        binary(name, fn, domain=SMALL_INTS, dtypes=INT + BOOL, differentiable=False, **fields)
        for name, fn, fields in [
            ("bitwise_and", np.bitwise_and, {}),
            ("bitwise_or", np.bitwise_or, {}),
            ("bitwise_xor", np.bitwise_xor, {}),
            ("operator_and", lambda x, y: x & y, {"operator_on_first_arg": True}),
            ("operator_or", lambda x, y: x | y, {"operator_on_first_arg": True}),
            ("operator_xor", lambda x, y: x ^ y, {"operator_on_first_arg": True}),
        ]
    ),
    elementwise("invert", np.invert, domain=SMALL_INTS, dtypes=INT + BOOL, differentiable=False),
    elementwise("operator_invert", lambda x: ~x, domain=SMALL_INTS, dtypes=INT + BOOL, differentiable=False),
    elementwise("signbit", np.signbit, domain=SIGNED_ZEROS_AND_SPECIALS, differentiable=False),
    binary("isclose", np.isclose, domain=SMALL_INTS, differentiable=False),  # ties: equal values
    fixed(
        "isclose_options",
        lambda x, y, **kw: np.isclose(x, y, **kw),
        [((A(3, 4), A(3, 4)), {"rtol": 0.5, "atol": 0.25}), ((A(4), A(3, 1)), {"equal_nan": True})],
        domain=SOME_NAN,
        differentiable=False,
    ),
    # promotion of ranks and shapes
    *(
        fixed(
            name,
            function,
            [
                ((A(),), {}),
                ((A(3),), {}),
                ((A(2, 3),), {}),
                ((A(2, 3, 4),), {}),
                ((A(), A(3)), {}),
                ((A(2, 3), A(4), A()), {}),
            ],
            dtypes=FLOAT + INT,
        )
        for name, function in [
            ("atleast_1d", np.atleast_1d),
            ("atleast_2d", np.atleast_2d),
            ("atleast_3d", np.atleast_3d),
        ]
    ),
    fixed(
        "broadcast_arrays",
        np.broadcast_arrays,
        [((A(3, 1), A(4)), {}), ((A(), A(2, 3)), {}), ((A(2, 1, 4), A(3, 1), A()), {}), ((A(3),), {})],
        dtypes=FLOAT + INT,
    ),
    fixed("ravel", np.ravel, [((A(3, 4),), {}), ((A(),), {}), ((A(2, 3, 4),), {})], dtypes=FLOAT + INT),
    fixed("swapaxes", np.swapaxes, [((A(3, 4), 0, 1), {}), ((A(2, 3, 4), -1, 0), {}), ((A(2, 3, 4), 1, 1), {})]),
    fixed("copy", np.copy, [((A(3, 4),), {}), ((A(),), {})], dtypes=FLOAT + INT),
    fixed(
        "astype_function",
        np.astype,  # its dtype is positional-only
        [((A(3, 4), np.dtype(np.float32)), {}), ((A(3), np.dtype(np.float64)), {}), ((A(), np.dtype(np.float64)), {})],
        dtypes=FLOAT + INT,
    ),
    # questions about shapes and dtypes (answered per example: the logical shape)
    fixed("shape", lambda x: np.reshape(x, np.shape(x)[::-1]), [((A(3, 4),), {}), ((A(2, 3, 4),), {}), ((A(),), {})]),
    fixed("ndim", lambda x: x * np.ndim(x), [((A(3, 4),), {}), ((A(),), {})], dtypes=FLOAT + INT),
    fixed("size", lambda x, *axis: x * np.size(x, *axis), [((A(3, 4),), {}), ((A(2, 3, 4), 1), {}), ((A(),), {})]),
    fixed(
        "iscomplexobj_isrealobj",
        lambda x: (x + 1 if np.iscomplexobj(x) else x - 1) * (2 if np.isrealobj(x) else 3),
        [((A(3, 4),), {}), ((A(),), {})],
        dtypes=FLOAT + INT,
    ),
    fixed(
        "can_cast",
        lambda x, to: x * int(np.can_cast(x, to)),
        [((A(3), np.dtype(np.float32)), {}), ((A(3), np.dtype(np.float64)), {}), ((A(2, 3), np.dtype(np.int64)), {})],
        dtypes=FLOAT + INT,
    ),
    fixed(
        "can_cast_and_result_type_of_a_scalar_type",
        lambda x: x.astype(np.result_type(x, np.float32)) * int(np.can_cast(x, np.float32)),
        [((A(3),), {}), ((A(2, 3),), {})],
        dtypes=(np.dtype(np.float64),),
    ),
    # counting, sorting and order statistics
    reduction(
        "count_nonzero",
        np.count_nonzero,
        calls=COUNT_NONZERO,
        domain=Domain(-1, 1, discrete=True),
        dtypes=FLOAT + INT + BOOL,
        differentiable=False,
    ),
    reduction("sort", np.sort, calls=SORTS),
    reduction("sort_ties", np.sort, calls=SORTS, dtypes=INT, domain=SMALL_INTS),
    reduction("argsort", np.argsort, calls=SORTS, differentiable=False),
    # ties, in the stable order (NumPy's default sort is not stable)
    reduction("argsort_stable_ties", functools.partial(np.argsort, kind="stable"), calls=SORTS, dtypes=FLOAT + INT,
              domain=SMALL_INTS, differentiable=False),
    # partitions, with their parts sorted one by one (NumPy leaves the order inside them open)
    *(
        fixed(
            name,
            function,
            [((A(6), 2), {}), ((A(3, 5), [1, 3]), {}), ((A(4, 3), -1), {"axis": 0}), ((A(2, 3, 4), (0, 2)), {"axis": None})],
        )
        for name, function in [("partition", partition_segments_sorted), ("argpartition", argpartition_segments_sorted)]
    ),
    OpInfo(
        "take_along_axis",
        np.take_along_axis,
        take_along_axis_samples,
        dtypes=FLOAT + INT,
        domain=(ANY, ANY),
        integer_index_args=(1,),
    ),
    *(
        OpInfo(
            name + suffix,
            function,
            functools.partial(quantile_samples, calls=calls, scale=scale, nans=nans),
            domain=(SOME_NAN if nans else ANY,),
        )
        for name, function, scale, nans in [
            ("quantile", np.quantile, 1, False),
            ("nanquantile", np.nanquantile, 1, True),
            ("percentile", np.percentile, 100, False),
            ("nanpercentile", np.nanpercentile, 100, True),
        ]
        for suffix, calls in [("", QUANTILES), ("_levels", QUANTILE_LEVELS)]
        if not suffix or name in ("quantile", "nanpercentile")  # one handler serves the four
    ),
    # ufunc methods: reduce with options, and the plain reduce and accumulate
    *(
        reduction(f"{ufunc.__name__}_reduce", ufunc.reduce, calls=UFUNC_REDUCTIONS, nans=nans, dtypes=dtypes)
        for ufunc, nans, dtypes in [
            (np.add, False, FLOAT + INT),
            (np.multiply, False, FLOAT),
            (np.maximum, False, FLOAT + INT),
            (np.minimum, False, FLOAT),
            (np.fmax, True, FLOAT),
            (np.fmin, True, FLOAT),
        ]
    ),
    masked("add_reduce_where", np.add.reduce),
    masked("maximum_reduce_where", np.maximum.reduce, initial=-0.5),
    masked("fmin_reduce_where", np.fmin.reduce, initial=0.5, nans=True),
    *(
        fixed(f"{ufunc.__name__}_reduce_no_options", ufunc.reduce, [((A(3, 4),), {}), ((A(2, 3, 4),), {})],
              domain=Domain(-1, 1, discrete=True), dtypes=BOOL + FLOAT, differentiable=False)
        for ufunc in (np.logical_and, np.logical_or)
    ),
    *(
        fixed(f"{ufunc.__name__}_accumulate", ufunc.accumulate, [((A(4),), {}), ((A(3, 4),), {})], domain=NEAR_ONE)
        for ufunc in (np.add, np.multiply)
    ),
    # NumPy hands the axis of ufunc.accumulate and ufunc.reduce to __array_ufunc__ as a keyword
    *(
        fixed(
            name,
            function,
            [((A(3, 4),), {"axis": 1}), ((A(2, 3, 4),), {"axis": -1})],
            domain=Domain(-1, 1, discrete=True),
            dtypes=dtypes,
            differentiable=differentiable,
        )
        for name, function, dtypes, differentiable in [
            ("add_accumulate_axis", np.add.accumulate, (np.dtype(np.float64),), True),
            ("logical_or_reduce_axis", np.logical_or.reduce, BOOL, False),
        ]
    ),
    # data-dependent shapes: under vmap a policy error where the values that fix the shape
    # are mapped; a fixed condition (a static tuple) picks from a mapped array
    *(
        fixed(name, function, [((A(3, 4),), {}), ((A(5),), {}), ((A(2, 1, 3),), {})], domain=SMALL_INTS,
              dtypes=FLOAT + INT + BOOL, differentiable=False, dynamic_shape_args=(0,))
        for name, function in [("nonzero", np.nonzero), ("argwhere", np.argwhere), ("flatnonzero", np.flatnonzero)]
    ),
    *(
        # continuous values: no ties, so that finite differences keep the output's shape
        fixed(name, function, [((A(3, 4),), {}), ((A(5),), {}), *extra], dtypes=FLOAT, dynamic_shape_args=(0,))
        for name, function, extra in [
            ("unique", np.unique, [((A(2, 3),), {"return_index": True, "return_inverse": True, "return_counts": True}),
                                   ((A(3, 2),), {"axis": 0})]),
            ("unique_values", np.unique_values, []),
            ("unique_counts", lambda x: tuple(np.unique_counts(x)), []),
            ("unique_inverse", lambda x: tuple(np.unique_inverse(x)), []),
            ("unique_all", lambda x: tuple(np.unique_all(x)), []),
        ]
    ),
    fixed(
        "unique_ties",
        lambda x: tuple(np.unique_all(x)),
        [((A(3, 4),), {}), ((A(6),), {})],
        domain=SMALL_INTS,
        dtypes=INT,
        differentiable=False,
        dynamic_shape_args=(0,),
    ),
    OpInfo(
        "extract",
        np.extract,
        functools.partial(condition_samples, calls=[((3, 4), (3, 4)), ((5,), (5,)), ((2, 3), (6,))]),
        dtypes=FLOAT + INT,
        domain=(ANY, ANY),
        dynamic_shape_args=(0,),
    ),
    OpInfo(
        "compress",
        np.compress,
        functools.partial(
            condition_samples,
            calls=[((4,), (3, 4), {"axis": 1}), ((3,), (3, 2), {"axis": 0}), ((5,), (6,), {}), ((2,), (2, 3))],
        ),
        dtypes=FLOAT + INT,
        domain=(ANY, ANY),
        dynamic_shape_args=(0,),
    ),
    fixed(
        "extract_fixed_condition",
        lambda x, *, condition: np.extract(np.asarray(condition), x),
        [
            ((A(3, 4),), {"condition": ((True, False, True, True), (False, False, True, False), (True, True, False, True))}),
            ((A(5),), {"condition": (False, True, True, False, True)}),
        ],
        dtypes=FLOAT + INT,
        strict_ok=False,  # the fixed condition is a NumPy array
    ),
    fixed(
        "compress_fixed_condition",
        lambda x, *, condition, **kw: np.compress(np.asarray(condition), x, **kw),
        [((A(3, 4),), {"condition": (True, False, True, True), "axis": 1}),
         ((A(3, 2),), {"condition": (False, True, True), "axis": 0}),
         ((A(2, 3),), {"condition": (False, True, True, False)})],
        dtypes=FLOAT + INT,
        strict_ok=False,  # the fixed condition is a NumPy array
    ),
    fixed(
        "trim_zeros",
        # zeros written by a fixed mask stay zeros under finite differences
        lambda x, *, zeros, **kw: np.trim_zeros(np.where(np.asarray(zeros), 0.0, x), **kw),
        [
            ((A(6),), {"zeros": (True, False, True, False, False, True)}),
            ((A(5),), {"zeros": (True, True, False, False, True), "trim": "f"}),
            ((A(5),), {"zeros": (False, True, False, True, True), "trim": "b"}),
            ((A(3, 4),), {"zeros": ((True,) * 4, (True, False, True, True), (False, True, True, True))}),
        ],
        dynamic_shape_args=(0,),
        strict_ok=False,  # the fixed mask is a NumPy array
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
            elementwise("scipy_gamma", SPECIAL.gamma, domain=Domain(0.5, 3.0), strict_ok=False),
            elementwise("scipy_loggamma", SPECIAL.loggamma, domain=POSITIVE, strict_ok=False),
            elementwise("scipy_erfinv", SPECIAL.erfinv, domain=UNIT_OPEN, strict_ok=False),
            elementwise("scipy_erfcinv", SPECIAL.erfcinv, domain=Domain(0.1, 1.9), strict_ok=False),
            elementwise("scipy_ndtr", SPECIAL.ndtr, domain=Domain(-3.0, 3.0), strict_ok=False),
            elementwise("scipy_ndtri", SPECIAL.ndtri, domain=Domain(0.05, 0.95), strict_ok=False),
            elementwise("scipy_log_ndtr", SPECIAL.log_ndtr, domain=Domain(-4.0, 3.0), strict_ok=False),
            *(elementwise(f"scipy_{name}", getattr(SPECIAL, name), domain=Domain(-3.0, 3.0), strict_ok=False)
              for name in ("i0", "i0e", "i1", "i1e")),
            elementwise("scipy_i1_at_zero", SPECIAL.i1, domain=Domain(special_values=(0.0,)), strict_ok=False),
            binary("scipy_beta", SPECIAL.beta, domain=(Domain(0.5, 3.0), Domain(0.5, 3.0)), strict_ok=False),
            binary("scipy_betaln", SPECIAL.betaln, domain=(POSITIVE, POSITIVE), strict_ok=False),
            binary("scipy_xlogy", SPECIAL.xlogy, domain=(Domain(-2.0, 2.0, special_values=(0.0,)), POSITIVE),
                   strict_ok=False),
            binary("scipy_xlog1py", SPECIAL.xlog1py, domain=(Domain(-2.0, 2.0, special_values=(0.0,)), Domain(-0.5, 2.0)),
                   strict_ok=False),
            # differentiable in x only (the derivative in a has no closed form): a held fixed
            *(fixed(f"scipy_{name}", lambda x, *, a, _f=getattr(SPECIAL, name): _f(a, x),
                    [((A(3, 4),), {"a": 0.7}), ((A(5),), {"a": 2.5}), ((A(),), {"a": 1.0})], domain=POSITIVE,
                    strict_ok=False)
              for name in ("gammainc", "gammaincc")),
            # a mapped too (float32 only: the grad tests would differentiate a, which raises)
            *(binary(f"scipy_{name}_mapped_a", getattr(SPECIAL, name), domain=(POSITIVE, POSITIVE),
                     dtypes=(np.dtype(np.float32),), strict_ok=False)
              for name in ("gammainc", "gammaincc")),
        ]
        if SPECIAL is not None
        else []
    ),
]

# Entries kept by family in their own modules (built with this module's helpers, imported
# here once the helpers exist), so that every generic test reaches them.
from opinfo_elementwise import ENTRIES as _MORE_ELEMENTWISE  # noqa: E402
from opinfo_linalg import ENTRIES as _MORE_LINALG  # noqa: E402
from opinfo_misc import ENTRIES as _MORE_MISC  # noqa: E402
from opinfo_shapes import ENTRIES as _MORE_SHAPES  # noqa: E402
from opinfo_special import ENTRIES as _MORE_SPECIAL  # noqa: E402

OP_DB += _MORE_ELEMENTWISE + _MORE_SHAPES + _MORE_LINALG + _MORE_SPECIAL + _MORE_MISC

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


def with_arrays(op: OpInfo, sample: SampleInput, function: Callable | None = None) -> Callable:
    """``op`` (or ``function``, e.g. ``op.differentiated``) as a function of the sample's
    arrays only; static args and kwargs are closed over, so in_dims needs one entry per array."""
    positions = array_positions(sample)
    function = function or op.op

    def call(*arrays):
        args = list(sample.args)
        for j, array in zip(positions, arrays):
            args[j] = array
        return function(*args, **sample.kwargs)

    return call


def stack_outputs(outputs: list) -> Any:
    """The for-loop's result: per-example outputs stacked along a new axis 0
    (componentwise for tuple and list outputs)."""
    if isinstance(outputs[0], (tuple, list)):
        return type(outputs[0])(stack_outputs(list(parts)) for parts in zip(*outputs))
    return np.stack([np.asarray(out) for out in outputs])


def tolerance(dtype: np.dtype) -> float:
    return 1e-6 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12


def assert_same(actual, expected, *, compare_values: bool = True, to_numpy: Callable = np.asarray,
                rtol: float | None = None) -> None:
    """Same structure, shape, dtype and (unless ``compare_values`` is off) values, to
    ``rtol`` (default: by the expected dtype, :func:`tolerance`)."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)), f"expected a {type(expected).__name__}, got {type(actual).__name__}"
        assert len(actual) == len(expected), f"expected {len(expected)} outputs, got {len(actual)}"
        for a, e in zip(actual, expected):
            assert_same(a, e, compare_values=compare_values, to_numpy=to_numpy, rtol=rtol)
        return
    actual = to_numpy(actual)
    assert actual.shape == expected.shape, f"shape {actual.shape} != loop's {expected.shape}"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != loop's {expected.dtype}"
    if not compare_values:
        return
    if expected.dtype.kind in "fc":
        rtol = rtol or tolerance(expected.dtype)
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


def case(op, suite, dtype=None, id=None):
    """The pytest parameter of ``op`` (and ``dtype``) in ``suite``: a strict xfail where
    ``op.known_failures`` names the suite (or the suite and the dtype)."""
    reason = op.known_failures.get(f"{suite}:{np.dtype(dtype).name}") if dtype is not None else None
    reason = reason or op.known_failures.get(suite)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    values = (op,) if dtype is None else (op, dtype)
    return pytest.param(*values, id=id or (op.name if dtype is None else f"{op.name}-{dtype.name}"), marks=marks)


def report(op, failures, calls, problem="failed"):
    """Fail once for all of ``op``'s failed calls (the first 12 shown), or pass."""
    assert calls, f"{op.name}: no call was checked"
    if failures:
        shown = "\n".join(failures[:12])
        more = f"\n... and {len(failures) - 12} more" if len(failures) > 12 else ""
        pytest.fail(f"{len(failures)} of {calls} calls of {op.name} {problem}:\n{shown}{more}", pytrace=False)
