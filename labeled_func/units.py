"""What a derivative says about itself: its attrs and units; pint Quantities refused.

A derivative is a new quantity, not the argument it was taken with respect to: the
gradient of a loss with respect to a temperature in K is not an ``air_temperature`` in
K.  So a derivative inherits none of the argument's attrs (``standard_name``,
``long_name``, ``valid_range``, fill values...).  It gets two of its own:

- ``units``: those of the output divided by those of the argument(s), written in the
  CF/UDUNITS style (``"m s-1"``, ``"K-1"``, ``"1"``), where the output or an argument
  carries ``units`` (a missing one counts as dimensionless); none where neither does;
- ``long_name``: ``"derivative of <output> with respect to <argument>"``.

Where neither the output nor the argument carries any attrs, the derivative has none.

Units are handled as text, without a units library: a units string is a product of
symbols with integer powers (``"kg m-2 s-1"``, ``"m.s^-1"``, ``"m**2"``, ``"m/s"``,
``"1"``); a time reference (``"days since 2000-01-01"``) counts as its unit (``"days"``);
anything else (a scale factor ``"1e-3 kg"``, parentheses) is kept whole, as one symbol
in parentheses: ``"(1e-3 kg) s-1"``.
"""
from __future__ import annotations

import re

from labeled_func_kernels.backend import library_of

from .backends import data_arrays
from .errors import UnsupportedOperationError

__all__ = ["derivative_attrs", "divide_units", "reject_quantities"]


def derivative_attrs(output_name, output_attrs, wrt_name, wrt_attrs, *, of_derivative=False):
    """The attrs of d output / d wrt: ``long_name`` and, where known, ``units``; none
    where neither the output nor the argument carries attrs.

    ``of_derivative``: the output is itself a derivative made here (the inner Jacobian
    of a Hessian): its units are divided once more and its ``long_name`` becomes
    "second derivative of ... and <wrt>".

    >>> from labeled_func.units import derivative_attrs
    >>> derivative_attrs("loss", {}, "T", {"units": "K", "standard_name": "air_temperature"})
    {'long_name': 'derivative of loss with respect to T', 'units': 'K-1'}
    >>> first = derivative_attrs("loss", {}, "T", {"units": "K"})
    >>> derivative_attrs(None, first, "T", {"units": "K"}, of_derivative=True)
    {'long_name': 'second derivative of loss with respect to T and T', 'units': 'K-2'}
    >>> derivative_attrs("loss", {}, "x", {})
    {}
    """
    if not output_attrs and not wrt_attrs:
        return {}  # nothing described either: nothing to say of the derivative
    inner = output_attrs.get("long_name") if of_derivative else None
    if isinstance(inner, str) and inner.startswith("derivative of "):
        long_name = f"second {inner} and {wrt_name}"
    else:
        long_name = f"derivative of {output_name or 'the output'} with respect to {wrt_name or 'the argument'}"
    attrs = {"long_name": long_name}
    units = divide_units(output_attrs.get("units"), wrt_attrs.get("units"))
    if units is not None:
        attrs["units"] = units
    return attrs


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


# --- pint ---------------------------------------------------------------------------------------------
def reject_quantities(values, labels, *, transform):
    """Raise :class:`UnsupportedOperationError` where ``values`` (pytrees of labeled
    values and arrays) hold pint Quantities (pint-xarray's ``.pint.quantify()``).

    pint is never imported: a Quantity is an array whose type comes from the ``pint``
    package.  Transforms work on plain arrays; a quantified object is dequantified first,
    its units then in ``attrs["units"]``, from which derivatives take theirs.
    """
    for value, label in zip(values, labels):
        for array, where in data_arrays(value, label):
            if library_of(array) == "pint":
                raise UnsupportedOperationError(
                    f"{transform}: {where} holds a pint Quantity ({type(array).__name__}, units "
                    f"{getattr(array, 'units', '?')}): the transforms work on plain NumPy/CuPy arrays. "
                    "Call .pint.dequantify() first (pint-xarray): the units then sit in attrs['units'], "
                    "and derivatives carry units computed from them (output units / argument units); "
                    "quantify the result again with .pint.quantify() if you need Quantities.")
