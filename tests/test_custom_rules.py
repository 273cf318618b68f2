"""lf.custom_jvp and lf.custom_vjp under every composition of transforms.

The rules below are chosen so that bypassing them gives different numbers at every
order: ``sin2``'s rule is the derivative of 2 sin (the function computes sin), the
softplus rule stays finite where the raw function overflows (NaN), and the
straight-through estimator's rule is 1 where the raw round has derivative 0.
Oracles: analytic derivatives of the rule, central finite differences of a function
with the same derivative (2 sin, logaddexp), and per-example loops for vmap.
"""
import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the raw functions overflow on purpose


# --- the custom functions -------------------------------------------------------------------------
def sigmoid(x):
    return 0.5 * (1 + np.tanh(x / 2))  # finite everywhere, and so are its derivatives


@lf.custom_jvp
def softplus(x):
    return np.log1p(np.exp(x))


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softplus(x), t * sigmoid(x)


def d_softplus(x, order):
    s = 1 / (1 + np.exp(-np.asarray(x, dtype=float)))
    return {1: s, 2: s * (1 - s), 3: s * (1 - s) * (1 - 2 * s)}[order]


@lf.custom_jvp
def sin2(x):
    """sin(x), differentiated as if it were 2 sin(x)."""
    return np.sin(x)


@sin2.defjvp
def _sin2_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return sin2(x), 2 * np.cos(x) * t


@lf.custom_jvp
def ste(x):
    return np.round(x)


@ste.defjvp
def _ste_jvp(primals, tangents):
    return ste(primals[0]), tangents[0]  # straight-through: d/dx := 1


@lf.custom_jvp
def wsin(x, w):
    """sin(x) w, differentiated as if it were g(x, w) = 2 sin(x) w."""
    return np.sin(x) * w


@wsin.defjvp
def _wsin_jvp(primals, tangents):
    (x, w), (tx, tw) = primals, tangents
    return wsin(x, w), 2 * np.cos(x) * w * tx + 2 * np.sin(x) * tw


@lf.custom_jvp
def norm(x):
    """The Euclidean norm over the named dim ``i`` (the rule is the true derivative)."""
    return np.sqrt((x ** 2).sum("i"))


@norm.defjvp
def _norm_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    n = norm(x)
    return n, (x * t).sum("i") / n


@lf.custom_vjp
def vsin2(x):
    """sin(x), pulled back as if it were 2 sin(x); ``bwd`` is differentiable."""
    return np.sin(x)


vsin2.defvjp(lambda x: (vsin2(x), x), lambda x, g: (2 * np.cos(x) * g,))


@lf.custom_vjp
def vwsin(x, w):
    """sin(x) w for x 0-d and w along ``j``, pulled back as g(x, w) = 2 sin(x) w."""
    return np.sin(x) * w


def _vwsin_fwd(x, w):
    return vwsin(x, w), {"x": x, "w": w, "none": None, "tag": "kept"}


def _vwsin_bwd(res, g):
    assert res["tag"] == "kept" and res["none"] is None
    x, w = res["x"], res["w"]
    return (2 * np.cos(x) * w * g).sum("j"), 2 * np.sin(x) * g


vwsin.defvjp(_vwsin_fwd, _vwsin_bwd)


# --- helpers -------------------------------------------------------------------------------------
def scalar(v):
    return xr.DataArray(float(v))


