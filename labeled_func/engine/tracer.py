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

from kernels import Traced
from kernels import creation as kc
from kernels import elementwise as ew
from kernels import indexing as ki
from kernels import linalg as kl
from kernels import shape as ks
from kernels.backend import device_of, dtype_kind, namespace

from . import diagnose, numpy_api
from .errors import ConversionError, InplaceError, UnsupportedOperationError

__all__ = ["Tracer", "PrimalTracer", "inplace_assign", "refresh_view"]


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
        # side-effect free: a read-only zero of the logical shape, not recorded anywhere
        return np.broadcast_to(np.zeros((), dtype=self.dtype), self.shape)

    @property
    def T(self):
        return ks.transpose.bind(self, axes=tuple(reversed(range(self.ndim))))

    @property
    def mT(self):
        order = list(range(self.ndim))
        order[-2:] = order[-1], order[-2]
        return ks.transpose.bind(self, axes=tuple(order))

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

    def _bottom(self):
        """The concrete array under every level (all examples; primals under AD)."""
        value = self._value
        while isinstance(value, Tracer):
            value = value._value
        return value

    # --- NumPy protocols ------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return numpy_api.dispatch_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return numpy_api.dispatch_function(func, types, args, kwargs)

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
        out = numpy_api.getitem(self, key)
        if _scalar_key(key, self.ndim) and getattr(self._bottom(), "ndim", 0) > self.ndim:
            # NumPy returns a scalar (a copy) here; under vmap the batched value below
            # is a view, which an in-place update of the result would write through
            out = ks.copy.bind(out)
        return out

    def __setitem__(self, key, value):
        numpy_api.setitem(self, key, value)

    # --- methods xarray and users call -------------------------------------------------------------
    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        return ew.astype.bind(self, dtype=dtype)

    def round(self, decimals=0, out=None):
        if out is not None:
            return np.round(self, decimals, out=out)
        return ew.round.bind(self, decimals=decimals)

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        if not axes or axes == (None,):
            axes = tuple(reversed(range(self.ndim)))
        return ks.transpose.bind(self, axes=tuple(a % self.ndim for a in axes))

    def reshape(self, *shape, order="C"):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return ks.reshape.bind(self, shape=tuple(shape))

    def copy(self, order="C"):
        return ks.copy.bind(self)

    def __copy__(self):
        return ks.copy.bind(self)

    def __deepcopy__(self, memo=None):
        return ks.copy.bind(self)

    def ravel(self, order="C"):
        return ks.reshape.bind(self, shape=(-1,))

    def flatten(self, order="C"):
        return ks.copy.bind(ks.reshape.bind(self, shape=(-1,)))  # NumPy's flatten always copies

    def squeeze(self, axis=None):
        return np.squeeze(self, axis=axis)

    def swapaxes(self, a, b):
        return np.swapaxes(self, a, b)

    def conj(self):
        return ew.conj.bind(self) if dtype_kind(self.dtype) == "c" else self

    conjugate = conj

    def dot(self, other):
        return kl.dot(self, other)

    def clip(self, min=None, max=None):
        return ew.clip(self, min, max)

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
        inplace_assign(self, kc.full_like.bind(self, fill_value=value), "fill")

    def view(self, dtype=None, type=None):
        """A new view of the same values (written through, like NumPy's); no reinterpretation."""
        if dtype is not None or type is not None:
            raise UnsupportedOperationError("ndarray.view(dtype/type) reinterprets memory, which a "
                                            "traced array cannot do; use .astype(dtype)")
        return ks.reshape.bind(self, shape=tuple(self.shape))

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
        return ew.abs.bind(self)

    def __invert__(self):
        return ew.bitwise_invert.bind(self) if dtype_kind(self.dtype) != "b" else ew.logical_not.bind(self)

    def __matmul__(self, other):
        return _binary(kl.matmul, self, other)

    def __rmatmul__(self, other):
        return _binary(kl.matmul, other, self)

    def __imatmul__(self, other):
        return _inplace(kl.matmul, self, other, "@=")


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
    return type(value) in numpy_api.DEFERRING_TYPES


def _binary(prim, a, b):
    other = b if isinstance(a, Tracer) else a
    if _deferring(other):
        return NotImplemented
    if isinstance(other, (list, tuple)):
        other = np.asarray(other)
        a, b = (a, other) if isinstance(a, Tracer) else (other, b)
    return prim.bind(a, b)


