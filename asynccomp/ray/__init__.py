"""Compiling on a Ray cluster: ``Engine(executor=RayExecutor(address="auto"))``.

When a sweep outgrows one machine, an engine can send its compiles to long-lived actors
on a Ray cluster (``pip install ray``; in asynccomp's checkout ``pip install '.[ray]'``):
one per CPU the cluster offers, spread over its nodes, each a process compiling with
NVRTC or nvcc and warm across batches. Everything else stays in the engine's process:
the cache (a job it answers never reaches the cluster), dumps, longest-first dispatch
over all the actors, and the results, byte for byte those of local workers. The command
line: ``asynccomp compile --ray auto`` and ``asynccomp serve --ray auto``.

Faults: a job whose actor is lost (killed, its node gone) goes to another actor, at most
``retries`` times, then ends with :class:`~asynccomp.errors.WorkerCrashed`; a lost actor is
replaced where the cluster has room. Cancelling a job, or its timeout, stops it on the
cluster. A cluster that cannot be used raises :class:`~asynccomp.errors.ClusterError` as
the engine starts, or, with ``fallback=True``, the engine compiles locally after a
:class:`~asynccomp.errors.ClusterWarning`. Closing the engine kills its actors.

Use it as any engine::

    import anyio
    from asynccomp import CompileJob, Engine
    from asynccomp.ray import RayExecutor

    async def main() -> None:
        async with Engine(arch="sm_90a", executor=RayExecutor(address="auto")) as engine:
            results = await engine.compile_many(jobs)

The manual's Ray guide (docs/guides/ray.md) runs this on a two-node cluster.
"""

from __future__ import annotations

from ._executor import RayBackend, RayExecutor

__all__ = ("RayBackend", "RayExecutor")
