"""TileLang 0.1.15's CUDA compile, rendered: its nvcc command line, and the same for NVRTC.

Nothing here compiles. :func:`make_job` turns what TileLang's
``tilelang_callback_cuda_compile(code, target, pass_config)`` computes into the
:class:`~asynccomp.CompileJob` that gives the same binary. The nvcc form is TileLang's
argv (``tilelang/cuda/backend.py`` + ``tilelang/contrib/nvcc.py:compile_cuda``) in
TileLang's order, passed verbatim (``exact_options=True``), plus flags that change no
output byte (tested: same SASS as TileLang's own cubin):

- ``--ptxas-options=-v``: ptxas's resource report, for ``result.resources`` (left out
  when ``TILELANG_VERBOSE`` already adds ``--ptxas-options=--verbose``);
- ``-Xcompiler -MMD,-MF,tvm_kernels.d``: the host compiler's preprocessing pass, which
  nvcc runs anyway for device code, lists the headers it read (TileLang's templates,
  CUTLASS), and the cache records them with their digests, so an edited or upgraded
  header is a miss; the nvcc backend reads ``<stem>.d`` whenever one is written.
  Without a list the cache would scan the includes itself, and give up on CUTLASS's
  ``#include CUDA_STD_HEADER(...)``: no result would be cached. nvcc's own ``-MMD``
  would do too, but runs a preprocessing pass of its own: 0.3 s of a 1.5-2 s compile
  here, against 0.05-0.1 s for this.

The NVRTC form is TileLang's NVRTC source and options (``tilelang/contrib/nvrtc.py``,
``jit/adapter/nvrtc/libgen.py``) with what TileLang's nvcc passes too (``-std=c++20``,
``-lineinfo``, fast math, the register level, the device flags NVRTC takes) and with
TileLang's NVRTC bugs left out: the architecture is the target's (TileLang's NVRTC path
loses it and asks the GPU), the CUDA headers are the toolkit asynccomp found (TileLang
reads them from a ``CUDA_HOME`` that a wrapper script can make wrong), and
``CUtensorMap`` is declared as the toolkit's ``cuda.h`` declares it
(``include/asynccomp_tilelang/nvrtc_prelude.h``). It is another compiler: the SASS is
close to nvcc's but not the same.
"""

from __future__ import annotations

import functools
import os
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..job import CompileJob, OutputFormat, parse_arch

__all__ = (
    "NVRTC_PRELUDE",
    "PROGRAM",
    "PassConfig",
    "TileLangPaths",
    "make_job",
    "nvcc_options",
    "nvrtc_options",
    "nvrtc_source",
    "split_device_flags",
)

#: TileLang's program name: ``tvm_kernels.cu`` (its nvcc and NVRTC paths both use it).
PROGRAM = "tvm_kernels"

#: The folder holding ``asynccomp_tilelang/nvrtc_prelude.h``.
INCLUDE_DIR = str(Path(__file__).resolve().parent / "include")
#: The first line of every NVRTC source (TileLang's ``nvrtc_std.h``, through the prelude).
NVRTC_PRELUDE = "#include <asynccomp_tilelang/nvrtc_prelude.h>\n"
# TileLang adds the device runtime header for programmatic dependent launch; angle
# brackets here, where TileLang quotes it: a quoted include would add the caller's
# folder to the options (see with_caller_folders), and with it to every cache and PCH key.
_PDL_INCLUDE = "#include <cuda_device_runtime_api.h>\n"
_PDL_CALLS = ("cudaGridDependencySynchronize", "cudaTriggerProgrammaticLaunchCompletion")

# nvcc flags NVRTC refuses (`nvrtc_lab.py options`: -O3, -ccbin, --cubin) or that mean
# nothing without a host compiler; dropped from TileLang's device flags for NVRTC.
_NVCC_ONLY_PREFIXES = (
    "-O",
    "-ccbin",
    "--compiler-bindir",
    "-Xcompiler",
    "--compiler-options",
    "-Xlinker",
    "--linker-options",
    "-Xarchive",
    "-Xcudafe",
    "-c",
    "--compile",
    "--cubin",
    "--fatbin",
    "--ptx",
    "-fPIC",
    "-shared",
    "-o",
)

# TileLang's pass-config keys (tilelang.transform.PassConfigKey), read by its callback.
_FAST_MATH = "tl.enable_fast_math"
_REGISTER_LEVEL = "tl.ptxas_register_usage_level"
_DEVICE_FLAGS = "tl.device_compile_flags"
_OUTPUT_DIR = "cuda.kernels_output_dir"


