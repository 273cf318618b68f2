"""Derivative labels are right or absent (docs/autodiff.md, "Attrs and units of
derivatives"; labeled_func/units.py).

xarray passes names and attrs on through arithmetic, so an output may carry an input's
``name``, ``long_name`` or ``units`` that say nothing about the output.  The rule under
test: an output's name or attr counts only where it differs from that of every input (the
arguments, and the data the function names); units are written only where the output's
own units and the argument's are known; the output is called by its own long_name, else
its own name, else the function's name, else "the output".

Oracle: each expected label is written out by hand from that rule and the physics of the
case (a runoff in mm d-1 differentiated by a rate in d-1 is in mm), never taken from the
implementation.
"""

import functools

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func.units import Inputs, OutputLabel, label_output


def parameters():
    """A bucket model's parameters, each with units and a long_name."""
    return xr.Dataset({"smax": ((), 100.0, {"units": "mm", "long_name": "storage capacity"}),
                       "k": ((), 0.1, {"units": "d-1", "long_name": "outflow rate"})})


PRECIPITATION = xr.DataArray([5.0, 0.0, 3.0], dims="time", name="P")   # no units
STORAGE = xr.DataArray([10.0, 20.0, 30.0], dims="time")                # no units, no name
OBSERVED = xr.DataArray([1.0, 0.5, 0.8], dims="time", attrs={"units": "mm d-1"})


def bucket(p, P):
    """Total outflow of a linear bucket; the output starts as ``0.0 * p.smax``, so xarray
    names it smax and gives it smax's long_name and units (mm: right by luck here)."""
    out = 0.0 * p.smax
    S = 0.0 * p.smax
    for t in range(P.sizes["time"]):
        S = S + P.isel(time=t).variable
        Q = (p.k * S).variable  # a Variable keeps the name of `out`, as a plain array would
        S = S - Q
        out = out + Q
    return out


# --- the reported cases ---------------------------------------------------------------------------

def test_an_output_started_from_an_input_is_not_named_after_it():
    out = bucket(parameters(), PRECIPITATION)
    assert out.name == "smax" and out.attrs["units"] == "mm"  # what xarray passed on
    g = lf.grad(bucket)(parameters(), PRECIPITATION)
    # d out / dk is in mm d, but the output's "mm" is smax's: no units; named by the function
    assert g.k.attrs == {"long_name": "derivative of bucket with respect to k"}
    assert g.smax.attrs == {"long_name": "derivative of bucket with respect to smax"}


def test_units_inherited_from_the_argument_are_not_divided():
    def loss(params):
        Q = params.k * STORAGE           # inherits units d-1 (and long_name) from k
        return ((Q - 0.5) ** 2).sum()
    assert loss(parameters()).attrs["units"] == "d-1"
    g = lf.grad(loss)(parameters())
    # the truth is mm2 d-1 (Q in mm d-1), not "1": no units rather than a wrong one
    assert g.k.attrs == {"long_name": "derivative of loss with respect to k"}


def test_units_inherited_from_data_the_function_refers_to_are_not_used():
    def loss(k):
        return ((k * STORAGE).drop_attrs() - OBSERVED) ** 2   # OBSERVED's units pass on: mm d-1

    k = xr.DataArray(0.1, name="k", attrs={"units": "d-1"})
    assert loss(k).attrs == {"units": "mm d-1"}  # though the squared error is in mm2 d-2
    assert lf.jacrev(loss)(k).attrs == {"long_name": "derivative of loss with respect to k"}
    closed_over = OBSERVED.copy()
    scaled = lf.grad(lambda k: (((k * STORAGE).drop_attrs() - closed_over) ** 2).sum())(k)
    assert scaled.attrs == {"long_name": "derivative of the output with respect to k"}


# --- what the function set is honoured -------------------------------------------------------------

def squared_error(params):
    Q = params.k * STORAGE
    return ((Q - OBSERVED) ** 2).sum().assign_attrs(units="mm2 d-2", long_name="squared error of runoff")


