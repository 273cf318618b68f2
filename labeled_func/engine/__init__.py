"""Floor 2 of labeled_func: the batched-tensor layer.  Positional; never imports xarray."""
from .batching import BatchLevel, BatchTracer, any_example_true, batch_value, is_batched, unbatch_value
from .forward import JVPLevel, JVPTracer
from .reverse import VJPLevel, VJPTracer, backward, input_node
from .stack import Level, active, current_levels
from .diagnose import register_conversion_sites
from .tracer import Tracer, inplace_assign
from . import numpy_more  # noqa: F401,E402 (registers more NumPy functions into numpy_api's tables)

__all__ = ["JVPLevel", "JVPTracer", "VJPLevel", "VJPTracer", "backward", "input_node",
           "BatchLevel", "BatchTracer", "Level", "any_example_true", "Tracer", "active", "batch_value",
           "current_levels", "inplace_assign", "is_batched", "register_conversion_sites",
           "unbatch_value"]
