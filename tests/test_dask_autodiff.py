"""AD transforms on Dask-backed inputs (API.md, "nothing computed eagerly on a lazy input").

NumPy arrays and Dask arrays of NumPy chunks are one family: a NumPy parameter meets
Dask data in the Dask namespace, and every transform's result stays lazy. Oracles:
the same transform on the ``.compute()``d inputs, derivatives worked out by hand, and
central finite differences. A counting scheduler proves that nothing runs while the
transform builds its result, and that the counter sees a real compute afterwards.
"""

import dask
import dask.array as da
import numpy as np
import optree
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func_kernels.backend import extra, namespace
from labeled_func.backends import check_one_backend

RNG = np.random.default_rng(11)
DATA = xr.DataArray(RNG.normal(size=(40, 3)), dims=("sample", "x"),
                    coords={"sample": np.arange(40), "x": ["a", "b", "c"]}, name="data")
LAZY = DATA.chunk(sample=10)
P = xr.DataArray([1.0, -2.0, 0.5], dims="x", coords={"x": ["a", "b", "c"]}, name="p")


class CountingScheduler:
    """A synchronous scheduler that counts the graphs it is asked to run."""

    def __init__(self):
        self.calls = 0

    def __call__(self, graph, keys, **kwargs):
        self.calls += 1
        return dask.get(graph, keys, **kwargs)


@pytest.fixture
def scheduler():
    counting = CountingScheduler()
    with dask.config.set(scheduler=counting):
        yield counting


def is_lazy(value):
    return isinstance(getattr(value, "data", value), da.Array)


def leaves(tree):
    return optree.tree_leaves(tree, none_is_leaf=True)


def computed(tree):
    return optree.tree_map(lambda v: v.compute() if hasattr(v, "compute") else v, tree, none_is_leaf=True)


def assert_same(lazy, eager):
    lazy, eager = leaves(computed(lazy)), leaves(eager)
    assert len(lazy) == len(eager)
    for a, b in zip(lazy, eager):
        if isinstance(b, (xr.DataArray, xr.Dataset)):
            xr.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
            assert a.dims == b.dims
        else:
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-12)


def loss(p, d):
    return ((d * p).sum("x") ** 2).mean("sample")


def model(p, d):
    return np.tanh(d * p).sum("x")


# --- every transform: lazy, nothing run, equal to in memory ---------------------------------------
TRANSFORMS = {
    "grad": lambda d: lf.grad(loss)(P, d),
    "grad_and_value": lambda d: lf.grad_and_value(loss)(P, d),
    "grad_wrt_data": lambda d: lf.grad(loss, argnums=1)(P, d),
    "grad_argnums_tuple": lambda d: lf.grad(loss, argnums=(0, 1))(P, d),
    "vjp": lambda d: lf.vjp(lambda p: model(p, d), P)[1](xr.ones_like(DATA.isel(x=0, drop=True))),
    "vjp_output": lambda d: lf.vjp(lambda p: model(p, d), P)[0],
    "jvp": lambda d: lf.jvp(lambda p: model(p, d), (P,), (xr.ones_like(P),)),
    "jacrev": lambda d: lf.jacrev(model)(P, d),
    "jacrev_chunk_size_1": lambda d: lf.jacrev(model, chunk_size=1)(P, d),
    "jacfwd": lambda d: lf.jacfwd(model)(P, d),
    "hessian": lambda d: lf.hessian(loss)(P, d),
    "linearize": lambda d: lf.linearize(lambda p: model(p, d), P)[1](xr.ones_like(P)),
    "accessor_grad": lambda d: P.func.grad(loss, args=(d,)),
    "accessor_jacrev": lambda d: P.func.jacrev(model, args=(d,)),
    "accessor_hessian": lambda d: P.func.hessian(loss, args=(d,)),
}


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_transform_of_lazy_data_is_lazy_and_equals_in_memory(name, scheduler):
    transform = TRANSFORMS[name]
    result = transform(LAZY)
    assert scheduler.calls == 0, f"{name} ran a dask graph while building its result"
    assert all(is_lazy(leaf) for leaf in leaves(result)), [type(getattr(v, "data", v)) for v in leaves(result)]
    expected = transform(DATA)
    before = scheduler.calls
    assert_same(result, expected)
    assert scheduler.calls > before  # the counter does see computes


