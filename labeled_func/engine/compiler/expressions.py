"""What numexpr and CUDA C compute for each primitive that lf.jit fuses: the expression
tables (a new fusable primitive needs an entry in both ``_EXPRESSIONS`` and
``_CUDA_EXPRESSIONS``), the dtypes a fused expression takes, and numexpr itself."""
from __future__ import annotations

import numpy as np

from labeled_func_kernels import elementwise as ew

try:  # the field's fused-expression evaluator: without it, programs run unfused
    import numexpr
    import numexpr.necompiler
    _NUMEXPR_TYPE = type(numexpr.NumExpr("a", signature=[("a", np.float64)]))
except ImportError:  # pragma: no cover - a dependency
    numexpr = _NUMEXPR_TYPE = None


# Primitives whose expression reads the same in numexpr and in CUDA C
_SHARED_EXPRESSIONS = {
    ew.add: "({} + {})", ew.subtract: "({} - {})", ew.multiply: "({} * {})", ew.divide: "({} / {})",
    ew.negative: "(-{})", ew.sqrt: "sqrt({})", ew.exp: "exp({})", ew.expm1: "expm1({})", ew.log: "log({})",
    ew.log1p: "log1p({})", ew.sin: "sin({})", ew.cos: "cos({})", ew.tan: "tan({})", ew.sinh: "sinh({})",
    ew.cosh: "cosh({})", ew.tanh: "tanh({})",
    ew.equal: "({} == {})", ew.not_equal: "({} != {})", ew.less: "({} < {})", ew.less_equal: "({} <= {})",
    ew.greater: "({} > {})", ew.greater_equal: "({} >= {})",
}
_EXPRESSIONS = {
    **_SHARED_EXPRESSIONS,
    ew.asin: "arcsin({})", ew.acos: "arccos({})", ew.atan: "arctan({})", ew.asinh: "arcsinh({})",
    ew.acosh: "arccosh({})", ew.atanh: "arctanh({})", ew.atan2: "arctan2({}, {})", ew.absolute: "abs({})",
    ew.where: "where({}, {}, {})", ew.logical_and: "({} & {})", ew.logical_or: "({} | {})",
    ew.logical_not: "(~{})",
    # the mask costs nothing once fused; d - d is 0 exactly where d is finite
    ew.safe_multiply: "where(({0} == 0) & (({1} - {1}) != 0), 0, {0} * {1})",
}
# The same primitives in CUDA C, for CuPy's ElementwiseKernel (float64, float32 and bool
# operands; a comparison is a bool, a bool in arithmetic is 0 or 1 as in NumPy).
_CUDA_EXPRESSIONS = {
    **_SHARED_EXPRESSIONS,
    ew.asin: "asin({})", ew.acos: "acos({})", ew.atan: "atan({})", ew.asinh: "asinh({})",
    ew.acosh: "acosh({})", ew.atanh: "atanh({})", ew.atan2: "atan2({}, {})", ew.absolute: "fabs({})",
    ew.where: "({} ? {} : {})", ew.logical_and: "({} && {})", ew.logical_or: "({} || {})",
    ew.logical_not: "(!{})",
    ew.safe_multiply: ew.SAFE_PRODUCT_CUDA,
}
_FLOAT, _SINGLE, _BOOL = np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.bool_)
_MAX_LEAVES = 24  # numexpr takes at most 32 operands (its output and temporaries count too)
# numexpr's names of the dtypes it fuses (its "float" kind is single precision)
_NUMEXPR_TYPES = {_FLOAT: np.float64, _SINGLE: float, _BOOL: bool}
# Powers by a small constant exponent, as the power kernel computes them (products)
_POWERS = {2.0: "({0} * {0})", 3.0: "(({0} * {0}) * {0})", 4.0: "(({0} * {0}) * ({0} * {0}))",
           -1.0: "(1 / {0})", -2.0: "(1 / ({0} * {0}))", 0.5: "sqrt({0})"}
# Primitives whose one evaluation costs far more than a pass over memory: numexpr runs them on
# its threads, so even alone they are worth an evaluation
_HEAVY = frozenset((ew.sqrt, ew.exp, ew.expm1, ew.log, ew.log1p, ew.sin, ew.cos, ew.tan, ew.asin, ew.acos,
                    ew.atan, ew.sinh, ew.cosh, ew.tanh, ew.asinh, ew.acosh, ew.atanh, ew.atan2))

# Primitives whose numexpr evaluation may differ from NumPy's in the last bit (libm's, not
# NumPy's own SIMD loops): the rest (sums, products, quotients, sqrt, comparisons, selects) are
# correctly rounded or exact in both. A float64 tree may hold them (the contract's tolerance,
# docs/jit.md); a float32 one does not: a float32 result's last bit is 6e-8 of it, which a
# float64 computation that reads it would carry far above float64's tolerance.
_ROUNDED_OTHERWISE = _HEAVY - {ew.sqrt}

# Logical operations (fused only on booleans) and the primitives whose boolean result a
# fused expression computes as NumPy does; arithmetic whose result is boolean is not fused
_LOGICAL = frozenset((ew.logical_and, ew.logical_or, ew.logical_not))
_BOOLEAN_RESULTS = _LOGICAL | {ew.where, ew.equal, ew.not_equal, ew.less, ew.less_equal, ew.greater,
                               ew.greater_equal}
