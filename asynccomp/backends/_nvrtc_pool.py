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

**Files.** Every worker gets a folder of its own as ``$TMPDIR``, where NVRTC writes its
automatic precompiled headers; the pool removes it whenever it reaps a worker, killed or
not, and as it starts its first worker and as it closes it removes the folders of
engines that are no longer running (their workers died with them:
``PR_SET_PDEATHSIG``); see :mod:`._nvrtc_files`. Workers
that never compile with ``-pch`` write nothing there.

**Precompiled headers** (jobs rendered with ``-pch``, :data:`~.nvrtc.PCH_OPTION`): a PCH
is usable only in the process that made it, so a job goes to an idle worker that holds
the PCH for its header prefix and options (:func:`pch_key`) when there is one, else to
an idle worker holding none, else to any; jobs without ``-pch`` prefer workers holding
none, so the holders stay free. Which PCH a worker holds is read from NVRTC's log
("creating/using precompiled header file"). A worker that comes to hold more than
:data:`MAX_PCH_PER_WORKER` is retired after its job (its files go with it), which bounds
the disk used at about ``workers x MAX_PCH_PER_WORKER x 450 MB``.
:meth:`NvrtcProcessPool.pch_counts` says how many PCH were made and reused.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import pickle
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
import anyio.abc
import anyio.to_thread
from anyio.streams.buffered import BufferedByteReceiveStream

from .._os import child_environ, empty_folder
from ._base import BackendOutput, PreparedCompile
from ._nvrtc_api import uses_pch
from ._nvrtc_files import (
    existing_worker_folders_root,
    sweep_worker_folders,
    worker_folders_root,
)
from ._nvrtc_protocol import CANCEL, COMPILE, HEADER, RECEIVED, RESULT, SEQ

