"""The client side: the engine's actors on a Ray cluster, and how a job reaches one.

:class:`ActorPool` starts the actors as the engine starts (one per CPU the cluster
offers, spread over its nodes), keeps the ones whose toolkit is this process's, hands
each job to a free one and brings its answer back. An actor lost mid-job (its process
killed, its node gone) is replaced where the cluster has room and the job goes to another
actor, at most ``retries`` times; a cancelled job is cancelled on the cluster too, and
its actor takes no other job until it has stopped. Closing kills every actor.

Ray calls that block (connecting, waiting for actors to start) run in threads; a job's
answer is awaited through its ``ObjectRef``'s future, woken on the event loop.
"""

from __future__ import annotations

import contextlib
import logging
import math
import queue
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

from .._wakers import waker
from ..backends import BackendOutput, PreparedCompile
from ..errors import ClusterError, ClusterWarning
from ._actor import CompileActor
from ._connect import connect, disconnect, import_ray

__all__ = ("ANSWER_GRACE", "ActorPool", "connect_within", "import_ray", "ray_calls_pending")

logger = logging.getLogger("asynccomp.ray")

#: How long past a job's timeout its actor may take to answer (NVRTC stops at its next
#: flow callback, nvcc is killed; the answer crosses the network) before the actor is
#: taken for hung, killed and replaced.
ANSWER_GRACE = 30.0

#: How long a cancelled job's actor may take to stop before it is killed.
SETTLE_GRACE = 10.0

#: How long closing waits for the cluster to confirm its actors dead.
KILL_WAIT = 10.0


@dataclass(eq=False)
class _Actor:
    handle: Any  # ray.actor.ActorHandle
    pid: int
    host: str


class _Lost(Exception):
    """The actor went away (process killed, node gone) before it answered."""


