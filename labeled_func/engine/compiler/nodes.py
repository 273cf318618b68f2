"""The atoms of a recorded program: a :class:`Node` (``function(*inputs, **params)`` into its
slot, reading slots and :class:`Constant` s) and the small functions that nodes call."""
from __future__ import annotations


class Constant:
    """A value the program reads as it was when recorded."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class Node:
    """``function(*inputs, **params)`` into ``slot``; ``refs`` are slots or Constants.
    ``fusable``: None, or the dtypes of the inputs when the node may join a fused
    expression (see :func:`_fusable`)."""

    __slots__ = ("function", "params", "refs", "slot", "prim", "fusable", "out", "strides", "effect")

    def __init__(self, function, params, refs, slot, prim=None):
        self.function = function
        self.params = params
        self.refs = refs
        self.slot = slot
        self.prim = prim
        self.fusable = None
        self.effect = False  # runs at every run even if no output needs it (a random draw)
        self.out = None  # (shape, dtype) of a NumPy result
        self.strides = None  # its strides when recorded (a call's layout is part of its signature)


def _identity(value):
    return value


def _item(index):
    def item(values):
        return values[index]
    return item