__all__ = (
    "CANCEL_GRACE",
    "CRASH_GRACE",
    "KILL_GRACE",
    "MAX_PCH_PER_WORKER",
    "NvrtcProcessPool",
    "header_prefix",
    "pch_key",
    "sweep_worker_folders",
    "worker_command",
    "worker_folders_root",
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
#: A worker holding more precompiled headers than this is retired after its job.
MAX_PCH_PER_WORKER = 2

# What NVRTC's log says of a compile with -pch (NVRTC 12.8 to 13.5).
_PCH_MADE = "creating precompiled header file"
_PCH_USED = "using precompiled header file"

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


def _worker_env(folder: Path) -> dict[str, str]:
    return child_environ(
        ASYNCCOMP_WORKER_PARENT=str(os.getpid()),  # it dies with this process
        TMPDIR=str(folder),  # NVRTC's precompiled headers go there
    )


def header_prefix(source: str) -> str:
    """The source's leading preprocessor lines (with blank and ``//`` comment lines): the
    part an automatic precompiled header covers (NVRTC stops at the first other token).

    >>> header_prefix('#include <a.h>\\n\\n// x\\n#include <b.h>\\nint k;\\n#include <c.h>\\n')
    '#include <a.h>\\n\\n// x\\n#include <b.h>\\n'
    """
    end = 0
    continued = False
    for line in source.splitlines(keepends=True):
        text = line.strip()
        if not (continued or not text or text.startswith(("#", "//"))):
            break
        continued = text.endswith("\\")
        end += len(line)
    return source[:end]


def pch_key(prepared: PreparedCompile) -> str | None:
    """Which precompiled header a compile needs: its options and header prefix (NVRTC
    makes a new PCH when either differs); ``None`` for a compile without ``-pch``. The
    program name does not matter (NVRTC reuses a PCH across names: checked)."""
    if prepared.backend != "nvrtc" or not uses_pch(prepared.options):
        return None
    digest = hashlib.sha256()
    for option in prepared.options:
        digest.update(option.encode("utf-8", "surrogateescape") + b"\0")
    digest.update(header_prefix(prepared.source).encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:20]


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
    def __init__(self, process: anyio.abc.Process, folder: Path | None) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.folder = folder  # its $TMPDIR, removed when it is reaped
        self._send = process.stdin
        self._receive = BufferedByteReceiveStream(process.stdout)
        self.answered = False  # has acknowledged a job before
        self.pch_keys: list[str] = []  # the precompiled headers it holds

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
            if self.folder is not None:  # its precompiled headers (hundreds of MB)
                await anyio.to_thread.run_sync(shutil.rmtree, self.folder, True)
                self.folder = None


#: The numbers of this process's worker folders: every pool's (two engines of one
#: process once numbered theirs alike, and the second's first worker could not start).
_FOLDER_NUMBERS = itertools.count()


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
        #: Told (on the event loop) whenever the workers alive may have changed.
        self.worker_watchers: list[Callable[[], None]] = []
        self._closed = False
        self._seq = itertools.count()
        self._root: Path | None = None  # made, and swept, at the first start
        self._pch = {"created": 0, "reused": 0, "not_made": 0, "retired": 0}

    @property
    def _alive(self) -> int:
        """Workers idle, busy or starting: what ``size`` bounds."""
        return len(self._idle) + len(self._busy) + self._starting

    def worker_pids(self) -> list[int]:
        """Process ids of the workers now alive (idle or busy)."""
        return [w.pid for w in (*self._idle, *self._busy)]

    def worker_folders(self) -> dict[int, Path]:
        """Each live worker's folder (its ``$TMPDIR``, where its PCH files are)."""
        return {w.pid: w.folder for w in (*self._idle, *self._busy) if w.folder is not None}

    def pch_holders(self) -> dict[int, tuple[str, ...]]:
        """The precompiled headers (:func:`pch_key`) each live worker holds."""
        return {w.pid: tuple(w.pch_keys) for w in (*self._idle, *self._busy)}

    def pch_counts(self) -> dict[str, int]:
        """Compiles with ``-pch`` that made a PCH (``created``), used one (``reused``),
        or neither (``not_made``: NVRTC declined, e.g. a ``#line`` in the prefix), and
        workers retired for holding too many (``retired``)."""
        return dict(self._pch)

    def _notify(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()
        self._tell_watchers()

    def _tell_watchers(self) -> None:
        for watcher in self.worker_watchers:
            watcher()

    def _new_folder(self) -> Path:
        """Blocking: a fresh folder for one worker (the first also sweeps stale ones)."""
        if self._root is None:
            self._root = worker_folders_root()
            self._sweep(self._root)
        while True:
            folder = self._root / f"{os.getpid()}-{next(_FOLDER_NUMBERS)}"
            try:
                folder.mkdir(0o700)
            except FileExistsError:  # left by an ended process that had this pid
                continue
            return folder

    async def _spawn(self) -> _Worker:
        """Start one worker process (the caller counted it as starting)."""
        # Shielded: cancelled halfway, the process would exist with nobody to reap it.
        with anyio.CancelScope(shield=True):
            folder = await anyio.to_thread.run_sync(self._new_folder)
            try:
                process = await anyio.open_process(
                    self.command,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=None,
                    env=_worker_env(folder),
                    # Nothing to find there: a quoted #include reads the caller's folder,
                    # which every job names (see with_caller_folders), never this one's.
                    cwd=empty_folder(),
                    # Out of the terminal's process group: Ctrl-C is the parent's to handle.
                    start_new_session=True,
                )
            except BaseException:
                await anyio.to_thread.run_sync(shutil.rmtree, folder, True)
                raise
        return _Worker(process, folder)

    def _pick_idle(self, key: str | None) -> _Worker | None:
        """The idle worker a job with PCH ``key`` should take (see the module doc)."""
        if not self._idle:
            return None
        chosen = None
        if key is not None:
            chosen = next((w for w in reversed(self._idle) if key in w.pch_keys), None)
        if chosen is None:
            chosen = next((w for w in reversed(self._idle) if not w.pch_keys), None)
        if chosen is None:
            chosen = self._idle[-1]
        self._idle.remove(chosen)
        return chosen

    async def _take(self, key: str | None = None) -> _Worker:
        """An idle worker (the holder of PCH ``key`` first), a new one if there is room,
        else the next one to come free."""
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            while (worker := self._pick_idle(key)) is not None:
                if not worker.exited:
                    return worker
                self._tell_watchers()  # died while idle: one fewer
                await worker.kill()  # reap it, look again
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
        key = pch_key(prepared)
        for _ in range(_ATTEMPTS):
            try:
                worker = await self._take(key)
            except OSError as exc:  # no process could be started (fork limits, no memory)
                return BackendOutput(
                    "crashed", None, "", f"no NVRTC worker could be started: {exc}"
                )
            except anyio.ClosedResourceError:
                return BackendOutput("crashed", None, "", "the NVRTC worker pool is closed")
            out = await self._run_on(worker, prepared, key)
            if out is not None:
                return out
        return BackendOutput(
            "crashed",
            None,
            "",
            f"{_ATTEMPTS} NVRTC worker processes in a row died or did not answer before "
            "receiving the job",
        )

    async def _run_on(
        self, worker: _Worker, prepared: PreparedCompile, key: str | None = None
    ) -> BackendOutput | None:
        """The job's output, or ``None`` when the worker died before receiving it."""
        seq = next(self._seq)
        self._busy.add(worker)
        self._tell_watchers()  # a worker just started is alive from here
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
            keep = self._note_pch(worker, key, out)
            return out
        finally:
            self._busy.discard(worker)
            if keep and not self._closed:
                self._give_back(worker)
            else:
                self._notify()  # one fewer worker: room to start another
                await worker.kill()

    def _note_pch(self, worker: _Worker, key: str | None, out: BackendOutput) -> bool:
        """Record which PCH ``worker`` holds after a job; whether to keep the worker."""
        if key is None or out.status not in ("ok", "failed"):
            return True
        if _PCH_MADE in out.log:
            self._pch["created"] += 1
            if key not in worker.pch_keys:
                worker.pch_keys.append(key)
        elif _PCH_USED in out.log:
            self._pch["reused"] += 1
            if key not in worker.pch_keys:  # another job's PCH with the same prefix
                worker.pch_keys.append(key)
        else:
            self._pch["not_made"] += 1
        if len(worker.pch_keys) > MAX_PCH_PER_WORKER:
            self._pch["retired"] += 1
            return False  # killed, and its files removed; a fresh one starts on need
        return True

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
        # Again at close: an engine that started no worker after one was killed (a
        # compile server restarted, then serving cache hits only) left that one's
        # folders, precompiled headers of hundreds of MB, for whoever came next.
        with anyio.CancelScope(shield=True):
            root = self._root or await anyio.to_thread.run_sync(existing_worker_folders_root)
            if root is not None:
                await anyio.to_thread.run_sync(self._sweep, root)

    @staticmethod
    def _sweep(root: Path) -> None:
        """Blocking: remove the folders of engines that are no longer running."""
        swept = sweep_worker_folders(root)
        if swept:
            logger.info("asynccomp: removed %d stale NVRTC worker folders", len(swept))
