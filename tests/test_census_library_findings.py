"""What the library census (benchmarks/census_libraries.py: xrft, xhistogram, flox, MetPy,
pyet, xgcm, cf_xarray, pint-xarray, geocat-comp under vmap, grad and jit) found, reduced to
plain NumPy/xarray/pandas reproducers: one small named test each, strict xfail until fixed
(the reason says what is wrong and which library call reached it).

The census found no wrong number; these are its crashes (an exception that is not one of
``labeled_func.errors``' policy errors), each with a guard test that the same code without
the culprit works.  The oracles: the per-example loop in plain xarray, the un-jitted call, a
closed form.
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func.errors import TransformError


def _field():
    return xr.DataArray(np.array([[0.2, 1.5, 0.7, 2.5], [1.9, 0.1, 1.0, -0.3]]),
                        dims=("sample", "t"), coords={"sample": [10, 20]})


def _loop(f, a):
    return xr.concat([f(a.isel(sample=i)) for i in range(a.sizes["sample"])], dim="sample")


def _search_in_index(a):
    """flox's factorize step (flox/factorize.py, _factorize_single): the sorted expected
    groups are a pandas Index, the values searched are traced."""
    return a.copy(data=np.searchsorted(pd.Index([0.0, 1.0, 2.0]), a.data))


def test_searchsorted_in_a_plain_array_works():
    """The guard of the test below: with a NumPy array of edges, vmap matches the loop."""
    a = _field()

    def f(b):
        return b.copy(data=np.searchsorted(np.array([0.0, 1.0, 2.0]), b.data))
    xr.testing.assert_equal(lf.vmap(f, dim="sample")(a), _loop(f, a))


def test_searchsorted_in_a_pandas_index_matches_the_loop():
    """np.searchsorted(pandas.Index, traced) (flox's xarray_reduce with expected_groups=): the
    Index is converted as NumPy converts it (it crashed in the kernel's namespace lookup)."""
    a = _field()
    xr.testing.assert_equal(lf.vmap(_search_in_index, dim="sample")(a), _loop(_search_in_index, a))


def test_searchsorted_in_a_pandas_index_under_jit():
    a = _field()
    f = lf.vmap(_search_in_index, dim="sample")
    xr.testing.assert_equal(lf.jit(f)(a), _loop(_search_in_index, a))


def _overwrite_real_part(a):
    """flox's grouped quantile/median (flox/aggregate_flox.py, quantile_): the group labels
    written into the real part of ``1j * array`` (``cmplx.real = labels``)."""
    c = 1j * a.data
    c.real = np.arange(a.shape[-1], dtype=float) * a.data
    return a.copy(data=c.real + c.imag ** 2)


# assigning to .real of a traced complex array (`c = 1j * x; c.real = labels`, as flox's grouped
# median/quantile does) raised AttributeError (the tracers' .real had no setter); it writes the
# real part, as NumPy does


def test_setting_the_real_part_under_vmap_matches_the_loop():
    a = _field()
    xr.testing.assert_allclose(lf.vmap(_overwrite_real_part, dim="sample")(a),
                               _loop(_overwrite_real_part, a))


def test_setting_the_real_part_under_grad_matches_the_closed_form():
    a = _field().isel(sample=0, drop=True)
    # sum(k * a + a**2) over k = 0, 1, 2, ...: d/da_k = k + 2 a_k
    want = np.arange(a.size) + 2 * a.values
    got = lf.grad(lambda b: _overwrite_real_part(b).sum())(a)
    np.testing.assert_allclose(got.values, want, rtol=1e-12)


def test_setting_the_real_part_under_jit_matches_the_function():
    a = _field().isel(sample=0, drop=True)
    xr.testing.assert_allclose(lf.jit(_overwrite_real_part)(a), _overwrite_real_part(a))


def test_setting_the_imaginary_part_and_the_real_part_of_a_real_array_as_numpy():
    a = _field()

    def f(b):
        c = b.data * (1 + 2j)
        c.imag = b.data ** 2
        r = b.data * 1.0
        r.real = b.data + 1.0          # a real array: written whole, as NumPy
        return b.copy(data=(c * r).real)
    xr.testing.assert_allclose(lf.vmap(f, dim="sample")(a), _loop(f, a))
    with pytest.raises(TypeError, match="does not have imaginary part to set"):
        lf.vmap(lambda b: setattr(b.data * 1.0, "imag", b.data), dim="sample")(a)


def _lookup_with_bounds_check(table, q):
    """MetPy's interpolate_1d (metpy/interpolate/one_dimension.py, reached by geocat-comp's
    interp_hybrid_to_pressure): indices from searchsorted, an `if` on whether one is past
    the end, which clips them; then a gather."""
    idx = np.searchsorted(np.array([0.0, 1.0, 2.0, 3.0]), q.data)
    if np.max(idx) == 4:
        idx = np.minimum(idx, 3)
    return q.copy(data=table.data[idx])


def _lookup_inputs():
    table = xr.DataArray(np.array([[10.0, 11, 12, 13], [20, 21, 22, 23]]), dims=("sample", "k"))
    inside = xr.DataArray(np.array([[0.5, 2.5], [1.5, 0.2]]), dims=("sample", "j"))
    past_the_end = xr.DataArray(np.array([[0.5, 3.5], [1.5, 3.2]]), dims=("sample", "j"))
    return table, inside, past_the_end


def test_a_bounds_check_under_vmap_branches_agree_matches_the_loop():
    """The guard of the test below: un-jitted, both calls equal the loop."""
    table, inside, past_the_end = _lookup_inputs()
    mapped = lf.vmap(_lookup_with_bounds_check, dim="sample", branches="agree")
    for q in (inside, past_the_end):
        loop = xr.concat([_lookup_with_bounds_check(table.isel(sample=i), q.isel(sample=i))
                          for i in range(2)], dim="sample")
        np.testing.assert_array_equal(mapped(table, q).values, loop.values)


def test_a_bounds_check_under_jit_retraces_when_the_guard_fails():
    """Traced where the bounds check was False, replayed where it is True: the replay's gather
    at the unclipped position raised IndexError before the guard was checked; a replay of a
    program with guards that raises is now a failed guard, and the call traces again."""
    table, inside, past_the_end = _lookup_inputs()
    mapped = lf.vmap(_lookup_with_bounds_check, dim="sample", branches="agree")
    jitted = lf.jit(mapped)
    np.testing.assert_array_equal(jitted(table, inside).values, mapped(table, inside).values)
    np.testing.assert_array_equal(jitted(table, past_the_end).values, mapped(table, past_the_end).values)
    assert jitted.traces == 2 and "raised before its guards were checked" in jitted.explain()
    np.testing.assert_array_equal(jitted(table, inside).values, mapped(table, inside).values)
    assert jitted.traces == 2                      # both programs kept: the first replays again


@pytest.fixture
def pint_xarray():
    """pint-xarray (in the test extras): its .pint accessor; the tests below skip without it."""
    return pytest.importorskip("pint_xarray")


def test_a_quantity_made_inside_and_dequantified_works(pint_xarray):
    """The guard of the tests below: a Quantity that lives only inside the function is fine."""
    a = _field()

    def f(b):
        return (b.pint.quantify("m") * 2).pint.to("km").pint.dequantify()
    out = lf.vmap(f, dim="sample")(a)
    np.testing.assert_allclose(out.values, _loop(f, a).values, rtol=1e-12)


def test_a_quantity_output_gets_the_dequantify_error_under_vmap(pint_xarray):
    with pytest.raises(TransformError, match="dequantify"):
        lf.vmap(lambda b: b.pint.quantify("m"), dim="sample")(_field())


def test_a_quantity_output_gets_the_dequantify_error_under_grad(pint_xarray):
    with pytest.raises(TransformError, match="dequantify"):
        lf.grad(lambda b: b.pint.quantify("m").sum())(_field().isel(sample=0))


# --------------------------------------------------------------------------- #
# the census itself, kept: whatever libraries this environment has
# --------------------------------------------------------------------------- #

# refused runs per (library, transform), measured after the fixes of this file (xarray
# 2026.9.0, numpy 2.4.6, the library versions that benchmarks/census_libraries.py prints)
REFUSED_AT_MOST = {
    ("flox", "V"): 12, ("flox", "G"): 4, ("flox", "J"): 12,
    ("metpy", "V"): 21, ("metpy", "G"): 13, ("metpy", "J"): 23,
    ("pyet", "V"): 5, ("pyet", "G"): 0, ("pyet", "J"): 6,
    ("geocat-comp", "V"): 6, ("geocat-comp", "G"): 1, ("geocat-comp", "J"): 6,
}
# the crashes the census still finds (none: the five it found are fixed, their reproducers above)
KNOWN_CRASHES: set = set()


def _census_module():
    root = pathlib.Path(__file__).resolve().parent.parent
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from benchmarks import census_libraries
    return census_libraries


def test_the_library_census_finds_no_wrong_number_and_no_new_crash_or_refusal():
    """Every case whose library is importable here (pint-xarray in the test extras; all nine
    in an environment with the libraries) under V, G and J: no wrong number, no crash but
    the known ones, no more refusals per library and transform than measured."""
    census = _census_module()
    outcomes = census.run_census()
    assert len(outcomes) == 3 * len(census.CASES) >= 3 * 60
    assert [f"{o.case}:{o.transform}: {o.error}" for o in outcomes if o.outcome == "wrong"] == []
    crashes = {f"{o.case}:{o.transform}" for o in outcomes if o.outcome == "crash"}
    assert crashes <= KNOWN_CRASHES, sorted(crashes - KNOWN_CRASHES)
    refused = {}
    for o in outcomes:
        if o.outcome == "refused":
            refused.setdefault((o.library, o.transform), []).append(f"{o.case}: {o.error}")
    grown = {key: runs for key, runs in refused.items() if len(runs) > REFUSED_AT_MOST.get(key, 0)}
    assert grown == {}
