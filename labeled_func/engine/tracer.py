"""Tracer: the duck array xarray holds inside a transform.

It answers what xarray asks of a duck array (shape, dtype, NEP-13/NEP-18, transpose,
astype, round, indexing, deepcopy, an inline repr) and turns every operation into a
primitive bound at its level.  Conversions to concrete values (``__array__``,
``__bool__``, ``float``, ``item``...) are the level's policy: ``_concrete(what)``.
"""
from __future__ import annotations

import math
import operator
import sys
from collections.abc import Sequence
from typing import Any, NamedTuple, NoReturn

import numpy as np

from labeled_func_kernels import core as kcore
from labeled_func_kernels import creation as kc
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import linalg as kl
from labeled_func_kernels.backend import (backend_of, device_of, dtype_kind, is_integer_dtype, namespace, namespace_dtype,
                                          numpy_namespace)
from labeled_func_kernels.primitive import Traced, bottom, top_level

from . import diagnose
from .errors import (ConversionError, DataDependentControlFlowError, DynamicShapeError, InplaceError, ItemError,
                     UnsupportedOperationError)
from .numpy import DEFERRING_TYPES, dispatch_function, dispatch_ufunc, getitem, setitem
from .numpy.elementwise import bitwise_and, bitwise_or, bitwise_xor, divmod_pair
from .stack import inplace_assign, traced_by
from .views import refresh_view

__all__ = ["Tracer", "FlatIter", "PrimalTracer", "primal_of", "integral", "Wording", "unknown_value_policy"]


