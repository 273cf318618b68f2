"""scipy.special's ufuncs on traced arrays: erf, erfc, gammaln, digamma (psi), expit,
logit.

Registered at the first traced call of a ufunc without a kernel, if SciPy is imported
by then (a SciPy ufunc cannot be called before), never importing SciPy here.  erf,
erfc, gammaln and polygamma are primitives of ``kernels.elementwise`` (their impls
call SciPy or cupyx.scipy); expit and logit are compositions.
"""
from __future__ import annotations

import sys

import numpy as np

from kernels import elementwise as ew
from kernels.primitive import Primitive

from .dispatch import LAZY_REGISTRATIONS, UFUNC_HANDLERS, UFUNCS
from .elementwise import floating

__all__ = ["expit", "logit"]


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


def _register_scipy_special():
    special = sys.modules.get("scipy.special")
    if special is None:
        return False
    for name, entry in [("erf", ew.erf), ("erfc", ew.erfc), ("gammaln", ew.gammaln), ("expit", expit),
                        ("logit", logit), ("digamma", _digamma), ("psi", _digamma)]:
        ufunc = getattr(special, name, None)
        if isinstance(ufunc, np.ufunc) and ufunc not in UFUNCS and ufunc not in UFUNC_HANDLERS:
            (UFUNCS if isinstance(entry, Primitive) else UFUNC_HANDLERS)[ufunc] = entry
    return True


LAZY_REGISTRATIONS.append(_register_scipy_special)
