"""Memory for the large results of eager NumPy kernels, reused while it is warm.

A transform makes many short-lived arrays of a few shapes (a cotangent per operation, a
product per rule).  glibc hands a freed block at the top of its heap back to the system
once more than its trim threshold is free there (128 KiB in a fresh process), and every
block it maps again costs a page fault per 4 KiB on first write: on a (400, 400) Jacobian
that was three quarters of the time.  How much glibc keeps depends on what the process
did before (a large free raises both thresholds), so the same call ran 3x faster or
slower depending on what ran earlier.  Arrays of 32 MiB and more glibc always maps afresh
and unmaps when freed; NumPy asks huge pages for those of 4 MiB and more, which the kernel
zeroes (and, where its ``defrag`` setting says so, compacts memory for) at each first
touch: the eager Jacobian of 2,000 sites spent a third of its time there.

:func:`empty` gives arrays of :data:`MIN_BYTES` to :data:`MAX_BYTES` (256 KiB to 32 MiB) as
views of blocks this module keeps, up to :func:`limit` bytes in all (the most recent blocks; older ones are let go to
glibc, and are freed when their last view dies).  A block is reused only when nothing
refers to it but this module: every view of a NumPy array refers to the block that owns
its memory (NumPy collapses chains of views), so a result a caller keeps, or any view of
it, keeps its block out of use.  The test is CPython's reference count, calibrated when the
module is imported; where it cannot be calibrated (or on a free-threaded CPython), nothing
is reused.

The limit is read from the environment variable ``LABELED_FUNC_BUFFER_MIB`` (default
64; 0 turns reuse off) and can be changed with :func:`set_limit`.  The blocks are
shared by threads under one lock.
"""
from __future__ import annotations

import math
import os
import sys
import threading
from typing import Any

import numpy as np

__all__ = ["MAX_BYTES", "MIN_BYTES", "copy_into", "empty", "limit", "owns", "set_limit"]

MIN_BYTES = 1 << 18  # smaller arrays come from NumPy's own cache and glibc's free lists
MAX_BYTES = 1 << 25  # a 2,000 x 2,000 float64 Jacobian (30.5 MiB); larger ones would be
#                      most of the limit (measured 2026-12-07, eager, one process each, the
#                      limit 64 MiB: with blocks up to 4 MiB, Ishigami's per-sample gradients
#                      of 1e6 samples 110-112 ms and 6,400-6,900 page faults per call, the
#                      Lorenz-96 jacrev / jacfwd at M = 2,000 32-33 / 39-40 ms; up to 32 MiB,
#                      93 ms and 300-500 faults, 22 / 26 ms)

_lock = threading.Lock()
_blocks: list = []  # oldest first; 1-d uint8 arrays owning their memory
_held = 0
_limit = 0
_FREE = None  # the reference count of a block nothing else refers to, seen from _take


def _take(nbytes):
    """A block of ``nbytes`` that nothing refers to, or None (called under the lock)."""
    blocks = _blocks
    for k in range(len(blocks) - 1, -1, -1):  # the newest first: the likeliest still in cache
        block = blocks[k]
        if block.nbytes == nbytes and sys.getrefcount(block) == _FREE:
            return block
    return None


def _calibrate():
    """The reference count :func:`_take` sees for a free block, or None where a view does not
    make a block busy and its death free again (then nothing is reused)."""
    _blocks.append(np.empty(8, np.uint8))
    try:
        global _FREE
        _FREE = _count_in_take(8)
        view = _blocks[-1].view(np.float64)
        busy = _take(8)
        del view
        free = _take(8)
        return _FREE if busy is None and free is not None else None
    finally:
        _blocks.pop()


def _count_in_take(nbytes):
    """The count ``_take`` would read for the newest block (the same frames and names)."""
    blocks = _blocks
    for k in range(len(blocks) - 1, -1, -1):
        block = blocks[k]
        if block.nbytes == nbytes:
            return sys.getrefcount(block)
    return None


def empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialised array of ``shape`` and ``dtype``: a view of a kept block when it is
    large enough and one is free, else a new array (kept for later when under the limit)."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < MIN_BYTES or nbytes > MAX_BYTES or nbytes > _limit or dtype.hasobject:
        return np.empty(shape, dtype)  # (bytes are never Python objects)
    with _lock:
        block = _take(nbytes)
        if block is None:
            block = _keep(nbytes)
        return block.view(dtype).reshape(shape)


def _keep(nbytes):
    """A new block, kept in place of the oldest ones beyond the limit (under the lock)."""
    global _held
    block = np.empty(nbytes, np.uint8)
    while _blocks and _held + nbytes > _limit:
        _held -= _blocks.pop(0).nbytes
    _blocks.append(block)
    _held += nbytes
    return block


def owns(x: Any) -> bool:
    """Whether ``x`` is the whole of its memory: an array owning it, or a whole kept block
    (the arrays :func:`empty` returns).  A kernel writes into a temporary in place only
    then, never into a view of another array."""
    base = x.base
    return base is None or (type(base) is np.ndarray and base.dtype == np.uint8 and base.ndim == 1
                            and base.flags.owndata and x.nbytes == base.nbytes and _is_kept(base))


def _is_kept(block):
    return any(kept is block for kept in _blocks)


def limit() -> int:
    """The bytes of kept blocks :func:`empty` may hold."""
    return _limit


def set_limit(nbytes: int) -> None:
    """Keep at most ``nbytes`` of blocks (0: reuse nothing; blocks beyond it are let go)."""
    global _limit, _held
    nbytes = int(nbytes)
    if nbytes < 0:
        raise ValueError(f"set_limit: a number of bytes >= 0, not {nbytes}")
    with _lock:
        _limit = nbytes if _FREE is not None else 0
        while _blocks and _held > _limit:
            _held -= _blocks.pop(0).nbytes


# a free-threaded CPython counts references per thread: no count says a block is free there
_FREE = _calibrate() if getattr(sys, "_is_gil_enabled", lambda: True)() else None
set_limit(float(os.environ.get("LABELED_FUNC_BUFFER_MIB", "64")) * 2**20)


# glibc's memmove (2.36, x86-64) copies ten times slower when its destination starts 1 to 15
# bytes past its source modulo 4 KiB, below the sizes it copies with non-temporal stores
# (~1 MiB here): a roll by one element of blocks that all start at the same offset in their
# pages (kept blocks, NumPy's large arrays) is that copy.  Measured over every distance:
# 22-31 us for 1 MiB, 297-300 us at 4, 8 and 12 bytes.
_PAGE, _SLOW_DISTANCES = 4096, range(1, 16)


def copy_into(destination: np.ndarray, source: np.ndarray) -> None:
    """``destination[...] = source`` for C-ordered NumPy arrays of one shape and dtype,
    bit for bit.  Where memmove would be slow (see above), the bits are copied by a ufunc
    loop instead (``np.positive`` on unsigned integers of the item's width): 36 us for
    that 1 MiB."""
    gap = (destination.ctypes.data - source.ctypes.data) % _PAGE
    width = source.dtype.itemsize
    if gap in _SLOW_DISTANCES and not source.dtype.hasobject and source.ndim == 1 and (
            width in (1, 2, 4) or width % 8 == 0):
        bits = np.dtype(f"u{min(width, 8)}")
        np.positive(source.view(bits), out=destination.view(bits))
    else:
        destination[...] = source
    return destination
