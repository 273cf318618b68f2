"""The ``.func`` accessor on DataArray, Dataset and DataTree.

``obj.func.<transform>(func, ..., args=(), **kwargs)`` applies the transform with
``obj`` as the first argument of ``func`` and ``args`` after it.  For the
differentiating transforms ``obj`` is the argument differentiated (``argnums=0``);
``args`` are held fixed.

Keyword arguments are split as xarray's ``.pipe`` and ``.map`` would have them: the names
of the transform's options (``chunk_size``, ``has_aux``...) go to the transform, every
other name to ``func`` (held fixed: neither mapped nor differentiated), as does the dict
``kwargs=``.  A name that is both an option and a parameter of ``func`` is a ``TypeError``
(pass it to ``func`` with ``kwargs={...}``).
"""
from __future__ import annotations

import functools
import inspect
import weakref

import xarray as xr

from . import sensitivity
from .autodiff import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, linearize, vjp
from .jit import jit
from .vmap import vmap

__all__ = ["FuncAccessor"]


class FuncAccessor:
    """torch.func's transforms applied to this object: ``obj.func.grad(loss)``.

    Registered as ``.func`` on ``xr.DataArray``, ``xr.Dataset`` and ``xr.DataTree``.
    Each method equals the functional transform of :mod:`labeled_func` called with
    the object first: ``obj.func.vmap(f, "sample", args=(w,))`` is
    ``lf.vmap(f, "sample")(obj, w)``.  A DataTree can be mapped over but not
    differentiated (differentiate with respect to its datasets).
    """

    def __init__(self, obj):
        self._obj = obj

    def vmap(self, func, dim=None, *, args=(), kwargs=None, **named):
        """``lf.vmap(func, dim, **options)(obj, *args, **func_kwargs)``: ``func`` of one
        example, mapped over ``dim`` of this object (and of every entry of ``args`` that
        has it).

        Parameters
        ----------
        func : callable
            ``func(obj, *args, **func_kwargs)`` for one example: inside, ``dim`` is gone.
        dim : str or tuple of str, optional
            The dim(s) to map over; may be left out when ``in_dims`` is given.
        args : tuple
            More arguments; those with ``dim`` are mapped too, the rest shared.
        kwargs : dict, optional
            Keyword arguments of ``func``, held fixed (not mapped).
        **named
            The options of :func:`lf.vmap` (``in_dims``, ``out_dims``, ``randomness``,
            ``chunk_size``, ``axis_size``, ``allow_rechunk``); any other name is a keyword
            argument of ``func``.

        Raises
        ------
        TypeError
            A name is both an option of ``lf.vmap`` and a parameter of ``func``.

        Examples
        --------
        >>> import numpy as np, xarray as xr, labeled_func as lf
        >>> x = xr.DataArray(np.arange(6.0).reshape(3, 2), dims=("sample", "t"))
        >>> w = xr.DataArray([1.0, -1.0], dims="t")
        >>> x.func.vmap(lambda x, w: (x * w).sum("t"), "sample", args=(w,)).values.tolist()
        [-1.0, -1.0, -1.0]
        >>> x.func.vmap(lambda x, scale: scale * x.sum("t"), "sample", scale=10.0, chunk_size=2).values.tolist()
        [10.0, 50.0, 90.0]
        """
        options, func = _split("vmap", vmap, func, named, kwargs)
        return vmap(func, dim, **options)(self._obj, *args)

    def grad(self, func, *, args=(), kwargs=None, **named):
        """``lf.grad(func, argnums=0, **options)(obj, *args)``: the gradient of a
        scalar-valued ``func`` with respect to this object.

        Parameters
        ----------
        func : callable
            ``func(obj, *args)`` returning a scalar (a 0-d DataArray, array or float).
        args : tuple
            More arguments, held fixed.
        kwargs : dict, optional
            Keyword arguments of ``func``, held fixed.
        **named
            ``has_aux``, ``holomorphic`` of :func:`lf.grad`; other names are keyword
            arguments of ``func``.

        Returns
        -------
        DataArray or Dataset
            Shaped like this object (same dims, coords, variables); with
            ``has_aux=True`` the pair ``(gradient, aux)``.

        Examples
        --------
        >>> import xarray as xr, labeled_func as lf
        >>> p = xr.DataArray([1.0, 2.0], dims="param", coords={"param": ["a", "b"]})
        >>> data = xr.DataArray([0.5, 0.5], dims="param")
        >>> g = p.func.grad(lambda p, data: ((p - data) ** 2).sum(), args=(data,))
        >>> g.dims, g.values.tolist()
        (('param',), [1.0, 3.0])
        >>> ds = xr.Dataset({"a": ("i", [1.0, 2.0]), "b": ((), 3.0)})
        >>> ds.func.grad(lambda ds: (ds.a * ds.b).sum())["b"].item()
        3.0
        """
        options, func = _split("grad", grad, func, named, kwargs)
        return grad(func, 0, **options)(self._obj, *args)

    def grad_and_value(self, func, *, args=(), kwargs=None, **named):
        """``lf.grad_and_value(func, argnums=0, **options)(obj, *args)``:
        ``(gradient, value)``, or ``(gradient, (value, aux))`` with ``has_aux=True``.

        Examples
        --------
        >>> import xarray as xr, labeled_func as lf
        >>> x = xr.DataArray([1.0, 2.0], dims="i")
        >>> g, value = x.func.grad_and_value(lambda x: (x ** 3).sum())
        >>> g.values.tolist(), float(value)
        ([3.0, 12.0], 9.0)
        """
        options, func = _split("grad_and_value", grad_and_value, func, named, kwargs)
        return grad_and_value(func, 0, **options)(self._obj, *args)

    def vjp(self, func, *, args=(), kwargs=None, **named):
        """``lf.vjp(func, obj)`` with ``args`` held fixed: ``(output, vjp_fn)``, where
        ``vjp_fn(cotangent)`` returns a 1-tuple, the cotangent of this object.

        Parameters
        ----------
        func : callable
            ``func(obj, *args)``.
        args : tuple
            More arguments, constants for the VJP (no cotangent is returned for them).
        **named
            ``has_aux`` of :func:`lf.vjp` (then ``(output, vjp_fn, aux)``); other names
            (and ``kwargs=``) are keyword arguments of ``func``, held fixed.

        Examples
        --------
        >>> import xarray as xr, labeled_func as lf
        >>> x = xr.DataArray([1.0, 2.0], dims="i")
        >>> out, vjp_fn = x.func.vjp(lambda x, k: k * x ** 2, args=(3.0,))
        >>> out.values.tolist(), vjp_fn(xr.ones_like(out))[0].values.tolist()
        ([3.0, 12.0], [6.0, 12.0])
        """
        options, func = _split("vjp", vjp, func, named, kwargs)
        return vjp(_with_fixed(func, args), self._obj, **options)

    def jvp(self, func, tangent, *, args=(), kwargs=None, **named):
        """``lf.jvp(func, (obj,), (tangent,))`` with ``args`` held fixed:
        ``(output, tangent_out)``, the derivative of ``func`` along ``tangent``.

        Parameters
        ----------
        func : callable
            ``func(obj, *args)``.
        tangent : like this object
            The direction (same dims, or variables for a Dataset).
        args : tuple
            More arguments, constants for the JVP (tangent zero).
        **named
            ``has_aux`` of :func:`lf.jvp` (then ``(output, tangent_out, aux)``); other
            names (and ``kwargs=``) are keyword arguments of ``func``, held fixed.

        Examples
        --------
        >>> import xarray as xr, labeled_func as lf
        >>> x = xr.DataArray([1.0, 2.0], dims="i")
        >>> out, t = x.func.jvp(lambda x, k: k * x ** 2, xr.ones_like(x), args=(3.0,))
        >>> out.values.tolist(), t.values.tolist()
        ([3.0, 12.0], [6.0, 12.0])
        """
        options, func = _split("jvp", jvp, func, named, kwargs)
        return jvp(_with_fixed(func, args), (self._obj,), (tangent,), **options)

    def jacrev(self, func, *, args=(), kwargs=None, **named):
        """``lf.jacrev(func, argnums=0, **options)(obj, *args)``: the Jacobian by
        reverse mode, dims of the output followed by this object's.

        Options of :func:`lf.jacrev` by name (``has_aux``, ``chunk_size``, ``wrt_suffix``...);
        other names (and ``kwargs=``) are keyword arguments of ``func``, held fixed.

        Examples
        --------
        >>> import xarray as xr, labeled_func as lf
        >>> x = xr.DataArray([1.0, 2.0], dims="i")
        >>> J = x.func.jacrev(lambda x: x ** 2)
        >>> J.dims, J.values.tolist()
        (('i', 'i_wrt'), [[2.0, 0.0], [0.0, 4.0]])
        """
        options, func = _split("jacrev", jacrev, func, named, kwargs)
        return jacrev(func, 0, **options)(self._obj, *args)

    def jacfwd(self, func, *, args=(), kwargs=None, **named):
        """``lf.jacfwd(func, argnums=0, **options)(obj, *args)``: the Jacobian by
        forward mode, dims of the output followed by this object's.

        Options of :func:`lf.jacfwd` by name (``has_aux``, ``randomness``, ``wrt_suffix``...);
        other names (and ``kwargs=``) are keyword arguments of ``func``, held fixed.

        Examples
        --------
        >>> import xarray as xr, labeled_func as lf
        >>> x = xr.DataArray([1.0, 2.0], dims="i")
        >>> y = xr.DataArray([10.0, 20.0, 30.0], dims="j")
        >>> J = x.func.jacfwd(lambda x, y: x.sum() * y, args=(y,))
        >>> J.dims, J.values.tolist()
        (('j', 'i'), [[10.0, 10.0], [20.0, 20.0], [30.0, 30.0]])
        """
        options, func = _split("jacfwd", jacfwd, func, named, kwargs)
        return jacfwd(func, 0, **options)(self._obj, *args)

    def hessian(self, func, *, args=(), kwargs=None, **named):
        """``lf.hessian(func, argnums=0, **options)(obj, *args)``: second derivatives of
        a scalar ``func``; for a DataArray with dim ``p`` the dims are ``(p, p_wrt)``.

        Options of :func:`lf.hessian` by name (``wrt_suffix``...); other names (and
        ``kwargs=``) are keyword arguments of ``func``, held fixed.

        Examples
        --------
        >>> import xarray as xr, labeled_func as lf
        >>> p = xr.DataArray([1.0, 2.0], dims="param", coords={"param": ["a", "b"]})
        >>> H = p.func.hessian(lambda p: (p ** 3).sum())
        >>> H.dims, H.values.tolist()
        (('param', 'param_wrt'), [[6.0, 0.0], [0.0, 12.0]])
        """
        options, func = _split("hessian", hessian, func, named, kwargs)
        return hessian(func, 0, **options)(self._obj, *args)


    def linearize(self, func, *, args=(), kwargs=None, **named):
        """``lf.linearize(func, obj)`` with ``args`` held fixed: ``(output, jvp_fn)``,
        where ``jvp_fn(tangent)`` is the derivative along ``tangent`` (a tangent of this
        object), computed without running ``func`` again.

        Examples
        --------
        >>> import xarray as xr, labeled_func as lf
        >>> x = xr.DataArray([1.0, 2.0], dims="i")
        >>> out, jvp_fn = x.func.linearize(lambda x, k: k * x ** 2, args=(3.0,))
        >>> jvp_fn(xr.ones_like(x)).values.tolist()
        [6.0, 12.0]
        """
        options, func = _split("linearize", linearize, func, named, kwargs)
        return linearize(_with_fixed(func, args), self._obj, **options)

    def jit(self, func, *, args=(), static_argnames=(), kwargs=None, **func_kwargs):
        """``lf.jit(func, static_argnames=...)(obj, *args, **func_kwargs)``, the compiled
        function kept per ``func``: calling ``obj.func.jit(f)`` again with the same ``f``
        (not a new lambda each time) replays the recorded program.

        Examples
        --------
        >>> import numpy as np, xarray as xr, labeled_func as lf
        >>> x = xr.DataArray(np.arange(6.0).reshape(3, 2), dims=("sample", "t"))
        >>> per_sample = lf.vmap(lf.grad(lambda v: (v ** 2).sum()), dim="sample")
        >>> x.func.jit(per_sample).values.tolist()
        [[0.0, 2.0], [4.0, 6.0], [8.0, 10.0]]
        """
        if kwargs:
            func_kwargs = {**_no_overlap(func_kwargs, kwargs, "jit"), **kwargs}
        return _jitted(func, tuple(static_argnames))(self._obj, *args, **func_kwargs)

    def dgsm(self, model, **options):
        """``lf.sensitivity.dgsm(model, obj, **options)``: derivative-based global
        sensitivity measures of ``model`` over the samples in this Dataset (one variable
        per parameter, along ``dim``, "sample" by default).

        Examples
        --------
        >>> import numpy as np, xarray as xr, labeled_func as lf
        >>> rng = np.random.default_rng(0)
        >>> samples = xr.Dataset({"a": ("sample", rng.uniform(0, 1, 1000)),
        ...                       "b": ("sample", rng.uniform(0, 1, 1000))})
        >>> samples.func.dgsm(lambda p: 3 * p.a + p.b).vi.values.round(6).tolist()
        [9.0, 1.0]
        """
        return sensitivity.dgsm(model, self._obj, **options)

    def local(self, model, **options):
        """``lf.sensitivity.local(model, obj, **options)``: local sensitivities (by default
        elasticities ∂y/∂p · p/y) of ``model`` at the parameters in this Dataset.

        Examples
        --------
        >>> import xarray as xr, labeled_func as lf
        >>> params = xr.Dataset({"k": 2.0, "c": 1.0})
        >>> e = params.func.local(lambda p: p.k * 3.0 + p.c)
        >>> round(float(e.k), 6), round(float(e.c), 6)
        (0.857143, 0.142857)
        """
        return sensitivity.local(model, self._obj, **options)


