"""Forward mode (jvp, jacfwd, hessian) through ``lf.custom_vjp`` functions.

Forward mode differentiates the function itself (a VJP rule cannot give J u without
transposing its code); levels below that differentiate still use ``fwd``/``bwd``.
"""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf


def close(a, b, rtol=1e-7, atol=1e-9):
    a = a.values if isinstance(a, xr.DataArray) else np.asarray(a)
    b = b.values if isinstance(b, xr.DataArray) else np.asarray(b)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


@lf.custom_vjp
def log1pexp(x):
    return np.log1p(np.exp(x))


def _fwd(x):
    return log1pexp(x), x


def _bwd(x, g):
    return (g / (1 + np.exp(-x)),)  # the logistic function: finite where exp(x) overflows


log1pexp.defvjp(_fwd, _bwd)


@lf.custom_vjp
def vsin2(x):
    """sin(x), pulled back as if it were 2 sin(x): tells the rule from the function."""
    return np.sin(x)


vsin2.defvjp(lambda x: (vsin2(x), x), lambda x, g: (2 * np.cos(x) * g,))

X = xr.DataArray([0.3, -1.2, 2.0], dims="i")


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_hessian_equals_the_analytic_hessian():
    s = sigmoid(X.values)
    H = lf.hessian(lambda x: log1pexp(x).sum())(X)
    assert H.dims == ("i", "i_wrt")
    close(H, np.diag(s * (1 - s)))
    # hessian = jacfwd(jacrev): the forward level differentiates bwd, written in NumPy
    close(lf.hessian(lambda x: log1pexp(x).sum())(xr.DataArray([40.0, 0.0], dims="i")),
          np.diag([0.0, 0.25]))


def test_jacfwd_equals_jacrev_and_jvp_central_differences():
    close(lf.jacfwd(log1pexp)(X), lf.jacrev(log1pexp)(X))
    u = xr.DataArray([0.5, -1.0, 2.0], dims="i")
    out, tangent = lf.jvp(log1pexp, (X,), (u,))
    close(out, np.log1p(np.exp(X.values)))
    h = 1e-6
    fd = (np.log1p(np.exp(X.values + h * u.values)) - np.log1p(np.exp(X.values - h * u.values))) / (2 * h)
    close(tangent, fd, rtol=1e-6)


@pytest.mark.parametrize("how", ["jvp(vmap)", "jacfwd(vmap)", "vmap(jvp)", "vmap(jacfwd)", "jacfwd(jacfwd)",
                                 "jacrev(jacfwd)", "jvp(grad)"])
def test_compositions(how):
    s = sigmoid(X.values)
    ones = xr.ones_like(X)
    if how == "jvp(vmap)":
        close(lf.jvp(lf.vmap(log1pexp, "i"), (X,), (ones,))[1], s)
    elif how == "jacfwd(vmap)":
        close(lf.jacfwd(lf.vmap(log1pexp, "i"))(X), np.diag(s))
    elif how == "vmap(jvp)":
        close(lf.vmap(lambda z: lf.jvp(log1pexp, (z,), (xr.ones_like(z),))[1], "i")(X), s)
    elif how == "vmap(jacfwd)":
        close(lf.vmap(lf.jacfwd(log1pexp), "i")(X), s)
    elif how == "jacfwd(jacfwd)":
        close(lf.jacfwd(lf.jacfwd(log1pexp))(X), np.einsum("i,ij,ik->ijk", s * (1 - s), np.eye(3), np.eye(3)))
    elif how == "jacrev(jacfwd)":
        close(lf.jacrev(lf.jacfwd(log1pexp))(X), np.einsum("i,ij,ik->ijk", s * (1 - s), np.eye(3), np.eye(3)))
    elif how == "jvp(grad)":
        close(lf.jvp(lf.grad(lambda x: log1pexp(x).sum()), (X,), (ones,))[1], s * (1 - s))


def test_forward_mode_differentiates_the_function_and_lower_levels_keep_the_rule():
    x0 = 0.7
    x = xr.DataArray(x0)
    # jvp: the function's own derivative, cos(x), not the rule's 2 cos(x)
    close(lf.jvp(vsin2, (x,), (xr.DataArray(1.0),))[1], np.cos(x0))
    close(lf.jacfwd(vsin2)(x), np.cos(x0))
    # reverse mode still uses the rule
    close(lf.jacrev(vsin2)(x), 2 * np.cos(x0))
    # grad of jvp's primal output: the reverse level below the jvp uses the rule
    close(lf.grad(lambda z: lf.jvp(vsin2, (z,), (xr.DataArray(1.0),))[0])(x), 2 * np.cos(x0))
    # grad of the tangent differentiates the function's forward derivative: -sin
    close(lf.grad(lambda z: lf.jvp(vsin2, (z,), (xr.DataArray(1.0),))[1])(x), -np.sin(x0))
    # hessian = jacfwd(jacrev): the forward level differentiates bwd, 2 cos → -2 sin
    close(lf.hessian(vsin2)(x), -2 * np.sin(x0))


def test_linearize_through_custom_vjp():
    out, jvp_fn = lf.linearize(log1pexp, X)
    close(jvp_fn(xr.ones_like(X)), sigmoid(X.values))
