"""Guards under lf.jit (issue 26): a decision taken from the traced call's values
(``lf.vmap(..., branches="agree")``'s ``if``/``float()``/shapes, xarray's NaN check of
``weighted`` weights) is re-checked after every replay; a call that decides otherwise traces
again (``explain()`` names the guard), or raises the un-jitted function's error.

Oracles: the per-example Python loop and the un-jitted vmap."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf


def loop(func, *args, dim="sample"):
    size = args[0].sizes[dim]
    return xr.concat([func(*(a.isel({dim: i}) for a in args)) for i in range(size)], dim=dim)


def sample(values):
    values = np.array(values, dtype=float)  # a copy: some tests write into it
    return xr.DataArray(values, dims=("sample", "t"), coords={"sample": np.arange(values.shape[0]) * 10})


def scaled(v):
    if v.sum() > 0:  # every example of a call takes the same branch
        return v * 2
    return -v + 1


POSITIVE = sample([[1.0, 2.0, 0.5], [3.0, 4.0, 1.0], [0.5, 0.5, 0.5]])


# --- bool() / if ----------------------------------------------------------------------------------
def test_if_that_agrees_replays_and_equals_the_loop():
    jitted = lf.jit(lf.vmap(scaled, dim="sample", branches="agree"))
    vmapped = lf.vmap(scaled, dim="sample", branches="agree")
    for x in (POSITIVE, POSITIVE + 1, POSITIVE * 3):
        got = jitted(x)
        xr.testing.assert_identical(got, vmapped(x))
        xr.testing.assert_identical(got, loop(scaled, x))
    assert jitted.traces == 1


def test_the_other_agreed_branch_traces_again_and_both_programs_are_kept():
    jitted = lf.jit(lf.vmap(scaled, dim="sample", branches="agree"))
    calls = [POSITIVE, -POSITIVE, POSITIVE + 1, -POSITIVE - 1, POSITIVE]
    for x in calls:
        xr.testing.assert_identical(jitted(x), loop(scaled, x))
    assert jitted.traces == 2  # one program per branch, both replayed since
    text = jitted.explain()
    line = scaled.__code__.co_firstlineno + 1
    assert re.search(rf"trace 2: a branch decided by bool\(\) at test_jit_guards.py:{line} changed: trace 1 "
                     r"took True, this call does not", text), text


def test_examples_that_disagree_at_a_later_call_raise_naming_them():
    jitted = lf.jit(lf.vmap(scaled, dim="sample", branches="agree"))
    jitted(POSITIVE)
    mixed = POSITIVE * xr.DataArray([1.0, -1.0, 1.0], dims="sample")
    with pytest.raises(lf.DataDependentControlFlowError) as info:
        jitted(mixed)
    with pytest.raises(lf.DataDependentControlFlowError) as unjitted:
        lf.vmap(scaled, dim="sample", branches="agree")(mixed)
    assert str(info.value) == str(unjitted.value)
    assert "example 1 (sample=10) gives False" in str(info.value)
    assert "examples 0, 2 (sample=0, sample=20) give True" in str(info.value)
    assert jitted.traces == 1  # nothing stored; the first program still replays
    xr.testing.assert_identical(jitted(POSITIVE + 2), loop(scaled, POSITIVE + 2))
    assert jitted.traces == 1


def test_a_validation_that_raises_on_the_other_branch():
    def checked(rs):
        if np.nanmax(rs.data) < 100:
            raise ValueError("rs looks like MJ, expected W m-2")
        return rs / 10

    jitted = lf.jit(lf.vmap(checked, dim="sample", branches="agree"))
    x = sample([[150.0, 200.0], [160.0, 120.0]])
    xr.testing.assert_identical(jitted(x), loop(checked, x))
    with pytest.raises(ValueError, match="looks like MJ"):
        jitted(x / 100)
    xr.testing.assert_identical(jitted(x + 5), loop(checked, x + 5))
    assert jitted.traces == 1


def test_warnings_in_an_agreed_branch():
    def warns(v):
        if np.any(v > 1.2):
            warnings.warn("above 120%", UserWarning)
        return v.clip(0, 1)

    jitted = lf.jit(lf.vmap(warns, dim="sample", branches="agree"))
    quiet = sample([[0.5, 0.2], [0.1, 0.9]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        xr.testing.assert_identical(jitted(quiet), loop(warns, quiet))
    with pytest.warns(UserWarning, match="above 120%"):  # the other branch: traced again, and it warns
        xr.testing.assert_identical(jitted(quiet + 1), loop(warns, quiet + 1))
    assert jitted.traces == 2


def test_nested_vmaps_and_grad_inside():
    def energy(v):
        if v.max() > 0:
            return (v ** 2).sum()
        return v.sum()

    x = sample([[1.0, 2.0], [0.5, 3.0]])
    per_example = lf.jit(lf.vmap(lf.grad(energy), dim="sample", branches="agree"))
    xr.testing.assert_allclose(per_example(x), loop(lf.grad(energy), x))
    xr.testing.assert_allclose(per_example(-x), loop(lf.grad(energy), -x))
    assert per_example.traces == 2
    grid = xr.DataArray(np.arange(1.0, 13.0).reshape(2, 3, 2), dims=("a", "b", "t"))
    nested = lf.jit(lf.vmap(lf.vmap(energy, dim="b", branches="agree"), dim="a", branches="agree"))
    want = xr.concat([xr.concat([energy(grid.isel(a=i, b=j)) for j in range(3)], "b") for i in range(2)], "a")
    xr.testing.assert_allclose(nested(grid), want)
    flipped = grid.copy(data=-grid.values)
    flipped[1, 2, 0] = 5.0  # example (1, 2) has a positive max: disagrees with the others
    with pytest.raises(lf.DataDependentControlFlowError, match=r"\(1, 2\)"):
        nested(flipped)


# --- float() / int() / .item() ------------------------------------------------------------------------
def normalized(v):
    top = float(v.max())  # the same number in every example
    return v / top


def test_an_agreed_number_is_guarded_to_the_bit():
    jitted = lf.jit(lf.vmap(normalized, dim="sample", branches="agree"))
    x = sample([[1.0, 2.0], [2.0, 1.0]])
    xr.testing.assert_identical(jitted(x), loop(normalized, x))
    swapped = sample([[2.0, 1.0], [1.0, 2.0]])  # the same maximum: replayed
    xr.testing.assert_identical(jitted(swapped), loop(normalized, swapped))
    assert jitted.traces == 1
    xr.testing.assert_identical(jitted(x * 4), loop(normalized, x * 4))  # another number: traced again
    assert jitted.traces == 2
    assert "a value taken by float() at test_jit_guards.py" in jitted.explain()
    with pytest.raises(lf.ItemError, match=r"example 1 \(sample=10\) holds 3.0"):
        jitted(sample([[1.0, 2.0], [3.0, 1.0]]))


def test_int_and_item_of_an_agreed_value():
    def first_columns(v):
        n = int(v.count())  # the number of valid values, the same in every example
        return v.isel(t=slice(0, n - 1)) * v.max().item()

    jitted = lf.jit(lf.vmap(first_columns, dim="sample", branches="agree"))
    x = sample([[1.0, 3.0, 2.0], [3.0, 0.0, 1.0]])
    xr.testing.assert_identical(jitted(x), loop(first_columns, x))
    y = x.copy(data=np.where(np.arange(3) == 2, np.nan, x.values))  # two valid values: a shorter result
    xr.testing.assert_identical(jitted(y), loop(first_columns, y))
    assert jitted.traces == 2


# --- shapes that follow the values -------------------------------------------------------------------
def test_masks_with_equal_counts_are_found_at_every_replay():
    def big(v):
        return v.data[v.data > 4]

    jitted = lf.jit(lf.vmap(big, dim="sample", branches="agree"))
    x = sample([[1.0, 5.0, 7.0], [9.0, 2.0, 6.0]])
    np.testing.assert_array_equal(jitted(x), np.stack([big(x.isel(sample=i)) for i in range(2)]))
    other = sample([[8.0, 5.0, 0.0], [0.0, 9.5, 6.5]])  # other positions, as many of them: replayed
    np.testing.assert_array_equal(jitted(other), np.stack([big(other.isel(sample=i)) for i in range(2)]))
    assert jitted.traces == 1
    three = sample([[8.0, 5.0, 6.0], [7.0, 9.5, 6.5]])  # three in every example: traced again
    np.testing.assert_array_equal(jitted(three), np.stack([big(three.isel(sample=i)) for i in range(2)]))
    assert jitted.traces == 2
    assert "a shape decided by boolean-mask indexing" in jitted.explain()
    with pytest.raises(lf.DynamicShapeError, match="example 0 \\(sample=0\\) selects 1; example 1 \\(sample=10\\) "
                                                   "selects 2"):
        jitted(sample([[1.0, 5.0, 0.0], [9.0, 2.0, 6.0]]))


def test_dropna_of_the_same_labels():
    def dropped(v):
        return v.dropna("t") * 2

    x = xr.DataArray([[1.0, np.nan, 3.0], [4.0, np.nan, 6.0]], dims=("sample", "t"), coords={"t": [0, 1, 2]})
    jitted = lf.jit(lf.vmap(dropped, dim="sample", branches="agree"))
    xr.testing.assert_identical(jitted(x), loop(dropped, x))
    xr.testing.assert_identical(jitted(x + 1), loop(dropped, x + 1))
    assert jitted.traces == 1
    y = x.fillna(0.0).where(x.t != 0)  # every example drops t=0 instead
    xr.testing.assert_identical(jitted(y), loop(dropped, y))
    assert jitted.traces == 2
    with pytest.raises(lf.DynamicShapeError):
        jitted(x.where(xr.DataArray([[True, True, True], [False, True, True]], dims=("sample", "t"))))


# --- writes into arguments: the guard is checked before anything is written ----------------------------
def test_a_write_into_an_argument_is_made_once_when_a_guard_fails():
    def bump(v):
        v += 1.0  # written through to the caller's array
        if v.sum() > 0:
            return v * 2
        return v * 0

    jitted = lf.jit(lf.vmap(bump, dim="sample", branches="agree"))
    for values in (POSITIVE.values, -POSITIVE.values - 5, POSITIVE.values + 1):
        mine, theirs = sample(values.copy()), sample(values.copy())
        got = jitted(mine)
        want = lf.vmap(bump, dim="sample", branches="agree")(theirs)
        xr.testing.assert_identical(got, want)
        xr.testing.assert_identical(mine, theirs)  # bumped once, as without lf.jit
        np.testing.assert_array_equal(mine.values, values + 1)
    assert jitted.traces == 2
    mixed = sample(POSITIVE.values * np.array([[1.0], [-5.0], [1.0]]))
    before = mixed.copy()
    with pytest.raises(lf.DataDependentControlFlowError):
        jitted(mixed)
    # the failed replay wrote nothing, and lf.jit writes through only when a call returns (the
    # un-jitted vmap has written before its `if` raised)
    np.testing.assert_array_equal(mixed.values, before.values)


# --- what cannot be guarded ----------------------------------------------------------------------------
def test_a_generator_living_across_calls_is_refused_with_a_guard():
    def noisy(v):
        if v.sum() > 0:
            return v + lf.random.normal(like=v)
        return v

    jitted = lf.jit(lf.vmap(noisy, dim="sample", branches="agree", randomness="different"))
    with pytest.raises(lf.UnsupportedOperationError, match="draw twice"):
        jitted(POSITIVE)

    def seeded(v):
        lf.random.seed(3)
        return noisy(v)

    jitted = lf.jit(lf.vmap(seeded, dim="sample", branches="agree", randomness="different"))
    unjitted = lf.vmap(seeded, dim="sample", branches="agree", randomness="different")
    for x in (POSITIVE, -POSITIVE, POSITIVE):
        xr.testing.assert_identical(jitted(x), unjitted(x))


def test_a_decision_inside_a_while_loop_body_is_refused():
    def f(v):
        def body(state):
            if state.sum() > 0:
                return state - 1.0
            return state

        return lf.while_loop(lambda s: (s > 0).any(), body, v)

    with pytest.raises(lf.UnsupportedOperationError, match="lf.while_loop"):
        lf.jit(lf.vmap(f, dim="sample", branches="agree"))(POSITIVE)


def test_without_branches_agree_jit_still_refuses():
    with pytest.raises(lf.DataDependentControlFlowError, match="lf.jit"):
        lf.jit(scaled)(POSITIVE.isel(sample=0))
    with pytest.raises(lf.DataDependentControlFlowError, match="branches='agree'"):
        lf.jit(lf.vmap(scaled, dim="sample"))(POSITIVE)


def test_programs_without_guards_have_none():
    jitted = lf.jit(lf.vmap(lambda v: v * 2, dim="sample"))
    jitted(POSITIVE)
    (compiled,) = jitted.cache.values()
    assert compiled.guards == ()
    guarded = lf.jit(lf.vmap(scaled, dim="sample", branches="agree"))
    guarded(POSITIVE)
    (compiled,) = guarded.cache.values()
    assert len(compiled.guards) == 1 and compiled.guards[0].answer is True


# --- Dask: each block checks ---------------------------------------------------------------------------
def test_dask_blocks_guard_their_own_examples():
    pytest.importorskip("dask")
    import dask

    data = sample([[200.0, 210.0], [220.0, 230.0], [-20.0, -30.0], [-40.0, -50.0]])
    jitted = lf.jit(lf.vmap(scaled, dim="sample", branches="agree"))
    with dask.config.set(scheduler="sync"):
        got = jitted(data.chunk(sample=2))
        xr.testing.assert_identical(got.compute(), loop(scaled, data))
        mixed = data.copy(data=data.values * np.array([[1.0], [-1.0], [1.0], [1.0]]))
        with pytest.raises(lf.DataDependentControlFlowError, match="of its Dask block"):
            jitted(mixed.chunk(sample=2)).compute()


def test_chunks_run_as_one_program_take_their_own_branches():
    x = sample([[1.0, 2.0], [3.0, 4.0], [-1.0, -2.0], [-3.0, -4.0], [5.0, 6.0], [7.0, 8.0]])
    for jit in (True, None):
        got = lf.vmap(scaled, dim="sample", branches="agree", chunk_size=2, jit=jit)(x)
        xr.testing.assert_identical(got, loop(scaled, x))
    mixed = x.copy(data=x.values * np.array([[1.0], [1.0], [1.0], [-1.0], [1.0], [1.0]]))
    with pytest.raises(lf.DataDependentControlFlowError, match=r"example 1 of its chunk \(vmap\(chunk_size=\.\.\.\) "
                                                               r"run as one lf.jit program: positions within the chunk\) "
                                                               "gives True"):
        lf.vmap(scaled, dim="sample", branches="agree", chunk_size=2, jit=True)(mixed)
    with pytest.raises(lf.DataDependentControlFlowError, match=r"example 3 \(sample=30\) gives True"):
        lf.vmap(scaled, dim="sample", branches="agree", chunk_size=2)(mixed)


def test_groupby_by_values_that_every_example_shares():
    def grouped(d, g):
        return d.groupby(g.rename("g")).mean()

    rng = np.random.default_rng(5)
    d = xr.DataArray(rng.normal(size=(3, 6)), dims=("sample", "t"))
    jitted = lf.jit(lf.vmap(grouped, dim="sample", branches="agree"))
    for row in ([1, 2, 1, 3, 3, 2], [1, 2, 1, 3, 3, 2], [1, 1, 1, 3, 3, 2]):
        labels = xr.DataArray(np.tile(row, (3, 1)), dims=("sample", "t"))
        want = loop(grouped, d, labels)
        xr.testing.assert_allclose(jitted(d, labels).transpose(*want.dims), want)
    assert jitted.traces == 2
    assert "a value taken by np.asarray at" in jitted.explain()
    labels = xr.DataArray(np.tile([1, 2, 1, 3, 3, 2], (3, 1)), dims=("sample", "t"))
    labels[2, 0] = 2  # example 2 forms other groups
    with pytest.raises(lf.DynamicShapeError, match="here example 2 holds other values than example 0"):
        jitted(d, labels)
    with pytest.raises(lf.DynamicShapeError, match="here example 2 holds other values than example 0"):
        lf.vmap(grouped, dim="sample", branches="agree")(d, labels)


def test_grad_outside_the_vmap():
    def f(v):
        if v.sum() > 0:
            return (v ** 2).sum()
        return (v ** 3).sum()

    def loss(p):
        return lf.vmap(f, dim="sample", branches="agree")(p).sum()

    jitted = lf.jit(lf.grad(loss))
    x = sample([[1.0, 2.0], [3.0, 4.0]])
    for v in (x, -x, x * 2, -x * 2):
        want = xr.concat([lf.grad(f)(v.isel(sample=i)) for i in range(2)], "sample")  # the loop of grads
        xr.testing.assert_allclose(jitted(v), want)
        xr.testing.assert_identical(jitted(v), lf.grad(loss)(v))
    assert jitted.traces == 2


def test_an_array_of_strings_compared_with_a_string_follows_each_calls_strings():
    """``s == "a"`` of a string argument (NumPy's unicode or object strings) masks as NumPy
    does, under lf.jit at each call (new strings, same shape) and under vmap of a Dataset
    whose string data variable is mapped."""
    x = xr.DataArray([1.0, 2.0, 3.0, 4.0], dims="t")

    def f(s, x):
        return x.where(s == "a", 0.0) + x.where(s != "b", -1.0)

    jitted = lf.jit(f)
    for labels in (["a", "b", "a", "c"], ["b", "b", "a", "a"], ["c", "a", "b", "a"]):
        for s in (xr.DataArray(np.array(labels), dims="t"), xr.DataArray(np.array(labels, dtype=object), dims="t")):
            xr.testing.assert_identical(jitted(s, x), f(s, x))
    stations = xr.Dataset({"kind": ("station", ["a", "b", "c"]),
                           "flow": (("station", "t"), np.arange(12.0).reshape(3, 4))})
    got = lf.vmap(lambda d: xr.where(d.kind == "b", d.flow, 0.0), dim="station")(stations)
    want = xr.concat([xr.where(stations.isel(station=k).kind == "b", stations.isel(station=k).flow, 0.0)
                      for k in range(3)], dim="station")
    np.testing.assert_array_equal(got.transpose("station", "t").values, want.values)
