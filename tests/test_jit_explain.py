"""Why lf.jit traced again (issue 28, item 2): ``.traces`` counts the traces, ``.explain()``
gives the reason of each one (what differed from the nearest signature already compiled,
named in the user's terms: the parameter, the variable or coordinate, the change), a
``RetraceWarning`` says so once the traces pass ``warn_after_traces``, and the logger
``labeled_func.jit`` logs each trace.  A replay computes no reason.

The oracle of each reason is the change the test itself made to the arguments."""
import importlib
import logging
import pickle
import warnings

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

jit_module = importlib.import_module("labeled_func.jit")  # lf.jit is the function


def reasons(jitted):
    """{trace number: reason}."""
    return dict(jitted.reasons)


def model(params, t):
    return (params.k * t + params.c).sum()


def parameters():
    return xr.Dataset({"k": ((), 0.1, {"units": "d-1"}), "c": ((), 2.0, {"units": "mol"})})


def test_the_reported_case_assign_drops_attrs_and_the_reason_says_so():
    t = xr.DataArray(np.arange(4.0), dims="t")
    params = parameters()
    f = lf.jit(model)
    f(params, t)
    f(params.copy(deep=True), t)  # the same signature: replayed
    assert f.traces == 1
    assigned = params.assign(k=0.11)
    assert assigned.k.attrs == {}  # the premise: assign dropped the attrs of k
    f(assigned, t)
    reason = reasons(f)[f.traces]
    assert "argument 'params'" in reason
    assert "data variable 'k'" in reason
    assert "attrs {'units': 'd-1'} -> {}" in reason
    assert "'c'" not in reason  # only what changed
    assert f"trace {f.traces}: " + reason in f.explain()


def test_a_dtype_change_is_named():
    f = lf.jit(lambda x: x * 2)
    x = xr.DataArray(np.arange(3.0), dims="t")
    f(x)
    f(x.astype("float32"))
    assert f.traces == 2
    assert reasons(f)[2] == "argument 'x': dtype float64 -> float32 (against trace 1)"


def test_a_shape_change_is_named():
    f = lf.jit(lambda x: x * 2)
    f(xr.DataArray(np.arange(3.0), dims="t"))
    f(xr.DataArray(np.arange(4.0), dims="t"))
    assert reasons(f)[2] == "argument 'x': shape (3,) -> (4,) (against trace 1)"


def test_a_static_argument_1_then_1_0_names_both_types():
    f = lf.jit(lambda x, n: x * n, static_argnames="n")
    x = xr.DataArray(np.arange(3.0), dims="t")
    f(x, 1)
    f(x, 1.0)
    assert f.traces == 2
    assert reasons(f)[2] == "static argument 'n': 1 (int) -> 1.0 (float) (against trace 1)"


def test_a_python_number_changing_value_or_type_is_named():
    def scaled(x, scale):
        return x * scale

    f = lf.jit(scaled)
    x = xr.DataArray(np.arange(3.0), dims="t")
    f(x, 2)
    f(x, 2.0)
    f(x, 3.0)
    assert reasons(f)[2] == "argument 'scale': 2 (int) -> 2.0 (float) (against trace 1)"
    assert reasons(f)[3] == "argument 'scale': 2.0 -> 3.0 (against trace 2)"


def test_the_nearest_cached_signature_is_the_reference():
    f = lf.jit(lambda x: x + 1)
    a = xr.DataArray(np.arange(3.0), dims="t")
    b = xr.DataArray(np.arange(5.0, dtype="float32"), dims="s")
    f(a)
    f(b)
    f(b.astype("float64"))  # one difference from trace 2 (dtype), three from trace 1
    assert reasons(f)[3] == "argument 'x': dtype float32 -> float64 (against trace 2)"


def test_reasons_name_arguments_by_parameter_name():
    def f(first, second, *, third=None):
        return first + second

    jitted = lf.jit(f)
    x = xr.DataArray(np.arange(3.0), dims="t")
    jitted(x, x + 1)
    jitted(x, (x + 1).astype("float32"))
    assert reasons(jitted)[2].startswith("argument 'second': dtype")
    jitted(x, second=x + 1)
    assert reasons(jitted)[3].startswith("argument 'second': passed by position -> by keyword")
    jitted(x, x + 1, third=1)
    assert "keyword argument 'third': not passed -> the constant 1 (int)" in reasons(jitted)[4]
    for reason in reasons(jitted).values():
        assert "argument 1" not in reason and "argument 0" not in reason


