#!/usr/bin/env python3
"""Generate the built-in example kernels shipped in ``asynccomp/examples/*.cu``.

The examples stand in for what Apache TVM 0.27 hands to ``tvm_callback_cuda_compile`` while
MetaSchedule tunes a model for an H100 (``sm_90a``): one translation unit per candidate, each
starting with TVM's fixed preamble (the ``#ifdef __CUDACC_RTC__`` block that maps
``<cuda/std/...>`` into ``std``, the warp-shuffle fallbacks, the fp16 helpers, the
``TVM_ENABLE_L2_PREFETCH`` switch, the ``uint``/``uchar`` macros) followed by one or more
``extern "C" __global__ void __launch_bounds__(N) main_kernel(...)`` definitions written in
TVM's code style (``((int)threadIdx.x)`` indexing, ``_ptr`` buffer names, hex-float constants,
``alignas(64)`` local and shared buffers, unused ``cse_v`` temporaries, cp.async helpers).

The kernels are written from scratch by this script, not copied from TVM output, but the
preamble pieces are verbatim copies of what TVM emits, because they dominate NVRTC's work on
small kernels and later code in asynccomp recognises them.  The set covers:

* elementwise ops (add / relu / gelu / fma, float and half, scalar and vectorised),
* row reductions, softmax and layernorm with warp shuffles and shared-memory block reduction,
* tiled matmuls with shared memory, different block/thread tiles and ``k`` unroll factors
  (``#pragma unroll`` on the bigger ones), a cp.async multi-stage variant, fp16 and batched,
* shared-memory transposes and small direct conv2d kernels.

Output is deterministic: running the script twice writes byte-identical files.  Files are
named ``<stem>_<index>.cu``; stale files of that form in the output folder are removed, other
``.cu`` files there (such as real TVM output added by hand) are left alone.

Usage::

    python -m benchmarks.corpus.make_examples            # (re)write asynccomp/examples/*.cu
    python -m benchmarks.corpus.make_examples --check    # exit 1 if the files are out of date
    python -m benchmarks.corpus.make_examples --list     # print name, size and kernel count
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import REPO

DEFAULT_OUT = REPO / "asynccomp" / "examples"
#: File names this script writes (and may delete when they are no longer generated).
OWNED = re.compile(r"^[a-z0-9_]+_\d+\.cu$")

# --------------------------------------------------------------------------------------------
# Preamble pieces, verbatim from TVM 0.27's CUDA codegen.
# --------------------------------------------------------------------------------------------

#: Always emitted first.  Every TVM 0.27 kernel starts with exactly these bytes.
RTC_PRELUDE = r"""
#ifdef __CUDACC_RTC__
  #include <cuda/std/cstdint>
  using cuda::std::uint8_t;
  using cuda::std::uint16_t;
  using cuda::std::uint32_t;
  using cuda::std::uint64_t;
  using cuda::std::int8_t;
  using cuda::std::int16_t;
  using cuda::std::int32_t;
  using cuda::std::int64_t;

  #include <cuda/std/type_traits>
  namespace std {
    using cuda::std::is_same;
    using cuda::std::is_same_v;
    using cuda::std::is_integral;
    using cuda::std::is_signed;
    using cuda::std::is_unsigned;
    using cuda::std::is_floating_point;
    using cuda::std::enable_if;
    using cuda::std::conditional;
  }

  // NVRTC uses asm/volatile instead of __asm__/__volatile__ (gcc extension).
  #ifndef __asm__
  #define __asm__ asm
  #endif
  #ifndef __volatile__
  #define __volatile__ volatile
  #endif
#else
  #include <cstdint>
  #include <type_traits>
  #include <cuda.h>
#endif
"""

#: Emitted when a kernel uses ``half`` (TVM's "fp16" header tag).
FP16_HELPERS = r"""
#if !defined(__CUDA_ARCH__) || (__CUDA_ARCH__ >= 530)
#include <cuda_fp16.h>
__device__ half max(half a, half b)
{
  return __hgt(__half(a), __half(b)) ? a : b;
}
__device__ half min(half a, half b)
{
  return __hlt(__half(a), __half(b)) ? a : b;
}
#endif // __CUDA_ARCH__ >= 530

// Pack two half values.
static inline __device__ __host__ unsigned
__pack_half2(const half x, const half y) {
  unsigned v0 = *((unsigned short *)&x);
  unsigned v1 = *((unsigned short *)&y);
  return (v1 << 16) | v0;
}

#define CUDA_UNSUPPORTED_HALF_MATH_BINARY(HALF_MATH_NAME, FP32_MATH_NAME) \
static inline __device__ __host__ half HALF_MATH_NAME(half x, half y) {   \
  float tmp_x = __half2float(x);                                          \
  float tmp_y = __half2float(y);                                          \
  float result = FP32_MATH_NAME(tmp_x, tmp_y);                            \
  return __float2half(result);                                            \
}

#define CUDA_UNSUPPORTED_HALF_MATH_UNARY(HALF_MATH_NAME, FP32_MATH_NAME) \
static inline __device__ __host__ half HALF_MATH_NAME(half x) {          \
  float tmp_x = __half2float(x);                                         \
  float result = FP32_MATH_NAME(tmp_x);                                  \
  return __float2half(result);                                           \
}

// Some fp16 math functions are not supported in cuda_fp16.h,
// so we define them here to make sure the generated CUDA code
// is valid.
#if defined(__CUDA_ARCH__)
#if (__CUDA_ARCH__ >= 530)
CUDA_UNSUPPORTED_HALF_MATH_BINARY(hpow, powf)
#if ((__CUDACC_VER_MAJOR__ < 12) || ((__CUDACC_VER_MAJOR__ == 12) && (__CUDACC_VER_MINOR__ < 8)))
CUDA_UNSUPPORTED_HALF_MATH_UNARY(htanh, tanhf)
#endif
CUDA_UNSUPPORTED_HALF_MATH_UNARY(htan, tanf)
CUDA_UNSUPPORTED_HALF_MATH_UNARY(hatan, atanf)
CUDA_UNSUPPORTED_HALF_MATH_UNARY(herf, erf)
#else
CUDA_UNSUPPORTED_HALF_MATH_UNARY(hexp, exp)
#endif
#endif

#undef CUDA_UNSUPPORTED_HALF_MATH_BINARY
#undef CUDA_UNSUPPORTED_HALF_MATH_UNARY

template <typename T, typename TVec2>
struct __align__(8) half4_bfloat164 {
  T x, y, z, w;
  __host__ __device__ half4_bfloat164() : x(T(0)), y(T(0)), z(T(0)), w(T(0)) {}
  __host__ __device__ half4_bfloat164(T x, T y, T z, T w) : x(x), y(y), z(z), w(w) {}

};

using half4 = half4_bfloat164<__half, __half2>;
__host__ __device__ half4 make_half4(__half x, __half y, __half z, __half w) {
    return half4(x, y, z, w);
}
"""

#: Emitted when a kernel uses warp shuffles (TVM's "warp_shuffle" tag).
WARP_SHUFFLE = r"""
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 700)
#define __shfl_sync(mask, var, lane, width) \
        __shfl((var), (lane), (width))