def close(actual, expected, rtol=1e-7, atol=1e-9):
    actual = actual.values if isinstance(actual, xr.DataArray) else np.asarray(actual)
    expected = expected.values if isinstance(expected, xr.DataArray) else np.asarray(expected)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def second_derivative(how, f, x):
    """f''(x) for a scalar function of a 0-d DataArray, by one composition of transforms."""
    one = xr.ones_like(x)
    if how == "grad(grad)":
        return lf.grad(lf.grad(f))(x)
    if how == "jvp(grad)":
        return lf.jvp(lf.grad(f), (x,), (one,))[1]
    if how == "grad(jvp)":
        return lf.grad(lambda z: lf.jvp(f, (z,), (xr.ones_like(z),))[1])(x)
    if how == "vjp(grad)":
        return lf.vjp(lf.grad(f), x)[1](one)[0]
    if how == "jacfwd(jacrev)":
        return lf.jacfwd(lf.jacrev(f))(x)
    if how == "jacrev(jacfwd)":
        return lf.jacrev(lf.jacfwd(f))(x)
    if how == "jacrev(jacrev)":
        return lf.jacrev(lf.jacrev(f))(x)
    if how == "jacfwd(jacfwd)":
        return lf.jacfwd(lf.jacfwd(f))(x)
    if how == "hessian":
        return lf.hessian(f)(x)
    if how == "hessian 1-d":
        h = lf.hessian(lambda z: f(z.squeeze("k")).sum())(x.expand_dims(k=1))
        assert h.dims == ("k", "k_wrt")
        return h.isel(k=0, k_wrt=0)
    raise AssertionError(how)


SECOND = ["grad(grad)", "jvp(grad)", "grad(jvp)", "vjp(grad)", "jacfwd(jacrev)", "jacrev(jacfwd)",
          "jacrev(jacrev)", "jacfwd(jacfwd)", "hessian", "hessian 1-d"]
REVERSE_SECOND = ["grad(grad)", "vjp(grad)", "jacrev(jacrev)"]


def sin2_squared_second(x):
    """(sin2(x)^2)'' when sin2 = sin is differentiated as 2 sin: 8 cos^2 - 4 sin^2."""
    return 8 * np.cos(x) ** 2 - 4 * np.sin(x) ** 2


def fd_hessian(g, x, h=1e-4):
    """Central finite differences of the Hessian of a scalar NumPy function."""
    x = np.asarray(x, dtype=float)
    n = x.size
    H = np.empty((n, n))
    eye = np.eye(n).reshape((n,) + x.shape)
    for i in range(n):
        for j in range(n):
            ei, ej = h * eye[i], h * eye[j]
            H[i, j] = (g(x + ei + ej) - g(x + ei - ej) - g(x - ei + ej) + g(x - ei - ej)) / (4 * h * h)
    return H


def fd_derivative(g, x, h=1e-5):
    return (g(x + h) - g(x - h)) / (2 * h)


# --- custom_jvp: higher order without vmap --------------------------------------------------------
def test_first_order_uses_the_rule_where_the_function_overflows():
    x = scalar(1000.0)
    close(lf.grad(softplus)(x), 1.0)
    close(lf.jvp(softplus, (x,), (scalar(1.0),))[1], 1.0)
    close(lf.jacrev(softplus)(x), 1.0)
    close(lf.jacfwd(softplus)(x), 1.0)


@pytest.mark.parametrize("how", SECOND)
def test_second_order_straight_through(how):
    # L = ste(z)^2 with ste' := 1: L'' = 2 (the raw round would give 0)
    close(second_derivative(how, lambda z: ste(z) ** 2, scalar(1.3)), 2.0)


@pytest.mark.parametrize("how", SECOND)
@pytest.mark.parametrize("x0", [0.7, -2.5])
def test_second_order_of_the_rule(how, x0):
    x = scalar(x0)
    # analytic: d/dx of the rule's tangent factor
    close(second_derivative(how, softplus, x), d_softplus(x0, 2))
    close(second_derivative(how, sin2, x), -2 * np.sin(x0))
    # finite differences of 2 sin, which has the derivative the rule declares
    close(second_derivative(how, sin2, x), fd_derivative(lambda z: 2 * np.cos(z), x0), rtol=1e-6)
    # the primal output feeds the outer derivative through the rule too:
    # L = sin2^2, L' = 2 sin2 * 2 cos, L'' = (2 cos)(2 cos) 2 - 4 sin^2 (raw: 2 cos 2x)
    close(second_derivative(how, lambda z: sin2(z) ** 2, x), sin2_squared_second(x0))


@pytest.mark.parametrize("how", SECOND)
def test_second_order_is_finite_where_the_function_overflows(how):
    close(second_derivative(how, softplus, scalar(1000.0)), 0.0)


