"""The contract of ``lf.grad``, ``grad_and_value``, ``vjp``, ``jvp``, ``jacrev``,
``jacfwd``, ``hessian`` and ``linearize`` (API.md, "Automatic differentiation"), their
errors, and the policies under AD (API.md, "Policies").

Oracles: derivatives worked out by hand for small polynomial/trigonometric functions,
and central finite differences of the same function run on plain xarray objects.
"""

import re

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

I_COORD = [10.0, 20.0, 30.0]


def vector(values=(0.5, -1.25, 2.0), name="x", dim="i", coords=I_COORD):
    coords = {dim: coords} if coords is not None else None
    return xr.DataArray(np.asarray(values, dtype=float), dims=dim, coords=coords, name=name,
                        attrs={"units": "m"})


def matrix(seed=0):
    rng = np.random.default_rng(seed)
    return xr.DataArray(rng.normal(size=(3, 4)), dims=("row", "col"),
                        coords={"row": [1, 2, 3], "col": list("abcd")}, name="m")


def central_gradient(func, x, eps=1e-6):
    """d func / d x by central differences, one coordinate of the flattened x at a time."""
    flat = x.values.ravel()
    grad = np.empty_like(flat)
    for k in range(flat.size):
        step = np.zeros_like(flat)
        step[k] = eps
        plus = float(func(x.copy(data=(flat + step).reshape(x.shape))))
        minus = float(func(x.copy(data=(flat - step).reshape(x.shape))))
        grad[k] = (plus - minus) / (2 * eps)
    return grad.reshape(x.shape)


def all_of(*words):
    """A regex matching a message that contains every word, in any order."""
    return "(?is)" + "".join(f"(?=.*{re.escape(w)})" for w in words)


def sum_of_squares(x):
    return (x**2).sum()


# --- grad: structure of the gradient ------------------------------------------------


def test_grad_of_a_dataarray_keeps_dims_coords_and_name():
    x = matrix()
    gradient = lf.grad(lambda m: (np.sin(m) * m).sum())(x)
    assert isinstance(gradient, xr.DataArray)
    assert gradient.dims == ("row", "col")
    assert gradient.name == "m"
    xr.testing.assert_identical(gradient.coords.to_dataset(), x.coords.to_dataset())
    np.testing.assert_allclose(gradient.values, np.cos(x.values) * x.values + np.sin(x.values), rtol=1e-14)


def test_grad_of_a_dataset_keeps_variables_and_coords():
    ds = xr.Dataset({"u": vector(), "v": matrix()})
    gradient = lf.grad(lambda d: (d.u**3).sum() + (d.v * 2.0).sum())(ds)
    assert isinstance(gradient, xr.Dataset)
    assert sorted(gradient.data_vars) == ["u", "v"]
    assert set(gradient.coords) == set(ds.coords)
    for name in ds.coords:
        np.testing.assert_array_equal(gradient[name].values, ds[name].values)
    assert gradient["u"].dims == ("i",)
    assert gradient["v"].dims == ("row", "col")
    np.testing.assert_allclose(gradient["u"].values, 3 * ds.u.values**2, rtol=1e-14)
    np.testing.assert_allclose(gradient["v"].values, np.full((3, 4), 2.0))


def test_grad_of_a_tuple_and_a_dict_argument():
    a, b = vector(), vector([1.0, 2.0, -3.0], name="b")
    g_tuple = lf.grad(lambda pair: (pair[0] * pair[1] ** 2).sum())((a, b))
    assert isinstance(g_tuple, tuple) and len(g_tuple) == 2
    np.testing.assert_allclose(g_tuple[0].values, b.values**2)
    np.testing.assert_allclose(g_tuple[1].values, 2 * a.values * b.values)
    g_dict = lf.grad(lambda d: (d["a"] * d["b"] ** 2).sum())({"a": a, "b": b})
    assert isinstance(g_dict, dict) and sorted(g_dict) == ["a", "b"]
    np.testing.assert_allclose(g_dict["a"].values, b.values**2)
    np.testing.assert_allclose(g_dict["b"].values, 2 * a.values * b.values)
    assert g_dict["b"].dims == ("i",)


