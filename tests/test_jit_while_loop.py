"""``lf.while_loop`` with a condition traced by ``lf.jit``: one loop node in the program.

Oracles: plain Python loops on NumPy values (per example where the loop is mapped), the
same function without jit, and analytic derivatives.  The inputs of the later calls need
more or fewer iterations than the first call's: a replay that kept the first call's
number of iterations fails them.
"""
import numpy as np
import pytest
import xarray as xr

import labeled_func as lf


def python_while(cond, body, value):
    while cond(value):
        value = body(value)
    return value


def doublings(v0, limit):
    """The number of doublings of the positive ``v0`` until it exceeds ``limit``, and the value."""
    count = 0
    while v0 <= limit:
        v0, count = v0 * 2, count + 1
    return v0, count


# --- the number of iterations follows each call's data ---------------------------------------------
def double_past(x, limit):
    return lf.while_loop(lambda s: s[0].sum() <= limit, lambda s: (s[0] * 2, s[1] + 1), (x, 0))


@pytest.mark.parametrize("limit", [10.0, 1000.0])
def test_each_replay_loops_as_many_times_as_its_data_needs(limit):
    jitted = lf.jit(double_past, static_argnames="limit")
    starts = [[1.0, 2.0], [0.001, 0.002], [600.0, 500.0], [0.2, 0.1], [3.0, 4.0]]
    counts = set()
    for start in starts:
        x = xr.DataArray(start, dims="t")
        value, count = jitted(x, limit=limit)
        total, expected_count = doublings(sum(start), limit)
        counts.add(expected_count)
        assert int(count) == expected_count
        np.testing.assert_allclose(value.values, np.array(start) * 2.0 ** expected_count, rtol=0, atol=0)
        assert value.dims == ("t",)
        xr.testing.assert_identical(value, double_past(x, limit)[0])
    assert len(counts) >= 3  # the calls did need different numbers of iterations
    assert jitted.traces == 1


def test_a_loop_that_runs_zero_times_on_the_first_call_runs_on_later_calls():
    def f(x):
        return lf.while_loop(lambda v: v.sum() < 10.0, lambda v: v + 1.0, x)

    jitted = lf.jit(f)
    for start in ([20.0, 30.0], [1.0, 2.0], [4.5, 4.5], [-3.0, 0.0]):
        x = xr.DataArray(start, dims="t")
        expected = python_while(lambda v: v.sum() < 10.0, lambda v: v + 1.0, np.array(start))
        np.testing.assert_array_equal(jitted(x).values, expected)
    assert jitted.traces == 1


def test_the_loop_is_one_node_of_the_program():
    jitted = lf.jit(lambda x: lf.while_loop(lambda v: v.sum() < 10.0, lambda v: v * 2.0, x) + 1.0)
    jitted(xr.DataArray([1.0, 2.0], dims="t"))
    (compiled,) = jitted.cache.values()
    loops = [node for node in compiled.program.nodes if type(node.function).__name__ == "WhileLoop"]
    assert len(loops) == 1


# --- values the condition or the body read --------------------------------------------------------
def test_values_read_inside_the_loop_are_read_at_each_call():
    def f(x, limit, step):
        scale = (x * 0 + 1).sum()  # computed before the loop: a value of the program
        return lf.while_loop(lambda v: v.sum() < limit * scale, lambda v: v + step, x)

    jitted = lf.jit(f)
    rng = np.random.default_rng(0)
    for _ in range(5):
        start, limit, step = rng.uniform(0, 2, 3), rng.uniform(5, 50), rng.uniform(0.5, 3)
        got = jitted(xr.DataArray(start, dims="t"), xr.DataArray(limit), xr.DataArray(step))
        expected = python_while(lambda v: v.sum() < limit * 3, lambda v: v + step, start)
        np.testing.assert_allclose(got.values, expected, rtol=1e-12)
    assert jitted.traces == 1


def test_the_initial_value_read_again_inside_the_loop_keeps_its_first_value():
    # x is both the loop's start and a value the condition reads: the condition must read
    # the argument, not the loop's current value
    jitted = lf.jit(lambda x: lf.while_loop(lambda v: v.sum() < x.sum() * 8, lambda v: v * 2, x))
    for start in ([1.0, 2.0], [5.0, 0.5], [0.25, 0.25]):
        expected = python_while(lambda v: v.sum() < sum(start) * 8, lambda v: v * 2, np.array(start))
        np.testing.assert_array_equal(jitted(xr.DataArray(start, dims="t")).values, expected)


