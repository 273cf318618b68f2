"""Derivatives of every entry of the operator table, in the style of JAX's ``check_grads``.

Float64 and complex128 (``power_int``, without them, has nothing to differentiate).
Each entry's ``differentiated`` function (its ``ad_op`` where set: eigh on ``A + A^T``,
sign-free eigenvectors) is differentiated with respect to its floating and complex array
arguments; integer index arrays, boolean masks and Python scalars are held fixed. The
oracles are independent of the rules under test:

1. the JVP in a random direction against central finite differences (of a complex
   argument: in a real, an imaginary and a general complex direction);
2. the VJP by the inner-product identity <J^T u, v> = <u, J v> (J v from 1), with the
   pairing <a, b> = Re sum(a b) of the complex convention (JAX's: the VJP of a
   holomorphic f is u f'(z), and the gradient of a real L is dL/dx - i dL/dy);
3. order 2: the JVP of the VJP function against finite differences of that function
   (forward-over-reverse), and the VJP of the JVP function by the inner-product identity
   with finite differences of the JVP function (reverse-over-forward);
4. non-differentiable entries: zero tangents and cotangents, never an error;
5. compositions through the public API: jacfwd == jacrev (and a Jacobian column
   against finite differences; of complex functions ``holomorphic=True`` where the entry
   is holomorphic, jacrev alone of a real output, jacfwd alone of a real input), vmap of
   grad / vjp / jvp against a loop, jvp of grad against finite differences of grad, grad
   of grad against calculus, and the Hessian symmetric and equal to jacfwd(jacrev) (of a
   complex argument, with respect to its real and imaginary parts). vmap over a primal
   whose values fix the output's shape (``dynamic_shape_args``: nonzero, unique) must
   raise DynamicShapeError.

Parts 1-4 use the engine levels directly (``ad_helpers``), so they check the rules
before and apart from the public transforms. One test per entry runs all of its samples
and lists every failing call, as in ``test_ops_vmap.py``. Where an output element is
NaN (``fmax`` of two NaNs) its derivative is undefined and is not compared; compositions
use float64, finite samples only (``astype`` to float32 rounds above their tolerances).
"""

import math
import zlib

import numpy as np
import pytest

import labeled_func as lf
from ad_helpers import central_difference, engine_jvp, engine_vjp
from opinfo import OP_DB, case, examples, report

F64 = np.dtype(np.float64)
C128 = np.dtype(np.complex128)
EPS = 1e-6  # central differences: truncation ~ EPS**2, rounding ~ 1e-16 / EPS
RTOL = 1e-6
IDENTITY_RTOL = 1e-9  # <J^T u, v> and <u, J v> differ by rounding only
LOOP_RTOL = 1e-10  # a transform against the same transform in a loop
BATCH = 3  # examples per vmap

# Samples a test must leave out, keyed by (test, entry, sample); "*" is every test.
SINGLETON_STD = "std of one element is sqrt(0), on sqrt's kink: NaN derivative (as in JAX and torch)"
SKIP_SAMPLES = {
    ("*", "std", "(float64[])"): SINGLETON_STD,
    ("*", "std", "(float64[1, 4], axis=0)"): SINGLETON_STD,
    ("*", "std", "(complex128[])"): SINGLETON_STD,
    ("*", "std", "(complex128[1, 4], axis=0)"): SINGLETON_STD,
    ("*", "nanstd", "(float64[])"): SINGLETON_STD,
    ("*", "nanstd", "(float64[1, 4], axis=0)"): SINGLETON_STD,
}

def cases(differentiable):
    """(op, dtype) per entry and dtype among float64 and complex128 (float64 keeps the
    entry's name as its id)."""
    return [
        case(op, "grad", dtype, id=op.name if dtype == F64 else None)
        for op in OP_DB
        if op.differentiable == differentiable
        for dtype in (F64, C128)
        if dtype in op.dtypes
    ]


DIFFERENTIABLE = cases(True)
NON_DIFFERENTIABLE = cases(False)


# ------------------------------------------------------------- 1. JVP vs differences


@pytest.mark.parametrize("op, dtype", DIFFERENTIABLE)
def test_jvp_matches_finite_differences(op, dtype):
    def check(fn, primals, rng):
        for part in PARTS if any(np.iscomplexobj(p) for p in primals) else ("both",):
            assert_jvp_matches_differences(fn, primals, rng, what=f"J v ({part} direction)", part=part)

    run_samples(op, dtype, check)


