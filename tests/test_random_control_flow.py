"""lf.random, lf.cond and lf.while_loop, alone and under vmap.

Oracles: analytic moments and bounds for the draws; the per-example Python
`if` / `while` for the control-flow operators.
"""

import itertools

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf


def scalars(values, dtype=float):
    values = np.asarray(values, dtype=dtype)
    return xr.DataArray(values, dims="sample", coords={"sample": np.arange(values.size)})


def distinct_rows(values):
    """True when no two rows (examples along axis 0) are equal anywhere."""
    rows = values.reshape(values.shape[0], -1)
    return all(
        not np.any(rows[i] == rows[j]) for i, j in itertools.combinations(range(len(rows)), 2)
    )


# --- lf.random outside vmap ----------------------------------------------------------


def test_normal_with_sizes_returns_a_labeled_draw():
    draw = lf.random.normal(sizes={"member": 10})
    assert isinstance(draw, xr.DataArray)
    assert draw.dims == ("member",)
    assert draw.sizes["member"] == 10
    assert np.issubdtype(draw.dtype, np.floating)
    assert np.all(np.isfinite(draw.values))
    assert len(np.unique(draw.values)) == 10


def test_uniform_with_several_sizes():
    draw = lf.random.uniform(sizes={"member": 4, "time": 6})
    assert draw.dims == ("member", "time")
    assert draw.shape == (4, 6)
    assert np.all((draw.values >= 0.0) & (draw.values < 1.0))


def test_seed_makes_draws_reproducible():
    lf.random.seed(123)
    first = lf.random.normal(sizes={"member": 5})
    second_draw = lf.random.uniform(sizes={"member": 5})
    lf.random.seed(123)
    again = lf.random.normal(sizes={"member": 5})
    second_again = lf.random.uniform(sizes={"member": 5})
    np.testing.assert_array_equal(first.values, again.values)
    np.testing.assert_array_equal(second_draw.values, second_again.values)
    # Without reseeding, the next draw moves on; another seed gives another stream.
    assert not np.array_equal(lf.random.normal(sizes={"member": 5}).values, first.values)
    lf.random.seed(124)
    assert not np.array_equal(lf.random.normal(sizes={"member": 5}).values, first.values)


def test_rng_argument_is_used():
    first = lf.random.normal(sizes={"member": 5}, rng=np.random.default_rng(9))
    again = lf.random.normal(sizes={"member": 5}, rng=np.random.default_rng(9))
    other = lf.random.normal(sizes={"member": 5}, rng=np.random.default_rng(10))
    np.testing.assert_array_equal(first.values, again.values)
    assert not np.array_equal(first.values, other.values)


def test_like_returns_the_same_dims_and_coords():
    x = xr.DataArray(
        np.zeros((3, 4)),
        dims=("lat", "lon"),
        coords={"lat": [-10.0, 0.0, 10.0], "lon": [0, 90, 180, 270], "label": ("lat", list("abc"))},
    )
    for draw in (lf.random.normal(like=x), lf.random.uniform(like=x)):
        assert draw.dims == x.dims
        assert draw.shape == x.shape
        assert set(draw.coords) == set(x.coords)
        for name in x.coords:
            xr.testing.assert_identical(draw[name], x[name])
        assert len(np.unique(draw.values)) == x.size


@pytest.mark.parametrize("draw", [lf.random.normal, lf.random.uniform])
def test_sizes_and_like_together_or_a_dataset_like_raise(draw):
    x = xr.DataArray(np.zeros(3), dims="member")
    with pytest.raises(ValueError, match=r"sizes= or like=, not both"):
        draw({"member": 4}, like=x)
    with pytest.raises(ValueError, match=r"like= must be a DataArray.*Dataset.*like=ds\['x'\]"):
        draw(like=x.to_dataset(name="x"))


@pytest.mark.parametrize("draw", [lf.random.normal, lf.random.uniform])
def test_draws_like_a_float32_array_are_float32(draw):
    x32 = xr.DataArray(np.zeros(4, dtype=np.float32), dims="member")
    assert draw(like=x32).dtype == np.float32
    assert draw(like=x32.astype(np.int64)).dtype == np.float64  # integers: draws stay float64
    under_vmap = lf.vmap(lambda v: draw(like=v), dim="member", randomness="different")(x32.expand_dims(s=2).T)
    assert under_vmap.dtype == np.float32


