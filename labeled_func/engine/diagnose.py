"""Which call of the user's led to a policy error: a walk up the Python stack.

A tracer's ``__array__`` or ``__bool__`` is often called deep inside xarray, NumPy,
SciPy or pandas: ``x.interp(t=...)`` hands the data to ``scipy.interpolate``, which
calls ``np.asarray``; ``x.groupby(x > 0)`` builds a pandas index from the values.
The error raised there would name nothing the user wrote.  :func:`call_site` walks
from the innermost frame outwards, past labeled_func's own frames and the standard
library, to the first frame of user code; the library frame just inside it is the
public function the user called ("xarray's DataArray.interp"), and the other
libraries on the way ("scipy.interpolate.interp1d") say why it needed a value.

Only called when an error is about to be raised: nothing here runs on the paths
that work.  Floor 2: it never imports xarray, it only reads the module names of
frames.
"""
from __future__ import annotations

import os
import sys
from typing import NamedTuple

__all__ = ["Site", "call_site", "explain", "conversion_message", "control_flow_message",
           "dynamic_shape_message", "is_indexing"]

# packages whose frames are "library": the user called into them
_LIBRARIES = frozenset({
    "xarray", "numpy", "scipy", "pandas", "dask", "flox", "numbagg", "bottleneck",
    "cupy", "cupyx", "array_api_compat", "array_api_strict", "opt_einsum", "toolz",
})
# frames that are neither library nor user code: ours and the standard library
_OURS = frozenset({"labeled_func", "kernels"})
_STDLIB = frozenset(sys.stdlib_module_names)
_MAX_FRAMES = 400
# decorator wrappers are not what the user called
_WRAPPERS = frozenset({"inner", "wrapper", "wrapped", "_wrapper", "decorated", "func_wrapper",
                       "<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>", "<lambda>"})
# an entry that is one of these is an operation the user wrote on a DataArray
_CONVERSION_DUNDERS = frozenset({"__array__", "__bool__", "__float__", "__int__", "__complex__",
                                 "__index__", "__format__", "__len__", "__iter__", "__contains__"})
_OPTIONS = ("drop", "vectorize")


class Site(NamedTuple):
    """Where a policy error comes from, in the user's terms.

    ``library``/``owner``/``method`` name the public function the user called
    (``"xarray"``, ``"DataArray"``, ``"interp"``), all ``None`` when the user's own
    line touched the traced value directly; ``options`` holds a few of its keyword
    arguments (``drop=``, ``vectorize=``; ``loc`` for ``x.loc[...]``); ``through`` the other libraries
    it went through, outermost first, as public names; ``location`` the user's line
    (``"model.py:12"``) or ``None``.
    """

    library: str | None
    owner: str | None
    method: str | None
    module: str
    options: dict
    through: tuple
    location: str | None

    @property
    def public(self):
        """``"xarray's DataArray.interp"``, ``"numpy.nonzero"``, ``"xarray.apply_ufunc"``."""
        if self.library is None:
            return None
        return _public_name(self.library, self.module, self.owner, self.method)

    @property
    def user_wrote_it(self):
        """True when the user's line itself did the conversion (``np.asarray(da)``,
        ``if da > 0:``), not a library function on the user's behalf."""
        return self.library is None or self.method in _CONVERSION_DUNDERS


def _package(frame):
    return (frame.f_globals.get("__name__") or "").partition(".")[0]


def call_site(frame=None):
    """The :class:`Site` of the current call stack (from ``frame``, default: the caller)."""
    frame = sys._getframe(1) if frame is None else frame
    libraries = []  # innermost first
    user = None
    for _ in range(_MAX_FRAMES):
        if frame is None:
            break
        package = _package(frame)
        if package in _LIBRARIES:
            libraries.append(frame)
        elif package not in _OURS and package not in _STDLIB:
            user = frame
            break
        frame = frame.f_back
    location = None
    if user is not None:
        location = f"{os.path.basename(user.f_code.co_filename)}:{user.f_lineno}"
    entry = _entry(libraries)
    if entry is None:
        return Site(None, None, None, "", {}, (), location)
    library = _package(entry)
    owner = _owner(entry)
    options = {}
    if owner in ("_LocIndexer", "_LocIndexerDataset"):  # x.loc[...]
        owner = "DataArray" if owner == "_LocIndexer" else "Dataset"
        options["loc"] = True
    names = entry.f_code.co_varnames[: entry.f_code.co_argcount + entry.f_code.co_kwonlyargcount]
    if any(name in names for name in _OPTIONS):
        values = entry.f_locals
        for name in _OPTIONS:
            value = values.get(name)
            if isinstance(value, (bool, str)):
                options[name] = value
    if library == "numpy" and owner is None:
        # did a labeled array (a DataArray or Variable: dims and data) reach the NumPy function?
        values = entry.f_locals
        options["labeled"] = any(_labeled(values.get(name)) for name in names)
    through = []
    seen = {library, "xarray"}  # xarray below another library only converts the DataArray
    # the outermost frame of each other library, in call order
    inner = libraries[: libraries.index(entry)]
    for frame in reversed(inner):
        package = _package(frame)
        name = frame.f_code.co_name
        if package not in seen and name not in _WRAPPERS and name not in _CONVERSION_DUNDERS:
            seen.add(package)
            through.append(_public_name(package, frame.f_globals.get("__name__", ""),
                                        _owner(frame), frame.f_code.co_name))
    return Site(library, owner, entry.f_code.co_name, entry.f_globals.get("__name__", ""),
                options, tuple(through), location)