def test_a_long_name_and_units_the_function_set_are_used():
    g = lf.grad(squared_error)(parameters())
    assert g.k.attrs == {"long_name": "derivative of squared error of runoff with respect to k", "units": "mm2 d-1"}
    assert g.smax.attrs == {"long_name": "derivative of squared error of runoff with respect to smax",
                            "units": "mm d-2"}


def test_a_name_the_function_set_is_used_and_units_are_divided_where_both_are_known():
    def runoff(params):
        return (params.k * STORAGE + 0.0 * params.smax).rename("Q").drop_attrs().assign_attrs(units="mm d-1")
    smax_without_units = parameters().assign(smax=parameters().smax.drop_attrs())
    for transform in (lf.jacrev, lf.jacfwd):
        jac = transform(runoff)(smax_without_units)
        assert jac.k.attrs == {"long_name": "derivative of Q with respect to k", "units": "mm"}
        assert jac.k.dims == ("time",)
        # smax's units are not known (missing is not dimensionless): no units
        assert jac.smax.attrs == {"long_name": "derivative of Q with respect to smax"}


def test_units_the_function_set_equal_to_an_inputs_are_not_evidence():
    # k * S in d-1 would say d-1 whether set or passed on: not used
    g = lf.grad(lambda p: (p.k * 2.0).assign_attrs(units="d-1"))(parameters())
    assert g.k.attrs == {"long_name": "derivative of the output with respect to k"}


def test_an_output_without_units_gives_no_units():
    # a missing units is unknown, not dimensionless: no K-1
    T = xr.DataArray([280.0, 290.0], dims="site", name="T", attrs={"units": "K"})
    g = lf.grad(lambda T: (T ** 2).sum().drop_attrs())(T)
    assert g.attrs == {"long_name": "derivative of the output with respect to T"}
    g = lf.grad(lambda T: (T ** 2).sum().drop_attrs().assign_attrs(units="K2"))(T)
    assert g.attrs == {"long_name": "derivative of the output with respect to T", "units": "K"}


def test_an_argument_without_units_gives_no_units():
    x = xr.DataArray([1.0, 2.0], dims="i", name="x", attrs={"long_name": "position"})
    g = lf.grad(lambda x: (x ** 2).sum().drop_attrs().assign_attrs(units="m2"))(x)
    assert g.attrs == {"long_name": "derivative of the output with respect to x"}


# --- how the output is called ---------------------------------------------------------------------

def test_the_function_name_then_the_output():
    def total(params):
        return (params.k * STORAGE).sum()  # named k, k's attrs: none of them its own

    assert lf.grad(total)(parameters()).k.attrs["long_name"] == "derivative of total with respect to k"
    lam = lf.grad(lambda params: (params.k * STORAGE).sum())(parameters())
    assert lam.k.attrs["long_name"] == "derivative of the output with respect to k"
    bound = functools.partial(lambda params, scale: (params.k * STORAGE * scale).sum(), scale=2.0)
    assert lf.grad(bound)(parameters()).k.attrs["long_name"] == "derivative of the output with respect to k"

    def scaled(params, scale):
        return (params.k * STORAGE * scale).sum()
    partial = lf.grad(functools.partial(scaled, scale=2.0))(parameters())
    assert partial.k.attrs["long_name"] == "derivative of scaled with respect to k"


def test_accessor_paths_follow_the_same_rule():
    def loss(params, storage):
        return (params.k * storage).sum()  # k's name and attrs passed on
    g = parameters().func.grad(loss, args=(STORAGE,))
    assert g.k.attrs == {"long_name": "derivative of loss with respect to k"}
    g = parameters().func.grad(loss, storage=STORAGE)  # bound with functools.partial
    assert g.k.attrs == {"long_name": "derivative of loss with respect to k"}
    g = parameters().func.grad(squared_error)
    assert g.k.attrs["units"] == "mm2 d-1"


# --- Datasets, Hessians, vmap -----------------------------------------------------------------------