# -------------------------------------------------------- 2. VJP by the inner product


@pytest.mark.parametrize("op, dtype", DIFFERENTIABLE)
def test_vjp_inner_product_identity(op, dtype):
    def check(fn, primals, rng):
        u = cotangent_like(fn(*primals), rng)
        vs = directions(primals, rng)
        _, pulled = engine_vjp(fn, primals, u)
        _, pushed = engine_jvp(fn, primals, vs)
        # float32 outputs (astype) carry ~1e-7 rounding into both products
        rtol = IDENTITY_RTOL if u.dtype in (F64, C128) else 1e-6
        assert_inner_products_agree(pulled, vs, u, pushed, primals, rtol)

    run_samples(op, dtype, check)


# ------------------------------------------------------------------- 3. second order


@pytest.mark.parametrize("op, dtype", DIFFERENTIABLE)
def test_jvp_of_vjp_matches_finite_differences(op, dtype):
    """Forward-over-reverse: the JVP of x -> J(x)^T u against differences of it."""

    def check(fn, primals, rng):
        u = cotangent_like(fn(*primals), rng)
        for k in range(len(primals)):
            pullback_k = lambda *xs, k=k: engine_vjp(fn, xs, u)[1][k]
            assert_jvp_matches_differences(pullback_k, primals, rng, what=f"d/dx (J^T u)[{k}]")

    run_samples(op, dtype, check)


@pytest.mark.parametrize("op, dtype", DIFFERENTIABLE)
def test_vjp_of_jvp_inner_product_identity(op, dtype):
    """Reverse-over-forward: the VJP of x -> J(x) t, with its J v by differences."""

    def check(fn, primals, rng):
        ts = directions(primals, rng)
        pushforward = lambda *xs: engine_jvp(fn, xs, ts)[1]
        u = cotangent_like(fn(*primals), rng)
        vs = directions(primals, rng)
        _, pulled = engine_vjp(pushforward, primals, u)
        differences = central_difference(pushforward, primals, vs, EPS)
        assert_inner_products_agree(pulled, vs, u, differences, primals, RTOL)

    run_samples(op, dtype, check)


# ----------------------------------------------------------- 4. not differentiable


@pytest.mark.parametrize("op, dtype", NON_DIFFERENTIABLE)
def test_nondifferentiable_has_zero_derivatives(op, dtype):
    """Comparisons, rounding, argmax, *_like...: the value is the op's, the tangent is
    zero or absent, the cotangent is zero; neither mode raises. The VJP goes through
    ``lf.vjp``: ``engine_vjp`` cannot seed the constant tracer that ``*_like`` returns."""

    def check(fn, primals, rng):
        expected = np.asarray(fn(*primals))
        tangents = tuple(directions(primals, rng))
        pushed = {"engine_jvp": engine_jvp(fn, primals, tangents), "lf.jvp": lf.jvp(fn, tuple(primals), tangents)}
        for label, (out, tangent) in pushed.items():
            if op.compare_values:
                np.testing.assert_array_equal(np.asarray(out), expected, err_msg=f"{label} primal")
            if tangent is not None:
                assert not np.any(np.asarray(tangent)), f"{label}: nonzero tangent {tangent!r}"
        out, pullback = lf.vjp(fn, *primals)
        if op.compare_values:
            np.testing.assert_array_equal(np.asarray(out), expected, err_msg="lf.vjp primal")
        pulled = pullback(cotangent_like(expected, rng))
        assert len(pulled) == len(primals), f"{len(pulled)} cotangents for {len(primals)} inputs"
        for g, p in zip(pulled, primals):
            assert np.shape(g) == p.shape, f"cotangent shape {np.shape(g)} != input's {p.shape}"
            assert not np.any(np.asarray(g)), f"nonzero cotangent {g!r}"

    run_samples(op, dtype, check)


# ---------------------------------------------- 5. compositions through the public API


