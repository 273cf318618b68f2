"""``*_like`` constructors: a mapped template gives a mapped result (torch's ``new_*``).

Their outputs are constants: only the template's shape (or the ``shape`` asked for), dtype
and device are read, so they carry no derivative.  They stay traced (``traced_constant``)
under a differentiating transform, so that writing traced values into them in place works.
"""
from __future__ import annotations

from .backend import device_of, namespace
from .primitive import Primitive

__all__ = ["zeros_like", "ones_like", "full_like", "empty_like"]


def _like(name, make):
    """``make(xp, x, shape, **params)``; ``shape`` is None for the template's own shape."""

    def impl(x, *, shape=None, **params):
        return make(namespace(x), x, shape, **params)

    def batch(axis_size, values, batched, *, shape=None, **params):
        return prim.bind(values[0], shape=None if shape is None else (axis_size,) + tuple(shape), **params), True

    prim = Primitive(name, impl, batch, differentiable=False, traced_constant=True)
    return prim


def _constructor(like_name, new_name):
    """``xp.<like_name>(x, ...)``, or ``xp.<new_name>(shape, ...)`` of a new shape on x's device."""

    def make(xp, x, shape, *args, dtype=None):
        if shape is None:
            return getattr(xp, like_name)(x, *args, dtype=dtype)
        return getattr(xp, new_name)(shape, *args, dtype=x.dtype if dtype is None else dtype, device=device_of(x))

    return make


zeros_like = _like("zeros_like", _constructor("zeros_like", "zeros"))
ones_like = _like("ones_like", _constructor("ones_like", "ones"))
empty_like = _like("empty_like", _constructor("empty_like", "empty"))
full_like = _like("full_like", lambda xp, x, shape, fill_value, dtype=None:
                  _constructor("full_like", "full")(xp, x, shape, fill_value, dtype=dtype))
