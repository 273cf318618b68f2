"""``lf.jit``: trace a function once, replay it without xarray.

The first call with a given signature runs the function under the compiler level
(``engine/compiler/``), which records the primitives it applies; the outputs' labels
(dims, coords, attrs, names) are kept as a template.  Later calls with the same
signature replay the recorded program on the new arrays and put the results back in
the template: the function is not called, and no xarray operation runs inside.
"""
from __future__ import annotations

import collections
import copy
import functools
import inspect
import logging
import numbers
import threading
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optree
import xarray as xr
from xarray.core.options import OPTIONS as XARRAY_OPTIONS

from . import dask as lazy
from . import random as lf_random
from ._wrapping import call_repr
from .assemble import coord_variables, dataarray_holding, dataset_holding, holding
from .engine import active, current_levels, held, level_of
from .engine.compiler import JitLevel, fewer_collections
from .engine.errors import InplaceError, RandomnessError, UnsupportedOperationError
from .errors import RetraceWarning
from .flat import replace_arrays
from .jit_signature import (RESULT_OPTIONS as _RESULT_OPTIONS, Signature as _Signature, differences as _differences,
                            same_coordinate as _same_coordinate, same_value, scalar_key as _scalar_key)
from .named import tree_nodes
from .backends import reject_quantities
from .diagnostics import zero_d_index_error

__all__ = ["jit", "CACHE_SIZE", "WARN_AFTER_TRACES"]

CACHE_SIZE = 32
"""Programs kept per jitted function (the least recently used is dropped)."""

WARN_AFTER_TRACES = 8
"""The default of ``lf.jit``'s ``warn_after_traces``."""

REASONS_KEPT = 100
"""Reasons of traces that ``explain()`` keeps per jitted function (the latest)."""

logger = logging.getLogger("labeled_func.jit")
"""Logs each trace of a jitted function with its reason, at DEBUG."""


