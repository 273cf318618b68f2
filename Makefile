# `make demo` and `make test` set everything up on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench bench-gpu gpu-check perf-docs supported-docs docs clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,dask]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/quickstart.py

# on every core (pytest-xdist): the fuzzers are derandomized, a failure reproduces with -p no:xdist
test: $(STAMP)
	$(PY) -m pytest -q -n auto tests --doctest-modules labeled_func kernels

bench: $(STAMP)
	$(PY) -m benchmarks

# Needs a GPU, cupy-xarray and CuPy: .venv/bin/pip install -e ".[gpu]" cupy-cuda12x
bench-gpu: $(STAMP)
	$(PY) -m benchmarks.bench_gpu

# The checks a GPU machine is lent for, in one command: the CuPy tests, then the GPU benchmark.
gpu-check: $(STAMP)
	$(PY) -m pytest -q -x tests/test_ops_cupy.py tests/test_backends.py tests/test_jit_cuda_fusion.py tests/test_dask_autodiff.py
	$(PY) -m benchmarks.bench_gpu

# The table of docs/performance.md, measured on this machine (takes minutes).
perf-docs: $(STAMP)
	$(PY) -m benchmarks --markdown docs/performance_table.md

# The list of supported functions in docs/limitations.md, from the engine's registry.
supported-docs: $(STAMP)
	$(PY) docs/supported.py docs/supported_table.md

docs: $(STAMP)
	$(PY) -m pip install --quiet -e ".[docs]"
	$(VENV)/bin/sphinx-build -W -b html docs docs/_build/html

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
