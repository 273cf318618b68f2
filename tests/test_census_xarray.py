"""The xarray-method census (tests/census_xarray.py) under vmap (V), grad (G) and jit (J).

One test per case and transform: no case may be "wrong" (a result that differs from the
per-example loop, from central finite differences or from the un-jitted function) or
"crash" (an exception that is not a documented refusal); a case may be refused only if it
is in ``KNOWN_REFUSED`` (the refusals measured when the census was written), so that the
refused count can only go down: a case that starts to work needs no change here (delete it
from ``KNOWN_REFUSED`` and lower ``REFUSED_CEILING``); a new refusal fails.
``XFAIL`` lists the wrong or crashing cases found and not fixed yet (strict: fixing one
makes its test fail until it is taken off the list).
"""
from __future__ import annotations

import types

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func.errors import ConversionError, DynamicShapeError

try:  # works with and without a tests/__init__.py
    import census_xarray as census
except ImportError:  # pragma: no cover
    from tests import census_xarray as census

# (case, transform) refused on the tree the census was written on, by reason.
KNOWN_REFUSED = frozenset({
    # dynamic shapes: labels dropped by value, even where every example drops the same ones
    ("where_drop_common", "V"), ("where_drop_common", "J"),
    ("dropna_any_common", "V"), ("dropna_any_common", "J"),
    ("dropna_all", "V"), ("dropna_all", "J"),
    ("rolling_mean_dropna", "V"), ("rolling_mean_dropna", "J"),
    ("groupby_values", "V"), ("groupby_values", "J"),
    # interpolate_na(method="nearest") goes through scipy.interpolate.interp1d under grad
    ("interpolate_na_nearest", "G"),
    # quantile levels that are mapped values (the result's quantile coordinate would differ per example)
    ("quantile_mapped_q", "V"), ("quantile_mapped_q", "J"),
    # sortby on values along a dim with an index coordinate: the labels' order would differ per example
    ("sortby_values", "V"), ("sortby_values", "J"), ("sortby_mean", "V"), ("sortby_mean", "J"),
})
REFUSED_CEILING = 17  # measured 2026-12-07 (V 8, G 1, J 8); may only go down
# the refusals above that lf.vmap(..., branches="agree") accepts: every example drops the same labels
AGREE_ACCEPTS = frozenset((name, t) for name in ("where_drop_common", "dropna_any_common", "dropna_all",
                                                 "rolling_mean_dropna") for t in ("V", "J"))

# Wrong or crashing cases found and not fixed (tests/test_census_findings.py holds each as a
# named regression test): (case, transform) -> reason.
XFAIL: dict = {}   # none now: groupby_anomaly V (a label spread along x) was fixed


def _params():
    params = []
    for case in census.CASES:
        for transform in census.TRANSFORMS:
            marks = []
            if (case.name, transform) in XFAIL:
                marks.append(pytest.mark.xfail(strict=True, reason=XFAIL[case.name, transform]))
            params.append(pytest.param(case, transform, marks=marks, id=f"{case.name}-{transform}"))
    return params


@pytest.mark.slow
@pytest.mark.parametrize("case, transform", _params())
def test_census_case(case, transform):
    outcome = census.run_case(case, transform)
    assert outcome.outcome not in ("wrong", "crash"), (
        f"{case.name} under {transform}: {outcome.outcome}: {outcome.error}\n{outcome.detail}")
    if outcome.outcome == "refused":
        assert (case.name, transform) in KNOWN_REFUSED, (
            f"{case.name} under {transform} is refused and was not before: {outcome.error}")


@pytest.mark.parametrize("name, transform", sorted(AGREE_ACCEPTS), ids="-".join)
def test_census_case_under_branches_agree(name, transform):
    """The equal-shape refusals run, and equal the loop / the un-jitted function, where the
    examples are allowed to agree (issue 26's second item)."""
    case = next(c for c in census.CASES if c.name == name)
    outcome = census.run_case(case, transform, {"branches": "agree"})
    assert outcome.outcome == "ok", f"{name} under {transform}: {outcome.outcome}: {outcome.error}"


