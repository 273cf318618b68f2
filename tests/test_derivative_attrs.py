"""What derivatives say about themselves: attrs and units (docs/autodiff.md, "Attrs and
units of derivatives"), and pint Quantities refused.

Oracle for the units: the rule "output units / argument units" worked out by hand in
CF/UDUNITS notation for each case (K-1 for a loss that says it is dimensionless,
``units="1"``, of a temperature in K, m s-1 for metres per second, ...); every transform
must give the same answer.  Which output attrs count (only those the function set itself)
is tested in test_derivative_labels.py.
"""

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func.units import OutputLabel, derivative_attrs, divide_units

TEMPERATURE = {"units": "K", "standard_name": "air_temperature", "long_name": "Air temperature",
               "valid_range": [150.0, 350.0], "_FillValue": -999.0}


def temperature():
    return xr.DataArray([280.0, 290.0, 300.0], dims="site", coords={"site": [1, 2, 3]}, name="T",
                        attrs=dict(TEMPERATURE))


def loss(T):
    """A dimensionless loss that says so: T's attrs (xarray passes them on) dropped, units "1"."""
    return (((T - 285.0) / 10.0) ** 2).sum().drop_attrs().assign_attrs(units="1")


def speed(T):
    """An output in m s-1 named 'u'."""
    return (T * 0.1).rename("u").drop_attrs().assign_attrs(units="m s-1")


# --- the rule, on strings ------------------------------------------------------------------------

@pytest.mark.parametrize("numerator, denominators, expected", [
    (None, ("K",), "K-1"),
    ("1", ("K",), "K-1"),
    ("", ("K",), "K-1"),
    ("m", ("s",), "m s-1"),
    ("K", ("K",), "1"),
    ("m s-1", ("s",), "m s-2"),
    ("m/s", ("m",), "s-1"),
    ("kg m-2 s-1", ("kg m-2",), "s-1"),
    ("m^2", ("m",), "m"),
    ("m**2 s**-2", ("m", "m"), "s-2"),
    ("m.s-1", ("s-1",), "m"),
    ("1", ("K", "K"), "K-2"),
    ("1", ("K", "s"), "K-1 s-1"),
    ("m", (None,), "m"),
    ("days since 2000-01-01", ("m",), "days m-1"),
    ("1e-3 kg", ("s",), "(1e-3 kg) s-1"),
    ("1e-3 kg", ("1e-3 kg",), "1"),
    ("m", ("(m/s) K",), "m ((m/s) K)-1"),
    ("m", ("(weird)",), "m (weird)-1"),
])
def test_divide_units(numerator, denominators, expected):
    assert divide_units(numerator, *denominators) == expected


def test_no_units_anywhere_gives_no_units():
    assert divide_units(None, None) is None
    assert "units" not in derivative_attrs(OutputLabel("f", None, True), "x", {"long_name": "x"})


# --- per transform ---------------------------------------------------------------------------------

def assert_derivative_attrs(result, units, long_name):
    assert result.attrs == {"units": units, "long_name": long_name}, result.attrs


def test_grad_of_a_dimensionless_loss_is_per_kelvin_and_forgets_the_argument():
    g = lf.grad(loss)(temperature())
    assert_derivative_attrs(g, "K-1", "derivative of loss with respect to T")
    assert g.name == "T"  # the gradient still mirrors the argument's name and coords
    assert g.site.values.tolist() == [1, 2, 3]
    g2, _ = lf.grad_and_value(loss)(temperature())
    assert g2.attrs == g.attrs


def test_grad_of_an_output_with_units():
    def mean_speed(T):
        return speed(T).mean().assign_attrs(units="m s-1")
    g = lf.grad(mean_speed)(temperature().assign_attrs(units="s"))
    assert_derivative_attrs(g, "m s-2", "derivative of u with respect to T")


def test_an_output_named_like_the_argument_is_named_by_the_function():
    # xarray passes names on: ((T - 285) ** 2).sum() is named "T" too
    g = lf.grad(lambda T: ((T - 285.0) ** 2).sum().drop_attrs())(temperature())
    assert g.attrs == {"long_name": "derivative of the output with respect to T"}  # no units: none known


def test_output_units_that_xarray_passed_on_are_not_used():
    # xarray keeps T's attrs through the arithmetic: the output says K, T's units, which
    # may be the truth (here) or not ((T ** 2).mean() says K too): no units
    g = lf.grad(lambda T: T.mean())(temperature())
    assert g.attrs == {"long_name": "derivative of the output with respect to T"}


def test_vmap_of_grad_gives_the_same_attrs_as_grad():
    batch = xr.concat([temperature(), temperature() + 1.0], dim="sample").assign_attrs(TEMPERATURE)
    g = lf.vmap(lf.grad(loss), dim="sample")(batch)
    assert_derivative_attrs(g, "K-1", "derivative of loss with respect to T")


@pytest.mark.parametrize("transform", [lf.jacrev, lf.jacfwd])
def test_jacobians_divide_the_outputs_units_by_the_arguments(transform):
    jac = transform(speed)(temperature())
    assert jac.dims == ("site", "site_wrt")
    assert_derivative_attrs(jac, "m s-1 K-1", "derivative of u with respect to T")
    assert jac.site_wrt.attrs == {}  # coordinates keep their own attrs
    mapped = lf.vmap(transform(speed), dim="sample")(
        xr.concat([temperature()] * 2, dim="sample").assign_attrs(TEMPERATURE))
    assert mapped.attrs == jac.attrs


