"""Checks, not timings: asynccomp gives the binaries it should (the fast path, TVM)."""
