"""Property test: reverse mode through every operation that writes is the transpose of
forward mode, and both are the derivative.

Hypothesis draws a shape (1-3 dims of sizes 1-4) and one write into an array ``d`` of
that shape: ``d[key] = v`` (and ``+=``, ``-=``, ``*=``) with keys of slices (negative
steps too), ints, integer arrays that repeat targets, boolean masks, Ellipsis and None;
``np.put`` in its three modes, ``np.put_along_axis``, ``np.putmask``, ``np.place``,
``np.copyto`` (with and without ``where=``); and on DataArrays, ``isel``-style
(``d[dict(...)]``) and ``.loc`` assignment.  The function around the write is smooth in
both inputs, with a nonlinear operation before and after it: ``d = sin(x) x + 0.5``, the
value ``tanh(w) (1 + 0.1 sum(cos x))``, the output ``cos(d) d``.  With random ``u``
(tangents of ``x`` and ``w``) and ``v`` (a cotangent of the output):

- ``<v, J u> == <J^T v, u>`` to 1e-12 (relative to the sum of the magnitudes of the terms),
  with ``J u`` from ``lf.jvp`` and ``J^T v`` from ``lf.vjp``;
- ``J u`` equals central differences of the function run on plain NumPy (1e-6);
- under ``lf.vmap`` the JVP and the VJP equal the loop over examples, also with index
  arrays that differ per example (which the reverse rule cannot read: it finds the
  surviving writes by a traced scatter instead).

The number of examples is the environment variable ``LF_FUZZ_EXAMPLES`` (read once, at
import; the fuzzers of this suite share it); the default keeps this file well under a minute.  Runs are
derandomized and keep no example database, so CI sees the same examples every time.
"""
from __future__ import annotations

import math
import os

import numpy as np
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import labeled_func as lf

EXAMPLES = int(os.environ.get("LF_FUZZ_EXAMPLES", "100"))
VMAP_EXAMPLES = max(1, EXAMPLES // 3)
EPS = 1e-6
DIMS = ("a", "b", "c")
STEPS = (None, 1, 2, 3, -1, -2)
FUZZ = dict(deadline=None, derandomize=True, database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class Write:
    """One drawn write: what it does to ``d`` (``apply(d, value)``), the shape of the value
    it takes, and whether ``d`` is a DataArray.  Its repr is the line of NumPy it runs."""

    def __init__(self, text, apply, value_shape, labeled=False):
        self.text = text
        self.apply = apply
        self.value_shape = tuple(value_shape)
        self.labeled = labeled

    def __repr__(self):
        return f"Write({self.text}; value shape {self.value_shape})"


# --- drawing the pieces -------------------------------------------------------------------------
def _broadcastable(draw, shape):
    """A shape that broadcasts to ``shape``: leading dims dropped, others set to 1."""
    shape = list(shape)
    drop = draw(st.integers(0, len(shape)))
    return tuple(1 if draw(st.booleans()) else n for n in shape[drop:])


def _value_shape(draw, target):
    how = draw(st.sampled_from(["full", "broadcast", "scalar"]))
    if how == "full":
        return tuple(target)
    if how == "scalar":
        return ()
    return _broadcastable(draw, target)


def _indices(draw, low, high, shape):
    """An integer array of ``shape`` with entries in ``[low, high]``: repeats are likely
    (a few values, often the same one drawn again)."""
    count = math.prod(shape)
    pool = draw(st.lists(st.integers(low, high), min_size=1, max_size=3))
    values = draw(st.lists(st.sampled_from(pool) | st.integers(low, high), min_size=count, max_size=count))
    return np.array(values, dtype=np.int64).reshape(shape)


def _slice(draw, size):
    bound = st.none() | st.integers(-size - 1, size + 1)
    return slice(draw(bound), draw(bound), draw(st.sampled_from(STEPS)))


def _mask(draw, shape):
    count = math.prod(shape)
    return np.array(draw(st.lists(st.booleans(), min_size=count, max_size=count)), dtype=bool).reshape(shape)


def _key(draw, shape, with_array=False):
    """A NumPy key: per axis a slice, an int, the whole axis or an integer array (the arrays
    broadcast together), or a boolean mask over the leading axes; maybe an Ellipsis for the
    trailing whole axes and a None.  ``with_array``: at least one integer array, no mask."""
    forced = draw(st.integers(0, len(shape) - 1)) if with_array else None
    if not with_array and draw(st.integers(0, 4)) == 0:  # a boolean mask over the leading k axes
        k = draw(st.integers(1, len(shape)))
        key = [_mask(draw, shape[:k])]
        key += [_slice(draw, n) if draw(st.booleans()) else slice(None) for n in shape[k:]]
        return tuple(key)
    block = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=2)))
    key = []
    for axis, n in enumerate(shape):
        choice = "array" if axis == forced else draw(st.sampled_from(["slice", "int", "array", "array", "whole"]))
        if choice == "slice":
            key.append(_slice(draw, n))
        elif choice == "int":
            key.append(draw(st.integers(-n, n - 1)))
        elif choice == "array":
            key.append(_indices(draw, -n, n - 1, _broadcastable(draw, block)))
        else:
            key.append(slice(None))
    while key and isinstance(key[-1], slice) and key[-1] == slice(None) and draw(st.booleans()):
        key.pop()
    if key and draw(st.integers(0, 3)) == 0:
        key.append(Ellipsis)
    if draw(st.integers(0, 4)) == 0:
        key.insert(draw(st.integers(0, len(key))), None)
    return tuple(key)


