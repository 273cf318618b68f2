"""Dynamic shapes and the errors raised deep inside xarray/NumPy/SciPy.

- Under vmap, operations whose output shape follows the values raise
  DynamicShapeError naming the operation, on a DataArray as on its ``.data``, through
  ``lf.vmap`` and the ``.func`` accessor, and for the xarray methods that do it
  (dropna, groupby by values, where(drop=True)).
- Without a vmap (grad, jvp, jacrev alone) and with masks that are the same for every
  example, the same operations work: checked against the untransformed result, a
  per-example loop and central finite differences.
- A conversion that fails inside a library names the public call that led there, the
  user's line and the library it went through (``labeled_func.engine.diagnose``).

Every error test checks the class and that the message names the culprit.
"""
import os

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func.engine import diagnose

HERE = os.path.basename(__file__)


def batch(values=((0.0, 1.0, 2.0), (0.0, 0.0, 3.0), (-1.0, 2.0, 0.5))):
    return xr.DataArray(np.asarray(values, dtype=float), dims=("sample", "t"))


def series():
    rng = np.random.default_rng(0)
    return xr.DataArray(rng.normal(size=(3, 4)), dims=("sample", "t"), coords={"t": [0.0, 1.0, 2.5, 4.0]})


def loop(func, xs, dim="sample"):
    """The per-example oracle: func on each example, stacked along ``dim``."""
    return [np.asarray(func(xs.isel({dim: i}))) for i in range(xs.sizes[dim])]


def fd_grad(func, x, eps=1e-6):
    """Central finite differences of a scalar function of a 1-D DataArray."""
    grad = np.zeros(x.shape)
    for i in range(x.size):
        step = np.zeros(x.shape)
        step[i] = eps
        grad[i] = (float(func(x + step)) - float(func(x - step))) / (2 * eps)
    return grad


def fd_jacobian(func, x, eps=1e-6):
    columns = []
    for i in range(x.size):
        step = np.zeros(x.shape)
        step[i] = eps
        columns.append((np.asarray(func(x + step), float) - np.asarray(func(x - step), float)) / (2 * eps))
    return np.stack(columns, axis=-1)


def line_of(func, offset=1):
    """``"test_dynamic_shape_errors.py:<line>"`` of the line ``offset`` below func's def."""
    return f"{HERE}:{func.__code__.co_firstlineno + offset}"


def assert_policy(excinfo, cls, *names):
    assert isinstance(excinfo.value, RuntimeError) and isinstance(excinfo.value, lf.TransformError)
    assert type(excinfo.value) is cls, f"{type(excinfo.value).__name__}: {excinfo.value}"
    message = str(excinfo.value)
    for name in names:
        assert name in message, f"{name!r} not in: {message}"


# --- 1. NumPy's dynamic-shape functions on a mapped DataArray -------------------------------------
NUMPY_DYNAMIC = [
    pytest.param(np.nonzero, "numpy.nonzero", id="nonzero"),
    pytest.param(np.unique, "numpy.unique", id="unique"),
    pytest.param(np.argwhere, "numpy.argwhere", id="argwhere"),
    pytest.param(np.flatnonzero, "numpy.flatnonzero", id="flatnonzero"),
    pytest.param(lambda x: np.extract(x > 0, x), "numpy.extract", id="extract"),
    pytest.param(lambda x: np.compress(x > 0, x), "numpy.compress", id="compress"),
]


@pytest.mark.parametrize("func, culprit", NUMPY_DYNAMIC)
def test_numpy_dynamic_shape_on_a_dataarray_is_named(func, culprit):
    # the reference page's own example: NumPy converts the DataArray with np.asarray
    with pytest.raises(lf.DynamicShapeError) as excinfo:
        lf.vmap(func, dim="sample")(batch())
    assert_policy(excinfo, lf.DynamicShapeError, culprit, "under vmap", "np.where")


@pytest.mark.parametrize("func, culprit", NUMPY_DYNAMIC)
def test_numpy_dynamic_shape_through_the_accessor(func, culprit):
    with pytest.raises(lf.DynamicShapeError) as excinfo:
        batch().func.vmap(func, dim="sample")
    assert_policy(excinfo, lf.DynamicShapeError, culprit)


