"""Variance-based (Sobol') sensitivity indices.

``sobol`` runs Saltelli's design through ``lf.vmap`` (in memory, or lazily on Dask with
``chunks=``) and gives SALib's first, total and second order indices with bootstrap
intervals, for a scalar output or a field; ``sobol_convergence`` the same for the prefixes
of one run.  Re-exported as ``lf.sensitivity.sobol`` and ``lf.sensitivity.sobol_convergence``;
the inputs (problems, ``sample``) are sampling.py's, the model's blocks model_blocks.py's.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from statistics import NormalDist
from typing import Any, Literal, NamedTuple

import numpy as np
import xarray as xr

from .jit import Jitted
from .model_blocks import (RESULT_DIMS, ModelBlocks, Progress, check_block_options, check_finite, checked_model,
                           units_per_block)
from .sampling import check_dim, check_n, check_seed, inverse_cdf, read_inputs, unit_points, units_attrs
from .vmap import vmap

__all__ = ["sobol", "sobol_convergence"]

SUMS_ELEMENTS = 2 ** 21   # resample sums computed at once before they are added (16 MiB of float64)
SALIB_BOOTSTRAP = 2 ** 23  # bootstrap counts (num_resamples x n) up to which SALib's index array is drawn
COUNT_BLOCK = 4096         # base samples per seeded block of bootstrap counts above it
_FIRST_ORDER = {   # estimator= -> the long_name of S1
    "saltelli2010": "first order Sobol' index (Saltelli et al. 2010)",
    "janon2014": "first order Sobol' index (Janon et al. 2014)",
}
_LONG_NAMES = {
    "S1": "first order Sobol' index (Saltelli et al. 2010)",
    "S1_conf": "half-width of the confidence interval of S1",
    "ST": "total order Sobol' index (Jansen 1999)",
    "ST_conf": "half-width of the confidence interval of ST",
    "S2": "second order Sobol' index (Saltelli 2002)",
    "S2_conf": "half-width of the confidence interval of S2",
}


def sobol(model: Callable[[xr.Dataset], Any], problem_or_bounds: Mapping[str, Any], n: int, *,
          second_order: bool = False, estimator: Literal["saltelli2010", "janon2014"] = "saltelli2010",
          seed: int | None = None, num_resamples: int = 100,
          conf_level: float = 0.95, dim: str = "sample", chunk_size: int | None = None,
          chunks: int | None = None, progress: bool | Callable[[int, int], Any] | None = None,
          jit: bool | None = None) -> xr.Dataset:
    """Sobol' indices of ``model`` by Saltelli's design, with bootstrap intervals.

    Parameters
    ----------
    model : callable
        Maps ONE example's parameters (a Dataset of 0-d variables, as for
        ``lf.sensitivity.dgsm``) to a scalar or a DataArray (a field: any dims but
        ``dim``, ``param`` and ``param_2``).  An ``lf.jit``-wrapped model: its function
        is vmapped and jitted as a whole (see ``jit``), and that program is kept on it,
        so that a later call with the same layout replays it.
    problem_or_bounds : dict
        ``{name: (low, high)}`` or SALib's problem, as for
        :func:`labeled_func.sensitivity.sample`.
    n : int
        Base samples N (a power of two, else a warning): the model runs on
        N (D + 2) points, N (2D + 2) with ``second_order``.
    second_order : bool
        Adds ``S2`` and ``S2_conf``.
    estimator : {"saltelli2010", "janon2014"}
        The first order estimator: Saltelli et al. (2010), SALib's (the default), or
        Janon et al. (2014), from the pairs f(B), f(AB_i), asymptotically efficient.
        The total order is Jansen's (1999) with either.
    seed : int, optional
        Seeds the scrambled Sobol' points and the bootstrap, as SALib's ``seed`` does
        in ``sobol.sample`` and ``sobol.analyze``.
    num_resamples : int
        Bootstrap resamples of the base samples (at least 2).
    conf_level : float
        Level of the normal intervals whose half-widths are the ``*_conf``.
    dim : str
        The name of the samples' dim under ``lf.vmap``.
    chunk_size : int, optional
        Model evaluations per vectorised call, rounded down to whole base samples
        (D + 2 or 2D + 2 rows each, at least one); all in one call when None.
    chunks : int, optional
        Run on Dask: the design becomes a Dask-backed Dataset in blocks of ``chunks``
        model evaluations (rounded down to whole base samples, as ``chunk_size``),
        ``lf.vmap`` maps the model over it lazily, block by block, and each block's
        outputs are reduced to their sums in its own task. The result is lazy: nothing
        runs before ``.compute()`` (on any Dask scheduler). It equals
        ``sobol(..., chunk_size=chunks)`` to the bit, and any other chunking to
        rounding. Not with ``chunk_size``, ``progress`` or ``jit=True``. Needs Dask.
    progress : bool or callable, optional
        ``True`` draws a progress bar (tqdm when installed, else a line on stderr); a
        callable is called as ``progress(done, total)`` after each block of model
        evaluations.  Without ``chunk_size`` the model then runs in ten blocks.  As
        ``lf.sensitivity.dgsm``'s.
    jit : bool, optional
        Run the vmapped model as one ``lf.jit`` program, traced in the first block and
        replayed in every other (the last block padded with copies of its last row,
        whose outputs are dropped), as ``dgsm`` runs its gradients.  ``None`` (the
        default) jits where there are several blocks (``chunk_size``, ``progress``) or
        the model is ``lf.jit``-wrapped, and runs a model that ``lf.jit`` cannot trace
        un-jitted (with a warning for an ``lf.jit``-wrapped model); ``True`` raises
        there; ``False`` never jits.  The indices are the un-jitted ones, to the bit
        except where ``lf.jit`` fuses transcendental functions or sums (1e-12
        relative, docs/jit.md).

    Returns
    -------
    xarray.Dataset
        ``S1``, ``S1_conf``, ``ST``, ``ST_conf`` with dims ``(param, *output dims)``
        (coords: the parameter names, and the output's own), and with
        ``second_order`` ``S2``, ``S2_conf`` with dims ``(param, param_2, *output
        dims)``, NaN but above the diagonal, as SALib's. Each has ``units: "1"`` and a
        ``long_name``; attrs ``base_samples`` and ``model_evaluations``.

    Raises
    ------
    ValueError
        For a problem or bounds it cannot use, naming the parameter, for bad options,
        or for a model output that is not one DataArray (or scalar) per example, or
        that has the dim ``dim``, ``param`` or ``param_2``; for a model output that is
        not finite (NaN or infinite) in some rows of the design, saying how many and
        which (their parameters), since every index would be NaN (with ``chunks``: at
        compute); for a model that reads a parameter the problem or bounds lack, naming it.
    ImportError
        Without SciPy (its ``qmc.Sobol`` makes the points); ``chunks`` without Dask.

    Notes
    -----
    The estimators are SALib's: first order by Saltelli et al. (2010),
    ``mean(f(B) (f(AB_i) - f(A))) / V``, total order by Jansen (1999),
    ``mean((f(A) - f(AB_i))^2) / 2 / V``, second order by Saltelli (2002), with
    ``V`` the variance of f(A) and f(B) together and the outputs centred on their
    mean; the bootstrap resamples the base samples with the same indices as
    ``SALib.analyze.sobol.analyze`` (an integer seed gives SALib's intervals) up to
    2**23 counts (``num_resamples * n``), and above draws the same multinomial counts in
    seeded blocks of 4096 base samples, so that its memory does not grow with n. Each
    block of model outputs is reduced at once to the sums the estimators need (for
    all resamples, by matrix products, a few output elements at a time), so the
    outputs are not kept.

    Examples
    --------
    >>> import numpy as np, labeled_func as lf
    >>> si = lf.sensitivity.sobol(lambda p: p.a + 2 * p.b, {"a": (0, 1), "b": (0, 1)}, 1024, seed=1)
    >>> si.S1.round(2).values.tolist()        # 1/5 and 4/5
    [0.2, 0.8]
    """
    if not callable(model):
        raise ValueError(f"sensitivity.sobol: model must be a function of one sample's parameters (a Dataset), "
                         f"not a {type(model).__name__}; the problem or bounds come second")
    names, dists, units = read_inputs(problem_or_bounds, "sobol")
    n = check_n(n, "sobol", minimum=2)
    if not isinstance(second_order, (bool, np.bool_)):
        raise ValueError(f"sensitivity.sobol: second_order={second_order!r} must be a bool")
    kind = _Kind(bool(second_order), _check_estimator(estimator, "sobol"))
    check_seed(seed, "sobol")
    if isinstance(num_resamples, bool) or not isinstance(num_resamples, (int, np.integer)) or num_resamples < 2:
        raise ValueError(f"sensitivity.sobol: num_resamples={num_resamples!r} must be an int >= 2")
    if not (isinstance(conf_level, (int, float, np.floating)) and 0 < conf_level < 1):
        raise ValueError(f"sensitivity.sobol: conf_level={conf_level!r} must be between 0 and 1")
    check_dim(dim, "sobol")
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer))
                                   or chunk_size < 1):
        raise ValueError(f"sensitivity.sobol: chunk_size={chunk_size!r} must be a positive int or None")
    check_block_options(jit, progress, "sobol")
    _check_chunks(chunks, chunk_size, jit, progress, "sobol")
    d = len(names)
    step = 2 * d + 2 if second_order else d + 2
    if chunks is not None:
        if isinstance(model, Jitted):   # under the lazy vmap an lf.jit would run as it is
            model = model.func
        return _lazy_sobol(model, names, dists, units, [n], kind, seed, int(num_resamples),
                           conf_level, dim, int(chunks), "sobol")[0]
    (sums,), template = _saltelli_sums(model, names, dists, units, [n], kind, seed, int(num_resamples),
                                       dim, chunk_size, "sobol", progress, jit)
    return _indices(sums, n, d, step, kind, conf_level, names, template)


def _saltelli_sums(model, names, dists, units, prefixes, kind, seed, num_resamples, dim, chunk_size,
                   caller, progress, jit):
    """([sums of the first m base samples, for m in ``prefixes``], template): the model run once
    on Saltelli's design of ``max(prefixes)`` base samples, each block of outputs reduced to the
    weighted sums of every prefix it overlaps, with the bootstrap counts ``sobol(..., m, seed)``
    draws (the first m scrambled Sobol' points are those of ``sobol(..., m, seed)``)."""
    d, n = len(names), max(prefixes)
    step = 2 * d + 2 if kind.second_order else d + 2
    base = unit_points("sobol", n, 2 * d, seed, caller)
    a = np.column_stack([inverse_cdf(base[:, j], *dists[name]) for j, name in enumerate(names)])
    b = np.column_stack([inverse_cdf(base[:, d + j], *dists[name]) for j, name in enumerate(names)])
    bootstraps = [_Bootstrap(m, num_resamples, seed) for m in prefixes]
    per_block = units_per_block(n, step, chunk_size, progress)
    blocks = math.ceil(n / per_block)
    evaluate = ModelBlocks(model, names, dim, caller, jit, blocks)
    report = Progress(progress, blocks, caller)

    sums, shift, template = [None] * len(prefixes), None, None
    for start in range(0, n, per_block):
        stop = min(n, start + per_block)
        outputs = evaluate(_design(a[start:stop], b[start:stop], names, units, kind.second_order, dim),
                           per_block * step)
        outputs = outputs.transpose(dim, ...)
        y = np.asarray(outputs.data, dtype=float).reshape(stop - start, step, -1)
        check_finite(y.reshape(len(y) * step, -1), lambda rows: _design_rows(a[start:stop], b[start:stop],
                                                                                 kind.second_order)[rows],
                      names, start * step, n * step, caller)
        if template is None:
            template = outputs.isel({dim: 0}, drop=True)
            shift = y.mean(axis=(0, 1))   # for precision only: the estimators below are exact for any shift
        for k, m in enumerate(prefixes):
            if start < m:
                end = min(stop, m)
                sums[k] = _add_block_sums(sums[k], y[:end - start] - shift, d, kind,
                                          bootstraps[k].weights(start, end))
        report.advance()
    report.close()
    return sums, template


def _lazy_sobol(model, names, dists, units, prefixes, kind, seed, num_resamples, conf_level, dim, chunks,
                caller):
    """``sobol`` on Dask: a lazy Dataset per prefix of ``prefixes`` base samples (as
    ``_saltelli_sums``'s).  The design's blocks (whole base samples), the lazy
    ``lf.vmap`` of the model over them, one task per block that reduces its outputs to the sums
    (as ``_saltelli_sums`` does in memory, about the mean of the first block's outputs), the sums
    added block after block (the order of ``chunk_size``'s loop: the same bits), and one task that
    makes the indices."""
    try:
        import dask
        import dask.array as da
    except ImportError as error:  # pragma: no cover - dask is in the test environment
        raise ImportError(f"sensitivity.{caller}: chunks= needs Dask (pip install 'dask[array]')") from error
    d, n = len(names), max(prefixes)
    step = 2 * d + 2 if kind.second_order else d + 2
    if seed is None:   # one seed for the points and the bootstrap, drawn now: every block gets the same
        seed = int(np.random.SeedSequence().generate_state(1, dtype=np.uint64)[0])
    base = unit_points("sobol", n, 2 * d, seed, caller)
    a = np.column_stack([inverse_cdf(base[:, j], *dists[name]) for j, name in enumerate(names)])
    b = np.column_stack([inverse_cdf(base[:, d + j], *dists[name]) for j, name in enumerate(names)])
    del base
    per_block = max(1, chunks // step)
    starts = list(range(0, n, per_block))
    spans = [(start, min(n, start + per_block)) for start in starts]

    blocks = [da.from_delayed(dask.delayed(_design_rows, pure=True)(a[start:stop], b[start:stop], kind.second_order),
                              shape=((stop - start) * step, d), dtype=float) for start, stop in spans]
    rows = da.concatenate(blocks, axis=0)
    design = xr.Dataset({name: (dim, rows[:, j], units_attrs(units[name])) for j, name in enumerate(names)})
    outputs = vmap(checked_model(model, names, dim, caller), dim=dim)(design)
    outputs = outputs.transpose(dim, ...)
    template = outputs.isel({dim: 0}, drop=True)
    data = outputs.data
    if not isinstance(data, da.Array):
        data = da.from_array(np.asarray(data), chunks=(rows.chunks[0],) + (-1,) * (data.ndim - 1))
    data = data.rechunk((rows.chunks[0],) + (-1,) * (data.ndim - 1))
    y_blocks = data.to_delayed().reshape(-1)
    row_blocks = rows.to_delayed().reshape(-1)
    shift = dask.delayed(_block_shift, pure=True)(y_blocks[0], step)
    shape = tuple(template.shape)
    results = []
    for m in prefixes:
        bootstrap = dask.delayed(_Bootstrap(m, num_resamples, seed), pure=True)   # one key that every block reads
        total = None   # the blocks' sums, made in parallel, each added into the total in place as it comes
        for (start, stop), y, design_rows in zip(spans, y_blocks, row_blocks):
            if start < m:
                part = dask.delayed(_lazy_block_sums, pure=True)(y, design_rows, shift, bootstrap, names, start,
                                                               min(stop, m), n, d, step, kind, caller)
                total = part if total is None else dask.delayed(_add_into, pure=True)(total, part)
        values = dask.delayed(_index_arrays, pure=True)(total, m, d, step, kind, conf_level, shape)
        arrays = {}
        for key in ["S1", "S1_conf", "ST", "ST_conf"] + (["S2", "S2_conf"] if kind.second_order else []):
            key_shape = ((d, d) if key.startswith("S2") else (d,)) + shape
            arrays[key] = da.from_delayed(values[key], shape=key_shape, dtype=float)
        results.append(_labelled(arrays, m, step, kind, names, template))
    return results


def _block_shift(y, step):
    """The mean output of the first block: the reference value of every block's sums."""
    return np.asarray(y, dtype=float).reshape(-1, step, int(np.prod(y.shape[1:], dtype=int))).mean(axis=(0, 1))


def _lazy_block_sums(y, rows, shift, bootstrap, names, start, end, n, d, step, kind, caller):
    """The sums of one Dask block's base samples ``start`` to ``end`` (those of a prefix), as
    one pass of ``_saltelli_sums``'s loop, its outputs checked."""
    y = np.asarray(y, dtype=float).reshape(len(y) // step, step, -1)
    check_finite(y.reshape(-1, y.shape[-1]), lambda k: rows[k], names, start * step, n * step, caller)
    return _add_block_sums(None, y[:end - start] - shift, d, kind, bootstrap.weights(start, end))


def _add_into(total, part):
    """``total + part``, written into ``total`` (the running sums: each is read by this task alone).
    A sum of the blocks' sums holds one array of sums per block in flight, which is bounded by
    the workers, whatever N; a chain of tasks that each evaluate and add a block would hold
    one, but lets the model's blocks, evaluated ahead of it, pile up with N."""
    total += part
    return total


def sobol_convergence(model: Callable[[xr.Dataset], Any], problem_or_bounds: Mapping[str, Any], n: int, *,
                      steps: int | None = None, tol: float | None = None, second_order: bool = False,
                      estimator: Literal["saltelli2010", "janon2014"] = "saltelli2010", seed: int | None = None, num_resamples: int = 100, conf_level: float = 0.95,
                      dim: str = "sample", chunk_size: int | None = None, chunks: int | None = None,
                      progress: bool | Callable[[int, int], Any] | None = None,
                      jit: bool | None = None) -> xr.Dataset:
    """Sobol' indices and their intervals for the first n/2^k base samples, from ONE run.

    The model runs once, on Saltelli's design of ``n`` base samples, as in
    :func:`labeled_func.sensitivity.sobol`; the indices are then estimated on the
    prefixes of ``n / 2**k`` base samples (prefixes of length 2^m of Sobol' points are
    balanced), each exactly as ``sobol(model, problem_or_bounds, n / 2**k, seed=seed)``
    would (the same points and bootstrap; to rounding).

    Parameters
    ----------
    model, problem_or_bounds, second_order, estimator, seed, num_resamples, conf_level, dim, chunk_size, progress, jit
        As for :func:`labeled_func.sensitivity.sobol` (one run: ``progress`` counts its blocks).
    chunks : int, optional
        As for ``sobol``: a lazy result on Dask, each block one ``lf.vmap`` call of about
        ``chunks`` model evaluations, every prefix's sums a chain of tasks over the blocks
        it overlaps (not with ``tol``, which needs the values).
    n : int
        Base samples of the whole run: a power of two, at least 2.
    steps : int, optional
        The number of prefixes: ``n, n/2, ..., n/2**(steps - 1)`` (at least 2 base
        samples each); by default down to 256 (only ``n`` for a smaller ``n``).
    tol : float, optional
        Adds ``converged`` and the attr ``n_converged`` (see Returns).

    Returns
    -------
    xarray.Dataset
        ``sobol``'s variables with a leading dim ``n`` (coords: the prefixes' sizes,
        increasing); with ``tol``, ``converged`` (dims ``(param, *output dims)``: every
        half-width ``*_conf`` of that parameter and output element below ``tol`` at the
        largest ``n``) and the attr ``n_converged``: the smallest ``n`` from which on
        every half-width of every parameter and element is below ``tol`` (None if none).

    Raises
    ------
    ValueError
        As ``sobol``; and for an ``n`` that is not a power of two, a bad ``steps`` or
        ``tol``, or ``tol`` with ``chunks``.

    Notes
    -----
    Each block of model outputs is reduced to the weighted sums of every prefix it
    overlaps (one matrix product per prefix), so the outputs are not kept: the memory
    is ``sobol``'s times the number of prefixes for the sums, and the bootstrap counts
    of each prefix (as ``sobol``'s: bounded whatever ``n``).  The half-widths
    shrink as 1/sqrt(n) once the estimates have settled.

    Examples
    --------
    >>> import numpy as np, labeled_func as lf
    >>> run = lf.sensitivity.sobol_convergence(lambda p: p.a + 2 * p.b, {"a": (0, 1), "b": (0, 1)}, 1024,
    ...                                        steps=3, tol=0.2, seed=1)
    >>> run.n.values.tolist(), run.ST_conf.dims
    ([256, 512, 1024], ('n', 'param'))
    >>> run.converged.values.tolist(), run.attrs["n_converged"]
    ([True, True], 256)
    """
    where = "sensitivity.sobol_convergence"
    if not callable(model):
        raise ValueError(f"{where}: model must be a function of one sample's parameters (a Dataset), "
                         f"not a {type(model).__name__}; the problem or bounds come second")
    names, dists, units = read_inputs(problem_or_bounds, "sobol_convergence")
    n = check_n(n, "sobol_convergence", minimum=2)
    if n & (n - 1):
        raise ValueError(f"{where}: n={n} must be a power of two (the prefixes n/2**k are balanced Sobol' "
                         "point sets only then)")
    if steps is None:
        steps = max(1, n.bit_length() - 1 - 7)
    elif isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or not 1 <= steps <= n.bit_length() - 1:
        raise ValueError(f"{where}: steps={steps!r} must be an int from 1 to {n.bit_length() - 1} (the "
                         f"smallest prefix n/2**(steps - 1) needs 2 base samples)")
    if tol is not None and (isinstance(tol, bool) or not isinstance(tol, (int, float, np.floating))
                            or not tol > 0):
        raise ValueError(f"{where}: tol={tol!r} must be a positive number or None")
    if not isinstance(second_order, (bool, np.bool_)):
        raise ValueError(f"{where}: second_order={second_order!r} must be a bool")
    kind = _Kind(bool(second_order), _check_estimator(estimator, "sobol_convergence"))
    check_seed(seed, "sobol_convergence")
    if isinstance(num_resamples, bool) or not isinstance(num_resamples, (int, np.integer)) or num_resamples < 2:
        raise ValueError(f"{where}: num_resamples={num_resamples!r} must be an int >= 2")
    if not (isinstance(conf_level, (int, float, np.floating)) and 0 < conf_level < 1):
        raise ValueError(f"{where}: conf_level={conf_level!r} must be between 0 and 1")
    check_dim(dim, "sobol_convergence")
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer))
                                   or chunk_size < 1):
        raise ValueError(f"{where}: chunk_size={chunk_size!r} must be a positive int or None")
    check_block_options(jit, progress, "sobol_convergence")
    _check_chunks(chunks, chunk_size, jit, progress, "sobol_convergence")
    if chunks is not None and tol is not None:
        raise ValueError(f"{where}: tol= needs the half-widths' values, and with chunks= they are lazy: compute "
                         "the run first (run = sobol_convergence(..., chunks=...).compute()), then compare "
                         "run.S1_conf and run.ST_conf with your tolerance")
    d = len(names)
    step = 2 * d + 2 if second_order else d + 2
    prefixes = [n >> k for k in reversed(range(int(steps)))]
    if chunks is not None:
        if isinstance(model, Jitted):   # under the lazy vmap an lf.jit would run as it is
            model = model.func
        runs = _lazy_sobol(model, names, dists, units, prefixes, kind, seed, int(num_resamples),
                           conf_level, dim, int(chunks), "sobol_convergence")
    else:
        all_sums, template = _saltelli_sums(model, names, dists, units, prefixes, kind, seed,
                                            int(num_resamples), dim, chunk_size, "sobol_convergence", progress,
                                            jit)
        runs = [_indices(sums, m, d, step, kind, conf_level, names, template)
                for sums, m in zip(all_sums, prefixes)]
    result = xr.concat(runs, dim=xr.DataArray(prefixes, dims="n", attrs={"long_name": "base samples"}),
                       combine_attrs="override")
    result.attrs = {"base_samples": n, "model_evaluations": n * step}
    if tol is not None:
        below = None
        for key in [k for k in result.data_vars if str(k).endswith("_conf")]:
            ok = (result[key] < tol) | result[key].isnull()
            if "param_2" in ok.dims:
                ok = ok.all("param_2")
            below = ok if below is None else below & ok
        result["converged"] = below.isel(n=-1, drop=True).assign_attrs(
            long_name=f"every half-width below {tol} at n = {n}")
        everywhere = below.all([k for k in below.dims if k != "n"]).values
        later = np.logical_and.accumulate(everywhere[::-1])[::-1]   # below tol at this n and every larger one
        result.attrs.update(tol=float(tol), n_converged=int(prefixes[int(np.argmax(later))]) if later.any()
                            else None)
    return result

def _check_estimator(estimator, caller):
    if not isinstance(estimator, str) or estimator not in _FIRST_ORDER:
        raise ValueError(f"sensitivity.{caller}: estimator={estimator!r} must be one of {tuple(_FIRST_ORDER)} "
                         "(the first order estimator; the total order one is Jansen's in both)")
    return estimator


class _Kind(NamedTuple):
    """What the sums of a run hold: the second order's statistics, and which first order
    estimator's (Janon's needs three more kinds: f(B)^2, f(AB_i)^2, f(B) f(AB_i))."""

    second_order: bool
    estimator: str = "saltelli2010"

    def janon_offset(self, d):
        """Where Janon's statistics start (after the second order's)."""
        return 3 + 3 * d + (d + d * (d - 1) // 2 if self.second_order else 0)

    def statistics(self, d):
        return self.janon_offset(d) + (1 + 2 * d if self.estimator == "janon2014" else 0)


def _check_chunks(chunks, chunk_size, jit, progress, caller):
    if chunks is None:
        return
    if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks < 1:
        raise ValueError(f"sensitivity.{caller}: chunks={chunks!r} must be a positive int (model evaluations "
                         "per Dask block) or None")
    if chunk_size is not None:
        raise ValueError(f"sensitivity.{caller}: give chunks= (Dask blocks, each one vmap call) or chunk_size= "
                         "(in-memory vmap calls), not both")
    if progress not in (None, False) or jit is True:
        raise ValueError(f"sensitivity.{caller}: with chunks= nothing runs here (the result is lazy) and the "
                         "blocks run un-jitted: progress= and jit=True are for in-memory runs; wrap the compute in "
                         "dask.diagnostics.ProgressBar() instead")


# --- Saltelli's design --------------------------------------------------------------------------
def _design(a, b, names, units, second_order, dim):
    """The rows of base samples ``a``, ``b`` in SALib's order: per base sample A, AB_1 ...
    AB_D, (BA_1 ... BA_D,) B, where AB_i is A with column i from B."""
    rows = _design_rows(a, b, second_order)
    return xr.Dataset({name: (dim, rows[:, j], units_attrs(units[name])) for j, name in enumerate(names)})


def _design_rows(a, b, second_order):
    """(rows, D): the design of base samples ``a``, ``b`` (each (N, D)), ``_design``'s rows."""
    d = a.shape[1]
    columns = [a] + [np.where(np.arange(d) == i, b, a) for i in range(d)]        # A, AB_1 ... AB_D
    if second_order:
        columns += [np.where(np.arange(d) == i, a, b) for i in range(d)]         # BA_1 ... BA_D
    columns.append(b)
    return np.stack(columns, axis=1).reshape(-1, d)


# --- the estimators -----------------------------------------------------------------------------
class _Bootstrap:
    """How often each of ``n`` base samples is drawn in each of ``num_resamples`` resamples
    (the classical bootstrap: each resample draws n base samples with replacement), given
    block by block: ``weights(start, stop)``.

    Up to ``SALIB_BOOTSTRAP`` counts (``num_resamples * n``), the counts of SALib's own index
    array ``default_rng(seed).integers(n, size=(n, num_resamples))``: an integer seed gives
    SALib's intervals.  Above, so that the memory does not grow with n, the same multinomial
    counts drawn in seeded blocks of ``COUNT_BLOCK`` base samples: first how many of each
    resample's n draws fall in each block (one multinomial over the blocks, num_resamples x
    n / COUNT_BLOCK numbers), then, in a block, where they fall (uniformly within it, from a
    generator seeded by the seed and the block's number).  A block of counts is made when a
    span of samples first needs it, whatever the chunking: the same counts in memory, with
    ``chunk_size`` and on Dask.  Picklable (Dask sends it to its tasks)."""

    def __init__(self, n, num_resamples, seed):
        self.n, self.num_resamples = n, num_resamples
        if n * num_resamples <= SALIB_BOOTSTRAP:
            indices = np.random.default_rng(seed).integers(n, size=(n, num_resamples))
            indices += np.arange(num_resamples) * n              # resample k counts in [k n, (k + 1) n)
            counts = np.bincount(indices.ravel(), minlength=num_resamples * n)
            self.whole, self.entropy, self.totals = counts.reshape(num_resamples, n).astype(np.int32), None, None
        else:
            self.whole = None
            self.entropy = np.random.SeedSequence(seed).entropy
            sizes = np.diff(np.append(np.arange(0, n, COUNT_BLOCK), n))
            rng = np.random.default_rng(np.random.SeedSequence(self.entropy, spawn_key=(0,)))
            self.totals = rng.multinomial(n, sizes / n, size=num_resamples)   # (resample, block)
        self._last = (None, None)   # the last block of counts made (blocks are asked for in order)

    def __getstate__(self):
        return {**self.__dict__, "_last": (None, None)}

    def counts(self, start, stop):
        """(num_resamples, stop - start) int32: the counts of base samples start to stop."""
        if self.whole is not None:
            return self.whole[:, start:stop]
        parts = []
        for block in range(start // COUNT_BLOCK, (stop - 1) // COUNT_BLOCK + 1):
            first = block * COUNT_BLOCK
            counts = self._block(block)
            parts.append(counts[:, max(start, first) - first:min(stop, first + COUNT_BLOCK) - first])
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)

    def _block(self, block):
        known, counts = self._last
        if known == block:
            return counts
        size = min(self.n, (block + 1) * COUNT_BLOCK) - block * COUNT_BLOCK
        totals = self.totals[:, block]
        rng = np.random.default_rng(np.random.SeedSequence(self.entropy, spawn_key=(block + 1,)))
        where = rng.integers(size, size=int(totals.sum()))
        where += np.repeat(np.arange(self.num_resamples) * size, totals)   # resample k counts in [k size, ...)
        counts = np.bincount(where, minlength=self.num_resamples * size).reshape(self.num_resamples, size)
        counts = counts.astype(np.int32)
        self._last = (block, counts)
        return counts

    def weights(self, start, stop):
        """(1 + num_resamples, stop - start) float weights: ones (the point estimates), then the counts."""
        return np.concatenate([np.ones((1, stop - start)), self.counts(start, stop)])


def _add_block_sums(total, y, d, kind, weights):
    """``total`` (None: zeros) plus the weighted sums over one block of base samples of the
    statistics that the estimators are made of, (1 + resample, statistic, output element);
    ``y`` is (base, row, element).  A few output elements at a time: their statistics are
    made, multiplied by the weights and added in place, so that neither all the block's
    statistics nor a second array of the sums' size (for a field, the largest array here)
    is ever held."""
    rows, count = weights.shape[0], y.shape[2]
    statistics = kind.statistics(d)
    if total is None:
        total = np.zeros((rows, statistics, count))
    step = max(1, SUMS_ELEMENTS // (rows * statistics))
    for first in range(0, count, step):
        last = min(count, first + step)
        stacked = _statistics(y[:, :, first:last], d, kind)
        part = weights @ stacked.reshape(stacked.shape[0], -1)
        total[:, :, first:last] += part.reshape(rows, statistics, last - first)
    return total


def _statistics(y, d, kind):
    """(base, statistic, element): the per-sample statistics the estimators are made of:
    f(A), f(B), f(A)^2 + f(B)^2, f(AB_i), f(B) (f(AB_i) - f(A)), (f(A) - f(AB_i))^2; with the
    second order f(BA_i) and f(BA_i) f(AB_j) - f(A) f(B) (i < j); with Janon's first order
    f(B)^2, f(AB_i)^2 and f(B) f(AB_i)."""
    y_a, y_b, y_ab = y[:, 0], y[:, -1], y[:, 1:d + 1]
    out = np.empty((y.shape[0], kind.statistics(d), y.shape[2]))
    out[:, 0], out[:, 1] = y_a, y_b                                    # written in place: one pass each
    np.square(y_a, out=out[:, 2])
    out[:, 2] += np.square(y_b)
    out[:, 3:3 + d] = y_ab
    difference = np.subtract(y_ab, y_a[:, None], out=out[:, 3 + 2 * d:3 + 3 * d])
    np.multiply(y_b[:, None], difference, out=out[:, 3 + d:3 + 2 * d])   # f(B) (f(AB_i) - f(A))
    np.square(difference, out=difference)                                # (f(A) - f(AB_i))^2
    if kind.second_order:
        y_ba = y[:, d + 1:2 * d + 1]
        j, k = np.triu_indices(d, 1)
        out[:, 3 + 3 * d:3 + 4 * d] = y_ba
        joint = np.multiply(y_ba[:, j], y_ab[:, k], out=out[:, 3 + 4 * d:3 + 4 * d + len(j)])
        joint -= (y_a * y_b)[:, None]
    if kind.estimator == "janon2014":
        first = kind.janon_offset(d)
        np.square(y_b, out=out[:, first])
        np.square(y_ab, out=out[:, first + 1:first + 1 + d])
        np.multiply(y_b[:, None], y_ab, out=out[:, first + 1 + d:first + 1 + 2 * d])
    return out


def _indices(sums, n, d, step, kind, conf_level, names, template):
    """The indices and half-widths from the sums; ``sums`` is overwritten (by the means): for a
    field it is the largest array, and it is not copied."""
    values = _index_arrays(sums, n, d, step, kind, conf_level, template.shape)
    return _labelled(values, n, step, kind, names, template)


def _index_arrays(sums, n, d, step, kind, conf_level, out_shape):
    """{"S1": point, "S1_conf": half-width, ...}: NumPy arrays of shape ``(param, *out_shape)``
    (``(param, param_2, *out_shape)`` for S2); ``sums`` is overwritten."""
    second_order = kind.second_order
    # SALib centres the outputs on the mean of all N * step of them (the point estimate's)
    centre = (sums[0, 0] + sums[0, 1] + sums[0, 3:3 + d].sum(axis=0)
              + (sums[0, 3 + 3 * d:3 + 4 * d].sum(axis=0) if second_order else 0)) / (n * step)
    means = np.divide(sums, n, out=sums)
    mean_a, mean_b, mean_squares = means[:, 0], means[:, 1], means[:, 2]
    mean_ab = means[:, 3:3 + d]
    variance = mean_squares / 2 - ((mean_a + mean_b) / 2) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        # (mean(f(B) (f(AB) - f(A))) - centre (mean f(AB) - mean f(A))) / V and
        # mean((f(A) - f(AB))^2) / 2 / V, over the means they are made of: no new array of that size
        first, total = means[:, 3 + d:3 + 2 * d], means[:, 3 + 2 * d:3 + 3 * d]
        for i in range(d):
            if kind.estimator == "janon2014":
                # (mean(f(B) f(AB_i)) - m^2) / ((mean f(B)^2 + mean f(AB_i)^2) / 2 - m^2), m the mean
                # of f(B) and f(AB_i) (which share x_i): shift-invariant as it stands
                offset = kind.janon_offset(d)
                square = np.add(mean_b, mean_ab[:, i])
                square /= 2
                square *= square
                spread = np.add(means[:, offset], means[:, offset + 1 + i])
                spread /= 2
                spread -= square
                np.subtract(means[:, offset + 1 + d + i], square, out=first[:, i])
                first[:, i] /= spread
            else:
                correction = np.subtract(mean_ab[:, i], mean_a)
                correction *= centre
                np.subtract(first[:, i], correction, out=first[:, i])
                first[:, i] /= variance
            total[:, i] /= 2
            total[:, i] /= variance
        estimates = {"S1": first, "ST": total}
        if second_order:
            mean_ba = means[:, 3 + 3 * d:3 + 4 * d]
            j, k = np.triu_indices(d, 1)
            joint = means[:, 3 + 4 * d:3 + 4 * d + len(j)]
            correction = centre * (mean_ba[:, j] + mean_ab[:, k] - (mean_a + mean_b)[:, None])
            pairs = (joint - correction) / variance[:, None] - first[:, j] - first[:, k]
            full = np.full((pairs.shape[0], d, d) + pairs.shape[2:], np.nan)
            full[:, j, k] = pairs
            estimates["S2"] = full
    z = NormalDist().inv_cdf(0.5 + conf_level / 2)
    result = {}
    for key, values in estimates.items():
        shape = values.shape[1:-1] + tuple(out_shape)
        result[key] = values[0].reshape(shape).copy()   # not a view that keeps every resample
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)   # the NaN below the diagonal of S2
            conf = np.stack([values[1:, i].std(axis=0, ddof=1) for i in range(d)])   # one param at a time
            result[f"{key}_conf"] = (z * conf).reshape(shape)
    return result


def _labelled(values, n, step, kind, names, template):
    """The Dataset of the arrays ``values`` (NumPy or Dask) of ``_index_arrays``."""
    second_order = kind.second_order
    out_dims = template.dims
    coords = {"param": names, **{key: c for key, c in template.coords.items()}}
    if second_order:
        coords["param_2"] = names
    order = ["S1", "S1_conf", "ST", "ST_conf"] + (["S2", "S2_conf"] if second_order else [])
    result = {key: xr.DataArray(values[key], dims=RESULT_DIMS[:values[key].ndim - len(out_dims)] + out_dims,
                                attrs={"units": "1", "long_name": _LONG_NAMES[key] if key != "S1" else
                                       _FIRST_ORDER[kind.estimator]}) for key in order}
    return xr.Dataset(result, coords=coords, attrs={"base_samples": n, "model_evaluations": n * step})