def jit(func: Callable[..., Any], *, static_argnames: str | Sequence[str] = (), keep_buffers: bool = False,
        warn_after_traces: int | None = WARN_AFTER_TRACES) -> Jitted:
    """``func`` compiled: traced once per signature, then replayed.

    The first call runs ``func`` on traced arrays and records the primitives it applies
    (inside ``vmap``, ``grad``, ``jacrev``... the batched and differentiated computation
    they produce); later calls whose arguments have the same signature replay that program
    on the new arrays and return outputs labeled as the first call's were.

    A jitted call returns what ``func`` returns (the same labels, dtypes and values, to the
    bit but for the documented tolerances of fused evaluations), writes into its arguments
    as ``func`` does, and draws ``lf.random`` numbers as ``func`` draws them; or it raises.
    The signature of a call is the structure of its arguments (pytrees of DataArrays,
    Datasets, DataTrees, Variables, arrays, numbers; the node paths and variables of
    each DataTree), the dims, shapes, dtypes, array types and memory layouts (strides) of
    their arrays, their coordinates (values, attrs, encodings, index types), names, attrs
    and encodings, which arguments are the same array, xarray's options that change
    results (``keep_attrs``...), and Python numbers, ``None`` and
    the arguments named in ``static_argnames`` (hashable) by type and exact value (``1``,
    ``1.0``, ``0.0`` and ``-0.0`` are four programs).  Pass a 0-d array or DataArray for a
    number that changes from call to call.  Up to ``CACHE_SIZE`` programs are kept per
    function.  See docs/jit.md, "The contract".

    Inside, a traced value stands for the values of every later call: a Python ``if``,
    ``bool()``, ``float()`` or ``.item()`` on it raises the same errors as under ``vmap``
    (use ``xr.where`` / ``lf.cond``), and so does a shape that depends on its values.
    Decisions that ``lf.vmap(..., branches="agree")`` takes where every example agrees, and
    xarray's NaN check of ``weighted()``'s weights, are guards: re-checked after each
    replay, before anything is written into the arguments; a call that decides otherwise
    traces again (``explain()`` names the guard), or raises what the function raises.
    ``lf.random`` draws are made at every call as ``func`` makes them (a seed inside
    ``func`` gives the same draws at every call).  Other side effects (``print``,
    appending to a list) happen while tracing only, as in JAX.  Called inside another
    transform, ``jit`` runs ``func`` as it is.  On Dask-backed arguments the results are
    lazy, as ``func``'s are, and each lazy ``lf.vmap`` inside compiles its blocks: one
    program per block shape, replayed in every block.  See docs/jit.md.

    Parameters
    ----------
    func : callable
        Takes and returns pytrees of DataArrays, Datasets, DataTrees, Variables, arrays
        and numbers.
    static_argnames : str or sequence of str
        Parameters of ``func`` whose values are part of the signature (any hashable
        value: a string option, a tuple of dims); a new value traces again.
    keep_buffers : bool
        Keep the scratch memory of a program's last run for its next run (NumPy): the
        large intermediate arrays that no output holds (a gradient's residuals) are
        laid out in blocks kept from call to call, instead of being allocated one by one
        at each run (from the memory the eager kernels keep and the heap: about as fast
        where the process has run the function before, 240-260 ms for either on the
        advection-diffusion gradient). The price: that memory (the peak of one run's
        scratch) stays held between calls, while the jitted function keeps the
        program. Off by default.
    warn_after_traces : int or None
        Warn (``lf.RetraceWarning``, with the reason) when ``func`` is traced more than
        this many times: at the trace that passes it, then each time the traces beyond it
        double; None never warns.  Every trace is logged with its reason on the logger
        ``labeled_func.jit`` (DEBUG).

    Returns
    -------
    Jitted
        A callable with ``func``'s signature and name; ``.traces`` counts the traces, and
        ``.explain()`` says why each one happened: what differed from the nearest signature
        already compiled (the argument by its parameter name, the variable or coordinate,
        and what changed: a dtype, a shape, attrs, a number's value or type...).

    Raises
    ------
    ValueError
        ``static_argnames`` names a parameter that ``func`` does not have;
        ``warn_after_traces`` is negative.
    TypeError
        ``keep_buffers`` is not a bool, ``warn_after_traces`` not an int or None. When
        called: an argument that is neither an array, a labeled value, a number, a
        string nor None (name it in ``static_argnames``), or an unhashable static
        argument.
    lf.DataDependentControlFlowError
        When traced: ``if``, ``bool()`` on a traced value (``lf.ItemError`` for
        ``float()``, ``.item()``; ``lf.DynamicShapeError`` for a shape that depends on
        values).
    lf.InplaceError
        ``func`` writes into an argument that shares memory with another argument
        without being the same array.
    lf.RandomnessError
        When traced: ``func`` draws from NumPy's global random state (``np.random.*``).
    lf.UnsupportedOperationError
        When traced: reverse-mode differentiation (``lf.grad``...) through an
        ``lf.while_loop`` whose condition is traced; ``x.isel(t=i)`` with a traced
        position ``i`` along a dim whose coordinate holds dates or strings; a guarded decision
        inside an ``lf.while_loop``, or in a function that also draws ``lf.random`` numbers
        from a generator that lives across calls (a failed guard would draw twice).

    Examples
    --------
    Per-sample derivatives of v³, 3v², compiled once and replayed:

    >>> import numpy as np, xarray as xr, labeled_func as lf
    >>> x = xr.DataArray(np.linspace(0.0, 1.0, 5), dims="sample")
    >>> per_sample = lf.jit(lf.vmap(lf.grad(lambda v: v ** 3), dim="sample"))
    >>> per_sample(x).values.tolist()
    [0.0, 0.1875, 0.75, 1.6875, 3.0]
    >>> per_sample(x + 1).values.tolist()  # the same signature: replayed
    [3.0, 4.6875, 6.75, 9.1875, 12.0]
    >>> _ = per_sample(x.astype("float32"))  # another dtype: traced again
    >>> per_sample.explain()
    lf.jit(lf.vmap(lf.grad(<lambda>), dim='sample')): traced 2 times, 2 programs kept
    trace 1: the first call
    trace 2: argument 'v': dtype float64 -> float32 (against trace 1)
    """
    if isinstance(static_argnames, str):
        static_argnames = (static_argnames,)
    if not isinstance(keep_buffers, (bool, np.bool_)):
        raise TypeError(f"lf.jit: keep_buffers must be True or False, not {keep_buffers!r}")
    if warn_after_traces is not None:
        if not isinstance(warn_after_traces, numbers.Integral) or isinstance(warn_after_traces, (bool, np.bool_)):
            raise TypeError(f"lf.jit: warn_after_traces must be an int or None, not {warn_after_traces!r}")
        if warn_after_traces < 0:
            raise ValueError(f"lf.jit: warn_after_traces must be 0 or more, not {warn_after_traces!r}")
        warn_after_traces = int(warn_after_traces)
    return Jitted(func, tuple(static_argnames), bool(keep_buffers), warn_after_traces)


