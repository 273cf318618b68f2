"""The array namespace of the inputs, and the few functions the standard lacks.

Impls take their functions from :func:`namespace` (array-api-compat), so the same
kernel runs on NumPy, CuPy or any array-API library.  What the array API standard
does not have goes through :func:`extra`: the library's own function when it has one
(NumPy and CuPy both do), else a portable fallback written with standard functions.
"""
from __future__ import annotations

import cmath
import dataclasses
import math
import numbers
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Callable

import array_api_compat
import array_api_compat.numpy as numpy_namespace  # noqa: F401 (re-exported)
import numpy as np

from .primitive import Traced, bottom, known

__all__ = ["all_finite", "finite_by_sum", "any_true", "known_true", "looking_waits", "device_of", "namespace", "namespace_dtype", "numpy_namespace", "extra", "is_array",
           "reciprocal_power_of_two",
           "dtype_kind", "is_integer_dtype", "library_of", "namespace_library", "lazy_namespace",
           "Backend", "backend_of", "backend_named", "library_packages"]

_SCALARS = (numbers.Number, np.generic, bool, str, bytes)  # (a string compared with an array of strings)
_namespace_by_type = {np.ndarray: numpy_namespace}


def namespace(*values: Any) -> ModuleType:
    """The array-API namespace of ``values`` (Python scalars are ignored).

    NumPy arrays mixed with Dask arrays give the Dask namespace (Dask takes NumPy
    operands and stays lazy); any other mix of libraries is a ``TypeError``.
    """
    found = None
    for value in values:
        kind = type(value)
        xp = _namespace_by_type.get(kind)
        if xp is None:
            if isinstance(value, _SCALARS) or value is None:
                continue
            if isinstance(value, Traced):
                xp = value._namespace()
            else:
                xp = array_api_compat.array_namespace(value)
                _namespace_by_type[kind] = xp
        if found is None or (found is numpy_namespace and lazy_namespace(xp)):
            found = xp
        elif xp is not found and not (xp is numpy_namespace and lazy_namespace(found)):
            raise TypeError(
                f"arrays of different libraries in one operation: {found.__name__} and {xp.__name__}"
            )
    return numpy_namespace if found is None else found


def lazy_namespace(xp: ModuleType) -> bool:
    """True for a namespace whose functions take NumPy arrays too, as one family with
    them (Dask's: a Dask array wraps NumPy chunks, and ``da.add(dask, numpy)`` is lazy)."""
    return xp.__name__ == "array_api_compat.dask.array"


# --- which library an array comes from: asked here, and nowhere else ---------------------------
def library_of(value: Any) -> str | None:
    """The top-level package of the array library behind ``value`` ("numpy", "cupy",
    "dask", "array_api_strict", "jax"...), read through tracers to the concrete array
    below them; "numpy" for NumPy scalars, None for Python numbers and None."""
    value = bottom(value)
    if value is None or type(value) in _PYTHON_NUMBERS:
        return None
    return type(value).__module__.partition(".")[0]


def namespace_library(xp: ModuleType) -> str:
    """The array library of namespace ``xp``: array-api-compat's wrappers name the library
    they wrap (``array_api_compat.dask.array`` is "dask"), others are the library itself."""
    name = xp.__name__.removeprefix("array_api_compat.")
    return name.partition(".")[0]


# --- what the code needs to know of a library: declared once, here -----------------------------
def _get(array):
    return array.get()  # CuPy: copy from the device


