"""The engine's actors on a Ray cluster, as a set: started as the engine starts, kept
full, killed at close.

:class:`ActorSet` starts the actors (one per CPU the cluster offers, spread over its
nodes), keeps the ones whose toolkit is this process's, and holds which are alive and
which are free. An actor lost (its process killed, its node gone) is replaced where the
cluster has room; the engine's slots follow the count (:attr:`ActorSet.watchers`).
Closing kills every actor and waits, briefly, until the cluster has them dead. What a
job does with an actor is :class:`~asynccomp.ray._pool.ActorPool`'s.

Ray calls that block (connecting, waiting for actors to start) run in threads.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

from .._warn import warn
from ..errors import ClusterError, ClusterWarning
from ._actor import CompileActor
from ._connect import connect, disconnect, import_ray

__all__ = ("Actor", "ActorSet", "first_line")

logger = logging.getLogger("asynccomp.ray")

#: How long closing waits for the cluster to confirm its actors dead.
KILL_WAIT = 10.0


@dataclass(eq=False)
class Actor:
    """One compile actor: its handle, and where it runs (for people)."""

    handle: Any  # ray.actor.ActorHandle
    pid: int
    host: str


class ActorSet:
    """The engine's compile actors on one Ray cluster. Blocking setup: :meth:`connect`
    (in a thread); then from the event loop: :meth:`start`, :meth:`aclose`."""

    def __init__(
        self,
        *,
        address: str | None,
        actors: int | None,
        retries: int,
        startup_timeout: float,
        identity: dict[str, str],
    ) -> None:
        self.address = address
        self.requested = actors
        self.retries = retries
        self.startup_timeout = startup_timeout
        self.identity = identity
        self.size = 0
        #: The address of the cluster joined (known once connected).
        self.cluster = address or "a local Ray instance"
        self._remote_class: Any = None
        self._all: dict[Any, Actor | None] = {}  # every handle made, to kill at close
        self._free: list[Actor] = []
        self._live: set[Actor] = set()
        self._replacing = 0
        self._changed = anyio.Event()
        self._task_group: anyio.abc.TaskGroup | None = None
        self._connected = False
        self._closed = False
        self._abandoned = False
        self._handed_over = False  # connect() finished for an engine still waiting
        self._handover = threading.Lock()
        # Replacements wait for their actor in threads: a few at a time, so that losing
        # a big node does not take every thread anyio lends (cache reads, dumps, ...).
        self._replacements = anyio.CapacityLimiter(2)
        #: Called with the number of actors (alive or being replaced) when it changes.
        self.watchers: list[Callable[[int], None]] = []
        #: Told (on the event loop) whenever the actors alive may have changed.
        self.worker_watchers: list[Callable[[], None]] = []
        self._capacity = 0

    # -- starting --------------------------------------------------------------------------

    def connect(self, joined: Callable[[], None] = lambda: None) -> None:
        """Blocking: join the cluster (then call ``joined``) and start the actors.
        Raises ClusterError when Ray is missing, the cluster cannot be reached or no
        actor could be used. If the engine gave up waiting meanwhile (:meth:`abandon`),
        whatever it joined and started is left and killed."""
        connect(self.address, min(self.startup_timeout, 10.0), self._found)
        self._connected = True
        joined()
        with contextlib.suppress(Exception):  # only for people: where the actors are
            self.cluster = str(import_ray().get_runtime_context().gcs_address)
        try:
            self._start_actors()
        except BaseException:
            self.kill_all()
            raise
        with self._handover:
            if not self._abandoned:
                self._handed_over = True
                return
        self.kill_all()

    def _found(self, where: str) -> None:
        self.cluster = where

    def abandon(self) -> bool:
        """The engine stopped waiting for :meth:`connect` (cancelled, or past the
        startup timeout): the thread still in it kills whatever it starts, and leaves
        the cluster. False when :meth:`connect` had finished: the pool is the engine's
        to close."""
        with self._handover:
            if self._handed_over:
                return False
            self._abandoned = True
            self._closed = True
            return True

    def _start_actors(self) -> None:
        ray = import_ray()
        count = self.requested
        if count is None:
            count = int(ray.available_resources().get("CPU", 0))
            if count < 1:
                raise ClusterError(
                    f"the Ray cluster at {ray.get_runtime_context().gcs_address} has no free "
                    f"CPU for a compile actor (resources: {ray.cluster_resources()})"
                )
        self._remote_class = ray.remote(CompileActor).options(
            num_cpus=1,
            scheduling_strategy="SPREAD",  # across nodes: a node lost costs a share
            max_restarts=0,  # a lost actor is replaced by the pool, which knows its job
            max_task_retries=0,
        )
        started, problems = self._start(count)
        for actor in started:
            self._live.add(actor)
            self._free.append(actor)
        self.size = self._capacity = len(started)
        if not started:
            raise ClusterError(
                f"none of {count} Ray compile actors could be used: " + "; ".join(problems)
            )
        if problems:
            warn(
                f"asynccomp: {count - len(started)} of {count} Ray compile actors are not "
                "used: " + "; ".join(sorted(set(problems))),
                ClusterWarning,
            )

    def _start(self, count: int) -> tuple[list[Actor], list[str]]:
        """Blocking: start ``count`` actors; the ones ready within the startup timeout
        whose toolkit is ours, and why the others are not."""
        ray = import_ray()
        if self._closed or not ray.is_initialized():  # (a Ray call would start Ray anew)
            return [], []
        handles = [self._remote_class.remote() for _ in range(count)]
        for handle in handles:
            self._all[handle] = None
        calls = {handle.describe.remote(): handle for handle in handles}
        ready, pending = ray.wait(list(calls), num_returns=len(calls), timeout=self.startup_timeout)
        started: list[Actor] = []
        problems: list[str] = []
        if pending:
            problems.append(
                f"{len(pending)} did not start within {self.startup_timeout:g} s (no room "
                "on the cluster?)"
            )
        for ref in pending:
            self._kill(calls[ref])
        for ref in ready:
            handle = calls[ref]
            try:
                found = ray.get(ref)
            except Exception as exc:
                problems.append(f"one failed to start: {first_line(exc)}")
                self._kill(handle)
                continue
            if found["identity"] != self.identity:
                problems.append(
                    f"the actor on {found['host']} has another toolkit "
                    f"({_difference(found['identity'], self.identity)})"
                )
                self._kill(handle)
                continue
            actor = Actor(handle, int(found["pid"]), str(found["host"]))
            self._all[handle] = actor
            started.append(actor)
        if self.closed:  # the pool closed meanwhile (a replacement's thread outlives it)
            for actor in started:
                self._kill(actor.handle)
            return [], problems
        return started, problems

    @property
    def closed(self) -> bool:
        """Whether :meth:`kill_all` has run (from any thread)."""
        return self._closed

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        """Called as the engine starts: background work (replacing lost actors, letting
        cancelled ones stop) runs in ``task_group``."""
        self._task_group = task_group

    @property
    def size_alive(self) -> int:
        """Actors alive now."""
        return len(self._live)

    # -- the free list ---------------------------------------------------------------------

    async def _acquire(self) -> Actor | None:
        while not self._free:
            if not self._live and not self._replacing:
                return None
            await self._changed.wait()
        return self._free.pop()

    def _release(self, actor: Actor) -> None:
        if actor in self._live and not self._closed:
            self._free.append(actor)
            self._notify()

    def _lose(self, actor: Actor, *, kill: bool = False) -> None:
        if actor not in self._live:
            return
        self._live.discard(actor)
        with contextlib.suppress(ValueError):
            self._free.remove(actor)
        logger.warning("asynccomp: lost the Ray actor on %s (pid %d)", actor.host, actor.pid)
        if kill:
            self._kill(actor.handle)
        if not self._closed and self._task_group is not None:
            self._replacing += 1
            self._task_group.start_soon(self._replace)
        self._notify()

    async def _replace(self) -> None:
        """Start an actor in place of a lost one, where the cluster has room for it."""
        try:
            started, problems = await anyio.to_thread.run_sync(
                self._start, 1, abandon_on_cancel=True, limiter=self._replacements
            )
        finally:
            self._replacing -= 1
            self._notify()
        if self._closed:
            for actor in started:
                self._kill(actor.handle)
            return
        for actor in started:
            self._live.add(actor)
            self._free.append(actor)
        if problems:
            logger.warning("asynccomp: no replacement Ray actor: %s", "; ".join(problems))
        self._notify()

    def _notify(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()
        for watcher in self.worker_watchers:
            watcher()
        capacity = len(self._live) + self._replacing
        if capacity != self._capacity and not self._closed:
            # The engine's slots follow: jobs wait in its longest-first queue, not in
            # the pool for an actor that is not there.
            self._capacity = capacity
            for changed_to in self.watchers:
                changed_to(capacity)

    # -- closing ---------------------------------------------------------------------------

    def _kill(self, handle: Any) -> None:
        ray = import_ray()
        if ray.is_initialized():  # after shutdown, a Ray call would start Ray anew
            with contextlib.suppress(Exception):
                ray.kill(handle, no_restart=True)

    def kill_all(self) -> None:
        """Blocking: kill every actor this pool made (ready or not), wait until the
        cluster has them dead (briefly), and leave the cluster."""
        self._closed = True
        handles = list(self._all)
        live = len(self._live)
        before = _free_cpus() if handles and self._connected else 0.0
        for handle in handles:
            self._kill(handle)
        self._all.clear()
        self._live.clear()
        self._free.clear()
        if handles:
            with contextlib.suppress(Exception):
                _wait_dead(handles, before + live)
        if self._connected:
            self._connected = False
            disconnect()

    async def aclose(self) -> None:
        """Kill the actors (nothing of this engine keeps running on the cluster)."""
        if not self._closed or self._connected:
            await anyio.to_thread.run_sync(self.kill_all)
        self._notify()


def _free_cpus() -> float:
    try:
        return float(import_ray().available_resources().get("CPU", 0))
    except Exception:
        return 0.0


def _wait_dead(handles: list[Any], free: float) -> None:
    """Blocking, briefly: until the cluster has ``handles`` dead and shows ``free`` CPUs
    (what was free before plus what the live actors held), so that an engine started
    next finds them. On a shared cluster others may take them first: then it gives up
    after a second or two."""
    ray = import_ray()
    # A call to a killed actor fails once the cluster has it dead; its process is
    # exiting then.
    calls = [handle.describe.remote() for handle in handles]
    ray.wait(calls, num_returns=len(calls), timeout=KILL_WAIT)
    deadline = time.monotonic() + 2.0  # each node reports its free CPUs a moment later
    while _free_cpus() < free and time.monotonic() < deadline:
        time.sleep(0.05)


def first_line(exc: BaseException) -> str:
    """``exc``'s class and the first line of what it says (Ray's errors run long)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _difference(theirs: dict[str, str], ours: dict[str, str]) -> str:
    return "; ".join(
        f"{name} {theirs.get(name)!r}, here {ours[name]!r}"
        for name in ours
        if theirs.get(name) != ours[name]
    )
