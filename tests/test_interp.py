"""``np.interp`` under every transform (the primitive of ``kernels/interp.py``).

Oracles: NumPy's ``interp`` on plain arrays (the per-example loop), central differences,
the inner-product identity <v, J u> = <J^T v, u>, the closed form of a linear field, and
the function itself, bit for bit, under ``lf.jit``.  The generic suites run the op table's
``interp`` entry too (``tests/opinfo.py``).
"""
import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from ad_helpers import check_jvp, check_vjp
from labeled_func_kernels import interp as kinterp

RNG = np.random.default_rng(26)
B, N, M = 4, 6, 9


def knots(*lead, n=N):
    return np.cumsum(RNG.uniform(0.3, 1.0, size=lead + (n,)), axis=-1) - 1.0


def points(*shape):
    """Inside and outside the knots (about -1 .. 5), none on a knot."""
    return RNG.uniform(-1.5, 5.0, size=shape)


def loop(f, args, in_dims):
    size = next(np.shape(a)[0] for a, d in zip(args, in_dims) if d == 0)
    return np.stack([f(*[a[i] if d == 0 else a for a, d in zip(args, in_dims)]) for i in range(size)])


# --- vmap against the per-example loop --------------------------------------------------------------
IN_DIMS = [(0, None, None), (None, 0, None), (None, None, 0), (None, 0, 0), (0, None, 0), (0, 0, None),
           (0, 0, 0)]


@pytest.mark.parametrize("in_dims", IN_DIMS, ids=str)
@pytest.mark.parametrize("edges", [{}, {"left": np.nan, "right": np.nan}, {"left": -3.0, "right": 8.0}], ids=str)
def test_vmap_matches_the_loop_bit_for_bit(in_dims, edges):
    shared = (points(M), knots(), RNG.normal(size=N))
    batched = (points(B, M), knots(B), RNG.normal(size=(B, N)))
    args = [b if d == 0 else s for s, b, d in zip(shared, batched, in_dims)]
    f = lambda x, xp, fp: np.interp(x, xp, fp, **edges)  # noqa: E731
    got = lf.vmap(f, in_dims=in_dims)(*args)
    np.testing.assert_array_equal(got, loop(f, args, in_dims))


def test_vmap_of_points_of_any_shape_and_nested_vmaps_match_the_loops():
    x, xp, fp = points(2, 3, 5, 2), knots(2), RNG.normal(size=(3, N))
    f = lambda x, xp, fp: np.interp(x, xp, fp, right=0.5)  # noqa: E731
    inner = lf.vmap(f, in_dims=(0, None, 0))  # x[i, j] with fp[j]
    got = lf.vmap(inner, in_dims=(0, 0, None))(x, xp, fp)  # x[i] with xp[i]
    expected = np.stack([np.stack([f(x[i, j], xp[i], fp[j]) for j in range(3)]) for i in range(2)])
    np.testing.assert_array_equal(got, expected)


def test_vmap_at_the_last_axis_and_of_a_scalar_point():
    x, xp, fp = points(B), knots(), RNG.normal(size=(N, B))
    got = lf.vmap(np.interp, in_dims=(0, None, 1))(x, xp, fp)
    np.testing.assert_array_equal(got, [np.interp(x[i], xp, fp[:, i]) for i in range(B)])


def test_the_portable_formula_is_numpys_interp_bit_for_bit():
    """The vectorised impl (CuPy with rows, libraries without interp) on NumPy arrays."""
    x, xp, fp = points(B, M), knots(B), RNG.normal(size=(B, N))
    x[0, :3] = [xp[0, 0], xp[0, -1], np.nan]
    for left, right in [(None, None), (np.nan, np.nan), (-1.0, 2.0)]:
        expected = np.stack([np.interp(x[i], xp[i], fp[i], left, right) for i in range(B)])
        got = kinterp._formula(np, x, xp, fp, left, right, 1)
        np.testing.assert_array_equal(got, expected)
        shared = kinterp._formula(np, x, xp[:1], fp[:1], left, right, 1)  # one table: searchsorted
        np.testing.assert_array_equal(shared, np.stack([np.interp(x[i], xp[0], fp[0], left, right) for i in range(B)]))
        one = kinterp._formula(np, x[0], xp[0, :1], fp[0, :1], left, right, 0)
        np.testing.assert_array_equal(one, np.interp(x[0], xp[0, :1], fp[0, :1], left, right))


