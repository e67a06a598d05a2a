"""The async engine: :class:`Engine` compiles many jobs at once.

Example::

    import anyio
    from asynccomp import CompileJob, Engine

    SOURCE = 'extern "C" __global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; }'

    async def main() -> None:
        jobs = [CompileJob(SOURCE, name=f"scale{i}") for i in range(8)]
        async with Engine(arch="sm_90a") as engine:
            for result in await engine.compile_many(jobs):
                print(result.job.name, len(result.unwrap()), "bytes of cubin")

    anyio.run(main)

How it works is in :mod:`asynccomp._front` (planning, results, dumps) and
:mod:`asynccomp._scheduler` (the cache, coalescing of identical jobs, longest-first
dispatch). :class:`InProcessRunner` is the runner (:mod:`asynccomp.runner`) of an engine
that compiles in process: a runner of one's own (``Engine(runner=...)``) may wrap one.
"""

from __future__ import annotations

from ._front import CompletedResults, Engine, EngineState
from ._scheduler._limits import default_workers
from ._scheduler.local import InProcessRunner
from .statistics import EngineStatistics

__all__ = (
    "CompletedResults",
    "Engine",
    "EngineState",
    "EngineStatistics",
    "InProcessRunner",
    "default_workers",
)
