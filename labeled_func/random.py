"""Random draws that know about vmap: ``seed``, ``normal``, ``uniform``.

Under ``vmap(..., randomness=...)``: "error" raises RandomnessError, "different"
draws independently per example, "same" draws once and shares it.  NumPy's own
``np.random`` sees no batch: vmap raises RandomnessError when the function draws from
NumPy's global state under "error" or "different" (vmap.py), and cannot see a Generator
of the user's own (pass it here as ``rng=``; see docs/vmap.md).
"""
from __future__ import annotations

import contextlib
import contextvars
import copy
import ctypes
import functools
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from .engine import batch_value, current_levels
from .engine.errors import RandomnessError, UnsupportedOperationError

__all__ = ["seed", "normal", "uniform", "get_state", "set_state", "numpy_state", "numpy_drew_since"]

_lock = threading.Lock()  # one generator shared by threads: draws take turns
_generator = np.random.default_rng()


def seed(n: int | Sequence[int] | np.random.SeedSequence | None) -> None:
    """Reset the default generator to ``n`` (like ``np.random.seed``).

    Parameters
    ----------
    n : int, sequence of int, numpy.random.SeedSequence or None
        The seed, as :func:`numpy.random.default_rng` takes it; None draws fresh
        entropy from the operating system.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        A negative integer seed.
    TypeError
        A seed that is not an integer, a sequence of them or a SeedSequence.

    Examples
    --------
    The same seed gives the same draws:

    >>> import labeled_func as lf
    >>> lf.random.seed(0); a = lf.random.normal(sizes={"member": 3})
    >>> lf.random.seed(0); b = lf.random.normal(sizes={"member": 3})
    >>> bool((a == b).all())
    True
    """
    global _generator
    with _lock:
        _generator = np.random.default_rng(n)
        trace = _TRACE.get()
        if trace is not None:  # inside lf.jit: the draws after it are the same at every call
            trace.made.append(_generator)


def get_state() -> dict[str, Any]:
    """The default generator's state, for :func:`set_state` (to reproduce draws).

    Returns
    -------
    dict
        The state of the default generator's bit generator, as NumPy's
        ``bit_generator.state`` gives it (a copy: later draws leave it alone).

    Examples
    --------
    >>> import labeled_func as lf
    >>> state = lf.random.get_state()
    >>> state["bit_generator"]
    'PCG64'
    """
    return _generator.bit_generator.state


def set_state(state: dict[str, Any]) -> None:
    """Put the default generator back in a state from :func:`get_state`.

    Parameters
    ----------
    state : dict
        A state returned by :func:`get_state`.

    Returns
    -------
    None

    Raises
    ------
    TypeError
        ``state`` is not a dict.
    ValueError
        ``state`` is not a state of the default generator's bit generator (PCG64).

    Examples
    --------
    The draws after a saved state, drawn again:

    >>> import labeled_func as lf
    >>> state = lf.random.get_state()
    >>> first = lf.random.uniform(sizes={"member": 3})
    >>> lf.random.set_state(state)
    >>> bool((lf.random.uniform(sizes={"member": 3}) == first).all())
    True
    """
    with _lock:
        _generator.bit_generator.state = state
        trace = _TRACE.get()
        if trace is not None:  # inside lf.jit: as seed()
            trace.made.append(_generator)


