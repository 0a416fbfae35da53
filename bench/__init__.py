"""Benchmarks (run as modules: python -m bench.throughput). See docs/bench.md."""
