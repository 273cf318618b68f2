"""``lf.vmap`` over DataTree arguments: the labels and 1-D coordinates along the mapped dim.

Every node that holds the dim counts, wherever it sits: its labels must agree with those of
every other node and argument (or ``ValueError``), and its coordinates come back.  A tree
output gets them where the input tree had them (an identity-like function gives back a tree
``identical`` to its argument), a tree built otherwise at its highest nodes with the dim.

Oracles: the input tree itself, the same computation done by xarray on the whole tree,
and the per-example loop of helpers_coverage.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

try:  # works with and without a tests/__init__.py
    from helpers_coverage import assert_same, loop_vmap
except ImportError:  # pragma: no cover
    from tests.helpers_coverage import assert_same, loop_vmap

RNG = np.random.default_rng(7)


def child_labelled():
    """Labels and a coordinate along ``sample`` on a child only; the root has the dim unlabelled."""
    return xr.DataTree.from_dict({
        "/": xr.Dataset({"g": ("sample", [0.1, 0.2, 0.3])}),
        "/obs": xr.Dataset({"v": (("sample", "t"), RNG.normal(size=(3, 2)))},
                           coords={"sample": [5, 6, 7], "q": ("sample", [1, 2, 3])}),
        "/obs/deep": xr.Dataset({"w": ("sample", [1.0, 2.0, 4.0])}),
        "/other": xr.Dataset({"u": (("sample", "t"), RNG.normal(size=(3, 2)))}),
    })


def root_labelled():
    """Labels and a non-index coordinate along ``sample`` on the root only (coords, no data)."""
    return xr.DataTree.from_dict({
        "/": xr.Dataset(coords={"sample": [0, 1, 2], "lab": ("sample", ["a", "b", "c"])}),
        "/c": xr.Dataset({"v": ("sample", [1.0, 2.0, 3.0])}),
        "/c/d": xr.Dataset({"w": (("sample", "t"), RNG.normal(size=(3, 2)))}, coords={"t": [10, 20]}),
    })


def siblings(a_labels, b_labels):
    return xr.DataTree.from_dict({
        "/a": xr.Dataset({"v": ("sample", [1.0, 2.0, 3.0])}, coords={"sample": a_labels}),
        "/b": xr.Dataset({"v": ("sample", [10.0, 20.0, 30.0])}, coords={"sample": b_labels}),
    })


TREES = {"child_labelled": child_labelled, "root_labelled": root_labelled}


def identity(node):
    return node * 1


def own_coords(tree, path):
    return set(tree[path].to_dataset(inherit=False).coords)


# --- tree in, the same tree out -----------------------------------------------------------------
@pytest.mark.parametrize("make", list(TREES))
def test_identity_gives_back_the_tree(make):
    tree = TREES[make]()
    xr.testing.assert_identical(lf.vmap(identity, dim="sample")(tree), tree)


@pytest.mark.parametrize("make", list(TREES))
def test_identity_in_chunks_gives_back_the_tree(make):
    tree = TREES[make]()
    xr.testing.assert_identical(lf.vmap(identity, dim="sample", chunk_size=2)(tree), tree)


def test_child_coordinates_stay_on_the_child():
    out = lf.vmap(identity, dim="sample")(child_labelled())
    assert own_coords(out, "obs") == {"sample", "q"}
    assert own_coords(out, "/") == set()
    assert own_coords(out, "obs/deep") == set()  # inherits the index from /obs


def test_root_coordinates_are_not_copied_into_children():
    out = lf.vmap(identity, dim="sample")(root_labelled())
    assert own_coords(out, "/") == {"sample", "lab"}
    assert own_coords(out, "c") == set()
    assert own_coords(out, "c/d") == {"t"}


@pytest.mark.parametrize("make", list(TREES))
def test_per_node_computation_equals_xarray_on_the_whole_tree(make):
    tree = TREES[make]()

    def centred(node):
        return node.map_over_datasets(lambda ds: ds - ds.mean("t") if "t" in ds.dims else ds * 2)

    expected = tree.map_over_datasets(lambda ds: ds - ds.mean("t") if "t" in ds.dims else ds * 2)
    actual = lf.vmap(centred, dim="sample")(tree)
    xr.testing.assert_allclose(actual, expected)
    xr.testing.assert_identical(actual.map_over_datasets(lambda ds: ds.coords.to_dataset()),
                                expected.map_over_datasets(lambda ds: ds.coords.to_dataset()))


def test_subtree_argument_keeps_its_shape():
    sub = child_labelled()["obs"]
    out = lf.vmap(identity, dim="sample")(sub)
    assert [n.relative_to(out) for n in out.subtree] == [n.relative_to(sub) for n in sub.subtree]
    xr.testing.assert_identical(out, sub)


def test_two_mapped_dims_give_back_the_tree():
    tree = xr.DataTree.from_dict({
        "/": xr.Dataset(coords={"member": ["m0", "m1"]}),
        "/x": xr.Dataset({"v": (("sample", "member", "t"), RNG.normal(size=(3, 2, 4)))},
                         coords={"sample": [1, 2, 3], "q": ("sample", [0.5, 0.6, 0.7])}),
    })
    xr.testing.assert_identical(lf.vmap(identity, dim=("sample", "member"))(tree), tree)


# --- tree in, DataArray / Dataset out ----------------------------------------------------------
def test_dataarray_from_a_child_gets_its_labels_and_coords():
    tree = child_labelled()

    def f(node):
        return node["obs/v"].sum("t") + node["g"]

    out = lf.vmap(f, dim="sample")(tree)
    assert_same(out, loop_vmap(f, "sample", tree))
    assert list(out["sample"].values) == [5, 6, 7]
    assert list(out["q"].values) == [1, 2, 3]


def test_dataarray_from_a_child_inherits_the_root_labels():
    tree = root_labelled()

    def f(node):
        return node["c/d/w"].sum("t")

    out = lf.vmap(f, dim="sample")(tree)
    assert_same(out, loop_vmap(f, "sample", tree))
    assert list(out["sample"].values) == [0, 1, 2]


def test_dataset_from_a_child_gets_its_labels_and_coords():
    tree = child_labelled()

    def f(node):
        return xr.Dataset({"s": node["obs/v"].sum("t"), "w": node["obs/deep/w"]})

    assert_same(lf.vmap(f, dim="sample")(tree), loop_vmap(f, "sample", tree))


def test_agreeing_siblings_are_paired():
    tree = siblings([1, 2, 3], [1, 2, 3])

    def f(node):
        return node["a/v"] + node["b/v"]

    out = lf.vmap(f, dim="sample")(tree)
    assert_same(out, loop_vmap(f, "sample", tree))
    xr.testing.assert_identical(lf.vmap(identity, dim="sample")(tree), tree)


# --- labels that differ ---------------------------------------------------------------------
def test_siblings_with_other_labels_raise():
    tree = siblings([1, 2, 3], [4, 5, 6])

    def f(tree):
        return tree["a/v"] + tree["b/v"]

    with pytest.raises(ValueError) as info:
        lf.vmap(f, dim="sample")(tree)
    message = str(info.value)
    for part in ("'sample'", "tree node /a", "tree node /b", "[1, 2, 3]", "[4, 5, 6]"):
        assert part in message, (part, message)


def test_siblings_with_labels_in_another_order_raise():
    with pytest.raises(ValueError, match="node /b"):
        lf.vmap(identity, dim="sample")(siblings([1, 2, 3], [3, 2, 1]))


def test_a_node_and_another_argument_with_other_labels_raise():
    tree = child_labelled()
    other = xr.DataArray([1.0, 2.0, 3.0], dims="sample", coords={"sample": [5, 6, 8]})

    def f(tree, other):
        return tree["obs/v"].sum("t") * other

    with pytest.raises(ValueError) as info:
        lf.vmap(f, dim="sample")(tree, other)
    assert "tree node /obs" in str(info.value) and "other" in str(info.value)
    ok = other.assign_coords(sample=[5, 6, 7])
    assert_same(lf.vmap(f, dim="sample")(tree, ok), loop_vmap(f, "sample", tree, ok))


# --- trees built inside the function ----------------------------------------------------------
def test_new_tree_gets_the_coords_at_its_highest_nodes():
    x = xr.DataArray(RNG.normal(size=(3, 4)), dims=("sample", "t"),
                     coords={"sample": [10, 20, 30], "q": ("sample", [1, 2, 3])}, name="x")

    def f(x):
        return xr.DataTree.from_dict({"/": xr.Dataset({"m": x.mean("t")}),
                                      "/c": xr.Dataset({"s": x.sum("t")}),
                                      "/c/e": xr.Dataset({"e": x.max("t")})})

    out = lf.vmap(f, dim="sample")(x)
    expected = f(x)  # xarray's own tree from the whole-batch results: q copied into each node
    for path in ("/", "c", "c/e"):  # each node sees the same, q from the root
        xr.testing.assert_allclose(out[path].to_dataset(inherit="all_coords"),
                                   expected[path].to_dataset(inherit="all_coords"))
    assert own_coords(out, "/") == {"sample", "q"}
    assert own_coords(out, "c") == own_coords(out, "c/e") == set()  # never copied below
    for path in ("/", "c", "c/e"):  # every node with the dim sees the labels and q
        assert list(out[path].dataset["sample"].values) == [10, 20, 30]
        assert list(out[path].to_dataset(inherit="all_coords")["q"].values) == [1, 2, 3]


def test_new_tree_below_an_unlabelled_root():
    x = xr.DataArray(RNG.normal(size=(3, 4)), dims=("sample", "t"), coords={"sample": [10, 20, 30]})

    def f(x):
        return xr.DataTree.from_dict({"/": xr.Dataset({"k": ("t", np.ones(4))}),
                                      "/a": xr.Dataset({"m": x.mean("t")}),
                                      "/b": xr.Dataset({"s": x.sum("t")})})

    out = lf.vmap(f, dim="sample")(x)
    # the root gets the dim from the unmapped k (vmap batches every output), and the labels with it
    assert own_coords(out, "/") == {"sample"}
    xr.testing.assert_allclose(out["a"].to_dataset(), f(x)["a"].to_dataset())


def test_tree_of_other_nodes_from_a_tree_gets_the_labels():
    tree = child_labelled()

    def f(node):
        return xr.DataTree.from_dict({"/": xr.Dataset({"pred": node["obs/v"].sum("t")})})

    out = lf.vmap(f, dim="sample")(tree)
    assert own_coords(out, "/") == {"sample", "q"}
    xr.testing.assert_allclose(out["pred"], tree["obs/v"].sum("t"))


def test_child_returned_as_a_tree_gets_its_labels():
    tree = child_labelled()
    out = lf.vmap(lambda node: node["obs"], dim="sample")(tree)
    xr.testing.assert_identical(out, tree["obs"])


# --- Dask: the same as in memory -------------------------------------------------------------
dask = pytest.importorskip("dask")


@pytest.mark.parametrize("make", list(TREES))
def test_dask_identity_gives_back_the_tree(make):
    tree = TREES[make]()
    lazy = lf.vmap(identity, dim="sample")(tree.chunk({"sample": 2}))
    assert lazy["c" if make == "root_labelled" else "obs"]["v"].chunks is not None
    xr.testing.assert_identical(lazy.compute(), tree)


@pytest.mark.parametrize("make", list(TREES))
def test_dask_tree_equals_in_memory(make):
    tree = TREES[make]()

    def f(node):
        return node.map_over_datasets(lambda ds: ds - ds.mean("t") if "t" in ds.dims else ds * 2)

    lazy = lf.vmap(f, dim="sample")(tree.chunk({"sample": 2}))
    xr.testing.assert_identical(lazy.compute(), lf.vmap(f, dim="sample")(tree))


def test_dask_dataarray_from_a_child_gets_its_labels_and_coords():
    tree = child_labelled()

    def f(node):
        return node["obs/v"].sum("t")

    lazy = lf.vmap(f, dim="sample")(tree.chunk({"sample": 2}))
    xr.testing.assert_identical(lazy.compute(), lf.vmap(f, dim="sample")(tree))
    assert set(lazy.coords) == {"sample", "q"}


def test_dask_siblings_with_other_labels_raise():
    with pytest.raises(ValueError, match="node /b"):
        lf.vmap(identity, dim="sample")(siblings([1, 2, 3], [4, 5, 6]).chunk({"sample": 1}))
