"""The replay of ``lf.jit`` programs: buffers passed on between operations, rewrites that
keep the bits, and the replay kernels of the compiler level.

Oracles: the same transforms without jit (bitwise: buffers and rewrites change where
results are written, never a bit of them), run over the operator table with every
buffer recycled; NumPy written by hand.
"""
import contextlib
import importlib

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func_kernels import buffers
from labeled_func_kernels import elementwise as ew
from thread_helpers import run_interleaved
from test_jit import DIFFERENTIABLE, STATIC_SHAPES, close, fused_programs_agree, same
from test_jit import test_jit_of_vmap_of_grad_replays_what_it_computes as grad_case
from test_jit import test_jit_of_vmap_replays_what_vmap_computes as vmap_case

thresholds = importlib.import_module("labeled_func.engine.compiler.thresholds")
program_module = importlib.import_module("labeled_func.engine.compiler.program")
replay_module = importlib.import_module("labeled_func.engine.replay")


@pytest.fixture
def every_buffer_recycled(monkeypatch):
    """Results of any size are written into buffers passed on from dead arrays."""
    monkeypatch.setattr(thresholds, "POOL_MIN_BYTES", 0)


@pytest.mark.parametrize("op", [pytest.param(op, id=op.name) for op in STATIC_SHAPES])
def test_operator_table_replays_bitwise_with_every_buffer_recycled(op, every_buffer_recycled):
    vmap_case(op)


@pytest.mark.parametrize("op", DIFFERENTIABLE)
def test_gradients_of_the_table_replay_bitwise_with_every_buffer_recycled(op, every_buffer_recycled):
    grad_case(op)


def compiled(jitted):
    (entry,) = jitted.cache.values()
    return entry.program.ready()  # pruned at its first replay: pruned now


def test_a_long_chain_writes_into_a_few_recycled_buffers_and_never_into_inputs():
    def chain(x, y):
        for k in range(40):
            x = np.sin(x) * 0.5 + y if k % 2 else x * y - 0.25
        return x

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(2, 10_000))  # below FUSE_MIN_SIZE, above POOL_MIN_BYTES
    x_before, y_before = x.copy(), y.copy()
    jitted = lf.jit(chain)
    jitted(x, y)
    program = compiled(jitted)
    plan = program._plan
    written = [entry for entry in plan if entry[4] is not None]
    # written in place over an input (an int position; a tuple is a fresh buffer's place in a slab)
    reused = [entry for entry in written if type(entry[6]) is int] + [r for entry in plan for r in entry[5]]
    assert len(written) >= 100 and len(reused) >= len(written) - 4
    for _ in range(2):
        x2, y2 = rng.normal(size=(2, 10_000))
        same(jitted(x2, y2), chain(x2, y2))
    same(jitted(x, y), chain(x, y))
    same(x, x_before)  # the inputs are never written over
    same(y, y_before)


def test_outputs_are_fresh_arrays_at_every_call():
    jitted = lf.jit(lambda x: (x * 2.0 + 1.0, np.exp(x) - x))
    x = np.linspace(0.0, 1.0, 20_000)
    first = jitted(x)
    kept = [a.copy() for a in first]
    second = jitted(x + 1.0)
    for a, b in zip(first, second):
        assert not np.shares_memory(a, b)
    same(list(first), kept)


def test_negations_are_absorbed_into_sums_with_the_same_bits():
    def f(x, y):
        return x + (-y) * 3.0, (-x) + y, x - (-(y * y)), (-x) * y + x

    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(2, 1000))
    x[:3] = 0.0  # signed zeros: a - b and a + (-b) agree on them too
    y[:3] = [0.0, -0.0, 0.0]
    jitted = lf.jit(f)
    same(jitted(x, y), f(x, y))
    negations = [node for node in compiled(jitted).nodes if node.function is np.negative]
    assert len(negations) <= 1  # four negations written; (-x) * y keeps its sign as one -(x * y)
    x2, y2 = rng.normal(size=(2, 1000))
    same(jitted(x2, y2), f(x2, y2))


