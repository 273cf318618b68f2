"""In-place updates through NumPy views under every transform.

NumPy's basic indexing (ints, slices, None, Ellipsis; also through xarray's isel, sel
and []), transpose and (where NumPy can) reshape return views: an in-place update of a
view writes into its base, and a view sees later writes into its base.  Under the AD
transforms the values are functional, so the tracers keep that in step themselves.

The oracles are independent of the transforms: the function run on plain NumPy-backed
DataArrays (NumPy's own write-through semantics), central finite differences of that,
and loops over examples for vmap.
"""
from __future__ import annotations

import operator

import numpy as np
import pytest
import xarray as xr

import labeled_func_kernels.primitive
import labeled_func as lf

EPS = 1e-6


def make_x(seed=0):
    rng = np.random.default_rng(seed)
    values = rng.uniform(0.5, 1.5, size=(2, 3))
    return xr.DataArray(values, dims=("a", "b"), coords={"b": [10, 20, 30]})


def make_batch(seed=1, size=3):
    rng = np.random.default_rng(seed)
    values = rng.uniform(0.5, 1.5, size=(size, 2, 3))
    return xr.DataArray(values, dims=("s", "a", "b"), coords={"b": [10, 20, 30]})


# --- the cases: each writes through a view (or deliberately through a copy) -------------------
def isel_slice(x):
    v = x.isel(b=slice(0, 2))
    v *= 2.0 * x.isel(b=slice(1, 3)).data
    return (x**2).sum()


def sel_slice(x):
    v = x.sel(b=slice(20, 30))
    v += x.isel(b=slice(0, 2)).data ** 2
    return (x**3).sum()


def getitem_slice(x):
    v = x[:, 1:]
    v -= 0.5 * x[:, :2].data
    return (np.sin(x) * x).sum()


def strided_slice(x):
    v = x[:, ::2]
    v[...] = 3.0 * v * v
    return (x * x.sum()).sum()


def isel_int_row(x):
    v = x.isel(a=0)
    v **= 2
    return (x**2).sum() + x.isel(a=1).prod()


def zero_d_view(x):
    v = x[1, 2]  # xarray indexes with (1, 2, ...): a 0-d view
    v *= x[0, 0].data
    return (x**2).sum()


def data_int_row(x):
    row = x.data[1]
    row[...] = row**2 + 1.0
    return (x**3).sum()


def ellipsis_and_none(x):
    v = x.data[..., 1:]
    v *= 1.5
    w = x.data[None, 0]  # shape (1, 3), a view
    w += 0.25 * w**2
    return (x**2).sum()


def transpose_method(x):
    v = x.transpose()
    v *= x.T.data
    return (np.sin(x) * x).sum()


def transpose_function(x):
    t = np.transpose(x.data)
    t[0] = t[0] * t[1]
    return (x**2).sum()


def swapaxes(x):
    t = x.data.swapaxes(0, 1)
    t[2] *= 4.0
    return (x**2).sum() + x.data[:, 2].sum() ** 2


def reshape_view(x):
    r = x.data.reshape(3, 2)
    r[0] *= 5.0
    return (x**2).sum()


def ravel_view(x):
    r = x.data.ravel()
    r[1:4] = r[1:4] * r[0:3]
    return (x**2).sum()


def reshape_copy(x):
    r = x.data.T.reshape(-1)  # not contiguous: NumPy copies, x is not written
    r *= 10.0
    return (x**2).sum() + (r**2).sum()


def flatten_copies(x):
    r = x.data.flatten()
    r *= 10.0
    return (x**2).sum() + r.sum()


def expand_squeeze(x):
    e = x.expand_dims("n")
    e *= 2.0
    s = np.squeeze(x.data[0:1])
    s += s**2
    return (x**2).sum()


def setitem_into_view(x):
    v = x[:, 1:]
    v[0] = x[1, 1:].data * 3.0
    return (x**2).sum()


def out_argument(x):
    v = x.data[:, 0]
    np.multiply(v, x.data[:, 1], out=v)
    return (x**2).sum()


def fill_view(x):
    v = x.data[0, 1:]
    v.fill(2.0)
    return (x**2 * x.data[1, 0]).sum()


def view_of_view(x):
    v = x[:, 1:]
    w = v.T
    w[0] = w[0] * 7.0
    return (x**2).sum() + (v**2).sum()


def stale_view(x):
    v = x[0:1]
    x *= 2.0  # v sees this write, as in NumPy
    return (v**2).sum() + x.sum()


