"""One small input and the transforms by name, for tests that check a function under each of
them (tests/test_dask.py, test_inplace_views.py, test_ops_reductions.py)."""
import xarray as xr

import labeled_func as lf

X = xr.DataArray([1.0, 2.0, 4.0], dims="t")
BATCH = xr.DataArray([[1.0, 2.0, 4.0], [3.0, -1.0, 0.5]], dims=("s", "t"))


def under(transform, f, x=X):
    """``f`` under one transform, by name (vmap maps dim "s" of BATCH)."""
    if transform == "grad":
        return lf.grad(f)(x)
    if transform == "jvp":
        return lf.jvp(f, (x,), (xr.ones_like(x),))[1]
    if transform == "jacrev":
        return lf.jacrev(f)(x)
    if transform == "jacfwd":
        return lf.jacfwd(f)(x)
    if transform == "vmap":
        return lf.vmap(f, dim="s")(BATCH)
    raise AssertionError(transform)
