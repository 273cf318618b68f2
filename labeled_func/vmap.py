"""``lf.vmap``: map a function of one example over a named dim."""
from __future__ import annotations

import copy
import difflib
import inspect
import types
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple

import numpy as np
import optree
import xarray as xr

from . import dask as lazy
from . import random as lf_random
from ._wrapping import transformed
from .backends import check_one_backend, reject_quantities
from .chunks import carry, leaf_positions, run_jitted
from .diagnostics import zero_d_index_error
from .engine import BatchLevel, active, batch_value, current_levels, traced_by
from .engine.batching import BRANCHES, ExampleNames
from .engine.errors import RandomnessError
from .example_coords import (Entered, ExampleCoord, attach, coordinates_copied_as_themselves, example_coords,
                             restore_untouched)
from .named import (Preserve, concat_leaves, dim_label_sources, is_labeled, leaf_dims, leaf_size, map_leaf, slice_leaf,
                    tree_nodes, unmap_leaf)

__all__ = ["vmap"]

RANDOMNESS = ("error", "different", "same")


def vmap(func: Callable[..., Any], dim: str | Sequence[str] | None = None, *,
         in_dims: int | tuple[Any, ...] | dict[str, Any] | None = None,
         out_dims: int | str | None | tuple[Any, ...] | list[Any] | dict[str, Any] = 0,
         randomness: Literal["error", "different", "same"] = "error", chunk_size: int | None = None,
         axis_size: int | None = None, allow_rechunk: bool = True,
         branches: Literal["error", "agree"] = "error", jit: bool | None = False) -> Callable[..., Any]:
    """Vectorise ``func``, written for one example, over the named dim ``dim``.

    Parameters
    ----------
    func : callable
        Takes and returns DataArrays, Datasets, DataTrees, arrays, scalars and
        tuples/lists/dicts of them.  Inside, the mapped dims are gone; the coordinates
        along them are each example's scalars, as ``x.isel(dim=i)`` has them (numbers
        mapped, dates and strings as labels that compare with ``==``).
    dim : str or tuple of str, optional
        Map over this dim in every argument that has it; arguments without it are
        shared by all examples.  Several dims map as nested vmaps, first outermost.
    in_dims : int, tuple or dict, optional
        Instead of ``dim``: per positional argument (tuple) or per parameter name
        (dict), a dim name, a tuple of names, ``None`` (not mapped), an ``int`` axis,
        or a list/dict mirroring a nested argument.  A bare ``int`` maps every
        positional argument along that axis (keyword arguments are not mapped), as
        torch.func and JAX do.  An ``int`` is a position: for a labeled argument, the
        dim at that position of its ``dims``.  ``None`` (with ``axis_size``) maps no
        argument.
    out_dims : int, "preserve", None, or a tuple/list/dict of them
        Where the mapped dim goes in every output: an axis, or where it stood in
        the first mapped input.  A tuple (list, dict) gives one entry per output of
        a function returning a tuple (list, dict), as torch.func's ``out_dims``; an
        entry ``None`` returns that output unmapped, once: it must not depend on the
        mapped inputs (ValueError naming the output otherwise); with Dask-backed
        inputs it is a lazy array of one chunk, the first block's.
    randomness : {"error", "different", "same"}
        What ``lf.random`` draws do inside: raise, differ per example, or be shared.
        A draw from NumPy's global random state (one draw for all the examples) raises
        RandomnessError unless "same".
    chunk_size : int, optional
        Evaluate this many examples at a time (bounds peak memory).
    jit : bool or None
        With ``chunk_size``, on in-memory arguments: run the chunks as one ``lf.jit``
        program of the vmapped function on ``chunk_size`` examples, traced on the first
        chunk and replayed on every other (the last, shorter one replays the last
        ``chunk_size`` examples and keeps its own; under ``randomness="different"`` it runs
        un-jitted): replay speed for a single call.  The results are those of ``jit=False`` (to
        the bit, but for the tolerances of lf.jit's fused evaluations, docs/jit.md); the
        1-D coordinates along the mapped dim travel as data, so chunks do not trace again.
        As under ``lf.jit``, Python side effects (``print``, appending to a list) happen
        on the first chunk only.  ``False`` (the default): no jit.  ``True``: raise where
        lf.jit cannot trace the function (its policy errors, e.g. a draw from NumPy's
        global random state under ``randomness="same"``) or the arguments (a coordinate
        spanning the mapped dim and another, a DataTree or multi-index with coordinates
        along it: ValueError).  Unmapped arguments are constants of the program.
        ``None``: jit where there are two whole chunks or more, and run the chunks un-jitted
        where lf.jit cannot (with one ``UserWarning`` where it tried and failed).
        Inside another transform, or on Dask-backed arguments, chunks are not jitted.
        See docs/performance.md, "A first call at replay speed".
    axis_size : int, optional
        The batch size when no argument has the dim.
    allow_rechunk : bool
        Dask-backed inputs only: other dims split into several chunks are rechunked
        into one, with a ``UserWarning`` (True), or raise ``ValueError`` (False).
    branches : {"error", "agree"}
        ``bool()`` (an ``if``), ``float()``, ``.item()``, ``np.asarray`` and data-dependent
        shapes (``x[mask]``, ``np.nonzero``, ``dropna``) of a mapped value: raise the
        policy errors ("error"), or accept them where every example gives the same answer
        (the same truth value, the same value, the same number of elements), which is then
        the loop's ("agree"); examples that disagree raise the policy error naming them.
        See docs/limitations.md, "Branches that agree".  Under ``lf.jit`` (and with
        ``chunk_size`` and ``jit``) each answer is a guard, re-checked at every call: a call
        whose examples answer otherwise traces again (docs/jit.md, "Guards").

    Returns
    -------
    callable
        A function taking ``func``'s arguments and returning its outputs for every
        example, the mapped dim in front of each output (``out_dims``), lazy where the
        inputs are Dask-backed.

    Raises
    ------
    ValueError
        At once: a bad ``randomness``, ``out_dims``, ``chunk_size``, ``dim`` or ``jit``. When
        called: no argument has the dim (and no ``axis_size``), arguments disagree on its
        size or coordinate labels, an ``in_dims`` entry does not fit its argument, an
        output already has the mapped dim, chunks split with ``allow_rechunk=False``.
    RandomnessError
        A draw of ``lf.random`` or NumPy's global random state under
        ``randomness="error"``.
    UnsupportedOperationError
        When called, before the function runs: an argument holds a pint Quantity
        (pint-xarray; call ``.pint.dequantify()`` first), Dask-backed or not.
    TransformError
        The policy errors of the function's body (see docs/limitations.md):
        ``DataDependentControlFlowError``, ``ItemError``, ``InplaceError``,
        ``DynamicShapeError``, ``ConversionError``...

    Examples
    --------
    >>> import numpy as np, xarray as xr, labeled_func as lf
    >>> x = xr.DataArray(np.arange(6.0).reshape(3, 2), dims=("sample", "t"),
    ...                  coords={"sample": [10, 20, 30]})
    >>> def centred_norm(x):            # one example: x has dims ("t",)
    ...     return np.sqrt(((x - x.mean("t")) ** 2).sum("t"))
    >>> lf.vmap(centred_norm, dim="sample")(x)
    <xarray.DataArray (sample: 3)> Size: 24B
    array([0.70710678, 0.70710678, 0.70710678])
    Coordinates:
      * sample   (sample) int64 24B 10 20 30
    >>> lf.vmap(lambda x: x.sum("t") * x.sample, dim="sample")(x).values   # each example's label
    array([ 10., 100., 270.])

    One call on a large batch at replay speed: chunks of ``chunk_size`` examples, one
    ``lf.jit`` program traced on the first chunk and replayed on the others (here on
    examples 0-1, then 2-3, then 3-4 for the last one):

    >>> cubes = lambda x: (x ** 3).sum("t")
    >>> x6 = xr.concat([x, x + 6], dim="sample").assign_coords(sample=np.arange(6))
    >>> lf.vmap(lf.grad(cubes), dim="sample", chunk_size=2, jit=True)(x6.isel(sample=slice(0, 5))).values
    array([[  0.,   3.],
           [ 12.,  27.],
           [ 48.,  75.],
           [108., 147.],
           [192., 243.]])
    """
    if randomness not in RANDOMNESS:
        raise ValueError(f"vmap: randomness={randomness!r} is not one of {RANDOMNESS}")
    if not isinstance(branches, str) or branches not in BRANCHES:
        raise ValueError(f"vmap: branches={branches!r} is not one of {BRANCHES}")
    if dim is not None and in_dims is not None:
        raise ValueError("vmap: give either dim= or in_dims=, not both")
    if dim is None and in_dims is None and axis_size is None:
        raise ValueError("vmap: say what to map over, with dim='name' or in_dims=(...)")
    _check_out_dims(out_dims, out_dims)
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size={chunk_size!r} must be a positive int")
    if jit is not None and not isinstance(jit, bool):
        raise ValueError(f"vmap: jit={jit!r} must be True, False or None")
    options = dict(out_dims=out_dims, randomness=randomness, axis_size=axis_size, branches=branches)

    levels = _split_levels(dim, in_dims)
    inner = func
    for k, (level_dim, level_in_dims) in reversed(list(enumerate(levels))):
        inner = _Mapped(inner, func, level_dim, level_in_dims,
                        chunk_size=chunk_size if k == 0 else None, allow_rechunk=allow_rechunk,
                        jit=jit if k == 0 else False, **options)

    return transformed(inner, func, "vmap", (
        ("dim", dim, None), ("in_dims", in_dims, None), ("out_dims", out_dims, 0), ("randomness", randomness, "error"),
        ("chunk_size", chunk_size, None), ("axis_size", axis_size, None), ("allow_rechunk", allow_rechunk, True),
        ("branches", branches, "error"), ("jit", jit, False)))


