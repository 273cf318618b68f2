"""The operator table reaches everything the library implements, or says why not.

Every primitive of ``kernels`` and every entry of the NumPy registries of the engine
(ufunc -> kernel, function -> handler, ufunc -> ``reduce`` handler, the lazily
registered scipy.special ufuncs included) must be reached by ``opinfo.OP_DB``, or be
listed in ``EXCLUDED`` with the reason. "Reached" is decided by running the table, not
by names: every sample of every entry runs once under ``vmap`` (all its arrays mapped)
and, with float64 or complex128 arrays, under ``jvp``, and under ``grad`` where it is
differentiable (of a real loss: the real parts of complex outputs; so that primitives
bound only by derivative rules, ``index_add``, count), while every
primitive bound at any level and every registry entry dispatched is recorded. A call
that raises (the known failures of the table) reaches nothing.

The test fails for an item neither reached nor excluded, and for an exclusion that
names an item reached, or one that no longer exists: the list cannot rot.
"""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import warnings

import numpy as np
import pytest

import labeled_func as lf
from opinfo import OP_DB, array_positions, examples, with_arrays


def registries():
    """Where the table's targets live: the one function to adapt when they move.

    Returns ``(primitives, tables, bind_home)``: the module-level ``Primitive`` instances
    of the ``kernels`` modules (deduplicated by identity); the NumPy registries by kind,
    each a dict whose values the dispatch calls (``value(...)``) or binds
    (``value.bind(...)``), after the lazy ufunc tables (scipy.special) have registered;
    and the module whose ``bind`` function every application of a primitive goes through
    (``Primitive.bind`` looks it up by name at each call).
    """
    import labeled_func_kernels
    from labeled_func_kernels import primitive
    from labeled_func.engine.numpy import dispatch

    try:
        importlib.import_module("scipy.special")  # its ufuncs register once SciPy is imported
    except ImportError:  # pragma: no cover - SciPy is a test dependency
        pass
    for register in list(dispatch.LAZY_REGISTRATIONS):
        register()
    found = {}
    for module_info in pkgutil.walk_packages(labeled_func_kernels.__path__, "labeled_func_kernels."):
        for value in vars(importlib.import_module(module_info.name)).values():
            if isinstance(value, primitive.Primitive):
                found[id(value)] = value
    tables = {
        "ufunc": dispatch.UFUNCS,
        "ufunc composition": dispatch.UFUNC_HANDLERS,
        "ufunc method": dispatch.UFUNC_METHODS,
        "function": dispatch.FUNCTIONS,
    }
    return list(found.values()), tables, primitive


EXCLUDED: dict = {
    # bound only by the backward pass, summing two negated cotangents of one value into a
    # temporary of its own ((a - x) * (b - x): x is the subtrahend twice); no NumPy function
    # of the table does that since np.interp became one primitive. Its bits and its writes:
    # tests/test_deferred_negation.py, tests/test_backward_temporaries.py
    "primitive:subtract_inplace": "reached by the backward pass's sums, not by a NumPy function",
    # bound only by the derivative rules of the NaN-safe product (safe_multiply's JVP and VJP):
    # second derivatives, which the table does not take. tests/test_safe_masked.py
    "primitive:safe_masked": "reached by second derivatives of NaN-safe products, not by a NumPy function",
}


# ------------------------------------------------------------------------ recording


@dataclasses.dataclass
class Coverage:
    items: set  # every item, by name
    reached: set  # the names reached by a call that completed


def primitive_name(prim):
    return f"primitive:{prim.name}"


def entry_name(kind, key):
    """``function:numpy.linalg.solve``, ``ufunc:numpy.add``, ``ufunc:scipy.special.erf``,
    ``ufunc method:numpy.add.reduce``."""
    if isinstance(key, tuple):  # (ufunc, method)
        ufunc, method = key
        return f"{entry_name(kind, ufunc)}.{method}"
    name = getattr(key, "__name__", repr(key))
    if isinstance(key, np.ufunc):
        home = "numpy" if getattr(np, name, None) is key else "scipy.special"
    else:
        home = getattr(key, "__module__", None) or "numpy"
    return f"{kind}:{home}.{name}"


