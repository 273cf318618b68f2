"""``xr.DataTree`` and ``xr.Variable`` arguments and outputs of ``lf.jit``.

Oracle: the unjitted function on the same arguments (``assert_identical``: values,
structure, names, dims, coords and attrs); the trace counter and the cache length say
when a call replays and when it traces again.
"""
import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

RNG = np.random.default_rng(5)


def make_tree(scale=1.0, extra=False, name="model"):
    nodes = {
        "/": xr.Dataset({"a": ("t", RNG.normal(size=3) * scale)}, coords={"t": [0.0, 1.0, 2.0]},
                        attrs={"title": "root"}),
        "/ocean": xr.Dataset({"b": (("t", "z"), RNG.normal(size=(3, 2)) * scale, {"units": "K"}),
                              "c": ("z", RNG.normal(size=2))}, coords={"z": [10, 20]}, attrs={"level": 1}),
        "/ocean/deep": xr.Dataset({"d": ("t", RNG.normal(size=3))}),
    }
    if extra:
        nodes["/ice"] = xr.Dataset({"e": ("t", RNG.normal(size=3))})
    return xr.DataTree.from_dict(nodes, name=name)


def physics(tree):
    """Each node's variables transformed, plus a traced non-index coordinate on one node."""
    out = tree.map_over_datasets(lambda ds: np.exp(-ds) * 2 + ds ** 2)
    ocean = out["ocean"].to_dataset(inherit=False)
    out["ocean"] = xr.DataTree(ocean.assign_coords(total=ocean.b.sum()))
    return out


def test_a_datatree_argument_and_output_equal_the_unjitted_function():
    jitted = lf.jit(physics)
    for scale in (1.0, 0.5, 3.0):
        tree = make_tree(scale)
        xr.testing.assert_identical(jitted(tree), physics(tree))
    assert jitted.traces == 1 and len(jitted.cache) == 1


@pytest.mark.parametrize("change", ["node", "variable", "name", "coords", "attrs", "sizes"])
def test_a_new_tree_signature_traces_again(change):
    jitted = lf.jit(physics)
    tree = make_tree()
    jitted(tree)
    if change == "node":
        other = make_tree(extra=True)
    elif change == "variable":
        other = tree.copy()
        other["ocean/deep"] = xr.DataTree(xr.Dataset({"d2": ("t", np.ones(3))}))
    elif change == "name":
        other = make_tree(name="other")
    elif change == "coords":
        other = tree.copy()
        other.dataset = tree.to_dataset(inherit=False).assign_coords(t=[0.0, 1.0, 5.0])
    elif change == "attrs":
        other = tree.copy()
        other.attrs = {"title": "changed"}
    else:
        other = make_tree().isel(t=slice(0, 2))
    xr.testing.assert_identical(jitted(other), physics(other))
    assert jitted.traces == 2
    xr.testing.assert_identical(jitted(tree), physics(tree))
    assert jitted.traces == 2 and len(jitted.cache) == 2  # the first signature's program is still there


def test_a_subtree_argument_keeps_its_inherited_coordinates():
    tree = make_tree()
    f = lambda sub: sub.map_over_datasets(lambda ds: ds * 2)
    jitted = lf.jit(f)
    got = jitted(tree["ocean"])
    expected = f(tree["ocean"])
    xr.testing.assert_allclose(got["deep"].to_dataset(), expected["deep"].to_dataset())
    assert got.to_dataset().t.values.tolist() == [0.0, 1.0, 2.0]
    np.testing.assert_allclose(got["b"].values, expected["b"].values)


def test_a_datatree_under_jit_of_grad():
    """The tree is an argument that grad does not differentiate (grad refuses DataTrees)."""
    loss = lambda w, tree: ((tree["a"] * w) ** 2).sum() + (tree["ocean/b"] * w).sum()
    gradient = lf.jit(lf.grad(loss))
    w = xr.DataArray(RNG.normal(size=3), dims="t", coords={"t": [0.0, 1.0, 2.0]})
    for scale in (1.0, 2.0):
        tree = make_tree(scale)
        got = gradient(w, tree)
        xr.testing.assert_allclose(got, lf.grad(loss)(w, tree))
        a, b = tree["a"].values, tree["ocean/b"].values
        np.testing.assert_allclose(got.values, 2 * a ** 2 * w.values + b.sum(axis=1))  # analytic
    assert gradient.traces == 1


def variable(dims=("t", "z"), shape=(3, 2), attrs=None):
    return xr.Variable(dims, RNG.normal(size=shape), attrs={"units": "m"} if attrs is None else attrs)


def energy(v, w):
    return {"square": v ** 2 + w, "total": (v * w).sum("t"), "count": 2}


def test_variable_arguments_and_outputs_equal_the_unjitted_function():
    jitted = lf.jit(energy)
    for _ in range(3):
        v, w = variable(), variable()
        got, expected = jitted(v, w), energy(v, w)
        assert got.keys() == expected.keys() and got["count"] == 2
        for key in ("square", "total"):
            assert isinstance(got[key], xr.Variable)
            xr.testing.assert_identical(got[key], expected[key])
    assert jitted.traces == 1 and len(jitted.cache) == 1


@pytest.mark.parametrize("other", [dict(dims=("t", "y")), dict(dims=("z", "t"), shape=(2, 3)), dict(shape=(4, 2)),
                                   dict(attrs={"units": "km"})])
def test_a_new_variable_signature_traces_again(other):
    f = lambda v: v * 2 + v.mean()
    jitted = lf.jit(f)
    first = variable()
    jitted(first)
    changed = variable(**other)
    xr.testing.assert_identical(jitted(changed), f(changed))
    assert jitted.traces == 2
    xr.testing.assert_identical(jitted(first), f(first))
    assert jitted.traces == 2  # both programs kept (attrs are compared, not hashed)


def test_a_variable_and_a_tree_in_one_call():
    f = lambda v, tree: (tree["a"] * v, tree.map_over_datasets(lambda ds: ds + v.sum()))
    v = xr.Variable("t", RNG.normal(size=3))
    jitted = lf.jit(f)
    for scale in (1.0, 4.0):
        tree = make_tree(scale)
        got, expected = jitted(v * scale, tree), f(v * scale, tree)
        xr.testing.assert_identical(got[0], expected[0])
        xr.testing.assert_identical(got[1], expected[1])
    assert jitted.traces == 1


def test_a_constant_variable_or_tree_output_comes_back_as_it_is():
    table = xr.Variable("k", [1.0, 2.0], attrs={"units": "s"})
    tree = make_tree()
    jitted = lf.jit(lambda x: (x * 2, table, tree))
    x = xr.DataArray(np.arange(3.0), dims="t")
    for _ in range(2):
        _, got_table, got_tree = jitted(x)
        xr.testing.assert_identical(got_table, table)
        xr.testing.assert_identical(got_tree, tree)
    assert jitted.traces == 1
