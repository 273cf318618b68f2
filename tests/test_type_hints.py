"""The functions other modules call carry type hints (issue 25), and every hint resolves.

Covered: the public functions and methods of ``kernels/*.py``, of the engine's
``stack``, ``tracer``, ``forward``, ``reverse``, ``views``, ``replay`` and ``errors``, and of
``engine/numpy/*.py`` but ``dynamic.py`` (docs/contributing.md, "The floors").  The oracle is
the source itself (``ast``: every parameter but self/cls and the return annotated) and
``typing.get_type_hints`` (every name a hint uses exists at run time).
"""
import ast
import importlib
import inspect
import pathlib
import typing

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
ENGINE = ROOT / "labeled_func" / "engine"
HINTED = (sorted((ROOT / "kernels").glob("*.py"))
          + [ENGINE / f"{name}.py" for name in ("stack", "tracer", "forward", "reverse", "views", "replay", "errors")]
          + sorted(path for path in (ENGINE / "numpy").glob("*.py") if path.name != "dynamic.py"))


def module_name(path):
    relative = path.relative_to(ROOT).with_suffix("")
    parts = list(relative.parts)
    if parts[0] == "kernels":
        parts[0] = "labeled_func_kernels"
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def public_functions(tree):
    """``(qualified name, def node)`` of the public functions and public classes' public methods."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            yield node.name, node
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
                    yield f"{node.name}.{item.name}", item


def missing_hints(node):
    arguments = node.args
    every = arguments.posonlyargs + arguments.args + arguments.kwonlyargs
    every += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
    missing = [a.arg for a in every if a.annotation is None and a.arg not in ("self", "cls")]
    return missing + (["return"] if node.returns is None else [])


def test_the_finder_finds_a_missing_hint():
    tree = ast.parse("def f(x: int, y) -> int: ...\nclass C:\n    def m(self, z: int): ...\n"
                     "def _private(a): ...\n")
    found = {name: missing_hints(node) for name, node in public_functions(tree)}
    assert found == {"f": ["y"], "C.m": ["return"]}


@pytest.mark.parametrize("path", HINTED, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_public_functions_are_hinted_and_their_hints_resolve(path):
    tree = ast.parse(path.read_text())
    module = importlib.import_module(module_name(path))
    unhinted = []
    for name, node in public_functions(tree):
        missing = missing_hints(node)
        if missing:
            unhinted.append(f"{name}: {', '.join(missing)}")
        owner, _, attribute = name.rpartition(".")
        function = inspect.getattr_static(getattr(module, owner) if owner else module, attribute, None)
        function = getattr(function, "fget", None) or getattr(function, "__func__", None) or function
        if callable(function):
            typing.get_type_hints(inspect.unwrap(function))  # raises NameError for a hint naming nothing
    assert not unhinted, unhinted