class Recorded:
    """A registry value that notes each use, then calls (or binds) the original."""

    def __init__(self, value, note):
        self._value = value
        self._note = note

    def __call__(self, *args, **kwargs):
        self._note()
        return self._value(*args, **kwargs)

    def bind(self, *args, **params):
        self._note()
        return self._value.bind(*args, **params)

    def __getattr__(self, name):
        return getattr(self._value, name)


@pytest.fixture(scope="module")
def coverage():
    primitives, tables, bind_home = registries()
    names = {id(prim): primitive_name(prim) for prim in primitives}
    assert len(set(names.values())) == len(names), "two primitives share a name"
    items = set(names.values())
    current, reached = set(), set()
    original_bind = bind_home.bind

    def recording_bind(prim, args, params):
        current.add(names.get(id(prim), f"primitive:{prim.name} (not module level)"))
        return original_bind(prim, args, params)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bind_home, "bind", recording_bind)
        for kind, table in tables.items():
            for key, value in list(table.items()):
                name = entry_name(kind, key)
                assert name not in items, f"two registry entries named {name}"
                items.add(name)
                patch.setitem(table, key, Recorded(value, lambda name=name: current.add(name)))
        for call in table_calls():
            current.clear()
            try:
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    call()
            except Exception:  # noqa: BLE001 - the generic tests report it; it reaches nothing
                continue
            reached.update(current)
    return Coverage(items, reached)


def table_calls():
    """One vmap call per sample and dtype of every entry; with float64 or complex128
    arrays a jvp, and a grad where the entry is differentiable."""
    for op in OP_DB:
        for dtype in op.dtypes:
            for sample_examples in examples(op, dtype, 2):
                sample = sample_examples[0]
                positions = array_positions(sample)
                stacked = [np.stack([example.args[j] for example in sample_examples]) for j in positions]
                yield lambda op=op, sample=sample, stacked=stacked: lf.vmap(
                    with_arrays(op, sample), in_dims=(0,) * len(stacked)
                )(*stacked)
                floats = [j for j in positions
                          if sample.args[j].dtype in (np.float64, np.complex128) and j not in op.integer_index_args]
                if not floats:
                    continue
                primals = tuple(sample.args[j] for j in floats)
                function = of_floats(op.differentiated if op.differentiable else op.op, sample, floats)
                yield lambda function=function, primals=primals: lf.jvp(function, primals, primals)
                if op.differentiable:
                    loss = lambda *xs, function=function: sum(np.sum(np.real(part)) for part in parts(function(*xs)))
                    yield lambda loss=loss, primals=primals: lf.grad(loss, argnums=tuple(range(len(primals))))(*primals)


def of_floats(function, sample, floats):
    """``function`` of the sample's float arrays at ``floats``, the rest held fixed."""

    def call(*values):
        args = list(sample.args)
        for j, value in zip(floats, values):
            args[j] = value
        return function(*args, **sample.kwargs)

    return call


def parts(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


# ---------------------------------------------------------------------------- tests


def test_every_primitive_and_registry_entry_is_reached_or_excluded(coverage):
    missing = sorted(coverage.items - coverage.reached - set(EXCLUDED))
    assert not missing, (
        f"{len(missing)} item(s) reached by no entry of opinfo.OP_DB: add an entry (or a sample) "
        f"that reaches each, or list it in EXCLUDED with the reason: {missing}"
    )


def test_every_exclusion_names_an_item_that_exists_and_is_not_reached(coverage):
    stale = sorted(set(EXCLUDED) - coverage.items)
    assert not stale, f"excluded but no longer a primitive or registry entry: {stale}"
    reached = sorted(set(EXCLUDED) & coverage.reached)
    assert not reached, f"excluded but reached by the table (drop the exclusion): {reached}"
    assert all(isinstance(reason, str) and reason.strip() for reason in EXCLUDED.values())


def test_recording_sees_primitives_bound_only_by_derivative_rules(coverage):
    """The recorder itself: index_add is bound by getitem's VJP rule, never by a NumPy
    call, and count_nonzero is a registry entry."""
    assert {"primitive:index_add", "primitive:add", "function:numpy.count_nonzero"} <= coverage.reached