def test_arguments_of_a_star_parameter_are_told_apart():
    def total(first, *rest):
        return first + sum(rest)

    jitted = lf.jit(total)
    x = xr.DataArray(np.arange(3.0), dims="t")
    jitted(x, x + 1, x + 2)
    jitted(x, x + 1, (x + 2).astype("float32"))
    assert reasons(jitted)[2] == "argument 'rest'[1]: dtype float64 -> float32 (against trace 1)"


def test_with_static_argnames_the_arguments_are_named_too():
    def f(x, ds, n):
        return (x * ds.a).sum() * n

    jitted = lf.jit(f, static_argnames=("n",))
    x = xr.DataArray(np.arange(3.0), dims="t")
    ds = xr.Dataset({"a": ("t", np.ones(3))})
    jitted(x, ds, 2)
    jitted(x, ds.assign(a=ds.a.astype("float32")), 2)
    assert reasons(jitted)[2] == "argument 'ds', data variable 'a': dtype float64 -> float32 (against trace 1)"


def test_coordinates_attrs_names_options_and_aliasing_are_named():
    f = lf.jit(lambda x, y: x + y)
    x = xr.DataArray(np.arange(3.0), dims="t", coords={"t": [0, 1, 2]}, name="x")
    y = xr.DataArray(np.ones(3), dims="t", coords={"t": [0, 1, 2]})
    f(x, y)
    f(x.assign_coords(t=[5, 6, 7]), y.assign_coords(t=[5, 6, 7]))
    assert reasons(f)[2].startswith("argument 'x', coordinate 't': values [0, 1, 2] -> [5, 6, 7]; "
                                    "argument 'y', coordinate 't': values")
    f(x.rename("z"), y)
    assert reasons(f)[3] == "argument 'x': name 'x' -> 'z' (against trace 1)"
    f(x.assign_attrs(units="m"), y)
    assert reasons(f)[4] == "argument 'x': attrs {} -> {'units': 'm'} (against trace 1)"
    with xr.set_options(keep_attrs=True):
        f(x, y)
    assert reasons(f)[5] == "xarray option keep_attrs: 'default' -> True (against trace 1)"
    f(x, x)
    assert "argument 'y': dtype" not in reasons(f)[6]
    g = lf.jit(lambda a, b: a + b)
    g(x, x)
    g(x, x.copy())
    assert reasons(g)[2] == "argument 'a' and argument 'b': the same array -> distinct arrays (against trace 1)"


def test_a_strided_argument_names_its_memory_layout():
    f = lf.jit(lambda x: x * 2)
    f(np.arange(6.0)[:3])
    f(np.arange(6.0)[::2])
    assert reasons(f)[2] == "argument 'x': memory layout (strides) (8,) -> (16,) (against trace 1)"


def test_a_datatree_node_change_is_named():
    f = lf.jit(lambda tree: tree * 2)
    tree = xr.DataTree.from_dict({"/": xr.Dataset(), "/ice": xr.Dataset({"c": ("t", [1.0, 2.0])})})
    f(tree)
    f(xr.DataTree.from_dict({"/": xr.Dataset(), "/ice": xr.Dataset({"c": ("t", [1.0, 2.0, 3.0])})}))
    assert reasons(f)[2] == "argument 'tree', node '/ice', data variable 'c': shape (2,) -> (3,) (against trace 1)"


def test_a_signature_whose_program_was_dropped_says_so(monkeypatch):
    monkeypatch.setattr(jit_module, "CACHE_SIZE", 2)
    f = lf.jit(lambda x: x + 1)
    sizes = [xr.DataArray(np.arange(float(n)), dims="t") for n in (2, 3, 4)]
    for x in sizes:
        f(x)
    f(sizes[0])  # traced again: its program was the least recently used
    assert f.traces == 4
    assert reasons(f)[4].startswith("the signature of trace 1, whose program was dropped")


def test_explain_on_a_function_never_called():
    f = lf.jit(model)
    text = f.explain()
    assert f.traces == 0
    assert text == "lf.jit(model): not traced yet"
    assert isinstance(text, str) and repr(text) == text  # shown as text at the prompt


def test_explain_lists_every_trace_and_a_replay_adds_none():
    f = lf.jit(lambda x: x * 2)
    x = xr.DataArray(np.arange(3.0), dims="t")
    f(x)
    f(x.astype("float32"))
    f(x)
    f(x.astype("float32"))
    assert f.explain().splitlines() == [
        "lf.jit(<lambda>): traced 2 times, 2 programs kept",
        "trace 1: the first call",
        "trace 2: argument 'x': dtype float64 -> float32 (against trace 1)",
    ]


