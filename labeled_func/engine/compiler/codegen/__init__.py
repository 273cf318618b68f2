"""Code generators: what a fused tree of elementwise nodes becomes on one array library.

A :class:`Generator` is a plug-in.  The ``fusion`` capability of an array library's
``Backend`` (``labeled_func_kernels.backend``) names its generator: NumPy's arrays fuse
through ``"numexpr"`` (:mod:`.numexpr`), CuPy's through ``"cuda"`` (:mod:`.cuda`).  The fuse
rewrite (``compiler/fusion.py``) knows no library: it asks the generator of a node's arrays
how to spell each primitive, whether a tree is worth one evaluation, and for the evaluation.

A new backend registers its own::

    from labeled_func.engine.compiler import codegen

    class Mine(codegen.Generator):
        name = "mine"              # the Backend's fusion capability names it
        ...                        # spelling, claims, worth_fusing, compile

    codegen.register(Mine())

Every generator keeps one invariant: its evaluation of an expression computes, bit for bit,
what the nodes it replaces compute node by node (``rounds_as_numpy`` says where a
transcendental function's last bit may differ, and then float32 is not fused).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from labeled_func_kernels.backend import backend_of

from ..expressions import _BOOL, _FLOAT, _SINGLE

_GENERATORS: dict[str, "Generator"] = {}


class Generator:
    """The plug-in of one array library's fused kernels (a subclass fills these in).

    Attributes
    ----------
    name : str
        The name the library's ``Backend.fusion`` capability gives.
    by_constant : bool
        Reads a primitive's spellings by its constant operand (``Fusion.by_constant``:
        ``x ** 2`` as ``x * x``).
    shares_repeated : bool
        An operand its expression names twice may be a subtree (its compiler computes a
        repeated subexpression once); else such an operand stays a leaf.
    reads_shifted : bool
        A roll read only by the tree is read shifted (``replay.Shifted``) and :meth:`shifted`
        wraps the evaluation; else the roll runs as its own node.
    rounds_as_numpy : bool
        Its transcendental functions round as the library's own do (else trees with one
        are fused in float64 only: ``Fusion.rounds_differently``).
    reads_only : bool
        Its evaluation returns a fresh array and takes ``out=`` (a run may pass it a buffer).
    max_leaves : int
        The most operands one expression may read.
    """

    name: str = ""
    by_constant = False
    shares_repeated = False
    reads_shifted = False
    rounds_as_numpy = True
    reads_only = False
    max_leaves = 24

    def available(self) -> bool:
        """Whether its compiler can run here (else programs run unfused)."""
        return True

    def claims(self, value: Any) -> bool:
        """Whether ``value`` (an array of the library whose Backend names this generator) is
        an array its kernels take."""
        return True

    def min_size(self) -> int:
        """Elements of a result below which a node does not fuse."""
        return 0

    def spelling(self, fusion: Any) -> str | None:
        """The primitive's expression in this generator's language (a ``str.format`` template,
        one placeholder per operand), from its ``Fusion`` declaration; None: not spelled."""
        raise NotImplementedError

    def worth_fusing(self, tree: Any) -> bool:
        """Whether ``tree`` (``fusion._Tree``: its ``size`` in nodes, ``heavy``, its root
        node) is faster as one evaluation than node by node."""
        return tree.size > 1

    def compile(self, expression: str, names: Sequence[str], dtypes: Sequence[Any],
                out: np.dtype) -> Callable[..., Any]:
        """The evaluation of ``expression`` over inputs ``names`` of ``dtypes`` into a result
        of dtype ``out``: a callable of the input arrays."""
        raise NotImplementedError

    def shifted(self, evaluate: Callable[..., Any], leaves: Sequence[Any], out: Any, axis: int) -> Callable[..., Any]:
        """``evaluate`` reading its ``Shifted`` leaves shifted along ``axis`` (only where
        ``reads_shifted``)."""
        raise NotImplementedError


class Fused:
    """The primitive of a fused node: one evaluation of ``expression`` by ``generator``
    (what planning reads of it: ``reads_only``; it declares no fusion of its own)."""

    __slots__ = ("generator", "expression", "reads_only")
    fusion = None

    def __init__(self, generator: Generator, expression: str):
        self.generator, self.expression = generator, expression
        self.reads_only = generator.reads_only

    @property
    def name(self) -> str:
        return f"fused[{self.generator.name}]"

    def __repr__(self):
        return f"<{self.name} {self.expression}>"


def register(generator: Generator) -> Generator | None:
    """Make ``generator`` the one of the libraries whose ``Backend.fusion`` is its name;
    returns the generator it replaces (None for none)."""
    previous = _GENERATORS.get(generator.name)
    _GENERATORS[generator.name] = generator
    return previous


def generator_named(name: str | None) -> Generator | None:
    """The registered generator called ``name`` (None for none)."""
    return _GENERATORS.get(name) if name is not None else None


_FUSED_DTYPES = (_FLOAT, _SINGLE, _BOOL)


def generator_of(value: Any) -> Generator | None:
    """The generator whose kernels take ``value``: an array of float64, float32 or bool of
    a library whose Backend names a registered generator that claims it; else None (no
    import of the library)."""
    if type(value) is np.ndarray:  # the common case, without asking the Backend
        generator = _GENERATORS.get("numexpr")
    else:
        if not hasattr(value, "dtype"):
            return None
        generator = generator_named(backend_of(value).fusion)
    if generator is None or value.dtype not in _FUSED_DTYPES or not generator.claims(value):
        return None
    return generator


from . import cuda, numexpr  # noqa: E402  the two built in, registered on import

__all__ = ["Generator", "Fused", "register", "generator_named", "generator_of", "cuda", "numexpr"]