def test_dataset_outputs_are_judged_per_variable():
    def fluxes(params):
        return xr.Dataset({
            "Q": (params.k * STORAGE).drop_attrs().assign_attrs(units="mm d-1", long_name="outflow"),
            "S": params.smax * 0.5 + 0.0 * params.k,  # smax's name dropped (k's differs), smax's attrs kept
        })
    jac = lf.jacrev(fluxes)(parameters())
    assert jac["Q"].k.attrs == {"long_name": "derivative of outflow with respect to k", "units": "mm"}
    assert jac["Q"].smax.attrs == {"long_name": "derivative of outflow with respect to smax", "units": "d-1"}
    # S's attrs are smax's: nothing of its own; its variable name S is its own
    assert jac["S"].smax.attrs == {"long_name": "derivative of S with respect to smax"}
    assert jac["S"].k.attrs == {"long_name": "derivative of S with respect to k"}
    again = lf.jacfwd(fluxes)(parameters())
    for out in ("Q", "S"):
        for var in ("k", "smax"):
            assert again[out][var].attrs == jac[out][var].attrs


def test_a_dataset_output_named_like_the_inputs_is_named_by_the_function():
    def doubled(params):
        return params * 2.0  # every variable keeps its name and attrs
    jac = lf.jacrev(doubled)(parameters())
    assert jac["k"]["k"].attrs == {"long_name": "derivative of doubled with respect to k"}


def test_hessians_follow_the_rule_twice():
    h = lf.hessian(squared_error)(parameters())
    assert h["k"]["k"].attrs == {"long_name": "second derivative of squared error of runoff with respect to k and k",
                                 "units": "mm2"}
    assert h["k"]["smax"].attrs == {
        "long_name": "second derivative of squared error of runoff with respect to k and smax", "units": "mm d-1"}

    def inherited(params):
        return ((params.k * STORAGE - 0.5) ** 2).sum()  # says d-1, k's units
    h = lf.hessian(inherited)(parameters())
    assert h["k"]["k"].attrs == {"long_name": "second derivative of inherited with respect to k and k"}
    m = lf.hessian(inherited, as_matrix=True)(parameters())
    assert m.attrs == {"long_name": "second derivative of inherited with respect to params"}
    k_only = parameters()[["k"]]
    m = lf.hessian(squared_error, as_matrix=True)(k_only)
    assert m.attrs == {"long_name": "second derivative of squared error of runoff with respect to params",
                       "units": "mm2"}


def test_vmap_of_grad_labels_as_grad():
    batch = xr.concat([parameters(), parameters() * 2.0], dim="sample", combine_attrs="override")
    batch["k"].attrs, batch["smax"].attrs = parameters().k.attrs, parameters().smax.attrs
    mapped = lf.vmap(lf.grad(bucket), dim="sample")(batch, PRECIPITATION)
    assert mapped.k.attrs == {"long_name": "derivative of bucket with respect to k"}
    mapped = lf.vmap(lf.grad(squared_error), dim="sample")(batch)
    assert mapped.k.attrs == {"long_name": "derivative of squared error of runoff with respect to k",
                              "units": "mm2 d-1"}


# --- sensitivity ----------------------------------------------------------------------------------

def test_dgsm_writes_no_vi_units_from_units_passed_on():
    rng = np.random.default_rng(0)
    samples = xr.Dataset({"a": ("sample", rng.uniform(0, 1, 50), {"units": "K"}),
                          "b": ("sample", rng.uniform(0, 1, 50), {"units": "m"})})
    inherited = lf.sensitivity.dgsm(lambda p: 3 * p.a + p.b, samples)  # says K, a's units
    assert "vi_units" not in inherited.coords
    own = lf.sensitivity.dgsm(lambda p: (3 * p.a + p.b).assign_attrs(units="W"), samples)
    assert own.vi_units.values.tolist() == ["W2 K-2", "W2 m-2"]
    partly = samples.assign(b=samples.b.drop_attrs())  # b's units unknown: not "1"
    assert "vi_units" not in lf.sensitivity.dgsm(lambda p: (3 * p.a + p.b).assign_attrs(units="W"), partly).coords