def test_a_state_that_starts_constant_and_a_condition_on_an_argument():
    def f(limit):
        return lf.while_loop(lambda s: s[0] < limit, lambda s: (s[0] + s[1], s[1] * 1.5), (xr.DataArray(0.0), 1.0))

    jitted = lf.jit(f)
    for limit in (0.5, 3.0, 40.0, -1.0):
        expected = python_while(lambda s: s[0] < limit, lambda s: (s[0] + s[1], s[1] * 1.5), (0.0, 1.0))
        total, rate = jitted(xr.DataArray(limit))
        assert float(total) == expected[0] and float(rate) == expected[1]


def test_a_state_that_becomes_traced_after_a_first_iteration_decided_in_python():
    # 0 < 10 holds for every call: the first iteration runs in Python, then the state is
    # traced (it adds the argument) and the rest of the loop is recorded
    def f(step):
        return lf.while_loop(lambda v: v < 10.0, lambda v: v + step, xr.DataArray(0.0))

    jitted = lf.jit(f)
    for step in (3.0, 0.7, 20.0, 2.5):
        assert float(jitted(xr.DataArray(step))) == python_while(lambda v: v < 10.0, lambda v: v + step, 0.0)
    assert jitted.traces == 1


def test_random_draws_in_the_body_are_drawn_at_every_iteration():
    def walk(x):
        return lf.while_loop(lambda s: s[0] < 5.0, lambda s: (s[0] + lf.random.uniform(like=s[0]), s[1] + 1), (x, 0))

    jitted = lf.jit(walk)
    jitted(xr.DataArray(0.0))
    for seed in (1, 2, 3):  # a replay draws what the function draws, in the same order
        lf.random.seed(seed)
        value, count = jitted(xr.DataArray(0.0))
        lf.random.seed(seed)
        expected_value, expected_count = walk(xr.DataArray(0.0))
        assert float(value) == float(expected_value) and int(count) == int(expected_count)
        assert float(value) >= 5.0 and int(count) >= 5


def test_a_body_on_large_arrays_is_fused_inside_the_loop():
    def f(x):
        return lf.while_loop(lambda v: v.mean() < 50, lambda v: np.sqrt(v * 1.5 + 2.0) * v, x)

    jitted = lf.jit(f)
    x = xr.DataArray(np.linspace(1, 2, 2 * lf.engine.compiler.thresholds.FUSE_MIN_SIZE), dims="t")
    for scale in (1.0, 0.5, 3.0):
        xr.testing.assert_allclose(jitted(x * scale), f(x * scale), rtol=1e-12)
    (compiled,) = jitted.cache.values()
    (loop,) = [node.function for node in compiled.program.nodes if type(node.function).__name__ == "WhileLoop"]
    assert len(loop.body) == 1  # sqrt(v * 1.5 + 2.0) * v: one fused evaluation per iteration


# --- vmap inside jit: a mapped condition -----------------------------------------------------------
def test_a_mapped_condition_loops_until_every_example_is_done():
    def f(x, limit):
        value, count = lf.while_loop(lambda s: s[0] <= limit, lambda s: (s[0] * 2, s[1] + 1), (x, 0))
        return value, count

    mapped = lf.vmap(f, dim="sample")
    jitted = lf.jit(mapped)
    rng = np.random.default_rng(1)
    for call in range(4):
        x = xr.DataArray(rng.uniform(0.1, 2, 6), dims="sample")
        limit = xr.DataArray(rng.uniform(0.5, 10 ** (call + 1), 6), dims="sample")
        value, count = jitted(x, limit)
        per_example = [doublings(v, lim) for v, lim in zip(x.values, limit.values)]
        np.testing.assert_array_equal(value.values, [v for v, _ in per_example])
        np.testing.assert_array_equal(count, [c for _, c in per_example])
        unjitted_value, unjitted_count = mapped(x, limit)
        xr.testing.assert_identical(value, unjitted_value)
        np.testing.assert_array_equal(count, unjitted_count)
    assert jitted.traces == 1


