"""The active transforms, one level each, in a ContextVar; and what goes to a level.

Dask's threaded scheduler runs blocks in parallel threads (each with a copy of the
context), so the stack is per task, never a module global.

Four things are handed to the innermost level among their arguments (found by
:func:`kernels.primitive.top_level`, as ``bind`` finds it for primitives): in-place
updates (:func:`inplace_assign`, the level's ``assign``), calls of functions with
custom derivative rules (:func:`bind_custom_jvp` / :func:`bind_custom_vjp`, the
level's ``process_custom_jvp`` / ``process_custom_vjp``) and calls of functions run once
per example (:func:`bind_per_example`, the level's ``process_per_example``).  Calls of
checkpointed functions (:func:`bind_checkpoint`, the level's ``process_checkpoint``) go
to the innermost *active* level instead: the function may read values it closes over,
traced by any active level.  A ``lf.while_loop`` whose condition no one knows goes to the
abstract level that traces it (``process_while_loop``), which asks each level above it to
describe its tracers in the loop's state (``loop_spec`` and the other ``loop_*`` methods).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NoReturn

from labeled_func_kernels.primitive import Primitive, Traced, differentiated, top_level

from . import diagnose
from .errors import EscapedTracerError, InplaceError, UnsupportedOperationError

__all__ = ["Level", "active", "current_levels", "inplace_assign", "is_batched", "is_traced", "kept_traced", "structure_value", "level_of", "held", "differentiated", "traced_by",
           "bind_custom_jvp", "bind_custom_vjp", "bind_per_example", "bind_checkpoint"]

_STACK: ContextVar[tuple] = ContextVar("labeled_func_transform_stack", default=())


class Level:
    """One active transform.  ``depth`` orders nesting; ``alive`` turns off on exit.

    ``batches``: the level maps a function over examples (vmap); ``differentiates``: it
    carries derivatives (jvp, grad); ``abstract``: its values stand for those of later
    calls (jit), so nothing may be decided from them.  Subclasses define ``process`` (one primitive),
    ``assign`` (an in-place update of one of its tracers) and, where they treat them
    specially, ``process_custom_jvp`` / ``process_custom_vjp`` / ``process_per_example`` /
    ``process_checkpoint`` / ``process_while_loop``, and the ``loop_*`` methods that describe
    their tracers in the state of a loop recorded below them.
    """

    name = "transform"
    batches = False
    differentiates = False
    abstract = False
    __slots__ = ("depth", "alive", "label", "__weakref__")

    def __init__(self):
        self.depth = 0
        self.alive = True
        self.label = None  # the public transform that made the level (jacrev, hessian, ...)

    def made_concrete(self, tracer: Any, what: str, how: str | None = None) -> Any:
        """The concrete values of ``tracer`` (of this level) for the conversion ``what`` where
        the level can give them (lf.jit: structure, guarded); None: the policy error."""
        return None

    def escaped(self, operation: Any) -> NoReturn:
        what = getattr(operation, "name", operation)
        transform = self.label or self.name
        head = diagnose._head(diagnose.call_site(), "uses it")
        raise EscapedTracerError(
            f"a value traced by lf.{transform} was used after lf.{transform} returned"
            f"{' (' + head + ', in the operation ' + repr(what) + ')' if head else ' (in ' + repr(what) + ')'}: "
            "it escaped, e.g. through a global variable or a captured list. Return "
            "everything you need from the transformed function instead; with grad, vjp, "
            "jacrev or jacfwd, return extra outputs with has_aux=True."
        )

    def process(self, prim: Primitive, args: Sequence[Any],
                params: dict[str, Any]) -> Any:  # pragma: no cover - every level overrides
        raise NotImplementedError

    def same_values(self, a: Traced, b: Traced) -> bool:
        """Whether two tracers of this (abstract) level hold the same values by construction,
        whatever the values (one recorded array and its copies); only ``a is b`` here."""
        return a is b

    def process_custom_jvp(self, fun: Callable[[list[Any]], Any], rule: Callable[..., Any], arrays: list[Any]) -> Any:
        """A call of a function with a custom JVP rule (see :func:`bind_custom_jvp`); a
        level that does not differentiate just runs the function."""
        return fun(arrays)

    def process_custom_vjp(self, fun: Callable[[list[Any]], Any], fwd: Callable[..., Any], bwd: Callable[..., Any],
                           arrays: list[Any], name: str) -> Any:
        """A call of a function with custom forward/backward rules (:func:`bind_custom_vjp`)."""
        return fun(arrays)

    def process_per_example(self, fun: Callable[[list[Any]], list[Any]], arrays: list[Any]) -> list[Any]:
        """A call of a function run once per example (see :func:`bind_per_example`); a
        level that neither maps nor differentiates just runs it."""
        return fun(arrays)

    def process_checkpoint(self, fun: Callable[[list[Any]], list[Any]], arrays: list[Any]) -> list[Any]:
        """A call of a checkpointed function (see :func:`bind_checkpoint`); a level that
        keeps nothing for a backward pass (vmap, jvp, jit) just runs it, traced."""
        return fun(arrays)

    # --- control flow ---------------------------------------------------------------------------
    # ``lf.cond`` and ``lf.scan`` never reach a level: a predicate that is known runs Python
    # control flow, a mapped or recorded one runs both branches and selects with ``where``
    # (a primitive every level answers), and a scan is a Python loop of traced steps.  A
    # ``lf.while_loop`` whose condition is not known (an abstract level traces it: lf.jit)
    # goes to that level's ``process_while_loop``; the levels above it describe their tracers
    # in the loop's state with ``loop_spec`` / ``loop_build`` / ``loop_widen`` / ``loop_strip``.
    def process_while_loop(self, cond: Callable[[Any], Any], body: Callable[[Any], Any], init: Any) -> Any:
        """The loop ``while cond(state): state = body(state)`` over a condition this level
        traces without knowing its values (see ``engine.compiler.loops.record_while_loop``
        for the arguments).  Only an abstract level that records (lf.jit) can answer; the
        default raises, naming the transform."""
        transform = self.label or self.name
        raise UnsupportedOperationError(
            f"lf.while_loop: its condition is traced by lf.{transform}, which cannot run a loop whose "
            "number of iterations depends on values it does not know")

    def loop_spec(self, tracer: Traced, spec_of: Callable[[Any], Any]) -> tuple[Any, ...]:
        """The structure of ``tracer`` (one of this level's) in the state of a loop that a level
        below records: ``(self, part, ...)``, each part ``spec_of(value)`` of a value the tracer
        holds (in the order ``loop_build`` reads them), or None where it holds none.  The
        default raises: the level's tracers cannot be carried through a recorded loop."""
        raise UnsupportedOperationError(
            f"lf.while_loop under lf.jit: its state is traced by lf.{self.label or self.name}, which lf.jit "
            "cannot record a loop of")

    def loop_build(self, spec: tuple[Any, ...], build: Callable[[Any], Any]) -> Traced:
        """The tracer of ``spec`` (from ``loop_spec``), its parts ``build(part)`` (None stays None)."""
        raise NotImplementedError  # pragma: no cover - levels that describe loop state override

    def loop_widen(self, value: Any, spec: tuple[Any, ...], widen: Callable[..., Any]) -> Traced:
        """``value`` as a tracer of ``spec`` (this level's, a wider spec than its own): the
        parts it lacks made up (broadcast, zeros), each part ``widen(part value, part spec)``."""
        raise NotImplementedError  # pragma: no cover - levels that describe loop state override

    def loop_strip(self, tracer: Traced) -> Any:
        """``tracer`` without this level, where the level carries nothing for it (a jvp level
        without a tangent), else None: a loop state whose spec lacks the level drops it."""
        return None


@contextmanager
def active(level: Level) -> Iterator[Level]:
    """Push ``level`` for the duration of the block; it dies when the block ends."""
    stack = _STACK.get()
    level.depth = len(stack) + 1
    token = _STACK.set(stack + (level,))
    try:
        yield level
    except ValueError as error:
        # `plain[i] = traced`: NumPy turns the policy error the tracer raised while
        # converting the value into "ValueError: setting an array element with a
        # sequence"; give the policy error back, with the traceback to the user's line
        policy = diagnose.unwrap_conversion_error(error)
        if policy is not None:
            raise policy.with_traceback(error.__traceback__) from None
        raise
    finally:
        level.alive = False
        _STACK.reset(token)


def recorded_equal(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` hold the same values by construction: the same array, or at an
    abstract level (lf.jit's recording, whose values stand for every later call's) copies of
    one recorded array, under the same tracers of the levels above it."""
    while a is not b:
        if not (isinstance(a, Traced) and isinstance(b, Traced)) or a._level is not b._level:
            return False
        if a._level.abstract:
            return a._level.same_values(a, b)
        a, b = a._value, b._value
    return True


def current_levels() -> tuple[Level, ...]:
    """The active levels, outermost first."""
    return _STACK.get()


def is_traced(value: Any) -> bool:
    """Whether ``value`` is traced by any level (a tracer, as xarray holds it)."""
    return isinstance(value, Traced)


def level_of(value: Any) -> Level | None:
    """The level that traces ``value`` itself (the outermost of its tower), or None."""
    return value._level if isinstance(value, Traced) else None


def held(tracer: Traced) -> tuple[Any, Any]:
    """What ``tracer`` holds now, to compare by identity later (was it written?): the value
    below its level, and lf.jit's slot where it has one."""
    return tracer._value, getattr(tracer, "_slot", None)


def traced_by(value: Any, level: Level) -> bool:
    """Whether ``value`` is a tracer of ``level`` itself (not of a level below or above)."""
    return isinstance(value, Traced) and value._level is level


def is_batched(value: Any) -> bool:
    """True if ``value`` is mapped by any vmap level (at any nesting depth)."""
    while isinstance(value, Traced):
        if value._level.batches:
            return True
        value = value._value
    return False


# --- structure made concrete under lf.jit ----------------------------------------------------------
# lf.jit records on values: a value computed only from integer, boolean, string or date
# arguments (group labels, codes, masks) is structure, and where a library needs it as NumPy
# values (pandas.unique, an `if` on whether labels are sorted, np.bincount's length) lf.jit
# gives them, guarded (see JitLevel.made_concrete).  Our own code that probes whether a value
# can be read (labels carried as data through a program) keeps it traced.
_KEEP_TRACED: ContextVar[bool] = ContextVar("labeled_func_keep_traced", default=False)


@contextmanager
def kept_traced() -> Iterator[None]:
    """Inside: no recorded value is made concrete (a conversion raises the policy error)."""
    token = _KEEP_TRACED.set(True)
    try:
        yield
    finally:
        _KEEP_TRACED.reset(token)


def structure_value(value: Any, what: str, how: str | None = None) -> Any:
    """The concrete values of ``value`` where the level that records it (lf.jit) can give
    them for the conversion ``what`` (they are structure: see ``JitLevel.made_concrete``),
    guarded; None otherwise (a mapped value, a float one, or inside :func:`kept_traced`)."""
    if _KEEP_TRACED.get():
        return None
    while isinstance(value, Traced):
        level = value._level
        if level.batches:
            return None
        if level.abstract:
            return level.made_concrete(value, what, how) if level.alive else None
        value = value._value
    return None


# --- in-place updates ---------------------------------------------------------------------------
def inplace_assign(dest: Any, src: Any, operation: Any) -> None:
    """Write ``src`` into ``dest`` as ``dest[...] = src`` would, level by level.

    A value traced at a level where ``dest`` is not traced cannot go in: that is
    the in-place policy (a mapped value into an unmapped array).
    """
    top = top_level((dest, src), operation)
    if top is None:
        dest[...] = src
        return
    if not traced_by(dest, top):
        transform = top.label or top.name
        if top.batches:
            why = (f"a value mapped by lf.{transform} (one per example) cannot be written into an "
                   "array that is not mapped (it holds one example's values: it would need more "
                   "elements than it has)")
            source = "the mapped input"
        elif top.differentiates:
            why = (f"a value traced by lf.{transform} cannot be written into an array that "
                   f"lf.{transform} does not trace: its derivative would be lost")
            source = "the differentiated input"
        else:  # lf.jit: the write would happen at the trace only
            why = (f"a value traced by lf.{transform} cannot be written into an array that "
                   f"lf.{transform} does not trace: the write would not be recorded, and later "
                   "calls would not make it")
            source = "a traced input"
        raise InplaceError(
            f"{operation}: {why}. Build the buffer from {source} instead, e.g. xr.zeros_like(x) "
            "/ np.zeros_like(x.data), or use an out-of-place operation (y = x + v instead of "
            "x += v)."
        )
    top.assign(dest, src, operation)


# --- functions with custom derivative rules -------------------------------------------------------
def bind_custom_jvp(fun: Callable[[list[Any]], Any], rule: Callable[..., Any], arrays: list[Any]) -> Any:
    """``fun(arrays)`` (a list of arrays in, one array out) at the innermost level among
    ``arrays``, differentiated by ``rule(primals, tangents) -> (out, tangent_out)``
    (``tangent_out`` linear in the tangents; a tangent of None is zero)."""
    level = top_level(arrays, "custom rule")
    if level is None:
        return fun(arrays)
    return level.process_custom_jvp(fun, rule, arrays)


def bind_custom_vjp(fun: Callable[[list[Any]], Any], fwd: Callable[..., Any], bwd: Callable[..., Any],
                    arrays: list[Any], name: str) -> Any:
    """``fun(arrays)`` at the innermost level among ``arrays``, differentiated in reverse
    mode by ``fwd(arrays) -> (out, residuals)`` and ``bwd(residuals, g) -> [cotangent or
    None per array]``; ``residuals`` is a list of values (arrays or anything else) that
    only ``bwd`` reads.  ``name`` names the function in errors."""
    level = top_level(arrays, "custom rule")
    if level is None:
        return fun(arrays)
    return level.process_custom_vjp(fun, fwd, bwd, arrays, name)


# --- functions run once per example -------------------------------------------------------------
def bind_per_example(fun: Callable[[list[Any]], list[Any]], arrays: list[Any]) -> list[Any]:
    """``fun(arrays)`` (a list of arrays in, a list of arrays out) for a function that cannot
    be traced over a batch: a Python loop that tests values (what ``np.vectorize`` runs).

    Each vmap level among ``arrays`` runs it once per example and stacks the results; a
    differentiating level runs it under a private level of its own kind, once per example of
    the levels below (forward mode carries the tangents through; reverse mode records one
    node whose pullback runs it again, per example, under a private reverse level).  So
    ``fun`` only ever sees one example, traced by derivative levels at most, whose values
    ``bool()`` and ``float()`` may read.
    """
    level = top_level(arrays, "per-example call")
    if level is None:
        return fun(arrays)
    return level.process_per_example(fun, arrays)


# --- checkpointed functions ------------------------------------------------------------------------
def bind_checkpoint(fun: Callable[[list[Any]], list[Any]], arrays: list[Any]) -> list[Any]:
    """``fun(arrays)`` (a list of arrays in, a list of arrays out), whose intermediate values
    a reverse level does not keep: it runs ``fun`` again on the backward pass.

    Handed to the innermost active level (not the innermost among ``arrays``): ``fun`` may
    read values it closes over, and those are traced by active levels only.
    """
    top_level(arrays, "checkpoint")  # the escape check
    levels = _STACK.get()
    if not levels:
        return fun(arrays)
    return levels[-1].process_checkpoint(fun, arrays)
