"""labeled_func: torch.func's function transforms for xarray's labeled arrays.

>>> import numpy as np, xarray as xr, labeled_func as lf
>>> x = xr.DataArray(np.ones((4, 3)), dims=("sample", "t"))
>>> lf.vmap(lambda x: x.sum("t"), dim="sample")(x).dims
('sample',)
"""
from . import random
from .control_flow import cond, while_loop
from .errors import (ConversionError, DataDependentControlFlowError, DynamicShapeError,
                     EscapedTracerError, InplaceError, ItemError, OutArgumentError,
                     RandomnessError, TransformError, UnsupportedOperationError)
from .vmap import vmap

__version__ = "0.1.0"

__all__ = [
    "vmap", "cond", "while_loop", "random",
    "TransformError", "InplaceError", "OutArgumentError", "DataDependentControlFlowError",
    "ItemError", "DynamicShapeError", "RandomnessError", "ConversionError",
    "EscapedTracerError", "UnsupportedOperationError",
]