class ActorPool:
    """The engine's compile actors on one Ray cluster. Blocking setup: :meth:`connect`
    (in a thread); then from the event loop: :meth:`run`, :meth:`warm_up`,
    :meth:`aclose`."""

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
        self._all: dict[Any, _Actor | None] = {}  # every handle made, to kill at close
        self._free: list[_Actor] = []
        self._live: set[_Actor] = set()
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
            warnings.warn(
                f"asynccomp: {count - len(started)} of {count} Ray compile actors are not "
                "used: " + "; ".join(sorted(set(problems))),
                ClusterWarning,
                stacklevel=2,
            )

    def _start(self, count: int) -> tuple[list[_Actor], list[str]]:
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
        started: list[_Actor] = []
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
                problems.append(f"one failed to start: {_first_line(exc)}")
                self._kill(handle)
                continue
            if found["identity"] != self.identity:
                problems.append(
                    f"the actor on {found['host']} has another toolkit "
                    f"({_difference(found['identity'], self.identity)})"
                )
                self._kill(handle)
                continue
            actor = _Actor(handle, int(found["pid"]), str(found["host"]))
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

    # -- jobs ------------------------------------------------------------------------------

    async def run(self, prepared: PreparedCompile) -> BackendOutput:
        """Compile ``prepared`` on a free actor, on another if that one is lost."""
        kept_in = prepared.keep_dir
        if kept_in is not None:
            # A folder of this machine: the actor keeps nvcc's intermediates in one of
            # its own and sends them back.
            prepared = replace(prepared, keep_dir=None)
        lost: list[str] = []
        for _ in range(self.retries + 1):
            actor = await self._acquire()
            if actor is None:
                break
            try:
                out = await self._call(actor, prepared, keep=kept_in is not None)
            except _Lost as exc:
                lost.append(f"{actor.host} pid {actor.pid}: {exc}")
                # Killed too: an actor Ray calls unavailable may still be running.
                self._lose(actor, kill=True)
                continue
            self._release(actor)
            if kept_in is not None and out.intermediates:
                out = await anyio.to_thread.run_sync(_write_intermediates, out, kept_in)
            return out
        if not lost:
            message = "no Ray compile actor is left (every one was lost)"
        else:
            message = f"lost {len(lost)} Ray compile actor(s) running it: " + "; ".join(lost)
        return BackendOutput("crashed", None, "", message)

    async def _call(self, actor: _Actor, prepared: PreparedCompile, *, keep: bool) -> BackendOutput:
        """The actor's answer (the caller gives the actor back), or _Lost."""
        ray = import_ray()
        try:
            ref = actor.handle.compile.remote(prepared, self.identity[prepared.backend], keep)
        except ray.exceptions.RayError as exc:
            raise _Lost(_first_line(exc)) from exc
        except Exception as exc:  # e.g. it could not be pickled: this job's failure
            return BackendOutput("internal", None, "", f"could not send the job to Ray: {exc}")
        limit = math.inf
        if prepared.timeout is not None:
            # NVRTC runs twice when the preamble fast path falls back to the original.
            runs = 2 if prepared.fallback_source is not None else 1
            limit = runs * prepared.timeout + ANSWER_GRACE
        try:
            with anyio.move_on_after(limit) as waited:
                out: BackendOutput = await _answer(ref)
                return out
        except ray.exceptions.RayTaskError as exc:  # the actor's code raised: a bug there
            return BackendOutput("internal", None, "", f"the Ray actor failed: {exc}")
        except ray.exceptions.RayError as exc:  # ActorDiedError, NodeDiedError, ...
            raise _Lost(_first_line(exc)) from exc
        except BaseException:  # cancelled: stop it on the cluster too
            with contextlib.suppress(Exception):
                ray.cancel(ref)
            assert self._task_group is not None
            self._task_group.start_soon(self._settle, actor, ref)
            raise
        assert waited.cancelled_caught
        # Hung: killed, and not retried (it would hang the next actor too).
        self._lose(actor, kill=True)
        return BackendOutput(
            "timeout",
            None,
            "",
            f"the Ray actor on {actor.host} (pid {actor.pid}) did not answer "
            f"{ANSWER_GRACE:g} s past the timeout; it was killed",
        )

    async def _settle(self, actor: _Actor, ref: Any) -> None:
        """Give a cancelled job's actor back once it has stopped (killed if it will not)."""
        ray = import_ray()
        with anyio.move_on_after(SETTLE_GRACE):
            try:
                await _answer(ref)
            except ray.exceptions.RayActorError:
                self._lose(actor)
                return
            except Exception:  # TaskCancelledError: stopped, as asked
                pass
            self._release(actor)
            return
        self._lose(actor, kill=True)

    async def warm_up(self) -> None:
        """Load NVRTC and the common headers in every free actor (taken off the free
        list meanwhile: an actor runs one thing at a time). Each comes back when its own
        warm-up has ended; one that died is lost (and replaced); busy actors are left
        alone."""
        actors, self._free = self._free, []
        async with anyio.create_task_group() as task_group:
            for actor in actors:
                task_group.start_soon(self._warm, actor)

    async def _warm(self, actor: _Actor) -> None:
        ray = import_ray()
        try:
            ref = actor.handle.warm_up.remote()
        except ray.exceptions.RayError:
            self._lose(actor, kill=True)
            return
        try:
            await _answer(ref)
        except ray.exceptions.RayActorError:  # died (or unreachable): never used again
            self._lose(actor, kill=True)
            return
        except ray.exceptions.RayError:  # its warm-up failed; it can still compile
            pass
        except BaseException:  # cancelled: the actor is free once its warm-up ended
            assert self._task_group is not None
            self._task_group.start_soon(self._settle, actor, ref)
            raise
        self._release(actor)

    # -- the free list ---------------------------------------------------------------------

    async def _acquire(self) -> _Actor | None:
        while not self._free:
            if not self._live and not self._replacing:
                return None
            await self._changed.wait()
        return self._free.pop()

    def _release(self, actor: _Actor) -> None:
        if actor in self._live and not self._closed:
            self._free.append(actor)
            self._notify()

    def _lose(self, actor: _Actor, *, kill: bool = False) -> None:
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


