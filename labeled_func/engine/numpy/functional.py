"""NumPy functions that run a Python function over parts of an array: ``apply_along_axis``
(the function on each 1-D slice, traced like any code under the transform) and
``np.vectorize`` (the function on each element, once per example).

``np.vectorize`` is a class whose call NumPy never dispatches (it converts every input
with ``np.asarray`` first), so this module wraps ``numpy.vectorize.__call__`` once, at
import: a call with a traced argument goes to :func:`_vectorize` (through ``FUNCTIONS``),
any other call to NumPy's own, unchanged.

A vectorized function is a Python loop over elements that may test their values
(``if v > 0``), so it cannot be traced over a batch.  It runs once per example
(:func:`~labeled_func.engine.stack.bind_per_example`): under vmap alone each example's
values are concrete and NumPy's own vectorize runs on them (other libraries' arrays are
copied to NumPy and back: the function sees what NumPy gives it, Python numbers); under
grad/jvp the loop runs here on 0-d traced elements (whose values ``bool()`` reads).  The cost is the loop's:
one Python call per element and example (and reverse mode runs the loop again in its
backward pass); write ``func`` for whole arrays where you can.
"""
from __future__ import annotations

import itertools
import re

import numpy as np

from labeled_func_kernels import core as kcore
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels.backend import backend_of, device_of, namespace, normalize_axis
from labeled_func_kernels.indexing import getitem_static
from labeled_func_kernels.primitive import Traced
from labeled_func_kernels.shape import stack

from ..stack import bind_per_example
from .dispatch import FUNCTIONS, asarray, implements

__all__ = []


@implements(np.apply_along_axis)
def _apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """``func1d`` on every 1-D slice of ``arr`` along ``axis``; its output's dims take the
    place of ``axis`` (NumPy's layout), in the dtype of the first output."""
    arr = asarray(arr)
    axis = normalize_axis(axis, arr.ndim)[0]
    view = kcore.moveaxis(arr, axis, -1)
    outer = tuple(view.shape[:-1])
    if 0 in outer:
        raise ValueError("numpy.apply_along_axis: cannot apply_along_axis when any iteration dimensions are 0")
    results = [_as_array(func1d(getitem_static(view, index + (Ellipsis,)), *args, **kwargs), arr)
               for index in np.ndindex(*outer)]
    inner = tuple(results[0].shape)
    out = kcore.reshape.bind(_stacked(results), shape=outer + inner)
    return kcore.moveaxis(out, tuple(range(len(outer), len(outer) + len(inner))),
                          tuple(range(axis, axis + len(inner))))


# --- np.vectorize ------------------------------------------------------------------------------
def _vectorize(vectorized, *args, **kwargs):
    """``vectorized(*args, **kwargs)`` with traced arguments, once per example.

    The arguments NumPy would vectorize (those not in ``excluded``) that are traced go
    through :func:`bind_per_example`; everything else is passed as given.
    """
    excluded = vectorized.excluded
    slots = [i for i, value in enumerate(args) if i not in excluded and isinstance(value, Traced)]
    slots += [name for name, value in kwargs.items() if name not in excluded and isinstance(value, Traced)]
    if not slots:  # traced only where NumPy passes the value through as it is
        return _NUMPY_CALL(vectorized, *args, **kwargs)
    structure = {}

    def run(values):
        call_args, call_kwargs = list(args), dict(kwargs)
        for slot, value in zip(slots, values):
            if isinstance(slot, int):
                call_args[slot] = value
            else:
                call_kwargs[slot] = value
        if any(isinstance(value, Traced) for value in values):  # traced by derivative levels: the loop here
            out = _element_loop(vectorized, call_args, call_kwargs)
            parts = out if isinstance(out, tuple) else (out,)
        else:  # one example's concrete values: NumPy's own vectorize, on NumPy arrays
            for slot, value in zip(slots, values):
                if isinstance(slot, int):
                    call_args[slot] = _to_numpy(value)
                else:
                    call_kwargs[slot] = _to_numpy(value)
            out = _NUMPY_CALL(vectorized, *call_args, **call_kwargs)
            parts = [_from_numpy(part, values[0]) for part in (out if isinstance(out, tuple) else (out,))]
        structure["tuple"] = isinstance(out, tuple)
        return [_as_array(part, values[0]) for part in parts]

    outs = bind_per_example(run, [args[slot] if isinstance(slot, int) else kwargs[slot] for slot in slots])
    return tuple(outs) if structure["tuple"] else outs[0]


