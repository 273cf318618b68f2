"""Fewer temporaries and fewer kernel calls on the backward pass (issue: speed), with the
same values.

- A value used several times gets one cotangent array: the first sum of two contributions
  is a new array of the backward pass's own, the later ones are added into it in place
  (``add_inplace`` returning its first argument); a tangent summed over several
  arguments likewise.  Arrays the pass does not own (a cotangent given by the caller,
  one that a rule hands to two parents) are never written.
- A NaN-safe rule multiplies a cotangent by a finite constant partial (``x / 3.0``) with a
  plain product (no check of the values); a non-finite one keeps the NaN-safe product.

The oracles are the analytic derivatives and central differences; kernel calls are
counted by wrapping ``bind``, never timed.
"""
import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import primitive

X = np.linspace(0.3, 2.1, 12)


def many_uses(x):
    """x is read five times: its cotangent sums five contributions."""
    return np.sum(np.sin(x) * 2.0 + x * x + np.exp(x) - x / 3.0)


def many_uses_gradient(x):
    return 2.0 * np.cos(x) + 2 * x + np.exp(x) - 1 / 3.0


def central_differences(f, x, h=1e-6):
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)])


@pytest.fixture
def calls(monkeypatch):
    """(name, whether the impl wrote into its first argument) of every primitive computed."""
    seen = []
    bind = primitive.bind

    def recording(prim, args, params):
        out = bind(prim, args, params)
        if primitive.top_level(args, prim) is None:
            seen.append((prim.name, out is args[0] if args else False))
        return out

    monkeypatch.setattr(primitive, "bind", recording)
    return seen


def test_a_value_used_five_times_gets_one_cotangent_array(calls):
    _, pullback = lf.vjp(many_uses, X)
    calls.clear()  # the backward pass only
    (gradient,) = pullback(np.ones(()))
    np.testing.assert_allclose(gradient, many_uses_gradient(X), rtol=1e-13)
    sums = [written for name, written in calls if name in ("add", "add_inplace", "subtract", "subtract_inplace")]
    # four sums for five contributions (- x / 3.0 subtracted): one new array, three written into it
    assert sum(sums) >= 3, calls
    assert len(sums) - sum(sums) <= 2, calls


def test_per_example_gradients_sum_in_place_and_match_the_loop(calls):
    batch = np.stack([X, X[::-1], 2 * X])
    per_example = lf.vmap(lf.grad(many_uses), in_dims=(0,))(batch)
    np.testing.assert_allclose(per_example, np.stack([many_uses_gradient(row) for row in batch]), rtol=1e-13)
    assert sum(written for name, written in calls if name in ("add_inplace", "subtract_inplace")) >= 3, calls


def test_the_callers_cotangent_is_never_written():
    x = xr.DataArray(X, dims="i")
    cotangent = xr.DataArray(np.linspace(-1.0, 1.0, X.size), dims="i")
    kept = cotangent.values.copy()

    def f(x):
        return x * x + x + np.sin(x) + x  # the cotangent reaches x four times

    _, pullback = lf.vjp(f, x)
    (gradient,) = pullback(cotangent)
    np.testing.assert_array_equal(cotangent.values, kept)
    np.testing.assert_allclose(gradient.values, kept * (2 * X + 2 + np.cos(X)), rtol=1e-13)


def test_a_cotangent_shared_by_two_parents_is_not_written():
    """add's VJP hands the same array to both parents; each sum must leave it alone."""

    def f(x):
        y = x + x          # y's cotangent goes, unchanged, to x twice
        return np.sum(y * y + (y + x) + np.cos(x))

    expected = central_differences(f, X)
    np.testing.assert_allclose(lf.grad(f)(X), expected, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(lf.grad(f)(X), 8 * X + 3 - np.sin(X), rtol=1e-13)


@pytest.mark.parametrize("transform", ["hessian", "grad-of-grad", "jacrev-of-jacfwd"])
def test_second_derivatives_through_in_place_sums(transform):
    def f(x):
        return np.sum(np.sin(x) * x + x * x * x + np.exp(x) * x)

    def second(x):  # the diagonal Hessian of f
        return -np.sin(x) * x + 2 * np.cos(x) + 6 * x + np.exp(x) * (x + 2)

    if transform == "hessian":
        got = np.diagonal(lf.hessian(f)(X))
    elif transform == "grad-of-grad":
        got = np.array([lf.grad(lambda v: lf.grad(f)(v)[k])(X)[k] for k in range(X.size)])
    else:
        got = np.diagonal(lf.jacrev(lf.jacfwd(f))(X))
    np.testing.assert_allclose(got, second(X), rtol=1e-12)


def test_a_forward_tangent_summed_over_arguments_is_written_in_place(calls):
    """The product rule's two terms: the second is added into the first (a new product)."""
    y = np.cos(X)
    out, tangent = lf.jvp(lambda a, b: a * b, (X, y), (np.ones_like(X), 2 * np.ones_like(X)))
    np.testing.assert_allclose(tangent, y + 2 * X, rtol=1e-15)
    assert ("add_inplace", True) in calls, calls


def test_under_jit_the_sums_are_not_in_place_and_replay_the_same():
    batch = np.stack([X, X[::-1]])
    per_example = lf.vmap(lf.grad(many_uses), in_dims=(0,))
    jitted = lf.jit(per_example)
    first = jitted(batch)
    again = jitted(batch + 0.5)  # replayed: a program must not write into what it reads again
    np.testing.assert_array_equal(first, per_example(batch))
    np.testing.assert_array_equal(again, per_example(batch + 0.5))


def test_add_inplace_writes_only_into_an_array_of_its_own_shape_and_dtype():
    x = np.arange(6.0).reshape(2, 3).copy()  # owns its buffer
    assert ew.add_inplace.bind(x, np.ones(3)) is x  # broadcast into x
    np.testing.assert_array_equal(x, np.arange(6.0).reshape(2, 3) + 1)
    small = np.zeros(3)
    bigger = ew.add_inplace.bind(small, np.ones((2, 3)))  # a bigger result: a new array
    assert bigger is not small and bigger.shape == (2, 3) and not small.any()
    ints = np.arange(3)
    assert ew.add_inplace.bind(ints, 0.5) is not ints  # a float result of an integer array
    view = np.arange(6.0)[::2]
    assert ew.add_inplace.bind(view, 1.0) is not view  # a view: someone else's buffer
    read_only = np.broadcast_to(np.zeros(()), (3,))
    np.testing.assert_array_equal(ew.add_inplace.bind(read_only, 1.0), np.ones(3))


# --- NaN-safe products against constants --------------------------------------------------------
def test_a_finite_constant_partial_needs_no_nan_safe_product(calls):
    gradient = lf.grad(lambda x: np.sum(np.sqrt(x) / 3.0))(X)
    np.testing.assert_allclose(gradient, 0.5 / np.sqrt(X) / 3.0, rtol=1e-14)
    names = [name for name, _ in calls]
    # the cotangent of x / 3.0 is a plain product by 1/3; sqrt's partial stays NaN-safe
    assert names.count("safe_multiply") == 1, names
    assert "multiply" in names, names


def test_a_non_finite_constant_partial_keeps_a_zero_cotangent_zero():
    """d/dx (x / 0.0) is inf: where ``where`` does not pick it the cotangent is 0, and
    0 * inf must stay 0 (the NaN-safe product), not NaN; where it is picked, 1 * inf."""
    mask = X > 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        gradient = lf.grad(lambda x: np.sum(np.where(mask, x, x / 0.0)))(X)
    np.testing.assert_array_equal(gradient, np.where(mask, 1.0, np.inf))