class Tracer(Traced):
    """Base of every traced value; subclasses set ``shape`` and ``_concrete``."""

    __slots__ = ("_level", "_value", "_shape")  # _shape: set once (a value keeps its shape)
    __array_priority__ = 1000
    __hash__ = None

    # --- what the value looks like ----------------------------------------------------
    @property
    def dtype(self) -> Any:
        return self._value.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype).itemsize if isinstance(self.dtype, np.dtype) else 8

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    @property
    def real(self) -> Any:
        if dtype_kind(self.dtype) == "c":
            return ew.real.bind(self)
        return self

    @property
    def imag(self) -> Any:
        if dtype_kind(self.dtype) == "c":
            return ew.imag.bind(self)
        # side-effect free: a read-only zero of the logical shape in the value's library,
        # not recorded anywhere
        xp = self._namespace()
        if xp is numpy_namespace:
            return np.broadcast_to(np.zeros((), dtype=self.dtype), self.shape)
        return xp.broadcast_to(xp.zeros((), dtype=self.dtype, device=self._device()), self.shape)

    @real.setter
    def real(self, value: Any) -> None:
        """``x.real = v``, as NumPy: the real part written, the imaginary part kept (flox's grouped
        quantile writes its labels so); a real ``x`` is written whole.  The new value is built as
        ``v + 1j * x.imag``, whose real part is ``v`` but for the sign of a zero ``v``."""
        self[...] = value + 1j * self.imag if dtype_kind(self.dtype) == "c" else value

    @imag.setter
    def imag(self, value: Any) -> None:
        """``x.imag = v`` of a complex ``x``, as NumPy; NumPy refuses it for a real array."""
        if dtype_kind(self.dtype) != "c":
            raise TypeError("array does not have imaginary part to set")
        self[...] = self.real + 1j * value

    @property
    def T(self) -> Any:
        return kcore.transpose.bind(self, axes=tuple(reversed(range(self.ndim))))

    @property
    def mT(self) -> Any:
        order = list(range(self.ndim))
        order[-2:] = order[-1], order[-2]
        return kcore.transpose.bind(self, axes=tuple(order))

    def __len__(self):
        if not self.shape:
            # NumPy asks len() first when a 0-d value is stored into one element
            if diagnose.storing(sys._getframe(1)):
                self._concrete("setitem")
            raise TypeError("len() of a 0-d traced array")
        return self.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def _namespace(self):
        return namespace(self._value)

    def _device(self):
        return device_of(self._value)

    # --- NumPy protocols ------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return dispatch_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return dispatch_function(func, types, args, kwargs)

    def __array__(self, dtype=None, copy=None):
        value = self._concrete(diagnose.conversion_kind(sys._getframe(1)))
        if copy:  # np.array(x): NumPy leaves the copy to us
            return np.array(value, dtype=dtype, copy=True)
        return np.asarray(value, dtype=dtype)

    def __bool__(self):
        return bool(self._concrete(diagnose.confirmed("bool")))

    # `plain[i] = traced` makes NumPy call float()/int()/complex() on the value: the
    # caller's frame is then at the store, and the value would lose its derivative.
    def __float__(self):
        return float(self._concrete(diagnose.number_kind(sys._getframe(1), "float")))

    def __int__(self):
        return int(self._concrete(diagnose.number_kind(sys._getframe(1), "int")))

    def __complex__(self):
        return complex(self._concrete(diagnose.number_kind(sys._getframe(1), "complex")))

    def __index__(self):
        if dtype_kind(self.dtype) in "fc":  # as NumPy: whatever the transform, before any policy
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        return int(self._concrete(diagnose.confirmed("index")))

    def __round__(self, ndigits=None):
        """``round(x, ndigits)`` as NumPy answers it: a 0-d value stands for a NumPy scalar
        (``round`` gives a Python int, or with ``ndigits`` a 0-d rounded value); NumPy's
        arrays define no ``__round__`` (NumPy 2), so neither does a traced array."""
        if self.ndim and not _NDARRAY_ROUNDS:
            raise TypeError("type numpy.ndarray doesn't define __round__ method; round() works on "
                            "NumPy scalars (0-d values): use np.round(x, decimals) for arrays")
        if ndigits is None and not self.ndim:
            return round(self._concrete("round").item())  # a Python int, as round(np.float64(x))
        return ew.around.bind(self, decimals=0 if ndigits is None else operator.index(ndigits))

    def __contains__(self, value):
        """``value in x``: whether any element equals it (NumPy's ``(x == value).any()``),
        then ``bool`` of that: the control-flow policy of the transform.  A string is in no
        array of numbers (known without looking at the values)."""
        if _never_equal(self, value):
            return False
        return bool(np.any(self == value))

    def __delitem__(self, key):
        raise ValueError("cannot delete array elements")  # NumPy's answer; a tracer's is the same

    def __reduce_ex__(self, protocol):
        _refuse_export(self, "pickle.dumps (ndarray.__reduce_ex__)")

    def __reduce__(self):
        _refuse_export(self, "pickle.dumps (ndarray.__reduce__)")

    def dump(self, file: Any) -> NoReturn:
        _refuse_export(self, "ndarray.dump")

    def dumps(self) -> NoReturn:
        _refuse_export(self, "ndarray.dumps")

    def tobytes(self, order: str = "C") -> NoReturn:
        _refuse_export(self, "ndarray.tobytes")

    def tofile(self, fid: Any, sep: str = "", format: str = "%s") -> NoReturn:
        _refuse_export(self, "ndarray.tofile")

    def item(self, *args: Any) -> Any:
        return self._concrete("item").item(*args)

    def tolist(self) -> Any:
        return self._concrete("tolist").tolist()

    def __format__(self, spec):
        if not spec:
            return str(self)
        return format(self._concrete("format").item(), spec)

    def _repr_inline_(self, max_width):
        text = f"{type(self).__name__}<{self.dtype}, shape={self.shape}>"
        return text if len(text) <= max_width else text[: max(max_width - 3, 0)] + "..."

    # --- indexing ------------------------------------------------------------------------------
    def __getitem__(self, key):
        out = getitem(self, key)
        if _scalar_key(key, self.ndim) and getattr(bottom(self), "ndim", 0) > self.ndim:
            # NumPy returns a scalar (a copy) here; under vmap the batched value below
            # is a view, which an in-place update of the result would write through
            out = kcore.copy.bind(out)
        return out

    def __setitem__(self, key, value):
        setitem(self, key, value)

    # --- methods xarray and users call -------------------------------------------------------------
    def astype(self, dtype: Any, order: str = "K", casting: str = "unsafe", subok: bool = True,
               copy: bool = True) -> Any:
        return ew.astype.bind(self, dtype=dtype)

    def round(self, decimals: int = 0, out: Any = None) -> Any:
        if out is not None:
            return np.round(self, decimals, out=out)
        return ew.around.bind(self, decimals=decimals)

    def transpose(self, *axes: Any) -> Any:
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        if not axes or axes == (None,):
            axes = tuple(reversed(range(self.ndim)))
        return kcore.transpose.bind(self, axes=tuple(a % self.ndim for a in axes))

    def reshape(self, *shape: Any, order: str = "C") -> Any:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return kcore.reshape.bind(self, shape=tuple(shape))

    def copy(self, order: str = "C") -> Any:
        if _dask_frame(sys._getframe(1)):
            # dask.array.from_array copies its input (also with name= given, where it
            # does not tokenize it)
            _refuse_dask(self)
        return kcore.copy.bind(self)

    def __dask_tokenize__(self):
        # Dask names the graph of dask.array.from_array / asarray (and so of da.stack,
        # da.concatenate, x.chunk(), map_blocks...) after its inputs: a traced value is
        # about to go into a Dask graph
        _refuse_dask(self)

    def __copy__(self):
        return kcore.copy.bind(self)

    def __deepcopy__(self, memo=None):
        return kcore.copy.bind(self)

    def ravel(self, order: str = "C") -> Any:
        return kcore.reshape.bind(self, shape=(-1,))

    def flatten(self, order: str = "C") -> Any:
        return kcore.copy.bind(kcore.reshape.bind(self, shape=(-1,)))  # NumPy's flatten always copies

    def squeeze(self, axis: int | Sequence[int] | None = None) -> Any:
        return np.squeeze(self, axis=axis)

    def swapaxes(self, a: int, b: int) -> Any:
        return np.swapaxes(self, a, b)

    def conj(self) -> Any:
        return ew.conj.bind(self) if dtype_kind(self.dtype) == "c" else self

    conjugate = conj

    def dot(self, other: Any) -> Any:
        return np.dot(self, other)

    def clip(self, min: Any = None, max: Any = None) -> Any:
        return np.clip(self, min, max)

    def sum(self, *args: Any, **kwargs: Any) -> Any:
        return np.sum(self, *args, **kwargs)

    def prod(self, *args: Any, **kwargs: Any) -> Any:
        return np.prod(self, *args, **kwargs)

    def mean(self, *args: Any, **kwargs: Any) -> Any:
        return np.mean(self, *args, **kwargs)

    def var(self, *args: Any, **kwargs: Any) -> Any:
        return np.var(self, *args, **kwargs)

    def std(self, *args: Any, **kwargs: Any) -> Any:
        return np.std(self, *args, **kwargs)

    def max(self, *args: Any, **kwargs: Any) -> Any:
        return np.max(self, *args, **kwargs)

    def min(self, *args: Any, **kwargs: Any) -> Any:
        return np.min(self, *args, **kwargs)

    def argmax(self, *args: Any, **kwargs: Any) -> Any:
        return np.argmax(self, *args, **kwargs)

    def argmin(self, *args: Any, **kwargs: Any) -> Any:
        return np.argmin(self, *args, **kwargs)

    def any(self, *args: Any, **kwargs: Any) -> Any:
        return np.any(self, *args, **kwargs)

    def all(self, *args: Any, **kwargs: Any) -> Any:
        return np.all(self, *args, **kwargs)

    def cumsum(self, *args: Any, **kwargs: Any) -> Any:
        return np.cumsum(self, *args, **kwargs)

    def cumprod(self, *args: Any, **kwargs: Any) -> Any:
        return np.cumprod(self, *args, **kwargs)

    def fill(self, value: Any) -> None:
        if not isinstance(value, Traced):
            inplace_assign(self, kc.full_like.bind(self, fill_value=value), "fill")
            return
        # a traced value (a mapped or differentiated scalar): broadcast, so that it keeps
        # its batch and its derivative, and cast as NumPy casts it into the array
        if getattr(value, "ndim", 0):
            if value.size != 1:
                raise ValueError(f"fill: the value must be a scalar (one element), got shape {tuple(value.shape)}")
            value = kcore.reshape.bind(value, shape=())
        if value.dtype != self.dtype:
            value = ew.astype.bind(value, dtype=self.dtype)
        inplace_assign(self, kcore.broadcast_to.bind(value, shape=tuple(self.shape)), "fill")

    def view(self, dtype: Any = None, type: Any = None) -> Any:
        """A new view of the same values (written through, like NumPy's); no reinterpretation."""
        if dtype is not None or type is not None:
            raise UnsupportedOperationError("ndarray.view(dtype/type) reinterprets memory, which a "
                                            "traced array cannot do; use .astype(dtype)")
        return kcore.reshape.bind(self, shape=tuple(self.shape))

    def sort(self, axis: int = -1, kind: str | None = None, order: Any = None) -> None:
        """In place, as ``ndarray.sort``."""
        inplace_assign(self, np.sort(self, axis=axis, kind=kind, order=order), "sort")

    def argsort(self, *args: Any, **kwargs: Any) -> Any:
        return np.argsort(self, *args, **kwargs)

    def diagonal(self, *args: Any, **kwargs: Any) -> Any:
        return np.diagonal(self, *args, **kwargs)

    def trace(self, *args: Any, **kwargs: Any) -> Any:
        return np.trace(self, *args, **kwargs)

    def repeat(self, *args: Any, **kwargs: Any) -> Any:
        return np.repeat(self, *args, **kwargs)

    def take(self, *args: Any, **kwargs: Any) -> Any:
        return np.take(self, *args, **kwargs)

    def searchsorted(self, *args: Any, **kwargs: Any) -> Any:
        return np.searchsorted(self, *args, **kwargs)

    def nonzero(self) -> tuple[Any, ...]:
        return np.nonzero(self)

    def compress(self, *args: Any, **kwargs: Any) -> Any:
        return np.compress(*args[:1], self, *args[1:], **kwargs)

    def choose(self, choices: Any, out: Any = None, mode: str = "raise") -> Any:
        return np.choose(self, choices, out=out, mode=mode)

    def partition(self, kth: Any, axis: int = -1, kind: str = "introselect", order: Any = None) -> None:
        """In place, as ``ndarray.partition``."""
        inplace_assign(self, np.partition(self, kth, axis=axis, kind=kind, order=order), "partition")

    def argpartition(self, kth: Any, axis: int = -1, kind: str = "introselect", order: Any = None) -> Any:
        return np.argpartition(self, kth, axis=axis, kind=kind, order=order)

    def put(self, indices: Any, values: Any, mode: str = "raise") -> None:
        """In place, as ``ndarray.put``: ``x.flat[indices] = values``."""
        np.put(self, indices, values, mode=mode)

    @property
    def flat(self) -> FlatIter:
        """``x.flat``: ``x.flat[i]`` reads ``x.reshape(-1)[i]``; ``x.flat[i] = v`` writes into
        ``x`` with the in-place policy of ``x[...] = v``."""
        return FlatIter(self)

    @property
    def device(self) -> Any:
        return self._device()

    def to_device(self, device: Any, /, *, stream: Any = None) -> Tracer:
        if device == self._device():
            return self
        raise UnsupportedOperationError(
            f"ndarray.to_device({device!r}) of a traced value on {self._device()!r}: moving a value "
            "between devices inside a transform is not supported; move the inputs before the transform.")

    # --- what a traced value cannot do: it has values, not memory ------------------------------------
    def resize(self, *new_shape: Any, refcheck: bool = True) -> NoReturn:
        _refuse_memory(self, "ndarray.resize", "it changes the array's shape in place, and a traced "
                       "value keeps its shape", "Use np.resize(x, shape), which returns a new array.")

    def byteswap(self, inplace: bool = False) -> NoReturn:
        _refuse_memory(self, "ndarray.byteswap", "it reinterprets the bytes of the array's memory",
                       "Byte order is a matter of storage: convert the data before the transform.")

    def getfield(self, dtype: Any, offset: int = 0) -> NoReturn:
        _refuse_memory(self, "ndarray.getfield", "it reinterprets the bytes of the array's memory",
                       "Use .astype(dtype) to convert values.")

    def setfield(self, val: Any, dtype: Any, offset: int = 0) -> NoReturn:
        _refuse_memory(self, "ndarray.setfield", "it writes into the bytes of the array's memory",
                       "Use x[...] = value to write values.")

    def setflags(self, write: Any = None, align: Any = None, uic: Any = None) -> NoReturn:
        _refuse_memory(self, "ndarray.setflags", "a traced value has no memory whose flags it could set",
                       "Leave the flags of the inputs as they are, or set them before the transform.")

    # --- arithmetic: straight to the primitives ------------------------------------------------------
    def __neg__(self):
        return ew.negative.bind(self)

    def __pos__(self):
        return ew.positive.bind(self)

    def __abs__(self):
        return ew.absolute.bind(self)

    def __invert__(self):
        return ew.bitwise_invert.bind(self) if dtype_kind(self.dtype) != "b" else ew.logical_not.bind(self)

    def __matmul__(self, other):
        return _binary(kl.matmul.bind, self, other)

    def __rmatmul__(self, other):
        return _binary(kl.matmul.bind, other, self)

    def __imatmul__(self, other):
        return _inplace(kl.matmul.bind, self, other, "@=")


