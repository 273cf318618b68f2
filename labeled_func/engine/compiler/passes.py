"""The rewrites ``Program.prune`` runs before a program is laid out for runs: arrays of
ones dropped (``drop_ones``), negations absorbed and divisions by powers of two made
products (``simplify``), sums of products contracted (``contract``), broadcast operands
spread once (``spread``), rolls read as shifted views (``fold_rolls``), cheap residuals
computed again late (``rematerialize``), NaN-safe products' checks shared
(``share_checks``), and strided constants read as contiguous copies
(``contiguous_constants``).  Each keeps every bit but ``contract`` (another order of the sum)."""
from __future__ import annotations

import math

import numpy as np

from labeled_func_kernels import creation as kc
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import shape as kshape
from labeled_func_kernels.backend import reciprocal_power_of_two

from ..replay import Shifted, all_finite, rolled_evaluation, safe_product, safe_product_checked, spread_into
from . import thresholds
from .expressions import spelled
from .fusion import _retyped
from .nodes import Constant, Node
from .planning import _c_ordered, _writes_into, c_strides


_SPREAD_MIN_READERS = 3  # spreading costs about one product: it pays from three readers on

_CHEAP_UFUNCS = frozenset((np.add, np.subtract, np.multiply, np.negative))
_CORRECTLY_ROUNDED = frozenset((np.add, np.subtract, np.multiply, np.true_divide, np.negative))
_REMATERIALIZE_AFTER = 64
"""Nodes between a result's making and a reader of it beyond which ``rematerialize``
computes a cheap result again for that reader."""

_UNIFORM_ARITHMETIC = {ew.multiply: np.multiply, ew.add: np.add, ew.subtract: np.subtract, ew.negative: np.negative}


def drop_ones(program):
    """Arrays known to hold one value everywhere: ``ones_like``/``zeros_like`` of a
    traced template (the seed of a backward pass), their views, and products and sums
    of them with numbers. A product by ones is its other operand, when that has the
    product's shape and dtype and the product is no output (``1 * x`` is ``x``, bit
    for bit; a NaN-safe product with a cotangent of ones never masks), and ``x ** 1``
    is ``x``: of real values only (a complex product adds ``0 * a`` to ``1 * b`` in the
    imaginary part: ``(1 + 0j) * (a - 0j)`` is ``a + 0j``, and NaN where ``a`` is
    infinite). Elsewhere an elementwise operation reads such an array as a scalar of its
    dtype, where another operand gives the result its shape: the same bits (NumPy
    promotes a NumPy scalar as an array), one array less in memory, and a NaN-safe
    product by a finite nonzero scalar is a plain product."""
    layout, strides = program._layouts()
    outputs = set(program.outputs)
    uniform, rename, kept = {}, {}, []
    for node in program.nodes:
        if rename:
            node.refs = tuple(rename.get(ref, ref) if type(ref) is int else ref for ref in node.refs)
        value = _uniform_value(node, uniform)
        if value is not None:
            uniform[node.slot] = value
            kept.append(node)
            continue
        complex_result = node.out is not None and node.out[1].kind == "c"  # (1+0j) * (a - 0j): +0j
        if (node.prim is ew.power and len(node.refs) == 2 and type(node.refs[1]) is Constant
                and type(node.refs[1].value) in (int, float) and node.refs[1].value == 1
                and node.out is not None and node.slot not in outputs and not complex_result
                and _layout_of(node.refs[0], layout) == node.out and strides.get(node.refs[0]) == node.strides):
            rename[node.slot] = node.refs[0]  # x ** 1 is x (the kernel's copy of it)
            continue
        if (node.prim in (ew.multiply, ew.safe_multiply) and len(node.refs) == 2 and node.out is not None
                and node.slot not in outputs and not complex_result):
            sides = (0, 1) if node.prim is ew.multiply else (0,)  # safe_multiply(g, d): g the ones
            found = next((1 - side for side in sides if _is_one(uniform.get(node.refs[side]))
                          and _layout_of(node.refs[1 - side], layout) == node.out
                          and strides.get(node.refs[1 - side]) == node.strides), None)
            if found is not None:
                rename[node.slot] = node.refs[found]
                continue
        if uniform and node.out is not None and spelled(node.prim):  # not power: NumPy's
            # power takes other paths for a scalar exponent
            _read_as_scalars(node, uniform, layout, strides)
        kept.append(node)
    program.nodes = kept
    return program


