"""``obj.func.<transform>`` equals the functional transform called with ``obj`` first.

The oracle is the functional API (``lf.vmap(f, dim)(obj, *args)``,
``lf.grad(f)(obj, *args)``, ...), on DataArray, Dataset and DataTree; a few values
are also checked by hand so that argument order and ``argnums`` cannot both be wrong.
"""

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func.accessor import FuncAccessor


# --- objects ---------------------------------------------------------------------------------
def make_dataarray():
    rng = np.random.default_rng(0)
    return xr.DataArray(rng.normal(size=(4, 3)), dims=("sample", "t"),
                        coords={"sample": [10, 20, 30, 40], "t": [0.0, 0.5, 1.0]}, name="x", attrs={"units": "m"})


def make_dataset():
    rng = np.random.default_rng(1)
    return xr.Dataset(
        {"a": (("sample", "t"), rng.normal(size=(4, 3))), "b": ("t", rng.normal(size=3))},
        coords={"sample": [10, 20, 30, 40]},
    )


def make_datatree():
    rng = np.random.default_rng(2)
    return xr.DataTree.from_dict({
        "/": xr.Dataset({"a": (("sample", "t"), rng.normal(size=(4, 3)))}, coords={"sample": [1, 2, 3, 4]}),
        "/child": xr.Dataset({"b": (("sample", "k"), rng.normal(size=(4, 2)))}),
    })


WEIGHTS = xr.DataArray([0.5, -1.0, 2.0], dims="t")


def total(obj):
    """A scalar loss of a DataArray or a Dataset."""
    if isinstance(obj, xr.Dataset):
        return sum((np.sin(v) * v).sum() for v in obj.data_vars.values())
    return (np.sin(obj) * obj).sum()


def weighted(obj, w):
    """Depends on both arguments, so swapping them changes the result."""
    if isinstance(obj, xr.Dataset):
        return sum((v ** 2 * w).sum() for v in obj.data_vars.values())
    return (obj ** 2 * w).sum()


def elementwise(obj, w=1.0):
    return np.sin(obj) * w


def assert_same(actual, expected):
    """Identical xarray objects / arrays / numbers, recursing into tuples and dicts."""
    if isinstance(expected, (xr.DataArray, xr.Dataset, xr.DataTree)):
        assert type(actual) is type(expected)
        xr.testing.assert_identical(actual, expected)
    elif isinstance(expected, (tuple, list)):
        assert type(actual) is type(expected) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same(a, e)
    elif isinstance(expected, dict):
        assert actual.keys() == expected.keys()
        for key in expected:
            assert_same(actual[key], expected[key])
    else:
        np.testing.assert_array_equal(np.asarray(actual), np.asarray(expected))


LABELED = {"DataArray": make_dataarray, "Dataset": make_dataset}


@pytest.fixture(params=list(LABELED))
def obj(request):
    return LABELED[request.param]()


# --- registration ------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [xr.DataArray, xr.Dataset, xr.DataTree])
def test_accessor_is_registered_on_each_type(cls):
    assert cls.func is FuncAccessor


@pytest.mark.parametrize("value", [
    xr.DataArray(np.array(["a", "b"]), dims="i"),  # not differentiable, still an accessor
    xr.DataArray(np.arange(3), dims="i"),
    xr.Dataset(),
    xr.DataTree(),
])
def test_accessor_construction_never_fails(value):
    accessor = value.func
    assert isinstance(accessor, FuncAccessor)
    assert value.func is accessor  # xarray caches it per object


# --- vmap --------------------------------------------------------------------------------------
def test_vmap_equals_functional(obj):
    def centred(x):
        return x - x.mean("t")

    assert_same(obj.func.vmap(centred, "sample"), lf.vmap(centred, "sample")(obj))


