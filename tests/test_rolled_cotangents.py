"""A roll's cotangent summed with the others of its argument in one pass (issue: speed).

The cotangent of ``roll(x, s)`` is ``roll(g, -s)``; where ``x`` has other cotangents the
reverse pass adds it to them with ``add_rolled`` instead of rolling it into a new array
and adding that: one pass over the data instead of two.

Oracles: the same backward pass with the fusion switched off (``engine.reverse._rolled_back``
answering None: roll, then add), compared bit for bit, signs of zeros included; NumPy's
``total + np.roll(value)`` for the kernel itself; the analytic Lorenz-96 Jacobian; central
differences.  Kernel calls are counted by wrapping ``bind``, never timed.
"""
import importlib

import array_api_strict as xps
import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func_kernels.shape import add_rolled
from test_deferred_negation import assert_same_bits, calls  # noqa: F401 (a fixture)
from test_kernel_choices import lorenz96, lorenz96_jacobian

reverse = importlib.import_module("labeled_func.engine.reverse")
RNG = np.random.default_rng(11)


@pytest.fixture
def unfused(monkeypatch):
    """A function running its argument with the fusion off: rolled, then added."""

    def run(func):
        with monkeypatch.context() as patch:
            patch.setattr(reverse, "_rolled_back", lambda node, cotangent: None)
            return func()

    return run


# --- the kernel ----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape, axis", [((7,), 0), ((5, 6), 1), ((5, 6), 0), ((3, 4, 5), 1), ((3, 4, 5), 2),
                                         ((2, 3, 4), 0), ((1, 9), 1)])
@pytest.mark.parametrize("shift", [1, -1, 2, -3, 0, 11, -13])
@pytest.mark.parametrize("negate", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_add_rolled_is_the_sum_with_the_rolled_value_bit_for_bit(shape, axis, shift, negate, dtype):
    total = RNG.normal(size=shape).astype(dtype)
    value = RNG.normal(size=shape).astype(dtype)
    value.flat[::3] = -total.flat[::3]  # exact cancellations: zeros whose sign must match
    expected = (np.subtract if negate else np.add)(total, np.roll(value, shift, axis=axis))
    kept = total.copy()
    got = add_rolled.bind(total, value, shift=shift, axis=axis, negate=negate, inplace=False)
    assert_same_bits(got, expected)
    assert_same_bits(total, kept)  # not asked to: its first argument is never written
    got = add_rolled.bind(total, value, shift=shift, axis=axis, negate=negate, inplace=True)
    assert got is total  # an array owning its memory: the caller's own temporary, written into
    assert_same_bits(got, expected)


def test_add_rolled_writes_into_kept_memory_but_never_into_a_view():
    from labeled_func_kernels import buffers
    value = RNG.normal(size=(300, 400))
    total = buffers.empty((300, 400), np.float64)  # kept memory: a temporary of the pass's own
    total[...] = RNG.normal(size=(300, 400))
    expected = total + np.roll(value, 7, axis=1)
    got = add_rolled.bind(total, value, shift=7, axis=1, negate=False, inplace=True)
    assert got is total
    assert_same_bits(got, expected)
    base = RNG.normal(size=(2, 300, 400))
    view, kept = base[1], base.copy()
    got = add_rolled.bind(view, value, shift=-7, axis=0, negate=True, inplace=True)
    assert got is not view
    assert_same_bits(base, kept)
    assert_same_bits(got, kept[1] - np.roll(value, -7, axis=0))


def test_add_rolled_on_other_layouts_and_libraries_rolls_then_adds():
    total, value = RNG.normal(size=(4, 5)), RNG.normal(size=(5, 4)).T  # a transposed view
    assert_same_bits(add_rolled.bind(total, value, shift=2, axis=1, negate=True, inplace=False),
                     total - np.roll(value, 2, axis=1))
    got = add_rolled.bind(xps.asarray(total), xps.asarray(np.ascontiguousarray(value)), shift=-1, axis=0,
                          negate=False, inplace=False)
    assert isinstance(got, type(xps.asarray(1.0)))
    np.testing.assert_array_equal(np.asarray(got), total + np.roll(value, -1, axis=0))


# --- the backward pass ---------------------------------------------------------------------------
def stencil(u):
    """Upwind advection and diffusion on a ring, with a decay: three rolls per step."""
    for _ in range(3):
        left, right = np.roll(u, 1, axis=-1), np.roll(u, -1, axis=-1)
        u = u + 0.1 * (-(u - left) + 0.5 * (right - 2 * u + left) - 0.2 * u * np.roll(u, 2, axis=-1))
    return np.sum(u ** 2)


@pytest.mark.parametrize("transform", ["grad", "vmap-of-grad", "jacrev", "hessian", "jit-of-grad"])
def test_gradients_keep_the_bits_of_rolling_then_adding(transform, unfused):
    x = RNG.uniform(0.5, 1.5, size=(3, 16))

    def run():
        if transform == "grad":
            return lf.grad(stencil)(x[0])
        if transform == "vmap-of-grad":
            return lf.vmap(lf.grad(stencil), in_dims=(0,))(x)
        if transform == "jacrev":
            return lf.jacrev(lambda u: np.roll(u, 1) * u - np.roll(u, -2))(x[0])
        if transform == "hessian":
            return lf.hessian(stencil)(x[0])
        return lf.jit(lf.grad(stencil))(x[0])

    got = run()
    assert_same_bits(got, unfused(run))
    if transform == "grad":
        h = 1e-6
        expected = [(stencil(x[0] + h * e) - stencil(x[0] - h * e)) / (2 * h) for e in np.eye(16)]
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-8)


def test_the_lorenz96_jacobian_sums_its_rolls_in_place(calls, unfused):
    state = xr.DataArray(8.0 + RNG.normal(size=40), dims="site")
    calls.clear()
    got = lf.jacrev(lorenz96)(state)
    fused = [name for name, _ in calls]
    calls.clear()
    expected = unfused(lambda: lf.jacrev(lorenz96)(state))
    before = [name for name, _ in calls]
    assert_same_bits(got.values, expected.values)
    np.testing.assert_allclose(got.values, lorenz96_jacobian(state.values), rtol=1e-14, atol=1e-14)
    # three rolls of x meet its other cotangents: two summed with their roll, fewer rolls
    assert fused.count("add_rolled") == 2, fused
    assert fused.count("roll") + 2 == before.count("roll"), (fused, before)


def test_a_roll_whose_cotangent_meets_no_other_is_rolled_once():
    x = RNG.normal(size=8)
    (got,) = lf.vjp(lambda u: np.roll(u * 2.0, 3), x)[1](np.arange(8.0))
    np.testing.assert_array_equal(got, 2.0 * np.roll(np.arange(8.0), -3))
