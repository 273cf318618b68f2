"""vmap's ValueErrors (API.md, "vmap"): each names the dim, the arguments and the sizes.

Every required element of a message is checked on its own with `re.search`, so a
rephrased message still passes as long as it says what is wrong and where.
"""

import re

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf


def field(sizes, coords=None, seed=0):
    rng = np.random.default_rng(seed)
    return xr.DataArray(
        rng.normal(size=tuple(sizes.values())), dims=tuple(sizes), coords=coords or {}
    )


def combine(temperature, pressure):
    return temperature * 2 + pressure


def assert_mentions(message, *patterns):
    for pattern in patterns:
        assert re.search(pattern, message), f"{pattern!r} not in message: {message}"


# --- the dim is in no argument -----------------------------------------------------


def test_dim_in_no_argument_raises_naming_dim_and_argument():
    temperature = field({"time": 4})
    with pytest.raises(ValueError) as excinfo:
        lf.vmap(lambda temperature: temperature * 2, dim="sample")(temperature)
    assert_mentions(str(excinfo.value), r"\bsample\b", r"\btemperature\b")


def test_dim_in_no_argument_of_two_names_both_arguments():
    temperature = field({"time": 4})
    pressure = field({"level": 3})
    with pytest.raises(ValueError) as excinfo:
        lf.vmap(combine, dim="sample")(temperature, pressure)
    assert_mentions(str(excinfo.value), r"\bsample\b", r"\btemperature\b", r"\bpressure\b")


def test_second_of_two_dims_in_no_argument_raises_naming_it():
    temperature = field({"lat": 2, "time": 4})
    with pytest.raises(ValueError) as excinfo:
        lf.vmap(lambda temperature: temperature * 2, dim=("lat", "lon"))(temperature)
    assert_mentions(str(excinfo.value), r"\blon\b", r"\btemperature\b")


def test_axis_size_replaces_a_missing_dim_and_broadcasts():
    temperature = field({"time": 4})
    result = lf.vmap(lambda temperature: temperature * 2, dim="sample", axis_size=3)(temperature)
    assert result.sizes == {"sample": 3, "time": 4}
    assert result.dims[0] == "sample"
    for i in range(3):
        np.testing.assert_allclose(result.isel(sample=i).values, temperature.values * 2)


# --- two arguments disagree on the size of the dim ----------------------------------


@pytest.mark.parametrize("by_keyword", [False, True], ids=["positional", "keyword"])
def test_size_mismatch_raises_naming_dim_arguments_and_sizes(by_keyword):
    temperature = field({"sample": 3, "time": 5})
    pressure = field({"sample": 4, "time": 5})
    mapped = lf.vmap(combine, dim="sample")
    with pytest.raises(ValueError) as excinfo:
        if by_keyword:
            mapped(temperature=temperature, pressure=pressure)
        else:
            mapped(temperature, pressure)
    assert_mentions(
        str(excinfo.value), r"\bsample\b", r"\btemperature\b", r"\bpressure\b", r"\b3\b", r"\b4\b"
    )


def test_size_mismatch_with_in_dims_raises():
    temperature = field({"sample": 3, "time": 5})
    pressure = field({"sample": 4, "time": 5})
    with pytest.raises(ValueError) as excinfo:
        lf.vmap(combine, in_dims=("sample", "sample"))(temperature, pressure)
    assert_mentions(
        str(excinfo.value), r"\bsample\b", r"\btemperature\b", r"\bpressure\b", r"\b3\b", r"\b4\b"
    )


# --- they disagree on the coordinate labels ------------------------------------------


def test_coordinate_label_mismatch_raises_and_never_aligns():
    temperature = field({"sample": 3, "time": 2}, coords={"sample": [0, 1, 2]})
    pressure = field({"sample": 3, "time": 2}, coords={"sample": [0, 1, 5]}, seed=1)
    with pytest.raises(ValueError) as excinfo:
        lf.vmap(combine, dim="sample")(temperature, pressure)
    assert_mentions(str(excinfo.value), r"\bsample\b", r"\btemperature\b", r"\bpressure\b")


def test_coordinate_labels_in_a_different_order_raise():
    temperature = field({"sample": 3, "time": 2}, coords={"sample": ["a", "b", "c"]})
    pressure = field({"sample": 3, "time": 2}, coords={"sample": ["c", "b", "a"]}, seed=1)
    with pytest.raises(ValueError) as excinfo:
        lf.vmap(combine, dim="sample")(temperature, pressure)
    assert_mentions(str(excinfo.value), r"\bsample\b", r"\btemperature\b", r"\bpressure\b")


def test_equal_coordinate_labels_work_and_are_restored():
    labels = ["a", "b", "c"]
    temperature = field({"sample": 3, "time": 2}, coords={"sample": labels})
    pressure = field({"sample": 3, "time": 2}, coords={"sample": labels}, seed=1)
    result = lf.vmap(combine, dim="sample")(temperature, pressure)
    assert result.dims == ("sample", "time")
    assert list(result["sample"].values) == labels
    np.testing.assert_allclose(result.values, temperature.values * 2 + pressure.values)


# --- in_dims names a dim the argument lacks, or does not fit the arguments ------------


