"""flat.py: the one walk over pytrees of labeled values (``flat.Arrays``), its policy for
numbers, Variables and DataTrees, the bugs of the walks it replaced, and a reading of the
code that fails when a floor-3 module walks labeled values on its own again."""
import ast
import pathlib
import sys

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func.flat import Arrays, leaf_arrays, replace_arrays

PACKAGE = pathlib.Path(lf.__file__).parent


def _tree():
    return xr.DataTree.from_dict({"/": xr.Dataset({"a": ("x", [1.0, 2.0])}),
                                  "/child": xr.Dataset({"b": ("y", [3.0])})})


def _zoo():
    """One leaf of every kind the walk knows, in a dict (sorted keys: the walk's order)."""
    return {
        "a_dataarray": xr.DataArray([1.0, 2.0], dims="x", coords={"x": [10, 20]}, name="t"),
        "b_dataset": xr.Dataset({"p": ("x", [3.0, 4.0]), "q": ((), 5.0)}, coords={"x": [1, 2]}),
        "c_variable": xr.Variable("x", [6.0, 7.0], {"units": "m"}),
        "d_datatree": _tree(),
        "e_int": 3,
        "f_float": 1.5,
        "g_bool": True,
        "h_numpy_scalar": np.float32(2.0),
        "i_zero_d": np.asarray(8.0),
        "j_array": np.arange(3.0),
        "k_none": None,
        "l_string": "label",
    }


# --- the policy -----------------------------------------------------------------------------------
def test_policy_numbers_kept():
    walk = Arrays(_zoo())
    assert walk.counts == [1, 2, 1, 2, 0, 0, 0, 0, 1, 1, 0, 0]
    expected = [[1.0, 2.0], [3.0, 4.0], 5.0, [6.0, 7.0], [1.0, 2.0], [3.0], 8.0, [0.0, 1.0, 2.0]]
    assert len(walk.arrays) == len(expected)
    for array, value in zip(walk.arrays, expected):
        assert not isinstance(array, (xr.DataArray, xr.Variable))  # the data, never a wrapper
        np.testing.assert_array_equal(array, value)


def test_policy_numbers_as_arrays():
    walk = Arrays(_zoo(), numbers="arrays")
    assert walk.counts == [1, 2, 1, 2, 1, 1, 1, 1, 1, 1, 0, 0]
    numbers = walk.arrays[6:10]
    assert [a.dtype for a in numbers] == [np.dtype(int), np.dtype(float), np.dtype(bool), np.dtype(np.float32)]
    assert all(isinstance(a, np.ndarray) and a.shape == () for a in numbers)


def test_unknown_numbers_policy_is_an_error():
    with pytest.raises(ValueError, match="numbers must be"):
        Arrays([1.0], numbers="drop")


def test_rebuild_keeps_every_kind():
    zoo = _zoo()
    walk = Arrays(zoo, numbers="arrays")
    out = walk.rebuild([a * 10 for a in walk.arrays])
    assert out["a_dataarray"].name == "t" and list(out["a_dataarray"].x.values) == [10, 20]
    np.testing.assert_array_equal(out["a_dataarray"], [10.0, 20.0])
    assert list(out["b_dataset"].data_vars) == ["p", "q"] and float(out["b_dataset"]["q"]) == 50.0
    assert isinstance(out["c_variable"], xr.Variable) and out["c_variable"].attrs == {"units": "m"}
    np.testing.assert_array_equal(out["c_variable"].data, [60.0, 70.0])
    tree = out["d_datatree"]
    assert isinstance(tree, xr.DataTree)
    np.testing.assert_array_equal(tree["child"]["b"], [30.0])
    np.testing.assert_array_equal(tree["a"], [10.0, 20.0])
    assert float(out["f_float"]) == 15.0 and out["f_float"].shape == ()  # traced numbers come back as 0-d arrays
    assert out["k_none"] is None and out["l_string"] == "label"
    kept = Arrays(zoo).rebuild(Arrays(zoo).arrays)
    assert kept["e_int"] == 3 and kept["h_numpy_scalar"] is zoo["h_numpy_scalar"]


def test_check_sees_every_leaf_with_its_path():
    seen = []
    Arrays({"a": [1.0, None], "b": "s"}, check=lambda leaf, path: seen.append((path, leaf)))
    assert seen == [(("a", 0), 1.0), (("a", 1), None), (("b",), "s")]


