"""Messages for torch.func habits that xarray answers poorly: the mapped dim asked for inside
vmap, a misspelt dim, lf.cond's branches and predicate, finite differences inside a
transform.  Each names the culprit; lf.cond's accepted predicates are checked against the
Python ``if`` of the per-example loop."""
import numpy as np
import pytest
import scipy.differentiate
import scipy.optimize
import xarray as xr

import labeled_func as lf



def data():
    values = np.random.default_rng(7).normal(size=(3, 2))  # the same each call
    return xr.DataArray(values, dims=("sample", "t"), coords={"sample": [10, 20, 30]})


# --- the mapped dim asked for inside the function ----------------------------------------------
@pytest.mark.parametrize("inside", [
    lambda v: v.sum("sample"),
    lambda v: v.mean("sample"),
    lambda v: v.isel(sample=0),
    lambda v: v.transpose("sample", "t"),
], ids=["sum", "mean", "isel", "transpose"])
def test_reducing_over_the_mapped_dim_says_vmap_hides_it(inside):
    with pytest.raises(ValueError, match=r"vmap over dim 'sample': the function asked for dim 'sample', which vmap hides") as info:
        lf.vmap(inside, dim="sample")(data())
    assert "on the result of the vmap" in str(info.value)
    assert isinstance(info.value.__cause__, ValueError)  # xarray's own message, kept


def test_looking_up_the_mapped_dim_size_inside_says_vmap_hides_it():
    with pytest.raises(KeyError, match="vmap hides") as info:
        lf.vmap(lambda v: v * v.sizes["sample"], dim="sample")(data())
    assert isinstance(info.value.__cause__, KeyError)


def test_the_inner_level_of_nested_vmaps_names_its_own_dim():
    with pytest.raises(ValueError, match=r"vmap over dim 'sample'"):
        lf.vmap(lambda v: v.sum("sample"), dim=("t", "sample"))(data())


def test_an_unrelated_xarray_error_is_left_alone():
    with pytest.raises(ValueError, match="not found in array dimensions") as info:
        lf.vmap(lambda v: v.sum("time"), dim="sample")(data())
    assert "vmap hides" not in str(info.value)


# --- a misspelt dim ---------------------------------------------------------------------------
def test_a_misspelt_dim_suggests_the_close_name_before_axis_size():
    with pytest.raises(ValueError, match="did you mean 'sample'") as info:
        lf.vmap(lambda v: v.sum("t"), dim="smaple")(data())
    message = str(info.value)
    assert message.index("did you mean") < message.index("axis_size=")


def test_a_misspelt_in_dims_entry_suggests_the_close_name():
    with pytest.raises(ValueError, match=r"in_dims maps v over dim 'sampel'.*did you mean 'sample'"):
        lf.vmap(lambda v: v.sum("t"), in_dims=("sampel",))(data())


def test_no_suggestion_when_nothing_is_close():
    with pytest.raises(ValueError, match="no argument has it") as info:
        lf.vmap(lambda v: v, dim="zz")(data())
    assert "did you mean" not in str(info.value)


# --- lf.cond ----------------------------------------------------------------------------------
def in_vmap(branch_true, branch_false, predicate=lambda v: v.sum() > 0):
    return lf.vmap(lambda v: lf.cond(predicate(v), branch_true, branch_false, v), dim="sample")(data())


def summed(v):
    return v.sum()


def test_cond_branches_with_different_dims_name_the_branch_and_dims():
    with pytest.raises(TypeError, match=r"different dims: true_fn returns a DataArray with dims \(t: 2\) and false_fn \(summed\)"):
        in_vmap(lambda v: v, summed)


def test_cond_branches_with_different_dtypes_name_them():
    with pytest.raises(TypeError, match="different dtypes: true_fn returns dtype float64 and false_fn dtype bool"):
        in_vmap(lambda v: v, lambda v: v > 0)


def test_cond_branches_with_different_structures_name_them():
    with pytest.raises(TypeError, match="different structures: true_fn returns a tuple of 2 and false_fn one DataArray"):
        in_vmap(lambda v: (v, v), lambda v: v)


def test_cond_names_the_output_that_differs():
    with pytest.raises(TypeError, match=r"different dims for output\[1\]"):
        in_vmap(lambda v: (v, v), lambda v: (v, v.sum()))


