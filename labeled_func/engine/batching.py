"""BatchTracer and the vmap level.

A BatchTracer holds its value with the level's batch axis physically first; the
shape it reports excludes that axis.  Values that are not batched at a level are
never wrapped (and never broadcast just to simplify a rule).
"""
from __future__ import annotations

from kernels import shape as ks
from kernels.backend import dtype_kind

from .errors import (ConversionError, DataDependentControlFlowError, DynamicShapeError,
                     InplaceError, ItemError, UnsupportedOperationError)
from . import diagnose
from .stack import Level
from .tracer import Tracer, inplace_assign

__all__ = ["BatchLevel", "BatchTracer", "any_example_true", "batch_value", "is_batched", "unbatch_value"]


class BatchLevel(Level):
    """One vmap: ``axis_size`` examples, and how random draws behave."""

    name = "vmap"
    __slots__ = ("axis_size", "randomness")

    def __init__(self, axis_size, randomness="error"):
        super().__init__()
        self.axis_size = axis_size
        self.randomness = randomness

    def process(self, prim, args, params):
        values = []
        batched = []
        for arg in args:
            if type(arg) is BatchTracer and arg._level is self:
                values.append(arg._value)
                batched.append(True)
            else:
                values.append(arg)
                batched.append(False)
        rule = prim.batch
        if rule is None:
            if prim.dynamic_shape:
                raise DynamicShapeError(f"{prim.name}: its output shape depends on the data; it cannot be vmapped")
            raise UnsupportedOperationError(f"{prim.name} has no batch rule: it cannot be vmapped")
        out, out_batched = rule(self.axis_size, values, tuple(batched), **params)
        return BatchTracer(self, out) if out_batched else out

    def assign(self, dest, src, operation):
        value = src._value if (type(src) is BatchTracer and src._level is self) else src
        target = dest._value
        if isinstance(target, Tracer) or isinstance(value, Tracer):
            inplace_assign(target, value, operation)
            return
        try:
            target[...] = value
        except ValueError:
            # a read-only buffer (a broadcast view): update this tracer functionally
            dest._value = ks.copy.bind(ks.broadcast_to.bind(value, shape=tuple(target.shape)))


class BatchTracer(Tracer):
    """A value batched by one vmap level."""

    __slots__ = ()

    def __init__(self, level, value):
        self._level = level
        self._value = value

    @property
    def shape(self):
        return tuple(self._value.shape[1:])

    def _concrete(self, what):
        if not self._level.alive:
            self._level.escaped(what)
        if what == "setitem":
            raise InplaceError(
                "writing a mapped value into an unmapped array (array[...] = value): it "
                "would need more elements than it has. Build the buffer from the mapped "
                "input, e.g. xr.zeros_like(x) / np.zeros_like(x), or use out-of-place ops."
            )
        # raised deep inside xarray/NumPy/SciPy as often as in user code: say where
        site = diagnose.call_site()
        if what == "bool":
            raise DataDependentControlFlowError(diagnose.control_flow_message(
                site,
                "bool() of a mapped value (an `if`, `while`, `and`/`or` or assert on it): "
                "under vmap each example may take a different branch.",
                "Use xr.where / np.where to select, lf.cond for branches or lf.while_loop for loops.",
            ))
        if what in ("index", "array"):
            # a mapped boolean used as an index is a mask: its selection has no fixed size
            mask = dtype_kind(self.dtype) == "b" and (what == "index" or diagnose.is_indexing(site))
            dynamic = diagnose.dynamic_shape_message(site, "boolean-mask indexing x[mask]" if mask else None)
            if dynamic is not None:
                raise DynamicShapeError(dynamic)
        if what == "index":
            raise ConversionError(diagnose.conversion_message(
                site,
                "indexing an unmapped array, or a dim with an index coordinate, with a "
                "mapped index (array[i], idxmax, x.isel(t=i) with i computed per example): "
                "NumPy and pandas need concrete indices there, and coordinate labels "
                "would differ per example.",
                "For arrays use np.take_along_axis(array, i, axis=...), for labels use "
                "positions (argmax), or drop the index coordinate (x.drop_vars(name)).",
            ))
        if what == "array":
            raise ConversionError(diagnose.conversion_message(
                site,
                "converting a traced value to a concrete array (.values, np.asarray, "
                ".to_numpy(), or a function that calls them) is not possible inside a transform.",
                "Keep working with the DataArray (or its .data) and NumPy functions.",
            ))
        raise ItemError(diagnose.explain(
            site,
            f"{what}() of a mapped value (.item(), float(), int()): inside vmap a "
            "value stands for a whole batch, so it has no single Python number.",
            "Keep it as an array (a 0-d DataArray works in arithmetic), or return it.",
        ))

    def __repr__(self):
        return f"BatchTracer(vmap level {self._level.depth}, batch of {self._level.axis_size}, shape={self.shape}, dtype={self.dtype}):\n{self._value!r}"


def batch_value(level, value, axis=0):
    """``value`` mapped by ``level`` over its positional ``axis``."""
    return BatchTracer(level, ks.move_batch_axis_to_front(value, axis))


def unbatch_value(level, value, axis=0):
    """The array behind ``value`` with ``level``'s batch axis at ``axis`` (broadcast if unmapped)."""
    if type(value) is BatchTracer and value._level is level:
        inner = value._value
    else:
        inner = ks.broadcast_batch(value, level.axis_size)
    if axis:
        inner = ks.moveaxis(inner, 0, axis)
    return inner


def is_batched(value):
    """True if ``value`` is mapped by any vmap level (at any nesting depth)."""
    while isinstance(value, Tracer):
        if isinstance(value, BatchTracer):
            return True
        value = value._value
    return False


def any_example_true(value):
    """Whether any example of a (possibly mapped) boolean value is true: the loop
    condition of ``while_loop`` over all examples of all levels."""
    from kernels.backend import namespace

    while isinstance(value, Tracer):
        value = value._value
    return bool(namespace(value).any(value))
