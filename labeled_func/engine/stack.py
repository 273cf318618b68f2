"""The active transforms, one level each, in a ContextVar.

Dask's threaded scheduler runs blocks in parallel threads (each with a copy of the
context), so the stack is per task, never a module global.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar

from .errors import EscapedTracerError, InplaceError

__all__ = ["Level", "active", "current_levels"]

_STACK: ContextVar[tuple] = ContextVar("labeled_func_transform_stack", default=())


class Level:
    """One active transform.  ``depth`` orders nesting; ``alive`` turns off on exit."""

    name = "transform"
    __slots__ = ("depth", "alive", "label", "__weakref__")

    def __init__(self):
        self.depth = 0
        self.alive = True
        self.label = None  # the public transform that made the level (jacrev, hessian, ...)

    def escaped(self, operation):
        from . import diagnose

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

    def process(self, prim, args, params):  # pragma: no cover - every level overrides
        raise NotImplementedError


@contextmanager
def active(level):
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
        from . import diagnose

        policy = diagnose.unwrap_conversion_error(error)
        if policy is not None:
            raise policy.with_traceback(error.__traceback__) from None
        raise
    finally:
        level.alive = False
        _STACK.reset(token)


def current_levels():
    """The active levels, outermost first."""
    return _STACK.get()
