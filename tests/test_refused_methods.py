"""Calls that used to be refused (issue 26, item 3), each under vmap, grad and jit.

``np.asarray(..., like=traced)`` (flox), ``ufunc.at`` for maximum / minimum / multiply
(values and derivatives: ties go where NumPy's ``maximum`` applied one write at a time
sends them, the product rule over repeated indices), ``np.add.reduceat`` (segment sums)
and the boolean read-modify-write ``a[mask] -= v`` (xhistogram) with a mask that differs
per example.  The oracles: the per-example loop (vmap), central differences and the same
function written with one write at a time (grad), the function itself, bit for bit (jit);
and the messages where something stays refused.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func.errors import DynamicShapeError, UnsupportedOperationError

EPS = 1e-6


def loop(f, *batched):
    return np.stack([np.asarray(f(*[a[i] for a in batched])) for i in range(len(batched[0]))])


def central_jacobian(f, x, *rest):
    """d f(x, *rest) / d x by central differences, on plain NumPy: shape out + x."""
    x = np.asarray(x, dtype=np.float64)
    columns = []
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = EPS
        columns.append((np.asarray(f(x + step, *rest)) - np.asarray(f(x - step, *rest))) / (2 * EPS))
    out = np.stack(columns, axis=-1)
    return out.reshape(out.shape[:-1] + x.shape)


def check_vmap_jit(f, *batched, exact=True):
    """vmap against the loop; lf.jit of the vmap bit for bit, on a trace and a replay."""
    want = loop(f, *batched)
    got = np.asarray(lf.vmap(f, in_dims=(0,) * len(batched))(*batched))
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    jitted = lf.jit(lf.vmap(f, in_dims=(0,) * len(batched)))
    np.testing.assert_array_equal(np.asarray(jitted(*batched)), got)
    shifted = tuple(a + 1 if a.dtype.kind == "f" else a for a in batched)
    np.testing.assert_array_equal(np.asarray(jitted(*shifted)),
                                  np.asarray(lf.vmap(f, in_dims=(0,) * len(batched))(*shifted)))
    single = tuple(a[0] for a in batched)
    if exact:
        np.testing.assert_array_equal(np.asarray(lf.jit(f)(*single)), np.asarray(f(*single)))
    else:  # NumPy's own function on plain arrays sums in another order
        np.testing.assert_allclose(np.asarray(lf.jit(f)(*single)), np.asarray(f(*single)), rtol=1e-13, atol=1e-13)
        np.testing.assert_array_equal(np.asarray(lf.jit(f)(*single)), got[0])


def check_derivatives(f, *args, argnums=(0,), jit=True):
    """jacrev and jacfwd in the arguments ``argnums`` (together: an update writes into one
    of them) against central differences; lf.jit of the jacrev bit for bit."""
    rev = lf.jacrev(f, argnums=argnums)(*args)
    fwd = lf.jacfwd(f, argnums=argnums)(*args)
    for k, argnum in enumerate(argnums):
        def of(a, argnum=argnum):
            full = list(args)
            full[argnum] = a
            return f(*full)
        want = central_jacobian(of, args[argnum])
        np.testing.assert_allclose(np.asarray(rev[k]), want, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(np.asarray(fwd[k]), np.asarray(rev[k]), rtol=1e-12, atol=1e-12)
    if jit:
        jitted = lf.jit(lf.jacrev(f, argnums=argnums))(*args)
        for k in range(len(argnums)):
            np.testing.assert_array_equal(np.asarray(jitted[k]), np.asarray(rev[k]))


# --- np.asarray(..., like=traced) -----------------------------------------------------------------
def test_asarray_like_a_traced_array_gives_numpys_constant():
    seen = []

    def f(x):
        r = np.asarray([1.0, 2.0, 3.0], like=x)
        seen.append(type(r))
        return x * r + np.asarray(x, like=x) + np.array(x, like=x, dtype=np.float64)

    x = np.random.default_rng(0).normal(size=(4, 3))
    check_vmap_jit(f, x)
    check_derivatives(f, x[0])
    assert set(seen) == {np.ndarray}
    cast = lf.vmap(lambda x: np.asarray(x, like=x, dtype=np.float32), in_dims=0)(x)
    np.testing.assert_array_equal(np.asarray(cast), x.astype(np.float32))
    assert np.asarray(cast).dtype == np.float32


def test_asarray_like_on_a_dataarray_inside_vmap():
    da = xr.DataArray(np.arange(6.0).reshape(2, 3), dims=("s", "x"))
    out = lf.vmap(lambda d: d * np.asarray([1.0, 0.0, 2.0], like=d.data), dim="s")(da)
    xr.testing.assert_identical(out, da * np.array([1.0, 0.0, 2.0]))


def test_array_like_copies_a_traced_array():
    def f(x):
        y = np.array(x, like=x)
        y[0] = 0.0  # a copy: x is not written
        return x + y

    x = np.random.default_rng(1).normal(size=(3, 4))
    check_vmap_jit(f, x)
    check_derivatives(f, x[0])


def test_the_other_creators_like_a_traced_array_give_numpys_constant():
    seen = []

    def f(x):  # flox: np.arange(size, like=aux)
        made = [np.arange(3, like=x), np.zeros(3, like=x), np.ones(3, like=x), np.full(3, 2.5, like=x),
                np.empty(0, like=x), np.identity(3, like=x)[0], np.eye(3, like=x)[1], np.tri(3, like=x)[2],
                np.fromfunction(lambda i: i * 2.0, (3,), like=x),
                np.frombuffer(np.array([1.0, 2.0, 3.0]).tobytes(), like=x),
                np.fromiter(iter([1.0, 5.0, 7.0]), dtype=float, like=x)]
        seen.extend(type(m) for m in made)
        return x * sum(m for m in made if m.size)

    x = np.random.default_rng(2).normal(size=(4, 3))
    check_vmap_jit(f, x)
    check_derivatives(f, x[0])
    assert set(seen) == {np.ndarray}


def test_asarray_like_of_a_list_holding_traced_values_is_refused():
    with pytest.raises(UnsupportedOperationError, match="a list of traced values, like=.*np.stack"):
        lf.vmap(lambda x: np.asarray([x[0], 1.0], like=x), in_dims=0)(np.ones((2, 3)))


# --- ufunc.at --------------------------------------------------------------------------------------
INDICES = np.array([0, 3, 0, -1, 3, 0, 2])


def at(ufunc, indices=INDICES):
    def f(x, v):
        y = x * 1
        ufunc.at(y, indices, v)
        return y
    return f


def one_at_a_time(ufunc, indices=INDICES):
    """The same update as NumPy defines it: ``ufunc`` applied once per index, in order."""
    def f(x, v):
        y = x * 1
        for j, i in enumerate(indices):
            y[i] = ufunc(y[i], v[j])
        return y
    return f


UFUNCS = [np.maximum, np.minimum, np.fmax, np.fmin, np.multiply]


@pytest.mark.parametrize("ufunc", UFUNCS, ids=lambda u: u.__name__)
def test_ufunc_at_vmap_jit(ufunc):
    rng = np.random.default_rng(2)
    x, v = rng.normal(size=(4, 5)), rng.normal(size=(4, 7))
    v[:, 2] = v[:, 0]  # two writes of one value into position 0
    x[1, 3] = v[1, 1]  # a tie between the array and a write
    check_vmap_jit(at(ufunc), x, v)
    np.testing.assert_array_equal(loop(at(ufunc), x, v), loop(one_at_a_time(ufunc), x, v))


@pytest.mark.parametrize("ufunc", UFUNCS, ids=lambda u: u.__name__)
def test_ufunc_at_derivatives(ufunc):
    rng = np.random.default_rng(3)
    x, v = rng.normal(size=5), rng.normal(size=7)
    check_derivatives(at(ufunc), x, v, argnums=(0, 1))


@pytest.mark.parametrize("ufunc", [np.maximum, np.minimum], ids=lambda u: u.__name__)
def test_ufunc_at_ties_go_where_one_write_at_a_time_sends_them(ufunc):
    x = np.array([1.0, 2.0, 0.5, 4.0, 3.0])
    v = np.array([1.0, 3.0, 1.0, 0.0, 3.0, -1.0, 0.5])  # ties at 0 (x and two writes), 3 and 2
    want = lf.jacrev(one_at_a_time(ufunc), argnums=(0, 1))(x, v)
    for transform in (lf.jacrev, lf.jacfwd):
        got = transform(at(ufunc), argnums=(0, 1))(x, v)
        for k in range(2):
            np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(want[k]))


def test_multiply_at_product_rule_over_repeats_with_zeros():
    x = np.array([2.0, 0.0, 1.5, -1.0, 3.0])
    v = np.array([0.0, 2.0, 3.0, 1.0, 0.0, -2.0, 4.0])  # position 0 gets 0, 3, -2; position 3 gets 2, 0
    check_derivatives(at(np.multiply), x, v, argnums=(0, 1))


def test_ufunc_at_rows_and_a_broadcast_value():
    rng = np.random.default_rng(4)
    f = at(np.maximum, np.array([2, 2, 0]))
    x, v = rng.normal(size=(3, 4, 3)), rng.normal(size=(3, 3, 3))
    check_vmap_jit(f, x, v)
    check_derivatives(f, x[0], v[0], argnums=(0, 1))
    g = at(np.multiply, (np.array([1, 1]), slice(None)))
    check_vmap_jit(g, x, v[:, 0])
    check_derivatives(g, x[0], v[0, 0], argnums=(0, 1))


def test_ufunc_at_shared_values_into_mapped_arrays_and_the_inplace_policy():
    rng = np.random.default_rng(5)
    x, v = rng.normal(size=(3, 5)), rng.normal(size=7)
    out = lf.vmap(at(np.maximum), in_dims=(0, None))(x, v)
    np.testing.assert_array_equal(np.asarray(out), np.stack([at(np.maximum)(row, v) for row in x]))

    def into_constant(v):
        y = np.zeros(5)
        np.maximum.at(y, INDICES, v)
        return y

    with pytest.raises(lf.errors.InplaceError, match="numpy.maximum.at"):
        lf.vmap(into_constant, in_dims=0)(rng.normal(size=(3, 7)))


def test_ufunc_at_with_mapped_or_traced_indices_is_refused():
    def f(x, i):
        y = x * 1
        np.maximum.at(y, i, 1.0)
        return y

    with pytest.raises(UnsupportedOperationError, match=r"numpy.maximum.at under vmap \(indices that differ per "
                                                         "example\\) is not supported.*np.add.at"):
        lf.vmap(f, in_dims=0)(np.ones((2, 4)), np.array([[0, 1], [2, 2]]))

    def g(x):
        y = x * 1
        np.multiply.at(y, np.argsort(x)[:2], 2.0)
        return y

    with pytest.raises(UnsupportedOperationError, match=r"numpy.multiply.at under lf.jit \(indices computed"):
        lf.jit(g)(np.array([3.0, 1.0, 2.0]))
    x = np.array([3.0, 1.0, 2.0])  # under grad the indices have one value
    check_derivatives(g, x, jit=False)


# --- np.add.reduceat -------------------------------------------------------------------------------
@pytest.mark.parametrize("indices, axis, shape", [
    ([0, 4, 1, 5], 0, (7,)),  # overlapping segments; a[4] alone (4 >= 1)
    ([0, 2, 2, 6], 1, (3, 7)),  # an empty segment gives a[2]
    ([3], 0, (5, 2)),
    ([0, 1, 2, 3], -1, (2, 4)),
])
def test_add_reduceat(indices, axis, shape):
    def f(x):
        return np.add.reduceat(x, indices, axis=axis)

    x = np.random.default_rng(6).normal(size=(3,) + shape)
    np.testing.assert_allclose(loop(f, x), np.stack([np.add.reduceat(row, indices, axis=axis) for row in x]),
                               rtol=1e-14)
    check_vmap_jit(f, x, exact=False)
    check_derivatives(f, x[0])


def test_add_reduceat_dtypes_and_refusals():
    ints = np.arange(12, dtype=np.int8).reshape(3, 4)
    out = np.asarray(lf.vmap(lambda x: np.add.reduceat(x, [0, 2]), in_dims=0)(ints))
    want = np.stack([np.add.reduceat(row, [0, 2]) for row in ints])
    np.testing.assert_array_equal(out, want)
    assert out.dtype == want.dtype
    with pytest.raises(IndexError, match="out-of-bounds"):
        lf.vmap(lambda x: np.add.reduceat(x, [0, 9]), in_dims=0)(np.ones((2, 4)))
    with pytest.raises(UnsupportedOperationError, match="reduceat under vmap.*which elements each segment sums"):
        lf.vmap(lambda x, i: np.add.reduceat(x, i), in_dims=0)(np.ones((2, 4)), np.array([[0], [1]]))


# --- x[mask] op= v ---------------------------------------------------------------------------------
def shift_positive(x):
    y = x * 1
    y[x > 0] -= 1.0
    y[y < -0.5] *= 3
    return y


def add_where_positive(x, v):
    y = x * 1
    y[x > 0] += v  # v: one value per example, the same for every selected element
    return y


def halve_rows(x):
    y = x * 1
    y[x[:, 0] > 0] /= 2
    return y


@pytest.mark.parametrize("f, shapes", [(shift_positive, [(5,)]), (add_where_positive, [(5,), ()]),
                                       (halve_rows, [(4, 2)])], ids=lambda v: getattr(v, "__name__", ""))
def test_masked_update_with_a_mask_that_differs_per_example(f, shapes):
    rng = np.random.default_rng(7)
    args = tuple(rng.normal(size=(3,) + shape) for shape in shapes)
    for _ in range(10):  # the interpreter specialises the subscript after a few runs
        check_vmap_jit(f, *args)
    check_derivatives(f, *[a[0] for a in args], argnums=tuple(range(len(args))))


MASK = np.array([True, False, True, True, False])


def shift_constant_mask(x, v):
    y = x * 1
    y[MASK] -= v  # a mask that is the same for every example: one value per selected element
    return y


def test_masked_update_with_a_constant_mask():
    rng = np.random.default_rng(12)
    x, v = rng.normal(size=(3, 5)), rng.normal(size=(3, 3))
    check_vmap_jit(shift_constant_mask, x, v)
    check_derivatives(shift_constant_mask, x[0], v[0], argnums=(0, 1))


def test_masked_update_of_integer_bins_as_xhistogram_does():
    edges = np.linspace(0.0, 1.0, 5)

    def bins(x):
        index = np.digitize(x, edges)
        index[x == edges[-1]] -= 1  # the right edge belongs to the last bin
        return index

    x = np.random.default_rng(8).random((3, 6))
    x[1, 2] = x[2, 0] = 1.0
    check_vmap_jit(bins, x)


def test_masked_update_refusals():
    def per_element(x):
        y = x * 1
        y[x > 0] -= x[:2]
        return y

    with pytest.raises(DynamicShapeError, match=r"x\[mask\] -= v with a mask that differs per example .*one entry "
                                                "per selected element"):
        lf.vmap(per_element, in_dims=0)(np.ones((2, 5)))

    def float_into_int(x):
        y = (x * 10).astype(int)
        y[x > 0] -= 1.5
        return y

    with pytest.raises(TypeError, match="same_kind"):
        lf.vmap(float_into_int, in_dims=0)(np.ones((2, 5)))

    def read(x):
        return x[x > 0]  # not an update: the selection's shape follows the values

    with pytest.raises(DynamicShapeError, match="boolean-mask indexing"):
        lf.vmap(read, in_dims=0)(np.ones((2, 5)))


# --- quantile(method=...) --------------------------------------------------------------------------
METHODS = ["averaged_inverted_cdf", "midpoint", "interpolated_inverted_cdf", "hazen", "weibull", "median_unbiased",
           "normal_unbiased", "lower", "higher", "nearest", "inverted_cdf", "closest_observation"]


def with_nans(seed=9):
    x = np.random.default_rng(seed).normal(size=(3, 7, 4))
    x[0, 2, 1] = np.nan
    x[1, :, 2] = np.nan  # a slice of NaN only
    x[2, 1:4, 0] = np.nan
    return x


@pytest.mark.parametrize("method", METHODS)
def test_quantile_methods_bit_for_bit_with_numpys(method):
    rng = np.random.default_rng(10)
    plain = rng.normal(size=(3, 7, 4))
    batches = [plain, with_nans(), rng.integers(0, 20, size=(3, 7, 4)), plain.astype(np.float32)]
    for function in (np.quantile, np.nanquantile, np.percentile):
        for q in (0.3, [0.0, 0.1, 0.5, 0.77, 1.0], np.float32(0.4)):
            q = np.multiply(q, 100) if function is np.percentile else q
            for axis in (0, None, (0, 1)):
                def f(x):
                    return function(x, q, axis=axis, method=method)
                for x in batches:
                    with np.errstate(all="ignore"), warnings.catch_warnings():
                        warnings.simplefilter("ignore", RuntimeWarning)  # All-NaN slice
                        want = loop(f, x)
                        got = np.asarray(lf.vmap(f, in_dims=0)(x))
                    assert got.dtype == want.dtype, (function.__name__, q, axis, x.dtype)
                    np.testing.assert_array_equal(got, want, err_msg=f"{function.__name__} {q} {axis} {x.dtype}")


@pytest.mark.parametrize("method", METHODS)
def test_quantile_methods_on_dataarrays_under_vmap_grad_jit(method):
    da = xr.DataArray(np.random.default_rng(11).normal(size=(3, 8)), dims=("s", "x"))

    def f(d):
        return d.quantile([0.2, 0.9], dim="x", method=method)

    got = lf.vmap(f, dim="s")(da)
    want = xr.concat([f(da.isel(s=i)) for i in range(3)], "s").transpose(*got.dims)
    xr.testing.assert_identical(got, want)
    xr.testing.assert_identical(lf.jit(lf.vmap(f, dim="s"))(da), got)
    x = da.isel(s=0)
    grad = lf.grad(lambda d: f(d).sum())(x)
    want = central_jacobian(lambda v: float(f(x.copy(data=v)).sum()), x.values)
    np.testing.assert_allclose(grad.values, want, atol=1e-6)
    np.testing.assert_array_equal(lf.jit(lf.grad(lambda d: f(d).sum()))(x).values, grad.values)


def test_quantile_refusals_and_numpys_errors():
    x = np.ones((2, 5))
    with pytest.raises(ValueError, match="'cubic' is not a valid method"):
        lf.vmap(lambda v: np.quantile(v, 0.5, method="cubic"), in_dims=0)(x)
    with pytest.raises(UnsupportedOperationError, match="numpy.quantile: weights= is not supported"):
        lf.vmap(lambda v: np.quantile(v, 0.5, method="inverted_cdf", weights=np.ones(5)), in_dims=0)(x)


# --- the xarray methods whose refusal is xarray's own code, not a NumPy call ----------------------
def labeled():
    rng = np.random.default_rng(13)
    return (xr.DataArray(rng.normal(size=(3, 6)), dims=("s", "x"), coords={"x": np.linspace(0.0, 1.0, 6) ** 2}),
            xr.DataArray(rng.random((3, 6)), dims=("s", "x")))


# idxmax/idxmin (vmap, jit), sortby of values (along a dim without index coordinate; under
# grad with one) and polyfit's default skipna now work: tests/test_xarray_methods.py.


def test_weighted_with_traced_weights_works_under_jit_and_vmap():
    # xarray's NaN check of the weights is made per example (xarray_methods): tests/test_weighted.py
    da, w = labeled()
    f = lambda d, w: d.weighted(w).mean("x")  # noqa: E731
    xr.testing.assert_allclose(lf.jit(f)(da.isel(s=0), w.isel(s=0)), f(da.isel(s=0), w.isel(s=0)))
    xr.testing.assert_allclose(lf.vmap(f, dim="s")(da, w), xr.concat([f(da.isel(s=i), w.isel(s=i)) for i in range(3)], "s"))
    # unmapped weights work under vmap; mapped ones with branches="agree" too
    got = lf.vmap(lambda d: f(d, w.isel(s=0)), dim="s")(da)
    xr.testing.assert_allclose(got, xr.concat([f(da.isel(s=i), w.isel(s=0)) for i in range(3)], "s"))
    agreed = lf.vmap(f, dim="s", branches="agree")(da, w)
    xr.testing.assert_allclose(agreed, xr.concat([f(da.isel(s=i), w.isel(s=i)) for i in range(3)], "s"))
