"""lf.checkpoint and lf.scan against independent oracles.

- values: the explicit Python loop the scan stands for (carry, stacked outputs, coords);
- derivatives: central finite differences, the analytic derivatives of a linear decay
  (u_T = u_0 (1 - r)^T), the same transform without checkpointing, and the per-example loop
  for vmap of grad;
- memory, structurally: the field-sized arrays the tape keeps (counted, never timed);
- errors: each bad input raises the documented exception naming the culprit.
"""
import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func.engine import node_of
from labeled_func_kernels.primitive import bottom

RNG = np.random.default_rng(20)


def laplacian(u):
    return u.roll(x=1) + u.roll(x=-1) + u.roll(y=1) + u.roll(y=-1) - 4 * u


def field(ny=5, nx=6, seed=0):
    rng = np.random.default_rng(seed)
    return xr.DataArray(rng.random((ny, nx)), dims=("y", "x"), coords={"x": np.arange(nx) * 0.5})


def heat(kappa, u0, steps=12, every=None):
    """The loss of a heat equation run: the sum of the final field squared, plus the
    stacked means (so that ys carry a derivative too)."""
    def step(u, _):
        return u + kappa * laplacian(u), u.mean()

    u, means = lf.scan(step, u0, length=steps, checkpoint_every=every)
    return (u ** 2).sum() + (means ** 2).sum()


def central_difference(f, x, direction, eps=1e-6):
    return (float(f(x + eps * direction)) - float(f(x - eps * direction))) / (2 * eps)


# --- values: scan is the Python loop ---------------------------------------------------------------
def explicit_loop(step, init, xs, dim):
    carry, ys = init, []
    for i in range(xs.sizes[dim]):
        carry, y = step(carry, xs.isel({dim: i}, drop=True))
        ys.append(y)
    return carry, ys


@pytest.mark.parametrize("steps", [2, 3])
def test_a_step_sees_no_coordinate_along_dim_so_the_carry_holds_none_whatever_the_number_of_steps(steps):
    # Kept as a scalar coordinate, a step's time labelled the carry, which xarray dropped
    # where two disagreed: the last carry had time=30 after 3 steps and nothing after 2.
    xs = xr.DataArray(RNG.random((steps, 2)), dims=("time", "site"),
                      coords={"time": np.arange(steps) * 10, "doy": ("time", np.arange(steps) + 100),
                              "site": ["a", "b"]})
    seen = []

    def step(carry, x):
        seen.append(set(x.coords))
        return carry + x, carry * x

    carry, ys = lf.scan(step, xr.DataArray(np.zeros(2), dims="site", coords={"site": ["a", "b"]}), xs, dim="time")
    assert seen == [{"site"}] * steps
    assert set(carry.coords) == {"site"}
    assert ys.time.values.tolist() == xs.time.values.tolist() and ys.doy.values.tolist() == xs.doy.values.tolist()
    np.testing.assert_allclose(carry, xs.sum("time"))


@pytest.mark.parametrize("kind", ["dataarray", "dataset"])
def test_a_step_sees_xs_isel_without_the_coordinates_along_dim(kind):
    # one step's x is put together from its parts: it must be xarray's own slice
    xs = xr.Dataset({"rain": (("time", "site"), RNG.random((3, 2)), {"units": "mm"}),
                     "fixed": ("site", [1.0, 2.0], {"long_name": "no time"}),
                     "flag": ("time", np.array([1, 0, 1], dtype=np.int8))},
                    coords={"time": [10, 20, 30], "doy": ("time", [100, 101, 102]), "site": ["a", "b"],
                            "lat": ("site", [45.0, 46.0], {"units": "degrees_north"})},
                    attrs={"title": "forcing"})
    xs = xs.rain if kind == "dataarray" else xs
    seen = []
    lf.scan(lambda c, x: (c, seen.append(x)), xr.DataArray(0.0), xs, dim="time")
    for i, x in enumerate(seen):
        xr.testing.assert_identical(x, xs.isel(time=i, drop=True))
        assert list(x.coords) == list(xs.isel(time=i, drop=True).coords)