#define __shfl_down_sync(mask, var, offset, width) \
        __shfl_down((var), (offset), (width))

#define __shfl_up_sync(mask, var, offset, width) \
        __shfl_up((var), (offset), (width))
#endif
"""

#: Always emitted, right before the function declarations.
PRELUDE_TAIL = r"""
#if (((__CUDACC_VER_MAJOR__ == 11) && (__CUDACC_VER_MINOR__ >= 4)) || \
     (__CUDACC_VER_MAJOR__ > 11))
#define TVM_ENABLE_L2_PREFETCH 1
#else
#define TVM_ENABLE_L2_PREFETCH 0
#endif

#ifdef _WIN32
  using uint = unsigned int;
  using uchar = unsigned char;
  using ushort = unsigned short;
  using int64_t = long long;
  using uint64_t = unsigned long long;
#else
  #define uint unsigned int
  #define uchar unsigned char
  #define ushort unsigned short
#endif
"""

#: Helper TVM declares when it lowers ``ptx_cp_async`` to inline PTX.
CAST_SMEM_PTR_TO_INT = r"""__forceinline__ __device__ unsigned int
cast_smem_ptr_to_int(const void* const smem_ptr)
{
  unsigned int smem_int;
  asm volatile ("{ .reg .u64 smem_int; cvta.to.shared.u64 smem_int, %1; cvt.u32.u64 %0, smem_int; }"
    : "=r"(smem_int) : "l"(smem_ptr));
  return smem_int;
}
"""

CP_ASYNC_COMMIT = r"""__forceinline__ __device__ void tvm_builtin_ptx_cp_async_commit_group_async_commit_group() {
  asm volatile("cp.async.commit_group;" :  : );
}
"""  # noqa: E501


def cp_async_wait_helper(n: int) -> str:
    """The ``cp.async.wait_group n`` helper TVM declares once per distinct ``n``."""
    return (
        f"__forceinline__ __device__ void tvm_builtin_ptx_cp_async_wait_group_async_wait_group_{n}"
        "() {\n"
        f'  asm volatile("cp.async.wait_group {n};" :  :  : "memory");\n'
        "}\n"
    )


def cp_async_wait(n: int) -> str:
    return f"tvm_builtin_ptx_cp_async_wait_group_async_wait_group_{n}();"


CP_ASYNC_COMMIT_CALL = "tvm_builtin_ptx_cp_async_commit_group_async_commit_group();"

# --------------------------------------------------------------------------------------------
# Expression helpers that print the way TVM's CodeGenC does: fully parenthesised, ``>>``/``&``
# for powers of two, ``((int)threadIdx.x)`` for thread indices.
# --------------------------------------------------------------------------------------------

Expr = str | int

TX = "((int)threadIdx.x)"
TY = "((int)threadIdx.y)"
BX = "((int)blockIdx.x)"


def _s(e: Expr) -> str:
    return str(e)


def add(*terms: Expr) -> str:
    """Left-folded sum, integer terms folded and put last: ``add(a, 1, b)`` -> ``((a + b) + 1)``."""
    const = sum(t for t in terms if isinstance(t, int))
    kept: list[Expr] = [t for t in terms if isinstance(t, str) and t != "0"]
    if const:
        kept.append(const)
    if not kept:
        return "0"
    if len(kept) == 1 and isinstance(kept[0], int):
        return str(kept[0])
    acc = _s(kept[0])
    for t in kept[1:]:
        acc = f"({acc} - {-t})" if isinstance(t, int) and t < 0 else f"({acc} + {t})"
    return acc


def mul(e: Expr, c: int) -> Expr:
    if c == 0:
        return 0
    if c == 1:
        return e
    if isinstance(e, int):
        return e * c
    return f"({e} * {c})"


def _is_pow2(c: int) -> bool:
    return c > 0 and (c & (c - 1)) == 0


def div(e: Expr, c: int) -> Expr:
    if c == 1:
        return e
    if isinstance(e, int):
        return e // c
    if _is_pow2(c):
        return f"({e} >> {int(math.log2(c))})"
    return f"({e} / {c})"


def mod(e: Expr, c: int) -> Expr:
    if c == 1:
        return 0
    if isinstance(e, int):
        return e % c
    if _is_pow2(c):
        return f"({e} & {c - 1})"
    return f"({e} % {c})"


def fimm(x: float) -> str:
    """A float32 literal as TVM prints it: ``0x1.8p+0f/*1.500000e+00*/``.

    Like TVM (``std::hexfloat`` of the FloatImm's double), the value is not rounded to
    float32 first: 0.044715 prints as ``0x1.6e4e26d4801f7p-5f/*4.471500e-02*/``.
    """
    if x == 0.0:
        body = "0x0p+0"
    else:
        sign = "-" if x < 0 else ""
        mant, _, exp = abs(x).hex().removeprefix("0x").partition("p")
        head, _, frac = mant.partition(".")
        frac = frac.rstrip("0")
        body = f"{sign}0x{head}{'.' + frac if frac else ''}p{exp}"
    return f"{body}f/*{x:.6e}*/"


def himm(x: float) -> str:
    """A half literal."""
    return f"__float2half_rn({fimm(x)})"


NEG_INF = -3.4028234663852886e38


# --------------------------------------------------------------------------------------------
# Kernel and module model.
# --------------------------------------------------------------------------------------------


class Writer:
    """Accumulates indented lines of a kernel body (two spaces per level, like TVM)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 1
        self._cse = 0

    def __call__(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def raw(self, text: str) -> None:
        """Append lines verbatim (no indentation), e.g. TVM's inline-asm blocks."""
        self.lines.extend(text.split("\n"))

    @contextmanager
    def block(self, head: str) -> Iterator[None]:
        """``head {`` ... ``}``; an empty head opens a bare scope like TVM's vector ops."""
        self(f"{head} {{" if head else "{")
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            self("}")

    def loop(self, var: str, extent: int, *, unroll: bool = False) -> AbstractContextManager[None]:
        if unroll:
            self("#pragma unroll")
        return self.block(f"for (int {var} = 0; {var} < {extent}; ++{var})")

    def cse(self, expr: Expr) -> None:
        """An unused common-subexpression temporary, as TVM 0.27 leaves them behind."""
        self._cse += 1
        self(f"int cse_v{self._cse} = {expr};")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


@dataclass
class Kernel:
    threads: int
    params: list[tuple[str, str]]  # (C type, name), sorted by name when rendered
    body: Writer

    def signature(self, name: str) -> str:
        ps = ", ".join(f"{t}* __restrict__ {n}" for t, n in sorted(self.params, key=lambda p: p[1]))
        return f'extern "C" __global__ void __launch_bounds__({self.threads}) {name}({ps})'


@dataclass
class Module:
    kernels: list[Kernel]
    fp16: bool = False
    shuffle: bool = False
    cp_async_waits: list[int] = field(default_factory=list)

    def render(self) -> str:
        parts = [RTC_PRELUDE]
        if self.fp16:
            parts.append(FP16_HELPERS)
        if self.shuffle:
            parts.append(WARP_SHUFFLE)
        parts.append(PRELUDE_TAIL)
        if self.cp_async_waits:
            parts.append(CAST_SMEM_PTR_TO_INT)
            parts.extend(cp_async_wait_helper(n) for n in self.cp_async_waits)
            parts.append(CP_ASYNC_COMMIT)
        names = ["main_kernel"] + [f"main_kernel_{i}" for i in range(1, len(self.kernels))]
        parts.extend(k.signature(n) + ";\n" for k, n in zip(self.kernels, names, strict=True))
        defs = [
            k.signature(n) + " {\n" + k.body.text() + "}\n"
            for k, n in zip(self.kernels, names, strict=True)
        ]
        parts.append("\n".join(defs) + "\n")
        return "".join(parts)


def cp_async(w: Writer, smem: str, gmem: str, nbytes: int = 16) -> None:
    """TVM's inline-PTX lowering of one ``ptx_cp_async`` (a 16-byte global->shared copy)."""
    kind = "cg" if nbytes == 16 else "ca"
    w.raw(
        "\n"
        "  {\n"
        f"    unsigned int addr = cast_smem_ptr_to_int({smem});\n"
        "    __asm__ __volatile__(\n"
        "      #if TVM_ENABLE_L2_PREFETCH\n"
        f'        "cp.async.{kind}.shared.global.L2::128B [%0], [%1], %2;"\n'
        "      #else\n"
        f'        "cp.async.{kind}.shared.global [%0], [%1], %2;"\n'
        "      #endif\n"
        f'        :: "r"(addr), "l"((void*)({gmem})), "n"({nbytes})\n'
        "    );\n"
        "  }"
    )


# --------------------------------------------------------------------------------------------
# Elementwise kernels.
# --------------------------------------------------------------------------------------------

_F4 = "xyzw"


def ewise_binary_f32(threads: int, op: str, vec: int) -> Module:
    """``T = A op B``, ``vec`` floats per thread through float2/float4."""
    w = Writer()
    idx = add(mul(BX, threads * vec), mul(TX, vec))
    vt = f"float{vec}"
    w(f"{vt} __1;")
    with w.block(""):
        w(f"{vt} __2 = *({vt}*)(A_ptr + {idx});")
        w(f"{vt} __3 = *({vt}*)(B_ptr + {idx});")
        for lane in _F4[:vec]:
            w(f"__1.{lane} = (__2.{lane}{op}__3.{lane});")
    w(f"*({vt}*)(T_out_ptr + {idx}) = __1;")
    return Module(
        [Kernel(threads, [("float", "A_ptr"), ("float", "B_ptr"), ("float", "T_out_ptr")], w)]
    )


def ewise_relu_f32(n: int, threads: int) -> Module:
    w = Writer()
    idx = add(mul(BX, threads), TX)
    if n % threads:
        with w.block(f"if ({idx} < {n})"):
            w(f"T_relu_ptr[{idx}] = max(A_ptr[{idx}], {fimm(0.0)});")
    else:
        w(f"T_relu_ptr[{idx}] = max(A_ptr[{idx}], {fimm(0.0)});")
    return Module([Kernel(threads, [("float", "A_ptr"), ("float", "T_relu_ptr")], w)])


def ewise_gelu_f32(n: int, threads: int, per_thread: int) -> Module:
    """Exact (erf) GELU, ``per_thread`` strided elements per thread."""
    w = Writer()
    blocks_stride = n // per_thread
    with w.loop("i0_fused_0", per_thread):
        idx = add(mul("i0_fused_0", blocks_stride), mul(BX, threads), TX)
        w.cse(idx)
        a = f"A_ptr[{idx}]"
        w(
            f"T_gelu_ptr[{idx}] = (({a} * {fimm(0.5)}) * ({fimm(1.0)} + "
            f"erff(({a} * {fimm(0.7071067811865476)}))));"
        )
    return Module([Kernel(threads, [("float", "A_ptr"), ("float", "T_gelu_ptr")], w)])


def ewise_fma_f32(threads: int) -> Module:
    """``T = A * B + C`` through float2 vectors."""
    w = Writer()
    idx = add(mul(BX, threads * 2), mul(TX, 2))
    w("float2 __1;")
    with w.block(""):
        w("float2 __2;")
        with w.block(""):
            w(f"float2 __3 = *(float2*)(A_ptr + {idx});")
            w(f"float2 __4 = *(float2*)(B_ptr + {idx});")
            for lane in "xy":
                w(f"__2.{lane} = (__3.{lane}*__4.{lane});")
        w(f"float2 __5 = *(float2*)(C_ptr + {idx});")
        for lane in "xy":
            w(f"__1.{lane} = (__2.{lane}+__5.{lane});")
    w(f"*(float2*)(T_fma_ptr + {idx}) = __1;")
    params = [("float", "A_ptr"), ("float", "B_ptr"), ("float", "C_ptr"), ("float", "T_fma_ptr")]
    return Module([Kernel(threads, params, w)])


def _h(vec: str, i: int) -> str:
    """Element ``i`` of a half vector stored as ``uintN`` (TVM's ``PrintVecElemLoad``)."""
    return f"((half2*)(&({vec}.{_F4[i // 2]})))->{_F4[i % 2]}"


def ewise_add_f16(threads: int, vec: int) -> Module:
    """``T = A + B`` over halves, ``vec`` (4 or 8) halves per thread through uint2/uint4."""
    w = Writer()
    ut = f"uint{vec // 2}"
    idx = add(mul(BX, threads * vec), mul(TX, vec))
    w(f"{ut} __1;")
    with w.block(""):
        w(f"{ut} __2 = *({ut}*)(A_ptr + {idx});")
        w(f"{ut} __3 = *({ut}*)(B_ptr + {idx});")
        for i in range(vec):
            w(f"{_h('__1', i)} = ({_h('__2', i)}+{_h('__3', i)});")
    w(f"*({ut}*)(T_add_ptr + {idx}) = __1;")
    return Module(
        [Kernel(threads, [("half", "A_ptr"), ("half", "B_ptr"), ("half", "T_add_ptr")], w)],
        fp16=True,
    )


def ewise_gelu_f16(threads: int, per_thread: int) -> Module:
    """Erf GELU on halves using TVM's ``herf`` helper."""
    w = Writer()
    with w.loop("i0_i1_fused_0", per_thread):
        idx = add(mul(BX, threads * per_thread), mul("i0_i1_fused_0", threads), TX)
        a = f"A_ptr[{idx}]"
        w(
            f"T_gelu_ptr[{idx}] = (({a} * {himm(0.5)}) * ({himm(1.0)} + "
            f"herf(({a} * {himm(0.7071067811865476)}))));"
        )
    return Module([Kernel(threads, [("half", "A_ptr"), ("half", "T_gelu_ptr")], w)], fp16=True)


def ewise_bias_relu_f16(cols: int, threads: int) -> Module:
    """``T = max(A + bias[col], 0)`` on a half matrix with ``cols`` columns."""
    w = Writer()
    per_block = threads * 4
    idx = add(mul(BX, per_block), mul("ax0_ax1_fused_1", threads), TX)
    with w.loop("ax0_ax1_fused_1", 4, unroll=True):
        w.cse(mod(idx, cols))
        w(f"T_relu_ptr[{idx}] = max((A_ptr[{idx}] + B_ptr[{mod(idx, cols)}]), {himm(0.0)});")
    params = [("half", "A_ptr"), ("half", "B_ptr"), ("half", "T_relu_ptr")]
    return Module([Kernel(threads, params, w)], fp16=True)


# --------------------------------------------------------------------------------------------
# Reductions.
# --------------------------------------------------------------------------------------------

ReduceOp = Callable[[str, str], str]


def op_sum(a: str, b: str) -> str:
    return f"({a} + {b})"


def op_max(a: str, b: str) -> str:
    return f"max({a}, {b})"


def _sfx(tag: str) -> str:
    return "" if tag == "0" else f"_{tag}"


def warp_reduce(
    w: Writer, bufs: list[tuple[str, ReduceOp]], width: int, mask: str, tag: str
) -> None:
    """TVM's butterfly ``__shfl_down_sync`` reduction over ``width`` lanes, then broadcast."""
    m = f"mask{_sfx(tag)}_ptr"
    w(f"{m}[0] = {mask};")
    off = width // 2
    while off >= 1:
        for i, (buf, op) in enumerate(bufs):
            t = f"t{i}{_sfx(tag)}_ptr"
            w(f"{t}[0] = __shfl_down_sync({m}[0], {buf}[0], {off}, 32);")
            w(f"{buf}[0] = {op(f'{buf}[0]', f'{t}[0]')};")
        off //= 2
    for buf, _ in bufs:
        w(f"{buf}[0] = __shfl_sync({m}[0], {buf}[0], 0, 32);")


def block_reduce(
    w: Writer,
    threads: int,
    items: list[tuple[str, ReduceOp, str]],
    tag: str,
) -> list[str]:
    """Reduce per-thread values across the block; returns the shared scalars holding results.

    ``items`` are ``(in_thread_expr, op, result_name)``.  One warp: shuffle only.  Several
    warps: shuffle, stage warp partials in shared memory, shuffle again in warp 0.
    """
    bufs: list[tuple[str, ReduceOp]] = []
    for i, (_, op, _name) in enumerate(items):
        w(f"alignas(64) float t{i}{_sfx(tag)}_ptr[1];")
        bufs.append((f"red_buf{i}_{tag}_ptr", op))
    w(f"alignas(64) uint mask{_sfx(tag)}_ptr[1];")
    for (expr, _, _), (buf, _) in zip(items, bufs, strict=True):
        w(f"{buf}[0] = {expr};")
    warps = max(1, threads // 32)
    warp_reduce(w, bufs, min(32, threads), "__activemask()", tag)
    outs = [name for _, _, name in items]
    if warps > 1:
        with w.block(f"if (({TX} % 32) == 0)"):
            for buf, _ in bufs:
                w(f"{buf.removesuffix('_ptr')}_1_ptr[{div(TX, 32)}] = {buf}[0];")
        w("__syncthreads();")
        with w.block(f"if ({TX} < 32)"):
            with w.block(f"if ({TX} < {warps})"):
                for buf, _ in bufs:
                    w(f"{buf}[0] = {buf.removesuffix('_ptr')}_1_ptr[{TX}];")
            mask = f"(__activemask() & ((uint){(1 << warps) - 1}))"
            warp_reduce(w, bufs, warps, mask, tag)
    with w.block(f"if ({TX} == 0)"):
        for (buf, _), name in zip(bufs, outs, strict=True):
            w(f"{name}[0] = {buf}[0];")
    w("__syncthreads();")
    return [f"{name}[0]" for name in outs]


def declare_reduce_bufs(w: Writer, threads: int, tag: str, count: int, names: list[str]) -> None:
    warps = max(1, threads // 32)
    for i in range(count):
        w(f"alignas(64) float red_buf{i}_{tag}_ptr[1];")
        if warps > 1:
            w(f"__shared__ alignas(64) float red_buf{i}_{tag}_1_ptr[{warps}];")
    for name in names:
        w(f"__shared__ alignas(64) float {name}[1];")


def rownorm(cols: int, threads: int) -> Module:
    """``D[row] = sqrt(sum(A[row, :]^2))``, one block per row (the NRM workload's shape)."""
    w = Writer()
    w("alignas(64) float in_thread_C_shared_ptr[1];")
    declare_reduce_bufs(w, threads, "0", 1, ["C_shared_ptr"])
    w(f"in_thread_C_shared_ptr[0] = {fimm(0.0)};")
    with w.loop("ax1_fused_0", cols // threads):
        a = f"A_ptr[{add(mul(BX, cols), mul('ax1_fused_0', threads), TX)}]"
        w(f"in_thread_C_shared_ptr[0] = (in_thread_C_shared_ptr[0] + ({a} * {a}));")
    (res,) = block_reduce(w, threads, [("in_thread_C_shared_ptr[0]", op_sum, "C_shared_ptr")], "0")
    with w.block(f"if ({TX} < 1)"):
        w(f"D_ptr[{BX}] = sqrtf({res});")
    return Module([Kernel(threads, [("float", "A_ptr"), ("float", "D_ptr")], w)], shuffle=True)


def rowsum(cols: int, threads: int, unroll: bool) -> Module:
    w = Writer()
    w("alignas(64) float in_thread_A_red_shared_ptr[1];")
    declare_reduce_bufs(w, threads, "0", 1, ["A_red_shared_ptr"])
    w(f"in_thread_A_red_shared_ptr[0] = {fimm(0.0)};")
    with w.loop("k1_0", cols // threads, unroll=unroll):
        a = f"A_ptr[{add(mul(BX, cols), mul('k1_0', threads), TX)}]"
        w(f"in_thread_A_red_shared_ptr[0] = (in_thread_A_red_shared_ptr[0] + {a});")
    (res,) = block_reduce(
        w, threads, [("in_thread_A_red_shared_ptr[0]", op_sum, "A_red_shared_ptr")], "0"
    )
    with w.block(f"if ({TX} == 0)"):
        w(f"A_red_ptr[{BX}] = {res};")
    return Module([Kernel(threads, [("float", "A_ptr"), ("float", "A_red_ptr")], w)], shuffle=True)


def softmax_two_kernels(cols: int, rows_per_block: int, threads2: int) -> Module:
    """The SFM layout: kernel 0 finds each row's max, kernel 1 does exp-sum and normalise."""
    w0 = Writer()
    row = add(mul(BX, rows_per_block), TX)
    w0.cse(row)
    w0(f"T_softmax_maxelem_ptr[{row}] = {fimm(NEG_INF)};")
    with w0.loop("k", cols):
        w0(
            f"T_softmax_maxelem_ptr[{row}] = max(T_softmax_maxelem_ptr[{row}], "
            f"A_ptr[{add(mul(BX, rows_per_block * cols), mul(TX, cols), 'k')}]);"
        )
    k0 = Kernel(rows_per_block, [("float", "A_ptr"), ("float", "T_softmax_maxelem_ptr")], w0)

    w1 = Writer()
    w1("alignas(64) float in_thread_T_softmax_expsum_shared_ptr[1];")
    declare_reduce_bufs(w1, threads2, "0", 1, ["T_softmax_expsum_shared_ptr"])
    w1(f"in_thread_T_softmax_expsum_shared_ptr[0] = {fimm(0.0)};")
    w1.cse(mul(BX, cols))
    with w1.loop("ax1_0", cols // threads2):
        a = f"A_ptr[{add(mul(BX, cols), mul('ax1_0', threads2), TX)}]"
        w1(
            "in_thread_T_softmax_expsum_shared_ptr[0] = "
            "(in_thread_T_softmax_expsum_shared_ptr[0] + "
            f"expf(({a} - T_softmax_maxelem_ptr[{BX}])));"
        )
    (res,) = block_reduce(
        w1,
        threads2,
        [("in_thread_T_softmax_expsum_shared_ptr[0]", op_sum, "T_softmax_expsum_shared_ptr")],
        "0",
    )
    with w1.loop("i1_0", cols // threads2):
        idx = add(mul(BX, cols), mul("i1_0", threads2), TX)
        w1(
            f"T_softmax_norm_ptr[{idx}] = (expf((A_ptr[{idx}] - T_softmax_maxelem_ptr[{BX}])) "
            f"/ {res});"
        )
    params1 = [
        ("float", "A_ptr"),
        ("float", "T_softmax_maxelem_ptr"),
        ("float", "T_softmax_norm_ptr"),
    ]
    k1 = Kernel(threads2, params1, w1)
    return Module([k0, k1], shuffle=True)


def softmax_fused(cols: int, threads: int, dtype: str, unroll: bool) -> Module:
    """Single-kernel softmax: row cached in registers, block max, block exp-sum, normalise."""
    w = Writer()
    per = cols // threads
    load: Callable[[str], str] = (lambda e: f"((float){e})") if dtype == "half" else (lambda e: e)
    store: Callable[[str], str] = (lambda e: f"((half){e})") if dtype == "half" else (lambda e: e)
    w(f"alignas(64) float A_local_ptr[{per}];")
    declare_reduce_bufs(w, threads, "0", 1, ["T_softmax_maxelem_shared_ptr"])
    declare_reduce_bufs(w, threads, "1", 1, ["T_softmax_expsum_shared_ptr"])
    w("alignas(64) float in_thread_T_softmax_maxelem_shared_ptr[1];")
    w("alignas(64) float in_thread_T_softmax_expsum_shared_ptr[1];")
    with w.loop("ax1_0", per, unroll=unroll):
        src = f"A_ptr[{add(mul(BX, cols), mul('ax1_0', threads), TX)}]"
        w(f"A_local_ptr[ax1_0] = {load(src)};")
    w(f"in_thread_T_softmax_maxelem_shared_ptr[0] = {fimm(NEG_INF)};")
    with w.loop("k_0", per, unroll=unroll):
        w(
            "in_thread_T_softmax_maxelem_shared_ptr[0] = "
            "max(in_thread_T_softmax_maxelem_shared_ptr[0], A_local_ptr[k_0]);"
        )
    (mx,) = block_reduce(
        w,
        threads,
        [("in_thread_T_softmax_maxelem_shared_ptr[0]", op_max, "T_softmax_maxelem_shared_ptr")],
        "0",
    )
    w(f"in_thread_T_softmax_expsum_shared_ptr[0] = {fimm(0.0)};")
    with w.loop("k_0_1", per, unroll=unroll):
        w(
            "in_thread_T_softmax_expsum_shared_ptr[0] = (in_thread_T_softmax_expsum_shared_ptr[0]"
            f" + __expf((A_local_ptr[k_0_1] - {mx})));"
        )
    (sm,) = block_reduce(
        w,
        threads,
        [("in_thread_T_softmax_expsum_shared_ptr[0]", op_sum, "T_softmax_expsum_shared_ptr")],
        "1",
    )
    with w.loop("i1_0", per, unroll=unroll):
        idx = add(mul(BX, cols), mul("i1_0", threads), TX)
        w(f"T_softmax_norm_ptr[{idx}] = {store(f'(__expf((A_local_ptr[i1_0] - {mx})) / {sm})')};")
    params = [(dtype, "A_ptr"), (dtype, "T_softmax_norm_ptr")]
    return Module([Kernel(threads, params, w)], fp16=dtype == "half", shuffle=True)


def layernorm(cols: int, threads: int, dtype: str) -> Module:
    """Row layernorm: one tuple reduction (sum, sum of squares), then scale and shift."""
    w = Writer()
    per = cols // threads
    load: Callable[[str], str] = (lambda e: f"((float){e})") if dtype == "half" else (lambda e: e)
    store: Callable[[str], str] = (lambda e: f"((half){e})") if dtype == "half" else (lambda e: e)
    declare_reduce_bufs(
        w, threads, "0", 2, ["A_red_temp_v0_shared_ptr", "A_red_temp_v1_shared_ptr"]
    )
    w("alignas(64) float in_thread_A_red_temp_v0_shared_ptr[1];")
    w("alignas(64) float in_thread_A_red_temp_v1_shared_ptr[1];")
    w(f"in_thread_A_red_temp_v0_shared_ptr[0] = {fimm(0.0)};")
    w(f"in_thread_A_red_temp_v1_shared_ptr[0] = {fimm(0.0)};")
    with w.loop("k1_0", per):
        a = load(f"A_ptr[{add(mul(BX, cols), mul('k1_0', threads), TX)}]")
        w(f"float v_A_red_temp_v0 = (in_thread_A_red_temp_v0_shared_ptr[0] + {a});")
        w(f"float v_A_red_temp_v1 = (in_thread_A_red_temp_v1_shared_ptr[0] + ({a} * {a}));")
        w("in_thread_A_red_temp_v0_shared_ptr[0] = v_A_red_temp_v0;")
        w("in_thread_A_red_temp_v1_shared_ptr[0] = v_A_red_temp_v1;")
    s0, s1 = block_reduce(
        w,
        threads,
        [
            ("in_thread_A_red_temp_v0_shared_ptr[0]", op_sum, "A_red_temp_v0_shared_ptr"),
            ("in_thread_A_red_temp_v1_shared_ptr[0]", op_sum, "A_red_temp_v1_shared_ptr"),
        ],
        "0",
    )
    inv_n = fimm(1.0 / cols)
    mean = f"({s0} * {inv_n})"
    var = f"(({s1} * {inv_n}) - ({mean} * {mean}))"
    with w.loop("ax1_0", per):
        col = add(mul("ax1_0", threads), TX)
        idx = add(mul(BX, cols), col)
        x = load(f"A_ptr[{idx}]")
        y = (
            f"((((({x} - {mean}) * rsqrtf(({var} + {fimm(1e-5)}))) * {load(f'gamma_ptr[{col}]')})"
            f" + {load(f'beta_ptr[{col}]')}))"
        )
        w(f"T_layer_norm_ptr[{idx}] = {store(y)};")
    params = [
        (dtype, "A_ptr"),
        (dtype, "T_layer_norm_ptr"),
        (dtype, "beta_ptr"),
        (dtype, "gamma_ptr"),
    ]
    return Module([Kernel(threads, params, w)], fp16=dtype == "half", shuffle=True)


# --------------------------------------------------------------------------------------------
# Tiled matmul.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gemm:
    """``C[b] = A[b] @ B[b]`` with ``A: M x K``, ``B: K x N`` (row major)."""

    m: int
    n: int
    k: int
    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    unroll: int  # copies of the k_1 body written out; > 1 also puts #pragma unroll on i/j
    pragma_k: bool = False  # also #pragma unroll the k_1 loop
    explicit: bool = False  # write every (k_1, i, j) FMA out, no loops (MetaSchedule's
    #                         unroll_explicit); ``unroll`` is then just the name tag
    stages: int = 1  # > 1: cp.async multi-stage pipeline
    dtype: str = "float"
    batch: int = 1


def _gemm_load(
    w: Writer,
    g: Gemm,
    threads: int,
    smem: str,
    gmem: str,
    rows: int,
    cols: int,
    goff: Expr,
    gstride: int,
    soff: Expr,
    tag: str,
) -> None:
    """Cooperatively copy a ``rows x cols`` tile into shared memory with 16-byte vectors."""
    vec = 16 // (4 if g.dtype == "float" else 2)
    vt = "float4" if g.dtype == "float" else "uint4"
    total = rows * cols // vec
    iters = max(1, total // threads)
    assert total < threads or total % threads == 0, (rows, cols, threads)
    var = f"ax0_ax1_fused_0{tag}"

    def one(it: Expr) -> None:
        e = add(mul(it, threads * vec), mul(TX, vec))
        r, c = div(e, cols), mod(e, cols)
        s_ix = add(soff, e)
        g_ix = add(goff, mul(r, gstride), c)
        if g.stages > 1:
            cp_async(w, f"{smem} + {s_ix}", f"{gmem} + {g_ix}")
        else:
            w(f"*({vt}*)({smem} + {s_ix}) = *({vt}*)({gmem} + {g_ix});")

    if total < threads:
        with w.block(f"if ({TX} < {total})"):
            one(0)
    elif iters == 1:
        one(0)
    else:
        with w.loop(var, iters):
            one(var)


def matmul(g: Gemm) -> Module:
    w = Writer()
    tiles_n = g.n // g.bn
    tiles = (g.m // g.bm) * tiles_n
    tx_n = g.bn // g.tn
    threads = (g.bm // g.tm) * tx_n
    kt = g.k // g.bk
    a_tile, b_tile = g.bm * g.bk, g.bk * g.bn
    cvt: Callable[[str], str] = (lambda e: f"((float){e})") if g.dtype == "half" else (lambda e: e)
    out_t = g.dtype

    w(f"alignas(64) float C_local_ptr[{g.tm * g.tn}];")
    w(f"__shared__ alignas(64) {g.dtype} A_shared_ptr[{a_tile * g.stages}];")
    w(f"__shared__ alignas(64) {g.dtype} B_shared_ptr[{b_tile * g.stages}];")
    with w.loop("i_3_init", g.tm), w.loop("j_3_init", g.tn):
        w(f"C_local_ptr[{add(mul('i_3_init', g.tn), 'j_3_init')}] = {fimm(0.0)};")

    blk = div(BX, tiles) if g.batch > 1 else 0
    tile = mod(BX, tiles) if g.batch > 1 else BX
    bm_i, bn_i = div(tile, tiles_n), mod(tile, tiles_n)
    ty, tx = div(TX, tx_n), mod(TX, tx_n)
    a_base = add(mul(blk, g.m * g.k), mul(bm_i, g.bm * g.k))
    b_base = add(mul(blk, g.k * g.n), mul(bn_i, g.bn))
    w.cse(a_base)
    w.cse(b_base)

    def loads(k0: Expr, stage: Expr, tag: str) -> None:
        _gemm_load(
            w,
            g,
            threads,
            "A_shared_ptr",
            "A_ptr",
            g.bm,
            g.bk,
            add(a_base, mul(k0, g.bk)),
            g.k,
            mul(stage, a_tile),
            "_a" + tag,
        )
        _gemm_load(
            w,
            g,
            threads,
            "B_shared_ptr",
            "B_ptr",
            g.bk,
            g.bn,
            add(b_base, mul(k0, g.bk * g.n)),
            g.n,
            mul(stage, b_tile),
            "_b" + tag,
        )

    def compute(stage: Expr, tag: str) -> None:
        k1 = f"k_1{tag}"
        i3, j3 = f"i_3{tag}", f"j_3{tag}"
        steps = g.bk // g.unroll
        pr = g.unroll > 1

        def inner(kk: Expr) -> None:
            with w.loop(i3, g.tm, unroll=pr), w.loop(j3, g.tn, unroll=pr):
                for u in range(g.unroll):
                    kidx = add(mul(kk, g.unroll), u) if steps > 1 else u
                    a = f"A_shared_ptr[{add(mul(stage, a_tile), mul(ty, g.tm * g.bk), mul(i3, g.bk), kidx)}]"  # noqa: E501
                    b = f"B_shared_ptr[{add(mul(stage, b_tile), mul(kidx, g.bn), mul(tx, g.tn), j3)}]"  # noqa: E501
                    c = f"C_local_ptr[{add(mul(i3, g.tn), j3)}]"
                    w(f"{c} = ({c} + ({cvt(a)} * {cvt(b)}));")

        def explicit() -> None:
            for kk in range(g.bk):
                for i in range(g.tm):
                    for j in range(g.tn):
                        a = f"A_shared_ptr[{add(mul(stage, a_tile), mul(ty, g.tm * g.bk), i * g.bk + kk)}]"  # noqa: E501
                        b = f"B_shared_ptr[{add(mul(stage, b_tile), mul(tx, g.tn), kk * g.bn + j)}]"
                        c = f"C_local_ptr[{i * g.tn + j}]"
                        w(f"{c} = ({c} + ({cvt(a)} * {cvt(b)}));")

        if g.explicit:
            explicit()
        elif steps > 1:
            with w.loop(k1, steps, unroll=g.pragma_k):
                inner(k1)
        else:
            inner(0)

    if g.stages == 1:
        with w.loop("k_0", kt):
            w("__syncthreads();")
            loads("k_0", 0, "")
            w("__syncthreads();")
            compute(0, "")
    else:
        s = g.stages
        for p in range(s - 1):
            loads(p, p, f"_{p}")
            w(CP_ASYNC_COMMIT_CALL)
        main = kt - (s - 1)
        with w.loop("k_0_fused", main):
            w.cse(mod(add("k_0_fused", s - 1), s))
            w("__syncthreads();")
            loads(add("k_0_fused", s - 1), mod(add("k_0_fused", s - 1), s), "_2")
            w(CP_ASYNC_COMMIT_CALL)
            w(cp_async_wait(s - 1))
            w("__syncthreads();")
            compute(mod("k_0_fused", s), "")
        for e in range(s - 1):
            w(cp_async_wait(s - 2 - e))
            w("__syncthreads();")
            compute((main + e) % s, f"_{e + 1}")

    with w.loop("ax1", g.tm), w.loop("ax2", g.tn):
        row = add(mul(bm_i, g.bm), mul(ty, g.tm), "ax1")
        col = add(mul(bn_i, g.bn), mul(tx, g.tn), "ax2")
        idx = add(mul(blk, g.m * g.n), mul(row, g.n), col)
        v = f"C_local_ptr[{add(mul('ax1', g.tn), 'ax2')}]"
        w(f"C_ptr[{idx}] = {'((half)' + v + ')' if out_t == 'half' else v};")

    params = [(g.dtype, "A_ptr"), (g.dtype, "B_ptr"), (out_t, "C_ptr")]
    waits = list(range(g.stages)) if g.stages > 1 else []
    return Module([Kernel(threads, params, w)], fp16=g.dtype == "half", cp_async_waits=waits)


# --------------------------------------------------------------------------------------------
# Transpose and conv2d.
# --------------------------------------------------------------------------------------------


def transpose(n: int, tile: int, rows: int, dtype: str) -> Module:
    """``T[j, i] = A[i, j]`` through a padded ``tile x (tile + 1)`` shared buffer."""
    w = Writer()
    pitch = tile + 1
    nt = n // tile
    w(f"__shared__ alignas(64) {dtype} A_shared_ptr[{tile * pitch}];")
    bi, bj = div(BX, nt), mod(BX, nt)
    with w.loop("ax0_0", tile // rows):
        r = add(mul("ax0_0", rows), TY)
        w(
            f"A_shared_ptr[{add(mul(r, pitch), TX)}] = "
            f"A_ptr[{add(mul(bi, tile * n), mul(r, n), mul(bj, tile), TX)}];"
        )
    w("__syncthreads();")
    with w.loop("ax0_0_1", tile // rows):
        r = add(mul("ax0_0_1", rows), TY)
        w(
            f"T_transpose_ptr[{add(mul(bj, tile * n), mul(r, n), mul(bi, tile), TX)}] = "
            f"A_shared_ptr[{add(mul(TX, pitch), r)}];"
        )
    params = [(dtype, "A_ptr"), (dtype, "T_transpose_ptr")]
    return Module([Kernel(tile * rows, params, w)], fp16=dtype == "half")


@dataclass(frozen=True)
class Conv:
    """NHWC 3x3 stride-1 pad-1 conv, HWIO weights, batch 1."""

    h: int
    w: int
    ci: int
    co: int
    th: int  # output tile rows per block
    tw: int  # output tile cols per block
    cob: int  # output channels per block
    ct: int  # output channels per thread
    rc: int  # input-channel chunk staged in shared memory


def conv2d(c: Conv) -> Module:
    w = Writer()
    ph, pw = c.th + 2, c.tw + 2
    n_tw, n_co = c.w // c.tw, c.co // c.cob
    threads = c.th * c.tw * (c.cob // c.ct)
    pad_elems = ph * pw * c.rc
    w_elems = 9 * c.rc * c.cob
    w(f"alignas(64) float conv2d_nhwc_local_ptr[{c.ct}];")
    w(f"__shared__ alignas(64) float PadInput_shared_ptr[{pad_elems}];")
    w(f"__shared__ alignas(64) float weight_shared_ptr[{w_elems}];")
    with w.loop("co_4_init", c.ct):
        w(f"conv2d_nhwc_local_ptr[co_4_init] = {fimm(0.0)};")
    b_co = mod(BX, n_co)
    b_tw = mod(div(BX, n_co), n_tw)
    b_th = div(BX, n_co * n_tw)
    pix = div(TX, c.cob // c.ct)
    t_co = mod(TX, c.cob // c.ct)
    oh, ow = div(pix, c.tw), mod(pix, c.tw)
    w.cse(mul(b_th, c.th))
    w.cse(mul(b_tw, c.tw))
    with w.loop("rc_0", c.ci // c.rc):
        w("__syncthreads();")
        iters = -(-pad_elems // threads)
        with w.loop("ax0_ax1_ax2_fused_0", iters):
            e = add(mul("ax0_ax1_ax2_fused_0", threads), TX)
            with w.block(f"if ({e} < {pad_elems})"):
                r = div(e, pw * c.rc)
                q = mod(div(e, c.rc), pw)
                ch = mod(e, c.rc)
                gh = add(mul(b_th, c.th), r, -1)
                gw = add(mul(b_tw, c.tw), q, -1)
                w("float condval;")
                cond = f"((((0 <= {gh}) && ({gh} < {c.h})) && (0 <= {gw})) && ({gw} < {c.w}))"
                with w.block(f"if {cond}"):
                    src = add(mul(gh, c.w * c.ci), mul(gw, c.ci), mul("rc_0", c.rc), ch)
                    w(f"condval = inputs_ptr[{src}];")
                with w.block("else"):
                    w(f"condval = {fimm(0.0)};")
                w(f"PadInput_shared_ptr[{e}] = condval;")
        w_iters = -(-w_elems // threads)
        with w.loop("ax0_ax1_ax2_ax3_fused_0", w_iters):
            e = add(mul("ax0_ax1_ax2_ax3_fused_0", threads), TX)
            with w.block(f"if ({e} < {w_elems})"):
                rs = div(e, c.rc * c.cob)
                ch = mod(div(e, c.cob), c.rc)
                o = mod(e, c.cob)
                src = add(
                    mul(rs, c.ci * c.co),
                    mul("rc_0", c.rc * c.co),
                    mul(ch, c.co),
                    mul(b_co, c.cob),
                    o,
                )
                w(f"weight_shared_ptr[{e}] = weight_ptr[{src}];")
        w("__syncthreads();")
        pi = add(mul(add(oh, "rh_2"), pw * c.rc), mul(add(ow, "rw_2"), c.rc), "rc_1")
        wi = add(
            mul("rh_2", 3 * c.rc * c.cob),
            mul("rw_2", c.rc * c.cob),
            mul("rc_1", c.cob),
            mul(t_co, c.ct),
            "co_4",
        )
        acc = "conv2d_nhwc_local_ptr[co_4]"
        with (
            w.loop("rc_1", c.rc),
            w.loop("rh_2", 3),
            w.loop("rw_2", 3, unroll=True),
            w.loop("co_4", c.ct, unroll=True),
        ):
            w(f"{acc} = ({acc} + (PadInput_shared_ptr[{pi}] * weight_shared_ptr[{wi}]));")
    with w.loop("ax3", c.ct):
        gh = add(mul(b_th, c.th), oh)
        gw = add(mul(b_tw, c.tw), ow)
        dst = add(mul(gh, c.w * c.co), mul(gw, c.co), mul(b_co, c.cob), mul(t_co, c.ct), "ax3")
        w(f"conv2d_nhwc_ptr[{dst}] = conv2d_nhwc_local_ptr[ax3];")
    params = [("float", "conv2d_nhwc_ptr"), ("float", "inputs_ptr"), ("float", "weight_ptr")]
    return Module([Kernel(threads, params, w)])


# --------------------------------------------------------------------------------------------
# The example set.
# --------------------------------------------------------------------------------------------


def _gemm_stem(g: Gemm) -> str:
    prefix = "matmul" if g.batch == 1 else f"bmm{g.batch}"
    dt = "_f16" if g.dtype == "half" else ""
    st = f"_s{g.stages}" if g.stages > 1 else ""
    ex = "_explicit" if g.explicit else ""
    return f"{prefix}{dt}_{g.bm}x{g.bn}{st}_u{g.unroll}{ex}"


def example_modules() -> list[tuple[str, Module]]:
    """``(stem, module)`` pairs in generation order; the file name is ``{stem}_{index}.cu``."""
    gemms = [
        Gemm(512, 512, 512, bm=32, bn=32, bk=16, tm=2, tn=2, unroll=1),
        Gemm(1024, 1024, 1024, bm=64, bn=64, bk=16, tm=4, tn=4, unroll=1),
        Gemm(1024, 1024, 1024, bm=64, bn=64, bk=16, tm=4, tn=4, unroll=4),
        Gemm(1024, 1024, 1024, bm=64, bn=128, bk=8, tm=4, tn=8, unroll=2),
        Gemm(1024, 1024, 1024, bm=128, bn=64, bk=16, tm=8, tn=4, unroll=4),
        Gemm(2048, 2048, 2048, bm=128, bn=128, bk=8, tm=8, tn=8, unroll=8),
        Gemm(2048, 2048, 2048, bm=128, bn=128, bk=32, tm=8, tn=8, unroll=16, pragma_k=True),
        Gemm(2048, 2048, 2048, bm=128, bn=128, bk=32, tm=8, tn=8, unroll=32),
        Gemm(2048, 2048, 2048, bm=256, bn=128, bk=16, tm=16, tn=8, unroll=16),
        Gemm(1024, 1024, 1024, bm=64, bn=64, bk=16, tm=4, tn=4, unroll=4, stages=2),
        Gemm(2048, 2048, 2048, bm=128, bn=128, bk=16, tm=8, tn=8, unroll=8, stages=3),
        Gemm(1024, 1024, 1024, bm=64, bn=64, bk=32, tm=4, tn=4, unroll=4, dtype="half"),
        Gemm(128, 128, 128, bm=64, bn=64, bk=16, tm=4, tn=4, unroll=2, batch=16),
        Gemm(1024, 1024, 1024, bm=64, bn=64, bk=16, tm=4, tn=4, unroll=16, explicit=True),
        Gemm(2048, 2048, 2048, bm=128, bn=128, bk=16, tm=8, tn=8, unroll=16, explicit=True),
    ]
    mods: list[tuple[str, Module]] = [
        ("ewise_add_f32", ewise_binary_f32(256, "+", 4)),
        ("ewise_relu_f32", ewise_relu_f32(200_000, 1024)),
        ("ewise_gelu_f32", ewise_gelu_f32(1 << 19, 512, 2)),
        ("ewise_fma_f32", ewise_fma_f32(128)),
        ("ewise_add_f16", ewise_add_f16(256, 8)),
        ("ewise_gelu_f16", ewise_gelu_f16(256, 4)),
        ("ewise_bias_relu_f16", ewise_bias_relu_f16(768, 256)),
        ("rownorm_4096", rownorm(4096, 32)),
        ("rowsum_1024", rowsum(1024, 256, unroll=True)),
        ("softmax_128", softmax_two_kernels(128, 128, 32)),
        ("softmax_256", softmax_fused(256, 256, "float", unroll=False)),
        ("softmax_1024", softmax_fused(1024, 128, "float", unroll=True)),
        ("softmax_512_f16", softmax_fused(512, 64, "half", unroll=True)),
        ("layernorm_256", layernorm(256, 64, "float")),
        ("layernorm_768", layernorm(768, 256, "float")),
        ("layernorm_1024_f16", layernorm(1024, 128, "half")),
        *((_gemm_stem(g), matmul(g)) for g in gemms),
        ("transpose_1024", transpose(1024, 32, 8, "float")),
        ("transpose_2048_f16", transpose(2048, 64, 4, "half")),
        ("conv2d_14x14_c32k64", conv2d(Conv(14, 14, 32, 64, th=7, tw=14, cob=16, ct=4, rc=8))),
        ("conv2d_28x28_c16k32", conv2d(Conv(28, 28, 16, 32, th=4, tw=28, cob=32, ct=8, rc=4))),
    ]
    return mods


def render_all() -> dict[str, str]:
    """``{file name: source}`` for every example."""
    return {f"{stem}_{i}.cu": m.render() for i, (stem, m) in enumerate(example_modules())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
    ap.add_argument("--check", action="store_true", help="only check the files are up to date")
    ap.add_argument("--list", action="store_true", help="list the examples and exit")
    args = ap.parse_args(argv)
    files = render_all()
    if args.list:
        for name, src in files.items():
            print(f"{name:40s} {len(src):8d} B  {src.count('__global__') // 2} kernel(s)")
        print(f"{len(files)} files, {sum(len(s) for s in files.values())} bytes")
        return 0
    out: Path = args.out
    # Only names this script produces (``<stem>_<index>.cu``) are ours to prune; other .cu
    # files in the folder (e.g. real TVM output copied there by hand) are left alone.
    existing = {p.name for p in out.glob("*.cu") if OWNED.match(p.name)} if out.is_dir() else set()
    if args.check:
        stale = sorted(existing - files.keys())
        bad = [n for n, s in files.items() if not (out / n).is_file() or (out / n).read_text() != s]
        for n in stale + bad:
            print(f"out of date: {out / n}", file=sys.stderr)
        return 1 if stale or bad else 0
    out.mkdir(parents=True, exist_ok=True)
    for n in sorted(existing - files.keys()):
        (out / n).unlink()
    for n, s in files.items():
        p = out / n
        if not p.is_file() or p.read_text() != s:
            p.write_text(s, encoding="ascii", newline="\n")
    print(f"wrote {len(files)} examples ({sum(len(s) for s in files.values())} bytes) to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
