"""Fusion: which recorded nodes may join a fused expression (:class:`Fusable`, decided at
record time), and ``fuse``, the rewrite that turns each tree of them (intermediates read
once) into one evaluation where that pays.  What an evaluation is belongs to the code
generator of the arrays' library (``codegen``: one numexpr evaluation on NumPy, one CuPy
ElementwiseKernel on CuPy); nothing here names a library."""
from __future__ import annotations

import math
import string
from typing import Any, Sequence

import numpy as np

from ..replay import Shifted
from .codegen import Fused, generator_of
from .expressions import _BOOL, _FLOAT, _SINGLE, fusion_of
from .nodes import Constant, Node


class _Tree:
    """A fusable node with the nodes it absorbs: its expression over its leaves."""

    __slots__ = ("node", "expression", "leaves", "dtypes", "size", "heavy", "children", "own_rolls", "rolled",
                 "axis")

    def __init__(self, node):
        self.node = node
        self.expression = ""
        self.leaves, self.dtypes, self.children = [], [], []
        self.own_rolls, self.rolled = [], []  # rolls read as shifted leaves: its own, and all
        self.axis = None  # the axis of those rolls (one per tree)
        self.size = 1
        self.heavy = fusion_of(node.prim).cost == "heavy"


def _template(node):
    """The expression of a fusable node (placeholders ``{k}`` for its operands) and how many
    times it names each operand, or None: its primitive's spelling (``prim.fusion``)."""
    fusion = fusion_of(node.prim)
    if fusion is None:
        return None
    generator = node.fusable.generator
    if fusion.by_constant is not None:  # power: by its constant exponent
        if not generator.by_constant or type(node.refs[1]) is not Constant:
            return None
        text = fusion.by_constant.get(float(node.refs[1].value))
        return None if text is None else (text, {0: text.count("{0}")})
    text = generator.spelling(fusion)
    if text is None:
        return None
    return _numbered(text)


def _numbered(text):
    """``text`` with every placeholder numbered, and the count of each."""
    parts, used, automatic = [], {}, 0
    for literal, field, _, _ in string.Formatter().parse(text):
        parts.append(literal.replace("{", "{{").replace("}", "}}"))
        if field is None:
            continue
        if field == "":
            field, automatic = automatic, automatic + 1
        index = int(field)
        used[index] = used.get(index, 0) + 1
        parts.append("{%d}" % index)
    return "".join(parts), used


def _retyped(fusable, dtypes):
    """``fusable`` with the dtypes of a rewritten node's operands (None stays None)."""
    if fusable is None or dtypes is None:
        return None
    return Fusable(fusable.generator, tuple(dtypes), fusable.out)


class Fusable:
    """What a node brings to a fused expression: the code generator of its arrays
    (``codegen.Generator``), the dtypes of its inputs and the dtype of its output."""

    __slots__ = ("generator", "dtypes", "out")

    def __init__(self, generator, dtypes, out):
        self.generator, self.dtypes, self.out = generator, dtypes, out


def _fusable(prim: Any, params: dict, values: Sequence[Any], out: Any) -> Fusable | None:
    """A :class:`Fusable` when ``prim`` may join a fused expression: a primitive that a
    fused expression computes as NumPy does (it declares a spelling, ``prim.fusion``), no
    parameters, arrays of one floating precision (float64 or float32) or boolean whose
    library's code generator takes them (``codegen.generator_of``), and Python numbers in
    (of the arrays' precision, as NumPy treats them), an array out of the generator's
    ``min_size`` at least (numexpr's ``FUSE_MIN_SIZE``: on the GPU fewer launches pay at
    any size); else None."""
    fusion = fusion_of(prim)
    if params or fusion is None or (fusion.numexpr is None and not (
            fusion.by_constant is not None and type(values[1]) in (int, float)
            and float(values[1]) in fusion.by_constant)):
        return None
    generator = generator_of(out)
    if generator is None or math.prod(out.shape) < generator.min_size():
        return None
    floats = {value.dtype for value in (*values, out) if hasattr(value, "dtype") and value.dtype != _BOOL}
    if len(floats) > 1:
        return None  # mixed precisions: NumPy's promotion is not numexpr's
    number = floats.pop() if floats else _FLOAT
    if fusion.logical and any(value.dtype != _BOOL if hasattr(value, "dtype") else type(value) is not bool
                                for value in values):
        return None  # NumPy reads numbers as truth values; numexpr's & | ~ take booleans only
    if out.dtype == _BOOL and not fusion.boolean_result:
        return None  # arithmetic of booleans (abs(b), b + c: a logical or) stays NumPy's
    if number == _SINGLE and fusion.rounds_differently and not generator.rounds_as_numpy:
        return None  # numexpr's float32 sin, exp... round differently from NumPy's: not fused
    dtypes = []
    for value in values:
        if type(value) is float or type(value) is int:
            dtypes.append(number)
        elif type(value) is bool:
            dtypes.append(_BOOL)
        elif generator_of(value) is generator:
            dtypes.append(value.dtype)
        else:
            return None
    return Fusable(generator, tuple(dtypes), out.dtype)


