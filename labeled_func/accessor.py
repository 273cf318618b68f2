"""The ``.func`` accessor on DataArray, Dataset and DataTree.

``obj.func.<transform>(func, ..., args=(), **options)`` applies the transform with
``obj`` as the first argument of ``func`` and ``args`` after it.  For the
differentiating transforms ``obj`` is the argument differentiated (``argnums=0``);
``args`` are held fixed.
"""
from __future__ import annotations

import functools

import xarray as xr

from .autodiff import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp
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

    def vmap(self, func, dim, *, args=(), **options):
        """``lf.vmap(func, dim, **options)(obj, *args)``: ``func`` of one example,
        mapped over ``dim`` of this object (and of every entry of ``args`` that has it).

        Parameters
        ----------
        func : callable
            ``func(obj, *args)`` for one example: inside, ``dim`` is gone.
        dim : str or tuple of str
            The dim(s) to map over.
        args : tuple
            More arguments; those with ``dim`` are mapped too, the rest shared.
        **options
            ``out_dims``, ``randomness``, ``chunk_size``, ``axis_size`` of :func:`lf.vmap`.

        Examples
        --------
        >>> import numpy as np, xarray as xr, labeled_func as lf
        >>> x = xr.DataArray(np.arange(6.0).reshape(3, 2), dims=("sample", "t"))
        >>> w = xr.DataArray([1.0, -1.0], dims="t")
        >>> x.func.vmap(lambda x, w: (x * w).sum("t"), "sample", args=(w,)).values.tolist()
        [-1.0, -1.0, -1.0]
        """
        return vmap(func, dim, **options)(self._obj, *args)

    def grad(self, func, *, args=(), **options):
        """``lf.grad(func, argnums=0, **options)(obj, *args)``: the gradient of a
        scalar-valued ``func`` with respect to this object.

        Parameters
        ----------
        func : callable
            ``func(obj, *args)`` returning a scalar (a 0-d DataArray, array or float).
        args : tuple
            More arguments, held fixed.
        **options
            ``has_aux`` of :func:`lf.grad`.

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
        _no_argnums("grad", options)
        return grad(func, 0, **options)(self._obj, *args)

    def grad_and_value(self, func, *, args=(), **options):
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
        _no_argnums("grad_and_value", options)
        return grad_and_value(func, 0, **options)(self._obj, *args)

    def vjp(self, func, *, args=(), **options):
        """``lf.vjp(func, obj)`` with ``args`` held fixed: ``(output, vjp_fn)``, where
        ``vjp_fn(cotangent)`` returns a 1-tuple, the cotangent of this object.

        Parameters
        ----------
        func : callable
            ``func(obj, *args)``.
        args : tuple
            More arguments, constants for the VJP (no cotangent is returned for them).
        **options
            ``has_aux`` of :func:`lf.vjp` (then ``(output, vjp_fn, aux)``).

        Examples
        --------
        >>> import xarray as xr, labeled_func as lf
        >>> x = xr.DataArray([1.0, 2.0], dims="i")
        >>> out, vjp_fn = x.func.vjp(lambda x, k: k * x ** 2, args=(3.0,))
        >>> out.values.tolist(), vjp_fn(xr.ones_like(out))[0].values.tolist()
        ([3.0, 12.0], [6.0, 12.0])
        """
        return vjp(_with_fixed(func, args), self._obj, **options)

    def jvp(self, func, tangent, *, args=(), **options):
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
        **options
            ``has_aux`` of :func:`lf.jvp` (then ``(output, tangent_out, aux)``).

        Examples
        --------
        >>> import xarray as xr, labeled_func as lf
        >>> x = xr.DataArray([1.0, 2.0], dims="i")
        >>> out, t = x.func.jvp(lambda x, k: k * x ** 2, xr.ones_like(x), args=(3.0,))
        >>> out.values.tolist(), t.values.tolist()
        ([3.0, 12.0], [6.0, 12.0])
        """
        return jvp(_with_fixed(func, args), (self._obj,), (tangent,), **options)

    def jacrev(self, func, *, args=(), **options):
        """``lf.jacrev(func, argnums=0, **options)(obj, *args)``: the Jacobian by
        reverse mode, dims of the output followed by this object's.

        ``options``: ``has_aux``, ``chunk_size``, ``wrt_suffix`` of :func:`lf.jacrev`.

        Examples
        --------
        >>> import xarray as xr, labeled_func as lf
        >>> x = xr.DataArray([1.0, 2.0], dims="i")
        >>> J = x.func.jacrev(lambda x: x ** 2)
        >>> J.dims, J.values.tolist()
        (('i', 'i_wrt'), [[2.0, 0.0], [0.0, 4.0]])
        """
        _no_argnums("jacrev", options)
        return jacrev(func, 0, **options)(self._obj, *args)

    def jacfwd(self, func, *, args=(), **options):
        """``lf.jacfwd(func, argnums=0, **options)(obj, *args)``: the Jacobian by
        forward mode, dims of the output followed by this object's.

        ``options``: ``has_aux``, ``randomness``, ``wrt_suffix`` of :func:`lf.jacfwd`.

        Examples
        --------
        >>> import xarray as xr, labeled_func as lf
        >>> x = xr.DataArray([1.0, 2.0], dims="i")
        >>> y = xr.DataArray([10.0, 20.0, 30.0], dims="j")
        >>> J = x.func.jacfwd(lambda x, y: x.sum() * y, args=(y,))
        >>> J.dims, J.values.tolist()
        (('j', 'i'), [[10.0, 10.0], [20.0, 20.0], [30.0, 30.0]])
        """
        _no_argnums("jacfwd", options)
        return jacfwd(func, 0, **options)(self._obj, *args)

    def hessian(self, func, *, args=(), **options):
        """``lf.hessian(func, argnums=0, **options)(obj, *args)``: second derivatives of
        a scalar ``func``; for a DataArray with dim ``p`` the dims are ``(p, p_wrt)``.

        ``options``: ``wrt_suffix`` of :func:`lf.hessian`.

        Examples
        --------
        >>> import xarray as xr, labeled_func as lf
        >>> p = xr.DataArray([1.0, 2.0], dims="param", coords={"param": ["a", "b"]})
        >>> H = p.func.hessian(lambda p: (p ** 3).sum())
        >>> H.dims, H.values.tolist()
        (('param', 'param_wrt'), [[6.0, 0.0], [0.0, 12.0]])
        """
        _no_argnums("hessian", options)
        return hessian(func, 0, **options)(self._obj, *args)


def _no_argnums(name, options):
    """The accessor differentiates the object itself: ``argnums`` is not an option."""
    if "argnums" in options:
        raise TypeError(
            f".func.{name} always differentiates the object it is called on (argnums=0) and holds "
            f"args= fixed, so it takes no argnums={options['argnums']!r}; to differentiate with "
            f"respect to other arguments use lf.{name}(func, argnums=...)(obj, *args)"
        )


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
