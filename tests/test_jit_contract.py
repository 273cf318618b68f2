"""The contract of ``lf.jit``: a jitted call returns what the function returns, or raises.

Each test is a way the compiled program once returned something else without raising
(docs/jit.md, "The contract"): labels that the signature did not hold, constants of one
type or sign standing for another, random draws, writes into the arguments, a fused
float32 evaluation. The oracle is always the function itself, called on the same
arguments (and, for draws, from the same generator state).
"""
import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from test_jit import same


def identical(got, expected):
    """xarray's identical (values, dims, coords, attrs, names) plus dtypes and the bits of the data."""
    xr.testing.assert_identical(got, expected)
    for name in set(expected.coords) | ({None} if isinstance(expected, xr.DataArray) else set(expected.data_vars)):
        g, e = (got, expected) if name is None else (got[name], expected[name])
        assert g.attrs == e.attrs and type(g.attrs) is type(e.attrs), name
        assert {k: type(v) for k, v in g.attrs.items()} == {k: type(v) for k, v in e.attrs.items()}, name
        same(g.values, e.values)


def twice(function, first, second):
    """``lf.jit(function)`` called on ``first`` then ``second``, each against the function."""
    jitted = lf.jit(function)
    for args in (first, second):
        identical(jitted(*args), function(*args))
    return jitted


# --- labels: what goes into the outputs is part of the signature -------------------------------
def base(**coord_attrs):
    x = xr.DataArray(np.arange(3.0), dims="t", coords={"t": [0, 1, 2], "c": ("t", [5.0, 6.0, 7.0])})
    for name, attrs in coord_attrs.items():
        x[name].attrs.update(attrs)
    return x


@pytest.mark.parametrize("coord", ["t", "c"])
def test_the_attrs_of_a_coordinate_are_part_of_the_signature(coord):
    jitted = twice(lambda x: x * 2, (base(),), (base(**{coord: {"units": "s"}}),))
    assert jitted.traces == 2


def test_the_attrs_of_a_dataset_coordinate_are_part_of_the_signature():
    plain = xr.Dataset({"v": base()})
    other = plain.copy(deep=True)
    other["t"].attrs["units"] = "s"
    twice(lambda ds: ds * 2, (plain,), (other,))


def test_attrs_equal_in_value_but_not_in_type_are_two_signatures():
    one, other = base(), base()
    one.attrs["scale"], other.attrs["scale"] = 1, 1.0
    twice(lambda x: x + 1, (one,), (other,))


def test_the_encoding_of_a_variable_is_part_of_the_signature():
    one, other = base(), base()
    other.encoding["dtype"] = "float32"
    jitted = twice(lambda x: x.copy(), (one,), (other,))
    assert jitted(other).encoding == other.copy().encoding


def test_coordinate_labels_of_another_sign_of_zero_are_another_signature():
    one = xr.DataArray([1.0, 2.0], dims="t", coords={"t": [0.0, 1.0]})
    other = one.assign_coords(t=[-0.0, 1.0])
    jitted = twice(lambda x: x * 2, (one,), (other,))
    assert np.signbit(jitted(other).t.values[0])


# --- constants: Python numbers and static arguments by type and sign ------------------------------
def test_a_static_argument_of_another_type_and_equal_value_traces_again():
    jitted = lf.jit(lambda x, n: x * n, static_argnames="n")
    x = xr.DataArray(np.arange(3), dims="t")
    for n in (1, 1.0, True, np.float32(1), 1):
        identical(jitted(x, n), x * n)
    assert jitted.traces == 4


def test_static_tuples_compare_item_by_item_with_their_types():
    jitted = lf.jit(lambda x, scales: x * scales[0], static_argnames="scales")
    x = xr.DataArray(np.arange(3), dims="t")
    assert jitted(x, (2, 1)).dtype == np.int64
    assert jitted(x, (2.0, 1)).dtype == np.float64


