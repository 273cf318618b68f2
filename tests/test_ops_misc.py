"""isneginf, isposinf, sort_complex, put_along_axis, putmask, place, copyto, the index helpers,
allclose / array_equal / array_equiv, the polynomial functions, bincount and the histograms: their
policies (data-dependent shapes) and edge cases (the generic suites run their entries in
``tests/opinfo_misc.py``).

Oracles: NumPy on plain arrays, the per-example loop, central differences.
"""
import numpy as np
import pytest

import labeled_func as lf


def vmap(f, *xs):
    return lf.vmap(f, in_dims=(0,) * len(xs))(*xs)


def loop(f, *xs):
    return np.stack([np.asarray(f(*[x[i] for x in xs])) for i in range(len(xs[0]))])


def central_difference(f, x, h=1e-6):
    """The gradient of the scalar ``f`` at ``x`` by central differences."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


RNG = np.random.default_rng(7)


# --- predicates -----------------------------------------------------------------------------------
@pytest.mark.parametrize("f", [np.isneginf, np.isposinf])
def test_infinity_predicates_of_complex_values_raise_as_numpy(f):
    z = np.array([[1 + 1j, np.inf]])
    with pytest.raises(TypeError):
        f(z[0])
    with pytest.raises(TypeError):
        vmap(f, z)


def test_sort_complex_orders_ties_in_the_real_part_by_the_imaginary_part():
    z = RNG.integers(-2, 3, size=(4, 6)) + 1j * RNG.normal(size=(4, 6))
    np.testing.assert_array_equal(vmap(np.sort_complex, z), loop(np.sort_complex, z))
    small = RNG.integers(-3, 3, size=(2, 5)).astype(np.int16)
    assert vmap(np.sort_complex, small).dtype == np.sort_complex(small[0]).dtype == np.complex64


# --- in place: the policies of x[i] = v ------------------------------------------------------------
WRITES = {
    "put_along_axis": lambda buf, v: np.put_along_axis(buf, np.array([[0], [2]]), v[:2, None], axis=1),
    "putmask": lambda buf, v: np.putmask(buf, buf > 0, v),
    "place": lambda buf, v: np.place(buf, np.eye(2, 3, dtype=bool), v[:1]),
    "copyto": lambda buf, v: np.copyto(buf, v),
}


@pytest.mark.parametrize("name", sorted(WRITES))
def test_a_mapped_value_into_an_unmapped_array_raises_naming_the_function(name):
    buffer = np.ones((2, 3))

    def f(v):
        WRITES[name](buffer, v)
        return v

    with pytest.raises(lf.InplaceError, match=f"numpy.{name}"):
        vmap(f, RNG.normal(size=(4, 3)))


@pytest.mark.parametrize("name", sorted(WRITES))
def test_a_differentiated_value_into_a_plain_array_raises_naming_the_function(name):
    buffer = np.ones((2, 3))

    def f(v):
        WRITES[name](buffer, v)
        return v.sum()

    with pytest.raises(lf.InplaceError, match=f"numpy.{name}"):
        lf.grad(f)(RNG.normal(size=3))


@pytest.mark.parametrize("name", sorted(WRITES))
def test_writes_into_a_buffer_built_from_the_input_follow_numpy_and_calculus(name):
    x0 = RNG.normal(size=(2, 3))

    def f(x):
        buf = x * 2.0
        WRITES[name](buf, np.sin(x[0]))
        return (buf ** 2 * np.arange(1.0, 7.0).reshape(2, 3)).sum()

    np.testing.assert_allclose(lf.grad(f)(x0), central_difference(f, x0), rtol=1e-6, atol=1e-8)
    xs = RNG.normal(size=(3, 2, 3))
    np.testing.assert_allclose(vmap(f, xs), loop(f, xs))


def test_place_with_several_values_and_a_mapped_mask_is_a_dynamic_shape_error():
    def f(x, mask):
        y = x * 1
        np.place(y, mask, np.array([1.0, 2.0]))
        return y

    x, mask = RNG.normal(size=(3, 5)), RNG.random((3, 5)) < 0.5
    with pytest.raises(lf.DynamicShapeError, match="numpy.place"):
        vmap(f, x, mask)
    # the same mask for every example: NumPy's positions
    np.testing.assert_array_equal(lf.vmap(f, in_dims=(0, None))(x, mask[0]), loop(lambda v: f(v, mask[0]), x))


def test_place_with_one_value_and_a_mapped_mask_is_a_select():
    def f(x, mask):
        y = x * 1
        np.place(y, mask, [7.0])
        return y

    x, mask = RNG.normal(size=(3, 5)), RNG.random((3, 5)) < 0.5
    np.testing.assert_array_equal(vmap(f, x, mask), loop(f, x, mask))


def test_copyto_checks_casting_as_numpy():
    def f(x):
        y = np.zeros(3, dtype=np.int64) + (x > 0)
        np.copyto(y, x)
        return y

    with pytest.raises(TypeError):
        f(np.ones(3))
    with pytest.raises(TypeError):
        vmap(f, np.ones((2, 3)))


def test_putmask_with_a_mask_of_another_size_raises_as_numpy():
    def f(x):
        y = x * 1
        np.putmask(y, np.ones(4, dtype=bool), x[:1])
        return y

    with pytest.raises(ValueError):
        f(np.ones(3))
    with pytest.raises(ValueError):
        vmap(f, np.ones((2, 3)))


# --- index helpers --------------------------------------------------------------------------------
@pytest.mark.parametrize("helper, kwargs", [(np.diag_indices_from, {}), (np.tril_indices_from, {"k": 1}),
                                             (np.triu_indices_from, {"k": -1})])
def test_index_helpers_return_numpys_arrays_for_a_traced_argument(helper, kwargs):
    a = RNG.normal(size=(4, 4))
    seen = []

    def f(x):
        seen.append(helper(x, **kwargs))
        return x

    vmap(f, a[None])
    lf.grad(lambda x: f(x).sum())(a)
    for found in seen:
        assert all(type(i) is np.ndarray for i in found)
        for i, j in zip(found, helper(a, **kwargs)):
            np.testing.assert_array_equal(i, j)


def test_ravel_multi_index_out_of_range_raises_as_numpy():
    i = np.array([[0, 3], [1, 2]])
    with pytest.raises(ValueError):
        np.ravel_multi_index((i[0], i[0]), (3, 4))
    with pytest.raises(ValueError):
        vmap(lambda k: np.ravel_multi_index((k, k), (3, 4)), i)


def test_einsum_path_is_numpys_path_for_the_shapes():
    a, b, c = RNG.normal(size=(2, 3, 8)), RNG.normal(size=(2, 8, 2)), RNG.normal(size=(2, 2, 9))
    seen = []

    def f(x, y, z):
        seen.append(np.einsum_path("ij,jk,kl->il", x, y, z, optimize="greedy"))
        return x

    vmap(f, a, b, c)
    expected = np.einsum_path("ij,jk,kl->il", a[0], b[0], c[0], optimize="greedy")
    assert seen[0][0] == expected[0] and seen[0][1] == expected[1]


# --- whole-array comparisons ----------------------------------------------------------------------
def test_allclose_under_vmap_is_one_answer_per_example():
    a = RNG.normal(size=(4, 3))
    b = a + np.array([0.0, 1e-9, 1e-3, 0.0])[:, None]
    b[3, 0] = a[3, 0] = np.inf
    np.testing.assert_array_equal(vmap(np.allclose, a, b), loop(np.allclose, a, b))
    np.testing.assert_array_equal(vmap(lambda x, y: np.where(np.allclose(x, y), x, -x), a, b),
                                  loop(lambda x, y: np.where(np.allclose(x, y), x, -x), a, b))


def test_branching_on_allclose_of_a_mapped_value_is_a_control_flow_error():
    def f(x):
        return x if np.allclose(x, 0.0) else -x

    with pytest.raises(lf.DataDependentControlFlowError):
        vmap(f, RNG.normal(size=(3, 2)))


def test_branching_on_allclose_under_grad_takes_the_primal():
    def f(x):
        return (x ** 2).sum() if np.allclose(x, 1.0, atol=0.1) else (x ** 3).sum()

    for x in (np.array([1.01, 0.98]), np.array([2.0, -1.0])):
        np.testing.assert_allclose(lf.grad(f)(x), central_difference(f, x), rtol=1e-6)


def test_array_equal_and_equiv_of_other_shapes_are_false_as_numpy():
    x = RNG.normal(size=(2, 3))
    seen = []

    def f(v):
        seen.extend([np.array_equal(v, v[:2]), np.array_equiv(v, v[:2])])
        return v

    vmap(f, x)
    assert seen == [np.array_equal(x[0], x[0][:2]), np.array_equiv(x[0], x[0][:2])] == [False, False]
    np.testing.assert_array_equal(vmap(lambda v: np.array_equiv(v, np.stack([v, v])), x), [True, True])


# --- polynomials ----------------------------------------------------------------------------------
def test_polymul_strips_leading_zeros_as_numpy_where_no_example_has_one():
    a, b = RNG.normal(size=(3, 4)), RNG.normal(size=(3, 2))
    np.testing.assert_allclose(vmap(np.polymul, a, b), loop(np.polymul, a, b))
    a[1, 0] = 0.0
    with pytest.raises(lf.DynamicShapeError, match="numpy.polymul"):
        vmap(np.polymul, a, b)
    with pytest.raises(lf.DynamicShapeError):
        lf.jit(lf.vmap(np.polymul, in_dims=(0, 0)))(a, b)


def test_polymul_under_grad_strips_the_primals_zeros():
    a, b = np.array([0.0, 0.0, 1.5, -2.0]), np.array([0.5, 3.0])

    def f(tail):  # the two leading zeros stay zeros: NumPy's polymul is another function of them
        return (np.polymul(np.concatenate([np.zeros(2), tail]), b) * np.arange(1.0, 4.0)).sum()

    assert np.polymul(a, b).shape == (3,)
    np.testing.assert_allclose(lf.grad(f)(a[2:]), central_difference(f, a[2:]), rtol=1e-6)
    out, _ = lf.jvp(lambda x: np.polymul(x, b), (a,), (np.ones_like(a),))
    np.testing.assert_allclose(out, np.polymul(a, b))


def test_roots_strip_as_numpy_and_refuse_value_dependent_lengths_under_vmap():
    p = np.stack([np.poly([1.0, -2.0, 3.0]) * s for s in (1.0, -2.0, 0.5)])
    np.testing.assert_allclose(np.sort(vmap(np.roots, p), axis=-1), np.sort(loop(np.roots, p), axis=-1))
    padded = np.concatenate([np.zeros((3, 1)), p, np.zeros((3, 2))], axis=1)
    with pytest.raises(lf.DynamicShapeError, match="numpy.roots"):
        vmap(np.roots, padded)
    with pytest.raises(lf.DynamicShapeError, match="numpy.roots"):
        lf.jit(lf.vmap(np.roots, in_dims=(0,)))(p)
    # under grad the primal strips: NumPy's roots, and derivatives by central differences
    x = padded[0]
    np.testing.assert_allclose(np.sort(lf.jvp(np.roots, (x,), (np.ones_like(x),))[0]), np.sort(np.roots(x)))

    def f(middle):  # the zeros stay zeros: NumPy's roots is another function of them
        c = np.concatenate([np.zeros(1), middle, np.zeros(2)])
        return (np.sort(np.real(np.roots(c))) * np.arange(1.0, 6.0)).sum()

    np.testing.assert_allclose(lf.grad(f)(p[0]), central_difference(f, p[0]), rtol=1e-5)
    assert np.roots(np.zeros(3)).shape == lf.jvp(np.roots, (np.zeros(3),), (np.ones(3),))[0].shape == (0,)


def test_poly_of_conjugate_pairs_is_real_under_grad_and_a_dynamic_shape_error_under_vmap():
    r = np.array([1 + 2j, 1 - 2j, 0.5 + 0j])
    out, _ = lf.jvp(np.poly, (r,), (np.ones_like(r),))
    np.testing.assert_allclose(out, np.poly(r))
    assert np.asarray(out).dtype == np.poly(r).dtype == np.float64
    with pytest.raises(lf.DynamicShapeError, match="numpy.poly"):
        vmap(np.poly, np.stack([r, r]))
    # real roots batch, and a square matrix gives its characteristic polynomial
    roots = RNG.normal(size=(3, 4))
    np.testing.assert_allclose(vmap(np.poly, roots), loop(np.poly, roots))
    m = np.array([[2.0, 1.0], [0.5, 3.0]])
    np.testing.assert_allclose(lf.jvp(np.poly, (m,), (np.ones_like(m),))[0], np.poly(m))


def test_polyint_with_traced_constants_and_bad_arguments():
    p, k = RNG.normal(size=(3, 4)), RNG.normal(size=(3, 2))
    np.testing.assert_allclose(vmap(lambda a, c: np.polyint(a, 2, k=c), p, k),
                               loop(lambda a, c: np.polyint(a, 2, k=c), p, k))
    with pytest.raises(ValueError):
        vmap(lambda a: np.polyint(a, 3, k=[1.0, 2.0]), p)
    with pytest.raises(ValueError):
        vmap(lambda a: np.polyder(a, -1), p)


# --- set operations and histograms in several dimensions ------------------------------------------
@pytest.mark.parametrize("f", [np.union1d, np.intersect1d, np.setdiff1d, np.setxor1d])
def test_set_operations_of_a_mapped_input_are_dynamic_shape_errors_naming_them(f):
    a, b = RNG.integers(-3, 4, size=(3, 6)).astype(float), np.array([0.0, 1.0, 2.0])
    with pytest.raises(lf.DynamicShapeError, match=f"numpy.{f.__name__}"):
        lf.vmap(lambda x: f(x, b), in_dims=(0,))(a)
    with pytest.raises(lf.DynamicShapeError, match=f"numpy.{f.__name__}"):
        lf.vmap(lambda y: f(b, y), in_dims=(0,))(a)


@pytest.mark.parametrize("f", [np.union1d, np.intersect1d, np.setdiff1d, np.setxor1d])
def test_set_operations_under_grad_follow_numpy_on_the_primal(f):
    a = np.array([0.5, -1.0, 2.5, 3.0, 1.2])

    def args(x):  # a repeated value and an overlap that finite differences keep
        return np.concatenate([x, x[:1]]), np.concatenate([np.array([7.0, 4.0]), x[np.array([1, 3])]])

    def g(x):
        out = f(*args(x))
        return (out ** 2 * np.arange(1.0, 1.0 + len(f(*args(a))))).sum()

    out, _ = lf.jvp(lambda x: f(*args(x)), (a,), (np.ones_like(a),))
    np.testing.assert_array_equal(out, f(*args(a)))
    np.testing.assert_allclose(lf.grad(g)(a), central_difference(g, a), rtol=1e-6, atol=1e-9)


def test_histogramdd_counts_outliers_nans_and_the_last_edge_as_numpy():
    s = RNG.normal(size=(4, 30, 2))
    s[0, 0] = [np.nan, 0.0]
    s[1, 1] = [5.0, 5.0]  # outside the range below
    s[2, 2] = [1.0, 1.0]  # on the last edge

    def f(x):
        return np.histogramdd(x, bins=(4, 3), range=[(-1.0, 1.0), (-2.0, 1.0)])[0]

    np.testing.assert_array_equal(vmap(f, s), loop(f, s))
    np.testing.assert_array_equal(vmap(lambda x: np.histogramdd(x, bins=3)[0], s[1:]),
                                  loop(lambda x: np.histogramdd(x, bins=3)[0], s[1:]))


def test_histogramdd_density_and_weights_differentiate_as_calculus():
    x, y = RNG.normal(size=25), RNG.normal(size=25)

    def f(w):
        counts = np.histogramdd([x, y], bins=(3, 2), weights=w, density=True)[0]
        return (counts * np.arange(6.0).reshape(3, 2)).sum()

    w = RNG.uniform(0.5, 2.0, size=25)
    np.testing.assert_allclose(lf.grad(f)(w), central_difference(f, w), rtol=1e-5, atol=1e-9)


def test_isclose_with_infinities_and_nans_is_numpys():
    values = np.array([np.inf, -np.inf, np.nan, 1.0, 0.0, 1e308])
    a, b = np.meshgrid(values, values, indexing="ij")
    np.testing.assert_array_equal(vmap(np.isclose, a, b), loop(np.isclose, a, b))
    np.testing.assert_array_equal(vmap(lambda x, y: np.isclose(x, y, equal_nan=True), a, b),
                                  loop(lambda x, y: np.isclose(x, y, equal_nan=True), a, b))
    np.testing.assert_array_equal(vmap(lambda x: np.isclose(x, np.inf), a), loop(lambda x: np.isclose(x, np.inf), a))


def _fill(fn):
    """A buffer mapped by two vmaps (it reads both examples), written with a value mapped
    by the outer one only (lower rank, or a mask's worth)."""
    mask = np.arange(12).reshape(3, 4) % 2 == 0

    def write(x, v):
        y = x * v.sum()
        fn(y, v, mask)
        return y

    return write


NESTED_WRITES = {
    "setitem": lambda y, v, m: y.__setitem__(Ellipsis, v[0]),
    "iadd": lambda y, v, m: y.__iadd__(v[0]),
    "copyto": lambda y, v, m: np.copyto(y, v),
    "copyto_where": lambda y, v, m: np.copyto(y, v, where=m),
    "putmask": lambda y, v, m: np.putmask(y, m, v),
    "place": lambda y, v, m: np.place(y, m, 5.0 * v.sum()),
    "put_along_axis": lambda y, v, m: np.put_along_axis(y, np.zeros((3, 1), int), v[:, :1], axis=1),
    "put": lambda y, v, m: np.put(y, [0, 5], v[0, :2]),
}


@pytest.mark.parametrize("name", sorted(NESTED_WRITES))
def test_writes_of_an_outer_value_into_a_buffer_of_both_vmaps_match_the_loop(name):
    write = _fill(NESTED_WRITES[name])
    outer, inner = RNG.normal(size=(2, 3, 4)), RNG.normal(size=(3, 3, 4))
    got = lf.vmap(lambda v: lf.vmap(lambda x: write(x, v), in_dims=(0,))(inner), in_dims=(0,))(outer)
    expected = np.stack([np.stack([write(x, v) for x in inner]) for v in outer])
    np.testing.assert_array_equal(got, expected)


# --- bincount and histograms: the shape policy (oracles: NumPy per example, calculus) ---------------
SAMPLES = np.random.default_rng(12).normal(size=(3, 6))
COUNTS = np.array([[0, 1, 1, 4], [2, 2, 0, 3], [1, 1, 1, 1]])


def test_bincount_of_a_mapped_array_needs_minlength():
    with pytest.raises(lf.DynamicShapeError, match=r"numpy\.bincount.*minlength="):
        vmap(np.bincount, COUNTS)
    with pytest.raises(lf.DynamicShapeError, match=r"numpy\.bincount.*value >= minlength=4"):
        vmap(lambda x: np.bincount(x, minlength=4), COUNTS)
    out = vmap(lambda x: np.bincount(x, minlength=5), COUNTS)
    np.testing.assert_array_equal(out, [np.bincount(x, minlength=5) for x in COUNTS])


def test_bincount_length_is_fixed_by_a_shared_array_or_by_the_primal():
    rng = np.random.default_rng(12)
    weights = rng.normal(size=(3, 4))
    out = lf.vmap(lambda w: np.bincount(COUNTS[0], weights=w), in_dims=(0,))(weights)
    np.testing.assert_allclose(out, [np.bincount(COUNTS[0], weights=w) for w in weights])
    # under grad alone the primal fixes the length; the weights' cotangent is their bin's
    g = rng.normal(size=5)
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
    counts, edges = vmap(lambda x: np.histogram(x, bins=3), SAMPLES)
    for k, x in enumerate(SAMPLES):
        expected_counts, expected_edges = np.histogram(x, bins=3)
        np.testing.assert_array_equal(counts[k], expected_counts)
        np.testing.assert_allclose(edges[k], expected_edges, rtol=1e-15)
    # the edges are linspace(min, max): d edge_i / d x = (1 - i/n) at the argmin, i/n at the argmax
    jacobian = lf.jacrev(lambda x: np.histogram(x, bins=3)[1])(SAMPLES[0])
    expected = np.zeros((4, 6))
    expected[:, np.argmin(SAMPLES[0])] = 1 - np.arange(4) / 3
    expected[:, np.argmax(SAMPLES[0])] += np.arange(4) / 3
    np.testing.assert_allclose(jacobian, expected, atol=1e-15)


def test_histogram_with_a_rule_for_the_bins_is_a_data_dependent_shape():
    with pytest.raises(lf.DynamicShapeError, match=r"numpy\.histogram with bins='auto'"):
        vmap(lambda x: np.histogram(x, bins="auto")[0], SAMPLES)
    edges = lf.grad(lambda x: np.histogram(x, bins="auto")[1].sum())(SAMPLES[0])  # fixed by the primal
    count = len(np.histogram_bin_edges(SAMPLES[0], bins="auto"))
    expected = np.zeros(6)
    expected[np.argmin(SAMPLES[0])], expected[np.argmax(SAMPLES[0])] = count / 2, count / 2
    np.testing.assert_allclose(edges, expected)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"bins": [0.0, 1.0, 0.5]}, ValueError, "numpy.histogram: `bins` must increase monotonically"),
    ({"bins": 0}, ValueError, "numpy.histogram: `bins` must be positive"),
    ({"bins": [[0.0, 1.0]]}, ValueError, "numpy.histogram: `bins` must be 1d"),
    ({"bins": 2, "range": (1.0, 0.0)}, ValueError, "numpy.histogram: max must be larger than min"),
])
def test_histogram_bad_bins_raise_naming_it(kwargs, error, message):
    with pytest.raises(error, match=message):
        vmap(lambda x: np.histogram(x, **kwargs)[0], SAMPLES)


def test_histogram_of_nan_without_a_range_raises():
    with pytest.raises(ValueError, match="numpy.histogram: autodetected range"):
        vmap(lambda x: np.histogram(x, bins=2)[0], np.where(SAMPLES > 1, np.nan, SAMPLES))
