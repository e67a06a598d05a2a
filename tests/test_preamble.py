"""The TVM preamble fast path (asynccomp.preamble), checked against real NVRTC.

The kernels under tests/data/preamble/ are two real TVM 0.27 kernels (a norm and a
softmax) and one hand-written kernel in TVM's style whose code depends on all eight
names of TVM's ``namespace std`` block and includes cuda_fp16.h after the preamble.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from asynccomp.preamble import TVM_TYPE_TRAITS_BLOCK, TYPE_TRAITS_SHIM, rewrite_tvm_preamble

from .nvrtc_flags import without_nvrtc_cache
from .sass import cuobjdump, sass

DATA = Path(__file__).parent / "data" / "preamble"
KERNELS = ("nrm_0_000.cu", "sfm_0_000.cu", "traits_fp16_kernel.cu")
ARCH = "sm_90a"
NAMES = (
    "is_same",
    "is_same_v",
    "is_integral",
    "is_signed",
    "is_unsigned",
    "is_floating_point",
    "enable_if",
    "conditional",
)

# TVM 0.27's NVRTC options after the include folders (tvm.contrib.nvcc + its callers).
TVM_OPTIONS_TAIL = (
    "-D__NV_SILENCE_DEPRECATION_BEGIN=",
    "-D__NV_SILENCE_DEPRECATION_END=",
    "-D__NV_SILENCE_HOST_DEPRECATION_BEGIN=",
    "-D__NV_SILENCE_HOST_DEPRECATION_END=",
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT162_OPERATORS__",
    "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
    "--use_fast_math",
    "--ptxas-options=-v",
    "--ptxas-options=--register-usage-level=10",
    "--ptxas-options=--warn-on-local-memory-usage",
)


def kernel(name: str) -> str:
    return (DATA / name).read_text()


# --------------------------------------------------------------------------- NVRTC helpers


@functools.cache
def wheel_include_dirs() -> tuple[str, ...]:
    """cudart + CCCL headers from NVIDIA's wheels, or skip."""
    try:
        from cuda import pathfinder
    except ImportError:
        pytest.skip("cuda-pathfinder is not installed")
    dirs = []
    for name in ("cudart", "cccl"):
        found = pathfinder.find_nvidia_header_directory(name)
        if not found:
            pytest.skip(f"cuda-pathfinder finds no {name} headers (nvidia-cuda-runtime/-cccl)")
        dirs.append(str(found))
    return tuple(dirs)


def toolkit_include_dirs() -> tuple[str, ...] | None:
    """The CUDA toolkit's own headers (another CCCL version), when there is a toolkit."""
    from asynccomp.toolkit import find_toolkit

    dirs = tuple(str(d) for d in find_toolkit().include_dirs)
    has_cccl = any((Path(d) / "cuda" / "std" / "type_traits").is_file() for d in dirs)
    if not has_cccl or set(dirs) == set(wheel_include_dirs()):
        return None
    return dirs


def tvm_options(include_dirs: Sequence[str], *extra: str, int128: bool = True) -> list[str]:
    return [
        f"--gpu-architecture={ARCH}",
        "-default-device",
        *(["--device-int128"] if int128 else []),
        *(f"-I{d}" for d in include_dirs),
        *TVM_OPTIONS_TAIL,
        *extra,
    ]


@dataclass(frozen=True)
class Compiled:
    ok: bool
    log: str
    cubin: bytes


def nvrtc_compile(source: str, options: Sequence[str]) -> Compiled:
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        pytest.skip("cuda-bindings (NVRTC) is not installed")
    success = nvrtc.nvrtcResult.NVRTC_SUCCESS
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"tvm_kernels.cu", 0, None, None)
    assert err == success
    try:
        # NVRTC's own cache stays out of it: a hit there has no ptxas report to compare.
        opts = [o.encode() for o in without_nvrtc_cache(list(options))]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        text = log.rstrip(b"\0").decode(errors="replace")
        if err != success:
            return Compiled(False, text, b"")
        _, size = nvrtc.nvrtcGetCUBINSize(prog)
        cubin = b" " * size
        nvrtc.nvrtcGetCUBIN(prog, cubin)
        return Compiled(True, text, cubin)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


