"""ibi's benchmark suite: `python -m bench [--quick]` (see BENCHMARKS.md)."""
