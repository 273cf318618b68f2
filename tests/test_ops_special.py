"""The scipy.special ufuncs of tests/opinfo_special.py where the operator table cannot reach:
derivatives against calculus (the formulas, SciPy's own derivative functions jvp/yvp/ivp/kvp) and
central differences at chosen points (0 for exprel and the first-order Bessel functions, 1 for
spence, the zeros of 1/Gamma), SciPy's values at the edges, a differentiated order (zeta's x)
refused by name, polygamma's advice, use from xarray; the incomplete gamma functions
(differentiable in x only), SciPy's functions that convert their input (the composition to
write), I1 at 0 and xlogy at the origin.
"""
import math
import warnings

import numpy as np
import pytest
import scipy.special as sp
import xarray as xr

import labeled_func as lf

SQRT_PI = math.sqrt(math.pi)
DEG = math.pi / 180.0


def floats(x):
    """``x`` as a float64 array (a complex one as it is)."""
    return np.asarray(x) if np.iscomplexobj(x) else np.asarray(x, dtype=float)


def values(function, x):
    return lf.vmap(function, in_dims=(0,))(floats(x))


def slope(function, x):
    """d function / dx at each point of ``x``, by per-example reverse mode."""
    return lf.vmap(lf.grad(function), in_dims=(0,))(np.asarray(x, dtype=float))


def forward_slope(function, x):
    x = np.asarray(x, dtype=float)
    return lf.jvp(function, (x,), (np.ones_like(x),))[1]


def central(function, x, h=1e-6):
    x = np.asarray(x, dtype=float)
    with np.errstate(all="ignore"):
        return (function(x + h) - function(x - h)) / (2 * h)


def quietly(function, *args):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args)


# --- one argument -----------------------------------------------------------------------------
X = np.array([-2.5, -0.7, -0.01, 0.3, 1.1, 4.0])
POS = np.array([0.05, 0.4, 1.0, 2.7, 8.0])
ONE_ARGUMENT = [
    # (function, points, derivative by calculus)
    (sp.erfcx, X, lambda x: 2 * x * sp.erfcx(x) - 2 / SQRT_PI),
    (sp.rgamma, np.array([-2.5, -0.3, 0.2, 1.5, 4.2]), lambda x: -sp.rgamma(x) * sp.digamma(x)),
    (sp.log_expit, np.array([-40.0, -3.0, 0.0, 2.0, 40.0]), lambda x: sp.expit(-x)),
    (sp.entr, POS, lambda x: -(np.log(x) + 1)),
    (sp.dawsn, X, lambda x: 1 - 2 * x * sp.dawsn(x)),
    (sp.expi, np.array([-3.0, -0.2, 0.1, 2.0, 30.0]), lambda x: np.exp(x) / x),
    (sp.exp1, POS, lambda x: -np.exp(-x) / x),
    (sp.spence, np.array([0.1, 0.5, 0.98, 1.02, 3.0]), lambda z: np.log(z) / (1 - z)),
    (sp.exprel, np.array([-5.0, -0.3, 0.02, 0.7, 10.0]), lambda x: (x * np.exp(x) - np.exp(x) + 1) / x**2),
    (sp.j0, X, lambda x: -sp.jv(1, x)),
    (sp.j1, X, lambda x: sp.jvp(1, x)),
    (sp.y0, POS, lambda x: sp.yvp(0, x)),
    (sp.y1, POS, lambda x: sp.yvp(1, x)),
    (sp.k0, POS, lambda x: sp.kvp(0, x)),
    (sp.k1, POS, lambda x: sp.kvp(1, x)),
    (sp.k0e, POS, lambda x: np.exp(x) * (sp.kvp(0, x) + sp.kv(0, x))),
    (sp.k1e, POS, lambda x: np.exp(x) * (sp.kvp(1, x) + sp.kv(1, x))),
    (sp.i0e, X, lambda x: np.exp(-abs(x)) * (sp.ivp(0, x) - np.sign(x) * sp.iv(0, x))),
    (sp.i1e, X, lambda x: np.exp(-abs(x)) * (sp.ivp(1, x) - np.sign(x) * sp.iv(1, x))),
    (sp.log1p, np.array([-0.5, 0.0, 3.0]), lambda x: 1 / (1 + x)),
    (sp.expm1, X, np.exp),
    (sp.cbrt, np.array([-8.0, -0.1, 2.0]), lambda x: 1 / (3 * np.cbrt(x) ** 2)),
    (sp.exp2, X, lambda x: math.log(2) * 2.0**x),
    (sp.exp10, X, lambda x: math.log(10) * 10.0**x),
    # cosdg(90) is 0, where NumPy's cos(pi / 2) is not
    (sp.sindg, np.array([-200.0, 0.0, 30.0, 90.0, 361.0]), lambda x: DEG * sp.cosdg(x)),
    (sp.cosdg, np.array([-200.0, 0.0, 30.0, 90.0, 361.0]), lambda x: -DEG * sp.sindg(x)),
    (sp.tandg, np.array([-80.0, 0.0, 30.0, 45.0]), lambda x: DEG * (1 + sp.tandg(x) ** 2)),
    (sp.cotdg, np.array([10.0, 45.0, 90.0, 170.0]), lambda x: -DEG * (1 + sp.cotdg(x) ** 2)),
    (lambda x: sp.sici(x)[0], X, lambda x: np.sin(x) / x),
    (lambda x: sp.sici(x)[1], X, lambda x: np.cos(x) / x),
]