@dataclasses.dataclass(frozen=True)
class Backend:
    """What the kernels and the engine need to know of an array library, declared once.

    Code asks a capability (``backend_of(x).on_device``), never the library's name: a new
    library is one declaration below.  The defaults describe a library nothing is known of.

    Attributes
    ----------
    name : str or None
        The top-level package (:func:`library_of`); None for Python numbers.
    host_values : bool
        NumPy computes on the values directly (NumPy arrays and scalars, Python numbers).
    native : bool
        NumPy's own arrays: NumPy functions take them as they are, without a copy.
    eager : bool
        Values exist once computed: their elements can be looked at now (not Dask's, JAX's).
    on_device : bool
        Values live on a device: looking at them from the host waits for the device.
    to_host : callable
        The values as a NumPy array on the host (CuPy's copied from the device).
    has_ufunc_at : bool
        The library's own ``add.at`` (scatter-add with repeated indices) exists.
    strided_views : bool
        ``<library>.lib.stride_tricks.sliding_window_view`` gives a strided view, no copy.
    window_axes_ascending : bool
        That function orders the window dims as NumPy only for axes in ascending order.
    special : str or None
        The module of ``scipy.special``'s functions for these values (None: the portable ones).
    special_needs_arrays : bool
        Those functions take arrays only (numbers are converted first).
    special_casts_back : bool
        Their results are cast to the floating dtype of the inputs, as SciPy's loops give.
    fusion : {"numexpr", "cuda", None}
        How elementwise chains fuse into one kernel (lf.jit, the eager NaN-safe product).
    chunked : bool
        A lazy array of chunks of another library (its ``_meta``: Dask's).
    defers_to_tracers : bool
        Its arrays hand a NumPy call with a tracer among the arguments to the tracer
        (NumPy's, Dask's, Python numbers): a raw array of it may sit beside a tracer.
    views : bool
        An in-place operation may write into another array that shares its memory (a
        view); False for arrays that are immutable or lazy (Dask's, JAX's).
    units : bool
        A quantity with units wrapped around an array (pint's), which the transforms refuse.
    host_copy : bool
        Not an array library, but NumPy takes a copy of its objects (pandas' Index and
        Series): a NumPy function given one beside a tracer computes on that copy.
    packages : frozenset of str
        The packages whose stack frames are the library's (not the user's) in error messages.

    Examples
    --------
    >>> import numpy as np
    >>> backend_of(np.ones(3)).native, backend_of(np.ones(3)).fusion
    (True, 'numexpr')
    >>> backend_of(2.0).name is None and backend_of(2.0).host_values
    True
    """

    name: str | None
    host_values: bool = False
    native: bool = False
    eager: bool = False
    on_device: bool = False
    to_host: Callable[[Any], np.ndarray] = np.asarray
    has_ufunc_at: bool = False
    strided_views: bool = False
    window_axes_ascending: bool = False
    special: str | None = None
    special_needs_arrays: bool = False
    special_casts_back: bool = False
    fusion: str | None = None
    chunked: bool = False
    defers_to_tracers: bool = False
    views: bool = True
    units: bool = False
    host_copy: bool = False
    packages: frozenset[str] = frozenset()

    @property
    def module(self) -> ModuleType:
        """The library's top-level module (imported: one of its arrays exists)."""
        return sys.modules[self.name]


_BACKENDS = {backend.name: backend for backend in (
    Backend(None, host_values=True, eager=True, special="scipy.special", defers_to_tracers=True),  # Python numbers
    Backend("numpy", host_values=True, native=True, eager=True, to_host=lambda array: array, has_ufunc_at=True,
            strided_views=True, special="scipy.special", fusion="numexpr", defers_to_tracers=True,
            packages=frozenset({"numpy"})),
    Backend("cupy", eager=True, on_device=True, to_host=_get, has_ufunc_at=True, strided_views=True,
            window_axes_ascending=True, special="cupyx.scipy.special", special_needs_arrays=True,
            special_casts_back=True, fusion="cuda", packages=frozenset({"cupy", "cupyx"})),
    Backend("array_api_strict", eager=True, packages=frozenset({"array_api_strict"})),
    Backend("dask", chunked=True, defers_to_tracers=True, views=False, packages=frozenset({"dask"})),
    Backend("jax", views=False),
    Backend("jaxlib", views=False),
    Backend("pint", units=True),
    Backend("pandas", host_copy=True),
)}


