"""Missing values that a reduction skips: the loss does not depend on them, so its
derivatives are finite, in reverse mode as in forward mode.

A fit to observations with a gap (NaN) computes the residual at the gap too (NaN) and
xarray's ``mean`` skips it: the cotangent there is 0, and it meets the partial
derivative of every operation the residual went through, NaN at the gap.  The rules
multiply cotangents NaN-safely (a zero cotangent stays zero against a partial that is
not finite), so reverse mode gives what forward mode and central differences give.
(JAX and torch give NaN there.)  Oracles: ``lf.jacfwd`` (forward mode: the skipping
reduction drops the NaN tangent by its primal) and central differences.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.special
import xarray as xr

import labeled_func as lf

T = xr.DataArray(np.linspace(0.0, 1.0, 6), dims="time")
OBSERVED = xr.DataArray([0.1, 0.45, np.nan, 1.2, 1.33, 2.1], dims="time")  # one gap
PARAMS = xr.Dataset({"a": 1.5, "b": 0.2})


def _residual(p):
    return p.a * T + p.b - OBSERVED


def _huber(r, delta=0.1):
    return xr.where(abs(r) < delta, 0.5 * r ** 2, delta * (abs(r) - delta / 2))


LOSSES = {
    "square": lambda p: np.square(_residual(p)).mean(),
    "l1": lambda p: abs(_residual(p)).mean(),
    "log_cosh": lambda p: np.log(np.cosh(_residual(p))).mean(),
    "huber": lambda p: _huber(_residual(p)).mean(),
    "exp": lambda p: np.exp(_residual(p)).mean(),
    "tanh": lambda p: np.tanh(_residual(p)).sum(),
    "logaddexp": lambda p: np.logaddexp(_residual(p), 0.3).mean(),
    "erf": lambda p: scipy.special.erf(_residual(p)).mean(),
    "expit": lambda p: scipy.special.expit(_residual(p)).mean(),
}


def _central(f, p, step=1e-6):
    return {name: (float(f(p.assign({name: p[name] + step}))) - float(f(p.assign({name: p[name] - step})))) / (2 * step)
            for name in p.data_vars}


@pytest.mark.parametrize("name", LOSSES)
def test_a_skipped_gap_leaves_the_gradient_finite_in_reverse_mode(name):
    f = LOSSES[name]
    assert np.isfinite(float(f(PARAMS)))
    reverse, forward = lf.grad(f)(PARAMS), lf.jacfwd(f)(PARAMS)
    central = _central(f, PARAMS)
    for key in PARAMS.data_vars:
        assert np.isfinite(float(reverse[key])), (name, key)
        np.testing.assert_allclose(float(reverse[key]), float(forward[key]), rtol=1e-12)
        np.testing.assert_allclose(float(reverse[key]), central[key], rtol=1e-6, atol=1e-9)


UNARY = {
    "abs": np.abs, "square": np.square, "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "arctan": np.arctan, "sinh": np.sinh,
    "cosh": np.cosh, "tanh": np.tanh, "arcsinh": np.arcsinh,
    "erf": scipy.special.erf, "erfc": scipy.special.erfc, "expit": scipy.special.expit,
    "gammaln": scipy.special.gammaln, "ndtr": scipy.special.ndtr, "log_expit": scipy.special.log_expit,
    "dawsn": scipy.special.dawsn, "i0e": scipy.special.i0e, "j0": scipy.special.j0,
}


@pytest.mark.parametrize("name", UNARY)
def test_every_unary_rule_keeps_a_zero_cotangent_zero_against_a_nan_partial(name):
    """op(x * c) summed with skipna, c holding a NaN: the element at the NaN is skipped, so
    d/dx there is 0 and the others are c * op'(x c), in both modes."""
    op = UNARY[name]
    c = xr.DataArray([np.nan, 0.7, 1.1, 1.3], dims="i")
    x = xr.DataArray([0.4, 0.5, 0.6, 0.35], dims="i")

    def f(v):
        return op(v * c).sum()

    reverse, forward = lf.grad(f)(x).values, lf.jacfwd(f)(x).values
    assert np.isfinite(reverse).all() and reverse[0] == 0.0, (name, reverse)
    np.testing.assert_allclose(reverse, forward, rtol=1e-12, atol=0)
    step = 1e-6
    central = [(float(f(x + step * e)) - float(f(x - step * e))) / (2 * step)
               for e in (xr.DataArray(np.eye(4)[k], dims="i") for k in range(4))]
    np.testing.assert_allclose(reverse, central, rtol=1e-6, atol=1e-9)


