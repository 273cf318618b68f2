"""The torch.func "UX Limitations" page, example by example, in labeled form.

Each test restates one example of the reference page with DataArrays whose
dims are named ("sample" is the mapped dim, "x" an ordinary one). The oracle is
always the per-example Python loop or plain NumPy, never the library itself.
"""

import re

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

POLICY_ERRORS = [
    "InplaceError",
    "OutArgumentError",
    "DataDependentControlFlowError",
    "ItemError",
    "DynamicShapeError",
    "RandomnessError",
    "ConversionError",
    "EscapedTracerError",
    "UnsupportedOperationError",
]


def batch(n_sample=4, n_x=3, seed=0):
    """A DataArray with a mapped dim "sample" and an ordinary dim "x", both labeled."""
    rng = np.random.default_rng(seed)
    return xr.DataArray(
        rng.normal(size=(n_sample, n_x)),
        dims=("sample", "x"),
        coords={"sample": np.arange(n_sample) * 10, "x": np.linspace(0.0, 1.0, n_x)},
        name="temperature",
    )


def scalars(values):
    """One scalar per example: inside vmap each example is a 0-d DataArray."""
    values = np.asarray(values, dtype=float)
    return xr.DataArray(values, dims="sample", coords={"sample": np.arange(values.size)})


def loop(func, *args, dim="sample"):
    """The for-loop that vmap stands for: func on each example, concatenated along dim."""
    size = next(a.sizes[dim] for a in args if isinstance(a, xr.DataArray) and dim in a.dims)
    examples = []
    for i in range(size):
        example_args = [
            a.isel({dim: i}) if isinstance(a, xr.DataArray) and dim in a.dims else a for a in args
        ]
        examples.append(func(*example_args))
    return xr.concat(examples, dim=dim)


def assert_matches_loop(result, expected):
    xr.testing.assert_allclose(result.transpose(*expected.dims), expected)


def test_every_policy_error_is_a_transform_error_and_a_runtime_error():
    assert issubclass(lf.TransformError, RuntimeError)
    for name in POLICY_ERRORS:
        cls = getattr(lf, name)
        assert issubclass(cls, lf.TransformError), name
        assert issubclass(cls, RuntimeError), name
        # xarray swallows these three in many places, so a policy error is never one.
        assert not issubclass(cls, (TypeError, ValueError, AttributeError)), name


# --- General limitations: global assignment of an intermediate -------------------

intermediate = None


def f_assigns_global(x):
    global intermediate
    intermediate = np.sin(x)
    return np.sin(intermediate)


@pytest.mark.parametrize(
    "use_after_return",
    [
        pytest.param(lambda value: value + 1, id="arithmetic"),
        pytest.param(lambda value: np.sin(value.data), id="numpy-on-data"),
        pytest.param(lambda value: value.sum("x"), id="reduction"),
    ],
)
def test_global_intermediate_used_after_vmap_raises_escaped_tracer(use_after_return):
    global intermediate
    intermediate = None
    x = batch()
    result = lf.vmap(f_assigns_global, dim="sample")(x)
    assert_matches_loop(result, np.sin(np.sin(x)))  # the returned value itself is fine
    assert intermediate is not None
    with pytest.raises(lf.EscapedTracerError, match="has_aux"):
        use_after_return(intermediate)
    intermediate = None


def test_returning_the_intermediate_instead_works():
    def f(x):
        inter = np.sin(x)
        z = np.sin(inter)
        return z, inter

    x = batch()
    z, inter = lf.vmap(f, dim="sample")(x)
    expected_z, expected_inter = np.sin(np.sin(x)), np.sin(x)
    assert_matches_loop(z, expected_z)
    assert_matches_loop(inter, expected_inter)
    # The returned intermediate is an ordinary DataArray: usable afterwards.
    np.testing.assert_allclose((inter + 1).transpose(*x.dims).values, np.sin(x.values) + 1)


@pytest.mark.skipif(not hasattr(lf, "grad"), reason="lf.grad not implemented yet")
def test_returning_the_intermediate_with_grad_has_aux():
    def f(x):
        inter = np.sin(x)
        z = np.sin(inter)
        return z, inter

    x = xr.DataArray(0.7)
    grad_x, inter = lf.grad(f, has_aux=True)(x)
    np.testing.assert_allclose(float(grad_x), np.cos(np.sin(0.7)) * np.cos(0.7))
    np.testing.assert_allclose(float(inter), np.sin(0.7))


# --- Mutation: arbitrary mutation of Python data structures ----------------------