def backend_named(name: str | None) -> Backend:
    """The :class:`Backend` of the library called ``name`` (:func:`library_of`,
    :func:`namespace_library`); a library not declared has the default capabilities.

    Examples
    --------
    >>> backend_named("cupy").on_device, backend_named("numpy").on_device
    (True, False)
    >>> backend_named("some_library").eager
    False
    """
    backend = _BACKENDS.get(name)
    if backend is None:
        backend = _BACKENDS[name] = Backend(name)
    return backend


def backend_of(value: Any) -> Backend:
    """The :class:`Backend` of the library behind ``value`` (through tracers to the array
    below them; Python numbers and None have their own).

    Examples
    --------
    >>> import numpy as np
    >>> backend_of(np.float64(1.0)).name
    'numpy'
    """
    return backend_named(library_of(value))


def library_packages() -> frozenset[str]:
    """The packages of every declared library (their frames are library frames)."""
    return frozenset().union(*(backend.packages for backend in _BACKENDS.values()))


def is_integer_dtype(dtype: Any) -> bool:
    """Booleans and (unsigned) integers: values that carry no derivative."""
    return dtype_kind(dtype) in "biu"


_PYTHON_NUMBERS = (int, float, complex, bool)


def device_of(value: Any) -> Any:
    """The device of an array of any backend (through tracers to the value below)."""
    if isinstance(value, Traced):
        return value._device()
    return array_api_compat.device(value)


def any_true(mask: Any) -> bool:
    """Whether any element of a boolean mask is true, across every example of every
    transform level; True when that cannot be known without computing (a lazy array)."""
    if not known(mask):
        return True
    mask = bottom(mask)
    backend = backend_of(mask)
    if backend.host_values:
        return bool(np.any(mask))
    if backend.eager:
        return bool(namespace(mask).any(mask))
    return True


def known_true(mask: Any) -> bool:
    """Whether some element of a boolean mask is known to be true: False where that cannot
    be known without computing (a lazy array, a value recorded for later calls).  For
    checks of bad input that NumPy would make, which must not refuse what may be valid."""
    return known(mask) and any_true(mask)


def looking_waits(value: Any) -> bool:
    """Whether deciding on ``value``'s elements (:func:`any_true`, :func:`all_finite`) makes
    the host wait for a device: then a rule that can do without the look (a mask applied
    always instead of only where needed) should.  A look from the host (bool(), .item())
    waits for every kernel queued before it, and the host stops queueing work ahead."""
    return backend_of(value).on_device


# Below this many elements OpenBLAS computes a dot product in one thread (its threshold is
# 10,000), and the dot product is the fastest sum: measured 2026-12-08, float64, per call,
# 99 / 1,000 / 10,000 elements: np.vdot 0.42 / 0.57 / 1.7 us, einsum 1.7 / 1.9 / 3.3 us,
# isfinite().all() 1.4 / 1.7 / 3.0 us.  Above it, einsum (one thread, 1.5x faster than
# isfinite().all() at 1e5 elements): a Dask block's look must not take the other cores.
_DOT_ELEMENTS = 8_192


def finite_by_sum(value: np.ndarray) -> bool:
    """True when a sum over the elements of ``value`` (a NumPy array) shows them all finite:
    a float array that is C-contiguous, not empty, and whose sum (of squares, for a small one)
    is finite.  A square is never negative, so no infinity cancels; an inf or NaN element
    makes either sum inf or NaN.  False says nothing: the sum overflowed (elements beyond
    ~1e154 squared, ~1e308 summed), or ``value`` is of another kind or layout; the exact test
    (``isfinite``) decides then."""
    if value.dtype.kind != "f" or not value.flags.c_contiguous or not value.size:
        return False
    flat = value.reshape(-1)
    if flat.size <= _DOT_ELEMENTS:  # vdot: np.dot's speed, without its warning on an overflow
        return math.isfinite(np.vdot(flat, flat))
    return math.isfinite(np.einsum("i->", flat))