def test_a_step_reads_its_coordinate_value_when_xs_holds_it():
    xs = xr.DataArray([1.0, 2.0, 3.0], dims="time", coords={"time": [10.0, 20.0, 30.0]})
    carry, ys = lf.scan(lambda c, x: (c + x[0] * x[1], x[1]), xr.DataArray(0.0), (xs, xs.time), dim="time")
    assert float(carry) == 1.0 * 10 + 2.0 * 20 + 3.0 * 30
    assert ys.values.tolist() == [10.0, 20.0, 30.0]


@pytest.mark.parametrize("every", [None, 1, 3, 7, 50])
def test_scan_equals_the_python_loop_with_stacked_outputs_and_coords(every):
    xs = xr.DataArray(RNG.random((7, 4)), dims=("time", "site"),
                      coords={"time": np.arange(7) * 10.0, "site": list("abcd")})
    init = {"level": xr.DataArray(np.zeros(4), dims="site", coords={"site": list("abcd")}), "count": 0.0}

    def step(carry, x):
        level = 0.9 * carry["level"] + x
        return {"level": level, "count": carry["count"] + 1.0}, (level.max(), level * 2)

    carry, (peaks, doubled) = lf.scan(step, init, xs, dim="time", checkpoint_every=every)
    expected_carry, expected_ys = explicit_loop(step, init, xs, "time")
    xr.testing.assert_allclose(carry["level"], expected_carry["level"])
    assert carry["count"] == 7.0
    stacked = xr.concat([y[1].drop_vars("time", errors="ignore") for y in expected_ys], dim="time")
    xr.testing.assert_allclose(doubled.drop_vars("time"), stacked)
    np.testing.assert_allclose(peaks.values, [float(y[0]) for y in expected_ys])
    assert doubled.dims == ("time", "site") and peaks.dims == ("time",)
    np.testing.assert_array_equal(peaks.time.values, xs.time.values)
    assert doubled.site.values.tolist() == list("abcd")


def test_scan_of_plain_arrays_slices_axis_0_and_stacks_along_it():
    xs = RNG.random((5, 3))
    carry, ys = lf.scan(lambda c, x: (c * x + 1.0, (c.sum(), None)), np.ones(3), xs)
    c, expected = np.ones(3), []
    for x in xs:
        expected.append(c.sum())
        c = c * x + 1.0
    np.testing.assert_allclose(carry, c)
    np.testing.assert_allclose(ys[0], expected)
    assert ys[1] is None


def test_scan_without_xs_and_of_a_dataset():
    init = xr.Dataset({"u": ("x", np.arange(3.0)), "v": ("x", np.ones(3))})
    carry, ys = lf.scan(lambda s, x: (s.assign(u=s.u + s.v, v=s.v * 2), s), init, length=4, dim="k")
    u, v = np.arange(3.0), np.ones(3)
    for _ in range(4):
        u, v = u + v, v * 2
    np.testing.assert_allclose(carry.u, u)
    np.testing.assert_allclose(carry.v, v)
    assert isinstance(ys, xr.Dataset) and ys.u.dims == ("k", "x") and "k" not in ys.coords
    np.testing.assert_allclose(ys.v.values[:, 0], [1, 2, 4, 8])


def test_a_carry_whose_dims_come_back_transposed_is_put_in_the_order_of_init():
    init = field()
    carry, _ = lf.scan(lambda u, _: (u.transpose("x", "y") * 1.0, None), init, length=2)
    assert carry.dims == init.dims
    xr.testing.assert_allclose(carry, init)


def test_scan_of_dask_inputs_stays_lazy():
    xs = xr.DataArray(da.from_array(RNG.random((6, 4)), chunks=(2, 2)), dims=("step", "site"))
    init = xr.DataArray(da.zeros(4, chunks=2), dims="site")
    step = lambda c, x: (0.5 * c + x, c.sum())  # noqa: E731

    def refuse(*args, **kwargs):
        raise AssertionError("computed while building the graph")

    with dask.config.set(scheduler=refuse):
        carry, sums = lf.scan(step, init, xs, checkpoint_every=4)
    assert isinstance(carry.data, da.Array) and isinstance(sums.data, da.Array)
    expected_carry, expected_ys = lf.scan(step, init.compute(), xs.compute())
    xr.testing.assert_allclose(carry.compute(), expected_carry)
    xr.testing.assert_allclose(sums.compute(), expected_ys)