def test_the_vectorised_formula_on_array_api_strict_is_numpys_interp():
    """Shared and per-row tables (searchsorted, and counting the knots) without NumPy's interp."""
    xps = pytest.importorskip("array_api_strict")
    x, xp, fp = points(B, M), knots(B), RNG.normal(size=(B, N))
    x[0, :3] = [xp[0, 0], xp[0, -1], np.nan]
    for left, right in [(None, None), (np.nan, np.nan), (-1.0, 2.0)]:
        expected = np.stack([np.interp(x[i], xp[i], fp[i], left, right) for i in range(B)])
        got = kinterp._formula(xps, xps.asarray(x), xps.asarray(xp), xps.asarray(fp), left, right, 1)
        np.testing.assert_array_equal(np.asarray(got), expected)
        got = kinterp._formula(xps, xps.asarray(x), xps.asarray(xp[:1]), xps.asarray(fp), left, right, 1)
        expected = np.stack([np.interp(x[i], xp[0], fp[i], left, right) for i in range(B)])
        np.testing.assert_array_equal(np.asarray(got), expected)


# --- derivatives ---------------------------------------------------------------------------------
EDGES = [{}, {"left": -3.0, "right": 8.0}, {"left": np.nan, "right": np.nan}]


@pytest.mark.parametrize("edges", EDGES, ids=str)
@pytest.mark.parametrize("wrt", ["x", "xp", "fp", "all"])
def test_jvp_matches_central_differences_and_vjp_is_its_transpose(wrt, edges):
    x, xp, fp = points(M), knots(), RNG.normal(size=N)
    full = lambda x, xp, fp: np.interp(x, xp, fp, **edges)  # noqa: E731
    primals = {"x": [x], "xp": [xp], "fp": [fp], "all": [x, xp, fp]}[wrt]
    f = {"x": lambda x: full(x, xp, fp), "xp": lambda xp: full(x, xp, fp), "fp": lambda fp: full(x, xp, fp),
         "all": full}[wrt]
    check_jvp(_finite(f), primals, RNG, rtol=1e-6, atol=1e-6)
    check_vjp(_finite(f), primals, RNG, rtol=1e-9, atol=1e-9)


def _finite(f):
    """NaN (the fill outside the grid) as 0: its derivative is 0 there."""
    return lambda *a: np.nan_to_num(f(*a))


def test_grad_jacrev_and_jvp_of_the_public_transforms_against_central_differences():
    x, xp, fp = points(M), knots(), RNG.normal(size=N)
    h = 1e-6

    def loss(x, xp, fp):
        return np.sum(np.sin(np.interp(x, xp, fp, left=0.0)))

    grads = lf.grad(loss, argnums=(0, 1, 2))(x, xp, fp)
    for k, (arg, g) in enumerate(zip((x, xp, fp), grads)):
        fd = np.zeros_like(arg)
        for i in range(arg.size):
            e = np.zeros_like(arg)
            e[i] = h
            shifted = lambda s: loss(*[a + s * e if j == k else a for j, a in enumerate((x, xp, fp))])  # noqa: E731
            fd[i] = (shifted(1) - shifted(-1)) / (2 * h)
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-7)
    jac = np.asarray(lf.jacrev(lambda fp: np.interp(x, xp, fp))(fp))
    assert jac.shape == (M, N)
    np.testing.assert_allclose(jac.sum(axis=1), np.ones(M))  # the weights of each point sum to 1
    t = RNG.normal(size=M)
    _, tangent = lf.jvp(lambda x: np.interp(x, xp, fp), (x,), (t,))
    fd = (np.interp(x + h * t, xp, fp) - np.interp(x - h * t, xp, fp)) / (2 * h)
    np.testing.assert_allclose(tangent, fd, rtol=1e-6, atol=1e-7)


