"""TVM 0.27's CUDA compile, rendered: its source rewrite, its option lists, its arch.

Nothing here compiles. :func:`make_job` turns the arguments of TVM's
``tvm.support.nvcc.compile_cuda`` into the :class:`~asynccomp.CompileJob` that gives the
same binary: the same source text, the same program name (``tvm_kernels.cu``) and the
same options in the same order, passed verbatim (``exact_options=True``). Every constant
below is copied from TVM 0.27's ``python/tvm/support/nvcc.py``; where this module departs
from it on purpose, a comment says so.
"""

from __future__ import annotations

import functools
import os
import platform
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..job import Backend, CompileJob, OutputFormat, nvrtc_arch
from ..toolkit import locate_toolkit
from . import _nvshmem
from ._arch import ResolvedArch, resolve_arch

__all__ = (
    "RenderedJob",
    "dump_root_from_environment",
    "make_job",
    "nvcc_options",
    "nvrtc_options",
    "nvrtc_source",
    "ptx_with_terminator",
    "ptxas_flags",
    "render_job",
    "tvm_include_dirs",
    "uses_nvshmem",
)

# TVM's NVRTC path prepends this to every source.
NVRTC_PREAMBLE = """#include <cuda/std/cstdint>
using cuda::std::uint8_t;
using cuda::std::uint16_t;
using cuda::std::uint32_t;
using cuda::std::uint64_t;
using cuda::std::int8_t;
using cuda::std::int16_t;
using cuda::std::int32_t;
using cuda::std::int64_t;

// NVRTC uses asm/volatile instead of __asm__/__volatile__
#ifndef __asm__
#define __asm__ asm
#endif
#ifndef __volatile__
#define __volatile__ volatile
#endif

// NVRTC does not pull in the host <math.h>, so INFINITY is undefined. Provide it
// from libcu++ (same float +inf value nvcc's <math.h> yields).
#include <cuda/std/limits>
#ifndef INFINITY
#define INFINITY (::cuda::std::numeric_limits<float>::infinity())
#endif

"""

# cuda.h's CUtensorMap layout, which NVRTC lacks once ``#include <cuda.h>`` is dropped.
CUTENSORMAP_DECLARATION = (
    "struct alignas(64) CUtensorMap_st {\n"
    "  unsigned long long opaque[16];\n"
    "};\n"
    "typedef struct CUtensorMap_st CUtensorMap;\n\n"
)

# Prepended (before NVRTC_PREAMBLE) to NVSHMEM sources: NVSHMEM's headers use std:: traits.
NVSHMEM_NVRTC_PREAMBLE = """#include <cuda/std/type_traits>

// Map cuda::std type traits to std namespace for NVSHMEM headers
namespace std {
    using cuda::std::is_integral;
    using cuda::std::is_signed;
    using cuda::std::is_unsigned;
    using cuda::std::is_floating_point;
    using cuda::std::is_same;
    using cuda::std::enable_if;
    using cuda::std::conditional;
}

"""

SILENCE_DEPRECATION = (
    "-D__NV_SILENCE_DEPRECATION_BEGIN=",
    "-D__NV_SILENCE_DEPRECATION_END=",
    "-D__NV_SILENCE_HOST_DEPRECATION_BEGIN=",
    "-D__NV_SILENCE_HOST_DEPRECATION_END=",
)
NVSHMEM_NVRTC_DEFINES = (
    *SILENCE_DEPRECATION,
    "-D__CUDA_NO_FP8_CONVERSIONS__",
    "-D__CUDA_NO_FP6_CONVERSIONS__",
    "-D__CUDA_NO_FP4_CONVERSIONS__",
)
HALF_BFLOAT16_UNDEFINES = (
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT162_OPERATORS__",
    "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
)
# User options starting with these are nvcc-only; TVM drops them for NVRTC.
NVCC_ONLY_PREFIXES = (
    "-c",
    "-O",
    "-std",
    "--std",
    "-Xcompiler",
    "-Xlinker",
    "-Xarchive",
    "-Xcudafe",
    "-Xptxas",
    "--compile",
    "--compiler-options",
    "--linker-options",
    "-fPIC",
    "-shared",
    "-o",
)

_NVRTC_FATBIN_MESSAGE = (
    "NVRTC does not support fatbin generation yet. "
    "Use target_format='cubin' or 'ptx' with NVRTC, "
    "or set compiler='nvcc' for fatbin compilation."
)


# --------------------------------------------------------------------------- environment