def _options(transform):
    """The names a transform takes as options (its keyword-only parameters)."""
    return {name for name, p in inspect.signature(transform).parameters.items() if p.kind is p.KEYWORD_ONLY}


def _split(name, transform, func, named, kwargs):
    """``named`` split into the transform's options and ``func``'s keyword arguments
    (with ``kwargs``), and ``func`` with the latter bound."""
    if "argnums" in named and name != "vmap":
        raise TypeError(
            f".func.{name} always differentiates the object it is called on (argnums=0) and holds "
            f"args= fixed, so it takes no argnums={named['argnums']!r}; to differentiate with "
            f"respect to other arguments use lf.{name}(func, argnums=...)(obj, *args)"
        )
    known = _options(transform)
    options = {k: v for k, v in named.items() if k in known}
    for_func = {k: v for k, v in named.items() if k not in known}
    clash = [k for k in options if _takes(func, k)]
    if clash:
        raise TypeError(
            f".func.{name}: {', '.join(map(repr, clash))} is both an option of lf.{name} and a parameter "
            f"of {getattr(func, '__name__', 'the function')}; the accessor gives it to lf.{name}. Pass it "
            f"to the function with kwargs={{{clash[0]!r}: ...}}, or call lf.{name}(...) yourself."
        )
    if kwargs:
        for_func = {**_no_overlap(for_func, kwargs, name), **kwargs}
    if for_func:
        func = functools.partial(func, **for_func)
    return options, func


