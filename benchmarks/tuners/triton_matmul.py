"""The matmul of benchmarks/tuners/triton_sweep.py: Triton's tutorial kernel (fp16 in, fp32
accumulate, fp16 out) and its configurations, in a module of its own (the workers import
it by name). Imports Triton."""

from __future__ import annotations

import itertools
from typing import Any

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

#: An H100/H200.
TARGET = GPUTarget("cuda", 90, 32)


@triton.jit  # type: ignore[untyped-decorator]
def matmul_kernel(  # type: ignore[no-untyped-def]  # Triton reads the annotations
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


def configs(count: int) -> list[triton.Config]:
    """``count`` (at most 64) configurations: block_M, block_N in {64, 128}, block_K in
    {32, 64}, 3 or 4 stages, 4 or 8 warps, GROUP_M 1 or 8 (the first ``count`` of that
    grid, spread over it)."""
    grid = [
        triton.Config(
            {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group},
            num_stages=stages,
            num_warps=warps,
        )
        for bm, bn, bk, stages, warps, group in itertools.product(
            (64, 128), (64, 128), (32, 64), (3, 4), (4, 8), (1, 8)
        )
    ]
    if not 1 <= count <= len(grid):
        raise ValueError(f"--configs must be 1 to {len(grid)}")
    step = len(grid) / count
    return [grid[int(i * step)] for i in range(count)]


def sources(count: int, size: int) -> tuple[list[ASTSource], list[dict[str, Any]]]:
    """The compiles of ``count`` configurations as the JIT makes them for contiguous
    ``size``-square fp16 operands (unit strides specialized to constants, the other
    integers and the pointers known to be multiples of 16): sources and options."""
    signature = {
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
    divisible = [["tt.divisibility", 16]]
    aligned = (0, 1, 2, 3, 4, 5, 6, 8, 10) if size % 16 == 0 else (0, 1, 2)
    attrs = {(i,): divisible for i in aligned}
    out_sources, out_options = [], []
    for config in configs(count):
        constexprs = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, **config.kwargs}
        out_sources.append(ASTSource(matmul_kernel, signature, constexprs, attrs))
        out_options.append({"num_warps": config.num_warps, "num_stages": config.num_stages})
    return out_sources, out_options
