"""ndarray methods on traced arrays (``x.data.diagonal()``, ``DataArray.argsort()``, ...)
against the same method on each example with plain NumPy, and their derivatives against
central finite differences."""
import numpy as np
import pytest
import xarray as xr
from ad_helpers import check_jvp, check_vjp

import labeled_func as lf

RNG = np.random.default_rng(7)
MATRICES = RNG.normal(size=(3, 4, 4))
ROWS = RNG.normal(size=(3, 6))

METHODS = {
    "diagonal": (lambda a: a.diagonal(), MATRICES),
    "diagonal_offset": (lambda a: a.diagonal(1), MATRICES),
    "trace": (lambda a: a.trace(), MATRICES),
    "repeat": (lambda a: a.repeat(2), ROWS),
    "take": (lambda a: a.take([4, 0, 0]), ROWS),
    "argsort": (lambda a: a.argsort(), ROWS),
    "searchsorted": (lambda a: np.sort(a).searchsorted(0.0), ROWS),
    "sort_in_place": (lambda a: _sorted_copy(a), ROWS),
}
DIFFERENTIABLE = ["diagonal", "diagonal_offset", "trace", "repeat", "take", "sort_in_place"]


def _sorted_copy(a):
    b = a.copy()
    b.sort()
    return b * 1.0


@pytest.mark.parametrize("name", sorted(METHODS))
def test_method_under_vmap_equals_the_loop(name):
    method, batch = METHODS[name]
    expected = np.stack([method(example) for example in batch])
    np.testing.assert_array_equal(lf.vmap(method, in_dims=(0,))(batch), expected)


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_method_derivatives(name):
    method, batch = METHODS[name]
    rng = np.random.default_rng(0)
    check_jvp(method, [batch[0]], rng)
    check_vjp(method, [batch[0]], rng)


def test_dataarray_argsort_and_in_place_sort_under_vmap():
    x = xr.DataArray(ROWS, dims=("sample", "t"))
    order = lf.vmap(lambda v: v.argsort(), dim="sample")(x)
    np.testing.assert_array_equal(order.values, np.argsort(ROWS, axis=1))

    def sorted_values(v):
        data = v.data.copy()
        data.sort()
        return v.copy(data=data)

    np.testing.assert_array_equal(lf.vmap(sorted_values, dim="sample")(x).values, np.sort(ROWS, axis=1))
    grad = lf.grad(lambda v: (sorted_values(v) * xr.DataArray(np.arange(6.0), dims="t")).sum())(x[0])
    np.testing.assert_array_equal(grad.values, np.argsort(np.argsort(ROWS[0])).astype(float))


def test_view_writes_through_like_numpy_under_grad_and_vmap():
    def f(x):
        a = x.data.copy()
        v = a.view()
        v *= 3.0  # NumPy: a sees it
        return xr.DataArray((a ** 2).sum())

    x = xr.DataArray([1.0, -2.0, 0.5], dims="t")
    gradient, value = lf.grad_and_value(f)(x)
    np.testing.assert_allclose(value.item(), float(f(x)))
    np.testing.assert_allclose(gradient.values, 18 * x.values)  # d/dx of 9 x²
    batch = xr.DataArray([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]], dims=("s", "t"))
    np.testing.assert_allclose(lf.vmap(f, dim="s")(batch).values, [float(f(batch[i])) for i in range(2)])
    with pytest.raises(lf.UnsupportedOperationError, match="astype"):
        lf.grad(lambda x: xr.DataArray(x.data.view(np.int64).sum() * 1.0))(x)


IN_PLACE = {
    "flat": lambda a: a.flat.__setitem__([0, 4], -1.0),
    "put": lambda a: a.put([1, 5], [7.0, 8.0]),
    "partition": lambda a: a.partition(2),
    "sort": lambda a: a.sort(),
}


@pytest.mark.parametrize("name", sorted(IN_PLACE))
def test_in_place_methods_write_through_to_the_mapped_input_like_the_loop(name):
    """``x.flat[i] = v``, ``x.put``, ``x.partition``, ``x.sort`` on a mapped input: the caller's
    array changes as the for-loop over its rows changes it."""
    method = IN_PLACE[name]

    def f(a):
        method(a)
        return a * 1.0

    mapped, looped = ROWS.copy(), ROWS.copy()
    out = lf.vmap(f, in_dims=(0,))(mapped)
    np.testing.assert_array_equal(out, np.stack([f(row) for row in looped]))
    np.testing.assert_array_equal(mapped, looped)


@pytest.mark.parametrize("write", ["flat", "setitem"])
def test_writing_x_flat_follows_the_in_place_policy_of_setitem(write):
    """Inside vmap, a value lf.grad traces written into an array it does not trace: the derivative
    would be lost, so x.flat[i] = v raises InplaceError as x[i] = v does, naming what was written."""

    def per_example(y):
        def inner(x):
            z = y * 1.0
            if write == "flat":
                z.flat[0] = x
            else:
                z[0] = x
            return z.sum()

        return lf.grad(inner)(np.array(2.0))

    operation = r"x\.flat\[\.\.\.\] = value" if write == "flat" else r"x\[\.\.\.\] = value"
    with pytest.raises(lf.InplaceError, match=operation + ": a value traced by lf.grad"):
        lf.vmap(per_example, in_dims=(0,))(ROWS)


def test_writing_x_flat_of_a_differentiated_array_differentiates():
    """x.flat[k] = v under grad: the derivative flows to v and not to the overwritten x[k]; NumPy
    repeats a short value over the selection."""

    def f(x, v):
        z = x * 1.0
        z.flat[[0, 3, 4, 5]] = v * v  # v has two elements: repeated
        return (z * np.arange(1.0, 7.0).reshape(2, 3)).sum()

    x, v = ROWS[0].reshape(2, 3), np.array([0.5, -1.5])
    gx, gv = lf.grad(f, argnums=(0, 1))(x, v)
    np.testing.assert_array_equal(gx, [[0.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(gv, [2 * v[0] * (1 + 5), 2 * v[1] * (4 + 6)])
