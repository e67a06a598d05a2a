"""tests/ms_candidates.py's reading of a MetaSchedule artifact: the CUDA code of the
module it holds, in both shapes TVM saves: the CUDA source (TVM on a machine without a
CUDA driver compiles nothing: a device source module), or the binary TVM compiled (on a
GPU machine: the source is not saved). The artifacts are made as TVM 0.27 lays them
out (``default_export``: ``devc.o`` holds each imported module as its kind and its
bytes), around a real cubin and real sources; the tests that build real artifacts are
in test_tvm_ms_builder.py (they need TVM)."""

from __future__ import annotations

import io
import struct
import tarfile
from pathlib import Path

import pytest

from asynccomp import CompileJob, SyncEngine

from .kernels import ARCH, scale_kernel
from .ms_candidates import cuda_code, cuda_source

TVM_KERNEL = Path(__file__).with_name("data") / "tvm_kernels" / "reduction.cu"


def _string(data: bytes) -> bytes:
    return struct.pack("<Q", len(data)) + data


def _module(fmt: str, code: bytes) -> bytes:
    """A CUDA module's bytes as TVM writes them: its format, its functions' table (one
    function of three pointer arguments on a 1-D launch), its code."""
    info = _string(b"main_kernel")  # the function's name
    info += struct.pack("<Q", 3) + struct.pack("<BBH", 3, 64, 1) * 3  # argument types
    info += struct.pack("<Q", 2) + _string(b"blockIdx.x") + _string(b"threadIdx.x")
    info += struct.pack("<Q", 3) + struct.pack("<i", 0) * 3  # extra tags
    table = struct.pack("<Q", 1) + _string(b"main_kernel") + info
    return _string(fmt.encode()) + table + _string(code)


def _artifact(folder: Path, *modules: bytes) -> Path:
    """A ``default_export`` tar: ``devc.o`` (an object file's bytes around the table of
    imported modules: the library itself, then each module) and ``lib0.o``."""
    table = struct.pack("<Q", 1) + struct.pack("<Q", 1) + _string(b"_lib")
    for module in modules:
        table += _string(b"cuda") + _string(module)
    devc = b"\x7fELF\x02\x01\x01" + bytes(57) + table + bytes(16) + b".symtab\x00"
    path = folder / "tvm_tmp_mod.tar"
    with tarfile.open(path, "w") as tar:
        for name, data in (("devc.o", devc), ("lib0.o", b"\x7fELF" + bytes(60))):
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    return path


def test_a_compiled_module_gives_its_binary(tmp_path: Path) -> None:
    """A GPU machine's artifact: TVM compiled the kernel, and saved only the cubin
    (no ``#ifdef __CUDACC_RTC__`` to look for, no source at all)."""
    with SyncEngine(arch=ARCH, nvrtc_workers=1, cache_dir=False) as engine:
        result = engine.compile(CompileJob(scale_kernel(7.0)))
    assert result.ok and result.binary is not None
    cubin = bytes(result.binary)
    artifact = _artifact(tmp_path, _module("cubin", cubin))
    assert cuda_code(artifact) == ("cubin", cubin)
    assert cuda_source(artifact) == cubin


@pytest.mark.parametrize(
    "source",
    [TVM_KERNEL.read_bytes(), scale_kernel(3.0).encode()],
    ids=["TVM's preamble", "no preamble"],
)
def test_a_source_module_gives_its_source_whatever_it_starts_with(
    tmp_path: Path, source: bytes
) -> None:
    artifact = _artifact(tmp_path, _module("cuda", source))
    assert cuda_code(artifact) == ("cuda", source)
    assert cuda_source(artifact) == source


def test_an_artifact_without_one_cuda_module_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"0 CUDA modules in devc\.o, not one"):
        cuda_code(_artifact(tmp_path))
    source = scale_kernel().encode()
    two = _artifact(tmp_path, _module("cuda", source), _module("cuda", source))
    with pytest.raises(ValueError, match=r"2 CUDA modules in devc\.o, not one"):
        cuda_code(two)
