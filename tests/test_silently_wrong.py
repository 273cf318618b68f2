"""Results that used to come back silently wrong (issue #12): each now either agrees with
its oracle or raises the documented error, naming the culprit.

Oracles: NumPy's own results and dtypes (quantiles, promotion), the per-example loop
(vmap), derivatives worked out by hand, central finite differences, and the documented
conventions (the zero subgradient of std at zero spread; the symmetric perturbation of
cholesky/eigh in docs/autodiff.md).
"""
import functools
import operator
import warnings

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

X = xr.DataArray([1.0, 2.0, 4.0], dims="t")
BATCH = xr.DataArray([[1.0, 2.0, 4.0], [3.0, -1.0, 0.5]], dims=("s", "t"))


def run(transform, f, x=X):
    """``f`` under one transform, by name."""
    if transform == "grad":
        return lf.grad(f)(x)
    if transform == "jvp":
        return lf.jvp(f, (x,), (xr.ones_like(x),))[1]
    if transform == "jacrev":
        return lf.jacrev(f)(x)
    if transform == "jacfwd":
        return lf.jacfwd(f)(x)
    if transform == "vmap":
        return lf.vmap(f, dim="s")(BATCH)
    raise AssertionError(transform)


# --- a Dask array built from traced values --------------------------------------------------------
da = pytest.importorskip("dask.array")


def dask_stack(x):
    stacked = da.stack([x.data[0], x.data[1]])  # what xskillscore does for non-ndarray inputs
    return xr.DataArray(stacked, dims="k").sum()


def dask_chunk(x):
    return x.chunk({"t": 1}).sum()


def dask_from_array_named(x):
    return xr.DataArray(da.from_array(x.data, name="mine"), dims="t").sum()  # Dask does not tokenize it


def dask_concatenate(x):
    return xr.DataArray(da.concatenate([np.zeros(1), x.data]), dims="u").sum()


@pytest.mark.parametrize("f, culprit", [(dask_stack, "dask.array.core.stack"),
                                        (dask_chunk, "xarray's DataArray.chunk"),
                                        (dask_from_array_named, "dask.array.core.from_array"),
                                        (dask_concatenate, "dask.array.core.concatenate")],
                         ids=["stack", "chunk", "from_array-named", "concatenate"])
@pytest.mark.parametrize("transform", ["grad", "jvp", "jacrev", "vmap"])
def test_a_dask_array_of_traced_values_raises_at_once_naming_the_dask_call(transform, f, culprit):
    # before: grad returned zeros and vmap a lazy array that failed at compute time
    with pytest.raises(lf.ConversionError) as excinfo:
        run(transform, f)
    message = str(excinfo.value)
    assert culprit in message and "a Dask array cannot be built from a value traced by" in message, message
    assert f"test_silently_wrong.py:" in message  # the user's line
    label = {"grad": "grad", "jvp": "jvp", "jacrev": "jacrev", "vmap": "vmap"}[transform]
    assert f"lf.{label}" in message


def test_numpy_stack_is_the_fix_and_dask_data_still_differentiates():
    fixed = lf.grad(lambda x: xr.DataArray(np.stack([x.data[0], x.data[1]]), dims="k").sum() ** 2)(X)
    np.testing.assert_allclose(fixed.values, [2 * 3.0, 2 * 3.0, 0.0])  # d (x0 + x1)^2
    # differentiating a function of Dask-backed data (no Dask array built inside) still works
    lazy = lf.grad(lambda x: (x ** 2).sum())(X.chunk({"t": 2}))
    np.testing.assert_allclose(lazy.values, 2 * X.values)


# --- vmap outputs that are not arrays ---------------------------------------------------------------
DS = xr.Dataset({"a": ("s", [1.0, 2.0])})


@pytest.mark.parametrize("f, path, kind", [
    (lambda d: d.values, "output", "method"),                     # Dataset.values is a method
    (lambda d: ("label", d.a), "output[0]", "str"),
    (lambda d: {"scale": d.a, "f": (lambda: 1.0)}, "output['f']", "function"),
    (lambda d: [d.a, np.str_("x")], "output[1]", "str_"),
    (lambda d: d.a.sum, "output", "method"),
], ids=["bound-method", "string", "closure", "numpy-string", "unbound-reduction"])
def test_vmap_outputs_that_are_not_arrays_raise_type_error_naming_path_and_type(f, path, kind):
    # before: stacked into an object (or string) array, one copy per example
    with pytest.raises(TypeError) as excinfo:
        lf.vmap(f, dim="s")(DS)
    message = str(excinfo.value)
    assert f"returned {path} of type" in message and kind in message, message