def test_jacrev_equals_jacfwd_and_second_derivatives_in_the_knots():
    x, xp, fp = points(M), knots(), RNG.normal(size=N)
    f = lambda xp: np.interp(x, xp, fp)  # noqa: E731
    np.testing.assert_allclose(np.asarray(lf.jacrev(f)(xp)), np.asarray(lf.jacfwd(f)(xp)), rtol=1e-12, atol=1e-12)
    loss = lambda xp: np.sum(np.interp(x, xp, fp) ** 2)  # noqa: E731
    hess = np.asarray(lf.hessian(loss)(xp))
    h = 1e-5
    fd = np.stack([(lf.grad(loss)(xp + h * e) - lf.grad(loss)(xp - h * e)) / (2 * h) for e in np.eye(N)])
    np.testing.assert_allclose(hess, fd, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("in_dims", [(0, None, None), (None, 0, None), (None, None, 0), (0, 0, 0)], ids=str)
def test_vmap_of_grad_matches_a_loop_of_grad(in_dims):
    shared = (points(M), knots(), RNG.normal(size=N))
    batched = (points(B, M), knots(B), RNG.normal(size=(B, N)))
    args = [b if d == 0 else s for s, b, d in zip(shared, batched, in_dims)]
    loss = lambda x, xp, fp: np.sum(np.interp(x, xp, fp, left=1.0) * np.arange(M))  # noqa: E731
    g = lf.grad(loss, argnums=(0, 1, 2))
    got = lf.vmap(g, in_dims=in_dims)(*args)
    for k in range(3):
        expected = loop(lambda *a: np.asarray(g(*a)[k]), args, in_dims)
        np.testing.assert_allclose(got[k], expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("in_dims", IN_DIMS, ids=str)
def test_derivatives_of_a_vmapped_interp_one_table_per_example(in_dims):
    """grad/jvp outside vmap: the rules then see the batched primitive (rows of tables)."""
    shared = (points(M), knots(), RNG.normal(size=N))
    batched = (points(B, M), knots(B), RNG.normal(size=(B, N)))
    args = [b if d == 0 else s for s, b, d in zip(shared, batched, in_dims)]
    mapped = lf.vmap(lambda x, xp, fp: np.interp(x, xp, fp, left=0.5), in_dims=in_dims)
    check_jvp(mapped, args, RNG, rtol=1e-6, atol=1e-6)
    check_vjp(mapped, args, RNG, rtol=1e-9, atol=1e-9)
    weights = RNG.normal(size=(B, M))
    grads = lf.grad(lambda *a: np.sum(mapped(*a) * weights), argnums=(0, 1, 2))(*args)
    _, pushed = lf.jvp(lambda *a: np.sum(mapped(*a) * weights), tuple(args), tuple(np.ones_like(a) for a in args))
    np.testing.assert_allclose(sum(np.sum(g) for g in grads), pushed, rtol=1e-9)


def test_derivatives_outside_the_grid_and_at_its_ends():
    xp, fp = np.array([0.0, 1.0, 3.0]), np.array([1.0, 3.0, 2.0])
    x = np.array([-1.0, 0.0, 0.5, 3.0, 4.0])
    dx = lf.vmap(lf.grad(lambda x: np.interp(x, xp, fp)), in_dims=0)(x)
    np.testing.assert_array_equal(dx, [0.0, 2.0, 2.0, -0.5, 0.0])  # ends: the slope of their segment
    jac = np.asarray(lf.jacrev(lambda fp: np.interp(x, xp, fp))(fp))
    np.testing.assert_array_equal(jac, [[1, 0, 0], [1, 0, 0], [0.5, 0.5, 0], [0, 0, 1], [0, 0, 1]])
    jac = np.asarray(lf.jacrev(lambda fp: np.interp(x, xp, fp, left=np.nan, right=7.0))(fp))
    np.testing.assert_array_equal(jac, [[0, 0, 0], [1, 0, 0], [0.5, 0.5, 0], [0, 0, 1], [0, 0, 0]])
    grad_xp = lf.grad(lambda xp: np.interp(0.5, xp, fp))(xp)  # s (w - 1), -s w with s = 2, w = 1/2
    np.testing.assert_array_equal(grad_xp, [-1.0, -1.0, 0.0])


def test_traced_left_and_right_differentiate():
    """Where x, xp or fp is traced too (NumPy dispatches np.interp on those three only)."""
    xp, fp, x = knots(), RNG.normal(size=N), np.array([-2.0, 1.0, 9.0])
    loss = lambda fp, lr: np.sum(np.interp(x, xp, fp, left=lr[0], right=lr[1]))  # noqa: E731
    g_fp, g_lr = lf.grad(loss, argnums=(0, 1))(fp, np.array([1.0, 2.0]))
    np.testing.assert_array_equal(g_lr, [1.0, 1.0])
    np.testing.assert_array_equal(g_fp, lf.grad(lambda fp: np.interp(1.0, xp, fp))(fp))
    f = lambda fp, r: np.interp(x, xp, fp, right=r)  # noqa: E731
    got = lf.vmap(f, in_dims=(0, 0))(np.stack([fp, fp]), np.array([1.0, 2.0]))
    np.testing.assert_array_equal(got, [f(fp, 1.0), f(fp, 2.0)])


# --- lf.jit ----------------------------------------------------------------------------------------
def test_jit_equals_the_function_bit_for_bit():
    x, xp, fp = points(M), knots(), RNG.normal(size=N)
    f = lambda x, xp, fp: np.interp(x, xp, fp, left=np.nan, right=-1.0)  # noqa: E731
    jitted = lf.jit(f)
    for _ in range(2):  # the trace, then a replay with other values
        np.testing.assert_array_equal(jitted(x, xp, fp), f(x, xp, fp))
        x, fp = points(M), RNG.normal(size=N)
    vm = lf.jit(lf.vmap(f, in_dims=(0, 0, 0)))
    X, XP, FP = points(B, M), knots(B), RNG.normal(size=(B, N))
    np.testing.assert_array_equal(vm(X, XP, FP), lf.vmap(f, in_dims=(0, 0, 0))(X, XP, FP))
    loss = lambda x, xp, fp: np.sum(np.interp(x, xp, fp) ** 2)  # noqa: E731
    g = lf.grad(loss, argnums=(0, 1, 2))
    for got, expected in zip(lf.jit(g)(x, xp, fp), g(x, xp, fp)):
        np.testing.assert_array_equal(got, expected)


# --- NumPy's semantics -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float32, np.float64])
def test_dtypes_give_float64_as_numpy(dtype):
    xp, fp = np.array([0, 2, 5], dtype=dtype), np.array([1, 4, 2], dtype=dtype)
    x = np.array([-1, 0, 1, 3, 5, 6], dtype=dtype)
    got = lf.vmap(lambda x: np.interp(x, xp, fp), in_dims=0)(np.stack([x, x]))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, np.stack([np.interp(x, xp, fp)] * 2))
    got = lf.vmap(lambda fp: np.interp(x, xp, fp), in_dims=0)(np.stack([fp, fp]))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, np.stack([np.interp(x, xp, fp)] * 2))
    assert lf.jit(lambda x: np.interp(x, xp, fp))(x).dtype == np.float64
    got = lf.grad(lambda fp: np.sum(np.interp(x, xp, fp)))(fp.astype(np.float64))
    assert got.dtype == np.float64