def test_the_gradient_of_a_lazy_loss_wrt_in_memory_parameters(scheduler):
    gradient = lf.grad(loss)(P, LAZY)
    assert scheduler.calls == 0
    assert isinstance(gradient, xr.DataArray) and is_lazy(gradient)
    assert gradient.dims == ("x",) and gradient.name == "p"
    xr.testing.assert_identical(gradient.coords.to_dataset(), P.coords.to_dataset())
    d = DATA.values
    analytic = 2 * ((d @ P.values)[:, None] * d).mean(axis=0)  # d/dp mean((d.p)^2)
    np.testing.assert_allclose(gradient.values, analytic, rtol=1e-12)
    eager = lf.grad(loss)(P, DATA)  # chunked sums round differently: close, same labels
    xr.testing.assert_allclose(gradient.compute(), eager, rtol=1e-12)
    xr.testing.assert_identical(gradient.compute().copy(data=eager.values), eager)


def test_hessian_of_a_lazy_loss_matches_the_analytic_one(scheduler):
    hessian = lf.hessian(loss)(P, LAZY)
    assert scheduler.calls == 0 and is_lazy(hessian)
    assert hessian.dims == ("x", "x_wrt")
    d = DATA.values
    np.testing.assert_allclose(hessian.values, 2 * d.T @ d / len(d), rtol=1e-12)


def test_lazy_gradient_matches_central_differences():
    def f(p, d):
        return (np.log1p(np.exp(d * p)) * np.sin(p)).mean()

    gradient = lf.grad(f)(P, LAZY).compute()
    eps = 1e-6
    expected = []
    for k in range(P.size):
        step = np.zeros(P.size)
        step[k] = eps
        plus = float(f(P + step, DATA))
        minus = float(f(P - step, DATA))
        expected.append((plus - minus) / (2 * eps))
    np.testing.assert_allclose(gradient.values, expected, rtol=1e-7, atol=1e-9)


def test_python_float_parameter_with_lazy_data(scheduler):
    gradient = lf.grad(lambda s, d: ((d * s) ** 2).mean())(2.0, LAZY)
    jacobian = lf.jacrev(lambda s, d: (d * s).mean("x"))(2.0, LAZY)
    assert scheduler.calls == 0 and is_lazy(gradient) and is_lazy(jacobian)
    np.testing.assert_allclose(float(gradient), 2 * 2.0 * (DATA.values ** 2).mean(), rtol=1e-12)
    assert jacobian.dims == ("sample",)
    np.testing.assert_allclose(jacobian.values, DATA.values.mean(axis=1), rtol=1e-12)


def test_lazy_tangent_and_cotangent_for_in_memory_primals(scheduler):
    _, tangent = lf.jvp(lambda d: (d * P) ** 2, (DATA,), (LAZY,))
    (cotangent,) = lf.vjp(lambda p: DATA * p, P)[1](LAZY)
    assert scheduler.calls == 0 and is_lazy(tangent) and is_lazy(cotangent)
    np.testing.assert_allclose(tangent.values, 2 * (DATA.values * P.values) ** 2, rtol=1e-12)
    np.testing.assert_allclose(cotangent.values, (DATA.values ** 2).sum(axis=0), rtol=1e-12)


def test_dataset_with_lazy_and_in_memory_variables(scheduler):
    ds = xr.Dataset({"a": LAZY, "b": DATA * 2.0})
    gradient = lf.grad(lambda ds: (ds.a * ds.b).sum())(ds)
    assert scheduler.calls == 0 and is_lazy(gradient["a"])
    xr.testing.assert_allclose(gradient["a"].compute(), DATA * 2.0)
    xr.testing.assert_allclose(gradient["b"].compute(), DATA)


