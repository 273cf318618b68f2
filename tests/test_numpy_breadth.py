"""The NumPy and scipy.special functions of issue #12 where the op table does not reach:
their errors (each naming the culprit), the policy of data-dependent shapes, derivatives
at special points against calculus, and SciPy's functions that convert their input.
"""
import math

import numpy as np
import pytest
import scipy.special as sp
import xarray as xr

import labeled_func as lf

RNG = np.random.default_rng(12)
X = RNG.normal(size=(3, 6))
COUNTS = np.array([[0, 1, 1, 4], [2, 2, 0, 3], [1, 1, 1, 1]])


def vmap(function, *arrays):
    return lf.vmap(function, in_dims=(0,) * len(arrays))(*arrays)


# --- bincount and histograms: the shape policy --------------------------------------------------
def test_bincount_of_a_mapped_array_needs_minlength():
    with pytest.raises(lf.DynamicShapeError, match=r"numpy\.bincount.*minlength="):
        vmap(np.bincount, COUNTS)
    with pytest.raises(lf.DynamicShapeError, match=r"numpy\.bincount.*value >= minlength=4"):
        vmap(lambda x: np.bincount(x, minlength=4), COUNTS)
    out = vmap(lambda x: np.bincount(x, minlength=5), COUNTS)
    np.testing.assert_array_equal(out, [np.bincount(x, minlength=5) for x in COUNTS])


def test_bincount_length_is_fixed_by_a_shared_array_or_by_the_primal():
    weights = RNG.normal(size=(3, 4))
    out = lf.vmap(lambda w: np.bincount(COUNTS[0], weights=w), in_dims=(0,))(weights)
    np.testing.assert_allclose(out, [np.bincount(COUNTS[0], weights=w) for w in weights])
    # under grad alone the primal fixes the length; the weights' cotangent is their bin's
    g = RNG.normal(size=5)
    gradient = lf.grad(lambda w: (np.bincount(COUNTS[0], weights=w) * g).sum())(weights[0])
    np.testing.assert_allclose(gradient, g[COUNTS[0]])


@pytest.mark.parametrize("bad, error, message", [
    (np.array([1, -1, 2]), ValueError, "negative"),
    (np.array([1.0, 2.0]), TypeError, "numpy.bincount: cannot cast"),
    (np.array([[1, 2]]), ValueError, "numpy.bincount: object too deep"),
])
def test_bincount_bad_inputs_raise_as_numpy_naming_it(bad, error, message):
    with pytest.raises(error, match=message):
        vmap(lambda x: np.bincount(x, minlength=5), np.stack([bad, bad]))
    with pytest.raises(error):  # NumPy's own
        np.bincount(bad)


def test_histogram_with_a_number_of_bins_is_mapped_with_traced_edges():
    counts, edges = vmap(lambda x: np.histogram(x, bins=3), X)
    for k, x in enumerate(X):
        expected_counts, expected_edges = np.histogram(x, bins=3)
        np.testing.assert_array_equal(counts[k], expected_counts)
        np.testing.assert_allclose(edges[k], expected_edges, rtol=1e-15)
    # the edges are linspace(min, max): d edge_i / d x = (1 - i/n) at the argmin, i/n at the argmax
    jacobian = lf.jacrev(lambda x: np.histogram(x, bins=3)[1])(X[0])
    expected = np.zeros((4, 6))
    expected[:, np.argmin(X[0])] = 1 - np.arange(4) / 3
    expected[:, np.argmax(X[0])] += np.arange(4) / 3
    np.testing.assert_allclose(jacobian, expected, atol=1e-15)


def test_histogram_with_a_rule_for_the_bins_is_a_data_dependent_shape():
    with pytest.raises(lf.DynamicShapeError, match=r"numpy\.histogram with bins='auto'"):
        vmap(lambda x: np.histogram(x, bins="auto")[0], X)
    edges = lf.grad(lambda x: np.histogram(x, bins="auto")[1].sum())(X[0])  # fixed by the primal
    count = len(np.histogram_bin_edges(X[0], bins="auto"))
    expected = np.zeros(6)
    expected[np.argmin(X[0])], expected[np.argmax(X[0])] = count / 2, count / 2
    np.testing.assert_allclose(edges, expected)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"bins": [0.0, 1.0, 0.5]}, ValueError, "numpy.histogram: `bins` must increase monotonically"),
    ({"bins": 0}, ValueError, "numpy.histogram: `bins` must be positive"),
    ({"bins": [[0.0, 1.0]]}, ValueError, "numpy.histogram: `bins` must be 1d"),
    ({"bins": 2, "range": (1.0, 0.0)}, ValueError, "numpy.histogram: max must be larger than min"),
])
def test_histogram_bad_bins_raise_naming_it(kwargs, error, message):
    with pytest.raises(error, match=message):
        vmap(lambda x: np.histogram(x, **kwargs)[0], X)


def test_histogram_of_nan_without_a_range_raises():
    with pytest.raises(ValueError, match="numpy.histogram: autodetected range"):
        vmap(lambda x: np.histogram(x, bins=2)[0], np.where(X > 1, np.nan, X))