def test_python_side_effects_happen_once(capsys):
    def f(x, lst):
        lst.pop()
        print("hello!")
        return x.sum("x")

    x = batch(n_sample=3, n_x=1)
    lst = [0, 1, 2, 3]
    result = lf.vmap(f, in_dims=("sample", None))(x, lst)
    assert capsys.readouterr().out.count("hello!") == 1
    assert lst == [0, 1, 2]
    assert_matches_loop(result, x.sum("x"))


def test_python_side_effects_on_a_captured_list_happen_once(capsys):
    calls = []

    def f(x):
        calls.append("called")
        print("hello!")
        return 2 * x

    x = batch(n_sample=5)
    result = lf.vmap(f, dim="sample")(x)
    assert calls == ["called"]
    assert capsys.readouterr().out.count("hello!") == 1
    assert_matches_loop(result, 2 * x)


# --- Mutation: in-place operations ----------------------------------------------


def iadd(x, y):
    x += y
    return x


def setitem_ellipsis(x, y):
    x[...] = y
    return x


def ufunc_out_is_input(x, y):
    np.add(x.data, y.data, out=x.data)
    return x


@pytest.mark.parametrize(
    "func, operation",
    [
        pytest.param(iadd, r"\+=|iadd|\badd\b", id="iadd"),
        pytest.param(setitem_ellipsis, r"setitem|\]\s*=|assign", id="setitem"),
        pytest.param(ufunc_out_is_input, r"\badd\b|out", id="ufunc-out"),
    ],
)
def test_inplace_write_of_mapped_into_unmapped_raises(func, operation):
    y = batch(n_sample=3, n_x=2)  # mapped
    x = xr.DataArray(np.array([1.0, 2.0]), dims="x", coords={"x": y.x.values})  # unmapped
    x_before = x.values.copy()
    with pytest.raises(lf.InplaceError) as excinfo:
        lf.vmap(func, dim="sample")(x, y)
    message = str(excinfo.value)
    assert re.search(operation, message), message
    assert re.search(r"zeros_like", message), message
    np.testing.assert_array_equal(x.values, x_before)  # x left untouched


def test_inplace_write_with_in_dims_none_raises():
    y = batch(n_sample=3, n_x=2)
    x = xr.DataArray(np.array([1.0, 2.0]), dims="x", coords={"x": y.x.values})
    x_before = x.values.copy()
    with pytest.raises(lf.InplaceError):
        lf.vmap(iadd, in_dims=(None, "sample"))(x, y)
    np.testing.assert_array_equal(x.values, x_before)


@pytest.mark.parametrize(
    "func",
    [
        pytest.param(iadd, id="iadd"),
        pytest.param(lambda x, y: setitem_ellipsis(x, x + y), id="setitem"),
    ],
)
def test_inplace_write_into_mapped_works_and_writes_through(func):
    x = batch(n_sample=3, n_x=2, seed=1)
    y = batch(n_sample=3, n_x=2, seed=2)
    x0 = x.copy(deep=True)
    expected = x0 + y
    result = lf.vmap(func, dim="sample")(x, y)
    assert_matches_loop(result, expected)
    # As with the for-loop, the caller's x was updated in place.
    np.testing.assert_allclose(x.values, expected.values)


def test_diag_embed_with_buffer_from_scratch_raises_pointing_at_zeros_like():
    def diag_embed(vec):
        assert vec.ndim == 1
        n = vec.sizes["x"]
        result = xr.DataArray(np.zeros((n, n)), dims=("x", "y"))
        for i in range(n):
            result[i, i] = vec[i]
        return result

    vecs = xr.DataArray([[0.0, 1, 2], [3.0, 4, 5]], dims=("sample", "x"))
    with pytest.raises(lf.InplaceError, match="zeros_like"):
        lf.vmap(diag_embed, dim="sample")(vecs)


def test_diag_embed_loc_with_buffer_from_scratch_raises_pointing_at_zeros_like():
    labels = [10, 20, 30]

    def diag_embed(vec):
        result = xr.DataArray(np.zeros((3, 3)), dims=("x", "y"), coords={"x": labels, "y": labels})
        for label in labels:
            result.loc[{"x": label, "y": label}] = vec.sel(x=label)
        return result

    vecs = xr.DataArray([[0.0, 1, 2], [3.0, 4, 5]], dims=("sample", "x"), coords={"x": labels})
    with pytest.raises(lf.InplaceError, match="zeros_like"):
        lf.vmap(diag_embed, dim="sample")(vecs)


