"""scipy.special on traced arrays: its ufuncs, and what to do about its functions.

The ufuncs (erf, erfc, erfcx, erfinv, erfcinv, gamma, gammaln, loggamma, rgamma, gammainc,
gammaincc, beta, betaln, digamma/psi, ndtr, ndtri, log_ndtr, xlogy, xlog1py, entr, rel_entr,
kl_div, huber, pseudo_huber, boxcox, boxcox1p, expit, logit, log_expit, exprel, expi, exp1,
dawsn, spence, sici, the Bessel functions i0, i0e, i1, i1e, j0, j1, y0, y1, k0, k1, k0e, k1e,
iv, ive, jv/jn, yv, yn, kv, kve, kn, the zeta functions, and SciPy's own log1p, expm1, cbrt,
exp2, exp10, sindg, cosdg, tandg, cotdg, radian) reach a tracer through ``__array_ufunc__``.
They are registered at the first traced call of a ufunc without a kernel, if SciPy is
imported by then (a SciPy ufunc cannot be called before), never importing SciPy here.  Most
are primitives of ``kernels.special`` (their impls call SciPy or cupyx.scipy, so the values
and dtypes are SciPy's: its log1p, expm1, cbrt and exp2 too, not NumPy's); sici is two.  A
first argument without a closed-form derivative (the incomplete gamma functions' ``a``, the
Bessel functions' order, zeta's ``x``) is refused where it is differentiated (torch.special
refuses ``a`` too).  ``scipy.special.zeta`` is a Python function calling the private ufuncs
``_zeta`` and ``_riemann_zeta``: those are registered, and so is ``_lambertw``, which
``lambertw`` calls (differentiable in z).

``logsumexp``, ``softmax``, ``log_softmax`` and ``polygamma`` are Python functions that start
with ``np.asarray``-like conversions: NumPy never hands them to a tracer, so they raise
ConversionError, and the error says what to write instead (registered advice, :data:`ADVICE`).
"""
from __future__ import annotations

import sys

import numpy as np

from labeled_func_kernels import special as ksp
from labeled_func_kernels.primitive import Primitive

from .. import diagnose
from ..errors import UnsupportedOperationError
from ..stack import differentiated
from .dispatch import LAZY_REGISTRATIONS, PUBLIC_UFUNC_NAMES, UFUNC_HANDLERS, UFUNCS

__all__ = ["ADVICE"]


def _digamma(x):
    return ksp.polygamma.bind(x, n=0)


def _constant_first(prim, name, first="a", second="x", like="as torch.special does"):
    """A function differentiable in its second argument only (gammainc(a, x), jv(v, z),
    zeta(x, q)): a differentiated first argument raises, naming the function."""

    def handler(constant, x):
        if isinstance(constant, (list, tuple)):  # an array of orders, as the ufunc would make it
            constant = np.asarray(constant)
        if differentiated([constant]):
            raise UnsupportedOperationError(
                f"scipy.special.{name}({first}, {second}): the derivative with respect to {first} (the first "
                f"argument) has no closed form and is not supported; differentiate with respect to {second} only "
                f"(pass {first} as a constant){', ' + like if like else ''}"
            )
        return prim.bind(constant, x)

    return handler


def _sici(x):
    """sici(x): the sine and cosine integrals, two primitives."""
    return ksp.sine_integral.bind(x), ksp.cosine_integral.bind(x)


def _lambertw(z, k, tol):
    """scipy.special.lambertw(z, k, tol) calls this private ufunc (k an integer array it made):
    differentiable in z."""
    if differentiated([k, tol]):
        raise UnsupportedOperationError("scipy.special.lambertw(z, k, tol): k and tol are constants; "
                                        "differentiate with respect to z only")
    return ksp.lambertw.bind(z, k, tol)


def _incomplete_gamma(prim, name):
    """gammainc / gammaincc: differentiable in ``x`` only."""
    return _constant_first(prim, name)


def _bessel(prim, name, order="v"):
    """A Bessel function of an order and z: differentiable in z only."""
    return _constant_first(prim, name, order, "z", "")


def _ive(v, z):
    """ive(v, z) = iv(v, z) exp(-|Re z|): of a complex z not holomorphic, so not differentiated."""
    if np.dtype(getattr(z, "dtype", np.float64)).kind == "c" and differentiated([z]):
        raise UnsupportedOperationError(
            "scipy.special.ive(v, z) of a complex z is not holomorphic (its factor exp(-|Re z|)) and its "
            "derivative is not supported; write scipy.special.iv(v, z) * np.exp(-np.abs(z.real))"
        )
    return _IVE(v, z)


def _riemann_zeta(x):
    """zeta(x) (scipy.special.zeta with one argument calls this private ufunc): its derivative
    has no closed form, so a differentiated x raises."""
    if differentiated([x]):
        raise UnsupportedOperationError(
            "scipy.special.zeta(x): the derivative of Riemann's zeta function with respect to x has no closed "
            "form and is not supported (pass x as a constant); the derivative of Hurwitz's zeta(x, q) with "
            "respect to q is: -x zeta(x + 1, q)"
        )
    return ksp.riemann_zeta.bind(x)


_IVE = _bessel(ksp.ive, "ive")