def test_cond_names_the_data_variable_that_differs():
    with pytest.raises(TypeError, match="in data variable 'a'"):
        in_vmap(lambda v: xr.Dataset({"a": v}), lambda v: xr.Dataset({"a": v.sum()}))


def test_cond_accepts_dims_in_another_order_and_a_python_number_for_a_0d_output():
    x = xr.DataArray(np.random.default_rng(8).normal(size=(3, 2, 4)), dims=("sample", "t", "u"))
    out = lf.vmap(lambda v: lf.cond(v.sum() > 0, lambda a: a, lambda a: a.T * 2, v), dim="sample")(x)
    expected = xr.concat([v if v.sum() > 0 else v * 2 for v in (x.isel(sample=i) for i in range(3))], dim="sample")
    xr.testing.assert_allclose(out.transpose(*expected.dims), expected)
    out = in_vmap(summed, lambda v: 0.0)
    d = data()
    np.testing.assert_allclose(out.values, [float(d[i].sum()) if d[i].sum() > 0 else 0.0 for i in range(3)])


@pytest.mark.parametrize("make", [lambda v: v.sum(), lambda v: (v.sum() > 0).astype(int)], ids=["float", "int"])
def test_cond_takes_a_number_as_true_where_not_zero_like_the_loop(make):
    out = in_vmap(lambda v: v * 2, lambda v: -v, predicate=make)
    d = data()
    expected = xr.concat([d[i] * 2 if make(d[i]) else -d[i] for i in range(3)], dim="sample")
    xr.testing.assert_allclose(out, expected)


def test_cond_refuses_a_complex_or_string_predicate():
    with pytest.raises(TypeError, match="predicate must be boolean.*dtype complex128"):
        in_vmap(lambda v: v, lambda v: -v, predicate=lambda v: v.sum() + 1j)
    with pytest.raises(TypeError, match="predicate must be a bool.*got str"):
        lf.cond("yes", lambda v: v, lambda v: -v, 1.0)


def test_cond_refuses_a_predicate_with_dims_mapped_or_not():
    with pytest.raises(ValueError, match=r"one boolean per example, but it has dims \('t',\)"):
        in_vmap(lambda v: v, lambda v: -v, predicate=lambda v: v > 0)
    with pytest.raises(ValueError, match=r"it has dims \('t',\)"):
        lf.cond(data()[0] > 0, lambda v: v, lambda v: -v, 1.0)


# --- finite differences inside a transform ------------------------------------------------------
def approx(v):
    return v.sum() * scipy.optimize.approx_fprime(v, lambda z: (z ** 2).sum()).sum()


@pytest.mark.parametrize("transform", [lf.grad, lf.jacfwd, lambda f: lf.vmap(f, dim="p")],
                         ids=["grad", "jacfwd", "vmap"])
def test_approx_fprime_inside_a_transform_names_the_replacement(transform):
    x = xr.DataArray([1.0, 2.0, 3.0], dims="p")
    with pytest.raises(lf.ConversionError, match=r"inside scipy\.optimize\.approx_fprime.*finite differences") as info:
        transform(approx)(x)
    assert "lf.jacfwd(f)(x) for few parameters" in str(info.value)
    assert "lf.grad(f)(x) for a scalar output" in str(info.value)


@pytest.mark.parametrize("helper", [
    lambda v: scipy.optimize.check_grad(lambda z: (z ** 2).sum(), lambda z: 2 * z, v),
    lambda v: scipy.differentiate.derivative(np.sin, v).df.sum(),
], ids=["check_grad", "differentiate.derivative"])
def test_other_finite_difference_helpers_get_the_same_advice(helper):
    with pytest.raises(lf.ConversionError, match="lf.jacfwd"):
        lf.grad(helper)(xr.DataArray([1.0, 2.0], dims="p"))


def test_other_scipy_conversions_keep_the_default_advice():
    import scipy.special
    with pytest.raises(lf.ConversionError) as info:
        lf.grad(lambda v: scipy.special.logsumexp(np.asarray(v)))(xr.DataArray([1.0, 2.0], dims="p"))
    assert "finite differences" not in str(info.value)
