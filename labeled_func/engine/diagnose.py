"""Why a traced value was converted to a concrete one, where the user asked for it, and what
to write instead: everything a conversion's policy error needs, in one place.

1. **Why** (:func:`conversion_kind`, :func:`number_kind`, :func:`confirmed`, :func:`storing`).
   A tracer's ``__array__`` does not know who called it: ``np.asarray(x)``, ``if da > 0:``
   (xarray's ``AbstractArray.__bool__`` calls ``np.asarray``), ``plain[i] = x`` and
   ``table[x]`` all arrive there, and each has its own policy.  The bytecode of the calling
   frame tells a store or a subscript; code objects that floor 3 registers
   (:func:`register_conversion_sites`) tell xarray's dunders.  Opcodes change between
   Python versions, so an import-time self-test drives a :class:`Probe`, which converts as a
   Tracer does, through ``if p:``, ``float(p)``, ``np.asarray(p)``, ``buf[0] = p``, ``a[p]``...
   (floor 3 adds its own checks: :func:`self_test`).  A conversion whose classification a
   failing check could not confirm raises a generic ConversionError instead of a specific
   error that might be wrong, and one RuntimeWarning names the Python version and the
   checks that failed.
2. **Where** (:func:`call_site`).  The error is often raised deep inside xarray, NumPy, SciPy
   or pandas: ``x.interp(t=...)`` hands the data to ``scipy.interpolate``, which calls
   ``np.asarray``; ``x.groupby(x > 0)`` builds a pandas index from the values.  The walk goes
   from the innermost frame outwards, past labeled_func's own frames and the standard
   library, to the first frame of user code; the library frame just inside it is the public
   function the user called ("xarray's DataArray.interp"), and the other libraries on the way
   ("scipy.interpolate.interp1d") say why it needed a value.
3. **What instead** (:func:`explain`, :func:`conversion_message`, :func:`control_flow_message`,
   :func:`dynamic_shape_message`).  The engine knows generic Python and NumPy; what to do
   about a library's functions is registered by floor 3 (:func:`register_library`,
   :func:`register_advice`, :func:`register_dynamic_shape`).

And :func:`unwrap_conversion_error`: NumPy turns a policy error raised while it converts a
value for ``plain[i] = x`` into a ValueError; ``stack.active`` gives the policy error back.

Floor 2: it never imports xarray; it reads opcodes, code objects and module names of frames.
The walk and the messages run only when an error is about to be raised; the classification
runs on every conversion (``if x > 0:`` under grad is allowed), in about a microsecond.
"""
from __future__ import annotations

import dis
import math
import os
import platform
import sys
import warnings
from typing import Callable, NamedTuple

import numpy as np

from labeled_func_kernels.backend import library_packages

from .errors import ConversionError, TransformError, _Located

__all__ = [
    "conversion_kind", "number_kind", "confirmed", "storing", "register_conversion_sites",
    "Probe", "Check", "self_test", "unconfirmed", "unwrap_conversion_error",
    "Site", "call_site",
    "register_library", "register_advice", "register_dynamic_shape",
    "explain", "conversion_message", "control_flow_message", "dynamic_shape_message", "is_indexing",
]


# === 1. why a value was converted ============================================================
# Code objects of library functions that convert a value on the user's behalf, registered by
# floor 3 (xarray's AbstractArray.__bool__/__float__/..., pandas index lookups): code -> kind.
_CONVERSION_SITES: dict = {}
_SITE_DEPTH = 10  # how many frames above __array__ may hold one of them
_NUMBER_KINDS = frozenset(("float", "int", "complex"))


def register_conversion_sites(sites):
    """``sites``: {code object: "bool" | "float" | "int" | "complex" | "format" | "index" | "mask"}.

    A conversion that ``__array__`` sees with one of these functions among its callers has
    that kind: ``if da > 0:`` reaches ``__array__`` through ``AbstractArray.__bool__``.
    """
    _CONVERSION_SITES.update(sites)


def _opcodes(*names):
    return frozenset(dis.opmap[name] for name in names if name in dis.opmap)


# What the calling frame executes.  A name this Python lacks is skipped (3.12 added
# BINARY_SLICE/STORE_SLICE); the self-test finds what a missing or renamed one breaks.
_STORE_OPS = _opcodes("STORE_SUBSCR", "STORE_SLICE")
_LOAD_OPS = _opcodes("BINARY_SUBSCR", "BINARY_SLICE")
# Python 3.14 folded BINARY_SUBSCR into BINARY_OP: there a subscript is BINARY_OP with the
# argument that this Python compiles `a[k]` to.
_BINARY_OP = dis.opmap.get("BINARY_OP", -1)