def test_normal_loc_and_scale():
    draw = lf.random.normal(sizes={"n": 200_000}, loc=3.0, scale=2.0)
    values = draw.values
    assert abs(values.mean() - 3.0) < 0.05
    assert abs(values.std() - 2.0) < 0.05
    standard = lf.random.normal(sizes={"n": 200_000}).values
    assert abs(standard.mean()) < 0.05
    assert abs(standard.std() - 1.0) < 0.05


def test_uniform_low_and_high():
    values = lf.random.uniform(sizes={"n": 100_000}, low=-2.0, high=5.0).values
    assert values.min() >= -2.0 and values.max() < 5.0
    assert values.min() < -1.99 and values.max() > 4.99
    assert abs(values.mean() - 1.5) < 0.05
    default = lf.random.uniform(sizes={"n": 100_000}).values
    assert default.min() >= 0.0 and default.max() < 1.0
    assert abs(default.mean() - 0.5) < 0.01


# --- lf.random under vmap ----------------------------------------------------------------


def add_member_noise(x):
    return x + lf.random.normal(sizes={"member": 4})


def only_noise(x):
    return lf.random.uniform(sizes={"member": 4})


@pytest.mark.parametrize("func", [add_member_noise, only_noise])
def test_different_draws_independently_per_example(func):
    x = scalars(np.zeros(5))
    result = lf.vmap(func, dim="sample", randomness="different")(x)
    assert set(result.dims) == {"sample", "member"}
    assert result.dims[0] == "sample"
    assert result.sizes == {"sample": 5, "member": 4}
    values = result.transpose("sample", "member").values
    assert np.all(np.isfinite(values))
    assert distinct_rows(values)


@pytest.mark.parametrize("func", [add_member_noise, only_noise])
def test_same_shares_one_draw(func):
    x = scalars(np.zeros(5))
    result = lf.vmap(func, dim="sample", randomness="same")(x)
    assert result.sizes == {"sample": 5, "member": 4}
    values = result.transpose("sample", "member").values
    for row in values[1:]:
        np.testing.assert_array_equal(row, values[0])
    assert len(np.unique(values[0])) == 4  # a real draw, not a constant


def test_like_under_vmap_follows_the_example_and_restores_coords():
    x = xr.DataArray(
        np.zeros((3, 2)), dims=("sample", "x"), coords={"sample": [5, 6, 7], "x": [0.5, 1.5]}
    )
    result = lf.vmap(lambda v: lf.random.normal(like=v), dim="sample", randomness="different")(x)
    assert result.dims == ("sample", "x")
    np.testing.assert_array_equal(result["sample"].values, [5, 6, 7])
    np.testing.assert_array_equal(result["x"].values, [0.5, 1.5])
    assert distinct_rows(result.values)


@pytest.mark.parametrize("draw", [lf.random.normal, lf.random.uniform])
def test_random_under_vmap_default_raises(draw):
    with pytest.raises(lf.RandomnessError):
        lf.vmap(lambda x: x + draw(sizes={"member": 2}), dim="sample")(scalars(np.zeros(3)))


@pytest.mark.parametrize("transform", ["jacfwd", "hessian"])
def test_random_under_jacfwd_or_hessian_says_where_the_flag_goes(transform):
    def noisy(x):
        return (x * lf.random.normal(sizes={"member": 2})).sum()

    x = xr.DataArray([1.0, 2.0], dims="k")
    with pytest.raises(lf.RandomnessError, match=r"jacfwd and hessian.*for hessian, draw outside"):
        getattr(lf, transform)(noisy)(x)
    lf.random.seed(3)
    jacobian = lf.jacfwd(noisy, randomness="same")(x)
    lf.random.seed(3)
    draws = lf.random.normal(sizes={"member": 2})
    np.testing.assert_allclose(jacobian.values, np.full(2, draws.sum().item()))


