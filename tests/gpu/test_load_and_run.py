"""On a GPU machine: binaries from both backends load with cuModuleLoadData and run.

Skipped where there is no GPU. Run: ``python -m pytest tests/gpu -v``.
"""

from __future__ import annotations

import pytest

from asynccomp import CompileJob, SyncEngine
from asynccomp.gpu import local_gpu_arch

from ..kernels import scale_kernel
from .cuda_launch import run_scale_kernel

ARCH = local_gpu_arch()
pytestmark = pytest.mark.skipif(ARCH is None, reason="no CUDA GPU on this machine")


@pytest.mark.parametrize(
    ("backend", "output"),
    [("nvrtc", "cubin"), ("nvcc", "fatbin"), ("nvcc", "cubin"), ("nvcc", "ptx")],
)
def test_binary_loads_and_runs(backend: str, output: str) -> None:
    values = [float(i) for i in range(1000)]
    job = CompileJob(
        scale_kernel(3.0),
        name=f"scale_{backend}",
        backend=backend,
        output=output,  # type: ignore[arg-type]
    )
    with SyncEngine(arch=ARCH, cache=False) as engine:
        result = engine.compile(job)
    binary = result.unwrap()
    if output == "ptx":
        binary += b"\x00"  # the driver JIT wants NUL-terminated PTX text
    assert run_scale_kernel(binary, "scale", values) == [3.0 * v for v in values]