def simplify(program):
    """Rewrites that save a pass over memory and give the same bits (IEEE rounds
    symmetrically, and defines ``a - b`` as ``a + (-b)``), for negations no other node
    reads: ``a + (-b)`` and ``(-b) + a`` become ``a - b``, ``a - (-b)`` becomes ``a + b``,
    and ``(-x) * y`` becomes ``-(x * y)``, ``roll(-x)`` ``-roll(x)`` (so that a sum reading
    them absorbs the sign). A float divided by a constant power of two (``/ dx`` on a
    grid of 2**-k) is multiplied by its reciprocal."""
    producer, readers = program._readers()
    outputs = set(program.outputs)
    fresh = program._fresh_slot()

    def negation(ref, result=None):
        """The negation node that makes ``ref``, read once, whose sign another node can take:
        an exact negation (of floats), or one in the dtype of the ``result`` that absorbs it
        (integers wrap: -u of a uint8 is 256 - u, -INT_MIN is INT_MIN, so ``y + (-u)`` of a
        float ``y`` is not ``y - u``)."""
        inner = producer.get(ref) if type(ref) is int else None
        if inner is None or inner.function is not np.negative or readers.get(ref) != 1 or ref in outputs:
            return None
        dtype = inner.out[1] if inner.out is not None else (inner.fusable.out if inner.fusable is not None else None)
        if dtype is None or not (np.dtype(dtype).kind in "fc" or (result is not None and result.out is not None
                                                                and np.dtype(dtype) == result.out[1])):
            return None
        return inner

    nodes, dropped = [], set()
    for node in program.nodes:
        if node.function in (np.add, np.subtract, np.multiply) and len(node.refs) == 2:
            sides = (1, 0) if node.function is not np.subtract else (1,)
            for side in sides:
                inner = negation(node.refs[side], node)
                if inner is None or (node.function is np.multiply and (
                        inner.out != node.out or node.out is None or node.out[1].kind == "c")):
                    continue  # a negation of a broadcast operand stays on the smaller array, and a
                    # complex product's sums of two products round zeros to other signs
                other = 1 - side
                refs = (node.refs[other], inner.refs[0]) if node.function is not np.subtract else (
                    node.refs[0], inner.refs[0])
                dtypes = None if node.fusable is None or inner.fusable is None else (
                    node.fusable.dtypes[other if node.function is not np.subtract else 0], inner.fusable.dtypes[0])
                dropped.add(inner.slot)
                if node.function is np.multiply:  # (-x) * y -> -(x * y): the product in a new slot
                    if side == 0:  # the operands in their order: a complex product is not
                        refs, dtypes = refs[::-1], dtypes and dtypes[::-1]  # commutative to the bit
                    product = Node(np.multiply, {}, refs, fresh, ew.multiply)
                    product.out, product.fusable = node.out, _retyped(node.fusable, dtypes)
                    product.strides = node.strides  # the same operands, the same layout
                    fresh += 1
                    nodes.append(product)
                    node.function, node.prim, node.refs = np.negative, ew.negative, (product.slot,)
                    node.fusable = _retyped(node.fusable, (node.fusable.out,) if node.fusable else None)
                    producer[product.slot], readers[product.slot] = product, 1
                else:
                    flipped = np.subtract if node.function is np.add else np.add
                    node.function, node.prim = flipped, (ew.subtract if flipped is np.subtract else ew.add)
                    node.refs, node.fusable = refs, _retyped(node.fusable, dtypes)
                break
        elif (node.function is np.divide and len(node.refs) == 2 and type(node.refs[1]) is Constant
              and node.out is not None and node.out[1].kind == "f"
              and reciprocal_power_of_two(node.refs[1].value, node.out[1]) is not None):
            # x / 2**k is x * 2**-k: the same real number, rounded once (a product is cheaper)
            node.function, node.prim = np.multiply, ew.multiply
            node.refs = (node.refs[0], Constant(reciprocal_power_of_two(node.refs[1].value, node.out[1])))
        elif node.prim is kshape.roll and negation(node.refs[0]) is not None:
            inner = negation(node.refs[0])  # roll(-x) -> -roll(x): the roll in a new slot
            moved = Node(node.function, node.params, (inner.refs[0],), fresh, node.prim)
            moved.out, fresh = node.out, fresh + 1
            nodes.append(moved)
            node.function, node.prim, node.params, node.refs = np.negative, ew.negative, {}, (moved.slot,)
            node.fusable = inner.fusable
            producer[moved.slot], readers[moved.slot] = moved, 1
            dropped.add(inner.slot)
        nodes.append(node)
    if dropped:
        program.nodes = [node for node in nodes if node.slot not in dropped]
    return program