@pytest.mark.parametrize("first, second", [(0.0, -0.0), (-0.0, 0.0), (1, 1.0), (1.0, True), (np.float32(1), 1.0)])
def test_python_numbers_of_another_sign_or_type_are_other_programs(first, second):
    def f(c, s):
        return np.arctan2(c * s, -1.0) + c * s

    c = xr.DataArray([1.0, 2.0], dims="t")
    twice(f, (c, first), (c, second))


def test_a_nan_argument_replays_its_own_program():
    jitted = lf.jit(lambda x, fill: x.fillna(fill))
    x = xr.DataArray([np.nan, 1.0], dims="t")
    for _ in range(3):
        identical(jitted(x, np.nan), x.fillna(np.nan))
    assert jitted.traces == 1


# --- random draws: the function's, call after call -----------------------------------------------
@pytest.fixture
def x():
    return xr.DataArray(np.zeros(4), dims="t")


def draws_agree(function, x, calls=3):
    """The jitted function's draws equal the function's from the same default generator
    state, call after call, and both leave the generator in the same state."""
    jitted = lf.jit(function)
    for call in range(calls):
        lf.random.seed(call)
        expected = function(x)
        after = lf.random.uniform(sizes={"k": 2})
        lf.random.seed(call)
        got = jitted(x)
        identical(got, expected)
        identical(lf.random.uniform(sizes={"k": 2}), after)
    return jitted


def test_a_seed_inside_the_function_gives_its_draws_at_every_call(x):
    def f(x):
        lf.random.seed(0)
        return x + lf.random.normal(like=x)

    draws_agree(f, x)


def test_a_generator_made_inside_the_function_gives_its_draws_at_every_call(x):
    def f(x):
        rng = np.random.default_rng(5)
        return x + lf.random.normal(like=x, rng=rng) + lf.random.uniform(like=x, rng=rng)

    draws_agree(f, x)


def test_a_generator_made_outside_moves_on_at_every_call_as_the_function_moves_it(x):
    rng_eager, rng_jit = np.random.default_rng(7), np.random.default_rng(7)
    jitted = lf.jit(lambda x: x + lf.random.normal(like=x, rng=rng_jit))
    for _ in range(3):
        identical(jitted(x), x + lf.random.normal(like=x, rng=rng_eager))


def test_a_draw_that_nothing_reads_still_moves_the_generator(x):
    def f(x):
        lf.random.normal(like=x)  # unused, as in the function
        return x + lf.random.normal(like=x)

    draws_agree(f, x)


def test_draws_before_and_after_a_seed_inside_the_function(x):
    def f(x):
        before = lf.random.uniform(like=x)
        lf.random.seed(3)
        return before + lf.random.normal(like=x)

    draws_agree(f, x)


def test_set_state_inside_the_function_is_a_seed(x):
    lf.random.seed(11)
    state = lf.random.get_state()

    def f(x):
        lf.random.set_state(state)
        return x + lf.random.normal(like=x)

    draws_agree(f, x)


def test_draws_from_numpys_global_state_while_traced_are_refused(x):
    with pytest.raises(lf.RandomnessError, match=r"np\.random.*lf\.random"):
        lf.jit(lambda x: x + np.random.normal(size=4))(x)


def test_draws_per_example_under_vmap_inside_jit_follow_the_seed():
    samples = xr.DataArray(np.zeros((3, 2)), dims=("s", "t"))

    def f(x):
        lf.random.seed(1)
        return x + lf.random.normal(like=x)

    draws_agree(lf.vmap(f, dim="s", randomness="different"), samples)


# --- writes into the arguments ------------------------------------------------------------------------
def h(x, y):
    x += 1
    return x * y


def test_a_write_into_an_argument_passed_twice_is_seen_through_both():
    jitted = lf.jit(h)
    for _ in range(3):
        a, b = np.zeros(3), np.zeros(3)
        got, expected = jitted(a, a), h(b, b)
        same(got, expected)
        same(a, b)  # the caller's array written as the function writes it
    assert jitted.traces == 1