def _subscript_args():
    try:
        code = compile("a[k]", "<subscript>", "eval")
        return frozenset(ins.arg for ins in dis.get_instructions(code) if ins.opcode == _BINARY_OP)
    except Exception:  # noqa: BLE001 - the self-test reports what is left undetected
        return frozenset()


_SUBSCRIPT_ARGS = _subscript_args()


def _storing(frame):
    """Whether ``frame`` is executing ``a[k] = value`` (NumPy converting the value), or
    calling a function that stores a value into an array (``buf.fill(value)``,
    ``buf.__setitem__(i, value)``, ``np.fromiter(values)``: :data:`_STORING_CALLS`)."""
    code = frame.f_code.co_code
    lasti = frame.f_lasti
    if not 0 <= lasti < len(code):
        return False
    op = code[lasti]
    return op in _STORE_OPS or (op in _CALL_OPS and _callee(frame.f_code, lasti) in _STORING_CALLS)


# Functions and methods written in C that store a value into a NumPy array: the array
# converts the value (__float__, __array__...) with no Python frame of its own, so the
# tracer sees the frame that calls them, stopped at the call.  Keyed by the name the call
# loads (``buf.fill``: "fill"; ``np.fromiter``: "fromiter"), with how messages show them.
_STORING_CALLS = {
    "fill": "plain.fill(value)",
    "__setitem__": "plain.__setitem__(key, value)",
    "setitem": "operator.setitem(plain, key, value)",
    "itemset": "plain.itemset(index, value)",
    "put": "plain.put(indices, values)",
    "fromiter": "np.fromiter(values, dtype)",
}
_CALL_OPS = _opcodes("CALL", "CALL_KW", "CALL_FUNCTION_EX", "CALL_FUNCTION", "CALL_METHOD", "CALL_FUNCTION_KW")
_CALLEES: dict = {}  # code object -> (its instructions, {offset: index}, {offset of a call: callee})


def _callee(code, lasti):
    """The name by which the call at offset ``lasti`` of ``code`` loads what it calls
    (``buf.fill(v)``: "fill", ``float(v)``: "float"), or None where it cannot be read.

    The callee is the expression that starts where the call starts and ends before its
    arguments: of the instructions that load a name inside the call's source span and
    start at its first column, the one whose span ends last (``np.zeros(3).fill``, not
    ``np`` or ``zeros``).  Needs the source positions of Python 3.11+; the self-test
    checks it.  Read once per call site.
    """
    entry = _CALLEES.get(code)
    if entry is None:
        try:
            instructions = list(dis.get_instructions(code))
        except Exception:  # noqa: BLE001 - an unreadable code object: no callee known
            instructions = []
        entry = _CALLEES[code] = (instructions, {ins.offset: k for k, ins in enumerate(instructions)}, {})
    instructions, index, found = entry
    if lasti not in found:
        found[lasti] = _read_callee(instructions, index.get(lasti))
    return found[lasti]


def _read_callee(instructions, k):
    span = getattr(instructions[k], "positions", None) if k is not None else None
    if span is None or None in (span.lineno, span.col_offset, span.end_lineno, span.end_col_offset):
        return None
    start, end = (span.lineno, span.col_offset), (span.end_lineno, span.end_col_offset)
    best, best_end = None, None
    for load in reversed(instructions[:k]):  # back from the call, through its arguments
        where = getattr(load, "positions", None)
        if where is None or None in (where.lineno, where.col_offset, where.end_lineno, where.end_col_offset):
            continue
        if (where.lineno, where.col_offset) < start:
            break  # before the call
        load_end = (where.end_lineno, where.end_col_offset)
        if ((where.lineno, where.col_offset) == start and load.opname.startswith("LOAD_")
                and isinstance(load.argval, str) and load_end < end and (best_end is None or load_end > best_end)):
            best, best_end = load.argval, load_end
    return best


def store_description(frame=None):
    """How the user's code stored a traced value into a plain array, for messages:
    "plain[...] = value", "plain.fill(value)", "np.fromiter(values, dtype)"...  Read from
    the innermost frame outside labeled_func (and the standard library) above ``frame``
    (default: the caller) that stores; "plain[...] = value" if none does."""
    frame = sys._getframe(1) if frame is None else frame
    for _ in range(_MAX_FRAMES):
        if frame is None:
            break
        if _package(frame) not in _OURS and _package(frame) not in _STDLIB:
            code = frame.f_code.co_code
            lasti = frame.f_lasti
            if 0 <= lasti < len(code):
                if code[lasti] in _STORE_OPS:
                    return "plain[...] = value"
                if code[lasti] in _CALL_OPS:
                    name = _callee(frame.f_code, lasti)
                    if name in _STORING_CALLS:
                        return _STORING_CALLS[name]
        frame = frame.f_back
    return "plain[...] = value"


