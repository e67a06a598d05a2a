"""Which step of a warm template starts a CUDA driver thread (issue 36)? On the GPU machine
the tilelang and tvm-builder templates had a ``cuda00001800007`` thread after their
initializers, so no fork was safe and every worker paid the imports again.

    python3 benchmarks/device/template_threads.py tilelang|nvrtc|gpu

Prints this process's threads (the kernel's names) after each step, in a fresh process:
``tilelang`` runs the TileLang template's own initializer step by step; ``nvrtc`` one
NVRTC compile (NVRTC 13 opens the driver for its own cache); ``gpu`` asynccomp's
``local_gpu_arch``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def threads() -> list[str]:
    tasks = sorted(Path("/proc/self/task").iterdir())
    return [(task / "comm").read_text().strip() for task in tasks]


def step(label: str) -> None:
    print(f"{label}: {threads()}", flush=True)


def main() -> None:
    step("start")
    what = sys.argv[1]
    if what == "tilelang":
        os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
        import torch  # noqa: F401

        step("import torch")
        import tilelang  # noqa: F401

        step("import tilelang")
        from asynccomp.tilelang._lowering import warm_up

        warm_up(list(sys.path))
        step("asynccomp's tilelang initializer")
    elif what == "nvrtc":
        from cuda.bindings import nvrtc

        step("import nvrtc")
        tiny = b'extern "C" __global__ void k() {}'
        err, prog = nvrtc.nvrtcCreateProgram(tiny, b"k.cu", 0, [], [])
        step("nvrtcCreateProgram")
        (err,) = nvrtc.nvrtcCompileProgram(prog, 1, [b"-arch=sm_90a"])
        step(f"nvrtcCompileProgram ({err})")
    elif what == "gpu":
        from asynccomp.gpu import local_gpu_arch

        step(f"local_gpu_arch {local_gpu_arch()}")


if __name__ == "__main__":
    main()