# --- derivatives -------------------------------------------------------------------------------
@pytest.mark.parametrize("every", [None, 1, 4, 5, 12])
def test_grad_through_scan_equals_central_differences(every):
    kappa, u0 = xr.DataArray(0.1), field()
    g_kappa, g_u0 = lf.grad(lambda k, u: heat(k, u, every=every), argnums=(0, 1))(kappa, u0)
    assert g_u0.dims == u0.dims and g_u0.x.values.tolist() == u0.x.values.tolist()
    fd_kappa = central_difference(lambda k: heat(k, u0), kappa, xr.DataArray(1.0))
    np.testing.assert_allclose(float(g_kappa), fd_kappa, rtol=1e-6)
    direction = field(seed=1)
    fd_u0 = central_difference(lambda u: heat(kappa, u), u0, direction)
    np.testing.assert_allclose(float((g_u0 * direction).sum()), fd_u0, rtol=1e-6)


def test_checkpoint_gives_the_gradient_without_it():
    kappa, u0 = xr.DataArray(0.1), field()
    with_it = lf.grad(lambda k, u: heat(k, u, every=4), argnums=(0, 1))(kappa, u0)
    without = lf.grad(lambda k, u: heat(k, u), argnums=(0, 1))(kappa, u0)
    for a, b in zip(with_it, without):
        xr.testing.assert_allclose(a, b, rtol=1e-12)


def test_jacfwd_and_jacrev_through_checkpointed_scan_equal_central_differences():
    u0 = field(3, 4)
    run = lambda every: lambda u: lf.scan(  # noqa: E731
        lambda c, _: (c + 0.1 * laplacian(c) - 0.05 * c ** 3, None), u, length=6, checkpoint_every=every)[0]
    forward, reverse, plain = lf.jacfwd(run(2))(u0), lf.jacrev(run(4))(u0), lf.jacrev(run(None))(u0)
    assert reverse.dims == ("y", "x", "y_wrt", "x_wrt")
    xr.testing.assert_allclose(forward, reverse, rtol=1e-10)
    xr.testing.assert_allclose(reverse, plain, rtol=1e-12)
    direction = field(3, 4, seed=2)
    eps = 1e-6
    fd = (run(None)(u0 + eps * direction) - run(None)(u0 - eps * direction)) / (2 * eps)
    pushed = (reverse * direction.rename(y="y_wrt", x="x_wrt")).sum(("y_wrt", "x_wrt"))
    np.testing.assert_allclose(pushed, fd, rtol=1e-6)


def decay(rate, steps=20, every=5):
    return lf.scan(lambda u, _: (u * (1 - rate), None), xr.DataArray(2.0), length=steps, checkpoint_every=every)[0]


def test_second_order_through_checkpoint_is_the_analytic_derivative():
    r, T = 0.03, 20
    rate = xr.DataArray(r)
    np.testing.assert_allclose(float(lf.grad(decay)(rate)), -2 * T * (1 - r) ** (T - 1))
    second = 2 * T * (T - 1) * (1 - r) ** (T - 2)
    np.testing.assert_allclose(float(lf.grad(lf.grad(decay))(rate)), second)
    np.testing.assert_allclose(float(lf.hessian(decay)(rate)), second)
    np.testing.assert_allclose(float(lf.jvp(lf.grad(decay), (rate,), (xr.DataArray(1.0),))[1]), second)


def test_hessian_of_a_field_through_checkpointed_scan_equals_the_one_without():
    u0 = field(2, 3)
    loss = lambda every: lambda u: heat(0.1, u, steps=6, every=every)  # noqa: E731
    xr.testing.assert_allclose(lf.hessian(loss(2))(u0), lf.hessian(loss(None))(u0), rtol=1e-10)


def test_vmap_of_grad_through_checkpointed_scan_equals_the_per_example_loop():
    kappas = xr.DataArray([0.05, 0.1, 0.15], dims="member")
    u0 = field()
    per_member = lf.vmap(lf.grad(lambda k, u: heat(k, u, every=3), argnums=(0, 1)), dim="member")(kappas, u0)
    for i in range(kappas.sizes["member"]):
        g_kappa, g_u0 = lf.grad(lambda k, u: heat(k, u), argnums=(0, 1))(kappas[i], u0)
        np.testing.assert_allclose(float(per_member[0][i]), float(g_kappa), rtol=1e-12)
        xr.testing.assert_allclose(per_member[1].isel(member=i, drop=True), g_u0, rtol=1e-12)


