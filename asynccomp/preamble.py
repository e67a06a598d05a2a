"""The TVM preamble fast path: compile TVM kernels without ``<cuda/std/type_traits>``.

Why this exists
---------------
Every CUDA source TVM 0.27 generates starts with the same preamble. Under
``#ifdef __CUDACC_RTC__`` it includes ``<cuda/std/cstdint>`` and then::

      #include <cuda/std/type_traits>
      namespace std {
        using cuda::std::is_same;
        ...                              (eight names in all)
        using cuda::std::conditional;
      }

That one include costs about 0.8 s of NVRTC front-end time per kernel (an empty kernel
with it takes 0.85 s, without it 0.04 s). NVRTC's front end handles one program at a time
per process, so in an autotuning sweep this include is most of the compile time, and
threads cannot hide it. The kernels only ever use the eight names the preamble re-exports
into ``std``, so :func:`rewrite_tvm_preamble` replaces the include and the
``namespace std`` block with :data:`TYPE_TRAITS_SHIM`, about 5 KB of direct definitions
of exactly those eight names. On the 60-kernel TVM corpus this cuts the summed NVRTC time
by about 2x (median per kernel 3-4x) and gives identical SASS
(``benchmarks/parity/fast_path_sass.py`` checks this).

What the shim promises
----------------------
The definitions follow CCCL's portable ``cuda::std`` ones, which are the ones CCCL uses
under NVRTC, since NVRTC has none of the ``__is_integral``/``__is_signed``/``__is_same``
builtins CCCL would otherwise use. So every query gives the same answer as ``cuda::std``:
``is_integral`` and ``is_floating_point`` strip cv first and cover exactly the types
CCCL lists (``bool``, the character types, the standard integers, ``__int128`` and
``unsigned __int128`` when CCCL enables them, i.e. NVRTC with ``--device-int128``, and
``char8_t`` in C++20; ``float``, ``double`` and ``long double``, but not ``__half``,
``__nv_bfloat16`` or other extended floating-point types, which ``cuda::std`` does not
count either). ``is_signed``/``is_unsigned`` are ``is_arithmetic && T(-1) < T(0)`` (resp.
``T(0) < T(-1)`` for integers), so false for enums, pointers and ``__half``.
``enable_if<B, T = void>`` and ``conditional<B, T, F>`` are the usual ones. The traits
derive from an ``integral_constant`` (``value`` of type ``const bool``, ``value_type``,
``type``, conversion to ``bool``, ``operator()``) in the reserved namespace
``__asynccomp_traits``. Only those eight names are added to ``std``: ``enable_if_t``,
``conditional_t`` and the like were not reachable through TVM's using-declarations, so
they are not declared here either. ``tests/test_preamble.py`` checks all eight against
``cuda::std`` with ``static_assert`` over some 70 types, with and without
``--device-int128`` and in C++20.

What still differs
------------------
Diagnostics: the kernel's own (those located in its file, with their line numbers) are
the same, and so is every line of ptxas' report; diagnostics inside the headers the
original source includes may differ by toolkit (CUDA 13.0's ``cuda_fp8.hpp``,
``cuda_fp6.hpp`` and ``cuda_fp4.hpp`` warn ``#1444-D`` once ``<cuda/std/type_traits>``
is included; the shim does not include it, so its log lacks them).

The SASS is the same, but the cubin bytes are not: with ``-default-device`` every
namespace-scope ``constexpr`` variable the headers define becomes a ``__device__``
constant in the cubin. CCCL leaves 47 bytes of such dead constants in every TVM kernel;
the shim keeps its per-type tables in class templates and leaves 2 bytes, so ptxas'
module line reads ``2 bytes gmem`` instead of ``47 bytes gmem``. Per-kernel resources
(registers, shared memory, stack, spills) are unchanged, and the symbol names of those
constants differ (``__asynccomp_traits::`` instead of ``cuda::std::__4::``).

When it applies
---------------
Matching is strict. The source must hold TVM's RTC preamble exactly once, byte for byte:
a line ``#ifdef __CUDACC_RTC__``, TVM's ``<cuda/std/cstdint>`` block, then the
type-traits include and the eight-name ``namespace std`` block, with TVM's whitespace
and ``\\n`` line ends. Anything else returns ``None`` and the caller compiles the
original source. ``None`` is also returned when the rewrite might not be safe:

* ``namespace std`` appears before the preamble (another block, such as the NVSHMEM
  prelude TVM's NVRTC path prepends, may already have put the same names into ``std``),
  or
* ``cuda::std`` appears after the block (the kernel may use other parts of
  ``<cuda/std/type_traits>``; this also catches a second copy of the preamble).

Line numbers
------------
They are kept. The 11 lines of the block are replaced by exactly 11 lines (the shim's
lines plus blank padding), so every line after the block keeps its number, and
diagnostics for the user's code point at the same lines as in the original source.

Switching it off
----------------
This module has no state and never runs by itself. The engine calls
:func:`rewrite_tvm_preamble` per job only while its preamble fast path is on; with it
off (or when this returns ``None``) the source is compiled unchanged. If a rewritten
source ever fails to compile, compiling the original gives the user NVRTC's real
diagnostics.
"""