def test_grad_argnums_int_and_tuple():
    a, b = vector(), vector([1.0, 2.0, -3.0], name="b")

    def f(a, b):
        return (a**2 * b).sum()

    np.testing.assert_allclose(lf.grad(f)(a, b).values, 2 * a.values * b.values)
    np.testing.assert_allclose(lf.grad(f, argnums=1)(a, b).values, a.values**2)
    both = lf.grad(f, argnums=(0, 1))(a, b)
    assert isinstance(both, tuple) and len(both) == 2
    np.testing.assert_allclose(both[0].values, 2 * a.values * b.values)
    np.testing.assert_allclose(both[1].values, a.values**2)
    single = lf.grad(f, argnums=(1,))(a, b)
    assert isinstance(single, tuple) and len(single) == 1
    np.testing.assert_allclose(single[0].values, a.values**2)


def test_grad_of_a_function_returning_a_0d_array():
    x = vector()
    gradient = lf.grad(lambda y: (y**2).sum().data)(x)
    assert isinstance(gradient, xr.DataArray) and gradient.dims == ("i",)
    np.testing.assert_allclose(gradient.values, 2 * x.values)


def test_grad_has_aux_returns_gradient_and_aux():
    x = vector()
    gradient, aux = lf.grad(lambda y: (sum_of_squares(y), {"mean": y.mean()}), has_aux=True)(x)
    np.testing.assert_allclose(gradient.values, 2 * x.values)
    assert isinstance(aux, dict)
    np.testing.assert_allclose(float(aux["mean"]), x.values.mean())


def test_grad_and_value():
    x = vector()
    gradient, value = lf.grad_and_value(sum_of_squares)(x)
    np.testing.assert_allclose(gradient.values, 2 * x.values)
    np.testing.assert_allclose(float(value), np.sum(x.values**2))
    assert gradient.dims == ("i",)


def test_grad_and_value_with_aux():
    x = vector()
    gradient, (value, aux) = lf.grad_and_value(
        lambda y: (sum_of_squares(y), y * 3.0), has_aux=True)(x)
    np.testing.assert_allclose(gradient.values, 2 * x.values)
    np.testing.assert_allclose(float(value), np.sum(x.values**2))
    assert isinstance(aux, xr.DataArray) and aux.dims == ("i",)
    np.testing.assert_allclose(aux.values, 3 * x.values)


# --- vjp ------------------------------------------------------------------------------


def test_vjp_returns_output_and_a_function_returning_a_tuple():
    a, b = vector(), vector([1.0, 2.0, -3.0], name="b")
    out, vjp_fn = lf.vjp(lambda a, b: a * np.sin(b), a, b)
    np.testing.assert_allclose(out.values, a.values * np.sin(b.values))
    cotangent = vector([1.0, -2.0, 0.5], name="ct")
    pulled = vjp_fn(cotangent)
    assert isinstance(pulled, tuple) and len(pulled) == 2
    np.testing.assert_allclose(pulled[0].values, cotangent.values * np.sin(b.values))
    np.testing.assert_allclose(pulled[1].values, cotangent.values * a.values * np.cos(b.values))
    assert pulled[0].dims == ("i",)
    (single,) = lf.vjp(np.exp, a)[1](cotangent)
    np.testing.assert_allclose(single.values, cotangent.values * np.exp(a.values))


def test_vjp_has_aux_returns_three_values():
    x = vector()
    out, vjp_fn, aux = lf.vjp(lambda y: (y**2, y.sum()), x, has_aux=True)
    np.testing.assert_allclose(out.values, x.values**2)
    np.testing.assert_allclose(float(aux), x.values.sum())
    (pulled,) = vjp_fn(xr.ones_like(out))
    np.testing.assert_allclose(pulled.values, 2 * x.values)


def test_vjp_matches_a_transposed_cotangent_by_dim_name():
    x = matrix()
    out, vjp_fn = lf.vjp(lambda m: np.sin(m) * 2.0, x)
    assert out.dims == ("row", "col")
    cotangent = matrix(seed=1)
    (in_order,) = vjp_fn(cotangent)
    (transposed,) = vjp_fn(cotangent.transpose("col", "row"))
    expected = cotangent.values * 2.0 * np.cos(x.values)
    assert in_order.dims == transposed.dims == ("row", "col")
    np.testing.assert_allclose(in_order.values, expected, rtol=1e-14)
    np.testing.assert_allclose(transposed.values, expected, rtol=1e-14)