def contract(program):
    """A sum over trailing axes of a product read only there (a parameter's gradient:
    the cotangent times a residual, summed over the cells) is one einsum: the products
    are never stored."""
    layout = program._slot_layouts()
    producer, readers = program._readers()
    outputs = set(program.outputs)
    dropped = set()
    for node in program.nodes:
        contracted = getattr(node.function, "contracted", None)
        ref = node.refs[0] if contracted is not None and len(node.refs) == 1 else None
        product = producer.get(ref) if type(ref) is int else None
        if (product is None or readers.get(ref) != 1 or ref in outputs or product.params
                or not (product.function is np.multiply or product.function is safe_product)
                or product.out is None or product.out[0] != node.function.shape
                or any(_layout_of(r, layout) != product.out for r in product.refs)):
            continue
        node.function = contracted(product.function is safe_product)
        node.refs = product.refs
        dropped.add(product.slot)
    if dropped:
        program.nodes = [node for node in program.nodes if node.slot not in dropped]
    return program


def spread(program):
    """An operand that NumPy broadcasts along an axis in several large ufuncs (a
    per-sample parameter of shape (N, 1) against fields of shape (N, cells), at each
    step of a loop) is spread to the full shape once, before the first of them: NumPy
    loops over a broadcast operand in short inner loops, 2-3 times slower than over
    contiguous ones. The same values meet the same operations: the same bits."""
    layout, strides = program._layouts()
    uses = {}
    for index, node in enumerate(program.nodes):
        function = node.function
        if node.out is None or node.params or not (
                (type(function) is np.ufunc and function.nin == 2 and function.nout == 1)
                or function is safe_product):
            continue
        shape, dtype = node.out
        broadcast = []  # the operands of the result's dtype and ndim, of another shape
        for position, ref in enumerate(node.refs):
            known = layout.get(ref) if type(ref) is int else (
                (ref.value.shape, ref.value.dtype) if type(ref.value) is np.ndarray else None)
            if known is not None and known[0] != shape and known[1] == dtype and len(known[0]) == len(shape):
                broadcast.append((position, ref))
        if (not broadcast or dtype.itemsize * math.prod(shape) < thresholds.POOL_MIN_BYTES
                or not _c_ordered(node.out, node.strides) or not all(
                _c_ordered(layout.get(ref) if type(ref) is int else _layout_of(ref, layout), strides.get(ref))
                for ref in node.refs if (_layout_of(ref, layout) or ((),))[0] == shape)):
            continue  # a C-ordered result of C-ordered operands stays C-ordered once spread
        for position, ref in broadcast:
            uses.setdefault((ref, shape), []).append((index, position))
    spreads = {}  # index of the first reader -> the nodes spreading its operands
    fresh = program._fresh_slot()
    for (ref, shape), readers in uses.items():
        if len(readers) < _SPREAD_MIN_READERS:
            continue
        dtype = program.nodes[readers[0][0]].out[1]
        spread = Node(spread_into(shape, dtype), {}, (ref,), fresh)
        spread.out, fresh = (shape, dtype), fresh + 1
        spread.strides = c_strides(shape, dtype)
        spreads.setdefault(readers[0][0], []).append(spread)
        for index, position in readers:
            node = program.nodes[index]
            node.refs = node.refs[:position] + (spread.slot,) + node.refs[position + 1:]
    if spreads:
        program.nodes = [new for index, node in enumerate(program.nodes) for new in (*spreads.get(index, ()), node)]
    return program