from __future__ import annotations

__all__ = ("TVM_TYPE_TRAITS_BLOCK", "TYPE_TRAITS_SHIM", "rewrite_tvm_preamble")

_NAMES = (
    "is_same",
    "is_same_v",
    "is_integral",
    "is_signed",
    "is_unsigned",
    "is_floating_point",
    "enable_if",
    "conditional",
)

#: TVM 0.27's ``#ifdef __CUDACC_RTC__`` line and ``<cuda/std/cstdint>`` block, which come
#: right before the type-traits block.
_TVM_RTC_PREFIX = (
    "#ifdef __CUDACC_RTC__\n"
    "  #include <cuda/std/cstdint>\n"
    + "".join(
        f"  using cuda::std::{t};\n"
        for t in (
            "uint8_t",
            "uint16_t",
            "uint32_t",
            "uint64_t",
            "int8_t",
            "int16_t",
            "int32_t",
            "int64_t",
        )
    )
    + "\n"
)

#: The block that is replaced, exactly as TVM 0.27 emits it (11 lines, each ending in \n).
TVM_TYPE_TRAITS_BLOCK: str = (
    "  #include <cuda/std/type_traits>\n"
    "  namespace std {\n" + "".join(f"    using cuda::std::{name};\n" for name in _NAMES) + "  }\n"
)

_NS = "__asynccomp_traits"
_IC = f"{_NS}::integral_constant<bool, "

_INTEGRAL_TYPES = (
    "bool",
    "char",
    "signed char",
    "unsigned char",
    "wchar_t",
    "char16_t",
    "char32_t",
    "short",
    "unsigned short",
    "int",
    "unsigned int",
    "long",
    "unsigned long",
    "long long",
    "unsigned long long",
)


def _specialize(table: str, types: tuple[str, ...]) -> str:
    return " ".join(
        f"template <> struct {table}<{t}> : integral_constant<bool, true> {{}};" for t in types
    )


# One statement group per line; the lines are joined with \n below. The logic mirrors
# CCCL's portable (non-builtin) definitions in cuda/std/__type_traits/*.h. The per-type
# tables are class templates rather than CCCL's variable templates: with -default-device,
# every explicit specialization of a variable template becomes a __device__ variable that
# is emitted into the cubin (CCCL's cost 47 bytes of dead gmem per kernel), while these
# leave only integral_constant<bool, false/true>::value (2 bytes).
_SHIM_LINES = (
    # 1: a marker for whoever reads the source NVRTC saw.
    "  // asynccomp: direct definitions of the 8 names in place of <cuda/std/type_traits>"
    " (asynccomp/preamble.py)",
    # 2: integral_constant, remove_cv and the per-type tables.
    f"  namespace {_NS} {{"
    " template <class _Tp, _Tp __v> struct integral_constant {"
    " static constexpr const _Tp value = __v; using value_type = _Tp;"
    " using type = integral_constant;"
    " __host__ __device__ constexpr operator value_type() const noexcept { return value; }"
    " __host__ __device__ constexpr value_type operator()() const noexcept { return value; } };"
    " template <class _Tp> struct __remove_cv { using type = _Tp; };"
    " template <class _Tp> struct __remove_cv<const _Tp> { using type = _Tp; };"
    " template <class _Tp> struct __remove_cv<volatile _Tp> { using type = _Tp; };"
    " template <class _Tp> struct __remove_cv<const volatile _Tp> { using type = _Tp; };"
    " template <class _Tp> struct __integral : integral_constant<bool, false> {}; "
    + _specialize("__integral", _INTEGRAL_TYPES)
    + " template <class _Tp> struct __floating : integral_constant<bool, false> {}; "
    + _specialize("__floating", ("float", "double", "long double"))
    + " }",
    # 3-5: 128-bit integers, exactly when CCCL's _CCCL_HAS_INT128() holds under NVRTC.
    "  #if !defined(CCCL_DISABLE_INT128_SUPPORT) && (defined(__linux__) || defined(__LP64__))"
    " && (defined(__CUDACC_RTC_INT128__) || defined(__SIZEOF_INT128__))",
    f"  namespace {_NS} {{ " + _specialize("__integral", ("__int128", "unsigned __int128")) + " }",
    "  #endif",
    # 6-8: char8_t, exactly when CCCL's _CCCL_HAS_CHAR8_T() holds.
    "  #if __cplusplus > 201703L && defined(__cpp_char8_t) && __cpp_char8_t >= 201811L",
    f"  namespace {_NS} {{ " + _specialize("__integral", ("char8_t",)) + " }",
    "  #endif",
    # 9: the derived helpers.
    f"  namespace {_NS} {{"
    " template <class _Tp> struct __is_integral :"
    " __integral<typename __remove_cv<_Tp>::type> {};"
    " template <class _Tp> struct __is_floating_point :"
    " __floating<typename __remove_cv<_Tp>::type> {};"
    " template <class _Tp> struct __is_arithmetic : integral_constant<bool,"
    " __is_integral<_Tp>::value || __is_floating_point<_Tp>::value> {};"
    " template <class _Tp, bool = __is_integral<_Tp>::value>"
    " struct __is_signed_helper : integral_constant<bool, true> {};"
    " template <class _Tp> struct __is_signed_helper<_Tp, true> :"
    " integral_constant<bool, (_Tp(-1) < _Tp(0))> {};"
    " template <class _Tp, bool = __is_integral<_Tp>::value>"
    " struct __is_unsigned_helper : integral_constant<bool, false> {};"
    " template <class _Tp> struct __is_unsigned_helper<_Tp, true> :"
    " integral_constant<bool, (_Tp(0) < _Tp(-1))> {}; }",
    # 10: the eight names, and nothing else, in std.
    "  namespace std {"
    f" template <class _Tp, class _Up> struct is_same : {_IC}false> {{}};"
    f" template <class _Tp> struct is_same<_Tp, _Tp> : {_IC}true> {{}};"
    " template <class _Tp, class _Up> inline constexpr bool is_same_v = false;"
    " template <class _Tp> inline constexpr bool is_same_v<_Tp, _Tp> = true;"
    f" template <class _Tp> struct is_integral : {_IC}{_NS}::__is_integral<_Tp>::value> {{}};"
    f" template <class _Tp> struct is_signed : {_IC}{_NS}::__is_arithmetic<_Tp>::value"
    f" && {_NS}::__is_signed_helper<_Tp>::value> {{}};"
    f" template <class _Tp> struct is_unsigned : {_IC}{_NS}::__is_arithmetic<_Tp>::value"
    f" && {_NS}::__is_unsigned_helper<_Tp>::value> {{}};"
    " template <class _Tp> struct is_floating_point :"
    f" {_IC}{_NS}::__is_floating_point<_Tp>::value> {{}};"
    " template <bool, class _Tp = void> struct enable_if {};"
    " template <class _Tp> struct enable_if<true, _Tp> { using type = _Tp; };"
    " template <bool _Bp, class _If, class _Then> struct conditional { using type = _If; };"
    " template <class _If, class _Then> struct conditional<false, _If, _Then>"
    " { using type = _Then; }; }",
)