def test_gradient_of_a_time_stepping_model_under_jit_equals_central_differences():
    cells = 32
    u0 = xr.DataArray(np.exp(-((np.arange(cells) - 10.0) / 3.0) ** 2), dims="cell")

    def model(p):
        u = u0
        for _ in range(30):
            u = u + 0.1 * (-p.c * (u - u.roll(cell=1)) + p.k * (u.roll(cell=-1) - 2 * u + u.roll(cell=1)) - p.r * u)
        return (u ** 2).mean("cell")

    rng = np.random.default_rng(2)
    n = 600  # 600 x 32 doubles: results recycled (POOL_MIN_BYTES), sums over cells by einsum
    params = xr.Dataset({"c": ("sample", rng.uniform(0.2, 0.8, n)), "k": ("sample", rng.uniform(0.1, 0.3, n)),
                         "r": ("sample", rng.uniform(0.0, 0.5, n))})
    per_sample = lf.vmap(lf.grad(model), dim="sample")
    jitted = lf.jit(per_sample)
    got = jitted(params)
    plain = per_sample(params)
    for name in params:
        np.testing.assert_allclose(got[name].values, plain[name].values, rtol=1e-12, atol=1e-15)
        h = 1e-6
        up = lf.vmap(model, dim="sample")(params.assign({name: params[name] + h}))
        down = lf.vmap(model, dim="sample")(params.assign({name: params[name] - h}))
        np.testing.assert_allclose(got[name].values, ((up - down) / (2 * h)).values, rtol=1e-6, atol=1e-10)


def test_safe_products_keep_a_zero_cotangent_zero_against_an_infinite_partial_when_recycled(every_buffer_recycled):
    gradient = lf.jit(lf.grad(lambda v: (np.where(v > 0, np.sqrt(np.abs(v)), 0.0) * 2).sum()))
    v = np.concatenate([np.zeros(10), np.linspace(0.5, 2.0, 10)])
    for values in (v, v[::-1].copy(), v + 1.0):
        with np.errstate(divide="ignore", invalid="ignore"):
            got = gradient(values)
            expected = np.where(values > 0, 1 / np.sqrt(np.abs(values)), 0.0)
        np.testing.assert_allclose(got, expected, rtol=1e-15)


F32 = np.dtype(np.float32)


def single_precision_close(got, expected):
    close(got, expected, tolerance=2e-6)


@pytest.mark.parametrize("op", [pytest.param(op, id=op.name) for op in STATIC_SHAPES if F32 in op.dtypes])
def test_float32_fused_programs_equal_the_transforms_to_single_precision(op, monkeypatch):
    fused_programs_agree(op, F32, single_precision_close, monkeypatch)


def test_a_negated_roll_is_absorbed_into_the_sum_reading_it():
    def f(x, y):
        return x + np.roll(-(x * y), 3, axis=1) + np.roll(-y, -1, axis=1)

    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(2, 40, 50))
    jitted = lf.jit(f)
    same(jitted(x, y), f(x, y))
    assert not [node for node in compiled(jitted).nodes if node.function is np.negative]
    x2, y2 = rng.normal(size=(2, 40, 50))
    same(jitted(x2, y2), f(x2, y2))


def test_a_parameter_broadcast_in_many_products_is_spread_once_with_the_same_bits():
    def steps(c, u):
        for _ in range(6):
            u = u - 0.1 * c[:, None] * u + c[:, None] * 0.01
        return u

    rng = np.random.default_rng(6)
    c, u = rng.uniform(0.5, 1.5, 300), rng.normal(size=(300, 64))
    jitted = lf.jit(steps)
    same(jitted(c, u), steps(c, u))
    nodes = compiled(jitted).nodes
    spreads = [node for node in nodes if getattr(node.function, "__name__", "") == "spread"]
    # 0.1 * c[:, None] and c[:, None] * 0.01: two (300, 1) operands, each read at every step
    assert len(spreads) == 2 and all(node.out[0] == (300, 64) for node in spreads)
    assert all(node.strides == np.empty((300, 64)).strides for node in spreads)  # C-ordered: may take a buffer
    views = [node for node in nodes if node.prim is not None and node.prim.name == "getitem"]
    assert len(views) <= 1  # c[:, None] recorded once (slices in parameters compare)
    c2, u2 = rng.uniform(0.5, 1.5, 300), rng.normal(size=(300, 64))
    same(jitted(c2, u2), steps(c2, u2))
    gradient = lf.jit(lf.grad(lambda c, u: (steps(c, u) ** 2).sum()))
    same(gradient(c2, u2), lf.grad(lambda c, u: (steps(c, u) ** 2).sum())(c2, u2))