def _leaf_name(ref, dtype, leaves, dtypes):
    """The placeholder of input ``ref`` in an expression (one per distinct input; a Python
    number is read in the precision its dtype says)."""
    for k, known in enumerate(leaves):
        if known is ref or (type(ref) in (int, Shifted) and type(known) is type(ref) and known == ref):
            return "{%d}" % k
    leaves.append(ref)
    dtypes.append(np.dtype(dtype))
    return "{%d}" % (len(leaves) - 1)


def _rename(expression, leaves, dtypes, inner_leaves, inner_dtypes):
    """An inner tree's expression with its placeholders renumbered among ``leaves``."""
    names = [_leaf_name(ref, np.dtype(dtype), leaves, dtypes) for ref, dtype in zip(inner_leaves, inner_dtypes)]
    return expression.format(*names)


def _named(expression, names):
    return expression.format(*names)


def fuse(program: Any) -> Any:
    """Each tree of fusable nodes whose intermediates are read once (and are no output)
    becomes one evaluation of its arrays' code generator (numexpr on NumPy, an
    ElementwiseKernel on CuPy) at the place of its root, where that pays (the generator's
    ``worth_fusing``); a tree that does not pay is run node by node, its subtrees judged on
    their own. An operand that a primitive's expression names twice (``x * x``, the mask of
    a safe product) stays a leaf unless the generator ``shares_repeated`` subexpressions
    (numexpr would compute its subtree twice; a CUDA C compiler computes it once).

    Invariant: every output keeps its bits (a generator computes each expression as the
    nodes it replaces do); the fused node's primitive is a ``codegen.Fused``."""
    _, readers = program._readers()
    outputs = set(program.outputs)
    trees = {}  # slot of a fusable node -> _Tree
    absorbed = set()
    rolls = {node.slot: node for node in program.nodes
             if hasattr(node.function, "shift") and node.out is not None and node.slot not in outputs}
    for node in program.nodes:
        if node.fusable is None:
            continue
        generator = node.fusable.generator
        if not generator.available():
            continue
        template = _template(node)
        if template is None:
            continue
        expression, used = template
        tree = _Tree(node)
        pieces = []
        for position, (ref, dtype) in enumerate(zip(node.refs, node.fusable.dtypes)):
            count = used.get(position, 0)
            if count == 0:
                pieces.append("")
                continue
            inner = trees.get(ref) if type(ref) is int else None
            if (inner is not None and (count == 1 or generator.shares_repeated)
                    and inner.node.fusable.generator is generator
                    and readers.get(ref) == 1 and ref not in outputs
                    and len(tree.leaves) + len(inner.leaves) + len(node.refs) <= generator.max_leaves
                    and (inner.axis is None or tree.axis in (None, inner.axis))):
                if inner.axis is not None:
                    tree.axis = inner.axis
                absorbed.add(ref)
                tree.children.append(ref)
                pieces.append(_rename(inner.expression, tree.leaves, tree.dtypes, inner.leaves, inner.dtypes))
                tree.size += inner.size
                tree.heavy = tree.heavy or inner.heavy
                tree.rolled.extend(inner.rolled)
            else:
                roll = rolls.get(ref) if type(ref) is int and generator.reads_shifted else None
                if (roll is not None and readers.get(ref) == 1 and roll.out == node.out
                        and tree.axis in (None, roll.function.axis)):
                    # a roll read only here: the evaluation reads its source shifted
                    absorbed.add(ref)
                    tree.own_rolls.append(ref)
                    tree.rolled.append(ref)
                    tree.axis = roll.function.axis
                    ref = Shifted(roll.refs[0], roll.function.axis, roll.function.shift)
                pieces.append(_leaf_name(ref, dtype, tree.leaves, tree.dtypes))
        tree.expression = expression.format(*pieces)
        trees[node.slot] = tree
    # roots, last first: a tree that does not pay gives its subtrees back as roots
    roots = [node.slot for node in reversed(program.nodes) if node.slot in trees and node.slot not in absorbed]
    chosen = set()
    while roots:
        slot = roots.pop()
        tree = trees[slot]
        if tree.node.fusable.generator.worth_fusing(tree):
            chosen.add(slot)
        else:
            absorbed.difference_update(tree.children)
            absorbed.difference_update(tree.own_rolls)  # the rolls run as they were recorded
            roots.extend(tree.children)
    fused = []
    for node in program.nodes:
        if node.slot in absorbed:
            continue
        if node.slot in chosen:
            tree = trees[node.slot]
            names = [f"v{k}" for k in range(len(tree.leaves))]
            expression = _named(tree.expression, names)
            generator = node.fusable.generator
            evaluate = generator.compile(expression, names, tree.dtypes, node.fusable.out)
            if tree.rolled:
                evaluate = generator.shifted(evaluate, tree.leaves, node.out, tree.axis)
            leaves = tuple(leaf.ref if type(leaf) is Shifted else leaf for leaf in tree.leaves)
            replacement = Node(evaluate, {}, leaves, node.slot, Fused(generator, expression))
            replacement.out, replacement.strides = node.out, node.strides  # the layout recorded: a
            replacement.fusable = node.fusable  # C-ordered result takes a buffer (out=) as the node did
            node = replacement
        fused.append(node)
    program.nodes = fused
    return program