def normal(sizes: Mapping[str, int] | None = None, *, like: xr.DataArray | xr.Variable | None = None,
           loc: float = 0.0, scale: float = 1.0, rng: np.random.Generator | None = None) -> xr.DataArray:
    """Normal draws as a DataArray with dims ``sizes`` (a dict) or those of ``like``
    (and its floating dtype: float32 draws for a float32 ``like``).

    Under ``lf.vmap(..., randomness=...)``: ``"different"`` draws independently per
    example, ``"same"`` draws once for all of them, ``"error"`` (the default) raises.

    Parameters
    ----------
    sizes : mapping of str to int, optional
        The dims of the draws and their sizes, ``{"member": 10}``; none: one draw, 0-d.
    like : DataArray or Variable, optional
        Instead of ``sizes``: draws with its dims, sizes and coords.
    loc : float
        The mean.
    scale : float
        The standard deviation.
    rng : numpy.random.Generator, optional
        Draw from this generator instead of the default one (:func:`seed`).

    Returns
    -------
    xarray.DataArray
        The draws, with the dims of ``sizes`` (in their order) or of ``like``; under a
        vmap with ``randomness="different"`` one per example.

    Raises
    ------
    ValueError
        Both ``sizes`` and ``like`` are given, or ``like`` is not a DataArray or Variable
        (a Dataset, say).
    lf.RandomnessError
        Inside ``lf.vmap`` (or ``lf.jacfwd``, ``lf.hessian``) with ``randomness="error"``.

    Examples
    --------
    >>> import numpy as np, labeled_func as lf
    >>> lf.random.normal(sizes={"member": 4}).sizes
    Frozen({'member': 4})

    With a generator of one's own, the draws are that generator's:

    >>> draws = lf.random.normal(sizes={"member": 3}, loc=1.0, scale=2.0, rng=np.random.default_rng(7))
    >>> bool((draws.values == np.random.default_rng(7).normal(1.0, 2.0, 3)).all())
    True

    A standard deviation of 0 gives the mean:

    >>> lf.random.normal(sizes={"member": 2}, loc=5.0, scale=0.0).values.tolist()
    [5.0, 5.0]
    """
    return _draw("normal", lambda g, shape: g.normal(loc, scale, shape), sizes, like, rng)


def uniform(sizes: Mapping[str, int] | None = None, *, like: xr.DataArray | xr.Variable | None = None,
            low: float = 0.0, high: float = 1.0, rng: np.random.Generator | None = None) -> xr.DataArray:
    """Uniform draws in [low, high) as a DataArray with dims ``sizes`` or those of ``like``.

    Under ``lf.vmap`` as :func:`normal`'s.

    Parameters
    ----------
    sizes : mapping of str to int, optional
        The dims of the draws and their sizes, ``{"member": 10}``; none: one draw, 0-d.
    like : DataArray or Variable, optional
        Instead of ``sizes``: draws with its dims, sizes and coords (and its floating
        dtype).
    low : float
        The lower bound (included).
    high : float
        The upper bound (excluded).
    rng : numpy.random.Generator, optional
        Draw from this generator instead of the default one (:func:`seed`).

    Returns
    -------
    xarray.DataArray
        The draws, with the dims of ``sizes`` or of ``like``.

    Raises
    ------
    ValueError
        Both ``sizes`` and ``like`` are given, or ``like`` is not a DataArray or Variable.
    lf.RandomnessError
        Inside ``lf.vmap`` (or ``lf.jacfwd``, ``lf.hessian``) with ``randomness="error"``.

    Examples
    --------
    >>> import numpy as np, xarray as xr, labeled_func as lf
    >>> x = xr.DataArray(np.zeros((2, 3)), dims=("y", "x"), coords={"x": [10, 20, 30]})
    >>> u = lf.random.uniform(like=x, low=2.0, high=3.0)
    >>> u.dims, u.x.values.tolist(), bool(((u >= 2.0) & (u < 3.0)).all())
    (('y', 'x'), [10, 20, 30], True)

    One independent draw per example under ``vmap``:

    >>> per_member = lf.vmap(lambda m: lf.random.uniform(), dim="member", randomness="different")
    >>> per_member(xr.DataArray(np.zeros(5), dims="member")).sizes
    Frozen({'member': 5})
    """
    return _draw("uniform", lambda g, shape: g.uniform(low, high, shape), sizes, like, rng)


def _sample(sample, rng, shape, dtype):
    """Draws of ``shape`` from ``rng`` or the default generator (as it is at the call)."""
    generator = rng if rng is not None else _generator
    with _lock:
        value = sample(generator, shape)
    if dtype is not None and dtype != value.dtype:  # float32 like float32 (drawn in float64)
        value = value.astype(dtype)
    return value


