"""NumPy's global random state inside vmap (issue: ensembles, item 3).

vmap calls the function once for all the examples: a draw from ``np.random`` is one draw
that every example shares, which a loop over the examples would not give.  Under
``randomness="error"`` (the default) and ``"different"`` such a draw raises
RandomnessError pointing at ``lf.random``; under ``"same"`` it is what was asked for.

Oracles: the loop that draws anew per example (to show what would go wrong), and a loop
that shares one draw made from the same seed (what ``"same"`` must give).
"""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

dask = pytest.importorskip("dask")


def ensemble():
    return xr.DataArray(np.arange(12.0).reshape(4, 3), dims=("member", "t"),
                        coords={"member": [0, 1, 2, 3]})


DRAWS = {
    "normal": lambda v: v + np.random.normal(),
    "rand of a shape": lambda v: v * np.random.rand(3),
    "integers": lambda v: v + np.random.randint(0, 10),
    "choice": lambda v: v + np.random.choice([1.0, 2.0]),
}


@pytest.mark.parametrize("name", list(DRAWS))
@pytest.mark.parametrize("randomness", ["error", "different"])
def test_a_global_numpy_draw_raises(name, randomness):
    with pytest.raises(lf.RandomnessError, match=rf"randomness='{randomness}'.*np\.random.*lf\.random"):
        lf.vmap(DRAWS[name], dim="member", randomness=randomness)(ensemble())


def test_the_loop_would_draw_per_example():
    """What the error prevents: the loop's examples differ, one traced call's would not."""
    x = ensemble()
    np.random.seed(0)
    looped = np.stack([DRAWS["normal"](x.isel(member=i)).values - x.isel(member=i).values for i in range(4)])
    assert len(np.unique(looped[:, 0])) == 4


def test_a_normal_from_the_cached_second_value_is_caught():
    # the legacy normal draws two values at a time: the second comes from a cache, without
    # moving the generator's position; the check still sees it
    np.random.seed(0)
    np.random.normal()
    assert np.random.get_state()[3] == 1  # a cached value is waiting
    with pytest.raises(lf.RandomnessError):
        lf.vmap(DRAWS["normal"], dim="member")(ensemble())


def test_a_cached_normal_is_caught_after_a_quiet_call():
    # the check remembers the state of its last full read: a call that drew nothing, then
    # a draw that leaves a normal in the cache, then a call that takes just that one
    np.random.seed(3)
    lf.vmap(lambda v: v * 2, dim="member")(ensemble())
    np.random.normal()
    lf.vmap(lambda v: v * 2, dim="member")(ensemble())
    with pytest.raises(lf.RandomnessError):
        lf.vmap(DRAWS["normal"], dim="member")(ensemble())


def test_another_bit_generator_behind_np_random_is_watched_too():
    original = np.random.get_bit_generator()
    np.random.set_bit_generator(np.random.PCG64(0))
    try:
        lf.vmap(lambda v: v * 2, dim="member")(ensemble())
        with pytest.raises(lf.RandomnessError):
            lf.vmap(DRAWS["rand of a shape"], dim="member")(ensemble())
    finally:
        np.random.set_bit_generator(original)


@pytest.mark.parametrize("chunk_size", [None, 3])
def test_same_shares_one_draw_as_a_loop_sharing_it(chunk_size):
    x = ensemble()
    np.random.seed(1)
    out = lf.vmap(DRAWS["rand of a shape"], dim="member", randomness="same", chunk_size=chunk_size)(x)
    np.random.seed(1)
    shared = np.random.rand(3)
    xr.testing.assert_identical(out, xr.concat([x.isel(member=i) * shared for i in range(4)], dim="member"))


def test_nested_vmaps_and_jacfwd_raise_and_same_allows():
    x = ensemble()
    inner = lf.vmap(lambda v: v + np.random.rand(), dim="t")
    with pytest.raises(lf.RandomnessError):
        lf.vmap(inner, dim="member")(x)
    loss = lambda v: (v * np.random.normal()).sum()  # noqa: E731
    with pytest.raises(lf.RandomnessError):  # jacfwd vmaps over tangents
        lf.jacfwd(loss)(x)
    np.random.seed(2)
    jacobian = lf.jacfwd(loss, randomness="same")(x)  # the Jacobian of one realisation
    np.random.seed(2)
    xr.testing.assert_allclose(jacobian, xr.full_like(x, np.random.normal()))


def test_lf_random_and_draw_free_functions_pass():
    x = ensemble()
    lf.random.seed(0)
    out = lf.vmap(lambda v: v + lf.random.normal(), dim="member", randomness="different")(x)
    assert len(np.unique((out - x).isel(t=0).values)) == 4
    state = np.random.get_state()
    lf.vmap(lambda v: v * 2, dim="member")(x)
    assert np.random.get_state()[2] == state[2]


def refuse_to_compute(dsk, keys, **kwargs):
    raise AssertionError("the graph was computed while it was being built")


def test_a_lazy_vmap_raises_while_the_graph_is_built():
    lazy = ensemble().chunk(member=2)
    with dask.config.set(scheduler=refuse_to_compute), pytest.raises(lf.RandomnessError, match="lf.random"):
        lf.vmap(DRAWS["normal"], dim="member")(lazy)
