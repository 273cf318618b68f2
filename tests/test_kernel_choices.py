"""The kernels a rule chooses: cheaper ones must give NumPy's values and the same
derivatives (issue: speed, part 1).

- Small integer and one-half exponents are computed by products, sqrt and reciprocals;
  the values stay within a few ulps of NumPy's ``power`` (special values exactly as
  NumPy gives them), for Python and 0-d exponents, and derivatives of every order stay
  finite where the calculus says they are (d/dx x**1 = 1 at x = 0, not NaN).
"""
import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func_kernels import elementwise as ew

SPECIAL = np.array([-np.inf, -3.5, -1.0, -0.0, 0.0, 1e-3, 0.7, 1.0, 2.5, 1e150, np.inf, np.nan])
EXPONENTS = [-2, -1, 0, 0.5, 1, 2, 3, 4, -2.0, 3.0, 4.0]


@pytest.mark.parametrize("exponent", EXPONENTS, ids=repr)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_small_powers_match_numpy(exponent, dtype):
    with np.errstate(all="ignore"):
        x = SPECIAL.astype(dtype)  # 1e150 is inf in float32
        expected = np.power(x, exponent)
        got = ew.power.bind(x, exponent)
        got_0d = ew.power.bind(x, np.asarray(exponent, dtype=dtype))  # a 0-d constant of x's dtype
    for value in (got, got_0d):
        assert value.dtype == expected.dtype
        np.testing.assert_array_equal(np.isnan(value), np.isnan(expected))
        finite = np.isfinite(expected)
        np.testing.assert_array_equal(value[~finite], expected[~finite])
        np.testing.assert_allclose(value[finite], expected[finite], rtol=4 * np.finfo(dtype).eps, atol=0)


def test_a_0d_exponent_that_promotes_keeps_numpys_dtype():
    x = np.linspace(-2.0, 2.0, 5, dtype=np.float32)
    got = ew.power.bind(x, np.float64(2.0))  # a NumPy float64 scalar is not weak: float64 result
    expected = np.power(x, np.float64(2.0))
    assert got.dtype == expected.dtype == np.float64
    np.testing.assert_allclose(got, expected, rtol=1e-15)


def test_integer_bases_keep_numpys_integer_power():
    x = np.arange(-3, 4)
    np.testing.assert_array_equal(ew.power.bind(x, 3), np.power(x, 3))
    assert ew.power.bind(x, 3).dtype == np.power(x, 3).dtype


@pytest.mark.parametrize("exponent", [1.0, 2.0, 3.0, 4.0, 0.5])
def test_per_sample_power_derivatives_match_calculus(exponent):
    x = xr.DataArray(np.linspace(0.1, 3.0, 7), dims="sample")
    first = lf.vmap(lf.grad(lambda v: v ** exponent), dim="sample")(x)
    second = lf.vmap(lf.grad(lf.grad(lambda v: v ** exponent)), dim="sample")(x)
    np.testing.assert_allclose(first.values, exponent * x.values ** (exponent - 1), rtol=1e-13)
    np.testing.assert_allclose(second.values, exponent * (exponent - 1) * x.values ** (exponent - 2), rtol=1e-13)


@pytest.mark.parametrize("exponent", [2, 2.0])
def test_the_derivative_of_a_square_is_a_product_not_a_power(exponent, monkeypatch):
    """d/dx x**2 is 2 x: no ``x ** 1`` (a copy of x, one pass more) in the backward pass."""
    powers, power = [], ew.power.impl
    monkeypatch.setattr(ew.power, "impl", lambda x, y: powers.append(y) or power(x, y))
    x = np.linspace(-2.0, 2.0, 9)
    got = lf.grad(lambda v: (v ** exponent).sum())(x)
    np.testing.assert_array_equal(got, 2 * x)
    assert powers == [exponent]  # the forward's own square only


