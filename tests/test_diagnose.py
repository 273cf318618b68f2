"""Telling why a traced value was converted (``labeled_func.engine.diagnose``).

- The import-time self-test passes on this Python: the engine's probe through ``if p:``,
  ``float(p)``, ``np.asarray(p)``, ``buf[0] = p``, ``a[p]``..., and floor 3's DataArray
  wrapping a probe through xarray's registered dunders.  Each of its statements, run on a
  real tracer, raises the policy error of the kind the probe was given.
- A classification that fails (an opcode this Python lacks, a broken classifier, xarray's
  dunders missing) is found by the self-test: a RuntimeWarning names the Python version and
  the failed checks, and the conversions it could not confirm raise a generic
  ConversionError (a RuntimeError); answers whose own checks passed stay as they were.
- The registration API: a library registered from above (names, options, aliases, advice,
  dynamic shapes) is named in the policy errors; unregistered, its frames are user code.
"""
import os
import platform
import subprocess
import sys
import types

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func import diagnostics
from labeled_func.engine import diagnose

HERE = os.path.basename(__file__)
PYTHON = platform.python_version()
GENERIC = "cannot be converted to a concrete value inside a transform"
UNDETERMINED = "the kind of conversion could not be determined on"


@pytest.fixture
def isolated(monkeypatch):
    """Whatever a test records or registers is undone afterwards."""
    for name in ("_FAILURES", "_UNCONFIRMED"):
        monkeypatch.setattr(diagnose, name, getattr(diagnose, name))
    for name in ("_KNOWN", "_ADVICE", "_DYNAMIC", "_CONVERSION_SITES"):
        monkeypatch.setattr(diagnose, name, dict(getattr(diagnose, name)))
    monkeypatch.setattr(diagnose, "_LIBRARIES", set(diagnose._LIBRARIES))
    return monkeypatch


def mapped(values):
    """``values`` mapped along "s" (one example per entry)."""
    values = np.asarray(values)
    return xr.DataArray(values, dims=("s",) + tuple(f"d{i}" for i in range(values.ndim - 1)))


def assert_generic(excinfo):
    error = excinfo.value
    assert type(error) is lf.ConversionError and isinstance(error, RuntimeError)
    assert not isinstance(error, (TypeError, ValueError))
    message = str(error)
    assert GENERIC in message and UNDETERMINED in message and PYTHON in message, message


# --- the self-test on this Python ---------------------------------------------------------------
def test_self_test_passes_on_this_python():
    assert diagnose.self_test() == {}
    assert diagnostics.self_test() == {}
    assert diagnose.unconfirmed() == frozenset()


@pytest.mark.parametrize("check", diagnose._CHECKS, ids=lambda check: check.statement)
def test_each_engine_check_classifies_as_expected(check):
    why, kinds = diagnose._run(check)
    assert why is None, why
    assert kinds and set(kinds) == {check.expected}


# the error a mapped tracer raises for each kind of conversion
ERRORS = {"bool": lf.DataDependentControlFlowError, "float": lf.ItemError, "int": lf.ItemError,
          "complex": lf.ItemError, "array": lf.ConversionError, "setitem": lf.InplaceError,
          "index": lf.ConversionError}
SPECIFIC = {"array": "converting a traced value to a concrete array", "index": "mapped index"}


@pytest.mark.parametrize("check", diagnose._CHECKS + diagnostics._CHECKS, ids=lambda check: check.statement)
def test_each_check_statement_on_a_real_tracer_raises_that_kinds_error(check):
    # the probe stands for a tracer: what it was classified as is what a tracer meets
    values = np.zeros((2,) + check.shape, dtype=check.dtype)
    with pytest.raises(lf.TransformError) as excinfo:
        lf.vmap(lambda x: check.run(x.data), dim="s")(mapped(values))
    assert type(excinfo.value) is ERRORS[check.expected], str(excinfo.value)
    assert SPECIFIC.get(check.expected, "") in str(excinfo.value)
    assert UNDETERMINED not in str(excinfo.value)


