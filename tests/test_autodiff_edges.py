"""Edges of the AD API: Python numbers as arguments and cotangents, and the errors that
name what went wrong (API.md, "Automatic differentiation" and "Accessor").

Oracles: derivatives worked out by hand, central finite differences, and the same
call with a 0-d DataArray in place of the Python float.
"""

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

X = xr.DataArray([1.0, 2.0, 3.0], dims="site", coords={"site": [10, 20, 30], "name": ("site", list("abc"))})


# --- Jacobians with respect to a Python number keep the output's labels --------------------------
@pytest.mark.parametrize("transform", [lf.jacrev, lf.jacfwd])
def test_jacobian_wrt_a_python_float_is_labeled_by_the_output(transform):
    jacobian = transform(lambda p: p * X + p ** 2)(2.0)
    assert isinstance(jacobian, xr.DataArray)
    assert jacobian.dims == ("site",)
    xr.testing.assert_identical(jacobian.coords.to_dataset(), X.coords.to_dataset())
    np.testing.assert_allclose(jacobian.values, X.values + 2 * 2.0)
    # the same as for a 0-d DataArray argument
    as_dataarray = transform(lambda p: p * X + p ** 2)(xr.DataArray(2.0))
    xr.testing.assert_identical(jacobian, as_dataarray)


@pytest.mark.parametrize("transform", [lf.jacrev, lf.jacfwd])
def test_jacobian_wrt_a_float_leaf_of_a_dict(transform):
    v = xr.DataArray([0.5, -1.0], dims="k", coords={"k": ["u", "w"]})

    def f(params):
        return np.sin(params["scale"] * X) + params["v"].sum()

    jacobian = transform(f)({"scale": 0.7, "v": v})
    assert set(jacobian) == {"scale", "v"}
    scale = jacobian["scale"]
    assert isinstance(scale, xr.DataArray) and scale.dims == ("site",)
    np.testing.assert_array_equal(scale["name"].values, list("abc"))
    np.testing.assert_allclose(scale.values, np.cos(0.7 * X.values) * X.values, rtol=1e-14)
    assert jacobian["v"].dims == ("site", "k")
    np.testing.assert_allclose(jacobian["v"].values, np.ones((3, 2)))


@pytest.mark.parametrize("transform", [lf.jacrev, lf.jacfwd])
def test_jacobian_wrt_a_float_matches_central_differences(transform):
    def f(p):
        return np.exp(-p * X) * X ** 2

    eps = 1e-6
    expected = (f(1.3 + eps) - f(1.3 - eps)) / (2 * eps)
    jacobian = transform(f)(1.3)
    xr.testing.assert_allclose(jacobian, expected, rtol=1e-8)


def test_jacobian_wrt_a_0d_numpy_array_and_two_floats():
    jacobian = lf.jacrev(lambda a, b: a * b * X, argnums=(0, 1))(np.array(2.0), 5.0)
    assert all(isinstance(j, xr.DataArray) and j.dims == ("site",) for j in jacobian)
    np.testing.assert_allclose(jacobian[0].values, 5.0 * X.values)
    np.testing.assert_allclose(jacobian[1].values, 2.0 * X.values)


def test_hessian_wrt_a_python_float():
    hessian = lf.hessian(lambda p: ((p * X) ** 3).sum())(2.0)
    assert isinstance(hessian, xr.DataArray) and hessian.dims == ()
    np.testing.assert_allclose(float(hessian), 6 * 2.0 * (X.values ** 3).sum())


def test_jacobian_of_an_unlabeled_output_wrt_a_float_stays_an_array():
    jacobian = lf.jacrev(lambda p: p * np.arange(3.0))(2.0)
    assert not isinstance(jacobian, xr.DataArray)
    np.testing.assert_allclose(jacobian, np.arange(3.0))


# --- integers are not differentiated --------------------------------------------------------------
def call(transform, func, arg):
    if transform == "vjp":
        return lf.vjp(func, arg)
    if transform == "jvp":
        return lf.jvp(func, (arg,), (arg,))
    return getattr(lf, transform)(func)(arg)


TRANSFORMS = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian"]


@pytest.mark.parametrize("value", [3, np.int64(3)], ids=["int", "numpy_int"])
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_an_integer_argument_raises_type_error_naming_it(transform, value):
    def square(count):
        return count ** 2.0

    with pytest.raises(TypeError, match=f"(?s)^{transform}: argument 'count'.*(integer|int64).*floating-point"):
        call(transform, square, value)


def test_an_integer_leaf_names_its_path():
    with pytest.raises(TypeError, match=r"argument 'params'\['steps'\]"):
        lf.grad(lambda params: params["rate"] * params["steps"])({"rate": 0.5, "steps": 4})


