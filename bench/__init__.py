"""Benchmarks of the course's code: speed and memory, written to bench/RESULTS.md (never timed tests)."""