def test_a_gradient_under_jit_does_not_compute_the_value_it_only_takes_the_shape_of():
    def f(x):
        value = np.sin(x).sum() + (x ** 3).sum()
        return value

    rng = np.random.default_rng(7)
    x = rng.normal(size=50)
    gradient = lf.jit(lf.grad(f))
    gradient(x)
    program = compiled(gradient)
    # the seed of the backward pass is ones of the output's shape: a node that reads nothing
    # (so the sums of the forward value are dead code), and products by it are their other
    # operand: cos(x) + 3 * x ** 2 is what is left
    names = [node.prim.name for node in program.nodes if node.prim is not None]
    assert "reduce_sum" not in names and "ones_like" not in names and len(program.nodes) <= 4
    for values in (x, rng.normal(size=50)):
        same(gradient(values), lf.grad(f)(values))
        np.testing.assert_allclose(gradient(values), np.cos(values) + 3 * values ** 2, rtol=1e-14)


def test_buffers_made_from_a_traced_template_are_filled_at_every_call():
    def f(x):
        out = np.zeros_like(x)
        out[1:] = np.cumsum(x)[:-1]
        return out + np.full_like(x, 2.0)

    jitted = lf.jit(f)
    for x in (np.arange(5.0), np.linspace(-1, 1, 5)):
        same(jitted(x), f(x))


def test_products_by_ones_and_first_powers_are_their_operand_unless_an_output():
    def f(x, y):
        ones = np.ones_like(x)
        return ones * y + x ** 1, ones * y, np.ones_like(x) * 2.0

    rng = np.random.default_rng(8)
    x, y = rng.normal(size=(2, 30))
    y[0] = np.nan
    jitted = lf.jit(f)
    got = jitted(x, y)
    same(got, f(x, y))
    assert not np.shares_memory(got[1], y)  # an output is never an input's array
    products = [n for n in compiled(jitted).nodes if n.prim is not None and n.prim.name in ("multiply", "power")]
    assert len(products) == 2  # ones * y as an output, ones * 2.0 (another shape's operand)


@pytest.mark.parametrize("axis, shifts", [(1, (1, -2, 2)), (0, (3, -1)), (2, (5, 0, -4)), (1, (7, 13))])
def test_rolls_read_by_a_fused_expression_are_shifted_reads(axis, shifts, monkeypatch):
    monkeypatch.setattr(thresholds, "CHEAP_FUSE_MIN_SIZE", 0)
    monkeypatch.setattr(thresholds, "FUSE_MIN_SIZE", 0)

    def f(x, y):
        total = x * 0.5
        for k, shift in enumerate(shifts):
            total = total + np.roll(x, shift, axis=axis) * (y if k % 2 else np.roll(y, -shift, axis=axis))
        return np.exp(total * 0.01) - x

    rng = np.random.default_rng(9)
    x, y = rng.normal(size=(2, 6, 16, 9))
    jitted = lf.jit(f)
    np.testing.assert_allclose(jitted(x, y), f(x, y), rtol=1e-13, atol=1e-15)
    nodes = compiled(jitted).nodes
    assert not [node for node in nodes if node.prim is not None and node.prim.name == "roll"]
    for _ in range(2):
        x2, y2 = rng.normal(size=(2, 6, 16, 9))
        np.testing.assert_allclose(jitted(x2, y2), f(x2, y2), rtol=1e-13, atol=1e-15)
    # arguments laid out otherwise (a transposed view): the rolls are taken as copies
    xt = np.ascontiguousarray(np.transpose(x2, (2, 1, 0))).transpose(2, 1, 0)
    np.testing.assert_allclose(jitted(xt, y2), f(x2, y2), rtol=1e-13, atol=1e-15)


def test_a_stencil_jacobian_under_jit_folds_its_rolls_and_equals_the_analytic_one(monkeypatch):
    monkeypatch.setattr(thresholds, "CHEAP_FUSE_MIN_SIZE", 0)
    sites = 150

    def tendency(x):
        return (x.roll(site=-1) - x.roll(site=2)) * x.roll(site=1) - x + 8.0

    x = xr.DataArray(8.0 + np.random.default_rng(10).normal(size=sites), dims="site")
    jacobian = lf.jit(lf.jacrev(tendency))
    got = jacobian(x).values
    m, v = sites, x.values
    expected = -np.eye(m)
    for i in range(m):
        expected[i, (i + 1) % m] += v[(i - 1) % m]
        expected[i, (i - 2) % m] -= v[(i - 1) % m]
        expected[i, (i - 1) % m] += v[(i + 1) % m] - v[(i - 2) % m]
    np.testing.assert_allclose(got, expected, rtol=1e-14, atol=1e-14)
    names = [node.prim.name for node in compiled(jacobian).nodes if node.prim is not None]
    assert names.count("roll") <= 3  # the (sites,) rolls of the value; those of the (sites, sites) cotangents fold


