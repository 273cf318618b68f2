"""NumPy's shape, joining, selection and cumulative functions added after the first table,
where the op table does not reach: their errors (each naming the culprit), the shape policy
of traced positions (insert, delete), np.put's in-place writes (through views, to the
caller's input, the in-place policy), their use from xarray, the errors of the array functions
of issue #12 (linspace, partition, select, pad, ...) and new shapes from a mapped template
(zeros_like, full_like with shape=). Every expectation comes
from NumPy on plain arrays, a per-example loop or central differences.
"""
import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

RNG = np.random.default_rng(31)
X = RNG.normal(size=(3, 6))


def vmap(function, *arrays):
    return lf.vmap(function, in_dims=(0,) * len(arrays))(*arrays)


def loop(function, *arrays):
    return np.stack([function(*parts) for parts in zip(*arrays)])


def central_gradient(f, x, eps=1e-6):
    """The gradient of the scalar ``f`` at ``x`` by central differences, one element at a time."""
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[index] = eps
        grad[index] = (f(x + step) - f(x - step)) / (2 * eps)
    return grad


# --- insert and delete: positions that are traced -------------------------------------------------
@pytest.mark.parametrize("name, function", [
    ("numpy.delete", lambda x, i: np.delete(x, i)),
    ("numpy.insert", lambda x, i: np.insert(x, i, 0.5)),
])
def test_mapped_positions_are_a_dynamic_shape_error_naming_the_function(name, function):
    positions = np.array([[0, 2], [1, 3], [4, 5]])
    with pytest.raises(lf.DynamicShapeError, match=name):
        vmap(function, X, positions)
    # the same positions for every example are fine
    out = lf.vmap(function, in_dims=(0, None))(X, positions[0])
    np.testing.assert_array_equal(out, loop(lambda x: function(x, positions[0]), X))


def test_positions_computed_from_mapped_values_are_refused_under_vmap_and_jit():
    with pytest.raises(lf.DynamicShapeError, match="numpy.delete"):
        vmap(lambda x: np.delete(x, np.argsort(x)[:2]), X)
    with pytest.raises(lf.DynamicShapeError, match="numpy.delete.*lf.jit"):
        lf.jit(lambda x: np.delete(x, np.argsort(x)[:2]))(X[0])


def test_positions_given_as_an_integer_argument_of_lf_jit_are_structure_compared_at_each_call():
    jitted = lf.jit(lambda x, i: np.delete(x, i))
    for positions in ([1, 2], [1, 2], [0, 3], [1, 2]):
        np.testing.assert_array_equal(jitted(X[0], np.array(positions)), np.delete(X[0], positions))
    assert jitted.traces == 2  # [1, 2] traced once and replayed; [0, 3] its own program
    assert "the values of argument 'i'" in jitted.explain()


def test_positions_computed_from_values_under_grad_are_fixed_by_the_primal():
    def f(x):  # drops the two smallest entries
        return float(np.sum(np.delete(x, np.argsort(x)[:2]) ** 2 * np.arange(1.0, 5.0)))

    traced = lf.grad(lambda x: np.sum(np.delete(x, np.argsort(x)[:2]) ** 2 * np.arange(1.0, 5.0)))
    np.testing.assert_allclose(traced(X[0]), central_gradient(f, X[0]), rtol=1e-6, atol=1e-8)


def test_insert_casts_values_to_the_array_dtype_as_numpy():
    ints = np.arange(24).reshape(3, 2, 4)
    out = lf.vmap(lambda a, v: np.insert(a, [1, 3], v, axis=1), in_dims=(0, 0))(ints, X[:, :2] * 3)
    expected = loop(lambda a, v: np.insert(a, [1, 3], v, axis=1), ints, X[:, :2] * 3)
    assert out.dtype == expected.dtype == ints.dtype
    np.testing.assert_array_equal(out, expected)


# --- np.pad's modes and options -------------------------------------------------------------------
def test_pad_with_a_function_as_mode_is_unsupported_naming_it():
    def mode(vector, width, axis, kwargs):
        vector[:width[0]] = 0

    with pytest.raises(lf.UnsupportedOperationError, match=r"numpy\.pad with mode="):
        vmap(lambda x: np.pad(x, 1, mode=mode), X)


@pytest.mark.parametrize("mode, kwargs", [("edge", {"stat_length": 2}), ("linear_ramp", {"reflect_type": "odd"}),
                                          ("mean", {"end_values": 1})])
