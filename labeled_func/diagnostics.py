"""What the policy errors know about xarray (and pandas): registered into the engine.

The engine (``engine/diagnose.py``) tells why a traced value was converted and walks the
stack to the user's call; it knows generic Python and NumPy.  This module gives it the
xarray side, at import:

- the code objects of xarray's ``AbstractArray.__bool__``/``__float__``/... and of the
  pandas-backed index lookups, so that ``if da > 0:`` (which reaches the tracer as one
  ``np.asarray``) is told from ``np.asarray(da)``; a second self-test drives a DataArray
  wrapping the engine's probe through them (``if da:``, ``float(da)``, ``buf[0] = da``,
  ``x.isel(t=p)``...), reporting through the engine's mechanism;
- how to read xarray's frames (public names, ``drop=``/``vectorize=``, ``x.loc[...]``);
- what to write instead of the xarray methods that need concrete values or whose output
  shape depends on the values, and of finite-difference helpers (scipy.optimize.approx_fprime,
  scipy.differentiate) inside a transform.
"""
from __future__ import annotations

import importlib

import numpy as np
import xarray as xr

from .engine import diagnose
from .engine.errors import UnsupportedOperationError

__all__ = []

# --- what the user can do instead ------------------------------------------------------------
_INTERP = (
    "For linear interpolation at fixed new coordinates, pick the two neighbours with "
    "x.isel at positions computed from the coordinate (np.searchsorted) and weight "
    "them (see 'Interpolation' in docs/limitations.md), or interpolate outside the transform."
)
_INTERP_MAPPED = (
    "An interpolation point that differs per example needs weights computed with traced "
    "operations: on a uniform grid of spacing h, w = np.maximum(1 - abs(q - x[dim]) / h, 0) "
    "(hat functions), then (x * w).sum(dim)."
)
_LABELS = (
    "Label lookup goes through pandas, which needs concrete labels (method='nearest' on a "
    "numeric increasing index works with a traced label). Select with a mask instead, e.g. "
    "x.where(x[dim] == label, 0).sum(dim), or use positions (x.isel(dim=i) with a traced i)."
)
_OPT_EINSUM = (
    "xarray computes dot products with opt_einsum when it is installed, and opt_einsum hands "
    "every operand to the library of the first one (Dask here), which cannot hold a traced "
    "value. Put a traced argument first (xr.dot(p, d) rather than xr.dot(d, p)), or turn "
    "opt_einsum off around the call: `with xr.set_options(use_opt_einsum=False): ...`."
)
_XARRAY_ADVICE = {
    "interp": _INTERP,
    "interp_like": _INTERP,
    "interpolate_na": (
        "interpolate_na fills each gap through numpy.vectorize (apply_ufunc(vectorize=True)), which "
        "works under vmap (once per example); under grad/jvp method='linear' (np.interp) works, the "
        "other methods go through scipy.interpolate, which needs concrete values. Use "
        "method='linear', or fill NaNs with traced operations: x.fillna(value) or "
        "xr.where(x.isnull(), other, x)."
    ),
    "sortby": (
        "sortby orders the coordinate labels by the values. Sort the values alone: "
        "np.sort on .data (xr.apply_ufunc(np.sort, x, input_core_dims=[[dim]], "
        "output_core_dims=[[dim]]) after dropping the index coordinate), or "
        "np.argsort with np.take_along_axis."
    ),
    "sel": _LABELS,
    "loc": _LABELS,
    "reindex": _LABELS,
    "idxmax": "idxmax picks a coordinate label per example: use argmax (positions) instead.",
    "idxmin": "idxmin picks a coordinate label per example: use argmin (positions) instead.",
    "weighted": (
        "xarray checks traced weights for NaN with bool(); labeled_func.xarray_methods makes "
        "that check per example (and as a guard under lf.jit), but its hooks are not installed "
        "with this xarray (see labeled_func.xarray_methods.STATUS). Compute "
        "(x * w).sum(dim) / w.sum(dim) instead, or pass weights that are not traced."
    ),
    "polyfit": (
        "polyfit tests the mapped values for NaN inside xarray (skipna): pass skipna=False, "
        "or call np.polyfit on .data."
    ),
}
# when xarray tests a mapped value with bool() (a DataDependentControlFlowError)
_XARRAY_CONTROL_FLOW = {"interp": _INTERP_MAPPED, "interp_like": _INTERP_MAPPED}
_VECTORIZE = (
    "vectorize=True runs func through numpy.vectorize, once per element (or core block) and "
    "example; under grad/jvp func gets traced values, and here it needs concrete ones. Write "
    "func with NumPy functions on its arguments, or drop vectorize=True and write func for whole "
    "arrays (core dims last), or vectorise it with lf.vmap."
)
# xarray methods whose output shape depends on the values: (culprit, why, fix)
_ELEMENTS = "each example would keep a different number of elements"
_XARRAY_DYNAMIC = {
    "dropna": (
        "dropna", "which labels are dropped depends on the values, so " + _ELEMENTS,
        "Keep the shape: leave the NaNs in (reductions skip them, skipna=True), or fill "
        "them with fillna / xr.where. Mask instead of dropping: x.where(mask)."
    ),
    "groupby": (
        "groupby", "the groups are found from the values of a mapped array, so each "
        "example would have its own groups (and group sizes)",
        "Reduce per known group with a mask: x.where(labels == g).sum(dim) for each group "
        "value g, or group by a coordinate that does not depend on the mapped input."
    ),
    "groupby_bins": (
        "groupby_bins", "the bins are filled from the values of a mapped array, so each "
        "example would have its own group sizes",
        "Reduce per bin with a mask: x.where((x >= lo) & (x < hi)).sum(dim) for each bin."
    ),
    "sel": (
        "sel with a boolean mask", _ELEMENTS,
        "Keep the shape with masking: x.where(mask) (NaN elsewhere) or xr.where(mask, x, 0)."
    ),
    "isel": (
        "isel with a boolean mask", _ELEMENTS,
        "Keep the shape with masking: x.where(mask) (NaN elsewhere) or xr.where(mask, x, 0)."
    ),
    "__getitem__": (
        "boolean-mask indexing x[mask]", _ELEMENTS,
        "Keep the shape with masking: x.where(mask) (NaN elsewhere) or xr.where(mask, x, 0)."
    ),
    "__setitem__": (
        "boolean-mask assignment x[mask] = value",
        "xarray turns the mask into the positions to write (np.nonzero), a different "
        "number of them per example",
        "Write it as a select: x = x.where(~mask, value) (or xr.where(mask, value, x)), or "
        "assign on the arrays, x.data[mask.data] = value, which is traced as a select."
    ),
}
_INDEXING = frozenset({"sel", "isel", "__getitem__", "__setitem__"})
_WHERE_DROP = (
    "where(..., drop=True)",
    "drop=True removes the labels where the condition is false everywhere, which "
    "differ per example",
    "Use x.where(cond) without drop=True (NaN where false), or xr.where(cond, x, 0).",
)