def test_a_sum_of_products_over_cells_is_one_contraction_with_nan_safe_products_kept():
    def per_sample(c, u):
        field = u * c
        return (np.sqrt(np.abs(field)) * u).sum()  # d/dc: sum(u * 0.5 u / sqrt|c u| ...)

    gradient = lf.jit(lf.vmap(lf.grad(per_sample), in_dims=(0, 0)))
    rng = np.random.default_rng(11)
    c, u = rng.uniform(0.5, 1.5, 600), rng.normal(size=(600, 40))  # 600 x 40 doubles: large enough
    plain = lf.vmap(lf.grad(per_sample), in_dims=(0, 0))
    expected = plain(c, u)  # sums in another order: to 1e-13 of the terms' size
    np.testing.assert_allclose(gradient(c, u), expected, rtol=1e-13, atol=1e-13 * np.abs(expected).max())
    # the products are summed as they are made: the rule's multiply_sum, or the replay's product_sum
    sums = [node for node in compiled(gradient).nodes
            if getattr(node.function, "__name__", "") == "product_sum" or node.prim is ew.multiply_sum]
    assert sums
    u[:, 0] = 0.0  # sqrt at 0: an infinite partial met by a zero cotangent stays zero
    with np.errstate(divide="ignore", invalid="ignore"):
        got, expected = gradient(c, u), plain(c, u)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-13 * np.abs(expected).max())


def test_the_nan_safe_contraction_masks_like_the_safe_product_then_the_sum():
    total = replay_module.trailing_sum((1,), True, (50, 30))
    contracted = total.contracted(True)
    rng = np.random.default_rng(12)
    g, d = rng.normal(size=(2, 50, 30))
    g[3, :5] = 0.0
    d[3, :2] = np.inf
    d[7, 4] = np.nan
    with np.errstate(invalid="ignore"):
        expected = (np.where((g == 0) & ~np.isfinite(d), 0.0, g * d)).sum(axis=1, keepdims=True)
        got = contracted(g, d)
    assert np.isfinite(got[3, 0]) and np.isnan(got[7, 0])
    np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-13)
    finite = rng.normal(size=(50, 30))
    np.testing.assert_allclose(contracted(g, finite), (g * finite).sum(axis=1, keepdims=True), rtol=1e-13,
                               atol=1e-14)


def test_threads_replaying_one_program_with_recycled_buffers_do_not_share_them():
    import threading

    def f(x, y):
        for _ in range(5):
            x = np.roll(x, 1, axis=1) * 0.5 + y * x - np.sin(y)
        return x

    jitted = lf.jit(f)
    rng = np.random.default_rng(13)
    inputs = [rng.normal(size=(2, 100, 200)) for _ in range(8)]
    jitted(*inputs[0])
    results = [None] * len(inputs)

    def work(k):
        for _ in range(3):
            results[k] = jitted(*inputs[k])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert jitted.traces == 1
    for (x, y), got in zip(inputs, results):
        np.testing.assert_allclose(got, f(x, y), rtol=1e-12, atol=1e-12)


def test_an_argument_laid_out_otherwise_traces_its_own_program_and_keeps_the_bits(every_buffer_recycled):
    def f(x):
        y = np.exp(x) * 2.0 + x
        return (y * y).sum(axis=0), (1.0 * y).sum(axis=1)

    rng = np.random.default_rng(15)
    x = rng.normal(size=(60, 70))
    jitted = lf.jit(f)
    same(jitted(x), f(x))
    transposed = np.ascontiguousarray(x.T).T  # the same values, Fortran order
    same(jitted(transposed), f(transposed))
    assert jitted.traces == 2
    same(jitted(transposed + 1.0), f(transposed + 1.0))
    assert jitted.traces == 2


def test_nan_safe_products_of_one_partial_test_it_once_and_still_mask(every_buffer_recycled):
    def f(x, s):
        total = 0.0
        for k in range(4):  # d/dx of each term: its cotangent times s, NaN-safe: s may be inf
            total = total + ((s * (x + k)) ** 2).sum()
        return total

    gradient = lf.jit(lf.grad(f, argnums=(0, 1)))
    rng = np.random.default_rng(16)
    x, s = rng.normal(size=300), rng.uniform(0.5, 2.0, 300)
    same(gradient(x, s), lf.grad(f, argnums=(0, 1))(x, s))
    flags = [node for node in compiled(gradient).nodes if getattr(node.function, "__name__", "") == "all_finite"]
    assert len(flags) == 1
    s2 = s.copy()
    s2[:5] = np.inf  # a non-finite partial: the flag says so and the products mask
    with np.errstate(invalid="ignore"):
        same(gradient(x, s2), lf.grad(f, argnums=(0, 1))(x, s2))


