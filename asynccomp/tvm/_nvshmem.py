"""NVSHMEM sources, as TVM 0.27 compiles them: relocatable code linked with
``libnvshmem_device.a``.

TVM compiles a source that includes ``<nvshmem.h>`` or ``<nvshmemx.h>`` in two stages.
The first (relocatable cubin: NVRTC ``-rdc true``, nvcc ``-c -rdc=true``) runs on the
engine like any job; the second runs here: ``nvlink`` for nvcc, the CUDA driver's linker
(``cuLinkCreate``..., which needs a GPU, as in TVM) for NVRTC.

Finding NVSHMEM follows TVM's ``find_nvshmem_paths`` (``$NVSHMEM_HOME``, the CUDA
toolkit, ``/usr/local``, ``/usr``), with two additions: NVIDIA's pip wheel
(``nvidia-nvshmem-cu13``, found through ``cuda-pathfinder``), and a library folder that
holds only ``libnvshmem_device.a`` (what linking needs; the wheel has no ``libnvshmem.so``).
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..toolkit import locate_toolkit

__all__ = ("NvshmemPaths", "find_nvshmem_paths", "link_with_driver", "link_with_nvlink")

_LIBRARIES = ("libnvshmem.a", "libnvshmem.so", "libnvshmem_device.a")


@dataclass(frozen=True)
class NvshmemPaths:
    """NVSHMEM's include folder (holds ``nvshmem.h``) and library folder."""

    include: str
    lib: str


def _cuda_path() -> str | None:
    root = os.environ.get("CUDA_PATH") or locate_toolkit().cuda_root
    return str(root) if root else None


def _wheel_root() -> str | None:
    try:
        from cuda import pathfinder

        found = pathfinder.find_nvidia_header_directory("nvshmem")
    except Exception:  # pathfinder missing, or without an NVSHMEM entry
        return None
    return str(Path(found).parent) if found else None


def find_nvshmem_paths() -> NvshmemPaths:
    """NVSHMEM's folders, or TVM's ``RuntimeError`` listing every root searched."""
    candidates = [os.environ.get("NVSHMEM_HOME"), _cuda_path(), "/usr/local", "/usr"]
    candidates.append(_wheel_root())
    roots: list[str] = []
    for root in candidates:
        if root and root not in roots:
            roots.append(root)
    gnu = f"{platform.machine()}-{platform.system().lower()}-gnu"
    for root in roots:
        base = Path(root)
        includes = [base / "include", *sorted((base / "include").glob("nvshmem_*"))]
        libs = [base / "lib64", base / "lib", base / "lib" / gnu, base / "lib64" / gnu]
        for include in includes:
            if not (include / "nvshmem.h").is_file():
                continue
            for lib in libs:
                if any((lib / name).is_file() for name in _LIBRARIES):
                    return NvshmemPaths(str(include), str(lib))
    lines = ["Error: Could not find NVSHMEM installation.", "Searched in the following locations:"]
    lines += [f"  - {root}" for root in roots]
    lines += [
        "",
        "Please ensure NVSHMEM is installed and try one of the following:",
        "  1. Set the 'NVSHMEM_HOME' environment variable to your NVSHMEM installation directory.",
        "  2. Ensure your CUDA Toolkit installation includes NVSHMEM and 'nvcc' is on your PATH.",
        "  (asynccomp: or pip install nvidia-nvshmem-cu13)",
    ]
    raise RuntimeError("\n".join(lines))


def _compile_error(code: str, output: str) -> RuntimeError:
    return RuntimeError(code + "\nCompilation error:\n" + output)


def link_with_nvlink(code: str, relocatable: bytes, arch: str, paths: NvshmemPaths) -> bytes:
    """TVM's second nvcc stage: ``nvlink -arch=sm_XX -L <nvshmem> -L <cuda>/lib64
    -l nvshmem_device -l cudadevrt -o x.cubin x.o``, in a temporary folder."""
    toolkit = locate_toolkit()
    cuda = _cuda_path()
    nvlink = None
    if cuda and os.access(Path(cuda) / "bin" / "nvlink", os.X_OK):
        nvlink = str(Path(cuda) / "bin" / "nvlink")
    nvlink = nvlink or shutil.which("nvlink")
    if nvlink is None or cuda is None:
        raise RuntimeError(
            "Cannot find CUDA path: nvlink (from the CUDA toolkit) is needed to link "
            f"NVSHMEM code; searched: {'; '.join(toolkit.searched)}"
        )
    number = arch.split("_", 1)[1]
    with tempfile.TemporaryDirectory(prefix="asynccomp-nvlink-") as folder:
        (Path(folder) / "tvm_kernels.o").write_bytes(relocatable)
        argv = [
            nvlink,
            f"-arch=sm_{number}",
            "-L",
            paths.lib,
            "-L",
            str(Path(cuda) / "lib64"),
            "-l",
            "nvshmem_device",
            "-l",
            "cudadevrt",
            "-o",
            "tvm_kernels.cubin",
            "tvm_kernels.o",
        ]
        proc = subprocess.run(
            argv, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False
        )
        if proc.returncode != 0:
            raise _compile_error(code, proc.stdout.decode("utf-8", errors="replace"))
        linked = (Path(folder) / "tvm_kernels.cubin").read_bytes()
    if not linked:
        raise RuntimeError("Compilation error: empty result is generated")
    return linked


def link_with_driver(relocatable: bytes, paths: NvshmemPaths) -> bytes:
    """TVM's NVRTC link stage, through the CUDA driver (a fresh context on GPU 0)."""
    import ctypes

    from cuda.bindings import driver as cu

    def check(result: object, what: str) -> None:
        if result != cu.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"{what}: {result}")

    try:
        (result,) = cu.cuInit(0)
    except Exception as exc:  # no libcuda.so at all (cuda-bindings raises its own error)
        raise RuntimeError(f"Failed to initialize CUDA: {exc}") from exc
    check(result, "Failed to initialize CUDA")
    result, device = cu.cuDeviceGet(0)
    check(result, "Failed to get CUDA device")
    result, context = cu.cuCtxCreate(None, 0, device)
    check(result, "Failed to create CUDA context")
    try:
        result, state = cu.cuLinkCreate(0, [], [])
        check(result, "Failed to create CUDA linker")
        try:
            input_type = cu.CUjitInputType
            (result,) = cu.cuLinkAddData(
                state,
                input_type.CU_JIT_INPUT_CUBIN,
                relocatable,
                len(relocatable),
                b"tvm_kernels.cubin",
                0,
                [],
                [],
            )
            check(result, "Failed to add CUBIN to linker")
            library = str(Path(paths.lib) / "libnvshmem_device.a")
            if not Path(library).exists():
                raise RuntimeError(f"NVSHMEM device library not found: {library}")
            (result,) = cu.cuLinkAddFile(
                state, input_type.CU_JIT_INPUT_LIBRARY, library.encode(), 0, [], []
            )
            check(result, "Failed to add NVSHMEM device library")
            result, linked, size = cu.cuLinkComplete(state)
            check(result, "Failed to complete NVSHMEM linking")
            binary = ctypes.string_at(linked, size)
            if not binary:
                raise RuntimeError("Compilation error: empty result is generated")
            return binary
        finally:
            cu.cuLinkDestroy(state)
    finally:
        cu.cuCtxDestroy(context)