def all_finite(value: Any) -> bool:
    """Whether every element of ``value`` is finite, across every example of every transform
    level; False when that cannot be known without computing (a lazy array)."""
    if not known(value):
        return False
    value = bottom(value)
    if type(value) in _PYTHON_NUMBERS:
        return cmath.isfinite(value)
    backend = backend_of(value)
    if backend.host_values:
        if type(value) is np.ndarray and finite_by_sum(value):
            return True
        return bool(np.isfinite(value).all())
    if backend.eager:
        xp = namespace(value)
        return bool(xp.all(xp.isfinite(value)))
    return False


def reciprocal_power_of_two(value: Any, dtype: Any) -> Any:
    """``1 / value`` in ``value``'s type where ``value`` is a float ±2**k that is a normal
    number of ``dtype`` (the dtype the division computes in, to which a Python float is
    cast) with a normal reciprocal: dividing by it and multiplying by its reciprocal give
    the same bits. Else None."""
    if type(value) is np.ndarray and value.ndim == 0:
        value = value[()]
    if type(value) is not float and not isinstance(value, np.floating):
        return None
    mantissa, exponent = math.frexp(float(value))
    finfo = np.finfo(dtype)
    if abs(mantissa) != 0.5 or not (finfo.minexp + 2 <= exponent <= finfo.maxexp - 1):
        return None
    return 1.0 / value if type(value) is float else value.dtype.type(1) / value


def is_array(value: Any) -> bool:
    """True for an array of any backend (not a Python or NumPy scalar)."""
    return not isinstance(value, _SCALARS) and hasattr(value, "shape") and hasattr(value, "dtype")


def extra(xp: ModuleType, name: str) -> Callable[..., Any]:
    """``xp.<name>`` where the library has it, else the portable fallback."""
    function = getattr(xp, name, None)
    if function is not None:
        return function
    fallback = _FALLBACKS.get(name)
    if fallback is None:
        raise AttributeError(f"{getattr(xp, '__name__', xp)} has no {name}, and there is no portable fallback")
    return fallback(xp)


def _einsum_fallback(xp):
    def einsum(subscripts, *operands):
        inputs, output = parse_einsum(subscripts, [op.ndim for op in operands])
        letters = sorted(set("".join(inputs)) | set(output))
        sizes = {}
        for term, op in zip(inputs, operands):
            for letter, size in zip(term, op.shape):
                sizes[letter] = max(sizes.get(letter, 1), size)
        product = None
        for term, op in zip(inputs, operands):
            order = sorted(range(len(term)), key=lambda i: letters.index(term[i]))
            op = xp.permute_dims(op, tuple(order)) if order else op
            present = sorted(set(term), key=letters.index)
            shape = tuple(op.shape[present.index(l)] if l in present else 1 for l in letters)
            op = xp.reshape(op, shape)
            product = op if product is None else product * op
        summed = tuple(i for i, l in enumerate(letters) if l not in output)
        if summed:
            product = xp.sum(product, axis=summed)
        kept = [l for l in letters if l in output]
        order = tuple(kept.index(l) for l in output)
        return xp.permute_dims(product, order) if order else product

    return einsum


def _sliding_window_fallback(xp):
    def sliding_window_view(x, window_shape, axis):
        for size, ax in zip(window_shape, axis):
            count = x.shape[ax] - size + 1
            device = device_of(x)
            index = (xp.reshape(xp.arange(count, device=device), (count, 1))
                     + xp.reshape(xp.arange(size, device=device), (1, size)))
            taken = xp.take(x, xp.reshape(index, (-1,)), axis=ax)
            shape = x.shape[:ax] + (count, size) + x.shape[ax + 1:]
            x = xp.moveaxis(xp.reshape(taken, shape), ax + 1, -1)
        return x

    return sliding_window_view