def fold_rolls(program):
    """A roll whose readers are all binary ufuncs over operands of its layout
    (``u - roll(u, 1)``, the cotangents of a stencil added up) is not made: each reader
    reads the roll's source as a shifted flat view, then the wrapped indices again
    (:func:`replay.rolled_evaluation`): one pass over memory instead of two. The same
    values meet the same operation: the same bits."""
    layout, strides = program._layouts()
    outputs = set(program.outputs)
    rolls = {node.slot: node for node in program.nodes
             if hasattr(node.function, "shift") and node.slot not in outputs
             and _c_ordered(node.out, node.strides) and _c_ordered(layout.get(node.refs[0]), strides.get(node.refs[0]))}
    if not rolls:
        return program
    readers_of = {}
    for index, node in enumerate(program.nodes):
        for ref in node.refs:
            if type(ref) is int and ref in rolls:
                readers_of.setdefault(ref, set()).add(index)

    def foldable(index, slot):
        node = program.nodes[index]
        function = node.function
        if not (type(function) is np.ufunc and function.nin == 2 and function.nout == 1 and not node.params
                and node.out == rolls[slot].out and node.strides == rolls[slot].strides):
            return False
        axes = {rolls[ref].function.axis for ref in node.refs if type(ref) is int and ref in rolls}
        return len(axes) == 1 and all(
            (type(ref) is int and ref in rolls) or (
                _layout_of(ref, layout) == node.out and _c_ordered(_layout_of(ref, layout), strides.get(ref)))
            or (type(ref) is Constant and np.ndim(ref.value) == 0)
            for ref in node.refs)

    folded = {slot for slot, indices in readers_of.items() if all(foldable(index, slot) for index in indices)}
    changed = True
    while changed:  # a reader of two rolls folds both or neither
        changed = False
        for slot in list(folded):
            if any(type(ref) is int and ref in rolls and ref not in folded
                   for index in readers_of[slot] for ref in program.nodes[index].refs):
                folded.discard(slot)
                changed = True
    if not folded:
        return program
    for index in sorted({index for slot in folded for index in readers_of[slot]}):
        node = program.nodes[index]
        leaves = [Shifted(rolls[ref].refs[0], rolls[ref].function.axis, rolls[ref].function.shift)
                  if type(ref) is int and ref in folded else ref for ref in node.refs]
        axis = next(leaf.axis for leaf in leaves if type(leaf) is Shifted)
        node.function = rolled_evaluation(node.function, leaves, node.out, axis)
        node.refs = tuple(leaf.ref if type(leaf) is Shifted else leaf for leaf in leaves)
    program.nodes = [node for node in program.nodes if node.slot not in folded]
    return program