def test_pad_options_of_another_mode_raise_as_numpy(mode, kwargs):
    with pytest.raises(ValueError, match="unsupported keyword arguments") as ours:
        vmap(lambda x: np.pad(x, 1, mode=mode, **kwargs), X)
    with pytest.raises(ValueError) as numpys:
        np.pad(X[0], 1, mode=mode, **kwargs)
    assert str(ours.value).split(" (at ")[0] == str(numpys.value)


def test_pad_statistics_of_nothing_raise_as_numpy():
    with pytest.raises(ValueError, match="stat_length of 0"):
        vmap(lambda x: np.pad(x, 1, mode="maximum", stat_length=0), X)
    with pytest.raises(ValueError, match="stat_length of 0"):
        np.pad(X[0], 1, mode="maximum", stat_length=0)


def test_pad_empty_keeps_the_array_and_writes_zeros_around_it():
    """NumPy leaves the padding of mode "empty" undefined: the array is in the middle,
    and here the padding is zeros (documented)."""
    out = vmap(lambda x: np.pad(x, (2, 1), mode="empty"), X)
    assert out.shape == (3, 9)
    np.testing.assert_array_equal(out[:, 2:-1], X)
    np.testing.assert_array_equal(out[:, :2], 0)
    np.testing.assert_array_equal(out[:, -1:], 0)


def test_odd_reflection_wider_than_the_array_under_grad_matches_differences():
    weights = RNG.normal(size=(3 + 9 + 7, 2 + 1 + 4))

    def f(x):
        return np.sum(np.pad(x, ((9, 7), (1, 4)), mode="symmetric", reflect_type="odd") * weights)

    np.testing.assert_allclose(lf.grad(f)(X[:, :2]), central_gradient(lambda x: float(f(x)), X[:, :2]),
                               rtol=1e-6, atol=1e-8)


# --- np.put: in place into its first argument ------------------------------------------------------
def test_put_writes_through_to_the_mapped_input_as_the_loop_does():
    values = RNG.normal(size=(3, 2))
    ours, theirs = X.copy(), X.copy()

    def f(x, v):
        assert np.put(x, [0, -1], v) is None
        return x * 2

    out = vmap(f, ours, values)
    expected = loop(f, theirs, values)  # each row of theirs is written in place
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(ours, theirs)


def put_through_view(x, v):
    y = x * 1
    tail = y[1:]
    np.put(tail, [0, 3], v, mode="wrap")  # a view: the base sees the write
    return y * tail.sum()


def test_put_into_a_view_writes_into_its_base():
    values = RNG.normal(size=(3, 2))
    np.testing.assert_allclose(vmap(put_through_view, X, values), loop(put_through_view, X, values), rtol=1e-14)
    for k in range(2):
        def total(x):
            return float(np.sum(put_through_view(x, values[0]) ** 2))

        gradient = lf.grad(lambda x: np.sum(put_through_view(x, values[0]) ** 2))(X[k])
        np.testing.assert_allclose(gradient, central_gradient(total, X[k]), rtol=1e-6, atol=1e-7)
    # the values too (the array must be traced as well: the in-place policy)
    _, gradient_v = lf.grad(lambda x, v: np.sum(put_through_view(x, v) ** 2), argnums=(0, 1))(X[0], values[0])
    np.testing.assert_allclose(gradient_v, central_gradient(lambda v: float(np.sum(put_through_view(X[0], v) ** 2)),
                                                            values[0]), rtol=1e-6, atol=1e-7)


def test_put_of_a_mapped_value_into_an_unmapped_array_is_the_inplace_policy():
    def f(v):
        buffer = np.zeros(4)
        np.put(buffer, [1, 2], v)
        return buffer

    with pytest.raises(lf.InplaceError, match=r"numpy\.put"):
        vmap(f, X[:, :2])
    with pytest.raises(lf.InplaceError, match=r"numpy\.put"):
        lf.grad(lambda v: f(v).sum())(X[0, :2])


def test_put_out_of_range_raises_as_numpy():
    with pytest.raises(IndexError):
        np.put(X[0].copy(), [6], 1.0)
    with pytest.raises(IndexError, match="out of range"):
        vmap(lambda x: np.put(x, [6], 1.0), X.copy())


# --- choose, lexsort, cumulative sums: errors as NumPy's -------------------------------------------
def test_choose_with_an_entry_out_of_range_raises_as_numpy():
    a = np.array([[0, 1, 2], [1, 0, 0]])
    with pytest.raises(ValueError, match="invalid entry in choice array"):
        np.choose(a[0], [X[0, :3], X[1, :3]])
    with pytest.raises(ValueError, match="invalid entry in choice array"):
        lf.vmap(lambda a, c: np.choose(a, [c, -c]), in_dims=(0, None))(a, X[0, :3])