class Jitted:
    """A function with its recorded programs, one per signature."""

    def __init__(self, func, static_argnames, keep_buffers=False, warn_after_traces=WARN_AFTER_TRACES):
        self.func = func
        self.static_argnames = static_argnames
        self.keep_buffers = keep_buffers
        self.warn_after_traces = warn_after_traces
        try:
            self.signature = inspect.signature(func)
        except (TypeError, ValueError):
            self.signature = None
        if static_argnames:
            known = set(self.signature.parameters) if self.signature is not None else set()
            unknown = [name for name in static_argnames if name not in known]
            if unknown:
                raise ValueError(f"lf.jit: static_argnames names {unknown}, which are not parameters of "
                                 f"{getattr(func, '__name__', 'the function')} (it has {sorted(known)})")
        self.cache = collections.OrderedDict()  # (key, number) -> program, least recently used first
        self.variants = {}  # key -> the cache's keys of its programs (labels that differ)
        self.stored = 0
        self.lock = threading.Lock()
        self.tracing = threading.Lock()
        self.blocks = weakref.WeakKeyDictionary()  # vmap level -> its Dask blocks, jitted
        self.traces = 0  # how many times the function was traced (for tests and curiosity)
        self.reasons = collections.deque(maxlen=REASONS_KEPT)  # (trace number, why it traced)
        self.dropped = collections.deque(maxlen=CACHE_SIZE)  # the signatures of programs dropped from the cache
        functools.update_wrapper(self, func, updated=())

    def __call__(self, *args, **kwargs):
        if current_levels():  # inside another transform: the function as it is
            return self.func(*args, **kwargs)
        try:
            call = _Call(self, args, kwargs)
        except TypeError:  # a leaf lf.jit refuses, which a Dask call passes on as it is
            if lazy.has_lazy_leaves(args, kwargs):
                return self._lazy(args, kwargs)
            raise
        if not call.numpy_only and lazy.has_lazy_leaves(args, kwargs):
            return self._lazy(args, kwargs)
        compiled = self._cached(call)
        if compiled is None:
            with self.tracing:  # one trace per signature, however many threads ask at once
                compiled = self._cached(call)
                if compiled is None:
                    return self._trace_and_store(call)
        results = compiled.run(call)
        if type(results) is _GuardFailed:
            return self._guarded(call, compiled, results)
        return compiled.outputs.build(results)

    def _lazy(self, args, kwargs):
        """A call on Dask-backed data: each lazy vmap inside compiles its blocks."""
        with lazy.compiled_blocks(self._block_program):
            return self.func(*args, **kwargs)

    def _guarded(self, call, compiled, failed):
        """A call whose replay of ``compiled`` failed a guard (a decision taken from the traced
        call's values goes otherwise at this call): another program of its signature whose
        guards hold, else a trace of this call (which raises where the decision cannot be
        taken, e.g. examples that disagree)."""
        tried = [compiled]
        while True:
            with self.lock:
                other = next((self.cache[key] for key in self.variants.get(call.key, ())
                              if all(self.cache[key] is not t for t in tried) and self.cache[key].matches(call)),
                             None)
            if other is None:
                break
            results = other.run(call)
            if type(results) is not _GuardFailed:
                with self.lock:  # asked first next time
                    keys = self.variants.get(call.key, [])
                    for key in keys:
                        if self.cache.get(key) is other:
                            keys.remove(key)
                            keys.insert(0, key)
                            self.cache.move_to_end(key)
                            break
                return other.outputs.build(results)
            tried.append(other)
        with self.tracing:
            number = compiled.signature.number if compiled.signature is not None else None
            guard = failed.guard
            traced = f"trace {number}" if number is not None else "the trace"
            tried_text = f"{len(tried)} program{'s' if len(tried) != 1 else ''} of this signature tried"
            if failed.failed_run:
                reason = (f"the replay of {traced} raised before its guards were checked: a decision taken "
                          f"from traced values ({guard.what}, ...) goes otherwise at this call ({tried_text})")
            else:
                reason = (f"{guard.what} changed: {traced} took {guard.answer}, this call does not "
                          f"(a guard; {tried_text})")
            return self._trace_and_store(call, reason)

    def _trace_and_store(self, call, reason=None):
        """A call that traces: its result; its program stored, with the reason it traced."""
        signature = _Signature.of(call)
        if reason is None:
            reason = self._reason(signature)
        before = self.traces
        try:
            compiled, result = self._trace(call)
        except BaseException as error:
            if self.traces != before:  # counted, then refused (InplaceError): no program kept
                self.reasons.append((self.traces, f"{reason}; the trace raised {type(error).__name__}"))
            raise
        compiled.signature = signature
        if signature is not None:
            signature.number = self.traces
        self._store(call, compiled)
        self._traced(self.traces, reason)
        return result

    def _cached(self, call):
        """The program of ``call``'s signature: among those of its key, the one whose labels
        (compared, not hashed: attrs, coordinate values) are ``call``'s."""
        with self.lock:
            for key in self.variants.get(call.key, ()):
                compiled = self.cache[key]
                if compiled.matches(call):
                    self.cache.move_to_end(key)
                    return compiled
            return None

    def _store(self, call, compiled):
        with self.lock:
            self.stored += 1
            key = (call.key, self.stored)
            self.cache[key] = compiled
            self.variants.setdefault(call.key, []).append(key)
            while len(self.cache) > CACHE_SIZE:
                dropped, program = self.cache.popitem(last=False)
                if program.signature is not None:
                    self.dropped.append(program.signature)
                variants = self.variants[dropped[0]]
                variants.remove(dropped)
                if not variants:
                    del self.variants[dropped[0]]

    def _block_program(self, mapped, block):
        """The jitted form of a lazy vmap's per-block function ``block`` (``mapped`` is the
        vmap level: the same object at every call when the vmap is built outside)."""
        with self.lock:
            jitted = self.blocks.get(mapped)
            if jitted is None:
                jitted = self.blocks[mapped] = Jitted(block, (), self.keep_buffers, self.warn_after_traces)
            return jitted

    def __getstate__(self):  # to a Dask worker: the function, not its programs or locks
        return {"func": self.func, "static_argnames": self.static_argnames, "keep_buffers": self.keep_buffers,
                "warn_after_traces": self.warn_after_traces}

    def __setstate__(self, state):
        self.__init__(state["func"], state["static_argnames"], state.get("keep_buffers", False),
                      state.get("warn_after_traces", WARN_AFTER_TRACES))

    # --- why a call traced: computed when tracing only (a replay never comes here) ---------------
    def _reason(self, signature):
        """Why ``signature``'s call traces: its differences from the nearest signature whose
        program is kept (the fewest differences; the most recently used of equals)."""
        if self.traces == 0:
            return "the first call"
        if signature is None:
            return "(the reason could not be told)"
        try:
            with self.lock:
                kept = [program.signature for program in reversed(self.cache.values())
                        if program.signature is not None]
            best = None
            for old in kept:
                if best is not None and len(_differences(old, signature, labels=False)) > len(best[1]):
                    continue  # more differences in the key alone: not nearer
                found = _differences(old, signature)
                if best is None or len(found) < len(best[1]):
                    best = (old, found)
            for old in reversed(self.dropped):  # traced before, dropped since (CACHE_SIZE programs kept)
                if not _differences(old, signature):
                    return (f"the signature of trace {old.number}, whose program was dropped: lf.jit keeps the "
                            f"{CACHE_SIZE} programs used last (labeled_func.jit.CACHE_SIZE)")
            if best is None:
                return "no program kept (the traces before raised)"
            if not best[1]:
                return f"no difference found from the signature of trace {best[0].number}"
            return f"{'; '.join(best[1])} (against trace {best[0].number})"
        except Exception as error:  # noqa: BLE001 - a reason that cannot be told must not fail the call
            return f"(the reason could not be told: {type(error).__name__}: {error})"

    def _traced(self, number, reason):
        """Keep, log and (past ``warn_after_traces``) warn the reason of trace ``number``."""
        self.reasons.append((number, reason))
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("%s: trace %d: %s", self._shown(), number, reason)
        limit = self.warn_after_traces
        if limit is not None and number > limit and (number - limit) & (number - limit - 1) == 0:
            warnings.warn(RetraceWarning(
                f"{self._shown()} was traced {number} times (more than warn_after_traces={limit}), each time "
                f"running the function itself, under xarray. Trace {number}: {reason}. The jitted function's "
                ".explain() gives every reason; see docs/jit.md, 'Why a call traces again'."),
                stacklevel=4)

    def explain(self) -> str:
        """Why the function was traced each time: the first call, then for each later trace
        what differed from the nearest signature already compiled (the latest
        ``REASONS_KEPT`` reasons; the Dask block programs after)."""
        kept = len(self.cache)
        lines = [f"{self._shown()}: " + (f"traced {self.traces} time{'s' if self.traces != 1 else ''}, "
                                         f"{kept} program{'s' if kept != 1 else ''} kept"
                                         if self.traces else "not traced yet")]
        if self.reasons and self.reasons[0][0] > 1:
            lines.append(f"(the reasons of traces 1 to {self.reasons[0][0] - 1} are no longer kept)")
        lines += [f"trace {number}: {reason}" for number, reason in self.reasons]
        with self.lock:
            blocks = list(self.blocks.values())
        for k, jitted in enumerate(blocks):
            lines.append(f"Dask blocks of a lazy vmap ({k + 1} of {len(blocks)}): " + jitted.explain())
        return _Explanation("\n".join(lines))

    def _shown(self):
        return call_repr("lf.jit", self.func)

    def _trace(self, call):
        # a pint Quantity: the policy error, before any kernel sees it (traced calls only:
        # a Quantity's signature is never cached, so a replay never meets one)
        reject_quantities(call.leaves, [call._where(path) for path in call.paths], transform="lf.jit")
        level = JitLevel()
        level.label = "jit"
        drew_from_numpy = lf_random.numpy_state()
        with fewer_collections(), active(level), lf_random.recorded_draws(level) as draws:
            traced, aliases = [], call.key[-1]
            for k, array in enumerate(call.arrays):
                tracer = level.input(array, call.describe(k))  # every argument an input, so that positions line up
                traced.append(tracer if aliases is None or aliases[k] == k else traced[aliases[k]])
            args, kwargs = call.rebuild(traced)
            try:
                out = self.func(*args, **kwargs)
            except ValueError as error:
                clearer = zero_d_index_error(error, "jit")
                if clearer is None:
                    raise
                raise clearer from error
            outputs = _Outputs(out, level)
            # the arguments the function wrote into (eagerly, the caller's arrays are written)
            written = [(k, slot, value) for k, (value, slot) in enumerate(map(held, traced))
                       if slot != level.program.inputs[k] and (aliases is None or aliases[k] == k)]
        if lf_random.numpy_drew_since(drew_from_numpy):
            raise RandomnessError(
                f"lf.jit: {getattr(self.func, '__name__', 'the function')} draws from NumPy's global random state "
                "(np.random.*) while traced: lf.jit records a program once, so those draws would be the same at "
                "every call. Draw with lf.random.normal / lf.random.uniform (drawn afresh at every call, "
                "reproducible with lf.random.seed), or draw outside and pass the draws in as an argument.")
        lf_random.settle_draws(draws)
        program = level.program
        guards = tuple(level.guards)
        if guards and any(node.effect and node.slot in level.sources for node in program.nodes):
            raise UnsupportedOperationError(
                f"lf.jit: {getattr(self.func, '__name__', 'the function')} takes a decision from traced values "
                f"({guards[0].what}: a guard, e.g. of lf.vmap(..., branches='agree')) and draws lf.random numbers "
                "from a generator that lives across calls: a call whose guard fails is traced again, and would "
                "draw twice. Seed inside the function (lf.random.seed), or draw outside and pass the draws in.")
        program.outputs = outputs.slots + [slot for _, slot, _ in written] + [guard.slot for guard in guards]
        program.keep_buffers = self.keep_buffers  # pruned at its first replay (Program.ready)
        self.traces += 1
        compiled = _Compiled(call, program, outputs, [k for k, _, _ in written], guards)
        compiled.check_overlaps(call)
        for k, _, value in written:
            _write_through(call.arrays[k], value)
        return compiled, outputs.build(outputs.values)

    def __repr__(self):
        return call_repr("lf.jit", self.func, (("static_argnames", self.static_argnames, ()),
                                                ("keep_buffers", self.keep_buffers, False),
                                                ("warn_after_traces", self.warn_after_traces, WARN_AFTER_TRACES)))