# --- draws under lf.jit --------------------------------------------------------------------------
# A compiled program must draw what the function draws at each call.  A draw from a generator
# that lives across calls (the default one, one of the user's made outside the function) is a
# source of the program: each run draws from that generator as it is then.  A draw from a
# generator that the call itself makes (``seed(n)`` inside the function, or
# ``rng=np.random.default_rng(5)`` made inside) gives the same values at every call: it is a
# constant of the program.  Which generators the call made is known for the default one (seed()
# and set_state() say so) and, for the user's, once the function has returned: a generator that
# nothing but the recording holds any more was made by the call.
_TRACE = contextvars.ContextVar("lf_random_trace", default=None)


class _Holder:
    """The recording's only hold on a user's generator (counted by :func:`settle_draws`)."""

    __slots__ = ("generator",)

    def __init__(self, generator):
        self.generator = generator


def _held_once():
    """``sys.getrefcount`` of an object that only one attribute holds (it varies with the
    Python version)."""
    holder = _Holder(object())
    return sys.getrefcount(holder.generator)


_HELD_ONCE = _held_once()


class _Trace:
    """What the draws of one lf.jit trace drew from."""

    def __init__(self, level):
        self.level = level
        self.made = []  # default generators that seed()/set_state() made during the trace
        self.holders = {}  # id -> _Holder of a user's generator
        self.draws = []  # (holder, tracer, value, in a loop's body)


@contextlib.contextmanager
def recorded_draws(level):
    """Within: the draws of lf.jit's recording ``level`` are noted; then :func:`settle_draws`."""
    trace = _Trace(level)
    token = _TRACE.set(trace)
    try:
        yield trace
    finally:
        _TRACE.reset(token)


def settle_draws(trace):
    """After the traced function returned: the draws from generators the call made become
    constants of the program, and a default generator seeded by the call is left, after each
    run, in the state the call leaves it in (as the function leaves it)."""
    for holder in trace.holders.values():
        if sys.getrefcount(holder.generator) > _HELD_ONCE:
            continue  # held elsewhere: it lives across calls, each run draws from it
        for draw_holder, tracer, value, looped in trace.draws:
            if draw_holder is holder:
                if looped:
                    raise UnsupportedOperationError(
                        "lf.random draws inside an lf.while_loop under lf.jit from a generator made inside the "
                        "function: lf.jit records the loop's body once, and cannot start that generator again "
                        "at each call. Make the generator outside the function (or pass it in), or seed the "
                        "default one with lf.random.seed outside.")
                trace.level.settle(tracer, value)
        holder.generator = None
    with _lock:
        if any(made is _generator for made in trace.made):
            final = copy.deepcopy(_generator)
            trace.level.effect(functools.partial(_leave_default, final))


def _leave_default(final):
    """The default generator as a call that seeded it left it (a copy of ``final``)."""
    global _generator
    with _lock:
        _generator = copy.deepcopy(final)


def _recorded(recording, sample, rng, shape, dtype, value):
    """``value``, this trace's draw, as lf.jit's recording ``recording`` keeps it."""
    trace = _TRACE.get()
    if trace is None or trace.level is not recording:  # pragma: no cover - every recording notes its draws
        return recording.source(functools.partial(_sample, sample, rng, shape, dtype), value)
    if rng is None:
        if any(made is _generator for made in trace.made):  # seeded by this call: the same every call
            if recording.in_loop_body:
                raise UnsupportedOperationError(
                    "lf.random draws inside an lf.while_loop under lf.jit after lf.random.seed() inside the "
                    "function: lf.jit records the loop's body once, and cannot seed the generator again at "
                    "each call. Seed outside the function.")
            return value
        return recording.source(functools.partial(_sample, sample, None, shape, dtype), value)
    holder = trace.holders.get(id(rng))
    if holder is None:
        holder = trace.holders[id(rng)] = _Holder(rng)
    tracer = recording.source(functools.partial(_held_sample, sample, holder, shape, dtype), value)
    trace.draws.append((holder, tracer, value, recording.in_loop_body))
    return tracer


