"""interp(method="cubic") along one dimension under every transform (labeled_func/xarray_interp.py
``_cubic_last``): against xarray's own cubic interp (SciPy's interp1d: a not-a-knot spline) per
example, central differences in the data and in the query points, and the un-jitted call."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from test_xarray_interp import INSIDE, STATIONS, central, field, grid2d

RTOL = 1e-12


def _loop(f, data, dim="d0"):
    return xr.concat([f(data.isel({dim: i})) for i in range(data.sizes[dim])], dim=dim)


@pytest.mark.parametrize("kwargs", [{}, {"fill_value": -1.5}, {"fill_value": (-1.0, 2.0)},
                                    {"fill_value": "extrapolate"}])
def test_vmap_over_the_data_is_xarrays_cubic(kwargs):
    data = field(4)

    def f(x):
        return x.interp(t=STATIONS, method="cubic", kwargs=kwargs)

    out = lf.vmap(f, dim="d0")(data)
    expected = _loop(f, data)
    np.testing.assert_allclose(out.transpose(*expected.dims).values, expected.values, rtol=RTOL, atol=1e-13)
    assert np.isnan(out.values).any() == (kwargs == {})          # NaN outside the grid by default, as xarray


def test_query_points_per_example_are_the_loop():
    data = field(3)
    q = xr.DataArray(RNG_POINTS, dims=("d0", "q"))

    def f(x, p):
        return x.interp(t=p, method="cubic").drop_vars("t")

    out = lf.vmap(f, dim="d0")(data, q)
    expected = xr.concat([f(data.isel(d0=i), q.isel(d0=i)) for i in range(3)], dim="d0")
    np.testing.assert_allclose(out.transpose(*expected.dims).values, expected.values, rtol=RTOL, atol=1e-13)


RNG_POINTS = np.array([[0.2, 1.1, 3.3], [0.9, 2.2, 4.0], [0.05, 2.5, 3.9]])


def test_grad_in_the_data_and_in_the_points_is_central_differences():
    data = field(n=8)
    weights = xr.DataArray([1.0, -2.0, 0.5, 3.0], dims="q")

    def loss(x, q):
        return (x.interp(t=q, method="cubic").drop_vars("t") * weights).sum()

    grad_x, grad_q = lf.grad(loss, argnums=(0, 1))(data, INSIDE)
    np.testing.assert_allclose(grad_x.values, central(lambda x: loss(x, INSIDE), data), atol=1e-8)
    np.testing.assert_allclose(grad_q.values, central(lambda q: loss(data, q), INSIDE), atol=1e-7)
    # the derivative in the data is the spline's weights: the data's coefficients sum to 1 per point
    ones = lf.grad(lambda x: x.interp(t=INSIDE[:1], method="cubic").sum())(data)
    np.testing.assert_allclose(float(ones.sum()), 1.0, rtol=1e-12)


def test_jvp_and_jit_are_the_function():
    data = field(3)

    def f(x):
        return x.interp(t=STATIONS, method="cubic")

    tangent = data * 0.0 + 1.0                                   # a constant shift: the spline moves with it
    _, out = lf.jvp(f, (data,), (tangent,))
    expected = xr.where(f(data).isnull(), 0.0, 1.0)             # the fill outside the grid is a constant
    np.testing.assert_allclose(out.transpose(*expected.dims).values, expected.values, rtol=1e-12)
    jitted = lf.jit(lf.vmap(f, dim="d0"))
    jitted(data)
    other = data * 2.0 - 1.0
    np.testing.assert_allclose(jitted(other).values, lf.vmap(f, dim="d0")(other).values, rtol=1e-13)
    assert jitted.traces == 1


def test_cubic_refusals_name_the_reason():
    two = grid2d(2)
    with pytest.raises(lf.UnsupportedOperationError, match="method='cubic' along several dimensions"):
        lf.vmap(lambda x: x.interp(lat=[1.5, 2.0], lon=[0.0, 1.0], method="cubic"), dim="d0")(two)
    short = field(2, n=3)
    with pytest.raises(lf.UnsupportedOperationError, match="3 knots"):
        lf.vmap(lambda x: x.interp(t=[0.5], method="cubic"), dim="d0")(short)
