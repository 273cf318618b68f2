"""Per-call overhead (issue: speed): jacrev and jacfwd make a vmap of a fresh closure of the
same code on every call; its signature is read once per code and defaults, not per call.
The oracle is ``inspect.signature`` itself, for functions whose defaults differ."""
import importlib
import inspect

import numpy as np
import pytest

import labeled_func as lf
vmap_module = importlib.import_module("labeled_func.vmap")  # the module (lf.vmap is the function)


@pytest.fixture
def signature_calls(monkeypatch):
    seen = []
    signature = inspect.signature

    def counting(func, *args, **kwargs):
        seen.append(func)
        return signature(func, *args, **kwargs)

    monkeypatch.setattr(vmap_module.inspect, "signature", counting)
    vmap_module._SIGNATURES.clear()
    return seen


@pytest.mark.parametrize("transform", [lf.jacrev, lf.jacfwd])
def test_repeated_jacobians_read_the_inner_signature_once(transform, signature_calls):
    x = np.linspace(0.1, 1.0, 5)
    jacobian = transform(np.sin)
    for _ in range(4):
        np.testing.assert_allclose(jacobian(x), np.diag(np.cos(x)), rtol=1e-15)
    inner = [f for f in signature_calls if getattr(f, "__name__", "") in ("pull_row", "push_row")]
    assert len(inner) == 1, signature_calls  # before: one per call


def make(scale):
    def f(x, k=scale):
        return x * k

    return f


@pytest.mark.parametrize("defaults", [(2, 2.0), (2.0, True), (1, "one")])
def test_closures_of_one_code_with_other_defaults_keep_their_own_signature(defaults, signature_calls):
    for value in defaults:
        func = make(value)
        assert vmap_module._signature(func) == inspect.Signature.from_callable(func)
        assert repr(vmap_module._signature(func).parameters["k"].default) == repr(value)


def test_callables_that_are_not_plain_functions_are_read_each_time(signature_calls):
    class Scale:
        def __call__(self, x):
            return 2 * x

    scale = Scale()
    expected = inspect.signature(scale)
    signature_calls.clear()
    assert vmap_module._signature(scale) == expected
    vmap_module._signature(scale)
    assert len(signature_calls) == 2
    np.testing.assert_array_equal(lf.vmap(scale, in_dims=(0,))(np.ones((3, 2))), 2 * np.ones((3, 2)))