def _inplace(prim, target, other, symbol):
    if _deferring(other):
        return NotImplemented
    result = prim.bind(target, other)
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
        "add": (ew.add, "+"), "sub": (ew.subtract, "-"), "mul": (ew.multiply, "*"),
        "truediv": (ew.divide, "/"), "floordiv": (ew.floor_divide, "//"),
        "mod": (ew.remainder, "%"), "pow": (ew.pow, "**"),
        "and": (None, "&"), "or": (None, "|"), "xor": (None, "^"),
    }
    bitwise = {"and": (ew.bitwise_and, ew.logical_and), "or": (ew.bitwise_or, ew.logical_or),
               "xor": (ew.bitwise_xor, ew.logical_xor)}

    for name, (prim, symbol) in table.items():
        if prim is None:
            prim = _BitwiseOrLogical(*bitwise[name])

        def forward(self, other, prim=prim):
            return _binary(prim, self, other)

        def reflected(self, other, prim=prim):
            return _binary(prim, other, self)

        def inplace(self, other, prim=prim, symbol=symbol + "="):
            return _inplace(prim, self, other, symbol)

        setattr(Tracer, f"__{name}__", forward)
        setattr(Tracer, f"__r{name}__", reflected)
        setattr(Tracer, f"__i{name}__", inplace)

    for name, prim in {"eq": ew.equal, "ne": ew.not_equal, "lt": ew.less, "le": ew.less_equal,
                       "gt": ew.greater, "ge": ew.greater_equal}.items():
        def compare(self, other, prim=prim):
            return _binary(prim, self, other)

        setattr(Tracer, f"__{name}__", compare)


class _BitwiseOrLogical:
    """``&``, ``|``, ``^``: logical on booleans (the array API has no bitwise on bool)."""

    def __init__(self, bitwise, logical):
        self.bitwise = bitwise
        self.logical = logical

    def bind(self, a, b):
        both_bool = all(dtype_kind(getattr(v, "dtype", np.dtype(type(v)))) == "b" for v in (a, b))
        return (self.logical if both_bool else self.bitwise).bind(a, b)


_define_operators()


def inplace_assign(dest, src, operation):
    """Write ``src`` into ``dest`` as ``dest[...] = src`` would, level by level.

    A value traced at a level where ``dest`` is not traced cannot go in: that is
    the in-place policy (a mapped value into an unmapped array).
    """
    top = None
    for value in (dest, src):
        if isinstance(value, Tracer):
            level = value._level
            if not level.alive:
                level.escaped(operation)
            if top is None or level.depth > top.depth:
                top = level
    if top is None:
        dest[...] = src
        return
    if not (isinstance(dest, Tracer) and dest._level is top):
        transform = top.label or top.name
        if top.name == "vmap":
            why = (f"a value mapped by lf.{transform} (one per example) cannot be written into an "
                   "array that is not mapped (it holds one example's values: it would need more "
                   "elements than it has)")
            source = "the mapped input"
        else:
            why = (f"a value traced by lf.{transform} cannot be written into an array that "
                   f"lf.{transform} does not trace: its derivative would be lost")
            source = "the differentiated input"
        raise InplaceError(
            f"{operation}: {why}. Build the buffer from {source} instead, e.g. xr.zeros_like(x) "
            "/ np.zeros_like(x.data), or use an out-of-place operation (y = x + v instead of "
            "x += v)."
        )
    top.assign(dest, src, operation)


def integral(value):
    """Integer or boolean values: outputs of an AD level that carry no derivative."""
    dtype = getattr(value, "dtype", None)
    return dtype is not None and dtype_kind(dtype) in "biu"


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
        raise InplaceError(
            f"a value traced by {level.name} cannot be written into a plain NumPy array "
            "(plain[i] = value, plain[...] = value): NumPy would store its primal value and "
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
READ_ONLY_VIEW_PRIMITIVES = frozenset((ks.broadcast_to, ks.matrix_diagonal, ks.sliding_window_view))
VIEW_PRIMITIVES = frozenset((ki.getitem, ks.transpose, ks.reshape, ks.squeeze, ks.expand_dims)) | READ_ONLY_VIEW_PRIMITIVES


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
    bottom = _concrete_bottom(x._value)
    if type(bottom) is not np.ndarray and _without_views(bottom):
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
    elif prim is ks.reshape and not _shares_memory(out, x._value):
        return None  # NumPy copies (the input is not contiguous enough)
    view = x._view
    op = ((prim, params, shape),)
    if view is not None:
        return View(view.base, view.ops + op, view.cell)
    cell = x._cell
    if cell is None:
        cell = x._cell = VersionCell()
    return View(x, op, cell)


def _concrete_bottom(value):
    while isinstance(value, Tracer):
        value = value._value
    return value


def _without_views(array):
    """Arrays whose in-place operations never write into another array (Dask's)."""
    return type(array).__module__.startswith(("dask.", "jax"))


def _shares_memory(a, b):
    a, b = _concrete_bottom(a), _concrete_bottom(b)
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return bool(np.may_share_memory(a, b))
    if isinstance(a, np.generic) or isinstance(b, np.generic):
        return False
    library = sys.modules.get(type(a).__module__.split(".")[0])
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
        src = ks.broadcast_to.bind(src, shape=shape)
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
        elif prim is ks.transpose:
            value = ks.transpose.bind(value, axes=ks._inverse_permutation(params["axes"]))
        else:  # reshape, squeeze, expand_dims
            value = ks.reshape.bind(value, shape=shape)
    return value


def assign_value(level, dest, src):
    """An AD level's in-place update of its tracer ``dest`` (see ``inplace_assign``)."""
    if dest._view is not None:
        write_view(level, dest, src)
        return
    level.set_value(dest, src)
    if dest._cell is not None:
        dest._cell.version += 1  # its views regenerate when next used
