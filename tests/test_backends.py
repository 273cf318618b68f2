"""The transforms on each array library: NumPy, array_api_strict and CuPy.

Every function below is written with NumPy's API (``np.sin``, ``@``, indexing); on
a CuPy or array_api_strict input the kernels take the functions from the input's
library.  Oracles: the same function on NumPy arrays in a for-loop (vmap), and
derivatives written by hand, evaluated with NumPy (jvp, vjp, grad, Jacobians).
Results must come back as the input library's own arrays, and with
array_api_strict's fake devices, on the input's device.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func.backends import check_one_backend

RNG = np.random.default_rng(7)
BATCH = 3


def close(actual, expected, backend):
    np.testing.assert_allclose(backend.to_numpy(actual), expected, rtol=1e-12, atol=1e-12)


# --- known gaps, kept as data -----------------------------------------------------------------
# Found by these tests; each names where the fix belongs. A test that uses a gap's
# feature is marked xfail(strict=True) on that backend only, with the exception it
# raises: once the gap is fixed the test passes, and the strict mark says to delete
# the entry here.
STRICT_GAPS = {
    "mapped-index": ((IndexError,), "kernels/indexing.py getitem batch rule: the batch arange, a mapped index "
                                    "array and a slice in one key; array_api_strict allows index arrays only "
                                    "with integer indices"),
}
GAPS = {
    "array_api_strict": STRICT_GAPS,
    # array_api_strict on its fake device "device1": the same gaps
    "device1": STRICT_GAPS,
}


def expect_gaps(request, where, features):
    """Mark the running test xfail(strict=True) for the known gaps of ``where`` it uses."""
    known = [GAPS[where][f] for f in features if f in GAPS.get(where, {})]
    if known:
        request.applymarker(pytest.mark.xfail(
            strict=True, raises=tuple({error for errors, _ in known for error in errors}),
            reason="known gap: " + "; ".join(reason for _, reason in known)))


# --- vmap: one NumPy for-loop per case ------------------------------------------------------
def example(*shape):
    return RNG.normal(size=shape)


# name: (function of one example, per-argument batched NumPy input or unmapped value, in_dims)
VMAP_CASES = {
    "elementwise": (lambda a, b: np.sin(a) * b + np.exp(-a), (example(BATCH, 5, 4), example(BATCH, 5, 4)), (0, 0)),
    "elementwise-shared": (lambda a, b: np.tanh(a) - b ** 2, (example(BATCH, 5, 4), example(4)), (0, None)),
    "sum-axis": (lambda a: np.sum(a, axis=0), (example(BATCH, 5, 4),), (0,)),
    "mean-all": (lambda a: np.mean(a), (example(BATCH, 5, 4),), (0,)),
    "max-last": (lambda a: np.max(a, axis=-1), (example(BATCH, 5, 4),), (0,)),
    "matmul-shared": (lambda a, w: np.matmul(a, w), (example(BATCH, 5, 4), example(4, 2)), (0, None)),
    "matmul-both": (lambda a, b: a @ b, (example(BATCH, 5, 4), example(BATCH, 4, 2)), (0, 0)),
    "getitem-int": (lambda a: a[1], (example(BATCH, 5, 4),), (0,)),
    "getitem-slices": (lambda a: a[::-1, 1:3], (example(BATCH, 5, 4),), (0,)),
    "getitem-mapped-index": (lambda a, i: a[i], (example(BATCH, 5, 4), np.array([[0, 4], [2, 2], [3, 1]])), (0, 0)),
    "getitem-shared-index": (lambda a, i: a[:, i], (example(BATCH, 5, 4), np.array([3, 0, 0])), (0, None)),
}


VMAP_GAPS = {"getitem-mapped-index": ("mapped-index",)}


def loop_oracle(func, inputs, in_dims):
    outputs = [func(*[value[k] if dim == 0 else value for value, dim in zip(inputs, in_dims)])
               for k in range(BATCH)]
    return np.stack(outputs)


@pytest.mark.parametrize("case", list(VMAP_CASES))
def test_vmap_matches_numpy_loop(request, backend, case):
    expect_gaps(request, backend.name, VMAP_GAPS.get(case, ()))
    func, inputs, in_dims = VMAP_CASES[case]
    actual = lf.vmap(func, in_dims=in_dims)(*[backend.asarray(v) for v in inputs])
    close(actual, loop_oracle(func, inputs, in_dims), backend)


def test_vmap_keeps_labeled_data_in_its_library(backend):
    x = xr.DataArray(backend.asarray(example(BATCH, 4)), dims=("sample", "t"), coords={"sample": [1, 2, 3]})
    out = lf.vmap(lambda x: np.sin(x) * 2.0 - x, "sample")(x)
    assert out.dims == ("sample", "t")
    close(out.data, np.sin(backend.to_numpy(x.data)) * 2.0 - backend.to_numpy(x.data), backend)


# --- derivatives of elementwise functions, by hand -----------------------------------------
# name: (f, f', the rules it needs that have known gaps)
ELEMENTWISE = {
    "sin-exp": (lambda x: np.sin(x) * x + np.exp(0.5 * x),
                lambda x: np.cos(x) * x + np.sin(x) + 0.5 * np.exp(0.5 * x), ()),
    "rational": (lambda x: x / (1.0 + x ** 2),
                 lambda x: (1.0 - x ** 2) / (1.0 + x ** 2) ** 2, ("pow-rule",)),
    "relu-tanh": (lambda x: np.maximum(x, 0.0) + np.tanh(x),  # inputs are never 0
                  lambda x: (x > 0) + 1.0 - np.tanh(x) ** 2, ("maximum-rule",)),
}


@pytest.fixture(params=list(ELEMENTWISE))
def elementwise(request, backend):
    f, df, features = ELEMENTWISE[request.param]
    expect_gaps(request, backend.name, features)
    return f, df


def test_jvp(backend, elementwise):
    f, df = elementwise
    x, v = example(5, 2), example(5, 2)
    out, tangent = lf.jvp(f, (backend.asarray(x),), (backend.asarray(v),))
    close(out, f(x), backend)
    close(tangent, df(x) * v, backend)


def test_vjp(backend, elementwise):
    f, df = elementwise
    x, u = example(5, 2), example(5, 2)
    out, vjp_fn = lf.vjp(f, backend.asarray(x))
    (cotangent,) = vjp_fn(backend.asarray(u))
    close(out, f(x), backend)
    close(cotangent, df(x) * u, backend)


def test_grad(backend, elementwise):
    f, df = elementwise
    x = example(6)
    g, value = lf.grad_and_value(lambda x: np.sum(f(x)))(backend.asarray(x))
    close(g, df(x), backend)
    close(value, np.sum(f(x)), backend)


def test_grad_of_two_arguments(request, backend):
    expect_gaps(request, backend.name, ("pow-rule",))
    x, y = example(4), example(4)
    gx, gy = lf.grad(lambda x, y: np.sum(x * y ** 2), argnums=(0, 1))(backend.asarray(x), backend.asarray(y))
    close(gx, y ** 2, backend)
    close(gy, 2 * x * y, backend)


@pytest.mark.parametrize("jacobian", [lf.jacrev, lf.jacfwd])
def test_jacobian(request, backend, elementwise, jacobian):
    expect_gaps(request, backend.name, ("jacobian-slice",))
    f, df = elementwise
    x = example(4)
    close(jacobian(f)(backend.asarray(x)), np.diag(df(x)), backend)


def test_vmap_of_grad(backend, elementwise):
    f, df = elementwise
    x = example(BATCH, 4)
    per_sample = lf.vmap(lf.grad(lambda x: np.sum(f(x))), in_dims=(0,))(backend.asarray(x))
    close(per_sample, df(x), backend)


# --- array_api_strict's fake devices: outputs stay where the inputs are -----------------------
def _vmap_case(name):
    func, inputs, in_dims = VMAP_CASES[name]
    return lambda to: lf.vmap(func, in_dims=in_dims)(*[to(v) for v in inputs])


def _vjp_output_and_cotangent(to):
    out, vjp_fn = lf.vjp(_f, to(example(5)))
    return (out, *vjp_fn(to(example(5))))


_f, _df, _ = ELEMENTWISE["sin-exp"]
_INDEX = np.array([0, 0, 2])
# name: (run on inputs made by ``to``, features with known gaps)
DEVICE_CASES = {
    **{f"vmap-{name}": (_vmap_case(name), VMAP_GAPS.get(name, ())) for name in VMAP_CASES},
    "vmap-pad": (lambda to: lf.vmap(lambda a: np.pad(a, 1), in_dims=(0,))(to(example(BATCH, 4))), ("pad",)),
    "jvp": (lambda to: lf.jvp(_f, (to(example(5)),), (to(example(5)),)), ()),
    "vjp": (lambda to: _vjp_output_and_cotangent(to), ()),
    "grad": (lambda to: lf.grad(lambda x: np.sum(_f(x)))(to(example(5))), ()),
    "grad-slices": (lambda to: lf.grad(lambda x: np.sum(_f(x[1:, ::2])))(to(example(4, 3))), ()),
    "grad-index-array": (lambda to: lf.grad(lambda x: np.sum(_f(x[to(_INDEX)])))(to(example(4, 3))), ("index-add",)),
    "vmap-grad": (lambda to: lf.vmap(lf.grad(lambda x: np.sum(_f(x))), in_dims=(0,))(to(example(BATCH, 5))), ()),
    "jacrev": (lambda to: lf.jacrev(_f)(to(example(5))), ("jacobian-basis", "jacobian-slice")),
    "jacfwd": (lambda to: lf.jacfwd(_f)(to(example(5))), ("jacobian-basis", "jacobian-slice")),
}


@pytest.mark.parametrize("case", list(DEVICE_CASES))
def test_outputs_stay_on_the_input_device(request, case):
    xps = pytest.importorskip("array_api_strict")
    run, features = DEVICE_CASES[case]
    expect_gaps(request, "device1", features)
    device = xps.Device("device1")
    result = run(lambda values: xps.asarray(np.asarray(values), device=device))
    outputs = result if isinstance(result, tuple) else (result,)
    for output in outputs:
        assert isinstance(output, type(xps.asarray(0.0)))
        assert output.device == device, f"{case}: an output is on {output.device}, the inputs on {device}"


# --- one library per call -------------------------------------------------------------------
def other_library(backend):
    """Arrays of a library other than ``backend``'s, and its name."""
    if backend.name == "numpy":
        import array_api_strict as xps

        return xps.asarray, "array_api_strict"
    return np.asarray, "numpy"


