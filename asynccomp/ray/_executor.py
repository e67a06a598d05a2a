"""What the engine is given (:class:`RayExecutor`) and what it gets back (backends that
compile on the cluster)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import anyio
import anyio.abc
import anyio.to_thread

from .._warn import warn
from ..backends import (
    BackendOptions,
    BackendOutput,
    CompilerBackend,
    PreparedCompile,
)
from ..errors import ClusterError, ClusterWarning, SettingsError
from ..job import CompileJob
from ..toolkit import Toolkit
from ._actor import toolkit_identity
from ._connect import connect_within
from ._pool import ActorPool

__all__ = ("RayBackend", "RayExecutor")


@dataclass(frozen=True)
class RayExecutor:
    """Compile an engine's jobs on a Ray cluster: ``Engine(executor=RayExecutor())``.

    The engine starts one compile actor per CPU the cluster offers (or ``actors``),
    spread over its nodes, as it starts, and kills them as it closes. Each actor is a
    process compiling one job at a time with NVRTC or nvcc, warm across batches. The
    engine's cache, dumps, longest-first dispatch and results work as with local
    workers: only the compiles run on the cluster, and a job the cache answers never
    reaches it.

    Every node must have the toolkit this process has, at the same paths (the same
    image or environment, as Ray clusters are usually built): an actor whose NVRTC,
    nvcc or CUDA headers differ is not used, and an actor refuses any job whose cache
    key names another compiler. Sources that ``#include`` files outside the toolkit need
    them at the same path on every node (a shared file system).

    Args:
        address: the cluster, as :func:`ray.init` takes it: ``"auto"`` (the one this
            machine belongs to), ``"HOST:PORT"`` or ``"ray://HOST:PORT"``. ``None``:
            the Ray connection this process already has, else ``$RAY_ADDRESS``, else a
            new Ray instance on this machine.
        actors: how many compile actors (default: one per CPU the cluster has free when
            the engine starts). Actors that cannot be placed within ``startup_timeout``
            are given up with a :class:`~asynccomp.errors.ClusterWarning`.
        retries: how many more actors a job is sent to when the one compiling it is lost
            (its process killed, its node gone) before it fails with
            :class:`~asynccomp.errors.WorkerCrashed`.
        fallback: when the cluster cannot be used (Ray missing, unreachable, no actor
            started), compile with local workers after a ``ClusterWarning`` instead of
            raising :class:`~asynccomp.errors.ClusterError` from ``async with``.
        startup_timeout: seconds to join the cluster, whatever the address (a closed
            port fails at once; one that never answers as Ray does, after this long),
            and again for the actors to start.

    >>> RayExecutor(address="auto", retries=1)
    RayExecutor(address='auto', actors=None, retries=1, fallback=False, startup_timeout=60.0)
    """

    address: str | None = None
    actors: int | None = None
    retries: int = 2
    fallback: bool = False
    startup_timeout: float = 60.0

    def __post_init__(self) -> None:
        if self.address is not None and (not isinstance(self.address, str) or not self.address):
            raise SettingsError("address", self.address, "must be a non-empty string or None")
        if self.actors is not None:
            _check_count("actors", self.actors, 1)
        _check_count("retries", self.retries, 0)
        if not isinstance(self.fallback, bool):
            raise SettingsError("fallback", self.fallback, "must be True or False")
        timeout = self.startup_timeout
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise SettingsError("startup_timeout", timeout, "must be a positive number of seconds")

    async def start(
        self, toolkit: Toolkit, local: Mapping[str, CompilerBackend]
    ) -> tuple[dict[str, CompilerBackend], int, str] | None:
        """Join the cluster and start the actors: the backends that compile there (one
        per local backend, which still renders each job), how many actors there are,
        and where that is (``"on Ray at HOST:PORT"``). ``None`` when the cluster cannot
        be used and ``fallback`` is set (a ClusterWarning says why)."""
        pool = ActorPool(
            address=self.address,
            actors=self.actors,
            retries=self.retries,
            startup_timeout=self.startup_timeout,
            identity=toolkit_identity(toolkit),
        )
        try:
            # Within startup_timeout, whatever the address; cancelled or timed out, the
            # thread still connecting is abandoned and cleans up after itself.
            await connect_within(pool)
        except ClusterError as exc:
            if not self.fallback:
                raise
            warn(f"asynccomp: compiling with local workers: {exc}", ClusterWarning)
            return None
        # The actors are counted once, by the first backend (they all share them).
        backends: dict[str, CompilerBackend] = {
            name: RayBackend(backend, pool, counts_actors=i == 0)
            for i, (name, backend) in enumerate(local.items())
        }
        return backends, pool.size, f"on Ray at {pool.cluster}"


def _check_count(name: str, value: object, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise SettingsError(name, value, f"must be an int >= {least}")


class RayBackend(CompilerBackend):
    """A local backend's rendering, compiled by the pool's actors. The backends of one
    engine share one pool (and its slots: an actor runs any backend); the one made
    with ``counts_actors`` counts the actors as its workers."""

    def __init__(self, local: CompilerBackend, pool: ActorPool, *, counts_actors: bool) -> None:
        super().__init__(local.toolkit)
        self.name = local.name  # type: ignore[misc]  # the name of what it stands for
        self.local = local
        self.pool = pool
        self.counts_actors = counts_actors

    def prepare(self, job: CompileJob, options: BackendOptions) -> PreparedCompile:
        return self.local.prepare(job, options)

    async def run(self, prepared: PreparedCompile) -> BackendOutput:
        return await self.pool.run(prepared)

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        await self.pool.start(task_group)

    async def warm_up(self) -> None:
        await self.pool.warm_up()

    def watch_capacity(self, changed: Callable[[int], None]) -> None:
        self.pool.watchers.append(changed)

    def watch_workers(self, changed: Callable[[], None]) -> None:
        if self.counts_actors:  # the actors are counted (and watched) by one backend
            self.pool.worker_watchers.append(changed)

    def worker_count(self) -> int:
        return self.pool.size_alive if self.counts_actors else 0

    async def aclose(self) -> None:
        await self.pool.aclose()