def _dask_frame(frame):
    return (frame.f_globals.get("__name__") or "").startswith("dask.")


def _refuse_dask(tracer):
    """A Dask array is being built from ``tracer``: refuse at once.  Dask would compute
    with the value later, after its transform returned, so grad would see a constant
    (zero derivative) and vmap a value that escaped."""
    level = tracer._level
    if not level.alive:
        level.escaped("a Dask array")
    transform = level.label or level.name
    lost = ("its derivative would be lost (the derivative would come back as zeros)" if level.differentiates
            else "the value would escape the transform (the result would fail when computed)")
    raise ConversionError(diagnose.explain(
        diagnose.call_site(),
        f"a Dask array cannot be built from a value traced by lf.{transform}: Dask computes "
        f"later, after lf.{transform} has returned, so {lost}.",
        "Inside a transform combine traced values with NumPy or xarray (np.stack, "
        "np.concatenate, xr.concat), and do not .chunk() them; to use Dask, give lf.vmap "
        "Dask-chunked inputs (see docs/dask.md).",
        verb="would put it into a Dask graph",
    ))


def _refuse_export(tracer, operation):
    """Bytes, files and pickles need concrete values: the conversion policy, under every
    transform (as ``np.asarray``: under grad the derivative would be lost)."""
    level = tracer._level
    if not level.alive:
        level.escaped(operation)
    transform = level.label or level.name
    why = ("writing its primal out would drop its derivative" if level.differentiates
           else "it stands for the values of every later call" if level.abstract
           else "it stands for every example of the batch")
    raise ConversionError(diagnose.explain(
        diagnose.call_site(),
        f"{operation} of a value traced by lf.{transform}: bytes, files and pickles hold concrete "
        f"values, and {why}.",
        "Return the value from the transformed function and write it afterwards.",
        verb="would write it out",
    ))