def test_choose_gradient_goes_to_the_chosen_entries():
    a = np.array([2, 0, 1, 1, 0, 2])
    weights = RNG.normal(size=6)

    def f(c):
        return np.sum(np.choose(a, c) * weights)

    gradient = lf.grad(f)(X)
    np.testing.assert_allclose(gradient, central_gradient(lambda c: float(f(c)), X), atol=1e-8)


def test_lexsort_keys_in_a_list_are_not_seen_by_numpy_dispatch_but_a_tuple_is():
    keys = RNG.integers(0, 2, size=(3, 2, 6)).astype(float)
    expected = loop(lambda a, b: np.lexsort((a, b)), keys[:, 0], keys[:, 1])
    np.testing.assert_array_equal(vmap(lambda a, b: np.lexsort((a, b)), keys[:, 0], keys[:, 1]), expected)
    np.testing.assert_array_equal(vmap(np.lexsort, keys), expected)  # one array of keys
    with pytest.raises(lf.ConversionError):  # NumPy dispatches on a tuple's members only
        vmap(lambda a, b: np.lexsort([a, b]), keys[:, 0], keys[:, 1])


def test_cumulative_sum_of_more_than_one_dimension_needs_an_axis_as_numpy():
    with pytest.raises(ValueError, match="axis"):
        np.cumulative_sum(X)
    with pytest.raises(ValueError, match="axis"):
        vmap(np.cumulative_sum, np.stack([X, X]))  # each example is 2-D


@pytest.mark.parametrize("arrays, error", [
    ((1.0, 2.0), TypeError),  # a tuple: only lists arrange blocks
    ([], ValueError),
    ([[1.0], 2.0], ValueError),  # depths differ
])
def test_block_bad_nestings_raise_as_numpy(arrays, error):
    with pytest.raises(error):
        np.block(arrays)

    def f(x):
        return np.block(_replace_numbers(arrays, x))

    with pytest.raises(error):
        vmap(f, X[:, 0])


def _replace_numbers(nesting, x):
    if isinstance(nesting, list):
        return [_replace_numbers(item, x) for item in nesting]
    if isinstance(nesting, tuple):
        return tuple(_replace_numbers(item, x) for item in nesting)
    return x * nesting


def test_isin_against_mapped_test_elements():
    elements = RNG.integers(0, 5, size=(3, 4))
    tests = RNG.integers(0, 5, size=(3, 2))
    out = vmap(np.isin, elements, tests)
    assert out.dtype == bool
    np.testing.assert_array_equal(out, loop(np.isin, elements, tests))


# --- from xarray ------------------------------------------------------------------------------------
DA = xr.DataArray(X, dims=("sample", "t"))


def ediff1d_over_t(da, **kwargs):
    return xr.apply_ufunc(np.ediff1d, da, input_core_dims=[["t"]], output_core_dims=[["step"]],
                          exclude_dims={"t"}, kwargs=kwargs)


def test_ediff1d_through_apply_ufunc_under_vmap_and_grad():
    out = lf.vmap(lambda d: ediff1d_over_t(d, to_begin=0.5), dim="sample")(DA)
    np.testing.assert_allclose(out.transpose("sample", "step").data,
                               loop(lambda x: np.ediff1d(x, to_begin=0.5), X), rtol=1e-15)
    weights = RNG.normal(size=6)

    def loss(d):
        return (ediff1d_over_t(d, to_end=d.data[:1]) ** 2 * weights).sum()

    gradient = lf.grad(loss)(DA.isel(sample=0))
    expected = central_gradient(lambda x: float(np.sum(np.ediff1d(x, to_end=x[:1]) ** 2 * weights)), X[0])
    np.testing.assert_allclose(gradient.data, expected, rtol=1e-6, atol=1e-8)


def test_meshgrid_of_dataarray_data_under_vmap_and_grad():
    def surface(a):
        xx, yy = np.meshgrid(a.data[:4], a.data[2:], indexing="ij")
        return xr.DataArray(np.sin(xx) * yy ** 2, dims=("i", "j"))

    out = lf.vmap(surface, dim="sample")(DA)
    np.testing.assert_allclose(out.transpose("sample", "i", "j").data,
                               loop(lambda x: surface(xr.DataArray(x, dims="t")).data, X), rtol=1e-15)

    def total(x):
        return float(surface(xr.DataArray(x, dims="t")).sum())

    gradient = lf.grad(lambda a: surface(a).sum())(DA.isel(sample=1))
    np.testing.assert_allclose(gradient.data, central_gradient(total, X[1]), rtol=1e-6, atol=1e-8)


