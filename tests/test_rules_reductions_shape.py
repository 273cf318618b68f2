"""Derivative rules of the reduction, shape, indexing and creation kernels, at engine level.

Every case runs the JVP against central finite differences and the VJP by the
inner-product identity <J^T u, v> = <u, J v> (``tests/ad_helpers.py``), in float64.
Then the conventions that differences cannot see (ties of max/min share the
derivative equally, zeros in prod/cumprod, NaNs skipped by nan*, repeated indices
adding up), second order (the rules are traceable) and vmap of a VJP against a loop.
"""
import numpy as np
import pytest
from ad_helpers import check_jvp, check_vjp, engine_jvp, engine_vjp

import labeled_func as lf
from labeled_func_kernels import creation as kc
from labeled_func_kernels import indexing as ki
from labeled_func_kernels import reductions as kr

windows = np.lib.stride_tricks.sliding_window_view
REPEATED = np.array([0, 2, 0, 0])


def normal(*shape):
    return lambda rng: rng.normal(size=shape)


def with_zeros(*positions, shape=(3, 4)):
    """A normal sample with zeros at ``positions`` (flat indices)."""

    def make(rng):
        x = rng.normal(size=shape)
        x.flat[list(positions)] = 0.0
        return x

    return make


def with_nans(shape=(3, 5)):
    """NaNs in some slices, never a whole slice along either axis."""

    def make(rng):
        x = rng.normal(size=shape)
        x[0, 1] = x[0, 3] = x[2, 4] = np.nan
        return x

    return make


def setitem(key):
    """The functional update ``x[key] = v`` as one primitive call."""
    template, arrays = ki.split_key(key)
    return lambda x, v: ki.setitem.bind(x, v, *arrays, template=template)


def index_add(key):
    template, arrays = ki.split_key(key)
    return lambda x, v: ki.index_add.bind(x, v, *arrays, template=template)


def update_through_tracer(x, v):
    """The in-place spelling: a copy, then ``y[key] = v`` on it."""
    y = x * 1.0
    y[1:, ::-1] = v
    return y