def test_third_order():
    x0 = 0.4
    x = scalar(x0)
    expected = d_softplus(x0, 3)
    close(lf.grad(lf.grad(lf.grad(softplus)))(x), expected)
    close(lf.jvp(lf.grad(lf.grad(softplus)), (x,), (scalar(1.0),))[1], expected)
    close(lf.jacfwd(lf.jacrev(lf.grad(softplus)))(x), expected)
    close(lf.jacrev(lf.jacfwd(lf.jacfwd(softplus)))(x), expected)
    close(lf.grad(lf.grad(lf.grad(sin2)))(x), -2 * np.cos(x0))


def _dense_loss(x, A):
    return softplus(xr.dot(x, A)).sum()


def test_hessian_of_a_vector_function_matches_analytic_and_finite_differences():
    rng = np.random.default_rng(0)
    A = xr.DataArray(rng.normal(size=(3, 4)), dims=("i", "j"))
    x = xr.DataArray(rng.normal(size=3), dims="i", coords={"i": ["a", "b", "c"]})
    z = xr.dot(x, A).values
    expected = A.values @ np.diag(d_softplus(z, 2)) @ A.values.T
    for H in (lf.hessian(_dense_loss)(x, A),
              lf.jacrev(lf.jacfwd(_dense_loss))(x, A),
              lf.jacrev(lf.grad(_dense_loss))(x, A)):
        assert H.dims == ("i", "i_wrt")
        assert list(H.coords["i_wrt"].values) == ["a", "b", "c"]
        close(H, expected)
    # softplus(z) = logaddexp(0, z): the same derivative, computed stably
    oracle = fd_hessian(lambda v: np.logaddexp(0, v @ A.values).sum(), x.values)
    close(lf.hessian(_dense_loss)(x, A), oracle, rtol=1e-5, atol=1e-6)


def test_hessian_where_the_raw_function_overflows():
    A = xr.DataArray([[400.0, -1.0], [400.0, 2.0]], dims=("i", "j"))
    x = xr.DataArray([1.0, 1.0], dims="i")  # z = [800, 1]: exp(800) overflows
    z = xr.dot(x, A).values
    expected = A.values @ np.diag(d_softplus(z, 2)) @ A.values.T
    H = lf.hessian(_dense_loss)(x, A)
    assert np.isfinite(H.values).all()
    close(H, expected)


def test_hessian_with_named_dims_inside_the_rule():
    x = xr.DataArray([3.0, -4.0, 1.0], dims="i")
    v = x.values
    n = np.linalg.norm(v)
    expected = (np.eye(3) - np.outer(v, v) / n ** 2) / n
    close(lf.grad(norm)(x), v / n)
    close(lf.hessian(norm)(x), expected)
    close(lf.jacrev(lf.grad(norm))(x), expected)
    close(lf.hessian(norm)(x), fd_hessian(lambda u: np.sqrt((u ** 2).sum()), v), rtol=1e-5, atol=1e-6)


# --- custom_jvp and vmap, in both orders ----------------------------------------------------------
X = xr.DataArray([1000.0, 1.0, -3.0], dims="s", coords={"s": [10, 20, 30]})


def test_vmap_alone_runs_the_function():
    Y = xr.DataArray([0.1, 0.7, -1.2], dims="s")
    close(lf.vmap(softplus, "s")(Y), np.log1p(np.exp(Y.values)))
    close(lf.vmap(sin2, "s")(Y), np.sin(Y.values))


def test_grad_of_vmap_uses_the_rule():
    g = lf.grad(lambda v: lf.vmap(softplus, "s")(v).sum())(X)
    assert g.dims == ("s",) and list(g.coords["s"].values) == [10, 20, 30]
    close(g, d_softplus(X.values, 1))
    # bypass would differentiate sin: factor 2
    close(lf.grad(lambda v: lf.vmap(sin2, "s")(v).sum())(X), 2 * np.cos(X.values))


def test_jacobians_of_vmap_use_the_rule():
    expected = np.diag(d_softplus(X.values, 1))
    close(lf.jacrev(lf.vmap(softplus, "s"))(X), expected)
    close(lf.jacfwd(lf.vmap(softplus, "s"))(X), expected)