def test_in_dims_naming_a_dim_the_argument_lacks_raises():
    temperature = field({"sample": 3, "time": 5})
    pressure = field({"time": 5})
    with pytest.raises(ValueError) as excinfo:
        lf.vmap(combine, in_dims=("sample", "sample"))(temperature, pressure)
    assert_mentions(str(excinfo.value), r"\bsample\b", r"\bpressure\b", r"\btime\b")


def test_in_dims_dict_naming_a_dim_the_keyword_argument_lacks_raises():
    temperature = field({"sample": 3, "time": 5})
    pressure = field({"time": 5})
    with pytest.raises(ValueError) as excinfo:
        lf.vmap(combine, in_dims={"temperature": "sample", "pressure": "sample"})(
            temperature, pressure=pressure
        )
    assert_mentions(str(excinfo.value), r"\bsample\b", r"\bpressure\b", r"\btime\b")


def test_dim_absent_from_one_argument_is_fine_with_dim():
    # Control for the two tests above: with dim=, an argument without it is shared.
    temperature = field({"sample": 3, "time": 5})
    pressure = field({"time": 5})
    result = lf.vmap(combine, dim="sample")(temperature, pressure)
    np.testing.assert_allclose(
        result.transpose("sample", "time").values, temperature.values * 2 + pressure.values
    )


@pytest.mark.parametrize(
    "in_dims, lengths",
    [
        pytest.param(("sample",), (r"\b1\b", r"\b2\b"), id="too-short"),
        pytest.param(("sample", None, None), (r"\b3\b", r"\b2\b"), id="too-long"),
    ],
)
def test_in_dims_tuple_of_wrong_length_raises(in_dims, lengths):
    temperature = field({"sample": 3, "time": 5})
    pressure = field({"sample": 3, "time": 5}, seed=1)
    with pytest.raises(ValueError) as excinfo:
        lf.vmap(combine, in_dims=in_dims)(temperature, pressure)
    assert_mentions(str(excinfo.value), r"in_dims", *lengths)


@pytest.mark.parametrize(
    "entry, argument, culprits",
    [
        pytest.param({"a": "sample", "zz": None}, "dict", (r"'zz'", r"\bstate\b"), id="extra-key"),
        pytest.param({"a": "sample", "b": {"c": None}}, "nested", (r"'c'", r"state\['b'\]"), id="nested-key"),
        pytest.param(["sample", None, None], "list", (r"\b3\b", r"\b2\b", r"\bstate\b"), id="long-list"),
    ],
)
def test_a_nested_in_dims_entry_that_does_not_fit_the_argument_raises(entry, argument, culprits):
    x = field({"sample": 3, "time": 5})
    state = {"dict": {"a": x}, "nested": {"a": x, "b": {"d": 1.0}}, "list": [x, x]}[argument]

    def total(state):
        return sum(leaf.sum() for leaf in all_leaves(state))

    with pytest.raises(ValueError) as excinfo:
        lf.vmap(total, in_dims=(entry,))(state)
    assert_mentions(str(excinfo.value), r"in_dims", *culprits)


def all_leaves(tree):
    if isinstance(tree, dict):
        return [leaf for value in tree.values() for leaf in all_leaves(value)]
    if isinstance(tree, list):
        return [leaf for value in tree for leaf in all_leaves(value)]
    return [tree]


def test_in_dims_dict_with_an_unknown_parameter_raises():
    temperature = field({"sample": 3, "time": 5})
    pressure = field({"sample": 3, "time": 5}, seed=1)
    with pytest.raises(ValueError) as excinfo:
        lf.vmap(combine, in_dims={"humidity": "sample"})(temperature, pressure)
    assert_mentions(str(excinfo.value), r"\bhumidity\b")


# --- randomness ----------------------------------------------------------------------


def test_invalid_randomness_raises():
    temperature = field({"sample": 3})
    with pytest.raises(ValueError) as excinfo:
        lf.vmap(lambda temperature: temperature, dim="sample", randomness="foo")(temperature)
    assert_mentions(str(excinfo.value), r"\bfoo\b", r"randomness")


# --- an output that already has the mapped dim ----------------------------------------


def test_output_that_already_has_the_mapped_dim_raises():
    temperature = field({"sample": 3, "time": 4})
    with pytest.raises(ValueError) as excinfo:
        lf.vmap(lambda temperature: temperature.expand_dims(sample=2), dim="sample")(temperature)
    assert_mentions(str(excinfo.value), r"\bsample\b")


def test_captured_output_with_the_mapped_dim_raises():
    captured = xr.DataArray(np.ones(2), dims="sample")
    temperature = field({"sample": 3, "time": 4})
    with pytest.raises(ValueError) as excinfo:
        lf.vmap(lambda temperature: (temperature * 2, captured), dim="sample")(temperature)
    assert_mentions(str(excinfo.value), r"\bsample\b")


def test_output_computed_with_a_captured_mapped_name_raises():
    captured = xr.DataArray(np.ones(2), dims="sample")
    temperature = field({"sample": 3, "time": 4})
    with pytest.raises(ValueError) as excinfo:
        lf.vmap(lambda temperature: temperature + captured, dim="sample")(temperature)
    assert_mentions(str(excinfo.value), r"\bsample\b")