class _Explanation(str):
    """``explain()``'s text, which the interpreter shows as text (not a quoted string)."""

    def __repr__(self):
        return str(self)


class _GuardFailed:
    """What a replay returns when one of its guards fails (nothing was written), or when a
    replay of a program with guards raised (``failed_run``: its decisions are then unknown)."""

    __slots__ = ("guard", "failed_run")

    def __init__(self, guard, failed_run=False):
        self.guard = guard
        self.failed_run = failed_run


class _Compiled:
    signature = None  # the traced call's _Signature (explain())

    def __init__(self, call, program, outputs, written=(), guards=()):
        self.program = program
        self.outputs = outputs
        self.check = call.check
        self.written = tuple(written)  # the positions of the arguments the function writes into
        self.guards = tuple(guards)  # decisions taken from the traced call's values (extra outputs, last)

    def run(self, call):
        """The program's outputs for ``call``, whose arguments it writes into as the function does;
        a :class:`_GuardFailed` where a guard fails (checked before anything is written)."""
        if not self.written and not self.guards:
            return self.program.run(call.arrays)
        if self.written:
            self.check_overlaps(call)
        try:
            results = self.program.run(call.arrays)
        except Exception:
            if not self.guards:
                raise
            # a replay past a decision that now goes otherwise can fail before its guard is
            # checked (a gather at a position the traced call's bounds check clipped): the
            # decision's guard answers; a trace of this call raises what the function raises
            return _GuardFailed(self.guards[0], failed_run=True)
        if self.guards:
            count = len(results) - len(self.guards)
            for guard, value in zip(self.guards, results[count:]):
                if not guard.holds(value):
                    return _GuardFailed(guard)
            results = results[:count]
        if not self.written:
            return results
        count = len(results) - len(self.written)
        for k, value in zip(self.written, results[count:]):
            _write_through(call.arrays[k], value)
        return results[:count]

    def check_overlaps(self, call):
        """InplaceError where the function writes into an argument that shares memory with another
        argument without being the same array (a view of it): lf.jit traces them as two arrays."""
        aliases = call.key[-1]
        for k in self.written:
            for m, other in enumerate(call.arrays):
                same = aliases is not None and aliases[m] == aliases[k]
                if m != k and not same and _may_share_memory(call.arrays[k], other):
                    raise InplaceError(
                        f"lf.jit: {getattr(call.jitted.func, '__name__', 'the function')} writes into "
                        f"{call.describe(k)} in place, and {call.describe(m)} shares its memory (a view of it, "
                        "or it of a view): lf.jit records them as two arrays, so the write would not show "
                        "through the other. Pass a copy (.copy()) of one of them, or the same array twice.")

    def matches(self, call):
        """Whether ``call``'s labels are those of the traced call (the key holds their
        structure, shapes and dtypes; coordinate values, attrs and encodings are compared
        here, as they go into the outputs)."""
        if len(call.check) != len(self.check):
            return False
        for mine, theirs in zip(self.check, call.check):
            if mine[0] == "coords":
                if any(a is not b and not _same_coordinate(a, b) for a, b in zip(mine[1], theirs[1])):
                    return False
            elif any(a is not b and not same_value(a, b) for a, b in zip(mine[1], theirs[1])):
                return False
        return True