def test_a_replay_computes_no_reason(monkeypatch):
    f = lf.jit(lambda x: x * 2)
    x = xr.DataArray(np.arange(3.0), dims="t")
    f(x)

    def refuse(*args, **kwargs):
        raise AssertionError("a reason computed on a replay")

    monkeypatch.setattr(jit_module, "_differences", refuse)
    monkeypatch.setattr(jit_module._Signature, "__init__", refuse)
    for _ in range(3):
        f(x + 1)
    assert f.traces == 1


def test_a_failing_trace_records_no_reason():
    def branchy(x):
        if x.sum() > 0:  # a Python if on a traced value: DataDependentControlFlowError
            return x
        return -x

    f = lf.jit(branchy)
    with pytest.raises(lf.DataDependentControlFlowError):
        f(xr.DataArray(np.arange(3.0), dims="t"))
    assert f.traces == 0 and not f.reasons


def test_a_trace_refused_after_it_ran_is_listed_with_its_error():
    def f(x, y):
        x += 1  # a write into x, which y views: refused once traced
        return x * 2 + y.sum()

    jitted = lf.jit(f)
    a = np.arange(4.0)
    with pytest.raises(lf.InplaceError):
        jitted(a, a[1:3])
    jitted(np.arange(4.0), np.arange(2.0))
    assert jitted.explain().splitlines()[1:] == ["trace 1: the first call; the trace raised InplaceError",
                                                 "trace 2: no program kept (the traces before raised)"]


def test_no_warning_up_to_the_threshold_then_one_with_the_reason():
    f = lf.jit(lambda x: x * 2, warn_after_traces=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", lf.RetraceWarning)  # a warning before the threshold fails here
        for n in (1, 2, 3):
            f(xr.DataArray(np.arange(float(n)), dims="t"))
    assert f.traces == 3
    with pytest.warns(lf.RetraceWarning) as record:
        f(xr.DataArray(np.arange(4.0), dims="t"))
    assert len(record) == 1
    message = str(record[0].message)
    assert "traced 4 times (more than warn_after_traces=3)" in message
    assert "argument 'x': shape (3,) -> (4,)" in message
    assert record[0].filename == __file__  # points at the call
    assert issubclass(lf.RetraceWarning, UserWarning)


def test_the_warning_repeats_as_the_traces_beyond_double():
    f = lf.jit(lambda x, k: x * k, warn_after_traces=2)
    x = xr.DataArray(np.arange(3.0), dims="t")
    warned = []
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for k in range(1, 12):
            f(x, float(k))
            warned += [k for w in record if issubclass(w.category, lf.RetraceWarning)]
            record.clear()
    assert warned == [3, 4, 6, 10]


def test_the_default_threshold_is_8_and_none_never_warns():
    x = xr.DataArray(np.arange(3.0), dims="t")
    f = lf.jit(lambda x, k: x * k)
    quiet = lf.jit(lambda x, k: x * k, warn_after_traces=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", lf.RetraceWarning)
        for k in range(8):
            f(x, float(k))
        for k in range(20):
            quiet(x, float(k))
    with pytest.warns(lf.RetraceWarning, match="traced 9 times"):
        f(x, 8.0)


@pytest.mark.parametrize(("value", "error"), [("8", TypeError), (True, TypeError), (2.0, TypeError), (-1, ValueError)])
def test_a_bad_threshold_is_refused(value, error):
    with pytest.raises(error, match="warn_after_traces"):
        lf.jit(lambda x: x, warn_after_traces=value)


def test_each_trace_is_logged_with_its_reason(caplog):
    f = lf.jit(lambda x: x * 2)
    x = xr.DataArray(np.arange(3.0), dims="t")
    with caplog.at_level(logging.DEBUG, logger="labeled_func.jit"):
        f(x)
        f(x)
        f(x.astype("float32"))
    messages = [r.getMessage() for r in caplog.records if r.name == "labeled_func.jit"]
    assert messages == ["lf.jit(<lambda>): trace 1: the first call",
                        "lf.jit(<lambda>): trace 2: argument 'x': dtype float64 -> float32 (against trace 1)"]


def test_the_threshold_travels_with_the_jitted_function():
    f = lf.jit(np.sin, warn_after_traces=5)
    copy = pickle.loads(pickle.dumps(f))
    assert copy.warn_after_traces == 5 and copy.traces == 0
    assert repr(copy) == "lf.jit(np.sin, warn_after_traces=5)"