@pytest.mark.parametrize("exponent", [1.0, np.array([1.0, 2.0, 3.0])], ids=["python", "array"])
def test_second_derivative_of_a_power_at_zero_is_finite(exponent):
    """d2/dx2 x**y = y (y - 1) x**(y - 2): 0 at x = 0 for y = 1 and y >= 2 (the rule's
    x**(y - 1) of y = 1 is constant, and its own derivative must not read 0 * 0**-1)."""
    x = xr.DataArray(np.zeros(3), dims="i")
    with np.errstate(all="ignore"):  # 0**-1 is inf where y = 0: masked by the rule
        hessian = lf.hessian(lambda v: (v ** exponent).sum())(x)
        gradient = lf.grad(lambda v: (v ** exponent).sum())(x)
    y = np.broadcast_to(exponent, (3,))
    np.testing.assert_array_equal(np.diagonal(hessian.values), np.where(y == 2, 2.0, 0.0))
    np.testing.assert_array_equal(gradient.values, np.where(y == 1, 1.0, 0.0))


# --- slices and joins: cheaper transposes, the same values and derivatives ----------------------------
SITES = xr.DataArray(np.linspace(-1.0, 2.0, 7) ** 2 + 0.5, dims="site")


def lorenz96(x):
    return (x.roll(site=-1) - x.roll(site=2)) * x.roll(site=1) - x + 8.0


def lorenz96_jacobian(x):
    m = x.size
    rows = np.arange(m)
    jac = np.zeros((m, m))
    np.add.at(jac, (rows, (rows + 1) % m), x[(rows - 1) % m])
    np.add.at(jac, (rows, (rows - 2) % m), -x[(rows - 1) % m])
    np.add.at(jac, (rows, (rows - 1) % m), x[(rows + 1) % m] - x[(rows - 2) % m])
    np.add.at(jac, (rows, rows), -1.0)
    return jac


@pytest.mark.parametrize("transform", [lf.jacrev, lf.jacfwd])
def test_jacobians_through_xarray_roll_match_the_closed_form(transform):
    np.testing.assert_allclose(transform(lorenz96)(SITES).values, lorenz96_jacobian(SITES.values), rtol=1e-14,
                               atol=1e-14)


@pytest.mark.parametrize("pieces", [
    lambda a: [a[-2:], a[:-2]],             # a rotation (xarray's roll)
    lambda a: [a[3:], a[:3]],
    lambda a: [a[4:], a[:2], a[2:4]],       # three pieces, cyclic
    lambda a: [a[2:], a[:1]],               # not a rotation: an element missing
    lambda a: [a[1:], a[:-1]],              # overlapping pieces
    lambda a: [a[:3], a[3:]],               # the identity
    lambda a: [a[::2], a[1::2]],            # strided pieces
], ids=["roll", "roll-3", "three-pieces", "missing", "overlap", "identity", "strided"])
def test_joined_slices_have_numpys_values_and_derivatives(pieces):
    x = SITES.values
    expected_value = np.concatenate(pieces(x))
    weights = np.arange(1.0, expected_value.size + 1)

    def loss(a):
        return (np.concatenate(pieces(a)) ** 2 * weights).sum()

    gradient, value = lf.grad_and_value(lambda d: xr.DataArray(loss(d.data)))(SITES)
    np.testing.assert_allclose(float(value), (expected_value ** 2 * weights).sum(), rtol=1e-14)
    # the derivative, by central differences
    h = 1e-6
    expected = np.array([(loss(x + h * e) - loss(x - h * e)) / (2 * h) for e in np.eye(x.size)])
    np.testing.assert_allclose(gradient.values, expected, rtol=1e-7, atol=1e-8)
    # and per example under vmap(grad), against the loop
    batch = np.stack([x, 2 * x, x[::-1]])
    per_sample = lf.vmap(lf.grad(loss), in_dims=(0,))(batch)
    loop = np.stack([lf.grad(loss)(row) for row in batch])
    np.testing.assert_allclose(per_sample, loop, rtol=1e-14)