def test_inplace_error_from_buffer_from_scratch_leaves_nothing_behind():
    vecs = xr.DataArray([[0.0, 1, 2], [3.0, 4, 5]], dims=("sample", "x"))
    buffer = xr.DataArray(np.zeros(3), dims="x")

    def fill(vec):
        buffer[...] = vec  # a captured buffer is unmapped
        return buffer

    with pytest.raises(lf.InplaceError):
        lf.vmap(fill, dim="sample")(vecs)
    np.testing.assert_array_equal(buffer.values, np.zeros(3))


@pytest.mark.parametrize(
    "make_buffer",
    [
        pytest.param(lambda vec: xr.zeros_like(vec * vec.rename(x="y")), id="zeros_like-outer"),
        pytest.param(
            lambda vec: xr.zeros_like(vec).expand_dims(y=vec.sizes["x"]).copy(),
            id="zeros_like-expand_dims",
        ),
    ],
)
def test_diag_embed_with_zeros_like_buffer_works(make_buffer):
    def diag_embed(vec):
        assert vec.ndim == 1
        result = make_buffer(vec)
        for i in range(vec.sizes["x"]):
            result[{"x": i, "y": i}] = vec[i]
        return result.transpose("x", "y")

    vecs = xr.DataArray([[0.0, 1, 2], [3.0, 4, 5]], dims=("sample", "x"))
    result = lf.vmap(diag_embed, dim="sample")(vecs)
    assert result.dims == ("sample", "x", "y")
    expected = np.stack([np.diag(v) for v in vecs.values])
    np.testing.assert_allclose(result.values, expected)
    assert_matches_loop(result, loop(diag_embed, vecs))


# --- Mutation: out= --------------------------------------------------------------


@pytest.mark.parametrize(
    "func",
    [
        pytest.param(lambda x: np.sin(x.data, out=xr.zeros_like(x).data), id="sin-out-mapped"),
        pytest.param(lambda x: np.add(x.data, 1, out=np.empty(x.shape)), id="add-out-empty"),
        pytest.param(lambda x: np.sin(x.data, out=np.empty(x.shape)), id="sin-out-empty"),
    ],
)
def test_out_argument_raises(func):
    with pytest.raises(lf.OutArgumentError):
        lf.vmap(func, dim="sample")(batch())


# --- Data-dependent Python control flow ------------------------------------------


def relu(x):
    if x > 0:
        return x
    return xr.zeros_like(x)


def count_down(x):
    while x > 0:
        x = x - 1
    return x


@pytest.mark.parametrize(
    "func",
    [
        pytest.param(relu, id="if"),
        pytest.param(count_down, id="while"),
        pytest.param(lambda x: x if bool(x < 0) else -x, id="bool"),
        pytest.param(lambda x: x if bool(x.data < 0) else -x, id="bool-of-data"),
        pytest.param(lambda x: x if (x > 0).any() else -x, id="if-any"),
    ],
)
def test_data_dependent_control_flow_raises(func):
    x = scalars([-1.0, 0.5, 2.0])
    with pytest.raises(lf.DataDependentControlFlowError) as excinfo:
        lf.vmap(func, dim="sample")(x)
    message = str(excinfo.value)
    assert re.search(r"xr\.where", message), message
    assert re.search(r"lf\.cond", message), message


def test_if_on_a_vector_reduction_raises():
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(lf.DataDependentControlFlowError):
        lf.vmap(f, dim="sample")(batch())


def test_control_flow_not_dependent_on_values_works():
    def custom_dot(x):
        if x.ndim == 1:
            return xr.dot(x, x)
        return (x * x).sum()

    def by_dims(x):
        if "t" in x.dims:
            return x.sum("t")
        if x.sizes["x"] == 3 and x.shape == (3,) and len(x) == 3:
            return 2 * x
        return x

    x = batch()
    assert_matches_loop(lf.vmap(custom_dot, dim="sample")(x), loop(custom_dot, x))
    assert_matches_loop(lf.vmap(by_dims, dim="sample")(x), 2 * x)


def test_xr_where_is_the_rewrite_of_if():
    x = scalars([-1.0, 0.5, 2.0])
    result = lf.vmap(lambda v: xr.where(v > 0, v, 0.0), dim="sample")(x)
    np.testing.assert_allclose(result.values, [0.0, 0.5, 2.0])


# --- Data-dependent operations (.item()) -----------------------------------------


@pytest.mark.parametrize(
    "func",
    [
        pytest.param(lambda x: x.item(), id="item"),
        pytest.param(lambda x: float(x), id="float"),
        pytest.param(lambda x: int(x), id="int"),
        pytest.param(lambda x: x.sum().item(), id="sum-item"),
        pytest.param(lambda x: x.data.item(), id="data-item"),
    ],
)
def test_item_raises(func):
    with pytest.raises(lf.ItemError):
        lf.vmap(func, dim="sample")(scalars([1.0, 2.0, 3.0]))