def _refuse_memory(tracer, operation, why, fix):
    level = tracer._level
    if not level.alive:
        level.escaped(operation)
    raise UnsupportedOperationError(f"{operation} on a value traced by lf.{level.label or level.name}: {why}. {fix}")


def _scalar_key(key, ndim):
    """Whether ``x[key]`` is a NumPy scalar (ints for every axis), not a view."""
    if type(key) is not tuple:
        key = (key,)
    if len(key) != ndim:
        return False
    for k in key:
        if not isinstance(k, _INTS) or isinstance(k, _BOOLS):
            return False
    return True


_INTS = (int, np.integer)
_BOOLS = (bool, np.bool_)


def _deferring(value):
    return type(value) in DEFERRING_TYPES


def _binary(op, a, b):
    other = b if isinstance(a, Tracer) else a
    if _deferring(other):
        return NotImplemented
    if isinstance(other, (list, tuple)):
        other = np.asarray(other)
        a, b = (a, other) if isinstance(a, Tracer) else (other, b)
    return op(a, b)


def _never_equal(tracer, other):
    """A string against numbers: NumPy's ``==`` answers element by element, all False."""
    return isinstance(other, (str, bytes)) and dtype_kind(tracer.dtype) in "biufc"


def _inplace(op, target, other, symbol):
    if _deferring(other):
        return NotImplemented
    result = op(target, other)
    if _np_dtype(result.dtype) != _np_dtype(target.dtype):
        if not np.can_cast(_np_dtype(result.dtype), _np_dtype(target.dtype), "same_kind"):
            raise TypeError(
                f"{symbol}: cannot write the {result.dtype} result into a {target.dtype} array "
                "in place (NumPy's same_kind casting); use an out-of-place operation"
            )
        result = ew.astype.bind(result, dtype=target.dtype)  # NumPy casts it back into the array
    inplace_assign(target, result, symbol)
    return target