def _to_numpy(value):
    """A concrete array of any library as a NumPy array (CuPy's copied to the host)."""
    return backend_of(value).to_host(value)


def _from_numpy(value, like):
    """A NumPy result back in the library (and on the device) of ``like``."""
    if backend_of(like).native:
        return value
    return namespace(like).asarray(np.asarray(value), device=device_of(like))


def _element_loop(vectorized, args, kwargs):
    """NumPy's vectorize, element by element on traced arrays: the vectorized arguments
    broadcast, ``pyfunc`` called on each element (or, with a signature, on each core
    block), the outputs cast to ``otypes`` (else the first output's dtype) and stacked.
    With a signature, NumPy's checks: the count of arguments and of outputs, and one size
    per core dimension name."""
    excluded = vectorized.excluded
    positions = [i for i in range(len(args)) if i not in excluded]
    names = [name for name in kwargs if name not in excluded]
    arrays = [asarray(args[i]) for i in positions] + [asarray(kwargs[name]) for name in names]
    signature = None if vectorized.signature is None else gufunc_signature(vectorized.signature)
    if signature is None:
        cores, sizes = [()] * len(arrays), {}
    else:
        cores = signature[0]
        if len(cores) != len(arrays):
            raise TypeError(f"wrong number of positional arguments: expected {len(cores)}, got {len(arrays)}")
        sizes = {}
        for array, core in zip(arrays, cores):
            _core_sizes(sizes, np.shape(array), core)
    loop_shape = np.broadcast_shapes(*[np.shape(a)[:np.ndim(a) - len(core)] for a, core in zip(arrays, cores)])
    arrays = [_broadcast_loop(a, loop_shape, len(core)) for a, core in zip(arrays, cores)]
    outputs = []
    for index in np.ndindex(*loop_shape):
        call_args, call_kwargs = list(args), dict(kwargs)
        for slot, array in zip(itertools.chain(positions, names), arrays):
            value = getitem_static(array, index + (Ellipsis,)) if hasattr(array, "shape") else array
            if isinstance(slot, int):
                call_args[slot] = value
            else:
                call_kwargs[slot] = value
        try:
            out = vectorized.pyfunc(*call_args, **call_kwargs)
        except AttributeError as error:
            if not isinstance(error.obj, Traced):
                raise
            raise AttributeError(f"'{_numpy_element_type(vectorized, error.obj)}' object has no attribute "
                                 f"'{error.name}'", name=error.name) from None
        if signature is not None:
            count = len(signature[1])
            got = len(out) if isinstance(out, tuple) else 1
            if got != count:
                raise ValueError(f"wrong number of outputs from pyfunc: expected {count}, got {got}")
            out = (out,) if count == 1 else out
        outputs.append(out if isinstance(out, tuple) else (out,))
    if not outputs:
        raise ValueError("numpy.vectorize: cannot call `vectorize` on size 0 inputs with traced arguments")
    like = next(a for a in arrays if hasattr(a, "shape"))
    results = []
    for k, parts in enumerate(zip(*outputs)):
        parts = [_as_array(part, like) for part in parts]
        if signature is not None:  # every output fits its core dims (the first call sets new ones)
            core = signature[1][k]
            _core_sizes(sizes, tuple(parts[0].shape), core)
            shape = tuple(sizes[name] for name in core)
            parts = [part if tuple(part.shape) == shape else kcore.broadcast_to.bind(part, shape=shape)
                     for part in parts]
        otypes = vectorized.otypes
        dtype = np.dtype(otypes[k]) if otypes else None
        stacked = _stacked(parts, dtype)
        results.append(kcore.reshape.bind(stacked, shape=tuple(loop_shape) + tuple(parts[0].shape)))
    if signature is not None:
        return results[0] if len(results) == 1 else tuple(results)
    return tuple(results) if isinstance(outputs[0], tuple) and len(outputs[0]) > 1 else results[0]


