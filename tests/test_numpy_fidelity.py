"""The values a kernel computes are NumPy's: a NumPy (or SciPy) function applied to a traced
array returns what it returns on the concrete array, the same dtype and the same bits (NaN
where NaN, the signs of zeros), under lf.vmap (against the loop of NumPy), lf.jit and the
derivatives' primal passes; the derivatives keep their formulas (against central differences
and calculus).  The cases the fuzzer found (tests/test_jit_contract_found.py, last section),
and their neighbours: promotions of booleans, integers and Python numbers, ties of signed
zeros, complex infinities, and the functions NumPy or SciPy computes with its own kernel
(i0, sinc, float_power, logaddexp2, degrees, SciPy's cbrt/exp2/expm1/log1p/expit/logit).
"""
import warnings

import array_api_strict as xps
import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from test_ops_elementwise import assert_same_bits

sp = pytest.importorskip("scipy.special")

CPU = xps.Device("CPU_DEVICE")
FLOATS = [np.float64, np.float32, np.float16]
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 0.5, -0.5, 1.0, -1.0, 2.0, -2.5, 1e-3, -2.5e-3, 3e-8,
                     0.3, -0.45, 7.5, 8.0, 9.25, -20.0, 700.0])


def values(dtype):
    """Edge values as ``dtype``, two rows (an example each under vmap): zeros of both signs,
    infinities, NaN, values near 0 and past the branch points of the expansions; integers
    with their extremes; booleans; complex numbers with those values in both parts."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        row = np.array([True, False, True, True, False, False, True, False])
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        row = np.array([info.min, info.max, 0, 1, -1 if dtype.kind == "i" else 2, 3, 7, 100], dtype=dtype)
    elif dtype.kind == "c":
        real, imag = np.meshgrid(SPECIALS[:10], SPECIALS[:10])
        row = np.empty(real.size, dtype=dtype)
        row.real, row.imag = real.reshape(-1), imag.reshape(-1)  # (not real + 1j * imag: 1j * inf has a NaN)
    else:
        with np.errstate(over="ignore"):
            row = SPECIALS.astype(dtype)
    return np.stack([row, row[::-1]]).astype(dtype)


def quiet(function, *args, **kwargs):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args, **kwargs)


def assert_numpys(function, *arrays):
    """``function`` on rows of ``arrays`` under lf.vmap and lf.jit(lf.vmap), and on the whole
    arrays under lf.jit and as the primal of lf.jvp (floating inputs), against NumPy's loop."""
    expected = np.stack([quiet(function, *row) for row in zip(*arrays)])
    in_dims = (0,) * len(arrays)
    assert_same_bits(quiet(lf.vmap(function, in_dims=in_dims), *arrays), expected)
    assert_same_bits(quiet(lf.jit(lf.vmap(function, in_dims=in_dims)), *arrays), expected)
    assert_same_bits(quiet(lf.jit(function), *arrays), quiet(function, *arrays))
    if all(np.asarray(a).dtype.kind in "fc" for a in arrays):
        primal = quiet(lf.jvp, function, tuple(arrays), tuple(np.ones_like(a) for a in arrays))[0]
        assert_same_bits(primal, quiet(function, *arrays))


def central(function, x, eps=1e-6):
    return (function(x + eps) - function(x - eps)) / (2 * eps)


def derivative(function, x):
    """d function / dx elementwise by lf.vmap(lf.grad) (x a 1-D float64 array)."""
    return lf.vmap(lf.grad(function), in_dims=0)(x)


# --- silent wrong answers: dtypes and values ---------------------------------------------------------
@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8", "bool"])
@pytest.mark.parametrize("function", [np.fmax, np.fmin], ids=["fmax", "fmin"])
def test_fmax_and_fmin_promote_as_numpy(function, dtype):
    x = values(dtype)
    assert_numpys(lambda v: function(v, 0.5), x)  # fmin([1, 2], 0.5) is [0.5, 0.5], float64
    assert_numpys(lambda v: function(0.5, v), x)
    assert_numpys(function, x, x[:, ::-1].copy())
    assert_numpys(function, x, values("float32")[:, :8].copy())