_DIAGNOSTIC = re.compile(r"^(?P<file>\S[^(]*)\((?P<line>\d+)\): (?:warning|error|remark)\b")


def kernel_diagnostics(log: str, filename: str = "tvm_kernels.cu") -> list[str]:
    """What the fast path promises identical: the diagnostics located in the kernel's
    own file (each with its excerpt and caret lines), the error count, and every ptxas
    line but its compile time and the module's dead-constant gmem size. Diagnostics
    inside the headers the original source includes may differ (CUDA 13.0's
    ``cuda_fp8.hpp`` warns #1444-D when ``<cuda/std/type_traits>`` is included; the
    fast path does not include it)."""
    kept: list[str] = []
    own = False
    for line in log.splitlines():
        found = _DIAGNOSTIC.match(line)
        if found is not None:
            own = found["file"] == filename
        elif not line.strip():
            own = False
        if line.startswith("ptxas"):
            if "Compile time =" not in line:
                kept.append(re.sub(r"\b\d+ bytes gmem\b", "N bytes gmem", line))
        elif own or re.search(r"errors? detected in the compilation", line):
            kept.append(line)
    return kept


# --------------------------------------------------------------------------- the rewrite


@pytest.mark.parametrize("name", KERNELS)
def test_rewrite_replaces_exactly_the_block(name: str) -> None:
    source = kernel(name)
    rewritten = rewrite_tvm_preamble(source)
    assert rewritten is not None
    assert "#include <cuda/std/type_traits>" not in rewritten
    assert "using cuda::std::is_same;" not in rewritten
    assert TYPE_TRAITS_SHIM in rewritten
    # Same number of lines, and every line outside the block is unchanged and in place.
    old, new = source.split("\n"), rewritten.split("\n")
    assert len(old) == len(new)
    first = old.index("  #include <cuda/std/type_traits>")
    n = TVM_TYPE_TRAITS_BLOCK.count("\n")
    assert old[:first] == new[:first]
    assert old[first + n :] == new[first + n :]
    assert "\n".join(new[first : first + n]) + "\n" == TYPE_TRAITS_SHIM + "\n" * (
        n - TYPE_TRAITS_SHIM.count("\n")
    )
    # The <cuda/std/cstdint> part and the #else branch are untouched.
    assert "  #include <cuda/std/cstdint>\n  using cuda::std::uint8_t;" in rewritten
    assert "#else\n  #include <cstdint>\n  #include <type_traits>\n" in rewritten
    # Applying it twice finds nothing more to do.
    assert rewrite_tvm_preamble(rewritten) is None


def test_rewrite_allows_later_std_declarations_and_headers() -> None:
    """Code after the preamble may reopen std or include CUDA headers (as TVM's fp16
    kernels do); only cuda::std uses after the block turn the rewrite off."""
    base = kernel("nrm_0_000.cu")
    later = base + "namespace std { template <class T> struct tvm_tag {}; }\n"
    assert rewrite_tvm_preamble(later) is not None
    assert rewrite_tvm_preamble("#include <cuda/barrier>\n" + base) is not None


def test_shim_defines_only_the_eight_names() -> None:
    assert TYPE_TRAITS_SHIM.count("\n") <= TVM_TYPE_TRAITS_BLOCK.count("\n") == 11
    assert TYPE_TRAITS_SHIM.endswith("\n")
    std_part = TYPE_TRAITS_SHIM[TYPE_TRAITS_SHIM.index("namespace std {") :]
    declared = set(re.findall(r"\b(?:struct|bool) (\w+)\s*(?:[:{<=]|$)", std_part))
    assert declared == set(NAMES)
    for absent in ("enable_if_t", "conditional_t", "is_integral_v", "true_type", "remove_cv"):
        assert not re.search(rf"\b{absent}\b", std_part)
    assert "#include" not in TYPE_TRAITS_SHIM