@pytest.mark.parametrize(
    "func, culprit",
    [
        pytest.param(lambda x: np.nonzero(x.data), "numpy.nonzero", id="nonzero"),
        pytest.param(lambda x: np.where(x.data), "numpy.where", id="where-one-argument"),
        pytest.param(lambda x: np.unique(x.data), "numpy.unique", id="unique"),
        pytest.param(lambda x: np.unique_counts(x.data), "numpy.unique_counts", id="unique_counts"),
        pytest.param(lambda x: np.unique_all(x.data), "numpy.unique_all", id="unique_all"),
        pytest.param(lambda x: np.argwhere(x.data), "numpy.argwhere", id="argwhere"),
        pytest.param(lambda x: np.flatnonzero(x.data), "numpy.flatnonzero", id="flatnonzero"),
        pytest.param(lambda x: np.extract(x.data > 0, x.data), "numpy.extract", id="extract"),
        pytest.param(lambda x: np.compress(x.data > 0, x.data), "numpy.compress", id="compress-mapped-condition"),
        pytest.param(lambda x: np.compress(x.data > 0, np.arange(3.0)), "numpy.compress", id="compress-constant-array"),
        pytest.param(lambda x: np.trim_zeros(x.data), "numpy.trim_zeros", id="trim_zeros"),
        pytest.param(lambda x: x.data[x.data > 0], "boolean-mask indexing", id="mask"),
    ],
)
def test_numpy_dynamic_shape_on_data_is_named(func, culprit):
    with pytest.raises(lf.DynamicShapeError) as excinfo:
        lf.vmap(func, dim="sample")(batch())
    assert_policy(excinfo, lf.DynamicShapeError, culprit, HERE)


def test_dynamic_shape_still_raises_when_grad_is_inside_or_outside_vmap():
    def f(x):
        return (x.data[x.data > 0] ** 2).sum() + np.unique(x.data).sum()

    with pytest.raises(lf.DynamicShapeError) as excinfo:
        lf.vmap(lf.grad(f), dim="sample")(batch())
    assert_policy(excinfo, lf.DynamicShapeError, "boolean-mask indexing")
    with pytest.raises(lf.DynamicShapeError) as excinfo:
        lf.grad(lambda x: lf.vmap(lambda v: np.unique(v.data).sum(), dim="sample")(x).sum())(batch())
    assert_policy(excinfo, lf.DynamicShapeError, "numpy.unique")


# --- 2. xarray methods whose output shape follows the values -----------------------------------------
@pytest.mark.parametrize(
    "func, culprits",
    [
        pytest.param(lambda x: x.where(x > 0).dropna("t"), ("DataArray.dropna", "x.where(mask)"), id="dropna"),
        pytest.param(lambda x: x.groupby(x > 0).sum(), ("DataArray.groupby", "x.where(labels == g)"), id="groupby"),
        pytest.param(lambda x: x.where(x > 0, drop=True), ("where(..., drop=True)", "without drop=True"),
                     id="where-drop"),
        pytest.param(lambda x: x.to_dataset(name="v").where(x > 0).dropna("t"), ("Dataset.dropna",),
                     id="dataset-dropna"),
    ],
)
def test_xarray_dynamic_shape_methods_are_named(func, culprits):
    with pytest.raises(lf.DynamicShapeError) as excinfo:
        lf.vmap(func, dim="sample")(batch())
    assert_policy(excinfo, lf.DynamicShapeError, *culprits, HERE)


def test_the_suggested_fixed_shape_alternatives_work():
    xs = batch()
    masked = lf.vmap(lambda x: x.where(x > 0).sum("t"), dim="sample")(xs)
    np.testing.assert_allclose(masked.values, loop(lambda x: x.where(x > 0).sum("t"), xs))
    per_group = lf.vmap(lambda x: x.where(x > 0, 0.0).sum("t"), dim="sample")(xs)
    np.testing.assert_allclose(per_group.values,
                               [x.groupby(x > 0).sum().sel(group=True) for x in (xs.isel(sample=i) for i in range(3))])


@pytest.mark.parametrize(
    "func",
    [
        pytest.param(lambda x: (x.where(x > 0).dropna("t") ** 2).sum(), id="dropna"),
        pytest.param(lambda x: (x.where(x > 0, drop=True) ** 2).sum(), id="where-drop"),
        pytest.param(lambda x: (x.groupby(x > 0).sum() ** 2).sum(), id="groupby"),
        pytest.param(lambda x: (x[x > 0] ** 2).sum(), id="dataarray-mask"),
    ],
)
def test_xarray_dynamic_shape_methods_work_under_grad_alone(func):
    x = xr.DataArray([1.5, -2.0, 3.0, 0.5], dims="t")
    np.testing.assert_allclose(lf.grad(func)(x).values, fd_grad(func, x), rtol=1e-6, atol=1e-8)


