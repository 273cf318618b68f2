"""pint Quantities (pint-xarray's ``.pint.quantify()``) reaching a transform: every entry
point raises the one policy error (``UnsupportedOperationError``, a RuntimeError) that says
to call ``.pint.dequantify()``, naming the argument and the variable, before the function
runs; never array_api_compat's ``TypeError: Quantity is not a supported array type`` from
deep inside the kernels.  Outside any transform, ``lf.scan``, ``lf.cond``,
``lf.while_loop`` and ``lf.checkpoint`` are plain Python and work on Quantities."""
import functools
import re
import warnings

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

pint_xarray = pytest.importorskip("pint_xarray")
pint = pytest.importorskip("pint")

DEQUANTIFY = r"(?s)holds a pint Quantity \(Quantity, units kelvin\).*Call \.pint\.dequantify\(\) first"


def temperature():
    values = np.arange(6.0).reshape(3, 2) + 280.0
    plain = xr.DataArray(values, dims=("sample", "t"), name="T", attrs={"units": "K"})
    return plain.pint.quantify()


def state():
    """A Dataset whose variable "T" is a Quantity; "rate" is a plain array."""
    return xr.Dataset({"T": temperature(), "rate": ("t", np.array([0.5, 2.0]))})


def lazy_chunks():
    """Dask chunks that are Quantities (pint-xarray's chunk of a quantified array)."""
    pytest.importorskip("dask.array")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pint-xarray's own warnings while chunking
        lazy = temperature().chunk(sample=1)
    assert type(lazy.data).__module__.startswith("dask") and type(lazy.data._meta).__module__.startswith("pint")
    return lazy


def lazy_quantity():
    """A Quantity that wraps a Dask array (quantified after chunking)."""
    pytest.importorskip("dask.array")
    lazy = temperature().pint.dequantify().chunk(sample=1).pint.quantify()
    assert type(lazy.data).__module__.startswith("pint")
    return lazy


class Calls:
    """A function that counts its calls: the error must come before the function runs."""

    def __init__(self, body):
        functools.update_wrapper(self, body)  # its signature: messages name the parameters
        self.body = body
        self.count = 0

    def __call__(self, *args, **kwargs):
        self.count += 1
        return self.body(*args, **kwargs)


def _per_example(temperature):
    return (temperature * 2.0).sum("t")


def _of_state(state):
    return (state["T"] * state["rate"]).sum()


def _scalar(temperature):
    return (temperature ** 2).sum()


def _samples():
    return xr.Dataset({"a": ("sample", np.linspace(0.0, 1.0, 5)), "b": ("sample", np.linspace(1.0, 2.0, 5))})


