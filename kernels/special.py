"""scipy.special's ufuncs as primitives: the special functions of the elementwise family.

Each is an elementwise primitive (:func:`elementwise.elementwise_primitive`: the shared batch
rule), with its derivative in the formula sheets below (:func:`elementwise.partial_rules`).
Their impls call SciPy (NumPy arrays) or cupyx.scipy (CuPy arrays), imported at the first
call: nothing here imports SciPy.  The derivatives are elementary or another of these.
``labeled_func/engine/numpy/special.py`` registers them for scipy.special's ufuncs.  None
declares a ``fusion=``: lf.jit fuses none of them.
"""
from __future__ import annotations

import importlib
import math

import numpy as np

from .backend import backend_of, dtype_kind, extra, namespace
# the family's primitives and helpers (a series, its constants) that its own rules share
from .elementwise import (_LN2, _LN10, _PI_OVER_180, _is_array, _near, _series, _sq, absolute, add, cos, divide,
                          elementwise_primitive, equal, exp, expm1, floor, hypot, less, less_equal, log, log1p,
                          logical_and, multiply, negative, partial_rules, power, remainder, sign, sin, subtract,
                          where)

_TWO_OVER_SQRT_PI = 1.1283791670955126
_SQRT_PI_OVER_TWO = 0.886226925452758
_SQRT_TWO_PI = 2.5066282746310002
_HALF_LOG_TWO_PI = 0.9189385332046728


def _special(name, part=None):
    """``scipy.special.<name>`` (or ``cupyx.scipy.special.<name>``) for the library of the
    array arguments (output ``part`` of a function with several).  On NumPy the result is
    SciPy's own (its dtype too); CuPy's is cast to the floating dtype of the inputs, as
    SciPy's loops give."""

    def function(*args):
        arrays = [arg for arg in args if hasattr(arg, "dtype")]
        backend = backend_of(arrays[0] if arrays else None)
        if backend.special is None:  # the library's own, or backend.extra's portable fallback (expit, logit)
            try:
                portable = extra(namespace(*arrays), name)
            except AttributeError:
                raise NotImplementedError(f"scipy.special.{name}: no version for {backend.name} arrays "
                                          "(NumPy and CuPy only)") from None
            return portable(*args)
        special = importlib.import_module(backend.special)
        if backend.special_needs_arrays:
            # cupyx's functions compare and broadcast their arguments as arrays (polygamma's n)
            asarray = backend.module.asarray
            args = [arg if hasattr(arg, "dtype") else asarray(arg) for arg in args]
        computed = getattr(special, name, None)
        if computed is None:
            raise NotImplementedError(f"scipy.special.{name}: {special.__name__} has no {name} for {backend.name} "
                                      "arrays")
        out = computed(*args)
        if part is not None:  # one output of a ufunc with several (sici)
            out = out[part]
        floating = [arg.dtype for arg in arrays if dtype_kind(arg.dtype) == "f"]
        if backend.special_casts_back and floating and dtype_kind(out.dtype) == "f":
            common = np.result_type(*floating)
            return out.astype(common) if out.dtype != common else out
        return out

    return function


def _special_primitive(name):
    return elementwise_primitive(name, _special(name))


