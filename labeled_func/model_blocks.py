"""The model of a sensitivity analysis run on blocks of its design: the vmapped model, as
one ``lf.jit`` program traced in the first block and replayed in every other
(``ModelBlocks``), its outputs checked (``checked_model``: one DataArray or scalar per
example; ``check_finite``), and the ``progress=`` protocol (``Progress``).  Shared by
``dgsm`` (sensitivity.py), ``sobol`` (sobol.py) and ``morris`` (morris.py).
"""
from __future__ import annotations

import math
import re
import sys
import warnings
import weakref

import numpy as np
import xarray as xr

from .jit import Jitted, jit as lf_jit
from .vmap import vmap

RESULT_DIMS = ("param", "param_2")


STEPS_WITH_PROGRESS = 10  # model blocks when progress is on and chunk_size is not given


def check_finite(y, rows, names, first, total, caller, unit="row"):
    """Refuse model outputs ``y`` (row, element) that are not all finite: say how many rows of the
    ``total`` (this block's start at ``first``) and which, with their parameters (``rows(indices)``:
    those rows of the inputs, (k, D))."""
    finite = np.isfinite(y).all(axis=1)
    if finite.all():
        return
    bad = np.flatnonzero(~finite)
    shown = bad[:5]
    values = rows(shown)
    listed = "; ".join(f"{first + i}: " + ", ".join(f"{name}={v:.6g}" for name, v in zip(names, point))
                       for i, point in zip(shown, values))
    where = (f"in {len(bad)} of its {len(y)} {unit}s" if len(y) == total else
             f"in {len(bad)} of the {len(y)} {unit}s {first} to {first + len(y) - 1} of the {total} (one block "
             f"of them; the other blocks are not counted)")
    raise ValueError(f"sensitivity.{caller}: the model's output is not finite (NaN or infinite) {where}, and "
                     f"every result would be NaN. The {'first 5 ' if len(bad) > 5 else ''}{unit}s (0-based in the "
                     f"design) and their parameters: {listed}. Fix the model or narrow the bounds")


_READ_NAME = (re.compile(r"'Dataset' object has no attribute '([^']+)'"), re.compile(r"No variable named '([^']+)'"))


def _missing_parameter(error, names):
    """The name the model read from its example of parameters that the example lacks (from
    xarray's AttributeError / KeyError), else None."""
    text = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
    for pattern in _READ_NAME:
        found = pattern.search(text)
        if found and found.group(1) not in names:
            return found.group(1)
    return None


def checked_model(model, names, dim, caller="sobol"):
    def one(example):
        try:
            output = model(example)
        except (AttributeError, KeyError) as error:
            missing = _missing_parameter(error, names)
            if missing is None:
                raise
            raise ValueError(f"sensitivity.{caller}: the model reads {missing!r} from its parameters, which "
                             f"hold {list(names)} (the names of the bounds or problem): add {missing!r} to them, "
                             "or pass it to the model another way (a closure)") from error
        if isinstance(output, (xr.Dataset, xr.DataTree)):
            raise ValueError(f"sensitivity.{caller}: the model returned a {type(output).__name__}; return one "
                             "DataArray (or a scalar), e.g. lambda p: model(p)['y']")
        if not isinstance(output, xr.DataArray):
            if not ((hasattr(output, "shape") and hasattr(output, "dtype"))
                    or isinstance(output, (int, float, np.generic))):
                raise ValueError(f"sensitivity.{caller}: the model returned a {type(output).__name__}; return a "
                                 "scalar or one DataArray per example: for several outputs, one DataArray with "
                                 "an output dim (xr.concat([...], dim='output'))")
            if np.ndim(output):
                raise ValueError(f"sensitivity.{caller}: the model returned an array without dims for one example; "
                                 "return a scalar or a DataArray with named dims")
            return xr.DataArray(output)
        clashes = [name for name in output.dims if name in (dim,) + RESULT_DIMS or name in names]
        if clashes:
            raise ValueError(f"sensitivity.{caller}: the model's output has dims {output.dims}, and {clashes} is the "
                             f"samples' dim ({dim!r}), a dim of the result {RESULT_DIMS} or a parameter's name; "
                             "the model gets one sample: rename that output dim, or pass dim=")
        return output

    return one


# --- blocks of model evaluations: one lf.jit program, and progress ----------------------------------
_PROGRAMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # lf.jit-wrapped model -> {options: _Program}