def test_collatz_under_jit_of_vmap_freezes_finished_examples():
    def steps(n):
        count = 0
        while n != 1:
            n, count = (n // 2 if n % 2 == 0 else 3 * n + 1), count + 1
        return count

    def f(n):
        def body(state):
            n, count = state
            return xr.where(n % 2 == 0, n // 2, 3 * n + 1), count + 1

        return lf.while_loop(lambda s: s[0] != 1, body, (n, xr.zeros_like(n)))

    jitted = lf.jit(lf.vmap(f, dim="sample"))
    for starts in ([6, 7, 1, 12, 3], [27, 97, 2, 5, 1], [1, 1, 1, 1, 1]):
        final, count = jitted(xr.DataArray(np.array(starts), dims="sample"))
        np.testing.assert_array_equal(final.values, np.ones(5))
        np.testing.assert_array_equal(count.values, [steps(n) for n in starts])
    assert jitted.traces == 1


def test_in_place_updates_in_a_mapped_body_stay_per_example():
    def f(x):
        def body(state):
            u, i = state
            u *= 2.0
            return u, i + 1

        u, _ = lf.while_loop(lambda s: s[0].sum() < 10, body, (x.copy(), 0))
        return u

    jitted = lf.jit(lf.vmap(f, dim="s"))
    for rows in ([[1.0, 2.0], [0.1, 0.2], [6.0, 5.0]], [[0.01, 0.02], [3.0, 3.0], [20.0, 1.0]]):
        batch = xr.DataArray(rows, dims=("s", "t"))
        expected = [python_while(lambda v: v.sum() < 10, lambda v: v * 2.0, np.array(row)) for row in rows]
        np.testing.assert_array_equal(jitted(batch).transpose("s", "t").values, expected)


def test_a_vector_state_with_coordinates_under_jit_of_vmap():
    x = xr.DataArray([[1.0, 2.0, 3.0], [0.1, 0.1, 0.1], [30.0, 0.0, 0.0]], dims=("sample", "x"),
                     coords={"x": ["a", "b", "c"]})

    def f(v):
        return lf.while_loop(lambda v: v.sum() <= 20.0, lambda v: v * 2, v)

    jitted = lf.jit(lf.vmap(f, dim="sample"))
    for data in (x, x * 0.01, x * 3):
        xr.testing.assert_identical(jitted(data), lf.vmap(f, dim="sample")(data))


def test_a_mapped_loop_on_dask_blocks_under_jit():
    def f(x, limit):
        return lf.while_loop(lambda v: v <= limit, lambda v: v * 2, x)

    x = xr.DataArray(np.linspace(0.1, 2, 8), dims="s")
    limit = xr.DataArray(np.linspace(1, 100, 8), dims="s")
    lazy = lf.jit(lf.vmap(f, dim="s"))(x.chunk(s=4), limit.chunk(s=4))
    assert lazy.chunks == ((4, 4),)
    np.testing.assert_array_equal(lazy.compute().values, [doublings(v, lim)[0] for v, lim in zip(x.values, limit.values)])


# --- nested loops, several kinds of state ---------------------------------------------------------
def test_nested_while_loops():
    def f(x):
        def outer_body(state):
            v, i = state
            v = lf.while_loop(lambda u: u.sum() < (i + 1) * 10, lambda u: u + x, v)
            return v, i + 1

        return lf.while_loop(lambda s: s[1] < x.sum(), outer_body, (x * 0, 0.0))

    def oracle(x):
        v, i = np.zeros_like(x), 0.0
        while i < x.sum():
            while v.sum() < (i + 1) * 10:
                v = v + x
            i += 1
        return v, i

    jitted = lf.jit(f)
    for start in ([1.0, 2.0], [0.5, 0.25], [3.0, 2.0], [0.1, 0.0]):
        v, i = jitted(xr.DataArray(start, dims="t"))
        expected_v, expected_i = oracle(np.array(start))
        np.testing.assert_allclose(v.values, expected_v, rtol=1e-12)
        assert float(i) == expected_i
    assert jitted.traces == 1


def test_nested_loops_under_jit_of_vmap():
    def f(x):
        def outer_body(state):
            v, i = state
            v = lf.while_loop(lambda u: u < (i + 1) * x, lambda u: u + 1.0, v)
            return v, i + 1

        return lf.while_loop(lambda s: s[1] < 3, outer_body, (x * 0, 0))[0]

    jitted = lf.jit(lf.vmap(f, dim="s"))
    for values in ([0.5, 2.0, 7.5], [10.0, 0.1, 3.0]):
        x = xr.DataArray(values, dims="s")
        expected = []
        for xv in values:
            v = 0.0
            for i in range(3):
                v = python_while(lambda u: u < (i + 1) * xv, lambda u: u + 1.0, v)
            expected.append(v)
        np.testing.assert_array_equal(jitted(x).values, expected)


def test_a_dataset_and_a_dict_state_with_a_body_that_transposes():
    def f(ds, grid):
        def body(state):
            return {"ds": state["ds"] * 1.5, "grid": (state["grid"] + 1.0).transpose("y", "x")}

        return lf.while_loop(lambda s: s["ds"]["a"].sum() + s["grid"].sum() < 100.0, body, {"ds": ds, "grid": grid})

    def oracle(a, b, grid):
        while a.sum() + grid.sum() < 100.0:
            a, b, grid = a * 1.5, b * 1.5, grid + 1.0
        return a, b, grid

    jitted = lf.jit(f)
    for scale in (1.0, 0.1, 4.0):
        a, b = np.array([1.0, 2.0]) * scale, np.array([3.0])
        grid = np.arange(6.0).reshape(2, 3) * scale
        ds = xr.Dataset({"a": ("t", a), "b": ("u", b)})
        got = jitted(ds, xr.DataArray(grid, dims=("x", "y")))
        expected = oracle(a, b, grid)
        assert got["grid"].dims == ("x", "y")
        np.testing.assert_allclose(got["ds"]["a"].values, expected[0], rtol=1e-12)
        np.testing.assert_allclose(got["ds"]["b"].values, expected[1], rtol=1e-12)
        np.testing.assert_allclose(got["grid"].values, expected[2], rtol=1e-12)


# --- derivatives ----------------------------------------------------------------------------------
def double_until_ten(x):
    return lf.while_loop(lambda v: v < 10.0, lambda v: v * 2.0, x)


def test_forward_mode_through_the_loop_under_jit():
    jitted = lf.jit(lambda x, t: lf.jvp(double_until_ten, (x,), (t,)))
    for start in (1.5, 0.3, 11.0, 5.0, 0.01):
        value, tangent = jitted(xr.DataArray(start), xr.DataArray(0.5))
        v, count = python_while(lambda s: s[0] < 10.0, lambda s: (s[0] * 2, s[1] + 1), (start, 0))
        assert float(value) == v
        assert float(tangent) == 0.5 * 2.0 ** count  # d(2^k x)/dx


def test_forward_mode_of_a_mapped_loop_under_jit():
    def tangent_of(x):
        return lf.jvp(double_until_ten, (x,), (xr.ones_like(x),))[1]

    jitted = lf.jit(lf.vmap(tangent_of, dim="sample"))
    for values in ([1.5, 0.3, 11.0, 5.0], [0.15, 0.03, 1.1, 50.0]):
        xs = xr.DataArray(values, dims="sample")
        xr.testing.assert_identical(jitted(xs), lf.vmap(tangent_of, dim="sample")(xs))


def test_jacfwd_of_a_loop_under_jit():
    def f(v):
        return lf.while_loop(lambda u: u.sum() < 10, lambda u: u * u + 1, v)

    jitted = lf.jit(lf.jacfwd(f))
    for values in ([0.5, 1.0], [0.05, 0.1], [2.0, 2.5]):
        v = xr.DataArray(values, dims="i")
        xr.testing.assert_allclose(jitted(v), lf.jacfwd(f)(v), rtol=1e-12)


def test_forward_mode_of_a_loop_that_starts_from_a_constant_under_jit():
    # the body makes the constant start differentiated (and, under jacfwd, mapped over the
    # basis): the loop is recorded on a start widened with zero tangents
    def f(x):
        return lf.while_loop(lambda v: v.sum() < x.sum() * 10, lambda v: v * x + 1,
                             xr.DataArray([1.0, 1.0], dims="i"))

    jacobian = lf.jit(lf.jacfwd(f))
    tangent = lf.jit(lambda x, t: lf.jvp(f, (x,), (t,))[1])
    for scale in (1.0, 1.3, 2.0, 0.9):
        x = xr.DataArray([1.5, 2.0], dims="i") * scale
        xr.testing.assert_allclose(jacobian(x), lf.jacfwd(f)(x), rtol=1e-12)
        xr.testing.assert_allclose(tangent(x, xr.ones_like(x)), lf.jvp(f, (x,), (xr.ones_like(x),))[1], rtol=1e-12)
    assert jacobian.traces == tangent.traces == 1


@pytest.mark.parametrize("transform", [lf.grad, lf.jacrev])
def test_reverse_mode_through_a_recorded_loop_is_refused(transform):
    with pytest.raises(lf.UnsupportedOperationError, match=r"lf\.while_loop under lf\.jit.*reverse-mode.*lf\.scan"):
        lf.jit(transform(double_until_ten))(xr.DataArray(1.5))


def test_reverse_mode_of_a_loop_outside_jit_still_works():
    # the refusal is about lf.jit recording the loop: lf.grad alone runs it in Python
    assert float(lf.grad(double_until_ten)(xr.DataArray(1.5))) == 8.0  # x -> 8x on [1.25, 2.5)


# --- errors ---------------------------------------------------------------------------------------
X = xr.DataArray([1.0, 2.0], dims="t")


@pytest.mark.parametrize("body, message", [
    (lambda s: (s[0] * 2,), r"structure of the loop value: init_val is a tuple of 2 and body_fn returns a tuple of 1"),
    (lambda s: ((s[0] * 2).astype(np.float32), s[1]),
     r"different dtypes for output\[0\].*dtype float64 and body_fn returns dtype float32"),
    (lambda s: (s[0].expand_dims(u=2), s[1]), r"different dims for output\[0\].*\(t: 2\).*\(u: 2, t: 2\)"),
    (lambda s: (s[0].isel(t=[0]), s[1]), r"different dims for output\[0\].*\(t: 2\).*\(t: 1\)"),
    (lambda s: (s[0], s[1] + 0.5), r"different dtypes for output\[1\].*init_val has dtype int64 \(the Python "
                                   r"number 0 in init_val is a 0-d array of dtype int64 under lf\.jit\) and "
                                   r"body_fn returns dtype float64"),
    (lambda s: (s[0], 0.5), r"dtype float64 for output\[1\] where the loop value has dtype int64"),
])
def test_a_body_that_changes_the_loop_value_names_what_differs(body, message):
    def f(x):
        return lf.while_loop(lambda s: s[0].sum() < 10, body, (x, 0))

    with pytest.raises(TypeError, match=message):
        lf.jit(f)(X)


def test_a_condition_with_dims_or_of_strings_is_refused():
    with pytest.raises(ValueError, match=r"lf\.while_loop: the predicate must be one boolean per example.*dims"):
        lf.jit(lambda x: lf.while_loop(lambda v: v < 10, lambda v: v * 2, x))(X)
    with pytest.raises(TypeError, match=r"lf\.while_loop: the predicate must be boolean"):
        lf.jit(lambda x: lf.while_loop(lambda v: (v.sum() < 10) + 0j, lambda v: v * 2, x))(X)


def test_a_variable_in_the_loop_value_is_refused_by_name():
    def f(x):
        return lf.while_loop(lambda s: s[0].sum() < 10, lambda s: (s[0] * 2, s[1]), (x, xr.Variable("t", [1.0, 2.0])))

    with pytest.raises(TypeError, match=r"lf\.while_loop under lf\.jit: the loop value holds an xr\.Variable"):
        lf.jit(f)(X)


def test_a_level_answers_for_its_own_loops_and_tracers():
    """Control flow goes through the levels: a level that cannot run a loop of unknown length,
    or carry its tracers through one that lf.jit records, says so, naming its transform."""
    from labeled_func.engine import Level

    class Probe(Level):
        name = "probe"

    with pytest.raises(lf.UnsupportedOperationError, match="lf.probe"):
        Probe().process_while_loop(None, None, [])
    with pytest.raises(lf.UnsupportedOperationError, match="lf.probe, which lf.jit cannot record"):
        Probe().loop_spec(None, None)
    assert Probe().loop_strip(None) is None
