"""The GPU benchmark's code path, run on CPU with array_api_strict standing for CuPy.

The benchmark itself checks every gradient against the closed form before timing, so
running it on a stand-in library keeps that path from rotting on machines without a GPU.
"""
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import benchmarks.bench_gpu as bench_gpu  # noqa: E402

xps = pytest.importorskip("array_api_strict")


def strict_device():
    def to_device(ds):
        return ds.copy(data={name: xps.asarray(ds[name].values) for name in ds.data_vars})

    return bench_gpu.Device("array_api_strict", xps, to_device, np.asarray, lambda: None)


def test_rows_on_a_stand_in_library_check_and_time_the_gradients():
    rows = bench_gpu.rows(strict_device(), 2_000)
    assert [row["target"] for row in rows] == ["none (for reference)", "ratio <= 3", "none (for reference)"]
    for row in rows:
        assert "array_api_strict" in row["benchmark"] and "N=2,000" in row["benchmark"]
        assert row["value"] > 0 and row["baseline"] > 0 and row["ratio"] > 0


def test_a_wrong_gradient_fails_the_benchmark(monkeypatch):
    # The closed-form check is what makes the timings mean anything: break the model.
    monkeypatch.setattr(bench_gpu, "ishigami", lambda p: np.sin(p.x1) + p.x2 + p.x3)
    with pytest.raises(AssertionError):
        bench_gpu.rows(strict_device(), 100)


def test_without_cupy_the_benchmark_says_why_and_returns_no_rows(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy -> ImportError
    assert bench_gpu.main(100) == []
    assert "bench_gpu: skipped (CuPy or cupy-xarray is not importable" in capsys.readouterr().err