@pytest.mark.parametrize("flag", ["different", "same"])
def test_seed_makes_vmapped_draws_reproducible(flag):
    mapped = lf.vmap(add_member_noise, dim="sample", randomness=flag)
    x = scalars(np.zeros(3))
    lf.random.seed(5)
    first = mapped(x)
    lf.random.seed(5)
    again = mapped(x)
    xr.testing.assert_identical(first, again)


def noise_0d(y):
    return y + lf.random.normal(sizes={})


# vmap(vmap(f)) directly, and the same with the inner vmap called from a function.
COMPOSITIONS = [
    pytest.param(lambda inner: inner, id="direct"),
    pytest.param(lambda inner: (lambda z: inner(z)), id="through-function"),
]


def nested(outer_flag, inner_flag, compose):
    inner = lf.vmap(noise_0d, dim="member", randomness=inner_flag)
    outer = lf.vmap(compose(inner), dim="sample", randomness=outer_flag)
    return outer(xr.DataArray(np.zeros((3, 4)), dims=("sample", "member")))


@pytest.mark.parametrize("compose", COMPOSITIONS)
def test_nested_vmap_puts_the_outer_dim_first(compose):
    assert nested("different", "same", compose).dims == ("sample", "member")


@pytest.mark.parametrize("compose", COMPOSITIONS)
def test_nested_vmap_outer_different_inner_same(compose):
    values = nested("different", "same", compose).transpose("sample", "member").values
    for row in values:  # the same along member...
        np.testing.assert_array_equal(row, np.full(4, row[0]))
    assert len(np.unique(values[:, 0])) == 3  # ...different along sample


@pytest.mark.parametrize("compose", COMPOSITIONS)
def test_nested_vmap_outer_same_inner_different(compose):
    values = nested("same", "different", compose).transpose("sample", "member").values
    for row in values[1:]:  # the same along sample...
        np.testing.assert_array_equal(row, values[0])
    assert len(np.unique(values[0])) == 4  # ...different along member


@pytest.mark.parametrize("compose", COMPOSITIONS)
def test_nested_vmap_both_different(compose):
    values = nested("different", "different", compose).values
    assert len(np.unique(values)) == values.size


@pytest.mark.parametrize("compose", COMPOSITIONS)
def test_nested_vmap_inner_error_raises_even_if_outer_allows(compose):
    with pytest.raises(lf.RandomnessError):
        nested("different", "error", compose)


# --- lf.cond --------------------------------------------------------------------------------


def double(v):
    return v * 2


def minus_one(v):
    return v - 1


def python_if(v):
    return double(v) if float(v.sum()) > 0 else minus_one(v)


def test_cond_outside_vmap_runs_one_branch():
    calls = {"true": 0, "false": 0}

    def true_fn(v):
        calls["true"] += 1
        return double(v)

    def false_fn(v):
        calls["false"] += 1
        return minus_one(v)

    x = xr.DataArray([1.0, 2.0], dims="x")
    xr.testing.assert_allclose(lf.cond(x.sum() > 0, true_fn, false_fn, x), x * 2)
    assert calls == {"true": 1, "false": 0}
    xr.testing.assert_allclose(lf.cond(False, true_fn, false_fn, x), x - 1)
    assert calls == {"true": 1, "false": 1}


def test_cond_with_mapped_predicate_selects_per_example():
    calls = {"true": 0, "false": 0}

    def true_fn(v):
        calls["true"] += 1
        return double(v)

    def false_fn(v):
        calls["false"] += 1
        return minus_one(v)

    x = xr.DataArray(
        [[1.0, 2.0, 3.0], [-4.0, 1.0, 0.5], [0.5, -0.1, 0.0], [-1.0, -1.0, -1.0]],
        dims=("sample", "x"),
        coords={"sample": [10, 20, 30, 40], "x": [0, 1, 2]},
    )
    result = lf.vmap(lambda v: lf.cond(v.sum() > 0, true_fn, false_fn, v), dim="sample")(x)
    assert calls["true"] >= 1 and calls["false"] >= 1  # both branches evaluated
    expected = xr.concat([python_if(x.isel(sample=i)) for i in range(4)], dim="sample")
    xr.testing.assert_allclose(result.transpose(*expected.dims), expected)


