"""Sensitivity of a heat-equation solution to the diffusivity κ, by forward and reverse mode.

    python examples/heat_equation.py      # writes its figures into examples/output/
    python examples/heat_equation.py --figures DIR

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

A fourth derivative is a whole matrix: `lf.jacrev` of the state after KERNEL_STEPS
steps with respect to the initial state, dims (x, x_wrt), the discrete heat kernel.
The scheme is linear in u, so its oracle is the matrix power Mⁿ of the one-step
matrix M, built with NumPy.
"""

import argparse
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
KERNEL_STEPS = 40  # the Jacobian ∂uⁿ/∂u⁰ is taken after this many steps
OUTPUT = Path(__file__).resolve().parent / "output"

X = xr.DataArray(np.linspace(0.0, 1.0, N_POINTS), dims="x", attrs={"units": "m"})
X = X.assign_coords(x=X)
INTERIOR = xr.DataArray(np.r_[0.0, np.ones(N_POINTS - 2), 0.0], dims="x", coords={"x": X.x})


def step(u: xr.DataArray, courant) -> xr.DataArray:
    """One explicit step.  The boundary values stay put: INTERIOR masks the update there
    (and roll's wrap-around)."""
    return u + INTERIOR * courant * (u.roll(x=1) + u.roll(x=-1) - 2 * u)


def solve(kappa: xr.DataArray) -> xr.DataArray:
    """The explicit scheme from sin(πx); the solution every SAVE_EVERY steps, dims (time, x)."""
    u = np.sin(np.pi * X)
    courant = kappa * DT / DX**2
    snapshots = [u]
    for n in range(1, N_STEPS + 1):
        u = step(u, courant)
        if n % SAVE_EVERY == 0:
            snapshots.append(u)
    steps = np.arange(0, N_STEPS + 1, SAVE_EVERY)
    return xr.concat(snapshots, dim="time").assign_coords(time=("time", steps * DT, {"units": "s"}))


def evolve(u0: xr.DataArray) -> xr.DataArray:
    """u after KERNEL_STEPS steps from any initial state u0 (dims ("x",)), κ = KAPPA."""
    u = u0
    for _ in range(KERNEL_STEPS):
        u = step(u, KAPPA * DT / DX**2)
    return u.assign_attrs(long_name="temperature", units="1")


def one_step_matrix() -> np.ndarray:
    """M with u¹ = M u⁰ (NumPy, no xarray): identity plus the masked second difference."""
    laplacian = -2 * np.eye(N_POINTS) + np.eye(N_POINTS, k=1) + np.eye(N_POINTS, k=-1)
    return np.eye(N_POINTS) + KAPPA * DT / DX**2 * np.diag(INTERIOR.values) @ laplacian


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


def main(figures_dir: Path = OUTPUT) -> None:
    kappa = xr.DataArray(KAPPA, attrs={"units": "m2 s-1"})
    u_exact, du_exact = closed_form(KAPPA)

    u = solve(kappa)
    jacobian = lf.jacfwd(solve)(kappa)
    _, tangent = lf.jvp(solve, (kappa,), (xr.ones_like(kappa),))
    gradient = lf.grad(heat_left)(kappa)
    u0 = np.sin(np.pi * X).assign_attrs(long_name="initial temperature", units="1")
    kernel = lf.jacrev(evolve)(u0)

    assert jacobian.dims == ("time", "x")
    np.testing.assert_allclose(u, u_exact.transpose(*u.dims), atol=1e-13)
    np.testing.assert_allclose(jacobian, du_exact.transpose(*jacobian.dims), atol=1e-12)
    np.testing.assert_allclose(tangent, jacobian, atol=1e-14)
    grad_exact = float(du_exact.isel(time=-1).sum("x") * DX)
    np.testing.assert_allclose(float(gradient), grad_exact, rtol=1e-12)
    assert kernel.dims == ("x", "x_wrt")
    np.testing.assert_allclose(kernel, np.linalg.matrix_power(one_step_matrix(), KERNEL_STEPS), atol=1e-13)

    figures = plot(u, jacobian, du_exact, kernel, figures_dir)
    print(f"Heat equation, {N_POINTS} points, {N_STEPS} explicit steps of {DT:.2e} s, kappa = {KAPPA}")
    print(f"  du/dkappa by jacfwd: dims {jacobian.dims}; max |jacfwd - closed form| "
          f"{float(abs(jacobian - du_exact).max()):.1e}")
    print(f"  du/dkappa by jvp:    max |jvp - jacfwd| {float(abs(tangent - jacobian).max()):.1e}")
    print(f"  d(heat left)/dkappa by grad: {float(gradient):.6f} (closed form {grad_exact:.6f})")
    print(f"  d(u after {KERNEL_STEPS} steps)/d(initial u) by jacrev: dims {kernel.dims}, = M^{KERNEL_STEPS} (NumPy)")
    for figure in figures or ["skipped (matplotlib is not installed)"]:
        print(f"  figure: {figure}")


def plot(u: xr.DataArray, jacobian: xr.DataArray, du_exact: xr.DataArray, kernel: xr.DataArray,
         directory: Path) -> list[Path]:
    """heat_equation.png: u(x) and ∂u/∂κ(x) at the saved times, AD as markers and the closed
    form as lines; heat_kernel.png: the Jacobian ∂uⁿ(x)/∂u⁰(x_wrt) at the interior points as a
    heatmap, its axes and colour bar labelled by xarray from the coords' and the Jacobian's
    attrs (the boundary rows are the identity: the boundary values stay put)."""
    try:
        import matplotlib
    except ImportError:
        return []
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
    directory.mkdir(parents=True, exist_ok=True)
    fig.savefig(directory / "heat_equation.png", dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 5), constrained_layout=True)
    interior = kernel.isel(x=slice(1, -1), x_wrt=slice(1, -1))
    interior.plot(ax=ax, x="x_wrt", y="x", cmap="magma", yincrease=False)
    ax.set_title(f"lf.jacrev: the heat kernel after {KERNEL_STEPS} steps ({KERNEL_STEPS * DT:.3g} s)")
    fig.savefig(directory / "heat_kernel.png", dpi=100)
    plt.close(fig)
    return [directory / "heat_equation.png", directory / "heat_kernel.png"]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--figures", type=Path, default=OUTPUT, metavar="DIR",
                        help="where the PNG figures go (default: examples/output/)")
    main(parser.parse_args().figures)
