"""Deferred negation on the backward pass (issue: speed): a contribution ``-g`` (the partial
-1 of ``a - b`` and ``-x``) is not computed; it is subtracted where cotangents sum, and
rules that only move elements (roll, reshape, transpose...) pull it back with the sign
still deferred.  Fewer passes over the data, the same bits.

Oracles: the same backward pass with every ``vjp.signed`` rule taken away (each partial
-1 then computes ``negative(g)``: the formulas as they were), compared bit for bit, signs
of zeros included; the analytic Jacobian of Lorenz-96; central differences.  Kernel calls
are counted by wrapping ``bind``, never timed.
"""
import warnings

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
import labeled_func_kernels as kernels
from labeled_func_kernels import core, elementwise as ew, primitive
from test_kernel_choices import lorenz96, lorenz96_jacobian

X = np.linspace(-1.3, 2.1, 12)


def all_primitives():
    found = set()
    for module in (kernels.core, kernels.elementwise, kernels.special, kernels.shape, kernels.indexing,
                   kernels.reductions, kernels.linalg, kernels.fft, kernels.creation):
        found.update(v for v in vars(module).values() if isinstance(v, primitive.Primitive))
    return found


@pytest.fixture
def unsigned(monkeypatch):
    """A function running its argument with every ``vjp.signed`` removed (``-g`` computed)."""

    def run(func):
        with monkeypatch.context() as patch:
            for prim in all_primitives():
                if prim.vjp is not None and hasattr(prim.vjp, "signed"):
                    patch.delattr(prim.vjp, "signed")
            return func()

    return run


@pytest.fixture
def calls(monkeypatch):
    """(name, shape of the first argument) of every primitive computed on concrete values."""
    seen = []
    bind = primitive.bind

    def recording(prim, args, params):
        if primitive.top_level(args, prim) is None:
            seen.append((prim.name, getattr(args[0], "shape", None) if args else None))
        return bind(prim, args, params)

    monkeypatch.setattr(primitive, "bind", recording)
    return seen


def assert_same_bits(got, expected):
    got, expected = np.ascontiguousarray(got), np.ascontiguousarray(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))


def test_lorenz96_jacrev_computes_no_negation_and_keeps_the_bits(calls, unsigned):
    state = xr.DataArray(8.0 + np.random.default_rng(0).normal(size=30), dims="site")
    jacobian = lf.jacrev(lorenz96)
    calls.clear()
    got = jacobian(state).values
    big = [name for name, shape in calls if shape == (30, 30)]
    np.testing.assert_allclose(got, lorenz96_jacobian(state.values), rtol=1e-14, atol=1e-14)
    # before: negative(g) for the - x term and for the b of a - b (then rolled); the three
    # rolls' cotangents are summed with their roll (add_rolled) where they meet another,
    # the b of a - b subtracted there
    assert "negative" not in big, big
    assert big.count("subtract") + big.count("subtract_inplace") + big.count("add_rolled") == 3, big
    assert big.count("roll") + big.count("add_rolled") == 3, big
    calls.clear()
    before = unsigned(lambda: jacobian(state).values)
    assert [name for name, shape in calls if shape == (30, 30)].count("negative") == 2
    assert_same_bits(got, before)


def differences(x):
    """Every way a -1 partial meets others: a - b, -x, -(-x), rolled, reshaped, transposed,
    broadcast (summed back), two negated contributions to one value, a constant factor."""
    y = np.roll(x - np.sin(x), 2) - x
    z = (-(-x) - x * x).reshape(3, 4).T.reshape(12)
    w = -np.flip(x) - (-x) * 2.0 - np.cos(x)
    column = x[:3, None] - np.exp(x[None, :4])  # broadcast both ways
    return np.sum(y * np.cos(x) + z * 1.5 + w * y) - np.sum(column * column) - np.sum(-x)


def test_the_gradient_keeps_the_bits_and_matches_central_differences(unsigned):
    got = lf.grad(differences)(X)
    assert_same_bits(got, unsigned(lambda: lf.grad(differences)(X)))
    h = 1e-6
    expected = [(differences(X + h * e) - differences(X - h * e)) / (2 * h) for e in np.eye(X.size)]
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