def stale_view_after_view_write(x):
    v = x[:, 0:2]
    w = x[:, 1:3]  # overlaps v
    v *= 3.0
    return (w**2).sum() + (x**2).sum()


def stale_view_returned(x):
    v = x[0, 1]
    x *= x
    return v


def common_pattern(x):
    y = x * 1.0
    y[0:1] *= 3.0  # Python: tmp = y[0:1]; tmp *= 3; y[0:1] = tmp
    return (y**2).sum()


def scalar_is_a_copy(x):
    s = x.data[0, 0]  # a NumPy scalar: writing into it leaves x alone
    s += 100.0
    return (x**2).sum() + s


def fresh_buffer(x):
    buf = xr.zeros_like(x)
    buf[0] = x[1] * 2.0
    row = buf[1]  # a view of a buffer that does not depend on x yet
    row += x[0] ** 2
    return (buf**2).sum()


def numpy_buffer_view(x):
    buf = np.zeros_like(x.data)
    part = buf[:, 1:]
    part[...] = x.data[:, :2] ** 2
    return (buf * x.data).sum()


CASES = [isel_slice, sel_slice, getitem_slice, strided_slice, isel_int_row, zero_d_view,
         data_int_row, ellipsis_and_none, transpose_method, transpose_function, swapaxes,
         reshape_view, ravel_view, reshape_copy, flatten_copies, expand_squeeze,
         setitem_into_view, out_argument, fill_view, view_of_view, stale_view,
         stale_view_after_view_write, stale_view_returned, common_pattern,
         scalar_is_a_copy, fresh_buffer, numpy_buffer_view]
HESSIAN_CASES = [isel_slice, strided_slice, zero_d_view, transpose_function, reshape_view,
                 view_of_view, stale_view, stale_view_returned, fresh_buffer]


# --- oracles ------------------------------------------------------------------------------------
def plain(f, x):
    """f on a copy of x, without transforms: NumPy's semantics."""
    return float(f(x.copy(deep=True)))


def fd_gradient(f, x, eps=EPS):
    grad = np.zeros(x.shape)
    for index in np.ndindex(x.shape):
        plus, minus = x.copy(deep=True), x.copy(deep=True)
        plus.values[index] += eps
        minus.values[index] -= eps
        grad[index] = (float(f(plus)) - float(f(minus))) / (2 * eps)
    return grad


def fd_hessian(f, x, eps=1e-4):
    n = x.size
    flat = x.values.reshape(-1)
    out = np.zeros((n, n))

    def at(delta):
        y = x.copy(deep=True)
        y.values[...] = (flat + delta).reshape(x.shape)
        return float(f(y))

    for i in range(n):
        for j in range(n):
            ei, ej = np.eye(n)[i] * eps, np.eye(n)[j] * eps
            out[i, j] = (at(ei + ej) - at(ei - ej) - at(-ei + ej) + at(-ei - ej)) / (4 * eps**2)
    return out.reshape(x.shape + x.shape)


def close(actual, expected, rtol=1e-5, atol=1e-5):
    actual = getattr(actual, "values", actual)
    np.testing.assert_allclose(np.asarray(actual, dtype=float), expected, rtol=rtol, atol=atol)


def test_the_cases_really_write_through_in_numpy():
    """Guard on the oracle: without transforms, the cases change x through a view,
    except those that write into a copy or a buffer."""
    untouched = {reshape_copy, flatten_copies, scalar_is_a_copy, common_pattern, fresh_buffer,
                 numpy_buffer_view}
    for f in CASES:
        x = make_x()
        before = x.values.copy()
        f(x)
        assert np.array_equal(x.values, before) == (f in untouched), f.__name__


# --- every transform against the oracles ------------------------------------------------------------
@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
def test_grad_and_value(f):
    x = make_x()
    gradient, value = lf.grad_and_value(f)(x)
    close(float(value), plain(f, x), rtol=1e-12, atol=1e-12)
    close(gradient.values, fd_gradient(f, x))
    assert gradient.dims == x.dims
    np.testing.assert_array_equal(x.values, make_x().values)  # the caller's array is untouched


@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
def test_vjp(f):
    x = make_x()
    out, pull = lf.vjp(f, x)
    close(float(out), plain(f, x), rtol=1e-12, atol=1e-12)
    (cotangent,) = pull(xr.DataArray(2.0))
    close(cotangent.values, 2.0 * fd_gradient(f, x))