# finite-difference helpers: the transforms compute what they approximate, exactly
_FINITE_DIFFERENCES = {
    "scipy.optimize": ("approx_fprime", "check_grad", "approx_derivative"),
    "scipy.differentiate": ("derivative", "jacobian", "hessian"),
}


def _finite_difference_advice(site, kind):
    """What replaces a finite-difference helper (``scipy.optimize.approx_fprime``) inside a
    transform; None for another call of the library."""
    package = ".".join(site.module.split(".")[:2])
    if site.method not in _FINITE_DIFFERENCES.get(package, ()):
        return None
    return (
        f"{site.public} estimates derivatives by finite differences, calling the function on "
        "concrete perturbed copies of the values. Inside a transform compute them exactly with "
        "labeled_func instead: lf.jacfwd(f)(x) for few parameters (one forward pass each), "
        "lf.grad(f)(x) for a scalar output (lf.jacrev for a few outputs), lf.hessian(f)(x) for second "
        f"derivatives; or call {site.public} outside the transform."
    )


def _describe(site):
    """The calls of xarray that their public name does not describe."""
    if site.method == "apply_ufunc" and site.options.get("vectorize"):
        return "xarray.apply_ufunc(..., vectorize=True)"
    if site.method == "where" and site.options.get("drop"):
        return f"{site.public}(..., drop=True)"
    return None


