"""Errors name the user's line and the user's mistake, never labeled_func's internals.

- The SALib-array path of ``lf.sensitivity.dgsm`` takes a model that returns a DataArray
  (it used to raise ``ConversionError: inside numpy.reshape`` from our own row wrapper).
- Misplaced SALib inputs say where they go: a problem dict passed as ``bounds=`` points to
  ``problem=``, and a ``{name: (low, high)}`` dict passed as ``problem=`` to ``bounds=``.
- The other bad model outputs of ``dgsm``/``local`` (a list, a tuple, a Dataset) raise a
  ValueError saying what the model returned, not a conversion error from our own np.ndim.
- Generally: a conversion in a library function that labeled_func itself called (not the
  user's code) says so, names the lf function the user called and the user's line, and
  gives no advice about code the user did not write.
"""
import os

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

HERE = os.path.basename(__file__)


def line_of(marker):
    """The line of this file that ends with the comment ``# <marker>``."""
    with open(__file__) as source:
        found = [k for k, text in enumerate(source, 1) if text.rstrip().endswith(f"# {marker}")]
    assert len(found) == 1, marker
    return found[0]
INTERNALS = ("sensitivity.py", "_row_model", "one_row", "_row_output", "_checked_output", "numpy.reshape",
             "numpy.ndim", "vmap.py", "autodiff.py")
PROBLEM = {"names": ["a", "b"], "bounds": [[0.0, 1.0], [1.0, 3.0]]}


def sample_matrix(n=64):
    rng = np.random.default_rng(3)
    return np.column_stack([rng.uniform(0.0, 1.0, n), rng.uniform(1.0, 3.0, n)])


def numpy_model(X):
    """SALib's kind of model: an (n, D) array to n outputs."""
    return 3.0 * X[:, 0] + X[:, 1] ** 2 + X[:, 0] * X[:, 1]


def dataarray_model(X):
    """The same model, returning its n outputs as a DataArray."""
    return xr.DataArray(numpy_model(X), dims="run", name="y", attrs={"units": "W"})


def analytic_vi(X):
    """E[(∂f/∂a)²], E[(∂f/∂b)²] over the rows of X, by hand: ∂f/∂a = 3 + b, ∂f/∂b = 2b + a."""
    a, b = X[:, 0], X[:, 1]
    return [np.mean((3.0 + b) ** 2), np.mean((2.0 * b + a) ** 2)]


# --- the SALib-array path with a DataArray-returning model ------------------------------------------
@pytest.mark.parametrize("mode", ["auto", "forward", "reverse"])
def test_a_salib_model_returning_a_dataarray_gives_the_numpy_models_result(mode):
    X = sample_matrix()
    expected = lf.sensitivity.dgsm(numpy_model, X, problem=PROBLEM, seed=1, num_resamples=20, mode=mode)
    got = lf.sensitivity.dgsm(dataarray_model, X, problem=PROBLEM, seed=1, num_resamples=20, mode=mode)
    np.testing.assert_allclose(got.vi.values, analytic_vi(X), rtol=1e-12)  # an independent oracle
    for name in ("vi", "vi_std", "dgsm", "dgsm_conf", "vi_conf", "ST_bound"):
        np.testing.assert_allclose(got[name].values, expected[name].values, rtol=1e-12, err_msg=name)
    assert got.param.values.tolist() == ["a", "b"]


def test_a_salib_model_returning_a_dataarray_works_on_a_dask_sample_matrix():
    da = pytest.importorskip("dask.array")
    X = sample_matrix()
    lazy = lf.sensitivity.dgsm(dataarray_model, da.from_array(X, chunks=(16, 2)), problem=PROBLEM, seed=1,
                               num_resamples=20)
    assert lazy.vi.chunks is not None  # nothing computed yet
    np.testing.assert_allclose(lazy.vi.values, analytic_vi(X), rtol=1e-12)


@pytest.mark.parametrize("model, returned", [
    (lambda X: xr.DataArray(X, dims=("run", "column")), r"a DataArray with dims \{'run': 1, 'column': 2\}"),
    (lambda X: xr.Dataset({"y": ("run", numpy_model(X))}), r"a Dataset: return one of its variables"),
    (lambda X: [numpy_model(X)], r"a list\. Return an array \(np\.stack"),
    (lambda X: X ** 2, r"returned shape \(1, 2\)"),
], ids=["dataarray_of_two", "dataset", "list", "array_of_two"])
def test_a_salib_model_returning_the_wrong_thing_says_what_it_returned(model, returned):
    with pytest.raises(ValueError, match=r"must return n outputs.*" + returned) as info:
        lf.sensitivity.dgsm(model, sample_matrix(8), problem=PROBLEM)
    assert not any(name in str(info.value) for name in INTERNALS), str(info.value)


# --- misplaced SALib inputs -----------------------------------------------------------------------
def _dataset_samples():
    X = sample_matrix(8)
    return xr.Dataset({"a": ("sample", X[:, 0]), "b": ("sample", X[:, 1])})


def test_a_salib_problem_passed_as_bounds_points_to_problem():
    with pytest.raises(ValueError, match=r"bounds= got SALib's problem dict.*pass it as problem=") as info:
        lf.sensitivity.dgsm(lambda p: p.a * p.b, _dataset_samples(), bounds=PROBLEM)
    assert "has no (low, high)" not in str(info.value)
    with pytest.raises(ValueError, match=r"pass it as problem="):  # the array path says the same
        lf.sensitivity.dgsm(numpy_model, sample_matrix(8), bounds=PROBLEM)


def test_salibs_list_of_bounds_passed_as_bounds_points_to_problem():
    with pytest.raises(ValueError, match=r"bounds must be a dict \{name: \(low, high\)\}.*not a list.*problem="):
        lf.sensitivity.dgsm(lambda p: p.a * p.b, _dataset_samples(), bounds=PROBLEM["bounds"])