def _in_place(operation):
    def apply(d, key, value):
        if operation == "=":
            d[key] = value
        elif operation == "+=":
            d[key] += value
        elif operation == "-=":
            d[key] -= value
        else:
            d[key] *= value

    return apply


@st.composite
def writes(draw, labeled=True):
    """A shape and one write into an array of that shape."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    kinds = ["setitem", "setitem", "setitem", "put", "put_along_axis", "putmask", "place", "copyto"]
    if labeled:
        kinds += ["isel", "loc"]
    kind = draw(st.sampled_from(kinds))
    size = math.prod(shape)
    if kind == "setitem":
        key = _key(draw, shape)
        operation = draw(st.sampled_from(["=", "=", "+=", "-=", "*="]))
        target = np.empty(shape)[key].shape
        value_shape = _value_shape(draw, target)
        apply = _in_place(operation)
        return shape, Write(f"d[{key!r}] {operation} v", lambda d, v: apply(d, key, v), value_shape)
    if kind == "put":
        mode = draw(st.sampled_from(["raise", "wrap", "clip"]))
        low, high = (-size, size - 1) if mode == "raise" else (-2 * size, 2 * size)
        ind = _indices(draw, low, high, (draw(st.integers(1, 6)),))
        length = draw(st.integers(1, 7))
        return shape, Write(f"np.put(d, {ind!r}, v, mode={mode!r})",
                            lambda d, v: np.put(d, ind, v, mode=mode), (length,))
    if kind == "put_along_axis":
        axis = draw(st.sampled_from([None] + list(range(len(shape)))))
        if axis is None:
            indices = _indices(draw, -size, size - 1, (draw(st.integers(1, 5)),))
            target = indices.shape
        else:
            index_shape = tuple(draw(st.integers(1, 4)) if d == axis else (1 if draw(st.booleans()) else n)
                                for d, n in enumerate(shape))
            indices = _indices(draw, -shape[axis], shape[axis] - 1, index_shape)
            target = tuple(i if d == axis else n for d, (n, i) in enumerate(zip(shape, index_shape)))
        value_shape = _value_shape(draw, target)
        return shape, Write(f"np.put_along_axis(d, {indices!r}, v, axis={axis})",
                            lambda d, v: np.put_along_axis(d, indices, v, axis=axis), value_shape)
    if kind == "putmask":
        mask = _mask(draw, shape)
        value_shape = shape if draw(st.booleans()) else (draw(st.integers(1, 5)),)
        return shape, Write(f"np.putmask(d, {mask!r}, v)", lambda d, v: np.putmask(d, mask, v), value_shape)
    if kind == "place":
        mask = _mask(draw, shape)
        return shape, Write(f"np.place(d, {mask!r}, v)", lambda d, v: np.place(d, mask, v),
                            (draw(st.integers(1, 5)),))
    if kind == "copyto":
        value_shape = _broadcastable(draw, shape)
        if draw(st.booleans()):
            return shape, Write("np.copyto(d, v)", lambda d, v: np.copyto(d, v), value_shape)
        where = _mask(draw, _broadcastable(draw, shape))
        return shape, Write(f"np.copyto(d, v, where={where!r})", lambda d, v: np.copyto(d, v, where=where),
                            value_shape)
    # DataArrays: orthogonal (outer) indexing per dim, by position or by label
    dims = DIMS[: len(shape)]
    chosen = draw(st.lists(st.sampled_from(dims), min_size=1, max_size=len(dims), unique=True))
    key = {}
    for dim in chosen:
        n = shape[dims.index(dim)]
        choice = draw(st.sampled_from(["int", "slice", "list", "list"]))
        if choice == "int":
            position = draw(st.integers(-n, n - 1))
        elif choice == "slice":
            position = _slice(draw, n)
        else:
            position = [int(i) for i in _indices(draw, -n, n - 1, (draw(st.integers(1, 4)),))]
        if kind == "loc" and dim == "a":  # labels of dim "a": 10, 20, ...
            position = _label(position, n)
        key[dim] = position
    operation = draw(st.sampled_from(["=", "=", "+="]))
    template = _labeled(np.zeros(shape))
    target = (template.loc[key] if kind == "loc" else template[key]).shape
    value_shape = target if draw(st.booleans()) else ()
    apply = _in_place(operation)
    if kind == "loc":
        return shape, Write(f"d.loc[{key!r}] {operation} v", lambda d, v: apply(d.loc, key, v), value_shape,
                            labeled=True)
    return shape, Write(f"d[{key!r}] {operation} v", lambda d, v: apply(d, key, v), value_shape, labeled=True)


def _label(position, n):
    """A position along dim "a" as its label (a slice by labels covers the same positions
    only for a positive step: those stay positions of a slice of labels)."""
    labels = 10 * np.arange(1, n + 1)
    if isinstance(position, slice):
        start, stop, step = position.indices(n)
        picked = list(range(start, stop, step))
        return [int(labels[i]) for i in picked] if picked else slice(None)
    if isinstance(position, list):
        return [int(labels[i]) for i in position]
    return int(labels[position])


def _labeled(values, batch_dim=None):
    """``values`` as a DataArray with dims a, b, c (after ``batch_dim`` if given) and labels
    10, 20, ... along "a"."""
    dims = ((batch_dim,) if batch_dim else ()) + DIMS[: np.ndim(values) - bool(batch_dim)]
    n = np.shape(values)[dims.index("a")]
    return xr.DataArray(values, dims=dims, coords={"a": 10 * np.arange(1, n + 1)})


# --- the function around the write, and the checks ---------------------------------------------
def function(write):
    def f(x, w):
        w = w.data if isinstance(w, xr.DataArray) else w
        x_data = x.data if isinstance(x, xr.DataArray) else x
        d = np.sin(x) * x + 0.5
        value = np.tanh(w) * (1.0 + 0.1 * np.cos(x_data).sum())
        write.apply(d, value)
        return np.cos(d) * d

    return f


def plain(value):
    return np.asarray(value.values if isinstance(value, xr.DataArray) else value, dtype=np.float64)


def draws(rng, shape, value_shape):
    return rng.uniform(-1.5, 1.5, size=shape), rng.uniform(-1.5, 1.5, size=value_shape)


def inner(a, b):
    """The sum of a * b over pairs of arrays, and the sum of |a * b| (the scale of a
    rounding error in the sum)."""
    terms = [plain(p) * plain(q) for p, q in zip(a, b)]
    return sum(float(t.sum()) for t in terms), sum(float(np.abs(t).sum()) for t in terms)


@settings(max_examples=EXAMPLES, **FUZZ)
@given(case=writes(), seed=st.integers(0, 2**32 - 1))
def test_vjp_is_the_transpose_of_jvp_and_both_are_the_derivative(case, seed):
    shape, write = case
    rng = np.random.default_rng(seed)
    f = function(write)
    x, w = draws(rng, shape, write.value_shape)
    ux, uw = draws(rng, shape, write.value_shape)
    wrap = _labeled if write.labeled else (lambda a: a)

    expected = plain(f(wrap(x.copy()), w.copy()))
    out, pushed = lf.jvp(f, (wrap(x), w), (wrap(ux), uw))
    np.testing.assert_allclose(plain(out), expected, rtol=1e-15, atol=1e-15)
    out_again, pull = lf.vjp(f, wrap(x), w)
    np.testing.assert_allclose(plain(out_again), expected, rtol=1e-15, atol=1e-15)
    v = rng.standard_normal(expected.shape)
    pulled = pull(out_again.copy(data=v) if write.labeled else v)

    forward, forward_scale = inner([v], [pushed])
    backward, backward_scale = inner(pulled, [ux, uw])
    assert abs(forward - backward) <= 1e-12 * max(forward_scale, backward_scale, 1e-300), (forward, backward)

    difference = (plain(f(wrap(x + EPS * ux), w + EPS * uw)) - plain(f(wrap(x - EPS * ux), w - EPS * uw))) / (2 * EPS)
    np.testing.assert_allclose(plain(pushed), difference, rtol=1e-6, atol=1e-6)
    numeric, numeric_scale = inner([v], [difference])
    assert abs(backward - numeric) <= 1e-6 * max(1.0, numeric_scale)


@settings(max_examples=VMAP_EXAMPLES, **FUZZ)
@given(case=writes(), seed=st.integers(0, 2**32 - 1), size=st.integers(1, 3))
def test_vmap_of_jvp_and_vjp_equal_the_loop(case, seed, size):
    shape, write = case
    rng = np.random.default_rng(seed)
    f = function(write)
    xs, ws = draws(rng, (size,) + shape, (size,) + write.value_shape)
    uxs, uws = draws(rng, (size,) + shape, (size,) + write.value_shape)
    out_shape = plain(f(_labeled(xs[0].copy()) if write.labeled else xs[0].copy(), ws[0].copy())).shape
    vs = rng.standard_normal((size,) + out_shape)

    if write.labeled:
        value_dims = tuple(f"v{i}" for i in range(len(write.value_shape)))
        as_w = lambda a, batched=True: xr.DataArray(a, dims=(("s",) if batched else ()) + value_dims)  # noqa: E731
        xs_in, uxs_in = _labeled(xs, "s"), _labeled(uxs, "s")
        ws_in, uws_in = as_w(ws), as_w(uws)
        outs = [f(_labeled(x), w) for x, w in zip(xs, ws)]
        out_dims = outs[0].dims
        vs_in = xr.DataArray(vs, dims=("s",) + out_dims)
        mapped = dict(dim="s")
        example = lambda a, i: a.isel(s=i)  # noqa: E731
    else:
        xs_in, ws_in, uxs_in, uws_in, vs_in = xs, ws, uxs, uws, vs
        mapped = dict(in_dims=0)
        example = lambda a, i: a[i]  # noqa: E731

    def push(x, w, ux, uw):
        return lf.jvp(f, (x, w), (ux, uw))[1]

    def pull(x, w, v):
        return lf.vjp(f, x, w)[1](v)

    pushed = lf.vmap(push, **mapped)(xs_in, ws_in, uxs_in, uws_in)
    pulled = lf.vmap(pull, **mapped)(xs_in, ws_in, vs_in)
    for i in range(size):
        one = push(example(xs_in, i), example(ws_in, i), example(uxs_in, i), example(uws_in, i))
        got = example(pushed, i)
        if write.labeled:
            got = got.transpose(*one.dims)
        np.testing.assert_allclose(plain(got), plain(one), rtol=1e-12, atol=1e-13)
        ones = pull(example(xs_in, i), example(ws_in, i), example(vs_in, i))
        for got, expected in zip(pulled, ones):
            got = example(got, i)
            if write.labeled:
                got = got.transpose(*expected.dims)
            np.testing.assert_allclose(plain(got), plain(expected), rtol=1e-12, atol=1e-13)


@st.composite
def mapped_index_writes(draw):
    """A shape, a key with index arrays, and per example other values of those arrays."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    key = _key(draw, shape, with_array=True)
    size = draw(st.integers(1, 3))
    positions = [i for i, item in enumerate(key) if isinstance(item, np.ndarray)]
    axes = [sum(1 for item in key[:i] if item is not None and item is not Ellipsis) for i in positions]
    examples = [[key[i] for i in positions]]
    for _ in range(size - 1):
        examples.append([_indices(draw, -shape[a], shape[a] - 1, key[i].shape) for i, a in zip(positions, axes)])
    operation = draw(st.sampled_from(["=", "=", "+=", "*="]))
    value_shape = _value_shape(draw, np.empty(shape)[key].shape)
    stacked = [np.stack([example[j] for example in examples]) for j in range(len(positions))]
    return shape, key, positions, stacked, operation, value_shape