def _take_along_axis_fallback(xp):
    def take_along_axis(x, indices, axis=-1):
        axis = axis % x.ndim
        shape = tuple(max(a, b) for a, b in zip(x.shape, indices.shape))
        x = xp.broadcast_to(x, shape[:axis] + (x.shape[axis],) + shape[axis + 1:])
        indices = xp.broadcast_to(indices, shape[:axis] + (indices.shape[axis],) + shape[axis + 1:])
        if lazy_namespace(xp):  # Dask: each block whole along the axis, the chunk library per block
            import dask.array

            x = x.rechunk({axis: -1})
            indices = indices.rechunk({axis: -1})
            chunks = {d: x.chunks[d] for d in range(x.ndim) if d != axis}
            indices = indices.rechunk(chunks)
            meta = array_api_compat.array_namespace(x._meta)
            return dask.array.map_blocks(meta.take_along_axis, x, indices, axis=axis, dtype=x.dtype,
                                         meta=x._meta, chunks=indices.chunks)
        # Portable: the flat positions of the picked elements, one standard ``take``.
        strides = [1] * x.ndim
        for d in range(x.ndim - 2, -1, -1):
            strides[d] = strides[d + 1] * x.shape[d + 1]
        device = device_of(x)
        positions = indices * strides[axis]
        for d in range(x.ndim):
            if d != axis:
                along = xp.arange(indices.shape[d], device=device) * strides[d]
                positions = positions + xp.reshape(along, (1,) * d + (-1,) + (1,) * (x.ndim - d - 1))
        flat = xp.take(xp.reshape(x, (-1,)), xp.reshape(positions, (-1,)), axis=0)
        return xp.reshape(flat, indices.shape)

    return take_along_axis


def _bincount_fallback(xp):
    def bincount(x, weights=None, minlength=0):
        """NumPy's bincount of a 1-D array of non-negative ints, by one sort: the values
        equal to ``k`` are a run of the sorted values, found by two binary searches."""
        device = device_of(x)
        largest = int(xp.max(x)) + 1 if x.shape[0] else 0
        length = max(minlength, largest)
        order = xp.argsort(x, stable=True)
        ordered = xp.take(x, order)
        starts = xp.searchsorted(ordered, xp.arange(length + 1, dtype=x.dtype, device=device))
        if weights is None:
            return xp.astype(starts[1:] - starts[:-1], xp.int64)
        running = xp.cumulative_sum(xp.take(xp.astype(weights, xp.float64), order), include_initial=True)
        return xp.take(running, starts[1:]) - xp.take(running, starts[:-1])

    return bincount


def _floating_of(xp, x, like=None):
    """``x`` as an array of a floating dtype: an integer or boolean one as the float NumPy's
    loops pick, a Python number as a 0-d array (of ``like``'s floating dtype, else float64)."""
    if not hasattr(x, "dtype"):
        dtype = like.dtype if like is not None and dtype_kind(like.dtype) == "f" else xp.float64
        return xp.asarray(float(x), dtype=dtype, device=None if like is None else device_of(like))
    if is_integer_dtype(x.dtype):
        np_dtype = np.promote_types(np.dtype(getattr(x.dtype, "_np_dtype", x.dtype)), np.float16)
        return xp.astype(x, namespace_dtype(xp, np_dtype))
    return x


def _fmod_fallback(xp):
    def fmod(x, y):
        """The remainder of |x| by |y| (on non-negative numbers C's fmod, exact) with the sign
        of ``x``."""
        reference = x if hasattr(x, "dtype") else y
        x, y = (v if hasattr(v, "dtype") else xp.asarray(v, dtype=reference.dtype, device=device_of(reference))
                for v in (x, y))
        size = xp.remainder(xp.abs(x), xp.abs(y))
        return xp.where(x < 0, -size, size) if is_integer_dtype(size.dtype) else xp.copysign(size, x)
    return fmod


