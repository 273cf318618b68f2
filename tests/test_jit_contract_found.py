"""Failures of ``lf.jit``'s contract found by the fuzzer (``tests/test_fuzz_jit.py``), each
shrunk to a minimal program: named regression tests.

The contract: ``lf.jit(f)`` returns exactly what ``f`` returns (bit for bit where nothing
is fused), or raises the policy error that ``f``'s transforms raise; the cache key holds
everything that can change the result. A failure not fixed yet is a strict xfail with
the reason (its XPASS says when the fix lands: then the mark goes); a test without a mark
guards a failure already fixed.

The last group are differences between lf's kernels and NumPy's that show outside
``lf.jit`` too (under ``lf.vmap``, ``lf.grad``): the fuzzer meets them through
``lf.jit(f)``, whose oracle is NumPy, and leaves them out of its draws
(``fuzz_programs.ENGINE_DIFFERS_FROM_NUMPY``, ``ENGINE_DIFFERS_IN_METHODS``).
"""
import warnings

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

try:  # works with and without a tests/__init__.py
    import fuzz_programs as fuzz
except ImportError:  # pragma: no cover
    from tests import fuzz_programs as fuzz

LARGE = 300_000  # above CHEAP_FUSE_MIN_SIZE (262,144): trees of cheap operations are fused


# --- lf.jit -----------------------------------------------------------------------------------------
def test_jit_of_grad_refuses_a_derivative_written_into_a_comparison_as_grad_does():
    def loss(x):
        v = x > 0  # not differentiated: a plain boolean array under lf.grad
        v[{"b": 0}] = x.mean()
        return v.astype("float64").sum()

    x = xr.DataArray(np.array([-1.28, -0.23]), dims="b")
    with pytest.raises(lf.InplaceError):
        lf.grad(loss)(x)
    with pytest.raises(lf.InplaceError):
        lf.jit(lf.grad(loss))(x)


@pytest.mark.parametrize("function", [lambda x: abs(x > 0.5) + (x > 0.5), lambda x: abs(x < 0.5) + (x < 2.0)],
                         ids=["abs(b) + b", "abs(b) + c"])
def test_fused_booleans_stay_booleans(function):
    """The fused tree once evaluated abs of booleans as a number: float32 2.0 for NumPy's True."""
    jitted = lf.jit(function)
    jitted(np.zeros(LARGE))  # traced
    x = np.ones(LARGE)
    fuzz.assert_same(jitted(x), function(x))  # replayed, fused


def test_a_fused_gradient_through_abs_of_booleans_replays():
    """The same, with every buffer recycled: a float32 result written into a boolean buffer (TypeError)."""
    def loss(x):
        return np.arctan2(x, abs(abs(x == 0.0))).sum()

    with fuzz.fusing_everything():
        jitted = lf.jit(lf.grad(loss))
        jitted(xr.DataArray(np.array([0.82]), dims="a"))  # traced
        x = xr.DataArray(np.array([0.13]), dims="a")
        fuzz.assert_same(jitted(x), lf.grad(loss)(x), fused=True)  # replayed


@pytest.mark.parametrize("function", [
    pytest.param(lambda x: np.logical_and(x * 2, x + 1), id="and"),
    pytest.param(lambda x: np.logical_or(x, np.abs(x)), id="or"),
    pytest.param(lambda x: np.logical_not(x * 2), id="not"),
    pytest.param(lambda x: np.logical_and(0.0, np.abs(x) > 0.5) + 0.0, id="and of a float and a boolean"),
])
def test_fused_logical_operations_on_floats_compile(function):
    """numexpr has no logical operations on floats: the fused tree once failed to compile (and_ddd)."""
    x = np.linspace(-1.0, 1.0, LARGE)
    np.testing.assert_array_equal(lf.jit(function)(x), function(x))


@pytest.mark.parametrize("change", ["attrs", "coordinate values", "coordinate attrs"])
def test_signatures_that_differ_only_in_labels_keep_their_programs(change):
    """Labels were compared outside the cache key: the second signature replaced the first's program."""
    def labeled(labels=(10, 20), lab_attrs=None, **attrs):
        return xr.DataArray(np.array([1.0, 2.0]), dims="b", coords={"b": list(labels),
                            "lab": ("b", [0.0, 0.25], lab_attrs or {})}, attrs=attrs)

    first = labeled()
    second = {"attrs": labeled(units="m"), "coordinate values": labeled(labels=(30, 40)),
              "coordinate attrs": labeled(lab_attrs={"units": "s"})}[change]
    jitted = lf.jit(lambda x: x * 2)
    for x in (first, second, first, second):
        xr.testing.assert_identical(jitted(x), x * 2)
    assert jitted.traces == 2


