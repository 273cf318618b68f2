"""lf.linear_solve and lf.implicit_root: a solver of one's own, differentiated implicitly.

Oracles: np.linalg.solve and its derivatives by central differences; closed forms
(d√a/da = 1/(2√a)); jacrev == jacfwd; vmap == a loop.  The solvers here would fail if
traced (they read values with float() / np.asarray, or call SciPy), which shows that
the transforms never run them on traced values.
"""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf


def close(a, b, rtol=1e-7, atol=1e-9):
    a = a.values if isinstance(a, xr.DataArray) else np.asarray(a)
    b = b.values if isinstance(b, xr.DataArray) else np.asarray(b)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


RNG = np.random.default_rng(7)
M0 = RNG.normal(size=(3, 3)) + 4 * np.eye(3)  # not symmetric
S0 = M0 @ M0.T                                 # symmetric positive definite
B0 = RNG.normal(size=3)


def matvec(v, A):
    """A v, labeled: A has dims (i, j), v dim i."""
    return xr.dot(A, v.rename(i="j"), dim="j")


def labeled(A, b):
    return xr.DataArray(A, dims=("i", "j")), xr.DataArray(b, dims="i")


CALLS = []


def cg(mv, b, tol=1e-13):
    """Conjugate gradients in NumPy, looping until a tolerance: only plain values work."""
    CALLS.append(type(b.data if isinstance(b, xr.DataArray) else b))
    x = b * 0.0
    r = b - mv(x)
    p = r
    rs = float((r * r).sum())
    for _ in range(100):
        if np.sqrt(rs) < tol:
            break
        Ap = mv(p)
        alpha = rs / float((p * Ap).sum())
        x = x + alpha * p
        r = r - alpha * Ap
        rs_new = float((r * r).sum())
        p = r + (rs_new / rs) * p
        rs = rs_new
    return x


def numpy_solve(mv, b):
    """np.linalg.solve on the materialized matrix (bare arrays)."""
    n = b.size
    return np.linalg.solve(np.stack([mv(np.eye(n)[k]) for k in range(n)], axis=1), b)


def fd(fun, x, h=1e-6):
    """Central differences of fun (NumPy) at x: d out / d x, shape out.shape + x.shape."""
    x = np.asarray(x, dtype=float)
    cols = []
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = h
        e = e.reshape(x.shape)
        cols.append((np.asarray(fun(x + e)) - np.asarray(fun(x - e))) / (2 * h))
    return np.stack(cols, axis=-1).reshape(np.shape(fun(x)) + x.shape)


# --- linear_solve -------------------------------------------------------------------------------
@pytest.mark.parametrize("solver", ["dense", "cg", "numpy"])
def test_linear_solve_matches_numpy(solver):
    A, b = labeled(S0, B0)
    if solver == "numpy":
        x = lf.linear_solve(lambda v, A: A @ v, B0, S0, solve=numpy_solve)
        assert isinstance(x, np.ndarray)
    else:
        x = lf.linear_solve(matvec, b, A, solve=cg if solver == "cg" else None, symmetric=solver == "cg")
        assert x.dims == ("i",)
    close(x, np.linalg.solve(S0, B0))


def test_linear_solve_keeps_labels():
    A = xr.DataArray(M0, dims=("i", "j"), coords={"i": list("abc"), "j": list("abc")})
    b = xr.DataArray(B0, dims="i", coords={"i": list("abc")}, name="rhs")
    x = lf.linear_solve(matvec, b, A)
    assert x.dims == ("i",) and list(x.i.values) == list("abc")


@pytest.mark.parametrize("mode", ["jacrev", "jacfwd"])
def test_linear_solve_derivatives_match_central_differences(mode):
    A, b = labeled(M0, B0)
    jac = getattr(lf, mode)
    Jb = jac(lambda b: lf.linear_solve(matvec, b, A))(b)
    close(Jb, np.linalg.inv(M0))
    JA = jac(lambda A: lf.linear_solve(matvec, b, A))(A)
    assert JA.dims == ("i", "i_wrt", "j")
    close(JA, fd(lambda M: np.linalg.solve(M, B0), M0), rtol=1e-6, atol=1e-8)


