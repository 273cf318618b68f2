"""What a derivative says about itself: its attrs and units (pint Quantities are refused by
backends.reject_quantities).

A derivative is a new quantity, not the argument it was taken with respect to: the
gradient of a loss with respect to a temperature in K is not an ``air_temperature`` in
K.  So a derivative inherits none of the argument's attrs (``standard_name``,
``long_name``, ``valid_range``, fill values...).  It gets at most two of its own, and
**a label written here is right or absent**, never a guess.

What the output says of itself counts only where the function set it.  xarray passes
names and attrs on through arithmetic (``keep_attrs``): ``0.0 * p.smax`` is named
``smax`` and carries smax's ``long_name`` and ``units``; ``params.k * S`` carries k's
``units`` (``d-1``) when S has none.  Such values describe an input, not the output.  So
the output's name, and each of its attrs, is *its own* only where it differs from the
name (the same attr) of every input: every DataArray, Dataset, DataTree and Variable in
the arguments (any pytree of them), their data variables and coordinates, and those the
function can reach by name (closures, defaults, globals and module attributes its code
names, a bound method's object, a ``functools.partial``'s arguments, and the same of the
functions it calls by name; see :class:`Inputs`).  A value equal to an input's may
have been set on purpose, but it is no evidence, and it is not used.  Then:

- ``units``: the output's own ``units`` divided by the argument's (of a second
  derivative: by both arguments), written in the CF/UDUNITS style (``"m s-1"``,
  ``"K-1"``, ``"1"``), where both are known; none otherwise.  A missing ``units`` is
  unknown, not dimensionless: a dimensionless loss says so with ``units="1"``.  An
  argument's ``units`` are the caller's and taken as they are.
- ``long_name``: ``"derivative of <output> with respect to <argument>"``, the output
  called by its own ``long_name``, else its own name, else the function's name (a
  lambda has none), else ``"the output"``; the argument by its name (a DataArray's name,
  else the parameter's name and path, ``p['k']``).  A second derivative (the Hessian):
  ``"second derivative of <output> with respect to <a> and <b>"``.

Where neither the output carries attrs of its own nor the argument carries any, the
derivative has no attrs.  The rule sees what the function is given and names; data it
reaches otherwise (inside a function it calls as a module's attribute,
``helpers.model(k)``, or made by a property, say) is not seen: give such an output its
attrs explicitly, or drop them (``.drop_attrs()``).  docs/autodiff.md, "Attrs and units
of derivatives", says the same for users.

Units are handled as text, without a units library: a units string is a product of
symbols with integer powers (``"kg m-2 s-1"``, ``"m.s^-1"``, ``"m**2"``, ``"m/s"``,
``"1"``); a time reference (``"days since 2000-01-01"``) counts as its unit (``"days"``);
anything else (a scale factor ``"1e-3 kg"``, parentheses) is kept whole, as one symbol
in parentheses: ``"(1e-3 kg) s-1"``.
"""
from __future__ import annotations

import functools
import itertools
import os
import re
import sys
import sysconfig
import types
from collections.abc import Mapping
from typing import NamedTuple, Optional

import numpy as np
import xarray as xr

from labeled_func_kernels.backend import library_of


__all__ = ["Inputs", "OutputLabel", "derivative_attrs", "derivative_units", "divide_units", "label_output",
           "second_derivative_attrs"]


# --- what the inputs could have passed on ---------------------------------------------------------
_REACH_BUDGET = 2000   # objects looked at, at most, among what the function can reach
_REACH_DEPTH = 8       # functions, containers and objects followed, at most, one inside the other