def _ldexp_fallback(xp):
    def ldexp(x, i):
        """``x * 2.0**i``: exact where ``2.0**i`` and the product are normal numbers."""
        if not hasattr(i, "dtype"):  # a Python int
            return _floating_of(xp, x) * math.ldexp(1.0, int(i))
        x = _floating_of(xp, x, i)  # a number takes float64, on i's device
        return x * xp.pow(xp.asarray(2.0, dtype=x.dtype, device=device_of(x)), xp.astype(i, x.dtype))
    return ldexp


def _spacing_fallback(xp):
    def spacing(x):
        """The step to the next number away from zero (+0.0 and -0.0 both step up, as NumPy's)."""
        x = _floating_of(xp, x)
        up = xp.full_like(x, math.inf)
        return xp.nextafter(x, xp.where(x < 0, -up, up)) - x
    return spacing


def _promoted(xp, values):
    """``values`` (arrays and Python numbers) as arrays of the one dtype NumPy's promotion
    gives them (a Python number weak: ``int8`` beside ``0.5`` is float64, as in NumPy)."""
    reference = next(v for v in values if hasattr(v, "dtype"))
    common = np.result_type(*[np.dtype(getattr(v.dtype, "_np_dtype", v.dtype)) if hasattr(v, "dtype") else v
                              for v in values])
    dtype = namespace_dtype(xp, common)
    return [(v if v.dtype == dtype else xp.astype(v, dtype)) if hasattr(v, "dtype")
            else xp.asarray(v, dtype=dtype, device=device_of(reference)) for v in values]


def _nan_skipping_fallback(extreme, logical):
    """NumPy's fmax (``extreme`` "maximum", ``logical`` "logical_or") or fmin: the extreme
    of two values, the other one where one is NaN (NaN where both are)."""

    def fallback(xp):
        def function(x, y):
            x, y = _promoted(xp, (x, y))
            kind = dtype_kind(x.dtype)
            if kind == "b":
                return getattr(xp, logical)(x, y)
            chosen = getattr(xp, extreme)(x, y)
            if kind in "iu":
                return chosen
            return xp.where(xp.isnan(y), x, xp.where(xp.isnan(x), y, chosen))
        return function
    return fallback


def _float_power_fallback(xp):
    def float_power(x, y):
        """``x ** y`` in float64 (complex128 where either is complex), as NumPy computes it."""
        complex_ = any(dtype_kind(v.dtype) == "c" if hasattr(v, "dtype") else isinstance(v, complex) for v in (x, y))
        wide = xp.complex128 if complex_ else xp.float64
        reference = x if hasattr(x, "dtype") else y
        x, y = (xp.astype(v, wide) if hasattr(v, "dtype") else xp.asarray(v, dtype=wide, device=device_of(reference))
                for v in (x, y))
        return xp.pow(x, y)
    return float_power


_LN2 = math.log(2.0)


def _logaddexp2_fallback(xp):
    def logaddexp2(x, y):
        """log2(2**x + 2**y) = logaddexp(x ln 2, y ln 2) / ln 2."""
        x, y = _floating_of(xp, x, y if hasattr(y, "dtype") else None), _floating_of(xp, y, x)
        return xp.logaddexp(x * _LN2, y * _LN2) / _LN2
    return logaddexp2


def _scaled_fallback(factor):
    def fallback(xp):
        def scaled(x):
            """``x`` times a constant (degrees to radians, or back), in x's floating dtype."""
            return _floating_of(xp, x) * factor
        return scaled
    return fallback


def _sinc_fallback(xp):
    def sinc(x):
        """sin(pi x) / (pi x), NumPy's way: x = 0 read as 1e-20 (integers as float64)."""
        if is_integer_dtype(x.dtype):
            x = xp.astype(x, xp.float64)
        y = math.pi * xp.where(x == 0, xp.asarray(1.0e-20, dtype=x.dtype, device=device_of(x)), x)
        return xp.sin(y) / y
    return sinc


