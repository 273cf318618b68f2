"""docs/limitations.md's list of supported functions is the registry's, generated.

``docs/supported_table.md`` is written by ``python docs/supported.py`` (``make
supported-docs``) from the engine's registry tables and included by limitations.md: no
hand-kept list to drift.  These tests fail, with the diff, when a function is registered
or dropped without regenerating it.
"""
import difflib
import importlib.util
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def generator():
    spec = importlib.util.spec_from_file_location("docs_supported", ROOT / "docs" / "supported.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_page_is_the_registry_list():
    supported = generator()
    expected = supported.page()
    committed = supported.PAGE.read_text(encoding="utf-8")
    if committed != expected:
        diff = "".join(difflib.unified_diff(committed.splitlines(True), expected.splitlines(True),
                                            "docs/supported_table.md (committed)", "from the registry"))
        pytest.fail("docs/supported_table.md is not the registry's list: regenerate it with "
                    f"`make supported-docs` (python docs/supported.py).\n{diff}", pytrace=False)


def test_page_names_every_registry_entry():
    """Independently of the generator's grouping: each registered ufunc, ufunc method and
    function appears by its public name, and nothing else does."""
    dispatch, _ = generator().registry()
    names = {dispatch.ufunc_name(u) for u in list(dispatch.UFUNCS) + list(dispatch.UFUNC_HANDLERS)}
    names |= {f"{dispatch.ufunc_name(u)}.{method}" for u, method in dispatch.UFUNC_METHODS}
    names |= {dispatch.function_name(f) for f in dispatch.FUNCTIONS}
    text = (ROOT / "docs" / "supported_table.md").read_text(encoding="utf-8")
    listed = {part.strip("`") for part in text.replace("\n", ", ").split(", ") if part.startswith("`")}
    assert listed == names, (sorted(names - listed), sorted(listed - names))
    assert "numpy.sin" in listed and "numpy.vectorize" in listed and np.sin in dispatch.UFUNCS


def test_limitations_includes_the_page_and_sphinx_builds_it_only_there():
    limitations = (ROOT / "docs" / "limitations.md").read_text(encoding="utf-8")
    assert "```{include} supported_table.md" in limitations
    assert "supported_table.md" in (ROOT / "docs" / "conf.py").read_text(encoding="utf-8")
    assert "```" not in (ROOT / "docs" / "supported_table.md").read_text(encoding="utf-8")
