"""Code generators are plug-ins (issue 25): the fuse rewrite asks the generator that an array
library's ``Backend.fusion`` names for each spelling, whether a tree pays and for its
evaluation, and names no library itself.  A generator written here, which evaluates the
numexpr spelling with NumPy's own ufuncs, takes NumPy's place: the programs fuse through it
and every result keeps its bits.  Oracles: the un-jitted transforms (the same ufuncs, node
by node) and the closed-form derivatives."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func.engine.compiler import codegen, thresholds
from labeled_func.engine.compiler.codegen.numexpr import NUMEXPR

_NAMESPACE = {name: getattr(np, name) for name in (
    "sqrt", "exp", "expm1", "log", "log1p", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh",
    "tanh", "arcsinh", "arccosh", "arctanh", "arctan2", "where")}
_NAMESPACE["abs"] = np.absolute


class NumpyEval(codegen.Generator):
    """NumPy's arrays, each expression run by Python's ``eval`` over NumPy's ufuncs (the
    numexpr spellings are Python expressions of them): the same bits as node by node."""

    name = "numexpr"  # takes the place of numpy's generator
    reads_only = False  # no out=: a fresh array per evaluation

    def __init__(self):
        self.compiled = []

    def claims(self, value):
        return type(value) is np.ndarray

    def spelling(self, fusion):
        return fusion.numexpr

    def compile(self, expression, names, dtypes, out):
        code = compile(expression, "<fused>", "eval")
        self.compiled.append(expression)

        def evaluate(*values):
            with np.errstate(all="ignore"):
                return np.asarray(eval(code, {"__builtins__": {}, **_NAMESPACE}, dict(zip(names, values))), dtype=out)
        return evaluate


@pytest.fixture
def numpy_eval(monkeypatch):
    monkeypatch.setattr(thresholds, "FUSE_MIN_SIZE", 0)
    generator = NumpyEval()
    assert codegen.register(generator) is NUMEXPR
    yield generator
    assert codegen.register(NUMEXPR) is generator


def ishigami(x, a=7.0, b=0.1):
    return np.sin(x.isel(k=0)) + a * np.sin(x.isel(k=1)) ** 2 + b * x.isel(k=2) ** 4 * np.sin(x.isel(k=0))


def ishigami_gradient(x, a=7.0, b=0.1):
    x1, x2, x3 = x[:, 0], x[:, 1], x[:, 2]
    return np.stack([np.cos(x1) * (1 + b * x3 ** 4), 2 * a * np.sin(x2) * np.cos(x2),
                     4 * b * x3 ** 3 * np.sin(x1)], axis=1)


def _samples(seed, n=500):
    values = np.random.default_rng(seed).uniform(-np.pi, np.pi, (n, 3))
    return xr.DataArray(values, dims=("sample", "k"))


def test_a_registered_generator_fuses_the_programs_and_keeps_every_bit(numpy_eval):
    per_sample = lf.vmap(lf.grad(ishigami), dim="sample")
    jitted = lf.jit(per_sample)
    jitted(_samples(0))  # the trace
    for seed in (1, 2):
        x = _samples(seed)
        got = jitted(x)
        expected = per_sample(x)
        np.testing.assert_array_equal(got.values, expected.values)  # the same ufuncs: the same bits
        np.testing.assert_allclose(got.transpose("sample", "k").values, ishigami_gradient(x.values), rtol=1e-13)
    (compiled,) = jitted.cache.values()
    fused = [node for node in compiled.program.nodes if type(node.prim) is codegen.Fused]
    assert fused and all(node.prim.generator is numpy_eval for node in fused)
    assert len(numpy_eval.compiled) == len(fused)
    assert any("sin(" in text or "cos(" in text for text in numpy_eval.compiled)


def test_a_generator_that_is_not_available_leaves_the_program_unfused(monkeypatch):
    monkeypatch.setattr(thresholds, "FUSE_MIN_SIZE", 0)
    monkeypatch.setattr(NUMEXPR, "available", lambda: False)
    per_sample = lf.vmap(lf.grad(ishigami), dim="sample")
    jitted = lf.jit(per_sample)
    jitted(_samples(0))
    x = _samples(3)
    np.testing.assert_array_equal(jitted(x).values, per_sample(x).values)
    (compiled,) = jitted.cache.values()
    assert not [node for node in compiled.program.nodes if type(node.prim) is codegen.Fused]

