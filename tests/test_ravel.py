"""``lf.ravel``: labeled values <-> one flat vector.

Oracles: the input itself (``unravel(ravel(x))`` is identical to ``x``), NumPy's own
concatenation of the flattened values, gradients and Jacobians written by hand, and the
per-example loop for vmap.
"""

import array_api_strict as xps
import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func.ravel import element_attrs, element_labels


def params():
    return xr.Dataset(
        {
            "rate": ((), 0.5, {"units": "s-1"}),
            "curve": (("t", "k"), np.arange(6.0).reshape(3, 2) / 7, {"long_name": "a curve"}),
            "weights": ("k", np.array([1.5, -2.0], dtype=np.float32)),
        },
        coords={"t": [10, 20, 30], "k": ["a", "b"], "label": ("t", ["x", "y", "z"])},
        attrs={"model": "test"},
    )


def tree():
    return {
        "p": params(),
        "extra": (xr.DataArray([3.0, 4.0], dims="j", name="named", attrs={"units": "m"}), np.ones((2, 2))),
        "nothing": None,
    }


def numpy_reference(tree):
    """The flat vector by NumPy alone: optree's leaf order (dict keys sorted), Dataset
    variables in order, C order, promoted dtype."""
    p = tree["p"]
    arrays = [tree["extra"][0].values, tree["extra"][1], p.rate.values, p.curve.values, p.weights.values]
    return np.concatenate([np.ravel(a) for a in arrays]).astype(np.result_type(*arrays))


# --- the round trip -----------------------------------------------------------------------------


def test_unravel_of_ravel_is_the_tree_itself():
    t = tree()
    flat, unravel = lf.ravel(t)
    back = unravel(flat)
    assert set(back) == set(t) and back["nothing"] is None
    xr.testing.assert_identical(back["p"], t["p"])  # dims, coords, attrs, values
    assert back["p"].attrs == {"model": "test"} and back["p"].curve.attrs == {"long_name": "a curve"}
    for var in t["p"].data_vars:
        assert back["p"][var].dtype == t["p"][var].dtype, var
    xr.testing.assert_identical(back["extra"][0], t["extra"][0])
    assert back["extra"][0].name == "named"
    np.testing.assert_array_equal(back["extra"][1], t["extra"][1])
    assert isinstance(back["extra"], tuple)


def test_the_flat_vector_is_numpys_concatenation_in_the_promoted_dtype():
    t = tree()
    flat, _ = lf.ravel(t)
    expected = numpy_reference(t)
    assert isinstance(flat, np.ndarray) and flat.ndim == 1
    assert flat.dtype == np.float64  # float32 weights promoted with float64
    np.testing.assert_array_equal(flat, expected)


def test_unravel_puts_new_values_in_place_and_casts_back():
    p = params()
    flat, unravel = lf.ravel(p)
    back = unravel(flat * 2 + 1)
    for var in p.data_vars:
        np.testing.assert_allclose(back[var].values, (p[var].values.astype(np.float64) * 2 + 1).astype(p[var].dtype))
        assert back[var].dtype == p[var].dtype
    assert back.weights.dtype == np.float32


def test_integer_and_float32_leaves_promote_like_numpy():
    t = {"count": np.array([1, 2], dtype=np.int64), "x": np.array([0.5], dtype=np.float32)}
    flat, unravel = lf.ravel(t)
    assert flat.dtype == np.result_type(np.int64, np.float32) == np.float64
    back = unravel(flat)
    assert back["count"].dtype == np.int64 and back["x"].dtype == np.float32
    only32, _ = lf.ravel({"x": np.ones(2, dtype=np.float32)})
    assert only32.dtype == np.float32


def test_an_empty_tree_gives_an_empty_float_vector():
    flat, unravel = lf.ravel({})
    assert flat.shape == (0,) and flat.dtype == np.float64
    assert unravel(flat) == {}


def test_a_dataarray_vector_is_accepted_by_unravel():
    x = xr.DataArray([[1.0, 2.0]], dims=("a", "b"))
    flat, unravel = lf.ravel(x)
    xr.testing.assert_identical(unravel(xr.DataArray(flat, dims="param")), x)


def test_array_api_strict_stays_in_its_library():
    a = xps.asarray([1.0, 2.0])
    flat, unravel = lf.ravel({"a": a, "b": xps.asarray([[3.0]])})
    assert type(flat).__module__.startswith("array_api_strict")
    assert np.asarray(xps.asarray(flat) == xps.asarray([1.0, 2.0, 3.0])).all()
    assert unravel(flat)["b"].shape == (1, 1)


def test_dask_backed_values_stay_lazy():
    p = params().chunk()
    flat, unravel = lf.ravel(p)
    assert type(flat).__module__.startswith("dask")
    np.testing.assert_array_equal(flat.compute(), lf.ravel(params())[0])
    assert unravel(flat).curve.chunks is not None