@pytest.mark.parametrize("dtype", FLOATS + ["complex128"])
def test_fmax_and_fmin_of_floats_skip_nan_as_numpy(dtype):
    x = values(dtype)
    for function in (np.fmax, np.fmin):
        assert_numpys(function, x, x[:, ::-1].copy())
        assert_numpys(lambda v: function(v, -0.0), x)


def test_fmax_fallback_on_array_api_strict_promotes_as_numpy():
    x = values("int32")
    out = quiet(lf.vmap(lambda v: np.fmin(v, 0.5), in_dims=0), xps.asarray(x))
    assert_same_bits(np.asarray(out.to_device(CPU)), np.fmin(x, 0.5))
    f = values("float64")
    out = quiet(lf.vmap(np.fmax, in_dims=(0, 0)), xps.asarray(f), xps.asarray(f[:, ::-1].copy()))
    assert_same_bits(np.asarray(out.to_device(CPU)), np.fmax(f, f[:, ::-1]))


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "bool", "float64", "float16", "complex128"])
def test_isclose_as_numpy(dtype):
    x = values(dtype)
    assert_numpys(np.isclose, x, x[:, ::-1].copy())  # INT_MIN against 0 is not close (no wraparound)
    assert_numpys(lambda v: np.isclose(v, np.zeros_like(v)), x)
    assert_numpys(lambda v: np.isclose(v, 0), x)
    assert_numpys(lambda v: np.isclose(v, v, equal_nan=True), x)


def test_isclose_of_the_most_negative_integer_and_zero_is_false():
    x = np.array([[np.iinfo(np.int64).min, 0]])
    got = lf.vmap(lambda v: np.isclose(v, np.zeros_like(v)), in_dims=0)(x)
    np.testing.assert_array_equal(got, [[False, True]])


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8", "bool"])
def test_fabs_and_rint_of_integers_are_floating(dtype):
    x = values(dtype)
    assert_numpys(np.fabs, x)  # float64 of int64, float16 of booleans
    assert_numpys(np.rint, x)


def test_fabs_of_complex_values_raises_as_numpy():
    with pytest.raises(TypeError, match="fabs"):
        np.fabs(np.ones(2, complex))  # NumPy's own error
    with pytest.raises(TypeError, match="fabs"):
        lf.vmap(np.fabs, in_dims=0)(np.ones((2, 2), complex))


@pytest.mark.parametrize("dtype", ["bool", "int8", "int64", "float16", "float32"])
def test_angle_sinc_and_heaviside_take_numpys_dtypes(dtype):
    x = values(dtype)
    assert_numpys(np.angle, x)  # of booleans float64 (atan2(0, bool): 0 makes them int64), of int8 float16
    assert_numpys(lambda v: np.angle(v, deg=True), x)
    assert_numpys(np.sinc, x)  # of every integer type float64
    assert_numpys(lambda v: np.heaviside(v, 0.5), x)
    assert_numpys(lambda v: np.heaviside(v, np.float16(0.5)), x)


@pytest.mark.parametrize("dtype", ["bool", "int8", "int64", "complex128", "complex64", "float16", "float32"])
def test_powers_by_the_operator_and_by_the_ufunc_are_numpys(dtype):
    """``x ** 2`` is NumPy's square (its operator's shortcut: of booleans int8, of 0-0j 0-0j),
    ``np.power(x, 2)`` its power (of booleans int64, of 0-0j 0+0j); likewise -1 and 0.5."""
    x = values(dtype)
    kind = np.dtype(dtype).kind
    for exponent in (2, -1, 0.5, 2.0, 1) + ((3,) if kind != "f" else ()):  # real x**3: products, an ulp off
        if kind in "biu" and exponent == -1:
            continue  # NumPy refuses integers to negative integer powers
        assert_numpys(lambda v: v ** exponent, x)
        assert_numpys(lambda v: np.power(v, exponent), x)
    z = xr.DataArray(x, dims=("e", "i"))
    assert_same_bits(lf.vmap(lambda v: v ** 2, dim="e")(z), z ** 2)


def test_the_derivative_of_a_complex_square_by_the_operator():
    z = np.array([0.3 - 1.2j, -2.0 + 0.5j])
    out, tangent = lf.jvp(lambda v: v ** 2, (z,), (np.array([1.0 + 0.5j, -0.25j]),))
    assert_same_bits(out, z ** 2)
    np.testing.assert_allclose(tangent, 2 * z * np.array([1.0 + 0.5j, -0.25j]), rtol=1e-15)