def _mutations() -> list[tuple[str, str]]:
    """(id, source) pairs that must not be rewritten."""
    base = kernel("nrm_0_000.cu")
    block = TVM_TYPE_TRAITS_BLOCK
    first_line = "  #include <cuda/std/type_traits>\n"
    cases = {
        "no-preamble": 'extern "C" __global__ void k(float* x) { x[0] = 1.0f; }\n',
        "empty": "",
        "name-missing": base.replace("    using cuda::std::is_signed;\n", ""),
        "extra-name": base.replace(
            "    using cuda::std::conditional;\n",
            "    using cuda::std::conditional;\n    using cuda::std::conditional_t;\n",
        ),
        "names-reordered": base.replace(
            "    using cuda::std::is_signed;\n    using cuda::std::is_unsigned;\n",
            "    using cuda::std::is_unsigned;\n    using cuda::std::is_signed;\n",
        ),
        "other-indent": base.replace(block, block.replace("    using", "\tusing")),
        "trailing-space": base.replace("  namespace std {\n", "  namespace std { \n"),
        "blank-line-after-include": base.replace(first_line, first_line + "\n"),
        "crlf": base.replace("\n", "\r\n"),
        "not-in-rtc-branch": base.replace("#ifdef __CUDACC_RTC__\n", "#ifndef __CUDACC_RTC__\n"),
        "not-after-cstdint": base.replace(
            "  using cuda::std::int64_t;\n\n", "  using cuda::std::int64_t;\n"
        ),
        "block-alone": block + 'extern "C" __global__ void k() {}\n',
        "commented-out": base.replace("\n#ifdef __CUDACC_RTC__\n", "\n// #ifdef __CUDACC_RTC__\n"),
        "preamble-twice": base + base,
        "other-namespace-std": "namespace std { using cuda::std::is_same; }\n" + base,
        "cuda-std-used-after": base
        + "__device__ bool f() { return cuda::std::is_void_v<void>; }\n",
    }
    for key, source in cases.items():
        assert key in ("no-preamble", "empty", "block-alone") or source != base, key
    return list(cases.items())


@pytest.mark.parametrize(("case", "source"), _mutations(), ids=[c for c, _ in _mutations()])
def test_rewrite_refuses_anything_but_the_exact_preamble(case: str, source: str) -> None:
    assert rewrite_tvm_preamble(source) is None, case


def test_rewrite_is_fast_on_a_big_kernel() -> None:
    base = kernel("sfm_0_000.cu")
    body = base[base.index('extern "C"') :].replace("main_kernel", "k")
    source = base + "".join(body.replace("k(", f"k{i}(") for i in range(300))
    assert len(source) > 750_000
    best = float("inf")
    for _ in range(30):
        t0 = time.perf_counter()
        out = rewrite_tvm_preamble(source)
        best = min(best, time.perf_counter() - t0)
    assert out is not None
    assert best < 1e-3, f"rewrite took {best * 1e3:.3f} ms on {len(source) // 1024} KB"


# --------------------------------------------------------------------------- NVRTC proofs


@pytest.mark.parametrize("name", KERNELS)
def test_same_sass_and_diagnostics(name: str, tmp_path: Path) -> None:
    tool = cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not found (pip install nvidia-cuda-cuobjdump)")
    source = kernel(name)
    rewritten = rewrite_tvm_preamble(source)
    assert rewritten is not None
    options = tvm_options(wheel_include_dirs())
    original, shimmed = nvrtc_compile(source, options), nvrtc_compile(rewritten, options)
    assert original.ok, original.log
    assert shimmed.ok, shimmed.log
    sass_original = sass(original.cubin, tool, tmp_path)
    assert "Function : main_kernel" in sass_original
    assert sass(shimmed.cubin, tool, tmp_path) == sass_original
    # The kernel's own warnings (with their line numbers) and every ptxas resource line
    # are the same; the headers' own diagnostics may differ by toolkit.
    own = kernel_diagnostics(original.log)
    assert any("warning #177-D" in line for line in own)
    assert kernel_diagnostics(shimmed.log) == own


