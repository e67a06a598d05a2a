"""TileLang's precompiled header, made as :func:`~._facade.register` returns, before the
first kernel exists (NVRTC with ``pch=True``).

NVRTC's PCH covers a source's leading ``#include`` lines and its options. TileLang's
kernels of one kind share those lines: every GEMM-like kernel for one architecture starts
with the same ones (the tensor-core instruction family, TMA or ``cp.async`` copies,
reductions), whatever its tile sizes, stages and dtypes. But the first kernel of a
process exists only once the tuner has lowered it, and the first wave of compiles then
starts at once, each without a PCH (3.4 s a compile on a 16-core H100 machine, against
1.7 s with one): a fresh machine's first autotune took 6.6 s, against 5.4 s where the
PCH already existed (``benchmarks/RESULTS.md``, fifteenth session).

So, in the background, :class:`Ahead`: one lowering worker lowers a small fp16 GEMM for
the target (the GPU's, as TileLang's ``"auto"`` finds it, or ``register(target=...)``;
no compile: TileLang's codegen gives the source), and the engine makes the PCH of that
source's header lines with TileLang's NVRTC options (:meth:`asynccomp.Engine.make_pch`)
while the user's program sets up. A first wave that comes while it is made waits for it.
A kernel with other header lines (an element-wise one has fewer) makes its own, as
without this. ``$ASYNCCOMP_PCH_AHEAD=off`` makes none (as for a compile server's hints).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ..job import CompileJob
from ..workers import WorkerPool
from ._lowering import uncaptured

__all__ = ("Ahead", "gemm", "probe_source")

logger = logging.getLogger("asynccomp.tilelang")

#: Seconds the probe's lowering may take in its worker (0.2-0.5 s, more while the
#: worker's template is still importing TileLang, which the wait for a worker covers).
PROBE_TIMEOUT = 120.0


def gemm(block_m: int = 64, block_n: int = 64, block_k: int = 32, stages: int = 2) -> Any:
    """TileLang's classic matmul (fp16 in, fp32 accumulate) on a 256^3 problem: the
    probe's kernel, whose header lines are those of every GEMM-like kernel for its
    target (the tests' kernel too)."""
    import tilelang.language as T

    size = 256

    # TileLang's annotations are calls, which mypy cannot read.
    @T.prim_func  # type: ignore[untyped-decorator]
    def main(
        A: T.Tensor((size, size), "float16"),  # type: ignore[valid-type]
        B: T.Tensor((size, size), "float16"),  # type: ignore[valid-type]
        C: T.Tensor((size, size), "float16"),  # type: ignore[valid-type]
    ) -> None:
        with T.Kernel(T.ceildiv(size, block_n), T.ceildiv(size, block_m), threads=128) as (bx, by):
            a = T.alloc_shared((block_m, block_k), "float16")
            b = T.alloc_shared((block_k, block_n), "float16")
            c = T.alloc_fragment((block_m, block_n), "float32")
            T.clear(c)
            for k in T.Pipelined(T.ceildiv(size, block_k), num_stages=stages):
                T.copy(A[by * block_m, k * block_k], a)
                T.copy(B[k * block_k, bx * block_n], b)
                T.gemm(a, b, c)
            T.copy(c, C[by * block_m, bx * block_n])

    return main


def probe_source(arch: str) -> str:
    """A lowering worker's task: the CUDA source TileLang generates for :func:`gemm` on
    ``arch`` (codegen only: nothing compiled)."""
    import tilelang
    from tvm.target import Target

    target = Target({"kind": "cuda", "arch": arch})
    with uncaptured(), target:
        return str(tilelang.lower(gemm(), target=target).kernel_source)


class Ahead:
    """One probe and PCH, on a thread of its own (:meth:`join` waits for it):
    ``target()`` gives the architecture and code list (TileLang's detection: it may
    raise, and then nothing is made); ``render(source, arch, codes)`` the job the facade
    would compile for that source; ``make_pch(job)`` the engine's."""

    def __init__(
        self,
        workers: WorkerPool,
        target: Callable[[], tuple[str, list[str]]],
        render: Callable[[str, str, list[str]], CompileJob],
        make_pch: Callable[[CompileJob], bool],
    ) -> None:
        self.made: bool | None = None  # once ended: whether the engine's workers share it
        self.ended_at: float | None = None  # then (time.perf_counter())
        self._args = (workers, target, render, make_pch)
        self._thread = threading.Thread(
            target=self._run, name="asynccomp-tilelang-pch-ahead", daemon=True
        )
        self._thread.start()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for it to end; whether it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        workers, target, render, make_pch = self._args
        try:
            arch, codes = target()
            if len(codes) > 1:  # a fatbin: such jobs go to nvcc, which keeps no PCH
                self.made = False
                return
            task = workers.submit(probe_source, codes[0] if codes else arch, timeout=PROBE_TIMEOUT)
            probed = task.result()
            if probed.outcome != "done":
                logger.info("asynccomp.tilelang: no PCH made ahead: the probe %s", probed.outcome)
                self.made = False
                return
            self.made = make_pch(render(probed.value, arch, codes))
        except Exception as exc:  # a speed-up only: the first kernels make the PCH then
            logger.info("asynccomp.tilelang: no PCH made ahead: %r", exc)
            self.made = False
        finally:
            self.ended_at = time.perf_counter()