def test_grad_of_vmap_through_checkpointed_scan_equals_the_loop():
    u0s = xr.concat([field(seed=s) for s in range(3)], dim="member")
    mapped = lf.grad(lambda u: lf.vmap(lambda v: heat(0.1, v, every=4), dim="member")(u).sum())(u0s)
    for i in range(3):
        xr.testing.assert_allclose(mapped.isel(member=i), lf.grad(lambda v: heat(0.1, v))(u0s.isel(member=i)),
                                   rtol=1e-12)


def test_checkpoint_of_a_function_with_closures_matches_finite_differences():
    weights = xr.DataArray(RNG.random(4), dims="site")
    x = xr.DataArray(RNG.random(4), dims="site")

    def loss(w, x):
        inner = lf.checkpoint(lambda v: np.sin(v * w) + v)  # w: closed over
        return (inner(inner(x)) ** 2).sum()

    g_w, g_x = lf.grad(loss, argnums=(0, 1))(weights, x)
    direction = xr.DataArray(RNG.random(4), dims="site")
    np.testing.assert_allclose(float((g_w * direction).sum()),
                               central_difference(lambda w: loss(w, x), weights, direction), rtol=1e-6)
    np.testing.assert_allclose(float((g_x * direction).sum()),
                               central_difference(lambda v: loss(weights, v), x, direction), rtol=1e-6)
    # jvp and vjp through it agree by the inner-product identity
    out, pull = lf.vjp(lambda w: lf.checkpoint(lambda v: np.sin(v * w))(x), weights)
    _, pushed = lf.jvp(lambda w: lf.checkpoint(lambda v: np.sin(v * w))(x), (weights,), (direction,))
    cotangent = xr.DataArray(RNG.random(4), dims="site")
    np.testing.assert_allclose(float((pull(cotangent)[0] * direction).sum()), float((cotangent * pushed).sum()))


def test_checkpoint_returning_an_argument_or_a_constant_and_nesting():
    x = xr.DataArray([1.0, 2.0], dims="i")

    def f(v):
        same, doubled, constant = lf.checkpoint(lambda a: (a, lf.checkpoint(lambda b: 2 * b)(a), np.ones(2)))(v)
        return (same * doubled).sum() + constant.sum()

    np.testing.assert_allclose(lf.grad(f)(x), 4 * x)
    np.testing.assert_allclose(lf.grad(lf.grad(lambda v: f(v) * 1.0))(xr.DataArray(3.0)), 4.0)


def test_custom_rules_and_control_flow_inside_a_checkpoint():
    @lf.custom_jvp
    def softplus(x):
        return np.log1p(np.exp(x))

    @softplus.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return softplus(x), t / (1 + np.exp(-x))

    x = xr.DataArray([-1.0, 0.5, 2.0], dims="i")
    step = lambda c, _: (softplus(c) - 1.0 + lf.cond(c.sum() > 0, lambda v: 0.1 * v, lambda v: -v, c), None)  # noqa
    loss = lambda every: lambda v: (lf.scan(step, v, length=4, checkpoint_every=every)[0] ** 2).sum()  # noqa
    xr.testing.assert_allclose(lf.grad(loss(2))(x), lf.grad(loss(None))(x))
    direction = xr.DataArray([0.3, -0.2, 0.7], dims="i")
    np.testing.assert_allclose(float((lf.grad(loss(2))(x) * direction).sum()),
                               central_difference(loss(None), x, direction), rtol=1e-6)


def test_a_step_that_takes_a_gradient_itself_through_checkpointed_scan():
    def potential(q):
        return (q ** 4 / 4 - q ** 2 / 2).sum()

    def step(state, _):  # symplectic Euler: the force is the gradient of the potential
        q, p = state
        p = p - 0.1 * lf.grad(potential)(q)
        return (q + 0.1 * p, p), None

    def loss(q0, every=None):
        (q, p), _ = lf.scan(step, (q0, xr.zeros_like(q0)), length=8, checkpoint_every=every)
        return (q ** 2).sum() + (p ** 2).sum()

    q0 = xr.DataArray([0.3, -1.2, 0.8], dims="particle")
    xr.testing.assert_allclose(lf.grad(lambda q: loss(q, 3))(q0), lf.grad(loss)(q0), rtol=1e-12)
    direction = xr.DataArray([1.0, 0.5, -0.3], dims="particle")
    np.testing.assert_allclose(float((lf.grad(lambda q: loss(q, 3))(q0) * direction).sum()),
                               central_difference(loss, q0, direction), rtol=1e-6)


