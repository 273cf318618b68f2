"""``numpy.fft`` with NumPy's signatures: fft, ifft, rfft, irfft, hfft, ihfft, their 2-d
and n-d forms (``n=`` / ``s=``, ``axis=`` / ``axes=``, ``norm=``), fftshift and ifftshift.

Each transform is one of the three primitives of ``kernels/fft.py`` (complex to complex,
real to half spectrum, half spectrum to real) over explicit axes and lengths; hfft and
ihfft are those of the conjugate with the norm's direction swapped, as NumPy defines
them; the shifts are rolls.  ``fftfreq`` / ``rfftfreq`` take no array: they are
constants and never reach a tracer.
"""
from __future__ import annotations

import numpy as np

from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import fft as kf
from labeled_func_kernels import shape as ks
from labeled_func_kernels.backend import is_integer_dtype, namespace, normalize_axis

from ..errors import UnsupportedOperationError
from .dispatch import asarray, implements, kind

__all__ = []

_SWAPPED = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def _array(a):
    """Lists as arrays; integers and booleans as float64, as NumPy transforms them."""
    a = asarray(a)
    if not hasattr(a, "dtype"):
        a = np.asarray(a)
    if is_integer_dtype(a.dtype):
        a = ew.astype.bind(a, dtype=namespace(a).float64)
    return a


def _norm(norm, name):
    norm = "backward" if norm is None else norm
    if norm not in kf.NORMS:
        raise ValueError(f"numpy.fft.{name}: norm={norm!r} is not one of {kf.NORMS} (or None)")
    return norm


def _length(n, name, what="n"):
    if n is None:
        return None
    if isinstance(n, bool) or int(n) != n or int(n) < 1:
        raise ValueError(f"numpy.fft.{name}: {what}={n!r} is not a valid number of data points (a positive int)")
    return int(n)


def _one_axis(a, n, axis, name, default=None):
    """(axes, sizes) of a 1-d transform: ``n`` None takes the axis length (or ``default``
    of that length: irfft's 2 (m - 1))."""
    axes = normalize_axis(axis, a.ndim)
    n = _length(n, name)
    if n is None:
        size = a.shape[axes[0]]
        n = size if default is None else default(size)
        _length(n, name, "the default n")
    return axes, (n,)


def _many_axes(a, s, axes, name, default=None):
    """(axes, sizes) of an n-d transform, by NumPy's rules: no ``axes`` means the last
    ``len(s)`` axes (all axes without ``s``); ``default`` gives the last length where ``s``
    is None (irfftn's 2 (m - 1))."""
    if axes is None:
        axes = tuple(range(a.ndim)) if s is None else tuple(range(a.ndim - len(s), a.ndim))
    axes = normalize_axis(tuple(axes) if not isinstance(axes, int) else (axes,), a.ndim)
    if len(set(axes)) != len(axes):
        raise UnsupportedOperationError(f"numpy.fft.{name} with a repeated axis ({axes}) is not supported on traced arrays")
    if not axes:
        raise UnsupportedOperationError(f"numpy.fft.{name} over no axis is not supported on traced arrays")
    if s is None:
        sizes = [a.shape[ax] for ax in axes]
        if default is not None:
            sizes[-1] = default(sizes[-1])
    else:
        s = (s,) if isinstance(s, int) else tuple(s)
        if len(s) != len(axes):
            raise ValueError(f"numpy.fft.{name}: s={s} and axes={axes} have different lengths")
        sizes = [a.shape[ax] if size is None else size for ax, size in zip(axes, s)]
    return axes, tuple(_length(size, name, "s") for size in sizes)


def _irfft_length(m):
    return 2 * (m - 1)


def _complex_transform(forward):
    def transform(a, axes, sizes, norm):
        return kf.fft_c2c.bind(a, axes=axes, sizes=sizes, norm=norm, forward=forward)

    return transform


def _real_to_half(a, axes, sizes, norm):
    if kind(a) == "c":
        raise TypeError("numpy.fft: rfft, rfft2, rfftn and ihfft transform real data, the input is complex "
                        "(use fft, fft2, fftn)")
    return kf.fft_r2c.bind(a, axes=axes, sizes=sizes, norm=norm)


def _half_to_real(a, axes, sizes, norm):
    return kf.fft_c2r.bind(a, axes=axes, sizes=sizes, norm=norm)


def _register_1d(function, transform, default=None):
    name = function.__name__

    def handler(a, n=None, axis=-1, norm=None, out=None):
        a = _array(a)
        axes, sizes = _one_axis(a, n, axis, name, default)
        return transform(a, axes, sizes, _norm(norm, name))

    implements(function)(handler)


def _register_nd(function, transform, default=None, default_axes=None):
    name = function.__name__

    def handler(a, s=None, axes=default_axes, norm=None, out=None):
        a = _array(a)
        axes, sizes = _many_axes(a, s, axes, name, default)
        return transform(a, axes, sizes, _norm(norm, name))

    implements(function)(handler)


for _functions, _transform, _default in [
    ((np.fft.fft, np.fft.fftn, np.fft.fft2), _complex_transform(True), None),
    ((np.fft.ifft, np.fft.ifftn, np.fft.ifft2), _complex_transform(False), None),
    ((np.fft.rfft, np.fft.rfftn, np.fft.rfft2), _real_to_half, None),
    ((np.fft.irfft, np.fft.irfftn, np.fft.irfft2), _half_to_real, _irfft_length),
]:
    one, many, two = _functions
    _register_1d(one, _transform, _default)
    _register_nd(many, _transform, _default)
    _register_nd(two, _transform, _default, default_axes=(-2, -1))


@implements(np.fft.hfft)
def _hfft(a, n=None, axis=-1, norm=None, out=None):
    """The real signal of a Hermitian-symmetric half spectrum: irfft of the conjugate,
    the norm's direction swapped."""
    a = _array(a)
    axes, sizes = _one_axis(a, n, axis, "hfft", _irfft_length)
    if kind(a) == "c":
        a = ew.conj.bind(a)
    return kf.fft_c2r.bind(a, axes=axes, sizes=sizes, norm=_SWAPPED[_norm(norm, "hfft")])


@implements(np.fft.ihfft)
def _ihfft(a, n=None, axis=-1, norm=None, out=None):
    """The inverse of hfft: the conjugate of rfft, the norm's direction swapped."""
    a = _array(a)
    axes, sizes = _one_axis(a, n, axis, "ihfft")
    return ew.conj.bind(_real_to_half(a, axes, sizes, _SWAPPED[_norm(norm, "ihfft")]))


def _shift(x, axes, sign):
    axes = normalize_axis(axes, x.ndim)
    if not axes:
        return x
    shift = tuple(sign * (x.shape[axis] // 2) for axis in axes)
    return ks.roll.bind(x, shift=shift, axis=axes)


@implements(np.fft.fftshift)
def _fftshift(x, axes=None):
    """The zero frequency moved to the middle: a roll by half of each axis."""
    return _shift(asarray(x), axes, 1)


@implements(np.fft.ifftshift)
def _ifftshift(x, axes=None):
    """fftshift undone: a roll back by half of each axis."""
    return _shift(asarray(x), axes, -1)