def _shell_split(variable: str) -> list[str]:
    """``shlex.split`` of an environment variable; a quoting error names the variable."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return []
    try:
        return shlex.split(text)
    except ValueError as exc:  # TVM raises shlex's bare "No closing quotation"
        raise ValueError(f"{variable}={text!r} cannot be split like a shell: {exc}") from exc


def ptxas_flags() -> list[str]:
    """The ptxas flags TVM forwards (``-v``, ``$TVM_CUDA_PTXAS_REG_LEVEL``, extras).

    Values are passed on as TVM passes them, unchecked: a bad register level fails in
    ptxas, as it does in TVM (the failure message then names the variable).
    """
    flags = [
        "-v",
        f"--register-usage-level={os.environ.get('TVM_CUDA_PTXAS_REG_LEVEL', '10')}",
        "--warn-on-local-memory-usage",
    ]
    return flags + _shell_split("TVM_CUDA_PTXAS_EXTRA_OPTS")


def _user_options(options: object) -> list[str]:
    """TVM's accepted forms: one str, or a list of str (bytes are decoded, as TVM does).

    Tuples are accepted too (TVM refuses them, for no reason that matters here).
    """
    if not options:
        return []
    if isinstance(options, str):
        return [options]
    if isinstance(options, (list, tuple)):
        out = []
        for option in options:
            if isinstance(option, (bytes, bytearray)):
                option = bytes(option).decode()
            if not isinstance(option, str):
                raise ValueError(  # noqa: TRY004 - TVM's exception type
                    f"options must be str or list of str, got an item {option!r}"
                )
            out.append(option)
        return out
    raise ValueError(f"options must be str or list of str, got {type(options).__name__}")


# --------------------------------------------------------------------------- headers


def _target_include(cuda_path: str) -> Path | None:
    """TVM's ``targets/<triple>/include`` probe (``sbsa-linux`` first on Arm servers)."""
    machine = platform.machine()
    system = platform.system().lower()
    if system == "linux" and machine.lower() in ("aarch64", "arm64"):
        triples = ["sbsa-linux", f"{machine}-{system}"]
    else:
        triples = [f"{machine}-{system}"]
    for triple in triples:
        include_dir = Path(cuda_path) / "targets" / triple / "include"
        if include_dir.is_dir():
            return include_dir
    return None


@functools.lru_cache(maxsize=16)
def _include_dirs_of(cuda_path: str) -> tuple[str, ...]:
    dirs = []
    standard = Path(cuda_path) / "include"
    if standard.is_dir():
        dirs.append(standard)
    target = _target_include(cuda_path)
    if target is not None:
        dirs.append(target)
        if (target / "cccl").is_dir():
            dirs.append(target / "cccl")
    return tuple(str(d) for d in dirs)


def tvm_include_dirs() -> tuple[str, ...]:
    """NVRTC's ``-I`` folders as TVM lists them, from ``$CUDA_PATH`` when set (as TVM),
    else from the toolkit found once per process (TVM runs ``which nvcc`` per compile and
    misreads wrapper scripts), else the header wheels (TVM needs a toolkit; we do not)."""
    cuda_path = os.environ.get("CUDA_PATH")
    toolkit = locate_toolkit()
    if not cuda_path and toolkit.cuda_root is not None:
        cuda_path = str(toolkit.cuda_root)
    if cuda_path:
        dirs = _include_dirs_of(cuda_path)
    else:
        dirs = tuple(str(d) for d in toolkit.include_dirs)
        cuda_path = "(no CUDA toolkit; NVIDIA header wheels)"
    if not any((Path(d) / "cuda_runtime.h").is_file() for d in dirs):
        raise RuntimeError(
            f"Cannot find CUDA headers in {cuda_path}. "
            f"Searched in: {list(dirs)}. "
            "Please ensure CUDA is properly installed."
        )
    return dirs


# --------------------------------------------------------------------------- rendering


def nvrtc_source(code: str, nvshmem: bool) -> str:
    """TVM's NVRTC source: ``#include <cuda.h>`` lines dropped, ``CUtensorMap`` declared
    when used, the preamble (and NVSHMEM's) prepended."""
    filtered = "\n".join(
        line for line in code.splitlines() if line.strip() not in {"#include <cuda.h>"}
    )
    if "CUtensorMap" in filtered:
        filtered = CUTENSORMAP_DECLARATION + filtered
    filtered = NVRTC_PREAMBLE + filtered
    return NVSHMEM_NVRTC_PREAMBLE + filtered if nvshmem else filtered