def _expit_fallback(xp):
    def expit(x):
        """The logistic sigmoid 1 / (1 + exp(-x)) without overflow: each branch of the select
        sees only the inputs of its own sign (``exp`` of a non-positive number)."""
        x = _floating_of(xp, x)
        zero = xp.zeros_like(x)
        positive = x >= 0
        e = xp.exp(xp.where(positive, zero, x))
        return xp.where(positive, 1.0 / (1.0 + xp.exp(-xp.where(positive, x, zero))), e / (1.0 + e))
    return expit


def _logit_fallback(xp):
    def logit(p):
        """log(p / (1 - p)): -inf at 0, inf at 1, NaN outside [0, 1]."""
        p = _floating_of(xp, p)
        return xp.log(p / (1.0 - p))
    return logit


def _chebyshev_sum(t, coefficients):
    """Cephes' Chebyshev sum (highest order first, the constant term halved) at ``t`` by
    Clenshaw's recurrence b_k = t b_(k+1) - b_(k+2) + c_k, the result (b_0 - b_2) / 2: NumPy's
    steps in its i0, so its values."""
    current, previous, before = coefficients[0], 0.0, 0.0
    for coefficient in coefficients[1:]:
        before, previous = previous, current
        current = t * previous - before + coefficient
    return 0.5 * (current - before)


def _i0_fallback(xp):
    def i0(x):
        """The modified Bessel function of the first kind of order 0, by NumPy's steps: Cephes'
        expansions of exp(-x) I0(x) on [0, 8] and of exp(-x) sqrt(x) I0(x) beyond, at |x|."""
        size = xp.abs(_floating_of(xp, x))
        inside = size <= 8.0  # NaN goes to the far branch, and stays NaN
        near = xp.where(inside, size, xp.zeros_like(size))
        far = xp.where(inside, xp.full_like(size, 8.0), size)
        near_value = xp.exp(near) * _chebyshev_sum(near / 2.0 - 2.0, I0_NEAR)
        far_value = xp.exp(far) * _chebyshev_sum(32.0 / far - 2.0, I0_FAR) / xp.sqrt(far)
        return xp.where(inside, near_value, far_value)
    return i0


# Cephes' Chebyshev coefficients of I0 (i0.c), as NumPy's i0 takes them: exp(-x) I0(x) on [0, 8] in
# T_k(x / 2 - 2), and exp(-x) sqrt(x) I0(x) on [8, inf) in T_k(32 / x - 2); highest order first
I0_NEAR = (
    -4.4153416464793395e-18, 3.3307945188222384e-17, -2.431279846547955e-16, 1.715391285555133e-15,
    -1.1685332877993451e-14, 7.676185498604936e-14, -4.856446783111929e-13, 2.95505266312964e-12,
    -1.726826291441556e-11, 9.675809035373237e-11, -5.189795601635263e-10, 2.6598237246823866e-09,
    -1.300025009986248e-08, 6.046995022541919e-08, -2.670793853940612e-07, 1.1173875391201037e-06,
    -4.4167383584587505e-06, 1.6448448070728896e-05, -5.754195010082104e-05, 0.00018850288509584165,
    -0.0005763755745385824, 0.0016394756169413357, -0.004324309995050576, 0.010546460394594998,
    -0.02373741480589947, 0.04930528423967071, -0.09490109704804764, 0.17162090152220877,
    -0.3046826723431984, 0.6767952744094761,
)
I0_FAR = (
    -7.233180487874754e-18, -4.830504485944182e-18, 4.46562142029676e-17, 3.461222867697461e-17,
    -2.8276239805165836e-16, -3.425485619677219e-16, 1.7725601330565263e-15, 3.8116806693526224e-15,
    -9.554846698828307e-15, -4.150569347287222e-14, 1.54008621752141e-14, 3.8527783827421426e-13,
    7.180124451383666e-13, -1.7941785315068062e-12, -1.3215811840447713e-11, -3.1499165279632416e-11,
    1.1889147107846439e-11, 4.94060238822497e-10, 3.3962320257083865e-09, 2.266668990498178e-08,
    2.0489185894690638e-07, 2.8913705208347567e-06, 6.889758346916825e-05, 0.0033691164782556943,
    0.8044904110141088,
)