def test_element_labels_and_attrs_follow_the_vector():
    p = params()
    labels = element_labels(p)
    assert labels == ["rate", "curve[0,0]", "curve[0,1]", "curve[1,0]", "curve[1,1]", "curve[2,0]", "curve[2,1]",
                      "weights[0]", "weights[1]"]
    assert len(labels) == lf.ravel(p)[0].size
    assert element_attrs(p)[0] == {"units": "s-1"} and element_attrs(p)[1] == {"long_name": "a curve"}
    assert element_labels({"a": np.zeros(2), "b": xr.DataArray(1.0, name="ignored")}) == ["a[0]", "a[1]", "b"]


# --- under transforms ---------------------------------------------------------------------------


def test_grad_through_ravel_equals_the_gradient_written_by_hand():
    p = params()

    def loss(p):
        flat, _ = lf.ravel(p)
        return (flat ** 3).sum()

    g = lf.grad(loss)(p)
    for var in p.data_vars:
        expected = 3 * p[var].values.astype(np.float64) ** 2
        np.testing.assert_allclose(g[var].values, expected.astype(p[var].dtype), rtol=1e-6)


def test_jacobian_of_unravel_is_the_identity():
    p = params().astype(np.float64)
    flat, unravel = lf.ravel(p)
    jac = lf.jacfwd(lambda v: lf.ravel(unravel(v))[0])(flat)
    np.testing.assert_array_equal(jac, np.eye(flat.size))
    jac = lf.jacrev(lambda v: lf.ravel(unravel(v) * 2.0)[0])(flat)
    np.testing.assert_array_equal(jac, 2 * np.eye(flat.size))


def test_vmap_of_ravel_equals_the_loop():
    rng = np.random.default_rng(0)
    batch = xr.Dataset({"a": (("sample", "i"), rng.normal(size=(4, 3))), "b": ("sample", rng.normal(size=4))})
    mapped = lf.vmap(lambda p: lf.ravel(p)[0], dim="sample")(batch)
    loop = np.stack([lf.ravel(batch.isel(sample=k))[0] for k in range(4)])
    np.testing.assert_array_equal(mapped, loop)

    def roundtrip(p):
        flat, unravel = lf.ravel(p)
        return unravel(flat * 2)

    xr.testing.assert_identical(lf.vmap(roundtrip, dim="sample")(batch), batch * 2)


# --- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize("leaf, word", [(0.5, "number"), (np.float64(0.5), "number"), ("abc", "str"),
                                        (np.array(["a", "b"]), "dtype")])
def test_a_leaf_that_is_not_a_numeric_array_raises_naming_its_path(leaf, word):
    with pytest.raises(TypeError, match=r"ravel: tree\['params'\]\['k'\].*" + word):
        lf.ravel({"params": {"k": leaf, "x": np.ones(2)}})


def test_a_datatree_raises_type_error():
    with pytest.raises(TypeError, match=r"ravel: tree\[0\] is a DataTree"):
        lf.ravel((xr.DataTree(xr.Dataset({"a": 1.0})),))


def test_a_non_numeric_dataset_variable_raises_naming_it():
    ds = xr.Dataset({"ok": 1.0, "when": ("t", np.array(["2020-01-01"], dtype="datetime64[ns]"))})
    with pytest.raises(TypeError, match=r"tree\['when'\] has dtype datetime64"):
        lf.ravel(ds)


def test_two_array_libraries_raise_value_error_naming_both():
    with pytest.raises(ValueError, match=r"ravel: .*tree\['a'\] is numpy.*tree\['b'\] is array_api_strict"):
        lf.ravel({"a": np.ones(2), "b": xps.ones(2)})


def test_unravel_of_a_wrong_length_raises_naming_the_sizes():
    _, unravel = lf.ravel(params())
    with pytest.raises(ValueError, match=r"unravel: expected a 1-D array of 9 values.*got shape \(8,\)"):
        unravel(np.zeros(8))
    with pytest.raises(ValueError, match=r"got shape \(9, 1\)"):
        unravel(np.zeros((9, 1)))


def test_a_dataset_of_complex_and_real_variables_unravels_without_a_complex_warning():
    """The flat vector is complex; a real variable's piece goes back as its real part (its
    imaginary part is the 0 the ravel gave it), with no ComplexWarning, bit for bit."""
    import warnings

    ds = xr.Dataset({"a": ("x", np.array([1 + 2j, 3j])), "b": ("x", np.array([1.0, -0.0])),
                     "c": ("x", np.array([1.5, 2.0], dtype=np.float32))})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flat, unravel = lf.ravel(ds)
        back = unravel(flat)
    assert flat.dtype == np.complex128
    xr.testing.assert_identical(back, ds)
    assert np.signbit(back.b.values[1])