def _advice(site, kind):
    """What to do instead of an xarray call that needed a concrete value (None: the default)."""
    if kind == "control_flow" and site.method in _XARRAY_CONTROL_FLOW:
        return _XARRAY_CONTROL_FLOW[site.method]
    if site.method == "apply_ufunc" and site.options.get("vectorize"):
        return _VECTORIZE
    if any(name.startswith("opt_einsum.") for name in site.through):
        return _OPT_EINSUM
    advice = _XARRAY_ADVICE.get(site.options.get("accessor") or site.method)
    if advice is not None:
        return advice
    if any(name.startswith("numpy.vectorize") for name in site.through):
        return _VECTORIZE
    return None


def _dynamic_shape(site, culprit):
    """``(name, why, fix)`` for an xarray call whose output shape depends on the values."""
    if site.method == "where" and site.options.get("drop"):
        known = _WHERE_DROP
    elif site.method in _INDEXING and culprit is None:
        return None  # a conversion inside indexing is a mapped index, not a mask
    else:
        known = _XARRAY_DYNAMIC.get(site.method)
    if known is None:
        return None
    name, why, fix = known
    if not name.startswith(("boolean", "isel", "sel")):
        name = f"xarray's {site.owner}.{name}" if site.owner else f"xarray.{name}"
    return name, why, fix


# --- why xarray converted a value --------------------------------------------------------------
# xarray's functions that convert a value for the user: (module, class, method, kind)
_SITES = (
    ("xarray.core.common", "AbstractArray", "__bool__", "bool"),
    ("xarray.core.common", "AbstractArray", "__float__", "float"),
    ("xarray.core.common", "AbstractArray", "__int__", "int"),
    ("xarray.core.common", "AbstractArray", "__complex__", "complex"),
    ("xarray.core.common", "AbstractArray", "__format__", "format"),
    # pandas-backed index coordinates: a mapped indexer cannot select their labels
    ("xarray.core.indexes", "PandasIndex", "isel", "index"),
    ("xarray.core.indexes", "PandasMultiIndex", "isel", "index"),
    ("xarray.core.indexing", "PandasIndexingAdapter", "__getitem__", "index"),
    ("xarray.core.indexing", "PandasIndexingAdapter", "_oindex_get", "index"),
    ("xarray.core.indexing", "PandasIndexingAdapter", "_vindex_get", "index"),
    # pandas.isna / isnull (xarray's interpolate_na, ffill...): a mask, which carries no
    # derivative, so grad and jvp answer with their primal's (vmap and jit still cannot)
    ("pandas.core.dtypes.missing", None, "_isna", "mask"),
)


def _conversion_sites():
    """{code object: kind} of :data:`_SITES`.  One that xarray moved is left out (never an
    import error): the self-test below finds what that breaks."""
    sites = {}
    for module, owner, method, kind in _SITES:
        try:
            cls = importlib.import_module(module)
            cls = cls if owner is None else getattr(cls, owner)
        except (ImportError, AttributeError):
            continue
        code = getattr(getattr(cls, method, None), "__code__", None)
        if code is not None:
            sites[code] = kind
    return sites


def _wrap(p):
    """A 0-d DataArray holding the probe, built the way xarray builds one internally: the
    public constructor checks the data against Dask's array type, which imports dask.array
    (half a second, and CuPy where installed), and this runs at import."""
    return xr.DataArray(xr.Variable((), p, fastpath=True), coords={}, indexes={}, fastpath=True)


def _if(p):
    da = _wrap(p)
    if da:
        pass


def _float(p):
    float(_wrap(p))


def _int(p):
    int(_wrap(p))