# --- 3. no batch, no problem: AD alone and constant masks ---------------------------------------------
X1 = xr.DataArray([3.0, -1.0, 2.0, 5.0, -0.5], dims="t")
WEIGHTS = np.arange(1.0, 6.0)

AD_CASES = [
    pytest.param(lambda x: (x.data[x.data > 0] ** 2).sum(), id="traced-mask"),
    pytest.param(lambda x: (np.unique(x.data) * WEIGHTS).sum(), id="unique"),
    pytest.param(lambda x: (np.unique(x.data, return_index=True, return_inverse=True,
                                      return_counts=True)[0] * WEIGHTS).sum(), id="unique-returns"),
    pytest.param(lambda x: (np.unique_values(x.data) * WEIGHTS).sum(), id="unique_values"),
    pytest.param(lambda x: (np.unique_all(x.data).values * WEIGHTS).sum(), id="unique_all"),
    pytest.param(lambda x: (np.unique_counts(x.data).values * WEIGHTS).sum(), id="unique_counts"),
    pytest.param(lambda x: (x.data[np.nonzero(x.data > 0)] ** 3).sum(), id="nonzero"),
    pytest.param(lambda x: (x.data[np.where(x.data > 0)] ** 3).sum(), id="where-one-argument"),
    pytest.param(lambda x: (x.data[np.argwhere(x.data > 0)[:, 0]] ** 3).sum(), id="argwhere"),
    pytest.param(lambda x: (x.data[np.flatnonzero(x.data > 0)] ** 3).sum(), id="flatnonzero"),
    pytest.param(lambda x: (np.extract(x.data > 0, x.data) ** 2).sum(), id="extract"),
    pytest.param(lambda x: (np.compress(x.data > 0, x.data) ** 2).sum(), id="compress"),
    pytest.param(lambda x: (np.trim_zeros(np.maximum(x.data, 0.0)) ** 2).sum(), id="trim_zeros"),
    pytest.param(lambda x: (x.data[np.array([True, False, True, False, True])] ** 2).sum(), id="constant-mask"),
]


