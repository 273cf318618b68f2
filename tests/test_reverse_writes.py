"""Reverse mode through writes that name one target twice (issue item 1).

NumPy's semantics: after ``d[idx] = v`` one write per target survives (NumPy keeps the
last), ``d[idx] += v`` reads each target once and writes it once (it is
``d[idx] = d[idx] + v``), and ``np.add.at`` (the ``index_add`` primitive) adds every
write.  A value whose write was overwritten has no effect on the result, so its
gradient is 0.  The VJP used to hand every element of ``v`` the cotangent of its target,
as if every write survived.

The oracles are independent of the reverse rules: the gradients NumPy's semantics give
by hand, central finite differences of the function run on plain NumPy arrays, and
forward mode (``lf.jacfwd``), which applies the write to the tangents.
"""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func_kernels import indexing as ki

EPS = 1e-6
X = np.array([1.0, 2.0, 3.0])


def central_gradient(f, x, eps=EPS):
    """Central differences of a scalar function of one float array, on plain NumPy."""
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = eps
        out[i] = (float(f(x + step)) - float(f(x - step))) / (2 * eps)
    return out


def batch(seed=0, size=4, shape=(3,)):
    return np.random.default_rng(seed).uniform(0.5, 1.5, size=(size,) + shape)


# --- the reproducers of the issue: exact gradients from NumPy's semantics ---------------------
def write_repeated(x):
    d = x * 1.0
    d[[0, 0]] = x[[1, 2]]  # d[0] = x[2]
    return d[0]


def add_repeated(x):
    d = x * 1.0
    d[[0, 0]] += x[[1, 2]]  # d[0] = x[0] + x[2]: one read, one write
    return d[0]


def put_repeated(x):
    d = x * 1.0
    np.put(d, [0, 0], x[[1, 2]])  # d[0] = x[2]
    return d[0]


def put_along_axis_repeated(x):
    d = x * 1.0
    np.put_along_axis(d, np.array([0, 0]), x[[1, 2]], axis=0)  # d[0] = x[2]
    return d[0]


REPRODUCERS = {
    "write_repeated": (write_repeated, np.array([0.0, 0.0, 1.0])),
    "add_repeated": (add_repeated, np.array([1.0, 0.0, 1.0])),
    "put_repeated": (put_repeated, np.array([0.0, 0.0, 1.0])),
    "put_along_axis_repeated": (put_along_axis_repeated, np.array([0.0, 0.0, 1.0])),
}


def _grad(f, x):
    return lf.grad(f)(x)


def _jacrev(f, x):
    return lf.jacrev(f)(x)


def _jit_grad(f, x):
    compiled = lf.jit(lf.grad(f))
    compiled(x + 0.25)  # the first call records; the second replays the program
    return compiled(x)


MODES = {"grad": _grad, "jacrev": _jacrev, "jit_grad": _jit_grad}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("name", list(REPRODUCERS))
def test_reproducer_gradient_is_numpys(name, mode):
    f, expected = REPRODUCERS[name]
    got = MODES[mode](f, X.copy())
    np.testing.assert_array_equal(np.asarray(got), expected)
    np.testing.assert_allclose(central_gradient(f, X), expected, atol=1e-9)  # the oracle agrees
    np.testing.assert_array_equal(np.asarray(lf.jacfwd(f)(X)), expected)


@pytest.mark.parametrize("name", list(REPRODUCERS))
def test_reproducer_vmap_grad_is_numpys(name):
    f, expected = REPRODUCERS[name]
    xs = batch()
    got = lf.vmap(lf.grad(f), in_dims=0)(xs)
    np.testing.assert_array_equal(np.asarray(got), np.broadcast_to(expected, xs.shape))


# --- the same writes in nonlinear functions: value and destination both differentiated --------
def _nonlinear(write):
    def f(x):
        d = np.sin(x) * x
        write(d, np.exp(0.3 * x[[1, 2, 0]]))
        return (np.cos(d) * np.arange(1.0, d.size + 1)).sum()

    f.__name__ = write.__name__
    return f


