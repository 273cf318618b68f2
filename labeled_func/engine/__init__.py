"""Floor 2 of labeled_func: the batched-tensor layer.  Positional; never imports xarray.

What floor 3 reads of tracers goes through these names: ``primal_of``, ``tangent_of``,
``node_of`` (views refreshed inside), ``traced_by``, ``is_traced``, ``level_of``, ``held``,
``is_batched``; it makes them with a level's methods (``JVPLevel.input``, ``VJPLevel.input``,
``JitLevel.input``) or ``batch_value``, and never names a tracer class (the classes are
exported for the engine's tests and for debugging).
"""
from .batching import BatchLevel, BatchTracer, any_example_true, batch_value, unbatch_value
from .forward import JVPLevel, JVPTracer, tangent_of
from .reverse import VJPLevel, VJPTracer, backward, input_node, node_of
from .stack import (Level, active, bind_checkpoint, bind_custom_jvp, bind_custom_vjp, bind_per_example, current_levels, differentiated,
                    held, inplace_assign, is_batched, is_traced, level_of, traced_by)
from .diagnose import register_conversion_sites
from .tracer import Tracer, primal_of

__all__ = ["BatchLevel", "BatchTracer", "JVPLevel", "JVPTracer", "Level", "Tracer", "VJPLevel", "VJPTracer",
           "active", "any_example_true", "backward", "batch_value", "bind_checkpoint", "bind_custom_jvp", "bind_custom_vjp",
           "bind_per_example",
           "current_levels", "differentiated", "held", "inplace_assign", "is_traced", "level_of", "input_node", "is_batched", "node_of", "primal_of",
           "register_conversion_sites", "tangent_of", "traced_by", "unbatch_value"]