@pytest.mark.parametrize("wrap", [lambda f: f, lambda f: lf.vmap(f, dim="c")], ids=["jit", "jit-vmap"])
def test_an_in_place_division_by_a_wider_operand_keeps_the_dtype(wrap):
    """An in-place operation once took the result's dtype (float64) where NumPy casts it back (float32)."""
    def divide(x, y):
        x /= y
        return x

    def arguments():
        return (xr.DataArray(np.array([-0.98, 2.03], dtype=np.float32), dims="c"),
                xr.DataArray(np.array([-0.49, 2.49]), dims="c"))

    expected = wrap(divide)(*arguments())
    assert expected.dtype == np.float32
    fuzz.assert_same(lf.jit(wrap(divide))(*arguments()), expected)


def test_a_float32_gradient_of_a_float64_loss_is_grads():
    """Once rounded 1 ulp away from lf.grad, on the traced call too."""
    def loss(x):
        return (np.arcsinh((x + 2.0).mean("a")) * np.float64(1.0)).sum()

    x = xr.DataArray(np.array([0.82, -1.38, -2.75], dtype=np.float32), dims="a")
    fuzz.assert_same(lf.jit(lf.grad(loss))(x), lf.grad(loss)(x))


def test_the_gradient_of_a_sum_times_infinity_replays():
    """The replay's NaN-safe product once wrote into a 0-d product, a NumPy scalar (TypeError)."""
    def loss(x):
        return x.sum() * np.inf

    x = xr.DataArray(np.array([0.82, 1.0]), dims="a")
    jitted = lf.jit(lf.grad(loss))
    with np.errstate(all="ignore"):
        jitted(x)  # traced
        fuzz.assert_same(jitted(x * 2), lf.grad(loss)(x * 2))  # replayed


@pytest.mark.parametrize("loss, traced, replayed", [
    pytest.param(lambda z: np.cos(np.sin(z)).real.sum(), [complex(0.07, -1.43)], [complex(0.68, -0.72)],
                 id="cos(sin(z))"),  # once 2 ulps off in the imaginary part
    pytest.param(lambda z: np.cos(z).real.sum(), [complex(-np.inf, -0.39), complex(-2.53, 0.51)],
                 [complex(np.nan, 1.58), complex(-0.48, 0.0)], id="cos(z) traced at inf"),  # once -0.0 for +0.0
])
def test_a_complex_gradient_replays_bit_for_bit(loss, traced, replayed):
    jitted = lf.jit(lf.grad(loss))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jitted(xr.DataArray(np.array(traced), dims="a"))  # traced
        z = xr.DataArray(np.array(replayed), dims="a")
        fuzz.assert_same(jitted(z), lf.grad(loss)(z))  # replayed


def test_a_traced_infinity_written_into_integers_casts_as_numpy_does():
    def f(v, y):
        v[{"b": 0}] = y.mean()
        return v

    def arguments():
        return xr.DataArray(np.array([1, 2]), dims="b"), xr.DataArray(np.array([1.0, np.inf]), dims="b")

    with np.errstate(all="ignore"):
        fuzz.assert_same(lf.jit(f)(*arguments()), f(*arguments()))


def _written_by_its_alias(x, y):
    v = x.prod("b", skipna=False)  # the product's derivative reads x
    y *= 2.0  # y is x: the memory of x written behind the transform's back
    return v.sum()


def _argument():
    return xr.DataArray(np.array([1.0, 2.0, 3.0]), dims="b")


@pytest.mark.parametrize("transform", [lf.grad, lf.jacrev, lf.jacfwd, lambda f: lf.jit(lf.grad(f))],
                         ids=["grad", "jacrev", "jacfwd", "jit-grad"])