def test_refused_ceiling():
    assert len(KNOWN_REFUSED) <= REFUSED_CEILING
    assert AGREE_ACCEPTS <= KNOWN_REFUSED
    assert len({name for name, _ in KNOWN_REFUSED}) <= 9  # distinct cases (issue 26: at most 15)
    names = set(census.case_names())
    assert {name for name, _ in KNOWN_REFUSED} <= names
    assert {name for name, _ in XFAIL} <= names
    assert not set(XFAIL) & KNOWN_REFUSED
    assert {t for _, t in KNOWN_REFUSED | set(XFAIL)} <= set(census.TRANSFORMS)


def test_case_names_unique_and_enough():
    names = census.case_names()
    assert len(names) == len(set(names))
    assert len(names) >= 200
    groups = {case.group for case in census.CASES}
    assert {"reductions", "interpolation", "weighted", "groupby and resample", "Dataset"} <= groups


def test_every_case_runs_in_plain_xarray():
    """The oracle of every case (the loop over examples in plain xarray) runs: a broken case
    would otherwise be counted as a finding."""
    assert census.check_oracles() == []


# --------------------------------------------------------------------------- #
# the census itself can fail: its checks see wrong numbers, crashes and refusals
# --------------------------------------------------------------------------- #


def _fake_lf(vmap=None, grad=None, jit=None):
    return types.SimpleNamespace(vmap=vmap or lf.vmap, grad=grad or lf.grad, jit=jit or lf.jit)


def test_a_wrong_vmap_is_wrong(monkeypatch):
    def off_by_a_little(f, dim):
        return lambda *args: lf.vmap(f, dim=dim)(*args) * (1 + 1e-6)
    monkeypatch.setattr(census, "lf", _fake_lf(vmap=off_by_a_little))
    outcome = census.run_case(census.CASE_BY_NAME["cumsum"], "V")
    assert outcome.outcome == "wrong", outcome


def test_a_wrong_gradient_is_wrong(monkeypatch):
    def doubled(f):
        return lambda *args: lf.grad(f)(*args) * 2
    monkeypatch.setattr(census, "lf", _fake_lf(grad=doubled))
    outcome = census.run_case(census.CASE_BY_NAME["rolling_mean"], "G")
    assert outcome.outcome == "wrong", outcome
    assert "finite differences" in outcome.error


def test_a_jit_that_replays_stale_values_is_wrong(monkeypatch):
    def stale(f):
        first = []

        def call(*args):
            if not first:
                first.append(f(*args))
            return first[0]
        return call
    monkeypatch.setattr(census, "lf", _fake_lf(jit=stale))
    outcome = census.run_case(census.CASE_BY_NAME["diff"], "J")
    assert outcome.outcome == "wrong", outcome


def test_refusals_and_crashes_are_told_apart(monkeypatch):
    def refusing(f, dim):
        def call(*args):
            raise DynamicShapeError("refused here\nsecond line")
        return call
    monkeypatch.setattr(census, "lf", _fake_lf(vmap=refusing))
    outcome = census.run_case(census.CASE_BY_NAME["diff"], "V")
    assert (outcome.outcome, outcome.error) == ("refused", "DynamicShapeError: refused here")

    def crashing(f, dim):
        def call(*args):
            raise ValueError("boom")
        return call
    monkeypatch.setattr(census, "lf", _fake_lf(vmap=crashing))
    outcome = census.run_case(census.CASE_BY_NAME["diff"], "V")
    assert (outcome.outcome, outcome.error) == ("crash", "ValueError: boom")
    assert census.is_refusal(ConversionError("x")) and census.is_refusal(NotImplementedError())
    assert not census.is_refusal(TypeError("x"))


def test_not_applicable_and_skipped():
    assert census.run_case(census.CASE_BY_NAME["argmax"], "G").outcome == "n/a"
    assert census.run_case(census.CASE_BY_NAME["astype_float32"], "G").outcome == "n/a"
    case = census.Case("needs_missing", lambda a: a, ("x",), "test", needs="no_such_module_26")
    assert census.run_case(case, "V").outcome == "skipped"


def test_perturbed_inputs_keep_nans_and_order():
    for name in ("x", "xn", "xs", "x3"):
        a, b = census.INPUTS[name], census.perturbed(census.INPUTS[name])
        assert not np.array_equal(a.values, b.values, equal_nan=True)
        np.testing.assert_array_equal(np.isnan(a.values), np.isnan(b.values))
        np.testing.assert_array_equal(np.argsort(a.values, axis=-1), np.argsort(b.values, axis=-1))
    assert isinstance(census.perturbed(census.INPUTS["ds"]), xr.Dataset)
