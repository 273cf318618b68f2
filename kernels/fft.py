"""Discrete Fourier transforms: three primitives, each linear, with its transpose.

``fft_c2c`` (complex to complex, forward or inverse), ``fft_r2c`` (real input, the
non-negative half of the spectrum along the last transformed axis) and ``fft_c2r`` (its
inverse: a half spectrum to a real signal) each transform over ``axes`` (non-negative
ints) with lengths ``sizes`` (the input cropped or zero-padded to them first, as NumPy's
``n=`` / ``s=``; for ``fft_c2r`` the lengths of the output) and NumPy's ``norm``
("backward", "ortho", "forward").  NumPy's ``numpy.fft`` functions (fft, ifft, rfft,
irfft, their 2-d and n-d forms, hfft, ihfft, fftshift) are built from these in
``labeled_func/engine/numpy/fft.py``.

Transforms are linear: the JVP transforms the tangent.  The VJP is the transpose for
the real bilinear pairing Re(w t) of ``kernels/elementwise.py``'s complex convention:
the DFT matrix is symmetric, so the transpose of a transform is the same transform
(same ``norm``) followed by the transpose of the cropping / padding; the half spectra
add the real part (``fft_r2c``: its input is real) and the weights 1, 2, ..., 2, 1 of the
bins that stand for two (``fft_c2r``: the bins above the half are the conjugates of
those below).
"""
from __future__ import annotations

from . import elementwise as ew
from .backend import device_of, dtype_kind, namespace, namespace_dtype, numpy_namespace
from .core import linear_rules, reshape, shifted
from .indexing import getitem_static
from .primitive import Primitive
from .shape import pad

__all__ = ["fft_c2c", "fft_r2c", "fft_c2r", "half_length"]

NORMS = ("backward", "ortho", "forward")


def half_length(n: int) -> int:
    """The bins of a real signal of length ``n`` that its half spectrum keeps."""
    return n // 2 + 1


def _complex_dtype(xp, dtype):
    """The complex dtype of a real ``dtype``'s precision (single stays single)."""
    name = "complex64" if str(getattr(dtype, "_np_dtype", dtype)).endswith("32") else "complex128"
    return namespace_dtype(xp, name)


def _as_complex(xp, x):
    """The standard's complex transforms take complex input only (NumPy also real)."""
    if xp is numpy_namespace or dtype_kind(x.dtype) == "c":
        return x
    return xp.astype(x, _complex_dtype(xp, x.dtype))


def _batch(prim):
    def rule(axis_size, values, batched, *, axes, **params):
        return prim.bind(values[0], axes=shifted(axes), **params), True

    return rule


def _resize(y, axes, lengths):
    """``y`` cropped or zero-padded at the end of each of ``axes`` to ``lengths``: the
    transpose of what a transform did to its input (the transpose of a crop is a pad)."""
    for axis, length in zip(axes, lengths):
        size = y.shape[axis]
        if size > length:
            y = getitem_static(y, (slice(None),) * axis + (slice(0, length),))
        elif size < length:
            widths = tuple((0, length - size) if a == axis else (0, 0) for a in range(y.ndim))
            y = pad.bind(y, pad_width=widths, constant_values=((0, 0),) * y.ndim)
    return y


# --- complex to complex --------------------------------------------------------------------
def _c2c_impl(x, *, axes, sizes, norm, forward):
    xp = namespace(x)
    transform = xp.fft.fftn if forward else xp.fft.ifftn
    return transform(_as_complex(xp, x), s=sizes, axes=axes, norm=norm)


def _c2c_transpose(g, x, *, axes, sizes, norm, forward):
    """The DFT matrix is symmetric: the same transform, then the crop / pad undone."""
    out = fft_c2c.bind(g, axes=axes, sizes=sizes, norm=norm, forward=forward)
    return _resize(out, axes, [x.shape[a] for a in axes])


fft_c2c = Primitive("fft_c2c", _c2c_impl)
fft_c2c.batch = _batch(fft_c2c)
linear_rules(fft_c2c, _c2c_transpose)


# --- real to half spectrum -----------------------------------------------------------------------
def _r2c_impl(x, *, axes, sizes, norm):
    return namespace(x).fft.rfftn(x, s=sizes, axes=axes, norm=norm)


def _r2c_transpose(g, x, *, axes, sizes, norm):
    """The half spectrum is the first rows of the full one: the full forward transform of
    ``g`` zero-padded to the whole length (the c2c transform pads), real part (the
    input is real), the crop / pad undone."""
    out = ew.real.bind(fft_c2c.bind(g, axes=axes, sizes=sizes, norm=norm, forward=True))
    return _resize(out, axes, [x.shape[a] for a in axes])


fft_r2c = Primitive("fft_r2c", _r2c_impl)
fft_r2c.batch = _batch(fft_r2c)
linear_rules(fft_r2c, _r2c_transpose)


# --- half spectrum to real -----------------------------------------------------------------------
def _c2r_impl(x, *, axes, sizes, norm):
    xp = namespace(x)
    return xp.fft.irfftn(_as_complex(xp, x), s=sizes, axes=axes, norm=norm)


def _pair_weights(like, n, axis):
    """1 for the bins that stand for themselves (0, and n/2 of an even n), 2 for those
    that also stand for their conjugate above the half; shaped to scale ``axis``."""
    xp = namespace(like)
    count = half_length(n)
    weights = [1.0] + [2.0] * (count - 1)
    if n % 2 == 0 and count > 1:
        weights[-1] = 1.0
    dtype = like.dtype if dtype_kind(like.dtype) == "f" else None
    values = xp.asarray(weights, dtype=dtype, device=device_of(like))
    return reshape.bind(values, shape=(count,) + (1,) * (like.ndim - 1 - axis))


def _c2r_transpose(g, x, *, axes, sizes, norm):
    """y = Re(sum_k c_k a_k e^(2 pi i jk/n)) scaled: the inverse transform of ``g`` (same
    norm), cropped to the half spectrum, times the pair weights c; the crop / pad undone."""
    full = fft_c2c.bind(g, axes=axes, sizes=sizes, norm=norm, forward=False)
    last = axes[-1]
    half = getitem_static(full, (slice(None),) * last + (slice(0, half_length(sizes[-1])),))
    weighted = ew.multiply.bind(half, _pair_weights(g, sizes[-1], last))
    return _resize(weighted, axes, [x.shape[a] for a in axes])


fft_c2r = Primitive("fft_c2r", _c2r_impl)
fft_c2r.batch = _batch(fft_c2r)
linear_rules(fft_c2r, _c2r_transpose)
