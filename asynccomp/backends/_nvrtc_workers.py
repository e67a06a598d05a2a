"""NVRTC in worker processes, so that NVRTC front ends run in parallel: :class:`NvrtcWorkers`,
on the process kernel (:class:`asynccomp.workers.WorkerPool`).

Workers are forked from a template that loaded NVRTC and compiled a tiny program once (no
headers: tens of milliseconds), so no worker loads NVRTC or its builtins again; the
template starts with the engine (:meth:`NvrtcWorkers.prime`), in the background. Workers
start on demand (a job that finds no idle worker forks one while fewer than ``size``
exist: milliseconds) or all at once for :meth:`NvrtcWorkers.warm_up`, and live as long
as the backend.

Faults stay with their job: a worker that died idle never received the next job (it
goes to another); one that dies compiling fails only its job (``crashed``, naming how it
died); a job past its timeout is stopped by NVRTC's flow callback in the worker, and its
worker is killed :data:`KILL_GRACE` seconds later if NVRTC has not stopped; a cancelled
job is cancelled in its worker, which is kept if it stops within :data:`CANCEL_GRACE`.

**Files.** Every worker gets a folder of its own as ``$TMPDIR`` (:mod:`._nvrtc_files`),
where NVRTC writes its automatic precompiled headers; it is removed whenever the worker
ends, and a backend removes the folders of engines that no longer run as it starts its
first worker and as it closes.

**Precompiled headers** (jobs rendered with ``-pch``): a PCH is usable only in the process
that made it, or in a sibling forked from the same template. Workers share one PCH per
header prefix and options (:func:`pch_key`): the first to make one publishes it in a
folder of the backend's, and every compile after uses it (:mod:`._nvrtc_shared_pch`).
Until then, and where workers cannot share (spawned, not forked; past the shared bound),
a job goes to an idle worker that holds the PCH for its key (the worker's tag) when
there is one, else to one holding none, else to any. Which PCH a worker holds is read
from NVRTC's log; a worker that comes to hold more than :data:`MAX_PCH_PER_WORKER` is
recycled after its job (its files go with it, unless published), which bounds the disk
used at about ``(workers x MAX_PCH_PER_WORKER + MAX_SHARED) x 450 MB``.

**One maker at a time.** While a job makes the shared PCH for its key, the other jobs
for that key compile without one (or with it, if it is published by the time they
start) instead of each making their own: the first wave of a batch runs as fast as
without PCHs, and every later one uses the PCH. Measured on 16 cores (an H100 machine,
TileLang's 64-config autotune, 16 workers): 16 workers making the same PCH at once took
5.2 s a compile (median), one without a PCH 3.4 s, one using it 1.7 s.

**Made ahead.** A PCH can be made before any job needs it: from a compile server's
hints as it starts (:mod:`._nvrtc_pch_hints`), or for a job given to
:meth:`NvrtcWorkers.make_pch` (``Engine.make_pch``: a client that knows its kernels'
headers before it has a kernel, such as TileLang's facade at ``register()``). Until it
is made, jobs that need it wait for it: it is already under way, so it ends sooner than
a compile without it would.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

from .._os import empty_folder
from .._wakers import soon_caller
from ..workers import PoolSettings, WorkerPool, cancel_event
from ._base import BackendOutput, PreparedCompile
from ._nvrtc_api import compile_prepared
from ._nvrtc_files import existing_worker_folders_root, sweep_worker_folders, worker_folders_root
from ._nvrtc_pch_hints import PchHints, ahead_compile
from ._nvrtc_shared_pch import FOLDER_ENV, compile_sharing, header_prefix, names_shared, pch_key

__all__ = (
    "CANCEL_GRACE",
    "KILL_GRACE",
    "MAX_PCH_PER_WORKER",
    "NvrtcWorkers",
    "header_prefix",
    "pch_key",
)

logger = logging.getLogger("asynccomp")

#: How long past its timeout a job may take to notice the flow callback before its
#: worker is killed; how long a cancelled job's worker may take to stop.
KILL_GRACE = 0.5
CANCEL_GRACE = 0.5
#: A worker holding more precompiled headers than this is recycled after its job.
MAX_PCH_PER_WORKER = 2
_PCH_COUNTS = ("created", "reused", "shared", "not_made", "skipped", "retired", "ahead")
#: Seconds a PCH made ahead from a hint may take (TileLang's: 1-3 s), and a job that
#: needs it may wait for it before making its own.
AHEAD_TIMEOUT = 120.0
AHEAD_WAIT = 30.0

# What NVRTC's log says of a compile with -pch (NVRTC 12.8 to 13.5).
_PCH_MADE = "creating precompiled header file"
_PCH_USED = "using precompiled header file"

#: The numbers of this process's worker folders, over every backend of the process.
_FOLDER_NUMBERS = itertools.count()


def worker_python() -> str:
    """The interpreter the workers run: this process's."""
    return sys.executable