@pytest.mark.parametrize("func", AD_CASES)
def test_data_dependent_shapes_work_under_grad(func):
    np.testing.assert_allclose(lf.grad(func)(X1).values, fd_grad(func, X1), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("func", AD_CASES)
def test_data_dependent_shapes_work_under_jvp(func):
    tangent = xr.DataArray(np.linspace(-1.0, 1.0, 5), dims="t")
    value, derivative = lf.jvp(func, (X1,), (tangent,))
    np.testing.assert_allclose(np.asarray(value), np.asarray(func(X1)))
    expected = (float(func(X1 + 1e-6 * tangent)) - float(func(X1 - 1e-6 * tangent))) / 2e-6
    np.testing.assert_allclose(float(derivative), expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    "func",
    [
        pytest.param(lambda x: x.data[x.data > 0] ** 2, id="traced-mask"),
        pytest.param(lambda x: np.unique(x.data) ** 2, id="unique"),
        pytest.param(lambda x: np.extract(x.data > 0, x.data) ** 2, id="extract"),
    ],
)
def test_data_dependent_shapes_work_under_jacrev_and_jacfwd(func):
    expected = fd_jacobian(func, X1)
    np.testing.assert_allclose(np.asarray(lf.jacrev(func)(X1)), expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(np.asarray(lf.jacfwd(func)(X1)), expected, rtol=1e-6, atol=1e-8)


def test_unique_results_match_numpy_with_duplicates():
    x = xr.DataArray([2.0, 1.0, 2.0, np.nan, 1.0, np.nan, 3.0], dims="t")

    def f(x):
        values, index, inverse, counts = np.unique(x.data, return_index=True, return_inverse=True,
                                                   return_counts=True)
        return values, index, inverse, counts

    got, _ = lf.jvp(lambda x: f(x)[0], (x,), (xr.ones_like(x),))
    for value, expected in zip((got,) + f(x)[1:], np.unique(x.values, return_index=True,
                                                             return_inverse=True, return_counts=True)):
        np.testing.assert_array_equal(np.asarray(value), expected)
    for name in ("unique_all", "unique_counts", "unique_inverse"):
        traced, _ = lf.jvp(lambda x: getattr(np, name)(x.data)[0], (x,), (xr.ones_like(x),))
        np.testing.assert_array_equal(np.asarray(traced), np.unique(x.values, equal_nan=False))
    # the derivative of a repeated value flows through its first occurrence
    grad = lf.grad(lambda x: np.nansum(np.unique(x.data)))(x).values
    np.testing.assert_array_equal(grad, [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0])


def test_position_functions_under_grad_give_numpy_positions():
    seen = {}

    def f(x):
        seen["nonzero"] = np.nonzero(x.data > 0)
        seen["argwhere"] = np.argwhere(x.data > 0)
        seen["flatnonzero"] = np.flatnonzero(x.data)
        seen["trim"] = np.trim_zeros(x.data * np.array([0, 1, 1, 1, 0]))
        return x.sum()

    lf.grad(f)(X1)
    np.testing.assert_array_equal(seen["nonzero"][0], np.nonzero(X1.values > 0)[0])
    np.testing.assert_array_equal(seen["argwhere"], np.argwhere(X1.values > 0))
    np.testing.assert_array_equal(seen["flatnonzero"], np.flatnonzero(X1.values))
    np.testing.assert_allclose(np.asarray(seen["trim"]._value),
                               np.trim_zeros(X1.values * np.array([0, 1, 1, 1, 0])))


@pytest.mark.parametrize("trim", ["fb", "f", "b"])
@pytest.mark.parametrize("values", [[0.0, 0.0, 1.0, 0.0, 2.0, 0.0], [0.0, 0.0, 0.0], [1.0, 2.0]])
def test_trim_zeros_matches_numpy(values, trim):
    x = xr.DataArray(values, dims="t")
    got, _ = lf.jvp(lambda x: np.trim_zeros(x.data, trim), (x,), (xr.ones_like(x),))
    np.testing.assert_array_equal(np.asarray(got), np.trim_zeros(np.asarray(values), trim))


CONSTANT_MASK_CASES = [
    pytest.param(lambda x: x.data[np.array([True, False, True])], id="getitem"),
    pytest.param(lambda x: x.data[[True, False, True]] * 2, id="getitem-list"),
    pytest.param(lambda x: np.extract(np.array([1, 0, 1]), x.data), id="extract"),
    pytest.param(lambda x: np.compress([False, True, True], x.data), id="compress"),
    pytest.param(lambda x: x.data[np.array([False, True, True])][::-1], id="getitem-then-slice"),
]


@pytest.mark.parametrize("func", CONSTANT_MASK_CASES)
def test_constant_mask_works_under_vmap(func):
    xs = batch()
    got = lf.vmap(func, dim="sample")(xs)
    np.testing.assert_allclose(np.asarray(got), loop(func, xs))


def test_constant_2d_mask_with_other_indices_under_vmap():
    xs = xr.DataArray(np.arange(24.0).reshape(2, 3, 4), dims=("sample", "a", "b"))
    mask = np.array([[True, False, True, False], [False, False, True, True], [True, True, True, True]])

    def f(x):
        return x.data[mask] + x.data[np.array([True, False, True]), 1:3].sum()

    np.testing.assert_allclose(np.asarray(lf.vmap(f, dim="sample")(xs)), loop(f, xs))


def test_constant_mask_works_under_vmap_of_grad():
    xs = batch()

    def f(x):
        return (x.data[np.array([True, False, True])] ** 3).sum()

    got = lf.vmap(lf.grad(f), dim="sample")(xs)
    expected = [fd_grad(f, xs.isel(sample=i)) for i in range(3)]
    np.testing.assert_allclose(got.values, expected, rtol=1e-6, atol=1e-8)


# --- masked assignment ---------------------------------------------------------------------------------
def _assign(value_of):
    def f(x):
        y = x.copy()
        y.data[y.data > 0.5] = value_of(x)
        return y

    return f


@pytest.mark.parametrize(
    "value_of",
    [
        pytest.param(lambda x: 5.0, id="scalar"),
        pytest.param(lambda x: np.array([7.0]), id="length-one"),
        pytest.param(lambda x: x.data.max(), id="mapped-scalar"),
        pytest.param(lambda x: np.int64(2), id="integer"),
    ],
)
def test_masked_assignment_with_a_mapped_mask_is_a_select(value_of):
    xs = batch()
    func = _assign(value_of)
    got = lf.vmap(func, dim="sample")(xs)
    np.testing.assert_allclose(got.values, loop(func, xs))


def test_masked_assignment_of_a_row_over_leading_dims():
    xs = xr.DataArray(np.random.default_rng(1).normal(size=(3, 4, 2)), dims=("sample", "a", "b"))

    def f(x):
        y = x.data.copy()
        y[x.data[:, 0] > 0] = np.array([10.0, 20.0])
        return y

    np.testing.assert_allclose(np.asarray(lf.vmap(f, dim="sample")(xs)), loop(f, xs))


def test_masked_assignment_under_vmap_of_grad():
    xs = batch(((0.0, 1.0, 2.0), (0.0, 0.0, 3.0), (-1.0, 2.0, 0.75)))  # no value at the threshold

    def f(x):
        return (_assign(lambda v: v.data.max())(x) ** 2).sum()

    got = lf.vmap(lf.grad(f), dim="sample")(xs)
    expected = [lf.grad(f)(xs.isel(sample=i)).values for i in range(3)]
    np.testing.assert_allclose(got.values, expected)
    np.testing.assert_allclose(got.values, [fd_grad(f, xs.isel(sample=i)) for i in range(3)],
                               rtol=1e-6, atol=1e-8)


def test_constant_mask_assignment_takes_one_value_per_element():
    xs = batch()

    def f(x):
        y = x.data.copy()
        y[np.array([True, False, True])] = np.array([10.0, 20.0])
        return y

    np.testing.assert_allclose(np.asarray(lf.vmap(f, dim="sample")(xs)), loop(f, xs))
    g = lambda x: (_assign_constant(x) ** 2).sum()  # noqa: E731
    np.testing.assert_allclose(lf.grad(g)(X1).values, fd_grad(g, X1), rtol=1e-6, atol=1e-8)


def _assign_constant(x):
    y = x.copy()
    y.data[np.array([True, False, True, False, False])] = x.data[3:5] * 2
    return y


def test_masked_assignment_of_a_sequence_with_a_mapped_mask_raises():
    def f(x):
        y = x.data.copy()
        y[y > 0.5] = np.array([1.0, 2.0])
        return y

    with pytest.raises(lf.DynamicShapeError) as excinfo:
        lf.vmap(f, dim="sample")(batch())
    assert_policy(excinfo, lf.DynamicShapeError, "assignment x[mask] = value", "np.where(mask, values, x)",
                  line_of(f, 2))
    assert "reading" not in str(excinfo.value) and "indexing" not in str(excinfo.value)


def test_masked_assignment_on_a_dataarray_names_assignment_and_its_fix():
    def f(x):
        x = x.copy()
        x[x > 0.5] = 5.0
        return x

    with pytest.raises(lf.DynamicShapeError) as excinfo:
        lf.vmap(f, dim="sample")(batch())
    assert_policy(excinfo, lf.DynamicShapeError, "assignment x[mask] = value", "x.where(~mask, value)",
                  line_of(f, 2))
    assert "reading" not in str(excinfo.value)
    # the suggested fix, against the loop
    xs = batch()
    fixed = lf.vmap(lambda x: x.where(~(x > 0.5), 5.0), dim="sample")(xs)
    np.testing.assert_allclose(fixed.values, loop(f, xs))


# --- 4. conversions deep inside xarray / SciPy / pandas name the user's call ---------------------------
def interp_model(x):
    return x.interp(t=[0.5, 1.5], method="quadratic")


TRANSFORMS = {
    "vmap": lambda f: lf.vmap(f, dim="sample")(series()),
    "grad": lambda f: lf.grad(lambda x: f(x).sum())(series().isel(sample=0)),
    "jvp": lambda f: lf.jvp(f, (series().isel(sample=0),), (xr.ones_like(series().isel(sample=0)),)),
    "jacrev": lambda f: lf.jacrev(f)(series().isel(sample=0)),
}


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
def test_interp_refusal_names_interp_the_method_and_the_line(transform):
    """Linear and nearest interp work under the transforms (tests/test_xarray_interp.py);
    SciPy's other methods are refused, naming the method and the user's line."""
    with pytest.raises(lf.UnsupportedOperationError) as excinfo:
        TRANSFORMS[transform](interp_model)
    assert_policy(excinfo, lf.UnsupportedOperationError, "xarray's interp", "method='quadratic'", "method='linear'",
                  f"{line_of(interp_model)}")


def test_interp_at_a_mapped_coordinate_is_the_loop():
    def model(x, q):
        return x.interp(t=q)

    xs, q = series(), xr.DataArray([0.5, 1.2, 3.0], dims="sample")
    got = lf.vmap(model, dim="sample")(xs, q)
    expected = [float(xs.isel(sample=i).interp(t=float(q[i]))) for i in range(3)]
    np.testing.assert_allclose(got.values, expected, rtol=1e-14)


def test_hat_function_interpolation_at_mapped_points_matches_interp():
    rng = np.random.default_rng(3)
    xs = xr.DataArray(rng.normal(size=(3, 4)), dims=("sample", "t"), coords={"t": [0.0, 1.0, 2.0, 3.0]})
    q = xr.DataArray([0.25, 1.5, 2.9], dims="sample")

    def hat(x, q):
        return (x * np.maximum(1 - abs(q - x.t) / 1.0, 0)).sum("t")

    got = lf.vmap(hat, dim="sample")(xs, q)
    expected = [float(xs.isel(sample=i).interp(t=float(q[i]))) for i in range(3)]
    np.testing.assert_allclose(got.values, expected)


# (id, func, culprits, the transforms it fails under): numpy.vectorize runs once per example
# under vmap (tests/test_functional.py), so interpolate_na and apply_ufunc(vectorize=True) fail
# under grad only, where the function they vectorize gets traced values and converts them
CONVERSIONS_INSIDE_LIBRARIES = [
    ("interpolate_na", lambda x: x.where(x > 0).interpolate_na("t", method="nearest"),
     ("DataArray.interpolate_na", "scipy.interpolate", "numpy.vectorize", "method='linear'", "fillna"), ("grad",)),
    # sortby of values: works under grad, refused along an indexed dim under vmap/jit
    # (tests/test_xarray_methods.py)
    # the vectorized function is the user's: the error points at its own np.asarray
    ("apply_ufunc-vectorize",
     lambda x: xr.apply_ufunc(lambda v: np.asarray(v).sum(), x, input_core_dims=[["t"]], vectorize=True),
     ("at ", "np.asarray"), ("grad",)),
    # a NumPy function outside the __array_function__ protocol (labeled_func.xarray_numpy hands the
    # others the DataArray's data) converts the DataArray
    ("numpy-on-dataarray", lambda x: np.asarray_chkfinite(x), ("numpy.asarray_chkfinite", "x.data"), ("vmap", "grad")),
]


@pytest.mark.parametrize(
    "func, culprits, transform",
    [pytest.param(func, culprits, transform, id=f"{transform}-{name}")
     for name, func, culprits, transforms in CONVERSIONS_INSIDE_LIBRARIES for transform in transforms],
)
def test_conversions_inside_libraries_name_the_call(func, culprits, transform):
    with pytest.raises(lf.ConversionError) as excinfo:
        TRANSFORMS[transform](func)
    assert_policy(excinfo, lf.ConversionError, *culprits, HERE)


def test_sel_at_a_mapped_label_names_sel_and_pandas():
    def model(x, label):
        return x.sel(t=label)

    with pytest.raises(lf.ConversionError) as excinfo:
        lf.vmap(model, dim="sample")(series(), xr.DataArray([0.0, 1.0, 4.0], dims="sample"))
    assert_policy(excinfo, lf.ConversionError, "inside xarray's DataArray.sel", "pandas",
                  f"called from {line_of(model)}", "x.where(x[dim] == label, 0)")
    # the suggested mask-select, against the loop
    labels = xr.DataArray([0.0, 1.0, 4.0], dims="sample")
    got = lf.vmap(lambda x, q: x.where(x.t == q, 0.0).sum("t"), dim="sample")(series(), labels)
    np.testing.assert_allclose(got.values, [series().isel(sample=i).sel(t=float(labels[i])) for i in range(3)])


def test_conversions_the_user_wrote_say_where():
    def model(x):
        return np.asarray(x) + 1

    with pytest.raises(lf.ConversionError) as excinfo:
        lf.vmap(model, dim="sample")(batch())
    assert_policy(excinfo, lf.ConversionError, f"at {line_of(model)}", "np.asarray")

    def branch(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(lf.DataDependentControlFlowError) as excinfo:
        lf.vmap(branch, dim="sample")(batch())
    assert_policy(excinfo, lf.DataDependentControlFlowError, f"at {line_of(branch)}", "lf.cond")
    assert "You wrote no `if`" not in str(excinfo.value)


def test_interp_recipe_of_the_docs_works_under_transforms():
    def interp_linear(x, dim, new):
        old = x[dim].values
        new = np.asarray(new, dtype=float)
        hi = np.clip(np.searchsorted(old, new), 1, old.size - 1)
        lo = hi - 1
        weight = xr.DataArray((new - old[lo]) / (old[hi] - old[lo]), dims=dim)
        below = x.isel({dim: lo}).drop_vars(dim)
        above = x.isel({dim: hi}).drop_vars(dim)
        return (below * (1 - weight) + above * weight).assign_coords({dim: new})

    new = [0.5, 1.5, 3.9]
    xs = series()
    got = lf.vmap(lambda x: interp_linear(x, "t", new), dim="sample")(xs)
    xr.testing.assert_allclose(got.transpose(*xs.dims), xs.interp(t=new))
    x = xs.isel(sample=0)
    f = lambda v: v.interp(t=new).sum()  # noqa: E731  (the oracle: xarray's own interp)
    grad = lf.grad(lambda v: interp_linear(v, "t", new).sum())(x)
    np.testing.assert_allclose(grad.values, fd_grad(f, x), rtol=1e-6, atol=1e-8)


# --- the stack walk itself -------------------------------------------------------------------------
def test_call_site_from_user_code_names_no_library():
    site = diagnose.call_site()
    assert site.library is None and site.user_wrote_it
    assert site.location == line_of(test_call_site_from_user_code_names_no_library)


def test_call_site_skips_decorator_wrappers_and_names_the_method():
    seen = {}

    def spy(x):
        seen["site"] = diagnose.call_site()
        return x

    da = xr.DataArray([1.0, 2.0], dims="t")
    da.pipe(spy)  # the user function is the innermost user frame: no library in between
    assert seen["site"].library is None
    assert seen["site"].location == line_of(spy)


def test_policy_errors_stay_runtime_errors():
    for cls in (lf.DynamicShapeError, lf.ConversionError, lf.DataDependentControlFlowError):
        assert issubclass(cls, RuntimeError) and not issubclass(cls, (TypeError, ValueError))


def test_item_errors_say_where():
    def model(x):
        return x / float(x.max())

    with pytest.raises(lf.ItemError) as excinfo:
        lf.vmap(model, dim="sample")(batch())
    assert_policy(excinfo, lf.ItemError, f"at {line_of(model)}", "float()")


def test_mapped_label_lookup_via_idxmax_gathers_the_labels():
    # labeled_func.xarray_methods gathers the labels by position (tests/test_xarray_methods.py)
    xs = series()
    got = lf.vmap(lambda v: v.idxmax("t"), dim="sample")(xs)
    xr.testing.assert_identical(got, xr.concat([xs.isel(sample=i).idxmax("t") for i in range(xs.sizes["sample"])],
                                               "sample"))


def test_loc_with_a_mapped_mask_or_label():
    xs = series()

    def assign(x):
        x = x.copy()
        x.loc[x > 0.5] = 5.0
        return x

    with pytest.raises(lf.DynamicShapeError) as excinfo:
        lf.vmap(assign, dim="sample")(xs)
    assert_policy(excinfo, lf.DynamicShapeError, "assignment x[mask] = value", "x.where(~mask, value)",
                  line_of(assign, 2))
    with pytest.raises(lf.DynamicShapeError) as excinfo:
        lf.vmap(lambda x: x.loc[x > 0.5], dim="sample")(xs)
    assert_policy(excinfo, lf.DynamicShapeError, "boolean-mask indexing", "x.where(mask)")

    def lookup(x, q):
        return x.loc[q]

    with pytest.raises(lf.ConversionError) as excinfo:
        lf.vmap(lookup, dim="sample")(xs, xr.DataArray([0.0, 1.0, 4.0], dims="sample"))
    assert_policy(excinfo, lf.ConversionError, "x.loc[...] on a DataArray", "Label lookup", line_of(lookup))
