"""Complex numbers: the convention (JAX's), its published values, and the errors.

The per-operation checks (vmap against the loop, JVPs in the real, imaginary and
general directions against central differences, VJPs by the inner-product identity with
the pairing Re sum(a b), second order) run in the operator table (``opinfo.py``, the
complex dtypes of its entries). Here: the convention itself against oracles that do not
use it (finite differences in x and in y separately, calculus, the values printed in
JAX's autodiff cookbook), the transforms' rules for complex arguments and outputs, and
the bad inputs, each raising its documented error naming the culprit.
"""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from ad_helpers import engine_vjp

Z = 1.0 + 2.0j
EPS = 1e-6


def partials(loss, z):
    """(dL/dx, dL/dy) of a real loss at complex ``z``, by central differences."""
    dx = (loss(z + EPS) - loss(z - EPS)) / (2 * EPS)
    dy = (loss(z + 1j * EPS) - loss(z - 1j * EPS)) / (2 * EPS)
    return float(np.real(dx)), float(np.real(dy))


# --- the convention -----------------------------------------------------------------------------
def test_gradients_of_the_parts_differ():
    """The issue's bug: d(z.imag) came back as 1.0, like d(z.real)."""
    z = xr.DataArray(Z)
    assert complex(lf.grad(lambda z: z.real)(z)) == 1.0
    assert complex(lf.grad(lambda z: z.imag)(z)) == -1j
    assert complex(lf.grad(lambda z: np.real(z))(z.data)) == 1.0
    assert complex(lf.grad(lambda z: np.imag(z))(z.data)) == -1j


LOSSES = {
    "abs2": lambda z: np.abs(z) ** 2,
    "abs": np.abs,
    "angle": np.angle,
    "real_of_square": lambda z: np.real(z * z),
    "imag_of_exp": lambda z: np.imag(np.exp(z)),
    "conj_product": lambda z: np.real(z * np.conj(z) * (2 + 1j) + z),
    "log_abs": lambda z: np.real(np.log(z)),
    "sign_real": lambda z: np.real(np.sign(z)),
}


@pytest.mark.parametrize("name", LOSSES)
def test_gradient_is_dx_minus_i_dy(name):
    """grad(L)(z) == dL/dx - i dL/dy, the partials by differences along x and along y."""
    loss = LOSSES[name]
    dx, dy = partials(loss, Z)
    actual = complex(lf.grad(loss)(np.asarray(Z)))
    np.testing.assert_allclose([actual.real, actual.imag], [dx, -dy], rtol=1e-7, atol=1e-8)


def test_autodiff_cookbook_values():
    """The outputs printed in JAX's autodiff cookbook (complex64 there): grad of
    x**2 + y**2 at 3 + 4j is 6 - 8j; with holomorphic=True, grad(sin) is
    -27.034945 - 3.8511531j (cos(3 + 4j)), and grad(conjugate) is 1 (the derivative of the
    real part of the output)."""
    z = np.asarray(3.0 + 4.0j)
    assert complex(lf.grad(lambda z: np.real(z) ** 2 + np.imag(z) ** 2)(z)) == 6 - 8j
    np.testing.assert_allclose(complex(lf.grad(np.sin, holomorphic=True)(z)), -27.034945 - 3.8511531j, rtol=1e-7)
    np.testing.assert_allclose(complex(lf.grad(np.sin, holomorphic=True)(z)), np.cos(3 + 4j), rtol=1e-14)
    assert complex(lf.grad(np.conjugate, holomorphic=True)(z)) == 1


def test_vjp_of_a_holomorphic_function_is_the_cotangent_times_its_derivative():
    z = np.array([Z, -0.5 + 0.25j])
    w = np.array([0.3 - 1.0j, 2.0 + 0.5j])
    for f, derivative in [(np.exp, np.exp), (np.sin, np.cos), (np.log, lambda z: 1 / z), (np.square, lambda z: 2 * z)]:
        _, pull = lf.vjp(f, z)
        np.testing.assert_allclose(pull(w)[0], w * derivative(z), rtol=1e-14)


def test_jvp_of_conj_and_parts():
    t = np.asarray(0.5 - 3.0j)
    z = np.asarray(Z)
    assert complex(lf.jvp(np.conj, (z,), (t,))[1]) == 0.5 + 3.0j
    assert float(lf.jvp(np.real, (z,), (t,))[1]) == 0.5
    assert float(lf.jvp(np.imag, (z,), (t,))[1]) == -3.0


def test_a_real_input_gets_the_real_gradient_through_complex_intermediates():
    """Parseval: sum |fft(x)|^2 = N sum x^2, so the gradient is 2 N x (real, float32 kept)."""
    x = np.array([1.0, -2.0, 0.5, 3.0, 0.25], dtype=np.float32)
    g = lf.grad(lambda x: np.sum(np.abs(np.fft.fft(x)) ** 2))(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, 2 * 5 * x, rtol=1e-5)
    _, (pulled,) = engine_vjp(lambda x: x * (2 + 1j), [x.astype(np.float64)], np.ones(5, dtype=complex))
    assert not np.iscomplexobj(pulled)
    np.testing.assert_array_equal(pulled, 2.0)  # Re((1 + 0j) (2 + 1j))


def test_complex_gradient_keeps_labels_and_dtype():
    z = xr.DataArray(np.array([1 + 1j, 2 - 1j], dtype=np.complex64), dims="site", coords={"site": ["a", "b"]})
    g = lf.grad(lambda z: (abs(z) ** 2).sum())(z)
    assert g.dims == ("site",) and g.dtype == np.complex64 and g.site.values.tolist() == ["a", "b"]
    np.testing.assert_allclose(g, 2 * np.conj(z), rtol=1e-6)
    per_site = lf.vmap(lf.grad(lambda z: abs(z) ** 2), dim="site")(z)
    np.testing.assert_allclose(per_site, 2 * np.conj(z), rtol=1e-6)