# (transform applied to a counting function, argument maker, what the message must name)
CASES = {
    "vmap": (lambda f: lf.vmap(f, dim="sample")(temperature()), _per_example, r"vmap: temperature holds"),
    "vmap_dataset": (lambda f: lf.vmap(f, dim="sample")(state()), lambda state: state["T"].sum("t"),
                     r"vmap: state\['T'\] holds"),
    "vmap_in_dims": (lambda f: lf.vmap(f, in_dims=(0,))(temperature()), _per_example, r"vmap: temperature holds"),
    "vmap_keyword": (lambda f: lf.vmap(f, dim="sample")(temperature=temperature()), _per_example,
                     r"vmap: temperature holds"),
    "vmap_nested_dict": (lambda f: lf.vmap(f, dim="sample")({"inputs": {"T": temperature()}}),
                         lambda d: d["inputs"]["T"].sum("t"), r"vmap: d\['inputs'\]\['T'\] holds"),
    "vmap_chunked": (lambda f: lf.vmap(f, dim="sample")(lazy_chunks()), _per_example, r"vmap: temperature holds"),
    "vmap_chunked_quantity": (lambda f: lf.vmap(f, dim="sample")(lazy_quantity()), _per_example,
                              r"vmap: temperature holds"),
    "grad": (lambda f: lf.grad(f)(temperature()), _scalar, r"grad: argument 'temperature' holds"),
    "grad_dataset": (lambda f: lf.grad(f)(state()), _of_state, r"grad: argument 'state'\['T'\] holds"),
    "grad_and_value": (lambda f: lf.grad_and_value(f)(temperature()), _scalar,
                       r"grad_and_value: argument 'temperature' holds"),
    "vjp": (lambda f: lf.vjp(f, temperature()), _scalar, r"vjp: argument 'temperature' holds"),
    "jvp": (lambda f: lf.jvp(f, (temperature(),), (temperature().pint.dequantify(),)), _scalar,
            r"jvp: argument 'temperature' holds"),
    "jacrev": (lambda f: lf.jacrev(f)(temperature()), _per_example, r"jacrev: argument 'temperature' holds"),
    "jacfwd": (lambda f: lf.jacfwd(f)(temperature()), _per_example, r"jacfwd: argument 'temperature' holds"),
    "hessian": (lambda f: lf.hessian(f)(temperature()), _scalar, r"hessian: argument 'temperature' holds"),
    "linearize": (lambda f: lf.linearize(f, temperature()), _scalar, r"linearize: argument 'temperature' holds"),
    "jit": (lambda f: lf.jit(f)(temperature()), _scalar, r"lf\.jit: argument 'temperature' holds"),
    "jit_dataset": (lambda f: lf.jit(f)(state()), _of_state, r"lf\.jit: argument 'state'\['T'\] holds"),
    "jit_keyword": (lambda f: lf.jit(f)(temperature=temperature()), _scalar,
                    r"lf\.jit: keyword argument 'temperature' holds"),
    "jit_of_vmap": (lambda f: lf.jit(lf.vmap(f, dim="sample"))(temperature()), _per_example,
                    r"lf\.jit: argument 'temperature' holds"),
    "jit_of_chunked_vmap": (lambda f: lf.jit(lf.vmap(f, dim="sample"))(lazy_chunks()), _per_example,
                            r"vmap: temperature holds"),
    "vmap_of_grad": (lambda f: lf.vmap(lf.grad(f), dim="sample")(temperature()), _scalar,
                     r"vmap: temperature holds"),
    "accessor_vmap": (lambda f: temperature().func.vmap(f, "sample"), _per_example, r"vmap: temperature holds"),
    "accessor_grad": (lambda f: temperature().func.grad(f), _scalar, r"grad: argument 'temperature' holds"),
    "accessor_jacrev": (lambda f: temperature().func.jacrev(f), _per_example,
                        r"jacrev: argument 'temperature' holds"),
    "accessor_jit": (lambda f: temperature().func.jit(f), _scalar, r"lf\.jit: argument 'temperature' holds"),
    "dataset_accessor_grad": (lambda f: state().func.grad(f), _of_state, r"grad: argument 'state'\['T'\] holds"),
    "dgsm": (lambda f: lf.sensitivity.dgsm(f, _samples().assign(a=_samples().a.pint.quantify("K"))),
             lambda p: p.a * p.b, r"sensitivity\.dgsm: samples\['a'\] holds"),
    "dgsm_accessor": (lambda f: _samples().assign(a=_samples().a.pint.quantify("K")).func.dgsm(f),
                      lambda p: p.a * p.b, r"sensitivity\.dgsm: samples\['a'\] holds"),
    "dgsm_salib_array": (lambda f: lf.sensitivity.dgsm(f, pint.UnitRegistry().Quantity(np.ones((4, 2)), "K"),
                                                       problem={"names": ["a", "b"], "bounds": [[0, 1], [0, 1]]}),
                         lambda X: X[:, 0] * X[:, 1], r"sensitivity\.dgsm: samples holds"),
    "local": (lambda f: lf.sensitivity.local(f, xr.Dataset({"k": xr.DataArray(2.0).pint.quantify("K"), "c": 1.0})),
              lambda p: p.k * 3.0 + p.c, r"sensitivity\.local: params\['k'\] holds"),
    "local_accessor": (lambda f: xr.Dataset({"k": xr.DataArray(2.0).pint.quantify("K"), "c": 1.0}).func.local(f),
                       lambda p: p.k * 3.0 + p.c, r"sensitivity\.local: params\['k'\] holds"),
    "ravel": (lambda f: lf.ravel({"T": temperature()}), None, r"ravel: tree\['T'\] holds"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_quantity_argument_raises_the_dequantify_error_before_the_function_runs(name):
    transform, body, culprit = CASES[name]
    function = Calls(body) if body is not None else None
    with pytest.raises(lf.UnsupportedOperationError) as info:
        transform(function)
    message = str(info.value)
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, lf.TransformError)
    assert "not a supported array type" not in message
    assert re.search(DEQUANTIFY, message), message
    assert re.search(culprit, message), message
    assert function is None or function.count == 0, f"{name}: the function ran {function.count} time(s) first"


def test_the_error_points_at_the_callers_line():
    with pytest.raises(lf.UnsupportedOperationError) as info:
        lf.vmap(_per_example, dim="sample")(temperature())
    assert "test_pint_messages.py:" in str(info.value)


def test_dequantified_arguments_work_and_agree_with_the_magnitudes():
    """The recipe of the message: dequantify, transform, (quantify again)."""
    q = temperature()
    out = lf.vmap(_per_example, dim="sample")(q.pint.dequantify())
    np.testing.assert_array_equal(out.values, (q.pint.magnitude * 2.0).sum(axis=1))
    g = lf.grad(_scalar)(q.pint.dequantify())
    np.testing.assert_allclose(g.values, 2 * q.pint.magnitude)


@pytest.mark.parametrize("name, run", [
    ("scan", lambda q: lf.scan(lambda carry, x: (carry + x, carry * 1), q.isel(sample=0) * 0, q, dim="sample")[0]),
    ("cond", lambda q: lf.cond(True, lambda v: v * 2, lambda v: v * 3, q)),
    ("while_loop", lambda q: lf.while_loop(lambda v: bool((v < 1000 * v.pint.units).all()), lambda v: v * 2, q)),
    ("checkpoint", lambda q: lf.checkpoint(lambda v: v * 2)(q)),
], ids=lambda v: v if isinstance(v, str) else "")
def test_control_flow_outside_transforms_works_on_quantities(name, run):
    """Outside a transform these are plain Python: the Quantities and their units pass through."""
    q = temperature()
    out = run(q)
    assert type(out.data).__module__.startswith("pint"), type(out.data)
    assert str(out.pint.units) == "kelvin"
    expected = {"scan": q.pint.magnitude.sum(axis=0), "cond": 2 * q.pint.magnitude,
                "while_loop": q.pint.magnitude * 4, "checkpoint": 2 * q.pint.magnitude}[name]
    np.testing.assert_allclose(out.pint.magnitude, expected)


@pytest.mark.parametrize("name, run", [
    ("scan", lambda q: lf.vmap(lambda x: lf.scan(lambda c, v: (c + v, None), x.isel(t=0) * 0, x, dim="t")[0],
                               dim="sample")(q)),
    ("cond", lambda q: lf.vmap(lambda x: lf.cond(x.sum() > 0, lambda v: v, lambda v: -v, x), dim="sample")(q)),
    ("while_loop", lambda q: lf.vmap(lambda x: lf.while_loop(lambda v: v.sum() < 1e4, lambda v: v * 2, x),
                                     dim="sample")(q)),
    ("checkpoint", lambda q: lf.grad(lf.checkpoint(_scalar))(q)),
], ids=lambda v: v if isinstance(v, str) else "")
def test_control_flow_inside_transforms_gets_the_transforms_error(name, run):
    with pytest.raises(lf.UnsupportedOperationError, match=r"\.pint\.dequantify\(\)"):
        run(temperature())


@pytest.mark.parametrize("transform", ["grad", "vmap", "jit"])
def test_a_quantity_in_a_coordinate_raises_the_dequantify_error_naming_it(transform):
    """pint-xarray's .pint.quantify() quantifies coordinates too: a Quantity in a coordinate
    that is not an index is refused before the function runs, naming the argument and the
    coordinate (used, it raised array-api-compat's bare TypeError; unused, nothing)."""
    ureg = pint.UnitRegistry()
    x = xr.DataArray(np.array([[1.0, 2.0]]), dims=("sample", "i")).assign_coords(
        height=("i", ureg.Quantity([0.0, 10.0], "m")))
    calls = []

    def f(x):
        calls.append(1)
        return (x * 2).sum()

    wrapped = {"grad": lambda: lf.grad(f)(x.isel(sample=0)), "vmap": lambda: lf.vmap(f, dim="sample")(x),
               "jit": lambda: lf.jit(f)(x)}[transform]
    with pytest.raises(lf.UnsupportedOperationError, match=r"(argument 'x'|x)'s coordinate 'height' holds a pint "
                                                           r"Quantity \(Quantity, units meter\)"):
        wrapped()
    assert calls == []
