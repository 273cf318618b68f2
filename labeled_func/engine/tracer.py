"""Tracer: the duck array xarray holds inside a transform.

It answers what xarray asks of a duck array (shape, dtype, NEP-13/NEP-18, transpose,
astype, round, indexing, deepcopy, an inline repr) and turns every operation into a
primitive bound at its level.  Conversions to concrete values (``__array__``,
``__bool__``, ``float``, ``item``...) are the level's policy: ``_concrete(what)``.
"""
from __future__ import annotations

import math
import sys

import numpy as np

from kernels import core as kcore
from kernels import creation as kc
from kernels import elementwise as ew
from kernels import indexing as ki
from kernels import linalg as kl
from kernels import shape as ks
from kernels.backend import device_of, dtype_kind, is_integer_dtype, library_of, namespace, numpy_namespace
from kernels.primitive import Traced, bottom

from . import diagnose
from .errors import ConversionError, InplaceError, UnsupportedOperationError
from .numpy import DEFERRING_TYPES, dispatch_function, dispatch_ufunc, getitem, setitem
from .numpy.elementwise import bitwise_and, bitwise_or, bitwise_xor
from .stack import inplace_assign

__all__ = ["Tracer", "PrimalTracer", "refresh_view", "primal_of", "integral"]


class Tracer(Traced):
    """Base of every traced value; subclasses set ``shape`` and ``_concrete``."""

    __slots__ = ("_level", "_value")
    __array_priority__ = 1000
    __hash__ = None

    # --- what the value looks like ----------------------------------------------------
    @property
    def dtype(self):
        return self._value.dtype

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def itemsize(self):
        return np.dtype(self.dtype).itemsize if isinstance(self.dtype, np.dtype) else 8

    @property
    def nbytes(self):
        return self.size * self.itemsize

    @property
    def real(self):
        if dtype_kind(self.dtype) == "c":
            return ew.real.bind(self)
        return self

    @property
    def imag(self):
        if dtype_kind(self.dtype) == "c":
            return ew.imag.bind(self)
        # side-effect free: a read-only zero of the logical shape in the value's library,
        # not recorded anywhere
        xp = self._namespace()
        if xp is numpy_namespace:
            return np.broadcast_to(np.zeros((), dtype=self.dtype), self.shape)
        return xp.broadcast_to(xp.zeros((), dtype=self.dtype, device=self._device()), self.shape)

    @property
    def T(self):
        return kcore.transpose.bind(self, axes=tuple(reversed(range(self.ndim))))

    @property
    def mT(self):
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
        return np.asarray(self._concrete(diagnose.conversion_kind(sys._getframe(1))), dtype=dtype)

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
        return int(self._concrete(diagnose.confirmed("index")))

    def item(self, *args):
        return self._concrete("item").item(*args)

    def tolist(self):
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
    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        return ew.astype.bind(self, dtype=dtype)

    def round(self, decimals=0, out=None):
        if out is not None:
            return np.round(self, decimals, out=out)
        return ew.around.bind(self, decimals=decimals)

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        if not axes or axes == (None,):
            axes = tuple(reversed(range(self.ndim)))
        return kcore.transpose.bind(self, axes=tuple(a % self.ndim for a in axes))

    def reshape(self, *shape, order="C"):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return kcore.reshape.bind(self, shape=tuple(shape))

    def copy(self, order="C"):
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

    def ravel(self, order="C"):
        return kcore.reshape.bind(self, shape=(-1,))

    def flatten(self, order="C"):
        return kcore.copy.bind(kcore.reshape.bind(self, shape=(-1,)))  # NumPy's flatten always copies

    def squeeze(self, axis=None):
        return np.squeeze(self, axis=axis)

    def swapaxes(self, a, b):
        return np.swapaxes(self, a, b)

    def conj(self):
        return ew.conj.bind(self) if dtype_kind(self.dtype) == "c" else self

    conjugate = conj

    def dot(self, other):
        return np.dot(self, other)

    def clip(self, min=None, max=None):
        return np.clip(self, min, max)

    def sum(self, *args, **kwargs):
        return np.sum(self, *args, **kwargs)

    def prod(self, *args, **kwargs):
        return np.prod(self, *args, **kwargs)

    def mean(self, *args, **kwargs):
        return np.mean(self, *args, **kwargs)

    def var(self, *args, **kwargs):
        return np.var(self, *args, **kwargs)

    def std(self, *args, **kwargs):
        return np.std(self, *args, **kwargs)

    def max(self, *args, **kwargs):
        return np.max(self, *args, **kwargs)

    def min(self, *args, **kwargs):
        return np.min(self, *args, **kwargs)

    def argmax(self, *args, **kwargs):
        return np.argmax(self, *args, **kwargs)

    def argmin(self, *args, **kwargs):
        return np.argmin(self, *args, **kwargs)

    def any(self, *args, **kwargs):
        return np.any(self, *args, **kwargs)

    def all(self, *args, **kwargs):
        return np.all(self, *args, **kwargs)

    def cumsum(self, *args, **kwargs):
        return np.cumsum(self, *args, **kwargs)

    def cumprod(self, *args, **kwargs):
        return np.cumprod(self, *args, **kwargs)

    def fill(self, value):
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

    def view(self, dtype=None, type=None):
        """A new view of the same values (written through, like NumPy's); no reinterpretation."""
        if dtype is not None or type is not None:
            raise UnsupportedOperationError("ndarray.view(dtype/type) reinterprets memory, which a "
                                            "traced array cannot do; use .astype(dtype)")
        return kcore.reshape.bind(self, shape=tuple(self.shape))

    def sort(self, axis=-1, kind=None, order=None):
        """In place, as ``ndarray.sort``."""
        inplace_assign(self, np.sort(self, axis=axis, kind=kind, order=order), "sort")

    def argsort(self, *args, **kwargs):
        return np.argsort(self, *args, **kwargs)

    def diagonal(self, *args, **kwargs):
        return np.diagonal(self, *args, **kwargs)

    def trace(self, *args, **kwargs):
        return np.trace(self, *args, **kwargs)

    def repeat(self, *args, **kwargs):
        return np.repeat(self, *args, **kwargs)

    def take(self, *args, **kwargs):
        return np.take(self, *args, **kwargs)

    def searchsorted(self, *args, **kwargs):
        return np.searchsorted(self, *args, **kwargs)

    def nonzero(self):
        return np.nonzero(self)

    def compress(self, *args, **kwargs):
        return np.compress(*args[:1], self, *args[1:], **kwargs)

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


