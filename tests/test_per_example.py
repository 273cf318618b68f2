"""``lf.per_example``: functions on concrete values, once per example, against the plain loop."""
import threading

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

scipy_stats = pytest.importorskip("scipy.stats")
norm = scipy_stats.norm


def _cdf_fun(x):
    return xr.apply_ufunc(norm.cdf, x)


def make_cdf(jvp=True, vjp=True, workers=None):
    cdf = lf.per_example(_cdf_fun, workers=workers)
    if jvp:
        @cdf.defjvp
        def _(primals, tangents):
            (x,), (t,) = primals, tangents
            assert isinstance(x, xr.DataArray) and isinstance(x.data, np.ndarray)
            return _cdf_fun(x), t * norm.pdf(x)
    if vjp:
        @cdf.defvjp
        def _(primals, out, g):
            (x,) = primals
            assert isinstance(x.data, np.ndarray) and isinstance(g.data, np.ndarray)
            return (g * norm.pdf(x),)
    return cdf


@pytest.fixture
def x():
    return xr.DataArray(np.linspace(-2.0, 2.0, 7), dims="sample", coords={"sample": np.arange(7) * 10})


@pytest.fixture
def x2():
    rng = np.random.default_rng(0)
    return xr.DataArray(rng.normal(size=(3, 4, 2)), dims=("a", "b", "t"), coords={"a": [1, 2, 3]})


def test_outside_transforms_just_calls(x):
    seen = []
    f = lf.per_example(lambda v: seen.append(type(v)) or v + 1)
    xr.testing.assert_identical(f(x), x + 1)
    assert seen == [xr.DataArray]


def test_vmap_scipy_equals_loop(x):
    out = lf.vmap(make_cdf(), dim="sample")(x)
    xr.testing.assert_allclose(out, xr.apply_ufunc(norm.cdf, x))
    assert out.dims == ("sample",) and (out.sample == x.sample).all()


def test_float_and_control_flow(x):
    def step(v):
        value = float(v)  # a concrete value: float() and `if` work
        if value > 0:
            return v * value
        return v * 0.0
    out = lf.vmap(lf.per_example(step), dim="sample")(x)
    expected = [v * v if v > 0 else 0.0 for v in x.values]
    np.testing.assert_allclose(out.values, expected)


def test_np_asarray_and_plain_arrays(x2):
    def quantiles(v):  # np.asarray and a NumPy-only function on one example (dims b, t)
        a = np.asarray(v)
        assert type(a) is np.ndarray and a.shape == (4, 2)
        return xr.DataArray(np.sort(a[:, 0] - a[:, 1]), dims="b")
    out = lf.vmap(lf.per_example(quantiles), dim="a")(x2)
    expected = np.stack([np.sort(x2.values[i, :, 0] - x2.values[i, :, 1]) for i in range(3)])
    np.testing.assert_allclose(out.transpose("a", "b").values, expected)
    # bare NumPy arrays in, bare arrays out
    f = lf.vmap(lf.per_example(lambda a: np.asarray(np.linalg.norm(a))), in_dims=(0,))
    np.testing.assert_allclose(f(x2.values), [np.linalg.norm(x2.values[i]) for i in range(3)])


def test_nested_vmap_two_dims(x2):
    calls = []

    def f(v):
        calls.append(v.dims)
        return xr.apply_ufunc(norm.cdf, v).sum("t")
    out = lf.vmap(lf.per_example(f), dim=("a", "b"))(x2)
    assert calls == [("t",)] * 12
    xr.testing.assert_allclose(out, xr.apply_ufunc(norm.cdf, x2).sum("t").transpose("a", "b"))


def test_shared_argument(x):
    f = lf.per_example(lambda v, scale: v * float(scale))
    out = lf.vmap(f, in_dims=("sample", None))(x, xr.DataArray(3.0))
    xr.testing.assert_allclose(out, x * 3.0)


def test_vmap_grad_with_vjp_rule(x):
    grads = lf.vmap(lf.grad(make_cdf(jvp=False)), dim="sample")(x)
    np.testing.assert_allclose(grads.values, norm.pdf(x.values))
    total = lf.grad(lambda v: make_cdf(jvp=False)(v).sum())(x)
    np.testing.assert_allclose(total.values, norm.pdf(x.values))
    # grad outside vmap, and jacrev over the mapped function
    jac = lf.jacrev(lf.vmap(make_cdf(jvp=False), dim="sample"))(x)
    np.testing.assert_allclose(jac.values, np.diag(norm.pdf(x.values)))


def test_jvp_with_jvp_rule(x):
    tangent = xr.full_like(x, 0.5)
    out, jvp_out = lf.jvp(make_cdf(vjp=False), (x,), (tangent,))
    np.testing.assert_allclose(out.values, norm.cdf(x.values))
    np.testing.assert_allclose(jvp_out.values, 0.5 * norm.pdf(x.values))
    mapped = lf.vmap(lambda v: lf.jvp(make_cdf(vjp=False), (v,), (xr.ones_like(v),))[1], dim="sample")(x)
    np.testing.assert_allclose(mapped.values, norm.pdf(x.values))
    jac = lf.jacfwd(lf.vmap(make_cdf(vjp=False), dim="sample"))(x)
    np.testing.assert_allclose(jac.values, np.diag(norm.pdf(x.values)))


