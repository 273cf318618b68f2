"""A jitted call's signature in the user's terms: labels compared to the bit, and what
differs between two signatures (``lf.jit(f).explain()``, the reason of a retrace).

``lf.jit`` keys its programs by what can change a result (docs/jit.md, "The signature of
a call"); the labels that are compared rather than hashed (attrs, encodings, coordinate
values) are compared by :func:`same_value` and :func:`same_coordinate`.  When a call
traces again, :class:`Signature` describes it argument by argument and
:func:`differences` names what changed against a program kept, in the words a user
knows (``argument 'params', data variable 'k': attrs {'units': 'd-1'} -> {}``).  Nothing
here runs on a replay.
"""
from __future__ import annotations

import numbers
import reprlib
import struct

import numpy as np
from xarray.core.options import OPTIONS as XARRAY_OPTIONS

from .named import tree_nodes

__all__ = ["RESULT_OPTIONS", "Signature", "differences", "same_coordinate", "same_value", "scalar_key"]


# xarray's options that change what an operation returns (keep_attrs, arithmetic_join, the
# libraries it reduces with...); the display and file options change nothing a function returns
RESULT_OPTIONS = tuple(name for name in XARRAY_OPTIONS if not name.startswith(
    ("display_", "cmap_", "file_", "warn_", "netcdf_", "facetgrid_")))


# --- a traced call's signature in the user's terms, and what differs between two ------------------
class Signature:
    """What ``explain()`` needs of a traced call's signature: each argument leaf (by its
    label, ``argument 'x'['a']``) with its part of the key and of the labels compared on a
    hit, the label of each array, the static arguments.  Made when tracing only."""

    @classmethod
    def of(cls, call):
        """``call``'s signature, or None where it cannot be described (never fails a call)."""
        try:
            return cls(call)
        except Exception:  # noqa: BLE001 - a diagnostic must not break the call
            return None

    def __init__(self, call):
        self.number = None  # the trace that made it
        self.treedef, kinds, statics, self.layouts, self.options, self.aliases = call.key
        self.leaves = {}  # path -> (label, kind, value (numbers, strings, None), labels compared on a hit)
        self.arrays = []  # the label of each array of the call
        checks = iter(call.check)
        for path, leaf, kind in zip(call.paths, call.leaves, kinds):
            label = call._where(path)
            count = {"DataArray": 2, "Dataset": 2, "Variable": 1}.get(kind[0], 0)
            if kind[0] == "DataTree":
                count = 2 * len(kind[2])
            self.leaves[path] = (label, kind, leaf if kind[0] == "constant" else None,
                                 [next(checks) for _ in range(count)])
            self.arrays += _array_labels(label, leaf, kind)
        self.formats = [(tuple(array.shape), array.dtype) for array in call.arrays]  # a layout follows these
        bound = call.bound.arguments if call.bound is not None else {}
        self.statics = {name: (key, bound.get(name)) for name, key in statics}


def _array_labels(label, leaf, kind):
    """The label of each array that a leaf holds, in the call's order."""
    if kind[0] == "Dataset":
        return [f"{label}, data variable {name!r}" for name in leaf.data_vars]
    if kind[0] == "DataTree":
        return [f"{label}, node {node_path!r}, variable {name!r}" for node_path, ds in tree_nodes(leaf)
                for name in ds.data_vars]
    if kind[0] == "constant":
        return []
    return [label]


_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 80
_SHORT.maxdict = _SHORT.maxlist = _SHORT.maxtuple = 8


def _value(value):
    """A number, string or None as shown in a reason: its repr and type (``1 (int)``)."""
    return f"{_SHORT.repr(value)} ({type(value).__name__})"


def _change(old, new):
    """``old -> new``, with their types where two numbers' types differ (``1 (int) -> 1.0
    (float)``) or where the reprs are equal."""
    a, b = _SHORT.repr(old), _SHORT.repr(new)
    numbers_ = (numbers.Number, np.generic)
    if type(old) is not type(new) and (a == b or (isinstance(old, numbers_) and isinstance(new, numbers_))):
        a, b = _value(old), _value(new)
    if a == b:
        return f"{a} -> another value of the same repr"
    return f"{a} -> {b}"


