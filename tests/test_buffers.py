"""Kept memory for large eager results (``kernels/buffers.py``) and the one-pass product-sum
of a reverse pass (``elementwise.multiply_sum``); issue 11 (speed).

- A block is reused only when nothing refers to it: a result a caller keeps, or a view of
  it, is never written again, under threads too.
- Reuse is real: the same shape computed again lands in the block a dead result had.
- A cotangent summed down to a broadcast operand (a per-example parameter times a field)
  is one einsum: equal to the per-example loop bit for bit, to finite differences and to
  the analytic derivative; NaN-safe as the product it replaces (a zero cotangent against
  an infinite partial gives 0), and differentiable again.
- Copies that glibc's memmove makes slow (a destination 1-15 bytes past its source modulo
  4 KiB: a roll by one element of blocks at one page offset) copy every bit, through the
  ufunc path, and only there; rolls built on them equal ``np.roll``.
"""
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import xarray as xr
from thread_helpers import run_interleaved

import labeled_func as lf
from labeled_func_kernels import buffers
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import shape as ks

LARGE = (400, 400)  # 1.25 MiB of float64, above buffers.MIN_BYTES


@pytest.fixture
def kept_limit():
    """Blocks kept up to 64 MiB during the test (whatever the environment says)."""
    before = buffers.limit()
    buffers.set_limit(64 * 2**20)
    yield
    buffers.set_limit(before)


def _block(array):
    return array.base if array.base is not None else array


@pytest.mark.parametrize("shape", [LARGE, (2000, 2000)])  # 1.25 MiB; 30.5 MiB, which glibc maps afresh
def test_a_dead_result_gives_its_block_to_the_next_one(kept_limit, shape):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=shape), rng.normal(size=shape)
    first = ew.multiply.bind(x, y)
    assert first.base is not None and buffers.owns(first)  # a whole kept block
    block = id(_block(first))
    del first
    second = ew.add.bind(x, y)
    assert id(_block(second)) == block
    np.testing.assert_array_equal(second, x + y)


def test_kept_results_and_their_views_are_never_written_again(kept_limit):
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=LARGE), rng.normal(size=LARGE)
    kept = ew.multiply.bind(x, y)
    view = ew.subtract.bind(x, y)[::3, 1:]  # only a view of the second result survives
    assert kept.base is not None and view.base is not None  # both in kept blocks
    expected_kept, expected_view = x * y, (x - y)[::3, 1:]
    for k in range(20):  # many results of the same size come and go
        scratch = ew.divide.bind(ew.add.bind(x, float(k)), 2.0)
        rolled = ks.roll.bind(scratch, shift=(k,), axis=(1,))
        del scratch, rolled
    np.testing.assert_array_equal(kept, expected_kept)
    np.testing.assert_array_equal(view, expected_view)


def test_results_keep_the_layout_numpy_gives_them(kept_limit):
    rng = np.random.default_rng(5)
    for x in (np.asfortranarray(rng.normal(size=LARGE)), rng.normal(size=LARGE).T, rng.normal(size=LARGE)):
        for got, expected in ((ew.multiply.bind(x, 2.0), np.multiply(x, 2.0)), (ew.add.bind(x, x), x + x),
                              (ew.sin.bind(x), np.sin(x))):
            np.testing.assert_array_equal(got, expected)
            assert got.strides == expected.strides


def test_a_view_of_a_kept_block_is_not_written_in_place(kept_limit):
    x = np.ones(LARGE)
    result = ew.add.bind(x, 1.0)
    row = result[1:]  # a view: not the whole of its memory
    assert buffers.owns(result) and not buffers.owns(row)
    summed = ew.add_inplace.bind(row, 1.0)
    assert not np.shares_memory(summed, result)
    np.testing.assert_array_equal(result, 2.0)
    np.testing.assert_array_equal(summed, 3.0)