def test_cond_with_a_traced_predicate_keeps_the_branches_names_and_attrs():
    """xr.where names its result after the predicate: cond's output is named as its branches'
    (the per-example loop's), under vmap (a mapped predicate, named or not) and lf.jit."""
    u = xr.DataArray([[4.0, 1.0], [-1.0, 2.0]], dims=("sample", "t"), name="u", attrs={"units": "m"})
    w = xr.DataArray([3.0, 0.0], dims="sample", name="w", attrs={"units": "K"})

    def f(u, w):
        return lf.cond(w > 2.5, lambda a: a * 2, lambda a: a - 1, u)

    loop = xr.concat([f(u.isel(sample=i), w.isel(sample=i)) for i in range(2)], dim="sample")
    for predicate in (w, w.rename(None)):
        xr.testing.assert_identical(lf.vmap(f, dim="sample")(u, predicate), loop)
    one = (u.isel(sample=0), w.isel(sample=0))
    xr.testing.assert_identical(lf.jit(f)(*one), f(*one))
    ds = xr.Dataset({"u": u, "w": w})

    def g(d):
        return lf.cond(d.w > 2.5, lambda d: d.u.mean(), lambda d: d.u.max(), d)

    assert lf.vmap(g, dim="sample")(ds).name == g(ds.isel(sample=0)).name == "u"

    def h(u, w):  # branches named differently: no single name (as a loop of mixed examples)
        return lf.cond(w > 2.5, lambda a: a.rename("doubled") * 2, lambda a: a - 1, u)

    assert lf.vmap(h, dim="sample")(u, w).name is None


def test_cond_with_several_operands_and_tuple_outputs():
    def true_fn(a, b):
        return a + b, a * b

    def false_fn(a, b):
        return a - b, a / b

    a = scalars([1.0, -2.0, 3.0, -4.0])
    b = scalars([2.0, 2.0, 0.5, 0.5])
    first, second = lf.vmap(lambda a, b: lf.cond(a > 0, true_fn, false_fn, a, b), dim="sample")(a, b)
    expected = [true_fn(ai, bi) if ai > 0 else false_fn(ai, bi) for ai, bi in zip(a.values, b.values)]
    np.testing.assert_allclose(first.values, [e[0] for e in expected])
    np.testing.assert_allclose(second.values, [e[1] for e in expected])


@pytest.mark.parametrize("make_predicate", ["python-bool", "unmapped-dataarray"])
def test_cond_with_unmapped_predicate_under_vmap_runs_one_branch(make_predicate):
    calls = {"true": 0, "false": 0}

    def true_fn(v):
        calls["true"] += 1
        return double(v)

    def false_fn(v):
        calls["false"] += 1
        return minus_one(v)

    def f(v, threshold):
        pred = threshold < 0 if make_predicate == "python-bool" else threshold.sum() < 0
        return lf.cond(pred, true_fn, false_fn, v)

    x = xr.DataArray([[1.0, 2.0], [-3.0, 4.0], [5.0, -6.0]], dims=("sample", "x"))
    threshold = 1.0 if make_predicate == "python-bool" else xr.DataArray([0.5, 0.5], dims="x")
    result = lf.vmap(f, dim="sample")(x, threshold)
    assert calls == {"true": 0, "false": 1}
    xr.testing.assert_allclose(result.transpose("sample", "x"), x - 1)


# --- lf.while_loop ----------------------------------------------------------------------------


def python_while(cond_fn, body_fn, value):
    while cond_fn(value):
        value = body_fn(value)
    return value


def test_while_loop_without_vmap_equals_python_while():
    result = lf.while_loop(lambda v: v < 100, lambda v: v * 2, xr.DataArray(3.0))
    assert float(result) == python_while(lambda v: v < 100, lambda v: v * 2, 3.0) == 192.0


def test_while_loop_without_vmap_with_tuple_state():
    init = (xr.DataArray(1.0), xr.DataArray(0))
    value, steps = lf.while_loop(lambda s: s[0] < 50, lambda s: (s[0] * 3, s[1] + 1), init)
    expected_value, expected_steps = python_while(
        lambda s: s[0] < 50, lambda s: (s[0] * 3, s[1] + 1), (1.0, 0)
    )
    assert float(value) == expected_value == 81.0
    assert int(steps) == expected_steps == 4