def test_a_bounds_dict_passed_as_problem_points_to_bounds():
    with pytest.raises(ValueError, match=r"'names' and 'bounds'.*\{name: \(low, high\)\} goes to bounds="):
        lf.sensitivity.dgsm(lambda p: p.a * p.b, _dataset_samples(), problem={"a": (0, 1), "b": (1, 3)})


@pytest.mark.parametrize("call, culprit", [
    (lambda: lf.sensitivity.dgsm(lambda p: p.a, _dataset_samples(), bounds={"a": 1.0, "b": (0, 1)}),
     r"bounds\['a'\] = 1.0 must be \(low, high\)"),
    (lambda: lf.sensitivity.dgsm(lambda p: p.a, _dataset_samples(), bounds={"a": "0 1", "b": (0, 1)}),
     r"bounds\['a'\] = '0 1' must be \(low, high\)"),
    (lambda: lf.sensitivity.dgsm(numpy_model, sample_matrix(8), problem={"names": ["a", "b"], "bounds": [1.0, [0, 1]]}),
     r"problem\['bounds'\] for 'a' is 1.0; give a pair of numbers"),
    (lambda: lf.sensitivity.dgsm(numpy_model, sample_matrix(8), problem={"names": "ab", "bounds": [[0, 1]] * 2}),
     r"problem\['names'\] is the string 'ab'"),
], ids=["scalar_bound", "string_bound", "scalar_problem_bound", "string_names"])
def test_malformed_bounds_raise_valueerror_naming_the_entry(call, culprit):
    with pytest.raises(ValueError, match=culprit):
        call()


# --- bad model outputs: what the model returned, not our np.ndim ------------------------------------
@pytest.mark.parametrize("call, returned", [
    (lambda: lf.sensitivity.dgsm(lambda p: [p.a, p.b], _dataset_samples()), "returned a list"),
    (lambda: lf.sensitivity.dgsm(lambda p: (p.a, p.b), _dataset_samples()), "returned a tuple"),
    (lambda: lf.sensitivity.dgsm(lambda p: p, _dataset_samples()), "returned a Dataset"),
    (lambda: lf.sensitivity.local(lambda p: [p.a, p.b], xr.Dataset({"a": 1.0, "b": 2.0})), "not a list"),
    (lambda: lf.sensitivity.local(lambda p: (p.a, p.b), xr.Dataset({"a": 1.0, "b": 2.0}), normalize=False,
                                  mode="forward"), "not a tuple"),
    (lambda: lf.sensitivity.local(lambda p: [p.a, p.b], xr.Dataset({"a": 1.0, "b": 2.0}), normalize=False,
                                  mode="reverse"), "not a list"),
], ids=["dgsm_list", "dgsm_tuple", "dgsm_dataset", "local_list", "local_forward_tuple", "local_reverse_list"])
def test_bad_model_outputs_raise_valueerror_saying_what_was_returned(call, returned):
    with pytest.raises(ValueError, match=returned) as info:
        call()
    assert not isinstance(info.value, lf.TransformError)
    assert not any(name in str(info.value) for name in INTERNALS), str(info.value)


def test_the_users_own_conversion_inside_a_salib_model_names_the_users_line():
    def model(X):
        return np.asarray(X)[:, 0]  # the user's conversion

    line = line_of("the user's conversion")
    with pytest.raises(lf.ConversionError) as info:
        lf.sensitivity.dgsm(model, sample_matrix(8), problem=PROBLEM)
    message = str(info.value)
    assert f"{HERE}:{line}" in message, message
    assert not any(name in message for name in INTERNALS), message


# --- generally: a library call made by labeled_func itself -------------------------------------------
def _ours(source, name):
    """A function whose frames count as labeled_func's (its module's __name__ is ours)."""
    namespace = {"__name__": "labeled_func._probe", "np": np}
    exec(compile(source, "<labeled_func._probe>", "exec"), namespace)  # noqa: S102 - a fixed probe
    return namespace[name]


def test_a_conversion_in_a_library_call_of_ours_says_it_is_ours_and_names_the_users_line():
    pad = _ours("def pad(x):\n    return np.pad(np.ones(3), 1, constant_values=x.data[0])\n", "pad")
    x = xr.DataArray([1.0, 2.0], dims="i")
    with pytest.raises(lf.ConversionError) as info:
        lf.grad(lambda x: pad(x).sum())(x)  # the user's call of ours
    message = str(info.value)
    line = line_of("the user's call of ours")
    assert f"(called from {HERE}:{line})" in message, message
    assert "labeled_func itself called numpy.pad" in message and "not your code" in message, message
    assert "call it on x.data instead" not in message  # no advice about code the user did not write


def test_a_library_function_the_user_hands_over_is_still_the_users_call():
    """``lf.vmap(np.asarray_chkfinite)``: our code calls it, but the user chose it."""
    x = xr.DataArray([[1.0, 2.0], [3.0, 4.0]], dims=("sample", "i"))
    with pytest.raises(lf.ConversionError) as info:
        lf.vmap(np.asarray_chkfinite, dim="sample")(x)
    message = str(info.value)
    assert "inside numpy.asarray_chkfinite" in message and f"{HERE}:" in message, message
    assert "labeled_func itself" not in message


def test_a_users_numpy_call_on_a_dataarray_keeps_its_advice():
    x = xr.DataArray([1.0, 2.0], dims="i")
    with pytest.raises(lf.ConversionError, match=r"inside numpy\.asarray_chkfinite \(called from " + HERE
                       + r":\d+\).*x\.data"):
        lf.grad(lambda x: np.asarray_chkfinite(x).sum())(x)
