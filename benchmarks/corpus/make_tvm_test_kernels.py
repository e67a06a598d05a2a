"""Regenerate the small TVM-generated CUDA kernels under ``tests/data/tvm_kernels/``.

Each ``<kind>.cu`` file is the exact string Apache TVM 0.27 hands to the global function
``tvm_callback_cuda_compile``: TVM's CUDA codegen (``target.build.cuda``) produces the
source, and on a machine where TVM's CUDA runtime is not loaded (no ``libcuda.so.1``,
e.g. a CPU-only box) ``tvm.compile`` keeps that source in a fallback CUDA module instead
of calling the callback. ``lib.mod.imports[0].inspect_source()`` returns those bytes
verbatim, so nothing here needs a GPU or calls a CUDA compiler (unless ``--verify``).
Where TVM's CUDA runtime does load, ``tvm.compile`` calls the callback itself (the module
still keeps the source for ``inspect_source``); set ``TVM_COMPILE_FORCE_FALLBACK=1`` there
to skip that compile.

The kernels are written with TE and scheduled with TVM's own dlight GPU rules (the same
rules ``tvm.relax`` pipelines use), except the tiled matmul, which uses an explicit
shared-memory schedule so that it is small and deterministic:

    vector_add       C = A + B, float32, 1-D
    row_softmax      softmax over the last axis of a 64x256 float32 matrix
    reduction        row sum of a 128x1024 float32 matrix (warp-shuffle reduction)
    tiled_matmul     128x128x128 float32 matmul, 16x16 tiles staged in shared memory
    transpose        256x512 float32 transpose through shared memory
    fp16_gelu_bias   float16 bias add + tanh GELU (uses ``cuda_fp16.h`` / ``half``)

Run it with a Python that has ``apache-tvm==0.27.0.post1`` (and ``apache-tvm-ffi<0.1.15``):

    /tmp/tvmvenv/bin/python -m benchmarks.corpus.make_tvm_test_kernels
    /tmp/tvmvenv/bin/python -m benchmarks.corpus.make_tvm_test_kernels --out DIR --arch sm_90a
    /tmp/tvmvenv/bin/python -m benchmarks.corpus.make_tvm_test_kernels --verify

``--verify`` additionally compiles every kernel with TVM's own
``tvm.support.nvcc.compile_cuda`` (NVRTC -> cubin and nvcc -> fatbin, explicit ``arch``)
inside a target scope. TVM's ``find_cuda_path()`` resolves ``which nvcc`` with
``realpath(<nvcc>/../..)``, so with a wrapper script at ``/usr/local/bin/nvcc`` it picks
``/usr/local`` and NVRTC fails with "Cannot find CUDA headers"; ``--verify`` therefore
sets ``CUDA_PATH`` to the toolkit root (``--cuda-path``, default ``/usr/local/cuda``) when
it is not already set.

The output is deterministic: running the script twice gives byte-identical files.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tvm
from tvm import te
from tvm.s_tir import dlight as dl

from benchmarks import REPO

DEFAULT_OUT = REPO / "tests" / "data" / "tvm_kernels"


# --------------------------------------------------------------------------- kernels


def _prim_func(tensors: list[Any], name: str) -> Any:
    return te.create_prim_func(tensors).with_attr("global_symbol", name)


def vector_add() -> tuple[Any, Any]:
    n = 4096
    a = te.placeholder((n,), "float32", name="A")
    b = te.placeholder((n,), "float32", name="B")
    c = te.compute((n,), lambda i: a[i] + b[i], name="C")
    return _prim_func([a, b, c], "vector_add"), dl.gpu.Fallback()


def row_softmax() -> tuple[Any, Any]:
    m, n = 64, 256
    x = te.placeholder((m, n), "float32", name="X")
    k1 = te.reduce_axis((0, n), name="k1")
    mx = te.compute((m,), lambda i: te.max(x[i, k1], axis=k1), name="row_max")
    e = te.compute((m, n), lambda i, j: te.exp(x[i, j] - mx[i]), name="row_exp")
    k2 = te.reduce_axis((0, n), name="k2")
    s = te.compute((m,), lambda i: te.sum(e[i, k2], axis=k2), name="row_sum")
    y = te.compute((m, n), lambda i, j: e[i, j] / s[i], name="Y")
    return _prim_func([x, y], "row_softmax"), dl.gpu.GeneralReduction()


def reduction() -> tuple[Any, Any]:
    m, n = 128, 1024
    x = te.placeholder((m, n), "float32", name="X")
    k = te.reduce_axis((0, n), name="k")
    y = te.compute((m,), lambda i: te.sum(x[i, k], axis=k), name="Y")
    return _prim_func([x, y], "row_sum"), dl.gpu.Reduction()


def tiled_matmul() -> tuple[Any, Any]:
    n = 128
    a = te.placeholder((n, n), "float32", name="A")
    b = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return _prim_func([a, b, c], "tiled_matmul"), _schedule_tiled_matmul


def _schedule_tiled_matmul(mod: Any, tile: int = 16) -> Any:
    """Classic shared-memory tiling: one 16x16 block per C tile, one thread per element."""
    sch = tvm.s_tir.Schedule(mod)
    sch.work_on("tiled_matmul")
    blk = sch.get_sblock("C")
    i, j, k = sch.get_loops(blk)
    bi, ti = sch.split(i, [None, tile])
    bj, tj = sch.split(j, [None, tile])
    ko, ki = sch.split(k, [None, tile])
    sch.reorder(bi, bj, ti, tj, ko, ki)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(ti, "threadIdx.y")
    sch.bind(tj, "threadIdx.x")
    c_local = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(c_local, tj)
    for idx in (0, 1):
        shared = sch.cache_read(blk, idx, "shared")
        sch.compute_at(shared, ko)
        fused = sch.fuse(*sch.get_loops(shared)[-2:])
        _, ty, tx = sch.split(fused, [None, tile, tile])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
    sch.decompose_reduction(blk, ko)
    return sch.mod


def transpose() -> tuple[Any, Any]:
    m, n = 256, 512
    x = te.placeholder((m, n), "float32", name="X")
    y = te.compute((n, m), lambda i, j: x[j, i], name="Y")
    return _prim_func([x, y], "transpose"), dl.gpu.Transpose()


def fp16_gelu_bias() -> tuple[Any, Any]:
    m, n = 256, 1024
    x = te.placeholder((m, n), "float16", name="X")
    bias = te.placeholder((n,), "float16", name="bias")

    def gelu(i: Any, j: Any) -> Any:
        v = x[i, j] + bias[j]
        c0 = tvm.tirx.const(0.7978845608, "float16")
        c1 = tvm.tirx.const(0.044715, "float16")
        half = tvm.tirx.const(0.5, "float16")
        one = tvm.tirx.const(1.0, "float16")
        return half * v * (one + te.tanh(c0 * (v + c1 * v * v * v)))

    y = te.compute((m, n), gelu, name="Y")
    return _prim_func([x, bias, y], "fp16_gelu_bias"), dl.gpu.Fallback()


KERNELS = {
    "vector_add": vector_add,
    "row_softmax": row_softmax,
    "reduction": reduction,
    "tiled_matmul": tiled_matmul,
    "transpose": transpose,
    "fp16_gelu_bias": fp16_gelu_bias,
}


# --------------------------------------------------------------------------- driver


def generate(kind: str, target: tvm.target.Target) -> str:
    """Return the CUDA source TVM would pass to ``tvm_callback_cuda_compile``."""
    func, rule = KERNELS[kind]()
    mod = tvm.IRModule({func.attrs["global_symbol"]: func})
    with target:
        if callable(rule) and not isinstance(rule, dl.ScheduleRule):
            mod = rule(mod)
        else:
            mod = dl.ApplyDefaultSchedule(rule)(mod)
    lib = tvm.compile(mod, target=target)
    cuda_mods = [m for m in lib.mod.imports if m.kind == "cuda"]
    if len(cuda_mods) != 1:
        raise RuntimeError(f"{kind}: expected one CUDA module, got {lib.mod.imports}")
    src: str = cuda_mods[0].inspect_source()
    if not src:
        raise RuntimeError(f"{kind}: the CUDA module returned no source")
    return src


def verify(kind: str, code: str, arch: str, target: tvm.target.Target) -> str:
    from tvm.support import nvcc  # pylint: disable=import-outside-toplevel

    parts = []
    # compile_cuda's nvcc path calls get_target_compute_version(Target.current()) even
    # when arch is given, so it needs a target scope on a machine without a GPU.
    with target:
        for compiler, fmt in (("nvrtc", "cubin"), ("nvcc", "fatbin")):
            t0 = time.perf_counter()
            out = nvcc.compile_cuda(code, target_format=fmt, arch=arch, compiler=compiler)
            parts.append(f"{compiler}/{fmt} {len(out)} B {time.perf_counter() - t0:.2f}s")
    return ", ".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
    ap.add_argument("--arch", default="sm_90a", help="CUDA target arch (default sm_90a)")
    ap.add_argument("--only", nargs="*", choices=sorted(KERNELS), help="generate these only")
    ap.add_argument("--verify", action="store_true", help="compile each with TVM's compile_cuda")
    ap.add_argument("--cuda-path", default="/usr/local/cuda", help="CUDA_PATH for --verify")
    args = ap.parse_args(argv)

    if args.verify and "CUDA_PATH" not in os.environ:
        os.environ["CUDA_PATH"] = args.cuda_path
    target = tvm.target.Target({"kind": "cuda", "arch": args.arch})
    args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for kind in args.only or KERNELS:
        code = generate(kind, target)
        path = args.out / f"{kind}.cu"
        path.write_bytes(code.encode())
        line = f"{path}: {len(code.encode())} bytes"
        if args.verify:
            try:
                line += "; " + verify(kind, code, args.arch, target)
            except Exception as err:  # pylint: disable=broad-except
                failed += 1
                line += f"; VERIFY FAILED: {type(err).__name__}: {str(err)[-2000:]}"
        print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
