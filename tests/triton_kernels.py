"""Triton kernels for tests/test_triton.py, in an importable module (the workers import
it by name, as they do a user's module). Skipped where Triton is not installed."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

triton = pytest.importorskip("triton")

import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

#: Hopper (an H100/H200): compiles without a GPU.
TARGET = GPUTarget("cuda", 90, 32)

#: A constexpr that makes Triton's compiler abort (SIGABRT) in the process compiling.
ABORT = 13
#: One that makes it hang.
HANG = 17


@triton.constexpr_function  # type: ignore[untyped-decorator]
def checked(block: Any) -> Any:
    """Runs as the kernel compiles, in the process compiling it: a C-level abort (what a
    failed assertion in Triton's C++ does) for ``ABORT``, an endless compile for
    ``HANG``."""
    # getattr: Triton's dependency scan refuses a plain call of a Python function.
    if block == ABORT:
        getattr(os, "abort")()  # noqa: B009
    if block == HANG:
        getattr(time, "sleep")(3600)  # noqa: B009
    return block


@triton.constexpr_function  # type: ignore[untyped-decorator]
def slowly(seconds: Any) -> Any:
    """Makes a compile take ``seconds`` more."""
    getattr(time, "sleep")(seconds)  # noqa: B009
    return seconds


@triton.jit  # type: ignore[untyped-decorator]
def slow_kernel(x_ptr, DELAY: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.arange(0, 16)
    tl.store(x_ptr + offsets, tl.zeros((16,), tl.float32) + slowly(DELAY))


def slow(seconds: int) -> ASTSource:
    return ASTSource(slow_kernel, {"x_ptr": "*fp32", "DELAY": "constexpr"}, {"DELAY": seconds})


@triton.jit  # type: ignore[untyped-decorator]
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.program_id(0) * checked(BLOCK) + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@triton.jit  # type: ignore[untyped-decorator]
def undefined_kernel(x_ptr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, not_defined_anywhere(offsets))  # type: ignore[name-defined]  # noqa: F821


@triton.jit  # type: ignore[untyped-decorator]
def asserting_kernel(x_ptr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    tl.static_assert(BLOCK <= 64, "BLOCK must be at most 64")
    offsets = tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, offsets)


@triton.jit  # type: ignore[untyped-decorator]
def matmul_kernel(  # type: ignore[no-untyped-def]
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """Triton's tutorial matmul (fp16 in, fp32 accumulate, fp16 out)."""
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(tl.float16)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


ADD_SIGNATURE = {
    "x_ptr": "*fp32",
    "y_ptr": "*fp32",
    "out_ptr": "*fp32",
    "n": "i32",
    "BLOCK": "constexpr",
}
MATMUL_SIGNATURE = {
    "a_ptr": "*fp16",
    "b_ptr": "*fp16",
    "c_ptr": "*fp16",
    "M": "i32",
    "N": "i32",
    "K": "i32",
    "stride_am": "i32",
    "stride_ak": "constexpr",
    "stride_bk": "i32",
    "stride_bn": "constexpr",
    "stride_cm": "i32",
    "stride_cn": "constexpr",
    "BLOCK_M": "constexpr",
    "BLOCK_N": "constexpr",
    "BLOCK_K": "constexpr",
    "GROUP_M": "constexpr",
}


def add(block: int) -> ASTSource:
    return ASTSource(add_kernel, ADD_SIGNATURE, {"BLOCK": block})


def matmul(block_m: int, block_n: int, block_k: int = 32, group_m: int = 8) -> ASTSource:
    """A source of :func:`matmul_kernel` for contiguous row-major operands."""
    constexprs = {
        "stride_ak": 1,
        "stride_bn": 1,
        "stride_cn": 1,
        "BLOCK_M": block_m,
        "BLOCK_N": block_n,
        "BLOCK_K": block_k,
        "GROUP_M": group_m,
    }
    return ASTSource(matmul_kernel, MATMUL_SIGNATURE, constexprs)