def test_edges_nans_and_single_knots_are_numpys():
    xp, fp = np.array([0.0, 1.0, 3.0]), np.array([1.0, 3.0, 2.0])
    x = np.array([-1.0, 0.0, 3.0, 4.0, np.nan, 2.0])
    for kwargs in [{}, {"left": np.nan, "right": np.nan}, {"left": -5, "right": 7.5}]:
        got = lf.vmap(lambda fp: np.interp(x, xp, fp, **kwargs), in_dims=0)(np.stack([fp, fp]))
        np.testing.assert_array_equal(got[1], np.interp(x, xp, fp, **kwargs))
    for kwargs in [{}, {"left": -5.0, "right": 7.5}]:  # one knot (NaN x gives fp[0], as NumPy)
        got = lf.vmap(lambda x: np.interp(x, [1.0], [2.0], **kwargs), in_dims=0)(np.stack([x, x]))
        np.testing.assert_array_equal(got[0], np.interp(x, [1.0], [2.0], **kwargs))
    assert lf.grad(lambda fp: np.interp(0.5, [0.0, 1.0], fp))(np.array([1.0, 2.0])).tolist() == [0.5, 0.5]
    jitted = lf.jit(lambda fp: np.interp(2.5, [0.0, 1.0, 3.0], fp))  # a Python scalar point
    assert float(jitted(fp)) == np.interp(2.5, xp, fp)


