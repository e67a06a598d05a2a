"""On a GPU machine: TVM's callback path gives binaries that load and run.

The call goes through tvm-ffi, as TVM's C++ CUDA module makes it
(``tvm_ffi.get_global_func("tvm_callback_cuda_compile")(source)``), with no
architecture given: it comes from the local GPU, as in TVM. TVM itself need not be
installed. Skipped where there is no GPU. Run: ``python -m pytest tests/gpu -v``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import asynccomp.tvm
from asynccomp.gpu import local_gpu_arch

from ..kernels import needs_nvcc, scale_kernel
from .cuda_launch import run_float_kernel, run_scale_kernel

ARCH = local_gpu_arch()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(ARCH is None, reason="no CUDA GPU here")]

DATA = Path(__file__).parent.parent / "data" / "tvm_kernels"


@pytest.fixture(autouse=True)
def gpu_architecture(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("ASYNCCOMP_ARCH", "TVM_KERNEL_DUMP", "TVM_CUDA_COMPILE_MODE"):
        monkeypatch.delenv(name, raising=False)
    yield
    asynccomp.tvm.shutdown()


def _kernel_name(source: str) -> str:
    match = re.search(r'extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(', source)
    assert match is not None, "no extern C kernel in the source"
    return match.group(1)


@pytest.mark.parametrize(
    ("mode", "fast_path"),
    [("nvrtc", "1"), ("nvrtc", "0"), pytest.param("nvcc", "1", marks=needs_nvcc)],
)
def test_tvm_kernel_through_the_callback_runs(
    monkeypatch: pytest.MonkeyPatch, mode: str, fast_path: str
) -> None:
    import tvm_ffi

    monkeypatch.setenv("TVM_CUDA_COMPILE_MODE", mode)
    monkeypatch.setenv("ASYNCCOMP_TVM_FAST_PATH", fast_path)
    asynccomp.tvm.register()
    callback = tvm_ffi.get_global_func("tvm_callback_cuda_compile")
    source = (DATA / "vector_add.cu").read_text()  # C = A + B over 4096 floats
    binary = bytes(callback(source))
    assert binary[:4] == (b"\x7fELF" if mode == "nvrtc" else b"\x50\xed\x55\xba")
    n = 4096
    a = [float(i) for i in range(n)]
    b = [0.5 * i for i in range(n)]
    _, _, c = run_float_kernel(binary, _kernel_name(source), [a, b, [0.0] * n], n // 1024, 1024)
    assert c == [x + y for x, y in zip(a, b, strict=True)]


def test_ptx_from_compile_cuda_loads_as_is() -> None:
    # TVM's NVRTC PTX keeps its terminating NUL, which the driver's JIT needs.
    ptx = bytes(asynccomp.tvm.compile_cuda(scale_kernel(3.0), "ptx"))
    values = [float(i) for i in range(1000)]
    assert run_scale_kernel(ptx, "scale", values) == [3.0 * v for v in values]


def test_nvshmem_source_is_linked_through_the_driver() -> None:
    from asynccomp.tvm import _nvshmem

    try:
        _nvshmem.find_nvshmem_paths()
    except RuntimeError:
        pytest.skip("NVSHMEM not installed (NVSHMEM_HOME, or pip install nvidia-nvshmem-cu13)")
    source = (
        "#include <nvshmem.h>\n"
        'extern "C" __global__ void my_pe(int* out) { out[0] = nvshmem_my_pe(); }\n'
    )
    assert asynccomp.tvm.compile_cuda(source)[:4] == b"\x7fELF"
