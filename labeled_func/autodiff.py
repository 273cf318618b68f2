"""Automatic differentiation over labeled axes: grad, vjp, jvp, jacrev, jacfwd,
hessian, linearize.

Gradients mirror the differentiated argument (a DataArray keeps its dims, coords and
name; a Dataset its variables); Jacobians carry the output's dims followed by the
argument's, a clashing argument dim renamed with ``wrt_suffix``.  A derivative's attrs
are its own (``units`` out / in where certain, ``long_name``; see ``units.py``), never the argument's.
"""
from __future__ import annotations

import inspect
import numbers
import weakref
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import optree
import xarray as xr

from labeled_func_kernels import core as kcore
from labeled_func_kernels import creation as kc
from labeled_func_kernels import elementwise as ew
from labeled_func_kernels import shape as ks
from labeled_func_kernels.backend import device_of, dtype_kind, lazy_namespace, namespace, namespace_dtype, numpy_namespace
from labeled_func_kernels.indexing import getitem_static

from .assemble import coord_variables, joined_labels, merged_arrays
from ._wrapping import transformed
from .backends import check_one_backend, reject_quantities
from .flat import Arrays, FlatArrays, match_arrays
from .engine import (JVPLevel, VJPLevel, active, backward, held, input_node, node_of, primal_of,
                     tangent_of, traced_by)
from .engine.errors import InplaceError
from .named import mapped_names
from .ravel import element_attrs, element_labels, ravel
from .units import Inputs, derivative_attrs, derivative_units, label_output, second_derivative_attrs
from .vmap import vmap

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "linearize"]