def test_period_follows_numpy_and_differentiates():
    xp, fp = np.array([190.0, -190.0, 350.0, -350.0]), np.array([5.0, 10.0, 3.0, 4.0])
    x = np.array([-180.0, -170.0, -185.0, 185.0, -10.0, -5.0, 0.0, 365.0])
    got = lf.vmap(lambda x: np.interp(x, xp, fp, period=360), in_dims=0)(np.stack([x, x + 1.0]))
    np.testing.assert_array_equal(got, [np.interp(x, xp, fp, period=360), np.interp(x + 1.0, xp, fp, period=360)])
    g = lf.grad(lambda fp: np.sum(np.interp(x, xp, fp, period=360)))(fp)
    np.testing.assert_allclose(g.sum(), x.size)  # the weights of each point sum to 1
    off_knots = RNG.uniform(-400.0, 400.0, size=8)
    check_jvp(lambda x, xp, fp: np.interp(x, xp, fp, period=360.0), [off_knots, xp, fp], RNG, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="period must be a non-zero value"):
        lf.grad(lambda x: np.sum(np.interp(x, xp, fp, period=0)))(x)


def test_complex_fp_is_refused_by_name():
    with pytest.raises(lf.UnsupportedOperationError, match="complex fp"):
        lf.vmap(lambda fp: np.interp([0.5], [0.0, 1.0], fp), in_dims=0)(np.ones((2, 2), dtype=complex))


# --- xarray ------------------------------------------------------------------------------------------
def linear_interp(da, dim, new):
    """``da.interp({dim: new})`` (method="linear", NaN outside) for a 1-D ``da``, through
    ``np.interp`` (xarray's own ``interp`` calls scipy.interpolate.interp1d)."""
    return xr.apply_ufunc(np.interp, new, da[dim], da, input_core_dims=[[], [dim], [dim]],
                          kwargs={"left": np.nan, "right": np.nan})


def test_xarray_route_matches_interp_and_differentiates_in_the_data_and_the_locations():
    t = np.array([0.0, 0.5, 1.5, 2.0, 3.5])
    a, b = 1.7, -0.3
    da = xr.DataArray(a * t + b, dims="t", coords={"t": t})
    new = xr.DataArray([0.25, 1.0, 2.9, 4.0], dims="q")
    np.testing.assert_allclose(linear_interp(da, "t", new).values, da.interp(t=new).values, rtol=1e-14)
    inside = new.where(new < t[-1], 0.0)
    # the locations: d/dq interp(a t + b) = a (a linear field is interpolated exactly)
    dq = lf.grad(lambda q: linear_interp(da, "t", q).sum())(inside)
    np.testing.assert_allclose(dq.values, a)
    # the data: the weights, against central differences
    series = xr.DataArray(RNG.normal(size=t.size), dims="t", coords={"t": t})
    g = lf.grad(lambda d: (linear_interp(d, "t", inside) ** 2).sum())(series)
    loss = lambda values: float((linear_interp(series.copy(data=values), "t", inside) ** 2).sum())  # noqa: E731
    h, fd = 1e-6, np.zeros(t.size)
    for i in range(t.size):
        e = np.eye(t.size)[i] * h
        fd[i] = (loss(series.values + e) - loss(series.values - e)) / (2 * h)
    np.testing.assert_allclose(g.values, fd, rtol=1e-6, atol=1e-8)
    # vmap over examples of the data, then of the locations: the loop
    batch = xr.DataArray(RNG.normal(size=(3, t.size)), dims=("sample", "t"), coords={"t": t})
    got = lf.vmap(lambda d: linear_interp(d, "t", new), dim="sample")(batch)
    expected = np.stack([batch.isel(sample=i).interp(t=new).values for i in range(3)])
    np.testing.assert_allclose(got.transpose("sample", "q").values, expected, rtol=1e-14)
    locations = xr.DataArray(RNG.uniform(-0.5, 4.0, size=(3, 4)), dims=("sample", "q"))
    got = lf.vmap(lambda q: linear_interp(da, "t", q), dim="sample")(locations)
    expected = np.stack([da.interp(t=locations.isel(sample=i)).values for i in range(3)])
    np.testing.assert_allclose(got.transpose("sample", "q").values, expected, rtol=1e-14)


def test_dataarray_interp_goes_through_the_primitive():
    """xarray's interp reaches this primitive under the transforms (labeled_func/xarray_interp.py;
    its tests: tests/test_xarray_interp.py)."""
    da = xr.DataArray(np.arange(4.0) ** 2, dims="t", coords={"t": np.arange(4.0)})
    assert lf.grad(lambda d: d.interp(t=[0.5, 1.5]).sum())(da).values.tolist() == [0.5, 1.0, 0.5, 0.0]