def test_a_write_into_an_argument_reaches_the_caller_at_every_call():
    jitted = lf.jit(h)
    a, b = np.arange(3.0), np.arange(3.0)
    for _ in range(3):
        same(jitted(a, np.ones(3)), h(b, np.ones(3)))
        same(a, b)
    other, copy = np.arange(3.0), np.arange(3.0)  # the same array twice: another program
    same(jitted(other, other), h(copy, copy))
    same(other, copy)
    assert jitted.traces == 2


def test_writes_into_a_dataarray_argument_and_into_a_slice_of_it_reach_the_caller():
    def f(x):
        x[1:] = x[1:] * 2
        x += 1
        return x.sum()

    jitted = lf.jit(f)
    for _ in range(2):
        a = xr.DataArray(np.arange(4.0), dims="t")
        b = a.copy(deep=True)
        identical(jitted(a), f(b))
        identical(a, b)


def test_writes_into_a_mapped_argument_under_vmap_reach_the_caller():
    def f(x):
        x *= 2
        return x.sum()

    jitted = lf.jit(lf.vmap(f, dim="s"))
    a = xr.DataArray(np.arange(6.0).reshape(3, 2), dims=("s", "t"))
    b = a.copy(deep=True)
    identical(jitted(a), lf.vmap(f, dim="s")(b))
    identical(a, b)


def test_a_gradient_leaves_the_caller_alone_as_the_function_does():
    def loss(x):
        x += 1
        return (x * x).sum()

    a, b = np.arange(3.0), np.arange(3.0)
    same(lf.jit(lf.grad(loss))(a), lf.grad(loss)(b))
    same(a, b)
    same(a, np.arange(3.0))


def test_a_write_into_an_argument_that_another_one_views_is_refused_naming_both():
    a = np.zeros(4)
    with pytest.raises(lf.InplaceError, match=r"argument 'x'.*argument 'y'"):
        lf.jit(h)(a, a[::-1])
    same(a, np.zeros(4))  # nothing written
    jitted = lf.jit(h)
    jitted(np.zeros(4), np.zeros(4))
    b = np.zeros(5)
    with pytest.raises(lf.InplaceError, match=r"argument 'x'.*argument 'y'"):  # a replay checks too
        jitted(b[:4], b[1:])
    assert jitted.traces == 1
    same(b, np.zeros(5))


# --- fusion: float32 trees round where NumPy rounds -------------------------------------------------
def test_a_fused_float32_result_cast_to_float64_keeps_numpys_bits():
    def f(x, y):
        return np.sin(x).astype(np.float64) * y

    x32 = np.linspace(0, 1, 100_000, dtype=np.float32)
    y64 = np.linspace(1, 2, 100_000)
    jitted = lf.jit(f)
    for scale in (1.0, 0.5):
        same(jitted(x32 * np.float32(scale), y64), f(x32 * np.float32(scale), y64))


def test_xarray_options_that_change_results_are_part_of_the_signature():
    x = base()
    x.attrs["units"] = "m"
    jitted = lf.jit(lambda x: x * 2)
    identical(jitted(x), x * 2)
    with xr.set_options(keep_attrs=False):
        identical(jitted(x), x * 2)
    with xr.set_options(keep_attrs=True):
        identical(jitted(x), x * 2)
    assert jitted.traces == 3  # "default", False and True: three values of the option


def test_operations_with_constants_equal_in_value_but_not_in_type_or_sign_are_not_merged():
    def f(x):  # one operation recorded twice would give one of them the other's dtype or zeros
        return x + 1, x + 1.0, x * 0.0, x * -0.0, np.full_like(x, 1), np.full_like(x, 1.0)

    jitted = lf.jit(f)
    for x in (np.arange(3), np.arange(3) - 1):
        same(jitted(x), f(x))
