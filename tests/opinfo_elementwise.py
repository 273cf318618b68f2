"""Operator-table entries for NumPy's ufuncs and elementwise functions added after the first table
(``opinfo.OP_DB`` appends ``ENTRIES``): built with ``opinfo``'s helpers, tested by every
generic suite."""
from __future__ import annotations

import numpy as np

from opinfo import ANY, COMPLEX, FLOAT, INT, NAN_AND_INF, NONZERO, SMALL_INTS, A, Domain, OpInfo, SampleInput, binary, elementwise, fixed, make_array

# zeros of both signs, infinities and NaN among ordinary values
SIGNED_ZEROS_AND_SPECIALS = Domain(special_values=(0.0, -0.0, np.inf, -np.inf, np.nan))
SIGNED_ZEROS = Domain(special_values=(0.0, -0.0))
INFINITE_DIVISORS = Domain(exclude_zero=True, special_values=(np.inf, -np.inf))
WIDE = Domain(-6.0, 6.0)  # phases: most neighbours more than pi apart
SHIFT_COUNTS = Domain(0.0, 5.0, discrete=True)  # NumPy leaves negative or too large counts to C


def shifted_in_place(x, y, left):
    """``x <<= y`` (or ``>>=``) into a copy of ``x``: the tracer's in-place shift operators."""
    x = x.copy()
    if left:
        x <<= y
    else:
        x >>= y
    return x


def ldexp_samples(rng, dtype):
    """``ldexp(x, i)``: ``x`` of ``dtype`` (or a Python number), ``i`` an int64 array (or a
    Python int) of small exponents, over broadcasting shapes."""
    x = lambda *shape: make_array(rng, shape, dtype)
    i = lambda *shape: rng.integers(-4, 5, size=shape)
    return [
        SampleInput((x(3, 4), i(3, 4))),
        SampleInput((x(3, 1), i(4))),
        SampleInput((x(2, 3, 4), i(3, 1))),
        SampleInput((x(), i(2, 3))),
        SampleInput((x(4), 3)),
        SampleInput((1.5, i(3, 4))),
    ]