def _write_through(array, value):
    """``array[...] = value``: the caller's argument written as the function writes it."""
    array[...] = value


def _may_share_memory(a, b):
    if type(a) is np.ndarray and type(b) is np.ndarray:
        return bool(np.may_share_memory(a, b))
    return a is b  # other libraries' arrays: the same object only (no portable test)


def _labels(*variables):
    """The attrs and encoding of each of ``variables``, compared on a cache hit."""
    return tuple(part for variable in variables for part in (variable.attrs, variable.encoding))


# --- a call: its signature, its arrays, and how to rebuild its arguments -----------------------------
class _Call:
    def __init__(self, jitted, args, kwargs):
        self.jitted = jitted
        statics = ()
        self.bound = None
        if jitted.static_argnames:
            self.bound = jitted.signature.bind(*args, **kwargs)
            self.bound.apply_defaults()
            arguments = self.bound.arguments
            statics = tuple((name, _static_key(name, arguments[name])) for name in jitted.static_argnames)
            tree = {name: value for name, value in arguments.items() if name not in jitted.static_argnames}
        else:
            tree = (tuple(args), dict(kwargs))
        paths, self.leaves, self.treedef = optree.tree_flatten_with_path(tree, none_is_leaf=True)
        self.paths = paths
        self.arrays, self.check, self.counts, key = [], [], [], []
        for path, leaf in zip(paths, self.leaves):
            kind, arrays = self._leaf(leaf, path)
            self.counts.append(len(arrays))
            self.arrays.extend(arrays)
            key.append(kind)
        # the memory layout of NumPy arrays too: the replay writes results in the layout
        # NumPy gave them when recorded (sums over them then add in the same order)
        layouts = tuple(a.strides if type(a) is np.ndarray else None for a in self.arrays)
        # every array and coordinate in NumPy: no Dask collection among them (asked without
        # a second walk over the arguments: a jitted call asks at every call)
        self.numpy_only = None not in layouts and all(
            lazy.in_memory(c) for kind, held in self.check if kind == "coords" for c in held)
        self.key = (self.treedef, tuple(key), statics, layouts, _xarray_options(), _aliasing(self.arrays))

    def describe(self, k):
        """The argument that holds array ``k`` of the call (``argument 'x'``, ``argument
        'ds'['a']``...)."""
        total = 0
        for path, count in zip(self.paths, self.counts):
            if k < total + count:
                return self._where(path)
            total += count
        return f"array {k}"  # pragma: no cover

    def _where(self, path):
        """``argument 'x'``, ``argument 'params'['a']``, ``keyword argument 'scale'``."""
        if self.bound is not None:
            return f"argument {path[0]!r}" + "".join(f"[{k!r}]" for k in path[1:])
        kind, rest = path[0], path[1:]
        if kind == 0:
            parameters = self.jitted.signature.parameters.values() if self.jitted.signature is not None else ()
            positional = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            rest_of = [p.name for p in parameters if p.kind is p.VAR_POSITIONAL]  # *args: argument 'args'[0]...
            k = rest[0]
            label = (f"argument {positional[k]!r}" if k < len(positional) else
                     f"argument {rest_of[0]!r}[{k - len(positional)}]" if rest_of else f"argument {k}")
        else:
            label = f"keyword argument {rest[0]!r}"
        return label + "".join(f"[{k!r}]" for k in rest[1:])

    def _leaf(self, leaf, path):
        # The signature and the arrays in one pass: this runs at every call, and a second
        # walk (flat.Arrays, then the signature) costs ~5 us of a ~60 us jitted call.  The
        # arrays are flat.py's policy (tests/test_flat.py compares them with flat.Arrays'),
        # and rebuild() puts them back with flat.replace_arrays.
        if isinstance(leaf, xr.DataArray):
            self.check.append(("coords", _coordinates(leaf)))
            self.check.append(("labels", _labels(leaf.variable)))
            data = leaf.variable.data
            return ("DataArray", leaf.dims, leaf.shape, _dtype_key(data.dtype), type(data), _scalar_key(leaf.name),
                    _coord_key(leaf)), [data]
        if isinstance(leaf, xr.Dataset):
            names, variables = list(leaf.data_vars), leaf._variables
            self.check.append(("coords", _coordinates(leaf)))
            self.check.append(("labels", (leaf.attrs, leaf.encoding) + _labels(*(variables[name] for name in names))))
            arrays = [variables[name].data for name in names]
            layout = tuple((_scalar_key(name), variables[name].dims, data.shape, _dtype_key(data.dtype), type(data))
                           for name, data in zip(names, arrays))
            return ("Dataset", layout, _coord_key(leaf)), arrays
        if isinstance(leaf, xr.Variable):
            self.check.append(("labels", _labels(leaf)))
            data = leaf.data
            return ("Variable", leaf.dims, data.shape, _dtype_key(data.dtype), type(data)), [data]
        if isinstance(leaf, xr.DataTree):
            layout, arrays = [], []
            for node_path, ds in tree_nodes(leaf):
                kind, node_arrays = self._leaf(ds, path)
                layout.append((node_path, kind))
                arrays.extend(node_arrays)
            return ("DataTree", leaf.name, tuple(layout)), arrays
        if isinstance(leaf, (bool, numbers.Number, str, type(None), np.generic)):
            return ("constant", _scalar_key(leaf)), []
        if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
            return ("array", type(leaf), tuple(leaf.shape), _dtype_key(leaf.dtype)), [leaf]
        raise TypeError(
            f"lf.jit: {self._where(path)} is a {type(leaf).__name__}, which is neither an array, a labeled value "
            "(DataArray, Dataset, DataTree, Variable), nor a number: name it in static_argnames (it is then part of the signature, "
            "and a new value traces again), or close over it"
        )

    def rebuild(self, arrays):
        """The call's ``(args, kwargs)`` with its arrays replaced by ``arrays``."""
        leaves, k = [], 0
        for leaf, count in zip(self.leaves, self.counts):
            new = arrays[k:k + count]
            k += count
            leaves.append(replace_arrays(leaf, new) if count else leaf)
        tree = optree.tree_unflatten(self.treedef, leaves)
        if self.bound is None:
            return tree
        bound = copy.copy(self.bound)
        bound.arguments = {name: tree.get(name, value) for name, value in self.bound.arguments.items()}
        return bound.args, bound.kwargs