def _array_kind(frame):
    """Why ``__array__`` was called from ``frame``, unchecked (see :func:`conversion_kind`)."""
    code = frame.f_code.co_code
    lasti = frame.f_lasti
    if 0 <= lasti < len(code) - 1:
        op = code[lasti]
        if op in _STORE_OPS or (op in _CALL_OPS and _callee(frame.f_code, lasti) in _STORING_CALLS):
            return "setitem"
        if op in _LOAD_OPS or (op == _BINARY_OP and code[lasti + 1] in _SUBSCRIPT_ARGS):
            return "index"
    for _ in range(_SITE_DEPTH):
        if frame is None:
            break
        kind = _CONVERSION_SITES.get(frame.f_code)
        if kind is not None:
            if kind in _NUMBER_KINDS and frame.f_back is not None and _storing(frame.f_back):
                return "setitem"  # `plain[i] = da`, `plain.fill(da)`: NumPy calls float(da)
            return kind
        frame = frame.f_back
    return "array"


def _number_kind(frame, kind):
    """Why ``__float__``/``__int__``/``__complex__`` was called from ``frame``, unchecked."""
    return "setitem" if _storing(frame) else kind


# The conversions whose classification the self-test confirms ("routes"), as the user meets
# them, and the kinds each of them answers whatever it detects (a missed detection gives these).
_ROUTES = {
    "bool": "bool() (__bool__)",
    "index": "indexing with a traced value (__index__)",
    "number": "float()/int()/complex() (__float__, __int__, __complex__)",
    "array": "np.asarray, .values, plain[...] = value, and bool()/float() of a DataArray (__array__)",
}
_DEFAULTS = {"bool": ("bool",), "index": ("index",), "array": ("array",),
             "number": ("float", "int", "complex", "setitem")}
_FAILURES: dict = {}  # source ("engine", "xarray") -> {statement: (why it failed, unconfirmed pairs)}
# (route, kind) pairs a failed check could not confirm: its route's defaults, the kind it
# expected and the kinds it got instead.  Positive answers that passed their checks stay
# trusted (`if da > 0:` still reaches grad's primal when only the pandas index check fails).
_UNCONFIRMED: frozenset = frozenset()


def conversion_kind(frame):
    """Why a tracer's ``__array__`` was called from ``frame`` (``sys._getframe(1)`` there).

    "setitem" (``plain[...] = x``), "index" (``table[x]``), the kind of a registered caller
    ("bool", "float", "int", "complex", "format", "index": ``if da > 0:``, ``float(da)``), or
    "array" (``np.asarray(x)``, ``.values``).  Raises the generic ConversionError where the
    self-test could not confirm this answer on this Python.
    """
    kind = _array_kind(frame)
    if _UNCONFIRMED and ("array", kind) in _UNCONFIRMED:
        raise _undetermined("array", kind)
    return kind


def number_kind(frame, kind):
    """Why ``__float__``, ``__int__`` or ``__complex__`` (``kind``: "float", "int", "complex")
    was called from ``frame``: "setitem" when NumPy converts the value for ``plain[i] = x``
    (it would lose its derivative), else ``kind``.  Generic ConversionError if unconfirmed."""
    kind = _number_kind(frame, kind)
    if _UNCONFIRMED and ("number", kind) in _UNCONFIRMED:
        raise _undetermined("number", kind)
    return kind


def confirmed(kind):
    """``kind`` ("bool" for ``__bool__``, "index" for ``__index__``), which needs no
    inspection; the self-test still drives it (``if p:``, ``a[p]``).  Generic ConversionError
    if unconfirmed."""
    if _UNCONFIRMED and (kind, kind) in _UNCONFIRMED:
        raise _undetermined(kind, kind)
    return kind


def storing(frame):
    """Whether ``frame`` executes ``a[k] = value`` (or calls ``a.fill(value)``,
    ``np.fromiter``...: :data:`_STORING_CALLS`); False where the self-test could not
    confirm that (the conversion NumPy makes next raises the generic error)."""
    return ("number", "setitem") not in _UNCONFIRMED and _storing(frame)