# --- operations whose rules write into arrays (scatter, set, take along an axis) ------------------
OPERATIONS = {
    "isel_list": lambda p, d: (d.isel(sample=[0, 3, 3, 7]) * p).sum() ** 2,
    "sel_labels": lambda p, d: (d.sel(x=["a", "c"]) * p.sel(x=["a", "c"]) ** 2).sum(),
    "median": lambda p, d: (d * p).median("x").sum(),
    "sort": lambda p, d: (xr.apply_ufunc(np.sort, d * p, input_core_dims=[["x"]], output_core_dims=[["x"]])
                          * xr.DataArray([1.0, 2.0, 3.0], dims="x")).sum(),
    "quantile": lambda p, d: (d * p).quantile(0.3, dim="x").sum(),
    "rolling": lambda p, d: ((d * p).rolling(sample=3).mean() ** 2).sum(),
    "shift": lambda p, d: (d * p).shift(sample=2).sum(),
    "expand_dims": lambda p, d: ((d * p).expand_dims("new") ** 2).sum(),
    "setitem": lambda p, d: _written(p, d),
    "where": lambda p, d: xr.where(d > 0, d * p, p ** 2).sum(),
    "dot": lambda p, d: (xr.dot(d, p, dim="x") ** 2).mean(),
}


def _written(p, d):
    y = (d * p).copy()
    y[0] = p ** 2
    return (y ** 2).sum()


@pytest.mark.parametrize("argnums", [0, 1], ids=["wrt_params", "wrt_data"])
@pytest.mark.parametrize("name", list(OPERATIONS))
def test_operations_under_grad_on_lazy_data(name, argnums, scheduler):
    # xr.dot with opt_einsum installed and Dask data first: see the test below
    with xr.set_options(use_opt_einsum=False):
        gradient = lf.grad(OPERATIONS[name], argnums=argnums)(P, LAZY)
    assert scheduler.calls == 0 and is_lazy(gradient)
    xr.testing.assert_allclose(gradient.compute(), lf.grad(OPERATIONS[name], argnums=argnums)(P, DATA),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["median", "isel_list", "setitem"])
def test_operations_under_jacfwd_and_hessian_on_lazy_data(name, scheduler):
    jacobian = lf.jacfwd(OPERATIONS[name])(P, LAZY)
    hessian = lf.hessian(OPERATIONS[name])(P, LAZY)
    assert scheduler.calls == 0 and is_lazy(jacobian) and is_lazy(hessian)
    xr.testing.assert_allclose(jacobian.compute(), lf.jacfwd(OPERATIONS[name])(P, DATA), rtol=1e-12, atol=1e-12)
    xr.testing.assert_allclose(hessian.compute(), lf.hessian(OPERATIONS[name])(P, DATA), rtol=1e-12, atol=1e-12)


def test_lazy_results_compute_on_the_threaded_scheduler():
    gradient = lf.grad(loss)(P, LAZY)
    xr.testing.assert_allclose(gradient.compute(scheduler="threads"), lf.grad(loss)(P, DATA), rtol=1e-12)


# --- the one-backend rule: NumPy and Dask are one family ------------------------------------------
def test_kernel_namespace_of_numpy_and_dask_is_dask_in_either_order():
    lazy, eager = da.ones(3, chunks=2), np.ones(3)
    assert namespace(lazy, eager).__name__ == "array_api_compat.dask.array"
    assert namespace(eager, lazy).__name__ == "array_api_compat.dask.array"
    assert namespace(eager, 2.0, lazy, eager).__name__ == "array_api_compat.dask.array"
    assert namespace(eager).__name__ == "array_api_compat.numpy"


def test_kernel_namespace_still_rejects_other_mixes():
    xps = pytest.importorskip("array_api_strict")
    for first, second in [(np.ones(3), xps.ones(3)), (da.ones(3), xps.ones(3)), (xps.ones(3), da.ones(3))]:
        with pytest.raises(TypeError, match="different libraries"):
            namespace(first, second)


def test_check_one_backend_accepts_dask_with_numpy_and_rejects_dask_with_array_api_strict():
    xps = pytest.importorskip("array_api_strict")
    check_one_backend([P, LAZY, {"w": np.ones(3)}], ["params", "data", "extra"])
    with pytest.raises(ValueError, match="data is numpy, .*w'\\] is array_api_strict"):
        check_one_backend([LAZY, {"w": xps.ones(3)}], ["data", "extra"], transform="grad")


