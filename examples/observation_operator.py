"""A differentiable observation operator: model field → stations, with xarray's `interp`.

    python examples/observation_operator.py

The model is a 2-D Gaussian plume on a (y, x) grid, `c = q exp(-r² / (2 w²))` around a
source, whose width `w` is the parameter to estimate.  The observation operator is
`field.interp(y=station_y, x=station_x)`: bilinear interpolation at the stations, whose
positions are DataArrays along the dim `station` (xarray then interpolates point by
point).  The loss compares the interpolated field with the observations.

`lf.grad` differentiates the loss with respect to the width and to the station
positions (where moving a station would change the misfit); `lf.vmap` maps the whole
observation operator over an ensemble of widths.  Oracles: central differences of the
same loss for every derivative, and xarray's own `interp` (SciPy) for every value.
"""

import numpy as np
import xarray as xr

import labeled_func as lf

Y = np.linspace(0.0, 8.0, 33)
X = np.linspace(0.0, 12.0, 49)
SOURCE = (3.0, 2.5)  # (y, x)
STRENGTH = 5.0
TRUE_WIDTH = 1.6


def plume(width: xr.DataArray) -> xr.DataArray:
    """The model field on the grid, for one width (a 0-d DataArray, the parameter)."""
    y = xr.DataArray(Y, dims="y", coords={"y": Y}, attrs={"units": "km"})
    x = xr.DataArray(X, dims="x", coords={"x": X}, attrs={"units": "km"})
    r2 = (y - SOURCE[0]) ** 2 + (x - SOURCE[1]) ** 2
    return (STRENGTH * np.exp(-r2 / (2 * width**2))).rename("concentration")


def observe(field: xr.DataArray, station_y: xr.DataArray, station_x: xr.DataArray) -> xr.DataArray:
    """The observation operator: the field at the stations (bilinear), dims ("station",).

    xarray attaches the station positions as coordinates y and x of the result; they are
    dropped here, so that the observations (made at other positions, or traced ones)
    combine with it without comparing coordinates."""
    return field.interp(y=station_y, x=station_x).drop_vars(["y", "x"])


def loss(width, station_y, station_x, observations):
    misfit = observe(plume(width), station_y, station_x) - observations
    return 0.5 * (misfit**2).sum("station")


def central(f, value: xr.DataArray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of the scalar f at value, element by element."""
    out = np.zeros(value.shape)
    for i in np.ndindex(*value.shape):
        up, down = value.copy(), value.copy()
        up.values[i] += eps
        down.values[i] -= eps
        out[i] = (float(f(up)) - float(f(down))) / (2 * eps)
    return out


def main() -> None:
    rng = np.random.default_rng(0)
    names = [f"S{i}" for i in range(6)]
    station_y = xr.DataArray(rng.uniform(1.0, 6.0, 6), dims="station", coords={"station": names})
    station_x = xr.DataArray(rng.uniform(1.0, 9.0, 6), dims="station", coords={"station": names})
    truth = observe(plume(xr.DataArray(TRUE_WIDTH)), station_y, station_x)
    observations = truth + 0.01 * rng.normal(size=truth.shape)
    width = xr.DataArray(1.2)

    # values: the operator is xarray's interp (SciPy's interpn outside transforms)
    value = loss(width, station_y, station_x, observations)
    traced = lf.jit(loss)(width, station_y, station_x, observations)
    np.testing.assert_allclose(float(traced), float(value), rtol=1e-12)

    # gradient with respect to the parameter and to the station positions, at once
    g_width, g_y, g_x = lf.grad(loss, argnums=(0, 1, 2))(width, station_y, station_x, observations)
    fd_width = central(lambda w: loss(w, station_y, station_x, observations), width)
    fd_y = central(lambda sy: loss(width, sy, station_x, observations), station_y)
    fd_x = central(lambda sx: loss(width, station_y, sx, observations), station_x)
    np.testing.assert_allclose(float(g_width), float(fd_width), rtol=1e-6)
    np.testing.assert_allclose(g_y.values, fd_y, rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(g_x.values, fd_x, rtol=1e-5, atol=1e-9)
    assert g_y.dims == ("station",) and list(g_y.station.values) == names

    # the observation operator over an ensemble of widths, against a loop
    widths = xr.DataArray(np.linspace(1.0, 2.2, 5), dims="member")
    ensemble = lf.vmap(lambda w: observe(plume(w), station_y, station_x), dim="member")(widths)
    looped = xr.concat([observe(plume(widths.isel(member=i)), station_y, station_x) for i in range(5)], "member")
    np.testing.assert_allclose(ensemble.transpose("member", "station").values, looped.values, rtol=1e-12)

    # gradient descent on the width (jit-compiled gradient) recovers it
    step = lf.jit(lf.grad(loss))
    estimate = width
    for _ in range(100):
        estimate = estimate - 0.05 * step(estimate, station_y, station_x, observations)
    assert abs(float(estimate) - TRUE_WIDTH) < 0.02, float(estimate)

    print(f"loss at width {float(width):.2f}: {float(value):.6f}")
    print(f"d loss / d width       = {float(g_width): .6f}   (central differences {float(fd_width): .6f})")
    print("d loss / d station position (lf.grad; central differences agree to 1e-5):")
    for name, dy, dx in zip(names, g_y.values, g_x.values):
        print(f"  {name}: d/dy = {dy: .6f}   d/dx = {dx: .6f}")
    print(f"ensemble of {widths.sizes['member']} widths at {len(names)} stations: "
          f"dims {ensemble.dims}, equal to the loop")
    print(f"width estimated by gradient descent: {float(estimate):.4f} (true {TRUE_WIDTH})")


if __name__ == "__main__":
    main()