def _np_dtype(dtype):
    return np.dtype(getattr(dtype, "_np_dtype", dtype))


def _define_operators():
    table = {
        "add": (ew.add.bind, "+"), "sub": (ew.subtract.bind, "-"), "mul": (ew.multiply.bind, "*"),
        "truediv": (ew.divide.bind, "/"), "floordiv": (ew.floor_divide.bind, "//"),
        "mod": (ew.remainder.bind, "%"), "pow": (ew.power.bind, "**"),
        # logical on booleans, bitwise on integers: NumPy's ufuncs pick as ndarray's do
        "and": (bitwise_and, "&"), "or": (bitwise_or, "|"), "xor": (bitwise_xor, "^"),
        "lshift": (ew.bitwise_left_shift.bind, "<<"), "rshift": (ew.bitwise_right_shift.bind, ">>"),
    }
    for name, (op, symbol) in table.items():
        def forward(self, other, op=op):
            return _binary(op, self, other)

        def reflected(self, other, op=op):
            return _binary(op, other, self)

        def inplace(self, other, op=op, symbol=symbol + "="):
            return _inplace(op, self, other, symbol)

        setattr(Tracer, f"__{name}__", forward)
        setattr(Tracer, f"__r{name}__", reflected)
        setattr(Tracer, f"__i{name}__", inplace)

    for name, prim in {"eq": ew.equal, "ne": ew.not_equal, "lt": ew.less, "le": ew.less_equal,
                       "gt": ew.greater, "ge": ew.greater_equal}.items():
        def compare(self, other, op=prim.bind, name=name):
            if name in ("eq", "ne") and _never_equal(self, other):  # as ndarray: all False (==), all True (!=)
                return kc.full_like.bind(self, fill_value=name == "ne",
                                         dtype=namespace_dtype(self._namespace(), np.dtype(np.bool_)))
            return _binary(op, self, other)

        setattr(Tracer, f"__{name}__", compare)

    # divmod(x, y): a pair, and no in-place form
    Tracer.__divmod__ = lambda self, other: _binary(divmod_pair, self, other)
    Tracer.__rdivmod__ = lambda self, other: _binary(divmod_pair, other, self)