def test_a_user_array_is_never_written_in_place():
    user = np.ones(LARGE)
    view = user[:, 1:]
    assert buffers.owns(user) and not buffers.owns(view)
    ew.add_inplace.bind(view, 1.0)
    np.testing.assert_array_equal(user, 1.0)


def test_threads_never_share_a_block(kept_limit, monkeypatch):
    """8 threads compute products of their own values with a 1 us switch interval, and each
    gives the others the processor between finding a free block and making its view (the
    reference it holds meanwhile keeps the block busy for them); the limit holds 4 blocks,
    so blocks are let go all the time. Each thread checks every result it kept against
    NumPy after the others ran."""
    errors = []
    barrier = threading.Barrier(8)
    take = buffers._take

    def take_then_yield(nbytes):
        block = take(nbytes)
        time.sleep(0)
        return block

    monkeypatch.setattr(buffers, "_take", take_then_yield)
    buffers.set_limit(4 * np.prod(LARGE) * 8)

    def work(seed):
        rng = np.random.default_rng(seed)
        x, y = rng.normal(size=LARGE), rng.normal(size=LARGE)
        barrier.wait()
        kept = []
        for k in range(15):
            kept.append(ew.multiply.bind(ew.add.bind(x, float(k)), y))
            if k % 3 == 0:
                kept.pop(0)
        for value in kept:
            k = int(round(np.median((value / y - x)[np.abs(y) > 0.5])))
            if not np.array_equal(value, (x + float(k)) * y):
                errors.append(seed)

    run_interleaved(work, range(8))
    assert errors == []


def test_limit_zero_keeps_nothing_and_a_negative_limit_is_refused(kept_limit):
    buffers.set_limit(0)
    x = np.ones(LARGE)
    result = ew.multiply.bind(x, 2.0)
    assert result.base is None
    with pytest.raises(ValueError, match="-1"):
        buffers.set_limit(-1)


def test_without_a_calibrated_reference_count_nothing_is_kept(kept_limit, monkeypatch):
    monkeypatch.setattr(buffers, "_FREE", None)  # as on a free-threaded CPython
    buffers.set_limit(64 * 2**20)
    assert buffers.limit() == 0
    assert ew.multiply.bind(np.ones(LARGE), 2.0).base is None