def test_check_one_backend_names_both_arguments(backend):
    to_other, other = other_library(backend)
    params = {"w": backend.asarray(example(2)), "bias": 1.0}
    data = xr.Dataset({"temperature": ("t", to_other(example(3)))})
    with pytest.raises(ValueError) as info:
        check_one_backend([params, data, 3.0], ["params", "data", "scale"])
    message = str(info.value)
    assert "params['w']" in message and "data['temperature']" in message
    assert backend.name in message and other in message


def test_check_one_backend_accepts_one_library_with_scalars_and_coords(backend):
    x = xr.DataArray(backend.asarray(example(3)), dims="t", coords={"t": [1, 2, 3], "label": ("t", ["a", "b", "c"])})
    check_one_backend([x, 2.0, np.float64(1.0), None, "text", (x, [backend.asarray(example(2))])],
                      ["x", "scale", "offset", "nothing", "name", "more"])


def test_check_one_backend_looks_inside_datatrees(backend):
    to_other, other = other_library(backend)
    tree = xr.DataTree.from_dict({
        "/": xr.Dataset({"a": ("i", backend.asarray(example(2)))}),
        "/child": xr.Dataset({"b": ("i", to_other(example(2)))}),
    })
    with pytest.raises(ValueError, match=r"tree\['/a'\] is .*tree\['/child/b'\] is " + other):
        check_one_backend([tree], ["tree"])