def test_traced_only_keeps_plain_arrays_in_place():
    plain = np.arange(2.0)
    seen = {}

    def f(x):
        ds = xr.Dataset({"traced": x, "plain": ("x", plain)})
        walk = Arrays({"ds": ds, "p": plain}, traced_only=True)
        seen["counts"] = walk.counts
        out = walk.rebuild([a * 2 for a in walk.arrays])
        assert out["p"] is plain
        np.testing.assert_array_equal(out["ds"]["plain"].data, plain)
        return out["ds"]["traced"].sum()

    g = lf.grad(f)(xr.DataArray([1.0, 2.0], dims="x"))
    assert seen["counts"] == [1, 0]
    np.testing.assert_array_equal(g, [2.0, 2.0])


def test_leaf_arrays_of_a_datatree_parents_first():
    found = leaf_arrays(_tree())
    np.testing.assert_array_equal(found[0], [1.0, 2.0])
    np.testing.assert_array_equal(found[1], [3.0])
    rebuilt = replace_arrays(_tree(), [np.zeros(2), np.ones(1)])
    np.testing.assert_array_equal(rebuilt["child"]["b"], [1.0])


def test_jit_signature_walk_finds_the_arrays_of_the_shared_walk():
    """lf.jit computes its per-call signature and arrays in one pass (its hot path); the
    arrays must be those of flat.Arrays, leaf by leaf."""
    jit = sys.modules["labeled_func.jit"]

    class Jitted:
        static_argnames = ()
        signature = None

    zoo = _zoo()
    call = jit._Call(Jitted, (zoo,), {})
    walk = Arrays(((zoo,), {}))
    assert call.counts == walk.counts
    assert all(a is b or (type(a) is type(b) and np.array_equal(a, b)) for a, b in zip(call.arrays, walk.arrays))


# --- the bugs of the walks it replaced ------------------------------------------------------------
def test_checkpoint_takes_a_variable_argument():
    """lf.checkpoint traced the Variable itself as an array (TypeError under grad)."""
    x = xr.DataArray([1.0, 2.0], dims="x")
    v = xr.Variable("x", [3.0, 4.0])
    f = lf.checkpoint(lambda a, w: (a * w).sum())
    np.testing.assert_array_equal(lf.grad(lambda a: f(a, v))(x), [3.0, 4.0])
    out = lf.checkpoint(lambda w: w * 2)(v)
    assert isinstance(out, xr.Variable)


def test_grad_through_a_variable_output():
    """A Variable output was taken for a bare array: the gradient was silently zero."""
    x = xr.DataArray([1.0, 2.0], dims="x")
    np.testing.assert_array_equal(lf.grad(lambda a: (xr.Variable("x", a.data) * 2).sum())(x), [2.0, 2.0])
    np.testing.assert_array_equal(
        lf.grad(lambda a: lf.checkpoint(lambda w: (w * 2).sum())(xr.Variable("x", a.data)))(x), [2.0, 2.0])
    with pytest.raises(ValueError, match="Variable with dims"):
        lf.grad(lambda a: xr.Variable("x", a.data) * 2)(x)


def test_vjp_takes_a_variable_cotangent():
    """match_arrays passed a Variable cotangent on as if it were an array."""
    x = xr.DataArray([1.0, 2.0], dims="x")
    _, pull = lf.vjp(lambda a: xr.Variable("x", a.data) * 2, x)
    for cotangent in (xr.Variable("x", [1.0, 3.0]), xr.DataArray([1.0, 3.0], dims="x")):
        np.testing.assert_array_equal(pull(cotangent)[0], [2.0, 6.0])
    with pytest.raises(ValueError, match="dims"):
        pull(xr.Variable("y", [1.0, 3.0]))


def test_recorded_while_loop_carries_a_datatree():
    """lf.while_loop under lf.jit kept a DataTree of the loop value as a constant: the
    body's updates to it were lost."""
    tree = _tree()

    def f(limit, t):
        return lf.while_loop(lambda s: s[0] <= limit, lambda s: (s[0] * 2, s[1] * 2), (limit * 0 + 1, t))

    eager = f(xr.DataArray(5.0), tree)
    jitted = lf.jit(f)(xr.DataArray(5.0), tree)
    assert float(jitted[0]) == float(eager[0]) == 8.0
    xr.testing.assert_identical(jitted[1], eager[1])
    np.testing.assert_array_equal(jitted[1]["child"]["b"], [24.0])


def test_recorded_while_loop_names_a_datatree_node_that_changes():
    def f(limit, t):
        return lf.while_loop(lambda s: s[0] <= limit,
                             lambda s: (s[0] * 2, s[1].assign({"a": s[1]["a"].astype(np.float32)})),
                             (limit * 0 + 1, t))

    with pytest.raises(TypeError, match="node '/'"):
        lf.jit(f)(xr.DataArray(5.0), _tree())