def test_hessian_divides_by_both_arguments():
    h = lf.hessian(loss)(temperature())
    assert_derivative_attrs(h, "K-2", "second derivative of loss with respect to T and T")
    h = lf.vmap(lf.hessian(loss), dim="sample")(
        xr.concat([temperature()] * 2, dim="sample").assign_attrs(TEMPERATURE))
    assert h.attrs["units"] == "K-2"


def test_datasets_of_parameters_get_units_per_variable_and_keep_their_own_attrs():
    p = xr.Dataset({"T": temperature(), "t": ((), 2.0, {"units": "s", "standard_name": "time"}),
                    "c": ((), 1.0)}, attrs={"title": "parameters"})

    def cost(p):
        return (p["T"] * p.t * p.c).sum().drop_attrs().assign_attrs(units="1")

    g = lf.grad(cost)(p)
    assert g.attrs == {"title": "parameters"}  # the Dataset's provenance, not a quantity
    assert_derivative_attrs(g["T"], "K-1", "derivative of cost with respect to T")
    assert_derivative_attrs(g["t"], "s-1", "derivative of cost with respect to t")
    # c has no units: the derivative's are not known (a missing units is no "1")
    assert g["c"].attrs == {"long_name": "derivative of cost with respect to c"}

    jac = lf.jacrev(lambda p: (p["T"] * p.t).rename("y").drop_attrs().assign_attrs(units="1"))(p)
    assert jac["T"].attrs["units"] == "K-1" and jac["t"].attrs["units"] == "s-1"


def test_unlabeled_values_give_unlabeled_derivatives():
    x = xr.DataArray([1.0, 2.0], dims="i")
    assert lf.grad(lambda x: (x ** 2).sum())(x).attrs == {}
    assert lf.jacrev(lambda x: x ** 2)(x).attrs == {}
    assert lf.hessian(lambda x: (x ** 3).sum())(x).attrs == {}


def test_vjp_cotangents_carry_no_attrs():
    out, pull = lf.vjp(speed, temperature())
    assert out.attrs == {"units": "m s-1"}
    assert pull(xr.ones_like(out))[0].attrs == {}


def test_hessian_as_matrix_units():
    p = xr.Dataset({"a": ((), 1.0, {"units": "m"}), "b": ((), 2.0, {"units": "m"})})
    h = lf.hessian(lambda p: (p.a * p.b ** 2).drop_attrs().assign_attrs(units="m3"), as_matrix=True)(p)
    assert h.attrs == {"units": "m", "long_name": "second derivative of the output with respect to p"}
    mixed = p.assign(b=p.b.assign_attrs(units="s"))
    h = lf.hessian(lambda p: (p.a * p.b ** 2).drop_attrs().assign_attrs(units="m s2"), as_matrix=True)(mixed)
    assert "units" not in h.attrs  # m-1 s2, s and 1: no one unit


# --- pint ----------------------------------------------------------------------------------------------

class FakeQuantity:
    """What pint-xarray puts in .data, as far as the check can see: an array whose type
    comes from the pint package (pint itself is not needed to test the check)."""

    __module__ = "pint.facets.plain.quantity"

    def __init__(self, magnitude, units):
        self.magnitude = np.asarray(magnitude, dtype=float)
        self.units = units

    shape = property(lambda self: self.magnitude.shape)
    dtype = property(lambda self: self.magnitude.dtype)
    ndim = property(lambda self: self.magnitude.ndim)

    def __array_function__(self, func, types, args, kwargs):
        return NotImplemented

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return NotImplemented

    def __getitem__(self, key):
        return FakeQuantity(self.magnitude[key], self.units)


def quantified():
    return xr.DataArray(FakeQuantity([280.0, 290.0], "kelvin"), dims="site", name="T")


@pytest.mark.parametrize("call", [
    lambda q: lf.grad(lambda T: T.sum())(q),
    lambda q: lf.grad_and_value(lambda T: T.sum())(q),
    lambda q: lf.jacrev(lambda T: T * 2)(q),
    lambda q: lf.jacfwd(lambda T: T * 2)(q),
    lambda q: lf.hessian(lambda T: T.sum())(q),
    lambda q: lf.vjp(lambda T: T * 2, q),
    lambda q: lf.jvp(lambda T: T * 2, (q,), (q,)),
    lambda q: lf.linearize(lambda T: T * 2, q),
    lambda q: lf.ravel({"T": q}),
    lambda q: lf.grad(lambda p: p["T"].sum())(xr.Dataset({"T": q})),
], ids=["grad", "grad_and_value", "jacrev", "jacfwd", "hessian", "vjp", "jvp", "linearize", "ravel", "dataset"])
def test_a_pint_quantity_raises_saying_to_dequantify(call):
    assert type(quantified().data).__module__.startswith("pint")
    with pytest.raises(lf.UnsupportedOperationError, match=r"(?s)pint Quantity.*kelvin.*\.pint\.dequantify\(\)"):
        call(quantified())


def test_real_pint_xarray_quantities_raise_and_dequantified_ones_carry_units():
    pytest.importorskip("pint_xarray")
    T = xr.DataArray([280.0, 290.0], dims="site", name="T", attrs={"units": "K"})
    q = T.pint.quantify()
    with pytest.raises(lf.UnsupportedOperationError, match=r"dequantify"):
        lf.grad(loss)(q)
    plain = q.pint.dequantify()
    kelvin = plain.attrs["units"]  # pint's name for K: "kelvin" (pint-xarray writes pint's format)
    g = lf.grad(loss)(plain)
    assert g.attrs["units"] == f"{kelvin}-1"