def test_vmap_outputs_that_are_not_arrays_raise_on_the_dask_path_too():
    with pytest.raises(TypeError, match=r"returned output\[0\] of type builtins\.str"):
        lf.vmap(lambda d: ("label", d.a), dim="s")(DS.chunk({"s": 1}))


def test_numbers_none_and_arrays_are_still_outputs():
    out = lf.vmap(lambda d: (2.5, None, d.a * 2, np.float32(1.0), True), dim="s")(DS)
    np.testing.assert_array_equal(out[0], [2.5, 2.5])
    assert out[1] is None
    np.testing.assert_array_equal(out[2].values, [2.0, 4.0])
    assert out[3].dtype == np.float32 and out[4].dtype == np.bool_


# --- storing traced values into a plain NumPy buffer -------------------------------------------------
def fill(x):
    buf = np.zeros(3)
    buf.fill(x.data[0])
    return (xr.DataArray(buf, dims="t") * x).sum()


def fill_dataarray(x):
    buf = np.zeros(3)
    buf.fill(x[0])  # a 0-d DataArray: NumPy calls its __float__
    return (xr.DataArray(buf, dims="t") * x).sum()


def fromiter(x):
    buf = np.fromiter((v * 2.0 for v in x.data), dtype=float)
    return (xr.DataArray(buf, dims="t") ** 2).sum()


def setitem_call(x):
    buf = np.zeros(3)
    buf.__setitem__(0, x.data[1])
    return (xr.DataArray(buf, dims="t") * x).sum()


def setitem_call_slice(x):
    buf = np.zeros(3)
    buf.__setitem__(slice(0, 3), x.data)
    return (xr.DataArray(buf, dims="t") * x).sum()


def operator_setitem(x):
    buf = np.zeros(3)
    operator.setitem(buf, 0, x.data[1])
    return (xr.DataArray(buf, dims="t") * x).sum()


def put_method(x):
    buf = np.zeros(3)
    buf.put(0, x.data[1])
    return (xr.DataArray(buf, dims="t") * x).sum()


STORES = {
    "fill": (fill, "plain.fill(value)"),
    "fill-dataarray": (fill_dataarray, "plain.fill(value)"),
    "fromiter": (fromiter, "np.fromiter(values, dtype)"),
    "setitem-call": (setitem_call, "plain.__setitem__(key, value)"),
    "setitem-call-slice": (setitem_call_slice, "plain.__setitem__(key, value)"),
    "operator-setitem": (operator_setitem, "operator.setitem(plain, key, value)"),
    "put": (put_method, "plain.put(indices, values)"),
}


@pytest.mark.parametrize("name", sorted(STORES))
@pytest.mark.parametrize("transform", ["grad", "jvp", "jacrev", "jacfwd", "vmap"])
def test_storing_a_traced_value_into_a_plain_buffer_raises_inplace_error(transform, name):
    # before: under AD the primal was stored and the derivative dropped (fill: grad [1, 2, 4]
    # instead of [1 + 7, 1, 1])
    f, culprit = STORES[name]
    with pytest.raises(lf.InplaceError) as excinfo:
        run(transform, f)
    message = str(excinfo.value)
    assert culprit in message and "test_silently_wrong.py:" in message, message


def test_buf_index_store_and_the_traced_buffer_fix():
    def index_store(x):
        buf = np.zeros(3)
        buf[0] = x.data[1]
        return (xr.DataArray(buf, dims="t") * x).sum()

    with pytest.raises(lf.InplaceError, match=r"plain\[\.\.\.\] = value"):
        lf.grad(index_store)(X)

    def traced_fill(x):
        buf = np.zeros_like(x.data)  # traced: the fix the message points at
        buf.fill(x.data[0])
        return (xr.DataArray(buf, dims="t") * x).sum()

    # d/dx (x0 (x0 + x1 + x2)) = (2 x0 + x1 + x2, x0, x0)
    np.testing.assert_allclose(lf.grad(traced_fill)(X).values, [2 * 1.0 + 2.0 + 4.0, 1.0, 1.0])
    looped = [traced_fill(BATCH[i]).item() for i in range(2)]
    np.testing.assert_allclose(lf.vmap(traced_fill, dim="s")(BATCH).values, looped)
    # float() of a traced value under grad alone is still the primal (torch's .item())
    np.testing.assert_allclose(lf.grad(lambda x: x.sum() * float(x.data[0]))(X).values, [1.0, 1.0, 1.0])


# --- std and var over one element (zero spread) --------------------------------------------------------
STDS = {
    "xarray-std": lambda x: x.std(),                     # xarray: nanstd
    "numpy-std": lambda x: np.std(x.data),                 # the reduce_std primitive
    "xarray-std-ddof1": lambda x: x.std(ddof=1),
    "numpy-std-keepdims": lambda x: np.std(x.data, keepdims=True).sum(),
}


