"""Long-lived NVRTC worker processes, so that NVRTC front ends run in parallel.

The pool holds at most ``size`` workers (the engine's limiter sends it no more jobs than
that). A worker is started on first need, or all at once by :meth:`warm_up`, and each
compiles a small warm-up program first: the first compiles in a fresh process are slow
and erratic, so that cost is paid before the timed work.

Faults stay with their job: a worker that dies (a crash, an out-of-memory kill) fails only
the job it was running with status ``"crashed"`` and is replaced on next need; a job that
outruns its timeout is stopped by NVRTC's flow callback inside the worker, and if NVRTC
does not stop within a grace period the worker is killed. A cancelled job's worker is
killed too. :meth:`aclose` kills every worker, so none outlives the engine.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from .base import BackendOutput, PreparedCompile

__all__ = ("NvrtcProcessPool",)

_HEADER_SIZE = 8
# How long past its timeout a job may take to notice the flow callback before its worker
# is killed.
KILL_GRACE = 5.0
# How long a worker whose pipe closed may take to exit on its own before it is killed.
CRASH_GRACE = 2.0


def _worker_env() -> dict[str, str]:
    # Make ``-m asynccomp.backends.nvrtc_worker`` importable from a source checkout too.
    package_parent = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    return env


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


class _Worker:
    def __init__(self, process: anyio.abc.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self._send = process.stdin
        self._receive = BufferedByteReceiveStream(process.stdout)

    @property
    def pid(self) -> int:
        return self.process.pid

    async def call(self, prepared: PreparedCompile) -> BackendOutput:
        payload = pickle.dumps(prepared, protocol=pickle.HIGHEST_PROTOCOL)
        await self._send.send(len(payload).to_bytes(_HEADER_SIZE, "little") + payload)
        size = int.from_bytes(await self._receive.receive_exactly(_HEADER_SIZE), "little")
        out = pickle.loads(await self._receive.receive_exactly(size))
        assert isinstance(out, BackendOutput)
        return out

    async def kill(self, wait_first: float = 0.0) -> None:
        """Stop the process and reap it.

        ``wait_first``: seconds to let a process that is already exiting (its pipe hit end
        of file) finish on its own. Killing it instead would make ``Popen.send_signal``
        reap the exited child itself, racing asyncio's child watcher, which then reports
        exit status 255 instead of the signal that really ended it.
        """
        with anyio.CancelScope(shield=True):
            if wait_first > 0:
                with anyio.move_on_after(wait_first):
                    await self.process.wait()
            if self.process.returncode is None:
                try:
                    self.process.kill()
                except ProcessLookupError:
                    pass
            await self.process.aclose()


class NvrtcProcessPool:
    """Up to ``size`` NVRTC worker processes; ``warmup`` is compiled once by each.

    ``size`` bounds the processes alive or starting at any moment: a job that finds no
    idle worker starts one only while fewer than ``size`` exist, and otherwise waits for
    one to come free (or to finish warming up).
    """

    def __init__(self, size: int, warmup: PreparedCompile | None = None) -> None:
        self.size = size
        self.warmup = warmup
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._starting = 0
        self._changed = anyio.Event()
        self._closed = False

    @property
    def _alive(self) -> int:
        """Workers idle, busy or starting: what ``size`` bounds."""
        return len(self._idle) + len(self._busy) + self._starting

    def worker_pids(self) -> list[int]:
        """Process ids of the workers now alive (idle or busy)."""
        return [w.pid for w in (*self._idle, *self._busy)]

    def _notify(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def _spawn(self) -> _Worker:
        """Start one worker and warm it up (the caller counted it as starting)."""
        # Shielded: cancelled halfway, the process would exist with nobody to reap it.
        with anyio.CancelScope(shield=True):
            process = await anyio.open_process(
                [sys.executable, "-m", "asynccomp.backends.nvrtc_worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=None,
                env=_worker_env(),
            )
        worker = _Worker(process)
        if self.warmup is not None:
            try:
                await worker.call(self.warmup)
            except BaseException:
                await worker.kill()
                raise
        return worker

    def _reserve(self) -> None:
        # Counted before the first await, so concurrent callers see the room taken.
        self._starting += 1

    async def _start_reserved(self) -> _Worker:
        # The caller puts the worker into _idle or _busy with no await in between, so it
        # is never uncounted.
        try:
            return await self._spawn()
        finally:
            self._starting -= 1
            self._notify()

    async def _take(self) -> _Worker:
        """An idle worker, a new one if there is room, else the next one to come free."""
        while True:
            if self._closed:
                raise RuntimeError("the NVRTC worker pool is closed")
            if self._idle:
                return self._idle.pop()
            if self._alive < self.size:
                self._reserve()
                return await self._start_reserved()
            await self._changed.wait()

    def _give_back(self, worker: _Worker) -> None:
        self._idle.append(worker)
        self._notify()

    async def warm_up(self) -> None:
        """Start every missing worker now (in parallel) and wait until all have warmed up
        (those another task is starting too)."""

        async def add() -> None:
            self._give_back(await self._start_reserved())

        async with anyio.create_task_group() as tg:
            for _ in range(self.size - self._alive):
                self._reserve()
                tg.start_soon(add)
        while self._starting:
            await self._changed.wait()

    async def run(self, prepared: PreparedCompile) -> BackendOutput:
        try:
            worker = await self._take()
        except OSError as exc:  # no process could be started (fork limits, no memory)
            return BackendOutput("crashed", None, "", f"no NVRTC worker could be started: {exc}")
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError) as exc:
            return BackendOutput(
                "crashed", None, "", f"an NVRTC worker died while warming up: {exc!r}"
            )
        self._busy.add(worker)
        healthy = False
        try:
            limit = None if prepared.timeout is None else prepared.timeout + KILL_GRACE
            with anyio.move_on_after(limit) as deadline:
                out = await worker.call(prepared)
                healthy = True
            if deadline.cancelled_caught:
                return BackendOutput("timeout", None, "", "NVRTC did not stop; worker killed")
            return out
        except (
            anyio.EndOfStream,
            anyio.IncompleteRead,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            EOFError,
            pickle.UnpicklingError,
        ):
            with anyio.CancelScope(shield=True):
                await worker.kill(wait_first=CRASH_GRACE)
            why = _describe_exit(worker.process.returncode)
            return BackendOutput(
                "crashed",
                None,
                "",
                f"the NVRTC worker process (pid {worker.pid}) {why} while compiling",
            )
        finally:
            self._busy.discard(worker)
            if healthy and not self._closed:
                self._give_back(worker)
            else:
                self._notify()  # one fewer worker: room to start another
                await worker.kill()

    async def aclose(self) -> None:
        self._closed = True
        self._notify()  # waiters in _take() see the pool closed
        workers = [*self._idle, *self._busy]
        self._idle.clear()
        for worker in workers:
            await worker.kill()