CASES = {
    # reductions: axis variants, keepdims
    "sum_all": (np.sum, [normal(3, 4)]),
    "sum_axis": (lambda x: np.sum(x, axis=-1), [normal(2, 3, 4)]),
    "sum_axes_keepdims": (lambda x: np.sum(x, axis=(0, 2), keepdims=True), [normal(2, 3, 4)]),
    "prod_axis": (lambda x: np.prod(x, axis=1), [normal(3, 4)]),
    "prod_all_keepdims": (lambda x: np.prod(x, keepdims=True), [normal(2, 3)]),
    "prod_axes": (lambda x: np.prod(x, axis=(2, 0)), [normal(2, 3, 2)]),
    "prod_one_zero": (lambda x: np.prod(x, axis=1), [with_zeros(1)]),
    "prod_two_zeros": (lambda x: np.prod(x, axis=1), [with_zeros(1, 2, 8)]),
    "mean_axes": (lambda x: np.mean(x, axis=(0, 1)), [normal(2, 3, 4)]),
    "mean_keepdims": (lambda x: np.mean(x, axis=0, keepdims=True), [normal(3, 4)]),
    "var": (lambda x: np.var(x, axis=1), [normal(3, 4)]),
    "var_ddof_keepdims": (lambda x: np.var(x, axis=0, ddof=1, keepdims=True), [normal(3, 4)]),
    "std_all": (np.std, [normal(3, 4)]),
    "std_ddof": (lambda x: np.std(x, axis=-1, ddof=1), [normal(2, 3, 4)]),
    "max_axis": (lambda x: np.max(x, axis=1), [normal(3, 4)]),
    "max_all": (np.max, [normal(3, 4)]),
    "min_keepdims": (lambda x: np.min(x, axis=(0, 2), keepdims=True), [normal(2, 3, 4)]),
    "cumsum_axis": (lambda x: np.cumsum(x, axis=0), [normal(3, 4)]),
    "cumsum_flat": (np.cumsum, [normal(3, 4)]),
    "cumprod_axis": (lambda x: np.cumprod(x, axis=1), [normal(3, 6)]),
    "cumprod_flat": (np.cumprod, [normal(2, 5)]),
    "cumprod_zeros": (lambda x: np.cumprod(x, axis=1), [with_zeros(1, 5, 6, 11, shape=(3, 5))]),
    "sort_last": (np.sort, [normal(3, 5)]),
    "sort_first": (lambda x: np.sort(x, axis=0), [normal(4, 3)]),
    "take_along_axis_repeated": (lambda x: np.take_along_axis(x, np.array([[0, 2, 2, 0, 1]]), axis=1), [normal(3, 4)]),
    "take_along_axis_argmax": (lambda x: np.take_along_axis(x, np.argmax(x, axis=0, keepdims=True), axis=0),
                               [normal(4, 3)]),
    "any_all_select": (lambda x: np.where(np.any(x > 0, axis=1), np.sum(x, axis=1), np.all(x < 1, axis=1) * 1.0),
                       [normal(4, 3)]),
    "median_all": (np.median, [normal(3, 5)]),
    "median_axis_keepdims": (lambda x: np.median(x, axis=1, keepdims=True), [normal(3, 4)]),
    "quantile_levels": (lambda x: np.quantile(x, [0.1, 0.5, 0.75], axis=0), [normal(5, 3)]),
    "percentile": (lambda x: np.percentile(x, 30, axis=1), [normal(3, 6)]),
    # nan* composites: the derivative at the values that are not NaN
    "nansum": (lambda x: np.nansum(x, axis=1), [with_nans()]),
    "nanprod": (lambda x: np.nanprod(x, axis=0), [with_nans()]),
    "nanmean": (lambda x: np.nanmean(x, axis=1), [with_nans()]),
    "nanvar_ddof": (lambda x: np.nanvar(x, axis=1, ddof=1), [with_nans()]),
    "nanstd": (lambda x: np.nanstd(x, axis=0, keepdims=True), [with_nans()]),
    "nanmax": (lambda x: np.nanmax(x, axis=1), [with_nans()]),
    "nanmin": (lambda x: np.nanmin(x, axis=0), [with_nans()]),
    "nancumsum": (lambda x: np.nancumsum(x, axis=1), [with_nans()]),
    "nancumprod": (lambda x: np.nancumprod(x, axis=1), [with_nans()]),
    "nanmedian": (lambda x: np.nanmedian(x, axis=1), [with_nans()]),
    "nanquantile": (lambda x: np.nanquantile(x, [0.2, 0.9], axis=1), [with_nans()]),
    "nanargmax_pick": (lambda x: np.take_along_axis(x, np.nanargmax(x, axis=1, keepdims=True), axis=1), [with_nans()]),
    # constants from *_like
    "like_constants": (lambda x: x * np.ones_like(x) + np.full_like(x, 2.0) + np.zeros_like(x) * x, [normal(3, 4)]),
    # shape
    "reshape": (lambda x: np.reshape(x, (4, 3)), [normal(3, 4)]),
    "ravel": (np.ravel, [normal(2, 3, 2)]),
    "transpose": (lambda x: np.transpose(x, (2, 0, 1)), [normal(2, 3, 4)]),
    "moveaxis": (lambda x: np.moveaxis(x, 0, -1), [normal(2, 3, 4)]),
    "expand_dims": (lambda x: np.expand_dims(x, (0, 2)), [normal(3, 4)]),
    "squeeze": (lambda x: np.squeeze(x, axis=1), [normal(3, 1, 4)]),
    "broadcast_to": (lambda x: np.broadcast_to(x, (2, 3, 4)), [normal(3, 1)]),
    "concatenate_constant": (lambda x: np.concatenate([x, np.ones((2, 4)), x[::-1]], axis=0), [normal(3, 4)]),
    "concatenate_axis1": (lambda x, y: np.concatenate([x, y], axis=1), [normal(3, 2), normal(3, 4)]),
    "concatenate_flat": (lambda x, y: np.concatenate([y, x], axis=None), [normal(3, 2), normal(4)]),
    "stack_constant": (lambda x: np.stack([x, np.full((3, 4), 2.0), 2 * x], axis=1), [normal(3, 4)]),
    "stack_two": (lambda x, y: np.stack([x, y], axis=-1), [normal(3, 4), normal(3, 4)]),
    "pad_constant": (lambda x: np.pad(x, ((1, 2), (0, 3)), constant_values=5.0), [normal(3, 4)]),
    "pad_edge": (lambda x: np.pad(x, ((2, 1), (1, 1)), mode="edge"), [normal(3, 4)]),
    "pad_reflect": (lambda x: np.pad(x, 2, mode="reflect"), [normal(3, 4)]),
    "pad_wrap": (lambda x: np.pad(x, ((0, 0), (3, 2)), mode="wrap"), [normal(3, 4)]),
    "roll_axis": (lambda x: np.roll(x, -1, axis=1), [normal(3, 4)]),
    "roll_axes": (lambda x: np.roll(x, (1, 2), axis=(0, 1)), [normal(3, 4)]),
    "roll_flat": (lambda x: np.roll(x, 5), [normal(3, 4)]),
    "flip_axis": (lambda x: np.flip(x, axis=0), [normal(3, 4)]),
    "flip_all": (np.flip, [normal(3, 4)]),
    "windows_one_axis": (lambda x: windows(x, 3, axis=1), [normal(3, 5)]),
    "windows_two_axes": (lambda x: windows(x, (2, 3)), [normal(3, 5)]),
    "windows_same_axis_twice": (lambda x: windows(x, (2, 2), axis=(1, 1)), [normal(2, 5)]),
    "copy": (np.copy, [normal(3, 4)]),
    "diff_prepend": (lambda x: np.diff(x, n=2, axis=1, prepend=0.5), [normal(3, 4)]),
    "gradient_edge_order_2": (lambda x: np.gradient(x, 0.5, axis=1, edge_order=2), [normal(3, 5)]),
    # getitem
    "getitem_int": (lambda x: x[1], [normal(3, 4)]),
    "getitem_of_numpy_scalar": (lambda x: np.sum(x)[None] * x, [normal(3)]),  # NumPy returns np.float64 there
    "getitem_negative_step": (lambda x: x[::-1, -1:0:-2], [normal(4, 5)]),
    "getitem_ellipsis_none": (lambda x: x[..., None, 1], [normal(2, 3, 4)]),
    "getitem_none_int_ellipsis": (lambda x: x[None, 0, ..., ::-1], [normal(2, 3, 4)]),
    "getitem_repeated": (lambda x: x[REPEATED], [normal(3, 2)]),
    "getitem_repeated_2d": (lambda x: x[:, np.array([[1, 1], [0, 1]])], [normal(3, 2)]),
    "getitem_two_arrays": (lambda x: x[np.array([0, 0, 2]), np.array([1, 1, 3])], [normal(3, 4)]),
    "getitem_arrays_around_slice": (lambda x: x[np.array([1, 1]), :, np.array([0, 0])], [normal(2, 3, 2)]),
    "take_repeated": (lambda x: np.take(x, REPEATED, axis=1), [normal(2, 3)]),
    # setitem and index_add (direct and through the tracer's __setitem__)
    "setitem_slice": (setitem((slice(1, None),)), [normal(4, 3), normal(3)]),
    "setitem_negative_step": (setitem((slice(None, None, -2), Ellipsis)), [normal(5, 2), normal(3, 2)]),
    "setitem_int_array": (setitem((np.array([2, 0]), slice(1, 3))), [normal(4, 3), normal(2, 2)]),
    "setitem_int_ellipsis": (setitem((Ellipsis, 0)), [normal(2, 3, 4), normal(1, 3)]),
    "setitem_scalar_value": (lambda x: ki.setitem.bind(x, 2.0, template=(1,)), [normal(3, 4)]),
    "setitem_through_tracer": (update_through_tracer, [normal(3, 4), normal(4)]),
    "index_add_repeated": (index_add((REPEATED,)), [normal(3, 2), normal(4, 2)]),
    "index_add_slice": (index_add((slice(None), slice(None, None, -1))), [normal(2, 3), normal(3)]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_jvp_matches_central_differences(name):
    function, makers = CASES[name]
    rng = np.random.default_rng(0)
    check_jvp(function, [make(rng) for make in makers], rng)


@pytest.mark.parametrize("name", list(CASES))
def test_vjp_satisfies_inner_product_identity(name):
    function, makers = CASES[name]
    rng = np.random.default_rng(1)
    check_vjp(function, [make(rng) for make in makers], rng)


# --- conventions finite differences cannot see ----------------------------------------------------
@pytest.mark.parametrize("function, expected", [
    pytest.param(lambda x: np.max(x, axis=1), [[0, 0.5, 0.5, 0], [1 / 3, 1 / 3, 0, 1 / 3]], id="max"),
    pytest.param(lambda x: np.min(-x, axis=1), [[0, -0.5, -0.5, 0], [-1 / 3, -1 / 3, 0, -1 / 3]], id="min"),
    pytest.param(lambda x: np.nanmax(x, axis=1), [[0, 0.5, 0.5, 0], [1 / 3, 1 / 3, 0, 1 / 3]], id="nanmax"),
])
def test_ties_of_max_and_min_share_the_derivative_equally(function, expected):
    x = np.array([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, -1.0, 5.0]])
    _, (grad,) = engine_vjp(function, [x], np.ones(2))
    np.testing.assert_allclose(grad, expected)
    tangent = np.arange(8.0).reshape(2, 4)
    _, pushed = engine_jvp(function, [x], [tangent])
    np.testing.assert_allclose(pushed, np.sum(tangent * np.asarray(expected), axis=1))


def test_max_of_a_slice_with_nan_sends_no_cotangent_there():
    x = np.array([[1.0, np.nan, 2.0], [1.0, 4.0, 2.0]])
    _, (grad,) = engine_vjp(lambda x: np.max(x, axis=1), [x], np.ones(2))
    np.testing.assert_array_equal(grad, [[0, 0, 0], [0, 1, 0]])


def product_jacobian(x, cumulative):
    """d out_i / d x_k of prod (one row) or cumprod of a 1-d x, by explicit products."""
    n = x.size
    rows = range(n) if cumulative else [n - 1]
    return np.array([[np.prod(np.delete(x[: i + 1], k)) if k <= i else 0.0 for k in range(n)] for i in rows])


@pytest.mark.parametrize("x", [[2.0, 0.0, 3.0, -1.5], [0.0, 0.0, 3.0, 2.0], [1.5, 2.0, -1.0, 0.0], [0.0],
                               [1.0, 2.0, 0.0, 3.0, 0.5, -1.0, 2.0, 0.0, 1.5]])
@pytest.mark.parametrize("cumulative", [False, True], ids=["prod", "cumprod"])
def test_prod_and_cumprod_derivatives_are_exact_at_zeros(x, cumulative):
    x = np.asarray(x)
    function = np.cumprod if cumulative else np.prod
    jacobian = product_jacobian(x, cumulative)
    u = np.arange(1.0, jacobian.shape[0] + 1).reshape(np.shape(function(x)))
    _, (pulled,) = engine_vjp(function, [x], u)
    np.testing.assert_allclose(pulled, jacobian.T @ np.ravel(u), atol=1e-12)
    t = np.linspace(-1.0, 2.0, x.size)
    _, pushed = engine_jvp(function, [x], [t])
    np.testing.assert_allclose(np.ravel(pushed), jacobian @ t, atol=1e-12)


@pytest.mark.parametrize("name", ["nansum", "nanprod", "nanmean", "nanvar", "nanstd", "nanmax", "nanmin",
                                  "nanmedian"])
def test_nan_reductions_give_zero_derivative_at_nans_and_the_plain_one_elsewhere(name):
    reduction = getattr(np, name)

    def function(x):
        return reduction(x, axis=1)

    rng = np.random.default_rng(2)
    x = with_nans()(rng)
    u = rng.normal(size=np.shape(function(x)))
    _, (grad,) = engine_vjp(function, [x], u)
    missing = np.isnan(x)
    assert np.all(grad[missing] == 0) and np.all(np.isfinite(grad))
    row = 0  # row 0 has NaNs at 1 and 3: its derivative is that of the rest alone
    rest = x[row, ~missing[row]]
    _, (expected,) = engine_vjp(lambda r: function(r[None])[0], [rest], u[row])
    np.testing.assert_allclose(grad[row, ~missing[row]], expected)


def test_repeated_integer_indices_add_up():
    x = np.arange(6.0).reshape(3, 2)
    _, (grad,) = engine_vjp(lambda x: x[REPEATED], [x], np.ones((4, 2)))
    np.testing.assert_array_equal(grad, [[3, 3], [0, 0], [1, 1]])
    _, (grad,) = engine_vjp(lambda x: x[REPEATED, np.array([1, 1, 0, 1])], [x], np.array([1.0, 2.0, 4.0, 8.0]))
    np.testing.assert_array_equal(grad, [[4, 1 + 8], [0, 0], [0, 2]])


def test_setitem_cotangents_zero_the_written_region_and_sum_a_broadcast_value():
    x, v = np.ones((3, 4)), np.ones(4)
    u = np.arange(12.0).reshape(3, 4)
    _, (dx, dv) = engine_vjp(setitem((slice(1, None),)), [x, v], u)
    np.testing.assert_array_equal(dx, np.where(np.arange(3)[:, None] >= 1, 0.0, u))
    np.testing.assert_array_equal(dv, u[1:].sum(axis=0))


@pytest.mark.parametrize("prim", [kc.zeros_like, kc.ones_like, kc.full_like, kc.empty_like, kr.argmax,
                                  kr.argmin, kr.reduce_any, kr.reduce_all, kr.argsort], ids=repr)
def test_outputs_without_derivative_are_marked(prim):
    assert not prim.differentiable


# --- the rules are traceable: second order, and vmap of a VJP -----------------------------------
SECOND_ORDER = {
    "prod": (lambda x: np.prod(x, axis=1), with_zeros(2)),
    "cumprod": (lambda x: np.cumprod(x, axis=1), with_zeros(5)),
    "std": (lambda x: np.std(x, axis=0), normal(3, 4)),
    "max_squared": (lambda x: np.max(x, axis=1) * np.max(x, axis=1), normal(3, 4)),
    "sort_squared": (lambda x: np.sort(x, axis=1) * np.sort(x, axis=1), normal(3, 4)),
    "quantile_times_x": (lambda x: np.quantile(x, 0.3, axis=1, keepdims=True) * x, normal(3, 4)),
    "getitem_repeated_squared": (lambda x: x[REPEATED] * x[REPEATED], normal(3, 2)),
    "take_along_axis_squared": (lambda x: np.take_along_axis(x, np.array([[2, 2, 0]]), axis=1) ** 3.0,
                                lambda rng: rng.uniform(0.5, 2.0, size=(3, 4))),
    "windows_product": (lambda x: windows(x, 2, axis=1) * windows(x, 2, axis=1), normal(3, 4)),
    "setitem_product": (lambda x: setitem((slice(None, None, -2),))(x * x, x[:2] * x[1:3]), normal(4, 3)),
    "pad_concatenate": (lambda x: np.concatenate([np.pad(x, 1) * x.sum(), x * x], axis=None), normal(2, 3)),
}


def gradient_along(function, u):
    return lambda x: engine_vjp(function, [x], u)[1][0]


@pytest.mark.parametrize("name", list(SECOND_ORDER))
def test_second_order_through_the_rules(name):
    function, make = SECOND_ORDER[name]
    rng = np.random.default_rng(3)
    x = make(rng)
    gradient = gradient_along(function, rng.normal(size=np.shape(function(x))))
    check_jvp(gradient, [x], rng, rtol=1e-5, atol=1e-6)  # forward over reverse
    check_vjp(gradient, [x], rng)  # reverse over reverse


VMAP_OF_VJP = {
    "cumprod": (lambda x: np.cumprod(x, axis=1), with_zeros(3)),
    "getitem_repeated": (lambda x: x[REPEATED, ::-1], normal(3, 2)),
    "max_with_ties": (lambda x: np.max(np.round(x), axis=0), normal(3, 4)),
    "sort": (lambda x: np.sort(x, axis=0), normal(3, 4)),
    "setitem_int_array": (lambda x: setitem((np.array([2, 0]),))(x, x[1] * x[1]), normal(3, 4)),
    "windows": (lambda x: windows(x, (2, 2)), normal(3, 4)),
    "take_along_axis_per_example_index": (  # a mapped, repeated index array inside the scatter-add
        lambda x: np.take_along_axis(x, np.concatenate([np.argmax(x, axis=1, keepdims=True)] * 3, axis=1), axis=1),
        normal(3, 4)),
    "nanquantile": (lambda x: np.nanquantile(x, [0.25, 0.8], axis=1), with_nans()),
}


@pytest.mark.parametrize("name", list(VMAP_OF_VJP))
def test_vmap_of_vjp_matches_a_loop(name):
    function, make = VMAP_OF_VJP[name]
    rng = np.random.default_rng(4)
    xs = np.stack([make(rng) for _ in range(3)])
    us = rng.normal(size=(3,) + np.shape(function(xs[0])))
    shared_u = us[0]
    mapped = lf.vmap(lambda x, u: engine_vjp(function, [x], u)[1][0], in_dims=(0, 0))(xs, us)
    loop = np.stack([engine_vjp(function, [x], u)[1][0] for x, u in zip(xs, us)])
    np.testing.assert_allclose(mapped, loop, atol=1e-12)
    mapped = lf.vmap(lambda x: engine_vjp(function, [x], shared_u)[1][0], in_dims=(0,))(xs)
    loop = np.stack([engine_vjp(function, [x], shared_u)[1][0] for x in xs])
    np.testing.assert_allclose(mapped, loop, atol=1e-12)


@pytest.mark.parametrize("key", [(REPEATED,), (slice(None), np.array([[1, 1], [0, 1]])), (slice(None, None, -1), 0)],
                         ids=["repeated", "slice_then_2d_array", "basic"])
def test_index_add_on_array_api_strict_matches_numpy(key):
    """The portable scatter-add (a one-hot sum) against ``np.add.at``."""
    xp = pytest.importorskip("array_api_strict")
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3, 2))
    value = rng.normal(size=x[key].shape)
    expected = x.copy()
    np.add.at(expected, key, value)
    template, arrays = ki.split_key(key)
    strict = ki.index_add.bind(xp.asarray(x), xp.asarray(value), *[xp.asarray(a) for a in arrays], template=template)
    np.testing.assert_allclose(np.asarray(strict), expected)


