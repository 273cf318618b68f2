"""Fewer cyclic garbage collections while lf.jit records a program.

A recording keeps every node it makes (and the tracers a reverse pass holds) alive until it
ends, so CPython's young generation fills with survivors thousands of times a trace and
each collection walks them for nothing: on the advection-diffusion gradient of
``benchmarks/bench_first_call.py`` (about 9,400 nodes) collections were 0.06-0.12 s of a
1.0 s first call.  While a recording runs, :func:`fewer_collections` raises the threshold of
the young generation to ``TRACE_THRESHOLD`` allocations (CPython's default is 700), and
that of the middle one to ``TRACE_MIDDLE_THRESHOLD`` young collections (the default is 10):
the survivors of a trace pile up there (its tracers and nodes are containers, where the
eager call's arrays are not), and one collection of it walked them all (measured on the
8-sample advection gradient: 18-23 ms of its 26 ms of collections, 9 ms in all after).
Cycles are still collected, later.

The threshold is the interpreter's, not a transform's: recordings in several threads at once
(Dask blocks) share one raise, counted under a lock, and the last to end puts back what it
found.  Where collection is off (a threshold of 0) nothing changes."""
from __future__ import annotations

import contextlib
import gc
import threading

TRACE_THRESHOLD = 10_000
"""The young generation's threshold while a recording runs."""
TRACE_MIDDLE_THRESHOLD = 100
"""The middle generation's threshold (young collections between two of its own) while a
recording runs."""

_lock = threading.Lock()
_state = {"active": 0, "saved": None}  # the interpreter's, shared by every thread (not a transform's)


@contextlib.contextmanager
def fewer_collections():
    """Within the block, the young generation is collected every ``TRACE_THRESHOLD``
    allocations at most, and the middle one every ``TRACE_MIDDLE_THRESHOLD`` of those; the
    thresholds found before the first of the blocks running at once are put back when the
    last ends.

    Examples
    --------
    >>> import gc
    >>> before = gc.get_threshold()
    >>> with fewer_collections():
    ...     raised = gc.get_threshold()
    >>> raised[0] >= before[0] and raised[1] >= before[1] and gc.get_threshold() == before
    True
    """
    with _lock:
        if _state["active"] == 0:
            saved = gc.get_threshold()
            _state["saved"] = saved
            if saved[0] != 0:
                gc.set_threshold(max(saved[0], TRACE_THRESHOLD), max(saved[1], TRACE_MIDDLE_THRESHOLD),
                                 *saved[2:])
        _state["active"] += 1
    try:
        yield
    finally:
        with _lock:
            _state["active"] -= 1
            if _state["active"] == 0:
                gc.set_threshold(*_state["saved"])
                _state["saved"] = None