def test_the_environment_variable_sets_the_limit():
    code = "from labeled_func_kernels import buffers; print(buffers.limit())"
    env = {**os.environ, "LABELED_FUNC_BUFFER_MIB": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"


@pytest.mark.parametrize("order", ["C", "F"])
def test_a_large_roll_has_numpys_values_and_layout(kept_limit, order):
    """A C-ordered array rolls into kept memory; another layout stays np.roll's (its
    result keeps the input's order, and later sums add in that order)."""
    x = np.asarray(np.random.default_rng(4).normal(size=LARGE), order=order)
    for shift, axis in ((3, 1), (-5, 0), (0, 1)):
        got, expected = ks.roll.bind(x, shift=(shift,), axis=(axis,)), np.roll(x, shift, axis=axis)
        np.testing.assert_array_equal(got, expected)
        assert got.flags.c_contiguous == expected.flags.c_contiguous
        assert got.flags.f_contiguous == expected.flags.f_contiguous
        assert (got.base is not None) == (order == "C")  # kept memory for the C-ordered one


def test_a_large_roll_of_python_objects_is_numpys_own(kept_limit):
    x = np.empty(LARGE[0] * LARGE[1] // 2, dtype=object)
    x[:] = [str(k) for k in range(x.size)]
    rolled = ks.roll.bind(x, shift=(3,), axis=(0,))
    assert list(rolled[:5]) == list(np.roll(x, 3)[:5])


def test_results_below_the_threshold_are_numpys_own():
    small = ew.multiply.bind(np.ones(100), 2.0)
    assert small.base is None


# --- the product summed down to a broadcast operand ---------------------------------------------
FIELD = xr.DataArray(np.linspace(0.2, 1.4, 64), dims="cell")


def stepped(p):
    """A per-example scalar times a field, in a few explicit steps (the advection pattern)."""
    u = FIELD.astype(p.rate.dtype)
    for _ in range(3):
        u = u + 0.1 * (-p.rate * (u - u.roll(cell=1)) - p.decay * u)
    return (u ** 2).mean("cell")


def _samples(n, seed=3, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return xr.Dataset({"rate": ("sample", rng.uniform(0.5, 1.5, n).astype(dtype)),
                       "decay": ("sample", rng.uniform(0, 1, n).astype(dtype))})


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_per_sample_gradients_equal_the_per_example_loop_bit_for_bit(dtype):
    samples = _samples(9, dtype=dtype)
    batched = lf.vmap(lf.grad(stepped), dim="sample")(samples)
    reference = lf.vmap(lf.grad(stepped), dim="sample")(samples.astype(np.float64))
    for k in range(samples.sizes["sample"]):
        one = lf.grad(stepped)(samples.isel(sample=k))
        for name in ("rate", "decay"):
            assert batched[name].dtype == dtype
            assert batched[name].values[k].tobytes() == one[name].values.tobytes()
    for name in ("rate", "decay"):  # float32 sums: to float32's precision of the float64 ones
        np.testing.assert_allclose(batched[name].values, reference[name].values,
                                   rtol=50 * np.finfo(dtype).eps, atol=50 * np.finfo(dtype).eps)


def test_per_sample_gradients_match_central_differences():
    samples = _samples(5)
    got = lf.vmap(lf.grad(stepped), dim="sample")(samples)
    for name in ("rate", "decay"):
        h = 1e-6
        plus = lf.vmap(stepped, dim="sample")(samples.assign({name: samples[name] + h}))
        minus = lf.vmap(stepped, dim="sample")(samples.assign({name: samples[name] - h}))
        np.testing.assert_allclose(got[name].values, ((plus - minus) / (2 * h)).values, rtol=1e-7)


def test_the_one_pass_sum_is_taken_and_skips_the_product(monkeypatch):
    calls = []
    impl = ew.multiply_sum.impl
    monkeypatch.setattr(ew.multiply_sum, "impl", lambda *a, **k: calls.append(k) or impl(*a, **k))
    c = xr.DataArray(np.array([2.0, 3.0]), dims="sample")
    got = lf.vmap(lf.grad(lambda c: (c * FIELD).sum()), dim="sample")(c)
    assert calls  # the rule's sum of products ran as multiply_sum
    np.testing.assert_allclose(got.values, np.full(2, FIELD.sum().item()), rtol=1e-15)


def test_a_zero_cotangent_against_an_infinite_partial_gives_zero():
    field = xr.DataArray(np.array([2.0, 5.0, np.inf, 7.0]), dims="cell")

    def first_cell(c):
        return (c * field).isel(cell=0)  # the cotangent is 0 where the field is infinite

    c = xr.DataArray(np.array([1.0, 4.0]), dims="sample")
    got = lf.vmap(lf.grad(first_cell), dim="sample")(c)
    np.testing.assert_array_equal(got.values, [2.0, 2.0])
    one = lf.grad(first_cell)(xr.DataArray(1.0))
    assert float(one) == 2.0


def test_an_infinite_partial_met_by_a_cotangent_stays_infinite():
    field = xr.DataArray(np.array([2.0, np.inf]), dims="cell")
    got = lf.grad(lambda c: (c * field).sum())(xr.DataArray(1.0))
    assert np.isinf(float(got))


def test_second_derivatives_through_the_sum_of_products():
    """d2/dc dx of sum(c * x**2) = 2 x, and d2/dc2 = 0, against the analytic values."""
    x = xr.DataArray(np.linspace(-1.0, 1.0, 5), dims="cell")

    def f(c, x):
        return (c * x ** 2).sum()

    c = xr.DataArray(1.5)
    mixed = lf.jacfwd(lf.grad(f, argnums=0), argnums=1)(c, x)
    np.testing.assert_allclose(mixed.values, 2 * x.values, rtol=1e-15)
    second = lf.jacrev(lf.grad(f, argnums=0), argnums=0)(c, x)
    assert float(second) == 0.0


def test_jit_gives_the_same_gradients():
    samples = _samples(6)
    plain = lf.vmap(lf.grad(stepped), dim="sample")
    jitted = lf.jit(plain)
    for name in ("rate", "decay"):
        np.testing.assert_allclose(jitted(samples)[name].values, plain(samples)[name].values, rtol=1e-13)


def views_at(distance, dtype, size):
    """A source and a destination array of ``size`` items whose starts are ``distance``
    bytes apart modulo 4 KiB (both in one pool, each aligned to the item)."""
    dtype = np.dtype(dtype)
    pool = np.zeros(size * dtype.itemsize * 2 + 3 * 4096, dtype=np.uint8)
    start = (-pool.ctypes.data) % 4096  # the source at a page boundary
    source = pool[start:start + size * dtype.itemsize].view(dtype)
    offset = start + size * dtype.itemsize
    offset += (start + distance - offset) % 4096  # same page offset as the source, plus distance
    destination = pool[offset:offset + size * dtype.itemsize].view(dtype)
    assert (destination.ctypes.data - source.ctypes.data) % 4096 == distance % 4096
    return source, destination


SPECIAL_BITS = {  # values whose bits a copy through arithmetic could change
    np.float64: [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 5e-324, 1.5],
    np.float32: [0.0, -0.0, np.inf, np.nan, 1e-45, 1.5],
    np.complex128: [complex(-0.0, np.nan), complex(np.inf, -0.0), 1 + 2j],
    np.int16: [-1, 0, 32767, -32768],
    np.bool_: [True, False],
}


@pytest.mark.parametrize("dtype", list(SPECIAL_BITS), ids=lambda d: np.dtype(d).name)
def test_copy_into_copies_every_bit_at_every_distance(dtype, monkeypatch):
    ufunc_copies = []
    positive = np.positive
    monkeypatch.setattr(np, "positive", lambda *a, **k: ufunc_copies.append(1) or positive(*a, **k))
    itemsize = np.dtype(dtype).itemsize
    rng = np.random.default_rng(0)
    for distance in range(0, 33, min(itemsize, 8)):
        source, destination = views_at(distance, dtype, 20_000)
        values = np.array(SPECIAL_BITS[dtype], dtype=dtype)
        source[...] = values[rng.integers(0, values.size, source.size)]
        if np.dtype(dtype).kind == "f":  # a NaN with a payload of its own
            source.view(f"u{itemsize}")[3] = np.array(np.nan, dtype).view(f"u{itemsize}") | 3
        before = len(ufunc_copies)
        buffers.copy_into(destination, source)
        np.testing.assert_array_equal(destination.view(np.uint8), source.view(np.uint8))
        slow_for_memmove = 0 < distance % 4096 < 16
        assert len(ufunc_copies) - before == (1 if slow_for_memmove else 0), distance


@pytest.mark.parametrize("shift", [1, -1, 2, 63, -63])
@pytest.mark.parametrize("shape, axis", [((2000, 64), 1), ((400, 400), 1), ((50, 40, 16), 1), ((4000,), 0)])
def test_rolls_of_blocks_at_one_page_offset_equal_numpys(shape, axis, shift):
    """Kept blocks (and NumPy's large arrays) start at one offset in their pages: a roll by
    one element is then the copy memmove makes slow; the result is np.roll's, bit for bit."""
    size = int(np.prod(shape))
    source, destination = views_at(0, np.float64, size)
    source[...] = np.random.default_rng(1).normal(size=size)
    source[::97] = -0.0
    x, out = source.reshape(shape), destination.reshape(shape)
    ks.roll_copy(x, shift, axis, out)
    np.testing.assert_array_equal(out.view(np.uint8), np.roll(x, shift, axis).view(np.uint8))