# --- public transforms ------------------------------------------------------------------
def grad(func: Callable[..., Any], argnums: int | tuple[int, ...] = 0, *, has_aux: bool = False,
         holomorphic: bool = False) -> Callable[..., Any]:
    """The gradient of a scalar-valued ``func`` with respect to argument(s) ``argnums``.

    The gradient has the structure of the argument: a DataArray with the same dims,
    coords and name, a Dataset with the same variables, tuples and dicts alike.  Its
    attrs are its own, not the argument's: a ``long_name`` and, where certain, ``units``
    (output units / argument units, ``"K-1"``), from what ``func`` set on its output
    itself, never from attrs xarray passed on from an input (see
    :mod:`labeled_func.units`; the same for every derivative transform).  The
    output must be real; of a complex argument z = x + iy the gradient is
    dL/dx - i dL/dy, as in JAX.  ``holomorphic=True`` (complex arguments and output)
    gives the complex derivative f'(z) of a holomorphic ``func``.

    Parameters
    ----------
    func : callable
        Takes DataArrays, Datasets, arrays, numbers and tuples/lists/dicts of them
        (pytrees) and returns a scalar: a 0-d DataArray, a 0-d array or a Python
        number; with ``has_aux``, a pair ``(scalar, aux)``.
    argnums : int or tuple of int
        The positional argument to differentiate with respect to; a tuple of them
        gives a tuple of gradients.
    has_aux : bool
        ``func`` returns ``(output, aux)``: ``aux`` comes back beside the gradient,
        not differentiated.
    holomorphic : bool
        ``func`` is holomorphic in complex arguments: the gradient is f'(z).

    Returns
    -------
    callable
        Takes ``func``'s arguments and returns the gradient (the structure of the
        argument; a tuple of them for a tuple ``argnums``), or ``(gradient, aux)``
        with ``has_aux``.

    Raises
    ------
    ValueError
        When called: ``func`` returns no scalar (the message says to reduce it or use
        ``lf.jacrev``), ``argnums`` is not an int or a non-empty tuple of ints or is out
        of range, ``has_aux`` is set and ``func`` returns no pair, or the arguments mix
        array libraries (NumPy and CuPy).
    TypeError
        When called: a differentiated argument is an integer or boolean array or not an
        array at all (the message names it); a complex output without ``holomorphic``,
        or a real argument or output with it.
    lf.UnsupportedOperationError
        A pint Quantity argument, or a NumPy function inside with no derivative rule.

    Examples
    --------
    The derivative of the sum of squares is 2x, and keeps the labels of ``x``:

    >>> import numpy as np, xarray as xr, labeled_func as lf
    >>> x = xr.DataArray([1.0, 2.0, 3.0], dims="site", coords={"site": [10, 20, 30]})
    >>> lf.grad(lambda x: (x ** 2).sum())(x)
    <xarray.DataArray (site: 3)> Size: 24B
    array([2., 4., 6.])
    Coordinates:
      * site     (site) int64 24B 10 20 30

    With respect to two arguments, d(a b)/da = b and d(a b)/db = a:

    >>> da, db = lf.grad(lambda a, b: a * b, argnums=(0, 1))(xr.DataArray(3.0), xr.DataArray(5.0))
    >>> float(da), float(db)
    (5.0, 3.0)
    """
    def gradient(*args, **kwargs):
        g, value = _grad_and_value(func, argnums, has_aux, "grad", holomorphic)(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return transformed(gradient, func, "grad",
                       (("argnums", argnums, 0), ("has_aux", has_aux, False), ("holomorphic", holomorphic, False)))


def grad_and_value(func: Callable[..., Any], argnums: int | tuple[int, ...] = 0, *, has_aux: bool = False,
                   holomorphic: bool = False) -> Callable[..., Any]:
    """``(gradient, value)``, or ``(gradient, (value, aux))`` with ``has_aux``: the
    gradient of :func:`grad` and the value of ``func``, from one evaluation.

    Parameters
    ----------
    func : callable
        Returns a scalar (a 0-d DataArray, a 0-d array or a Python number), or
        ``(scalar, aux)`` with ``has_aux``; see :func:`grad`.
    argnums : int or tuple of int
        The positional argument(s) to differentiate with respect to.
    has_aux : bool
        ``func`` returns ``(output, aux)``.
    holomorphic : bool
        ``func`` is holomorphic in complex arguments: the gradient is f'(z).

    Returns
    -------
    callable
        Takes ``func``'s arguments and returns ``(gradient, value)``, or
        ``(gradient, (value, aux))`` with ``has_aux`` (torch.func's order).

    Raises
    ------
    ValueError
        When called: ``func`` returns no scalar, ``argnums`` is invalid or out of range,
        ``has_aux`` is set and ``func`` returns no pair, or the arguments mix array
        libraries.
    TypeError
        When called: a differentiated argument is an integer, boolean or non-array
        value (named); a complex output without ``holomorphic``.
    lf.UnsupportedOperationError
        A pint Quantity argument, or a NumPy function inside with no derivative rule.

    Examples
    --------
    The derivative of the sum of cubes is 3x², its value 1 + 8 = 9:

    >>> import xarray as xr, labeled_func as lf
    >>> g, v = lf.grad_and_value(lambda x: (x ** 3).sum())(xr.DataArray([1.0, 2.0], dims="i"))
    >>> g.values.tolist(), float(v)
    ([3.0, 12.0], 9.0)
    """
    return _grad_and_value(func, argnums, has_aux, "grad_and_value", holomorphic)


def _grad_and_value(func, argnums, has_aux, name, holomorphic=False):
    def gradient_and_value(*args, **kwargs):
        positions = _argnums(argnums, len(args), name)
        run = _Reverse(func, args, kwargs, positions, has_aux, name)
        out = run.output
        value = _scalar(out, name)
        _check_complex(name, holomorphic, outputs=[("the output", value)], inputs=run.labeled_arrays())
        node = node_of(value, run.level)
        seeds = [] if node is None else [(node, kc.ones_like.bind(primal_of(value, run.level)))]
        grads = run.pull(seeds)
        output = _described(out, func, args, kwargs)
        result = run.mirror(grads, lambda wrt, attrs: derivative_attrs(output, wrt, attrs))
        return result, ((run.primal_output, run.aux) if has_aux else run.primal_output)

    return transformed(gradient_and_value, func, name,
                       (("argnums", argnums, 0), ("has_aux", has_aux, False), ("holomorphic", holomorphic, False)))


def vjp(func: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """The output of ``func`` at ``primals`` and its vector-Jacobian product function.

    Parameters
    ----------
    func : callable
        Takes the primals (pytrees of DataArrays, Datasets, arrays) and returns a
        pytree of them; with ``has_aux``, a pair ``(output, aux)``.
    *primals : Any
        The point at which to differentiate, one value per positional argument.
    has_aux : bool
        ``func`` returns ``(output, aux)``: ``aux`` is returned, not differentiated.

    Returns
    -------
    tuple
        ``(output, vjp_fn)``, or ``(output, vjp_fn, aux)`` with ``has_aux``.
        ``vjp_fn(cotangent)``, with a cotangent of the output's structure, returns a
        tuple with one cotangent per primal; a DataArray cotangent is matched to the
        output by dim name (its dim order may differ).

    Raises
    ------
    TypeError
        A primal that is an integer, boolean or non-array value (named).
    ValueError
        ``has_aux`` is set and ``func`` returns no pair, the primals mix array
        libraries, or (from ``vjp_fn``) a cotangent whose structure, dims or shape
        differ from the output's.
    lf.UnsupportedOperationError
        A pint Quantity primal, or a NumPy function inside with no derivative rule.

    Examples
    --------
    For f(x) = x², the pullback of a cotangent of ones is 2x:

    >>> import xarray as xr, labeled_func as lf
    >>> x = xr.DataArray([1.0, 2.0], dims="i")
    >>> out, pull = lf.vjp(lambda x: x * x, x)
    >>> pull(xr.ones_like(out))[0].values.tolist()
    [2.0, 4.0]
    """
    run = _Reverse(func, primals, {}, tuple(range(len(primals))), has_aux, "vjp")
    output = FlatArrays(run.output, "output", "vjp", allow_any=True)
    nodes = [node_of(a, run.level) for a in output.arrays]
    primal_output = run.primal_output

    def vjp_fn(cotangent):
        cotangents = match_arrays(primal_output, cotangent, "vjp")
        seeds = [(node, c) for node, c in zip(nodes, cotangents) if node is not None]
        # a cotangent's units depend on what the cotangent given means: it carries no attrs
        return tuple(run.mirror(run.pull(seeds), lambda wrt, attrs: {}, as_tuple=True))

    return (primal_output, vjp_fn, run.aux) if has_aux else (primal_output, vjp_fn)


def jvp(func: Callable[..., Any], primals: tuple[Any, ...] | list[Any], tangents: tuple[Any, ...] | list[Any], *,
        has_aux: bool = False) -> tuple[Any, ...]:
    """The output of ``func`` at ``primals`` and its directional derivative along
    ``tangents`` (forward mode).

    Parameters
    ----------
    func : callable
        Takes one positional argument per primal (pytrees of DataArrays, Datasets,
        arrays) and returns a pytree of them; with ``has_aux``, ``(output, aux)``.
    primals : tuple or list
        The point, one entry per argument of ``func`` (``(x,)`` for one argument).
    tangents : tuple or list
        The direction, one entry per primal, each of its primal's structure; a
        DataArray tangent is matched to its primal by dim name.
    has_aux : bool
        ``func`` returns ``(output, aux)``: ``aux`` is returned, not differentiated.

    Returns
    -------
    tuple
        ``(output, tangent_out)``, or ``(output, tangent_out, aux)`` with ``has_aux``;
        ``tangent_out`` has the structure of the output.

    Raises
    ------
    TypeError
        ``primals`` or ``tangents`` is not a tuple or list (write ``lf.jvp(f, (x,), (t,))``),
        or a primal is an integer, boolean or non-array value (named).
    ValueError
        ``primals`` and ``tangents`` differ in length, a tangent's structure, dims or
        shape differ from its primal's, ``has_aux`` is set and ``func`` returns no pair,
        or the values mix array libraries.
    lf.UnsupportedOperationError
        A pint Quantity, or a NumPy function inside with no derivative rule.

    Examples
    --------
    Along a direction of ones, the derivative of x² is 2x:

    >>> import xarray as xr, labeled_func as lf
    >>> x = xr.DataArray([1.0, 2.0], dims="i")
    >>> out, t = lf.jvp(lambda x: x ** 2, (x,), (xr.ones_like(x),))
    >>> t.values.tolist()
    [2.0, 4.0]
    """
    for what, value in (("primals", primals), ("tangents", tangents)):
        if not isinstance(value, (tuple, list)):
            raise TypeError(
                f"jvp: {what} must be a tuple with one entry per argument of the function, got "
                f"{type(value).__name__}; as in torch.func, write lf.jvp(f, (x,), (t,)) for one argument"
            )
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents; give one tangent per primal")
    labels = [_label(func, i) for i in range(len(primals))]
    check_one_backend(primals + tangents, labels + [f"the tangent of {label}" for label in labels], transform="jvp")
    reject_quantities(primals + tangents, labels + [f"the tangent of {label}" for label in labels], transform="jvp")
    slots = [FlatArrays(p, _label(func, i), "jvp") for i, p in enumerate(primals)]
    level = JVPLevel()
    level.label = "jvp"
    with active(level):
        args = []
        for slot, tangent, label in zip(slots, tangents, labels):
            tangent_arrays = match_arrays(slot.value, tangent, "jvp", what=f"tangent of {label}")
            args.append(slot.rebuild([level.input(a, t) for a, t in zip(slot.arrays, tangent_arrays)]))
        out, aux = _split_aux(func(*args), has_aux, "jvp")
        output = FlatArrays(_strip_coords(out, level), "output", "jvp", allow_any=True)
        primal_arrays = [primal_of(a, level) for a in output.arrays]
        tangent_arrays = [tangent_of(a, level) for a in output.arrays]
        result = (output.rebuild(primal_arrays), output.rebuild(tangent_arrays))
        aux = _strip(aux, level, "jvp")
    return result + (aux,) if has_aux else result


def linearize(func: Callable[..., Any], *primals: Any) -> tuple[Any, Callable[..., Any]]:
    """``(output, jvp_fn)`` with ``jvp_fn(*tangents)`` the JVP of ``func`` at ``primals``.

    ``func`` runs on traced copies of the primals, as under ``jvp``: a function that
    writes into its argument leaves the caller's array alone, so ``jvp_fn`` differentiates
    at the point the caller gave.

    Parameters
    ----------
    func : callable
        Takes one positional argument per primal (pytrees of DataArrays, Datasets,
        arrays) and returns a pytree of them.
    *primals : Any
        The point at which to linearize.

    Returns
    -------
    output : Any
        ``func(*primals)``.
    jvp_fn : callable
        ``jvp_fn(*tangents)``, one tangent per primal of its primal's structure,
        returns the directional derivative, of the output's structure.

    Raises
    ------
    TypeError
        A primal that is an integer, boolean or non-array value (named).
    ValueError
        The primals mix array libraries; (from ``jvp_fn``) a tangent count, structure,
        dims or shape that does not fit the primals.
    lf.UnsupportedOperationError
        A pint Quantity primal, or a NumPy function inside with no derivative rule.

    Examples
    --------
    The derivative of x³ is 3x²:

    >>> import xarray as xr, labeled_func as lf
    >>> x = xr.DataArray([1.0, 2.0], dims="i")
    >>> out, jvp_fn = lf.linearize(lambda x: x ** 3, x)
    >>> out.values.tolist(), jvp_fn(xr.ones_like(x)).values.tolist()
    ([1.0, 8.0], [3.0, 12.0])
    """
    labels = [_label(func, i) for i in range(len(primals))]
    check_one_backend(primals, labels, transform="linearize")
    reject_quantities(primals, labels, transform="linearize")
    slots = [FlatArrays(p, label, "linearize") for p, label in zip(primals, labels)]
    level = JVPLevel()
    level.label = "linearize"
    with active(level):
        # traced without a tangent: in-place writes stay on the tracer, nothing is differentiated
        args = [slot.rebuild([level.input(a, None) for a in slot.arrays]) for slot in slots]
        output = _strip(_strip_coords(func(*args), level), level, "linearize", "output")

    def jvp_fn(*tangents):
        return jvp(func, primals, tangents)[1]

    return output, jvp_fn


def jacrev(func: Callable[..., Any], argnums: int | tuple[int, ...] = 0, *, has_aux: bool = False,
           chunk_size: int | None = None, wrt_suffix: str = "_wrt", holomorphic: bool = False) -> Callable[..., Any]:
    """The Jacobian by reverse mode: one VJP per output element, vmapped.

    Dims: the output's dims, then the argument's (a name taken by the output, or by a
    dim an enclosing vmap maps, gets ``wrt_suffix`` until it is free), with the coords
    of both.  Structures nest output-outer, argument-inner: a DataArray output and a
    Dataset argument give a Dataset of Jacobians; a Dataset output a dict of them keyed
    by output variable.  The outputs must be real (rows are gradients,
    dL/dx - i dL/dy of a complex argument); ``holomorphic=True`` (complex arguments and
    outputs) gives f'(z).

    Parameters
    ----------
    func : callable
        Takes pytrees of DataArrays, Datasets, arrays and returns a pytree of them;
        with ``has_aux``, ``(output, aux)``.
    argnums : int or tuple of int
        The positional argument(s) to differentiate with respect to; a tuple gives a
        tuple of Jacobians per output.
    has_aux : bool
        ``func`` returns ``(output, aux)``: the call returns ``(jacobian, aux)``.
    chunk_size : int, optional
        Rows of the Jacobian per vmapped VJP (bounds the memory); ``1`` is a plain loop
        of VJPs with none of vmap's limits; None: all at once.
    wrt_suffix : str
        Appended (repeatedly) to an argument dim whose name is taken.
    holomorphic : bool
        ``func`` is holomorphic in complex arguments: the Jacobian of f'(z).

    Returns
    -------
    callable
        Takes ``func``'s arguments and returns the Jacobian (or ``(jacobian, aux)``).

    Raises
    ------
    ValueError
        ``chunk_size`` is not a positive int or None; when called: ``argnums`` is invalid
        or out of range, ``has_aux`` is set and ``func`` returns no pair, or the
        arguments mix array libraries.
    TypeError
        When called: a differentiated argument is an integer, boolean or non-array value
        (named); a complex output without ``holomorphic``.
    lf.UnsupportedOperationError
        A pint Quantity argument, or a NumPy function inside with no derivative rule.

    Examples
    --------
    The Jacobian of the elementwise square is diag(2x):

    >>> import xarray as xr, labeled_func as lf
    >>> x = xr.DataArray([1.0, 2.0], dims="i")
    >>> J = lf.jacrev(lambda x: x ** 2)(x)
    >>> J.dims, J.values.tolist()
    (('i', 'i_wrt'), [[2.0, 0.0], [0.0, 4.0]])
    """
    if chunk_size is not None and (not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1):
        raise ValueError(f"jacrev: chunk_size={chunk_size!r} must be a positive int (rows of the "
                         "Jacobian per vmapped VJP) or None (all at once)")
    return _jacrev(func, argnums, has_aux, chunk_size, wrt_suffix, "jacrev", holomorphic)


def _jacrev(func, argnums, has_aux, chunk_size, wrt_suffix, name, holomorphic=False):
    """``jacrev``, its errors prefixed with ``name`` (``hessian`` is ``jacfwd(jacrev)``)."""
    def jacobian(*args, **kwargs):
        positions = _argnums(argnums, len(args), name)
        run = _Reverse(func, args, kwargs, positions, has_aux, name)
        output = FlatArrays(run.output, "output", name, allow_any=True)
        _check_complex(name, holomorphic, outputs=_output_labels(output), inputs=run.labeled_arrays())
        nodes = [node_of(a, run.level) for a in output.arrays]
        shapes = [tuple(a.shape) for a in output.arrays]
        sizes = [int(np.prod(s)) for s in shapes]
        total = sum(sizes)

        def pull_row(row):
            seeds = []
            start = 0
            for node, shape, size in zip(nodes, shapes, sizes):
                if node is not None:
                    piece = kcore.reshape.bind(getitem_static(row, (slice(start, start + size), Ellipsis)), shape=shape)
                    seeds.append((node, piece))
                start += size
            return run.pull(seeds, cast=False)

        basis = _eye(total, output.arrays)
        if chunk_size == 1:
            rows = [pull_row(getitem_static(basis, (k,))) for k in range(total)]
            columns = [ks.stack.bind(*column, axis=0) for column in zip(*rows)] if rows else []
        else:
            columns = vmap(pull_row, in_dims=(0,), chunk_size=chunk_size)(basis)
        blocks = []
        start = 0
        for out_array, shape, size in zip(output.arrays, shapes, sizes):
            blocks.append([
                _jacobian_cast(kcore.reshape.bind(getitem_static(column, (slice(start, start + size), Ellipsis)),
                                                  shape=shape + tuple(array.shape)), out_array, array, reverse=True)
                for column, array in zip(columns, run.arrays)
            ])
            start += size
        naming = _Naming(wrt_suffix, func, positions, inputs=Inputs((args, kwargs), func))
        result = _label_jacobian(output, run.slots, blocks, naming, run.single)
        return (result, run.aux) if has_aux else result

    return transformed(jacobian, func, name, (("argnums", argnums, 0), ("has_aux", has_aux, False),
                                              ("chunk_size", chunk_size, None), ("wrt_suffix", wrt_suffix, "_wrt"),
                                              ("holomorphic", holomorphic, False)))


def jacfwd(func: Callable[..., Any], argnums: int | tuple[int, ...] = 0, *, has_aux: bool = False,
           randomness: Literal["error", "different", "same"] = "error", wrt_suffix: str = "_wrt", holomorphic: bool = False) -> Callable[..., Any]:
    """The Jacobian by forward mode: one JVP per input element, vmapped.

    Labeled as :func:`jacrev`'s (the output's dims, then the argument's).  The
    arguments must be real (columns are derivatives along them); ``holomorphic=True``
    (complex arguments and outputs) gives f'(z).

    Parameters
    ----------
    func : callable
        Takes pytrees of DataArrays, Datasets, arrays and returns a pytree of them;
        with ``has_aux``, ``(output, aux)``.
    argnums : int or tuple of int
        The positional argument(s) to differentiate with respect to.
    has_aux : bool
        ``func`` returns ``(output, aux)``: the call returns ``(jacobian, aux)``.
    randomness : {"error", "different", "same"}
        What ``lf.random`` draws inside do under the vmap over tangents (see
        :func:`vmap`).
    wrt_suffix : str
        Appended (repeatedly) to an argument dim whose name is taken.
    holomorphic : bool
        ``func`` is holomorphic in complex arguments: the Jacobian of f'(z).

    Returns
    -------
    callable
        Takes ``func``'s arguments and returns the Jacobian (or ``(jacobian, aux)``).

    Raises
    ------
    ValueError
        When called: ``argnums`` is invalid or out of range, ``randomness`` is not one
        of the three, ``has_aux`` is set and ``func`` returns no pair, or the arguments
        mix array libraries.
    TypeError
        When called: a differentiated argument is an integer, boolean, complex (without
        ``holomorphic``) or non-array value (named).
    lf.RandomnessError
        An ``lf.random`` draw inside with ``randomness="error"``.
    lf.UnsupportedOperationError
        A pint Quantity argument, or a NumPy function inside with no derivative rule
        (an ``lf.custom_vjp`` function's own operations included: forward mode
        differentiates the function, not its reverse-mode rule).

    Examples
    --------
    The Jacobian of the elementwise square is diag(2x):

    >>> import xarray as xr, labeled_func as lf
    >>> x = xr.DataArray([1.0, 2.0], dims="i")
    >>> lf.jacfwd(lambda x: x ** 2)(x).values.tolist()
    [[2.0, 0.0], [0.0, 4.0]]
    """
    return _jacfwd(func, argnums, has_aux, randomness, wrt_suffix, "jacfwd", holomorphic)


def _jacfwd(func, argnums, has_aux, randomness, wrt_suffix, name, holomorphic=False):
    """``jacfwd``, its errors prefixed with ``name`` (``hessian`` is ``jacfwd(jacrev)``)."""
    def jacobian(*args, **kwargs):
        positions = _argnums(argnums, len(args), name)
        _check_backends(func, args, kwargs, name)
        slots = [FlatArrays(args[i], _label(func, i), name) for i in positions]
        arrays = [a for slot in slots for a in slot.arrays]
        _check_complex(name, holomorphic, inputs=_labeled(func, positions, slots))
        shapes = [tuple(a.shape) for a in arrays]
        sizes = [int(np.prod(s)) for s in shapes]
        seen = {}

        def push_row(row):
            tangents, start = [], 0
            for shape, size in zip(shapes, sizes):
                tangents.append(kcore.reshape.bind(getitem_static(row, (slice(start, start + size), Ellipsis)), shape=shape))
                start += size
            level = JVPLevel()
            level.label = name
            with active(level):
                new_args = list(args)
                k = 0
                for i, slot in zip(positions, slots):
                    count = len(slot.arrays)
                    new_args[i] = slot.rebuild([level.input(a, t) for a, t in
                                                zip(slot.arrays, tangents[k:k + count])])
                    k += count
                out, aux = _split_aux(func(*new_args, **kwargs), has_aux, name)
                output = FlatArrays(_strip_coords(out, level), "output", name, allow_any=True)
                aux_arrays = FlatArrays(_strip(aux, level, name), "aux", name, allow_any=True)
                seen["output"], seen["aux"] = output, aux_arrays
                return ([tangent_of(a, level) for a in output.arrays],
                        [primal_of(a, level) for a in output.arrays], aux_arrays.arrays)

        basis = _eye(sum(sizes), arrays)
        guard = _AliasGuard(func, args, kwargs, positions, slots, name)
        columns, primals, aux_arrays = vmap(push_row, in_dims=(0,), randomness=randomness)(basis)
        guard.check()
        output = seen["output"]
        if holomorphic:
            _check_complex(name, holomorphic, outputs=_output_labels(output))
        blocks = []
        for column, out_array in zip(columns, primals):
            out_shape = tuple(column.shape[1:])
            row, start = [], 0
            for array, shape, size in zip(arrays, shapes, sizes):
                part = getitem_static(column, (slice(start, start + size), Ellipsis))
                part = kcore.moveaxis(part, 0, -1)
                row.append(_jacobian_cast(kcore.reshape.bind(part, shape=out_shape + shape), out_array, array,
                                          reverse=False))
                start += size
            blocks.append(row)
        naming = _Naming(wrt_suffix, func, positions, second=name == "hessian", inputs=Inputs((args, kwargs), func))
        result = _label_jacobian(output, slots, blocks, naming, isinstance(argnums, int))
        if has_aux:
            aux = seen["aux"].rebuild([getitem_static(a, (0,)) for a in aux_arrays])
            return result, aux
        return result

    return transformed(jacobian, func, name, (("argnums", argnums, 0), ("has_aux", has_aux, False),
                                              ("randomness", randomness, "error"), ("wrt_suffix", wrt_suffix, "_wrt"),
                                              ("holomorphic", holomorphic, False)),
                       display=func.__wrapped__ if name == "hessian" else func)  # hessian: jacfwd of its jacrev


def hessian(func: Callable[..., Any], argnums: int | tuple[int, ...] = 0, *, wrt_suffix: str = "_wrt",
            holomorphic: bool = False, as_matrix: bool = False) -> Callable[..., Any]:
    """``jacfwd(jacrev(func))``: for a loss of ``p(param)`` dims ``("param", "param_wrt")``.

    Real arguments; ``holomorphic=True`` for the second complex derivative of a
    holomorphic ``func`` of complex arguments.

    ``as_matrix=True`` (a scalar ``func`` and one argument, ``argnums`` an int): one
    DataArray with dims ``("param", "param" + wrt_suffix)``, whatever the argument's
    structure (a Dataset of parameters, a dict of arrays): its rows and columns are the
    elements of :func:`lf.ravel` of the argument, in that order, labeled by
    :func:`labeled_func.ravel.element_labels` (``"k"`` for a 0-d variable ``k``,
    ``"curve[2]"`` for the elements of others).  For a Newton step or a Laplace
    approximation: its inverse at the minimum of a negative log-likelihood is the
    covariance of the parameters.  It carries ``units`` where all elements share them.

    Parameters
    ----------
    func : callable
        Takes pytrees of DataArrays, Datasets, arrays and returns a pytree of them
        (a scalar with ``as_matrix``).
    argnums : int or tuple of int
        The positional argument(s) to differentiate with respect to (an int with
        ``as_matrix``).
    wrt_suffix : str
        Appended (repeatedly) to an argument dim whose name is taken.
    holomorphic : bool
        ``func`` is holomorphic in complex arguments: its second complex derivative.
    as_matrix : bool
        Return one ``(param, param_wrt)`` matrix over the elements of the argument.

    Returns
    -------
    callable
        Takes ``func``'s arguments and returns the Hessian: labeled as a Jacobian of the
        Jacobian, or one DataArray with ``as_matrix``.

    Raises
    ------
    ValueError
        ``as_matrix`` with a tuple ``argnums``; when called: ``argnums`` out of range,
        a non-scalar output with ``as_matrix``, or arguments that mix array libraries.
    TypeError
        When called: a differentiated argument is an integer, boolean, complex (without
        ``holomorphic``) or non-array value (named).
    lf.RandomnessError
        An ``lf.random`` draw inside (draw outside the function and pass the draws in).
    lf.UnsupportedOperationError
        A pint Quantity argument, or a NumPy function inside with no derivative rule
        (an ``lf.custom_vjp`` function's own operations included: forward mode
        differentiates the function, not its reverse-mode rule).

    Examples
    --------
    For the sum of cubes the Hessian is diag(6p); for k² c it is [[2c, 2k], [2k, 0]]:

    >>> import xarray as xr, labeled_func as lf
    >>> p = xr.DataArray([1.0, 2.0], dims="param", coords={"param": ["a", "b"]})
    >>> H = lf.hessian(lambda p: (p ** 3).sum())(p)
    >>> H.dims, H.values.tolist()
    (('param', 'param_wrt'), [[6.0, 0.0], [0.0, 12.0]])
    >>> q = xr.Dataset({"k": 2.0, "c": 3.0})
    >>> H = lf.hessian(lambda q: q.k ** 2 * q.c, as_matrix=True)(q)
    >>> H.param.values.tolist(), H.values.tolist()
    (['k', 'c'], [[6.0, 4.0], [4.0, 0.0]])
    """
    if as_matrix:
        return _hessian_matrix(func, argnums, wrt_suffix, holomorphic)
    inner = _jacrev(func, argnums, False, None, wrt_suffix, "hessian", holomorphic)
    return _jacfwd(inner, argnums, False, "error", wrt_suffix, "hessian", holomorphic)


def _hessian_matrix(func, argnums, suffix, holomorphic):
    """``hessian(func, as_matrix=True)``: the Hessian with respect to ``lf.ravel`` of the
    argument, as a ``(param, param_wrt)`` DataArray."""
    if not isinstance(argnums, int) or isinstance(argnums, bool):
        raise ValueError(f"hessian(as_matrix=True): argnums={argnums!r} must be one int; put the "
                         "parameters in one Dataset or dict to get one matrix of all of them")

    def matrix(*args, **kwargs):
        (position,) = _argnums(argnums, len(args), "hessian")
        _check_backends(func, args, kwargs, "hessian")
        FlatArrays(args[position], _label(func, position), "hessian")  # floating-point arrays only
        flat, unravel = ravel(args[position])
        seen = {}

        def of_vector(vector):
            new_args = list(args)
            new_args[position] = unravel(vector)
            out = func(*new_args, **kwargs)
            if tuple(getattr(out, "shape", ())):
                raise ValueError(
                    f"hessian(as_matrix=True): the function must return a scalar (a loss), but it returned "
                    f"{'dims ' + str(out.dims) if isinstance(out, xr.DataArray) else 'shape ' + str(tuple(out.shape))}; "
                    "reduce it, or call lf.hessian without as_matrix")
            seen["output"] = _described(out, func, args, kwargs)
            return out

        values = hessian(of_vector, 0, holomorphic=holomorphic)(flat)
        labels = np.array(element_labels(args[position]), dtype=str)
        output = seen["output"]
        parameter = _parameter(func, position)
        described = element_attrs(args[position])
        attrs = {}
        if output.described or any(described):  # as for every derivative (units.py)
            attrs["long_name"] = f"second derivative of {output.text} with respect to {parameter}"
            units = {derivative_units(output.units, a.get("units"), b.get("units"))
                     for a in described for b in described}
            if len(units) == 1 and None not in units:
                attrs["units"] = units.pop()
        dims = ("param", "param" + suffix)
        return xr.DataArray(values, dims=dims, coords={dims[0]: labels, dims[1]: labels}, attrs=attrs)

    return transformed(matrix, func, "hessian", (("argnums", argnums, 0), ("wrt_suffix", suffix, "_wrt"),
                                                ("holomorphic", holomorphic, False), ("as_matrix", True, False)))


# --- one reverse pass ---------------------------------------------------------------------
class _Reverse:
    """``func`` run once under a new vjp level with ``args[positions]`` traced."""

    def __init__(self, func, args, kwargs, positions, has_aux, name):
        _check_backends(func, args, kwargs, name)
        self.single = getattr(positions, "single", False)
        self.slots = [FlatArrays(args[i], _label(func, i), name) for i in positions]
        self.parameters = [_parameter(func, i) for i in positions]
        self.labels = _labeled(func, positions, self.slots)
        self.arrays = [a for slot in self.slots for a in slot.arrays]
        guard = _AliasGuard(func, args, kwargs, positions, self.slots, name)
        self.level = level = VJPLevel()
        level.label = name
        with active(level):
            self.nodes = [input_node(a) for a in self.arrays]
            new_args = list(args)
            k = 0
            for i, slot in zip(positions, self.slots):
                count = len(slot.arrays)
                new_args[i] = slot.rebuild([level.input(a, n) for a, n in
                                            zip(slot.arrays, self.nodes[k:k + count])])
                k += count
            output, aux = _split_aux(func(*new_args, **kwargs), has_aux, name)
            guard.check()
            self.output = _strip_coords(output, level)
            self.primal_output = _strip(self.output, level, name, "output")
            self.aux = _strip(aux, level, name)

    def labeled_arrays(self):
        """``(label, primal)`` of every differentiated array, for messages."""
        return self.labels

    def pull(self, seeds, cast=True):
        """Cotangents of the traced arrays (zeros where the output does not depend on them),
        in the arrays' dtypes (``cast=False``: as computed)."""
        grads = backward(seeds, self.nodes) if seeds else [None] * len(self.nodes)
        out = []
        for g, a in zip(grads, self.arrays):
            if g is None:
                g = kc.zeros_like.bind(a)
            elif cast and g.dtype != a.dtype:
                g = ew.astype.bind(g, dtype=a.dtype)
            out.append(g)
        return out

    def mirror(self, grads, attrs, as_tuple=False):
        """The gradient arrays put back in the structure of the differentiated arguments,
        each DataArray and Dataset variable with ``attrs(wrt name, the argument's attrs)``."""
        results, k = [], 0
        for slot, parameter in zip(self.slots, self.parameters):
            count = len(slot.arrays)
            results.append(_relabel(slot.rebuild(grads[k:k + count]), slot, parameter, attrs))
            k += count
        if as_tuple:
            return results
        return results[0] if self.single else tuple(results)


def _relabel(tree, slot, parameter, attrs_of):
    """``tree``, a derivative with the structure of ``slot``'s argument, with the attrs of
    every DataArray and Dataset variable set to ``attrs_of(wrt name, argument's attrs)``.
    A Dataset keeps its own attrs: they describe where the data come from (``title``,
    ``source``, ``history``), not a quantity."""
    paths = optree.tree_flatten_with_path(slot.value, none_is_leaf=True)[0]
    leaves = []
    for path, leaf, original in zip(paths, slot.treedef.flatten_up_to(tree), slot.leaves):
        if isinstance(leaf, (xr.DataArray, xr.Dataset)) and leaf is original:
            leaf = leaf.copy(deep=False)  # else it is new, with new data variables, from slot.rebuild
        if isinstance(leaf, xr.DataArray):
            leaf.attrs = attrs_of(_wrt_name(parameter, path, original), original.attrs)
        elif isinstance(leaf, xr.Dataset):
            for var in leaf.data_vars:
                leaf._variables[var].attrs = attrs_of(str(var), original._variables[var].attrs)
        leaves.append(leaf)
    return optree.tree_unflatten(slot.treedef, leaves)


def _wrt_name(parameter, path, leaf):
    """What a derivative is taken with respect to, in words: the DataArray's name, else
    the parameter's name and the path to the leaf (``params['k']``)."""
    if isinstance(leaf, xr.DataArray) and leaf.name is not None:
        return str(leaf.name)
    return parameter + "".join(f"[{k!r}]" for k in path)


def _described(output, func, args, kwargs):
    """What the derivatives of ``func``'s ``output`` may say of it: its
    :class:`~labeled_func.units.OutputLabel`, only what ``func`` set itself counting
    (names and attrs equal to those of ``args``, ``kwargs`` or what ``func`` reaches
    may be xarray's passing them on; see ``units.py``)."""
    name, attrs = (output.name, output.attrs) if isinstance(output, xr.DataArray) else (None, {})
    return label_output(name, attrs, Inputs((args, kwargs), func), func)


def _labeled(func, positions, slots):
    """``(label, array)`` of every array of the differentiated arguments."""
    return [(_label(func, i), a) for i, slot in zip(positions, slots) for a in slot.arrays]


def _output_labels(output):
    return [("the output" if len(output.arrays) == 1 else f"output array {k}", a)
            for k, a in enumerate(output.arrays)]


def _is_complex(array):
    dtype = getattr(array, "dtype", None)
    return isinstance(array, complex) if dtype is None else dtype_kind(dtype) == "c"


def _check_complex(name, holomorphic, outputs=(), inputs=()):
    """JAX's rules for complex numbers in grad, jacrev and jacfwd: a gradient or a
    Jacobian row needs a real output, a Jacobian column a real argument, unless the
    function is declared holomorphic (then complex arguments and outputs)."""
    if holomorphic:
        for label, array in list(inputs) + list(outputs):
            if not _is_complex(array):
                raise TypeError(
                    f"{name}(holomorphic=True): {label} has dtype {getattr(array, 'dtype', type(array).__name__)}, "
                    "but a holomorphic derivative takes complex arguments to complex outputs; cast it with "
                    ".astype(complex), or leave holomorphic=False for real ones")
        return
    if name != "jacfwd":
        for label, array in outputs:
            if _is_complex(array):
                raise TypeError(
                    f"{name}: {label} is complex ({array.dtype}); {name} differentiates real-valued functions. "
                    f"Pass holomorphic=True for a holomorphic function (its derivative f'(z)), reduce to a "
                    "real value (abs(z) ** 2, z.real), or use lf.vjp with a complex cotangent")
    if name in ("jacfwd", "hessian"):
        for label, array in inputs:
            if _is_complex(array):
                raise TypeError(
                    f"{name}: {label} is complex ({array.dtype}); {name} pushes forward real directions only. "
                    "Pass holomorphic=True for a holomorphic function, use lf.jacrev (a real output) or "
                    "lf.jvp, or differentiate with respect to the real and imaginary parts as real arguments.")


class _AliasGuard:
    """Differentiated arrays whose memory another argument shares, which the transform does
    not trace (``f(x, x)`` differentiated in ``x`` only): the function may write into that
    memory through the other argument (``y *= 2``), behind the transform's back, and the
    derivative would then be computed at the written values (a tape reads its inputs when it
    runs backwards; a tangent misses the write). Such arrays are compared, after the call, with
    what they held before (a copy is made only where memory is shared): InplaceError where
    they were written. Nothing to do in the usual case."""

    def __init__(self, func, args, kwargs, positions, slots, name):
        self.name = name
        self.watched = []
        if len(args) + len(kwargs) < 2:
            return
        others = [(_label(func, i), arg) for i, arg in enumerate(args) if i not in positions]
        others += [(f"argument {key!r}", value) for key, value in kwargs.items()]
        others = [(label, array) for label, value in others for array in _arrays_in(value)]
        if not others:
            return
        for i, slot in zip(positions, slots):
            for array in slot.arrays:
                other = next((label for label, b in others if _shares_memory(array, b)), None)
                if other is not None:
                    self.watched.append((_label(func, i), other, array, _held(array)))

    def check(self):
        for label, other, array, before in self.watched:
            if not _still_holds(array, before):
                raise InplaceError(
                    f"{self.name}: the function writes into the memory of {label} through {other}, "
                    f"which shares it and which {self.name} does not differentiate: the derivative would be "
                    f"computed at the written values. Pass a copy as {other} (x.copy()), or write into a copy "
                    "inside the function.")


def _arrays_in(value):
    """The data arrays of a pytree of arrays and labeled values (to compare memory with)."""
    return Arrays(value, none_is_leaf=False).arrays


def _shares_memory(a, b):
    if type(a) is np.ndarray and type(b) is np.ndarray:
        return bool(np.may_share_memory(a, b))
    return a is b  # a traced array (lf.jit's): shared as the same object


def _held(array):
    """What ``array`` holds now: a copy of a NumPy array; the value a tracer stands for."""
    return array.copy() if type(array) is np.ndarray else held(array)


def _still_holds(array, before):
    if type(array) is np.ndarray:
        return array.tobytes() == before.tobytes()
    now = held(array)
    return now[0] is before[0] and now[1] == before[1]


def _label(func, i):
    """Positional argument ``i`` in messages: ``argument 'x'`` (``argument 0`` unnamed)."""
    names = _parameter_names(func)
    return f"argument {names[i]!r}" if i < len(names) else f"argument {i}"


def _parameter(func, i):
    """The name of positional parameter ``i`` of ``func`` (``argument i`` unnamed)."""
    names = _parameter_names(func)
    return names[i] if i < len(names) else f"argument {i}"


def _parameter_names(func):
    """The names of ``func``'s positional parameters (read once per function: a transform
    names them at every call, and ``inspect.signature`` costs more than a small array op)."""
    try:
        return _PARAMETER_NAMES[func]
    except (KeyError, TypeError):  # TypeError: a callable that takes no weak reference
        pass
    try:
        names = tuple(n for n, p in inspect.signature(func).parameters.items()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    except (TypeError, ValueError):
        names = ()
    try:
        _PARAMETER_NAMES[func] = names
    except TypeError:
        pass
    return names


_PARAMETER_NAMES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Positions(tuple):
    single = False


def _argnums(argnums, count, name):
    if isinstance(argnums, int):
        positions = _Positions((argnums,))
        positions.single = True
    elif isinstance(argnums, tuple) and argnums and all(isinstance(a, int) for a in argnums):
        positions = _Positions(argnums)
    else:
        raise ValueError(f"{name}: argnums={argnums!r} must be an int or a non-empty tuple of ints")
    for position in positions:
        if not -count <= position < count:
            raise ValueError(f"{name}: argnums={argnums!r} is out of range for a call with {count} positional argument(s)")
    normalized = _Positions(p % count for p in positions)
    normalized.single = positions.single
    return normalized


def _check_backends(func, args, kwargs, name):
    labels = [_label(func, i) for i in range(len(args))] + list(kwargs)
    check_one_backend(tuple(args) + tuple(kwargs.values()), labels, transform=name)
    reject_quantities(tuple(args) + tuple(kwargs.values()), labels, transform=name)


def _split_aux(result, has_aux, name):
    if not has_aux:
        reject_quantities([result], ["the output"], transform=name)   # a Quantity output: the policy error
        return result, None
    if not (isinstance(result, tuple) and len(result) == 2):
        raise ValueError(f"{name}(..., has_aux=True): the function must return a pair (output, aux)")
    reject_quantities([result[0]], ["the output"], transform=name)
    return result


def _scalar(out, name):
    if isinstance(out, (xr.DataArray, xr.Variable)):  # a Variable: its data, as a DataArray's
        if out.ndim:
            raise ValueError(
                f"{name}: the function must return a scalar, but it returned a {type(out).__name__} with dims "
                f"{out.dims}; reduce it (e.g. .sum() or .mean()) or use lf.jacrev for the full Jacobian"
            )
        return out.data
    if isinstance(out, xr.Dataset):
        raise ValueError(f"{name}: the function returned a Dataset; return one scalar DataArray (or use lf.jacrev)")
    if hasattr(out, "shape"):
        if len(out.shape):
            raise ValueError(f"{name}: the function must return a scalar, got shape {tuple(out.shape)}; reduce it or use lf.jacrev")
        return out
    if isinstance(out, numbers.Number):
        return out
    if isinstance(out, tuple) and len(out) == 2 and _is_scalar_like(out[0]):
        raise ValueError(
            f"{name}: the function returned a pair whose first entry is a scalar: if the second is "
            f"auxiliary data (a loss and what goes with it), pass has_aux=True, "
            f"lf.{name}(func, has_aux=True), to get (gradient, aux); for the derivatives of both "
            "entries use lf.jacrev"
        )
    raise ValueError(f"{name}: the function must return a scalar, got {type(out).__name__}; use lf.jacrev for structured outputs")


def _is_scalar_like(value):
    """A 0-d DataArray or array, or a Python/NumPy number."""
    if isinstance(value, numbers.Number):
        return True
    return getattr(value, "ndim", None) == 0 and not isinstance(value, xr.Dataset)


def _strip(tree, level, name, label="aux"):
    """``tree`` with every array traced by ``level`` replaced by its primal."""
    if tree is None:
        return None
    arrays = FlatArrays(tree, label, name, allow_any=True)
    return arrays.rebuild([primal_of(a, level) for a in arrays.arrays])


def _strip_coords(tree, level):
    """Coordinates computed from traced values, as their primal values: a derivative
    belongs to the data, and a coordinate must not keep a tracer past its level."""
    def strip(leaf):
        if not isinstance(leaf, (xr.DataArray, xr.Dataset)):
            return leaf
        traced = {name: xr.Variable(c.dims, primal_of(c.data, level), c.attrs)
                  for name, c in coord_variables(leaf).items() if traced_by(c.data, level)}
        return leaf.assign_coords(traced) if traced else leaf

    return optree.tree_map(strip, tree, none_is_leaf=True)


def _eye(size, like):
    reference = next((a for a in like if hasattr(a, "dtype") and dtype_kind(a.dtype) in "fc"), None)
    xp = namespace(*[a for a in like if hasattr(a, "shape")])
    if lazy_namespace(xp):
        # The basis stays in memory: a Dask basis would send the basis vmap down the
        # lazy-vmap path; rows of a NumPy basis pulled through Dask values stay lazy.
        xp = numpy_namespace
    device = device_of(reference) if reference is not None else None
    return xp.eye(size, dtype=reference.dtype if reference is not None else np.float64, device=device)


def _jacobian_cast(block, out_array, in_array, reverse):
    """One Jacobian block in NumPy's promotion of the output's and the argument's dtypes
    (a float32 argument and a float64 output give float64), by either mode; an integer or
    boolean output, which carries no derivative, gives the argument's dtype.  A complex
    output or argument keeps what its mode computes (reverse mode: the argument's dtype)."""
    out_dtype = getattr(out_array, "dtype", np.dtype(np.float64))
    out_kind, in_kind = dtype_kind(out_dtype), dtype_kind(in_array.dtype)
    if out_kind in "biu":
        target = in_array.dtype
    elif out_kind == "f" and in_kind == "f":
        promoted = np.result_type(_numpy_dtype(out_dtype), _numpy_dtype(in_array.dtype))
        target = namespace_dtype(namespace(in_array), promoted)
    elif reverse:
        target = in_array.dtype
    else:
        return block
    return block if block.dtype == target else ew.astype.bind(block, dtype=target)


def _numpy_dtype(dtype):
    return np.dtype(getattr(dtype, "_np_dtype", dtype))


# --- labeled Jacobians ------------------------------------------------------------------------
class _Naming:
    """How the blocks of one Jacobian are labeled: ``suffix`` for clashing argument dims,
    the names no new dim may take (the output's, and those the enclosing vmaps map), the
    names of the differentiated parameters, the function's name, and ``second``: the
    output is itself a first derivative (the outer Jacobian of a Hessian)."""

    def __init__(self, suffix, func, positions, second=False, inputs=None):
        self.suffix = suffix
        self.hidden = mapped_names()
        self.parameters = [_parameter(func, i) for i in positions]
        self.function = func
        self.second = second
        self.inputs = inputs if inputs is not None else Inputs()

    def attrs(self, out_leaf, wrt, wrt_attrs):
        """The attrs of the derivative of ``out_leaf`` (a DataArray, or an unlabeled
        0-d value) with respect to ``wrt``: of a first derivative's (made here) for a
        Hessian, else of an output that only says what the function set (units.py)."""
        labeled = isinstance(out_leaf, xr.DataArray)
        if self.second:
            return second_derivative_attrs(out_leaf.attrs if labeled else {}, wrt, wrt_attrs)
        name, attrs = (out_leaf.name, out_leaf.attrs) if labeled else (None, {})
        return derivative_attrs(label_output(name, attrs, self.inputs, self.function), wrt, wrt_attrs)


def _label_jacobian(output, slots, blocks, naming, single):
    """Nest blocks output-outer, argument-inner, with dims and coords of both."""
    out_leaves = []
    k = 0
    for leaf, count in zip(output.leaves, output.counts):
        per_array = blocks[k:k + count]
        k += count
        if isinstance(leaf, xr.Dataset):
            out_leaves.append({var: _argument_structure(leaf[var], row, slots, naming, single)
                               for var, row in zip(leaf.data_vars, per_array)})
        elif count:
            out_leaves.append(_argument_structure(leaf, per_array[0], slots, naming, single))
        else:
            out_leaves.append(leaf)
    return optree.tree_unflatten(output.treedef, out_leaves)


def _argument_structure(out_leaf, row, slots, naming, single):
    results, k = [], 0
    for slot, parameter in zip(slots, naming.parameters):
        leaves, j = [], 0
        paths = optree.tree_flatten_with_path(slot.value, none_is_leaf=True)[0]
        for path, leaf, count in zip(paths, slot.leaves, slot.counts):
            parts = row[k + j:k + j + count]
            j += count
            if not count:
                leaves.append(leaf)
            elif isinstance(leaf, xr.Dataset):
                blocks = {var: _block(out_leaf, leaf[var], part, naming, str(var))
                          for var, part in zip(leaf.data_vars, parts)}
                merged = merged_arrays(blocks)
                leaves.append(merged if merged is not None else xr.Dataset(blocks))
            else:
                leaves.append(_block(out_leaf, leaf, parts[0], naming, _wrt_name(parameter, path, leaf)))
        k += j
        results.append(optree.tree_unflatten(slot.treedef, leaves))
    return results[0] if single else tuple(results)


def _dimensionless(leaf):
    """A Python or NumPy number, or a 0-d array: an argument that has no dims to label."""
    return isinstance(leaf, numbers.Number) or (hasattr(leaf, "shape") and len(leaf.shape) == 0)


def _block(out_leaf, in_leaf, block, naming, wrt):
    """One Jacobian block as a DataArray when the argument or the output is labeled.

    An argument with no dims (a Python number, a 0-d array) contributes no dims, so
    the block is labeled by the output alone, as for a 0-d DataArray argument.  An
    argument dim gets ``naming.suffix`` until its name is free: not a dim or coordinate
    of the output, nor one that an enclosing vmap maps (the vmap puts it back).
    """
    if not isinstance(in_leaf, xr.DataArray):
        if not (isinstance(out_leaf, xr.DataArray) and _dimensionless(in_leaf)):
            return block
        in_leaf = xr.DataArray(0.0)
    if isinstance(out_leaf, xr.DataArray):
        out_dims, out_coords = tuple(out_leaf.dims), coord_variables(out_leaf)
    elif getattr(out_leaf, "ndim", 0) == 0:
        out_dims, out_coords = (), {}
    else:
        return block
    in_coords = coord_variables(in_leaf)
    taken = set(out_dims) | set(out_coords) | naming.hidden
    # a scalar coordinate the output carries with the same value (run=5 passed through) is
    # one label, not two: it is not repeated with the suffix
    shared = {name for name, c in in_coords.items()
              if c.ndim == 0 and name in out_coords and out_coords[name].ndim == 0 and c.equals(out_coords[name])}
    # a scalar coordinate that an enclosing vmap gives each example (one along its dim) is
    # the vmap's to put back, as the loop's concatenation would: not repeated with the suffix
    shared |= {name for name, c in in_coords.items() if c.ndim == 0 and name in naming.hidden}
    renamed = {}
    for dim in list(in_leaf.dims) + [c for c in in_coords if c not in in_leaf.dims and c not in shared]:
        new = dim
        while new in taken:
            new += naming.suffix
        taken.add(new)
        renamed[dim] = new
    in_dims = tuple(renamed[d] for d in in_leaf.dims)
    attrs = naming.attrs(out_leaf, wrt, in_leaf.attrs)
    labeled = joined_labels(block, out_dims + in_dims, attrs, out_leaf if isinstance(out_leaf, xr.DataArray) else None,
                            in_leaf, renamed, shared)
    if labeled is not None:
        return labeled
    coords = dict(out_coords)
    for name, c in in_coords.items():
        if name not in shared:
            coords[renamed[name]] = xr.Variable(tuple(renamed[d] for d in c.dims), c.data, c.attrs)
    return xr.DataArray(block, dims=out_dims + in_dims, coords=coords, attrs=attrs)