def _inplace(op, target, other, symbol):
    if _deferring(other):
        return NotImplemented
    result = op(target, other)
    if not np.can_cast(_np_dtype(result.dtype), _np_dtype(target.dtype), "same_kind"):
        raise TypeError(
            f"{symbol}: cannot write the {result.dtype} result into a {target.dtype} array "
            "in place (NumPy's same_kind casting); use an out-of-place operation"
        )
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
        def compare(self, other, op=prim.bind):
            return _binary(op, self, other)

        setattr(Tracer, f"__{name}__", compare)


_define_operators()


def integral(value):
    """Integer or boolean values: outputs of an AD level that carry no derivative."""
    dtype = getattr(value, "dtype", None)
    return dtype is not None and is_integer_dtype(dtype)


class PrimalTracer(Tracer):
    """Base of the differentiating tracers: ``_value`` is the primal, of the same shape.

    ``_view`` is None, or the :class:`View` that says how this tracer regenerates from
    the tracer it views (its base); ``_cell`` is None, or the version counter shared
    with the views taken of this tracer.  Subclasses set both in ``__init__``.
    """

    __slots__ = ("_view", "_cell")

    @property
    def shape(self):
        return tuple(self._value.shape)

    def _concrete(self, what):
        return concrete_policy(self, what)


def primal_of(value, level):
    """The primal of ``value`` at the differentiating ``level`` (``value`` itself where
    ``level`` does not trace it); a view whose base was written since is regenerated."""
    if isinstance(value, PrimalTracer) and value._level is level:
        return refresh_view(value)._value
    return value


def concrete_policy(tracer, what):
    """The concrete value of an AD tracer: its primal, as torch.func allows.

    ``bool``, ``float``, ``item``... work on the primal (unless a vmap below makes
    them impossible); ``np.asarray`` and writing into a plain array stay errors.
    """
    level = tracer._level
    if not level.alive:
        level.escaped(what)
    if tracer._view is not None:
        refresh_view(tracer)
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
        raise InplaceError(
            f"a value traced by {level.name} cannot be written into a plain NumPy array "
            f"({diagnose.store_description()}{where}): NumPy would store its primal value and "
            "its derivative would be lost. Write into a traced buffer instead, made from the "
            "traced input: buf = xr.zeros_like(x) or np.zeros_like(x.data); or collect the "
            "values in a list and combine them with np.stack / xr.concat."
        )
    primal = tracer._value
    if isinstance(primal, Tracer):
        return primal._concrete(what)
    return primal


# --- views under differentiation ------------------------------------------------------------
# NumPy's basic indexing, transpose and (where it can) reshape return views: writing into
# one writes into its base, and the base's later writes show through it.  The AD levels
# keep values functional, so they track this themselves: a tracer made from a tracer of
# the same level by one of these primitives records its base (the tracer at the root of a
# chain of views) and the chain.  An in-place update of a view writes its new value into
# the base with setitem-like updates (recorded like any operation, so derivatives follow)
# and bumps the base's version; a view whose base's version moved is regenerated from the
# base when next used (every primitive applied to it, ``float()``, the transform's output).

