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