def test_linear_solve_jacrev_equals_jacfwd_and_second_order():
    A, b = labeled(M0, B0)

    def loss(A, b):
        return (lf.linear_solve(matvec, b, A) ** 2).sum()

    close(lf.jacrev(lambda A: lf.linear_solve(matvec, b, A))(A), lf.jacfwd(lambda A: lf.linear_solve(matvec, b, A))(A))
    H = lf.hessian(loss)(A, b)
    close(H, lf.jacrev(lf.jacrev(loss))(A, b), atol=1e-12)
    close(H, lf.jacrev(lf.jacfwd(loss))(A, b), atol=1e-12)
    # the Hessian by central differences of the exact gradient
    grad_np = lambda M: (-2 * np.outer(np.linalg.solve(M.T, np.linalg.solve(M, B0)), np.linalg.solve(M, B0)))
    close(lf.grad(loss)(A, b), grad_np(M0), rtol=1e-9)
    close(H, fd(grad_np, M0), rtol=1e-5, atol=1e-8)


def test_linear_solve_uses_the_transpose_solve_in_reverse_mode():
    A, b = labeled(M0, B0)
    seen = []

    def transpose_solve(vm, rhs):
        seen.append("T")
        return _dense(vm, rhs)

    g = lf.grad(lambda b: lf.linear_solve(matvec, b, A, transpose_solve=transpose_solve).sum())(b)
    close(g, np.linalg.solve(M0.T, np.ones(3)))
    assert seen == ["T"]


def _dense(mv, rhs):
    cols = [mv(rhs.copy(data=np.eye(rhs.size)[k])).transpose(*rhs.dims).values for k in range(rhs.size)]
    return rhs.copy(data=np.linalg.solve(np.stack(cols, axis=1), rhs.values))


def test_linear_solve_cg_under_grad_never_sees_tracers():
    A, b = labeled(S0, B0)
    CALLS.clear()
    g = lf.grad(lambda A, b: lf.linear_solve(matvec, b, A, solve=cg, symmetric=True).sum(), argnums=(0, 1))(A, b)
    lam = np.linalg.solve(S0, np.ones(3))
    close(g[1], lam)
    close(g[0], -np.outer(lam, np.linalg.solve(S0, B0)))
    assert CALLS and all(t is np.ndarray for t in CALLS)


def test_linear_solve_vmap_matches_a_loop():
    mats = xr.DataArray(np.stack([S0, S0 + np.eye(3), 2 * S0]), dims=("s", "i", "j"))
    rhs = xr.DataArray(RNG.normal(size=(3, 3)), dims=("s", "i"))
    solve = lambda A, b: lf.linear_solve(matvec, b, A, solve=cg, symmetric=True)
    CALLS.clear()
    out = lf.vmap(solve, "s")(mats, rhs)
    assert len(CALLS) == 3 and all(t is np.ndarray for t in CALLS)  # once per example, plain values
    for k in range(3):
        close(out.isel(s=k), np.linalg.solve(mats.values[k], rhs.values[k]), rtol=1e-8)
    # shared operator, mapped right-hand side; per-example gradients
    A = xr.DataArray(S0, dims=("i", "j"))
    close(lf.vmap(lambda b: solve(A, b), "s")(rhs), np.linalg.solve(S0, rhs.values.T).T, rtol=1e-8)
    loss = lambda A, b: (solve(A, b) ** 2).sum()
    per_example = lf.vmap(lf.grad(loss), "s")(mats, rhs)
    for k in range(3):
        close(per_example.isel(s=k), lf.grad(loss)(mats.isel(s=k), rhs.isel(s=k)), rtol=1e-8)
    # grad of a vmap: the cotangent of the shared operator sums over examples
    total = lf.grad(lambda A: lf.vmap(lambda b: loss(A, b), "s")(rhs).sum())(A)
    close(total, sum(lf.grad(loss)(A, rhs.isel(s=k)) for k in range(3)), rtol=1e-8)