def test_jvp_of_vmap_uses_the_rule():
    t = xr.DataArray([1.0, 2.0, -1.0], dims="s")
    out, tangent = lf.jvp(lf.vmap(softplus, "s"), (X,), (t,))
    close(tangent, d_softplus(X.values, 1) * t.values)
    close(lf.jvp(lf.vmap(sin2, "s"), (X,), (t,))[1], 2 * np.cos(X.values) * t.values)


def _loop(f, v):
    return np.array([float(f(v.isel(s=k))) for k in range(v.sizes["s"])])


def test_vmap_of_derivatives_matches_the_loop():
    cases = {
        "grad": (lf.grad(softplus), 1),
        "jacrev": (lf.jacrev(softplus), 1),
        "jvp": (lambda z: lf.jvp(softplus, (z,), (xr.ones_like(z),))[1], 1),
        "grad(grad)": (lf.grad(lf.grad(softplus)), 2),
        "jvp(grad)": (lambda z: lf.jvp(lf.grad(softplus), (z,), (xr.ones_like(z),))[1], 2),
        "hessian": (lf.hessian(softplus), 2),
    }
    for name, (f, order) in cases.items():
        batched = lf.vmap(f, "s")(X)
        close(batched, _loop(f, X))
        close(batched, d_softplus(X.values, order))


def test_second_order_through_vmap():
    Y = xr.DataArray([0.3, -1.1, 2.0], dims="s")
    expected = np.diag(d_softplus(Y.values, 2))
    mapped = lf.vmap(softplus, "s")

    def total_grad(v):
        return lf.grad(lambda u: mapped(u).sum())(v)

    close(lf.hessian(lambda v: mapped(v).sum())(Y), expected)
    close(lf.jacrev(total_grad)(Y), expected)
    close(lf.jacfwd(total_grad)(Y), expected)
    close(lf.jacrev(lf.jacfwd(mapped))(Y).sum("s"), expected)  # d2 f(y_s) / dy_s2 on the diagonal
    close(lf.grad(lambda v: total_grad(v).sum())(Y), d_softplus(Y.values, 2))
    close(lf.jvp(total_grad, (Y,), (xr.ones_like(Y),))[1], d_softplus(Y.values, 2))
    close(lf.grad(lambda v: total_grad(v).sum())(X), d_softplus(X.values, 2))  # finite at 1000
    # the primal output under the rule: L = sum sin2(y)^2
    close(lf.hessian(lambda v: (lf.vmap(sin2, "s")(v) ** 2).sum())(Y), np.diag(sin2_squared_second(Y.values)))
    close(lf.vmap(lf.grad(lf.grad(lambda z: sin2(z) ** 2)), "s")(Y), sin2_squared_second(Y.values))


def test_nested_vmaps_with_grad():
    Z = xr.DataArray([[0.2, -0.4], [1.5, 3.0], [-2.0, 0.0]], dims=("s", "r"))
    inner = lf.vmap(lf.vmap(sin2, "r"), "s")
    close(lf.grad(lambda v: inner(v).sum())(Z), 2 * np.cos(Z.values))
    close(lf.hessian(lambda v: lf.vmap(sin2, "r")(v).sum())(Z.isel(s=0)), np.diag(-2 * np.sin(Z.values[0])))
    H = lf.vmap(lf.hessian(lambda v: lf.vmap(sin2, "r")(v).sum()), "s")(Z)
    for k in range(Z.sizes["s"]):
        close(H.isel(s=k), np.diag(-2 * np.sin(Z.values[k])))
    close(lf.vmap(lf.vmap(lf.grad(lf.grad(sin2)), "r"), "s")(Z), -2 * np.sin(Z.values))
    close(lf.vmap(lf.grad(lambda v: lf.vmap(sin2, "r")(v).sum()), "s")(Z), 2 * np.cos(Z.values))