def unconfirmed():
    """The answers of the classification that a failed self-test check could not confirm:
    (route, kind) pairs, route one of "bool", "index", "number", "array" (the tracer's
    ``__bool__``, ``__index__``, ``__float__``/``__int__``/``__complex__``, ``__array__``).
    Those conversions raise the generic ConversionError."""
    return _UNCONFIRMED


def _python():
    return f"{platform.python_implementation()} {platform.python_version()}"


def _undetermined(route, kind):
    failed = [statement for checks in _FAILURES.values()
              for statement, (_, pairs) in checks.items() if (route, kind) in pairs]
    head = _head(call_site(), "converts it")
    problem = (
        "a traced value cannot be converted to a concrete value inside a transform "
        f"({_ROUTES[route]}), and the kind of conversion could not be determined on "
        f"{_python()}: labeled_func's self-test failed{' for ' + ', '.join(failed) if failed else ''}. "
        "Every such conversion raises this generic error, even where the specific policy would "
        "allow it (bool() or float() of a value traced by grad uses the primal)."
    )
    fix = ("Keep working with the traced arrays (DataArray methods, NumPy functions), and "
           "report this Python version to labeled_func.")
    return ConversionError(f"{head}: {problem} {fix}" if head else f"{problem} {fix}")


def unwrap_conversion_error(error):
    """The policy error that NumPy wrapped into ``error``, or None.

    ``plain[i] = traced``: NumPy calls ``float()`` on the value, and turns the error raised
    there into "ValueError: setting an array element with a sequence" (the policy error is its
    ``__cause__``).  ``stack.active`` raises the policy error instead.
    """
    cause = error.__cause__
    if isinstance(error, ValueError) and isinstance(cause, TransformError):
        return cause
    return None


# --- the self-test ----------------------------------------------------------------------------
class _Converted(TransformError):
    """What a probe raises when it is converted, as a mapped tracer does."""


class Probe:
    """Converts as a Tracer does, without being one.

    Each conversion asks the classification a Tracer asks, from the same frame, appends the
    kind to ``kinds`` and raises (as a mapped value does).  Like a Tracer it is a sequence
    (``__len__``, ``__getitem__``: NumPy treats those differently) and a duck array that
    xarray keeps as a DataArray's data (``shape``, ``dtype``, ``astype``,
    ``__array_function__``); it has no operations.
    """

    __array_priority__ = 1000
    __hash__ = None

    def __init__(self, shape=(), dtype="float64"):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.kinds = []

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    def _convert(self, kind):
        self.kinds.append(kind)
        raise _Converted(f"a probe converted for {kind}")

    def __array__(self, dtype=None, copy=None):
        self._convert(_array_kind(sys._getframe(1)))

    def __bool__(self):
        self._convert("bool")

    def __float__(self):
        self._convert(_number_kind(sys._getframe(1), "float"))

    def __int__(self):
        self._convert(_number_kind(sys._getframe(1), "int"))

    def __complex__(self):
        self._convert(_number_kind(sys._getframe(1), "complex"))

    def __index__(self):
        self._convert("index")

    def __len__(self):
        if not self.shape:
            if _storing(sys._getframe(1)):
                self._convert("setitem")
            raise TypeError("len() of a 0-d probe")
        return self.shape[0]

    def __getitem__(self, key):
        if not self.shape:
            raise IndexError("a 0-d probe has no items")
        return Probe(self.shape[1:], self.dtype)

    def astype(self, dtype, *args, **kwargs):  # xarray casts indexers
        return self

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return NotImplemented

    def __array_function__(self, func, types, args, kwargs):
        return NotImplemented

    def __repr__(self):
        return f"Probe(shape={self.shape}, dtype={self.dtype})"


class Check(NamedTuple):
    """One statement of the self-test.

    ``run(probe)`` executes ``statement``; every conversion it makes of the probe must be
    classified ``expected`` and the probe's error must come out (through
    :func:`unwrap_conversion_error`); ``routes`` are the conversions ("bool", "index",
    "number", "array": the tracer's ``__bool__``, ``__index__``, ``__float__``/``__int__``/
    ``__complex__``, ``__array__``) whose classification the statement relies on; ``dtype``
    and ``shape`` the probe's.
    """

    statement: str
    run: Callable
    expected: str
    routes: tuple
    dtype: str = "float64"
    shape: tuple = ()


def _if(p):
    if p:
        pass


def _float(p):
    float(p)


def _int(p):
    int(p)


def _asarray(p):
    np.asarray(p)


def _store_element(p):
    buf = np.zeros(2)
    buf[0] = p  # NumPy calls float(p) from this frame