def _numpy_element_type(vectorized, element):
    """The name of the type NumPy's own vectorize would pass ``pyfunc`` where it got ``element``
    (for its AttributeError): a core block is an ndarray; a scalar a NumPy scalar, or with
    ``otypes`` and no signature (NumPy's frompyfunc loop) a Python number."""
    if element.ndim:
        kind = np.ndarray
    else:
        value = np.zeros((), dtype=np.dtype(getattr(element.dtype, "_np_dtype", element.dtype)))
        kind = type(value.item() if vectorized.signature is None and vectorized.otypes else value[()])
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


def gufunc_signature(signature: str) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """The core dimensions of a gufunc ``signature``: ``(inputs, outputs)``, each a list with
    one tuple of dimension names per argument (``"(n),()->()"``: ``([("n",), ()], [()])``).

    NumPy's grammar (whitespace ignored): two argument lists joined by ``->``; a list is one or
    more arguments separated by commas; an argument is a parenthesised, comma-separated list of
    zero or more dimension names (word characters: ``n``, ``k_2``, ``3``).
    """
    text = "".join(signature.split())
    inputs, arrow, outputs = text.partition("->")
    parsed = _argument_list(inputs), _argument_list(outputs)
    if not arrow or None in parsed:
        raise ValueError(f"not a valid gufunc signature: {text}")
    return parsed


def _argument_list(text):
    """``"(m,n),()"`` as ``[("m", "n"), ()]``; None if it is not an argument list."""
    arguments = []
    while True:
        close = text.find(")")
        if not text.startswith("(") or close < 0:
            return None
        body = text[1:close]
        names = tuple(body.split(",")) if body else ()
        if not all(_DIMENSION_NAME.fullmatch(name) for name in names):
            return None
        arguments.append(names)
        text = text[close + 1:]
        if not text:
            return arguments
        if not text.startswith(","):
            return None
        text = text[1:]


_DIMENSION_NAME = re.compile(r"\w+")


def _core_sizes(sizes, shape, core):
    """Record the sizes of ``core``'s dimensions (the last of ``shape``) in ``sizes``, with
    NumPy's errors for too few dimensions and for a name seen with another size."""
    if not core:
        return
    if len(shape) < len(core):
        raise ValueError(f"{len(shape)}-dimensional argument does not have enough dimensions for all "
                         f"core dimensions {core!r}")
    for name, size in zip(core, shape[len(shape) - len(core):]):
        if sizes.setdefault(name, size) != size:
            raise ValueError(f"inconsistent size for core dimension {name!r}: {size!r} vs {sizes[name]!r}")


def _broadcast_loop(array, loop_shape, core_rank):
    """``array`` broadcast to the loop shape, its core dims kept last."""
    if not hasattr(array, "shape"):
        return array
    core = tuple(array.shape[array.ndim - core_rank:]) if core_rank else ()
    target = tuple(loop_shape) + core
    return array if tuple(array.shape) == target else kcore.broadcast_to.bind(array, shape=target)


def _as_array(value, like):
    """An output as an array: a Python or NumPy number in the namespace of ``like`` (as
    NumPy's asanyarray makes it)."""
    if hasattr(value, "shape"):
        return value
    return namespace(like).asarray(value) if hasattr(like, "shape") else np.asarray(value)


def _stacked(parts, dtype=None):
    """The parts stacked along a new first axis, in ``dtype`` or the first part's (NumPy
    writes later outputs into a buffer of the first one's dtype)."""
    target = parts[0].dtype if dtype is None else dtype
    parts = [part if part.dtype == target else ew.astype.bind(part, dtype=target) for part in parts]
    return stack.bind(*parts, axis=0)


def _vectorize_call(self, *args, **kwargs):
    """``numpy.vectorize.__call__``: traced arguments go to this module's handler."""
    if self.pyfunc is not np._NoValue and any(isinstance(value, Traced)
                                               for value in itertools.chain(args, kwargs.values())):
        return FUNCTIONS[np.vectorize](self, *args, **kwargs)
    return _NUMPY_CALL(self, *args, **kwargs)


FUNCTIONS[np.vectorize] = _vectorize
_NUMPY_CALL = getattr(np.vectorize.__call__, "numpy_call", np.vectorize.__call__)
_vectorize_call.numpy_call = _NUMPY_CALL
np.vectorize.__call__ = _vectorize_call