def test_under_grad_the_checked_kinds_keep_their_policy():
    x = xr.DataArray([0.5, 2.0], dims="t")

    def allowed(v):
        diagnostics._if(v.data[0])  # `if da:` on the primal (the probe would have raised)
        diagnose._if(v.data[1])
        return v.sum() * float(v.data[0]) + int(v[1]) * v[1]  # float(), int(): constants

    np.testing.assert_allclose(lf.grad(allowed)(x).values, [0.5, 0.5 + 2.0])
    for check in (diagnose._CHECKS[3], diagnose._CHECKS[4], diagnostics._CHECKS[4], diagnostics._CHECKS[5]):
        with pytest.raises(ERRORS[check.expected]):
            lf.grad(lambda v: (check.run(v.data[0]), v.sum())[1])(x)


def test_if_p_calls_bool_only():
    probe = diagnose.Probe()
    with pytest.raises(lf.TransformError):
        diagnose._if(probe)
    assert probe.kinds == ["bool"]


# --- a classification that fails ------------------------------------------------------------------
def test_missing_store_opcodes_are_found_and_make_conversions_generic(isolated):
    isolated.setattr(diagnose, "_STORE_OPS", frozenset())  # a Python that renamed STORE_SUBSCR
    with pytest.warns(RuntimeWarning, match=PYTHON) as record:
        failed = diagnose.self_test()
    assert {"`buf[0] = p`", "`buf[...] = p`", "`buf[i:j] = p`"} <= set(failed)
    assert "`if p:`" not in failed and "`np.asarray(p)`" not in failed
    message = str(record[0].message)
    assert "buf[0] = p" in message and "gave float (expected setitem)" in message
    assert ("number", "setitem") in diagnose.unconfirmed()

    def store(v):
        buf = np.zeros(2)
        buf[0] = v.data  # NumPy's ValueError around the error is unwrapped
        return v

    def as_array(v):
        return np.asarray(v.data)

    for f in (store, as_array):
        with pytest.raises(lf.ConversionError) as excinfo:
            lf.vmap(f, dim="s")(mapped([1.0, 2.0]))
        assert_generic(excinfo)
        assert f"at {HERE}:" in str(excinfo.value)
    with pytest.raises(lf.ConversionError) as excinfo:
        lf.grad(lambda v: v.sum() * float(v.data[0]))(xr.DataArray([1.0, 2.0], dims="t"))
    assert_generic(excinfo)
    # answers whose own checks passed are kept: `if da:` under grad uses the primal
    x = xr.DataArray([1.0, 2.0], dims="t")
    np.testing.assert_allclose(lf.grad(lambda v: v.sum() if v[0] else -v.sum())(x).values, [1.0, 1.0])
    # and bool() of a mapped value is still control flow
    with pytest.raises(lf.DataDependentControlFlowError):
        lf.vmap(lambda v: v if v > 0 else -v, dim="s")(mapped([1.0, 2.0]))


def test_an_unreadable_callee_is_found_and_makes_storing_calls_generic(isolated):
    # a Python without source positions (python -X no_debug_ranges): the name of what a
    # call calls cannot be read, so buf.fill(p) could not be told from float(p)
    isolated.setattr(diagnose, "_CALLEES", {})
    isolated.setattr(diagnose, "_read_callee", lambda instructions, k: None)
    with pytest.warns(RuntimeWarning, match=PYTHON):
        failed = diagnose.self_test()
    assert set(failed) == {"`np.zeros(2).fill(p)`", "`buf.__setitem__(0, p)`", "`buf.__setitem__(slice(0, 2), p)`",
                           "`np.fromiter(values, float)`"}
    assert "gave float (expected setitem)" in failed["`np.zeros(2).fill(p)`"]

    def fill(v):
        buf = np.zeros(2)
        buf.fill(v.data[0])
        return (v * xr.DataArray(buf, dims="t")).sum()

    # the generic error, never the silent primal (a derivative that would miss buf)
    with pytest.raises(lf.ConversionError) as excinfo:
        lf.grad(fill)(xr.DataArray([1.0, 2.0], dims="t"))
    assert_generic(excinfo)