def test_shared_argument_under_vmap():
    x = xr.DataArray([0.3, 1.1, -0.4], dims="s")
    w = xr.DataArray([1.0, 2.0], dims="j")
    loss = lambda x, w: lf.vmap(wsin, "s")(x, w).sum()  # noqa: E731
    gx, gw = lf.grad(loss, argnums=(0, 1))(x, w)
    # derivatives of g(x, w) = 2 sin(x) w summed over s and j
    close(gx, 2 * np.cos(x.values) * w.values.sum())
    close(gw, np.full(2, 2 * np.sin(x.values).sum()))
    # and w mapped while x is shared
    W = xr.DataArray([[1.0, 2.0], [0.5, -1.0]], dims=("s", "j"))
    x0 = scalar(0.6)
    gx0, gW = lf.grad(lambda x, W: lf.vmap(wsin, "s")(x, W).sum(), argnums=(0, 1))(x0, W)
    close(gx0, 2 * np.cos(0.6) * W.values.sum())
    close(gW, np.full((2, 2), 2 * np.sin(0.6)))
    # second order, against finite differences of g
    hx = lf.hessian(loss)(x, w)
    close(hx, fd_hessian(lambda v: (2 * np.sin(v)[:, None] * w.values).sum(), x.values), rtol=1e-5, atol=1e-6)


def test_grad_of_vmap_with_named_dims_inside():
    Z = xr.DataArray([[3.0, 4.0], [1.0, -1.0], [0.5, 2.0]], dims=("s", "i"))
    g = lf.grad(lambda v: lf.vmap(norm, "s")(v).sum())(Z)
    assert g.dims == ("s", "i")
    close(g, Z.values / np.linalg.norm(Z.values, axis=1, keepdims=True))
    H = lf.vmap(lf.hessian(norm), "s")(Z)
    for k in range(3):
        v = Z.values[k]
        n = np.linalg.norm(v)
        close(H.isel(s=k), (np.eye(2) - np.outer(v, v) / n ** 2) / n)


def test_the_rule_is_not_run_more_than_needed_without_ad():
    calls = []

    @lf.custom_jvp
    def f(x):
        calls.append("fun")
        return 2 * x

    @f.defjvp
    def _(primals, tangents):
        calls.append("rule")
        return f(primals[0]), 2 * tangents[0]

    lf.vmap(f, "s")(X)
    assert calls == ["fun"]


# --- custom_vjp -----------------------------------------------------------------------------------
@pytest.mark.parametrize("how", REVERSE_SECOND)
@pytest.mark.parametrize("x0", [0.7, -2.5])
def test_custom_vjp_second_order_through_a_differentiable_bwd(how, x0):
    x = scalar(x0)
    close(lf.grad(vsin2)(x), 2 * np.cos(x0))
    close(second_derivative(how, vsin2, x), -2 * np.sin(x0))
    close(second_derivative(how, vsin2, x), fd_derivative(lambda z: 2 * np.cos(z), x0), rtol=1e-6)
    # fwd computes its output with vsin2 itself, so the outer grad uses the rule too
    close(second_derivative(how, lambda z: vsin2(z) ** 2, x), sin2_squared_second(x0))


def test_custom_vjp_vmap_of_grad_and_grad_of_vmap():
    Y = xr.DataArray([0.3, -1.1, 2.0], dims="s")
    per_example = lf.grad(vsin2)
    close(lf.vmap(per_example, "s")(Y), _loop(per_example, Y))
    close(lf.vmap(per_example, "s")(Y), 2 * np.cos(Y.values))
    close(lf.vmap(lf.grad(lf.grad(vsin2)), "s")(Y), -2 * np.sin(Y.values))
    mapped = lf.vmap(vsin2, "s")
    close(mapped(Y), np.sin(Y.values))
    close(lf.grad(lambda v: mapped(v).sum())(Y), 2 * np.cos(Y.values))
    close(lf.jacrev(mapped)(Y), np.diag(2 * np.cos(Y.values)))
    close(lf.jacrev(mapped, chunk_size=1)(Y), np.diag(2 * np.cos(Y.values)))
    close(lf.vmap(lf.jacrev(vsin2), "s")(Y), 2 * np.cos(Y.values))
    close(lf.jacrev(lf.grad(lambda v: mapped(v).sum()))(Y), np.diag(-2 * np.sin(Y.values)))
    close(lf.grad(lambda v: lf.grad(lambda u: mapped(u).sum())(v).sum())(Y), -2 * np.sin(Y.values))


