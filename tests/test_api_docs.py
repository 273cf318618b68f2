"""The API reference is complete: every public function has a numpydoc docstring with
Parameters, Returns, Raises and Examples sections, every parameter of its signature is
described, and its signature is annotated.

The oracle is the signature itself (``inspect``): a parameter added without a word in
the docstring, or a section left out, fails here.  The Examples themselves run as
doctests (``--doctest-modules labeled_func``) and docs/api.md is checked to list every
public name once.
"""
from __future__ import annotations

import importlib
import inspect
import re
import typing
from pathlib import Path

import pytest

import labeled_func as lf
from labeled_func import random as lf_random
from labeled_func import sensitivity

ravel_module = importlib.import_module("labeled_func.ravel")  # lf.ravel is the function

ROOT = Path(__file__).resolve().parent.parent

# Functions that raise nothing of their own (no argument to reject): no Raises section.
RAISES_NOTHING = {"lf.random.get_state", "lf.random.numpy_state", "lf.random.numpy_drew_since"}

# Docstrings kept in modules that this test does not edit yet (vmap.py, control_flow.py):
# their known gaps, by check; remove an entry when its docstring is complete.
INCOMPLETE = {}  # (name, check) -> why, for a public function not yet documented in full


def _public_functions():
    """``(qualified name, object)`` of every public function (classes apart)."""
    names = [(f"lf.{n}", getattr(lf, n)) for n in lf.__all__]
    names += [(f"lf.random.{n}", getattr(lf_random, n)) for n in lf_random.__all__]
    names += [(f"lf.sensitivity.{n}", getattr(sensitivity, n)) for n in sensitivity.__all__]
    names += [(f"lf.ravel.{n}", getattr(ravel_module, n)) for n in ("element_labels", "element_attrs")]
    return [(name, obj) for name, obj in names if inspect.isfunction(obj)]


def _public_classes():
    return [(f"lf.{n}", getattr(lf, n)) for n in lf.__all__
            if inspect.isclass(getattr(lf, n)) and not issubclass(getattr(lf, n), BaseException)]


def _exceptions():
    return [(f"lf.{n}", getattr(lf, n)) for n in lf.__all__
            if inspect.isclass(getattr(lf, n)) and issubclass(getattr(lf, n), BaseException)]


def _params(obj, check=None):
    out = []
    for name, value in obj:
        reason = INCOMPLETE.get((name, check))
        mark = [pytest.mark.xfail(reason=f"{name}: {reason}", strict=True)] if reason else []
        out.append(pytest.param(name, value, id=name, marks=mark))
    return out


def sections(doc):
    """``{heading: body}`` of a numpydoc docstring (a heading is a line over dashes)."""
    lines = inspect.cleandoc(doc or "").splitlines()
    found, current = {}, None
    for k, line in enumerate(lines):
        if k + 1 < len(lines) and re.fullmatch(r"-{3,}", lines[k + 1].strip()) and line.strip():
            current = line.strip()
            found[current] = []
            continue
        if current is not None and not re.fullmatch(r"-{3,}", line.strip()):
            found[current].append(line)
    return {heading: "\n".join(body) for heading, body in found.items()}


def described_parameters(body):
    """The names a Parameters section describes: ``name : type`` lines, unindented,
    several names separated by commas (``a, b : float``), ``*args`` / ``**kwargs``."""
    names = set()
    for line in body.splitlines():
        if not line or line[0].isspace():
            continue
        head = line.split(" : ")[0]
        names.update(part.strip().lstrip("*") for part in head.split(","))
    return names


def test_the_section_parser_reads_numpydoc():
    doc = """Summary.

    Parameters
    ----------
    func : callable
        The function.
    a, b : float
    *args
        More.

    Returns
    -------
    float
    """
    found = sections(doc)
    assert set(found) == {"Parameters", "Returns"}
    assert described_parameters(found["Parameters"]) == {"func", "a", "b", "args"}
    assert "Parameters" not in sections("Summary only.\n\n>>> 1\n1\n")