def test_local_elasticities_name_the_output_by_the_rule():
    t = xr.DataArray([0.0, 1.0, 2.0], dims="t")

    def decay(p):
        return p.amplitude * np.exp(-p.rate * t) + 0.0 * p.rate  # named rate, with rate's attrs
    params = xr.Dataset({"amplitude": ((), 2.0), "rate": ((), 0.5, {"units": "s-1", "long_name": "rate"})})
    e = lf.sensitivity.local(decay, params)
    assert e.amplitude.attrs["long_name"] == "elasticity of decay with respect to amplitude"


# --- the rule, directly ----------------------------------------------------------------------------

def test_label_output_reads_only_what_differs_from_every_input():
    p = parameters()
    inputs = Inputs((p, {"forcing": PRECIPITATION}))
    assert label_output("smax", dict(p.smax.attrs), inputs, bucket) == OutputLabel("bucket", None, False)
    assert label_output("P", {}, inputs, None) == OutputLabel("the output", None, False)
    assert label_output("time", {}, inputs, None).text == "the output"  # a dim's name
    assert label_output("runoff", {"units": "mm d-1", "long_name": "storage capacity"}, inputs, None) == \
        OutputLabel("runoff", "mm d-1", True)
    tree = xr.DataTree.from_dict({"/forcing": xr.Dataset({"E": ("time", [1.0], {"units": "mm"})})})
    assert label_output("E", {"units": "mm"}, Inputs((tree,)), None) == OutputLabel("the output", None, False)
    held = Inputs((), functools.partial(bucket, P=OBSERVED))
    assert label_output(None, {"units": "mm d-1"}, held, None).units is None


@pytest.mark.parametrize("value, other, same", [
    ("mm", "mm", True), ("mm", "mm d-1", False), ([1.0, 2.0], [1.0, 2.0], True),
    (np.array([1.0, 2.0]), np.array([1.0, 3.0]), False),
])
def test_inputs_compare_attr_values(value, other, same):
    inputs = Inputs((xr.DataArray(1.0, attrs={"key": other}),))
    assert inputs.carry("key", value) is same


class Calibration:
    """A loss as a method: its observations are the object's."""

    def __init__(self, observed):
        self.observed = observed

    def loss(self, k):
        return (((k * STORAGE).drop_attrs() - self.observed) ** 2).sum()  # the observations' mm d-1


def test_data_held_by_a_bound_methods_object_or_a_transformed_function_are_inputs():
    k = xr.DataArray(0.1, name="k", attrs={"units": "d-1"})
    calibration = Calibration(OBSERVED.copy())
    assert calibration.loss(k).attrs == {"units": "mm d-1"}
    assert lf.grad(calibration.loss)(k).attrs == {"long_name": "derivative of loss with respect to k"}
    jitted = lf.jit(calibration.loss)
    assert lf.grad(jitted)(k).attrs == {"long_name": "derivative of loss with respect to k"}
    per_time = lf.vmap(lambda k, o: ((k * 2.0).drop_attrs() - o) ** 2, in_dims=(None, "time"))
    assert lf.jacrev(lambda k: per_time(k, OBSERVED).sum())(k).attrs == {
        "long_name": "derivative of the output with respect to k"}


class Fixed:
    """Observations held by the class, read as self.OBSERVED."""

    OBSERVED = OBSERVED.copy()

    def loss(self, k):
        return (((k * STORAGE).drop_attrs() - self.OBSERVED) ** 2).sum()


def test_data_held_by_a_class_are_inputs():
    k = xr.DataArray(0.1, name="k", attrs={"units": "d-1"})
    assert Fixed().loss(k).attrs == {"units": "mm d-1"}
    assert lf.grad(Fixed().loss)(k).attrs == {"long_name": "derivative of loss with respect to k"}