@pytest.mark.parametrize("dtype", ["complex128", "complex64"])
def test_nanmin_and_nanmax_of_an_all_nan_complex_slice_keep_numpys_element(dtype):
    z = np.array([[complex(np.nan, -1.38), complex(np.nan, 0.37), complex(0.5, np.nan)],
                  [complex(np.nan, 2.0), complex(1.0, -1.0), complex(np.inf, 5.0)],
                  [complex(np.inf, 5.0), complex(np.nan, 1.0), complex(np.inf, -np.inf)]], dtype=dtype)
    for function in (np.nanmin, np.nanmax):
        assert_numpys(function, z)
        assert_numpys(lambda v: function(v, axis=0), z[None])
        assert_numpys(lambda v: function(v, axis=1, keepdims=True), z[None])
    da = xr.DataArray(z, dims=("c", "b"))
    assert_same_bits(quiet(lf.vmap(lambda v: v.min("c"), dim="b"), da).transpose(), quiet(da.min, "c"))


# --- signs of zeros ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS + ["bool", "int8", "int64"])
def test_clip_at_ties_of_signed_zeros_is_numpys(dtype):
    x = values(dtype)
    for low, high in [(0.0, 1), (-0.0, 1), (-0.0, 0.0), (0.0, -0.0), (-1.0, 2.5), (np.nan, 1.0), (2, -2), (0, 1)]:
        assert_numpys(lambda v: np.clip(v, low, high), x)
    assert_numpys(lambda v: np.clip(v, x[0], x[1]), x)  # array bounds
    assert_numpys(lambda v: np.clip(v, None, 0.0), x)
    assert_numpys(lambda v: np.clip(v, -0.0, None), x)


def test_clip_of_integers_leaves_out_a_bound_beyond_the_dtype():
    x = values("int8")
    assert_numpys(lambda v: np.clip(v, -1000, 5), x)
    assert_numpys(lambda v: np.clip(v, -3, 1000), x)


def test_clip_fallback_on_array_api_strict_promotes_as_numpy():
    x = values("int32")
    out = quiet(lf.vmap(lambda v: np.clip(v, 0.5, 2.5), in_dims=0), xps.asarray(x))
    assert_same_bits(np.asarray(out.to_device(CPU)), np.clip(x, 0.5, 2.5))


def test_clip_derivatives_split_ties():
    x = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    grad = lf.vmap(lf.grad(lambda v: np.clip(v, -1.0, 1.0)), in_dims=0)(x)
    np.testing.assert_array_equal(grad, [0.0, 0.5, 1.0, 0.5, 0.0])
    low, high = np.array([-1.0, -1.0, -1.0]), np.array([1.0, 1.0, 1.0])
    for argnum, expected in ((1, [1.0, 0.5, 0.0]), (2, [1.0, 0.5, 0.0])):
        got = lf.vmap(lf.grad(lambda *a: np.clip(*a), argnums=argnum), in_dims=(0, 0, 0))(
            np.array([-3.0, -1.0, 0.0]) * (1 if argnum == 1 else -1), low, high)
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", ["complex128", "complex64"])
def test_the_sign_of_complex_numbers_is_numpys(dtype):
    assert_numpys(np.sign, values(dtype))  # sign(-2.9 + inf j) is 1j, not NaN


def test_the_sign_of_complex_numbers_differentiates_as_z_over_its_size():
    z = np.array([0.3 - 1.2j, -2.0 + 0.5j, 1e-3 + 4.0j])

    def sign(v):
        return v / np.abs(v)

    for direction in (1.0, 1j, 0.6 - 0.8j):
        t = np.full(z.shape, direction)
        out, tangent = lf.jvp(np.sign, (z,), (t,))
        assert_same_bits(out, np.sign(z))
        np.testing.assert_allclose(tangent, (sign(z + 1e-7 * t) - sign(z - 1e-7 * t)) / 2e-7, rtol=1e-7,
                                   atol=1e-9)
    # the reverse rule is the transpose: <J^T u, v> = <u, J v> under Re(w t)
    u, v = np.array([0.5 + 1j, -1j, 2.0]), np.array([1.0 - 0.5j, 0.25 + 2j, -1.0])
    out, pullback = lf.vjp(np.sign, z)
    (back,) = pullback(u)
    forward = lf.jvp(np.sign, (z,), (v,))[1]
    np.testing.assert_allclose(np.real(np.sum(back * v)), np.real(np.sum(u * forward)), rtol=1e-13)
    zero = lf.jvp(np.sign, (np.zeros(2, complex),), (np.ones(2, complex),))[1]
    np.testing.assert_array_equal(zero, 0)


