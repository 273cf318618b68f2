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


def test_floor_one_installs_under_a_name_that_cannot_collide():
    """kernels/ stays the folder of floor 1 but installs as labeled_func_kernels: PyPI has an
    unrelated `kernels` distribution. Nothing imports a top-level `kernels`."""
    setuptools = PROJECT["tool"]["setuptools"]
    assert "kernels" not in setuptools["packages"] and "labeled_func_kernels" in setuptools["packages"]
    assert setuptools["package-dir"] == {"labeled_func_kernels": "kernels"}
    import labeled_func_kernels

    # resolved: a checkout may reach kernels/ through a link named labeled_func_kernels
    assert pathlib.Path(labeled_func_kernels.__file__).resolve().parent == (ROOT / "kernels").resolve()
    offenders = [str(path.relative_to(ROOT)) for folder in ("labeled_func", "kernels", "tests", "benchmarks", "examples")
                 for path in (ROOT / folder).rglob("*.py")
                 if any(line.lstrip().startswith(("import kernels", "from kernels"))
                        for line in path.read_text().splitlines())]
    assert offenders == []


def test_every_package_folder_is_listed():
    """setuptools installs only the packages pyproject lists: a new subpackage (such as
    labeled_func/engine/compiler/) missing there would be missing from the wheel."""
    listed = set(PROJECT["tool"]["setuptools"]["packages"])
    found = {".".join(path.parent.relative_to(ROOT).parts) for path in (ROOT / "labeled_func").rglob("__init__.py")}
    assert found - listed == set()