def _complex(p):
    complex(_wrap(p))


def _asarray(p):
    np.asarray(_wrap(p))


def _store_element(p):
    buf, da = np.zeros(2), _wrap(p)
    buf[0] = da  # NumPy calls float(da) from this frame


def _fill(p):
    buf, da = np.zeros(2), _wrap(p)
    buf.fill(da)  # NumPy calls float(da) from this frame, at the call


def _index_isel(p):
    import pandas as pd
    from xarray.core.indexes import PandasIndex

    # what x.isel(t=i) does to the pandas index of "t" (a DataArray would import dask.array)
    PandasIndex(pd.Index([10, 20]), "t").isel({"t": xr.Variable(("t",), p, fastpath=True)})


_CHECKS = (
    diagnose.Check("`if da:`", _if, "bool", ("array",)),
    diagnose.Check("`float(da)`", _float, "float", ("array",)),
    diagnose.Check("`int(da)`", _int, "int", ("array",)),
    diagnose.Check("`complex(da)`", _complex, "complex", ("array",)),
    diagnose.Check("`np.asarray(da)`", _asarray, "array", ("array",)),
    diagnose.Check("`buf[0] = da`", _store_element, "setitem", ("array",)),
    diagnose.Check("`buf.fill(da)`", _fill, "setitem", ("array",)),
    diagnose.Check("`PandasIndex.isel(t=p)`", _index_isel, "index", ("array",), "int64", (1,)),
)


def self_test():
    """Drive a DataArray wrapping the engine's probe through xarray's registered dunders
    (the engine's :func:`~labeled_func.engine.diagnose.self_test`, ``source="xarray"``)."""
    return diagnose.self_test(_CHECKS, source="xarray", versions=f"xarray {xr.__version__}")


diagnose.register_library("xarray", flat_names=True, options=("drop", "vectorize"),
                          aliases={"_LocIndexer": ("DataArray", "loc"),
                                   "_LocIndexerDataset": ("Dataset", "loc")},
                          hidden=True, indexing=_INDEXING, describe=_describe)
diagnose.register_library("pandas", flat_names=True)
diagnose.register_advice("xarray", _advice)
diagnose.register_advice("scipy", _finite_difference_advice)
diagnose.register_dynamic_shape("xarray", _dynamic_shape)
diagnose.register_conversion_sites(_conversion_sites())
self_test()


def zero_d_index_error(error, transform):
    """A policy error for ``x.isel(t=i)`` with a 0-d traced index ``i`` (argmax per example
    under vmap, any traced position under jit), which xarray mistakes for an array index
    (it keeps dim "t" and then finds no data for it), or None.  xarray decides which dims
    an indexing keeps before it indexes the data: only a concrete integer (or a 0-d Dask
    array) drops one, so no duck array can make this pattern work."""
    if not isinstance(error, ValueError) or "must have the same length as the number of data dimensions" not in str(error):
        return None
    names = []
    tb = error.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_globals.get("__name__") == "xarray.core.variable" and frame.f_code.co_name == "isel":
            indexers = frame.f_locals.get("indexers") or {}
            names = [name for name, key in indexers.items()
                     if getattr(key, "ndim", None) == 0 and not isinstance(key, (int, np.integer))]
            break
        tb = tb.tb_next
    else:
        return None
    name = names[0] if names else "dim"
    where = ("under vmap with a 0-d index i computed per example (argmax, argmin, ...)" if transform == "vmap"
             else f"inside lf.{transform} with a 0-d traced index i (argmax, argmin, arithmetic on traced values)")
    return UnsupportedOperationError(
        f"x.isel({name}=i) {where}: xarray drops dim {name!r} only for a concrete integer index, and keeps "
        f"it for a traced one. Give the index a length-1 dim and drop it after: "
        f"x.isel({name}=i.expand_dims('k')).squeeze('k', drop=True), a gather that follows i, or "
        "select with np.take_along_axis (docs/limitations.md, 'Edges of NumPy and xarray')."
    )