@pytest.mark.parametrize("op, dtype", DIFFERENTIABLE)
def test_jacfwd_equals_jacrev(op, dtype):
    """Of complex functions, by JAX's rules: ``holomorphic=True`` where the entry is
    holomorphic (both give f'(z)); jacrev alone of a real output (its rows are gradients,
    dL/dx - i dL/dy: Re(row . v) is the derivative along v); jacfwd alone of real inputs;
    and without the flag jacfwd of a complex input, jacrev of a complex output raise."""

    def check(fn, primals, rng):
        argnums = tuple(range(len(primals)))
        out = np.asarray(fn(*primals))
        vs = directions(primals, rng)
        complex_in = any(np.iscomplexobj(p) for p in primals)
        complex_out = np.iscomplexobj(out)
        holomorphic = complex_in and complex_out and op.holomorphic and all(np.iscomplexobj(p) for p in primals)
        if complex_in and not holomorphic:
            with pytest.raises(TypeError, match="jacfwd: argument"):
                lf.jacfwd(fn, argnums=argnums)(*primals)
        if complex_out and not holomorphic:
            with pytest.raises(TypeError, match="jacrev: the output is complex"):
                lf.jacrev(fn, argnums=argnums)(*primals)
        forward = lf.jacfwd(fn, argnums=argnums, holomorphic=holomorphic)(*primals) if holomorphic or not complex_in else None
        reverse = lf.jacrev(fn, argnums=argnums, holomorphic=holomorphic)(*primals) if holomorphic or not complex_out else None
        for k, p in enumerate(primals):
            for name, jacobian in (("jacfwd", forward), ("jacrev", reverse)):
                if jacobian is not None:
                    shape = np.shape(jacobian[k])
                    assert shape == out.shape + p.shape, f"{name}[{k}] shape {shape} != {out.shape} + {p.shape}"
            if forward is not None and reverse is not None:
                assert_close(np.asarray(reverse[k]), np.asarray(forward[k]), LOOP_RTOL, f"jacrev[{k}] vs jacfwd[{k}]")
        if forward is None and reverse is None:
            return
        # one independent column: J v against differences (a gradient row pairs by Re(row v))
        jacobian = forward if forward is not None else reverse
        column = sum(np.tensordot(np.asarray(j), v, axes=v.ndim) for j, v in zip(jacobian, vs))
        if not complex_out:
            column = np.real(column)
        assert_close(column, central_difference(fn, primals, vs, EPS), RTOL, "jacobian @ v vs differences")

    run_samples(op, dtype, check, compositions=True)


@pytest.mark.parametrize("op, dtype", DIFFERENTIABLE)
def test_vmap_of_grad_matches_loop(op, dtype):
    def check(fn, batch, rng, shape_fixing):
        gradient = lf.grad(scalarised(fn), argnums=tuple(range(len(batch))))
        for in_dims in mapped_choices(len(batch)):
            if raises_dynamic_shape_error(gradient, batch, in_dims, shape_fixing):
                continue
            vmapped = lf.vmap(gradient, in_dims=in_dims)(*mapped_inputs(batch, in_dims))
            looped = [gradient(*example_inputs(batch, in_dims, b)) for b in range(BATCH)]
            assert_matches_loop(vmapped, looped, f"vmap(grad, in_dims={in_dims})")

    run_samples(op, dtype, check, batch=BATCH, compositions=True)


@pytest.mark.parametrize("op, dtype", DIFFERENTIABLE)
def test_vmap_of_vjp_matches_loop(op, dtype):
    """The cotangent is shared by all examples."""

    def check(fn, batch, rng, shape_fixing):
        u = cotangent_like(fn(*[x[0] for x in batch]), rng)
        pull = lambda *xs: lf.vjp(fn, *xs)[1](u)
        for in_dims in mapped_choices(len(batch)):
            if raises_dynamic_shape_error(pull, batch, in_dims, shape_fixing):
                continue
            vmapped = lf.vmap(pull, in_dims=in_dims)(*mapped_inputs(batch, in_dims))
            looped = [pull(*example_inputs(batch, in_dims, b)) for b in range(BATCH)]
            assert_matches_loop(vmapped, looped, f"vmap(vjp, in_dims={in_dims})")

    run_samples(op, dtype, check, batch=BATCH, compositions=True)


@pytest.mark.parametrize("op, dtype", DIFFERENTIABLE)
def test_vmap_of_jvp_matches_loop(op, dtype):
    """The tangents are mapped wherever their primals are."""

    def check(fn, batch, rng, shape_fixing):
        n = len(batch)
        tangents = directions(batch, rng)
        push = lambda *xs_and_ts: lf.jvp(fn, xs_and_ts[:n], xs_and_ts[n:])[1]
        for in_dims in mapped_choices(n):
            both = batch + tangents
            if raises_dynamic_shape_error(push, both, in_dims * 2, shape_fixing):
                continue
            vmapped = lf.vmap(push, in_dims=in_dims * 2)(*mapped_inputs(both, in_dims * 2))
            looped = [(push(*example_inputs(both, in_dims * 2, b)),) for b in range(BATCH)]
            assert_matches_loop((vmapped,), looped, f"vmap(jvp, in_dims={in_dims})")

    run_samples(op, dtype, check, batch=BATCH, compositions=True)


