"""Benchmark implementations behind `python -m research.bench`."""
