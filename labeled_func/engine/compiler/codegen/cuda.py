"""The generator of CuPy's fused kernels: one ``cupy.ElementwiseKernel`` per tree, its
expression in CUDA C (CuPy compiles it once per expression and caches it)."""
from __future__ import annotations

import numpy as np

from . import Generator, register


def cuda_source(expression, names, dtypes, out):
    """The parameters and the operation of the CuPy ElementwiseKernel computing ``expression``
    of inputs ``names`` (of ``dtypes``) into ``out`` (of dtype ``out``)."""
    def ctype(dtype):
        return "bool" if dtype is bool else np.dtype(dtype).name  # bool, float64 or float32

    params = ", ".join(f"{ctype(dtype)} {name}" for name, dtype in zip(names, dtypes))
    return params, f"{ctype(out)} out", f"out = {expression}"


def cuda_kernel(expression, names, dtypes, out):
    """The fused expression as a CuPy ElementwiseKernel (CuPy compiles and caches it)."""
    import cupy

    in_params, out_params, operation = cuda_source(expression, names, dtypes, out)
    return cupy.ElementwiseKernel(in_params, out_params, operation, "lf_fused")


class CudaGenerator(Generator):
    """CuPy's arrays: any tree of two nodes or more is one kernel launch instead of several,
    at any size; a CUDA C compiler computes a repeated subexpression once; its
    transcendental functions are those CuPy's own ufuncs call."""

    name = "cuda"
    shares_repeated = True

    def claims(self, value):
        return type(value).__name__ == "ndarray"

    def spelling(self, fusion):
        return fusion.cuda

    def compile(self, expression, names, dtypes, out):
        return cuda_kernel(expression, names, dtypes, out)


CUDA = CudaGenerator()
register(CUDA)