@pytest.mark.parametrize(("name", "function"), _params(_public_functions(), "sections"))
def test_every_public_function_has_the_numpydoc_sections(name, function):
    found = sections(function.__doc__)
    required = ["Returns", "Examples"]
    if inspect.signature(function).parameters:
        required.append("Parameters")
    if name not in RAISES_NOTHING:
        required.append("Raises")
    missing = [s for s in required if s not in found]
    assert not missing, f"{name}: its docstring lacks the section(s) {missing}"
    assert ">>>" in found["Examples"], f"{name}: its Examples section has no runnable example"


@pytest.mark.parametrize(("name", "function"), _params(_public_functions(), "parameters"))
def test_every_parameter_is_described(name, function):
    signature = inspect.signature(function)
    described = described_parameters(sections(function.__doc__).get("Parameters", ""))
    undocumented = [p for p in signature.parameters if p not in described]
    assert not undocumented, f"{name}: the Parameters section does not describe {undocumented}"
    unknown = sorted(described - set(signature.parameters))
    assert not unknown, f"{name}: the Parameters section describes {unknown}, which are not parameters"


@pytest.mark.parametrize(("name", "function"), _params(_public_functions(), "annotations"))
def test_every_public_signature_is_annotated(name, function):
    signature = inspect.signature(function)
    bare = [p.name for p in signature.parameters.values() if p.annotation is inspect.Parameter.empty]
    assert not bare, f"{name}: parameter(s) {bare} have no type annotation"
    assert signature.return_annotation is not inspect.Signature.empty, f"{name}: no return annotation"
    typing.get_type_hints(function)  # every annotation names something that exists


@pytest.mark.parametrize(("name", "cls"), _params(_public_classes()))
def test_every_public_class_is_documented_and_annotated(name, cls):
    found = sections(cls.__doc__)
    for section in ("Parameters", "Raises", "Examples"):
        assert section in found, f"{name}: its docstring lacks the section {section}"
    init = inspect.signature(cls.__init__)
    parameters = [p for p in init.parameters if p != "self"]
    assert set(parameters) <= described_parameters(found["Parameters"]), name
    methods = [m for m, value in vars(cls).items() if not m.startswith("_") and inspect.isfunction(value)]
    assert methods, f"{name}: expected its rule-defining method"
    for method in methods:
        function = getattr(cls, method)
        method_sections = sections(function.__doc__)
        for section in ("Parameters", "Returns"):
            assert section in method_sections, f"{name}.{method}: its docstring lacks the section {section}"
        signature = inspect.signature(function)
        assert [p for p in signature.parameters if p != "self"] == sorted(
            described_parameters(method_sections["Parameters"]),
            key=list(signature.parameters).index), f"{name}.{method}: parameters not all described"
        assert all(p.annotation is not inspect.Parameter.empty
                   for p in signature.parameters.values() if p.name != "self"), f"{name}.{method}"
        assert signature.return_annotation is not inspect.Signature.empty, f"{name}.{method}"
        typing.get_type_hints(function)
    assert all(p.annotation is not inspect.Parameter.empty
               for p in init.parameters.values() if p.name != "self"), f"{name}.__init__"


@pytest.mark.parametrize(("name", "cls"), _params(_exceptions()))
def test_every_error_has_a_docstring(name, cls):
    assert cls.__doc__ and cls.__doc__.strip() and cls.__doc__ != BaseException.__doc__, name


def test_the_api_page_lists_every_public_name_once():
    page = (ROOT / "docs" / "api.md").read_text()
    listed = re.findall(r"^\.\. auto(?:function|class|exception):: (\S+)", page, flags=re.M)
    listed += [f"labeled_func.{module}.{member.strip()}"
               for module, members in re.findall(r"^\.\. automodule:: labeled_func\.(\w+)\n\s+:members: ([^\n]+)",
                                                 page, flags=re.M)
               for member in members.split(",")]
    expected = [f"labeled_func.{n}" for n in lf.__all__ if n not in ("random", "sensitivity")]
    expected += [f"labeled_func.random.{n}" for n in lf_random.__all__]
    expected += [f"labeled_func.sensitivity.{n}" for n in sensitivity.__all__]
    missing = [n for n in expected if n not in listed]
    assert not missing, f"docs/api.md does not list {missing}"
    repeated = sorted({n for n in listed if listed.count(n) > 1})
    assert not repeated, f"docs/api.md lists {repeated} more than once"