def test_unravel_gives_back_a_variable():
    """ravel took a Variable for a bare array: unravel returned its data, attrs lost."""
    v = xr.Variable("x", [1.0, 2.0], {"units": "m"})
    flat, unravel = lf.ravel({"v": v, "a": xr.DataArray([3.0], dims="y")})
    back = unravel(flat * 2)
    assert isinstance(back["v"], xr.Variable) and back["v"].attrs == {"units": "m"}
    np.testing.assert_array_equal(back["v"].data, [2.0, 4.0])


# --- no module walks labeled values on its own ----------------------------------------------------
LABELED = {"DataArray", "Dataset", "Variable", "DataTree"}

# (module, function): why it collects the data of labeled values itself
ALLOWED = {
    ("chunks.py", "_mapped_arrays"): "the arrays of a mapped argument that have the mapped dim, with its axis (the "
                                     "chunks' writes into arguments): flat's walk carries no dims",
    ("jit.py", "_leaf"): "lf.jit's per-call signature and arrays in one pass (its hot path: a second walk costs "
                         "~5 us of a ~60 us call); test_jit_signature_walk_finds_the_arrays_of_the_shared_walk "
                         "holds it to flat.Arrays' policy",
    ("control_flow.py", "_aligned_arrays"): "lines up a body's output with the loop value (transposed to its "
                                            "dims, dtypes checked), as match_arrays does; the value's own arrays "
                                            "come from flat.leaf_arrays",
}


def _is_labeled_check(node):
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
            and len(node.args) == 2):
        return False
    kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
    return any(isinstance(k, ast.Attribute) and k.attr in LABELED and isinstance(k.value, ast.Name)
               and k.value.id == "xr" for k in kinds)


def _has_data(element):
    parts = element.elts if isinstance(element, ast.Tuple) else [element]
    return any(isinstance(part, ast.Attribute) and part.attr == "data" for part in parts)


def _collected_data(function):
    """The list displays, comprehensions and yields of ``function`` that gather ``.data``
    attributes, not counting those passed straight to a call (``np.stack([...])``)."""
    arguments = {id(arg) for node in ast.walk(function) if isinstance(node, ast.Call) for arg in node.args}
    for node in ast.walk(function):
        if id(node) in arguments:
            continue
        if isinstance(node, ast.List) and any(_has_data(e) for e in node.elts):
            yield node
        elif isinstance(node, (ast.ListComp, ast.GeneratorExp)) and _has_data(node.elt):
            yield node
        elif isinstance(node, ast.Yield) and node.value is not None and _has_data(node.value):
            yield node


def walks_of_labeled_values(folder):
    """[(file, function, line)]: the functions outside flat.py that take a labeled value's
    data arrays themselves: a check ``isinstance(..., xr.DataArray/Dataset/Variable/
    DataTree)`` and a list (or yield) of ``.data`` in one function."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        if path.name == "flat.py" or "engine" in path.relative_to(folder).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inside = list(ast.walk(node))
                if any(_is_labeled_check(n) for n in inside) and any(True for _ in _collected_data(node)):
                    found.append((path.name, node.name, node.lineno))
    return found


def test_no_module_walks_labeled_values_on_its_own():
    found = [(f, name, line) for f, name, line in walks_of_labeled_values(PACKAGE) if (f, name) not in ALLOWED]
    assert not found, (
        "these functions take the data arrays of DataArrays/Datasets/Variables/DataTrees themselves; use "
        f"flat.Arrays (or flat.leaf_arrays / replace_arrays) instead, or add them to ALLOWED with a reason: {found}")


def test_allowed_walks_still_exist():
    found = {(f, name) for f, name, _ in walks_of_labeled_values(PACKAGE)}
    assert set(ALLOWED) <= found, f"no longer walks on its own, drop from ALLOWED: {set(ALLOWED) - found}"


def test_the_check_finds_a_walk(tmp_path):
    (tmp_path / "mod.py").write_text(
        "import xarray as xr\n"
        "def arrays_of(leaf):\n"
        "    if isinstance(leaf, xr.Dataset):\n"
        "        return [leaf[v].data for v in leaf.data_vars]\n"
        "    return [leaf.data] if isinstance(leaf, xr.DataArray) else []\n"
        "def stacked(values):\n"
        "    if isinstance(values[0], xr.DataArray):\n"
        "        return np.stack([v.data for v in values])\n")
    assert walks_of_labeled_values(tmp_path) == [("mod.py", "arrays_of", 2)]
