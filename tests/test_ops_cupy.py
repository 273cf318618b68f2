"""Every entry of the operator table on CuPy arrays (a GPU), against NumPy.

Skipped, with the reason, where CuPy or a GPU is missing (CI has none). Three checks per
(entry, dtype), each listing every failing call as ``test_ops_vmap.py`` does:

1. ``lf.vmap`` of the entry on CuPy arrays against the per-example NumPy loop on the
   same values (arrays batched at axis 0 or not batched);
2. for differentiable entries in float64, the VJP on CuPy (a random cotangent) against
   the VJP on NumPy of the same values: the NumPy VJP is checked against finite
   differences in ``test_ops_grad.py``, so this asks whether the rules' kernels run on
   CuPy and give the same numbers;
3. the same vmap under ``lf.jit`` (the replayed program must run on CuPy arrays and never
   take NumPy's fused path).

The results must be CuPy arrays: nothing may move to the host behind the user's back.
"""

import traceback

import numpy as np
import pytest

import labeled_func as lf
from opinfo import OP_DB, array_positions, assert_same, case, examples, placements, stack_outputs, with_arrays

cupy = pytest.importorskip("cupy", reason="CuPy is not installed (the 'gpu' extra on a GPU machine)")
try:
    _GPUS = cupy.cuda.runtime.getDeviceCount()
except Exception as error:  # noqa: BLE001 - CUDARuntimeError without a driver
    pytest.skip(f"CuPy finds no usable GPU ({type(error).__name__}: {error})", allow_module_level=True)
if _GPUS < 1:
    pytest.skip("CuPy finds no GPU", allow_module_level=True)

pytestmark = pytest.mark.gpu

F64 = np.dtype(np.float64)
BATCH = 3
CASES = [case(op, "cupy", dtype) for op in OP_DB for dtype in op.dtypes]
GRAD_CASES = [case(op, "cupy-grad", F64) for op in OP_DB if op.differentiable and F64 in op.dtypes]


# Entries whose samples build NumPy arrays inside the call (a mask from a tuple, fftfreq):
# CuPy refuses NumPy arrays in its operations, outside lf as well.
NUMPY_CONSTANTS = {"fftfreq", "nanmean_where", "nanmax_where", "nanmin_where", "trim_zeros"}
# With a raw CuPy first argument NumPy hands the call to CuPy's own function (CuPy's
# __array_function__ comes first), as it does outside lf: these CuPy functions lack the
# feature the sample uses (reductions' where=, histogram's weights beside a raw array).
CUPY_OWN_FUNCTION = {"add_reduce_where", "amax_where", "fmin_reduce_where", "max_where", "maximum_reduce_where",
                     "min_where", "nansum_where", "prod_where", "sum_where", "sum_where_initial",
                     "histogram_weighted"}


def skipped_placement(op, in_dims):
    """Why this placement of the entry is not checked on CuPy, or None."""
    if op.name.startswith("vectorize") and None in in_dims:
        return "np.vectorize loops over host values: a raw CuPy argument refuses to convert, outside lf as well"
    if op.name in CUPY_OWN_FUNCTION and in_dims[0] is None:
        return "CuPy's own function runs for a raw first argument and lacks the feature"
    return None


def to_numpy(value):
    assert isinstance(value, cupy.ndarray), f"returned a {type(value).__module__}.{type(value).__name__}, not CuPy"
    return cupy.asnumpy(value)


def raw_first_argument_refuses_tracer(op, in_dims):
    """``x[i]`` / ``x[...] = v`` / ``x + y`` with a raw CuPy ``x``: CuPy's own method runs
    before any tracer can (as NumPy's does); the policy errors are tested on NumPy."""
    return in_dims[0] is None and (op.index_into_first_arg or op.writes_into_first_arg or op.operator_on_first_arg)


def on_device(sample_examples, in_dims):
    sample = sample_examples[0]
    return [
        cupy.asarray(sample.args[j] if dim is None else np.stack([example.args[j] for example in sample_examples]))
        for j, dim in zip(array_positions(sample), in_dims)
    ]