def _store_all(p):
    buf = np.zeros(2)
    buf[...] = p


def _store_slice(p):
    buf, i, j = np.zeros(2), 0, 1
    buf[i:j] = p  # STORE_SLICE from Python 3.12


def _fill(p):
    np.zeros(2).fill(p)  # float(p) from this frame, at the call


def _setitem_call(p):
    buf = np.zeros(2)
    buf.__setitem__(0, p)


def _setitem_call_slice(p):
    buf = np.zeros(2)
    buf.__setitem__(slice(0, 2), p)  # __array__ from this frame, at the call


def _fromiter(p):
    np.fromiter((v for v in (p, p)), float)


def _index_list(p):
    a = [1.0, 2.0]
    a[p]  # __index__


def _index_array(p):
    a = np.zeros(2)
    a[p]  # __index__, then __array__ from this frame (BINARY_OP from Python 3.14)


_CHECKS = (
    Check("`if p:`", _if, "bool", ("bool",)),
    Check("`float(p)`", _float, "float", ("number",)),
    Check("`int(p)`", _int, "int", ("number",)),
    Check("`np.asarray(p)`", _asarray, "array", ("array",)),
    Check("`buf[0] = p`", _store_element, "setitem", ("number",)),
    Check("`buf[...] = p`", _store_all, "setitem", ("array",)),
    Check("`buf[i:j] = p`", _store_slice, "setitem", ("array",)),
    Check("`np.zeros(2).fill(p)`", _fill, "setitem", ("number",)),
    Check("`buf.__setitem__(0, p)`", _setitem_call, "setitem", ("number",)),
    Check("`buf.__setitem__(slice(0, 2), p)`", _setitem_call_slice, "setitem", ("array",)),
    Check("`np.fromiter(values, float)`", _fromiter, "setitem", ("number",)),
    Check("`a[p]` (a list)", _index_list, "index", ("index",), "int64"),
    Check("`a[p]` (a NumPy array)", _index_array, "index", ("array",), "int64"),
)


def _run(check):
    """``(why, kinds)``: why ``check`` fails on this Python (None if it passes), and the kinds
    the classification gave."""
    probe = Probe(check.shape, check.dtype)
    raised = None
    try:
        check.run(probe)
    except Exception as error:  # noqa: BLE001 - anything but the probe's own error fails it
        raised = unwrap_conversion_error(error) or error
    kinds = probe.kinds
    if kinds and all(kind == check.expected for kind in kinds) and isinstance(raised, _Converted):
        return None, kinds
    got = ", ".join(kinds) or "no conversion"
    if raised is None:
        got += ", nothing raised"
    elif not isinstance(raised, _Converted):
        got += f", then {type(raised).__name__}: {raised}"
    return f"{check.statement} gave {got} (expected {check.expected})", kinds


def self_test(checks=None, *, source="engine", versions=""):
    """Drive a :class:`Probe` through ``checks`` (default: the engine's own) and record the
    result under ``source``, replacing that source's earlier one.

    From then on the conversions whose classification a failed check could not confirm
    raise the generic ConversionError, and a RuntimeWarning names this Python (and
    ``versions``, e.g. "xarray 2026.9.0"), the checks that failed and what they gave.
    Returns the failures, {statement: why}.  Floor 3 calls it with checks of its own
    (``source="xarray"``: a DataArray wrapping a probe, through xarray's registered
    dunders).  Never raises.
    """
    failed = {}
    try:
        for check in _CHECKS if checks is None else checks:
            try:
                why, kinds = _run(check)
            except Exception as error:  # noqa: BLE001 - a check that cannot run failed
                why, kinds = f"{check.statement} could not run ({type(error).__name__}: {error})", []
            if why is not None:
                pairs = {(route, kind) for route in check.routes
                         for kind in (*_DEFAULTS[route], check.expected, *kinds)}
                failed[check.statement] = (why, frozenset(pairs))
    except Exception as error:  # noqa: BLE001 - never fail an import: confirm nothing
        everything = {(route, kind) for route in _ROUTES
                      for kind in (*_DEFAULTS[route], "bool", "float", "int", "complex",
                                   "format", "index", "setitem")}
        failed["the self-test"] = (f"the self-test could not run ({type(error).__name__}: {error})",
                                   frozenset(everything))
    _record(source, failed, versions)
    return {statement: why for statement, (why, _) in failed.items()}