class Inputs:
    """The names and attrs that xarray could have passed on to a function's output:
    those of every labeled value in ``values`` (pytrees of DataArrays, Datasets,
    DataTrees, Variables: the arguments) and among the objects ``function`` can reach
    by name.  Collected when first asked.

    >>> import xarray as xr
    >>> from labeled_func.units import Inputs
    >>> p = xr.Dataset({"smax": ((), 100.0, {"units": "mm"})})
    >>> inputs = Inputs((p,))
    >>> inputs.named("smax"), inputs.named("runoff"), inputs.carry("units", "mm"), inputs.carry("units", "mm d-1")
    (True, False, True, False)
    """

    def __init__(self, values=(), function=None):
        self._pending = [values] + ([function] if function is not None else [])
        self._names, self._attrs = set(), {}

    def named(self, name):
        """Whether some input is named ``name`` (a DataArray, a variable, a coordinate, a dim)."""
        return self._found(lambda: str(name) in self._names)

    def carry(self, key, value):
        """Whether some input carries the attr ``key`` with the value ``value``."""
        return self._found(lambda: any(_same(value, other) for other in self._attrs.get(key, ())))

    def _found(self, test):
        """``test()`` on what is collected, collecting more (the arguments, then what the
        function reaches) until it holds or all is collected."""
        while not test():
            if not self._pending:
                return False
            found = []
            _labeled_values(self._pending.pop(0), found)
            for value in found:
                self._note(value)
        return True

    def _note(self, value):
        if isinstance(value, xr.DataTree):
            for node in value.subtree:
                self._add_name(node.name)
                self._add_attrs(node.attrs)
                self._note(node.to_dataset(inherit=False))
        elif isinstance(value, (xr.DataArray, xr.Dataset)):
            if isinstance(value, xr.DataArray):
                self._add_name(value.name)
            self._add_attrs(value.attrs)
            for name in value.dims:
                self._add_name(name)
            for name, variable in value.variables.items() if isinstance(value, xr.Dataset) else \
                    value.coords.variables.items():
                self._add_name(name)
                self._add_attrs(variable.attrs)
        elif isinstance(value, xr.Variable):
            self._add_attrs(value.attrs)
            for name in value.dims:
                self._add_name(name)

    def _add_name(self, name):
        if name is not None:
            self._names.add(str(name))

    def _add_attrs(self, attrs):
        for key, value in attrs.items():
            self._attrs.setdefault(key, []).append(value)


_LABELED = (xr.DataArray, xr.Dataset, xr.DataTree, xr.Variable)
_OPAQUE = (str, bytes, int, float, complex, np.ndarray, np.generic, types.ModuleType)


def _labeled_values(start, found):
    """Append to ``found`` the labeled values in ``start`` and in what it holds (a
    container's items, a function's closure, defaults and named globals, an object's
    attributes), nearest first, ``_REACH_DEPTH`` levels and ``_REACH_BUDGET`` objects
    at most."""
    seen, left = set(), _REACH_BUDGET
    level = [start]
    for _ in range(_REACH_DEPTH + 1):
        deeper = []
        for value in level:
            if left <= 0:
                return
            left -= 1
            if isinstance(value, _LABELED):
                found.append(value)
            elif not (value is None or isinstance(value, _OPAQUE) or id(value) in seen):
                seen.add(id(value))
                deeper.extend(itertools.islice(_held(value), left))
        level = deeper


def _held(value):
    """What ``value`` holds that its output could take attrs from: read without calling
    anything of the user's (no properties, no ``__getattr__``)."""
    if isinstance(value, (list, tuple, set, frozenset)):
        return iter(value)
    if isinstance(value, dict):
        return iter(value.values())
    if isinstance(value, functools.partial):
        return iter([value.func, *value.args, *value.keywords.values()])
    if isinstance(value, types.MethodType):
        return iter([value.__func__, value.__self__])
    if isinstance(value, types.FunctionType):
        return iter(_function_reach(value))
    if isinstance(value, type):  # a class: its attributes (Model.OBSERVED), unless library code's
        return iter(() if _library(value.__module__) else list(vars(value).values()))
    if isinstance(value, Mapping):
        return iter(())  # another mapping (a dask graph...): not read, its values may be lazy
    try:
        attributes = object.__getattribute__(value, "__dict__")
    except Exception:  # noqa: BLE001 - no __dict__ (or one that is no plain attribute)
        attributes = None
    # an object: its attributes and its class's (self.observed, self.OBSERVED)
    return iter((list(attributes.values()) if isinstance(attributes, dict) else []) + [type(value)])


def _function_reach(function):
    """A Python function's closure, defaults, ``__wrapped__``, and the globals (and
    attributes of global modules) that its code names; library code's globals (the
    standard library's, an installed package's, this package's) hold none of the
    caller's data and are not read, but its closure may hold the caller's function."""
    held = [cell for cell in _cells(function)]
    held += list(function.__defaults__ or ()) + list((function.__kwdefaults__ or {}).values())
    wrapped = function.__dict__.get("__wrapped__")
    if wrapped is not None:
        held.append(wrapped)
    if _library(function.__module__):
        return held
    names = _code_names(function.__code__)
    for name in names:
        value = function.__globals__.get(name)
        if isinstance(value, types.ModuleType):  # cfg.S: the module's attributes the code names
            held += [vars(value)[other] for other in names if isinstance(vars(value).get(other), _LABELED)]
        elif value is not None:
            held.append(value)
    return held


