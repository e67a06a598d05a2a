"""Compiling with asynccomp's NVRTC loads no CUDA driver into the compiling process.

NVRTC 13 initializes the driver (``cuInit``) to consult a compile cache of its own
(``~/.nv/ComputeCache``), for PTX output too and even under ``CUDA_CACHE_DISABLE=1``,
unless it is given ``--no-cache``. The driver would leave its threads in a user's process
that never asked for CUDA (``threads`` mode compiles there), and in a warm template, which
then may not fork. On a GPU machine the real driver is there to be loaded; elsewhere a
stand-in ``libcuda.so.1`` (built here with the C compiler) is put on the library path,
so a process that loads "the driver" shows it in its memory map either way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from asynccomp.gpu import local_gpu_arch

from .kernels import ARCH

STAND_IN = textwrap.dedent(
    """
    /* Answers as a driver with no device would: NVRTC then compiles without its cache. */
    int cuInit(unsigned flags) { (void)flags; return 100; }
    int cuDriverGetVersion(int *version) { if (version) *version = 13000; return 0; }
    int cuGetExportTable(void **table, const void *id) { (void)table; (void)id; return 100; }
    """
)

# A fresh interpreter: the test process may have loaded the driver for other tests.
SCRIPT = textwrap.dedent(
    """
    import sys
    from asynccomp import CompileJob, SyncEngine

    source = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.f; }'
    with SyncEngine(arch=sys.argv[1], nvrtc_mode="threads", cache=False) as engine:
        results = engine.compile_many(
            [CompileJob(source, name=out, output=out) for out in ("ptx", "cubin")]
        )
    assert all(r.ok for r in results), [r.log for r in results]
    print("libcuda.so" in open("/proc/self/maps").read())
    """
)


def _environ(tmp_path: Path) -> dict[str, str]:
    environ = dict(os.environ)
    if local_gpu_arch() is not None:
        return environ  # the real driver
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no GPU driver and no C compiler for a stand-in")
    (tmp_path / "cuda.c").write_text(STAND_IN)
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-o", "libcuda.so.1", "cuda.c"], cwd=tmp_path, check=True
    )
    environ["LD_LIBRARY_PATH"] = os.pathsep.join(
        [str(tmp_path), *filter(None, [environ.get("LD_LIBRARY_PATH")])]
    )
    return environ


def test_compiling_ptx_and_cubin_loads_no_cuda_driver(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, local_gpu_arch() or ARCH],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=_environ(tmp_path),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"], "NVRTC loaded the CUDA driver"