def test_while_loop_under_vmap_with_per_example_limits_tuple_state():
    x = scalars([1.0, 3.0, 0.5, 7.0])
    limit = scalars([10.0, 5.0, 100.0, 2.0])  # 7.0 > 2.0: that example never iterates

    def f(x, limit):
        value, _ = lf.while_loop(lambda s: s[0] <= s[1], lambda s: (s[0] * 2, s[1]), (x, limit))
        return value

    result = lf.vmap(f, dim="sample")(x, limit)
    expected = [
        python_while(lambda v, lim=lim: v <= lim, lambda v: v * 2, v0)
        for v0, lim in zip(x.values, limit.values)
    ]
    assert result.dims == ("sample",)
    np.testing.assert_allclose(result.values, expected)
    np.testing.assert_array_equal(result["sample"].values, x["sample"].values)


def test_while_loop_under_vmap_with_a_captured_mapped_limit():
    x = scalars([1.0, 3.0, 0.5, 7.0])
    limit = scalars([10.0, 5.0, 100.0, 2.0])

    def f(x, limit):
        return lf.while_loop(lambda v: v <= limit, lambda v: v * 2, x)

    result = lf.vmap(f, dim="sample")(x, limit)
    expected = [
        python_while(lambda v, lim=lim: v <= lim, lambda v: v * 2, v0)
        for v0, lim in zip(x.values, limit.values)
    ]
    np.testing.assert_allclose(result.values, expected)