def test_the_kernels_diagnostics_leave_out_the_headers() -> None:
    """What the H200's CUDA 13.0 headers gave the original source only (#1444-D in
    cuda_fp8.hpp) is not the kernel's; the kernel's warning and ptxas' report are."""
    log = (
        "/usr/local/cuda/include/cuda_fp8.hpp(91): warning #1444-D: function was declared\n"
        "  __nv_cvt_float_to_fp8(const float x)\n"
        "  ^\n"
        "\n"
        'tvm_kernels.cu(12): warning #177-D: variable "x" was declared but never referenced\n'
        "    int x;\n"
        "        ^\n"
        "\n"
        'Remark: The warnings can be suppressed with "-diag-suppress <warning-number>"\n'
        "\n"
        "ptxas info    : 47 bytes gmem\n"
        "ptxas info    : Used 8 registers, used 0 barriers\n"
        "ptxas info    : Compile time = 1.234 ms\n"
    )
    assert kernel_diagnostics(log) == [
        'tvm_kernels.cu(12): warning #177-D: variable "x" was declared but never referenced',
        "    int x;",
        "        ^",
        "ptxas info    : N bytes gmem",
        "ptxas info    : Used 8 registers, used 0 barriers",
    ]


def test_errors_keep_their_line_numbers() -> None:
    source = kernel("nrm_0_000.cu").replace(
        "  __syncthreads();\n", "  __syncthreads();\n  undefined_name_42 = 1;\n"
    )
    rewritten = rewrite_tvm_preamble(source)
    assert rewritten is not None
    options = tvm_options(wheel_include_dirs())
    original, shimmed = nvrtc_compile(source, options), nvrtc_compile(rewritten, options)
    assert not original.ok and not shimmed.ok
    line = source.split("\n").index("  undefined_name_42 = 1;") + 1
    assert f"tvm_kernels.cu({line}): error" in original.log
    assert kernel_diagnostics(shimmed.log) == kernel_diagnostics(original.log)
    assert any(f"tvm_kernels.cu({line}): error" in d for d in kernel_diagnostics(shimmed.log))


def test_names_outside_the_eight_stay_undeclared() -> None:
    """std:: names that cuda::std has but TVM did not re-export fail alike, same lines."""
    uses = (
        "std::enable_if_t<true, int>",
        "std::conditional_t<true, int, float>",
        "std::true_type",
        "std::integral_constant<int, 1>",
        "std::remove_cv<const int>::type",
    )
    body = "".join(
        f"__device__ void use{i}() {{ {u} x{{}}; (void)x; }}\n" for i, u in enumerate(uses)
    )
    source = kernel("nrm_0_000.cu") + body
    rewritten = rewrite_tvm_preamble(source)
    assert rewritten is not None
    options = tvm_options(wheel_include_dirs())
    original, shimmed = nvrtc_compile(source, options), nvrtc_compile(rewritten, options)
    assert not original.ok and not shimmed.ok

    def error_lines(log: str) -> list[str]:
        return re.findall(r"tvm_kernels\.cu\((\d+)\): error", log)

    assert len(error_lines(original.log)) >= len(uses)
    assert error_lines(shimmed.log) == error_lines(original.log)


