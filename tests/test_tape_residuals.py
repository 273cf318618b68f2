"""What a reverse-mode tape keeps: only the values its VJP rules read.

Linear operations (sums, rolls, slices, pads, reshapes, scalings by constants) need the
shapes of their inputs only, a product each factor for the other's cotangent, exp its
output, sin its input. The memory held by ``lf.vjp``'s pullback between the forward and
the backward pass is measured with tracemalloc (bytes, not time) against the size of one
array; the pullback's result is checked against the analytic gradient.
"""
import tracemalloc

import numpy as np

import labeled_func as lf
from labeled_func_kernels import buffers

N = 1 << 20  # 8 MiB per float64 array


def held_by_pullback(func, x):
    """Bytes still allocated once the forward pass has returned (output dropped), and the
    gradient the pullback then gives for a unit cotangent. The eager kernels' kept blocks
    (``kernels/buffers.py``: memory reused from call to call, arrays of 8 MiB included)
    are switched off meanwhile: what is measured is what the tape holds."""
    limit = buffers.limit()
    buffers.set_limit(0)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        out, pullback = lf.vjp(func, x)
        del out
        held = tracemalloc.get_traced_memory()[0] - before
        (gradient,) = pullback(np.ones(()))
    finally:
        tracemalloc.stop()
        buffers.set_limit(limit)
    return held, gradient


def test_a_chain_of_linear_operations_keeps_no_array():
    x = np.random.default_rng(0).normal(size=N)

    def linear(x):
        y = 2.0 * x + np.roll(x, 3) - x[::-1]
        y = np.pad(y[1:], (0, 1)) * 0.5 + y.reshape(-1, 2).T.reshape(-1)
        return np.sum(y)

    held, gradient = held_by_pullback(linear, x)
    assert held < 0.5 * x.nbytes, f"the tape of a linear chain holds {held / x.nbytes:.1f} arrays"
    # d/dx of sum(0.5 * pad(y[1:]) + transposed y) with y = 2x + roll(x, 3) - x[::-1]: every
    # element of y counts 0.5 (except y[0], dropped by the slice) + 1, and y is 2x + ...
    weights = np.full(N, 1.5)
    weights[0] = 1.0
    expected = 2 * weights + np.roll(weights, -3) - weights[::-1]
    np.testing.assert_allclose(gradient, expected, rtol=1e-12)


def test_nonlinear_operations_keep_what_their_derivative_reads():
    x = np.random.default_rng(1).uniform(0.5, 1.5, N)

    def f(x):
        # exp keeps its output, sin its input (x: the caller's array, not a new one),
        # x ** 4 its input, the product both factors (two arrays: sin(x), exp(x) * 3)
        return np.sum(3.0 * np.exp(x) * np.sin(x) + x ** 4 + (x + 1.0) / 7.0)

    held, gradient = held_by_pullback(f, x)
    assert held < 3.5 * x.nbytes, f"the tape holds {held / x.nbytes:.1f} arrays"
    expected = 3.0 * np.exp(x) * (np.sin(x) + np.cos(x)) + 4 * x ** 3 + 1 / 7.0
    np.testing.assert_allclose(gradient, expected, rtol=1e-12)


def test_an_untraced_factor_gets_no_cotangent(monkeypatch):
    """x * data with data held fixed: the backward pass multiplies the cotangent by data
    (for x) and not by x (for data, which nobody reads); the same for x / data and
    data ** x. Counted in kernel calls of the backward pass; the gradient against calculus."""
    import labeled_func_kernels.primitive as primitive

    x = np.linspace(0.5, 1.5, 8)
    data = np.linspace(1.0, 2.0, 8)
    for f, expected in ((lambda x: np.sum(x * data), data), (lambda x: np.sum(x / data), 1 / data),
                        (lambda x: np.sum(data ** x), np.log(data) * data ** x)):
        out, pullback = lf.vjp(f, x)
        calls = []
        original = primitive.bind
        monkeypatch.setattr(primitive, "bind", lambda prim, args, params: calls.append(prim.name)
                            or original(prim, args, params))
        (gradient,) = pullback(np.ones(()))
        monkeypatch.undo()
        np.testing.assert_allclose(gradient, expected, rtol=1e-12)
        # the cotangent of the sum, broadcast, times one partial (computed if lazy): never two
        assert calls.count("multiply") + calls.count("safe_multiply") == 1 + ("log" in calls), calls