def _key_value(key):
    """The value of a ``scalar_key`` (a name): ``'a'``, ``1.0``."""
    if len(key) == 2 and key[0] is float and isinstance(key[1], bytes):
        return float("nan") if key[1] == b"nan" else struct.unpack("<d", key[1])[0]
    return key[1] if len(key) == 2 else key


def _type_name(kind):
    return f"{kind.__module__}.{kind.__qualname__}" if kind.__module__ != "builtins" else kind.__qualname__


def _array_changes(where, old, new):
    """The differences of ``(dims, shape, dtype, array type)`` (dims None: an array)."""
    found = []
    for name, a, b in zip(("dims", "shape", "dtype", "array type"), old, new):
        if a != b:
            shown = (_type_name(a), _type_name(b)) if name == "array type" else (a, b)
            found.append(f"{where}: {name} {shown[0]} -> {shown[1]}")
    return found


def _leaf_kind(kind, value):
    if kind[0] == "constant":
        return f"the constant {_value(value)}"
    return {"array": "an array"}.get(kind[0], f"a {kind[0]}")


def differences(old, new, labels=True):
    """What differs between two signatures, in the user's terms (a list of phrases); with
    ``labels``, the attrs, encodings and coordinate values too (compared, not hashed)."""
    found = []
    gone = {path: leaf for path, leaf in old.leaves.items() if path not in new.leaves}
    came = {path: leaf for path, leaf in new.leaves.items() if path not in old.leaves}
    pairs = [(old.leaves[path], new.leaves[path]) for path in new.leaves if path in old.leaves]
    for path, leaf in list(came.items()):  # the same argument, passed by keyword instead of by position
        name = leaf[0].removeprefix("keyword ")
        for other, was in list(gone.items()):
            if was[0].removeprefix("keyword ") == name and was[0] != leaf[0]:
                how = "by keyword" if leaf[0].startswith("keyword ") else "by position"
                found.append(f"{name}: passed {'by position' if how == 'by keyword' else 'by keyword'} -> {how}")
                pairs.append((was, leaf))
                del gone[other], came[path]
                break
    found += [f"{was[0]}: {_leaf_kind(was[1], was[2])} -> not passed" for was in gone.values()]
    found += [f"{now[0]}: not passed -> {_leaf_kind(now[1], now[2])}" for now in came.values()]
    if not found and old.treedef != new.treedef:
        found.append(f"the structure of the arguments: {old.treedef} -> {new.treedef}")
    for was, now in pairs:
        found += _leaf_differences(was, now, labels)
    for name, (key, value) in new.statics.items():
        if name in old.statics and old.statics[name][0] != key:
            found.append(f"static argument {name!r}: {_change(old.statics[name][1], value)}")
    if old.options != new.options:
        found += [f"xarray option {name}: {_SHORT.repr(a)} -> {_SHORT.repr(b)}"
                  for name, a, b in zip(RESULT_OPTIONS, old.options, new.options) if a != b]
    if len(old.arrays) == len(new.arrays):
        found += _aliasing_changes(old, new)
        found += [f"{label}: memory layout (strides) {a} -> {b}"
                  for label, a, b, was, now in zip(new.arrays, old.layouts, new.layouts, old.formats, new.formats)
                  if a != b and a is not None and b is not None and was == now]
    return found


def _aliasing_changes(old, new):
    """Which arguments are the same array in one call and not in the other."""
    found = []
    count = len(new.arrays)
    before = old.aliases or tuple(range(count))
    after = new.aliases or tuple(range(count))
    for k in range(count):
        if before[k] != after[k] and k != after[k]:
            found.append(f"{new.arrays[after[k]]} and {new.arrays[k]}: distinct arrays -> the same array")
        elif before[k] != after[k] and k != before[k]:
            found.append(f"{new.arrays[before[k]]} and {new.arrays[k]}: the same array -> distinct arrays")
    return found