def test_linear_solve_jacfwd_of_vmap_and_bare_arrays():
    rhs = RNG.normal(size=(2, 3))
    solve = lambda b, M: lf.linear_solve(lambda v, M: M @ v, b, M, solve=numpy_solve)
    J = lf.jacfwd(lf.vmap(solve, in_dims=(0, None)), argnums=1)(rhs, M0)
    close(J, fd(lambda M: np.linalg.solve(M, rhs.T).T, M0), rtol=1e-6, atol=1e-8)
    close(lf.jacrev(lf.vmap(solve, in_dims=(0, None)), argnums=1)(rhs, M0), J, atol=1e-12)


def test_linear_solve_refuses_a_matvec_closing_over_a_traced_value():
    A, b = labeled(M0, B0)
    with pytest.raises(ValueError, match="closes over a value traced"):
        lf.grad(lambda A: lf.linear_solve(lambda v: matvec(v, A), b).sum())(A)
    with pytest.raises(ValueError, match="closes over a value traced"):  # b traced by the same grad
        lf.grad(lambda A, b: lf.linear_solve(lambda v: matvec(v, A), b).sum(), argnums=(0, 1))(A, b)
    with pytest.raises(ValueError, match="closes over a value traced"):  # a mapped closure
        lf.vmap(lambda A: lf.linear_solve(lambda v: matvec(v, A), b), "s")(A.expand_dims(s=2))
    # a closed-over constant is fine
    close(lf.grad(lambda b: lf.linear_solve(lambda v: matvec(v, A), b).sum())(b), np.linalg.solve(M0.T, np.ones(3)))


def test_linear_solve_under_jit_replays_with_new_values():
    solve = lf.jit(lambda b, M: lf.linear_solve(lambda v, M: M @ v, b, M, solve=numpy_solve))
    grad = lf.jit(lf.grad(lambda M, b: lf.linear_solve(lambda v, M: M @ v, b, M).sum()))
    for M in (M0, 2 * M0 + np.eye(3)):
        close(solve(B0, M), np.linalg.solve(M, B0))
        close(grad(M, B0), -np.outer(np.linalg.solve(M.T, np.ones(3)), np.linalg.solve(M, B0)))


# --- implicit_root ------------------------------------------------------------------------------
def newton(g, x):
    """Newton on x² − a (derivative 2x), in plain Python: stops on a tolerance."""
    for _ in range(100):
        step = g(x) / (2 * x)
        x = x - step
        if float(abs(step).max()) < 1e-15:
            break
    return x


def sqrt(a):
    return lf.implicit_root(lambda x, a: x ** 2 - a, xr.ones_like(a), a, solve=newton)


A_VALUES = xr.DataArray([0.5, 4.0, 9.0], dims="s")


def test_implicit_sqrt_closed_form():
    a = xr.DataArray(4.0)
    close(sqrt(a), 2.0)
    close(lf.grad(sqrt)(a), 0.25)
    close(lf.grad(lf.grad(sqrt))(a), -0.25 * 4.0 ** -1.5)
    close(lf.jacfwd(lf.grad(sqrt))(a), -0.25 * 4.0 ** -1.5)
    expected = 1 / (2 * np.sqrt(A_VALUES.values))
    close(lf.jacrev(sqrt)(A_VALUES), np.diag(expected))
    close(lf.jacfwd(sqrt)(A_VALUES), np.diag(expected))
    close(lf.jvp(sqrt, (A_VALUES,), (xr.ones_like(A_VALUES),))[1], expected)
    close(lf.hessian(lambda a: sqrt(a).sum())(A_VALUES), np.diag(-0.25 * A_VALUES.values ** -1.5))