@pytest.mark.parametrize("op, dtype", DIFFERENTIABLE)
def test_jvp_of_grad_matches_finite_differences(op, dtype):
    def check(fn, primals, rng):
        argnums = tuple(range(len(primals)))
        gradient = lf.grad(scalarised(fn), argnums=argnums)
        ts = directions(primals, rng)
        _, pushed = lf.jvp(gradient, tuple(primals), tuple(ts))
        for k in argnums:
            differences = central_difference(lambda *xs, k=k: gradient(*xs)[k], primals, ts, EPS)
            assert_close(np.asarray(pushed[k]), differences, RTOL, f"jvp(grad)[{k}]")

    run_samples(op, dtype, check, compositions=True)


@pytest.mark.parametrize("op, dtype", DIFFERENTIABLE)
def test_hessian_is_symmetric_and_jacfwd_of_jacrev(op, dtype):
    """Of the scalarised op as a function of its first float argument (of a complex one,
    as a function of its real and imaginary parts, stacked: hessian itself refuses a
    complex argument)."""

    def check(fn, primals, rng):
        x, rest = primals[0], primals[1:]
        loss = scalarised(lambda x: fn(x, *rest))
        if np.iscomplexobj(x):
            with pytest.raises(TypeError, match="hessian: argument"):
                lf.hessian(loss)(x)
            complex_loss = loss
            loss = lambda parts: complex_loss(parts[0] + 1j * parts[1])
            x = np.stack([x.real, x.imag])
        hessian = np.asarray(lf.hessian(loss)(x))
        nested = np.asarray(lf.jacfwd(lf.jacrev(loss))(x))
        assert hessian.shape == x.shape + x.shape, f"hessian shape {hessian.shape} for input {x.shape}"
        assert_close(nested, hessian, LOOP_RTOL, "jacfwd(jacrev) vs hessian")
        square = hessian.reshape(x.size, x.size)
        assert_close(square.T, square, 1e-8, "hessian symmetry")
        v = rng.normal(size=x.shape)
        differences = central_difference(lf.grad(loss), [x], [v], EPS)
        assert_close(np.tensordot(hessian, v, axes=x.ndim), differences, RTOL, "hessian @ v vs differences")

    run_samples(op, dtype, check, compositions=True)


# f, f'' by calculus, and where to evaluate
SECOND_DERIVATIVES = [
    ("sin", np.sin, lambda x: -np.sin(x), 0.7),
    ("exp", np.exp, np.exp, -0.3),
    ("log", np.log, lambda x: -1 / x**2, 1.7),
    ("tanh", np.tanh, lambda x: -2 * np.tanh(x) / np.cosh(x) ** 2, 0.4),
    ("sqrt", np.sqrt, lambda x: -0.25 * x**-1.5, 2.3),
    ("arctan", np.arctan, lambda x: -2 * x / (1 + x**2) ** 2, 0.9),
    ("reciprocal", np.reciprocal, lambda x: 2 / x**3, -1.3),
    ("power", lambda x: x**3.5, lambda x: 3.5 * 2.5 * x**1.5, 1.2),
    ("cosh", np.cosh, np.cosh, -0.8),
    ("log1p", np.log1p, lambda x: -1 / (1 + x) ** 2, 0.6),
]


@pytest.mark.parametrize("f, second, x", [pytest.param(*case[1:], id=case[0]) for case in SECOND_DERIVATIVES])
def test_grad_of_grad_matches_calculus(f, second, x):
    for point in (np.float64(x), np.asarray(x)):
        actual = lf.grad(lf.grad(f))(point)
        np.testing.assert_allclose(float(np.asarray(actual)), second(x), rtol=1e-12)


# ------------------------------------------------------------------- sample plumbing


