"""Every entry of the operator table under ``lf.vmap``, against the per-example loop.

Each array argument is batched at axis 0, batched at its last axis (``in_dims=-1``
here, the positive ``ndim`` in the nested test), or not batched, in every combination
with one batched argument at least; batch sizes 1 and 3; then nested vmaps over an
outer batch of 2. One test per (entry, dtype) runs all of its samples and
lists every failing call, so one report shows the whole picture of an operation.
Where the policy forbids a placement (a traced index into a raw array, a mapped value
written into an unmapped one, a mapped argument that fixes the output's shape), vmap
must raise the policy's error instead.
"""

import itertools

import numpy as np
import pytest

import labeled_func as lf
from opinfo import OP_DB, array_positions, assert_same, case, examples, placements, report, stack_outputs, with_arrays

CASES = [pytest.param(op, dtype, id=f"{op.name}-{dtype.name}") for op in OP_DB for dtype in op.dtypes]
TRANSFORM_CASES = [case(op, "vmap", dtype) for op in OP_DB for dtype in op.dtypes]
BATCH_SIZES = (1, 3)
OUTER_SIZE, INNER_SIZE = 2, 3
# (outer in_dim, inner in_dim) of one argument in the nested test; "end" is its last axis
NESTED_STATES = [(0, 0), (0, "end"), (None, 0), (0, None), (None, None)]


@pytest.mark.parametrize("op, dtype", CASES)
def test_samples_run_on_numpy(op, dtype):
    """The oracle itself: every sample runs on NumPy, and examples differ in value only."""
    for sample_examples in examples(op, dtype, 3):
        first = sample_examples[0]
        assert array_positions(first), f"{op.name}{first!r}: no array argument to batch"
        assert not any(isinstance(v, np.ndarray) for v in first.kwargs.values()), "arrays go in args"
        for example in sample_examples:
            assert structure(example) == structure(first), f"{op.name}: examples differ in structure"
            op.op(*example.args, **example.kwargs)


@pytest.mark.parametrize("op, dtype", TRANSFORM_CASES)
def test_vmap_matches_loop(op, dtype):
    failures, calls = [], 0
    for batch_size in BATCH_SIZES:
        for sample_examples in examples(op, dtype, batch_size):
            oracle = Oracle(op, sample_examples)
            for in_dims in placements(sample_examples[0]):
                calls += 1
                try:
                    check_vmap(op, sample_examples, in_dims, oracle)
                except Exception as error:  # noqa: BLE001 - every failing call is listed
                    failures.append(describe(f"B={batch_size}", sample_examples[0], in_dims, error))
    report(op, failures, calls, "differ from the loop")


@pytest.mark.parametrize("op, dtype", TRANSFORM_CASES)
def test_nested_vmap_matches_double_loop(op, dtype):
    failures, calls = [], 0
    for sample_examples in examples(op, dtype, OUTER_SIZE * INNER_SIZE):
        oracle = Oracle(op, sample_examples)
        count = len(array_positions(sample_examples[0]))
        for states in itertools.product(NESTED_STATES, repeat=count):
            if all(outer is None for outer, _ in states) or all(inner is None for _, inner in states):
                continue
            calls += 1
            try:
                check_nested_vmap(op, sample_examples, states, oracle)
            except Exception as error:  # noqa: BLE001 - every failing call is listed
                failures.append(describe("nested (outer, inner) per array:", sample_examples[0], states, error))
    report(op, failures, calls, "differ from the loop")


class Oracle:
    """The op on plain NumPy, each array argument taken from the example its pick
    names; remembered, since many in_dims combinations share the same calls."""

    def __init__(self, op, sample_examples):
        self.sample_examples = sample_examples
        self.positions = array_positions(sample_examples[0])
        self.call = with_arrays(op, sample_examples[0])
        self.results = {}

    def __call__(self, picks):
        if picks not in self.results:
            arrays = [self.sample_examples[k].args[j] for j, k in zip(self.positions, picks)]
            self.results[picks] = self.call(*arrays)
        return self.results[picks]