@pytest.mark.parametrize("coordinate", [np.arange(6.0) * 0.5, np.array([0.0, 1.0, 2.0, 3.0, 5.0, 6.0])],
                         ids=["evenly-spaced", "uneven"])
def test_gradient_with_coordinates_leaves_nans_where_numpy_does(coordinate):
    # Evenly spaced coordinates take NumPy's uniform formula, which never reads the centre
    # point: a NaN there stays put instead of spreading to its neighbours.
    values = np.array([[0.0, 1.0, np.nan, 9.0, 16.0, 25.0], [1.0, 2.0, 3.0, 4.0, 5.0, 7.0]])
    expected = np.gradient(values, coordinate, axis=1)
    mapped = lf.vmap(lambda row: np.gradient(row, coordinate), in_dims=(0,))(values)
    np.testing.assert_array_equal(np.isnan(mapped), np.isnan(expected))
    np.testing.assert_allclose(mapped, expected, rtol=1e-14)
    primal, tangent = lf.jvp(lambda row: np.gradient(row, coordinate), (values[1],), (np.ones(6),))
    np.testing.assert_allclose(primal, expected[1], rtol=1e-14)
    np.testing.assert_allclose(tangent, np.gradient(np.ones(6), coordinate), atol=1e-14)


def test_gradient_of_float32_with_float64_coordinates_stays_float32_as_in_numpy():
    values = np.array([[1.0, 2.0, 4.0, 8.0, 16.0], [0.0, 1.0, 0.0, 1.0, 0.0]], dtype=np.float32)
    coordinate = np.array([0.0, 1.0, 3.0, 4.0, 7.0])
    mapped = lf.vmap(lambda row: np.gradient(row, coordinate), in_dims=(0,))(values)
    expected = np.stack([np.gradient(row, coordinate) for row in values])
    assert mapped.dtype == expected.dtype == np.float32
    np.testing.assert_allclose(mapped, expected, rtol=1e-6)


