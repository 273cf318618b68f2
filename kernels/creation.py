"""``*_like`` constructors: a mapped template gives a mapped result (torch's ``new_*``).

Their outputs are constants: only the template's shape and dtype are read, so they
carry no derivative.  They stay traced (``traced_constant``) under a differentiating
transform, so that writing traced values into them in place works.
"""
from __future__ import annotations

from .backend import namespace
from .primitive import Primitive

__all__ = ["zeros_like", "ones_like", "full_like", "empty_like"]


def _like(name, make):
    def impl(x, **params):
        return make(namespace(x), x, **params)

    def batch(axis_size, values, batched, **params):
        return prim.bind(values[0], **params), True

    prim = Primitive(name, impl, batch, differentiable=False, traced_constant=True)
    return prim


zeros_like = _like("zeros_like", lambda xp, x, dtype=None: xp.zeros_like(x, dtype=dtype))
ones_like = _like("ones_like", lambda xp, x, dtype=None: xp.ones_like(x, dtype=dtype))
empty_like = _like("empty_like", lambda xp, x, dtype=None: xp.empty_like(x, dtype=dtype))
full_like = _like("full_like", lambda xp, x, fill_value, dtype=None: xp.full_like(x, fill_value, dtype=dtype))
