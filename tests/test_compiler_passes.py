"""Each rewrite of ``Program.prune`` (engine/compiler/passes.py, banded.py) tested alone, by ablation:
a workload is jitted with every pass, and again with one pass switched off.  The pass must
have changed the program on at least one workload (else this file does not test it), and
the replays of the two programs must give the same results: to the bit for the passes that
promise it, to the last bits of a sum for ``contract`` (another order of the sum).  The
un-jitted call is the oracle of both (to 1e-13: at the default thresholds a replay fuses
large transcendental trees, whose numexpr functions may round the last bit otherwise)."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func.engine.compiler.program import Program

PASSES = ("drop_ones", "simplify", "band", "contract", "spread", "fold_rolls", "rematerialize", "share_checks",
          "contiguous_constants")
EXACT = {name: name != "contract" for name in PASSES}   # the promise of passes.py's docstring


# --- workloads: the shapes of the benchmarks, small ---------------------------------------------
def _ishigami():
    rng = np.random.default_rng(0)
    samples = xr.Dataset({name: ("sample", rng.uniform(-np.pi, np.pi, 4096)) for name in ("x1", "x2", "x3")})

    def f(p):
        return np.sin(p.x1) + 7 * np.sin(p.x2) ** 2 + 0.1 * p.x3 ** 4 * np.sin(p.x1)
    return lf.vmap(lf.grad(f), dim="sample"), (samples,)


def _advection():
    cells = 32
    u0 = xr.DataArray(np.exp(-((np.arange(cells) - 8.0) ** 2) / 8), dims="cell")
    rng = np.random.default_rng(1)
    params = xr.Dataset({"velocity": ("sample", rng.uniform(0.5, 1.5, 1024)),
                         "diffusivity": ("sample", rng.uniform(5e-4, 2e-3, 1024)),
                         "decay": ("sample", rng.uniform(0.0, 1.0, 1024))})   # 32,768 cells: trailing sums

    def f(p):
        u = u0
        for _ in range(40):
            left, right = u.roll(cell=1), u.roll(cell=-1)
            u = u + 0.01 * (-p.velocity * (u - left) / 0.03 + p.diffusivity * (right - 2 * u + left) / 0.03 ** 2
                            - p.decay * u)
        return (u ** 2).mean("cell")
    return lf.vmap(lf.grad(f), dim="sample"), (params,)


def _lorenz96():
    x = xr.DataArray(np.random.default_rng(2).normal(size=192) + 8.0, dims="site")  # 192 x 192: banded

    def tendency(x):
        return (x.roll(site=-1) - x.roll(site=2)) * x.roll(site=1) - x + 8.0
    return lf.jacrev(tendency), (x,)


def _rosenbrock():
    x = xr.DataArray(np.random.default_rng(3).uniform(-1, 1, 40), dims="d")

    def f(x):
        a, b = x.isel(d=slice(None, -1)), x.isel(d=slice(1, None))
        return (100 * (b.data - a.data ** 2) ** 2 + (1 - a.data) ** 2).sum()
    return lf.hessian(f), (x,)


def _scaled_products():
    """Negations, divisions by powers of two and a parameter read by many products."""
    rng = np.random.default_rng(4)
    x = xr.DataArray(rng.normal(size=(512, 64)), dims=("sample", "t"))
    w = xr.DataArray(rng.normal(size=64), dims="t")

    def f(w, x):
        y = -(x * w) / 4 + (-x) * (w / 2) * x - x / 8 * w * w
        return (np.tanh(y) * w).sum()
    return lf.grad(f), (w, x)


def _row_products():
    """A product summed over the trailing dim, as a person writes a weighted sum per row."""
    rng = np.random.default_rng(5)
    x, y = (xr.DataArray(rng.normal(size=(1024, 32)), dims=("sample", "cell")) for _ in range(2))
    return (lambda x, y: (x * y).sum("cell", skipna=False) + np.sum(x.data * x.data, axis=-1)), (x, y)


WORKLOADS = {"ishigami": _ishigami, "advection": _advection, "lorenz96": _lorenz96, "rosenbrock": _rosenbrock,
             "scaled_products": _scaled_products, "row_products": _row_products}


def _leaves(out):
    if isinstance(out, xr.Dataset):
        return [out[k].values for k in sorted(out.data_vars)]
    if isinstance(out, xr.DataArray):
        return [out.values]
    if isinstance(out, (tuple, list)):
        return [v for o in out for v in _leaves(o)]
    return [np.asarray(out)]


def _fingerprint(program):
    return ([(getattr(node.function, "__name__", type(node.function).__name__), len(node.refs))
             for node in program.nodes],
            [value.strides for value in program._constants if type(value) is np.ndarray])  # as the replay reads them


def _jitted(func, args, monkeypatch, without=None):
    """(results of the trace and of a replay of lf.jit(func), the fingerprint of its program),
    with the pass ``without`` switched off for the prune (which the first replay runs)."""
    captured = []
    prune = Program.prune

    def recording(self):
        result = prune(self)
        captured.append(_fingerprint(self))
        return result

    with monkeypatch.context() as patch:
        patch.setattr(Program, "prune", recording)
        if without is not None:
            patch.setattr(Program, without, lambda self: None)
        jitted = lf.jit(func)
        first = _leaves(jitted(*args))
        assert captured == []  # the first call's results are the trace's: nothing pruned yet
        second = _leaves(jitted(*args))   # a replay, pruned first
    assert len(captured) == 1
    return first, second, captured[0]


@pytest.fixture(scope="module")
def eager():
    return {name: _leaves(make()[0](*make()[1])) for name, make in WORKLOADS.items()}


@pytest.mark.parametrize("name", PASSES)
def test_each_pass_fires_somewhere_and_keeps_its_promise(name, monkeypatch, eager):
    fired = []
    for workload, make in WORKLOADS.items():
        func, args = make()
        _, with_all, program = _jitted(func, args, monkeypatch)
        _, without, ablated = _jitted(func, args, monkeypatch, without=name)
        for got, expected in zip(with_all, eager[workload]):
            # the un-jitted call (a replay's fused tanh, exp... may round the last bit otherwise: docs/jit.md)
            np.testing.assert_allclose(got, expected, rtol=1e-13, atol=0)
        if program != ablated:
            fired.append(workload)
            for a, b in zip(with_all, without):
                if EXACT[name]:
                    np.testing.assert_array_equal(a, b, err_msg=f"{name} changed a bit on {workload}")
                else:
                    np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13 * np.abs(b).max())
    assert fired, f"no workload here exercises {name}: add one that does"