def cancelling(x):
    """Contributions that cancel to zero: the sign of a zero is where -(a + b) and
    (-a) + (-b) differ; the pass must give the bits of the sums as written."""
    return (x - x) - (x - x) * 2.0 + np.roll(-x, 1) - np.roll(-x, 1) - x * 0.0


def two_negated(x):
    """x receives two negated contributions only, g and -g: (-g) + g is 0, -(g - g) is -0."""
    return np.negative(x * 1.0) - x * -1.0


@pytest.mark.parametrize("func", [cancelling, two_negated])
@pytest.mark.parametrize("cotangent", [np.ones(12), np.linspace(-1.0, 1.0, 12), np.where(X > 0, 0.0, -0.0)])
def test_signed_zeros_are_those_of_the_formulas_as_written(func, cotangent, unsigned):
    _, pullback = lf.vjp(func, X)
    (got,) = pullback(cotangent)
    (before,) = unsigned(lambda: lf.vjp(func, X)[1](cotangent))
    assert_same_bits(got, before)
    np.testing.assert_array_equal(got, np.zeros(12))


def test_a_negated_cotangent_reaching_an_input_alone_is_computed(calls):
    _, pullback = lf.vjp(lambda x: -np.roll(x, 1), X)
    calls.clear()  # the backward pass only: the roll moves g, the negation is computed once, at x
    (got,) = pullback(np.ones(12) * 3.0)
    assert_same_bits(got, np.full(12, -3.0))
    assert [name for name, _ in calls] == ["roll", "negative"], calls


def test_complex_values_keep_the_bits(unsigned):
    z = X + 1j * X[::-1]

    def f(z):
        return np.sum(np.abs(np.roll(z, 1) - z * 2.0 - np.conj(z)) ** 2)

    got = lf.grad(f)(z)
    assert_same_bits(got, unsigned(lambda: lf.grad(f)(z)))


@pytest.mark.parametrize("transform", ["hessian", "jacfwd-of-jacrev", "vmap-of-grad"])
def test_higher_order_and_batched_passes_keep_the_bits(transform, unsigned):
    def f(x):
        return np.sum(np.roll(x, 1) * x - np.sin(x) - (x - x ** 3).reshape(3, 4).T.reshape(12))

    def run():
        if transform == "hessian":
            return lf.hessian(f)(X)
        if transform == "jacfwd-of-jacrev":
            return lf.jacfwd(lf.jacrev(f))(X)
        return lf.vmap(lf.grad(f), in_dims=(0,))(np.stack([X, 2 * X]))

    got = run()
    assert_same_bits(got, unsigned(run))
    if transform != "vmap-of-grad":
        analytic = np.diag(-6 * X * (-1) * 0 + 6 * X + np.sin(X))  # d2/dx2 of -sin(x) - (x - x**3): sin x + 6x
        shift = np.roll(np.eye(12), 1, axis=0)
        np.testing.assert_allclose(got, analytic + shift + shift.T, rtol=1e-12, atol=1e-12)


def test_custom_rules_receive_a_computed_cotangent():
    @lf.custom_vjp
    def double(x):
        return 2.0 * x

    def fwd(x):
        return double(x), None

    def bwd(residuals, g):
        assert not isinstance(g, core.Negated)
        return (2.0 * g,)

    double.defvjp(fwd, bwd)
    got = lf.grad(lambda x: np.sum(-double(x) - x))(X)
    np.testing.assert_array_equal(got, np.full(12, -3.0))


def test_subtract_inplace_writes_only_into_an_array_of_its_own_shape_and_dtype():
    x = np.arange(6.0).reshape(2, 3).copy()
    assert ew.subtract_inplace.bind(x, np.ones(3)) is x
    np.testing.assert_array_equal(x, np.arange(6.0).reshape(2, 3) - 1)
    view = np.arange(6.0)[::2]
    assert ew.subtract_inplace.bind(view, 1.0) is not view
    ints = np.arange(3)
    assert ew.subtract_inplace.bind(ints, 0.5) is not ints
    np.testing.assert_array_equal(ew.subtract_inplace.bind(ints, 0.5), np.arange(3) - 0.5)


