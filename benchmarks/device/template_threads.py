"""Which step of a warm template starts a thread (issue 36)? On the GPU machine the
tilelang and tvm-builder templates had a CUDA driver thread (``cuda00001800007``) after
their initializers, so no fork was safe and every worker paid the imports again.

    python3 benchmarks/device/template_threads.py tilelang|tvm-builder|nvrtc|gpu[-answered]

Runs, in this fresh process and with the environment a template gets
(``PYTORCH_NVML_BASED_CUDA_CHECK=1``, one BLAS thread), the initializers of that template
one step at a time, and prints the process's threads (the kernel's names) after each:
``tilelang`` (torch, TileLang, asynccomp's lowering initializer), ``tvm-builder`` (TVM's
MetaSchedule and tensor intrinsics, asynccomp's callback), ``nvrtc`` (one NVRTC compile:
NVRTC 13 opens the driver for its own cache), ``gpu`` (asynccomp's ``local_gpu_arch``).
Under ``LD_PRELOAD`` of ``thread_shim.c`` each new thread also prints the Python stack
that started it (``run_template_threads.sh`` does both). ``-answered``: the steps inside
the template's answer to torch's device count (``asynccomp/workers/_torch_devices.py``).
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
    from asynccomp.workers._starts import _TEMPLATE_DEFAULTS

    for name, value in _TEMPLATE_DEFAULTS.items():
        os.environ.setdefault(name, value)
    step("start")
    what = sys.argv[1]
    if what.endswith("-answered"):  # with the template's answer to torch's device count
        from asynccomp.workers._torch_devices import answer_device_count

        with answer_device_count() as answered:
            step(f"answering torch's device count: {answered}")
            run(what.removesuffix("-answered"))
        step("after the answer")
    else:
        run(what)


def run(what: str) -> None:
    if what == "tilelang":
        import torch  # noqa: F401

        step("import torch")
        import tilelang  # noqa: F401

        step("import tilelang")
        from asynccomp.tilelang._lowering import warm_up

        warm_up(list(sys.path))
        step("asynccomp's tilelang initializer")
    elif what == "tvm-builder":
        import tvm  # noqa: F401

        step("import tvm")
        from asynccomp.tvm._ms_builder import _import_tvm, asynccomp_register

        _import_tvm()
        step("MetaSchedule and the tensor intrinsics")
        asynccomp_register()
        step("asynccomp's callback registered")
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
