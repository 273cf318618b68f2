"""A time-stepping model for the tests of blocks that replay one lf.jit program
(tests/test_sobol.py, tests/test_morris.py), and a counter of its Python calls."""
import xarray as xr

STEPPING_BOUNDS = {"r": (0.5, 1.5), "K": (1.0, 2.0), "h": (0.0, 0.2)}


def stepping(p):
    """50 explicit Euler steps in xarray: a harvested logistic growth (nothing that lf.jit fuses
    differently: the jitted outputs are the un-jitted ones to the bit)."""
    y = xr.zeros_like(p.r) + 0.1
    for _ in range(50):
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