def _record(source, failed, versions):
    global _FAILURES, _UNCONFIRMED
    _FAILURES = {**_FAILURES, source: failed}
    _UNCONFIRMED = frozenset().union(*(pairs for checks in _FAILURES.values()
                                       for _, pairs in checks.values()))
    if failed:
        routes = [route for route in _ROUTES
                  if any(pair[0] == route for _, pairs in failed.values() for pair in pairs)]
        on = f"{_python()}{' with ' + versions if versions else ''}"
        warnings.warn(
            f"labeled_func cannot tell why a traced value is converted on {on}: its self-test "
            f"failed ({'; '.join(why for why, _ in failed.values())}). Inside transforms, such "
            f"conversions by {'; '.join(_ROUTES[route] for route in routes)} raise a generic "
            "ConversionError instead of the specific policy error.",
            RuntimeWarning, stacklevel=3,
        )


# === 2. where: the user's call ================================================================
# packages whose frames are "library": the user called into them (the array libraries' own
# packages are declared with their backends)
_LIBRARIES = {
    "xarray", "scipy", "pandas", "flox", "numbagg", "bottleneck", "array_api_compat", "opt_einsum", "toolz",
} | library_packages()
# frames that are neither library nor user code: ours and the standard library
_OURS = frozenset({"labeled_func", "labeled_func_kernels"})
_STDLIB = frozenset(sys.stdlib_module_names)
_MAX_FRAMES = 400
# decorator wrappers are not what the user called
_WRAPPERS = frozenset({"inner", "wrapper", "wrapped", "_wrapper", "decorated", "func_wrapper",
                       "<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>", "<lambda>"})
# an entry that is one of these is an operation the user wrote on a DataArray
_CONVERSION_DUNDERS = frozenset({"__array__", "__bool__", "__float__", "__int__", "__complex__",
                                 "__index__", "__format__", "__len__", "__iter__", "__contains__"})


class _Library(NamedTuple):
    """How the walk and the messages read one library's frames (see :func:`register_library`)."""

    flat_names: bool = False
    options: tuple = ()
    aliases: dict = {}
    hidden: bool = False
    indexing: frozenset = frozenset()
    describe: Callable | None = None


_PLAIN = _Library()
_KNOWN: dict = {}  # library -> _Library
_ADVICE: dict = {}  # library -> advice(site, kind) -> str | None
_DYNAMIC: dict = {}  # library -> entry(site, culprit) -> (name, why, fix) | None


def register_library(library, *, flat_names=False, options=(), aliases=None, hidden=False,
                     indexing=(), describe=None):
    """How :func:`call_site` and the messages read the frames of ``library`` (a package).

    ``flat_names``: its public names are ``library.name`` (``xarray.apply_ufunc``), not the
    module path; ``options``: keyword arguments of its functions to keep in ``Site.options``
    (``drop``, ``vectorize``); ``aliases``: {class name: (public class, accessor)}, e.g. a
    method of ``_LocIndexer`` is ``DataArray.loc[...]``; ``hidden``: its frames inside another
    library's call only convert a labeled array for it, so ``Site.through`` never names it;
    ``indexing``: names of its indexing methods (:func:`is_indexing`); ``describe(site)``: a
    description of a call that its public name does not say
    (``"xarray.apply_ufunc(..., vectorize=True)"``), or None.
    """
    _LIBRARIES.add(library)
    _KNOWN[library] = _Library(bool(flat_names), tuple(options), dict(aliases or {}), bool(hidden),
                               frozenset(indexing), describe)


def register_advice(library, advice):
    """``advice(site, kind)``: what to do instead when a call of ``library`` (``site``) needed a
    concrete value, or None for the default fix.  ``kind`` is "conversion" (ConversionError,
    ItemError) or "control_flow" (the library tested a mapped value with ``bool()``).  Several
    may be registered for one library (each knowing some of its functions): the first that
    answers wins."""
    _LIBRARIES.add(library)
    previous = _ADVICE.get(library)
    _ADVICE[library] = advice if previous is None else _first_answer(previous, advice)


def _first_answer(*advisers):
    def advice(site, kind):
        for adviser in advisers:
            text = adviser(site, kind)
            if text is not None:
                return text
        return None
    return advice


def register_dynamic_shape(library, entry):
    """``entry(site, culprit)``: ``(name, why, fix)`` when the call ``site`` of ``library`` has
    an output shape that depends on the values (``"xarray's DataArray.dropna"``, why, what to
    write instead), else None.  ``culprit`` is what found it (``"numpy.nonzero"``) or None."""
    _LIBRARIES.add(library)
    _DYNAMIC[library] = entry


