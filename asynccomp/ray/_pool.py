"""A job's trip to an actor on a Ray cluster and back: :class:`ActorPool`.

:class:`ActorPool` is the engine's :class:`~asynccomp.ray._actors.ActorSet` with the jobs
on it: each job goes to a free actor and its answer comes back. An actor lost mid-job is
replaced (by the set) and the job goes to another actor, at most ``retries`` times; a
cancelled job is cancelled on the cluster too, and its actor takes no other job until it
has stopped; an actor that does not answer past the job's timeout is killed.

A job's answer is awaited through its ``ObjectRef``'s future, woken on the event loop.
"""

from __future__ import annotations

import contextlib
import math
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from .._wakers import waker
from ..backends import BackendOutput, PreparedCompile
from ._actors import Actor, ActorSet, first_line
from ._connect import import_ray

__all__ = ("ANSWER_GRACE", "ActorPool")

#: How long past a job's timeout its actor may take to answer (NVRTC stops at its next
#: flow callback, nvcc is killed; the answer crosses the network) before the actor is
#: taken for hung, killed and replaced.
ANSWER_GRACE = 30.0

#: How long a cancelled job's actor may take to stop before it is killed.
SETTLE_GRACE = 10.0


class _Lost(Exception):
    """The actor went away (process killed, node gone) before it answered."""


class ActorPool(ActorSet):
    """The engine's compile actors on one Ray cluster, and the jobs on them. Blocking
    setup: :meth:`connect` (in a thread); then from the event loop: :meth:`run`,
    :meth:`warm_up`, :meth:`aclose`."""

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

    async def _call(self, actor: Actor, prepared: PreparedCompile, *, keep: bool) -> BackendOutput:
        """The actor's answer (the caller gives the actor back), or _Lost."""
        ray = import_ray()
        try:
            ref = actor.handle.compile.remote(prepared, self.identity[prepared.backend], keep)
        except ray.exceptions.RayError as exc:
            raise _Lost(first_line(exc)) from exc
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
            raise _Lost(first_line(exc)) from exc
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

    async def _settle(self, actor: Actor, ref: Any) -> None:
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

    async def _warm(self, actor: Actor) -> None:
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