def check_vmap(op, sample_examples, in_dims, oracle):
    sample = sample_examples[0]
    call = with_arrays(op, sample)
    inputs = []
    for j, dim in zip(array_positions(sample), in_dims):
        stacked = np.stack([example.args[j] for example in sample_examples])
        inputs.append(sample.args[j] if dim is None else np.moveaxis(stacked, 0, dim))
    vmapped = lf.vmap(call, in_dims=in_dims)
    reason = expected_error(op, sample, [in_dims])
    if reason:
        return assert_raises_transform_error(vmapped, inputs, reason)
    batch = range(len(sample_examples))
    expected = stack_outputs([oracle(tuple(b if d is not None else 0 for d in in_dims)) for b in batch])
    assert_same(vmapped(*inputs), expected, compare_values=op.compare_values, to_numpy=bare_ndarray)


def check_nested_vmap(op, sample_examples, states, oracle):
    """``vmap(vmap(op, inner), outer)`` over an (outer, inner) grid of examples."""
    sample = sample_examples[0]
    call = with_arrays(op, sample)
    grid = [[sample_examples[o * INNER_SIZE + i] for i in range(INNER_SIZE)] for o in range(OUTER_SIZE)]
    inputs, outer_dims, inner_dims = [], [], []
    for j, (outer, inner) in zip(array_positions(sample), states):
        outers = range(OUTER_SIZE) if outer is not None else [0]
        inners = range(INNER_SIZE) if inner is not None else [0]
        value = np.stack([np.stack([grid[o][i].args[j] for i in inners]) for o in outers])
        # (with Ellipsis: a 0-d example stays a 0-d array, as in the loop, not a NumPy scalar)
        value = value[slice(None) if outer is not None else 0, slice(None) if inner is not None else 0, ...]
        if inner == "end":
            value = np.moveaxis(value, 1, -1)
        inputs.append(value)
        outer_dims.append(outer)
        inner_dims.append(None if inner is None else (np.ndim(sample.args[j]) if inner == "end" else 0))
    vmapped = lf.vmap(lf.vmap(call, in_dims=tuple(inner_dims)), in_dims=tuple(outer_dims))
    reason = expected_error(op, sample, [outer_dims, inner_dims])
    if reason:
        return assert_raises_transform_error(vmapped, inputs, reason)

    def picks(o, i):
        return tuple(
            (o if outer is not None else 0) * INNER_SIZE + (i if inner is not None else 0) for outer, inner in states
        )

    expected = stack_outputs(
        [stack_outputs([oracle(picks(o, i)) for i in range(INNER_SIZE)]) for o in range(OUTER_SIZE)]
    )
    assert_same(vmapped(*inputs), expected, compare_values=op.compare_values, to_numpy=bare_ndarray)


def expected_error(op, sample, levels):
    """Why vmap must raise a TransformError here, or None. ``levels`` holds the in_dims
    of each vmap level (one per array of ``sample``), outermost first; the first argument
    is the operand."""
    shape_fixing = [k for k, j in enumerate(array_positions(sample)) if j in op.dynamic_shape_args]
    if any(dims[k] is not None for dims in levels for k in shape_fixing):
        return DYNAMIC_SHAPE
    others_batched = [any(d is not None for d in dims[1:]) for dims in levels]
    operand_batched = [dims[0] is not None for dims in levels]
    if op.index_into_first_arg and not any(operand_batched) and any(others_batched):
        return "ndarray.__getitem__ gets a traced index"
    if op.writes_into_first_arg and any(o and not b for o, b in zip(others_batched, operand_batched)):
        return "a mapped value written into an array not mapped at that level"
    return None


DYNAMIC_SHAPE = "the output's shape follows the values of a mapped argument"


def assert_raises_transform_error(vmapped, inputs, reason):
    try:
        vmapped(*inputs)
    except lf.DynamicShapeError:
        return
    except lf.TransformError:
        if reason == DYNAMIC_SHAPE:
            raise
        return
    except ValueError as error:
        # NumPy's one-element store (array[i] = v) swallows whatever the traced value
        # raises and reports its own error instead (docs/limitations.md).
        if "setting an array element with a sequence" in str(error):
            return
        raise
    raise AssertionError(f"expected a TransformError ({reason}); vmap returned a value")


def bare_ndarray(value):
    assert type(value) is np.ndarray, f"vmap returned {type(value).__name__}, not a bare ndarray"
    return value


def structure(sample):
    shown = lambda v: (v.shape, v.dtype) if isinstance(v, np.ndarray) else repr(v)
    return [shown(a) for a in sample.args], {k: shown(v) for k, v in sample.kwargs.items()}


def describe(label, sample, dims, error):
    message = str(error).strip().splitlines()
    return f"{label} {sample!r} in_dims={tuple(dims)}: {type(error).__name__}: {message[0] if message else ''}"
