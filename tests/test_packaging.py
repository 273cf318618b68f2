"""What the wheel declares: one version, an SPDX licence with its file, the typed marker."""
import pathlib
import tomllib

import labeled_func

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_version_has_one_source():
    assert "version" not in PROJECT["project"] and "version" in PROJECT["project"]["dynamic"]
    assert PROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "labeled_func.__version__"}
    assert labeled_func.__version__.count(".") >= 2


def test_the_licence_is_an_spdx_expression_with_its_file():
    assert PROJECT["project"]["license"] == "BSD-3-Clause"
    for name in PROJECT["project"]["license-files"]:
        assert "BSD 3-Clause" in (ROOT / name).read_text()


def test_the_package_says_it_is_typed():
    assert (ROOT / "labeled_func" / "py.typed").exists()
    assert "py.typed" in PROJECT["tool"]["setuptools"]["package-data"]["labeled_func"]