@settings(max_examples=VMAP_EXAMPLES, **FUZZ)
@given(case=mapped_index_writes(), seed=st.integers(0, 2**32 - 1))
def test_vmap_with_mapped_index_arrays_equals_the_loop(case, seed):
    shape, key, positions, indices, operation, value_shape = case
    size = indices[0].shape[0]
    rng = np.random.default_rng(seed)
    apply = _in_place(operation)

    def f(x, w, *arrays):
        full = list(key)
        for position, array in zip(positions, arrays):
            full[position] = array
        return function(Write("", lambda d, v: apply(d, tuple(full), v), value_shape))(x, w)

    def push(x, w, ux, uw, *arrays):
        return lf.jvp(lambda x, w: f(x, w, *arrays), (x, w), (ux, uw))[1]

    def pull(x, w, v, *arrays):
        return lf.vjp(lambda x, w: f(x, w, *arrays), x, w)[1](v)

    xs, ws = draws(rng, (size,) + shape, (size,) + value_shape)
    uxs, uws = draws(rng, (size,) + shape, (size,) + value_shape)
    vs = rng.standard_normal((size,) + plain(f(xs[0].copy(), ws[0].copy(), *[a[0] for a in indices])).shape)
    pushed = lf.vmap(push, in_dims=0)(xs, ws, uxs, uws, *indices)
    pulled = lf.vmap(pull, in_dims=0)(xs, ws, vs, *indices)
    for i in range(size):
        arrays = [a[i] for a in indices]
        np.testing.assert_allclose(plain(pushed)[i], plain(push(xs[i], ws[i], uxs[i], uws[i], *arrays)),
                                   rtol=1e-12, atol=1e-13)
        for got, expected in zip(pulled, pull(xs[i], ws[i], vs[i], *arrays)):
            np.testing.assert_allclose(plain(got)[i], plain(expected), rtol=1e-12, atol=1e-13)
