"""Sensitivity of a heat-equation solution to the diffusivity κ, by forward and reverse mode.

    python examples/heat_equation.py      # writes examples/output/heat_equation.png

u_t = κ u_xx on 0 ≤ x ≤ 1 with u = 0 at both ends and u(x, 0) = sin(πx), solved with
the explicit scheme uⁿ⁺¹ = uⁿ + κΔt/Δx² (uⁿ(x+Δx) − 2uⁿ(x) + uⁿ(x−Δx)) written in plain
xarray (`roll` along the named dim `x`).  sin(πx) is an eigenvector of the discrete
Laplacian with eigenvalue −λ, λ = (4/Δx²) sin²(πΔx/2), so the scheme has the discrete
closed form

    uⁿ = gⁿ sin(πx),   g = 1 − κΔtλ,   ∂uⁿ/∂κ = −nΔtλ gⁿ⁻¹ sin(πx),

the oracle for three ways of differentiating the solver:

- `lf.jacfwd(solve)(kappa)`: the whole trajectory's ∂u/∂κ, dims (time, x);
- `lf.jvp(solve, (kappa,), (1,))`: the same as one directional derivative;
- `lf.grad` of a scalar (the heat left at the final time, Σ u Δx) by reverse mode.
"""

from pathlib import Path

import numpy as np
import xarray as xr

import labeled_func as lf

N_POINTS = 41
DX = 1.0 / (N_POINTS - 1)
KAPPA = 1.0
DT = 0.4 * DX**2 / KAPPA  # explicit scheme: stable for κΔt/Δx² ≤ 1/2
N_STEPS = 200
SAVE_EVERY = 40
OUTPUT = Path(__file__).resolve().parent / "output" / "heat_equation.png"

X = xr.DataArray(np.linspace(0.0, 1.0, N_POINTS), dims="x", attrs={"units": "m"})
X = X.assign_coords(x=X)
INTERIOR = xr.DataArray(np.r_[0.0, np.ones(N_POINTS - 2), 0.0], dims="x", coords={"x": X.x})


def solve(kappa: xr.DataArray) -> xr.DataArray:
    """The explicit scheme from sin(πx); the solution every SAVE_EVERY steps, dims (time, x)."""
    u = np.sin(np.pi * X)
    courant = kappa * DT / DX**2
    snapshots = [u]
    for step in range(1, N_STEPS + 1):
        # The boundary values stay 0: INTERIOR masks the update there (and roll's wrap-around).
        u = u + INTERIOR * courant * (u.roll(x=1) + u.roll(x=-1) - 2 * u)
        if step % SAVE_EVERY == 0:
            snapshots.append(u)
    steps = np.arange(0, N_STEPS + 1, SAVE_EVERY)
    return xr.concat(snapshots, dim="time").assign_coords(time=("time", steps * DT, {"units": "s"}))


def heat_left(kappa: xr.DataArray) -> xr.DataArray:
    """Σ u Δx at the final time: a scalar, for `lf.grad`."""
    return solve(kappa).isel(time=-1).sum("x") * DX


def closed_form(kappa: float) -> tuple[xr.DataArray, xr.DataArray]:
    """(uⁿ, ∂uⁿ/∂κ) of the discrete scheme at the saved times, dims (time, x)."""
    eigenvalue = 4 / DX**2 * np.sin(np.pi * DX / 2) ** 2
    growth = 1 - kappa * DT * eigenvalue
    n = xr.DataArray(np.arange(0, N_STEPS + 1, SAVE_EVERY), dims="time")
    mode = np.sin(np.pi * X)
    return growth**n * mode, -n * DT * eigenvalue * growth ** (n - 1) * mode


def main() -> None:
    kappa = xr.DataArray(KAPPA, attrs={"units": "m2 s-1"})
    u_exact, du_exact = closed_form(KAPPA)

    u = solve(kappa)
    jacobian = lf.jacfwd(solve)(kappa)
    _, tangent = lf.jvp(solve, (kappa,), (xr.ones_like(kappa),))
    gradient = lf.grad(heat_left)(kappa)

    assert jacobian.dims == ("time", "x")
    np.testing.assert_allclose(u, u_exact.transpose(*u.dims), atol=1e-13)
    np.testing.assert_allclose(jacobian, du_exact.transpose(*jacobian.dims), atol=1e-12)
    np.testing.assert_allclose(tangent, jacobian, atol=1e-14)
    grad_exact = float(du_exact.isel(time=-1).sum("x") * DX)
    np.testing.assert_allclose(float(gradient), grad_exact, rtol=1e-12)

    figure = plot(u, jacobian, du_exact)
    print(f"Heat equation, {N_POINTS} points, {N_STEPS} explicit steps of {DT:.2e} s, kappa = {KAPPA}")
    print(f"  du/dkappa by jacfwd: dims {jacobian.dims}; max |jacfwd - closed form| "
          f"{float(abs(jacobian - du_exact).max()):.1e}")
    print(f"  du/dkappa by jvp:    max |jvp - jacfwd| {float(abs(tangent - jacobian).max()):.1e}")
    print(f"  d(heat left)/dkappa by grad: {float(gradient):.6f} (closed form {grad_exact:.6f})")
    print(f"  figure: {figure}" if figure else "  figure: skipped (matplotlib is not installed)")


def plot(u: xr.DataArray, jacobian: xr.DataArray, du_exact: xr.DataArray) -> Path | None:
    """u(x) and ∂u/∂κ(x) at the saved times: AD as markers, the closed form as lines."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    colors = plt.cm.viridis(np.linspace(0, 0.9, u.sizes["time"]))
    for i, color in enumerate(colors):
        label = f"t = {float(u.time[i]):.3f} s"
        left.plot(X, u.isel(time=i), color=color, label=label)
        right.plot(X, du_exact.isel(time=i), color=color, label=label)
        right.plot(X[::2], jacobian.isel(time=i)[::2], "o", color=color, markersize=3)
    left.set(title="solution u(x, t)", xlabel="x (m)", ylabel="u")
    right.set(title="∂u/∂κ: lf.jacfwd (dots), closed form (lines)", xlabel="x (m)", ylabel="∂u/∂κ (s/m²)")
    left.legend(fontsize="small")
    OUTPUT.parent.mkdir(exist_ok=True)
    fig.savefig(OUTPUT, dpi=100)
    plt.close(fig)
    return OUTPUT


if __name__ == "__main__":
    main()