_FALLBACKS = {"einsum": _einsum_fallback, "sliding_window_view": _sliding_window_fallback,
              "take_along_axis": _take_along_axis_fallback, "bincount": _bincount_fallback,
              "fmod": _fmod_fallback, "ldexp": _ldexp_fallback, "spacing": _spacing_fallback,
              "fmax": _nan_skipping_fallback("maximum", "logical_or"),
              "fmin": _nan_skipping_fallback("minimum", "logical_and"),
              "float_power": _float_power_fallback, "logaddexp2": _logaddexp2_fallback,
              "deg2rad": _scaled_fallback(math.pi / 180.0), "rad2deg": _scaled_fallback(180.0 / math.pi),
              "sinc": _sinc_fallback, "i0": _i0_fallback, "expit": _expit_fallback, "logit": _logit_fallback}


def parse_einsum(subscripts: str, ndims: Sequence[int]) -> tuple[list[str], str]:
    """Split einsum ``subscripts`` into per-operand terms and the output term.

    Ellipses are replaced by upper-case letters (one per broadcast axis), so the
    result uses plain letters only.  Implicit output = letters used once, sorted.
    """
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        lhs, output = subscripts.split("->")
    else:
        lhs, output = subscripts, None
    terms = lhs.split(",")
    if len(terms) != len(ndims):
        raise ValueError(f"einsum: {len(terms)} terms for {len(ndims)} operands")
    ellipsis_rank = max(
        (ndim - len(term.replace("...", "")) for term, ndim in zip(terms, ndims) if "..." in term),
        default=0,
    )
    broadcast = "".join(chr(ord("Z") - i) for i in range(ellipsis_rank))[::-1]
    expanded = []
    for term, ndim in zip(terms, ndims):
        if "..." in term:
            rank = ndim - len(term.replace("...", ""))
            term = term.replace("...", broadcast[len(broadcast) - rank:] if rank else "")
        expanded.append(term)
    if output is None:
        counts = {}
        for term in expanded:
            for letter in term:
                counts[letter] = counts.get(letter, 0) + 1
        output = broadcast + "".join(sorted(l for l, c in counts.items() if c == 1 and l not in broadcast))
    else:
        output = output.replace("...", broadcast)
    return expanded, output


def normalize_axis(axis: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    """A tuple of non-negative axes for ``axis`` (None = all) of an ``ndim`` array."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)) or (isinstance(axis, np.ndarray) and axis.ndim == 1):
        return tuple(_one_axis(a, ndim) for a in axis)  # np.moveaxis takes an array of axes too
    return (_one_axis(axis, ndim),)


def _one_axis(axis, ndim):
    axis = int(axis)
    if not -ndim <= axis < max(ndim, 1):
        raise np.exceptions.AxisError(axis, ndim)
    return axis % ndim if ndim else 0


def namespace_dtype(xp: ModuleType, dtype: Any) -> Any:
    """``dtype`` (a NumPy dtype, type or name) as the dtype object of namespace ``xp``."""
    if xp is numpy_namespace or dtype is None:
        return dtype
    if not isinstance(dtype, (np.dtype, type, str)):
        return dtype  # already the namespace's own dtype
    return getattr(xp, np.dtype(dtype).name)


def dtype_kind(dtype: Any) -> str:
    """NumPy's one-letter kind ("b", "i", "u", "f", "c") of any backend's dtype."""
    kind = getattr(dtype, "kind", None)
    if kind is None:  # array-api-strict wraps NumPy dtypes
        kind = np.dtype(getattr(dtype, "_np_dtype", dtype)).kind
    return kind