def test_missing_subscript_opcodes_are_found(isolated):
    # Python 3.14 has no BINARY_SUBSCR: a Python whose subscript this engine does not know
    isolated.setattr(diagnose, "_LOAD_OPS", frozenset())
    isolated.setattr(diagnose, "_SUBSCRIPT_ARGS", frozenset())
    with pytest.warns(RuntimeWarning, match=PYTHON):
        failed = diagnose.self_test()
    assert list(failed) == ["`a[p]` (a NumPy array)"]
    assert "gave index, array (expected index)" in failed["`a[p]` (a NumPy array)"]
    table = np.arange(10.0)
    with pytest.raises(lf.ConversionError) as excinfo:
        lf.vmap(lambda i: table[i], in_dims=(0,))(np.array([[1, 2], [3, 4]]))
    assert_generic(excinfo)
    # what needs no conversion is untouched
    got = lf.vmap(lambda i: np.take_along_axis(table, i, axis=0), in_dims=(0,))(np.array([[1, 2], [3, 4]]))
    np.testing.assert_array_equal(got, [[1.0, 2.0], [3.0, 4.0]])


def test_a_broken_classifier_is_found(isolated):
    isolated.setattr(diagnose, "_array_kind", lambda frame: "array")
    with pytest.warns(RuntimeWarning, match=PYTHON):
        failed = diagnose.self_test()
    assert {"`buf[...] = p`", "`buf[i:j] = p`", "`buf.__setitem__(slice(0, 2), p)`",
            "`a[p]` (a NumPy array)"} == set(failed)
    with pytest.warns(RuntimeWarning, match="xarray " + xr.__version__):
        failed = diagnostics.self_test()
    assert "`if da:`" in failed and "`np.asarray(da)`" not in failed


def test_missing_xarray_sites_are_found_by_floor_3s_self_test(isolated):
    isolated.setattr(diagnose, "_CONVERSION_SITES", {})  # an xarray whose dunders moved
    with pytest.warns(RuntimeWarning, match=PYTHON) as record:
        failed = diagnostics.self_test()
    assert {"`if da:`", "`float(da)`", "`buf[0] = da`", "`PandasIndex.isel(t=p)`"} <= set(failed)
    assert f"xarray {xr.__version__}" in str(record[0].message)
    x = xr.DataArray([1.0, 2.0], dims="t")
    with pytest.raises(lf.ConversionError) as excinfo:  # no longer told from np.asarray(da)
        lf.grad(lambda v: v.sum() if v[0] else -v.sum())(x)
    assert_generic(excinfo)
    # the engine's own conversions are not affected
    with pytest.raises(lf.DataDependentControlFlowError):
        lf.vmap(lambda v: v if v.data > 0 else -v, dim="s")(mapped([1.0, 2.0]))


def test_a_self_test_that_cannot_run_confirms_nothing_and_never_raises(isolated):
    def explode(probe):
        raise MemoryError("no")

    broken = diagnose.Check("`boom`", explode, "bool", ("no such route",))
    with pytest.warns(RuntimeWarning, match="could not run"):
        failed = diagnose.self_test([broken], source="test")
    assert list(failed) == ["the self-test"]
    assert {("bool", "bool"), ("index", "index"), ("array", "array"), ("number", "float")} <= diagnose.unconfirmed()
    with pytest.raises(lf.ConversionError) as excinfo:
        lf.grad(lambda v: v.sum() * (1.0 if v.data[0] else 2.0))(xr.DataArray([1.0, 2.0], dims="t"))
    assert_generic(excinfo)


def test_a_passing_rerun_confirms_again(isolated):
    isolated.setattr(diagnose, "_STORE_OPS", frozenset())
    with pytest.warns(RuntimeWarning):
        diagnose.self_test()
    assert diagnose.unconfirmed()
    isolated.undo()  # the opcodes (and the recorded result) are back
    isolated.setattr(diagnose, "_FAILURES", diagnose._FAILURES)
    isolated.setattr(diagnose, "_UNCONFIRMED", diagnose._UNCONFIRMED)
    assert diagnose.self_test() == {} and diagnose.unconfirmed() == frozenset()


