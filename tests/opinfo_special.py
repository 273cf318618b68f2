"""Operator-table entries for the scipy.special ufuncs added after the first table (``opinfo.OP_DB``
appends ``ENTRIES``; empty without SciPy): built with ``opinfo``'s helpers, tested by every generic
suite. Each domain keeps its function smooth, and wider than the finite-difference steps (positive z
for Y, K and the scaled K; x away from 0 where a logarithm or 1/x sits). Orders (the Bessel
functions' v and n, zeta's x) are held fixed where the entry is differentiated; the ``*_mapped_*``
entries map them too, in float32 only, where the grad tests (float64) do not run: a differentiated
order raises. All ``strict_ok=False``: SciPy's ufuncs need NumPy arrays.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from opinfo import ANY, COMPLEX, FLOAT, NONZERO, POSITIVE, SPECIAL, A, Domain, binary, elementwise, fixed

F32 = (np.dtype(np.float32),)


def _with_constant_first(name, keyword, calls, domain=Domain(0.5, 3.0), dtypes=FLOAT):
    """``f(constant, z)`` of the scipy.special ufunc ``name``, the constant a keyword of each call (z
    from 0.5: K and Y of order 2.5 grow as z**-2.5 near 0, past what central differences resolve)."""
    function = getattr(SPECIAL, name)

    def op(z, **kwargs):
        return function(kwargs[keyword], z)

    op.__name__ = name
    return fixed(f"scipy_{name}", op, calls, domain=domain, dtypes=dtypes)


def _lambertw_branch(z, *, k):
    return SPECIAL.lambertw(z, k)


def _sine_integral(x):
    return SPECIAL.sici(x)[0]


# an order per column (a tuple: SciPy makes it an array of its own, untraced)
REAL_ORDERS = [((A(3, 4),), {"v": 0.0}), ((A(5),), {"v": 1.5}), ((A(),), {"v": -0.5}),
               ((A(3, 4),), {"v": (0.0, 1.0, 2.5, -1.5)})]
INTEGER_ORDERS = [((A(3, 4),), {"n": 0}), ((A(5),), {"n": 2}), ((A(),), {"n": 1}),
                  ((A(3, 4),), {"n": (0, 1, 2, 3)})]
ZETA_EXPONENTS = [((A(3, 4),), {"x": 2.0}), ((A(5),), {"x": 3.5}), ((A(),), {"x": 1.5}),
                  ((A(3, 4),), {"x": (2.0, 2.5, 3.0, 4.0)})]


def _entries():
    if SPECIAL is None:
        return []
    one = [
        elementwise("scipy_erfcx", SPECIAL.erfcx, domain=Domain(-2.0, 3.0)),
        elementwise("scipy_rgamma", SPECIAL.rgamma, domain=Domain(-3.0, 3.0)),
        elementwise("scipy_log_expit", SPECIAL.log_expit, domain=Domain(-6.0, 6.0)),
        elementwise("scipy_entr", SPECIAL.entr, domain=POSITIVE),
        elementwise("scipy_dawsn", SPECIAL.dawsn),
        elementwise("scipy_expi", SPECIAL.expi, domain=NONZERO),
        elementwise("scipy_exp1", SPECIAL.exp1, domain=POSITIVE),
        elementwise("scipy_spence", SPECIAL.spence, domain=Domain(0.2, 3.0)),
        elementwise("scipy_spence_at_one", SPECIAL.spence, domain=Domain(0.5, 1.5, special_values=(1.0,))),
        elementwise("scipy_exprel", SPECIAL.exprel),
        elementwise("scipy_exprel_at_zero", SPECIAL.exprel, domain=Domain(-0.005, 0.005, special_values=(0.0,))),
        elementwise("scipy_j0", SPECIAL.j0, domain=Domain(-4.0, 4.0)),
        elementwise("scipy_j1", SPECIAL.j1, domain=Domain(-4.0, 4.0)),
        elementwise("scipy_j1_at_zero", SPECIAL.j1, domain=Domain(special_values=(0.0,))),
        *(elementwise(f"scipy_{name}", getattr(SPECIAL, name), domain=POSITIVE)
          for name in ("y0", "y1", "k0", "k1", "k0e", "k1e")),
        # complex values (of real arguments too); k = 0 is analytic away from its cut (-inf, -1/e]
        elementwise("scipy_lambertw", SPECIAL.lambertw, domain=Domain(-0.3, 3.0), dtypes=FLOAT + COMPLEX),
        elementwise("scipy_lambertw_at_zero", SPECIAL.lambertw, domain=Domain(special_values=(0.0,))),
        fixed("scipy_lambertw_branch", _lambertw_branch, [((A(3, 4),), {"k": -1}), ((A(5),), {"k": 1})],
              domain=POSITIVE, dtypes=FLOAT + COMPLEX),
        elementwise("scipy_sici", SPECIAL.sici, domain=NONZERO),
        elementwise("scipy_sici_si_at_zero", _sine_integral, domain=Domain(special_values=(0.0,))),
        # SciPy's versions of NumPy's functions, and its functions of degrees
        elementwise("scipy_log1p", SPECIAL.log1p, domain=Domain(-0.5, 2.0)),
        elementwise("scipy_expm1", SPECIAL.expm1),
        elementwise("scipy_cbrt", SPECIAL.cbrt, domain=NONZERO),
        elementwise("scipy_exp2", SPECIAL.exp2),
        elementwise("scipy_exp10", SPECIAL.exp10),
        elementwise("scipy_sindg", SPECIAL.sindg, domain=Domain(-200.0, 200.0)),
        elementwise("scipy_cosdg", SPECIAL.cosdg, domain=Domain(-200.0, 200.0)),
        elementwise("scipy_tandg", SPECIAL.tandg, domain=Domain(-80.0, 80.0)),
        elementwise("scipy_cotdg", SPECIAL.cotdg, domain=Domain(10.0, 170.0)),
        elementwise("scipy_radian", SPECIAL.radian, arity=3, domain=Domain(-90.0, 90.0)),
    ]
    two = [
        binary("scipy_rel_entr", SPECIAL.rel_entr, domain=(POSITIVE, POSITIVE)),
        binary("scipy_kl_div", SPECIAL.kl_div, domain=(POSITIVE, POSITIVE)),
        binary("scipy_huber", SPECIAL.huber, domain=(Domain(0.5, 2.0), ANY)),
        binary("scipy_pseudo_huber", SPECIAL.pseudo_huber, domain=(Domain(0.3, 2.0), ANY)),
        binary("scipy_boxcox", SPECIAL.boxcox, domain=(POSITIVE, Domain(-2.0, 2.0))),
        binary("scipy_boxcox_lambda_zero", SPECIAL.boxcox,
               domain=(POSITIVE, Domain(-0.5, 0.5, special_values=(0.0,)))),
        binary("scipy_boxcox1p", SPECIAL.boxcox1p,
               domain=(Domain(-0.5, 2.0), Domain(-2.0, 2.0, special_values=(0.0,)))),
        # differentiable in z (q) only: the order (exponent) held fixed
        # holomorphic in a complex z off the cut (-inf, 0] (ive's factor exp(-|Re z|) is not: real only)
        *(_with_constant_first(name, "v", REAL_ORDERS, dtypes=FLOAT + COMPLEX)
          for name in ("iv", "jv", "yv", "kv", "kve")),
        _with_constant_first("ive", "v", REAL_ORDERS),
        *(_with_constant_first(name, "n", INTEGER_ORDERS) for name in ("yn", "kn")),
        _with_constant_first("zeta", "x", ZETA_EXPONENTS, POSITIVE),
        # the order (exponent) mapped too
        *(binary(f"scipy_{name}_mapped_v", getattr(SPECIAL, name), domain=(Domain(-1.0, 3.0), Domain(0.5, 3.0)),
                 dtypes=F32)
          for name in ("iv", "ive", "jv", "yv", "kv", "kve")),
        binary("scipy_zeta_mapped_x", SPECIAL.zeta, domain=(Domain(1.5, 4.0), POSITIVE), dtypes=F32),
        elementwise("scipy_riemann_zeta", SPECIAL.zeta, domain=Domain(-3.0, 0.8), dtypes=F32),
    ]
    return [dataclasses.replace(entry, strict_ok=False) for entry in one + two]  # SciPy needs NumPy arrays


ENTRIES = _entries()
