"""CUDA sources the tests generate (the tests carry their own kernels)."""

from __future__ import annotations

import struct

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


def ptx_kernel(factor: float = 2.0, name: str = "scale", target: str = "sm_80") -> str:
    """The PTX of :func:`scale_kernel` for one thread, written by hand (``x[0] *=
    factor``): PTX ISA 8.0, which every ptxas of CUDA 12.x and 13.x takes."""
    bits = struct.unpack(">I", struct.pack(">f", factor))[0]
    return (
        "//\n// hand-written\n//\n"
        ".version 8.0\n"
        f".target {target}\n"
        ".address_size 64\n\n"
        f".visible .entry {name}(\n\t.param .u64 {name}_param_0\n)\n{{\n"
        "\t.reg .b64 %rd<3>;\n\t.reg .f32 %f<3>;\n"
        f"\tld.param.u64 %rd1, [{name}_param_0];\n"
        "\tcvta.to.global.u64 %rd2, %rd1;\n"
        "\tld.global.f32 %f1, [%rd2];\n"
        f"\tmul.f32 %f2, %f1, 0f{bits:08X};\n"
        "\tst.global.f32 [%rd2], %f2;\n"
        "\tret;\n}\n"
    )


def _ptxas_missing() -> bool:
    from asynccomp.backends import PtxBackend
    from asynccomp.toolkit import find_toolkit

    return PtxBackend.version(find_toolkit()) is None


needs_ptxas = pytest.mark.skipif(_ptxas_missing(), reason="ptxas not found (CUDA toolkit)")