def test_vjp_rejects_a_cotangent_with_the_wrong_dims():
    x = matrix()
    _, vjp_fn = lf.vjp(lambda m: m * 2.0, x)
    wrong = xr.DataArray(np.ones((3, 4)), dims=("row", "level"))
    with pytest.raises(ValueError, match=all_of("level", "col")):
        vjp_fn(wrong)


# --- jvp and linearize ---------------------------------------------------------------


def test_jvp_returns_output_and_tangent():
    a, b = vector(), vector([1.0, 2.0, -3.0], name="b")
    ta, tb = vector([1.0, 0.0, 2.0]), vector([0.5, -1.0, 1.0])
    out, tangent = lf.jvp(lambda a, b: a * np.sin(b), (a, b), (ta, tb))
    np.testing.assert_allclose(out.values, a.values * np.sin(b.values))
    expected = ta.values * np.sin(b.values) + a.values * np.cos(b.values) * tb.values
    assert tangent.dims == ("i",)
    np.testing.assert_allclose(tangent.values, expected, rtol=1e-14)


def test_jvp_has_aux_returns_three_values():
    x, t = vector(), vector([1.0, 0.0, 2.0])
    out, tangent, aux = lf.jvp(lambda y: ((y**3).sum(), y.max()), (x,), (t,), has_aux=True)
    np.testing.assert_allclose(float(out), np.sum(x.values**3))
    np.testing.assert_allclose(float(tangent), np.sum(3 * x.values**2 * t.values))
    np.testing.assert_allclose(float(aux), x.values.max())


def test_linearize_returns_output_and_a_reusable_jvp_function():
    x = vector()
    out, jvp_fn = lf.linearize(lambda y: np.exp(y) * y, x)
    np.testing.assert_allclose(out.values, np.exp(x.values) * x.values)
    slope = np.exp(x.values) * (1 + x.values)
    for t in (vector([1.0, 0.0, 2.0]), vector([-3.0, 0.5, 0.25])):
        tangent = jvp_fn(t)
        assert tangent.dims == ("i",)
        np.testing.assert_allclose(tangent.values, slope * t.values, rtol=1e-14)


# --- Jacobians: dims, coords, naming, chunking ----------------------------------------


def linear_sine(x):
    """out = sin(W x), W of dims (out, i): Jacobian cos(W x)[:, None] * W."""
    return np.sin(xr.dot(WEIGHTS, x, dim="i"))


WEIGHTS = xr.DataArray(np.random.default_rng(5).normal(size=(5, 3)), dims=("out", "i"),
                       coords={"out": list("vwxyz")})


def linear_sine_jacobian(x):
    return np.cos(WEIGHTS.values @ x.values)[:, None] * WEIGHTS.values