erf = _special_primitive("erf")
erfc = _special_primitive("erfc")
erfinv = _special_primitive("erfinv")
erfcinv = _special_primitive("erfcinv")
gammaln = _special_primitive("gammaln")
gamma = _special_primitive("gamma")
loggamma = _special_primitive("loggamma")
gammainc = _special_primitive("gammainc")
gammaincc = _special_primitive("gammaincc")
beta = _special_primitive("beta")
betaln = _special_primitive("betaln")
ndtr = _special_primitive("ndtr")
ndtri = _special_primitive("ndtri")
log_ndtr = _special_primitive("log_ndtr")
xlogy = _special_primitive("xlogy")
xlog1py = _special_primitive("xlog1py")
i0 = _special_primitive("i0")
i0e = _special_primitive("i0e")
i1 = _special_primitive("i1")
i1e = _special_primitive("i1e")
erfcx = _special_primitive("erfcx")
rgamma = _special_primitive("rgamma")
log_expit = _special_primitive("log_expit")
entr = _special_primitive("entr")
dawsn = _special_primitive("dawsn")
expi = _special_primitive("expi")
exp1 = _special_primitive("exp1")
spence = _special_primitive("spence")
exprel = _special_primitive("exprel")
exp10 = _special_primitive("exp10")
sindg = _special_primitive("sindg")
cosdg = _special_primitive("cosdg")
tandg = _special_primitive("tandg")
cotdg = _special_primitive("cotdg")
radian = _special_primitive("radian")
j0 = _special_primitive("j0")
j1 = _special_primitive("j1")
y0 = _special_primitive("y0")
y1 = _special_primitive("y1")
k0 = _special_primitive("k0")
k1 = _special_primitive("k1")
k0e = _special_primitive("k0e")
k1e = _special_primitive("k1e")
sine_integral = elementwise_primitive("sine_integral", _special("sici", 0))  # sici's first output
cosine_integral = elementwise_primitive("cosine_integral", _special("sici", 1))  # and its second
rel_entr = _special_primitive("rel_entr")
kl_div = _special_primitive("kl_div")
huber = _special_primitive("huber")
pseudo_huber = _special_primitive("pseudo_huber")
boxcox = _special_primitive("boxcox")
boxcox1p = _special_primitive("boxcox1p")
# Bessel functions of an order v (first argument) and an argument z; yn and kn take integer orders
iv = _special_primitive("iv")
ive = _special_primitive("ive")
jv = _special_primitive("jv")
yv = _special_primitive("yv")
kv = _special_primitive("kv")
kve = _special_primitive("kve")
yn = _special_primitive("yn")
kn = _special_primitive("kn")
zeta = _special_primitive("zeta")  # Hurwitz's zeta(x, q)
riemann_zeta = elementwise_primitive("riemann_zeta", _special("zeta"))  # zeta(x), one argument
lambertw = _special_primitive("lambertw")  # lambertw(z, k, tol): the branch k of W, complex


# SciPy's own versions of NumPy's functions, and the logistic function and its inverse: SciPy's
# values and dtypes (cbrt of float16 is float64 there), the rules of NumPy's
special_cbrt = elementwise_primitive("special_cbrt", _special("cbrt"))
special_exp2 = elementwise_primitive("special_exp2", _special("exp2"))
special_expm1 = elementwise_primitive("special_expm1", _special("expm1"))
special_log1p = elementwise_primitive("special_log1p", _special("log1p"))
expit = _special_primitive("expit")
logit = _special_primitive("logit")


def _polygamma_impl(x, *, n):
    return _special("polygamma")(n, x) if n else _special("digamma")(x)


polygamma = elementwise_primitive("polygamma", _polygamma_impl)


def _gaussian(x):
    return multiply.bind(_TWO_OVER_SQRT_PI, exp.bind(negative.bind(multiply.bind(x, x))))


def _digamma(x):
    return polygamma.bind(x, n=0)


def _normal_density(x):
    """exp(-x**2 / 2) / sqrt(2 pi)."""
    return divide.bind(exp.bind(multiply.bind(-0.5, multiply.bind(x, x))), _SQRT_TWO_PI)


def _nonzero_where(x, value):
    """``x`` with ``value`` where it is 0 (a safe divisor; that branch is not selected)."""
    return where.bind(equal.bind(x, 0), value, x)


def _bessel_i1_derivative(x, i0_x, i1_x):
    """I1'(x) = I0(x) - I1(x) / x, 1/2 at 0 (the same formula for the scaled functions)."""
    return where.bind(equal.bind(x, 0), 0.5, subtract.bind(i0_x, divide.bind(i1_x, _nonzero_where(x, 1.0))))


def _quotient_zero_at_origin(x, y):
    """x / y, and 0 where both are 0 (only there: elsewhere its derivatives are x / y's)."""
    return where.bind(logical_and.bind(equal.bind(x, 0), equal.bind(y, 0)), 0.0, divide.bind(x, y))


def _lower_gamma_density(a, x):
    """d/dx P(a, x) = x**(a - 1) exp(-x) / Gamma(a), as one exp (0 where x = 0 < a - 1)."""
    return exp.bind(subtract.bind(subtract.bind(xlogy.bind(subtract.bind(a, 1.0), x), x), gammaln.bind(a)))


# d/du exprel(u) = sum_k k u**(k - 1) / (k + 1)!, to 1e-17 where |u| < 0.1
_EXPREL_SLOPE = tuple(k / math.factorial(k + 1) for k in range(1, 13))
# log(z) / (1 - z) = -log1p(e) / e = -sum_k (-e)**k / (k + 1) with e = z - 1, to 1e-17 where |e| < 0.01
_SPENCE_SLOPE = tuple(-((-1.0) ** k) / (k + 1) for k in range(9))