def _leaf_differences(was, now, labels):
    (label, old, old_value, old_checks), (_, new, new_value, new_checks) = was, now
    if old[0] != new[0]:
        return [f"{label}: {_leaf_kind(old, old_value)} -> {_leaf_kind(new, new_value)}"]
    tag = old[0]
    if tag == "constant":
        return [] if old == new else [f"{label}: {_change(old_value, new_value)}"]
    if tag == "array":
        return _array_changes(label, (None, old[2], old[3], old[1]), (None, new[2], new[3], new[1]))
    if tag == "Variable":
        found = _array_changes(label, old[1:5], new[1:5])
        if labels and not found:
            found += _label_changes(label, ("",), old_checks[0][1], new_checks[0][1])
        return found
    if tag == "DataArray":
        found = _array_changes(label, old[1:5], new[1:5])
        if old[5] != new[5]:
            found.append(f"{label}: name {_change(_key_value(old[5]), _key_value(new[5]))}")
        coords = _coord_changes(label, old[6], new[6])
        found += coords
        if labels and not coords:
            found += _coordinate_value_changes(label, old[6], old_checks[0][1], new_checks[0][1])
        if labels:
            found += _label_changes(label, ("",), old_checks[1][1], new_checks[1][1])
        return found
    if tag == "Dataset":
        return _dataset_differences(label, old, new, old_checks, new_checks, labels)
    found = []  # a DataTree: its name, then node by node
    if old[1] != new[1]:
        found.append(f"{label}: name {_change(old[1], new[1])}")
    old_nodes = {path: (kind, old_checks[2 * k:2 * k + 2]) for k, (path, kind) in enumerate(old[2])}
    new_nodes = {path: (kind, new_checks[2 * k:2 * k + 2]) for k, (path, kind) in enumerate(new[2])}
    found += [f"{label}: node {path!r} removed" for path in old_nodes if path not in new_nodes]
    found += [f"{label}: node {path!r} added" for path in new_nodes if path not in old_nodes]
    for path, (kind, checks) in new_nodes.items():
        if path in old_nodes:
            found += _dataset_differences(f"{label}, node {path!r}", old_nodes[path][0], kind, old_nodes[path][1],
                                          checks, labels)
    return found


def _dataset_differences(label, old, new, old_checks, new_checks, labels):
    found = []
    old_vars = {_key_value(entry[0]): entry[1:] for entry in old[1]}
    new_vars = {_key_value(entry[0]): entry[1:] for entry in new[1]}
    found += [f"{label}: data variable {name!r} removed" for name in old_vars if name not in new_vars]
    found += [f"{label}: data variable {name!r} added" for name in new_vars if name not in old_vars]
    for name, entry in new_vars.items():
        if name in old_vars:
            found += _array_changes(f"{label}, data variable {name!r}", old_vars[name], entry)
    if not found and list(old_vars) != list(new_vars):
        found.append(f"{label}: the order of the data variables {list(old_vars)} -> {list(new_vars)}")
    coords = _coord_changes(label, old[2], new[2])
    found += coords
    if labels and not coords:
        found += _coordinate_value_changes(label, old[2], old_checks[0][1], new_checks[0][1])
    if labels and list(old_vars) == list(new_vars):
        parts = ("",) + tuple(f"data variable {name!r}" for name in new_vars)
        found += _label_changes(label, parts, old_checks[1][1], new_checks[1][1])
    return found


def _coord_changes(label, old, new):
    """The differences of two coordinate keys: ``(name, dims, shape, dtype, index type)``."""
    old_coords = {entry[0]: entry[1:] for entry in old}
    new_coords = {entry[0]: entry[1:] for entry in new}
    found = [f"{label}: coordinate {name!r} removed" for name in old_coords if name not in new_coords]
    found += [f"{label}: coordinate {name!r} added" for name in new_coords if name not in old_coords]
    for name, (dims, shape, dtype, index) in new_coords.items():
        if name in old_coords:
            where = f"{label}, coordinate {name!r}"
            found += _array_changes(where, old_coords[name][:3], (dims, shape, dtype))
            if old_coords[name][3] is not index:
                found.append(f"{where}: index {getattr(old_coords[name][3], '__name__', None)} -> "
                             f"{getattr(index, '__name__', None)}")
    if not found and list(old_coords) != list(new_coords):
        found.append(f"{label}: the order of the coordinates {list(old_coords)} -> {list(new_coords)}")
    return found