@pytest.mark.parametrize("transform", [lf.jacfwd, lf.jacrev], ids=["jacfwd", "jacrev"])
def test_jacobian_dims_are_output_then_input_without_suffix_when_unique(transform):
    x = vector()
    jac = transform(linear_sine)(x)
    assert jac.dims == ("out", "i")
    assert list(jac["out"].values) == list("vwxyz")
    np.testing.assert_array_equal(jac["i"].values, I_COORD)
    np.testing.assert_allclose(jac.values, linear_sine_jacobian(x), rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("transform", [lf.jacfwd, lf.jacrev], ids=["jacfwd", "jacrev"])
def test_wrt_suffix_is_applied_until_the_name_is_unique(transform):
    x = vector(name="v", dim="x")

    def outer(x):  # out[x, x_wrt] = x_a x_b
        return x * x.rename(x="x_wrt")

    jac = transform(outer)(x)
    assert jac.dims == ("x", "x_wrt", "x_wrt_wrt")
    for dim in jac.dims:
        np.testing.assert_array_equal(jac[dim].values, I_COORD)
    eye, v = np.eye(3), x.values
    expected = np.einsum("ac,b->abc", eye, v) + np.einsum("a,bc->abc", v, eye)
    np.testing.assert_allclose(jac.values, expected, rtol=1e-14)


@pytest.mark.parametrize("transform", [lf.jacfwd, lf.jacrev], ids=["jacfwd", "jacrev"])
def test_custom_wrt_suffix(transform):
    jac = transform(lambda y: y**2, wrt_suffix="_d")(vector())
    assert jac.dims == ("i", "i_d")
    np.testing.assert_array_equal(jac["i_d"].values, I_COORD)
    np.testing.assert_allclose(jac.values, np.diag(2 * vector().values))


@pytest.mark.parametrize("transform", [lf.jacfwd, lf.jacrev], ids=["jacfwd", "jacrev"])
def test_a_wrt_dim_avoids_the_dims_an_enclosing_vmap_maps(transform):
    # the vmap maps "b_wrt" and puts it back on the output: the argument's dim "b" must not
    # become "b_wrt" inside, but the next free name, at every level
    rng = np.random.default_rng(2)
    x = xr.DataArray(rng.normal(size=(4, 3)), dims=("b_wrt", "b"),
                     coords={"b_wrt": [1, 2, 3, 4], "b": [10.0, 20.0, 30.0]})

    def f(x):
        return np.sin(x) * x.sum("b")

    mapped = lf.vmap(transform(f), dim="b_wrt")(x)
    assert mapped.dims == ("b_wrt", "b", "b_wrt_wrt")
    np.testing.assert_array_equal(mapped["b_wrt_wrt"].values, x["b"].values)
    np.testing.assert_array_equal(mapped["b_wrt"].values, x["b_wrt"].values)
    for k in range(4):  # the loop: each example alone, where "b_wrt" is free
        alone = transform(f)(x.isel(b_wrt=k, drop=True))
        assert alone.dims == ("b", "b_wrt")
        np.testing.assert_allclose(mapped.isel(b_wrt=k).values, alone.values, rtol=1e-14)
        xv = x.isel(b_wrt=k).values  # and by hand: d/dx_j [sin(x_i) S] = cos(x_i) S d_ij + sin(x_i)
        expected = np.diag(np.cos(xv) * xv.sum()) + np.sin(xv)[:, None]
        np.testing.assert_allclose(alone.values, expected, rtol=1e-13)


def test_a_wrt_dim_avoids_the_dims_and_coordinates_of_nested_vmaps():
    rng = np.random.default_rng(4)
    x = xr.DataArray(rng.normal(size=(2, 3, 2)), dims=("i_wrt", "i_wrt_wrt", "i"),
                     coords={"i_wrt_wrt": [5, 6, 7], "i": [0.5, 1.5]})
    hessian = lf.hessian(lambda y: (y ** 3).sum())
    nested = lf.vmap(lf.vmap(hessian, dim="i_wrt_wrt"), dim="i_wrt")(x)
    assert nested.dims == ("i_wrt", "i_wrt_wrt", "i", "i_wrt_wrt_wrt")
    for a in range(2):
        for b in range(3):
            np.testing.assert_allclose(nested.isel(i_wrt=a, i_wrt_wrt=b).values,
                                       np.diag(6 * x.isel(i_wrt=a, i_wrt_wrt=b).values), rtol=1e-14)
    # a coordinate along a mapped dim comes back on the output too: it is not free either
    y = xr.DataArray(rng.normal(size=(2, 3)), dims=("sample", "i"), coords={"i_wrt": ("sample", [7, 8])})
    jac = lf.vmap(lf.jacrev(lambda v: v ** 2), dim="sample")(y)
    assert jac.dims == ("sample", "i", "i_wrt_wrt") and jac["i_wrt"].dims == ("sample",)


def test_hessian_dims_and_values():
    x = vector()
    hess = lf.hessian(lambda y: (y**3).sum() + y.sum() ** 2)(x)
    assert hess.dims == ("i", "i_wrt")
    np.testing.assert_array_equal(hess["i_wrt"].values, I_COORD)
    np.testing.assert_allclose(hess.values, np.diag(6 * x.values) + 2.0, rtol=1e-13)


@pytest.mark.parametrize("chunk_size", [1, 2])
def test_jacrev_chunked_equals_unchunked(chunk_size):
    x = vector()
    full = lf.jacrev(linear_sine)(x)
    chunked = lf.jacrev(linear_sine, chunk_size=chunk_size)(x)
    xr.testing.assert_allclose(chunked, full, rtol=1e-15, atol=0)
    assert chunked.dims == ("out", "i")
    np.testing.assert_allclose(chunked.values, linear_sine_jacobian(x), rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("transform", [lf.jacfwd, lf.jacrev], ids=["jacfwd", "jacrev"])
def test_jacobian_argnums_tuple_and_has_aux(transform):
    a, b = vector(), vector([1.0, 2.0, -3.0], name="b", dim="k", coords=None)

    def f(a, b):
        out = a * b.sum()
        return out, b.mean()

    (ja, jb), aux = transform(f, argnums=(0, 1), has_aux=True)(a, b)
    assert ja.dims == ("i", "i_wrt") and jb.dims == ("i", "k")
    np.testing.assert_allclose(ja.values, np.eye(3) * b.values.sum())
    np.testing.assert_allclose(jb.values, np.outer(a.values, np.ones(3)))
    np.testing.assert_allclose(float(aux), b.values.mean())


def test_compositions():
    x0 = xr.DataArray(0.7)
    f = lambda x: np.sin(x) * x  # noqa: E731
    second = lf.grad(lf.grad(f))(x0)
    np.testing.assert_allclose(float(second), 2 * np.cos(0.7) - 0.7 * np.sin(0.7), rtol=1e-14)
    _, tangent = lf.jvp(lf.grad(f), (x0,), (xr.DataArray(3.0),))
    np.testing.assert_allclose(float(tangent), 3 * (2 * np.cos(0.7) - 0.7 * np.sin(0.7)), rtol=1e-14)
    xs = xr.DataArray(np.array([[0.1, 0.2, 0.3], [1.0, -1.0, 0.5]]), dims=("sample", "i"))
    jacs = lf.vmap(lf.jacrev(lambda y: y**3), dim="sample")(xs)
    assert jacs.dims == ("sample", "i", "i_wrt")
    for s in range(2):
        np.testing.assert_allclose(jacs.values[s], np.diag(3 * xs.values[s] ** 2))


# --- bad inputs -----------------------------------------------------------------------


def test_grad_of_a_non_scalar_output_says_reduce_or_jacrev():
    with pytest.raises(ValueError, match=all_of("reduce", "jacrev")):
        lf.grad(lambda y: y**2)(vector())


@pytest.mark.parametrize("values", [np.arange(3), np.array([True, False, True])], ids=["int", "bool"])
def test_integer_or_bool_input_raises_type_error_naming_the_argument(values):
    def loss(weights, counts):
        return (weights * counts).sum()

    counts = xr.DataArray(values, dims="i")
    with pytest.raises(TypeError, match=r"counts|argument 1|argnums.*1"):
        lf.grad(loss, argnums=1)(vector(), counts)
    with pytest.raises(TypeError, match=r"counts|argument 1|argnums.*1"):
        lf.grad(loss, argnums=(0, 1))(vector(), counts)


def test_argnums_out_of_range_raises_value_error():
    with pytest.raises(ValueError, match="argnums"):
        lf.grad(lambda a, b: (a * b).sum(), argnums=2)(vector(), vector())
    with pytest.raises(ValueError, match="argnums"):
        lf.jacrev(lambda a: a, argnums=(0, 1))(vector())


# --- policies under AD (no vmap) ------------------------------------------------------


def branchy(x):
    if x.sum() > 0:
        return (x**2).sum()
    return np.sin(x).sum()


@pytest.mark.parametrize("values", [[0.5, -1.25, 2.0], [-0.5, -1.25, 0.2]], ids=["positive", "negative"])
def test_python_if_on_a_traced_value_works_without_vmap(values):
    x = vector(values)
    expected = 2 * x.values if x.values.sum() > 0 else np.cos(x.values)
    np.testing.assert_allclose(lf.grad(branchy)(x).values, expected)
    np.testing.assert_allclose(lf.jacfwd(branchy)(x).values, expected)


@pytest.mark.parametrize("convert", [float, lambda d: d.item()], ids=["float", "item"])
def test_float_and_item_give_the_primal_as_a_constant(convert):
    x = vector()
    seen = []

    def f(y):
        scale = convert(y.sum())
        seen.append(scale)
        return (y**2).sum() * scale

    gradient = lf.grad(f)(x)
    assert isinstance(seen[0], float) and seen[0] == pytest.approx(x.values.sum())
    np.testing.assert_allclose(gradient.values, 2 * x.values * x.values.sum())


def update_in_place(x):
    y = x * 1.0
    y += np.sin(x)
    y[1:] = y[:-1] * x[1:]
    x += y  # an argument updated in place
    return (x**2 * y).sum()


def test_in_place_updates_give_correct_gradients():
    x = vector(coords=None)
    expected = central_gradient(update_in_place, x)
    gradient = lf.grad(update_in_place)(x.copy())
    np.testing.assert_allclose(gradient.values, expected, rtol=1e-6, atol=1e-8)
    jac = lf.jacfwd(update_in_place)(x.copy())
    np.testing.assert_allclose(jac.values, expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("how", ["setitem", "iadd"])
def test_writing_a_traced_value_into_a_captured_numpy_array_raises(how):
    buffer = xr.DataArray(np.zeros(3), dims="i")

    def f(x):
        if how == "setitem":
            buffer[0] = x.sum()
        else:
            buffer.__iadd__(x.drop_vars("i"))  # `buffer += ...` would make `buffer` local
        return (x**2).sum()

    with pytest.raises(lf.InplaceError, match="zeros_like"):
        lf.grad(f)(vector())


LEAKED = None


def test_a_leaked_tracer_used_after_grad_raises():
    def f(x):
        global LEAKED
        LEAKED = x * 2.0
        return (x**2).sum()

    np.testing.assert_allclose(lf.grad(f)(vector()).values, 2 * vector().values)
    with pytest.raises(lf.EscapedTracerError, match="has_aux"):
        np.sin(LEAKED)


# --- control flow under AD ------------------------------------------------------------


def square_or_sine(x):
    return lf.cond(x.sum() > 0, lambda v: (v**2).sum(), lambda v: np.sin(v).sum(), x)


def square_or_sine_gradient(values):
    return 2 * values if values.sum() > 0 else np.cos(values)


@pytest.mark.parametrize("values", [[0.5, -0.25, 1.0], [-0.5, 0.25, -1.0]])
def test_cond_with_an_unmapped_predicate_in_both_modes(values):
    x = vector(values)
    expected = square_or_sine_gradient(x.values)
    np.testing.assert_allclose(lf.grad(square_or_sine)(x).values, expected)
    np.testing.assert_allclose(lf.jacfwd(square_or_sine)(x).values, expected)
    _, tangent = lf.jvp(square_or_sine, (x,), (xr.ones_like(x),))
    np.testing.assert_allclose(float(tangent), expected.sum())


def test_cond_with_a_mapped_predicate_under_vmap_of_grad_and_jacfwd():
    values = np.array([[0.5, -0.25, 1.0], [-0.5, 0.25, -1.0], [2.0, -3.0, 0.5], [0.1, 0.2, 0.3]])
    xs = xr.DataArray(values, dims=("sample", "i"), coords={"sample": [4, 5, 6, 7]})
    expected = np.stack([square_or_sine_gradient(row) for row in values])
    for transform in (lf.grad, lf.jacfwd):
        per_sample = lf.vmap(transform(square_or_sine), dim="sample")(xs)
        assert per_sample.dims == ("sample", "i")
        np.testing.assert_array_equal(per_sample["sample"].values, [4, 5, 6, 7])
        np.testing.assert_allclose(per_sample.values, expected)


def double_until_ten(x):
    return lf.while_loop(lambda v: v < 10.0, lambda v: v * 2.0, x)


def test_while_loop_under_jvp():
    out, tangent = lf.jvp(double_until_ten, (xr.DataArray(1.5),), (xr.DataArray(0.5),))
    np.testing.assert_allclose(float(out), 12.0)
    np.testing.assert_allclose(float(tangent), 8 * 0.5)


def test_while_loop_with_a_mapped_predicate_under_vmap_of_jvp():
    xs = xr.DataArray([1.5, 0.3, 11.0, 5.0], dims="sample")

    def tangent_of(x):
        return lf.jvp(double_until_ten, (x,), (xr.ones_like(x),))[1]

    tangents = lf.vmap(tangent_of, dim="sample")(xs)
    np.testing.assert_allclose(tangents.values, [8.0, 64.0, 1.0, 2.0])


def test_a_loss_and_aux_pair_without_has_aux_says_to_pass_it():
    x = xr.DataArray([1.0, 2.0], dims="i")
    for transform in (lf.grad, lf.grad_and_value):
        with pytest.raises(ValueError, match=r"has_aux=True"):
            transform(lambda y: ((y ** 2).sum(), {"mean": y.mean()}))(x)
    with pytest.raises(ValueError, match=r"got tuple; use lf.jacrev"):  # not a (scalar, aux) pair
        lf.grad(lambda y: (y ** 2, y))(x)


LINEARIZE_X = xr.DataArray([1.0, 2.0, 4.0], dims="t")


# --- linearize leaves the caller's array alone ---------------------------------------------------------
def test_linearize_does_not_run_the_function_on_the_callers_array():
    def shift_in_place(x):
        x += 1.0
        return x ** 2

    x = xr.DataArray([1.0, 2.0], dims="t")
    out, jvp_fn = lf.linearize(shift_in_place, x)
    # before: x became [2, 3] and the JVP was taken there
    np.testing.assert_array_equal(x.values, [1.0, 2.0])
    np.testing.assert_allclose(out.values, shift_in_place(x.copy()).values)
    tangent = xr.DataArray([1.0, -1.0], dims="t")
    np.testing.assert_allclose(jvp_fn(tangent).values, 2 * (x.values + 1.0) * tangent.values)
    expected = lf.jvp(shift_in_place, (x,), (tangent,))[1]
    np.testing.assert_allclose(jvp_fn(tangent).values, expected.values)
    np.testing.assert_array_equal(x.values, [1.0, 2.0])


def test_linearize_output_is_the_plain_output():
    def f(x, scale):
        return np.sin(x) * scale

    out, _ = lf.linearize(f, LINEARIZE_X, 2.0)
    xr.testing.assert_identical(out, f(LINEARIZE_X, 2.0))
    assert isinstance(out.data, np.ndarray)


# --- jacfwd and jacrev agree on dtypes: NumPy's promotion --------------------------------------------
X32 = xr.DataArray(np.array([1.0, 2.0, 3.0], dtype=np.float32), dims="t")
X64 = X32.astype(np.float64)


@pytest.mark.parametrize("f, x", [
    (lambda x: x * np.ones(3), X32),                    # float32 argument, float64 output
    (lambda x: x.astype(np.float32) * 2, X64),          # float64 argument, float32 output
    (lambda x: x * 2, X32),
    (lambda x: (x > 1.5).astype(int), X32),             # an integer output: no derivative
], ids=["f32-to-f64", "f64-to-f32", "f32-to-f32", "f32-to-int"])
def test_jacfwd_and_jacrev_give_numpys_promotion(f, x):
    # before: float64 by jacfwd and float32 by jacrev for the first
    out = f(x)
    kind = out.dtype.kind
    expected = np.result_type(out.dtype, x.dtype) if kind == "f" else x.dtype
    forward, reverse = lf.jacfwd(f)(x), lf.jacrev(f)(x)
    assert forward.dtype == reverse.dtype == expected
    np.testing.assert_array_equal(forward.values, reverse.values)


def test_jacobians_of_several_outputs_promote_each_block():
    f = lambda x: (x * 2, x * np.ones(3))  # noqa: E731 - float32 and float64 outputs
    forward, reverse = lf.jacfwd(f)(X32), lf.jacrev(f)(X32)
    assert [j.dtype for j in forward] == [j.dtype for j in reverse] == [np.float32, np.float64]
    hessian = lf.hessian(lambda x: (x ** 3 * np.ones(3)).sum())(X32)
    assert hessian.dtype == np.float64
    np.testing.assert_allclose(hessian.values, np.diag(6 * X32.values.astype(float)))