def _coordinates(leaf):
    """The coordinate variables of a labeled leaf, compared on a cache hit (the key holds
    their names, dims, shapes and dtypes)."""
    return tuple(coord_variables(leaf).values())


def _coord_key(leaf):
    """The structure of a labeled leaf's coordinates: names, dims, shapes, dtypes and the
    type of each one's index (a PandasIndex, a CFTimeIndex or a custom index select
    differently)."""
    indexes = leaf._indexes
    return tuple((name, c._dims, c.shape, _dtype_key(c.dtype), type(indexes.get(name)))
                 for name, c in coord_variables(leaf).items())


def _dtype_key(dtype):
    """A dtype as a key (NumPy's own dtypes hash and compare faster than their names)."""
    return dtype if isinstance(dtype, np.dtype) else str(dtype)


def _xarray_options():
    """The values of xarray's options that change results (``xr.set_options(keep_attrs=True)``
    around a call changes its outputs' attrs)."""
    return tuple([XARRAY_OPTIONS[name] for name in _RESULT_OPTIONS])


def _aliasing(arrays):
    """Which arguments are the same array (for each, the position of the first that is it),
    or None when all are distinct: a function that writes into one writes into the others."""
    if len(arrays) < 2:
        return None
    first = {}
    pattern = tuple(first.setdefault(id(array), k) for k, array in enumerate(arrays))
    return None if len(first) == len(arrays) else pattern