def test_check_one_backend_counts_dask_as_the_library_of_its_chunks():
    da = pytest.importorskip("dask.array")
    xps = pytest.importorskip("array_api_strict")
    lazy = xr.DataArray(da.from_array(np.ones(4), chunks=2), dims="i")
    check_one_backend([lazy, np.ones(4)], ["lazy", "eager"])
    with pytest.raises(ValueError, match="lazy is numpy, eager is array_api_strict"):
        check_one_backend([lazy, xps.ones(4)], ["lazy", "eager"])


def test_vmap_mixing_libraries_is_a_value_error(backend):
    to_other, other = other_library(backend)

    def f(signal, weights):
        return signal * weights

    with pytest.raises(ValueError, match="signal") as info:
        lf.vmap(f, in_dims=(0, 0))(backend.asarray(example(BATCH, 2)), to_other(example(BATCH, 2)))
    assert "weights" in str(info.value) and backend.name in str(info.value) and other in str(info.value)

    labeled = xr.DataArray(backend.asarray(example(BATCH, 2)), dims=("sample", "t"))
    other_labeled = xr.DataArray(to_other(example(2)), dims="t")
    with pytest.raises(ValueError, match="weights"):
        lf.vmap(f, "sample")(labeled, other_labeled)


@pytest.mark.parametrize("transform", ["grad", "vjp", "jacrev", "jacfwd", "hessian"])
def test_autodiff_mixing_libraries_is_a_value_error(backend, transform):
    to_other, other = other_library(backend)

    def loss(params, data):
        return np.sum(params * data)

    params, data = backend.asarray(example(3)), to_other(example(3))
    with pytest.raises(ValueError, match="params") as info:
        if transform == "vjp":
            lf.vjp(loss, params, data)
        else:
            getattr(lf, transform)(loss)(params, data)
    assert "data" in str(info.value) and other in str(info.value)


