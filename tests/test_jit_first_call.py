"""What a fresh lf.jit's first call costs (issue 25): its results are the trace's, the passes
run at the first replay (``Program.ready``), once whatever the threads, and a reverse pass
through rolls sums each rolled cotangent in one pass while tracing (``add_rolled``) yet
records the roll and the add that the passes fold.  Oracles: the un-jitted function, the
closed-form Lorenz-96 Jacobian."""
from __future__ import annotations

import threading

import numpy as np
import xarray as xr

import labeled_func as lf
from labeled_func.engine.compiler.program import Program
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import shape as kshape

FORCING = 8.0


def lorenz96(x):
    return (x.roll(site=-1) - x.roll(site=2)) * x.roll(site=1) - x + FORCING


def lorenz96_jacobian(x):
    """d tendency_i / d x_j: x_{i-1} at j = i+1, -x_{i-1} at j = i-2, x_{i+1} - x_{i-2} at j = i-1, -1 at i."""
    m = x.size
    rows = np.arange(m)
    jac = -np.eye(m)
    np.add.at(jac, (rows, (rows + 1) % m), x[(rows - 1) % m])
    np.add.at(jac, (rows, (rows - 2) % m), -x[(rows - 1) % m])
    np.add.at(jac, (rows, (rows - 1) % m), x[(rows + 1) % m] - x[(rows - 2) % m])
    return jac


def _state(m=40, seed=0):
    return xr.DataArray(FORCING + np.random.default_rng(seed).normal(size=m), dims="site")


def _counting_prunes(monkeypatch):
    count = []
    prune = Program.prune

    def counted(self):
        count.append(self)
        return prune(self)

    monkeypatch.setattr(Program, "prune", counted)
    return count


def test_the_first_call_returns_the_trace_results_and_the_first_replay_prunes_once(monkeypatch):
    prunes = _counting_prunes(monkeypatch)
    f = lf.vmap(lf.grad(lambda x: (np.sin(x) * x.roll(t=1)).sum()), dim="sample")
    x = xr.DataArray(np.random.default_rng(1).normal(size=(6, 9)), dims=("sample", "t"))
    jitted = lf.jit(f)
    xr.testing.assert_identical(jitted(x), f(x))
    assert prunes == []  # one-shot: no passes, no planning
    for k in range(3):
        other = x + 0.1 * k
        xr.testing.assert_allclose(jitted(other), f(other), rtol=1e-13, atol=0)
    assert len(prunes) == 1