class Site(NamedTuple):
    """Where a policy error comes from, in the user's terms.

    ``library``/``owner``/``method`` name the public function the user called
    (``"xarray"``, ``"DataArray"``, ``"interp"``), all ``None`` when the user's own
    line touched the traced value directly; ``options`` holds the keyword arguments its
    library registered (xarray's ``drop=``, ``vectorize=``), ``accessor`` for ``x.loc[...]``,
    and ``labeled`` for a NumPy function; ``through`` the other libraries
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


def traceback_location(tb):
    """``file:line`` of the innermost frame of a traceback that is the user's (neither a
    library's, nor ours, nor the standard library's), as :func:`call_site` reads a stack."""
    found = None
    while tb is not None:
        package = _package(tb.tb_frame)
        if package not in _LIBRARIES and package not in _OURS and package not in _STDLIB:
            found = f"{os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found


_Located.locate = staticmethod(traceback_location)


def call_site(frame=None):
    """The :class:`Site` of the current call stack (from ``frame``, default: the caller)."""
    frame = sys._getframe(1) if frame is None else frame
    libraries = []  # innermost first
    user = api = None
    for _ in range(_MAX_FRAMES):
        if frame is None:
            break
        package = _package(frame)
        if package in _LIBRARIES:
            libraries.append(frame)
        elif package in _OURS:
            api = frame  # the outermost one before the user's: the function the user called
        elif package not in _STDLIB:
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
    known = _KNOWN.get(library, _PLAIN)
    owner = _owner(entry)
    options = {}
    if _called_by_us(entry, libraries[-1]):
        # our own code called the library (np.reshape of what the user's model returned), not
        # the user's line: say so, and name the function of ours that the user called
        options["internal"] = _api_name(api)
    if owner in known.aliases:  # x.loc[...]
        owner, options["accessor"] = known.aliases[owner]
    names = entry.f_code.co_varnames[: entry.f_code.co_argcount + entry.f_code.co_kwonlyargcount]
    if any(name in names for name in known.options):
        values = entry.f_locals
        for name in known.options:
            value = values.get(name)
            if isinstance(value, (bool, str)):
                options[name] = value
    if library == "numpy" and owner is None:
        # did a labeled array (a DataArray or Variable: dims and data) reach the NumPy function?
        values = entry.f_locals
        options["labeled"] = any(_labeled(values.get(name)) for name in names)
    through = []
    # a hidden library (xarray) below another only converts the labeled array for it
    seen = {library} | {name for name, lib in _KNOWN.items() if lib.hidden}
    # the outermost frame of each other library, in call order
    inner = libraries[: libraries.index(entry)]
    for frame in reversed(inner):
        package = _package(frame)
        name = frame.f_code.co_name
        if package not in seen and name not in _WRAPPERS and name not in _CONVERSION_DUNDERS:
            seen.add(package)
            through.append(_public_name(package, frame.f_globals.get("__name__", ""),
                                        _owner(frame), _code_name(frame)))
    return Site(library, owner, _code_name(entry), entry.f_globals.get("__name__", ""),
                options, tuple(through), location)


def _called_by_us(entry, outermost):
    """Whether the library call ``entry`` (``outermost``: the outermost library frame around
    it, a decorator's wrapper perhaps) was made by labeled_func's own code: the frame that
    calls it is ours and calls it by its name (``np.reshape(...)``), not a function the user
    handed over (``self.func(...)``, where the user's function is a library's)."""
    caller = outermost.f_back
    if caller is None or _package(caller) not in _OURS:
        return False
    code = caller.f_code
    if not 0 <= caller.f_lasti < len(code.co_code) or code.co_code[caller.f_lasti] not in _CALL_OPS:
        return False
    return _callee(code, caller.f_lasti) in {_code_name(entry), _code_name(outermost)}


def _api_name(frame):
    """``"lf.sensitivity.dgsm"``, ``"lf.vmap"``: the public function of ours that ``frame``
    runs (or the module of one: a transform's wrapper), else ``"labeled_func"``."""
    if frame is None:
        return "labeled_func"
    module = frame.f_globals.get("__name__") or ""
    name = frame.f_code.co_name
    top = sys.modules.get("labeled_func")
    public = set(getattr(top, "__all__", ()))
    tail = module.partition(".")[2]
    if name in getattr(sys.modules.get(module), "__all__", ()):
        return f"lf.{name}" if name in public else f"lf.{tail}.{name}"
    return f"lf.{tail}" if tail in public else "labeled_func"


def _code_name(frame):
    """The name of the function a frame runs; for a generic wrapper made per method by a
    factory (xarray's ``def func(self, ...)`` closing over ``name``: ``DataArray.item``), the
    method's name from the closure."""
    code = frame.f_code
    if code.co_name == "func" and "name" in code.co_freevars:
        name = frame.f_locals.get("name")
        if isinstance(name, str) and name.isidentifier():
            return name
    return code.co_name


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
    if _KNOWN.get(library, _PLAIN).flat_names:
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


# === 3. what the user can do instead ==========================================================
_NUMPY_DYNAMIC = frozenset({"nonzero", "argwhere", "flatnonzero", "unique", "unique_values",
                            "unique_counts", "unique_inverse", "unique_all", "extract",
                            "compress", "trim_zeros", "where"})
_NUMPY_FIX = (
    "Use a fixed-shape alternative: xr.where / np.where(condition, x, y), a mask "
    "multiplied in, or sorting with a fixed count."
)


def is_indexing(site):
    """True when ``site`` is one of its library's indexing methods (xarray's x[...],
    x.loc[...], sel, isel, assignment)."""
    return site.method in _KNOWN.get(site.library, _PLAIN).indexing


def _head(site, verb):
    """``"inside xarray's DataArray.interp (called from model.py:12); interp goes through
    scipy.interpolate.interp1d, which needs NumPy arrays"`` or ``"at model.py:12"``."""
    if site.user_wrote_it:
        return f"at {site.location}" if site.location else ""
    internal = site.options.get("internal")
    if internal is not None:  # our own call: the user's line is the call of our function
        return f"inside {internal}" + (f" (called from {site.location})" if site.location else "")
    text = f"inside {_describe(site)}"
    if site.location:
        text += f" (called from {site.location})"
    if site.through:
        text += f"; {_short(site)} goes through {', '.join(site.through)}, which {verb}"
    return text


def _short(site):
    return site.options.get("accessor") or site.method


def _describe(site):
    accessor = site.options.get("accessor")
    target = f"x{'.' + accessor if accessor else ''}[...]"
    on = f" on a {site.owner}" if site.owner else ""
    if site.method == "__getitem__":
        return f"indexing {target}{on}"
    if site.method == "__setitem__":
        return f"the assignment {target} = value{on}"
    describe = _KNOWN.get(site.library, _PLAIN).describe
    text = describe(site) if describe is not None else None
    return site.public if text is None else text


def _advice(site, default, kind):
    if site.user_wrote_it:
        return default
    internal = site.options.get("internal")
    if internal is not None:
        return (f"{internal} itself called {_describe(site)} on a traced value there, not your code: "
                "a bug of labeled_func. Please report it, with this traceback.")
    advice = _ADVICE.get(site.library)
    if advice is not None:
        text = advice(site, kind)
        if text is not None:
            return text
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


def explain(site, problem, default_fix, verb="needs NumPy arrays", kind="conversion"):
    """``problem`` and a fix, led by where it happened (when known).  ``kind`` picks the
    registered advice: "conversion" or "control_flow"."""
    head = _head(site, verb)
    fix = _advice(site, default_fix, kind)
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
    return explain(site, problem, default_fix, verb="tests a value with bool()", kind="control_flow")


def dynamic_shape_message(site, culprit=None, transform="vmap"):
    """The message of a DynamicShapeError if ``site`` is an operation whose output shape
    depends on the data, else None.  ``culprit`` (``"numpy.nonzero"``) names the NumPy
    function that found it, when the site names no such operation.  ``transform="jit"``:
    the values are those of later calls of a compiled function."""
    known = _dynamic_entry(site, culprit)
    where = f" (called from {site.location})" if site.location else ""
    if transform == "jit":
        if known is None and culprit is None:
            return None
        name, fix = (known[0], known[2]) if known is not None else (culprit, _NUMPY_FIX)
        return (f"{name} under lf.jit{where}: its output shape would depend on the values of a traced "
                "input, and lf.jit records one program of fixed shapes for the values of every later "
                f"call. {fix} Or compute it outside the jitted function and pass it in.")
    if known is not None:
        name, why, fix = known
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
    entry = _DYNAMIC.get(site.library)
    if entry is not None:
        return entry(site, culprit)
    if site.library == "numpy" and site.owner is None and site.method in _NUMPY_DYNAMIC:
        fix = _NUMPY_FIX
        if site.method in ("extract", "compress"):
            fix += (f" (With a condition that is the same for every example, call "
                    f"numpy.{site.method} on x.data: it is traced.)")
        return (f"numpy.{site.method}", "its output shape depends on the values of a "
                "mapped input", fix)
    return None


# the engine's own checks, once, at import (floor 3 adds xarray's when it registers them)
self_test()