def rematerialize(program):
    """A large result of one cheap operation (``u - roll(u, 1)``: a sum, difference,
    product or negation, rolls folded) that is read soon after it is made and again
    much later (a residual of the backward pass) is computed again just before its late
    readers, from operands that are alive then anyway (the state ``u``, itself kept):
    the first result dies early, in a recycled buffer that stays in cache, instead of
    living through the whole forward pass in main memory. The same operation of the
    same values: the same bits, a third less memory for a stencil's residuals, and less
    traffic to and from main memory than the pass it adds."""
    outputs = set(program.outputs)
    readers_at = {}
    for index, node in enumerate(program.nodes):
        for ref in node.refs:
            if type(ref) is int:
                readers_at.setdefault(ref, []).append(index)
    inputs = set(program.inputs)

    def alive_then(ref, index, first_late):
        """Whether operand ``ref`` of node ``index`` is alive anyway at ``first_late``."""
        if type(ref) is not int or ref in inputs:
            return True
        others = [at for at in readers_at[ref] if at != index]
        return bool(others) and max(others) >= first_late

    copies = {}  # index of the first late reader -> the nodes computing again before it
    fresh = program._fresh_slot()
    for index, node in enumerate(program.nodes):
        function = node.function
        cheap = function in _CHEAP_UFUNCS or getattr(function, "ufunc", None) in _CHEAP_UFUNCS
        if not cheap or node.params or node.slot in outputs or _writes_into(node) is None:
            continue
        late = [at for at in readers_at.get(node.slot, ()) if at - index > _REMATERIALIZE_AFTER]
        if not late or len(late) == len(readers_at[node.slot]):
            continue
        first_late = late[0]
        if not all(alive_then(ref, index, first_late) for ref in node.refs):
            continue  # an operand would have to live on for the copy: keep the result
        copy = Node(function, {}, node.refs, fresh, node.prim)
        copy.out, copy.strides, fresh = node.out, node.strides, fresh + 1
        copies.setdefault(first_late, []).append(copy)
        for at in late:
            reader = program.nodes[at]
            reader.refs = tuple(copy.slot if ref == node.slot else ref for ref in reader.refs)
        readers_at[node.slot] = [at for at in readers_at[node.slot] if at not in late]
        for ref in node.refs:  # the copy reads its operands just before its first reader
            if type(ref) is int:
                readers_at[ref].append(first_late - 0.5)
    if copies:
        program.nodes = [new for index, node in enumerate(program.nodes) for new in (*copies.get(index, ()), node)]
    return program


def share_checks(program):
    """NaN-safe products whose partial is one array (a spread parameter read at every
    step) test it for non-finite values once: one node computes the flag, the products
    read it."""
    readers = {}
    for index, node in enumerate(program.nodes):
        if (node.function is safe_product or getattr(node.function, "checks", False)) and len(node.refs) == 2:
            readers.setdefault(node.refs[1], []).append(index)
    checks = {}
    fresh = program._fresh_slot()
    for ref, indices in readers.items():
        if len(indices) < 2:
            continue
        flag = Node(all_finite, {}, (ref,), fresh)
        fresh += 1
        checks[indices[0]] = flag
        for index in indices:
            node = program.nodes[index]
            if node.function is safe_product:
                node.function = safe_product_checked
            node.refs = node.refs + (flag.slot,)
    if checks:
        program.nodes = [new for index, node in enumerate(program.nodes)
                      for new in ((checks[index], node) if index in checks else (node,))]
    return program


def contiguous_constants(nodes):
    """The NumPy constants that the replay reads as C-contiguous copies: strided views in C
    order (a basis cut from an identity, ``eye(n)[:, :-1]``) that only arithmetic ufuncs read
    (``_CORRECTLY_ROUNDED``).  NumPy loops over a view of rows with gaps more slowly
    (measured 2026-12-08: a (100, 99) view of an identity times a vector, 6.5 us; its
    contiguous copy, 4.7 us).  Same bits: those ufuncs round each element's exact result,
    whichever loop (SIMD on contiguous memory, or strided) computes it, and lay their result
    out in the order of their operands' strides, which the view and its copy share.  Other
    ufuncs are left alone: NumPy's SIMD loops of transcendental functions may differ by an
    ulp from their strided loops (an arcsin did)."""
    readers = {}
    for node in nodes:
        for ref in node.refs:
            if type(ref) is Constant and type(ref.value) is np.ndarray:
                readers.setdefault(ref, []).append(node)
    return {ref: np.ascontiguousarray(ref.value) for ref, nodes_of in readers.items()
            if _strided_in_c_order(ref.value) and all(
                type(n.function) is np.ufunc and n.function in _CORRECTLY_ROUNDED and not n.params for n in nodes_of)}


