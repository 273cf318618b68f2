"""Primitives: what one operation computes and how it batches.

A :class:`Primitive` carries everything about one operation: ``impl`` computes it on
concrete arrays, ``batch`` vectorises it over a leading batch axis, and the ``jvp``
and ``vjp`` slots hold its derivative rules.  :func:`bind` is the only way an
operation is applied: it hands the primitive to the highest transform level among
the arguments (:func:`top_level`), or runs ``impl`` when no argument is traced.
Rules are written with ``bind`` themselves, so that transforms compose.  What lf.jit's
compiler reads of a primitive (its :class:`Fusion`, ``reads_only``, ``keeps_uniform``) is
declared on it too, never in tables of the compiler's own.
"""
from __future__ import annotations

import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

__all__ = ["Fusion", "Primitive", "Traced", "bind", "bottom", "differentiated", "known", "top_level"]

_COSTS = ("cheap", "heavy")


@dataclass(frozen=True, eq=False)
class Fusion:
    """How a fused elementwise expression spells one primitive (lf.jit's compiler reads it;
    plain strings here: kernels never import numexpr).

    ``numexpr`` and ``cuda``: the primitive as a numexpr expression and as CUDA C (for CuPy's
    ElementwiseKernel: float64, float32 and bool operands, a bool in arithmetic 0 or 1 as in
    NumPy), ``str.format`` templates with one placeholder per operand (``{}`` in order, or
    ``{0}``, ``{1}`` where an operand is named twice).  A primitive with a ``numexpr``
    spelling may join a fused expression, so it has a ``cuda`` one too (a test checks both,
    and that they take the same operands).  Each must compute what NumPy computes, bit for
    bit (``rounds_differently`` says where numexpr's last bit may not).

    ``by_constant``: instead, spellings chosen by a Python-number second operand, keyed by its
    value as a float, naming the first operand only (``x ** 2`` as ``x * x``); numexpr only.

    ``cost``: ``"heavy"`` where one evaluation costs far more than a pass over memory (the
    transcendental functions, and sqrt: numexpr runs them on its threads, so even alone they
    are worth an evaluation); ``"cheap"`` otherwise.  ``rounds_differently``: numexpr's evaluation may
    differ from NumPy's in the last bit (libm's, not NumPy's SIMD loops; sums, products,
    quotients, sqrt, comparisons and selects are correctly rounded or exact in both): fused
    in float64 (the contract's tolerance, docs/jit.md), never in float32 (a float32 result's
    last bit is 6e-8 of it, which a float64 computation reading it would carry far above
    float64's tolerance).  ``logical``: fused only on booleans (NumPy reads numbers as truth
    values; numexpr's ``& | ~`` take booleans only).
    ``boolean_result``: a boolean result computed as NumPy computes it (comparisons,
    logical operations, ``where``); arithmetic whose result is boolean is never fused.

    ``reason``: why a primitive that numexpr or CUDA C could compute is not fused (then
    no spelling): ``Fusion.unfused("...")``.
    """

    numexpr: str | None = None
    cuda: str | None = None
    cost: str = "cheap"
    rounds_differently: bool = False
    logical: bool = False
    boolean_result: bool = False
    by_constant: MappingProxyType | None = None
    reason: str | None = None

    def __post_init__(self):
        if self.cost not in _COSTS:
            raise ValueError(f"Fusion.cost is one of {_COSTS}, not {self.cost!r}")
        if self.by_constant is not None and not isinstance(self.by_constant, MappingProxyType):
            object.__setattr__(self, "by_constant", MappingProxyType(dict(self.by_constant)))
        spelled = self.numexpr is not None or self.cuda is not None or self.by_constant is not None
        if (self.reason is None) == (not spelled):
            raise ValueError("a Fusion has spellings, or a reason and none")
        if self.by_constant is not None and (self.numexpr is not None or self.cuda is not None):
            raise ValueError("a Fusion spelled by_constant has no other spelling")

    @classmethod
    def unfused(cls, reason: str) -> Fusion:
        """The declaration of a primitive that is not fused, and why."""
        return cls(reason=reason)

    @staticmethod
    def operands(template: str) -> set[int]:
        """The operand positions a spelling names (``{}`` counted in order)."""
        used, automatic = set(), 0
        for _, field, _, _ in string.Formatter().parse(template):
            if field is None:
                continue
            if field == "":
                field, automatic = automatic, automatic + 1
            used.add(int(field))
        return used