def run_samples(op, dtype, check, *, batch=None, compositions=False):
    """``check(fn, primals, rng)`` on every sample of ``op`` in ``dtype``, with
    ``fn`` a function of the sample's float arrays only and, where the op returns a
    tuple or list, one call per output (with ``compositions``, per float64 or complex128
    output). With
    ``batch=n`` the primals are ``n`` examples of the sample stacked along axis 0 (``fn``
    keeps the first one's fixed arguments), and ``check`` gets a fourth argument: the
    indices of the primals that fix the output's shape (``dynamic_shape_args``)."""
    failures, calls = [], 0
    for index, sample_examples in enumerate(examples(op, dtype, batch or 1)):
        sample = sample_examples[0]
        fn, primals, positions = float_view(op, sample.args, sample.kwargs)
        if not primals or skipped(check, op, sample):
            continue
        out = op.differentiated(*sample.args, **sample.kwargs)
        parts = range(len(out)) if isinstance(out, (tuple, list)) else [None]
        if compositions:
            # a batch keeps NaN outputs: the loop has the same NaNs where no derivative exists
            parts = [p for p in parts if composable(out if p is None else out[p], finite=batch is None)]
        if batch:
            per_example = [float_view(op, example.args, example.kwargs)[1] for example in sample_examples]
            primals = [np.stack(arrays) for arrays in zip(*per_example)]
        for part in parts:
            calls += 1
            rng = np.random.default_rng([zlib.crc32(op.name.encode()), index, 0 if part is None else part])
            # with a batch: which primals fix the output's shape (vmap over them is a policy error)
            extra = ([k for k, j in enumerate(positions) if j in op.dynamic_shape_args],) if batch else ()
            try:
                check(fn if part is None else output_part(fn, part), primals, rng, *extra)
            except Exception as error:  # noqa: BLE001 - every failing call is listed
                label = f"{sample!r}" + ("" if part is None else f" output {part}")
                failures.append(describe(label, error))
    report(op, failures, calls)


def skipped(check, op, sample):
    test = check.__qualname__.split(".")[0]
    return any((key, op.name, repr(sample)) in SKIP_SAMPLES for key in (test, "*"))


def float_view(op, args, kwargs):
    """``op.differentiated`` as a function of its float array arguments, the rest held
    fixed; the float arrays, and their positions among the arguments."""
    positions = [
        j
        for j, a in enumerate(args)
        if isinstance(a, np.ndarray) and a.dtype.kind in "fc" and j not in op.integer_index_args
    ]

    def fn(*floats):
        call = list(args)
        for j, value in zip(positions, floats):
            call[j] = value
        return op.differentiated(*call, **kwargs)

    return fn, [args[j] for j in positions], positions


def mapped_choices(count):
    """vmap's in_dims: every argument mapped, then (with several) only the first, only the last."""
    if count == 1:
        return [(0,)]
    return [(0,) * count, (0,) + (None,) * (count - 1), (None,) * (count - 1) + (0,)]


def raises_dynamic_shape_error(function, batch, in_dims, shape_fixing):
    """Whether ``in_dims`` maps a primal that fixes the output's shape; if so, vmap of
    ``function`` must raise a DynamicShapeError (the policy), checked here."""
    if not any(in_dims[k] is not None for k in shape_fixing):
        return False
    with pytest.raises(lf.DynamicShapeError):
        lf.vmap(function, in_dims=in_dims)(*mapped_inputs(batch, in_dims))
    return True


def mapped_inputs(batch, in_dims):
    """The stacked arrays where mapped, the first example where not."""
    return [x if d == 0 else x[0] for x, d in zip(batch, in_dims)]


def example_inputs(batch, in_dims, b):
    """Example ``b`` of the mapped arrays, the first example of the others."""
    return [x[b] if d == 0 else x[0] for x, d in zip(batch, in_dims)]


def output_part(fn, part):
    return lambda *xs: fn(*xs)[part]


def composable(out, finite=True):
    """Float64 or complex128 and finite: a NaN output has no derivative to compose, and a
    float32 one (astype) rounds far above the differences and loop tolerances used here."""
    parts = [np.asarray(o) for o in as_parts(out)]
    return all(part.dtype in (F64, C128) and (not finite or np.isfinite(part).all()) for part in parts)


def scalarised(fn):
    """A real scalar loss of every output, nonlinear even where ``fn`` is linear (of a
    complex output, of both its parts)."""
    return lambda *xs: sum(np.sum(_real_loss(part)) for part in as_parts(fn(*xs)))


def _real_loss(part):
    if np.iscomplexobj(part):
        return np.sin(np.real(part)) + np.cos(np.imag(part))
    return np.sin(part)