def test_buffers_made_like_a_fortran_ordered_argument_keep_its_layout():
    def f(x):
        out = np.zeros_like(x)
        out[:, 1:] = x[:, :-1] * 2.0
        return (out * x).sum(axis=0)

    x = np.asfortranarray(np.random.default_rng(18).normal(size=(50, 40)))
    jitted = lf.jit(f)
    same(jitted(x), f(x))
    x2 = np.asfortranarray(x + 1.0)
    same(jitted(x2), f(x2))


@pytest.mark.parametrize("axis, shifts", [(1, (1, -1)), (0, (2, -3)), (1, (5, 5)), (2, (-4, 3))])
def test_rolls_read_by_plain_ufuncs_are_shifted_reads_with_the_same_bits(axis, shifts):
    # unfused (below the fusion sizes): each ufunc reading a roll reads its source shifted
    def f(x, y):
        left, right = np.roll(x, shifts[0], axis=axis), np.roll(x, shifts[1], axis=axis)
        lap = right - 2.0 * x + left
        return (x - left) * y + lap, np.roll(y * x, shifts[0], axis=axis) - np.roll(y, shifts[1], axis=axis) / 3.0

    rng = np.random.default_rng(21)
    x, y = rng.normal(size=(2, 7, 12, 5))
    jitted = lf.jit(f)
    same(jitted(x, y), f(x, y))
    assert not [node for node in compiled(jitted).nodes if hasattr(node.function, "shift")]
    for _ in range(2):
        x2, y2 = rng.normal(size=(2, 7, 12, 5))
        same(jitted(x2, y2), f(x2, y2))
    xt = np.asfortranarray(x2)  # another layout: its own program, rolls as they were recorded
    same(jitted(xt, y2), f(xt, y2))
    assert jitted.traces == 2


def test_a_roll_also_read_by_something_other_than_a_ufunc_is_made_once():
    def f(x):
        left = np.roll(x, 1, axis=1)
        return x - left, left.sum(axis=1), left[:, ::2]

    x = np.random.default_rng(22).normal(size=(30, 40))
    jitted = lf.jit(f)
    same(jitted(x), f(x))
    same(jitted(x + 1.0), f(x + 1.0))
    assert len([node for node in compiled(jitted).nodes if hasattr(node.function, "shift")]) == 1


def test_rolled_evaluation_reads_wrapped_runs_by_slices_and_scattered_ones_by_gathers():
    Shifted, rolled = replay_module.Shifted, replay_module.rolled_evaluation
    rng = np.random.default_rng(23)
    a, b = rng.normal(size=(2, 9, 11))
    layout = ((9, 11), np.dtype(np.float64))
    for shifts in ((1,), (-2,), (1, 1), (2, -1), (3, 1), (-1, -3)):
        leaves = [0] + [Shifted(1 + k, 1, s % 11) for k, s in enumerate(shifts)]
        ufuncs = [np.add, np.subtract][: len(leaves) - 1]

        def evaluate(*values, out=None):
            result = values[0]
            for ufunc, value in zip(ufuncs, values[1:]):
                result = ufunc(result, value)
            if out is None:
                return result
            out[...] = result
            return out

        operands = [a] + [b] * len(shifts)
        expected = evaluate(a, *[np.roll(b, s, axis=1) for s in shifts])
        same(rolled(evaluate, leaves, layout, 1)(*operands), expected)
        if len(shifts) == 1:  # a binary ufunc writes its wrapped edge in place
            same(rolled(ufuncs[0], leaves, layout, 1)(*operands), expected)


def test_rolled_evaluation_spreads_an_operand_broadcast_against_the_rolled_ones(monkeypatch):
    """A constant matrix against a batch of rolled ones (a vmapped stencil Jacobian):
    spread once, the rolls read shifted (np.roll is never called), the same bits."""
    Shifted, rolled = replay_module.Shifted, replay_module.rolled_evaluation
    rng = np.random.default_rng(24)
    batch, basis = rng.normal(size=(3, 7, 7)), rng.normal(size=(7, 7))
    layout = ((3, 7, 7), np.dtype(np.float64))
    leaves = [Shifted(0, 2, 1), 1, Shifted(0, 2, 5)]

    def evaluate(a, b, c, out=None):
        return np.add(np.subtract(a, b), c, out=out)

    expected = evaluate(np.roll(batch, 1, axis=2), basis, np.roll(batch, 5, axis=2))
    calls = []
    real_roll = np.roll
    monkeypatch.setattr(np, "roll", lambda *a, **k: calls.append(a) or real_roll(*a, **k))
    same(rolled(evaluate, leaves, layout, 2)(batch, basis, batch), expected)
    assert calls == []