def check_block_options(jit, progress, caller):
    if not any(jit is allowed for allowed in (None, True, False)):
        raise ValueError(f"sensitivity.{caller}: jit={jit!r} must be True, False or None")
    if not (progress is None or progress is True or progress is False or callable(progress)):
        raise ValueError(f"sensitivity.{caller}: progress={progress!r} must be None, a bool, or a callable "
                         "progress(done, total)")


def units_per_block(total, unit, chunk_size, progress):
    """Whole units (base samples, trajectories) per block: ``chunk_size`` rows rounded down to
    whole units (at least one), or a tenth of them with progress, or all of them."""
    if chunk_size is not None:
        return max(1, int(chunk_size) // unit)
    return math.ceil(total / STEPS_WITH_PROGRESS) if progress else total


class _Program:
    """The vmapped model and its lf.jit program (kept on an lf.jit-wrapped model, per options)."""

    def __init__(self, plain, options):
        self.plain, self.program, self.refused = plain, lf_jit(plain, **options), None


class ModelBlocks:
    """The vmapped model on blocks of design rows, as dgsm runs its gradients: un-jitted, or one
    ``lf.jit`` program traced in the first block and replayed in every other (each block padded
    to one size with copies of its last row, whose outputs are dropped).  ``jit=None`` jits with
    several blocks or an lf.jit-wrapped model, and runs the model un-jitted where lf.jit cannot
    trace it (with a warning for an lf.jit-wrapped model); ``True`` raises there; ``False`` never jits."""

    def __init__(self, model, names, dim, caller, jit, blocks):
        wrapped = model if isinstance(model, Jitted) else None
        self.model = model if wrapped is None else wrapped.func   # under vmap an lf.jit would run as it is
        self.dim, self.caller, self.strict = dim, caller, jit is True
        self.name = None if wrapped is None else getattr(wrapped.func, "__name__", "the model")
        if wrapped is None:
            self.kept = _Program(vmap(checked_model(self.model, names, dim, caller), dim=dim), {})
        else:
            programs = _PROGRAMS.setdefault(wrapped, {})
            key = (caller, tuple(names), dim)
            if key not in programs:
                options = {"keep_buffers": wrapped.keep_buffers, "warn_after_traces": wrapped.warn_after_traces}
                programs[key] = _Program(vmap(checked_model(self.model, names, dim, caller), dim=dim), options)
            self.kept = programs[key]
        self.jitted = jit is True or (jit is None and (blocks > 1 or wrapped is not None)
                                      and self.kept.refused is None)   # lf.jit refused it before: not again
        self.replayed = False

    def __call__(self, rows, size):
        """The outputs of the design ``rows`` (a Dataset along ``dim``), run as a block of ``size`` rows."""
        if self.jitted:
            count = rows.sizes[self.dim]
            try:   # always a copy: every block has one memory layout
                outputs = self.kept.program(rows.isel({self.dim: np.minimum(np.arange(size), count - 1)}))
            except Exception as error:
                if self.strict or self.replayed:
                    raise
                self.jitted, self.kept.refused = False, error
                if self.name is not None:
                    warnings.warn(
                        f"sensitivity.{self.caller}: lf.jit could not trace {self.name} on the design's blocks "
                        f"({type(error).__name__}: {error}); they run un-jitted. Pass the model without lf.jit, "
                        "or jit=False, to skip the attempt", stacklevel=4)
            else:
                self.replayed = True
                return outputs if count == size else outputs.isel({self.dim: slice(0, count)})
        return self.kept.plain(rows)


class Progress:
    """Reports steps done of ``total``: to a callable, a tqdm bar, or a line on stderr."""

    def __init__(self, progress, total, name="dgsm"):
        self.done, self.total, self.bar, self.callback, self.name = 0, total, None, None, name
        if progress is None or progress is False:
            return
        if callable(progress):
            self.callback = progress
        elif progress is True:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                self.callback = self._print
            else:
                self.bar = tqdm(total=total, desc=name, unit="step")
        else:
            raise ValueError(f"sensitivity.{name}: progress={progress!r} must be None, a bool, or a callable "
                             "progress(done, total)")

    def advance(self):
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)
        elif self.callback is not None:
            self.callback(self.done, self.total)

    def close(self):
        if self.bar is not None:
            self.bar.close()
        elif self.callback == self._print:
            sys.stderr.write("\n")

    def _print(self, done, total):
        sys.stderr.write(f"\r{self.name}: {done}/{total} steps")
        sys.stderr.flush()