def test_the_same_functions_accept_floats():
    assert float(lf.grad(lambda n: n ** 2.0)(3.0)) == 6.0
    assert float(lf.grad(lambda n: n ** 2.0)(np.float32(3.0))) == 6.0


# --- cotangents --------------------------------------------------------------------------------------
@pytest.mark.parametrize("cotangent", [1.5, np.float64(1.5), np.array(1.5), xr.DataArray(1.5)],
                         ids=["float", "numpy_scalar", "0d_array", "0d_dataarray"])
def test_vjp_of_a_0d_output_takes_a_number_as_cotangent(cotangent):
    x = xr.DataArray([1.0, 2.0], dims="i", coords={"i": [5, 6]})
    out, vjp_fn = lf.vjp(lambda x: (x ** 2).sum(), x)
    (pulled,) = vjp_fn(cotangent)
    assert pulled.dims == ("i",)
    np.testing.assert_allclose(pulled.values, 1.5 * 2 * x.values)


def test_vjp_of_a_python_float_output_takes_a_float():
    _, vjp_fn = lf.vjp(lambda s: s * 3.0, 2.0)
    np.testing.assert_allclose(vjp_fn(2.0)[0], 6.0)


def test_a_number_cotangent_of_an_array_output_is_that_number_everywhere():
    x = xr.DataArray([1.0, 2.0], dims="i")
    _, vjp_fn = lf.vjp(lambda x: x ** 2, x)
    np.testing.assert_allclose(vjp_fn(3.0)[0].values, 3.0 * 2 * x.values)


def test_a_dataset_cotangent_missing_a_variable_is_a_value_error_naming_it():
    ds = xr.Dataset({"u": ("i", [1.0, 2.0]), "v": ("i", [3.0, 4.0])})
    _, vjp_fn = lf.vjp(lambda ds: ds * 2.0, ds)
    with pytest.raises(ValueError, match="'v'"):
        vjp_fn(xr.Dataset({"u": ("i", [1.0, 1.0])}))
    with pytest.raises(ValueError, match="'w'"):
        vjp_fn(xr.Dataset({"u": ("i", [1.0, 1.0]), "v": ("i", [1.0, 1.0]), "w": ("i", [1.0, 1.0])}))
    (pulled,) = vjp_fn(xr.Dataset({"v": ("i", [1.0, 0.0]), "u": ("i", [0.0, 1.0])}))
    np.testing.assert_allclose(pulled["u"].values, [0.0, 2.0])
    np.testing.assert_allclose(pulled["v"].values, [2.0, 0.0])


def test_a_dataset_tangent_missing_a_variable_is_a_value_error_naming_it():
    ds = xr.Dataset({"u": ("i", [1.0, 2.0]), "v": ("i", [3.0, 4.0])})
    with pytest.raises(ValueError, match="'v'"):
        lf.jvp(lambda ds: ds * 2.0, (ds,), (xr.Dataset({"u": ("i", [1.0, 1.0])}),))


# --- jvp takes tuples ----------------------------------------------------------------------------------
def test_jvp_with_bare_primals_or_tangents_says_they_must_be_tuples():
    x = xr.DataArray([1.0, 2.0], dims="i")
    with pytest.raises(TypeError, match=r"primals must be a tuple.*lf\.jvp\(f, \(x,\), \(t,\)\)"):
        lf.jvp(np.sin, x, (x,))
    with pytest.raises(TypeError, match="tangents must be a tuple"):
        lf.jvp(np.sin, (x,), x)
    with pytest.raises(TypeError, match="primals must be a tuple"):
        lf.jvp(np.sin, 1.0, 1.0)
    _, tangent = lf.jvp(np.sin, (x,), (x,))
    np.testing.assert_allclose(tangent.values, np.cos(x.values) * x.values)


# --- the accessor differentiates the object itself -------------------------------------------------
@pytest.mark.parametrize("method", ["grad", "grad_and_value", "jacrev", "jacfwd", "hessian"])
def test_accessor_rejects_argnums_and_points_at_the_function(method):
    x = xr.DataArray([1.0, 2.0], dims="i")
    w = xr.DataArray([3.0, 4.0], dims="i")
    with pytest.raises(TypeError, match=rf"always differentiates the object.*lf\.{method}\(func, argnums=") as info:
        getattr(x.func, method)(lambda x, w: (x * w).sum(), args=(w,), argnums=(0, 1))
    assert "multiple values" not in str(info.value)
    # what the message suggests works
    gradient = lf.grad(lambda x, w: (x * w).sum(), argnums=(0, 1))(x, w)
    xr.testing.assert_equal(gradient[0], w)
    xr.testing.assert_equal(gradient[1], x)