ENTRIES: list = [
    # integer shifts: piecewise constant, so not differentiable (like floor); the ufuncs, the
    # operators and their reflected forms (a Python int on the left), and the in-place forms
    binary("left_shift", np.left_shift, domain=(SMALL_INTS, SHIFT_COUNTS), dtypes=INT, differentiable=False),
    binary("right_shift", np.right_shift, domain=(SMALL_INTS, SHIFT_COUNTS), dtypes=INT, differentiable=False),
    binary("operator_lshift", lambda x, y: x << y, domain=(SMALL_INTS, SHIFT_COUNTS), dtypes=INT,
           differentiable=False, operator_on_first_arg=True),
    binary("operator_rshift", lambda x, y: x >> y, domain=(SMALL_INTS, SHIFT_COUNTS), dtypes=INT,
           differentiable=False, operator_on_first_arg=True),
    elementwise("operator_rlshift", lambda n: 3 << n, domain=SHIFT_COUNTS, dtypes=INT, differentiable=False),
    elementwise("operator_rrshift", lambda n: 40 >> n, domain=SHIFT_COUNTS, dtypes=INT, differentiable=False),
    *(
        fixed(f"operator_i{side}shift", lambda x, y, left=left: shifted_in_place(x, y, left),
              [((A(3, 4), A(3, 4)), {}), ((A(3, 4), A(4)), {}), ((A(2, 3), A()), {})],
              domain=SHIFT_COUNTS, dtypes=INT, differentiable=False, writes_into_first_arg=True)
        for side, left in (("l", True), ("r", False))
    ),
    # fmod: x - trunc(x / y) y, the sign of x (remainder's is y's); 0 for integers over 0
    binary("fmod", np.fmod, domain=(ANY, NONZERO), dtypes=FLOAT + INT),
    # signed zeros over infinite divisors (fmod(x, inf) is x); NaN, inf and zero divisors, where the
    # value is NaN and no derivative exists: tests/test_ops_elementwise.py
    binary("fmod_special_values", np.fmod, domain=(SIGNED_ZEROS, INFINITE_DIVISORS)),
    # ldexp: linear in x (2**i), i an integer array that is never differentiated
    OpInfo("ldexp", np.ldexp, ldexp_samples, domain=(ANY,)),
    # frexp: (mantissa x 2**-e, exponent e as int32); the library's own frexp (the standard has none)
    elementwise("frexp", np.frexp, dtypes=FLOAT + INT, strict_ok=False),
    # (not at 0, where the mantissa jumps: its derivative there is the a.e. formula's 1, not a limit)
    elementwise("frexp_special_values", np.frexp, domain=NAN_AND_INF, strict_ok=False),
    # fix: a function (not a ufunc) rounding toward zero, piecewise constant
    elementwise("fix", np.fix, domain=Domain(-3.0, 3.0), dtypes=FLOAT + INT, differentiable=False),
    # nextafter: 1 in x, 0 in y; spacing: piecewise constant
    binary("nextafter", np.nextafter, dtypes=FLOAT + INT),
    elementwise("spacing", np.spacing, dtypes=FLOAT + INT, differentiable=False),
    elementwise("spacing_special_values", np.spacing, domain=SIGNED_ZEROS_AND_SPECIALS, differentiable=False),
    # i0: both of Cephes' expansions (|x| <= 8 and beyond; not much beyond: the second-order tests
    # differentiate sin(i0(x)), whose phase turns ~i0'(x) eps within a finite difference)
    elementwise("i0", np.i0, domain=Domain(-9.0, 9.0), dtypes=FLOAT + INT),
    # the Taylor polynomial near 0: the second derivative at 0 is 1/2 (not 0, as through |x|)
    elementwise("i0_near_zero", np.i0, domain=Domain(-0.4, 0.4, special_values=(0.0,))),
    # real_if_close of a real array is the array (complex ones: tests/test_ops_elementwise.py)
    elementwise("real_if_close", np.real_if_close, dtypes=FLOAT + INT),
    fixed(
        "unwrap",
        np.unwrap,
        [
            ((A(7),), {}),
            ((A(3, 6),), {"axis": 0}),
            ((A(2, 5),), {"period": 4.0}),
            ((A(6),), {"discont": 4.0}),
            ((A(6),), {"discont": 1.0}),  # below period / 2: acts as period / 2
            ((A(2, 6),), {"period": 6}),  # an integer period: NumPy's integer steps for integer phases
            ((A(1),), {}),
        ],
        domain=WIDE,
        dtypes=FLOAT + INT,
    ),
    # NumPy 2's vector gufuncs; vecdot and vecmat conjugate their vector (not holomorphic)
    fixed(
        "vecdot",
        np.vecdot,
        [((A(5), A(5)), {}), ((A(3, 5), A(5)), {}), ((A(2, 1, 4), A(3, 4)), {})],
        dtypes=FLOAT + COMPLEX + INT,
        holomorphic=False,
    ),
    fixed(
        "matvec",
        np.matvec,
        [((A(4, 5), A(5)), {}), ((A(2, 4, 5), A(5)), {}), ((A(4, 5), A(3, 5)), {}), ((A(2, 1, 3, 4), A(5, 4)), {})],
        dtypes=FLOAT + COMPLEX + INT,
    ),
    fixed(
        "vecmat",
        np.vecmat,
        [((A(4), A(4, 5)), {}), ((A(3, 4), A(4, 5)), {}), ((A(4), A(2, 4, 5)), {}), ((A(2, 1, 3), A(4, 3, 2)), {})],
        dtypes=FLOAT + COMPLEX + INT,
        holomorphic=False,
    ),
]
