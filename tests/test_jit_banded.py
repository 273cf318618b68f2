"""lf.jit computes the Jacobians of stencils as diagonals (``compiler/banded.py``): the
identity that ``lf.jacrev``/``lf.jacfwd`` push through rolls, sums and products by
per-site partials stays a few cyclic diagonals over a background, computed as vectors
and written once. Oracles: the eager transform, compared byte for byte (signed zeros
included; NaN where NaN), and the Lorenz-96 Jacobian written out by hand (benchmarks)."""
from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

import labeled_func as lf
from benchmarks.bench_autodiff import FORCING, lorenz96, lorenz96_jacobian, rosenbrock, rosenbrock_hessian
from labeled_func.engine.compiler import banded, banded_run, thresholds


@pytest.fixture
def at_every_size(monkeypatch):
    monkeypatch.setattr(thresholds, "BAND_MIN_SIZE", 0)


def banded_nodes(jitted):
    return sum(getattr(node.function, "__name__", "") == "banded"
               for compiled in jitted.cache.values() for node in compiled.program.nodes)


def assert_same_bytes(got, expected):
    """The same bytes but in NaNs: NaN where NaN, as lf.jit's contract says (the sign bit of
    a NaN that meets another is NumPy's loop's choice: its SIMD body and scalar tail differ)."""
    got, expected = np.ascontiguousarray(got), np.ascontiguousarray(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if got.dtype.kind == "c":  # the real and imaginary parts side by side
        return assert_same_bytes(got.view(got.real.dtype), expected.view(expected.real.dtype))
    bits = np.dtype(f"u{got.dtype.itemsize}")
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(got), nan)
    differ = np.argwhere((got.view(bits) != expected.view(bits)) & ~nan)
    assert not differ.size, f"the bytes differ at {differ[:5].tolist()}:\n{got}\n{expected}"


@pytest.mark.parametrize("transform", ["jacrev", "jacfwd"])
@pytest.mark.parametrize("sites", [5, 16, 40, 400])
def test_the_lorenz96_jacobian_replays_bit_for_bit_and_equals_the_closed_form(at_every_size, transform, sites):
    jacobian = getattr(lf, transform)(lorenz96)
    jitted = lf.jit(jacobian)
    rng = np.random.default_rng(sites)
    for call in range(3):  # the trace, then two replays with other values
        x = FORCING + rng.normal(size=sites)
        x[0] = -0.0 if call == 2 else x[0]  # a signed zero in a partial
        state = xr.DataArray(x, dims="site")
        got = jitted(state)
        assert_same_bytes(got.values, jacobian(state).values)
        np.testing.assert_allclose(got.values, lorenz96_jacobian(x), rtol=1e-15, atol=1e-15)
    if sites >= 40:  # the four diagonals within max_bands: the program writes the Jacobian once
        assert banded_nodes(jitted) == 1


def test_above_the_threshold_without_changing_it():
    """The default threshold: the Jacobian at 400 sites (160,000 elements) is banded."""
    state = xr.DataArray(FORCING + np.random.default_rng(2).normal(size=400), dims="site")
    jitted = lf.jit(lf.jacrev(lorenz96))
    jitted(state)
    assert_same_bytes(jitted(state).values, lf.jacrev(lorenz96)(state).values)
    assert banded_nodes(jitted) == 1


@pytest.mark.parametrize("size", [6, 40, 300])
def test_the_rosenbrock_hessian_replays_bit_for_bit_and_equals_the_closed_form(size, monkeypatch):
    """A chain (slices of the state, their transposes: pads) under forward over reverse:
    the Hessian is tridiagonal, its matrices rectangular before the pads; with the pass at
    every size (6, 40) and at the default threshold (300 x 300)."""
    if size < 300:
        monkeypatch.setattr(thresholds, "BAND_MIN_SIZE", 0)
    hessian = lf.hessian(rosenbrock)
    jitted = lf.jit(hessian)
    rng = np.random.default_rng(size)
    for _ in range(3):
        x = xr.DataArray(rng.uniform(-2.0, 2.0, size), dims="d")
        got = jitted(x).values
        assert_same_bytes(got, hessian(x).values)
        np.testing.assert_allclose(got, rosenbrock_hessian(x.values), rtol=1e-13, atol=1e-10)
    assert banded_nodes(jitted) == 1


