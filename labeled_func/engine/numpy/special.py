"""scipy.special on traced arrays: its ufuncs, and what to do about its functions.

The ufuncs (erf, erfc, erfinv, erfcinv, gamma, gammaln, loggamma, gammainc, gammaincc,
beta, betaln, digamma/psi, ndtr, ndtri, log_ndtr, xlogy, xlog1py, i0, i0e, i1, i1e,
expit, logit) reach a tracer through ``__array_ufunc__``.  They are registered at the
first traced call of a ufunc without a kernel, if SciPy is imported by then (a SciPy
ufunc cannot be called before), never importing SciPy here.  Most are primitives of
``kernels.elementwise`` (their impls call SciPy or cupyx.scipy); expit and logit are
compositions, and the incomplete gamma functions refuse a differentiated first argument:
their derivative in ``a`` has no closed form (torch.special refuses it too).

``logsumexp``, ``softmax`` and ``log_softmax`` are Python functions that SciPy's
array-API layer starts with ``np.asarray``-like conversions: NumPy never hands them to a
tracer, so they raise ConversionError, and the error says which NumPy composition to write
instead (registered advice, :data:`ADVICE`).
"""
from __future__ import annotations

import sys

import numpy as np

from labeled_func_kernels import elementwise as ew
from labeled_func_kernels.primitive import Primitive

from .. import diagnose
from ..errors import UnsupportedOperationError
from ..stack import differentiated
from .dispatch import LAZY_REGISTRATIONS, UFUNC_HANDLERS, UFUNCS
from .elementwise import floating

__all__ = ["expit", "logit", "ADVICE"]


def expit(x):
    """The logistic sigmoid 1 / (1 + exp(-x)), with no overflow: each branch of the select
    sees only the inputs of its own sign (``exp`` of a non-positive number)."""
    x = floating(x)
    positive_side = ew.greater_equal.bind(x, 0)
    at_least_zero = ew.where.bind(positive_side, x, 0.0)
    below_zero = ew.where.bind(positive_side, 0.0, x)
    upper = ew.divide.bind(1.0, ew.add.bind(1.0, ew.exp.bind(ew.negative.bind(at_least_zero))))
    e = ew.exp.bind(below_zero)
    lower = ew.divide.bind(e, ew.add.bind(1.0, e))
    return ew.where.bind(positive_side, upper, lower)


def logit(p):
    """log(p / (1 - p)): -inf at 0, inf at 1, NaN outside [0, 1]."""
    p = floating(p)
    return ew.log.bind(ew.divide.bind(p, ew.subtract.bind(1.0, p)))


def _digamma(x):
    return ew.polygamma.bind(x, n=0)


def _incomplete_gamma(prim, name):
    """gammainc / gammaincc: differentiable in ``x`` only."""

    def handler(a, x):
        if differentiated([a]):
            raise UnsupportedOperationError(
                f"scipy.special.{name}(a, x): the derivative with respect to a (the first argument) has no "
                "closed form and is not supported; differentiate with respect to x only (pass a as a "
                "constant), as torch.special does"
            )
        return prim.bind(a, x)

    return handler


_ENTRIES = [
    ("erf", ew.erf), ("erfc", ew.erfc), ("erfinv", ew.erfinv), ("erfcinv", ew.erfcinv),
    ("gamma", ew.gamma), ("gammaln", ew.gammaln), ("loggamma", ew.loggamma),
    ("gammainc", _incomplete_gamma(ew.gammainc, "gammainc")),
    ("gammaincc", _incomplete_gamma(ew.gammaincc, "gammaincc")),
    ("beta", ew.beta), ("betaln", ew.betaln), ("digamma", _digamma), ("psi", _digamma),
    ("ndtr", ew.ndtr), ("ndtri", ew.ndtri), ("log_ndtr", ew.log_ndtr),
    ("xlogy", ew.xlogy), ("xlog1py", ew.xlog1py),
    ("i0", ew.i0), ("i0e", ew.i0e), ("i1", ew.i1), ("i1e", ew.i1e),
    ("expit", expit), ("logit", logit),
]


def _register_scipy_special():
    special = sys.modules.get("scipy.special")
    if special is None:
        return False
    for name, entry in _ENTRIES:
        ufunc = getattr(special, name, None)
        if isinstance(ufunc, np.ufunc) and ufunc not in UFUNCS and ufunc not in UFUNC_HANDLERS:
            (UFUNCS if isinstance(entry, Primitive) else UFUNC_HANDLERS)[ufunc] = entry
    return True


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
}


def _scipy_advice(site, kind):
    if site.module.startswith("scipy.special"):
        return ADVICE.get(site.method)
    return None


diagnose.register_advice("scipy", _scipy_advice)