@dataclass(frozen=True)
class TileLangPaths:
    """What TileLang's command line names besides the kernel: its template folder
    (``-I``), CUTLASS's include folder (``-I``) and the host compiler (``-ccbin``),
    as the strings TileLang uses (its template path is un-normalised,
    ``.../tilelang/3rdparty/../src``: the same text keeps the command line TileLang's).
    """

    template: str
    cutlass: str
    host_compiler: str | None

    @classmethod
    def installed(cls) -> TileLangPaths:
        """The installed TileLang's (imports it)."""
        from tilelang.contrib.cc import get_cplus_compiler
        from tilelang.env import CUTLASS_INCLUDE_DIR, TILELANG_TEMPLATE_PATH

        return cls(str(TILELANG_TEMPLATE_PATH), str(CUTLASS_INCLUDE_DIR), get_cplus_compiler())


@dataclass(frozen=True)
class PassConfig:
    """What TileLang's callback reads from its pass config and environment.

    Attributes:
        fast_math: ``tl.enable_fast_math`` (``--use_fast_math``).
        register_usage_level: ``tl.ptxas_register_usage_level``.
        device_flags: ``tl.device_compile_flags`` (and ``compile_flags=``), split as
            TileLang splits them.
        verbose: ``TILELANG_VERBOSE`` (``--ptxas-options=--verbose -w``).
        timeout: ``TILELANG_COMPILE_TIMEOUT_SECONDS`` (``None``: none).
        output_dir: ``cuda.kernels_output_dir``: dump the compile there.
    """

    fast_math: bool = False
    register_usage_level: int | None = None
    device_flags: tuple[str, ...] = ()
    verbose: bool = False
    timeout: float | None = None
    output_dir: str | None = None

    @classmethod
    def read(cls, pass_config: Mapping[str, object] | None = None) -> PassConfig:
        """From TileLang's pass config (a ``tvm_ffi`` Map of TVM objects, or a dict) and
        TileLang's environment (imports TileLang)."""
        from tilelang.env import env

        config: Mapping[str, object] = pass_config or {}
        level = config.get(_REGISTER_LEVEL, None)
        output_dir = config.get(_OUTPUT_DIR, None)
        return cls(
            fast_math=bool(config.get(_FAST_MATH, False)),
            register_usage_level=None if level is None else int(level),  # type: ignore[call-overload]
            device_flags=split_device_flags(config.get(_DEVICE_FLAGS, None)),
            verbose=bool(env.get_default_verbose()),
            timeout=env.get_compile_timeout_seconds(),
            output_dir=None if output_dir is None else str(output_dir),
        )


def split_device_flags(flags: object) -> tuple[str, ...]:
    """``tl.device_compile_flags`` as TileLang splits it: one string or a list, each
    string split like a shell, anything else ``str()``-ed.

    >>> split_device_flags(["-DA=1 -DB", "--use_fast_math"])
    ('-DA=1', '-DB', '--use_fast_math')
    """
    if not flags:
        return ()
    if isinstance(flags, str):
        return tuple(shlex.split(flags))
    tokens: list[str] = []
    for flag in flags if isinstance(flags, Iterable) else [flags]:
        if isinstance(flag, str):
            tokens.extend(shlex.split(flag))
        else:
            tokens.append(str(flag))
    return tuple(tokens)


def _arch_flags(arch: str, codes: Sequence[str]) -> list[str]:
    """TileLang's ``-arch=sm_X``, or ``-gencode`` for an explicit code list."""
    number = arch.removeprefix("sm_")
    if not codes:
        return [f"-arch=sm_{number}"]
    code = codes[0] if len(codes) == 1 else f"[{','.join(codes)}]"
    return ["-gencode", f"arch=compute_{number},code={code}"]


def _common_flags(config: PassConfig) -> list[str]:
    flags = list(config.device_flags)
    if config.fast_math:
        flags.append("--use_fast_math")
    if config.register_usage_level is not None:
        flags.append(f"--ptxas-options=--register-usage-level={config.register_usage_level}")
    if config.verbose:
        flags += ["--ptxas-options=--verbose", "-w"]
    return flags


def nvcc_options(
    arch: str, codes: Sequence[str], config: PassConfig, paths: TileLangPaths
) -> list[str]:
    """TileLang's nvcc argv without ``nvcc`` itself and ``-o <out> <src>`` (the nvcc
    backend adds both), plus the report and dependency flags (see the module doc)."""
    output = "fatbin" if len(codes) > 1 else "cubin"
    options = [f"-ccbin={paths.host_compiler}"] if paths.host_compiler else []
    options += [f"--{output}", "-O3", "-lineinfo", *_arch_flags(arch, codes)]
    options += ["-std=c++20", f"-I{paths.template}", f"-I{paths.cutlass}"]
    options += _common_flags(config)
    if not config.verbose:
        options.append("--ptxas-options=-v")
    options += ["-Xcompiler", f"-MMD,-MF,{PROGRAM}.d"]
    return options