NAN_SKIPPING = {
    "nansum": lambda x: np.nansum(x, axis=1), "nanprod": lambda x: np.nanprod(x, axis=0),
    "nanmean": lambda x: np.nanmean(x, axis=1), "nanvar": lambda x: np.nanvar(x, axis=1, ddof=1),
    "nanstd": lambda x: np.nanstd(x, axis=0),
}


@pytest.mark.parametrize("name", list(NAN_SKIPPING))
@pytest.mark.parametrize("nans", [False, True], ids=["no-nan", "nans"])
def test_nan_skipping_reductions_mask_without_looking_where_looking_waits(name, nans, monkeypatch):
    """On a GPU, looking whether an array has a NaN waits for the device, so the nan* forms
    mask without looking (``backend.looking_waits``): forced here on NumPy, values and
    gradients are NumPy's nan* values and the derivative that skips the NaNs, and the
    look is never made."""
    from labeled_func.engine.numpy import reductions

    func = NAN_SKIPPING[name]
    x = np.random.default_rng(5).normal(size=(3, 5))
    if nans:
        x[0, 1] = x[2, 4] = np.nan
    looks = []
    monkeypatch.setattr(reductions, "looking_waits", lambda value: True)
    monkeypatch.setattr(reductions, "any_true", lambda mask: looks.append(mask) or True)
    value = lf.vmap(func, in_dims=0)(x[None])[0]
    gradient = lf.grad(lambda v: func(v).sum())(x)
    assert not looks
    np.testing.assert_allclose(value, func(x), rtol=1e-13)
    h = 1e-6  # central differences at the entries that are not NaN (a NaN's derivative is 0)
    for index in zip(*np.nonzero(~np.isnan(x))):
        step = np.zeros_like(x)
        step[index] = h
        expected = (np.nansum(func(x + step)) - np.nansum(func(x - step))) / (2 * h)
        np.testing.assert_allclose(gradient[index], expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_array_equal(gradient[np.isnan(x)], 0.0)
