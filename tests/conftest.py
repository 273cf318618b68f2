"""Shared fixtures: ``backend``, one array library per parameter.

``backend`` runs a test on NumPy, on ``array_api_strict`` (the array API standard and
nothing more: proof that no NumPy-only call slipped in, without a GPU) and on CuPy
(skipped, with the reason, where CuPy or a GPU is missing).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Callable

import numpy as np
import pytest


@dataclass(frozen=True)
class Backend:
    """One array library as the tests see it.

    ``asarray(values)`` makes one of its arrays from NumPy values (dtype kept),
    ``to_numpy(array)`` brings one back (asserting it is the library's own type),
    ``namespace`` is the library module (``numpy``, ``array_api_strict``, ``cupy``).
    ``array_types`` are the types its results may have (NumPy: also its scalars).
    """

    name: str
    namespace: ModuleType
    array_types: tuple
    _to_numpy: Callable

    def asarray(self, values, **kwargs):
        return self.namespace.asarray(np.asarray(values), **kwargs)

    def to_numpy(self, array):
        assert isinstance(array, self.array_types), (
            f"expected a {self.name} array, got a {type(array).__module__}.{type(array).__name__}"
        )
        return self._to_numpy(array)


def _numpy():
    return Backend("numpy", np, (np.ndarray, np.generic), np.asarray)


def _array_api_strict():
    import array_api_strict as xps

    cpu = xps.Device("CPU_DEVICE")
    return Backend("array_api_strict", xps, (type(xps.asarray(0.0)),),
                   lambda array: np.asarray(array.to_device(cpu)))


def _cupy():
    try:
        import cupy
    except ImportError as error:  # also raised by a CuPy built for another CUDA
        pytest.skip(f"cupy is not importable ({error}); install the 'gpu' extra on a GPU machine")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # noqa: BLE001 - CUDARuntimeError, driver missing, ...
        pytest.skip(f"cupy finds no usable GPU ({type(error).__name__}: {error})")
    if count == 0:
        pytest.skip("cupy finds no GPU")
    return Backend("cupy", cupy, (cupy.ndarray,), cupy.asnumpy)


_BACKENDS = {"numpy": _numpy, "array_api_strict": _array_api_strict, "cupy": _cupy}


@pytest.fixture(params=["numpy", "array_api_strict", pytest.param("cupy", marks=pytest.mark.gpu)])
def backend(request):
    """The array library a test runs on (see :class:`Backend`)."""
    return _BACKENDS[request.param]()