@pytest.mark.parametrize("name", sorted(STDS))
@pytest.mark.parametrize("transform", ["grad", "jvp", "jacrev", "jacfwd", "hessian"])
def test_std_at_zero_spread_has_the_zero_subgradient(transform, name):
    # before: NaN (sqrt's or 1/std's infinite slope times zero)
    f = STDS[name]
    one = xr.DataArray([3.0], dims="t")
    flat = xr.DataArray([2.0, 2.0, 2.0], dims="t")
    for x in ([flat] if "ddof1" in name else [one, flat]):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # no 0/0 anywhere
            if transform == "hessian":
                got = lf.hessian(f)(x)
            else:
                got = run(transform, f, x)
        assert float(f(x)) == 0.0
        np.testing.assert_array_equal(np.asarray(got), 0.0)


@pytest.mark.parametrize("name", sorted(STDS))
def test_std_away_from_zero_spread_keeps_its_derivative(name):
    f = STDS[name]
    ddof = 1 if "ddof1" in name else 0
    x = BATCH[1]
    n = x.size
    expected = (x - x.mean()) / ((n - ddof) * float(x.std(ddof=ddof)))  # d std / d x_i
    np.testing.assert_allclose(lf.grad(f)(x).values, expected.values, rtol=1e-12)
    # vmap of grad over a flat and a spread example: each as alone
    both = xr.concat([xr.full_like(x, 2.0), x], dim="s")
    per_example = lf.vmap(lf.grad(f), dim="s")(both)
    np.testing.assert_array_equal(per_example[0].values, 0.0)
    np.testing.assert_allclose(per_example[1].values, expected.values, rtol=1e-12)


@pytest.mark.parametrize("transform", ["grad", "jvp"])
def test_var_at_zero_spread_has_its_true_derivative_zero(transform):
    for f in (lambda x: x.var(), lambda x: np.var(x.data)):
        got = run(transform, f, xr.DataArray([3.0], dims="t"))
        np.testing.assert_array_equal(np.asarray(got), 0.0)


# --- quantile / percentile: NumPy's dtype, and its values across infinities -------------------------
FUNCTIONS = {"quantile": (np.quantile, 1), "nanquantile": (np.nanquantile, 1),
             "percentile": (np.percentile, 100), "nanpercentile": (np.nanpercentile, 100)}
LEVELS = {
    "python-float": 0.3, "python-int-1": 1, "numpy-float64": np.float64(0.7), "numpy-float32": np.float32(0.3),
    "list": [0.1, 0.5, 1.0], "tuple": (0.25, 0.75), "float32-array": np.array([0.2, 0.9], np.float32),
    "int-array": np.array([0, 1]), "0d-array": np.array(0.6), "int-list": [1],
}


def _scaled(q, scale):
    if scale == 1:
        return q
    if isinstance(q, (list, tuple)):
        return type(q)(v * scale for v in q)
    return q * scale


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.float16])
@pytest.mark.parametrize("level", sorted(LEVELS))
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_quantile_dtype_and_values_are_numpys(name, level, dtype):
    # before: a sequence of levels on float32 data gave float32 (NumPy: float64)
    function, scale = FUNCTIONS[name]
    q = _scaled(LEVELS[level], scale)
    data = np.array([[3.0, 1.0, 4.0, 1.5, 9.0], [2.0, 6.0, 5.0, 3.5, 0.5]]).astype(dtype)
    expected = np.stack([function(row, q) for row in data])
    got = lf.vmap(lambda v: function(v, q), in_dims=(0,))(data)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


INFINITE = [[1.0, np.inf], [-np.inf, 1.0], [-np.inf, np.inf], [1.0, 2.0, np.inf], [-np.inf, -np.inf, 1.0],
            [1.0, np.nan, -np.inf], [np.nan, np.nan]]