@pytest.mark.parametrize("transform", ["grad", "jacrev", "jacfwd", "hessian", "vjp"])
def test_transform_of_dask_data_with_array_api_strict_params_is_a_value_error(transform):
    xps = pytest.importorskip("array_api_strict")
    params = xr.DataArray(xps.asarray([1.0, 2.0, 3.0]), dims="x")

    def f(params, data):
        return (data * params).sum()

    with pytest.raises(ValueError, match="params") as info:
        if transform == "vjp":
            lf.vjp(f, params, LAZY)
        else:
            getattr(lf, transform)(f)(params, LAZY)
    assert "data" in str(info.value) and "array_api_strict" in str(info.value) and "numpy" in str(info.value)


def test_transform_of_dask_data_with_cupy_params_is_a_value_error():
    cupy = pytest.importorskip("cupy")
    params = xr.DataArray(cupy.asarray([1.0, 2.0, 3.0]), dims="x")
    with pytest.raises(ValueError, match="cupy"):
        lf.grad(lambda params, data: (data * params).sum())(params, LAZY)


# --- take_along_axis where the library has none (Dask) ---------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_take_along_axis_fallback_on_dask_and_portable(axis):
    import array_api_compat.numpy as xnp

    from labeled_func_kernels.backend import _take_along_axis_fallback

    x = RNG.normal(size=(4, 5, 6))
    order = np.argsort(x, axis=axis)
    first = np.take(order, [0], axis=axis)
    for indices in (order, first):
        expected = np.take_along_axis(x, indices, axis)
        lazy = extra(namespace(da.ones(1)), "take_along_axis")(
            da.from_array(x, chunks=2), da.from_array(indices, chunks=3), axis=axis)
        assert isinstance(lazy, da.Array)
        np.testing.assert_array_equal(lazy.compute(), expected)
        np.testing.assert_array_equal(_take_along_axis_fallback(xnp)(x, indices, axis), expected)


@pytest.mark.parametrize("chunked", ["params", "data", "both"])
@pytest.mark.parametrize("second_order", ["hessian", "grad_of_grad", "jacfwd_of_jacrev"])
def test_second_order_with_dask_backed_arguments(scheduler, chunked, second_order):
    rng = np.random.default_rng(5)
    params = xr.DataArray(rng.normal(size=3), dims="x")
    data = xr.DataArray(rng.normal(size=(20, 3)), dims=("sample", "x"))

    def loss(p, d):
        return (np.tanh((d * p).sum("x")) ** 2).mean("sample")

    transform = {"hessian": lf.hessian(loss),
                 "grad_of_grad": lf.grad(lambda p, d: lf.grad(loss)(p, d).sum()),
                 "jacfwd_of_jacrev": lf.jacfwd(lf.jacrev(loss))}[second_order]
    p = params.chunk(x=2) if chunked in ("params", "both") else params
    d = data.chunk(sample=5) if chunked in ("data", "both") else data
    lazy = transform(p, d)
    assert scheduler.calls == 0 and is_lazy(lazy)
    assert_same(lazy, transform(params, data))


def test_xr_dot_through_opt_einsum_with_dask_first_says_how_to_avoid_it(scheduler):
    """With opt_einsum installed, xarray's dot hands every operand to the library of the first
    (Dask): the error says to put the traced argument first or turn opt_einsum off, and both
    work (against the in-memory gradient)."""
    pytest.importorskip("opt_einsum")
    loss = OPERATIONS["dot"]
    expected = lf.grad(loss)(P, DATA)
    with xr.set_options(use_opt_einsum=True):
        with pytest.raises(lf.ConversionError, match=r"opt_einsum(.|\n)*use_opt_einsum=False"):
            lf.grad(loss)(P, LAZY)
        swapped = lf.grad(lambda p, d: (xr.dot(p, d, dim="x") ** 2).mean())(P, LAZY)
    with xr.set_options(use_opt_einsum=False):
        off = lf.grad(loss)(P, LAZY)
    assert scheduler.calls == 0 and is_lazy(swapped) and is_lazy(off)
    xr.testing.assert_allclose(swapped.compute(), expected)
    xr.testing.assert_allclose(off.compute(), expected)
