"""Library identity in one place (issue 25): ``kernels/backend.py`` declares what the code needs
to know of each array library (:class:`Backend`: ``on_device``, ``to_host``, ``has_ufunc_at``,
``fusion``, ...), ``library_of`` decides which library an array belongs to, and the call
sites ask capabilities, never the library's name.

CI has no GPU: a stand-in CuPy array (a type named ``ndarray`` from the ``cupy`` package whose
``get()`` copies to the host, as CuPy's does) walks the CuPy paths that need no CuPy call.
Oracles: NumPy's own answers on the same values, and the calls the stand-in records.
"""
import ast
import pathlib
import re

import array_api_strict as xps
import numpy as np
import pytest

from labeled_func.engine import batching, diagnose
from labeled_func.engine.compiler import codegen
from labeled_func.engine.numpy import dynamic, functional
from labeled_func_kernels import backend, elementwise

ROOT = pathlib.Path(__file__).resolve().parents[1]


class _FakeCupyArray:
    """A host array dressed as CuPy's: its type is ``cupy._core.core.ndarray``."""

    def __init__(self, values):
        self.values = np.asarray(values)
        self.dtype, self.shape = self.values.dtype, self.values.shape
        self.copies = 0

    def get(self):
        self.copies += 1
        return self.values.copy()


FakeCupy = type("ndarray", (_FakeCupyArray,), {"__module__": "cupy._core.core"})


def test_library_of_decides_and_backend_of_reads_its_declaration():
    fake = FakeCupy([1.0, 2.0])
    assert backend.library_of(fake) == "cupy" and backend.backend_of(fake) is backend.backend_named("cupy")
    cupy = backend.backend_of(fake)
    assert cupy.on_device and cupy.fusion == "cuda" and cupy.has_ufunc_at and cupy.strided_views
    assert cupy.window_axes_ascending and cupy.special == "cupyx.scipy.special"
    assert cupy.special_needs_arrays and cupy.special_casts_back and not cupy.native
    numpy = backend.backend_of(np.ones(2))
    assert numpy.native and numpy.host_values and numpy.eager and numpy.fusion == "numexpr"
    assert not numpy.on_device and numpy.special == "scipy.special"
    assert backend.backend_of(np.float32(1.0)) is numpy  # NumPy scalars are NumPy's
    for number in (1, 2.5, 1j, True, None):  # Python numbers: computed by NumPy, no array of theirs
        scalars = backend.backend_of(number)
        assert scalars.name is None and scalars.host_values and not scalars.native
    strict = backend.backend_of(xps.asarray([1.0]))
    assert strict.eager and not (strict.host_values or strict.on_device or strict.has_ufunc_at)


def test_an_undeclared_library_has_the_cautious_defaults():
    other = backend.backend_named("some_future_library")
    assert other.name == "some_future_library"
    assert not (other.eager or other.on_device or other.native or other.has_ufunc_at or other.strided_views)
    assert other.special is None and other.fusion is None
    np.testing.assert_array_equal(other.to_host([1, 2]), np.array([1, 2]))  # np.asarray


def test_to_host_is_the_array_itself_on_numpy_and_a_device_copy_on_cupy():
    x = np.arange(3.0)
    assert backend.backend_of(x).to_host(x) is x
    fake = FakeCupy([1.0, 2.0, 3.0])
    host = backend.backend_of(fake).to_host(fake)
    assert fake.copies == 1 and type(host) is np.ndarray
    np.testing.assert_array_equal(host, fake.values)


@pytest.mark.parametrize("to_numpy", [functional._to_numpy, dynamic._host, batching._host],
                         ids=["functional", "dynamic", "batching"])
def test_every_host_copy_asks_the_backend(to_numpy):
    fake = FakeCupy([[1.0, 2.0], [3.0, 4.0]])
    out = to_numpy(fake)
    assert fake.copies == 1 and type(out) is np.ndarray
    np.testing.assert_array_equal(out, fake.values)
    x = np.arange(4.0)
    assert to_numpy(x) is x  # NumPy's own: no copy, as before
    np.testing.assert_array_equal(to_numpy(2.5), np.asarray(2.5))


def test_dynamic_host_keeps_lists_and_numpy_tuples_as_arrays():
    assert type(dynamic._host([1, 2])) is np.ndarray
    found = np.unique_counts(np.array([2, 1, 2]))  # a NumPy named tuple: an array of its parts
    np.testing.assert_array_equal(dynamic._host(found), np.asarray(found))
    x = np.arange(3)
    assert dynamic._on_device_of(x, (x, x)) == (x, x)  # NumPy: as it is


