"""The CUDA C that lf.jit fuses CuPy elementwise chains into, checked on the CPU.

CI has no GPU, so the kernels CuPy would compile are compiled here as C by the system's C
compiler (the expressions use only C99 arithmetic, comparisons, ``?:`` and <math.h>
functions, which CUDA C shares) and run over arrays through ctypes. Oracles: NumPy's own
function for each primitive (to 1e-12), and the unfused replay of a whole program for a
fused tree. Skipped where no C compiler is found. On a GPU, tests/test_ops_cupy.py runs the
real kernels (every op-table entry under lf.jit on CuPy).
"""

import ctypes
import re
import shutil
import subprocess

import numpy as np
import pytest

from labeled_func_kernels import elementwise as ew
from labeled_func_kernels.primitive import Primitive
from labeled_func.engine.compiler import codegen
from labeled_func.engine.compiler.codegen.cuda import cuda_source
from labeled_func.engine.compiler.fusion import Fusable
from labeled_func.engine.compiler.nodes import Constant, Node
from labeled_func.engine.compiler.program import Program

CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler to check the CUDA C expressions on the CPU")
F64, BOOL = np.dtype(np.float64), np.dtype(np.bool_)


def c_kernel(in_params, out_params, operation, tmp_path, name):
    """A callable running ``operation`` elementwise over broadcast arguments, compiled as C:
    the stand-in of ``cupy.ElementwiseKernel(in_params, out_params, operation)``."""
    params = [p.split() for p in in_params.split(",")]
    out_type, _ = out_params.split()
    ctype = {"float64": "double", "float32": "float", "bool": "bool"}
    loads = "".join(f"    {ctype[t]} {n} = {n}_p[i];\n" for t, n in params)
    pointers = ", ".join(f"const {ctype[t]}* {n}_p" for t, n in params)
    source = (
        "#include <math.h>\n#include <stdbool.h>\n"
        f"void kernel(long n, {pointers}, {ctype[out_type]}* out_p) {{\n"
        "  for (long i = 0; i < n; i++) {\n"
        f"{loads}    {ctype[out_type]} out;\n    {operation};\n    out_p[i] = out;\n  }}\n}}\n"
    )
    c_file, library = tmp_path / f"{name}.c", tmp_path / f"{name}.so"
    c_file.write_text(source)
    subprocess.run([CC, "-std=c99", "-O1", "-shared", "-fPIC", "-o", str(library), str(c_file), "-lm"],
                   check=True, capture_output=True)
    function = ctypes.CDLL(str(library)).kernel
    dtypes = [np.dtype(t) for t, _ in params]
    out_dtype = np.dtype(out_type)

    def run(*args):
        arrays = [np.ascontiguousarray(np.broadcast_to(np.asarray(a, dtype=d), np.broadcast_shapes(
            *[np.shape(b) for b in args]))) for a, d in zip(args, dtypes)]
        out = np.empty(arrays[0].shape, dtype=out_dtype)
        function(ctypes.c_long(out.size), *[a.ctypes.data_as(ctypes.c_void_p) for a in arrays],
                 out.ctypes.data_as(ctypes.c_void_p))
        return out

    return run


def operands(prim, rng):
    """Sample inputs for ``prim`` inside its domain (a few exact zeros and infinities where the
    primitive's semantics are about them)."""
    x = rng.uniform(-2.0, 2.0, 64)
    y = rng.uniform(-2.0, 2.0, 64)
    y[::7] = 0.0
    unit = rng.uniform(-0.9, 0.9, 64)
    if prim in (ew.sqrt, ew.log, ew.log1p, ew.acosh):
        return (np.abs(x) + 1.0,)
    if prim in (ew.asin, ew.acos, ew.atanh):
        return (unit,)
    if prim in (ew.logical_and, ew.logical_or):
        return (x > 0, y > 0)
    if prim is ew.logical_not:
        return (x > 0,)
    if prim is ew.where:
        return (x > 0, x, y)
    if prim is ew.safe_multiply:
        d = x.copy()
        d[::5] = np.inf
        g = y.copy()
        return (g, d)
    if prim in (ew.add, ew.subtract, ew.multiply, ew.divide, ew.atan2, ew.equal, ew.not_equal, ew.less,
                ew.less_equal, ew.greater, ew.greater_equal):
        return (x, np.where(y == 0, 1.5, y) if prim is ew.divide else y)
    return (x,)


# every primitive spelled in CUDA C (its declaration's fusion.cuda)
CUDA_SPELLED = [prim for prim in vars(ew).values()
                if type(prim) is Primitive and prim.fusion is not None and prim.fusion.cuda is not None]