def test_a_write_through_an_untraced_alias_of_the_differentiated_argument_is_refused(transform):
    """The differentiated argument's memory written through another argument that the transform
    does not trace (y is x, y *= 2): the derivative was computed at the written values, silently
    (grad 24, 12, 8, the derivative at 2x, where the function reads x at 1, 2, 3: 6, 3, 2). It is
    refused, naming both arguments; the same call with a copy as y gives the derivative."""
    x = _argument()
    with pytest.raises(lf.InplaceError, match=r"argument 'x' through argument 'y'"):
        transform(_written_by_its_alias)(x, x)
    x = _argument()
    gradient = transform(_written_by_its_alias)(x, x.copy())
    np.testing.assert_array_equal(np.asarray(gradient), [6.0, 3.0, 2.0])


def test_a_large_float32_sum_replays_bit_for_bit():
    rng = np.random.default_rng(0)
    jitted = lf.jit(lambda x: np.sum(x, axis=-1))
    jitted(rng.uniform(-3, 3, (10_000, 4)).astype(np.float32))  # traced
    x = rng.uniform(-3, 3, (10_000, 4)).astype(np.float32)
    fuzz.assert_same(jitted(x), np.sum(x, axis=-1))  # replayed


@pytest.mark.parametrize("wrap", [lambda f: f, lambda f: lf.vmap(f, dim="a", randomness="different")],
                         ids=["jit", "jit-vmap"])
def test_a_traced_coordinate_meeting_itself_in_arithmetic(wrap):
    """xarray compares the coordinates of two operands when it aligns them: a coordinate
    computed from traced values once met bool() under lf.jit. One recorded array and its
    copies are equal whatever the values; two different ones cannot be compared."""
    def f(v):
        v = v.assign_coords(extra=v * 2)
        return v + v.copy(), v + lf.random.normal(like=v)

    v = xr.DataArray(np.array([[0.82, 1.0], [0.5, -2.0]]), dims=("a", "b"))
    lf.random.seed(0)
    expected = wrap(f)(v)
    lf.random.seed(0)
    fuzz.assert_same(lf.jit(wrap(f))(v), expected)

    def differing(v):
        return v.assign_coords(extra=v * 2) + v.assign_coords(extra=v * 3)

    with pytest.raises(lf.DataDependentControlFlowError, match="lf.jit"):
        lf.jit(differing)(v)


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="an argument with a negative stride, written in place, is contiguous in the replay: "
                          "NumPy's arcsin of a contiguous array (SIMD) differs by 1 ulp from its strided loop")
def test_a_strided_argument_written_in_place_keeps_its_layout_in_the_replay():
    def f(x):
        x += 0.5
        return np.arcsin(x)

    def reversed_argument(value):
        return np.array([value, 0.2])[::-1]

    jitted = lf.jit(f)
    jitted(reversed_argument(0.1))  # traced
    fuzz.assert_same(jitted(reversed_argument(0.13)), f(reversed_argument(0.13)))  # replayed


# --- lf's kernels against NumPy's (outside lf.jit too) -------------------------------------------------
def _values(dtype):
    """Rounded values in [-3, 3] with signed zeros, NaN and infinities, as ``dtype`` (the
    integers with their extremes; the complex numbers with those values in both parts)."""
    values = np.concatenate([np.round(np.random.default_rng(0).uniform(-3, 3, 200), 2),
                             [-0.0, 0.0, 0.5, 1.0, -1.0, 2.0, np.nan, np.inf, -np.inf]])
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return values > 0
    if dtype.kind == "c":
        z = np.empty(values.shape, dtype=dtype)
        z.real, z.imag = values, np.roll(values, 5)
        return z
    if dtype.kind == "i":
        finite = np.nan_to_num(values * 2, nan=0, posinf=0, neginf=0).astype(dtype)
        return np.concatenate([finite, [np.iinfo(dtype).min, np.iinfo(dtype).max]]).astype(dtype)
    return values.astype(dtype)


# The table entries and input dtypes where lf's kernel was not NumPy's function (other bits,
# another dtype, a TypeError), all fixed: the kernels call NumPy's (or SciPy's) own function.
KERNELS_FOUND = {
    "i0": "float64 float32 float16",
    "scipy_cbrt": "float64 float32 float16 bool", "scipy_exp2": "float64 float32 float16 bool",
    "scipy_expit": "float64 float32 float16 bool", "scipy_logit": "float64 float32 float16 bool",
    "scipy_expm1": "float64 float32 float16 bool int64 int32 complex128 complex64",
    "scipy_log1p": "float64 float32 float16 bool complex128 complex64",
    "float_power": "float64 float32 float16", "logaddexp2": "float64 float32 float16 int64 int32",
    "degrees": "float32 float16", "rad2deg": "float32 float16", "deg2rad": "float16", "radians": "float16",
    "fabs": "int64 int32 bool", "rint": "int64 int32", "isclose": "int64 int32 bool",
    "fmax": "int64 int32 bool", "fmin": "int64 int32 bool", "heaviside": "bool",
    "angle": "bool", "angle_degrees": "bool", "heaviside_ties": "bool", "sinc": "bool",
    "sign": "complex128 complex64", "sign_complex": "complex128 complex64",
}
KERNEL_CASES = [pytest.param(name, dtype, id=f"{name}-{dtype}")
                for name, dtypes in KERNELS_FOUND.items() for dtype in dtypes.split()]