def _strided_in_c_order(value):
    """Whether ``value`` is a view that is not contiguous, whose axes of more than one element
    step forward in C order without overlapping (each stride at least the span of the axes after it)."""
    if value.flags.c_contiguous or not value.size:
        return False
    span = value.itemsize
    for size, stride in zip(reversed(value.shape), reversed(value.strides)):
        if size == 1:
            continue
        if stride < span:
            return False
        span = stride * size
    return True


def _uniform_value(node, uniform):
    """The one value (a NumPy scalar of the array's dtype) of a node's result when every
    element is known to hold it, else None."""
    if node.out is None:
        return None
    dtype = node.out[1]
    if not node.refs and node.prim in (kc.ones_like, kc.zeros_like) and dtype.kind in "fc":
        return dtype.type(1 if node.prim is kc.ones_like else 0)
    if getattr(node.prim, "keeps_uniform", False) and node.refs and type(node.refs[0]) is int:  # a view
        return uniform.get(node.refs[0])
    function = _UNIFORM_ARITHMETIC.get(node.prim)
    if function is None or node.params:
        return None
    operands = []
    for ref in node.refs:
        if type(ref) is int:
            if ref not in uniform:
                return None
            operands.append(uniform[ref])
        elif type(ref.value) in (int, float) or (isinstance(ref.value, np.generic) and ref.value.dtype.kind in "fc"):
            operands.append(ref.value)
        else:
            return None
    if not any(type(ref) is int for ref in node.refs):
        return None
    with np.errstate(all="ignore"):
        value = function(*operands)
    return value if isinstance(value, np.generic) and value.dtype == dtype else None


def _is_one(value):
    return value is not None and value == 1


def _read_as_scalars(node, uniform, layout, strides):
    """An elementwise node reads its operands known to be uniform as NumPy scalars, where
    another operand has the result's shape (the result and those operands C-ordered: so
    is the result then); a NaN-safe product whose cotangent is a finite nonzero scalar, or
    whose partial is a finite scalar, becomes a plain product."""
    for ref in node.refs:
        if type(ref) is int and ref in uniform:
            break
    else:
        return  # nothing to read as a scalar (most nodes)
    shape = node.out[0]
    full = [ref for ref in node.refs if (type(ref) is not int or ref not in uniform)
            and (_layout_of(ref, layout) or ((),))[0] == shape]
    if not full or not _c_ordered(node.out, node.strides) or not all(
            _c_ordered(_layout_of(ref, layout), strides.get(ref)) for ref in full):
        return
    refs = list(node.refs)
    for position, ref in enumerate(refs):
        if type(ref) is int and ref in uniform:
            refs[position] = Constant(uniform[ref])
    if refs == list(node.refs):
        return
    node.refs = tuple(refs)
    if node.prim is ew.safe_multiply:
        g, d = (r.value if type(r) is Constant else None for r in node.refs)
        if (g is not None and np.isfinite(g) and g != 0) or (d is not None and np.isfinite(d)):
            node.prim, node.function = ew.multiply, np.multiply


def _layout_of(ref, layout):
    """(shape, dtype) of a slot or of a NumPy constant, or None."""
    if type(ref) is int:
        return layout.get(ref)
    value = ref.value
    return (value.shape, value.dtype) if type(value) is np.ndarray else None