def _stepping(p):
    u = xr.DataArray(np.linspace(0.0, 1.0, 64) ** 2, dims="cell")
    for _ in range(30):
        u = u + 0.1 * (-p.c * (u - u.roll(cell=1)) + p.k * (u.roll(cell=-1) - 2 * u + u.roll(cell=1)) - p.r * u)
    return (u**2).mean("cell")


@contextlib.contextmanager
def fresh_memory():
    """No kept blocks (``kernels/buffers.py``) within: every buffer a fresh allocation, so
    that tracemalloc measures what a program holds, not the blocks kept from call to call."""
    limit = buffers.limit()
    buffers.set_limit(0)
    try:
        yield
    finally:
        buffers.set_limit(limit)


def _stepping_parameters(seed, n=400):
    rng = np.random.default_rng(seed)
    return xr.Dataset({name: ("sample", rng.uniform(0.1, 0.5, n)) for name in ("c", "k", "r")})


def test_a_run_takes_its_fresh_buffers_one_by_one_and_holds_none_after_unless_it_keeps_them():
    """Without keep_buffers a run allocates the buffers that never leave it one by one (a
    slab taken afresh at every run cost the kernel's huge-page compaction, planning.py);
    with it, they are laid out in slabs (as many rows as ever live at once) that the
    program keeps.  Oracles: tracemalloc, and the un-jitted function."""
    import tracemalloc

    p = _stepping_parameters(24)  # 400 x 64 doubles: above POOL_MIN_BYTES, residuals in fresh buffers
    per_sample = lf.vmap(lf.grad(_stepping), dim="sample")
    jitted, keeping = lf.jit(per_sample), lf.jit(per_sample, keep_buffers=True)
    first = jitted(p)
    keeping(p)
    assert compiled(jitted)._slabs == []
    slabs = compiled(keeping)._slabs
    assert slabs and max(shape[0] for shape, _ in slabs) >= 30
    slab_bytes = sum(np.prod(shape) * dtype.itemsize for shape, dtype in slabs)
    with fresh_memory():  # every buffer a fresh array (not a kept block, which stays kept after the run)
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            second = jitted(p)
            after, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak - before >= slab_bytes  # the buffers that live at once were there during the run...
    assert after - before < slab_bytes / 10  # ...and went with it: the outputs do not hold them
    for name in ("c", "k", "r"):
        # the sums over cells are contractions (einsum): equal to 1e-15 relative
        np.testing.assert_allclose(second[name].values, per_sample(p)[name].values, rtol=1e-13, atol=1e-16)
        same(second[name].values, keeping(p)[name].values)
        assert not np.shares_memory(first[name].values, second[name].values)


def test_kept_buffers_give_the_same_bits_at_every_call_and_stay_held_between_calls():
    import tracemalloc

    per_sample = lf.vmap(lf.grad(_stepping), dim="sample")
    plain, kept = lf.jit(per_sample), lf.jit(per_sample, keep_buffers=True)
    outputs = []
    for seed in range(4):
        p = _stepping_parameters(seed)
        expected, got = plain(p), kept(p)
        for name in ("c", "k", "r"):
            same(got[name].values, expected[name].values)
        outputs.append(got)
    for first, later in zip(outputs, outputs[1:]):  # outputs are fresh: never the kept memory
        for name in ("c", "k", "r"):
            assert not np.shares_memory(first[name].values, later[name].values)
    program = compiled(kept)
    slab_bytes = sum(np.prod(shape) * dtype.itemsize for shape, dtype in program._slabs)
    assert len(program._kept) == 1 and sum(slab.nbytes for slab in program._kept[0]) == slab_bytes
    p = _stepping_parameters(9)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept(p)
        during_kept = tracemalloc.get_traced_memory()[1] - before
        plain(p)
        after = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert during_kept < slab_bytes / 2  # the run wrote into the slabs it kept: no new ones
    assert after < slab_bytes / 10  # and without keep_buffers, nothing is held after a call


def test_threads_replaying_a_program_that_keeps_buffers_never_share_them():
    per_sample = lf.vmap(lf.grad(_stepping), dim="sample")
    kept = lf.jit(per_sample, keep_buffers=True)
    inputs = [_stepping_parameters(seed) for seed in range(8)]
    kept(inputs[0])
    results = [None] * len(inputs)

    def work(k):
        for _ in range(3):
            results[k] = kept(inputs[k])

    run_interleaved(work, range(len(inputs)))  # threads take turns between any two operations
    assert kept.traces == 1
    plain = lf.jit(per_sample)
    plain(inputs[0])  # traced: the replays below compare with replays
    for p, got in zip(inputs, results):
        expected = plain(p)
        for name in ("c", "k", "r"):
            same(got[name].values, expected[name].values)