def as_parts(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


PARTS = ("real", "imag", "both")  # the directions in which a complex argument moves


def directions(arrays, rng, part="both"):
    """Random tangents: real for real arrays; for complex ones purely real, purely
    imaginary or general (``part``)."""
    return [_direction(np.shape(a), np.iscomplexobj(a), rng, part) for a in arrays]


def _direction(shape, is_complex, rng, part):
    real = rng.normal(size=shape)
    if not is_complex or part == "real":
        return real.astype(complex) if is_complex else real
    return 1j * real if part == "imag" else real + 1j * rng.normal(size=shape)


def cotangent_like(out, rng):
    """A random cotangent, zero where the output is not finite."""
    out = np.asarray(out)
    u = _direction(out.shape, np.iscomplexobj(out), rng, "both").astype(out.dtype)
    return np.where(np.isfinite(out), u, 0).astype(out.dtype)


def assert_jvp_matches_differences(fn, primals, rng, what="J v", part="both"):
    tangents = directions(primals, rng, part)
    out, tangent = engine_jvp(fn, primals, tangents)
    out = np.asarray(out)
    tangent = np.zeros(out.shape) if tangent is None else np.asarray(tangent)  # None: a zero tangent
    assert tangent.shape == out.shape, f"{what}: tangent shape {tangent.shape} != output's {out.shape}"
    # float32 outputs (astype) round at ~1e-7: a longer step keeps the difference exact
    # (integer outputs, piecewise constant, keep the short one: a long one could cross a step)
    single = out.dtype in (np.float32, np.complex64)
    eps = 1e-2 if single else EPS
    differences = central_difference(fn, primals, tangents, eps)
    rtol = 1e-4 if single else RTOL
    defined = np.isfinite(out)
    assert_close(tangent[defined], differences[defined], rtol, f"{what} vs differences")


def assert_inner_products_agree(pulled, vs, u, pushed, primals, rtol):
    """<pulled, vs> == <u, pushed>; ``u`` is zero where the output is undefined."""
    assert len(pulled) == len(primals), f"{len(pulled)} cotangents for {len(primals)} inputs"
    for k, (g, p) in enumerate(zip(pulled, primals)):
        assert np.shape(g) == p.shape, f"cotangent {k} shape {np.shape(g)} != input's {p.shape}"
    # Re sum(a b): the bilinear pairing of the complex convention (the plain dot product
    # of real arrays); a real input's cotangent is real
    for k, (g, p) in enumerate(zip(pulled, primals)):
        assert np.iscomplexobj(p) or not np.iscomplexobj(g), f"complex cotangent {k} of a real input"
    left_terms = [np.real(np.asarray(g) * v) for g, v in zip(pulled, vs)]
    assert all(np.isfinite(t).all() for t in left_terms), f"non-finite cotangent: {pulled!r}"
    right_terms = np.where(u != 0, np.real(u * np.asarray(pushed)), 0.0)
    left = sum(float(np.sum(t)) for t in left_terms)
    right = float(np.sum(right_terms))
    scale = sum(float(np.sum(np.abs(t))) for t in left_terms) + float(np.sum(np.abs(right_terms)))
    assert math.isclose(left, right, rel_tol=rtol, abs_tol=rtol * (1 + scale)), (
        f"<J^T u, v> = {left!r} but <u, J v> = {right!r}"
    )


def assert_close(actual, expected, rtol, what, equal_nan=False):
    """Elementwise, with an absolute floor relative to the largest finite expected value."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    wide = np.result_type(actual, expected, F64)
    actual, expected = actual.astype(wide), expected.astype(wide)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    largest = float(np.max(np.abs(expected), initial=0.0, where=np.isfinite(expected)))
    atol = rtol * (1 + largest)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, err_msg=what)


def assert_matches_loop(vmapped, looped, what):
    assert len(vmapped) == len(looped[0]), f"{what}: {len(vmapped)} results, the loop has {len(looped[0])}"
    for k, batched in enumerate(vmapped):
        expected = np.stack([np.asarray(results[k]) for results in looped])
        assert_close(np.asarray(batched), expected, LOOP_RTOL, f"{what}[{k}] vs loop", equal_nan=True)


def describe(label, error):
    lines = str(error).strip().splitlines()
    shown = " | ".join(line.strip() for line in lines[:4] if line.strip())
    return f"{label}: {type(error).__name__}: {shown}"