def collatz_steps(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def test_while_loop_under_vmap_collatz_freezes_finished_examples():
    starts = [6, 7, 1, 12, 3]

    def f(n):
        def body(state):
            n, steps = state
            return xr.where(n % 2 == 0, n // 2, 3 * n + 1), steps + 1

        final_n, steps = lf.while_loop(lambda s: s[0] != 1, body, (n, xr.zeros_like(n)))
        return final_n, steps

    final_n, steps = lf.vmap(f, dim="sample")(scalars(starts, dtype=np.int64))
    np.testing.assert_array_equal(final_n.values, np.ones(len(starts)))
    np.testing.assert_array_equal(steps.values, [collatz_steps(n) for n in starts])


def test_while_loop_under_vmap_with_a_vector_state():
    x = xr.DataArray(
        [[1.0, 2.0, 3.0], [0.1, 0.1, 0.1], [30.0, 0.0, 0.0]],
        dims=("sample", "x"),
        coords={"x": ["a", "b", "c"]},
    )

    def f(v):
        return lf.while_loop(lambda v: v.sum() <= 20.0, lambda v: v * 2, v)

    result = lf.vmap(f, dim="sample")(x)
    expected = xr.concat(
        [python_while(lambda v: float(v.sum()) <= 20.0, lambda v: v * 2, x.isel(sample=i)) for i in range(3)],
        dim="sample",
    )
    xr.testing.assert_allclose(result.transpose(*expected.dims), expected)


# --- in-place updates inside branches and loop bodies under a mapped predicate -------------------
def _doubling_until_ten(x):
    def body(state):
        u, i = state
        u *= 2.0  # in place on the carried state
        return u, i + 1

    u, _ = lf.while_loop(lambda s: s[0].sum() < 10, body, (x.copy(), 0))
    return u.sum()


def _mutating_branch(x):
    def double_then_sum(a):
        a *= 2.0
        return a.sum()

    return lf.cond(x.sum() > 0, double_then_sum, lambda a: (a ** 2).sum(), x.copy())


@pytest.mark.parametrize("func", [_doubling_until_ten, _mutating_branch], ids=["while_loop", "cond"])
def test_in_place_updates_in_a_mapped_branch_or_body_stay_per_example(func):
    rows = [[1.0, 2.0], [0.1, 0.2], [6.0, 5.0]] + ([[-1.0, -3.0]] if func is _mutating_branch else [])
    batch = xr.DataArray(rows, dims=("s", "t"))  # (a negative row would double forever in the loop)
    expected = [float(func(batch[i])) for i in range(batch.sizes["s"])]
    np.testing.assert_allclose(lf.vmap(func, "s")(batch).values, expected, rtol=1e-12)
    gradients = lf.vmap(lf.grad(func), "s")(batch)
    for i in range(batch.sizes["s"]):  # central differences of the function itself
        for j in range(2):
            step = np.zeros((2,))
            step[j] = 1e-6
            plus = float(func(batch[i] + step))
            minus = float(func(batch[i] - step))
            np.testing.assert_allclose(gradients.values[i, j], (plus - minus) / 2e-6, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("body, what", [
    (lambda s: (s * 3).astype(np.float32), "different dtypes"),
    (lambda s: xr.concat([s, s], dim="q"), "different dims"),
    (lambda s: s.rename(q="r"), "different dims"),
])
def test_a_mapped_while_loop_whose_body_changes_a_leaf_is_refused_naming_it(body, what):
    """Under vmap with a mapped condition the examples that stop keep their value beside the
    others' next one, in one array: the body must keep each leaf's dims, sizes and dtype (a
    float32 body silently came back float64; a resized one raised xarray's AlignmentError)."""
    limit = xr.DataArray([2.0, 20.0], dims="sample")

    def f(lim):
        return lf.while_loop(lambda s: (s < lim).all(), body, xr.DataArray([1.0], dims="q") + 0 * lim)

    with pytest.raises(TypeError, match=f"lf.while_loop: body_fn returns {what} than the loop value"):
        lf.vmap(f, dim="sample")(limit)


def test_a_mapped_while_loop_whose_body_changes_the_structure_is_refused():
    limit = xr.DataArray([2.0, 20.0], dims="sample")

    def f(lim):
        return lf.while_loop(lambda s: s["a"] < lim, lambda s: {"a": s["a"] * 2, "b": s["a"]}, {"a": 1.0 + 0 * lim})

    with pytest.raises(TypeError, match=r"body_fn must return the structure of the loop value: init_val is a dict "
                                        r"with keys \['a'\] and body_fn returns a dict with keys \['a', 'b'\]"):
        lf.vmap(f, dim="sample")(limit)


def test_a_jitted_while_loop_that_draws_returns_the_functions_draws_on_its_first_call():
    """lf.jit records the body by running it once, then runs the recorded loop from the
    first iteration: the recording's draws are put back, so the first call draws what the
    function draws (it drew one iteration's worth ahead), and the generator ends as the
    function leaves it."""
    def h(v, n):
        return lf.while_loop(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] + lf.random.uniform(like=s[1])),
                             (v.isel(t=0), v))[1]

    one = xr.DataArray(np.zeros(3), dims="t")
    for steps in (1, 3):
        n = xr.DataArray(float(steps))
        lf.random.seed(5)
        want, after = h(one, n), lf.random.uniform({"t": 2})
        jitted = lf.jit(h)
        for _ in range(2):  # the trace, then a replay
            lf.random.seed(5)
            got = jitted(one, n)
            xr.testing.assert_identical(got, want)
            xr.testing.assert_identical(lf.random.uniform({"t": 2}), after)


def test_a_draw_in_a_branch_of_a_cond_that_only_jit_traces_is_refused():
    """Both branches are recorded and both would draw at every call, where the function
    draws in the branch it takes: refused, with what to do.  A mapped predicate (vmap) runs
    both branches un-jitted too, and a Python predicate takes one: both allowed."""
    def f(p, v):
        return lf.cond(p > 0, lambda a: a + lf.random.normal(like=a), lambda a: a - lf.random.normal(like=a), v)

    v = xr.DataArray(np.zeros(3), dims="t")
    with pytest.raises(lf.UnsupportedOperationError, match="inside a branch of lf.cond under lf.jit.*Draw before"):
        lf.jit(f)(xr.DataArray(-1.0), v)
    mapped = lf.jit(lf.vmap(f, dim="sample", randomness="different"))(xr.DataArray([1.0, -1.0], dims="sample"), v)
    assert mapped.sizes == {"sample": 2, "t": 3}
    lf.random.seed(2)
    eager = f(xr.DataArray(-1.0), v)
    lf.random.seed(2)
    np.testing.assert_array_equal(eager.values, -lf.random.normal(like=v).values)
