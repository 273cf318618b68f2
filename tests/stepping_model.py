"""What the tests of lf.sensitivity's blocks share (tests/test_sensitivity_jit.py,
tests/test_sobol.py, tests/test_morris.py): a time-stepping model, a counter of its Python
calls, and a record of the number of samples each vmapped model call gets."""
import importlib

import xarray as xr

STEPPING_BOUNDS = {"r": (0.5, 1.5), "K": (1.0, 2.0), "h": (0.0, 0.2)}


def stepping(p, steps=50):
    """Explicit Euler steps in xarray: a harvested logistic growth (nothing that lf.jit fuses
    differently: the jitted outputs are the un-jitted ones to the bit)."""
    y = xr.zeros_like(p.r) + 0.1
    for _ in range(steps):
        y = y + 0.05 * (p.r * y * (1 - y / p.K) - p.h * y)
    return y


def counted(model):
    """``model`` that counts its Python calls: once per trace (lf.jit), once per block (vmap)."""
    def wrapped(p):
        wrapped.calls += 1
        return model(p)

    wrapped.calls = 0
    wrapped.__name__ = model.__name__
    return wrapped


def vmap_call_sizes(monkeypatch, *modules):
    """The number of samples of every call of the vmapped model that ``modules`` (names:
    "labeled_func.model_blocks") make through their ``vmap``, recorded in the returned list."""
    sizes = []
    original = importlib.import_module(modules[0]).vmap

    def counting_vmap(f, dim):
        mapped = original(f, dim=dim)

        def call(samples):
            sizes.append(samples.sizes[dim])
            return mapped(samples)
        return call

    for name in modules:
        monkeypatch.setattr(importlib.import_module(name), "vmap", counting_vmap)
    return sizes