# --- messages name the transform the user called -------------------------------------------------
@pytest.mark.parametrize("transform", ["grad", "vjp", "jacrev", "jacfwd", "hessian"])
def test_an_escaped_value_names_the_transform_and_the_users_line(transform):
    x = xr.DataArray([1.0, 2.0], dims="i")
    box = []

    def f(v):
        box.append(v * 2)
        return (v ** 2).sum()

    if transform == "vjp":
        lf.vjp(f, x)
    else:
        getattr(lf, transform)(f)(x)
    with pytest.raises(lf.EscapedTracerError) as excinfo:
        box[0].sum()
    message = str(excinfo.value)
    assert f"traced by lf.{transform} was used after lf.{transform} returned" in message
    assert "DataArray.sum" in message and "test_autodiff_edges.py:" in message


@pytest.mark.parametrize("transform", ["grad", "jacfwd"])
def test_writing_a_traced_value_into_a_plain_buffer_gives_the_ad_reason(transform):
    x = xr.DataArray([1.0, 2.0, 3.0], dims="t")

    def f(v):
        buffer = xr.DataArray(np.zeros(3), dims="t")
        buffer += v
        return (buffer ** 2).sum()

    with pytest.raises(lf.InplaceError) as excinfo:
        getattr(lf, transform)(f)(x)
    message = str(excinfo.value)
    assert f"traced by lf.{transform}" in message and "derivative would be lost" in message
    assert "vmap" not in message


def test_writing_a_traced_value_into_a_plain_buffer_under_jit_gives_jits_reason():
    """lf.jit differentiates nothing: the reason is the write it would not record."""
    def f(v):
        buffer = np.zeros(4)
        np.add.at(buffer, np.array([0, 2]), v)
        return buffer

    with pytest.raises(lf.InplaceError) as excinfo:
        lf.jit(f)(np.ones(2))
    message = str(excinfo.value)
    assert "traced by lf.jit" in message and "would not be recorded" in message
    assert "derivative" not in message and "numpy.add.at" in message


# --- tangents and cotangents are matched by label, never by position alone -------------------------
@pytest.mark.parametrize("relabel, fix", [(lambda t: t.sortby("b", ascending=False), "reindex_like"),
                                          (lambda t: t.assign_coords(b=[7, 8, 9]), "zeros_like")],
                         ids=["reordered", "other-labels"])
@pytest.mark.parametrize("transform", ["jvp", "vjp", "linearize"])
def test_a_tangent_or_cotangent_with_other_labels_raises(transform, relabel, fix):
    x = xr.DataArray([1.0, 2.0, 3.0], dims="b", coords={"b": [10, 20, 30]})
    f = lambda v: v ** 2 * x  # noqa: E731
    direction = xr.DataArray([1.0, 0.0, 0.0], dims="b", coords={"b": [10, 20, 30]})
    run = {"jvp": lambda t: lf.jvp(f, (x,), (t,)), "vjp": lambda t: lf.vjp(f, x)[1](t),
           "linearize": lambda t: lf.linearize(f, x)[1](t)}[transform]
    expected = 2 * x.values * x.values * direction.values  # d/dv (v² x) at v = x, along e_10
    got = run(direction)
    got = got[1] if transform == "jvp" else got[0] if transform == "vjp" else got
    np.testing.assert_allclose(got.values, expected)
    with pytest.raises(ValueError, match=rf"other labels along dim 'b'.*{fix}"):
        run(relabel(direction))


# --- float32 stays float32 in forward mode as in reverse mode ---------------------------------------
FLOAT32_FUNCTIONS = {
    "divide-by-scalar": lambda v: v / 3.0,
    "mean": lambda v: v.mean() * xr.ones_like(v),
    "sqrt": lambda v: np.sqrt(v),
    "log1p": lambda v: np.log1p(v),
    "std": lambda v: v.std() + v,
    "cond": lambda v: lf.cond(v.sum() > 0, lambda a: a / 3, lambda a: a * 2, v),
}


@pytest.mark.parametrize("name", sorted(FLOAT32_FUNCTIONS))
def test_float32_stays_float32_in_forward_mode(name):
    f = FLOAT32_FUNCTIONS[name]
    x = xr.DataArray(np.array([1.0, 2.0, 4.0], dtype=np.float32), dims="t")
    out, tangent = lf.jvp(f, (x,), (xr.ones_like(x),))
    assert out.dtype == np.float32 and tangent.dtype == np.float32
    forward, reverse = lf.jacfwd(f)(x), lf.jacrev(f)(x)
    assert forward.dtype == reverse.dtype == np.float32
    np.testing.assert_allclose(forward.values, reverse.values, rtol=1e-5, atol=1e-6)
    assert lf.linearize(f, x)[1](xr.ones_like(x)).dtype == np.float32