def test_jvp_mixing_primal_and_tangent_libraries_is_a_value_error(backend):
    to_other, other = other_library(backend)
    with pytest.raises(ValueError, match=other):
        lf.jvp(np.sin, (backend.asarray(example(3)),), (to_other(example(3)),))


# --- CuPy stays optional ----------------------------------------------------------------------
def test_importing_labeled_func_never_imports_cupy(tmp_path):
    # Stand-ins that import fine, so the test can fail whether or not CuPy is installed.
    for name in ("cupy", "cupy_xarray"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    code = textwrap.dedent("""
        import sys
        import labeled_func, labeled_func.accessor, labeled_func.backends
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("cupy", "cupy_xarray"))
        assert not loaded, f"importing labeled_func imported {loaded}"
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    # the stand-ins are importable in that environment (else the check above proves nothing)
    probe = subprocess.run([sys.executable, "-c", "import cupy, cupy_xarray; print(cupy.__file__)"],
                           env=env, capture_output=True, text=True, timeout=60)
    assert str(tmp_path) in probe.stdout


@pytest.mark.parametrize("backend", ["cupy"], indirect=True)
def test_cupy_xarray_data_through_the_accessor(backend):
    pytest.importorskip("cupy_xarray")
    values = example(4)
    x = xr.DataArray(values, dims="i").cupy.as_cupy()
    g = x.func.grad(lambda x: (np.sin(x) * x).sum())
    close(g.data, np.cos(values) * values + np.sin(values), backend)


def test_the_tape_keeps_one_stand_in_per_library_dtype_device_and_shape():
    """What a tape keeps of a value whose VJP reads only its shape is one zero broadcast
    (no memory); off NumPy it is made once per library, dtype, device and shape (on a GPU
    each new zero is an allocation and a kernel), and a device that is not hashable but
    numbered (CuPy's) is keyed by its number."""
    xp = pytest.importorskip("array_api_strict")
    from labeled_func.engine import reverse

    reverse._STAND_INS.clear()
    first = reverse.stand_in(xp.ones((3,), dtype=xp.float64))
    second = reverse.stand_in(xp.ones((4, 5), dtype=xp.float64))
    third = reverse.stand_in(xp.ones((2,), dtype=xp.float32))
    assert reverse.stand_in(xp.zeros((4, 5), dtype=xp.float64)) is second  # made once per shape
    assert len(reverse._STAND_INS) == 3
    for got, shape, dtype in ((first, (3,), xp.float64), (second, (4, 5), xp.float64), (third, (2,), xp.float32)):
        assert type(got) is type(xp.ones(1)) and got.shape == shape and got.dtype == dtype
        assert not np.asarray(got).any()

    class Numbered:  # compares by number, not hashable (as cupy.cuda.Device)
        __hash__ = None

        def __init__(self, number):
            self.id = number

        def __eq__(self, other):
            return self.id == other.id

    assert reverse.device_key(Numbered(1)) == reverse.device_key(Numbered(1)) != reverse.device_key(Numbered(2))
    assert reverse.device_key(Numbered("gpu")) is None  # neither hashable nor numbered: not kept