def test_non_finite_partials_keep_the_masks_of_the_nan_safe_products(at_every_size):
    """Where the state holds inf and NaN, the Jacobian's diagonals hold NaN and the
    NaN-safe products keep zeros off them: as eagerly, byte for byte."""
    jacobian = lf.jacrev(lorenz96)
    jitted = lf.jit(jacobian)
    x = FORCING + np.random.default_rng(4).normal(size=24)
    jitted(xr.DataArray(x, dims="site"))
    x[3], x[10] = np.inf, np.nan
    state = xr.DataArray(x, dims="site")
    with np.errstate(invalid="ignore"):
        expected = jacobian(state).values
        got = jitted(state).values
    assert_same_bytes(got, expected)
    assert np.isnan(got).any() and (got == 0).sum() > got.size // 2


@pytest.mark.parametrize("transform", ["jacrev", "jacfwd"])
def test_a_batch_of_jacobians_and_a_single_precision_state(at_every_size, transform):
    """A vmapped Jacobian (leading dims: the per-member partials broadcast against the
    basis) is banded too; in float32 as well: the same bytes as eagerly."""
    states = xr.DataArray(FORCING + np.random.default_rng(5).normal(size=(3, 40)), dims=("member", "site"))
    batched = lf.vmap(getattr(lf, transform)(lorenz96), dim="member")
    jitted = lf.jit(batched)
    jitted(states)
    assert_same_bytes(jitted(states * 1.5).values, batched(states * 1.5).values)
    for member in range(3):
        np.testing.assert_allclose(jitted(states).values[member], lorenz96_jacobian(states.values[member]),
                                   rtol=1e-15, atol=1e-15)
    assert banded_nodes(jitted) == 1
    single = xr.DataArray((FORCING + np.random.default_rng(6).normal(size=32)).astype(np.float32), dims="site")
    jitted = lf.jit(lf.jacfwd(lorenz96))
    jitted(single)
    assert_same_bytes(jitted(single + 1).values, lf.jacfwd(lorenz96)(single + 1).values)
    assert jitted(single).dtype == np.float32


def test_constant_bands_reads_diagonals_over_one_zero():
    def read(matrix):
        zero, bands, rows = banded._read_bands(np.ascontiguousarray(matrix), *matrix.shape)
        assert sorted(bands) == sorted(rows)
        return (np.signbit(zero), {k: v.tolist() for k, v in bands.items()},
                {k: np.flatnonzero(v).tolist() for k, v in rows.items()})

    eye = np.eye(6)
    assert read(eye) == (False, {0: [1.0] * 6}, {0: list(range(6))})
    assert read(np.roll(eye, 2, axis=1) * 3.0) == (False, {2: [3.0] * 6}, {2: list(range(6))})  # [i, i + 2]
    # 6 x 5: the last row's element of the diagonal is the background's (no row of the key)
    assert read(eye[:, :-1]) == (False, {0: [1.0] * 5 + [0.0]}, {0: list(range(5))})
    assert read(-2.0 * eye) == (True, {0: [-2.0] * 6}, {0: list(range(6))})  # -0.0 off the diagonal
    mixed = eye.copy()
    mixed[0, 3] = -0.0  # zeros of both signs off the diagonal: not one background
    mixed[1, 4] = -0.0
    mixed[2, 5] = -0.0
    assert banded._read_bands(mixed, 6, 6) is not None  # one more diagonal (key 3) of -0.0
    mixed[3, 0] = mixed[4, 2] = mixed[5, 1] = mixed[0, 1] = -0.0
    assert banded._read_bands(mixed, 6, 6) is None  # more diagonals than max_bands
    assert banded._read_bands(np.ones((6, 6)), 6, 6) is None  # six diagonals
    fortran = np.asfortranarray(eye + np.eye(6, k=1))  # read in C order (copied once)
    assert sorted(banded._constant_bands(fortran, ((), 6, 0, 6), {})[1]) == [0, 1]
    assert banded._constant_bands(np.eye(6)[:, None, :], ((), 6, 1, 6), {}) is not None  # a size-1 axis
    assert banded._constant_bands(np.eye(6), ((), 6, 1, 6), {}) is None  # another shape than the result's


