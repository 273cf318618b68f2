"""The sizes from which a replay of lf.jit fuses elementwise trees and passes buffers on
(the levers of docs/jit.md).  The other modules of the compiler read them as
``thresholds.NAME`` when they record or lay out a program, so that a value set here (the
tests set them to 0: fusion and recycled buffers at every size) reaches every reader."""
from __future__ import annotations


FUSE_MIN_SIZE = 1 << 14
"""Elements of a result below which elementwise nodes are not fused (numexpr's ~1 us per
call outweighs the passes over memory it saves)."""

CHEAP_FUSE_MIN_SIZE = 1 << 18
"""Elements of a result below which a tree of cheap operations (products, sums,
comparisons) runs node by node: there the arrays stay in cache and numexpr's threads cost
more than the passes over memory they save. Trees with a transcendental function fuse from
``FUSE_MIN_SIZE``."""

POOL_MIN_BYTES = 1 << 16
"""Size of a NumPy result from which a replay writes it into a buffer passed on from an
array that is no longer needed (see ``Program.prune``)."""

BAND_MIN_SIZE = 1 << 14
"""Elements of a square matrix below which the replay computes it in full rather than as
its diagonals (``banded.band``: the Jacobians of stencils). Computing the diagonals costs
about 40-130 us of Python per program (the diagonals stacked, a few NumPy calls per
operation); the full matrices cost that from about 128 x 128 (measured 2026-12-07, replays
of the Lorenz-96 jacrev / jacfwd and the Rosenbrock Hessian, full against as diagonals:
n = 104, 66/66, 36/43, 125/130 us; n = 128, 75/67, 43/44, 147/132 us)."""