def _split_levels(dim, in_dims):
    """[(dim, in_dims)] per level, outermost first."""
    if dim is not None:
        names = (dim,) if isinstance(dim, str) else tuple(dim)
        if not names or not all(isinstance(n, str) for n in names):
            raise ValueError(f"vmap: dim={dim!r} must be a dim name or a tuple of names")
        return [(name, None) for name in names]
    if in_dims is None or _is_axis(in_dims):  # every positional argument alike
        return [(None, in_dims)]
    if not isinstance(in_dims, (tuple, dict)):
        hint = f"; to map every argument that has dim {in_dims!r}, pass dim={in_dims!r}" if isinstance(in_dims, str) else ""
        raise ValueError(f"vmap: in_dims must be an int (every positional argument along that axis), a tuple "
                         f"(one entry per positional argument) or a dict keyed by parameter name, not "
                         f"{type(in_dims).__name__}{hint}")
    entries = list(in_dims.values()) if isinstance(in_dims, dict) else list(in_dims)
    names = []
    for spec in _spec_leaves(entries):
        for name in (spec if isinstance(spec, tuple) else (spec,)):
            if isinstance(name, str) and name not in names:
                names.append(name)
    if not names:
        return [(None, in_dims)]

    def at_level(name, first):
        def pick(spec):
            if isinstance(spec, tuple):
                return name if name in spec else None
            if isinstance(spec, str):
                return spec if spec == name else None
            return spec if first else None
        return _map_specs(pick, in_dims)

    return [(None, at_level(name, k == 0)) for k, name in enumerate(names)]