def test_in_place_writes_into_the_carry_inside_checkpointed_steps():
    def step(u, _):
        u[1:-1] += 0.2 * (u[2:].data - 2 * u[1:-1].data + u[:-2].data)  # writes into its argument
        interior = u[1:-1]  # a view: a write through it reaches u
        interior *= 0.9
        return u, None

    x = xr.DataArray(RNG.random(6), dims="x")
    loss = lambda every: lambda v: (lf.scan(step, v.copy(), length=5, checkpoint_every=every)[0] ** 2).sum()  # noqa
    expected = float(loss(None)(x))
    assert float(loss(2)(x)) == pytest.approx(expected)
    direction = xr.DataArray(RNG.random(6), dims="x")
    np.testing.assert_allclose(float((lf.grad(loss(2))(x) * direction).sum()),
                               central_difference(loss(None), x, direction), rtol=1e-6)
    xr.testing.assert_allclose(lf.grad(loss(2))(x), lf.grad(loss(None))(x))


def test_jit_of_grad_through_checkpointed_scan_replays_the_same_gradient():
    compiled = lf.jit(lf.grad(lambda k, u: heat(k, u, every=4), argnums=(0, 1)))
    for seed in (0, 1):
        u0 = field(seed=seed)
        expected = lf.grad(lambda k, u: heat(k, u), argnums=(0, 1))(xr.DataArray(0.1), u0)
        for a, b in zip(compiled(xr.DataArray(0.1), u0), expected):
            xr.testing.assert_allclose(a, b, rtol=1e-12)


# --- memory, counted on the tape ------------------------------------------------------------------------
def field_arrays_on_tape(every, steps=24):
    """The number of distinct field-sized arrays that the tape behind the loss keeps (of a
    reaction-diffusion run: the cubic term makes each step's state needed on the way back;
    a linear step would keep nothing, its VJP reading shapes only)."""
    def step(u, _):
        return u + 0.1 * laplacian(u) - 0.05 * u ** 3, u.mean()

    def loss(u0):
        u, means = lf.scan(step, u0, length=steps, checkpoint_every=every)
        out = (u ** 2).sum() + (means ** 2).sum()
        tracer = out.data
        seen, stack, arrays = set(), [node_of(tracer, tracer._level)], set()
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            for value in (*node.primals, node.out, *getattr(node, "outs", ())):
                strides = getattr(bottom(value), "strides", None)
                if strides and not any(strides):  # a shape-only stand-in: holds no memory
                    continue
                if getattr(value, "shape", None) == u0.shape:
                    arrays.add(id(value))
            stack.extend(parent for _, parent in node.parents)
        return out, len(arrays)

    return lf.grad(loss, has_aux=True)(field())[1]


def test_checkpointed_scan_keeps_the_carries_between_runs_only():
    steps = 24
    without = field_arrays_on_tape(None, steps)
    every_4, every_2 = field_arrays_on_tape(4, steps), field_arrays_on_tape(2, steps)
    assert without >= steps  # every step keeps its state (for the derivative of u ** 3)
    assert every_2 - every_4 == steps // 2 - steps // 4  # one carry per run of steps, nothing else
    assert every_4 <= steps // 4 + 6  # (the rest: the input and the loss after the loop)