# a difference not fixed yet: an entry of fuzz.ENGINE_DIFFERS_FROM_NUMPY, a strict xfail below
ENGINE_CASES = [pytest.param(name, dtype, id=f"{name}-{dtype}", marks=pytest.mark.xfail(
    strict=True, raises=(AssertionError, TypeError), reason="lf's kernel is not NumPy's function"))
    for name, dtypes in fuzz.ENGINE_DIFFERS_FROM_NUMPY.items() for dtype in dtypes.split()]


@pytest.mark.parametrize("name, dtype", KERNEL_CASES + ENGINE_CASES)
def test_the_kernel_of_a_table_entry_is_numpys_function(name, dtype):
    function, x = fuzz.OP[name], _values(dtype)
    calls = [(x,)] if name in fuzz.UNARY else [(x, 0.5), (x, np.roll(x, 7)), (x, np.zeros_like(x))]
    for args in calls:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fuzz.assert_same(lf.jit(function)(*args), function(*args))


def test_the_minimum_of_an_all_nan_complex_slice_is_numpys():
    """NumPy's nanmin / nanmax leave an all-NaN complex slice's first element (its imaginary
    part kept), not nan+0j."""
    z = xr.DataArray(np.array([[complex(np.nan, -1.38), complex(np.nan, 0.37)]]), dims=("c", "b"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fuzz.assert_same(lf.jit(lambda z: z.min("c"))(z), z.min("c"))
        fuzz.assert_same(lf.jit(lambda z: z.max("b"))(z), z.max("b"))


@pytest.mark.parametrize("values, low", [(np.array([-0.0, 0.5]), 0.0), (np.array([False, True]), -0.0)],
                         ids=["float", "bool"])
def test_clip_keeps_numpys_zero(values, low):
    """NumPy's clip keeps x at a tie of signed zeros: clip(-0.0, 0.0, 1) is -0.0, clip(False,
    -0.0, 1) is 0.0."""
    v = xr.DataArray(values, dims="c")
    fuzz.assert_same(lf.jit(lambda v: v.clip(low, 1))(v), v.clip(low, 1))


def test_the_standard_deviation_of_complex_values_is_numpys():
    """NumPy's nanstd squares a complex deviation as d * conj(d), its complex product."""
    z = xr.DataArray(np.array([complex(-1.78, 2.76), complex(-0.46, 2.33)]), dims="a")
    fuzz.assert_same(lf.jit(lambda v: v.std("a"))(z), z.std("a"))


def test_the_median_of_a_signed_zero_beside_nan_is_numpys():
    """NumPy's median is a mean of the middle values, a sum from +0.0: of [nan, -0.0] 0.0."""
    x = xr.DataArray(np.array([np.nan, -0.0]), dims="a")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fuzz.assert_same(lf.jit(lambda v: v.median("a"))(x), x.median("a"))


@pytest.mark.parametrize("x", [np.array([complex(0.0, -0.0), complex(-0.0, 1.5)]), np.array([True, False])],
                         ids=["complex zero", "bool"])
def test_a_square_is_numpys(x):
    """``x ** 2`` is NumPy's square (its operator's shortcut): of 0-0j the imaginary part
    -0.0, of booleans int8."""
    fuzz.assert_same(lf.jit(lambda x: x ** 2)(x), x ** 2)


@pytest.mark.parametrize("transform", [lf.jit, lambda f: lf.jit(lf.vmap(f, dim="a")),
                                       lambda f: lf.grad(lambda z: np.abs(f(z)).sum())], ids=["jit", "jit-vmap", "grad"])
def test_a_write_into_the_real_part_of_a_traced_complex_value_is_refused(transform):
    """x.real of a complex value is an array of its own in the program (and on a tape): a write
    into it once did not reach x, silently (eager NumPy and lf.vmap write through it). It is
    refused, naming the part; reading x.real after x was written sees the write."""
    def f(x):
        v = x.real
        v += 0.5
        return v

    x = xr.DataArray(np.array([[complex(0.07, -1.43), complex(1.0, 2.0)]]), dims=("a", "b"))
    with pytest.raises(lf.UnsupportedOperationError, match=r"x\.real.*x = x \+ v"):
        transform(f)(x.copy())

    def read_after_write(x):
        part = x.real
        x[0] = 5 + 5j
        return part * 1.0

    values = np.array([complex(0.07, -1.43), complex(1.0, 2.0)])
    fuzz.assert_same(lf.jit(read_after_write)(values.copy()), read_after_write(values.copy()))


def test_a_product_by_ones_of_complex_values_is_kept_in_the_replay():
    """Found by the long fuzzer (LF_FUZZ_EXAMPLES=1500): the replay dropped a product by the
    backward pass's ones (``1 * x`` is ``x``), which of complex values is not: (1 + 0j) *
    (a - 0j) is a + 0j. A per-sample gradient of a complex argument's |arccos| replayed
    +0.0 where the eager call has -0.0 in an imaginary part."""
    nan, inf = np.nan, np.inf

    def loss(x):
        return fuzz.total(abs(np.arccos(x)), skipna=False)

    transform = lf.vmap(lf.grad(loss), dim="a")
    first = xr.DataArray(np.array([[complex(nan, -1.43), complex(2.7, -1.21), complex(-0.0, 1.89)],
                                   [complex(2.69, -2.45), complex(-0.0, 0.6), complex(-inf, nan)],
                                   [complex(1.97, -1.87), complex(inf, -2.67), complex(0.3, -1.35)]]),
                         dims=("a", "b"), name="x")
    second = xr.DataArray(np.array([[complex(0.68, -0.0), complex(nan, -inf), complex(-1.87, -inf)],
                                    [complex(2.15, -0.66), complex(-0.0, nan), complex(-0.0, inf)],
                                    [complex(-inf, -0.0), complex(-2.41, -2.28), complex(-2.09, 2.04)]]),
                          dims=("a", "b"), name="x")
    jitted = lf.jit(transform)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        jitted(first)
        for x in (second, first, second):
            fuzz.assert_same(jitted(x), transform(x))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.uint64, np.int64])
