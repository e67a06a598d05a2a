"""Long-lived NVRTC worker processes, so that NVRTC front ends run in parallel.

Workers start on demand: a job that finds no idle worker starts one while fewer than
``size`` exist, and otherwise waits for one to come free. So a pool never holds more
processes than the most jobs it was given at once, and a job never waits behind a
warm-up compile; :meth:`NvrtcProcessPool.warm_up` starts and warms every worker when a
caller wants that cost paid up front (a timed benchmark).

Faults stay with their job (see :mod:`._nvrtc_protocol` for the wire format):

- A worker that died while idle (killed, out of memory) never acknowledged the next
  job, so that job goes to another worker instead of failing.
- A worker that dies while compiling fails only that job (status ``"crashed"``).
- A job that outruns its timeout is stopped by NVRTC's flow callback inside the worker;
  if NVRTC has not stopped :data:`KILL_GRACE` seconds later, the worker is killed, so
  the result comes back on time. A replacement starts on next need.
- A cancelled job is cancelled inside its worker, which is kept if it answers within
  :data:`CANCEL_GRACE` seconds and killed otherwise.

:meth:`NvrtcProcessPool.aclose` kills every worker, so none outlives the engine.
"""

from __future__ import annotations

import itertools
import logging
import os
import pickle
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from ._base import BackendOutput, PreparedCompile, empty_folder
from ._nvrtc_protocol import CANCEL, COMPILE, HEADER, RECEIVED, RESULT, SEQ

__all__ = (
    "CANCEL_GRACE",
    "CRASH_GRACE",
    "KILL_GRACE",
    "NvrtcProcessPool",
    "python_path",
    "worker_command",
)

logger = logging.getLogger("asynccomp")

# How long past its timeout a job may take to notice the flow callback before its worker
# is killed.
KILL_GRACE = 0.5
# How long a cancelled job's worker may take to stop the compile before it is killed.
CANCEL_GRACE = 0.5
# How long a worker whose pipe closed may take to exit on its own before it is killed.
CRASH_GRACE = 2.0
# How long a worker may take to acknowledge a job (its reader thread does at once): a
# new process first loads NVRTC, a loaded machine can make that slow. One that does not
# answer in time is killed, and the job, which it never received, goes to another.
FIRST_ANSWER = 60.0
ANSWER_GRACE = 5.0
# A job whose worker died before receiving it goes to another worker, this many times.
_ATTEMPTS = 3

# What a dead or broken worker looks like from the parent's side of the pipes.
_DEAD = (
    anyio.EndOfStream,
    anyio.IncompleteRead,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    EOFError,
    pickle.UnpicklingError,
)


def worker_command() -> list[str]:
    """The command line of one worker process."""
    return [sys.executable, "-m", "asynccomp.backends._nvrtc_worker"]


def python_path() -> str:
    """``$PYTHONPATH`` for a Python process started in another folder: asynccomp's own
    parent folder first (a source checkout imports too), relative entries made absolute
    (they meant this process's working folder)."""
    package_parent = str(Path(__file__).resolve().parents[2])
    entries = [package_parent]
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if entry:
            entries.append(str(Path(entry).absolute()))
    return os.pathsep.join(dict.fromkeys(entries))


