"""Benchmarks: `python -m benchmarks` (or `make bench`) runs every `bench_*.py` module."""
