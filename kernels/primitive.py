"""Primitives: what one operation computes and how it batches.

A :class:`Primitive` carries everything about one operation: ``impl`` computes it on
concrete arrays, ``batch`` vectorises it over a leading batch axis, and the ``jvp``
and ``vjp`` slots hold its derivative rules.  :func:`bind` is the only way an
operation is applied: it hands the primitive to the highest transform level among
the arguments (:func:`top_level`), or runs ``impl`` when no argument is traced.
Rules are written with ``bind`` themselves, so that transforms compose.
"""
from __future__ import annotations

__all__ = ["Primitive", "Traced", "bind", "bottom", "differentiated", "known", "top_level"]


class Traced:
    """Base class of the values a transform level traces.

    The engine subclasses it; kernels only need two things of an instance: its
    ``_level`` (with ``depth``, ``alive``, ``differentiates``, ``abstract``,
    ``process(prim, args, params)`` and ``escaped(operation)``) and its ``_value`` (the
    value one level down).
    """

    __slots__ = ()


def bottom(value):
    """The concrete value under every transform level (all examples of every vmap, the
    primal under AD); ``value`` itself when it is not traced."""
    while isinstance(value, Traced):
        value = value._value
    return value


def known(value):
    """Whether the concrete values under ``value`` are the ones being computed: False under
    an abstract level (jit records a program for the values of later calls), where a
    kernel must not be chosen by peeking at them."""
    while isinstance(value, Traced):
        if value._level.abstract:
            return False
        value = value._value
    return True


def differentiated(values):
    """Whether a differentiating level (jvp, grad) traces any of ``values``, at any depth."""
    for value in values:
        while isinstance(value, Traced):
            if value._level.differentiates:
                return True
            value = value._value
    return False


class Primitive:
    """One operation: its impl, batch rule and derivative rules.

    ``batch(axis_size, values, batched, **params)`` receives the argument values with
    the batch axis physically at 0 where ``batched[i]`` is true and returns
    ``(out, out_batched)``.  A primitive without a batch rule cannot be vmapped;
    ``dynamic_shape`` marks those whose output shape depends on the data.

    ``jvp(primals, tangents, **params)`` returns ``(out, out_tangent)``; a tangent of
    ``None`` is zero, in and out.  ``vjp(cotangent, primals, out, **params)`` returns one
    cotangent per primal (``None`` for zero, or for an argument that is not an array).
    Both are written with ``bind`` so that they are traceable themselves.
    ``differentiable=False`` marks outputs that carry no derivative (comparisons,
    ``isnan``, ``argmax``, ``floor``...): their tangents and cotangents are zero.
    ``traced_constant=True`` (the ``*_like`` constructors) keeps such an output traced
    at a differentiating level, with a zero derivative, so that writing traced values
    into it in place works.

    ``keeps(count, traced) -> (positions, out)``, where set, says which values the VJP
    reads, given the number of arguments and the positions of those that receive a
    cotangent: the argument positions and whether the output.  A reverse-mode tape keeps
    only those; the others are stand-ins of the same shape and dtype that hold no memory
    (a linear rule reads shapes only).  None: the VJP may read every value.

    A ``vjp`` may carry ``vjp.wanted(cotangent, primals, out, wanted, **params)``: the same
    rule computing the cotangents of the positions in ``wanted`` only (None for the others).
    A tape knows which arguments were traced, and a product with an untraced array then
    skips the cotangent nobody reads.  (An attribute of the rule, so that replacing
    ``vjp`` drops it.)  A ``vjp.signed`` takes the same arguments and may also receive a
    :class:`core.Negated` cotangent and return them: the rules of a difference and of the
    linear operations that only move elements (a reverse pass then subtracts ``-g``
    instead of computing it; see :class:`core.Negated`).
    """

    __slots__ = ("name", "impl", "batch", "jvp", "vjp", "dynamic_shape", "differentiable",
                 "traced_constant", "keeps")

    def __init__(self, name, impl, batch=None, jvp=None, vjp=None, *, dynamic_shape=False,
                 differentiable=True, traced_constant=False):
        self.name = name
        self.impl = impl
        self.batch = batch
        self.jvp = jvp
        self.vjp = vjp
        self.dynamic_shape = dynamic_shape
        self.differentiable = differentiable
        self.traced_constant = traced_constant
        self.keeps = None

    def bind(self, *args, **params):
        return bind(self, args, params)

    __call__ = bind

    def __repr__(self):
        return f"Primitive({self.name!r})"


def top_level(values, operation):
    """The innermost (deepest) level among the traced ``values``, or None.

    Every value is checked for escape: a tracer whose level has returned raises through
    its level's ``escaped(operation)``, whichever argument it is.
    """
    top = None
    for value in values:
        if isinstance(value, Traced):
            level = value._level
            if not level.alive:
                level.escaped(operation)
            if top is None or level.depth > top.depth:
                top = level
    return top


def bind(prim, args, params):
    """Apply ``prim`` to ``args``: at the highest level among them, or concretely."""
    top = top_level(args, prim)
    if top is None:
        out = prim.impl(*args, **params)
        if getattr(out, "ndim", None) == 0 and args and all(type(a) in _PYTHON_SCALARS for a in args):
            # Python numbers in, a Python number out: a NumPy float64 scalar (a rule's
            # 1.0 / 3.0) would promote float32 arrays, a Python float does not (NEP 50).
            return out.item()
        return out
    return top.process(prim, args, params)


_PYTHON_SCALARS = (int, float, complex, bool)