# Eigen- and singular vectors: their signs are the library's choice (LAPACK's and cuSOLVER's
# differ), so these entries are compared through the sign-free function of the derivative
# tests (``ad_op``: products v_ij v_kj).
SIGN_CHOICE = {"linalg_eigh", "linalg_eigh_upper", "linalg_svd"}


# eig's eigenvectors are unit vectors up to a complex phase, which the library chooses (CuPy's
# float32 ones come as -1 times LAPACK's): compared through the phase-free v_ij conj(v_kj).
PHASE_CHOICE = {"linalg_eig", "linalg_eig_real_spectrum"}


def function_of(op, sample):
    """``op`` (or its sign-free ``ad_op``) as a function of the sample's arrays."""
    if op.name in SIGN_CHOICE:
        return with_arrays(op, sample, op.differentiated)
    call = with_arrays(op, sample)
    if op.name in PHASE_CHOICE:
        def phase_free(*arrays):
            w, v = call(*arrays)
            return w, np.einsum("...ij,...kj->...ikj", v, np.conj(v))
        return phase_free
    return call


def same(actual, expected, op, dtype):
    """``assert_same``; for float32 and complex64 inputs every floating result (a float64
    density too) at single precision, 1e-5, and factorizations at 1e-3 (cuSOLVER and LAPACK
    round differently in single precision, amplified by the condition number)."""
    single = np.dtype(dtype) in (np.float32, np.complex64)
    rtol = (1e-3 if op.name.startswith("linalg_") else 1e-5) if single else None
    assert_same(actual, expected, compare_values=op.compare_values, to_numpy=to_numpy, rtol=rtol)


def loop(op, sample_examples, in_dims, call=None):
    sample = sample_examples[0]
    call = call or function_of(op, sample)
    positions = array_positions(sample)
    return stack_outputs([
        call(*[(example if dim is not None else sample).args[j] for j, dim in zip(positions, in_dims)])
        for example in sample_examples
    ])


def run_vmap_cases(op, dtype, transform, *, fixed_shapes=False):
    if op.name in NUMPY_CONSTANTS:
        pytest.skip(f"{op.name}: its samples mix NumPy constants into the call, which CuPy refuses")
    failures, calls = [], 0
    for sample_examples in examples(op, dtype, BATCH):
        sample = sample_examples[0]
        call = function_of(op, sample)
        for in_dims in placements(sample, choices=(0, None)):
            if raw_first_argument_refuses_tracer(op, in_dims) or skipped_placement(op, in_dims):
                continue
            if any(j in op.dynamic_shape_args and d is not None for j, d in zip(array_positions(sample), in_dims)):
                continue  # DynamicShapeError: the policy, tested on NumPy
            calls += 1
            try:
                if op.name in PHASE_CHOICE and np.dtype(dtype) in (np.float32, np.complex64):
                    check_eigenpairs(op, sample_examples, in_dims, transform)
                    continue
                actual = transform(lf.vmap(call, in_dims=in_dims))(*on_device(sample_examples, in_dims))
                same(actual, loop(op, sample_examples, in_dims), op, dtype)
            except Exception as error:  # noqa: BLE001 - every failing call is listed
                if fixed_shapes and isinstance(error, lf.DynamicShapeError):
                    calls -= 1  # lf.jit records fixed shapes: the policy, tested on NumPy in test_jit.py
                    continue
                failures.append(f"{sample!r} in_dims={in_dims}: {describe(error)}")
    return failures, calls


