"""fmod, ldexp, frexp, fix, nextafter, spacing, i0, real_if_close, unwrap and NumPy 2's vector
gufuncs where the operator table (tests/opinfo_elementwise.py) cannot reach: their bits at
edge values (zeros of both signs, infinities, NaN, subnormals) against NumPy's, derivatives
against calculus and central differences, real_if_close's policy, use from xarray, and sinc's
value, slope and curvature at zero.
"""
import math
import warnings

import array_api_strict as xps
import numpy as np
import pytest
import scipy.special as sp
import xarray as xr

import labeled_func as lf

RNG = np.random.default_rng(31)
TINY = np.finfo(np.float64).smallest_subnormal
EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, TINY, -3 * TINY, 2.2250738585072014e-308, 1.5, -2.75,
                  7.0, -7.0, 1e300, np.finfo(np.float64).max])
CPU = xps.Device("CPU_DEVICE")


def vmap(function, *arrays):
    return lf.vmap(function, in_dims=(0,) * len(arrays))(*arrays)


def assert_same_bits(actual, expected):
    """Same dtype and shape, NaN where NumPy has NaN, and every other element bit for bit (the
    sign of a zero included); complex numbers part by part."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual.dtype, expected.dtype)
    if expected.dtype.kind == "c":
        assert_same_bits(actual.real.copy(), expected.real.copy())
        assert_same_bits(actual.imag.copy(), expected.imag.copy())
        return
    if expected.dtype.kind == "f":
        nan = np.isnan(expected)
        np.testing.assert_array_equal(np.isnan(actual), nan)
        actual, expected = np.where(nan, 0, actual), np.where(nan, 0, expected)
        np.testing.assert_array_equal(np.signbit(actual), np.signbit(expected))
    np.testing.assert_array_equal(actual, expected)


def pairs(values):
    """Every pair of ``values``, as two arrays of shape (len, len)."""
    x, y = np.meshgrid(values, values, indexing="ij")
    return x.copy(), y.copy()


def quiet(function, *args):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args)


def central(function, x, eps=1e-6):
    return (function(x + eps) - function(x - eps)) / (2 * eps)


# --- bits at edge values: the transforms and lf.jit give NumPy's -----------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fmod_at_edge_values_has_numpy_bits(dtype):
    x, y = (quiet(part.astype, dtype) for part in pairs(EDGES))
    expected = quiet(np.fmod, x, y)
    assert_same_bits(quiet(vmap, np.fmod, x, y), expected)
    assert_same_bits(quiet(lf.jit(lf.vmap(np.fmod, in_dims=(0, 0))), x, y), expected)
    assert_same_bits(quiet(lambda a: lf.jvp(lambda v: np.fmod(v, y), (a,), (np.ones_like(a),))[0], x), expected)


def test_fmod_of_integers_keeps_numpy_sign_and_zero_divisor():
    x, y = pairs(np.array([-7, -3, 0, 3, 7, 9]))
    assert_same_bits(quiet(vmap, np.fmod, x, y), quiet(np.fmod, x, y))


def test_fmod_fallback_on_array_api_strict_has_numpy_bits():
    x, y = quiet(pairs, EDGES)
    out = quiet(vmap, np.fmod, xps.asarray(x), xps.asarray(y))
    assert_same_bits(np.asarray(out.to_device(CPU)), quiet(np.fmod, x, y))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_ldexp_at_edge_values_has_numpy_bits(dtype):
    exponents = np.array([-1100, -1074, -1060, -150, -1, 0, 1, 3, 150, 1000, 1100])
    x = np.repeat(quiet(EDGES.astype, dtype)[:, None], len(exponents), axis=1)
    i = np.repeat(exponents[None, :], len(EDGES), axis=0)
    expected = quiet(np.ldexp, x, i)
    assert expected.dtype == dtype
    assert_same_bits(quiet(vmap, np.ldexp, x, i), expected)
    assert_same_bits(quiet(lf.jit(lf.vmap(np.ldexp, in_dims=(0, 0))), x, i), expected)


def test_ldexp_fallback_is_exact_for_normal_scalings():
    x = RNG.normal(size=(3, 5))
    i = RNG.integers(-60, 60, size=(3, 5))
    out = vmap(np.ldexp, xps.asarray(x), xps.asarray(i))
    assert_same_bits(np.asarray(out.to_device(CPU)), np.ldexp(x, i))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_frexp_at_edge_values_has_numpy_bits(dtype):
    x = quiet(EDGES.astype, dtype).reshape(2, -1)
    mantissa, exponent = vmap(np.frexp, x)
    expected_mantissa, expected_exponent = np.frexp(x)
    assert_same_bits(mantissa, expected_mantissa)
    assert_same_bits(exponent, expected_exponent)
    jitted = lf.jit(lf.vmap(np.frexp, in_dims=(0,)))(x)
    assert_same_bits(jitted[0], expected_mantissa)
    assert_same_bits(jitted[1], expected_exponent)


def test_frexp_of_integers_takes_numpy_float_type():
    for dtype in (np.int8, np.int16, np.int64):
        x = np.array([[-3, 0, 5], [7, 1, -128]], dtype=dtype)
        for part, expected in zip(vmap(np.frexp, x), np.frexp(x)):
            assert_same_bits(part, expected)


def test_nextafter_and_spacing_at_edge_values_have_numpy_bits():
    x, y = pairs(EDGES)
    assert_same_bits(quiet(vmap, np.nextafter, x, y), quiet(np.nextafter, x, y))
    assert_same_bits(quiet(vmap, np.spacing, x), quiet(np.spacing, x))
    x32 = quiet(x.astype, np.float32)
    assert_same_bits(quiet(vmap, np.spacing, x32), quiet(np.spacing, x32))
    strict = quiet(vmap, np.spacing, xps.asarray(x))  # the fallback: nextafter away from zero
    assert_same_bits(np.asarray(strict.to_device(CPU)), quiet(np.spacing, x))


def test_fix_rounds_toward_zero_with_numpy_signed_zeros_and_dtypes():
    x = np.array([[-2.5, -0.5, -0.0, 0.0], [0.5, 2.5, np.inf, np.nan]])
    assert_same_bits(vmap(np.fix, x), np.fix(x))
    ints = np.array([[-3, 4], [5, -6]])
    assert_same_bits(vmap(np.fix, ints), np.fix(ints))
    np.testing.assert_array_equal(lf.grad(lambda v: np.fix(v).sum())(x[0] + 0.25), np.zeros(4))


# --- derivatives ----------------------------------------------------------------------------------
def test_fmod_derivatives_are_one_and_minus_the_truncated_quotient():
    x = RNG.uniform(-9, 9, size=7)
    y = RNG.uniform(0.5, 3, size=7) * RNG.choice([-1, 1], size=7)
    dx, dy = lf.grad(lambda a, b: np.fmod(a, b).sum(), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(dx, np.ones(7))
    np.testing.assert_array_equal(dy, -np.trunc(x / y))
    np.testing.assert_allclose(dy, central(lambda b: np.fmod(x, b), y), rtol=1e-6)


@pytest.mark.parametrize("function, rounding", [(np.fmod, np.trunc), (np.remainder, np.floor)])
def test_the_cotangent_of_a_masked_zero_divisor_is_zero_not_nan(function, rounding):
    x = np.array([1.5, -2.5, 3.0, 0.5])
    y = np.array([0.0, 2.0, 0.0, -0.25])
    with np.errstate(divide="ignore", invalid="ignore"):
        dy = lf.grad(lambda b: np.where(b != 0, function(x, b), 0.0).sum())(y)
    np.testing.assert_array_equal(dy, np.where(y != 0, -rounding(x / np.where(y != 0, y, 1)), 0.0))


def test_ldexp_derivative_is_the_power_of_two():
    x = RNG.normal(size=(2, 6)).astype(np.float32)
    i = RNG.integers(-5, 6, size=(2, 6))
    gradient = lf.grad(lambda v: np.ldexp(v, i).sum())(x)
    assert gradient.dtype == np.float32
    np.testing.assert_array_equal(gradient, np.ldexp(np.float32(1), i))
    _, tangent = lf.jvp(lambda v: np.ldexp(v, 3), (x,), (np.ones_like(x),))
    np.testing.assert_array_equal(tangent, np.full_like(x, 8.0))


def test_frexp_mantissa_derivative_is_two_to_minus_the_exponent():
    x = RNG.uniform(-40, 40, size=9)
    x = x[np.abs(np.log2(np.abs(x)) % 1) > 1e-3]  # away from the powers of two, where it jumps
    gradient = lf.grad(lambda v: np.frexp(v)[0].sum())(x)
    np.testing.assert_array_equal(gradient, 2.0 ** -np.frexp(x)[1])
    np.testing.assert_allclose(gradient, central(lambda v: np.frexp(v)[0], x), rtol=1e-8)
    per_example = lf.vmap(lf.grad(lambda v: np.frexp(v)[0]), in_dims=(0,))(x)
    np.testing.assert_array_equal(per_example, gradient)


def test_nextafter_derivative_is_one_in_x_and_zero_in_y():
    x, y = RNG.normal(size=5), RNG.normal(size=5)
    dx, dy = lf.grad(lambda a, b: np.nextafter(a, b).sum(), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(dx, np.ones(5))
    np.testing.assert_array_equal(dy, np.zeros(5))
    np.testing.assert_array_equal(lf.grad(lambda a: np.spacing(a).sum())(x), np.zeros(5))


# --- i0: NumPy's values, the derivatives of I0 ----------------------------------------------------
def test_i0_matches_numpy_on_both_expansions_and_at_special_values():
    x = np.concatenate([np.linspace(-30, 30, 2401), np.linspace(-0.6, 0.6, 241),  # the Taylor polynomial near 0
                        [0.0, -0.0, 0.5, -0.5, 8.0, -8.0, np.nextafter(8.0, 9.0), 700.0, 720.0, np.inf, -np.inf, np.nan]])
    expected = quiet(np.i0, x)
    out = quiet(vmap, np.i0, x.reshape(1, -1))[0]
    finite = np.isfinite(expected)
    np.testing.assert_allclose(out[finite], expected[finite], rtol=1e-15, atol=0)
    assert_same_bits(np.where(finite, 0.0, out), np.where(finite, 0.0, expected))
    for dtype in (np.float32, np.int64):
        values = np.array([[-9, -2, 0, 3], [5, 8, 10, 14]]).astype(dtype)
        assert_same_bits(vmap(np.i0, values).dtype.type(0), np.i0(values).dtype.type(0))
        np.testing.assert_allclose(vmap(np.i0, values), np.i0(values), rtol=1e-6 if dtype == np.float32 else 1e-15)


def test_i0_derivatives_are_those_of_the_bessel_function():
    x = np.concatenate([np.linspace(-25, 25, 101), [0.0, 8.0, -8.0]])
    gradient = lf.vmap(lf.grad(np.i0), in_dims=(0,))(x)
    np.testing.assert_allclose(gradient, sp.i1(x), rtol=1e-13, atol=1e-300)  # I0' = I1
    away = np.abs(np.abs(x) - 8.0) > 1e-3
    np.testing.assert_allclose(gradient[away], central(np.i0, x[away]), rtol=1e-7, atol=1e-9)
    second = lf.vmap(lf.grad(lf.grad(np.i0)), in_dims=(0,))(x)
    np.testing.assert_allclose(second, (sp.i0(x) + sp.iv(2, x)) / 2, rtol=1e-12)  # I0'' = (I0 + I2) / 2


def test_i0_of_complex_raises_as_numpy():
    z = np.ones((2, 3), dtype=complex)
    with pytest.raises(TypeError, match="i0 not supported for complex values"):
        vmap(np.i0, z)
    with pytest.raises(TypeError):
        np.i0(z[0])


# --- real_if_close: the policy ---------------------------------------------------------------------
def test_real_if_close_of_a_real_array_is_the_array_under_every_transform():
    x = RNG.normal(size=(3, 4))
    np.testing.assert_array_equal(vmap(np.real_if_close, x), x)
    np.testing.assert_array_equal(lf.grad(lambda v: (np.real_if_close(v) ** 2).sum())(x[0]), 2 * x[0])
    np.testing.assert_array_equal(lf.jit(lf.vmap(np.real_if_close, in_dims=(0,)))(x), x)


def test_real_if_close_under_grad_and_jvp_follows_numpy_on_the_primal():
    x = RNG.normal(size=4)
    tiny = 1e-15 * RNG.normal(size=4)  # below 100 epsilons
    close = lambda v: np.real_if_close(v + 1j * tiny)
    assert np.real_if_close(x + 1j * tiny).dtype == np.float64
    out, tangent = lf.jvp(close, (x,), (np.ones(4),))
    assert out.dtype == np.float64 and tangent.dtype == np.float64
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(tangent, np.ones(4))
    np.testing.assert_array_equal(lf.grad(lambda v: (close(v) ** 2).sum())(x), 2 * x)
    # an imaginary part above the tolerance (in epsilons), or above an absolute one: complex, as NumPy
    far = lambda v, tol=100: np.real_if_close(v + 1e-12j, tol=tol)
    for tol in (100, 1e-13):
        assert np.real_if_close(x + 1e-12j, tol=tol).dtype == np.complex128
        out, tangent = lf.jvp(lambda v: far(v, tol), (x,), (np.ones(4),))
        assert out.dtype == np.complex128
        np.testing.assert_array_equal(out, x + 1e-12j)
        np.testing.assert_array_equal(tangent, np.ones(4, dtype=complex))
    assert lf.jvp(lambda v: far(v, 1e-11), (x,), (np.ones(4),))[0].dtype == np.float64


def test_real_if_close_of_a_mapped_or_jitted_complex_array_is_a_policy_error():
    z = RNG.normal(size=(3, 4)) + 0j
    with pytest.raises(lf.DynamicShapeError, match=r"numpy\.real_if_close under vmap.*np\.real\(x\)"):
        vmap(np.real_if_close, z)
    with pytest.raises(lf.DynamicShapeError, match=r"numpy\.real_if_close under lf\.jit"):
        lf.jit(np.real_if_close)(z[0])


# --- unwrap -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [{}, {"axis": 0}, {"period": 360.0}, {"discont": 4.0, "period": 6.0}])
def test_unwrap_matches_numpy_per_example(kwargs):
    scale = kwargs.get("period", 2 * np.pi)
    p = RNG.uniform(-scale, scale, size=(3, 5, 6))
    out = lf.vmap(lambda v: np.unwrap(v, **kwargs), in_dims=(0,))(p)
    np.testing.assert_array_equal(out, np.stack([np.unwrap(v, **kwargs) for v in p]))


def test_unwrap_of_integers_with_an_integer_period_is_numpy_s():
    p = RNG.integers(-20, 20, size=(3, 8))
    for period in (7, 8):  # odd and even: the even one has an ambiguous boundary
        out = lf.vmap(lambda v: np.unwrap(v, period=period), in_dims=(0,))(p)
        expected = np.stack([np.unwrap(v, period=period) for v in p])
        assert out.dtype == expected.dtype == np.int64
        np.testing.assert_array_equal(out, expected)


def test_unwrap_derivative_is_the_identity():
    p = np.cumsum(RNG.uniform(-1, 1, size=9)) + RNG.choice([0, 2 * np.pi, -2 * np.pi], size=9)
    assert not np.array_equal(np.unwrap(p), p)  # corrections happen
    np.testing.assert_array_equal(lf.jacrev(np.unwrap)(p), np.eye(9))
    np.testing.assert_array_equal(lf.jacfwd(np.unwrap)(p), np.eye(9))
    differences = np.stack([central(lambda v: np.unwrap(p + v * e), 0.0) for e in np.eye(9)], axis=1)
    np.testing.assert_allclose(differences, np.eye(9), atol=1e-8)


# --- vector gufuncs ------------------------------------------------------------------------------------
def test_vecdot_conjugates_its_first_argument_and_vecmat_its_vector():
    a = RNG.normal(size=(3, 4)) + 1j * RNG.normal(size=(3, 4))
    b = RNG.normal(size=(3, 4)) + 1j * RNG.normal(size=(3, 4))
    m = RNG.normal(size=(3, 4, 2)) + 1j * RNG.normal(size=(3, 4, 2))
    np.testing.assert_allclose(vmap(np.vecdot, a, b), np.sum(np.conj(a) * b, axis=-1), rtol=1e-14)
    np.testing.assert_allclose(vmap(np.vecmat, a, m), np.einsum("bi,bij->bj", np.conj(a), m), rtol=1e-14)
    np.testing.assert_allclose(vmap(np.matvec, np.swapaxes(m, 1, 2), a), np.einsum("bji,bi->bj", np.swapaxes(m, 1, 2), a),
                               rtol=1e-14)
    with pytest.raises(ValueError):
        vmap(lambda v: np.matvec(v, v), a)


# --- from xarray ---------------------------------------------------------------------------------------
def test_fmod_of_a_dataarray_under_grad_and_vmap_keeps_coords():
    da = xr.DataArray(RNG.uniform(-5, 5, size=(3, 4)), dims=("sample", "t"),
                      coords={"sample": [10, 20, 30], "t": [0.0, 0.5, 1.0, 1.5]})
    out = lf.vmap(lambda v: np.fmod(v, 1.5), dim="sample")(da)
    xr.testing.assert_identical(out, np.fmod(da, 1.5))
    gradient = lf.grad(lambda v: (np.fmod(v, 1.5) ** 2).sum())(da)
    assert gradient.dims == da.dims
    xr.testing.assert_identical(gradient.coords.to_dataset(), da.coords.to_dataset())
    np.testing.assert_allclose(gradient.values, 2 * np.fmod(da.values, 1.5))
    mantissa = lf.vmap(lambda v: np.frexp(v)[0], dim="sample")(da)
    xr.testing.assert_identical(mantissa, np.frexp(da)[0])


# --- sinc at and near zero --------------------------------------------------------------------------
def test_sinc_value_and_slope_at_zero():
    assert float(vmap(np.sinc, np.zeros((2, 1)))[0, 0]) == 1.0
    assert float(lf.grad(np.sinc)(np.array(0.0))) == 0.0
    second = float(lf.grad(lf.grad(np.sinc))(np.array(1e-3)))
    assert math.isclose(second, -math.pi**2 / 3 * (1 - 0.3 * (math.pi * 1e-3) ** 2), rel_tol=1e-9)


def test_sinc_curvature_at_zero():
    assert math.isclose(float(lf.grad(lf.grad(np.sinc))(np.array(0.0))), -math.pi**2 / 3, rel_tol=1e-12)
