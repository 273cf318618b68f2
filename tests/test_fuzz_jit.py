"""Differential fuzzing of ``lf.jit``: random programs, run eagerly and jitted.

``lf.jit`` must return exactly what the function returns, or raise. Hypothesis draws
programs ``f(x, y, s, k)`` from a vocabulary of operations (``tests/fuzz_programs.py``:
the operator table's elementwise entries, reductions, rolls, in-place writes into the
arguments and through views, casts, labels, Datasets, random draws, static and Python
number arguments) and runs each under four wrappings: ``lf.jit(f)``,
``lf.jit(lf.vmap(f))``, ``lf.jit(lf.grad(loss))`` and ``lf.jit(lf.vmap(lf.grad(loss)))``,
against the same wrapping without jit, over four calls: the trace, a replay (other
values), a retrace (a static argument, a Python number's type or sign, coordinate
attrs, a dtype, a memory layout, the aliasing of the arguments changed) and a replay of
the first signature.

Checks: the outputs' structure and labels (types, dims and their order, coordinates and
their values, attrs of every variable and coordinate, names, dtypes, shapes); their
values bit for bit (NaN where NaN, the sign of zeros), or, with every tree fused and
every buffer recycled (the replay's thresholds at 0), float64 to 1e-12 relative and the
rest bit for bit; the caller's arrays after a call that writes into them; the number of
traces (a changed signature traces again, the same replays); the policy errors (the
same class as the eager call's; ``RandomnessError`` for NumPy's global random state;
``InplaceError`` naming the argument for overlapping arguments written into).

A failure prints the program as Python, its wrapping and the four calls' arguments:
paste it into ``tests/test_jit_contract_found.py`` as a named regression test.
``LF_FUZZ_EXAMPLES`` sets the number of examples per test (for long runs).
"""
import dataclasses
import os

import numpy as np
import pytest
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import labeled_func as lf

try:  # works with and without a tests/__init__.py
    import fuzz_programs as fuzz
except ImportError:  # pragma: no cover
    from tests import fuzz_programs as fuzz

EXAMPLES = int(os.environ.get("LF_FUZZ_EXAMPLES", "50"))

FUZZ = settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None, report_multiple_bugs=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])


@pytest.mark.parametrize("wrapping", fuzz.WRAPPINGS)
@FUZZ
@given(data=st.data())
def test_jit_returns_what_the_wrapping_returns_bit_for_bit(wrapping, data):
    """Small arrays, default thresholds: nothing is fused, every bit must match."""
    fuzz.check_case(data.draw(fuzz.cases(wrapping), label="case"))


@pytest.mark.parametrize("wrapping", fuzz.WRAPPINGS)
@FUZZ
@given(data=st.data())
def test_jit_with_every_tree_fused_and_every_buffer_recycled(wrapping, data):
    """numexpr and buffer reuse at every size: float64 to 1e-12, the rest bit for bit."""
    case = data.draw(fuzz.cases(wrapping), label="case")
    with fuzz.fusing_everything():
        fuzz.check_case(case, fused=True)


# --- the fuzzer can fail ----------------------------------------------------------------------------
SITES = xr.DataArray(np.array([[0.5, -0.0], [np.nan, 2.0]]), dims=("a", "b"),
                     coords={"a": ("a", [10, 20], {"units": "s"}), "lab": ("b", [0.0, 0.25])},
                     name="x", attrs={"units": "m"})


def _changed(variant):
    value = SITES.copy(deep=True)
    if variant == "one ulp":
        value.values[0, 0] = np.nextafter(0.5, 1.0)
    elif variant == "sign of zero":
        value.values[0, 1] = 0.0
    elif variant == "a number for a NaN":
        value.values[1, 0] = 0.0
    elif variant == "attrs":
        value.attrs["units"] = "km"
    elif variant == "coordinate attrs":
        value["a"].attrs["units"] = "h"
    elif variant == "coordinate values":
        value = value.assign_coords(lab=("b", [0.0, 0.5]))
    elif variant == "dtype":
        value = value.astype(np.float32)
    elif variant == "dim order":
        value = value.transpose("b", "a")
    elif variant == "name":
        value = value.rename("y")
    elif variant == "type":
        value = value.to_dataset()
    return value


@pytest.mark.parametrize("variant", ["one ulp", "sign of zero", "a number for a NaN", "attrs", "coordinate attrs",
                                     "coordinate values", "dtype", "dim order", "name", "type"])
def test_the_comparison_catches_every_difference_the_contract_forbids(variant):
    fuzz.assert_same(SITES.copy(deep=True), SITES)
    with pytest.raises(AssertionError):
        fuzz.assert_same(_changed(variant), SITES)


def test_fused_comparison_allows_1e_12_in_float64_and_nothing_in_float32():
    fuzz.assert_same(_changed("one ulp"), SITES, fused=True)
    with pytest.raises(AssertionError):
        fuzz.assert_same(SITES * (1 + 1e-10), SITES, fused=True)
    single = SITES.astype(np.float32)
    wrong = single.copy(deep=True)
    wrong.values[0, 0] = np.nextafter(np.float32(0.5), np.float32(1.0))
    with pytest.raises(AssertionError):
        fuzz.assert_same(wrong, single, fused=True)


def _scaling_case(change):
    """``v * s`` traced with s = 1.0, replayed, retraced with s = 2.0."""
    x = fuzz.DataArraySpec(fuzz.ArraySpec(np.array([1.5, -0.0]), "float64"), ("a",))
    first = fuzz.CallSpec(x, "x", 1.0, 1)
    second = dataclasses.replace(first, x=fuzz.revalued(x, 5))
    return fuzz.Case("jit", ("v = v * s",), "v", (first, second, dataclasses.replace(first, s=change), second),
                     f"s 1.0 -> {change!r}")


class _FirstResultForever:
    """A broken jit: the first call's result, whatever the arguments (counts one trace)."""

    def __init__(self, function, **_):
        self.function, self.result, self.traces = function, None, 0

    def __call__(self, *args):
        if self.result is None:
            self.result, self.traces = self.function(*args), 1
        return self.result


def test_the_oracle_catches_a_jit_that_replays_the_wrong_program(monkeypatch):
    fuzz.check_case(_scaling_case(2.0))
    monkeypatch.setattr(lf, "jit", _FirstResultForever)
    with pytest.raises(AssertionError, match="call 2"):
        fuzz.check_case(_scaling_case(2.0))


def test_a_case_prints_as_the_program_it_runs():
    case = _scaling_case(-1.0)
    namespace = dict(fuzz.NAMESPACE)
    exec(repr(case).split("\n", 1)[1], namespace)  # the last call's arguments are left in the namespace
    got = namespace["jitted"](namespace["x"], namespace["y"], namespace["s"], namespace["k"])
    fuzz.assert_same(got, namespace["x"] * 1.0)
    assert "def f(x, y, s, k):\n    v = x\n    v = v * s\n    return v" in repr(case)
