"""CUDA sources the tests generate (the tests carry their own kernels)."""

from __future__ import annotations

import pytest

ARCH = "sm_90a"


def scale_kernel(factor: float = 2.0, name: str = "scale") -> str:
    """A tiny kernel: ``x[i] *= factor``. Different factors give different sources."""
    return (
        f'extern "C" __global__ void {name}(float* x, int n) {{\n'
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        f"  if (i < n) x[i] *= {factor!r}f;\n"
        "}\n"
    )


def broken_kernel() -> str:
    """A kernel with a compile error on line 2 (an undefined identifier)."""
    return (
        'extern "C" __global__ void broken(float* x) {\n'
        "  x[threadIdx.x] = undefined_identifier_42;\n"
        "}\n"
    )


def slow_kernel(statements: int = 30000) -> str:
    """A kernel that takes NVRTC and nvcc many seconds (30000 dependent statements:
    about 15 s here), for timeout and cancellation tests."""
    body = "".join(
        f"  a = a * {1.0 + i * 1e-6:.7f}f + __sinf(a + {i}.0f);\n" for i in range(statements)
    )
    return (
        'extern "C" __global__ void slow(float* x) {\n'
        "  float a = x[threadIdx.x];\n" + body + "  x[threadIdx.x] = a;\n}\n"
    )


def _nvcc_missing() -> bool:
    from asynccomp.toolkit import find_toolkit

    return find_toolkit().nvcc is None


needs_nvcc = pytest.mark.skipif(_nvcc_missing(), reason="nvcc not found (CUDA toolkit)")