def test_a_skipped_gap_leaves_per_sample_and_jitted_gradients_finite():
    """The same fit per station (vmap) and under lf.jit: every station's gradient is
    finite, the jitted one the eager one's bits."""
    observed = xr.concat([OBSERVED, OBSERVED.shift(time=2), OBSERVED * 0.5], dim="station")
    params = xr.Dataset({"a": ("station", [1.5, 1.0, 0.5]), "b": ("station", [0.2, 0.0, -0.1])})

    def loss(p, obs):
        return abs(p.a * T + p.b - obs).mean()

    per_station = lf.vmap(lf.grad(loss), dim="station")
    eager = per_station(params, observed)
    jitted = lf.jit(per_station)
    for _ in range(3):  # the trace, then replays
        got = jitted(params, observed)
        xr.testing.assert_identical(got, eager)
    for k in range(3):
        one = lf.grad(loss)(params.isel(station=k), observed.isel(station=k))
        for key in ("a", "b"):
            assert np.isfinite(float(eager[key][k]))
            np.testing.assert_allclose(float(eager[key][k]), float(one[key]), rtol=1e-12)


H = xr.DataArray([[np.nan, np.nan, np.nan], [1.0, 2.0, 0.5], [0.0, 1.0, 3.0], [2.0, -1.0, 1.0]], dims=("obs", "j"))
Y = xr.DataArray([0.0, 1.0, 2.0, 0.5], dims="obs")
V = xr.DataArray([0.3, -0.2, 0.7], dims="j")
OPERATORS = {
    "xr.dot": lambda v: xr.dot(H, v, dim="j"),
    "matmul": lambda v: H @ v,
    "np.dot": lambda v: xr.DataArray(np.dot(H.data, v.data), dims="obs"),
    "np.einsum": lambda v: xr.DataArray(np.einsum("ij,j->i", H.data, v.data), dims="obs"),
    "np.tensordot": lambda v: xr.DataArray(np.tensordot(H.data, v.data, axes=1), dims="obs"),
    "matrix @ matrix": lambda v: xr.DataArray((H.data @ np.stack([v.data, 2 * v.data], axis=1)).sum(-1), dims="obs"),
}


@pytest.mark.parametrize("name", OPERATORS)
def test_an_observation_operator_with_a_missing_row_leaves_the_gradient_finite(name):
    """A linear observation operator H with one row missing (NaN) and a loss that skips the
    missing observation: the gradient is the least-squares one of the other rows, in
    reverse mode (the contraction's cotangent is NaN-safe) as in forward mode."""
    operator = OPERATORS[name]

    def loss(v):
        return ((operator(v) - Y) ** 2).mean()

    rows = H.isel(obs=slice(1, None)).values
    scale = 2.0 if name != "matrix @ matrix" else 6.0  # that operator is 3 H v
    exact = scale * rows.T @ (scale / 2 * rows @ V.values - Y.values[1:]) / 3
    reverse = lf.grad(loss)(V).values
    np.testing.assert_allclose(reverse, exact, rtol=1e-12)
    np.testing.assert_allclose(lf.jacrev(loss)(V).values, lf.jacfwd(loss)(V).values, rtol=1e-12)
    np.testing.assert_allclose(lf.jit(lf.grad(loss))(V).values, reverse, rtol=0)
    np.testing.assert_allclose(lf.jit(lf.grad(loss))(V * 1.0).values, reverse, rtol=0)