def test_implicit_sqrt_vmap_of_grad_matches_the_loop():
    per_example = lf.vmap(lf.grad(sqrt), "s")(A_VALUES)
    close(per_example, [float(lf.grad(sqrt)(A_VALUES.isel(s=k))) for k in range(3)])
    close(lf.vmap(sqrt, "s")(A_VALUES), np.sqrt(A_VALUES.values))


def test_implicit_root_with_scipy_brentq():
    brentq = pytest.importorskip("scipy.optimize").brentq

    def bracketed(g, x0):
        return xr.full_like(x0, brentq(lambda t: float(g(xr.full_like(x0, t))), 0.0, 100.0, xtol=1e-14))

    root = lambda a: lf.implicit_root(lambda x, a: x ** 2 - a, xr.ones_like(a), a, solve=bracketed)
    close(lf.vmap(lf.grad(root), "s")(A_VALUES), 1 / (2 * np.sqrt(A_VALUES.values)), rtol=1e-10)


def residual(x, p):
    """A 2-D system: x0² + x1² = p0, x0 − x1 = p1 (dims k for x, p)."""
    x0, x1 = x.isel(k=0), x.isel(k=1)
    return xr.concat([x0 ** 2 + x1 ** 2 - p.isel(k=0), x0 - x1 - p.isel(k=1)], dim="k")


def newton_2d(g, x):
    for _ in range(50):
        x0, x1 = x.values
        J = np.array([[2 * x0, 2 * x1], [1.0, -1.0]])
        x = x - x.copy(data=np.linalg.solve(J, g(x).values))
    return x


def root_2d(p):
    return lf.implicit_root(residual, xr.DataArray([1.0, 0.5], dims="k"), p, solve=newton_2d)


def root_2d_numpy(p):
    # x1 = x0 − p1; 2 x0² − 2 p1 x0 + p1² − p0 = 0, the larger root
    x0 = (2 * p[1] + np.sqrt(4 * p[1] ** 2 - 8 * (p[1] ** 2 - p[0]))) / 4
    return np.array([x0, x0 - p[1]])


def test_implicit_root_2d_system_matches_central_differences():
    p = xr.DataArray([2.0, 0.3], dims="k")
    close(root_2d(p), root_2d_numpy(p.values))
    expected = fd(root_2d_numpy, p.values)
    Jr = lf.jacrev(root_2d)(p)
    assert Jr.dims == ("k", "k_wrt")
    close(Jr, expected, rtol=1e-6, atol=1e-9)
    close(lf.jacfwd(root_2d)(p), Jr, atol=1e-12)
    # second order: the Hessian of a loss, against central differences of its gradient
    loss = lambda p: (root_2d(p) ** 3).sum()
    grad_np = lambda q: 3 * root_2d_numpy(q) ** 2 @ fd(root_2d_numpy, q, h=1e-5)
    close(lf.grad(loss)(p), grad_np(p.values), rtol=1e-6)
    close(lf.hessian(loss)(p), fd(grad_np, p.values, h=1e-4), rtol=1e-4, atol=1e-6)
    # vmap over parameter sets
    ps = xr.DataArray([[2.0, 0.3], [3.0, -0.2]], dims=("s", "k"))
    Js = lf.vmap(lf.jacrev(root_2d), "s")(ps)
    for k in range(2):
        close(Js.isel(s=k), fd(root_2d_numpy, ps.values[k]), rtol=1e-6, atol=1e-9)


def test_implicit_root_refuses_a_closure_over_a_traced_value():
    with pytest.raises(ValueError, match="implicit_root"):
        lf.grad(lambda a: lf.implicit_root(lambda x: x ** 2 - a, xr.ones_like(a), solve=newton))(xr.DataArray(4.0))