#: The replacement text: direct definitions of exactly the eight names inside
#: ``namespace std`` (plus helpers in ``__asynccomp_traits``), one line per group, each
#: line ending in ``\n``. Fewer lines than :data:`TVM_TYPE_TRAITS_BLOCK`; the rewrite pads.
TYPE_TRAITS_SHIM: str = "".join(line + "\n" for line in _SHIM_LINES)

_BLOCK_LINES = TVM_TYPE_TRAITS_BLOCK.count("\n")
_SHIM_LINE_COUNT = TYPE_TRAITS_SHIM.count("\n")
if _SHIM_LINE_COUNT > _BLOCK_LINES:  # pragma: no cover - a guard for future edits
    raise AssertionError("TYPE_TRAITS_SHIM must not have more lines than the block it replaces")
_REPLACEMENT = TYPE_TRAITS_SHIM + "\n" * (_BLOCK_LINES - _SHIM_LINE_COUNT)

_NEEDLE = _TVM_RTC_PREFIX + TVM_TYPE_TRAITS_BLOCK
_NEEDLE_REWRITTEN = _TVM_RTC_PREFIX + _REPLACEMENT


def rewrite_tvm_preamble(source: str) -> str | None:
    """Return the source with the type_traits include + the std using-block replaced by the
    shim, or None when the source does not contain TVM's preamble exactly (then callers
    compile the original).

    The result has as many lines as ``source``, and every line outside the replaced block
    is unchanged. ``None`` also means "not safe to rewrite": ``namespace std`` appears
    before the preamble, or ``cuda::std`` appears after the block (which includes a
    second copy of the preamble). Costs one ``str.find`` over the source and one
    ``str.replace``: about 0.5 ms on a 767 KB kernel.
    """
    start = source.find(_NEEDLE)
    if start < 0 or (start > 0 and source[start - 1] != "\n"):
        return None
    end = start + len(_NEEDLE)
    # A second preamble would also contain "cuda::std", so this catches it too. (A later
    # "namespace std" is not checked: declaring or specializing one of the eight names
    # there already fails against TVM's using-declarations, and anything else is
    # unaffected; skipping that scan keeps the rewrite well under a millisecond.)
    if source.find("cuda::std", end) >= 0 or source.find("namespace std", 0, start) >= 0:
        return None
    # str.replace builds the result in one pass; slicing and concatenating a large
    # source is several times slower. The first occurrence is the one at `start`.
    return source.replace(_NEEDLE, _NEEDLE_REWRITTEN, 1)