_ENTRIES = [
    ("erf", ksp.erf), ("erfc", ksp.erfc), ("erfinv", ksp.erfinv), ("erfcinv", ksp.erfcinv),
    ("gamma", ksp.gamma), ("gammaln", ksp.gammaln), ("loggamma", ksp.loggamma),
    ("gammainc", _incomplete_gamma(ksp.gammainc, "gammainc")),
    ("gammaincc", _incomplete_gamma(ksp.gammaincc, "gammaincc")),
    ("beta", ksp.beta), ("betaln", ksp.betaln), ("digamma", _digamma), ("psi", _digamma),
    ("ndtr", ksp.ndtr), ("ndtri", ksp.ndtri), ("log_ndtr", ksp.log_ndtr),
    ("xlogy", ksp.xlogy), ("xlog1py", ksp.xlog1py),
    ("i0", ksp.i0), ("i0e", ksp.i0e), ("i1", ksp.i1), ("i1e", ksp.i1e),
    ("expit", ksp.expit), ("logit", ksp.logit),
    ("erfcx", ksp.erfcx), ("rgamma", ksp.rgamma), ("log_expit", ksp.log_expit), ("entr", ksp.entr),
    ("dawsn", ksp.dawsn), ("expi", ksp.expi), ("exp1", ksp.exp1), ("spence", ksp.spence), ("exprel", ksp.exprel),
    ("j0", ksp.j0), ("j1", ksp.j1), ("y0", ksp.y0), ("y1", ksp.y1),
    ("k0", ksp.k0), ("k1", ksp.k1), ("k0e", ksp.k0e), ("k1e", ksp.k1e),
    ("sici", _sici),
    # SciPy's own versions of NumPy's functions: SciPy's kernels (NumPy's differ by an ulp or two)
    ("log1p", ksp.special_log1p), ("expm1", ksp.special_expm1), ("cbrt", ksp.special_cbrt), ("exp2", ksp.special_exp2),
    ("exp10", ksp.exp10), ("sindg", ksp.sindg), ("cosdg", ksp.cosdg), ("tandg", ksp.tandg), ("cotdg", ksp.cotdg),
    ("radian", ksp.radian),
    ("rel_entr", ksp.rel_entr), ("kl_div", ksp.kl_div), ("huber", ksp.huber), ("pseudo_huber", ksp.pseudo_huber),
    ("boxcox", ksp.boxcox), ("boxcox1p", ksp.boxcox1p),
    ("iv", _bessel(ksp.iv, "iv")), ("ive", _ive), ("jv", _bessel(ksp.jv, "jv")),
    ("yv", _bessel(ksp.yv, "yv")), ("kv", _bessel(ksp.kv, "kv")), ("kve", _bessel(ksp.kve, "kve")),
    ("yn", _bessel(ksp.yn, "yn", "n")), ("kn", _bessel(ksp.kn, "kn", "n")),  # jn is jv
    # scipy.special.zeta is a Python function calling these private ufuncs
    ("_ufuncs._zeta", _constant_first(ksp.zeta, "zeta", "x", "q", "")),
    ("_ufuncs._riemann_zeta", _riemann_zeta),
    ("_ufuncs._lambertw", _lambertw),
]


def _register_scipy_special():
    special = sys.modules.get("scipy.special")
    if special is None:
        return False
    for name, entry in _ENTRIES:
        home, _, name = name.rpartition(".")
        ufunc = getattr(sys.modules.get(f"scipy.special.{home}") if home else special, name, None)
        if isinstance(ufunc, np.ufunc) and ufunc not in UFUNCS and ufunc not in UFUNC_HANDLERS:
            (UFUNCS if isinstance(entry, Primitive) else UFUNC_HANDLERS)[ufunc] = entry
            if home:  # a private ufunc: named by the public function that calls it
                PUBLIC_UFUNC_NAMES[ufunc] = f"scipy.special.{_PUBLIC_NAMES.get(name, name)}"
    return True


_PUBLIC_NAMES = {"_zeta": "zeta", "_riemann_zeta": "zeta", "_lambertw": "lambertw"}


LAZY_REGISTRATIONS.append(_register_scipy_special)


# --- scipy.special's functions that convert their input ---------------------------------------
ADVICE = {
    "logsumexp": (
        "scipy.special.logsumexp converts its input (SciPy's array-API layer calls np.asarray), so "
        "write its NumPy composition, which is traced: m = np.max(x, axis=axis, keepdims=True); "
        "m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) (squeeze axis after)."
    ),
    "softmax": (
        "scipy.special.softmax converts its input (SciPy's array-API layer calls np.asarray), so "
        "write its NumPy composition, which is traced: e = np.exp(x - np.max(x, axis=axis, "
        "keepdims=True)); e / np.sum(e, axis=axis, keepdims=True)."
    ),
    "log_softmax": (
        "scipy.special.log_softmax converts its input (SciPy's array-API layer calls np.asarray), so "
        "write its NumPy composition, which is traced: s = x - np.max(x, axis=axis, keepdims=True); "
        "s - np.log(np.sum(np.exp(s), axis=axis, keepdims=True))."
    ),
    "polygamma": (
        "scipy.special.polygamma converts its input (it calls np.asarray), so write it with scipy.special's "
        "ufuncs, which are traced: scipy.special.digamma(x) for n = 0, and for a constant integer n >= 1 "
        "(-1) ** (n + 1) * math.factorial(n) * scipy.special.zeta(n + 1, x)."
    ),
}


def _scipy_advice(site, kind):
    if site.module.startswith("scipy.special"):
        return ADVICE.get(site.method)
    return None


diagnose.register_advice("scipy", _scipy_advice)