def _labeled(value):
    return not isinstance(value, (type, str, bytes)) and hasattr(value, "dims") and hasattr(value, "data")


def _entry(libraries):
    """The outermost library frame that is not a decorator's wrapper."""
    for frame in reversed(libraries):
        code = frame.f_code
        if (code.co_name in _WRAPPERS or code.co_filename.startswith("<")
                or frame.f_globals.get("__name__", "").endswith("deprecation_helpers")):
            continue
        return frame
    return libraries[-1] if libraries else None


def _owner(frame):
    """The class of a method's frame (``type(self)``), or None for a function."""
    code = frame.f_code
    if code.co_argcount and code.co_varnames[0] in ("self", "cls"):
        value = frame.f_locals.get(code.co_varnames[0])
        if value is not None:
            return value.__name__ if isinstance(value, type) else type(value).__name__
    qualname = getattr(code, "co_qualname", code.co_name)
    if "." in qualname and "<locals>" not in qualname:
        return qualname.rsplit(".", 1)[0]
    return None


def _public_name(library, module, owner, name):
    if library in ("xarray", "pandas"):
        prefix = library
    else:
        parts = []
        for part in module.split("."):
            if part.startswith("_"):
                break
            parts.append(part)
        if library == "numpy" and parts[1:2] in (["lib"], ["core"]):
            parts = ["numpy"]
        prefix = ".".join(parts) or library
    if owner is None:
        return f"{prefix}.{name}"
    if name in ("__init__", "__call__"):
        return f"{prefix}.{owner}"
    possessive = f"{library}'" if library.endswith("s") else f"{library}'s"
    return f"{possessive} {owner}.{name}"


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
    "Label lookup goes through pandas, which needs concrete labels, and a label computed "
    "per example would select a different position per example. Select with a mask "
    "instead, e.g. x.where(x[dim] == label, 0).sum(dim), or use positions with "
    "np.take_along_axis."
)
_XARRAY_ADVICE = {
    "interp": _INTERP,
    "interp_like": _INTERP,
    "interpolate_na": (
        "interpolate_na fills each gap through numpy.vectorize (apply_ufunc(vectorize=True)). "
        "Fill NaNs with traced operations instead: x.fillna(value) or "
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
        "With weights that differ per example xarray checks them with bool(); compute "
        "(x * w).sum(dim) / w.sum(dim) instead, or pass weights that are not mapped."
    ),
    "polyfit": (
        "polyfit tests values inside xarray; write the least-squares fit with traced "
        "operations (xr.dot for the normal equations and np.linalg.solve)."
    ),
}
_VECTORIZE = (
    "vectorize=True runs func through numpy.vectorize, which converts every input with "
    "np.asarray. Drop vectorize=True and write func for whole arrays (core dims last), "
    "or vectorise it with lf.vmap."
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


def is_indexing(site):
    """True when ``site`` is xarray indexing (x[...], x.loc[...], sel, isel, assignment)."""
    return site.library == "xarray" and site.method in _INDEXING
_WHERE_DROP = (
    "where(..., drop=True)",
    "drop=True removes the labels where the condition is false everywhere, which "
    "differ per example",
    "Use x.where(cond) without drop=True (NaN where false), or xr.where(cond, x, 0).",
)
_NUMPY_DYNAMIC = frozenset({"nonzero", "argwhere", "flatnonzero", "unique", "unique_values",
                            "unique_counts", "unique_inverse", "unique_all", "extract",
                            "compress", "trim_zeros", "where"})
_NUMPY_FIX = (
    "Use a fixed-shape alternative: xr.where / np.where(condition, x, y), a mask "
    "multiplied in, or sorting with a fixed count."
)


def _head(site, verb):
    """``"inside xarray's DataArray.interp (called from model.py:12); interp goes through
    scipy.interpolate.interp1d, which needs NumPy arrays"`` or ``"at model.py:12"``."""
    if site.user_wrote_it:
        return f"at {site.location}" if site.location else ""
    text = f"inside {_describe(site)}"
    if site.location:
        text += f" (called from {site.location})"
    if site.through:
        text += f"; {_short(site)} goes through {', '.join(site.through)}, which {verb}"
    return text


def _short(site):
    return "loc" if site.options.get("loc") else site.method


def _describe(site):
    target = f"x{'.loc' if site.options.get('loc') else ''}[...]"
    on = f" on a {site.owner}" if site.owner else ""
    if site.method == "__getitem__":
        return f"indexing {target}{on}"
    if site.method == "__setitem__":
        return f"the assignment {target} = value{on}"
    if site.method == "apply_ufunc" and site.options.get("vectorize"):
        return "xarray.apply_ufunc(..., vectorize=True)"
    if site.method == "where" and site.options.get("drop"):
        return f"{site.public}(..., drop=True)"
    return site.public


def _advice(site, default):
    if site.user_wrote_it:
        return default
    if site.library == "xarray":
        if site.method == "apply_ufunc" and site.options.get("vectorize"):
            return _VECTORIZE
        advice = _XARRAY_ADVICE.get(_short(site))
        if advice is not None:
            return advice
        if any(name.startswith("numpy.vectorize") for name in site.through):
            return _VECTORIZE
    if site.library == "numpy" and site.owner is None:
        if site.options.get("labeled"):
            return (f"{site.public} has no xarray version, so NumPy converts the DataArray with "
                    f"np.asarray: call it on x.data instead (traced), or use a DataArray method.")
        if site.method == "take":
            return ("np.take dispatches on the table only, so traced indices into a plain NumPy "
                    "table are converted; use np.take_along_axis(table, indices, axis=...), "
                    "which dispatches on the indices too (for one index i: "
                    "np.take_along_axis(table, i[None], axis=0)[0]).")
        return (f"NumPy hands {site.public} to a traced array only through the arguments it "
                "dispatches on, and none of those is traced here, so it converted the traced "
                "value with np.asarray itself. Make the array it works on traced (built from the "
                "transform's input), or write this step with operations that have a kernel.")
    return default


def explain(site, problem, default_fix, verb="needs NumPy arrays"):
    """``problem`` and a fix, led by where it happened (when known)."""
    head = _head(site, verb)
    fix = _advice(site, default_fix)
    return f"{head}: {problem} {fix}" if head else f"{problem} {fix}"


def conversion_message(site, problem, default_fix):
    """The message of a ConversionError (``np.asarray`` of a traced value, or a mapped
    index where NumPy or pandas need a concrete one)."""
    return explain(site, problem, default_fix)


def control_flow_message(site, problem, default_fix):
    """The message of a DataDependentControlFlowError (``bool()`` of a mapped value)."""
    if site.user_wrote_it:
        return explain(site, problem, default_fix)
    library = site.through[-1] if site.through else site.public
    problem = (f"{problem} You wrote no `if` here: {library} tests a value of the example "
               "itself, so the examples could take different paths through it.")
    if site.library == "xarray" and site.method in ("interp", "interp_like"):
        return f"{_head(site, 'tests a value with bool()')}: {problem} {_INTERP_MAPPED}"
    return explain(site, problem, default_fix, verb="tests a value with bool()")


def dynamic_shape_message(site, culprit=None):
    """The message of a DynamicShapeError if ``site`` is an operation whose output shape
    depends on the data, else None.  ``culprit`` (``"numpy.nonzero"``) names the NumPy
    function that found it, when the site names no such operation."""
    known = _dynamic_entry(site, culprit)
    where = f" (called from {site.location})" if site.location else ""
    if known is not None:
        name, why, fix = known
        if site.library == "xarray" and not name.startswith(("boolean", "isel", "sel")):
            name = f"xarray's {site.owner}.{name}" if site.owner else f"xarray.{name}"
        return f"{name} under vmap{where}: {why}, and a batch cannot hold arrays of different shapes. {fix}"
    if culprit is None:
        return None
    inside = ""
    if not site.user_wrote_it:
        inside = f" inside {_describe(site)}"
    return (f"{culprit}{inside} under vmap{where}: its output shape depends on the values "
            "of a mapped input, and a batch cannot hold arrays of different shapes. "
            f"{_NUMPY_FIX}")


def _dynamic_entry(site, culprit):
    if site.library == "xarray":
        if site.method == "where" and site.options.get("drop"):
            return _WHERE_DROP
        if site.method in _INDEXING and culprit is None:
            return None  # a conversion inside indexing is a mapped index, not a mask
        return _XARRAY_DYNAMIC.get(site.method)
    if site.library == "numpy" and site.owner is None and site.method in _NUMPY_DYNAMIC:
        fix = _NUMPY_FIX
        if site.method in ("extract", "compress"):
            fix += (f" (With a condition that is the same for every example, call "
                    f"numpy.{site.method} on x.data: it is traced.)")
        return (f"numpy.{site.method}", "its output shape depends on the values of a "
                "mapped input", fix)
    return None