@pytest.mark.parametrize("values", [[False, False], [False, True], [[True]], []])
def test_any_true_and_all_finite_answer_as_numpy_on_every_eager_library(values):
    mask = np.array(values, dtype=bool)
    assert backend.any_true(mask) == bool(np.any(mask))
    assert backend.any_true(xps.asarray(mask)) == bool(np.any(mask))
    numbers = np.where(mask, np.inf, 1.0)
    assert backend.all_finite(numbers) == bool(np.isfinite(numbers).all())
    assert backend.all_finite(xps.asarray(numbers)) == bool(np.isfinite(numbers).all())
    assert backend.all_finite(float("nan")) is False and backend.all_finite(2.0) is True


def test_lazy_arrays_are_never_looked_at():
    da = pytest.importorskip("dask.array")
    lazy = da.from_array(np.array([False, False]))
    assert backend.backend_of(lazy).chunked and not backend.backend_of(lazy).eager
    assert backend.any_true(lazy) is True and backend.all_finite(lazy) is False  # cannot be known


def test_looking_waits_only_on_a_device():
    assert backend.looking_waits(FakeCupy([True])) is True
    assert backend.looking_waits(np.array([True])) is False
    assert backend.looking_waits(xps.asarray([True])) is False


def test_fusion_and_the_eager_cuda_kernel_ask_the_fusion_capability():
    assert codegen.generator_of(FakeCupy(np.ones(2))) is codegen.generator_named("cuda")
    assert codegen.generator_of(FakeCupy(np.ones(2, dtype=np.int64))) is None
    assert codegen.generator_of(np.ones(2)) is codegen.generator_named("numexpr")
    assert codegen.generator_of(xps.asarray([1.0])) is None  # a library without fused kernels
    # the CUDA kernel of the NaN-safe product is for CuPy arrays only: NumPy's get None
    assert elementwise.device_safe_product(np.ones(2), np.ones(2)) is None


def test_library_frames_of_the_error_messages_come_from_the_declarations():
    assert backend.library_packages() >= {"numpy", "cupy", "cupyx", "array_api_strict", "dask"}
    assert diagnose._LIBRARIES >= backend.library_packages()
    assert {"xarray", "scipy", "pandas", "array_api_compat"} <= diagnose._LIBRARIES


# Where the code still branches on a library's name (files other engineers were editing when the
# capabilities came in): each to become a capability.  A new branch fails the test below.
# (file, text of a line) allowed to compare a name: diagnose.py names the module of the function a
# user's line calls (``np.nonzero`` is NumPy's own), not the library of an array
_STILL_BRANCHING: set[tuple[str, str]] = {
    ("labeled_func/engine/diagnose.py", 'library == "numpy" and'),
}
_BRANCH = re.compile(r"""library_of\([^()]*\)\s*(==|!=|not in|in)\s*[("_A-Z]|[=!]=\s*["'](cupy|numpy)["']""")


def _branches(path):
    """The lines of ``path`` outside docstrings that compare a library's name."""
    source = path.read_text()
    docstrings = {line for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                  for line in range(node.lineno, node.end_lineno + 1)}
    return [line.strip() for number, line in enumerate(source.splitlines(), 1)
            if number not in docstrings and _BRANCH.search(line.split("#")[0])]


def test_the_branch_finder_finds_branches(tmp_path):
    module = tmp_path / "module.py"
    module.write_text('"""library_of(x) == "cupy" in a docstring"""\nif library_of(x) == "cupy":\n    pass\n'
                      'if kind != "cupy":  # a comparison\n    pass\nok = library_of(x)\nif lib == "numpy": pass\n')
    assert _branches(module) == ['if library_of(x) == "cupy":', 'if kind != "cupy":  # a comparison',
                                 'if lib == "numpy": pass']


def test_no_branch_on_a_library_name_outside_the_backend_declarations():
    unexpected = []
    for folder in ("kernels", "labeled_func"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative == "kernels/backend.py":
                continue
            allowed = [text for file, text in _STILL_BRANCHING if file == relative]
            unexpected += [f"{relative}: {line}" for line in _branches(path)
                           if not any(text in line for text in allowed)]
    assert not unexpected, unexpected


def test_raw_arrays_beside_tracers_views_and_units_are_capabilities():
    """What the engine asked by name before: which raw arrays may sit beside a tracer, whose
    in-place operations write into views, and which values carry units."""
    from labeled_func.engine.tracer import stays_traced
    from labeled_func.engine.views import _without_views
    from labeled_func_kernels.backend import backend_named
    da = pytest.importorskip("dask.array")
    assert not stays_traced(np.ones(2)) and not stays_traced(da.ones(2)) and not stays_traced(2.0)
    strict = pytest.importorskip("array_api_strict")
    assert stays_traced(strict.ones(2))                       # refuses tracers in its own functions
    assert _without_views(da.ones(2)) and not _without_views(np.ones(2))
    assert not backend_named("jax").views and backend_named("some_library").views   # unknown: may have views
    pint = pytest.importorskip("pint")
    assert backend_named("pint").units and backend.backend_of(pint.UnitRegistry().Quantity(np.ones(2), "m")).units