@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
def test_jvp(f):
    x = make_x()
    direction = xr.DataArray(np.random.default_rng(5).normal(size=x.shape), dims=x.dims, coords=x.coords)
    out, tangent = lf.jvp(f, (x,), (direction,))
    close(float(out), plain(f, x), rtol=1e-12, atol=1e-12)
    plus = plain(f, x + EPS * direction)
    minus = plain(f, x - EPS * direction)
    close(float(tangent), (plus - minus) / (2 * EPS))


@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
def test_jacfwd_and_jacrev(f):
    x = make_x()
    expected = fd_gradient(f, x)
    close(lf.jacfwd(f)(x).values, expected)
    close(lf.jacrev(f)(x).values, expected)


@pytest.mark.parametrize("f", HESSIAN_CASES, ids=lambda f: f.__name__)
def test_hessian(f):
    x = make_x()
    close(lf.hessian(f)(x).values, fd_hessian(f, x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
def test_vmap_of_grad_matches_loop(f):
    batch = make_batch()
    got = lf.vmap(lf.grad(f), dim="s")(batch)
    for k in range(batch.sizes["s"]):
        close(got.isel(s=k).transpose(*make_x().dims).values, fd_gradient(f, batch.isel(s=k, drop=True)))


@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
def test_grad_of_vmap_matches_finite_differences(f):
    batch = make_batch()

    def total(b):
        return lf.vmap(f, dim="s")(b).sum()

    def looped(b):
        return sum(float(f(b.isel(s=k, drop=True).copy(deep=True))) for k in range(b.sizes["s"]))

    got = lf.grad(total)(batch)
    close(got.values, fd_gradient(looped, batch))


@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
def test_vmap_matches_loop(f):
    batch = make_batch()
    got = lf.vmap(f, dim="s")(batch.copy(deep=True))
    expected = [plain(f, batch.isel(s=k, drop=True)) for k in range(batch.sizes["s"])]
    close(got, expected, rtol=1e-12, atol=1e-12)


def test_stale_view_read_by_control_flow_under_grad():
    def f(x):
        v = x.data[0]
        x *= -1.0
        factor = 2.0 if float(v[0]) < 0 else 1.0  # v sees the write: its value is negative
        return (x**2).sum() * factor

    x = make_x()
    gradient, value = lf.grad_and_value(f)(x)
    close(float(value), plain(f, x), rtol=1e-12)
    close(gradient.values, fd_gradient(f, x))


def test_scalar_index_under_plain_vmap_is_a_copy():
    """NumPy's x[i, j] is a scalar: updating it must not write into the mapped input."""
    batch = make_batch()
    original = batch.values.copy()

    def f(x):
        s = x.data[0, 0]
        s += 100.0
        return x.sum() + s

    got = lf.vmap(f, dim="s")(batch)
    np.testing.assert_array_equal(batch.values, original)
    close(got.values, [plain(f, batch.isel(s=k, drop=True)) for k in range(3)], rtol=1e-12)


def test_writes_into_a_fresh_buffer_stay_cheap(monkeypatch):
    """No view bookkeeping in the buffer loop: per element, one getitem, one pow and one
    setitem (each bound at the grad level, then concretely), even with a live view of
    the input; and the right gradient."""
    calls = []
    original = labeled_func_kernels.primitive.bind

    def counting(prim, args, params):
        calls.append(prim.name)
        return original(prim, args, params)

    loop_calls = []

    def f(x):
        flat = x.data.reshape(-1)  # a live view of the input for the whole loop
        buf = np.zeros_like(flat)
        start = len(calls)
        for i in range(flat.shape[0]):
            buf[i] = flat[i] ** 2
        loop_calls.append(calls[start:])
        return (buf * flat).sum()

    monkeypatch.setattr(labeled_func_kernels.primitive, "bind", counting)
    x = xr.DataArray(np.linspace(0.5, 1.5, 5), dims="i")
    gradient = lf.grad(f)(x)
    close(gradient.values, 3 * x.values**2)
    assert loop_calls[0] == ["getitem", "getitem", "power", "power", "setitem", "setitem"] * 5


# --- BUG 2: a traced 0-d value stored into one element of a plain NumPy array ----------------------
def store_dataarray_element(v):
    buf = np.zeros(2)
    buf[0] = v[0]  # NumPy calls float() on the 0-d DataArray
    return xr.DataArray(buf, dims="x").sum()


def store_tracer_element(v):
    buf = np.zeros(2)
    buf[1] = v.data[1]  # NumPy calls float() on the 0-d tracer
    return xr.DataArray(buf, dims="x").sum()


def store_int_element(v):
    buf = np.zeros(2, dtype=complex)
    buf[1] = v.data[1]
    return xr.DataArray(buf.real, dims="x").sum()


STORES = [store_dataarray_element, store_tracer_element, store_int_element]
V = xr.DataArray([0.3, 0.7], dims="x")
VB = xr.DataArray([[0.3, 0.7], [0.1, 0.2]], dims=("s", "x"))
TRANSFORMS = {
    "grad": lambda f: lf.grad(f)(V),
    "vjp": lambda f: lf.vjp(f, V),
    "jvp": lambda f: lf.jvp(f, (V,), (xr.ones_like(V),)),
    "jacrev": lambda f: lf.jacrev(f)(V),
    "jacfwd": lambda f: lf.jacfwd(f)(V),
    "hessian": lambda f: lf.hessian(f)(V),
    "vmap": lambda f: lf.vmap(f, dim="s")(VB),
    "vmap(grad)": lambda f: lf.vmap(lf.grad(f), dim="s")(VB),
    "grad(vmap)": lambda f: lf.grad(lambda b: lf.vmap(f, dim="s")(b).sum())(VB),
}


@pytest.mark.parametrize("transform", list(TRANSFORMS))
@pytest.mark.parametrize("f", STORES, ids=lambda f: f.__name__)
def test_storing_a_traced_value_into_a_numpy_element_raises(f, transform):
    assert float(f(V)) == pytest.approx(float(V[int(f is not store_dataarray_element)]))  # fine untraced
    with pytest.raises(lf.InplaceError, match="zeros_like") as info:
        TRANSFORMS[transform](f)
    if transform not in ("vmap", "grad(vmap)"):
        assert "plain NumPy array" in str(info.value) and "np.stack" in str(info.value)


def test_explicit_float_into_a_numpy_element_is_still_allowed_under_grad():
    def f(v):
        buf = np.zeros(2)
        buf[0] = float(v[0])  # an explicit conversion: the primal, by the item policy
        return (v * buf[0]).sum()

    close(lf.grad(f)(V).values, [0.3, 0.3])


def test_traced_buffer_is_the_fix():
    def f(v):
        buf = np.zeros_like(v.data)  # traced: one buffer per example under vmap
        buf[0] = v.data[0] * 2.0
        buf[1] = v.data[1] ** 2
        return xr.DataArray(buf, dims="x").sum()

    close(lf.grad(f)(V).values, [2.0, 1.4])
    close(lf.vmap(lf.grad(f), dim="s")(VB).values, [[2.0, 1.4], [2.0, 0.4]])


def test_a_dataarray_written_into_a_traced_buffer_element_by_element():
    # buf = np.zeros_like(v.data) is traced: buf[i] = <DataArray> stores its data, as NumPy would.
    def squares(v):
        buf = np.zeros_like(v.data)
        for i in range(v.sizes["t"]):
            buf[i] = v.isel(t=i) ** 2
        return xr.DataArray(buf, dims="t").sum()

    x = xr.DataArray([1.0, 2.0, 3.0], dims="t")
    np.testing.assert_allclose(lf.grad(squares)(x).values, 2 * x.values)
    batch = xr.DataArray([[1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]], dims=("s", "t"))
    np.testing.assert_allclose(lf.vmap(lf.grad(squares), dim="s")(batch).values, 2 * batch.values)
    np.testing.assert_allclose(lf.vmap(squares, dim="s")(batch).values, (batch.values ** 2).sum(axis=1))


@pytest.mark.parametrize("make_view", [
    lambda a: np.broadcast_to(a, (2,) + a.shape),
    lambda a: a.reshape(2, 2).diagonal(),
    lambda a: np.lib.stride_tricks.sliding_window_view(a, 2),
], ids=["broadcast_to", "diagonal", "sliding_window_view"])
def test_read_only_views_see_writes_into_their_base_and_refuse_writes(make_view):
    def f(x):
        a = x.data.copy()
        view = make_view(a)
        a *= 2  # NumPy's view now sees the doubled values
        return xr.DataArray((view ** 2).sum())

    x = xr.DataArray(np.arange(1.0, 5.0), dims="t")
    gradient, value = lf.grad_and_value(f)(x)
    np.testing.assert_allclose(value.item(), float(f(x)), rtol=1e-14)
    steps = np.eye(4) * 1e-6
    numeric = [(float(f(x + s)) - float(f(x - s))) / 2e-6 for s in steps]
    np.testing.assert_allclose(gradient.values, numeric, rtol=1e-6)

    def write(x):
        view = make_view(x.data * 1.0)
        view += 1
        return xr.DataArray(view.sum())

    with pytest.raises(ValueError, match="read-only"):
        write(x)  # NumPy itself
    with pytest.raises(ValueError, match="read-only"):
        lf.grad(write)(x)


# --- storing traced values into a plain NumPy buffer raises (under AD it dropped the derivative) ------
from transform_by_name import BATCH as PLAIN_BATCH, X as PLAIN_X, under  # noqa: E402


def fill(x):
    buf = np.zeros(3)
    buf.fill(x.data[0])
    return (xr.DataArray(buf, dims="t") * x).sum()


def fill_dataarray(x):
    buf = np.zeros(3)
    buf.fill(x[0])  # a 0-d DataArray: NumPy calls its __float__
    return (xr.DataArray(buf, dims="t") * x).sum()


def fromiter(x):
    buf = np.fromiter((v * 2.0 for v in x.data), dtype=float)
    return (xr.DataArray(buf, dims="t") ** 2).sum()


def setitem_call(x):
    buf = np.zeros(3)
    buf.__setitem__(0, x.data[1])
    return (xr.DataArray(buf, dims="t") * x).sum()


def setitem_call_slice(x):
    buf = np.zeros(3)
    buf.__setitem__(slice(0, 3), x.data)
    return (xr.DataArray(buf, dims="t") * x).sum()


def operator_setitem(x):
    buf = np.zeros(3)
    operator.setitem(buf, 0, x.data[1])
    return (xr.DataArray(buf, dims="t") * x).sum()


def put_method(x):
    buf = np.zeros(3)
    buf.put(0, x.data[1])
    return (xr.DataArray(buf, dims="t") * x).sum()


PLAIN_STORES = {
    "fill": (fill, "plain.fill(value)"),
    "fill-dataarray": (fill_dataarray, "plain.fill(value)"),
    "fromiter": (fromiter, "np.fromiter(values, dtype)"),
    "setitem-call": (setitem_call, "plain.__setitem__(key, value)"),
    "setitem-call-slice": (setitem_call_slice, "plain.__setitem__(key, value)"),
    "operator-setitem": (operator_setitem, "operator.setitem(plain, key, value)"),
    "put": (put_method, "plain.put(indices, values)"),
}


@pytest.mark.parametrize("name", sorted(PLAIN_STORES))
@pytest.mark.parametrize("transform", ["grad", "jvp", "jacrev", "jacfwd", "vmap"])
def test_storing_a_traced_value_into_a_plain_buffer_raises_inplace_error(transform, name):
    # before: under AD the primal was stored and the derivative dropped (fill: grad [1, 2, 4]
    # instead of [1 + 7, 1, 1])
    f, culprit = PLAIN_STORES[name]
    with pytest.raises(lf.InplaceError) as excinfo:
        under(transform, f)
    message = str(excinfo.value)
    assert culprit in message and "test_inplace_views.py:" in message, message


def test_buf_index_store_and_the_traced_buffer_fix():
    def index_store(x):
        buf = np.zeros(3)
        buf[0] = x.data[1]
        return (xr.DataArray(buf, dims="t") * x).sum()

    with pytest.raises(lf.InplaceError, match=r"plain\[\.\.\.\] = value"):
        lf.grad(index_store)(PLAIN_X)

    def traced_fill(x):
        buf = np.zeros_like(x.data)  # traced: the fix the message points at
        buf.fill(x.data[0])
        return (xr.DataArray(buf, dims="t") * x).sum()

    # d/dx (x0 (x0 + x1 + x2)) = (2 x0 + x1 + x2, x0, x0)
    np.testing.assert_allclose(lf.grad(traced_fill)(PLAIN_X).values, [2 * 1.0 + 2.0 + 4.0, 1.0, 1.0])
    looped = [traced_fill(PLAIN_BATCH[i]).item() for i in range(2)]
    np.testing.assert_allclose(lf.vmap(traced_fill, dim="s")(PLAIN_BATCH).values, looped)
    # float() of a traced value under grad alone is still the primal (torch's .item())
    np.testing.assert_allclose(lf.grad(lambda x: x.sum() * float(x.data[0]))(PLAIN_X).values, [1.0, 1.0, 1.0])