@functools.lru_cache(maxsize=None)
def _library(module_name):
    """Whether the module ``module_name`` is library code (the standard library, an
    installed package, this package): its globals hold none of the caller's data."""
    if not isinstance(module_name, str):
        return False
    if module_name.partition(".")[0] in _OWN_PACKAGES:
        return True
    module = sys.modules.get(module_name)
    where = getattr(module, "__file__", None)
    if not isinstance(where, str):
        return module is not None and module_name in sys.builtin_module_names
    where = os.path.realpath(where)
    return any(where.startswith(root + os.sep) for root in _LIBRARY_ROOTS)


_OWN_PACKAGES = (__name__.partition(".")[0], library_of.__module__.partition(".")[0])
_LIBRARY_ROOTS = tuple(dict.fromkeys(os.path.realpath(sysconfig.get_paths()[key])
                                     for key in ("stdlib", "platstdlib", "purelib", "platlib")))


def _cells(function):
    for cell in function.__closure__ or ():
        try:
            yield cell.cell_contents
        except ValueError:  # an empty cell
            continue


def _code_names(code):
    names = list(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names += _code_names(constant)
    return list(dict.fromkeys(names))


def _same(value, other):
    if value is other:
        return True
    try:
        equal = value == other
        if isinstance(equal, (bool, np.bool_)):
            return bool(equal)
        return bool(np.array_equal(np.asarray(value), np.asarray(other)))
    except Exception:  # noqa: BLE001 - values that do not compare are not the same
        return False


# --- the policy -----------------------------------------------------------------------------------
class OutputLabel(NamedTuple):
    """What derivatives may say of an output: how it is called (``text``), its units
    where certain (``units``, else None), and whether it carries attrs of its own
    (``described``)."""

    text: str
    units: Optional[str]
    described: bool


def label_output(name, attrs, inputs, function=None):
    """The :class:`OutputLabel` of an output named ``name`` with ``attrs``, made from
    ``inputs`` (an :class:`Inputs`) by ``function``: only what is its own counts (see
    the module's docstring).

    >>> import xarray as xr
    >>> from labeled_func.units import Inputs, label_output
    >>> p = xr.Dataset({"smax": ((), 100.0, {"units": "mm", "long_name": "storage capacity"})})
    >>> label_output("smax", {"units": "mm", "long_name": "storage capacity"}, Inputs((p,)), "bucket")
    OutputLabel(text='bucket', units=None, described=False)
    >>> label_output("runoff", {"units": "mm d-1"}, Inputs((p,)), "bucket")
    OutputLabel(text='runoff', units='mm d-1', described=True)
    >>> label_output(None, {"long_name": "total runoff"}, Inputs((p,)), None)
    OutputLabel(text='total runoff', units=None, described=True)
    """
    own = {key: value for key, value in dict(attrs or {}).items() if not inputs.carry(key, value)}
    long_name = own.get("long_name")
    if isinstance(long_name, str) and long_name.strip():
        text = long_name.strip()
    elif name is not None and str(name).strip() and not inputs.named(name):
        text = str(name)
    else:
        text = _function_name(function) or "the output"
    units = own.get("units")
    return OutputLabel(text, None if _missing(units) else str(units).strip(), bool(own))


def _function_name(function):
    """A function's name where it has one (a lambda has none); a ``functools.partial``
    is named by the function it binds."""
    while isinstance(function, functools.partial):
        function = function.func
    if isinstance(function, str) or function is None:
        return function or None
    name = getattr(function, "__name__", None)
    return name if isinstance(name, str) and name.isidentifier() else None


def derivative_attrs(output, wrt_name, wrt_attrs):
    """The attrs of d output / d wrt, ``output`` an :class:`OutputLabel`: ``long_name``
    and, where certain, ``units``; none where neither the output has attrs of its own
    nor the argument has any.

    >>> from labeled_func.units import OutputLabel, derivative_attrs
    >>> loss = OutputLabel("loss", "1", True)
    >>> derivative_attrs(loss, "T", {"units": "K", "standard_name": "air_temperature"})
    {'long_name': 'derivative of loss with respect to T', 'units': 'K-1'}
    >>> derivative_attrs(OutputLabel("loss", None, False), "T", {"units": "K"})  # units unknown
    {'long_name': 'derivative of loss with respect to T'}
    >>> derivative_attrs(OutputLabel("loss", None, False), "x", {})
    {}
    """
    wrt_attrs = dict(wrt_attrs or {})
    if not output.described and not wrt_attrs:
        return {}  # nothing described either: nothing to say of the derivative
    attrs = {"long_name": f"derivative of {output.text} with respect to {wrt_name or 'the argument'}"}
    units = derivative_units(output.units, wrt_attrs.get("units"))
    if units is not None:
        attrs["units"] = units
    return attrs


def second_derivative_attrs(first, wrt_name, wrt_attrs):
    """The attrs of d/d wrt of ``first``, the attrs of a first derivative made here (by
    :func:`derivative_attrs`): the Hessian's.  None where the first has no long_name.

    >>> from labeled_func.units import OutputLabel, derivative_attrs, second_derivative_attrs
    >>> first = derivative_attrs(OutputLabel("loss", "1", True), "T", {"units": "K"})
    >>> second_derivative_attrs(first, "t", {"units": "s"})
    {'long_name': 'second derivative of loss with respect to T and t', 'units': 'K-1 s-1'}
    >>> second_derivative_attrs({}, "t", {"units": "s"})
    {}
    """
    inner = dict(first or {}).get("long_name")
    if not (isinstance(inner, str) and inner.startswith("derivative of ")):
        return {}  # the first derivative says nothing: what it is of is not known here
    attrs = {"long_name": f"second {inner} and {wrt_name or 'the argument'}"}
    units = derivative_units(first.get("units"), dict(wrt_attrs or {}).get("units"))
    if units is not None:
        attrs["units"] = units
    return attrs


def derivative_units(output_units, *wrt_units):
    """The units of the derivative of an output in ``output_units`` with respect to
    arguments in ``wrt_units``, or None unless all of them are known.

    >>> from labeled_func.units import derivative_units
    >>> derivative_units("mm2 d-2", "d-1"), derivative_units(None, "K"), derivative_units("W", "K", None)
    ('mm2 d-1', None, None)
    """
    if _missing(output_units) or any(_missing(units) for units in wrt_units):
        return None
    return divide_units(output_units, *wrt_units)


def divide_units(numerator, *denominators):
    """``numerator / (denominator_1 denominator_2 ...)`` as a CF units string, or None
    when none of them is given (a missing one counts as dimensionless, ``"1"``).

    >>> from labeled_func.units import divide_units
    >>> divide_units("m", "s"), divide_units(None, "K"), divide_units("K", "K"), divide_units("1", "K", "K")
    ('m s-1', 'K-1', '1', 'K-2')
    >>> divide_units("kg m-2 s-1", "kg m-2"), divide_units("m/s", "s"), divide_units("days since 2000-1-1", None)
    ('s-1', 'm s-2', 'days')
    >>> divide_units("W K-1 W K-1"), divide_units("W W", "K", "K")
    ('W2 K-2', 'W2 K-2')
    >>> divide_units("1e-3 kg", "s")
    '(1e-3 kg) s-1'
    >>> divide_units(None, None) is None
    True
    """
    if all(_missing(u) for u in (numerator,) + denominators):
        return None
    powers = {}
    for symbol, power in _powers(numerator):  # "m s-1 m s-1" is m2 s-2
        powers[symbol] = powers.get(symbol, 0) + power
    for units in denominators:
        for symbol, power in _powers(units):
            powers[symbol] = powers.get(symbol, 0) - power
    return _format(powers)


def _missing(units):
    return units is None or (isinstance(units, str) and not units.strip())


_SEPARATORS = re.compile(r"[\s*·]+|\.(?=\D)")
_FACTOR = re.compile(r"(?P<symbol>(?:[^\W\d]|[%°'\"])[\w%°'\"]*?)(?:\^)?(?P<power>[-+]?\d+)?")


def _powers(units):
    """[(symbol, power)] of a units string (nothing for a dimensionless or missing one)."""
    if _missing(units):
        return []
    text = str(units).strip().partition(" since ")[0].strip()
    factors = []
    for k, part in enumerate(text.replace("**", "^").split("/")):
        sign = 1 if k == 0 else -1
        for token in filter(None, _SEPARATORS.split(part.strip())):
            if token == "1":
                continue
            match = _FACTOR.fullmatch(token)
            if match is None:  # not a product of symbols: kept whole, in parentheses
                whole = str(units).strip()
                return [(whole if whole.startswith("(") and whole.endswith(")") else f"({whole})", 1)]
            factors.append((match["symbol"], sign * int(match["power"] or 1)))
    return factors


def _format(powers):
    terms = [symbol if power == 1 else f"{symbol}{power}" for symbol, power in powers.items() if power]
    if len(terms) == 1 and terms[0].startswith("(") and terms[0].endswith(")"):
        return terms[0][1:-1]  # one units string kept whole, to the power 1: as it was written
    return " ".join(terms) or "1"