@pytest.mark.parametrize("dtype", FLOATS)
def test_the_median_never_returns_a_negative_zero_as_numpy(dtype):
    x = np.array([[-0.0, -0.0, -0.0], [np.nan, -0.0, -0.0], [np.nan, np.nan, -0.0], [-0.0, 1.0, np.nan]], dtype)
    assert_numpys(np.nanmedian, x)
    assert_numpys(np.median, x)
    assert_numpys(np.median, x[:, :2].copy())
    assert_numpys(np.nanmedian, x[:, :2].copy())
    da = xr.DataArray(np.array([np.nan, -0.0]), dims="a")
    assert_same_bits(quiet(lf.jit(lambda v: v.median("a")), da), quiet(da.median, "a"))


# --- within an ulp: NumPy's and SciPy's own functions --------------------------------------------------
@pytest.mark.parametrize("dtype", ["complex128", "complex64"])
def test_complex_spreads_and_means_are_numpys(dtype):
    rng = np.random.default_rng(5)
    z = (rng.normal(size=(60, 7)) + 1j * rng.normal(size=(60, 7))).astype(dtype)
    with_nan = z.copy()
    with_nan[::3, 2] = np.nan
    for function in (np.var, np.std, np.nanvar, np.nanstd, np.nanmean, np.mean,
                     lambda v: np.nanvar(v, ddof=1), lambda v: np.nanstd(v, ddof=8), lambda v: np.var(v, ddof=2)):
        assert_numpys(function, z)
        assert_numpys(function, with_nan)
    assert_numpys(lambda v: np.nanstd(v, axis=1), with_nan[None])


def test_a_nanvar_without_degrees_of_freedom_is_nan():
    x = np.array([[1.0, 2.0, np.nan], [3.0, np.nan, np.nan]])
    assert_numpys(lambda v: np.nanvar(v, ddof=2), x)  # NumPy: NaN where count - ddof <= 0, not inf