_TINY = 'extern "C" __global__ void asynccomp_load() {}\n'


def _load(warmup: PreparedCompile | None) -> None:
    """The template's initializer: NVRTC loaded, and run once on a tiny program (its
    builtins loaded, its first-compile set-up done) for every worker forked after."""
    if warmup is None:
        from cuda.bindings import nvrtc  # noqa: F401 - loaded once, for every worker

        return
    tiny = dataclasses.replace(warmup, source=_TINY, filename="asynccomp_load.cu")
    compile_prepared(tiny)


def _compile(prepared: PreparedCompile, make_pch: bool = True) -> BackendOutput:
    """A task: one compile, stopped early when its pool cancels it; ``make_pch=False``:
    another worker is making the PCH it needs (use it if published by now, else none)."""
    try:
        return compile_sharing(prepared, pch_key(prepared), cancel_event(), make=make_pch)
    except Exception as exc:  # report, don't die: the parent maps it to a failure
        return BackendOutput("internal", None, "", f"NVRTC worker error: {exc!r}")


#: A task: a compile that makes no PCH (another worker is making the one it needs).
_compile_without_making = functools.partial(_compile, make_pch=False)


class NvrtcWorkers:
    """Up to ``size`` NVRTC worker processes (see the module's doc)."""

    def __init__(
        self,
        size: int,
        warmup: PreparedCompile | None = None,
        *,
        share_pch: bool = True,
        hints: PchHints | None = None,
    ) -> None:
        self.size = size
        self._warmup = warmup
        self._share_pch = share_pch
        self.hints = hints  # where the PCHs made are remembered (a compile server's)
        self._ahead: dict[str, anyio.Event] = {}  # PCHs being made ahead, by key
        self._hinted: set[str] = set()  # made ahead, no job has used yet
        self._making: set[str] = set()  # keys a job may be making the shared PCH of
        self._private: set[str] = set()  # keys whose PCH a worker holds (not shared)
        self._shared: set[str] = set()  # keys whose PCH the workers share (published)
        # Where PCHs asked for by make_pch are made: the backend's, so that one outlives
        # the call that asked (a client of a compile server that leaves, a cancelled
        # caller): others' jobs may be waiting for it. None: in the caller's task.
        self._task_group: anyio.abc.TaskGroup | None = None
        self._root: Path | None = None  # made, and swept, at the first start
        # The workers' shared PCH files: a folder beside theirs (they make it).
        self._shared_name: str | None = None
        self._pch = dict.fromkeys(_PCH_COUNTS, 0)
        self._pool: WorkerPool | None = None  # made at the first need
        self._watchers: list[Callable[[], None]] = []

    @property
    def pool(self) -> WorkerPool:
        if self._pool is None:
            self._pool = WorkerPool(self._settings())
            for watcher in self._watchers:
                self._pool.watch(watcher)
        return self._pool

    def _settings(self) -> PoolSettings:
        if self._share_pch:  # named now, made by a worker only when there is one to share
            self._shared_name = f"{os.getpid()}-{next(_FOLDER_NUMBERS)}"
        return PoolSettings(
            "nvrtc",
            self.size,
            initializers=[functools.partial(_load, self._warmup)],
            eager=False,
            start_timeout=60.0,
            cancel_grace=CANCEL_GRACE,
            folder=self._new_folder,
            # Nothing to find there: a quoted #include reads the caller's folder, which
            # every job names (see with_caller_folders), never this one's.
            cwd=empty_folder(),
            python=worker_python(),
            # "": no sharing, even where this process's environment says otherwise.
            environ={FOLDER_ENV: self._shared_name or ""},
        )

    def _new_folder(self) -> Path:
        """A fresh folder for one worker (the first also sweeps stale ones)."""
        if self._root is None:
            self._root = worker_folders_root()
            _sweep(self._root)
        while True:
            folder = self._root / f"{os.getpid()}-{next(_FOLDER_NUMBERS)}"
            try:
                folder.mkdir(0o700)
            except FileExistsError:  # left by an ended process that had this pid
                continue
            return folder

    def worker_pids(self) -> list[int]:
        return [] if self._pool is None else self._pool.pids()

    def worker_folders(self) -> dict[int, Path]:
        """Each live worker's folder (its ``$TMPDIR``, where its PCH files are)."""
        return {} if self._pool is None else self._pool.folders()

    @property
    def shared_folder(self) -> Path | None:
        """Where the workers share their PCH files (``None``: they do not share)."""
        if self._shared_name is None or self._root is None:
            return None
        return self._root / self._shared_name

    def pch_holders(self) -> dict[int, tuple[str, ...]]:
        """The precompiled headers (:func:`pch_key`) each live worker holds."""
        return {} if self._pool is None else self._pool.tags()

    def pch_counts(self) -> dict[str, int]:
        """Compiles with ``-pch`` that made a PCH (``created``), used one (``reused``),
        or neither (``not_made``: NVRTC declined, e.g. a ``#line`` in the prefix;
        ``skipped``: another worker was making the PCH it needed), of
        which made or used a PCH the workers share (``shared``), and workers retired
        for holding too many (``retired``); PCHs made ahead, from the hints as the
        backend started or for :meth:`make_pch` (``ahead``, counted in ``created``
        too)."""
        return dict(self._pch)

    def watch(self, changed: Callable[[], None]) -> None:
        """Call ``changed()`` on this event loop when workers start or end."""
        call_soon = soon_caller()
        self._watchers.append(lambda: call_soon(changed))
        if self._pool is not None:
            self._pool.watch(self._watchers[-1])

    def prime(self) -> None:
        """Start the template now, in the background (the engine starts it as it
        starts): the first jobs fork their workers at once."""
        self.pool.prime()

    async def warm_up(self) -> int:
        """Start every worker now (each a warm fork of the template) and wait until they
        are ready; how many are alive. A failed start is logged, not raised: jobs report
        it if it happens again."""
        try:
            await self.pool.ready()
        except Exception as exc:
            logger.warning("asynccomp: NVRTC workers did not start: %s", exc)
        return len(self.pool.pids())

    async def run(self, prepared: PreparedCompile) -> BackendOutput:
        """Compile on a worker; see the module's doc for what happens on faults."""
        key = pch_key(prepared)
        ahead = None if key is None else self._ahead.get(key)
        if ahead is not None:  # its PCH is being made ahead: faster to wait than make one
            with anyio.move_on_after(AHEAD_WAIT):
                await ahead.wait()
        limit = None if prepared.timeout is None else prepared.timeout + KILL_GRACE
        # One job at a time may make a shared PCH (see the module's doc); a key whose
        # PCH a worker keeps as its own (not shared) goes by affinity, as without sharing.
        task_func = _compile
        making = None  # the key whose shared PCH this job may make
        if key is not None and self._share_pch and key not in self._private:
            if key in self._making:
                task_func = _compile_without_making
            else:
                making = key
                self._making.add(key)
        try:
            task = await self.pool.run(task_func, prepared, timeout=limit, affinity=key)
        finally:
            if making is not None:
                self._making.discard(making)
        if task.outcome == "done":
            out: BackendOutput = task.value
            made = (
                key is not None
                and task.pid is not None
                and self._note_pch(task.pid, key, out, skipped=task_func is _compile_without_making)
            )
            if key is not None and self.hints is not None and (made or key in self._hinted):
                # A new hint, or one whose PCH served a job: the newest now (a hint that
                # is only ever made ahead, never used, ages out).
                self._hinted.discard(key)
                await anyio.to_thread.run_sync(self._remember, prepared, key)
            return out
        if task.outcome == "timeout":
            return BackendOutput(
                "timeout", None, "", "NVRTC did not stop at the timeout; worker killed"
            )
        if task.outcome == "start_failed":
            return BackendOutput(
                "crashed", None, "", f"no NVRTC worker could be started: {task.value}"
            )
        if task.outcome == "error":
            return BackendOutput("internal", None, "", f"NVRTC worker error: {task.value!r}")
        return BackendOutput("crashed", None, "", f"{task.value} while compiling")

    def _note_pch(self, pid: int, key: str, out: BackendOutput, skipped: bool = False) -> bool:
        """Record which PCH worker ``pid`` holds after a job (retired past the bound);
        whether the job made it. ``skipped``: the job was told to make none."""
        if out.status not in ("ok", "failed"):
            return False
        made = _PCH_MADE in out.log
        if made:
            self._pch["created"] += 1
        elif _PCH_USED in out.log:
            self._pch["reused"] += 1
        else:
            self._pch["skipped" if skipped else "not_made"] += 1
            return False
        shared = self.shared_folder
        if shared is not None and names_shared(out.log, key, shared):
            self._pch["shared"] += 1
            self._shared.add(key)
        else:
            self._private.add(key)  # not published (past the bound, or refused)
            if self.pool.tag(pid, key, retire_over=MAX_PCH_PER_WORKER) == "retired":
                self._pch["retired"] += 1
        return made

    def _remember(self, prepared: PreparedCompile, key: str) -> None:
        """Blocking: a hint for the next backend on these hints (a file that cannot be
        written costs that, not the job)."""
        assert self.hints is not None
        try:
            self.hints.note(prepared, key)
        except OSError as exc:
            logger.info("asynccomp: no PCH hint written in %s: %s", self.hints.folder, exc)

    def start(self, task_group: anyio.abc.TaskGroup) -> None:
        """As the backend starts: PCHs :meth:`make_pch` makes are made in
        ``task_group`` (it lives until the backend closes), not in the asking task."""
        self._task_group = task_group

    async def start_ahead(self, task_group: anyio.abc.TaskGroup) -> None:
        """Read the hints (:mod:`._nvrtc_pch_hints`) and start making the newest ones'
        PCHs again in ``task_group``, one worker each; until each is made, a job that
        needs it waits for it (at most :data:`AHEAD_WAIT` seconds) instead of making
        one of its own. Never raises: a PCH not made ahead is made by the first job
        that needs it, as without hints."""
        if self.hints is None:
            return
        try:
            jobs = await anyio.to_thread.run_sync(self.hints.ahead)
        except OSError as exc:
            logger.info("asynccomp: PCH hints in %s not read: %s", self.hints.folder, exc)
            return
        for job in jobs:
            key = pch_key(job)
            if key is not None and key not in self._ahead:
                # Only workers that share a PCH gain by waiting for another's.
                if self._share_pch:
                    self._ahead[key] = anyio.Event()
                task_group.start_soon(self._make_ahead, job, key)

    async def make_pch(self, prepared: PreparedCompile) -> bool:
        """Make the shared PCH ``prepared`` needs (its options and header prefix, with an
        empty kernel: :func:`~._nvrtc_pch_hints.ahead_compile`) now, in one worker, as
        from a hint; until it is made, a job that needs it waits for it (at most
        :data:`AHEAD_WAIT` seconds) instead of compiling without one. Whether the workers
        share that PCH when this returns: ``False`` for a job without ``-pch``, workers
        that do not share (spawned), a PCH a job is making now (it will be shared) or one
        that workers keep as their own (not shared: past the bound, refused), and a
        prefix that does not compile (logged). A second call while one makes it waits
        for that one."""
        key = pch_key(prepared)
        if key is None or not self._share_pch or key in self._making or key in self._private:
            await anyio.lowlevel.checkpoint()
            return False
        waiting = self._ahead.get(key)
        if waiting is None and key not in self._shared:
            self._ahead[key] = waiting = anyio.Event()
            if self._task_group is None:
                await self._make_ahead(ahead_compile(prepared), key)
            else:
                self._task_group.start_soon(self._make_ahead, ahead_compile(prepared), key)
        if waiting is None:
            await anyio.lowlevel.checkpoint()
        else:
            await waiting.wait()
        return key in self._shared

    async def _make_ahead(self, prepared: PreparedCompile, key: str) -> None:
        """Make the PCH ``key`` from ``prepared`` (a prefix and an empty kernel); whoever
        made ``self._ahead[key]`` is told once it ends. Never raises: a PCH not made
        ahead is made by the first job that needs it."""
        try:
            task = await self.pool.run(_compile, prepared, timeout=AHEAD_TIMEOUT, affinity=key)
            out = task.value if task.outcome == "done" else None
            if not isinstance(out, BackendOutput) or task.pid is None:
                logger.info("asynccomp: a PCH was not made ahead (%s)", task.outcome)
            elif self._note_pch(task.pid, key, out):
                self._pch["ahead"] += 1
                self._hinted.add(key)
            elif out.status != "ok":  # else a job made it first, or NVRTC would make none
                logger.info("asynccomp: a PCH was not made ahead: %s", out.message)
                if out.status == "failed" and self.hints is not None:  # it will not compile
                    await anyio.to_thread.run_sync(self.hints.forget, key)
        except Exception:  # never the engine's task group's failure
            logger.exception("asynccomp: a PCH was not made ahead")
        finally:
            waiting = self._ahead.pop(key, None)
            if waiting is not None:
                waiting.set()

    async def aclose(self) -> None:
        if self._pool is not None:
            await anyio.to_thread.run_sync(self._pool.close)
        # Again at close: an engine that started no worker after one was killed (a
        # compile server restarted, then serving cache hits only) left that one's
        # folders, precompiled headers of hundreds of MB, for whoever came next.
        with anyio.CancelScope(shield=True):
            root = self._root or await anyio.to_thread.run_sync(existing_worker_folders_root)
            if root is not None and self._shared_name is not None:
                await anyio.to_thread.run_sync(_remove, root / self._shared_name)
            if root is not None:
                await anyio.to_thread.run_sync(_sweep, root)


def _remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def _sweep(root: Path) -> None:
    """Blocking: remove the folders of engines that are no longer running."""
    swept = sweep_worker_folders(root)
    if swept:
        logger.info("asynccomp: removed %d stale NVRTC worker folders", len(swept))