def test_vmap_passes_args_after_the_object(obj):
    # w has no "sample": shared; m has it: mapped alongside obj
    m = xr.DataArray([1.0, 2.0, 3.0, 4.0], dims="sample", coords={"sample": [10, 20, 30, 40]})

    def f(x, w, m):
        return x * w + m

    actual = obj.func.vmap(f, "sample", args=(WEIGHTS, m))
    assert_same(actual, lf.vmap(f, "sample")(obj, WEIGHTS, m))
    expected = obj * WEIGHTS + m
    assert_same(actual, expected.transpose("sample", ...))


def test_vmap_passes_options():
    x = make_dataarray()

    def row_norm(x):
        return np.sqrt((x ** 2).sum("t"))

    assert_same(x.func.vmap(row_norm, "sample", chunk_size=3), lf.vmap(row_norm, "sample")(x))
    assert_same(x.func.vmap(elementwise, "sample", out_dims=1), lf.vmap(elementwise, "sample", out_dims=1)(x))
    with pytest.raises(ValueError, match="randomness"):
        x.func.vmap(elementwise, "sample", randomness="sometimes")


def test_vmap_on_datatree_equals_functional():
    tree = make_datatree()

    def f(node):
        return node - node.mean()

    actual = tree.func.vmap(f, "sample")
    assert isinstance(actual, xr.DataTree)
    assert_same(actual, lf.vmap(f, "sample")(tree))
    # per sample: each node's values minus that sample's mean over all of the node's values
    a = tree["a"]
    xr.testing.assert_allclose(actual["a"], (a - a.mean("t")).transpose("sample", ...))
    b = tree["child"]["b"]
    xr.testing.assert_allclose(actual["child"]["b"], (b - b.mean("k")).transpose("sample", ...))


def test_vmap_on_datatree_passes_args():
    tree = make_datatree()
    scale = xr.DataArray([1.0, 2.0, 3.0, 4.0], dims="sample", coords={"sample": [1, 2, 3, 4]})

    def f(node, scale):
        return node * scale

    assert_same(tree.func.vmap(f, "sample", args=(scale,)), lf.vmap(f, "sample")(tree, scale))


# --- gradients ------------------------------------------------------------------------------
def test_grad_equals_functional(obj):
    assert_same(obj.func.grad(total), lf.grad(total)(obj))


def test_grad_differentiates_the_object_not_args(obj):
    actual = obj.func.grad(weighted, args=(WEIGHTS,))
    assert_same(actual, lf.grad(weighted, argnums=0)(obj, WEIGHTS))
    # d/dx sum(x**2 * w) = 2 x w
    expected = (2 * obj * WEIGHTS).transpose(*obj.dims) if isinstance(obj, xr.DataArray) else \
        xr.Dataset({k: (2 * v * WEIGHTS).transpose(*v.dims) for k, v in obj.data_vars.items()})
    xr.testing.assert_allclose(actual, expected)


def test_grad_with_aux():
    x = make_dataarray()

    def loss(x):
        value = total(x)
        return value, {"value": value}

    actual = x.func.grad(loss, has_aux=True)
    assert_same(actual, lf.grad(loss, has_aux=True)(x))


def test_grad_and_value_equals_functional(obj):
    actual = obj.func.grad_and_value(weighted, args=(WEIGHTS,))
    assert_same(actual, lf.grad_and_value(weighted)(obj, WEIGHTS))
    assert float(actual[1]) == pytest.approx(float(weighted(obj, WEIGHTS)))


def test_grad_on_datatree_is_a_clear_type_error():
    tree = make_datatree()
    with pytest.raises(TypeError, match="DataTree") as info:
        tree.func.grad(lambda t: t["a"].sum())
    assert "dataset" in str(info.value).lower()  # says what to differentiate instead


@pytest.mark.parametrize("method", ["grad", "grad_and_value", "jacrev", "jacfwd", "hessian", "vjp", "jvp"])
def test_every_differentiating_method_rejects_a_datatree(method):
    tree = make_datatree()
    extra = (tree,) if method == "jvp" else ()  # the tangent
    with pytest.raises(TypeError, match="is a DataTree; differentiate with respect to its datasets"):
        getattr(tree.func, method)(lambda t: t["a"].sum(), *extra)