def _coordinate_value_changes(label, key, old, new):
    """The coordinates (same names, dims, shapes, dtypes) whose values, attrs or encodings differ."""
    found = []
    for entry, a, b in zip(key, old, new):
        if a is b or same_coordinate(a, b):
            continue
        where = f"{label}, coordinate {entry[0]!r}"
        values_differ = not a.equals(b) or (a.dtype.kind in "fc" and not np.array_equal(
            np.signbit(a.values.real), np.signbit(b.values.real)))
        if values_differ:
            found.append(f"{where}: values {_values(a)} -> {_values(b)}")
        found += _label_changes(where, ("",), (a.attrs, a.encoding), (b.attrs, b.encoding))
    return found


def _values(variable):
    return np.array2string(np.asarray(variable.values), threshold=6, edgeitems=3, separator=", ")


def _label_changes(label, parts, old, new):
    """The attrs and encodings that differ: ``old`` and ``new`` hold (attrs, encoding) for each of
    ``parts`` ("" for the leaf itself, "data variable 'k'"...)."""
    found = []
    for k, part in enumerate(parts):
        where = f"{label}, {part}" if part else label
        for what, a, b in (("attrs", old[2 * k], new[2 * k]), ("encoding", old[2 * k + 1], new[2 * k + 1])):
            if a is not b and not same_value(a, b):
                found.append(f"{where}: {what} {_dict_change(a, b)}")
    return found


def _dict_change(old, new):
    """Two attrs (or encoding) dicts: whole where short, else the keys that differ."""
    whole = _change(old, new)
    if len(whole) <= 120 or not (isinstance(old, dict) and isinstance(new, dict)):
        return whole
    parts = [f"{key!r} removed" for key in old if key not in new]
    parts += [f"{key!r} added ({_SHORT.repr(new[key])})" for key in new if key not in old]
    parts += [f"{key!r} {_change(old[key], new[key])}" for key in new
              if key in old and not same_value(old[key], new[key])]
    return ", ".join(parts) or whole


def same_coordinate(a, b):
    """Whether two coordinate variables hold the same labels: values (NaN as NaN, the sign
    of a zero), attrs and encoding (their dims, shapes and dtypes are in the key)."""
    if not (a.equals(b) and same_value(a.attrs, b.attrs) and same_value(a.encoding, b.encoding)):
        return False
    if a.dtype.kind in "fc":  # equals() holds 0.0 == -0.0
        return bool(np.array_equal(np.signbit(a.values.real), np.signbit(b.values.real)))
    return True


def same_value(a, b):
    """Whether ``a`` and ``b`` are the same value of the same type, to the bit: what a
    program may return as it was when traced (attrs, encodings). Containers are compared
    item by item, floats by their bits (``0.0`` is not ``-0.0``, NaN is NaN)."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if kind in (list, tuple):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if kind in (float, complex) or isinstance(a, np.generic):
        return scalar_key(a) == scalar_key(b)
    if isinstance(a, np.ndarray):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype.kind in "fc":
            return bool(np.array_equal(a, b, equal_nan=True)
                        and np.array_equal(np.signbit(a.real), np.signbit(b.real))
                        and np.array_equal(np.signbit(a.imag), np.signbit(b.imag)))
        return bool(np.array_equal(a, b))
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # no single truth value: only the object itself matches
        return False


def scalar_key(value):
    """A Python number, string, None or NumPy scalar as a key: its type and exact value (a
    float's bits: ``0.0`` and ``-0.0`` are two keys, every NaN is one; ``1``, ``1.0`` and
    ``True`` are three), so that a program never stands for another's constants."""
    kind = type(value)
    if kind is float:
        return kind, struct.pack("<d", value) if value == value else b"nan"
    if kind is complex:
        return kind, scalar_key(value.real), scalar_key(value.imag)
    if isinstance(value, np.generic):
        if value.dtype.kind == "f":
            return kind, scalar_key(float(value))
        if value.dtype.kind == "c":
            return kind, scalar_key(complex(value))
        return kind, value.item()
    return kind, value