# Types the probe asks every trait about. Spelled as in C++; no commas.
PROBE_TYPES = (
    "int", "unsigned", "bool", "char", "signed char", "unsigned char", "wchar_t",
    "char16_t", "char32_t", "short", "unsigned short", "long", "unsigned long",
    "long long", "unsigned long long", "float", "double", "long double",
    "const int", "volatile unsigned", "const volatile bool", "const float",
    "volatile double", "const char", "const volatile long long",
    "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t",
    "uint64_t",
    "int*", "const int*", "int* const", "int&", "const int&", "int&&", "int[3]",
    "const int[2]", "int[]", "void", "const void", "volatile void", "int()",
    "int(*)(int)", "ProbeEnum", "ProbeScopedEnum", "ProbeStruct", "const ProbeStruct",
    "ProbeUnion", "ProbeStruct*", "int ProbeStruct::*", "void (ProbeStruct::*)()",
    "decltype(nullptr)", "ProbeIncomplete",
    "__half", "const __half", "__half2", "__nv_bfloat16", "volatile __nv_bfloat16",
    "__nv_bfloat162", "half",
)  # fmt: skip
INT128_TYPES = ("__int128", "unsigned __int128", "const __int128", "volatile unsigned __int128")
CHAR8_TYPES = ("char8_t", "const char8_t")
UNARY = ("is_integral", "is_signed", "is_unsigned", "is_floating_point")