@pytest.mark.parametrize("function, points, derivative", ONE_ARGUMENT,
                         ids=[getattr(case[0], "__name__", "sici") for case in ONE_ARGUMENT])
def test_one_argument_values_are_scipys_and_derivatives_follow_calculus(function, points, derivative):
    np.testing.assert_allclose(values(function, points), function(points), rtol=1e-15, atol=0)
    expected = derivative(points)
    np.testing.assert_allclose(slope(function, points), expected, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(forward_slope(function, points), expected, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(slope(function, points), central(function, points), rtol=1e-6)


@pytest.mark.parametrize("function, points", [
    (sp.erfcx, X), (sp.rgamma, np.array([-2.5, -0.3, 0.2, 1.5])), (sp.spence, np.array([0.3, 0.97, 1.0, 1.04, 2.0])),
    (sp.exprel, np.array([-2.0, -1e-3, 0.0, 3e-3, 0.5])), (sp.j1, np.array([-1.0, 0.0, 2.0])),
    (sp.y1, POS), (sp.k1e, POS), (sp.expi, np.array([-1.0, 0.5, 3.0])), (sp.dawsn, X),
], ids=["erfcx", "rgamma", "spence", "exprel", "j1", "y1", "k1e", "expi", "dawsn"])
def test_second_derivatives_match_differences_of_the_first(function, points):
    second = slope(lf.grad(function), points)
    np.testing.assert_allclose(second, central(lambda x: slope(function, x), points, 1e-5), rtol=1e-6, atol=1e-9)


def test_first_order_bessel_and_sine_integral_at_zero_by_calculus():
    # J1(x) = x/2 - x**3/16 + ...: J1'(0) = 1/2 and J1''(0) = 0; Si'(0) = sin(x)/x at 0 = 1
    assert slope(sp.j1, [0.0])[0] == 0.5
    assert slope(lf.grad(sp.j1), [0.0])[0] == 0.0
    assert slope(lambda x: sp.sici(x)[0], [0.0])[0] == 1.0
    assert slope(sp.j0, [0.0])[0] == 0.0


def test_exprel_near_zero_by_its_series():
    # exprel(x) = sum x**k / (k + 1)!: exprel'(0) = 1/2, exprel''(0) = 2/3! = 1/3; near 0 the
    # derivative 1/2 + x/3 + x**2/8 + x**3/30 to rounding
    assert slope(sp.exprel, [0.0])[0] == 0.5
    np.testing.assert_allclose(slope(lf.grad(sp.exprel), [0.0]), [1 / 3], rtol=1e-15)
    x = np.array([-9e-2, -1e-5, 1e-12, 1e-8, 4e-3, 0.0099, 0.0101, 0.099, 0.101])
    series = sum(k * x ** (k - 1) / math.factorial(k + 1) for k in range(1, 16))
    np.testing.assert_allclose(slope(sp.exprel, x), series, rtol=1e-14)


def test_spence_at_and_near_one():
    # spence(z) = integral from 1 to z of log(t) / (1 - t): slope -1 at 1; log(z) / (1 - z) =
    # -(1 - e/2 + e**2/3 - ...) with e = z - 1, so its derivative there is 1/2
    assert slope(sp.spence, [1.0])[0] == -1.0
    np.testing.assert_allclose(slope(lf.grad(sp.spence), [1.0]), [0.5], rtol=1e-15)
    z = 1.0 + np.array([-1e-2, -3e-3, -1e-9, 1e-9, 5e-3, 1.1e-2])
    e = z - 1.0
    np.testing.assert_allclose(slope(sp.spence, z), -np.log1p(e) / e, rtol=1e-15)  # z - 1 is exact here
    np.testing.assert_allclose(slope(sp.spence, z), central(sp.spence, z, 1e-5), rtol=1e-8)
    assert quietly(slope, sp.spence, [0.0])[0] == -np.inf


def test_rgamma_at_its_zeros():
    # near x = -n, 1/Gamma(x) = (-1)**n n! (x + n) + ...: its slope there is (-1)**n n!
    n = np.arange(0, 5)
    np.testing.assert_allclose(slope(sp.rgamma, -n), [(-1) ** k * math.factorial(k) for k in n], rtol=1e-14)
    np.testing.assert_allclose(slope(sp.rgamma, -n), central(sp.rgamma, -n.astype(float)), rtol=1e-7)


def test_edge_values_are_scipys():
    x = np.array([-np.inf, -1.0, -0.0, 0.0, 1e-300, 1.0, np.inf, np.nan])
    for function in (sp.entr, sp.exprel, sp.log_expit, sp.erfcx, sp.spence, sp.rgamma, sp.y0, sp.k1e):
        expected = quietly(function, x)
        np.testing.assert_array_equal(quietly(values, function, x), expected, err_msg=function.__name__)
    y = np.array([-1.0, 0.0, 0.0, 2.0, 2.0, np.inf, 1.0, 0.5])
    for function in (sp.rel_entr, sp.kl_div, sp.huber, sp.pseudo_huber, sp.boxcox, sp.boxcox1p):
        got = quietly(lf.vmap(function, in_dims=(0, 0)), x, y)
        np.testing.assert_array_equal(got, quietly(function, x, y), err_msg=function.__name__)


def test_entropy_slopes_at_zero_and_below():
    # -x log x: the one-sided slope at 0 is +inf; below 0 entr is -inf, without a derivative
    got = quietly(slope, sp.entr, [0.0, -1.0])
    assert got[0] == np.inf and np.isnan(got[1])
    # a zero cotangent stays zero against the infinite slope (xarray masks with where)
    masked = quietly(lf.grad(lambda x: np.where(x > 0, sp.entr(x), 0.0).sum()), np.array([0.0, 0.5]))
    np.testing.assert_allclose(masked, [0.0, -(math.log(0.5) + 1)], rtol=1e-15)


def test_radian_is_linear_in_its_three_arguments():
    d, m, s = np.array([10.0, -3.0]), np.array([30.0, 5.0]), np.array([15.0, 59.0])
    np.testing.assert_allclose(lf.vmap(sp.radian, in_dims=(0, 0, 0))(d, m, s), sp.radian(d, m, s), rtol=1e-15)
    grads = lf.grad(lambda d, m, s: sp.radian(d, m, s).sum(), argnums=(0, 1, 2))(d, m, s)
    for got, per_unit in zip(grads, (DEG, DEG / 60, DEG / 3600)):
        np.testing.assert_allclose(got, [per_unit] * 2, rtol=1e-15)


def test_lambertw_derivatives_on_its_branches():
    # z = W e**W, so W' = W / (z (1 + W)); W = z - z**2 + 3 z**3 / 2 - ...: W'(0) = 1, W''(0) = -2
    z = np.array([-0.3, 0.2, 1.0, 5.0])
    for k in (0, -1, 1):
        w = sp.lambertw(z, k)
        np.testing.assert_array_equal(lf.vmap(lambda z: sp.lambertw(z, k), in_dims=(0,))(z), w)
        got = lf.jvp(lambda z: sp.lambertw(z, k), (z,), (np.ones_like(z),))[1]
        np.testing.assert_allclose(got, w / (z * (1 + w)), rtol=1e-12)
        np.testing.assert_allclose(slope(lambda z: sp.lambertw(z, k).real, z), (w / (z * (1 + w))).real, rtol=1e-12)
    zc = np.array([0.5 + 0.5j, -1.0 + 2.0j])
    w = sp.lambertw(zc)
    np.testing.assert_allclose(lf.jacfwd(sp.lambertw, holomorphic=True)(zc).diagonal(), w / (zc * (1 + w)),
                               rtol=1e-12)
    np.testing.assert_array_equal(slope(lambda z: sp.lambertw(z).real, [0.0]), [1.0])
    np.testing.assert_allclose(slope(lf.grad(lambda z: sp.lambertw(z).real), [0.0]), [-2.0], rtol=1e-15)


# --- two arguments ----------------------------------------------------------------------------
def partials(function, a, b):
    return lf.vmap(lf.grad(function, argnums=(0, 1)), in_dims=(0, 0))(np.asarray(a, float), np.asarray(b, float))


TWO_ARGUMENTS = [
    # (function, first, second, d/dfirst, d/dsecond), by calculus
    (sp.rel_entr, [0.3, 1.0, 2.5], [1.2, 1.0, 0.4], lambda x, y: np.log(x / y) + 1, lambda x, y: -x / y),
    (sp.kl_div, [0.3, 1.0, 2.5], [1.2, 1.0, 0.4], lambda x, y: np.log(x / y), lambda x, y: 1 - x / y),
    # huber: delta = 1, r inside and outside |r| <= delta
    (sp.huber, [1.0, 1.0, 0.5, 2.0], [0.3, -2.5, 0.7, -1.5],
     lambda d, r: np.where(abs(r) <= d, 0.0, abs(r) - d), lambda d, r: np.where(abs(r) <= d, r, d * np.sign(r))),
    (sp.pseudo_huber, [0.5, 1.0, 2.0, 1e-3], [0.3, -2.5, 0.0, 4.0],
     lambda d, r: 2 * d * (np.sqrt(1 + (r / d) ** 2) - 1) - r**2 / (d * np.sqrt(1 + (r / d) ** 2)),
     lambda d, r: r / np.sqrt(1 + (r / d) ** 2)),
    (sp.boxcox, [0.4, 1.0, 3.0, 7.0], [-1.5, 0.5, 1e-3, 2.0], lambda x, lm: x ** (lm - 1),
     lambda x, lm: (x**lm * np.log(x) * lm - x**lm + 1) / lm**2),
    (sp.boxcox1p, [-0.4, 0.0, 3.0, 7.0], [-1.5, 0.5, 1e-3, 2.0], lambda x, lm: (1 + x) ** (lm - 1),
     lambda x, lm: ((1 + x) ** lm * np.log1p(x) * lm - (1 + x) ** lm + 1) / lm**2),
]


@pytest.mark.parametrize("function, a, b, d_a, d_b", TWO_ARGUMENTS, ids=[c[0].__name__ for c in TWO_ARGUMENTS])
def test_two_argument_derivatives_follow_calculus(function, a, b, d_a, d_b):
    a, b = np.asarray(a), np.asarray(b)
    np.testing.assert_allclose(lf.vmap(function, in_dims=(0, 0))(a, b), function(a, b), rtol=1e-15)
    got_a, got_b = partials(function, a, b)
    np.testing.assert_allclose(got_a, d_a(a, b), rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(got_b, d_b(a, b), rtol=1e-6, atol=1e-12)  # boxcox's formula cancels at lmbda ~ 0
    np.testing.assert_allclose(got_a, central(lambda s: function(s, b), a), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(got_b, central(lambda s: function(a, s), b), rtol=1e-6, atol=1e-9)


def test_box_cox_in_lambda_at_and_near_zero():
    # (x**l - 1) / l = sum_k l**(k - 1) L**k / k! with L = log x: its slope in l is
    # sum_k (k - 1) l**(k - 2) L**k / k! = L**2 / 2 + l L**3 / 3 + l**2 L**4 / 8 + ...
    x = np.array([0.3, 2.0, 9.0])
    for function, logarithm in ((sp.boxcox, np.log), (sp.boxcox1p, np.log1p)):
        L = logarithm(x)
        np.testing.assert_allclose(lf.vmap(lf.grad(lambda l, x: function(x, l)), in_dims=(0, 0))(np.zeros(3), x),
                                   L**2 / 2, rtol=1e-15)
        lm = np.array([1e-9, -2e-4, 1e-3])
        got = lf.vmap(lf.grad(lambda l, x: function(x, l)), in_dims=(0, 0))(lm, x)
        np.testing.assert_allclose(got, L**2 / 2 + lm * L**3 / 3 + lm**2 * L**4 / 8 + lm**3 * L**5 / 30
                                   + lm**4 * L**6 / 144, rtol=1e-13)


def test_pseudo_huber_at_delta_zero_and_r_zero():
    # delta (hypot(delta, r) - delta): d/ddelta -> |r| and d/dr -> 0 as delta -> 0; at r = 0 both are 0
    got_delta, got_r = partials(sp.pseudo_huber, [1e-300, 1.5], [-2.0, 0.0])
    np.testing.assert_allclose(got_delta, [2.0, 0.0], rtol=1e-15)
    np.testing.assert_allclose(got_r, [0.0, 0.0], atol=1e-300)


Z = np.array([0.3, 1.0, 2.2, 6.5])
BESSEL = [
    # (name, order, derivative by SciPy's own derivative functions)
    ("jv", 1.5, lambda v, z: sp.jvp(v, z)),
    ("jn", 2, lambda v, z: sp.jvp(v, z)),
    ("yv", -0.5, lambda v, z: sp.yvp(v, z)),
    ("yn", 3, lambda v, z: sp.yvp(v, z)),
    ("iv", 2.5, lambda v, z: sp.ivp(v, z)),
    ("kv", 0.0, lambda v, z: sp.kvp(v, z)),
    ("kn", 2, lambda v, z: sp.kvp(v, z)),
    ("ive", 0.5, lambda v, z: np.exp(-abs(z)) * (sp.ivp(v, z) - np.sign(z) * sp.iv(v, z))),
    ("kve", 1.5, lambda v, z: np.exp(z) * (sp.kvp(v, z) + sp.kv(v, z))),
]


@pytest.mark.parametrize("name, order, derivative", BESSEL, ids=[case[0] for case in BESSEL])
def test_bessel_derivatives_in_z_are_scipys_derivatives(name, order, derivative):
    function = getattr(sp, name)
    np.testing.assert_allclose(values(lambda z: function(order, z), Z), function(order, Z), rtol=1e-15)
    np.testing.assert_allclose(slope(lambda z: function(order, z), Z), derivative(order, Z), rtol=1e-12)
    second = slope(lf.grad(lambda z: function(order, z)), Z)
    np.testing.assert_allclose(second, central(lambda z: slope(lambda s: function(order, s), z), Z, 1e-5),
                               rtol=1e-6)
    # the order mapped (each example its own, held constant) beside a differentiated z
    orders = np.array([0.0, 1.0, 2.0, 3.0]) if name in ("yn", "kn") else np.array([-0.5, 0.0, 1.5, 2.0])
    per_example = lf.vmap(lf.grad(lambda z, v: function(v, z)), in_dims=(0, 0))(Z, orders)
    np.testing.assert_allclose(per_example, derivative(orders, Z), rtol=1e-12)


@pytest.mark.parametrize("name", ["iv", "ive", "jv", "jn", "yv", "yn", "kv", "kve", "kn"])
def test_a_differentiated_bessel_order_raises_naming_the_function(name):
    function = getattr(sp, name)
    shown = "jv" if name == "jn" else name  # jn is jv
    order = "n" if name in ("yn", "kn") else "v"
    with pytest.raises(lf.UnsupportedOperationError,
                       match=rf"scipy\.special\.{shown}\({order}, z\).*pass {order} as a constant"):
        lf.grad(lambda v: function(v, 1.3).sum())(np.array([0.5, 1.0]))
    with pytest.raises(lf.UnsupportedOperationError, match=rf"scipy\.special\.{shown}"):
        lf.jvp(lambda v: function(v, 1.3), (np.array([0.5, 1.0]),), (np.ones(2),))


def test_bessel_functions_of_a_complex_z():
    # holomorphic off the cut: the complex derivative is SciPy's (kve = e**z kv); ive is not holomorphic
    z = np.array([0.5 + 0.2j, 1.0 - 1.0j, -0.3 + 2.0j])
    for name, derivative in (("jv", sp.jvp), ("yv", sp.yvp), ("iv", sp.ivp), ("kv", sp.kvp),
                             ("kve", lambda v, z: np.exp(z) * (sp.kvp(v, z) + sp.kv(v, z)))):
        function = getattr(sp, name)
        np.testing.assert_array_equal(values(lambda z: function(1.5, z), z), function(1.5, z))
        got = lf.jacfwd(lambda z: function(1.5, z), holomorphic=True)(z).diagonal()
        np.testing.assert_allclose(got, derivative(1.5, z), rtol=1e-12, err_msg=name)
    np.testing.assert_array_equal(values(lambda z: sp.ive(1.5, z), z), sp.ive(1.5, z))
    with pytest.raises(lf.UnsupportedOperationError, match=r"scipy\.special\.ive\(v, z\) of a complex z"):
        lf.jvp(lambda z: sp.ive(1.5, z), (z,), (np.ones_like(z),))


def test_hurwitz_zeta_in_q_and_refused_in_x():
    # d/dq sum_k (k + q)**-x = -x zeta(x + 1, q)
    x, q = 2.5, np.array([0.2, 1.0, 3.3])
    np.testing.assert_allclose(values(lambda q: sp.zeta(x, q), q), sp.zeta(x, q), rtol=1e-15)
    np.testing.assert_allclose(slope(lambda q: sp.zeta(x, q), q), -x * sp.zeta(x + 1, q), rtol=1e-12)
    np.testing.assert_allclose(slope(lambda q: sp.zeta(x, q), q), central(lambda q: sp.zeta(x, q), q), rtol=1e-6)
    with pytest.raises(lf.UnsupportedOperationError, match=r"scipy\.special\.zeta\(x, q\).*pass x as a constant"):
        lf.grad(lambda x: sp.zeta(x, 1.5).sum())(np.array([2.0, 3.0]))


def test_riemann_zeta_values_under_vmap_and_refused_under_grad():
    x = np.array([-3.5, -2.0, 0.0, 0.5, 2.0, 7.0])
    np.testing.assert_array_equal(values(sp.zeta, x), sp.zeta(x))
    with pytest.raises(lf.UnsupportedOperationError, match=r"scipy\.special\.zeta\(x\).*Riemann"):
        lf.grad(lambda x: sp.zeta(x).sum())(np.array([2.0, 3.0]))


def test_polygamma_says_what_to_write_and_the_composition_is_traced():
    x = np.array([0.3, 1.7, 4.0])
    with pytest.raises(lf.ConversionError) as excinfo:
        lf.grad(lambda x: sp.polygamma(1, x).sum())(x)
    message = str(excinfo.value)
    assert "scipy.special.polygamma" in message and "scipy.special.zeta(n + 1, x)" in message, message
    for n in (1, 2, 3):
        def written(x, n=n):
            return (-1) ** (n + 1) * math.factorial(n) * sp.zeta(n + 1, x)

        np.testing.assert_allclose(values(written, x), sp.polygamma(n, x), rtol=1e-13)
        np.testing.assert_allclose(slope(written, x), sp.polygamma(n + 1, x), rtol=1e-12)
    np.testing.assert_allclose(slope(sp.digamma, x), sp.polygamma(1, x), rtol=1e-12)


# --- from xarray ------------------------------------------------------------------------------
def test_from_xarray_under_vmap_and_grad_coords_kept():
    rng = np.random.default_rng(7)
    da = xr.DataArray(rng.uniform(0.5, 3.0, size=(3, 4)), dims=("sample", "t"),
                      coords={"sample": [10, 20, 30], "t": [0.0, 0.1, 0.2, 0.3]})
    mapped = lf.vmap(lambda d: xr.apply_ufunc(sp.jv, 1.5, d), dim="sample")(da)
    xr.testing.assert_allclose(mapped, xr.apply_ufunc(sp.jv, 1.5, da))
    assert mapped.dims == da.dims and all(mapped[c].equals(da[c]) for c in da.coords)
    grad = lf.grad(lambda d: xr.apply_ufunc(sp.jv, 1.5, d).sum())(da)
    assert grad.dims == da.dims and grad["t"].equals(da["t"]) and grad["sample"].equals(da["sample"])
    np.testing.assert_allclose(grad.values, sp.jvp(1.5, da.values), rtol=1e-12)
    per_sample = lf.vmap(lf.grad(lambda d: sp.erfcx(d).sum()), dim="sample")(da)
    assert per_sample.dims == da.dims and per_sample["sample"].equals(da["sample"])
    x = da.values
    np.testing.assert_allclose(per_sample.transpose(*da.dims).values, 2 * x * sp.erfcx(x) - 2 / SQRT_PI,
                               rtol=1e-12)
    xr.testing.assert_allclose(lf.vmap(sp.erfcx, dim="sample")(da), sp.erfcx(da))


# --- scipy.special ------------------------------------------------------------------------------
# incomplete gamma functions, SciPy functions that convert their input, I1 and xlogy at 0
SAMPLES = np.random.default_rng(12).normal(size=(3, 6))


def vmap(function, *arrays):
    return lf.vmap(function, in_dims=(0,) * len(arrays))(*arrays)


@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
def test_incomplete_gamma_is_differentiable_in_x_only(name):
    function = getattr(sp, name)
    a, x = np.array([0.5, 1.5, 3.0]), np.array([0.4, 2.0, 1.1])
    with pytest.raises(lf.UnsupportedOperationError, match=rf"scipy\.special\.{name}.*respect to a"):
        lf.grad(lambda a: function(a, x).sum())(a)
    sign = 1.0 if name == "gammainc" else -1.0
    density = x ** (a - 1) * np.exp(-x) / sp.gamma(a)  # d/dx P(a, x), by calculus
    np.testing.assert_allclose(lf.grad(lambda x: function(a, x).sum())(x), sign * density, rtol=1e-12)
    # a mapped (not differentiated) beside a differentiated x
    per_example = lf.vmap(lf.grad(lambda x, a: function(a, x)), in_dims=(0, 0))(x, a)
    np.testing.assert_allclose(per_example, sign * density, rtol=1e-12)


@pytest.mark.parametrize("name, composition", [
    ("logsumexp", "np.log(np.sum(np.exp(x - m)"),
    ("softmax", "e / np.sum(e"),
    ("log_softmax", "s - np.log(np.sum(np.exp(s)"),
])
@pytest.mark.parametrize("transform", ["vmap", "grad"])
def test_scipy_functions_that_convert_their_input_say_what_to_write(name, composition, transform):
    function = getattr(sp, name)
    run = (lambda f: vmap(f, SAMPLES)) if transform == "vmap" else (lambda f: lf.grad(lambda x: f(x).sum())(SAMPLES[0]))
    with pytest.raises(lf.ConversionError) as excinfo:
        run(lambda x: function(x, axis=-1))
    message = str(excinfo.value)
    assert f"scipy.special.{name}" in message and composition in message, message


def test_the_suggested_compositions_equal_scipy():
    def logsumexp(x):
        m = np.max(x, axis=-1, keepdims=True)
        return np.squeeze(m + np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True)), axis=-1)

    def softmax(x):
        e = np.exp(x - np.max(x, axis=-1, keepdims=True))
        return e / np.sum(e, axis=-1, keepdims=True)

    np.testing.assert_allclose(vmap(logsumexp, SAMPLES), sp.logsumexp(SAMPLES, axis=-1), rtol=1e-14)
    np.testing.assert_allclose(vmap(softmax, SAMPLES), sp.softmax(SAMPLES, axis=-1), rtol=1e-14)
    np.testing.assert_allclose(lf.vmap(lf.grad(logsumexp), in_dims=(0,))(SAMPLES), sp.softmax(SAMPLES, axis=-1), rtol=1e-14)


def test_bessel_i1_derivatives_at_zero_by_calculus():
    # I1'(0) = 1/2; the scaled e^-|x| I1(x) has the same slope there
    for function in (sp.i1, sp.i1e):
        assert float(lf.grad(function)(np.array(0.0))) == 0.5
    assert float(lf.grad(lf.grad(sp.i0))(np.array(0.0))) == 0.5  # I0'' = I1' = 1/2 at 0


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_xlogy_is_zero_with_zero_derivative_in_y_at_the_origin():
    value, gradient = lf.grad_and_value(lambda y: sp.xlogy(0.0, y))(np.array(0.0))[::-1]
    assert float(value) == 0.0 and float(gradient) == 0.0
    # elsewhere x / y, and the cross derivative 1 / y also at x = 0
    cross = lf.grad(lambda x: lf.grad(lambda y: sp.xlogy(x, y))(np.array(2.0)))(np.array(0.0))
    assert float(cross) == 0.5