def test_complex_spreads_differentiate():
    z = np.array([0.3 - 1.2j, -2.0 + 0.5j, 1.0 + 4.0j, np.nan])
    for function in (np.nanvar, np.nanstd, lambda v: np.var(v[:3]), lambda v: np.std(v[:3], ddof=1)):
        gradient = lf.grad(function)(z)
        for direction in (1.0, 1j):
            step = np.where(np.isnan(z), 0, direction) * 1e-6
            numeric = (function(z + step) - function(z - step)) / 2e-6
            directional = np.real(np.nansum(gradient * np.where(np.isnan(z), 0, direction)))  # Re(w t)
            np.testing.assert_allclose(directional, numeric, rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("dtype", FLOATS + ["int64", "int16", "bool"])
def test_i0_is_numpys(dtype):
    assert_numpys(np.i0, values(dtype))


def test_the_derivatives_of_i0_are_the_modified_bessel_functions():
    x = np.concatenate([np.linspace(-30.0, 30.0, 241), [0.0, 0.49, 0.5, 0.51, 7.99, 8.0, 8.01, 1e-9]])
    np.testing.assert_allclose(derivative(np.i0, x), sp.i1(x), rtol=2e-14, atol=1e-300)
    second = lf.vmap(lf.grad(lf.grad(np.i0)), in_dims=0)(x)
    expected = np.where(x == 0, 0.5, sp.i0(x) - sp.i1(x) / np.where(x == 0, 1.0, x))  # I1' = I0 - I1 / x
    np.testing.assert_allclose(second, expected, rtol=1e-12)


def test_i0_on_array_api_strict_follows_numpys_steps():
    x = values("float64")
    out = quiet(lf.vmap(np.i0, in_dims=0), xps.asarray(x))
    np.testing.assert_allclose(np.asarray(out.to_device(CPU)), np.i0(x), rtol=1e-15)


@pytest.mark.parametrize("dtype", FLOATS + ["complex128", "int64", "bool"])
def test_sinc_is_numpys(dtype):
    x = values(dtype)
    assert_numpys(np.sinc, x)
    if np.dtype(dtype).kind == "f":
        near = np.linspace(-0.004, 0.004, 801).astype(dtype)  # where a Taylor series once stood in
        assert_numpys(np.sinc, np.stack([near, near[::-1]]))


def test_the_derivatives_of_sinc_are_right_at_and_around_zero():
    x = np.concatenate([np.linspace(-3.0, 3.0, 241), [0.0, 1e-9, -2e-3, 3.1e-3, 3.2e-3, 0.0031831]])
    small = np.abs(x) < 1e-3  # there the quotient cancels: its Taylor polynomial
    exact = np.where(small, -np.pi ** 2 * x / 3 + np.pi ** 4 * x ** 3 / 30,
                     (np.cos(np.pi * x) - np.sinc(x)) / np.where(small, 1.0, x))
    np.testing.assert_allclose(derivative(np.sinc, x), exact, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(derivative(np.sinc, x), central(np.sinc, x), rtol=1e-7, atol=1e-8)
    second = lf.grad(lf.grad(np.sinc))(np.float64(0.0) + np.zeros(()))
    np.testing.assert_allclose(second, -np.pi ** 2 / 3, rtol=1e-14)  # sinc = 1 - (pi x)**2 / 6 + ...


def test_sinc_on_array_api_strict_follows_numpys_steps():
    x = values("float64")
    out = quiet(lf.vmap(np.sinc, in_dims=0), xps.asarray(x))
    assert_same_bits(np.asarray(out.to_device(CPU)), quiet(np.sinc, x))


@pytest.mark.parametrize("dtype", FLOATS + ["int64", "int8", "bool"])
def test_degrees_and_radians_are_numpys(dtype):
    x = values(dtype)
    for function in (np.degrees, np.rad2deg, np.radians, np.deg2rad):
        assert_numpys(function, x)
    np.testing.assert_allclose(derivative(np.degrees, np.linspace(-1, 1, 5)), 180 / np.pi, rtol=1e-15)
    np.testing.assert_allclose(derivative(np.radians, np.linspace(-1, 1, 5)), np.pi / 180, rtol=1e-15)


@pytest.mark.parametrize("dtype", FLOATS + ["int64", "int32", "complex128"])
def test_float_power_and_logaddexp2_are_numpys(dtype):
    x = values(dtype)
    y = x[:, ::-1].copy()
    assert_numpys(lambda v: np.float_power(v, 0.5), x)  # pow(-0.0, 0.5) is 0.0, not sqrt's -0.0
    if np.dtype(dtype).kind != "c":
        assert_numpys(np.float_power, np.abs(x) if np.dtype(dtype).kind == "i" else x, y)
        assert_numpys(np.logaddexp2, x, y)
        assert_numpys(lambda v: np.logaddexp2(v, 0.5), x)


def test_float_power_and_logaddexp2_differentiate():
    x = np.linspace(0.25, 3.0, 12)
    y = np.linspace(-1.5, 2.5, 12)
    for function in (np.float_power, np.logaddexp2):
        for argnum, vary in ((0, lambda e: function(x + e, y)), (1, lambda e: function(x, y + e))):
            got = lf.vmap(lf.grad(function, argnums=argnum), in_dims=(0, 0))(x, y)
            np.testing.assert_allclose(got, (vary(1e-6) - vary(-1e-6)) / 2e-6, rtol=1e-7)
    assert lf.grad(lambda v: np.float_power(v, 2).sum())(np.float32([1.0, 2.0])).dtype == np.float32


@pytest.mark.parametrize("name, dtype", [
    (name, dtype) for name in ("cbrt", "exp2", "expm1", "log1p", "expit", "logit")
    for dtype in FLOATS + ["int64", "bool"] + (["complex128", "complex64"] if name in ("expm1", "log1p") else [])])
def test_scipy_specials_are_scipys(name, dtype):
    assert_numpys(getattr(sp, name), values(dtype))


@pytest.mark.parametrize("name, exact", [
    ("cbrt", lambda x: np.cbrt(x) ** -2 / 3), ("exp2", lambda x: np.exp2(x) * np.log(2.0)),
    ("expm1", np.exp), ("log1p", lambda x: 1 / (1 + x)),
    ("expit", lambda x: np.exp(-np.abs(x)) / (1 + np.exp(-np.abs(x))) ** 2), ("logit", lambda p: 1 / (p * (1 - p)))])
def test_scipy_specials_differentiate(name, exact):
    x = {"logit": np.linspace(0.05, 0.95, 19), "log1p": np.linspace(-0.9, 3.0, 27)}.get(
        name, np.concatenate([np.linspace(-3.0, 3.0, 25), [40.0, -40.0]]))
    if name == "cbrt":
        x = x[x != 0]
    if name == "expm1":  # its rule is NumPy expm1's, e**x as out + 1: of -40 0.0, 4e-18 off
        x = x[x > -5]
    function = getattr(sp, name)
    np.testing.assert_allclose(derivative(function, x), exact(x), rtol=1e-13)
    second = lf.vmap(lf.grad(lf.grad(function)), in_dims=0)(x)
    first = lambda v: lf.vmap(lf.grad(function), in_dims=0)(v)  # noqa: E731
    np.testing.assert_allclose(second, central(first, x), rtol=1e-6, atol=1e-9)


# --- sorting: ties in NumPy's order --------------------------------------------------------------
TIED = np.array([1.0, 0.0, 1.0, -0.0, 1.0, 0.0, 2.0, 1.0, -0.0, 0.0, 1.0, 0.0, -1.0, 1.0, 0.0, 0.0, 1.0, 1.0,
                 np.nan, 1.0, 2.0, 0.0, 1.0, -0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0])


@pytest.mark.parametrize("kind", [None, "quicksort", "stable", "mergesort"])
def test_argsort_and_sort_put_ties_and_signed_zeros_where_numpy_does(kind):
    """NumPy's default kind (quicksort) is not stable: ties (and -0.0 against 0.0) come out
    in its own order.  The traced sort gives that order, under lf.jit (trace and replay)
    and lf.vmap (against the loop); kind='stable' the stable one."""
    rows = np.stack([TIED, TIED[::-1], np.roll(TIED, 5)])
    for x in rows:
        want_order, want_sorted = np.argsort(x, kind=kind), np.sort(x, kind=kind)
        argsort, sort = lf.jit(lambda v: np.argsort(v, kind=kind)), lf.jit(lambda v: np.sort(v, kind=kind))
        for _ in range(2):
            np.testing.assert_array_equal(argsort(x), want_order)
            assert_same_bits(sort(x), want_sorted)
    mapped = lf.vmap(lambda v: np.argsort(v, kind=kind), in_dims=0)(rows)
    np.testing.assert_array_equal(mapped, np.stack([np.argsort(x, kind=kind) for x in rows]))
    mapped_sort = lf.vmap(lambda v: np.sort(v, kind=kind), in_dims=0)(rows)
    assert_same_bits(mapped_sort, np.stack([np.sort(x, kind=kind) for x in rows]))
    labeled = xr.DataArray(rows, dims=("station", "t"))
    got = lf.vmap(lambda d: d.argsort(kind=kind), dim="station")(labeled)
    np.testing.assert_array_equal(got.transpose("station", "t").values, labeled.argsort(kind=kind).values)


def test_the_derivative_through_a_sort_with_ties_is_a_permutation_of_the_tangent():
    """Tied values are equal, so every permutation among them sorts: the derivative takes
    the stable one, in forward and reverse mode alike (the transpose of each other)."""
    x = np.array([1.0, 0.0, 1.0, 2.0, 0.0])
    weights = np.arange(1.0, 6.0)
    gradient = lf.grad(lambda v: (np.sort(v) * weights).sum())(x)
    np.testing.assert_array_equal(gradient, weights[np.argsort(np.argsort(x, kind="stable"), kind="stable")])
    jacobian = lf.jacfwd(lambda v: np.sort(v))(x)
    np.testing.assert_array_equal(jacobian.T @ weights, gradient)