@pytest.mark.parametrize("dtype, tolerance", [(np.float64, 1e-12), (np.float32, 2e-6)])
@pytest.mark.parametrize("prim", CUDA_SPELLED, ids=lambda p: p.name)
def test_each_cuda_expression_computes_what_numpy_does(prim, dtype, tolerance, tmp_path):
    args = [a.astype(dtype) if a.dtype != BOOL else a for a in operands(prim, np.random.default_rng(0))]
    with np.errstate(invalid="ignore"):  # safe_multiply's oracle: 0 * inf before the mask
        expected = prim.impl(*args)
    names = [f"v{k}" for k in range(len(args))]
    expression = prim.fusion.cuda.format(*names)
    dtypes = [a.dtype.type if a.dtype != BOOL else bool for a in args]
    kernel = c_kernel(*cuda_source(expression, names, dtypes, expected.dtype), tmp_path,
                      f"{prim.name}_{np.dtype(dtype).name}")
    actual = kernel(*args)
    assert actual.dtype == expected.dtype
    np.testing.assert_allclose(actual, expected, rtol=tolerance, atol=tolerance * 1e-3)


def test_every_numexpr_primitive_has_a_cuda_expression():
    numexpr_spelled = {prim for prim in vars(ew).values()
                       if type(prim) is Primitive and prim.fusion is not None and prim.fusion.numexpr is not None}
    assert numexpr_spelled == set(CUDA_SPELLED)


def test_a_fused_cupy_tree_equals_the_unfused_program(tmp_path, monkeypatch):
    """g * cos(x) * (1 + 0.1 * z**4) with the mask of a safe product, recorded as CuPy nodes:
    fusion makes one kernel of the tree (z**2, read twice, stays its own node); its run
    equals the node-by-node run."""
    compiled = []

    def kernel(expression, names, dtypes, out):
        compiled.append(expression)
        return c_kernel(*cuda_source(expression, names, dtypes, out), tmp_path, f"tree{len(compiled)}")

    monkeypatch.setattr(codegen.cuda, "cuda_kernel", kernel)

    def build():
        program = Program()
        program.inputs = [0, 1, 2]
        steps = [  # (prim, refs) writing slots 3, 4, ...
            (ew.cos, (0,)), (ew.multiply, (1, 1)), (ew.multiply, (4, 4)), (ew.multiply, (Constant(0.1), 5)),
            (ew.add, (Constant(1.0), 6)), (ew.multiply, (3, 7)), (ew.safe_multiply, (2, 8)),
        ]
        for slot, (prim, refs) in enumerate(steps, start=3):
            node = Node(prim.impl, {}, refs, slot, prim)
            node.fusable = Fusable(codegen.generator_named("cuda"), tuple(F64 for _ in refs), F64)
            program.nodes.append(node)
        program.outputs = [9]
        return program

    rng = np.random.default_rng(1)
    x, z = rng.uniform(-3, 3, 1000), rng.uniform(-3, 3, 1000)
    g = rng.normal(size=1000)
    g[::4] = 0.0
    inputs = [x, z, g]
    unfused = build()
    unfused.fuse = lambda: unfused  # the node-by-node replay
    expected = unfused.prune().run(inputs)[0]
    fused = build().prune()
    assert len(fused.nodes) == 2 and len(compiled) == 1, compiled
    assert len(re.findall(r"\bv\d+\b", compiled[0].replace("out", ""))) >= 3
    np.testing.assert_allclose(fused.run(inputs)[0], expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_eager_nan_safe_product_kernel_masks_what_numpy_masks(dtype, tmp_path):
    """The kernel an eager ``safe_multiply`` runs on CuPy arrays (kernels/elementwise.py), as
    C: ``g * d``, with 0 where ``g`` is 0 (either sign) and ``d`` is infinite or NaN, over
    operands broadcast together; the oracle is NumPy's product masked by ``np.where``."""
    name = np.dtype(dtype).name
    kernel = c_kernel(*ew.safe_product_kernel_source(name), tmp_path, f"safe_{name}")
    special = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 1e-30], dtype=dtype)
    g = np.repeat(special, special.size).reshape(special.size, special.size)  # every pair
    d = special  # broadcast along the rows
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        expected = np.where((g == 0) & ~np.isfinite(d), dtype(0), g * d)
        actual = kernel(g, d)
    assert actual.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(actual, expected)  # bits up to NaN's sign; zeros masked positive
    assert not np.signbit(actual[(g == 0) & ~np.isfinite(d)]).any()


def test_the_eager_nan_safe_product_kernel_is_for_cupy_arrays_only():
    g = np.ones(3)
    assert ew.device_safe_product(g, g) is None
    assert ew.device_safe_product(g, 2.0) is None