def test_an_infinite_entry_against_a_non_zero_cotangent_stays_infinite():
    """The mask drops only the pairs of a zero cotangent: an infinity (or NaN) the loss
    reads still reaches the gradient, with its sign."""
    a = xr.DataArray([[np.inf, 1.0], [2.0, 3.0]], dims=("i", "j"))
    v = xr.DataArray([1.0, 2.0], dims="j")
    signs = xr.DataArray([1.0, -1.0], dims="i")
    gradient = lf.grad(lambda v: (xr.dot(a, v, dim="j") * signs).sum())(v).values
    assert gradient[0] == np.inf and gradient[1] == -2.0
    masked = lf.grad(lambda v: (xr.dot(a, v, dim="j") * xr.DataArray([0.0, 1.0], dims="i")).sum())(v).values
    np.testing.assert_array_equal(masked, [2.0, 3.0])  # the inf row is not read: 0, not NaN
    both = xr.DataArray([[np.inf, 1.0], [-np.inf, 3.0]], dims=("i", "j"))
    opposite = lf.grad(lambda v: xr.dot(both, v, dim="j").sum())(v).values
    assert np.isnan(opposite[0]) and opposite[1] == 4.0  # inf - inf


def test_the_nan_safe_contraction_on_array_api_strict_arrays_and_without_a_warning():
    """The masked path in the standard's functions only (array-api-strict: no Python scalars
    where arrays are required), and NumPy's: the 0 * inf it masks warns nobody."""
    import warnings

    import array_api_strict as xps

    from labeled_func_kernels.linalg import MATMUL, _safe_contraction_impl
    g, other = [[0.0, 1.0], [2.0, 0.0]], [[np.inf, 1.0], [2.0, 3.0]]
    expected = [[2.0, 3.0], [np.inf, 2.0]]  # the zero cotangents against inf add 0
    for subscripts in (MATMUL, "ij,jk->ik"):
        got = _safe_contraction_impl(xps.asarray(g), xps.asarray(other), subscripts=subscripts, cotangent=0)
        np.testing.assert_array_equal(np.asarray(got), expected)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = _safe_contraction_impl(np.array(g), np.array(other), subscripts=subscripts, cotangent=0)
        np.testing.assert_array_equal(got, expected)
    # the other operand first (a^T @ g): the cotangent is operand 1
    got = _safe_contraction_impl(np.array(other).T, np.array(g), subscripts=MATMUL, cotangent=1)
    np.testing.assert_array_equal(got, [[4.0, np.inf], [6.0, 1.0]])  # inf * 0 masked at (0, 0)


@pytest.mark.parametrize("contract", [lambda h, v: h @ v, lambda h, v: xr.dot(h, v, dim="j")], ids=["matmul", "xr.dot"])
def test_per_station_operators_with_missing_rows_under_vmap_jit_and_hessian(contract):
    """The NaN-safe contraction batched (each station its own operator and gaps), jitted
    (the replay's bits, other values), and differentiated again (its JVP: the Hessian of a
    least-squares loss is 2 H^T H / n over the rows kept)."""
    rng = np.random.default_rng(8)
    h = xr.DataArray(rng.normal(size=(5, 4, 3)), dims=("station", "obs", "j"))
    h[1, 0, :] = np.nan
    h[3, 2, :] = np.nan
    y = xr.DataArray(rng.normal(size=(5, 4)), dims=("station", "obs")).where(~h.isnull().any("j"))
    v = xr.DataArray(rng.normal(size=(5, 3)), dims=("station", "j"))

    def loss(v, h, y):
        return ((contract(h, v) - y) ** 2).mean()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the forward pass's NaN rows
        per_station = lf.vmap(lf.grad(loss), dim="station")
        got = per_station(v, h, y)
        loop = xr.concat([lf.grad(loss)(v.isel(station=k), h.isel(station=k), y.isel(station=k)) for k in range(5)],
                         dim="station")
        assert np.isfinite(got.values).all()
        np.testing.assert_allclose(got.transpose(*loop.dims).values, loop.values, rtol=1e-12)
        jitted = lf.jit(per_station)
        for scale in (1.0, 2.0):
            np.testing.assert_array_equal(jitted(v * scale, h, y).values, per_station(v * scale, h, y).values)
        kept = h.isel(station=1).values[1:]
        hessian = lf.hessian(loss)(v.isel(station=1), h.isel(station=1), y.isel(station=1))
        np.testing.assert_allclose(hessian.values, 2 * kept.T @ kept / 3, rtol=1e-10)