_ray_calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
_ray_thread: threading.Thread | None = None
_ray_thread_lock = threading.Lock()
_ray_pending = 0  # calls queued or running in the Ray thread


def _in_ray_thread(call: Callable[[], None]) -> None:
    """Run ``call`` in this process's one Ray thread: a daemon thread that lives as long
    as the process. Not a thread per connect: a local Ray instance that ``ray.init``
    starts (``address=None``) shares its fate with the *thread* that started it (its
    processes get PR_SET_PDEATHSIG), so a thread that ended after connecting took the
    instance's GCS with it, and every later Ray call waited 60 s, then aborted."""
    global _ray_thread, _ray_pending
    with _ray_thread_lock:
        _ray_pending += 1
        if _ray_thread is None or not _ray_thread.is_alive():
            _ray_thread = threading.Thread(
                target=_serve_ray_calls, name="asynccomp-ray", daemon=True
            )
            _ray_thread.start()
    _ray_calls.put(call)


def _serve_ray_calls() -> None:
    global _ray_pending
    while True:
        call = _ray_calls.get()
        try:
            call()
        finally:
            with _ray_thread_lock:
                _ray_pending -= 1


def ray_calls_pending() -> int:
    """Connects queued or under way in the Ray thread (one abandoned by an engine that
    gave up on it included)."""
    with _ray_thread_lock:
        return _ray_pending


async def connect_within(pool: ActorPool) -> None:
    """Run ``pool.connect`` in a daemon thread of its own, waiting at most the pool's
    startup timeout for it to join the cluster (ClusterError past it), then for its
    actors (bounded by the same timeout in :meth:`ActorPool._start`).

    ``ray.init`` cannot be interrupted, and may not return for many minutes: the thread
    is abandoned (:meth:`ActorPool.abandon`), and whenever it returns it leaves what it
    joined. A daemon thread, not one of anyio's, which the interpreter waits for as it
    exits: a command line that gave up on a cluster must still end."""
    joined, finished = anyio.Event(), anyio.Event()
    wake_joined, wake_finished = waker(joined), waker(finished)
    failed: list[BaseException] = []

    def run() -> None:
        try:
            pool.connect(wake_joined)
        except BaseException as exc:  # handed to the engine, or dropped if abandoned
            failed.append(exc)
        finally:
            wake_joined()
            wake_finished()

    _in_ray_thread(run)
    try:
        with anyio.move_on_after(pool.startup_timeout):
            await joined.wait()
        if not joined.is_set() and pool.abandon():
            raise ClusterError(
                f"could not reach the Ray cluster at {pool.cluster}: Ray did not connect "
                f"within {pool.startup_timeout:g} s (startup_timeout)"
            )
        await finished.wait()
    except anyio.get_cancelled_exc_class():
        if not pool.abandon():  # it had just finished: the engine will not close it
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(pool.kill_all)
        raise
    if failed:
        raise failed[0]


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


async def _answer(ref: Any) -> Any:
    """The value of a Ray ``ObjectRef`` (its error raised), awaited without a thread."""
    future: Future[Any] = ref.future()
    if not future.done():
        done = anyio.Event()
        wake = waker(done)
        future.add_done_callback(lambda _: wake())
        await done.wait()
    return future.result()


def _write_intermediates(out: BackendOutput, folder: str) -> BackendOutput:
    """Blocking: write the intermediates an actor sent into the job's dump folder."""
    try:
        for name, data in out.intermediates:
            (Path(folder) / Path(name).name).write_bytes(data)
    except OSError as exc:
        return replace(
            out,
            intermediates=(),
            warnings=(*out.warnings, f"nvcc intermediates not kept: {exc}"),
        )
    return replace(out, intermediates=())


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _difference(theirs: dict[str, str], ours: dict[str, str]) -> str:
    return "; ".join(
        f"{name} {theirs.get(name)!r}, here {ours[name]!r}"
        for name in ours
        if theirs.get(name) != ours[name]
    )
