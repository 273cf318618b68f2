"""The vmap-vs-loop test again, on ``array_api_strict`` arrays.

``array_api_strict`` implements the array API standard and nothing more, so an entry
that passes here has no NumPy-only call in its kernels (entries with ``strict_ok``
False go through the library's NumPy/CuPy-only table and are left out). The oracle is
the NumPy for-loop on the same values.
"""

import array_api_strict as xp
import numpy as np
import pytest

import labeled_func as lf
from opinfo import (OP_DB, SampleInput, array_positions, assert_same, case, examples, placements, stack_outputs,
                    with_arrays)

STRICT_ARRAY = type(xp.asarray(0))
CASES = [case(op, "array_api_strict", dtype) for op in OP_DB if op.strict_ok for dtype in op.dtypes]
BATCH_SIZE = 3


@pytest.mark.parametrize("op, dtype", CASES)
def test_vmap_on_array_api_strict_matches_numpy_loop(op, dtype):
    failures, calls = [], 0
    for sample_examples in examples(op, dtype, BATCH_SIZE):
        sample = sample_examples[0]
        reason = numpy_only_kwargs(sample)
        if reason:
            pytest.skip(f"{op.name}{sample!r}: {reason}")
        strict_call = with_arrays(op, SampleInput(sample.args, {k: to_strict(v) for k, v in sample.kwargs.items()}))
        for in_dims in placements(sample, choices=(0, None)):
            if strict_rejects_tracer(op, in_dims):
                continue
            calls += 1
            try:
                if maps_a_shape_fixing_argument(op, sample, in_dims):
                    with pytest.raises(lf.DynamicShapeError):
                        lf.vmap(strict_call, in_dims=in_dims)(*strict_inputs(sample_examples, in_dims))
                    continue
                check_strict_vmap(op, sample_examples, in_dims, strict_call)
            except Exception as error:  # noqa: BLE001 - every failing call is listed
                first_line = (str(error).strip().splitlines() or [""])[0]
                failures.append(f"{sample!r} in_dims={in_dims}: {type(error).__name__}: {first_line}")
    assert calls, f"{op.name}: no call was checked"
    if failures:
        shown = "\n".join(failures[:15])
        summary = f"{len(failures)} of {calls} calls of {op.name} on array_api_strict differ"
        pytest.fail(f"{summary}:\n{shown}", pytrace=False)


def check_strict_vmap(op, sample_examples, in_dims, strict_call):
    sample = sample_examples[0]
    positions = array_positions(sample)
    numpy_call = with_arrays(op, sample)
    expected = stack_outputs(
        [
            numpy_call(*[(example if dim is not None else sample).args[j] for j, dim in zip(positions, in_dims)])
            for example in sample_examples
        ]
    )
    actual = lf.vmap(strict_call, in_dims=in_dims)(*strict_inputs(sample_examples, in_dims))
    assert_same(actual, expected, compare_values=op.compare_values, to_numpy=strict_to_numpy)


def strict_inputs(sample_examples, in_dims):
    """The arrays as array_api_strict arrays: stacked where mapped, the first example's where not."""
    sample = sample_examples[0]
    return [
        xp.asarray(sample.args[j] if dim is None else np.stack([example.args[j] for example in sample_examples]))
        for j, dim in zip(array_positions(sample), in_dims)
    ]


def maps_a_shape_fixing_argument(op, sample, in_dims):
    """Whether an argument whose values fix the output's shape is mapped: a DynamicShapeError."""
    return any(j in op.dynamic_shape_args and d is not None for j, d in zip(array_positions(sample), in_dims))


def to_strict(value):
    """A NumPy dtype as the array_api_strict dtype of the same name; anything else as is."""
    if isinstance(value, np.dtype):
        return getattr(xp, value.name)
    return value


def numpy_only_kwargs(sample):
    """Why the sample's kwargs cannot be said in array_api_strict's terms, or None."""
    for key, value in sample.kwargs.items():
        if isinstance(value, np.dtype) and not hasattr(xp, value.name):
            return f"kwarg {key}={value} has no array_api_strict dtype"
        if isinstance(value, type) and issubclass(value, np.generic):
            return f"kwarg {key}={value.__name__} is a NumPy scalar type, not a dtype"
    return None


def strict_rejects_tracer(op, in_dims):
    """array_api_strict's own ``__getitem__``/``__setitem__``/operators run when the
    first argument is a raw strict array, and reject a tracer operand (TypeError or
    IndexError): a limit of the strict namespace, tested on NumPy instead."""
    first_raw = in_dims[0] is None
    return first_raw and (op.index_into_first_arg or op.writes_into_first_arg or op.operator_on_first_arg)


def strict_to_numpy(value):
    assert isinstance(value, STRICT_ARRAY), f"vmap returned {type(value).__name__}, not an array_api_strict array"
    return np.asarray(value)  # array_api_strict 2.6 arrays convert through __array__ (and DLPack)
