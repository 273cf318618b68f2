"""Property test: random chains of xarray operations, ``lf.vmap`` == the for-loop.

Hypothesis draws 2-3 dims with sizes 1-4 in a random order, picks the mapped dim
among them (so its position is random too), and a chain of 1-5 operations on one
example; the example dims and sizes are tracked symbolically so that every drawn
operation is valid.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import labeled_func as lf

try:  # works with and without a tests/__init__.py
    from helpers_coverage import assert_same, loop_vmap
except ImportError:  # pragma: no cover
    from tests.helpers_coverage import assert_same, loop_vmap

DIM_NAMES = ("a", "b", "c")

UFUNCS = {
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "exp_neg": lambda v: np.exp(-v),
    "sqrt_abs": lambda v: np.sqrt(np.abs(v)),
    "log1p_abs": lambda v: np.log1p(np.abs(v)),
    "abs": np.abs,
    "square": np.square,
}

SCALARS = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False).map(lambda v: round(v, 3))


def apply_op(op, v):
    kind = op[0]
    if kind == "ufunc":
        return UFUNCS[op[1]](v)
    if kind == "add":
        return v + op[1]
    if kind == "radd":
        return op[1] + v
    if kind == "mul":
        return v * op[1]
    if kind in ("sum", "mean", "max", "std"):
        return getattr(v, kind)(op[1])
    if kind == "shift":
        return v.shift({op[1]: op[2]})
    if kind == "diff":
        return v.diff(op[1])
    if kind == "cumsum":
        return v.cumsum(op[1])
    if kind == "transpose":
        return v.transpose(*op[1])
    if kind == "isel":
        return v.isel({op[1]: slice(op[2], op[3])})
    if kind == "roll":
        return v.roll({op[1]: op[2]})
    if kind == "where_xr":
        return xr.where(v > op[1], v, 0.0)
    if kind == "where_method":
        return v.where(v > op[1])
    raise AssertionError(kind)


def draw_op(data, sizes):
    """One operation valid on an example with ``sizes`` (ordered dict); new sizes."""
    dims = list(sizes)
    kinds = ["ufunc", "add", "radd", "mul", "where_xr", "where_method"]
    if dims:
        kinds += ["sum", "mean", "max", "std", "cumsum", "isel", "roll", "shift"]
    if any(n >= 2 for n in sizes.values()):
        kinds.append("diff")
    if len(dims) >= 2:
        kinds.append("transpose")
    kind = data.draw(st.sampled_from(kinds), label="op")
    if kind == "ufunc":
        return ("ufunc", data.draw(st.sampled_from(sorted(UFUNCS)))), sizes
    if kind in ("add", "radd", "mul"):
        return (kind, data.draw(SCALARS)), sizes
    if kind in ("where_xr", "where_method"):
        return (kind, data.draw(st.floats(-1.0, 1.5).map(lambda v: round(v, 3)))), sizes
    if kind == "diff":
        d = data.draw(st.sampled_from([k for k, n in sizes.items() if n >= 2]), label="dim")
        return ("diff", d), {**sizes, d: sizes[d] - 1}
    d = data.draw(st.sampled_from(dims), label="dim") if dims else None
    if kind in ("sum", "mean", "max", "std"):
        return (kind, d), {k: n for k, n in sizes.items() if k != d}
    if kind == "cumsum":
        return ("cumsum", d), sizes
    if kind == "isel":
        n = sizes[d]
        start = data.draw(st.integers(0, n - 1), label="start")
        stop = data.draw(st.integers(start + 1, n), label="stop")
        return ("isel", d, start, stop), {**sizes, d: stop - start}
    if kind in ("roll", "shift"):
        return (kind, d, data.draw(st.integers(-3, 3))), sizes
    if kind == "transpose":
        perm = tuple(data.draw(st.permutations(dims), label="perm"))
        return ("transpose", perm), {k: sizes[k] for k in perm}
    raise AssertionError(kind)


@st.composite
def layouts(draw):
    ndim = draw(st.integers(2, 3))
    dims = tuple(draw(st.permutations(DIM_NAMES))[:ndim])
    sizes = {d: draw(st.integers(1, 4), label=f"size_{d}") for d in dims}
    mapped = draw(st.sampled_from(dims), label="mapped")
    seed = draw(st.integers(0, 2**31 - 1), label="seed")
    return dims, sizes, mapped, seed


def make_array(dims, sizes, seed):
    rng = np.random.default_rng(seed)
    shape = tuple(sizes[d] for d in dims)
    coords = {d: np.arange(sizes[d]) * 10 + i for i, d in enumerate(dims)}
    return xr.DataArray(
        rng.uniform(0.1, 2.0, shape), dims=dims, coords=coords, name="v", attrs={"units": "m"}
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=layouts(), data=st.data())
def test_random_op_chain_vmap_equals_loop(layout, data):
    dims, sizes, mapped, seed = layout
    x = make_array(dims, sizes, seed)
    example_sizes = {d: sizes[d] for d in dims if d != mapped}
    n_ops = data.draw(st.integers(1, 5), label="n_ops")
    ops = []
    for _ in range(n_ops):
        op, example_sizes = draw_op(data, example_sizes)
        ops.append(op)

    def f(v):
        for op in ops:
            v = apply_op(op, v)
        return v

    expected = loop_vmap(f, mapped, x)
    result = lf.vmap(f, dim=mapped)(x)
    assert expected.dims == (mapped, *example_sizes)  # the oracle's own bookkeeping
    assert_same(result, expected, rtol=1e-9, atol=1e-12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=layouts(), data=st.data())
def test_random_op_chain_with_unmapped_partner(layout, data):
    """The same chains, with an unmapped array (one of the other dims) mixed in."""
    dims, sizes, mapped, seed = layout
    x = make_array(dims, sizes, seed)
    others = [d for d in dims if d != mapped]
    partner_dim = data.draw(st.sampled_from(others), label="partner_dim")
    partner = xr.DataArray(
        np.random.default_rng(seed + 1).uniform(0.5, 1.5, sizes[partner_dim]),
        dims=(partner_dim,),
        coords={partner_dim: x[partner_dim].values},  # aligned with x: no silent inner join
        name="p",
    )
    out_pos = data.draw(st.sampled_from([0, "preserve"]), label="out_dims")
    example_sizes = {d: sizes[d] for d in dims if d != mapped}
    ops = []
    for _ in range(data.draw(st.integers(1, 3), label="n_ops")):
        op, example_sizes = draw_op(data, example_sizes)
        ops.append(op)

    def f(v, p):
        v = v * p + p
        for op in ops:
            v = apply_op(op, v)
        return v

    expected = loop_vmap(f, mapped, x, partner)
    result = lf.vmap(f, dim=mapped, out_dims=out_pos)(x, partner)
    if out_pos == "preserve":
        pos = dims.index(mapped)
        rest = [d for d in expected.dims if d != mapped]
        if pos > len(rest):
            # fewer output dims than the mapped dim's position: only the set of dims
            # and the values are specified
            assert set(result.dims) == set(expected.dims)
            result = result.transpose(*expected.dims)
        else:
            expected = expected.transpose(*rest[:pos], mapped, *rest[pos:])
    assert_same(result, expected, rtol=1e-9, atol=1e-12)