def _is_axis(spec):
    return isinstance(spec, int) and not isinstance(spec, bool)


def _check_out_dims(entry, out_dims):
    """``out_dims`` is an int, "preserve", None, or a tuple/list/dict of them."""
    if isinstance(entry, (tuple, list)):
        for item in entry:
            _check_out_dims(item, out_dims)
    elif isinstance(entry, dict):
        for item in entry.values():
            _check_out_dims(item, out_dims)
    elif not (entry is None or _is_axis(entry) or (isinstance(entry, str) and entry == "preserve")):
        raise ValueError(f"vmap: out_dims={out_dims!r} must be an int, 'preserve' or None, or a "
                         f"tuple/list/dict of them (one entry per output); {entry!r} is none of these")


def _is_multi(spec):
    return isinstance(spec, tuple) and all(isinstance(s, str) for s in spec) and spec


def _spec_leaves(spec):
    if _is_multi(spec) or spec is None or isinstance(spec, (str, int)):
        yield spec
    elif isinstance(spec, dict):
        for value in spec.values():
            yield from _spec_leaves(value)
    elif isinstance(spec, (list, tuple)):
        for value in spec:
            yield from _spec_leaves(value)


def _map_specs(function, spec, top=True):
    if not top and (_is_multi(spec) or spec is None or isinstance(spec, (str, int))):
        return function(spec)
    if isinstance(spec, dict):
        return {k: _map_specs(function, v, False) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return type(spec)(_map_specs(function, v, False) for v in spec)
    return function(spec)


class _Mapped:
    """One vmap level around ``func``; ``original`` names the arguments in messages."""

    def __init__(self, func, original, dim, in_dims, *, out_dims, randomness, chunk_size, axis_size,
                 allow_rechunk=True, branches="error", jit=False):
        self.func = func
        self.dim = dim
        self.in_dims = in_dims
        self.out_dims = out_dims
        self.given_out_dims = out_dims  # as the caller wrote it, for messages (blocks change out_dims)
        self.randomness = randomness
        self.chunk_size = chunk_size
        self.jit = jit  # chunks as one lf.jit program: see chunks.py
        self.axis_size = axis_size
        self.allow_rechunk = allow_rechunk  # dask-backed inputs only (see dask.py)
        self.branches = branches  # "agree": see BatchLevel.branches
        self.in_block = False  # a block of a lazy (Dask) vmap: see dim_first
        self.parameters = _parameters(original)
        self.signature = _signature(original)
        self.carried = None  # a block of a lazy vmap: see _lazy
        self._carrying = {}  # _lazy's blocks, by what they carry

    def __call__(self, *args, **kwargs):
        carried = None
        if self.carried is not None:
            *args, carried = args
        if lazy.has_lazy_leaves(args, kwargs):
            return self._lazy(tuple(args), kwargs)
        plan = self._planned(tuple(args), kwargs, carrying=False)
        leaves, specs, treedef, dim, size, coords = plan.leaves, plan.specs, plan.arguments, plan.dim, plan.size, plan.coords
        check_one_backend(leaves, plan.labels, transform="vmap")
        position = plan.out_position
        examples = self._examples(plan, carried)
        chunk = self.chunk_size
        if chunk is None or chunk >= size:
            return self._run(treedef, specs, dim, position, coords, leaves, size, examples)
        if self.jit is not False and carried is None and not current_levels():

            done = run_jitted(self, plan, examples)
            if done is not None:
                return done[0]
        return self.chunked_eagerly(plan, examples)

    def chunked_eagerly(self, plan, examples):
        """The call ``plan`` in chunks of ``chunk_size`` examples, each run as it is."""
        treedef, specs, dim, size, coords, chunk = plan.arguments, plan.specs, plan.dim, plan.size, plan.coords, self.chunk_size
        position = plan.out_position
        state = lf_random.get_state() if self.randomness == "same" else None
        numpy_state = np.random.get_state() if self.randomness == "same" else None
        parts = []
        for start in range(0, size, chunk):
            stop = min(start + chunk, size)
            if state is not None:  # "same": every chunk draws what the first one drew
                lf_random.set_state(state)
                np.random.set_state(numpy_state)
            sliced = [slice_leaf(v, s, start, stop) if s is not None else v for v, s in zip(plan.leaves, specs)]
            chunk_coords = {name: var[start:stop] for name, var in coords.items()}
            chunk_examples = [{name: e._replace(variable=e.variable[start:stop]) for name, e in found.items()}
                              for found in examples]
            parts.append(self._run(treedef, specs, dim, position, chunk_coords, sliced, stop - start, chunk_examples,
                                   offset=start))
        flat_parts = [optree.tree_flatten(p, none_is_leaf=True) for p in parts]
        positions = leaf_positions(position, parts[0], self.given_out_dims)
        out_leaves = [group[0] if at is None else concat_leaves(list(group), dim, at)
                      for at, group in zip(positions, zip(*(f[0] for f in flat_parts)))]
        return optree.tree_unflatten(flat_parts[0][1], out_leaves)

    # --- the coordinates along the mapped dim, as each example sees them --------------------------
    def _examples(self, plan, carried):
        """Per leaf, {name: ExampleCoord}: its 1-D coordinates along the mapped dim, from the
        leaf itself, or in a block of a lazy vmap from the ``carried`` Dataset (see _lazy)."""
        if carried is not None:
            return [{name: ExampleCoord(carried[key].variable, restorable) for name, (key, restorable) in names}
                    for names in self.carried.names]
        return [example_coords(leaf, spec, plan.coords) if isinstance(spec, str) else {}
                for leaf, spec in zip(plan.leaves, plan.specs)]

    def _lazy(self, args, kwargs):
        """A lazy (Dask) vmap.  Its blocks get the arguments without their 1-D coordinates
        along the mapped dim (outputs get the caller's back): their values travel instead,
        chunked like the data, as one more argument that each block takes off again."""
        plan = self._planned(args, kwargs, carrying=False)
        check_one_backend(plan.leaves, plan.labels, transform="vmap")  # before any graph is built
        examples = self._examples(plan, None)
        if not any(examples):
            return lazy.vmap_lazy(self, args, kwargs)
        carried, variables = carry(plan, examples)
        carrying = self._carrying.get(carried)
        if carrying is None:  # one per recipe: lf.jit keeps one program per vmap level it sees
            carrying = self._carrying[carried] = copy.copy(self)
            carrying.carried = carried
            carrying._carrying = {}
        return lazy.vmap_lazy(carrying, (*args, xr.Dataset(variables)), kwargs)

    def carrying(self, carried):
        """A copy of this level that takes the coordinates along the mapped dim off its last
        positional argument (``carried``: see :class:`labeled_func.chunks.Carried`), all examples at once."""
        block = copy.copy(self)
        block.carried, block._carrying, block.chunk_size, block.jit = carried, {}, None, False
        return block

    def dim_first(self):
        """A copy that puts the mapped dim first in every mapped output (a lazy vmap's blocks;
        the outputs it leaves unmapped, out_dims entry None, stay unmapped)."""
        block = copy.copy(self)
        block.out_dims = _map_out_dims(lambda entry: 0, self.out_dims)
        block.in_block = True
        return block

    def output_positions(self, position, out):
        """Per leaf of the output ``out``, where the mapped dim goes (None: left unmapped)."""
        return leaf_positions(position, out, self.given_out_dims)

    # --- which leaf maps over what ----------------------------------------------------------------
    def plan(self, args, kwargs):
        """How a call ``(*args, **kwargs)`` maps, as a :class:`Plan` (used by the in-memory
        and the lazy Dask paths alike)."""
        return self._planned(args, kwargs, carrying=self.carried is not None)

    def _planned(self, args, kwargs, carrying):
        leaves, specs, labels, arguments = self._flatten(args, kwargs, carrying)
        dim, size, preserve, coords = self._plan(leaves, specs, labels)
        position = _map_out_dims(lambda e: Preserve(preserve) if isinstance(e, str) else e, self.out_dims)
        return Plan(leaves, specs, labels, arguments, dim, size, position, coords)

    def _flatten(self, args, kwargs, carrying=False):
        labels_top = [self._label(i) for i in range(len(args))] + list(kwargs)
        values_top = list(args) + list(kwargs.values())
        if carrying:  # the last positional argument holds the coordinates along the mapped dim
            specs_top = self._top_specs(args[:-1], kwargs)
            specs_top.insert(len(args) - 1, self.carried.dim)
            labels_top[len(args) - 1] = f"the coordinates along dim {self.carried.dim!r}"
        else:
            specs_top = self._top_specs(args, kwargs)
        leaves, specs, labels, arguments = [], [], [], []
        for value, spec, label in zip(values_top, specs_top, labels_top):
            _check_entries_fit(spec, value, label, label)
            paths, value_leaves, value_def = optree.tree_flatten_with_path(value, none_is_leaf=True)
            arguments.append((value, value_def, len(leaves), len(leaves) + len(value_leaves)))
            for path, leaf in zip(paths, value_leaves):
                leaf_label = label + "".join(f"[{k!r}]" for k in path)
                leaves.append(leaf)
                labels.append(leaf_label)
                specs.append(self._leaf_spec(spec, path, leaf, leaf_label, label))
        return leaves, specs, labels, _Arguments(arguments, len(args), list(kwargs))

    def _label(self, i):
        return self.parameters[i] if i < len(self.parameters) else f"argument {i}"

    def _top_specs(self, args, kwargs):
        count = len(args) + len(kwargs)
        if self.dim is not None:
            return [self.dim] * count
        if self.in_dims is None or _is_axis(self.in_dims):
            return [self.in_dims] * len(args) + [None] * len(kwargs)
        if isinstance(self.in_dims, tuple):
            if len(self.in_dims) != len(args):
                raise ValueError(
                    f"vmap: in_dims has {len(self.in_dims)} entries but the function was "
                    f"called with {len(args)} positional arguments ({', '.join(self._label(i) for i in range(len(args)))}); "
                    "give one entry per positional argument (None for unmapped)"
                )
            return list(self.in_dims) + [None] * len(kwargs)
        # a dict keyed by parameter name
        if self.signature is None:
            raise ValueError("vmap: in_dims as a dict needs a function with an inspectable signature")
        unknown = [name for name in self.in_dims if name not in self.signature.parameters]
        if unknown:
            raise ValueError(f"vmap: in_dims names {unknown}, which are not parameters of the function (it has {list(self.signature.parameters)})")
        bound = self.signature.bind(*args, **kwargs)
        names = list(bound.signature.parameters)
        specs = [self.in_dims.get(names[i]) if i < len(names) else None for i in range(len(args))]
        specs += [self.in_dims.get(name) for name in kwargs]
        return specs

    def _leaf_spec(self, spec, path, leaf, leaf_label, label):
        for key in path:
            if spec is None or isinstance(spec, (str, int)):
                break
            try:
                spec = spec[key]
            except (KeyError, IndexError, TypeError):
                raise ValueError(f"vmap: the in_dims entry for {label} does not fit the argument: no entry for {leaf_label}") from None
        if isinstance(spec, (dict, list, tuple)):
            raise ValueError(f"vmap: the in_dims entry for {label} does not fit the argument: {leaf_label} is a leaf but its entry is {spec!r}")
        if spec is None:
            return None
        if isinstance(spec, str):
            if is_labeled(leaf):
                if spec not in leaf_dims(leaf):
                    if self.dim is not None:
                        return None  # dim= maps only the arguments that have it
                    raise ValueError(
                        f"vmap: in_dims maps {leaf_label} over dim {spec!r}, but {leaf_label} has dims "
                        f"{leaf_dims(leaf)}{_did_you_mean(spec, [leaf])}"
                    )
                return spec
            if self.dim is not None or not hasattr(leaf, "shape"):
                return None
            raise ValueError(f"vmap: in_dims maps {leaf_label} over dim {spec!r}, but {leaf_label} is a {type(leaf).__name__} without dim names; give an int axis")
        # an int axis
        if is_labeled(leaf):
            dims = leaf_dims(leaf)
            if not -len(dims) <= spec < len(dims):
                raise ValueError(f"vmap: in_dims axis {spec} is out of range for {leaf_label} with dims {dims}")
            return dims[spec]
        if not hasattr(leaf, "shape"):
            raise ValueError(f"vmap: in_dims maps {leaf_label} over axis {spec}, but it is a {type(leaf).__name__}, not an array")
        if not -len(leaf.shape) <= spec < len(leaf.shape):
            raise ValueError(f"vmap: in_dims axis {spec} is out of range for {leaf_label} with shape {tuple(leaf.shape)}")
        return spec % len(leaf.shape)

    def _plan(self, leaves, specs, labels):
        """The level's dim name, size, 'preserve' position and coords to restore."""
        names = [s for s in specs if isinstance(s, str)]
        dim = self.dim if self.dim is not None else (names[0] if names else None)
        distinct = sorted(set(names))
        if len(distinct) > 1:
            raise ValueError(f"vmap: one vmap level maps over one dim, but in_dims names {distinct} at the same level; use a tuple of names per argument to nest them")
        sizes, preserve, index, index_owner, coords = [], None, None, None, {}
        for leaf, spec, label in zip(leaves, specs, labels):
            if spec is None:
                continue
            if isinstance(spec, str):
                sizes.append((label, leaf_size(leaf, spec)))
                if preserve is None:
                    preserve = _axis_of(leaf, spec)
                # a DataTree: each node that has the dim, so that two nodes must agree too
                for where, labels_here, coords_here in dim_label_sources(leaf, spec, label):
                    if labels_here is not None:
                        if index is None:
                            index, index_owner = labels_here, where
                        elif not labels_here.equals(index):
                            raise ValueError(
                                f"vmap over dim {spec!r}: the coordinate labels of {index_owner} and {where} "
                                f"differ ({index_owner}: {_preview(index)}, {where}: {_preview(labels_here)}); "
                                "vmap pairs examples by position and never aligns them. Reindex, "
                                "assign_coords or drop_vars one of them first."
                            )
                    for name, var in coords_here.items():
                        coords.setdefault(name, var)
            else:
                sizes.append((label, leaf.shape[spec]))
                if preserve is None:
                    preserve = spec
        what = f"dim {dim!r}" if dim is not None else "the mapped axis"
        if not sizes:
            if self.axis_size is None:
                described = ", ".join(f"{label} with dims {leaf_dims(leaf)}" if is_labeled(leaf) else f"{label} ({type(leaf).__name__})"
                                      for leaf, label in zip(leaves, labels)) or "no arguments"
                suggestion = _did_you_mean(dim, leaves)
                raise ValueError(f"vmap over {what}: no argument has it ({described}){suggestion}"
                                 f"{' Or' if suggestion else ';'} pass axis_size= to map a function of unmapped arguments")
            return dim, self.axis_size, 0, coords
        distinct_sizes = {size for _, size in sizes}
        if len(distinct_sizes) > 1:
            listing = ", ".join(f"{label} has {size}" for label, size in sizes)
            raise ValueError(f"vmap over {what}: the arguments disagree on its size: {listing}")
        size = sizes[0][1]
        if self.axis_size is not None and self.axis_size != size:
            raise ValueError(f"vmap over {what}: axis_size={self.axis_size} but {sizes[0][0]} has size {size}")
        return dim, size, preserve or 0, coords

    # --- one pass ---------------------------------------------------------------------------------
    def _run(self, treedef, specs, dim, position, coords, leaves, size, examples, offset=0):
        watch = self._watches_numpy_random()
        level = BatchLevel(size, self.randomness, self.branches,
                           _example_names(dim, coords, examples, offset, self.in_block))
        with active(level):
            shared = {}  # equal coordinates of several arguments: one traced coordinate
            entered = Entered(level)  # the same for the coordinates along the mapped dim
            inside = [attach(_enter(leaf, spec, level, shared), found, entered)
                      for leaf, spec, found in zip(leaves, specs, examples)]
            for leaf in inside:
                coordinates_copied_as_themselves(leaf, level)
            args, kwargs = treedef.rebuild(inside, specs)
            numpy_state = lf_random.numpy_state() if watch else None
            try:
                out = self.func(*args, **kwargs)
            except (ValueError, KeyError) as error:
                clearer = _hidden_dim_error(error, dim) or zero_d_index_error(error, "vmap")
                if clearer is None:
                    raise
                raise clearer from error
            if watch and lf_random.numpy_drew_since(numpy_state):
                raise RandomnessError(_numpy_random_message(self.randomness))
            paths, out_leaves, out_def = optree.tree_flatten_with_path(out, none_is_leaf=True)
            reject_quantities(out_leaves, ["output" + "".join(f"[{k!r}]" for k in path) for path in paths],
                              transform="vmap")
            if dim is None and any(is_labeled(v) for v in out_leaves):
                raise ValueError("vmap: the function returned labeled arrays but the mapped axes have no dim name; map with dim= or name a dim in in_dims")
            positions = leaf_positions(position, out, self.given_out_dims)
            results = []
            for path, value, at in zip(paths, out_leaves, positions):
                label = "output" + "".join(f"[{k!r}]" for k in path)
                value = restore_untouched(value, entered)
                if at is None:
                    _check_unmapped_output(value, level, label, dim)
                    results.append(value)
                else:
                    results.append(unmap_leaf(value, dim, level, at, coords, label))
        return optree.tree_unflatten(out_def, results)

    def _watches_numpy_random(self):
        """Whether this pass checks NumPy's global random state: unless its draws are meant
        to be shared ("same"), or an enclosing vmap checks already (one check covers both)."""
        if self.randomness == "same":
            return False
        return not any(level.batches and level.randomness != "same" for level in current_levels())


def _example_names(dim, coords, examples, offset, in_block):
    """How messages of ``branches="agree"`` name this pass's examples: by position, and by
    the labels of the mapped dim's index coordinate where it has one."""
    variable = coords.get(dim) if isinstance(dim, str) else None
    if variable is None and isinstance(dim, str):
        variable = next((found[dim].variable for found in examples if dim in found), None)
    labels = None
    if variable is not None and variable.ndim == 1 and not lazy_data(variable):
        labels = lambda: variable.values  # noqa: E731 - read only for a message
    return ExampleNames(dim, labels, offset, in_block)


def lazy_data(variable):
    """Whether ``variable`` holds Dask data (its labels would need computing)."""
    return type(variable._data).__module__.startswith("dask")


def _map_out_dims(function, out_dims):
    """``out_dims`` with ``function`` applied to each entry (int, "preserve" or None)."""
    if isinstance(out_dims, (tuple, list)):
        return type(out_dims)(_map_out_dims(function, e) for e in out_dims)
    if isinstance(out_dims, dict):
        return {k: _map_out_dims(function, e) for k, e in out_dims.items()}
    return None if out_dims is None else function(out_dims)


def _check_unmapped_output(value, level, label, dim):
    """An output whose out_dims entry is None leaves unmapped: none of it may be mapped."""
    if is_labeled(value):
        variables = {}
        for path, node in (tree_nodes(value) if isinstance(value, xr.DataTree) else [("", value)]):
            if isinstance(node, xr.DataArray):
                variables.update({f"{path}{'/' if path else ''}{n}": c.variable for n, c in node.coords.items()})
                variables[node.name if node.name is not None else "its data"] = node.variable
            elif isinstance(node, xr.Dataset):
                variables.update({f"{path}{'/' if path else ''}{n}": v for n, v in node.variables.items()})
            else:  # a Variable
                variables["its data"] = node
        mapped = [name for name, var in variables.items() if traced_by(var._data, level)]
    else:
        mapped = ["it"] if traced_by(value, level) else []
    if mapped:
        what = f"dim {dim!r}" if dim is not None else "the mapped axis"
        raise ValueError(
            f"vmap over {what}: out_dims gives None for {label} (not mapped), but {label} differs per "
            f"example: {', '.join(map(str, mapped))} depends on the mapped inputs. Give that output an int "
            "out_dims entry, or compute it from unmapped values only."
        )


def _did_you_mean(name, leaves):
    """``"; did you mean 'sample'?"`` when ``name`` is close to a dim of the labeled ``leaves``."""
    dims = []
    for leaf in leaves:
        if is_labeled(leaf):
            dims.extend(d for d in leaf_dims(leaf) if isinstance(d, str) and d not in dims)
    close = difflib.get_close_matches(str(name), dims, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


# xarray's messages when a function asks for a dim the array does not have
_MISSING_DIM = ("not found in array dimensions", "do not exist", "not found in", "not a dimension",
                "does not have", "not in", "no dim")


def _xarray_raised(error):
    """Whether the innermost frame of ``error``'s traceback is xarray's (its own check)."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and (tb.tb_frame.f_globals.get("__name__") or "").startswith("xarray.")


def _hidden_dim_error(error, dim):
    """A clearer error for xarray's "dim not found" about the mapped dim ``dim`` (the function
    reduced or selected over it inside), or None."""
    if not isinstance(dim, str) or not _xarray_raised(error):
        return None
    message = str(error.args[0]) if error.args else ""
    if isinstance(error, KeyError):
        if message != dim:
            return None
        message = f"KeyError({dim!r})"
    elif repr(dim) not in message:
        return None
    if isinstance(error, ValueError) and not any(phrase in message for phrase in _MISSING_DIM):
        return None
    text = (
        f"vmap over dim {dim!r}: the function asked for dim {dim!r}, which vmap hides inside "
        f"(each example is x.isel({dim}=i), without that dim), and xarray says: {message}. To reduce or "
        f"select over {dim!r}, do it on the result of the vmap: lf.vmap(f, dim={dim!r})(x).mean({dim!r}), "
        "or return the per-example values and reduce them in a separate step."
    )
    return _MessageKeyError(text) if isinstance(error, KeyError) else ValueError(text)


class _MessageKeyError(KeyError):
    """A KeyError whose message reads as text (KeyError shows the repr of its argument)."""

    def __str__(self):
        return str(self.args[0])



def _numpy_random_message(randomness):
    return (
        f"vmap(randomness={randomness!r}): the function drew from NumPy's global random state "
        "(np.random.normal, np.random.rand, scipy.stats' .rvs() without random_state, ...). vmap "
        "calls the function once for all the examples, so every example would get the same draw, "
        "unlike in a loop over them (jacfwd and hessian vmap over tangents too). Draw with "
        "lf.random instead (lf.random.normal(like=x), lf.random.uniform(sizes=...)) and say "
        "what the draws should be: randomness='different' (independent per example) or "
        "randomness='same' (one draw shared by every example; np.random gives just that, so "
        "it is allowed then); or draw outside and pass the draws in, mapped over the dim."
    )


class Plan(NamedTuple):
    """One call of a vmapped function, planned.

    ``leaves`` of the arguments (pytrees flattened) with their in_dims entries ``specs``
    (a dim name, an axis, or None) and ``labels`` for messages; ``arguments`` rebuilds
    the call from the leaves; ``dim`` and ``size`` of the mapped dim; ``out_position``
    where outputs put it; ``coords``: the 1-D coordinates along it, restored on outputs.
    """

    leaves: list
    specs: list
    labels: list
    arguments: "_Arguments"
    dim: object
    size: int
    out_position: object
    coords: dict


class _Arguments:
    """How to rebuild the call's arguments from their leaves.

    An argument none of whose leaves is mapped is passed through as the very
    object the caller gave (a list the function pops from is the caller's list).
    """

    def __init__(self, arguments, n_positional, keywords):
        self.arguments = arguments
        self.n_positional = n_positional
        self.keywords = keywords

    def rebuild(self, leaves, specs):
        values = []
        for value, value_def, start, stop in self.arguments:
            if all(spec is None for spec in specs[start:stop]):
                values.append(value)
            else:
                values.append(optree.tree_unflatten(value_def, leaves[start:stop]))
        return tuple(values[: self.n_positional]), dict(zip(self.keywords, values[self.n_positional:]))


def _enter(leaf, spec, level, shared):
    if spec is None:
        return leaf
    if isinstance(spec, str):
        return map_leaf(leaf, spec, level, shared)
    return batch_value(level, leaf, spec)


def _axis_of(leaf, dim):
    """Where ``dim`` stands in ``leaf`` (in its first data variable that has it)."""
    if isinstance(leaf, xr.Dataset):
        for variable in leaf.data_vars.values():
            if dim in variable.dims:
                return variable.dims.index(dim)
    return leaf_dims(leaf).index(dim)


def _preview(index):
    values = list(index[:4])
    return "[" + ", ".join(map(str, values)) + (", ...]" if len(index) > 4 else "]")


def _parameters(func):
    signature = _signature(func)
    if signature is None:
        return []
    return [name for name, p in signature.parameters.items()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _signature(func):
    """``inspect.signature(func)`` (None where it has none), read once per plain Python
    function (by its code and defaults): jacrev and jacfwd make a vmap of a fresh closure
    of the same code on every call."""
    key = _signature_key(func)
    if key is not None:
        found = _SIGNATURES.get(key, _MISSING)
        if found is not _MISSING:
            return found
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        signature = None
    if key is not None:
        if len(_SIGNATURES) >= _MAX_SIGNATURES:
            _SIGNATURES.clear()
        _SIGNATURES[key] = signature
    return signature


def _signature_key(func):
    """What a plain function's signature depends on, or None (anything else: a callable
    object, a wrapper, a function with annotations or keyword-only defaults)."""
    if (type(func) is not types.FunctionType or func.__kwdefaults__ or func.__annotations__
            or "__wrapped__" in func.__dict__ or "__signature__" in func.__dict__):
        return None
    defaults = func.__defaults__
    key = (func.__code__, defaults, None if defaults is None else tuple(map(type, defaults)))  # 1 is 1.0 in a dict
    try:
        hash(key)
    except TypeError:  # an unhashable default
        return None
    return key


_SIGNATURES: dict = {}  # a cache: (code, defaults) -> signature, shared by every thread (values never change)
_MAX_SIGNATURES = 512
_MISSING = object()


def _check_entries_fit(spec, value, label, where):
    """An in_dims entry that is a dict/list/tuple names no key or position ``value`` lacks."""
    if isinstance(spec, dict) and isinstance(value, dict):
        extra = [key for key in spec if key not in value]
        if extra:
            raise ValueError(f"vmap: the in_dims entry for {label} does not fit the argument: it names "
                             f"{extra}, which {where} does not have (its keys: {list(value)})")
        for key, entry in spec.items():
            _check_entries_fit(entry, value[key], label, f"{where}[{key!r}]")
    elif isinstance(spec, (list, tuple)) and isinstance(value, (list, tuple)):
        if len(spec) != len(value):
            raise ValueError(f"vmap: the in_dims entry for {label} does not fit the argument: it has "
                             f"{len(spec)} entries for {where}, which has {len(value)}")
        for k, (entry, item) in enumerate(zip(spec, value)):
            _check_entries_fit(entry, item, label, f"{where}[{k}]")