def test_holomorphic_jacobians_and_hessian():
    z = np.array([0.5 + 1j, -1.0 + 0.25j])
    for transform in (lf.jacfwd, lf.jacrev):
        np.testing.assert_allclose(transform(np.exp, holomorphic=True)(z), np.diag(np.exp(z)), rtol=1e-14)
    hessian = lf.hessian(lambda z: np.sum(z ** 3), holomorphic=True)(z)
    np.testing.assert_allclose(hessian, np.diag(6 * z), rtol=1e-14)


def test_jacrev_rows_are_gradients_and_jacfwd_columns_of_real_arguments():
    z = np.array([0.5 + 1j, -1.0 + 0.25j])
    np.testing.assert_allclose(lf.jacrev(np.abs)(z), np.diag(np.conj(z) / np.abs(z)), rtol=1e-14)
    x = np.array([0.3, -0.7])
    np.testing.assert_allclose(lf.jacfwd(lambda x: np.exp(1j * x))(x), np.diag(1j * np.exp(1j * x)), rtol=1e-14)


# --- bad inputs ---------------------------------------------------------------------------------
Z_ARRAY = np.array([1 + 1j, 2 - 1j])
X_ARRAY = np.array([0.5, -1.5])


@pytest.mark.parametrize("call, message", [
    (lambda: lf.grad(lambda z: z.sum())(Z_ARRAY), r"grad: the output is complex \(complex128\)"),
    (lambda: lf.grad_and_value(lambda x: (x * 1j).sum())(X_ARRAY), "grad_and_value: the output is complex"),
    (lambda: lf.jacrev(lambda x: x * 1j)(X_ARRAY), "jacrev: the output is complex"),
    (lambda: lf.jacfwd(np.abs)(Z_ARRAY), r"jacfwd: argument 'x' is complex"),
    (lambda: lf.hessian(lambda z: (abs(z) ** 2).sum())(Z_ARRAY), "hessian: argument 'z' is complex"),
    (lambda: lf.grad(lambda x: x.sum(), holomorphic=True)(X_ARRAY),
     r"grad\(holomorphic=True\): argument 'x' has dtype float64"),
    (lambda: lf.grad(lambda z: abs(z).sum(), holomorphic=True)(Z_ARRAY),
     r"grad\(holomorphic=True\): the output has dtype float64"),
    (lambda: lf.jacfwd(lambda z: abs(z), holomorphic=True)(Z_ARRAY),
     r"jacfwd\(holomorphic=True\): the output has dtype float64"),
    (lambda: lf.jvp(np.sin, (X_ARRAY,), (Z_ARRAY,)), "jvp: the tangent of argument 'x' is complex"),
    (lambda: lf.vjp(np.sin, X_ARRAY)[1](Z_ARRAY), "vjp: the cotangent is complex"),
])
def test_complex_where_a_real_value_is_needed_raises_type_error(call, message):
    with pytest.raises(TypeError, match=message):
        call()


@pytest.mark.parametrize("call, error, message", [
    (lambda x: np.fft.fft(x, norm="unitary"), ValueError, "numpy.fft.fft: norm='unitary'"),
    (lambda x: np.fft.rfft(x, n=0), ValueError, "numpy.fft.rfft: n=0"),
    (lambda x: np.fft.irfft(x[..., :1]), ValueError, "numpy.fft.irfft: the default n=0"),
    (lambda x: np.fft.fftn(x, s=(4, 4), axes=(0,)), ValueError, r"numpy.fft.fftn: s=\(4, 4\) and axes=\(0,\)"),
    (lambda x: np.fft.fft2(x, axes=(1, 1)), lf.UnsupportedOperationError, "numpy.fft.fft2 with a repeated axis"),
    (lambda x: np.fft.rfft(x * 1j), TypeError, "transform real data"),
])
def test_bad_fft_arguments_raise(call, error, message):
    x = np.ones((3, 4))
    with pytest.raises(error, match=message):
        lf.vmap(call, in_dims=(0,))(x[None])


def test_eigenvalues_of_a_rotation_by_calculus():
    """[[a, -b], [b, a]] has eigenvalues a +- ib: d lambda_0 / da = 1, d lambda_0 / db = i."""
    a, b = 0.7, 1.3
    matrix = lambda a, b: np.stack([np.stack([a, -b]), np.stack([b, a])])
    values = lambda a, b: np.linalg.eigvals(matrix(a, b))[0]
    assert complex(values(a, b)) == pytest.approx(a + 1j * b)
    _, da = lf.jvp(lambda a: values(a, np.asarray(b)), (np.asarray(a),), (np.asarray(1.0),))
    _, db = lf.jvp(lambda b: values(np.asarray(a), b), (np.asarray(b),), (np.asarray(1.0),))
    np.testing.assert_allclose([complex(da), complex(db)], [1.0, 1j], atol=1e-12)


def test_power_with_a_complex_exponent_of_a_negative_base():
    """d/dy x**y = log(x) x**y with the complex logarithm: log(-2) = log 2 + i pi."""
    for base in (-2.0, np.asarray(-2.0), np.asarray(-2.0 + 0j)):
        y = np.asarray(0.5 + 0.25j)
        actual = lf.grad(lambda y: np.power(base, y), holomorphic=True)(y)
        np.testing.assert_allclose(complex(actual), (np.log(2) + 1j * np.pi) * (-2.0 + 0j) ** (0.5 + 0.25j), rtol=1e-14)