def check_eigenpairs(op, sample_examples, in_dims, transform):
    """Single-precision eig: cuSOLVER's and LAPACK's eigenvectors of a matrix with close
    eigenvalues differ by more than rounding (both within the problem's conditioning), so
    the oracle is the definition: A v = v diag(w) to single precision, unit columns, the
    dtypes and shapes of the NumPy loop, and the loop's eigenvalues (as a set)."""
    sample = sample_examples[0]
    w, v = transform(lf.vmap(with_arrays(op, sample), in_dims=in_dims))(*on_device(sample_examples, in_dims))
    expected_w, expected_v = loop(op, sample_examples, in_dims, with_arrays(op, sample))
    w, v = to_numpy(w), to_numpy(v)
    assert (w.dtype, w.shape, v.dtype, v.shape) == (expected_w.dtype, expected_w.shape, expected_v.dtype,
                                                    expected_v.shape)
    a = np.stack([example.args[0] for example in sample_examples]).astype(np.complex128)
    scale = 1 + np.abs(a).max()
    residual = np.abs(a @ v - v * w[..., None, :]).max()
    assert residual <= 1e-4 * scale, f"|A v - v w| = {residual:.2e}"
    np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1.0, rtol=1e-5)
    np.testing.assert_allclose(np.sort_complex(w.astype(np.complex128)),
                               np.sort_complex(expected_w.astype(np.complex128)), rtol=1e-4, atol=1e-4 * scale)


def describe(error):
    """The error's type, first line and innermost frame of this project (where to look)."""
    first_line = (str(error).strip().splitlines() or [""])[0]
    frames = [f for f in traceback.extract_tb(error.__traceback__) if "/labeled_func/" in f.filename
              or "/kernels/" in f.filename]
    where = f" [at {frames[-1].filename.rsplit('/', 2)[-2]}/{frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}]" \
        if frames else ""
    return f"{type(error).__name__}: {first_line}{where}"


def fail_if(op, failures, calls, what):
    if not calls:
        pytest.skip(f"{op.name}: every placement is a policy error (tested on NumPy)")
    if failures:
        shown = "\n".join(failures[:12])
        pytest.fail(f"{len(failures)} of {calls} calls of {op.name} on CuPy {what}:\n{shown}", pytrace=False)


@pytest.mark.parametrize("op, dtype", CASES)
def test_vmap_on_cupy_matches_numpy_loop(op, dtype):
    fail_if(op, *run_vmap_cases(op, dtype, lambda f: f), "differ from the NumPy loop")


@pytest.mark.parametrize("op, dtype", CASES)
def test_jit_of_vmap_on_cupy_matches_numpy_loop(op, dtype):
    def twice(f):  # the first call traces, the second replays the program
        jitted = lf.jit(f)
        return lambda *args: (jitted(*args), jitted(*args))[1]

    fail_if(op, *run_vmap_cases(op, dtype, twice, fixed_shapes=True), "under lf.jit differ from the NumPy loop")


@pytest.mark.parametrize("op, dtype", GRAD_CASES)
def test_vjp_on_cupy_matches_vjp_on_numpy(op, dtype):
    if op.name in NUMPY_CONSTANTS:
        pytest.skip(f"{op.name}: its samples mix NumPy constants into the call, which CuPy refuses")
    failures, calls = [], 0
    for (sample,) in examples(op, dtype, 1):
        positions = array_positions(sample)
        wrt = [k for k, j in enumerate(positions)
               if j not in op.integer_index_args and np.issubdtype(sample.args[j].dtype, np.floating)]
        if not wrt:
            continue
        full = with_arrays(op, sample, op.differentiated)
        arrays = [sample.args[j] for j in positions]

        def fn(*free, arrays=arrays, full=full, wrt=wrt, lib=np):
            args = [lib.asarray(a) for a in arrays]
            for k, value in zip(wrt, free):
                args[k] = value
            return full(*args)

        calls += 1
        try:
            out, vjp_np = lf.vjp(fn, *[arrays[k] for k in wrt])
            rng = np.random.default_rng(1)
            cotangent = tree_like(out, lambda o: rng.standard_normal(np.shape(o)).astype(np.result_type(o)))
            expected = vjp_np(cotangent)
            out_gpu, vjp_gpu = lf.vjp(lambda *free: fn(*free, lib=cupy), *[cupy.asarray(arrays[k]) for k in wrt])
            actual = vjp_gpu(tree_like(cotangent, cupy.asarray))
            same(out_gpu, tree_like(out, np.asarray), op, dtype)
            same(tuple(actual), tuple(np.asarray(e) for e in expected), op, dtype)
        except Exception as error:  # noqa: BLE001 - every failing call is listed
            failures.append(f"{sample!r}: {describe(error)}")
    fail_if(op, failures, calls, "VJPs differ from NumPy's")