def probe_source() -> str:
    """static_asserts that the shim's std:: traits equal cuda::std's for PROBE_TYPES.

    The shim comes first (as in a rewritten kernel), cuda_fp16/cuda_bf16 after it, and
    <cuda/std/type_traits> last, so both sets of traits live in one translation unit.
    """

    def per_type(t: str) -> str:
        lines = [
            f"static_assert(std::{trait}<{t}>::value == cuda::std::{trait}<{t}>::value,"
            f' "{trait}<{t}>");'
            for trait in UNARY
        ]
        lines.append(f'static_assert(same_row<{t}, all_types>::value, "is_same<{t}, *>");')
        return "\n".join(lines)

    def block(types: Sequence[str]) -> str:
        return "\n".join(per_type(t) for t in types)

    return "\n".join(
        [
            "#include <cuda/std/cstdint>",
            "using cuda::std::int8_t; using cuda::std::uint8_t; using cuda::std::int16_t;",
            "using cuda::std::uint16_t; using cuda::std::int32_t; using cuda::std::uint32_t;",
            "using cuda::std::int64_t; using cuda::std::uint64_t;",
            TYPE_TRAITS_SHIM,
            "#include <cuda_fp16.h>",
            "#include <cuda_bf16.h>",
            "#include <cuda/std/type_traits>",
            "struct ProbeStruct { int m; void f(); }; union ProbeUnion { int a; float b; };",
            "enum ProbeEnum { probe_e0 }; enum class ProbeScopedEnum : unsigned { x };",
            "struct ProbeIncomplete;",
            "template <class... Ts> struct type_list {};",
            "template <class A, class L> struct same_row;",
            "template <class A, class... Ts> struct same_row<A, type_list<Ts...>> {",
            "  static constexpr bool value = ((std::is_same<A, Ts>::value ==",
            "      cuda::std::is_same<A, Ts>::value && std::is_same_v<A, Ts> ==",
            "      cuda::std::is_same_v<A, Ts>) && ...);",
            "};",
            "#if defined(__CUDACC_RTC_INT128__)",
            "#define PROBE_INT128 , " + ", ".join(INT128_TYPES),
            "#else",
            "#define PROBE_INT128",
            "#endif",
            "#if __cplusplus > 201703L",
            "#define PROBE_CHAR8 , " + ", ".join(CHAR8_TYPES),
            "#else",
            "#define PROBE_CHAR8",
            "#endif",
            f"using all_types = type_list<{', '.join(PROBE_TYPES)} PROBE_INT128 PROBE_CHAR8>;",
            block(PROBE_TYPES),
            "#if defined(__CUDACC_RTC_INT128__)",
            block(INT128_TYPES),
            'static_assert(std::is_integral<const __int128>::value, "int128 is integral");',
            'static_assert(std::is_unsigned<unsigned __int128>::value, "u128 is unsigned");',
            "#endif",
            "#if __cplusplus > 201703L",
            block(CHAR8_TYPES),
            'static_assert(std::is_integral<char8_t>::value, "char8_t is integral");',
            "#endif",
            # A few absolute answers, so that a bug shared by both sides would show too.
            'static_assert(std::is_integral<const volatile bool>::value, "cv bool");',
            'static_assert(!std::is_floating_point<__half>::value, "__half is not std fp");',
            "static_assert(!std::is_signed<__half>::value &&",
            '    !std::is_unsigned<__half>::value, "");',
            'static_assert(std::is_signed<float>::value && std::is_unsigned<bool>::value, "");',
            "static_assert(!std::is_signed<ProbeEnum>::value &&",
            '    !std::is_integral<int&>::value, "");',
            'static_assert(std::is_same_v<std::is_same<int, int>::value_type, bool>, "");',
            # integral_constant behaviour (what std::is_same<...>::value and friends offer).
            "static_assert(cuda::std::is_same_v<decltype(std::is_integral<int>::value),",
            '    decltype(cuda::std::is_integral<int>::value)>, "value is const bool");',
            "static_assert(std::is_integral<int>{} && std::is_integral<int>{}() &&",
            '    std::is_integral<int>::type::value && !std::is_same<int, long>{}, "");',
            "constexpr bool probe_bool = std::is_floating_point<double>{};",
            'static_assert(probe_bool, "conversion to bool");',
            # enable_if / conditional, including SFINAE on the missing ::type.
            "template <class T, class = void> struct has_type : cuda::std::false_type {};",
            "template <class T> struct has_type<T, cuda::std::void_t<typename T::type>>",
            "    : cuda::std::true_type {};",
            "static_assert(has_type<std::enable_if<true>>::value &&",
            "    !has_type<std::enable_if<false>>::value &&",
            "    !has_type<std::enable_if<false, int>>::value &&",
            "    has_type<cuda::std::enable_if<true>>::value &&",
            '    !has_type<cuda::std::enable_if<false, int>>::value, "enable_if SFINAE");',
            "static_assert(std::is_same_v<std::enable_if<true>::type, void> &&",
            '    std::is_same_v<std::enable_if<true, const int&>::type, const int&>, "");',
            "static_assert(std::is_same_v<std::conditional<true, int, float>::type, int> &&",
            "    std::is_same_v<std::conditional<false, int, float>::type, float> &&",
            "    std::is_same_v<std::conditional<(sizeof(int) > 2), int&, void>::type, int&>,",
            '    "conditional");',
            "template <class T> __device__ typename std::enable_if<std::is_integral<T>::value,",
            "    int>::type pick(T) { return 1; }",
            "template <class T> __device__ typename std::enable_if<!std::is_integral<T>::value,",
            "    int>::type pick(T) { return 2; }",
            'extern "C" __global__ void probe(int* out) {',
            "  out[0] = pick(1) + pick(1.0f) + pick(true) + pick(__half());",
            "  if constexpr (std::is_same_v<int32_t, int>) out[1] = 1;",
            "}",
            "",
        ]
    )


def _probe_variants() -> list[tuple[str, tuple[str, ...], bool]]:
    return [
        ("c++17+int128", (), True),
        ("c++17-no-int128", (), False),
        ("c++20+int128", ("-std=c++20",), True),
    ]


@pytest.mark.parametrize(
    ("variant", "extra", "int128"), _probe_variants(), ids=[v for v, _, _ in _probe_variants()]
)
def test_shim_traits_equal_cuda_std(variant: str, extra: tuple[str, ...], int128: bool) -> None:
    compiled = nvrtc_compile(
        probe_source(), tvm_options(wheel_include_dirs(), *extra, int128=int128)
    )
    assert compiled.ok, f"{variant}:\n{compiled.log}"


def test_shim_traits_equal_cuda_std_of_the_toolkit() -> None:
    """The same probe against the CUDA toolkit's own (older or newer) CCCL."""
    dirs = toolkit_include_dirs()
    if dirs is None:
        pytest.skip("no CUDA toolkit headers other than the wheels' to compare with")
    compiled = nvrtc_compile(probe_source(), tvm_options(dirs))
    assert compiled.ok, compiled.log
