"""The compiler level: record the primitives a function applies, replay them later.

``lf.jit`` runs a function once under a :class:`JitLevel`, the outermost level, with
its inputs wrapped in :class:`JitTracer` s.  Every primitive that reaches the level (the
batched and differentiated computation that the transforms inside produce) runs on the
real values and is recorded in a :class:`Program`: a flat list of nodes, each a
callable with its parameters, reading input slots, earlier nodes' outputs and
constants.  Later calls with the same signature run ``Program.run`` on new arrays: one
Python loop over pre-bound callables, no call of the function, no xarray.

Inside, a traced value stands for the values of every later call: nothing may be
decided from it (Python ``if``, ``float()``, a shape from the data, a kernel chosen by
peeking at it) — the level is ``abstract``, and the policy errors say so.  Random
draws are program nodes (``source``), drawn anew at each run.

Simplifications at record time: primitives of constants only run once (constant
folding, by construction: they never reach the level), a node identical to an earlier
one (same callable, parameters and inputs) reuses its output (common subexpression
elimination), and ``Program.prune`` drops the nodes no output needs (dead code).
Then ``Program.fuse`` turns each tree of float64 elementwise nodes (intermediates read
once) into one kernel, which the code generator of the arrays' library makes (``codegen``):
on NumPy arrays (of ``FUSE_MIN_SIZE`` elements at least) one ``numexpr`` evaluation, on
CuPy arrays one ``cupy.ElementwiseKernel`` (the expression in CUDA C, compiled by CuPy once
per expression): one pass over memory instead of one per operation, and on the GPU one
kernel launch.

The modules, from the bottom up (each imports only those above it):

- ``thresholds``: the sizes from which a replay fuses and passes buffers on (FUSE_MIN_SIZE...)
- ``collections_paused``: fewer cyclic garbage collections while a recording (or a prune) runs
- ``nodes``: Constant, Node, and the small functions nodes call
- ``expressions``: the dtypes a fused expression takes; a primitive's spellings (its own)
- ``codegen``: the code generators, plug-ins one per array library (``Backend.fusion``
  names it): ``codegen.numexpr`` (NumPy), ``codegen.cuda`` (CuPy's ElementwiseKernel)
- ``fusion``: which nodes may fuse (Fusable), the fuse rewrite (asks the generator)
- ``planning``: which nodes write into a buffer passed on, the slabs of fresh buffers
- ``passes``: the rewrites that keep every bit (and ``contract``)
- ``program``: Program: prune (dead code, the rewrites, the plan of a run) and run
- ``tracer``: JitTracer and the words of lf.jit's policy errors
- ``loops``: lf.while_loop under jit (one node holding the condition and body programs)
- ``level``: JitLevel, what each primitive records
"""
from __future__ import annotations

from .collections_paused import fewer_collections
from .level import JitLevel
from .loops import record_while_loop, recording_of
from .program import Program
from .tracer import JIT_WORDS, JitTracer

__all__ = ["JitLevel", "JitTracer", "Program", "JIT_WORDS", "recording_of", "record_while_loop", "fewer_collections"]
