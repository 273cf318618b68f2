"""Floor 1 of labeled_func: what each operation computes, batches and differentiates.

Positional and backend-neutral: impls use the array API of their inputs
(:mod:`kernels.backend`); rules are written with :func:`bind`.  Never imports
xarray or labeled_func.  The modules, bottom up (each imports only those before it):
``primitive``, ``backend``, ``creation``, ``core`` (the structural primitives and the
helpers every rule uses), then the families ``elementwise``, ``special`` (scipy.special's
ufuncs, built on ``elementwise``), ``indexing``, ``shape``, ``reductions``, ``linalg``, ``fft``,
``interp``.
"""
from . import core, creation, elementwise, fft, indexing, interp, linalg, reductions, shape, special
from .backend import namespace
from .primitive import Primitive, Traced, bind

__all__ = ["Primitive", "Traced", "bind", "namespace", "core", "creation", "elementwise", "fft",
           "indexing", "interp", "linalg", "reductions", "shape", "special"]