@pytest.mark.parametrize("values", INFINITE, ids=str)
@pytest.mark.parametrize("name", sorted(FUNCTIONS) + ["median", "nanmedian"])
def test_quantiles_next_to_infinities_are_numpys(name, values):
    # before: NaN where NumPy interpolates from the upper neighbour (fraction >= 0.5) and
    # gives the infinity, e.g. np.quantile([-inf, 1], 0.75) = -inf
    data = np.array([values])
    if name in ("median", "nanmedian"):
        function = getattr(np, name)
        calls = [function]
    else:
        function, scale = FUNCTIONS[name]
        calls = [functools.partial(function, q=_scaled(q, scale)) for q in (0.0, 0.25, 0.5, 0.75, 0.9, 1.0, 1)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for call in calls:
            expected = call(data[0])
            got = lf.vmap(call, in_dims=(0,))(data)[0]
            assert got.dtype == expected.dtype
            np.testing.assert_array_equal(got, expected, err_msg=f"{name}{values} {call}")


def test_quantile_levels_out_of_range_raise_numpys_error():
    for function, q, message in [(np.quantile, 1.5, r"Quantiles must be in the range \[0, 1\]"),
                                 (np.nanpercentile, [50, 101], r"Percentiles must be in the range \[0, 100\]")]:
        with pytest.raises(ValueError, match=message):
            function(np.arange(3.0), q)  # NumPy's own
        with pytest.raises(ValueError, match=message):
            lf.vmap(lambda v: function(v, q), in_dims=(0,))(np.arange(6.0).reshape(2, 3))


def test_quantile_derivative_from_the_upper_neighbour_is_the_interpolation_weight():
    # q = 0.75 of 4 values: index 2.25 between the 3rd and 4th smallest, weights 0.75 and 0.25
    x = xr.DataArray([4.0, 1.0, 3.0, 2.0], dims="t")
    grad = lf.grad(lambda v: np.quantile(v.data, 0.75))(x)
    np.testing.assert_allclose(grad.values, [0.25, 0.0, 0.75, 0.0])
    grad = lf.grad(lambda v: np.quantile(v.data, 0.4))(x)  # index 1.2: weights 0.8, 0.2
    np.testing.assert_allclose(grad.values, [0.0, 0.0, 0.2, 0.8])


# --- linearize leaves the caller's array alone ---------------------------------------------------------
def test_linearize_does_not_run_the_function_on_the_callers_array():
    def shift_in_place(x):
        x += 1.0
        return x ** 2

    x = xr.DataArray([1.0, 2.0], dims="t")
    out, jvp_fn = lf.linearize(shift_in_place, x)
    # before: x became [2, 3] and the JVP was taken there
    np.testing.assert_array_equal(x.values, [1.0, 2.0])
    np.testing.assert_allclose(out.values, shift_in_place(x.copy()).values)
    tangent = xr.DataArray([1.0, -1.0], dims="t")
    np.testing.assert_allclose(jvp_fn(tangent).values, 2 * (x.values + 1.0) * tangent.values)
    expected = lf.jvp(shift_in_place, (x,), (tangent,))[1]
    np.testing.assert_allclose(jvp_fn(tangent).values, expected.values)
    np.testing.assert_array_equal(x.values, [1.0, 2.0])


def test_linearize_output_is_the_plain_output():
    def f(x, scale):
        return np.sin(x) * scale

    out, _ = lf.linearize(f, X, 2.0)
    xr.testing.assert_identical(out, f(X, 2.0))
    assert isinstance(out.data, np.ndarray)


# --- jacfwd and jacrev agree on dtypes: NumPy's promotion --------------------------------------------
X32 = xr.DataArray(np.array([1.0, 2.0, 3.0], dtype=np.float32), dims="t")
X64 = X32.astype(np.float64)


@pytest.mark.parametrize("f, x", [
    (lambda x: x * np.ones(3), X32),                    # float32 argument, float64 output
    (lambda x: x.astype(np.float32) * 2, X64),          # float64 argument, float32 output
    (lambda x: x * 2, X32),
    (lambda x: (x > 1.5).astype(int), X32),             # an integer output: no derivative
], ids=["f32-to-f64", "f64-to-f32", "f32-to-f32", "f32-to-int"])
def test_jacfwd_and_jacrev_give_numpys_promotion(f, x):
    # before: float64 by jacfwd and float32 by jacrev for the first
    out = f(x)
    kind = out.dtype.kind
    expected = np.result_type(out.dtype, x.dtype) if kind == "f" else x.dtype
    forward, reverse = lf.jacfwd(f)(x), lf.jacrev(f)(x)
    assert forward.dtype == reverse.dtype == expected
    np.testing.assert_array_equal(forward.values, reverse.values)


def test_jacobians_of_several_outputs_promote_each_block():
    f = lambda x: (x * 2, x * np.ones(3))  # noqa: E731 - float32 and float64 outputs
    forward, reverse = lf.jacfwd(f)(X32), lf.jacrev(f)(X32)
    assert [j.dtype for j in forward] == [j.dtype for j in reverse] == [np.float32, np.float64]
    hessian = lf.hessian(lambda x: (x ** 3 * np.ones(3)).sum())(X32)
    assert hessian.dtype == np.float64
    np.testing.assert_allclose(hessian.values, np.diag(6 * X32.values.astype(float)))