def nvrtc_source(code: str) -> str:
    """TileLang's NVRTC source: its ``nvrtc_std.h`` first (through asynccomp's prelude),
    and the device runtime header for programmatic dependent launch."""
    source = NVRTC_PRELUDE + code
    if any(call in code for call in _PDL_CALLS):
        source = _PDL_INCLUDE + source
    return source


@functools.cache
def _nvrtc_major() -> int:
    """NVRTC's major version, which TileLang passes as ``__CUDACC_VER_MAJOR__``."""
    try:
        from cuda.bindings import nvrtc

        return int(nvrtc.nvrtcVersion()[1])
    except Exception:  # no NVRTC here: its compile fails anyway, with asynccomp's message
        return 13


def nvrtc_options(config: PassConfig, paths: TileLangPaths) -> list[str]:
    """TileLang's options rendered for NVRTC. The NVRTC backend adds the architecture,
    the toolkit's include folders (after TileLang's), ``--ptxas-options=-v`` and
    ``--no-cache``, and ``-pch`` first when asked."""
    options = ["-default-device", "-std=c++20", "-lineinfo"]
    options += [f"-I{INCLUDE_DIR}", f"-I{paths.template}", f"-I{paths.cutlass}"]
    options.append(f"-D__CUDACC_VER_MAJOR__={_nvrtc_major()}")
    options += [f for f in _common_flags(config) if not f.startswith(_NVCC_ONLY_PREFIXES)]
    return options


def make_job(
    code: str,
    arch: str,
    codes: Sequence[str] = (),
    config: PassConfig | None = None,
    *,
    backend: Literal["nvcc", "nvrtc"] = "nvcc",
    pch: bool = True,
    dump: bool | str | os.PathLike[str] = False,
    paths: TileLangPaths | None = None,
) -> CompileJob:
    """The job that compiles TileLang kernel source ``code`` for ``arch`` (``"sm_90a"``;
    ``codes``: the target's ``code`` list, TileLang's ``-gencode``) as TileLang 0.1.15
    does with nvcc, or its NVRTC form (``backend="nvrtc"``, with a precompiled header
    unless ``pch=False``). A code list of more than one SASS needs a fatbin, which NVRTC
    cannot make: such jobs go to nvcc whatever ``backend`` says. ``paths``: TileLang's
    folders and host compiler (default: the installed TileLang's).

    >>> paths = TileLangPaths("/tl/src", "/tl/cutlass/include", "/usr/bin/g++")
    >>> job = make_job('extern "C" __global__ void k() {}', "sm_90a", paths=paths)
    >>> job.backend, job.output, job.name, job.exact_options
    ('nvcc', 'cubin', 'tvm_kernels', True)
    >>> job.options[:8]
    ('-ccbin=/usr/bin/g++', '--cubin', '-O3', '-lineinfo', '-arch=sm_90a', '-std=c++20', \
'-I/tl/src', '-I/tl/cutlass/include')
    >>> nvrtc = make_job('extern "C" __global__ void k() {}', "sm_90a", backend="nvrtc",
    ...                  paths=paths)
    >>> nvrtc.arch, nvrtc.pch, nvrtc.options[:3]
    ('sm_90a', True, ('-default-device', '-std=c++20', '-lineinfo'))
    """
    if backend not in ("nvcc", "nvrtc"):
        raise ValueError(f"backend must be 'nvcc' or 'nvrtc', got {backend!r}")
    parse_arch(arch)
    config = config or PassConfig()
    paths = paths or TileLangPaths.installed()
    dump_to: bool | str | os.PathLike[str] = config.output_dir or dump
    if backend == "nvrtc" and len(codes) <= 1:
        return CompileJob(
            nvrtc_source(code),
            name=PROGRAM,
            backend="nvrtc",
            output="cubin",
            arch=codes[0] if codes else arch,  # the SASS a one-entry -gencode would make
            options=nvrtc_options(config, paths),
            timeout=config.timeout,
            dump=dump_to,
            pch=pch,
        )
    output: OutputFormat = "fatbin" if len(codes) > 1 else "cubin"
    return CompileJob(
        code,
        name=PROGRAM,
        backend="nvcc",
        output=output,
        arch=arch,
        options=nvcc_options(arch, codes, config, paths),
        timeout=config.timeout,
        dump=dump_to,
        exact_options=True,
    )