_BOTH_BRANCHES = contextvars.ContextVar("lf_random_both_branches", default=False)


@contextlib.contextmanager
def both_branches():
    """Within: lf.cond runs both of its branches for a predicate that only lf.jit traces (the
    function as it is would run one)."""
    token = _BOTH_BRANCHES.set(True)
    try:
        yield
    finally:
        _BOTH_BRANCHES.reset(token)


def _before_recorded_draw(name, recording, rng):
    """Before a draw that lf.jit's ``recording`` records: refused inside lf.cond's branches
    (both are recorded and both would draw at every call, where the function draws in one);
    in a loop's recording, the generator's state noted, to be put back once recorded."""
    if _BOTH_BRANCHES.get():
        raise UnsupportedOperationError(
            f"lf.random.{name} inside a branch of lf.cond under lf.jit, with a predicate that lf.jit traces: "
            "lf.jit records both branches and runs both at every call, so both would draw (the function "
            "draws in the branch it takes). Draw before lf.cond and pass the draws to the branches as operands.")
    if recording.in_loop_body:
        generator = rng if rng is not None else _generator
        bit_generator = getattr(generator, "bit_generator", None)
        if bit_generator is not None:
            recording.rewind_after_loop(id(generator), functools.partial(_put_state, bit_generator,
                                                                         bit_generator.state))


def _put_state(bit_generator, state):
    with _lock:
        bit_generator.state = state


def _held_sample(sample, holder, shape, dtype):
    return _sample(sample, holder.generator, shape, dtype)


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
    recording = next((level for level in active_levels if level.abstract), None)
    if recording is not None:
        _before_recorded_draw(name, recording, rng)
    value = _sample(sample, rng, full_shape, dtype)
    if recording is not None:  # lf.jit: drawn at every call of the compiled program, as the function would
        value = _recorded(recording, sample, rng, full_shape, dtype, value)
    for level in different:  # outermost first: each wraps the one before
        value = batch_value(level, value)
    return xr.DataArray(value, dims=dims, coords=coords)


# --- NumPy's global random state, watched by vmap --------------------------------------------------
# np.random.get_state() copies the Mersenne Twister key element by element (~30 us); the
# bytes of the state behind it read in under 1 us.  They miss one draw: a normal taken from
# the legacy cache (normals come in pairs, the second waits without moving the state), so
# whether one waits is read with get_state(), unless the bytes are those of the last time
# it was read and none waited then (a cached normal appears only with a draw).
_MT_STATE_BYTES = 624 * 4 + 4  # mt19937_state: uint32 key[624], int pos
_last_read = None  # (state bytes, a normal was cached): the last get_state(), per process


def numpy_state() -> Any:
    """A token of NumPy's global random state now, for :func:`numpy_drew_since`.

    ``lf.vmap`` reads it around a call to tell whether the function drew from
    ``np.random`` (which it cannot batch).  Cheap: under a microsecond for NumPy's
    default Mersenne Twister.

    Returns
    -------
    Any
        An opaque token: compare it with :func:`numpy_drew_since` only.

    Examples
    --------
    >>> import numpy as np, labeled_func as lf
    >>> token = lf.random.numpy_state()
    >>> lf.random.numpy_drew_since(token)
    False
    >>> _ = np.random.random()
    >>> lf.random.numpy_drew_since(token)
    True
    """
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


def numpy_drew_since(token: Any) -> bool:
    """Whether anything drew from NumPy's global random state since ``token``.

    Parameters
    ----------
    token : Any
        A token from :func:`numpy_state`.

    Returns
    -------
    bool
        True when NumPy's global random state moved (or a cached normal was used) since.

    Examples
    --------
    A generator of one's own leaves NumPy's global state alone:

    >>> import numpy as np, labeled_func as lf
    >>> token = lf.random.numpy_state()
    >>> _ = np.random.default_rng(0).random()
    >>> lf.random.numpy_drew_since(token)
    False
    """
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