@pytest.mark.parametrize("key", [
    (slice(1, 4),), (2,), (slice(None), 1), (Ellipsis, slice(-3, None)), (None, slice(2, 5)),
    (slice(5, 2),), (-1, slice(None, 2)),
], ids=repr)
def test_the_transpose_of_a_slice_puts_the_cotangent_back(key):
    """d/dx sum(w * x[key]) is w where key reads, 0 elsewhere (a pad of w)."""
    x = np.arange(24.0).reshape(4, 6) / 7
    w = np.random.default_rng(0).normal(size=x[key].shape)
    gradient = lf.grad(lambda a: (a[key] * w).sum())(x)
    expected = np.zeros_like(x)
    expected[key] = w.reshape(expected[key].shape)
    np.testing.assert_array_equal(gradient, expected)


def test_all_finite_of_a_large_array_decides_as_isfinite_does():
    from labeled_func_kernels.backend import all_finite
    rng = np.random.default_rng(14)
    x = rng.normal(size=(300, 40))
    assert all_finite(x)
    huge = np.full(5000, 1e308)  # the sum overflows: the exact test says finite
    assert all_finite(huge)
    for bad in (np.inf, -np.inf, np.nan):
        y = x.copy()
        y[123 // 40, 123 % 40] = bad
        assert not all_finite(y)
    mixed = np.full(5000, 1.0)
    mixed[[7, 9]] = [np.inf, -np.inf]  # inf - inf: a NaN sum, not finite
    assert not all_finite(mixed)
    assert not all_finite(x.T.copy(order="F").T * np.where(np.arange(40) == 3, np.nan, 1.0))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("size", [1, 99, 8_192, 8_193, 40_000])  # either side of the dot product's threshold
def test_both_all_finites_decide_as_isfinite_does_by_either_sum(size, dtype):
    """The eager kernels' all_finite and the replay's: a sum of squares (small arrays) or a
    sum (large ones) that stays finite says so; an overflowing one leaves it to isfinite."""
    from labeled_func.engine import replay
    from labeled_func_kernels import backend
    rng = np.random.default_rng(size)
    finite = (rng.normal(size=size) * 3).astype(dtype)
    big = np.full(size, np.finfo(dtype).max / 2, dtype)  # squares (and, for two or more, sums) overflow
    cases = [finite, big, finite[::-1], finite.reshape(1, -1)[:, ::2]]  # a reversed and a strided view too
    for bad in (np.inf, -np.inf, np.nan):
        y = finite.copy()
        y[size // 2] = bad
        cases.append(y)
    if size > 1:
        mixed = finite.copy()
        mixed[:2] = [np.inf, -np.inf]  # inf - inf: a NaN sum
        cases.append(mixed)
    for x in cases:
        expected = bool(np.isfinite(x).all())
        assert backend.all_finite(x) is expected
        assert replay.all_finite(x) is expected
        assert not backend.finite_by_sum(x) or expected  # the fast test never says finite wrongly


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_an_eager_division_by_a_power_of_two_has_the_bits_of_numpys(dtype, monkeypatch):
    """The impl multiplies by the reciprocal where it is exact (1/64, 2**-40, -4, and 2**-130 in
    float64); 3, and 2**-130 in float32 (not a normal number there), stay divisions. Every
    bit as np.divide gives it, -0 and NaN included."""
    tiny = np.finfo(dtype).tiny
    x = np.concatenate([np.random.default_rng(26).normal(size=200) * 10.0 ** np.arange(-20, 20, 0.2),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, tiny, tiny / 8, -tiny / 3, np.finfo(dtype).max]])
    x = x.astype(dtype)
    products = []
    multiply = ew.multiply.impl
    monkeypatch.setattr(ew.multiply, "impl", lambda *a: products.append(a[1]) or multiply(*a))
    divisors = (0.015625, 2.0**-40, -4.0, 3.0, 2.0**-130)
    with np.errstate(all="ignore"):
        for divisor in divisors:
            got, expected = ew.divide.bind(x, divisor), np.divide(x, divisor)
            assert got.dtype == expected.dtype
            np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))
    exact = [64.0, 2.0**40, -0.25] + ([2.0**130] if dtype == np.float64 else [])  # 2**-130: normal in float64
    assert products == exact
