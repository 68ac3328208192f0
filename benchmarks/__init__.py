"""Benchmarks: each prints its figures side by side; none is a timed assertion."""