def test_import_on_a_python_without_the_opcode_warns_once_and_does_not_crash():
    code = (
        "import dis, platform, warnings\n"
        "dis.opmap = {k: v for k, v in dis.opmap.items() if k != 'STORE_SUBSCR'}  # renamed\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import labeled_func as lf\n"
        "import numpy as np, xarray as xr\n"
        "messages = [str(w.message) for w in caught if w.category is RuntimeWarning]\n"
        "engine = [m for m in messages if 'buf[0] = p' in m]\n"
        "assert len(engine) == 1 and platform.python_version() in engine[0], messages\n"
        "def f(x):\n"
        "    buf = np.zeros(2)\n"
        "    buf[0] = x.data\n"
        "    return x\n"
        "try:\n"
        "    lf.vmap(f, dim='s')(xr.DataArray(np.ones(2), dims='s'))\n"
        "except lf.ConversionError as error:\n"
        "    assert 'could not be determined' in str(error), error\n"
        "    print('generic')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "generic"


# --- NumPy's ValueError around a policy error --------------------------------------------------------
def test_unwrap_conversion_error():
    policy = lf.InplaceError("x")
    wrapped = ValueError("setting an array element with a sequence.")
    wrapped.__cause__ = policy
    assert diagnose.unwrap_conversion_error(wrapped) is policy
    other = ValueError("bad")
    other.__cause__ = RuntimeError("not ours")
    assert diagnose.unwrap_conversion_error(other) is None
    assert diagnose.unwrap_conversion_error(ValueError("plain")) is None
    not_a_value_error = TypeError("t")
    not_a_value_error.__cause__ = policy
    assert diagnose.unwrap_conversion_error(not_a_value_error) is None


def test_storing_a_mapped_element_raises_the_policy_error_not_numpys():
    def f(v):
        buf = np.zeros(2)
        buf[0] = v.data
        return v

    with pytest.raises(lf.InplaceError) as excinfo:
        lf.vmap(f, dim="s")(mapped([1.0, 2.0]))
    assert excinfo.value.__cause__ is None and excinfo.value.__suppress_context__


# --- the registration API ---------------------------------------------------------------------------
FAKELIB = '''
import numpy as np


def find(x):
    return np.asarray(x)


class Table:
    def lookup(self, x, strict=False):
        return np.asarray(x)

    def compact(self, x):
        return np.nonzero(x)

    def check(self, x):
        if x:
            return 1
        return 0


class _At:
    def __getitem__(self, key):
        return np.asarray(key)
'''


@pytest.fixture
def fakelib(isolated):
    module = types.ModuleType("fakelib.core")
    exec(compile(FAKELIB, os.path.join("fakelib", "core.py"), "exec"), module.__dict__)
    return module


def register_fakelib():
    diagnose.register_library(
        "fakelib", flat_names=True, options=("strict",), aliases={"_At": ("Table", "at")},
        indexing=("__getitem__",),
        describe=lambda site: f"{site.public}(..., strict=True)" if site.options.get("strict") else None,
    )
    diagnose.register_advice("fakelib", lambda site, kind: f"Use Table.{site.method}_traced ({kind}).")
    diagnose.register_dynamic_shape(
        "fakelib",
        lambda site, culprit: (f"fakelib's {site.owner}.compact", "the rows kept depend on the values",
                               "Mask instead.") if site.method == "compact" else None,
    )


def raised(cls, f, values=(1.0, 2.0)):
    with pytest.raises(cls) as excinfo:
        lf.vmap(f, dim="s")(mapped(values))
    assert type(excinfo.value) is cls, str(excinfo.value)
    return str(excinfo.value)


def test_an_unregistered_library_is_user_code(fakelib):
    table = fakelib.Table()
    message = raised(lf.ConversionError, lambda v: table.lookup(v.data, strict=True))
    assert message.startswith("at core.py:") and "fakelib" not in message


def test_a_registered_library_is_named_with_its_options_and_advice(fakelib):
    register_fakelib()
    table = fakelib.Table()
    line = f"{HERE}:{sys._getframe().f_lineno + 1}"
    message = raised(lf.ConversionError, lambda v: table.lookup(v.data, strict=True))
    assert message.startswith(f"inside fakelib's Table.lookup(..., strict=True) (called from {line}): ")
    assert message.endswith("Use Table.lookup_traced (conversion).")
    message = raised(lf.ConversionError, lambda v: fakelib.find(v.data))
    assert message.startswith("inside fakelib.find (called from") and "lookup" not in message
    message = raised(lf.DataDependentControlFlowError, lambda v: table.check(v.data))
    assert "fakelib's Table.check tests a value of the example" in message
    assert message.endswith("Use Table.check_traced (control_flow).")


def test_a_registered_dynamic_shape_and_indexing(fakelib):
    register_fakelib()
    table = fakelib.Table()
    message = raised(lf.DynamicShapeError, lambda v: table.compact(v.data))
    assert message.startswith("fakelib's Table.compact under vmap (called from")
    assert message.endswith("the rows kept depend on the values, and a batch cannot hold arrays "
                             "of different shapes. Mask instead.")
    # an alias names the accessor; a mapped boolean key into an indexing method is a mask
    message = raised(lf.DynamicShapeError, lambda v: fakelib._At()[v.data > 1])
    assert message.startswith("boolean-mask indexing x[mask] inside indexing x.at[...] on a Table under vmap")
    message = raised(lf.ConversionError, lambda v: fakelib._At()[v.data])
    assert message.startswith("inside indexing x.at[...] on a Table (called from")


def test_xarrays_knowledge_is_registered_by_floor_3():
    site = diagnose.Site("xarray", "DataArray", "sel", "xarray.core.dataarray", {}, (), None)
    assert diagnose.is_indexing(site)
    assert site.public == "xarray's DataArray.sel"
    assert diagnose.explain(site, "P.", "default.").endswith(diagnostics._LABELS)
    assert diagnose._ADVICE["xarray"] is diagnostics._advice
    assert diagnose._DYNAMIC["xarray"] is diagnostics._dynamic_shape


def test_register_conversion_sites_from_above(isolated):
    def convert_for_the_user(p):
        return np.asarray(p)

    def caller(p):
        return convert_for_the_user(p)

    probe = diagnose.Probe()
    with pytest.raises(lf.TransformError):
        caller(probe)
    assert probe.kinds == ["array"]
    diagnose.register_conversion_sites({convert_for_the_user.__code__: "float"})
    probe = diagnose.Probe()
    with pytest.raises(lf.TransformError):
        caller(probe)
    assert probe.kinds == ["float"]


def test_item_of_a_dataarray_names_the_method_called_not_xarrays_wrapper():
    """xarray builds DataArray.item from a generic ``def func(self, ...)``: the message names
    ``DataArray.item``, not ``DataArray.func`` (which reads like the .func accessor)."""
    x = xr.DataArray(np.ones((3, 2)), dims=("sample", "t"))
    with pytest.raises(lf.ItemError) as caught:
        lf.vmap(lambda v: v.sum().item(), dim="sample")(x)
    assert "DataArray.item" in str(caught.value) and "DataArray.func" not in str(caught.value)


def _line_of(marker):
    """The line number of the line of this file that holds ``marker`` (as text)."""
    with open(__file__) as source:
        for number, line in enumerate(source, start=1):
            if marker in line and "_line_of" not in line:
                return number
    raise AssertionError(marker)


def test_inplace_out_random_and_unsupported_errors_end_with_the_users_line():
    """The four errors that used to give no file:line of the user's code name it (appended
    from the traceback, where the message has no location of its own)."""
    x = xr.DataArray(np.ones((3, 2)), dims=("sample", "t"))
    buffer = np.zeros(2)

    def store(v):
        buffer[...] = v.data  # MARK-inplace
        return v

    def out_argument(v):
        return np.exp(v.data, out=np.empty(2))  # MARK-out

    def draw(v):
        return v + lf.random.normal(())  # MARK-random

    def unsupported(v):
        return np.polydiv(v.data, v.data)  # MARK-unsupported

    for func, error, mark in ((store, lf.InplaceError, "MARK-inplace"), (out_argument, lf.OutArgumentError, "MARK-out"),
                              (draw, lf.RandomnessError, "MARK-random"),
                              (unsupported, lf.UnsupportedOperationError, "MARK-unsupported")):
        with pytest.raises(error) as caught:
            lf.vmap(func, dim="sample")(x)
        assert f"test_diagnose.py:{_line_of(mark)}" in str(caught.value), str(caught.value)