# --- scipy.special ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
def test_incomplete_gamma_is_differentiable_in_x_only(name):
    function = getattr(sp, name)
    a, x = np.array([0.5, 1.5, 3.0]), np.array([0.4, 2.0, 1.1])
    with pytest.raises(lf.UnsupportedOperationError, match=rf"scipy\.special\.{name}.*respect to a"):
        lf.grad(lambda a: function(a, x).sum())(a)
    sign = 1.0 if name == "gammainc" else -1.0
    density = x ** (a - 1) * np.exp(-x) / sp.gamma(a)  # d/dx P(a, x), by calculus
    np.testing.assert_allclose(lf.grad(lambda x: function(a, x).sum())(x), sign * density, rtol=1e-12)
    # a mapped (not differentiated) beside a differentiated x
    per_example = lf.vmap(lf.grad(lambda x, a: function(a, x)), in_dims=(0, 0))(x, a)
    np.testing.assert_allclose(per_example, sign * density, rtol=1e-12)


@pytest.mark.parametrize("name, composition", [
    ("logsumexp", "np.log(np.sum(np.exp(x - m)"),
    ("softmax", "e / np.sum(e"),
    ("log_softmax", "s - np.log(np.sum(np.exp(s)"),
])
@pytest.mark.parametrize("transform", ["vmap", "grad"])
def test_scipy_functions_that_convert_their_input_say_what_to_write(name, composition, transform):
    function = getattr(sp, name)
    run = (lambda f: vmap(f, X)) if transform == "vmap" else (lambda f: lf.grad(lambda x: f(x).sum())(X[0]))
    with pytest.raises(lf.ConversionError) as excinfo:
        run(lambda x: function(x, axis=-1))
    message = str(excinfo.value)
    assert f"scipy.special.{name}" in message and composition in message, message


def test_the_suggested_compositions_equal_scipy():
    def logsumexp(x):
        m = np.max(x, axis=-1, keepdims=True)
        return np.squeeze(m + np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True)), axis=-1)

    def softmax(x):
        e = np.exp(x - np.max(x, axis=-1, keepdims=True))
        return e / np.sum(e, axis=-1, keepdims=True)

    np.testing.assert_allclose(vmap(logsumexp, X), sp.logsumexp(X, axis=-1), rtol=1e-14)
    np.testing.assert_allclose(vmap(softmax, X), sp.softmax(X, axis=-1), rtol=1e-14)
    np.testing.assert_allclose(lf.vmap(lf.grad(logsumexp), in_dims=(0,))(X), sp.softmax(X, axis=-1), rtol=1e-14)


def test_bessel_i1_derivatives_at_zero_by_calculus():
    # I1'(0) = 1/2; the scaled e^-|x| I1(x) has the same slope there
    for function in (sp.i1, sp.i1e):
        assert float(lf.grad(function)(np.array(0.0))) == 0.5
    assert float(lf.grad(lf.grad(sp.i0))(np.array(0.0))) == 0.5  # I0'' = I1' = 1/2 at 0


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_xlogy_is_zero_with_zero_derivative_in_y_at_the_origin():
    value, gradient = lf.grad_and_value(lambda y: sp.xlogy(0.0, y))(np.array(0.0))[::-1]
    assert float(value) == 0.0 and float(gradient) == 0.0
    # elsewhere x / y, and the cross derivative 1 / y also at x = 0
    cross = lf.grad(lambda x: lf.grad(lambda y: sp.xlogy(x, y))(np.array(2.0)))(np.array(0.0))
    assert float(cross) == 0.5


# --- sinc at and near zero --------------------------------------------------------------------------
def test_sinc_value_and_slope_at_zero():
    assert float(vmap(np.sinc, np.zeros((2, 1)))[0, 0]) == 1.0
    assert float(lf.grad(np.sinc)(np.array(0.0))) == 0.0
    second = float(lf.grad(lf.grad(np.sinc))(np.array(1e-3)))
    assert math.isclose(second, -math.pi**2 / 3 * (1 - 0.3 * (math.pi * 1e-3) ** 2), rel_tol=1e-9)


def test_sinc_curvature_at_zero():
    assert math.isclose(float(lf.grad(lf.grad(np.sinc))(np.array(0.0))), -math.pi**2 / 3, rel_tol=1e-12)


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


def test_einsum_sublists_with_more_labels_than_letters_raise_naming_it():
    with pytest.raises(lf.UnsupportedOperationError, match="numpy.einsum in sublist form with more than 26"):
        vmap(lambda x: np.einsum(x.reshape((1,) * 27), list(range(27))), np.ones((2, 1)))


def test_einsum_sublist_form_was_an_attribute_error_and_now_matches_numpy():
    a, b = RNG.normal(size=(2, 3, 4)), RNG.normal(size=(2, 4, 5))
    out = vmap(lambda x, y: np.einsum(x, [0, 1], y, [1, 2], [2, 0]), a, b)
    np.testing.assert_allclose(out, [np.einsum(x, [0, 1], y, [1, 2], [2, 0]) for x, y in zip(a, b)])


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