def _static_key(name, value):
    """A static argument as a key: its type and value, item by item in tuples and frozensets
    (``(1, 2)`` and ``(1.0, 2)`` are two keys)."""
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"lf.jit: the static argument {name!r} must be hashable (it is part of the "
                        f"signature), got a {type(value).__name__}") from None
    return _typed(value)


def _typed(value):
    kind = type(value)
    if kind is tuple:
        return kind, tuple(_typed(item) for item in value)
    if kind is frozenset:
        return kind, frozenset(_typed(item) for item in value)
    if kind in (float, complex) or isinstance(value, np.generic):
        return _scalar_key(value)
    return kind, value


# --- outputs: the template, the slots of their arrays ----------------------------------------------
def _placeholder(array):
    """A stand-in of ``array``'s shape and dtype that holds no memory (a template's data)."""
    dtype = np.dtype(getattr(array.dtype, "_np_dtype", array.dtype))  # array_api_strict's dtypes wrap NumPy's
    return np.broadcast_to(np.zeros((), dtype=dtype), tuple(array.shape))


class _Outputs:
    """The structure of the outputs, each traced array a slot of the program."""

    def __init__(self, out, level):
        paths, leaves, self.treedef = optree.tree_flatten_with_path(out, none_is_leaf=True)
        self.slots, self.values, self.builders = [], [], []
        for path, leaf in zip(paths, leaves):
            self.builders.append(self._leaf(leaf, level, "output" + "".join(f"[{k!r}]" for k in path)))

    def _array(self, value, level):
        """The index of a traced array among the program's outputs, or None (a constant)."""
        owner = level_of(value)
        if owner is not None and owner.abstract:  # recorded by lf.jit
            if owner is not level:  # pragma: no cover - an escaped tracer
                raise TypeError("lf.jit: an output holds a value traced by another lf.jit")
            self.slots.append(level.output_slot(value))
            self.values.append(held(value)[0])
            return len(self.slots) - 1
        return None

    def _leaf(self, leaf, level, where):
        if isinstance(leaf, (xr.DataArray, xr.Dataset)):
            return self._labeled(leaf, level)
        if isinstance(leaf, xr.Variable):
            data = self._array(leaf.data, level)
            template = leaf.copy(deep=False, data=_placeholder(leaf.data)) if data is not None else leaf
            return ("Variable", template, data, {})
        if isinstance(leaf, xr.DataTree):
            nodes = [(path, self._labeled(ds, level)) for path, ds in tree_nodes(leaf)]
            return ("DataTree", leaf.name, nodes, {})
        k = self._array(leaf, level)
        if k is not None:
            return ("array", None, k, {})
        if hasattr(leaf, "shape") or isinstance(leaf, (numbers.Number, str, type(None))):
            return ("constant", leaf, None, {})
        raise TypeError(f"lf.jit: {where} is a {type(leaf).__name__}; return arrays, DataArrays, Datasets, "
                        "DataTrees, Variables or numbers")

    def _labeled(self, leaf, level):
        """A DataArray's or Dataset's template, with the slots of its traced arrays."""
        coords = {name: self._array(c.data, level) for name, c in coord_variables(leaf).items()
                  if name not in leaf.xindexes}
        coords = {name: k for name, k in coords.items() if k is not None}
        if isinstance(leaf, xr.DataArray):
            data = self._array(leaf.data, level)
            template = leaf.copy(deep=False, data=_placeholder(leaf.data) if data is not None else None)
        else:
            data = {name: self._array(leaf[name].data, level) for name in leaf.data_vars}
            template = leaf.copy(deep=False, data={name: _placeholder(leaf[name].data) if k is not None
                                                   else leaf[name].data for name, k in data.items()})
        if coords:  # traced coordinates: placeholders too, filled at each build
            template = template.assign_coords({name: template[name].variable.copy(
                deep=False, data=_placeholder(template[name].data)) for name in coords})
        return (type(leaf).__name__, template, data, coords)

    def build(self, arrays):
        leaves = []
        for kind, template, data, coords in self.builders:
            if kind == "array":
                leaves.append(arrays[data])
            elif kind == "constant":
                leaves.append(template)
            elif kind == "Variable":
                leaves.append(template.copy(deep=False) if data is None else template.copy(deep=False, data=arrays[data]))
            elif kind == "DataTree":
                nodes = {path: _build_labeled(*node, arrays) for path, node in data}
                leaves.append(xr.DataTree.from_dict(nodes, name=template))
            else:
                leaves.append(_build_labeled(kind, template, data, coords, arrays))
        return optree.tree_unflatten(self.treedef, leaves)


def _build_labeled(kind, template, data, coords, arrays):
    """A DataArray or Dataset like ``template`` (a shallow copy: nothing of it shared with the
    template but arrays and indexes), holding the program's outputs ``arrays``."""
    if kind == "DataArray":
        variable = template.variable
        variable = variable.copy(deep=False) if data is None else holding(variable, arrays[data])
        value = dataarray_holding(template, variable)
        for name, k in coords.items():  # the placeholders of traced coordinates
            value._coords[name] = holding(template._coords[name], arrays[k])
        return value
    variables = template._variables
    replaced = {name: holding(variables[name], arrays[k]) for name, k in data.items() if k is not None}
    replaced.update({name: holding(variables[name], arrays[k]) for name, k in coords.items()})
    return dataset_holding(template, replaced)