_define_operators()
_NDARRAY_ROUNDS = hasattr(np.ndarray, "__round__")  # NumPy 1.x arrays had round(); NumPy 2's do not


class FlatIter:
    """``x.flat`` of a traced ``x`` (NumPy's ``flatiter``): reads are ``x.reshape(-1)[key]``
    (copies, as NumPy's); ``x.flat[key] = v`` writes into ``x`` as ``x[...] = v`` does (its
    in-place policy), repeating ``v`` to fill the selection as NumPy does."""

    __slots__ = ("base",)

    def __init__(self, base):
        self.base = base

    def __len__(self):
        return self.base.size

    def __iter__(self):
        flat = self[:]
        for i in range(len(self)):
            yield flat[i]

    def __getitem__(self, key):
        return kcore.copy.bind(getitem(kcore.reshape.bind(self.base, shape=(-1,)), key))

    def __setitem__(self, key, value):
        base, operation = self.base, "x.flat[...] = value"
        top = top_level((base, value), operation)
        if top is not None and not traced_by(base, top):
            inplace_assign(base, value, operation)  # the in-place policy's error, naming x.flat
        flat = kcore.copy.bind(kcore.reshape.bind(base, shape=(-1,)))
        selection = tuple(getitem(flat, key).shape)
        count = math.prod(selection)
        if getattr(value, "ndim", np.ndim(value)) and np.size(value) != count:
            value = np.resize(value, count)  # NumPy repeats the values over the selection
        if getattr(value, "ndim", np.ndim(value)):
            value = np.reshape(value, selection)
        setitem(flat, key, value)
        inplace_assign(base, kcore.reshape.bind(flat, shape=tuple(base.shape)), operation)

    def copy(self) -> Any:
        return self.base.flatten()

    def __array__(self, dtype=None, copy=None):
        return self.base._concrete("array")

    def __repr__(self):
        return f"flat({self.base!r})"


def integral(value: Any) -> bool:
    """Integer or boolean values: outputs of an AD level that carry no derivative."""
    dtype = getattr(value, "dtype", None)
    return dtype is not None and is_integer_dtype(dtype)


def stays_traced(value: Any) -> bool:
    """Whether an output without a derivative stays a tracer (without one) rather than the
    raw array: for libraries whose own functions refuse tracers (CuPy, array_api_strict).
    A raw CuPy array beside a tracer would make xarray pick CuPy's namespace, or NumPy
    hand the call to CuPy's ``__array_function__``; NumPy and Dask arrays defer to tracers."""
    return not backend_of(value).defers_to_tracers