def _exprel_slope(u):
    """d/du (e**u - 1) / u = (e**u - exprel(u)) / u, 1/2 at 0; by its Taylor series where
    |u| < 0.1, where the quotient cancels (to 1e-14 past it; smooth at 0 to every order)."""
    return _near(u, 0.1, lambda u: _series(u, _EXPREL_SLOPE),
                 lambda u: divide.bind(subtract.bind(exp.bind(u), exprel.bind(u)), u))


def _spence_slope(z):
    """d/dz spence(z) = log(z) / (1 - z) (SciPy's spence is the integral of log(t) / (1 - t)
    from 1 to z): -1 at z = 1, by its series in z - 1 there."""
    e = subtract.bind(z, 1.0)
    return _near(e, 0.01, lambda e: _series(e, _SPENCE_SLOPE),
                 lambda e: negative.bind(divide.bind(log1p.bind(e), e)))


def _rgamma_slope(x, out):
    """d/dx 1/Gamma(x) = -digamma(x) / Gamma(x); at its zeros x = -n, where digamma has a pole,
    (-1)**n n! = (1 - 2 (x mod 2)) Gamma(1 - x)."""
    pole = logical_and.bind(less_equal.bind(x, 0), equal.bind(x, floor.bind(x)))
    regular = negative.bind(multiply.bind(out, _digamma(where.bind(pole, 0.5, x))))
    at_pole = multiply.bind(subtract.bind(1.0, multiply.bind(2.0, remainder.bind(x, 2.0))),
                            gamma.bind(subtract.bind(1.0, where.bind(pole, x, 0.0))))
    return where.bind(pole, at_pole, regular)


def _quotient_at_origin(numerator, x, value):
    """numerator / x, and ``value`` (its limit) where x = 0."""
    zero = equal.bind(x, 0)
    return where.bind(zero, value, divide.bind(numerator, where.bind(zero, 1.0, x)))


def _shifted(v, step):
    """The order v + step (an integer step keeps an integer order an integer)."""
    return add.bind(v, step) if _is_array(v) else v + step


def _neighbours(prim, v, z, sign):
    """(f(v - 1, z) + sign f(v + 1, z)) / 2: the recurrences of the derivatives of the Bessel
    functions in z (J, Y: sign -1; I, K: +1)."""
    lower, upper = prim.bind(_shifted(v, -1), z), prim.bind(_shifted(v, 1), z)
    return multiply.bind(0.5, add.bind(lower, upper) if sign > 0 else subtract.bind(lower, upper))


def _relative_entropy_partials(x, y, offset):
    """The partials of x log(x / y) (offset 0) or x log(x / y) - x + y (offset 1):
    log(x / y) + 1 - offset and offset - x / y (-inf and offset at x = 0)."""
    ratio = divide.bind(x, y)
    logarithm = log.bind(ratio)
    return (add.bind(logarithm, 1.0) if offset == 0 else logarithm,
            negative.bind(ratio) if offset == 0 else subtract.bind(1.0, ratio))


def _huber_partials(delta, r):
    """huber(delta, r) is r**2 / 2 where |r| <= delta, delta (|r| - delta / 2) elsewhere (inf
    where delta < 0: NaN partials there)."""
    inside = less_equal.bind(absolute.bind(r), delta)
    invalid = less.bind(delta, 0)
    return (lambda: where.bind(invalid, math.nan, where.bind(inside, 0.0, subtract.bind(absolute.bind(r), delta))),
            lambda: where.bind(invalid, math.nan, where.bind(inside, r, multiply.bind(delta, sign.bind(r)))))


def _pseudo_huber_partials(delta, r):
    """With h = hypot(delta, r), pseudo_huber = delta (h - delta): d/dr = r delta / h and
    d/ddelta = r**4 / (h (h + delta)**2), written as (r / (h + delta))**2 r (r / h), which
    never overflows (0 at delta = r = 0; NaN where delta < 0, where the value is inf)."""
    h = hypot.bind(delta, r)
    h = where.bind(equal.bind(h, 0), 1.0, h)
    invalid = less.bind(delta, 0)
    return (lambda: where.bind(invalid, math.nan, multiply.bind(_sq(divide.bind(r, add.bind(h, delta))),
                                                                multiply.bind(r, divide.bind(r, h)))),
            lambda: where.bind(invalid, math.nan, divide.bind(multiply.bind(r, delta), h)))


def _box_cox_lambda_slope(logarithm, lmbda):
    """d/dlmbda (e**(lmbda L) - 1) / lmbda = L**2 exprel'(lmbda L), with L the logarithm of
    the base: (log x)**2 / 2 at lmbda = 0, without cancellation near it."""
    return multiply.bind(_sq(logarithm), _exprel_slope(multiply.bind(lmbda, logarithm)))