def test_a_negated_integer_added_to_floats_is_not_a_subtraction_in_the_replay(dtype):
    """Found by an adversarial sweep: the replay's rewrite of ``y + (-u)`` as ``y - u`` is exact
    for floats only: NumPy's -u of unsigned integers wraps (-1 is 255 in uint8), and -INT_MIN
    is INT_MIN. Every replay computed y - u."""
    rng = np.random.default_rng(12)
    info = np.iinfo(dtype)
    u = rng.integers(0, 5, 50).astype(dtype)
    if info.min < 0:
        u[:3] = info.min
    functions = (lambda y, u: y + (-u), lambda y, u: y - (-u), lambda y, u: (-u) + y)
    for f in functions:
        jitted = lf.jit(f)
        for _ in range(3):
            y = rng.normal(size=50)
            fuzz.assert_same(jitted(y, u), f(y, u))


def test_a_pad_of_a_fortran_ordered_array_is_laid_out_as_numpys_and_summed_as_numpy_sums():
    """np.pad (and xarray's pad and shift) keeps a Fortran-ordered input in Fortran order: a
    sum over the result adds in that order. The traced pad wrote it in C order: other bits
    from the first call on."""
    rng = np.random.default_rng(4)
    for dtype in (np.float32, np.float64):
        a = np.asfortranarray(rng.standard_normal((300, 400)).astype(dtype))

        def f(a):
            return np.pad(a, ((1, 2), (0, 0)), constant_values=0.5).sum(axis=1)

        def g(u):
            return u.shift(y=1, fill_value=0.5).sum("x")

        jitted, shifted = lf.jit(f), lf.jit(g)
        for scale in (1.0, 2.0, 3.0):
            b = np.asfortranarray(a * dtype(scale))
            assert lf.jit(lambda a: np.pad(a, 1))(b).flags.f_contiguous
            fuzz.assert_same(jitted(b), f(b))
            u = xr.DataArray(b, dims=("y", "x"))
            fuzz.assert_same(shifted(u), g(u))