# --- random stencils -------------------------------------------------------------------------------------
STEPS = {
    "roll": "v = v.roll(site={s})",
    "add_rolled_state": "v = v + x.roll(site={s})",
    "times_rolled_state": "v = v * x.roll(site={s})",
    "rolled_times_self": "v = v.roll(site={s}) * v",
    "minus_number": "v = v - {c}",
    "number_minus": "v = {c} - v",
    "divided": "v = v / (2.0 + x ** 2)",
    "number_over": "v = 1.5 / (2.0 + v ** 2)",
    "negated": "v = -v",
    "scaled": "v = v * {c}",
    "per_member": "v = v * a",  # a per-member number when vmapped: one value per matrix
    # not periodic: slices, pads, xarray's shift and diff (a shift fills NaN unless told otherwise)
    "forward_difference": "v = (v.isel(site=slice(1, None)) - v.isel(site=slice(None, -1))).pad(site=(1, 0), "
                          "constant_values=0.0)",
    "chain": "v = (v.isel(site=slice(None, -1)) * x.isel(site=slice(1, None))).pad(site=(0, 1), constant_values=0.0)",
    "rosenbrock_terms": "v = (100.0 * (v.isel(site=slice(1, None)) - v.isel(site=slice(None, -1)) ** 2) ** 2"
                        " + (1.0 - v.isel(site=slice(None, -1))) ** 2).pad(site=(0, 1), constant_values=0.0)",
    "shifted": "v = v + v.shift(site={s}, fill_value=0.0)",
    "shifted_nan": "v = v * v.shift(site=1).fillna(2.0)",
    "diffed": "v = v.diff('site', label='upper').pad(site=(1, 0), constant_values=0.0) * x",
    # a sum reads the matrix whole (written there), and banded operations go on from it (read back)
    "tapped": "v = v * x.roll(site=1) + v.sum() * 0.25",
    "sine": "v = np.sin(v)",  # outside the pass's operations: the matrix is computed in full there
    "difference": "v = v - v.roll(site={s})",
}


@st.composite
def stencils(draw):
    lines = []
    for _ in range(draw(st.integers(1, 6))):
        step = draw(st.sampled_from(sorted(STEPS)))
        lines.append(STEPS[step].format(s=draw(st.integers(-3, 3)), c=draw(st.sampled_from([0.5, -2.0, 0.0]))))
    return lines


@settings(max_examples=int(os.environ.get("BAND_EXAMPLES", 60)), deadline=None)
@given(lines=stencils(), sites=st.integers(2, 9), transform=st.sampled_from(["jacrev", "jacfwd", "hessian"]),
       special=st.sampled_from([None, -0.0, np.inf, np.nan]), every_band=st.booleans(),
       members=st.sampled_from([None, 1, 3]), output=st.sampled_from(["v", "v", "v.isel(site=slice(1, None))"]))