# --- vjp / jvp -----------------------------------------------------------------------------
def test_vjp_equals_functional(obj):
    out, vjp_fn = obj.func.vjp(elementwise)
    expected_out, expected_fn = lf.vjp(elementwise, obj)
    assert_same(out, expected_out)
    cotangent = xr.ones_like(out) * 0.5
    assert_same(vjp_fn(cotangent), expected_fn(cotangent))


def test_vjp_holds_args_fixed():
    x = make_dataarray()
    out, vjp_fn = x.func.vjp(elementwise, args=(WEIGHTS,))
    expected_out, expected_fn = lf.vjp(lambda x: elementwise(x, WEIGHTS), x)
    assert_same(out, expected_out)
    cotangents = vjp_fn(xr.ones_like(out))
    assert len(cotangents) == 1  # one per primal: the object only
    assert_same(cotangents, expected_fn(xr.ones_like(out)))
    xr.testing.assert_allclose(cotangents[0], (np.cos(x) * WEIGHTS).transpose(*x.dims))


def test_jvp_equals_functional(obj):
    tangent = xr.ones_like(obj)
    assert_same(obj.func.jvp(elementwise, tangent), lf.jvp(elementwise, (obj,), (tangent,)))


def test_jvp_holds_args_fixed():
    x = make_dataarray()
    tangent = xr.full_like(x, 2.0)
    out, tangent_out = x.func.jvp(elementwise, tangent, args=(WEIGHTS,))
    assert_same((out, tangent_out), lf.jvp(lambda x: elementwise(x, WEIGHTS), (x,), (tangent,)))
    xr.testing.assert_allclose(tangent_out, (2.0 * np.cos(x) * WEIGHTS).transpose(*x.dims))


def test_jvp_and_vjp_with_aux():
    x = make_dataarray()

    def f(x):
        return np.sin(x), x.sum()

    assert_same(x.func.jvp(f, xr.ones_like(x), has_aux=True)[::2], lf.jvp(f, (x,), (xr.ones_like(x),), has_aux=True)[::2])
    out, _, aux = x.func.vjp(f, has_aux=True)
    expected_out, _, expected_aux = lf.vjp(f, x, has_aux=True)
    assert_same((out, aux), (expected_out, expected_aux))


# --- Jacobians and Hessians ---------------------------------------------------------------
@pytest.mark.parametrize("method", ["jacrev", "jacfwd"])
def test_jacobians_equal_functional(obj, method):
    def f(x, w):
        return elementwise(x, w).sum("t") if isinstance(x, xr.DataArray) else (x.a * w).sum("t")

    actual = getattr(obj.func, method)(f, args=(WEIGHTS,))
    assert_same(actual, getattr(lf, method)(f)(obj, WEIGHTS))


@pytest.mark.parametrize("method", ["jacrev", "jacfwd"])
def test_jacobian_options_pass_through(method):
    x = make_dataarray().isel(sample=0, drop=True)
    actual = getattr(x.func, method)(np.sin, wrt_suffix="_in")
    assert actual.dims == ("t", "t_in")
    assert_same(actual, getattr(lf, method)(np.sin, wrt_suffix="_in")(x))
    np.testing.assert_allclose(actual.values, np.diag(np.cos(x.values)))


def test_hessian_equals_functional(obj):
    actual = obj.func.hessian(weighted, args=(WEIGHTS,))
    assert_same(actual, lf.hessian(weighted)(obj, WEIGHTS))


def test_hessian_values():
    p = xr.DataArray([1.0, 2.0, 3.0], dims="param", coords={"param": ["a", "b", "c"]})
    data = xr.DataArray([0.5, -0.5, 1.0], dims="param")
    H = p.func.hessian(lambda p, data: (p ** 3 * data).sum(), args=(data,))
    assert H.dims == ("param", "param_wrt")
    np.testing.assert_allclose(H.values, np.diag(6 * p.values * data.values))
    assert list(H["param_wrt"].values) == ["a", "b", "c"]