def tree_like(value, leaf):
    if isinstance(value, (tuple, list)):
        return type(value)(tree_like(v, leaf) for v in value)
    return leaf(value)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_nan_safe_products_run_as_one_kernel_and_mask_as_numpy(dtype):
    """On CuPy the NaN-safe product of the VJP rules, and its sum down to a broadcast operand
    (multiply_sum), are one kernel that masks without a look at the values from the host;
    they give what the NumPy kernels give, zero cotangents against infinities included."""
    from labeled_func_kernels import elementwise as ew

    rng = np.random.default_rng(3)
    g = rng.normal(size=(6, 40)).astype(dtype)
    g[:, ::3] = 0.0
    d = rng.normal(size=40).astype(dtype)
    d[::4], d[1::8] = np.inf, np.nan
    ew._SAFE_PRODUCT_KERNELS.clear()
    with np.errstate(invalid="ignore"):  # the oracle: NumPy's product, masked by np.where
        expected = np.where((g == 0) & ~np.isfinite(d), dtype(0), g * d)
    expected_sum = expected.sum(axis=0)
    actual = ew.safe_multiply.impl(cupy.asarray(g), cupy.asarray(d))
    actual_sum = ew.multiply_sum.impl(cupy.asarray(g), cupy.asarray(d), axes=(0,), safe=True)
    assert np.dtype(dtype).name in ew._SAFE_PRODUCT_KERNELS  # the kernel ran, not the host's choice
    assert isinstance(actual, cupy.ndarray) and isinstance(actual_sum, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(actual), expected)
    tolerance = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(cupy.asnumpy(actual_sum), expected_sum, rtol=tolerance, atol=tolerance)
    assert np.isfinite(expected_sum).sum() > 0 and np.isnan(expected_sum).sum() > 0  # both kinds of column


def test_gradients_never_wait_for_the_gpu():
    """The host queues a gradient's kernels without waiting for them: no rule looks at
    values on the host (NaN-safe products, multiply_sum's sums, the NaN mask of xarray's
    default ``skipna`` mean). CuPy raises at the first wait inside
    ``cupyx.allow_synchronize(False)``; the values are checked after, against the
    gradient worked out by hand."""
    import warnings

    import xarray as xr

    cupyx = pytest.importorskip("cupyx")
    if not hasattr(cupyx, "allow_synchronize"):
        pytest.skip("this CuPy cannot detect waits (cupyx.allow_synchronize is gone)")

    f = np.linspace(0.0, 1.0, 16)

    def model(p):  # per-sample parameters times fields (multiply_sum), x**4 and sin (safe products)
        field = p["x"] * xr.DataArray(cupy.asarray(f), dims="cell")
        return (np.sin(field) * p["y"] ** 4).mean("cell") + np.sqrt(p["y"] ** 2 + 1.0)

    rng = np.random.default_rng(2)
    values = {name: rng.uniform(0.5, 1.5, 64) for name in ("x", "y")}
    on_gpu = xr.Dataset({name: ("sample", cupy.asarray(v)) for name, v in values.items()})
    per_sample = lf.vmap(lf.grad(model), dim="sample")
    per_sample(on_gpu)  # CuPy compiles its kernels on first use
    cupy.cuda.get_current_stream().synchronize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # CuPy says the detection is not exhaustive
        with cupyx.allow_synchronize(False):
            got = per_sample(on_gpu)
    x, y = values["x"][:, None], values["y"]
    expected = {"x": (np.cos(x * f) * f).mean(axis=1) * y**4,
                "y": 4 * y**3 * np.sin(x * f).mean(axis=1) + y / np.sqrt(y**2 + 1)}
    for name in values:
        assert isinstance(got[name].data, cupy.ndarray)
        np.testing.assert_allclose(cupy.asnumpy(got[name].data), expected[name], rtol=1e-12, atol=1e-14)