def test_threads_replaying_a_fresh_program_at_once_prune_it_once(monkeypatch):
    prunes = _counting_prunes(monkeypatch)
    f = lf.jacrev(lorenz96)
    jitted = lf.jit(f)
    jitted(_state())
    states = [_state(seed=k) for k in range(1, 7)]
    results = [None] * len(states)
    start = threading.Barrier(len(states))

    def replay(k):
        start.wait()
        results[k] = jitted(states[k])

    threads = [threading.Thread(target=replay, args=(k,)) for k in range(len(states))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(prunes) == 1
    for state, result in zip(states, results):
        np.testing.assert_allclose(result.values, lorenz96_jacobian(state.values), rtol=1e-14, atol=1e-14)


def test_a_reverse_pass_through_rolls_under_jit_sums_in_one_pass_and_records_roll_and_add(monkeypatch):
    sums = []
    impl = kshape.add_rolled.impl

    def counted(*args, **params):
        sums.append(params["negate"])
        return impl(*args, **params)

    monkeypatch.setattr(kshape.add_rolled, "impl", counted)
    state = _state()
    eager = lf.jacrev(lorenz96)(state)
    eager_sums = len(sums)
    assert eager_sums > 0 and True in sums  # L96 subtracts a roll: the negated sum is taken too
    jitted = lf.jit(lf.jacrev(lorenz96))
    first = jitted(state)
    assert len(sums) == 2 * eager_sums  # the trace sums as the eager pass does, in one pass each
    np.testing.assert_array_equal(first.values, eager.values)
    np.testing.assert_allclose(first.values, lorenz96_jacobian(state.values), rtol=1e-14, atol=1e-14)
    (compiled,) = jitted.cache.values()
    recorded = [node.prim for node in compiled.program.nodes]
    assert kshape.add_rolled not in recorded and kshape.roll in recorded  # the roll and the add
    other = _state(seed=3)
    np.testing.assert_array_equal(jitted(other).values, lf.jacrev(lorenz96)(other).values)
    assert len(sums) == 2 * eager_sums + eager_sums  # the un-jitted call just above; the replay sums none


def test_the_trace_sums_a_cotangent_in_place_as_eagerly_and_records_the_plain_sum(monkeypatch):
    """A value read several times: the reverse pass adds the later contributions into its own
    temporary (``add_inplace``). The trace does the same, in place, and the program records
    ``add``/``subtract`` (a replay passes buffers on by its own plan)."""
    def many_uses(x):
        return (np.sin(x) * 2.0 + x * x + np.exp(x) - x / 3.0).sum("t")

    def gradient(x):
        return 2.0 * np.cos(x) + 2 * x + np.exp(x) - 1 / 3.0

    written = []
    for prim in (ew.add_inplace, ew.subtract_inplace):
        def counted(a, b, impl=prim.impl, name=prim.name):
            out = impl(a, b)
            written.append((name, out is a))
            return out
        monkeypatch.setattr(prim, "impl", counted)
    f = lf.vmap(lf.grad(many_uses), dim="sample")
    x = xr.DataArray(np.random.default_rng(2).uniform(0.3, 2.1, (4, 9)), dims=("sample", "t"))
    eager = f(x)
    eager_writes = list(written)
    assert eager_writes and all(into for _, into in eager_writes)  # eagerly: into the temporary
    written.clear()
    jitted = lf.jit(f)
    first = jitted(x)
    assert written == eager_writes  # the trace: the same sums, in place
    np.testing.assert_array_equal(first.values, eager.values)
    np.testing.assert_allclose(first.transpose(*x.dims).values, gradient(x.values), rtol=1e-13)
    (compiled,) = jitted.cache.values()
    names = {node.prim.name for node in compiled.program.nodes if node.prim is not None}
    assert not names & {"add_inplace", "subtract_inplace"} and "add" in names
    written.clear()
    other = x + 0.25
    np.testing.assert_array_equal(jitted(other).values, f(other).values)
    assert len(written) == len(eager_writes)  # the un-jitted call only: the replay runs np.add


def test_the_rolled_value_the_trace_never_computes_takes_no_memory_and_keeps_np_rolls_layout():
    """``add_rolled`` records a roll whose value the trace never computes: its node gets the
    layout of ``np.roll``'s result (``np.empty_like``'s) from a stand-in without memory (an
    unwritten array of a Jacobian's size per roll moved the allocator's heap at every trace)."""
    from labeled_func.engine.compiler.level import _unwritten_like
    from labeled_func.engine.compiler.planning import c_strides

    for shape in [(), (7,), (2, 3, 4), (5, 1, 3), (1, 1)]:  # a fresh C array's
        assert c_strides(shape, np.float32) == np.empty(shape, np.float32).strides

    block = np.arange(120.0).reshape(2, 3, 4, 5)
    layouts = [block, block.transpose(3, 1, 0, 2), np.asfortranarray(block), block[:, ::2], block[:, :1],
               block[..., None, :], np.ones(()), np.ones((0, 3)), np.ones((1, 6)).T]
    for value in layouts:
        stand_in, strides = _unwritten_like(value)
        assert (stand_in.shape, stand_in.dtype) == (value.shape, value.dtype)
        assert strides == np.empty_like(value).strides
        if value.ndim:
            assert strides == np.roll(value, 1, axis=-1).strides
        if value.flags.c_contiguous and value.size:
            assert stand_in.strides == (0,) * value.ndim and not stand_in.flags.writeable  # no memory
    state = _state(m=64)
    jitted = lf.jit(lf.jacrev(lorenz96))
    first = jitted(state)
    (compiled,) = jitted.cache.values()
    rolls = [node for node in compiled.program.nodes if node.prim is kshape.roll and node.out is not None]
    assert rolls and all(node.strides == np.empty(node.out[0], node.out[1]).strides for node in rolls)
    np.testing.assert_array_equal(first.values, lf.jacrev(lorenz96)(state).values)
    other = _state(m=64, seed=5)
    np.testing.assert_array_equal(jitted(other).values, lf.jacrev(lorenz96)(other).values)