# --- errors ------------------------------------------------------------------------------------------
def test_errors_name_the_culprit():
    u = field()
    with pytest.raises(TypeError, match="step must be callable"):
        lf.scan("step", u, length=2)
    with pytest.raises(TypeError, match="func must be callable"):
        lf.checkpoint(3)
    with pytest.raises(ValueError, match="give xs .* or length"):
        lf.scan(lambda c, x: (c, None), u)
    with pytest.raises(TypeError, match="length must be an int"):
        lf.scan(lambda c, x: (c, None), u, length=2.0)
    with pytest.raises(TypeError, match="length must be an int"):
        lf.scan(lambda c, x: (c, None), u, length=True)
    with pytest.raises(ValueError, match="length=0"):
        lf.scan(lambda c, x: (c, None), u, length=0)
    xs = xr.DataArray(np.zeros((3, 2)), dims=("step", "site"))
    with pytest.raises(ValueError, match=r"length=4, but xs has 3"):
        lf.scan(lambda c, x: (c, None), u, xs, length=4)
    with pytest.raises(ValueError, match=r"xs\['b'\] has 2"):
        lf.scan(lambda c, x: (c, None), u, {"a": xs, "b": np.zeros((2, 5))})
    with pytest.raises(ValueError, match=r"xs has no dim 'time'.*\('step', 'site'\)"):
        lf.scan(lambda c, x: (c, None), u, xs, dim="time")
    with pytest.raises(ValueError, match="checkpoint_every=0"):
        lf.scan(lambda c, x: (c, None), u, length=2, checkpoint_every=0)
    with pytest.raises(TypeError, match="pair .* at step 0"):
        lf.scan(lambda c, x: c, u, length=2)


@pytest.mark.parametrize("every", [None, 2])
def test_a_carry_that_changes_is_refused_naming_the_step_and_the_leaf(every):
    init = {"u": field(), "t": 0.0}
    grows = lambda c, x: ({"u": c["u"].pad(x=(0, int(x))), "t": c["t"] + 1}, None)  # noqa: E731
    xs = np.array([0, 0, 1, 0])
    with pytest.raises(ValueError, match=r"step 2 changed carry\['u'\]: .*'x': 6.*'x': 7"):
        lf.scan(grows, init, xs, checkpoint_every=every)
    with pytest.raises(TypeError, match=r"step 0 changed carry\['u'\]: dtype float64 .* float32"):
        lf.scan(lambda c, x: ({"u": c["u"].astype("float32"), "t": c["t"]}, None), init, length=3,
                checkpoint_every=every)
    dataset = xr.Dataset({"a": ("x", np.ones(2)), "b": ("x", np.ones(2))})
    with pytest.raises(ValueError, match=r"step 1 changed carry: data variables \['a', 'b'\] .* \['a'\]"):
        lf.scan(lambda c, x: (c.drop_vars("b") if x else c, None), dataset, np.array([0, 1]), checkpoint_every=every)
    with pytest.raises(TypeError, match=r"step 0 changed carry\[1\]: a number at the start, str"):
        lf.scan(lambda c, x: ((c[0], "t"), None), (dataset, 0.0), length=2, checkpoint_every=every)
    with pytest.raises(ValueError, match=r"step 0 changed the structure of the carry"):
        lf.scan(lambda c, x: ({"u": c["u"]}, None), init, length=3, checkpoint_every=every)
    with pytest.raises(ValueError, match=r"step 1 returned y of structure"):
        lf.scan(lambda c, x: (c, (1.0,) if x else 1.0), init, np.array([0, 1]), checkpoint_every=every)
    with pytest.raises(ValueError, match=r"step 1 returned y\[0\] as a float, the earlier steps as None"):
        lf.scan(lambda c, x: (c, (1.0 if x else None,)), init, np.array([0, 1]), checkpoint_every=every)
    with pytest.raises(ValueError, match=r"step 2 returned y\['s'\] as an array of shape \(3,\)"):
        lf.scan(lambda c, x: (c, {"s": np.ones(2 + x)}), init, np.array([0, 0, 1]), checkpoint_every=every)
    with pytest.raises(ValueError, match=r"dim 'step' already"):
        lf.scan(lambda c, x: (c, c["u"].expand_dims("step")), init, length=2, checkpoint_every=every)


def test_writing_into_a_closed_over_value_inside_a_checkpoint_under_grad_is_refused():
    def loss(w):
        def f(v):
            w[0] = 0.0  # w is closed over: it would lose its derivative
            return v * w

        return lf.checkpoint(f)(xr.DataArray([1.0, 2.0], dims="i")).sum()

    with pytest.raises(lf.InplaceError, match="checkpointed function .* writes in place into a value it closes over"):
        lf.grad(loss)(xr.DataArray([3.0, 4.0], dims="i"))
