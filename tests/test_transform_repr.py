"""A transformed function shows the transform and its arguments (issue 28, item 8):
``lf.vmap(f, dim="sample")`` is ``lf.vmap(f, dim='sample')``, not ``<function f ...>``,
nested transforms nest, and only the options that differ from their defaults are shown,
as ``functools.partial`` shows its arguments.  It still is ``f`` for ``__name__``,
``__doc__``, ``__wrapped__`` and ``inspect.signature``, binds as a method, and goes to a
Dask worker through cloudpickle."""
import inspect

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf


def loss(x, k=2.0):
    """The loss."""
    return (k * x ** 2).sum()


def per_example(x):
    return x.sum("t")


@pytest.mark.parametrize(("make", "expected"), [
    (lambda: lf.vmap(per_example, dim="sample"), "lf.vmap(per_example, dim='sample')"),
    (lambda: lf.vmap(per_example, dim=("a", "b")), "lf.vmap(per_example, dim=('a', 'b'))"),
    (lambda: lf.vmap(per_example, dim="s", out_dims=0, randomness="error", chunk_size=None),
     "lf.vmap(per_example, dim='s')"),
    (lambda: lf.vmap(per_example, dim="s", randomness="same", chunk_size=4, allow_rechunk=False),
     "lf.vmap(per_example, dim='s', randomness='same', chunk_size=4, allow_rechunk=False)"),
    (lambda: lf.vmap(per_example, in_dims=(0, None)), "lf.vmap(per_example, in_dims=(0, None))"),
    (lambda: lf.grad(loss), "lf.grad(loss)"),
    (lambda: lf.grad(loss, argnums=(0, 1), has_aux=True), "lf.grad(loss, argnums=(0, 1), has_aux=True)"),
    (lambda: lf.grad_and_value(loss), "lf.grad_and_value(loss)"),
    (lambda: lf.jacrev(loss, chunk_size=2), "lf.jacrev(loss, chunk_size=2)"),
    (lambda: lf.jacfwd(loss, wrt_suffix="_in"), "lf.jacfwd(loss, wrt_suffix='_in')"),
    (lambda: lf.hessian(loss), "lf.hessian(loss)"),
    (lambda: lf.hessian(loss, argnums=1), "lf.hessian(loss, argnums=1)"),
    (lambda: lf.hessian(loss, as_matrix=True), "lf.hessian(loss, as_matrix=True)"),
    (lambda: lf.checkpoint(loss), "lf.checkpoint(loss)"),
    (lambda: lf.jit(loss), "lf.jit(loss)"),
    (lambda: lf.jit(loss, static_argnames="k"), "lf.jit(loss, static_argnames=('k',))"),
    (lambda: lf.vmap(np.sin, dim="s"), "lf.vmap(np.sin, dim='s')"),
    (lambda: lf.grad(lambda x: x.sum()), "lf.grad(<lambda>)"),
])
def test_each_transform_shows_its_call(make, expected):
    assert repr(make()) == expected


def test_nested_transforms_nest():
    f = lf.jit(lf.vmap(lf.grad(loss, argnums=1), dim="sample"))
    assert repr(f) == "lf.jit(lf.vmap(lf.grad(loss, argnums=1), dim='sample'))"
    assert repr(lf.grad(lf.vmap(loss, dim="sample"), argnums=1)) == "lf.grad(lf.vmap(loss, dim='sample'), argnums=1)"
    assert str(lf.jacfwd(lf.jacrev(loss))) == "lf.jacfwd(lf.jacrev(loss))"


def test_custom_rules_show_their_function():
    @lf.custom_jvp
    def smooth(x):
        return x

    @lf.custom_vjp
    def clipped(x):
        return x

    assert repr(smooth) == "lf.custom_jvp(smooth)"
    assert repr(lf.grad(clipped)) == "lf.grad(lf.custom_vjp(clipped))"


def test_a_local_function_and_a_method_show_their_own_names():
    def inner(x):
        return x

    class Model:
        def loss(self, x):
            return (x ** 2).sum()

    assert repr(lf.grad(inner)) == "lf.grad(inner)"
    assert repr(lf.grad(Model().loss)) == "lf.grad(Model.loss)"


@pytest.mark.parametrize("transform", [
    lambda f: lf.vmap(f, dim="sample"), lf.grad, lf.grad_and_value, lf.jacrev, lf.jacfwd, lf.hessian,
    lambda f: lf.hessian(f, as_matrix=True), lf.checkpoint, lf.jit,
])
def test_the_function_is_still_named_documented_and_signed_as_itself(transform):
    f = transform(loss)
    assert f.__name__ == "loss"
    assert f.__doc__ == "The loss."
    assert f.__module__ == __name__
    assert inspect.unwrap(f) is loss
    assert inspect.signature(f) == inspect.signature(loss)
    assert inspect.signature(lf.vmap(f, dim="sample")) == inspect.signature(loss)


def test_a_transformed_function_is_a_method_on_a_class():
    class Model:
        gradient = lf.grad(lambda self, x: (self.scale * x ** 2).sum(), argnums=1)
        scale = 3.0

    x = xr.DataArray([1.0, 2.0], dims="t")
    np.testing.assert_array_equal(Model().gradient(x).values, [6.0, 12.0])
    assert list(inspect.signature(Model().gradient).parameters) == ["x"]
    assert Model.gradient is Model.__dict__["gradient"]


def test_a_transformed_lambda_round_trips_through_cloudpickle():
    cloudpickle = pytest.importorskip("cloudpickle")
    offset = 1.0
    f = lf.vmap(lf.grad(lambda v: ((v + offset) ** 2).sum()), dim="sample")
    x = xr.DataArray(np.arange(6.0).reshape(3, 2), dims=("sample", "t"))
    copy = cloudpickle.loads(cloudpickle.dumps(f))
    assert repr(copy) == repr(f) == "lf.vmap(lf.grad(<lambda>), dim='sample')"
    xr.testing.assert_identical(copy(x), f(x))
    xr.testing.assert_identical(copy(x), 2 * (x + offset))


def test_a_transformed_function_runs_on_dask_chunks():
    pytest.importorskip("dask")
    f = lf.vmap(lf.grad(lambda v: (v ** 2).sum()), dim="sample")
    x = xr.DataArray(np.arange(8.0).reshape(4, 2), dims=("sample", "t")).chunk(sample=2)
    lazy = f(x)
    assert lazy.chunks == ((2, 2), (2,))
    xr.testing.assert_identical(lazy.compute(), 2 * x.compute())
