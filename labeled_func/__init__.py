"""labeled_func: torch.func's function transforms for xarray's labeled arrays.

>>> import numpy as np, xarray as xr, labeled_func as lf
>>> x = xr.DataArray(np.ones((4, 3)), dims=("sample", "t"))
>>> lf.vmap(lambda x: x.sum("t"), dim="sample")(x).dims
('sample',)
"""
from . import accessor, diagnostics, random, sensitivity  # noqa: F401 (register .func; xarray's diagnostics)
from . import xarray_interp  # noqa: F401 (installs the hook of xarray's interp under the transforms)
from . import xarray_methods  # noqa: F401 (installs the hooks of idxmax/idxmin, sortby, polyfit under the transforms)
from . import xarray_numpy  # noqa: F401 (NumPy functions of DataArrays and Variables that hold traced values)
from . import scipy_rules  # noqa: F401 (scipy.signal.detrend and scipy.optimize.curve_fit of traced values)
from .autodiff import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, linearize, vjp
from .control_flow import cond, while_loop
from .custom import custom_jvp, custom_vjp
from .jit import jit
from .loops import checkpoint, scan
from .per_example import per_example
from .ravel import ravel
from .solvers import implicit_root, linear_solve
from .curve_fit import curve_fit
from .errors import (ConversionError, DataDependentControlFlowError, DynamicShapeError,
                     EscapedTracerError, InplaceError, ItemError, OutArgumentError,
                     RandomnessError, RetraceWarning, TransformError, UnsupportedOperationError)
from .vmap import vmap

__version__ = "0.1.0"

__all__ = [
    "vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "linearize",
    "jit", "ravel", "cond", "while_loop", "checkpoint", "scan", "custom_jvp", "custom_vjp", "random",
    "sensitivity", "linear_solve", "implicit_root", "curve_fit", "per_example",
    "TransformError", "InplaceError", "OutArgumentError", "DataDependentControlFlowError",
    "ItemError", "DynamicShapeError", "RandomnessError", "ConversionError",
    "EscapedTracerError", "UnsupportedOperationError", "RetraceWarning",
]