def test_custom_vjp_shared_argument_and_residuals_under_vmap():
    x = xr.DataArray([0.3, 1.1, -0.4], dims="s")
    w = xr.DataArray([1.0, 2.0], dims="j")
    gx, gw = lf.grad(lambda x, w: lf.vmap(vwsin, "s")(x, w).sum(), argnums=(0, 1))(x, w)
    close(gx, 2 * np.cos(x.values) * w.values.sum())
    close(gw, np.full(2, 2 * np.sin(x.values).sum()))  # summed over the examples sharing w
    W = xr.DataArray([[1.0, 2.0], [0.5, -1.0]], dims=("s", "j"))
    x0 = scalar(0.6)
    gx0, gW = lf.grad(lambda x, W: lf.vmap(vwsin, "s")(x, W).sum(), argnums=(0, 1))(x0, W)
    close(gx0, 2 * np.cos(0.6) * W.values.sum())
    close(gW, np.full((2, 2), 2 * np.sin(0.6)))
    # per-example gradients with respect to the shared argument
    per_w = lf.vmap(lf.grad(lambda x, w: vwsin(x, w).sum(), argnums=1), in_dims=("s", None))(x, w)
    close(per_w, 2 * np.sin(x.values)[:, None] * np.ones(2))


def test_custom_vjp_bwd_may_return_none():
    @lf.custom_vjp
    def scale(x, c):
        return x * c

    scale.defvjp(lambda x, c: (scale(x, c), c), lambda c, g: (g * c, None))
    x = xr.DataArray([1.0, 2.0], dims="s")
    c = xr.DataArray(3.0)
    gx, gc = lf.grad(lambda x, c: lf.vmap(scale, "s")(x, c).sum(), argnums=(0, 1))(x, c)
    close(gx, [3.0, 3.0])
    close(gc, 0.0)


# forward mode through custom_vjp (no longer refused): tests/test_custom_vjp_forward.py


def test_rules_must_be_defined():
    @lf.custom_jvp
    def f(x):
        return x

    @lf.custom_vjp
    def g(x):
        return x

    with pytest.raises(TypeError, match="defjvp"):
        f(scalar(1.0))
    with pytest.raises(TypeError, match="defvjp"):
        g(scalar(1.0))



def test_custom_vjp_under_nested_vmaps_inside_grad_uses_the_rule():
    # bwd declares d(x²)/dx := x (not 2x), so the result tells the rule from the raw function
    @lf.custom_vjp
    def square(x):
        return x ** 2

    square.defvjp(lambda x: (square(x), x), lambda x, g: (g * x,))
    X = xr.DataArray(np.arange(6.0).reshape(2, 3) - 2.5, dims=("a", "b"))
    expected = X.values
    nested_dims = lf.grad(lambda X: lf.vmap(square, dim=("a", "b"))(X).sum())(X)
    nested_calls = lf.grad(lambda X: lf.vmap(lf.vmap(square, "b"), "a")(X).sum())(X)
    inside = lf.vmap(lf.vmap(lf.grad(square), "b"), "a")(X)
    out, pullback = lf.vjp(lambda X: lf.vmap(lf.vmap(square, "b"), "a")(X), X)
    for result in (nested_dims, nested_calls, inside, pullback(xr.ones_like(out))[0]):
        np.testing.assert_allclose(result.transpose("a", "b").values, expected)


def test_custom_functions_called_with_keywords_say_to_pass_them_by_position():
    @lf.custom_jvp
    def scaled(x, factor):
        return x * factor

    scaled.defjvp(lambda p, t: (scaled(*p), t[0] * p[1]))

    @lf.custom_vjp
    def cube(x):
        return x ** 3

    cube.defvjp(lambda x: (cube(x), x), lambda x, g: (3 * g * x ** 2,))
    x = xr.DataArray([1.0, 2.0], dims="i")
    with pytest.raises(TypeError, match=r"custom_jvp 'scaled'.*\['factor'\].*by position"):
        scaled(x, factor=2.0)
    with pytest.raises(TypeError, match=r"custom_vjp 'cube'.*\['x'\]"):
        cube(x=x)
    np.testing.assert_allclose(lf.grad(lambda x: scaled(x, 2.0).sum())(x).values, [2.0, 2.0])
