"""``lf.jit``: the replayed program computes what the traced function computes.

Oracles: the same transform without jit (bitwise: the replay runs the same kernels), on
the operator table (vmap of every entry, vmap of grad of every differentiable entry) and
on transform compositions; closed forms; NumPy.  Then the cache (a new signature traces
again, the same does not), the policies inside jit, random draws, threads, labels of the
outputs, and the errors that name the culprit.
"""
import importlib
import threading
import warnings

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
jit_module = importlib.import_module("labeled_func.jit")
from opinfo import OP_DB, array_positions, examples, with_arrays

F64 = np.dtype(np.float64)


def same(got, expected):
    """Equal values to the bit (NaN where NaN, the sign of zeros), shapes and dtypes."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(expected)
        for g, e in zip(got, expected):
            same(g, e)
        return
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    if got.dtype.kind in "fc":
        for g, e in ((got.real, expected.real), (got.imag, expected.imag)):
            np.testing.assert_array_equal(np.signbit(g) & ~np.isnan(g), np.signbit(e) & ~np.isnan(e),
                                          "signs of zeros differ")


def quietly(function, *args):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args)


# --- the operator table --------------------------------------------------------------------------
def batches(op, dtype):
    """For each sample: two batches of two examples each (one to trace, one to replay)."""
    for sample_examples in examples(op, dtype, 4):
        sample = sample_examples[0]
        positions = array_positions(sample)
        if positions:
            yield sample, [[np.stack([e.args[j] for e in sample_examples[k:k + 2]]) for j in positions]
                           for k in (0, 2)]


STATIC_SHAPES = [op for op in OP_DB if not op.dynamic_shape_args]  # the others: policy tests below


@pytest.mark.parametrize("op", [pytest.param(op, id=op.name) for op in STATIC_SHAPES])
def test_jit_of_vmap_replays_what_vmap_computes(op):
    checked = 0
    for dtype in op.dtypes:
        for sample, (first, second) in batches(op, dtype):
            mapped = lf.vmap(with_arrays(op, sample), in_dims=(0,) * len(first))
            try:
                expected = [quietly(mapped, *first), quietly(mapped, *second)]
            except lf.TransformError:
                continue  # refused under vmap (dynamic shapes, in-place policies): not jit's to do
            jitted = lf.jit(mapped)
            got = [quietly(jitted, *first), quietly(jitted, *second)]
            assert jitted.traces == 1, "the second batch has the same signature: replayed"
            if op.compare_values:
                for g, e in zip(got, expected):
                    same(g, e)
            checked += 1
    if not checked:
        pytest.skip(f"{op.name}: no sample runs under vmap")


DIFFERENTIABLE = [pytest.param(op, id=op.name) for op in STATIC_SHAPES if op.differentiable and F64 in op.dtypes]


@pytest.mark.parametrize("op", DIFFERENTIABLE)
def test_jit_of_vmap_of_grad_replays_what_it_computes(op):
    checked = 0
    for sample, (first, second) in batches(op, F64):
        floats = [k for k, j in enumerate(array_positions(sample)) if sample.args[j].dtype == F64
                  and j not in op.integer_index_args]
        if not floats:
            continue

        def loss(*arrays, sample=sample):
            args = list(sample.args)
            for j, value in zip(array_positions(sample), arrays):
                args[j] = value
            out = op.differentiated(*args, **sample.kwargs)
            parts = list(out) if isinstance(out, (tuple, list)) else [out]
            return sum(np.sum(part * 1.0) for part in parts if np.dtype(part.dtype).kind == "f")

        per_example = lf.vmap(lf.grad(loss, argnums=tuple(floats)), in_dims=(0,) * len(first))
        try:
            expected = [quietly(per_example, *first), quietly(per_example, *second)]
        except lf.TransformError:
            continue
        jitted = lf.jit(per_example)
        got = [quietly(jitted, *first), quietly(jitted, *second)]
        assert jitted.traces == 1
        for g, e in zip(got, expected):
            same(g, e)
        checked += 1
    if not checked:
        pytest.skip(f"{op.name}: no sample differentiates under vmap")


# --- transforms and labels --------------------------------------------------------------------------
SITES = xr.DataArray(8.0 + np.random.default_rng(0).normal(size=12), dims="site",
                     coords={"site": np.arange(12), "lon": ("site", np.linspace(0, 330, 12))}, attrs={"units": "K"})


def lorenz96(x):
    return (x.roll(site=-1) - x.roll(site=2)) * x.roll(site=1) - x + 8.0


@pytest.mark.parametrize("transform", [lf.jacrev, lf.jacfwd, lambda f: lf.hessian(lambda x: (f(x) ** 2).sum())],
                         ids=["jacrev", "jacfwd", "hessian"])
def test_jit_of_jacobians_equals_the_jacobians(transform):
    jitted = lf.jit(transform(lorenz96))
    for x in (SITES, SITES * 1.1 - 0.3):
        expected = transform(lorenz96)(x)
        got = jitted(x)
        xr.testing.assert_identical(got, expected)
    assert jitted.traces == 1


def test_outputs_keep_their_labels_and_traced_coordinates():
    def f(x):
        y = (x * 2).rename("doubled").assign_attrs(note="computed")
        y = y.assign_coords(scaled=("site", x.data * 3))  # a coordinate computed from the input
        return {"y": y, "total": x.sum(), "ds": xr.Dataset({"a": x, "b": -x}), "n": 3, "none": None}

    jitted = lf.jit(f)
    for x in (SITES, SITES + 1.0, SITES * -2.0):
        got, expected = jitted(x), f(x)
        xr.testing.assert_identical(got["y"], expected["y"])
        xr.testing.assert_identical(got["total"], expected["total"])
        xr.testing.assert_identical(got["ds"], expected["ds"])
        assert got["n"] == 3 and got["none"] is None
    assert jitted.traces == 1


def test_per_sample_gradients_of_a_dataset_match_the_closed_form():
    def ishigami(p):
        return np.sin(p.x1) + 7.0 * np.sin(p.x2) ** 2 + 0.1 * p.x3 ** 4 * np.sin(p.x1)

    rng = np.random.default_rng(1)
    per_sample = lf.jit(lf.vmap(lf.grad(ishigami), dim="sample"))
    for _ in range(3):
        v = {name: rng.uniform(-np.pi, np.pi, 50) for name in ("x1", "x2", "x3")}
        samples = xr.Dataset({name: ("sample", a) for name, a in v.items()})
        got = per_sample(samples)
        np.testing.assert_allclose(got.x1.values, np.cos(v["x1"]) * (1 + 0.1 * v["x3"] ** 4), rtol=1e-13)
        np.testing.assert_allclose(got.x2.values, 14.0 * np.sin(v["x2"]) * np.cos(v["x2"]), rtol=1e-13,
                                   atol=1e-13)
        np.testing.assert_allclose(got.x3.values, 0.4 * v["x3"] ** 3 * np.sin(v["x1"]), rtol=1e-13, atol=1e-13)
    assert per_sample.traces == 1


# --- the cache ----------------------------------------------------------------------------------------
def test_a_new_signature_traces_again_and_the_same_does_not():
    jitted = lf.jit(lambda x, scale=1.0: np.sin(x) * scale)
    x = xr.DataArray(np.arange(4.0), dims="i", coords={"i": list("abcd")}, attrs={"units": "m"})
    calls = [
        (x, 1), (x + 5, 1),                               # same signature: replayed
        (x.astype(np.float32), 2),                        # dtype
        (xr.DataArray(np.arange(5.0), dims="i"), 3),       # shape (and coords)
        (x.rename(i="j"), 4),                              # dims
        (x.assign_coords(i=list("wxyz")), 5),             # index labels
        (x.assign_attrs(units="km"), 6),                   # attrs
        (np.arange(4.0), 7), (np.arange(4.0) * 2, 7),      # a bare array
    ]
    for value, traces in calls:
        np.testing.assert_allclose(np.asarray(jitted(value)), np.sin(np.asarray(value)))
        assert jitted.traces == traces, value
    jitted(x, 2.0)                                          # a Python number is part of the signature
    jitted(x, 2.0)
    assert jitted.traces == 8
    with pytest.warns(lf.RetraceWarning, match="traced 9 times"):  # past warn_after_traces=8
        assert float(jitted(x, scale=3.0)[1]) == pytest.approx(3 * np.sin(1.0))
    assert jitted.traces == 9


def test_static_arguments_are_part_of_the_signature():
    def power_series(x, order):
        return sum(x ** k for k in range(order))  # a Python loop over a static argument

    jitted = lf.jit(power_series, static_argnames="order")
    x = np.array([0.5, 2.0])
    for order in (2, 3, 2, 4):
        np.testing.assert_allclose(jitted(x, order), sum(x ** k for k in range(order)))
    assert jitted.traces == 3


def test_the_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(jit_module, "CACHE_SIZE", 3)
    jitted = lf.jit(np.sin)
    for n in range(1, 6):
        jitted(np.ones(n))
    assert len(jitted.cache) == 3
    jitted(np.ones(5))  # kept: replayed
    assert jitted.traces == 5
    jitted(np.ones(1))  # dropped: traced again
    assert jitted.traces == 6


def test_dead_code_and_common_subexpressions_leave_the_program():
    def f(x):
        unused = np.exp(x) * 3  # noqa: F841 - never reaches an output
        return np.sin(x) + np.sin(x)

    jitted = lf.jit(f)
    jitted(np.arange(3.0))
    (compiled,) = jitted.cache.values()
    names = [node.prim.name for node in compiled.program.ready().nodes]  # pruned (at the first replay)
    assert sorted(names) == ["add", "sin"]
    np.testing.assert_array_equal(jitted(np.arange(3.0) + 1), 2 * np.sin(np.arange(3.0) + 1))


def test_common_subexpressions_tell_constants_apart_as_numpy_does():
    """A product by a constant is recorded once per constant that NumPy tells apart: 0.0
    and -0.0 (other signs of zero), 2 and 2.0 (other dtypes of an integer product), NaN
    once; the same constant twice is one node.  Oracle: the un-jitted function, bit for bit."""
    def f(x):
        return x * 0.0, x * -0.0, x * 2.0, x * 2.0, x * 2, x * np.nan, x * np.nan

    x = np.array([-3, 0, 5])
    jitted = lf.jit(f)
    jitted(x)
    with np.errstate(invalid="ignore"):
        got, expected = jitted(x + 1), f(x + 1)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype
        np.testing.assert_array_equal(np.atleast_1d(g).view(np.uint8), np.atleast_1d(e).view(np.uint8))
    (compiled,) = jitted.cache.values()
    products = [node for node in compiled.program.ready().nodes if node.prim is not None and node.prim.name == "multiply"]
    assert len(products) == 5  # 0.0, -0.0, 2.0 (twice: once), 2, NaN (twice: once)


# --- policies ------------------------------------------------------------------------------------------
X = xr.DataArray(np.array([1.0, -2.0, 3.0]), dims="i")


def branches_in_python(x):
    return x * 2 if x.sum() > 0 else -x


def takes_a_float(x):
    return x * float(x.sum())


def converts(x):
    return xr.DataArray(np.asarray(x) + 1, dims="i")


def unique_values(x):
    return xr.DataArray(np.unique(x.data), dims="u")


def masks(x):
    return xr.DataArray(x.data[x.data > 0], dims="j")


def stores_into_numpy(x):
    buf = np.zeros(3)
    buf[0] = x.data[0]
    return xr.DataArray(buf, dims="i")


@pytest.mark.parametrize("func, error, words", [
    (branches_in_python, lf.DataDependentControlFlowError, "lf.jit"),
    (takes_a_float, lf.ItemError, "lf.jit"),
    (converts, lf.ConversionError, "concrete array"),
    (unique_values, lf.DynamicShapeError, "numpy.unique under lf.jit"),
    (masks, lf.DynamicShapeError, "under lf.jit"),
    (lambda x: np.bincount((x.data > 0).astype(int).ravel()), lf.DynamicShapeError,
     "numpy.bincount under lf.jit"),
    (stores_into_numpy, lf.InplaceError, "inside lf.jit"),
    (lf.grad(lambda x: (x * float(x.sum())).sum()), lf.ItemError, "lf.jit"),
], ids=["if", "float", "asarray", "unique", "mask", "bincount", "store", "float-under-grad"])
def test_policies_inside_jit_raise_their_errors(func, error, words):
    with pytest.raises(error, match=words):
        lf.jit(func)(X)


def test_bincount_with_minlength_under_jit_guards_that_every_value_is_below_it():
    counts = lf.vmap(lambda v: np.bincount(v, minlength=4), in_dims=(0,))
    jitted = lf.jit(counts)
    for values in (np.array([[0, 1, 1], [2, 0, 3]]), np.array([[3, 3, 3], [0, 0, 1]])):
        assert jitted(values).tolist() == [np.bincount(v, minlength=4).tolist() for v in values]
    assert jitted.traces == 1
    # a later call with a value past minlength: traced again, and refused as vmap refuses it
    with pytest.raises(lf.DynamicShapeError, match=r"a value >= minlength=4 in example 1 "):
        jitted(np.array([[0, 1, 1], [2, 0, 4]]))
    with pytest.raises(lf.DynamicShapeError, match=r"a value >= minlength=4 in example 1 "):
        counts(np.array([[0, 1, 1], [2, 0, 4]]))
    # unmapped under plain lf.jit: the same guard, and past it the length follows the values
    plain = lf.jit(lambda x: np.bincount((x > 0).astype(int) * 2, minlength=3))
    for x in (np.array([1.0, -1.0, 2.0]), np.array([-1.0, -1.0, -2.0])):
        assert plain(x).tolist() == np.bincount((x > 0).astype(int) * 2, minlength=3).tolist()
    assert plain.traces == 1
    with pytest.raises(lf.DynamicShapeError, match="numpy.bincount under lf.jit"):
        lf.jit(lambda x: np.bincount((x > 0).astype(int) * 3, minlength=3))(np.array([1.0, -1.0]))


def test_vectorize_under_jit_reruns_the_python_loop_on_each_calls_values():
    vectorized = np.vectorize(lambda v: v * v if v > 0 else -v)

    def model(x):
        return x.copy(data=vectorized(x.data)) + x

    jitted = lf.jit(model)
    for x in (X, -X, X * 0.5 - 1):  # other signs: other branches than the first call's
        xr.testing.assert_identical(jitted(x), model(x))
    assert jitted.traces == 1
    gradient = lf.jit(lf.grad(lambda x: model(x).sum()))
    for x in (X, -X):
        expected = np.where(x.values > 0, 2 * x.values, -1.0) + 1
        np.testing.assert_allclose(gradient(x).values, expected, rtol=1e-15)

    def reads_a_traced_scale(x):
        scale = x.sum()
        return x.copy(data=np.vectorize(lambda v: v * scale.data)(x.data))

    with pytest.raises((lf.ConversionError, lf.UnsupportedOperationError), match="vectorize"):
        lf.jit(reads_a_traced_scale)(X)


def test_cond_on_a_traced_predicate_selects():
    def relu_sum(x):
        return lf.cond(x.sum() > 0, lambda v: v * 2, lambda v: -v, x)

    jitted = lf.jit(relu_sum)
    for x in (X, -X, X * 0 + 1):
        xr.testing.assert_identical(jitted(x), relu_sum(x))
    assert jitted.traces == 1
    # lf.while_loop with a traced condition: tests/test_jit_while_loop.py


def test_random_draws_are_made_at_every_call_and_follow_the_seed():
    def noisy(x):
        return x + lf.random.normal(like=x)

    jitted = lf.jit(noisy)
    lf.random.seed(0)
    eager = noisy(X)
    lf.random.seed(0)
    traced = jitted(X)
    lf.random.seed(0)
    replayed = jitted(X)
    xr.testing.assert_identical(traced, eager)
    xr.testing.assert_identical(replayed, eager)
    assert not np.array_equal(jitted(X).values, jitted(X).values)  # new draws at each call
    per_example = lf.jit(lf.vmap(noisy, dim="i", randomness="different"))
    assert len(np.unique(per_example(X).values - X.values)) == 3


def test_inside_another_transform_jit_runs_the_function_as_it_is():
    jitted = lf.jit(lambda x: np.sin(x) * 2)
    got = lf.vmap(lf.grad(lambda v: jitted(v)), dim="i")(X)
    np.testing.assert_allclose(got.values, 2 * np.cos(X.values))
    assert jitted.traces == 0 and not jitted.cache


def test_threads_share_one_program():
    jitted = lf.jit(lf.vmap(lf.grad(lambda v: (v ** 3).sum()), dim="sample"))
    x = xr.DataArray(np.ones((4, 3)), dims=("sample", "t"))
    jitted(x)
    results, errors = {}, []

    def work(k):
        try:
            results[k] = jitted(x * k).values
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for k in range(16):
        np.testing.assert_allclose(results[k], 3 * (np.ones((4, 3)) * k) ** 2)
    assert jitted.traces == 1 and len(jitted.cache) == 1


# --- errors that name the culprit ------------------------------------------------------------------------
def test_arguments_that_are_not_arrays_raise_type_error_naming_them():
    def f(x, options):
        return x * 2

    with pytest.raises(TypeError, match=r"argument 'options'\['how'\] is a object"):
        lf.jit(f)(X, {"how": object()})
    np.testing.assert_allclose(lf.jit(f, static_argnames="options")(X, "fast").values, X.values * 2)


def test_static_argnames_must_name_parameters_and_values_must_hash():
    with pytest.raises(ValueError, match=r"\['scal'\].*not parameters"):
        lf.jit(lambda x, scale: x * scale, static_argnames=("scal",))
    with pytest.raises(TypeError, match="static argument 'scale' must be hashable"):
        lf.jit(lambda x, scale: x * scale[0], static_argnames="scale")(X, [2.0])


def dask_samples(n=10, seed=0):
    rng = np.random.default_rng(seed)
    x = xr.DataArray(rng.normal(size=(n, 6)), dims=("sample", "t"),
                     coords={"sample": np.arange(n), "t": np.linspace(0, 1, 6)}, attrs={"units": "m"})
    return xr.DataArray(rng.normal(size=n), dims="sample", coords={"sample": np.arange(n)}), x


def test_dask_a_lazy_vmap_traces_once_per_block_shape_and_replays_in_every_block():
    pytest.importorskip("dask.array")
    calls = []

    def loss(p, x):
        calls.append(1)  # a side effect: once per trace (and once for the lazy graph's structure)
        return (np.sin(p * x) ** 2).sum("t")

    per_sample = lf.vmap(lf.grad(loss), dim="sample")
    p, x = dask_samples()
    expected = per_sample(p, x)
    calls.clear()
    jitted = lf.jit(per_sample)
    lazy = jitted(p.chunk(sample=4), x.chunk(sample=4))  # blocks of 4, 4 and 2 examples
    assert lazy.chunks == ((4, 4, 2),) and len(calls) == 1, "building the graph computes nothing"
    xr.testing.assert_identical(lazy.compute(scheduler="threads"), expected)
    assert len(calls) == 3, "one trace for the blocks of 4, one for the block of 2"
    again = jitted((p * 1.5).chunk(sample=4), x.chunk(sample=4)).compute(scheduler="sync")
    assert len(calls) == 4, "a new graph: its structure, and no new trace"
    xr.testing.assert_identical(again, per_sample(p * 1.5, x))


def test_dask_outside_the_vmap_stays_lazy_and_random_draws_match_the_unjitted_graph():
    pytest.importorskip("dask.array")
    p, x = dask_samples(12, seed=1)

    def noisy(p, x):
        return (p * x + lf.random.normal(like=x)).mean("t")

    def model(p, x):
        return lf.vmap(noisy, dim="sample", randomness="different")(p, x) * 2.0

    lf.random.seed(5)
    expected = model(p.chunk(sample=5), x.chunk(sample=5)).compute()
    lf.random.seed(5)
    got = lf.jit(model)(p.chunk(sample=5), x.chunk(sample=5))
    assert got.chunks == ((5, 5, 2),)
    xr.testing.assert_identical(got.compute(), expected)


# --- fusion ---------------------------------------------------------------------------------------------
thresholds = importlib.import_module("labeled_func.engine.compiler.thresholds")
Fused = importlib.import_module("labeled_func.engine.compiler.codegen").Fused


def close(got, expected, tolerance=1e-12):
    if isinstance(expected, (tuple, list)):
        for g, e in zip(got, expected):
            close(g, e, tolerance)
        return
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if expected.dtype.kind in "fc":
        finite = np.abs(expected[np.isfinite(expected)])  # infinities and NaNs must match exactly
        np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance * (1 + np.max(finite, initial=0)))
    else:
        np.testing.assert_array_equal(got, expected)


def fused_programs_agree(op, dtype, close_enough, monkeypatch):
    """vmap of every sample of ``op`` jitted with every tree fused (even tiny arrays)."""
    monkeypatch.setattr(thresholds, "FUSE_MIN_SIZE", 0)
    monkeypatch.setattr(thresholds, "CHEAP_FUSE_MIN_SIZE", 0)
    for sample, (first, second) in batches(op, dtype):
        mapped = lf.vmap(with_arrays(op, sample), in_dims=(0,) * len(first))
        try:
            expected = [quietly(mapped, *first), quietly(mapped, *second)]
        except lf.TransformError:
            continue
        jitted = lf.jit(mapped)
        got = [quietly(jitted, *first), quietly(jitted, *second)]
        if op.compare_values:
            for g, e in zip(got, expected):
                close_enough(g, e)


@pytest.mark.parametrize("op", [pytest.param(op, id=op.name) for op in STATIC_SHAPES if F64 in op.dtypes])
def test_fused_programs_equal_the_transforms_to_1e_12(op, monkeypatch):
    fused_programs_agree(op, F64, close, monkeypatch)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_chain_of_elementwise_operations_on_large_arrays_is_one_evaluation(dtype):
    def f(x, y):
        return np.sqrt(x * x + y * y) * np.exp(-x) - np.tanh(y) / (1.0 + x * x)

    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(2, 100_000)).astype(dtype)
    jitted = lf.jit(f)
    jitted(x, y)
    (compiled,) = jitted.cache.values()
    compiled.program.ready()  # pruned now, as at the first replay
    x2, y2 = rng.normal(size=(2, 100_000)).astype(dtype)
    if dtype is np.float32:
        # numexpr's float32 exp and tanh round otherwise than NumPy's: they run as NumPy's, the
        # sums, products and quotients around them fuse (correctly rounded in both): the same bits
        assert {node.function for node in compiled.program.nodes} >= {np.exp, np.tanh}
        assert any(type(node.prim) is Fused for node in compiled.program.nodes)
        same(jitted(x2, y2), f(x2, y2))
        return
    assert len(compiled.program.nodes) < 4 and any(type(node.prim) is Fused for node in compiled.program.nodes)
    close(jitted(x2, y2), f(x2, y2))  # numexpr's exp and tanh may round the last bit otherwise
    # the NaN-safe product of the rules, fused: a zero cotangent meeting an infinite partial stays zero
    gradient = lf.jit(lf.grad(lambda v: (np.where(v > 0, np.sqrt(np.abs(v)), 0.0) * 2).sum()))
    v = np.concatenate([np.zeros(50_000), np.linspace(0.5, 2.0, 50_000)])
    for values in (v, v[::-1].copy()):
        got = gradient(values)
        assert np.isfinite(got).all()
        close(got, np.where(values > 0, 1 / np.sqrt(np.abs(values)), 0.0))