# --- Dynamic shape operations (nonzero and friends) ------------------------------


@pytest.mark.parametrize(
    "func",
    [
        pytest.param(lambda x: np.nonzero(x.data), id="nonzero"),
        pytest.param(lambda x: np.unique(x.data), id="unique"),
        pytest.param(lambda x: np.argwhere(x.data), id="argwhere"),
        pytest.param(lambda x: x.data[x.data > 0], id="boolean-mask"),
    ],
)
def test_dynamic_shape_raises(func):
    xs = xr.DataArray([[0, 1, 2], [0, 0, 3]], dims=("sample", "x"))
    with pytest.raises(lf.DynamicShapeError):
        lf.vmap(func, dim="sample")(xs)


# --- Conversions and unsupported functions ---------------------------------------


@pytest.mark.parametrize(
    "func",
    [
        pytest.param(lambda x: x.values, id="values"),
        pytest.param(lambda x: np.asarray(x), id="asarray"),
        pytest.param(lambda x: np.asarray(x.data), id="asarray-data"),
        pytest.param(lambda x: x.to_numpy(), id="to_numpy"),
    ],
)
def test_conversion_to_numpy_raises(func):
    with pytest.raises(lf.ConversionError):
        lf.vmap(func, dim="sample")(batch())


@pytest.mark.parametrize(
    "func, name",
    [
        pytest.param(lambda x: np.histogram2d(x.data, x.data), "histogram2d", id="histogram2d"),
        pytest.param(lambda x: np.polydiv(x.data, x.data), "polydiv", id="polydiv"),
        pytest.param(lambda x: np.packbits(x.data > 0), "packbits", id="packbits"),
    ],
)
def test_numpy_function_without_kernel_raises_naming_it(func, name):
    with pytest.raises(lf.UnsupportedOperationError, match=name):
        lf.vmap(func, dim="sample")(batch())


# --- Debug prints ----------------------------------------------------------------


def test_repr_and_print_of_a_mapped_value_work(capsys):
    seen = []

    def f(x):
        print(x)
        seen.append(repr(x))
        seen.append(str(x.data))
        return 3 * x

    x = batch(n_sample=4, n_x=3)
    result = lf.vmap(f, dim="sample")(x)
    printed = capsys.readouterr().out
    assert printed.count("<xarray.DataArray") == 1
    header = printed.splitlines()[0]
    assert "(x: 3)" in header and "sample" not in header, header
    assert seen[0].startswith("<xarray.DataArray") and "(x: 3)" in seen[0].splitlines()[0]
    assert isinstance(seen[1], str) and seen[1]
    assert_matches_loop(result, 3 * x)


# --- Randomness ------------------------------------------------------------------


def add_noise(x):
    return x + lf.random.normal(sizes={})


def test_random_under_default_randomness_raises_naming_both_flags():
    with pytest.raises(lf.RandomnessError) as excinfo:
        lf.vmap(add_noise, dim="sample")(scalars(np.ones(3)))
    message = str(excinfo.value)
    assert re.search(r"different", message), message
    assert re.search(r"same", message), message


def test_random_different_gives_different_values_across_the_batch():
    x = scalars(np.ones(3))
    result = lf.vmap(add_noise, dim="sample", randomness="different")(x)
    assert result.dims == ("sample",)
    values = result.values
    assert np.all(np.isfinite(values))
    assert len(np.unique(values)) == 3
    assert not np.any(values == 1.0)


def test_random_same_gives_the_same_value_repeated():
    x = scalars(np.ones(3))
    result = lf.vmap(add_noise, dim="sample", randomness="same")(x)
    assert result.dims == ("sample",)
    values = result.values
    np.testing.assert_array_equal(values, np.full(3, values[0]))
    assert values[0] != 1.0


def test_two_vmap_calls_do_not_repeat_their_draws():
    x = scalars(np.ones(3))
    for flag in ("different", "same"):
        first = lf.vmap(add_noise, dim="sample", randomness=flag)(x)
        second = lf.vmap(add_noise, dim="sample", randomness=flag)(x)
        assert not np.allclose(first.values, second.values), flag


def test_numpy_random_is_not_controlled_by_vmap():
    def add_numpy_noise(x):
        return x + np.random.default_rng(7).normal()

    x = scalars(np.ones(4))
    result = lf.vmap(add_numpy_noise, dim="sample")(x)  # no RandomnessError
    expected_noise = np.random.default_rng(7).normal()
    np.testing.assert_allclose(result.values, np.full(4, 1.0 + expected_noise))