def decay(x, p):
    """A per-example factor against a field, subtracted: the -1 meets a partial (p) smaller
    than the cotangent, and another (x) of its size."""
    return np.sum(np.cos(x) - p * x - p * np.sqrt(x))


def test_a_negation_meeting_a_smaller_partial_negates_the_partial(calls, unsigned):
    x, p = np.abs(X) + 0.1, np.array([0.7])
    calls.clear()
    got = lf.grad(decay, argnums=(0, 1))(x, p)
    signed_calls = list(calls)
    calls.clear()
    before = unsigned(lambda: lf.grad(decay, argnums=(0, 1))(x, p))
    for a, b in zip(got, before):
        assert_same_bits(a, b)
    # -(g * p) is g * (-p): p negated (one element), never the cotangent for x's product;
    # before, each product computed -g twice (for x and for p's sum), once more than unsigned
    assert signed_calls.count(("negative", (1,))) == 2, signed_calls
    assert signed_calls.count(("negative", (12,))) <= calls.count(("negative", (12,))), (signed_calls, calls)
    np.testing.assert_allclose(got[0], -np.sin(x) - p - p * 0.5 / np.sqrt(x), rtol=1e-14)
    np.testing.assert_allclose(got[1], [-np.sum(x) - np.sum(np.sqrt(x))], rtol=1e-14)


@pytest.mark.parametrize("p", [np.array([np.inf]), np.array([-np.inf]), np.array([np.nan]), np.array([2.0])])
def test_an_infinite_smaller_partial_keeps_zero_cotangents_zero_with_the_same_bits(p, unsigned):
    x = np.abs(X) + 0.1

    def f(x):
        return np.cos(x) - p * x

    cotangent = np.where(X > 0, 0.0, 1.5)
    def pull(x, cotangent):
        return lf.vjp(f, x)[1](cotangent)[0]

    jitted = lf.jit(pull)
    with warnings.catch_warnings():  # the masked 0 * inf is nobody's business, replayed or not
        warnings.simplefilter("error", RuntimeWarning)
        got = pull(x, cotangent)
        replays = [jitted(x, cotangent) for _ in range(2)]  # the trace, then a replay
    for replayed in replays:
        np.testing.assert_array_equal(np.isnan(replayed), np.isnan(got))
        assert_same_bits(replayed[~np.isnan(got)], got[~np.isnan(got)])
    (before,) = unsigned(lambda: lf.vjp(f, x)[1](cotangent))
    nan = np.isnan(before)  # the same NaNs; a NaN's sign bit means nothing (NumPy keeps an operand's)
    np.testing.assert_array_equal(np.isnan(got), nan)
    assert_same_bits(got[~nan], before[~nan])
    zero = cotangent == 0
    np.testing.assert_array_equal(got[zero], 0.0)  # 0 * inf is NaN; a zero cotangent stays zero
    np.testing.assert_allclose(got[~zero], (-np.sin(x) - p)[~zero] * 1.5, rtol=1e-15)


def test_two_negated_cotangents_of_one_value_are_summed_in_place_with_the_bits_of_the_formula(calls, unsigned):
    # x is the subtrahend twice: its cotangents -(2 - x) and -(1 - x) are summed into a
    # temporary of the pass's own (subtract_inplace), as (-(2 - x)) - (1 - x)
    x = np.linspace(-1.5, 2.5, 9)
    loss = lambda x: ((1.0 - x) * (2.0 - x)).sum()  # noqa: E731
    got = lf.grad(loss)(x)
    assert ("subtract_inplace", x.shape) in calls
    assert_same_bits(got, -(2.0 - x) - (1.0 - x))
    assert_same_bits(got, unsigned(lambda: lf.grad(loss)(x)))
