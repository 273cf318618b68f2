"""vmap over dask-chunked dims: lazy, one in-memory vmap per block."""
from __future__ import annotations

__all__ = ["has_lazy_leaves", "vmap_lazy"]


def has_lazy_leaves(args, kwargs):
    """True when an argument holds dask-backed data (then vmap builds a lazy graph)."""
    return False


def vmap_lazy(mapped, args, kwargs):  # pragma: no cover - filled by the Dask work
    raise NotImplementedError
