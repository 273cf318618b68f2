"""Operator-table entries for NumPy's ufuncs and elementwise functions added after the first table
(``opinfo.OP_DB`` appends ``ENTRIES``): built with ``opinfo``'s helpers, tested by every
generic suite."""
from __future__ import annotations

ENTRIES: list = []