def _worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = python_path()
    env["ASYNCCOMP_WORKER_PARENT"] = str(os.getpid())  # it dies with this process
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
        self.answered = False  # has acknowledged a job before

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def exited(self) -> bool:
        return self.process.returncode is not None

    async def send(self, kind: bytes, payload: bytes) -> None:
        await self._send.send(HEADER.pack(len(payload) + 1) + kind + payload)

    async def receive(self) -> tuple[bytes, bytes]:
        (size,) = HEADER.unpack(await self._receive.receive_exactly(HEADER.size))
        frame = await self._receive.receive_exactly(size)
        return frame[:1], frame[1:]

    async def receive_result(self, seq: int) -> BackendOutput:
        kind, payload = await self.receive()
        if kind != RESULT:
            raise pickle.UnpicklingError(f"expected a result frame, got {kind!r}")
        got, out = pickle.loads(payload)
        if got != seq or not isinstance(out, BackendOutput):
            raise pickle.UnpicklingError(f"a result for job {got}, expected {seq}")
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
    """Up to ``size`` NVRTC worker processes, started on demand.

    ``warmup`` is what :meth:`warm_up` compiles in each worker. ``command`` replaces the
    worker's command line (tests start a worker that cannot start).
    """

    def __init__(
        self,
        size: int,
        warmup: PreparedCompile | None = None,
        command: Sequence[str] | None = None,
    ) -> None:
        self.size = size
        self.warmup = warmup
        self.command = list(command) if command is not None else worker_command()
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._starting = 0
        self._changed = anyio.Event()
        self._closed = False
        self._seq = itertools.count()

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
        """Start one worker process (the caller counted it as starting)."""
        # Shielded: cancelled halfway, the process would exist with nobody to reap it.
        with anyio.CancelScope(shield=True):
            process = await anyio.open_process(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=None,
                env=_worker_env(),
                # Nothing to find there: a quoted #include reads the caller's folder,
                # which every job names (see with_caller_folders), never this one's.
                cwd=empty_folder(),
                # Out of the terminal's process group: Ctrl-C is the parent's to handle.
                start_new_session=True,
            )
        return _Worker(process)

    async def _take(self) -> _Worker:
        """An idle worker, a new one if there is room, else the next one to come free."""
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            while self._idle:
                worker = self._idle.pop()
                if not worker.exited:
                    return worker
                await worker.kill()  # died while idle: reap it, look again
            if self._alive < self.size:
                self._starting += 1
                try:
                    return await self._spawn()
                finally:
                    self._starting -= 1
                    self._notify()
            await self._changed.wait()

    def _give_back(self, worker: _Worker) -> None:
        self._idle.append(worker)
        self._notify()

    async def warm_up(self) -> int:
        """Start every missing worker now, in parallel, and compile ``warmup`` in each
        idle one; returns how many workers are alive. A worker that cannot start is
        logged, not raised: jobs report it (``WorkerCrashed``) if it happens again."""

        async def warm() -> None:
            out = await self.run(self.warmup) if self.warmup is not None else None
            if out is not None and out.status != "ok":
                logger.warning("asynccomp: NVRTC warm-up failed: %s", out.message)

        async with anyio.create_task_group() as tg:
            for _ in range(max(0, self.size - len(self._busy))):
                tg.start_soon(warm)
        return self._alive

    async def run(self, prepared: PreparedCompile) -> BackendOutput:
        """Compile on a worker; see the module doc for what happens on faults."""
        for _ in range(_ATTEMPTS):
            try:
                worker = await self._take()
            except OSError as exc:  # no process could be started (fork limits, no memory)
                return BackendOutput(
                    "crashed", None, "", f"no NVRTC worker could be started: {exc}"
                )
            except anyio.ClosedResourceError:
                return BackendOutput("crashed", None, "", "the NVRTC worker pool is closed")
            out = await self._run_on(worker, prepared)
            if out is not None:
                return out
        return BackendOutput(
            "crashed",
            None,
            "",
            f"{_ATTEMPTS} NVRTC worker processes in a row died or did not answer before "
            "receiving the job",
        )

    async def _run_on(self, worker: _Worker, prepared: PreparedCompile) -> BackendOutput | None:
        """The job's output, or ``None`` when the worker died before receiving it."""
        seq = next(self._seq)
        self._busy.add(worker)
        keep = False
        try:
            acknowledged = False
            with anyio.move_on_after(ANSWER_GRACE if worker.answered else FIRST_ANSWER):
                try:
                    await worker.send(
                        COMPILE, pickle.dumps((seq, prepared), pickle.HIGHEST_PROTOCOL)
                    )
                    kind, _ = await worker.receive()
                except _DEAD:
                    return None
                acknowledged = worker.answered = kind == RECEIVED
            if not acknowledged:
                logger.warning("asynccomp: NVRTC worker %d did not answer; killed", worker.pid)
                return None
            limit = None if prepared.timeout is None else prepared.timeout + KILL_GRACE
            try:
                with anyio.move_on_after(limit) as deadline:
                    out = await worker.receive_result(seq)
            except _DEAD:
                await worker.kill(wait_first=CRASH_GRACE)
                why = _describe_exit(worker.process.returncode)
                return BackendOutput(
                    "crashed",
                    None,
                    "",
                    f"the NVRTC worker process (pid {worker.pid}) {why} while compiling",
                )
            except BaseException:
                # Cancelled: stop the compile inside the worker, and keep the worker
                # (warm) if it answers in time.
                with anyio.CancelScope(shield=True):
                    keep = await self._cancel(worker, seq)
                raise
            if deadline.cancelled_caught:
                return BackendOutput(
                    "timeout", None, "", "NVRTC did not stop at the timeout; worker killed"
                )
            keep = True
            return out
        finally:
            self._busy.discard(worker)
            if keep and not self._closed:
                self._give_back(worker)
            else:
                self._notify()  # one fewer worker: room to start another
                await worker.kill()

    async def _cancel(self, worker: _Worker, seq: int) -> bool:
        with anyio.move_on_after(CANCEL_GRACE):
            try:
                await worker.send(CANCEL, SEQ.pack(seq))
                await worker.receive_result(seq)
            except _DEAD:
                return False
            return True
        return False

    async def aclose(self) -> None:
        self._closed = True
        self._notify()  # waiters in _take() see the pool closed
        workers = [*self._idle, *self._busy]
        self._idle.clear()
        for worker in workers:
            await worker.kill()
