"""What a vmapped function may return: arrays, numbers and None are outputs; anything else (strings,
functions, methods) raises a TypeError naming its place in the output and its type, on the
in-memory and on the Dask path (it used to be stacked into an object array, silently).

Oracles: the per-example values written out, and the documented errors.
"""
import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

# --- vmap outputs that are not arrays ---------------------------------------------------------------
DS = xr.Dataset({"a": ("s", [1.0, 2.0])})


@pytest.mark.parametrize("f, path, kind", [
    (lambda d: d.values, "output", "method"),                     # Dataset.values is a method
    (lambda d: ("label", d.a), "output[0]", "str"),
    (lambda d: {"scale": d.a, "f": (lambda: 1.0)}, "output['f']", "function"),
    (lambda d: [d.a, np.str_("x")], "output[1]", "str_"),
    (lambda d: d.a.sum, "output", "method"),
], ids=["bound-method", "string", "closure", "numpy-string", "unbound-reduction"])
def test_vmap_outputs_that_are_not_arrays_raise_type_error_naming_path_and_type(f, path, kind):
    # before: stacked into an object (or string) array, one copy per example
    with pytest.raises(TypeError) as excinfo:
        lf.vmap(f, dim="s")(DS)
    message = str(excinfo.value)
    assert f"returned {path} of type" in message and kind in message, message


def test_vmap_outputs_that_are_not_arrays_raise_on_the_dask_path_too():
    with pytest.raises(TypeError, match=r"returned output\[0\] of type builtins\.str"):
        lf.vmap(lambda d: ("label", d.a), dim="s")(DS.chunk({"s": 1}))


def test_numbers_none_and_arrays_are_still_outputs():
    out = lf.vmap(lambda d: (2.5, None, d.a * 2, np.float32(1.0), True), dim="s")(DS)
    np.testing.assert_array_equal(out[0], [2.5, 2.5])
    assert out[1] is None
    np.testing.assert_array_equal(out[2].values, [2.0, 4.0])
    assert out[3].dtype == np.float32 and out[4].dtype == np.bool_
