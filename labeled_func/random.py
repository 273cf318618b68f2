"""Random draws that know about vmap: ``seed``, ``normal``, ``uniform``.

Under ``vmap(..., randomness=...)``: "error" raises RandomnessError, "different"
draws independently per example, "same" draws once and shares it.  NumPy's own
``np.random`` sees no batch: vmap raises RandomnessError when the function draws from
NumPy's global state under "error" or "different" (vmap.py), and cannot see a Generator
of the user's own (pass it here as ``rng=``; see docs/vmap.md).
"""
from __future__ import annotations

import ctypes
import functools
import threading

import numpy as np
import xarray as xr

from .engine import BatchTracer, current_levels
from .engine.errors import RandomnessError

__all__ = ["seed", "normal", "uniform", "get_state", "set_state", "numpy_state", "numpy_drew_since"]

_lock = threading.Lock()  # one generator shared by threads: draws take turns
_generator = np.random.default_rng()


def seed(n):
    """Reset the default generator to ``n`` (like ``np.random.seed``).

    >>> import labeled_func as lf
    >>> lf.random.seed(0); a = lf.random.normal(sizes={"member": 3})
    >>> lf.random.seed(0); b = lf.random.normal(sizes={"member": 3})
    >>> bool((a == b).all())
    True
    """
    global _generator
    with _lock:
        _generator = np.random.default_rng(n)


def get_state():
    """The default generator's state (for reproducing draws)."""
    return _generator.bit_generator.state


def set_state(state):
    with _lock:
        _generator.bit_generator.state = state


def normal(sizes=None, *, like=None, loc=0.0, scale=1.0, rng=None):
    """Normal draws as a DataArray with dims ``sizes`` (a dict) or those of ``like``
    (and its floating dtype: float32 draws for a float32 ``like``).

    >>> import labeled_func as lf
    >>> lf.random.normal(sizes={"member": 4}).sizes
    Frozen({'member': 4})
    """
    return _draw("normal", lambda g, shape: g.normal(loc, scale, shape), sizes, like, rng)


def uniform(sizes=None, *, like=None, low=0.0, high=1.0, rng=None):
    """Uniform draws in [low, high) as a DataArray with dims ``sizes`` or those of ``like``."""
    return _draw("uniform", lambda g, shape: g.uniform(low, high, shape), sizes, like, rng)


def _sample(sample, rng, shape, dtype):
    """Draws of ``shape`` from ``rng`` or the default generator (as it is at the call)."""
    generator = rng if rng is not None else _generator
    with _lock:
        value = sample(generator, shape)
    if dtype is not None and dtype != value.dtype:  # float32 like float32 (drawn in float64)
        value = value.astype(dtype)
    return value


def _draw(name, sample, sizes, like, rng):
    if like is not None and sizes is not None:
        raise ValueError(f"lf.random.{name}: give sizes= or like=, not both (the draws take "
                         "their dims either from sizes or from like)")
    if like is not None and not isinstance(like, (xr.DataArray, xr.Variable)):
        raise ValueError(f"lf.random.{name}: like= must be a DataArray (the draws take its dims "
                         f"and coords), not a {type(like).__name__}; for a Dataset pass one of its "
                         "variables, e.g. like=ds['x'], or sizes=dict(ds.sizes)")
    if like is not None:
        dims, shape, coords = tuple(like.dims), tuple(like.shape), like.coords
    else:
        sizes = dict(sizes or {})
        dims, shape, coords = tuple(sizes), tuple(sizes.values()), None
    active_levels = current_levels()
    levels = [level for level in active_levels if level.batches]
    for level in levels:
        if level.randomness == "error":
            raise RandomnessError(
                f"lf.random.{name} inside vmap(randomness='error') (jacfwd and hessian vmap "
                "over tangents too): say what the draws should be: randomness='different' "
                "(independent per example) or randomness='same' (one draw shared by every "
                "example), as an argument of vmap or jacfwd; for hessian, draw outside the "
                "function and pass the draws in."
            )
    different = [level for level in levels if level.randomness == "different"]
    full_shape = tuple(level.axis_size for level in different) + shape
    dtype = np.dtype(like.dtype) if like is not None and np.dtype(like.dtype).kind == "f" else None
    value = _sample(sample, rng, full_shape, dtype)
    recording = next((level for level in active_levels if level.abstract), None)
    if recording is not None:  # lf.jit: drawn afresh at every call of the compiled program
        value = recording.source(functools.partial(_sample, sample, rng, full_shape, dtype), value)
    for level in different:  # outermost first: each wraps the one before
        value = BatchTracer(level, value)
    return xr.DataArray(value, dims=dims, coords=coords)


# --- NumPy's global random state, watched by vmap --------------------------------------------------
# np.random.get_state() copies the Mersenne Twister key element by element (~30 us); the
# bytes of the state behind it read in under 1 us.  They miss one draw: a normal taken from
# the legacy cache (normals come in pairs, the second waits without moving the state), so
# whether one waits is read with get_state(), unless the bytes are those of the last time
# it was read and none waited then (a cached normal appears only with a draw).
_MT_STATE_BYTES = 624 * 4 + 4  # mt19937_state: uint32 key[624], int pos
_last_read = None  # (state bytes, a normal was cached): the last get_state(), per process


def numpy_state():
    """A token of NumPy's global random state now, for :func:`numpy_drew_since`."""
    global _last_read
    raw = _mersenne_bytes()
    if raw is None:  # another bit generator (np.random.set_bit_generator): the full state
        return np.random.get_state(legacy=False)
    last = _last_read
    if last is not None and last[0] == raw and not last[1]:
        return raw, False
    cached = bool(np.random.get_state(legacy=False)["has_gauss"])
    _last_read = (raw, cached)
    return raw, cached


def numpy_drew_since(token):
    """Whether anything drew from NumPy's global random state since ``token``."""
    if isinstance(token, dict):
        return not _same_state(token, np.random.get_state(legacy=False))
    raw, cached = token
    if _mersenne_bytes() != raw:
        return True
    return cached and not np.random.get_state(legacy=False)["has_gauss"]


def _mersenne_bytes():
    generator = getattr(getattr(np.random.mtrand, "_rand", None), "_bit_generator", None)
    if type(generator) is not np.random.MT19937:
        return None
    return ctypes.string_at(generator.ctypes.state_address, _MT_STATE_BYTES)


def _same_state(a, b):
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return a == b