def test_cumulative_sum_with_include_initial_of_dataarray_data_under_vmap():
    out = lf.vmap(lambda d: xr.DataArray(np.cumulative_sum(d.data, include_initial=True), dims="edge"),
                  dim="sample")(DA)
    np.testing.assert_allclose(out.transpose("sample", "edge").data,
                               loop(lambda x: np.cumulative_sum(x, include_initial=True), X), rtol=1e-14)


# --- bad inputs of the new array functions name the function ------------------------------------------
@pytest.mark.parametrize("function, error, message", [
    (lambda x: np.einsum(x, [0, 60]), ValueError, "numpy.einsum: subscript 60"),
    (lambda x: np.geomspace(x[0], 0.0, 3), ValueError, "numpy.geomspace: geometric sequence cannot include zero"),
    (lambda x: np.linspace(x[0], x[1], -1), ValueError, "numpy.linspace: number of samples"),
    (lambda x: np.partition(x, 6), ValueError, r"numpy.partition: kth\(=6\) out of bounds"),
    (lambda x: np.partition(x, x[0]), lf.UnsupportedOperationError, "numpy.partition: kth must not be traced"),
    (lambda x: np.rot90(x, axes=(0, 0)), ValueError, "numpy.rot90: axes must be different"),
    (lambda x: np.flipud(x[0, 0]), ValueError, "numpy.flipud"),
    (lambda x: np.fliplr(x[0]), ValueError, "numpy.fliplr"),
    (lambda x: np.vsplit(x[0], 2), ValueError, "numpy.vsplit only works on arrays of 2"),
    (lambda x: np.matrix_transpose(x[0]), ValueError, "numpy.matrix_transpose"),
    (lambda x: np.select([x > 0], [x, x]), ValueError, "numpy.select: list of cases"),
    (lambda x: np.select([x], [x]), TypeError, "numpy.select: invalid entry 0"),
    (lambda x: np.piecewise(x, [x > 0], [np.sin, np.cos, np.tan]), ValueError, "numpy.piecewise: with 1 condition"),
    (lambda x: np.gradient(x, 1.0, 2.0, 3.0), TypeError, "numpy.gradient: invalid number of arguments"),
    (lambda x: np.pad(x, -1), ValueError, "numpy.pad: index can't contain negative values"),
    (lambda x: np.pad(x, 1.5), TypeError, "numpy.pad: `pad_width` must be of integral type"),
])
def test_bad_inputs_raise_naming_the_function(function, error, message):
    batch = np.stack([X[:2, :3], X[1:, 3:]])  # two examples of shape (2, 3)
    with pytest.raises(error, match=message):
        vmap(function, batch)


# --- new shapes from a mapped template ------------------------------------------------------------------
def test_zeros_like_with_a_shape_is_mapped_and_writable():
    def outer_buffer(v):
        buffer = np.zeros_like(v, shape=(v.shape[0], v.shape[0]))
        buffer[...] = v[:, None] * v
        return buffer

    out = vmap(outer_buffer, X)
    np.testing.assert_allclose(out, X[:, :, None] * X[:, None, :])
    gradient = lf.grad(lambda v: outer_buffer(v).sum())(X[0])
    np.testing.assert_allclose(gradient, 2 * X[0].sum() * np.ones(6))


def test_full_like_with_a_shape_on_a_dataarray_s_data():
    data = xr.DataArray(X, dims=("sample", "t"))
    out = lf.vmap(lambda x: np.full_like(x.data, 2.5, shape=(2,)) * x.data[0], dim="sample")(data)
    np.testing.assert_allclose(out, 2.5 * X[:, :1] * np.ones((3, 2)))


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.complex128, np.bool_])
def test_the_pad_primitive_is_numpys_constant_pad_with_a_later_axis_in_the_corners(dtype):
    """The pad primitive's impl (one copy into the padded array on NumPy) against NumPy's own
    constant pad of each axis in turn, the later axis's constants in the corners."""
    import itertools

    from labeled_func_kernels import indexing

    x = (RNG.normal(size=(2, 3, 4)) * 3).astype(dtype)
    constants = ((True, False),) * 3 if dtype is np.bool_ else ((1, -2), (3, -4), (5, -6))
    for widths in itertools.product([(0, 0), (1, 0), (0, 2), (2, 1)], repeat=3):
        expected = x
        for axis, (width, values) in enumerate(zip(widths, constants)):
            spec = [(0, 0)] * 3
            spec[axis] = width
            fill = [(0, 0)] * axis + [values] + [(0, 0)] * (2 - axis)
            expected = np.pad(expected, spec, mode="constant", constant_values=fill)
        got = indexing.pad.impl(x, pad_width=widths, constant_values=constants)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert got.tobytes() == expected.tobytes(), widths
