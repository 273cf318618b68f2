"""The house rules that a reading of the code can check (shared/ARCHITECTURE.md).

- floors: kernels/ imports neither xarray nor labeled_func; the engine never imports
  xarray nor floor 3;
- no import circle inside kernels/ or labeled_func/engine/, and no import placed inside
  a function to dodge one (optional libraries excepted: dask, distributed, cupy, cupyx,
  scipy, which are imported only when used);
- one name for a primitive in code and in messages; no module shadows a builtin;
- the NumPy layer: every ``UFUNCS`` value is a Primitive, and every registered handler
  lives in a family module listed by ``labeled_func.engine.numpy``.
"""
import ast
import builtins
import importlib
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import labeled_func_kernels
import labeled_func.engine
import labeled_func.engine.numpy as engine_numpy
from labeled_func_kernels.primitive import Primitive
from labeled_func.engine.numpy import dispatch

ROOT = pathlib.Path(labeled_func_kernels.__file__).parent.parent
KERNELS = pathlib.Path(labeled_func_kernels.__file__).parent
ENGINE = pathlib.Path(labeled_func.engine.__file__).parent
OPTIONAL = {"dask", "distributed", "cupy", "cupyx", "scipy"}


def modules(folder):
    """{dotted module name: path} of the Python files under ``folder``."""
    out = {}
    for path in sorted(folder.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts[0] == "kernels":  # the folder kernels/ is installed as labeled_func_kernels
            parts = ("labeled_func_kernels",) + parts[1:]
        out[".".join(parts)] = path
    return out


def imported(module, path, node):
    """The dotted names an import statement brings in (relative imports resolved)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    if node.level:
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        if node.module is None:  # from . import a, b: the submodules a and b
            return [f"{package}.{alias.name}" for alias in node.names]
        base = f"{package}.{node.module}"
    else:
        base = node.module
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def import_graph(folder):
    """Module-level imports between the modules under ``folder``."""
    found = modules(folder)
    graph = {name: set() for name in found}
    for name, path in found.items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in imported(name, path, node):
                    if target in found and target != name:
                        graph[name].add(target)
    return graph


def cycle(graph):
    """One import circle of ``graph`` as a list of modules, or None."""
    state = {}

    def visit(node, trail):
        state[node] = "open"
        for child in sorted(graph[node]):
            if state.get(child) == "open":
                return trail[trail.index(child):] + [child]
            if child not in state:
                found = visit(child, trail + [child])
                if found:
                    return found
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [node])
            if found:
                return found
    return None


@pytest.mark.parametrize("folder", [KERNELS, ENGINE], ids=["kernels", "engine"])
def test_no_import_circle(folder):
    assert cycle(import_graph(folder)) is None


def test_the_circle_finder_finds_circles():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("folder", [KERNELS, ENGINE], ids=["kernels", "engine"])
def test_no_import_inside_a_function(folder):
    """Imports at module level only: an import inside a function dodges a circle the
    graph above would show.  Optional libraries are imported where they are used."""
    late = []
    for name, path in modules(folder).items():
        tree = ast.parse(path.read_text())
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    targets = imported(name, path, node)
                    if targets[0].partition(".")[0] not in OPTIONAL:
                        late.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {targets[0]}")
    assert late == []


def test_kernels_import_neither_xarray_nor_labeled_func():
    code = (
        "import sys, labeled_func_kernels;"
        "bad = [m for m in ('xarray', 'labeled_func', 'cupy') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_engine_imports_neither_xarray_nor_floor_3():
    for name, path in modules(ENGINE).items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in imported(name, path, node):
                    assert target.partition(".")[0] != "xarray", f"{path.name} imports {target}"
                    if target.startswith("labeled_func."):
                        assert target.startswith("labeled_func.engine"), f"{path.name} imports {target}"


def kernel_primitives():
    """(module, attribute, primitive) for every module-level Primitive of kernels/."""
    out = []
    for name in modules(KERNELS):
        module = importlib.import_module(name)
        out.extend((name, attribute, value) for attribute, value in vars(module).items()
                   if isinstance(value, Primitive))
    return out


def test_one_name_for_a_primitive():
    by_name = {}
    for module, attribute, prim in kernel_primitives():
        assert prim.name == attribute, f"{module}.{attribute} is named {prim.name!r} in messages"
        by_name.setdefault(prim.name, set()).add(id(prim))
    assert {name for name, ids in by_name.items() if len(ids) > 1} == set()


@pytest.mark.parametrize("folder", [KERNELS, ENGINE], ids=["kernels", "engine"])
def test_no_module_shadows_a_builtin(folder):
    shadowing = []
    for name, path in modules(folder).items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            else:
                continue
            shadowing += [f"{name}.{n}" for n in names if hasattr(builtins, n)]
    assert shadowing == []


def test_ufuncs_are_primitives_and_compositions_are_handlers():
    assert all(isinstance(prim, Primitive) for prim in dispatch.UFUNCS.values())
    assert all(not isinstance(handler, Primitive) for handler in dispatch.UFUNC_HANDLERS.values())
    assert set(dispatch.UFUNCS).isdisjoint(dispatch.UFUNC_HANDLERS)
    assert all(isinstance(ufunc, np.ufunc) for ufunc in list(dispatch.UFUNCS) + list(dispatch.UFUNC_HANDLERS))


def test_every_handler_lives_in_a_listed_family():
    families = {module.__name__ for module in engine_numpy.FAMILIES}
    handlers = list(dispatch.FUNCTIONS.values()) + list(dispatch.UFUNC_HANDLERS.values()) + \
        list(dispatch.UFUNC_METHODS.values())
    homes = {handler.__module__ for handler in handlers}
    assert homes <= families, homes - families
    listed = {name for name in modules(ENGINE) if name.startswith("labeled_func.engine.numpy.")}
    assert listed - {"labeled_func.engine.numpy.dispatch"} == families


# --- tracers: read through the engine's functions, switched on only by their own level ------------
FLOOR_3 = pathlib.Path(labeled_func.__file__).parent
TRACER_FIELDS = {"_level", "_value", "_slot", "_tangent", "_node", "_view", "_cell"}


def tracer_classes(levels_only=False):
    """{name: dotted module} of the tracer classes the engine defines (the classes named
    ``...Tracer``, their bases ``Tracer`` and ``PrimalTracer`` included; with ``levels_only``,
    those of one level: no tracer class derives from them)."""
    found, bases = {}, set()
    for name, path in modules(ENGINE).items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and node.name.endswith("Tracer"):
                found[node.name] = name
                bases.update(base.id for base in node.bases if isinstance(base, ast.Name))
    return {k: v for k, v in found.items() if k not in bases} if levels_only else found


def tracer_home(module):
    """Where a tracer class of ``module`` may be switched on: the module of its level (the
    one that defines both), or the whole compiler for lf.jit's (its tracer and level are two
    modules of it)."""
    compiler = "labeled_func.engine.compiler"
    return compiler if module == compiler or module.startswith(compiler + ".") else module


def class_switches(tree, names):
    """(line, class name) of each ``isinstance(x, C)``, ``type(x) is C`` / ``is not C`` /
    ``in (C, ...)`` / ``== C`` in ``tree`` with ``C`` one of ``names``."""
    def named(node):
        if isinstance(node, ast.Name):
            return [node.id] if node.id in names else []
        if isinstance(node, ast.Attribute):
            return [node.attr] if node.attr in names else []
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return [n for element in node.elts for n in named(element)]
        return []

    def is_type_call(node):
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type"
                and len(node.args) == 1)

    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2):
            found += [(node.lineno, n) for n in named(node.args[1])]
        elif isinstance(node, ast.Compare):
            operands = [node.left] + node.comparators
            for (left, right), op in zip(zip(operands, operands[1:]), node.ops):
                if isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
                    if is_type_call(left):
                        found += [(node.lineno, n) for n in named(right)]
                    if is_type_call(right):
                        found += [(node.lineno, n) for n in named(left)]
    return found


def test_the_switch_finder_finds_switches():
    code = ("isinstance(a, BatchTracer)\nisinstance(a, (np.ndarray, engine.JVPTracer))\n"
            "type(a) is JitTracer\ntype(a) in (BatchTracer, VJPTracer)\nJitTracer is not type(a)\n"
            "isinstance(a, np.ndarray)\ntype(a) is Other\n")
    found = class_switches(ast.parse(code), {"BatchTracer", "JVPTracer", "VJPTracer", "JitTracer"})
    assert found == [(1, "BatchTracer"), (2, "JVPTracer"), (3, "JitTracer"), (4, "BatchTracer"),
                     (4, "VJPTracer"), (5, "JitTracer")]


def test_floor_3_never_names_a_tracer_class_nor_reads_its_fields():
    """Floor 3 reads tracers through the engine's functions (``primal_of``, ``held``,
    ``level_of``, ``is_traced``...) and makes them with a level's methods or ``batch_value``:
    a new transform never needs a change there to be read or built."""
    names = set(tracer_classes())
    assert {"Tracer", "BatchTracer", "JVPTracer", "VJPTracer", "JitTracer"} <= names
    found = []
    for path in sorted(FLOOR_3.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name) and node.id in names:
                found.append(f"{path.name}:{node.lineno} names {node.id}")
            elif isinstance(node, ast.Attribute) and node.attr in names:
                found.append(f"{path.name}:{node.lineno} names {node.attr}")
            elif isinstance(node, ast.Attribute) and node.attr in TRACER_FIELDS:
                found.append(f"{path.name}:{node.lineno} reads .{node.attr}")
            elif isinstance(node, ast.ImportFrom):
                found += [f"{path.name}:{node.lineno} imports {alias.name}" for alias in node.names
                          if alias.name in names]
    assert found == []


def test_only_a_tracers_own_level_switches_on_its_class():
    """``isinstance(x, BatchTracer)`` / ``type(x) is JitTracer`` only in the module of that
    tracer's level (the whole compiler for lf.jit's): elsewhere the level that owns a tracer
    answers for it (``process_*``, ``loop_spec``...), as JAX's ``process_*`` methods do.
    Whether a value is traced at all (``isinstance(x, Tracer)``, the base) is no switch."""
    classes = tracer_classes(levels_only=True)
    assert set(classes) == {"BatchTracer", "JVPTracer", "VJPTracer", "JitTracer"}
    found = []
    for folder in (FLOOR_3, ENGINE):
        for name, path in modules(folder).items():
            if folder is FLOOR_3 and name.startswith("labeled_func.engine"):
                continue  # the engine's modules, once
            for line, cls in class_switches(ast.parse(path.read_text()), set(classes)):
                if tracer_home(name) != tracer_home(classes[cls]):
                    found.append(f"{path.relative_to(ROOT)}:{line} switches on {cls}")
    assert found == []