# --- keyword arguments split as xarray's .pipe would, and the methods added with them ---------------
def test_keyword_arguments_go_to_the_function_and_options_to_the_transform():
    x = xr.DataArray(np.arange(6.0).reshape(3, 2), dims=("sample", "t"))

    def weighted(x, *, scale, shift=0.0):
        return scale * (x ** 2).sum("t") + shift

    mapped = x.func.vmap(weighted, "sample", scale=2.0, kwargs={"shift": 1.0}, chunk_size=2)
    expected = xr.concat([weighted(x.isel(sample=i), scale=2.0, shift=1.0) for i in range(3)], "sample")
    xr.testing.assert_allclose(mapped, expected)
    gradient = x.isel(sample=0).func.grad(lambda v, scale: scale * (v ** 3).sum(), scale=3.0)
    np.testing.assert_allclose(gradient.values, 9.0 * x.isel(sample=0).values ** 2)
    jacobian = x.isel(sample=1).func.jacrev(lambda v, k: k * v ** 2, k=0.5, wrt_suffix="_in")
    assert jacobian.dims == ("t", "t_in")
    np.testing.assert_allclose(jacobian.values, np.diag(x.isel(sample=1).values))


def test_a_name_both_option_and_parameter_is_a_type_error_naming_it():
    x = xr.DataArray(np.ones((3, 2)), dims=("sample", "t"))

    def f(x, chunk_size):
        return x * chunk_size

    with pytest.raises(TypeError, match=r"'chunk_size' is both an option of lf.vmap and a parameter of f(.|\n)*kwargs="):
        x.func.vmap(f, "sample", chunk_size=2)
    out = x.func.vmap(f, "sample", kwargs={"chunk_size": 2})  # the way to give it to f
    np.testing.assert_allclose(out.values, 2.0)
    with pytest.raises(TypeError, match="'scale' given both by name and in kwargs="):
        x.func.vmap(lambda x, scale: x * scale, "sample", scale=1.0, kwargs={"scale": 2.0})


def test_vmap_through_the_accessor_takes_in_dims_without_dim():
    x = xr.DataArray(np.arange(6.0).reshape(3, 2), dims=("sample", "t"))
    w = xr.DataArray([1.0, -1.0], dims="t")
    out = x.func.vmap(lambda x, w: (x * w).sum("t"), in_dims=("sample", None), args=(w,))
    np.testing.assert_allclose(out.values, (x * w).sum("t").values)


def test_linearize_jit_dgsm_and_local_equal_the_functional_calls():
    x = xr.DataArray([0.5, 1.0, 2.0], dims="i")
    out, jvp_fn = x.func.linearize(lambda x, k: k * np.sin(x), args=(2.0,))
    _, expected = lf.jvp(lambda x: 2.0 * np.sin(x), (x,), (xr.ones_like(x),))
    xr.testing.assert_allclose(jvp_fn(xr.ones_like(x)), expected)

    samples = xr.Dataset({"a": ("sample", np.linspace(0, 1, 50)), "b": ("sample", np.linspace(1, 2, 50))})
    per_sample = lf.vmap(lf.grad(lambda p: (p.a * p.b) ** 2), dim="sample")
    first = samples.func.jit(per_sample)
    again = samples.func.jit(per_sample)
    xr.testing.assert_allclose(first, per_sample(samples))
    xr.testing.assert_allclose(again, first)
    from labeled_func import accessor
    assert accessor._jitted(per_sample, ()).traces == 1  # the second call replayed

    model = lambda p: p.a ** 2 + 3 * p.b  # noqa: E731
    xr.testing.assert_allclose(samples.func.dgsm(model, seed=0), lf.sensitivity.dgsm(model, samples, seed=0))
    params = xr.Dataset({"a": 2.0, "b": 1.0})
    xr.testing.assert_allclose(params.func.local(model), lf.sensitivity.local(model, params))