# d/da of the regularised incomplete gamma functions has no closed form: their partial in
# a is left out here, and engine/numpy/special.py refuses a differentiated a (as torch does)
_SPECIAL_UNARY = {
    erf: lambda x, out: _gaussian(x),
    erfc: lambda x, out: negative.bind(_gaussian(x)),
    erfinv: lambda x, out: multiply.bind(_SQRT_PI_OVER_TWO, exp.bind(multiply.bind(out, out))),
    erfcinv: lambda x, out: multiply.bind(-_SQRT_PI_OVER_TWO, exp.bind(multiply.bind(out, out))),
    gammaln: lambda x, out: _digamma(x),
    loggamma: lambda x, out: _digamma(x),
    gamma: lambda x, out: multiply.bind(out, _digamma(x)),
    ndtr: lambda x, out: _normal_density(x),
    ndtri: lambda x, out: multiply.bind(_SQRT_TWO_PI, exp.bind(multiply.bind(0.5, multiply.bind(out, out)))),
    log_ndtr: lambda x, out: exp.bind(subtract.bind(multiply.bind(-0.5, multiply.bind(x, x)),
                                                     add.bind(out, _HALF_LOG_TWO_PI))),
    i0: lambda x, out: i1.bind(x),
    i1: lambda x, out: _bessel_i1_derivative(x, i0.bind(x), out),
    i0e: lambda x, out: subtract.bind(i1e.bind(x), multiply.bind(sign.bind(x), out)),
    i1e: lambda x, out: subtract.bind(_bessel_i1_derivative(x, i0e.bind(x), out), multiply.bind(sign.bind(x), out)),
    erfcx: lambda x, out: subtract.bind(multiply.bind(multiply.bind(2.0, x), out), _TWO_OVER_SQRT_PI),
    rgamma: lambda x, out: _rgamma_slope(x, out),
    log_expit: lambda x, out: negative.bind(expm1.bind(out)),  # expit(-x) = 1 - e**out
    entr: lambda x, out: negative.bind(add.bind(log.bind(x), 1.0)),  # inf at 0, NaN below
    dawsn: lambda x, out: subtract.bind(1.0, multiply.bind(multiply.bind(2.0, x), out)),
    expi: lambda x, out: divide.bind(exp.bind(x), x),
    exp1: lambda x, out: negative.bind(divide.bind(exp.bind(negative.bind(x)), x)),
    spence: lambda x, out: _spence_slope(x),
    exprel: lambda x, out: _exprel_slope(x),
    exp10: lambda x, out: multiply.bind(out, _LN10),
    sindg: lambda x, out: multiply.bind(_PI_OVER_180, cosdg.bind(x)),
    cosdg: lambda x, out: multiply.bind(-_PI_OVER_180, sindg.bind(x)),
    tandg: lambda x, out: multiply.bind(_PI_OVER_180, add.bind(1.0, _sq(out))),
    cotdg: lambda x, out: multiply.bind(-_PI_OVER_180, add.bind(1.0, _sq(out))),
    j0: lambda x, out: negative.bind(j1.bind(x)),
    j1: lambda x, out: _bessel_i1_derivative(x, j0.bind(x), out),  # J1' = J0 - J1 / x, as I1'
    y0: lambda x, out: negative.bind(y1.bind(x)),
    y1: lambda x, out: where.bind(equal.bind(x, 0), math.inf, subtract.bind(y0.bind(x), divide.bind(
        out, _nonzero_where(x, 1.0)))),
    k0: lambda x, out: negative.bind(k1.bind(x)),
    k1: lambda x, out: negative.bind(add.bind(k0.bind(x), divide.bind(out, x))),
    k0e: lambda x, out: subtract.bind(out, k1e.bind(x)),  # e**x K0: (K0 + K0') e**x
    k1e: lambda x, out: subtract.bind(subtract.bind(out, k0e.bind(x)), divide.bind(out, x)),
    sine_integral: lambda x, out: _quotient_at_origin(sin.bind(x), x, 1.0),
    cosine_integral: lambda x, out: divide.bind(cos.bind(x), x),
    riemann_zeta: lambda x, out: None,  # no closed form: engine/numpy/special.py refuses it
    special_cbrt: lambda x, out: divide.bind(1.0, multiply.bind(3.0, _sq(out))),
    special_exp2: lambda x, out: multiply.bind(out, _LN2),
    special_expm1: lambda x, out: add.bind(out, 1.0),
    special_log1p: lambda x, out: divide.bind(1.0, add.bind(x, 1.0)),
    expit: lambda x, out: multiply.bind(out, expit.bind(negative.bind(x))),  # expit(x) expit(-x)
    logit: lambda p, out: divide.bind(1.0, multiply.bind(p, subtract.bind(1.0, p))),  # inf at 0 and 1
}
_SPECIAL_BINARY = {
    gammainc: lambda a, x, out: (None, _lower_gamma_density(a, x)),
    gammaincc: lambda a, x, out: (None, negative.bind(_lower_gamma_density(a, x))),
    beta: lambda a, b, out: (
        multiply.bind(out, subtract.bind(_digamma(a), _digamma(add.bind(a, b)))),
        multiply.bind(out, subtract.bind(_digamma(b), _digamma(add.bind(a, b)))),
    ),
    betaln: lambda a, b, out: (
        subtract.bind(_digamma(a), _digamma(add.bind(a, b))),
        subtract.bind(_digamma(b), _digamma(add.bind(a, b))),
    ),
    # x log(y) is 0 where x = 0, whatever y: its y-derivative x / y is 0 at x = y = 0 (0/0)
    xlogy: lambda x, y, out: (log.bind(y), _quotient_zero_at_origin(x, y)),
    xlog1py: lambda x, y, out: (log1p.bind(y), _quotient_zero_at_origin(x, add.bind(y, 1.0))),
    rel_entr: lambda x, y, out: _relative_entropy_partials(x, y, 0),
    kl_div: lambda x, y, out: _relative_entropy_partials(x, y, 1),
    huber: lambda delta, r, out: _huber_partials(delta, r),
    pseudo_huber: lambda delta, r, out: _pseudo_huber_partials(delta, r),
    boxcox: lambda x, lmbda, out: (lambda: power.bind(x, _shifted(lmbda, -1.0)),
                                    lambda: _box_cox_lambda_slope(log.bind(x), lmbda)),
    boxcox1p: lambda x, lmbda, out: (lambda: power.bind(add.bind(x, 1.0), _shifted(lmbda, -1.0)),
                                      lambda: _box_cox_lambda_slope(log1p.bind(x), lmbda)),
    # the order has no closed-form derivative: engine/numpy/special.py refuses a differentiated one
    iv: lambda v, z, out: (None, _neighbours(iv, v, z, 1)),
    ive: lambda v, z, out: (None, subtract.bind(_neighbours(ive, v, z, 1), multiply.bind(sign.bind(z), out))),  # e**-|z| I_v(z)
    jv: lambda v, z, out: (None, _neighbours(jv, v, z, -1)),
    yv: lambda v, z, out: (None, _neighbours(yv, v, z, -1)),
    kv: lambda v, z, out: (None, negative.bind(_neighbours(kv, v, z, 1))),
    kve: lambda v, z, out: (None, subtract.bind(out, _neighbours(kve, v, z, 1))),  # e**z K_v(z)
    yn: lambda n, z, out: (None, _neighbours(yn, n, z, -1)),
    kn: lambda n, z, out: (None, negative.bind(_neighbours(kn, n, z, 1))),
    # d/dq zeta(x, q) = -x zeta(x + 1, q); in x it has no closed form (refused as the orders)
    zeta: lambda x, q, out: (None, negative.bind(multiply.bind(x, zeta.bind(_shifted(x, 1), q)))),
}

# every partial here reads the inputs: NaN-safe products (see elementwise.py's formula sheet)
for _prim, _derivative in _SPECIAL_UNARY.items():
    partial_rules(_prim, lambda primals, out, _d=_derivative: (_d(primals[0], out),), safe=True)
for _prim, _partials in _SPECIAL_BINARY.items():
    partial_rules(_prim, lambda primals, out, _p=_partials: _p(primals[0], primals[1], out), safe=True)
partial_rules(polygamma, lambda primals, out, *, n: (polygamma.bind(primals[0], n=n + 1),), safe=True)


# W'(z) = W / (z (1 + W)) = e**-W / (1 + W), as z = W e**W: no quotient by z (1 at z = 0 on the
# branch k = 0, and smooth there); infinite at the branch point -1/e
partial_rules(lambertw, lambda primals, out: (divide.bind(exp.bind(negative.bind(out)), add.bind(1.0, out)),
                                              None, None), safe=True)
# radian(degrees, minutes, seconds) in radians: linear
partial_rules(radian, lambda primals, out: (_PI_OVER_180, _PI_OVER_180 / 60.0, _PI_OVER_180 / 3600.0))
del _prim, _derivative, _partials