def _no_overlap(named, kwargs, name):
    both = sorted(set(named) & set(kwargs))
    if both:
        raise TypeError(f".func.{name}: {', '.join(map(repr, both))} given both by name and in kwargs=")
    return named


def _takes(func, name):
    """Whether ``func`` has a parameter called ``name`` (not through ``**kwargs``)."""
    try:
        parameter = inspect.signature(func).parameters.get(name)
    except (TypeError, ValueError):
        return False
    return parameter is not None and parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)


_JITTED = weakref.WeakKeyDictionary()  # func -> {static_argnames: its lf.jit}, so that calls replay


def _jitted(func, static_argnames):
    try:
        per_func = _JITTED.setdefault(func, {})
    except TypeError:  # not weak-referenceable: compiled anew
        return jit(func, static_argnames=static_argnames)
    compiled = per_func.get(static_argnames)
    if compiled is None:
        compiled = per_func.setdefault(static_argnames, jit(func, static_argnames=static_argnames))
    return compiled


def _with_fixed(func, args):
    """``func`` of the object alone, ``args`` closed over (constants for jvp/vjp)."""
    if not args:
        return func

    @functools.wraps(func)
    def of_object(obj):
        return func(obj, *args)

    return of_object


xr.register_dataarray_accessor("func")(FuncAccessor)
xr.register_dataset_accessor("func")(FuncAccessor)
xr.register_datatree_accessor("func")(FuncAccessor)