def _setitem(d, v):
    d[[0, 0, 2]] = v


def _setitem_negative_alias(d, v):
    d[[-3, 0, 1]] = v  # -3 and 0 are the same target


def _iadd(d, v):
    d[[0, 0, 2]] += v


def _isub(d, v):
    d[[2, 0, 2]] -= v


def _imul(d, v):
    d[[1, 1, 0]] *= v


def _put_clip(d, v):
    np.put(d, [5, 7, 0], v, mode="clip")  # 5 and 7 both clip to 2


def _put_wrap(d, v):
    np.put(d, [4, 1, -2], v, mode="wrap")  # 4 and 1 are the same target


def _put_along_axis(d, v):
    np.put_along_axis(d, np.array([2, 2, 1]), v, axis=0)


NONLINEAR = [_nonlinear(w) for w in (_setitem, _setitem_negative_alias, _iadd, _isub, _imul, _put_clip,
                                      _put_wrap, _put_along_axis)]


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("f", NONLINEAR, ids=lambda f: f.__name__)
def test_nonlinear_write_gradient_matches_differences(f, mode):
    x = np.array([0.3, -0.7, 1.1])
    expected = central_gradient(f, x)
    got = np.asarray(MODES[mode](f, x))
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(got, np.asarray(lf.jacfwd(f)(x)), rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("f", NONLINEAR, ids=lambda f: f.__name__)
def test_nonlinear_write_vmap_grad_matches_loop(f):
    xs = batch(seed=3) - 1.0
    got = np.asarray(lf.vmap(lf.grad(f), in_dims=0)(xs))
    for example, row in zip(xs, got):
        np.testing.assert_allclose(row, central_gradient(f, example), rtol=1e-6, atol=1e-8)


def test_repeated_rows_of_a_matrix():
    """``d[[1, 1], :] = rows`` and ``d[[0, 0], 2] = values``: the block of one index array
    beside a slice, and an index array beside an int."""
    def f(x):
        d = np.tanh(x)
        d[[1, 1], :] = x[[0, 2], :] ** 2
        d[[0, 0], 2] = np.sin(x[1, :2])
        return (d * np.arange(1.0, 10.0).reshape(3, 3)).sum()

    x = np.random.default_rng(5).uniform(-1, 1, size=(3, 3))
    expected = central_gradient(f, x)
    np.testing.assert_allclose(np.asarray(lf.grad(f)(x)), expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(np.asarray(lf.jacrev(f)(x)), expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(np.asarray(lf.jit(lf.grad(f))(x)), expected, rtol=1e-6, atol=1e-8)


def test_repeated_pairs_of_two_index_arrays():
    """Two index arrays broadcast together (``d[[[0], [0]], [1, 1]]``): four writes, one target."""
    def f(x):
        d = x ** 2
        d[np.array([[0], [0]]), np.array([1, 1])] = np.reshape(np.sin(x[2, :2]), (2, 1)) * x[1, :2]
        return (d ** 3).sum()

    x = np.random.default_rng(6).uniform(-1, 1, size=(3, 2))
    np.testing.assert_allclose(np.asarray(lf.grad(f)(x)), central_gradient(f, x), rtol=1e-6, atol=1e-8)


def test_repeated_index_under_hessian():
    """Second order: the mask of surviving writes is a constant of the backward pass."""
    def f(x):
        d = x ** 2
        d[[0, 0, 1]] = x[[1, 2, 2]] ** 3
        return (d * d).sum()

    x = np.array([0.4, -0.9, 1.3])
    h = np.asarray(lf.hessian(f)(x))
    # d = [x2^3, x2^3, x2^2]: f = 2 x2^6 + x2^4
    expected = np.zeros((3, 3))
    expected[2, 2] = 60 * x[2] ** 4 + 12 * x[2] ** 2
    np.testing.assert_allclose(h, expected, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(lf.jacfwd(lf.jacrev(f))(x)), expected, rtol=1e-12)


# --- index arrays the rule cannot read: traced under jit, mapped under vmap ----------------------
def test_jit_with_the_index_as_an_argument_records_the_mask():
    """Under lf.jit the index is a recorded value: the replay with another index (other
    targets repeated) must not reuse the first call's mask."""
    def f(x, index):
        d = x * 1.0
        d[index] = x[[1, 2]] ** 2
        return (d * np.array([1.0, 10.0, 100.0])).sum()

    compiled = lf.jit(lf.grad(f))
    x = np.array([0.5, 1.5, 2.5])
    for index in (np.array([0, 0]), np.array([1, 2]), np.array([2, 2]), np.array([1, 1])):
        expected = central_gradient(lambda v: f(v, index), x)
        np.testing.assert_allclose(np.asarray(compiled(x, index)), expected, rtol=1e-6, atol=1e-8)


def test_vmap_grad_with_a_mapped_index():
    def f(x, index):
        d = np.sin(x)
        d[index] = x[[1, 2]] ** 2
        return (d ** 2 * np.array([1.0, 2.0, 3.0])).sum()

    xs = batch(seed=7)
    indices = np.array([[0, 0], [1, 2], [2, 2], [1, 1]])
    got = np.asarray(lf.vmap(lf.grad(f), in_dims=(0, 0))(xs, indices))
    for x, index, row in zip(xs, indices, got):
        np.testing.assert_allclose(row, central_gradient(lambda v: f(v, index), x), rtol=1e-6, atol=1e-8)


def test_jit_vmap_grad_with_a_mapped_index():
    def f(x, index):
        d = x * 2.0
        d[index] += np.exp(x[[0, 1]])
        return (d ** 2).sum()

    compiled = lf.jit(lf.vmap(lf.grad(f), in_dims=(0, 0)))
    xs = batch(seed=8)
    first = np.array([[0, 0], [1, 2], [2, 2], [1, 1]])
    second = np.array([[2, 2], [0, 0], [0, 1], [2, 1]])
    for indices in (first, second):
        got = np.asarray(compiled(xs, indices))
        for x, index, row in zip(xs, indices, got):
            np.testing.assert_allclose(row, central_gradient(lambda v: f(v, index), x), rtol=1e-6, atol=1e-8)


# --- NaN-safety: an overwritten write gets exactly 0 ---------------------------------------------
def test_overwritten_value_gets_zero_even_where_the_cotangent_is_nan():
    def f(x, v):
        d = x * 1.0
        d[[0, 0, 1]] = v
        return d

    _, pull = lf.vjp(f, np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0]))
    x_bar, v_bar = pull(np.array([np.nan, np.inf, 1.0]))
    np.testing.assert_array_equal(x_bar, [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(v_bar, [0.0, np.nan, np.inf])  # the first write was overwritten


def test_broadcast_value_counts_once_per_surviving_target():
    """``d[[0, 0, 2]] = s`` with a scalar ``s``: two targets keep it, so ds = 2 (not 3)."""
    def f(s):
        d = np.zeros(3) + s * 0.0
        d[[0, 0, 2]] = s ** 2
        return d.sum()

    s = np.float64(1.5)
    np.testing.assert_allclose(float(lf.grad(f)(s)), 2 * 2 * s, rtol=1e-15)
    np.testing.assert_allclose(float(lf.jacfwd(f)(s)), 2 * 2 * s, rtol=1e-15)


# --- DataArrays ---------------------------------------------------------------------------------
def labeled(values=X):
    return xr.DataArray(np.array(values, dtype=float), dims="t", coords={"t": [10, 20, 30]})


def isel_dict_write(x):
    d = x * 1.0
    d[dict(t=[0, 0])] = x.isel(t=[1, 2]).data  # d[0] = x[2]
    return d.isel(t=0)


def loc_write(x):
    d = x * 1.0
    d.loc[dict(t=[10, 10])] = x.isel(t=[1, 2]).data  # d[0] = x[2]
    return d.sel(t=10)


def isel_dict_add(x):
    d = x * 1.0
    d[{"t": [0, 0]}] += x.isel(t=[1, 2]).data  # d[0] = x[0] + x[2]
    return d.isel(t=0)


LABELED = {
    "isel_dict_write": (isel_dict_write, np.array([0.0, 0.0, 1.0])),
    "loc_write": (loc_write, np.array([0.0, 0.0, 1.0])),
    "isel_dict_add": (isel_dict_add, np.array([1.0, 0.0, 1.0])),
}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("name", list(LABELED))
def test_labeled_repeated_write(name, mode):
    f, expected = LABELED[name]
    got = MODES[mode](f, labeled())
    assert isinstance(got, xr.DataArray)
    np.testing.assert_array_equal(got.values, expected)
    np.testing.assert_array_equal(lf.jacfwd(f)(labeled()).values, expected)
    np.testing.assert_allclose(central_gradient(lambda v: f(labeled(v)).values, X), expected, atol=1e-9)


@pytest.mark.parametrize("name", list(LABELED))
def test_labeled_repeated_write_vmap_grad(name):
    f, expected = LABELED[name]
    xs = xr.DataArray(batch(seed=2), dims=("s", "t"), coords={"t": [10, 20, 30]})
    got = lf.vmap(lf.grad(f), dim="s")(xs)
    np.testing.assert_array_equal(got.transpose("s", "t").values, np.broadcast_to(expected, xs.shape))


# --- np.add.at's primitive still adds every write -------------------------------------------------
def add_at(x):
    """``np.add.at(d, [0, 0], x[[1, 2]])`` as its primitive, ``index_add``: d[0] = x0 + x1 + x2."""
    d = x * 1.0
    d = ki.index_add.bind(d, x[[1, 2]] ** 2, np.array([0, 0]), template=(ki.Slot(0),))
    return d[0] * x[0]


@pytest.mark.parametrize("mode", list(MODES))
def test_index_add_accumulates_repeated_targets(mode):
    x = np.array([0.5, -1.5, 2.0])
    expected = np.array([2 * x[0] + x[1] ** 2 + x[2] ** 2, 2 * x[0] * x[1], 2 * x[0] * x[2]])
    np.testing.assert_allclose(np.asarray(MODES[mode](add_at, x)), expected, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(lf.jacfwd(add_at)(x)), expected, rtol=1e-14)


def test_index_add_accumulates_under_vmap_grad():
    xs = batch(seed=4)
    got = np.asarray(lf.vmap(lf.grad(add_at), in_dims=0)(xs))
    for x, row in zip(xs, got):
        np.testing.assert_allclose(row, central_gradient(add_at, x), rtol=1e-6, atol=1e-8)


def test_reading_a_target_twice_adds_its_cotangents():
    """The transpose of ``x[[0, 0]]`` (a scatter-add) still adds up."""
    def f(x):
        return (x[[0, 0, 2]] ** 2).sum()

    x = np.array([1.5, 2.0, -0.5])
    np.testing.assert_array_equal(np.asarray(lf.grad(f)(x)), [4 * x[0], 0.0, 2 * x[2]])


# --- the usual case costs nothing -----------------------------------------------------------------
class _CountingEqual:
    def __init__(self, prim):
        self.prim = prim
        self.calls = 0

    def bind(self, *args, **params):
        self.calls += 1
        return self.prim.bind(*args, **params)


@pytest.mark.parametrize("index, expected_calls", [
    (np.array([2, 0, 1]), 0),          # a permutation: no target twice, no mask
    (np.array([-1, 0]), 0),            # negative and positive, different targets
    (np.arange(3)[::-1], 0),           # a reversed (strided) view
    (np.array([-3, 0]), 1),            # the same target spelled twice: the mask is made
    (np.array([1, 1]), 1),
])
def test_mask_is_made_only_for_repeated_targets(index, expected_calls, monkeypatch):
    counter = _CountingEqual(ki.equal)
    monkeypatch.setattr(ki, "equal", counter)

    def f(x):
        d = x * 1.0
        d[index] = x[: index.size] ** 2
        return (d * np.array([1.0, 2.0, 3.0])).sum()

    x = np.array([0.5, 1.5, -2.0])
    got = np.asarray(lf.grad(f)(x))
    assert counter.calls == expected_calls
    np.testing.assert_allclose(got, central_gradient(f, x), rtol=1e-6, atol=1e-8)


# --- the order of repeated writes does not follow memory layouts -------------------------------
def test_fortran_ordered_index_and_value_keep_the_last_write_in_c_order():
    """NumPy walks a write whose index and value are both Fortran-ordered by columns (its
    documentation leaves the order of repeated writes unspecified), and its tangent, laid out
    otherwise, would keep another write than the primal.  Traced, the write, its tangent and
    the ids of the reverse rule all keep the last write in C order."""
    index = np.asfortranarray(np.array([[0, 1], [1, 0]]))  # target 1 from (0, 1) and (1, 0)

    def f(x, w):
        d = np.sin(x)
        d[index] = np.exp(w).T  # a Fortran-ordered value
        return d * np.array([1.0, 3.0])

    def oracle(x, w):
        d = np.sin(x)
        value = np.exp(w).T
        for position in np.ndindex(index.shape):  # C order, the last write stays
            d[index[position]] = value[position]
        return d * np.array([1.0, 3.0])

    x, w = np.array([0.3, -0.4]), np.array([[0.1, 0.2], [0.3, 0.4]])
    tx, tw = np.array([0.7, -1.1]), np.array([[0.5, -0.2], [1.3, 0.9]])
    out, tangent = lf.jvp(f, (x, w), (tx, tw))
    np.testing.assert_array_equal(np.asarray(out), oracle(x, w))
    numeric = (oracle(x + EPS * tx, w + EPS * tw) - oracle(x - EPS * tx, w - EPS * tw)) / (2 * EPS)
    np.testing.assert_allclose(np.asarray(tangent), numeric, rtol=1e-6, atol=1e-9)
    for i in range(2):
        grads = lf.grad(lambda x, w: f(x, w)[i], argnums=(0, 1))(x, w)
        np.testing.assert_allclose(np.asarray(grads[0]), central_gradient(lambda a: oracle(a, w)[i], x),
                                   rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(np.asarray(grads[1]), central_gradient(lambda a: oracle(x, a)[i], w),
                                   rtol=1e-6, atol=1e-9)


def test_a_boolean_scalar_in_the_key():
    """``d[np.True_, [0, 0]] = v``: a 0-d boolean index (a new axis of length 1) beside a
    repeated index array; the reverse rule then scatters ids over the whole array, and the
    batch rule reads the boolean as NumPy does."""
    def f(x):
        d = np.cos(x)
        d[np.True_, [0, 0]] = x[[1, 2]] ** 2
        return (d ** 2 * np.array([1.0, 2.0, 3.0])).sum()

    x = np.array([0.3, -0.8, 1.2])
    expected = central_gradient(f, x)
    for got in (lf.grad(f)(x), lf.jacrev(f)(x), lf.jacfwd(f)(x), lf.jit(lf.grad(f))(x)):
        np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-6, atol=1e-9)
    xs = batch(seed=9)
    got = np.asarray(lf.vmap(lf.grad(f), in_dims=0)(xs))
    for example, row in zip(xs, got):
        np.testing.assert_allclose(row, central_gradient(f, example), rtol=1e-6, atol=1e-9)