class PrimalTracer(Tracer):
    """Base of the differentiating tracers: ``_value`` is the primal, of the same shape.

    ``_view`` is None, or the :class:`View` that says how this tracer regenerates from
    the tracer it views (its base); ``_cell`` is None, or the version counter shared
    with the views taken of this tracer.  Subclasses set both in ``__init__``.
    """

    __slots__ = ("_view", "_cell")

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    def _concrete(self, what):
        return concrete_policy(self, what)


def primal_of(value: Any, level: Any) -> Any:
    """The primal of ``value`` at the differentiating ``level`` (``value`` itself where
    ``level`` does not trace it); a view whose base was written since is regenerated."""
    if isinstance(value, PrimalTracer) and value._level is level:
        return refresh_view(value)._value
    return value


class Wording(NamedTuple):
    """What the policy errors of a level whose values stand for many values say (one per
    example under vmap, one per later call under jit)."""

    transform: str
    setitem: str
    bool: str
    index: str
    item: str


def unknown_value_policy(tracer: Tracer, what: str, words: Wording) -> NoReturn:
    """``tracer``'s concrete value, which a level of many values cannot give: the policy
    error of the conversion ``what``, raised deep inside xarray/NumPy/SciPy as often as
    in user code, so it says where."""
    if not tracer._level.alive:
        tracer._level.escaped(what)
    if what == "mask":  # pandas.isna of a mapped or recorded value: as np.asarray
        what = "array"
    site = diagnose.call_site()
    if what == "setitem":
        where = f" at {site.location}" if site.location else ""
        raise InplaceError(_led_by_library(site, words.setitem.format(store=diagnose.store_description(),
                                                                      where=where)))
    if what == "bool":
        raise DataDependentControlFlowError(diagnose.control_flow_message(
            site, words.bool,
            "Use xr.where / np.where to select, lf.cond for branches or lf.while_loop for loops.",
        ))
    if what in ("index", "array"):
        # a boolean used as an index is a mask: its selection has no fixed size
        mask = dtype_kind(tracer.dtype) == "b" and (what == "index" or diagnose.is_indexing(site))
        dynamic = diagnose.dynamic_shape_message(site, "boolean-mask indexing x[mask]" if mask else None,
                                                 words.transform)
        if dynamic is not None:
            raise DynamicShapeError(dynamic)
    if what == "index":
        raise ConversionError(diagnose.conversion_message(
            site, words.index,
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
        site, words.item.format(what=what),
        "Keep it as an array (a 0-d DataArray works in arithmetic), or return it.",
    ))


def _led_by_library(site, message):
    """``message`` of a store into a plain array, led by the library call that made it (a
    writer such as ``DataArray.to_netcdf``) where the user did not write the store."""
    if site.user_wrote_it:
        return message
    return f"{diagnose._head(site, 'stores values into plain NumPy arrays')}: {message}"


def concrete_policy(tracer: Tracer, what: str) -> Any:
    """The concrete value of an AD tracer: its primal, as torch.func allows.

    ``bool``, ``float``, ``item``... work on the primal (unless a vmap below makes
    them impossible); ``np.asarray`` and writing into a plain array stay errors.
    """
    level = tracer._level
    if not level.alive:
        level.escaped(what)
    if tracer._view is not None:
        refresh_view(tracer)
    if what == "mask":  # pandas.isna: a boolean mask of the values, which has no derivative to drop
        primal = tracer._value
        return primal._concrete(what) if isinstance(primal, Tracer) else primal
    if what == "array":
        raise ConversionError(diagnose.conversion_message(
            diagnose.call_site(),
            f"converting a value traced by {level.name} to a concrete array (.values, "
            "np.asarray, .to_numpy()) would drop its derivative.",
            "Keep working with the DataArray (or its .data) and NumPy functions.",
        ))
    if what == "setitem":
        site = diagnose.call_site()
        where = f" at {site.location}" if site.location else ""
        raise InplaceError(_led_by_library(
            site,
            f"a value traced by {level.name} cannot be written into a plain NumPy array "
            f"({diagnose.store_description()}{where}): NumPy would store its primal value and "
            "its derivative would be lost. Write into a traced buffer instead, made from the "
            "traced input: buf = xr.zeros_like(x) or np.zeros_like(x.data); or collect the "
            "values in a list and combine them with np.stack / xr.concat."
        ))
    primal = tracer._value
    if isinstance(primal, Tracer):
        return primal._concrete(what)
    return primal