@pytest.mark.parametrize("call, error, message", [
    (lambda x, tree: lf.jacrev(tree)(x), TypeError, r"jacrev: output is a DataTree.*to_dict"),
    (lambda x, tree: lf.grad(lambda v: ((v ** 2).sum(), tree(v)), has_aux=True)(x), TypeError,
     r"grad: aux is a DataTree.*to_dict"),
    (lambda x, tree: lf.jacrev(lambda v: v, chunk_size=0)(x), ValueError, r"jacrev: chunk_size=0"),
], ids=["datatree-output", "datatree-aux", "chunk-size-0"])
def test_messages_name_the_transform_called(call, error, message):
    x = xr.DataArray([1.0, 2.0], dims="i")
    tree = lambda v: xr.DataTree.from_dict({"/a": xr.Dataset({"v": v})})  # noqa: E731
    with pytest.raises(error, match=message):
        call(x, tree)


def test_scalar_coordinates_carried_through_are_not_repeated_with_the_suffix():
    x = xr.DataArray(np.arange(6.0).reshape(2, 3), dims=("sample", "p"), coords={"sample": [10, 20], "run": 5})
    hessian = lf.hessian(lambda v: (v ** 3).sum())(x.isel(sample=0))
    assert set(hessian.coords) == {"sample", "run"} and hessian.dims == ("p", "p_wrt")
    np.testing.assert_allclose(hessian.values, np.diag(6 * x.values[0]))
    square = lambda v: v ** 2  # noqa: E731
    looped = xr.concat([lf.jacrev(square)(x.isel(sample=i)) for i in range(2)], "sample")
    xr.testing.assert_identical(looped, lf.vmap(lf.jacrev(square), dim="sample")(x))
    # a scalar coordinate with another value in the output is still a separate label
    moved = lf.jacrev(lambda v: (v ** 2).assign_coords(run=6))(x.isel(sample=0))
    assert moved.coords["run"].item() == 6 and moved.coords["run_wrt"].item() == 5


def test_a_boolean_output_has_a_false_tangent_not_itself():
    x = np.array([1.0, 2.0])
    out, tangent = lf.jvp(lambda x: (x * 2.0, bool(x[0] > 0), np.float64(3.0) > 2), (x,), (x,))
    np.testing.assert_array_equal(out[0], 2 * x)
    assert bool(out[1]) is True and bool(out[2]) is True
    np.testing.assert_array_equal(tangent[0], 2 * x)
    for part in tangent[1:]:
        assert np.asarray(part).dtype == np.bool_ and not np.asarray(part).any()


def test_a_cotangent_that_does_not_fit_names_the_leaf_of_the_output():
    """A dict / tuple output: the message says which leaf's cotangent is wrong, and shows
    both structures where they differ."""
    x = xr.DataArray([1.0, 2.0], dims="a")
    _, pull = lf.vjp(lambda x: {"u": x * 2, "v": (x.sum(), x ** 2)}, x)
    with pytest.raises(ValueError, match=r"the cotangent at \['u'\] has dims \('z',\) but the value it belongs to "
                                         r"has dims \('a',\)"):
        pull({"u": x.rename(a="z"), "v": (1.0, x)})
    with pytest.raises(ValueError, match=r"the cotangent at \['v'\]\[1\] has shape \(1,\)"):
        pull({"u": x, "v": (1.0, x.isel(a=[0]))})
    with pytest.raises(ValueError, match=r"that is PyTreeSpec\(\{'u': \*, 'v': \(\*, \*\)\}.* and the cotangent is "
                                         r"PyTreeSpec\(\{'u': \*\}"):
        pull({"u": x})
    np.testing.assert_array_equal(pull({"u": x, "v": (1.0, x)})[0].values, [2 * 1 + 1 + 2 * 1, 2 * 2 + 1 + 2 * 2 * 2])


def test_a_tangent_or_cotangent_of_another_dtype_takes_the_values_dtype():
    """A float32 or integer tangent of a float64 value (given to jvp/vjp, or returned by a
    custom_jvp rule) is taken in the value's dtype: the derivatives keep the value's."""
    x = xr.DataArray([1.0, 2.0], dims="a")
    double = lambda v: v * 2.0  # noqa: E731
    for tangent in (xr.DataArray(np.array([1, 2]), dims="a"), xr.DataArray(np.array([1, 2], np.float32), dims="a")):
        _, got = lf.jvp(double, (x,), (tangent,))
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got.values, [2.0, 4.0])
        (back,) = lf.vjp(double, x)[1](tangent)
        assert back.dtype == np.float64

    @lf.custom_jvp
    def cube(v):
        return v ** 3

    @cube.defjvp
    def _(primals, tangents):
        (v,), (t,) = primals, tangents
        return cube(v), (3 * v ** 2 * t).astype(np.float32)

    _, got = lf.jvp(cube, (x,), (xr.ones_like(x),))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got.values, [3.0, 12.0])