def test_two_arguments_rules():
    def fun(a, b):
        return a * float(b)  # b is a 0-d example value

    def vjp(primals, out, g):
        a, b = primals
        return g * float(b), (g * a).sum()

    def jvp(primals, tangents):
        (a, b), (ta, tb) = primals, tangents
        return fun(a, b), ta * float(b) + a * tb

    f = lf.per_example(fun, vjp=vjp, jvp=jvp)
    a = xr.DataArray(np.arange(6.0).reshape(3, 2), dims=("sample", "k"))
    b = xr.DataArray([1.0, 2.0, 3.0], dims="sample")
    loss = lambda a, b: f(a, b).sum()
    ga, gb = lf.vmap(lf.grad(loss, argnums=(0, 1)), dim="sample")(a, b)
    np.testing.assert_allclose(ga.transpose("sample", "k").values, np.broadcast_to(b.values[:, None], (3, 2)))
    np.testing.assert_allclose(gb.values, a.sum("k").values)
    _, t = lf.jvp(lf.vmap(f, dim="sample"), (a, b), (xr.ones_like(a), xr.zeros_like(b)))
    np.testing.assert_allclose(t.transpose("sample", "k").values, np.broadcast_to(b.values[:, None], (3, 2)))


def test_missing_rule_raises(x):
    bare = lf.per_example(_cdf_fun)
    with pytest.raises(lf.UnsupportedOperationError, match=r"_cdf_fun.*vjp=.*jvp="):
        lf.grad(bare)(x[0])
    with pytest.raises(lf.UnsupportedOperationError, match="vjp="):
        lf.vmap(lf.grad(bare), dim="sample")(x)
    with pytest.raises(lf.UnsupportedOperationError, match="jvp="):
        lf.jvp(make_cdf(jvp=False), (x,), (x,))
    with pytest.raises(lf.UnsupportedOperationError, match="vjp="):
        lf.grad(make_cdf(vjp=False))(x[0])
    with pytest.raises(lf.UnsupportedOperationError, match="cannot be differentiated"):
        lf.hessian(make_cdf())(x[0])
    assert issubclass(lf.UnsupportedOperationError, RuntimeError)


def test_shape_disagreement_names_the_example():
    bad = lf.per_example(lambda v: np.zeros(int(float(v))))
    n = xr.DataArray([2.0, 2.0, 3.0, 2.0], dims="sample")
    with pytest.raises(ValueError, match=r"example 2 .*3\..*\(3,\).*\(2,\)"):
        lf.vmap(bad, dim="sample")(n)


def test_workers_equal_sequential(x2):
    def f(v):
        return xr.apply_ufunc(norm.cdf, v) * float(v.sum())
    seq = lf.vmap(lf.per_example(f), dim=("a", "b"))(x2)
    par = lf.vmap(lf.per_example(f, workers=2), dim=("a", "b"))(x2)
    xr.testing.assert_identical(seq, par)
    threads = set()
    record = lf.per_example(lambda v: threads.add(threading.get_ident()) or v, workers=2)
    lf.vmap(record, dim="a")(x2)
    assert threading.get_ident() not in threads  # the examples ran in the pool
    # rules run in the pool too
    x = x2.isel(b=0, t=0, drop=True)
    grads = lf.vmap(lf.grad(make_cdf(workers=2)), dim="a")(x)
    np.testing.assert_allclose(grads.values, norm.pdf(x.values))
    bad = lf.per_example(lambda v: np.zeros(int(float(v))), workers=2)
    with pytest.raises(ValueError, match="example 1"):
        lf.vmap(bad, dim="sample")(xr.DataArray([2.0, 3.0], dims="sample"))


def test_jit_equals_function(x, x2):
    cdf = make_cdf()
    f = lf.vmap(cdf, dim="sample")
    jitted = lf.jit(f)
    for shift in (0.0, 1.0, -0.5):
        xr.testing.assert_allclose(jitted(x + shift), f(x + shift))
    g = lf.jit(lf.vmap(lf.per_example(lambda v: v * float(v.sum()), workers=2), dim="a"))
    for k in (1.0, 2.0):
        expected = np.stack([x2.values[i] * x2.values[i].sum() * k * k for i in range(3)])
        np.testing.assert_allclose(g(x2 * k).transpose("a", ...).values, expected)
    single = lf.jit(cdf)
    np.testing.assert_allclose(single(x).values, norm.cdf(x.values))
    np.testing.assert_allclose(single(x + 1).values, norm.cdf(x.values + 1))
    grad = lf.jit(lf.vmap(lf.grad(cdf), dim="sample"))
    np.testing.assert_allclose(grad(x + 1).values, norm.pdf(x.values + 1))


def test_options_and_repr():
    f = lf.per_example(_cdf_fun, workers=3)
    assert "per_example" in repr(f) and "_cdf_fun" in repr(f) and "workers=3" in repr(f)
    assert f.__name__ == "_cdf_fun"
    with pytest.raises(ValueError, match="workers"):
        lf.per_example(_cdf_fun, workers=0)
    with pytest.raises(TypeError, match="by position"):
        lf.vmap(lambda v: f(x=v), dim="sample")(xr.DataArray([1.0], dims="sample"))


def test_dataset_argument_and_dask_blocks():
    ds = xr.Dataset({"a": ("sample", np.arange(4.0)), "b": (("sample", "t"), np.ones((4, 2)))})
    f = lf.per_example(lambda d: d["a"] * float(d["b"].sum()))
    np.testing.assert_allclose(lf.vmap(f, dim="sample")(ds).values, [0.0, 2.0, 4.0, 6.0])
    pytest.importorskip("dask")
    x = xr.DataArray(np.linspace(-1, 1, 8), dims="sample")
    lazy = lf.vmap(lf.per_example(_cdf_fun, workers=2), dim="sample")(x.chunk(sample=4))
    assert lazy.chunks is not None
    np.testing.assert_allclose(lazy.compute().values, norm.cdf(x.values))
