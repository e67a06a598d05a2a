"""Generators of the kernels the benchmarks and tests compile."""
