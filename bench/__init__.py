"""Benchmarks: each module runs with ``python -m bench.<name>`` from the checkout and prints ratios against a
baseline measured in the same run (docs/benchmarks.md)."""