def nvrtc_options(arch: str, user: Sequence[str], nvshmem_include: str | None = None) -> list[str]:
    """TVM's NVRTC option list, in TVM's order, for a final ``--gpu-architecture``."""
    options = [f"--gpu-architecture={arch}", "-default-device", "--device-int128"]
    if nvshmem_include is not None:
        options += ["-rdc", "true"]
    options += [f"-I{d}" for d in tvm_include_dirs()]
    if nvshmem_include is not None:
        options += [f"-I{nvshmem_include}", *NVSHMEM_NVRTC_DEFINES]
    options += [*SILENCE_DEPRECATION, *HALF_BFLOAT16_UNDEFINES, "--use_fast_math"]
    options += [f"--ptxas-options={flag}" for flag in ptxas_flags()]
    options += _shell_split("TVM_CUDA_NVRTC_EXTRA_OPTS")
    options += [o for o in user if not o.startswith(NVCC_ONLY_PREFIXES)]
    return options


def nvcc_options(
    output: str,
    arch_flags: Sequence[str],
    user: Sequence[str],
    *,
    dump: bool = False,
    nvshmem_include: str | None = None,
) -> list[str]:
    """TVM's nvcc argv without ``nvcc`` itself and without ``-o <out> <src>`` (the nvcc
    backend adds both: the toolkit's nvcc, and file names in the job's own folder).

    When dumping, ``-lineinfo`` stands where TVM puts it; TVM's ``--keep
    --keep-dir=<dump>`` is left to the engine, which adds ``--keep`` and moves the kept
    files into the job's own dump folder (TVM's shared folder lets compiles clobber
    each other's files).
    """
    options = [f"--{output}", "-O3"]
    if dump:
        options.append("-lineinfo")
    if os.environ.get("TVM_KERNEL_DEBUG", "0") == "1":
        options += ["-g", "-G"]
    options += arch_flags
    options += [*HALF_BFLOAT16_UNDEFINES, "--expt-relaxed-constexpr", "--expt-extended-lambda"]
    # As in TVM, any non-empty value (even "0") turns fast math off.
    if not os.environ.get("TVM_CUDA_NVCC_NO_FAST_MATH"):
        options.append("--use_fast_math")
    options.append(f"--ptxas-options={','.join(ptxas_flags())}")
    options += user
    if nvshmem_include is not None:
        # TVM: "-o x.o -c x.cu -rdc=true -I <inc>"; -c with --cubin makes the same
        # relocatable cubin, under the name the backend gives it.
        options += ["-c", "-rdc=true", "-I", nvshmem_include]
    return options


def uses_nvshmem(code: str) -> bool:
    """TVM's test: the source includes ``<nvshmem.h>`` or ``<nvshmemx.h>``."""
    return "#include <nvshmem.h>" in code or "#include <nvshmemx.h>" in code


def _nvrtc_format(target_format: str | None, nvshmem: bool) -> OutputFormat:
    if nvshmem or target_format is None:
        return "cubin"
    if target_format == "fatbin":
        raise ValueError(_NVRTC_FATBIN_MESSAGE)
    if target_format == "cubin":
        return "cubin"
    if target_format == "ptx":
        return "ptx"
    raise ValueError(f"target_format must be 'cubin' or 'ptx', got: {target_format}")


def _nvcc_format(target_format: str | None, nvshmem: bool) -> OutputFormat:
    if nvshmem:
        return "cubin"
    if target_format is None:
        return "ptx"
    formats: dict[object, OutputFormat] = {"cubin": "cubin", "ptx": "ptx", "fatbin": "fatbin"}
    if target_format not in formats:
        raise ValueError("target_format must be in cubin, ptx, fatbin")
    return formats[target_format]


@dataclass(frozen=True)
class RenderedJob:
    """A job plus what the facade needs after compiling it (NVSHMEM's link step)."""

    job: CompileJob
    arch: ResolvedArch
    nvshmem: _nvshmem.NvshmemPaths | None