def test_keep_buffers_must_be_a_bool_and_travels_with_a_pickled_function():
    import pickle

    with pytest.raises(TypeError, match="keep_buffers"):
        lf.jit(np.sin, keep_buffers="yes")
    restored = pickle.loads(pickle.dumps(lf.jit(np.sin, keep_buffers=True)))
    assert restored.keep_buffers is True
    same(restored(np.arange(3.0)), np.sin(np.arange(3.0)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_division_by_a_power_of_two_is_a_product_by_its_reciprocal_with_the_same_bits(dtype):
    def f(x):  # 2**-130 is below float32's normal numbers: a division there
        return x / 0.015625, x / 2.0**-40, x / -4.0, x / 3.0, (x * 1.5) / np.float64(0.5), x / 2.0**-130

    tiny = np.finfo(dtype).tiny
    x = np.concatenate([np.random.default_rng(25).normal(size=200) * 10.0 ** np.arange(-20, 20, 0.2),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, tiny, tiny / 8, -tiny / 3, np.finfo(dtype).max]])
    x = x.astype(dtype)
    jitted = lf.jit(f)
    with np.errstate(all="ignore"):
        jitted(x)
        got, expected = jitted(x * 1), f(x)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype
        np.testing.assert_array_equal(g.view(np.uint8), e.view(np.uint8))  # every bit, NaN and -0 included
    divisions = [node for node in compiled(jitted).nodes if node.function is np.divide]
    assert len(divisions) == (1 if dtype == np.float64 else 2)  # x / 3.0 stays a division


def test_a_cheap_residual_read_again_much_later_is_computed_again_with_the_same_bits(monkeypatch):
    import tracemalloc

    per_sample = lf.vmap(lf.grad(_stepping), dim="sample")
    p, q = _stepping_parameters(31), _stepping_parameters(32)
    remade, remade_slabs = lf.jit(per_sample), lf.jit(per_sample, keep_buffers=True)
    remade(p), remade_slabs(p)
    compiled(remade), compiled(remade_slabs)  # pruned with the pass
    monkeypatch.setattr(program_module.Program, "rematerialize", lambda self: self)
    kept, kept_slabs = lf.jit(per_sample), lf.jit(per_sample, keep_buffers=True)
    kept(p), kept_slabs(p)
    for args in (p, q):
        for name in ("c", "k", "r"):
            same(remade(args)[name].values, kept(args)[name].values)
    # u - roll(u, 1) at each step: read by the step, then by the backward pass (the gradient
    # of c); made again there from u, which the backward pass reads anyway: fewer buffers
    # live at once (the rows of the slabs a program that keeps its buffers lays out)
    rows = sum(shape[0] for shape, _ in compiled(remade_slabs)._slabs)
    rows_kept = sum(shape[0] for shape, _ in compiled(kept_slabs)._slabs)
    assert rows_kept > 0 and rows <= rows_kept * 0.75
    peaks = []
    for jitted in (remade, kept):
        with fresh_memory():
            tracemalloc.start()
            try:
                jitted(q)
                peaks.append(tracemalloc.get_traced_memory()[1])
            finally:
                tracemalloc.stop()
    assert peaks[0] <= 0.8 * peaks[1]


def test_a_result_whose_operand_dies_early_is_kept_not_computed_again():
    def f(x):
        a = x * 3.0 + 1.0  # x * 3.0 is read here only: a must be kept
        b = a * 2.0
        for _ in range(80):
            b = b * 0.5 + x
        return b * a

    x = np.random.default_rng(33).normal(size=(100, 200))
    jitted = lf.jit(f)
    jitted(x)
    same(jitted(x + 1.0), f(x + 1.0))
    assert len([node for node in compiled(jitted).nodes if node.function is np.add and
                any(type(ref) is not int and ref.value == 1.0 for ref in node.refs)]) == 1


def test_a_replays_fresh_results_and_slabs_take_kept_blocks_that_a_dropped_result_gives_back():
    """A replay writes its fresh results (outputs too) and its slabs into the memory the
    eager kernels keep (``kernels/buffers.py``): a result the caller dropped gives its block
    to the next call's (warm memory, no page faults), one the caller holds never does."""
    def per_sample(x):
        return np.sin(x) * x + np.cos(x) * 2.0

    jitted = lf.jit(lf.vmap(lf.grad(lambda v: per_sample(v).sum("t")), dim="sample"))
    x = xr.DataArray(np.random.default_rng(4).normal(size=(50_000, 2)), dims=("sample", "t"))
    jitted(x)
    held = jitted(x)
    first = jitted(x)
    assert buffers.owns(first.values) and first.values.base is not None  # a whole kept block
    assert not np.shares_memory(held.values, first.values)
    kept = {id(block) for block in buffers._blocks}  # (a reference to a block would keep it busy)
    del first
    second = jitted(x)
    # the dropped result's block is written again (by this result or by another buffer of
    # the run, which leaves its own block free for this one): no block is added
    assert {id(block) for block in buffers._blocks} <= kept and buffers.owns(second.values)
    assert not np.shares_memory(held.values, second.values)  # the held one untouched
    third = jitted(x)  # both held now: a new block for one of the run's buffers
    assert not {id(block) for block in buffers._blocks} <= kept
    assert not np.shares_memory(third.values, second.values)
    expected = lf.vmap(lf.grad(lambda v: per_sample(v).sum("t")), dim="sample")(x)
    np.testing.assert_allclose(second.values, expected.values, rtol=1e-12)
    np.testing.assert_allclose(held.values, expected.values, rtol=1e-12)


def test_a_strided_constant_read_by_arithmetic_is_replayed_from_a_contiguous_copy_with_the_same_bits():
    """A basis cut from an identity (columns sliced off: rows with gaps) that products and
    sums read: the replay reads a contiguous copy (NumPy's loops over it are faster), and
    every bit of every result is the eager call's, the copy's layout in C order as the view's."""
    rng = np.random.default_rng(31)
    basis = np.eye(40)[:, :39]
    weights = rng.normal(size=(40, 39)).T.copy().T  # Fortran order: the result's layout follows it
    x = rng.normal(size=39) * 10.0 ** rng.integers(-8, 8, 39)

    def f(x):
        return (basis * x - basis / 3.0) * x + weights * basis

    jitted = lf.jit(f)
    jitted(x)
    program = compiled(jitted)
    read = [c for c in program._constants if type(c) is np.ndarray and c.shape == basis.shape
            and np.array_equal(c, basis)]
    assert read and all(c.flags.c_contiguous for c in read)
    for _ in range(2):
        got, want = jitted(x), f(x)
        np.testing.assert_array_equal(got, want)
        assert got.strides == want.strides
    y = rng.normal(size=39)
    np.testing.assert_array_equal(jitted(y), f(y))


def test_a_strided_constant_read_by_a_transcendental_ufunc_is_replayed_as_recorded():
    """NumPy's SIMD loop of a function such as power or arctan2 on contiguous memory may
    round otherwise than its strided loop: the replay reads such a constant as the trace did."""
    base = (np.arange(1.0, 41.0)[:, None] * np.linspace(0.5, 1.5, 40))[:, :39]

    def f(x):
        return np.power(base, x) + np.arctan2(base, x)

    x = np.linspace(-2.0, 2.0, 39)
    jitted = lf.jit(f)
    jitted(x)
    program = compiled(jitted)
    kept = [c for c in program._constants if type(c) is np.ndarray and c.shape == base.shape]
    assert kept and not any(c.flags.c_contiguous for c in kept)
    np.testing.assert_array_equal(jitted(x), f(x))


def test_threads_replaying_one_fused_rolled_evaluation_get_the_eager_bits():
    """A fused tree reading a roll runs its numexpr evaluation twice per call: over the flat
    arrays shifted, then over the wrapped columns (strided).  One numexpr object called from
    several threads at once races on the operands it keeps (it aborted the process with a
    double free, or returned wrong values): each thread calls its own object."""
    import threading

    def f(x):
        return (x * 2 + 1) * x - np.roll(x, 1, axis=1) * 3

    jitted = lf.jit(f)
    inputs = [np.random.default_rng(40 + k).standard_normal((400, 700)) for k in range(8)]
    expected = [f(x) for x in inputs]
    jitted(inputs[0])
    jitted(inputs[0])  # pruned and fused: the replays below share one program
    assert any(getattr(node.prim, "name", "") == "fused[numexpr]" for node in compiled(jitted).nodes)
    wrong = []

    def work(k):
        for step in range(30):
            x = inputs[(k + step) % len(inputs)]
            if not np.array_equal(jitted(x.copy()), expected[(k + step) % len(inputs)]):
                wrong.append((k, step))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == [] and jitted.traces == 1