def test_random_stencils_replay_their_jacobians_bit_for_bit(lines, sites, transform, special, every_band, members,
                                                            output):
    """Random programs of rolls, slices, pads, shifts and differences, sums, products and
    quotients (and a sine the pass does not take), their Jacobians (square, or rectangular
    where the output drops a site) and Hessians jitted with the pass at every size, alone
    or vmapped over members, diagonals that coincide on small grids (``every_band``:
    max_bands lifted), signed zeros, infinities and NaNs in the state: the replay's bytes
    are the eager transform's."""
    namespace = {"np": np}
    exec("def model(x, a):\n    v = x\n" + "".join(f"    {line}\n" for line in lines) + f"    return {output}\n",
         namespace)
    model = namespace["model"]
    shape, dims = ((sites,), ("site",)) if members is None else ((members, sites), ("member", "site"))
    scale = xr.DataArray(-1.5) if members is None else xr.DataArray(np.linspace(-1.5, 2.0, members), dims="member")
    saved = thresholds.BAND_MIN_SIZE, banded.max_bands
    thresholds.BAND_MIN_SIZE = 0
    if every_band:
        banded.max_bands = lambda n: n
    try:
        if transform == "hessian":  # forward over reverse, of a scalar of the stencil
            jacobian = lf.hessian(lambda x, a: (model(x, a) ** 2).sum())
        else:
            jacobian = getattr(lf, transform)(model)
        if members is not None:
            jacobian = lf.vmap(jacobian, dim="member")
        jitted = lf.jit(jacobian)
        rng = np.random.default_rng(sites)
        with np.errstate(all="ignore"):
            jitted(xr.DataArray(rng.normal(size=shape), dims=dims), scale)
            x = rng.normal(size=shape)
            if special is not None:
                x[..., sites // 2] = special
            state = xr.DataArray(x, dims=dims)
            assert_same_bytes(jitted(state, scale * 0.5).values, jacobian(state, scale * 0.5).values)
    finally:
        thresholds.BAND_MIN_SIZE, banded.max_bands = saved


# --- the operator table's Jacobians ----------------------------------------------------------------------
def _table():
    from opinfo import OP_DB
    return [op for op in OP_DB if op.differentiable and not op.dynamic_shape_args
            and np.dtype(np.float64) in op.dtypes]


def _flat_jacobian_cases(op):
    """The table's first float64 sample of ``op``, as a function of its first float array
    flattened (1-D in, the float outputs flattened and joined out): its Jacobians are n x m
    matrices, square for the elementwise entries (a diagonal through the pass)."""
    from opinfo import array_positions, examples
    for (sample, other) in (pair[:2] for pair in examples(op, np.float64, 2)):
        positions = [j for j in array_positions(sample) if sample.args[j].dtype == np.float64
                     and j not in op.integer_index_args and sample.args[j].size]
        if not positions:
            continue
        j, shape = positions[0], sample.args[positions[0]].shape

        def function(v, sample=sample, j=j, shape=shape):
            args = list(sample.args)
            args[j] = v.reshape(shape)
            out = op.differentiated(*args, **sample.kwargs)
            parts = [p for p in (out if isinstance(out, (tuple, list)) else [out]) if np.dtype(p.dtype).kind == "f"]
            return np.concatenate([np.reshape(p, -1) * 1.0 for p in parts])

        return function, sample.args[j].reshape(-1), other.args[j].reshape(-1)
    return None


@pytest.mark.parametrize("op", [pytest.param(op, id=op.name) for op in _table()])
def test_the_tables_jacobians_replay_bit_for_bit_with_the_pass_at_every_size(op, at_every_size):
    """Every differentiable entry's Jacobian (jacrev and jacfwd) of its first float array,
    jitted with the pass at every size: the trace's and the replay's bytes are the eager
    transform's (NaN where NaN). An elementwise entry's Jacobian is a diagonal (the basis
    times the partials): through the pass; the others are computed as recorded."""
    case = _flat_jacobian_cases(op)
    if case is None:
        pytest.skip(f"{op.name}: no float64 array argument")
    function, first, second = case
    ran = 0
    for transform in (lf.jacrev, lf.jacfwd):
        jacobian = transform(function)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                expected = [jacobian(first), jacobian(second)]
            except (lf.TransformError, TypeError, ValueError):
                continue  # not this transform's (complex outputs, refusals): the table's own tests say
            jitted = lf.jit(jacobian)
            got = [jitted(first), jitted(second)]
        for g, e in zip(got, expected):
            assert_same_bytes(g, e)
        ran += 1
    if not ran:
        pytest.skip(f"{op.name}: no Jacobian under jacrev or jacfwd")


def _elementwise_table():
    import functools

    from opinfo import elementwise_samples
    return [op for op in _table() if isinstance(op.sample_inputs, functools.partial)
            and op.sample_inputs.func is elementwise_samples]


@pytest.mark.parametrize("op", [pytest.param(op, id=op.name) for op in _elementwise_table()])
def test_the_diagonal_jacobians_of_elementwise_entries_replay_bit_for_bit(op, at_every_size):
    """Each elementwise entry of the table as a function of one 1-D argument (the others
    fixed), its Jacobians jitted: the basis times the partials is a diagonal that the pass
    computes as a vector, in every argument position; the bytes of the trace and of the
    replay are the eager transform's (NaN where NaN)."""
    from opinfo import make_array
    domains = op.sample_inputs.keywords["domains"]
    rng = np.random.default_rng(len(op.name))
    draws = [[make_array(rng, (7,), np.float64, domain) for domain in domains] for _ in range(2)]
    fired = 0
    for position in range(len(domains)):
        def function(v, position=position, args=draws[0]):
            return op.differentiated(*args[:position], v, *args[position + 1:]) * 1.0

        for transform in (lf.jacrev, lf.jacfwd):
            jacobian = transform(function)
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    expected = [jacobian(draw[position]) for draw in draws]
                except (lf.TransformError, TypeError, ValueError):
                    continue
                jitted = lf.jit(jacobian)
                got = [jitted(draw[position]) for draw in draws]
            for g, e in zip(got, expected):
                assert_same_bytes(g, e)
            fired += banded_nodes(jitted)
    if not fired:
        pytest.skip(f"{op.name}: no banded node (a constant Jacobian, or partials of another form)")


def test_a_pad_moves_a_background_of_one_value_per_matrix_into_the_wrapped_diagonals():
    """Three 5 x 5 matrices of one diagonal (key 4, wrapping) over one value each, padded
    with a column of zeros before: the new diagonals' wrapped rows take the background
    (a dim of 1 per matrix), against NumPy's pad of the dense matrices. (Found by review:
    the background was read with an extra dim.)"""
    form = banded._Form((3,), 5, 0, 5, {4: np.ones(5, bool)}, None)
    params = {"pad_width": ((0, 0), (0, 0), (1, 0)), "constant_values": ((0, 0), (0, 0), (0, 0))}
    rows, columns = banded._padded(params, form)
    keys, background, moves, backgrounds = banded._plan(form, rows, columns, False, 5, 6)
    step = banded_run._move_step(("move", 0, moves, backgrounds), form, banded._Form((3,), 5, 0, 6, keys, background))
    diagonal, per_matrix = np.arange(15.0).reshape(3, 5), np.array([[1.5], [-2.0], [0.25]])
    moved = step({0: banded_run._Value(per_matrix, None, (4,), diagonal[:, None, :])}, ())
    on = np.roll(np.eye(5, dtype=bool), 4, axis=1)
    expected = np.pad(np.where(on, diagonal[:, :, None], per_matrix[:, :, None]), ((0, 0), (0, 0), (1, 0)))
    got = np.empty((3, 5, 6))
    np.copyto(got, moved.background[..., None, :] if moved.axis == "col" else moved.background[..., :, None])
    rows_index = np.arange(5)
    for j, key in enumerate(moved.keys):
        got.reshape(3, 30)[..., rows_index * 6 + (rows_index + key) % 6] = moved.stack[..., j, :]
    assert_same_bytes(got, expected)
    assert moved.keys == (0, 5) and moved.axis == "col"


def test_a_matrix_written_as_an_output_is_read_back_by_the_diagonals_after_it(at_every_size):
    """Forward mode through a model with two outputs, the second made from the first: the
    first's Jacobian is written (an output), and the banded operations after it read its
    diagonals back from that matrix instead of computing them again (each diagonal once
    per run, however many matrices are written): the same bytes."""
    def model(x):
        v = x.roll(site=1) * x
        return v, v * x.roll(site=-1) - x.roll(site=2)

    jacobian = lf.jacfwd(model)
    jitted = lf.jit(jacobian)
    state = xr.DataArray(np.random.default_rng(8).normal(size=40), dims="site")
    jitted(state)
    for got, expected in zip(jitted(state * 1.5), jacobian(state * 1.5)):
        assert_same_bytes(got.values, expected.values)
    (compiled,) = jitted.cache.values()
    written = {node.slot for node in compiled.program.nodes if getattr(node.function, "__name__", "") == "banded"}
    assert any(ref in written for node in compiled.program.nodes if node.slot in written for ref in node.refs)