def render_job(
    code: str,
    target_format: str | None = None,
    arch: str | Sequence[str] | None = None,
    options: Sequence[str] | str | None = None,
    compiler: str = "nvrtc",
    *,
    name: str = "tvm_kernels",
    dump: bool | str | os.PathLike[str] = False,
    fast_path: bool | None = None,
    target: object = None,
) -> RenderedJob:
    """:func:`make_job`, plus the callback's ``target`` and what NVSHMEM linking needs."""
    backends: dict[object, Backend] = {"nvrtc": "nvrtc", "nvcc": "nvcc"}
    if compiler not in backends:
        raise ValueError(f"CUDA compiler must be 'nvcc' or 'nvrtc', got: {compiler}")
    if not isinstance(code, str):
        raise TypeError(f"code must be a str of CUDA source, got {type(code).__name__}")
    nvshmem = uses_nvshmem(code)
    user = _user_options(options)
    if compiler == "nvrtc":
        output = _nvrtc_format(target_format, nvshmem)
        if arch is not None and not isinstance(arch, str):
            raise ValueError(f"arch must be a str such as 'sm_90a' for NVRTC, got {arch!r}")
        resolved = resolve_arch(arch, target)
        paths = _nvshmem.find_nvshmem_paths() if nvshmem else None
        source = nvrtc_source(code, nvshmem)
        final = nvrtc_options(
            nvrtc_arch(resolved.arch, output), user, paths.include if paths else None
        )
    else:
        paths = _nvshmem.find_nvshmem_paths() if nvshmem else None
        resolved = resolve_arch(arch, target)
        output = _nvcc_format(target_format, nvshmem)
        source = code
        final = nvcc_options(
            output,
            resolved.nvcc_arch_flags(),
            user,
            dump=dump is not False,
            nvshmem_include=paths.include if paths else None,
        )
    job = CompileJob(
        source,
        name=name,
        backend=backends[compiler],
        output=output,
        arch=resolved.arch,
        options=final,
        dump=dump,
        tvm_fast_path=fast_path,
        exact_options=True,
    )
    return RenderedJob(job, resolved, paths)


def make_job(
    code: str,
    target_format: str | None = None,
    arch: str | Sequence[str] | None = None,
    options: Sequence[str] | str | None = None,
    compiler: str = "nvrtc",
    *,
    name: str = "tvm_kernels",
    dump: bool | str | os.PathLike[str] = False,
    fast_path: bool | None = None,
) -> CompileJob:
    """The :class:`~asynccomp.CompileJob` that compiles ``code`` exactly as TVM 0.27's
    ``tvm.support.nvcc.compile_cuda(code, target_format, arch, options, compiler=...)``
    does: TVM's rewritten source (NVRTC), TVM's options in TVM's order, passed verbatim
    (``exact_options=True``), program ``<name>.cu`` (TVM's ``tvm_kernels.cu`` by default).

    The architecture is resolved now (see :func:`resolve_arch`); the environment
    variables TVM reads (``TVM_CUDA_PTXAS_REG_LEVEL``, ``TVM_CUDA_PTXAS_EXTRA_OPTS``,
    ``TVM_CUDA_NVRTC_EXTRA_OPTS``, ``TVM_CUDA_NVCC_NO_FAST_MATH``, ``TVM_KERNEL_DEBUG``)
    are read now too. ``dump=True`` (or a dump root folder) marks the job for a dump
    folder and, for nvcc, puts ``-lineinfo`` where TVM puts it (the engine adds
    ``-lineinfo`` to NVRTC jobs it dumps). ``fast_path`` turns the TVM preamble fast path
    on or off for this job (``None``: the engine's setting). For an NVSHMEM source this
    is the first (relocatable) stage; linking against ``libnvshmem_device.a`` is left to
    :func:`asynccomp.tvm.compile_cuda`.

    >>> from asynccomp.tvm import make_job
    >>> job = make_job('extern "C" __global__ void k() {}', arch="sm_90a")
    >>> job.options[:3], job.name, job.output
    (('--gpu-architecture=sm_90a', '-default-device', '--device-int128'), 'tvm_kernels', 'cubin')
    """
    return render_job(
        code, target_format, arch, options, compiler, name=name, dump=dump, fast_path=fast_path
    ).job


def ptx_with_terminator(binary: bytes) -> bytes:
    """TVM keeps the NUL that ends NVRTC's PTX; the engine strips it. Put it back."""
    return binary if binary.endswith(b"\x00") else binary + b"\x00"


def dump_root_from_environment() -> Path | None:
    """``$TVM_KERNEL_DUMP``, else the pass-context config ``cuda.kernels_output_dir`` when
    TVM is imported (read like TVM does; TVM 0.27 itself does not register that key)."""
    env = os.environ.get("TVM_KERNEL_DUMP")
    if env:
        return Path(env).absolute()
    if sys.modules.get("tvm") is None:
        return None
    import tvm_ffi

    current = tvm_ffi.get_global_func("transform.GetCurrentPassContext", allow_missing=True)
    if current is None:
        return None
    config = current().config
    key = "cuda.kernels_output_dir"
    return Path(str(config[key])).absolute() if key in config else None