# Views NumPy makes read-only: reading one after its base was written sees the new values
# (it is regenerated like any view), writing into one raises NumPy's ValueError.
READ_ONLY_VIEW_PRIMITIVES = frozenset((kcore.broadcast_to, ks.matrix_diagonal, ks.sliding_window_view))
VIEW_PRIMITIVES = frozenset((ki.getitem, kcore.transpose, kcore.reshape, kcore.squeeze, kcore.expand_dims)) | READ_ONLY_VIEW_PRIMITIVES


class VersionCell:
    """How many times a base tracer has been written in place."""

    __slots__ = ("version",)

    def __init__(self):
        self.version = 0


class View:
    """A view tracer's base, the primitives from the base to it, and the base version
    its value reflects."""

    __slots__ = ("base", "ops", "cell", "version")

    def __init__(self, base, ops, cell):
        self.base = base
        self.ops = ops  # ((primitive, params, input shape), ...), base first
        self.cell = cell
        self.version = cell.version


def make_view(prim, args, params, out):
    """The :class:`View` for ``out`` (the primal made by ``prim`` from ``args[0]``, a
    tracer of the calling level), or None where NumPy would not return a view."""
    x = args[0]
    below = bottom(x._value)
    if type(below) is not np.ndarray and _without_views(below):
        return None
    shape = tuple(x._value.shape)
    if prim is ki.getitem:
        if len(args) > 1:
            return None  # index arrays: a copy
        ints = 0
        for item in params["template"]:
            kind = type(item)
            if kind is int:
                ints += 1
            elif kind is bool:
                return None  # a boolean scalar index: a copy
        if ints == len(shape) == len(params["template"]):
            return None  # an int for every axis: NumPy returns a scalar
    elif prim is kcore.reshape and not _shares_memory(out, x._value):
        return None  # NumPy copies (the input is not contiguous enough)
    view = x._view
    op = ((prim, params, shape),)
    if view is not None:
        return View(view.base, view.ops + op, view.cell)
    cell = x._cell
    if cell is None:
        cell = x._cell = VersionCell()
    return View(x, op, cell)


def _without_views(array):
    """Arrays whose in-place operations never write into another array (Dask's)."""
    return library_of(array) in ("dask", "jax", "jaxlib")


def _shares_memory(a, b):
    a, b = bottom(a), bottom(b)
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return bool(np.may_share_memory(a, b))
    if isinstance(a, np.generic) or isinstance(b, np.generic):
        return False
    library = sys.modules.get(library_of(a))
    may_share = getattr(library, "may_share_memory", None)
    if may_share is not None:
        try:
            return bool(may_share(a, b))
        except Exception:  # noqa: BLE001 - a library without it for these arrays
            pass
    return True


def refresh_view(tracer):
    """Regenerate ``tracer`` (a view) from its base if the base was written since."""
    view = tracer._view
    if view is None or view.version == view.cell.version:
        return tracer
    value = view.base
    for prim, params, _ in view.ops:
        value = prim.bind(value, **params)
    view.version = view.cell.version
    tracer._level.set_value(tracer, value)
    return tracer


def write_view(level, dest, src):
    """``dest[...] = src`` for a view ``dest``: write into its base, functionally."""
    view = dest._view
    read_only = [prim.name for prim, _, _ in view.ops if prim in READ_ONLY_VIEW_PRIMITIVES]
    if read_only:
        raise ValueError(f"assignment destination is read-only: a view made by {read_only[0]}, which "
                         "NumPy makes read-only (write into a copy: .copy())")
    shape = tuple(dest.shape)
    if tuple(getattr(src, "shape", ())) != shape:
        src = kcore.broadcast_to.bind(src, shape=shape)
    base = view.base
    level.set_value(base, _scatter(base, src, view.ops))
    view.cell.version += 1  # `dest` and every other view of the base regenerate when used


def _scatter(base, value, ops):
    """The base with ``value`` written where the chain of view ``ops`` looks."""
    parents = [base]
    if any(prim is ki.getitem for prim, _, _ in ops[1:]):
        for prim, params, _ in ops[:-1]:
            parents.append(prim.bind(parents[-1], **params))
    else:
        parents.extend([None] * (len(ops) - 1))
    for (prim, params, shape), parent in zip(reversed(ops), reversed(parents)):
        if prim is ki.getitem:
            value = ki.setitem.bind(parent, value, template=params["template"])
        elif prim is kcore.transpose:
            value = kcore.transpose.bind(value, axes=kcore.inverse_permutation(params["axes"]))
        else:  # reshape, squeeze, expand_dims
            value = kcore.reshape.bind(value, shape=shape)
    return value


def assign_value(level, dest, src):
    """An AD level's in-place update of its tracer ``dest`` (see ``inplace_assign``)."""
    if dest._view is not None:
        write_view(level, dest, src)
        return
    level.set_value(dest, src)
    if dest._cell is not None:
        dest._cell.version += 1  # its views regenerate when next used