class Traced:
    """Base class of the values a transform level traces.

    The engine subclasses it; kernels only need two things of an instance: its
    ``_level`` (with ``depth``, ``alive``, ``differentiates``, ``abstract``,
    ``process(prim, args, params)`` and ``escaped(operation)``) and its ``_value`` (the
    value one level down).
    """

    __slots__ = ()


def bottom(value: Any) -> Any:
    """The concrete value under every transform level (all examples of every vmap, the
    primal under AD); ``value`` itself when it is not traced."""
    while isinstance(value, Traced):
        value = value._value
    return value


def known(value: Any) -> bool:
    """Whether the concrete values under ``value`` are the ones being computed: False under
    an abstract level (jit records a program for the values of later calls), where a
    kernel must not be chosen by peeking at them."""
    while isinstance(value, Traced):
        if value._level.abstract:
            return False
        value = value._value
    return True


def differentiated(values: Iterable[Any]) -> bool:
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

    What lf.jit's compiler reads of a primitive (declared here, next to the rules, never in
    the compiler's own tables): ``fusion``, a :class:`Fusion` (its spellings in a fused
    expression, its cost) or None (never fused, and nothing that fuses could compute it);
    ``reads_only=True``: its impl only reads its operands and returns a fresh array, never
    a view of one (lowered to a callable that is no NumPy ufunc, the replay may still hand
    it a buffer through ``out=``); ``keeps_uniform=True``: every element of its result is an
    element of its first operand (a view: reshape, transpose, broadcast), so an operand
    holding one value everywhere gives a result holding that value (False claims nothing);
    ``records``: for an operation that writes into its first operand's buffer (a sum built
    up in a temporary: ``add_inplace``), the primitive computing the same values out of
    place, which lf.jit records instead (it computes in place while tracing; a replay
    passes buffers on by its own plan); None for the others. An impl that takes parameters
    may carry ``impl.numpy_bound(**params)``: the call it makes on a NumPy array with those
    parameters bound (``operator.methodcaller("reshape", shape)``), or None where it makes
    another; a replay of NumPy arrays calls it instead of the impl (the same result,
    without the dispatch: reshape, transpose, astype, getitem by slices, pad).
    """

    __slots__ = ("name", "impl", "batch", "jvp", "vjp", "dynamic_shape", "differentiable",
                 "traced_constant", "keeps", "fusion", "reads_only", "keeps_uniform", "records")

    def __init__(self, name, impl, batch=None, jvp=None, vjp=None, *, dynamic_shape=False,
                 differentiable=True, traced_constant=False, fusion=None, reads_only=False,
                 keeps_uniform=False):
        self.name = name
        self.impl = impl
        self.batch = batch
        self.jvp = jvp
        self.vjp = vjp
        self.dynamic_shape = dynamic_shape
        self.differentiable = differentiable
        self.traced_constant = traced_constant
        self.keeps = None
        self.fusion = fusion
        self.reads_only = reads_only
        self.keeps_uniform = keeps_uniform
        self.records = None

    def bind(self, *args: Any, **params: Any) -> Any:
        return bind(self, args, params)

    __call__ = bind

    def __repr__(self):
        return f"Primitive({self.name!r})"


def top_level(values: Iterable[Any], operation: Any) -> Any:
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


def bind(prim: Primitive, args: Sequence[Any], params: Mapping[str, Any]) -> Any:
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
